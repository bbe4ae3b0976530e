//! Kinetic and potential energy.

use crate::algorithms::kinematics::placements_unchecked;
use crate::check::{check_configuration, check_tangent};
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use vidyn_spatial::Motion;

/// Kinetic energy `T = ½ q̇ᵀ M(q) q̇ = Σ_i ½ v_iᵀ I_i v_i`. O(n). Fills placements, velocities.
pub fn kinetic_energy(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64]) -> Result<f64> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    placements_unchecked(model, ws, q);
    let mut t = 0.0;
    for i in 0..model.nbodies() {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        let vp = match model.parents[i] {
            Some(p) => ws.parent_placements[i].inv_act_motion(&ws.velocities[p]),
            None => Motion::zero(),
        };
        let vi = vp + j.motion(&v[iv..iv + j.nv()]);
        ws.velocities[i] = vi;
        t += model.inertias[i].kinetic_energy(&vi);
    }
    Ok(t)
}

/// Potential energy of gravity `V = −Σ_i m_i gᵀ c_i` (c_i: world centre of mass of body i),
/// zero at the world origin. O(n). Fills placements.
pub fn potential_energy(model: &Model, ws: &mut Workspace, q: &[f64]) -> Result<f64> {
    check_configuration(model, q)?;
    placements_unchecked(model, ws, q);
    let g = model.gravity.linear;
    Ok(model.inertias.iter().zip(&ws.placements).map(|(inertia, o)| -inertia.mass * g.dot(&o.act_point(&inertia.com))).sum())
}
