//! Minimal-coordinate variational integrators (VIs) for kinematic trees.
//!
//! Galerkin–Lobatto discrete Lagrangians of any order (trapezoid `s = 1`, Simpson `s = 2`,
//! order `2s`; Fan, Schultz & Murphey 2018), the discrete Euler–Lagrange equations with
//! controls, joint damping and springs (discrete Lagrange–d'Alembert), their energy Hessians,
//! a Newton solver per step and the exact linearisation of the one-step flow map
//! `(q_k, p_k, u_k) ↦ (q_{k+1}, p_{k+1})` for trajectory optimisation.
//!
//! Joints: revolute and prismatic (any axis); fixed joints are merged by the model.
//! Spherical and floating joints are rejected with [`ViError::UnsupportedJoint`].
//!
//! Status: the residual and gradients are O(n) and the linearisation O(n²) per control
//! point, but the Newton direction still forms and factors the dense `sn × sn` Jacobian
//! (O(n³)); the O(n) Newton direction of Fan et al. (Algorithms B.1/B.2) is the next step.

mod del;
mod dense;
pub mod error;
mod hessians;
mod integrator;
mod point;
pub mod scheme;
mod trajectory;

pub use del::JointForces;
pub use error::{Result, ViError};
pub use hessians::EnergyHessians;
pub use integrator::{VariationalIntegrator, ViWorkspace};
pub use point::PointState;
pub use scheme::Scheme;
pub use trajectory::{linearize_trajectory, rollout, Linearization, Trajectory};

#[cfg(test)]
mod tests;
