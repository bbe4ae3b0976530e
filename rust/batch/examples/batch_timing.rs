//! Times the batch engine called from Rust, for `benches/batch_compare.py` (which times the
//! same calls through `vidyn.batch` to measure the Python overhead, and the parallel
//! efficiency).
//!
//! ```text
//! cargo run --release -p vidyn-batch --example batch_timing -- OP LINKS BATCH STEPS THREADS REPS [OUTPUTS]
//! ```
//! `OP`: rnea | aba | crba | rnea_derivatives | rollout | linearize. The model is
//! `pendulum_chain(LINKS, planar = false)`, the integrator trapezoidal with `dt = 0.01`.
//! Inputs are the deterministic formulas of [`input`] (the Python script uses the same ones).
//! `OUTPUTS` says where the results go:
//! * `preallocated` (the default): buffers allocated once, outside the timed region, and
//!   overwritten by every repetition: the engine alone (Python's counterpart: `out=`);
//! * `fresh`: every repetition allocates its outputs (`vec![0.0; len]`) inside the timed
//!   region and drops them after the clock stops, as a caller keeping each result would
//!   (Python's counterpart: the default, new NumPy arrays per call).
//!
//! Prints one JSON line: `{"op", "links", "batch", "steps", "threads", "outputs", "times":
//! [seconds…]}` with one entry per repetition.

use std::sync::Arc;
use std::time::Instant;
use vidyn_batch::dynamics::{self, Matrices3};
use vidyn_batch::{new_pool, trajectories, with_pool, Control, RolloutOut, Start, Trajectories};
use vidyn_vi::{Scheme, VariationalIntegrator};

/// `scale · sin(freq · k + phase)` for entry `k` of a flat input (the Python side: the same
/// formula with NumPy).
fn input(len: usize, scale: f64, freq: f64, phase: f64) -> Vec<f64> {
    (0..len).map(|k| scale * (freq * k as f64 + phase).sin()).collect()
}

/// The outputs of one call: float buffers of the operation's lengths, and the `i64` Newton
/// iteration counts of a rollout (empty otherwise).
struct Outputs {
    f: Vec<Vec<f64>>,
    iterations: Vec<i64>,
}

impl Outputs {
    fn new(lens: &[usize], iterations: usize) -> Self {
        Self { f: lens.iter().map(|&len| vec![0.0; len]).collect(), iterations: vec![0; iterations] }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: batch_timing OP LINKS BATCH STEPS THREADS REPS [preallocated|fresh]";
    assert!(args.len() == 6 || args.len() == 7, "{usage}");
    let op = args[0].as_str();
    let [links, batch, steps, threads, reps]: [usize; 5] = std::array::from_fn(|i| args[i + 1].parse().expect(usage));
    let outputs = args.get(6).map_or("preallocated", String::as_str);
    let fresh = match outputs {
        "preallocated" => false,
        "fresh" => true,
        other => panic!("unknown OUTPUTS {other}; {usage}"),
    };
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
        let f = with_pool(&pool, || {
            trajectories::rollout(&vi, &Control::new(), batch, steps, &q, Start::Velocity(&v), &u, RolloutOut { q: &mut tq, p: &mut tp, iterations: &mut it })
                .expect("shapes")
        });
        assert!(f.is_empty(), "{f:?}");
    }
    let (lens, iterations) = match op {
        "rnea" | "aba" => (vec![batch * n], 0),
        "crba" => (vec![batch * n * n], 0),
        "rnea_derivatives" => (vec![batch * n * n; 3], 0),
        "rollout" => (vec![batch * (steps + 1) * n; 2], batch * steps),
        "linearize" => (vec![batch * steps * 4 * n * n, batch * steps * 2 * n * n], 0),
        other => panic!("unknown op {other}; {usage}"),
    };
    let mut kept = (!fresh).then(|| Outputs::new(&lens, iterations));
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let c = Control::new();
        let mut new_outputs;
        let t0 = Instant::now();
        let o = match kept.as_mut() {
            Some(o) => o,
            None => {
                new_outputs = Outputs::new(&lens, iterations);
                &mut new_outputs
            }
        };
        let failures = with_pool(&pool, || match (op, &mut o.f[..]) {
            ("rnea", [tau]) => dynamics::rnea(&model, &c, batch, &q, &v, &a, tau).map(|f| f.len()).expect("shapes"),
            ("aba", [ddq]) => dynamics::aba(&model, &c, batch, &q, &v, &a, ddq).map(|f| f.len()).expect("shapes"),
            ("crba", [mass]) => dynamics::crba(&model, &c, batch, &q, mass).map(|f| f.len()).expect("shapes"),
            ("rnea_derivatives", [first, second, third]) => {
                dynamics::rnea_derivatives(&model, &c, batch, &q, &v, &a, Matrices3 { first, second, third }).map(|f| f.len()).expect("shapes")
            }
            ("rollout", [rq, rp]) => {
                trajectories::rollout(&vi, &c, batch, steps, &q, Start::Velocity(&v), &u, RolloutOut { q: rq, p: rp, iterations: &mut o.iterations })
                    .map(|f| f.len())
                    .expect("shapes")
            }
            ("linearize", [la, lb]) => {
                trajectories::linearize(&vi, &c, Trajectories { batch, steps, q: &tq, p: &tp, u: &u }, la, lb).map(|f| f.len()).expect("shapes")
            }
            _ => unreachable!("outputs sized by op above"),
        });
        times.push(t0.elapsed().as_secs_f64());
        assert_eq!(failures, 0, "rows failed");
    }
    let times: Vec<String> = times.iter().map(|t| format!("{t:.9}")).collect();
    println!(
        r#"{{"op": "{op}", "links": {links}, "batch": {batch}, "steps": {steps}, "threads": {threads}, "outputs": "{outputs}", "times": [{}]}}"#,
        times.join(", ")
    );
}
