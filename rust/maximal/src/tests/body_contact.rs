//! Contacts between bodies ([`crate::body_contact`]): momentum exchange in sphere–sphere
//! collisions, a ball stack's forces, and the linearisation with body–body contacts.

use super::check_ip_linearization_at;
use crate::body::Pose;
use crate::*;
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use std::sync::Arc;

fn ball(name: &str, mass: f64, r: f64) -> Body {
    Body { name: name.into(), mass, inertia: Matrix3::identity() * (0.4 * mass * r * r) }
}

fn sphere(r: f64) -> Shape {
    Shape::Sphere { centre: Vector3::zeros(), radius: r }
}

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

/// Three 1 kg spheres (r = 0.25 m) stacked on the ground, each on the one below.
fn ball_stack(friction: f64) -> (Mechanism, Vec<BodyState>) {
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
fn body_contacts_are_eliminated_as_loop_closures() {
    // the stack: the free balls are separate trees, so each body contact is eliminated last,
    // after its balls; eliminating the middle ball joins its two contacts (one fill block)
    let (mech, _) = ball_stack(0.5);
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    assert_eq!(vi.fill_edges(), 1);
    // a contact between the ends of a 4-sphere chain closes the loop b0–j1–b1–j2–b2–j3–b3: it is
    // placed before their common ancestor b0 and fills in towards every node on the way (5)
    let (mut mech, _) = crate::models::sphere_chain(4);
    mech.add_body_contact("ends", (0, sphere(0.25)), (3, sphere(0.25)), 0.3).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    assert_eq!(vi.fill_edges(), 5);
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
fn linearization_with_body_contacts_matches_central_differences() {
    // two free balls (no gravity) touching along a tilted normal, pressed together and sliding
    // and spinning about every axis so every friction row is active; the differenced steps
    // solve the system relaxed at the base step's barrier μ* (what `linearize`
    // differentiates). The default tolerance 1e-12 gives ε_IP ≈ 1e-10 and h = 1e-4 (noise
    // ~ε_IP/h ≈ 1e-6; measured 2.5e-7, 4e-7 at h = 1e-5, 3e-6 at h = 1e-6 where the noise
    // dominates). A tighter tolerance lowers μ* (its floor is ∝ tolerance), which stiffens the
    // relaxed system (the gap μ*/γ shrinks below h) so that truncation takes over: 1e-13 fails
    // the helper's 1e-5 at every h tried. Checked to 1e-5 relative by the helper.
    for model in [FrictionModel::Frictionless, FrictionModel::Pyramid, FrictionModel::Cone] {
        let r = 0.25;
        let mut mech = Mechanism::new(vec![ball("lower", 1.0, r), ball("upper", 0.7, r)], Vector3::zeros()).unwrap();
        let friction = if model == FrictionModel::Frictionless { 0.0 } else { 0.3 };
        mech.add_body_contact("upper-lower", (1, sphere(r)), (0, sphere(r)), friction).unwrap();
        mech.set_body_contact_friction_model(0, model).unwrap();
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap().with_newton(1e-12, 50).unwrap();
        let lower = Vector3::new(0.0, 0.0, r);
        let upper = lower + Vector3::new(0.3_f64.sin(), 0.1, 0.3_f64.cos()).normalize() * (2.0 * r);
        let state = [
            BodyState {
                pose: Pose::new(lower, UnitQuaternion::from_scaled_axis(Vector3::new(0.1, 0.2, -0.3))),
                v: Vector3::new(-0.3, 0.2, 0.4),
                w: Vector3::new(0.2, -0.4, 0.3),
            },
            BodyState {
                pose: Pose::new(upper, UnitQuaternion::from_scaled_axis(Vector3::new(-0.2, 0.1, 0.4))),
                v: Vector3::new(0.6, -0.4, -0.5),
                w: Vector3::new(0.5, 0.3, -0.6),
            },
        ];
        let (e, _) = check_ip_linearization_at(&vi, &state, &[], 1e-4, true);
        println!("{model:?}: linearisation with a ball–ball contact vs central differences of the relaxed system: A relative error {e:.1e}");
    }
}

#[test]
fn linearization_with_capsule_contacts_matches_central_differences() {
    // a capsule pressed onto a crossing capsule (closest points inside both segments) and a
    // ball pressed onto the second capsule's side, sliding and spinning, no gravity: the
    // contact frame moves with the closest points' parameters ([`crate::geometry::proximity_jacobian`]).
    // Default tolerance and h = 1e-4 as for the balls above (noise ~ε_IP/h ≈ 1e-6); checked to
    // 1e-5 relative by the helper
    let rod = |name: &str| Body { name: name.into(), mass: 0.8, inertia: Matrix3::from_diagonal(&Vector3::new(0.004, 0.07, 0.07)) };
    let cap = Shape::Capsule { a: Vector3::new(-0.4, 0.0, 0.0), b: Vector3::new(0.4, 0.0, 0.0), radius: 0.1 };
    for model in [FrictionModel::Frictionless, FrictionModel::Pyramid, FrictionModel::Cone] {
        let friction = if model == FrictionModel::Frictionless { 0.0 } else { 0.4 };
        let mut mech = Mechanism::new(vec![rod("upper"), rod("lower"), ball("ball", 0.5, 0.15)], Vector3::zeros()).unwrap();
        mech.add_body_contact("rods", (0, cap), (1, cap), friction).unwrap();
        mech.add_body_contact("ball-rod", (2, sphere(0.15)), (1, cap), friction).unwrap();
        for c in 0..2 {
            mech.set_body_contact_friction_model(c, model).unwrap();
        }
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        // the lower rod along its x at the origin, the upper one crossing it at 1.1 rad in the
        // plane normal to n (the lower rod's z), touching 0.1 m from its centre; the ball touching
        // the lower rod's side near its end
        let lower = Pose::new(Vector3::zeros(), UnitQuaternion::from_scaled_axis(Vector3::new(0.05, -0.1, 0.0)));
        let q_up = lower.q * UnitQuaternion::from_scaled_axis(Vector3::new(0.0, 0.0, 1.1));
        let p = lower.point(&Vector3::new(0.1, 0.0, 0.0));
        let n = (lower.q * Vector3::z()).normalize();
        let upper = Pose::new(p + n * 0.2 - q_up * Vector3::new(0.15, 0.0, 0.0), q_up);
        let side = (lower.q * Vector3::new(0.0, -1.0, 0.3)).normalize();
        let ball_at = Pose::new(lower.point(&Vector3::new(-0.3, 0.0, 0.0)) + side * 0.25, UnitQuaternion::identity());
        let state = [
            BodyState { pose: upper, v: -n * 0.5 + Vector3::new(0.3, 0.2, 0.0), w: Vector3::new(0.4, -0.3, 0.5) },
            BodyState { pose: lower, v: Vector3::new(-0.1, 0.1, 0.2), w: Vector3::new(0.1, 0.3, -0.2) },
            BodyState { pose: ball_at, v: -side * 0.4 + Vector3::new(1.0, 0.0, 0.1), w: Vector3::new(1.0, -0.5, 0.3) },
        ];
        let poses: Vec<Pose> = state.iter().map(|s| s.pose).collect();
        for k in 0..2 {
            assert!(vi.mechanism().body_contacts[k].frame(&poses).prox.distance.abs() < 1e-12, "contact {k} must start touching");
        }
        let (e, _) = check_ip_linearization_at(&vi, &state, &[], 1e-4, true);
        println!(
            "{model:?}: linearisation with capsule–capsule and sphere–capsule contacts vs central differences of the relaxed system: A relative error {e:.1e}"
        );
    }
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

#[test]
fn linearization_with_sphere_box_contacts_matches_central_differences() {
    // a free box (no gravity) with one ball pressed onto a face and one onto an edge (two
    // clamped coordinates), sliding fast and spinning; the contact frame's derivatives of
    // [`crate::geometry::proximity_jacobian`] for sphere–box. Default tolerance; h = 1e-6. With
    // h = 1e-5 and 1e-4 the pyramid's differences disagree by 3e-2 and 3e-3 — not monotonic in
    // h, so not truncation: the relaxed system has a kink or a transition of width ~μ* within
    // 1e-5 of this state (the frictionless model agrees to 1e-8 there, and the cone's relaxed
    // steps stall at h = 1e-4) — while at 1e-6 all three models agree to 6e-8 (the steps here
    // converge well below the tolerance, so the noise ε_IP/h stays below that). Checked to
    // 1e-5 relative by the helper
    let h = Vector3::new(0.3, 0.2, 0.1);
    let slab = Body { name: "slab".into(), mass: 2.0, inertia: Matrix3::from_diagonal(&Vector3::new(0.03, 0.06, 0.08)) };
    let bx = Shape::Box { centre: Vector3::new(0.02, 0.0, 0.0), rotation: Matrix3::identity(), half_extents: h };
    for model in [FrictionModel::Frictionless, FrictionModel::Pyramid, FrictionModel::Cone] {
        let friction = if model == FrictionModel::Frictionless { 0.0 } else { 0.5 };
        let mut mech = Mechanism::new(vec![slab.clone(), ball("face", 0.3, 0.1), ball("edge", 0.3, 0.1)], Vector3::zeros()).unwrap();
        mech.add_body_contact("face", (1, sphere(0.1)), (0, bx), friction).unwrap();
        mech.add_body_contact("edge", (0, bx), (2, sphere(0.1)), friction).unwrap();
        for c in 0..2 {
            mech.set_body_contact_friction_model(c, model).unwrap();
        }
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        let slab_pose = Pose::new(Vector3::zeros(), UnitQuaternion::from_scaled_axis(Vector3::new(0.1, -0.2, 0.3)));
        let world = |p: Vector3<f64>| slab_pose.point(&(p + Vector3::new(0.02, 0.0, 0.0)));
        let face = world(Vector3::new(0.1, -0.05, h.z + 0.1));
        let edge_dir = Vector3::new(1.0, 0.0, 1.0).normalize();
        let edge = world(Vector3::new(h.x, 0.05, h.z) + edge_dir * 0.1);
        let state = [
            BodyState { pose: slab_pose, v: Vector3::new(0.1, -0.2, 0.1), w: Vector3::new(0.3, 0.2, -0.4) },
            BodyState { pose: Pose::new(face, UnitQuaternion::identity()), v: slab_pose.q * Vector3::new(2.0, 1.0, -0.6), w: Vector3::new(1.0, -0.5, 0.3) },
            BodyState { pose: Pose::new(edge, UnitQuaternion::identity()), v: slab_pose.q * Vector3::new(-0.5, 2.0, -0.5), w: Vector3::new(-0.4, 0.2, 0.8) },
        ];
        let poses: Vec<Pose> = state.iter().map(|s| s.pose).collect();
        for k in 0..2 {
            assert!(vi.mechanism().body_contacts[k].distance(&poses).abs() < 1e-12, "contact {k} must start touching");
        }
        let (e, _) = check_ip_linearization_at(&vi, &state, &[], 1e-6, true);
        println!("{model:?}: linearisation with sphere–box contacts (face, edge) vs central differences of the relaxed system: A relative error {e:.1e}");
    }
}
