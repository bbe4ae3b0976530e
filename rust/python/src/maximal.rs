//! The Python `MaximalIntegrator` and `MaximalTrajectory`: conversion only, the maths is
//! `vidyn_maximal`. Every computation runs detached from the interpreter.

use crate::convert;
use crate::errors::{py_err, INPUT_ERROR, UNKNOWN_NAME_ERROR};
use crate::model::PyModel;
use crate::{detached, interruptible};
use nalgebra::Vector3;
use numpy::ndarray::Array3;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayDyn};
use pyo3::prelude::*;
use std::sync::{Arc, RwLock};
use vidyn_maximal::{linearize_trajectory, rollout_minimal, JointKind, LinearizationOut, MaximalError, MaximalIntegrator, MaximalTrajectory, Mechanism};
use vidyn_spatial::Se3;

/// `(q_next, v_next, A, B)` of a minimal-coordinate step.
type MinimalStep<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// Two arrays returned together (`(A, B)`).
type Pair<'py> = (Bound<'py, PyArrayDyn<f64>>, Bound<'py, PyArrayDyn<f64>>);

/// The maximal-coordinate variational integrator of a model (every body a free rigid body,
/// joints and loop closures as constraints, graph-based sparse solver).
#[pyclass(frozen, module = "vidyn", name = "MaximalIntegrator")]
pub struct PyMaximalIntegrator {
    /// Replaced (not mutated) by `add_loop_closure`; calls clone the `Arc` and release the lock.
    inner: RwLock<Arc<MaximalIntegrator>>,
    tolerance: f64,
    max_iterations: usize,
}

impl PyMaximalIntegrator {
    fn current(&self) -> Arc<MaximalIntegrator> {
        match self.inner.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// A body named by the model joint that moves it (str), by index (int), or the world (None
/// or "world", parent only).
fn body_ref(mech: &Mechanism, x: Option<&Bound<'_, PyAny>>, name: &str, allow_world: bool) -> PyResult<Option<usize>> {
    let Some(x) = x.filter(|x| !x.is_none()) else {
        return if allow_world { Ok(None) } else { Err(INPUT_ERROR.err(format!("{name} must be a body, not the world"))) };
    };
    if let Ok(s) = x.extract::<String>() {
        if s == "world" && allow_world {
            return Ok(None);
        }
        return match mech.bodies.iter().position(|b| b.name == s) {
            Some(i) => Ok(Some(i)),
            None => Err(UNKNOWN_NAME_ERROR.err(format!("{name}: unknown body (joint name) '{s}'"))),
        };
    }
    let i = convert::index(x, name)?;
    if i >= mech.nbodies() {
        return Err(INPUT_ERROR.err(format!("{name} = {i} is out of range (mechanism has {} bodies)", mech.nbodies())));
    }
    Ok(Some(i))
}

#[pymethods]
impl PyMaximalIntegrator {
    #[new]
    #[pyo3(signature = (model, dt, damping = None, stiffness = None, rest = None, tolerance = 1e-12, max_iterations = 30))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        model: &Bound<'_, PyModel>,
        dt: f64,
        damping: Option<&Bound<'_, PyAny>>,
        stiffness: Option<&Bound<'_, PyAny>>,
        rest: Option<&Bound<'_, PyAny>>,
        tolerance: f64,
        max_iterations: usize,
    ) -> PyResult<Self> {
        let m = model.get().inner.clone();
        let n = m.nv;
        let read = |x: Option<&Bound<'_, PyAny>>, name: &str| x.map(|x| convert::read(x, name, &[n], Some("(model.nv,)"))).transpose();
        let (damping, stiffness, rest) = (read(damping, "damping")?, read(stiffness, "stiffness")?, read(rest, "rest")?);
        let build = || -> Result<MaximalIntegrator, MaximalError> {
            let mut mech = Mechanism::from_model(m)?;
            if let Some(d) = damping {
                mech.damping = d;
            }
            if let Some(k) = stiffness {
                mech.stiffness = k;
            }
            if let Some(r) = rest {
                mech.rest = r;
            }
            MaximalIntegrator::new(Arc::new(mech), dt)?.with_newton(tolerance, max_iterations)
        };
        let inner = build().map_err(py_err)?;
        Ok(Self { inner: RwLock::new(Arc::new(inner)), tolerance, max_iterations })
    }

    /// Time step.
    #[getter]
    fn dt(&self) -> f64 {
        self.current().dt()
    }
    /// Number of bodies.
    #[getter]
    fn nbodies(&self) -> usize {
        self.current().mechanism().nbodies()
    }
    /// Number of joints (model joints and loop closures).
    #[getter]
    fn njoints(&self) -> usize {
        self.current().mechanism().joints.len()
    }
    /// Number of joints that close a loop.
    #[getter]
    fn nloops(&self) -> usize {
        let vi = self.current();
        (0..vi.mechanism().joints.len()).filter(|&j| vi.is_loop(j)).count()
    }
    /// Fill blocks of the sparse factorisation (0 for trees).
    #[getter]
    fn fill(&self) -> usize {
        self.current().fill_edges()
    }

    /// Adds a loop-closure joint of `kind` ("fixed", "revolute", "prismatic", "cylindrical",
    /// "spherical", "planar", "point_on_line", "point_on_plane") between `parent_frame` on
    /// body `parent` (model joint name, body index, or None / "world") and `child_frame` on
    /// body `child`; frames are 4×4 placements in the body frames (identity if omitted),
    /// `axis` (3,) the joint-frame axis or normal where the kind has one. Returns the joint
    /// index.
    #[pyo3(signature = (name, kind, parent, child, parent_frame = None, child_frame = None, axis = None))]
    #[allow(clippy::too_many_arguments)]
    fn add_loop_closure(
        &self,
        name: &str,
        kind: &str,
        parent: Option<&Bound<'_, PyAny>>,
        child: &Bound<'_, PyAny>,
        parent_frame: Option<&Bound<'_, PyAny>>,
        child_frame: Option<&Bound<'_, PyAny>>,
        axis: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let vi = self.current();
        let mut mech = (**vi.mechanism()).clone();
        let pa = body_ref(&mech, parent, "parent", true)?;
        let ch = body_ref(&mech, Some(child), "child", false)?.unwrap_or(0);
        let frame = |f: Option<&Bound<'_, PyAny>>, n: &str| f.map_or(Ok(Se3::identity()), |f| convert::placement(f, n));
        let (pf, cf) = (frame(parent_frame, "parent_frame")?, frame(child_frame, "child_frame")?);
        const KINDS: [&str; 8] = ["fixed", "revolute", "prismatic", "cylindrical", "spherical", "planar", "point_on_line", "point_on_plane"];
        if !KINDS.contains(&kind) {
            return Err(INPUT_ERROR.err(format!("kind = '{kind}' is an unknown joint kind; expected one of {}", KINDS.join(", "))));
        }
        let needs_axis = !matches!(kind, "fixed" | "spherical");
        let a = match (axis, needs_axis) {
            (Some(a), true) => {
                let a = convert::vector3(a, "axis")?;
                if a.norm() < 1e-12 {
                    return Err(INPUT_ERROR.err("axis must be a non-zero vector"));
                }
                a.normalize()
            }
            (None, true) => return Err(INPUT_ERROR.err(format!("a {kind} joint needs an axis (3,)"))),
            (Some(_), false) => return Err(INPUT_ERROR.err(format!("a {kind} joint takes no axis"))),
            (None, false) => Vector3::zeros(),
        };
        let kind = match kind {
            "fixed" => JointKind::Fixed,
            "spherical" => JointKind::Spherical,
            "revolute" => JointKind::Revolute { axis: a },
            "prismatic" => JointKind::Prismatic { axis: a },
            "cylindrical" => JointKind::Cylindrical { axis: a },
            "planar" => JointKind::Planar { normal: a },
            "point_on_line" => JointKind::PointOnLine { axis: a },
            "point_on_plane" => JointKind::PointOnPlane { normal: a },
            other => return Err(INPUT_ERROR.err(format!("kind = '{other}' is an unknown joint kind"))),
        };
        let (dt, tol, iters) = (vi.dt(), self.tolerance, self.max_iterations);
        let (j, new) = (|| -> Result<(usize, MaximalIntegrator), MaximalError> {
            let j = mech.add_loop_closure(name, kind, pa, pf, ch, cf)?;
            Ok((j, MaximalIntegrator::new(Arc::new(mech), dt)?.with_newton(tol, iters)?))
        })()
        .map_err(py_err)?;
        match self.inner.write() {
            Ok(mut g) => *g = Arc::new(new),
            Err(p) => *p.into_inner() = Arc::new(new),
        }
        Ok(j)
    }

    /// Adds a contact between a sphere of `radius` centred at `point` (3,) in the frame of
    /// body `body` (model joint name or index) and the world plane through `offset·normal`
    /// (unit `normal` (3,), default +z), with Coulomb `friction` (linearised cone). Returns the
    /// contact index.
    #[pyo3(signature = (name, body, point, radius = 0.0, normal = None, offset = 0.0, friction = 0.5))]
    #[allow(clippy::too_many_arguments)]
    fn add_contact(
        &self,
        name: &str,
        body: &Bound<'_, PyAny>,
        point: &Bound<'_, PyAny>,
        radius: f64,
        normal: Option<&Bound<'_, PyAny>>,
        offset: f64,
        friction: f64,
    ) -> PyResult<usize> {
        let vi = self.current();
        let mut mech = (**vi.mechanism()).clone();
        let b = body_ref(&mech, Some(body), "body", false)?.unwrap_or(0);
        let p = convert::vector3(point, "point")?;
        let n = match normal {
            Some(n) => {
                let n = convert::vector3(n, "normal")?;
                if n.norm() < 1e-12 {
                    return Err(INPUT_ERROR.err("normal must be a non-zero vector"));
                }
                n.normalize()
            }
            None => Vector3::z(),
        };
        let (dt, tol, iters) = (vi.dt(), self.tolerance, self.max_iterations);
        let (c, new) = (|| -> Result<(usize, MaximalIntegrator), MaximalError> {
            let c = mech.add_contact(name, b, p, radius, n, offset, friction)?;
            Ok((c, MaximalIntegrator::new(Arc::new(mech), dt)?.with_newton(tol, iters)?))
        })()
        .map_err(py_err)?;
        match self.inner.write() {
            Ok(mut g) => *g = Arc::new(new),
            Err(p) => *p.into_inner() = Arc::new(new),
        }
        Ok(c)
    }

    /// Adds position limits `lower <= q <= upper` to the revolute or prismatic model joint
    /// `joint` (name or index), enforced as interior-point inequalities. Returns the limit
    /// index.
    fn add_joint_limit(&self, joint: &Bound<'_, PyAny>, lower: f64, upper: f64) -> PyResult<usize> {
        let vi = self.current();
        let mut mech = (**vi.mechanism()).clone();
        let j = body_ref(&mech, Some(joint), "joint", false)?.unwrap_or(0);
        let (dt, tol, iters) = (vi.dt(), self.tolerance, self.max_iterations);
        let (l, new) = (|| -> Result<(usize, MaximalIntegrator), MaximalError> {
            let l = mech.add_joint_limit(j, lower, upper)?;
            Ok((l, MaximalIntegrator::new(Arc::new(mech), dt)?.with_newton(tol, iters)?))
        })()
        .map_err(py_err)?;
        match self.inner.write() {
            Ok(mut g) => *g = Arc::new(new),
            Err(p) => *p.into_inner() = Arc::new(new),
        }
        Ok(l)
    }

    /// Simulates from the minimal configuration `q0` (model.nq,) moving with `v0` (model.nv,,
    /// zeros if omitted) under the generalised forces `u` (N, model.nv), or `steps` steps
    /// without forces. -> MaximalTrajectory. Ctrl-C stops it between steps.
    #[pyo3(signature = (q0, v0 = None, u = None, *, steps = None))]
    fn rollout(
        &self,
        py: Python<'_>,
        q0: &Bound<'_, PyAny>,
        v0: Option<&Bound<'_, PyAny>>,
        u: Option<&Bound<'_, PyAny>>,
        steps: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyMaximalTrajectory> {
        let vi = self.current();
        let model = vi.mechanism().model.clone().ok_or_else(|| INPUT_ERROR.err("the mechanism has no model"))?;
        let n = model.nv;
        let q0 = convert::configuration(q0, "q0", &model)?;
        let v0 = match v0.filter(|v| !v.is_none()) {
            Some(v) => convert::tangent(v, "v0", &model)?,
            None => vec![0.0; n],
        };
        let (u, steps) = convert::controls(u, steps, n, "(N, model.nv)", "model.nv")?;
        let u = u.unwrap_or_default();
        let traj = interruptible(py, None, steps, |c| rollout_minimal(&vi, c, &q0, &v0, &u, steps))?;
        Ok(PyMaximalTrajectory { inner: traj.map_err(py_err)? })
    }

    /// Exact linearisation of every step of `traj` (a MaximalTrajectory of this integrator),
    /// in parallel: `A` (N, 12·nbodies, 12·nbodies) and `B` (N, 12·nbodies, model.nv) in the
    /// per-body tangent coordinates `[δx (world); δθ (body); δv (world); δω (body)]`.
    fn linearize<'py>(&self, py: Python<'py>, traj: &Bound<'py, PyMaximalTrajectory>) -> PyResult<Pair<'py>> {
        let vi = self.current();
        let t = &traj.get().inner;
        let (nx, nu) = (12 * vi.mechanism().nbodies(), vi.mechanism().nu);
        let (a_shape, b_shape) = ([t.steps, nx, nx], [t.steps, nx, nu]);
        let (mut a, mut b) = (convert::zeros_for::<f64>(&a_shape, "A")?, convert::zeros_for::<f64>(&b_shape, "B")?);
        let out = LinearizationOut { a: &mut a, b: &mut b };
        interruptible(py, None, t.steps, |c| linearize_trajectory(&vi, c, t, out))?.map_err(py_err)?;
        Ok((convert::array_out(py, a, &a_shape)?, convert::array_out(py, b, &b_shape)?))
    }

    /// One step in minimal coordinates and its exact linearisation, for a tree of revolute /
    /// prismatic joints without loop closures: from `q` (n,) and `v` (n,) (joint velocities
    /// of the last interval, `(q_k − q_{k−1})/dt`) under `u` (n,) (zeros if omitted) ->
    /// `(q_next, v_next, A (2n, 2n), B (2n, n))`.
    #[pyo3(signature = (q, v, u = None))]
    fn linearize_minimal<'py>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        v: &Bound<'py, PyAny>,
        u: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<MinimalStep<'py>> {
        let vi = self.current();
        let model = vi.mechanism().model.clone().ok_or_else(|| INPUT_ERROR.err("the mechanism has no model"))?;
        let n = model.nv;
        let q = convert::configuration(q, "q", &model)?;
        let v = convert::tangent(v, "v", &model)?;
        let u = match u {
            Some(u) => convert::tangent(u, "u", &model)?,
            None => vec![0.0; n],
        };
        let (qn, vn, a, b) = detached(py, move || {
            let (mut qn, mut vn) = (vec![0.0; n], vec![0.0; n]);
            let (mut a, mut b) = (nalgebra::DMatrix::zeros(2 * n, 2 * n), nalgebra::DMatrix::zeros(2 * n, n));
            vi.linearize_minimal(&mut vi.workspace(), 0, &q, &v, &u, &mut qn, &mut vn, &mut a, &mut b).map(|_| (qn, vn, a, b))
        })?;
        Ok((PyArray1::from_vec(py, qn), PyArray1::from_vec(py, vn), convert::matrix_out(py, &a), convert::matrix_out(py, &b)))
    }

    fn __repr__(&self) -> String {
        let vi = self.current();
        format!("MaximalIntegrator(dt={}, nbodies={}, njoints={})", vi.dt(), vi.mechanism().nbodies(), vi.mechanism().joints.len())
    }
}

/// A maximal-coordinate trajectory: body poses and velocities at every knot, the minimal
/// coordinates `q`, energies, constraint violations and Newton iterations.
#[pyclass(frozen, module = "vidyn", name = "MaximalTrajectory")]
pub struct PyMaximalTrajectory {
    inner: MaximalTrajectory,
}

impl PyMaximalTrajectory {
    fn body_array<'py>(&self, py: Python<'py>, width: usize, f: impl Fn(&vidyn_maximal::BodyState, usize) -> f64) -> Bound<'py, PyArray3<f64>> {
        let t = &self.inner;
        Array3::from_shape_fn((t.steps + 1, t.nbodies, width), |(k, b, c)| f(&t.states[k * t.nbodies + b], c)).into_pyarray(py)
    }
}

#[pymethods]
impl PyMaximalTrajectory {
    /// Minimal coordinates of every knot, (N+1, model.nq).
    #[getter]
    fn q<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        convert::rows_out(py, &self.inner.q, self.inner.nq)
    }
    /// Centres of mass in the world, (N+1, nbodies, 3).
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray3<f64>> {
        self.body_array(py, 3, |s, c| s.pose.x[c])
    }
    /// Body-to-world unit quaternions `[x y z w]`, (N+1, nbodies, 4).
    #[getter]
    fn quaternions<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray3<f64>> {
        self.body_array(py, 4, |s, c| s.pose.q.coords[c])
    }
    /// Discrete linear velocities (world) of the interval ending at each knot, (N+1, nbodies, 3).
    #[getter]
    fn linear_velocities<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray3<f64>> {
        self.body_array(py, 3, |s, c| s.v[c])
    }
    /// Discrete angular velocities (body frame) of the interval ending at each knot,
    /// (N+1, nbodies, 3).
    #[getter]
    fn angular_velocities<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray3<f64>> {
        self.body_array(py, 3, |s, c| s.w[c])
    }
    /// Energy at every knot, (N+1,).
    #[getter]
    fn energy<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.energy)
    }
    /// Largest constraint violation at every knot, (N+1,).
    #[getter]
    fn constraint_violation<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.constraint_violation)
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
    fn __repr__(&self) -> String {
        format!("MaximalTrajectory(steps={}, nbodies={})", self.inner.steps, self.inner.nbodies)
    }
}
