//! Batch inputs borrowed read-only in place (copied only when not C-contiguous float64),
//! batch outputs allocated once or given by the caller (`out=`) and borrowed for writing.

use super::{array_out, shape_str, type_name, zeros_for, ZeroBits};
use crate::errors::INPUT_ERROR;
use numpy::{Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;

/// `x` as a C-contiguous, aligned float64 array: itself when it already is one (no copy),
/// else `numpy.require(x, float64, "CA")` (a copy). Complex input is refused.
fn contiguous<'py>(x: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    if let Ok(a) = x.cast::<PyArrayDyn<f64>>() {
        // SAFETY: reading the flags field of a live array object.
        let aligned = unsafe { (*a.as_array_ptr()).fields.flags & numpy::npyffi::flags::NPY_ARRAY_ALIGNED != 0 };
        if a.is_c_contiguous() && aligned {
            return Ok(a.clone());
        }
    }
    if let Ok(a) = x.cast::<PyUntypedArray>() {
        if a.dtype().kind() == b'c' {
            return Err(INPUT_ERROR.err(format!("{name} has complex dtype {}, expected real float64 values", a.dtype())));
        }
    }
    let py = x.py();
    static REQUIRE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let converted = REQUIRE
        .import(py, "numpy", "require")?
        .call1((x, numpy::dtype::<f64>(py), "CA"))
        .map_err(|e| INPUT_ERROR.err(format!("{name} cannot be converted to a float64 array: {e}")))?;
    Ok(converted.cast_into::<PyArrayDyn<f64>>()?)
}

/// A dimension of an expected shape: a fixed size, or a size that the first array giving it
/// fixes for the others (the batch size `B`, the number of steps `N`).
#[derive(Clone, Copy)]
pub enum Dim {
    Fixed(usize),
    Batch,
    Steps(usize), // N + offset
}

/// Sizes `B` and `N` shared by the inputs of one call, fixed by the first array that has them.
#[derive(Default)]
pub struct Sizes {
    pub batch: Option<usize>,
    pub steps: Option<usize>,
}

impl Sizes {
    /// Borrows `x` read-only after checking its shape against `dims` (described to the user
    /// as `desc`, e.g. `(B, model.nq)`). Values are not checked here: NaN, inf and non-unit
    /// quaternions are per-row errors of the core.
    pub fn read<'py>(&mut self, x: &Bound<'py, PyAny>, name: &str, dims: &[Dim], desc: &str) -> PyResult<PyReadonlyArrayDyn<'py, f64>> {
        let a = contiguous(x, name)?;
        let shape = a.shape().to_vec();
        let expected: Vec<String> = dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => n.to_string(),
                Dim::Batch => self.batch.map_or_else(|| "B".to_string(), |b| b.to_string()),
                Dim::Steps(o) => self.steps.map_or_else(|| if *o == 0 { "N".to_string() } else { format!("N+{o}") }, |n| (n + o).to_string()),
            })
            .collect();
        let bad = || INPUT_ERROR.err(format!("{name} has shape {}, expected {desc} = ({})", shape_str(&shape), expected.join(", ")));
        if shape.len() != dims.len() {
            return Err(bad());
        }
        for (&got, d) in shape.iter().zip(dims) {
            match *d {
                Dim::Fixed(n) if got != n => return Err(bad()),
                Dim::Batch => match self.batch {
                    Some(b) if b != got => return Err(bad()),
                    _ => self.batch = Some(got),
                },
                Dim::Steps(o) => match self.steps {
                    Some(n) if n + o != got => return Err(bad()),
                    None if got < o => return Err(bad()),
                    None => self.steps = Some(got - o),
                    _ => {}
                },
                Dim::Fixed(_) => {}
            }
        }
        a.try_readonly().map_err(|e| INPUT_ERROR.err(format!("{name} cannot be read: {e}")))
    }
}

pub fn slice<'a>(a: &'a PyReadonlyArrayDyn<'_, f64>) -> PyResult<&'a [f64]> {
    a.as_slice().map_err(|e| INPUT_ERROR.err(format!("an input array cannot be read in place: {e}")))
}

/// The `out=` argument of a batched call: `None`, one array (functions with one result) or a
/// tuple/list with one array (or `None`) per result. Given arrays must have the result's
/// dtype and exact shape and be C-contiguous, aligned and writeable; they are filled in place
/// and returned (so a loop can reuse its buffers: no allocation per call).
pub struct OutArg<'py> {
    items: Vec<Option<Bound<'py, PyAny>>>,
}

impl<'py> OutArg<'py> {
    pub fn new(out: Option<&Bound<'py, PyAny>>, count: usize) -> PyResult<Self> {
        let Some(out) = out.filter(|o| !o.is_none()) else {
            return Ok(Self { items: vec![None; count] });
        };
        let seq =
            out.cast::<pyo3::types::PyTuple>().map(|t| t.iter().collect::<Vec<_>>()).or_else(|_| out.cast::<PyList>().map(|l| l.iter().collect::<Vec<_>>()));
        let items: Vec<Bound<'py, PyAny>> = match seq {
            Ok(items) => items,
            Err(_) if count == 1 => vec![out.clone()],
            Err(_) => return Err(INPUT_ERROR.err(format!("out must be a tuple of {count} arrays (or None)"))),
        };
        if items.len() != count {
            return Err(INPUT_ERROR.err(format!("out has {} entries, expected {count} (one array or None per result)", items.len())));
        }
        Ok(Self { items: items.into_iter().map(|x| (!x.is_none()).then_some(x)).collect() })
    }

    /// Result `i`: the given array after its checks, or a new C-order array whose buffer is
    /// a zeroed Rust `Vec` handed to NumPy without a copy — the allocation a Rust caller of
    /// the engine makes (lazily zeroed pages from the system allocator), where `numpy.zeros`
    /// or `numpy.empty` would add NumPy's own huge-page policy (measured +19 % on the 88 MB
    /// of a one-thread `linearize`; BENCHMARKS.md).
    pub fn array<T: Element + ZeroBits>(&self, py: Python<'py>, i: usize, shape: &[usize]) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
        let name = if self.items.len() == 1 { "out".to_string() } else { format!("out[{i}]") };
        let Some(x) = &self.items[i] else {
            return array_out(py, zeros_for::<T>(shape, &format!("result {i} of shape {}", shape_str(shape)))?, shape);
        };
        let a = x
            .cast::<PyArrayDyn<T>>()
            .map_err(|_| INPUT_ERROR.err(format!("{name} must be a NumPy array of dtype {}, got {}", numpy::dtype::<T>(py), type_name(x))))?;
        if a.shape() != shape {
            return Err(INPUT_ERROR.err(format!("{name} has shape {}, expected {}", shape_str(a.shape()), shape_str(shape))));
        }
        if !a.is_c_contiguous() {
            return Err(INPUT_ERROR.err(format!("{name} must be C-contiguous")));
        }
        Ok(a.clone())
    }
}

/// Borrows an output array for writing (refused when it is not writeable, or when it overlaps
/// an input or another output, which are borrowed too).
pub fn writable<'py, T: Element>(a: &Bound<'py, PyArrayDyn<T>>) -> PyResult<PyReadwriteArrayDyn<'py, T>> {
    a.try_readwrite().map_err(|e| INPUT_ERROR.err(format!("an out array cannot be written (read-only, or it overlaps an input or another output): {e}")))
}

/// The data of a borrowed output.
pub fn data<'a, T: Element>(w: &'a mut PyReadwriteArrayDyn<'_, T>) -> PyResult<&'a mut [T]> {
    w.as_slice_mut().map_err(|e| INPUT_ERROR.err(format!("an out array cannot be written in place (unaligned?): {e}")))
}
