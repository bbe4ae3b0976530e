//! Which hinge penalties (module [`crate::hinge`]: friction cones) the model of a backward
//! pass holds: those violated at the step the pass takes, not only those violated at the
//! current trajectory; and the decrease that step then promises.
//!
//! The Gauss–Newton model of `½ w min(0, g)²` at the current point is `½ w (g + ∇g·δ)²` if
//! `g < 0` and nothing otherwise. A step that crosses the boundary of a cone is then taken on
//! the wrong model: the cone leaves the violated set only at the next iteration, and the others
//! move with it. ANYmal's gaits with friction cones spent their last five to seven iterations
//! letting cones go a few at a time (the walk: 84 violated cones at iteration 7, 46 at the
//! optimum, every iteration from the 8th to the 14th dropping two to fourteen of them).
//!
//! After a backward pass, [`settle`] rolls the pass's full step out on the linear model,
//! `δx_0 = f̄_0`, `δu_k = k_k + K_k δx_k`, `δx_{k+1} = A_k δx_k + B_k δu_k + f̄_{k+1}` (the gaps
//! `f̄` of FDDP, none for iLQR; the controls unclamped), switches every penalty to the sign of
//! its linearisation there, and the solver runs the pass once more on that model: one step of
//! the semismooth Newton iteration on `Σ ½ w min(0, g + ∇g·δ)²` inside each outer iteration,
//! at the price of a backward pass. More rounds per iteration changed no iteration count on
//! the gaits.
//!
//! The pass's quadratic model and the penalties still part along the step for the hinges whose
//! linearisation crosses zero inside it, and a held hinge counts its `½ w g²` at `δ = 0` even
//! where `g > 0`. [`Mismatch`] corrects the predicted decrease of every trial, which the line
//! search and the stopping rule compare with the actual one, into the penalties'. Without that
//! correction FDDP refused good steps (on LQ problems with a floor on a state, `tests/hinge.rs`,
//! 8–18 iterations instead of 3), and switching hinges on while infeasible drove ANYmal's jump
//! from 19 iterations to 42 (predictions off by 10⁸ at the full step of its large gaps).
//! BENCHMARKS.md, session 34.

use crate::cost::StageDerivatives;
use crate::ilqr::Backward;
use crate::pipeline::Derivatives;
use nalgebra::{DMatrix, DVector, DVectorView};

/// The full step of `pass` on the linear model of `a`, `b` with the gaps `gaps` (`(N+1)·ndx`,
/// or none): calls `stage(k, δx_k, δu_k)` for `k < N` and returns `δx_N` (module docs).
pub(crate) fn full_step(
    a: &[DMatrix<f64>],
    b: &[DMatrix<f64>],
    pass: &Backward,
    gaps: Option<&[f64]>,
    mut stage: impl FnMut(usize, &DVector<f64>, &DVector<f64>),
) -> DVector<f64> {
    let ndx = a.first().map_or(0, DMatrix::nrows);
    let gap = |k: usize| gaps.map(|g| DVectorView::from_slice(&g[k * ndx..(k + 1) * ndx], ndx));
    let mut dx = gap(0).map_or_else(|| DVector::zeros(ndx), |g| g.into_owned());
    let mut du = DVector::zeros(pass.k_ff.first().map_or(0, DVector::len));
    let mut next = DVector::zeros(ndx);
    for k in 0..a.len() {
        du.copy_from(&pass.k_ff[k]);
        du.gemv(1.0, &pass.gains[k], &dx, 1.0);
        stage(k, &dx, &du);
        next.gemv(1.0, &a[k], &dx, 0.0);
        next.gemv(1.0, &b[k], &du, 1.0);
        if let Some(g) = gap(k + 1) {
            next += g;
        }
        std::mem::swap(&mut dx, &mut next);
    }
    dx
}

/// Switches the hinges of `d` to the sign of their linearisation at `pass`'s full step (module
/// docs) and lists the switched `(stage, hinge)` in `switched`.
pub(crate) fn settle(d: &mut Derivatives, pass: &Backward, gaps: Option<&[f64]>, switched: &mut Vec<(usize, usize)>) {
    switched.clear();
    let Derivatives { a, b, cost } = d;
    if cost.stages.iter().all(|s| s.hinges.is_empty()) {
        return;
    }
    full_step(a, b, pass, gaps, |k, dx, du| {
        let s = &mut cost.stages[k];
        for i in 0..s.hinges.len() {
            let violated = s.hinges.linearised(i, dx.as_slice(), du.as_slice()) < 0.0;
            if violated != s.hinges.is_active(i) {
                s.set_hinge(i, violated);
                switched.push((k, i));
            }
        }
    });
}

/// The hinges on which a pass's model and the penalties part along its full step
/// `δ(α) = α δ(1)`, to correct the decrease the model predicts into the one the penalties
/// `½ w min(0, g + α s)²` (`s = ∇g·δ(1)`) give: those the model holds while their
/// linearisation is satisfied somewhere on `α ∈ [0, 1]`, or leaves out while it is violated.
/// (After [`settle`] and the pass run again on its switches, mostly the hinges whose
/// linearisation crosses zero inside the step.)
#[derive(Debug, Default)]
pub(crate) struct Mismatch {
    /// `(w, g, s, held)`
    hinges: Vec<(f64, f64, f64, bool)>,
}

impl Mismatch {
    /// Collects the mismatched hinges of `d` along `pass`'s full step.
    pub(crate) fn measure(&mut self, d: &Derivatives, pass: &Backward, gaps: Option<&[f64]>) {
        self.hinges.clear();
        if d.cost.stages.iter().all(|s| s.hinges.is_empty()) {
            return;
        }
        full_step(&d.a, &d.b, pass, gaps, |k, dx, du| {
            let h = &d.cost.stages[k].hinges;
            for i in 0..h.len() {
                let (g, held) = (h.value(i), h.is_active(i));
                let s = h.linearised(i, dx.as_slice(), du.as_slice()) - g;
                if held != (g < 0.0) || held != (g + s < 0.0) {
                    self.hinges.push((h.weight(i), g, s, held));
                }
            }
        });
    }

    /// What to add to the model's predicted decrease at step length `alpha` to make it the
    /// penalties': `Σ [p(0) − p(α)] − [q(0) − q(α)]`, `p(α) = ½ w min(0, g + α s)²`,
    /// `q(α) = ½ w (g + α s)²` where the model holds the hinge and 0 where not.
    pub(crate) fn correction(&self, alpha: f64) -> f64 {
        self.hinges
            .iter()
            .map(|&(w, g, s, held)| {
                let at = |a: f64| g + a * s;
                let penalty = |a: f64| 0.5 * w * at(a).min(0.0).powi(2);
                let model = |a: f64| if held { 0.5 * w * at(a).powi(2) } else { 0.0 };
                (penalty(0.0) - penalty(alpha)) - (model(0.0) - model(alpha))
            })
            .sum()
    }
}

/// Switches back the hinges [`settle`] switched.
pub(crate) fn undo(stages: &mut [StageDerivatives], switched: &[(usize, usize)]) {
    for &(k, i) in switched {
        let s = &mut stages[k];
        s.set_hinge(i, !s.hinges.is_active(i));
    }
}
