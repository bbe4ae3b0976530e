//! Iterative LQR (iLQR) on exact discrete dynamics, with control limits.
//!
//! Each iteration works on the exact linearisation `A_k`, `B_k` and the cost derivatives at
//! every step of the current trajectory — computed for each trial while it is simulated, on
//! the pool's other threads, and kept with the trial if it is accepted (module `pipeline`;
//! dynamics without per-step linearisation go through [`Dynamics::linearize`], for a VI the
//! batch engine's [`vidyn_batch::linearize`]) —, runs the Riccati-like backward
//! pass on the Gauss–Newton model of the cost-to-go (second derivatives of the dynamics
//! dropped: that is what distinguishes iLQR from DDP), and a forward pass with a backtracking
//! line search on the closed-loop rollout `u_k = ū_k + α k_k + K_k (x_k − x̄_k)`. The next
//! backward pass starts on a trial as soon as the derivatives of its last steps are in, while
//! the pool's other threads evaluate its cost and finish the derivatives of its first steps
//! (`BackwardSweep`), and is kept if the trial is; on the same numbers in the same order, so
//! the iterates are those of the plain sequence.
//!
//! * **Regularisation** (Levenberg–Marquardt on `Q_uu`): the backward pass uses
//!   `Q_uu + μ 1`. `μ` grows (`μ ← max(μ_min, μ Δ)`, `Δ ← max(Δ₀, Δ Δ₀)`) when `Q_uu + μ 1`
//!   is not positive definite or the line search fails, and shrinks after an accepted step
//!   (`Δ ← min(1/Δ₀, Δ/Δ₀)`, `μ ← μ Δ`, set to 0 below `μ_min`) — the schedule of Tassa,
//!   Erez & Todorov (IROS 2012).
//! * **Line search**: `α = 1, ½, ¼, …`; a trial is accepted when the actual decrease is at
//!   least `armijo ×` the decrease the quadratic model predicts,
//!   `ΔJ_exp(α) = −(α Σ kᵀQ_u + ½ α² Σ kᵀQ_uu k)`. A trial whose rollout fails (Newton
//!   divergence of the VI) is rejected like one that increases the cost. When the last two
//!   steps gained over 1.5 times, or under half, the decrease predicted, the step fitted to
//!   those decreases (longer ones up to `α_max`, kept if they beat the full step's prediction)
//!   is tried first (module `fitted_step`).
//! * **Control limits** `u_min ≤ u ≤ u_max`: the feed-forward term solves the box QP
//!   `min_δu ½ δuᵀ Q_uu δu + Q_uᵀ δu` on `u_min − ū ≤ δu ≤ u_max − ū` by projected Newton
//!   ([`crate::boxqp`], Tassa, Mansard & Todorov ICRA 2014); the feedback rows of the clamped
//!   directions are zero and the free rows are `−H_ff⁻¹ Q_ux,f`. The forward pass clamps
//!   `u` to the box as well.
//! * **State regularisation** (opt-in for iLQR, [`IlqrOptions::xreg`]): `V_xx + ρ 1` at the
//!   next knot, `ρ` falling after full steps and rising after shortened ones (module
//!   `state_regularisation`).
//! * **Hinge penalties** (friction cones; module [`crate::hinge`]): after the backward pass
//!   each is switched on or off by the sign of its linearisation at the pass's full step and
//!   the pass runs once more on that model; the predicted decreases are the penalties' along
//!   the step (module `active_set`).
//! * **Convergence**: the iteration stops when the expected decrease of a full step is at
//!   most `tolerance · max(1, |J|)` with `μ ≤ μ_min` and `ρ = 0`. The report also carries the norm of
//!   the exact (projected) gradient `∂J/∂u` of the open-loop cost, from an adjoint pass.
//!
//! **Full DDP** ([`Method::Ddp`]; Jacobson & Mayne 1970) adds the second derivatives of the
//! dynamics contracted with the value gradient of the next step,
//! `Q_xx += Σ_i V_x,i(k+1) ∂²f_i/∂x²`, `Q_ux += Σ_i V_x,i ∂²f_i/∂u∂x`,
//! `Q_uu += Σ_i V_x,i ∂²f_i/∂u²`, from [`Dynamics::second_order_contracted`] (called in the
//! backward pass, where `V_x(k+1)` is known). The model of the cost-to-go is then the exact
//! second-order expansion, so near a regular minimum DDP converges quadratically and the
//! expected decrease matches the actual one; iLQR's Gauss–Newton model converges linearly
//! when the costate does not vanish at the optimum. Far from the optimum the exact `Q_uu` may
//! be indefinite wherever the regularisation is small enough for the step to matter: an
//! iteration whose exact model is indefinite at the current `μ`, or has no acceptable step,
//! is done again on the Gauss–Newton model at the same `μ` (the next one tries the exact model
//! again). Dynamics without second derivatives (a VI with kinematic joints or body wrenches)
//! make [`Method::Ddp`] fail with [`OptimError::NotImplemented`]. On a manifold (a VI with free-flyer, spherical or planar
//! joints) the states' deviations are tangent vectors (`difference`) and the second
//! derivatives are those of `δ ↦ f(x̄ ⊕ δ, ū + δu) ⊖ f(x̄, ū)`, the map whose composition with
//! the value function's expansion `V(x̄' ⊕ Δ)` at the nominal next state gives `Q`.

use crate::checks::check_start;
use crate::cost::Cost;
use crate::dynamics::{Dynamics, Nominal, SecondOrder};
use crate::error::{OptimError, Result};
use crate::pipeline::{simulate_and_derive, ClosedLoop, Derivatives, TrialError};
use nalgebra::{DMatrix, DVector};
use std::time::Instant;

pub(crate) mod active_set;
mod backward;
mod fitted_step;
mod options;
mod state_regularisation;

use backward::{backward_pass, BackwardError};
pub(crate) use backward::{BackwardSweep, BackwardWorkspace, StageValue};
pub(crate) use fitted_step::FittedStep;
pub(crate) use state_regularisation::Schedule as StateRegularisation;

pub use options::{IlqrOptions, IlqrResult, IlqrStatus, IterationLog, Method};

/// Feed-forward terms `k_k` (nu) and feedback gains `K_k` (nu×nx) of one backward pass, with
/// the two sums of the expected decrease `ΔJ_exp(α) = −(α dv1 + α² dv2)`.
pub(crate) struct Backward {
    pub(crate) k_ff: Vec<DVector<f64>>,
    pub(crate) gains: Vec<DMatrix<f64>>,
    pub(crate) dv1: f64,
    pub(crate) dv2: f64,
    /// `‖∂J/∂u‖₂` at the pass's trajectory ([`GradientAdjoint`]).
    pub(crate) gradient_norm: f64,
}

impl Backward {
    pub(crate) fn zeros(steps: usize, nx: usize, nu: usize) -> Self {
        Self { k_ff: vec![DVector::zeros(nu); steps], gains: vec![DMatrix::zeros(nu, nx); steps], dv1: 0.0, dv2: 0.0, gradient_norm: 0.0 }
    }
}

/// Control limits `lower ≤ u ≤ upper` (±∞ where none is given).
pub(crate) struct Bounds {
    pub(crate) lower: DVector<f64>,
    pub(crate) upper: DVector<f64>,
}

/// The control limits of `o` ([`IlqrOptions::u_min`], [`IlqrOptions::u_max`]), `None`
/// without limits; errors when a limit has not `nu` entries or `u_min > u_max`.
pub(crate) fn control_bounds(o: &IlqrOptions, nu: usize) -> Result<Option<Bounds>> {
    if o.u_min.is_none() && o.u_max.is_none() {
        return Ok(None);
    }
    let lower = o.u_min.clone().unwrap_or_else(|| vec![f64::NEG_INFINITY; nu]);
    let upper = o.u_max.clone().unwrap_or_else(|| vec![f64::INFINITY; nu]);
    if lower.len() != nu || upper.len() != nu || lower.iter().zip(&upper).any(|(l, h)| l.is_nan() || h.is_nan() || l > h) {
        return Err(OptimError::InvalidInput(format!("u_min and u_max need nu = {nu} entries each with u_min ≤ u_max")));
    }
    Ok(Some(Bounds { lower: DVector::from_vec(lower), upper: DVector::from_vec(upper) }))
}

/// Errors on options out of their ranges ([`IlqrOptions`]).
pub(crate) fn check_options(o: &IlqrOptions) -> Result<()> {
    let valid = o.tolerance >= 0.0
        && o.max_iterations > 0
        && o.mu_init >= 0.0
        && o.xreg.is_none_or(|x| x >= 0.0 && x.is_finite())
        && o.mu_min > 0.0
        && o.mu_max > o.mu_min
        && o.mu_factor > 1.0
        && !o.alphas.is_empty()
        && o.alphas.iter().all(|a| *a > 0.0 && *a <= 1.0)
        && o.alpha_max.is_finite();
    if valid {
        Ok(())
    } else {
        Err(OptimError::InvalidInput(format!(
            "options: need tolerance ≥ 0, max_iterations ≥ 1, 0 ≤ mu_init, a finite xreg ≥ 0, 0 < mu_min < mu_max, mu_factor > 1, step lengths in (0, 1] and a finite alpha_max (got alpha_max = {})",
            o.alpha_max
        )))
    }
}

/// `(δ, μ)` after an accepted step: `δ ← min(δ / μ_factor, 1 / μ_factor)`, `μ ← μ δ`, and
/// `μ ← 0` below `μ_min` (the schedule of the module documentation).
pub(crate) fn relaxed(delta: f64, mu: f64, o: &IlqrOptions) -> (f64, f64) {
    let delta = (delta / o.mu_factor).min(1.0 / o.mu_factor);
    let mu = mu * delta;
    (delta, if mu < o.mu_min { 0.0 } else { mu })
}

/// `u` clamped into `bounds` (unchanged without).
pub(crate) fn clamp_into(u: &mut [f64], bounds: Option<&Bounds>) {
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
///
/// Where the solve runs: with dynamics that linearise step by step
/// ([`Dynamics::linearizes_steps`]) its only parallel work is the pipeline's helpers, spawned
/// into the batch engine's pool, and it runs on the calling thread (handing it to a pool worker
/// and back cost two thread wake-ups, 0.25 ms per solve on our test machine — BENCHMARKS.md,
/// session 9). Otherwise it runs on the pool ([`vidyn_batch::install`]), where the
/// whole-trajectory linearisation of every iteration starts without a hand-off (session 4).
pub fn ilqr<D: Dynamics + ?Sized, C: Cost + ?Sized>(dynamics: &D, cost: &C, x0: &[f64], u_init: &[f64], options: &IlqrOptions) -> Result<IlqrResult> {
    if dynamics.linearizes_steps() {
        solve(dynamics, cost, x0, u_init, options)
    } else {
        vidyn_batch::install(|| solve(dynamics, cost, x0, u_init, options))
    }
}

/// With [`Method::Ddp`], an error unless the dynamics have second derivatives: the dynamics'
/// own (e.g. the VI's, naming what it has that they do not cover), probed at `(x0, u_init)`.
pub(crate) fn require_second_order<D: Dynamics + ?Sized>(dynamics: &D, options: &IlqrOptions, x0: &[f64], u_init: &[f64]) -> Result<()> {
    if options.method != Method::Ddp || dynamics.has_second_order() {
        return Ok(());
    }
    let (nu, ndx) = (dynamics.nu(), dynamics.state_space().ndx());
    let mut so = SecondOrder::zeros(ndx, nu);
    let probe = dynamics.second_order_contracted(0, x0, u_init.get(..nu).unwrap_or(&[]), &vec![0.0; ndx], &mut so);
    Err(match probe {
        Err(e) => e,
        Ok(()) => OptimError::NotImplemented("full DDP needs second derivatives of the dynamics (Dynamics::has_second_order is false)".into()),
    })
}

/// [`ilqr`] on the current thread.
fn solve<D: Dynamics + ?Sized, C: Cost + ?Sized>(dynamics: &D, cost: &C, x0: &[f64], u_init: &[f64], options: &IlqrOptions) -> Result<IlqrResult> {
    let (nx, nu, space) = (dynamics.nx(), dynamics.nu(), dynamics.state_space());
    // the backward pass, the gains and the cost's derivatives live in the tangent space
    let ndx = space.ndx();
    require_second_order(dynamics, options, x0, u_init)?;
    let steps = check_start(x0, u_init, nx, nu)?;
    let o = options;
    check_options(o)?;
    let bounds = control_bounds(o, nu)?;
    let bounds = bounds.as_ref();
    let start = Instant::now();
    let (mut t_lin, mut t_back, mut t_fwd) = (0.0, 0.0, 0.0);

    let mut u0 = u_init.to_vec();
    for k in 0..steps {
        clamp_into(&mut u0[k * nu..(k + 1) * nu], bounds);
    }
    // the derivatives along the current trajectory, and those of a trial (swapped on acceptance)
    let mut nominal = Derivatives::zeros(steps, ndx, nu);
    let mut trial = Derivatives::zeros(steps, ndx, nu);
    let mut scratch = BackwardWorkspace::new(ndx, nu);
    // the hinges switched by the last `active_set::settle`, and those on which the model of
    // the current pass and the penalties part
    let mut switched = Vec::new();
    let mut mismatch = active_set::Mismatch::default();
    // `current` receives each backward pass; `last` holds the one kept (the accepted step's,
    // whose feed-forward terms warm-start the box QP, or the final one; zero until then)
    let mut current = Backward::zeros(steps, ndx, nu);
    let mut last = Backward::zeros(steps, ndx, nu);
    // the backward pass run behind a trial (kept only if the trial is)
    let mut ahead = Backward::zeros(steps, ndx, nu);
    // the deviation x_k ⊖ x̄_k of the trial's state from the nominal's
    let mut deviation = vec![0.0; ndx];
    let ddp = (o.method == Method::Ddp).then_some(dynamics);
    // with DDP: whether this iteration's backward pass uses the exact model (module docs)
    let mut exact = true;
    let mut mu = o.mu_init;
    let mut xreg = StateRegularisation::new(o.xreg.unwrap_or(0.0));
    let t = Instant::now();
    // the first backward pass runs behind the initial trajectory's derivatives, as later ones
    // behind their trials'
    let mut sweep = BackwardSweep::new(ddp, bounds, mu, &last.k_ff, &mut scratch, &mut current).with_state_regularisation(xreg.rho());
    let initial = simulate_and_derive(
        dynamics,
        cost,
        ClosedLoop { x0, steps, policy: &mut |k, _x, uk| uk.copy_from_slice(&u0[k * nu..(k + 1) * nu]), near: None }.into(),
        |_, _, j| {
            let j = j?;
            if j.is_finite() {
                Ok(Some(j))
            } else {
                Err(OptimError::InvalidInput(format!("the initial trajectory has cost {j}")))
            }
        },
        Some(&mut sweep),
        &mut nominal,
    );
    // `current` already holds the backward pass at `μ` along the nominal trajectory (run
    // behind the accepted trial's last derivatives)
    let mut precomputed = sweep.complete();
    let first = match initial {
        Ok(Some(kept)) => kept,
        Ok(None) => return Err(OptimError::InvalidInput("the initial trajectory was not kept".into())),
        Err(TrialError::Rollout(e) | TrialError::Judge(e) | TrialError::Derivatives(e)) => return Err(e),
    };
    t_lin += first.after_rollout;
    t_fwd += t.elapsed().as_secs_f64() - first.after_rollout;
    let (mut x, mut u, mut j) = (first.x, first.u, first.verdict);
    let mut delta = 1.0_f64;
    let mut cost_history = vec![j];
    let mut log = Vec::new();
    let mut status = IlqrStatus::MaxIterations;
    let mut iterations = 0;
    let mut message = String::new();
    let mut fitted = FittedStep::new(o.alpha_max, o.fitted_step);
    'outer: for _ in 0..o.max_iterations {
        let mut hinges_settled = false;
        loop {
            // backward pass, raising μ until Q_uu + μ1 is positive definite
            let t = Instant::now();
            let solved = std::mem::take(&mut precomputed)
                || loop {
                    let mut sweep =
                        BackwardSweep::new(ddp.filter(|_| exact), bounds, mu, &last.k_ff, &mut scratch, &mut current).with_state_regularisation(xreg.rho());
                    match backward_pass(&nominal, &x, &u, &mut sweep) {
                        Ok(()) => break true,
                        Err(BackwardError::Dynamics(e)) => return Err(e),
                        Err(BackwardError::Indefinite) if exact && ddp.is_some() => exact = false,
                        Err(BackwardError::Indefinite) => {
                            fitted.reset();
                            delta = delta.max(1.0) * o.mu_factor;
                            mu = (mu * delta).max(o.mu_min);
                            if mu > o.mu_max {
                                break false;
                            }
                        }
                    }
                };
            t_back += t.elapsed().as_secs_f64();
            if !solved {
                status = IlqrStatus::RegularisationLimit;
                message = format!("regularisation μ exceeded {:e}: Q_uu + μ1 stayed indefinite", o.mu_max);
                break 'outer;
            }
            // the hinges' active set at this pass's full step, and the pass again on it (once
            // per iteration; if that model is indefinite, the switches are undone and the pass
            // recomputed)
            if !hinges_settled {
                hinges_settled = true;
                let t = Instant::now();
                active_set::settle(&mut nominal, &current, None, &mut switched);
                if !switched.is_empty() {
                    let mut sweep =
                        BackwardSweep::new(ddp.filter(|_| exact), bounds, mu, &last.k_ff, &mut scratch, &mut current).with_state_regularisation(xreg.rho());
                    let again = backward_pass(&nominal, &x, &u, &mut sweep);
                    t_back += t.elapsed().as_secs_f64();
                    match again {
                        Ok(()) => {}
                        Err(BackwardError::Dynamics(e)) => return Err(e),
                        Err(BackwardError::Indefinite) => {
                            active_set::undo(&mut nominal.cost.stages, &switched);
                            continue;
                        }
                    }
                }
            }
            let bw = &current;
            let gnorm = bw.gradient_norm;
            // the predicted decreases are the penalties' where the model and they part
            mismatch.measure(&nominal, bw, None);
            let expected = -(bw.dv1 + bw.dv2) + mismatch.correction(1.0);
            if expected <= o.tolerance * j.abs().max(1.0) && !xreg.settled() {
                // judged on the unregularised model: the pass again without ρ
                xreg.settle();
                continue;
            }
            if expected <= o.tolerance * j.abs().max(1.0) && mu <= o.mu_min {
                log.push(IterationLog {
                    cost: j,
                    expected_reduction: expected,
                    expected_reduction_alpha: 0.0,
                    actual_reduction: 0.0,
                    alpha: 0.0,
                    mu,
                    gradient_norm: gnorm,
                    time: start.elapsed().as_secs_f64(),
                });
                status = IlqrStatus::Converged;
                message = format!("converged: expected decrease {expected:.3e} ≤ tolerance·max(1, |J|) after {iterations} iterations");
                std::mem::swap(&mut current, &mut last);
                break 'outer;
            }
            // forward pass with backtracking; the kept trial comes with its derivatives and,
            // when the pipeline could run it, the next backward pass (at the relaxed μ)
            let t = Instant::now();
            let mut accepted = None;
            let (delta_kept, mu_kept) = relaxed(delta, mu, o);
            let full = expected;
            for alpha in fitted.first_trial().into_iter().chain(o.alphas.iter().copied()) {
                let policy = &mut |k: usize, xk: &[f64], uk: &mut [f64]| {
                    let (kff, gain) = (&bw.k_ff[k], &bw.gains[k]);
                    space.difference(&x[k * nx..(k + 1) * nx], xk, &mut deviation);
                    for i in 0..nu {
                        let mut v = u[k * nu + i] + alpha * kff[i];
                        for (jj, d) in deviation.iter().enumerate() {
                            v += gain[(i, jj)] * d;
                        }
                        uk[i] = v;
                    }
                    clamp_into(uk, bounds);
                };
                let judge = |_: &[f64], _: &[f64], jn: Result<f64>| {
                    let Ok(jn) = jn else { return Ok(None) };
                    let exp_a = -(alpha * bw.dv1 + alpha * alpha * bw.dv2) + mismatch.correction(alpha);
                    let actual = j - jn;
                    let kept = if alpha > 1.0 { FittedStep::keeps(actual, full) } else { jn.is_finite() && actual > 0.0 && actual >= o.armijo * exp_a };
                    Ok(kept.then_some((jn, exp_a, actual)))
                };
                let mut sweep = BackwardSweep::new(ddp, bounds, mu_kept, &bw.k_ff, &mut scratch, &mut ahead).with_state_regularisation(xreg.after(alpha));
                let near = Nominal { x: &x, u: &u, a: &nominal.a, b: &nominal.b };
                match simulate_and_derive(dynamics, cost, ClosedLoop { x0, steps, policy, near: Some(&near) }.into(), judge, Some(&mut sweep), &mut trial) {
                    Ok(Some(kept)) => {
                        accepted = Some((kept, alpha, sweep.complete()));
                        break;
                    }
                    // a failed trial shortens the step; a cancelled one ends the run
                    Err(TrialError::Rollout(OptimError::Cancelled)) => return Err(OptimError::Cancelled),
                    Ok(None) | Err(TrialError::Rollout(_) | TrialError::Judge(_)) => {}
                    Err(TrialError::Derivatives(e)) => return Err(e),
                }
            }
            let elapsed = t.elapsed().as_secs_f64();
            match accepted {
                Some((kept, alpha, swept)) => {
                    t_lin += kept.after_rollout;
                    t_fwd += elapsed - kept.after_rollout;
                    let (jn, exp_a, actual) = kept.verdict;
                    log.push(IterationLog {
                        cost: j,
                        expected_reduction: expected,
                        expected_reduction_alpha: exp_a,
                        actual_reduction: actual,
                        alpha,
                        mu,
                        gradient_norm: gnorm,
                        time: start.elapsed().as_secs_f64(),
                    });
                    fitted.accepted(alpha, -bw.dv1, actual);
                    xreg.accepted(alpha);
                    x = kept.x;
                    u = kept.u;
                    j = jn;
                    std::mem::swap(&mut nominal, &mut trial);
                    cost_history.push(j);
                    iterations += 1;
                    std::mem::swap(&mut current, &mut last);
                    if swept {
                        std::mem::swap(&mut current, &mut ahead);
                    }
                    (delta, mu) = (delta_kept, mu_kept);
                    // (the pass run behind the trial used the exact model with DDP)
                    precomputed = swept;
                    exact = true;
                    continue 'outer;
                }
                None if exact && ddp.is_some() => {
                    t_fwd += elapsed;
                    fitted.reset();
                    exact = false;
                }
                None => {
                    t_fwd += elapsed;
                    fitted.reset();
                    xreg.refused();
                    delta = delta.max(1.0) * o.mu_factor;
                    mu = (mu * delta).max(o.mu_min);
                    if mu > o.mu_max {
                        log.push(IterationLog {
                            cost: j,
                            expected_reduction: expected,
                            expected_reduction_alpha: 0.0,
                            actual_reduction: 0.0,
                            alpha: 0.0,
                            mu,
                            gradient_norm: gnorm,
                            time: start.elapsed().as_secs_f64(),
                        });
                        status = IlqrStatus::RegularisationLimit;
                        message = format!("line search failed with regularisation up to μ = {:e} (expected decrease {expected:.3e}): no step decreases the cost — stationary to round-off or a poor model", o.mu_max);
                        std::mem::swap(&mut current, &mut last);
                        break 'outer;
                    }
                }
            }
        }
    }
    if status == IlqrStatus::MaxIterations {
        message = format!("reached max_iterations = {} (cost {j:.6e})", o.max_iterations);
    }
    Ok(IlqrResult {
        x,
        u,
        k_ff: last.k_ff,
        gains: last.gains,
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
