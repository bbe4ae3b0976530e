//! The options and the result of [`super::ilqr`].

use nalgebra::{DMatrix, DVector};

/// iLQR (Gauss–Newton, first-order dynamics) or full DDP (second-order dynamics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Ilqr,
    Ddp,
}

/// Options of [`super::ilqr`].
#[derive(Clone, Debug)]
pub struct IlqrOptions {
    pub method: Method,
    pub max_iterations: usize,
    /// Stop when the expected decrease of a full step is `≤ tolerance · max(1, |J|)`.
    pub tolerance: f64,
    /// Initial regularisation `μ` (0: plain Gauss–Newton step first).
    pub mu_init: f64,
    /// The first regularisation `ρ ≥ 0` of the value function's Hessian in the backward pass,
    /// `V_xx + ρ 1` at the next knot (crocoddyl's `xreg`; module `backward`): a proximal term
    /// on the states' deviation, which leaves the fixed points alone. It falls tenfold after
    /// each full step and is gone after two in a row, and rises after a shortened one (module
    /// `state_regularisation`). 0: none; `None`: the solver's default, none for
    /// [`crate::ilqr()`] (which starts from a rollout) and [`crate::FDDP_XREG`] for
    /// [`crate::fddp()`] (whose first steps from a guess drift over the horizon).
    pub xreg: Option<f64>,
    pub mu_min: f64,
    pub mu_max: f64,
    /// `Δ₀` of the schedule.
    pub mu_factor: f64,
    /// Step lengths tried in order.
    pub alphas: Vec<f64>,
    /// Whether the line search may start from a step fitted to the last steps' decreases
    /// (module `fitted_step`); `false`: always from `α = 1`.
    pub fitted_step: bool,
    /// The longest fitted step (`α > 1`), tried when two full steps in a row gained over 1.5
    /// times the decrease the model predicted; `≤ 1`: none longer than 1.
    pub alpha_max: f64,
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
            xreg: None,
            mu_min: 1e-6,
            mu_max: 1e10,
            mu_factor: 1.6,
            alphas: (0..12).map(|i| 0.5_f64.powi(i)).collect(),
            fitted_step: true,
            alpha_max: 4.0,
            armijo: 1e-4,
            u_min: None,
            u_max: None,
        }
    }
}

/// Why [`super::ilqr`] stopped.
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
    /// `‖∂J/∂u‖₂` of the open-loop cost at the start (projected on the control limits); on
    /// an FDDP iterate with gaps, of the cost with the gaps held (`x_{k+1} = f(x_k, u_k) + f̄_k`).
    pub gradient_norm: f64,
    /// Seconds since the start of the solve at the end of this iteration.
    pub time: f64,
}

/// Result of [`super::ilqr`]: the final trajectory `x` (`(N+1)·nx`), controls `u` (`N·nu`), the
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
    /// Seconds: total; the work after an accepted trial's rollout (its cost, the derivatives
    /// not finished behind the rollout, and the next backward pass, run alongside them);
    /// the backward passes not run that way (the first, and those after a rejected line search
    /// or a raised `μ`); forward passes (rollouts, with the derivative work done alongside
    /// them, and everything spent on rejected trials).
    pub wall_time: f64,
    pub time_linearize: f64,
    pub time_backward: f64,
    pub time_forward: f64,
}
