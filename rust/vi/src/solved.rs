//! Solved steps kept for their linearisation, so that the linearisation need not solve the
//! step again.
//!
//! [`VariationalIntegrator::linearize`] solves the step first, even when it is given the
//! solution as its guess: one residual evaluation at `q_{k+1}`, which sets the point states of
//! the unknown control points and the velocities of all of them. vidyn-optim simulates a trial
//! on one thread and linearises its steps on others; on the cart-pole that re-solve was a
//! third of each linearisation (callgrind, session 11). [`VariationalIntegrator::keep_solved`]
//! keeps a copy of the control points of a step a rollout has just solved, by step index, in a
//! caller-owned [`SolvedSteps`]; [`VariationalIntegrator::linearize_kept`] linearises step `k`
//! from them when they are exactly the points at which the re-solve would stop at once: the
//! same `(q_k, p_k, u)` bit for bit, the same unknowns `z` from the guess `q_{k+1}`, and a
//! residual that was within the tolerance there (not a stalled Newton solve, not a
//! constrained one). Otherwise it solves as [`VariationalIntegrator::linearize`] does. Either
//! way `A` and `B` are the same, bit for bit.
//!
//! The store belongs to the caller (the integrator stays immutable, Pinocchio's Model/Data
//! split), so that two optimisations on one integrator keep their steps apart; a caller that
//! keeps its store from one optimisation to the next (the Python binding does) makes the
//! allocations of its entries (a few dozen small vectors each) once. A store serves the
//! integrator settings that filled it: it records their identity and starts over when
//! another integrator keeps a step in it, and another integrator's linearisation never reads
//! it. It keeps at most [`KEPT_BYTES`] worth of steps.

use crate::del::StepPoints;
use crate::error::Result;
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::predictor::Predictor;
use nalgebra::DMatrix;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The most memory the kept steps of one integrator may take (64 MiB, estimated): about
/// 17 000 steps of a cart-pole, 5 700 of a 9-joint arm with the trapezoid rule.
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

/// Solved steps kept for their linearisation, by step index (module docs): caller-owned
/// scratch of [`VariationalIntegrator::keep_solved`] and
/// [`VariationalIntegrator::linearize_kept`]. Safe to share between threads.
#[derive(Debug, Default)]
pub struct SolvedSteps {
    slots: Mutex<Slots>,
}

/// The steps of a [`SolvedSteps`] and the identity of the integrator settings they belong to.
#[derive(Debug, Default)]
struct Slots {
    owner: u64,
    steps: Vec<Option<Box<SolvedStep>>>,
}

impl SolvedSteps {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
}

impl Clone for SolvedSteps {
    /// Empty: a clone's steps are its own.
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// A new identity for integrator settings (never 0, the identity of an empty store).
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether two slices hold the same numbers bit for bit.
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

impl VariationalIntegrator {
    /// How many steps may be kept within [`KEPT_BYTES`]: a point state holds 68 numbers per
    /// joint in 16 vectors (≈ 40 bytes of header and allocator overhead each), a step `s + 1`
    /// of them and `6n` numbers of inputs, outputs and unknowns.
    fn kept_capacity(&self) -> usize {
        let n = self.n();
        let per_point = 8 * 68 * n + 16 * 40;
        KEPT_BYTES / ((self.scheme.s + 1) * per_point + 8 * 6 * n + 256)
    }

    /// Keeps in `store` the control points of step `k`, which [`Self::step`] has just solved
    /// on `ws` from `(q, p, u)` to `(q_next, p_next)` (what it returned), for
    /// [`Self::linearize_kept`]. A step accepted outside the tolerance or with constraints is
    /// not kept. O(s n); no allocation once step `k` has been kept before (the buffer it
    /// replaces is carried in `ws` to the next call). A store filled by other integrator
    /// settings is emptied first.
    #[allow(clippy::too_many_arguments)]
    pub fn keep_solved(&self, store: &SolvedSteps, k: usize, ws: &mut ViWorkspace, q: &[f64], p: &[f64], u: &[f64], q_next: &[f64], p_next: &[f64]) {
        let n = self.n();
        if self.chart.is_some() || !ws.within_tolerance || k >= self.kept_capacity() || [q, p, u, q_next, p_next].iter().any(|v| v.len() != n) {
            return;
        }
        let mut saved = ws.spare_solved.take().unwrap_or_else(|| {
            let s = self.scheme.s;
            Box::new(SolvedStep {
                inputs: vec![0.0; 3 * n],
                z: vec![0.0; s * n],
                outputs: vec![0.0; 2 * n],
                points: StepPoints::new(&self.model, s + 1),
                valid: false,
            })
        });
        for (dst, src) in saved.inputs.chunks_exact_mut(n).zip([q, p, u]) {
            dst.copy_from_slice(src);
        }
        saved.outputs[..n].copy_from_slice(q_next);
        saved.outputs[n..].copy_from_slice(p_next);
        saved.z.copy_from_slice(&ws.z);
        saved.points.copy_from(&ws.points);
        saved.valid = true;
        if let Ok(mut slots) = store.slots.lock() {
            if slots.owner != self.id {
                *slots = Slots { owner: self.id, steps: Vec::new() };
            }
            if slots.steps.len() <= k {
                slots.steps.resize_with(k + 1, || None);
            }
            ws.spare_solved = slots.steps[k].replace(saved);
        }
    }

    /// [`Self::linearize`] of step `k` with the guess `guess` (its `q_{k+1}`), from the control
    /// points kept for step `k` in `store` ([`Self::keep_solved`]) when they are those of this
    /// step and these settings (see the module docs), otherwise by solving the step. Same
    /// results as [`Self::linearize`], bit for bit; returns the Newton iterations (0 from kept
    /// points, as a re-solve that starts at the solution takes none).
    pub fn linearize_kept(
        &self,
        store: &SolvedSteps,
        ws: &mut ViWorkspace,
        k: usize,
        q: &[f64],
        p: &[f64],
        u: &[f64],
        guess: &[f64],
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
        q_next: &mut [f64],
        p_next: &mut [f64],
    ) -> Result<usize> {
        let n = self.n();
        let taken = store.slots.lock().ok().filter(|slots| slots.owner == self.id).and_then(|mut slots| slots.steps.get_mut(k).and_then(Option::take));
        let Some(mut saved) = taken else {
            return self.linearize(ws, k, q, p, u, Some(guess), a, b, q_next, p_next);
        };
        let matches = saved.valid
            && same_bits(&saved.inputs[..n], q)
            && same_bits(&saved.inputs[n..2 * n], p)
            && same_bits(&saved.inputs[2 * n..], u)
            && q_next.len() == n
            && p_next.len() == n;
        let result = if matches && self.initial_guess(ws, q, p, u, Predictor::Guess, Some(guess)).is_ok() && same_bits(&ws.z, &saved.z) {
            self.linearize_from(ws, k, q, &mut saved, a, b, q_next, p_next)
        } else {
            self.linearize(ws, k, q, p, u, Some(guess), a, b, q_next, p_next)
        };
        // the buffer back to its slot for the next rollout, unless one has filled it already
        if let Ok(mut slots) = store.slots.lock() {
            if slots.owner == self.id {
                if let Some(slot @ None) = slots.steps.get_mut(k) {
                    *slot = Some(saved);
                }
            }
        }
        result
    }

    /// The linearisation of step `k` (from `q_k = q`) at the points `saved` holds, which are
    /// moved into `ws` (`saved` is left empty).
    #[allow(clippy::too_many_arguments)]
    fn linearize_from(
        &self,
        ws: &mut ViWorkspace,
        k: usize,
        q: &[f64],
        saved: &mut SolvedStep,
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
        q_next: &mut [f64],
        p_next: &mut [f64],
    ) -> Result<usize> {
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

#[cfg(test)]
mod tests {
    use crate::*;
    use nalgebra::DMatrix;
    use std::sync::Arc;
    use vidyn_rbd::builders::{pendulum_chain, random_tree};
    use vidyn_rbd::Joint;

    /// Whether `store` holds points kept by `vi` for step `k`, not yet taken.
    fn kept_valid(vi: &VariationalIntegrator, store: &SolvedSteps, k: usize) -> bool {
        let slots = store.slots.lock().unwrap();
        slots.owner == vi.id && slots.steps.get(k).and_then(Option::as_ref).is_some_and(|s| s.valid)
    }

    /// Rolls out `steps` steps from a fixed state with controls `u`, keeping every step; returns
    /// the states `(q_k, p_k)`, `k = 0..=steps`.
    fn rollout_keeping(vi: &VariationalIntegrator, store: &SolvedSteps, steps: usize, u: &[f64]) -> Vec<(Vec<f64>, Vec<f64>)> {
        let n = vi.n();
        let mut ws = vi.workspace();
        let q: Vec<f64> = (0..n).map(|i| 0.3 - 0.2 * i as f64).collect();
        let mut p = vec![0.0; n];
        vi.momentum(&mut ws, &q, &vec![0.5; n], &mut p).unwrap();
        let mut states = vec![(q, p)];
        for k in 0..steps {
            let (q, p) = states[k].clone();
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.step(&mut ws, k, &q, &p, u, None, &mut qn, &mut pn).unwrap();
            vi.keep_solved(store, k, &mut ws, &q, &p, u, &qn, &pn);
            states.push((qn, pn));
        }
        states
    }

    /// `(A, B, q_{k+1}, p_{k+1}, iterations)` of one linearisation call.
    type Linearised = (DMatrix<f64>, DMatrix<f64>, Vec<f64>, Vec<f64>, usize);

    #[allow(clippy::too_many_arguments)]
    fn linearised(vi: &VariationalIntegrator, store: &SolvedSteps, kept: bool, k: usize, q: &[f64], p: &[f64], u: &[f64], guess: &[f64]) -> Linearised {
        let n = vi.n();
        let mut ws = vi.workspace();
        let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
        let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
        let it = if kept {
            vi.linearize_kept(store, &mut ws, k, q, p, u, guess, &mut a, &mut b, &mut qn, &mut pn).unwrap()
        } else {
            vi.linearize(&mut ws, k, q, p, u, Some(guess), &mut a, &mut b, &mut qn, &mut pn).unwrap()
        };
        (a, b, qn, pn, it)
    }

    fn assert_same_bits(x: &Linearised, y: &Linearised, label: &str) {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(x.0.as_slice()), bits(y.0.as_slice()), "{label}: A");
        assert_eq!(bits(x.1.as_slice()), bits(y.1.as_slice()), "{label}: B");
        assert_eq!((bits(&x.2), bits(&x.3), x.4), (bits(&y.2), bits(&y.3), y.4), "{label}: next state, iterations");
    }

    /// The kept path gives what the re-solve gives, bit for bit, on the dense path (pendulum
    /// chain) and the recursive one (12-body tree), for one- and two-interval schemes (from
    /// the midpoint's and Simpson's guess `q_{k+1}` the kept `z` need not come back bit for
    /// bit, and such steps are solved); the trapezoid's steps are all taken from the store, once.
    #[test]
    fn kept_steps_linearise_exactly_as_the_re_solve() {
        let one_dof: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
        for model in [Arc::new(pendulum_chain(2, false)), Arc::new(random_tree(12, 5, &one_dof))] {
            for sc in [Scheme::trapezoid(), Scheme::midpoint(), Scheme::simpson()] {
                let n = model.nv;
                let label = format!("{} s = {} ({})", model.name, sc.s, if sc.s * n <= DEFAULT_DENSE_MAX { "dense" } else { "recursive" });
                let vi = VariationalIntegrator::new(model.clone(), sc.clone(), 0.02, None).unwrap();
                let u: Vec<f64> = (0..n).map(|i| 0.2 * i as f64 - 0.1).collect();
                let store = SolvedSteps::new();
                let states = rollout_keeping(&vi, &store, 6, &u);
                for k in 0..6 {
                    let ((q, p), (qn, _)) = (&states[k], &states[k + 1]);
                    let trapezoid = sc.s == 1 && sc.endpoint(0) == 0.0;
                    if trapezoid {
                        assert!(kept_valid(&vi, &store, k), "{label}: the trapezoid's step {k} should be kept");
                    }
                    let kept = linearised(&vi, &store, true, k, q, p, &u, qn);
                    if trapezoid {
                        assert!(!kept_valid(&vi, &store, k), "{label}: step {k} is taken from the store, once");
                    }
                    let solved = linearised(&vi, &store, false, k, q, p, &u, qn);
                    assert_same_bits(&kept, &solved, &format!("{label}, step {k}"));
                }
            }
        }
    }

    /// Points kept for other inputs, by other integrator settings or under another step index
    /// are not used: each of these linearises by solving (same results as `linearize`); a
    /// clone (the same settings) may use them, a rebuilt integrator (new settings) may not,
    /// and keeping a step with other settings empties the store.
    #[test]
    fn kept_steps_of_other_inputs_or_settings_are_not_used() {
        let vi = VariationalIntegrator::new(Arc::new(pendulum_chain(2, false)), Scheme::trapezoid(), 0.02, None).unwrap();
        let store = SolvedSteps::new();
        let u = [0.1, -0.2];
        let states = rollout_keeping(&vi, &store, 3, &u);
        let ((q, p), (qn, _)) = (&states[1], &states[2]);
        // other controls: the kept points are of another step, so the step is solved
        let other_u = [0.1, -0.2 + 1e-15];
        let kept = linearised(&vi, &store, true, 1, q, p, &other_u, qn);
        assert_eq!(kept.4, linearised(&vi, &store, false, 1, q, p, &other_u, qn).4);
        assert!(kept_valid(&vi, &store, 1), "points that did not match stay kept");
        // a clone has the same settings; a builder method gives new ones, whose steps are
        // solved, and whose keeping starts the store over
        assert!(kept_valid(&vi.clone(), &store, 1));
        let rebuilt = vi.clone().with_newton(1e-10, 20).unwrap();
        assert!(!kept_valid(&rebuilt, &store, 1));
        assert_eq!(linearised(&rebuilt, &store, true, 1, q, p, &u, qn).4, linearised(&rebuilt, &store, false, 1, q, p, &u, qn).4);
        assert!(kept_valid(&vi, &store, 1), "another integrator's linearisation leaves the points");
        rollout_keeping(&rebuilt, &store, 1, &u);
        assert!(!kept_valid(&vi, &store, 1) && !kept_valid(&vi, &store, 2), "another integrator's keeping starts over");
        // the step index is part of the key: step 1's points are not step 2's
        let store = SolvedSteps::new();
        rollout_keeping(&vi, &store, 3, &u);
        let ((q2, p2), (qn2, _)) = (&states[2], &states[3]);
        assert!(kept_valid(&vi, &store, 2));
        let wrong_slot = linearised(&vi, &store, true, 1, q2, p2, &u, qn2);
        assert_same_bits(&wrong_slot, &linearised(&vi, &store, false, 2, q2, p2, &u, qn2), "step 2 linearised under index 1");
    }
}
