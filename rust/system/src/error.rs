//! Errors of the batch engine: a row's own error (from the system it runs), or what the
//! engine itself reports for a row or a whole call.

use thiserror::Error;

/// What went wrong for one row (or, for [`BatchError::Shape`], for the whole call).
/// `E` is the error type of the system the row ran (`RbdError`, `ViError`, …).
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum BatchError<E> {
    /// The system's own error for this row (NaN input, non-unit quaternion, Newton failure …).
    #[error("{0}")]
    Core(E),
    /// The system does not implement the requested method (e.g. second-order terms).
    #[error("{system} does not implement {method}")]
    Unsupported { system: &'static str, method: &'static str },
    /// An entry of this row's input is NaN or infinite (for inputs the engine reads itself,
    /// such as the initial states of a rollout; the system checks the others).
    #[error("{arg}[{index}] is not finite ({value})")]
    NonFinite { arg: &'static str, index: usize, value: f64 },
    /// The batch was cancelled before this row finished; its outputs are unspecified.
    #[error("cancelled before this row finished")]
    Cancelled,
    /// A bug: the computation of this row panicked (the other rows are unaffected).
    #[error("internal error while computing this row (please report): {0}")]
    Panicked(String),
    /// Inconsistent buffer lengths for the whole call (never a per-row error).
    #[error("{0}")]
    Shape(String),
}

impl<E> BatchError<E> {
    /// The system's own error (`Ok`), or what the engine reports itself (`Err`, as an error
    /// that carries no system error).
    ///
    /// # Errors
    /// When it is the engine's.
    pub fn split(self) -> Result<E, BatchError<std::convert::Infallible>> {
        Err(match self {
            Self::Core(e) => return Ok(e),
            Self::Unsupported { system, method } => BatchError::Unsupported { system, method },
            Self::NonFinite { arg, index, value } => BatchError::NonFinite { arg, index, value },
            Self::Cancelled => BatchError::Cancelled,
            Self::Panicked(m) => BatchError::Panicked(m),
            Self::Shape(m) => BatchError::Shape(m),
        })
    }
}

impl<E> From<E> for BatchError<E> {
    fn from(e: E) -> Self {
        Self::Core(e)
    }
}

/// The failed rows of a batch, in increasing row order, each with its error.
pub type Failures<E> = Vec<(usize, BatchError<E>)>;

/// Checks that `len` is `rows · stride` for a buffer called `name`.
pub fn check_len<E>(name: &str, len: usize, rows: usize, stride: usize, shape: &str) -> Result<(), BatchError<E>> {
    if len == rows * stride {
        Ok(())
    } else {
        Err(BatchError::Shape(format!("{name} has {len} entries, expected {shape} = {rows}·{stride} = {}", rows * stride)))
    }
}

/// Checks that every entry of `x`, a row of the input `arg`, is finite.
pub fn check_finite<E>(x: &[f64], arg: &'static str) -> Result<(), BatchError<E>> {
    match x.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(BatchError::NonFinite { arg, index, value: x[index] }),
        None => Ok(()),
    }
}
