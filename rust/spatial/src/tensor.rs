//! Tensorial spatial vector algebra (Singh, Russell & Wensing 2023, Sec. III, Table II).
//!
//! A [`Tensor3`] is a dense `(n0, n1, n2)` array in NumPy C order, indexed (row, column,
//! page). The operators lift the spatial cross products to matrices of spatial vectors (the
//! columns of a 6×n matrix `U` are motions or forces, `[linear; angular]` like everywhere in
//! this crate):
//! * `U×̃` ([`cross_motion_tensor`]), `U×̃*` ([`cross_force_tensor`]), `F×̄̃*`
//!   ([`cross_bar_tensor`]): 6×6×n, page k is `u_k×`, `u_k×*`, `f_k×̄*`;
//! * `A B` ([`Tensor3::mul_matrix`]): `Z_ijk = Σ_l A_ilk B_lj`, every page times `B` (eq. 18);
//!   `B A` ([`Tensor3::left_mul`]): `Y_ijk = Σ_l B_il A_ljk` (eq. 20);
//! * `A^T̃` ([`Tensor3::transpose_pages`], `(A^T̃)_jik = A_ijk`) and `A^R̃`
//!   ([`Tensor3::rotate`], `(A^R̃)_ikj = A_ijk`);
//! * `ℬ(I, V)` ([`b_tensor`]): page k is `B(I, v_k) = ½[(v_k×*)I − I(v_k×) + (I v_k)×̄*]` (eq. 19).
//!
//! The algorithms never store these tensors (they work with the per-dof products of Sec. IV-F);
//! this module is the readable specification, and its tests check every identity M1–M27 of
//! Table II, which the derivative algorithms rely on.

use crate::{Force, Matrix6, Motion};
use nalgebra::DMatrix;
use std::ops::{Index, IndexMut};

/// A dense 3-index tensor of `f64` stored contiguously in NumPy C (row-major) order:
/// entry `[i, j, k]` of a `(n0, n1, n2)` tensor is `as_slice()[(i·n1 + j)·n2 + k]`, so
/// `numpy.asarray(t.as_slice()).reshape(t.shape())` is the same tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor3 {
    data: Vec<f64>,
    shape: [usize; 3],
}

impl Tensor3 {
    /// A tensor of zeros with the given shape.
    #[must_use]
    pub fn zeros(shape: [usize; 3]) -> Self {
        Self { data: vec![0.0; shape[0] * shape[1] * shape[2]], shape }
    }

    /// `[n0, n1, n2]`.
    #[inline]
    #[must_use]
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// All entries in C order.
    #[inline]
    #[must_use]
    pub fn as_slice(&self) -> &[f64] {
        &self.data
    }

    /// All entries in C order, mutable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.data
    }

    /// Position of `[i, j, k]` in [`Self::as_slice`].
    #[inline]
    #[must_use]
    pub fn offset(&self, i: usize, j: usize, k: usize) -> usize {
        debug_assert!(i < self.shape[0] && j < self.shape[1] && k < self.shape[2]);
        (i * self.shape[1] + j) * self.shape[2] + k
    }

    /// Sets every entry to `x`.
    pub fn fill(&mut self, x: f64) {
        self.data.fill(x);
    }

    /// `out[j, k] = Σ_i λ_i T[i, j, k]` (the contraction over the first index). `out` must be
    /// `(n1, n2)` and `lambda` of length `n0`. No allocation.
    pub fn contract_first(&self, lambda: &[f64], out: &mut DMatrix<f64>) {
        let [n0, n1, n2] = self.shape;
        assert!(lambda.len() == n0 && out.nrows() == n1 && out.ncols() == n2, "contract_first: shape mismatch");
        out.fill(0.0);
        for (i, &l) in lambda.iter().enumerate() {
            if l == 0.0 {
                continue;
            }
            let page = &self.data[i * n1 * n2..(i + 1) * n1 * n2];
            for j in 0..n1 {
                for k in 0..n2 {
                    out[(j, k)] += l * page[j * n2 + k];
                }
            }
        }
    }
}

impl Index<[usize; 3]> for Tensor3 {
    type Output = f64;
    #[inline]
    fn index(&self, [i, j, k]: [usize; 3]) -> &f64 {
        &self.data[self.offset(i, j, k)]
    }
}

impl IndexMut<[usize; 3]> for Tensor3 {
    #[inline]
    fn index_mut(&mut self, [i, j, k]: [usize; 3]) -> &mut f64 {
        let o = self.offset(i, j, k);
        &mut self.data[o]
    }
}

impl Tensor3 {
    /// A tensor from its C-order entries (`data.len()` must be the product of `shape`).
    #[must_use]
    pub fn from_vec(shape: [usize; 3], data: Vec<f64>) -> Option<Self> {
        (data.len() == shape[0] * shape[1] * shape[2]).then_some(Self { data, shape })
    }

    /// Page `k` as a matrix.
    #[must_use]
    pub fn page(&self, k: usize) -> DMatrix<f64> {
        let [n0, n1, _] = self.shape;
        DMatrix::from_fn(n0, n1, |i, j| self[[i, j, k]])
    }

    /// The tensor whose pages are `pages` (all of one shape).
    #[must_use]
    pub fn from_pages(pages: &[DMatrix<f64>]) -> Self {
        let (n0, n1) = pages.first().map_or((0, 0), |p| p.shape());
        let mut t = Self::zeros([n0, n1, pages.len()]);
        for (k, p) in pages.iter().enumerate() {
            for i in 0..n0 {
                for j in 0..n1 {
                    t[[i, j, k]] = p[(i, j)];
                }
            }
        }
        t
    }

    /// Tensor–matrix product (eq. 18): `Z_ijk = Σ_l A_ilk B_lj`.
    #[must_use]
    pub fn mul_matrix(&self, b: &DMatrix<f64>) -> Tensor3 {
        let pages: Vec<DMatrix<f64>> = (0..self.shape[2]).map(|k| self.page(k) * b).collect();
        Self::with_shape_of_pages(&pages, [self.shape[0], b.ncols(), self.shape[2]])
    }

    /// Matrix–tensor product (eq. 20): `Y_ijk = Σ_l B_il A_ljk`.
    #[must_use]
    pub fn left_mul(b: &DMatrix<f64>, a: &Tensor3) -> Tensor3 {
        let pages: Vec<DMatrix<f64>> = (0..a.shape[2]).map(|k| b * a.page(k)).collect();
        Self::with_shape_of_pages(&pages, [b.nrows(), a.shape[1], a.shape[2]])
    }

    /// `A^T̃`: every page transposed, `(A^T̃)_jik = A_ijk`.
    #[must_use]
    pub fn transpose_pages(&self) -> Tensor3 {
        let [n0, n1, n2] = self.shape;
        let mut t = Self::zeros([n1, n0, n2]);
        for i in 0..n0 {
            for j in 0..n1 {
                for k in 0..n2 {
                    t[[j, i, k]] = self[[i, j, k]];
                }
            }
        }
        t
    }

    /// `A^R̃`: columns and pages exchanged, `(A^R̃)_ikj = A_ijk`.
    #[must_use]
    pub fn rotate(&self) -> Tensor3 {
        let [n0, n1, n2] = self.shape;
        let mut t = Self::zeros([n0, n2, n1]);
        for i in 0..n0 {
            for j in 0..n1 {
                for k in 0..n2 {
                    t[[i, k, j]] = self[[i, j, k]];
                }
            }
        }
        t
    }

    /// A tensor with one page (`(n0, n1, 1)`) read as an `n0 × n1` matrix.
    #[must_use]
    pub fn as_matrix(&self) -> DMatrix<f64> {
        let [n0, n1, n2] = self.shape;
        DMatrix::from_fn(n0, n1 * n2, |i, c| self[[i, c / n2, c % n2]])
    }

    fn with_shape_of_pages(pages: &[DMatrix<f64>], shape: [usize; 3]) -> Tensor3 {
        if pages.is_empty() {
            return Self::zeros(shape);
        }
        Self::from_pages(pages)
    }
}

fn pages_of<T>(cols: &[T], page: impl Fn(&T) -> Matrix6<f64>) -> Tensor3 {
    let pages: Vec<DMatrix<f64>> = cols.iter().map(|c| DMatrix::from_column_slice(6, 6, page(c).as_slice())).collect();
    if pages.is_empty() {
        return Tensor3::zeros([6, 6, 0]);
    }
    Tensor3::from_pages(&pages)
}

/// `U×̃` (6×6×n): page k is the motion cross-product matrix `u_k×`.
#[must_use]
pub fn cross_motion_tensor(u: &[Motion]) -> Tensor3 {
    pages_of(u, Motion::cross_motion_matrix)
}

/// `U×̃*` (6×6×n): page k is the force cross-product matrix `u_k×*`.
#[must_use]
pub fn cross_force_tensor(u: &[Motion]) -> Tensor3 {
    pages_of(u, Motion::cross_force_matrix)
}

/// `F×̄̃*` (6×6×n): page k is the cross-bar matrix `f_k×̄*`.
#[must_use]
pub fn cross_bar_tensor(f: &[Force]) -> Tensor3 {
    pages_of(f, Force::cross_bar_matrix)
}

/// `B(I, v) = ½[(v×*)I − I(v×) + (I v)×̄*]` (Singh et al. eq. 19 for one velocity), so that the
/// Coriolis force of a body is `B(I, v) v = v ×* I v`.
#[must_use]
pub fn b_matrix(inertia: &Matrix6<f64>, v: &Motion) -> Matrix6<f64> {
    let h = Force::from_vector(&(inertia * v.to_vector()));
    (v.cross_force_matrix() * inertia - inertia * v.cross_motion_matrix() + h.cross_bar_matrix()) * 0.5
}

/// `ℬ(I, V)` (6×6×n): page k is [`b_matrix`]`(I, v_k)`.
#[must_use]
pub fn b_tensor(inertia: &Matrix6<f64>, v: &[Motion]) -> Tensor3 {
    pages_of(v, |vk| b_matrix(inertia, vk))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    const TOL: f64 = 1e-12;

    fn motions(r: &mut rand_chacha::ChaCha8Rng, n: usize) -> Vec<Motion> {
        (0..n).map(|_| motion(r)).collect()
    }
    fn forces(r: &mut rand_chacha::ChaCha8Rng, n: usize) -> Vec<Force> {
        (0..n).map(|_| force(r)).collect()
    }
    fn mat_m(cols: &[Motion]) -> DMatrix<f64> {
        DMatrix::from_fn(6, cols.len(), |i, j| cols[j].to_vector()[i])
    }
    fn mat_f(cols: &[Force]) -> DMatrix<f64> {
        DMatrix::from_fn(6, cols.len(), |i, j| cols[j].to_vector()[i])
    }
    fn neg(t: &Tensor3) -> Tensor3 {
        Tensor3::from_vec(t.shape(), t.as_slice().iter().map(|x| -x).collect()).unwrap()
    }
    fn sub(a: &Tensor3, b: &Tensor3) -> Tensor3 {
        assert_eq!(a.shape(), b.shape());
        Tensor3::from_vec(a.shape(), a.as_slice().iter().zip(b.as_slice()).map(|(x, y)| x - y).collect()).unwrap()
    }
    fn close(a: &Tensor3, b: &Tensor3, what: &str) {
        assert_eq!(a.shape(), b.shape(), "{what}: shapes");
        let e = a.as_slice().iter().zip(b.as_slice()).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()));
        assert!(e < TOL, "{what}: max diff {e:e}");
    }
    fn close_m(a: &DMatrix<f64>, b: &DMatrix<f64>, what: &str) {
        assert_eq!(a.shape(), b.shape(), "{what}: shapes");
        assert!((a - b).amax() < TOL, "{what}: max diff {:e}", (a - b).amax());
    }
    fn d6(m: &Matrix6<f64>) -> DMatrix<f64> {
        DMatrix::from_column_slice(6, 6, m.as_slice())
    }
    /// `(v×) M` for a 6×n matrix of motions, column by column.
    fn crm_mat(v: &Motion, u: &DMatrix<f64>) -> DMatrix<f64> {
        d6(&v.cross_motion_matrix()) * u
    }

    #[test]
    fn table_ii_identities_m1_to_m21() {
        let mut r = rng(11);
        let (n, l, m) = (3, 4, 2);
        let (u, v, f) = (motions(&mut r, n), motions(&mut r, l), forces(&mut r, m));
        let (um, vm, fm) = (mat_m(&u), mat_m(&v), mat_f(&f));
        let (ux, uxs, fxb) = (cross_motion_tensor(&u), cross_force_tensor(&u), cross_bar_tensor(&f));
        let (w1, f1) = (motion(&mut r), force(&mut r));
        // M1 U×̃* = −(U×̃)^T̃
        close(&uxs, &neg(&ux.transpose_pages()), "M1");
        // M2 −Vᵀ(U×̃*) = (U×̃V)^T̃
        close(&neg(&Tensor3::left_mul(&vm.transpose(), &uxs)), &ux.mul_matrix(&vm).transpose_pages(), "M2");
        // M3 −Vᵀ(U×̃*)F = (U×̃V)^T̃ F
        close(&neg(&Tensor3::left_mul(&vm.transpose(), &uxs).mul_matrix(&fm)), &ux.mul_matrix(&vm).transpose_pages().mul_matrix(&fm), "M3");
        // M4 (U×̃v)^R̃ = −v×U
        let w1m = mat_m(&[w1]);
        close_m(&ux.mul_matrix(&w1m).rotate().as_matrix(), &(-crm_mat(&w1, &um)), "M4");
        // M5 U×̃*F = (F×̄̃*U)^R̃ ; M6 F×̄̃*U = (U×̃*F)^R̃
        close(&uxs.mul_matrix(&fm), &fxb.mul_matrix(&um).rotate(), "M5");
        close(&fxb.mul_matrix(&um), &uxs.mul_matrix(&fm).rotate(), "M6");
        // M7 (λU)×̃ = λ(U×̃)
        let scaled: Vec<Motion> = u.iter().map(|x| *x * 2.5).collect();
        let twice = Tensor3::from_vec(ux.shape(), ux.as_slice().iter().map(|x| 2.5 * x).collect()).unwrap();
        close(&cross_motion_tensor(&scaled), &twice, "M7");
        // M8 U×̃V = −(V×̃U)^R̃
        close(&ux.mul_matrix(&vm), &neg(&cross_motion_tensor(&v).mul_matrix(&um).rotate()), "M8");
        // M9 (v×U)×̃ = v×·U×̃ − U×̃·v× ; M10 the same for ×*
        let vu: Vec<Motion> = u.iter().map(|x| w1.cross_motion(x)).collect();
        let crm = d6(&w1.cross_motion_matrix());
        close(&cross_motion_tensor(&vu), &sub(&Tensor3::left_mul(&crm, &ux), &ux.mul_matrix(&crm)), "M9");
        let crf = d6(&w1.cross_force_matrix());
        close(&cross_force_tensor(&vu), &sub(&Tensor3::left_mul(&crf, &uxs), &uxs.mul_matrix(&crf)), "M10");
        // M11 ((U×̃*f)^R̃)×̄̃* = U×̃*·(f×̄*) − (f×̄*)·U×̃
        let f1m = mat_f(&[f1]);
        let cols = uxs.mul_matrix(&f1m).rotate().as_matrix();
        let as_forces: Vec<Force> = (0..n).map(|k| Force::from_vector(&cols.column(k).fixed_rows::<6>(0).into_owned())).collect();
        let fb = d6(&f1.cross_bar_matrix());
        close(&cross_bar_tensor(&as_forces), &sub(&uxs.mul_matrix(&fb), &Tensor3::left_mul(&fb, &ux)), "M11");
        // M12 (U×̃*F)^T̃ = −Fᵀ(U×̃)
        close(&uxs.mul_matrix(&fm).transpose_pages(), &neg(&Tensor3::left_mul(&fm.transpose(), &ux)), "M12");
        // M13 Vᵀ(U×̃*F) = (V×̃U)^{R̃,T̃} F
        let vx = cross_motion_tensor(&v);
        close(&Tensor3::left_mul(&vm.transpose(), &uxs.mul_matrix(&fm)), &vx.mul_matrix(&um).rotate().transpose_pages().mul_matrix(&fm), "M13");
        // M14 v×*F = (F×̄̃*v)^R̃ ; M15 f×̄*U = (U×̃*f)^R̃
        close_m(&(d6(&w1.cross_force_matrix()) * &fm), &fxb.mul_matrix(&w1m).rotate().as_matrix(), "M14");
        close_m(&(fb.clone() * &um), &uxs.mul_matrix(&f1m).rotate().as_matrix(), "M15");
        // M16 Vᵀ(U×̃*F)^R̃ = [(V×̃U)^{R̃,T̃}F]^R̃ ; M17 = −[Uᵀ(V×̃*F)^R̃]^T̃
        let lhs = Tensor3::left_mul(&vm.transpose(), &uxs.mul_matrix(&fm).rotate());
        close(&lhs, &vx.mul_matrix(&um).rotate().transpose_pages().mul_matrix(&fm).rotate(), "M16");
        let vxs = cross_force_tensor(&v);
        close(&lhs, &neg(&Tensor3::left_mul(&um.transpose(), &vxs.mul_matrix(&fm).rotate()).transpose_pages()), "M17");
        // M18, M19: a left product commutes with R̃
        let inertia = d6(&inertia(&mut r).to_matrix());
        close(&Tensor3::left_mul(&inertia, &uxs.mul_matrix(&fm).rotate()), &Tensor3::left_mul(&inertia, &uxs.mul_matrix(&fm)).rotate(), "M18");
        close(&Tensor3::left_mul(&inertia, &ux.mul_matrix(&vm).rotate()), &Tensor3::left_mul(&inertia, &ux.mul_matrix(&vm)).rotate(), "M19");
        // M20 (A𝒴)^T̃ = 𝒴^T̃ Aᵀ
        let a = DMatrix::from_fn(5, 6, |i, j| (i as f64 - j as f64 * 0.3).sin());
        close(&Tensor3::left_mul(&a, &uxs).transpose_pages(), &uxs.transpose_pages().mul_matrix(&a.transpose()), "M20");
        // M21 Fᵀ(U×̃V) = −[Vᵀ(F×̄̃*U)^R̃]^T̃
        close(
            &Tensor3::left_mul(&fm.transpose(), &ux.mul_matrix(&vm)),
            &neg(&Tensor3::left_mul(&vm.transpose(), &fxb.mul_matrix(&um).rotate()).transpose_pages()),
            "M21",
        );
    }

    #[test]
    fn table_ii_identities_m22_to_m27() {
        let mut r = rng(12);
        let i6 = inertia(&mut r).to_matrix();
        let id = d6(&i6);
        let (u1, v1, w1) = (motion(&mut r), motion(&mut r), motion(&mut r));
        let (b_v, b_w, b_u) = (b_matrix(&i6, &v1), b_matrix(&i6, &w1), b_matrix(&i6, &u1));
        let (vv, wv, uv) = (v1.to_vector(), w1.to_vector(), u1.to_vector());
        // the Coriolis force of a rigid body
        assert!((b_v * vv - v1.cross_force(&Force::from_vector(&(i6 * vv))).to_vector()).norm() < TOL);
        // M22 B(I,v)ᵀw = −B(I,w)ᵀv ; M23 B(I,v)w = B(I,w)v − I(v×w) ; M24 uᵀ[B(I,v)w] = −vᵀ[B(I,u)w]
        assert!((b_v.transpose() * wv + b_w.transpose() * vv).norm() < TOL, "M22");
        assert!((b_v * wv - (b_w * vv - i6 * v1.cross_motion(&w1).to_vector())).norm() < TOL, "M23");
        assert!((uv.dot(&(b_v * wv)) + vv.dot(&(b_u * wv))).abs() < TOL, "M24");
        let (n, l, p) = (3, 2, 4);
        let (uu, vs, ws) = (motions(&mut r, n), motions(&mut r, l), motions(&mut r, p));
        let (um, vm, wm) = (mat_m(&uu), mat_m(&vs), mat_m(&ws));
        let (bv, bw, bu) = (b_tensor(&i6, &vs), b_tensor(&i6, &ws), b_tensor(&i6, &uu));
        // M25 ℬ(I,V)^T̃ W = −[ℬ(I,W)^T̃ V]^R̃
        close(&bv.transpose_pages().mul_matrix(&wm), &neg(&bw.transpose_pages().mul_matrix(&vm).rotate()), "M25");
        // M26 ℬ(I,V)W = [ℬ(I,W)V]^R̃ − I(V×̃)W
        let ivw = Tensor3::left_mul(&id, &cross_motion_tensor(&vs).mul_matrix(&wm));
        close(&bv.mul_matrix(&wm), &sub(&bw.mul_matrix(&vm).rotate(), &ivw), "M26");
        // M27 Uᵀ[ℬ(I,V)W]^R̃ = −[Vᵀ[ℬ(I,U)W]^R̃]^T̃
        let lhs = Tensor3::left_mul(&um.transpose(), &bv.mul_matrix(&wm).rotate());
        let rhs = Tensor3::left_mul(&vm.transpose(), &bu.mul_matrix(&wm).rotate()).transpose_pages();
        close(&lhs, &neg(&rhs), "M27");
    }

    #[test]
    fn transposes_and_products_follow_their_index_definitions() {
        let t = Tensor3::from_vec([2, 3, 4], (0..24).map(f64::from).collect()).unwrap();
        assert_eq!(t.transpose_pages()[[2, 1, 3]], t[[1, 2, 3]]);
        assert_eq!(t.rotate()[[1, 3, 2]], t[[1, 2, 3]]);
        let b = DMatrix::from_fn(3, 2, |i, j| (i + 2 * j) as f64);
        let z = t.mul_matrix(&b);
        assert_eq!(z[[1, 1, 2]], (0..3).map(|l| t[[1, l, 2]] * b[(l, 1)]).sum::<f64>());
        let c = DMatrix::from_fn(5, 2, |i, j| (i * j) as f64 + 1.0);
        let y = Tensor3::left_mul(&c, &t);
        assert_eq!(y[[4, 2, 3]], (0..2).map(|l| c[(4, l)] * t[[l, 2, 3]]).sum::<f64>());
        assert!(Tensor3::from_vec([2, 2, 2], vec![0.0; 7]).is_none());
    }
}
