//! The module-level functions: read and check the arguments (`convert`), run one core
//! algorithm on the model's workspace with the interpreter detached, convert what it left
//! there ([`run`], the one body they share).

use crate::convert;
use crate::detached;
use crate::model::PyModel;
use numpy::{PyArray1, PyArray2, PyArray3};
use pyo3::prelude::*;
use vidyn_rbd as rbd;
use vidyn_rbd::mimic::{self, MimicSecondOrder, MimicWorkspace};
use vidyn_rbd::{Model, Workspace};
use vidyn_spatial::Force;

type Array1<'py> = Bound<'py, PyArray1<f64>>;
type Array2<'py> = Bound<'py, PyArray2<f64>>;
type Array3<'py> = Bound<'py, PyArray3<f64>>;
type Any<'a, 'py> = &'a Bound<'py, PyAny>;

/// Runs `compute` on the model's workspace, detached from the interpreter, then `out` on
/// what it returned and left in the workspace, while the workspace is still held.
fn run<'py, R: Send, T>(
    py: Python<'py>,
    model: &PyModel,
    compute: impl FnOnce(&Model, &mut Workspace) -> rbd::Result<R> + Send,
    out: impl FnOnce(R, &Workspace) -> T,
) -> PyResult<T> {
    let m = &*model.inner;
    let mut ws = model.workspace();
    let w = &mut *ws;
    let r = detached(py, move || compute(m, w))?;
    Ok(out(r, &ws))
}

/// `q` (nq,) and the tangent vectors (nv,) of a call, read and checked against `model` as
/// Python sees it (reduced coordinates with mimic joints).
fn state<const K: usize>(model: &PyModel, q: Any<'_, '_>, tangents: [(Any<'_, '_>, &str); K]) -> PyResult<(Vec<f64>, [Vec<f64>; K])> {
    let q = model.read_q(q, "q")?;
    let mut read: [Vec<f64>; K] = std::array::from_fn(|_| Vec::new());
    for (slot, (x, name)) in read.iter_mut().zip(tangents) {
        *slot = model.read_v(x, name)?;
    }
    Ok((q, read))
}

/// [`state`] lifted to the extended tree (`q_e = G q + o`, `v_e = G v`; the same without
/// mimic joints): the inputs of the kinematic algorithms, whose results need no reduction
/// but for the columns of Jacobians ([`PyModel::columns_out`]).
fn lifted<const K: usize>(model: &PyModel, q: Any<'_, '_>, tangents: [(Any<'_, '_>, &str); K]) -> PyResult<(Vec<f64>, [Vec<f64>; K])> {
    let (q, t) = state(model, q, tangents)?;
    Ok((model.lift_q(q), t.map(|v| model.lift_v(v))))
}

/// The inputs of a dynamics call: `q`, `K` tangent vectors and the external wrenches, if any.
type ForcedState<const K: usize> = (Vec<f64>, [Vec<f64>; K], Option<Vec<Force>>);

/// [`state`] and the optional external wrenches `fext` of a dynamics call.
fn forced_state<const K: usize>(model: &PyModel, q: Any<'_, '_>, tangents: [(Any<'_, '_>, &str); K], fext: Option<Any<'_, '_>>) -> PyResult<ForcedState<K>> {
    let (q, t) = state(model, q, tangents)?;
    Ok((q, t, convert::forces(fext, "fext", &model.inner)?))
}

/// Runs `compute`, one of the reduced algorithms of `vidyn_rbd::mimic`, on the model's
/// workspace and a mimic workspace made for the call, detached from the interpreter.
fn run_mimic<T: Send>(
    py: Python<'_>,
    model: &PyModel,
    compute: impl FnOnce(&Model, &mut Workspace, &mut MimicWorkspace) -> rbd::Result<T> + Send,
) -> PyResult<T> {
    let m = &*model.inner;
    let mut ws = model.workspace();
    let w = &mut *ws;
    detached(py, move || compute(m, w, &mut MimicWorkspace::new(m)))
}

/// A dynamics algorithm in the form the model needs: with mimic joints the reduced one,
/// `coupled` ([`run_mimic`]), its owned result converted by `coupled_out`; without, `tree`,
/// the tree's own, run and converted (by [`run`] but for the second-order tensors).
fn run_dynamics<C: Send, T>(
    py: Python<'_>,
    model: &PyModel,
    coupled: impl FnOnce(&Model, &mut Workspace, &mut MimicWorkspace) -> rbd::Result<C> + Send,
    coupled_out: impl FnOnce(C) -> T,
    tree: impl FnOnce() -> PyResult<T>,
) -> PyResult<T> {
    match model.coupling() {
        Some(_) => Ok(coupled_out(run_mimic(py, model, coupled)?)),
        None => tree(),
    }
}

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
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, [v, a], fext) = forced_state(pm, q, [(v, "v"), (a, "a")], fext)?;
    let f = fext.as_deref();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::rnea(m, ws, mw, &q, &v, &a, f).map(<[f64]>::to_vec),
        |tau| convert::vector_out(py, &tau),
        || run(py, pm, |m, ws| rbd::rnea(m, ws, &q, &v, &a, f).map(drop), |(), ws| convert::vector_out(py, &ws.tau)),
    )
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
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    tau: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, [v, tau], fext) = forced_state(pm, q, [(v, "v"), (tau, "tau")], fext)?;
    let f = fext.as_deref();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::aba(m, ws, mw, &q, &v, &tau, f).map(<[f64]>::to_vec),
        |ddq| convert::vector_out(py, &ddq),
        || run(py, pm, |m, ws| rbd::aba(m, ws, &q, &v, &tau, f).map(drop), |(), ws| convert::vector_out(py, &ws.ddq)),
    )
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
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<(Array2<'py>, Array2<'py>, Array2<'py>)> {
    let pm = model.get();
    let (q, [v, a], fext) = forced_state(pm, q, [(v, "v"), (a, "a")], fext)?;
    let f = fext.as_deref();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::rnea_derivatives(m, ws, mw, &q, &v, &a, f).map(derivatives_owned),
        |d| three_matrices_out(py, [&d[0], &d[1], &d[2]]),
        || {
            run(
                py,
                pm,
                |m, ws| rbd::rnea_derivatives(m, ws, &q, &v, &a, f).map(drop),
                |(), ws| {
                    let d = &ws.derivatives;
                    three_matrices_out(py, [&d.dtau_dq, &d.dtau_dv, &d.dtau_da])
                },
            )
        },
    )
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
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    tau: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<(Array2<'py>, Array2<'py>, Array2<'py>)> {
    let pm = model.get();
    let (q, [v, tau], fext) = forced_state(pm, q, [(v, "v"), (tau, "tau")], fext)?;
    let f = fext.as_deref();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::aba_derivatives(m, ws, mw, &q, &v, &tau, f).map(derivatives_owned),
        |d| three_matrices_out(py, [&d[0], &d[1], &d[2]]),
        || {
            run(
                py,
                pm,
                |m, ws| rbd::aba_derivatives(m, ws, &q, &v, &tau, f).map(drop),
                |(), ws| {
                    let d = &ws.derivatives;
                    three_matrices_out(py, [&d.dddq_dq, &d.dddq_dv, &ws.mass_matrix_inv])
                },
            )
        },
    )
}

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
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<(Array3<'py>, Array3<'py>, Array3<'py>, Array3<'py>)> {
    let pm = model.get();
    let (q, [v, a], fext) = forced_state(pm, q, [(v, "v"), (a, "a")], fext)?;
    let f = fext.as_deref();
    run_dynamics(
        py,
        pm,
        |m, _, mw| mimic::rnea_second_order(m, mw, &mut MimicSecondOrder::new(m), &q, &v, &a, f).cloned(),
        |t| tensors_out(py, [&t[0], &t[1], &t[2], &t[3]]),
        || {
            // the tensors live in a workspace of their own (O(nv³)), made for this call
            let m = &*pm.inner;
            let mut ws = detached(py, move || Ok::<_, rbd::RbdError>(m.second_order_workspace()))?;
            let (w, q, v, a) = (&mut ws, &q, &v, &a);
            let d = detached(py, move || rbd::rnea_second_order(m, w, q, v, a, f))?;
            Ok(tensors_out(py, [d.d2tau_dq2, d.d2tau_dv2, d.d2tau_dqdv, d.dm_dq]))
        },
    )
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
#[allow(clippy::too_many_arguments)]
pub fn rnea_second_order_contracted<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    lam: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<(Array2<'py>, Array2<'py>, Array2<'py>)> {
    let pm = model.get();
    let (q, [v, a, lam], fext) = forced_state(pm, q, [(v, "v"), (a, "a"), (lam, "lam")], fext)?;
    let f = fext.as_deref();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::rnea_second_order_contracted(m, ws, mw, &q, &v, &a, &lam, f).cloned(),
        |d| three_matrices_out(py, [&d[0], &d[1], &d[2]]),
        || {
            run(
                py,
                pm,
                |m, ws| rbd::rnea_second_order_contracted(m, ws, &q, &v, &a, &lam, f).map(drop),
                |(), ws| {
                    let so = &ws.second_order;
                    three_matrices_out(py, [&so.d2tau_dq2, &so.d2tau_dv2, &so.d2tau_dqdv])
                },
            )
        },
    )
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
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    tau: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<(Array3<'py>, Array3<'py>, Array3<'py>, Array3<'py>)> {
    let pm = model.get();
    let (q, [v, tau], fext) = forced_state(pm, q, [(v, "v"), (tau, "tau")], fext)?;
    let f = fext.as_deref();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::aba_second_order(m, ws, mw, &mut MimicSecondOrder::new(m), &q, &v, &tau, f).cloned(),
        |t| tensors_out(py, [&t[0], &t[1], &t[2], &t[3]]),
        || {
            // the tensors live in a workspace of their own (O(nv³)), made for this call
            let m = &*pm.inner;
            let mut ws = detached(py, move || Ok::<_, rbd::RbdError>(m.aba_second_order_workspace()))?;
            let (w, q, v, tau) = (&mut ws, &q, &v, &tau);
            let d = detached(py, move || rbd::aba_second_order(m, w, q, v, tau, f))?;
            Ok(tensors_out(py, [d.d2ddq_dq2, d.d2ddq_dv2, d.d2ddq_dqdv, d.d2ddq_dtaudq]))
        },
    )
}

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
#[allow(clippy::too_many_arguments)]
pub fn aba_second_order_contracted<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    tau: Any<'_, 'py>,
    lam: Any<'_, 'py>,
    fext: Option<Any<'_, 'py>>,
) -> PyResult<(Array2<'py>, Array2<'py>, Array2<'py>, Array2<'py>)> {
    let pm = model.get();
    let (q, [v, tau, lam], fext) = forced_state(pm, q, [(v, "v"), (tau, "tau"), (lam, "lam")], fext)?;
    let f = fext.as_deref();
    // with mimic joints, the contraction of the full tensors (O(n⁴)): the coupled tree has no O(n) form
    let contract = |t: &rbd::Tensor3| {
        let mut out = nalgebra::DMatrix::zeros(lam.len(), lam.len());
        t.contract_first(&lam, &mut out);
        out
    };
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::aba_second_order(m, ws, mw, &mut MimicSecondOrder::new(m), &q, &v, &tau, f).cloned(),
        |t| four_matrices_out(py, [&contract(&t[0]), &contract(&t[1]), &contract(&t[2]), &contract(&t[3])]),
        || {
            run(
                py,
                pm,
                |m, ws| rbd::aba_second_order_contracted(m, ws, &q, &v, &tau, &lam, f).map(drop),
                |(), ws| {
                    let so = &ws.second_order;
                    four_matrices_out(py, [&so.d2ddq_dq2, &so.d2ddq_dv2, &so.d2ddq_dqdv, &so.d2ddq_dtaudq])
                },
            )
        },
    )
}

/// Joint-space inertia matrix `M(q)` (CRBA), full and symmetric.
///
/// q: (nq,) -> M: (nv, nv)
#[pyfunction]
pub fn crba<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, []) = state(pm, q, [])?;
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::crba(m, ws, mw, &q).cloned(),
        |mm| convert::matrix_out(py, &mm),
        || run(py, pm, |m, ws| rbd::crba(m, ws, &q).map(drop), |(), ws| convert::matrix_out(py, &ws.mass_matrix)),
    )
}

/// Inverse of the joint-space inertia matrix `M(q)^-1`, full and symmetric.
///
/// q: (nq,) -> Minv: (nv, nv)
#[pyfunction]
pub fn minverse<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, []) = state(pm, q, [])?;
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::minverse(m, ws, mw, &q).cloned(),
        |minv| convert::matrix_out(py, &minv),
        || run(py, pm, |m, ws| rbd::minverse(m, ws, &q).map(drop), |(), ws| convert::matrix_out(py, &ws.mass_matrix_inv)),
    )
}

/// Generalised gravity `g(q) = rnea(q, 0, 0)`.
///
/// q: (nq,) -> g: (nv,)
#[pyfunction]
pub fn gravity<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, []) = state(pm, q, [])?;
    let nv = pm.nv();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::rnea(m, ws, mw, &q, &vec![0.0; nv], &vec![0.0; nv], None).map(<[f64]>::to_vec),
        |g| convert::vector_out(py, &g),
        || run(py, pm, |m, ws| rbd::gravity(m, ws, &q).map(drop), |(), ws| convert::vector_out(py, &ws.tau)),
    )
}

/// Nonlinear effects `C(q, v) v + g(q) = rnea(q, v, 0)`.
///
/// q: (nq,), v: (nv,) -> h: (nv,)
#[pyfunction]
pub fn nonlinear_effects<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, v: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, [v]) = state(pm, q, [(v, "v")])?;
    let nv = pm.nv();
    run_dynamics(
        py,
        pm,
        |m, ws, mw| mimic::rnea(m, ws, mw, &q, &v, &vec![0.0; nv], None).map(<[f64]>::to_vec),
        |h| convert::vector_out(py, &h),
        || run(py, pm, |m, ws| rbd::nonlinear_effects(m, ws, &q, &v).map(drop), |(), ws| convert::vector_out(py, &ws.tau)),
    )
}

/// Kinetic energy `T = 1/2 v^T M(q) v`.
///
/// q: (nq,), v: (nv,) -> float
#[pyfunction]
pub fn kinetic_energy<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, v: Any<'_, 'py>) -> PyResult<f64> {
    let pm = model.get();
    let (q, [v]) = lifted(pm, q, [(v, "v")])?;
    run(py, pm, |m, ws| rbd::kinetic_energy(m, ws, &q, &v), |t, _| t)
}

/// Potential energy of gravity `V = -sum_i m_i g^T c_i` (zero at the world origin).
///
/// q: (nq,) -> float
#[pyfunction]
pub fn potential_energy<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<f64> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    run(py, pm, |m, ws| rbd::potential_energy(m, ws, &q), |e, _| e)
}

/// The world centre of mass of the model (Pinocchio's `centerOfMass`).
///
/// q: (nq,) -> c: (3,)
#[pyfunction]
pub fn center_of_mass<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    run(py, pm, |m, ws| rbd::center_of_mass(m, ws, &q), |c, _| convert::vector_out(py, c.as_slice()))
}

/// The centre of mass and its velocity `J_c(q) v` (Pinocchio's `centerOfMass(q, v)`, `vcom`).
///
/// q: (nq,), v: (nv,) -> (c: (3,), c_dot: (3,))
#[pyfunction]
pub fn center_of_mass_velocity<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, v: Any<'_, 'py>) -> PyResult<(Array1<'py>, Array1<'py>)> {
    let pm = model.get();
    let (q, [v]) = lifted(pm, q, [(v, "v")])?;
    run(
        py,
        pm,
        |m, ws| rbd::center_of_mass_velocity(m, ws, &q, &v),
        |(c, cdot), _| (convert::vector_out(py, c.as_slice()), convert::vector_out(py, cdot.as_slice())),
    )
}

/// Jacobian of the centre of mass, `c_dot = J_c(q) v` (Pinocchio's `jacobianCenterOfMass`).
///
/// q: (nq,) -> J_c: (3, nv)
#[pyfunction]
pub fn com_jacobian<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    run(py, pm, |m, ws| rbd::com_jacobian(m, ws, &q).map(drop), |(), ws| pm.columns_out(py, &ws.com_jacobian))
}

/// Centroidal momentum matrix `A_G(q)`: `h_G = A_G v`, the momentum about the centre of mass in
/// world axes, rows [linear; angular] (Pinocchio's `ccrba`).
///
/// q: (nq,) -> A_G: (6, nv)
#[pyfunction]
pub fn centroidal_momentum_matrix<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    run(py, pm, |m, ws| rbd::centroidal_momentum_matrix(m, ws, &q).map(drop), |(), ws| pm.columns_out(py, &ws.centroidal_matrix))
}

/// Time variation of the centroidal momentum matrix, `dA_G/dt` with
/// `dh_G/dt = A_G a + dA_G/dt v` (Pinocchio's `dccrba`).
///
/// q: (nq,), v: (nv,) -> (6, nv)
#[pyfunction]
pub fn centroidal_momentum_matrix_time_variation<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, v: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, [v]) = lifted(pm, q, [(v, "v")])?;
    run(py, pm, |m, ws| rbd::centroidal_momentum_matrix_time_variation(m, ws, &q, &v).map(drop), |(), ws| pm.columns_out(py, &ws.centroidal_rate))
}

/// Centroidal momentum `h_G = A_G(q) v` [linear; angular] (Pinocchio's
/// `computeCentroidalMomentum`).
///
/// q: (nq,), v: (nv,) -> h_G: (6,)
#[pyfunction]
pub fn centroidal_momentum<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, v: Any<'_, 'py>) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, [v]) = lifted(pm, q, [(v, "v")])?;
    run(py, pm, |m, ws| rbd::centroidal_momentum(m, ws, &q, &v), |h, _| convert::vector_out(py, h.to_vector().as_slice()))
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
    q: Any<'_, 'py>,
    v: Option<Any<'_, 'py>>,
    a: Option<Any<'_, 'py>>,
) -> PyResult<Kinematics> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    let optional = |x: Option<Any<'_, 'py>>, name| x.filter(|x| !x.is_none()).map_or_else(|| Ok(vec![0.0; pm.nv()]), |x| pm.read_v(x, name));
    let (v, a) = (pm.lift_v(optional(v, "v")?), pm.lift_v(optional(a, "a")?));
    run(
        py,
        pm,
        |m, ws| rbd::forward_kinematics(m, ws, &q, &v, &a),
        |(), ws| Kinematics {
            placements: convert::placements_out(py, &ws.placements).unbind(),
            velocities: convert::motions_out(py, &ws.velocities).unbind(),
            accelerations: convert::motions_out(py, &ws.accelerations).unbind(),
        },
    )
}

/// The world placements of the model's frames at `q`, in the workspace.
fn frames(m: &Model, ws: &mut Workspace, q: &[f64]) -> rbd::Result<()> {
    rbd::placements(m, ws, q)?;
    rbd::update_frame_placements(m, ws);
    Ok(())
}

/// World placement of one frame, given by name or index.
///
/// q: (nq,), frame: str | int -> (4, 4) homogeneous matrix
#[pyfunction]
pub fn frame_placement<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, frame: Any<'_, 'py>) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    let f = pm.frame_arg(frame)?;
    run(py, pm, |m, ws| frames(m, ws, &q), |(), ws| convert::placement_out(py, &ws.frame_placements[f]))
}

/// World placements of every frame, in the order of `model.frame_names`.
///
/// q: (nq,) -> (nframes, 4, 4) homogeneous matrices
#[pyfunction]
pub fn frame_placements<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>) -> PyResult<Array3<'py>> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    run(py, pm, |m, ws| frames(m, ws, &q), |(), ws| convert::placements_out(py, &ws.frame_placements))
}

/// Jacobian of a frame: `[v; omega] = J(q) qdot`, expressed in `reference`:
/// "world" (spatial velocity at the world origin), "local" (body velocity in the frame) or
/// "local_world_aligned" (velocity of the frame origin, world axes).
///
/// q: (nq,), frame: str | int -> J: (6, nv), rows [linear; angular]
#[pyfunction]
#[pyo3(signature = (model, q, frame, reference = "local_world_aligned"))]
pub fn jacobian<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, frame: Any<'_, 'py>, reference: &str) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, []) = lifted(pm, q, [])?;
    let (f, r) = (pm.frame_arg(frame)?, convert::REFERENCE.parse(reference)?);
    run(py, pm, |m, ws| rbd::frame_jacobian(m, ws, &q, f, r).map(drop), |(), ws| pm.columns_out(py, &ws.jacobian))
}

/// Time variation `dJ/dt` of a frame Jacobian in `reference` along the velocity `v`
/// (Pinocchio's `getFrameJacobianTimeVariation`): the frame's spatial acceleration is
/// `J a + dJ/dt v`.
///
/// q: (nq,), v: (nv,), frame: str | int -> (6, nv)
#[pyfunction]
#[pyo3(signature = (model, q, v, frame, reference = "local_world_aligned"))]
pub fn jacobian_time_variation<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    frame: Any<'_, 'py>,
    reference: &str,
) -> PyResult<Array2<'py>> {
    let pm = model.get();
    let (q, [v]) = lifted(pm, q, [(v, "v")])?;
    let (f, r) = (pm.frame_arg(frame)?, convert::REFERENCE.parse(reference)?);
    run(py, pm, |m, ws| rbd::frame_jacobian_time_variation(m, ws, &q, &v, f, r).map(drop), |(), ws| pm.columns_out(py, &ws.jacobian_rate))
}

/// Velocity of a frame `[v; omega]` in `reference` (= `jacobian(q, frame, reference) @ v`;
/// Pinocchio's `getFrameVelocity`).
///
/// q: (nq,), v: (nv,), frame: str | int -> (6,)
#[pyfunction]
#[pyo3(signature = (model, q, v, frame, reference = "local_world_aligned"))]
pub fn frame_velocity<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    frame: Any<'_, 'py>,
    reference: &str,
) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, [v]) = lifted(pm, q, [(v, "v")])?;
    let (f, r) = (pm.frame_arg(frame)?, convert::REFERENCE.parse(reference)?);
    run(py, pm, |m, ws| rbd::frame_velocity(m, ws, &q, &v, f, r), |w, _| convert::vector_out(py, w.to_vector().as_slice()))
}

/// Derivatives of a frame's velocity in `reference` with respect to `q` (tangent
/// perturbations, `v` held) and `v` (Pinocchio's `getFrameVelocityDerivatives`).
///
/// q: (nq,), v: (nv,), frame: str | int -> (dv_dq: (6, nv), dv_dv: (6, nv))
#[pyfunction]
#[pyo3(signature = (model, q, v, frame, reference = "local_world_aligned"))]
pub fn frame_velocity_derivatives<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    frame: Any<'_, 'py>,
    reference: &str,
) -> PyResult<(Array2<'py>, Array2<'py>)> {
    let pm = model.get();
    let (q, [v]) = lifted(pm, q, [(v, "v")])?;
    let (f, r) = (pm.frame_arg(frame)?, convert::REFERENCE.parse(reference)?);
    run(
        py,
        pm,
        |m, ws| rbd::frame_velocity_derivatives(m, ws, &q, &v, f, r),
        |(), ws| (pm.columns_out(py, &ws.jacobian_rate), pm.columns_out(py, &ws.jacobian)),
    )
}

/// Spatial acceleration of a frame in `reference`, gravity excluded (Pinocchio's
/// `getFrameAcceleration`); with `classical=True` the classical one, `omega x v` added to the
/// linear part (`getFrameClassicalAcceleration`; in "local_world_aligned" the second
/// derivative of the frame origin).
///
/// q: (nq,), v, a: (nv,), frame: str | int -> (6,)
#[pyfunction]
#[pyo3(signature = (model, q, v, a, frame, reference = "local_world_aligned", classical = false))]
#[allow(clippy::too_many_arguments)]
pub fn frame_acceleration<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    frame: Any<'_, 'py>,
    reference: &str,
    classical: bool,
) -> PyResult<Array1<'py>> {
    let pm = model.get();
    let (q, [v, a]) = lifted(pm, q, [(v, "v"), (a, "a")])?;
    let (f, r) = (pm.frame_arg(frame)?, convert::REFERENCE.parse(reference)?);
    let kernel = if classical { rbd::frame_classical_acceleration } else { rbd::frame_acceleration };
    run(py, pm, |m, ws| kernel(m, ws, &q, &v, &a, f, r), |w, _| convert::vector_out(py, w.to_vector().as_slice()))
}

/// The three matrices of a [`mimic::MimicDerivatives`], owned.
fn derivatives_owned(d: mimic::MimicDerivatives<'_>) -> [nalgebra::DMatrix<f64>; 3] {
    [d.d_dq.clone(), d.d_dv.clone(), d.d_dx.clone()]
}

/// Three matrices as a tuple of arrays.
fn three_matrices_out<'py>(py: Python<'py>, d: [&nalgebra::DMatrix<f64>; 3]) -> (Array2<'py>, Array2<'py>, Array2<'py>) {
    (convert::matrix_out(py, d[0]), convert::matrix_out(py, d[1]), convert::matrix_out(py, d[2]))
}

/// Four matrices as a tuple of arrays.
fn four_matrices_out<'py>(py: Python<'py>, d: [&nalgebra::DMatrix<f64>; 4]) -> (Array2<'py>, Array2<'py>, Array2<'py>, Array2<'py>) {
    (convert::matrix_out(py, d[0]), convert::matrix_out(py, d[1]), convert::matrix_out(py, d[2]), convert::matrix_out(py, d[3]))
}

/// Four tensors as a tuple of arrays.
fn tensors_out<'py>(py: Python<'py>, t: [&rbd::Tensor3; 4]) -> (Array3<'py>, Array3<'py>, Array3<'py>, Array3<'py>) {
    (convert::tensor_out(py, t[0]), convert::tensor_out(py, t[1]), convert::tensor_out(py, t[2]), convert::tensor_out(py, t[3]))
}
