//! Inverse of the joint-space inertia matrix by the articulated-body recursion.

use crate::algorithms::aba::{factor_joint, mul_live, reduced_inertia};
use crate::algorithms::kinematics::parent_placements_unchecked;
use crate::check::check_configuration;
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::{DMatrix, Vector6};
use vidyn_spatial::{Force, Motion};

/// `M(q)⁻¹` without forming or factoring `M` (Carpentier & Mansard 2018, §III-C): ABA with
/// `v = 0`, no gravity and all `nv` unit torques as simultaneous right-hand sides.
///
/// Backward, per body i with subtree columns `R_i`: `M⁻¹[i, R_i] = D_i⁻¹(E_i − S_iᵀ F_i)`,
/// `F_λ[:, R_i] += λX*_i (F_i + U_i M⁻¹[i, R_i])`, `I^A_λ += λX*_i (I^A_i − U_i D_i⁻¹ U_iᵀ) iX_λ`.
/// Forward, with columns `C_i = idx_v[i]..nv`: `M⁻¹[i, C_i] −= D_i⁻¹ U_iᵀ iX_λ P_λ[:, C_i]`,
/// `P_i[:, C_i] = iX_λ P_λ[:, C_i] + S_i M⁻¹[i, C_i]`; the lower triangle is mirrored.
/// `q`: (nq,); returns M⁻¹ (nv, nv), full and symmetric. O(n·nv), no allocation.
/// `crba(q) · minverse(q) = I`; checked by `tests::minverse_inverts_crba`.
pub fn minverse<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    parent_placements_unchecked(model, ws, q);
    let (n, nv) = (model.nbodies(), model.nv);
    for i in 0..n {
        ws.articulated_inertias[i] = model.inertias[i].to_matrix();
        let cols = model.idx_v[i]..model.idx_v[i] + model.nv_subtree[i];
        ws.minv_forces[i].columns_range_mut(cols).fill(0.0);
    }
    for i in (0..n).rev() {
        let j = model.joints[i];
        let (iv, nvi) = (model.idx_v[i], j.nv());
        factor_joint(model, ws, i)?;
        let end = iv + model.nv_subtree[i];
        for c in iv..end {
            let f = column6(&ws.minv_forces[i], c);
            let mut sf = [0.0; 6];
            j.project_force(&Force::from_vector(&f), &mut sf);
            for k in 0..nvi {
                sf[k] = if c == iv + k { 1.0 } else { 0.0 } - sf[k];
            }
            let row = mul_live(&ws.d_inv[i], &sf, nvi);
            for k in 0..nvi {
                ws.mass_matrix_inv[(iv + k, c)] = row[k];
            }
            if let Some(p) = model.parents[i] {
                let mut pa = f;
                for k in 0..nvi {
                    pa += ws.u[i].column(k) * row[k];
                }
                let moved = ws.parent_placements[i].act_force(&Force::from_vector(&pa)).to_vector();
                let mut dst = ws.minv_forces[p].fixed_view_mut::<6, 1>(0, c);
                dst += moved;
            }
        }
        for c in end..nv {
            for k in 0..nvi {
                ws.mass_matrix_inv[(iv + k, c)] = 0.0;
            }
        }
        if let Some(p) = model.parents[i] {
            let ia = reduced_inertia(ws, i, nvi);
            ws.articulated_inertias[p] += ws.parent_placements[i].act_inertia_matrix(&ia);
        }
    }
    for i in 0..n {
        let j = model.joints[i];
        let (iv, nvi) = (model.idx_v[i], j.nv());
        for c in iv..nv {
            let ap = match model.parents[i] {
                Some(p) => ws.parent_placements[i].inv_act_motion(&Motion::from_vector(&column6(&ws.minv_accelerations[p], c))),
                None => Motion::zero(),
            };
            let mut ut_a = [0.0; 6];
            let apv = ap.to_vector();
            for (k, x) in ut_a.iter_mut().take(nvi).enumerate() {
                *x = ws.u[i].column(k).dot(&apv);
            }
            let correction = mul_live(&ws.d_inv[i], &ut_a, nvi);
            let mut row = [0.0; 6];
            for k in 0..nvi {
                ws.mass_matrix_inv[(iv + k, c)] -= correction[k];
                row[k] = ws.mass_matrix_inv[(iv + k, c)];
            }
            let a = ap + j.motion(&row[..nvi]);
            ws.minv_accelerations[i].fixed_view_mut::<6, 1>(0, c).copy_from(&a.to_vector());
        }
    }
    for c in 0..nv {
        for r in (c + 1)..nv {
            ws.mass_matrix_inv[(r, c)] = ws.mass_matrix_inv[(c, r)];
        }
    }
    Ok(&ws.mass_matrix_inv)
}

#[inline]
fn column6(m: &DMatrix<f64>, c: usize) -> Vector6<f64> {
    m.fixed_view::<6, 1>(0, c).into_owned()
}
