//! Times the batch engine called from Rust, for `benches/batch_compare.py` (which times the
//! same calls through `vidyn.batch` to measure the Python overhead, and the parallel
//! efficiency).
//!
//! ```text
//! cargo run --release -p vidyn-batch --example batch_timing -- OP LINKS BATCH STEPS THREADS REPS
//! ```
//! `OP`: rnea | aba | crba | rnea_derivatives | rollout | linearize. The model is
//! `pendulum_chain(LINKS, planar = false)`, the integrator trapezoidal with `dt = 0.01`.
//! Inputs are the deterministic formulas of [`input`] (the Python script uses the same ones).
//! Prints one JSON line: `{"op", "links", "batch", "steps", "threads", "times": [seconds…]}`
//! with one entry per repetition. Outputs are allocated once, outside the timed region: this
//! times the engine alone, the strictest reference for the Python binding, which allocates
//! its NumPy outputs in every call.

use std::sync::Arc;
use std::time::Instant;
use vidyn_batch::dynamics::{self, Matrices3};
use vidyn_batch::{new_pool, trajectories, with_pool, Control, RolloutOut, Start};
use vidyn_vi::{Scheme, VariationalIntegrator};

/// `scale · sin(freq · k + phase)` for entry `k` of a flat input (the Python side: the same
/// formula with NumPy).
fn input(len: usize, scale: f64, freq: f64, phase: f64) -> Vec<f64> {
    (0..len).map(|k| scale * (freq * k as f64 + phase).sin()).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: batch_timing OP LINKS BATCH STEPS THREADS REPS";
    assert!(args.len() == 6, "{usage}");
    let op = args[0].as_str();
    let [links, batch, steps, threads, reps]: [usize; 5] = std::array::from_fn(|i| args[i + 1].parse().expect(usage));
    let model = Arc::new(vidyn_rbd::builders::pendulum_chain(links, false));
    let n = model.nv;
    let vi = VariationalIntegrator::new(Arc::clone(&model), Scheme::trapezoid(), 0.01, None).expect("valid integrator");
    let pool = new_pool(threads).expect("threads");
    let q = input(batch * n, 0.5, 0.1, 0.3);
    let v = input(batch * n, 0.7, 0.13, 0.1);
    let a = input(batch * n, 1.0, 0.17, 0.2);
    let u = input(batch * steps * n, 0.5, 0.07, 0.4);
    // trajectories to linearise: rolled out once, untimed
    let (mut tq, mut tp, mut it) = (vec![0.0; batch * (steps + 1) * n], vec![0.0; batch * (steps + 1) * n], vec![0_i64; batch * steps]);
    if op == "linearize" {
        let f = with_pool(&pool, || trajectories::rollout(&vi, &Control::new(), batch, steps, &q, Start::Velocity(&v), &u, RolloutOut { q: &mut tq, p: &mut tp, iterations: &mut it }).expect("shapes"));
        assert!(f.is_empty(), "{f:?}");
    }
    let (mut d1, mut d2, mut d3) = (vec![0.0; batch * n * n], vec![0.0; batch * n * n], vec![0.0; batch * n * n]);
    let (mut rq, mut rp, mut ri) = (vec![0.0; batch * (steps + 1) * n], vec![0.0; batch * (steps + 1) * n], vec![0_i64; batch * steps]);
    let (mut la, mut lb) = if op == "linearize" { (vec![0.0; batch * steps * 4 * n * n], vec![0.0; batch * steps * 2 * n * n]) } else { (Vec::new(), Vec::new()) };
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let c = Control::new();
        let t0 = Instant::now();
        let failures = with_pool(&pool, || match op {
            "rnea" => dynamics::rnea(&model, &c, batch, &q, &v, &a, &mut d1[..batch * n]).map(|f| f.len()).expect("shapes"),
            "aba" => dynamics::aba(&model, &c, batch, &q, &v, &a, &mut d1[..batch * n]).map(|f| f.len()).expect("shapes"),
            "crba" => dynamics::crba(&model, &c, batch, &q, &mut d1).map(|f| f.len()).expect("shapes"),
            "rnea_derivatives" => dynamics::rnea_derivatives(&model, &c, batch, &q, &v, &a, Matrices3 { first: &mut d1, second: &mut d2, third: &mut d3 }).map(|f| f.len()).expect("shapes"),
            "rollout" => trajectories::rollout(&vi, &c, batch, steps, &q, Start::Velocity(&v), &u, RolloutOut { q: &mut rq, p: &mut rp, iterations: &mut ri }).map(|f| f.len()).expect("shapes"),
            "linearize" => trajectories::linearize(&vi, &c, batch, steps, &tq, &tp, &u, &mut la, &mut lb).map(|f| f.len()).expect("shapes"),
            other => panic!("unknown op {other}; {usage}"),
        });
        times.push(t0.elapsed().as_secs_f64());
        assert_eq!(failures, 0, "rows failed");
    }
    let times: Vec<String> = times.iter().map(|t| format!("{t:.9}")).collect();
    println!(r#"{{"op": "{op}", "links": {links}, "batch": {batch}, "steps": {steps}, "threads": {threads}, "times": [{}]}}"#, times.join(", "));
}
