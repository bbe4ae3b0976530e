//! Frame Jacobians.

use crate::algorithms::kinematics::placements_unchecked;
use crate::check::check_configuration;
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::Motion;

/// The frame in which a Jacobian (or a frame velocity) is expressed (Pinocchio's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceFrame {
    /// Spatial velocity in the world frame, at the world origin.
    World,
    /// Body velocity in the frame itself.
    Local,
    /// Velocity of the frame's origin with world-aligned axes.
    LocalWorldAligned,
}

/// Jacobian `J(q)` (6, nv) of frame `frame` with `[v; ω] = J q̇` in `reference`.
/// Column block of each ancestor joint j: `⁰X_j S_j` (World); then `ᶠX_0 ·` (Local) or the
/// origin shift `[v + ω × p_f; ω]` (LocalWorldAligned). Columns of other joints are zero.
/// O(n + 6·nv). Fills `ws.jacobian`, placements and `ws.frame_placements[frame]`.
pub fn frame_jacobian<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], frame: usize, reference: ReferenceFrame) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    let fr = model.frames.get(frame).ok_or(RbdError::IndexOutOfRange { what: "frame", index: frame, len: model.frames.len() })?;
    placements_unchecked(model, ws, q);
    let of = match fr.parent {
        Some(b) => ws.placements[b] * fr.placement,
        None => fr.placement,
    };
    ws.frame_placements[frame] = of;
    ws.jacobian.as_mut_slice().fill(0.0);
    let mut body = fr.parent;
    while let Some(b) = body {
        let j = &model.joints[b];
        for k in 0..j.nv() {
            let w = ws.placements[b].act_motion(&j.subspace_column(k));
            let col = match reference {
                ReferenceFrame::World => w,
                ReferenceFrame::Local => of.inv_act_motion(&w),
                ReferenceFrame::LocalWorldAligned => Motion::new(w.linear + w.angular.cross(&of.translation), w.angular),
            };
            ws.jacobian.fixed_view_mut::<6, 1>(0, model.idx_v[b] + k).copy_from(&col.to_vector());
        }
        body = model.parents[b];
    }
    Ok(&ws.jacobian)
}
