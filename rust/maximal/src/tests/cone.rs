//! The isotropic friction cone ([`crate::friction_cone`]): Coulomb's sliding distance in every
//! direction, sticking below the friction limit, no penetration, and the exact linearisation.

use super::{box_on_ground, check_dropped_box_comes_to_rest, check_ip_linearization_at, gap};
use crate::body::Pose;
use crate::*;
use nalgebra::{UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_spatial::Force;

/// The 8-corner box of [`box_on_ground`] with every contact on `model`.
fn box_with(friction: f64, model: FrictionModel) -> Mechanism {
    let mut mech = box_on_ground(friction);
    for c in 0..mech.contacts.len() {
        mech.set_friction_model(c, model).unwrap();
    }
    mech
}

/// Slides the box from `v0` along the horizontal `heading` (rad from x) until rest; returns the
/// displacement, the final speed and the smallest gap.
fn slide(model: FrictionModel, cf: f64, v0: f64, heading: f64, dt: f64, steps: usize) -> (Vector3<f64>, f64, f64) {
    let vi = MaximalIntegrator::new(Arc::new(box_with(cf, model)), dt).unwrap();
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25), UnitQuaternion::identity());
    let v = Vector3::new(heading.cos(), heading.sin(), 0.0) * v0;
    let mut state = vec![BodyState { pose, v, w: Vector3::zeros() }];
    let (mut ws, mut next) = (vi.workspace(), state.clone());
    let mut min_gap = f64::INFINITY;
    for k in 0..steps {
        if let Err(e) = vi.step(&mut ws, k, &state, &[], None, &mut next) {
            panic!("{model:?} at {heading} rad: step {k} from {:?}: {e}", state[0]);
        }
        std::mem::swap(&mut state, &mut next);
        min_gap = min_gap.min(gap(&vi, &state));
    }
    (state[0].pose.x - pose.x, state[0].v.norm(), min_gap)
}

#[test]
fn cone_slides_coulombs_distance_in_every_direction() {
    // Coulomb: deceleration c_f g in the direction of motion, distance v₀²/(2 c_f g)
    let (cf, v0, g, dt) = (0.3, 1.0, 9.81, 0.001);
    let expected = v0 * v0 / (2.0 * cf * g);
    let mut distances = Vec::new();
    for deg in [0.0_f64, 45.0, 30.0, 90.0] {
        let heading = deg.to_radians();
        let (d, speed, min_gap) = slide(FrictionModel::Cone, cf, v0, heading, dt, 600);
        let along = d.x * heading.cos() + d.y * heading.sin();
        let across = -d.x * heading.sin() + d.y * heading.cos();
        println!("cone, heading {deg}°: distance {along:.5} m (Coulomb {expected:.5} m), sideways {across:.1e} m, |v| {speed:.1e}, min gap {min_gap:.1e}");
        assert!(speed < 1e-6, "{deg}°: still moving at {speed}");
        // O(Δt) discretisation: one step of travel (v₀Δt = 1e-3 m) is the scale of the error
        assert!((along - expected).abs() < 2e-3, "{deg}°: distance {along} vs Coulomb {expected}");
        // the barrier bends the friction force off −v by O(μ): solver-tolerance drift only
        assert!(across.abs() < 1e-7, "{deg}°: the box drifts sideways by {across}");
        assert!(min_gap > -1e-9, "{deg}°: penetration {min_gap}");
        distances.push(along);
    }
    // isotropy: the headings agree to the solver's accuracy, far below the discretisation error
    println!("cone distances at 0°, 45°, 30°, 90°: {distances:.9?}");
    let spread = distances.iter().copied().fold(f64::NEG_INFINITY, f64::max) - distances.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(spread < 1e-6, "the cone is not isotropic: distances {distances:?}");
    // negative control: the pyramid at 45° is √2 too strong ... and slides √2 too far
    let (d, _, _) = slide(FrictionModel::Pyramid, cf, v0, 45f64.to_radians(), dt, 600);
    println!("pyramid, heading 45°: distance {:.5} m", d.norm());
    assert!(d.norm() > 1.3 * expected, "the pyramid should slide farther at 45°: {}", d.norm());
}

/// The box at rest pushed horizontally at its centre by `force` along `heading` for `steps`
/// steps of 0.01 s; returns the final velocity.
fn push(cf: f64, force: f64, heading: f64, steps: usize) -> Vector3<f64> {
    let vi = MaximalIntegrator::new(Arc::new(box_with(cf, FrictionModel::Cone)), 0.01).unwrap();
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25), UnitQuaternion::identity());
    let mut state = vec![BodyState { pose, v: Vector3::zeros(), w: Vector3::zeros() }];
    let (mut ws, mut next) = (vi.workspace(), state.clone());
    let fext = [Force { linear: Vector3::new(heading.cos(), heading.sin(), 0.0) * force, angular: Vector3::zeros() }];
    for k in 0..steps {
        vi.step(&mut ws, k, &state, &[], Some(&fext), &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
    }
    state[0].v
}

#[test]
fn cone_sticks_below_the_friction_limit_and_slides_above_it() {
    // limit c_f m g = 0.5 · 9.81 = 4.905 N in every direction; 1 kg box
    let (cf, g) = (0.5, 9.81);
    for deg in [0.0_f64, 45.0] {
        let heading = deg.to_radians();
        let v = push(cf, 0.9 * cf * g, heading, 100);
        println!("cone, 0.9 × limit at {deg}°: |v| after 1 s {:.1e} m/s", v.norm());
        // the interior point leaves a friction force μ-close to, not exactly at, the pushing
        // force: the creep is what its barrier allows, far below the 0.49 m/s of no friction
        assert!(v.norm() < 1e-6, "{deg}°: the box creeps at {}", v.norm());
        let f = 1.2 * cf * g;
        let v = push(cf, f, heading, 100);
        let expected = (f - cf * g) * 1.0; // (F − c_f m g)/m · 1 s
        println!("cone, 1.2 × limit at {deg}°: speed after 1 s {:.5} (expected {expected:.5})", v.norm());
        assert!((v.norm() - expected).abs() < 1e-6 * expected.max(1.0) + 1e-6, "{deg}°: speed {} vs {expected}", v.norm());
        assert!((v.y * heading.cos() - v.x * heading.sin()).abs() < 1e-9, "{deg}°: sideways velocity");
    }
}

#[test]
fn cone_needs_a_positive_friction_coefficient() {
    let mut mech = box_on_ground(0.0);
    let err = mech.set_friction_model(0, FrictionModel::Cone).unwrap_err().to_string();
    assert!(err.contains("corner0") && err.contains("friction > 0") && err.contains("'cone'"), "{err}");
    assert!(mech.set_friction_model(8, FrictionModel::Cone).unwrap_err().to_string().contains("contact = 8"));
    assert_eq!(FrictionModel::from_name("cone"), Some(FrictionModel::Cone));
    assert_eq!(FrictionModel::from_name("cones"), None);
    let vi = MaximalIntegrator::new(Arc::new(box_with(0.4, FrictionModel::Cone)), 0.01).unwrap();
    assert_eq!(vi.workspace().solver.dim(vi.contact_node(0)), 4);
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
fn dropped_box_comes_to_rest_on_the_cone_without_penetration() {
    // the pyramid's drop (super) with every corner on the cone
    check_dropped_box_comes_to_rest(&MaximalIntegrator::new(Arc::new(box_with(0.5, FrictionModel::Cone)), 0.01).unwrap(), "box on the cone");
}

#[test]
fn singular_contact_and_limit_pivots_are_named() {
    // a contact's pivot in a mechanism without joints (it used to index the joints: a panic)
    let vi = MaximalIntegrator::new(Arc::new(box_with(0.3, FrictionModel::Cone)), 0.01).unwrap();
    let err = vi.singular_pivot(vi.contact_node(2), 7).to_string();
    assert!(err.contains("contact 'corner2'") && err.contains("step 7"), "{err}");
    let mut mech = Mechanism::from_model(Arc::new(crate::models::cylinder_chain(2, true))).unwrap();
    mech.add_joint_limit(1, -0.2, 0.2).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let err = vi.singular_pivot(vi.limit_node(0), 0).to_string();
    assert!(err.contains("limit of joint 'joint2'"), "{err}");
}
