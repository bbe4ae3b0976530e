//! Joint-space inertia matrix by the composite-rigid-body algorithm.

use crate::algorithms::kinematics::parent_placements_unchecked;
use crate::check::check_configuration;
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;

/// Joint-space inertia `M(q)` (Featherstone 2008, Table 6.2), body frames:
/// `I^c_i = I_i + Σ_children λX*_c I^c_c cX_λ`; for each body i, `F = I^c_i S_i` is carried up
/// the path to the root and `M[j, i] = S_jᵀ ʲX*_i F` for every ancestor j.
/// `q`: (nq,); returns M (nv, nv), full and symmetric. O(n·d), d = tree depth.
/// Its columns are `rnea(q, 0, e_k) − rnea(q, 0, 0)`; checked by `tests::crba_matches_rnea_columns`.
pub fn crba<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    parent_placements_unchecked(model, ws, q);
    let n = model.nbodies();
    ws.composite_inertias.copy_from_slice(&model.inertias);
    for i in (0..n).rev() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        for c in 0..j.nv() {
            let mut f = ws.composite_inertias[i].mul_motion(&j.subspace_column(c));
            let mut body = i;
            loop {
                let jb = &model.joints[body];
                let ib = model.idx_v[body];
                let mut col = [0.0; 6];
                jb.project_force(&f, &mut col);
                for (r, &x) in col.iter().take(jb.nv()).enumerate() {
                    ws.mass_matrix[(ib + r, iv + c)] = x;
                    ws.mass_matrix[(iv + c, ib + r)] = x;
                }
                match model.parents[body] {
                    Some(p) => {
                        f = ws.parent_placements[body].act_force(&f);
                        body = p;
                    }
                    None => break,
                }
            }
        }
        if let Some(p) = model.parents[i] {
            let moved = ws.composite_inertias[i].transformed(&ws.parent_placements[i]);
            ws.composite_inertias[p] = ws.composite_inertias[p] + moved;
        }
    }
    Ok(&ws.mass_matrix)
}
