//! The maximal-coordinate integrator as optimiser dynamics ([`MaximalDynamics`], minimal
//! coordinates `x = (q, v)`): rollouts agree with the maximal rollout, and iLQR drives a
//! double pendulum to a target with a dynamically feasible result.

use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use vidyn_maximal::{models, rollout_minimal, MaximalIntegrator, Mechanism};
use vidyn_optim::{ilqr, rollout_open_loop, Dynamics, IlqrOptions, MaximalDynamics, QuadraticCost};

fn integrator(dt: f64) -> MaximalIntegrator {
    let model = Arc::new(models::cylinder_chain(2, true));
    MaximalIntegrator::new(Arc::new(Mechanism::from_model(model).unwrap()), dt).unwrap()
}

#[test]
fn rollouts_match_the_maximal_rollout() {
    let mi = integrator(0.01);
    let dynamics = MaximalDynamics::in_joint_coordinates(&mi, None).unwrap();
    let (q0, v0) = ([0.4, -0.3], [0.5, 0.2]);
    let u: Vec<f64> = (0..2 * 50).map(|k| 0.3 * ((k / 2) as f64 * 0.2).sin()).collect();
    let (x, _) = rollout_open_loop(&dynamics, &[q0[0], q0[1], v0[0], v0[1]], &u).unwrap();
    let traj = rollout_minimal(&mi, &vidyn_batch::Control::new(), &q0, &v0, &u, 50).unwrap();
    for k in 0..=50 {
        for i in 0..2 {
            let (ours, theirs) = (x[4 * k + i], traj.q[k * traj.nq + i]);
            assert!((ours - theirs).abs() < 1e-12, "step {k} joint {i}: {ours} vs {theirs}");
        }
    }
}

#[test]
fn ilqr_on_maximal_coordinates_reaches_a_target_feasibly() {
    let dt = 0.02;
    let steps = 60;
    let mi = integrator(dt);
    let dynamics = MaximalDynamics::in_joint_coordinates(&mi, None).unwrap();
    let target = vec![0.8, -0.5, 0.0, 0.0];
    let w = DMatrix::from_diagonal(&DVector::from_vec(vec![dt, dt, 0.01 * dt, 0.01 * dt]));
    let cost = QuadraticCost::new(vec![w], vec![DMatrix::identity(2, 2) * 1e-3 * dt], DMatrix::identity(4, 4) * 1e2, target.clone(), vec![]).unwrap();
    let x0 = [0.0; 4];
    let res = ilqr(&dynamics, &cost, &x0, &vec![0.0; 2 * steps], &IlqrOptions { max_iterations: 200, tolerance: 1e-8, ..IlqrOptions::default() }).unwrap();
    println!("{}: {} iterations, cost {}", res.message, res.iterations, res.cost);
    assert!(res.converged, "{}", res.message);
    let end = &res.x[4 * steps..];
    assert!((end[0] - target[0]).abs() < 2e-2 && (end[1] - target[1]).abs() < 2e-2, "{end:?}");
    // re-simulated open loop: the same states
    let (xs, _) = rollout_open_loop(&dynamics, &x0, &res.u).unwrap();
    let defect = xs.iter().zip(&res.x).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(defect < 1e-9, "{defect}");
    assert_eq!(dynamics.nx(), 4);
}

#[test]
fn loops_are_rejected() {
    let (mech, _) = models::four_bar();
    let mi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    assert!(MaximalDynamics::in_joint_coordinates(&mi, None).is_err());
}

/// Each step's Jacobians and single steps depend on that step's inputs only: the linearisation
/// of a trajectory (steps in parallel, workspaces reused by the pool's workers) and steps taken
/// after other steps equal, bit for bit, those of fresh dynamics that solve nothing else.
#[test]
fn steps_and_jacobians_do_not_depend_on_what_was_solved_before() {
    let mi = integrator(0.01);
    let dynamics = MaximalDynamics::in_joint_coordinates(&mi, None).unwrap();
    let steps = 24;
    let u: Vec<f64> = (0..2 * steps).map(|k| 0.8 * ((k / 2) as f64 * 0.3).sin()).collect();
    let (x, _) = rollout_open_loop(&dynamics, &[0.4, -0.3, 0.5, 0.2], &u).unwrap();
    let (a, b) = dynamics.linearize(&x, &u).unwrap();
    let mut next = [0.0; 4];
    for k in (0..steps).rev() {
        let fresh = MaximalDynamics::in_joint_coordinates(&mi, None).unwrap();
        let (xk, uk) = (&x[4 * k..4 * k + 8], &u[2 * k..2 * k + 2]);
        let (ak, bk) = fresh.linearize(xk, uk).unwrap();
        assert_eq!((&a[k], &b[k]), (&ak[0], &bk[0]), "step {k}: Jacobians");
        let mut alone = [0.0; 4];
        fresh.step(k, &xk[..4], uk, None, &mut alone).unwrap();
        dynamics.step(k, &xk[..4], uk, None, &mut next).unwrap(); // after step k + 1
        assert_eq!(next, alone, "step {k}: the step after another one");
    }
}
