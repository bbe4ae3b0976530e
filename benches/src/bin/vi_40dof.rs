//! One variational-integrator step and its first-order linearisation on 40-dof systems,
//! against the figures of Johnson's thesis (2012) for the 40-variable marionette (trep's C
//! backend, i7-2760QM at 2.40 GHz): 2.11 ms per simulation step, 1.12 ms per first-order
//! linearisation, 22.15 ms per second-order linearisation (issue 4, "Performance").
//!
//! ```text
//! cargo run --release -p vidyn-benches --bin vi_40dof -- [--n 40] [--pool 8] [--min-time 1.0]
//!     [--dt 0.01] [--amplitude 0.5]
//! ```
//!
//! Systems (no damping, default gravity):
//! - `chain`: `pendulum_chain(40, false)` (`--n` changes 40 here and for `tree`), a 3-D chain of unit rods (joints alternately about
//!   y and x);
//! - `tree`: `random_tree(40, 3, [revolute])`, a branched tree with random axes, placements and
//!   inertias (ChaCha8 seed 3): a forest of 5 trees hanging from the world, depth 6 (printed
//!   to stderr).
//!
//! - `talos (expanded)`, only when `VIDYN_ROBOTS_DIR` names example-robot-data's `robots/`
//!   directory (`VIDYN_ROBOTS_DIR=$(python3 benches/compare.py --print-robots-dir)`): the
//!   Talos humanoid (`talos_reduced.urdf`) on a floating base, expanded by
//!   `vidyn_rbd::to_single_dof` to 38 one-dof joints (base translations and Z-Y-X angles);
//!   the closest thing here to the thesis's humanoid marionette (free-falling, no strings).
//!
//! Schemes: the midpoint rule (the thesis's discretisation), trapezoid and Simpson.
//! Inputs: `pool` seeded states with q, q̇ uniform in `[−amplitude, amplitude]` and controls
//! uniform in `[−1, 1]`, Δt = 0.01 s (states whose step does not converge are redrawn).
//! Timed per state (best of its passes), median over the pool, in µs:
//! - **step**: `VariationalIntegrator::step` from its default guess `q + Δt M⁻¹ p` (the full
//!   Newton solve; the mean number of iterations is printed);
//! - **step + linearisation**: `VariationalIntegrator::linearize` from the default guess (it
//!   solves the step, then factorises the DEL Jacobian once with the momentum row and pushes
//!   the 3n right-hand sides through it);
//! - **first order** = (step + linearisation) − step: the cost of A, B once the step is known,
//!   the split of the thesis's figures. (Warm-starting `linearize` at the solved `q_{k+1}` is
//!   not used: for Simpson it fixes only the endpoint, and Newton still iterates on the
//!   interior point.)
//!
//! Second order is not measured here (it is being implemented separately).

use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_benches::{load_robot, time_passes, ROBOTS};
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{Joint, Model};
use vidyn_vi::StepInput;
use vidyn_vi::{JointForces, Scheme, VariationalIntegrator};

/// Thesis figures for the 40-variable marionette, ms per step.
const THESIS_STEP_MS: f64 = 2.11;
const THESIS_FIRST_ORDER_MS: f64 = 1.12;

struct Args {
    n: usize,
    pool: usize,
    min_time: f64,
    dt: f64,
    amplitude: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { n: 40, pool: 8, min_time: 1.0, dt: 0.01, amplitude: 0.5 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--n" => a.n = val()?.parse().map_err(|e| format!("--n: {e}"))?,
            "--pool" => a.pool = val()?.parse().map_err(|e| format!("--pool: {e}"))?,
            "--min-time" => a.min_time = val()?.parse().map_err(|e| format!("--min-time: {e}"))?,
            "--dt" => a.dt = val()?.parse().map_err(|e| format!("--dt: {e}"))?,
            "--amplitude" => a.amplitude = val()?.parse().map_err(|e| format!("--amplitude: {e}"))?,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(a)
}

/// Number of bodies on the longest path from the world.
fn depth(m: &Model) -> usize {
    let mut d = vec![0; m.nbodies()];
    for i in 0..m.nbodies() {
        d[i] = 1 + m.parents[i].map_or(0, |p| d[p]);
    }
    d.into_iter().max().unwrap_or(0)
}

struct Case {
    q: Vec<f64>,
    p: Vec<f64>,
    u: Vec<f64>,
    iterations: usize,
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    let c = t.len();
    if c % 2 == 1 {
        t[c / 2]
    } else {
        0.5 * (t[c / 2 - 1] + t[c / 2])
    }
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("vi_40dof: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut systems: Vec<(&str, Model)> =
        vec![("chain", pendulum_chain(args.n, false)), ("tree", random_tree(args.n, 3, &[Joint::Revolute { axis: nalgebra::Vector3::z() }]))];
    if let Some(spec) = ROBOTS.iter().find(|r| r.name == "talos") {
        if let Some(talos) = load_robot(spec) {
            match talos.to_single_dof() {
                Ok((expanded, _)) => systems.push(("talos (expanded)", expanded)),
                Err(e) => eprintln!("vi_40dof: talos cannot be expanded: {e}"),
            }
        }
    }
    let schemes = [("midpoint", Scheme::midpoint()), ("trapezoid", Scheme::trapezoid()), ("simpson", Scheme::simpson())];
    println!(
        "| system | scheme | Newton iterations | step (µs) | step + linearisation (µs) | first order (µs) | thesis step / ours | thesis first order / ours |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for (name, model) in &systems {
        let roots = model.parents.iter().filter(|p| p.is_none()).count();
        eprintln!("{name}: n = {}, depth {}, {roots} root(s)", model.nv, depth(model));
        let n = model.nv;
        let model = Arc::new(model.clone());
        for (label, scheme) in &schemes {
            let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), args.dt, Some(JointForces::none(n))).expect("valid integrator");
            let mut ws = vi.workspace();
            let mut rng = ChaCha8Rng::seed_from_u64(4000 + n as u64);
            let mut cases: Vec<Case> = Vec::new();
            let mut draws = 0;
            while cases.len() < args.pool {
                draws += 1;
                assert!(draws <= 100 * args.pool, "{name}/{label}: steps keep failing to converge; try a smaller --dt");
                let amp = args.amplitude;
                let q: Vec<f64> = (0..n).map(|_| rng.random_range(-amp..amp)).collect();
                let v: Vec<f64> = (0..n).map(|_| rng.random_range(-amp..amp)).collect();
                let u: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let mut p = vec![0.0; n];
                vi.momentum(&mut ws, &q, &v, &mut p).expect("momentum");
                let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
                if let Ok(iterations) = vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn) {
                    cases.push(Case { q, p, u, iterations });
                }
            }
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let count = cases.len();
            let budget = args.min_time / count as f64;
            let per_case = |call: &mut dyn FnMut(&Case)| -> f64 { median(cases.iter().map(|c| time_passes(1, 3, budget, |_| call(c)).min_ns).collect()) };
            let t_step = per_case(&mut |c| {
                vi.step(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &mut qn, &mut pn).expect("step");
                std::hint::black_box(&qn);
            });
            let t_both = per_case(&mut |c| {
                vi.linearize(&mut ws, StepInput::new(0, &c.q, &c.p, &c.u), &mut a, &mut b, &mut qn, &mut pn).expect("linearize");
                std::hint::black_box(&a);
            });
            let t_lin = t_both - t_step;
            let iterations = cases.iter().map(|c| c.iterations as f64).sum::<f64>() / count as f64;
            let us = |ns: f64| ns / 1e3;
            println!(
                "| {name} | {label} | {iterations:.1} | {:.1} | {:.1} | {:.1} | {:.1}× | {:.1}× |",
                us(t_step),
                us(t_both),
                us(t_lin),
                THESIS_STEP_MS * 1e6 / t_step,
                THESIS_FIRST_ORDER_MS * 1e6 / t_lin
            );
        }
    }
    std::process::ExitCode::SUCCESS
}
