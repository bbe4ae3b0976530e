//! [`ScratchPool`]: scratch for an object that several threads call at once (an optimiser's
//! dynamics or cost, called by the engine's workers and the calling thread).
//!
//! Each call takes a scratch (made on the spot when none is free) and gives it back, so there
//! are as many as there were concurrent calls, allocated once and reused. Which scratch a call
//! gets depends on the threads' timing, so the users follow the engine's rule: a scratch is
//! written before it is read (or reset on taking, e.g.
//! `vidyn_maximal::MaximalWorkspace::forget_multipliers`), and results depend on the call's
//! inputs only. A call that fails can drop its scratch instead of giving it back, so that
//! nothing of the failure reaches the next call.

use std::sync::Mutex;

/// Free scratch of type `W`, boxed so that taking one moves a pointer (module docs).
#[derive(Debug)]
pub struct ScratchPool<W> {
    free: Mutex<Vec<Box<W>>>,
}

impl<W> Default for ScratchPool<W> {
    fn default() -> Self {
        Self { free: Mutex::new(Vec::new()) }
    }
}

impl<W> ScratchPool<W> {
    /// A free scratch, or `init()` when there is none.
    pub fn take(&self, init: impl FnOnce() -> W) -> Box<W> {
        self.free.lock().ok().and_then(|mut free| free.pop()).unwrap_or_else(|| Box::new(init()))
    }

    /// Gives `scratch` back for the next call.
    pub fn give_back(&self, scratch: Box<W>) {
        if let Ok(mut free) = self.free.lock() {
            free.push(scratch);
        }
    }

    /// `f` on a scratch taken for the call (see [`Self::take`]) and given back after it,
    /// whatever `f` returned.
    pub fn with<R>(&self, init: impl FnOnce() -> W, f: impl FnOnce(&mut W) -> R) -> R {
        let mut scratch = self.take(init);
        let out = f(&mut scratch);
        self.give_back(scratch);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::ScratchPool;

    /// Scratch is reused once given back, and made anew while all are taken.
    #[test]
    fn scratch_is_reused_and_made_when_all_are_taken() {
        let pool = ScratchPool::default();
        let mut made = 0;
        let a = pool.take(|| {
            made += 1;
            vec![1.0]
        });
        let b = pool.take(|| {
            made += 1;
            vec![2.0]
        });
        assert_eq!(made, 2);
        let a_ptr = a.as_ptr();
        pool.give_back(a);
        let again = pool.take(|| unreachable!("a free scratch is there"));
        assert_eq!(again.as_ptr(), a_ptr);
        assert_eq!(pool.with(|| vec![3.0], |v| v[0]), 3.0);
        drop((b, again));
    }
}
