//! Scaling of the variational integrator on n-link pendulum chains (issue 4, "Performance";
//! Fan, Schultz & Murphey 2018, Fig. 2): DEL residual (Algorithm 1), Newton direction by
//! Algorithms B.1/B.2 against the dense-Jacobian LU direction, and the exact first-order
//! linearisation (O(n²), reusing the B.1 factorisation) against the dense LU linearisation,
//! and a whole step (Newton from the Taylor predictor, with its mean iteration count). Prints a markdown table (ns per call) and the log-log slopes fitted to those times.
//!
//! ```text
//! cargo run --release -p vidyn-benches --bin vi_scaling -- [--sizes 5,10,20,50,100,200]
//!     [--schemes 1,2] (Lobatto s, or `midpoint`) [--pool 8] [--min-time 1.0] [--dense-max 200] [--dt 0.005]
//!     [--amplitude 0.1] [--velocity A] (default: the amplitude)
//! ```
//!
//! Inputs: `pendulum_chain(n, false)` (3D chain of unit rods), Δt = 0.005 s, no damping,
//! `pool` seeded random states with `q` uniform in `[−amplitude, amplitude]`, `q̇` in
//! `[−velocity, velocity]` and controls
//! uniform in `[−1, 1]` (states whose step does not converge are redrawn). Independent joint
//! velocities add up along a chain: the last links of a 512-link chain then move at hundreds
//! of m/s, a motion no step of 10⁻³ s resolves, so long chains want `--velocity 0`. The residual and Newton directions are evaluated at the integrator's initial
//! guess `q^γ = q + c_γ Δt q̇` (perturbed by 1e-3); the linearisation is of the solved step,
//! warm-started at the solution (so it includes one residual check, no Newton iteration).
//! Timing: each pooled state on its own with `vidyn_benches::time_passes` (one call per pass,
//! warm-up, then passes until its share `min-time / pool` is spent), keeping the fastest
//! pass; the table reports the median of these over the pool. Taking each state's fastest
//! call makes the numbers robust to other load on the machine.

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
    /// `midpoint` or a Lobatto `s`.
    schemes: Vec<String>,
    pool: usize,
    min_time: f64,
    dense_max: usize,
    dt: f64,
    amplitude: f64,
    /// `None`: the amplitude.
    velocity: Option<f64>,
}

fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    s.split(',').map(|x| x.trim().parse::<usize>().map_err(|e| format!("bad list entry '{x}': {e}"))).collect()
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        sizes: vec![5, 10, 20, 50, 100, 200],
        schemes: vec!["1".into(), "2".into()],
        pool: 8,
        min_time: 1.0,
        dense_max: 200,
        dt: 0.005,
        amplitude: 0.1,
        velocity: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--sizes" => a.sizes = parse_list(&val()?)?,
            "--schemes" => a.schemes = val()?.split(',').map(|x| x.trim().to_string()).collect(),
            "--pool" => a.pool = val()?.parse().map_err(|e| format!("--pool: {e}"))?,
            "--min-time" => a.min_time = val()?.parse().map_err(|e| format!("--min-time: {e}"))?,
            "--dense-max" => a.dense_max = val()?.parse().map_err(|e| format!("--dense-max: {e}"))?,
            "--dt" => a.dt = val()?.parse().map_err(|e| format!("--dt: {e}"))?,
            "--amplitude" => a.amplitude = val()?.parse().map_err(|e| format!("--amplitude: {e}"))?,
            "--velocity" => a.velocity = Some(val()?.parse().map_err(|e| format!("--velocity: {e}"))?),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(a)
}

/// Least-squares slope of `ln t` against `ln n`.
fn slope(points: &[(usize, f64)]) -> f64 {
    let m = points.len() as f64;
    let (xs, ys): (Vec<f64>, Vec<f64>) = points.iter().map(|&(n, t)| ((n as f64).ln(), t.ln())).unzip();
    let (mx, my) = (xs.iter().sum::<f64>() / m, ys.iter().sum::<f64>() / m);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    sxy / sxx
}

struct Case {
    q: Vec<f64>,
    p: Vec<f64>,
    u: Vec<f64>,
    z: Vec<f64>,
    q_next: Vec<f64>,
}

const OPS: [&str; 6] = [
    "DEL residual",
    "Newton direction (B.1)",
    "Newton direction (dense LU)",
    "linearisation (B.1, O(n²))",
    "linearisation (dense LU)",
    "whole step (Newton iterations)",
];

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("vi_scaling: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let dt = args.dt;
    // results[s][op] = [(n, ns)]
    let mut results: Vec<Vec<Vec<(usize, f64)>>> = vec![vec![Vec::new(); OPS.len()]; args.schemes.len()];
    let mut agreement: Vec<(String, usize, [f64; 3])> = Vec::new();
    println!("| s | n | {} |", OPS.join(" | "));
    println!("|---|---:|{}", "---:|".repeat(OPS.len()));
    for (si, label) in args.schemes.iter().enumerate() {
        let scheme = match label.as_str() {
            "midpoint" => Scheme::midpoint(),
            other => match other.parse::<usize>().map_err(|e| e.to_string()).and_then(|s| Scheme::lobatto(s).map_err(|e| e.to_string())) {
                Ok(sc) => sc,
                Err(e) => {
                    eprintln!("vi_scaling: --schemes entry '{other}': expected 'midpoint' or a Lobatto s ({e})");
                    return std::process::ExitCode::FAILURE;
                }
            },
        };
        let s = scheme.s;
        for &n in &args.sizes {
            let model = Arc::new(pendulum_chain(n, false));
            let vi = VariationalIntegrator::new(model, scheme.clone(), dt, Some(JointForces::none(n))).expect("valid integrator").with_dense_max(0); // the recursive path in its columns; the oracle gives the dense ones
            let mut ws = vi.workspace();
            let mut rng = ChaCha8Rng::seed_from_u64(1000 + n as u64);
            let sc = vi.scheme().clone();
            let mut cases: Vec<Case> = Vec::new();
            let mut draws = 0;
            while cases.len() < args.pool {
                draws += 1;
                assert!(draws <= 100 * args.pool, "n = {n}, scheme {label}: steps keep failing to converge; try a smaller --dt");
                let amp = args.amplitude;
                let q: Vec<f64> = (0..n).map(|_| rng.random_range(-amp..amp)).collect();
                let vel = args.velocity.unwrap_or(amp);
                let v: Vec<f64> = (0..n).map(|_| if vel > 0.0 { rng.random_range(-vel..vel) } else { 0.0 }).collect();
                let u: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let mut p = vec![0.0; n];
                vi.momentum(&mut ws, &q, &v, &mut p).expect("momentum");
                let z = (1..=s).flat_map(|g| (0..n).map(|i| q[i] + sc.nodes[g] * dt * v[i] + 1e-3 * rng.random_range(-1.0..1.0)).collect::<Vec<_>>()).collect();
                let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
                if vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).is_ok() {
                    cases.push(Case { q, p, u, z, q_next: qn });
                }
            }
            let mut r = vec![0.0; s * n];
            let mut dz = vec![0.0; s * n];
            let mut dz2 = vec![0.0; s * n];
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let dense = n <= args.dense_max;
            let mut oracle = DenseOracle::new(&vi);
            // agreement of the two directions on the pool: relative difference, and each one's
            // backward error |J δz + r|∞ / |r|∞ with the dense J
            if dense {
                let mut worst = [0.0_f64; 3];
                let amax = |v: &[f64]| v.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
                for c in &cases {
                    vi.newton_direction(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &c.z, &mut dz).expect("B.1");
                    oracle.newton_direction(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &c.z, &mut dz2).expect("dense");
                    let diff: Vec<f64> = dz.iter().zip(&dz2).map(|(x, y)| x - y).collect();
                    worst[0] = worst[0].max(amax(&diff) / amax(&dz2));
                    let j = oracle.jacobian(&mut ws, &c.q, &c.z).expect("jacobian");
                    vi.residual(&mut ws, &c.q, &c.p, &c.u, &c.z, &mut r).expect("residual");
                    for (slot, d) in [(1, &dz), (2, &dz2)] {
                        let jd = &j * nalgebra::DVector::from_column_slice(d);
                        let back: Vec<f64> = jd.iter().zip(&r).map(|(x, y)| x + y).collect();
                        worst[slot] = worst[slot].max(amax(&back) / amax(&r));
                    }
                }
                agreement.push((label.clone(), n, worst));
            }
            // each state timed on its own (one call per pass, best pass), then the median over
            // the pool: robust to other load on the machine
            let count = cases.len();
            let budget = args.min_time / count as f64;
            let per_case = |passes: usize, call: &mut dyn FnMut(usize)| -> f64 {
                let mut t: Vec<f64> = (0..count).map(|k| time_passes(1, passes, budget, |_| call(k)).min_ns).collect();
                t.sort_by(f64::total_cmp);
                if count % 2 == 1 {
                    t[count / 2]
                } else {
                    0.5 * (t[count / 2 - 1] + t[count / 2])
                }
            };
            let t_res = per_case(5, &mut |k| {
                let c = &cases[k];
                black_box(vi.residual(&mut ws, &c.q, &c.p, &c.u, &c.z, &mut r).expect("residual"));
            });
            let t_b1 = per_case(5, &mut |k| {
                let c = &cases[k];
                vi.newton_direction(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &c.z, &mut dz).expect("B.1");
                black_box(&dz);
            });
            let t_dense = dense.then(|| {
                per_case(3, &mut |k| {
                    let c = &cases[k];
                    oracle.newton_direction(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &c.z, &mut dz2).expect("dense");
                    black_box(&dz2);
                })
            });
            let t_lin = per_case(3, &mut |k| {
                let c = &cases[k];
                vi.linearize(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u).with_guess(Some(&c.q_next)), &mut a, &mut b, &mut qn, &mut pn).expect("linearize");
                black_box(&a);
            });
            let t_lin_dense = dense.then(|| {
                per_case(3, &mut |k| {
                    let c = &cases[k];
                    oracle
                        .linearize(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u).with_guess(Some(&c.q_next)), &mut a, &mut b, &mut qn, &mut pn)
                        .expect("dense linearize");
                    black_box(&a);
                })
            });
            // a whole step as a rollout's first takes it: Newton from the Taylor predictor
            let t_step = per_case(3, &mut |k| {
                let c = &cases[k];
                black_box(vi.step(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &mut qn, &mut pn).expect("step"));
            });
            let iterations: f64 =
                cases.iter().map(|c| vi.step(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &mut qn, &mut pn).expect("step") as f64).sum::<f64>() / count as f64;
            let times = [Some(t_res), Some(t_b1), t_dense, Some(t_lin), t_lin_dense, Some(t_step)];
            let mut cells: Vec<String> = times.iter().map(|t| t.map_or("—".into(), |t| format!("{t:.0}"))).collect();
            cells[5] = format!("{} ({iterations:.1})", cells[5]);
            println!("| {label} | {n} | {} |", cells.join(" | "));
            for (op, t) in times.iter().enumerate() {
                if let Some(t) = t {
                    results[si][op].push((n, *t));
                }
            }
        }
    }
    println!();
    println!("Log-log slopes (least squares over all n / over n ≥ 20 / between the two largest n):");
    println!();
    println!("| s | {} |", OPS.join(" | "));
    println!("|---|{}", "---:|".repeat(OPS.len()));
    for (si, label) in args.schemes.iter().enumerate() {
        let cells: Vec<String> = results[si]
            .iter()
            .map(|pts| {
                let big: Vec<(usize, f64)> = pts.iter().copied().filter(|&(n, _)| n >= 20).collect();
                let all = if pts.len() >= 2 { format!("{:.2}", slope(pts)) } else { "—".into() };
                let upper = if big.len() >= 2 { format!("{:.2}", slope(&big)) } else { "—".into() };
                let top = if pts.len() >= 2 { format!("{:.2}", slope(&pts[pts.len() - 2..])) } else { "—".into() };
                format!("{all} / {upper} / {top}")
            })
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
    println!();
    println!("B.1 vs dense Newton direction, worst over the pool: relative difference |δz_B1 − δz_LU|∞ / |δz_LU|∞, and backward errors |J δz + r|∞ / |r|∞:");
    println!();
    println!("| s | n | relative difference | backward error B.1 | backward error dense LU |");
    println!("|---|---:|---:|---:|---:|");
    for (label, n, [d, b1, lu]) in agreement {
        println!("| {label} | {n} | {d:.1e} | {b1:.1e} | {lu:.1e} |");
    }
    std::process::ExitCode::SUCCESS
}
