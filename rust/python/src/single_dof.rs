//! The Python `SingleDofMap` and `Model.to_single_dof`: conversion only, the maths is
//! `vidyn_rbd::single_dof`.

use crate::convert;
use crate::detached;
use crate::model::PyModel;
use numpy::{PyArray1, PyArray2};
use pyo3::prelude::*;
use vidyn_rbd::SingleDofMap;

/// Coordinate maps between a model (q of shape (nq,), v of shape (nv,), Pinocchio's layouts)
/// and its single-dof expansion (theta, theta_dot of shape (n,)); from `Model.to_single_dof`.
#[pyclass(frozen, module = "vidyn", name = "SingleDofMap")]
pub struct PySingleDofMap {
    inner: SingleDofMap,
}

impl PySingleDofMap {
    fn original_q(&self, x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
        convert::read(x, name, &[self.inner.nq], Some("(nq,)"))
    }
    fn original_v(&self, x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
        convert::read(x, name, &[self.inner.nv], Some("(nv,)"))
    }
    fn expanded(&self, x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<f64>> {
        convert::read(x, name, &[self.inner.n], Some("(n,)"))
    }
}

#[pymethods]
impl PySingleDofMap {
    /// nq of the original model.
    #[getter]
    fn nq(&self) -> usize {
        self.inner.nq
    }
    /// nv of the original model.
    #[getter]
    fn nv(&self) -> usize {
        self.inner.nv
    }
    /// nq = nv of the expanded model.
    #[getter]
    fn n(&self) -> usize {
        self.inner.n
    }
    /// (nbodies,) body of the expanded model that carries each original body.
    #[getter]
    fn bodies(&self) -> Vec<usize> {
        self.inner.bodies.clone()
    }

    /// Expanded coordinates theta (n,) of a configuration q (nq,).
    fn q_to_single_dof<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let q = self.original_q(q, "q")?;
        let m = &self.inner;
        let out = detached(py, move || m.q_to_single_dof(&q))?;
        Ok(convert::vector_out(py, &out))
    }

    /// The configuration q (nq,) of expanded coordinates theta (n,).
    fn q_from_single_dof<'py>(&self, py: Python<'py>, theta: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let t = self.expanded(theta, "theta")?;
        let m = &self.inner;
        let out = detached(py, move || m.q_from_single_dof(&t))?;
        Ok(convert::vector_out(py, &out))
    }

    /// Expanded rates theta_dot (n,) of a velocity v (nv,) at configuration q (nq,).
    fn v_to_single_dof<'py>(&self, py: Python<'py>, q: &Bound<'py, PyAny>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (q, v) = (self.original_q(q, "q")?, self.original_v(v, "v")?);
        let m = &self.inner;
        let out = detached(py, move || m.v_to_single_dof(&q, &v))?;
        Ok(convert::vector_out(py, &out))
    }

    /// The velocity v = J(theta) theta_dot (nv,) of expanded rates theta_dot (n,) at theta (n,).
    fn v_from_single_dof<'py>(&self, py: Python<'py>, theta: &Bound<'py, PyAny>, theta_dot: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let (t, td) = (self.expanded(theta, "theta")?, self.expanded(theta_dot, "theta_dot")?);
        let m = &self.inner;
        let out = detached(py, move || m.v_from_single_dof(&t, &td))?;
        Ok(convert::vector_out(py, &out))
    }

    /// The velocity map J(theta) (nv, n): v = J theta_dot.
    fn velocity_map<'py>(&self, py: Python<'py>, theta: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let t = self.expanded(theta, "theta")?;
        let m = &self.inner;
        let j = detached(py, move || m.velocity_map(&t))?;
        Ok(convert::matrix_out(py, &j))
    }

    fn __repr__(&self) -> String {
        format!("SingleDofMap(nq={}, nv={}, n={})", self.inner.nq, self.inner.nv, self.inner.n)
    }
}

/// `Model.to_single_dof()`: the expanded model and its coordinate maps.
pub fn to_single_dof(py: Python<'_>, model: &PyModel) -> PyResult<(PyModel, PySingleDofMap)> {
    let m = &*model.inner;
    let (expanded, map) = detached(py, move || m.to_single_dof())?;
    Ok((PyModel::new(expanded), PySingleDofMap { inner: map }))
}
