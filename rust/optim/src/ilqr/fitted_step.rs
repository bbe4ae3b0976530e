//! The line search's first trial fitted to the decreases of the last steps, where the
//! Gauss–Newton model keeps mispredicting them by the same factor.
//!
//! Along the closed-loop step of a feasible iterate, the cost's decrease is
//! `ΔJ(α) = α d₁ + ½ α² d₂ + O(α³)`: the slope `d₁ = −Σ Q_uᵀ k` is exact (it is the
//! directional derivative of the cost, the linearisation being exact), the curvature `d₂` is
//! the model's (`−Σ kᵀ Q_uu k` without regularisation or limits, so that the model's best step
//! is `α = 1`). iLQR and Gauss–Newton FDDP drop the dynamics' second derivatives contracted with
//! the costate. Where those bend the cost down along the step, every full step gains more than
//! predicted, by the same factor iteration after iteration (ANYmal's jump: 1.75 times the
//! predicted decrease at every full step from its fifth iteration on, the prediction halving per
//! iteration, 23 iterations); where they bend it up, every full step overshoots (Talos's walk:
//! 0.30–0.49 of the prediction over its last eight iterations, 14 in all). Either way the
//! iterates converge linearly, at a rate set by that factor.
//!
//! The actual decrease `A` of an accepted step `α` fits the curvature along it,
//! `d₂* = 2 (A − α d₁) / α²`, and with it the best step along that line, `α* = −d₁ / d₂*`
//! (unbounded when `d₂* ≥ 0`). When two steps in a row fit `α*` on the same side, far from 1,
//! the next line search tries the fitted step first, ahead of `1, ½, ¼, …`:
//!
//! * **Longer** (fits beyond 2, i.e. full steps gaining over 1.5 times the prediction): the trial
//!   `min(α*, limit)` is kept when its actual decrease exceeds the decrease the model predicts
//!   for the full step (`d₁ + ½ d₂`, the best the standard step was expected to give); otherwise
//!   the line search goes on from `α = 1`, the trial's rollout being the only cost. The cost
//!   along the step need not stay quadratic beyond `α = 1`: on the cart-pole swing-up of
//!   `tests/test_optim.py` full steps gain 1.7 times the prediction for dozens of iterations,
//!   yet the fitted `α* ≈ 3` raises the cost. So `limit` (at first `α_max`) is halved from the
//!   length of every rejected trial and doubled (up to `α_max`) by every kept one, and no step
//!   shorter than 1.5 is tried. The fits must promise more than 2 (along a parabola a step of 2
//!   gains a third more than the full one): smaller gains did not pay for the risk (on the panda
//!   reach of `examples/bench_panda_crocoddyl.py`, whose full steps gain 1.45 times the
//!   prediction, a kept step of 1.83 left a model that overestimates and took 18 iterations
//!   instead of 16). A kept longer step ends the run of fits.
//! * **Shorter** (fits below ⅔, i.e. steps gaining under half the prediction): the trial
//!   `max(α*, ¼)` is judged as any step shorter than 1 (the Armijo test on the model's
//!   prediction at `α`), and when kept it is fitted in turn, so that the run goes on while the
//!   overshoot lasts.
//!
//! Measured (BENCHMARKS.md, session 25): ANYmal's jump by FDDP 11 iterations instead of 23
//! (with friction cones 20 instead of 29), Talos's walk 9 instead of 14, the panda reach
//! iterating on `(q, v)` 16 instead of 20; nothing tried on ANYmal's other gaits, the panda
//! reach on `(q, p)` and the cart-pole's gravity-free swing-ups, the longer trials rejected on
//! the cart-pole with gravity. An accepted step other than a full or a fitted one ends the run
//! of fits. On LQ problems `A = d₁ + ½ d₂` exactly, `α* = 1`, and nothing changes.

/// Fitted best steps beyond this on two steps in a row call for a longer trial.
const LONGER: f64 = 2.0;

/// The shortest longer trial (when the limit caps the fit).
const SHORTEST_LONGER: f64 = 1.5;

/// Fitted best steps below this on two steps in a row call for a shorter trial.
const SHORTER: f64 = 2.0 / 3.0;

/// The shortest of the shorter trials.
const SHORTEST_SHORTER: f64 = 0.25;

/// The record of the fits; [`FittedStep::first_trial`] proposes the next line search's first
/// step length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FittedStep {
    /// Whether any fitted trial is proposed (`false`: the plain line search).
    enabled: bool,
    /// The longest step tried (`≤ 1`: never longer than the full step).
    max: f64,
    /// The longest step the next longer trial may take: halved from a rejected one's length,
    /// doubled (up to `max`) by a kept one; below [`SHORTEST_LONGER`] none is tried.
    limit: f64,
    /// `α*` of the last accepted step if it was a full or a fitted one.
    last_fit: Option<f64>,
    /// The next line search's first step length, if not 1.
    next: Option<f64>,
}

impl FittedStep {
    /// No fit yet; longer steps up to `max` (`≤ 1`: none); `enabled` false: no fitted trial
    /// at all.
    pub(crate) fn new(max: f64, enabled: bool) -> Self {
        Self { enabled, max, limit: max, last_fit: None, next: None }
    }

    /// The step length to try before `1, ½, ¼, …`, if the last two fits call for one.
    pub(crate) fn first_trial(&self) -> Option<f64> {
        self.next
    }

    /// Whether a trial of length `alpha > 1` with actual decrease `actual` is kept: it must beat
    /// the model's predicted decrease of the full step, `full`.
    pub(crate) fn keeps(actual: f64, full: f64) -> bool {
        actual.is_finite() && actual > full
    }

    /// Records an accepted step of length `alpha` from a feasible iterate, whose model had slope
    /// `slope` (`d₁`) and whose actual decrease was `actual`; full steps and kept shorter trials
    /// are fitted.
    pub(crate) fn accepted(&mut self, alpha: f64, slope: f64, actual: f64) {
        let tried = self.next.take();
        if let Some(t) = tried.filter(|&t| t > 1.0) {
            // a longer trial came first: kept if the accepted step is longer than 1
            self.limit = if alpha > 1.0 { (2.0 * self.limit).min(self.max) } else { 0.5 * t };
        }
        let fitted = alpha == 1.0 || tried.is_some_and(|t| t < 1.0 && alpha == t);
        if !fitted || slope <= 0.0 {
            self.last_fit = None;
            return;
        }
        let curvature = 2.0 * (actual - alpha * slope) / (alpha * alpha);
        let fit = if curvature < 0.0 { -slope / curvature } else { f64::INFINITY };
        if let Some(last) = self.last_fit.filter(|_| self.enabled) {
            let longer = fit.min(self.limit);
            if fit > LONGER && last > LONGER && longer >= SHORTEST_LONGER {
                self.next = Some(longer);
            } else if fit < SHORTER && last < SHORTER {
                self.next = Some(fit.max(SHORTEST_SHORTER));
            }
        }
        self.last_fit = Some(fit);
    }

    /// Forgets the fits (a step from an infeasible iterate, a failed line search, a raised
    /// regularisation: the next model is not the one fitted).
    pub(crate) fn reset(&mut self) {
        if let Some(t) = self.next.take().filter(|&t| t > 1.0) {
            self.limit = 0.5 * t;
        }
        self.last_fit = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cost along the step is `ΔJ(α) = α d₁ + ½ α² d₂*`; the model's `d₂ = −d₁`.
    fn step(e: &mut FittedStep, alpha: f64, slope: f64, true_curvature: f64) {
        e.accepted(alpha, slope, alpha * slope + 0.5 * alpha * alpha * true_curvature);
    }

    fn full_step(e: &mut FittedStep, slope: f64, true_curvature: f64) {
        step(e, 1.0, slope, true_curvature);
    }

    #[test]
    fn two_underestimated_full_steps_propose_the_fitted_longer_step() {
        let mut e = FittedStep::new(4.0, true);
        full_step(&mut e, 2.0, -0.8); // α* = 2.5
        assert_eq!(e.first_trial(), None, "one fit is not persistent");
        full_step(&mut e, 2.0, -0.64); // α* = 3.125
        assert!((e.first_trial().unwrap() - 3.125).abs() < 1e-12);
        let mut e = FittedStep::new(4.0, true);
        full_step(&mut e, 2.0, -0.8);
        full_step(&mut e, 2.0, -0.25); // α* = 8, capped
        assert_eq!(e.first_trial(), Some(4.0));
        let mut e = FittedStep::new(4.0, true);
        full_step(&mut e, 2.0, -0.8);
        full_step(&mut e, 2.0, 0.5); // convex along the step: unbounded, capped
        assert_eq!(e.first_trial(), Some(4.0));
        let mut e = FittedStep::new(4.0, true);
        full_step(&mut e, 2.0, -1.2); // α* = 1.67: a gain too small to try
        full_step(&mut e, 2.0, -1.2);
        assert_eq!(e.first_trial(), None);
    }

    #[test]
    fn two_overshooting_steps_propose_the_fitted_shorter_step_while_it_lasts() {
        let mut e = FittedStep::new(4.0, true);
        full_step(&mut e, 2.0, -4.0); // α* = 0.5
        assert_eq!(e.first_trial(), None);
        full_step(&mut e, 2.0, -5.0); // α* = 0.4
        assert!((e.first_trial().unwrap() - 0.4).abs() < 1e-12);
        step(&mut e, 0.4, 2.0, -5.0); // the trial kept, fitted in turn: α* = 0.4 again
        assert!((e.first_trial().unwrap() - 0.4).abs() < 1e-12);
        step(&mut e, 0.4, 2.0, -2.5); // kept; the overshoot is over: α* = 0.8
        assert_eq!(e.first_trial(), None);
        full_step(&mut e, 2.0, -20.0); // α* = 0.1, floored
        full_step(&mut e, 2.0, -20.0);
        assert_eq!(e.first_trial(), Some(0.25));
        step(&mut e, 0.5, 2.0, -20.0); // the line search kept another step: the run ends
        full_step(&mut e, 2.0, -20.0);
        assert_eq!(e.first_trial(), None);
        let mut e = FittedStep::new(1.0, true);
        full_step(&mut e, 2.0, -4.0);
        full_step(&mut e, 2.0, -4.0);
        assert_eq!(e.first_trial(), Some(0.5), "alpha_max bounds only the longer trials");
    }

    #[test]
    fn an_exact_model_a_partial_step_or_a_reset_proposes_nothing() {
        let mut e = FittedStep::new(4.0, true);
        for _ in 0..3 {
            full_step(&mut e, 2.0, -2.0); // the model's own curvature: α* = 1
        }
        assert_eq!(e.first_trial(), None);
        full_step(&mut e, 2.0, -0.8);
        e.accepted(0.5, 2.0, 0.75); // a partial step (no trial proposed before it)
        full_step(&mut e, 2.0, -0.8);
        assert_eq!(e.first_trial(), None, "the partial step broke the run of fits");
        full_step(&mut e, 2.0, -0.8);
        assert!(e.first_trial().is_some());
        e.reset(); // the line search failed, the longer trial with it: limit 1.25
        full_step(&mut e, 2.0, -0.8);
        full_step(&mut e, 2.0, -0.8);
        assert_eq!(e.first_trial(), None);
        let mut off = FittedStep::new(1.0, true);
        full_step(&mut off, 2.0, -0.8);
        full_step(&mut off, 2.0, -0.8);
        assert_eq!(off.first_trial(), None, "max ≤ 1 never goes beyond the full step");
        let mut plain = FittedStep::new(4.0, false);
        for curvature in [-0.4, -0.4, -4.0, -4.0] {
            full_step(&mut plain, 2.0, curvature);
            assert_eq!(plain.first_trial(), None, "disabled: the plain line search");
        }
        let mut ascent = FittedStep::new(4.0, true);
        full_step(&mut ascent, 0.0, -0.8);
        full_step(&mut ascent, -1.0, -0.8);
        assert_eq!(ascent.first_trial(), None, "no slope, no fit");
    }

    #[test]
    fn a_rejected_longer_trial_halves_the_limit_and_a_kept_one_doubles_it() {
        let mut e = FittedStep::new(4.0, true);
        full_step(&mut e, 2.0, -0.4); // α* = 5
        full_step(&mut e, 2.0, -0.4);
        assert_eq!(e.first_trial(), Some(4.0));
        full_step(&mut e, 2.0, -0.4); // the line search kept α = 1: the trial at 4 was rejected
        assert_eq!(e.first_trial(), Some(2.0), "limit halved from the rejected 4");
        e.accepted(2.0, 2.0, 3.0); // kept: the limit doubles back to 4, the run of fits ends
        full_step(&mut e, 2.0, -0.4);
        assert_eq!(e.first_trial(), None);
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
        let mut e = FittedStep::new(3.5, true);
        full_step(&mut e, 2.0, -0.4);
        full_step(&mut e, 2.0, -0.4);
        assert_eq!(e.first_trial(), Some(3.5));
        full_step(&mut e, 2.0, -0.4); // rejected at 3.5
        assert_eq!(e.first_trial(), Some(1.75), "a fit beyond 2 tried at the halved limit, 1.5 or more");
    }

    #[test]
    fn a_longer_trial_must_beat_the_full_step_prediction() {
        assert!(FittedStep::keeps(1.1, 1.0));
        assert!(!FittedStep::keeps(0.9, 1.0));
        assert!(!FittedStep::keeps(f64::NAN, 1.0));
    }
}
