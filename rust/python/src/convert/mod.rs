//! Every conversion between NumPy and Rust, with its checks, in one place: copies of the
//! inputs (`read`), borrows of batch inputs and outputs (`borrowed`), results (`write`),
//! string options (`names`).
//!
//! Inputs: any object that `numpy.asarray(x, dtype=float64)` accepts. Shapes and finiteness
//! are checked here, and error messages name the argument, the expected and actual shapes,
//! and the model field (`q has shape (6,), expected (model.nq,) = (7,)`). Single calls copy
//! their inputs into Rust-owned buffers while attached to the interpreter, so the computation
//! that runs detached never reads memory that another Python thread could be writing; batch
//! calls borrow their (large) inputs read-only in place instead.
//!
//! Layout: NumPy arrays are read and written in C (row-major) order whatever their strides;
//! nalgebra matrices are column-major and are only ever indexed by `(row, col)` here.

mod borrowed;
mod names;
mod read;
mod write;

pub use borrowed::*;
pub use names::*;
pub use read::*;
pub use write::*;

use pyo3::prelude::*;

/// Python-style shape: `()`, `(6,)`, `(4, 4)`.
pub fn shape_str(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// `[3]` or `[1, 2]`: a C-order flat index as a subscript of `shape`.
pub(super) fn subscript(mut flat: usize, shape: &[usize]) -> String {
    let mut idx = vec![0; shape.len()];
    for (k, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            idx[k] = flat % n;
            flat /= n;
        }
    }
    format!("[{}]", idx.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
}

/// `v` as Python prints it (`nan`, `inf`, `-inf`, `1.5`).
pub fn float_str(v: f64) -> String {
    if v.is_nan() {
        "nan".to_string()
    } else {
        v.to_string()
    }
}

pub fn type_name(x: &Bound<'_, PyAny>) -> String {
    x.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())
}
