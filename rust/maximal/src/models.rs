//! Mechanisms for tests, benchmarks and examples, all with solid cylinders (radius 0.05 m)
//! instead of the thin rods of `vidyn_rbd::builders`: maximal coordinates need every body's
//! rotational inertia to be positive definite.

use crate::constraint::JointKind;
use crate::contact::{Plane, Sphere};
use crate::mechanism::Mechanism;
use nalgebra::{Matrix3, Vector3};
use std::sync::Arc;
use vidyn_rbd::{FrameKind, Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

/// Solid cylinder of mass `m`, length `l`, radius 0.05 hanging along `−z` from the body origin
/// (the minimal-coordinate builders use thin rods, whose zero axial inertia maximal
/// coordinates cannot invert).
pub fn cylinder(m: f64, l: f64) -> Inertia {
    let r: f64 = 0.05;
    let it = m * (3.0 * r * r + l * l) / 12.0;
    Inertia::new(m, Vector3::new(0.0, 0.0, -l / 2.0), Matrix3::from_diagonal(&Vector3::new(it, it, 0.5 * m * r * r)))
}

/// A chain of `n` cylinders (1 kg, 1 m) on revolute joints: all about `y` when `planar`, else
/// alternating `y`, `x`.
pub fn cylinder_chain(n: usize, planar: bool) -> Model {
    let mut b = ModelBuilder::new("cylinder_chain");
    let mut parent = None;
    for k in 0..n {
        let axis = if planar || k % 2 == 0 { Vector3::y() } else { Vector3::x() };
        let at = if k == 0 { Se3::identity() } else { Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0)) };
        parent = Some(b.add_body(parent, &format!("joint{}", k + 1), Joint::Revolute { axis }, at, cylinder(1.0, 1.0)).unwrap());
    }
    if let Some(p) = parent {
        b.add_frame("tip", Some(p), Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0)), FrameKind::Operational).unwrap();
    }
    b.build().unwrap()
}

/// A planar four-bar: a 3-link `cylinder_chain` whose tip is held on the world line through
/// its position at `q0` along `y` (point-on-line closure: the two in-plane rows only, so the
/// loop is not redundant). Returns the mechanism and `q0`.
pub fn four_bar() -> (Mechanism, Vec<f64>) {
    let model = Arc::new(cylinder_chain(3, true));
    let q0 = vec![0.9, -1.4, -0.6];
    let mut mech = Mechanism::from_model(model.clone()).unwrap();
    let tip = tip_position(&model, &q0);
    let at_tip = Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0));
    mech.add_loop_closure("closure", JointKind::PointOnLine { axis: Vector3::y() }, None, Se3::new(Matrix3::identity(), tip), 2, at_tip).unwrap();
    (mech, q0)
}

/// World position of the end of the last body's 1 m cylinder at `q`.
pub fn tip_position(model: &Model, q: &[f64]) -> Vector3<f64> {
    let mut ws = model.workspace();
    vidyn_rbd::placements(model, &mut ws, q).unwrap();
    ws.placements[model.nbodies() - 1].act_point(&Vector3::new(0.0, 0.0, -1.0))
}

/// A chain of `segments` closed four-bar loops hanging below each other (planar, revolute
/// about `y`): per segment a left and a right hanger (1 m) from the bar above (the world for
/// the first) at `x = 0` and `x = 1`, and a bottom bar (1 m along `+x`) on the left hanger's
/// end, closed to the right hanger's end by a point-on-line joint.
pub fn four_bar_chain(segments: usize) -> (Mechanism, Vec<f64>) {
    let mut b = ModelBuilder::new("four_bar_chain");
    let down = Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0));
    let bar = {
        let (m, l, r): (f64, f64, f64) = (1.0, 1.0, 0.05);
        let it = m * (3.0 * r * r + l * l) / 12.0;
        Inertia::new(m, Vector3::new(0.5, 0.0, 0.0), Matrix3::from_diagonal(&Vector3::new(0.5 * m * r * r, it, it)))
    };
    let mut above: Option<usize> = None;
    let mut closures = Vec::new();
    for s in 0..segments {
        let left_at = Se3::identity();
        let right_at = Se3::new(Matrix3::identity(), Vector3::new(1.0, 0.0, 0.0));
        let y = Joint::Revolute { axis: Vector3::y() };
        let left = b.add_body(above, &format!("left{s}"), y, left_at, cylinder(1.0, 1.0)).unwrap();
        let right = b.add_body(above, &format!("right{s}"), y, right_at, cylinder(1.0, 1.0)).unwrap();
        let bottom = b.add_body(Some(left), &format!("bar{s}"), y, down, bar).unwrap();
        closures.push((format!("closure{s}"), bottom, right));
        above = Some(bottom);
    }
    let names: Vec<(String, String, String)> =
        closures.iter().map(|(c, _, _)| c.clone()).zip((0..segments).map(|s| (format!("bar{s}"), format!("right{s}")))).map(|(c, (a, r))| (c, a, r)).collect();
    let model = Arc::new(b.build().unwrap());
    let mut mech = Mechanism::from_model(model.clone()).unwrap();
    for (c, bar_name, right_name) in names {
        let (bi, ri) = (model.joint_index(&bar_name).unwrap(), model.joint_index(&right_name).unwrap());
        let bar_end = Se3::new(Matrix3::identity(), Vector3::new(1.0, 0.0, 0.0));
        mech.add_loop_closure(&c, JointKind::PointOnLine { axis: Vector3::y() }, Some(bi), bar_end, ri, down).unwrap();
    }
    // a parallelogram configuration: every hanger at the same angle, bars level
    let mut q = vec![0.0; model.nq];
    for s in 0..segments {
        let th = 0.4;
        q[model.idx_q[model.joint_index(&format!("left{s}")).unwrap()]] = th;
        q[model.idx_q[model.joint_index(&format!("right{s}")).unwrap()]] = th;
        q[model.idx_q[model.joint_index(&format!("bar{s}")).unwrap()]] = -th;
    }
    (mech, q)
}

/// A chain of `n` spheres (radius 0.25 m, 1 kg) joined by spherical joints at their surfaces,
/// each in contact with the ground `z = 0` (friction 0.4; Brüdigam et al. 2023 Fig. 8b), and
/// its state dropped from 0.3 m above the ground while moving sideways at 0.5 m/s.
#[must_use]
pub fn sphere_chain(n: usize) -> (Mechanism, Vec<crate::BodyState>) {
    let r = 0.25;
    let inertia = Matrix3::identity() * (0.4 * r * r);
    let bodies: Vec<crate::Body> = (0..n).map(|k| crate::Body { name: format!("sphere{k}"), mass: 1.0, inertia }).collect();
    let mut mech = Mechanism::new(bodies, Vector3::new(0.0, 0.0, -9.81)).expect("valid bodies");
    let half = Se3::new(Matrix3::identity(), Vector3::new(r, 0.0, 0.0));
    let back = Se3::new(Matrix3::identity(), Vector3::new(-r, 0.0, 0.0));
    for k in 1..n {
        mech.add_joint(&format!("ball{k}"), JointKind::Spherical, Some(k - 1), half, k, back).expect("valid joint");
    }
    for k in 0..n {
        mech.add_contact(&format!("ground{k}"), k, Sphere { centre: Vector3::zeros(), radius: r }, Plane::ground(), 0.4).expect("valid contact");
    }
    let state = (0..n)
        .map(|k| crate::BodyState {
            pose: crate::Pose::new(Vector3::new(2.0 * r * k as f64, 0.0, r + 0.3), nalgebra::UnitQuaternion::identity()),
            v: Vector3::new(0.0, 0.5, 0.0),
            w: Vector3::zeros(),
        })
        .collect();
    (mech, state)
}
