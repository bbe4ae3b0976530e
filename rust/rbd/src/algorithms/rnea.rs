//! Inverse dynamics by the recursive Newton–Euler algorithm.

use crate::algorithms::kinematics::joint_sin_cos;
use crate::check::{check_configuration, check_forces, check_tangent};
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use vidyn_spatial::Force;

/// Inverse dynamics (Featherstone 2008, Table 5.1), body frames:
/// $$\tau = M(q)\,\ddot q + C(q,\dot q)\dot q + g(q)$$
/// Forward: `v_i`, `a_i` as in forward kinematics with the world accelerating at `−g`;
/// `f_i = I_i a_i + v_i ×* I_i v_i`. Backward: `τ_i = S_iᵀ f_i`, `f_λ += λX*_i f_i`.
/// `q`: (nq,), `v`, `a`: (nv,); returns τ (nv,). O(n), no allocation.
/// Equals `crba(q)·a + rnea(q, v, 0)`; checked by `tests::rnea_is_mass_matrix_times_a_plus_bias`.
/// Fills `parent_placements`, `velocities`, `accelerations` (with `−g`), `forces`, `tau`.
/// `fext`: optional external wrenches, `(nbodies,)`: `fext[i]` is the wrench applied to body
/// `i` (`[linear; angular]`: force, and moment about the body frame's origin), expressed in
/// body frame `i` — Pinocchio's `fext` of `rnea(model, data, q, v, a, fext)` (which has one
/// more entry, for the universe); then
/// $$\tau = M(q)\,\ddot q + C(q,\dot q)\dot q + g(q) - \sum_i J_i(q)^T f^{ext}_i,$$
/// each body force becoming `f_i = I_i a_i + v_i ×* I_i v_i − f^ext_i`.
pub fn rnea<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) -> Result<&'w [f64]> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, a, "a")?;
    if let Some(f) = fext {
        check_forces(model, f, "fext")?;
    }
    rnea_unchecked(model, ws, q, v, a, fext);
    Ok(&ws.tau)
}

pub(crate) fn rnea_unchecked(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) {
    let minus_gravity = -model.gravity;
    joint_sin_cos(model, ws, q);
    for i in 0..model.nbodies() {
        let j = &model.joints[i];
        let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
        let li = j.placed_transform_sin_cos(&model.joint_placements[i], &q[iq..iq + j.nq()], ws.joint_sin_cos[i]);
        ws.parent_placements[i] = li;
        let vj = j.motion(&v[iv..iv + j.nv()]);
        let (vp, ap) = match model.parents[i] {
            Some(p) => (li.inv_act_motion(&ws.velocities[p]), li.inv_act_motion(&ws.accelerations[p])),
            None => (vidyn_spatial::Motion::zero(), li.inv_act_motion(&minus_gravity)),
        };
        let vi = vp + vj;
        let ai = ap + j.motion(&a[iv..iv + j.nv()]) + vi.cross_motion(&vj);
        ws.velocities[i] = vi;
        ws.accelerations[i] = ai;
        let inertia = &model.inertias[i];
        ws.forces[i] = inertia.mul_motion(&ai) + vi.cross_force(&inertia.mul_motion(&vi));
        if let Some(f) = fext {
            ws.forces[i] -= f[i];
        }
    }
    for i in (0..model.nbodies()).rev() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        j.project_force(&ws.forces[i], &mut ws.tau[iv..iv + j.nv()]);
        if let Some(p) = model.parents[i] {
            let f = ws.parent_placements[i].act_force(&ws.forces[i]);
            ws.forces[p] += f;
        }
    }
}

/// Generalised gravity `g(q) = rnea(q, 0, 0)`, (nv,). O(n).
pub fn gravity<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w [f64]> {
    check_configuration(model, q)?;
    ws.scratch_nv.fill(0.0);
    let zero = std::mem::take(&mut ws.scratch_nv);
    rnea_unchecked(model, ws, q, &zero, &zero, None);
    ws.scratch_nv = zero;
    Ok(&ws.tau)
}

/// Nonlinear effects `C(q, q̇) q̇ + g(q) = rnea(q, v, 0)`, (nv,). O(n).
pub fn nonlinear_effects<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64]) -> Result<&'w [f64]> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    ws.scratch_nv.fill(0.0);
    let zero = std::mem::take(&mut ws.scratch_nv);
    rnea_unchecked(model, ws, q, v, &zero, None);
    ws.scratch_nv = zero;
    Ok(&ws.tau)
}
