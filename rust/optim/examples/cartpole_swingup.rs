//! Cart-pole swing-up by iLQR on the exact VI linearisation (prints the convergence report).
//! `cargo run -p vidyn-optim --release --example cartpole_swingup -- [dt] [T]`

use nalgebra::DMatrix;
use std::sync::Arc;
use vidyn_optim::{ilqr, IlqrOptions, QuadraticCost, VelocityCost, ViDynamics};
use vidyn_vi::{Scheme, VariationalIntegrator};

fn main() {
    let args: Vec<f64> = std::env::args().skip(1).map(|a| a.parse().expect("number")).collect();
    let dt = args.first().copied().unwrap_or(0.02);
    let horizon = args.get(1).copied().unwrap_or(2.5);
    let steps = (horizon / dt).round() as usize;
    let model = Arc::new(vidyn_rbd::builders::cartpole());
    let vi = VariationalIntegrator::new(model.clone(), Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    let dynamics = ViDynamics::new(&vi, Some(vec![0])).unwrap();
    let goal = [0.0, std::f64::consts::PI, 0.0, 0.0];
    let q = DMatrix::from_diagonal(&nalgebra::DVector::from_vec(vec![1e-2, 1e-2, 1e-3, 1e-3]));
    let r = DMatrix::from_element(1, 1, 1e-2);
    let qn = DMatrix::from_diagonal(&nalgebra::DVector::from_vec(vec![100.0, 100.0, 10.0, 10.0]));
    let inner = QuadraticCost::new(vec![q], vec![r], qn, goal.to_vec(), vec![]).unwrap();
    let cost: Box<dyn vidyn_optim::Cost> = if std::env::var("MOMENTUM").is_ok() { Box::new(inner) } else { Box::new(VelocityCost::new(model, inner).unwrap()) };
    let cost = &*cost;
    let opts = IlqrOptions { max_iterations: 300, tolerance: 1e-9, ..IlqrOptions::default() };
    let res = ilqr(&dynamics, cost, &[0.0; 4], &vec![0.0; steps], &opts).unwrap();
    for (i, l) in res.log.iter().enumerate() {
        println!(
            "{i:3} J {:.8e} exp {:.3e} act {:.3e} α {:.4} μ {:.1e} |g| {:.3e} t {:.3}s",
            l.cost, l.expected_reduction, l.actual_reduction, l.alpha, l.mu, l.gradient_norm, l.time
        );
    }
    let n = steps;
    println!("{}: {} iterations, cost {:.8e}, final state {:?}, wall {:.3}s (after the rollout: cost, derivatives left, next backward pass {:.3}, other backward {:.3}, forward {:.3})", res.message, res.iterations, res.cost, &res.x[n * 4..], res.wall_time, res.time_linearize, res.time_backward, res.time_forward);
}
