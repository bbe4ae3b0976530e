//! Solved steps kept for their linearisation, so that the linearisation need not solve the
//! step again.
//!
//! [`VariationalIntegrator::linearize`] solves the step first, even when it is given the
//! solution as its guess: one residual evaluation at `q_{k+1}`, which sets the point states of
//! the unknown control points and the velocities of all of them. vidyn-optim simulates a trial
//! on one thread and linearises its steps on others; on the cart-pole that re-solve was a
//! third of each linearisation (callgrind, session 11). [`VariationalIntegrator::keep_solved`]
//! keeps what a rollout's solve of a step found, by step index, in a caller-owned
//! [`SolvedSteps`], and [`VariationalIntegrator::linearize_kept`] uses it when the step to
//! linearise has the same `(q_k, p_k, u)`, bit for bit:
//!
//! * an unconstrained step on the model's own coordinates whose residual was within the
//!   tolerance keeps its control points; when they are exactly the points at which the
//!   re-solve would stop at once (the same unknowns `z` from the guess `q_{k+1}`), the
//!   linearisation starts from them, and `A`, `B` are those of [`VariationalIntegrator::linearize`]
//!   bit for bit;
//! * a constrained step on the Lie group (module `chart_step`) keeps what its
//!   linearisation reads of the solve besides the step's inputs, end and multipliers: the
//!   control points' chart coordinates, the chart's centre and covectors
//!   ([`crate::chart_step::KeptChart`]) and, with the momentum projection, the knot's factors
//!   ([`crate::momentum_projection::KeptKnot`]); it is linearised from them without a
//!   re-solve, and `A`, `B` are those of the step the rollout took (on ANYmal's walk with
//!   friction cones the re-solve from the kept solution was 7 % of an FDDP solve's
//!   instructions);
//! * a constrained step on the model's own coordinates keeps its multipliers `λ_k`, and its
//!   re-solve starts at the kept `q_{k+1}` and `λ_k` ([`ViWorkspace::guess_multipliers`]):
//!   Newton then stops at once where a cold start (`λ = 0`) takes a full iteration or two to
//!   find the contact impulses (for `s ≥ 2` the interior control points start interpolated, a
//!   few iterations from the solution). The result is the step's solution to the solver's
//!   tolerance, as any re-solve.
//!
//! A constrained entry then keeps the multipliers' Jacobian of its linearisation too (beside
//! the step's own multipliers, not a re-solve's, which differ by round-off: a stage cost read
//! before the linearisation and one read after it see the same numbers), which costs on
//! contact forces read with the multipliers ([`VariationalIntegrator::kept_multipliers`])
//! instead of solving the step once more.
//!
//! The store belongs to the caller (the integrator stays immutable, Pinocchio's Model/Data
//! split), so that two optimisations on one integrator keep their steps apart; a caller that
//! keeps its store from one optimisation to the next (the Python binding does) makes the
//! allocations of its entries (a few dozen small vectors each) once. A store serves the
//! integrator settings that filled it: it records their identity and starts over when
//! another integrator keeps a step in it, and another integrator's linearisation never reads
//! it. It keeps at most [`KEPT_BYTES`] worth of steps.

use crate::chart_step::KeptChart;
use crate::del::StepPoints;
use crate::error::Result;
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::momentum_projection::KeptKnot;
use crate::predictor::Predictor;
use nalgebra::DMatrix;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use vidyn_system::StepInput;

/// The most memory the kept steps of one integrator may take (64 MiB, estimated): about
/// 17 000 steps of a cart-pole, 5 700 of a 9-joint arm with the trapezoid rule.
pub const KEPT_BYTES: usize = 64 << 20;

/// What the solve of one step found, and the inputs and outputs that identify it.
#[derive(Clone, Debug)]
pub(crate) struct SolvedStep {
    /// `(q_k, p_k, u)`, `nq + 2n` entries.
    inputs: Vec<f64>,
    /// `(q_{k+1}, p_{k+1})`, `nq + n` entries.
    outputs: Vec<f64>,
    /// The unknown control points `z` of the solution, `s·n` entries, and their point states.
    z: Vec<f64>,
    points: StepPoints,
    /// Whether `z` and `points` are a step's that no linearisation has taken yet, kept for the
    /// bit-for-bit shortcut (module docs).
    shortcut: bool,
    /// `(s·m,)` the multipliers `λ^β` of the solution's rows (module `constrained`), where a
    /// re-solve starts them, and `(m,)` the step's impulse `Σ_β λ^β + μ_{k+1}`
    /// ([`VariationalIntegrator::multipliers`]) (empty without constraints).
    lambda: Vec<f64>,
    impulse: Vec<f64>,
    /// `(m, 3n)` the impulse's derivatives `∂(λ_k + μ_{k+1})/∂(q_k, p_k, u)`, valid when
    /// `has_jacobian` (a linearisation of these inputs has computed it).
    lambda_jacobian: DMatrix<f64>,
    has_jacobian: bool,
    /// A step on the chart: what its linearisation reads of the solve, and with the momentum
    /// projection the knot's factors (module docs; `None` otherwise).
    chart: Option<Box<KeptChart>>,
    knot: Option<Box<KeptKnot>>,
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
    /// of them, `6n` numbers of inputs, outputs and unknowns, and `m (s + 3n)` of multipliers
    /// and their Jacobian; on the chart `(s + 5) n` numbers of its solve and, with
    /// constraints, `n² + 2mn + m² + 20n` of the knot's factors.
    fn kept_capacity(&self) -> usize {
        let (n, m, s) = (self.n(), self.constraints.len(), self.scheme.s);
        let per_point = 8 * 68 * n + 16 * 40;
        let chart = if self.chart.is_some() { 8 * ((s + 5) * n + n * n + 2 * m * n + m * m + 20 * n) + 20 * 40 } else { 0 };
        KEPT_BYTES / ((s + 1) * per_point + 8 * (6 * n + m * (s + 3 * n)) + chart + 256)
    }

    /// Keeps in `store` what [`Self::step`] found when it has just solved step `at` on `ws`
    /// (`at.guess` is not used) to `(q_next, p_next)` (what it returned), for [`Self::linearize_kept`]
    /// (module docs): the control points of an unconstrained step accepted within the
    /// tolerance on the model's own coordinates, the multipliers of a constrained one; other
    /// steps are not kept. O(s n + m); no allocation once step `k` has been kept before (the
    /// buffer it replaces is carried in `ws` to the next call). A store filled by other
    /// integrator settings is emptied first.
    pub fn keep_solved(&self, store: &SolvedSteps, ws: &mut ViWorkspace, at: StepInput<'_>, q_next: &[f64], p_next: &[f64]) {
        let StepInput { k, q, p, u, .. } = at;
        let (n, nq, m) = (self.n(), self.nq(), self.constraints.len());
        let shortcut = self.chart.is_none() && ws.within_tolerance;
        let on_chart = self.chart.is_some() && self.mimic.is_none();
        if !(shortcut || m > 0) || k >= self.kept_capacity() || [q, q_next].iter().any(|v| v.len() != nq) || [p, u, p_next].iter().any(|v| v.len() != n) {
            return;
        }
        let mut saved = ws.spare_solved.take().unwrap_or_else(|| {
            let s = self.scheme.s;
            Box::new(SolvedStep {
                inputs: vec![0.0; nq + 2 * n],
                outputs: vec![0.0; nq + n],
                z: vec![0.0; s * n],
                points: StepPoints::new(&self.model, s + 1),
                shortcut: false,
                lambda: vec![0.0; s * m],
                impulse: vec![0.0; m],
                lambda_jacobian: DMatrix::zeros(m, 3 * n),
                has_jacobian: false,
                chart: None,
                knot: None,
            })
        });
        saved.inputs[..nq].copy_from_slice(q);
        saved.inputs[nq..nq + n].copy_from_slice(p);
        saved.inputs[nq + n..].copy_from_slice(u);
        saved.outputs[..nq].copy_from_slice(q_next);
        saved.outputs[nq..].copy_from_slice(p_next);
        if shortcut {
            saved.z.copy_from_slice(&ws.z);
            saved.points.copy_from(&ws.points);
        }
        saved.shortcut = shortcut;
        saved.lambda.copy_from_slice(&ws.constraint.lambda);
        saved.impulse.copy_from_slice(self.multipliers(ws));
        saved.has_jacobian = false;
        if on_chart && m > 0 {
            match saved.chart.as_deref_mut() {
                Some(kept) => kept.save(ws),
                None => saved.chart = Some(Box::new(KeptChart::of(ws))),
            }
            if self.projects_momenta() {
                match saved.knot.as_deref_mut() {
                    Some(kept) => kept.save(ws),
                    None => saved.knot = Some(Box::new(KeptKnot::of(ws))),
                }
            }
        }
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

    /// [`Self::linearize`] of step `at` (whose `guess` is its `q_{k+1}`), from what was
    /// kept for step `k` in `store` ([`Self::keep_solved`]) when it is this step's under these
    /// settings (module docs), otherwise by solving the step from `at.guess`. Unconstrained steps
    /// give the results of [`Self::linearize`] bit for bit (from kept control points Newton
    /// takes no iteration, as a re-solve that starts at the solution takes none); constrained
    /// ones start their re-solve at the kept solution and multipliers, and leave the
    /// multipliers' Jacobian in the store for [`Self::kept_multipliers`]. Returns the Newton
    /// iterations.
    // the arguments of `Self::linearize` and the store: grouping the four outputs would only
    // rename them
    #[allow(clippy::too_many_arguments)]
    pub fn linearize_kept(
        &self,
        store: &SolvedSteps,
        ws: &mut ViWorkspace,
        at: StepInput<'_>,
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
        q_next: &mut [f64],
        p_next: &mut [f64],
    ) -> Result<usize> {
        let StepInput { k, q, p, u, .. } = at;
        let shapes = q_next.len() == q.len() && p_next.len() == p.len();
        // a kept shortcut is taken out of its slot (its points move into `ws`); a constrained
        // entry stays readable (`kept_multipliers`: the stage costs other threads evaluate
        // meanwhile), its solution and multipliers copied out to start the re-solve
        let mut taken = None;
        let mut warm = false;
        let mut restored = false;
        if let Some(mut slots) = store.slots.lock().ok().filter(|slots| slots.owner == self.id) {
            if let Some(entry) = slots.steps.get_mut(k) {
                match entry.as_deref() {
                    Some(saved) if shapes && saved.same_inputs(q, p, u) && saved.shortcut => taken = entry.take(),
                    Some(saved @ SolvedStep { chart: Some(kept), .. }) if shapes && saved.same_inputs(q, p, u) => {
                        self.check_jacobian_shapes(a, b)?;
                        kept.restore(ws);
                        if let Some(knot) = saved.knot.as_deref() {
                            knot.restore(ws);
                        }
                        self.restore_multipliers(ws, k, &saved.lambda, &saved.impulse)?;
                        q_next.copy_from_slice(&saved.outputs[..q_next.len()]);
                        p_next.copy_from_slice(&saved.outputs[q_next.len()..]);
                        restored = true;
                    }
                    Some(saved) if shapes && saved.same_inputs(q, p, u) && !saved.lambda.is_empty() => {
                        ws.guess_multipliers(&saved.lambda);
                        ws.kept_next.clear();
                        ws.kept_next.extend_from_slice(&saved.outputs[..q.len()]);
                        warm = true;
                    }
                    _ => {}
                }
            }
        }
        if let Some(mut saved) = taken {
            let result = if self.initial_guess(ws, at, Predictor::Guess).is_ok() && same_bits(&ws.z, &saved.z) {
                self.check_jacobian_shapes(a, b).and_then(|()| {
                    self.restore_kept(ws, &mut saved, q_next, p_next);
                    self.linearize_converged(ws, k, &saved.inputs[..q.len()], a, b).map(|()| 0)
                })
            } else {
                self.linearize(ws, at, a, b, q_next, p_next)
            };
            // the buffer back to its slot for the next rollout, unless one has filled it already
            if let Ok(mut slots) = store.slots.lock() {
                if slots.owner == self.id {
                    if let Some(slot @ None) = slots.steps.get_mut(k) {
                        *slot = Some(saved);
                    }
                }
            }
            return result;
        }
        let solved = if restored {
            ws.last_iterations = 0;
            self.linearize_solved(ws, at, q_next, p_next, a, b).map(|()| 0)
        } else if warm {
            let guess = std::mem::take(&mut ws.kept_next);
            let solved = self.linearize(ws, at.with_guess(Some(&guess)), a, b, q_next, p_next);
            ws.kept_next = guess;
            solved
        } else {
            return self.linearize(ws, at, a, b, q_next, p_next);
        };
        // the kept multipliers stay the step's own: a re-solve's differ from them by
        // round-off, and a stage cost read before this linearisation and one read after it
        // must not (vidyn-optim's pipeline reads them in either order)
        if solved.is_ok() && !self.constraints.is_empty() {
            if let Some(mut slots) = store.slots.lock().ok().filter(|slots| slots.owner == self.id) {
                if let Some(saved) = slots.steps.get_mut(k).and_then(Option::as_deref_mut).filter(|saved| saved.same_inputs(q, p, u)) {
                    saved.lambda_jacobian.copy_from(self.multiplier_jacobian(ws));
                    saved.has_jacobian = true;
                }
            }
        }
        solved
    }

    /// `f(ι_k, ∂ι_k/∂(q_k, p_k, u))` with the impulse `ι_k = λ_k + μ_{k+1}` kept in `store` for step `k` from
    /// `(q, p, u)` bit for bit ([`Self::keep_solved`]) and their Jacobian `(m, 3n)` when a
    /// linearisation of that step ([`Self::linearize_kept`]) has computed it (else `None`);
    /// `None` when nothing of these inputs is kept (the caller solves the step itself). The
    /// store stays locked while `f` runs.
    pub fn kept_multipliers<T>(
        &self,
        store: &SolvedSteps,
        k: usize,
        q: &[f64],
        p: &[f64],
        u: &[f64],
        f: impl FnOnce(&[f64], Option<&DMatrix<f64>>) -> T,
    ) -> Option<T> {
        let slots = store.slots.lock().ok().filter(|slots| slots.owner == self.id)?;
        let saved = slots.steps.get(k)?.as_deref().filter(|s| !s.lambda.is_empty() && s.same_inputs(q, p, u))?;
        Some(f(&saved.impulse, saved.has_jacobian.then_some(&saved.lambda_jacobian)))
    }

    /// `f(q_{k+1}, λ)` with the next configuration and the multipliers (`(s·m,)`, empty
    /// without constraints) of step `k` kept in `store` when it was solved from `(q, p, u)`
    /// bit for bit ([`Self::keep_solved`]); `None` otherwise. What a re-solve of the same step
    /// starts from (e.g. the second order's, [`crate::SecondOrderWorkspace::guess_multipliers`]).
    pub fn kept_solution<T>(&self, store: &SolvedSteps, k: usize, q: &[f64], p: &[f64], u: &[f64], f: impl FnOnce(&[f64], &[f64]) -> T) -> Option<T> {
        let slots = store.slots.lock().ok().filter(|slots| slots.owner == self.id)?;
        let saved = slots.steps.get(k)?.as_deref().filter(|s| s.same_inputs(q, p, u))?;
        Some(f(&saved.outputs[..q.len()], &saved.lambda))
    }

    /// Moves the solution `saved` holds into `ws` (its points, the next state, the solver's
    /// counters), as if `ws` had just solved that step; `saved` keeps no shortcut afterwards.
    fn restore_kept(&self, ws: &mut ViWorkspace, saved: &mut SolvedStep, q_next: &mut [f64], p_next: &mut [f64]) {
        let n = self.n();
        ws.points.swap_states(&mut saved.points);
        saved.shortcut = false;
        if self.uses_dense() {
            ws.dense.ensure(n, self.scheme.s);
        }
        q_next.copy_from_slice(&saved.outputs[..n]);
        p_next.copy_from_slice(&saved.outputs[n..]);
        ws.last_iterations = 0;
        ws.within_tolerance = true;
    }
}

impl SolvedStep {
    /// Whether this step was solved from `(q, p, u)`, bit for bit.
    fn same_inputs(&self, q: &[f64], p: &[f64], u: &[f64]) -> bool {
        let (nq, n) = (q.len(), p.len());
        self.inputs.len() == nq + 2 * n && same_bits(&self.inputs[..nq], q) && same_bits(&self.inputs[nq..nq + n], p) && same_bits(&self.inputs[nq + n..], u)
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
        slots.owner == vi.id && slots.steps.get(k).and_then(Option::as_ref).is_some_and(|s| s.shortcut)
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
            vi.step(&mut ws, StepInput::new(k, &q, &p, u), &mut qn, &mut pn).unwrap();
            vi.keep_solved(store, &mut ws, StepInput::new(k, &q, &p, u), &qn, &pn);
            states.push((qn, pn));
        }
        states
    }

    /// `(A, B, q_{k+1}, p_{k+1}, iterations)` of one linearisation call.
    type Linearised = (DMatrix<f64>, DMatrix<f64>, Vec<f64>, Vec<f64>, usize);

    fn linearised(vi: &VariationalIntegrator, store: &SolvedSteps, kept: bool, at: StepInput<'_>) -> Linearised {
        let n = vi.n();
        let mut ws = vi.workspace();
        let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
        let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
        let it = if kept {
            vi.linearize_kept(store, &mut ws, at, &mut a, &mut b, &mut qn, &mut pn).unwrap()
        } else {
            vi.linearize(&mut ws, at, &mut a, &mut b, &mut qn, &mut pn).unwrap()
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
                    let kept = linearised(&vi, &store, true, StepInput::new(k, q, p, &u).with_guess(Some(qn)));
                    if trapezoid {
                        assert!(!kept_valid(&vi, &store, k), "{label}: step {k} is taken from the store, once");
                    }
                    let solved = linearised(&vi, &store, false, StepInput::new(k, q, p, &u).with_guess(Some(qn)));
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
        let kept = linearised(&vi, &store, true, StepInput::new(1, q, p, &other_u).with_guess(Some(qn)));
        assert_eq!(kept.4, linearised(&vi, &store, false, StepInput::new(1, q, p, &other_u).with_guess(Some(qn))).4);
        assert!(kept_valid(&vi, &store, 1), "points that did not match stay kept");
        // a clone has the same settings; a builder method gives new ones, whose steps are
        // solved, and whose keeping starts the store over
        assert!(kept_valid(&vi.clone(), &store, 1));
        let rebuilt = vi.clone().with_newton(1e-10, 20).unwrap();
        assert!(!kept_valid(&rebuilt, &store, 1));
        assert_eq!(
            linearised(&rebuilt, &store, true, StepInput::new(1, q, p, &u).with_guess(Some(qn))).4,
            linearised(&rebuilt, &store, false, StepInput::new(1, q, p, &u).with_guess(Some(qn))).4
        );
        assert!(kept_valid(&vi, &store, 1), "another integrator's linearisation leaves the points");
        rollout_keeping(&rebuilt, &store, 1, &u);
        assert!(!kept_valid(&vi, &store, 1) && !kept_valid(&vi, &store, 2), "another integrator's keeping starts over");
        // the step index is part of the key: step 1's points are not step 2's
        let store = SolvedSteps::new();
        rollout_keeping(&vi, &store, 3, &u);
        let ((q2, p2), (qn2, _)) = (&states[2], &states[3]);
        assert!(kept_valid(&vi, &store, 2));
        let wrong_slot = linearised(&vi, &store, true, StepInput::new(1, q2, p2, &u).with_guess(Some(qn2)));
        assert_same_bits(&wrong_slot, &linearised(&vi, &store, false, StepInput::new(2, q2, p2, &u).with_guess(Some(qn2))), "step 2 linearised under index 1");
    }

    /// Constrained steps (the four-bar on its own coordinates with the midpoint rule, re-solved
    /// from what was kept; the tethered floating tree on its Lie group with the midpoint rule and
    /// Simpson's, linearised from what its solve kept): a linearisation from the store takes no
    /// Newton iteration where a cold re-solve (λ = 0) takes some, gives the re-solve's `A`, `B`,
    /// multipliers' Jacobian, `q_{k+1}` and `p_{k+1}` to the solver's tolerance, and leaves in
    /// the store the step's own multipliers (the linearisation's agree to 1e-12 relative) and
    /// the Jacobian that the linearisation's workspace reports, which `kept_multipliers` returns
    /// for these inputs only.
    #[test]
    fn constrained_steps_keep_their_multipliers() {
        use crate::test_common::constraint::{closed_configuration, four_bar_tree, loop_closure};
        use crate::test_common::lie_group::{floating_tree, start, tether_and_plane};
        let four_bar = four_bar_tree();
        let tree = Arc::new(floating_tree(true));
        let cases = [
            (four_bar.clone(), loop_closure(&four_bar, false), closed_configuration(&four_bar, 0.3), Scheme::midpoint()),
            (tree.clone(), tether_and_plane(&tree, &start(&tree), 0.0), start(&tree), Scheme::midpoint()),
            (tree.clone(), tether_and_plane(&tree, &start(&tree), 0.0), start(&tree), Scheme::simpson()),
        ];
        for (model, constraints, q0, scheme) in cases {
            let (n, nq) = (model.nv, model.nq);
            let vi = VariationalIntegrator::new(model.clone(), scheme, 0.01, None).unwrap().with_constraints(constraints).unwrap();
            let u: Vec<f64> = (0..n).map(|i| 0.3 * ((i as f64) * 0.9).sin()).collect();
            let store = SolvedSteps::new();
            let mut ws = vi.workspace();
            let (mut q, mut p) = (q0.clone(), vec![0.0; n]);
            for k in 0..3 {
                let (mut qn, mut pn) = (vec![0.0; nq], vec![0.0; n]);
                vi.step(&mut ws, StepInput::new(k, &q, &p, &u), &mut qn, &mut pn).unwrap();
                vi.keep_solved(&store, &mut ws, StepInput::new(k, &q, &p, &u), &qn, &pn);
                let kept_lambda = vi.multipliers(&ws).to_vec();
                assert_eq!(
                    vi.kept_multipliers(&store, k, &q, &p, &u, |l, jac| (l.to_vec(), jac.is_some())),
                    Some((kept_lambda.clone(), false)),
                    "{}: step {k}",
                    model.name
                );
                let mut other_u = u.clone();
                other_u[0] += 1e-12;
                assert!(vi.kept_multipliers(&store, k, &q, &p, &other_u, |_, _| ()).is_none(), "other inputs are not this step's");
                let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
                let (mut q1, mut p1) = (vec![0.0; nq], vec![0.0; n]);
                let mut lws = vi.workspace();
                let warm = vi.linearize_kept(&store, &mut lws, StepInput::new(k, &q, &p, &u).with_guess(Some(&qn)), &mut a, &mut b, &mut q1, &mut p1).unwrap();
                let (jac, lambda) = (vi.multiplier_jacobian(&lws).clone(), vi.multipliers(&lws).to_vec());
                let stored = vi.kept_multipliers(&store, k, &q, &p, &u, |l, j| (l.to_vec(), j.cloned())).unwrap();
                assert_eq!(stored, (kept_lambda.clone(), Some(jac)), "{}: the step's multipliers and the linearisation's Jacobian are kept", model.name);
                let off = lambda.iter().zip(&kept_lambda).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()));
                let size = kept_lambda.iter().fold(1e-300_f64, |m, x| m.max(x.abs()));
                assert!(off <= 1e-12 * size, "{}: step {k}: the re-solve's multipliers are off by {off:e}", model.name);
                let (mut a0, mut b0) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
                let (mut q2, mut p2) = (vec![0.0; nq], vec![0.0; n]);
                let mut cws = vi.workspace();
                let cold = vi.linearize(&mut cws, StepInput::new(k, &q, &p, &u).with_guess(Some(&qn)), &mut a0, &mut b0, &mut q2, &mut p2).unwrap();
                assert!(warm == 0 && cold > 0, "{}: step {k}: {warm} iterations from the kept solution, {cold} cold", model.name);
                let scale = a0.amax().max(b0.amax());
                assert!((&a - &a0).amax() < 1e-9 * scale && (&b - &b0).amax() < 1e-9 * scale, "{}: step {k}: A, B", model.name);
                let jac0 = vi.multiplier_jacobian(&cws);
                assert!((vi.multiplier_jacobian(&lws) - jac0).amax() < 1e-9 * jac0.amax(), "{}: step {k}: the multipliers' Jacobian", model.name);
                let gap = q1.iter().zip(&q2).chain(p1.iter().zip(&p2)).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()));
                assert!(gap < 1e-12, "{}: step {k}: next state {gap:e}", model.name);
                (q, p) = (qn, pn);
            }
        }
    }
}
