//! The dense path for small systems: form the `sn × sn` DEL Jacobian `J = [H(ϱ, γ)]` from the
//! O(n·d) energy Hessians (Fan, Schultz & Murphey 2018, Algorithms 2 and 3, and the chain rule
//! of module `del`), factor it by LU (O(s³n³)) and linearise the step with it.
//!
//! For a handful of joints this is cheaper than the O(s³ n) recursion of Algorithms B.1/B.2,
//! whose per-body 6×6 algebra has a large constant: on `pendulum_chain(n)` with the trapezoid
//! (`vi_scaling`, session 3) the dense Newton direction took 565 / 1742 / 4797 ns at
//! n = 2 / 5 / 10 against 1062 / 2363 / 4531 ns for B.1, and the dense linearisation 1121 /
//! 4126 / 14782 ns against 3034 / 8197 / 23495 ns. [`crate::VariationalIntegrator`] therefore
//! uses it when `s·n` is at most its `dense_max` (default [`DEFAULT_DENSE_MAX`]) and the
//! integrator has no constraints or kinematic joints; the two paths agree to round-off (tests).
//! It is also the oracle of the recursive path (module `reference`, feature `oracles`).

use crate::del::{assemble_jacobian, JointForces, StepPoints};
use crate::dense::{axpy, lu_factor, lu_solve};
use crate::scheme::Scheme;
use nalgebra::{DMatrix, DMatrixView, DMatrixViewMut};
use vidyn_rbd::Model;

/// Default largest `s·n` solved by the dense path (about where the two Newton directions cost
/// the same; the dense linearisation stays cheaper up to `s·n ≈ 20`).
pub const DEFAULT_DENSE_MAX: usize = 10;

/// Default largest `s·n` of the dense factorisation in Newton iterations where the dense path
/// does not apply (module `newton_direction::dense`): on chains, the deepest trees and so the
/// costliest O(n·d) energy Hessians, the dense Newton direction overtakes B.1/B.2 below about
/// `n = 28` (`vi_scaling`, midpoint and trapezoid; BENCHMARKS.md, "The dense factorisation of
/// robot-sized steps").
pub const DEFAULT_DENSE_NEWTON_MAX: usize = 28;

/// Default largest `s·n` of the dense factorisation in linearisations (module
/// `newton_direction::dense`): on chains the dense linearisation stays cheaper up to about
/// `n = 96`, and on floating-base robots it won outright (solo12's and Talos's linearisations
/// on the Lie group 1.8× and 1.6× faster; same section of BENCHMARKS.md).
pub const DEFAULT_DENSE_LINEARIZATION_MAX: usize = 48;

/// The factored DEL Jacobian and the scratch of the dense linearisation, allocated once.
#[derive(Clone, Debug)]
pub(crate) struct DenseStep {
    /// `(s·n, s·n)` Jacobian, then its LU factors.
    jacobian: DMatrix<f64>,
    pivots: Vec<usize>,
    /// `(s·n, 3n)` right-hand sides / solutions of the linearisation.
    sensitivities: DMatrix<f64>,
    /// `(n, n)` scratch block.
    block: DMatrix<f64>,
}

impl DenseStep {
    pub(crate) fn new(n: usize, s: usize) -> Self {
        Self { jacobian: DMatrix::zeros(s * n, s * n), pivots: vec![0; s * n], sensitivities: DMatrix::zeros(s * n, 3 * n), block: DMatrix::zeros(n, n) }
    }

    /// Resizes the scratch for `n` joints and `s` intervals if it has other sizes (a workspace
    /// made for the recursive path holds an empty one).
    pub(crate) fn ensure(&mut self, n: usize, s: usize) {
        if self.block.nrows() != n || self.jacobian.nrows() != s * n {
            *self = Self::new(n, s);
        }
    }

    /// Forms `J` at the control points of `pts` (updating their energy Hessians) and factors
    /// it; `false` when it is numerically singular.
    pub(crate) fn factorize(&mut self, model: &Model, sc: &Scheme, dt: f64, forces: &JointForces, pts: &mut StepPoints) -> bool {
        pts.update_hessians(model);
        assemble_jacobian(pts, sc, dt, forces, model.nv, &mut self.jacobian);
        lu_factor(&mut self.jacobian, &mut self.pivots)
    }

    /// [`Self::factorize`] of the Jacobian whose `n × n` block `(ϱ, γ)` (`γ = 1..=s`) `block`
    /// writes (a model with mimic joints: the reduced blocks `Gᵀ H(ϱ, γ) G`, module
    /// `mimic_step`).
    pub(crate) fn factorize_blocks(&mut self, s: usize, mut block: impl FnMut(usize, usize, &mut DMatrixViewMut<'_, f64>)) -> bool {
        let n = self.block.nrows();
        for rho in 0..s {
            for gamma in 1..=s {
                block(rho, gamma, &mut self.jacobian.view_mut((rho * n, (gamma - 1) * n), (n, n)));
            }
        }
        lu_factor(&mut self.jacobian, &mut self.pivots)
    }

    /// `x ← J⁻¹ x` with the factors of [`Self::factorize`] (`x`: `(s·n,)`, rows `ϱ·n + i` in,
    /// unknowns `(γ−1)·n + i` out).
    pub(crate) fn solve(&self, x: &mut [f64]) {
        lu_solve(&self.jacobian, &self.pivots, x);
    }

    /// `A`, `B` of the step whose solution `pts` holds, with `J` factored there: the `3n`
    /// right-hand sides `∂R/∂x` (`x = (q_k, p_k, u)`, from the DEL blocks `H(ϱ, 0)` and the
    /// explicit `p_k`, `u` terms) through the LU, `q_{k+1} = Σ_α endpoint[α] q^α`, and
    /// `dp_{k+1} = H(s, 0) δq_k + Σ_γ H(s, γ) dz_γ + ∂P/∂u` as dense products. O(s³n³).
    pub(crate) fn linearize(&mut self, pts: &StepPoints, sc: &Scheme, dt: f64, forces: &JointForces, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>) {
        self.linearize_blocks(sc, dt, |x, beta, out| pts.del_block(sc, dt, forces, x, beta, out), a, b);
    }

    /// [`Self::linearize`] with the DEL blocks `H(x, β)` that `block` writes (as for
    /// [`Self::factorize_blocks`]).
    pub(crate) fn linearize_blocks(
        &mut self,
        sc: &Scheme,
        dt: f64,
        mut block: impl FnMut(usize, usize, &mut DMatrixViewMut<'_, f64>),
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) {
        let (n, s) = (self.block.nrows(), sc.s);
        let rhs = &mut self.sensitivities;
        rhs.as_mut_slice().fill(0.0);
        for rho in 0..s {
            block(rho, 0, &mut rhs.view_mut((rho * n, 0), (n, n)));
            for i in 0..n {
                rhs[(rho * n + i, 2 * n + i)] = sc.control_weight(rho) * dt;
            }
        }
        for i in 0..n {
            rhs[(i, n + i)] = 1.0;
        }
        // When only row block 0 sees the controls (every one-interval scheme), their columns
        // are `control_weight(0)·Δt` times the `p_k` columns: 2n solves instead of 3n.
        let control_from_p = (1..s).all(|rho| sc.control_weight(rho) == 0.0);
        let solved = if control_from_p { 2 * n } else { 3 * n };
        for c in 0..solved {
            let mut col = rhs.column_mut(c);
            lu_solve(&self.jacobian, &self.pivots, col.as_mut_slice());
            col.neg_mut();
        }
        if control_from_p {
            let scale = sc.control_weight(0) * dt;
            for c in 0..n {
                for r in 0..s * n {
                    rhs[(r, 2 * n + c)] = scale * rhs[(r, n + c)];
                }
            }
        }
        // q_{k+1} = Σ_α endpoint[α] q^α (= z_s for Lobatto schemes); columns (q_k, p_k | u)
        let (mut a_q, mut b_q) = (a.view_mut((0, 0), (n, 2 * n)), b.view_mut((0, 0), (n, n)));
        a_q.fill(0.0);
        b_q.fill(0.0);
        for i in 0..n {
            a_q[(i, i)] = sc.endpoint(0);
        }
        for g in 1..=s {
            let sens = rhs.view(((g - 1) * n, 0), (n, 3 * n));
            a_q.zip_apply(&sens.columns(0, 2 * n), |x, y| *x += sc.endpoint(g) * y);
            b_q.zip_apply(&sens.columns(2 * n, n), |x, y| *x += sc.endpoint(g) * y);
        }
        // p_{k+1} = P(q^0, …, q^s, u): H(s, 0) δq_k + Σ_γ H(s, γ) dz_γ, plus control_weight(s)·Δt·δu
        let (mut a_p, mut b_p) = (a.view_mut((n, 0), (n, 2 * n)), b.view_mut((n, 0), (n, n)));
        a_p.fill(0.0);
        b_p.fill(0.0);
        for i in 0..n {
            b_p[(i, i)] = sc.control_weight(s) * dt;
        }
        let blk = &mut self.block;
        block(s, 0, &mut blk.view_mut((0, 0), (n, n)));
        a_p.columns_mut(0, n).copy_from(blk);
        for gamma in 1..=s {
            block(s, gamma, &mut blk.view_mut((0, 0), (n, n)));
            let sens = rhs.view(((gamma - 1) * n, 0), (n, 3 * n));
            add_product(&mut a_p, blk, &sens.columns(0, 2 * n));
            add_product(&mut b_p, blk, &sens.columns(2 * n, n));
        }
    }
}

/// `out += h x` column by column (`axpy`s on contiguous columns; nalgebra's `gemm` would
/// allocate matrixmultiply's packing buffers on every call).
fn add_product(out: &mut DMatrixViewMut<'_, f64>, h: &DMatrix<f64>, x: &DMatrixView<'_, f64>) {
    let n = h.nrows();
    for c in 0..out.ncols() {
        let mut col = out.column_mut(c);
        let col = col.as_mut_slice();
        for (k, hk) in h.as_slice().chunks_exact(n).enumerate() {
            let w = x[(k, c)];
            if w != 0.0 {
                axpy(col, w, hk);
            }
        }
    }
}
