//! Bindings of `vidyn_batch` (the private `_batch_*` functions behind `vidyn.batch`, and
//! `set_num_threads` / `get_num_threads`). Conversion only: inputs are borrowed read-only as
//! contiguous float64 arrays (no copy when they already are), outputs are allocated once as
//! NumPy arrays (zeroed Rust buffers handed over without a copy) and filled in place by the engine, row by
//! row, with no Python object per row.
//!
//! Every batch runs with the interpreter detached (through [`interruptible`]), on the calling
//! thread helped by the engine's pool; between chunks of rows, at most every
//! [`crate::POLL`], the calling thread calls `check_signals()` (Ctrl-C cancels the batch: rows
//! not started are skipped and `KeyboardInterrupt` is raised) and the optional progress
//! callback.
//!
//! Inputs must not be modified by other Python threads while a batch runs: the read-only
//! borrow keeps other Rust extensions out, not arbitrary Python code.
//!
//! Per-row errors come back as `list[tuple[int, VidynError]]`: the row and an exception
//! instance of the class the core error maps to, its message prefixed with the row
//! (`vidyn/batch.py` raises the first one or returns them all).

use crate::convert::{self, data, slice, writable, Dim, OutArg, Sizes};
use crate::errors::{py_err, VidynErr, INPUT_ERROR};
use crate::model::PyModel;
use crate::vi::PyVariationalIntegrator;
use crate::{detached, interruptible};
use numpy::{PyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::convert::Infallible;
use vidyn_batch::{self as vb, BatchError, Control, Failures, Trajectories};

// ---------------------------------------------------------------------------------------
// Failures

/// Raises the first failure of a single call run as a one-row batch (its core error, as a
/// single call that failed would).
pub(crate) fn raise_first<E: Into<VidynErr>>(failures: Failures<E>) -> PyResult<()> {
    failures.into_iter().next().map_or(Ok(()), |(_, e)| Err(py_err(e)))
}

/// Per-row failures as `[(row, exception instance)]`, messages prefixed by `label(row)`.
fn failures_out<'py, E: Into<VidynErr>>(py: Python<'py>, failures: Vec<(usize, String, BatchError<E>)>) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (row, label, e) in failures {
        let err = py_err(e);
        let ty = err.get_type(py);
        let msg = err.value(py).str()?.to_string();
        let exc = PyErr::from_type(ty, format!("{label}: {msg}")).into_value(py);
        list.append((row, exc))?;
    }
    Ok(list)
}

fn rows<E>(failures: Failures<E>) -> Vec<(usize, String, BatchError<E>)> {
    failures.into_iter().map(|(r, e)| (r, format!("row {r}"), e)).collect()
}

// ---------------------------------------------------------------------------------------
// Running a batch

/// Maps a whole-call error of the engine (shapes; never expected after the checks above).
pub(crate) fn call<T, E: Into<VidynErr>>(r: Result<T, BatchError<E>>) -> PyResult<T> {
    r.map_err(py_err)
}

// ---------------------------------------------------------------------------------------
// Thread count

/// Sets the number of threads of vidyn's batch engine (`k = 0`: the default, from
/// `VIDYN_NUM_THREADS` or the number of CPUs; at most `vidyn_batch::MAX_THREADS`). Batches
/// already running keep their threads.
#[pyfunction]
pub fn set_num_threads(py: Python<'_>, k: &Bound<'_, PyAny>) -> PyResult<()> {
    let k = convert::index(k, "k")?;
    detached(py, move || vb::set_num_threads(k))
}

/// Number of threads of vidyn's batch engine.
#[pyfunction]
pub fn get_num_threads(py: Python<'_>) -> PyResult<usize> {
    detached(py, || Ok::<_, Infallible>(vb::num_threads()))
}

// ---------------------------------------------------------------------------------------
// Batched dynamics

type Arr<'py> = Bound<'py, PyArrayDyn<f64>>;
type Fails<'py> = Bound<'py, PyList>;
type Any<'a, 'py> = &'a Bound<'py, PyAny>;

/// Batched inverse dynamics: q (B, nq), v (B, nv), a (B, nv) -> (tau (B, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea", signature = (model, q, v, a, progress = None, out = None))]
#[allow(clippy::too_many_arguments)]
pub fn batch_rnea<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &**model.get().without_mimics("vidyn.batch")?;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let v = s.read(v, "v", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let a = s.read(a, "a", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let b = s.batch.unwrap_or(0);
    let tau = OutArg::new(out, 1)?.array::<f64>(py, 0, &[b, m.nv])?;
    let mut w = writable(&tau)?;
    let (q, v, a, o) = (slice(&q)?, slice(&v)?, slice(&a)?, data(&mut w)?);
    let f = interruptible(py, progress, b, |c| vb::dynamics::rnea(m, c, b, q, v, a, o))?;
    drop(w);
    Ok((tau, failures_out(py, rows(call(f)?))?))
}

/// Batched forward dynamics: q (B, nq), v (B, nv), tau (B, nv) -> (ddq (B, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_aba", signature = (model, q, v, tau, progress = None, out = None))]
#[allow(clippy::too_many_arguments)]
pub fn batch_aba<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    tau: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &**model.get().without_mimics("vidyn.batch")?;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let v = s.read(v, "v", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let tau = s.read(tau, "tau", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let b = s.batch.unwrap_or(0);
    let ddq = OutArg::new(out, 1)?.array::<f64>(py, 0, &[b, m.nv])?;
    let mut w = writable(&ddq)?;
    let (q, v, tau, o) = (slice(&q)?, slice(&v)?, slice(&tau)?, data(&mut w)?);
    let f = interruptible(py, progress, b, |c| vb::dynamics::aba(m, c, b, q, v, tau, o))?;
    drop(w);
    Ok((ddq, failures_out(py, rows(call(f)?))?))
}

/// A `#[pyfunction]` `$py_name(model, q, progress=None, out=None)` of the batched function
/// `$job` of `q` (B, nq), whose output has shape `(B, *$tail)` (`$tail` from the model's `nv`).
macro_rules! batch_of_q {
    ($(#[$doc:meta])* $fn_name:ident, $py_name:literal, |$nv:ident| $tail:expr, $job:path) => {
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(name = $py_name, signature = (model, q, progress = None, out = None))]
        pub fn $fn_name<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: Any<'_, 'py>, progress: Option<Any<'_, 'py>>, out: Option<Any<'_, 'py>>) -> PyResult<(Arr<'py>, Fails<'py>)> {
            let $nv = model.get().inner.nv;
            of_q(py, model, q, progress, out, &$tail, $job)
        }
    };
}

/// The same for a batched function of `q` (B, nq) and `v` (B, nv):
/// `$py_name(model, q, v, progress=None, out=None)`.
macro_rules! batch_of_q_v {
    ($(#[$doc:meta])* $fn_name:ident, $py_name:literal, |$nv:ident| $tail:expr, $job:path) => {
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(name = $py_name, signature = (model, q, v, progress = None, out = None))]
        pub fn $fn_name<'py>(
            py: Python<'py>,
            model: &Bound<'py, PyModel>,
            q: Any<'_, 'py>,
            v: Any<'_, 'py>,
            progress: Option<Any<'_, 'py>>,
            out: Option<Any<'_, 'py>>,
        ) -> PyResult<(Arr<'py>, Fails<'py>)> {
            let $nv = model.get().inner.nv;
            of_q_v(py, model, q, v, progress, out, &$tail, $job)
        }
    };
}

batch_of_q!(
    /// Batched joint-space inertia: q (B, nq) -> (M (B, nv, nv), failures).
    batch_crba, "_batch_crba", |nv| [nv, nv], vb::dynamics::crba
);
batch_of_q!(
    /// Batched inverse inertia: q (B, nq) -> (Minv (B, nv, nv), failures).
    batch_minverse, "_batch_minverse", |nv| [nv, nv], vb::dynamics::minverse
);
batch_of_q!(
    /// Batched centre of mass: q (B, nq) -> (com (B, 3), failures).
    batch_center_of_mass, "_batch_center_of_mass", |_nv| [3], vb::centroidal::center_of_mass
);
batch_of_q!(
    /// Batched centre-of-mass Jacobian: q (B, nq) -> (J_c (B, 3, nv), failures).
    batch_com_jacobian, "_batch_com_jacobian", |nv| [3, nv], vb::centroidal::com_jacobian
);
batch_of_q!(
    /// Batched centroidal momentum matrix: q (B, nq) -> (A_G (B, 6, nv), failures).
    batch_centroidal_momentum_matrix, "_batch_centroidal_momentum_matrix", |nv| [6, nv], vb::centroidal::centroidal_momentum_matrix
);
batch_of_q_v!(
    /// Batched centroidal momentum: q (B, nq), v (B, nv) -> (h_G (B, 6), failures).
    batch_centroidal_momentum, "_batch_centroidal_momentum", |_nv| [6], vb::centroidal::centroidal_momentum
);
batch_of_q_v!(
    /// Batched time variation of the centroidal momentum matrix: q (B, nq), v (B, nv) ->
    /// (dA_G/dt (B, 6, nv), failures).
    batch_centroidal_momentum_matrix_time_variation,
    "_batch_centroidal_momentum_matrix_time_variation",
    |nv| [6, nv],
    vb::centroidal::centroidal_momentum_matrix_time_variation
);

type RbdResult = Result<Failures<vidyn_rbd::RbdError>, BatchError<vidyn_rbd::RbdError>>;

/// A batched function of `q` (B, nq) with one output of shape `(B, *tail)`.
fn of_q<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
    tail: &[usize],
    job: impl Fn(&vidyn_rbd::Model, &Control<'_>, usize, &[f64], &mut [f64]) -> RbdResult + Sync,
) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &**model.get().without_mimics("vidyn.batch")?;
    let q = Sizes::default().read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let b = q.shape()[0];
    let shape: Vec<usize> = std::iter::once(b).chain(tail.iter().copied()).collect();
    let result = OutArg::new(out, 1)?.array::<f64>(py, 0, &shape)?;
    let mut w = writable(&result)?;
    let (q, o) = (slice(&q)?, data(&mut w)?);
    let f = interruptible(py, progress, b, |c| job(m, c, b, q, o))?;
    drop(w);
    Ok((result, failures_out(py, rows(call(f)?))?))
}

/// A batched function of `q` (B, nq) and `v` (B, nv) with one output of shape `(B, *tail)`.
#[allow(clippy::too_many_arguments)]
fn of_q_v<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
    tail: &[usize],
    job: impl Fn(&vidyn_rbd::Model, &Control<'_>, usize, &[f64], &[f64], &mut [f64]) -> RbdResult + Sync,
) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &**model.get().without_mimics("vidyn.batch")?;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let v = s.read(v, "v", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let b = s.batch.unwrap_or(0);
    let shape: Vec<usize> = std::iter::once(b).chain(tail.iter().copied()).collect();
    let result = OutArg::new(out, 1)?.array::<f64>(py, 0, &shape)?;
    let mut w = writable(&result)?;
    let (q, v, o) = (slice(&q)?, slice(&v)?, data(&mut w)?);
    let f = interruptible(py, progress, b, |c| job(m, c, b, q, v, o))?;
    drop(w);
    Ok((result, failures_out(py, rows(call(f)?))?))
}

type Three<'py> = (Arr<'py>, Arr<'py>, Arr<'py>);
type DynJob<'j> = &'j (dyn Fn(
    &vidyn_rbd::Model,
    &Control<'_>,
    usize,
    &[f64],
    &[&[f64]],
    vb::dynamics::Matrices3<'_>,
) -> Result<Failures<vidyn_rbd::RbdError>, BatchError<vidyn_rbd::RbdError>>
         + Sync);

/// Shared body of the functions returning three (B, nv, nv) arrays from q and two or three
/// tangent inputs.
fn three_matrices<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    tangents: &[(Any<'_, 'py>, &str)],
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
    job: DynJob<'_>,
) -> PyResult<(Three<'py>, Fails<'py>)> {
    let m = &**model.get().without_mimics("vidyn.batch")?;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let t = tangents.iter().map(|(x, name)| s.read(x, name, &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")).collect::<PyResult<Vec<_>>>()?;
    let b = s.batch.unwrap_or(0);
    let o = OutArg::new(out, 3)?;
    let shape = [b, m.nv, m.nv];
    let outs = (o.array::<f64>(py, 0, &shape)?, o.array::<f64>(py, 1, &shape)?, o.array::<f64>(py, 2, &shape)?);
    let (mut w0, mut w1, mut w2) = (writable(&outs.0)?, writable(&outs.1)?, writable(&outs.2)?);
    let q = slice(&q)?;
    let t: Vec<&[f64]> = t.iter().map(slice).collect::<PyResult<_>>()?;
    let mats = vb::dynamics::Matrices3 { first: data(&mut w0)?, second: data(&mut w1)?, third: data(&mut w2)? };
    let f = interruptible(py, progress, b, |c| job(m, c, b, q, &t, mats))?;
    drop((w0, w1, w2));
    Ok((outs, failures_out(py, rows(call(f)?))?))
}

/// Batched first-order derivatives of inverse dynamics: q (B, nq), v, a (B, nv) ->
/// ((dtau_dq, dtau_dv, dtau_da) each (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea_derivatives", signature = (model, q, v, a, progress = None, out = None))]
#[allow(clippy::too_many_arguments)]
pub fn batch_rnea_derivatives<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
) -> PyResult<(Three<'py>, Fails<'py>)> {
    three_matrices(py, model, q, &[(v, "v"), (a, "a")], progress, out, &|m, c, b, q, t, o| vb::dynamics::rnea_derivatives(m, c, b, q, t[0], t[1], o))
}

/// Batched first-order derivatives of forward dynamics: q (B, nq), v, tau (B, nv) ->
/// ((dddq_dq, dddq_dv, dddq_dtau) each (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_aba_derivatives", signature = (model, q, v, tau, progress = None, out = None))]
#[allow(clippy::too_many_arguments)]
pub fn batch_aba_derivatives<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    tau: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
) -> PyResult<(Three<'py>, Fails<'py>)> {
    three_matrices(py, model, q, &[(v, "v"), (tau, "tau")], progress, out, &|m, c, b, q, t, o| vb::dynamics::aba_derivatives(m, c, b, q, t[0], t[1], o))
}

/// Batched contracted second-order derivatives of inverse dynamics: q (B, nq), v, a, lam
/// (B, nv) -> ((d2tau_dq2, d2tau_dv2, d2tau_dqdv) each (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea_second_order_contracted", signature = (model, q, v, a, lam, progress = None, out = None))]
#[allow(clippy::too_many_arguments)]
pub fn batch_rnea_second_order_contracted<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    lam: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
) -> PyResult<(Three<'py>, Fails<'py>)> {
    three_matrices(py, model, q, &[(v, "v"), (a, "a"), (lam, "lam")], progress, out, &|m, c, b, q, t, o| {
        vb::dynamics::rnea_second_order_contracted(m, c, b, q, [t[0], t[1], t[2]], o)
    })
}

/// Batched second-order derivatives of inverse dynamics: q (B, nq), v, a (B, nv) ->
/// ((d2tau_dq2, d2tau_dv2, d2tau_dqdv, dM_dq) each (B, nv, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea_second_order", signature = (model, q, v, a, progress = None, out = None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn batch_rnea_second_order<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: Any<'_, 'py>,
    v: Any<'_, 'py>,
    a: Any<'_, 'py>,
    progress: Option<Any<'_, 'py>>,
    out: Option<Any<'_, 'py>>,
) -> PyResult<((Arr<'py>, Arr<'py>, Arr<'py>, Arr<'py>), Fails<'py>)> {
    let m = &**model.get().without_mimics("vidyn.batch")?;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let v = s.read(v, "v", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let a = s.read(a, "a", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let b = s.batch.unwrap_or(0);
    let shape = [b, m.nv, m.nv, m.nv];
    let o = OutArg::new(out, 4)?;
    let outs = (o.array::<f64>(py, 0, &shape)?, o.array::<f64>(py, 1, &shape)?, o.array::<f64>(py, 2, &shape)?, o.array::<f64>(py, 3, &shape)?);
    let (mut w0, mut w1, mut w2, mut w3) = (writable(&outs.0)?, writable(&outs.1)?, writable(&outs.2)?, writable(&outs.3)?);
    let (q, v, a) = (slice(&q)?, slice(&v)?, slice(&a)?);
    let t = vb::dynamics::Tensors4 { d2tau_dq2: data(&mut w0)?, d2tau_dv2: data(&mut w1)?, d2tau_dqdv: data(&mut w2)?, dm_dq: data(&mut w3)? };
    let f = interruptible(py, progress, b, |c| vb::dynamics::rnea_second_order(m, c, b, q, v, a, t))?;
    drop((w0, w1, w2, w3));
    Ok((outs, failures_out(py, rows(call(f)?))?))
}

// ---------------------------------------------------------------------------------------
// Trajectories of a variational integrator

/// Batched rollouts: q0 (B, nq), exactly one of v0 / p0 (B, n), u (B, N, n) ->
/// (q (B, N+1, nq), p (B, N+1, n), iterations (B, N) int64, failures per trajectory).
#[pyfunction]
#[pyo3(name = "_batch_rollout", signature = (vi, q0, v0, p0, u, progress = None, out = None))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
pub fn batch_rollout<'py>(
    py: Python<'py>,
    vi: &Bound<'py, PyVariationalIntegrator>,
    q0: &Bound<'py, PyAny>,
    v0: Option<&Bound<'py, PyAny>>,
    p0: Option<&Bound<'py, PyAny>>,
    u: &Bound<'py, PyAny>,
    progress: Option<&Bound<'py, PyAny>>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Arr<'py>, Arr<'py>, Bound<'py, PyArrayDyn<i64>>, Fails<'py>)> {
    let sys = &*vi.get().inner;
    let (n, nq) = (sys.n(), sys.nq());
    let mut s = Sizes::default();
    let q0 = s.read(q0, "q0", &[Dim::Batch, Dim::Fixed(nq)], "(B, nq)")?;
    let (v0, p0) = match (v0.filter(|x| !x.is_none()), p0.filter(|x| !x.is_none())) {
        (Some(v), None) => (Some(s.read(v, "v0", &[Dim::Batch, Dim::Fixed(n)], "(B, n)")?), None),
        (None, Some(p)) => (None, Some(s.read(p, "p0", &[Dim::Batch, Dim::Fixed(n)], "(B, n)")?)),
        _ => return Err(INPUT_ERROR.err("give exactly one of v0 and p0")),
    };
    let u = s.read(u, "u", &[Dim::Batch, Dim::Steps(0), Dim::Fixed(n)], "(B, N, n)")?;
    let (b, steps) = (s.batch.unwrap_or(0), s.steps.unwrap_or(0));
    let o = OutArg::new(out, 3)?;
    let (q, p, it) = (o.array::<f64>(py, 0, &[b, steps + 1, nq])?, o.array::<f64>(py, 1, &[b, steps + 1, n])?, o.array::<i64>(py, 2, &[b, steps])?);
    let (mut wq, mut wp, mut wi) = (writable(&q)?, writable(&p)?, writable(&it)?);
    let start = match (&v0, &p0) {
        (Some(v), _) => vb::Start::Velocity(slice(v)?),
        (_, Some(p)) => vb::Start::Momentum(slice(p)?),
        _ => unreachable!("checked above"),
    };
    let (q0s, us) = (slice(&q0)?, slice(&u)?);
    let dest = vb::RolloutOut { q: data(&mut wq)?, p: data(&mut wp)?, iterations: data(&mut wi)? };
    let f = interruptible(py, progress, b * steps, |c| vb::rollout(sys, c, b, steps, q0s, start, us, dest))?;
    drop((wq, wp, wi));
    let failures = call(f)?.into_iter().map(|(t, e)| (t, format!("trajectory {t}"), e)).collect();
    Ok((q, p, it, failures_out(py, failures)?))
}

/// Batched linearisation of every step: q (B, N+1, nq), p (B, N+1, n), u (B, N, n) ->
/// (A (B, N, 2n, 2n), B (B, N, 2n, n), failures per trajectory (first failed step)).
#[pyfunction]
#[pyo3(name = "_batch_linearize", signature = (vi, q, p, u, progress = None, out = None))]
#[allow(clippy::too_many_arguments)]
pub fn batch_linearize<'py>(
    py: Python<'py>,
    vi: &Bound<'py, PyVariationalIntegrator>,
    q: &Bound<'py, PyAny>,
    p: &Bound<'py, PyAny>,
    u: &Bound<'py, PyAny>,
    progress: Option<&Bound<'py, PyAny>>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Arr<'py>, Arr<'py>, Fails<'py>)> {
    let sys = &*vi.get().inner;
    let (n, nq) = (sys.n(), sys.nq());
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Steps(1), Dim::Fixed(nq)], "(B, N+1, model.nq)")?;
    let p = s.read(p, "p", &[Dim::Batch, Dim::Steps(1), Dim::Fixed(n)], "(B, N+1, n)")?;
    let u = s.read(u, "u", &[Dim::Batch, Dim::Steps(0), Dim::Fixed(n)], "(B, N, n)")?;
    let (b, steps) = (s.batch.unwrap_or(0), s.steps.unwrap_or(0));
    let o = OutArg::new(out, 2)?;
    let (a_out, b_out) = (o.array::<f64>(py, 0, &[b, steps, 2 * n, 2 * n])?, o.array::<f64>(py, 1, &[b, steps, 2 * n, n])?);
    let (mut wa, mut wb) = (writable(&a_out)?, writable(&b_out)?);
    let (qs, ps, us, ad, bd) = (slice(&q)?, slice(&p)?, slice(&u)?, data(&mut wa)?, data(&mut wb)?);
    let f = interruptible(py, progress, b * steps, |c| vb::linearize(sys, c, Trajectories { batch: b, steps, q: qs, p: ps, u: us }, ad, bd))?;
    drop((wa, wb));
    let failures = vb::by_trajectory(call(f)?, steps).into_iter().map(|(t, k, e)| (t, format!("trajectory {t}, step {k}"), e)).collect();
    Ok((a_out, b_out, failures_out(py, failures)?))
}

/// Batched second-order terms of every step contracted with co-states: q, p (B, N+1, n),
/// u (B, N, n), lam (B, N, 2n) -> (hxx (B, N, 2n, 2n), hxu (B, N, 2n, n), huu (B, N, n, n),
/// failures per trajectory (first failed step)).
#[pyfunction]
#[pyo3(name = "_batch_linearize_contracted", signature = (vi, q, p, u, lam, progress = None, out = None))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn batch_linearize_contracted<'py>(
    py: Python<'py>,
    vi: &Bound<'py, PyVariationalIntegrator>,
    q: &Bound<'py, PyAny>,
    p: &Bound<'py, PyAny>,
    u: &Bound<'py, PyAny>,
    lam: &Bound<'py, PyAny>,
    progress: Option<&Bound<'py, PyAny>>,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Arr<'py>, Arr<'py>, Arr<'py>, Fails<'py>)> {
    let sys = &*vi.get().inner;
    let (n, nq) = (sys.n(), sys.nq());
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Steps(1), Dim::Fixed(nq)], "(B, N+1, model.nq)")?;
    let p = s.read(p, "p", &[Dim::Batch, Dim::Steps(1), Dim::Fixed(n)], "(B, N+1, n)")?;
    let u = s.read(u, "u", &[Dim::Batch, Dim::Steps(0), Dim::Fixed(n)], "(B, N, n)")?;
    let lam = s.read(lam, "lam", &[Dim::Batch, Dim::Steps(0), Dim::Fixed(2 * n)], "(B, N, 2n)")?;
    let (b, steps) = (s.batch.unwrap_or(0), s.steps.unwrap_or(0));
    let o = OutArg::new(out, 3)?;
    let (xx, xu, uu) =
        (o.array::<f64>(py, 0, &[b, steps, 2 * n, 2 * n])?, o.array::<f64>(py, 1, &[b, steps, 2 * n, n])?, o.array::<f64>(py, 2, &[b, steps, n, n])?);
    let (mut wxx, mut wxu, mut wuu) = (writable(&xx)?, writable(&xu)?, writable(&uu)?);
    let (qs, ps, us, ls) = (slice(&q)?, slice(&p)?, slice(&u)?, slice(&lam)?);
    let dest = vb::ContractedOut { first: None, xx: data(&mut wxx)?, xu: data(&mut wxu)?, uu: data(&mut wuu)? };
    let f = interruptible(py, progress, b * steps, |c| {
        vb::linearize_second_order_contracted(sys, c, Trajectories { batch: b, steps, q: qs, p: ps, u: us }, ls, dest)
    })?;
    drop((wxx, wxu, wuu));
    let failures = vb::by_trajectory(call(f)?, steps).into_iter().map(|(t, k, e)| (t, format!("trajectory {t}, step {k}"), e)).collect();
    Ok((xx, xu, uu, failures_out(py, failures)?))
}
