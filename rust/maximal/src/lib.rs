//! Maximal-coordinate variational integrator (Brüdigam & Manchester 2020; Brüdigam, Sosnowski,
//! Manchester & Hirche 2023) with a graph-based sparse block solver.
//!
//! Every body is a free rigid body in SE(3) (centre of mass, unit quaternion, linear velocity in
//! the world, angular velocity in the body frame); joints and loop closures are equality
//! constraints with Lagrange multipliers, enforced at position level at the next knot, so the
//! constraints never drift. Each step is one Newton solve whose matrix has the block pattern of
//! the mechanism graph; it is factorised by block LDU in a leaves-first order (O(n) on trees,
//! no fill-in) — see [`graph`].
//!
//! Modules: [`body`] (poses, the unit-quaternion knot update), [`constraint`] (joint
//! primitives and their Jacobians), [`mechanism`] (bodies and joints from a `vidyn_rbd::Model`,
//! loop closures, joint forces), [`integrator`] (the DEL step and its Newton solve),
//! [`contact`] (contacts with friction and joint limits by a primal-dual interior point),
//! [`body_contact`] (contacts between two bodies' shapes, signed distances in [`geometry`]),
//! [`linearize`] (exact implicit-function-theorem linearisation, maximal and minimal
//! coordinates), [`trajectory`] (rollouts, parallel linearisation), [`system`] (the
//! `vidyn_system::DiscreteDynamics` implementation), [`joint_coordinates`] (the same system
//! seen in joint coordinates, for the optimisers), [`models`] (test and benchmark mechanisms).
//!
//! Conventions (beyond the workspace's `[linear; angular]` and `Se3` child→parent): rotations
//! are perturbed on the right with the full angle, `q ⊗ exp(δθ/2)`, so rotational multipliers,
//! residuals and Jacobians are physical torques, half the papers' half-angle values.

pub mod body;
pub mod body_contact;
pub mod constraint;
pub mod contact;
pub mod error;
pub mod friction_cone;
pub mod geometry;
pub mod graph;
pub mod integrator;
pub mod joint_coordinates;
pub mod linearize;
pub mod mechanism;
pub mod models;
pub mod system;
pub mod trajectory;

pub use body::{Body, BodyState, Pose};
pub use constraint::{Constraint, JointKind};
pub use contact::{Plane, Sphere};
pub use error::{MaximalError, Result};
pub use friction_cone::FrictionModel;
pub use geometry::Shape;
pub use integrator::{MaximalIntegrator, MaximalWorkspace, StepStats};
pub use joint_coordinates::{JointCoordinates, JointCoordinatesWorkspace};
pub use mechanism::{Mechanism, MechanismJoint};
pub use system::SystemWorkspace;
pub use trajectory::{linearize_trajectory, rollout, rollout_minimal, LinearizationOut, MaximalTrajectory};
pub use vidyn_system::StepInput;

// Tests (README, Layout, "Tests"): the public API in `tests/`, internals next to their module.
// The helpers both share, from `tests/api/common` (public API only):
#[cfg(test)]
#[path = "../tests/api/common/mod.rs"]
#[allow(dead_code)]
mod test_common;
