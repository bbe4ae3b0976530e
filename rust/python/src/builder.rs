//! `ModelBuilder`: builds a model body by body from Python.

use crate::convert;
use crate::errors::{py_err, INPUT_ERROR, VIDYN_ERROR};
use crate::model::PyModel;
use nalgebra::{Matrix3, Vector3};
use pyo3::prelude::*;
use std::sync::{Mutex, PoisonError};
use vidyn_rbd as rbd;
use vidyn_rbd::{FrameKind, Joint};
use vidyn_spatial::{Inertia, Se3};

/// Builds a `Model` body by body; `build()` consumes it.
#[pyclass(frozen, module = "vidyn", name = "ModelBuilder")]
pub struct PyModelBuilder {
    /// `None` once built.
    inner: Mutex<Option<rbd::ModelBuilder>>,
}

fn consumed() -> PyErr {
    VIDYN_ERROR.err("this ModelBuilder has already been built; create a new one")
}

impl PyModelBuilder {
    /// Runs `f` on the builder. Arguments are converted before, never inside `f`: converting
    /// may run Python code (`__array__`, `__index__`), which could switch threads while the
    /// lock is held.
    fn with<T>(&self, f: impl FnOnce(&mut rbd::ModelBuilder) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        f(guard.as_mut().ok_or_else(consumed)?)
    }
}

/// `None` or -1: the world; otherwise a body index (checked by [`check_parent`]).
fn parent_arg(parent: Option<&Bound<'_, PyAny>>) -> PyResult<Option<usize>> {
    let Some(p) = parent.filter(|p| !p.is_none()) else {
        return Ok(None);
    };
    if p.extract::<i128>().is_ok_and(|i| i == -1) {
        return Ok(None);
    }
    convert::index(p, "parent").map(Some)
}

fn check_parent(parent: Option<usize>, len: usize) -> PyResult<()> {
    match parent {
        Some(i) if i >= len => Err(INPUT_ERROR.err(format!("parent {i} is not a body index: the builder has {len} bodies (use None for the world)"))),
        _ => Ok(()),
    }
}

fn placement_arg(x: Option<&Bound<'_, PyAny>>) -> PyResult<Se3> {
    match x {
        Some(x) if !x.is_none() => convert::placement(x, "placement"),
        _ => Ok(Se3::identity()),
    }
}

fn joint_arg(joint: &str, axis: Option<&Bound<'_, PyAny>>) -> PyResult<Joint> {
    let axis = axis.filter(|a| !a.is_none());
    let unit_axis = || -> PyResult<Vector3<f64>> {
        let Some(a) = axis else {
            return Err(INPUT_ERROR.err(format!("a {joint} joint needs an axis (3,)")));
        };
        let a = convert::vector3(a, "axis")?;
        let n = a.norm();
        if n <= 1e-12 {
            return Err(INPUT_ERROR.err(format!("axis has norm {n}, expected a non-zero vector")));
        }
        Ok(a / n)
    };
    match convert::JOINT.parse(joint)? {
        Joint::Revolute { .. } => Ok(Joint::Revolute { axis: unit_axis()? }),
        Joint::Prismatic { .. } => Ok(Joint::Prismatic { axis: unit_axis()? }),
        _ if axis.is_some() => Err(INPUT_ERROR.err(format!("a {joint} joint takes no axis (got one)"))),
        other => Ok(other),
    }
}

#[pymethods]
impl PyModelBuilder {
    #[new]
    #[pyo3(signature = (name = "model"))]
    fn new(name: &str) -> Self {
        Self { inner: Mutex::new(Some(rbd::ModelBuilder::new(name))) }
    }

    /// Adds a body moved by a joint of kind `joint` ("revolute", "prismatic", "spherical",
    /// "freeflyer", "planar"), attached to body `parent` (an index returned by `add_body`;
    /// None or -1 for the world). `placement` (4, 4) places the joint frame in the parent
    /// frame at the neutral configuration; `mass`, `com` (3,) and `inertia` (3, 3, about the
    /// centre of mass) are expressed in the body frame; `axis` (3,) is required by revolute
    /// and prismatic joints and normalised. Returns the index of the new body.
    ///
    /// Indices are the builder's: `build()` renumbers bodies depth-first (names are kept).
    #[pyo3(signature = (parent, name, joint, placement = None, mass = 0.0, com = None, inertia = None, axis = None))]
    #[allow(clippy::too_many_arguments)]
    fn add_body(
        &self,
        py: Python<'_>,
        parent: Option<&Bound<'_, PyAny>>,
        name: &str,
        joint: &str,
        placement: Option<&Bound<'_, PyAny>>,
        mass: f64,
        com: Option<&Bound<'_, PyAny>>,
        inertia: Option<&Bound<'_, PyAny>>,
        axis: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<usize> {
        let parent = parent_arg(parent)?;
        let joint = joint_arg(joint, axis)?;
        let placement = placement_arg(placement)?;
        if !mass.is_finite() {
            return Err(INPUT_ERROR.err(format!("mass is not finite ({})", convert::float_str(mass))));
        }
        let com = match com {
            Some(c) if !c.is_none() => convert::vector3(c, "com")?,
            _ => Vector3::zeros(),
        };
        let rot = match inertia {
            Some(i) if !i.is_none() => convert::matrix3(i, "inertia")?,
            _ => Matrix3::zeros(),
        };
        let (id, warnings) = self.with(|b| {
            check_parent(parent, b.len())?;
            let before = b.warnings().len();
            let id = b.add_body(parent, name, joint, placement, Inertia::new(mass, com, rot)).map_err(py_err)?;
            Ok((id, b.warnings()[before..].to_vec()))
        })?;
        crate::errors::warn_model(py, &warnings)?;
        Ok(id)
    }

    /// Adds a named operational frame on body `parent` (None or -1 for the world) at
    /// `placement` (4, 4) in that body's frame.
    #[pyo3(signature = (name, parent, placement = None))]
    fn add_frame(&self, name: &str, parent: Option<&Bound<'_, PyAny>>, placement: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let parent = parent_arg(parent)?;
        let placement = placement_arg(placement)?;
        self.with(|b| {
            check_parent(parent, b.len())?;
            b.add_frame(name, parent, placement, FrameKind::Operational).map_err(py_err)
        })
    }

    /// Sets gravity (3,) in the world frame, m/s² (default [0, 0, -9.81]).
    fn set_gravity(&self, g: &Bound<'_, PyAny>) -> PyResult<()> {
        let g = convert::vector3(g, "g")?;
        self.with(|b| {
            b.gravity(g);
            Ok(())
        })
    }

    /// Freezes the model. The builder cannot be used afterwards.
    fn build(&self, py: Python<'_>) -> PyResult<PyModel> {
        let taken = self.inner.lock().unwrap_or_else(PoisonError::into_inner).take();
        let b = taken.ok_or_else(consumed)?;
        crate::detached(py, move || b.build().map(PyModel::new))
    }

    fn __repr__(&self) -> String {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.as_ref() {
            Some(b) => format!("ModelBuilder(nbodies={})", b.len()),
            None => "ModelBuilder(<built>)".to_string(),
        }
    }
}

/// Largest model the built-in builders make from Python: the workspace grows as
/// `nbodies · nv`, and a failed allocation aborts the interpreter instead of raising.
const MAX_BUILTIN_BODIES: usize = 10_000;

fn body_count(n: i128, name: &str) -> PyResult<usize> {
    let n = convert::non_negative(n, name)?;
    if n > MAX_BUILTIN_BODIES {
        return Err(INPUT_ERROR.err(format!("{name} = {n} is too large (at most {MAX_BUILTIN_BODIES} bodies)")));
    }
    Ok(n)
}

/// A chain of `n` revolute joints carrying 1 m, 1 kg rods hanging along -z. With `planar`
/// every joint turns about y; otherwise the axes alternate y, x. Frames: `jointK`, `linkK`
/// and `tip` (end of the last rod).
#[pyfunction]
#[pyo3(signature = (n, planar = true))]
pub fn pendulum_chain(py: Python<'_>, n: i128, planar: bool) -> PyResult<PyModel> {
    let n = body_count(n, "n")?;
    crate::detached(py, move || Ok::<_, rbd::RbdError>(PyModel::new(rbd::builders::pendulum_chain(n, planar))))
}

/// A complete binary tree of `depth` levels (`2**depth - 1` revolute bodies).
#[pyfunction]
pub fn binary_tree(py: Python<'_>, depth: i128) -> PyResult<PyModel> {
    let depth = convert::non_negative(depth, "depth")?;
    let max_depth = (MAX_BUILTIN_BODIES + 1).ilog2() as usize;
    if depth > max_depth {
        return Err(INPUT_ERROR.err(format!("depth = {depth} is too large (at most {max_depth}: {MAX_BUILTIN_BODIES} bodies)")));
    }
    crate::detached(py, move || Ok::<_, rbd::RbdError>(PyModel::new(rbd::builders::binary_tree(depth))))
}

/// Cart-pole: prismatic `cart` along x (1 kg) and revolute `pole` about y (0.1 kg, 1 m rod,
/// hanging down at q = 0). Frames include `tip`.
#[pyfunction]
pub fn cartpole() -> PyModel {
    PyModel::new(rbd::builders::cartpole())
}

/// Acrobot: revolute `shoulder` and `elbow` about y, two 1 kg, 1 m rods hanging down at q = 0.
#[pyfunction]
pub fn acrobot() -> PyModel {
    PyModel::new(rbd::builders::acrobot())
}

/// A random tree of `n` bodies reproducible from `seed`, with every joint kind (revolute and
/// prismatic on random axes, spherical, free-flyer, planar), random placements and inertias.
#[pyfunction]
#[pyo3(signature = (n, seed = 0))]
pub fn random_tree(py: Python<'_>, n: i128, seed: i128) -> PyResult<PyModel> {
    let n = body_count(n, "n")?;
    let seed = u64::try_from(seed).map_err(|_| INPUT_ERROR.err(format!("seed must be in [0, 2**64), got {seed}")))?;
    crate::detached(py, move || {
        let m = rbd::builders::random_tree(n, seed, &Joint::examples());
        Ok::<_, rbd::RbdError>(PyModel::new(m))
    })
}
