//! Operations on the configuration manifold `Q = ×ᵢ Qᵢ` (one Lie group per joint).

use crate::check::{check_configuration, check_tangent};
use crate::error::Result;
use crate::model::Model;
use rand::Rng;

/// The neutral configuration (every joint at its identity), `(nq,)`.
#[must_use]
pub fn neutral(model: &Model) -> Vec<f64> {
    let mut q = vec![0.0; model.nq];
    for (i, j) in model.joints.iter().enumerate() {
        let iq = model.idx_q[i];
        j.neutral(&mut q[iq..iq + j.nq()]);
    }
    q
}

/// A random configuration within the model's position limits (see
/// [`crate::Joint::random_configuration`] for unbounded coordinates).
pub fn random_configuration<R: Rng + ?Sized>(model: &Model, rng: &mut R) -> Vec<f64> {
    let mut q = vec![0.0; model.nq];
    for (i, j) in model.joints.iter().enumerate() {
        let r = model.idx_q[i]..model.idx_q[i] + j.nq();
        let (lo, hi) = (&model.limits.lower_position[r.clone()], &model.limits.upper_position[r.clone()]);
        j.random_configuration(rng, lo, hi, &mut q[r]);
    }
    q
}

/// `q ⊕ v`: integrates the constant velocity `v` for unit time on each joint's group.
pub fn integrate(model: &Model, q: &[f64], v: &[f64]) -> Result<Vec<f64>> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    let mut out = vec![0.0; model.nq];
    for (i, j) in model.joints.iter().enumerate() {
        let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
        j.integrate(&q[iq..iq + j.nq()], &v[iv..iv + j.nv()], &mut out[iq..iq + j.nq()]);
    }
    Ok(out)
}

/// `q₁ ⊖ q₀`: the velocity that [`integrate`] maps `q₀` to `q₁` with.
pub fn difference(model: &Model, q0: &[f64], q1: &[f64]) -> Result<Vec<f64>> {
    check_configuration(model, q0)?;
    check_configuration(model, q1)?;
    let mut out = vec![0.0; model.nv];
    for (i, j) in model.joints.iter().enumerate() {
        let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
        j.difference(&q0[iq..iq + j.nq()], &q1[iq..iq + j.nq()], &mut out[iv..iv + j.nv()]);
    }
    Ok(out)
}
