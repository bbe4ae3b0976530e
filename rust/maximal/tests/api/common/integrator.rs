//! The initial state of the integrator tests, from joint coordinates.

use crate::*;

pub(crate) fn initial_state(vi: &MaximalIntegrator, q: &[f64], v: &[f64]) -> Vec<BodyState> {
    let mut s = vec![BodyState::default(); vi.mechanism().nbodies()];
    vi.mechanism().state_from_minimal(q, v, vi.dt(), &mut s).unwrap();
    s
}
