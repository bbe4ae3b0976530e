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

/// Pendulum on a cart with the thesis's settings (§6.7.1; trep's example): cart 10 kg,
/// pendulum a 1 kg point mass on 1 m, g = 9.8, Δt = 0.01 s, 10 s.
fn pendulum_on_cart() -> vidyn_rbd::Model {
    use nalgebra::{Matrix3, Vector3};
    use vidyn_rbd::{Joint, ModelBuilder};
    use vidyn_spatial::{Inertia, Se3};
    let mut b = ModelBuilder::new("pendulum_on_cart");
    b.gravity(Vector3::new(0.0, 0.0, -9.8));
    let cart = b.add_body(None, "cart", Joint::Prismatic { axis: Vector3::x() }, Se3::identity(), Inertia::new(10.0, Vector3::zeros(), Matrix3::zeros())).unwrap();
    b.add_body(Some(cart), "pendulum", Joint::Revolute { axis: Vector3::y() }, Se3::identity(), Inertia::new(1.0, Vector3::new(0.0, 0.0, -1.0), Matrix3::zeros())).unwrap();
    b.build().unwrap()
}

#[test]
fn projection_method_on_pendulum_on_cart_converges_to_thesis_tolerance() {
    use vidyn_optim::{projection_optimize, rollout_open_loop, DescentModel, ProjectionOptions, ProjectionStatus, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(pendulum_on_cart());
    let (dt, steps) = (0.01, 1000);
    let vi = VariationalIntegrator::new(model, Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    // desired θ: 130°·(1 − cos(π(t − 3)/2))/2 on 3 ≤ t ≤ 7 s; trep's weights (x 0.01, θ 100)
    let amp = 130f64.to_radians();
    let mut x_ref = vec![0.0; (steps + 1) * 4];
    for k in 0..=steps {
        let t = k as f64 * dt;
        if (3.0..=7.0).contains(&t) {
            x_ref[4 * k + 1] = amp * (1.0 - (std::f64::consts::PI * (t - 3.0) / 2.0).cos()) / 2.0;
        }
    }
    let q = DMatrix::from_diagonal(&DVector::from_vec(vec![0.01, 100.0, 0.01, 0.01]));
    let cost = QuadraticCost::new(vec![q.clone()], vec![DMatrix::from_element(1, 1, 1e-2)], q, x_ref.clone(), vec![]).unwrap();
    let opts = ProjectionOptions { model: DescentModel::QuasiNewton, tolerance: 1e-6, max_iterations: 300, ..ProjectionOptions::default() };
    // first iterate: the desired curve projected (trep's start)
    let res = projection_optimize(&dynamics, &cost, &[0.0; 4], &vec![0.0; steps], Some(&x_ref), &opts).unwrap();
    let theta_max = (0..=steps).map(|k| res.x[4 * k + 1]).fold(f64::MIN, f64::max);
    println!("{}: cost {:.6} (from {:.6}), {:.2} s, max θ {:.1}°", res.message, res.cost, res.cost_history[0], res.wall_time, theta_max.to_degrees());
    assert_eq!(res.status, ProjectionStatus::Converged, "{}", res.message);
    assert!(res.cost_history.windows(2).all(|w| w[1] < w[0]));
    assert!(res.cost < 0.5 * res.cost_history[0]);
    // the result is a trajectory of the VI: re-simulated open loop it is the same
    let (xs, _) = rollout_open_loop(&dynamics, &[0.0; 4], &res.u).unwrap();
    let defect = xs.iter().zip(&res.x).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(defect < 1e-8, "{defect}");
}

#[test]
fn ddp_and_newton_model_on_a_vi_are_not_implemented_yet() {
    use vidyn_optim::{ilqr, projection_optimize, DescentModel, Dynamics, IlqrOptions, Method, OptimError, ProjectionOptions, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let vi = VariationalIntegrator::new(model, Scheme::by_name("trapezoid", None).unwrap(), 0.02, None).unwrap();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    assert!(!dynamics.has_second_order());
    let cost = QuadraticCost::new(vec![DMatrix::identity(4, 4)], vec![DMatrix::identity(1, 1)], DMatrix::identity(4, 4), vec![0.0; 4], vec![]).unwrap();
    let e = ilqr(&dynamics, &cost, &[0.0; 4], &[0.0; 10], &IlqrOptions { method: Method::Ddp, ..IlqrOptions::default() }).unwrap_err();
    assert!(matches!(&e, OptimError::NotImplemented(m) if m.contains("variational integrator")), "{e}");
    let e = projection_optimize(&dynamics, &cost, &[0.0; 4], &[0.0; 10], None, &ProjectionOptions { model: DescentModel::Newton, ..ProjectionOptions::default() }).unwrap_err();
    assert!(matches!(&e, OptimError::NotImplemented(m) if m.contains("variational integrator")), "{e}");
}

#[test]
fn frame_cost_gradient_matches_finite_differences_and_acrobot_reaches() {
    use vidyn_optim::{ilqr, FramePositionCost, IlqrOptions, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::acrobot());
    let tip = model.frame_index("tip").unwrap();
    let target = [1.2, 0.0, 0.8];
    let inner = QuadraticCost::new(vec![DMatrix::identity(4, 4) * 1e-3], vec![DMatrix::identity(2, 2) * 1e-3], DMatrix::zeros(4, 4), vec![0.0; 4], vec![]).unwrap();
    let cost = FramePositionCost::new(model.clone(), inner, 4, tip, target, 0.1, 1e3).unwrap();
    let x = [0.4, 1.1, 0.7, -0.3];
    let u = [0.2, -0.1];
    let mut d = StageDerivatives::zeros(4, 2);
    cost.running_derivatives(0, &x, &u, &mut d).unwrap();
    assert!((d.l - cost.running_value(0, &x, &u).unwrap()).abs() < 1e-15);
    let h = 1e-6;
    for i in 0..4 {
        let (mut xp, mut xm) = (x, x);
        xp[i] += h;
        xm[i] -= h;
        let fd = (cost.running_value(0, &xp, &u).unwrap() - cost.running_value(0, &xm, &u).unwrap()) / (2.0 * h);
        assert!((fd - d.lx[i]).abs() < 1e-7 * (1.0 + fd.abs()), "{i}: {fd} vs {}", d.lx[i]);
    }
    // Gauss–Newton Hessian: w JᵀJ + the inner Hessian, symmetric positive semi-definite
    assert!((&d.lxx - d.lxx.transpose()).amax() == 0.0);
    assert!(d.lxx.symmetric_eigenvalues().iter().all(|&e| e >= -1e-12));
    // the tip reaches the target
    let dt = 0.02;
    let steps = 100;
    let vi = VariationalIntegrator::new(model.clone(), Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let dynamics = ViDynamics::new(&vi, None).unwrap();
    let res = ilqr(&dynamics, &cost, &[0.0; 4], &vec![0.0; 2 * steps], &IlqrOptions { max_iterations: 200, ..IlqrOptions::default() }).unwrap();
    let p = cost.position(&res.x[4 * steps..4 * steps + 2]).unwrap();
    println!("{}: tip at {:?}", res.message, p.as_slice());
    assert!(res.converged, "{}", res.message);
    assert!((p - nalgebra::Vector3::from(target)).norm() < 1e-2, "{p:?}");
}
