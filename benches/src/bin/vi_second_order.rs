//! Cost of the exact second-order derivatives of the VI flow map against the first-order
//! linearisation, per step, on n-link pendulum chains (issue 4, deliverable 5; the thesis of
//! Johnson 2012 reports 1.12 ms first order and 22.15 ms second order per step for a 40-dof
//! system, a ratio of ≈ 20).
//!
//! ```text
//! cargo run --release -p vidyn-benches --bin vi_second_order -- [--sizes 10,20,40]
//!     [--schemes 1,2] [--pool 4] [--min-time 0.5] [--dt 0.005] [--full-max 40]
//! ```
//!
//! Inputs as in `vi_scaling`: `pendulum_chain(n, false)`, Δt = 0.005 s, joint damping 0.1 and
//! springs 0.5 (so every force term is present), `pool` seeded states with `q, q̇` uniform in
//! `[−0.1, 0.1]`, controls in `[−1, 1]`, and a random co-state `λ`. Every call is of the solved
//! step warm-started at its solution (one residual check, no Newton iteration). Columns (ns
//! per step): first order by the O(n²) B.1 path (`linearize`), first order by the dense
//! oracle, the λ-contracted second order (`linearize_second_order_contracted`, which also
//! returns A and B), its λ-dependent part alone on a step prepared once
//! (`contract_prepared_second_order`, what DDP's sequential backward pass pays), and the full tensors (`linearize_second_order`). Timing: each state alone;
//! the time is the thread's **on-CPU** time (`/proc/thread-self/schedstat`, ns) over repeated
//! calls divided by their number, so time spent preempted by other load does not count
//! (the machine is shared; a 20-ms call is almost always preempted, so the best wall-clock
//! pass overstates it); median over the pool. `--wall` uses the best wall-clock pass instead.

use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::hint::black_box;
use std::sync::Arc;
use vidyn_benches::time_passes;
use vidyn_rbd::builders::pendulum_chain;
use vidyn_vi::reference::DenseOracle;
use vidyn_vi::StepInput;
use vidyn_vi::{JointForces, Scheme, VariationalIntegrator};

struct Args {
    sizes: Vec<usize>,
    schemes: Vec<usize>,
    pool: usize,
    min_time: f64,
    dt: f64,
    full_max: usize,
    wall: bool,
}

fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    s.split(',').map(|x| x.trim().parse::<usize>().map_err(|e| format!("bad list entry '{x}': {e}"))).collect()
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { sizes: vec![10, 20, 40], schemes: vec![1, 2], pool: 4, min_time: 0.5, dt: 0.005, full_max: 40, wall: false };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--sizes" => a.sizes = parse_list(&val()?)?,
            "--schemes" => a.schemes = parse_list(&val()?)?,
            "--pool" => a.pool = val()?.parse().map_err(|e| format!("--pool: {e}"))?,
            "--min-time" => a.min_time = val()?.parse().map_err(|e| format!("--min-time: {e}"))?,
            "--dt" => a.dt = val()?.parse().map_err(|e| format!("--dt: {e}"))?,
            "--full-max" => a.full_max = val()?.parse().map_err(|e| format!("--full-max: {e}"))?,
            "--wall" => a.wall = true,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(a)
}

struct Case {
    q: Vec<f64>,
    p: Vec<f64>,
    u: Vec<f64>,
    lam: Vec<f64>,
    q_next: Vec<f64>,
}

/// On-CPU time of the calling thread, ns (`/proc/thread-self/schedstat`, first field).
fn on_cpu_ns() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("/proc/thread-self/schedstat (Linux) is needed; use --wall elsewhere");
    s.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()).expect("schedstat format")
}

/// On-CPU ns per call: one warm-up call, then calls until both `min_calls` calls and `budget`
/// seconds of CPU time are spent.
fn on_cpu_per_call(min_calls: usize, budget: f64, call: &mut dyn FnMut()) -> f64 {
    call();
    let start = on_cpu_ns();
    let mut calls = 0;
    while calls < min_calls || on_cpu_ns() - start < budget * 1e9 {
        call();
        calls += 1;
    }
    (on_cpu_ns() - start) / calls as f64
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("vi_second_order: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let dt = args.dt;
    println!("| s | n | first order B.1 | first order dense | contracted 2nd order | of which contraction (prepared step) | full 2nd order | contracted / B.1 | full / B.1 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &s in &args.schemes {
        for &n in &args.sizes {
            let model = Arc::new(pendulum_chain(n, false));
            let forces = JointForces { damping: vec![0.1; n], stiffness: vec![0.5; n], rest: vec![0.0; n] };
            let vi = VariationalIntegrator::new(model, Scheme::lobatto(s).expect("valid s"), dt, Some(forces)).expect("valid integrator");
            let mut ws = vi.workspace();
            let mut so = vi.second_order_workspace();
            let mut oracle = DenseOracle::new(&vi);
            let mut rng = ChaCha8Rng::seed_from_u64(2000 + n as u64);
            let mut cases = Vec::new();
            while cases.len() < args.pool {
                let q: Vec<f64> = (0..n).map(|_| rng.random_range(-0.1..0.1)).collect();
                let v: Vec<f64> = (0..n).map(|_| rng.random_range(-0.1..0.1)).collect();
                let u: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let lam: Vec<f64> = (0..2 * n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let mut p = vec![0.0; n];
                vi.momentum(&mut ws, &q, &v, &mut p).expect("momentum");
                let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
                if vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).is_ok() {
                    cases.push(Case { q, p, u, lam, q_next: qn });
                }
            }
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let count = cases.len();
            let budget = args.min_time / count as f64;
            let wall = args.wall;
            let per_case = |passes: usize, call: &mut dyn FnMut(usize)| -> f64 {
                let mut t: Vec<f64> = (0..count)
                    .map(|k| if wall { time_passes(1, passes, budget, |_| call(k)).min_ns } else { on_cpu_per_call(passes, budget, &mut || call(k)) })
                    .collect();
                t.sort_by(f64::total_cmp);
                if count % 2 == 1 {
                    t[count / 2]
                } else {
                    0.5 * (t[count / 2 - 1] + t[count / 2])
                }
            };
            let t1 = per_case(3, &mut |k| {
                let c = &cases[k];
                vi.linearize(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u).with_guess(Some(&c.q_next)), &mut a, &mut b, &mut qn, &mut pn).expect("linearize");
                black_box(&a);
            });
            let t1d = per_case(3, &mut |k| {
                let c = &cases[k];
                oracle
                    .linearize(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u).with_guess(Some(&c.q_next)), &mut a, &mut b, &mut qn, &mut pn)
                    .expect("dense linearize");
                black_box(&a);
            });
            let tc = per_case(3, &mut |k| {
                let c = &cases[k];
                black_box(
                    vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &c.q, &c.p, &c.u).with_guess(Some(&c.q_next)), &c.lam)
                        .expect("contracted")
                        .hxx[(0, 0)],
                );
            });
            // the λ-dependent part alone, on a step prepared once (DDP's backward pass)
            let mut prepared: Vec<_> = cases
                .iter()
                .map(|c| {
                    let mut so = vi.second_order_workspace();
                    vi.prepare_second_order(&mut so, StepInput::new(0, &c.q, &c.p, &c.u).with_guess(Some(&c.q_next))).expect("prepare");
                    so
                })
                .collect();
            let tcp = per_case(3, &mut |k| {
                black_box(vi.contract_prepared_second_order(&mut prepared[k], &cases[k].lam).expect("contract").hxx[(0, 0)]);
            });
            let tf = (n <= args.full_max).then(|| {
                per_case(1, &mut |k| {
                    let c = &cases[k];
                    black_box(vi.linearize_second_order(&mut so, StepInput::new(0, &c.q, &c.p, &c.u).with_guess(Some(&c.q_next))).expect("full").fxx[0]);
                })
            });
            let us = |t: f64| format!("{:.1} µs", t / 1e3);
            println!(
                "| {s} | {n} | {} | {} | {} | {} | {} | {:.1}× | {} |",
                us(t1),
                us(t1d),
                us(tc),
                us(tcp),
                tf.map_or("—".into(), us),
                tc / t1,
                tf.map_or("—".into(), |t| format!("{:.0}×", t / t1))
            );
        }
    }
    std::process::ExitCode::SUCCESS
}
