//! `vidyn._core`: the Python bindings of vidyn. Conversion and error mapping only; every
//! computation is a call into `vidyn_rbd`, made with the interpreter detached.
//!
//! Users import `vidyn`, which re-exports everything here (see `python/vidyn/__init__.py`);
//! the typed interface with docstrings is `python/vidyn/_core.pyi`.

mod algorithms;
mod batch;
mod builder;
mod constraints;
mod convert;
mod errors;
mod maximal;
mod model;
mod optim;
mod single_dof;
mod spatial;
mod states;
mod vi;

use pyo3::prelude::*;
use std::convert::Infallible;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use vidyn_batch::Control;

/// Runs `f` detached from the interpreter (other Python threads run meanwhile) and maps its
/// error to the right exception. Every computation goes through here.
///
/// Inputs are validated before the call, so `f` should not panic; if it does anyway (a bug),
/// the panic is caught here and raised as `VidynError` instead of `PanicException`, which
/// ordinary `except Exception` handlers would not catch.
pub(crate) fn detached<T, E, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Send + FnOnce() -> Result<T, E>,
    T: Send,
    E: Into<errors::VidynErr> + Send,
{
    match py.detach(move || catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(errors::py_err(e)),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(ToString::to_string)
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(errors::VIDYN_ERROR.err(format!("internal error in vidyn (please report): {msg}")))
        }
    }
}

/// How often a long call re-attaches to the interpreter to check for Ctrl-C (and to report
/// progress).
const POLL: Duration = Duration::from_millis(50);

/// Runs `job` detached from the interpreter like [`detached`], for every call whose length
/// the user controls (batches, rollouts, linearisations, optimisers): the job hands the
/// [`Control`] to the core loop, which records its progress there; as it does, the calling
/// thread re-attaches at most every [`POLL`] to check signals (Ctrl-C cancels the job, which
/// stops at its next step or row, and raises `KeyboardInterrupt`) and to call
/// `progress(done, total)` (an exception from the callback cancels the job too).
pub(crate) fn interruptible<'py, R: Send>(
    py: Python<'py>,
    progress: Option<&Bound<'py, PyAny>>,
    total: usize,
    job: impl FnOnce(&Control<'_>) -> R + Send,
) -> PyResult<R> {
    let progress: Option<Py<PyAny>> = progress.filter(|p| !p.is_none()).map(|p| p.clone().unbind());
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let control = Control::with_poll(POLL, |c| {
        let mut raised = raised.lock().unwrap_or_else(PoisonError::into_inner);
        if raised.is_some() {
            return; // cancelled already: let the work in flight finish
        }
        Python::attach(|py| {
            let step = py.check_signals().and_then(|()| progress.as_ref().map_or(Ok(()), |cb| cb.bind(py).call1((c.done(), total)).map(drop)));
            if let Err(e) = step {
                c.cancel();
                *raised = Some(e);
            }
        });
    });
    let result = detached(py, || Ok::<_, Infallible>(job(&control)));
    if let Some(e) = raised.lock().unwrap_or_else(PoisonError::into_inner).take() {
        return Err(e);
    }
    let result = result?;
    if let Some(cb) = &progress {
        cb.bind(py).call1((control.done(), total))?;
    }
    Ok(result)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<model::PyModel>()?;
    m.add_class::<builder::PyModelBuilder>()?;
    m.add_class::<algorithms::Kinematics>()?;
    m.add_class::<vi::PyVariationalIntegrator>()?;
    m.add_class::<vi::PyTrajectory>()?;
    m.add_class::<constraints::PyPointOnPlane>()?;
    m.add_class::<constraints::PyDistance>()?;
    m.add_class::<constraints::PyPerpendicular>()?;
    m.add_class::<single_dof::PySingleDofMap>()?;
    m.add_class::<maximal::PyMaximalIntegrator>()?;
    m.add_class::<maximal::PyMaximalTrajectory>()?;
    m.add_function(wrap_pyfunction!(algorithms::rnea, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::aba, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::rnea_derivatives, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::aba_derivatives, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::rnea_second_order, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::rnea_second_order_contracted, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::aba_second_order, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::aba_second_order_contracted, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::crba, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::minverse, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::gravity, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::nonlinear_effects, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::kinetic_energy, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::potential_energy, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::center_of_mass, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::center_of_mass_velocity, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::com_jacobian, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::centroidal_momentum, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::centroidal_momentum_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::centroidal_momentum_matrix_time_variation, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::forward_kinematics, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::frame_placement, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::frame_placements, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::jacobian, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::frame_velocity, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::frame_velocity_derivatives, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::jacobian_time_variation, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::frame_acceleration, m)?)?;
    m.add_function(wrap_pyfunction!(builder::pendulum_chain, m)?)?;
    m.add_function(wrap_pyfunction!(builder::binary_tree, m)?)?;
    m.add_function(wrap_pyfunction!(builder::cartpole, m)?)?;
    m.add_function(wrap_pyfunction!(builder::acrobot, m)?)?;
    m.add_function(wrap_pyfunction!(builder::random_tree, m)?)?;
    m.add_function(wrap_pyfunction!(errors::raise_core_error, m)?)?;
    m.add_function(wrap_pyfunction!(batch::set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(batch::get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_rnea, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_aba, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_crba, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_center_of_mass, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_com_jacobian, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_centroidal_momentum, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_centroidal_momentum_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_centroidal_momentum_matrix_time_variation, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_minverse, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_rnea_derivatives, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_aba_derivatives, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_rnea_second_order, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_rnea_second_order_contracted, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_rollout, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_linearize, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch_linearize_contracted, m)?)?;
    m.add_function(wrap_pyfunction!(optim::optim_lqr, m)?)?;
    m.add_function(wrap_pyfunction!(optim::optim_dlqr, m)?)?;
    m.add_function(wrap_pyfunction!(optim::optim_closed_loop, m)?)?;
    m.add_class::<optim::PyProblem>()?;
    m.add_class::<optim::IlqrOutput>()?;
    m.add_class::<optim::IlqrLog>()?;
    m.add_class::<optim::ProjectionOutput>()?;
    m.add_class::<optim::ProjectionLog>()?;
    m.add_function(wrap_pyfunction!(optim::optim_ilqr, m)?)?;
    m.add_function(wrap_pyfunction!(optim::optim_ilqr_linear, m)?)?;
    m.add_function(wrap_pyfunction!(optim::optim_ilqr_maximal, m)?)?;
    m.add_function(wrap_pyfunction!(optim::optim_projection, m)?)?;
    m.add_function(wrap_pyfunction!(optim::optim_project, m)?)?;
    spatial::register(m)?;
    // `__all__`: the public names, which `_core.pyi` declares too (stubtest compares them).
    let mut public: Vec<String> = m.dict().keys().iter().map(|k| k.to_string()).filter(|k| !k.starts_with('_')).collect();
    public.sort();
    m.add("__all__", public)?;
    Ok(())
}
