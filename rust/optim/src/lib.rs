//! Trajectory optimisation and regulation on the exact derivatives of vidyn's variational
//! integrators (issue 6).
//!
//! * [`lqr()`]: the time-varying finite-horizon Riccati recursion (symmetrised), steady-state
//!   [`dlqr`] for an equilibrium, the tracking controller `u = u_ref − K (x − x_ref)` and
//!   closed-loop rollouts with the VI step (Johnson 2012, App. B.2.2; digest §4.3, §4.7).
//! * [`ilqr()`]: iLQR with Levenberg–Marquardt regularisation on `Q_uu`, a backtracking line
//!   search, box control limits (projected-Newton box QP, Tassa et al. 2014) and a
//!   convergence report; each trial's linearisation and cost derivatives are computed step
//!   by step on the pool's other threads while the trial is simulated (all steps in parallel,
//!   bit-for-bit those of the batch engine's [`vidyn_batch::linearize`]).
//! * [`Dynamics`]: the interface both work on — [`SystemDynamics`] (any
//!   `vidyn_system::DiscreteDynamics` system; [`MaximalDynamics`] is it on the maximal
//!   integrator's joint coordinates), [`ViDynamics`] (a VI, `x = (q, p)` or, with
//!   [`ViDynamics::with_velocity_state`], `x = (q, v)`) or [`LinearDynamics`]; controls on a
//!   chosen set of actuated joints ([`Actuation`], one map for every integrator).
//!
//! * [`projection_optimize`]: Johnson's discrete projection-operator method (Ch. 6): DLQR
//!   projection, steepest / quasi-Newton / Newton descent directions from a time-varying LQ
//!   problem, Armijo search with the projection-success check.
//! * [`PointCost`]: frame origins and the centre of mass tracking targets that may change from
//!   stage to stage (reaching, swing feet, centre-of-mass references) on top of any other
//!   cost, exact gradient and Gauss–Newton Hessian from the point's Jacobian.
//!
//! Full DDP ([`Method::Ddp`]) and the Newton model need [`Dynamics::second_order_contracted`];
//! [`ViDynamics`] provides it from the VI's exact λ-contracted second derivatives, contact
//! phases included (except with kinematic joints or body wrenches, where it reports
//! [`OptimError::NotImplemented`]).

pub mod actuation;
pub mod boxqp;
mod cancellable;
mod checks;
pub mod contact_force_cost;
pub mod cost;
mod dense_kernels;
pub mod dynamics;
pub mod error;
pub mod fddp;
pub mod hinge;
pub mod ilqr;
pub mod linear_dynamics;
pub mod lqr;
pub mod maximal_dynamics;
mod newton_start;
mod pipeline;
pub mod point_cost;
pub mod projection;
pub mod state_space;
pub mod system_dynamics;
pub mod tracking_cost;
mod velocity_state;
pub mod vi_dynamics;

pub use actuation::Actuation;
pub use cancellable::Cancellable;
pub use contact_force_cost::{ContactForceCost, FrictionCone};
pub use cost::{total_cost, Cost, QuadraticCost, StageDerivatives, VelocityCost};
pub use dynamics::{rollout_open_loop, Dynamics, Jacobians, Nominal, NominalScratch, Policy, SecondOrder};
pub use error::{OptimError, Result};
pub use fddp::{fddp, FDDP_XREG};
pub use hinge::Hinges;
pub use ilqr::{ilqr, IlqrOptions, IlqrResult, IlqrStatus, IterationLog, Method};
pub use linear_dynamics::LinearDynamics;
pub use lqr::{closed_loop_rollout, dlqr, lqr, riccati_step, tracking_lqr, LqrSolution, TrackingController};
pub use maximal_dynamics::MaximalDynamics;
pub use point_cost::{PointCost, PointTrack, TrackedPoint};
pub use projection::{
    lq_descent, lq_model, newton_adjoint, project, project_tangent, projection_gains, projection_optimize, DescentModel, LqModel, ProjectionLog,
    ProjectionOptions, ProjectionResult, ProjectionStatus,
};
pub use state_space::StateSpace;
pub use system_dynamics::SystemDynamics;
pub use tracking_cost::{FrictionCones, TrackingCost};
pub use vi_dynamics::ViDynamics;
