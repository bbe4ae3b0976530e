//! A maximal-coordinate variational integrator ([`MaximalIntegrator`], Brüdigam & Manchester
//! 2020) as [`Dynamics`] for the optimisers, in minimal coordinates.
//!
//! The maximal state lives on a manifold (unit quaternions, joint constraints), which the
//! optimisers' vector-space states cannot carry. For a mechanism built from a loop-free tree of
//! revolute and prismatic joints the knots `(z_k, z_{k−1})` are determined by the joint
//! coordinates `(q_k, q_{k−1})` and back, so the state `x = (q_k, v_k)` with
//! `v_k = (q_k − q_{k−1})/Δt` describes the maximal integrator exactly
//! ([`vidyn_maximal::Mechanism::state_from_minimal`]): a rollout steps the maximal integrator
//! and reads each new knot's joint coordinates, and `A`, `B` are its exact minimal-coordinate
//! linearisation ([`MaximalIntegrator::linearize_minimal`]). Controls are the joint forces of
//! the `actuated` joints.

use crate::actuation::Actuation;
use crate::dynamics::{Dynamics, Jacobians, Policy};
use crate::error::{OptimError, Result};
use nalgebra::DMatrix;
use rayon::prelude::*;
use vidyn_batch::ScratchPool;
use vidyn_maximal::{BodyState, MaximalError, MaximalIntegrator, Pose};
use vidyn_vi::StepInput;

/// [`MaximalIntegrator`] as [`Dynamics`]: `x = (q, v)` (nx = 2n), controls on `actuated` joints.
#[derive(Clone, Debug)]
pub struct MaximalDynamics<'a> {
    pub integrator: &'a MaximalIntegrator,
    n: usize,
    actuation: Actuation,
    /// Scratch of single steps ([`Dynamics::step`]), one per concurrent caller.
    step_pool: std::sync::Arc<ScratchPool<StepScratch>>,
}

/// What one step from a minimal state needs: the integrator's workspace, the knots before and
/// after, the bodies' poses and the full controls.
#[derive(Debug)]
struct StepScratch {
    ws: vidyn_maximal::MaximalWorkspace,
    state: Vec<BodyState>,
    next: Vec<BodyState>,
    poses: Vec<Pose>,
    full: Vec<f64>,
}

fn maximal_error(e: MaximalError) -> OptimError {
    OptimError::InvalidInput(format!("maximal-coordinate integrator: {e}"))
}

impl<'a> MaximalDynamics<'a> {
    /// `actuated`: strictly increasing joint indices (`None`: all). Errors unless the mechanism
    /// comes from a model whose joints are all revolute or prismatic, without loop closures.
    pub fn new(integrator: &'a MaximalIntegrator, actuated: Option<Vec<usize>>) -> Result<Self> {
        let mech = integrator.mechanism();
        let model = mech.require_model().map_err(maximal_error)?;
        let n = model.nv;
        if mech.joints.len() != mech.nbodies() || model.joints.iter().any(|j| j.nv() != 1 || j.nq() != 1) {
            return Err(OptimError::InvalidInput(
                "MaximalDynamics needs a loop-free tree of revolute and prismatic joints (its state is the joint coordinates)".into(),
            ));
        }
        Ok(Self { integrator, n, actuation: Actuation::new(n, actuated)?, step_pool: std::sync::Arc::default() })
    }

    /// Which joints the controls act on.
    #[must_use]
    pub fn actuation(&self) -> &Actuation {
        &self.actuation
    }
}

impl Dynamics for MaximalDynamics<'_> {
    fn nx(&self) -> usize {
        2 * self.n
    }
    fn nu(&self) -> usize {
        self.actuation.nu()
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        let (n, m, nx) = (self.n, self.actuation.nu(), 2 * self.n);
        if x0.len() != nx {
            return Err(OptimError::InvalidInput(format!("x0 has {} entries, expected 2n = {nx}", x0.len())));
        }
        let (mi, mech, dt) = (self.integrator, self.integrator.mechanism(), self.integrator.dt());
        let nb = mech.nbodies();
        let mut x = vec![0.0; (steps + 1) * nx];
        let mut u = vec![0.0; steps * m];
        x[..nx].copy_from_slice(x0);
        let mut ws = mi.workspace();
        let (mut state, mut next) = (vec![BodyState::default(); nb], vec![BodyState::default(); nb]);
        mech.state_from_minimal(&x0[..n], &x0[n..], dt, &mut state).map_err(maximal_error)?;
        let mut poses = vec![Pose::default(); nb];
        let mut full = vec![0.0; n];
        for k in 0..steps {
            let (done, rest) = x.split_at_mut((k + 1) * nx);
            let xk = &done[k * nx..];
            let uk = &mut u[k * m..(k + 1) * m];
            policy(k, xk, uk);
            if uk.iter().any(|v| !v.is_finite()) {
                return Err(OptimError::InvalidInput(format!("the policy returned non-finite controls at step {k}")));
            }
            self.actuation.expand(uk, &mut full);
            mi.step(&mut ws, k, &state, &full, None, &mut next).map_err(maximal_error)?;
            for (p, s) in poses.iter_mut().zip(&next) {
                *p = s.pose;
            }
            mech.configuration(&poses, &mut rest[..n]).map_err(maximal_error)?;
            for i in 0..n {
                rest[n + i] = (rest[i] - xk[i]) / dt;
            }
            std::mem::swap(&mut state, &mut next);
        }
        Ok((x, u))
    }
    /// Step `k` from any state `x = (q, v)`: the knots its joint coordinates determine
    /// ([`vidyn_maximal::Mechanism::state_from_minimal`]), one step of the integrator, and the
    /// next knot's coordinates and `v_{k+1} = (q_{k+1} − q_k)/Δt`; what multiple shooting
    /// needs. `guess` is not used (the step starts from the integrator's own prediction).
    fn step(&self, k: usize, x: &[f64], u: &[f64], _guess: Option<&[f64]>, next: &mut [f64]) -> Result<()> {
        let (n, nx) = (self.n, 2 * self.n);
        if x.len() != nx || next.len() != nx || u.len() != self.actuation.nu() {
            return Err(OptimError::InvalidInput(format!("step: x and next need 2n = {nx} entries and u {}", self.actuation.nu())));
        }
        let (mi, mech) = (self.integrator, self.integrator.mechanism());
        let nb = mech.nbodies();
        let mut s = self.step_pool.take(|| StepScratch {
            ws: mi.workspace(),
            state: vec![BodyState::default(); nb],
            next: vec![BodyState::default(); nb],
            poses: vec![Pose::default(); nb],
            full: vec![0.0; n],
        });
        let StepScratch { ws, state, next: after, poses, full } = &mut *s;
        ws.forget_multipliers(); // whichever caller used this scratch last
        mech.state_from_minimal(&x[..n], &x[n..], mi.dt(), state).map_err(maximal_error)?;
        self.actuation.expand(u, full);
        mi.step(ws, k, state, full, None, after).map_err(maximal_error)?;
        for (p, b) in poses.iter_mut().zip(after.iter()) {
            *p = b.pose;
        }
        mech.configuration(poses, &mut next[..n]).map_err(maximal_error)?;
        for i in 0..n {
            next[n + i] = (next[i] - x[i]) / mi.dt();
        }
        self.step_pool.give_back(s);
        Ok(())
    }
    /// Every step in parallel (one workspace per worker), each re-solved from its knot.
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians> {
        let (n, m, nx) = (self.n, self.actuation.nu(), 2 * self.n);
        let steps = u.len() / m;
        if x.len() != (steps + 1) * nx {
            return Err(OptimError::InvalidInput(format!("x has {} entries, expected (N+1)·2n = {}", x.len(), (steps + 1) * nx)));
        }
        let results: Vec<Result<(DMatrix<f64>, DMatrix<f64>)>> = vidyn_batch::install(|| {
            (0..steps)
                .into_par_iter()
                .map_init(
                    || self.integrator.workspace(),
                    |ws, k| {
                        let xk = &x[k * nx..(k + 1) * nx];
                        let mut full = vec![0.0; n];
                        self.actuation.expand(&u[k * m..(k + 1) * m], &mut full);
                        let (mut qn, mut vn) = (vec![0.0; n], vec![0.0; n]);
                        let (mut a, mut b_full, mut b) = (DMatrix::zeros(nx, nx), DMatrix::zeros(nx, n), DMatrix::zeros(nx, m));
                        ws.forget_multipliers(); // whichever step this worker solved before
                        self.integrator
                            .linearize_minimal(ws, StepInput::new(k, &xk[..n], &xk[n..], &full), &mut qn, &mut vn, &mut a, &mut b_full)
                            .map_err(maximal_error)?;
                        self.actuation.select_columns(&b_full, &mut b);
                        Ok((a, b))
                    },
                )
                .collect()
        });
        let mut a = Vec::with_capacity(steps);
        let mut b = Vec::with_capacity(steps);
        for r in results {
            let (ak, bk) = r?;
            a.push(ak);
            b.push(bk);
        }
        Ok((a, b))
    }
}
