//! Multiple shooting (FDDP, `vidyn_optim::fddp`) from infeasible state guesses: on LQ
//! problems against iLQR's optimum, and on the VI cart-pole swing-up from a state-interpolated
//! guess.

mod common;

use nalgebra::{DMatrix, DVector};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_optim::{fddp, ilqr, IlqrOptions, LinearDynamics, QuadraticCost, VelocityCost, ViDynamics};
use vidyn_vi::{Scheme, VariationalIntegrator};

/// A mildly unstable time-varying LQ problem: dynamics, cost, start.
fn lq(seed: u64, nx: usize, nu: usize, steps: usize) -> (LinearDynamics, QuadraticCost, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut random = |r: usize, c: usize, s: f64| DMatrix::from_fn(r, c, |_, _| s * rng.random_range(-1.0..1.0));
    let a = (0..steps).map(|_| DMatrix::identity(nx, nx) + random(nx, nx, 0.2)).collect();
    let b = (0..steps).map(|_| random(nx, nu, 1.0)).collect();
    let x_ref: Vec<f64> = random(nx, 1, 1.0).as_slice().to_vec();
    let cost =
        QuadraticCost::new(vec![DMatrix::identity(nx, nx)], vec![DMatrix::identity(nu, nu) * 0.1], DMatrix::identity(nx, nx) * 10.0, x_ref, vec![]).unwrap();
    let x0 = random(nx, 1, 1.0).as_slice().to_vec();
    (LinearDynamics::new(a, b).unwrap(), cost, x0)
}

/// A random state guess (entries in ±3, far from any rollout) and controls (±1).
fn random_guess(seed: u64, nx: usize, nu: usize, steps: usize) -> (Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x_guess = (0..(steps + 1) * nx).map(|_| rng.random_range(-3.0..3.0)).collect();
    let u_guess = (0..steps * nu).map(|_| rng.random_range(-1.0..1.0)).collect();
    (x_guess, u_guess)
}

/// On an LQ problem the Gauss–Newton model is exact, so FDDP's first full step from any state
/// guess (here random states, far from a rollout, not even starting at `x0`) closes every gap
/// and lands on the optimum — the one iLQR reaches from a zero-control rollout — to round-off;
/// the next backward pass finds nothing more to gain. (Without the state regularisation,
/// whose proximal term shortens the first steps.)
#[test]
fn lq_problems_are_solved_in_one_step_from_any_guess() {
    for seed in 0..5 {
        let (nx, nu, steps) = (4, 2, 30);
        let (dynamics, cost, x0) = lq(seed, nx, nu, steps);
        let (x_guess, u_guess) = random_guess(100 + seed, nx, nu, steps);
        let opts = IlqrOptions { xreg: Some(0.0), ..IlqrOptions::default() };
        let shot = fddp(&dynamics, &cost, &x0, &x_guess, &u_guess, &opts).unwrap();
        let reference = ilqr(&dynamics, &cost, &x0, &vec![0.0; steps * nu], &opts).unwrap();
        assert!(shot.converged, "{}", shot.message);
        assert!(shot.message.contains("feasible") && !shot.message.contains("infeasible"), "{}", shot.message);
        assert_eq!(shot.log[0].alpha, 1.0, "the first step is full");
        assert!((shot.cost_history[1] - reference.cost).abs() < 1e-9 * reference.cost.abs().max(1.0), "{} vs {}", shot.cost_history[1], reference.cost);
        let du = shot.u.iter().zip(&reference.u).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
        let dx = shot.x.iter().zip(&reference.x).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(du < 1e-8 && dx < 1e-8, "seed {seed}: u off by {du:e}, x by {dx:e}");
        let start = shot.x[..nx].iter().zip(&x0).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(start < 1e-12, "the trajectory starts at x0");
    }
}

/// The state regularisation `xreg` (`V_xx + ρ 1` in the backward pass) moves no fixed point:
/// on LQ problems, from random state guesses, FDDP with `ρ` = 1 (the cost's own state weight)
/// reaches iLQR's unregularised optimum, in more than the one step the exact model needs
/// (a proximal term shortens every step), and so does iLQR with it (measured: 22–23
/// iterations, controls within 3.3e-7, what the stopping tolerance 1e-12 leaves).
#[test]
fn state_regularisation_keeps_the_optimum() {
    for seed in 0..3 {
        let (nx, nu, steps) = (4, 2, 30);
        let (dynamics, cost, x0) = lq(seed, nx, nu, steps);
        let (x_guess, u_guess) = random_guess(200 + seed, nx, nu, steps);
        let reference = ilqr(&dynamics, &cost, &x0, &vec![0.0; steps * nu], &IlqrOptions { xreg: Some(0.0), ..IlqrOptions::default() }).unwrap();
        let opts = IlqrOptions { xreg: Some(1.0), tolerance: 1e-12, max_iterations: 500, ..IlqrOptions::default() };
        let shot = fddp(&dynamics, &cost, &x0, &x_guess, &u_guess, &opts).unwrap();
        let direct = ilqr(&dynamics, &cost, &x0, &vec![0.0; steps * nu], &opts).unwrap();
        for (name, res) in [("fddp", &shot), ("ilqr", &direct)] {
            assert!(res.converged, "seed {seed}, {name}: {}", res.message);
            assert!(res.iterations > 1, "seed {seed}, {name}: the regularised steps are shorter than the exact one");
            let du = res.u.iter().zip(&reference.u).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(du < 1e-6, "seed {seed}, {name}: controls off by {du:e}");
            assert!((res.cost - reference.cost).abs() < 1e-9 * reference.cost.abs().max(1.0), "seed {seed}, {name}: {} vs {}", res.cost, reference.cost);
        }
    }
}

/// With control limits (a box QP for the feed-forward step, gains on the free controls, the
/// forward pass clamped, as iLQR's and crocoddyl's BoxFDDP): on box-constrained LQ problems,
/// whose optimum is unique (a strictly convex QP), FDDP from random state guesses reaches
/// iLQR's optimum (measured: controls within 1e-13), every control within its limits and
/// some at them.
#[test]
fn limited_lq_problems_reach_ilqrs_optimum_from_any_guess() {
    for seed in 0..5 {
        let (nx, nu, steps) = (4, 2, 30);
        let (dynamics, cost, x0) = lq(seed, nx, nu, steps);
        let (x_guess, _) = random_guess(200 + seed, nx, nu, steps);
        let opts = IlqrOptions { u_min: Some(vec![-0.3, -0.5]), u_max: Some(vec![0.4, 0.2]), max_iterations: 200, tolerance: 1e-12, ..IlqrOptions::default() };
        let shot = fddp(&dynamics, &cost, &x0, &x_guess, &vec![0.0; steps * nu], &opts).unwrap();
        let reference = ilqr(&dynamics, &cost, &x0, &vec![0.0; steps * nu], &opts).unwrap();
        assert!(shot.converged && reference.converged, "{} / {}", shot.message, reference.message);
        let du = shot.u.iter().zip(&reference.u).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(du < 1e-9, "seed {seed}: controls differ by {du:e}");
        let (lo, hi) = (opts.u_min.as_ref().unwrap(), opts.u_max.as_ref().unwrap());
        let within = shot.u.chunks_exact(nu).all(|u| (0..nu).all(|i| lo[i] <= u[i] && u[i] <= hi[i]));
        let at_limit = shot.u.chunks_exact(nu).any(|u| (0..nu).any(|i| u[i] == lo[i] || u[i] == hi[i]));
        assert!(within && at_limit, "seed {seed}: the limits must hold and bind");
    }
}

/// The VI cart-pole swing-up of the two tests below (trapezoid, 2.5 s of 20 ms, the cost on
/// `(q, v)`): the integrator, the cost, the state-interpolated guess (the pole turning
/// linearly from hanging to upright at rest) and the number of steps.
fn swing_up() -> (VariationalIntegrator, VelocityCost, Vec<f64>, usize) {
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let (dt, steps) = (0.02, 125);
    let vi = VariationalIntegrator::new(model.clone(), Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let w = DMatrix::from_diagonal(&DVector::from_vec(vec![dt, dt, 0.1 * dt, 0.1 * dt]));
    let pi = std::f64::consts::PI;
    let inner =
        QuadraticCost::new(vec![w], vec![DMatrix::from_element(1, 1, 1e-2 * dt)], DMatrix::identity(4, 4) * 1e3, vec![0.0, pi, 0.0, 0.0], vec![]).unwrap();
    let cost = VelocityCost::new(model, inner).unwrap();
    let guess: Vec<f64> = (0..=steps).flat_map(|k| [0.0, pi * k as f64 / steps as f64, 0.0, 0.0]).collect();
    (vi, cost, guess, steps)
}

/// The VI cart-pole swing-up (trapezoid, 2.5 s) from a state-interpolated guess — the pole
/// turning linearly from hanging to upright at rest, zero force: a guess no rollout follows —
/// converges to a feasible swing-up (every step re-solved from the result lands on the next
/// state), as iLQR does from zero forces, to a cost within 1e-3 of iLQR's (measured: both
/// reach 4.3954, FDDP in 52 iterations, iLQR in 90; the problem is non-convex, so a different
/// local optimum would be no error, but this one is the same).
#[test]
fn the_cartpole_swings_up_from_an_interpolated_guess() {
    let (vi, cost, guess, steps) = swing_up();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    let opts = IlqrOptions { max_iterations: 400, tolerance: 1e-9, ..IlqrOptions::default() };
    let pi = std::f64::consts::PI;
    let shot = fddp(&dynamics, &cost, &[0.0; 4], &guess, &vec![0.0; steps], &opts).unwrap();
    let reference = ilqr(&dynamics, &cost, &[0.0; 4], &vec![0.0; steps], &opts).unwrap();
    println!(
        "fddp: {} ({} iterations, cost {}, {:.3} s); ilqr: {} iterations, cost {}",
        shot.message, shot.iterations, shot.cost, shot.wall_time, reference.iterations, reference.cost
    );
    assert!(shot.converged, "{}", shot.message);
    assert!((shot.cost - reference.cost).abs() < 1e-3 * reference.cost, "{} vs {}", shot.cost, reference.cost);
    let defect = common::dynamic_defect(&vi, &dynamics, &shot.x, &shot.u);
    assert!(defect < 1e-10, "{defect}");
    let end = &shot.x[steps * 4..];
    assert!(end[0].abs() < 2e-3 && (end[1] - pi).abs() < 2e-3, "{end:?}");
}

/// While the guess is infeasible, a step of length α moves it by α times the full step on an
/// LQ problem, so the predicted change of the cost, `α G + ½ α² H` along the step's linear
/// model, is the actual change at every α (crocoddyl's expression is exact at α = 1 only:
/// here it predicted a rise of 48 where the cost fell by 140). One iteration with a single
/// step length each, from random state guesses; agreement to round-off of the cost (1e-12
/// relative to the cost's scale, measured 1e-15).
#[test]
fn partial_steps_from_infeasible_guesses_change_the_cost_as_predicted() {
    for seed in 0..3 {
        let (nx, nu, steps) = (4, 2, 30);
        let (dynamics, cost, x0) = lq(seed, nx, nu, steps);
        let (x_guess, u_guess) = random_guess(100 + seed, nx, nu, steps);
        for alpha in [0.5, 0.25, 0.1, 0.01] {
            let opts = IlqrOptions { alphas: vec![alpha], max_iterations: 1, ..IlqrOptions::default() };
            let shot = fddp(&dynamics, &cost, &x0, &x_guess, &u_guess, &opts).unwrap();
            let step = shot.log.first().expect("the step is accepted");
            let scale = shot.cost_history[0].abs().max(1.0);
            assert!(
                (step.expected_reduction_alpha - step.actual_reduction).abs() < 1e-12 * scale,
                "seed {seed}, alpha {alpha}: predicted {} vs actual {}",
                step.expected_reduction_alpha,
                step.actual_reduction
            );
        }
    }
}

/// Multiple shooting with DDP's second order (`Method::Ddp`: Gauss–Newton while gaps remain,
/// the dynamics' second derivatives contracted with the value gradients once the trajectory
/// is feasible): the cart-pole swing-up of [`swing_up`] from its guess reaches the same optimum as FDDP's Gauss–Newton model (both feasible,
/// costs within 1e-6: the problem is non-convex, but this local optimum is shared), in fewer
/// iterations (measured 29 against 52).
#[test]
fn ddp_with_multiple_shooting_reaches_the_gauss_newton_optimum() {
    let (vi, cost, guess, steps) = swing_up();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    let run = |method| {
        let opts = IlqrOptions { method, max_iterations: 400, tolerance: 1e-9, ..IlqrOptions::default() };
        fddp(&dynamics, &cost, &[0.0; 4], &guess, &vec![0.0; steps], &opts).unwrap()
    };
    let (gauss_newton, ddp) = (run(vidyn_optim::Method::Ilqr), run(vidyn_optim::Method::Ddp));
    println!(
        "Gauss–Newton: {} iterations, cost {}; DDP: {} iterations, cost {} ({})",
        gauss_newton.iterations, gauss_newton.cost, ddp.iterations, ddp.cost, ddp.message
    );
    assert!(gauss_newton.converged && ddp.converged, "{} / {}", gauss_newton.message, ddp.message);
    assert!((gauss_newton.cost - ddp.cost).abs() < 1e-6 * gauss_newton.cost, "{} vs {}", gauss_newton.cost, ddp.cost);
    assert!(common::dynamic_defect(&vi, &dynamics, &ddp.x, &ddp.u) < 1e-10);
    assert!(ddp.iterations < gauss_newton.iterations, "DDP {} vs Gauss–Newton {} iterations", ddp.iterations, gauss_newton.iterations);
}
