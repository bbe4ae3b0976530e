//! Balls and their sphere shapes for the tests of contacts between bodies, and a stack of three
//! balls on the ground.

use crate::body::Pose;
use crate::*;
use nalgebra::{Matrix3, UnitQuaternion, Vector3};

pub(crate) fn ball(name: &str, mass: f64, r: f64) -> Body {
    Body { name: name.into(), mass, inertia: Matrix3::identity() * (0.4 * mass * r * r) }
}

pub(crate) fn sphere(r: f64) -> Shape {
    Shape::Sphere { centre: Vector3::zeros(), radius: r }
}

/// Three 1 kg spheres (r = 0.25 m) stacked on the ground, each on the one below.
pub(crate) fn ball_stack(friction: f64) -> (Mechanism, Vec<BodyState>) {
    let r = 0.25;
    let bodies = (0..3).map(|k| ball(&format!("ball{k}"), 1.0, r)).collect();
    let mut mech = Mechanism::new(bodies, Vector3::new(0.0, 0.0, -9.81)).unwrap();
    mech.add_contact("ground", 0, Sphere { centre: Vector3::zeros(), radius: r }, Plane::ground(), friction).unwrap();
    for k in 0..2 {
        mech.add_body_contact(&format!("ball{}-ball{k}", k + 1), (k + 1, sphere(r)), (k, sphere(r)), friction).unwrap();
    }
    let state = (0..3)
        .map(|k| BodyState {
            pose: Pose::new(Vector3::new(0.0, 0.0, r + 2.0 * r * k as f64 + 0.01 * k as f64), UnitQuaternion::identity()),
            ..Default::default()
        })
        .collect();
    (mech, state)
}
