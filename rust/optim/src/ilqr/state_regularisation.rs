//! The state regularisation `ρ` of the backward pass over the iterations
//! ([`super::IlqrOptions::xreg`]; the sweep forms `V_xx + ρ 1` at the next knot,
//! [`super::backward::BackwardSweep::with_state_regularisation`]).
//!
//! `ρ` starts at `xreg` and is divided by [`FACTOR`] after every accepted step of full length
//! (`α ≥ 1`) from a feasible trajectory, down to zero once it falls below `xreg / FACTOR`; a
//! shortened step (`α < 1`) or a refused line search multiplies it by [`FACTOR`], to at least
//! `xreg / FACTOR`. So the first iterations, where the linearisation holds least along the
//! horizon, are damped by a proximal term on the states' deviation, and the regularisation is
//! gone after two full steps in a row: the last iterations are plain Gauss–Newton (or DDP)
//! steps, and convergence is judged only once `ρ` is zero ([`Schedule::settled`]). The idea is
//! Levenberg–Marquardt's, on `V_xx` instead of `Q_uu` (crocoddyl raises and lowers its `xreg`
//! together with its `ureg`, tenfold, by the length of the step its line search accepts, from
//! 1e-9).

/// The factor by which `ρ` falls after a full step and rises after a shortened or refused one.
pub(crate) const FACTOR: f64 = 10.0;

/// `ρ` over the iterations (module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    rho: f64,
    /// `xreg / FACTOR`: the smallest non-zero `ρ`.
    least: f64,
}

impl Schedule {
    pub(crate) fn new(xreg: f64) -> Self {
        Self { rho: xreg, least: xreg / FACTOR }
    }

    /// The current `ρ`.
    pub(crate) fn rho(&self) -> f64 {
        self.rho
    }

    /// `ρ` after a step of length `alpha` is accepted from a feasible trajectory.
    pub(crate) fn after(&self, alpha: f64) -> f64 {
        if alpha < 1.0 {
            (self.rho * FACTOR).max(self.least)
        } else if self.rho / FACTOR < self.least {
            0.0
        } else {
            self.rho / FACTOR
        }
    }

    /// Moves `ρ` on after an accepted step of length `alpha` from a feasible trajectory.
    pub(crate) fn accepted(&mut self, alpha: f64) {
        self.rho = self.after(alpha);
    }

    /// Raises `ρ` after a line search that kept no step.
    pub(crate) fn refused(&mut self) {
        self.rho = self.after(0.0);
    }

    /// Whether `ρ` is zero: a converged model is then the unregularised one.
    pub(crate) fn settled(&self) -> bool {
        self.rho == 0.0
    }

    /// Drops `ρ` to zero (to judge convergence on the unregularised model).
    pub(crate) fn settle(&mut self) {
        self.rho = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From 1e-2: two full steps clear it, a shortened step brings back at least 1e-3, and
    /// `xreg = 0` stays zero whatever the steps.
    #[test]
    fn full_steps_clear_the_regularisation_and_short_ones_restore_it() {
        let mut s = Schedule::new(1e-2);
        assert_eq!(s.rho(), 1e-2);
        s.accepted(1.0);
        assert!((s.rho() - 1e-3).abs() < 1e-18);
        s.accepted(1.0);
        assert!(s.settled());
        s.accepted(0.5);
        assert!((s.rho() - 1e-3).abs() < 1e-18);
        s.refused();
        assert!((s.rho() - 1e-2).abs() < 1e-17);
        s.accepted(4.0);
        assert!((s.rho() - 1e-3).abs() < 1e-18);
        let mut none = Schedule::new(0.0);
        for alpha in [0.25, 1.0, 0.5] {
            none.accepted(alpha);
            assert!(none.settled());
        }
        none.refused();
        assert!(none.settled());
    }
}
