//! Inverse of the joint-space inertia matrix by the articulated-body recursion.

use crate::algorithms::aba::{mul_live, reduced_inertia};
use crate::algorithms::kinematics::placements_unchecked;
use crate::check::check_configuration;
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::{DMatrix, Matrix6};

/// `M(q)⁻¹` without forming or factoring `M` (Carpentier & Mansard 2018, §III-C): ABA with
/// `v = 0`, no gravity and all `nv` unit torques as simultaneous right-hand sides, written in
/// the world frame so that passing a column to the parent needs no transform (every spatial
/// quantity below is a world-frame 6-vector; `S̄_i = ⁰X_i S_i`).
///
/// Backward, per body i with subtree columns `R_i`: `U_i = I^A_i S̄_i`, `D_i = S̄_iᵀ U_i`,
/// `M⁻¹[i, R_i] = D_i⁻¹(E_i − S̄_iᵀ F_i)`, `F_λ[:, R_i] = F_i + U_i M⁻¹[i, R_i]` (`F_i` is zero
/// at `i`'s own columns),
/// `I^A_λ += I^A_i − U_i D_i⁻¹ U_iᵀ`.
/// Forward, with columns `C_i = idx_v[i]..nv`: `M⁻¹[i, C_i] −= D_i⁻¹ U_iᵀ P_λ[:, C_i]`,
/// `P_i[:, C_i] = P_λ[:, C_i] + S̄_i M⁻¹[i, C_i]`; the lower triangle is mirrored.
/// About 40 flops per (body, column) pair for a 1-dof joint. `q`: (nq,); returns M⁻¹
/// (nv, nv), full and symmetric. O(n·nv), no allocation.
/// `crba(q) · minverse(q) = I`; checked by `tests::minverse_inverts_crba`.
/// Errors: `NotPositiveDefinite` when a subtree has no inertia along a joint axis.
pub fn minverse<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    placements_unchecked(model, ws, q);
    let n = model.nbodies();
    for i in 0..n {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        for k in 0..j.nv() {
            ws.derivatives.columns[iv + k] = ws.placements[i].act_motion(&j.subspace_column(k));
        }
        ws.articulated_inertias[i] = model.inertias[i].transformed(&ws.placements[i]).to_matrix();
    }
    for i in (0..n).rev() {
        backward_step(model, ws, i)?;
        if let Some(p) = model.parents[i] {
            let ia = reduced_inertia(&ws.articulated_inertias[i], &ws.u[i], &ws.d_inv[i], model.joints[i].nv());
            ws.articulated_inertias[p] += ia;
        }
    }
    for i in 0..n {
        forward_step(model, ws, i);
    }
    mirror_upper(&mut ws.mass_matrix_inv);
    Ok(&ws.mass_matrix_inv)
}

/// The backward step of [`minverse`] at body `i`, once `ws.articulated_inertias[i]` holds
/// the world-frame `I^A_i` (its children reduced into it) and `ws.derivatives.columns` the
/// world-frame `S̄`: factors the joint (`ws.u[i]`, `ws.d_inv[i]`), writes the rows
/// `M⁻¹[i, R_i]` (and zeros right of `R_i`, so that the upper triangle is complete after
/// [`forward_step`]) and the parent's force columns `F_λ[:, R_i] = F_i + U_i M⁻¹[i, R_i]`.
/// `F_i` is read only at the columns of `i`'s descendants, written by its children (each
/// column by one child); at `i`'s own columns it is zero. The caller reduces `I^A_i` into
/// the parent. Shared with [`crate::aba_derivatives`].
pub(crate) fn backward_step(model: &Model, ws: &mut Workspace, i: usize) -> Result<()> {
    let (iv, nvi, nv) = (model.idx_v[i], model.joints[i].nv(), model.nv);
    let columns = &ws.derivatives.columns;
    let mut s = Matrix6::zeros();
    for k in 0..nvi {
        s.set_column(k, &columns[iv + k].to_vector());
    }
    let (u, d_inv) = factor_world(&ws.articulated_inertias[i], &s, nvi).ok_or_else(|| RbdError::NotPositiveDefinite { joint: model.joint_names[i].clone() })?;
    // Column-major raw storage: entry (r, c) of an (rows × cols) matrix is at c·rows + r.
    let minv = ws.mass_matrix_inv.as_mut_slice();
    let end = iv + model.nv_subtree[i];
    let (lower, upper) = ws.minv_forces.split_at_mut(i);
    let f_i = upper[0].as_slice();
    let mut f_parent = model.parents[i].map(|p| lower[p].as_mut_slice());
    for c in iv..end {
        let own = c < iv + nvi;
        let f: [f64; 6] = if own { [0.0; 6] } else { f_i[6 * c..6 * c + 6].try_into().expect("6 entries") };
        let mut rhs = [0.0; 6];
        for k in 0..nvi {
            let sf: f64 = (0..6).map(|r| s[(r, k)] * f[r]).sum();
            rhs[k] = if c == iv + k { 1.0 } else { 0.0 } - sf;
        }
        let row = mul_live(&d_inv, &rhs, nvi);
        for k in 0..nvi {
            minv[c * nv + iv + k] = row[k];
        }
        if let Some(fp) = f_parent.as_deref_mut() {
            for r in 0..6 {
                let mut x = f[r];
                for k in 0..nvi {
                    x += u[(r, k)] * row[k];
                }
                fp[6 * c + r] = x;
            }
        }
    }
    for c in end..nv {
        for k in 0..nvi {
            minv[c * nv + iv + k] = 0.0;
        }
    }
    ws.u[i] = u;
    ws.d_inv[i] = d_inv;
    Ok(())
}

/// The forward step of [`minverse`] at body `i` (after every [`backward_step`]): with the
/// parent's acceleration columns `P_λ`, `M⁻¹[i, C_i] −= D_i⁻¹ U_iᵀ P_λ[:, C_i]` and
/// `P_i[:, C_i] = P_λ[:, C_i] + S̄_i M⁻¹[i, C_i]`, `C_i = idx_v[i]..nv`.
pub(crate) fn forward_step(model: &Model, ws: &mut Workspace, i: usize) {
    let (iv, nvi, nv) = (model.idx_v[i], model.joints[i].nv(), model.nv);
    let columns = &ws.derivatives.columns;
    let minv = ws.mass_matrix_inv.as_mut_slice();
    let (lower, upper) = ws.minv_accelerations.split_at_mut(i);
    let p_i = upper[0].as_mut_slice();
    let p_parent = model.parents[i].map(|p| lower[p].as_slice());
    let (u, d_inv) = (&ws.u[i], &ws.d_inv[i]);
    for c in iv..nv {
        let mut a = [0.0; 6];
        if let Some(pp) = p_parent {
            a.copy_from_slice(&pp[6 * c..6 * c + 6]);
        }
        let mut ut_a = [0.0; 6];
        for k in 0..nvi {
            ut_a[k] = (0..6).map(|r| u[(r, k)] * a[r]).sum();
        }
        let correction = mul_live(d_inv, &ut_a, nvi);
        for k in 0..nvi {
            let m = minv[c * nv + iv + k] - correction[k];
            minv[c * nv + iv + k] = m;
            let col = &columns[iv + k];
            for r in 0..3 {
                a[r] += col.linear[r] * m;
                a[r + 3] += col.angular[r] * m;
            }
        }
        p_i[6 * c..6 * c + 6].copy_from_slice(&a);
    }
}

/// Copies the upper triangle of the square matrix `m` onto its lower triangle.
pub(crate) fn mirror_upper(m: &mut DMatrix<f64>) {
    let nv = m.nrows();
    let s = m.as_mut_slice();
    for c in 0..nv {
        for r in (c + 1)..nv {
            s[c * nv + r] = s[r * nv + c];
        }
    }
}

/// `U = I^A S̄` and `D⁻¹ = (S̄ᵀ U)⁻¹` for a joint with `nvi` world-frame columns in `s`;
/// `None` when a pivot is below `1e-12 · max|I^A|` (massless subtree).
fn factor_world(ia: &Matrix6<f64>, s: &Matrix6<f64>, nvi: usize) -> Option<(Matrix6<f64>, Matrix6<f64>)> {
    let mut u = Matrix6::zeros();
    for k in 0..nvi {
        u.set_column(k, &(ia * s.column(k)));
    }
    let tiny = 1e-12 * ia.amax();
    let mut d_inv = Matrix6::zeros();
    if nvi == 1 {
        let d = s.column(0).dot(&u.column(0));
        if d.is_nan() || d <= tiny {
            return None;
        }
        d_inv[(0, 0)] = 1.0 / d;
    } else {
        let mut d = Matrix6::identity();
        for r in 0..nvi {
            for c in 0..nvi {
                d[(r, c)] = s.column(r).dot(&u.column(c));
            }
        }
        let chol = d.cholesky().filter(|ch| ch.l().diagonal().iter().take(nvi).all(|x| x * x > tiny))?;
        let inv = chol.inverse();
        d_inv.view_mut((0, 0), (nvi, nvi)).copy_from(&inv.view((0, 0), (nvi, nvi)));
    }
    Some((u, d_inv))
}
