//! A trial trajectory's derivatives, computed while it is still being simulated.
//!
//! An iLQR iteration simulates a trial (sequential in time), judges it by its cost and, when
//! it is kept, needs the dynamics' Jacobians `A_k`, `B_k` and the cost's derivatives at every
//! step of it (independent across steps). Done one after the other, all but one thread of the
//! pool idle through the rollout. Here the other threads take the steps in chunks of
//! [`CHUNK`] as soon as the rollout has produced their end state — betting that the trial will
//! be kept, which it is in most iterations — and the rollout's thread joins them once the
//! verdict is in; a rejected trial's unfinished work is dropped.
//!
//! Every step's derivatives come from the same functions on the same inputs as when they are
//! computed after the fact ([`Dynamics::linearize_steps`] is bit-for-bit
//! [`Dynamics::linearize`]), so the iterates do not depend on the number of threads or on who
//! computed what. Dynamics without per-step linearisation, and costs that must run on the
//! calling thread ([`Cost::parallel`] false, e.g. Python callables), are differentiated after
//! the verdict instead, as a whole trajectory.
//!
//! The rollout publishes `x_k` and `u_k` (as `f64` bits in atomics: a prefix the rollout no
//! longer writes, read by the helpers without locks or `unsafe`) and the number of states
//! published, with release/acquire ordering; helpers claim chunks from a shared counter.
//!
//! Once the rollout is over the chunks left are taken from the last one down, and a caller
//! that passes a [`ReverseSweep`] (iLQR's next backward pass) has the rollout's thread run it
//! over the finished chunks from the end as the verdict is in, deriving chunks itself only
//! when the next one it needs is not yet done: the backward pass, sequential in time, runs
//! while the helpers finish the derivatives of the first steps instead of after them.

use crate::cost::{Cost, StageDerivatives};
use crate::dynamics::{Dynamics, Policy};
use crate::error::{OptimError, Result};
use crate::ilqr::CostDerivatives;
use nalgebra::DMatrix;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Steps per unit of work handed to a helper.
const CHUNK: usize = 4;

/// The derivatives of a trajectory: the dynamics' `A_k` (nx×nx), `B_k` (nx×nu) and the cost's
/// stage and terminal derivatives.
pub(crate) struct Derivatives {
    pub(crate) a: Vec<DMatrix<f64>>,
    pub(crate) b: Vec<DMatrix<f64>>,
    pub(crate) cost: CostDerivatives,
}

impl Derivatives {
    pub(crate) fn zeros(steps: usize, nx: usize, nu: usize) -> Self {
        Self { a: vec![DMatrix::zeros(nx, nx); steps], b: vec![DMatrix::zeros(nx, nu); steps], cost: CostDerivatives::zeros(steps, nx, nu) }
    }
}

/// A trial kept by its judge: the trajectory, the judge's verdict and the seconds spent on the
/// derivatives after the verdict (the part not hidden behind the rollout).
pub(crate) struct Kept<T> {
    pub(crate) x: Vec<f64>,
    pub(crate) u: Vec<f64>,
    pub(crate) verdict: T,
    pub(crate) derivative_time: f64,
}

/// Why [`simulate_and_derive`] produced no trajectory with derivatives.
pub(crate) enum TrialError {
    /// The rollout failed (e.g. a step's Newton solve diverged).
    Rollout(OptimError),
    /// The judge failed (e.g. the cost of the trajectory could not be evaluated).
    Judge(OptimError),
    /// The trial was kept but a step's derivatives failed (the first failing step's error).
    Derivatives(OptimError),
}

/// A recursion over a kept trajectory's stages from the last one down, fed as their
/// derivatives become available: [`Self::start`] with the terminal cost's, then
/// [`Self::step`] for `k = N−1, …, 0` until it returns false (the sweep gave up).
pub(crate) trait ReverseSweep {
    fn start(&mut self, terminal: &StageDerivatives);
    /// Stage `k` of the trajectory `(x, u)` (whole, row-major) with its `A_k`, `B_k` and cost
    /// derivatives `d`.
    fn step(&mut self, k: usize, x: &[f64], u: &[f64], a: &DMatrix<f64>, b: &DMatrix<f64>, d: &StageDerivatives) -> bool;
}

/// Simulates `steps` steps from `x0` under `policy` (as [`Dynamics::rollout`]), then asks
/// `judge(x, u)` whether to keep the trajectory (`Ok(Some(verdict))`) or drop it (`Ok(None)`).
/// A kept trajectory comes with its derivatives in `out` (every stage, and the terminal
/// cost's), computed behind the rollout on the pool's other threads as far as possible, and
/// `sweep` (if any) run over them when they are streamed (both the dynamics' and the cost's;
/// otherwise it is not called). A dropped one leaves `out` partly overwritten. The judge runs
/// on the calling thread, and should not itself run parallel work (the helpers occupy the
/// other threads).
#[allow(clippy::too_many_arguments)]
pub(crate) fn simulate_and_derive<D, C, T>(dynamics: &D, cost: &C, x0: &[f64], steps: usize, policy: &mut Policy<'_>, judge: impl FnOnce(&[f64], &[f64]) -> Result<Option<T>>, sweep: Option<&mut dyn ReverseSweep>, out: &mut Derivatives) -> std::result::Result<Option<Kept<T>>, TrialError>
where
    D: Dynamics + ?Sized,
    C: Cost + ?Sized,
{
    let (nx, nu) = (dynamics.nx(), dynamics.nu());
    let streams = Streams { dynamics: dynamics.linearizes_steps(), cost: cost.parallel() };
    let shared = Shared::new(steps, nx, nu);
    let helpers = if streams.dynamics || streams.cost { rayon::current_num_threads().saturating_sub(1) } else { 0 };
    let mut slots = Vec::with_capacity(steps.div_ceil(CHUNK));
    for (c, ((a, b), stages)) in out.a.chunks_mut(CHUNK).zip(out.b.chunks_mut(CHUNK)).zip(out.cost.stages.chunks_mut(CHUNK)).enumerate() {
        slots.push(Mutex::new(Slot::Pending(Chunk { k0: c * CHUNK, a, b, stages })));
    }
    let top = AtomicUsize::new(slots.len());
    let work = Work { dynamics, cost, streams, shared: &shared, slots: &slots, top: &top };
    let terminal = &mut out.cost.terminal;
    let mut terminal_done = false;
    let (rollout, verdict, tail) = rayon::in_place_scope(|s| {
        for _ in 0..helpers {
            s.spawn(|_| work.run());
        }
        let rollout = dynamics.rollout(x0, steps, &mut |k, xk, uk| {
            policy(k, xk, uk);
            shared.publish(k, xk, uk);
        });
        match &rollout {
            Ok((x, _)) => shared.publish(steps, &x[steps * nx..], &[]),
            Err(_) => shared.stop.store(true, Ordering::Release),
        }
        shared.rollout_over.store(true, Ordering::Release);
        let verdict = match &rollout {
            Ok((x, u)) => judge(x, u),
            Err(_) => Ok(None),
        };
        let start = Instant::now();
        match (&rollout, &verdict, sweep) {
            (Ok((x, u)), Ok(Some(_)), Some(sweep)) if streams.dynamics && streams.cost => {
                terminal.clear();
                terminal_done = true;
                match cost.terminal_derivatives(&x[steps * nx..], terminal) {
                    Ok(()) => {
                        sweep.start(terminal);
                        work.sweep(x, u, sweep);
                    }
                    Err(e) => {
                        shared.fail(steps, e);
                        work.run();
                    }
                }
            }
            (_, Ok(Some(_)), _) => work.run(),
            _ => shared.stop.store(true, Ordering::Release),
        }
        (rollout, verdict, start)
    });
    drop(slots);
    let (x, u) = rollout.map_err(TrialError::Rollout)?;
    let Some(verdict) = verdict.map_err(TrialError::Judge)? else {
        return Ok(None);
    };
    if let Some((_, e)) = shared.failure.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(TrialError::Derivatives(e));
    }
    let mut after = || -> Result<()> {
        if !streams.dynamics {
            (out.a, out.b) = dynamics.linearize(&x, &u)?;
        }
        if terminal_done {
            Ok(())
        } else if streams.cost {
            let terminal = &mut out.cost.terminal;
            terminal.clear();
            cost.terminal_derivatives(&x[steps * nx..], terminal)
        } else {
            out.cost.evaluate(cost, &x, &u)
        }
    };
    after().map_err(TrialError::Derivatives)?;
    let derivative_time = tail.elapsed().as_secs_f64();
    Ok(Some(Kept { x, u, verdict, derivative_time }))
}

/// Which derivatives the helpers compute during the rollout.
#[derive(Clone, Copy)]
struct Streams {
    dynamics: bool,
    cost: bool,
}

/// A chunk waiting to be derived, being derived, or derived and not yet swept.
enum Slot<'a> {
    Pending(Chunk<'a>),
    Taken,
    Done(Chunk<'a>),
}

/// The outputs of the steps `k0..k0 + a.len()`.
struct Chunk<'a> {
    k0: usize,
    a: &'a mut [DMatrix<f64>],
    b: &'a mut [DMatrix<f64>],
    stages: &'a mut [StageDerivatives],
}

/// What the rollout publishes and the helpers share.
struct Shared {
    steps: usize,
    nx: usize,
    nu: usize,
    /// `x_0 … x_N` and `u_0 … u_{N−1}`, row-major, as `f64` bits.
    x: Vec<AtomicU64>,
    u: Vec<AtomicU64>,
    /// `x_0 … x_{states−1}` (and the controls before them) are published.
    states: AtomicUsize,
    /// The next chunk to claim.
    next: AtomicUsize,
    /// The rollout has ended (successfully or not).
    rollout_over: AtomicBool,
    /// The trial was dropped or its rollout failed: abandon the work.
    stop: AtomicBool,
    /// The first failing step and its error.
    failure: Mutex<Option<(usize, OptimError)>>,
}

impl Shared {
    fn new(steps: usize, nx: usize, nu: usize) -> Self {
        let atomics = |len: usize| (0..len).map(|_| AtomicU64::new(0)).collect();
        Self { steps, nx, nu, x: atomics((steps + 1) * nx), u: atomics(steps * nu), states: AtomicUsize::new(0), next: AtomicUsize::new(0), rollout_over: AtomicBool::new(false), stop: AtomicBool::new(false), failure: Mutex::new(None) }
    }

    /// Publishes `x_k` and `u_k` (`u` empty for `k = N`). Called in order `k = 0, 1, …`.
    fn publish(&self, k: usize, x: &[f64], u: &[f64]) {
        for (slot, v) in self.x[k * self.nx..(k + 1) * self.nx].iter().zip(x) {
            slot.store(v.to_bits(), Ordering::Relaxed);
        }
        if k < self.steps {
            for (slot, v) in self.u[k * self.nu..(k + 1) * self.nu].iter().zip(u) {
                slot.store(v.to_bits(), Ordering::Relaxed);
            }
        }
        self.states.store(k + 1, Ordering::Release);
    }

    /// Copies the published `x_{k0} … x_{k1}` and `u_{k0} … u_{k1−1}` into `x`, `u`.
    fn read(&self, k0: usize, k1: usize, x: &mut Vec<f64>, u: &mut Vec<f64>) {
        x.clear();
        x.extend(self.x[k0 * self.nx..(k1 + 1) * self.nx].iter().map(|v| f64::from_bits(v.load(Ordering::Relaxed))));
        u.clear();
        u.extend(self.u[k0 * self.nu..k1 * self.nu].iter().map(|v| f64::from_bits(v.load(Ordering::Relaxed))));
    }

    /// Records the failure of step `k` unless an earlier step already failed.
    fn fail(&self, k: usize, e: OptimError) {
        let mut failure = self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if failure.as_ref().is_none_or(|(first, _)| k < *first) {
            *failure = Some((k, e));
        }
    }
}

/// One participant's view of the work: claims ready chunks until none is left.
struct Work<'w, 'a, D: ?Sized, C: ?Sized> {
    dynamics: &'w D,
    cost: &'w C,
    streams: Streams,
    shared: &'w Shared,
    slots: &'w [Mutex<Slot<'a>>],
    /// The chunks at and above it have been claimed from the end (after the rollout).
    top: &'w AtomicUsize,
}

impl<'a, D: Dynamics + ?Sized, C: Cost + ?Sized> Work<'_, 'a, D, C> {
    /// Takes chunks whose states are published, in order, until all are taken, the trial is
    /// abandoned, or the rollout has ended short of the next chunk; after a complete rollout,
    /// takes the chunks left from the last one down. Waits for the rollout by spinning
    /// briefly, then yielding the core.
    fn run(&self) {
        let sh = self.shared;
        let (mut x, mut u) = (Vec::new(), Vec::new());
        let mut idle = 0_u32;
        loop {
            if sh.stop.load(Ordering::Acquire) {
                return;
            }
            let c = sh.next.load(Ordering::Acquire);
            if c >= self.slots.len() {
                return;
            }
            let k1 = ((c + 1) * CHUNK).min(sh.steps);
            let over = sh.rollout_over.load(Ordering::Acquire);
            if over && sh.states.load(Ordering::Acquire) > sh.steps {
                if !self.derive_from_end(&mut x, &mut u) {
                    return;
                }
            } else if sh.states.load(Ordering::Acquire) > k1 {
                if sh.next.compare_exchange(c, c + 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    self.derive_slot(c, &mut x, &mut u);
                }
                idle = 0;
            } else if over {
                // read after `over`: a rollout that ended short of this chunk failed
                return;
            } else {
                idle += 1;
                if idle < 64 {
                    std::hint::spin_loop();
                } else if idle < 1024 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
    }

    /// Derives chunk `c` if it is still pending, leaving it done.
    fn derive_slot(&self, c: usize, x: &mut Vec<f64>, u: &mut Vec<f64>) {
        let Some(mut chunk) = self.claim(c) else { return };
        self.shared.read(chunk.k0, chunk.k0 + chunk.a.len(), x, u);
        self.derive(&mut chunk, x, u);
        if let Ok(mut slot) = self.slots[c].lock() {
            *slot = Slot::Done(chunk);
        }
    }

    /// Takes chunk `c` if it is pending (marking it taken).
    fn claim(&self, c: usize) -> Option<Chunk<'a>> {
        let mut slot = self.slots[c].lock().ok()?;
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Pending(chunk) => Some(chunk),
            other => {
                *slot = other;
                None
            }
        }
    }

    /// Derives the highest chunk nobody has claimed; false when none is left (every chunk
    /// below the forward counter was claimed in order during the rollout).
    fn derive_from_end(&self, x: &mut Vec<f64>, u: &mut Vec<f64>) -> bool {
        loop {
            let t = self.top.load(Ordering::Acquire);
            if t == 0 || t <= self.shared.next.load(Ordering::Acquire) {
                return false;
            }
            if self.top.compare_exchange(t, t - 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                let c = t - 1;
                if matches!(self.slots[c].lock().as_deref(), Ok(Slot::Pending(_))) {
                    self.derive_slot(c, x, u);
                    return true;
                }
            }
        }
    }

    /// On the rollout's thread, after a complete rollout `(x, u)` was kept and
    /// `sweep.start` called: feeds `sweep` the stages from the last one down, chunk by chunk
    /// as they are done, deriving the chunk it needs next itself if nobody has taken it, or
    /// another one from the end while a helper finishes it. Derives every chunk even after
    /// the sweep gave up.
    fn sweep(&self, x: &[f64], u: &[f64], sweep: &mut dyn ReverseSweep) {
        let (mut xs, mut us) = (Vec::new(), Vec::new());
        let mut going = true;
        for c in (0..self.slots.len()).rev() {
            let chunk = loop {
                self.derive_slot(c, &mut xs, &mut us);
                let done = self.slots[c].lock().ok().and_then(|mut slot| match std::mem::replace(&mut *slot, Slot::Taken) {
                    Slot::Done(chunk) => Some(chunk),
                    other => {
                        *slot = other;
                        None
                    }
                });
                if let Some(chunk) = done {
                    break chunk;
                }
                if !self.derive_from_end(&mut xs, &mut us) {
                    std::hint::spin_loop();
                }
            };
            for i in (0..chunk.a.len()).rev() {
                going = going && sweep.step(chunk.k0 + i, x, u, &chunk.a[i], &chunk.b[i], &chunk.stages[i]);
            }
        }
    }

    /// The streamed derivatives of one chunk from its states `x` and controls `u`.
    fn derive(&self, chunk: &mut Chunk<'_>, x: &[f64], u: &[f64]) {
        let (nx, nu) = (self.shared.nx, self.shared.nu);
        if self.streams.dynamics {
            if let Err(e) = self.dynamics.linearize_steps(chunk.k0, x, u, &mut *chunk.a, &mut *chunk.b) {
                self.shared.fail(chunk.k0, e);
            }
        }
        if self.streams.cost {
            for (i, stage) in chunk.stages.iter_mut().enumerate() {
                stage.clear();
                if let Err(e) = self.cost.running_derivatives(chunk.k0 + i, &x[i * nx..(i + 1) * nx], &u[i * nu..(i + 1) * nu], stage) {
                    self.shared.fail(chunk.k0 + i, e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LinearDynamics, QuadraticCost};
    use nalgebra::DVector;

    /// Records what a sweep is fed.
    #[derive(Default)]
    struct Recorder {
        started: bool,
        seen: Vec<(usize, DMatrix<f64>, DVector<f64>)>,
    }

    impl ReverseSweep for Recorder {
        fn start(&mut self, _terminal: &StageDerivatives) {
            self.started = true;
        }
        fn step(&mut self, k: usize, _x: &[f64], _u: &[f64], a: &DMatrix<f64>, _b: &DMatrix<f64>, d: &StageDerivatives) -> bool {
            self.seen.push((k, a.clone(), d.lx.clone()));
            true
        }
    }

    /// A kept trial's sweep gets every stage once, the last first, with the derivatives `out`
    /// ends up holding — whichever thread computed them, with 1 to 3 threads and a horizon
    /// that is not a multiple of [`CHUNK`] —, and a dropped trial's sweep is never started.
    #[test]
    fn a_kept_trial_is_swept_from_the_end_with_its_own_derivatives() {
        let steps = 37;
        let a = (0..steps).map(|k| DMatrix::from_fn(2, 2, |i, j| f64::from(u8::from(i == j)) + 0.01 * (k + 1) as f64 * (i + 2 * j + 1) as f64)).collect();
        let dynamics = LinearDynamics::new(a, vec![DMatrix::from_element(2, 1, 0.1)]).unwrap();
        let cost = QuadraticCost::new(vec![DMatrix::identity(2, 2)], vec![DMatrix::identity(1, 1)], DMatrix::identity(2, 2), vec![1.0, -1.0], vec![]).unwrap();
        for threads in [1, 2, 3] {
            vidyn_batch::new_pool(threads).unwrap().install(|| {
                let mut out = Derivatives::zeros(steps, 2, 1);
                let mut rec = Recorder::default();
                let kept = simulate_and_derive(&dynamics, &cost, &[0.3, 0.2], steps, &mut |k, _, u| u[0] = (k as f64).sin(), |_, _| Ok(Some(())), Some(&mut rec), &mut out);
                assert!(matches!(kept, Ok(Some(_))), "{threads} threads: the trial was not kept");
                assert!(rec.started);
                assert_eq!(rec.seen.iter().map(|s| s.0).collect::<Vec<_>>(), (0..steps).rev().collect::<Vec<_>>(), "{threads} threads");
                for (k, a, lx) in &rec.seen {
                    assert_eq!((a, lx), (&out.a[*k], &out.cost.stages[*k].lx), "{threads} threads, stage {k}");
                    assert_eq!(a, &dynamics.a[*k]);
                }
                let mut rec = Recorder::default();
                let dropped = simulate_and_derive(&dynamics, &cost, &[0.3, 0.2], steps, &mut |_, _, u| u[0] = 0.0, |_, _| Ok(None::<()>), Some(&mut rec), &mut out);
                assert!(matches!(dropped, Ok(None)));
                assert!(!rec.started && rec.seen.is_empty(), "{threads} threads: a dropped trial was swept");
            });
        }
    }
}
