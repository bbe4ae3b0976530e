//! The Python constraint descriptions `PointOnPlane`, `Distance` and `Perpendicular`: points
//! and axes given in named
//! frames of the model (`None` or `"world"` for the world frame), resolved to body points of
//! `vidyn_vi::Constraint` when the integrator is built.

use crate::convert;
use crate::errors::{INPUT_ERROR, UNKNOWN_NAME_ERROR};
use nalgebra::Vector3;
use pyo3::prelude::*;
use vidyn_rbd::Model;
use vidyn_vi::{AlignedAxes, BodyPoint, Constraint};

/// `n·(p_b − p_a) = 0`: the point `point_b` of `frame_b` stays on the plane through `point_a`
/// of `frame_a` with normal `normal` (in `frame_a`). Points and normal in their frame's
/// coordinates; a frame of `None` or `"world"` is the world.
#[pyclass(frozen, module = "vidyn", name = "PointOnPlane")]
pub struct PyPointOnPlane {
    a: (Option<String>, Vector3<f64>),
    normal: Vector3<f64>,
    b: (Option<String>, Vector3<f64>),
}

/// `|p_b − p_a|² − length² = 0` between `point_a` of `frame_a` and `point_b` of `frame_b`
/// (`length > 0`).
#[pyclass(frozen, module = "vidyn", name = "Distance")]
pub struct PyDistance {
    a: (Option<String>, Vector3<f64>),
    b: (Option<String>, Vector3<f64>),
    length: f64,
}

/// `(R_a u)·(R_b w) = 0`: the axis `axis_a` of `frame_a` stays perpendicular to the axis
/// `axis_b` of `frame_b` (each in its frame's coordinates, non-zero). Three on the axis pairs
/// `(x, y)`, `(y, z)`, `(z, x)` of two frames hold their relative orientation. `aligned`: an
/// axis of `frame_a` and one of `frame_b` that must stay within 60° of each other where the
/// constraint holds (`vidyn_vi::AlignedAxes`: a step that lands on a mirror image raises).
#[pyclass(frozen, module = "vidyn", name = "Perpendicular")]
pub struct PyPerpendicular {
    a: (Option<String>, Vector3<f64>),
    b: (Option<String>, Vector3<f64>),
    aligned: Option<(Vector3<f64>, Vector3<f64>)>,
}

#[pymethods]
impl PyPerpendicular {
    #[new]
    #[pyo3(signature = (frame_a, axis_a, frame_b, axis_b, aligned=None))]
    fn new(
        frame_a: Option<String>,
        axis_a: &Bound<'_, PyAny>,
        frame_b: Option<String>,
        axis_b: &Bound<'_, PyAny>,
        aligned: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)>,
    ) -> PyResult<Self> {
        let aligned = match aligned {
            Some((u, w)) => Some((axis(&u, "aligned[0]")?, axis(&w, "aligned[1]")?)),
            None => None,
        };
        Ok(Self { a: (frame_name(frame_a), axis(axis_a, "axis_a")?), b: (frame_name(frame_b), axis(axis_b, "axis_b")?), aligned })
    }
    fn __repr__(&self) -> String {
        let aligned = self.aligned.as_ref().map_or(String::new(), |(u, w)| format!(", aligned=({:?}, {:?})", u.as_slice(), w.as_slice()));
        format!("Perpendicular({:?}, {:?}, {:?}, {:?}{aligned})", self.a.0, self.a.1.as_slice(), self.b.0, self.b.1.as_slice())
    }
}

/// A direction: a finite, non-zero 3-vector, or InputError naming `name`.
fn axis(x: &Bound<'_, PyAny>, name: &str) -> PyResult<Vector3<f64>> {
    let v = convert::vector3(x, name)?;
    if v.norm() > 0.0 {
        Ok(v)
    } else {
        Err(INPUT_ERROR.err(format!("{name} is [0, 0, 0], expected a non-zero direction")))
    }
}

fn frame_name(f: Option<String>) -> Option<String> {
    f.filter(|s| s != "world")
}

#[pymethods]
impl PyPointOnPlane {
    #[new]
    #[pyo3(signature = (frame_a, point_a, normal, frame_b, point_b))]
    fn new(
        frame_a: Option<String>,
        point_a: &Bound<'_, PyAny>,
        normal: &Bound<'_, PyAny>,
        frame_b: Option<String>,
        point_b: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(Self {
            a: (frame_name(frame_a), convert::vector3(point_a, "point_a")?),
            normal: convert::vector3(normal, "normal")?,
            b: (frame_name(frame_b), convert::vector3(point_b, "point_b")?),
        })
    }
    fn __repr__(&self) -> String {
        format!("PointOnPlane({:?}, {:?}, normal={:?}, {:?}, {:?})", self.a.0, self.a.1.as_slice(), self.normal.as_slice(), self.b.0, self.b.1.as_slice())
    }
}

#[pymethods]
impl PyDistance {
    #[new]
    #[pyo3(signature = (frame_a, point_a, frame_b, point_b, length))]
    fn new(frame_a: Option<String>, point_a: &Bound<'_, PyAny>, frame_b: Option<String>, point_b: &Bound<'_, PyAny>, length: f64) -> PyResult<Self> {
        Ok(Self { a: (frame_name(frame_a), convert::vector3(point_a, "point_a")?), b: (frame_name(frame_b), convert::vector3(point_b, "point_b")?), length })
    }
    fn __repr__(&self) -> String {
        format!("Distance({:?}, {:?}, {:?}, {:?}, length={})", self.a.0, self.a.1.as_slice(), self.b.0, self.b.1.as_slice(), self.length)
    }
}

/// The body point of `point` given in frame `frame`, and the frame's rotation into the body.
fn body_point(model: &Model, frame: &Option<String>, point: &Vector3<f64>) -> PyResult<(BodyPoint, nalgebra::Matrix3<f64>)> {
    match frame {
        None => Ok((BodyPoint { body: None, point: *point }, nalgebra::Matrix3::identity())),
        Some(name) => {
            let k = model.frame_index(name).map_err(|_| UNKNOWN_NAME_ERROR.err(format!("the model has no frame named '{name}' (constraint point)")))?;
            let f = &model.frames[k];
            Ok((BodyPoint { body: f.parent, point: f.placement.act_point(point) }, f.placement.rotation))
        }
    }
}

/// Resolves a Python list of `PointOnPlane` / `Distance` / `Perpendicular` against `model`.
pub fn resolve(model: &Model, items: &[Bound<'_, PyAny>]) -> PyResult<Vec<Constraint>> {
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            if let Ok(c) = item.cast::<PyPointOnPlane>() {
                let c = c.get();
                let (a, rot) = body_point(model, &c.a.0, &c.a.1)?;
                let (b, _) = body_point(model, &c.b.0, &c.b.1)?;
                Ok(Constraint::PointOnPlane { a, normal: rot * c.normal, b })
            } else if let Ok(c) = item.cast::<PyDistance>() {
                let c = c.get();
                let (a, _) = body_point(model, &c.a.0, &c.a.1)?;
                let (b, _) = body_point(model, &c.b.0, &c.b.1)?;
                Ok(Constraint::Distance { a, b, length: c.length })
            } else if let Ok(c) = item.cast::<PyPerpendicular>() {
                // axes: the frames' rotations into their bodies
                let c = c.get();
                let (a, rot_a) = body_point(model, &c.a.0, &Vector3::zeros())?;
                let (b, rot_b) = body_point(model, &c.b.0, &Vector3::zeros())?;
                let aligned = c.aligned.as_ref().map(|(u, w)| AlignedAxes { a: rot_a * u, b: rot_b * w });
                Ok(Constraint::Perpendicular { a: BodyPoint { point: rot_a * c.a.1, ..a }, b: BodyPoint { point: rot_b * c.b.1, ..b }, aligned })
            } else {
                Err(INPUT_ERROR
                    .err(format!("constraints[{i}] is {}, expected vidyn.PointOnPlane, vidyn.Distance or vidyn.Perpendicular", item.get_type().name()?)))
            }
        })
        .collect()
}
