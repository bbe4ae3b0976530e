//! The Lie-group and spatial-algebra helpers of `vidyn.spatial`, as private `_spatial_*`
//! functions of `_core` (the typed public wrappers, with the maths in their docstrings, are
//! in `python/vidyn/spatial.py`).
//!
//! Each function reads and checks its arguments (`convert`: shapes, finiteness, rotations
//! orthonormal with det +1 to within `convert::ROTATION_TOL`), runs one `vidyn_spatial`
//! function through [`apply`], and writes the result. Conventions are the core's:
//! 6-vectors `[linear; angular]`, placements 4×4 homogeneous, right (local-frame)
//! Jacobians `exp(ξ + δ) = exp(ξ) exp(J(ξ) δ) + O(δ²)`, as Pinocchio's `Jexp3`/`Jexp6`.

use crate::convert;
use crate::detached;
use crate::errors::INPUT_ERROR;
use nalgebra::{Matrix4, SMatrix, Vector3, Vector6};
use numpy::{PyArray1, PyArray2};
use pyo3::prelude::*;
use std::convert::Infallible;
use vidyn_spatial::{exp6, jexp6, jlog6, log6, skew, so3, Force, Matrix3, Matrix6, Motion, Se3};

type Array1<'py> = Bound<'py, PyArray1<f64>>;
type Array2<'py> = Bound<'py, PyArray2<f64>>;
type Any<'a, 'py> = &'a Bound<'py, PyAny>;

/// Runs `f(x)` detached from the interpreter (so a bug that panics raises `VidynError`
/// instead of `PanicException`, see [`detached`]) and checks that every entry of the result
/// is finite. Finite inputs can still overflow (`|ω|²` is `inf` once `|ω| ≳ 1e154`); that is
/// reported as InputError naming the operation `op` and each argument with its largest
/// entry (`args`), never returned as NaN or inf.
fn apply<X: Send, const R: usize, const C: usize>(
    py: Python<'_>,
    op: &str,
    args: &[(&str, f64)],
    x: X,
    f: impl FnOnce(&X) -> SMatrix<f64, R, C> + Send,
) -> PyResult<SMatrix<f64, R, C>> {
    let y = detached(py, move || Ok::<_, Infallible>(f(&x)))?;
    if y.iter().all(|v| v.is_finite()) {
        return Ok(y);
    }
    let sizes: Vec<String> = args.iter().map(|(name, m)| format!("max |{name}| = {m:e}")).collect();
    Err(INPUT_ERROR
        .err(format!("{op}: the result is not finite, the input is too large ({}); accepted: inputs whose result fits in float64", sizes.join(", "))))
}

/// The largest absolute entry of a placement (its translation's, or 1 for the rotation).
fn placement_size(m: &Se3) -> f64 {
    m.translation.amax().max(m.rotation.amax())
}

/// The 4×4 homogeneous matrix `[[R, p], [0, 0, 0, 1]]` of a placement.
fn homogeneous(m: &Se3) -> Matrix4<f64> {
    let mut h = Matrix4::identity();
    h.fixed_view_mut::<3, 3>(0, 0).copy_from(&m.rotation);
    h.fixed_view_mut::<3, 1>(0, 3).copy_from(&m.translation);
    h
}

/// `skew(w)`: the 3×3 matrix `w×` with `(w×) u = w × u`. w: (3,) -> (3, 3)
#[pyfunction]
#[pyo3(name = "_spatial_skew")]
pub fn spatial_skew<'py>(py: Python<'py>, w: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let w = convert::vector3(w, "w")?;
    let y = apply(py, "skew", &[("w", w.amax())], w, skew)?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `exp3(w)`: the rotation matrix `exp(w×)`. w: (3,) -> (3, 3)
#[pyfunction]
#[pyo3(name = "_spatial_exp3")]
pub fn spatial_exp3<'py>(py: Python<'py>, w: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let w = convert::vector3(w, "w")?;
    let y = apply(py, "exp3", &[("w", w.amax())], w, so3::exp3)?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `log3(R)`: the rotation vector `w`, `|w| ∈ [0, π]`, with `exp3(w) = R`. R: (3, 3) -> (3,)
#[pyfunction]
#[pyo3(name = "_spatial_log3")]
pub fn spatial_log3<'py>(py: Python<'py>, r: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let r = convert::rotation(r, "R")?;
    let y: Vector3<f64> = apply(py, "log3", &[("R", r.amax())], r, so3::log3)?;
    Ok(convert::vector3_out(py, &y))
}

/// `jexp3(w)`: the right Jacobian `J_r(w)` of `exp3`. w: (3,) -> (3, 3)
#[pyfunction]
#[pyo3(name = "_spatial_jexp3")]
pub fn spatial_jexp3<'py>(py: Python<'py>, w: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let w = convert::vector3(w, "w")?;
    let y = apply(py, "jexp3", &[("w", w.amax())], w, so3::jr3)?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `jlog3(R)`: the right Jacobian of `log3`, `J_r(log3(R))⁻¹`. R: (3, 3) -> (3, 3)
#[pyfunction]
#[pyo3(name = "_spatial_jlog3")]
pub fn spatial_jlog3<'py>(py: Python<'py>, r: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let r = convert::rotation(r, "R")?;
    let y: Matrix3<f64> = apply(py, "jlog3", &[("R", r.amax())], r, so3::jlog3)?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `exp6(xi)`: the placement `exp(ξ)` of a twist `ξ = [v; ω]`. xi: (6,) -> (4, 4)
#[pyfunction]
#[pyo3(name = "_spatial_exp6")]
pub fn spatial_exp6<'py>(py: Python<'py>, xi: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let xi = convert::vector6(xi, "xi")?;
    let y = apply(py, "exp6", &[("xi", xi.amax())], xi, |x| homogeneous(&exp6(&Motion::from_vector(x))))?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `log6(M)`: the twist `ξ = [v; ω]`, `|ω| ∈ [0, π]`, with `exp6(ξ) = M`. M: (4, 4) -> (6,)
#[pyfunction]
#[pyo3(name = "_spatial_log6")]
pub fn spatial_log6<'py>(py: Python<'py>, m: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let m = convert::placement(m, "M")?;
    let y: Vector6<f64> = apply(py, "log6", &[("M", placement_size(&m))], m, |m| log6(m).to_vector())?;
    Ok(convert::vector_out(py, y.as_slice()))
}

/// `jexp6(xi)`: the right Jacobian `J_r(ξ)` of `exp6`. xi: (6,) -> (6, 6)
#[pyfunction]
#[pyo3(name = "_spatial_jexp6")]
pub fn spatial_jexp6<'py>(py: Python<'py>, xi: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let xi = convert::vector6(xi, "xi")?;
    let y = apply(py, "jexp6", &[("xi", xi.amax())], xi, |x| jexp6(&Motion::from_vector(x)))?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `jlog6(M)`: the right Jacobian of `log6`, `J_r(log6(M))⁻¹`. M: (4, 4) -> (6, 6)
#[pyfunction]
#[pyo3(name = "_spatial_jlog6")]
pub fn spatial_jlog6<'py>(py: Python<'py>, m: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let m = convert::placement(m, "M")?;
    let y: Matrix6<f64> = apply(py, "jlog6", &[("M", placement_size(&m))], m, jlog6)?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `action(M)`: `Ad_M = [[R, p×R], [0, R]]`, acting on motions. M: (4, 4) -> (6, 6)
#[pyfunction]
#[pyo3(name = "_spatial_action")]
pub fn spatial_action<'py>(py: Python<'py>, m: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let m = convert::placement(m, "M")?;
    let y = apply(py, "action", &[("M", placement_size(&m))], m, Se3::action_matrix)?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `dual_action(M)`: `Ad_M⁻ᵀ = [[R, 0], [p×R, R]]`, acting on forces. M: (4, 4) -> (6, 6)
#[pyfunction]
#[pyo3(name = "_spatial_dual_action")]
pub fn spatial_dual_action<'py>(py: Python<'py>, m: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let m = convert::placement(m, "M")?;
    let y = apply(py, "dual_action", &[("M", placement_size(&m))], m, Se3::dual_action_matrix)?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `cross_motion(v)`: `v× = [[ω×, v×], [0, ω×]]` of a motion `v = [v; ω]`. v: (6,) -> (6, 6)
#[pyfunction]
#[pyo3(name = "_spatial_cross_motion")]
pub fn spatial_cross_motion<'py>(py: Python<'py>, v: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let v = convert::vector6(v, "v")?;
    let y = apply(py, "cross_motion", &[("v", v.amax())], v, |v| Motion::from_vector(v).cross_motion_matrix())?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `cross_force(v)`: `v×* = −(v×)ᵀ` of a motion `v = [v; ω]`. v: (6,) -> (6, 6)
#[pyfunction]
#[pyo3(name = "_spatial_cross_force")]
pub fn spatial_cross_force<'py>(py: Python<'py>, v: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let v = convert::vector6(v, "v")?;
    let y = apply(py, "cross_force", &[("v", v.amax())], v, |v| Motion::from_vector(v).cross_force_matrix())?;
    Ok(convert::small_matrix_out(py, &y))
}

/// `act_motion(M, v)`: `Ad_M v` for a motion `v`. M: (4, 4), v: (6,) -> (6,)
#[pyfunction]
#[pyo3(name = "_spatial_act_motion")]
pub fn spatial_act_motion<'py>(py: Python<'py>, m: Any<'_, 'py>, v: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let (m, v) = (convert::placement(m, "M")?, convert::vector6(v, "v")?);
    let args = [("M", placement_size(&m)), ("v", v.amax())];
    let y: Vector6<f64> = apply(py, "act_motion", &args, (m, v), |(m, v)| m.act_motion(&Motion::from_vector(v)).to_vector())?;
    Ok(convert::vector_out(py, y.as_slice()))
}

/// `act_force(M, f)`: `Ad_M⁻ᵀ f` for a force `f`. M: (4, 4), f: (6,) -> (6,)
#[pyfunction]
#[pyo3(name = "_spatial_act_force")]
pub fn spatial_act_force<'py>(py: Python<'py>, m: Any<'_, 'py>, f: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let (m, f) = (convert::placement(m, "M")?, convert::vector6(f, "f")?);
    let args = [("M", placement_size(&m)), ("f", f.amax())];
    let y: Vector6<f64> = apply(py, "act_force", &args, (m, f), |(m, f)| m.act_force(&Force::from_vector(f)).to_vector())?;
    Ok(convert::vector_out(py, y.as_slice()))
}

/// `placement(M, name)`: `M` read as a placement (shape (4, 4), finite, `[0, 0, 0, 1]` last
/// row, a rotation block to within `convert::ROTATION_TOL`) and returned as a C-ordered copy,
/// or InputError naming `name`: for Python-side functions that take placements.
#[pyfunction]
#[pyo3(name = "_spatial_placement")]
pub fn spatial_placement<'py>(py: Python<'py>, m: Any<'_, 'py>, name: &str) -> PyResult<Array2<'py>> {
    let m = convert::placement(m, name)?;
    Ok(convert::small_matrix_out(py, &homogeneous(&m)))
}

/// Adds every `_spatial_*` function to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(spatial_skew, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_exp3, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_log3, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_jexp3, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_jlog3, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_exp6, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_log6, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_jexp6, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_jlog6, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_action, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_dual_action, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_cross_motion, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_cross_force, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_act_motion, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_act_force, m)?)?;
    m.add_function(wrap_pyfunction!(spatial_placement, m)?)?;
    Ok(())
}
