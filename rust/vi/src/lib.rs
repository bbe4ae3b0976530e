//! Minimal-coordinate variational integrators (VIs) for kinematic trees.
//!
//! Galerkin–Lobatto discrete Lagrangians of any order (trapezoid `s = 1`, Simpson `s = 2`,
//! order `2s`; Fan, Schultz & Murphey 2018) and the midpoint rule (Johnson 2012), the discrete Euler–Lagrange equations with
//! controls, joint damping and springs and constant body wrenches (discrete Lagrange–d'Alembert),
//! their energy Hessians, a Newton solver per step and the exact linearisation of the one-step flow map
//! `(q_k, p_k, u_k) ↦ (q_{k+1}, p_{k+1})` for trajectory optimisation.
//!
//! Joints: revolute and prismatic (any axis), mimic joints among them (`q_j = m q_l + o`,
//! module `mimic_step`: the reduced DEL equations on the dense path), and free-flyer, spherical and planar joints on
//! their Lie groups (configurations in Pinocchio's layout with unit quaternions, momenta and
//! controls in the tangent space): each step runs in the chart centred at its start, where
//! they are chains of 1-dof joints (module `chart_step`); steps, rollouts, energies,
//! constraints, kinematic joints, body wrenches, the exact first-order linearisation in
//! tangent coordinates (module `chart_linearize`) and the exact second order there (module
//! `chart_second_order`, with constraints too). Fixed
//! joints are merged by
//! the model. `vidyn_rbd::to_single_dof` still gives global Z-Y-X Euler-angle coordinates
//! (with a gimbal-lock singularity at pitch ±π/2) to those who want them.
//!
//! Cost per step (n dofs, s + 1 control points): the DEL residual is O(s² n) (Fan et al.
//! Algorithm 1), each Newton iteration O(s³ n) — the exact direction `−J⁻¹ r` comes from
//! Algorithms B.1/B.2 (module `newton_direction`) without ever forming the `sn × sn` Jacobian —
//! and the exact first-order linearisation O(s² n²), by reusing that factorisation for all
//! `3n` right-hand sides. Small systems (`s·n ≤ 10` by default, [`VariationalIntegrator::with_dense_max`],
//! unconstrained) take a dense Jacobian and LU instead (module `dense_step`), which is cheaper
//! there, and robot-sized steps with constraints or charts (`s·n ≤ 28` in Newton iterations and
//! `≤ 48` in linearisations by default, [`VariationalIntegrator::with_dense_factorization_max`])
//! factor densely behind the recursion's interface; a plain dense implementation of everything is kept as a test and benchmark oracle
//! (module `reference`, with the feature `oracles`, for tests and benchmarks).

mod chart_linearize;
mod chart_second_order;
mod chart_step;
mod constrained;
mod constrained_second_order;
pub mod constraints;
mod contraction;
mod del;
mod dense;
pub(crate) mod dense_step;
mod dual;
mod energy_check;
pub mod error;
mod hessians;
mod integrator;
mod mimic_step;
mod momentum_projection;
pub(crate) mod newton_direction;
mod point;
mod point_mass_solve;
mod predictor;
#[cfg(any(test, feature = "oracles"))]
pub mod reference;
mod rows_hessian;
mod schedule;
pub mod scheme;
mod second_order;
mod solved;
mod state;
mod system;
mod trajectory;

pub use constraints::{AlignedAxes, BodyPoint, Constraint, ALIGNED_WITHIN_DEGREES};
pub use del::JointForces;
pub use dense_step::{DEFAULT_DENSE_LINEARIZATION_MAX, DEFAULT_DENSE_MAX, DEFAULT_DENSE_NEWTON_MAX};
pub use energy_check::{KnotEnergy, DEFAULT_MAX_ENERGY_ERROR, GIMBAL_MARGIN};
pub use error::{Result, ViError};
pub use hessians::EnergyHessians;
pub use integrator::{VariationalIntegrator, ViWorkspace};
pub use point::PointState;
pub use predictor::Predictor;
pub use schedule::ConstraintSchedule;
pub use scheme::Scheme;
pub use second_order::{linearize_trajectory_contracted, linearize_trajectory_second_order, FlowDerivatives, SecondOrderLinearization, SecondOrderWorkspace};
pub use solved::{SolvedSteps, KEPT_BYTES};
pub use system::SystemWorkspace;
pub use trajectory::{linearize_trajectory, predict_next, rollout, trajectory_multipliers, Linearization, Trajectory, TrajectoryMultipliers};
pub use vidyn_system::StepInput;

// Tests (README, Layout, "Tests"): the public API in `tests/`, internals next to their module.
// The helpers both share, from `tests/api/common` (public API only):
#[cfg(test)]
#[path = "../tests/api/common/mod.rs"]
#[allow(dead_code)]
mod test_common;
