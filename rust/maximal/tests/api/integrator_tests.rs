//! The step on joints and loops: discrete momentum conservation of a free system, loops that stay
//! closed without drift, clear errors for redundant loops and thin rods, first-order agreement
//! with the minimal-coordinate integrator, and random trees of every joint kind.

use crate::common::integrator::initial_state;
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_batch::Control;
use vidyn_maximal::body::Pose;
use vidyn_maximal::models::{cylinder_chain, four_bar, four_bar_chain, tip_position};
use vidyn_maximal::*;
use vidyn_spatial::Se3;

/// Three asymmetric bodies joined by a spherical and a revolute joint, floating, no gravity.
fn free_mechanism() -> (Mechanism, Vec<BodyState>) {
    let body = |name: &str, m: f64, d: [f64; 3]| Body { name: name.into(), mass: m, inertia: Matrix3::from_diagonal(&Vector3::from(d)) };
    let mut mech =
        Mechanism::new(vec![body("a", 2.0, [0.1, 0.2, 0.3]), body("b", 1.0, [0.05, 0.09, 0.12]), body("c", 0.7, [0.04, 0.02, 0.05])], Vector3::zeros())
            .unwrap();
    let frame = |x: f64, y: f64, z: f64, r: [f64; 3]| Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(Vector3::from(r)), Vector3::new(x, y, z));
    let (fa, fb) = (frame(0.4, 0.1, 0.0, [0.2, 0.0, 0.1]), frame(-0.3, 0.0, 0.05, [0.0, 0.3, 0.0]));
    let (fb2, fc) = (frame(0.25, -0.1, 0.0, [0.1, 0.1, 0.0]), frame(-0.2, 0.0, 0.0, [0.0, 0.0, 0.4]));
    mech.add_joint("ball", JointKind::Spherical, Some(0), fa, 1, fb).unwrap();
    let axis = Vector3::new(0.2, 0.5, 1.0).normalize();
    mech.add_joint("hinge", JointKind::Revolute { axis }, Some(1), fb2, 2, fc).unwrap();
    // consistent poses: joint frames coincide up to the free motions
    let pa = Pose::new(Vector3::new(0.1, 0.2, 0.3), UnitQuaternion::from_scaled_axis(Vector3::new(0.3, -0.2, 0.5)));
    let place = |parent: &Pose, pf: Se3, rel: Se3, cf: Se3| {
        let w = Se3::from_quaternion(&parent.q, parent.x) * pf * rel * cf.inverse();
        Pose::new(w.translation, UnitQuaternion::from_matrix(&w.rotation))
    };
    let pb = place(&pa, fa, Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(Vector3::new(0.7, -0.4, 0.2)), Vector3::zeros()), fb);
    let pc = place(&pb, fb2, Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(axis * 1.1), Vector3::zeros()), fc);
    // arbitrary incoming velocities: momentum conservation does not need consistent ones
    let s = |p: Pose, v: [f64; 3], w: [f64; 3]| BodyState { pose: p, v: Vector3::from(v), w: Vector3::from(w) };
    let state = vec![s(pa, [0.3, -0.2, 0.1], [1.0, 2.0, -0.5]), s(pb, [-0.1, 0.4, 0.0], [-2.0, 0.5, 1.5]), s(pc, [0.0, 0.1, -0.3], [0.5, -1.0, 3.0])];
    (mech, state)
}

#[test]
fn free_system_conserves_discrete_linear_and_angular_momentum() {
    let (mech, mut state) = free_mechanism();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let (p0, h0) = (vi.linear_momentum(&state), vi.angular_momentum(&state));
    let (mut dp, mut dh, mut viol, mut iters) = (0.0_f64, 0.0_f64, 0.0_f64, 0);
    for k in 0..1000 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        dp = dp.max((vi.linear_momentum(&state) - p0).amax());
        dh = dh.max((vi.angular_momentum(&state) - h0).amax());
        viol = viol.max(vi.constraint_violation(&state));
        for s in &state {
            assert!((s.pose.q.coords.norm() - 1.0).abs() < 1e-13);
        }
    }
    println!("free system, 1000 steps: |ΔP| = {dp:.1e}, |ΔH| = {dh:.1e}, max |g| = {viol:.1e}, max Newton iterations {iters}");
    assert!(dp < 1e-11 * p0.amax().max(1.0), "linear momentum drift {dp:e}");
    assert!(dh < 1e-11 * h0.amax().max(1.0), "angular momentum drift {dh:e}");
    assert!(viol < 1e-12, "constraint violation {viol:e}");
}

#[test]
fn four_bar_keeps_its_loop_closed_without_drift_over_ten_thousand_steps() {
    let (mech, q0) = four_bar();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    assert!(vi.is_loop(3) && !vi.is_loop(0) && !vi.is_loop(2));
    let mut state = initial_state(&vi, &q0, &[0.0; 3]);
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let (mut viol, mut first_half, mut e_min, mut e_max) = (0.0_f64, 0.0_f64, f64::INFINITY, f64::NEG_INFINITY);
    let (mut mean_a, mut mean_b) = (0.0, 0.0);
    let n = 10_000;
    for k in 0..n {
        vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
        viol = viol.max(vi.constraint_violation(&state));
        if k == n / 2 {
            first_half = viol;
        }
        let e = vi.energy(&state);
        e_min = e_min.min(e);
        e_max = e_max.max(e);
        if k < 1000 {
            mean_a += e / 1000.0;
        } else if k >= n - 1000 {
            mean_b += e / 1000.0;
        }
    }
    println!(
        "four-bar, 10⁴ steps: max |g| = {viol:.1e} (first half {first_half:.1e}); energy range {:.3e}, window means {mean_a:.6} → {mean_b:.6}",
        e_max - e_min
    );
    // within the Newton tolerance (1e-12 on |g|) at every one of the 10⁴ knots: no drift
    assert!(viol <= 1e-12, "constraint violation {viol:e}");
    // no drift: the energy oscillates (O(Δt) for this first-order scheme) around a fixed level
    assert!((mean_b - mean_a).abs() < 0.1 * (e_max - e_min).max(1e-9), "energy trend {mean_a} → {mean_b}");
}

#[test]
fn chain_of_closed_loop_segments_keeps_every_loop_closed() {
    let (mech, q0) = four_bar_chain(4);
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let nloops = (0..vi.mechanism().joints.len()).filter(|&j| vi.is_loop(j)).count();
    assert_eq!(nloops, 4);
    let mut state = initial_state(&vi, &q0, &vec![0.0; q0.len()]);
    assert!(vi.constraint_violation(&state) < 1e-14);
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let mut viol = 0.0_f64;
    let mut iters = 0;
    for k in 0..10_000 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        viol = viol.max(vi.constraint_violation(&state));
    }
    println!("chain of 4 four-bar segments, 10⁴ steps: max |g| = {viol:.1e}, fill blocks {}, max Newton iterations {iters}", vi.fill_edges());
    assert!(viol < 1e-12, "constraint violation {viol:e}");
}

#[test]
fn redundant_planar_loop_is_a_clear_singular_pivot_error() {
    let model = Arc::new(cylinder_chain(3, true));
    let q0 = [0.9, -1.4, -0.6];
    let mut mech = Mechanism::from_model(model.clone()).unwrap();
    let tip = tip_position(&model, &q0);
    // a revolute closure also fixes out-of-plane motions that the other joints already fix
    let at_tip = Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0));
    mech.add_loop_closure("closure", JointKind::Revolute { axis: Vector3::y() }, None, Se3::new(Matrix3::identity(), tip), 2, at_tip).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let state = initial_state(&vi, &q0, &[0.0; 3]);
    let mut next = state.clone();
    let err = vi.step(&mut vi.workspace(), 7, &state, &[], None, &mut next).unwrap_err();
    assert!(matches!(&err, MaximalError::SingularPivot { node, step: 7, .. } if node.contains("closure")), "{err}");
}

#[test]
fn thin_rods_without_axial_inertia_are_rejected_clearly() {
    let err = Mechanism::from_model(Arc::new(vidyn_rbd::builders::pendulum_chain(2, true))).unwrap_err();
    assert!(err.to_string().contains("positive-definite inertia"), "{err}");
}

/// Final configuration after `t_end` of the maximal integrator on a model from `(q0, v0)`
/// with constant controls `u`.
fn maximal_final(mech: &Arc<Mechanism>, dt: f64, t_end: f64, q0: &[f64], v0: &[f64], u: &[f64]) -> Vec<f64> {
    let vi = MaximalIntegrator::new(mech.clone(), dt).unwrap();
    let mut state = initial_state(&vi, q0, v0);
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let steps = (t_end / dt).round() as usize;
    for k in 0..steps {
        vi.step(&mut ws, k, &state, u, None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
    }
    let poses: Vec<Pose> = state.iter().map(|s| s.pose).collect();
    let mut q = vec![0.0; q0.len()];
    mech.configuration(&poses, &mut q).unwrap();
    q
}

fn minimal_final(vi: &vidyn_vi::VariationalIntegrator, t_end: f64, q0: &[f64], v0: &[f64], u: &[f64]) -> Vec<f64> {
    let dt = vi.dt();
    let mut ws = vi.workspace();
    let mut p0 = vec![0.0; q0.len()];
    vi.momentum(&mut ws, q0, v0, &mut p0).unwrap();
    let steps = (t_end / dt).round() as usize;
    let controls: Vec<f64> = (0..steps).flat_map(|_| u.iter().copied()).collect();
    let traj = vidyn_vi::rollout(vi, q0, &p0, &controls).unwrap();
    traj.q_at(steps).to_vec()
}

#[test]
fn maximal_and_minimal_integrators_converge_to_the_same_motion() {
    // a spatial 3-link chain with controls, joint springs and dampers
    let model = Arc::new(cylinder_chain(3, false));
    let forces = vidyn_vi::JointForces { damping: vec![0.1, 0.05, 0.2], stiffness: vec![0.5, 1.0, 0.3], rest: vec![0.1, -0.2, 0.0] };
    let mut mech = Mechanism::from_model(model.clone()).unwrap();
    mech.damping = forces.damping.clone();
    mech.stiffness = forces.stiffness.clone();
    mech.rest = forces.rest.clone();
    let mech = Arc::new(mech);
    let (q0, v0, u) = ([0.6, -0.4, 0.3], [0.5, -0.3, 0.2], [0.3, -0.2, 0.1]);
    let t_end = 0.5;
    let minimal = |scheme, dt| vidyn_vi::VariationalIntegrator::new(model.clone(), scheme, dt, Some(forces.clone())).unwrap();
    let reference = minimal_final(&minimal(vidyn_vi::Scheme::simpson(), 2.5e-4), t_end, &q0, &v0, &u);
    let err = |q: &[f64]| q.iter().zip(&reference).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
    let dts = [0.004, 0.002, 0.001, 0.0005];
    let e_max: Vec<f64> = dts.iter().map(|&dt| err(&maximal_final(&mech, dt, t_end, &q0, &v0, &u))).collect();
    let e_min: Vec<f64> = dts.iter().map(|&dt| err(&minimal_final(&minimal(vidyn_vi::Scheme::trapezoid(), dt), t_end, &q0, &v0, &u))).collect();
    let order = |e: &[f64]| -> Vec<f64> { e.windows(2).map(|w| (w[0] / w[1]).log2()).collect() };
    println!("Δt {dts:?}\nmaximal errors {e_max:?} orders {:.2?}\nminimal (trapezoid) errors {e_min:?} orders {:.2?}", order(&e_max), order(&e_min));
    // first order: every halving of Δt halves the error (observed orders within 0.95..1.05)
    for p in order(&e_max) {
        assert!((0.95..1.05).contains(&p), "observed order {p}");
    }
    assert!(e_max[dts.len() - 1] < 5e-3, "maximal error {:e} at Δt = {}", e_max[dts.len() - 1], dts[dts.len() - 1]);
}

#[test]
fn random_trees_of_every_joint_kind_simulate_on_their_constraint_manifold() {
    use rand::SeedableRng;
    for seed in 0..6 {
        let model = Arc::new(vidyn_rbd::builders::random_tree(8, seed, &[]));
        let mech = Mechanism::from_model(model.clone()).unwrap();
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.005).unwrap();
        assert_eq!(vi.fill_edges(), 0, "a tree must factorise without fill");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let q0 = vidyn_rbd::random_configuration(&model, &mut rng);
        let v0: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-0.5..0.5)).collect();
        let traj = rollout_minimal(&vi, &Control::new(), &q0, &v0, &[], 200).unwrap();
        // knot 0 maps back to q0 (quaternions up to sign)
        let mut q = vec![0.0; model.nq];
        let poses: Vec<Pose> = traj.knot(0).iter().map(|s| s.pose).collect();
        vi.mechanism().configuration(&poses, &mut q).unwrap();
        let dq = vidyn_rbd::difference(&model, &q0, &q).unwrap();
        assert!(dq.iter().all(|x| x.abs() < 1e-9), "seed {seed}: configuration round trip {dq:?}");
        let viol = traj.constraint_violation.iter().copied().fold(0.0, f64::max);
        assert!(viol <= 1e-12, "seed {seed}: constraint violation {viol:e}");
        for s in &traj.states {
            assert!((s.pose.q.coords.norm() - 1.0).abs() < 1e-13);
        }
    }
}
