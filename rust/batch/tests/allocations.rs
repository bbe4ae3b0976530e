//! "No allocation per row", tested: with a counting global allocator, a batch of 4000 rows
//! allocates about as much as a batch of 40 (the per-thread workspaces and rayon's
//! bookkeeping per split), far from one allocation per row.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use vidyn_batch::{dynamics, trajectories, ContractedOut, Control, RolloutOut, Start, Trajectories};

struct Counting;
static COUNT: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        COUNT.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocations(f: impl FnOnce()) -> usize {
    let before = COUNT.load(Ordering::Relaxed);
    f();
    COUNT.load(Ordering::Relaxed) - before
}

#[test]
fn batches_do_not_allocate_per_row() {
    let model = vidyn_rbd::builders::pendulum_chain(4, true);
    let nv = model.nv;
    let _ = vidyn_batch::pool(); // start the threads outside the measurement
    let count = |b: usize| {
        let (q, v) = (vec![0.3; b * nv], vec![0.1; b * nv]);
        let mut tau = vec![0.0; b * nv];
        let mut mass = vec![0.0; b * nv * nv];
        allocations(|| {
            assert!(dynamics::rnea(&model, &Control::new(), b, &q, &v, &v, &mut tau).unwrap().is_empty());
            assert!(dynamics::crba(&model, &Control::new(), b, &q, &mut mass).unwrap().is_empty());
        })
    };
    count(10); // warm up
    let (small, large) = (count(40), count(4000));
    eprintln!("rows: 40 -> {small} allocations, 4000 -> {large}");
    assert!(large < small + 400, "40 rows: {small} allocations, 4000 rows: {large}");

    let vi = vidyn_vi::VariationalIntegrator::new(Arc::new(model), vidyn_vi::Scheme::trapezoid(), 0.01, None).unwrap();
    let steps = 20;
    let roll = |b: usize| {
        let (q0, u) = (vec![0.2; b * nv], vec![0.0; b * steps * nv]);
        let (mut q, mut p, mut it) = (vec![0.0; b * (steps + 1) * nv], vec![0.0; b * (steps + 1) * nv], vec![0; b * steps]);
        allocations(|| {
            let f = trajectories::rollout(
                &vi,
                &Control::new(),
                b,
                steps,
                &q0,
                Start::Momentum(&u[..b * nv]),
                &u,
                RolloutOut { q: &mut q, p: &mut p, iterations: &mut it },
            )
            .unwrap();
            assert!(f.is_empty());
        })
    };
    roll(4);
    let (small, large) = (roll(8), roll(800));
    eprintln!("trajectories: 8 -> {small} allocations, 800 -> {large}");
    assert!(large < small + 400, "8 trajectories: {small} allocations, 800: {large}");

    // contracted second order: the per-thread scratch is created once per thread, not per row
    let (q, p) = (vec![0.2; 800 * (steps + 1) * nv], vec![0.0; 800 * (steps + 1) * nv]);
    let (u, lam) = (vec![0.0; 800 * steps * nv], vec![0.5; 800 * steps * 2 * nv]);
    let contract = |b: usize| {
        let (mut xx, mut xu, mut uu) = (vec![0.0; b * steps * 4 * nv * nv], vec![0.0; b * steps * 2 * nv * nv], vec![0.0; b * steps * nv * nv]);
        allocations(|| {
            let f = trajectories::linearize_second_order_contracted(
                &vi,
                &Control::new(),
                Trajectories { batch: b, steps, q: &q[..b * (steps + 1) * nv], p: &p[..b * (steps + 1) * nv], u: &u[..b * steps * nv] },
                &lam[..b * steps * 2 * nv],
                ContractedOut { first: None, xx: &mut xx, xu: &mut xu, uu: &mut uu },
            )
            .unwrap();
            assert!(f.is_empty(), "{f:?}");
        })
    };
    contract(4);
    // a single trajectory runs on one thread: what one thread's scratch costs (8 trajectories
    // may or may not reach the pool's second thread, 200 do)
    let one = contract(1);
    let (small, large) = (contract(8), contract(200));
    eprintln!("contracted second order: 1 trajectory -> {one} allocations, 8 -> {small}, 200 -> {large}");
    assert!(large <= small + one, "1 trajectory: {one} allocations, 8: {small}, 200: {large}");
}
