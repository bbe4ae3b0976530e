//! Helpers of the four-bar linkage (`constraint_tests`).

use crate::*;
use nalgebra::{Matrix3, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

pub(crate) const GROUND: f64 = 2.5;

pub(crate) const CRANK: f64 = 1.0;

pub(crate) const COUPLER: f64 = 2.0;

pub(crate) const ROCKER: f64 = 1.5;

pub(crate) fn rod(length: f64) -> Inertia {
    let i = length * length / 12.0;
    Inertia::new(1.0, Vector3::new(0.0, 0.0, -length / 2.0), Matrix3::from_diagonal(&Vector3::new(i, i, 1e-3)))
}

/// Crank (pivot at the origin) → coupler, and a rocker pivoting at `(GROUND, 0, 0)`; all
/// joints turn about `y`, rods hang along `−z` at `q = 0`.
pub(crate) fn four_bar_tree() -> Arc<Model> {
    let mut b = ModelBuilder::new("four_bar");
    let y = Joint::Revolute { axis: Vector3::y() };
    let crank = b.add_body(None, "crank", y, Se3::identity(), rod(CRANK)).unwrap();
    b.add_body(Some(crank), "coupler", y, Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -CRANK)), rod(COUPLER)).unwrap();
    b.add_body(None, "rocker", y, Se3::new(Matrix3::identity(), Vector3::new(GROUND, 0.0, 0.0)), rod(ROCKER)).unwrap();
    Arc::new(b.build().unwrap())
}

/// The coupler's free end coincides with the rocker's: two planes through the rocker end,
/// normals `x` and `z` of the rocker (the third direction, `y`, is the joints' common axis).
pub(crate) fn loop_closure(model: &Model, with_redundant_plane: bool) -> Vec<Constraint> {
    let (coupler, rocker) = (model.joint_index("coupler").unwrap(), model.joint_index("rocker").unwrap());
    let a = BodyPoint { body: Some(rocker), point: Vector3::new(0.0, 0.0, -ROCKER) };
    let b = BodyPoint { body: Some(coupler), point: Vector3::new(0.0, 0.0, -COUPLER) };
    let mut normals = vec![Vector3::x(), Vector3::z()];
    if with_redundant_plane {
        normals.push(Vector3::y());
    }
    normals.into_iter().map(|normal| Constraint::PointOnPlane { a: a.clone(), normal, b: b.clone() }).collect()
}

/// A configuration on the constraint set for crank angle `t1` (bisection on the rocker angle).
pub(crate) fn closed_configuration(model: &Model, t1: f64) -> Vec<f64> {
    let crank_end = Vector3::new(-CRANK * t1.sin(), 0.0, -CRANK * t1.cos());
    let rocker_end = |t3: f64| Vector3::new(GROUND - ROCKER * t3.sin(), 0.0, -ROCKER * t3.cos());
    let gap = |t3: f64| (rocker_end(t3) - crank_end).norm() - COUPLER;
    let (mut lo, mut hi) = (-0.2, 1.5);
    assert!(gap(lo) * gap(hi) < 0.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gap(lo) * gap(mid) <= 0.0 {
            hi = mid
        } else {
            lo = mid
        }
    }
    let t3 = 0.5 * (lo + hi);
    let d = rocker_end(t3) - crank_end;
    let phi = (-d.x).atan2(-d.z);
    let mut q = vec![0.0; 3];
    q[model.joint_index("crank").unwrap()] = t1;
    q[model.joint_index("coupler").unwrap()] = phi - t1;
    q[model.joint_index("rocker").unwrap()] = t3;
    q
}

pub(crate) fn integrator(sc: Scheme, dt: f64, forces: Option<JointForces>) -> VariationalIntegrator {
    let model = four_bar_tree();
    let c = loop_closure(&model, false);
    VariationalIntegrator::new(model, sc, dt, forces).unwrap().with_constraints(c).unwrap()
}
