//! Inputs copied into Rust-owned buffers, checked.

use super::{float_str, shape_str, subscript, type_name};
use crate::errors::INPUT_ERROR;
use nalgebra::{DMatrix, Matrix3, Vector3, Vector6};
use numpy::{PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyInt};
use vidyn_rbd::Model;
use vidyn_spatial::{Force, Se3};

/// Tolerance on `max |RᵀR − I|` and `|det R − 1|` of a placement's rotation (the core's).
pub const ROTATION_TOL: f64 = 1e-9;

/// `x` as a float64 NumPy array: itself when it already is one, else `numpy.asarray(x, dtype=float64)`.
pub(super) fn as_array<'py>(x: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
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

/// The shape of `x` as a float64 array.
pub fn shape(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<usize>> {
    Ok(as_array(x, name)?.shape().to_vec())
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

/// A 2-D array of flags (booleans, or numbers 0 and 1) with `ncols` columns, as [`read_rows`]:
/// `(flags in C order, rows)`.
pub fn flag_rows(x: &Bound<'_, PyAny>, name: &str, ncols: usize, desc: &str, cols: &str) -> PyResult<(Vec<bool>, usize)> {
    let (data, rows) = read_rows(x, name, ncols, desc, cols)?;
    if let Some((k, v)) = data.iter().enumerate().find(|(_, v)| **v != 0.0 && **v != 1.0) {
        return Err(INPUT_ERROR.err(format!("{name}{} is {}, expected a flag (True/False or 1/0)", subscript(k, &[rows, ncols]), float_str(*v))));
    }
    Ok((data.into_iter().map(|v| v == 1.0).collect(), rows))
}

/// The controls of a rollout: `u` `(N, ncols)` (described as `desc`, e.g. `(N, n)`, with
/// `cols` the name of `ncols`), or `steps` alone (`None` controls, `N = steps`), or both when
/// they agree. Returns `(controls, N)`.
pub fn controls(u: Option<&Bound<'_, PyAny>>, steps: Option<&Bound<'_, PyAny>>, ncols: usize, desc: &str, cols: &str) -> PyResult<(Option<Vec<f64>>, usize)> {
    let steps = steps.filter(|s| !s.is_none()).map(|s| index(s, "steps")).transpose()?;
    match (u.filter(|x| !x.is_none()), steps) {
        (Some(u), steps) => {
            let (data, rows) = read_rows(u, "u", ncols, desc, cols)?;
            match steps {
                Some(steps) if steps != rows => Err(INPUT_ERROR.err(format!("u has {rows} rows but steps = {steps}"))),
                _ => Ok((Some(data), rows)),
            }
        }
        (None, Some(steps)) => Ok((None, steps)),
        (None, None) => Err(INPUT_ERROR.err(format!("give the controls u {desc} or the number of steps"))),
    }
}

/// A configuration `(model.nq,)`. Unit quaternions are checked by the core.
pub fn configuration(x: &Bound<'_, PyAny>, name: &str, model: &Model) -> PyResult<Vec<f64>> {
    read(x, name, &[model.nq], Some("(model.nq,)"))
}

/// A tangent vector (velocity, acceleration, torque) `(model.nv,)`.
pub fn tangent(x: &Bound<'_, PyAny>, name: &str, model: &Model) -> PyResult<Vec<f64>> {
    read(x, name, &[model.nv], Some("(model.nv,)"))
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

/// A 6-vector `(6,)`, e.g. a spatial motion or force `[linear; angular]`.
pub fn vector6(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vector6<f64>> {
    Ok(Vector6::from_column_slice(&read(x, name, &[6], None)?))
}

/// `r` unchanged if it is a rotation to within [`ROTATION_TOL`] (`max|RᵀR − I|` and
/// `|det R − 1|`), else InputError naming `what` (`R`, `M[:3, :3]`) and both measures.
fn checked_rotation(r: Matrix3<f64>, what: &str) -> PyResult<Matrix3<f64>> {
    let orth = (r.transpose() * r - Matrix3::identity()).abs().max();
    let det = r.determinant();
    if orth > ROTATION_TOL || (det - 1.0).abs() > ROTATION_TOL {
        return Err(INPUT_ERROR.err(format!(
            "{what} is not a rotation matrix: max|RᵀR − I| = {orth:.3e}, det R = {det} (accepted: orthonormal with det +1, to within {ROTATION_TOL:e})"
        )));
    }
    Ok(r)
}

/// A `(3, 3)` rotation matrix (orthonormal, det +1, to within [`ROTATION_TOL`]).
pub fn rotation(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Matrix3<f64>> {
    checked_rotation(matrix3(x, name)?, name)
}

/// A 4×4 homogeneous transform `[[R, p], [0, 0, 0, 1]]` with `R` a rotation.
pub fn placement(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Se3> {
    let h = read(x, name, &[4, 4], None)?;
    let bottom = &h[12..16];
    if bottom != [0.0, 0.0, 0.0, 1.0] {
        return Err(INPUT_ERROR.err(format!("{name}[3, :] is {bottom:?}, expected [0, 0, 0, 1] (homogeneous transform)")));
    }
    let r = Matrix3::new(h[0], h[1], h[2], h[4], h[5], h[6], h[8], h[9], h[10]);
    let r = checked_rotation(r, &format!("{name}[:3, :3]"))?;
    Ok(Se3::new(r, Vector3::new(h[3], h[7], h[11])))
}

/// A stack `(N, r, c)` of matrices (`expect`: the wanted `(r, c)`, if known).
pub fn matrices(x: &Bound<'_, PyAny>, name: &str, expect: Option<(usize, usize)>) -> PyResult<Vec<DMatrix<f64>>> {
    let s = shape(x, name)?;
    let [n, r, c] = s[..] else {
        return Err(INPUT_ERROR.err(format!("{name} has shape {}, expected 3 dimensions (N, rows, cols)", shape_str(&s))));
    };
    if let Some((er, ec)) = expect {
        if (r, c) != (er, ec) {
            return Err(INPUT_ERROR.err(format!("{name} has shape {}, expected (N, {er}, {ec})", shape_str(&s))));
        }
    }
    let data = read(x, name, &[n, r, c], None)?;
    Ok((0..n).map(|k| DMatrix::from_row_slice(r, c, &data[k * r * c..(k + 1) * r * c])).collect())
}

/// An `(r, c)` matrix.
pub fn matrix(x: &Bound<'_, PyAny>, name: &str, r: usize, c: usize) -> PyResult<DMatrix<f64>> {
    Ok(DMatrix::from_row_slice(r, c, &read(x, name, &[r, c], None)?))
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
