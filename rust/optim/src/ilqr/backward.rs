//! The backward pass of iLQR/DDP on the Gauss–Newton (or, for DDP, second-order) model of
//! the cost-to-go, with the adjoint of the open-loop gradient; run behind a trial's rollout
//! as the pipeline's reverse sweep.

use super::{Backward, Bounds};
use crate::boxqp::box_qp;
use crate::cost::StageDerivatives;
use crate::dense_kernels::{add_symmetric_transposed_product, add_transposed_product, dot, set_product, symmetrise};
use crate::dynamics::{Dynamics, SecondOrder};
use crate::error::OptimError;
use crate::pipeline::{Derivatives, ReverseSweep};
use nalgebra::{Cholesky, DMatrix, DVector, DVectorView};

/// `‖∂J/∂u‖₂` of the open-loop cost, accumulated stage by stage from the end by the adjoint
/// `λ_N = m_x`, `λ_k = ℓ_x + A_kᵀ λ_{k+1}` with `∂J/∂u_k = ℓ_u + B_kᵀ λ_{k+1}`; components
/// pushing a control at a limit further out are dropped. Run inside every backward pass (it
/// visits the same stages with the same derivatives), so that the norm of an iterate whose
/// backward pass ran behind its trial is ready with it.
pub(super) struct GradientAdjoint {
    lambda: DVector<f64>,
    next: DVector<f64>,
    g: DVector<f64>,
    sum: f64,
}

impl GradientAdjoint {
    pub(super) fn new(nx: usize, nu: usize) -> Self {
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
pub(crate) enum BackwardError {
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
pub(crate) struct BackwardWorkspace {
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
    pub(crate) fn new(nx: usize, nu: usize) -> Self {
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
pub(super) fn backward_pass<D: Dynamics + ?Sized>(
    d: &Derivatives,
    x: &[f64],
    u: &[f64],
    sweep: &mut BackwardSweep<'_, D>,
) -> std::result::Result<(), BackwardError> {
    sweep.start(&d.cost.terminal);
    for k in (0..d.a.len()).rev() {
        sweep.step(k, x, u, &d.a[k], &d.b[k], &d.cost.stages[k])?;
    }
    Ok(())
}

/// The value function `V_x`, `V_xx` of one stage, as multiple shooting keeps it.
#[derive(Clone, Debug)]
pub(crate) struct StageValue {
    pub(crate) vx: DVector<f64>,
    pub(crate) vxx: DMatrix<f64>,
}

impl StageValue {
    pub(crate) fn zeros(nx: usize) -> Self {
        Self { vx: DVector::zeros(nx), vxx: DMatrix::zeros(nx, nx) }
    }
}

/// [`backward_pass`] one stage at a time: [`BackwardSweep::start`] with the terminal cost's
/// derivatives, then [`BackwardSweep::step`] for `k = N−1, …, 0`. The pipeline
/// ([`crate::pipeline`]) drives it through [`ReverseSweep`] while the derivatives of the
/// first stages of an accepted trial are still being computed; multiple shooting
/// ([`crate::fddp()`]) drives it with the gaps of its trajectory
/// ([`BackwardSweep::with_gaps`]).
pub(crate) struct BackwardSweep<'a, D: ?Sized> {
    /// DDP: the dynamics whose contracted second derivatives are added (`None`: iLQR).
    ddp: Option<&'a D>,
    bounds: Option<&'a Bounds>,
    mu: f64,
    /// `ρ` of [`Self::with_state_regularisation`] (0: none).
    xreg: f64,
    /// The box QP's warm start per step (feed-forward terms of an earlier pass).
    warm: &'a [DVector<f64>],
    s: &'a mut BackwardWorkspace,
    out: &'a mut Backward,
    /// Stages not yet processed since [`Self::start`] (`None` before it), and the error that
    /// stopped the sweep.
    remaining: Option<usize>,
    error: Option<BackwardError>,
    /// Multiple shooting: the gaps `f̄_k` (`nx` per knot, knot `k` at row `k`) and where the
    /// value function of every knot goes.
    gaps: Option<(&'a [f64], &'a mut [StageValue])>,
}

impl<'a, D: Dynamics + ?Sized> BackwardSweep<'a, D> {
    pub(crate) fn new(
        ddp: Option<&'a D>,
        bounds: Option<&'a Bounds>,
        mu: f64,
        warm: &'a [DVector<f64>],
        s: &'a mut BackwardWorkspace,
        out: &'a mut Backward,
    ) -> Self {
        Self { ddp, bounds, mu, xreg: 0.0, warm, s, out, remaining: None, error: None, gaps: None }
    }

    /// The sweep with `V_xx + ρ 1` in place of the next knot's `V_xx` when forming `Q_xx`,
    /// `Q_ux`, `Q_uu` (`IlqrOptions::xreg`; crocoddyl's `xreg`): the stage's model then also
    /// charges `½ ρ |δx_{k+1}|²` for moving the next state, a proximal term that shortens the
    /// steps where the linearisation stops holding along the horizon and vanishes with them.
    /// The value functions kept for FDDP's gaps and expected decrease stay unregularised.
    pub(crate) fn with_state_regularisation(mut self, xreg: f64) -> Self {
        self.xreg = xreg;
        self
    }

    /// The sweep of FDDP (Mastalli et al. 2020): after each knot's value function is formed
    /// the gap there is folded into its gradient, `V_x ← V_x + V_xx f̄_k` (the cost-to-go of
    /// the next state expanded where the dynamics land, not at the guess), and the value
    /// function is kept in `values[k]` for the expected decrease and the gap-closing
    /// forward pass. `gaps`: `(N+1)·nx` entries, `values`: `N + 1`.
    pub(crate) fn with_gaps(mut self, gaps: &'a [f64], values: &'a mut [StageValue]) -> Self {
        self.gaps = Some((gaps, values));
        self
    }

    /// With gaps: `V_x ← V_x + V_xx f̄_k`, and `(V_x, V_xx)` kept for knot `k`.
    fn close_gap(&mut self, k: usize) {
        if let Some((gaps, values)) = self.gaps.as_mut() {
            let s = &mut *self.s;
            let nx = s.vx.len();
            let f = DVectorView::from_slice(&gaps[k * nx..(k + 1) * nx], nx);
            s.vx.gemv(1.0, &s.vxx, &f, 1.0);
            values[k].vx.copy_from(&s.vx);
            values[k].vxx.copy_from(&s.vxx);
        }
    }

    /// `V_x = m_x`, `V_xx = m_xx` (symmetrised) at `N`.
    pub(crate) fn start(&mut self, terminal: &StageDerivatives) {
        let s = &mut *self.s;
        s.vx.copy_from(&terminal.lx);
        s.vxx.copy_from(&terminal.lxx);
        symmetrise(&mut s.vxx);
        s.adjoint.start(terminal);
        self.out.dv1 = 0.0;
        self.out.dv2 = 0.0;
        self.remaining = Some(self.out.k_ff.len());
        self.error = None;
        self.close_gap(self.out.k_ff.len());
    }

    /// Stage `k` from `V(k+1)` to `V(k)`, with the dynamics' `A_k`, `B_k` and the cost's
    /// stage derivatives `dk` along the trajectory `(x, u)` (whole, row-major).
    pub(crate) fn step(
        &mut self,
        k: usize,
        x: &[f64],
        u: &[f64],
        ak: &DMatrix<f64>,
        bk: &DMatrix<f64>,
        dk: &StageDerivatives,
    ) -> std::result::Result<(), BackwardError> {
        let (s, mu, bounds) = (&mut *self.s, self.mu, self.bounds);
        let (nx, nu) = (s.vx.len(), s.qu.len());
        s.adjoint.step(ak, bk, dk, &u[k * nu..(k + 1) * nu], bounds);
        let (a, b) = (ak.as_slice(), bk.as_slice());
        // Q_x = ℓ_x + Aᵀ V_x, Q_u = ℓ_u + Bᵀ V_x
        s.qx.copy_from_slice(dk.lx.as_slice());
        add_transposed_product(1.0, a, s.vx.as_slice(), nx, s.qx.as_mut_slice());
        s.qu.copy_from_slice(dk.lu.as_slice());
        add_transposed_product(1.0, b, s.vx.as_slice(), nx, s.qu.as_mut_slice());
        // Q_xx = ℓ_xx + Aᵀ (V_xx A), Q_ux = ℓ_ux + Bᵀ (V_xx A), Q_uu = ℓ_uu + Bᵀ (V_xx B), with
        // V_xx + ρ 1 (V_xx is formed anew for this knot below)
        if self.xreg > 0.0 {
            for i in 0..nx {
                s.vxx[(i, i)] += self.xreg;
            }
        }
        set_product(s.vxx.as_slice(), nx, a, nx, s.vxx_a.as_mut_slice());
        set_product(s.vxx.as_slice(), nx, b, nx, s.vxx_b.as_mut_slice());
        s.qxx.copy_from_slice(dk.lxx.as_slice());
        add_symmetric_transposed_product(a, s.vxx_a.as_slice(), nx, s.qxx.as_mut_slice());
        s.qux.copy_from_slice(dk.lux.as_slice());
        add_transposed_product(1.0, b, s.vxx_a.as_slice(), nx, s.qux.as_mut_slice());
        s.quu.copy_from_slice(dk.luu.as_slice());
        add_symmetric_transposed_product(b, s.vxx_b.as_slice(), nx, s.quu.as_mut_slice());
        if let Some(dynamics) = self.ddp {
            // V_x here is still V_x(k+1); the states have `dynamics.nx()` entries (≥ nx, the
            // tangent dimension, on a manifold)
            let nxs = dynamics.nx();
            dynamics
                .second_order_contracted(k, &x[k * nxs..(k + 1) * nxs], &u[k * nu..(k + 1) * nu], s.vx.as_slice(), &mut s.so)
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
        let norm = s.adjoint.norm();
        self.close_gap(k);
        self.remaining = self.remaining.map(|r| r - 1);
        if self.remaining == Some(0) {
            self.out.gradient_norm = norm;
        }
        Ok(())
    }

    /// Whether every stage since [`Self::start`] was processed without error.
    pub(crate) fn complete(&self) -> bool {
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
