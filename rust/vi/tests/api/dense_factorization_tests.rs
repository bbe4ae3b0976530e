//! The dense form of the Newton factorisation (`with_dense_factorization_max`) against
//! Algorithms B.1/B.2 (`with_dense_factorization_max(0, 0)`): the same steps, multipliers and
//! linearisations to round-off where the dense step of `with_dense_max` does not apply — with
//! holonomic constraints (every scheme), kinematic joints, a floating base on the Lie group
//! (whose linearisation factors the chart's centred expansion), and a floating base with
//! constraints —, dense everywhere and dense in the linearisation only (the default between
//! the two limits). Each case also checks that the paths did differ in their rounding, so that
//! the comparison is between different computations.

use crate::common::chart_second_order::{damped_tree_at_its_floor, floating_tree_inputs, TreeInputs};
use crate::common::constraint::{closed_configuration, integrator};
use crate::common::kinematic::prescribed_case;
use crate::common::lie_group::tether_and_plane;
use crate::common::newton::rel_err;
use crate::*;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::random_tree;
use vidyn_rbd::Joint;

/// A two-step rollout and the linearisation of its second step: `(q_2, p_2, A, B)`.
fn outcome(vi: &VariationalIntegrator, q: &[f64], p: &[f64], u: &[f64]) -> (Vec<f64>, Vec<f64>, DMatrix<f64>, DMatrix<f64>) {
    let (n, nq) = (vi.n(), vi.nq());
    let mut ws = vi.workspace();
    let (mut q1, mut p1) = (vec![0.0; nq], vec![0.0; n]);
    vi.step(&mut ws, StepInput::new(0, q, p, u), &mut q1, &mut p1).unwrap();
    let (mut a, mut b, mut q2, mut p2) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), vec![0.0; nq], vec![0.0; n]);
    vi.linearize(&mut ws, StepInput::new(1, &q1, &p1, u), &mut a, &mut b, &mut q2, &mut p2).unwrap();
    (q2, p2, a, b)
}

/// The dense factorisation of `vi` (everywhere, and in the linearisation only) and the
/// recursive one give the same two steps and linearisation to round-off, and not bit for bit.
fn assert_paths_agree(vi: &VariationalIntegrator, q: &[f64], p: &[f64], u: &[f64], what: &str) {
    let recursive = outcome(&vi.clone().with_dense_factorization_max(0, 0), q, p, u);
    for (newton, dense) in [(usize::MAX, "dense"), (0, "dense in the linearisation")] {
        let dense_run = outcome(&vi.clone().with_dense_factorization_max(newton, usize::MAX), q, p, u);
        let what = format!("{what}, {dense}");
        assert!(rel_err(&dense_run.0, &recursive.0) < 1e-12 && rel_err(&dense_run.1, &recursive.1) < 1e-11, "{what}: states");
        let (ea, eb) = (rel_err(dense_run.2.as_slice(), recursive.2.as_slice()), rel_err(dense_run.3.as_slice(), recursive.3.as_slice()));
        assert!(ea < 1e-10 && eb < 1e-10, "{what}: A off by {ea:e}, B by {eb:e}");
        assert!(dense_run.2 != recursive.2, "{what}: both linearisations took the same path");
    }
}

#[test]
fn the_dense_factorization_equals_the_recursion_with_constraints() {
    for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
        let forces = JointForces { damping: vec![0.2, 0.1, 0.3], stiffness: vec![0.5, 1.0, 0.0], rest: vec![0.1, -1.0, 0.3] };
        let vi = integrator(sc, 0.02, Some(forces));
        let q = closed_configuration(vi.model(), 0.4);
        assert_paths_agree(&vi, &q, &[0.3, -0.2, 0.1], &[0.5, -0.3, 0.2], &format!("four-bar s = {}", vi.scheme().s));
    }
}

#[test]
fn the_dense_factorization_equals_the_recursion_with_kinematic_joints() {
    let kinds: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let model = Arc::new(random_tree(6, 3, &kinds));
    for sc in [Scheme::midpoint(), Scheme::trapezoid()] {
        let (vi, q, p, u) = prescribed_case(&model, sc, &mut rng);
        assert_paths_agree(&vi, &q, &p, &u, &format!("kinematic joints s = {}", vi.scheme().s));
    }
}

#[test]
fn the_dense_factorization_equals_the_recursion_on_the_group() {
    let TreeInputs { model, q0, v0, u, .. } = floating_tree_inputs();
    for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
        let (free, p0) = damped_tree_at_its_floor(&model, sc, &q0, &v0);
        assert_paths_agree(&free, &q0, &p0, &u, &format!("floating tree s = {}", free.scheme().s));
        let held = free.with_constraints(tether_and_plane(&model, &q0, 0.0)).unwrap();
        let mut p0 = vec![0.0; held.n()];
        held.momentum(&mut held.workspace(), &q0, &v0, &mut p0).unwrap();
        assert_paths_agree(&held, &q0, &p0, &u, &format!("floating tree with a tether and a plane, s = {}", held.scheme().s));
    }
}
