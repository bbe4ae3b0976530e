//! Centroidal momentum and its matrix (Pinocchio's `computeCentroidalMomentum` and `ccrba`;
//! Orin, Goswami & Lee 2013).
//!
//! The centroidal momentum `h_G` is the spatial momentum of the whole model about its centre
//! of mass `c`, in world-aligned axes, `[linear; angular]`: `h_G = A_G(q) v`. With world-frame
//! composite inertias `C_j = Σ_{i⪰j} ⁰I_i` (one backward pass, as in CRBA) and world joint
//! columns `S̄_j`, the momentum about the world origin is `Σ_j C_j S̄_j v_j`, so column `j` of
//! `A_G` is `C_j S̄_j` moved from the world origin to `c`: `[f; τ − c × f]`. O(n + nv).
//! Its linear rows are `M J_c` (the total mass times the centre-of-mass Jacobian).

use crate::algorithms::kinematics::{placements_unchecked, world_columns};
use crate::check::{check_configuration, check_tangent};
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::{DMatrix, Vector3};
use vidyn_spatial::{Force, Inertia};

/// `A_G(q)` `(6, nv)`, rows `[linear; angular]` (module docs). O(n + nv), no allocation.
/// Fills placements, `ws.composite_inertias` (world frame) and `ws.centroidal_matrix`.
///
/// # Errors
/// Invalid `q`, or a model without mass.
pub fn centroidal_momentum_matrix<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    placements_unchecked(model, ws, q);
    for i in 0..model.nbodies() {
        ws.composite_inertias[i] = model.inertias[i].transformed(&ws.placements[i]);
    }
    let mut total = Inertia::zero();
    for i in (0..model.nbodies()).rev() {
        let composite = ws.composite_inertias[i];
        match model.parents[i] {
            Some(p) => ws.composite_inertias[p] = ws.composite_inertias[p] + composite,
            None => total = total + composite,
        }
    }
    if total.mass <= 0.0 {
        return Err(RbdError::InvalidModel(format!("model '{}' has no mass: its centroidal momentum is undefined", model.name)));
    }
    let c: Vector3<f64> = total.com;
    for (j, col, s) in world_columns(model, &ws.placements) {
        let f = ws.composite_inertias[j].mul_motion(&s);
        let about_com = Force::new(f.linear, f.angular - c.cross(&f.linear));
        ws.centroidal_matrix.fixed_view_mut::<6, 1>(0, col).copy_from(&about_com.to_vector());
    }
    Ok(&ws.centroidal_matrix)
}

/// The centroidal momentum `h_G = A_G(q) v` `[linear; angular]` (module docs). O(n + nv),
/// no allocation; fills what [`centroidal_momentum_matrix`] fills.
///
/// # Errors
/// Invalid `q` or `v`, or a model without mass.
pub fn centroidal_momentum(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64]) -> Result<Force> {
    check_tangent(model, v, "v")?;
    let ag = centroidal_momentum_matrix(model, ws, q)?;
    let h = ag.column_iter().zip(v).fold(nalgebra::Vector6::zeros(), |acc, (col, &vi)| acc + col * vi);
    Ok(Force::from_vector(&h))
}

/// `dA_G/dt(q, v)` `(6, nv)` with `ḣ_G = A_G a + (dA_G/dt) v` (Pinocchio's `dccrba`). A world
/// inertia moves as `d(⁰I)/dt = v̄ ×* ⁰I − ⁰I v̄ ×` with its body's world velocity `v̄`, so the
/// composite `Ċ_j = Σ_{i⪰j} (v̄_i ×* ⁰I_i − ⁰I_i v̄_i ×)` (one more backward pass, 6×6) and a
/// column `C_j S̄_j` moves as `Ċ_j S̄_j + C_j (v̄_j ×ₘ S̄_j)`; moving it to the centre of mass
/// adds `−ċ × f` to the angular part, `ċ = h_lin / M`. O(n + nv). Fills what
/// [`centroidal_momentum_matrix`] fills, velocities and `ws.centroidal_rate`; no allocation.
///
/// # Errors
/// Invalid `q` or `v`, or a model without mass.
pub fn centroidal_momentum_matrix_time_variation<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64]) -> Result<&'w DMatrix<f64>> {
    check_tangent(model, v, "v")?;
    centroidal_momentum_matrix(model, ws, q)?;
    crate::algorithms::kinematics::velocities_unchecked(model, ws, v);
    for i in 0..model.nbodies() {
        let world_velocity = ws.placements[i].act_motion(&ws.velocities[i]);
        let inertia = model.inertias[i].transformed(&ws.placements[i]).to_matrix();
        ws.composite_inertia_rates[i] = world_velocity.cross_force_matrix() * inertia - inertia * world_velocity.cross_motion_matrix();
    }
    for i in (0..model.nbodies()).rev() {
        if let Some(p) = model.parents[i] {
            let rate = ws.composite_inertia_rates[i];
            ws.composite_inertia_rates[p] += rate;
        }
    }
    let total = (0..model.nbodies()).filter(|&i| model.parents[i].is_none()).fold(Inertia::zero(), |acc, i| acc + ws.composite_inertias[i]);
    let (mass, c) = (total.mass, total.com);
    let linear_momentum = ws.centroidal_matrix.column_iter().zip(v).fold(Vector3::zeros(), |acc, (col, &vi)| acc + col.fixed_rows::<3>(0) * vi);
    let c_dot = linear_momentum / mass;
    for (j, col, s) in world_columns(model, &ws.placements) {
        let world_velocity = ws.placements[j].act_motion(&ws.velocities[j]);
        let f = ws.composite_inertias[j].mul_motion(&s);
        let f_dot =
            Force::from_vector(&(ws.composite_inertia_rates[j] * s.to_vector())) + ws.composite_inertias[j].mul_motion(&world_velocity.cross_motion(&s));
        let about_com = Force::new(f_dot.linear, f_dot.angular - c_dot.cross(&f.linear) - c.cross(&f_dot.linear));
        ws.centroidal_rate.fixed_view_mut::<6, 1>(0, col).copy_from(&about_com.to_vector());
    }
    Ok(&ws.centroidal_rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::random_tree;
    use crate::{com_jacobian, kinetic_energy, random_configuration, Joint};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The linear rows are `M J_c`, and `½ vᵀ M v` is at least `|h_lin|²/2M` (the kinetic
    /// energy of the centre of mass; the rest is relative motion). Pinocchio's `ccrba` is the
    /// oracle of the whole matrix (`tests/test_pinocchio_oracle.py`).
    #[test]
    fn centroidal_identities() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for seed in 0..5 {
            let model = random_tree(6, seed, &Joint::examples());
            let mut ws = model.workspace();
            let q = random_configuration(&model, &mut rng);
            let v: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-1.0..1.0)).collect();
            let ag = centroidal_momentum_matrix(&model, &mut ws, &q).unwrap().clone();
            let jc = com_jacobian(&model, &mut ws, &q).unwrap().clone();
            let mass = model.total_mass();
            assert!((ag.rows(0, 3) - jc * mass).amax() < 1e-12 * mass, "seed {seed}");
            let h = centroidal_momentum(&model, &mut ws, &q, &v).unwrap();
            let ke = kinetic_energy(&model, &mut ws, &q, &v).unwrap();
            assert!(ke + 1e-12 >= h.linear.norm_squared() / (2.0 * mass), "seed {seed}");
        }
    }

    /// `dA_G/dt` against central differences of `A_G` along `integrate(q, t v)` (h = 1e-6:
    /// error ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10), trees with every joint kind.
    #[test]
    fn the_time_variation_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        for seed in 0..5 {
            let model = random_tree(6, seed, &Joint::examples());
            let mut ws = model.workspace();
            let q = random_configuration(&model, &mut rng);
            let v: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-1.0..1.0)).collect();
            let h = 1e-6;
            let at = |t: f64, ws: &mut Workspace| {
                let qt = crate::integrate(&model, &q, &v.iter().map(|x| t * x).collect::<Vec<_>>()).unwrap();
                centroidal_momentum_matrix(&model, ws, &qt).unwrap().clone()
            };
            let fd = (at(h, &mut ws) - at(-h, &mut ws)) / (2.0 * h);
            let rate = centroidal_momentum_matrix_time_variation(&model, &mut ws, &q, &v).unwrap();
            assert!((fd - rate).amax() < 1e-8, "seed {seed}");
        }
    }
}
