//! Helpers shared by the integration tests (`tests/api`) and the tests of internals next to
//! their modules (`src/lib.rs` includes this module as `test_common`): initial states and the
//! contact tests' mechanisms, on the public API only. Grouped by the tests they serve.

pub(crate) mod body_contact;
pub(crate) mod contact;
pub(crate) mod integrator;
