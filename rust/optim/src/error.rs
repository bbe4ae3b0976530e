//! Errors of the optimisers.

use thiserror::Error;
use vidyn_vi::ViError;

/// Everything that can go wrong in an LQR / iLQR call.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum OptimError {
    /// The dynamics failed (e.g. the variational integrator's Newton solve did not converge
    /// on the initial rollout, or the model rejected an input).
    #[error(transparent)]
    Dynamics(#[from] ViError),
    /// Inconsistent shapes, non-finite entries, bad options.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A matrix that must be positive definite is not (`R + BᵀPB` in a Riccati step).
    #[error("{0}")]
    NotPositiveDefinite(String),
    /// An iteration that must converge did not (steady-state DLQR).
    #[error("{0}")]
    NotConverged(String),
    /// A requested feature that does not exist yet (full DDP).
    #[error("not implemented: {0}")]
    NotImplemented(String),
    /// The caller cancelled the run ([`crate::Cancellable`]).
    #[error("cancelled")]
    Cancelled,
}

pub type Result<T> = std::result::Result<T, OptimError>;
