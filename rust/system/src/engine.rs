//! The engine: one dedicated rayon thread pool, cancellation and progress ([`Control`]), and
//! [`run_rows`], the loop every batched operation is written with: the calling thread and
//! `k − 1` pool threads take chunks of rows in turn, each with its own workspace.
//!
//! # Determinism
//! Every row (a batch element, or a `(trajectory, step)` pair) runs the same sequential code
//! on its own inputs and writes only its own disjoint slice of the outputs; no reduction
//! crosses rows. Workspaces are scratch that every algorithm overwrites before reading. So
//! the results are bit-for-bit those of a loop of single calls, whatever the thread count
//! and the scheduling (checked by `tests::*_bit_for_bit_*` with 1, 2 and 4 threads).
//!
//! # Threads
//! The engine runs on its own [`rayon::ThreadPool`], not on rayon's global pool, so that
//! [`set_num_threads`] can change its size at any time (rayon's global pool is fixed once
//! built). Its size on first use is `VIDYN_NUM_THREADS` when that is a positive integer,
//! otherwise [`std::thread::available_parallelism`]. A batch that is running keeps the pool
//! it started on; the next batch uses the new one. A batch computes on the calling thread
//! plus `k − 1` of the pool's threads, so `k` threads run in all (one thread: no pool thread
//! is involved).

use crate::error::{BatchError, Failures};
use rayon::iter::plumbing::{Producer, ProducerCallback};
use rayon::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Name of the environment variable read (once, at first use) for the number of threads.
pub const NUM_THREADS_ENV: &str = "VIDYN_NUM_THREADS";

/// The most threads the engine's pool may have. Its work is CPU-bound, so threads beyond
/// the cores only add switching; the cap keeps a typo (`set_num_threads(10000)`) from
/// starting thousands of OS threads (measured: ~3 minutes for 10 000).
pub const MAX_THREADS: usize = 256;

static POOL: RwLock<Option<Arc<ThreadPool>>> = RwLock::new(None);

/// The thread count used when none was set: `VIDYN_NUM_THREADS` if it parses as a positive
/// integer, else the number of CPUs the process may use; at most [`MAX_THREADS`].
#[must_use]
pub fn default_num_threads() -> usize {
    std::env::var(NUM_THREADS_ENV)
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&k| k > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
        .min(MAX_THREADS)
}

fn build(k: usize) -> Result<ThreadPool, BatchError<std::convert::Infallible>> {
    ThreadPoolBuilder::new()
        .num_threads(k)
        .thread_name(|i| format!("vidyn-batch-{i}"))
        .build()
        .map_err(|e| BatchError::Shape(format!("cannot start {k} threads: {e}")))
}

thread_local! {
    static OVERRIDE: std::cell::RefCell<Option<Arc<ThreadPool>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with every batch started from this thread using `pool` instead of the engine's
/// pool (for tests and benchmarks comparing thread counts without touching the global
/// setting).
pub fn with_pool<R>(pool: &Arc<ThreadPool>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Arc<ThreadPool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let old = self.0.take();
            OVERRIDE.with(|o| *o.borrow_mut() = old);
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.borrow_mut().replace(Arc::clone(pool))));
    f()
}

/// A new pool of `k` threads for [`with_pool`].
///
/// # Errors
/// When the threads cannot be started.
pub fn new_pool(k: usize) -> Result<Arc<ThreadPool>, BatchError<std::convert::Infallible>> {
    build(k.max(1)).map(Arc::new)
}

/// The engine's thread pool (built on first use, see the module docs), or the one set by
/// [`with_pool`] on this thread.
///
/// # Panics
/// If the operating system refuses to start the default number of threads.
#[must_use]
pub fn pool() -> Arc<ThreadPool> {
    if let Some(p) = OVERRIDE.with(|o| o.borrow().clone()) {
        return p;
    }
    if let Some(p) = POOL.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
        return Arc::clone(p);
    }
    let mut slot = POOL.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    Arc::clone(slot.get_or_insert_with(|| Arc::new(build(default_num_threads()).expect("vidyn-batch: cannot start the thread pool"))))
}

/// Runs `op` on the engine's pool (as `pool().install(op)`): parallel iterators inside it use
/// the engine's threads. Other crates' parallel loops (the optimisers' cost derivatives) go
/// through it so that a process keeps one set of worker threads: two pools on the same cores
/// make each one's idle spinning steal time from the other's work.
pub fn install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    pool().install(op)
}

/// Replaces the engine's pool by one of `k` threads (`k = 0`: [`default_num_threads`]).
/// Batches already running finish on the old pool.
///
/// # Errors
/// `k` above [`MAX_THREADS`], or threads that cannot be started (the old pool stays in
/// place either way).
pub fn set_num_threads(k: usize) -> Result<(), BatchError<std::convert::Infallible>> {
    if k > MAX_THREADS {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        return Err(BatchError::Shape(format!("k = {k} threads is more than vidyn's limit of {MAX_THREADS} (this machine has {cpus} CPUs; threads beyond the CPUs do not speed up the computation); give 1 to {MAX_THREADS}, or 0 for the default")));
    }
    let k = if k == 0 { default_num_threads() } else { k };
    let new = Arc::new(build(k)?);
    *POOL.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(new);
    Ok(())
}

/// Number of threads of the engine's pool.
#[must_use]
pub fn num_threads() -> usize {
    pool().current_num_threads()
}

/// What [`Control::with_poll`] calls on the calling thread while a batch runs.
type PollHook<'a> = dyn Fn(&Control<'a>) + Sync + 'a;

/// The poll hook of a [`Control`], the thread allowed to run it and when it last ran
/// (nanoseconds after `created`).
struct Poll<'a> {
    every: Duration,
    hook: Box<PollHook<'a>>,
    owner: std::thread::ThreadId,
    created: Instant,
    last: AtomicU64,
}

/// How many units of progress pass between two looks at the clock by the polling thread.
const POLL_STRIDE: usize = 64;

/// Cancellation flag and progress counter of a running batch, shared with the caller (who
/// may poll [`Control::done`] and call [`Control::cancel`] from another thread), and an
/// optional hook that the calling thread runs as it records progress ([`Control::with_poll`]).
#[derive(Default)]
pub struct Control<'a> {
    cancel: AtomicBool,
    done: AtomicUsize,
    poll: Option<Poll<'a>>,
}

impl std::fmt::Debug for Control<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").field("cancel", &self.cancel).field("done", &self.done).field("poll_every", &self.poll.as_ref().map(|p| p.every)).finish()
    }
}

impl<'a> Control<'a> {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }
    /// A control whose `hook` runs on the thread that creates it — the caller, which computes
    /// rows itself ([`run_rows`]) — at most once per `every`, when that thread records
    /// progress (it looks at the clock every `POLL_STRIDE` (64) units of the shared count). The
    /// Python binding checks for Ctrl-C and reports progress there. Other threads never run it.
    #[must_use]
    pub fn with_poll(every: Duration, hook: impl Fn(&Control<'a>) + Sync + 'a) -> Self {
        let poll = Poll { every, hook: Box::new(hook), owner: std::thread::current().id(), created: Instant::now(), last: AtomicU64::new(0) };
        Self { poll: Some(poll), ..Self::default() }
    }
    /// Asks the batch to stop: rows not yet started report [`BatchError::Cancelled`];
    /// rollouts stop between steps.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
    /// Units of work completed so far (rows, or steps for rollouts; each operation says).
    #[must_use]
    pub fn done(&self) -> usize {
        self.done.load(Ordering::Relaxed)
    }
    /// Records `n` more units of completed work (and, on the polling thread, runs the poll
    /// hook when it is due).
    pub fn advance(&self, n: usize) {
        let before = self.done.fetch_add(n, Ordering::Relaxed);
        if let Some(p) = &self.poll {
            if (before + n) / POLL_STRIDE != before / POLL_STRIDE && std::thread::current().id() == p.owner {
                let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
                if nanos(p.created.elapsed()).saturating_sub(p.last.load(Ordering::Relaxed)) >= nanos(p.every) {
                    (p.hook)(self);
                    p.last.store(nanos(p.created.elapsed()), Ordering::Relaxed);
                }
            }
        }
    }
}

/// The output rows of one item: filled with a marker (NaN, or -1 for counts) when the row
/// fails, so a failed row can never be mistaken for a result.
pub trait OutRow {
    fn mark_failed(&mut self);
}

impl OutRow for () {
    fn mark_failed(&mut self) {}
}
impl OutRow for &mut [f64] {
    fn mark_failed(&mut self) {
        self.fill(f64::NAN);
    }
}
impl OutRow for &mut [i64] {
    fn mark_failed(&mut self) {
        self.fill(-1);
    }
}
macro_rules! out_row_tuple {
    ($($t:ident . $i:tt),+) => {
        impl<$($t: OutRow),+> OutRow for ($($t,)+) {
            fn mark_failed(&mut self) {
                $(self.$i.mark_failed();)+
            }
        }
    };
}
out_row_tuple!(A.0);
out_row_tuple!(A.0, B.1);
out_row_tuple!(A.0, B.1, C.2);
out_row_tuple!(A.0, B.1, C.2, D.3);
out_row_tuple!(A.0, B.1, C.2, D.3, E.4);

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(ToString::to_string).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs `f(workspace, row, outputs)` for every item of `items` (an indexed parallel iterator
/// of output rows, typically a zip of `par_chunks_mut`) on the engine's pool. Returns the
/// failed rows in increasing order; a failed row's outputs are marked ([`OutRow`]), a panic in
/// one row is caught and reported as [`BatchError::Panicked`] for that row only (and that
/// participant's workspace is rebuilt). Rows not started when `control` is cancelled report
/// [`BatchError::Cancelled`] and are left untouched. `control` advances by `per_row` per
/// finished row (`0`: `f` advances it itself).
///
/// **Scheduling.** The rows are cut into about `8k` contiguous chunks (`k` threads in the
/// pool) that the participants take in turn from a shared counter: the calling thread itself
/// and `k − 1` helpers spawned on the pool (none with one thread: the call then runs inline,
/// with no hand-off). The caller starts on the first chunk at once, so the helpers' wake-up
/// overlaps useful work instead of preceding it, and a caller that finishes last needs no
/// wake-up of its own; a short batch on an idle pool pays at most one helper's wake-up.
/// Each participant makes one workspace with `init` (at most `k` per call, never one per
/// row); the caller runs `control`'s poll hook as it records progress.
pub fn run_rows<I, W, E, F>(control: &Control<'_>, items: I, init: &(dyn Fn() -> W + Sync), per_row: usize, f: F) -> Failures<E>
where
    I: IndexedParallelIterator,
    I::Item: OutRow,
    W: Send,
    E: Send,
    F: Fn(&mut W, usize, &mut I::Item) -> Result<(), BatchError<E>> + Sync,
{
    let rows = items.len();
    if rows == 0 {
        return Vec::new();
    }
    items.with_producer(Participants { control, init, per_row, rows, f })
}

/// The rows of a [`run_rows`] call with everything its participants share; receives the
/// items as a rayon [`Producer`], which splits into contiguous chunks.
struct Participants<'c, 'a, W, F> {
    control: &'c Control<'a>,
    init: &'c (dyn Fn() -> W + Sync),
    per_row: usize,
    rows: usize,
    f: F,
}

impl<T, W, E, F> ProducerCallback<T> for Participants<'_, '_, W, F>
where
    T: OutRow,
    W: Send,
    E: Send,
    F: Fn(&mut W, usize, &mut T) -> Result<(), BatchError<E>> + Sync,
{
    type Output = Failures<E>;

    fn callback<P: Producer<Item = T>>(self, producer: P) -> Failures<E> {
        let pool = pool();
        let threads = pool.current_num_threads().max(1);
        let size = (self.rows / (8 * threads)).max(1);
        let mut chunks = Vec::with_capacity(self.rows.div_ceil(size));
        let (mut start, mut rest) = (0, producer);
        while self.rows - start > size {
            let (head, tail) = rest.split_at(size);
            chunks.push(Mutex::new(Some((start, head))));
            (start, rest) = (start + size, tail);
        }
        chunks.push(Mutex::new(Some((start, rest))));
        let next = AtomicUsize::new(0);
        let failures = Mutex::new(Vec::new());
        let work = || {
            let mut ws: Option<W> = None;
            let mut local = Vec::new();
            while let Some(slot) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) {
                let Some((first, chunk)) = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() else { continue };
                for (row, mut out) in (first..).zip(chunk.into_iter()) {
                    if let Some(e) = self.run_row(&mut ws, row, &mut out) {
                        local.push((row, e));
                    }
                }
            }
            if !local.is_empty() {
                failures.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(local);
            }
        };
        let helpers = (threads - 1).min(chunks.len() - 1);
        pool.in_place_scope(|scope| {
            for _ in 0..helpers {
                scope.spawn(|_| work());
            }
            work();
        });
        let mut failures = failures.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        failures.sort_by_key(|(row, _)| *row);
        failures
    }
}

impl<W, F> Participants<'_, '_, W, F> {
    /// One row: cancelled, computed (a panic caught and the workspace dropped), counted, its
    /// outputs marked when it failed.
    fn run_row<T: OutRow, E>(&self, ws: &mut Option<W>, row: usize, out: &mut T) -> Option<BatchError<E>>
    where
        F: Fn(&mut W, usize, &mut T) -> Result<(), BatchError<E>>,
    {
        if self.control.is_cancelled() {
            return Some(BatchError::Cancelled);
        }
        let w = ws.get_or_insert_with(self.init);
        let result = match catch_unwind(AssertUnwindSafe(|| (self.f)(w, row, out))) {
            Ok(r) => r,
            Err(p) => {
                *ws = None;
                Err(BatchError::Panicked(panic_message(&*p)))
            }
        };
        self.control.advance(self.per_row);
        let e = result.err()?;
        if !matches!(e, BatchError::Cancelled) {
            out.mark_failed();
        }
        Some(e)
    }
}
