//! Iterative LQR (iLQR) on exact discrete dynamics, with control limits.
//!
//! Each iteration linearises the whole trajectory (for a VI: every step in parallel through
//! the batch engine, [`vidyn_batch::linearize`], exact `A_k`, `B_k`), runs the Riccati-like backward
//! pass on the Gauss–Newton model of the cost-to-go (second derivatives of the dynamics
//! dropped: that is what distinguishes iLQR from DDP), and a forward pass with a backtracking
//! line search on the closed-loop rollout `u_k = ū_k + α k_k + K_k (x_k − x̄_k)`.
//!
//! * **Regularisation** (Levenberg–Marquardt on `Q_uu`): the backward pass uses
//!   `Q_uu + μ 1`. `μ` grows (`μ ← max(μ_min, μ Δ)`, `Δ ← max(Δ₀, Δ Δ₀)`) when `Q_uu + μ 1`
//!   is not positive definite or the line search fails, and shrinks after an accepted step
//!   (`Δ ← min(1/Δ₀, Δ/Δ₀)`, `μ ← μ Δ`, set to 0 below `μ_min`) — the schedule of Tassa,
//!   Erez & Todorov (IROS 2012).
//! * **Line search**: `α = 1, ½, ¼, …`; a trial is accepted when the actual decrease is at
//!   least `armijo ×` the decrease the quadratic model predicts,
//!   `ΔJ_exp(α) = −(α Σ kᵀQ_u + ½ α² Σ kᵀQ_uu k)`. A trial whose rollout fails (Newton
//!   divergence of the VI) is rejected like one that increases the cost.
//! * **Control limits** `u_min ≤ u ≤ u_max`: the feed-forward term solves the box QP
//!   `min_δu ½ δuᵀ Q_uu δu + Q_uᵀ δu` on `u_min − ū ≤ δu ≤ u_max − ū` by projected Newton
//!   ([`crate::boxqp`], Tassa, Mansard & Todorov ICRA 2014); the feedback rows of the clamped
//!   directions are zero and the free rows are `−H_ff⁻¹ Q_ux,f`. The forward pass clamps
//!   `u` to the box as well.
//! * **Convergence**: the iteration stops when the expected decrease of a full step is at
//!   most `tolerance · max(1, |J|)` with `μ ≤ μ_min`. The report also carries the norm of
//!   the exact (projected) gradient `∂J/∂u` of the open-loop cost, from an adjoint pass.
//!
//! **Full DDP** ([`Method::Ddp`]; Jacobson & Mayne 1970) adds the second derivatives of the
//! dynamics contracted with the value gradient of the next step,
//! `Q_xx += Σ_i V_x,i(k+1) ∂²f_i/∂x²`, `Q_ux += Σ_i V_x,i ∂²f_i/∂u∂x`,
//! `Q_uu += Σ_i V_x,i ∂²f_i/∂u²`, from [`Dynamics::second_order_contracted`] (called in the
//! backward pass, where `V_x(k+1)` is known). The model of the cost-to-go is then the exact
//! second-order expansion, so near a regular minimum DDP converges quadratically and the
//! expected decrease matches the actual one; iLQR's Gauss–Newton model converges linearly
//! when the costate does not vanish at the optimum. Dynamics without second derivatives (a VI
//! with constraints or kinematic joints) make [`Method::Ddp`] fail with
//! [`OptimError::NotImplemented`].

use crate::boxqp::box_qp;
use crate::cost::{total_cost, Cost, StageDerivatives};
use crate::dynamics::{check_finite, check_multiple, rollout_open_loop, Dynamics, SecondOrder};
use crate::error::{OptimError, Result};
use crate::lqr::symmetrise;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use std::time::Instant;

/// iLQR (Gauss–Newton, first-order dynamics) or full DDP (second-order dynamics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Ilqr,
    Ddp,
}

/// Options of [`ilqr`].
#[derive(Clone, Debug)]
pub struct IlqrOptions {
    pub method: Method,
    pub max_iterations: usize,
    /// Stop when the expected decrease of a full step is `≤ tolerance · max(1, |J|)`.
    pub tolerance: f64,
    /// Initial regularisation `μ` (0: plain Gauss–Newton step first).
    pub mu_init: f64,
    pub mu_min: f64,
    pub mu_max: f64,
    /// `Δ₀` of the schedule.
    pub mu_factor: f64,
    /// Step lengths tried in order.
    pub alphas: Vec<f64>,
    /// Accept a step when `actual ≥ armijo · expected` decrease.
    pub armijo: f64,
    /// Control limits (`nu` entries each; `±∞` allowed).
    pub u_min: Option<Vec<f64>>,
    pub u_max: Option<Vec<f64>>,
}

impl Default for IlqrOptions {
    fn default() -> Self {
        Self {
            method: Method::Ilqr,
            max_iterations: 100,
            tolerance: 1e-8,
            mu_init: 0.0,
            mu_min: 1e-6,
            mu_max: 1e10,
            mu_factor: 1.6,
            alphas: (0..12).map(|i| 0.5_f64.powi(i)).collect(),
            armijo: 1e-4,
            u_min: None,
            u_max: None,
        }
    }
}

/// Why [`ilqr`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IlqrStatus {
    Converged,
    MaxIterations,
    /// `μ` exceeded `μ_max`: no step decreases the cost (stationary to round-off, or the
    /// model is poor).
    RegularisationLimit,
}

/// One outer iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct IterationLog {
    /// Cost at the start of the iteration.
    pub cost: f64,
    /// Decrease a full step was expected to give (`ΔJ_exp(1)`), for the accepted direction.
    pub expected_reduction: f64,
    /// Decrease predicted for the accepted `α` and the one obtained (0 when none).
    pub expected_reduction_alpha: f64,
    pub actual_reduction: f64,
    /// Accepted step length (0 when no step was accepted).
    pub alpha: f64,
    /// Regularisation of the accepted backward pass.
    pub mu: f64,
    /// `‖∂J/∂u‖₂` of the open-loop cost at the start (projected on the control limits).
    pub gradient_norm: f64,
    /// Seconds since the start of the solve at the end of this iteration.
    pub time: f64,
}

/// Result of [`ilqr`]: the final trajectory `x` (`(N+1)·nx`), controls `u` (`N·nu`), the
/// last feed-forward terms and feedback gains (nu×nx) — usable as a tracking controller —,
/// the cost history (`cost_history[0]` is the initial cost) and timings.
#[derive(Clone, Debug)]
pub struct IlqrResult {
    pub x: Vec<f64>,
    pub u: Vec<f64>,
    pub k_ff: Vec<DVector<f64>>,
    pub gains: Vec<DMatrix<f64>>,
    pub cost: f64,
    pub cost_history: Vec<f64>,
    pub log: Vec<IterationLog>,
    /// Accepted steps.
    pub iterations: usize,
    pub converged: bool,
    pub status: IlqrStatus,
    pub message: String,
    /// Seconds: total, and spent in linearisation, cost derivatives + backward pass, forward passes.
    pub wall_time: f64,
    pub time_linearize: f64,
    pub time_backward: f64,
    pub time_forward: f64,
}

struct Backward {
    k_ff: Vec<DVector<f64>>,
    gains: Vec<DMatrix<f64>>,
    dv1: f64,
    dv2: f64,
}

struct Bounds {
    lower: DVector<f64>,
    upper: DVector<f64>,
}

/// The stage derivatives of the cost along `(x, u)` (stages `0..N`, then the terminal one).
pub(crate) fn cost_derivatives<C: Cost + ?Sized>(cost: &C, x: &[f64], u: &[f64], nx: usize, nu: usize) -> Result<(Vec<StageDerivatives>, StageDerivatives)> {
    let steps = u.len() / nu;
    let eval = |k: usize| -> Result<StageDerivatives> {
        let mut d = StageDerivatives::zeros(nx, nu);
        cost.running_derivatives(k, &x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu], &mut d)?;
        Ok(d)
    };
    let stages: Result<Vec<StageDerivatives>> = if cost.parallel() { (0..steps).into_par_iter().map(eval).collect() } else { (0..steps).map(eval).collect() };
    let mut term = StageDerivatives::zeros(nx, 0);
    cost.terminal_derivatives(&x[steps * nx..], &mut term)?;
    Ok((stages?, term))
}

/// `‖∂J/∂u‖₂` of the open-loop cost by the adjoint `λ_N = m_x`, `λ_k = ℓ_x + A_kᵀ λ_{k+1}`;
/// components pushing a control at a limit further out are dropped.
fn gradient_norm(a: &[DMatrix<f64>], b: &[DMatrix<f64>], d: &[StageDerivatives], term: &StageDerivatives, u: &[f64], bounds: Option<&Bounds>) -> f64 {
    let nu = b.first().map_or(0, |b| b.ncols());
    let mut lambda = term.lx.clone();
    let mut sum = 0.0;
    for k in (0..a.len()).rev() {
        let g = &d[k].lu + b[k].transpose() * &lambda;
        for i in 0..nu {
            let ui = u[k * nu + i];
            let blocked = bounds.is_some_and(|bd| (ui <= bd.lower[i] && g[i] > 0.0) || (ui >= bd.upper[i] && g[i] < 0.0));
            if !blocked {
                sum += g[i] * g[i];
            }
        }
        lambda = &d[k].lx + a[k].transpose() * &lambda;
    }
    sum.sqrt()
}

/// Why a backward pass stopped.
enum BackwardError {
    /// `Q_uu + μ 1` is not positive definite at some step.
    Indefinite,
    /// The dynamics' second derivatives failed (DDP).
    Dynamics(OptimError),
}

/// The trajectory whose second-order dynamics DDP adds (`None` in the call: iLQR).
struct SecondOrderAlong<'a, D: ?Sized> {
    dynamics: &'a D,
    x: &'a [f64],
}

/// Backward pass with regularisation `μ`.
fn backward_pass<D: Dynamics + ?Sized>(a: &[DMatrix<f64>], b: &[DMatrix<f64>], d: &[StageDerivatives], term: &StageDerivatives, u: &[f64], bounds: Option<&Bounds>, mu: f64, warm: &[DVector<f64>], ddp: Option<&SecondOrderAlong<'_, D>>) -> std::result::Result<Backward, BackwardError> {
    let steps = a.len();
    let (nx, nu) = (a.first().map_or(0, |a| a.nrows()), b.first().map_or(0, |b| b.ncols()));
    let mut vx = term.lx.clone();
    let mut vxx = term.lxx.clone();
    symmetrise(&mut vxx);
    let mut out = Backward { k_ff: vec![DVector::zeros(nu); steps], gains: vec![DMatrix::zeros(nu, nx); steps], dv1: 0.0, dv2: 0.0 };
    let mut so = SecondOrder::zeros(nx, nu);
    for k in (0..steps).rev() {
        let (ak, bk, dk) = (&a[k], &b[k], &d[k]);
        let at = ak.transpose();
        let bt = bk.transpose();
        let qx = &dk.lx + &at * &vx;
        let qu = &dk.lu + &bt * &vx;
        let vxx_a = &vxx * ak;
        let vxx_b = &vxx * bk;
        let mut qxx = &dk.lxx + &at * &vxx_a;
        let mut quu = &dk.luu + &bt * &vxx_b;
        let mut qux = &dk.lux + &bt * &vxx_a;
        if let Some(s) = ddp {
            // V_x here is still V_x(k+1)
            s.dynamics.second_order_contracted(k, &s.x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu], vx.as_slice(), &mut so).map_err(BackwardError::Dynamics)?;
            qxx += &so.hxx;
            quu += &so.huu;
            qux += &so.hux;
            symmetrise(&mut qxx);
        }
        symmetrise(&mut quu);
        let mut quu_reg = quu.clone();
        for i in 0..nu {
            quu_reg[(i, i)] += mu;
        }
        let (kff, gain) = if let Some(bd) = bounds {
            let ub = &u[k * nu..(k + 1) * nu];
            let lower = DVector::from_iterator(nu, (0..nu).map(|i| bd.lower[i] - ub[i]));
            let upper = DVector::from_iterator(nu, (0..nu).map(|i| bd.upper[i] - ub[i]));
            let sol = box_qp(&quu_reg, &qu, &lower, &upper, &warm[k]);
            if !sol.status.ok() {
                return Err(BackwardError::Indefinite);
            }
            let mut gain = DMatrix::zeros(nu, nx);
            if let Some(chol) = &sol.chol_free {
                let idx: Vec<usize> = (0..nu).filter(|&i| sol.free[i]).collect();
                let rhs = qux.select_rows(idx.iter());
                let kf = -chol.solve(&rhs);
                for (r, &i) in idx.iter().enumerate() {
                    gain.row_mut(i).copy_from(&kf.row(r));
                }
            }
            (sol.x, gain)
        } else {
            let Some(chol) = quu_reg.cholesky() else {
                return Err(BackwardError::Indefinite);
            };
            (-chol.solve(&qu), -chol.solve(&qux))
        };
        let quu_k = &quu * &kff;
        out.dv1 += kff.dot(&qu);
        out.dv2 += 0.5 * kff.dot(&quu_k);
        let gt = gain.transpose();
        vx = &qx + &gt * &quu_k + &gt * &qu + qux.transpose() * &kff;
        vxx = &qxx + &gt * &quu * &gain + &gt * &qux + qux.transpose() * &gain;
        symmetrise(&mut vxx);
        out.k_ff[k] = kff;
        out.gains[k] = gain;
    }
    Ok(out)
}

fn clamp_into(u: &mut [f64], bounds: Option<&Bounds>) {
    if let Some(bd) = bounds {
        for (i, ui) in u.iter_mut().enumerate() {
            *ui = ui.max(bd.lower[i]).min(bd.upper[i]);
        }
    }
}

/// Runs iLQR from `x0` and the initial controls `u_init` (`N·nu`, clamped into the limits).
/// Errors when the inputs are inconsistent, for [`Method::Ddp`] on dynamics without second
/// derivatives, when the cost or the dynamics' second derivatives fail, or when the initial
/// rollout fails; later rollout failures only shorten the line search.
pub fn ilqr<D: Dynamics + ?Sized, C: Cost + ?Sized>(dynamics: &D, cost: &C, x0: &[f64], u_init: &[f64], options: &IlqrOptions) -> Result<IlqrResult> {
    let (nx, nu) = (dynamics.nx(), dynamics.nu());
    if options.method == Method::Ddp && !dynamics.has_second_order() {
        // the dynamics' own message says why (e.g. the VI's)
        let mut so = SecondOrder::zeros(nx, nu);
        let probe = dynamics.second_order_contracted(0, x0, u_init.get(..nu).unwrap_or(&[]), x0, &mut so);
        return Err(match probe {
            Err(e) => e,
            Ok(()) => OptimError::NotImplemented("full DDP needs second derivatives of the dynamics (Dynamics::has_second_order is false)".into()),
        });
    }
    if x0.len() != nx {
        return Err(OptimError::InvalidInput(format!("x0 has {} entries, expected nx = {nx}", x0.len())));
    }
    check_finite(x0, "x0")?;
    check_multiple(u_init.len(), nu, "U_init")?;
    check_finite(u_init, "U_init")?;
    let steps = u_init.len() / nu;
    if steps == 0 {
        return Err(OptimError::InvalidInput("U_init must have at least one step".into()));
    }
    let o = options;
    let valid = o.tolerance >= 0.0 && o.max_iterations > 0 && o.mu_init >= 0.0 && o.mu_min > 0.0 && o.mu_max > o.mu_min && o.mu_factor > 1.0 && !o.alphas.is_empty() && o.alphas.iter().all(|a| *a > 0.0 && *a <= 1.0);
    if !valid {
        return Err(OptimError::InvalidInput("options: need tolerance ≥ 0, max_iterations ≥ 1, 0 ≤ mu_init, 0 < mu_min < mu_max, mu_factor > 1 and step lengths in (0, 1]".into()));
    }
    let bounds = match (&o.u_min, &o.u_max) {
        (None, None) => None,
        (lo, hi) => {
            let lower = lo.clone().unwrap_or_else(|| vec![f64::NEG_INFINITY; nu]);
            let upper = hi.clone().unwrap_or_else(|| vec![f64::INFINITY; nu]);
            if lower.len() != nu || upper.len() != nu || lower.iter().zip(&upper).any(|(l, h)| l.is_nan() || h.is_nan() || l > h) {
                return Err(OptimError::InvalidInput(format!("u_min and u_max need nu = {nu} entries each with u_min ≤ u_max")));
            }
            Some(Bounds { lower: DVector::from_vec(lower), upper: DVector::from_vec(upper) })
        }
    };
    let bounds = bounds.as_ref();
    let start = Instant::now();
    let (mut t_lin, mut t_back, mut t_fwd) = (0.0, 0.0, 0.0);

    let mut u0 = u_init.to_vec();
    for k in 0..steps {
        clamp_into(&mut u0[k * nu..(k + 1) * nu], bounds);
    }
    let t = Instant::now();
    let (mut x, mut u) = rollout_open_loop(dynamics, x0, &u0)?;
    let mut j = total_cost(cost, &x, &u, nx, nu)?;
    t_fwd += t.elapsed().as_secs_f64();
    if !j.is_finite() {
        return Err(OptimError::InvalidInput(format!("the initial trajectory has cost {j}")));
    }
    let mut mu = o.mu_init;
    let mut delta = 1.0_f64;
    let mut cost_history = vec![j];
    let mut log = Vec::new();
    let mut warm = vec![DVector::zeros(nu); steps];
    let mut last: Option<Backward> = None;
    let mut status = IlqrStatus::MaxIterations;
    let mut iterations = 0;
    let mut message = String::new();

    'outer: for _ in 0..o.max_iterations {
        let t = Instant::now();
        let (a, b) = dynamics.linearize(&x, &u)?;
        t_lin += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let (d, term) = cost_derivatives(cost, &x, &u, nx, nu)?;
        let gnorm = gradient_norm(&a, &b, &d, &term, &u, bounds);
        t_back += t.elapsed().as_secs_f64();
        loop {
            // backward pass, raising μ until Q_uu + μ1 is positive definite
            let t = Instant::now();
            let bw = loop {
                let ddp = (o.method == Method::Ddp).then_some(SecondOrderAlong { dynamics, x: &x });
                match backward_pass(&a, &b, &d, &term, &u, bounds, mu, &warm, ddp.as_ref()) {
                    Ok(bw) => break Some(bw),
                    Err(BackwardError::Dynamics(e)) => return Err(e),
                    Err(BackwardError::Indefinite) => {
                        delta = delta.max(1.0) * o.mu_factor;
                        mu = (mu * delta).max(o.mu_min);
                        if mu > o.mu_max {
                            break None;
                        }
                    }
                }
            };
            t_back += t.elapsed().as_secs_f64();
            let Some(bw) = bw else {
                status = IlqrStatus::RegularisationLimit;
                message = format!("regularisation μ exceeded {:e}: Q_uu + μ1 stayed indefinite", o.mu_max);
                break 'outer;
            };
            let expected = -(bw.dv1 + bw.dv2);
            if expected <= o.tolerance * j.abs().max(1.0) && mu <= o.mu_min {
                log.push(IterationLog { cost: j, expected_reduction: expected, expected_reduction_alpha: 0.0, actual_reduction: 0.0, alpha: 0.0, mu, gradient_norm: gnorm, time: start.elapsed().as_secs_f64() });
                status = IlqrStatus::Converged;
                message = format!("converged: expected decrease {expected:.3e} ≤ tolerance·max(1, |J|) after {iterations} iterations");
                last = Some(bw);
                break 'outer;
            }
            // forward pass with backtracking
            let t = Instant::now();
            let mut accepted = None;
            for &alpha in &o.alphas {
                let trial = dynamics.rollout(x0, steps, &mut |k, xk, uk| {
                    let (kff, gain) = (&bw.k_ff[k], &bw.gains[k]);
                    let xb = &x[k * nx..(k + 1) * nx];
                    for i in 0..nu {
                        let mut v = u[k * nu + i] + alpha * kff[i];
                        for jj in 0..nx {
                            v += gain[(i, jj)] * (xk[jj] - xb[jj]);
                        }
                        uk[i] = v;
                    }
                    clamp_into(uk, bounds);
                });
                let Ok((xn, un)) = trial else { continue };
                let Ok(jn) = total_cost(cost, &xn, &un, nx, nu) else { continue };
                if !jn.is_finite() {
                    continue;
                }
                let exp_a = -(alpha * bw.dv1 + alpha * alpha * bw.dv2);
                let actual = j - jn;
                if actual > 0.0 && actual >= o.armijo * exp_a {
                    accepted = Some((xn, un, jn, alpha, exp_a, actual));
                    break;
                }
            }
            t_fwd += t.elapsed().as_secs_f64();
            match accepted {
                Some((xn, un, jn, alpha, exp_a, actual)) => {
                    log.push(IterationLog { cost: j, expected_reduction: expected, expected_reduction_alpha: exp_a, actual_reduction: actual, alpha, mu, gradient_norm: gnorm, time: start.elapsed().as_secs_f64() });
                    x = xn;
                    u = un;
                    j = jn;
                    cost_history.push(j);
                    iterations += 1;
                    warm.clone_from(&bw.k_ff);
                    last = Some(bw);
                    delta = (delta / o.mu_factor).min(1.0 / o.mu_factor);
                    mu *= delta;
                    if mu < o.mu_min {
                        mu = 0.0;
                    }
                    continue 'outer;
                }
                None => {
                    delta = delta.max(1.0) * o.mu_factor;
                    mu = (mu * delta).max(o.mu_min);
                    if mu > o.mu_max {
                        log.push(IterationLog { cost: j, expected_reduction: expected, expected_reduction_alpha: 0.0, actual_reduction: 0.0, alpha: 0.0, mu, gradient_norm: gnorm, time: start.elapsed().as_secs_f64() });
                        status = IlqrStatus::RegularisationLimit;
                        message = format!("line search failed with regularisation up to μ = {:e} (expected decrease {expected:.3e}): no step decreases the cost — stationary to round-off or a poor model", o.mu_max);
                        last = Some(bw);
                        break 'outer;
                    }
                }
            }
        }
    }
    if status == IlqrStatus::MaxIterations {
        message = format!("reached max_iterations = {} (cost {j:.6e})", o.max_iterations);
    }
    let (k_ff, gains) = match last {
        Some(bw) => (bw.k_ff, bw.gains),
        None => (vec![DVector::zeros(nu); steps], vec![DMatrix::zeros(nu, nx); steps]),
    };
    Ok(IlqrResult {
        x,
        u,
        k_ff,
        gains,
        cost: j,
        cost_history,
        log,
        iterations,
        converged: status == IlqrStatus::Converged,
        status,
        message,
        wall_time: start.elapsed().as_secs_f64(),
        time_linearize: t_lin,
        time_backward: t_back,
        time_forward: t_fwd,
    })
}
