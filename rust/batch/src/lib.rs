//! The parallel batch engine of vidyn: dynamics, rollouts and linearisations over a leading
//! batch axis, on the calling thread helped by a dedicated rayon pool, one workspace per thread.
//!
//! * [`engine`] (from `vidyn-system`): the pool ([`set_num_threads`], env var
//!   `VIDYN_NUM_THREADS`), per-thread workspaces, cancellation and progress ([`Control`]) and
//!   [`engine::run_rows`], the one loop every operation uses. Outputs are caller-provided
//!   row-major slices filled through disjoint `par_chunks_mut`; nothing is allocated per row.
//! * [`dynamics`]: `rnea`, `aba`, `crba`, `minverse`, `rnea_derivatives`, `aba_derivatives`,
//!   `rnea_second_order(_contracted)` over `(batch, nq)` / `(batch, nv)` inputs.
//! * [`DiscreteDynamics`] (from `vidyn-system`): the trait (step, linearise to first order,
//!   optional second-order and contracted terms) that `vidyn_vi::VariationalIntegrator` and
//!   `vidyn_maximal::MaximalIntegrator` implement in their own crates.
//! * [`trajectories`]: batched rollouts (parallel over trajectories) and linearisations
//!   (parallel over all `(trajectory, step)` pairs) of any [`DiscreteDynamics`].
//!
//! # Guarantees
//! * Results are bit-for-bit those of a loop of single calls, for any thread count (each row
//!   runs the same sequential code; no reduction crosses rows).
//! * A bad row (NaN, non-unit quaternion, a Newton solve that fails, even a panic) fails
//!   alone: every operation returns the list of failed rows with their errors
//!   ([`Failures`]) and marks their outputs (NaN, iterations −1); the other rows complete.
//!
//! ```
//! use std::sync::Arc;
//! use vidyn_batch::{dynamics, Control};
//! let model = vidyn_rbd::builders::pendulum_chain(3, true);
//! let (b, nv) = (4, model.nv);
//! let mut q = vec![0.1; b * nv];
//! q[nv] = f64::NAN; // row 1 is bad
//! let (v, a) = (vec![0.0; b * nv], vec![0.0; b * nv]);
//! let mut tau = vec![0.0; b * nv];
//! let failures = dynamics::rnea(&model, &Control::new(), b, &q, &v, &a, &mut tau).unwrap();
//! assert_eq!(failures.len(), 1);
//! assert_eq!(failures[0].0, 1);
//! assert!(tau[nv].is_nan() && tau[0].is_finite());
//! ```

pub mod centroidal;
pub mod dynamics;
pub mod trajectories;

// The engine and the system interface live in `vidyn-system` (below the integrators, which
// implement the interface); they are re-exported here, where batch users look for them.
pub use trajectories::{
    by_trajectory, linearize, linearize_second_order, linearize_second_order_contracted, rollout, ContractedOut, RolloutOut, SecondOrderOut, Start,
    Trajectories,
};
pub use vidyn_system::engine;
pub use vidyn_system::{
    default_num_threads, install, new_pool, num_threads, pool, set_num_threads, with_pool, BatchError, ContractedTerms, Control, DiscreteDynamics, Failures,
    ScratchPool, SecondOrderTerms, StepInput, MAX_THREADS, NUM_THREADS_ENV,
};
