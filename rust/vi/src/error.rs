//! Errors of the variational integrators.

use thiserror::Error;

/// Everything that can go wrong setting up or running a variational integrator.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ViError {
    /// An error of the underlying model or inputs (shapes, NaN, …).
    #[error(transparent)]
    Model(#[from] vidyn_rbd::RbdError),
    /// A joint kind the integrator does not support.
    #[error("joint '{joint}' is {kind}: the minimal-coordinate variational integrator supports revolute and prismatic joints only (build spherical / floating joints as chains of 1-dof joints)")]
    UnsupportedJoint { joint: String, kind: &'static str },
    /// A bad scheme name or order.
    #[error("invalid scheme: {0}")]
    InvalidScheme(String),
    /// A bad integrator parameter (time step, tolerance, …).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// Newton's method did not converge on the discrete Euler–Lagrange equations.
    #[error("Newton's method did not converge at step {step}: residual {residual:e} after {iterations} iterations (tolerance {tolerance:e}); try a smaller time step")]
    NewtonDiverged { step: usize, iterations: usize, residual: f64, tolerance: f64 },
    /// The DEL Jacobian is singular (e.g. a massless subtree).
    #[error("the discrete Euler–Lagrange Jacobian is singular at step {step} (massless subtree or degenerate configuration)")]
    SingularJacobian { step: usize },
    /// The constraint Jacobians make the step's KKT system singular (redundant constraints,
    /// or a configuration where they lose rank).
    #[error("the holonomic constraints are redundant or degenerate at step {step}: Dh(q_(k+1)) J⁻¹ Dh(q_k)ᵀ is singular")]
    DegenerateConstraints { step: usize },
}

pub type Result<T> = std::result::Result<T, ViError>;
