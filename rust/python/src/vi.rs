//! The Python `VariationalIntegrator` and `Trajectory`: conversion only, the maths is
//! `vidyn_vi`. Every call runs detached from the interpreter.

use crate::convert;
use crate::errors::{INPUT_ERROR, STATE_ERROR};
use crate::model::PyModel;
use crate::{detached, interruptible};
use nalgebra::DMatrix;
use numpy::{PyArray1, PyArray2, PyArrayDyn};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::{Arc, Mutex, OnceLock};
use vidyn_batch as vb;
use vidyn_rbd::Model;
use vidyn_spatial::Force;
use vidyn_vi::{Constraint, JointForces, Scheme, SolvedSteps, StepInput, VariationalIntegrator, ViError, ViWorkspace};

/// Two arrays returned together (`(q, p)` or `(A, B)`).
type Pair<'py, T> = (Bound<'py, T>, Bound<'py, T>);

/// A vector `(n,)` and a Jacobian `(2n, 2n)`.
type WithJacobian<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>);

/// A variational integrator (midpoint rule or Galerkin–Lobatto of order 2s). State `(q, p)`
/// (`q` (nq,) in Pinocchio's layout, `p` (nv,)), controls `u` (nv generalised forces, held
/// constant over each step); free-flyer, spherical and planar joints step on their Lie groups.
#[pyclass(frozen, module = "vidyn", name = "VariationalIntegrator")]
pub struct PyVariationalIntegrator {
    pub(crate) inner: Arc<VariationalIntegrator>,
    /// What it was built from (validated), which pickling and equality read.
    spec: Arc<ViSpec>,
    /// The state of `spec`, made on first use.
    state: OnceLock<Vec<u8>>,
    /// The solved-step stores of optimisations on this integrator, kept from one call to the
    /// next so that their entries are allocated once (one per concurrent call; the core
    /// integrator stays immutable: `vidyn_vi::SolvedSteps`).
    solved: Mutex<Vec<Arc<SolvedSteps>>>,
}

/// The arguments of a `VariationalIntegrator`, resolved against its model: everything that
/// defines it, so that it can be rebuilt (unpickled) identically.
#[derive(Clone, Debug)]
pub(crate) struct ViSpec {
    pub model: Arc<Model>,
    pub dt: f64,
    /// The scheme's name as given, and `s` as given.
    pub scheme: String,
    pub s: Option<usize>,
    pub forces: JointForces,
    pub tolerance: f64,
    pub max_iterations: usize,
    /// On the bodies of `model` (resolved from the frames of the constraint descriptions).
    pub constraints: Vec<Constraint>,
    /// `(N, m)` row-major flags, if a schedule was given.
    pub schedule: Option<Vec<bool>>,
    /// Indices of the kinematic joints.
    pub kinematic: Vec<usize>,
    /// One per body, or empty.
    pub wrenches: Vec<Force>,
    pub max_energy_error: f64,
}

impl ViSpec {
    /// The integrator this spec describes.
    pub fn build(&self) -> Result<VariationalIntegrator, ViError> {
        let sc = Scheme::by_name(&self.scheme, self.s)?;
        let vi = VariationalIntegrator::new(Arc::clone(&self.model), sc, self.dt, Some(self.forces.clone()))?
            .with_newton(self.tolerance, self.max_iterations)?
            .with_constraints(self.constraints.clone())?;
        let vi = match &self.schedule {
            Some(active) => vi.with_constraint_schedule(active)?,
            None => vi,
        };
        vi.with_kinematic(&self.kinematic)?.with_body_wrenches(self.wrenches.clone())?.with_max_energy_error(self.max_energy_error)
    }
}

impl PyVariationalIntegrator {
    /// The integrator of `spec` (errors of invalid arguments raised as for the constructor).
    pub(crate) fn from_spec(py: Python<'_>, spec: ViSpec) -> PyResult<Self> {
        let inner = detached(py, || spec.build())?;
        Ok(Self { inner: Arc::new(inner), spec: Arc::new(spec), state: OnceLock::new(), solved: Mutex::default() })
    }
    /// The integrator's state (made once).
    pub(crate) fn state(&self) -> &[u8] {
        self.state.get_or_init(|| crate::states::vi_state(&self.spec))
    }
    /// A solved-step store for one optimisation: a kept one, or a new one.
    pub(crate) fn take_solved_steps(&self) -> Arc<SolvedSteps> {
        self.solved.lock().ok().and_then(|mut kept| kept.pop()).unwrap_or_default()
    }
    /// The store of an optimisation that has finished, kept for the next.
    pub(crate) fn keep_solved_steps(&self, store: Arc<SolvedSteps>) {
        if let Ok(mut kept) = self.solved.lock() {
            kept.push(store);
        }
    }
}

/// A simulated trajectory: `q` `(N+1, nq)`, `p` `(N+1, n)`, `u` `(N, n)`, Newton `iterations` `(N,)`,
/// and the integrator that made it (linearised only by one with the same dynamics).
#[pyclass(frozen, module = "vidyn", name = "Trajectory")]
pub struct PyTrajectory {
    pub(crate) inner: vidyn_vi::Trajectory,
    pub(crate) origin: Arc<VariationalIntegrator>,
    /// What `origin` was built from (pickling and saving write it).
    pub(crate) spec: Arc<ViSpec>,
}

#[pymethods]
impl PyTrajectory {
    /// Configurations, (N+1, nq).
    #[getter]
    fn q<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        let t = &self.inner;
        convert::rows_out(py, &t.q, t.nq)
    }
    /// Discrete momenta, (N+1, n).
    #[getter]
    fn p<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        let t = &self.inner;
        convert::rows_out(py, &t.p, t.n)
    }
    /// Controls, (N, n).
    #[getter]
    fn u<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        let t = &self.inner;
        convert::rows_out(py, &t.u, t.n)
    }
    /// Newton iterations of each step, (N,).
    #[getter]
    fn iterations<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<usize>> {
        PyArray1::from_slice(py, &self.inner.iterations)
    }
    /// Number of steps N.
    #[getter]
    fn steps(&self) -> usize {
        self.inner.steps
    }
    fn __len__(&self) -> usize {
        self.inner.steps
    }
    /// The integrator that made the trajectory.
    #[getter]
    fn integrator(&self) -> PyVariationalIntegrator {
        PyVariationalIntegrator { inner: Arc::clone(&self.origin), spec: Arc::clone(&self.spec), state: OnceLock::new(), solved: Mutex::default() }
    }

    /// The trajectory as bytes: a versioned, checksummed state of its arrays and of the
    /// integrator that made it (what pickling sends); `Trajectory.from_bytes` rebuilds it.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &crate::states::trajectory_state(self))
    }

    /// The trajectory of bytes made by `to_bytes` (raises StateError for anything else).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data = crate::states::bytes_arg(data)?;
        let (spec, inner) = detached(py, move || crate::states::trajectory_from_state(&data))?;
        let vi = PyVariationalIntegrator::from_spec(py, spec)?;
        crate::states::check_trajectory(&inner, &vi.inner)?;
        Ok(Self { inner, origin: vi.inner, spec: vi.spec })
    }

    /// A trajectory of `integrator` from its arrays (what `load` reads): q (N+1, nq),
    /// p (N+1, n), u (N, n), iterations (N,).
    #[staticmethod]
    fn _from_arrays(
        integrator: &Bound<'_, PyVariationalIntegrator>,
        q: &Bound<'_, PyAny>,
        p: &Bound<'_, PyAny>,
        u: &Bound<'_, PyAny>,
        iterations: Vec<usize>,
    ) -> PyResult<Self> {
        let vi = integrator.get();
        let (n, nq) = (vi.inner.n(), vi.inner.nq());
        let (q, rows) = convert::read_rows(q, "q", nq, "(N+1, nq)", "nq")?;
        let (p, prows) = convert::read_rows(p, "p", n, "(N+1, n)", "n")?;
        let (u, steps) = convert::read_rows(u, "u", n, "(N, n)", "n")?;
        if rows != steps + 1 || prows != rows || iterations.len() != steps {
            return Err(STATE_ERROR.err(format!("q has {rows} rows, p {prows}, u {steps} and iterations {}: expected N+1, N+1, N and N", iterations.len())));
        }
        Ok(Self { inner: vidyn_vi::Trajectory { n, nq, steps, q, p, u, iterations }, origin: Arc::clone(&vi.inner), spec: Arc::clone(&vi.spec) })
    }

    /// Saves the trajectory to an ``.npz`` file (`vidyn.trajectory_io.save`): its arrays,
    /// the integrator that made it, and metadata (model name and hash, dt, scheme, vidyn
    /// version).
    fn save(slf: &Bound<'_, Self>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        slf.py().import("vidyn.trajectory_io")?.getattr("save")?.call1((slf, path)).map(drop)
    }

    /// The trajectory saved in ``path`` by `save`. With `integrator` (a VariationalIntegrator
    /// or a Model), checks that the file was saved from it: the same model (by content hash)
    /// and, for an integrator, the same dynamics; raises StateError otherwise.
    #[staticmethod]
    #[pyo3(signature = (path, integrator = None))]
    fn load<'py>(py: Python<'py>, path: &Bound<'py, PyAny>, integrator: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        py.import("vidyn.trajectory_io")?.getattr("load")?.call1((path, integrator))
    }

    /// Equal when made by equal integrators with the same arrays, bit for bit.
    fn __eq__(&self, other: &Bound<'_, Self>) -> bool {
        let o = other.get();
        crate::states::same_trajectory(&self.inner, &o.inner)
            && (Arc::ptr_eq(&self.spec, &o.spec) || crate::states::vi_state(&self.spec) == crate::states::vi_state(&o.spec))
    }

    fn __hash__(&self) -> u64 {
        crate::states::digest_hash(&crate::states::trajectory_state(self))
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        Ok((py.get_type::<Self>().getattr(intern!(py, "from_bytes"))?, (self.to_bytes(py),)))
    }

    fn __repr__(&self) -> String {
        format!("Trajectory(steps={}, n={})", self.inner.steps, self.inner.n)
    }
}

impl PyVariationalIntegrator {
    fn dofs(&self) -> usize {
        self.inner.n()
    }
    fn vector(&self, x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
        convert::read(x, name, &[self.dofs()], Some("(n,)"))
    }
    /// A configuration `(nq,)`.
    fn configuration(&self, x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
        convert::read(x, name, &[self.inner.nq()], Some("(model.nq,)"))
    }
}

#[pymethods]
impl PyVariationalIntegrator {
    #[new]
    #[pyo3(signature = (model, dt, scheme = "trapezoid", s = None, damping = None, stiffness = None, rest = None, tolerance = 1e-12, max_iterations = 30, constraints = None, kinematic = None, body_wrenches = None, max_energy_error = 0.4, schedule = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        model: &Bound<'_, PyModel>,
        dt: f64,
        scheme: &str,
        s: Option<usize>,
        damping: Option<&Bound<'_, PyAny>>,
        stiffness: Option<&Bound<'_, PyAny>>,
        rest: Option<&Bound<'_, PyAny>>,
        tolerance: f64,
        max_iterations: usize,
        constraints: Option<Vec<Bound<'_, PyAny>>>,
        kinematic: Option<Vec<String>>,
        body_wrenches: Option<&Bound<'_, PyAny>>,
        max_energy_error: f64,
        schedule: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        const _: () = assert!(vidyn_vi::DEFAULT_MAX_ENERGY_ERROR == 0.4, "the signature's default is the core's");
        let m = model.get().inner.clone();
        // (nbodies, 6) rows `[force; moment]` in the body frames, as the `fext` of `aba`
        let wrenches = convert::forces(body_wrenches, "body_wrenches", &m)?.unwrap_or_default();
        let kinematic =
            kinematic.unwrap_or_default().iter().map(|name| m.joint_index(name).map_err(crate::errors::py_err)).collect::<PyResult<Vec<usize>>>()?;
        let constraints = crate::constraints::resolve(&m, constraints.as_deref().unwrap_or(&[]))?;
        // (N, m) flags: which constraints each step imposes
        let schedule = match schedule.filter(|s| !s.is_none()) {
            Some(s) => Some(convert::flag_rows(s, "schedule", constraints.len(), "(N, m)", "m, the number of constraints")?.0),
            None => None,
        };
        let n = model.get().nv();
        let read = |x: Option<&Bound<'_, PyAny>>, name: &str, default: Vec<f64>| match x {
            Some(x) => convert::read(x, name, &[n], Some("(model.nv,)")),
            None => Ok(default),
        };
        let forces = JointForces {
            damping: read(damping, "damping", model.get().restrict(&m.limits.damping, false))?,
            stiffness: read(stiffness, "stiffness", vec![0.0; n])?,
            rest: read(rest, "rest", vec![0.0; n])?,
        };
        Self::from_spec(
            model.py(),
            ViSpec {
                model: m,
                dt,
                scheme: scheme.to_string(),
                s,
                forces,
                tolerance,
                max_iterations,
                constraints,
                schedule,
                kinematic,
                wrenches,
                max_energy_error,
            },
        )
    }

    /// The model as given (shared, not copied).
    #[getter]
    fn model(&self) -> crate::model::PyModel {
        crate::model::PyModel::shared(Arc::clone(self.inner.model()))
    }
    /// Time step.
    #[getter]
    fn dt(&self) -> f64 {
        self.inner.dt()
    }
    /// Scheme name ("midpoint", "trapezoid", "simpson" or "lobatto").
    #[getter]
    fn scheme(&self) -> &str {
        &self.spec.scheme
    }
    /// The largest energy inconsistency of a step accepted by rollouts and `step` (in
    /// [0, 1]; inf: no check).
    #[getter]
    fn max_energy_error(&self) -> f64 {
        self.inner.max_energy_error()
    }
    /// Intervals per step s (s + 1 control points).
    #[getter]
    fn s(&self) -> usize {
        self.inner.scheme().s
    }
    /// Order of accuracy, 2s.
    #[getter]
    fn order(&self) -> usize {
        self.inner.scheme().order()
    }
    /// Degrees of freedom n (= model.nv: the length of p, u and velocities).
    #[getter]
    fn n(&self) -> usize {
        self.inner.n()
    }
    /// Length of a configuration q (= model.nq; more than n with quaternions).
    #[getter]
    fn nq(&self) -> usize {
        self.inner.nq()
    }

    /// (n,) booleans: which joints are kinematic (prescribed).
    #[getter]
    fn kinematic<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        PyArray1::from_slice(py, self.inner.kinematic())
    }

    /// (nbodies, 6) the constant body wrenches `[force; moment]` (body frames, about the body
    /// origins), or None.
    #[getter]
    fn body_wrenches<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray2<f64>>> {
        let w = self.inner.body_wrenches();
        (!w.is_empty()).then(|| convert::rows_out(py, &w.iter().flat_map(|f| f.to_vector().iter().copied().collect::<Vec<_>>()).collect::<Vec<_>>(), 6))
    }

    /// `(N, m)` booleans: which constraints each step imposes, or None (all, on every step).
    #[getter]
    fn schedule<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray2<bool>>> {
        let s = self.inner.constraint_schedule()?;
        let m = self.inner.constraints().len();
        let mut flags = vec![false; s.steps() * m];
        for k in 0..s.steps() {
            for &i in s.active(k).unwrap_or(&[]) {
                flags[k * m + i] = true;
            }
        }
        numpy::ndarray::Array2::from_shape_vec((s.steps(), m), flags).ok().map(|a| PyArray2::from_owned_array(py, a))
    }

    /// Number of holonomic constraints m.
    #[getter]
    fn constraint_count(&self) -> usize {
        self.inner.constraints().len()
    }

    /// The constraint values `h(q)`: (n,) -> (m,).
    fn constraint_values<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let q = self.configuration(q, "q")?;
        let vi = &*self.inner;
        let h = detached(py, move || {
            let mut h = vec![0.0; vi.constraints().len()];
            vi.constraint_values(&mut vi.workspace(), &q, &mut h).map(|()| h)
        })?;
        Ok(PyArray1::from_vec(py, h))
    }

    /// The constraint multipliers `λ_k` of every step of a trajectory made by this integrator,
    /// or of `q` (N+1, model.nq) with `p=` (N+1, n) and `u=` (N, n) (e.g. an optimiser's states,
    /// whose open-loop replay may drift away), (N, m): each step solved again from its knot,
    /// started at its end (the same solution).
    /// The constraint impulse on step `k` is `λ_k = λ'_k + μ_{k+1}`: `−Dh(q_k)ᵀ λ'_k` at its
    /// start and RATTLE's `−Dh(q_{k+1})ᵀ μ_{k+1}` at its end. With `derivatives=True` also
    /// `∂λ_k/∂x_k` (N, m, 2n) and `∂λ_k/∂u_k` (N, m, n) in the tangent coordinates of
    /// `linearize` (each step linearised), steps in parallel with the GIL released.
    #[pyo3(signature = (traj_or_q, derivatives = false, *, p = None, u = None))]
    fn multipliers<'py>(
        &self,
        py: Python<'py>,
        traj_or_q: &Bound<'py, PyAny>,
        derivatives: bool,
        p: Option<&Bound<'py, PyAny>>,
        u: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let read = self.trajectory_arg(traj_or_q, p, u, "multipliers")?;
        let (vi, traj): (&VariationalIntegrator, &vidyn_vi::Trajectory) = (&self.inner, &read);
        let (m, n, steps) = (vi.constraints().len(), traj.n, traj.steps);
        let out = detached(py, move || vidyn_vi::trajectory_multipliers(vi, traj, derivatives))?;
        let lambda = convert::array_out(py, out.lambda, &[steps, m])?;
        if !derivatives {
            return Ok(lambda.into_any().unbind());
        }
        let (mut dx, mut du) = (Vec::with_capacity(steps * m * 2 * n), Vec::with_capacity(steps * m * n));
        for row in out.jacobian.chunks_exact(3 * n) {
            dx.extend_from_slice(&row[..2 * n]);
            du.extend_from_slice(&row[2 * n..]);
        }
        let (dx, du) = (convert::array_out(py, dx, &[steps, m, 2 * n])?, convert::array_out(py, du, &[steps, m, n])?);
        Ok((lambda, dx, du).into_pyobject(py)?.into_any().unbind())
    }

    /// Legendre transform `p = M(q) v`: (nq,), (n,) -> (n,).
    fn momentum<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (q, v) = (self.configuration(q, "q")?, self.vector(v, "v")?);
        let vi = &*self.inner;
        let p = detached(py, move || {
            let mut p = vec![0.0; v.len()];
            vi.momentum(&mut vi.workspace(), &q, &v, &mut p).map(|()| p)
        })?;
        Ok(PyArray1::from_vec(py, p))
    }

    /// Inverse Legendre transform `v = M(q)⁻¹ p`: (nq,), (n,) -> (n,).
    fn velocity<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>, p: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (q, p) = (self.configuration(q, "q")?, self.vector(p, "p")?);
        let vi = &*self.inner;
        let v = detached(py, move || {
            let mut v = vec![0.0; p.len()];
            vi.velocity(&mut vi.workspace(), &q, &p, &mut v).map(|()| v)
        })?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// Mechanical energy `½ pᵀ M⁻¹ p + V(q)` (gravity and joint springs) of one state, or of
    /// every row of `(N, nq)`, `(N, n)` arrays. With constraints, the kinetic energy of the
    /// motion they allow: those of step `step` (row `k` of arrays: step `step + k`; past the
    /// end of a schedule, its last step's).
    #[pyo3(signature = (q, p, step = 0))]
    fn energy<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>, p: &Bound<'py, PyAny>, step: usize) -> PyResult<Py<PyAny>> {
        let (n, nq) = (self.dofs(), self.inner.nq());
        // one state when q is 1-D (a list of numbers, a vector), rows otherwise
        if convert::shape(q, "q")?.len() == 1 {
            let (qv, pv) = (self.configuration(q, "q")?, self.vector(p, "p")?);
            let vi = &*self.inner;
            let e = detached(py, move || vi.energy(&mut vi.workspace(), step, &qv, &pv))?;
            return Ok(e.into_pyobject(py)?.into_any().unbind());
        }
        let (qs, rows) = convert::read_rows(q, "q", nq, "(N, nq)", "nq")?;
        let (ps, prow) = convert::read_rows(p, "p", n, "(N, n)", "n")?;
        if prow != rows {
            return Err(INPUT_ERROR.err(format!("q has {rows} rows but p has {prow}")));
        }
        let vi = &*self.inner;
        let e = detached(py, move || {
            let mut ws: ViWorkspace = vi.workspace();
            (0..rows).map(|k| vi.energy(&mut ws, step + k, &qs[k * nq..(k + 1) * nq], &ps[k * n..(k + 1) * n])).collect::<Result<Vec<f64>, ViError>>()
        })?;
        Ok(PyArray1::from_vec(py, e).into_any().unbind())
    }

    /// One step from `(q, p)` under control `u` (zeros if omitted): -> `(q_next, p_next)`.
    /// `k`: the step's index (which constraints a schedule imposes on it).
    #[pyo3(signature = (q, p, u = None, *, k = 0))]
    fn step<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        p: &Bound<'py, PyAny>,
        u: Option<&Bound<'py, PyAny>>,
        k: usize,
    ) -> PyResult<Pair<'py, PyArray1<f64>>> {
        let (q, p) = (self.configuration(q, "q")?, self.vector(p, "p")?);
        let u = match u {
            Some(u) => self.vector(u, "u")?,
            None => vec![0.0; self.dofs()],
        };
        let vi = &*self.inner;
        let (qn, pn) = detached(py, move || {
            let (mut qn, mut pn) = (vec![0.0; q.len()], vec![0.0; p.len()]);
            let mut ws = vi.workspace();
            let at = StepInput::new(k, &q, &p, &u);
            vi.step(&mut ws, at, &mut qn, &mut pn)?;
            vi.check_step(&mut ws, at, &qn, &pn).map(|()| (qn, pn))
        })?;
        Ok((PyArray1::from_vec(py, qn), PyArray1::from_vec(py, pn)))
    }

    /// Simulates `N = len(u)` steps from `q0` with initial velocity `v0` (converted by the
    /// Legendre transform) or initial momentum `p0`. u: (N, n). -> Trajectory. Runs as a
    /// one-trajectory batch of the engine (the same steps, bit for bit), so Ctrl-C stops it.
    #[pyo3(signature = (q0, v0 = None, u = None, *, p0 = None, steps = None))]
    fn rollout(
        &self,
        py: Python<'_>,
        q0: &Bound<'_, PyAny>,
        v0: Option<&Bound<'_, PyAny>>,
        u: Option<&Bound<'_, PyAny>>,
        p0: Option<&Bound<'_, PyAny>>,
        steps: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyTrajectory> {
        let (n, nq) = (self.dofs(), self.inner.nq());
        let q0 = self.configuration(q0, "q0")?;
        let start = match (v0.filter(|x| !x.is_none()), p0.filter(|x| !x.is_none())) {
            (Some(v), None) => Start::Velocity(self.vector(v, "v0")?),
            (None, Some(p)) => Start::Momentum(self.vector(p, "p0")?),
            (None, None) => Start::Velocity(vec![0.0; n]),
            (Some(_), Some(_)) => return Err(INPUT_ERROR.err("give either v0 or p0, not both")),
        };
        let (u, steps) = match convert::controls(u, steps, n, "(N, n)", "n")? {
            (Some(u), steps) => (u, steps),
            (None, steps) => {
                let name = format!("the zero controls u of steps = {steps}");
                (convert::zeros(convert::entries::<f64>(&[steps, n], &name)?, &name)?, steps)
            }
        };
        let (configurations, momenta) = (
            convert::entries::<f64>(&[steps.saturating_add(1), nq], "the trajectory's q")?,
            convert::entries::<f64>(&[steps.saturating_add(1), n], "the trajectory's p")?,
        );
        let (mut q, mut p) = (convert::zeros::<f64>(configurations, "q")?, convert::zeros::<f64>(momenta, "p")?);
        let mut iterations = convert::zeros::<i64>(convert::entries::<i64>(&[steps], "iterations")?, "iterations")?;
        let vi = &*self.inner;
        let start = match &start {
            Start::Velocity(v) => vb::Start::Velocity(v),
            Start::Momentum(p) => vb::Start::Momentum(p),
        };
        let out = vb::RolloutOut { q: &mut q, p: &mut p, iterations: &mut iterations };
        let failures = interruptible(py, None, steps, |c| vb::rollout(vi, c, 1, steps, &q0, start, &u, out))?;
        crate::batch::raise_first(crate::batch::call(failures)?)?;
        let iterations = iterations.into_iter().map(|i| usize::try_from(i).unwrap_or_default()).collect();
        Ok(PyTrajectory { inner: vidyn_vi::Trajectory { n, nq, steps, q, p, u, iterations }, origin: Arc::clone(&self.inner), spec: Arc::clone(&self.spec) })
    }

    /// Exact linearisation of every step of a trajectory, computed in parallel:
    /// `linearize(traj)` or `linearize(q, p, u)` with q (N+1, model.nq), p (N+1, n) and u (N, n).
    /// `order = 1` -> `(A, B)` with A (N, 2n, 2n) = d(q_{k+1}, p_{k+1})/d(q_k, p_k) and
    /// B (N, 2n, n), `δq` in the tangent space (`model.difference`) with Lie-group joints.
    /// `order = 2` -> `(A, B, fxx, fxu, fuu)` with the second-order tensors
    /// (N, 2n, 2n, 2n), (N, 2n, 2n, n), (N, 2n, n, n), or, with co-states `lam` (N, 2n),
    /// `(A, B, hxx, hxu, huu)` contracted with them: (N, 2n, 2n), (N, 2n, n), (N, n, n).
    #[pyo3(signature = (traj_or_q, p = None, u = None, *, order = 1, lam = None))]
    fn linearize<'py>(
        &self,
        py: Python<'py>,
        traj_or_q: &Bound<'py, PyAny>,
        p: Option<&Bound<'py, PyAny>>,
        u: Option<&Bound<'py, PyAny>>,
        order: usize,
        lam: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let arrays = self.linearize_arrays(py, traj_or_q, p, u, order, lam)?;
        PyTuple::new(py, arrays)
    }

    /// `(q, v) -> (p, J)`: the momentum `p = M(q) v` (n,) and `J = d(q, p)/d(q, v)` (2n, 2n).
    fn momentum_jacobian<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>) -> PyResult<WithJacobian<'py>> {
        let (q, v) = (self.configuration(q, "q")?, self.vector(v, "v")?);
        let vi = &*self.inner;
        let (p, j) = detached(py, move || {
            let n = v.len();
            let (mut p, mut j) = (vec![0.0; n], DMatrix::zeros(2 * n, 2 * n));
            vi.momentum_with_jacobian(&mut vi.workspace(), &q, &v, &mut p, &mut j).map(|()| (p, j))
        })?;
        Ok((PyArray1::from_vec(py, p), convert::matrix_out(py, &j)))
    }

    /// `(q, p) -> (v, J)`: the velocity `v = M(q)⁻¹ p` (n,) and `J = d(q, v)/d(q, p)` (2n, 2n).
    fn velocity_jacobian<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>, p: &Bound<'py, PyAny>) -> PyResult<WithJacobian<'py>> {
        let (q, p) = (self.configuration(q, "q")?, self.vector(p, "p")?);
        let vi = &*self.inner;
        let (v, j) = detached(py, move || {
            let n = p.len();
            let (mut v, mut j) = (vec![0.0; n], DMatrix::zeros(2 * n, 2 * n));
            vi.velocity_with_jacobian(&mut vi.workspace(), &q, &p, &mut v, &mut j).map(|()| (v, j))
        })?;
        Ok((PyArray1::from_vec(py, v), convert::matrix_out(py, &j)))
    }

    /// The integrator as bytes: a versioned, checksummed state of its model and arguments
    /// (what pickling sends); `VariationalIntegrator.from_bytes` rebuilds it.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.state())
    }

    /// The integrator of bytes made by `to_bytes` (raises StateError for anything else).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data = crate::states::bytes_arg(data)?;
        let spec = detached(py, move || crate::states::vi_from_state(&data))?;
        Self::from_spec(py, spec)
    }

    /// Equal when built from equal models and arguments (bit for bit): the same steps.
    fn __eq__(&self, other: &Bound<'_, Self>) -> bool {
        let other = other.get();
        Arc::ptr_eq(&self.spec, &other.spec) || self.state() == other.state()
    }

    fn __hash__(&self) -> u64 {
        crate::states::digest_hash(self.state())
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        Ok((py.get_type::<Self>().getattr(intern!(py, "from_bytes"))?, (self.to_bytes(py),)))
    }

    fn __repr__(&self) -> String {
        format!("VariationalIntegrator(scheme='{}', s={}, dt={}, n={})", self.spec.scheme, self.inner.scheme().s, self.inner.dt(), self.dofs())
    }
}

enum Start {
    Velocity(Vec<f64>),
    Momentum(Vec<f64>),
}

impl PyVariationalIntegrator {
    /// The arrays of [`Self::linearize`], computed by the batch engine on a one-trajectory
    /// batch (every step in parallel, Ctrl-C stops it, results written once into the
    /// returned arrays).
    /// The trajectory of a `traj_or_q, p, u` argument triple: a `Trajectory` made by an
    /// integrator with this one's dynamics, or q (N+1, model.nq), p (N+1, n) and u (N, n)
    /// (`what` names the method in errors).
    fn trajectory_arg<'a>(
        &self,
        traj_or_q: &'a Bound<'_, PyAny>,
        p: Option<&Bound<'_, PyAny>>,
        u: Option<&Bound<'_, PyAny>>,
        what: &str,
    ) -> PyResult<TrajectoryArg<'a>> {
        if let Ok(t) = traj_or_q.cast::<PyTrajectory>() {
            let t = t.get();
            if p.is_some_and(|x| !x.is_none()) || u.is_some_and(|x| !x.is_none()) {
                return Err(INPUT_ERROR
                    .err(format!("{what} takes a Trajectory, or q (N+1, model.nq), p (N+1, n) and u (N, n), not both: a Trajectory carries its own p and u")));
            }
            if !t.origin.same_dynamics(&self.inner) {
                return Err(INPUT_ERROR.err(format!("traj was made by another integrator ({}) whose dynamics differ from this one's ({}) in the model, scheme, time step, joint forces, constraints, kinematic joints or body wrenches: call {what} on the integrator that made it", describe(&t.origin), describe(&self.inner))));
            }
            return Ok(TrajectoryArg::Made(&t.inner));
        }
        let (n, nq) = (self.dofs(), self.inner.nq());
        let (Some(p), Some(u)) = (p, u) else {
            return Err(INPUT_ERROR.err(format!("{what} takes a Trajectory, or q (N+1, model.nq), p (N+1, n) and u (N, n)")));
        };
        let (q, qrows) = convert::read_rows(traj_or_q, "q", nq, "(N+1, model.nq)", "model.nq")?;
        let (p, prows) = convert::read_rows(p, "p", n, "(N+1, n)", "n")?;
        let (u, urows) = convert::read_rows(u, "u", n, "(N, n)", "n")?;
        if prows != qrows || urows + 1 != qrows {
            return Err(INPUT_ERROR.err(format!("q has {qrows} rows, p has {prows}, u has {urows}: expected N+1, N+1 and N")));
        }
        Ok(TrajectoryArg::Read(vidyn_vi::Trajectory { n, nq, steps: urows, q, p, u, iterations: Vec::new() }))
    }

    fn linearize_arrays<'py>(
        &self,
        py: Python<'py>,
        traj_or_q: &Bound<'py, PyAny>,
        p: Option<&Bound<'py, PyAny>>,
        u: Option<&Bound<'py, PyAny>>,
        order: usize,
        lam: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyArrayDyn<f64>>>> {
        let n = self.dofs();
        let read = self.trajectory_arg(traj_or_q, p, u, "linearize")?;
        let traj: &vidyn_vi::Trajectory = &read;
        let (steps, m) = (traj.steps, 2 * n);
        let lam = match (order, lam.filter(|l| !l.is_none())) {
            (1 | 2, None) => None,
            (1, Some(_)) => return Err(INPUT_ERROR.err("lam (co-states) needs order=2")),
            (2, Some(lam)) => {
                let (lam, rows) = convert::read_rows(lam, "lam", m, "(N, 2n)", "2n")?;
                if rows != steps {
                    return Err(INPUT_ERROR.err(format!("lam has {rows} rows, expected one co-state per step, N = {steps}")));
                }
                Some(lam)
            }
            (other, _) => return Err(INPUT_ERROR.err(format!("order = {other}; expected 1 or 2"))),
        };
        let (q, p, u) = (&traj.q[..], &traj.p[..], &traj.u[..]);
        let vi = &*self.inner;
        let (a_shape, b_shape) = ([steps, m, m], [steps, m, n]);
        let (mut a, mut b) = (convert::zeros_for(&a_shape, "A")?, convert::zeros_for(&b_shape, "B")?);
        let mut second: Vec<(Vec<f64>, Vec<usize>)> = Vec::new();
        let failures = match lam {
            None if order == 1 => interruptible(py, None, steps, |c| vb::linearize(vi, c, vb::Trajectories { batch: 1, steps, q, p, u }, &mut a, &mut b))?,
            None => {
                let shapes = [vec![steps, m, m, m], vec![steps, m, m, n], vec![steps, m, n, n]];
                let (mut fxx, mut fxu, mut fuu) =
                    (convert::zeros_for(&shapes[0], "fxx")?, convert::zeros_for(&shapes[1], "fxu")?, convert::zeros_for(&shapes[2], "fuu")?);
                let out = vb::SecondOrderOut { first: Some((&mut a, &mut b)), fxx: &mut fxx, fxu: &mut fxu, fuu: &mut fuu };
                let f = interruptible(py, None, steps, |c| vb::linearize_second_order(vi, c, vb::Trajectories { batch: 1, steps, q, p, u }, out))?;
                second = [fxx, fxu, fuu].into_iter().zip(shapes).collect();
                f
            }
            Some(lam) => {
                let shapes = [vec![steps, m, m], vec![steps, m, n], vec![steps, n, n]];
                let (mut xx, mut xu, mut uu) =
                    (convert::zeros_for(&shapes[0], "hxx")?, convert::zeros_for(&shapes[1], "hxu")?, convert::zeros_for(&shapes[2], "huu")?);
                let out = vb::ContractedOut { first: Some((&mut a, &mut b)), xx: &mut xx, xu: &mut xu, uu: &mut uu };
                let f =
                    interruptible(py, None, steps, |c| vb::linearize_second_order_contracted(vi, c, vb::Trajectories { batch: 1, steps, q, p, u }, &lam, out))?;
                second = [xx, xu, uu].into_iter().zip(shapes).collect();
                f
            }
        };
        crate::batch::raise_first(crate::batch::call(failures)?)?;
        let mut arrays = vec![convert::array_out(py, a, &a_shape)?, convert::array_out(py, b, &b_shape)?];
        for (data, shape) in second {
            arrays.push(convert::array_out(py, data, &shape)?);
        }
        Ok(arrays)
    }
}

/// An integrator's model, time step and scheme, for messages.
fn describe(vi: &VariationalIntegrator) -> String {
    format!("model '{}', dt = {}, s = {}", vi.model().name, vi.dt(), vi.scheme().s)
}

/// A trajectory argument: one a `Trajectory` holds, or one read from arrays.
enum TrajectoryArg<'a> {
    Made(&'a vidyn_vi::Trajectory),
    Read(vidyn_vi::Trajectory),
}

impl std::ops::Deref for TrajectoryArg<'_> {
    type Target = vidyn_vi::Trajectory;
    fn deref(&self) -> &Self::Target {
        match self {
            Self::Made(t) => t,
            Self::Read(t) => t,
        }
    }
}
