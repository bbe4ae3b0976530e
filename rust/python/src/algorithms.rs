//! The module-level functions: convert and check inputs, run one core algorithm detached
//! from the interpreter in the model's workspace, convert the result.

use crate::convert;
use crate::detached;
use crate::model::PyModel;
use numpy::{PyArray1, PyArray2, PyArray3};
use pyo3::prelude::*;
use vidyn_rbd as rbd;

type Array1<'py> = PyResult<Bound<'py, PyArray1<f64>>>;
type Array2<'py> = PyResult<Bound<'py, PyArray2<f64>>>;
type Matrices3<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// Inverse dynamics (RNEA): `tau = M(q) a + C(q, v) v + g(q) - sum_i J_i^T fext_i`.
///
/// q: (nq,), v: (nv,), a: (nv,) -> tau: (nv,)
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
#[pyfunction]
#[pyo3(signature = (model, q, v, a, fext = None))]
pub fn rnea<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> Array1<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, a, fext) = (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?, convert::tangent(a, "a", m)?, convert::forces(fext, "fext", m)?);
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let tau = detached(py, move || match &fext {
        Some(f) => rbd::rnea_ext(m, ws, &q, &v, &a, f),
        None => rbd::rnea(m, ws, &q, &v, &a),
    })?;
    Ok(convert::vector_out(py, tau))
}

/// Forward dynamics (ABA): `a = M(q)^-1 (tau + sum_i J_i^T fext_i - C(q, v) v - g(q))`.
///
/// q: (nq,), v: (nv,), tau: (nv,) -> a: (nv,)
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
#[pyfunction]
#[pyo3(signature = (model, q, v, tau, fext = None))]
pub fn aba<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    tau: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> Array1<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, tau, fext) =
        (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?, convert::tangent(tau, "tau", m)?, convert::forces(fext, "fext", m)?);
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let a = detached(py, move || match &fext {
        Some(f) => rbd::aba_ext(m, ws, &q, &v, &tau, f),
        None => rbd::aba(m, ws, &q, &v, &tau),
    })?;
    Ok(convert::vector_out(py, a))
}

/// First-order derivatives of inverse dynamics: `(dtau_dq, dtau_dv, dtau_da = M)`.
///
/// q: (nq,), v: (nv,), a: (nv,) -> three (nv, nv) arrays; row = torque, column = variable;
/// derivatives in q are along the manifold directions `integrate(q, h e_k)`.
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
/// The body-frame wrenches turn with their bodies, which adds to `dtau_dq`.
#[pyfunction]
#[pyo3(signature = (model, q, v, a, fext = None))]
pub fn rnea_derivatives<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> PyResult<Matrices3<'py>> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, a, fext) = (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?, convert::tangent(a, "a", m)?, convert::forces(fext, "fext", m)?);
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let d = detached(py, move || match &fext {
        Some(f) => rbd::rnea_derivatives_ext(m, ws, &q, &v, &a, f),
        None => rbd::rnea_derivatives(m, ws, &q, &v, &a),
    })?;
    Ok((convert::matrix_out(py, d.dtau_dq), convert::matrix_out(py, d.dtau_dv), convert::matrix_out(py, d.dtau_da)))
}

/// First-order derivatives of forward dynamics: `(dddq_dq, dddq_dv, dddq_dtau = M^-1)`.
///
/// q: (nq,), v: (nv,), tau: (nv,) -> three (nv, nv) arrays; row = acceleration, column =
/// variable; derivatives in q are along the manifold directions `integrate(q, h e_k)`.
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
#[pyfunction]
#[pyo3(signature = (model, q, v, tau, fext = None))]
pub fn aba_derivatives<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    tau: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> PyResult<Matrices3<'py>> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, tau, fext) =
        (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?, convert::tangent(tau, "tau", m)?, convert::forces(fext, "fext", m)?);
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let d = detached(py, move || match &fext {
        Some(f) => rbd::aba_derivatives_ext(m, ws, &q, &v, &tau, f),
        None => rbd::aba_derivatives(m, ws, &q, &v, &tau),
    })?;
    Ok((convert::matrix_out(py, d.dddq_dq), convert::matrix_out(py, d.dddq_dv), convert::matrix_out(py, d.dddq_dtau)))
}

type Array3<'py> = Bound<'py, PyArray3<f64>>;

/// Second-order derivatives of inverse dynamics `(d2tau_dq2, d2tau_dv2, d2tau_dqdv, dM_dq)`.
///
/// q: (nq,), v: (nv,), a: (nv,) -> four (nv, nv, nv) arrays with `[i, j, k]` =
/// d/dx_k (d tau_i / dy_j): torque, inner, outer derivative (`d2tau_dqdv`: j is q, k is v;
/// `dM_dq[i, j, k] = dM_ij/dq_k`).
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
#[pyfunction]
#[pyo3(signature = (model, q, v, a, fext = None))]
pub fn rnea_second_order<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Array3<'py>, Array3<'py>, Array3<'py>, Array3<'py>)> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, a, fext) = (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?, convert::tangent(a, "a", m)?, convert::forces(fext, "fext", m)?);
    let mut ws = detached(py, move || Ok::<_, rbd::RbdError>(m.second_order_workspace()))?;
    let wsr = &mut ws;
    let d = detached(py, move || match &fext {
        Some(f) => rbd::rnea_second_order_ext(m, wsr, &q, &v, &a, f),
        None => rbd::rnea_second_order(m, wsr, &q, &v, &a),
    })?;
    Ok((convert::tensor_out(py, d.d2tau_dq2), convert::tensor_out(py, d.d2tau_dv2), convert::tensor_out(py, d.d2tau_dqdv), convert::tensor_out(py, d.dm_dq)))
}

/// Second-order derivatives of inverse dynamics contracted with a co-vector `lam`:
/// `(sum_i lam_i d2tau_i/dq2, sum_i lam_i d2tau_i/dv2, sum_i lam_i d2tau_i/dqdv)`.
///
/// q: (nq,), v: (nv,), a: (nv,), lam: (nv,) -> three (nv, nv) arrays (same j, k meaning as
/// `rnea_second_order`), computed without forming the tensors.
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
#[pyfunction]
#[pyo3(signature = (model, q, v, a, lam, fext = None))]
pub fn rnea_second_order_contracted<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    lam: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> PyResult<Matrices3<'py>> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, a, lam, fext) = (
        convert::configuration(q, "q", m)?,
        convert::tangent(v, "v", m)?,
        convert::tangent(a, "a", m)?,
        convert::tangent(lam, "lam", m)?,
        convert::forces(fext, "fext", m)?,
    );
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let d = detached(py, move || match &fext {
        Some(f) => rbd::rnea_second_order_contracted_ext(m, ws, &q, &v, &a, &lam, f),
        None => rbd::rnea_second_order_contracted(m, ws, &q, &v, &a, &lam),
    })?;
    Ok((convert::matrix_out(py, d.d2tau_dq2), convert::matrix_out(py, d.d2tau_dv2), convert::matrix_out(py, d.d2tau_dqdv)))
}

/// Second-order derivatives of forward dynamics
/// `(d2ddq_dq2, d2ddq_dv2, d2ddq_dqdv, d2ddq_dtaudq)`.
///
/// q: (nq,), v: (nv,), tau: (nv,) -> four (nv, nv, nv) arrays with `[i, j, k]` =
/// d/dx_k (d ddq_i / dy_j): acceleration, inner, outer derivative (`d2ddq_dqdv`: j is q, k is
/// v; `d2ddq_dtaudq[i, j, k] = d(M^-1)_ij/dq_k`).
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
#[pyfunction]
#[pyo3(signature = (model, q, v, tau, fext = None))]
pub fn aba_second_order<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    tau: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Array3<'py>, Array3<'py>, Array3<'py>, Array3<'py>)> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, tau, fext) =
        (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?, convert::tangent(tau, "tau", m)?, convert::forces(fext, "fext", m)?);
    let mut ws = detached(py, move || Ok::<_, rbd::RbdError>(m.aba_second_order_workspace()))?;
    let wsr = &mut ws;
    let d = detached(py, move || match &fext {
        Some(f) => rbd::aba_second_order_ext(m, wsr, &q, &v, &tau, f),
        None => rbd::aba_second_order(m, wsr, &q, &v, &tau),
    })?;
    Ok((
        convert::tensor_out(py, d.d2ddq_dq2),
        convert::tensor_out(py, d.d2ddq_dv2),
        convert::tensor_out(py, d.d2ddq_dqdv),
        convert::tensor_out(py, d.d2ddq_dtaudq),
    ))
}

type Matrices4<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// Second-order derivatives of forward dynamics contracted with a co-vector `lam`:
/// `sum_i lam_i T[i]` for the four tensors of `aba_second_order`.
///
/// q: (nq,), v: (nv,), tau: (nv,), lam: (nv,) -> four (nv, nv) arrays, computed without
/// forming the tensors.
///
/// fext: optional (nbodies, 6) external wrenches, row i acting on body i, `[force; moment]`
/// about body i's origin, expressed in body frame i (Pinocchio's `fext` without the universe).
#[pyfunction]
#[pyo3(signature = (model, q, v, tau, lam, fext = None))]
pub fn aba_second_order_contracted<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: &Bound<'py, PyAny>,
    tau: &Bound<'py, PyAny>,
    lam: &Bound<'py, PyAny>,
    fext: Option<&Bound<'py, PyAny>>,
) -> PyResult<Matrices4<'py>> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v, tau, lam, fext) = (
        convert::configuration(q, "q", m)?,
        convert::tangent(v, "v", m)?,
        convert::tangent(tau, "tau", m)?,
        convert::tangent(lam, "lam", m)?,
        convert::forces(fext, "fext", m)?,
    );
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let d = detached(py, move || match &fext {
        Some(f) => rbd::aba_second_order_contracted_ext(m, ws, &q, &v, &tau, &lam, f),
        None => rbd::aba_second_order_contracted(m, ws, &q, &v, &tau, &lam),
    })?;
    Ok((
        convert::matrix_out(py, d.d2ddq_dq2),
        convert::matrix_out(py, d.d2ddq_dv2),
        convert::matrix_out(py, d.d2ddq_dqdv),
        convert::matrix_out(py, d.d2ddq_dtaudq),
    ))
}

/// Joint-space inertia matrix `M(q)` (CRBA), full and symmetric.
///
/// q: (nq,) -> M: (nv, nv)
#[pyfunction]
pub fn crba<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>) -> Array2<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let mass = detached(py, move || rbd::crba(m, ws, &q))?;
    Ok(convert::matrix_out(py, mass))
}

/// Inverse of the joint-space inertia matrix `M(q)^-1`, full and symmetric.
///
/// q: (nq,) -> Minv: (nv, nv)
#[pyfunction]
pub fn minverse<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>) -> Array2<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let minv = detached(py, move || rbd::minverse(m, ws, &q))?;
    Ok(convert::matrix_out(py, minv))
}

/// Generalised gravity `g(q) = rnea(q, 0, 0)`.
///
/// q: (nq,) -> g: (nv,)
#[pyfunction]
pub fn gravity<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>) -> Array1<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let g = detached(py, move || rbd::gravity(m, ws, &q))?;
    Ok(convert::vector_out(py, g))
}

/// Nonlinear effects `C(q, v) v + g(q) = rnea(q, v, 0)`.
///
/// q: (nq,), v: (nv,) -> h: (nv,)
#[pyfunction]
pub fn nonlinear_effects<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>) -> Array1<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v) = (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?);
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let h = detached(py, move || rbd::nonlinear_effects(m, ws, &q, &v))?;
    Ok(convert::vector_out(py, h))
}

/// Kinetic energy `T = 1/2 v^T M(q) v`.
///
/// q: (nq,), v: (nv,) -> float
#[pyfunction]
pub fn kinetic_energy<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>) -> PyResult<f64> {
    let pm = model.get();
    let m = &*pm.inner;
    let (q, v) = (convert::configuration(q, "q", m)?, convert::tangent(v, "v", m)?);
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    detached(py, move || rbd::kinetic_energy(m, ws, &q, &v))
}

/// Potential energy of gravity `V = -sum_i m_i g^T c_i` (zero at the world origin).
///
/// q: (nq,) -> float
#[pyfunction]
pub fn potential_energy<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>) -> PyResult<f64> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    detached(py, move || rbd::potential_energy(m, ws, &q))
}

/// Result of `forward_kinematics`: world placements, body velocities and accelerations.
#[pyclass(frozen, module = "vidyn", name = "Kinematics")]
pub struct Kinematics {
    /// (nbodies, 4, 4) world placement `oMi` of each body, homogeneous.
    #[pyo3(get)]
    placements: Py<PyArray3<f64>>,
    /// (nbodies, 6) spatial velocity of each body in its own frame, `[linear; angular]`.
    #[pyo3(get)]
    velocities: Py<PyArray2<f64>>,
    /// (nbodies, 6) spatial acceleration of each body in its own frame, `[linear; angular]`,
    /// without gravity.
    #[pyo3(get)]
    accelerations: Py<PyArray2<f64>>,
}

#[pymethods]
impl Kinematics {
    fn __repr__(&self, py: Python<'_>) -> String {
        use numpy::PyUntypedArrayMethods;
        format!("Kinematics(nbodies={})", self.placements.bind(py).shape()[0])
    }
}

/// Forward kinematics to second order. `v` and `a` default to zeros.
///
/// q: (nq,), v: (nv,) | None, a: (nv,) | None -> Kinematics with
/// placements (nbodies, 4, 4), velocities (nbodies, 6), accelerations (nbodies, 6)
#[pyfunction]
#[pyo3(signature = (model, q, v = None, a = None))]
pub fn forward_kinematics<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    v: Option<&Bound<'py, PyAny>>,
    a: Option<&Bound<'py, PyAny>>,
) -> PyResult<Kinematics> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let (v, a) = (convert::tangent_or_zero(v, "v", m)?, convert::tangent_or_zero(a, "a", m)?);
    let mut ws = pm.workspace();
    let w = &mut *ws;
    detached(py, move || rbd::forward_kinematics(m, w, &q, &v, &a))?;
    Ok(Kinematics {
        placements: convert::placements_out(py, &ws.placements).unbind(),
        velocities: convert::motions_out(py, &ws.velocities).unbind(),
        accelerations: convert::motions_out(py, &ws.accelerations).unbind(),
    })
}

/// World placement of one frame, given by name or index.
///
/// q: (nq,), frame: str | int -> (4, 4) homogeneous matrix
#[pyfunction]
pub fn frame_placement<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, frame: &Bound<'py, PyAny>) -> Array2<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let f = pm.frame_arg(frame)?;
    let mut ws = pm.workspace();
    let w = &mut *ws;
    detached(py, move || {
        rbd::placements(m, w, &q)?;
        rbd::update_frame_placements(m, w);
        Ok::<(), rbd::RbdError>(())
    })?;
    Ok(convert::placement_out(py, &ws.frame_placements[f]))
}

/// World placements of every frame, in the order of `model.frame_names`.
///
/// q: (nq,) -> (nframes, 4, 4) homogeneous matrices
#[pyfunction]
pub fn frame_placements<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray3<f64>>> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let mut ws = pm.workspace();
    let w = &mut *ws;
    detached(py, move || {
        rbd::placements(m, w, &q)?;
        rbd::update_frame_placements(m, w);
        Ok::<(), rbd::RbdError>(())
    })?;
    Ok(convert::placements_out(py, &ws.frame_placements))
}

/// Jacobian of a frame: `[v; omega] = J(q) qdot`, expressed in `reference`:
/// "world" (spatial velocity at the world origin), "local" (body velocity in the frame) or
/// "local_world_aligned" (velocity of the frame origin, world axes).
///
/// q: (nq,), frame: str | int -> J: (6, nv), rows [linear; angular]
#[pyfunction]
#[pyo3(signature = (model, q, frame, reference = "local_world_aligned"))]
pub fn jacobian<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, frame: &Bound<'py, PyAny>, reference: &str) -> Array2<'py> {
    let pm = model.get();
    let m = &*pm.inner;
    let q = convert::configuration(q, "q", m)?;
    let f = pm.frame_arg(frame)?;
    let r = convert::REFERENCE.parse(reference)?;
    let mut ws = pm.workspace();
    let ws = &mut *ws;
    let j = detached(py, move || rbd::frame_jacobian(m, ws, &q, f, r))?;
    Ok(convert::matrix_out(py, j))
}
