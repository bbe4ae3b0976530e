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

/// The costs that say so ([`Cost::value_in_derivatives`]) give in `running_derivatives`'s `l`
/// exactly `running_value` — iLQR takes a trial's stage costs from there and sums them into the
/// verdict, which must not depend on who computed what. Many states and controls spread over
/// several orders of magnitude, on a dense weight and a 12-link chain (x_ref per step, u_ref).
#[test]
fn stage_values_from_derivatives_are_the_values_bit_for_bit() {
    let model = Arc::new(vidyn_rbd::builders::pendulum_chain(12, false));
    let (n, steps) = (model.nv, 5);
    let w = DMatrix::from_fn(2 * n, 2 * n, |i, j| if i == j { 1.0 + i as f64 } else { 0.1 / (1.0 + (i + j) as f64) });
    let r = DMatrix::from_fn(n, n, |i, j| if i == j { 0.5 } else { 0.01 });
    let x_ref: Vec<f64> = (0..(steps + 1) * 2 * n).map(|i| (i as f64 * 0.37).sin()).collect();
    let u_ref: Vec<f64> = (0..steps * n).map(|i| (i as f64 * 0.71).cos()).collect();
    let quad = QuadraticCost::new(vec![w.clone()], vec![r], w, x_ref, u_ref).unwrap();
    let velocity = VelocityCost::new(model, quad.clone()).unwrap();
    assert!(quad.value_in_derivatives() && velocity.value_in_derivatives());
    let costs: [&dyn Cost; 2] = [&quad, &velocity];
    let mut d = StageDerivatives::zeros(2 * n, n);
    for trial in 0..50_usize {
        let scale = 10f64.powi(trial as i32 % 7 - 3);
        let x: Vec<f64> = (0..2 * n).map(|i| scale * ((trial * 31 + i) as f64 * 1.3).sin()).collect();
        let u: Vec<f64> = (0..n).map(|i| scale * ((trial * 17 + i) as f64 * 0.9).cos()).collect();
        let k = trial % steps;
        for cost in costs {
            d.clear();
            cost.running_derivatives(k, &x, &u, &mut d).unwrap();
            assert_eq!(d.l.to_bits(), cost.running_value(k, &x, &u).unwrap().to_bits(), "trial {trial}");
        }
    }
}

/// The Hessian is the Gauss–Newton one `Jᵀ W J`, `J = ∂y/∂x` here by central differences of
/// `y(x)` (h = 1e-6: truncation ~h² ≪ round-off ~ε/h ≈ 2e-10 relative).
#[test]
fn velocity_cost_hessian_is_gauss_newton() {
    let model = Arc::new(vidyn_rbd::builders::acrobot());
    let w = DMatrix::from_fn(4, 4, |i, j| if i == j { 1.0 + i as f64 } else { 0.1 });
    let inner = QuadraticCost::new(vec![w.clone()], vec![DMatrix::identity(2, 2)], w.clone(), vec![0.3, -0.2, 0.5, 0.1], vec![]).unwrap();
    let cost = VelocityCost::new(model, inner).unwrap();
    let x = [0.4, 1.1, 0.7, -0.3];
    let h = 1e-6;
    let mut jac = DMatrix::zeros(4, 4);
    for i in 0..4 {
        let (mut xp, mut xm) = (x, x);
        xp[i] += h;
        xm[i] -= h;
        let (yp, ym) = (cost.velocity_state(&xp).unwrap(), cost.velocity_state(&xm).unwrap());
        for r in 0..4 {
            jac[(r, i)] = (yp[r] - ym[r]) / (2.0 * h);
        }
    }
    let expected = jac.transpose() * &w * &jac;
    let mut d = StageDerivatives::zeros(4, 2);
    cost.running_derivatives(0, &x, &[0.2, -0.1], &mut d).unwrap();
    assert!((&d.lxx - &expected).amax() < 1e-7 * expected.amax().max(1.0), "{} vs {expected}", d.lxx);
    let mut t = StageDerivatives::zeros(4, 0);
    cost.terminal_derivatives(&x, &mut t).unwrap();
    assert!((&t.lxx - &expected).amax() < 1e-7 * expected.amax().max(1.0));
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
    // dynamically feasible: every step, re-solved by the VI from the optimiser's own (q_k, p_k)
    // and u_k with the plain rollout's Newton start, lands on (q_{k+1}, p_{k+1}). (A rollout of
    // the whole control sequence is not compared: the optimiser's rollouts start Newton
    // elsewhere, so each step agrees only to the Newton tolerance, 1e-12 relative, and the
    // swing-up amplifies those differences along the horizon.)
    let full = dynamics.full_controls(&res.u);
    let mut ws = vi.workspace();
    let (mut qn, mut pn) = ([0.0; 2], [0.0; 2]);
    let mut defect = 0.0_f64;
    for k in 0..steps {
        let (xk, next) = (&res.x[4 * k..4 * k + 4], &res.x[4 * k + 4..4 * k + 8]);
        vi.step(&mut ws, k, &xk[..2], &xk[2..], &full[2 * k..2 * k + 2], None, &mut qn, &mut pn).unwrap();
        defect = qn.iter().chain(&pn).zip(next).fold(defect, |m, (a, b)| m.max((a - b).abs()));
    }
    assert!(defect < 1e-10, "{defect}");
    // and a whole open-loop rollout of the controls stays on the trajectory to well within
    // the goal's tolerance
    let traj = rollout(&vi, &[0.0; 2], &[0.0; 2], &full).unwrap();
    let again = dynamics.to_trajectory(&res.x, &res.u);
    let drift = traj.q.iter().zip(&again.q).chain(traj.p.iter().zip(&again.p)).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
    assert!(drift < 1e-6, "{drift}");
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

/// The VI's contracted second derivatives through `ViDynamics` (actuated selection) against
/// central differences of its `B` (h = 1e-5: the exact first derivatives are differenced, the
/// rounding of A's momentum rows dominates below that; tolerance 1e-6 relative).
#[test]
fn vi_second_order_contracted_matches_differences_of_the_linearisation() {
    use vidyn_optim::{Dynamics, SecondOrder, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::acrobot());
    let vi = VariationalIntegrator::new(model, Scheme::midpoint(), 0.02, None).unwrap();
    let dynamics = ViDynamics::new(&vi, Some(vec![1])).unwrap();
    assert!(dynamics.has_second_order());
    let (x, u, w) = ([0.3, -0.5, 0.2, 0.1], [0.7], [0.2, -0.4, 1.0, 0.5]);
    let mut so = SecondOrder::zeros(4, 1);
    dynamics.second_order_contracted(0, &x, &u, &w, &mut so).unwrap();
    let b_at = |x: &[f64], u: f64| {
        let xs: Vec<f64> = x.iter().chain(x.iter()).copied().collect(); // (x_0, x_1): only x_0 and u matter
        let (_, b) = dynamics.linearize(&xs, &[u]).unwrap();
        (0..4).map(|i| b[0][(i, 0)]).collect::<Vec<f64>>()
    };
    let h = 1e-5;
    let contract = |v: Vec<f64>| v.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
    let fd_uu = (contract(b_at(&x, u[0] + h)) - contract(b_at(&x, u[0] - h))) / (2.0 * h);
    assert!((so.huu[(0, 0)] - fd_uu).abs() < 1e-6 * (1.0 + fd_uu.abs()), "huu {} vs {fd_uu}", so.huu[(0, 0)]);
    for j in 0..4 {
        let (mut xp, mut xm) = (x.to_vec(), x.to_vec());
        xp[j] += h;
        xm[j] -= h;
        let fd = (contract(b_at(&xp, u[0])) - contract(b_at(&xm, u[0]))) / (2.0 * h);
        assert!((so.hux[(0, j)] - fd).abs() < 1e-6 * (1.0 + fd.abs()), "hux[{j}] {} vs {fd}", so.hux[(0, j)]);
    }
}

/// Full DDP on the VI's exact second derivatives against iLQR on the cart-pole swing-up, both
/// started near the optimum (from a rough iLQR solve, since from zero controls the two can reach
/// different local optima of this non-convex problem): the same optimum, fewer iterations, and
/// full steps whose actual decrease matches DDP's prediction.
#[test]
fn ddp_on_a_vi_converges_in_fewer_iterations_than_ilqr() {
    use vidyn_optim::{ilqr, IlqrOptions, Method, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let (dt, steps) = (0.02, 100);
    let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), dt, None).unwrap();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    let w = DMatrix::from_diagonal(&DVector::from_vec(vec![dt, dt, 0.1 * dt, 0.1 * dt]));
    let inner = QuadraticCost::new(vec![w], vec![DMatrix::from_element(1, 1, 1e-2 * dt)], DMatrix::identity(4, 4) * 1e3, vec![0.0, std::f64::consts::PI, 0.0, 0.0], vec![]).unwrap();
    // a quadratic cost on x = (q, p) itself: its Hessian is exact (a velocity cost's would be
    // Gauss–Newton), so DDP's model is exact to second order and its predictions can be checked
    let cost = inner;
    let rough = ilqr(&dynamics, &cost, &[0.0; 4], &vec![0.0; steps], &IlqrOptions { max_iterations: 400, tolerance: 1e-4, ..IlqrOptions::default() }).unwrap();
    assert!(rough.converged, "{}", rough.message);
    let mut runs = Vec::new();
    for method in [Method::Ilqr, Method::Ddp] {
        let opts = IlqrOptions { method, max_iterations: 400, tolerance: 1e-12, ..IlqrOptions::default() };
        let res = ilqr(&dynamics, &cost, &[0.0; 4], &rough.u, &opts).unwrap();
        println!("{method:?}: {} iterations, cost {:.10}, {:.3} s", res.iterations, res.cost, res.wall_time);
        assert!(res.converged, "{method:?}: {}", res.message);
        runs.push(res);
    }
    let (il, ddp) = (&runs[0], &runs[1]);
    assert!((il.cost - ddp.cost).abs() < 1e-6 * il.cost, "same optimum: {} vs {}", il.cost, ddp.cost);
    assert!(ddp.iterations < il.iterations, "DDP {} vs iLQR {} iterations", ddp.iterations, il.iterations);
    for l in &ddp.log {
        println!("  J {:.14} expected {:.3e} actual {:.3e} α {} μ {:.1e} |∇J| {:.3e}", l.cost, l.expected_reduction_alpha, l.actual_reduction, l.alpha, l.mu, l.gradient_norm);
    }
    let last = ddp.log.iter().rfind(|l| l.alpha == 1.0 && l.actual_reduction > 1e-9).expect("DDP takes full steps near the optimum");
    let ratio = last.actual_reduction / last.expected_reduction_alpha;
    println!("DDP actual/expected decrease near the optimum: {ratio}");
    assert!((ratio - 1.0).abs() < 1e-2, "DDP actual/expected = {ratio}");
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
