//! External wrenches on the bodies: forward dynamics with `fext`, and the joint torques of a
//! set of wrenches.
//!
//! # Convention (Pinocchio's `fext`)
//! `fext[i]` is the wrench that the environment applies to body `i`: `[linear; angular]` =
//! force, and moment about the origin of body frame `i`, both expressed in body frame `i`
//! (the frame of joint `i` after its motion, Pinocchio's `LOCAL` joint frame). It is one
//! entry per body, `(nbodies,)`; Pinocchio's `StdVec_Force` has one more entry, index 0, for
//! the universe. Being given in the body frame, a wrench turns with its body: its world
//! value depends on `q` (the derivatives include this, see [`crate::rnea_derivatives`]).
//!
//! The equations of motion become
//! $$M(q)\,\ddot q + C(q,\dot q)\dot q + g(q) = \tau + \sum_i J_i(q)^T f^{ext}_i$$
//! with `J_i` the body Jacobian of body `i` (local frame), so [`crate::rnea`] with `fext`
//! returns `τ = rnea(q, v, a) − Σ Jᵢᵀ fᵢ` and [`crate::aba`] with `fext` solves for `q̈`.

use crate::algorithms::kinematics::parent_placements_unchecked;
use crate::check::{check_configuration, check_forces};
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use vidyn_spatial::Force;

/// Generalised force of the external wrenches, `Σ_i J_i(q)ᵀ f^ext_i` (nv,), written into
/// `out`: a backward pass `g_i = f_i + Σ_children λX*_c g_c`, `out_i = S_iᵀ g_i` in body
/// frames. O(n), no allocation. Fills `ws.parent_placements` and `ws.forces` (the `g_i`).
pub fn external_joint_torques(model: &Model, ws: &mut Workspace, q: &[f64], fext: &[Force], out: &mut [f64]) -> Result<()> {
    check_configuration(model, q)?;
    check_forces(model, fext, "fext")?;
    if out.len() != model.nv {
        return Err(RbdError::Dimension { arg: "out", got: out.len(), expected: model.nv, field: "model.nv" });
    }
    external_joint_torques_unchecked(model, ws, q, fext, out);
    Ok(())
}

pub(crate) fn external_joint_torques_unchecked(model: &Model, ws: &mut Workspace, q: &[f64], fext: &[Force], out: &mut [f64]) {
    parent_placements_unchecked(model, ws, q);
    ws.forces.copy_from_slice(fext);
    for i in (0..model.nbodies()).rev() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        j.project_force(&ws.forces[i], &mut out[iv..iv + j.nv()]);
        if let Some(p) = model.parents[i] {
            let f = ws.parent_placements[i].act_force(&ws.forces[i]);
            ws.forces[p] += f;
        }
    }
}
