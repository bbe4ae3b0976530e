//! Joint-space inertia matrix by the composite-rigid-body algorithm.

use crate::algorithms::kinematics::placements_unchecked;
use crate::check::check_configuration;
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;

/// Joint-space inertia `M(q)` (Featherstone 2008, Table 6.2), in the world frame:
/// with `J_k = ⁰X_i S_k` the world-frame column of dof `k` (body `i`) and `I^c_i` the
/// world-frame inertia of the subtree of `i` (a plain sum, no transforms),
/// `M[j, k] = J_jᵀ I^c_i J_k` for every dof `j` of an ancestor of `i` (or of `i` itself).
/// Working in one frame turns the transform of `I^c_i J_k` up the path to the root into a
/// 6-term dot product per entry (the "world-frame CRBA" of Pinocchio ≥ 2.6).
/// `q`: (nq,); returns M (nv, nv), full and symmetric. O(n·d), d = tree depth.
/// Its columns are `rnea(q, 0, e_k) − rnea(q, 0, 0)`; checked by `tests::crba_matches_rnea_columns`.
/// Fills `parent_placements`, `placements`, `composite_inertias` (world frame).
pub fn crba<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    world_composites(model, ws, q);
    let n = model.nbodies();
    let columns = &ws.derivatives.columns;
    for i in 0..n {
        let iv = model.idx_v[i];
        for c in iv..iv + model.joints[i].nv() {
            let f = ws.composite_inertias[i].mul_motion(&columns[c]);
            let mut body = Some(i);
            while let Some(b) = body {
                for r in model.idx_v[b]..model.idx_v[b] + model.joints[b].nv() {
                    let x = columns[r].dot(&f);
                    ws.mass_matrix[(r, c)] = x;
                    ws.mass_matrix[(c, r)] = x;
                }
                body = model.parents[b];
            }
        }
    }
    Ok(&ws.mass_matrix)
}

/// The O(n) part of [`crba`]: `ws.placements`, the world-frame joint columns
/// `ws.derivatives.columns` and the world-frame subtree inertias `ws.composite_inertias`.
pub(crate) fn world_composites(model: &Model, ws: &mut Workspace, q: &[f64]) {
    placements_unchecked(model, ws, q);
    let n = model.nbodies();
    let columns = &mut ws.derivatives.columns;
    for i in 0..n {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        for c in 0..j.nv() {
            columns[iv + c] = ws.placements[i].act_motion(&j.subspace_column(c));
        }
        ws.composite_inertias[i] = model.inertias[i].transformed(&ws.placements[i]);
    }
    for i in (0..n).rev() {
        if let Some(p) = model.parents[i] {
            ws.composite_inertias[p] = ws.composite_inertias[p] + ws.composite_inertias[i];
        }
    }
}
