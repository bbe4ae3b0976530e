//! Second-order derivatives of a step on the Lie group (models with free-flyer, spherical or
//! planar joints, module `chart_step`): the λ-contracted form DDP needs and the full tensors,
//! in the tangent coordinates of the first-order linearisation (module `chart_linearize`).
//! **Not exact to rounding**: central differences of the exact first-order linearisation,
//! transported so that what is differenced is the exact gradient of one smooth map (below);
//! relative error below 1e-7 (measured in `tests/api/chart_second_order_tests.rs`).
//!
//! # Which second derivative
//! States move by `x ⊕ δx = (q ⊕ δq, p + δp)` (`integrate`, right-trivialised, Pinocchio's
//! and crocoddyl's convention) and are compared by its inverse `⊖` (`difference`). At the
//! nominal `(x̄, ū)` with next state `x̄' = f(x̄, ū)`, the step in tangent coordinates is
//!
//! `F(y) = f(x̄ ⊕ (δq, δp), ū + δu) ⊖ x̄'`, `y = (δq, δp, δu)` (`3n`), `F(0) = 0`,
//!
//! the map DDP on a manifold expands: with the value function written `V(x̄' ⊕ Δ)` about the
//! nominal next state (crocoddyl's `SolverDDP`), `Δ = F(y) = [A B] y + ½ yᵀ ∇²F y + …` and the
//! dynamics' second-order term of `Q_xx`, `Q_xu`, `Q_uu` is `H = ∇²(λᵀF)(0)` with `λ = V_x`.
//! `A`, `B = DF(0)` are the first-order linearisation; `H` (`3n × 3n`) is returned split into
//! `hxx`, `hxu`, `huu`, and the full tensors are `∇²F_i(0)`.
//!
//! # The gradient of F away from y = 0
//! Let `E(q₀, q₁) = ∂(q₁ ⊖ q₀)/∂v` for `q₁ ↦ q₁ ⊕ v` at `v = 0` (per joint,
//! [`vidyn_rbd::Joint::difference_jacobian`], `Sᵀ J_r(ξ)⁻¹ S`; `1` on 1-dof joints). Moving
//! `δq` by `ε w` moves `q(y) = q̄ ⊕ δq` by `ε E(q̄, q(y))⁻¹ w` in the tangent coordinates at
//! `q(y)` (because `(q̄ ⊕ δq) ⊖ q̄ = δq`), and moving `q'` by `v` moves `q' ⊖ q̄'` by
//! `E(q̄', q') v`. So, with `A(y)`, `B(y)` the exact linearisation at the moved point in the
//! tangent coordinates at its own input and output,
//!
//! `DF(y) = diag(E(q̄', q'(y)), 1) [A(y) B(y)] diag(E(q̄, q(y))⁻¹, 1, 1)`,
//!
//! which is `[A B]` at `y = 0`. Differencing `[A(y) B(y)]` alone would miss the transport of
//! the tangent coordinates, whose terms at `y = 0` are brackets (`E(q₀, q₀ ⊕ ξ) = 1 + ½ ad_ξ + O(|ξ|²)`:
//! the quadratic term of `log(exp a exp b)` is `½[a, b]`), antisymmetric in the two inputs: they
//! vanish from the symmetric `H` but not from the differenced one, which without them is
//! not symmetric (by 8e-2 relative on the floating tree, against 1.8e-8 with them).
//!
//! # The differences
//! `∂_j DF ≈ (DF(h_j e_j) − DF(−h_j e_j)) / (2 h_j)` for each of the `3n` inputs, stored as
//! `T[i, j, k] = ∂²F_i/∂y_j∂y_k`; `H = Σ_i λ_i T[i]`, and the caller returns `(H + Hᵀ)/2`
//! (the exact `H` is a Hessian). The error is truncation `h²/6 · ∂³DF` plus the rounding of
//! `A` (about 1e-12 absolute: its momentum rows are differences of terms `~M/Δt`) over `2h`.
//! `h_j = 3e-5` on configurations (rad, m), times `max(1, |p̄|∞)` on momenta and
//! `max(1, |ū|∞)` on controls, balances them. Measured (`tests/api/chart_second_order_tests.rs`,
//! errors relative to `(1 + max|H|) Σ|λ_i|`), h = 3e-4 / 1e-4 / 3e-5 / 1e-5: against the exact
//! second order on fixed charts 3e-9 / 1e-9 / 2.8e-9 / 8.7e-9 (rounding grows as h falls);
//! the asymmetry of the raw `H` on the floating tree (truncation, larger on the group) above
//! 1e-7 / 1.9e-7 / 1.8e-8 / 1.9e-9. The moved steps are solved by Newton at its round-off floor
//! (tolerance 1e-15, warm-started at the nominal `q'`): a solver error enters `DF` divided by
//! `h`.
//!
//! An exact construction — the second-order implicit-function theorem of module
//! `second_order` on the centred expansion, composed with the second derivatives of the chart
//! maps `J`, `S`, of the `π̃` correction and of `⊖` — is not written yet.
//!
//! # Cost and scope
//! `6n + 1` solved and linearised steps per prepared step, all independent of `λ`; each
//! contraction is then `18 n³` multiply–adds, and the full tensors are `2n` contractions
//! (`36 n⁴`; 5 % more than the contracted form on solo12, `BENCHMARKS.md`). Gravity, controls
//! on every joint, damping and springs on 1-dof joints, body wrenches and every scheme; the
//! caller refuses holonomic constraints, kinematic joints and mimic joints (module
//! `second_order`). Nothing allocates after the workspace exists.

use crate::error::Result;
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::second_order::FlowDerivatives;
use nalgebra::{DMatrix, Matrix6};
use vidyn_system::StepInput;

/// Relative step of the differences on configurations (module docs).
const STEP: f64 = 3e-5;
/// Newton tolerance of the moved steps: their round-off floor (module docs).
const ROUND_OFF: f64 = 1e-15;

/// Scratch of the second order on the group (module docs), `n` the model's `nv`.
#[derive(Clone, Debug)]
pub(crate) struct GroupSecondOrder {
    /// The integrator with Newton at its round-off floor, and its workspace.
    vi: VariationalIntegrator,
    ws: ViWorkspace,
    /// The linearisation of one moved step, `(2n, 2n)` and `(2n, n)`.
    a: DMatrix<f64>,
    b: DMatrix<f64>,
    /// One moved input `(q (nq), p (n), u (n))`, its tangent move `δq` `(n)`, its next state.
    q: Vec<f64>,
    p: Vec<f64>,
    u: Vec<f64>,
    dq: Vec<f64>,
    q_next: Vec<f64>,
    p_next: Vec<f64>,
    /// `DF(y)` at the moved input, `(2n, 3n)`.
    jac: DMatrix<f64>,
    /// `(2n, 3n, 3n)` C order, `T[(i·3n + j)·3n + k] = ∂²F_i/∂y_j∂y_k`.
    tensor: Vec<f64>,
}

impl GroupSecondOrder {
    pub(crate) fn new(vi: &VariationalIntegrator) -> Self {
        let (n, nq) = (vi.n(), vi.nq());
        let tight = vi.clone().with_newton(ROUND_OFF, vi.max_iterations.max(60)).unwrap_or_else(|_| vi.clone());
        Self {
            ws: tight.workspace(),
            vi: tight,
            a: DMatrix::zeros(2 * n, 2 * n),
            b: DMatrix::zeros(2 * n, n),
            q: vec![0.0; nq],
            p: vec![0.0; n],
            u: vec![0.0; n],
            dq: vec![0.0; n],
            q_next: vec![0.0; nq],
            p_next: vec![0.0; n],
            jac: DMatrix::zeros(2 * n, 3 * n),
            tensor: vec![0.0; 18 * n * n * n],
        }
    }

    /// Solves and linearises the step from `(q, p, u)` into `out` (`a`, `b`, the next state,
    /// the iterations), then fills the tensor `T` (module docs). Errors as
    /// [`VariationalIntegrator::linearize`], for the nominal step or a moved one.
    pub(crate) fn prepare(&mut self, at: StepInput<'_>, out: &mut FlowDerivatives) -> Result<usize> {
        let n = self.vi.n();
        let iterations = self.vi.linearize(&mut self.ws, at, &mut out.a, &mut out.b, &mut out.q_next, &mut out.p_next)?;
        let StepInput { p, u, .. } = at;
        let scale = |x: &[f64]| x.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
        let (hp, hu) = (STEP * scale(p), STEP * scale(u));
        self.tensor.fill(0.0);
        for j in 0..3 * n {
            let h = match j {
                j if j < n => STEP,
                j if j < 2 * n => hp,
                _ => hu,
            };
            for sign in [1.0, -1.0] {
                self.moved_jacobian(at, j, sign * h, out)?;
                // T[i, j, k] += ± DF(±h e_j)[i, k] / 2h
                let w = sign / (2.0 * h);
                for i in 0..2 * n {
                    let row = &mut self.tensor[(i * 3 * n + j) * 3 * n..][..3 * n];
                    for (k, t) in row.iter_mut().enumerate() {
                        *t += w * self.jac[(i, k)];
                    }
                }
            }
        }
        Ok(iterations)
    }

    /// `self.jac = DF(h e_j)` (module docs) at the nominal step `at` whose next state `out`
    /// holds (`at.guess` is not used: the moved step starts at the nominal's end).
    fn moved_jacobian(&mut self, at: StepInput<'_>, j: usize, h: f64, out: &FlowDerivatives) -> Result<()> {
        let StepInput { k: step, q, p, u, .. } = at;
        let n = self.vi.n();
        let model = self.vi.model().clone();
        self.dq.fill(0.0);
        self.p.copy_from_slice(p);
        self.u.copy_from_slice(u);
        match j {
            j if j < n => self.dq[j] = h,
            j if j < 2 * n => self.p[j - n] += h,
            _ => self.u[j - 2 * n] += h,
        }
        for (i, joint) in model.joints.iter().enumerate() {
            let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
            joint.integrate(&q[iq..iq + joint.nq()], &self.dq[iv..iv + joint.nv()], &mut self.q[iq..iq + joint.nq()]);
        }
        let moved = StepInput { k: step, q: &self.q, p: &self.p, u: &self.u, guess: Some(&out.q_next), continues: false };
        self.vi.linearize(&mut self.ws, moved, &mut self.a, &mut self.b, &mut self.q_next, &mut self.p_next)?;
        self.jac.columns_mut(0, 2 * n).copy_from(&self.a);
        self.jac.columns_mut(2 * n, n).copy_from(&self.b);
        for (i, joint) in model.joints.iter().enumerate() {
            let (iq, iv, d, dn) = (model.idx_q[i], model.idx_v[i], joint.nv(), joint.nq());
            if d == 1 {
                continue; // E = 1
            }
            let e_in = joint.difference_jacobian(&q[iq..iq + dn], &self.q[iq..iq + dn]);
            let e_in_inv = e_in.try_inverse().unwrap_or_else(Matrix6::identity);
            let e_out = joint.difference_jacobian(&out.q_next[iq..iq + dn], &self.q_next[iq..iq + dn]);
            // columns of δq: [A B] E_in⁻¹ (the padding of the 6 × 6 blocks is the identity)
            for r in 0..2 * n {
                let mut x = [0.0; 6];
                for (c, xc) in x.iter_mut().enumerate().take(d) {
                    *xc = (0..d).map(|l| self.jac[(r, iv + l)] * e_in_inv[(l, c)]).sum();
                }
                for (c, xc) in x.iter().enumerate().take(d) {
                    self.jac[(r, iv + c)] = *xc;
                }
            }
            // rows of q': E_out [A B]
            for c in 0..3 * n {
                let mut x = [0.0; 6];
                for (r, xr) in x.iter_mut().enumerate().take(d) {
                    *xr = (0..d).map(|l| e_out[(r, l)] * self.jac[(iv + l, c)]).sum();
                }
                for (r, xr) in x.iter().enumerate().take(d) {
                    self.jac[(iv + r, c)] = *xr;
                }
            }
        }
        Ok(())
    }

    /// `h = Σ_i λ_i T[i]` (`3n × 3n`, not symmetrised) at the prepared step.
    pub(crate) fn contract(&self, lambda: &[f64], h: &mut DMatrix<f64>) {
        let m3 = h.nrows();
        h.fill(0.0);
        for (i, &l) in lambda.iter().enumerate() {
            if l == 0.0 {
                continue;
            }
            let t = &self.tensor[i * m3 * m3..(i + 1) * m3 * m3];
            for j in 0..m3 {
                for k in 0..m3 {
                    h[(j, k)] += l * t[j * m3 + k];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
