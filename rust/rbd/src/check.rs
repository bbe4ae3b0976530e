//! Argument checks shared by every algorithm: length, finiteness, unit quaternions.

use crate::error::{RbdError, Result};
use crate::model::Model;
use vidyn_spatial::Force;

/// Checks that `x` has `expected` entries, all finite.
pub fn check_vector(x: &[f64], arg: &'static str, expected: usize, field: &'static str) -> Result<()> {
    if x.len() != expected {
        return Err(RbdError::Dimension { arg, got: x.len(), expected, field });
    }
    // one pass without an early exit (it vectorises), the index searched for only on failure
    if x.iter().fold(true, |finite, v| finite & v.is_finite()) {
        return Ok(());
    }
    let (index, &value) = x.iter().enumerate().find(|(_, v)| !v.is_finite()).expect("a non-finite entry");
    Err(RbdError::NonFinite { arg, index, value })
}

/// Checks a configuration: length `nq`, finite, unit quaternions / cos-sin pairs.
pub fn check_configuration(model: &Model, q: &[f64]) -> Result<()> {
    check_vector(q, "q", model.nq, "model.nq")?;
    if model.nq == model.nv {
        return Ok(()); // no joint has more coordinates than velocities
    }
    for (i, j) in model.joints.iter().enumerate() {
        // only joints with more coordinates than velocities carry a unit-norm block
        if j.nq() > j.nv() {
            let iq = model.idx_q[i];
            j.check_configuration(&q[iq..iq + j.nq()], &model.joint_names[i], iq)?;
        }
    }
    Ok(())
}

/// Checks a tangent vector (velocity, acceleration, torque): length `nv`, finite.
pub fn check_tangent(model: &Model, x: &[f64], arg: &'static str) -> Result<()> {
    check_vector(x, arg, model.nv, "model.nv")
}

/// Checks per-body external wrenches: one per body (`model.nbodies()`), all finite. A
/// non-finite entry is reported at its flat index `6·body + k` (`k` in `[linear; angular]`).
pub fn check_forces(model: &Model, fext: &[Force], arg: &'static str) -> Result<()> {
    if fext.len() != model.nbodies() {
        return Err(RbdError::Dimension { arg, got: fext.len(), expected: model.nbodies(), field: "model.nbodies" });
    }
    for (b, f) in fext.iter().enumerate() {
        let x = f.to_vector();
        if let Some((k, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(RbdError::NonFinite { arg, index: 6 * b + k, value });
        }
    }
    Ok(())
}
