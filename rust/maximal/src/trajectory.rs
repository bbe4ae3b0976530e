//! Whole trajectories of the maximal-coordinate integrator.

use crate::body::{BodyState, Pose};
use crate::error::{MaximalError, Result};
use crate::integrator::MaximalIntegrator;
use nalgebra::{DMatrix, Vector6};
use rayon::prelude::*;
use vidyn_system::engine::run_rows;
use vidyn_system::{BatchError, Control};

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

/// Output buffers of [`linearize_trajectory`], row-major (C order): `a` `(N, 12·nb, 12·nb)`
/// and `b` `(N, 12·nb, nu)`.
pub struct LinearizationOut<'a> {
    pub a: &'a mut [f64],
    pub b: &'a mut [f64],
}

/// Exact linearisation of every step of `traj` (produced by [`rollout`] with the same
/// integrator; see [`MaximalIntegrator::linearize`]) into `out`, in parallel on the batch
/// engine's pool (the calling thread computes steps too, one workspace per participant; each
/// step re-solved from its stored knot with Newton started from zero multipliers, so the
/// results do not depend on the thread count). `control`
/// counts steps; once it is cancelled, steps not started are skipped and the call fails with
/// [`MaximalError::Cancelled`]. Returns the largest deviation of a re-solved knot from the
/// stored one (a consistency check: ~ the Newton tolerance for a trajectory of [`rollout`]).
///
/// # Errors
/// Buffers or a trajectory of the wrong size; the first step that fails (in step order).
pub fn linearize_trajectory(vi: &MaximalIntegrator, control: &Control, traj: &MaximalTrajectory, out: LinearizationOut<'_>) -> Result<f64> {
    let (nb, nu, steps) = (traj.nbodies, vi.mechanism().nu, traj.steps);
    let nx = 12 * nb;
    if nb != vi.mechanism().nbodies() || !(traj.u.is_empty() || traj.u.len() == steps * nu) {
        return Err(MaximalError::InvalidParameter("the trajectory does not belong to this integrator".to_string()));
    }
    if out.a.len() != steps * nx * nx || out.b.len() != steps * nx * nu {
        return Err(MaximalError::InvalidParameter(format!(
            "A has {} and B {} entries; expected N·(12nb)² = {} and N·12nb·nu = {}",
            out.a.len(),
            out.b.len(),
            steps * nx * nx,
            steps * nx * nu
        )));
    }
    let mut defects = vec![0.0; steps];
    let items = out
        .a
        .par_chunks_mut((nx * nx).max(1))
        .zip(out.b.par_chunks_mut((nx * nu).max(1)))
        .zip(defects.par_iter_mut())
        .map(|((a, b), d)| (a, b, std::slice::from_mut(d)));
    let init = || (vi.workspace(), vec![crate::BodyState::default(); nb], DMatrix::zeros(nx, nx), DMatrix::zeros(nx, nu));
    let failures = run_rows(control, items, &init, 1, |(ws, next, am, bm), k, (a, b, defect)| {
        let u = if traj.u.is_empty() { &[][..] } else { &traj.u[k * nu..(k + 1) * nu] };
        // Newton from zero multipliers, so that a step does not depend on which steps the
        // workspace solved before (nor on the thread count)
        ws.lambda.fill(Vector6::zeros());
        vi.linearize(ws, k, traj.knot(k), u, next, am, bm)?;
        for (r, row) in a.chunks_exact_mut(nx.max(1)).enumerate() {
            row.iter_mut().enumerate().for_each(|(c, x)| *x = am[(r, c)]);
        }
        for (r, row) in b.chunks_exact_mut(nu.max(1)).enumerate().take(nx) {
            row.iter_mut().enumerate().for_each(|(c, x)| *x = bm[(r, c)]);
        }
        defect[0] = next
            .iter()
            .zip(traj.knot(k + 1))
            .fold(0.0_f64, |m, (x, y)| m.max((x.pose.x - y.pose.x).amax()).max((x.v - y.v).amax()).max((x.w - y.w).amax()).max(x.pose.q.angle_to(&y.pose.q)));
        Ok(())
    });
    match failures.into_iter().next() {
        None => Ok(defects.into_iter().fold(0.0, f64::max)),
        Some((_, BatchError::Core(e))) => Err(e),
        Some((k, BatchError::Cancelled)) => Err(MaximalError::Cancelled { step: k }),
        Some((k, e)) => Err(MaximalError::InvalidParameter(format!("step {k}: {e}"))),
    }
}
