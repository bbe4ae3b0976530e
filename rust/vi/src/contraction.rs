//! Newton's observed contraction within one step's solve, after Hairer & Wanner (1996, §IV.8,
//! the stopping and divergence tests of simplified Newton iterations in implicit Runge–Kutta
//! methods).
//!
//! Within a run of full updates `Δz_j` (line-search factor 1), `θ = |Δz_j| / |Δz_{j−1}|`
//! (max norms) estimates the rate at which the iterates approach the solution, and, the
//! remaining updates forming a geometric series, `θ/(1 − θ) |Δz_j|` bounds the distance from
//! `z_{j+1} = z_j + Δz_j` to it. Two uses in [`crate::VariationalIntegrator::step`]:
//!
//! * **Converged to round-off.** When that predicted distance is within [`ROUND_OFF_ULPS`]
//!   units in the last place of `z` (or the integrator's tolerance relative to `z`, if
//!   tighter), the iterate is as accurate as `z`'s precision allows and Newton need not take
//!   one more iteration only to see its residual stop falling (the rule that ends a step whose
//!   residual cannot reach the tolerance, e.g. a long chain's, whose residual's round-off floor
//!   lies far above `ε |p|`). The step is still accepted only if its residual is within the
//!   floor estimated there. Unconstrained steps only: with constraints the multipliers move
//!   too, and `Δz` says nothing of theirs (accepting such steps early left a floating tree's
//!   second order across a touchdown 2.6·10⁻⁹ off its central differences, against 10⁻⁹).
//! * **A diverging simplified-Newton iteration.** A direction computed on a reused
//!   factorisation that is not shorter than the update before it (`θ ≥ 1`) is not taken: the
//!   Jacobian is factored again at the current iterate first. On a 1024-link chain (Simpson,
//!   `Δt = 10⁻³`) such directions were 50–1500 times longer than the update before, and their
//!   line searches ended at residuals up to 10⁵ times larger.

/// The predicted distance to the solution below which an iterate is taken as converged, in
/// units in the last place of `1 + max |z|` (the round-off of a Newton direction is 40–60 such
/// units on 1024-link chains with the trapezoid rule, 150–300 with Simpson's).
pub(crate) const ROUND_OFF_ULPS: f64 = 256.0;

/// The last full update of one step's Newton solve (module docs).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Contraction {
    /// `max |Δz|` of the last update, if it was a full one.
    last_full: Option<f64>,
}

impl Contraction {
    /// `θ` of the direction `dz` against the last full update, if there was one.
    pub(crate) fn ratio(&self, dz: &[f64]) -> Option<f64> {
        self.last_full.map(|last| max_abs(dz) / last)
    }

    /// Records the update `α dz` just taken to `z` and says whether `z` is converged to
    /// round-off (module docs): within [`ROUND_OFF_ULPS`] of `1 + max |z|`, or within
    /// `tolerance` of it when that is smaller (a caller asking for a tighter solve).
    pub(crate) fn record(&mut self, z: &[f64], dz: &[f64], alpha: f64, tolerance: f64) -> bool {
        let theta = self.ratio(dz);
        self.last_full = (alpha == 1.0).then(|| max_abs(dz));
        match theta {
            Some(theta) if alpha == 1.0 && theta < 1.0 => {
                theta / (1.0 - theta) * max_abs(dz) <= tolerance.min(ROUND_OFF_ULPS * f64::EPSILON) * (1.0 + max_abs(z))
            }
            _ => false,
        }
    }
}

/// `max_i |x_i|`.
fn max_abs(x: &[f64]) -> f64 {
    x.iter().fold(0.0, |m, v| m.max(v.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_geometric_run_of_updates_is_converged_once_its_tail_is_below_round_off() {
        let mut c = Contraction::default();
        let z = [1.0, -0.5];
        // updates 1e-6, 1e-9, 1e-12: θ = 1e-3, predicted distance ≈ 1e-15 < 256 ε · 2
        assert!(!c.record(&z, &[1e-6, 0.0], 1.0, 1e-12));
        assert!(!c.record(&z, &[0.0, 1e-9], 1.0, 1e-12), "1e-12 predicted, above round-off");
        assert!(c.record(&z, &[1e-12, 0.0], 1.0, 1e-12));
        c.record(&z, &[1e-9, 0.0], 1.0, 1e-12);
        assert!(!c.record(&z, &[1e-12, 0.0], 1.0, 1e-18), "a tighter tolerance asks for more");
    }

    #[test]
    fn a_damped_update_breaks_the_run_and_a_growing_one_is_never_converged() {
        let mut c = Contraction::default();
        let z = [0.0];
        c.record(&z, &[1e-3], 1.0, 1e-12);
        c.record(&z, &[1e-13], 0.5, 1e-12);
        assert_eq!(c.ratio(&[1.0]), None, "no ratio after a damped step");
        assert!(!c.record(&z, &[1e-16], 1.0, 1e-12), "the first full update of a run has no θ");
        assert_eq!(c.ratio(&[2e-16]), Some(2.0));
        assert!(!c.record(&z, &[2e-16], 1.0, 1e-12), "θ ≥ 1 is divergence, not convergence");
    }
}
