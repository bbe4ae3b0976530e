//! First-order partial derivatives of forward dynamics, in one world-frame sweep.
//!
//! # Method
//! By the implicit function theorem on `rnea(q, v, q̈) = τ` (Carpentier & Mansard 2018,
//! eq. 7),
//! $$\frac{\partial \ddot q}{\partial q} = -M^{-1}\frac{\partial \tau}{\partial q}\Big|_{\ddot q},\quad
//!   \frac{\partial \ddot q}{\partial \dot q} = -M^{-1}\frac{\partial \tau}{\partial \dot q}\Big|_{\ddot q},\quad
//!   \frac{\partial \ddot q}{\partial \tau} = M^{-1}.$$
//! Everything is computed in three passes over the tree, all in the world frame (so that no
//! quantity is transformed on its way to the parent; Carpentier & Mansard 2018, §III, whose
//! `computeABADerivatives` fuses the passes in the same way):
//!
//! 1. forward: placements, joint columns `J_k = ⁰X_i S_k`, velocities `V_i`, `ψ_k`, `φ_k`,
//!    the velocity-product acceleration `c_i = V_i × (Σ_k J_k q̇_k)`, the world inertia `I_i`,
//!    the bias force `p_i = V_i ×* I_i V_i − ⁰X*_i f^ext_i` and `ℬ(I_i, V_i)` (the
//!    quantities of [`crate::rnea_derivatives`]' module documentation);
//! 2. backward: the articulated-body recursion (Featherstone 2008, Table 7.1) in the world
//!    frame, `U_i = I^A_i S̄_i`, `D_i = S̄_iᵀ U_i`, `u_i = τ_i − S̄_iᵀ p^A_i`,
//!    `I^A_λ += I^A_i − U_i D_i⁻¹ U_iᵀ`, `p^A_λ += p^A_i + I^a_i c_i + U_i D_i⁻¹ u_i`, sharing
//!    each factor `D_i⁻¹` with the backward step of M⁻¹
//!    ([`crate::minverse`], all `nv` unit torques as right-hand sides); and the subtree sums
//!    `I^C`, `ℬ^C`;
//! 3. forward: `A_i = A_λ + c_i + S̄_i q̈_i` with `q̈_i = D_i⁻¹(u_i − U_iᵀ(A_λ + c_i))` (the
//!    world at `−g`), the forward step of M⁻¹, `α_k`, and the subtree force
//!    `F^C_i = I^A_i A_i + p^A_i` (the force the joint transmits to the subtree, Featherstone
//!    2008 §7.2, so no separate backward sum of `F_i` is needed).
//!
//! Then the entries of `∂τ/∂q` and `∂τ/∂q̇` at `q̈` are formed by the pair loops of
//! [`crate::rnea_derivatives`] from these per-dof and per-subtree quantities, `M⁻¹` is
//! mirrored and multiplied into the two torque derivatives, skipping their structural zeros.

use crate::algorithms::aba::{mul_live, reduced_inertia};
use crate::algorithms::kinematics::placements_unchecked;
use crate::algorithms::minverse::{backward_step, forward_step, mirror_lower};
use crate::algorithms::rnea_derivatives::{add_to_parent, inertia_velocity_coupling, torque_derivatives};
use crate::check::{check_configuration, check_forces, check_tangent};
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::{Force, Motion};

/// The three first-order partials of forward dynamics, borrowed from the workspace.
#[derive(Debug)]
pub struct AbaDerivatives<'w> {
    /// `∂q̈/∂q` (nv, nv), along the manifold directions `q ⊕ δ e_k`.
    pub dddq_dq: &'w DMatrix<f64>,
    /// `∂q̈/∂q̇` (nv, nv).
    pub dddq_dv: &'w DMatrix<f64>,
    /// `∂q̈/∂τ = M(q)⁻¹` (nv, nv).
    pub dddq_dtau: &'w DMatrix<f64>,
}

/// Partial derivatives of `q̈ = aba(q, v, τ)` (module documentation):
/// $$\frac{\partial \ddot q}{\partial q} = -M^{-1}\frac{\partial \tau}{\partial q}\Big|_{\ddot q},\quad
///   \frac{\partial \ddot q}{\partial \dot q} = -M^{-1}\frac{\partial \tau}{\partial \dot q}\Big|_{\ddot q},\quad
///   \frac{\partial \ddot q}{\partial \tau} = M^{-1}$$
/// `q`: (nq,), `v`, `tau`: (nv,). Leaves `q̈` in `ws.ddq` and `∂τ/∂q`, `∂τ/∂q̇` at `q̈` in
/// `ws.derivatives.{dtau_dq, dtau_dv}` (not `M`: `dtau_da` is left as it was). Cost: three
/// O(n + nv·d) passes with M⁻¹ (O(n·nv)), and two products `M⁻¹·∂τ` that skip the structural
/// zeros of `∂τ` (O(nv²·d)). No allocation.
/// Checked against central differences of [`crate::aba`] in `tests::aba_derivatives_match_finite_differences`.
/// With `fext` (the wrenches of [`crate::aba`]), the same formulas with the `∂τ/∂q` of
/// [`crate::rnea_derivatives`] with `fext`, which includes the turning of the body-fixed
/// wrenches; checked against central differences in
/// `tests::external_force_derivatives_match_finite_differences`.
/// Errors: `NotPositiveDefinite` when a subtree has no inertia along a joint axis.
pub fn aba_derivatives<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64], tau: &[f64], fext: Option<&[Force]>) -> Result<AbaDerivatives<'w>> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, tau, "tau")?;
    if let Some(f) = fext {
        check_forces(model, f, "fext")?;
    }
    aba_derivatives_unchecked(model, ws, q, v, tau, fext)?;
    let d = &ws.derivatives;
    Ok(AbaDerivatives { dddq_dq: &d.dddq_dq, dddq_dv: &d.dddq_dv, dddq_dtau: &ws.mass_matrix_inv })
}

/// [`aba_derivatives`] without argument checks: `q̈` in `ws.ddq`, `M⁻¹` in
/// `ws.mass_matrix_inv`, `∂τ/∂q`, `∂τ/∂q̇` at `q̈` and `∂q̈/∂q`, `∂q̈/∂q̇` in
/// `ws.derivatives`.
pub(crate) fn aba_derivatives_unchecked(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], tau: &[f64], fext: Option<&[Force]>) -> Result<()> {
    kinematics_pass(model, ws, q, v, fext);
    articulated_pass(model, ws, tau)?;
    acceleration_pass(model, ws);
    mirror_lower(&mut ws.mass_matrix_inv);
    let d = &mut ws.derivatives;
    mul_by_tree_sparse_n(model, &ws.mass_matrix_inv, [&d.dtau_dq, &d.dtau_dv], -1.0, [&mut d.dddq_dq, &mut d.dddq_dv]);
    Ok(())
}

/// Pass 1 (module documentation). Fills `ws.placements`, `ws.derivatives.{columns, psi,
/// phi, velocities, composite_inertias, composite_b}` (the latter two per body, not yet
/// summed), `ws.bias_accelerations` (`c_i`), `ws.articulated_inertias` (`I_i`) and
/// `ws.bias_forces` (`p_i`), all in the world frame.
fn kinematics_pass(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], fext: Option<&[Force]>) {
    placements_unchecked(model, ws, q);
    let d = &mut ws.derivatives;
    for i in 0..model.nbodies() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        let o = &ws.placements[i];
        let vp = model.parents[i].map_or(Motion::zero(), |p| d.velocities[p]);
        let mut vj = Motion::zero();
        for k in iv..iv + j.nv() {
            let col = j.placed_subspace_column(k - iv, o);
            d.columns[k] = col;
            vj += col * v[k];
        }
        let vi = vp + vj;
        for k in iv..iv + j.nv() {
            d.psi[k] = vp.cross_motion(&d.columns[k]);
            d.phi[k] = vi.cross_motion(&d.columns[k]);
        }
        d.velocities[i] = vi;
        ws.bias_accelerations[i] = vi.cross_motion(&vj);
        let inertia = model.inertias[i].transformed(o);
        let im = inertia.to_matrix();
        let h = inertia.mul_motion(&vi);
        let mut p = vi.cross_force(&h);
        if let Some(f) = fext {
            p -= o.act_force(&f[i]);
        }
        ws.bias_forces[i] = p;
        ws.articulated_inertias[i] = im;
        d.composite_inertias[i] = im;
        d.composite_b[i] = inertia_velocity_coupling(&im, &vi, &h);
    }
}

/// Pass 2 (module documentation): leaves `I^A_i`, `p^A_i` (children reduced into them) in
/// `ws.articulated_inertias`, `ws.bias_forces`; `U_i`, `D_i⁻¹`, `u_i` in `ws.u`, `ws.d_inv`,
/// `ws.u_bias`; the subtree sums `I^C`, `ℬ^C`; and the backward half of M⁻¹.
fn articulated_pass(model: &Model, ws: &mut Workspace, tau: &[f64]) -> Result<()> {
    for i in (0..model.nbodies()).rev() {
        let (iv, nvi) = (model.idx_v[i], model.joints[i].nv());
        let parent = model.parents[i];
        if let Some(p) = parent {
            let d = &mut ws.derivatives;
            add_to_parent(&mut d.composite_inertias, i, p);
            add_to_parent(&mut d.composite_b, i, p);
        }
        backward_step(model, ws, i)?;
        let pa = ws.bias_forces[i];
        let mut u = [0.0; 6];
        for (k, uk) in u.iter_mut().take(nvi).enumerate() {
            *uk = tau[iv + k] - ws.derivatives.columns[iv + k].dot(&pa);
        }
        ws.u_bias[i] = u;
        if let Some(p) = parent {
            let ia = reduced_inertia(&ws.articulated_inertias[i], &ws.u[i], &ws.d_inv[i], nvi);
            let d_inv_u = mul_live(&ws.d_inv[i], &u, nvi);
            let mut f = pa.to_vector() + ia * ws.bias_accelerations[i].to_vector();
            for (k, x) in d_inv_u.iter().take(nvi).enumerate() {
                f += ws.u[i].column(k) * *x;
            }
            ws.articulated_inertias[p] += ia;
            ws.bias_forces[p] += Force::from_vector(&f);
        }
    }
    Ok(())
}

/// Pass 3 (module documentation): `q̈` into `ws.ddq`, `A_i` into
/// `ws.derivatives.accelerations`, `α`, `F^C` and the forward half of M⁻¹; then `∂τ/∂q`,
/// `∂τ/∂q̇`.
fn acceleration_pass(model: &Model, ws: &mut Workspace) {
    let minus_gravity = -model.gravity;
    for i in 0..model.nbodies() {
        let (iv, nvi) = (model.idx_v[i], model.joints[i].nv());
        let d = &mut ws.derivatives;
        let (vp, ap) = model.parents[i].map_or((Motion::zero(), minus_gravity), |p| (d.velocities[p], d.accelerations[p]));
        let biased = ap + ws.bias_accelerations[i];
        let bv = biased.to_vector();
        let mut rhs = ws.u_bias[i];
        for (k, x) in rhs.iter_mut().take(nvi).enumerate() {
            *x -= ws.u[i].column(k).dot(&bv);
        }
        let qdd = mul_live(&ws.d_inv[i], &rhs, nvi);
        ws.ddq[iv..iv + nvi].copy_from_slice(&qdd[..nvi]);
        let mut ai = biased;
        for k in 0..nvi {
            let col = d.columns[iv + k];
            ai += col * qdd[k];
            d.alpha[iv + k] = ap.cross_motion(&col) - d.psi[iv + k].cross_motion(&vp);
        }
        d.accelerations[i] = ai;
        d.composite_forces[i] = Force::from_vector(&(ws.articulated_inertias[i] * ai.to_vector() + ws.bias_forces[i].to_vector()));
        forward_step(model, ws, i);
    }
    torque_derivatives(model, &mut ws.derivatives, false);
}

/// `out = s · A · D` for a dense `A` and a `D` whose entry `(k, c)` can be non-zero only when
/// dofs `k` and `c` lie on one path to the root (the pattern of `∂τ/∂q`, `∂τ/∂q̇`): column
/// `c` of the result combines the columns of `A` at the dofs of the subtree of `c`'s body (a
/// contiguous range) and of its ancestors. No allocation (a dense `gemm` would allocate
/// packing buffers and multiply the structural zeros).
pub(crate) fn mul_by_tree_sparse(model: &Model, a: &DMatrix<f64>, d: &DMatrix<f64>, s: f64, out: &mut DMatrix<f64>) {
    mul_by_tree_sparse_n(model, a, [d], s, [out]);
}

/// [`mul_by_tree_sparse`] for `N` matrices `D` of that pattern at once, `out_m = s · A · D_m`:
/// the rows of a result column are formed in blocks of 8 (then 4, 2, 1 for the last rows)
/// held in registers while the path is walked, so every result entry is stored once and
/// every entry of `A` read is loaded once per block for all `N` products.
///
/// On a CPU with AVX2 and FMA (detected at run time, so the portable build uses them too) the
/// same loops are compiled for those units with fused multiply–adds: a 100-link chain's
/// product is O(nv³) and took three quarters of its ∂ABA at SSE2's width.
pub(crate) fn mul_by_tree_sparse_n<const N: usize>(model: &Model, a: &DMatrix<f64>, d: [&DMatrix<f64>; N], s: f64, out: [&mut DMatrix<f64>; N]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA, checked just above
        unsafe { tree_sparse_product_fma(model, a, d, s, out) };
        return;
    }
    tree_sparse_product::<N, false>(model, a, d, s, out);
}

/// [`tree_sparse_product`] compiled for AVX2 with fused multiply–adds.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tree_sparse_product_fma<const N: usize>(model: &Model, a: &DMatrix<f64>, d: [&DMatrix<f64>; N], s: f64, out: [&mut DMatrix<f64>; N]) {
    tree_sparse_product::<N, true>(model, a, d, s, out);
}

/// The loops of [`mul_by_tree_sparse_n`]; `FMA`: accumulate by fused multiply–adds (only where
/// the CPU has them: elsewhere `mul_add` is a library call).
#[inline(always)]
fn tree_sparse_product<const N: usize, const FMA: bool>(model: &Model, a: &DMatrix<f64>, d: [&DMatrix<f64>; N], s: f64, out: [&mut DMatrix<f64>; N]) {
    let nv = model.nv;
    let a = a.as_slice();
    let d = d.map(|m| m.as_slice());
    let mut out = out.map(|m| m.as_mut_slice());
    for body in 0..model.nbodies() {
        let first = model.idx_v[body];
        let path = Path { model, body, subtree: first..first + model.nv_subtree[body] };
        for c in first..first + model.joints[body].nv() {
            let d_c = d.map(|m| &m[c * nv..(c + 1) * nv]);
            let mut r0 = 0;
            // with fused multiply–adds, 16 rows: enough independent sums to cover their latency
            // (32 where the build's lanes are 512-bit wide: two sums of 8 per 16 rows are not)
            while FMA && cfg!(target_feature = "avx512f") && r0 + 32 <= nv {
                write_block(&mut out, c * nv + r0, s, path.sum::<N, 32, FMA>(a, &d_c, nv, r0));
                r0 += 32;
            }
            while FMA && r0 + 16 <= nv {
                write_block(&mut out, c * nv + r0, s, path.sum::<N, 16, FMA>(a, &d_c, nv, r0));
                r0 += 16;
            }
            while r0 + 8 <= nv {
                write_block(&mut out, c * nv + r0, s, path.sum::<N, 8, FMA>(a, &d_c, nv, r0));
                r0 += 8;
            }
            if r0 + 4 <= nv {
                write_block(&mut out, c * nv + r0, s, path.sum::<N, 4, FMA>(a, &d_c, nv, r0));
                r0 += 4;
            }
            if r0 + 2 <= nv {
                write_block(&mut out, c * nv + r0, s, path.sum::<N, 2, FMA>(a, &d_c, nv, r0));
                r0 += 2;
            }
            if r0 < nv {
                write_block(&mut out, c * nv + r0, s, path.sum::<N, 1, FMA>(a, &d_c, nv, r0));
            }
        }
    }
}

/// The dofs of [`mul_by_tree_sparse_n`]'s sum for the columns of `body`: its subtree's (a
/// contiguous range) and its ancestors'.
struct Path<'m> {
    model: &'m Model,
    body: usize,
    subtree: std::ops::Range<usize>,
}

impl Path<'_> {
    /// `Σ_k D_m[k, c] · A[r0..r0 + L, k]` over the dofs `k` of the path, for each `m`
    /// (`A` column-major with `nv` rows, `d_c[m]` column `c` of `D_m`).
    #[inline(always)]
    fn sum<const N: usize, const L: usize, const FMA: bool>(&self, a: &[f64], d_c: &[&[f64]; N], nv: usize, r0: usize) -> [[f64; L]; N] {
        let m = self.model;
        let mut acc = [[0.0; L]; N];
        let (mut ks, mut up) = (self.subtree.clone(), m.parents[self.body]);
        loop {
            for k in ks {
                let col: &[f64; L] = a[k * nv + r0..k * nv + r0 + L].try_into().expect("L rows");
                for (acc, d) in acc.iter_mut().zip(d_c) {
                    let w = d[k];
                    for (x, y) in acc.iter_mut().zip(col) {
                        *x = if FMA { w.mul_add(*y, *x) } else { *x + w * y };
                    }
                }
            }
            let Some(p) = up else { break };
            (ks, up) = (m.idx_v[p]..m.idx_v[p] + m.joints[p].nv(), m.parents[p]);
        }
        acc
    }
}

/// `out_m[at..at + L] = s · acc_m`.
#[inline(always)]
fn write_block<const N: usize, const L: usize>(out: &mut [&mut [f64]; N], at: usize, s: f64, acc: [[f64; L]; N]) {
    for (o, x) in out.iter_mut().zip(&acc) {
        for (o, x) in o[at..at + L].iter_mut().zip(x) {
            *o = s * x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::random_tree;
    use crate::Joint;

    /// The tree-sparse product equals the dense `s·A·D` on a branched tree of every joint kind
    /// (D: `∂τ/∂q`, whose structural zeros the product skips), in both compilations: the plain
    /// one and, where the CPU has them, AVX2 with fused multiply–adds (the two differ only by
    /// rounding: asserted to 1e-12 relative to the largest entry). Run in a
    /// `-C target-cpu=native` build on a CPU with AVX-512 it covers the 32-row blocks too.
    #[test]
    fn tree_sparse_product_is_the_dense_product_in_both_compilations() {
        let model = random_tree(24, 0, &Joint::examples());
        let mut ws = Workspace::new(&model);
        let nv = model.nv;
        // one block of every height: 32 rows (512-bit builds) and the 16-, 8-, 4-, 2-, 1-row tails
        assert_eq!(nv, 63, "32 + 16 + 8 + 4 + 2 + 1 rows");
        let q = crate::neutral(&model);
        let v: Vec<f64> = (0..nv).map(|i| (i as f64 * 0.7).sin()).collect();
        let d = crate::rnea_derivatives(&model, &mut ws, &q, &v, &v, None).unwrap().dtau_dq.clone();
        let a = DMatrix::from_fn(nv, nv, |i, j| ((i * 5 + j * 3) % 7) as f64 - 3.0 + 0.1 * i as f64);
        let dense = &a * &d * -1.5;
        let scale = dense.amax();
        let mut plain = DMatrix::zeros(nv, nv);
        tree_sparse_product::<1, false>(&model, &a, [&d], -1.5, [&mut plain]);
        assert!((&plain - &dense).amax() <= 1e-12 * scale, "plain: {}", (&plain - &dense).amax());
        let mut dispatched = DMatrix::zeros(nv, nv);
        mul_by_tree_sparse(&model, &a, &d, -1.5, &mut dispatched);
        assert!((&dispatched - &dense).amax() <= 1e-12 * scale, "dispatched: {}", (&dispatched - &dense).amax());
    }
}
