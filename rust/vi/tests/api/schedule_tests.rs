//! Contact phases (module `schedule`): a touchdown is a plastic impact that keeps the momenta
//! about the contact point, lift-offs release, the linearisation holds across switches (fixed
//! base and on the Lie group), and a step past the schedule is an error.

use crate::common::constraint::{closed_configuration, four_bar_tree, loop_closure};
use crate::common::schedule::*;
use crate::lie_group_tests::world_momentum;
use crate::*;
use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

/// The world position of body point `c` of a free body at `q`.
fn world_point(q: &[f64], c: &Vector3<f64>) -> Vector3<f64> {
    let r = UnitQuaternion::from_quaternion(Quaternion::new(q[6], q[3], q[4], q[5]));
    Vector3::new(q[0], q[1], q[2]) + r * c
}

/// A free box without gravity whose corner reaches the world point `X` exactly at knot `j` of
/// its free flight; from step `j` on the corner is held at `X` (three planes through it). The
/// impulse acts at `X`, so the angular momentum about `X` is kept through the impact and after
/// it (discrete Noether: rotations about `X` are symmetries of every step), to round-off
/// (Newton at 1e-15); the knots up to `j` are the free flight's; the corner stays at `X`; the
/// linear momentum is not kept; and the kinetic energy drops at once to the plastic impact's,
/// the motion's energy with the corner's normal part removed in the metric of `M`
/// (`knot_energy` of the impact step at knot `j`), about which the variational step keeps it
/// (measured: 97 % of the energy lost, then within 1e-7 relative of the plastic energy over
/// the 48 steps after).
#[test]
fn a_touchdown_is_a_plastic_impact_about_the_contact_point() {
    let mut b = ModelBuilder::new("box");
    b.gravity(Vector3::zeros());
    let inertia = Inertia::new(2.0, Vector3::new(0.01, -0.02, 0.0), Matrix3::from_diagonal(&Vector3::new(0.03, 0.05, 0.04)));
    b.add_body(None, "box", Joint::FreeFlyer, Se3::identity(), inertia).unwrap();
    let model = Arc::new(b.build().unwrap());
    let corner = Vector3::new(0.1, -0.05, -0.08);
    let mut q0 = vec![0.0; 7];
    q0[6] = 1.0;
    let v0 = [0.4, 0.1, -0.5, 0.6, -0.3, 0.8];
    let (j, steps) = (12, 60);
    for scheme in [Scheme::midpoint(), Scheme::trapezoid()] {
        let free = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.01, None).unwrap().with_newton(1e-15, 50).unwrap();
        let mut p0 = vec![0.0; 6];
        free.momentum(&mut free.workspace(), &q0, &v0, &mut p0).unwrap();
        let flight = rollout(&free, &q0, &p0, &vec![0.0; steps * 6]).unwrap();
        let x = world_point(flight.q_at(j), &corner);
        let contact: Vec<Constraint> = [Vector3::x(), Vector3::y(), Vector3::z()]
            .into_iter()
            .map(|normal| Constraint::PointOnPlane { a: BodyPoint { body: None, point: x }, normal, b: BodyPoint { body: Some(0), point: corner } })
            .collect();
        let schedule: Vec<&[usize]> = (0..steps).map(|k| if k < j { &[][..] } else { &[0, 1, 2][..] }).collect();
        let vi = free.clone().with_constraints(contact).unwrap().with_constraint_schedule(&masks(3, &schedule)).unwrap();
        let traj = rollout(&vi, &q0, &p0, &vec![0.0; steps * 6]).unwrap();
        let about_x = |q: &[f64], p: &[f64]| {
            let w = world_momentum(q, p);
            (Vector3::new(w[0], w[1], w[2]), Vector3::new(w[3], w[4], w[5]) - x.cross(&Vector3::new(w[0], w[1], w[2])))
        };
        let (f0, l0) = about_x(&q0, &p0);
        let scale = l0.amax().max(f0.amax());
        for k in 0..=steps {
            let (q, p) = (traj.q_at(k), traj.p_at(k));
            assert!((about_x(q, p).1 - l0).amax() < 1e-12 * scale, "s = {}: angular momentum about X at knot {k}", scheme.s);
            if k <= j {
                let same = q.iter().zip(flight.q_at(k)).chain(p.iter().zip(flight.p_at(k))).all(|(a, b)| (a - b).abs() < 1e-12);
                assert!(same, "s = {}: knot {k} before the touchdown is the free flight's", scheme.s);
            } else {
                assert!((world_point(q, &corner) - x).amax() < 1e-12, "s = {}: the corner is held at knot {k}", scheme.s);
            }
        }
        let (f_end, _) = about_x(traj.q_at(steps), traj.p_at(steps));
        assert!((f_end - f0).amax() > 0.1 * f0.amax(), "the impact changes the linear momentum");
        let mut ws = vi.workspace();
        let flying = free.energy(&mut ws, j, flight.q_at(j), flight.p_at(j)).unwrap();
        let plastic = vi.energy(&mut ws, j, traj.q_at(j), traj.p_at(j)).unwrap();
        assert!(plastic < 0.9 * flying, "the impact dissipates: {flying} -> {plastic}");
        let mut worst = 0.0_f64;
        for k in j + 1..=steps {
            let e = vi.energy(&mut ws, k, traj.q_at(k), traj.p_at(k)).unwrap();
            worst = worst.max((e - plastic).abs() / plastic);
        }
        println!("s = {}: energy {flying:.6} -> {plastic:.6} at the impact, then within {worst:.1e} relative", scheme.s);
        assert!(worst < 1e-6, "s = {}: energy off the plastic impact's by {worst:e}", scheme.s);
        // no impulse before the touchdown
        let mut step_ws = vi.workspace();
        let (mut qn, mut pn) = (vec![0.0; 7], vec![0.0; 6]);
        for k in 0..steps {
            vi.step(&mut step_ws, StepInput::new(k, traj.q_at(k), traj.p_at(k), &[0.0; 6]), &mut qn, &mut pn).unwrap();
            let lambda = vi.multipliers(&step_ws);
            assert_eq!(lambda.iter().any(|&l| l != 0.0), k >= j, "step {k}: {lambda:?}");
        }
    }
}

/// A step past the schedule, a schedule without constraints or of the wrong shape: errors
/// that say so.
#[test]
fn schedules_are_checked() {
    let model = four_bar_tree();
    let closure = loop_closure(&model, false);
    let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.01, None).unwrap();
    let err = vi.clone().with_constraint_schedule(&[true, true]).unwrap_err().to_string();
    assert!(err.contains("needs constraints"), "{err}");
    let vi = vi.with_constraints(closure).unwrap();
    assert!(vi.clone().with_constraint_schedule(&[true, true, false]).is_err());
    let vi = vi.with_constraint_schedule(&masks(2, &[&[0, 1], &[0, 1]])).unwrap();
    let q0 = closed_configuration(&model, 0.4);
    assert_eq!(rollout(&vi, &q0, &[0.0; 3], &[0.0; 6]).unwrap().steps, 2);
    match rollout(&vi, &q0, &[0.0; 3], &[0.0; 9]) {
        Err(e @ ViError::PastSchedule { step: 2, steps: 2 }) => assert!(e.to_string().contains("covers steps 0 to 1"), "{e}"),
        other => panic!("{:?}", other.map(|t| t.steps)),
    }
}
