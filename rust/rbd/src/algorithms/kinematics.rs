//! Forward kinematics: placements, velocities and accelerations of every body.

use crate::check::{check_configuration, check_tangent};
use crate::error::Result;
use crate::joint::Joint;
use crate::model::Model;
use crate::workspace::Workspace;
use vidyn_spatial::{sin_cos, Motion, Se3};

/// Placements only: `liMi = jMi(placement) · M_J(q_i)`, `oMi = oMλ · liMi`. O(n).
/// Fills `ws.parent_placements`, `ws.placements`.
pub fn placements(model: &Model, ws: &mut Workspace, q: &[f64]) -> Result<()> {
    check_configuration(model, q)?;
    placements_unchecked(model, ws, q);
    Ok(())
}

/// `liMi` only (what the dynamics recursions need). Fills `ws.parent_placements`.
pub(crate) fn parent_placements_unchecked(model: &Model, ws: &mut Workspace, q: &[f64]) {
    for (i, j) in model.joints.iter().enumerate() {
        let iq = model.idx_q[i];
        ws.parent_placements[i] = j.placed_transform(&model.joint_placements[i], &q[iq..iq + j.nq()]);
    }
}

/// Every revolute joint's `(sin q, cos q)` into `ws.joint_sin_cos` (entries of other joints
/// are left as they are: [`Joint::placed_transform_sin_cos`] does not read them), before the
/// placements that use them: the joints' sines are independent of each other, where each
/// placement waits for its parent's; computed inside the placement loop, their latency added
/// to that chain.
pub(crate) fn joint_sin_cos(model: &Model, ws: &mut Workspace, q: &[f64]) {
    for (i, joint) in model.joints.iter().enumerate() {
        if let Joint::Revolute { .. } = joint {
            ws.joint_sin_cos[i] = sin_cos(q[model.idx_q[i]]);
        }
    }
}

pub(crate) fn placements_unchecked(model: &Model, ws: &mut Workspace, q: &[f64]) {
    joint_sin_cos(model, ws, q);
    for i in 0..model.nbodies() {
        let j = &model.joints[i];
        let iq = model.idx_q[i];
        let li = j.placed_transform_sin_cos(&model.joint_placements[i], &q[iq..iq + j.nq()], ws.joint_sin_cos[i]);
        ws.parent_placements[i] = li;
        ws.placements[i] = match model.parents[i] {
            Some(p) => ws.placements[p] * li,
            None => li,
        };
    }
}

/// Every joint column in the world frame, `(body, velocity index, ⁰X_b S_bk)`, bodies in
/// order, from the body placements `placements` (`oMi`).
pub(crate) fn world_columns<'a>(model: &'a Model, placements: &'a [Se3]) -> impl Iterator<Item = (usize, usize, Motion)> + 'a {
    (0..model.nbodies()).flat_map(move |b| {
        let joint = &model.joints[b];
        (0..joint.nv()).map(move |k| (b, model.idx_v[b] + k, joint.placed_subspace_column(k, &placements[b])))
    })
}

/// Body velocities `v_i = iXλ v_λ + S_i q̇_i` (body frames) from the parent placements already
/// in `ws`. Fills `ws.velocities`. O(n).
pub(crate) fn velocities_unchecked(model: &Model, ws: &mut Workspace, v: &[f64]) {
    for i in 0..model.nbodies() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        let vp = match model.parents[i] {
            Some(p) => ws.parent_placements[i].inv_act_motion(&ws.velocities[p]),
            None => Motion::zero(),
        };
        ws.velocities[i] = vp + j.motion(&v[iv..iv + j.nv()]);
    }
}

/// Forward kinematics to second order (Featherstone 2008, §5.3), body frames:
/// `v_i = iXλ v_λ + S_i q̇_i`, `a_i = iXλ a_λ + S_i q̈_i + v_i ×ₘ S_i q̇_i` (gravity excluded).
/// `q`: (nq,), `v`, `a`: (nv,). Fills placements, `ws.velocities`, `ws.accelerations`. O(n).
pub fn forward_kinematics(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], a: &[f64]) -> Result<()> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, a, "a")?;
    placements_unchecked(model, ws, q);
    for i in 0..model.nbodies() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        let li = &ws.parent_placements[i];
        let vj = j.motion(&v[iv..iv + j.nv()]);
        let (vp, ap) = match model.parents[i] {
            Some(p) => (li.inv_act_motion(&ws.velocities[p]), li.inv_act_motion(&ws.accelerations[p])),
            None => (Motion::zero(), Motion::zero()),
        };
        let vi = vp + vj;
        ws.velocities[i] = vi;
        ws.accelerations[i] = ap + j.motion(&a[iv..iv + j.nv()]) + vi.cross_motion(&vj);
    }
    Ok(())
}

/// World placements of every frame, `oMf = oMi · iMf`, from the body placements already in
/// `ws` (call [`placements`] or [`forward_kinematics`] first). Fills `ws.frame_placements`.
pub fn update_frame_placements(model: &Model, ws: &mut Workspace) {
    for (k, f) in model.frames.iter().enumerate() {
        ws.frame_placements[k] = match f.parent {
            Some(p) => ws.placements[p] * f.placement,
            None => f.placement,
        };
    }
}
