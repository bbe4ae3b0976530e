//! Steps longer than the model's (`α > 1`) when the Gauss–Newton model keeps underestimating
//! what a full step gains.
//!
//! Along the closed-loop step of a feasible iterate, the cost's decrease is
//! `ΔJ(α) = α d₁ + ½ α² d₂ + O(α³)`: the slope `d₁ = −Σ Q_uᵀ k` is exact (it is the
//! directional derivative of the cost, the linearisation being exact), the curvature `d₂` is
//! the model's (`−Σ kᵀ Q_uu k` without regularisation or limits, so that the model's best step
//! is `α = 1`). iLQR and Gauss–Newton FDDP drop the dynamics' second derivatives contracted with
//! the costate, and where those bend the cost down along the step the model's `d₂` is too
//! negative: every full step then gains more than predicted, by the same factor iteration after
//! iteration, and the iterates converge linearly at a rate set by that factor (ANYmal's jump:
//! 1.75 times the predicted decrease at every full step from its fifth iteration on, the
//! predicted decrease halving per iteration, 23 iterations).
//!
//! The actual decrease `A` of an accepted full step fits the curvature along it,
//! `d₂* = 2 (A − d₁)`, and with it the best step along that line, `α* = −d₁ / d₂*`
//! (unbounded when `d₂* ≥ 0`). When two full steps in a row fit `α* > 2` — a persistent
//! underestimate, not one step's luck — the next line search tries `min(α*, limit)` first,
//! ahead of `1, ½, ¼, …`. The extrapolated trial is kept when its actual decrease exceeds the
//! decrease the model predicts for the full step (`d₁ + ½ d₂`, the best the standard step was
//! expected to give); otherwise the line search goes on from `α = 1` as usual, the extrapolated
//! rollout being the only cost. The cost along the step need not stay quadratic beyond
//! `α = 1`: on the cart-pole swing-up of `tests/test_optim.py` full steps gain 1.7 times the
//! prediction for dozens of iterations, yet the fitted `α* ≈ 3` raises the cost. So `limit`
//! (at first `α_max`) is halved from the length of every rejected extrapolation and doubled
//! (up to `α_max`) by every kept one, and no step shorter than 1.5 is tried. The fits must
//! promise more than 2 (along a parabola a step of 2 gains a third more than the full one):
//! smaller gains did not pay for the risk (on the panda reach of
//! `examples/bench_panda_crocoddyl.py`, whose full steps gain 1.45 times the prediction, a kept
//! step of 1.83 left a model that overestimates and took 18 iterations instead of 16). On
//! ANYmal's jump the extrapolated steps are kept and FDDP takes 11 iterations instead of 23
//! (with friction cones 20 instead of 29, after one rejected step of 4); on the cart-pole the
//! tried steps are rejected; on the panda reach and ANYmal's other gaits none is tried
//! (BENCHMARKS.md, session 25). An accepted step other than a full one ends
//! the run of fits. On LQ problems `A = d₁ + ½ d₂` exactly, `α* = 1`, and nothing changes.

/// A fitted best step length above this on two full steps in a row triggers an extrapolation.
const PERSISTENT: f64 = 2.0;

/// The shortest extrapolated step tried (when the limit caps the fit).
const SHORTEST: f64 = 1.5;

/// The record of the fits; [`Extrapolation::first_trial`] proposes the next line search's
/// first step length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extrapolation {
    /// The longest step tried (`≤ 1`: never extrapolate).
    max: f64,
    /// The longest step the next extrapolation may try: halved from the step of a rejected
    /// one, doubled (up to `max`) by a kept one; below [`SHORTEST`] none is tried.
    limit: f64,
    /// `α*` of the last accepted step if it was a full one, else 0.
    last_fit: f64,
    /// The next line search's first step length, if beyond 1.
    next: Option<f64>,
}

impl Extrapolation {
    /// No fit yet; steps up to `max` (`≤ 1`: never extrapolate).
    pub(crate) fn new(max: f64) -> Self {
        Self { max, limit: max, last_fit: 0.0, next: None }
    }

    /// The step length to try before `1, ½, ¼, …`, if the last two full steps call for one.
    pub(crate) fn first_trial(&self) -> Option<f64> {
        self.next
    }

    /// Whether a trial of length `alpha > 1` with actual decrease `actual` is kept: it must beat
    /// the model's predicted decrease of the full step, `full`.
    pub(crate) fn keeps(actual: f64, full: f64) -> bool {
        actual.is_finite() && actual > full
    }

    /// Records an accepted step of length `alpha` from a feasible iterate, whose model had slope
    /// `slope` (`d₁`) and whose actual decrease was `actual`; only full steps are fitted.
    pub(crate) fn accepted(&mut self, alpha: f64, slope: f64, actual: f64) {
        if let Some(tried) = self.next.take() {
            // the extrapolated trial came first: kept if the accepted step is longer than 1
            self.limit = if alpha > 1.0 { (2.0 * self.limit).min(self.max) } else { 0.5 * tried };
        }
        if alpha != 1.0 {
            self.last_fit = 0.0;
            return;
        }
        let curvature = 2.0 * (actual - slope);
        let fit = if curvature < 0.0 { -slope / curvature } else { f64::INFINITY };
        let step = fit.min(self.limit);
        if step >= SHORTEST && fit > PERSISTENT && self.last_fit > PERSISTENT {
            self.next = Some(step);
        }
        self.last_fit = fit;
    }

    /// Forgets the fits (a step from an infeasible iterate, a failed line search, a raised
    /// regularisation: the next model is not the one fitted).
    pub(crate) fn reset(&mut self) {
        if let Some(tried) = self.next.take() {
            self.limit = 0.5 * tried;
        }
        self.last_fit = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cost along the step is `ΔJ(α) = α d₁ + ½ α² d₂*`; the model's `d₂ = −d₁`.
    fn full_step(e: &mut Extrapolation, slope: f64, true_curvature: f64) {
        e.accepted(1.0, slope, slope + 0.5 * true_curvature);
    }

    #[test]
    fn two_underestimated_full_steps_propose_the_fitted_best_step() {
        let mut e = Extrapolation::new(4.0);
        full_step(&mut e, 2.0, -0.8); // α* = 2.5
        assert_eq!(e.first_trial(), None, "one fit is not persistent");
        full_step(&mut e, 2.0, -0.64); // α* = 3.125
        assert!((e.first_trial().unwrap() - 3.125).abs() < 1e-12);
        let mut e = Extrapolation::new(4.0);
        full_step(&mut e, 2.0, -0.8);
        full_step(&mut e, 2.0, -0.25); // α* = 8, capped
        assert_eq!(e.first_trial(), Some(4.0));
        let mut e = Extrapolation::new(4.0);
        full_step(&mut e, 2.0, -0.8);
        full_step(&mut e, 2.0, 0.5); // convex along the step: unbounded, capped
        assert_eq!(e.first_trial(), Some(4.0));
        let mut e = Extrapolation::new(4.0);
        full_step(&mut e, 2.0, -1.2); // α* = 1.67: a gain too small to try
        full_step(&mut e, 2.0, -1.2);
        assert_eq!(e.first_trial(), None);
    }

    #[test]
    fn an_exact_model_a_partial_step_or_a_reset_proposes_nothing() {
        let mut e = Extrapolation::new(4.0);
        for _ in 0..3 {
            full_step(&mut e, 2.0, -2.0); // the model's own curvature: α* = 1
        }
        assert_eq!(e.first_trial(), None);
        full_step(&mut e, 2.0, -0.8);
        e.accepted(0.5, 2.0, 0.75); // a partial step (no extrapolation proposed before it)
        full_step(&mut e, 2.0, -0.8);
        assert_eq!(e.first_trial(), None, "the partial step broke the run of fits");
        full_step(&mut e, 2.0, -0.8);
        assert!(e.first_trial().is_some());
        e.reset(); // the line search failed, the extrapolated trial with it: limit 1.25
        full_step(&mut e, 2.0, -0.8);
        full_step(&mut e, 2.0, -0.8);
        assert_eq!(e.first_trial(), None);
        let mut off = Extrapolation::new(1.0);
        full_step(&mut off, 2.0, -0.8);
        full_step(&mut off, 2.0, -0.8);
        assert_eq!(off.first_trial(), None, "max ≤ 1 never extrapolates");
    }

    #[test]
    fn a_rejected_extrapolation_halves_the_limit_and_a_kept_one_doubles_it() {
        let mut e = Extrapolation::new(4.0);
        full_step(&mut e, 2.0, -0.4); // α* = 5
        full_step(&mut e, 2.0, -0.4);
        assert_eq!(e.first_trial(), Some(4.0));
        full_step(&mut e, 2.0, -0.4); // the line search kept α = 1: the trial at 4 was rejected
        assert_eq!(e.first_trial(), Some(2.0), "limit halved from the rejected 4");
        e.accepted(2.0, 2.0, 3.0); // kept: the limit doubles back to 4
        full_step(&mut e, 2.0, -0.4);
        full_step(&mut e, 2.0, -0.4);
        assert_eq!(e.first_trial(), Some(4.0));
        e.reset(); // the whole line search failed, the trial at 4 with it
        full_step(&mut e, 2.0, -0.4);
        full_step(&mut e, 2.0, -0.4);
        assert_eq!(e.first_trial(), Some(2.0));
        for _ in 0..3 {
            full_step(&mut e, 2.0, -0.4); // rejected at 2: the limit 1 is below 1.5, no more tries
            assert_eq!(e.first_trial(), None);
        }
        let mut e = Extrapolation::new(3.5);
        full_step(&mut e, 2.0, -0.4);
        full_step(&mut e, 2.0, -0.4);
        assert_eq!(e.first_trial(), Some(3.5));
        full_step(&mut e, 2.0, -0.4); // rejected at 3.5
        assert_eq!(e.first_trial(), Some(1.75), "a fit beyond 2 tried at the halved limit, 1.5 or more");
    }

    #[test]
    fn an_extrapolated_trial_must_beat_the_full_step_prediction() {
        assert!(Extrapolation::keeps(1.1, 1.0));
        assert!(!Extrapolation::keeps(0.9, 1.0));
        assert!(!Extrapolation::keeps(f64::NAN, 1.0));
    }
}
