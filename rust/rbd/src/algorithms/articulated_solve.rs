//! `M(q)⁻¹ B` for many right-hand sides at once by the articulated-body recursion: ABA with
//! zero velocity and no gravity, the right-hand side in place of the torques (Singh, Russell &
//! Wensing 2023, eq. 50, their "AZA"). With the joint factors that ABA leaves — in the world
//! frame, `S̄_i`, `U_i = I^A_i S̄_i` and `D_i⁻¹ = (S̄_iᵀ U_i)⁻¹` (module [`crate::minverse`]) —
//! each right-hand side costs two sweeps of 6-vector operations:
//!
//! * backward (leaves to root), with the subtree's bias force `p_i` (zero at a leaf):
//!   `y_i = D_i⁻¹ (b_i − S̄_iᵀ p_i)`, `p_λ += p_i + U_i y_i`;
//! * forward (root to leaves), with the parent's acceleration `a_λ` (zero at a root):
//!   `x_i = y_i − D_i⁻¹ U_iᵀ a_λ`, `a_i = a_λ + S̄_i x_i`,
//!
//! about 31 multiply–adds per body and right-hand side for a 1-dof joint, whatever the depth
//! of the tree: O(n) per right-hand side where the sparse `LᵀDL` solve of
//! [`crate::aba_second_order`] costs `2·Σ depth + nv`, O(n²) on a chain. The right-hand sides
//! go through the sweeps [`CHUNK`] at a time, each per-body quantity a `[6][CHUNK]` block.

use crate::model::Model;
use nalgebra::Matrix6;
use vidyn_spatial::Motion;

/// Right-hand sides carried through the sweeps together.
const CHUNK: usize = 16;

type Lanes = [f64; CHUNK];

/// The joint factors of one configuration (borrowed from the workspace ABA left them in).
pub(crate) struct ArticulatedFactors<'a> {
    pub(crate) model: &'a Model,
    /// `(nv,)` world-frame `S̄` of every dof.
    pub(crate) columns: &'a [Motion],
    /// `(n,)` world-frame `U_i` (first `nv_i` columns) and `D_i⁻¹` (top-left block).
    pub(crate) u: &'a [Matrix6<f64>],
    pub(crate) d_inv: &'a [Matrix6<f64>],
}

/// Scratch of [`ArticulatedFactors::solve_rows`]: `p` and `a` of every body, `[6][CHUNK]` each.
#[derive(Clone, Debug)]
pub(crate) struct ArticulatedScratch {
    p: Vec<Lanes>,
    a: Vec<Lanes>,
}

impl ArticulatedScratch {
    pub(crate) fn new(bodies: usize) -> Self {
        Self { p: vec![[0.0; CHUNK]; 6 * bodies], a: vec![[0.0; CHUNK]; 6 * bodies] }
    }
}

impl ArticulatedFactors<'_> {
    /// Solves `M X = s·B` in place for the `nv` rows `B[i] = t[i·stride ..][..len]` (module
    /// docs), [`CHUNK`] columns at a time.
    pub(crate) fn solve_rows(&self, len: usize, stride: usize, s: f64, t: &mut [f64], scratch: &mut ArticulatedScratch) {
        for c0 in (0..len).step_by(CHUNK) {
            let w = CHUNK.min(len - c0);
            self.solve_chunk(w, s, &mut t[c0..], stride, scratch);
        }
    }

    /// `S̄`, `U`'s one column and the scalar `D⁻¹` of body `i`'s 1-dof joint (dof `iv`).
    fn one_dof(&self, i: usize, iv: usize) -> ([f64; 6], [f64; 6], f64) {
        (self.columns[iv].to_vector().into(), self.u[i].column(0).into(), self.d_inv[i][(0, 0)])
    }

    /// [`Self::solve_rows`] on `w ≤ CHUNK` columns starting at `t[0]`. A 1-dof joint takes a
    /// branch of its own, the same operations with `D⁻¹` a scalar and `U` one column (the
    /// general loops over the joint's `d` dofs cost a 100-link chain's ∂²ABA 83 ms instead of
    /// 74).
    fn solve_chunk(&self, w: usize, s: f64, t: &mut [f64], stride: usize, scratch: &mut ArticulatedScratch) {
        let model = self.model;
        let n = model.nbodies();
        let ArticulatedScratch { p, a } = scratch;
        p[..6 * n].fill([0.0; CHUNK]);
        let load = |t: &[f64], k: usize| {
            let mut x = [0.0; CHUNK];
            x[..w].copy_from_slice(&t[k * stride..k * stride + w]);
            x
        };
        // backward: y_i = D⁻¹ (s b_i − S̄ᵀ p_i) into the rows, p_λ += p_i + U_i y_i
        for i in (0..n).rev() {
            let (iv, d) = (model.idx_v[i], model.joints[i].nv());
            let (below, own) = p.split_at_mut(6 * i);
            let own = &own[..6];
            let (ui, di) = (&self.u[i], &self.d_inv[i]);
            if d == 1 {
                let (sk, uk, dk) = self.one_dof(i, iv);
                let mut y = load(t, iv);
                for c in 0..CHUNK {
                    let mut v = s * y[c];
                    for r in 0..6 {
                        v -= sk[r] * own[r][c];
                    }
                    y[c] = dk * v;
                }
                t[iv * stride..iv * stride + w].copy_from_slice(&y[..w]);
                if let Some(parent) = model.parents[i] {
                    let to = &mut below[6 * parent..6 * parent + 6];
                    for r in 0..6 {
                        for c in 0..CHUNK {
                            to[r][c] += own[r][c] + uk[r] * y[c];
                        }
                    }
                }
                continue;
            }
            let mut u = [[0.0; CHUNK]; 6];
            for (k, uk) in u.iter_mut().enumerate().take(d) {
                let sk = self.columns[iv + k].to_vector();
                *uk = load(t, iv + k).map(|b| s * b);
                for (r, pr) in own.iter().enumerate() {
                    let f = sk[r];
                    for (x, &pc) in uk.iter_mut().zip(pr) {
                        *x -= f * pc;
                    }
                }
            }
            let mut y = [[0.0; CHUNK]; 6];
            for (k, yk) in y.iter_mut().enumerate().take(d) {
                for (l, ul) in u.iter().enumerate().take(d) {
                    let f = di[(k, l)];
                    for (x, &v) in yk.iter_mut().zip(ul) {
                        *x += f * v;
                    }
                }
                t[(iv + k) * stride..(iv + k) * stride + w].copy_from_slice(&yk[..w]);
            }
            if let Some(parent) = model.parents[i] {
                let to = &mut below[6 * parent..6 * parent + 6];
                for (r, (tr, pr)) in to.iter_mut().zip(own).enumerate() {
                    for (x, &v) in tr.iter_mut().zip(pr) {
                        *x += v;
                    }
                    for (k, yk) in y.iter().enumerate().take(d) {
                        let f = ui[(r, k)];
                        for (x, &v) in tr.iter_mut().zip(yk) {
                            *x += f * v;
                        }
                    }
                }
            }
        }
        // forward: x_i = y_i − D⁻¹ U_iᵀ a_λ, a_i = a_λ + S̄_i x_i
        for i in 0..n {
            let (iv, d) = (model.idx_v[i], model.joints[i].nv());
            let (above, own) = a.split_at_mut(6 * i);
            let own = &mut own[..6];
            match model.parents[i] {
                Some(pb) => own.copy_from_slice(&above[6 * pb..6 * pb + 6]),
                None => own.fill([0.0; CHUNK]),
            }
            let (ui, di) = (&self.u[i], &self.d_inv[i]);
            if d == 1 {
                let (sk, uk, dk) = self.one_dof(i, iv);
                let mut x = load(t, iv);
                for c in 0..CHUNK {
                    let mut v = 0.0;
                    for r in 0..6 {
                        v += uk[r] * own[r][c];
                    }
                    x[c] -= dk * v;
                }
                t[iv * stride..iv * stride + w].copy_from_slice(&x[..w]);
                for r in 0..6 {
                    for c in 0..CHUNK {
                        own[r][c] += sk[r] * x[c];
                    }
                }
                continue;
            }
            let mut ua = [[0.0; CHUNK]; 6];
            for (l, ual) in ua.iter_mut().enumerate().take(d) {
                for (r, ar) in own.iter().enumerate() {
                    let f = ui[(r, l)];
                    for (x, &v) in ual.iter_mut().zip(ar) {
                        *x += f * v;
                    }
                }
            }
            for k in 0..d {
                let mut x = load(t, iv + k);
                for (l, ual) in ua.iter().enumerate().take(d) {
                    let f = di[(k, l)];
                    for (xc, &v) in x.iter_mut().zip(ual) {
                        *xc -= f * v;
                    }
                }
                t[(iv + k) * stride..(iv + k) * stride + w].copy_from_slice(&x[..w]);
                let sk = self.columns[iv + k].to_vector();
                for (r, ar) in own.iter_mut().enumerate() {
                    let f = sk[r];
                    for (o, &xc) in ar.iter_mut().zip(&x) {
                        *o += f * xc;
                    }
                }
            }
        }
    }
}
