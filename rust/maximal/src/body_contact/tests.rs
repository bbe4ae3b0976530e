//! Contacts between bodies: momentum exchange in sphere–sphere collisions, the normal forces of a
//! ball stack and of a ball on a box (signed distances from the contact frame), and the graph
//! solve with a sticking contact eliminated as a loop closure.

use crate::body::Pose;
use crate::test_common::body_contact::{ball, ball_stack, sphere};
use crate::*;
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use std::sync::Arc;

/// Signed distance of body contact `k` at `state`.
fn body_gap(vi: &MaximalIntegrator, state: &[BodyState], k: usize) -> f64 {
    let bc = &vi.mechanism().body_contacts[k];
    let poses: Vec<Pose> = state.iter().map(|s| s.pose).collect();
    bc.frame(&poses).prox.distance
}

/// The bound on the drift of `Σ m v` (and of the angular momentum about the origin) over a run
/// of the states `states`: round-off, `1e-13 p` with the momentum scale `p = max(1, m|v|, |Jω|)`.
/// Each step changes them by `Δt Σ r` (the body residuals left at convergence; the contact
/// forces cancel exactly), which the Newton tolerance only bounds by `nb · 100 tol · p` (4e-8 p
/// over these runs). But `Σ r` is linear in the unknowns and the contact forces drop out of it,
/// so every Newton step keeps its value as long as the direction solves the linear system to
/// round-off, and the first full step sets it to zero: the drift is round-off — provided the
/// graph solve is accurate, which the body contacts' loop-closure elimination order gives
/// (eliminated first, as plane contacts are, the drift was 1e-10 p).
fn momentum_bound(vi: &MaximalIntegrator, states: &[Vec<BodyState>]) -> f64 {
    let bodies = &vi.mechanism().bodies;
    let p = states.iter().flatten().zip(bodies.iter().cycle()).map(|(s, b)| (b.mass * s.v.norm()).max((b.inertia * s.w).norm())).fold(1.0, f64::max);
    1e-13 * p
}

/// What [`collide`] measures.
struct Collision {
    /// Largest drifts of the total linear and angular momentum, and their bound
    /// ([`momentum_bound`]).
    dp: f64,
    dh: f64,
    bound: f64,
    min_gap: f64,
    /// Relative normal velocity (positive: separating) one step after the impact and its bound
    /// `vn_step`: both knots lie at barrier gaps `μ*/γ ≲ 1e-9 m` (`|vn| ≲ 1e-9/Δt`, allowed
    /// 1e-6) unless the spheres slide past each other at the relative tangential speed `v_t`,
    /// which opens the gap by the curvature, `(v_t Δt)²/(2(r_a + r_b))` in a step (allowed
    /// twice that per `Δt`); and the bound on the separation the barrier builds up later
    /// (below).
    vn: f64,
    vn_step: f64,
    vn_bound: f64,
    end: Vec<BodyState>,
}

/// Two free spheres (r = 0.2 m, no gravity, frictionless contact) collide, Newton tolerance
/// `tol`.
///
/// After a plastic impact the spheres stay at a gap `φ` where the barrier's force `γ = μ*/φ`
/// (`μ*` the final barrier of a step) pushes them apart: with `φ_k ≈ k Δt v` after `k` steps the
/// impulse `Σ Δt μ*/φ_k ≈ (μ*/v) ln k` gives the separation speed `v² ≈ μ* ln k (1/m_a + 1/m_b)`,
/// the bound `vn_bound = 2 √(μ* ln(steps) (1/m_a + 1/m_b))` (twice the estimate) — the
/// interior point's version of "sticking together".
fn collide(state: Vec<BodyState>, masses: [f64; 2], steps: usize, tol: f64) -> Collision {
    let r = 0.2;
    let mut mech = Mechanism::new(vec![ball("a", masses[0], r), ball("b", masses[1], r)], Vector3::zeros()).unwrap();
    mech.add_body_contact("ab", (0, sphere(r)), (1, sphere(r)), 0.0).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap().with_newton(tol, 50).unwrap();
    let (p0, h0) = (vi.linear_momentum(&state), vi.angular_momentum(&state));
    let mut states = vec![state];
    let mut ws = vi.workspace();
    let (mut dp, mut dh, mut min_gap, mut mu) = (0.0_f64, 0.0_f64, f64::INFINITY, 0.0_f64);
    let (mut impact, mut vn, mut vn_step) = (None, f64::NAN, f64::NAN);
    for k in 0..steps {
        let mut next = states[k].clone();
        mu = mu.max(vi.step(&mut ws, k, &states[k], &[], None, &mut next).unwrap().barrier);
        dp = dp.max((vi.linear_momentum(&next) - p0).amax());
        dh = dh.max((vi.angular_momentum(&next) - h0).amax());
        let gap = body_gap(&vi, &next, 0);
        min_gap = min_gap.min(gap);
        if impact.is_none() && gap < 1e-6 {
            impact = Some(k);
        }
        if impact == Some(k.saturating_sub(1)) && k > 0 {
            let n = (next[0].pose.x - next[1].pose.x).normalize();
            let v_rel = next[0].v - next[1].v;
            vn = n.dot(&v_rel);
            let vt = (v_rel - n * vn).norm();
            vn_step = 1e-6 + vt * vt * vi.dt() / (2.0 * r);
        }
        states.push(next);
    }
    assert!(impact.is_some_and(|k| k + 1 < steps), "no impact");
    let vn_bound = 2.0 * (mu * (steps as f64).ln() * (1.0 / masses[0] + 1.0 / masses[1])).sqrt();
    let bound = momentum_bound(&vi, &states);
    Collision { dp, dh, bound, min_gap, vn, vn_step, vn_bound, end: states.pop().unwrap() }
}

#[test]
fn frictionless_sphere_collisions_conserve_momentum_and_end_plastic() {
    let still = UnitQuaternion::identity();
    // head on along x: masses 1 and 1.5, the plastic impact's common velocity is
    // (1·2 − 1.5·1)/2.5 = 0.2 m/s; the barrier's separation shrinks like √μ* with the
    // tolerance (μ* ∝ tolerance)
    let head_on = vec![
        BodyState { pose: Pose::new(Vector3::new(-0.6, 0.0, 0.0), still), v: Vector3::new(2.0, 0.0, 0.0), w: Vector3::zeros() },
        BodyState { pose: Pose::new(Vector3::new(0.3, 0.0, 0.0), still), v: Vector3::new(-1.0, 0.0, 0.0), w: Vector3::zeros() },
    ];
    for tol in [1e-12, 1e-14] {
        let Collision { dp, dh, bound, min_gap, vn, vn_step, vn_bound, end } = collide(head_on.clone(), [1.0, 1.5], 100, tol);
        println!(
            "head-on sphere–sphere, tolerance {tol:.0e}: |ΔP| {dp:.1e}, |ΔH| {dh:.1e} (bound {bound:.1e}), min gap {min_gap:.1e} m, relative normal velocity one step after the impact {vn:.1e} m/s (bound {vn_step:.1e}; the barrier's later separation bound {vn_bound:.1e}), final v = {:.6}, {:.6}",
            end[0].v.x,
            end[1].v.x
        );
        assert!(dp < bound && dh < bound, "momentum drift {dp:e}, {dh:e}");
        assert!(min_gap > -1e-9, "penetration {min_gap:e}");
        assert!(vn.abs() < vn_step, "relative normal velocity {vn:e}, bound {vn_step:e}");
        for s in &end {
            assert!((s.v - Vector3::new(0.2, 0.0, 0.0)).amax() < vn_bound, "velocity {:?}", s.v);
        }
    }
    // oblique, spinning, out of plane: a frictionless contact transmits no torque, so the
    // spins stay; the normal velocities equalise, then the spheres slide past each other
    let oblique = vec![
        BodyState {
            pose: Pose::new(Vector3::new(-0.6, 0.1, 0.05), UnitQuaternion::from_scaled_axis(Vector3::new(0.3, -0.2, 0.1))),
            v: Vector3::new(2.0, 0.3, -0.1),
            w: Vector3::new(1.0, -2.0, 0.5),
        },
        BodyState { pose: Pose::new(Vector3::new(0.3, -0.15, 0.0), still), v: Vector3::new(-1.0, 0.0, 0.2), w: Vector3::new(0.0, 0.0, 3.0) },
    ];
    let Collision { dp, dh, bound, min_gap, vn, vn_step, vn_bound, end } = collide(oblique.clone(), [1.0, 1.5], 100, 1e-12);
    println!("oblique sphere–sphere: |ΔP| {dp:.1e}, |ΔH| {dh:.1e} (bound {bound:.1e}), min gap {min_gap:.1e} m, relative normal velocity one step after the impact {vn:.1e} m/s (bound {vn_step:.1e}; the barrier's later separation bound {vn_bound:.1e})");
    assert!(dp < bound && dh < bound, "momentum drift {dp:e}, {dh:e}");
    assert!(min_gap > -1e-9, "penetration {min_gap:e}");
    assert!(vn.abs() < vn_step, "relative normal velocity {vn:e}, bound {vn_step:e}");
    for (s, s0) in end.iter().zip(&oblique) {
        assert!((s.w - s0.w).amax() < 1e-12, "a frictionless contact changed a spin: {:?} → {:?}", s0.w, s.w);
    }
}

#[test]
fn frictional_collision_conserves_momentum() {
    // with friction (both models) the forces still act at one point, equal and opposite, so
    // the momenta change only by what Newton leaves ([`momentum_bound`])
    for model in [FrictionModel::Pyramid, FrictionModel::Cone] {
        let r = 0.2;
        let mut mech = Mechanism::new(vec![ball("a", 1.0, r), ball("b", 1.5, r)], Vector3::zeros()).unwrap();
        mech.add_body_contact("ab", (0, sphere(r)), (1, sphere(r)), 0.5).unwrap();
        mech.set_body_contact_friction_model(0, model).unwrap();
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        let mut state = vec![
            BodyState {
                pose: Pose::new(Vector3::new(-0.6, 0.15, 0.05), UnitQuaternion::identity()),
                v: Vector3::new(2.0, 0.3, -0.1),
                w: Vector3::new(1.0, -2.0, 0.5),
            },
            BodyState {
                pose: Pose::new(Vector3::new(0.3, -0.1, 0.0), UnitQuaternion::identity()),
                v: Vector3::new(-1.0, 0.0, 0.2),
                w: Vector3::new(0.0, 0.0, 3.0),
            },
        ];
        let (p0, h0) = (vi.linear_momentum(&state), vi.angular_momentum(&state));
        let (mut ws, mut states) = (vi.workspace(), vec![state.clone()]);
        let (mut dp, mut dh, mut gap, mut spin_change) = (0.0_f64, 0.0_f64, f64::INFINITY, 0.0_f64);
        for k in 0..100 {
            let mut next = state.clone();
            vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
            spin_change = spin_change.max((next[0].w - state[0].w).amax());
            state.clone_from(&next);
            dp = dp.max((vi.linear_momentum(&state) - p0).amax());
            dh = dh.max((vi.angular_momentum(&state) - h0).amax());
            gap = gap.min(body_gap(&vi, &state, 0));
            states.push(next);
        }
        let bound = momentum_bound(&vi, &states);
        println!("{model:?} friction sphere–sphere: |ΔP| {dp:.1e}, |ΔH| {dh:.1e} (bound {bound:.1e}), min gap {gap:.1e} m, largest spin change per step {spin_change:.2} rad/s");
        assert!(dp < bound && dh < bound, "momentum drift {dp:e}, {dh:e}");
        assert!(gap > -1e-9, "penetration {gap:e}");
        assert!(spin_change > 0.1, "friction must torque the spheres");
    }
}

#[test]
fn ball_stack_comes_to_rest_with_the_weight_carried_down() {
    let (mech, mut state) = ball_stack(0.5);
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let (mut next, mut ws) = (state.clone(), vi.workspace());
    let mut gap = f64::INFINITY;
    for k in 0..200 {
        vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
        gap = gap.min(body_gap(&vi, &state, 0)).min(body_gap(&vi, &state, 1));
    }
    // contact order: ground (index 0), then the body contacts ball1–ball0 (1), ball2–ball1 (2)
    let mg = 9.81;
    let forces = [ws.ct.y[0][0], ws.ct.y[1][0], ws.ct.y[2][0]];
    let speed = state.iter().map(|s| s.v.norm().max(s.w.norm())).fold(0.0, f64::max);
    println!("ball stack: normal forces (ground, 1 on 0, 2 on 1) = {forces:.9?} N (weights 3mg, 2mg, mg = {:.4}, {:.4}, {:.4}), min gap {gap:.1e} m, max speed {speed:.1e}", 3.0 * mg, 2.0 * mg, mg);
    for (f, w) in forces.iter().zip([3.0 * mg, 2.0 * mg, mg]) {
        assert!((f - w).abs() < 1e-6 * w, "normal force {f} vs {w}");
    }
    assert!(gap > -1e-9 && speed < 1e-8, "gap {gap:e}, speed {speed:e}");
    for (k, s) in state.iter().enumerate() {
        assert!(s.pose.x.xy().norm() < 1e-12, "ball {k} left the axis: {:?}", s.pose.x);
    }
}

#[test]
fn graph_solve_with_a_sticking_body_contact_matches_dense_lu() {
    // A rod spun about its axis by friction ends the step sticking: the contact's pivot holds
    // slacks of 1e-10. Eliminated before its bodies (as plane contacts are) its Schur
    // complements cancel catastrophically (the graph solve then differed from a dense LU by 4×
    // the solution); eliminated after them, as a loop closure, the pivot is the well-scaled
    // Delassus-like complement and the solves agree to round-off.
    let rod = |name: &str| Body { name: name.into(), mass: 0.8, inertia: Matrix3::from_diagonal(&Vector3::new(0.004, 0.07, 0.07)) };
    let cap = Shape::Capsule { a: Vector3::new(-0.4, 0.0, 0.0), b: Vector3::new(0.4, 0.0, 0.0), radius: 0.1 };
    let mut mech = Mechanism::new(vec![rod("upper"), rod("lower")], Vector3::zeros()).unwrap();
    mech.add_body_contact("rods", (0, cap), (1, cap), 0.4).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let lower = Pose::new(Vector3::zeros(), UnitQuaternion::from_scaled_axis(Vector3::new(0.05, -0.1, 0.0)));
    let q_up = lower.q * UnitQuaternion::from_scaled_axis(Vector3::new(0.0, 0.0, 1.1));
    let n = lower.q * Vector3::z();
    let upper = Pose::new(lower.point(&Vector3::new(0.1, 0.0, 0.0)) + n * 0.2 - q_up * Vector3::new(0.15, 0.0, 0.0), q_up);
    let state = [
        BodyState { pose: upper, v: -n * 0.5 + Vector3::new(0.3, 0.2, 0.0), w: Vector3::new(0.4, -0.3, 0.5) },
        BodyState { pose: lower, v: Vector3::new(-0.1, 0.1, 0.2), w: Vector3::new(0.1, 0.3, -0.2) },
    ];
    let (mut ws, mut next) = (vi.workspace(), state.to_vec());
    vi.step(&mut ws, 0, &state, &[], None, &mut next).unwrap();
    let slack = ws.ct.s[0].min(ws.ct.eta[0].min()).min(ws.ct.sigma[0]);
    vi.assemble(&mut ws);
    vi.assemble_contacts(&mut ws);
    let f = ws.solver.to_dense();
    let o = ws.solver.offsets();
    let mut worst = 0.0_f64;
    for col in 0..o[o.len() - 1] {
        let mut bd = nalgebra::DVector::zeros(o[o.len() - 1]);
        bd[col] = 1.0;
        let expected = f.clone().lu().solve(&bd).unwrap();
        let mut b = vec![nalgebra::Vector6::zeros(); ws.solver.len()];
        let k = (0..ws.solver.len()).rfind(|&k| o[k] <= col).unwrap();
        b[k][col - o[k]] = 1.0;
        let mut solver = ws.solver.clone();
        solver.factorize().unwrap();
        solver.solve(&mut b);
        for k in 0..ws.solver.len() {
            for i in 0..ws.solver.dim(k) {
                worst = worst.max((b[k][i] - expected[o[k] + i]).abs() / expected.amax());
            }
        }
    }
    let sv = f.singular_values();
    let cond = sv.max() / sv.min();
    println!("sticking rod contact (smallest slack {slack:.1e}): graph vs dense LU, every unit right-hand side: {worst:.1e} relative (cond {cond:.1e})");
    assert!(slack < 1e-8, "the contact must stick (μ-small slacks): {slack:e}");
    // both backward stable: they may differ by ~cond·ε
    assert!(worst < cond * 4.0 * f64::EPSILON, "{worst:e}");
}

#[test]
fn ball_rests_on_a_fixed_box() {
    // a ball dropped on the top face of a box welded to the world comes to rest on it,
    // carrying its weight
    let (r, h) = (0.1, Vector3::new(0.3, 0.2, 0.1));
    let slab = Body { name: "slab".into(), mass: 5.0, inertia: Matrix3::identity() * 0.1 };
    let mut mech = Mechanism::new(vec![slab, ball("ball", 0.3, r)], Vector3::new(0.0, 0.0, -9.81)).unwrap();
    mech.add_joint("weld", JointKind::Fixed, None, vidyn_spatial::Se3::identity(), 0, vidyn_spatial::Se3::identity()).unwrap();
    let bx = Shape::Box { centre: Vector3::zeros(), rotation: Matrix3::identity(), half_extents: h };
    mech.add_body_contact("ball-slab", (1, sphere(r)), (0, bx), 0.5).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let mut state = vec![
        BodyState::default(),
        BodyState { pose: Pose::new(Vector3::new(0.1, -0.05, 0.4), UnitQuaternion::identity()), v: Vector3::zeros(), w: Vector3::zeros() },
    ];
    let (mut next, mut ws) = (state.clone(), vi.workspace());
    let mut gap = f64::INFINITY;
    for k in 0..150 {
        vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
        gap = gap.min(body_gap(&vi, &state, 0));
    }
    let (z, force) = (state[1].pose.x.z, ws.ct.y[0][0]);
    println!("ball on a box: rest height {z:.9} m (face + r = {}), normal force {force:.9} N (mg = {:.9}), min gap {gap:.1e} m", h.z + r, 0.3 * 9.81);
    assert!(gap > -1e-9 && (z - h.z - r).abs() < 1e-6, "gap {gap:e}, height {z}");
    assert!((force - 0.3 * 9.81).abs() < 1e-6 * 0.3 * 9.81 && state[1].v.norm() < 1e-8);
}
