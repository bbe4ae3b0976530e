//! iLQR and LQR on variational integrators: cost derivatives, swing-up convergence,
//! feasibility of the result when re-simulated, closed-loop tracking.

mod common;

use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use vidyn_optim::{Cost, QuadraticCost, StageDerivatives, VelocityCost};
use vidyn_vi::StepInput;

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

/// On a tree with free-flyer and spherical joints: the gradient against central differences
/// along the tangent directions (`x ⊕ ±h e_i`, h = 1e-6: truncation ~h² against round-off
/// ~ε/h ≈ 2e-10 relative) and the Hessian against the Gauss–Newton `Jᵀ W J` of the residual
/// `r = y(x) ⊖ y_ref`, `J = ∂r/∂x` from central differences of `r(x ⊕ ±h e_i)`.
#[test]
fn velocity_cost_on_a_floating_base_matches_central_differences() {
    use vidyn_optim::StateSpace;
    use vidyn_rbd::Joint;
    let kinds = [Joint::FreeFlyer, Joint::Spherical, Joint::Revolute { axis: nalgebra::Vector3::z() }];
    let model = Arc::new(vidyn_rbd::builders::random_tree(4, 7, &kinds));
    let (nq, n) = (model.nq, model.nv);
    assert!(nq > n, "the tree needs a joint with a quaternion");
    let space = StateSpace::of_model(&model);
    let w = DMatrix::from_fn(2 * n, 2 * n, |i, j| if i == j { 1.0 + 0.1 * i as f64 } else { 0.02 });
    let mut x_ref = vidyn_rbd::neutral(&model);
    x_ref.extend((0..n).map(|i| 0.1 * i as f64 - 0.3));
    let inner = QuadraticCost::on_space(space.clone(), vec![w.clone()], vec![DMatrix::identity(1, 1)], w.clone(), x_ref.clone(), vec![]).unwrap();
    let cost = VelocityCost::new(Arc::clone(&model), inner).unwrap();
    let tangent: Vec<f64> = (0..n).map(|i| 0.3 * ((i * 7) as f64).sin()).collect();
    let mut x = vidyn_rbd::integrate(&model, &vidyn_rbd::neutral(&model), &tangent).unwrap();
    x.extend((0..n).map(|i| 0.5 * ((i * 3) as f64).cos()));
    let mut d = StageDerivatives::zeros(2 * n, 0);
    cost.terminal_derivatives(&x, &mut d).unwrap();
    let (h, ndx) = (1e-6, 2 * n);
    let moved = |i: usize, s: f64| {
        let mut e = vec![0.0; ndx];
        e[i] = s * h;
        let mut out = vec![0.0; nq + n];
        space.integrate(&x, &e, &mut out);
        out
    };
    let mut jac = DMatrix::zeros(ndx, ndx);
    for i in 0..ndx {
        let (xp, xm) = (moved(i, 1.0), moved(i, -1.0));
        let fd = (cost.terminal_value(&xp).unwrap() - cost.terminal_value(&xm).unwrap()) / (2.0 * h);
        assert!((fd - d.lx[i]).abs() < 1e-7 * (1.0 + fd.abs()), "l_x[{i}]: {fd} vs {}", d.lx[i]);
        let (mut dp, mut dm) = (vec![0.0; ndx], vec![0.0; ndx]);
        space.difference(&x_ref, &cost.velocity_state(&xp).unwrap(), &mut dp);
        space.difference(&x_ref, &cost.velocity_state(&xm).unwrap(), &mut dm);
        for r in 0..ndx {
            jac[(r, i)] = (dp[r] - dm[r]) / (2.0 * h);
        }
    }
    let gauss_newton = jac.transpose() * &w * &jac;
    let err = (&d.lxx - &gauss_newton).amax();
    assert!(err < 1e-7 * gauss_newton.amax(), "l_xx off Jᵀ W J by {err:e}");
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
    let inner = QuadraticCost::new(
        vec![w],
        vec![DMatrix::from_element(1, 1, 1e-2 * dt)],
        DMatrix::identity(4, 4) * 1e3,
        vec![0.0, std::f64::consts::PI, 0.0, 0.0],
        vec![],
    )
    .unwrap();
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
    let defect = common::dynamic_defect(&vi, &dynamics, &res.x, &res.u);
    assert!(defect < 1e-10, "{defect}");
    let full = dynamics.actuation().expand_all(&res.u);
    // and a whole open-loop rollout of the controls stays on the trajectory to well within
    // the goal's tolerance
    let traj = rollout(&vi, &[0.0; 2], &[0.0; 2], &full).unwrap();
    let again = dynamics.to_trajectory(&res.x, &res.u).unwrap();
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
    let cart =
        b.add_body(None, "cart", Joint::Prismatic { axis: Vector3::x() }, Se3::identity(), Inertia::new(10.0, Vector3::zeros(), Matrix3::zeros())).unwrap();
    b.add_body(
        Some(cart),
        "pendulum",
        Joint::Revolute { axis: Vector3::y() },
        Se3::identity(),
        Inertia::new(1.0, Vector3::new(0.0, 0.0, -1.0), Matrix3::zeros()),
    )
    .unwrap();
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
    let inner = QuadraticCost::new(
        vec![w],
        vec![DMatrix::from_element(1, 1, 1e-2 * dt)],
        DMatrix::identity(4, 4) * 1e3,
        vec![0.0, std::f64::consts::PI, 0.0, 0.0],
        vec![],
    )
    .unwrap();
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
        println!(
            "  J {:.14} expected {:.3e} actual {:.3e} α {} μ {:.1e} |∇J| {:.3e}",
            l.cost, l.expected_reduction_alpha, l.actual_reduction, l.alpha, l.mu, l.gradient_norm
        );
    }
    let last = ddp.log.iter().rfind(|l| l.alpha == 1.0 && l.actual_reduction > 1e-9).expect("DDP takes full steps near the optimum");
    let ratio = last.actual_reduction / last.expected_reduction_alpha;
    println!("DDP actual/expected decrease near the optimum: {ratio}");
    assert!((ratio - 1.0).abs() < 1e-2, "DDP actual/expected = {ratio}");
}

#[test]
fn frame_cost_gradient_matches_finite_differences_and_acrobot_reaches() {
    use vidyn_optim::{ilqr, IlqrOptions, PointCost, PointTrack, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::acrobot());
    let tip = model.frame_index("tip").unwrap();
    let target = [1.2, 0.0, 0.8];
    let inner =
        QuadraticCost::new(vec![DMatrix::identity(4, 4) * 1e-3], vec![DMatrix::identity(2, 2) * 1e-3], DMatrix::zeros(4, 4), vec![0.0; 4], vec![]).unwrap();
    let cost = PointCost::new(model.clone(), inner, 4, vec![PointTrack::reach(tip, target, 0.1, 1e3, 100)], 100).unwrap();
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
    let p = cost.position(vidyn_optim::TrackedPoint::Frame(tip), &nalgebra::Vector3::zeros(), &res.x[4 * steps..4 * steps + 2]).unwrap();
    println!("{}: tip at {:?}", res.message, p.as_slice());
    assert!(res.converged, "{}", res.message);
    assert!((p - nalgebra::Vector3::from(target)).norm() < 1e-2, "{p:?}");
}

/// A short trajectory of the acrobot (gravity) on the velocity state, from a moving start
/// under varying torques: `(x, u)`, row-major.
fn acrobot_velocity_trajectory(vi: &vidyn_vi::VariationalIntegrator, steps: usize) -> (Vec<f64>, Vec<f64>) {
    let dynamics = vidyn_optim::ViDynamics::new(vi, None).unwrap().with_velocity_state().unwrap();
    let y0 = [0.3, -0.4, 0.5, 0.2];
    let mut policy = |k: usize, _: &[f64], u: &mut [f64]| {
        u[0] = (0.7 * k as f64).sin();
        u[1] = 0.5 * (1.3 * k as f64).cos();
    };
    vidyn_optim::Dynamics::rollout(&dynamics, &y0, steps, &mut policy).unwrap()
}

/// `A`, `B` on the velocity state `(q, v)` are the VI's exact `(q, p)` Jacobians mapped by the
/// Legendre transform's Jacobians — checked against `vidyn_vi`'s own
/// `momentum_with_jacobian`/`velocity_with_jacobian` (a different computation of `M v` and
/// `∂(M v)/∂q`, so the two linearise at steps that agree to the Newton tolerance 1e-12, not
/// bit for bit: 1e-10), and against central differences of the step `y_k ↦ y_{k+1}` (h = 1e-6:
/// truncation ~h² ≈ 1e-12 and round-off ~ε/h ≈ 2e-10 relative, the Newton solves converged to
/// round-off). `linearize` (chunks in parallel) and `linearize_steps` agree bit for bit.
#[test]
fn velocity_state_jacobians_are_exact() {
    use vidyn_optim::Dynamics;
    let model = Arc::new(vidyn_rbd::builders::acrobot());
    let vi = vidyn_vi::VariationalIntegrator::new(model, vidyn_vi::Scheme::by_name("trapezoid", None).unwrap(), 0.01, None).unwrap();
    let steps = 12;
    let (x, u) = acrobot_velocity_trajectory(&vi, steps);
    let dynamics = vidyn_optim::ViDynamics::new(&vi, None).unwrap().with_velocity_state().unwrap();
    let (a, b) = dynamics.linearize(&x, &u).unwrap();
    let (mut a2, mut b2) = (vec![DMatrix::zeros(4, 4); steps], vec![DMatrix::zeros(4, 2); steps]);
    dynamics.linearize_steps(0, &x, &u, &mut a2, &mut b2).unwrap();
    assert_eq!((&a, &b), (&a2, &b2));
    let momentum = vidyn_optim::ViDynamics::new(&vi, None).unwrap();
    let mut ws = vi.workspace();
    let (mut jp, mut jv, mut p, mut v) = (DMatrix::zeros(4, 4), DMatrix::zeros(4, 4), [0.0; 2], [0.0; 2]);
    for k in 0..steps {
        let (yk, yn) = (&x[4 * k..4 * k + 4], &x[4 * k + 4..4 * k + 8]);
        let uk = &u[2 * k..2 * k + 2];
        // oracle 1: the (q, p) Jacobians between the Legendre maps' Jacobians
        vi.momentum_with_jacobian(&mut ws, &yk[..2], &yk[2..], &mut p, &mut jp).unwrap();
        let xk: Vec<f64> = yk[..2].iter().chain(&p).copied().collect();
        let (xs, _) = momentum.rollout(&xk, 1, &mut |_, _, w: &mut [f64]| w.copy_from_slice(uk)).unwrap();
        let (ax, bx) = momentum.linearize(&xs, uk).unwrap();
        vi.velocity_with_jacobian(&mut ws, &xs[4..6], &xs[6..8], &mut v, &mut jv).unwrap();
        let (ay, by) = (&jv * &ax[0] * &jp, &jv * &bx[0]);
        assert!((&a[k] - &ay).amax() <= 1e-10 * ay.amax().max(1.0), "step {k}: A {} vs {ay}", a[k]);
        assert!((&b[k] - &by).amax() <= 1e-10 * by.amax().max(1.0), "step {k}: B {} vs {by}", b[k]);
        // oracle 2: central differences of the step on (q, v)
        let h = 1e-6;
        let next = |y: &[f64], w: &[f64]| dynamics.rollout(y, 1, &mut |_, _, o: &mut [f64]| o.copy_from_slice(w)).unwrap().0[4..].to_vec();
        // the same step from another Newton start: equal to the Newton tolerance
        assert!(next(yk, uk).iter().zip(yn).all(|(s, t)| (s - t).abs() <= 1e-10 * (1.0 + t.abs())));
        for j in 0..6 {
            let (mut yp, mut ym, mut up, mut um) = (yk.to_vec(), yk.to_vec(), uk.to_vec(), uk.to_vec());
            if j < 4 {
                yp[j] += h;
                ym[j] -= h;
            } else {
                up[j - 4] += h;
                um[j - 4] -= h;
            }
            let (fp, fm) = (next(&yp, &up), next(&ym, &um));
            for r in 0..4 {
                let fd = (fp[r] - fm[r]) / (2.0 * h);
                let exact = if j < 4 { a[k][(r, j)] } else { b[k][(r, j - 4)] };
                assert!((fd - exact).abs() <= 1e-7 * (1.0 + exact.abs()), "step {k}, ({r}, {j}): {fd} vs {exact}");
            }
        }
    }
}

/// The velocity state on a tree with free-flyer and spherical joints: `A`, `B` of the step on
/// `y = (q, v)` against central differences on the manifold (`y ⊕ ±h e_j` by the state
/// space's `integrate`, the results compared by its `difference`; h = 1e-6: truncation ~h²,
/// round-off ~ε/h ≈ 2e-10 against entries of order one), and `linearize_steps` the same bits
/// as `linearize`.
#[test]
fn velocity_state_jacobians_on_a_floating_base_are_exact() {
    use vidyn_optim::Dynamics;
    use vidyn_rbd::Joint;
    let kinds = [Joint::FreeFlyer, Joint::Spherical, Joint::Revolute { axis: nalgebra::Vector3::z() }];
    let model = Arc::new(vidyn_rbd::builders::random_tree(4, 7, &kinds));
    let (nq, n) = (model.nq, model.nv);
    let vi = vidyn_vi::VariationalIntegrator::new(Arc::clone(&model), vidyn_vi::Scheme::by_name("trapezoid", None).unwrap(), 0.01, None).unwrap();
    let dynamics = vidyn_optim::ViDynamics::new(&vi, None).unwrap().with_velocity_state().unwrap();
    let space = dynamics.state_space();
    let (nx, ndx, steps) = (nq + n, 2 * n, 4);
    let tangent: Vec<f64> = (0..n).map(|i| 0.2 * ((i * 5) as f64).sin()).collect();
    let mut y0 = vidyn_rbd::integrate(&model, &vidyn_rbd::neutral(&model), &tangent).unwrap();
    y0.extend((0..n).map(|i| 0.4 * ((i * 3) as f64).cos()));
    let u: Vec<f64> = (0..steps * n).map(|i| 0.3 * (i as f64 * 0.7).sin()).collect();
    let (x, _) = dynamics.rollout(&y0, steps, &mut |k, _, w: &mut [f64]| w.copy_from_slice(&u[k * n..(k + 1) * n])).unwrap();
    let (a, b) = dynamics.linearize(&x, &u).unwrap();
    let (mut a2, mut b2) = (vec![DMatrix::zeros(ndx, ndx); steps], vec![DMatrix::zeros(ndx, n); steps]);
    dynamics.linearize_steps(0, &x, &u, &mut a2, &mut b2).unwrap();
    assert_eq!((&a, &b), (&a2, &b2));
    let h = 1e-6;
    let next = |y: &[f64], w: &[f64]| dynamics.rollout(y, 1, &mut |_, _, o: &mut [f64]| o.copy_from_slice(w)).unwrap().0[nx..].to_vec();
    for k in 0..steps {
        let (yk, uk) = (&x[k * nx..(k + 1) * nx], &u[k * n..(k + 1) * n]);
        for j in 0..ndx + n {
            let (mut yp, mut ym, mut up, mut um) = (yk.to_vec(), yk.to_vec(), uk.to_vec(), uk.to_vec());
            if j < ndx {
                let mut e = vec![0.0; ndx];
                e[j] = h;
                space.integrate(yk, &e, &mut yp);
                e[j] = -h;
                space.integrate(yk, &e, &mut ym);
            } else {
                up[j - ndx] += h;
                um[j - ndx] -= h;
            }
            let mut d = vec![0.0; ndx];
            space.difference(&next(&ym, &um), &next(&yp, &up), &mut d);
            for (r, dr) in d.iter().enumerate() {
                let fd = dr / (2.0 * h);
                let exact = if j < ndx { a[k][(r, j)] } else { b[k][(r, j - ndx)] };
                assert!((fd - exact).abs() <= 1e-6 * (1.0 + exact.abs()), "step {k}, ({r}, {j}): {fd} vs {exact}");
            }
        }
    }
}

/// The gravity-free cart-pole swing-up of `BENCHMARKS.md`: iLQR on `(q, v)` (cost used as it
/// is) and on `(q, p)` (the same cost through [`VelocityCost`]) reach the same optimum, the
/// former in fewer iterations (6 against 8: in `(q, v)` the cost is exactly quadratic). Its
/// result, expressed in `(q, p)`, is a VI trajectory (each step re-solved lands on the next
/// state), and its gains act on `(q, p)` as the `(q, v)` gains on the mapped perturbation;
/// the conversion gives the same bits from kept Legendre data as from fresh.
#[test]
fn ilqr_on_the_velocity_state_reaches_the_same_optimum_in_fewer_iterations() {
    let mut m = vidyn_rbd::builders::cartpole();
    m.gravity = vidyn_spatial::Motion::zero();
    let model = Arc::new(m);
    let (dt, steps) = (0.02, 125);
    let vi = vidyn_vi::VariationalIntegrator::new(model.clone(), vidyn_vi::Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let q = DMatrix::from_diagonal(&DVector::from_vec(vec![dt, dt, 0.1 * dt, 0.1 * dt]));
    let r = DMatrix::from_diagonal(&DVector::from_vec(vec![1e-2 * dt, 1e2 * dt]));
    let inner = QuadraticCost::new(vec![q], vec![r], DMatrix::identity(4, 4) * 1e3, vec![0.0, std::f64::consts::PI, 0.0, 0.0], vec![]).unwrap();
    let opts = vidyn_optim::IlqrOptions { max_iterations: 200, tolerance: 1e-9, ..vidyn_optim::IlqrOptions::default() };
    let u0 = vec![0.0; 2 * steps];
    let on_p = vidyn_optim::ViDynamics::new(&vi, None).unwrap();
    let by_p = vidyn_optim::ilqr(&on_p, &VelocityCost::new(model.clone(), inner.clone()).unwrap(), &[0.0; 4], &u0, &opts).unwrap();
    let on_v = vidyn_optim::ViDynamics::new(&vi, None).unwrap().with_velocity_state().unwrap();
    let x0 = on_v.state_from_momentum(&[0.0; 2], &[0.0; 2]).unwrap();
    let mut by_v = vidyn_optim::ilqr(&on_v, &inner, &x0, &u0, &opts).unwrap();
    assert!(by_p.converged && by_v.converged, "{} / {}", by_p.message, by_v.message);
    assert!((by_v.cost - by_p.cost).abs() <= 1e-8 * by_p.cost, "{} vs {}", by_v.cost, by_p.cost);
    assert!(by_v.iterations < by_p.iterations, "{} vs {}", by_v.iterations, by_p.iterations);
    let (x_v, gains_v) = (by_v.x.clone(), by_v.gains.clone());
    // from the Legendre data the last linearisation kept, and computed afresh: bit for bit
    let mut afresh = by_v.clone();
    vidyn_optim::ViDynamics::new(&vi, None).unwrap().with_velocity_state().unwrap().result_in_momentum(&mut afresh).unwrap();
    on_v.result_in_momentum(&mut by_v).unwrap();
    assert!(by_v.x.iter().zip(&afresh.x).all(|(a, b)| a.to_bits() == b.to_bits()));
    let traj = on_v.to_trajectory(&x_v, &by_v.u).unwrap();
    for k in 0..=steps {
        assert_eq!((&traj.q[2 * k..2 * k + 2], &traj.p[2 * k..2 * k + 2]), (&by_v.x[4 * k..4 * k + 2], &by_v.x[4 * k + 2..4 * k + 4]));
    }
    assert!(by_v.gains.iter().zip(&afresh.gains).all(|(a, b)| a.iter().zip(b.iter()).all(|(x, y)| x.to_bits() == y.to_bits())));
    let mut ws = vi.workspace();
    let (mut qn, mut pn) = ([0.0; 2], [0.0; 2]);
    for k in 0..steps {
        let xk = &by_v.x[4 * k..4 * k + 4];
        vi.step(&mut ws, StepInput::new(k, &xk[..2], &xk[2..], &by_v.u[2 * k..2 * k + 2]), &mut qn, &mut pn).unwrap();
        let defect = qn.iter().chain(&pn).zip(&by_v.x[4 * k + 4..4 * k + 8]).fold(0.0_f64, |d, (a, b)| d.max((a - b).abs()));
        assert!(defect < 1e-10, "step {k}: defect {defect}");
        assert_eq!(&by_v.x[4 * k..4 * k + 2], &x_v[4 * k..4 * k + 2]);
    }
    // K_x δx = K_y δy to first order, δy the velocity-state image of δx: the rest is second
    // order, relative size ~|δx| ≈ 4e-6 (a gain left in (q, v) would be off by O(1))
    let (k, d) = (60, [1e-6, -2e-6, 3e-6, 1e-6]);
    let xk = &by_v.x[4 * k..4 * k + 4];
    let xd: Vec<f64> = xk.iter().zip(&d).map(|(a, b)| a + b).collect();
    let yd = on_v.state_from_momentum(&xd[..2], &xd[2..]).unwrap();
    let dy = DVector::from_iterator(4, yd.iter().zip(&x_v[4 * k..4 * k + 4]).map(|(a, b)| a - b));
    let (kx, ky) = (&by_v.gains[k] * DVector::from_row_slice(&d), &gains_v[k] * dy);
    assert!((&kx - &ky).amax() <= 1e-4 * kx.amax(), "{kx} vs {ky}");
    let unmapped = &gains_v[k] * DVector::from_row_slice(&d);
    assert!((&kx - &unmapped).amax() > 1e-2 * kx.amax(), "the mapping must matter here");
}

/// The velocity state has no second derivatives (DDP fails with a clear error, as the direct
/// call does), and is refused on a VI with kinematic joints.
#[test]
fn velocity_state_limits_are_errors() {
    use vidyn_optim::{Dynamics, OptimError};
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let vi = vidyn_vi::VariationalIntegrator::new(model, vidyn_vi::Scheme::by_name("trapezoid", None).unwrap(), 0.02, None).unwrap();
    let dynamics = vidyn_optim::ViDynamics::new(&vi, None).unwrap().with_velocity_state().unwrap();
    assert!(!dynamics.has_second_order());
    let mut so = vidyn_optim::SecondOrder::zeros(4, 2);
    assert!(matches!(dynamics.second_order_contracted(0, &[0.0; 4], &[0.0; 2], &[1.0; 4], &mut so), Err(OptimError::NotImplemented(_))));
    let cost = QuadraticCost::new(vec![DMatrix::identity(4, 4)], vec![DMatrix::identity(2, 2)], DMatrix::identity(4, 4), vec![0.0; 4], vec![]).unwrap();
    let opts = vidyn_optim::IlqrOptions { method: vidyn_optim::Method::Ddp, ..vidyn_optim::IlqrOptions::default() };
    assert!(vidyn_optim::ilqr(&dynamics, &cost, &[0.0; 4], &[0.0; 20], &opts).is_err());
    let kinematic = vi.clone().with_kinematic(&[1]).unwrap();
    assert!(matches!(vidyn_optim::ViDynamics::new(&kinematic, None).unwrap().with_velocity_state(), Err(OptimError::InvalidInput(_))));
}

/// [`vidyn_optim::Cancellable`] leaves a run that is not cancelled bit for bit as it was
/// (iLQR on the cart-pole swing-up), and a run whose control is cancelled — before it starts,
/// or by the poll hook after some steps — ends with `OptimError::Cancelled` instead of
/// running on (a failed line-search trial must not swallow it).
#[test]
fn cancellable_dynamics_stop_a_run_and_change_nothing_else() {
    use std::time::Duration;
    use vidyn_batch::Control;
    use vidyn_optim::{ilqr, Cancellable, IlqrOptions, OptimError, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let (dt, steps) = (0.02, 100);
    let vi = VariationalIntegrator::new(model, Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    let w = DMatrix::from_diagonal(&DVector::from_vec(vec![dt, dt, 0.1 * dt, 0.1 * dt]));
    let cost = QuadraticCost::new(
        vec![w],
        vec![DMatrix::from_element(1, 1, 1e-2 * dt)],
        DMatrix::identity(4, 4) * 1e3,
        vec![0.0, std::f64::consts::PI, 0.0, 0.0],
        vec![],
    )
    .unwrap();
    let opts = IlqrOptions { max_iterations: 30, tolerance: 1e-12, ..IlqrOptions::default() };
    let plain = ilqr(&dynamics, &cost, &[0.0; 4], &vec![0.0; steps], &opts).unwrap();
    let control = Control::new();
    let wrapped = ilqr(&Cancellable::new(&dynamics, &control), &cost, &[0.0; 4], &vec![0.0; steps], &opts).unwrap();
    let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!((bits(&plain.x), bits(&plain.u), plain.iterations), (bits(&wrapped.x), bits(&wrapped.u), wrapped.iterations));
    assert!(control.done() >= steps * plain.iterations, "{} steps counted", control.done());
    control.cancel();
    let r = ilqr(&Cancellable::new(&dynamics, &control), &cost, &[0.0; 4], &vec![0.0; steps], &opts);
    assert!(matches!(r, Err(OptimError::Cancelled)), "{:?}", r.map(|r| r.message));
    // cancelled from the poll hook in the middle of the run (after 5 rollouts' worth of steps)
    let hook = Control::with_poll(Duration::ZERO, |c| {
        if c.done() >= 5 * steps {
            c.cancel();
        }
    });
    let r = ilqr(&Cancellable::new(&dynamics, &hook), &cost, &[0.0; 4], &vec![0.0; steps], &opts);
    assert!(matches!(r, Err(OptimError::Cancelled)), "{:?}", r.map(|r| r.message));
    assert!(hook.done() < plain.iterations * 3 * steps, "ran on after the cancel: {} steps", hook.done());
}

/// The integrator is immutable: what a solve keeps lives in its own dynamics (Pinocchio's
/// Model/Data split), so two iLQR solves on one integrator from two threads at once give,
/// bit for bit, what each gives alone (two targets, so that their rollouts differ and would
/// overwrite each other's solved steps if they shared a store).
#[test]
fn concurrent_solves_on_one_integrator_are_independent() {
    use vidyn_optim::{ilqr, IlqrOptions, IlqrResult, ViDynamics};
    use vidyn_vi::{Scheme, VariationalIntegrator};
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let (dt, steps) = (0.02, 60);
    let vi = VariationalIntegrator::new(model, Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let solve = |target: f64| -> IlqrResult {
        let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
        let w = DMatrix::from_diagonal(&DVector::from_vec(vec![dt, dt, 0.1 * dt, 0.1 * dt]));
        let cost =
            QuadraticCost::new(vec![w], vec![DMatrix::from_element(1, 1, 1e-2 * dt)], DMatrix::identity(4, 4) * 1e3, vec![0.0, target, 0.0, 0.0], vec![])
                .unwrap();
        ilqr(&dynamics, &cost, &[0.0; 4], &vec![0.0; steps], &IlqrOptions { max_iterations: 15, ..IlqrOptions::default() }).unwrap()
    };
    let bits = |r: &IlqrResult| (r.x.iter().chain(&r.u).map(|v| v.to_bits()).collect::<Vec<_>>(), r.iterations);
    let alone = [bits(&solve(1.0)), bits(&solve(-2.0))];
    for _ in 0..3 {
        let together = std::thread::scope(|s| {
            let a = s.spawn(|| bits(&solve(1.0)));
            let b = s.spawn(|| bits(&solve(-2.0)));
            [a.join().unwrap(), b.join().unwrap()]
        });
        assert_eq!(together, alone);
    }
}
