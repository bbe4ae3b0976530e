//! Forward dynamics by the articulated-body algorithm.

use crate::check::{check_configuration, check_tangent};
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::{Matrix6, Vector6};
use vidyn_spatial::{Force, Motion, Se3};

/// Forward dynamics (Featherstone 2008, Table 7.1), body frames:
/// $$\ddot q = M(q)^{-1}\,(\tau - C(q,\dot q)\dot q - g(q))$$
/// Pass 1 (forward): `v_i`, `c_i = v_i ×ₘ S_i q̇_i`, `I^A_i = I_i`, `p_i = v_i ×* I_i v_i`.
/// Pass 2 (backward): `U_i = I^A_i S_i`, `D_i = S_iᵀ U_i`, `u_i = τ_i − S_iᵀ p_i`;
/// `I^a = I^A_i − U_i D_i⁻¹ U_iᵀ`, `p^a = p_i + I^a c_i + U_i D_i⁻¹ u_i`, accumulated into the
/// parent through `λX*_i (·) iX_λ`. Pass 3 (forward): `a'_i = iX_λ a_λ + c_i` (world at `−g`),
/// `q̈_i = D_i⁻¹ (u_i − U_iᵀ a'_i)`, `a_i = a'_i + S_i q̈_i`.
/// `q`: (nq,), `v`, `tau`: (nv,); returns q̈ (nv,). O(n), no allocation.
/// Inverse of RNEA: `rnea(q, v, aba(q, v, τ)) = τ`; checked by `tests::aba_inverts_rnea`.
/// Errors: `NotPositiveDefinite` when a subtree has no inertia along a joint axis.
pub fn aba<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64], tau: &[f64]) -> Result<&'w [f64]> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, tau, "tau")?;
    let n = model.nbodies();
    for i in 0..n {
        let j = &model.joints[i];
        let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
        let li = model.joint_placements[i] * j.transform(&q[iq..iq + j.nq()]);
        ws.parent_placements[i] = li;
        let vj = j.motion(&v[iv..iv + j.nv()]);
        let (op, vp) = match model.parents[i] {
            Some(p) => (ws.placements[p] * li, li.inv_act_motion(&ws.velocities[p])),
            None => (li, Motion::zero()),
        };
        ws.placements[i] = op;
        let vi = vp + vj;
        ws.velocities[i] = vi;
        ws.bias_accelerations[i] = vi.cross_motion(&vj);
        let inertia = &model.inertias[i];
        ws.articulated_inertias[i] = inertia.to_matrix();
        ws.bias_forces[i] = vi.cross_force(&inertia.mul_motion(&vi));
    }
    for i in (0..n).rev() {
        let j = &model.joints[i];
        let (iv, nvi) = (model.idx_v[i], j.nv());
        factor_joint(model, ws, i)?;
        let mut sf = [0.0; 6];
        j.project_force(&ws.bias_forces[i], &mut sf);
        let mut u = [0.0; 6];
        for k in 0..nvi {
            u[k] = tau[iv + k] - sf[k];
        }
        ws.u_bias[i] = u;
        if let Some(p) = model.parents[i] {
            let (ia, d_inv_u) = reduced_inertia(ws, i, nvi, &u);
            let c = ws.bias_accelerations[i].to_vector();
            let pa = ws.bias_forces[i].to_vector() + ia * c + ws.u[i] * d_inv_u;
            let li = ws.parent_placements[i];
            ws.articulated_inertias[p] += congruence(&li, &ia);
            let f = li.act_force(&Force::from_vector(&pa));
            ws.bias_forces[p] += f;
        }
    }
    let minus_gravity = -model.gravity;
    for i in 0..n {
        let j = &model.joints[i];
        let (iv, nvi) = (model.idx_v[i], j.nv());
        let li = &ws.parent_placements[i];
        let ap = match model.parents[i] {
            Some(p) => li.inv_act_motion(&ws.accelerations[p]),
            None => li.inv_act_motion(&minus_gravity),
        } + ws.bias_accelerations[i];
        let ut_a = ws.u[i].transpose() * ap.to_vector();
        let mut rhs = Vector6::zeros();
        for k in 0..nvi {
            rhs[k] = ws.u_bias[i][k] - ut_a[k];
        }
        let qdd = ws.d_inv[i] * rhs;
        ws.ddq[iv..iv + nvi].copy_from_slice(&qdd.as_slice()[..nvi]);
        ws.accelerations[i] = ap + j.motion(&qdd.as_slice()[..nvi]);
    }
    Ok(&ws.ddq)
}

/// `U_i = I^A_i S_i` and `D_i⁻¹ = (S_iᵀ U_i)⁻¹` for body `i` (shared with Minverse).
pub(crate) fn factor_joint(model: &Model, ws: &mut Workspace, i: usize) -> Result<()> {
    let j = &model.joints[i];
    let nvi = j.nv();
    let u = j.mul_subspace(&ws.articulated_inertias[i]);
    let mut d = Matrix6::identity();
    for c in 0..nvi {
        let mut col = [0.0; 6];
        j.project_force(&Force::from_vector(&u.column(c).into_owned()), &mut col);
        for r in 0..nvi {
            d[(r, c)] = col[r];
        }
    }
    let scale = ws.articulated_inertias[i].abs().max().max(f64::MIN_POSITIVE);
    let chol = d.cholesky().filter(|c| c.l().diagonal().iter().take(nvi).all(|x| x * x > 1e-14 * scale));
    let d_inv = chol.ok_or_else(|| RbdError::NotPositiveDefinite { joint: model.joint_names[i].clone() })?.inverse();
    let mut out = Matrix6::zeros();
    out.view_mut((0, 0), (nvi, nvi)).copy_from(&d_inv.view((0, 0), (nvi, nvi)));
    ws.u[i] = u;
    ws.d_inv[i] = out;
    Ok(())
}

/// `(I^A − U D⁻¹ Uᵀ, D⁻¹ u)` for body `i`.
fn reduced_inertia(ws: &Workspace, i: usize, nvi: usize, u: &[f64; 6]) -> (Matrix6<f64>, Vector6<f64>) {
    let ud = ws.u[i] * ws.d_inv[i];
    let ia = ws.articulated_inertias[i] - ud * ws.u[i].transpose();
    let mut uv = Vector6::zeros();
    uv.as_mut_slice()[..nvi].copy_from_slice(&u[..nvi]);
    (ia, ws.d_inv[i] * uv)
}

/// `λX*_i · I · iX_λ`: a body-frame inertia-like 6×6 matrix expressed in the parent frame.
#[inline]
pub(crate) fn congruence(li: &Se3, ia: &Matrix6<f64>) -> Matrix6<f64> {
    let xf = li.dual_action_matrix();
    xf * ia * xf.transpose()
}
