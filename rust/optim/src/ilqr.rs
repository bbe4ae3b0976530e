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
use crate::cost::{Cost, StageDerivatives};
use crate::dense_kernels::{add_symmetric_transposed_product, add_transposed_product, dot, set_product};
use crate::dynamics::{check_finite, check_multiple, Dynamics, Nominal, SecondOrder};
use crate::error::{OptimError, Result};
use crate::lqr::symmetrise;
use crate::pipeline::{simulate_and_derive, Derivatives, ReverseSweep, TrialError};
use nalgebra::{Cholesky, DMatrix, DVector};
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

/// Feed-forward terms `k_k` (nu) and feedback gains `K_k` (nu×nx) of one backward pass, with
/// the two sums of the expected decrease `ΔJ_exp(α) = −(α dv1 + α² dv2)`.
struct Backward {
    k_ff: Vec<DVector<f64>>,
    gains: Vec<DMatrix<f64>>,
    dv1: f64,
    dv2: f64,
    /// `‖∂J/∂u‖₂` at the pass's trajectory ([`GradientAdjoint`]).
    gradient_norm: f64,
}

impl Backward {
    fn zeros(steps: usize, nx: usize, nu: usize) -> Self {
        Self { k_ff: vec![DVector::zeros(nu); steps], gains: vec![DMatrix::zeros(nu, nx); steps], dv1: 0.0, dv2: 0.0, gradient_norm: 0.0 }
    }
}

struct Bounds {
    lower: DVector<f64>,
    upper: DVector<f64>,
}

/// The stage derivatives of a cost along a trajectory (stages `0..N`, then the terminal one),
/// allocated once per solve and overwritten at every iterate.
pub(crate) struct CostDerivatives {
    pub(crate) stages: Vec<StageDerivatives>,
    pub(crate) terminal: StageDerivatives,
}

impl CostDerivatives {
    pub(crate) fn zeros(steps: usize, nx: usize, nu: usize) -> Self {
        Self { stages: vec![StageDerivatives::zeros(nx, nu); steps], terminal: StageDerivatives::zeros(nx, 0) }
    }

    /// Evaluates every stage along `(x, u)` (`(N+1)·nx` and `N·nu` entries); each stage is
    /// zeroed before the cost writes into it (in parallel on the batch engine's pool unless
    /// the cost says otherwise).
    pub(crate) fn evaluate<C: Cost + ?Sized>(&mut self, cost: &C, x: &[f64], u: &[f64]) -> Result<()> {
        let (nx, nu, steps) = (self.terminal.lx.len(), self.stages.first().map_or(0, |d| d.lu.len()), self.stages.len());
        let eval = |(k, d): (usize, &mut StageDerivatives)| -> Result<()> {
            d.clear();
            cost.running_derivatives(k, &x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu], d)
        };
        if cost.parallel() {
            vidyn_batch::install(|| self.stages.par_iter_mut().enumerate().try_for_each(eval))?;
        } else {
            self.stages.iter_mut().enumerate().try_for_each(eval)?;
        }
        self.terminal.clear();
        cost.terminal_derivatives(&x[steps * nx..], &mut self.terminal)
    }
}

/// `‖∂J/∂u‖₂` of the open-loop cost, accumulated stage by stage from the end by the adjoint
/// `λ_N = m_x`, `λ_k = ℓ_x + A_kᵀ λ_{k+1}` with `∂J/∂u_k = ℓ_u + B_kᵀ λ_{k+1}`; components
/// pushing a control at a limit further out are dropped. Run inside every backward pass (it
/// visits the same stages with the same derivatives), so that the norm of an iterate whose
/// backward pass ran behind its trial is ready with it.
struct GradientAdjoint {
    lambda: DVector<f64>,
    next: DVector<f64>,
    g: DVector<f64>,
    sum: f64,
}

impl GradientAdjoint {
    fn new(nx: usize, nu: usize) -> Self {
        Self { lambda: DVector::zeros(nx), next: DVector::zeros(nx), g: DVector::zeros(nu), sum: 0.0 }
    }

    fn start(&mut self, terminal: &StageDerivatives) {
        self.lambda.copy_from(&terminal.lx);
        self.sum = 0.0;
    }

    /// Stage `k` with its `A_k`, `B_k`, cost derivatives `d` and control `u_k`.
    fn step(&mut self, a: &DMatrix<f64>, b: &DMatrix<f64>, d: &StageDerivatives, uk: &[f64], bounds: Option<&Bounds>) {
        self.g.copy_from(&d.lu);
        self.g.gemv_tr(1.0, b, &self.lambda, 1.0);
        for (i, (&ui, &gi)) in uk.iter().zip(self.g.iter()).enumerate() {
            let blocked = bounds.is_some_and(|bd| (ui <= bd.lower[i] && gi > 0.0) || (ui >= bd.upper[i] && gi < 0.0));
            if !blocked {
                self.sum += gi * gi;
            }
        }
        self.next.copy_from(&d.lx);
        self.next.gemv_tr(1.0, a, &self.lambda, 1.0);
        std::mem::swap(&mut self.lambda, &mut self.next);
    }

    fn norm(&self) -> f64 {
        self.sum.sqrt()
    }
}

/// Why a backward pass stopped.
enum BackwardError {
    /// `Q_uu + μ 1` is not positive definite at some step.
    Indefinite,
    /// The dynamics' second derivatives failed (DDP).
    Dynamics(OptimError),
}

/// Scratch of the backward pass, allocated once per solve: the value function `V_x` (nx),
/// `V_xx` (nx×nx) of the step being processed, `V_xx A_k` (nx×nx), `V_xx B_k` (nx×nu), the
/// Q-function blocks `Q_x`, `Q_u`, `Q_xx`, `Q_uu`, `Q_ux`, the (regularised, then factored)
/// `Q_uu + μ 1`, the products `Q_uu K_k + Q_ux` (nu×nx) and `Q_uu k_k` (nu) of the
/// box-constrained update, and DDP's second-order terms. All column-major, for the kernels of
/// [`crate::dense_kernels`].
struct BackwardWorkspace {
    vx: DVector<f64>,
    vxx: DMatrix<f64>,
    vxx_a: DMatrix<f64>,
    vxx_b: DMatrix<f64>,
    qx: DVector<f64>,
    qu: DVector<f64>,
    qxx: DMatrix<f64>,
    quu: DMatrix<f64>,
    qux: DMatrix<f64>,
    quu_gain: DMatrix<f64>,
    quu_k: DVector<f64>,
    /// `Q_uu + μ 1`; moved into nalgebra's in-place Cholesky and back (reallocated only after
    /// a failed factorisation, which consumes it).
    quu_reg: DMatrix<f64>,
    so: SecondOrder,
    adjoint: GradientAdjoint,
}

impl BackwardWorkspace {
    fn new(nx: usize, nu: usize) -> Self {
        Self {
            vx: DVector::zeros(nx),
            vxx: DMatrix::zeros(nx, nx),
            vxx_a: DMatrix::zeros(nx, nx),
            vxx_b: DMatrix::zeros(nx, nu),
            qx: DVector::zeros(nx),
            qu: DVector::zeros(nu),
            qxx: DMatrix::zeros(nx, nx),
            quu: DMatrix::zeros(nu, nu),
            qux: DMatrix::zeros(nu, nx),
            quu_gain: DMatrix::zeros(nu, nx),
            quu_k: DVector::zeros(nu),
            quu_reg: DMatrix::zeros(nu, nu),
            so: SecondOrder::zeros(nx, nu),
            adjoint: GradientAdjoint::new(nx, nu),
        }
    }
}

/// Backward pass with regularisation `μ`, writing the feed-forward terms and gains into `out`.
/// From `V_x = m_x`, `V_xx = m_xx` at `N`, for `k = N−1, …, 0`:
/// $$Q_x = \ell_x + A^T V_x,\quad Q_u = \ell_u + B^T V_x,\quad Q_{xx} = \ell_{xx} + A^T V_{xx} A,$$
/// $$Q_{uu} = \ell_{uu} + B^T V_{xx} B,\quad Q_{ux} = \ell_{ux} + B^T V_{xx} A$$
/// (plus the contracted second-order dynamics for DDP), `k = −(Q_uu + μ1)⁻¹ Q_u`,
/// `K = −(Q_uu + μ1)⁻¹ Q_ux` (or the box QP's), and
/// $$V_x = Q_x + K^T Q_{uu} k + K^T Q_u + Q_{ux}^T k,\quad
///   V_{xx} = Q_{xx} + K^T Q_{uu} K + K^T Q_{ux} + Q_{ux}^T K,$$
/// symmetrised (the update of Tassa, Erez & Todorov 2012, which stays right when the
/// gains come from the regularised or box-constrained `Q_uu`). `Q_xx` and `Q_uu` are formed
/// from `V_xx A`, `V_xx B` as exactly symmetric products. Without control limits
/// `(Q_uu + μ1) K = −Q_ux` and `(Q_uu + μ1) k = −Q_u` reduce the update to
/// `V_x = Q_x + Q_uxᵀ k − μ Kᵀ k`, `V_xx = Q_xx + Q_uxᵀ K − μ KᵀK` (the `μ` terms only when
/// `μ > 0`), one product instead of three. No buffers of our own are allocated on the
/// unconstrained path once `s` and `out` exist (the box QP allocates its own scratch), but
/// the products whose dimensions all exceed [`crate::dense_kernels::SMALL`] go through
/// nalgebra's `gemm` to matrixmultiply, which allocates its packing buffers on every call
/// (≈ 1 % of the panda reach's instructions, BENCHMARKS.md).
fn backward_pass<D: Dynamics + ?Sized>(d: &Derivatives, x: &[f64], u: &[f64], sweep: &mut BackwardSweep<'_, D>) -> std::result::Result<(), BackwardError> {
    sweep.start(&d.cost.terminal);
    for k in (0..d.a.len()).rev() {
        sweep.step(k, x, u, &d.a[k], &d.b[k], &d.cost.stages[k])?;
    }
    Ok(())
}

/// [`backward_pass`] one stage at a time: [`BackwardSweep::start`] with the terminal cost's
/// derivatives, then [`BackwardSweep::step`] for `k = N−1, …, 0`. The pipeline
/// ([`crate::pipeline`]) drives it through [`ReverseSweep`] while the derivatives of the
/// first stages of an accepted trial are still being computed.
pub(crate) struct BackwardSweep<'a, D: ?Sized> {
    /// DDP: the dynamics whose contracted second derivatives are added (`None`: iLQR).
    ddp: Option<&'a D>,
    bounds: Option<&'a Bounds>,
    mu: f64,
    /// The box QP's warm start per step (feed-forward terms of an earlier pass).
    warm: &'a [DVector<f64>],
    s: &'a mut BackwardWorkspace,
    out: &'a mut Backward,
    /// Stages not yet processed since [`Self::start`] (`None` before it), and the error that
    /// stopped the sweep.
    remaining: Option<usize>,
    error: Option<BackwardError>,
}

impl<'a, D: Dynamics + ?Sized> BackwardSweep<'a, D> {
    fn new(ddp: Option<&'a D>, bounds: Option<&'a Bounds>, mu: f64, warm: &'a [DVector<f64>], s: &'a mut BackwardWorkspace, out: &'a mut Backward) -> Self {
        Self { ddp, bounds, mu, warm, s, out, remaining: None, error: None }
    }

    /// `V_x = m_x`, `V_xx = m_xx` (symmetrised) at `N`.
    fn start(&mut self, terminal: &StageDerivatives) {
        let s = &mut *self.s;
        s.vx.copy_from(&terminal.lx);
        s.vxx.copy_from(&terminal.lxx);
        symmetrise(&mut s.vxx);
        s.adjoint.start(terminal);
        self.out.dv1 = 0.0;
        self.out.dv2 = 0.0;
        self.remaining = Some(self.out.k_ff.len());
        self.error = None;
    }

    /// Stage `k` from `V(k+1)` to `V(k)`, with the dynamics' `A_k`, `B_k` and the cost's
    /// stage derivatives `dk` along the trajectory `(x, u)` (whole, row-major).
    fn step(&mut self, k: usize, x: &[f64], u: &[f64], ak: &DMatrix<f64>, bk: &DMatrix<f64>, dk: &StageDerivatives) -> std::result::Result<(), BackwardError> {
        let (s, mu, bounds) = (&mut *self.s, self.mu, self.bounds);
        let (nx, nu) = (s.vx.len(), s.qu.len());
        s.adjoint.step(ak, bk, dk, &u[k * nu..(k + 1) * nu], bounds);
        let (a, b) = (ak.as_slice(), bk.as_slice());
        // Q_x = ℓ_x + Aᵀ V_x, Q_u = ℓ_u + Bᵀ V_x
        s.qx.copy_from_slice(dk.lx.as_slice());
        add_transposed_product(1.0, a, s.vx.as_slice(), nx, s.qx.as_mut_slice());
        s.qu.copy_from_slice(dk.lu.as_slice());
        add_transposed_product(1.0, b, s.vx.as_slice(), nx, s.qu.as_mut_slice());
        // Q_xx = ℓ_xx + Aᵀ (V_xx A), Q_ux = ℓ_ux + Bᵀ (V_xx A), Q_uu = ℓ_uu + Bᵀ (V_xx B)
        set_product(s.vxx.as_slice(), nx, a, nx, s.vxx_a.as_mut_slice());
        set_product(s.vxx.as_slice(), nx, b, nx, s.vxx_b.as_mut_slice());
        s.qxx.copy_from_slice(dk.lxx.as_slice());
        add_symmetric_transposed_product(a, s.vxx_a.as_slice(), nx, s.qxx.as_mut_slice());
        s.qux.copy_from_slice(dk.lux.as_slice());
        add_transposed_product(1.0, b, s.vxx_a.as_slice(), nx, s.qux.as_mut_slice());
        s.quu.copy_from_slice(dk.luu.as_slice());
        add_symmetric_transposed_product(b, s.vxx_b.as_slice(), nx, s.quu.as_mut_slice());
        if let Some(dynamics) = self.ddp {
            // V_x here is still V_x(k+1)
            dynamics
                .second_order_contracted(k, &x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu], s.vx.as_slice(), &mut s.so)
                .map_err(BackwardError::Dynamics)?;
            s.qxx += &s.so.hxx;
            s.quu += &s.so.huu;
            s.qux += &s.so.hux;
            symmetrise(&mut s.qxx);
        }
        symmetrise(&mut s.quu);
        if s.quu_reg.shape() != (nu, nu) {
            s.quu_reg = DMatrix::zeros(nu, nu);
        }
        s.quu_reg.copy_from_slice(s.quu.as_slice());
        for i in 0..nu {
            s.quu_reg[(i, i)] += mu;
        }
        let (kff, gain) = (&mut self.out.k_ff[k], &mut self.out.gains[k]);
        if let Some(bd) = bounds {
            let ub = &u[k * nu..(k + 1) * nu];
            let lower = DVector::from_iterator(nu, (0..nu).map(|i| bd.lower[i] - ub[i]));
            let upper = DVector::from_iterator(nu, (0..nu).map(|i| bd.upper[i] - ub[i]));
            let sol = box_qp(&s.quu_reg, &s.qu, &lower, &upper, &self.warm[k]);
            if !sol.status.ok() {
                return Err(BackwardError::Indefinite);
            }
            gain.fill(0.0);
            if let Some(chol) = &sol.chol_free {
                let idx: Vec<usize> = (0..nu).filter(|&i| sol.free[i]).collect();
                let rhs = s.qux.select_rows(idx.iter());
                let kf = -chol.solve(&rhs);
                for (r, &i) in idx.iter().enumerate() {
                    gain.row_mut(i).copy_from(&kf.row(r));
                }
            }
            kff.copy_from(&sol.x);
        } else {
            let reg = std::mem::replace(&mut s.quu_reg, DMatrix::zeros(0, 0));
            let Some(chol) = Cholesky::new(reg) else {
                return Err(BackwardError::Indefinite);
            };
            kff.copy_from(&s.qu);
            chol.solve_mut(kff);
            kff.neg_mut();
            gain.copy_from(&s.qux);
            chol.solve_mut(gain);
            gain.neg_mut();
            s.quu_reg = chol.unpack_dirty();
        }
        set_product(s.quu.as_slice(), nu, kff.as_slice(), nu, s.quu_k.as_mut_slice());
        self.out.dv1 += dot(kff.as_slice(), s.qu.as_slice());
        self.out.dv2 += 0.5 * dot(kff.as_slice(), s.quu_k.as_slice());
        // V_x = Q_x + Q_uxᵀ k, V_xx = Q_xx + Q_uxᵀ K
        s.vx.copy_from_slice(s.qx.as_slice());
        add_transposed_product(1.0, s.qux.as_slice(), kff.as_slice(), nu, s.vx.as_mut_slice());
        s.vxx.copy_from_slice(s.qxx.as_slice());
        add_transposed_product(1.0, s.qux.as_slice(), gain.as_slice(), nu, s.vxx.as_mut_slice());
        if bounds.is_some() {
            // V_x = Q_x + Kᵀ(Q_uu k + Q_u) + Q_uxᵀ k, V_xx = Q_xx + Kᵀ(Q_uu K + Q_ux) + Q_uxᵀ K
            s.quu_k += &s.qu;
            add_transposed_product(1.0, gain.as_slice(), s.quu_k.as_slice(), nu, s.vx.as_mut_slice());
            set_product(s.quu.as_slice(), nu, gain.as_slice(), nu, s.quu_gain.as_mut_slice());
            s.quu_gain += &s.qux;
            add_transposed_product(1.0, gain.as_slice(), s.quu_gain.as_slice(), nu, s.vxx.as_mut_slice());
        } else if mu > 0.0 {
            // the same with (Q_uu + μ1) k = −Q_u and (Q_uu + μ1) K = −Q_ux:
            // V_x = Q_x + Q_uxᵀ k − μ Kᵀ k, V_xx = Q_xx + Q_uxᵀ K − μ Kᵀ K
            add_transposed_product(-mu, gain.as_slice(), kff.as_slice(), nu, s.vx.as_mut_slice());
            add_transposed_product(-mu, gain.as_slice(), gain.as_slice(), nu, s.vxx.as_mut_slice());
        }
        symmetrise(&mut s.vxx);
        self.remaining = self.remaining.map(|r| r - 1);
        if self.remaining == Some(0) {
            self.out.gradient_norm = s.adjoint.norm();
        }
        Ok(())
    }

    /// Whether every stage since [`Self::start`] was processed without error.
    fn complete(&self) -> bool {
        self.remaining == Some(0) && self.error.is_none()
    }
}

impl<D: Dynamics + ?Sized> ReverseSweep for BackwardSweep<'_, D> {
    fn start(&mut self, terminal: &StageDerivatives) {
        BackwardSweep::start(self, terminal);
    }
    fn step(&mut self, k: usize, x: &[f64], u: &[f64], a: &DMatrix<f64>, b: &DMatrix<f64>, d: &StageDerivatives) -> bool {
        if self.error.is_none() {
            if let Err(e) = BackwardSweep::step(self, k, x, u, a, b, d) {
                self.error = Some(e);
            }
        }
        self.error.is_none()
    }
}

/// `(δ, μ)` after an accepted step: `δ ← min(δ / μ_factor, 1 / μ_factor)`, `μ ← μ δ`, and
/// `μ ← 0` below `μ_min` (the schedule of the module documentation).
fn relaxed(delta: f64, mu: f64, o: &IlqrOptions) -> (f64, f64) {
    let delta = (delta / o.mu_factor).min(1.0 / o.mu_factor);
    let mu = mu * delta;
    (delta, if mu < o.mu_min { 0.0 } else { mu })
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

/// [`ilqr`] on the current thread.
fn solve<D: Dynamics + ?Sized, C: Cost + ?Sized>(dynamics: &D, cost: &C, x0: &[f64], u_init: &[f64], options: &IlqrOptions) -> Result<IlqrResult> {
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
    let valid = o.tolerance >= 0.0
        && o.max_iterations > 0
        && o.mu_init >= 0.0
        && o.mu_min > 0.0
        && o.mu_max > o.mu_min
        && o.mu_factor > 1.0
        && !o.alphas.is_empty()
        && o.alphas.iter().all(|a| *a > 0.0 && *a <= 1.0);
    if !valid {
        return Err(OptimError::InvalidInput(
            "options: need tolerance ≥ 0, max_iterations ≥ 1, 0 ≤ mu_init, 0 < mu_min < mu_max, mu_factor > 1 and step lengths in (0, 1]".into(),
        ));
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
    // the derivatives along the current trajectory, and those of a trial (swapped on acceptance)
    let mut nominal = Derivatives::zeros(steps, nx, nu);
    let mut trial = Derivatives::zeros(steps, nx, nu);
    let mut scratch = BackwardWorkspace::new(nx, nu);
    // `current` receives each backward pass; `last` holds the one kept (the accepted step's,
    // whose feed-forward terms warm-start the box QP, or the final one; zero until then)
    let mut current = Backward::zeros(steps, nx, nu);
    let mut last = Backward::zeros(steps, nx, nu);
    // the backward pass run behind a trial (kept only if the trial is)
    let mut ahead = Backward::zeros(steps, nx, nu);
    let ddp = (o.method == Method::Ddp).then_some(dynamics);
    let mut mu = o.mu_init;
    let t = Instant::now();
    // the first backward pass runs behind the initial trajectory's derivatives, as later ones
    // behind their trials'
    let mut sweep = BackwardSweep::new(ddp, bounds, mu, &last.k_ff, &mut scratch, &mut current);
    let initial = simulate_and_derive(
        dynamics,
        cost,
        x0,
        steps,
        &mut |k, _x, uk| uk.copy_from_slice(&u0[k * nu..(k + 1) * nu]),
        None,
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
    'outer: for _ in 0..o.max_iterations {
        loop {
            // backward pass, raising μ until Q_uu + μ1 is positive definite
            let t = Instant::now();
            let solved = std::mem::take(&mut precomputed)
                || loop {
                    let mut sweep = BackwardSweep::new(ddp, bounds, mu, &last.k_ff, &mut scratch, &mut current);
                    match backward_pass(&nominal, &x, &u, &mut sweep) {
                        Ok(()) => break true,
                        Err(BackwardError::Dynamics(e)) => return Err(e),
                        Err(BackwardError::Indefinite) => {
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
            let bw = &current;
            let gnorm = bw.gradient_norm;
            let expected = -(bw.dv1 + bw.dv2);
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
            for &alpha in &o.alphas {
                let policy = &mut |k: usize, xk: &[f64], uk: &mut [f64]| {
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
                };
                let judge = |_: &[f64], _: &[f64], jn: Result<f64>| {
                    let Ok(jn) = jn else { return Ok(None) };
                    let exp_a = -(alpha * bw.dv1 + alpha * alpha * bw.dv2);
                    let actual = j - jn;
                    Ok((jn.is_finite() && actual > 0.0 && actual >= o.armijo * exp_a).then_some((jn, exp_a, actual)))
                };
                let mut sweep = BackwardSweep::new(ddp, bounds, mu_kept, &bw.k_ff, &mut scratch, &mut ahead);
                let near = Nominal { x: &x, u: &u, a: &nominal.a, b: &nominal.b };
                match simulate_and_derive(dynamics, cost, x0, steps, policy, Some(&near), judge, Some(&mut sweep), &mut trial) {
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
                    precomputed = swept;
                    continue 'outer;
                }
                None => {
                    t_fwd += elapsed;
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
