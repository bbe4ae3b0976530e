//! The simulation and linearisation paths allocate nothing once the workspace exists: a
//! counting global allocator wraps the system one (per thread, so the harness's own threads
//! cannot disturb the count), as in `rust/rbd/tests/no_alloc.rs`.

use nalgebra::DMatrix;
use nalgebra::Vector3;
use std::sync::Arc;
use vidyn_rbd::builders::random_tree;
use vidyn_rbd::Joint;
use vidyn_spatial::Force;
use vidyn_vi::{BodyPoint, Constraint, JointForces, Scheme, VariationalIntegrator};

#[path = "../../rbd/tests/common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{allocations, CountingAlloc};
use vidyn_vi::StepInput;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn step_newton_direction_and_linearisation_do_not_allocate() {
    let kinds: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
    let model = Arc::new(random_tree(12, 5, &kinds));
    let n = model.nv;
    let q: Vec<f64> = (0..n).map(|i| 0.1 * i as f64 - 0.4).collect();
    // the last case: a midpoint integrator with a distance constraint (the constrained step),
    // satisfied at q
    let anchor = nalgebra::Vector3::new(0.5, 0.2, -2.0);
    let mut rbd = model.workspace();
    vidyn_rbd::placements(&model, &mut rbd, &q).unwrap();
    let length = (rbd.placements[n - 1].translation - anchor).norm();
    let tether =
        Constraint::Distance { a: BodyPoint { body: None, point: anchor }, b: BodyPoint { body: Some(n - 1), point: nalgebra::Vector3::zeros() }, length };
    // ... and one with a kinematic joint as well; then body wrenches (with Simpson and with the
    // constrained midpoint step)
    let wrenches: Vec<Force> = (0..n).map(|i| Force::new(Vector3::new(0.5, -0.2 * i as f64, 1.0), Vector3::new(0.1, 0.0, -0.05 * i as f64))).collect();
    let cases = [
        (Scheme::midpoint(), vec![], vec![], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::trapezoid(), vec![], vec![], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::simpson(), vec![], vec![], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::lobatto(3).unwrap(), vec![], vec![], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::midpoint(), vec![tether.clone()], vec![], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::midpoint(), vec![tether.clone()], vec![0], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        // the constrained Simpson and Lobatto steps (interior impulses, their Woodbury factors)
        (Scheme::simpson(), vec![tether.clone()], vec![], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::lobatto(3).unwrap(), vec![tether.clone()], vec![], vec![], vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::simpson(), vec![], vec![], wrenches.clone(), vidyn_vi::DEFAULT_DENSE_MAX),
        (Scheme::midpoint(), vec![tether], vec![], wrenches.clone(), vidyn_vi::DEFAULT_DENSE_MAX),
        // the dense path of small systems (forced here: this tree has 12 joints)
        (Scheme::trapezoid(), vec![], vec![], vec![], usize::MAX),
        (Scheme::simpson(), vec![], vec![], wrenches, usize::MAX),
    ];
    // each case with the dense Newton factorisation and with B.1/B.2
    let cases = cases.into_iter().flat_map(|case| [(case.clone(), usize::MAX), (case, 0)]);
    for ((sc, constraints, kinematic, wrenches, dense_max), factorization_max) in cases {
        let s = sc.s;
        let forces = JointForces { damping: vec![0.2; n], stiffness: vec![1.5; n], rest: vec![0.1; n] };
        let vi = VariationalIntegrator::new(model.clone(), sc, 0.01, Some(forces))
            .unwrap()
            .with_constraints(constraints)
            .unwrap()
            .with_kinematic(&kinematic)
            .unwrap()
            .with_body_wrenches(wrenches)
            .unwrap()
            .with_dense_max(dense_max)
            .with_dense_factorization_max(factorization_max, factorization_max);
        let mut ws = vi.workspace();
        let v: Vec<f64> = (0..n).map(|i| 0.3 - 0.05 * i as f64).collect();
        let u: Vec<f64> = (0..n).map(|i| 0.2 * (i % 3) as f64).collect();
        let mut p = vec![0.0; n];
        vi.momentum(&mut ws, &q, &v, &mut p).unwrap();
        let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
        let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
        let z: Vec<f64> = (0..s * n).map(|k| q[k % n] + 0.01).collect();
        let (mut r, mut dz) = (vec![0.0; s * n], vec![0.0; s * n]);
        // warm-up (first use of every code path), then count
        vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).unwrap();
        vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
        assert_eq!(allocations(|| vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).unwrap()), 0, "step s={s}");
        let guess = qn.clone();
        assert_eq!(
            allocations(|| vi.step(&mut ws, StepInput::new(0, &q, &p, &u).with_guess(Some(&guess)), &mut qn, &mut pn).unwrap()),
            0,
            "warm-started step s={s}"
        );
        assert_eq!(allocations(|| vi.residual(&mut ws, &q, &p, &u, &z, &mut r).unwrap()), 0, "residual s={s}");
        assert_eq!(allocations(|| vi.newton_direction(&mut ws, StepInput::new(0, &q, &p, &u), &z, &mut dz).unwrap()), 0, "newton_direction s={s}");
        assert_eq!(allocations(|| vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap()), 0, "linearize s={s}");
        // second order (with constraints through the constrained step; not offered with
        // kinematic joints or wrenches): contracted and full (the full tensors are allocated
        // by the warm-up)
        if !vidyn_system::DiscreteDynamics::has_second_order(&vi) {
            continue;
        }
        let mut so = vi.second_order_workspace();
        let lam: Vec<f64> = (0..2 * n).map(|i| 0.1 * i as f64 - 0.5).collect();
        vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &lam).unwrap();
        vi.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u)).unwrap();
        assert_eq!(
            allocations(|| vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &lam).map(|_| ()).unwrap()),
            0,
            "contracted second order s={s}"
        );
        assert_eq!(allocations(|| vi.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u)).map(|_| ()).unwrap()), 0, "full second order s={s}");
        // state conversions
        let mut jac = DMatrix::zeros(2 * n, 2 * n);
        let mut w = vec![0.0; n];
        vi.momentum_with_jacobian(&mut ws, &q, &v, &mut pn, &mut jac).unwrap();
        vi.velocity_with_jacobian(&mut ws, &q, &p, &mut w, &mut jac).unwrap();
        assert_eq!(allocations(|| vi.momentum_with_jacobian(&mut ws, &q, &v, &mut pn, &mut jac).unwrap()), 0, "momentum_with_jacobian s={s}");
        assert_eq!(allocations(|| vi.velocity_with_jacobian(&mut ws, &q, &p, &mut w, &mut jac).unwrap()), 0, "velocity_with_jacobian s={s}");
    }
}

/// A step of a model with free-flyer, spherical and planar joints (on their Lie groups, in
/// the chart centred at the step's start) allocates nothing either, with and without a guess,
/// for the dense path of small systems and the recursive one; nor do its linearisation and
/// its second order.
#[test]
fn steps_on_the_lie_group_do_not_allocate() {
    let model = Arc::new(random_tree(6, 31, &Joint::examples()));
    assert!(model.joints.iter().any(|j| j.nv() > 1));
    let (nq, n) = (model.nq, model.nv);
    let mut q = vidyn_rbd::neutral(&model);
    let v: Vec<f64> = (0..n).map(|i| 0.3 - 0.05 * i as f64).collect();
    // the last two cases with a tether from the world to the last body, sized at the first
    // configuration (the later cases start where the earlier ones ended, so their steps close
    // a gap): the constrained step, its linearisation and second order on the group
    let mut rbd = model.workspace();
    vidyn_rbd::placements(&model, &mut rbd, &q).unwrap();
    let last = model.nbodies() - 1;
    let anchor = Vector3::new(0.3, -0.2, 1.5);
    let length = (rbd.placements[last].translation - anchor).norm();
    let tether = vec![Constraint::Distance { a: BodyPoint { body: None, point: anchor }, b: BodyPoint { body: Some(last), point: Vector3::zeros() }, length }];
    let cases = [
        (Scheme::trapezoid(), vidyn_vi::DEFAULT_DENSE_MAX, vec![]),
        (Scheme::simpson(), 0, vec![]),
        (Scheme::midpoint(), usize::MAX, vec![]),
        (Scheme::trapezoid(), vidyn_vi::DEFAULT_DENSE_MAX, tether.clone()),
        (Scheme::simpson(), vidyn_vi::DEFAULT_DENSE_MAX, tether),
    ];
    // each case with the dense Newton factorisation and with B.1/B.2
    let cases = cases.into_iter().flat_map(|case| [(case.clone(), usize::MAX), (case, 0)]);
    for ((sc, dense_max, constraints), factorization_max) in cases {
        let s = sc.s;
        let vi = VariationalIntegrator::new(model.clone(), sc, 0.01, None)
            .unwrap()
            .with_dense_max(dense_max)
            .with_dense_factorization_max(factorization_max, factorization_max)
            .with_constraints(constraints)
            .unwrap();
        let mut ws = vi.workspace();
        let mut p = vec![0.0; n];
        vi.momentum(&mut ws, &q, &v, &mut p).unwrap();
        let (mut qn, mut pn) = (vec![0.0; nq], vec![0.0; n]);
        let u = vec![0.1; n];
        vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).unwrap();
        assert_eq!(allocations(|| vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).unwrap()), 0, "step s={s}");
        let guess = qn.clone();
        assert_eq!(
            allocations(|| vi.step(&mut ws, StepInput::new(1, &q, &p, &u).with_guess(Some(&guess)), &mut qn, &mut pn).unwrap()),
            0,
            "warm-started step s={s}"
        );
        assert_eq!(allocations(|| vi.energy(&mut ws, 0, &qn, &pn).unwrap()), 0, "energy s={s}");
        // the linearisation's scratch is made by the first one
        let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
        vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
        assert_eq!(allocations(|| vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap()), 0, "linearize s={s}");
        // the exact second order on the group; the full tensors'
        // storage is made by the first full call
        let mut so = vi.second_order_workspace();
        let lam: Vec<f64> = (0..2 * n).map(|i| 0.5 - 0.1 * i as f64).collect();
        vi.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u)).unwrap();
        assert_eq!(
            allocations(|| vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &lam).map(|_| ()).unwrap()),
            0,
            "contracted second order s={s}"
        );
        assert_eq!(allocations(|| vi.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u)).map(|_| ()).unwrap()), 0, "full second order s={s}");
        if vi.constraints().is_empty() {
            q.copy_from_slice(&qn);
        }
    }
}

/// The reduced steps of a model with mimic joints (module `mimic_step`): step, warm-started
/// step, linearisation, Legendre transform and knot energy, for every kind of scheme.
#[test]
fn mimic_steps_do_not_allocate() {
    let kinds: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
    let tree = random_tree(8, 3, &kinds);
    let mimics =
        vec![vidyn_rbd::Mimic { joint: 2, leader: 5, multiplier: -0.7, offset: 0.2 }, vidyn_rbd::Mimic { joint: 6, leader: 1, multiplier: 1.3, offset: 0.0 }];
    let model = Arc::new(tree.with_mimics(mimics).unwrap());
    for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
        let vi = VariationalIntegrator::new(model.clone(), sc, 0.01, None).unwrap();
        let n = vi.n();
        assert_eq!((n, vi.nq()), (model.nv - 2, model.nq - 2));
        let mut ws = vi.workspace();
        let q: Vec<f64> = (0..n).map(|i| 0.1 * i as f64 - 0.3).collect();
        let v: Vec<f64> = (0..n).map(|i| 0.3 - 0.05 * i as f64).collect();
        let u: Vec<f64> = (0..n).map(|i| 0.2 * (i % 3) as f64).collect();
        let mut p = vec![0.0; n];
        let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
        let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
        vi.momentum(&mut ws, &q, &v, &mut p).unwrap();
        vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
        let guess = qn.clone();
        assert_eq!(allocations(|| vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).unwrap()), 0, "step");
        assert_eq!(allocations(|| vi.step(&mut ws, StepInput::new(0, &q, &p, &u).with_guess(Some(&guess)), &mut qn, &mut pn).unwrap()), 0, "warm-started step");
        assert_eq!(allocations(|| vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap()), 0, "linearize");
        assert_eq!(allocations(|| vi.momentum(&mut ws, &q, &v, &mut p).unwrap()), 0, "momentum");
        assert_eq!(allocations(|| vi.knot_energy(&mut ws, 0, &q, &p).unwrap()), 0, "energy");
    }
}
