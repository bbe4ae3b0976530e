//! Inverse of the joint-space inertia matrix by the articulated-body recursion.

use crate::algorithms::aba::reduced_inertia;
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
/// `P_i[:, C_i] = P_λ[:, C_i] + S̄_i M⁻¹[i, C_i]`; one triangle is computed and mirrored.
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
            ws.derivatives.columns[iv + k] = j.placed_subspace_column(k, &ws.placements[i]);
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
    mirror_lower(&mut ws.mass_matrix_inv);
    Ok(&ws.mass_matrix_inv)
}

/// The backward step of [`minverse`] at body `i`, once `ws.articulated_inertias[i]` holds
/// the world-frame `I^A_i` (its children reduced into it) and `ws.derivatives.columns` the
/// world-frame `S̄`: factors the joint (`ws.u[i]`, `ws.d_inv[i]`), writes
/// `M⁻¹[i, R_i] = D_i⁻¹ E_i − (D_i⁻¹ S̄_iᵀ) F_i` and the parent's force columns
/// `F_λ[:, R_i] = F_i + U_i M⁻¹[i, R_i]`. `F_i` is read only at the columns of `i`'s
/// descendants, written by its children (each column by one child); at `i`'s own columns it
/// is zero. Row `i` of M⁻¹ is stored as column `i` (the lower triangle, contiguous; mirrored
/// by [`mirror_lower`]). The caller reduces `I^A_i` into the parent. Shared with
/// [`crate::aba_derivatives`].
pub(crate) fn backward_step(model: &Model, ws: &mut Workspace, i: usize) -> Result<()> {
    let (iv, nvi, nv) = (model.idx_v[i], model.joints[i].nv(), model.nv);
    if nvi == 1 {
        return backward_step_1dof(model, ws, i);
    }
    let mut s = Matrix6::zeros();
    for k in 0..nvi {
        s.set_column(k, &ws.derivatives.columns[iv + k].to_vector());
    }
    let (u, d_inv) = factor_world(&ws.articulated_inertias[i], &s, nvi).ok_or_else(|| RbdError::NotPositiveDefinite { joint: model.joint_names[i].clone() })?;
    // rows of D⁻¹ S̄ᵀ
    let mut w = [[0.0; 6]; 6];
    for (k, wk) in w.iter_mut().enumerate().take(nvi) {
        for l in 0..nvi {
            for (x, sl) in wk.iter_mut().zip(&s.data.0[l]) {
                *x += d_inv[(k, l)] * sl;
            }
        }
    }
    // Column-major raw storage: entry (r, c) of an (rows × cols) matrix is at c·rows + r.
    let minv = ws.mass_matrix_inv.as_mut_slice();
    let end = iv + model.nv_subtree[i];
    let (lower, upper) = ws.minv_forces.split_at_mut(i);
    let f_i = upper[0].as_slice();
    let mut f_parent = model.parents[i].map(|p| lower[p].as_mut_slice());
    for c in iv..end {
        let own = c < iv + nvi;
        let f: [f64; 6] = if own { [0.0; 6] } else { f_i[6 * c..6 * c + 6].try_into().expect("6 entries") };
        let mut row = [0.0; 6];
        for (k, x) in row.iter_mut().enumerate().take(nvi) {
            let wf: f64 = w[k].iter().zip(&f).map(|(a, b)| a * b).sum();
            *x = if own { d_inv[(k, c - iv)] } else { 0.0 } - wf;
            minv[(iv + k) * nv + c] = *x;
        }
        if let Some(fp) = f_parent.as_deref_mut() {
            let mut out = f;
            for (k, x) in row.iter().enumerate().take(nvi) {
                for (o, ur) in out.iter_mut().zip(&u.data.0[k]) {
                    *o += ur * x;
                }
            }
            fp[6 * c..6 * c + 6].copy_from_slice(&out);
        }
    }
    ws.u[i] = u;
    ws.d_inv[i] = d_inv;
    Ok(())
}

/// The forward step of [`minverse`] at body `i` (after every [`backward_step`]): with the
/// parent's acceleration columns `P_λ`, `M⁻¹[i, C_i] −= (U_i D_i⁻¹)ᵀ P_λ[:, C_i]` (entries
/// right of `i`'s subtree start from zero) and, unless `i` is a leaf,
/// `P_i[:, C_i] = P_λ[:, C_i] + S̄_i M⁻¹[i, C_i]`, `C_i = idx_v[i]..nv`.
pub(crate) fn forward_step(model: &Model, ws: &mut Workspace, i: usize) {
    let (iv, nvi, nv) = (model.idx_v[i], model.joints[i].nv(), model.nv);
    let end = iv + model.nv_subtree[i];
    let leaf = end == iv + nvi;
    if nvi == 1 {
        return forward_step_1dof(model, ws, i, end, leaf);
    }
    let columns = &ws.derivatives.columns;
    let (u, d_inv) = (&ws.u[i], &ws.d_inv[i]);
    // columns of U D⁻¹
    let mut y = [[0.0; 6]; 6];
    for (k, yk) in y.iter_mut().enumerate().take(nvi) {
        for l in 0..nvi {
            for (x, ul) in yk.iter_mut().zip(&u.data.0[l]) {
                *x += d_inv[(l, k)] * ul;
            }
        }
    }
    let minv = ws.mass_matrix_inv.as_mut_slice();
    let (lower, upper) = ws.minv_accelerations.split_at_mut(i);
    let p_i = upper[0].as_mut_slice();
    let p_parent = model.parents[i].map(|p| lower[p].as_slice());
    for c in iv..nv {
        let mut a: [f64; 6] = match p_parent {
            Some(pp) => pp[6 * c..6 * c + 6].try_into().expect("6 entries"),
            None => [0.0; 6],
        };
        let a_parent = a;
        for k in 0..nvi {
            let ya: f64 = if p_parent.is_some() { y[k].iter().zip(&a_parent).map(|(x, z)| x * z).sum() } else { 0.0 };
            let at = (iv + k) * nv + c;
            let m = if c < end { minv[at] } else { 0.0 } - ya;
            minv[at] = m;
            let col = &columns[iv + k];
            for r in 0..3 {
                a[r] += col.linear[r] * m;
                a[r + 3] += col.angular[r] * m;
            }
        }
        if !leaf {
            p_i[6 * c..6 * c + 6].copy_from_slice(&a);
        }
    }
}

/// [`backward_step`] for a one-dof joint: `S̄`, `U` are 6-vectors and `D` a scalar.
fn backward_step_1dof(model: &Model, ws: &mut Workspace, i: usize) -> Result<()> {
    let (iv, nv) = (model.idx_v[i], model.nv);
    let ia = &ws.articulated_inertias[i];
    let s = ws.derivatives.columns[iv].to_vector();
    let u_vec = ia * s;
    let d = s.dot(&u_vec);
    if d.is_nan() || d <= 1e-12 * amax(ia) {
        return Err(RbdError::NotPositiveDefinite { joint: model.joint_names[i].clone() });
    }
    let d_inv = 1.0 / d;
    let (u, w): ([f64; 6], [f64; 6]) = (u_vec.into(), (s * d_inv).into());
    let minv = &mut ws.mass_matrix_inv.as_mut_slice()[iv * nv..(iv + 1) * nv];
    let end = iv + model.nv_subtree[i];
    let (lower, upper) = ws.minv_forces.split_at_mut(i);
    let f_i = upper[0].as_slice();
    let mut f_parent = model.parents[i].map(|p| lower[p].as_mut_slice());
    for c in iv..end {
        let (f, row) = if c == iv {
            ([0.0; 6], d_inv)
        } else {
            let f: [f64; 6] = f_i[6 * c..6 * c + 6].try_into().expect("6 entries");
            (f, -f.iter().zip(w.iter()).map(|(a, b)| a * b).sum::<f64>())
        };
        minv[c] = row;
        if let Some(fp) = f_parent.as_deref_mut() {
            for ((o, fr), ur) in fp[6 * c..6 * c + 6].iter_mut().zip(&f).zip(&u) {
                *o = fr + ur * row;
            }
        }
    }
    ws.u[i].set_column(0, &u_vec);
    ws.d_inv[i][(0, 0)] = d_inv;
    Ok(())
}

/// [`forward_step`] for a one-dof joint.
fn forward_step_1dof(model: &Model, ws: &mut Workspace, i: usize, end: usize, leaf: bool) {
    let (iv, nv) = (model.idx_v[i], model.nv);
    let y: [f64; 6] = (ws.u[i].column(0) * ws.d_inv[i][(0, 0)]).into();
    let s: [f64; 6] = ws.derivatives.columns[iv].to_vector().into();
    let minv = &mut ws.mass_matrix_inv.as_mut_slice()[iv * nv..(iv + 1) * nv];
    let (lower, upper) = ws.minv_accelerations.split_at_mut(i);
    let p_i = upper[0].as_mut_slice();
    match model.parents[i].map(|p| lower[p].as_slice()) {
        Some(pp) => {
            for c in iv..nv {
                let a: [f64; 6] = pp[6 * c..6 * c + 6].try_into().expect("6 entries");
                let ya: f64 = y.iter().zip(&a).map(|(x, z)| x * z).sum();
                let m = if c < end { minv[c] } else { 0.0 } - ya;
                minv[c] = m;
                if !leaf {
                    for ((o, ar), sr) in p_i[6 * c..6 * c + 6].iter_mut().zip(&a).zip(&s) {
                        *o = ar + sr * m;
                    }
                }
            }
        }
        None => {
            minv[end..].fill(0.0);
            if !leaf {
                for c in iv..nv {
                    for (o, sr) in p_i[6 * c..6 * c + 6].iter_mut().zip(&s) {
                        *o = sr * minv[c];
                    }
                }
            }
        }
    }
}

/// Copies the lower triangle of the square matrix `m` onto its upper triangle.
pub(crate) fn mirror_lower(m: &mut DMatrix<f64>) {
    let nv = m.nrows();
    let s = m.as_mut_slice();
    for c in 0..nv {
        for r in (c + 1)..nv {
            s[r * nv + c] = s[c * nv + r];
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
    let tiny = 1e-12 * amax(ia);
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

/// `max |m_ij|` of a symmetric positive semi-definite `m` (an articulated inertia): its
/// largest diagonal entry, since `|m_ij| ≤ √(m_ii m_jj)` (6 comparisons instead of 36).
fn amax(m: &Matrix6<f64>) -> f64 {
    (0..6).fold(0.0, |a, k| a.max(m[(k, k)].abs()))
}
