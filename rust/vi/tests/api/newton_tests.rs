//! The O(n) Newton direction (Algorithms B.1/B.2) and the O(n²) linearisation against the
//! dense reference path (form `J`, LU) on random branched trees with damping and springs, with
//! and without body wrenches.

use crate::common::newton::*;
use crate::*;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{Joint, ModelBuilder};
use vidyn_spatial::{Inertia, Matrix3, Se3, Vector3};
use vidyn_vi::reference::DenseOracle;

#[test]
fn b1_direction_equals_the_dense_newton_direction() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut worst = 0.0_f64;
    for model in models() {
        for (sc, wrenched) in with_and_without_wrenches() {
            let s = sc.s;
            for dt in [0.01, 0.05] {
                let n = model.nv;
                let vi = integrator(&model, sc.clone(), dt, &mut rng, wrenched);
                let (q, p, u, z) = problem(&vi, &mut rng);
                let mut ws = vi.workspace();
                let mut oracle = DenseOracle::new(&vi);
                let (mut fast, mut dense) = (vec![0.0; s * n], vec![0.0; s * n]);
                vi.newton_direction(&mut ws, StepInput::new(0, &q, &p, &u), &z, &mut fast).unwrap();
                oracle.newton_direction(&mut ws, StepInput::new(0, &q, &p, &u), &z, &mut dense).unwrap();
                let err = rel_err(&fast, &dense);
                worst = worst.max(err);
                assert!(err < 1e-10, "{} s={s} dt={dt} wrenched={wrenched}: B.1 vs dense relative error {err:e}", model.name);
                // and the direction solves J δz = −r (J from the dense oracle)
                let j = oracle.jacobian(&mut ws, &q, &z).unwrap();
                let mut r = vec![0.0; s * n];
                vi.residual(&mut ws, &q, &p, &u, &z, &mut r).unwrap();
                let jd = &j * nalgebra::DVector::from_column_slice(&fast);
                let neg_r: Vec<f64> = r.iter().map(|x| -x).collect();
                assert!(rel_err(jd.as_slice(), &neg_r) < 1e-9, "{} s={s}: |J δz + r|", model.name);
            }
        }
    }
    println!("B.1 vs dense Newton direction: worst relative error {worst:.2e}");
}

#[test]
fn o_n2_linearisation_equals_the_dense_linearisation() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut worst = 0.0_f64;
    for model in models() {
        for (sc, wrenched) in with_and_without_wrenches() {
            let (s, n) = (sc.s, model.nv);
            let vi = integrator(&model, sc.clone(), 0.02, &mut rng, wrenched);
            let (q, p, u, _) = problem(&vi, &mut rng);
            let mut ws = vi.workspace();
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut a2, mut b2) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
            let mut oracle = DenseOracle::new(&vi);
            oracle.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a2, &mut b2, &mut qn, &mut pn).unwrap();
            let ea = (&a - &a2).amax() / a2.amax();
            let eb = (&b - &b2).amax() / b2.amax();
            worst = worst.max(ea).max(eb);
            assert!(ea < 1e-10 && eb < 1e-10, "{} s={s} wrenched={wrenched}: A {ea:e}, B {eb:e}", model.name);
        }
    }
    println!("O(n²) vs dense linearisation: worst relative error {worst:.2e}");
}

/// A chain whose leaf is massless and has neither damping nor a spring: its `Λ` is zero.
#[test]
fn a_massless_leaf_is_a_singular_jacobian() {
    let mut b = ModelBuilder::new("massless_leaf");
    let rod = Inertia::new(1.0, Vector3::new(0.0, 0.0, -0.5), Matrix3::from_diagonal(&Vector3::new(0.1, 0.1, 0.01)));
    let at = Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0));
    let root = b.add_body(None, "j1", Joint::Revolute { axis: Vector3::y() }, Se3::identity(), rod).unwrap();
    b.add_body(Some(root), "j2", Joint::Revolute { axis: Vector3::x() }, at, Inertia::zero()).unwrap();
    let model = b.build().unwrap();
    let vi = VariationalIntegrator::new(Arc::new(model), Scheme::simpson(), 0.01, Some(JointForces::none(2))).unwrap();
    let mut ws = vi.workspace();
    let mut dz = [0.0; 4];
    let r = vi.newton_direction(&mut ws, StepInput::new(5, &[0.1, 0.2], &[0.3, 0.0], &[0.0; 2]), &[0.1, 0.2, 0.1, 0.2], &mut dz);
    assert!(matches!(r, Err(ViError::SingularJacobian { step: 5 })), "{r:?}");
}

/// A step reuses the configuration terms of `q_k` held by its workspace (from the previous
/// step's end point, `StepPoints::set_start`): a rollout in one workspace equals, bit for bit,
/// steps taken in fresh workspaces from the same guesses, and a workspace moved to an
/// integrator on another model of the same size, or on the same model with other wrenches,
/// carries no stale terms over.
#[test]
fn reused_point_states_change_no_bit_of_a_step() {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let (a, b) = (Arc::new(random_tree(6, 3, &one_dof())), Arc::new(random_tree(6, 5, &one_dof())));
    for (sc, wrenched) in with_and_without_wrenches() {
        let vi = integrator(&a, sc.clone(), 0.01, &mut rng, wrenched);
        let others = [integrator(&b, sc.clone(), 0.01, &mut rng, wrenched), integrator(&a, sc.clone(), 0.01, &mut rng, !wrenched)];
        let n = vi.n();
        let (q0, p0, u) = (random(&mut rng, n, 1.0), random(&mut rng, n, 2.0), random(&mut rng, 6 * n, 1.0));
        let reused = rollout(&vi, &q0, &p0, &u).unwrap();
        let mut guess = vec![0.0; n];
        for k in 0..6 {
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            let warm = predict_next(&reused.q[..(k + 1) * n], n, &mut guess).then_some(guess.as_slice());
            let (q, p) = (&reused.q[k * n..(k + 1) * n], &reused.p[k * n..(k + 1) * n]);
            vi.step(&mut vi.workspace(), StepInput::new(k, q, p, &u[k * n..(k + 1) * n]).with_guess(warm), &mut qn, &mut pn).unwrap();
            assert_eq!((&qn[..], &pn[..]), (&reused.q[(k + 1) * n..(k + 2) * n], &reused.p[(k + 1) * n..(k + 2) * n]), "s = {} step {k}", sc.s);
        }
        for other in &others {
            // `ws` ends a step of `vi` at (q1, p1); `other` steps from there with it
            let mut ws = vi.workspace();
            let (mut q1, mut p1) = (vec![0.0; n], vec![0.0; n]);
            vi.step(&mut ws, StepInput::new(0, &q0, &p0, &u[..n]), &mut q1, &mut p1).unwrap();
            let (mut moved, mut fresh) = ((vec![0.0; n], vec![0.0; n]), (vec![0.0; n], vec![0.0; n]));
            other.step(&mut ws, StepInput::new(1, &q1, &p1, &u[n..2 * n]), &mut moved.0, &mut moved.1).unwrap();
            other.step(&mut other.workspace(), StepInput::new(1, &q1, &p1, &u[n..2 * n]), &mut fresh.0, &mut fresh.1).unwrap();
            assert_eq!(moved, fresh, "s = {}", sc.s);
        }
    }
}

/// Small systems take the dense path by default (`with_dense_max`): its steps and
/// linearisations equal the recursive path's to round-off, with and without wrenches, for
/// every scheme, and large systems keep the recursion.
#[test]
fn the_dense_path_of_small_systems_equals_the_recursive_path() {
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    for model in [Arc::new(pendulum_chain(2, false)), Arc::new(random_tree(5, 3, &one_dof()))] {
        for (sc, wrenched) in with_and_without_wrenches() {
            let recursive = integrator(&model, sc.clone(), 0.01, &mut rng, wrenched);
            let dense = recursive.clone().with_dense_max(DEFAULT_DENSE_MAX.max(sc.s * model.nv));
            assert!(dense.uses_dense() && !recursive.uses_dense());
            let (q, p, u, _) = problem(&recursive, &mut rng);
            let n = model.nv;
            let (mut a1, mut b1, mut a2, mut b2) =
                (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut q1, mut p1, mut q2, mut p2) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            recursive.linearize(&mut recursive.workspace(), StepInput::new(0, &q, &p, &u), &mut a1, &mut b1, &mut q1, &mut p1).unwrap();
            dense.linearize(&mut dense.workspace(), StepInput::new(0, &q, &p, &u), &mut a2, &mut b2, &mut q2, &mut p2).unwrap();
            let s = sc.s;
            assert!(rel_err(&q2, &q1) < 1e-12 && rel_err(&p2, &p1) < 1e-12, "{} s={s}: states", model.name);
            assert!(rel_err(a2.as_slice(), a1.as_slice()) < 1e-10 && rel_err(b2.as_slice(), b1.as_slice()) < 1e-10, "{} s={s}: A, B", model.name);
        }
    }
    let big = VariationalIntegrator::new(Arc::new(pendulum_chain(DEFAULT_DENSE_MAX + 1, false)), Scheme::trapezoid(), 0.01, None).unwrap();
    assert!(!big.uses_dense());
}
