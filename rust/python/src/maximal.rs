//! The Python `MaximalIntegrator` and `MaximalTrajectory`: conversion only, the maths is
//! `vidyn_maximal`. Every computation runs detached from the interpreter.

use crate::convert;
use crate::errors::{py_err, INPUT_ERROR, STATE_ERROR, UNKNOWN_NAME_ERROR};
use crate::model::PyModel;
use crate::{detached, interruptible};
use nalgebra::Vector3;
use numpy::ndarray::Array3;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayDyn};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::{Arc, RwLock};
use vidyn_maximal::{
    linearize_trajectory, rollout_minimal, FrictionModel, JointKind, LinearizationOut, MaximalError, MaximalIntegrator, MaximalTrajectory, Mechanism, Plane,
    Shape, Sphere,
};
use vidyn_rbd::Model;
use vidyn_spatial::Se3;
use vidyn_vi::StepInput;

/// `(q_next, v_next, A, B)` of a minimal-coordinate step.
type MinimalStep<'py> = (Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>);

/// Two arrays returned together (`(A, B)`).
type Pair<'py> = (Bound<'py, PyArrayDyn<f64>>, Bound<'py, PyArrayDyn<f64>>);

/// The maximal-coordinate variational integrator of a model (every body a free rigid body,
/// joints and loop closures as constraints, graph-based sparse solver).
#[pyclass(frozen, module = "vidyn", name = "MaximalIntegrator")]
pub struct PyMaximalIntegrator {
    /// The integrator and what it was built from, replaced together (not mutated) by
    /// `add_loop_closure`, `add_contact` and `add_joint_limit`; calls clone the `Arc`s and
    /// release the lock.
    inner: RwLock<(Arc<MaximalIntegrator>, Arc<MaximalSpec>)>,
}

/// The arguments of a `MaximalIntegrator` and what was added to it since, in order: what
/// defines it, so that it can be rebuilt (unpickled) identically.
#[derive(Clone, Debug)]
pub(crate) struct MaximalSpec {
    pub model: Arc<Model>,
    pub dt: f64,
    pub damping: Option<Vec<f64>>,
    pub stiffness: Option<Vec<f64>>,
    pub rest: Option<Vec<f64>>,
    pub tolerance: f64,
    pub max_iterations: usize,
    pub additions: Vec<Addition>,
}

/// One call of `add_loop_closure`, `add_contact`, `add_joint_limit` or `add_body_contact`, its
/// arguments resolved (a body contact's shapes in their bodies' frames).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Addition {
    LoopClosure { name: String, kind: JointKind, parent: Option<usize>, parent_frame: Se3, child: usize, child_frame: Se3 },
    Contact { name: String, body: usize, point: Vector3<f64>, radius: f64, normal: Vector3<f64>, offset: f64, friction: f64, friction_model: FrictionModel },
    JointLimit { joint: usize, lower: f64, upper: f64 },
    BodyContact { name: String, bodies: [usize; 2], shapes: [Shape; 2], friction: f64, friction_model: FrictionModel },
}

impl Addition {
    /// Adds this to `mech`; returns the index of the new joint, contact or limit.
    fn apply(&self, mech: &mut Mechanism) -> Result<usize, MaximalError> {
        match self {
            Self::LoopClosure { name, kind, parent, parent_frame, child, child_frame } => {
                mech.add_loop_closure(name, *kind, *parent, *parent_frame, *child, *child_frame)
            }
            Self::Contact { name, body, point, radius, normal, offset, friction, friction_model } => {
                let c = mech.add_contact(name, *body, Sphere { centre: *point, radius: *radius }, Plane { normal: *normal, offset: *offset }, *friction)?;
                mech.set_friction_model(c, *friction_model)?;
                Ok(c)
            }
            Self::JointLimit { joint, lower, upper } => mech.add_joint_limit(*joint, *lower, *upper),
            Self::BodyContact { name, bodies, shapes, friction, friction_model } => {
                let c = mech.add_body_contact(name, (bodies[0], shapes[0]), (bodies[1], shapes[1]), *friction)?;
                mech.set_body_contact_friction_model(c, *friction_model)?;
                Ok(c)
            }
        }
    }
}

impl MaximalSpec {
    /// The integrator of `mech` with this spec's time step and Newton settings.
    fn integrator(&self, mech: Mechanism) -> Result<MaximalIntegrator, MaximalError> {
        MaximalIntegrator::new(Arc::new(mech), self.dt)?.with_newton(self.tolerance, self.max_iterations)
    }

    /// Whether the integrator of `other` has this one's dynamics: the same model, time step,
    /// joint forces and additions (the Newton settings move a step only within its tolerance).
    fn same_dynamics(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.model, &other.model) || self.model == other.model)
            && self.dt.to_bits() == other.dt.to_bits()
            && (&self.damping, &self.stiffness, &self.rest) == (&other.damping, &other.stiffness, &other.rest)
            && self.additions == other.additions
    }

    /// The integrator this spec describes: the model's mechanism, its joint forces, the
    /// additions replayed in order.
    pub fn build(&self) -> Result<MaximalIntegrator, MaximalError> {
        let mut mech = Mechanism::from_model(Arc::clone(&self.model))?;
        if let Some(d) = &self.damping {
            mech.damping.clone_from(d);
        }
        if let Some(k) = &self.stiffness {
            mech.stiffness.clone_from(k);
        }
        if let Some(r) = &self.rest {
            mech.rest.clone_from(r);
        }
        for a in &self.additions {
            a.apply(&mut mech)?;
        }
        self.integrator(mech)
    }
}

impl PyMaximalIntegrator {
    pub(crate) fn current(&self) -> Arc<MaximalIntegrator> {
        self.current_with_spec().0
    }
    fn current_with_spec(&self) -> (Arc<MaximalIntegrator>, Arc<MaximalSpec>) {
        match self.inner.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
    /// The integrator of `spec`.
    pub(crate) fn from_spec(py: Python<'_>, spec: MaximalSpec) -> PyResult<Self> {
        let inner = detached(py, || spec.build())?;
        Ok(Self { inner: RwLock::new((Arc::new(inner), Arc::new(spec))) })
    }
    /// Adds `addition` to the mechanism, replacing the integrator; returns the new index.
    fn add(&self, addition: Addition) -> PyResult<usize> {
        let (vi, spec) = self.current_with_spec();
        let mut mech = (**vi.mechanism()).clone();
        let (index, new) = (|| -> Result<(usize, MaximalIntegrator), MaximalError> {
            let index = addition.apply(&mut mech)?;
            Ok((index, spec.integrator(mech)?))
        })()
        .map_err(py_err)?;
        let mut spec = (*spec).clone();
        spec.additions.push(addition);
        let new = (Arc::new(new), Arc::new(spec));
        match self.inner.write() {
            Ok(mut g) => *g = new,
            Err(p) => *p.into_inner() = new,
        }
        Ok(index)
    }
    /// The state of the current integrator.
    fn state(&self) -> Vec<u8> {
        crate::states::maximal_state(&self.current_with_spec().1)
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

/// The friction model called `name` (InputError listing the accepted names otherwise).
fn friction_model_arg(name: &str) -> PyResult<FrictionModel> {
    FrictionModel::from_name(name).ok_or_else(|| {
        let accepted = FrictionModel::NAMES.map(|n| format!("'{n}'")).join(", ");
        INPUT_ERROR.err(format!("friction_model = '{name}' is not a friction model; expected one of {accepted}"))
    })
}

/// A body and the placement in it of the frame a shape is given in: a body index (int, its
/// own frame), the name of a frame of `model` fixed to a body (URDF link, joint, operational
/// frame), or else the name of the joint moving a body (its own frame).
fn frame_on_body(mech: &Mechanism, model: &Model, x: &Bound<'_, PyAny>, name: &str) -> PyResult<(usize, Se3)> {
    let Ok(s) = x.extract::<String>() else {
        return Ok((body_ref(mech, Some(x), name, false)?.unwrap_or(0), Se3::identity()));
    };
    let Ok(f) = model.frame_index(&s) else {
        return Ok((body_ref(mech, Some(x), name, false)?.unwrap_or(0), Se3::identity()));
    };
    let frame = &model.frames[f];
    match frame.parent {
        Some(b) => Ok((b, frame.placement)),
        None => {
            Err(INPUT_ERROR.err(format!("{name}: frame '{s}' is fixed to the world; a body contact needs two moving bodies (use add_contact for the ground)")))
        }
    }
}

/// A shape `(kind, size)` or `(kind, size, placement)` given in a frame with placement
/// `frame` in its body: `"sphere"` `(radius,)`, `"capsule"` `(radius, length)` along the shape
/// frame's z axis (length between the caps' centres, as URDF), `"box"` `(x, y, z)` edge
/// lengths; centred on the shape frame, `placement` (4, 4) in the frame (identity if
/// omitted). Returned in the body's frame.
fn shape_arg(x: &Bound<'_, PyAny>, name: &str, frame: &Se3) -> PyResult<Shape> {
    let parts: Vec<Bound<'_, PyAny>> = x.extract().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!("{name} must be a tuple (kind, size) or (kind, size, placement), got {}", convert::type_name(x)))
    })?;
    if !(2..=3).contains(&parts.len()) {
        return Err(INPUT_ERROR.err(format!("{name} has {} items; expected (kind, size) or (kind, size, placement)", parts.len())));
    }
    let kind: String = parts[0].extract().map_err(|_| pyo3::exceptions::PyTypeError::new_err(format!("{name}[0] (the kind) must be a str")))?;
    let placement = match parts.get(2).filter(|p| !p.is_none()) {
        Some(p) => convert::placement(p, &format!("{name}[2]"))?,
        None => Se3::identity(),
    };
    let size = |n: usize, desc: &str| convert::read(&parts[1], &format!("{name}[1]"), &[n], Some(desc));
    let (r, o) = (placement.rotation, placement.translation);
    let local = match kind.as_str() {
        "sphere" => Shape::Sphere { centre: o, radius: size(1, "(radius,)")?[0] },
        "capsule" => {
            let s = size(2, "(radius, length)")?;
            let half = r * Vector3::new(0.0, 0.0, 0.5 * s[1]);
            Shape::Capsule { a: o - half, b: o + half, radius: s[0] }
        }
        "box" => {
            let s = size(3, "(x, y, z)")?;
            Shape::Box { centre: o, rotation: r, half_extents: Vector3::new(s[0], s[1], s[2]) * 0.5 }
        }
        other => return Err(INPUT_ERROR.err(format!("{name}: kind = '{other}' is not a contact shape; expected 'sphere', 'capsule' or 'box'"))),
    };
    Ok(local.transformed(&frame.rotation, &frame.translation))
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
        let m = model.get().without_mimics("MaximalIntegrator")?.clone();
        let n = m.nv;
        let read = |x: Option<&Bound<'_, PyAny>>, name: &str| x.map(|x| convert::read(x, name, &[n], Some("(model.nv,)"))).transpose();
        let (damping, stiffness, rest) = (read(damping, "damping")?, read(stiffness, "stiffness")?, read(rest, "rest")?);
        Self::from_spec(model.py(), MaximalSpec { model: m, dt, damping, stiffness, rest, tolerance, max_iterations, additions: Vec::new() })
    }

    /// The model as given (shared, not copied).
    #[getter]
    fn model(&self) -> PyModel {
        PyModel::shared(Arc::clone(&self.current_with_spec().1.model))
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
        let mech = &**vi.mechanism();
        let pa = body_ref(mech, parent, "parent", true)?;
        let ch = body_ref(mech, Some(child), "child", false)?.unwrap_or(0);
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
        self.add(Addition::LoopClosure { name: name.to_string(), kind, parent: pa, parent_frame: pf, child: ch, child_frame: cf })
    }

    /// Adds a contact between a sphere of `radius` centred at `point` (3,) in the frame of
    /// body `body` (model joint name or index) and the world plane through `offset·normal`
    /// (unit `normal` (3,), default +z), with Coulomb `friction` on the `friction_model`
    /// `"pyramid"` (linearised, 4 directions) or `"cone"` (isotropic). Returns the contact index.
    #[pyo3(signature = (name, body, point, radius = 0.0, normal = None, offset = 0.0, friction = 0.5, friction_model = "pyramid"))]
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
        friction_model: &str,
    ) -> PyResult<usize> {
        let model = friction_model_arg(friction_model)?;
        let vi = self.current();
        let mech = &**vi.mechanism();
        let b = body_ref(mech, Some(body), "body", false)?.unwrap_or(0);
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
        self.add(Addition::Contact { name: name.to_string(), body: b, point: p, radius, normal: n, offset, friction, friction_model: model })
    }

    /// Adds a contact between `shape_a` on body `body_a` and `shape_b` on body `body_b`, each a
    /// body index (the shape in its frame), a frame fixed to a body (URDF link, joint,
    /// operational frame: the shape in that frame) or the name of the joint moving a body,
    /// with Coulomb `friction` on `friction_model` (`"pyramid"`, `"cone"`;
    /// `"frictionless"`, the default when `friction` is 0). A shape is `(kind, size)` or
    /// `(kind, size, placement)` in its frame: `"sphere"` `(radius,)`, `"capsule"`
    /// `(radius, length)` along z, `"box"` `(x, y, z)` edge lengths, centred on `placement`
    /// (4, 4). Pairs: sphere–sphere, sphere–capsule, capsule–capsule, sphere–box. Returns the
    /// body contact's index.
    #[pyo3(signature = (name, body_a, shape_a, body_b, shape_b, friction = 0.5, friction_model = None))]
    #[allow(clippy::too_many_arguments)]
    fn add_body_contact(
        &self,
        name: &str,
        body_a: &Bound<'_, PyAny>,
        shape_a: &Bound<'_, PyAny>,
        body_b: &Bound<'_, PyAny>,
        shape_b: &Bound<'_, PyAny>,
        friction: f64,
        friction_model: Option<&str>,
    ) -> PyResult<usize> {
        let model = match friction_model {
            Some(m) => friction_model_arg(m)?,
            None if friction == 0.0 => FrictionModel::Frictionless,
            None => FrictionModel::Pyramid,
        };
        let vi = self.current();
        let m = vi.mechanism().model.clone().ok_or_else(|| INPUT_ERROR.err("the mechanism has no model"))?;
        let (ba, fa) = frame_on_body(vi.mechanism(), &m, body_a, "body_a")?;
        let (bb, fb) = frame_on_body(vi.mechanism(), &m, body_b, "body_b")?;
        let shapes = [shape_arg(shape_a, "shape_a", &fa)?, shape_arg(shape_b, "shape_b", &fb)?];
        self.add(Addition::BodyContact { name: name.to_string(), bodies: [ba, bb], shapes, friction, friction_model: model })
    }

    /// Number of body contacts.
    #[getter]
    fn nbody_contacts(&self) -> usize {
        self.current().mechanism().body_contacts.len()
    }

    /// Signed distances `φ` (N+1, number of body contacts) of the body contacts at every knot of
    /// `traj` (a MaximalTrajectory of this integrator): negative when the shapes overlap.
    fn body_contact_distances<'py>(&self, py: Python<'py>, traj: &Bound<'py, PyMaximalTrajectory>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (vi, spec) = self.current_with_spec();
        let t = own_trajectory(traj.get(), &spec, "body_contact_distances")?;
        let contacts = &vi.mechanism().body_contacts;
        let mut out = numpy::ndarray::Array2::<f64>::zeros((t.steps + 1, contacts.len()));
        for (k, states) in t.states.chunks_exact(t.nbodies.max(1)).enumerate() {
            let poses: Vec<vidyn_maximal::Pose> = states.iter().map(|s| s.pose).collect();
            for (c, bc) in contacts.iter().enumerate() {
                out[(k, c)] = bc.distance(&poses);
            }
        }
        Ok(out.into_pyarray(py))
    }

    /// Adds position limits `lower <= q <= upper` to the revolute or prismatic model joint
    /// `joint` (name or index), enforced as interior-point inequalities. Returns the limit
    /// index.
    fn add_joint_limit(&self, joint: &Bound<'_, PyAny>, lower: f64, upper: f64) -> PyResult<usize> {
        let vi = self.current();
        let mech = &**vi.mechanism();
        let j = body_ref(mech, Some(joint), "joint", false)?.unwrap_or(0);
        self.add(Addition::JointLimit { joint: j, lower, upper })
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
        let (vi, spec) = self.current_with_spec();
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
        Ok(PyMaximalTrajectory { inner: traj.map_err(py_err)?, spec })
    }

    /// Exact linearisation of every step of `traj` (a MaximalTrajectory of this integrator),
    /// in parallel: `A` (N, 12·nbodies, 12·nbodies) and `B` (N, 12·nbodies, model.nv) in the
    /// per-body tangent coordinates `[δx (world); δθ (body); δv (world); δω (body)]`.
    fn linearize<'py>(&self, py: Python<'py>, traj: &Bound<'py, PyMaximalTrajectory>) -> PyResult<Pair<'py>> {
        let (vi, spec) = self.current_with_spec();
        let t = own_trajectory(traj.get(), &spec, "linearize")?;
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
            vi.linearize_minimal(&mut vi.workspace(), StepInput::new(0, &q, &v, &u), &mut qn, &mut vn, &mut a, &mut b).map(|_| (qn, vn, a, b))
        })?;
        Ok((PyArray1::from_vec(py, qn), PyArray1::from_vec(py, vn), convert::matrix_out(py, &a), convert::matrix_out(py, &b)))
    }

    /// The integrator as bytes: a versioned, checksummed state of its model, arguments and
    /// the loop closures, contacts and limits added to it (what pickling sends);
    /// `MaximalIntegrator.from_bytes` rebuilds it.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.state())
    }

    /// The integrator of bytes made by `to_bytes` (raises StateError for anything else).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data = crate::states::bytes_arg(data)?;
        let spec = detached(py, move || crate::states::maximal_from_state(&data))?;
        Self::from_spec(py, spec)
    }

    /// Equal when built from equal models and arguments, with the same additions in the same
    /// order (bit for bit). Not hashable: `add_*` changes it.
    fn __eq__(&self, other: &Bound<'_, Self>) -> bool {
        self.state() == other.get().state()
    }

    #[classattr]
    const __hash__: Option<Py<PyAny>> = None;

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        Ok((py.get_type::<Self>().getattr(intern!(py, "from_bytes"))?, (self.to_bytes(py),)))
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
    pub(crate) inner: MaximalTrajectory,
    /// What the integrator that made it was built from (pickling and saving write it).
    pub(crate) spec: Arc<MaximalSpec>,
}

/// The trajectory of `traj` if an integrator with the dynamics of `spec` made it, else
/// InputError (`what`: the method called).
fn own_trajectory<'a>(traj: &'a PyMaximalTrajectory, spec: &MaximalSpec, what: &str) -> PyResult<&'a MaximalTrajectory> {
    if traj.spec.same_dynamics(spec) {
        return Ok(&traj.inner);
    }
    let describe = |s: &MaximalSpec| format!("model '{}', dt = {}, {} additions", s.model.name, s.dt, s.additions.len());
    Err(INPUT_ERROR.err(format!(
        "traj was made by another integrator ({}) whose dynamics differ from this one's ({}) in the model, time step, joint forces, loop closures, contacts or joint limits: call {what} on the integrator that made it",
        describe(&traj.spec),
        describe(spec)
    )))
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
    /// Generalised forces of every step, (N, model.nv) ((N, 0) when simulated without).
    #[getter]
    fn u<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        let t = &self.inner;
        if t.u.is_empty() {
            return PyArray2::zeros(py, (t.steps, 0), false);
        }
        convert::rows_out(py, &t.u, t.nu)
    }

    /// The integrator that made the trajectory (rebuilt from what defines it).
    #[getter]
    fn integrator(&self, py: Python<'_>) -> PyResult<PyMaximalIntegrator> {
        PyMaximalIntegrator::from_spec(py, (*self.spec).clone())
    }

    /// The trajectory as bytes: a versioned, checksummed state of its arrays and of the
    /// integrator that made it (what pickling sends); `MaximalTrajectory.from_bytes`
    /// rebuilds it.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &crate::states::maximal_trajectory_state(&self.spec, &self.inner))
    }

    /// The trajectory of bytes made by `to_bytes` (raises StateError for anything else).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data = crate::states::bytes_arg(data)?;
        let (spec, inner) = detached(py, move || crate::states::maximal_trajectory_from_state(&data))?;
        // its integrator, rebuilt, validates the spec and the trajectory's sizes
        let vi = PyMaximalIntegrator::from_spec(py, spec)?.current_with_spec();
        let mech = vi.0.mechanism();
        if inner.nbodies != mech.nbodies() || (!inner.u.is_empty() && inner.nu != mech.nu) {
            return Err(STATE_ERROR.err(format!(
                "malformed MaximalTrajectory state: {} bodies and {} forces, but its integrator has {} and {}",
                inner.nbodies,
                inner.nu,
                mech.nbodies(),
                mech.nu
            )));
        }
        Ok(Self { inner, spec: vi.1 })
    }

    /// A trajectory of `integrator` from its arrays (what `load` reads), shapes as the
    /// getters'.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn _from_arrays(
        integrator: &Bound<'_, PyMaximalIntegrator>,
        q: &Bound<'_, PyAny>,
        u: &Bound<'_, PyAny>,
        positions: &Bound<'_, PyAny>,
        quaternions: &Bound<'_, PyAny>,
        linear_velocities: &Bound<'_, PyAny>,
        angular_velocities: &Bound<'_, PyAny>,
        energy: &Bound<'_, PyAny>,
        constraint_violation: &Bound<'_, PyAny>,
        iterations: Vec<usize>,
    ) -> PyResult<Self> {
        let (vi, spec) = integrator.get().current_with_spec();
        let mech = vi.mechanism();
        let (nb, nq, nu) = (mech.nbodies(), spec.model.nq, mech.nu);
        let steps = iterations.len();
        let knots = steps + 1;
        let read = |x: &Bound<'_, PyAny>, name: &str, shape: &[usize]| convert::read(x, name, shape, None);
        let q = read(q, "q", &[knots, nq])?;
        let u = if convert::shape(u, "u")?.iter().product::<usize>() == 0 { Vec::new() } else { read(u, "u", &[steps, nu])? };
        let (x, quat) = (read(positions, "positions", &[knots, nb, 3])?, read(quaternions, "quaternions", &[knots, nb, 4])?);
        let (v, w) = (read(linear_velocities, "linear_velocities", &[knots, nb, 3])?, read(angular_velocities, "angular_velocities", &[knots, nb, 3])?);
        let (energy, constraint_violation) = (read(energy, "energy", &[knots])?, read(constraint_violation, "constraint_violation", &[knots])?);
        let states = (0..knots * nb)
            .map(|i| crate::states::body_state(&x[3 * i..3 * i + 3], &quat[4 * i..4 * i + 4], &v[3 * i..3 * i + 3], &w[3 * i..3 * i + 3]))
            .collect();
        let inner = MaximalTrajectory { nbodies: nb, steps, states, q, nq, u, nu, iterations, energy, constraint_violation };
        Ok(Self { inner, spec })
    }

    /// Saves the trajectory to an ``.npz`` file (`vidyn.trajectory_io.save`): its arrays,
    /// the integrator that made it, and metadata (model name and hash, dt, scheme
    /// "maximal", vidyn version).
    fn save(slf: &Bound<'_, Self>, path: &Bound<'_, PyAny>) -> PyResult<()> {
        slf.py().import("vidyn.trajectory_io")?.getattr("save")?.call1((slf, path)).map(drop)
    }

    /// The trajectory saved in ``path`` by `save`. With `integrator` (a MaximalIntegrator or a
    /// Model), checks that the file was saved from it (the same model by content hash, and
    /// for an integrator an equal one); raises StateError otherwise.
    #[staticmethod]
    #[pyo3(signature = (path, integrator = None))]
    fn load<'py>(py: Python<'py>, path: &Bound<'py, PyAny>, integrator: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        py.import("vidyn.trajectory_io")?.getattr("load_maximal")?.call1((path, integrator))
    }

    /// Equal when made by equal integrators with the same arrays, bit for bit.
    fn __eq__(&self, other: &Bound<'_, Self>) -> bool {
        let o = other.get();
        crate::states::maximal_trajectory_state(&self.spec, &self.inner) == crate::states::maximal_trajectory_state(&o.spec, &o.inner)
    }

    fn __hash__(&self) -> u64 {
        crate::states::digest_hash(&crate::states::maximal_trajectory_state(&self.spec, &self.inner))
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        Ok((py.get_type::<Self>().getattr(intern!(py, "from_bytes"))?, (self.to_bytes(py),)))
    }

    fn __repr__(&self) -> String {
        format!("MaximalTrajectory(steps={}, nbodies={})", self.inner.steps, self.inner.nbodies)
    }
}
