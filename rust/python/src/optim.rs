//! Private functions behind `vidyn.optim` (python/vidyn/optim.py normalises the arguments:
//! every array arrives as a C-contiguous float64 ndarray of the final shape). Conversion
//! only; the maths is `vidyn_optim`, run with the interpreter detached.

use crate::convert;
use crate::errors::{py_err, INPUT_ERROR};
use crate::vi::PyVariationalIntegrator;
use crate::{detached, interruptible};
use nalgebra::DMatrix;
use numpy::ndarray::Array1;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArray3};
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};
use vidyn_batch::Control;
use vidyn_optim::{
    closed_loop_rollout, dlqr, fddp, ilqr, lqr, project, projection_optimize, Cancellable, Cost, FrictionCone, FrictionCones, IlqrOptions, LinearDynamics,
    Method, OptimError, PointTrack, ProjectionOptions, ProjectionStatus, QuadraticCost, StageDerivatives, StateSpace, TrackedPoint, TrackingController,
    TrackingCost, ViDynamics,
};

/// Runs an optimiser call through [`interruptible`]: `job` wraps its dynamics in
/// [`Cancellable`] with the control it is given, so Ctrl-C ends the run.
fn cancellable<T: Send>(py: Python<'_>, job: impl FnOnce(&Control<'_>) -> Result<T, OptimError> + Send) -> PyResult<T> {
    interruptible(py, None, 0, job)?.map_err(py_err)
}

/// Time-varying LQR: A (N, nx, nx), B (N, nx, nu), Q (N, nx, nx), R (N, nu, nu), QN (nx, nx)
/// -> (K (N, nu, nx), P (N+1, nx, nx)).
#[pyfunction]
#[pyo3(name = "_optim_lqr")]
pub fn optim_lqr<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    r: &Bound<'py, PyAny>,
    qn: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let a = convert::matrices(a, "A", None)?;
    let nx = a.first().map_or(0, |m| m.nrows());
    if a.first().is_some_and(|m| m.ncols() != nx) {
        return Err(INPUT_ERROR.err("A must be square (N, nx, nx)"));
    }
    let b = convert::matrices(b, "B", None)?;
    let nu = b.first().map_or(0, |m| m.ncols());
    let q = convert::matrices(q, "Q", Some((nx, nx)))?;
    let r = convert::matrices(r, "R", Some((nu, nu)))?;
    let qn = convert::matrix(qn, "QN", nx, nx)?;
    let sol = detached(py, move || lqr(&a, &b, &q, &r, &qn))?;
    Ok((convert::matrices_out(py, &sol.k, nu, nx), convert::matrices_out(py, &sol.p, nx, nx)).into_pyobject(py)?.into_any())
}

/// Steady-state DLQR: A (nx, nx), B (nx, nu), Q (nx, nx), R (nu, nu) -> (K, P, iterations).
#[pyfunction]
#[pyo3(name = "_optim_dlqr")]
#[allow(clippy::too_many_arguments)]
pub fn optim_dlqr<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    r: &Bound<'py, PyAny>,
    tolerance: f64,
    max_iterations: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let (sa, sb) = (convert::shape(a, "A")?, convert::shape(b, "B")?);
    let bad = || INPUT_ERROR.err(format!("A must be (nx, nx) and B (nx, nu); got {} and {}", convert::shape_str(&sa), convert::shape_str(&sb)));
    let (&[nx, nx2], &[nxb, nu]) = (&sa[..], &sb[..]) else {
        return Err(bad());
    };
    if nx != nx2 || nxb != nx {
        return Err(bad());
    }
    let a = convert::matrix(a, "A", nx, nx)?;
    let b = convert::matrix(b, "B", nx, nu)?;
    let q = convert::matrix(q, "Q", nx, nx)?;
    let r = convert::matrix(r, "R", nu, nu)?;
    let (k, p, it) = detached(py, move || dlqr(&a, &b, &q, &r, tolerance, max_iterations))?;
    Ok((convert::matrix_out(py, &k), convert::matrix_out(py, &p), it).into_pyobject(py)?.into_any())
}

fn actuated_list(actuated: Option<Vec<i64>>, n: usize) -> PyResult<Option<Vec<usize>>> {
    actuated
        .map(|v| {
            v.into_iter()
                .map(|i| usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| INPUT_ERROR.err(format!("actuated index {i} out of range 0..{n}"))))
                .collect::<PyResult<Vec<usize>>>()
        })
        .transpose()
}

/// Closed-loop rollout of `u_k = u_ref,k − K_k (x_k ⊖ x_ref,k)` with the VI step.
/// q0 (nq,), p0 (n,), x_ref (N+1, nq + n), u_ref (N, m), K (N, m, 2n) -> (q (N+1, nq), p (N+1, n), u (N, n)).
#[pyfunction]
#[pyo3(name = "_optim_closed_loop", signature = (vi, q0, p0, x_ref, u_ref, gains, actuated = None))]
#[allow(clippy::too_many_arguments)]
pub fn optim_closed_loop<'py>(
    py: Python<'py>,
    vi: &Bound<'py, PyVariationalIntegrator>,
    q0: &Bound<'py, PyAny>,
    p0: &Bound<'py, PyAny>,
    x_ref: &Bound<'py, PyAny>,
    u_ref: &Bound<'py, PyAny>,
    gains: &Bound<'py, PyAny>,
    actuated: Option<Vec<i64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let vi = vi.get().inner.clone();
    vi.model().refuse_mimics("the closed-loop tracking rollout").map_err(py_err)?;
    let (n, nq) = (vi.n(), vi.nq());
    let actuated = actuated_list(actuated, n)?;
    let m = actuated.as_ref().map_or(n, Vec::len);
    let q0 = convert::read(q0, "q0", &[nq], Some("(model.nq,)"))?;
    on_the_group(vi.model(), &q0, "q0")?;
    let p0 = convert::read(p0, "p0", &[n], Some("(n,)"))?;
    let (x_ref, rows) = convert::read_rows(x_ref, "x_ref", nq + n, "(N+1, model.nq + n)", "model.nq + n")?;
    let steps = rows.saturating_sub(1);
    let u_ref = convert::read(u_ref, "u_ref", &[steps, m], Some("(N, m)"))?;
    let gains = convert::matrices(gains, "K", Some((m, 2 * n)))?;
    if gains.len() != steps {
        return Err(INPUT_ERROR.err(format!("K has {} steps, expected N = {steps}", gains.len())));
    }
    let (x, u) = cancellable(py, |c| {
        let dynamics = ViDynamics::new(&vi, actuated)?;
        let ctrl = TrackingController::on(vidyn_optim::Dynamics::state_space(&dynamics), x_ref, u_ref, gains)?;
        let x0: Vec<f64> = q0.iter().chain(&p0).copied().collect();
        let (x, u) = closed_loop_rollout(&Cancellable::new(&dynamics, c), &x0, &ctrl, steps)?;
        Ok((x, dynamics.actuation().expand_all(&u)))
    })?;
    let (q, p) = split_state(&x, nq, n);
    Ok((convert::rows_out(py, &q, nq), convert::rows_out(py, &p, n), convert::rows_out(py, &u, n)).into_pyobject(py)?.into_any())
}

/// The rows `q` (`nq`) and `p` (`n`) of states `x = (q, p)`.
/// InputError naming `name` unless `q` is a configuration of `model` (unit quaternions, unit
/// `(cos, sin)` pairs): checked here so that the message names the Python argument, not the
/// optimiser's internal state.
fn on_the_group(model: &vidyn_rbd::Model, q: &[f64], name: &str) -> PyResult<()> {
    vidyn_rbd::check_configuration(model, q).map_err(|e| INPUT_ERROR.err(format!("{name}: {e}")))
}

fn split_state(x: &[f64], nq: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let rows = x.len() / (nq + n);
    let mut q = Vec::with_capacity(rows * nq);
    let mut p = Vec::with_capacity(rows * n);
    for xk in x.chunks_exact(nq + n) {
        q.extend_from_slice(&xk[..nq]);
        p.extend_from_slice(&xk[nq..]);
    }
    (q, p)
}

/// iLQR on a problem (`_Problem`; see vidyn/optim.py for the arguments).
#[pyfunction]
#[pyo3(name = "_optim_ilqr", signature = (problem, u_min = None, u_max = None, method = "ilqr", max_iterations = 100, tolerance = 1e-8, mu_init = 0.0, velocity_state = false, x_init = None, alpha_max = 4.0, fitted_step = true, xreg = None))]
#[allow(clippy::too_many_arguments)]
pub fn optim_ilqr<'py>(
    py: Python<'py>,
    problem: &Bound<'py, PyProblem>,
    u_min: Option<&Bound<'py, PyAny>>,
    u_max: Option<&Bound<'py, PyAny>>,
    method: &str,
    max_iterations: usize,
    tolerance: f64,
    mu_init: f64,
    velocity_state: bool,
    x_init: Option<&Bound<'py, PyAny>>,
    alpha_max: f64,
    fitted_step: bool,
    xreg: Option<f64>,
) -> PyResult<IlqrOutput> {
    let method = convert::METHOD.parse(method)?;
    let prob = &problem.get().problem;
    // a state guess (N+1, nq + n) in (q, p): multiple shooting (FDDP) instead of iLQR
    let x_init = x_init.map(|x| convert::read(x, "X_init", &[prob.steps + 1, prob.vi.nq() + prob.n], Some("(N+1, model.nq + n)"))).transpose()?;
    for (k, xk) in x_init.iter().flat_map(|x| x.chunks_exact(prob.vi.nq() + prob.n)).enumerate() {
        on_the_group(prob.vi.model(), &xk[..prob.vi.nq()], &format!("X_init[{k}]"))?;
    }
    if x_init.is_some() && velocity_state {
        return Err(INPUT_ERROR.err("a state guess X_init (multiple shooting) takes the (q, p) state"));
    }
    if velocity_state && (!prob.spec.velocity_cost || method != Method::Ilqr) {
        return Err(INPUT_ERROR.err("coordinates='velocity' needs cost_state='velocity' and method='ilqr' (full DDP needs the (q, p) state)"));
    }
    let (vi, n, m, steps) = (&prob.vi, prob.n, prob.m, prob.steps);
    let python = prob.spec.python.as_ref().map(|o| o.clone_ref(py));
    let bound = |b: Option<&Bound<'py, PyAny>>, name: &str| -> PyResult<Option<Vec<f64>>> {
        b.map(|b| {
            let a = convert::read(b, name, &[m], Some("(m,)"));
            // ±inf allowed: read() rejects non-finite entries, so fall back to extract
            a.or_else(|_| b.call_method0("tolist")?.extract::<Vec<f64>>().map_err(|_| INPUT_ERROR.err(format!("{name} must be (m,) floats"))))
        })
        .transpose()
    };
    let options = IlqrOptions {
        method,
        max_iterations,
        tolerance,
        mu_init,
        xreg,
        alpha_max,
        fitted_step,
        u_min: bound(u_min, "u_min")?,
        u_max: bound(u_max, "u_max")?,
        ..IlqrOptions::default()
    };
    if let (Some(lo), Some(hi)) = (&options.u_min, &options.u_max) {
        if lo.len() != m || hi.len() != m {
            return Err(INPUT_ERROR.err(format!("u_min and u_max must have shape (m,) = ({m},)")));
        }
    }
    // `ilqr` itself decides whether to run on the pool (it does not need to for the VI)
    let py_vi = problem.get().vi.bind(py);
    let solved = py_vi.get().take_solved_steps();
    let res = cancellable(py, |c| {
        let dynamics = ViDynamics::new(vi, prob.actuated.clone())?.with_solved_steps(Arc::clone(&solved));
        let dynamics = if velocity_state { dynamics.with_velocity_state()? } else { dynamics };
        // on the state (q, v) the cost is used as it is
        let cost = prob.spec.build(vi.model(), python, !velocity_state, steps, m, Some(&solved))?;
        let x0 = dynamics.state_from_momentum(&prob.q0, &prob.p0)?;
        let mut res = match &x_init {
            Some(guess) => fddp(&Cancellable::new(&dynamics, c), &cost, &x0, guess, &prob.u_init, &options)?,
            None => ilqr(&Cancellable::new(&dynamics, c), &cost, &x0, &prob.u_init, &options)?,
        };
        dynamics.result_in_momentum(&mut res)?;
        let full = dynamics.actuation().expand_all(&res.u);
        Ok((res, full))
    });
    raise_python_error(&prob.spec.error)?;
    let (res, full) = res?;
    py_vi.get().keep_solved_steps(solved);
    IlqrOutput::new(py, &res, &full, n, m, Some(vi.nq()))
}

/// The per-iteration log of an iLQR or FDDP run: one entry an outer iteration in each array
/// (see [`vidyn_optim::IterationLog`]).
#[pyclass(frozen, module = "vidyn._core", name = "_IlqrLog")]
pub struct IlqrLog {
    /// Cost at the start of the iteration.
    #[pyo3(get)]
    cost: Py<PyArray1<f64>>,
    /// Decrease a full step was expected to give.
    #[pyo3(get)]
    expected_reduction: Py<PyArray1<f64>>,
    /// Decrease expected for the accepted step length.
    #[pyo3(get)]
    expected_reduction_alpha: Py<PyArray1<f64>>,
    /// Decrease the accepted step gave.
    #[pyo3(get)]
    actual_reduction: Py<PyArray1<f64>>,
    /// Accepted step length (0 when none).
    #[pyo3(get)]
    alpha: Py<PyArray1<f64>>,
    /// Regularisation of the accepted backward pass.
    #[pyo3(get)]
    mu: Py<PyArray1<f64>>,
    /// `‖∂J/∂u‖` of the open-loop cost (projected on the control limits).
    #[pyo3(get)]
    gradient_norm: Py<PyArray1<f64>>,
    /// Seconds since the start at the end of the iteration.
    #[pyo3(get)]
    time: Py<PyArray1<f64>>,
}

/// What an iLQR or FDDP run (`_optim_ilqr`, `_optim_ilqr_linear`, `_optim_ilqr_maximal`)
/// returns; `vidyn/optim.py` builds its `IlqrResult` from it.
#[pyclass(frozen, module = "vidyn._core", name = "_IlqrOutput")]
pub struct IlqrOutput {
    /// (N+1, nx) the final states.
    #[pyo3(get)]
    x: Py<PyArray2<f64>>,
    /// (N+1, nq) the configurations of `x` on a VI; None elsewhere.
    #[pyo3(get)]
    q: Option<Py<PyArray2<f64>>>,
    /// (N+1, n) the momenta of `x` on a VI; None elsewhere.
    #[pyo3(get)]
    p: Option<Py<PyArray2<f64>>>,
    /// (N, n) the forces of every joint.
    #[pyo3(get, name = "U")]
    forces: Py<PyArray2<f64>>,
    /// (N, m) the optimised controls.
    #[pyo3(get)]
    u: Py<PyArray2<f64>>,
    /// (N, m) the feed-forward terms of the last backward pass.
    #[pyo3(get)]
    k: Py<PyArray2<f64>>,
    /// (N, m, ndx) the feedback gains of the last backward pass.
    #[pyo3(get, name = "K")]
    gains: Py<PyArray3<f64>>,
    /// The final cost.
    #[pyo3(get)]
    cost: f64,
    /// The initial cost, then one entry per accepted step.
    #[pyo3(get)]
    cost_history: Py<PyArray1<f64>>,
    /// The per-iteration log.
    #[pyo3(get)]
    log: Py<IlqrLog>,
    /// Accepted steps.
    #[pyo3(get)]
    iterations: usize,
    /// Whether the run converged.
    #[pyo3(get)]
    converged: bool,
    /// `"converged"`, `"max_iterations"` or `"regularisation_limit"`.
    #[pyo3(get)]
    status: &'static str,
    /// What the run ended with, in words.
    #[pyo3(get)]
    message: String,
    /// Seconds the run took.
    #[pyo3(get)]
    wall_time: f64,
    /// Seconds of work after accepted rollouts (costs, derivatives, backward passes alongside).
    #[pyo3(get)]
    time_linearize: f64,
    /// Seconds of the backward passes not run alongside the derivatives.
    #[pyo3(get)]
    time_backward: f64,
    /// Seconds of the forward passes (rollouts, rejected trials).
    #[pyo3(get)]
    time_forward: f64,
}

impl IlqrOutput {
    /// The output of `res`, with `full` the forces of all `n` joints (`m` of them optimised);
    /// `nq`: on a VI, the number of configuration coordinates, by which the states `(q, p)`
    /// are split into `q` and `p`.
    fn new(py: Python<'_>, res: &vidyn_optim::IlqrResult, full: &[f64], n: usize, m: usize, nq: Option<usize>) -> PyResult<Self> {
        let nx = res.x.len() / (res.u.len() / m.max(1) + 1);
        // the gains act on tangent deviations (ndx columns: fewer than nx with quaternions)
        let ndx = res.gains.first().map_or(nx, DMatrix::ncols);
        let qp = nq.map(|nq| {
            let (q, p) = split_state(&res.x, nq, n);
            (q, p, nq)
        });
        let kff: Vec<f64> = res.k_ff.iter().flat_map(|v| v.iter().copied()).collect();
        let col = |f: fn(&vidyn_optim::IterationLog) -> f64| Array1::from_iter(res.log.iter().map(f)).into_pyarray(py).unbind();
        let log = IlqrLog {
            cost: col(|l| l.cost),
            expected_reduction: col(|l| l.expected_reduction),
            expected_reduction_alpha: col(|l| l.expected_reduction_alpha),
            actual_reduction: col(|l| l.actual_reduction),
            alpha: col(|l| l.alpha),
            mu: col(|l| l.mu),
            gradient_norm: col(|l| l.gradient_norm),
            time: col(|l| l.time),
        };
        Ok(Self {
            x: convert::rows_out(py, &res.x, nx).unbind(),
            q: qp.as_ref().map(|(q, _, nq)| convert::rows_out(py, q, *nq).unbind()),
            p: qp.as_ref().map(|(_, p, _)| convert::rows_out(py, p, n).unbind()),
            forces: convert::rows_out(py, full, n).unbind(),
            u: convert::rows_out(py, &res.u, m).unbind(),
            k: convert::rows_out(py, &kff, m).unbind(),
            gains: convert::matrices_out(py, &res.gains, m, ndx).unbind(),
            cost: res.cost,
            cost_history: PyArray1::from_slice(py, &res.cost_history).unbind(),
            log: Py::new(py, log)?,
            iterations: res.iterations,
            converged: res.converged,
            status: match res.status {
                vidyn_optim::IlqrStatus::Converged => "converged",
                vidyn_optim::IlqrStatus::MaxIterations => "max_iterations",
                vidyn_optim::IlqrStatus::RegularisationLimit => "regularisation_limit",
            },
            message: res.message.clone(),
            wall_time: res.wall_time,
            time_linearize: res.time_linearize,
            time_backward: res.time_backward,
            time_forward: res.time_forward,
        })
    }
}

/// iLQR on a time-varying linear system `x_{k+1} = A_k x_k + B_k u_k` (A (N, nx, nx),
/// B (N, nx, nu)) with the quadratic cost (an output without `q`, `p`).
#[pyfunction]
#[pyo3(name = "_optim_ilqr_linear", signature = (a, b, x0, u_init, q, r, qn, x_ref, u_ref, u_min = None, u_max = None, max_iterations = 100, tolerance = 1e-8, mu_init = 0.0, method = "ilqr", alpha_max = 4.0, fitted_step = true))]
#[allow(clippy::too_many_arguments)]
pub fn optim_ilqr_linear<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    x0: &Bound<'py, PyAny>,
    u_init: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    r: &Bound<'py, PyAny>,
    qn: &Bound<'py, PyAny>,
    x_ref: &Bound<'py, PyAny>,
    u_ref: &Bound<'py, PyAny>,
    u_min: Option<Vec<f64>>,
    u_max: Option<Vec<f64>>,
    max_iterations: usize,
    tolerance: f64,
    mu_init: f64,
    method: &str,
    alpha_max: f64,
    fitted_step: bool,
) -> PyResult<IlqrOutput> {
    let method = convert::METHOD.parse(method)?;
    let a = convert::matrices(a, "A", None)?;
    let nx = a.first().map_or(0, |m| m.nrows());
    let b = convert::matrices(b, "B", None)?;
    let nu = b.first().map_or(0, |m| m.ncols());
    let x0 = convert::read(x0, "x0", &[nx], Some("(nx,)"))?;
    let (u_init, steps) = convert::read_rows(u_init, "U_init", nu, "(N, nu)", "nu")?;
    let quad = quadratic_cost([q, r, qn, x_ref, u_ref], nx, nu, steps)?;
    let options = IlqrOptions { method, max_iterations, tolerance, mu_init, alpha_max, fitted_step, u_min, u_max, ..IlqrOptions::default() };
    let res = cancellable(py, |c| {
        if a.len() != steps || b.len() != steps {
            return Err(OptimError::InvalidInput(format!("A has {} and B {} steps; U_init has N = {steps}", a.len(), b.len())));
        }
        let dynamics = LinearDynamics::new(a, b)?;
        ilqr(&Cancellable::new(&dynamics, c), &quad, &x0, &u_init, &options)
    })?;
    IlqrOutput::new(py, &res, &res.u, nu, nu, None)
}

/// The quadratic cost on a vector-space state of `nx` entries and `nu` controls over `steps`
/// steps from the arrays `vidyn/optim.py` passes: `Q` (N or 1, nx, nx), `R` (N or 1, nu, nu),
/// `QN` (nx, nx), `x_ref` (N+1, nx), `u_ref` (N, nu).
fn quadratic_cost(arrays: [&Bound<'_, PyAny>; 5], nx: usize, nu: usize, steps: usize) -> PyResult<QuadraticCost> {
    let [q, r, qn, x_ref, u_ref] = arrays;
    let qs = convert::matrices(q, "Q", Some((nx, nx)))?;
    let rs = convert::matrices(r, "R", Some((nu, nu)))?;
    let qn = convert::matrix(qn, "QN", nx, nx)?;
    let x_ref = convert::read(x_ref, "x_ref", &[steps + 1, nx], Some("(N+1, nx)"))?;
    let u_ref = convert::read(u_ref, "u_ref", &[steps, nu], Some("(N, nu)"))?;
    let quad = QuadraticCost::new(qs, rs, qn, x_ref, u_ref).map_err(py_err)?;
    quad.check_horizon(steps).map_err(py_err)?;
    Ok(quad)
}

/// iLQR (or, from a state guess `x_init` (N+1, 2n), FDDP) on a [`vidyn_maximal::MaximalIntegrator`] through its
/// minimal coordinates (`vidyn_optim::MaximalDynamics`: state `x = (q, v)`, `v_k = (q_k −
/// q_{k−1})/Δt`, trees of revolute/prismatic joints), with the quadratic cost on `x` (`q`
/// (N or 1, 2n, 2n), `r` (N or 1, m, m), `qn` (2n, 2n), `x_ref` (N+1, 2n), `u_ref` (N, m)).
/// `x` is `(q, v)`; the output has no `q`, `p`.
#[pyfunction]
#[pyo3(name = "_optim_ilqr_maximal", signature = (mi, x0, u_init, q, r, qn, x_ref, u_ref, actuated = None, u_min = None, u_max = None, max_iterations = 100, tolerance = 1e-8, mu_init = 0.0, method = "ilqr", x_init = None, alpha_max = 4.0, fitted_step = true))]
#[allow(clippy::too_many_arguments)]
pub fn optim_ilqr_maximal<'py>(
    py: Python<'py>,
    mi: &Bound<'py, crate::maximal::PyMaximalIntegrator>,
    x0: &Bound<'py, PyAny>,
    u_init: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    r: &Bound<'py, PyAny>,
    qn: &Bound<'py, PyAny>,
    x_ref: &Bound<'py, PyAny>,
    u_ref: &Bound<'py, PyAny>,
    actuated: Option<Vec<usize>>,
    u_min: Option<Vec<f64>>,
    u_max: Option<Vec<f64>>,
    max_iterations: usize,
    tolerance: f64,
    mu_init: f64,
    method: &str,
    x_init: Option<&Bound<'py, PyAny>>,
    alpha_max: f64,
    fitted_step: bool,
) -> PyResult<IlqrOutput> {
    use vidyn_optim::Dynamics;
    let method = convert::METHOD.parse(method)?;
    let integrator = mi.get().current();
    let dynamics = vidyn_optim::MaximalDynamics::in_joint_coordinates(&integrator, actuated).map_err(py_err)?;
    let (nx, m) = (dynamics.nx(), dynamics.nu());
    let x0 = convert::read(x0, "x0", &[nx], Some("(2n,)"))?;
    let (u_init, steps) = convert::read_rows(u_init, "U_init", m, "(N, m)", "m")?;
    let quad = quadratic_cost([q, r, qn, x_ref, u_ref], nx, m, steps)?;
    let x_init = x_init.map(|x| convert::read(x, "X_init", &[steps + 1, nx], Some("(N+1, 2n)"))).transpose()?;
    let options = IlqrOptions { method, max_iterations, tolerance, mu_init, alpha_max, fitted_step, u_min, u_max, ..IlqrOptions::default() };
    let res = cancellable(py, |c| {
        let dynamics = Cancellable::new(&dynamics, c);
        match &x_init {
            Some(guess) => fddp(&dynamics, &quad, &x0, guess, &u_init, &options),
            None => ilqr(&dynamics, &quad, &x0, &u_init, &options),
        }
    })?;
    let full = dynamics.actuation().expand_all(&res.u);
    IlqrOutput::new(py, &res, &full, integrator.mechanism().require_model().map_err(py_err)?.nv, m, None)
}

/// A tracked point as `vidyn/optim.py` passes it: `(point, targets, weights)`.
type TrackArgs<'py> = (String, Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// The tracked points of `tracks`, as `vidyn/optim.py` passes them: `(point, targets,
/// weights, offset)` with `point` a frame name or `"com"`, `targets` `(1, 3)` or `(N+1, 3)`,
/// `weights` `(N+1,)`, `offset` `(3,)` (a point in the frame's axes; zero for `"com"`).
fn point_tracks(vi: &vidyn_vi::VariationalIntegrator, tracks: Vec<TrackArgs<'_>>, steps: usize) -> PyResult<Vec<PointTrack>> {
    tracks
        .into_iter()
        .enumerate()
        .map(|(i, (point, targets, weights, offset))| {
            let point = match point.as_str() {
                "com" => TrackedPoint::CentreOfMass,
                name => TrackedPoint::Frame(vi.model().frame_index(name).map_err(py_err)?),
            };
            let (targets, rows) = convert::read_rows(&targets, &format!("tracks[{i}].target"), 3, "(3,) or (N+1, 3)", "3")?;
            if rows != 1 && rows != steps + 1 {
                return Err(INPUT_ERROR.err(format!("tracks[{i}].target has {rows} rows, expected 1 or N+1 = {}", steps + 1)));
            }
            let weights = convert::read(&weights, &format!("tracks[{i}].weight"), &[steps + 1], Some("(N+1,)"))?;
            if let Some((k, w)) = weights.iter().enumerate().find(|(_, w)| **w < 0.0) {
                return Err(INPUT_ERROR.err(format!("tracks[{i}].weight[{k}] is {w}, expected ≥ 0")));
            }
            let offset = nalgebra::Vector3::from_column_slice(&convert::read(&offset, &format!("tracks[{i}].offset"), &[3], Some("(3,)"))?);
            if point == TrackedPoint::CentreOfMass && offset != nalgebra::Vector3::zeros() {
                return Err(INPUT_ERROR.err(format!("tracks[{i}].offset is {:?}; the centre of mass takes none (zeros)", offset.as_slice())));
            }
            Ok(PointTrack { point, offset, targets: targets.chunks_exact(3).map(nalgebra::Vector3::from_column_slice).collect(), weights })
        })
        .collect()
}

/// The inputs both VI optimisers share, read and checked: the integrator, sizes (`n` joints,
/// `m` actuated, `steps`), the initial state and controls, and the cost.
struct OptimProblem {
    vi: Arc<vidyn_vi::VariationalIntegrator>,
    n: usize,
    m: usize,
    steps: usize,
    actuated: Option<Vec<usize>>,
    q0: Vec<f64>,
    p0: Vec<f64>,
    u_init: Vec<f64>,
    spec: CostSpec,
}

/// An optimal-control problem on a VI, read and checked once (`vidyn.optim.Problem` builds
/// it): the integrator, the initial state and controls, the actuated joints and the cost.
/// `_optim_ilqr` and `_optim_projection` solve it, as often as wanted.
#[pyclass(frozen, module = "vidyn._core", name = "_Problem")]
pub struct PyProblem {
    vi: Py<PyVariationalIntegrator>,
    problem: OptimProblem,
}

#[pymethods]
impl PyProblem {
    /// Arrays as prepared by `vidyn/optim.py`: `q0`, `p0` (n,), `u_init` (N, m), `q` (N or 1,
    /// 2n, 2n), `r` (N or 1, m, m), `qn` (2n, 2n), `x_ref` (N+1, 2n), `u_ref` (N, m).
    #[new]
    #[pyo3(signature = (vi, q0, p0, u_init, q, r, qn, x_ref, u_ref, actuated = None, velocity_cost = false, tracks = None, friction = None, cost = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        vi: &Bound<'_, PyVariationalIntegrator>,
        q0: &Bound<'_, PyAny>,
        p0: &Bound<'_, PyAny>,
        u_init: &Bound<'_, PyAny>,
        q: &Bound<'_, PyAny>,
        r: &Bound<'_, PyAny>,
        qn: &Bound<'_, PyAny>,
        x_ref: &Bound<'_, PyAny>,
        u_ref: &Bound<'_, PyAny>,
        actuated: Option<Vec<i64>>,
        velocity_cost: bool,
        tracks: Option<Vec<TrackArgs<'_>>>,
        friction: Option<Vec<(usize, f64, f64, f64)>>,
        cost: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let cones = friction.unwrap_or_default().into_iter().map(|(first, mu, weight, tip)| FrictionCone { first, mu, weight, tip }).collect();
        let problem = OptimProblem::read(vi, [q0, p0, u_init, q, r, qn, x_ref, u_ref], actuated, velocity_cost, tracks.unwrap_or_default(), cones, cost)?;
        Ok(Self { vi: vi.clone().unbind(), problem })
    }

    /// The number of steps N.
    #[getter]
    fn steps(&self) -> usize {
        self.problem.steps
    }
}

impl OptimProblem {
    /// `arrays`: `q0, p0, U_init, Q, R, QN, x_ref, u_ref` as passed by `vidyn/optim.py`.
    fn read(
        vi: &Bound<'_, PyVariationalIntegrator>,
        arrays: [&Bound<'_, PyAny>; 8],
        actuated: Option<Vec<i64>>,
        velocity_cost: bool,
        tracks: Vec<TrackArgs<'_>>,
        cones: Vec<FrictionCone>,
        cost: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let [q0, p0, u_init, q, r, qn, x_ref, u_ref] = arrays;
        let vi = vi.get().inner.clone();
        vi.model().refuse_mimics("vidyn.optim").map_err(py_err)?;
        let (n, nq) = (vi.n(), vi.nq());
        let actuated = actuated_list(actuated, n)?;
        let m = actuated.as_ref().map_or(n, Vec::len);
        let q0 = convert::read(q0, "q0", &[nq], Some("(model.nq,)"))?;
        on_the_group(vi.model(), &q0, "q0")?;
        let p0 = convert::read(p0, "p0", &[n], Some("(n,)"))?;
        let (u_init, steps) = convert::read_rows(u_init, "U_init", m, "(N, m)", "m")?;
        let qs = convert::matrices(q, "Q", Some((2 * n, 2 * n)))?;
        let rs = convert::matrices(r, "R", Some((m, m)))?;
        let qn = convert::matrix(qn, "QN", 2 * n, 2 * n)?;
        let x_ref = convert::read(x_ref, "x_ref", &[steps + 1, nq + n], Some("(N+1, model.nq + n)"))?;
        let u_ref = convert::read(u_ref, "u_ref", &[steps, m], Some("(N, m)"))?;
        let tracks = point_tracks(&vi, tracks, steps)?;
        let friction = (!cones.is_empty()).then(|| FrictionCones { vi: Arc::clone(&vi), actuated: actuated.clone(), cones, solved: None });
        let spec = CostSpec { qs, rs, qn, x_ref, u_ref, velocity_cost, tracks, friction, python: cost, error: Arc::new(Mutex::new(None)) };
        Ok(Self { vi, n, m, steps, actuated, q0, p0, u_init, spec })
    }
}

/// What the bindings' cost is built from: the quadratic tracking cost (on `(q, p)` or on
/// `(q, v)`), plus tracked points (frames, the centre of mass), or a Python object instead of all.
struct CostSpec {
    qs: Vec<DMatrix<f64>>,
    rs: Vec<DMatrix<f64>>,
    qn: DMatrix<f64>,
    x_ref: Vec<f64>,
    u_ref: Vec<f64>,
    velocity_cost: bool,
    tracks: Vec<PointTrack>,
    friction: Option<FrictionCones>,
    python: Option<Py<PyAny>>,
    /// Where a Python cost's exception is kept during a solve.
    error: Arc<Mutex<Option<PyErr>>>,
}

impl CostSpec {
    /// The cost of one solve: the Python object (`python`, a new reference to `self.python`,
    /// taken with the GIL held) or the built-in [`TrackingCost`]; `velocity`: whether a
    /// velocity cost is mapped through the Legendre transform (not when the solver already
    /// iterates on `(q, v)`); `solved`: the optimised dynamics' store of solved steps, from
    /// which friction cones read the multipliers.
    #[allow(clippy::too_many_arguments)]
    fn build(
        &self,
        model: &Arc<vidyn_rbd::Model>,
        python: Option<Py<PyAny>>,
        velocity: bool,
        steps: usize,
        nu: usize,
        solved: Option<&Arc<vidyn_vi::SolvedSteps>>,
    ) -> Result<Box<dyn Cost>, OptimError> {
        let space = StateSpace::of_model(model);
        if let Some(obj) = python {
            return Ok(Box::new(PyCost { obj, nx: space.ndx(), nu, error: Arc::clone(&self.error) }));
        }
        let nx = space.nx();
        let quadratic = QuadraticCost::on_space(space, self.qs.clone(), self.rs.clone(), self.qn.clone(), self.x_ref.clone(), self.u_ref.clone())?;
        if self.friction.is_some() && !velocity {
            return Err(OptimError::NotImplemented("friction cones on the velocity state (coordinates=\"velocity\")".into()));
        }
        let friction = self.friction.clone().map(|f| FrictionCones { solved: solved.cloned(), ..f });
        TrackingCost { quadratic, on_velocity: self.velocity_cost && velocity, tracks: self.tracks.clone(), friction }.build(model, steps, nx)
    }
}

/// Raises the first exception a Python cost raised during the solve, if any (it wins over
/// the solver's own error, which only says that the cost failed).
fn raise_python_error(error: &Mutex<Option<PyErr>>) -> PyResult<()> {
    match error.lock().ok().and_then(|mut e| e.take()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// A stage cost written in Python (vidyn/optim.py wraps the user's object so that every
/// method returns float64 arrays): `running(k, x, u) -> float`,
/// `running_derivatives(k, x, u) -> (l, l_x (nx,), l_u (nu,), l_xx (nx, nx), l_uu (nu, nu),
/// l_ux (nu, nx))`, `terminal(x) -> float`, `terminal_derivatives(x) -> (l, l_x, l_xx)`.
/// Called with the interpreter attached, one stage at a time (`parallel() == false`). The
/// first exception is kept in `error` and re-raised when the solver returns.
struct PyCost {
    obj: Py<PyAny>,
    /// Tangent dimension of the state (the length of `l_x`).
    nx: usize,
    nu: usize,
    error: Arc<Mutex<Option<PyErr>>>,
}

impl PyCost {
    fn call<T>(&self, f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>) -> vidyn_optim::Result<T> {
        Python::attach(|py| f(py, self.obj.bind(py))).map_err(|e| {
            let msg = e.to_string();
            if let Ok(mut slot) = self.error.lock() {
                if slot.is_none() {
                    *slot = Some(e);
                }
            }
            OptimError::InvalidInput(format!("the Python cost raised: {msg}"))
        })
    }

    fn value(v: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
        let v: f64 = v.extract().map_err(|_| INPUT_ERROR.err(format!("the Python cost's {what} must return a float")))?;
        if !v.is_finite() {
            return Err(INPUT_ERROR.err(format!("the Python cost's {what} returned {v}")));
        }
        Ok(v)
    }

    fn fill(m: &mut DMatrix<f64>, x: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
        let (r, c) = m.shape();
        let data = convert::read(x, name, &[r, c], None)?;
        for i in 0..r {
            for j in 0..c {
                m[(i, j)] = data[i * c + j];
            }
        }
        Ok(())
    }

    fn fill_vec(v: &mut nalgebra::DVector<f64>, x: &Bound<'_, PyAny>, name: &str) -> PyResult<()> {
        let data = convert::read(x, name, &[v.len()], None)?;
        v.copy_from_slice(&data);
        Ok(())
    }
}

impl Cost for PyCost {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> vidyn_optim::Result<f64> {
        self.call(|py, obj| Self::value(&obj.call_method1("running", (k, PyArray1::from_slice(py, x), PyArray1::from_slice(py, u)))?, "running()"))
    }
    fn terminal_value(&self, x: &[f64]) -> vidyn_optim::Result<f64> {
        self.call(|py, obj| Self::value(&obj.call_method1("terminal", (PyArray1::from_slice(py, x),))?, "terminal()"))
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> vidyn_optim::Result<()> {
        let (nx, nu) = (self.nx, self.nu);
        self.call(|py, obj| {
            let t = obj.call_method1("running_derivatives", (k, PyArray1::from_slice(py, x), PyArray1::from_slice(py, u)))?;
            let parts: Vec<Bound<'_, PyAny>> =
                t.extract().map_err(|_| INPUT_ERROR.err("running_derivatives() must return a tuple (l, l_x, l_u, l_xx, l_uu, l_ux)"))?;
            let [l, lx, lu, lxx, luu, lux] = &parts[..] else {
                return Err(INPUT_ERROR.err(format!("running_derivatives() returned {} items, expected 6: (l, l_x, l_u, l_xx, l_uu, l_ux)", parts.len())));
            };
            out.l = Self::value(l, "running_derivatives() l")?;
            Self::fill_vec(&mut out.lx, lx, &format!("l_x (nx = {nx})"))?;
            Self::fill_vec(&mut out.lu, lu, &format!("l_u (nu = {nu})"))?;
            Self::fill(&mut out.lxx, lxx, "l_xx")?;
            Self::fill(&mut out.luu, luu, "l_uu")?;
            Self::fill(&mut out.lux, lux, "l_ux")?;
            Ok(())
        })
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> vidyn_optim::Result<()> {
        let nx = self.nx;
        self.call(|py, obj| {
            let t = obj.call_method1("terminal_derivatives", (PyArray1::from_slice(py, x),))?;
            let parts: Vec<Bound<'_, PyAny>> = t.extract().map_err(|_| INPUT_ERROR.err("terminal_derivatives() must return a tuple (l, l_x, l_xx)"))?;
            let [l, lx, lxx] = &parts[..] else {
                return Err(INPUT_ERROR.err(format!("terminal_derivatives() returned {} items, expected 3: (l, l_x, l_xx)", parts.len())));
            };
            out.l = Self::value(l, "terminal_derivatives() l")?;
            Self::fill_vec(&mut out.lx, lx, &format!("terminal l_x (nx = {nx})"))?;
            Self::fill(&mut out.lxx, lxx, "terminal l_xx")?;
            Ok(())
        })
    }
    fn parallel(&self) -> bool {
        false
    }
}

/// Johnson's projection-operator optimiser on a problem (`_Problem`; see vidyn/optim.py).
#[pyfunction]
#[pyo3(name = "_optim_projection", signature = (problem, x_guess = None, model = "auto", newton_after = 10, max_iterations = 200, tolerance = 1e-6, proj_q = None, proj_r = None, proj_qn = None))]
#[allow(clippy::too_many_arguments)]
pub fn optim_projection<'py>(
    py: Python<'py>,
    problem: &Bound<'py, PyProblem>,
    x_guess: Option<&Bound<'py, PyAny>>,
    model: &str,
    newton_after: usize,
    max_iterations: usize,
    tolerance: f64,
    proj_q: Option<&Bound<'py, PyAny>>,
    proj_r: Option<&Bound<'py, PyAny>>,
    proj_qn: Option<&Bound<'py, PyAny>>,
) -> PyResult<ProjectionOutput> {
    let descent = convert::DESCENT_MODEL.parse(model)?;
    let prob = &problem.get().problem;
    let (vi, n, m, steps) = (&prob.vi, prob.n, prob.m, prob.steps);
    let python = prob.spec.python.as_ref().map(|o| o.clone_ref(py));
    let x_guess = x_guess.map(|x| convert::read(x, "x_guess", &[steps + 1, vi.nq() + n], Some("(N+1, model.nq + n)"))).transpose()?;
    for (k, xk) in x_guess.iter().flat_map(|x| x.chunks_exact(vi.nq() + n)).enumerate() {
        on_the_group(vi.model(), &xk[..vi.nq()], &format!("x_guess[{k}]"))?;
    }
    let options = ProjectionOptions {
        model: descent,
        newton_after,
        max_iterations,
        tolerance,
        proj_q: proj_q.map(|w| convert::matrix(w, "proj_Q", 2 * n, 2 * n)).transpose()?,
        proj_r: proj_r.map(|w| convert::matrix(w, "proj_R", m, m)).transpose()?,
        proj_qn: proj_qn.map(|w| convert::matrix(w, "proj_QN", 2 * n, 2 * n)).transpose()?,
        ..ProjectionOptions::default()
    };
    // on the calling thread, which checks for Ctrl-C; its parallel loops enter the pool
    let res = cancellable(py, |c| {
        let dynamics = ViDynamics::new(vi, prob.actuated.clone())?;
        let cost = prob.spec.build(vi.model(), python, true, steps, m, None)?;
        let x0: Vec<f64> = prob.q0.iter().chain(&prob.p0).copied().collect();
        let res = projection_optimize(&Cancellable::new(&dynamics, c), &cost, &x0, &prob.u_init, x_guess.as_deref(), &options)?;
        let full = dynamics.actuation().expand_all(&res.u);
        Ok((res, full))
    });
    raise_python_error(&prob.spec.error)?;
    let (res, full) = res?;
    ProjectionOutput::new(py, &res, &full, vi.nq(), n, m)
}

/// The per-iteration log of a projection-operator run (see [`vidyn_optim::ProjectionLog`]).
#[pyclass(frozen, module = "vidyn._core", name = "_ProjectionLog")]
pub struct ProjectionLog {
    /// Cost at the start of the iteration.
    #[pyo3(get)]
    cost: Py<PyArray1<f64>>,
    /// `Dh∘δξ` of the direction used.
    #[pyo3(get)]
    slope: Py<PyArray1<f64>>,
    /// Accepted step `λ` (0 when none).
    #[pyo3(get)]
    step: Py<PyArray1<f64>>,
    /// Armijo trials (as floats).
    #[pyo3(get)]
    trials: Py<PyArray1<f64>>,
    /// Seconds since the start at the end of the iteration.
    #[pyo3(get)]
    time: Py<PyArray1<f64>>,
    /// The descent model of each iteration: `"steepest"`, `"quasi"` or `"newton"`.
    #[pyo3(get)]
    model: Vec<&'static str>,
}

/// What `_optim_projection` returns; `vidyn/optim.py` builds its `ProjectionResult` from it.
#[pyclass(frozen, module = "vidyn._core", name = "_ProjectionOutput")]
pub struct ProjectionOutput {
    /// (N+1, 2n) the final states `(q, p)`.
    #[pyo3(get)]
    x: Py<PyArray2<f64>>,
    /// (N+1, n) the configurations of `x`.
    #[pyo3(get)]
    q: Py<PyArray2<f64>>,
    /// (N+1, n) the momenta of `x`.
    #[pyo3(get)]
    p: Py<PyArray2<f64>>,
    /// (N, n) the forces of every joint.
    #[pyo3(get, name = "U")]
    forces: Py<PyArray2<f64>>,
    /// (N, m) the optimised controls.
    #[pyo3(get)]
    u: Py<PyArray2<f64>>,
    /// (N, m, 2n) the projection gains about the final trajectory.
    #[pyo3(get, name = "K")]
    gains: Py<PyArray3<f64>>,
    /// The final cost.
    #[pyo3(get)]
    cost: f64,
    /// The cost of the first iterate, then one entry per iteration.
    #[pyo3(get)]
    cost_history: Py<PyArray1<f64>>,
    /// The per-iteration log.
    #[pyo3(get)]
    log: Py<ProjectionLog>,
    /// Iterations run.
    #[pyo3(get)]
    iterations: usize,
    /// Whether the run converged.
    #[pyo3(get)]
    converged: bool,
    /// `"converged"`, `"max_iterations"` or `"line_search_failed"`.
    #[pyo3(get)]
    status: &'static str,
    /// What the run ended with, in words.
    #[pyo3(get)]
    message: String,
    /// Seconds the run took.
    #[pyo3(get)]
    wall_time: f64,
}

impl ProjectionOutput {
    /// The output of `res` on a VI of `n` joints (`nq` coordinates), with `full` their forces
    /// (`m` optimised).
    fn new(py: Python<'_>, res: &vidyn_optim::ProjectionResult, full: &[f64], nq: usize, n: usize, m: usize) -> PyResult<Self> {
        let col = |f: fn(&vidyn_optim::ProjectionLog) -> f64| Array1::from_iter(res.log.iter().map(f)).into_pyarray(py).unbind();
        let log = ProjectionLog {
            cost: col(|l| l.cost),
            slope: col(|l| l.slope),
            step: col(|l| l.step),
            trials: col(|l| l.trials as f64),
            time: col(|l| l.time),
            model: res.log.iter().map(|l| convert::DESCENT_MODEL.name(l.model)).collect(),
        };
        let (q, p) = split_state(&res.x, nq, n);
        Ok(Self {
            x: convert::rows_out(py, &res.x, nq + n).unbind(),
            q: convert::rows_out(py, &q, nq).unbind(),
            p: convert::rows_out(py, &p, n).unbind(),
            forces: convert::rows_out(py, full, n).unbind(),
            u: convert::rows_out(py, &res.u, m).unbind(),
            gains: convert::matrices_out(py, &res.gains, m, 2 * n).unbind(),
            cost: res.cost,
            cost_history: PyArray1::from_slice(py, &res.cost_history).unbind(),
            log: Py::new(py, log)?,
            iterations: res.iterations,
            converged: res.converged,
            status: match res.status {
                ProjectionStatus::Converged => "converged",
                ProjectionStatus::MaxIterations => "max_iterations",
                ProjectionStatus::LineSearchFailed => "line_search_failed",
            },
            message: res.message.clone(),
            wall_time: res.wall_time,
        })
    }
}

/// The projection `P(ξ̄)` (Johnson 2012, eq. 6.10) on the VI: x_bar (N+1, nq + n), u_bar (N, m),
/// K (N, m, 2n) -> (x (N+1, nq + n), u (N, m)).
#[pyfunction]
#[pyo3(name = "_optim_project", signature = (vi, x_bar, u_bar, gains, actuated = None))]
pub fn optim_project<'py>(
    py: Python<'py>,
    vi: &Bound<'py, PyVariationalIntegrator>,
    x_bar: &Bound<'py, PyAny>,
    u_bar: &Bound<'py, PyAny>,
    gains: &Bound<'py, PyAny>,
    actuated: Option<Vec<i64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let vi = vi.get().inner.clone();
    vi.model().refuse_mimics("the projection").map_err(py_err)?;
    let (n, nx) = (vi.n(), vi.nq() + vi.n());
    let actuated = actuated_list(actuated, n)?;
    let m = actuated.as_ref().map_or(n, Vec::len);
    let (u_bar, steps) = convert::read_rows(u_bar, "u_bar", m, "(N, m)", "m")?;
    let x_bar = convert::read(x_bar, "x_bar", &[steps + 1, nx], Some("(N+1, model.nq + n)"))?;
    for (k, xk) in x_bar.chunks_exact(nx).enumerate() {
        on_the_group(vi.model(), &xk[..vi.nq()], &format!("x_bar[{k}]"))?;
    }
    let gains = convert::matrices(gains, "K", Some((m, 2 * n)))?;
    if gains.len() != steps {
        return Err(INPUT_ERROR.err(format!("K has {} steps, expected N = {steps}", gains.len())));
    }
    let (x, u) = cancellable(py, |c| {
        let dynamics = ViDynamics::new(&vi, actuated)?;
        project(&Cancellable::new(&dynamics, c), &x_bar, &u_bar, &gains)
    })?;
    Ok((convert::rows_out(py, &x, nx), convert::rows_out(py, &u, m)).into_pyobject(py)?.into_any())
}
