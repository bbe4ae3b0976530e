//! Tests of vidyn-maximal through its public API (one test binary; `common` holds the helpers it
//! shares with the tests of internals, which sit next to their modules in `src/`).

use vidyn_maximal::*;

mod body_contact_tests;
mod common;
mod cone_tests;
mod contact_tests;
mod geometry_tests;
mod integrator_tests;
mod linearize_tests;
