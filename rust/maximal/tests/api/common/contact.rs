//! The box on the ground of the contact tests (pyramid or cone friction), the smallest gap of a
//! state, and the drop of the box to rest.

use crate::body::Pose;
use crate::*;
use nalgebra::{Matrix3, UnitQuaternion, Vector3};

pub(crate) fn gap(vi: &MaximalIntegrator, state: &[BodyState]) -> f64 {
    vi.mechanism().contacts.iter().map(|c| c.normal.dot(&state[c.body].pose.point(&c.point)) - c.radius - c.offset).fold(f64::INFINITY, f64::min)
}

/// A 1 kg cube of edge 0.5 m with its 8 corners in contact with the ground `z = 0`.
pub(crate) fn box_on_ground(friction: f64) -> Mechanism {
    let (m, a) = (1.0, 0.5);
    let body = Body { name: "box".into(), mass: m, inertia: Matrix3::identity() * (m * a * a / 6.0) };
    let mut mech = Mechanism::new(vec![body], Vector3::new(0.0, 0.0, -9.81)).unwrap();
    for (k, (sx, sy, sz)) in [(-1, -1, -1), (1, -1, -1), (-1, 1, -1), (1, 1, -1), (-1, -1, 1), (1, -1, 1), (-1, 1, 1), (1, 1, 1)].into_iter().enumerate() {
        let corner = Vector3::new(sx as f64, sy as f64, sz as f64) * (a / 2.0);
        mech.add_contact(&format!("corner{k}"), 0, Sphere { centre: corner, radius: 0.0 }, Plane::ground(), friction).unwrap();
    }
    mech
}

/// Brüdigam et al. 2023 §5.1(d): the cube of edge 0.5 m, 1 kg, of `vi` dropped from 0.4 m
/// turning and moving sideways, 300 steps: no penetration, at rest on the ground at the end.
pub(crate) fn check_dropped_box_comes_to_rest(vi: &MaximalIntegrator, label: &str) {
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25 + 0.4), UnitQuaternion::from_scaled_axis(Vector3::new(0.1, -0.05, 0.3)));
    let mut state = vec![BodyState { pose, v: Vector3::new(0.3, 0.0, 0.0), w: Vector3::new(0.0, 0.5, 0.0) }];
    let (mut ws, mut next) = (vi.workspace(), state.clone());
    let (mut min_gap, mut iters) = (f64::INFINITY, 0);
    for k in 0..300 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        min_gap = min_gap.min(gap(vi, &state));
    }
    let s = &state[0];
    println!("{label}: min gap {min_gap:.2e} m, rest height {:.6} m, |v| {:.1e}, |ω| {:.1e}, max IP iterations {iters}", s.pose.x.z, s.v.norm(), s.w.norm());
    assert!(min_gap > -1e-9, "penetration {min_gap:e}");
    assert!((s.pose.x.z - 0.25).abs() < 1e-6, "rest height {}", s.pose.x.z);
    assert!(s.v.norm() < 1e-6 && s.w.norm() < 1e-6);
}

/// The 8-corner box of [`box_on_ground`] with every contact on `model`.
pub(crate) fn box_with(friction: f64, model: FrictionModel) -> Mechanism {
    let mut mech = box_on_ground(friction);
    for c in 0..mech.contacts.len() {
        mech.set_friction_model(c, model).unwrap();
    }
    mech
}
