//! The velocity state `y = (q, v)` of a variational integrator, for optimisers whose cost is
//! written on velocities.
//!
//! The VI steps `x = (q, p)`. Its step in velocity coordinates is `f_y = g ∘ f ∘ h` with the
//! Legendre maps `h(q, v) = (q, M(q) v)` and `g(q, p) = (q, M(q)⁻¹ p)`, whose Jacobians are
//! (see `vidyn_vi`'s `state` module)
//! $$\frac{\partial h}{\partial y} = \begin{bmatrix} 1 & 0 \\ T & M \end{bmatrix},\qquad
//!   \frac{\partial g}{\partial x} = \begin{bmatrix} 1 & 0 \\ -M^{-1} T & M^{-1} \end{bmatrix},
//!   \qquad T = \frac{\partial (M(q) v)}{\partial q},$$
//! so that, with `A`, `B` the VI's exact Jacobians of the step `k` and primes marking node `k+1`,
//! $$A_y = \frac{\partial g}{\partial x}\Big|_{k+1} A \,\frac{\partial h}{\partial y}\Big|_k,\qquad
//!   B_y = \frac{\partial g}{\partial x}\Big|_{k+1} B .$$
//! Written out: `Z = A ∂h/∂y = [A_{·q} + A_{·p} T | A_{·p} M]`, then the `q` rows of `A_y`
//! are those of `Z` and its `v` rows are `M'⁻¹ Z_{p·} − (M'⁻¹ T') Z_{q·}`; the same row
//! operation gives `B_y` from `B`. Still exact (the chain rule of exact derivatives), O(n³) per
//! step, in plain column loops (at the cart-pole's n = 2 nalgebra's `gemm` and triangular
//! solves on views cost several times the arithmetic). On free-flyer, spherical and planar
//! joints the same formulas hold in tangent coordinates: `q` keeps its `nq` coordinates, the
//! `q` columns and rows are along `model.difference`'s directions (those of `A`, `B` and of `T`,
//! which [`vidyn_rbd::mass_matrix_and_derivative`] forms along them), and `v`, `p` are vectors.
//!
//! Why an optimiser wants this: a cost quadratic in `(q, v)` is quadratic in `y` but not in
//! `(q, p)`, where `v = M(q)⁻¹ p` bends it. iLQR's Gauss–Newton model drops the curvature of
//! the dynamics in whichever coordinates it works; in `(q, p)` it also loses that of the cost
//! ([`crate::VelocityCost`] keeps only `Jᵀ ℓ_yy J`). On the gravity-free cart-pole swing-up
//! (`BENCHMARKS.md`) iLQR in `y` converges in 6 iterations instead of 8, at the linear rate
//! crocoddyl's FDDP shows on its `(q, v)` state.
//!
//! [`Legendre`] holds one node's `M(q)`, its Cholesky factor, `T`, `M⁻¹` and `M⁻¹T`; `p = M v`
//! is computed by [`Legendre::momentum_of`] only, so that a rollout and a later linearisation
//! of the same `y` hand the VI the same `p`, bit for bit. A linearisation records each node's
//! data ([`Legendre::save`]) for the conversion of the optimiser's result back to `(q, p)`.

use crate::error::{OptimError, Result};
use nalgebra::DMatrix;
use vidyn_rbd::{Model, Workspace};

/// One node's Legendre data: `M(q)` (a copy), its Cholesky factor `L` (`M = L Lᵀ`, lower
/// triangle of `factor`) and the `q` they belong to; after [`Legendre::linearize_at`] also
/// `T = ∂(M v)/∂q`, `M⁻¹` and `M⁻¹ T`. Allocates nothing after [`Legendre::new`]; the
/// rigid-body algorithms run in the caller's workspace (the VI workspace's,
/// [`vidyn_vi::ViWorkspace::rbd`]).
#[derive(Debug)]
pub(crate) struct Legendre {
    /// The configuration `mass` and `factor` belong to (empty: none yet).
    q: Vec<f64>,
    mass: DMatrix<f64>,
    factor: DMatrix<f64>,
    t: DMatrix<f64>,
    minv: DMatrix<f64>,
    minv_t: DMatrix<f64>,
    /// n entries of scratch: `v` in [`Legendre::linearize_at`], a row or a column's part in
    /// the products below.
    scratch: Vec<f64>,
}

impl Legendre {
    pub(crate) fn new(model: &Model) -> Self {
        let n = model.nv;
        let zeros = || DMatrix::zeros(n, n);
        Self { q: Vec::with_capacity(model.nq), mass: zeros(), factor: zeros(), t: zeros(), minv: zeros(), minv_t: zeros(), scratch: vec![0.0; n] }
    }

    /// `M(q)` and its factor, recomputed only when `q` differs (bitwise) from the last one.
    fn mass_at(&mut self, model: &Model, rbd: &mut Workspace, q: &[f64]) -> Result<()> {
        if self.q == q {
            return Ok(());
        }
        let m = vidyn_rbd::crba(model, rbd, q)?;
        self.mass.copy_from(m);
        self.factor_mass(q)
    }

    /// Factors `self.mass` into `self.factor` (Cholesky–Banachiewicz, plain loops: at these
    /// sizes nalgebra's factor and triangular solves on views cost several times the
    /// arithmetic) and records `q` as its configuration.
    fn factor_mass(&mut self, q: &[f64]) -> Result<()> {
        self.q.clear();
        let (m, l) = (&self.mass, &mut self.factor);
        let n = m.nrows();
        for i in 0..n {
            for j in 0..=i {
                let s = m[(i, j)] - (0..j).map(|k| l[(i, k)] * l[(j, k)]).sum::<f64>();
                if i == j {
                    if s <= 0.0 || !s.is_finite() {
                        return Err(OptimError::NotPositiveDefinite(format!(
                            "the mass matrix M(q) is not positive definite (pivot {i}: {s:e}): no velocity state"
                        )));
                    }
                    l[(i, i)] = s.sqrt();
                } else {
                    l[(i, j)] = s / l[(j, j)];
                }
            }
        }
        self.q.extend_from_slice(q);
        Ok(())
    }

    /// `x ← M⁻¹ x` by the two triangular solves with the factor (on its column-major slice:
    /// `L[i, k]` at `k·n + i`).
    fn solve(&self, x: &mut [f64]) {
        let n = x.len();
        let l = &self.factor.as_slice()[..n * n];
        for i in 0..n {
            let mut s = x[i];
            for k in 0..i {
                s -= l[k * n + i] * x[k];
            }
            x[i] = s / l[i * n + i];
        }
        for i in (0..n).rev() {
            let column = &l[i * n..(i + 1) * n];
            let mut s = x[i];
            for k in i + 1..n {
                s -= column[k] * x[k];
            }
            x[i] = s / column[i];
        }
    }

    /// `p = M v` with the `M` held (the only place the product is formed).
    pub(crate) fn momentum_of(&self, v: &[f64], p: &mut [f64]) {
        let n = v.len();
        for (i, pi) in p.iter_mut().enumerate() {
            *pi = (0..n).map(|j| self.mass[(i, j)] * v[j]).sum();
        }
    }

    /// `v ← M v` with the `M` held.
    pub(crate) fn momentum_in_place(&mut self, v: &mut [f64]) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.copy_from_slice(v);
        self.momentum_of(&scratch, v);
        self.scratch = scratch;
    }

    /// `p = M(q) v`.
    pub(crate) fn momentum(&mut self, model: &Model, rbd: &mut Workspace, q: &[f64], v: &[f64], p: &mut [f64]) -> Result<()> {
        self.mass_at(model, rbd, q)?;
        self.momentum_of(v, p);
        Ok(())
    }

    /// `v = M(q)⁻¹ p`; a following [`Legendre::momentum`] at the same `q` reuses `M`.
    pub(crate) fn velocity(&mut self, model: &Model, rbd: &mut Workspace, q: &[f64], p: &[f64], v: &mut [f64]) -> Result<()> {
        self.mass_at(model, rbd, q)?;
        v.copy_from_slice(p);
        self.solve(v);
        Ok(())
    }

    /// `M(q)`, its factor, `T = ∂(M v)/∂q` at `(q, v)` (one pass over the tree,
    /// [`vidyn_rbd::mass_matrix_and_derivative`]), `M⁻¹` and `M⁻¹ T`.
    pub(crate) fn linearize_at(&mut self, model: &Model, rbd: &mut Workspace, q: &[f64], v: &[f64]) -> Result<()> {
        self.scratch.copy_from_slice(v);
        let mass = &mut self.mass;
        let t = vidyn_rbd::mass_matrix_and_derivative(model, rbd, q, &mut self.scratch, |m, _| {
            mass.copy_from(m);
            Ok::<(), OptimError>(())
        })?;
        self.t.copy_from(t);
        self.factor_mass(q)?;
        let mut minv = std::mem::take(&mut self.minv);
        let mut minv_t = std::mem::take(&mut self.minv_t);
        minv.fill_with_identity();
        minv_t.copy_from(&self.t);
        for mut col in minv.column_iter_mut().chain(minv_t.column_iter_mut()) {
            self.solve(col.as_mut_slice());
        }
        (self.minv, self.minv_t) = (minv, minv_t);
        Ok(())
    }

    /// Entries of [`Legendre::save`]'s record for `n` joints of `nq` coordinates: `y = (q, v)`,
    /// `M`, `M⁻¹`, `M⁻¹ T`.
    pub(crate) fn saved_len(nq: usize, n: usize) -> usize {
        nq + n + 3 * n * n
    }

    /// Records the data of [`Legendre::linearize_at`] at `y = (q, v)` into `out`.
    pub(crate) fn save(&self, y: &[f64], out: &mut [f64]) {
        let n = self.mass.nrows();
        let (head, rest) = out.split_at_mut(y.len());
        head.copy_from_slice(y);
        for (part, m) in rest.chunks_exact_mut(n * n).zip([&self.mass, &self.minv, &self.minv_t]) {
            part.copy_from_slice(m.as_slice());
        }
    }

    /// Takes a record of [`Legendre::save`] when it was made at `(q, v)` (bit for bit): then
    /// `M`, `M⁻¹` and `M⁻¹ T` are those [`Legendre::linearize_at`] would compute (not `T` nor
    /// the factor). Returns whether it did.
    pub(crate) fn load(&mut self, q: &[f64], v: &[f64], saved: &[f64]) -> bool {
        let (nq, n) = (q.len(), v.len());
        let same = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        if saved.len() != Self::saved_len(nq, n) || !same(&saved[..nq], q) || !same(&saved[nq..nq + n], v) {
            return false;
        }
        for (part, m) in saved[nq + n..].chunks_exact(n * n).zip([&mut self.mass, &mut self.minv, &mut self.minv_t]) {
            m.as_mut_slice().copy_from_slice(part);
        }
        // the factor is not restored: M(q) is not "held" for `mass_at`
        self.q.clear();
        true
    }
}

/// `A ← ∂g/∂x|_{k+1} A ∂h/∂y|_k`, `B ← ∂g/∂x|_{k+1} B` (module documentation), with `from`
/// and `to` prepared by [`Legendre::linearize_at`] at nodes `k` and `k + 1`.
pub(crate) fn jacobians_to_velocity(a: &mut DMatrix<f64>, b: &mut DMatrix<f64>, from: &Legendre, to: &mut Legendre) {
    let n = from.mass.nrows();
    let rows = 2 * n;
    let (q_cols, p_cols) = a.as_mut_slice().split_at_mut(n * rows);
    // A_{·q} + A_{·p} T (reads the p columns before they change)
    for j in 0..n {
        for l in 0..n {
            let tlj = from.t[(l, j)];
            if tlj != 0.0 {
                for (z, &x) in q_cols[j * rows..(j + 1) * rows].iter_mut().zip(&p_cols[l * rows..(l + 1) * rows]) {
                    *z += x * tlj;
                }
            }
        }
    }
    // A_{·p} M, row by row in place
    let row = &mut to.scratch;
    for i in 0..rows {
        for (l, r) in row.iter_mut().enumerate() {
            *r = p_cols[l * rows + i];
        }
        for j in 0..n {
            p_cols[j * rows + i] = (0..n).map(|l| row[l] * from.mass[(l, j)]).sum();
        }
    }
    to_velocity_rows(a, to);
    to_velocity_rows(b, to);
}

/// The `v` rows `M⁻¹ X_{p·} − (M⁻¹ T) X_{q·}` of `∂g/∂x X`, in place (the `q` rows stay), with
/// `node` prepared by [`Legendre::linearize_at`].
fn to_velocity_rows(x: &mut DMatrix<f64>, node: &mut Legendre) {
    let n = node.mass.nrows();
    let Legendre { minv, minv_t, scratch: p, .. } = node;
    for mut col in x.column_iter_mut() {
        let col = col.as_mut_slice();
        let (q, v) = col.split_at_mut(n);
        p.copy_from_slice(v);
        for (i, vi) in v.iter_mut().enumerate() {
            *vi = (0..n).map(|l| minv[(i, l)] * p[l] - minv_t[(i, l)] * q[l]).sum();
        }
    }
}

/// Gains on `(q, v)` as gains on `(q, p)`, in place: `K ← K ∂g/∂x = [K_q − K_v M⁻¹T | K_v M⁻¹]`
/// (the same feedback to first order), with `node` prepared by [`Legendre::linearize_at`].
pub(crate) fn gains_to_momentum(gain: &mut DMatrix<f64>, node: &mut Legendre) {
    let n = node.mass.nrows();
    let Legendre { minv, minv_t, scratch: kv, .. } = node;
    for r in 0..gain.nrows() {
        for (i, k) in kv.iter_mut().enumerate() {
            *k = gain[(r, n + i)];
        }
        for j in 0..n {
            gain[(r, j)] -= (0..n).map(|i| kv[i] * minv_t[(i, j)]).sum::<f64>();
            gain[(r, n + j)] = (0..n).map(|i| kv[i] * minv[(i, j)]).sum();
        }
    }
}
