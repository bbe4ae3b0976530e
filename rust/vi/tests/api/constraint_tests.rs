//! The constrained step (module `constrained`) on a four-bar linkage built as an open tree
//! plus a loop-closure constraint: no drift, bounded energy, exact linearisation, symplecticity
//! on the constraint set, and clear errors.

use crate::common::constraint::*;
use crate::*;
use nalgebra::{Matrix3, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

#[test]
fn redundant_constraints_and_multistage_schemes_are_errors() {
    let model = four_bar_tree();
    let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.01, None).unwrap().with_constraints(loop_closure(&model, true)).unwrap();
    let q = closed_configuration(&model, 0.3);
    let (mut qn, mut pn) = (vec![0.0; 3], vec![0.0; 3]);
    let err = vi.step(&mut vi.workspace(), StepInput::new(4, &q, &[0.0; 3], &[0.0; 3]), &mut qn, &mut pn).unwrap_err();
    assert_eq!(err, ViError::DegenerateConstraints { step: 4 });
    // second order is not implemented with constraints: an error, not a wrong answer
    let closed = integrator(Scheme::midpoint(), 0.01, None);
    let mut so = closed.second_order_workspace();
    let second = closed.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &[0.0; 3], &[0.0; 3]), &[0.0; 6]);
    assert!(matches!(second, Err(ViError::InvalidParameter(_))));
    let simpson = VariationalIntegrator::new(model.clone(), Scheme::simpson(), 0.01, None).unwrap();
    assert!(matches!(simpson.with_constraints(loop_closure(&model, false)), Err(ViError::InvalidParameter(_))));
}

/// A free box whose frame is held by a 6-D contact at the identity (three world planes through
/// the origin, three perpendicular axis pairs with their aligned axes), started turned about
/// `z` by `degrees`: the step's orientation equalities are also met at 180° (module
/// `constraints`, "Mirror images"). Returns the step's result and the turn it ended at.
fn box_held_turned(degrees: f64, aligned: bool) -> (Result<usize>, f64) {
    let mut b = ModelBuilder::new("box");
    b.add_body(None, "box", Joint::FreeFlyer, Se3::identity(), Inertia::new(1.5, Vector3::zeros(), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.04))))
        .unwrap();
    let model = Arc::new(b.build().unwrap());
    let axis = |i: usize| Vector3::ith(i, 1.0);
    let mut constraints: Vec<Constraint> = (0..3)
        .map(|i| Constraint::PointOnPlane {
            a: BodyPoint { body: None, point: Vector3::zeros() },
            normal: axis(i),
            b: BodyPoint { body: Some(0), point: Vector3::zeros() },
        })
        .collect();
    for (i, j) in [(0, 1), (1, 2), (2, 0)] {
        let held = aligned.then(|| AlignedAxes { a: axis(i), b: axis(i) });
        constraints.push(Constraint::Perpendicular {
            a: BodyPoint { body: None, point: axis(j) },
            b: BodyPoint { body: Some(0), point: axis(i) },
            aligned: held,
        });
    }
    let vi = VariationalIntegrator::new(model, Scheme::midpoint(), 0.01, None).unwrap().with_constraints(constraints).unwrap();
    let half = degrees.to_radians() / 2.0;
    let q = [0.0, 0.0, 0.0, 0.0, 0.0, half.sin(), half.cos()];
    let (mut qn, mut pn) = (vec![0.0; 7], vec![0.0; 6]);
    let out = vi.step(&mut vi.workspace(), StepInput::new(0, &q, &[0.0; 6], &[0.0; 6]), &mut qn, &mut pn);
    (out, 2.0 * qn[6].abs().clamp(0.0, 1.0).acos().to_degrees())
}

#[test]
fn aligned_axes_refuse_a_mirror_image() {
    // without aligned axes the step from 170° lands on the 180° solution
    let (plain, turn) = box_held_turned(170.0, false);
    assert!(plain.is_ok() && (turn - 180.0).abs() < 1e-6, "{plain:?} at {turn}°");
    let (guarded, _) = box_held_turned(170.0, true);
    assert!(matches!(guarded, Err(ViError::Misaligned { constraint: 3, degrees, .. }) if (degrees - 180.0).abs() < 1e-6), "{guarded:?}");
    // from 100° the same step reaches the target itself, and the guard lets it pass
    let (ok, turn) = box_held_turned(100.0, true);
    assert!(ok.is_ok() && turn < 1e-6, "{ok:?} at {turn}°");
}
