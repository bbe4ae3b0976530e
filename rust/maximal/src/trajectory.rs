//! Whole trajectories of the maximal-coordinate integrator.

use crate::body::{BodyState, Pose};
use crate::error::{MaximalError, Result};
use crate::integrator::MaximalIntegrator;

/// A trajectory of `N` steps: `N + 1` knots of `nbodies` body states (row-major, knot by
/// knot), with per-knot diagnostics and, for mechanisms built from a model, the minimal
/// coordinates of every knot.
#[derive(Clone, Debug, PartialEq)]
pub struct MaximalTrajectory {
    pub nbodies: usize,
    pub steps: usize,
    /// `(N+1)·nbodies` body states, knot `k` at `[k·nbodies, (k+1)·nbodies)`.
    pub states: Vec<BodyState>,
    /// `(N+1)·nq` minimal coordinates (empty without a model).
    pub q: Vec<f64>,
    pub nq: usize,
    /// `(N,)` Newton iterations per step.
    pub iterations: Vec<usize>,
    /// `(N+1,)` energy ([`MaximalIntegrator::energy`]) at every knot.
    pub energy: Vec<f64>,
    /// `(N+1,)` largest constraint violation `|g|∞` at every knot.
    pub constraint_violation: Vec<f64>,
}

impl MaximalTrajectory {
    /// The body states of knot `k`.
    #[must_use]
    pub fn knot(&self, k: usize) -> &[BodyState] {
        &self.states[k * self.nbodies..(k + 1) * self.nbodies]
    }
}

/// Simulates from `initial` (one state per body) under the generalised forces `u`
/// (row-major `(N, nu)`; for `nu = 0` pass an empty slice and `steps`). Each step warm-starts
/// from the previous one.
pub fn rollout(vi: &MaximalIntegrator, initial: &[BodyState], u: &[f64], steps: usize) -> Result<MaximalTrajectory> {
    let mech = vi.mechanism();
    let (nb, nu) = (mech.nbodies(), mech.nu);
    if !(u.is_empty() || u.len() == steps * nu) {
        return Err(MaximalError::InvalidParameter(format!("u has {} entries, expected steps·nu = {}·{nu}", u.len(), steps)));
    }
    let nq = mech.model.as_ref().map_or(0, |m| m.nq);
    let mut traj = MaximalTrajectory {
        nbodies: nb,
        steps,
        states: vec![BodyState::default(); (steps + 1) * nb],
        q: vec![0.0; (steps + 1) * nq],
        nq,
        iterations: vec![0; steps],
        energy: vec![0.0; steps + 1],
        constraint_violation: vec![0.0; steps + 1],
    };
    if initial.len() != nb {
        return Err(MaximalError::InvalidParameter(format!("initial state has {} bodies, expected {nb}", initial.len())));
    }
    traj.states[..nb].copy_from_slice(initial);
    let mut ws = vi.workspace();
    for k in 0..steps {
        let (done, rest) = traj.states.split_at_mut((k + 1) * nb);
        let uk = if u.is_empty() { u } else { &u[k * nu..(k + 1) * nu] };
        traj.iterations[k] = vi.step(&mut ws, k, &done[k * nb..], uk, None, &mut rest[..nb])?.iterations;
    }
    let mut poses = vec![Pose::default(); nb];
    for k in 0..=steps {
        let knot = &traj.states[k * nb..(k + 1) * nb];
        traj.energy[k] = vi.energy(knot);
        traj.constraint_violation[k] = vi.constraint_violation(knot);
        if nq > 0 {
            for (p, s) in poses.iter_mut().zip(knot) {
                *p = s.pose;
            }
            mech.configuration(&poses, &mut traj.q[k * nq..(k + 1) * nq])?;
        }
    }
    Ok(traj)
}

/// [`rollout`] from minimal coordinates `(q0, v0)` (see [`crate::Mechanism::state_from_minimal`]).
pub fn rollout_minimal(vi: &MaximalIntegrator, q0: &[f64], v0: &[f64], u: &[f64], steps: usize) -> Result<MaximalTrajectory> {
    let mut initial = vec![BodyState::default(); vi.mechanism().nbodies()];
    vi.mechanism().state_from_minimal(q0, v0, vi.dt(), &mut initial)?;
    rollout(vi, &initial, u, steps)
}
