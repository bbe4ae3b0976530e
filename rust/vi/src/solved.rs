//! Solved steps kept for their linearisation, so that the linearisation need not solve the
//! step again.
//!
//! [`VariationalIntegrator::linearize`] solves the step first, even when it is given the
//! solution as its guess: one residual evaluation at `q_{k+1}`, which sets the point states of
//! the unknown control points and the velocities of all of them. vidyn-optim simulates a trial
//! on one thread and linearises its steps on others; on the cart-pole that re-solve was a
//! third of each linearisation (callgrind, session 11). [`VariationalIntegrator::keep_solved`]
//! keeps a copy of the control points of a step a rollout has just solved, by step index, in
//! the integrator; [`VariationalIntegrator::linearize_kept`] linearises step `k` from them when
//! they are exactly the points at which the re-solve would stop at once: the same
//! `(q_k, p_k, u)` bit for bit, the same unknowns `z` from the guess `q_{k+1}`, and a residual
//! that was within the tolerance there (not a stalled Newton solve, not a constrained one).
//! Otherwise it solves as [`VariationalIntegrator::linearize`] does. Either way `A` and `B`
//! are the same, bit for bit.
//!
//! The store lives as long as the integrator, so that the allocations of its entries (a few
//! dozen small vectors each) are made once, not per optimisation; it keeps at most
//! [`KEPT_BYTES`] worth of steps. A clone of the integrator starts with an empty store, and
//! every builder method empties it.

use crate::del::StepPoints;
use crate::error::Result;
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use nalgebra::DMatrix;
use std::sync::Mutex;

/// The most memory the kept steps of one integrator may take (64 MiB, estimated): about
/// 23 000 steps of a cart-pole, 5 000 of a 9-joint arm with the trapezoid rule.
pub const KEPT_BYTES: usize = 64 << 20;

/// The control points of one solved step and the inputs and outputs that identify it.
#[derive(Clone, Debug)]
pub(crate) struct SolvedStep {
    /// `(q_k, p_k, u)`, `3n` entries.
    inputs: Vec<f64>,
    /// The unknown control points `z` of the solution, `s·n` entries.
    z: Vec<f64>,
    /// `(q_{k+1}, p_{k+1})`, `2n` entries.
    outputs: Vec<f64>,
    points: StepPoints,
    /// Whether it holds a step that no linearisation has taken yet.
    valid: bool,
}

/// The kept steps of an integrator, by step index.
#[derive(Debug, Default)]
pub(crate) struct KeptSteps {
    slots: Mutex<Vec<Option<Box<SolvedStep>>>>,
}

impl Clone for KeptSteps {
    /// Empty: a clone's steps are its own.
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// Whether two slices hold the same numbers bit for bit.
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

impl VariationalIntegrator {
    /// How many steps may be kept within [`KEPT_BYTES`] (about 100 numbers per joint and
    /// control point are copied).
    fn kept_capacity(&self) -> usize {
        KEPT_BYTES / (8 * 100 * self.n().max(1) * (self.scheme.s + 1))
    }

    /// Keeps the control points of step `k`, which [`Self::step`] has just solved on `ws`
    /// from `(q, p, u)` to `(q_next, p_next)` (what it returned), for
    /// [`Self::linearize_kept`]. A step accepted outside the tolerance or with constraints is
    /// not kept. O(s n); no allocation once step `k` has been kept before (the buffer it
    /// replaces is carried in `ws` to the next call).
    pub fn keep_solved(&self, k: usize, ws: &mut ViWorkspace, q: &[f64], p: &[f64], u: &[f64], q_next: &[f64], p_next: &[f64]) {
        let n = self.n();
        if !ws.within_tolerance || k >= self.kept_capacity() || [q, p, u, q_next, p_next].iter().any(|v| v.len() != n) {
            return;
        }
        let mut saved = ws.spare_solved.take().unwrap_or_else(|| {
            let s = self.scheme.s;
            Box::new(SolvedStep { inputs: vec![0.0; 3 * n], z: vec![0.0; s * n], outputs: vec![0.0; 2 * n], points: StepPoints::new(&self.model, s + 1), valid: false })
        });
        for (dst, src) in saved.inputs.chunks_exact_mut(n).zip([q, p, u]) {
            dst.copy_from_slice(src);
        }
        saved.outputs[..n].copy_from_slice(q_next);
        saved.outputs[n..].copy_from_slice(p_next);
        saved.z.copy_from_slice(&ws.z);
        saved.points.copy_from(&ws.points);
        saved.valid = true;
        if let Ok(mut slots) = self.kept.slots.lock() {
            if slots.len() <= k {
                slots.resize_with(k + 1, || None);
            }
            ws.spare_solved = slots[k].replace(saved);
        }
    }

    /// [`Self::linearize`] of step `k` with the guess `guess` (its `q_{k+1}`), from the control
    /// points kept for step `k` ([`Self::keep_solved`]) when they are those of this step (see
    /// the module docs), otherwise by solving the step. Same results as [`Self::linearize`],
    /// bit for bit; returns the Newton iterations (0 from kept points, as a re-solve that
    /// starts at the solution takes none).
    pub fn linearize_kept(&self, ws: &mut ViWorkspace, k: usize, q: &[f64], p: &[f64], u: &[f64], guess: &[f64], a: &mut DMatrix<f64>, b: &mut DMatrix<f64>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        let n = self.n();
        let taken = self.kept.slots.lock().ok().and_then(|mut slots| slots.get_mut(k).and_then(Option::take));
        let Some(mut saved) = taken else {
            return self.linearize(ws, k, q, p, u, Some(guess), a, b, q_next, p_next);
        };
        let matches = saved.valid && same_bits(&saved.inputs[..n], q) && same_bits(&saved.inputs[n..2 * n], p) && same_bits(&saved.inputs[2 * n..], u) && q_next.len() == n && p_next.len() == n;
        let result = if matches && self.initial_guess(ws, q, p, u, Some(guess)).is_ok() && same_bits(&ws.z, &saved.z) {
            self.linearize_from(ws, k, q, &mut saved, a, b, q_next, p_next)
        } else {
            self.linearize(ws, k, q, p, u, Some(guess), a, b, q_next, p_next)
        };
        // the buffer back to its slot for the next rollout, unless one has filled it already
        if let Ok(mut slots) = self.kept.slots.lock() {
            if let Some(slot @ None) = slots.get_mut(k) {
                *slot = Some(saved);
            }
        }
        result
    }

    /// The linearisation of step `k` (from `q_k = q`) at the points `saved` holds, which are
    /// moved into `ws` (`saved` is left empty).
    #[allow(clippy::too_many_arguments)]
    fn linearize_from(&self, ws: &mut ViWorkspace, k: usize, q: &[f64], saved: &mut SolvedStep, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        let n = self.n();
        self.check_jacobian_shapes(a, b)?;
        ws.points.swap_states(&mut saved.points);
        saved.valid = false;
        if self.uses_dense() {
            ws.dense.ensure(n, self.scheme.s);
        }
        q_next.copy_from_slice(&saved.outputs[..n]);
        p_next.copy_from_slice(&saved.outputs[n..]);
        ws.last_iterations = 0;
        ws.within_tolerance = true;
        self.linearize_converged(ws, k, q, a, b)?;
        Ok(0)
    }
}
