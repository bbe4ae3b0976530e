//! The floor every integrator stands on and every driver of integrators builds on:
//!
//! * [`discrete`]: the [`DiscreteDynamics`] trait, a discrete-time system `x_{k+1} = f(x_k, u_k)`
//!   that steps and linearises (first order, optionally second order and λ-contracted), with
//!   its output layouts. `vidyn-vi` and `vidyn-maximal` implement it for their integrators;
//!   `vidyn-batch` runs any implementation over batches, `vidyn-optim` optimises it.
//! * [`engine`]: the dedicated rayon pool ([`set_num_threads`], env var `VIDYN_NUM_THREADS`),
//!   cancellation and progress ([`Control`]) and [`engine::run_rows`], the loop every parallel
//!   operation of vidyn is written with (one workspace per thread, a failing or panicking row
//!   fails alone).
//! * [`error`]: [`BatchError`], what went wrong for one row (the system's own error, or the
//!   engine's), and the shape checks of the engine's buffers.
//! * [`scratch`]: [`ScratchPool`], the scratch of objects that several threads call at once
//!   (the optimisers' dynamics and costs).
//!
//! The crate depends on nothing of vidyn, so that the dependency arrows point one way:
//! `spatial ← rbd ← {vi, maximal} ← batch ← optim ← python`, all of them on `system`.

pub mod discrete;
pub mod engine;
pub mod error;
pub mod scratch;

pub use discrete::{matrix_to_rows, ContractedTerms, DiscreteDynamics, SecondOrderTerms, StepInput};
pub use engine::{default_num_threads, install, new_pool, num_threads, pool, set_num_threads, with_pool, Control, MAX_THREADS, NUM_THREADS_ENV};
pub use error::{check_finite, check_len, BatchError, Failures};
pub use scratch::ScratchPool;
