//! Joint-space inertia matrix by the composite-rigid-body algorithm.

use crate::algorithms::kinematics::placements_unchecked;
use crate::check::check_configuration;
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::{dot6, OriginInertia};

/// Joint-space inertia `M(q)` (Featherstone 2008, Table 6.2), in the world frame:
/// with `J_k = ⁰X_i S_k` the world-frame column of dof `k` (body `i`) and `I^c_i` the
/// world-frame inertia of the subtree of `i` (a plain sum, no transforms),
/// `M[j, k] = J_jᵀ I^c_i J_k` for every dof `j` of an ancestor of `i` (or of `i` itself):
/// row `j` of body `b` is formed against the momenta `I^c J_k` of the dofs of `b`'s subtree,
/// a contiguous range of columns.
/// Working in one frame turns the transform of `I^c_i J_k` up the path to the root into a
/// 6-term dot product per entry (the "world-frame CRBA" of Pinocchio ≥ 2.6). The subtree
/// inertias are kept as moments about the world origin ([`OriginInertia`]), so the backward
/// sum is entry-wise; one backward pass completes `I^c_i` (the bodies of `i`'s subtree come
/// after `i`), forms the momenta of `i`'s dofs and writes the rows of `i`.
/// `q`: (nq,); returns M (nv, nv), full and symmetric. O(n·d), d = tree depth.
/// Its columns are `rnea(q, 0, e_k) − rnea(q, 0, 0)`; checked by `tests::crba_matches_rnea_columns`.
/// Fills `parent_placements`, `placements`, `origin_composites` (world frame, about the origin).
pub fn crba<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    world_bodies(model, ws, q);
    let nv = model.nv;
    let d = &mut ws.derivatives;
    let composite = &mut ws.origin_composites;
    // Row r of body i pairs with the columns of i's subtree, a contiguous range; column-major
    // storage: entry (r, c) at c·nv + r.
    let m = ws.mass_matrix.as_mut_slice();
    // the subtree sum of the body visited next when it is this one's parent (a chain's
    // case), carried in registers: read back from memory right after its `+=`, it waited
    // for stores that the CPU cannot forward to the wider loads of the copy
    let mut carried: Option<(usize, OriginInertia)> = None;
    for i in (0..model.nbodies()).rev() {
        let mut ic = composite[i];
        if let Some((_, child)) = carried.take().filter(|&(b, _)| b == i) {
            ic += child;
            composite[i] = ic;
        }
        let (iv, end) = (model.idx_v[i], model.idx_v[i] + model.nv_subtree[i]);
        let rows = iv..iv + model.joints[i].nv();
        if rows.len() == 1 {
            // a 1-dof joint: its diagonal entry from the momentum still in registers
            let f = ic.mul_motion(&d.columns[iv]);
            d.momenta[iv] = f;
            let jr = d.columns[iv].to_vector();
            m[iv * nv + iv] = dot6(&jr, &f.to_vector());
            for (c, f) in (iv + 1..end).zip(&d.momenta[iv + 1..end]) {
                let x = dot6(&jr, &f.to_vector());
                m[c * nv + iv] = x;
                m[iv * nv + c] = x;
            }
        } else {
            for k in rows.clone() {
                d.momenta[k] = ic.mul_motion(&d.columns[k]);
            }
            for r in rows {
                let jr = d.columns[r].to_vector();
                for (c, f) in (r..end).zip(&d.momenta[r..end]) {
                    let x = dot6(&jr, &f.to_vector());
                    m[c * nv + r] = x;
                    m[r * nv + c] = x;
                }
            }
        }
        match model.parents[i] {
            Some(p) if p + 1 == i => carried = Some((p, ic)),
            Some(p) => composite[p] += ic,
            None => {}
        }
    }
    Ok(&ws.mass_matrix)
}

/// The forward pass of [`crba`]: `ws.placements`, the world-frame joint columns
/// `ws.derivatives.columns` and each body's own inertia about the world origin in
/// `ws.origin_composites` (the subtree sums still to be taken).
fn world_bodies(model: &Model, ws: &mut Workspace, q: &[f64]) {
    placements_unchecked(model, ws, q);
    let columns = &mut ws.derivatives.columns;
    for i in 0..model.nbodies() {
        let (j, o) = (&model.joints[i], &ws.placements[i]);
        let iv = model.idx_v[i];
        for c in 0..j.nv() {
            columns[iv + c] = j.placed_subspace_column(c, o);
        }
        ws.origin_composites[i] = OriginInertia::placed(&model.inertias[i], o);
    }
}

/// The O(n) part of [`crba`]: `ws.placements`, the world-frame joint columns
/// `ws.derivatives.columns` and the world-frame subtree inertias `ws.origin_composites`.
pub(crate) fn world_composites(model: &Model, ws: &mut Workspace, q: &[f64]) {
    world_bodies(model, ws, q);
    for i in (0..model.nbodies()).rev() {
        if let Some(p) = model.parents[i] {
            let ic = ws.origin_composites[i];
            ws.origin_composites[p] += ic;
        }
    }
}
