//! The states of the Python objects (`vidyn_rbd::state`'s format: versioned, checksummed):
//! what `to_bytes`, `from_bytes`, pickling and equality read and write.
//!
//! | kind | version | payload |
//! |---|---|---|
//! | `Model` | 1 | `vidyn_rbd::state` |
//! | `VariationalIntegrator` | 1 | model state, dt, scheme name and `s`, joint forces, Newton settings, constraints (on the model's bodies), schedule, kinematic joints, body wrenches, energy-error bound |
//! | `Trajectory` | 1 | integrator state, `n`, `nq`, `N`, `q`, `p`, `u`, iterations |
//! | `MaximalIntegrator` | 1 | model state, dt, joint forces, Newton settings, the additions (loop closures, contacts, limits) in order |
//! | `MaximalTrajectory` | 1 | integrator state, sizes, body states, `q`, `u`, iterations, energy, constraint violation |
//!
//! Nested states (the model in an integrator, the integrator in a trajectory) keep their own
//! header and checksum, so each part is versioned on its own.

use crate::errors::STATE_ERROR;
use crate::maximal::{Addition, MaximalSpec};
use crate::vi::{PyTrajectory, ViSpec};
use nalgebra::{Quaternion, UnitQuaternion, Vector3};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use std::sync::Arc;
use vidyn_maximal::{BodyState, FrictionModel, JointKind, MaximalTrajectory, Pose, Shape};
use vidyn_rbd::state::{StateReader, StateWriter};
use vidyn_rbd::{Model, RbdError};
use vidyn_spatial::{Force, Se3};
use vidyn_vi::{AlignedAxes, BodyPoint, Constraint, JointForces, Trajectory, VariationalIntegrator};

type Result<T> = std::result::Result<T, RbdError>;

const VI_KIND: &str = "VariationalIntegrator";
const VI_VERSION: u16 = 1;
const TRAJECTORY_KIND: &str = "Trajectory";
const TRAJECTORY_VERSION: u16 = 1;
const MAXIMAL_KIND: &str = "MaximalIntegrator";
const MAXIMAL_VERSION: u16 = 1;
const MAXIMAL_TRAJECTORY_KIND: &str = "MaximalTrajectory";
const MAXIMAL_TRAJECTORY_VERSION: u16 = 1;

/// The bytes of a `from_bytes` argument: `bytes`, `bytearray` or anything with the buffer
/// protocol of bytes (`memoryview`, a `uint8` array).
pub fn bytes_arg(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    let py = data.py();
    match py.get_type::<PyBytes>().call1((data,)) {
        Ok(b) if !data.is_instance_of::<pyo3::types::PyString>() && !data.is_instance_of::<pyo3::types::PyInt>() => {
            Ok(b.cast::<PyBytes>()?.as_bytes().to_vec())
        }
        _ => Err(PyTypeError::new_err(format!("data must be bytes (from to_bytes or a pickle), got {}", crate::convert::type_name(data)))),
    }
}

/// A Python `hash()` of a state: the first 8 bytes of its digest.
pub fn digest_hash(state: &[u8]) -> u64 {
    let digest = &state[state.len().saturating_sub(32)..];
    digest.iter().take(8).fold(0u64, |h, &b| (h << 8) | u64::from(b))
}

/// A model nested in another state.
fn read_model(r: &mut StateReader<'_>) -> Result<Arc<Model>> {
    let bytes = r.bytes("model state")?;
    Model::from_state(bytes).map(Arc::new).map_err(|e| r.malformed(format!("its model: {e}")))
}

fn write_point(w: &mut StateWriter, p: &BodyPoint) {
    w.opt_usize(p.body);
    w.vector3(&p.point);
}

fn read_point(r: &mut StateReader<'_>) -> Result<BodyPoint> {
    Ok(BodyPoint { body: r.opt_usize("constraint body")?, point: r.vector3("constraint point")? })
}

fn write_constraint(w: &mut StateWriter, c: &Constraint) {
    match c {
        Constraint::PointOnPlane { a, normal, b } => {
            w.u8(0);
            write_point(w, a);
            w.vector3(normal);
            write_point(w, b);
        }
        Constraint::Distance { a, b, length } => {
            w.u8(1);
            write_point(w, a);
            write_point(w, b);
            w.f64(*length);
        }
        Constraint::Perpendicular { a, b, aligned: None } => {
            w.u8(2);
            write_point(w, a);
            write_point(w, b);
        }
        Constraint::Perpendicular { a, b, aligned: Some(axes) } => {
            w.u8(3);
            write_point(w, a);
            write_point(w, b);
            w.vector3(&axes.a);
            w.vector3(&axes.b);
        }
    }
}

fn read_constraint(r: &mut StateReader<'_>) -> Result<Constraint> {
    Ok(match r.u8("constraint kind")? {
        0 => Constraint::PointOnPlane { a: read_point(r)?, normal: r.vector3("constraint normal")?, b: read_point(r)? },
        1 => Constraint::Distance { a: read_point(r)?, b: read_point(r)?, length: r.f64("constraint length")? },
        2 => Constraint::Perpendicular { a: read_point(r)?, b: read_point(r)?, aligned: None },
        3 => Constraint::Perpendicular {
            a: read_point(r)?,
            b: read_point(r)?,
            aligned: Some(AlignedAxes { a: r.vector3("aligned axis")?, b: r.vector3("aligned axis")? }),
        },
        t => return Err(r.malformed(format!("constraint kind tag {t} is not one of 0..=3"))),
    })
}

/// The state of a `VariationalIntegrator`.
pub fn vi_state(spec: &ViSpec) -> Vec<u8> {
    let mut w = StateWriter::new(VI_KIND, VI_VERSION);
    // destructured so that a field added to the spec fails to compile here until written
    let ViSpec { model, dt, scheme, s, forces, tolerance, max_iterations, constraints, schedule, kinematic, wrenches, max_energy_error } = spec;
    w.bytes(&model.to_state());
    w.f64(*dt);
    w.str(scheme);
    w.opt(*s, StateWriter::usize);
    let JointForces { damping, stiffness, rest } = forces;
    for v in [damping, stiffness, rest] {
        w.f64s(v);
    }
    w.f64(*tolerance);
    w.usize(*max_iterations);
    w.usize(constraints.len());
    constraints.iter().for_each(|c| write_constraint(&mut w, c));
    w.opt(schedule.as_deref(), StateWriter::bools);
    w.usizes(kinematic);
    w.usize(wrenches.len());
    for f in wrenches {
        w.vector3(&f.linear);
        w.vector3(&f.angular);
    }
    w.f64(*max_energy_error);
    w.finish()
}

/// The spec of a `VariationalIntegrator`'s state (built and validated by the caller).
pub fn vi_from_state(data: &[u8]) -> Result<ViSpec> {
    let mut r = StateReader::new(data, VI_KIND, VI_VERSION)?;
    let model = read_model(&mut r)?;
    let dt = r.f64("dt")?;
    let scheme = r.string("scheme")?;
    let s = r.opt("s", |r| r.usize("s"))?;
    let forces = JointForces { damping: r.f64s("damping")?, stiffness: r.f64s("stiffness")?, rest: r.f64s("rest")? };
    let tolerance = r.f64("tolerance")?;
    let max_iterations = r.usize("max_iterations")?;
    let count = r.len("constraint count", 1 + 2 * (1 + 24))?;
    let constraints = (0..count).map(|_| read_constraint(&mut r)).collect::<Result<Vec<_>>>()?;
    let schedule = r.opt("schedule", |r| r.bools("schedule"))?;
    let kinematic = r.usizes("kinematic joints")?;
    let count = r.len("body wrench count", 48)?;
    let wrenches = (0..count).map(|_| Ok(Force::new(r.vector3("body wrench")?, r.vector3("body wrench")?))).collect::<Result<Vec<_>>>()?;
    let max_energy_error = r.f64("max_energy_error")?;
    r.finish()?;
    // the reduced nv with mimic joints
    let n = if model.has_mimics() { model.coupling().nv() } else { model.nv };
    for (what, v) in [("damping", &forces.damping), ("stiffness", &forces.stiffness), ("rest", &forces.rest)] {
        if v.len() != n {
            return Err(RbdError::State(format!("malformed {VI_KIND} state: {what} has {} entries for a model with nv = {n}", v.len())));
        }
    }
    Ok(ViSpec { model, dt, scheme, s, forces, tolerance, max_iterations, constraints, schedule, kinematic, wrenches, max_energy_error })
}

/// The state of a `Trajectory`: its integrator's, then its arrays.
pub fn trajectory_state(t: &PyTrajectory) -> Vec<u8> {
    let mut w = StateWriter::new(TRAJECTORY_KIND, TRAJECTORY_VERSION);
    w.bytes(&vi_state(&t.spec));
    let Trajectory { n, nq, steps, q, p, u, iterations } = &t.inner;
    for x in [n, nq, steps] {
        w.usize(*x);
    }
    for v in [q, p, u] {
        w.f64s(v);
    }
    w.usizes(iterations);
    w.finish()
}

/// The integrator spec and the arrays of a `Trajectory`'s state (sizes checked against each
/// other; against the integrator by [`check_trajectory`]).
pub fn trajectory_from_state(data: &[u8]) -> Result<(ViSpec, Trajectory)> {
    let mut r = StateReader::new(data, TRAJECTORY_KIND, TRAJECTORY_VERSION)?;
    let vi = r.bytes("integrator state")?;
    let spec = vi_from_state(vi).map_err(|e| r.malformed(format!("its integrator: {e}")))?;
    let (n, nq, steps) = (r.usize("n")?, r.usize("nq")?, r.usize("steps")?);
    let (q, p, u) = (r.f64s("q")?, r.f64s("p")?, r.f64s("u")?);
    let iterations = r.usizes("iterations")?;
    r.finish()?;
    let knots = steps.checked_add(1).ok_or_else(|| RbdError::State("malformed Trajectory state: steps overflow".into()))?;
    let expected = [(q.len(), knots.checked_mul(nq)), (p.len(), knots.checked_mul(n)), (u.len(), steps.checked_mul(n)), (iterations.len(), Some(steps))];
    if expected.iter().any(|&(got, want)| Some(got) != want) {
        return Err(RbdError::State(format!(
            "malformed Trajectory state: arrays of {}, {}, {} and {} entries for N = {steps}, n = {n}, nq = {nq}",
            q.len(),
            p.len(),
            u.len(),
            iterations.len()
        )));
    }
    Ok((spec, Trajectory { n, nq, steps, q, p, u, iterations }))
}

/// Refuses a trajectory whose sizes are not its integrator's.
pub fn check_trajectory(t: &Trajectory, vi: &VariationalIntegrator) -> PyResult<()> {
    if t.n != vi.n() || t.nq != vi.nq() {
        return Err(STATE_ERROR.err(format!("malformed Trajectory state: n = {}, nq = {} but its integrator has n = {}, nq = {}", t.n, t.nq, vi.n(), vi.nq())));
    }
    Ok(())
}

/// Whether two trajectories hold the same arrays, bit for bit.
pub fn same_trajectory(a: &Trajectory, b: &Trajectory) -> bool {
    let bits = |x: &[f64], y: &[f64]| x.len() == y.len() && x.iter().zip(y).all(|(x, y)| x.to_bits() == y.to_bits());
    (a.n, a.nq, a.steps) == (b.n, b.nq, b.steps) && bits(&a.q, &b.q) && bits(&a.p, &b.p) && bits(&a.u, &b.u) && a.iterations == b.iterations
}

const JOINT_KINDS: [&str; 9] = ["fixed", "revolute", "prismatic", "cylindrical", "spherical", "planar", "point_on_line", "point_on_plane", "floating"];

fn write_joint_kind(w: &mut StateWriter, kind: &JointKind) {
    let (tag, axis) = match kind {
        JointKind::Fixed => (0, None),
        JointKind::Revolute { axis } => (1, Some(axis)),
        JointKind::Prismatic { axis } => (2, Some(axis)),
        JointKind::Cylindrical { axis } => (3, Some(axis)),
        JointKind::Spherical => (4, None),
        JointKind::Planar { normal } => (5, Some(normal)),
        JointKind::PointOnLine { axis } => (6, Some(axis)),
        JointKind::PointOnPlane { normal } => (7, Some(normal)),
        JointKind::Floating => (8, None),
    };
    w.u8(tag);
    if let Some(a) = axis {
        w.vector3(a);
    }
}

fn read_joint_kind(r: &mut StateReader<'_>) -> Result<JointKind> {
    let tag = r.u8("loop-closure kind")?;
    let mut axis = || r.vector3(JOINT_KINDS.get(usize::from(tag)).copied().unwrap_or("joint axis"));
    Ok(match tag {
        0 => JointKind::Fixed,
        1 => JointKind::Revolute { axis: axis()? },
        2 => JointKind::Prismatic { axis: axis()? },
        3 => JointKind::Cylindrical { axis: axis()? },
        4 => JointKind::Spherical,
        5 => JointKind::Planar { normal: axis()? },
        6 => JointKind::PointOnLine { axis: axis()? },
        7 => JointKind::PointOnPlane { normal: axis()? },
        8 => JointKind::Floating,
        t => return Err(r.malformed(format!("loop-closure kind tag {t} is not one of 0..=8"))),
    })
}

/// The state of a `MaximalIntegrator`.
pub fn maximal_state(spec: &MaximalSpec) -> Vec<u8> {
    let mut w = StateWriter::new(MAXIMAL_KIND, MAXIMAL_VERSION);
    let MaximalSpec { model, dt, damping, stiffness, rest, tolerance, max_iterations, additions } = spec;
    w.bytes(&model.to_state());
    w.f64(*dt);
    for v in [damping, stiffness, rest] {
        w.opt(v.as_deref(), StateWriter::f64s);
    }
    w.f64(*tolerance);
    w.usize(*max_iterations);
    w.usize(additions.len());
    for a in additions {
        match a {
            Addition::LoopClosure { name, kind, parent, parent_frame, child, child_frame } => {
                w.u8(0);
                w.str(name);
                write_joint_kind(&mut w, kind);
                w.opt_usize(*parent);
                w.se3(parent_frame);
                w.usize(*child);
                w.se3(child_frame);
            }
            Addition::Contact { name, body, point, radius, normal, offset, friction, friction_model } => {
                // tag 1: a pyramid contact (the format before the cone existed), 3: a cone
                // contact, 4: a frictionless one
                w.u8(match friction_model {
                    FrictionModel::Pyramid => 1,
                    FrictionModel::Cone => 3,
                    FrictionModel::Frictionless => 4,
                });
                w.str(name);
                w.usize(*body);
                w.vector3(point);
                w.f64(*radius);
                w.vector3(normal);
                w.f64(*offset);
                w.f64(*friction);
            }
            Addition::JointLimit { joint, lower, upper } => {
                w.u8(2);
                w.usize(*joint);
                w.f64(*lower);
                w.f64(*upper);
            }
            Addition::BodyContact { name, bodies, shapes, friction, friction_model } => {
                w.u8(5);
                w.str(name);
                for (body, shape) in bodies.iter().zip(shapes) {
                    w.usize(*body);
                    write_shape(&mut w, shape);
                }
                w.f64(*friction);
                w.u8(friction_model_tag(*friction_model));
            }
        }
    }
    w.finish()
}

/// Tag of a body contact's friction model.
fn friction_model_tag(m: FrictionModel) -> u8 {
    match m {
        FrictionModel::Pyramid => 0,
        FrictionModel::Cone => 1,
        FrictionModel::Frictionless => 2,
    }
}

/// A contact shape: tag 0 sphere (centre, radius), 1 capsule (a, b, radius), 2 box (placement
/// of its centre and axes, half extents).
fn write_shape(w: &mut StateWriter, s: &Shape) {
    match s {
        Shape::Sphere { centre, radius } => {
            w.u8(0);
            w.vector3(centre);
            w.f64(*radius);
        }
        Shape::Capsule { a, b, radius } => {
            w.u8(1);
            w.vector3(a);
            w.vector3(b);
            w.f64(*radius);
        }
        Shape::Box { centre, rotation, half_extents } => {
            w.u8(2);
            w.se3(&Se3::new(*rotation, *centre));
            w.vector3(half_extents);
        }
    }
}

fn read_shape(r: &mut StateReader<'_>) -> Result<Shape> {
    Ok(match r.u8("shape kind")? {
        0 => Shape::Sphere { centre: r.vector3("sphere centre")?, radius: r.f64("sphere radius")? },
        1 => Shape::Capsule { a: r.vector3("capsule end")?, b: r.vector3("capsule end")?, radius: r.f64("capsule radius")? },
        2 => {
            let p = r.se3("box placement")?;
            Shape::Box { centre: p.translation, rotation: p.rotation, half_extents: r.vector3("box half extents")? }
        }
        t => return Err(r.malformed(format!("shape kind tag {t} is not one of 0..=2"))),
    })
}

/// The spec of a `MaximalIntegrator`'s state (built and validated by the caller).
pub fn maximal_from_state(data: &[u8]) -> Result<MaximalSpec> {
    let mut r = StateReader::new(data, MAXIMAL_KIND, MAXIMAL_VERSION)?;
    let model = read_model(&mut r)?;
    let dt = r.f64("dt")?;
    let mut forces = Vec::with_capacity(3);
    for what in ["damping", "stiffness", "rest"] {
        let v = r.opt(what, |r| r.f64s(what))?;
        if v.as_ref().is_some_and(|v| v.len() != model.nv) {
            return Err(r.malformed(format!("{what} does not have nv = {} entries", model.nv)));
        }
        forces.push(v);
    }
    let tolerance = r.f64("tolerance")?;
    let max_iterations = r.usize("max_iterations")?;
    let count = r.len("addition count", 25)?;
    let mut additions = Vec::with_capacity(count);
    for _ in 0..count {
        additions.push(match r.u8("addition kind")? {
            0 => Addition::LoopClosure {
                name: r.string("loop-closure name")?,
                kind: read_joint_kind(&mut r)?,
                parent: r.opt_usize("loop-closure parent")?,
                parent_frame: r.se3("loop-closure parent frame")?,
                child: r.usize("loop-closure child")?,
                child_frame: r.se3("loop-closure child frame")?,
            },
            tag @ (1 | 3 | 4) => Addition::Contact {
                name: r.string("contact name")?,
                body: r.usize("contact body")?,
                point: r.vector3("contact point")?,
                radius: r.f64("contact radius")?,
                normal: r.vector3("contact normal")?,
                offset: r.f64("contact offset")?,
                friction: r.f64("contact friction")?,
                friction_model: match tag {
                    1 => FrictionModel::Pyramid,
                    3 => FrictionModel::Cone,
                    _ => FrictionModel::Frictionless,
                },
            },
            2 => Addition::JointLimit { joint: r.usize("limited joint")?, lower: r.f64("lower limit")?, upper: r.f64("upper limit")? },
            5 => {
                let name = r.string("body contact name")?;
                let (ba, sa) = (r.usize("body contact body")?, read_shape(&mut r)?);
                let (bb, sb) = (r.usize("body contact body")?, read_shape(&mut r)?);
                let friction = r.f64("body contact friction")?;
                let friction_model = match r.u8("friction model")? {
                    0 => FrictionModel::Pyramid,
                    1 => FrictionModel::Cone,
                    2 => FrictionModel::Frictionless,
                    t => return Err(r.malformed(format!("friction model tag {t} is not one of 0..=2"))),
                };
                Addition::BodyContact { name, bodies: [ba, bb], shapes: [sa, sb], friction, friction_model }
            }
            t => return Err(r.malformed(format!("addition kind tag {t} is not one of 0..=5"))),
        });
    }
    r.finish()?;
    let [damping, stiffness, rest]: [Option<Vec<f64>>; 3] = forces.try_into().unwrap_or_default();
    Ok(MaximalSpec { model, dt, damping, stiffness, rest, tolerance, max_iterations, additions })
}

/// A body state from its position, quaternion `[x y z w]` (kept bit for bit, not
/// renormalised), linear and angular velocity.
pub fn body_state(x: &[f64], q: &[f64], v: &[f64], w: &[f64]) -> BodyState {
    BodyState {
        pose: Pose { x: Vector3::new(x[0], x[1], x[2]), q: UnitQuaternion::new_unchecked(Quaternion::new(q[3], q[0], q[1], q[2])) },
        v: Vector3::new(v[0], v[1], v[2]),
        w: Vector3::new(w[0], w[1], w[2]),
    }
}

/// The state of a `MaximalTrajectory`: its integrator's, then its arrays.
pub fn maximal_trajectory_state(spec: &MaximalSpec, t: &MaximalTrajectory) -> Vec<u8> {
    let mut w = StateWriter::new(MAXIMAL_TRAJECTORY_KIND, MAXIMAL_TRAJECTORY_VERSION);
    w.bytes(&maximal_state(spec));
    let MaximalTrajectory { nbodies, steps, states, q, nq, u, nu, iterations, energy, constraint_violation } = t;
    for x in [nbodies, steps, nq, nu] {
        w.usize(*x);
    }
    w.usize(states.len());
    for s in states {
        w.vector3(&s.pose.x);
        s.pose.q.coords.iter().for_each(|&c| w.f64(c));
        w.vector3(&s.v);
        w.vector3(&s.w);
    }
    for v in [q, u] {
        w.f64s(v);
    }
    w.usizes(iterations);
    w.f64s(energy);
    w.f64s(constraint_violation);
    w.finish()
}

/// The integrator spec and the arrays of a `MaximalTrajectory`'s state, sizes checked.
pub fn maximal_trajectory_from_state(data: &[u8]) -> Result<(MaximalSpec, MaximalTrajectory)> {
    let mut r = StateReader::new(data, MAXIMAL_TRAJECTORY_KIND, MAXIMAL_TRAJECTORY_VERSION)?;
    let vi = r.bytes("integrator state")?;
    let spec = maximal_from_state(vi).map_err(|e| r.malformed(format!("its integrator: {e}")))?;
    let (nbodies, steps, nq, nu) = (r.usize("nbodies")?, r.usize("steps")?, r.usize("nq")?, r.usize("nu")?);
    let count = r.len("body state count", 13 * 8)?;
    let mut states = Vec::with_capacity(count);
    for _ in 0..count {
        let mut f = [0.0; 13];
        for x in &mut f {
            *x = r.f64("body state")?;
        }
        states.push(body_state(&f[0..3], &f[3..7], &f[7..10], &f[10..13]));
    }
    let (q, u) = (r.f64s("q")?, r.f64s("u")?);
    let iterations = r.usizes("iterations")?;
    let (energy, constraint_violation) = (r.f64s("energy")?, r.f64s("constraint violation")?);
    r.finish()?;
    let knots = steps.checked_add(1);
    let u_ok = u.is_empty() || Some(u.len()) == steps.checked_mul(nu);
    let sizes = [
        (states.len(), knots.and_then(|k| k.checked_mul(nbodies))),
        (q.len(), knots.and_then(|k| k.checked_mul(nq))),
        (iterations.len(), Some(steps)),
        (energy.len(), knots),
        (constraint_violation.len(), knots),
    ];
    if !u_ok || nq != spec.model.nq || sizes.iter().any(|&(got, want)| Some(got) != want) {
        return Err(RbdError::State(format!(
            "malformed {MAXIMAL_TRAJECTORY_KIND} state: its arrays' sizes do not match N = {steps}, nbodies = {nbodies}, nq = {nq} (model: {}), nu = {nu}",
            spec.model.nq
        )));
    }
    Ok((spec, MaximalTrajectory { nbodies, steps, states, q, nq, u, nu, iterations, energy, constraint_violation }))
}
