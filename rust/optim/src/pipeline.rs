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
//! Once the rollout is over the helpers evaluate the trial's stage costs (in groups of
//! [`VALUE_CHUNK`], summed in stage order as [`crate::total_cost`] does) for the verdict —
//! except those a chunk's derivatives already gave ([`Cost::value_in_derivatives`]) —, then
//! take the chunks left from the last one down. A caller that passes a [`ReverseSweep`]
//! (iLQR's next backward pass) has the rollout's thread run it meanwhile, over the finished
//! chunks from the end — betting on the verdict again, and stopping as soon as it is a
//! rejection —, deriving chunks itself when the next one it needs is not done: the backward
//! pass, sequential in time, then overlaps the cost evaluation and the last derivatives
//! instead of following them. Alone (a pool of one thread) the rollout's thread evaluates
//! the cost first, so that a rejected trial costs no more than its rollout and cost.
//!
//! A helper out of work stays (spinning, then yielding) until the rollout's thread is done
//! with the trial instead of returning to the pool: a rayon worker that idles goes to sleep
//! within microseconds, and waking it for the next trial took 30–90 µs on our test machine,
//! against rounds of about 1 ms on the cart-pole swing-up.

use crate::cost::{add_up, trajectory_cost_sequential, Cost, CostDerivatives, StageDerivatives};
use crate::dynamics::{Dynamics, Nominal, Policy};
use crate::error::{OptimError, Result};
use nalgebra::DMatrix;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Steps per unit of derivative work handed to a helper.
const CHUNK: usize = 4;

/// Stages per unit of cost-evaluation work.
const VALUE_CHUNK: usize = 16;

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

/// A trial kept by its judge: the trajectory, the judge's verdict and the seconds from the end
/// of the rollout on (the trial's cost, the derivatives not done behind the rollout and the
/// sweep run alongside them).
pub(crate) struct Kept<T> {
    pub(crate) x: Vec<f64>,
    pub(crate) u: Vec<f64>,
    pub(crate) verdict: T,
    pub(crate) after_rollout: f64,
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

/// The closed-loop rollout of [`simulate_and_derive`]: `steps` steps from `x0`, the controls
/// from `policy`, near the nominal `near` when given ([`Dynamics::rollout_near`]).
pub(crate) struct ClosedLoop<'r, 'p> {
    pub x0: &'r [f64],
    pub steps: usize,
    pub policy: &'r mut Policy<'p>,
    pub near: Option<&'r Nominal<'r>>,
}

/// Sees each knot `(k, x_k, u_k)` of a rollout as soon as its control is final.
pub(crate) type Observer<'a> = dyn FnMut(usize, &[f64], &[f64]) + 'a;

/// A rollout of [`Rollout::Custom`]: it hands its knots to the observer and returns `(x, u)`.
pub(crate) type RunRollout<'r> = Box<dyn FnOnce(&mut Observer<'_>) -> Result<(Vec<f64>, Vec<f64>)> + 'r>;

/// A rollout [`simulate_and_derive`] runs: a closed loop, or `steps` steps simulated by `run`
/// (e.g. FDDP's trial that keeps part of each gap), which hands the start `(k, x_k, u_k)` of
/// every step to its observer in order and returns the trajectory `(x, u)`, row-major.
pub(crate) enum Rollout<'r, 'p> {
    Closed(ClosedLoop<'r, 'p>),
    Custom { steps: usize, run: RunRollout<'r> },
}

impl<'r, 'p> From<ClosedLoop<'r, 'p>> for Rollout<'r, 'p> {
    fn from(closed: ClosedLoop<'r, 'p>) -> Self {
        Self::Closed(closed)
    }
}

/// Simulates `rollout` (a closed loop as [`Dynamics::rollout`]), then asks
/// `judge(x, u, J)`, with `J` the trajectory's cost ([`crate::total_cost`], bit for bit),
/// whether to keep the trajectory (`Ok(Some(verdict))`) or drop it (`Ok(None)`). A kept
/// trajectory comes with its derivatives in `out` (every stage, and the terminal cost's),
/// computed behind the rollout on the pool's other threads as far as possible, and `sweep`
/// (if any) run over them when they are streamed (both the dynamics' and the cost's;
/// otherwise it is not called: the caller can tell by the sweep's own state). A dropped one
/// leaves `out` partly overwritten, and `sweep` possibly started. The judge runs on the
/// calling thread, and should not itself run parallel work (the helpers occupy the other
/// threads).
pub(crate) fn simulate_and_derive<D, C, T>(
    dynamics: &D,
    cost: &C,
    rollout: Rollout<'_, '_>,
    judge: impl FnOnce(&[f64], &[f64], Result<f64>) -> Result<Option<T>>,
    sweep: Option<&mut dyn ReverseSweep>,
    out: &mut Derivatives,
) -> std::result::Result<Option<Kept<T>>, TrialError>
where
    D: Dynamics + ?Sized,
    C: Cost + ?Sized,
{
    let steps = match &rollout {
        Rollout::Closed(closed) => closed.steps,
        Rollout::Custom { steps, .. } => *steps,
    };
    let (nx, nu) = (dynamics.nx(), dynamics.nu());
    let streams = Streams { dynamics: dynamics.linearizes_steps(), cost: cost.parallel() };
    let shared = Shared::new(steps, nx, nu);
    // the engine's pool, whether this thread is one of its workers or not (then the helpers are
    // its threads, and this thread runs the rollout)
    let pool = vidyn_batch::pool();
    let pool = &*pool;
    let helpers = if streams.dynamics || streams.cost { pool.current_num_threads().saturating_sub(1) } else { 0 };
    let mut slots = Vec::with_capacity(steps.div_ceil(CHUNK));
    for (c, ((a, b), stages)) in out.a.chunks_mut(CHUNK).zip(out.b.chunks_mut(CHUNK)).zip(out.cost.stages.chunks_mut(CHUNK)).enumerate() {
        slots.push(Mutex::new(Slot::Pending(Chunk { k0: c * CHUNK, a, b, stages })));
    }
    let top = AtomicUsize::new(slots.len());
    let work = Work { dynamics, cost, streams, shared: &shared, slots: &slots, top: &top };
    let terminal = &mut out.cost.terminal;
    let mut terminal_done = false;
    let (rollout, verdict, tail) = pool.in_place_scope(|s| {
        // when this closure returns or unwinds: no helper waits any longer
        let _release = Release(&shared);
        // a helper job that the rollout's own thread picks up (when something on it blocks in
        // rayon and runs pending jobs meanwhile) must not wait for that thread: it does nothing,
        // the rollout's thread does all the work left once the verdict is in
        let owner = pool.current_thread_index();
        let (work, shared) = (&work, &shared);
        for _ in 0..helpers {
            s.spawn(move |_| {
                if pool.current_thread_index() == owner {
                    return;
                }
                shared.helping.fetch_add(1, Ordering::AcqRel);
                let _leave = Leave(&shared.helping);
                work.run();
                let mut idle = 0;
                while !shared.finished.load(Ordering::Acquire) {
                    wait(&mut idle);
                }
            });
        }
        let rollout = match rollout {
            Rollout::Closed(ClosedLoop { x0, steps, policy, near }) => {
                let publish = &mut |k: usize, xk: &[f64], uk: &mut [f64]| {
                    policy(k, xk, uk);
                    shared.publish(k, xk, uk);
                };
                match near {
                    Some(near) => dynamics.rollout_near(x0, steps, publish, near),
                    None => dynamics.rollout(x0, steps, publish),
                }
            }
            Rollout::Custom { run, .. } => run(&mut |k, xk, uk| shared.publish(k, xk, uk)),
        };
        match &rollout {
            Ok((x, _)) => shared.publish(steps, &x[steps * nx..], &[]),
            Err(_) => shared.stop.store(true, Ordering::Release),
        }
        shared.rollout_over.store(true, Ordering::Release);
        let start = Instant::now();
        let verdict = match &rollout {
            Err(_) => {
                shared.stop.store(true, Ordering::Release);
                Ok(None)
            }
            Ok((x, u)) if streams.cost => {
                // the stage costs are work items, the helpers' first; meanwhile the rollout's
                // thread runs `sweep`, betting on the verdict (abandoned when the trial is
                // dropped), except alone, where it evaluates the cost first
                let mut judge = Some(judge);
                let mut verdict = None;
                let mut decide = || {
                    if verdict.is_none() && shared.values_done.load(Ordering::Acquire) == steps {
                        let j = shared.total_cost(cost, &x[steps * nx..]);
                        let v = judge.take().map_or(Ok(None), |judge| judge(x, u, j));
                        if !matches!(v, Ok(Some(_))) {
                            shared.stop.store(true, Ordering::Release);
                        }
                        verdict = Some(v);
                    }
                    verdict.is_none() || matches!(verdict, Some(Ok(Some(_))))
                };
                let (mut xs, mut us) = (Vec::new(), Vec::new());
                if helpers == 0 {
                    while work.value_item(&mut xs, &mut us) {}
                }
                if let Some(sweep) = sweep.filter(|_| streams.dynamics && decide()) {
                    terminal.clear();
                    terminal_done = true;
                    match cost.terminal_derivatives(&x[steps * nx..], terminal) {
                        Ok(()) => {
                            sweep.start(terminal);
                            work.sweep(x, u, sweep, &mut decide);
                        }
                        Err(e) => shared.fail(steps, e),
                    }
                }
                let mut idle = 0;
                while decide() && shared.values_done.load(Ordering::Acquire) < steps {
                    if !work.value_item(&mut xs, &mut us) {
                        wait(&mut idle);
                    }
                }
                decide();
                if matches!(verdict, Some(Ok(Some(_)))) {
                    work.run();
                }
                verdict.unwrap_or(Ok(None))
            }
            Ok((x, u)) => {
                let verdict = judge(x, u, trajectory_cost_sequential(cost, x, u, nx, nu));
                if matches!(verdict, Ok(Some(_))) {
                    work.run();
                } else {
                    shared.stop.store(true, Ordering::Release);
                }
                verdict
            }
        };
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
    let after_rollout = tail.elapsed().as_secs_f64();
    Ok(Some(Kept { x, u, verdict, after_rollout }))
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
    /// The rollout's thread is done with the trial: idle helpers return.
    finished: AtomicBool,
    /// Helpers between their start and their return.
    helping: AtomicUsize,
    /// The first failing step and its error.
    failure: Mutex<Option<(usize, OptimError)>>,
    /// Stage costs `ℓ_k(x_k, u_k)` (`f64` bits) and whether each is in, the next group of
    /// [`VALUE_CHUNK`] stages to evaluate, the number of stages evaluated, and the first stage
    /// that failed.
    values: Vec<AtomicU64>,
    valued: Vec<AtomicBool>,
    next_value: AtomicUsize,
    values_done: AtomicUsize,
    value_failure: Mutex<Option<(usize, OptimError)>>,
}

impl Shared {
    fn new(steps: usize, nx: usize, nu: usize) -> Self {
        let atomics = |len: usize| (0..len).map(|_| AtomicU64::new(0)).collect();
        Self {
            steps,
            nx,
            nu,
            x: atomics((steps + 1) * nx),
            u: atomics(steps * nu),
            states: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            rollout_over: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            helping: AtomicUsize::new(0),
            failure: Mutex::new(None),
            values: atomics(steps),
            valued: (0..steps).map(|_| AtomicBool::new(false)).collect(),
            next_value: AtomicUsize::new(0),
            values_done: AtomicUsize::new(0),
            value_failure: Mutex::new(None),
        }
    }

    /// The trajectory's cost once every stage cost is in: their sum in stage order plus the
    /// terminal cost at `x_n` (bit for bit [`crate::total_cost`]), or the first stage's error.
    fn total_cost<C: Cost + ?Sized>(&self, cost: &C, x_n: &[f64]) -> Result<f64> {
        if let Some((_, e)) = self.value_failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            return Err(e);
        }
        Ok(add_up(self.values.iter().map(|v| f64::from_bits(v.load(Ordering::Acquire))), cost.terminal_value(x_n)?))
    }

    /// Records stage `k`'s cost (the first time; a second evaluation — a group of stage costs
    /// and a chunk's derivatives racing — finds the same value, bit for bit).
    fn set_value(&self, k: usize, v: f64) {
        self.values[k].store(v.to_bits(), Ordering::Relaxed);
        if !self.valued[k].swap(true, Ordering::AcqRel) {
            self.values_done.fetch_add(1, Ordering::AcqRel);
        }
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

    /// Records the failure of step `k`'s derivatives unless an earlier step's already failed.
    fn fail(&self, k: usize, e: OptimError) {
        keep_first(&self.failure, k, e);
    }
}

/// Dropped when the rollout's thread is done with a trial: sets [`Shared::finished`], then
/// waits until the helpers that started have returned. (The scope waits for them anyway, but a
/// thread outside the pool does so asleep, and waking it took as long as a wake-up of a
/// worker; helpers return within a spin once the flag is set.)
struct Release<'a>(&'a Shared);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.finished.store(true, Ordering::Release);
        let mut idle = 0;
        while self.0.helping.load(Ordering::Acquire) > 0 {
            wait(&mut idle);
        }
    }
}

/// Counts a helper out when dropped (also when it unwinds).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits for another thread's progress: spins briefly, then yields the core, then sleeps
/// (`idle` counts the calls since the last progress).
fn wait(idle: &mut u32) {
    *idle += 1;
    if *idle < 64 {
        std::hint::spin_loop();
    } else if *idle < 1024 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// Stores `(k, e)` in `slot` unless it holds an earlier step's error.
fn keep_first(slot: &Mutex<Option<(usize, OptimError)>>, k: usize, e: OptimError) {
    let mut first = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if first.as_ref().is_none_or(|(j, _)| k < *j) {
        *first = Some((k, e));
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
                if !self.value_item(&mut x, &mut u) && !self.derive_from_end(&mut x, &mut u) {
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
                wait(&mut idle);
            }
        }
    }

    /// Derives chunk `c` if it is still pending, leaving it done.
    fn derive_slot(&self, c: usize, x: &mut Vec<f64>, u: &mut Vec<f64>) {
        let Some(mut chunk) = self.take(c, false) else { return };
        self.shared.read(chunk.k0, chunk.k0 + chunk.a.len(), x, u);
        self.derive(&mut chunk, x, u);
        if let Ok(mut slot) = self.slots[c].lock() {
            *slot = Slot::Done(chunk);
        }
    }

    /// Takes chunk `c` out of its slot (leaving it taken) if it is pending (`done` false) or
    /// derived (`done` true).
    fn take(&self, c: usize, done: bool) -> Option<Chunk<'a>> {
        let mut slot = self.slots[c].lock().ok()?;
        match std::mem::replace(&mut *slot, Slot::Taken) {
            Slot::Pending(chunk) if !done => Some(chunk),
            Slot::Done(chunk) if done => Some(chunk),
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

    /// On the rollout's thread, after a complete rollout `(x, u)` and `sweep.start`: feeds
    /// `sweep` the stages from the last one down, chunk by chunk as they are done, deriving
    /// the chunk it needs next itself if nobody has taken it, or another one from the end (or
    /// a group of stage costs) while a helper finishes it. Asks `keep()` between chunks and
    /// returns as soon as it says no (the trial was dropped); otherwise derives every chunk,
    /// even after the sweep gave up.
    fn sweep(&self, x: &[f64], u: &[f64], sweep: &mut dyn ReverseSweep, keep: &mut dyn FnMut() -> bool) {
        let (mut xs, mut us) = (Vec::new(), Vec::new());
        let mut going = true;
        for c in (0..self.slots.len()).rev() {
            let mut idle = 0;
            let chunk = loop {
                if !keep() {
                    return;
                }
                self.derive_slot(c, &mut xs, &mut us);
                if let Some(chunk) = self.take(c, true) {
                    break chunk;
                }
                if !self.derive_from_end(&mut xs, &mut us) && !self.value_item(&mut xs, &mut us) {
                    wait(&mut idle);
                }
            };
            for i in (0..chunk.a.len()).rev() {
                going = going && sweep.step(chunk.k0 + i, x, u, &chunk.a[i], &chunk.b[i], &chunk.stages[i]);
            }
        }
    }

    /// Evaluates the next group of stage costs from the published trajectory; false when
    /// every group is taken.
    fn value_item(&self, x: &mut Vec<f64>, u: &mut Vec<f64>) -> bool {
        let sh = self.shared;
        let k0 = sh.next_value.fetch_add(1, Ordering::AcqRel) * VALUE_CHUNK;
        if k0 >= sh.steps {
            return false;
        }
        let k1 = (k0 + VALUE_CHUNK).min(sh.steps);
        sh.read(k0, k1, x, u);
        let (nx, nu) = (sh.nx, sh.nu);
        for k in (k0..k1).filter(|&k| !sh.valued[k].load(Ordering::Acquire)) {
            let i = k - k0;
            match self.cost.running_value(k, &x[i * nx..(i + 1) * nx], &u[i * nu..(i + 1) * nu]) {
                Ok(v) => sh.set_value(k, v),
                Err(e) => {
                    keep_first(&sh.value_failure, k, e);
                    sh.set_value(k, f64::NAN);
                }
            }
        }
        true
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
                match self.cost.running_derivatives(chunk.k0 + i, &x[i * nx..(i + 1) * nx], &u[i * nu..(i + 1) * nu], stage) {
                    Ok(()) if self.cost.value_in_derivatives() => self.shared.set_value(chunk.k0 + i, stage.l),
                    Ok(()) => {}
                    Err(e) => self.shared.fail(chunk.k0 + i, e),
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
    /// that is not a multiple of [`CHUNK`] —, and the judge gets the trajectory's cost; on one
    /// thread a dropped trial's sweep is never started.
    #[test]
    fn a_kept_trial_is_swept_from_the_end_with_its_own_derivatives() {
        let steps = 37;
        let a = (0..steps).map(|k| DMatrix::from_fn(2, 2, |i, j| f64::from(u8::from(i == j)) + 0.01 * (k + 1) as f64 * (i + 2 * j + 1) as f64)).collect();
        let dynamics = LinearDynamics::new(a, vec![DMatrix::from_element(2, 1, 0.1)]).unwrap();
        let cost = QuadraticCost::new(vec![DMatrix::identity(2, 2)], vec![DMatrix::identity(1, 1)], DMatrix::identity(2, 2), vec![1.0, -1.0], vec![]).unwrap();
        let check = |threads: usize, place: &str| {
            let mut out = Derivatives::zeros(steps, 2, 1);
            let mut rec = Recorder::default();
            let kept = simulate_and_derive(
                &dynamics,
                &cost,
                ClosedLoop { x0: &[0.3, 0.2], steps, policy: &mut |k, _, u| u[0] = (k as f64).sin(), near: None }.into(),
                |x, u, j| Ok(Some((j?, crate::total_cost(&cost, x, u, 2, 1)?))),
                Some(&mut rec),
                &mut out,
            );
            let Ok(Some(kept)) = kept else { panic!("{threads} threads {place}: the trial was not kept") };
            assert_eq!(kept.verdict.0.to_bits(), kept.verdict.1.to_bits(), "{threads} threads {place}: the judge's cost is not total_cost's");
            assert!(rec.started);
            assert_eq!(rec.seen.iter().map(|s| s.0).collect::<Vec<_>>(), (0..steps).rev().collect::<Vec<_>>(), "{threads} threads {place}");
            for (k, a, lx) in &rec.seen {
                assert_eq!((a, lx), (&out.a[*k], &out.cost.stages[*k].lx), "{threads} threads {place}, stage {k}");
                assert_eq!(a, &dynamics.a[*k]);
            }
            let mut rec = Recorder::default();
            let dropped = simulate_and_derive(
                &dynamics,
                &cost,
                ClosedLoop { x0: &[0.3, 0.2], steps, policy: &mut |_, _, u| u[0] = 0.0, near: None }.into(),
                |_, _, _| Ok(None::<()>),
                Some(&mut rec),
                &mut out,
            );
            assert!(matches!(dropped, Ok(None)));
            // with helpers the sweep starts before the verdict (and stops at it); alone,
            // the verdict comes first
            assert!(threads > 1 || (!rec.started && rec.seen.is_empty()), "{threads} threads {place}: a dropped trial was swept on one thread");
        };
        for threads in [1, 2, 3] {
            let pool = vidyn_batch::new_pool(threads).unwrap();
            // the rollout on a thread outside the pool, and on one of its workers
            vidyn_batch::with_pool(&pool, || check(threads, "outside the pool"));
            pool.install(|| vidyn_batch::with_pool(&pool, || check(threads, "on a worker")));
        }
    }
}
