//! Trajectory optimisation and regulation on the exact derivatives of vidyn's variational
//! integrators (issue 6).
//!
//! * [`lqr`]: the time-varying finite-horizon Riccati recursion (symmetrised), steady-state
//!   [`dlqr`] for an equilibrium, the tracking controller `u = u_ref − K (x − x_ref)` and
//!   closed-loop rollouts with the VI step (Johnson 2012, App. B.2.2; digest §4.3, §4.7).
//! * [`ilqr()`]: iLQR with Levenberg–Marquardt regularisation on `Q_uu`, a backtracking line
//!   search, box control limits (projected-Newton box QP, Tassa et al. 2014) and a
//!   convergence report; every iterate's linearisation comes from
//!   [`vidyn_vi::linearize_trajectory`] (all steps in parallel).
//! * [`Dynamics`]: the interface both work on — [`ViDynamics`] (a VI, `x = (q, p)`, controls
//!   on a chosen set of actuated joints) or [`LinearDynamics`].
//!
//! Not yet: full DDP (needs the second-order VI flow-map derivatives; [`Method::Ddp`] returns
//! [`OptimError::NotImplemented`]) and Johnson's projection-operator method (Ch. 6).

pub mod boxqp;
pub mod cost;
pub mod dynamics;
pub mod error;
pub mod ilqr;
pub mod lqr;

pub use cost::{total_cost, Cost, QuadraticCost, StageDerivatives, VelocityCost};
pub use dynamics::{rollout_open_loop, Dynamics, Jacobians, LinearDynamics, Policy, ViDynamics};
pub use error::{OptimError, Result};
pub use ilqr::{ilqr, IlqrOptions, IlqrResult, IlqrStatus, IterationLog, Method};
pub use lqr::{closed_loop_rollout, dlqr, lqr, riccati_step, tracking_lqr, LqrSolution, TrackingController};
