//! A step of the maximal-coordinate integrator allocates nothing once the workspace exists
//! (counting global allocator shared with `rust/rbd/tests/no_alloc.rs`, per thread).

use std::sync::Arc;
use vidyn_maximal::models::{cylinder_chain, four_bar_chain};
use vidyn_maximal::{BodyState, MaximalIntegrator, Mechanism};

#[path = "../../rbd/tests/common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{allocations, CountingAlloc};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn steps_do_not_allocate() {
    let chain = Arc::new(cylinder_chain(6, false));
    let mut m1 = Mechanism::from_model(chain).unwrap();
    m1.damping = vec![0.1; 6];
    m1.stiffness = vec![0.5; 6];
    let cases = [(m1, vec![0.3; 6]), four_bar_chain(3)];
    for (mech, q0) in cases {
        let n = q0.len();
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        let mut state = vec![BodyState::default(); vi.mechanism().nbodies()];
        vi.mechanism().state_from_minimal(&q0, &vec![0.1; n], 0.01, &mut state).unwrap();
        let u: Vec<f64> = (0..n).map(|k| 0.1 * k as f64).collect();
        let mut ws = vi.workspace();
        let mut next = state.clone();
        vi.step(&mut ws, 0, &state, &u, None, &mut next).unwrap();
        state.clone_from(&next);
        let count = allocations(|| {
            vi.step(&mut ws, 1, &state, &u, None, &mut next).unwrap();
        });
        assert_eq!(count, 0, "a step allocated {count} times");
    }
}

#[test]
fn interior_point_steps_with_contacts_do_not_allocate() {
    use nalgebra::{Matrix3, UnitQuaternion, Vector3};
    use vidyn_maximal::{Body, FrictionModel, Plane, Pose, Sphere};
    for model in [FrictionModel::Pyramid, FrictionModel::Cone] {
        let body = Body { name: "box".into(), mass: 1.0, inertia: Matrix3::identity() * 0.05 };
        let mut mech = Mechanism::new(vec![body], Vector3::new(0.0, 0.0, -9.81)).unwrap();
        for k in 0..4 {
            let corner = Vector3::new(if k % 2 == 0 { 0.25 } else { -0.25 }, if k < 2 { 0.25 } else { -0.25 }, -0.25);
            mech.add_contact(&format!("c{k}"), 0, Sphere { centre: corner, radius: 0.0 }, Plane::ground(), 0.5).unwrap();
            mech.set_friction_model(k, model).unwrap();
        }
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        let pose = Pose::new(Vector3::new(0.0, 0.0, 0.26), UnitQuaternion::identity());
        let state = vec![BodyState { pose, v: Vector3::new(0.2, 0.0, -0.5), w: Vector3::zeros() }];
        let mut ws = vi.workspace();
        let mut next = state.clone();
        vi.step(&mut ws, 0, &state, &[], None, &mut next).unwrap();
        let count = allocations(|| {
            vi.step(&mut ws, 1, &state, &[], None, &mut next).unwrap();
        });
        assert_eq!(count, 0, "an interior-point step ({model:?} friction) allocated {count} times");
    }
}

#[test]
fn interior_point_steps_with_body_contacts_do_not_allocate() {
    use nalgebra::{Matrix3, UnitQuaternion, Vector3};
    use vidyn_maximal::{Body, FrictionModel, Plane, Pose, Shape, Sphere};
    for model in [FrictionModel::Pyramid, FrictionModel::Cone, FrictionModel::Frictionless] {
        let ball = |k: usize| Body { name: format!("ball{k}"), mass: 1.0, inertia: Matrix3::identity() * 0.025 };
        let mut mech = Mechanism::new((0..3).map(ball).collect(), Vector3::new(0.0, 0.0, -9.81)).unwrap();
        mech.add_contact("ground", 0, Sphere { centre: Vector3::zeros(), radius: 0.25 }, Plane::ground(), 0.5).unwrap();
        let sphere = Shape::Sphere { centre: Vector3::zeros(), radius: 0.25 };
        let capsule = Shape::Capsule { a: Vector3::new(-0.1, 0.0, 0.0), b: Vector3::new(0.1, 0.0, 0.0), radius: 0.25 };
        let friction = if model == FrictionModel::Frictionless { 0.0 } else { 0.5 };
        mech.add_body_contact("1-0", (1, sphere), (0, sphere), friction).unwrap();
        mech.add_body_contact("2-1", (2, capsule), (1, sphere), friction).unwrap();
        for c in 0..2 {
            mech.set_body_contact_friction_model(c, model).unwrap();
        }
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        let state: Vec<BodyState> = (0..3)
            .map(|k| BodyState {
                pose: Pose::new(Vector3::new(0.01 * k as f64, 0.0, 0.26 + 0.51 * k as f64), UnitQuaternion::identity()),
                v: Vector3::new(0.1, 0.0, -0.5),
                w: Vector3::zeros(),
            })
            .collect();
        let mut ws = vi.workspace();
        let mut next = state.clone();
        vi.step(&mut ws, 0, &state, &[], None, &mut next).unwrap();
        let count = allocations(|| {
            vi.step(&mut ws, 1, &state, &[], None, &mut next).unwrap();
        });
        assert_eq!(count, 0, "an interior-point step with body contacts ({model:?}) allocated {count} times");
    }
}
