//! Contact phases: which of the integrator's holonomic constraints each step imposes.
//!
//! A legged robot's contacts come and go: a foot in stance is a point held at the ground, a
//! swinging foot is free. An integrator with a [`ConstraintSchedule`] keeps one list of
//! constraints (every contact of the horizon, a foothold per stance) and imposes on step `k`
//! only those of `k`'s phase. Step `k` of the constrained step (module `constrained`) solves
//! `p_k + D_1 L_d − C_1ᵀ λ_k = 0`, `h(q_{k+1}) = 0` with the active rows of `h` (for Simpson
//! and Lobatto schemes also `h = 0` at the interior control points, each with its impulse), so:
//!
//! * **touchdown** (a constraint inactive on step `k − 1` and active on step `k`): the impulse
//!   `C_1ᵀ λ_k`, applied at the knot `q_k`, is the one that brings the contact point to its
//!   foothold at `q_{k+1}` (for `s ≥ 2` at the first interior control point) and holds it
//!   there: a perfectly inelastic impact, resolved over one step by the same discrete
//!   mechanics as the stance (the impulse acts before the constraint holds, as on every
//!   constrained step). When the point reaches its foothold
//!   exactly at a knot (`h(q_k) = 0`), the impulse acts there and removes the normal part of
//!   the motion in the metric of `M`, which is the classical plastic impact (the momenta about
//!   the contact point are kept; tests). When the point is still off its foothold at `q_k`,
//!   the step also moves it there, and that impulse does work, about `½ m (gap/Δt)²` for an
//!   effective mass `m`: a trajectory optimiser drives the gap to zero with a cost on the
//!   swing point's position at touchdown, as crocoddyl's gaits do. The energy check (module
//!   `energy_check`) therefore skips touchdown steps;
//! * **lift-off** (active on `k − 1`, inactive on `k`): nothing is imposed on step `k`; the
//!   last stance step kept the point at its foothold at `q_k` and ended with RATTLE's
//!   momentum projection (module `momentum_projection`), so the knot momentum `p_k` is that of
//!   a motion with the point at rest, and the point leaves freely from rest. (Without the
//!   projection `p_k = D₂L_d + c_s Δt u` held the half step of the forces the stance impulses
//!   balanced: a leg released while pushing left with half a step of its push, 7 cm into an
//!   ANYmal swing, 150 rad/s at Talos's ankles.)
//!
//! The steps of one phase share their active set; a schedule stores each distinct set once.

use crate::error::{Result, ViError};

/// Per step, the active constraints of an integrator (module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintSchedule {
    /// The distinct active sets, each as increasing constraint indices.
    phases: Vec<Vec<usize>>,
    /// The phase of every step.
    phase_of_step: Vec<usize>,
}

impl ConstraintSchedule {
    /// The schedule of `active`, row-major `(steps, m)`: `active[k·m + i]` says whether
    /// constraint `i` is imposed on step `k`. O(steps·m).
    ///
    /// # Errors
    /// [`ViError::InvalidParameter`] when `active` is empty or its length is not a multiple of
    /// `m`, or when `m = 0`.
    pub fn from_masks(active: &[bool], m: usize) -> Result<Self> {
        if m == 0 || active.is_empty() || !active.len().is_multiple_of(m) {
            return Err(ViError::InvalidParameter(format!(
                "a constraint schedule has one row of m = {m} flags per step (and at least one step); got {} flags",
                active.len()
            )));
        }
        let mut phases: Vec<Vec<usize>> = Vec::new();
        let phase_of_step = active
            .chunks_exact(m)
            .map(|row| {
                let set: Vec<usize> = (0..m).filter(|&i| row[i]).collect();
                phases.iter().position(|p| *p == set).unwrap_or_else(|| {
                    phases.push(set);
                    phases.len() - 1
                })
            })
            .collect();
        Ok(Self { phases, phase_of_step })
    }

    /// Number of steps the schedule covers.
    #[must_use]
    pub fn steps(&self) -> usize {
        self.phase_of_step.len()
    }

    /// The phase (an index of its distinct active sets) of step `step`, if it has one.
    #[must_use]
    pub fn phase(&self, step: usize) -> Option<usize> {
        self.phase_of_step.get(step).copied()
    }

    /// The active constraints (increasing indices) of step `step`, if it has a phase.
    #[must_use]
    pub fn active(&self, step: usize) -> Option<&[usize]> {
        self.phase(step).map(|p| self.phases[p].as_slice())
    }

    /// Whether step `step` imposes a constraint that step `step − 1` did not (a touchdown;
    /// never step 0, whose constraints the initial state is expected to meet).
    #[must_use]
    pub fn touches_down(&self, step: usize) -> bool {
        match (step.checked_sub(1).and_then(|s| self.active(s)), self.active(step)) {
            (Some(before), Some(now)) => now.iter().any(|i| !before.contains(i)),
            _ => false,
        }
    }

    /// The largest number of constraints active on one step.
    #[must_use]
    pub fn max_active(&self) -> usize {
        self.phases.iter().map(Vec::len).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_share_their_phase() {
        let (t, f) = (true, false);
        let s = ConstraintSchedule::from_masks(&[t, t, f, t, t, f, f, t, t, t, t, f], 3).unwrap();
        assert_eq!(s.steps(), 4);
        assert_eq!(s.active(0), Some(&[0, 1][..]));
        assert_eq!(s.phase(1), s.phase(0));
        assert_eq!(s.active(2), Some(&[1, 2][..]));
        assert_eq!(s.phase(3), s.phase(0));
        assert_eq!(s.active(4), None);
        assert_eq!(s.max_active(), 2);
        assert!(!s.touches_down(0) && !s.touches_down(1) && s.touches_down(2) && s.touches_down(3) && !s.touches_down(4));
        assert!(ConstraintSchedule::from_masks(&[t, f], 3).is_err());
        assert!(ConstraintSchedule::from_masks(&[], 3).is_err());
    }
}
