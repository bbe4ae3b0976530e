//! The linearisation where the step runs the interior point — plane contacts (pyramid and
//! cone), joint limits, contacts between bodies (spheres, capsules, boxes) — against central
//! differences of the solved step or of the system relaxed at the step's final barrier
//! (`step_relaxed`, a test hook of the integrator).

use crate::body::Pose;
use crate::models::cylinder_chain;
use crate::test_common::body_contact::{ball, sphere};
use crate::test_common::contact::{box_on_ground, box_with};
use crate::test_common::integrator::initial_state;
use crate::*;
use nalgebra::{DMatrix, DVector, Matrix3, UnitQuaternion, Vector3};
use std::sync::Arc;

/// Central differences (step `h`) of the solved interior-point step against `linearize` for a
/// body state `state` (no controls). The relaxed system is differentiated at the final barrier
/// `μ`, while each differenced step ends at its own `μ` and residual (≤ `ε_IP`): the
/// difference carries ~`ε_IP / h` of noise besides the `h²` truncation; tolerance 1e-5
/// relative to max(1, |column|), with `h` chosen per case below. Returns the largest relative
/// error.
fn check_ip_linearization(vi: &MaximalIntegrator, state: &[BodyState], h: f64) -> f64 {
    check_ip_linearization_at(vi, state, &[], h, false).0
}

/// [`check_ip_linearization`] under controls `u` (columns of `B` too), and with `relaxed` the
/// differenced steps solve the system relaxed at the base step's final `μ` (what `linearize`
/// differentiates), so only `ε_IP / h` and `h²` separate them. Returns the largest relative
/// errors of `A` and `B`.
fn check_ip_linearization_at(vi: &MaximalIntegrator, state: &[BodyState], u: &[f64], h: f64, relaxed: bool) -> (f64, f64) {
    let (nb, nu) = (state.len(), vi.mechanism().nu);
    let u = if u.is_empty() { vec![0.0; nu] } else { u.to_vec() };
    let u = u.as_slice();
    let mut ws = vi.workspace();
    let mut next = state.to_vec();
    let (mut a, mut b) = (DMatrix::zeros(12 * nb, 12 * nb), DMatrix::zeros(12 * nb, nu));
    let mu = vi.linearize(&mut ws, 0, state, u, &mut next, &mut a, &mut b).unwrap().barrier;
    let base = next.clone();
    let mut worst = (0.0_f64, 0.0_f64);
    let solve = |s: &[BodyState], u: &[f64]| {
        let mut out = s.to_vec();
        if relaxed {
            vi.step_relaxed(&mut vi.workspace(), s, u, mu, &mut out).unwrap();
        } else {
            vi.step(&mut vi.workspace(), 0, s, u, None, &mut out).unwrap();
        }
        out
    };
    for c in 0..12 * nb + nu {
        let (mut sp, mut sm) = (state.to_vec(), state.to_vec());
        let (mut up, mut um) = (u.to_vec(), u.to_vec());
        let (i, k) = (c / 12, c % 12);
        let e = |j: usize, s: f64| Vector3::ith(j, s * h);
        match k {
            _ if c >= 12 * nb => {
                up[c - 12 * nb] += h;
                um[c - 12 * nb] -= h;
            }
            0..=2 => {
                sp[i].pose = sp[i].pose.retract(&e(k, 1.0), &Vector3::zeros());
                sm[i].pose = sm[i].pose.retract(&e(k, -1.0), &Vector3::zeros());
            }
            3..=5 => {
                sp[i].pose = sp[i].pose.retract(&Vector3::zeros(), &e(k - 3, 1.0));
                sm[i].pose = sm[i].pose.retract(&Vector3::zeros(), &e(k - 3, -1.0));
            }
            6..=8 => {
                sp[i].v += e(k - 6, 1.0);
                sm[i].v -= e(k - 6, 1.0);
            }
            _ => {
                sp[i].w += e(k - 9, 1.0);
                sm[i].w -= e(k - 9, 1.0);
            }
        }
        let (p, m) = (solve(&sp, &up), solve(&sm, &um));
        let mut fd = DVector::zeros(12 * nb);
        for j in 0..nb {
            let dx = (p[j].pose.x - m[j].pose.x) / (2.0 * h);
            let dth = (body::rotation_difference(&base[j].pose.q, &p[j].pose.q) - body::rotation_difference(&base[j].pose.q, &m[j].pose.q)) / (2.0 * h);
            let (dv, dw) = ((p[j].v - m[j].v) / (2.0 * h), (p[j].w - m[j].w) / (2.0 * h));
            for r in 0..3 {
                fd[12 * j + r] = dx[r];
                fd[12 * j + 3 + r] = dth[r];
                fd[12 * j + 6 + r] = dv[r];
                fd[12 * j + 9 + r] = dw[r];
            }
        }
        let col = if c < 12 * nb { a.column(c) } else { b.column(c - 12 * nb) };
        let err = (&fd - col).amax();
        assert!(err < 1e-5 * fd.amax().max(1.0), "column {c}: error {err:e}\nfd {}\nan {}", fd.transpose(), col.transpose());
        let rel = err / fd.amax().max(1.0);
        if c < 12 * nb {
            worst.0 = worst.0.max(rel);
        } else {
            worst.1 = worst.1.max(rel);
        }
    }
    worst
}

#[test]
fn linearization_with_contacts_matches_central_differences() {
    // a box on four corners, sliding and turning (the contacts fix the normal motion)
    let vi = MaximalIntegrator::new(Arc::new(box_on_ground(0.3)), 0.01).unwrap().with_newton(1e-15, 50).unwrap();
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25), UnitQuaternion::identity());
    check_ip_linearization(&vi, &[BodyState { pose, v: Vector3::new(0.8, 0.3, 0.0), w: Vector3::new(0.0, 0.0, 0.4) }], 1e-6);
    // a tilted box hitting the ground on one corner while sliding: the friction force follows
    // c_f γ, so δv_x = c_f |δv_z| for a vertical shift (checked exactly below); this one
    // converges to 1e-10 only (tolerance 1e-12): h = 1e-4, noise ~1e-6
    let vi = MaximalIntegrator::new(Arc::new(box_on_ground(0.3)), 0.01).unwrap();
    let q = UnitQuaternion::from_scaled_axis(Vector3::new(0.3, 0.2, 0.1));
    let lowest = vi.mechanism().contacts.iter().map(|c| (q * c.point).z).fold(f64::INFINITY, f64::min);
    let state = [BodyState { pose: Pose::new(Vector3::new(0.0, 0.0, -lowest), q), v: Vector3::new(0.6, -0.2, -0.5), w: Vector3::new(0.3, -0.2, 0.1) }];
    check_ip_linearization(&vi, &state, 1e-4);
    let mut next = state.to_vec();
    let (mut a, mut b) = (DMatrix::zeros(12, 12), DMatrix::zeros(12, 0));
    vi.linearize(&mut vi.workspace(), 0, &state, &[], &mut next, &mut a, &mut b).unwrap();
    assert!((a[(6, 2)] + 0.3 * a[(8, 2)]).abs() < 1e-6 * a[(8, 2)].abs(), "δv_x = {}, δv_z = {}", a[(6, 2)], a[(8, 2)]);
    // Not checked here: the rotation derivative of the friction rows, which only moves ψ while
    // sliding; a sticking corner (c_f = 2) agreed to 4.5e-5 only, where the interior point
    // stops at 1e-10 and the differences (h = 1e-4) cannot resolve better.
}

#[test]
fn linearization_with_joint_limits_matches_central_differences() {
    // a pendulum pressed against its upper limit. (The derivative of the limit's wrench
    // direction only changes multipliers while the limit is engaged — the two bodies then move
    // as one — so this check cannot see that term; the limit rows themselves it does check.)
    let mut mech = Mechanism::from_model(Arc::new(cylinder_chain(2, true))).unwrap();
    mech.add_joint_limit(0, -0.3, 0.5).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap().with_newton(1e-15, 50).unwrap();
    let state = initial_state(&vi, &[0.5, -0.2], &[1.0, 0.3]);
    check_ip_linearization(&vi, &state, 1e-6);
}

#[test]
fn linearization_with_cone_contacts_matches_central_differences_of_the_relaxed_system() {
    // `linearize` differentiates the system relaxed at the step's final barrier μ*; here the
    // differenced steps solve that same relaxed system (barrier held at μ*), so only the
    // interior point's residual ε_IP (noise ~ε_IP/h) and the h² truncation separate them;
    // tolerance 1e-5 relative to max(1, |column|) (the helper)
    // (1) a ball (one contact, r = 0.25 m) sliding diagonally and spinning about every axis:
    // ε_IP ≈ 1e-13 at tolerance 1e-15, so h = 1e-6 (noise ~1e-7, truncation ~1e-12)
    let ball = crate::Body { name: "ball".into(), mass: 1.0, inertia: nalgebra::Matrix3::identity() * 0.025 };
    let mut mech = Mechanism::new(vec![ball], Vector3::new(0.0, 0.0, -9.81)).unwrap();
    mech.add_contact("ground", 0, Sphere { centre: Vector3::zeros(), radius: 0.25 }, Plane::ground(), 0.3).unwrap();
    mech.set_friction_model(0, FrictionModel::Cone).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap().with_newton(1e-15, 50).unwrap();
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25), UnitQuaternion::identity());
    let (e1, _) = check_ip_linearization_at(&vi, &[BodyState { pose, v: Vector3::new(0.6, 0.5, 0.0), w: Vector3::new(0.3, 0.1, 0.4) }], &[], 1e-6, true);
    // (2) a box on four corners sliding diagonally (statically indeterminate normal forces,
    // their split set by the barrier alone): tolerance 1e-15 reaches ε_IP ≈ 1e-13 without
    // rotation, so h = 1e-6. (Turning as well, Newton on x ∘ z = μe stalls near 1e-11 there,
    // see crate::friction_cone, and differences at the default tolerance need h ≈ 1e-4, where
    // the normal force, ∝ h/Δt², is no longer linear: not checked.)
    let vi = MaximalIntegrator::new(Arc::new(box_with(0.3, FrictionModel::Cone)), 0.01).unwrap().with_newton(1e-15, 50).unwrap();
    let (e2, _) = check_ip_linearization_at(&vi, &[BodyState { pose, v: Vector3::new(0.6, 0.5, 0.0), w: Vector3::zeros() }], &[], 1e-6, true);
    // (3) the box tilted, hitting the ground on one corner while sliding and turning: default
    // tolerance (ε_IP ≈ 1e-10), h = 1e-4 (noise ~1e-6; one corner's force is linear enough)
    let vi = MaximalIntegrator::new(Arc::new(box_with(0.3, FrictionModel::Cone)), 0.01).unwrap();
    let q = UnitQuaternion::from_scaled_axis(Vector3::new(0.3, 0.2, 0.1));
    let lowest = vi.mechanism().contacts.iter().map(|c| (q * c.point).z).fold(f64::INFINITY, f64::min);
    let tilted = [BodyState { pose: Pose::new(Vector3::new(0.0, 0.0, -lowest), q), v: Vector3::new(0.6, -0.2, -0.5), w: Vector3::new(0.3, -0.2, 0.1) }];
    let (e3, _) = check_ip_linearization_at(&vi, &tilted, &[], 1e-4, true);
    println!("cone linearisation vs central differences of the relaxed system (relative): ball A {e1:.1e}, box on four corners A {e2:.1e}, box on one corner A {e3:.1e}");
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
