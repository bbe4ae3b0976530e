//! Errors of the rigid-body crate. Every variant names what was wrong and where.

use thiserror::Error;

/// Everything that can go wrong building a model or running an algorithm on it.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum RbdError {
    /// An input slice has the wrong length.
    #[error("{arg} has length {got}, expected {field} = {expected}")]
    Dimension { arg: &'static str, got: usize, expected: usize, field: &'static str },
    /// An input holds NaN or ±inf.
    #[error("{arg}[{index}] is not finite ({value})")]
    NonFinite { arg: &'static str, index: usize, value: f64 },
    /// A quaternion (or planar cos/sin pair) in `q` is not of unit norm.
    #[error("q of joint '{joint}' (q[{index}..]) has norm {norm}, expected 1 (tolerance {tol})")]
    NotNormalized { joint: String, index: usize, norm: f64, tol: f64 },
    /// A frame or joint name that the model does not have.
    #[error("unknown {what} '{name}'")]
    UnknownName { what: &'static str, name: String },
    /// A frame or body index out of range.
    #[error("{what} index {index} out of range (model has {len})")]
    IndexOutOfRange { what: &'static str, index: usize, len: usize },
    /// The model itself is inconsistent (bad parent, bad axis, non-physical inertia …).
    #[error("invalid model: {0}")]
    InvalidModel(String),
    /// A URDF document that cannot be turned into a model.
    #[error("URDF error: {0}")]
    Urdf(String),
    /// A change of coordinates is singular at this configuration (e.g. Euler angles at
    /// gimbal lock, [`crate::single_dof`]).
    #[error("joint '{joint}': {detail}")]
    Singular { joint: String, detail: String },
    /// The joint-space inertia (or an articulated-body pivot) is not positive definite.
    #[error("articulated inertia of joint '{joint}' is not positive definite (massless subtree?)")]
    NotPositiveDefinite { joint: String },
    /// A saved state (bytes of [`crate::state`]: a pickle, a file) that cannot be read:
    /// truncated, corrupted, of another kind of object, or of a newer format version.
    #[error("{0}")]
    State(String),
}

pub type Result<T> = std::result::Result<T, RbdError>;
