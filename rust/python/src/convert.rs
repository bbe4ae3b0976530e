//! Every conversion between NumPy and Rust, with its checks, in one place.
//!
//! Inputs: any object that `numpy.asarray(x, dtype=float64)` accepts. Shapes and finiteness
//! are checked here, and error messages name the argument, the expected and actual shapes,
//! and the model field (`q has shape (6,), expected (model.nq,) = (7,)`). Inputs are copied
//! into Rust-owned buffers while attached to the interpreter, so the computation that runs
//! detached never reads memory that another Python thread could be writing.
//!
//! Layout: NumPy arrays are read and written in C (row-major) order whatever their strides;
//! nalgebra matrices are column-major and are only ever indexed by `(row, col)` here.

use crate::errors::INPUT_ERROR;
use nalgebra::{DMatrix, Matrix3, Vector3};
use numpy::ndarray::{Array2, Array3, IxDyn};
use numpy::{Element, IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyInt};
use vidyn_rbd::Model;
use vidyn_spatial::{Force, Motion, Se3};

/// Tolerance on `max |RᵀR − I|` and `|det R − 1|` of a placement's rotation (the core's).
pub const ROTATION_TOL: f64 = 1e-9;

/// Python-style shape: `()`, `(6,)`, `(4, 4)`.
pub fn shape_str(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// `[3]` or `[1, 2]`: a C-order flat index as a subscript of `shape`.
fn subscript(mut flat: usize, shape: &[usize]) -> String {
    let mut idx = vec![0; shape.len()];
    for (k, &n) in shape.iter().enumerate().rev() {
        if n > 0 {
            idx[k] = flat % n;
            flat /= n;
        }
    }
    format!("[{}]", idx.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
}

/// `x` as a float64 NumPy array: itself when it already is one, else `numpy.asarray(x, dtype=float64)`.
fn as_array<'py>(x: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
    if let Ok(a) = x.cast::<PyArrayDyn<f64>>() {
        return Ok(a.clone());
    }
    let py = x.py();
    if let Ok(a) = x.cast::<PyUntypedArray>() {
        if a.dtype().kind() == b'c' {
            return Err(INPUT_ERROR.err(format!("{name} has complex dtype {}, expected real float64 values", a.dtype())));
        }
    }
    static ASARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let converted = ASARRAY
        .import(py, "numpy", "asarray")?
        .call1((x, numpy::dtype::<f64>(py)))
        .map_err(|e| INPUT_ERROR.err(format!("{name} cannot be converted to a float64 array: {e}")))?;
    Ok(converted.cast_into::<PyArrayDyn<f64>>()?)
}

/// The number of dimensions of `x` as a float64 array.
pub fn ndim(x: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    Ok(as_array(x, name)?.ndim())
}

/// The entries of `x` in C order after checking its shape against `expected` and that
/// every entry is finite. `expected_desc`, when given, describes the expected shape in
/// terms of the model (`(model.nq,)`).
pub fn read(x: &Bound<'_, PyAny>, name: &str, expected: &[usize], expected_desc: Option<&str>) -> PyResult<Vec<f64>> {
    let a = as_array(x, name)?;
    if a.shape() != expected {
        let want = match expected_desc {
            Some(desc) => format!("{desc} = {}", shape_str(expected)),
            None => shape_str(expected),
        };
        return Err(INPUT_ERROR.err(format!("{name} has shape {}, expected {want}", shape_str(a.shape()))));
    }
    let a = a.try_readonly().map_err(|e| INPUT_ERROR.err(format!("{name} cannot be read: {e}")))?;
    // `as_slice` also accepts Fortran-contiguous arrays (their memory order is not C order),
    // so it is taken only for C-contiguous ones; every other layout is read element by
    // element in logical (C) order.
    let data: Vec<f64> = match a.as_slice() {
        Ok(s) if a.is_c_contiguous() => s.to_vec(),
        _ => a.as_array().iter().copied().collect(),
    };
    if let Some((k, v)) = data.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(INPUT_ERROR.err(format!("{name}{} is not finite ({})", subscript(k, expected), float_str(*v))));
    }
    Ok(data)
}

/// A 2-D array with `ncols` columns and any number of rows: `(entries in C order, rows)`.
/// `desc` is its shape in words, `(N+1, n)`, and `cols` the name of `ncols` in it.
pub fn read_rows(x: &Bound<'_, PyAny>, name: &str, ncols: usize, desc: &str, cols: &str) -> PyResult<(Vec<f64>, usize)> {
    let shape = as_array(x, name)?.shape().to_vec();
    let rows = match shape.as_slice() {
        [rows, c] if *c == ncols => *rows,
        _ => return Err(INPUT_ERROR.err(format!("{name} has shape {}, expected {desc} with {cols} = {ncols}", shape_str(&shape)))),
    };
    Ok((read(x, name, &[rows, ncols], None)?, rows))
}

/// A configuration `(model.nq,)`. Unit quaternions are checked by the core.
pub fn configuration(x: &Bound<'_, PyAny>, name: &str, model: &Model) -> PyResult<Vec<f64>> {
    read(x, name, &[model.nq], Some("(model.nq,)"))
}

/// A tangent vector (velocity, acceleration, torque) `(model.nv,)`.
pub fn tangent(x: &Bound<'_, PyAny>, name: &str, model: &Model) -> PyResult<Vec<f64>> {
    read(x, name, &[model.nv], Some("(model.nv,)"))
}

/// A tangent vector, or zeros when `x` is `None`.
pub fn tangent_or_zero(x: Option<&Bound<'_, PyAny>>, name: &str, model: &Model) -> PyResult<Vec<f64>> {
    match x {
        Some(x) if !x.is_none() => tangent(x, name, model),
        _ => Ok(vec![0.0; model.nv]),
    }
}

/// Optional per-body external wrenches `(model.nbodies, 6)`, rows `[linear; angular]` (body
/// frames); `None` (or a missing argument) gives `None`.
pub fn forces(x: Option<&Bound<'_, PyAny>>, name: &str, model: &Model) -> PyResult<Option<Vec<Force>>> {
    let Some(x) = x.filter(|x| !x.is_none()) else {
        return Ok(None);
    };
    let n = model.nbodies();
    let data = read(x, name, &[n, 6], Some("(model.nbodies, 6)"))?;
    Ok(Some(data.chunks_exact(6).map(|r| Force::new(Vector3::new(r[0], r[1], r[2]), Vector3::new(r[3], r[4], r[5]))).collect()))
}

pub fn vector3(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vector3<f64>> {
    Ok(Vector3::from_column_slice(&read(x, name, &[3], None)?))
}

pub fn matrix3(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Matrix3<f64>> {
    Ok(Matrix3::from_row_slice(&read(x, name, &[3, 3], None)?))
}

/// A 4×4 homogeneous transform `[[R, p], [0, 0, 0, 1]]` with `R` a rotation.
pub fn placement(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Se3> {
    let h = read(x, name, &[4, 4], None)?;
    let bottom = &h[12..16];
    if bottom != [0.0, 0.0, 0.0, 1.0] {
        return Err(INPUT_ERROR.err(format!("{name}[3, :] is {bottom:?}, expected [0, 0, 0, 1] (homogeneous transform)")));
    }
    let r = Matrix3::new(h[0], h[1], h[2], h[4], h[5], h[6], h[8], h[9], h[10]);
    let orth = (r.transpose() * r - Matrix3::identity()).abs().max();
    let det = r.determinant();
    if orth > ROTATION_TOL || (det - 1.0).abs() > ROTATION_TOL {
        return Err(INPUT_ERROR.err(format!("{name}[:3, :3] is not a rotation matrix: max|RᵀR − I| = {orth:.3e}, det R = {det} (tolerance {ROTATION_TOL:e})")));
    }
    Ok(Se3::new(r, Vector3::new(h[3], h[7], h[11])))
}

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

/// `v` as Python prints it (`nan`, `inf`, `-inf`, `1.5`).
pub fn float_str(v: f64) -> String {
    if v.is_nan() {
        "nan".to_string()
    } else {
        v.to_string()
    }
}

/// A non-negative integer (index, count, seed …) that fits in `usize`: `TypeError` for
/// what is not an int (bools included), `InputError` naming the value for an int out of
/// range.
pub fn index(x: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    if x.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!("{name} must be an int, got bool")));
    }
    match x.extract::<i128>() {
        Ok(i) => non_negative(i, name),
        Err(_) if x.is_instance_of::<PyInt>() => Err(INPUT_ERROR.err(format!("{name} must be a non-negative int below 2**{}, got {x}", usize::BITS))),
        Err(_) => Err(PyTypeError::new_err(format!("{name} must be an int, got {}", type_name(x)))),
    }
}

/// `i` as a `usize`, or InputError naming `name`.
pub fn non_negative(i: i128, name: &str) -> PyResult<usize> {
    usize::try_from(i).map_err(|_| {
        let what = if i < 0 { String::new() } else { format!(" below 2**{}", usize::BITS) };
        INPUT_ERROR.err(format!("{name} must be a non-negative int{what}, got {i}"))
    })
}

pub fn type_name(x: &Bound<'_, PyAny>) -> String {
    x.get_type().name().map_or_else(|_| "?".to_string(), |n| n.to_string())
}
