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

/// Simulates `steps` steps from `x0` under `policy` (as [`Dynamics::rollout`]), then asks
/// `judge(x, u)` whether to keep the trajectory (`Ok(Some(verdict))`) or drop it (`Ok(None)`).
/// A kept trajectory comes with its derivatives in `out` (every stage, and the terminal
/// cost's), computed behind the rollout on the pool's other threads as far as possible. A
/// dropped one leaves `out` partly overwritten. The judge runs on the calling thread, and
/// should not itself run parallel work (the helpers occupy the other threads).
pub(crate) fn simulate_and_derive<D, C, T>(dynamics: &D, cost: &C, x0: &[f64], steps: usize, policy: &mut Policy<'_>, judge: impl FnOnce(&[f64], &[f64]) -> Result<Option<T>>, out: &mut Derivatives) -> std::result::Result<Option<Kept<T>>, TrialError>
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
        slots.push(Mutex::new(Some(Chunk { k0: c * CHUNK, a, b, stages })));
    }
    let work = Work { dynamics, cost, streams, shared: &shared, slots: &slots };
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
        if matches!(verdict, Ok(Some(_))) {
            work.run();
        } else {
            shared.stop.store(true, Ordering::Release);
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
        if streams.cost {
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
    slots: &'w [Mutex<Option<Chunk<'a>>>],
}

impl<D: Dynamics + ?Sized, C: Cost + ?Sized> Work<'_, '_, D, C> {
    /// Takes chunks whose states are published, in order, until all are taken, the trial is
    /// abandoned, or the rollout has ended short of the next chunk. Waits for the rollout by
    /// spinning briefly, then yielding the core.
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
            if sh.states.load(Ordering::Acquire) > k1 {
                if sh.next.compare_exchange(c, c + 1, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    let chunk = self.slots[c].lock().ok().and_then(|mut slot| slot.take());
                    if let Some(chunk) = chunk {
                        sh.read(chunk.k0, k1, &mut x, &mut u);
                        self.derive(chunk, &x, &u);
                    }
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

    /// The streamed derivatives of one chunk from its states `x` and controls `u`.
    fn derive(&self, chunk: Chunk<'_>, x: &[f64], u: &[f64]) {
        let (nx, nu) = (self.shared.nx, self.shared.nu);
        if self.streams.dynamics {
            if let Err(e) = self.dynamics.linearize_steps(chunk.k0, x, u, chunk.a, chunk.b) {
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
