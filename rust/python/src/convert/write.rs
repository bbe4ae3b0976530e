//! Results: NumPy arrays from Rust data (C order), allocated fallibly.

use super::shape_str;
use crate::errors::INPUT_ERROR;
use nalgebra::{DMatrix, SMatrix, Vector3};
use numpy::ndarray::{Array2, Array3, IxDyn};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::PyMemoryError;
use pyo3::prelude::*;
use vidyn_spatial::{Motion, Se3};

/// Entry `(i, j)` of the 4×4 homogeneous matrix of `m`.
fn homogeneous(m: &Se3, i: usize, j: usize) -> f64 {
    match (i, j) {
        (0..=2, 0..=2) => m.rotation[(i, j)],
        (0..=2, _) => m.translation[i],
        (_, 3) => 1.0,
        _ => 0.0,
    }
}

pub fn vector_out<'py>(py: Python<'py>, x: &[f64]) -> Bound<'py, PyArray1<f64>> {
    PyArray1::from_slice(py, x)
}

pub fn vector3_out<'py>(py: Python<'py>, x: &Vector3<f64>) -> Bound<'py, PyArray1<f64>> {
    PyArray1::from_slice(py, x.as_slice())
}

/// A nalgebra (column-major) matrix as a C-order `(rows, cols)` array.
pub fn matrix_out<'py>(py: Python<'py>, m: &DMatrix<f64>) -> Bound<'py, PyArray2<f64>> {
    Array2::from_shape_fn(m.shape(), |(i, j)| m[(i, j)]).into_pyarray(py)
}

/// A fixed-size nalgebra (column-major) matrix as a C-order `(R, C)` array.
pub fn small_matrix_out<'py, const R: usize, const C: usize>(py: Python<'py>, m: &SMatrix<f64, R, C>) -> Bound<'py, PyArray2<f64>> {
    Array2::from_shape_fn((R, C), |(i, j)| m[(i, j)]).into_pyarray(py)
}

/// A C-order 3-index tensor as an `(n0, n1, n2)` array (a copy of its contiguous data).
pub fn tensor_out<'py>(py: Python<'py>, t: &vidyn_rbd::Tensor3) -> Bound<'py, PyArray3<f64>> {
    let [n0, n1, n2] = t.shape();
    let data = t.as_slice();
    Array3::from_shape_fn((n0, n1, n2), |(i, j, k)| data[(i * n1 + j) * n2 + k]).into_pyarray(py)
}

/// Row-major data with `cols` columns as a `(len / cols, cols)` array.
pub fn rows_out<'py>(py: Python<'py>, data: &[f64], cols: usize) -> Bound<'py, PyArray2<f64>> {
    let rows = data.len().checked_div(cols).unwrap_or(0);
    Array2::from_shape_fn((rows, cols), |(i, j)| data[i * cols + j]).into_pyarray(py)
}

/// A placement as a `(4, 4)` homogeneous matrix.
pub fn placement_out<'py>(py: Python<'py>, m: &Se3) -> Bound<'py, PyArray2<f64>> {
    Array2::from_shape_fn((4, 4), |(i, j)| homogeneous(m, i, j)).into_pyarray(py)
}

/// Placements as an `(n, 4, 4)` stack of homogeneous matrices.
pub fn placements_out<'py>(py: Python<'py>, ms: &[Se3]) -> Bound<'py, PyArray3<f64>> {
    Array3::from_shape_fn((ms.len(), 4, 4), |(k, i, j)| homogeneous(&ms[k], i, j)).into_pyarray(py)
}

/// Spatial motions as an `(n, 6)` array of rows `[linear; angular]`.
pub fn motions_out<'py>(py: Python<'py>, ms: &[Motion]) -> Bound<'py, PyArray2<f64>> {
    Array2::from_shape_fn((ms.len(), 6), |(k, i)| if i < 3 { ms[k].linear[i] } else { ms[k].angular[i - 3] }).into_pyarray(py)
}

/// The number of entries of an array of `shape`, or `InputError` when it does not fit in
/// memory addresses (the product overflows `usize`, or the bytes `isize`), so that no size
/// computation wraps.
pub fn entries<T>(shape: &[usize], name: &str) -> PyResult<usize> {
    shape
        .iter()
        .try_fold(1_usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| std::alloc::Layout::array::<T>(n).is_ok())
        .ok_or_else(|| INPUT_ERROR.err(format!("{name} would have shape {}: too many entries to address", shape_str(shape))))
}

/// Element types whose all-zero bit pattern is the value zero (so [`zeros`] may hand out
/// zeroed memory as values).
pub trait ZeroBits: Copy {}
impl ZeroBits for f64 {}
impl ZeroBits for i64 {}

/// `vec![0; len]` that reports a refused allocation as `MemoryError` (naming `name`) instead
/// of aborting the process. Like `vec!`, it asks the allocator for zeroed memory, which the
/// system hands out lazily.
pub fn zeros<T: ZeroBits>(len: usize, name: &str) -> PyResult<Vec<T>> {
    let too_large = || PyMemoryError::new_err(format!("cannot allocate {name}: {len} entries of {} bytes", std::mem::size_of::<T>()));
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| too_large())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `layout` has a non-zero size. The memory comes from the global allocator with
    // the layout of `len` values of `T`, all bits zero, which `ZeroBits` makes valid values;
    // `Vec` frees it with the same layout.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            return Err(too_large());
        }
        Ok(Vec::from_raw_parts(ptr, len, len))
    }
}

/// A zeroed buffer for an array of `shape` (errors as [`entries`] and [`zeros`]).
pub fn zeros_for<T: ZeroBits>(shape: &[usize], name: &str) -> PyResult<Vec<T>> {
    zeros(entries::<T>(shape, name)?, name)
}

/// `data` (C order) as an array of `shape`, handed to NumPy without a copy.
pub fn array_out<'py, T: Element>(py: Python<'py>, data: Vec<T>, shape: &[usize]) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    PyArray1::from_vec(py, data).reshape(IxDyn(shape))
}

/// A stack of `(r, c)` matrices as an `(N, r, c)` array.
pub fn matrices_out<'py>(py: Python<'py>, ms: &[DMatrix<f64>], r: usize, c: usize) -> Bound<'py, PyArray3<f64>> {
    Array3::from_shape_fn((ms.len(), r, c), |(k, i, j)| ms[k][(i, j)]).into_pyarray(py)
}
