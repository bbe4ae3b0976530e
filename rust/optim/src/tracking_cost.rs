//! The optimisers' built-in cost assembled from its parts: quadratic tracking of a reference
//! on the VI state `(q, p)` or on `(q, v)`, plus tracked points (frames reaching targets,
//! swing feet following paths, the centre of mass following a reference). What the Python
//! `optim.ilqr` / `optim.projection` keywords build, for Rust callers too.

use crate::contact_force_cost::{ContactForceCost, FrictionCone};
use crate::cost::{Cost, QuadraticCost, VelocityCost};
use crate::error::Result;
use crate::point_cost::{PointCost, PointTrack};
use std::sync::Arc;
use vidyn_rbd::Model;
use vidyn_vi::{SolvedSteps, VariationalIntegrator};

/// Friction cones on the contact forces of `vi`'s steps ([`ContactForceCost`]), the controls
/// being the forces of the `actuated` joints (all when `None`); the multipliers are read from
/// `solved` (the optimised dynamics' store) where it has them.
#[derive(Clone, Debug)]
pub struct FrictionCones {
    pub vi: Arc<VariationalIntegrator>,
    pub actuated: Option<Vec<usize>>,
    pub cones: Vec<FrictionCone>,
    pub solved: Option<Arc<SolvedSteps>>,
}

/// The parts of the built-in cost.
#[derive(Clone, Debug)]
pub struct TrackingCost {
    /// Weights and references, on `(q, p)`, or on `(q, v)` when `on_velocity`.
    pub quadratic: QuadraticCost,
    /// Whether `quadratic` weighs the velocity `v = M(q)⁻¹ p` instead of the momentum
    /// ([`VelocityCost`]).
    pub on_velocity: bool,
    /// Points held near their targets ([`PointCost`]), each with `steps + 1` weights.
    pub tracks: Vec<PointTrack>,
    /// Friction cones on the contact forces, if any.
    pub friction: Option<FrictionCones>,
}

impl TrackingCost {
    /// The cost over `steps` steps of `model`'s VI, `nx` entries per state: the quadratic
    /// part (mapped through the Legendre transform when `on_velocity`), plus the tracked
    /// points. Errors when the references or weights do not cover `steps`, or a part refuses
    /// the model (frame index, a velocity cost with Lie-group joints).
    pub fn build(self, model: &Arc<Model>, steps: usize, nx: usize) -> Result<Box<dyn Cost>> {
        self.quadratic.check_horizon(steps)?;
        let base: Box<dyn Cost> = if self.on_velocity { Box::new(VelocityCost::new(Arc::clone(model), self.quadratic)?) } else { Box::new(self.quadratic) };
        let tracked: Box<dyn Cost> = if self.tracks.is_empty() { base } else { Box::new(PointCost::new(Arc::clone(model), base, nx, self.tracks, steps)?) };
        Ok(match self.friction {
            Some(f) if !f.cones.is_empty() => {
                let cost = ContactForceCost::new(f.vi, tracked, f.actuated, f.cones)?;
                Box::new(match f.solved {
                    Some(solved) => cost.with_solved_steps(solved),
                    None => cost,
                })
            }
            _ => tracked,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DMatrix;
    use vidyn_rbd::builders::pendulum_chain;

    /// The assembled cost is the sum of its parts: with the frame term it adds
    /// `½ w |p_tip(q) − p*|²` (the tip of a 3-link chain at `q` = 0 hangs at (0, 0, −3)), and
    /// on the velocity state it weighs `M⁻¹ p`, which differs from `p` (a wiring slip would
    /// give the momentum cost back).
    #[test]
    fn the_parts_add_up() {
        let model = Arc::new(pendulum_chain(3, false));
        let (n, steps) = (3, 2);
        let quadratic = || {
            QuadraticCost::new(
                vec![DMatrix::identity(2 * n, 2 * n)],
                vec![DMatrix::identity(n, n)],
                DMatrix::identity(2 * n, 2 * n),
                vec![0.0; 2 * n],
                vec![0.0; n],
            )
            .unwrap()
        };
        let (x, u) = ([0.0, 0.0, 0.0, 0.3, -0.2, 0.1], [0.5, 0.0, 0.0]);
        let plain = TrackingCost { quadratic: quadratic(), on_velocity: false, tracks: Vec::new(), friction: None }.build(&model, steps, 2 * n).unwrap();
        let base = plain.running_value(0, &x, &u).unwrap();
        assert!((base - 0.5 * (0.09 + 0.04 + 0.01 + 0.25)).abs() < 1e-15, "{base}");
        let reach = PointTrack::reach(model.frame_index("tip").unwrap(), [0.0, 0.0, -2.0], 4.0, 1.0, steps);
        let reaching = TrackingCost { quadratic: quadratic(), on_velocity: false, tracks: vec![reach], friction: None }.build(&model, steps, 2 * n).unwrap();
        assert!((reaching.running_value(0, &x, &u).unwrap() - (base + 0.5 * 4.0 * 1.0)).abs() < 1e-12);
        let velocity = TrackingCost { quadratic: quadratic(), on_velocity: true, tracks: Vec::new(), friction: None }.build(&model, steps, 2 * n).unwrap();
        assert!((velocity.running_value(0, &x, &u).unwrap() - base).abs() > 1e-3);
    }
}
