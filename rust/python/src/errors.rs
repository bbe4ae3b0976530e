//! The exception classes of `vidyn` and the one mapping from core errors to them.
//!
//! ```text
//! Exception
//! └── VidynError
//!     ├── ModelError              invalid model, not positive definite
//!     │   └── UrdfError           URDF that cannot be turned into a model
//!     ├── InputError (ValueError) wrong shape, NaN/inf, non-unit quaternion, bad index,
//!     │                           singular coordinate change (gimbal lock)
//!     ├── UnknownNameError (KeyError)   unknown frame or joint name
//!     ├── StateError (ValueError) a pickle, saved state or file that cannot be read
//!     └── ConvergenceError        reserved for iterative solvers and integrators
//! ```
//!
//! `create_exception!` takes a single base class, and two of ours have two, so every class
//! is made the same way: by calling `type(name, bases, namespace)` once, on first use.

use pyo3::exceptions::{PyException, PyKeyError, PyKeyboardInterrupt, PyMemoryError, PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use std::convert::Infallible;
use vidyn_batch::BatchError;
use vidyn_maximal::MaximalError;
use vidyn_optim::OptimError;
use vidyn_rbd::RbdError;
use vidyn_vi::ViError;

/// Bases of an exception class, resolved when the class is first created.
type Bases = for<'py> fn(Python<'py>) -> PyResult<Vec<Bound<'py, PyType>>>;

/// One exception class of module `vidyn`, created on first use and cached.
pub struct ExceptionClass {
    name: &'static str,
    doc: &'static str,
    bases: Bases,
    cell: PyOnceLock<Py<PyType>>,
}

impl ExceptionClass {
    const fn new(name: &'static str, doc: &'static str, bases: Bases) -> Self {
        Self { name, doc, bases, cell: PyOnceLock::new() }
    }

    /// The Python class.
    pub fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyType>> {
        let ty = self.cell.get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let bases = PyTuple::new(py, (self.bases)(py)?)?;
            let ns = PyDict::new(py);
            ns.set_item("__module__", "vidyn")?;
            ns.set_item("__qualname__", self.name)?;
            ns.set_item("__doc__", self.doc)?;
            // KeyError.__str__ prints the repr of its argument (quotes around the whole
            // message); keep the plain message of every other exception.
            ns.set_item("__str__", py.get_type::<PyException>().getattr("__str__")?)?;
            let ty = py.get_type::<PyType>().call1((self.name, bases, ns))?;
            Ok(ty.cast_into::<PyType>()?.unbind())
        })?;
        Ok(ty.bind(py).clone())
    }

    /// A (lazily instantiated) exception of this class with message `msg`.
    pub fn err(&self, msg: impl Into<String>) -> PyErr {
        let msg = msg.into();
        Python::attach(|py| match self.get(py) {
            Ok(ty) => PyErr::from_type(ty, msg),
            Err(e) => e,
        })
    }
}

pub static VIDYN_ERROR: ExceptionClass =
    ExceptionClass::new("VidynError", "Base class of every error raised by vidyn.", |py| Ok(vec![py.get_type::<PyException>()]));

pub static MODEL_ERROR: ExceptionClass = ExceptionClass::new(
    "ModelError",
    "The model is invalid (bad tree, non-physical inertia, …) or singular for the requested \
     algorithm (joint-space inertia not positive definite).",
    |py| Ok(vec![VIDYN_ERROR.get(py)?]),
);

pub static URDF_ERROR: ExceptionClass =
    ExceptionClass::new("UrdfError", "A URDF document or file that cannot be turned into a model.", |py| Ok(vec![MODEL_ERROR.get(py)?]));

pub static INPUT_ERROR: ExceptionClass = ExceptionClass::new(
    "InputError",
    "An argument has the wrong shape, holds NaN or inf, is not a unit quaternion, or is out of \
     range. Also a ValueError.",
    |py| Ok(vec![VIDYN_ERROR.get(py)?, py.get_type::<PyValueError>()]),
);

pub static UNKNOWN_NAME_ERROR: ExceptionClass =
    ExceptionClass::new("UnknownNameError", "The model has no frame or joint of that name. Also a KeyError.", |py| {
        Ok(vec![VIDYN_ERROR.get(py)?, py.get_type::<PyKeyError>()])
    });

pub static STATE_ERROR: ExceptionClass = ExceptionClass::new(
    "StateError",
    "A saved state that cannot be read: bytes given to ``from_bytes``, a pickle or an ``.npz`` \
     trajectory that is truncated, corrupted, of another kind of object, of a newer format \
     version, or saved from another model than the one given. Also a ValueError.",
    |py| Ok(vec![VIDYN_ERROR.get(py)?, py.get_type::<PyValueError>()]),
);

pub static CONVERGENCE_ERROR: ExceptionClass =
    ExceptionClass::new("ConvergenceError", "An iterative solver or implicit integrator did not converge.", |py| Ok(vec![VIDYN_ERROR.get(py)?]));

/// The warning category of vidyn (a model accepted with something a user should know).
pub static MODEL_WARNING: ExceptionClass = ExceptionClass::new(
    "ModelWarning",
    "A model was built or loaded, but with something you should know: an inertia that no \
     rigid body can have (principal moments violating the triangle inequality), or a URDF \
     <mimic> joint read as an independent joint (mimic=False, the default of Model.from_urdf). \
     A UserWarning.",
    |py| Ok(vec![py.get_type::<pyo3::exceptions::PyUserWarning>()]),
);

/// Issues each of `warnings` as a `ModelWarning` (with `warnings.warn`, so the user's
/// filters apply; an error raised by a filter set to "error" propagates).
pub fn warn_model(py: Python<'_>, warnings: &[String]) -> PyResult<()> {
    let category = MODEL_WARNING.get(py)?;
    for w in warnings {
        PyErr::warn(py, &category, &std::ffi::CString::new(w.as_str()).unwrap_or_default(), 1)?;
    }
    Ok(())
}

/// Every class, in the order they are added to the module.
pub static ALL: [&ExceptionClass; 8] =
    [&VIDYN_ERROR, &MODEL_ERROR, &URDF_ERROR, &INPUT_ERROR, &UNKNOWN_NAME_ERROR, &STATE_ERROR, &CONVERGENCE_ERROR, &MODEL_WARNING];

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for class in ALL {
        m.add(class.name, class.get(m.py())?)?;
    }
    Ok(())
}

/// Every error a vidyn crate reports, on its way to Python: one enum with a `From` for each
/// crate's error (the orphan rule forbids `From<RbdError> for PyErr` in this crate), and one
/// conversion to the exception classes, `From<VidynErr> for PyErr` below.
#[derive(Debug)]
pub enum VidynErr {
    Rbd(RbdError),
    Vi(ViError),
    Maximal(MaximalError),
    Optim(OptimError),
    /// What the batch engine reports itself for a row or a call (never a system's error).
    Engine(BatchError<Infallible>),
}

impl From<RbdError> for VidynErr {
    fn from(e: RbdError) -> Self {
        Self::Rbd(e)
    }
}
impl From<ViError> for VidynErr {
    fn from(e: ViError) -> Self {
        Self::Vi(e)
    }
}
impl From<MaximalError> for VidynErr {
    fn from(e: MaximalError) -> Self {
        Self::Maximal(e)
    }
}
impl From<OptimError> for VidynErr {
    fn from(e: OptimError) -> Self {
        Self::Optim(e)
    }
}
impl From<Infallible> for VidynErr {
    fn from(e: Infallible) -> Self {
        match e {}
    }
}
impl<E: Into<VidynErr>> From<BatchError<E>> for VidynErr {
    fn from(e: BatchError<E>) -> Self {
        match e.split() {
            Ok(system) => system.into(),
            Err(engine) => Self::Engine(engine),
        }
    }
}

/// The exception of any core error: `py_err(e)` for `e` of any vidyn crate.
pub fn py_err(e: impl Into<VidynErr>) -> PyErr {
    e.into().into()
}

/// The one mapping from core errors to exception classes. Each arm of the model errors is
/// exercised by `tests/test_errors.py` (through [`raise_core_error`] and through real
/// calls). The core enums are non-exhaustive: a variant added later lands on the base class
/// until it gets its own arm (and its own test).
impl From<VidynErr> for PyErr {
    #[allow(unreachable_patterns)]
    fn from(e: VidynErr) -> Self {
        match e {
            VidynErr::Rbd(e) => match e {
                RbdError::Dimension { arg, got, expected, field } => INPUT_ERROR.err(format!("{arg} has shape ({got},), expected ({field},) = ({expected},)")),
                RbdError::NonFinite { .. } | RbdError::NotNormalized { .. } | RbdError::IndexOutOfRange { .. } | RbdError::Singular { .. } => {
                    INPUT_ERROR.err(e.to_string())
                }
                RbdError::UnknownName { .. } => UNKNOWN_NAME_ERROR.err(e.to_string()),
                RbdError::InvalidModel(_) | RbdError::NotPositiveDefinite { .. } => MODEL_ERROR.err(e.to_string()),
                RbdError::Urdf(_) => URDF_ERROR.err(e.to_string()),
                RbdError::State(_) => STATE_ERROR.err(e.to_string()),
                _ => VIDYN_ERROR.err(e.to_string()),
            },
            VidynErr::Vi(e) => match e {
                ViError::Model(inner) => py_err(inner),
                ViError::GimbalLock { .. } => MODEL_ERROR.err(e.to_string()),
                ViError::NotOnLieGroup { .. } | ViError::NoSecondOrder { .. } => PyNotImplementedError::new_err(e.to_string()),
                ViError::InvalidScheme(_) | ViError::InvalidParameter(_) | ViError::PastSchedule { .. } => INPUT_ERROR.err(e.to_string()),
                ViError::NewtonDiverged { .. }
                | ViError::SingularJacobian { .. }
                | ViError::DegenerateConstraints { .. }
                | ViError::Misaligned { .. }
                | ViError::NotGenuine { .. }
                | ViError::StepTooLarge { .. }
                | ViError::NonFiniteState { .. } => CONVERGENCE_ERROR.err(e.to_string()),
                _ => VIDYN_ERROR.err(e.to_string()),
            },
            VidynErr::Maximal(e) => match e {
                MaximalError::Model(inner) => py_err(inner),
                MaximalError::InvalidMechanism(_) | MaximalError::SingularPivot { .. } => MODEL_ERROR.err(e.to_string()),
                MaximalError::InvalidParameter(_) => INPUT_ERROR.err(e.to_string()),
                MaximalError::AngularVelocityTooLarge { .. } | MaximalError::NewtonDiverged { .. } => CONVERGENCE_ERROR.err(e.to_string()),
                MaximalError::TooLarge { .. } => PyMemoryError::new_err(e.to_string()),
                MaximalError::Cancelled { .. } => PyKeyboardInterrupt::new_err(e.to_string()),
                _ => VIDYN_ERROR.err(e.to_string()),
            },
            VidynErr::Optim(e) => match e {
                OptimError::Dynamics(inner) => py_err(inner),
                OptimError::InvalidInput(_) | OptimError::NotPositiveDefinite(_) => INPUT_ERROR.err(e.to_string()),
                OptimError::NotConverged(_) => CONVERGENCE_ERROR.err(e.to_string()),
                OptimError::NotImplemented(_) => PyNotImplementedError::new_err(e.to_string()),
                OptimError::Cancelled => PyKeyboardInterrupt::new_err(e.to_string()),
                _ => VIDYN_ERROR.err(e.to_string()),
            },
            VidynErr::Engine(e) => match e {
                BatchError::Shape(_) | BatchError::NonFinite { .. } => INPUT_ERROR.err(e.to_string()),
                BatchError::Cancelled => PyKeyboardInterrupt::new_err("batch cancelled"),
                _ => VIDYN_ERROR.err(e.to_string()),
            },
        }
    }
}

/// Raises the exception that the core error variant `variant` maps to, built from sample
/// data. For the tests of the mapping only: most variants cannot be reached through the
/// public API because vidyn-py validates inputs before calling the core.
#[pyfunction]
#[pyo3(name = "_raise_core_error")]
pub fn raise_core_error(variant: &str) -> PyResult<()> {
    let e = match variant {
        "Dimension" => RbdError::Dimension { arg: "q", got: 6, expected: 7, field: "model.nq" },
        "NonFinite" => RbdError::NonFinite { arg: "v", index: 2, value: f64::NAN },
        "NotNormalized" => RbdError::NotNormalized { joint: "root".into(), index: 3, norm: 2.0, tol: 1e-6 },
        "UnknownName" => RbdError::UnknownName { what: "frame", name: "nowhere".into() },
        "IndexOutOfRange" => RbdError::IndexOutOfRange { what: "frame", index: 9, len: 3 },
        "InvalidModel" => RbdError::InvalidModel("sample".into()),
        "Urdf" => RbdError::Urdf("sample".into()),
        "NotPositiveDefinite" => RbdError::NotPositiveDefinite { joint: "j1".into() },
        "Singular" => RbdError::Singular { joint: "ball".into(), detail: "gimbal lock".into() },
        "State" => RbdError::State("sample".into()),
        other => return Err(INPUT_ERROR.err(format!("unknown RbdError variant '{other}'"))),
    };
    Err(py_err(e))
}
