//! Where a rollout starts each implicit step's Newton solve: the system's extrapolation of the
//! configurations so far ([`vidyn_system::DiscreteDynamics::warm_start`]; for the VI
//! [`vidyn_vi::predict_next`], error third to fifth order in `Δt`) or, when the rollout is a trial
//! around a nominal trajectory, the nominal's linear prediction [`Nominal::predict`] (error
//! second order in the distance to the nominal), whichever was closer to the solution at the
//! step before. The linear prediction is far better near convergence (1.0 Newton iterations
//! per step instead of 1.9 in the last cart-pole iterations), the extrapolation after the
//! first, long steps of a solve (2.0 instead of 3.7).

use crate::dynamics::{Nominal, NominalScratch};
use crate::state_space::StateSpace;

/// The two candidate starts of one rollout and which one is preferred (module docs).
#[derive(Debug)]
pub(crate) struct NewtonStart {
    extrapolation: Vec<f64>,
    linear: Vec<f64>,
    scratch: NominalScratch,
    /// Whether the current step formed each candidate.
    formed: (bool, bool),
    prefer_linear: bool,
}

/// Where step `k` of a rollout starts: its state and actuated control, and the nominal the
/// rollout is a trial around, if any.
#[derive(Clone, Copy)]
pub(crate) struct StepAt<'a> {
    pub k: usize,
    pub x: &'a [f64],
    pub u: &'a [f64],
    pub near: Option<&'a Nominal<'a>>,
}

impl NewtonStart {
    /// For configurations of `nq` coordinates.
    pub(crate) fn new(nq: usize) -> Self {
        Self { extrapolation: vec![0.0; nq], linear: vec![0.0; nq], scratch: NominalScratch::default(), formed: (false, false), prefer_linear: true }
    }

    /// The start of step `at.k` (`None`: the system's own): `extrapolate` writes the
    /// extrapolation of `q_{k+1}` and says whether it could.
    pub(crate) fn choose(&mut self, space: &StateSpace, at: StepAt<'_>, extrapolate: impl FnOnce(&mut [f64]) -> bool) -> Option<&[f64]> {
        let extrapolated = extrapolate(&mut self.extrapolation);
        let linear = at.near.is_some_and(|near| near.predict(space, at.k, at.x, at.u, &mut self.scratch, &mut self.linear));
        self.formed = (extrapolated, linear);
        match (extrapolated, linear) {
            (_, true) if self.prefer_linear || !extrapolated => Some(&self.linear),
            (true, _) => Some(&self.extrapolation),
            _ => None,
        }
    }

    /// Learns from the solution `q_next` of the step just started which start to prefer.
    pub(crate) fn learn(&mut self, q_next: &[f64]) {
        if self.formed == (true, true) {
            self.prefer_linear = distance(q_next, &self.linear) <= distance(q_next, &self.extrapolation);
        }
    }
}

/// `max_i |a_i − b_i|`.
fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}
