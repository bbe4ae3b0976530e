//! A maximal-coordinate variational integrator ([`MaximalIntegrator`], Brüdigam & Manchester
//! 2020) as [`crate::Dynamics`] for the optimisers, in joint coordinates.
//!
//! The maximal state lives on a manifold (unit quaternions, joint constraints), which the
//! optimisers' vector-space states cannot carry; for a loop-free tree of revolute and prismatic
//! joints the state `x = (q_k, v_k)`, `v_k = (q_k − q_{k−1})/Δt`, describes it exactly
//! ([`JointCoordinates`]). [`MaximalDynamics`] is the generic adapter [`SystemDynamics`] on
//! that system: a rollout carries the knots and multipliers from step to step as the
//! integrator's own rollout does, and `A`, `B` are the exact minimal-coordinate linearisation
//! ([`MaximalIntegrator::linearize_minimal`]). Controls are the joint forces of the
//! `actuated` joints.

use crate::error::{OptimError, Result};
use crate::state_space::StateSpace;
use crate::system_dynamics::SystemDynamics;
use vidyn_maximal::{JointCoordinates, MaximalError, MaximalIntegrator};

/// [`MaximalIntegrator`] as [`crate::Dynamics`]: `x = (q, v)` (nx = 2n), controls on the
/// `actuated` joints.
pub type MaximalDynamics<'a> = SystemDynamics<JointCoordinates<'a>>;

impl From<MaximalError> for OptimError {
    fn from(e: MaximalError) -> Self {
        OptimError::InvalidInput(format!("maximal-coordinate integrator: {e}"))
    }
}

impl<'a> SystemDynamics<JointCoordinates<'a>> {
    /// `integrator` in joint coordinates, controls on `actuated` (strictly increasing joint
    /// indices; `None`: all).
    ///
    /// # Errors
    /// Unless the mechanism comes from a model whose joints are all revolute or prismatic,
    /// without loop closures.
    pub fn in_joint_coordinates(integrator: &'a MaximalIntegrator, actuated: Option<Vec<usize>>) -> Result<Self> {
        let system = JointCoordinates::new(integrator)?;
        let n = vidyn_system::DiscreteDynamics::nq(&system);
        SystemDynamics::new(system, StateSpace::euclidean(2 * n), actuated)
    }
}
