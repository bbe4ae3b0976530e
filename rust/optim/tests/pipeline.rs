//! iLQR computes a trial's derivatives while the trial is still being simulated (on the
//! pool's other threads, abandoned when the trial is rejected). These tests pin that this
//! changes nothing but the time: the iterates are bit-for-bit those of derivatives computed
//! after the fact, for any number of threads, including runs whose line search rejects trials.

use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use vidyn_optim::{ilqr, Dynamics, IlqrOptions, IlqrResult, Jacobians, Nominal, Policy, QuadraticCost, Result, VelocityCost, ViDynamics};
use vidyn_vi::{Scheme, VariationalIntegrator};

/// The same dynamics without per-step linearisation: the optimiser then linearises each
/// kept trajectory as a whole, through the batch engine, after the line search.
struct WholeTrajectories<'a>(ViDynamics<'a>);

impl Dynamics for WholeTrajectories<'_> {
    fn nx(&self) -> usize {
        self.0.nx()
    }
    fn nu(&self) -> usize {
        self.0.nu()
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.0.rollout(x0, steps, policy)
    }
    fn rollout_near(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>, near: &Nominal<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.0.rollout_near(x0, steps, policy, near)
    }
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians> {
        self.0.linearize(x, u)
    }
}

/// Cart-pole swing-up with gravity, both joints actuated (the pole heavily penalised), cost on
/// `(q, v)`: the problem of `examples/bench_ilqr_crocoddyl.py`, whose line search backtracks.
/// `velocity_state`: the dynamics' state is `(q, v)` already (the cost is used as it is).
fn solve(dynamics: &dyn Dynamics, model: &Arc<vidyn_rbd::Model>, threads: usize, limits: Option<f64>, velocity_state: bool) -> IlqrResult {
    let (dt, steps) = (0.02, 125);
    let w = DMatrix::from_diagonal(&DVector::from_vec(vec![1.0, 1.0, 0.1, 0.1])) * dt;
    let r = DMatrix::from_diagonal(&DVector::from_vec(vec![1e-2, 1e2])) * dt;
    let wn = DMatrix::identity(4, 4) * 1e3;
    let quad = QuadraticCost::new(vec![w], vec![r], wn, vec![0.0, std::f64::consts::PI, 0.0, 0.0], vec![]).unwrap();
    let cost: Box<dyn vidyn_optim::Cost> = if velocity_state { Box::new(quad) } else { Box::new(VelocityCost::new(model.clone(), quad).unwrap()) };
    let opts =
        IlqrOptions { max_iterations: 200, tolerance: 1e-9, u_min: limits.map(|l| vec![-l; 2]), u_max: limits.map(|l| vec![l; 2]), ..IlqrOptions::default() };
    let pool = vidyn_batch::new_pool(threads).unwrap();
    vidyn_batch::with_pool(&pool, || ilqr(dynamics, &*cost, &[0.0; 4], &vec![0.0; 2 * steps], &opts)).unwrap()
}

fn assert_same(a: &IlqrResult, b: &IlqrResult, what: &str) {
    let same = |x: &[f64], y: &[f64], name: &str| {
        assert_eq!(x.len(), y.len(), "{what}: {name} lengths differ");
        if let Some(i) = x.iter().zip(y).position(|(p, q)| p.to_bits() != q.to_bits()) {
            panic!("{what}: {name}[{i}] differs: {} vs {}", x[i], y[i]);
        }
    };
    same(&a.x, &b.x, "x");
    same(&a.u, &b.u, "u");
    same(&a.cost_history, &b.cost_history, "cost history");
    let alphas = |r: &IlqrResult| r.log.iter().map(|l| l.alpha).collect::<Vec<_>>();
    same(&alphas(a), &alphas(b), "step lengths");
    for (k, (ga, gb)) in a.gains.iter().zip(&b.gains).enumerate() {
        same(ga.as_slice(), gb.as_slice(), &format!("gain {k}"));
    }
}

#[test]
fn streamed_derivatives_give_the_iterates_of_derivatives_after_the_fact() {
    streamed_equals_after_the_fact(false);
}

/// The same on the velocity state `(q, v)`, whose linearisation maps each step's `(q, p)`
/// Jacobians with both nodes' Legendre data (a chunk computes each node once; the whole
/// trajectory goes in chunks of eight).
#[test]
fn streamed_derivatives_on_the_velocity_state_give_the_iterates_after_the_fact() {
    streamed_equals_after_the_fact(true);
}

fn streamed_equals_after_the_fact(velocity_state: bool) {
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let vi = VariationalIntegrator::new(model.clone(), Scheme::by_name("trapezoid", None).unwrap(), 0.02, None).unwrap();
    let dynamics = || {
        let d = ViDynamics::new(&vi, None).unwrap();
        if velocity_state {
            d.with_velocity_state().unwrap()
        } else {
            d
        }
    };
    let streamed = dynamics();
    assert!(streamed.linearizes_steps());
    let whole = WholeTrajectories(dynamics());
    let solve = |d: &dyn Dynamics, threads: usize, limits: Option<f64>| solve(d, &model, threads, limits, velocity_state);
    // unbounded, and with control limits that bind (the box QP, warm-started from the
    // previous backward pass, then runs inside the pipeline's speculative pass too)
    for limits in [None, Some(3.0)] {
        let reference = solve(&whole, 1, limits);
        assert!(reference.converged, "{}", reference.message);
        // the line search rejected some trials, whose speculative derivatives were dropped
        assert!(reference.log.iter().any(|l| l.alpha > 0.0 && l.alpha < 1.0), "no backtracking: the rejected-trial path is not exercised");
        if let Some(l) = limits {
            assert!(reference.u.iter().any(|u| u.abs() == l), "the limits never bind");
        }
        for threads in [1, 2, 3] {
            assert_same(&solve(&streamed, threads, limits), &reference, &format!("streamed, {threads} threads, limits {limits:?}"));
            assert_same(&solve(&whole, threads, limits), &reference, &format!("after the fact, {threads} threads, limits {limits:?}"));
        }
    }
}
