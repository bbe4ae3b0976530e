//! Kinetic and potential energy.

use crate::algorithms::kinematics::{placements_unchecked, velocities_unchecked};
use crate::check::{check_configuration, check_tangent};
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;

/// Kinetic energy `T = ½ q̇ᵀ M(q) q̇ = Σ_i ½ v_iᵀ I_i v_i`. O(n). Fills placements, velocities.
pub fn kinetic_energy(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64]) -> Result<f64> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    placements_unchecked(model, ws, q);
    velocities_unchecked(model, ws, v);
    Ok(model.inertias.iter().zip(&ws.velocities).map(|(inertia, vi)| inertia.kinetic_energy(vi)).sum())
}

/// Potential energy of gravity `V = −Σ_i m_i gᵀ c_i` (c_i: world centre of mass of body i),
/// zero at the world origin. O(n). Fills placements.
pub fn potential_energy(model: &Model, ws: &mut Workspace, q: &[f64]) -> Result<f64> {
    check_configuration(model, q)?;
    placements_unchecked(model, ws, q);
    let g = model.gravity.linear;
    Ok(model.inertias.iter().zip(&ws.placements).map(|(inertia, o)| -inertia.mass * g.dot(&o.act_point(&inertia.com))).sum())
}
