//! Steps of models with free-flyer, spherical and planar joints on their Lie groups (module
//! `chart_step`): the discrete Noether theorem, unit quaternions, and what is refused.

use crate::common::lie_group::*;
use crate::*;
use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

/// The base's momentum, the system's spatial momentum in the base frame, in the world frame
/// about its origin: `[R f; R τ + x × R f]`.
pub(crate) fn world_momentum(q: &[f64], p: &[f64]) -> [f64; 6] {
    let r = UnitQuaternion::from_quaternion(Quaternion::new(q[6], q[3], q[4], q[5]));
    let (f, tau) = (r * Vector3::new(p[0], p[1], p[2]), r * Vector3::new(p[3], p[4], p[5]));
    let tau = tau + Vector3::new(q[0], q[1], q[2]).cross(&f);
    [f.x, f.y, f.z, tau.x, tau.y, tau.z]
}

/// Discrete Noether: with no gravity the system's world momentum is conserved (left
/// translations and rotations of the base are symmetries of the discrete Lagrangian), with
/// gravity the horizontal force and the vertical moment are, and the vertical force falls by
/// `M g Δt` a step; quaternions stay unit; every scheme. Newton runs to its round-off floor
/// (tolerance 1e-15), so the momenta are conserved to round-off: measured ≤ 1.3e-13 over 200
/// steps (with the default tolerance 1e-12 they move by up to the steps' residuals, 1.2e-11
/// for Simpson and Lobatto s = 3).
#[test]
fn momentum_maps_are_conserved_on_the_group() {
    for gravity in [false, true] {
        let model = Arc::new(floating_tree(gravity));
        let mass = model.total_mass();
        let q0 = start(&model);
        let v0 = [0.3, -0.1, 0.2, 0.5, -0.4, 0.8, 1.0, 2.0, -1.0, 0.5, 0.2, -0.3, 0.7];
        for scheme in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
            let dt = 0.01;
            let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), dt, None).unwrap().with_newton(1e-15, 50).unwrap();
            assert!(vi.has_composite_joints() && vi.nq() == 16 && vi.n() == 13);
            let mut ws = vi.workspace();
            let mut p0 = vec![0.0; vi.n()];
            vi.momentum(&mut ws, &q0, &v0, &mut p0).unwrap();
            let steps = 200;
            let traj = rollout(&vi, &q0, &p0, &vec![0.0; steps * vi.n()]).unwrap();
            let h0 = world_momentum(&q0, &p0);
            let scale = h0.iter().fold(1.0_f64, |m, x| m.max(x.abs()));
            for k in 0..=steps {
                let (q, p) = (traj.q_at(k), traj.p_at(k));
                let h = world_momentum(q, p);
                let fall = if gravity { mass * 9.81 * dt * k as f64 } else { 0.0 };
                let conserved: &[usize] = if gravity { &[0, 1, 5] } else { &[0, 1, 2, 3, 4, 5] };
                for &c in conserved {
                    assert!((h[c] - h0[c]).abs() < 1e-12 * scale, "s = {}, gravity {gravity}: component {c} at step {k}: {} vs {}", scheme.s, h[c], h0[c]);
                }
                if gravity {
                    assert!((h[2] - (h0[2] - fall)).abs() < 1e-12 * scale.max(fall), "s = {}: vertical force at step {k}", scheme.s);
                }
                for (iq, len) in [(3, 4), (8, 4)] {
                    let norm = q[iq..iq + len].iter().map(|x| x * x).sum::<f64>().sqrt();
                    assert!((norm - 1.0).abs() < 1e-14, "quaternion norm {norm}");
                }
                let planar = (q[14] * q[14] + q[15] * q[15]).sqrt();
                assert!((planar - 1.0).abs() < 1e-14);
            }
            // bounded energy error, no drift (the energy check of the rollout passed too)
            let e: Vec<f64> = (0..=steps).map(|k| vi.energy(&mut ws, k, traj.q_at(k), traj.p_at(k)).unwrap()).collect();
            let drift = e.iter().map(|x| (x - e[0]).abs()).fold(0.0, f64::max);
            assert!(drift < 1e-3 * e[0].abs().max(1.0), "s = {}: energy drift {drift}", scheme.s);
        }
    }
}

/// A body tumbling at a quarter turn per step leaves its step's chart: a clear error, not a
/// wrong state. What the Lie-group path does not have yet is refused by name.
#[test]
fn what_is_not_supported_is_refused() {
    let model = Arc::new(floating_tree(false));
    let vi = VariationalIntegrator::new(model.clone(), Scheme::trapezoid(), 0.5, None).unwrap();
    let mut ws = vi.workspace();
    let q0 = start(&model);
    let mut v0 = [0.0; 13];
    v0[4] = 4.0; // 2 rad about the base's y axis in one step
    let mut p0 = [0.0; 13];
    vi.momentum(&mut ws, &q0, &v0, &mut p0).unwrap();
    let (mut q1, mut p1) = (vec![0.0; 16], vec![0.0; 13]);
    match vi.step(&mut ws, StepInput::new(0, &q0, &p0, &[0.0; 13]), &mut q1, &mut p1) {
        Err(ViError::StepTooLarge { joint, degrees, .. }) => assert!(joint == "base" && (degrees - 2.0_f64.to_degrees()).abs() < 1e-9, "{joint}: {degrees}"),
        other => panic!("{other:?}"),
    }
    let vi = VariationalIntegrator::new(model.clone(), Scheme::trapezoid(), 0.01, None).unwrap();
    let err = vi.clone().with_kinematic(&[2]).unwrap_err().to_string();
    assert!(err.contains("'base'") && err.contains("kinematic"), "{err}");
    let damped = JointForces { damping: vec![0.1; 13], ..JointForces::none(13) };
    let err = VariationalIntegrator::new(model, Scheme::trapezoid(), 0.01, Some(damped)).unwrap_err().to_string();
    assert!(err.contains("'base'") && err.contains("damping"), "{err}");
}

/// A free body tethered to a world anchor by a distance constraint: rotations about the anchor
/// are symmetries, so the world angular momentum about it is conserved (Newton to round-off);
/// the tether holds at every knot. And a floating pendulum whose hinge is prescribed (a
/// kinematic joint, an ideal internal actuator): the system's world momentum is conserved while
/// the hinge does work.
#[test]
fn constraints_and_kinematic_joints_on_the_group() {
    let mut b = ModelBuilder::new("tethered box");
    b.gravity(Vector3::zeros());
    b.add_body(
        None,
        "box",
        Joint::FreeFlyer,
        Se3::identity(),
        Inertia::new(1.5, Vector3::new(0.02, 0.0, -0.01), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.04))),
    )
    .unwrap();
    let model = Arc::new(b.build().unwrap());
    let anchor = Vector3::new(0.1, 0.0, 1.0);
    let tether =
        Constraint::Distance { a: BodyPoint { body: None, point: anchor }, b: BodyPoint { body: Some(0), point: Vector3::new(0.1, 0.0, 0.0) }, length: 1.0 };
    let mut q0 = vec![0.0; 7];
    q0[6] = 1.0;
    let v0 = [0.3, 0.5, 0.0, 0.4, -0.2, 0.9];
    for scheme in [Scheme::midpoint(), Scheme::trapezoid()] {
        let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.01, None)
            .unwrap()
            .with_newton(1e-15, 50)
            .unwrap()
            .with_constraints(vec![tether.clone()])
            .unwrap();
        let mut ws = vi.workspace();
        let mut h = [0.0];
        vi.constraint_values(&mut ws, &q0, &mut h).unwrap();
        assert!(h[0].abs() < 1e-15);
        let mut p0 = vec![0.0; 6];
        vi.momentum(&mut ws, &q0, &v0, &mut p0).unwrap();
        let traj = rollout(&vi, &q0, &p0, &[0.0; 300 * 6]).unwrap();
        let about_anchor = |k: usize| {
            let w = world_momentum(traj.q_at(k), traj.p_at(k));
            Vector3::new(w[3], w[4], w[5]) - anchor.cross(&Vector3::new(w[0], w[1], w[2]))
        };
        let (l0, scale) = (about_anchor(0), about_anchor(0).amax().max(1.0));
        for k in 0..=300 {
            vi.constraint_values(&mut ws, traj.q_at(k), &mut h).unwrap();
            assert!(h[0].abs() < 1e-12, "s = {}: tether off by {} at step {k}", scheme.s, h[0]);
            assert!((about_anchor(k) - l0).amax() < 1e-12 * scale, "s = {}: angular momentum about the anchor at step {k}", scheme.s);
        }
        // the linear momentum is not conserved: the tether pulls
        let w = world_momentum(traj.q_at(300), traj.p_at(300));
        assert!((Vector3::new(w[0], w[1], w[2]) - Vector3::new(p0[0], p0[1], p0[2])).amax() > 1e-3);
    }

    let model = Arc::new(floating_tree(false));
    let q0 = start(&model);
    let vi = VariationalIntegrator::new(model, Scheme::trapezoid(), 0.01, None).unwrap().with_newton(1e-15, 50).unwrap().with_kinematic(&[6]).unwrap();
    let mut ws = vi.workspace();
    let mut v0 = [0.3, -0.1, 0.2, 0.5, -0.4, 0.8, 0.0, 2.0, -1.0, 0.5, 0.2, -0.3, 0.7];
    let rho = |k: usize| 0.8 + 0.3 * (2.0 * 0.01 * k as f64).sin();
    v0[6] = 0.6; // the prescribed rate at t = 0
    let mut p0 = vec![0.0; 13];
    vi.momentum(&mut ws, &q0, &v0, &mut p0).unwrap();
    let u: Vec<f64> = (0..200).flat_map(|k| (0..13).map(move |i| if i == 6 { rho(k + 1) } else { 0.0 })).collect();
    let traj = rollout(&vi, &q0, &p0, &u).unwrap();
    let h0 = world_momentum(&q0, &p0);
    let scale = h0.iter().fold(1.0_f64, |m, x| m.max(x.abs()));
    for k in 0..=200 {
        let h = world_momentum(traj.q_at(k), traj.p_at(k));
        assert!(h.iter().zip(&h0).all(|(a, b)| (a - b).abs() < 1e-12 * scale), "step {k}: {h:?} vs {h0:?}");
        assert!((traj.q_at(k)[7] - if k == 0 { 0.8 } else { rho(k) }).abs() < 1e-15, "the hinge follows its prescription");
    }
}

/// The linearisation on the group (module `chart_linearize`) for every scheme, with gravity,
/// controls on every joint (the base's too), joint damping and springs on the 1-dof joint,
/// and body wrenches (measured: 6e-10 relative to the largest entry).
#[test]
fn linearization_on_the_group_matches_central_differences() {
    let model = Arc::new(floating_tree(true));
    let n = model.nv;
    let q0 = start(&model);
    let v0 = [0.3, -0.1, 0.2, 0.5, -0.4, 0.8, 1.0, 2.0, -1.0, 0.5, 0.2, -0.3, 0.7];
    let u: Vec<f64> = (0..n).map(|i| 0.3 * ((i as f64) * 1.3).sin()).collect();
    let mut forces = JointForces::none(n);
    forces.damping[6] = 0.2;
    forces.stiffness[6] = 1.5;
    forces.rest[6] = 0.3;
    let wrenches: Vec<vidyn_spatial::Force> =
        (0..model.nbodies()).map(|k| vidyn_spatial::Force::new(Vector3::new(0.1 * k as f64, -0.2, 0.3), Vector3::new(0.05, 0.1 * k as f64, -0.02))).collect();
    for scheme in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
        for wrenched in [false, true] {
            let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, Some(forces.clone())).unwrap().with_newton(1e-15, 60).unwrap();
            let vi = if wrenched { vi.with_body_wrenches(wrenches.clone()).unwrap() } else { vi };
            let mut p0 = vec![0.0; n];
            vi.momentum(&mut vi.workspace(), &q0, &v0, &mut p0).unwrap();
            assert_linearization_on_the_group(&vi, 0, &q0, &p0, &u, &format!("s = {}, wrenches {wrenched}", scheme.s));
        }
    }
}

/// With holonomic constraints on the floating tree (the base tethered to a world point by a
/// distance, and the ball joint's body kept on a plane through the base), midpoint and
/// trapezoid: the KKT elimination on the centred expansion and the constraint impulse in the
/// composite momentum row.
#[test]
fn constrained_linearization_on_the_group_matches_central_differences() {
    let model = Arc::new(floating_tree(true));
    let n = model.nv;
    let q0 = start(&model);
    let constraints = tether_and_plane(&model, &q0, 0.0);
    let u: Vec<f64> = (0..n).map(|i| 0.2 * ((i as f64) * 0.7).cos()).collect();
    for scheme in [Scheme::midpoint(), Scheme::trapezoid()] {
        let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, None)
            .unwrap()
            .with_newton(1e-15, 60)
            .unwrap()
            .with_constraints(constraints.clone())
            .unwrap();
        // a state on the constraint set: a few steps from rest
        let traj = rollout(&vi, &q0, &vec![0.0; n], &vec![0.0; 3 * n]).unwrap();
        let (q, p) = (traj.q_at(3).to_vec(), traj.p_at(3).to_vec());
        assert_linearization_on_the_group(&vi, 0, &q, &p, &u, &format!("constrained, s = {}", scheme.s));
    }
}

/// With a kinematic (prescribed) joint: the floating tree's hinge follows its input
/// `ρ_{k+1}` (the `u` slot), midpoint and trapezoid.
#[test]
fn linearization_with_a_kinematic_joint_on_the_group_matches_central_differences() {
    let model = Arc::new(floating_tree(true));
    let n = model.nv;
    let q0 = start(&model);
    let hinge = 6;
    let mut u: Vec<f64> = (0..n).map(|i| 0.2 * ((i as f64) * 0.7).cos()).collect();
    u[hinge] = q0[7] + 0.01; // ρ_{k+1}: the hinge turns by 0.01 rad
    let mut p0 = vec![0.0; n];
    for scheme in [Scheme::midpoint(), Scheme::trapezoid()] {
        let vi =
            VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, None).unwrap().with_newton(1e-15, 60).unwrap().with_kinematic(&[hinge]).unwrap();
        let v0 = [0.3, -0.1, 0.2, 0.5, -0.4, 0.8, 0.5, 2.0, -1.0, 0.5, 0.2, -0.3, 0.7];
        vi.momentum(&mut vi.workspace(), &q0, &v0, &mut p0).unwrap();
        assert_linearization_on_the_group(&vi, 0, &q0, &p0, &u, &format!("kinematic hinge, s = {}", scheme.s));
    }
}
