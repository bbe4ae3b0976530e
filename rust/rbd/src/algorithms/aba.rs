//! Forward dynamics by the articulated-body algorithm.

use crate::algorithms::external_forces::external_joint_torques_unchecked;
use crate::algorithms::kinematics::joint_sin_cos;
use crate::check::{check_configuration, check_forces, check_tangent};
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::Matrix6;
use vidyn_spatial::Force;

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
/// Fills `parent_placements`, `velocities`, `accelerations` (with `−g`), the ABA fields.
///
/// `fext`: optional external wrenches, `(nbodies,)` (convention in
/// [`crate::algorithms::external_forces`], Pinocchio's `fext`); then
/// $$\ddot q = M(q)^{-1}\Big(\tau + \sum_i J_i(q)^T f^{ext}_i - C(q,\dot q)\dot q - g(q)\Big),$$
/// computed as above with the generalised force `τ + Σ Jᵢᵀ fᵢ` of the wrenches (one extra O(n)
/// backward pass, [`crate::external_joint_torques`]); equals Pinocchio's
/// `aba(model, data, q, v, tau, fext)` and inverts [`crate::rnea`] with `fext`. Also overwrites
/// `ws.forces` (subtree sums of the wrenches) and `ws.scratch_nv`.
pub fn aba<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64], tau: &[f64], fext: Option<&[Force]>) -> Result<&'w [f64]> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, tau, "tau")?;
    let Some(fext) = fext else {
        passes(model, ws, q, v, tau, &-model.gravity)?;
        return Ok(&ws.ddq);
    };
    check_forces(model, fext, "fext")?;
    let mut effective = std::mem::take(&mut ws.scratch_nv);
    external_joint_torques_unchecked(model, ws, q, fext, &mut effective);
    for (e, t) in effective.iter_mut().zip(tau) {
        *e += t;
    }
    let result = passes(model, ws, q, v, &effective, &-model.gravity);
    ws.scratch_nv = effective;
    result?;
    Ok(&ws.ddq)
}

/// `x = M(q)⁻¹ b` in O(n): the articulated-body passes of [`aba`] at rest without gravity
/// (`q̇ = 0`, `g = 0`, `τ = b`), Featherstone 2008 §7.3. `q`: (nq,), `b`: (nv,); returns `x`
/// (nv,). The O(n) alternative to [`crate::minverse`] when one product is wanted (the kinetic
/// energy `½ pᵀ M⁻¹ p` of a momentum, for instance). Equals `minverse(q) · b` to round-off;
/// checked by `tests::mass_solve_matches_minverse`. Fills the fields [`aba`] fills.
pub fn mass_solve<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], b: &[f64]) -> Result<&'w [f64]> {
    check_configuration(model, q)?;
    check_tangent(model, b, "b")?;
    let mut rest = std::mem::take(&mut ws.scratch_nv);
    rest.fill(0.0);
    let result = passes(model, ws, q, &rest, b, &vidyn_spatial::Motion::zero());
    ws.scratch_nv = rest;
    result?;
    Ok(&ws.ddq)
}

/// The three passes of [`aba`] with the world accelerating at `minus_gravity` (inputs checked).
#[inline]
fn passes(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], tau: &[f64], minus_gravity: &vidyn_spatial::Motion) -> Result<()> {
    let n = model.nbodies();
    joint_sin_cos(model, ws, q);
    for i in 0..n {
        let j = &model.joints[i];
        let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
        let li = j.placed_transform_sin_cos(&model.joint_placements[i], &q[iq..iq + j.nq()], ws.joint_sin_cos[i]);
        ws.parent_placements[i] = li;
        let vj = j.motion(&v[iv..iv + j.nv()]);
        let vi = match model.parents[i] {
            Some(p) => li.inv_act_motion(&ws.velocities[p]) + vj,
            None => vj,
        };
        ws.velocities[i] = vi;
        ws.bias_accelerations[i] = vi.cross_motion(&vj);
        let inertia = &model.inertias[i];
        ws.articulated_inertias[i] = inertia.to_matrix();
        ws.bias_forces[i] = vi.cross_force(&inertia.mul_motion(&vi));
    }
    for i in (0..n).rev() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        factor_joint(model, ws, i)?;
        let mut u = [0.0; 6];
        j.project_force(&ws.bias_forces[i], &mut u);
        for (k, uk) in u.iter_mut().take(j.nv()).enumerate() {
            *uk = tau[iv + k] - *uk;
        }
        ws.u_bias[i] = u;
        if let Some(p) = model.parents[i] {
            let ia = reduced_inertia(&ws.articulated_inertias[i], &ws.u[i], &ws.d_inv[i], j.nv());
            let c = ws.bias_accelerations[i].to_vector();
            let d_inv_u = mul_live(&ws.d_inv[i], &u, j.nv());
            let mut pa = ws.bias_forces[i].to_vector() + ia * c;
            for (k, x) in d_inv_u.iter().take(j.nv()).enumerate() {
                pa += ws.u[i].column(k) * *x;
            }
            let li = ws.parent_placements[i];
            ws.articulated_inertias[p] += li.act_inertia_matrix(&ia);
            ws.bias_forces[p] += li.act_force(&Force::from_vector(&pa));
        }
    }
    for i in 0..n {
        let j = &model.joints[i];
        let (iv, nvi) = (model.idx_v[i], j.nv());
        let li = &ws.parent_placements[i];
        let ap = match model.parents[i] {
            Some(p) => li.inv_act_motion(&ws.accelerations[p]),
            None => li.inv_act_motion(minus_gravity),
        } + ws.bias_accelerations[i];
        let apv = ap.to_vector();
        let mut rhs = ws.u_bias[i];
        for (k, x) in rhs.iter_mut().take(nvi).enumerate() {
            *x -= ws.u[i].column(k).dot(&apv);
        }
        let qdd = mul_live(&ws.d_inv[i], &rhs, nvi);
        ws.ddq[iv..iv + nvi].copy_from_slice(&qdd[..nvi]);
        ws.accelerations[i] = ap + j.motion(&qdd[..nvi]);
    }
    Ok(())
}

/// `U_i = I^A_i S_i` and `D_i⁻¹ = (S_iᵀ U_i)⁻¹` for body `i` (shared with Minverse).
/// Columns of `U_i` and rows/columns of `D_i⁻¹` beyond `nv_i` are zero.
pub(crate) fn factor_joint(model: &Model, ws: &mut Workspace, i: usize) -> Result<()> {
    let j = &model.joints[i];
    let nvi = j.nv();
    let u = j.mul_subspace(&ws.articulated_inertias[i]);
    // a pivot below 1e-12 of the largest inertia entry means a massless subtree
    let tiny = 1e-12 * ws.articulated_inertias[i].amax();
    let singular = || RbdError::NotPositiveDefinite { joint: model.joint_names[i].clone() };
    let mut d_inv = Matrix6::zeros();
    if nvi == 1 {
        let mut d = [0.0];
        j.project_force(&Force::from_vector(&u.column(0).into_owned()), &mut d);
        if d[0].is_nan() || d[0] <= tiny {
            return Err(singular());
        }
        d_inv[(0, 0)] = 1.0 / d[0];
    } else {
        let mut d = Matrix6::identity();
        for c in 0..nvi {
            let mut col = [0.0; 6];
            j.project_force(&Force::from_vector(&u.column(c).into_owned()), &mut col);
            for r in 0..nvi {
                d[(r, c)] = col[r];
            }
        }
        let chol = d.cholesky().filter(|c| c.l().diagonal().iter().take(nvi).all(|x| x * x > tiny)).ok_or_else(singular)?;
        let inv = chol.inverse();
        d_inv.view_mut((0, 0), (nvi, nvi)).copy_from(&inv.view((0, 0), (nvi, nvi)));
    }
    ws.u[i] = u;
    ws.d_inv[i] = d_inv;
    Ok(())
}

/// `I^a = I^A − U D⁻¹ Uᵀ`, summing only a joint's `nvi` live columns (ABA, Minverse); plain
/// loops over the column arrays.
#[inline]
pub(crate) fn reduced_inertia(ia: &Matrix6<f64>, u: &Matrix6<f64>, d_inv: &Matrix6<f64>, nvi: usize) -> Matrix6<f64> {
    let mut out = *ia;
    for k in 0..nvi {
        // w = U D⁻¹[:, k]
        let mut w = [0.0; 6];
        for l in 0..nvi {
            let dlk = d_inv[(l, k)];
            for (x, ul) in w.iter_mut().zip(&u.data.0[l]) {
                *x += ul * dlk;
            }
        }
        for (col, ukc) in out.data.0.iter_mut().zip(&u.data.0[k]) {
            for (o, wr) in col.iter_mut().zip(&w) {
                *o -= wr * ukc;
            }
        }
    }
    out
}

/// `D⁻¹ x` restricted to a joint's `nvi` live rows and columns (1 product for a 1-dof joint
/// instead of 36).
#[inline]
pub(crate) fn mul_live(d_inv: &Matrix6<f64>, x: &[f64; 6], nvi: usize) -> [f64; 6] {
    let mut out = [0.0; 6];
    for (r, o) in out.iter_mut().take(nvi).enumerate() {
        *o = (0..nvi).map(|k| d_inv[(r, k)] * x[k]).sum();
    }
    out
}
