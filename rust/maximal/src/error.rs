//! Errors of the maximal-coordinate integrator.

use thiserror::Error;

/// Everything that can go wrong building a mechanism or stepping it.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum MaximalError {
    /// An error of the underlying minimal-coordinate model or its inputs.
    #[error(transparent)]
    Model(#[from] vidyn_rbd::RbdError),
    /// The mechanism is inconsistent (bad body index, non-physical inertia, bad axis …).
    #[error("invalid mechanism: {0}")]
    InvalidMechanism(String),
    /// A bad integrator parameter or input (time step, tolerance, shapes, NaN …).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// A pivot block of the graph solver is singular: the node named cannot be eliminated.
    /// For a joint this usually means redundant constraints (e.g. a planar loop closed with
    /// a joint that also constrains out-of-plane motion); for a body, a singular inertia.
    #[error("singular pivot at {node} (step {step}): {hint}")]
    SingularPivot { node: String, step: usize, hint: &'static str },
    /// A body's discrete angular velocity reached `2/Δt`, beyond which the unit-quaternion
    /// update has no real solution.
    #[error("body '{body}' spins at |ω| = {omega:e} rad/s at step {step}, at or beyond the limit 2/Δt = {limit:e}; use a smaller time step")]
    AngularVelocityTooLarge { body: String, step: usize, omega: f64, limit: f64 },
    /// Newton's method did not converge.
    #[error("Newton's method did not converge at step {step}: residual {residual:e} after {iterations} iterations (tolerance {tolerance:e})")]
    NewtonDiverged { step: usize, iterations: usize, residual: f64, tolerance: f64 },
    /// An output too large to allocate (its size overflows, or the system refuses it).
    #[error("cannot allocate {what} for {steps} steps: not enough memory")]
    TooLarge { what: &'static str, steps: usize },
    /// The caller cancelled the computation (its `vidyn_system::Control`).
    #[error("cancelled at step {step}")]
    Cancelled { step: usize },
    /// A feature that is specified but not implemented yet.
    #[error("not yet implemented: {0}")]
    NotYet(&'static str),
}

pub type Result<T> = std::result::Result<T, MaximalError>;
