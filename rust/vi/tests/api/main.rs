//! Tests of vidyn-vi through its public API (one test binary; `common` holds the helpers it
//! shares with the tests of internals, which sit next to their modules in `src/`).

use vidyn_vi::*;

mod chart_second_order_tests;
mod common;
mod constrained_second_order_tests;
mod constraint_tests;
mod dense_factorization_tests;
mod integrator_tests;
mod kinematic_tests;
mod lie_group_tests;
mod newton_tests;
mod schedule_tests;
mod second_order_tests;
mod wrench_tests;
