//! The centre of mass of the whole model, its velocity and its Jacobian (Pinocchio's
//! `centerOfMass` and `jacobianCenterOfMass`).
//!
//! With `m_i` the mass of body `i`, `c_i` its world centre of mass and `M = Σ m_i`:
//! `c = Σ m_i c_i / M`. A joint `j` with world column `S̄_j = [v_j; ω_j]` (at the world
//! origin) moves the centre of mass of every body of its subtree `σ(j)` at
//! `v_j + ω_j × c_i`, so column `j` of `J_c = ∂c/∂q̇` is
//! `(σm_j v_j + ω_j × σp_j) / M` with the subtree mass `σm_j = Σ_{i⪰j} m_i` and first moment
//! `σp_j = Σ_{i⪰j} m_i c_i`: one backward pass, O(n + nv). `ċ = J_c v`.

use crate::algorithms::kinematics::{placements_unchecked, world_columns};
use crate::check::{check_configuration, check_tangent};
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::{DMatrix, Vector3};

/// Fills the placements and the subtree masses and first moments; errors for a massless model.
fn subtree_moments(model: &Model, ws: &mut Workspace, q: &[f64]) -> Result<f64> {
    check_configuration(model, q)?;
    placements_unchecked(model, ws, q);
    for i in 0..model.nbodies() {
        let inertia = &model.inertias[i];
        ws.subtree_mass[i] = inertia.mass;
        ws.subtree_moment[i] = ws.placements[i].act_point(&inertia.com) * inertia.mass;
    }
    for i in (0..model.nbodies()).rev() {
        if let Some(p) = model.parents[i] {
            ws.subtree_mass[p] += ws.subtree_mass[i];
            let moment = ws.subtree_moment[i];
            ws.subtree_moment[p] += moment;
        }
    }
    let mass = model.total_mass();
    if mass > 0.0 {
        Ok(mass)
    } else {
        Err(RbdError::InvalidModel(format!("model '{}' has no mass: its centre of mass is undefined", model.name)))
    }
}

/// The world centre of mass `c` of the model at `q`. O(n). Fills placements and
/// `ws.subtree_mass`, `ws.subtree_moment`.
///
/// # Errors
/// Invalid `q`, or a model without mass.
pub fn center_of_mass(model: &Model, ws: &mut Workspace, q: &[f64]) -> Result<Vector3<f64>> {
    let mass = subtree_moments(model, ws, q)?;
    Ok(root_moment(model, ws) / mass)
}

/// `Σ m_i c_i` over the model: the first moments of the roots' subtrees.
fn root_moment(model: &Model, ws: &Workspace) -> Vector3<f64> {
    (0..model.nbodies()).filter(|&i| model.parents[i].is_none()).map(|i| ws.subtree_moment[i]).sum()
}

/// `J_c(q)` `(3, nv)` with `ċ = J_c q̇` (module docs). O(n + nv). Fills `ws.com_jacobian`
/// and what [`center_of_mass`] fills.
///
/// # Errors
/// Invalid `q`, or a model without mass.
pub fn com_jacobian<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    let mass = subtree_moments(model, ws, q)?;
    for (j, col, s) in world_columns(model, &ws.placements) {
        let column = (s.linear * ws.subtree_mass[j] + s.angular.cross(&ws.subtree_moment[j])) / mass;
        ws.com_jacobian.fixed_view_mut::<3, 1>(0, col).copy_from(&column);
    }
    Ok(&ws.com_jacobian)
}

/// The centre of mass `c` and its velocity `ċ = J_c v` at `(q, v)`. O(n + nv), no
/// allocation; fills what [`com_jacobian`] fills.
///
/// # Errors
/// Invalid `q` or `v`, or a model without mass.
pub fn center_of_mass_velocity(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64]) -> Result<(Vector3<f64>, Vector3<f64>)> {
    check_tangent(model, v, "v")?;
    com_jacobian(model, ws, q)?;
    let velocity = ws.com_jacobian.column_iter().zip(v).fold(Vector3::zeros(), |acc, (col, &vi)| acc + col * vi);
    Ok((root_moment(model, ws) / model.total_mass(), velocity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::random_tree;
    use crate::{integrate, random_configuration, Joint};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `J_c` against central differences of `c` along `integrate(q, ±h e_k)` (h = 1e-6: error
    /// ~h² ≈ 1e-12 and round-off ~ε/h ≈ 1e-10 on unit-size models), on random trees with every
    /// joint kind; `ċ = J_c v`; `c` of a single body is its own centre of mass, placed.
    #[test]
    fn the_jacobian_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for seed in 0..6 {
            let model = random_tree(7, seed, &Joint::examples());
            let mut ws = model.workspace();
            let q = random_configuration(&model, &mut rng);
            let jc = com_jacobian(&model, &mut ws, &q).unwrap().clone();
            let h = 1e-6;
            for k in 0..model.nv {
                let mut dv = vec![0.0; model.nv];
                dv[k] = h;
                let plus = center_of_mass(&model, &mut ws, &integrate(&model, &q, &dv).unwrap()).unwrap();
                dv[k] = -h;
                let minus = center_of_mass(&model, &mut ws, &integrate(&model, &q, &dv).unwrap()).unwrap();
                let fd = (plus - minus) / (2.0 * h);
                assert!((fd - jc.column(k)).amax() < 1e-8, "seed {seed}, column {k}: {fd:?} vs {:?}", jc.column(k));
            }
            let v: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-1.0..1.0)).collect();
            let (c, cdot) = center_of_mass_velocity(&model, &mut ws, &q, &v).unwrap();
            assert!((c - center_of_mass(&model, &mut ws, &q).unwrap()).amax() < 1e-15);
            assert!((cdot - &jc * nalgebra::DVector::from_column_slice(&v)).amax() < 1e-12);
        }
        let body = random_tree(1, 2, &[Joint::FreeFlyer]);
        let mut ws = body.workspace();
        let q = crate::neutral(&body);
        let c = center_of_mass(&body, &mut ws, &q).unwrap();
        assert!((c - ws.placements[0].act_point(&body.inertias[0].com)).amax() < 1e-15);
    }
}
