//! Second derivatives of the kinetic and potential energies at one control point, O(n²)
//! (Fan, Schultz & Murphey 2018, Algorithms 2 and 3, translated to `[linear; angular]`).
//!
//! With `𝓜ᴬ_i = 𝓜_i S̄_i` and `𝓜ᴮ_i = 𝓜_i ψ_i + S̄_i ×* μ_i` (Algorithm 2; the paper's
//! `−ad^D(μ) S̄` is `S̄ ×* μ` in Featherstone's notation), for every `j ⪯ i`:
//! * `K_q̇q̇[i, j] = K_q̇q̇[j, i] = S̄_jᵀ 𝓜ᴬ_i` (the mass matrix),
//! * `K_q̇q[i, j] = ψ_jᵀ 𝓜ᴬ_i` and `K_q̇q[j, i] = S̄_jᵀ 𝓜ᴮ_i`, where `K_q̇q[a, b] = ∂/∂q_b ∂K/∂q̇_a`,
//! * `K_qq[i, j] = K_qq[j, i] = ψ_jᵀ 𝓜ᴮ_i`;
//!
//! and for gravity (our derivation of Algorithm 3 for bodies whose frame is not at the CoM):
//! differentiating `∂V/∂q_i = −gᵀ w_i` with `w_i = ω_i × σp_i + σm_i v_i` along `S̄_j` gives,
//! after the Jacobi identity, `V_qq[i, j] = V_qq[j, i] = ω_j · (g × w_i)` for `j ⪯ i`.
//! Entries for joints not on one path to the root are zero.
//!
//! Body wrenches (constant in their body frames, [`crate::point`]) add the generalised force
//! `W_i = S̄_i · σF_i`. A variation `δq_k` turns the subtree of `k` by `S̄_k δq_k`, and a
//! body-fixed wrench turns with it (`δF̄_j = S̄_k δq_k ×* F̄_j` for `j ⪰ k`). For `k ⪯ i` the
//! column and the whole subtree sum turn together and `(a ×ₘ S̄)·F + S̄·(a ×* F) = 0` leaves
//! `W_i` unchanged; for `k` a strict descendant of `i` only `σF_i` changes, by
//! `S̄_k δq_k ×* σF_k`. So `W_q[i, k] = S̄_i · (S̄_k ×* σF_k)` for `k ≻ i` and zero otherwise.

use crate::point::PointState;
use nalgebra::DMatrix;
use vidyn_rbd::Model;
use vidyn_spatial::Inertia;

/// The four n×n energy Hessians at one control point.
#[derive(Clone, Debug)]
pub struct EnergyHessians {
    /// `K_qq[a, b] = ∂²K/∂q_a∂q_b`.
    pub kqq: DMatrix<f64>,
    /// `K_q̇q[a, b] = ∂/∂q_b (∂K/∂q̇_a)`; its transpose is `K_qq̇`.
    pub kvq: DMatrix<f64>,
    /// `K_q̇q̇ = M(q)`.
    pub kvv: DMatrix<f64>,
    /// `V_qq[a, b] = ∂²V/∂q_a∂q_b`.
    pub vqq: DMatrix<f64>,
    /// `W_q[a, b] = ∂W_a/∂q_b`, the derivative of the generalised force of the body wrenches
    /// (not symmetric; zero without wrenches).
    pub wq: DMatrix<f64>,
    /// `(n,)` world-frame composite inertias `𝓜_i = Σ_{j ⪰ i} M̄_j` (scratch).
    composites: Vec<Inertia>,
    /// The parents of the tree whose entries off every root path are known to be zero here
    /// (empty: not known), so that [`Self::update`] writes the path entries only.
    zero_off_paths_of: Vec<Option<usize>>,
    /// Whether `wq` holds entries of a point with wrenches.
    wq_written: bool,
}

impl EnergyHessians {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            kqq: DMatrix::zeros(n, n),
            kvq: DMatrix::zeros(n, n),
            kvv: DMatrix::zeros(n, n),
            vqq: DMatrix::zeros(n, n),
            wq: DMatrix::zeros(n, n),
            composites: vec![Inertia::zero(); n],
            zero_off_paths_of: Vec::with_capacity(n),
            wq_written: false,
        }
    }

    /// Zeroes what [`Self::update`] will not overwrite at a point of `model`: every entry the
    /// first time and whenever the tree changes (a 13 kB memset per update on ANYmal, 1.1 % of
    /// its walk by FDDP, when done every time), `wq` when the last point had wrenches and this
    /// one has none.
    fn clear_unwritten(&mut self, model: &Model, wrenched: bool) {
        if self.zero_off_paths_of != model.parents {
            for m in [&mut self.kqq, &mut self.kvq, &mut self.kvv, &mut self.vqq, &mut self.wq] {
                m.as_mut_slice().fill(0.0); // a memset; DMatrix::fill is a strided loop
            }
            self.zero_off_paths_of.clone_from(&model.parents);
            self.wq_written = false;
        } else if self.wq_written && !wrenched {
            self.wq.as_mut_slice().fill(0.0);
            self.wq_written = false;
        }
    }

    /// Fills the Hessians from a [`PointState`] updated at the same point. O(n·d).
    pub(crate) fn update(&mut self, model: &Model, pt: &PointState) {
        self.clear_unwritten(model, pt.wrenched);
        self.wq_written = pt.wrenched;
        let n = model.nbodies();
        self.composites.copy_from_slice(&pt.body_inertias);
        for i in (0..n).rev() {
            if let Some(p) = model.parents[i] {
                self.composites[p] = self.composites[p] + self.composites[i];
            }
        }
        let g = model.gravity.linear;
        // column-major storage, entry (r, c) at r + c·n, written through plain slices (the
        // (r, c) indexing of a dynamic nalgebra matrix cost ~25 instructions per entry here)
        let (kqq, kvq, kvv, vqq, wq) =
            (self.kqq.as_mut_slice(), self.kvq.as_mut_slice(), self.kvv.as_mut_slice(), self.vqq.as_mut_slice(), self.wq.as_mut_slice());
        for i in 0..n {
            let comp = &self.composites[i];
            let ma = comp.mul_motion(&pt.columns[i]);
            let mb = comp.mul_motion(&pt.column_rates[i]) + pt.columns[i].cross_force(&pt.momenta[i]);
            let g_cross_w = g.cross(&pt.gravity_lever[i]);
            let mut body = Some(i);
            while let Some(j) = body {
                let (sj, psij) = (&pt.columns[j], &pt.column_rates[j]);
                let (ij, ji) = (i + j * n, j + i * n);
                let mvv = sj.dot(&ma);
                kvv[ij] = mvv;
                kvv[ji] = mvv;
                kvq[ij] = psij.dot(&ma);
                kvq[ji] = sj.dot(&mb);
                let k = psij.dot(&mb);
                kqq[ij] = k;
                kqq[ji] = k;
                let v = sj.angular.dot(&g_cross_w);
                vqq[ij] = v;
                vqq[ji] = v;
                body = model.parents[j];
            }
            if pt.wrenched {
                // W_q[j, i] = S̄_j · (S̄_i ×* σF_i) for every strict ancestor j of i
                let turned = pt.columns[i].cross_force(&pt.sigma_wrench[i]);
                let mut body = model.parents[i];
                while let Some(j) = body {
                    wq[j + i * n] = pt.columns[j].dot(&turned);
                    body = model.parents[j];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use vidyn_rbd::builders::random_tree;
    use vidyn_rbd::Joint;

    /// One storage updated at points of different trees of the same size (each writes only its
    /// own root paths) holds what a fresh one computes, entry for entry.
    #[test]
    fn reused_hessians_equal_fresh_ones_when_the_tree_changes() {
        let joints: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 8;
        let mut reused = EnergyHessians::new(n);
        for seed in [0, 1, 1, 2, 0, 3] {
            let model = random_tree(n, seed, &joints);
            let q: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mut st = PointState::new(n);
            st.update(&model, &q, &v);
            reused.update(&model, &st);
            let mut fresh = EnergyHessians::new(n);
            fresh.update(&model, &st);
            for (got, want) in
                [(&reused.kqq, &fresh.kqq), (&reused.kvq, &fresh.kvq), (&reused.kvv, &fresh.kvv), (&reused.vqq, &fresh.vqq), (&reused.wq, &fresh.wq)]
            {
                assert_eq!(got, want, "tree seed {seed}");
            }
        }
    }
}
