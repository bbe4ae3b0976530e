//! `v = M(q)⁻¹ p` at a configuration a point state already holds, in the world frame.
//!
//! The energy check of a step ([`crate::VariationalIntegrator::knot_energy`], module `energy_check`)
//! needs the velocity `v = M⁻¹ p` of its end knot `(q_{k+1}, p_{k+1})`, and the step's solve
//! has just configured a point state there (world placements, joint columns `S̄_i` and body
//! inertias `M̄_i`, module `point`); the Newton start of the next step (`s ≥ 2`, module
//! `predictor`) needs the same velocity at the same knot. The articulated-body algorithm at rest and without
//! gravity (Featherstone 2008, §7.3) solves `M v = p` from those fields with every quantity in
//! the world frame, so no articulated inertia moves between frames (Pinocchio's ABA works in
//! the world frame for the same reason):
//!
//! * leaves to root: `I^A_i = M̄_i + Σ_{c ∈ children(i)} (I^A_c − U_c U_cᵀ / D_c)`,
//!   `U_i = I^A_i S̄_i`, `D_i = S̄_iᵀ U_i`, the bias `b_i = Σ_c (b_c + U_c y_c / D_c)` and
//!   `y_i = p_i − S̄_iᵀ b_i`;
//! * root to leaves: `v_i = (y_i − U_iᵀ a_λ) / D_i`, `a_i = a_λ + S̄_i v_i` (`a` of a root's
//!   parent zero).
//!
//! `vidyn_rbd::mass_solve` computes the placements again and carries each articulated inertia
//! into its parent's frame (a 6×6 congruence per body); on the 3-D 50-link chain it was a sixth
//! of a midpoint step. Same result to round-off (`tests::matches_the_rbd_mass_solve`).

use crate::point::PointState;
use nalgebra::{Matrix6, Vector6};
use vidyn_rbd::{Model, RbdError};

/// Scratch of [`PointState::mass_solve`], `(n,)` per field, allocated once per workspace.
#[derive(Clone, Debug)]
pub(crate) struct PointMassSolve {
    /// The children's shares of the articulated inertias, `Σ_c (I^A_c − U_c U_cᵀ / D_c)`.
    articulated: Vec<Matrix6<f64>>,
    /// `U_i = I^A_i S̄_i` and `D_i = S̄_iᵀ U_i`.
    u: Vec<Vector6<f64>>,
    d: Vec<f64>,
    /// Bias forces `b_i` (summed from the children), then the accelerations `a_i` of the
    /// forward pass.
    bias: Vec<Vector6<f64>>,
    /// `y_i = p_i − S̄_iᵀ b_i`.
    y: Vec<f64>,
}

impl PointMassSolve {
    pub(crate) fn new(n: usize) -> Self {
        Self { articulated: vec![Matrix6::zeros(); n], u: vec![Vector6::zeros(); n], d: vec![0.0; n], bias: vec![Vector6::zeros(); n], y: vec![0.0; n] }
    }
}

impl PointState {
    /// `v = M(q)⁻¹ p` at the configuration of the last `update_configuration` (1-dof joints,
    /// module docs). O(n), no allocation.
    ///
    /// # Errors
    /// [`RbdError::NotPositiveDefinite`] when a pivot `D_i` is not above `10⁻¹²` of the largest
    /// entry of its articulated inertia (a massless subtree), as `vidyn_rbd::mass_solve`.
    pub(crate) fn mass_solve(&self, model: &Model, p: &[f64], s: &mut PointMassSolve, v: &mut [f64]) -> Result<(), RbdError> {
        let n = model.nbodies();
        // the children's shares of each articulated inertia and bias, summed below
        s.articulated[..n].fill(Matrix6::zeros());
        s.bias[..n].fill(Vector6::zeros());
        for i in (0..n).rev() {
            let column = self.columns[i].to_vector();
            // the parent comes before the body (`parents[i] < i`): its sum is in `head`
            let (head, tail) = s.articulated.split_at_mut(i);
            let ia = &(self.body_inertias[i].to_matrix() + tail[0]);
            let u = ia * column;
            let d = column.dot(&u);
            // the largest entry of a positive-definite matrix is on its diagonal
            if d.is_nan() || d <= 1e-12 * ia.diagonal().max() {
                return Err(RbdError::NotPositiveDefinite { joint: model.joint_names[i].clone() });
            }
            let y = p[i] - column.dot(&s.bias[i]);
            (s.u[i], s.d[i], s.y[i]) = (u, d, y);
            if let Some(parent) = model.parents[i] {
                // in place: I^A_λ += I^A_i − U_i (U_i / D_i)ᵀ, no 6×6 temporaries
                let w = u / d;
                for ((mut target, own), wc) in head[parent].column_iter_mut().zip(ia.column_iter()).zip(w.iter()) {
                    for ((t, o), ur) in target.iter_mut().zip(own.iter()).zip(u.iter()) {
                        *t += o - ur * wc;
                    }
                }
                let carried = s.bias[i] + u * (y / d);
                s.bias[parent] += carried;
            }
        }
        // the forward pass keeps the accelerations in `bias` (each read before it is overwritten)
        for i in 0..n {
            let parent_acceleration = model.parents[i].map_or_else(Vector6::zeros, |parent| s.bias[parent]);
            let vi = (s.y[i] - s.u[i].dot(&parent_acceleration)) / s.d[i];
            v[i] = vi;
            s.bias[i] = parent_acceleration + self.columns[i].to_vector() * vi;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vidyn_rbd::builders::{pendulum_chain, random_tree};
    use vidyn_rbd::Joint;

    /// On chains and random trees of revolute and prismatic joints at random configurations,
    /// the world-frame solve equals `vidyn_rbd::mass_solve` to round-off (relative 1e-12: both
    /// are backward-stable O(n) factorisations of a matrix of condition ≲ 1e4 here), and the
    /// point's gravity potential equals `vidyn_rbd::potential_energy` (the other half of the
    /// knot energy).
    #[test]
    fn matches_the_rbd_mass_solve() {
        let one_dof: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
        let models = [pendulum_chain(7, false), pendulum_chain(5, true), random_tree(9, 4, &one_dof), random_tree(15, 8, &one_dof)];
        for (k, model) in models.iter().enumerate() {
            let n = model.nv;
            let q: Vec<f64> = (0..n).map(|i| (1.3 * i as f64 + k as f64).sin()).collect();
            let p: Vec<f64> = (0..n).map(|i| (0.7 * i as f64 - 0.4 * k as f64).cos()).collect();
            let mut point = PointState::new(n);
            point.update_configuration(model, &model.joint_placements, &q);
            let (mut scratch, mut v) = (PointMassSolve::new(n), vec![0.0; n]);
            point.mass_solve(model, &p, &mut scratch, &mut v).unwrap();
            let expected = vidyn_rbd::mass_solve(model, &mut model.workspace(), &q, &p).unwrap().to_vec();
            let scale = expected.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
            for (a, b) in v.iter().zip(&expected) {
                assert!((a - b).abs() <= 1e-12 * scale, "model {k}: {a} vs {b}");
            }
            let (potential, expected) = (point.gravity_potential(model), vidyn_rbd::potential_energy(model, &mut model.workspace(), &q).unwrap());
            assert!((potential - expected).abs() <= 1e-12 * expected.abs().max(1.0), "model {k}: V {potential} vs {expected}");
        }
    }
}
