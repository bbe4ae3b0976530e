//! The maximal-coordinate integrator seen in joint coordinates, as a
//! [`vidyn_system::DiscreteDynamics`] system: what the optimisers iterate on.
//!
//! For a mechanism built from a loop-free tree of revolute and prismatic joints, the knots
//! `(z_k, z_{k−1})` are determined by the joint coordinates `(q_k, q_{k−1})` and back, so the
//! state `(q_k, v_k)` with `v_k = (q_k − q_{k−1})/Δt` describes the maximal integrator exactly
//! ([`crate::Mechanism::state_from_minimal`]): a step rebuilds the knots, takes one maximal step
//! and reads the new knot's joint coordinates ([`crate::Mechanism::configuration`]); `A`, `B`
//! are its exact minimal-coordinate linearisation ([`MaximalIntegrator::linearize_minimal`]).
//! Here `nq = nv = np = nu = n` (controls: every joint's force) and `p = v`.
//!
//! A step marked [`StepInput::continuing`] whose input is, bit for bit, the state the previous
//! step on the workspace returned carries that step's knots and multipliers over instead
//! (as the maximal integrator's own rollout does): the rebuilt knots would differ from the
//! stepped ones at round-off, and Newton would start from zero multipliers. Every other step
//! starts from zero multipliers and depends on its inputs only.

use crate::body::{BodyState, Pose};
use crate::error::{MaximalError, Result};
use crate::integrator::{MaximalIntegrator, MaximalWorkspace};
use nalgebra::DMatrix;
use vidyn_system::{matrix_to_rows, BatchError, DiscreteDynamics, StepInput};

/// A [`MaximalIntegrator`] in joint coordinates (module docs).
#[derive(Clone, Copy, Debug)]
pub struct JointCoordinates<'a> {
    integrator: &'a MaximalIntegrator,
    n: usize,
}

impl<'a> JointCoordinates<'a> {
    /// # Errors
    /// Unless the mechanism comes from a model whose joints are all revolute or prismatic,
    /// without loop closures (its joint coordinates would not determine the knots).
    pub fn new(integrator: &'a MaximalIntegrator) -> Result<Self> {
        let mech = integrator.mechanism();
        let model = mech.require_model()?;
        if mech.joints.len() != mech.nbodies() || model.joints.iter().any(|j| j.nv() != 1 || j.nq() != 1) {
            return Err(MaximalError::InvalidParameter("joint coordinates need a loop-free tree of revolute and prismatic joints (they are the state)".into()));
        }
        Ok(Self { integrator, n: model.nv })
    }

    /// The integrator seen.
    #[must_use]
    pub fn integrator(&self) -> &'a MaximalIntegrator {
        self.integrator
    }
}

/// Per-thread scratch of [`JointCoordinates`]: the integrator's workspace, the knots before and
/// after a step, the new poses, the state the last step returned, and the full-size `A`, `B`
/// of the C-order linearisation.
#[derive(Debug)]
pub struct JointCoordinatesWorkspace {
    ws: MaximalWorkspace,
    state: Vec<BodyState>,
    next: Vec<BodyState>,
    poses: Vec<Pose>,
    /// `(q_{k+1}, v_{k+1})` of the last step (NaN before the first: never equal to an input).
    last: Vec<f64>,
    a: DMatrix<f64>,
    b: DMatrix<f64>,
}

impl JointCoordinates<'_> {
    /// The knots of `(q, v)` into `ws.state`, kept from the previous step when `at` continues it
    /// (module docs).
    fn prepare(&self, ws: &mut JointCoordinatesWorkspace, at: StepInput<'_>) -> Result<()> {
        let n = self.n;
        if at.q.len() != n || at.p.len() != n || at.u.len() != n {
            return Err(MaximalError::InvalidParameter(format!(
                "q, v and u have {}, {} and {} entries; expected n = {n} each",
                at.q.len(),
                at.p.len(),
                at.u.len()
            )));
        }
        let same = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        let carried = at.continues && same(&ws.last[..n], at.q) && same(&ws.last[n..], at.p);
        if carried {
            std::mem::swap(&mut ws.state, &mut ws.next);
        } else {
            self.integrator.mechanism().state_from_minimal(at.q, at.p, self.integrator.dt(), &mut ws.state)?;
            ws.ws.forget_multipliers();
        }
        ws.last.fill(f64::NAN);
        Ok(())
    }

    /// `(q_{k+1}, v_{k+1})` of the knot `ws.next`, remembered for a continuing step.
    fn finish(&self, ws: &mut JointCoordinatesWorkspace, q: &[f64], q_next: &mut [f64], v_next: &mut [f64]) -> Result<()> {
        for (pose, s) in ws.poses.iter_mut().zip(&ws.next) {
            *pose = s.pose;
        }
        self.integrator.mechanism().configuration(&ws.poses, q_next)?;
        let dt = self.integrator.dt();
        for ((v, qn), q) in v_next.iter_mut().zip(q_next.iter()).zip(q) {
            *v = (qn - q) / dt;
        }
        ws.last[..self.n].copy_from_slice(q_next);
        ws.last[self.n..].copy_from_slice(v_next);
        Ok(())
    }
}

impl DiscreteDynamics for JointCoordinates<'_> {
    type Workspace = JointCoordinatesWorkspace;
    type Error = MaximalError;

    fn name(&self) -> &'static str {
        "MaximalIntegrator (joint coordinates)"
    }
    fn nq(&self) -> usize {
        self.n
    }
    fn nv(&self) -> usize {
        self.n
    }
    fn nu(&self) -> usize {
        self.n
    }
    fn workspace(&self) -> JointCoordinatesWorkspace {
        let (n, nb) = (self.n, self.integrator.mechanism().nbodies());
        JointCoordinatesWorkspace {
            ws: self.integrator.workspace(),
            state: vec![BodyState::default(); nb],
            next: vec![BodyState::default(); nb],
            poses: vec![Pose::default(); nb],
            last: vec![f64::NAN; 2 * n],
            a: DMatrix::zeros(2 * n, 2 * n),
            b: DMatrix::zeros(2 * n, n),
        }
    }

    /// The velocity part of the state is the velocity itself: `p = v`.
    fn momentum(&self, _ws: &mut JointCoordinatesWorkspace, _q: &[f64], v: &[f64], p: &mut [f64]) -> std::result::Result<(), BatchError<MaximalError>> {
        if v.len() != p.len() {
            return Err(BatchError::Core(MaximalError::InvalidParameter(format!("v has {} entries, expected n = {}", v.len(), p.len()))));
        }
        p.copy_from_slice(v);
        Ok(())
    }

    /// `at.guess` is not used: the step starts from the integrator's own prediction.
    fn step(
        &self,
        ws: &mut JointCoordinatesWorkspace,
        at: StepInput<'_>,
        q_next: &mut [f64],
        p_next: &mut [f64],
    ) -> std::result::Result<usize, BatchError<MaximalError>> {
        self.prepare(ws, at)?;
        let stats = self.integrator.step(&mut ws.ws, at.k, &ws.state, at.u, None, &mut ws.next)?;
        self.finish(ws, at.q, q_next, p_next)?;
        Ok(stats.iterations)
    }

    fn linearize(
        &self,
        ws: &mut JointCoordinatesWorkspace,
        at: StepInput<'_>,
        a: &mut [f64],
        b: &mut [f64],
    ) -> std::result::Result<usize, BatchError<MaximalError>> {
        let (mut am, mut bm) = (std::mem::take(&mut ws.a), std::mem::take(&mut ws.b));
        let r = self.linearize_matrices(ws, at, &mut am, &mut bm);
        if r.is_ok() {
            matrix_to_rows(&am, a);
            matrix_to_rows(&bm, b);
        }
        (ws.a, ws.b) = (am, bm);
        r
    }

    /// [`MaximalIntegrator::linearize_minimal`] from zero multipliers (`at.continues` is not
    /// used: the linearisation rebuilds the knots from the joint coordinates).
    fn linearize_matrices(
        &self,
        ws: &mut JointCoordinatesWorkspace,
        at: StepInput<'_>,
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) -> std::result::Result<usize, BatchError<MaximalError>> {
        let n = self.n;
        ws.ws.forget_multipliers();
        ws.last.fill(f64::NAN);
        let (q_next, v_next) = ws.last.split_at_mut(n);
        let stats = self.integrator.linearize_minimal(&mut ws.ws, StepInput { continues: false, ..at }, q_next, v_next, a, b)?;
        ws.last.fill(f64::NAN); // the knots of this step were not kept
        Ok(stats.iterations)
    }
}
