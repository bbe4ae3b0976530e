//! Criterion benchmarks of vidyn's dynamics algorithms, one group per robot:
//! `BenchmarkId::new("rnea", "panda")` and so on for forward kinematics (q, v, a), RNEA, ABA,
//! CRBA and M⁻¹.
//!
//! Robots: example-robot-data URDFs found under `$VIDYN_ROBOTS_DIR` (skipped when unset), and
//! `builders::pendulum_chain(n, false)` for n ∈ {5, 10, 20, 50, 100, 200}. Each benchmark
//! cycles through a seeded pool of 256 random states so that the compiler cannot specialise
//! on one input; results go through `black_box`.
//!
//! ```text
//! VIDYN_ROBOTS_DIR=$(python3 benches/compare.py --print-robots-dir) \
//!     cargo bench -p vidyn-benches --bench dynamics -- rnea
//! ```
//! (the directory is `<site-packages>/cmeel.prefix/share/example-robot-data/robots` of the
//! `example-robot-data` wheel). The comparison against Pinocchio is
//! `python3 benches/compare.py`, which uses `vidyn_timings` instead of criterion.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use vidyn_benches::{load_robot, States, CHAIN_SIZES, ROBOTS, ROBOTS_DIR_VAR};
use vidyn_rbd::Model;

const POOL: usize = 256;
const SEED: u64 = 0;

fn bench_model(c: &mut Criterion, name: &str, model: &Model) {
    let s = States::random(model, POOL, SEED);
    let mut ws = model.workspace();
    let mut group = c.benchmark_group(name);
    let mut k = 0usize;
    let mut next = move || {
        k = (k + 1) % POOL;
        k
    };
    group.bench_function(BenchmarkId::new("fk", name), |b| {
        b.iter(|| {
            let k = next();
            vidyn_rbd::forward_kinematics(model, &mut ws, s.q(k), s.v(k), s.a(k)).expect("fk");
            black_box(&ws.accelerations);
        });
    });
    group.bench_function(BenchmarkId::new("rnea", name), |b| {
        b.iter(|| {
            let k = next();
            black_box(vidyn_rbd::rnea(model, &mut ws, s.q(k), s.v(k), s.a(k), None).expect("rnea"));
        });
    });
    group.bench_function(BenchmarkId::new("aba", name), |b| {
        b.iter(|| {
            let k = next();
            black_box(vidyn_rbd::aba(model, &mut ws, s.q(k), s.v(k), s.tau(k), None).expect("aba"));
        });
    });
    group.bench_function(BenchmarkId::new("crba", name), |b| {
        b.iter(|| {
            let k = next();
            black_box(vidyn_rbd::crba(model, &mut ws, s.q(k)).expect("crba"));
        });
    });
    group.bench_function(BenchmarkId::new("minverse", name), |b| {
        b.iter(|| {
            let k = next();
            black_box(vidyn_rbd::minverse(model, &mut ws, s.q(k)).expect("minverse"));
        });
    });
    group.finish();
}

fn robots(c: &mut Criterion) {
    if std::env::var_os(ROBOTS_DIR_VAR).is_none() {
        eprintln!("{ROBOTS_DIR_VAR} is not set: skipping the example-robot-data robots");
        return;
    }
    for spec in ROBOTS {
        let model = load_robot(spec).expect("checked above");
        bench_model(c, spec.name, &model);
    }
}

fn chains(c: &mut Criterion) {
    for &n in CHAIN_SIZES {
        let model = vidyn_rbd::builders::pendulum_chain(n, false);
        bench_model(c, &format!("chain{n}"), &model);
    }
}

criterion_group!(benches, robots, chains);
criterion_main!(benches);
