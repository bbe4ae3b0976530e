//! Helpers shared by the integration tests (`tests/api`) and the tests of internals next to
//! their modules (`src/lib.rs` includes this module as `test_common`): models, states,
//! schemes and finite-difference checks, on the public API only. Grouped by the test module
//! they came from.

pub(crate) mod chart_second_order;
pub(crate) mod constraint;
pub(crate) mod integrator;
pub(crate) mod kinematic;
pub(crate) mod lie_group;
pub(crate) mod newton;
pub(crate) mod schedule;
pub(crate) mod second_order;
