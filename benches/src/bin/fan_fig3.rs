//! Fan, Schultz & Murphey (2018), Fig. 3 in full: the Simpson variational integrator against
//! Hermite–Simpson collocation used as an integrator, on the paper's 12-link pendulum: error
//! against Δt, wall time against Δt, and error against wall time (issue 25).
//!
//! ```text
//! cargo run --release -p vidyn-benches --bin fan_fig3 -- [--ics 10] [--links 12]
//! ```
//!
//! The paper's setting: a planar chain of 12 unit rods (`pendulum_chain(12, true)`), T = 10 s
//! from rest, `q⁰` uniform in `[−π/12, π/12]` (here `--ics` seeded draws, the paper took 100),
//! error `(1/T) ∫₀ᵀ ‖q(t) − q_ref(t)‖ dt` (trapezoidal rule over the knots), the reference
//! Hermite–Simpson at Δt = 3.125e-4 s (the paper's 5e-4 s does not divide the step sizes
//! below; this one does, and is finer). The Galerkin–Lobatto VI with `s = 4` (order 8) at Δt =
//! 1.25e-3 s is a second reference: the two references' distance bounds what the table can
//! resolve.
//!
//! **Simpson VI**: `VariationalIntegrator` with `Scheme::simpson()` (order 4 in `q`), no
//! damping, its own Newton solve (tolerance 1e-12) from its default predictor.
//!
//! **Hermite–Simpson (HS)**: the collocation defects of Hermite–Simpson direct collocation
//! (Betts 2010, §4.6) solved step by step for `x_{k+1}` given `x_k`, `x = (q, q̇)`,
//! `ẋ = f(x) = (q̇, a(q, q̇))` with `a` from the articulated-body algorithm (no torques):
//!
//! `x_m = (x_k + x_{k+1})/2 + Δt/8 (f_k − f_{k+1})`, `R = x_{k+1} − x_k − Δt/6 (f_k + 4 f(x_m) + f_{k+1}) = 0`,
//!
//! the 3-stage Lobatto IIIA method (order 4 as an integrator). Newton on `R` with the exact
//! Jacobian `1 − Δt/6 (4 F_m (1/2 − Δt/8 F_{k+1}) + F_{k+1})`, `F = ∂f/∂x` from the analytic
//! ABA derivatives (Carpentier & Mansard's, as the paper's HS-DC used), a dense LU of the
//! `2n × 2n` matrix (the paper's O(n³) Newton direction); predictor `q + Δt q̇ + Δt²/2 q̈`,
//! `q̇ + Δt q̈`; stop at `max |R| ≤ 1e-12 · max(1, max |x_{k+1}|)`. Each iteration evaluates
//! the residual by two ABA calls and, when it is not small enough, the two Jacobians.
//!
//! Printed per Δt: each method's mean error over the draws, the ratio of the means and the
//! spread of the draws' own ratios, its wall time for the 10 s (mean over the draws, one
//! thread) and its Newton iterations per step.

use nalgebra::{DMatrix, DVector};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Instant;
use vidyn_rbd::builders::pendulum_chain;
use vidyn_rbd::{aba, aba_derivatives, Model, Workspace};
use vidyn_vi::StepInput;
use vidyn_vi::{JointForces, Scheme, VariationalIntegrator};

const T: f64 = 10.0;
const REFERENCE_DT: f64 = 3.125e-4;
const LOBATTO_DT: f64 = 1.25e-3;
const STEPS: [f64; 5] = [2e-2, 1e-2, 5e-3, 2.5e-3, 1.25e-3];
const TOLERANCE: f64 = 1e-12;

fn steps_of(dt: f64) -> usize {
    let n = (T / dt).round() as usize;
    assert!((n as f64 * dt - T).abs() < 1e-9, "T is not a multiple of dt = {dt}");
    n
}

/// A run: the configurations at the knots, the wall time and the Newton iterations per step.
struct Run {
    q: Vec<Vec<f64>>,
    seconds: f64,
    iterations: f64,
}

/// The Simpson (or any) VI from rest at `q0`.
fn vi_run(model: &Arc<Model>, scheme: Scheme, dt: f64, q0: &[f64]) -> Run {
    let n = model.nv;
    let vi = VariationalIntegrator::new(Arc::clone(model), scheme, dt, Some(JointForces::none(n))).expect("valid integrator");
    let mut ws = vi.workspace();
    let (mut q, mut p, u) = (q0.to_vec(), vec![0.0; n], vec![0.0; n]);
    let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
    let mut out = vec![q.clone()];
    let mut iterations = 0;
    let start = Instant::now();
    for k in 0..steps_of(dt) {
        iterations += vi.step(&mut ws, StepInput::new(k, &q, &p, &u), &mut qn, &mut pn).expect("VI step");
        std::mem::swap(&mut q, &mut qn);
        std::mem::swap(&mut p, &mut pn);
        out.push(q.clone());
    }
    Run { seconds: start.elapsed().as_secs_f64(), iterations: iterations as f64 / steps_of(dt) as f64, q: out }
}

/// `f(x) = (q̇, a(q, q̇))` into `f`, and `F = ∂f/∂x` into `jac` when given (`tau`: zeros).
fn dynamics(model: &Model, ws: &mut Workspace, tau: &[f64], x: &[f64], f: &mut [f64], jac: Option<&mut DMatrix<f64>>) {
    let n = model.nv;
    let (q, v) = x.split_at(n);
    f[..n].copy_from_slice(v);
    match jac {
        None => f[n..].copy_from_slice(aba(model, ws, q, v, tau, None).expect("ABA")),
        Some(jac) => {
            let d = aba_derivatives(model, ws, q, v, tau, None).expect("ABA derivatives");
            jac.fill(0.0);
            for i in 0..n {
                jac[(i, n + i)] = 1.0;
                for j in 0..n {
                    jac[(n + i, j)] = d.dddq_dq[(i, j)];
                    jac[(n + i, n + j)] = d.dddq_dv[(i, j)];
                }
            }
            f[n..].copy_from_slice(&ws.ddq);
        }
    }
}

/// Hermite–Simpson from rest at `q0` (module docs). The Newton matrix is formed in place;
/// its LU takes one copy of it.
fn hs_run(model: &Model, dt: f64, q0: &[f64]) -> Run {
    let (n, m) = (model.nv, 2 * model.nv);
    let mut ws = model.workspace();
    let tau = vec![0.0; n];
    let mut x0: Vec<f64> = q0.iter().copied().chain(std::iter::repeat_n(0.0, n)).collect();
    let (mut f0, mut f1, mut fm) = (vec![0.0; m], vec![0.0; m], vec![0.0; m]);
    let (mut x1, mut xm) = (vec![0.0; m], vec![0.0; m]);
    let (mut jac1, mut jacm, mut half, mut newton) = (DMatrix::zeros(m, m), DMatrix::zeros(m, m), DMatrix::zeros(m, m), DMatrix::zeros(m, m));
    let mut r = DVector::zeros(m);
    let mut out = vec![q0.to_vec()];
    let mut iterations = 0;
    let start = Instant::now();
    dynamics(model, &mut ws, &tau, &x0, &mut f0, None);
    for k in 0..steps_of(dt) {
        for i in 0..n {
            x1[i] = x0[i] + dt * x0[n + i] + 0.5 * dt * dt * f0[n + i];
            x1[n + i] = x0[n + i] + dt * f0[n + i];
        }
        let mut converged = false;
        for _ in 0..30 {
            // the residual from two ABA calls; the derivatives only when Newton needs them
            dynamics(model, &mut ws, &tau, &x1, &mut f1, None);
            for i in 0..m {
                xm[i] = 0.5 * (x0[i] + x1[i]) + dt / 8.0 * (f0[i] - f1[i]);
            }
            dynamics(model, &mut ws, &tau, &xm, &mut fm, None);
            for i in 0..m {
                r[i] = x1[i] - x0[i] - dt / 6.0 * (f0[i] + 4.0 * fm[i] + f1[i]);
            }
            let scale = x1.iter().fold(1.0_f64, |a, b| a.max(b.abs()));
            if r.amax() <= TOLERANCE * scale {
                converged = true;
                break;
            }
            iterations += 1;
            dynamics(model, &mut ws, &tau, &x1, &mut f1, Some(&mut jac1));
            dynamics(model, &mut ws, &tau, &xm, &mut fm, Some(&mut jacm));
            // 1 − Δt/6 (4 F_m (1/2 − Δt/8 F_1) + F_1)
            half.copy_from(&jac1);
            half *= -dt / 8.0;
            for i in 0..m {
                half[(i, i)] += 0.5;
            }
            newton.copy_from(&jac1);
            newton.gemm(4.0, &jacm, &half, 1.0);
            newton *= -dt / 6.0;
            for i in 0..m {
                newton[(i, i)] += 1.0;
            }
            let dx = newton.clone().lu().solve(&r).expect("HS Newton matrix");
            for (xi, d) in x1.iter_mut().zip(dx.iter()) {
                *xi -= d;
            }
        }
        assert!(converged, "Hermite–Simpson Newton did not converge at step {k}");
        std::mem::swap(&mut x0, &mut x1);
        std::mem::swap(&mut f0, &mut f1);
        out.push(x0[..n].to_vec());
    }
    Run { seconds: start.elapsed().as_secs_f64(), iterations: iterations as f64 / steps_of(dt) as f64, q: out }
}

/// `(1/T) ∫ ‖q − q_ref‖ dt` over the knots both grids share (`dt_ref` divides `dt`).
fn mean_error(q: &[Vec<f64>], dt: f64, reference: &[Vec<f64>], dt_ref: f64) -> f64 {
    let stride = (dt / dt_ref).round() as usize;
    assert!((stride as f64 * dt_ref - dt).abs() < 1e-12, "the reference grid must divide dt = {dt}");
    let d: Vec<f64> = q.iter().zip(reference.iter().step_by(stride)).map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt()).collect();
    dt * (d.iter().sum::<f64>() - 0.5 * (d[0] + d[d.len() - 1])) / T
}

fn main() {
    let mut ics = 10;
    let mut links = 12;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().and_then(|v| v.parse::<usize>().ok()).expect("a positive integer after the flag");
        match a.as_str() {
            "--ics" => ics = value(),
            "--links" => links = value(),
            other => panic!("unknown argument {other} (expected --ics N, --links N)"),
        }
    }
    let model = Arc::new(pendulum_chain(links, true));
    let mut rng = ChaCha8Rng::seed_from_u64(2018);
    let draws: Vec<Vec<f64>> =
        (0..ics).map(|_| (0..links).map(|_| rng.random_range(-std::f64::consts::PI / 12.0..std::f64::consts::PI / 12.0)).collect()).collect();
    let (mut vi_err, mut hs_err, mut vi_time, mut hs_time, mut vi_it, mut hs_it) =
        (vec![0.0; 5], vec![0.0; 5], vec![0.0; 5], vec![0.0; 5], vec![0.0; 5], vec![0.0; 5]);
    let mut references = 0.0;
    // per step size, each draw's HS / VI error ratio
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); STEPS.len()];
    for q0 in &draws {
        let reference = hs_run(&model, REFERENCE_DT, q0);
        let lobatto = vi_run(&model, Scheme::lobatto(4).expect("Lobatto 4"), LOBATTO_DT, q0);
        references += mean_error(&lobatto.q, LOBATTO_DT, &reference.q, REFERENCE_DT) / ics as f64;
        for (i, &dt) in STEPS.iter().enumerate() {
            let vi = vi_run(&model, Scheme::simpson(), dt, q0);
            let hs = hs_run(&model, dt, q0);
            let (e_vi, e_hs) = (mean_error(&vi.q, dt, &reference.q, REFERENCE_DT), mean_error(&hs.q, dt, &reference.q, REFERENCE_DT));
            ratios[i].push(e_hs / e_vi);
            vi_err[i] += e_vi / ics as f64;
            hs_err[i] += e_hs / ics as f64;
            vi_time[i] += vi.seconds / ics as f64;
            hs_time[i] += hs.seconds / ics as f64;
            vi_it[i] += vi.iterations / ics as f64;
            hs_it[i] += hs.iterations / ics as f64;
        }
    }
    println!("{links}-link planar pendulum, T = {T} s, {ics} draws of q0 in [-pi/12, pi/12] from rest");
    println!("reference: Hermite-Simpson at dt = {REFERENCE_DT}; Lobatto s = 4 VI at dt = {LOBATTO_DT} differs from it by {references:.2e} (the resolution of the errors below)");
    println!();
    println!("| dt (s) | Simpson VI error | HS error | HS / VI error (of the means; per draw: min, median, max) | VI time (ms) | HS time (ms) | HS / VI time | VI Newton it/step | HS Newton it/step |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, dt) in STEPS.iter().enumerate() {
        ratios[i].sort_by(f64::total_cmp);
        let r = &ratios[i];
        println!(
            "| {dt} | {:.3e} | {:.3e} | {:.2} ({:.2}, {:.2}, {:.2}) | {:.1} | {:.1} | {:.2} | {:.2} | {:.2} |",
            vi_err[i],
            hs_err[i],
            hs_err[i] / vi_err[i],
            r[0],
            r[r.len() / 2],
            r[r.len() - 1],
            1e3 * vi_time[i],
            1e3 * hs_time[i],
            hs_time[i] / vi_time[i],
            vi_it[i],
            hs_it[i]
        );
    }
}
