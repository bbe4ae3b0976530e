//! Multiple shooting: feasibility-driven DDP (FDDP; Mastalli et al. 2020, crocoddyl's
//! `SolverFDDP`), started from a state trajectory that need not satisfy the dynamics.
//!
//! iLQR ([`crate::ilqr()`]) needs its first trajectory to be a rollout of the initial controls,
//! which an unstable system (a walking robot, a swing-up) does not survive when those controls
//! are poor. FDDP keeps a state guess `x̄_0 … x̄_N` beside the controls and the *gaps*
//! `f̄_{k+1} = f(x̄_k, ū_k) ⊖ x̄_{k+1}`, `f̄_0 = x_0 ⊖ x̄_0` (tangent vectors of the state
//! space), and
//!
//! * runs iLQR's Gauss–Newton backward pass on the linearisation along the guess with the gaps
//!   folded into the value gradient: after each stage `V_x ← V_x + V_xx f̄` (the cost-to-go
//!   of the next state is expanded about where the dynamics land, not about the guess);
//! * rolls out `x̂_0 = x_0 ⊕ (α − 1) f̄_0`,
//!   `û_k = ū_k + α k_k + K_k (x̂_k ⊖ x̄_k)`, `x̂_{k+1} = f(x̂_k, û_k) ⊕ (α − 1) f̄_{k+1}`: a full
//!   step (`α = 1`) closes every gap — the trajectory is then a rollout and the iteration is
//!   iLQR's —, a partial one keeps `1 − α` of each;
//! * accepts a trial by the decrease `ΔJ(α)` a model predicts: a descent step when `ΔJ ≥ 0`
//!   and the actual decrease is at least a tenth of it, and while infeasible also a step that
//!   raises the cost by at most twice the predicted amount (closing gaps may cost), as
//!   crocoddyl's `SolverFDDP` does. Once feasible the model is iLQR's,
//!   `ΔJ(α) = −α (Σ Q_uᵀk + ½ α Σ kᵀQ_uu k)`. While infeasible it is the cost's change along
//!   the step's linear model: a trial moves the guess by `δ(α)` with, to first order,
//!   `δx_0 = α f̄_0`, `δu_k = α k_k + K_k δx_k`, `δx_{k+1} = A_k δx_k + B_k δu_k + α f̄_{k+1}`,
//!   i.e. `δ(α) = α δ(1)` — the gap kept at `1 − α` and the feed-forward scaled by `α` scale
//!   the whole deviation —, so the Gauss–Newton cost changes by
//!   `−ΔJ(α) = α G + ½ α² H`, `G = Σ l_xᵀδx + l_uᵀδu`, `H = Σ δᵀ∇²l δ` at `δ = δ(1)`,
//!   exact on LQ problems at every `α` (`tests/fddp.rs`). crocoddyl's `expectedImprovement`,
//!   `α (d_1 + ½ α d_2)` with `d_1 = Σ −Q_uᵀk − Σ_k f̄_kᵀ V_x,k + Σ f̄ᵀ V_xx (x̂ ⊖ x̄)`,
//!   `d_2 = −Σ kᵀ Q_uu k + Σ f̄ᵀ V_xx f̄ − 2 Σ f̄ᵀ V_xx (x̂ ⊖ x̄)`, is exact at `α = 1` only:
//!   on LQ problems with random guesses it predicted a rise of 48 where the cost fell by 140
//!   (`α = ¼`), and on ANYmal's jump, whose warm start has large gaps, a fall at a rate of
//!   6·10⁴ per unit `α` from a cost of 7.8 that in fact rose, so every trial of the first eight
//!   iterations was refused while the regularisation climbed to 14 (half the solve's time).
//! * tries `α = 1, ½, ¼, …`, but while infeasible from at most four times the step accepted
//!   last (two doublings): closing large gaps, the model's error grows fast with `α`, and
//!   longer trials are refused again and again (ANYmal's jump with friction cones: in each of
//!   its first six iterations `α = 1`, ½ and ¼ were refused, the cost rising 4–8 times the
//!   predicted amount at ½, before ⅛ or 1/16 was kept). On the jump the same 20 iterations
//!   then take 7–15 % less time; every other gait, the cart-pole's and the panda's infeasible
//!   warm starts take the same iterations to the same costs.
//!
//! A trial that closes every gap (a full step, or any step once the trajectory is feasible) is
//! a closed-loop rollout from `x_0`, and runs through iLQR's pipeline
//! (module `pipeline`): its steps are linearised on the pool's other threads while it is
//! simulated, and the next Gauss–Newton backward pass (feasible: no gaps; μ relaxed as after
//! any accepted step) runs over them as they come, so that a kept trial needs no backward pass
//! of its own (the same pass bit for bit). Other trials, which keep part of each gap, step one
//! knot at a time, each Newton solve started at the linearisation's prediction of where it
//! lands, with their derivatives computed behind them alike (on ANYmal's gaits with friction
//! cones up to 6 % less time, none measurable on the trot and the pace; the backward pass
//! behind them would need their gaps, and is not run).
//!
//! Regularisation, stopping rule, the hinge penalties' active set (module `ilqr::active_set`,
//! with the gaps in the full step's linear model), the fitted step a feasible iterate's line
//! search may try first (module `ilqr::fitted_step`) and result are iLQR's ([`IlqrOptions`],
//! [`IlqrResult`]); the iteration stops when the trajectory is feasible and a full step's
//! predicted decrease is at most `tolerance · max(1, |J|)` on the unregularised model. The
//! state regularisation starts at [`FDDP_XREG`] unless set (module
//! `ilqr::state_regularisation`), and moves on only from feasible iterates. Control limits as iLQR's
//! (crocoddyl's `SolverBoxFDDP`): the feed-forward term solves the box QP on
//! `u_min − ū ≤ δu ≤ u_max − ū` ([`crate::boxqp`]), the gains act on the free controls only,
//! and the forward pass clamps.
//!
//! With [`Method::Ddp`], once the trajectory is feasible the backward pass adds the
//! dynamics' second derivatives contracted with the next knot's value gradient, as iLQR's
//! DDP does (the iteration is then full DDP from a rollout). While gaps remain it keeps the
//! Gauss–Newton model: there the value gradients, the multipliers of the dynamics' equality
//! constraints in a Newton step of the multiple-shooting problem, are those of a trajectory
//! far from feasible, and with them the exact Hessian was indefinite at every
//! regularisation FDDP tried on the cart-pole's interpolated guess (no step accepted). And an
//! iteration whose exact model is indefinite at the current regularisation, or has no
//! acceptable step, is done again on the Gauss–Newton model (the next one tries the exact
//! model again): far from the optimum the exact `Q_uu` may be indefinite wherever the
//! regularisation is small enough for the step to matter (ANYmal's walk stalled at its
//! first feasible iterate, cost 7·10⁴, with the regularisation climbing to its limit).

use crate::cost::{total_cost, Cost, CostDerivatives};
use crate::dynamics::{Dynamics, Nominal};
use crate::error::{OptimError, Result};
use crate::ilqr::{
    active_set, check_options, clamp_into, control_bounds, relaxed, require_second_order, Backward, BackwardSweep, BackwardWorkspace, Bounds, FittedStep,
    IlqrOptions, IlqrResult, IlqrStatus, IterationLog, Method, StageValue, StateRegularisation,
};
use crate::pipeline::{simulate_and_derive, ClosedLoop, Derivatives, Observer, ReverseSweep, Rollout, TrialError};
use nalgebra::{DMatrix, DVector, DVectorView};
use rayon::prelude::*;
use std::time::Instant;

/// Gaps of a trajectory at or below this size (∞-norm) count as closed.
const GAP_TOLERANCE: f64 = 1e-9;
/// Accept a descent step when the actual decrease is at least this share of the predicted one.
const ACCEPT_STEP: f64 = 0.1;
/// While infeasible, accept a step that raises the cost by at most this multiple of the
/// predicted change.
const ACCEPT_NEGATIVE_STEP: f64 = 2.0;

/// While the trajectory is infeasible, the line search starts at most this many times the
/// step length accepted last (module docs).
const PARTIAL_GROWTH: f64 = 4.0;

/// One FDDP backward pass: iLQR's gains and predicted decrease (the shared
/// [`BackwardSweep`]), and while the trajectory is infeasible the value function at every
/// knot with the gaps' terms of the predicted decrease.
struct Pass {
    out: Backward,
    /// `V_x`, `V_xx` per knot (their gradients with the gaps folded in); empty when feasible.
    values: Vec<StageValue>,
    /// `Σ −Q_uᵀ k` and `Σ −kᵀ Q_uu k` (with the gaps' terms while infeasible).
    dg: f64,
    dq: f64,
}

/// The trajectory being improved: states (`(N+1)·nx`), controls (`N·nu`), gaps
/// (`(N+1)·ndx`, row `k` the gap at `x̄_k`), and whether every gap is closed.
struct Shooting {
    x: Vec<f64>,
    u: Vec<f64>,
    gaps: Vec<f64>,
    feasible: bool,
}

/// A step of length `alpha` along the backward pass `pass` from the trajectory `traj`, with
/// the controls clamped into `bounds`.
#[derive(Clone, Copy)]
struct Trial<'a> {
    traj: &'a Shooting,
    pass: &'a Pass,
    alpha: f64,
    bounds: Option<&'a Bounds>,
}

/// FDDP's first state regularisation `ρ` ([`IlqrOptions::xreg`] `None`; module
/// `ilqr::state_regularisation`): damping the first iterations' state deviations took ANYmal's
/// walk from 16 iterations to 8 and the cart-pole's swing-up from an interpolated guess from 37
/// to 23, the panda's reach from 16 to 15, and left the other gaits' counts within one
/// (BENCHMARKS.md, session 33). An absolute value: a problem whose value Hessians are much
/// smaller than 1e-2 is damped more in its first iterations.
pub const FDDP_XREG: f64 = 1e-2;

/// Runs FDDP from `x0` (nx), the state guess `x_init` (`(N+1)·nx`, any states: need not be a
/// rollout, nor start at `x0`) and the controls `u_init` (`N·nu`, clamped into the limits).
/// Errors when the inputs or limits are inconsistent, with [`Method::Ddp`] on dynamics
/// without second derivatives, when the dynamics take no single steps ([`Dynamics::step`]),
/// or when the guess itself cannot be evaluated (a step from a guessed state fails); later
/// step failures only shorten the line search.
pub fn fddp<D: Dynamics + ?Sized, C: Cost + ?Sized>(
    dynamics: &D,
    cost: &C,
    x0: &[f64],
    x_init: &[f64],
    u_init: &[f64],
    options: &IlqrOptions,
) -> Result<IlqrResult> {
    // on vidyn's pool: the gaps, derivatives and linearisations run in parallel there
    vidyn_batch::install(|| solve(dynamics, cost, x0, x_init, u_init, options))
}

/// [`fddp`] on the current thread's pool.
fn solve<D: Dynamics + ?Sized, C: Cost + ?Sized>(
    dynamics: &D,
    cost: &C,
    x0: &[f64],
    x_init: &[f64],
    u_init: &[f64],
    options: &IlqrOptions,
) -> Result<IlqrResult> {
    let started = Instant::now();
    let (nx, nu, space) = (dynamics.nx(), dynamics.nu(), dynamics.state_space());
    let ndx = space.ndx();
    let steps = u_init.len().checked_div(nu).unwrap_or(0);
    if nu == 0 || u_init.len() != steps * nu || x_init.len() != (steps + 1) * nx || x0.len() != nx || steps == 0 {
        return Err(OptimError::InvalidInput(format!(
            "fddp: x0 has {} entries (nx = {nx}), the state guess {} (expected (N+1)·nx) and the controls {} (N·nu, nu = {nu}, N ≥ 1)",
            x0.len(),
            x_init.len(),
            u_init.len()
        )));
    }
    check_options(options)?;
    require_second_order(dynamics, options, x0, u_init)?;
    let ddp = options.method == Method::Ddp;
    // with DDP: whether this iteration tries the exact model (module docs)
    let mut exact = true;
    let bounds = control_bounds(options, nu)?;
    let bounds = bounds.as_ref();
    space.check(x0, "x0")?;
    for (k, xk) in x_init.chunks_exact(nx).enumerate() {
        space.check(xk, &format!("x_init[{k}]"))?;
    }
    let mut traj = Shooting { x: x_init.to_vec(), u: u_init.to_vec(), gaps: vec![0.0; (steps + 1) * ndx], feasible: false };
    for uk in traj.u.chunks_exact_mut(nu) {
        clamp_into(uk, bounds);
    }
    measure_gaps(dynamics, x0, &mut traj)?;
    let mut cost_now = total_cost(cost, &traj.x, &traj.u, nx, nu)?;
    let mut history = vec![cost_now];
    let mut log = Vec::new();
    let (mut mu, mut delta) = (options.mu_init, 1.0_f64);
    let mut xreg = StateRegularisation::new(options.xreg.unwrap_or(FDDP_XREG));
    let (mut status, mut accepted) = (IlqrStatus::MaxIterations, 0);
    let mut pass: Option<Pass> = None;
    let mut scratch = BackwardWorkspace::new(ndx, nu);
    // the hinges switched by the last `settle_hinges`, and those on which the model of the
    // current pass and the penalties part
    let mut switched = Vec::new();
    let mut mismatch = active_set::Mismatch::default();
    // the box QP's warm start: the feed-forward terms of the last accepted pass
    let mut warm = vec![DVector::zeros(nu); steps];
    let (mut time_linearize, mut time_backward, mut time_forward) = (0.0, 0.0, 0.0);
    let mut derivatives: Option<Derivatives> = None;
    // buffers for a pipelined trial's derivatives
    let mut pipelined: Option<Derivatives> = None;
    // the next backward pass, run behind a pipelined trial (used only if that trial is kept),
    // and its buffer
    let mut ahead: Option<Pass> = None;
    let mut ahead_out = Backward::zeros(steps, ndx, nu);
    let mut fitted = FittedStep::new(options.alpha_max, options.fitted_step);
    // the step length of the last accepted trial while the trajectory was infeasible
    let mut last_partial = f64::INFINITY;
    for _ in 0..options.max_iterations {
        let t = Instant::now();
        if derivatives.is_none() {
            derivatives = Some(derive(dynamics, cost, &traj, nu, ndx)?);
        }
        time_linearize += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let second = ddp && traj.feasible && exact;
        let dm = derivatives.as_mut().expect("derived just above");
        let settings = (mu, xreg.rho());
        let backward = match ahead.take() {
            Some(pass) => Some(pass),
            None => backward(second.then_some(dynamics), dm, &traj, settings, bounds, &warm, &mut scratch),
        }
        .map(|p| settle_hinges(second.then_some(dynamics), dm, &traj, settings, bounds, &warm, &mut scratch, &mut switched, p));
        let d = derivatives.as_ref().expect("derived just above");
        time_backward += t.elapsed().as_secs_f64();
        let Some(p) = backward else {
            fitted.reset();
            if second {
                // the exact model is indefinite here: a Gauss–Newton iteration instead
                exact = false;
                continue;
            }
            // Q_uu + μ1 not positive definite: more regularisation
            delta = delta.max(1.0) * options.mu_factor;
            mu = (mu * delta).max(options.mu_min);
            if mu > options.mu_max {
                status = IlqrStatus::RegularisationLimit;
                break;
            }
            continue;
        };
        // the hinges on which the model and the penalties part along the step (module
        // `ilqr::active_set`): the predicted decreases are the penalties'
        mismatch.measure(d, &p.out, Some(&traj.gaps));
        let full = p.dg + 0.5 * p.dq + mismatch.correction(1.0);
        if traj.feasible && full <= options.tolerance * cost_now.abs().max(1.0) {
            if !xreg.settled() {
                // judged on the unregularised model: the pass again without ρ
                xreg.settle();
                continue;
            }
            status = IlqrStatus::Converged;
            pass = Some(p);
            break;
        }
        let t = Instant::now();
        let mut step: Option<(Shooting, f64, f64, f64)> = None;
        // the derivatives of the accepted trial when the pipeline computed them behind it
        let mut derived: Option<Derivatives> = None;
        // while infeasible, the cost's change along the step's linear model (module docs)
        let model = (!traj.feasible).then(|| linear_model(d, &traj, &p));
        let accept = |alpha: f64, dv: f64, trial_cost: f64| {
            let (d1, d2) = (p.dg + dv, p.dq - 2.0 * dv);
            let expected = mismatch.correction(alpha)
                + match model {
                    Some((slope, curvature)) => -alpha * (slope + 0.5 * alpha * curvature),
                    None => alpha * (d1 + 0.5 * alpha * d2),
                };
            let actual = cost_now - trial_cost;
            if alpha > 1.0 {
                return FittedStep::keeps(actual, full).then_some(expected);
            }
            let ok =
                if expected >= 0.0 { d1.abs() < 1e-12 || actual > ACCEPT_STEP * expected } else { !traj.feasible && actual > ACCEPT_NEGATIVE_STEP * expected };
            ok.then_some(expected)
        };
        // a kept pipelined trial is feasible and relaxes μ: the next pass's settings (ρ moves
        // on only from a feasible iterate)
        let mu_kept = relaxed(delta, mu, options).1;
        let xreg_kept = |alpha: f64| if traj.feasible { xreg.after(alpha) } else { xreg.rho() };
        let mut swept = false;
        let first = if traj.feasible { fitted.first_trial() } else { None };
        // while infeasible, from at most PARTIAL_GROWTH times the last partial step (module
        // docs), and at least the last of the step lengths
        let longest = if traj.feasible { f64::INFINITY } else { PARTIAL_GROWTH * last_partial };
        let skipped = options.alphas.iter().take_while(|&&a| a > longest).count().min(options.alphas.len().saturating_sub(1));
        for alpha in first.into_iter().chain(options.alphas[skipped..].iter().copied()) {
            // a trial that closes every gap is a closed-loop rollout from x0: simulated with
            // its derivatives computed behind it on the pool's other threads and the next
            // backward pass run over them as they come (iLQR's pipeline); one that keeps part
            // of each gap has its derivatives computed behind it alike
            let closes = traj.feasible || alpha == 1.0;
            let mut trial_d = pipelined.take().unwrap_or_else(|| Derivatives::zeros(steps, ndx, nu));
            let trial = Trial { traj: &traj, pass: &p, alpha, bounds };
            let judge = |xs: &[f64], _: &[f64], jn: Result<f64>| {
                let Ok(jn) = jn else { return Ok(None) };
                Ok(accept(alpha, gap_term(&space, &traj, &p, xs, nx, ndx), jn).map(|expected| (jn, expected)))
            };
            let mut gaps = vec![0.0; (steps + 1) * ndx];
            let outcome = if closes {
                let near = Nominal { x: &traj.x, u: &traj.u, a: &d.a, b: &d.b };
                let mut dx = vec![0.0; ndx];
                let policy = &mut |k: usize, xk: &[f64], uk: &mut [f64]| feedback(&space, trial, k, xk, uk, &mut dx);
                // with DDP the pass behind a trial would form the exact second order of trials
                // the line search may still reject, on the rollout's thread: ANYmal's jump took
                // 0.43 s instead of 0.35 s; so only the Gauss–Newton pass runs there
                let mut sweep =
                    BackwardSweep::new(None::<&D>, bounds, mu_kept, &p.out.k_ff, &mut scratch, &mut ahead_out).with_state_regularisation(xreg_kept(alpha));
                let behind = (!ddp).then_some(&mut sweep as &mut dyn ReverseSweep);
                let outcome = simulate_and_derive(dynamics, cost, ClosedLoop { x0, steps, policy, near: Some(&near) }.into(), judge, behind, &mut trial_d);
                swept = !ddp && sweep.complete();
                outcome
            } else {
                // no pass behind this trial: the one behind an earlier, rejected trial is stale
                swept = false;
                let run = Box::new(|observe: &mut Observer<'_>| forward(dynamics, x0, trial, (&d.a, &d.b), observe, &mut gaps));
                simulate_and_derive(dynamics, cost, Rollout::Custom { steps, run }, judge, None, &mut trial_d)
            };
            match outcome {
                Ok(Some(kept)) => {
                    let (trial_cost, expected) = kept.verdict;
                    let trial = Shooting { x: kept.x, u: kept.u, gaps, feasible: closes };
                    step = Some((trial, trial_cost, alpha, expected));
                    derived = Some(trial_d);
                    break;
                }
                Err(TrialError::Rollout(OptimError::Cancelled)) => return Err(OptimError::Cancelled),
                Err(TrialError::Derivatives(e)) => return Err(e),
                Ok(None) | Err(TrialError::Rollout(_) | TrialError::Judge(_)) => pipelined = Some(trial_d),
            }
        }
        time_forward += t.elapsed().as_secs_f64();
        match step {
            Some((trial, trial_cost, alpha, expected)) => {
                log.push(IterationLog {
                    cost: cost_now,
                    expected_reduction: full,
                    expected_reduction_alpha: expected,
                    actual_reduction: cost_now - trial_cost,
                    alpha,
                    mu,
                    gradient_norm: p.out.gradient_norm,
                    time: started.elapsed().as_secs_f64(),
                });
                if traj.feasible {
                    fitted.accepted(alpha, p.dg, cost_now - trial_cost);
                    xreg.accepted(alpha);
                } else {
                    fitted.reset();
                    last_partial = alpha;
                }
                traj = trial;
                cost_now = trial_cost;
                history.push(cost_now);
                accepted += 1;
                let pipelined_trial = derived.is_some();
                // the spare buffers of the derivatives go back to the pipeline's next trial
                pipelined = match derived {
                    Some(next) => derivatives.replace(next),
                    None => derivatives.take(),
                };
                warm.clone_from(&p.out.k_ff);
                (delta, mu) = relaxed(delta, mu, options);
                // the pass run behind a kept pipelined trial is the next one (the trajectory is
                // feasible, Gauss–Newton, μ relaxed, warm-started from this pass)
                if pipelined_trial && swept {
                    let out = std::mem::replace(&mut ahead_out, Backward::zeros(steps, ndx, nu));
                    let (dg, dq) = (-out.dv1, -2.0 * out.dv2);
                    ahead = Some(Pass { out, values: Vec::new(), dg, dq });
                }
                pass = Some(p);
                exact = true;
            }
            None if second => {
                fitted.reset();
                exact = false;
            }
            None => {
                fitted.reset();
                xreg.refused();
                delta = delta.max(1.0) * options.mu_factor;
                mu = (mu * delta).max(options.mu_min);
                if mu > options.mu_max {
                    status = IlqrStatus::RegularisationLimit;
                    pass = Some(p);
                    break;
                }
            }
        }
    }
    let (k_ff, gains) = match pass {
        Some(p) => (p.out.k_ff, p.out.gains),
        None => (vec![DVector::zeros(nu); steps], vec![DMatrix::zeros(nu, ndx); steps]),
    };
    let feasibility = if traj.feasible { "feasible" } else { "still infeasible (gaps remain)" };
    let message = match status {
        IlqrStatus::Converged => format!("converged after {accepted} iterations, trajectory {feasibility}"),
        IlqrStatus::MaxIterations => format!("reached max_iterations = {} (cost {cost_now:.6e}), trajectory {feasibility}", options.max_iterations),
        IlqrStatus::RegularisationLimit => format!("regularisation above μ_max: no step decreases the cost (cost {cost_now:.6e}), trajectory {feasibility}"),
    };
    Ok(IlqrResult {
        x: traj.x,
        u: traj.u,
        k_ff,
        gains,
        cost: cost_now,
        cost_history: history,
        log,
        iterations: accepted,
        converged: status == IlqrStatus::Converged,
        status,
        message,
        wall_time: started.elapsed().as_secs_f64(),
        time_linearize,
        time_backward,
        time_forward,
    })
}

/// The gaps of `traj` from its states and controls (one step from every guessed state, in
/// parallel), and whether they are closed.
fn measure_gaps<D: Dynamics + ?Sized>(dynamics: &D, x0: &[f64], traj: &mut Shooting) -> Result<()> {
    let (nx, nu, space) = (dynamics.nx(), dynamics.nu(), dynamics.state_space());
    let ndx = space.ndx();
    let steps = traj.u.len() / nu;
    let landed: Vec<Result<Vec<f64>>> = (0..steps)
        .into_par_iter()
        .map(|k| {
            let mut next = vec![0.0; nx];
            dynamics.step(k, &traj.x[k * nx..(k + 1) * nx], &traj.u[k * nu..(k + 1) * nu], Some(&traj.x[(k + 1) * nx..(k + 2) * nx]), &mut next).map(|()| next)
        })
        .collect();
    space.difference(&traj.x[..nx], x0, &mut traj.gaps[..ndx]);
    for (k, next) in landed.into_iter().enumerate() {
        let next = next?;
        space.difference(&traj.x[(k + 1) * nx..(k + 2) * nx], &next, &mut traj.gaps[(k + 1) * ndx..(k + 2) * ndx]);
    }
    traj.feasible = traj.gaps.iter().all(|g| g.abs() <= GAP_TOLERANCE);
    Ok(())
}

/// `A_k`, `B_k` along the (possibly gapped) trajectory and the cost's derivatives.
fn derive<D: Dynamics + ?Sized, C: Cost + ?Sized>(dynamics: &D, cost: &C, traj: &Shooting, nu: usize, ndx: usize) -> Result<Derivatives> {
    let (a, b) = dynamics.linearize(&traj.x, &traj.u)?;
    let mut stages = CostDerivatives::zeros(traj.u.len() / nu, ndx, nu);
    stages.evaluate(cost, &traj.x, &traj.u)?;
    Ok(Derivatives { a, b, cost: stages })
}

/// The backward pass with the gaps (module docs) on the shared [`BackwardSweep`], with DDP's
/// second order when `ddp` holds the dynamics, regularised by `μ` and `xreg`
/// ([`IlqrOptions::xreg`]); `None` when `Q_uu + μ1` is not positive definite at some stage (or a
/// second derivative failed).
fn backward<D: Dynamics + ?Sized>(
    ddp: Option<&D>,
    d: &Derivatives,
    traj: &Shooting,
    (mu, xreg): (f64, f64),
    bounds: Option<&Bounds>,
    warm: &[DVector<f64>],
    scratch: &mut BackwardWorkspace,
) -> Option<Pass> {
    let steps = d.a.len();
    let (ndx, nu) = (traj.gaps.len() / (steps + 1), traj.u.len() / steps);
    let mut out = Backward::zeros(steps, ndx, nu);
    let mut values = if traj.feasible { Vec::new() } else { vec![StageValue::zeros(ndx); steps + 1] };
    {
        let sweep = BackwardSweep::new(ddp, bounds, mu, warm, scratch, &mut out).with_state_regularisation(xreg);
        let mut sweep = if traj.feasible { sweep } else { sweep.with_gaps(&traj.gaps, &mut values) };
        sweep.start(&d.cost.terminal);
        for k in (0..steps).rev() {
            sweep.step(k, &traj.x, &traj.u, &d.a[k], &d.b[k], &d.cost.stages[k]).ok()?;
        }
    }
    // iLQR's dv1 = Σ kᵀQ_u and dv2 = ½ Σ kᵀQ_uu k, and the gaps' terms
    let (mut dg, mut dq) = (-out.dv1, -2.0 * out.dv2);
    for (k, v) in values.iter().enumerate() {
        let f = DVectorView::from_slice(&traj.gaps[k * ndx..(k + 1) * ndx], ndx);
        dg -= v.vx.dot(&f);
        dq += f.dot(&(&v.vxx * f));
    }
    Some(Pass { out, values, dg, dq })
}

/// `pass` again on the hinges' active set at its full step (module `ilqr::active_set`), or
/// `pass` itself when no hinge switches or the new model is not positive definite (the
/// switches then undone).
#[allow(clippy::too_many_arguments)]
fn settle_hinges<D: Dynamics + ?Sized>(
    ddp: Option<&D>,
    d: &mut Derivatives,
    traj: &Shooting,
    settings: (f64, f64),
    bounds: Option<&Bounds>,
    warm: &[DVector<f64>],
    scratch: &mut BackwardWorkspace,
    switched: &mut Vec<(usize, usize)>,
    pass: Pass,
) -> Pass {
    active_set::settle(d, &pass.out, Some(&traj.gaps), switched);
    if switched.is_empty() {
        return pass;
    }
    backward(ddp, d, traj, settings, bounds, warm, scratch).unwrap_or_else(|| {
        active_set::undo(&mut d.cost.stages, switched);
        pass
    })
}

/// The trial's control at step `k` from its state `xk`: `ū_k + α k_k + K_k (x̂_k ⊖ x̄_k)`,
/// clamped into the limits (`dx`: `ndx` entries of scratch).
fn feedback(space: &crate::StateSpace, trial: Trial<'_>, k: usize, xk: &[f64], uk: &mut [f64], dx: &mut [f64]) {
    let Trial { traj, pass, alpha, bounds } = trial;
    let (nx, nu) = (xk.len(), uk.len());
    space.difference(&traj.x[k * nx..(k + 1) * nx], xk, dx);
    for (i, u) in uk.iter_mut().enumerate() {
        let gain = pass.out.gains[k].row(i);
        *u = traj.u[k * nu + i] + alpha * pass.out.k_ff[k][i] + gain.iter().zip(dx.iter()).map(|(g, d)| g * d).sum::<f64>();
    }
    clamp_into(uk, bounds);
}

/// `Σ_k f̄_kᵀ V_xx,k (x̂_k ⊖ x̄_k)` over the knots of the trial `xs`, the gaps' term of the
/// predicted decrease (0 when the current trajectory is feasible).
fn gap_term(space: &crate::StateSpace, traj: &Shooting, pass: &Pass, xs: &[f64], nx: usize, ndx: usize) -> f64 {
    let mut dx = vec![0.0; ndx];
    pass.values
        .iter()
        .enumerate()
        .map(|(k, v)| {
            space.difference(&traj.x[k * nx..(k + 1) * nx], &xs[k * nx..(k + 1) * nx], &mut dx);
            let vxx_dx = &v.vxx * DVectorView::from_slice(&dx, ndx);
            traj.gaps[k * ndx..(k + 1) * ndx].iter().zip(vxx_dx.iter()).map(|(g, w)| g * w).sum::<f64>()
        })
        .sum()
}

/// The trial of step length `alpha < 1` from an infeasible trajectory, which keeps `1 − α`
/// of each gap (module docs), handing the start of each step to `observe`: its trajectory, and
/// its own gaps in `gaps`. Each step's solve starts from the linearisation's prediction of
/// where it lands, `x̄_{k+1} ⊕ (f̄_{k+1} + A_k (x̂_k ⊖ x̄_k) + B_k (û_k − ū_k))`, off the step's
/// result by second-order terms in the trial's distance from the current trajectory.
fn forward<D: Dynamics + ?Sized>(
    dynamics: &D,
    x0: &[f64],
    step: Trial<'_>,
    (a, b): (&[DMatrix<f64>], &[DMatrix<f64>]),
    observe: &mut Observer<'_>,
    gaps: &mut [f64],
) -> Result<(Vec<f64>, Vec<f64>)> {
    let Trial { traj, alpha, .. } = step;
    let space = dynamics.state_space();
    let (nx, nu, ndx) = (dynamics.nx(), dynamics.nu(), space.ndx());
    let steps = traj.u.len() / nu;
    let keep = alpha - 1.0;
    let (mut x, mut u) = (vec![0.0; (steps + 1) * nx], vec![0.0; steps * nu]);
    let (mut dx, mut shift, mut landed) = (vec![0.0; ndx], vec![0.0; ndx], x0.to_vec());
    let (mut predicted, mut guess) = (DVector::zeros(ndx), vec![0.0; nx]);
    for k in 0..=steps {
        // x̂_k = (where the dynamics landed) ⊕ (α − 1) f̄_k, and its own gap
        for (s, g) in shift.iter_mut().zip(&traj.gaps[k * ndx..(k + 1) * ndx]) {
            *s = keep * g;
        }
        space.integrate(&landed, &shift, &mut x[k * nx..(k + 1) * nx]);
        space.difference(&x[k * nx..(k + 1) * nx], &landed, &mut gaps[k * ndx..(k + 1) * ndx]);
        if k == steps {
            break;
        }
        let (xk, uk) = (&x[k * nx..(k + 1) * nx], &mut u[k * nu..(k + 1) * nu]);
        feedback(&space, step, k, xk, uk, &mut dx);
        if uk.iter().any(|v| !v.is_finite()) {
            return Err(OptimError::InvalidInput("fddp: a trial control is not finite".into()));
        }
        observe(k, xk, uk);
        // Newton starts at the linear prediction of the landing point
        predicted.copy_from_slice(&traj.gaps[(k + 1) * ndx..(k + 2) * ndx]);
        predicted.gemv(1.0, &a[k], &DVectorView::from_slice(&dx, ndx), 1.0);
        for (i, (&ut, &ub)) in uk.iter().zip(&traj.u[k * nu..(k + 1) * nu]).enumerate() {
            predicted.axpy(ut - ub, &b[k].column(i), 1.0);
        }
        space.integrate(&traj.x[(k + 1) * nx..(k + 2) * nx], predicted.as_slice(), &mut guess);
        dynamics.step(k, xk, uk, Some(&guess), &mut landed)?;
    }
    Ok((x, u))
}

/// `(G, H)` of the step's linear model from the guess (module docs): `δx_0 = f̄_0`,
/// `δu_k = k_k + K_k δx_k`, `δx_{k+1} = A_k δx_k + B_k δu_k + f̄_{k+1}`,
/// `G = Σ l_xᵀδx + l_uᵀδu`, `H = Σ δᵀ∇²l δ`, over the stages and the terminal cost.
fn linear_model(d: &Derivatives, traj: &Shooting, pass: &Pass) -> (f64, f64) {
    let (mut slope, mut curvature) = (0.0, 0.0);
    let dx = active_set::full_step(&d.a, &d.b, &pass.out, Some(&traj.gaps), |k, dx, du| {
        let s = &d.cost.stages[k];
        slope += s.lx.dot(dx) + s.lu.dot(du);
        curvature += dx.dot(&(&s.lxx * dx)) + 2.0 * du.dot(&(&s.lux * dx)) + du.dot(&(&s.luu * du));
    });
    let t = &d.cost.terminal;
    slope += t.lx.dot(&dx);
    curvature += dx.dot(&(&t.lxx * &dx));
    (slope, curvature)
}
