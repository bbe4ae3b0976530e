//! Bindings of `vidyn_batch` (the private `_batch_*` functions behind `vidyn.batch`, and
//! `set_num_threads` / `get_num_threads`). Conversion only: inputs are borrowed read-only as
//! contiguous float64 arrays (no copy when they already are), outputs are allocated once as
//! NumPy arrays and filled in place by the engine, row by row, with no Python object per row.
//!
//! Every batch runs on the engine's pool with the interpreter detached (through the one
//! [`detached`] helper); the calling thread wakes every [`POLL`] to call
//! `check_signals()` (Ctrl-C cancels the batch: rows not started are skipped and
//! `KeyboardInterrupt` is raised) and the optional progress callback.
//!
//! Inputs must not be modified by other Python threads while a batch runs: the read-only
//! borrow keeps other Rust extensions out, not arbitrary Python code.
//!
//! Per-row errors come back as `list[tuple[int, VidynError]]`: the row and an exception
//! instance of the class the core error maps to, its message prefixed with the row
//! (`vidyn/batch.py` raises the first one or returns them all).

use crate::detached;
use crate::errors::{CoreError, INPUT_ERROR, VIDYN_ERROR};
use crate::model::PyModel;
use crate::vi::PyVariationalIntegrator;
use numpy::ndarray::IxDyn;
use numpy::{Element, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyList;
use std::convert::Infallible;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;
use vidyn_batch::{self as vb, BatchError, Control, Failures};

/// How often the calling thread checks for signals and reports progress during a batch.
const POLL: Duration = Duration::from_millis(50);

impl CoreError for Infallible {
    fn to_pyerr(&self) -> PyErr {
        match *self {}
    }
}

impl<E: CoreError + std::fmt::Display> CoreError for BatchError<E> {
    fn to_pyerr(&self) -> PyErr {
        match self {
            BatchError::Core(e) => e.to_pyerr(),
            BatchError::Shape(m) => INPUT_ERROR.err(m.clone()),
            BatchError::Cancelled => pyo3::exceptions::PyKeyboardInterrupt::new_err("batch cancelled"),
            other => VIDYN_ERROR.err(other.to_string()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Inputs and outputs

fn shape_str(shape: &[usize]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    }
}

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
enum Dim {
    Fixed(usize),
    Batch,
    Steps(usize), // N + offset
}

/// Sizes `B` and `N` shared by the inputs of one call, fixed by the first array that has them.
#[derive(Default)]
struct Sizes {
    batch: Option<usize>,
    steps: Option<usize>,
}

impl Sizes {
    /// Borrows `x` read-only after checking its shape against `dims` (described to the user
    /// as `desc`, e.g. `(B, model.nq)`). Values are not checked here: NaN, inf and non-unit
    /// quaternions are per-row errors of the core.
    fn read<'py>(&mut self, x: &Bound<'py, PyAny>, name: &str, dims: &[Dim], desc: &str) -> PyResult<PyReadonlyArrayDyn<'py, f64>> {
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

fn slice<'a>(a: &'a PyReadonlyArrayDyn<'_, f64>) -> PyResult<&'a [f64]> {
    a.as_slice().map_err(|e| INPUT_ERROR.err(format!("an input array cannot be read in place: {e}")))
}

/// A new zero-filled C-order array of `shape`.
fn output<'py, T: Element>(py: Python<'py>, shape: &[usize]) -> Bound<'py, PyArrayDyn<T>> {
    PyArrayDyn::<T>::zeros(py, IxDyn(shape), false)
}

/// The data of an array made by [`output`], writable.
///
/// # Safety
/// `a` must come from [`output`] (C-contiguous, not yet shared with Python) and this must be
/// the only reference to its data while the returned slice lives (call it once per array).
#[allow(clippy::mut_from_ref)] // the contract above is what makes this sound
unsafe fn data<'a, T: Element>(a: &'a Bound<'_, PyArrayDyn<T>>) -> &'a mut [T] {
    // SAFETY: per the contract above, no other reference to the data exists.
    unsafe { a.as_slice_mut().expect("new arrays are contiguous") }
}

/// Per-row failures as `[(row, exception instance)]`, messages prefixed by `label(row)`.
fn failures_out<'py, E: CoreError + std::fmt::Display>(py: Python<'py>, failures: Vec<(usize, String, BatchError<E>)>) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for (row, label, e) in failures {
        let err = e.to_pyerr();
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

/// Runs `job` on the engine's pool while this thread, detached, waits for it; every
/// [`POLL`] it re-attaches to check signals (Ctrl-C cancels the batch and raises
/// `KeyboardInterrupt` once the rows in flight have finished) and to call
/// `progress(done, total)` (an exception from the callback cancels the batch too).
fn run<'py, R: Send>(py: Python<'py>, progress: Option<&Bound<'py, PyAny>>, total: usize, job: impl FnOnce(&Control) -> R + Send) -> PyResult<R> {
    let control = Control::new();
    let finished: (Mutex<Option<std::thread::Result<R>>>, Condvar) = (Mutex::new(None), Condvar::new());
    let progress = progress.filter(|p| !p.is_none());
    let mut raised: Option<PyErr> = None;
    let pool = vb::pool();
    pool.in_place_scope(|scope| -> PyResult<()> {
        scope.spawn(|_| {
            let r = catch_unwind(AssertUnwindSafe(|| job(&control)));
            *finished.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
            finished.1.notify_all();
        });
        loop {
            let done = detached(py, || {
                let guard = finished.0.lock().unwrap_or_else(PoisonError::into_inner);
                let (guard, _) = finished.1.wait_timeout_while(guard, POLL, |r| r.is_none()).unwrap_or_else(PoisonError::into_inner);
                Ok::<bool, Infallible>(guard.is_some())
            })?;
            if done {
                return Ok(());
            }
            if raised.is_some() {
                continue; // cancelled: wait (detached) for the rows in flight
            }
            let step = py.check_signals().and_then(|()| progress.map_or(Ok(()), |cb| cb.call1((control.done(), total)).map(drop)));
            if let Err(e) = step {
                control.cancel();
                raised = Some(e);
            }
        }
    })?;
    if let Some(e) = raised {
        return Err(e);
    }
    if let Some(cb) = progress {
        cb.call1((control.done(), total))?;
    }
    let result = finished.0.into_inner().unwrap_or_else(PoisonError::into_inner).expect("the batch job stores its result before notifying");
    result.map_err(|p| {
        let msg = p.downcast_ref::<&str>().map(ToString::to_string).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".to_string());
        VIDYN_ERROR.err(format!("internal error in vidyn.batch (please report): {msg}"))
    })
}

/// Maps a whole-call error of the engine (shapes; never expected after the checks above).
fn call<T, E: CoreError + std::fmt::Display>(r: Result<T, BatchError<E>>) -> PyResult<T> {
    r.map_err(|e| e.to_pyerr())
}

// ---------------------------------------------------------------------------------------
// Thread count

/// Sets the number of threads of vidyn's batch engine (`k = 0`: the default, from
/// `VIDYN_NUM_THREADS` or the number of CPUs). Batches already running keep their threads.
#[pyfunction]
pub fn set_num_threads(py: Python<'_>, k: i64) -> PyResult<()> {
    let k = usize::try_from(k).map_err(|_| INPUT_ERROR.err(format!("k must be a non-negative int, got {k}")))?;
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

/// Batched inverse dynamics: q (B, nq), v (B, nv), a (B, nv) -> (tau (B, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea", signature = (model, q, v, a, progress = None))]
pub fn batch_rnea<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>, a: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &*model.get().inner;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let v = s.read(v, "v", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let a = s.read(a, "a", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let b = s.batch.unwrap_or(0);
    let tau = output::<f64>(py, &[b, m.nv]);
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let (q, v, a, out) = (slice(&q)?, slice(&v)?, slice(&a)?, unsafe { data(&tau) });
    let f = run(py, progress, b, |c| vb::dynamics::rnea(m, c, b, q, v, a, out))?;
    Ok((tau, failures_out(py, rows(call(f)?))?))
}

/// Batched forward dynamics: q (B, nq), v (B, nv), tau (B, nv) -> (ddq (B, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_aba", signature = (model, q, v, tau, progress = None))]
pub fn batch_aba<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>, tau: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &*model.get().inner;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let v = s.read(v, "v", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let tau = s.read(tau, "tau", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let b = s.batch.unwrap_or(0);
    let ddq = output::<f64>(py, &[b, m.nv]);
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let (q, v, tau, out) = (slice(&q)?, slice(&v)?, slice(&tau)?, unsafe { data(&ddq) });
    let f = run(py, progress, b, |c| vb::dynamics::aba(m, c, b, q, v, tau, out))?;
    Ok((ddq, failures_out(py, rows(call(f)?))?))
}

/// Batched joint-space inertia: q (B, nq) -> (M (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_crba", signature = (model, q, progress = None))]
pub fn batch_crba<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &*model.get().inner;
    let q = Sizes::default().read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let b = q.shape()[0];
    let mass = output::<f64>(py, &[b, m.nv, m.nv]);
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let (q, out) = (slice(&q)?, unsafe { data(&mass) });
    let f = run(py, progress, b, |c| vb::dynamics::crba(m, c, b, q, out))?;
    Ok((mass, failures_out(py, rows(call(f)?))?))
}

/// Batched inverse inertia: q (B, nq) -> (Minv (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_minverse", signature = (model, q, progress = None))]
pub fn batch_minverse<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Arr<'py>, Fails<'py>)> {
    let m = &*model.get().inner;
    let q = Sizes::default().read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let b = q.shape()[0];
    let minv = output::<f64>(py, &[b, m.nv, m.nv]);
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let (q, out) = (slice(&q)?, unsafe { data(&minv) });
    let f = run(py, progress, b, |c| vb::dynamics::minverse(m, c, b, q, out))?;
    Ok((minv, failures_out(py, rows(call(f)?))?))
}

type Three<'py> = (Arr<'py>, Arr<'py>, Arr<'py>);

/// Shared body of the functions returning three (B, nv, nv) arrays from q and two or three
/// tangent inputs.
fn three_matrices<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModel>,
    q: &Bound<'py, PyAny>,
    tangents: &[(&Bound<'py, PyAny>, &str)],
    progress: Option<&Bound<'py, PyAny>>,
    job: impl FnOnce(&vidyn_rbd::Model, &Control, usize, &[f64], &[&[f64]], vb::dynamics::Matrices3<'_>) -> Result<Failures<vidyn_rbd::RbdError>, BatchError<vidyn_rbd::RbdError>> + Send,
) -> PyResult<(Three<'py>, Fails<'py>)> {
    let m = &*model.get().inner;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let t = tangents.iter().map(|(x, name)| s.read(x, name, &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")).collect::<PyResult<Vec<_>>>()?;
    let b = s.batch.unwrap_or(0);
    let outs = (output::<f64>(py, &[b, m.nv, m.nv]), output::<f64>(py, &[b, m.nv, m.nv]), output::<f64>(py, &[b, m.nv, m.nv]));
    let q = slice(&q)?;
    let t: Vec<&[f64]> = t.iter().map(slice).collect::<PyResult<_>>()?;
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let mats = vb::dynamics::Matrices3 { first: unsafe { data(&outs.0) }, second: unsafe { data(&outs.1) }, third: unsafe { data(&outs.2) } };
    let f = run(py, progress, b, |c| job(m, c, b, q, &t, mats))?;
    Ok((outs, failures_out(py, rows(call(f)?))?))
}

/// Batched first-order derivatives of inverse dynamics: q (B, nq), v, a (B, nv) ->
/// ((dtau_dq, dtau_dv, dtau_da) each (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea_derivatives", signature = (model, q, v, a, progress = None))]
pub fn batch_rnea_derivatives<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>, a: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Three<'py>, Fails<'py>)> {
    three_matrices(py, model, q, &[(v, "v"), (a, "a")], progress, |m, c, b, q, t, out| vb::dynamics::rnea_derivatives(m, c, b, q, t[0], t[1], out))
}

/// Batched first-order derivatives of forward dynamics: q (B, nq), v, tau (B, nv) ->
/// ((dddq_dq, dddq_dv, dddq_dtau) each (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_aba_derivatives", signature = (model, q, v, tau, progress = None))]
pub fn batch_aba_derivatives<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>, tau: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Three<'py>, Fails<'py>)> {
    three_matrices(py, model, q, &[(v, "v"), (tau, "tau")], progress, |m, c, b, q, t, out| vb::dynamics::aba_derivatives(m, c, b, q, t[0], t[1], out))
}

/// Batched contracted second-order derivatives of inverse dynamics: q (B, nq), v, a, lam
/// (B, nv) -> ((d2tau_dq2, d2tau_dv2, d2tau_dqdv) each (B, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea_second_order_contracted", signature = (model, q, v, a, lam, progress = None))]
#[allow(clippy::too_many_arguments)]
pub fn batch_rnea_second_order_contracted<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>, a: &Bound<'py, PyAny>, lam: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Three<'py>, Fails<'py>)> {
    three_matrices(py, model, q, &[(v, "v"), (a, "a"), (lam, "lam")], progress, |m, c, b, q, t, out| vb::dynamics::rnea_second_order_contracted(m, c, b, q, t[0], t[1], t[2], out))
}

/// Batched second-order derivatives of inverse dynamics: q (B, nq), v, a (B, nv) ->
/// ((d2tau_dq2, d2tau_dv2, d2tau_dqdv, dM_dq) each (B, nv, nv, nv), failures).
#[pyfunction]
#[pyo3(name = "_batch_rnea_second_order", signature = (model, q, v, a, progress = None))]
pub fn batch_rnea_second_order<'py>(py: Python<'py>, model: &Bound<'py, PyModel>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>, a: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<((Arr<'py>, Arr<'py>, Arr<'py>, Arr<'py>), Fails<'py>)> {
    let m = &*model.get().inner;
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Fixed(m.nq)], "(B, model.nq)")?;
    let v = s.read(v, "v", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let a = s.read(a, "a", &[Dim::Batch, Dim::Fixed(m.nv)], "(B, model.nv)")?;
    let b = s.batch.unwrap_or(0);
    let shape = [b, m.nv, m.nv, m.nv];
    let outs = (output::<f64>(py, &shape), output::<f64>(py, &shape), output::<f64>(py, &shape), output::<f64>(py, &shape));
    let (q, v, a) = (slice(&q)?, slice(&v)?, slice(&a)?);
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let t = vb::dynamics::Tensors4 { d2tau_dq2: unsafe { data(&outs.0) }, d2tau_dv2: unsafe { data(&outs.1) }, d2tau_dqdv: unsafe { data(&outs.2) }, dm_dq: unsafe { data(&outs.3) } };
    let f = run(py, progress, b, |c| vb::dynamics::rnea_second_order(m, c, b, q, v, a, t))?;
    Ok((outs, failures_out(py, rows(call(f)?))?))
}

// ---------------------------------------------------------------------------------------
// Trajectories of a variational integrator

/// Batched rollouts: q0 (B, n), exactly one of v0 / p0 (B, n), u (B, N, n) ->
/// (q (B, N+1, n), p (B, N+1, n), iterations (B, N) int64, failures per trajectory).
#[pyfunction]
#[pyo3(name = "_batch_rollout", signature = (vi, q0, v0, p0, u, progress = None))]
#[allow(clippy::type_complexity)]
pub fn batch_rollout<'py>(
    py: Python<'py>,
    vi: &Bound<'py, PyVariationalIntegrator>,
    q0: &Bound<'py, PyAny>,
    v0: Option<&Bound<'py, PyAny>>,
    p0: Option<&Bound<'py, PyAny>>,
    u: &Bound<'py, PyAny>,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Arr<'py>, Arr<'py>, Bound<'py, PyArrayDyn<i64>>, Fails<'py>)> {
    let sys = &*vi.get().inner;
    let n = sys.n();
    let mut s = Sizes::default();
    let q0 = s.read(q0, "q0", &[Dim::Batch, Dim::Fixed(n)], "(B, n)")?;
    let (v0, p0) = match (v0.filter(|x| !x.is_none()), p0.filter(|x| !x.is_none())) {
        (Some(v), None) => (Some(s.read(v, "v0", &[Dim::Batch, Dim::Fixed(n)], "(B, n)")?), None),
        (None, Some(p)) => (None, Some(s.read(p, "p0", &[Dim::Batch, Dim::Fixed(n)], "(B, n)")?)),
        _ => return Err(INPUT_ERROR.err("give exactly one of v0 and p0")),
    };
    let u = s.read(u, "u", &[Dim::Batch, Dim::Steps(0), Dim::Fixed(n)], "(B, N, n)")?;
    let (b, steps) = (s.batch.unwrap_or(0), s.steps.unwrap_or(0));
    let q = output::<f64>(py, &[b, steps + 1, n]);
    let p = output::<f64>(py, &[b, steps + 1, n]);
    let it = output::<i64>(py, &[b, steps]);
    let start = match (&v0, &p0) {
        (Some(v), _) => vb::Start::Velocity(slice(v)?),
        (_, Some(p)) => vb::Start::Momentum(slice(p)?),
        _ => unreachable!("checked above"),
    };
    let (q0s, us) = (slice(&q0)?, slice(&u)?);
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let out = vb::RolloutOut { q: unsafe { data(&q) }, p: unsafe { data(&p) }, iterations: unsafe { data(&it) } };
    let f = run(py, progress, b * steps, |c| vb::rollout(sys, c, b, steps, q0s, start, us, out))?;
    let failures = call(f)?.into_iter().map(|(t, e)| (t, format!("trajectory {t}"), e)).collect();
    Ok((q, p, it, failures_out(py, failures)?))
}

/// Batched linearisation of every step: q, p (B, N+1, n), u (B, N, n) ->
/// (A (B, N, 2n, 2n), B (B, N, 2n, n), failures per trajectory (first failed step)).
#[pyfunction]
#[pyo3(name = "_batch_linearize", signature = (vi, q, p, u, progress = None))]
pub fn batch_linearize<'py>(py: Python<'py>, vi: &Bound<'py, PyVariationalIntegrator>, q: &Bound<'py, PyAny>, p: &Bound<'py, PyAny>, u: &Bound<'py, PyAny>, progress: Option<&Bound<'py, PyAny>>) -> PyResult<(Arr<'py>, Arr<'py>, Fails<'py>)> {
    let sys = &*vi.get().inner;
    let n = sys.n();
    let mut s = Sizes::default();
    let q = s.read(q, "q", &[Dim::Batch, Dim::Steps(1), Dim::Fixed(n)], "(B, N+1, n)")?;
    let p = s.read(p, "p", &[Dim::Batch, Dim::Steps(1), Dim::Fixed(n)], "(B, N+1, n)")?;
    let u = s.read(u, "u", &[Dim::Batch, Dim::Steps(0), Dim::Fixed(n)], "(B, N, n)")?;
    let (b, steps) = (s.batch.unwrap_or(0), s.steps.unwrap_or(0));
    let a_out = output::<f64>(py, &[b, steps, 2 * n, 2 * n]);
    let b_out = output::<f64>(py, &[b, steps, 2 * n, n]);
    // SAFETY: arrays just made by `output`, each borrowed once here.
    let (qs, ps, us, ad, bd) = (slice(&q)?, slice(&p)?, slice(&u)?, unsafe { data(&a_out) }, unsafe { data(&b_out) });
    let f = run(py, progress, b * steps, |c| vb::linearize(sys, c, b, steps, qs, ps, us, ad, bd))?;
    let failures = vb::by_trajectory(call(f)?, steps).into_iter().map(|(t, k, e)| (t, format!("trajectory {t}, step {k}"), e)).collect();
    Ok((a_out, b_out, failures_out(py, failures)?))
}
