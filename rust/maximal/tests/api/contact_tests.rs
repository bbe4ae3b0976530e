//! Contacts with the ground (pyramid friction) and joint limits: a dropped box comes to rest, a
//! sliding box stops after Coulomb's distance, a sphere chain rests, limits hold and are reached.

use crate::common::contact::{box_on_ground, check_dropped_box_comes_to_rest, gap};
use nalgebra::{UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_batch::Control;
use vidyn_maximal::body::Pose;
use vidyn_maximal::models::cylinder_chain;
use vidyn_maximal::*;

#[test]
fn dropped_box_comes_to_rest_on_the_ground_without_penetration() {
    check_dropped_box_comes_to_rest(&MaximalIntegrator::new(Arc::new(box_on_ground(0.5)), 0.01).unwrap(), "box");
}

#[test]
fn sliding_box_stops_after_the_coulomb_distance() {
    // on a basis direction of the linearised cone friction is exact: deceleration c_f g, so
    // a box sliding at v₀ stops after v₀²/(2 c_f g); first order in Δt
    let (cf, v0, g) = (0.3, 1.0, 9.81);
    let vi = MaximalIntegrator::new(Arc::new(box_on_ground(cf)), 0.001).unwrap();
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25), UnitQuaternion::identity());
    let mut state = vec![BodyState { pose, v: Vector3::new(v0, 0.0, 0.0), w: Vector3::zeros() }];
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let mut min_gap = f64::INFINITY;
    for k in 0..600 {
        vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
        min_gap = min_gap.min(gap(&vi, &state));
    }
    let expected = v0 * v0 / (2.0 * cf * g);
    let s = &state[0];
    println!("sliding box: distance {:.5} m (Coulomb {expected:.5} m), |v| {:.1e}, min gap {min_gap:.1e}", s.pose.x.x, s.v.norm());
    assert!(s.v.norm() < 1e-6, "still moving: {}", s.v.norm());
    // O(Δt) discretisation: one step of travel (v₀Δt = 1e-3 m) is the scale of the error
    assert!((s.pose.x.x - expected).abs() < 2e-3, "distance {} vs {expected}", s.pose.x.x);
    assert!(min_gap > -1e-9 && s.pose.rotation().m33 > 1.0 - 1e-9, "the box must neither sink nor tip");
}

#[test]
fn chain_of_spheres_rests_stably_on_the_ground() {
    // Brüdigam et al. 2023 Fig. 8b: spheres (r = 0.25 m, 1 kg) linked by spherical joints,
    // with ground contact and friction
    let (n, r) = (6, 0.25);
    let (mech, mut state) = vidyn_maximal::models::sphere_chain(n);
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let (mut min_gap, mut viol, mut iters) = (f64::INFINITY, 0.0_f64, 0);
    for k in 0..400 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        min_gap = min_gap.min(gap(&vi, &state));
        viol = viol.max(vi.constraint_violation(&state));
    }
    let vmax = state.iter().fold(0.0_f64, |m, s| m.max(s.v.norm()));
    println!("sphere chain: min gap {min_gap:.1e} m, max |g| {viol:.1e}, final max |v| {vmax:.1e}, max IP iterations {iters}");
    assert!(min_gap > -1e-9, "penetration {min_gap:e}");
    assert!(viol <= 1e-10, "joint violation {viol:e}");
    assert!(vmax < 1e-6, "not at rest: {vmax:e}");
    for s in &state {
        assert!((s.pose.x.z - r).abs() < 1e-6, "sphere centre at {}", s.pose.x.z);
    }
}

#[test]
fn joint_limits_hold_at_solver_tolerance_and_are_reached() {
    // a pendulum thrown at 3 rad/s would swing to ≈ 0.8 rad; limits [−0.3, 0.5]
    let model = Arc::new(cylinder_chain(2, true));
    let mut mech = Mechanism::from_model(model).unwrap();
    let (lo, hi) = (-0.3, 0.5);
    mech.add_joint_limit(0, lo, hi).unwrap();
    mech.add_joint_limit(1, -0.2, 0.2).unwrap();
    assert!(mech.add_joint_limit(1, 0.2, -0.2).is_err());
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let traj = rollout_minimal(&vi, &Control::new(), &[0.0, 0.0], &[3.0, 0.0], &[], 300).unwrap();
    let (th0, th1): (Vec<f64>, Vec<f64>) = (0..=300).map(|k| (traj.q[2 * k], traj.q[2 * k + 1])).unzip();
    let (min0, max0) = (th0.iter().copied().fold(f64::INFINITY, f64::min), th0.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let (min1, max1) = (th1.iter().copied().fold(f64::INFINITY, f64::min), th1.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let viol = traj.constraint_violation.iter().copied().fold(0.0, f64::max);
    println!(
        "joint limits: θ₀ ∈ [{min0:.9}, {max0:.9}] (limits [{lo}, {hi}]), θ₁ ∈ [{min1:.6}, {max1:.6}] (±0.2), max |g| {viol:.1e}, max iterations {}",
        traj.iterations.iter().max().unwrap()
    );
    assert!(min0 >= lo - 1e-9 && max0 <= hi + 1e-9, "limits violated: [{min0}, {max0}]");
    assert!(min1 >= -0.2 - 1e-9 && max1 <= 0.2 + 1e-9, "limits violated: [{min1}, {max1}]");
    assert!(max0 > hi - 1e-6 && min0 < lo + 1e-6, "the swing must reach both limits: [{min0}, {max0}]");
    assert!(viol <= 1e-10);
}
