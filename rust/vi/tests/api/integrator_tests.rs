//! Checks of the variational integrator against finite differences and the properties every
//! variational integrator must have (Fan, Schultz & Murphey 2018, §10 of the digest).

use crate::common::integrator::*;
use crate::*;
use nalgebra::{DMatrix, Vector3};
use std::sync::Arc;
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Matrix3, Se3};

#[test]
fn linearisation_matches_finite_differences_of_the_solved_step() {
    for model in models() {
        for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
            let n = model.nv;
            let forces = JointForces { damping: vec![0.3; n], stiffness: vec![1.0; n], rest: vec![0.2; n] };
            let vi = VariationalIntegrator::new(model.clone(), sc.clone(), 0.02, Some(forces)).unwrap();
            let (q, p) = state(&vi, 7);
            let u: Vec<f64> = (0..n).map(|i| 0.1 * i as f64).collect();
            assert_linearisation_matches_differences(&vi, 0, &q, &p, &u, &format!("{} s={}", model.name, sc.s));
        }
    }
}

#[test]
fn unforced_flow_is_symplectic() {
    for model in models() {
        for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
            let n = model.nv;
            let vi = VariationalIntegrator::new(model.clone(), sc.clone(), 0.03, Some(JointForces::none(n))).unwrap();
            let (q, p) = state(&vi, 3);
            let mut ws = vi.workspace();
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.linearize(&mut ws, StepInput::new(0, &q, &p, &vec![0.0; n]), &mut a, &mut b, &mut qn, &mut pn).unwrap();
            let mut j = DMatrix::zeros(2 * n, 2 * n);
            for i in 0..n {
                j[(i, n + i)] = 1.0;
                j[(n + i, i)] = -1.0;
            }
            let err = (a.transpose() * &j * &a - &j).amax();
            assert!(err < 1e-10 * a.amax().powi(2), "{} s={}: |AᵀJA − J| = {err:e}", model.name, sc.s);
        }
    }
}

/// A chain whose first joint turns about the world z axis, with gravity along z: the
/// Lagrangian is invariant under that rotation, so its discrete momentum is conserved.
fn symmetric_chain() -> Arc<Model> {
    let mut b = ModelBuilder::new("symmetric");
    let rod = |m: f64| Inertia::new(m, Vector3::new(0.3, 0.1, -0.4), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.01)));
    let mut parent = b.add_body(None, "yaw", Joint::Revolute { axis: Vector3::z() }, Se3::identity(), rod(1.0)).unwrap();
    for (k, axis) in [Vector3::x(), Vector3::y(), Vector3::x()].into_iter().enumerate() {
        let at = Se3::new(Matrix3::identity(), Vector3::new(0.2, 0.0, -0.5));
        parent = b.add_body(Some(parent), &format!("j{k}"), Joint::Revolute { axis }, at, rod(0.7)).unwrap();
    }
    Arc::new(b.build().unwrap())
}

#[test]
fn symmetric_momentum_is_conserved_and_energy_does_not_drift() {
    let model = symmetric_chain();
    let vi = VariationalIntegrator::new(model.clone(), Scheme::trapezoid(), 0.01, None).unwrap();
    let (q, p) = state(&vi, 5);
    let steps = 3000;
    let traj = rollout(&vi, &q, &p, &vec![0.0; steps * model.nv]).unwrap();
    let mut ws = vi.workspace();
    let e0 = vi.energy(&mut ws, 0, &q, &p).unwrap();
    let (mut max_dp, mut e_first, mut e_last) = (0.0_f64, 0.0_f64, 0.0_f64);
    for k in 0..=steps {
        max_dp = max_dp.max((traj.p_at(k)[0] - p[0]).abs());
        let de = (vi.energy(&mut ws, k, traj.q_at(k), traj.p_at(k)).unwrap() - e0).abs();
        if k < steps / 2 {
            e_first = e_first.max(de);
        } else {
            e_last = e_last.max(de);
        }
    }
    assert!(max_dp < 1e-10 * (1.0 + p[0].abs()), "yaw momentum drift {max_dp:e}");
    // bounded oscillation, no secular growth: the second half is no worse than the first
    // by more than a factor 2, and the error stays small relative to the energy scale
    assert!(e_last < 2.0 * e_first + 1e-12, "energy error grows: {e_first:e} then {e_last:e}");
    assert!(e_first < 1e-2 * (1.0 + e0.abs()), "energy error {e_first:e} vs E = {e0}");
}

#[test]
fn time_reversibility() {
    let model = Arc::new(pendulum_chain(3, false));
    for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
        let vi = VariationalIntegrator::new(model.clone(), sc, 0.02, Some(JointForces::none(3))).unwrap();
        let (q, p) = state(&vi, 9);
        let fwd = rollout(&vi, &q, &p, &[0.0; 3 * 50]).unwrap();
        let pn: Vec<f64> = fwd.p_at(50).iter().map(|x| -x).collect();
        let back = rollout(&vi, fwd.q_at(50), &pn, &[0.0; 3 * 50]).unwrap();
        for i in 0..3 {
            assert!((back.q_at(50)[i] - q[i]).abs() < 1e-9);
            assert!((back.p_at(50)[i] + p[i]).abs() < 1e-9);
        }
    }
}

/// Global error at T = 0.5 s on a 3-link chain against a Lobatto s = 4 reference at a fine
/// step; halving Δt must divide the error by ≈ 2^(2s).
#[test]
fn convergence_order_is_2s() {
    let model = Arc::new(pendulum_chain(3, false));
    let t_end = 0.5;
    let make = |sc: Scheme, steps: usize| VariationalIntegrator::new(model.clone(), sc, t_end / steps as f64, Some(JointForces::none(3))).unwrap();
    let reference = make(Scheme::lobatto(4).unwrap(), 200);
    let (q0, p0) = state(&reference, 4);
    let final_state = |vi: &VariationalIntegrator, steps: usize| {
        let t = rollout(vi, &q0, &p0, &vec![0.0; 3 * steps]).unwrap();
        [t.q_at(steps).to_vec(), t.p_at(steps).to_vec()].concat()
    };
    let exact = final_state(&reference, 200);
    for (sc, coarse, expected) in
        [(Scheme::midpoint(), 20, 2.0), (Scheme::trapezoid(), 20, 2.0), (Scheme::simpson(), 10, 4.0), (Scheme::lobatto(3).unwrap(), 5, 6.0)]
    {
        let err = |steps: usize| {
            let x = final_state(&make(sc.clone(), steps), steps);
            x.iter().zip(&exact).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()))
        };
        let order = (err(coarse) / err(2 * coarse)).log2();
        println!("s = {}: measured order {order:.2}", sc.s);
        assert!((order - expected).abs() < 0.3, "s = {}: measured order {order:.2}, expected {expected}", sc.s);
    }
}

#[test]
fn bad_parameters_are_errors() {
    let chain = Arc::new(pendulum_chain(2, true));
    assert!(matches!(VariationalIntegrator::new(chain.clone(), Scheme::trapezoid(), -1.0, None), Err(ViError::InvalidParameter(_))));
    let vi = VariationalIntegrator::new(chain, Scheme::trapezoid(), 0.01, None).unwrap();
    let mut ws = vi.workspace();
    let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
    assert!(matches!(vi.step(&mut ws, StepInput::new(0, &[0.0, f64::NAN], &[0.0; 2], &[0.0; 2]), &mut a, &mut b), Err(ViError::Model(_))));
    // an absurd step cannot converge: reported, not a panic or a silent answer
    let fast = VariationalIntegrator::new(vi.model().clone(), Scheme::trapezoid(), 5.0, None).unwrap().with_newton(1e-12, 3).unwrap();
    let r = fast.step(&mut fast.workspace(), StepInput::new(7, &[0.3, -2.0], &[40.0, -30.0], &[0.0; 2]), &mut a, &mut b);
    assert!(matches!(r, Err(ViError::NewtonDiverged { step: 7, .. }) | Err(ViError::SingularJacobian { step: 7 })), "{r:?}");
}

#[test]
fn parallel_linearisation_equals_sequential_and_is_thread_count_independent() {
    let model = Arc::new(random_tree(6, 2, &one_dof()));
    let vi = VariationalIntegrator::new(model.clone(), Scheme::simpson(), 0.01, None).unwrap();
    let (q, p) = state(&vi, 1);
    let traj = rollout(&vi, &q, &p, &vec![0.1; 6 * 40]).unwrap();
    let par = linearize_trajectory(&vi, &traj).unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| linearize_trajectory(&vi, &traj).unwrap());
    for k in 0..40 {
        assert_eq!(par.a[k], one.a[k]);
        assert_eq!(par.b[k], one.b[k]);
    }
    assert!(par.max_defect < 1e-9, "{}", par.max_defect);
}

#[test]
fn a_rejected_guess_leaves_the_workspace_usable() {
    let vi = VariationalIntegrator::new(Arc::new(pendulum_chain(2, true)), Scheme::trapezoid(), 0.01, None).unwrap();
    let mut ws = vi.workspace();
    let (mut qn, mut pn) = ([0.0; 2], [0.0; 2]);
    let bad = [f64::NAN, 0.0];
    assert!(vi.step(&mut ws, StepInput::new(0, &[0.1, 0.2], &[0.0; 2], &[0.0; 2]).with_guess(Some(&bad)), &mut qn, &mut pn).is_err());
    vi.step(&mut ws, StepInput::new(1, &[0.1, 0.2], &[0.0; 2], &[0.0; 2]), &mut qn, &mut pn).unwrap();
}
