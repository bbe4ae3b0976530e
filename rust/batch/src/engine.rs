//! The engine: one dedicated rayon thread pool, a per-thread workspace pool, cancellation and
//! progress, and [`run_rows`], the loop every batched operation is written with.
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
//! it started on; the next batch uses the new one.

use crate::error::{BatchError, Failures};
use rayon::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, TryLockError};

/// Name of the environment variable read (once, at first use) for the number of threads.
pub const NUM_THREADS_ENV: &str = "VIDYN_NUM_THREADS";

static POOL: RwLock<Option<Arc<ThreadPool>>> = RwLock::new(None);

/// The thread count used when none was set: `VIDYN_NUM_THREADS` if it parses as a positive
/// integer, else the number of CPUs the process may use.
#[must_use]
pub fn default_num_threads() -> usize {
    std::env::var(NUM_THREADS_ENV)
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&k| k > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
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
/// When the threads cannot be started (the old pool stays in place).
pub fn set_num_threads(k: usize) -> Result<(), BatchError<std::convert::Infallible>> {
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

/// Cancellation flag and progress counter of a running batch, shared with the caller (who
/// may poll [`Control::done`] and call [`Control::cancel`] from another thread).
#[derive(Debug, Default)]
pub struct Control {
    cancel: AtomicBool,
    done: AtomicUsize,
}

impl Control {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
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
    /// Records `n` more units of completed work.
    pub fn advance(&self, n: usize) {
        self.done.fetch_add(n, Ordering::Relaxed);
    }
}

/// One workspace per pool thread, created lazily on the thread's first row: a batch
/// allocates at most `num_threads` workspaces, never one per row.
pub struct PerThread<W> {
    slots: Vec<Mutex<Option<W>>>,
}

impl<W: Send> PerThread<W> {
    #[must_use]
    pub fn new(threads: usize) -> Self {
        Self { slots: (0..threads.max(1)).map(|_| Mutex::new(None)).collect() }
    }

    /// Runs `f` with this thread's workspace. A slot found busy (only possible if `f`
    /// itself re-entered the pool and this thread picked up another row meanwhile) gives a
    /// fresh workspace instead of blocking. `reset`: drop the workspace afterwards (after
    /// a panic, when its contents are unknown).
    pub fn with<R>(&self, init: &(impl Fn() -> W + ?Sized), f: impl FnOnce(&mut W) -> (R, bool)) -> R {
        let idx = rayon::current_thread_index().unwrap_or(0) % self.slots.len();
        let guard = match self.slots[idx].try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        match guard {
            Some(mut g) => {
                let (r, reset) = f(g.get_or_insert_with(init));
                if reset {
                    *g = None;
                }
                r
            }
            None => f(&mut init()).0,
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
    p.downcast_ref::<&str>()
        .map(ToString::to_string)
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// Runs `f(workspace, row, outputs)` for every item of `items` (an indexed parallel iterator
/// of output rows, typically a zip of `par_chunks_mut`) on the engine's pool, with one
/// workspace per thread made by `init`. Returns the failed rows in increasing order; a
/// failed row's outputs are marked ([`OutRow`]), a panic in one row is caught and reported
/// as [`BatchError::Panicked`] for that row only. Rows not started when `control` is
/// cancelled report [`BatchError::Cancelled`] and are left untouched. `control` advances by
/// `per_row` per finished row (`0`: `f` advances it itself).
pub fn run_rows<I, W, E, F>(control: &Control, items: I, init: &(dyn Fn() -> W + Sync), per_row: usize, f: F) -> Failures<E>
where
    I: IndexedParallelIterator,
    I::Item: OutRow,
    W: Send,
    E: Send,
    F: Fn(&mut W, usize, &mut I::Item) -> Result<(), BatchError<E>> + Sync,
{
    let pool = pool();
    pool.install(|| {
        let slots = PerThread::<W>::new(rayon::current_num_threads());
        items
            .enumerate()
            .filter_map(|(row, mut out)| {
                if control.is_cancelled() {
                    return Some((row, BatchError::Cancelled));
                }
                let result = slots.with(init, |ws| match catch_unwind(AssertUnwindSafe(|| f(ws, row, &mut out))) {
                    Ok(r) => (r, false),
                    Err(p) => (Err(BatchError::Panicked(panic_message(&*p))), true),
                });
                control.advance(per_row);
                match result {
                    Ok(()) => None,
                    Err(e) => {
                        if !matches!(e, BatchError::Cancelled) {
                            out.mark_failed();
                        }
                        Some((row, e))
                    }
                }
            })
            .collect()
    })
}
