//! The Python `Model`: an immutable `Arc<vidyn_rbd::Model>` plus a reusable workspace.

use crate::convert;
use crate::detached;
use crate::errors::{INPUT_ERROR, MODEL_ERROR};
use numpy::PyArray1;
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyType};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use vidyn_rbd as rbd;
use vidyn_rbd::urdf::RootJoint;

/// A kinematic tree: bodies, joints, inertias, frames and limits. Immutable.
#[pyclass(frozen, module = "vidyn", name = "Model")]
pub struct PyModel {
    pub inner: Arc<rbd::Model>,
    /// Scratch reused by calls, made by the first call that needs one (a workspace holds
    /// `nv × nv` matrices: a model that is only stepped by an integrator, or passed to a
    /// batch, stays O(n) in memory); a call that finds it busy (another thread) makes its own.
    ws: OnceLock<Mutex<rbd::Workspace>>,
    /// The model's state (`vidyn_rbd::state`), made on first use: what pickling, equality,
    /// `hash()` and `content_hash()` read.
    state: OnceLock<Vec<u8>>,
    /// The coupling of its mimic joints (`vidyn_rbd::mimic`), made on first use; `None`
    /// without mimic joints.
    coupling: OnceLock<Option<rbd::Coupling>>,
}

/// The model's workspace, or a fresh one when it is in use by another thread.
pub enum WorkspaceGuard<'a> {
    Shared(MutexGuard<'a, rbd::Workspace>),
    Fresh(Box<rbd::Workspace>),
}

impl Deref for WorkspaceGuard<'_> {
    type Target = rbd::Workspace;
    fn deref(&self) -> &rbd::Workspace {
        match self {
            Self::Shared(g) => g,
            Self::Fresh(w) => w,
        }
    }
}

impl DerefMut for WorkspaceGuard<'_> {
    fn deref_mut(&mut self) -> &mut rbd::Workspace {
        match self {
            Self::Shared(g) => g,
            Self::Fresh(w) => w,
        }
    }
}

impl PyModel {
    pub fn new(model: rbd::Model) -> Self {
        Self::shared(Arc::new(model))
    }

    /// A Python model sharing `model` (no copy).
    pub fn shared(model: Arc<rbd::Model>) -> Self {
        Self { inner: model, ws: OnceLock::new(), state: OnceLock::new(), coupling: OnceLock::new() }
    }

    /// The coupling of the model's mimic joints, `None` without any: the one switch between
    /// the extended tree the core computes on and the reduced coordinates Python sees.
    pub fn coupling(&self) -> Option<&rbd::Coupling> {
        self.coupling.get_or_init(|| self.inner.has_mimics().then(|| self.inner.coupling())).as_ref()
    }

    /// `nq` as Python sees it (reduced with mimic joints).
    pub fn nq(&self) -> usize {
        self.coupling().map_or(self.inner.nq, rbd::Coupling::nq)
    }

    /// `nv` as Python sees it (reduced with mimic joints).
    pub fn nv(&self) -> usize {
        self.coupling().map_or(self.inner.nv, rbd::Coupling::nv)
    }

    /// A configuration `(model.nq,)` as Python sees it.
    pub fn read_q(&self, x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
        convert::read(x, name, &[self.nq()], Some("(model.nq,)"))
    }

    /// A tangent vector `(model.nv,)` as Python sees it.
    pub fn read_v(&self, x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
        convert::read(x, name, &[self.nv()], Some("(model.nv,)"))
    }

    /// The extended configuration `G q + o` of a configuration as Python sees it (itself
    /// without mimic joints).
    pub fn lift_q(&self, q: Vec<f64>) -> Vec<f64> {
        match self.coupling() {
            None => q,
            Some(c) => {
                let mut q_e = vec![0.0; c.nq_extended()];
                c.lift_configuration(&q, &mut q_e);
                q_e
            }
        }
    }

    /// The extended tangent vector `G v` (velocities, accelerations).
    pub fn lift_v(&self, v: Vec<f64>) -> Vec<f64> {
        match self.coupling() {
            None => v,
            Some(c) => {
                let mut v_e = vec![0.0; c.nv_extended()];
                c.lift_tangent(&v, &mut v_e);
                v_e
            }
        }
    }

    /// The entries of the free coordinates of an extended per-coordinate vector (`q`, limits).
    pub fn restrict(&self, x: &[f64], configuration: bool) -> Vec<f64> {
        match self.coupling() {
            None => x.to_vec(),
            Some(c) if configuration => {
                let mut out = vec![0.0; c.nq()];
                c.restrict_configuration(x, &mut out);
                out
            }
            Some(c) => {
                let mut out = vec![0.0; c.nv()];
                c.restrict_tangent(x, &mut out);
                out
            }
        }
    }

    /// `A G` of an extended `(r, n_e)` matrix (Jacobians): `A` itself without mimic joints.
    pub fn columns_out<'py>(&self, py: Python<'py>, a: &nalgebra::DMatrix<f64>) -> Bound<'py, numpy::PyArray2<f64>> {
        match self.coupling() {
            None => convert::matrix_out(py, a),
            Some(c) => {
                let mut out = nalgebra::DMatrix::zeros(a.nrows(), c.nv());
                c.reduce_columns(a, &mut out);
                convert::matrix_out(py, &out)
            }
        }
    }

    /// Per body, the reduced index of its first coordinate (its leader's for a mimic joint).
    fn reduced_indices(&self, idx: &[usize], configuration: bool) -> Vec<usize> {
        match self.coupling() {
            None => idx.to_vec(),
            Some(c) if configuration => idx.iter().map(|&e| c.configuration_column(e)).collect(),
            Some(c) => idx.iter().map(|&e| c.tangent_column(e)).collect(),
        }
    }

    /// The model itself when it has no mimic joints, else ModelError naming `what`.
    pub fn without_mimics(&self, what: &str) -> PyResult<&Arc<rbd::Model>> {
        self.inner.refuse_mimics(what).map_err(crate::errors::py_err)?;
        Ok(&self.inner)
    }

    /// The model's state (made once).
    pub fn state(&self) -> &[u8] {
        self.state.get_or_init(|| self.inner.to_state())
    }

    /// Scratch for one call. Never blocks: a busy workspace means a fresh one. A poisoned
    /// workspace (a panic during an earlier call) holds scratch only and is reused.
    pub fn workspace(&self) -> WorkspaceGuard<'_> {
        match self.ws.get_or_init(|| Mutex::new(self.inner.workspace())).try_lock() {
            Ok(g) => WorkspaceGuard::Shared(g),
            Err(TryLockError::Poisoned(p)) => WorkspaceGuard::Shared(p.into_inner()),
            Err(TryLockError::WouldBlock) => WorkspaceGuard::Fresh(Box::new(self.inner.workspace())),
        }
    }

    /// Index of frame `frame` given by name or by index.
    pub fn frame_arg(&self, frame: &Bound<'_, PyAny>) -> PyResult<usize> {
        let m = &self.inner;
        if let Ok(name) = frame.extract::<&str>() {
            return m.frame_index(name).map_err(crate::errors::py_err);
        }
        let Ok(i) = frame.extract::<i128>() else {
            return Err(PyTypeError::new_err(format!("frame must be a frame name (str) or index (int), got {}", convert::type_name(frame))));
        };
        let len = m.frames.len();
        usize::try_from(i).ok().filter(|&i| i < len).ok_or_else(|| INPUT_ERROR.err(format!("frame index {i} out of range (model has {len} frames)")))
    }

    /// The model `load` reads, its warnings issued as `ModelWarning`s.
    fn from_urdf_result(py: Python<'_>, load: impl Send + FnOnce() -> rbd::Result<(rbd::Model, Vec<String>)>) -> PyResult<Self> {
        let (model, warnings) = detached(py, load)?;
        crate::errors::warn_model(py, &warnings)?;
        Ok(Self::new(model))
    }
}

fn root_joint(floating_base: bool) -> RootJoint {
    if floating_base {
        RootJoint::FreeFlyer
    } else {
        RootJoint::Fixed
    }
}

/// A `u64` seed from `None` (fresh entropy), an int, or a `numpy.random.Generator`.
fn seed_from(rng: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    let Some(rng) = rng.filter(|r| !r.is_none()) else {
        return Ok(rand::random());
    };
    let py = rng.py();
    static GENERATOR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    if rng.is_instance(GENERATOR.import(py, "numpy.random", "Generator")?)? {
        return rng.call_method1(intern!(py, "integers"), (0u64, 1u64 << 63))?.extract::<u64>();
    }
    match rng.extract::<i128>() {
        Ok(s) => u64::try_from(s).map_err(|_| INPUT_ERROR.err(format!("rng seed must be in [0, 2**64), got {s}"))),
        Err(_) => Err(PyTypeError::new_err(format!("rng must be None, an int seed or a numpy.random.Generator, got {}", convert::type_name(rng)))),
    }
}

/// Rejects position limits whose width overflows `f64` (uniform sampling would be undefined).
fn check_sampling_limits(m: &rbd::Model) -> PyResult<()> {
    let (lo, hi) = (&m.limits.lower_position, &m.limits.upper_position);
    for (i, (l, h)) in lo.iter().zip(hi).enumerate() {
        if l.is_finite() && h.is_finite() && l < h && !(h - l).is_finite() {
            return Err(MODEL_ERROR.err(format!("position limits of q[{i}] span [{l}, {h}], too wide to sample uniformly")));
        }
    }
    Ok(())
}

#[pymethods]
impl PyModel {
    /// Loads a URDF file. `floating_base=True` attaches the root link to the world with a
    /// free-flyer joint (nq += 7, nv += 6) instead of rigidly. `mimic=True` couples the
    /// `<mimic>` joints (Pinocchio's `mimic=True`): each follows `multiplier * q_leader + offset`
    /// and has no coordinate of its own; by default they are independent joints (with a
    /// ModelWarning).
    #[staticmethod]
    #[pyo3(signature = (path, floating_base = false, mimic = false))]
    fn from_urdf(py: Python<'_>, path: PathBuf, floating_base: bool, mimic: bool) -> PyResult<Self> {
        Self::from_urdf_result(py, move || rbd::urdf::from_urdf_file_with_warnings(&path, root_joint(floating_base), mimic))
    }

    /// Parses a URDF document given as a string (arguments as `from_urdf`).
    #[staticmethod]
    #[pyo3(signature = (xml, floating_base = false, mimic = false))]
    fn from_urdf_string(py: Python<'_>, xml: &str, floating_base: bool, mimic: bool) -> PyResult<Self> {
        Self::from_urdf_result(py, move || rbd::urdf::from_urdf_str_with_warnings(xml, root_joint(floating_base), mimic))
    }

    /// Loads a MuJoCo model (MJCF `.xml` or compiled `.mjb`) with MuJoCo's own parser: its
    /// kinematic tree, inertias and gravity (`vidyn.mjcf.from_mjcf`, which says what maps
    /// and what is refused; needs `pip install mujoco`).
    #[staticmethod]
    #[pyo3(signature = (path, ignore_armature = false))]
    fn from_mjcf<'py>(py: Python<'py>, path: &Bound<'py, PyAny>, ignore_armature: bool) -> PyResult<Bound<'py, PyAny>> {
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("ignore_armature", ignore_armature)?;
        py.import("vidyn.mjcf")?.getattr("from_mjcf")?.call((path,), Some(&kwargs))
    }

    /// Model name (the URDF robot name).
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Number of configuration coordinates (without those of mimic joints).
    #[getter(nq)]
    fn py_nq(&self) -> usize {
        self.nq()
    }

    /// Number of velocity coordinates, degrees of freedom (without those of mimic joints).
    #[getter(nv)]
    fn py_nv(&self) -> usize {
        self.nv()
    }

    /// Number of moving bodies (= joints).
    #[getter]
    fn nbodies(&self) -> usize {
        self.inner.nbodies()
    }

    /// (nbodies,) name of the joint moving each body.
    #[getter]
    fn joint_names(&self) -> Vec<String> {
        self.inner.joint_names.clone()
    }

    /// (nbodies,) kind of each joint: revolute, prismatic, spherical, freeflyer or planar.
    #[getter]
    fn joint_kinds(&self) -> Vec<&'static str> {
        self.inner.joints.iter().map(rbd::Joint::kind_name).collect()
    }

    /// (nbodies,) parent body of each body, -1 for the world.
    #[getter]
    fn parents(&self) -> Vec<i64> {
        self.inner.parents.iter().map(|p| p.map_or(-1, |p| p as i64)).collect()
    }

    /// (nbodies,) first configuration index of each joint (a mimic joint's is its leader's,
    /// as in Pinocchio).
    #[getter]
    fn idx_q(&self) -> Vec<usize> {
        self.reduced_indices(&self.inner.idx_q, true)
    }

    /// (nbodies,) first velocity index of each joint (a mimic joint's is its leader's).
    #[getter]
    fn idx_v(&self) -> Vec<usize> {
        self.reduced_indices(&self.inner.idx_v, false)
    }

    /// (nmimic,) the mimic joints: `(joint, leader, multiplier, offset)` with
    /// `q_joint = multiplier * q_leader + offset`; empty unless loaded with `mimic=True`.
    #[getter]
    fn mimic_joints(&self) -> Vec<(String, String, f64, f64)> {
        let m = &self.inner;
        m.mimics.iter().map(|x| (m.joint_names[x.joint].clone(), m.joint_names[x.leader].clone(), x.multiplier, x.offset)).collect()
    }

    /// The same tree with every joint independent (the mimic joints with their own
    /// coordinates: the model `mimic=False` loads), whose coordinates `lift_configuration` and
    /// `lift_tangent` give.
    fn extended(&self) -> Self {
        Self::new(rbd::Model { mimics: Vec::new(), ..(*self.inner).clone() })
    }

    /// `G q + o` (extended().nq,): the configuration of `extended()` of a configuration q (nq,),
    /// each mimic joint at `multiplier * q_leader + offset`.
    fn lift_configuration<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let q = self.read_q(q, "q")?;
        Ok(convert::vector_out(py, &self.lift_q(q)))
    }

    /// `G v` (extended().nv,): the velocity (or acceleration) of `extended()` of a velocity v (nv,).
    fn lift_tangent<'py>(&self, py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let v = self.read_v(v, "v")?;
        Ok(convert::vector_out(py, &self.lift_v(v)))
    }

    /// The coupling matrix G (extended().nv, nv): `v_e = G v`; the reduced mass matrix is
    /// `G.T @ M_e @ G`, Jacobians `J_e @ G`, generalised forces `G.T @ tau_e`. The identity
    /// without mimic joints.
    fn coupling_matrix<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray2<f64>> {
        convert::matrix_out(py, &self.inner.coupling().matrix())
    }

    /// (nframes,) names of the frames.
    #[getter]
    fn frame_names(&self) -> Vec<String> {
        self.inner.frames.iter().map(|f| f.name.clone()).collect()
    }

    /// (3,) gravity in the world frame, m/s².
    #[getter]
    fn gravity<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector3_out(py, &self.inner.gravity.linear)
    }

    /// A copy of the model with gravity `g` (3,) in the world frame, m/s².
    fn with_gravity(&self, g: &Bound<'_, PyAny>) -> PyResult<Self> {
        let g = convert::vector3(g, "g")?;
        let mut m = (*self.inner).clone();
        m.gravity.linear = g;
        Ok(Self::new(m))
    }

    /// (nq,) lower position limits (-inf when unbounded).
    #[getter]
    fn lower_position_limit<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector_out(py, &self.restrict(&self.inner.limits.lower_position, true))
    }

    /// (nq,) upper position limits (+inf when unbounded).
    #[getter]
    fn upper_position_limit<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector_out(py, &self.restrict(&self.inner.limits.upper_position, true))
    }

    /// (nv,) velocity limits (+inf when unknown).
    #[getter]
    fn velocity_limit<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector_out(py, &self.restrict(&self.inner.limits.velocity, false))
    }

    /// (nv,) effort limits (+inf when unknown).
    #[getter]
    fn effort_limit<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector_out(py, &self.restrict(&self.inner.limits.effort, false))
    }

    /// (nv,) viscous damping coefficients.
    #[getter]
    fn damping<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector_out(py, &self.restrict(&self.inner.limits.damping, false))
    }

    /// (nv,) Coulomb friction coefficients.
    #[getter]
    fn friction<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector_out(py, &self.restrict(&self.inner.limits.friction, false))
    }

    /// Sum of the body masses, kg.
    #[getter]
    fn total_mass(&self) -> f64 {
        self.inner.total_mass()
    }

    /// The neutral configuration `(nq,)`: zero angles and displacements, identity quaternions.
    fn neutral<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        convert::vector_out(py, &self.restrict(&rbd::neutral(&self.inner), true))
    }

    /// A random configuration `(nq,)` within the position limits (unbounded angles in
    /// [-pi, pi], unbounded translations in [-1, 1], rotations uniform).
    /// `rng`: None (fresh entropy), an int seed, or a `numpy.random.Generator` (one
    /// integer is drawn from it as the seed).
    #[pyo3(signature = (rng = None))]
    fn random_configuration<'py>(&self, py: Python<'py>, rng: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let mut r = ChaCha8Rng::seed_from_u64(seed_from(rng)?);
        let m = &*self.inner;
        check_sampling_limits(m)?;
        let q = detached(py, move || Ok::<_, rbd::RbdError>(rbd::random_configuration(m, &mut r)))?;
        Ok(convert::vector_out(py, &self.restrict(&q, true)))
    }

    /// `q ⊕ v` `(nq,)`: the configuration reached from `q` `(nq,)` by following the
    /// constant velocity `v` `(nv,)` for unit time.
    fn integrate<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let m = &*self.inner;
        let (q, v) = (self.lift_q(self.read_q(q, "q")?), self.lift_v(self.read_v(v, "v")?));
        let out = detached(py, move || rbd::integrate(m, &q, &v))?;
        Ok(convert::vector_out(py, &self.restrict(&out, true)))
    }

    /// `q1 ⊖ q0` `(nv,)`: the velocity `v` with `integrate(q0, v) == q1`.
    fn difference<'py>(&self, py: Python<'py>, q0: &Bound<'py, PyAny>, q1: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let m = &*self.inner;
        let (q0, q1) = (self.lift_q(self.read_q(q0, "q0")?), self.lift_q(self.read_q(q1, "q1")?));
        let out = detached(py, move || rbd::difference(m, &q0, &q1))?;
        Ok(convert::vector_out(py, &self.restrict(&out, false)))
    }

    /// This model with every spherical, planar and free-flyer joint replaced by a chain of
    /// 1-dof joints (Z-Y-X Euler angles), and the coordinate maps: `(model, SingleDofMap)`.
    fn to_single_dof(&self, py: Python<'_>) -> PyResult<(PyModel, crate::single_dof::PySingleDofMap)> {
        crate::single_dof::to_single_dof(py, self)
    }

    /// This model with the joints `joints` (names) locked at their coordinates in `q_ref`
    /// (nq,): Pinocchio's `buildReducedModel`. A locked joint's body is merged into its nearest
    /// unlocked ancestor (its inertia added there, its frames moved there; a locked joint's
    /// frame becomes a fixed-joint frame); the other joints keep their names, limits and
    /// order. Raises UnknownNameError for an unknown joint, InputError for a bad `q_ref`,
    /// ModelError when every joint is locked, a name is repeated or the model has mimic joints.
    fn lock_joints(&self, joints: Vec<String>, q_ref: &Bound<'_, PyAny>) -> PyResult<Self> {
        let m = &**self.without_mimics("lock_joints")?;
        let q = convert::read(q_ref, "q_ref", &[m.nq], Some("(nq,)"))?;
        let locked = joints.iter().map(|name| m.joint_index(name)).collect::<Result<Vec<usize>, _>>().map_err(crate::errors::py_err)?;
        rbd::lock_joints(m, &locked, &q).map(Self::new).map_err(crate::errors::py_err)
    }

    /// Index of the frame called `name` (raises UnknownNameError).
    fn frame_index(&self, name: &str) -> PyResult<usize> {
        self.inner.frame_index(name).map_err(crate::errors::py_err)
    }

    /// Index of the body moved by the joint called `name` (raises UnknownNameError).
    fn joint_index(&self, name: &str) -> PyResult<usize> {
        self.inner.joint_index(name).map_err(crate::errors::py_err)
    }

    /// The model as bytes: a versioned, checksummed state of its defining data (what pickling
    /// sends); `Model.from_bytes` rebuilds it.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.state())
    }

    /// The model of bytes made by `to_bytes` (raises StateError for anything else: truncated,
    /// corrupted, another kind of object, a newer format).
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data = crate::states::bytes_arg(data)?;
        let model = detached(py, move || rbd::Model::from_state(&data))?;
        Ok(Self::new(model))
    }

    /// A stable content hash of the model's defining data (hexadecimal SHA-256 of
    /// `to_bytes()`), the same in every process: equal for equal models.
    fn content_hash(&self) -> String {
        rbd::state::hex_digest(self.state())
    }

    /// Equal when the defining data are equal bit for bit (names, joints, tree, placements,
    /// inertias, limits, gravity, frames, gimbals).
    fn __eq__(&self, other: &Bound<'_, Self>) -> bool {
        let other = other.get();
        Arc::ptr_eq(&self.inner, &other.inner) || self.state() == other.state()
    }

    fn __hash__(&self) -> u64 {
        crate::states::digest_hash(self.state())
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        Ok((py.get_type::<Self>().getattr(intern!(py, "from_bytes"))?, (self.to_bytes(py),)))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let m = &self.inner;
        let name = pyo3::types::PyString::new(py, &m.name).repr()?;
        let mimics = if m.has_mimics() { format!(", mimic_joints={}", m.mimics.len()) } else { String::new() };
        Ok(format!("Model(name={name}, nq={}, nv={}, nbodies={}{mimics})", self.nq(), self.nv(), m.nbodies()))
    }
}
