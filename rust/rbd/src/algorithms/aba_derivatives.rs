//! First-order partial derivatives of forward dynamics.

use crate::algorithms::rnea_derivatives::rnea_derivatives_unchecked;
use crate::algorithms::{aba::aba, minverse::minverse};
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::Force;

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

/// Partial derivatives of `q̈ = aba(q, v, τ)` by differentiating `rnea(q, v, q̈) = τ`
/// (implicit function theorem; Carpentier & Mansard 2018, eq. 7):
/// $$\frac{\partial \ddot q}{\partial q} = -M^{-1}\frac{\partial \tau}{\partial q}\Big|_{\ddot q},\quad
///   \frac{\partial \ddot q}{\partial \dot q} = -M^{-1}\frac{\partial \tau}{\partial \dot q}\Big|_{\ddot q},\quad
///   \frac{\partial \ddot q}{\partial \tau} = M^{-1}$$
/// `q`: (nq,), `v`, `tau`: (nv,). Leaves `q̈` in `ws.ddq`. Cost: ABA + RNEA derivatives +
/// M⁻¹ (O(n·nv)) + two products `M⁻¹·∂τ` that skip the structural zeros of `∂τ`
/// (O(nv²·d)). No allocation.
/// Checked against central differences of [`crate::aba`] in `tests::aba_derivatives_match_finite_differences`.
/// With `fext` (the wrenches of [`crate::aba`]), the same formulas with the `∂τ/∂q` of
/// [`crate::rnea_derivatives`] with `fext`, which includes the turning of the body-fixed
/// wrenches; checked against central differences in
/// `tests::external_force_derivatives_match_finite_differences`.
pub fn aba_derivatives<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64], tau: &[f64], fext: Option<&[Force]>) -> Result<AbaDerivatives<'w>> {
    aba(model, ws, q, v, tau, fext)?;
    aba_derivatives_after_aba(model, ws, q, v, fext)?;
    let d = &ws.derivatives;
    Ok(AbaDerivatives { dddq_dq: &d.dddq_dq, dddq_dv: &d.dddq_dv, dddq_dtau: &ws.mass_matrix_inv })
}

/// The derivatives once `ws.ddq` holds `q̈` (inputs already checked): RNEA derivatives at
/// `q̈`, `M⁻¹`, and the two products into `ws.derivatives.{dddq_dq, dddq_dv}`.
pub(crate) fn aba_derivatives_after_aba(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], fext: Option<&[Force]>) -> Result<()> {
    let ddq = std::mem::take(&mut ws.ddq);
    rnea_derivatives_unchecked(model, ws, q, v, &ddq, fext);
    ws.ddq = ddq;
    minverse(model, ws, q)?;
    let d = &mut ws.derivatives;
    mul_by_tree_sparse(model, &ws.mass_matrix_inv, &d.dtau_dq, -1.0, &mut d.dddq_dq);
    mul_by_tree_sparse(model, &ws.mass_matrix_inv, &d.dtau_dv, -1.0, &mut d.dddq_dv);
    Ok(())
}

/// `out = s · A · D` for a dense `A` and a `D` whose entry `(k, c)` can be non-zero only when
/// dofs `k` and `c` lie on one path to the root (the pattern of `∂τ/∂q`, `∂τ/∂q̇`): column
/// `c` reads the ancestors of its body and its subtree (a contiguous range). Column-major
/// axpy loops, no allocation (a dense `gemm` would allocate packing buffers).
pub(crate) fn mul_by_tree_sparse(model: &Model, a: &DMatrix<f64>, d: &DMatrix<f64>, s: f64, out: &mut DMatrix<f64>) {
    out.as_mut_slice().fill(0.0);
    for body in 0..model.nbodies() {
        let first = model.idx_v[body];
        for c in first..first + model.joints[body].nv() {
            let mut axpy = |k: usize| {
                let w = s * d[(k, c)];
                if w != 0.0 {
                    out.column_mut(c).axpy(w, &a.column(k), 1.0);
                }
            };
            for k in first..first + model.nv_subtree[body] {
                axpy(k);
            }
            let mut up = model.parents[body];
            while let Some(p) = up {
                for k in model.idx_v[p]..model.idx_v[p] + model.joints[p].nv() {
                    axpy(k);
                }
                up = model.parents[p];
            }
        }
    }
}
