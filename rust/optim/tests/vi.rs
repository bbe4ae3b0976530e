//! iLQR and LQR on variational integrators: cost derivatives, swing-up convergence,
//! feasibility of the result when re-simulated, closed-loop tracking.

use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use vidyn_optim::{Cost, QuadraticCost, StageDerivatives, VelocityCost};

#[test]
fn velocity_cost_gradient_matches_finite_differences() {
    let model = Arc::new(vidyn_rbd::builders::acrobot());
    let w = DMatrix::from_fn(4, 4, |i, j| if i == j { 1.0 + i as f64 } else { 0.1 });
    let inner = QuadraticCost::new(vec![w.clone()], vec![DMatrix::identity(2, 2)], w, vec![0.3, -0.2, 0.5, 0.1], vec![]).unwrap();
    let cost = VelocityCost::new(model, inner).unwrap();
    let x = [0.4, 1.1, 0.7, -0.3];
    let u = [0.2, -0.1];
    let mut d = StageDerivatives::zeros(4, 2);
    cost.running_derivatives(0, &x, &u, &mut d).unwrap();
    let h = 1e-6;
    for i in 0..4 {
        let (mut xp, mut xm) = (x, x);
        xp[i] += h;
        xm[i] -= h;
        let fd = (cost.running_value(0, &xp, &u).unwrap() - cost.running_value(0, &xm, &u).unwrap()) / (2.0 * h);
        assert!((fd - d.lx[i]).abs() < 1e-7 * (1.0 + fd.abs()), "{i}: {fd} vs {}", d.lx[i]);
    }
}

#[test]
fn cartpole_swing_up_converges_and_is_feasible() {
    use vidyn_optim::{ilqr, IlqrOptions, ViDynamics};
    use vidyn_vi::{rollout, Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let dt = 0.02;
    let steps = 125;
    let vi = VariationalIntegrator::new(model.clone(), Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    let w = DMatrix::from_diagonal(&DVector::from_vec(vec![dt, dt, 0.1 * dt, 0.1 * dt]));
    let inner = QuadraticCost::new(vec![w], vec![DMatrix::from_element(1, 1, 1e-2 * dt)], DMatrix::identity(4, 4) * 1e3, vec![0.0, std::f64::consts::PI, 0.0, 0.0], vec![]).unwrap();
    let cost = VelocityCost::new(model, inner).unwrap();
    let opts = IlqrOptions { max_iterations: 400, tolerance: 1e-9, ..IlqrOptions::default() };
    let res = ilqr(&dynamics, &cost, &[0.0; 4], &vec![0.0; steps], &opts).unwrap();
    println!("{}: {} iterations, cost {}, {:.3} s", res.message, res.iterations, res.cost, res.wall_time);
    assert!(res.converged, "{}", res.message);
    let end = &res.x[steps * 4..];
    assert!(end[0].abs() < 2e-3 && (end[1] - std::f64::consts::PI).abs() < 2e-3, "{end:?}");
    // re-simulated by the VI's own rollout: the same states
    let traj = rollout(&vi, &[0.0; 2], &[0.0; 2], &dynamics.full_controls(&res.u)).unwrap();
    let again = dynamics.to_trajectory(&res.x, &res.u);
    let defect = traj.q.iter().zip(&again.q).chain(traj.p.iter().zip(&again.p)).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(defect < 1e-10, "{defect}");
    assert!(res.cost_history.windows(2).all(|w| w[1] < w[0]));
}
