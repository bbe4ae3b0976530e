//! A step of the maximal-coordinate integrator allocates nothing once the workspace exists
//! (counting global allocator shared with `rust/rbd/tests/no_alloc.rs`, per thread).

use std::sync::Arc;
use vidyn_maximal::models::{cylinder_chain, four_bar_chain};
use vidyn_maximal::{BodyState, MaximalIntegrator, Mechanism};

#[path = "../../rbd/tests/common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{allocations, CountingAlloc};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn steps_do_not_allocate() {
    let chain = Arc::new(cylinder_chain(6, false));
    let mut m1 = Mechanism::from_model(chain).unwrap();
    m1.damping = vec![0.1; 6];
    m1.stiffness = vec![0.5; 6];
    let cases = [(m1, vec![0.3; 6]), four_bar_chain(3)];
    for (mech, q0) in cases {
        let n = q0.len();
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        let mut state = vec![BodyState::default(); vi.mechanism().nbodies()];
        vi.mechanism().state_from_minimal(&q0, &vec![0.1; n], 0.01, &mut state).unwrap();
        let u: Vec<f64> = (0..n).map(|k| 0.1 * k as f64).collect();
        let mut ws = vi.workspace();
        let mut next = state.clone();
        vi.step(&mut ws, 0, &state, &u, None, &mut next).unwrap();
        state.clone_from(&next);
        let count = allocations(|| {
            vi.step(&mut ws, 1, &state, &u, None, &mut next).unwrap();
        });
        assert_eq!(count, 0, "a step allocated {count} times");
    }
}
