//! Whole trajectories of the maximal-coordinate integrator.

use crate::body::{BodyState, Pose};
use crate::error::{MaximalError, Result};
use crate::integrator::MaximalIntegrator;
use nalgebra::DMatrix;
use rayon::prelude::*;
use vidyn_batch::Control;

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
    /// `(N·nu,)` the generalised forces of every step (empty: none).
    pub u: Vec<f64>,
    pub nu: usize,
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

/// `len` default values, or [`MaximalError::TooLarge`] when `len` overflowed (`None`) or the
/// allocation is refused, instead of aborting the process.
fn filled<T: Clone + Default>(len: Option<usize>, what: &'static str, steps: usize) -> Result<Vec<T>> {
    let too_large = || MaximalError::TooLarge { what, steps };
    let len = len.ok_or_else(too_large)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| too_large())?;
    v.resize(len, T::default());
    Ok(v)
}

/// Simulates from `initial` (one state per body) under the generalised forces `u`
/// (row-major `(N, nu)`; for `nu = 0` pass an empty slice and `steps`). Each step warm-starts
/// from the previous one. `control` counts steps; cancelling it stops the rollout between
/// steps with [`MaximalError::Cancelled`].
pub fn rollout(vi: &MaximalIntegrator, control: &Control, initial: &[BodyState], u: &[f64], steps: usize) -> Result<MaximalTrajectory> {
    let mech = vi.mechanism();
    let (nb, nu) = (mech.nbodies(), mech.nu);
    if !(u.is_empty() || Some(u.len()) == steps.checked_mul(nu)) {
        return Err(MaximalError::InvalidParameter(format!("u has {} entries, expected steps·nu = {}·{nu}", u.len(), steps)));
    }
    if initial.len() != nb {
        return Err(MaximalError::InvalidParameter(format!("initial state has {} bodies, expected {nb}", initial.len())));
    }
    let nq = mech.model.as_ref().map_or(0, |m| m.nq);
    let knots = steps.checked_add(1);
    let mut traj = MaximalTrajectory {
        nbodies: nb,
        steps,
        states: filled(knots.and_then(|k| k.checked_mul(nb)), "the body states", steps)?,
        q: filled(knots.and_then(|k| k.checked_mul(nq)), "the configurations", steps)?,
        nq,
        u: u.to_vec(),
        nu,
        iterations: filled(Some(steps), "the iteration counts", steps)?,
        energy: filled(knots, "the energies", steps)?,
        constraint_violation: filled(knots, "the constraint violations", steps)?,
    };
    traj.states[..nb].copy_from_slice(initial);
    let mut ws = vi.workspace();
    for k in 0..steps {
        if control.is_cancelled() {
            return Err(MaximalError::Cancelled { step: k });
        }
        let (done, rest) = traj.states.split_at_mut((k + 1) * nb);
        let uk = if u.is_empty() { u } else { &u[k * nu..(k + 1) * nu] };
        traj.iterations[k] = vi.step(&mut ws, k, &done[k * nb..], uk, None, &mut rest[..nb])?.iterations;
        control.advance(1);
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
pub fn rollout_minimal(vi: &MaximalIntegrator, control: &Control, q0: &[f64], v0: &[f64], u: &[f64], steps: usize) -> Result<MaximalTrajectory> {
    let mut initial = vec![BodyState::default(); vi.mechanism().nbodies()];
    vi.mechanism().state_from_minimal(q0, v0, vi.dt(), &mut initial)?;
    rollout(vi, control, &initial, u, steps)
}

/// Exact linearisation of every step of a trajectory (see [`MaximalIntegrator::linearize`]):
/// `a[k]` (`12nb × 12nb`), `b[k]` (`12nb × nu`), computed in parallel (rayon, one workspace per
/// worker; each step re-solved from its stored knot, results independent of the thread count).
/// `max_defect` is the largest deviation of a re-solved knot from the stored one.
#[derive(Clone, Debug)]
pub struct MaximalLinearization {
    pub a: Vec<DMatrix<f64>>,
    pub b: Vec<DMatrix<f64>>,
    pub max_defect: f64,
}

/// Linearises every step of `traj` (produced by [`rollout`] with the same integrator).
pub fn linearize_trajectory(vi: &MaximalIntegrator, traj: &MaximalTrajectory) -> Result<MaximalLinearization> {
    let (nb, nu) = (traj.nbodies, vi.mechanism().nu);
    if nb != vi.mechanism().nbodies() || !(traj.u.is_empty() || traj.u.len() == traj.steps * nu) {
        return Err(MaximalError::InvalidParameter("the trajectory does not belong to this integrator".to_string()));
    }
    type Step = (DMatrix<f64>, DMatrix<f64>, f64);
    let results: Vec<Result<Step>> = (0..traj.steps)
        .into_par_iter()
        .map_init(
            || (vi.workspace(), vec![crate::BodyState::default(); nb]),
            |(ws, next), k| {
                let (mut a, mut b) = (DMatrix::zeros(12 * nb, 12 * nb), DMatrix::zeros(12 * nb, nu));
                let u = if traj.u.is_empty() { &[][..] } else { &traj.u[k * nu..(k + 1) * nu] };
                vi.linearize(ws, k, traj.knot(k), u, next, &mut a, &mut b)?;
                let defect = next.iter().zip(traj.knot(k + 1)).fold(0.0_f64, |m, (x, y)| {
                    m.max((x.pose.x - y.pose.x).amax()).max((x.v - y.v).amax()).max((x.w - y.w).amax()).max(x.pose.q.angle_to(&y.pose.q))
                });
                Ok((a, b, defect))
            },
        )
        .collect();
    let mut lin = MaximalLinearization { a: Vec::with_capacity(traj.steps), b: Vec::with_capacity(traj.steps), max_defect: 0.0 };
    for r in results {
        let (a, b, d) = r?;
        lin.a.push(a);
        lin.b.push(b);
        lin.max_defect = lin.max_defect.max(d);
    }
    Ok(lin)
}
