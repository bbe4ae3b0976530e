//! The engine against the sequential code: batched results equal a loop of single calls bit
//! for bit with 1, 2 and 4 threads; bad rows fail alone; trajectories that fail are reported
//! per trajectory; the trait's optional methods; cancellation; empty batches. Output buffers
//! start as [`unwritten`], so the same checks prove that every output element is written.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_batch::dynamics::{self, Matrices3, Tensors4};
use vidyn_batch::trajectories::{self, by_trajectory, ContractedOut, RolloutOut, SecondOrderOut, Start, Trajectories};
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{self as rbd, Joint, Model, RbdError};
use vidyn_system::{new_pool, with_pool, BatchError, ContractedTerms, Control, DiscreteDynamics, SecondOrderTerms, StepInput};
use vidyn_vi::{Scheme, VariationalIntegrator, ViError};

const THREADS: [usize; 3] = [1, 2, 4];

fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// An output buffer filled with a NaN whose payload no computation produces (neither a result
/// nor the failure marker `f64::NAN`): comparing bits with the single calls, or with the
/// marker, then also proves that the engine wrote every element. The Python binding relies on
/// it: it hands the engine uninitialised NumPy arrays.
fn unwritten(len: usize) -> Vec<f64> {
    vec![f64::from_bits(0x7ff4_0000_dead_beef); len]
}

/// Iteration counts not yet written (no step reports a negative count other than -1).
fn unwritten_counts(len: usize) -> Vec<i64> {
    vec![i64::MIN; len]
}

/// The failure marker, bit for bit (not any NaN: an unwritten element is a NaN too).
fn marked(x: &f64) -> bool {
    x.to_bits() == f64::NAN.to_bits()
}

fn rows_of(m: &nalgebra::DMatrix<f64>) -> Vec<f64> {
    let mut out = vec![0.0; m.nrows() * m.ncols()];
    vidyn_system::matrix_to_rows(m, &mut out);
    out
}

/// `(q, v, a)` for `batch` rows: random configurations and tangents.
fn inputs(model: &Model, batch: usize, seed: u64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut q = Vec::new();
    for _ in 0..batch {
        q.extend(rbd::random_configuration(model, &mut rng));
    }
    let mut tangent = || (0..batch * model.nv).map(|_| rng.random_range(-2.0..2.0)).collect::<Vec<f64>>();
    let v = tangent();
    let a = tangent();
    (q, v, a)
}

fn models() -> Vec<Model> {
    vec![pendulum_chain(5, false), random_tree(9, 4, &Joint::examples()), random_tree(4, 17, &Joint::examples())]
}

/// Runs `f` on pools of 1, 2 and 4 threads and checks the outputs are identical.
fn same_for_all_threads<T: PartialEq + std::fmt::Debug>(f: impl Fn() -> T) -> T {
    let results: Vec<T> = THREADS.iter().map(|&k| with_pool(&new_pool(k).unwrap(), &f)).collect();
    for r in &results[1..] {
        assert_eq!(r, &results[0]);
    }
    results.into_iter().next().unwrap()
}

#[test]
fn rnea_aba_crba_minverse_bit_for_bit_with_single_calls() {
    for model in models() {
        for batch in [0, 1, 7, 64] {
            let (q, v, a) = inputs(&model, batch, batch as u64);
            let (nq, nv) = (model.nq, model.nv);
            let run = || {
                let c = Control::new();
                let mut tau = unwritten(batch * nv);
                let mut ddq = unwritten(batch * nv);
                let mut m = unwritten(batch * nv * nv);
                let mut minv = unwritten(batch * nv * nv);
                assert!(dynamics::rnea(&model, &c, batch, &q, &v, &a, &mut tau).unwrap().is_empty());
                assert!(dynamics::aba(&model, &c, batch, &q, &v, &a, &mut ddq).unwrap().is_empty());
                assert!(dynamics::crba(&model, &c, batch, &q, &mut m).unwrap().is_empty());
                assert!(dynamics::minverse(&model, &c, batch, &q, &mut minv).unwrap().is_empty());
                assert_eq!(c.done(), 4 * batch);
                (bits(&tau), bits(&ddq), bits(&m), bits(&minv))
            };
            let (tau, ddq, m, minv) = same_for_all_threads(run);
            let mut ws = model.workspace();
            for i in 0..batch {
                let (qi, vi, ai) = (&q[i * nq..(i + 1) * nq], &v[i * nv..(i + 1) * nv], &a[i * nv..(i + 1) * nv]);
                assert_eq!(bits(rbd::rnea(&model, &mut ws, qi, vi, ai, None).unwrap()), tau[i * nv..(i + 1) * nv]);
                assert_eq!(bits(rbd::aba(&model, &mut ws, qi, vi, ai, None).unwrap()), ddq[i * nv..(i + 1) * nv]);
                assert_eq!(bits(&rows_of(rbd::crba(&model, &mut ws, qi).unwrap())), m[i * nv * nv..(i + 1) * nv * nv]);
                assert_eq!(bits(&rows_of(rbd::minverse(&model, &mut ws, qi).unwrap())), minv[i * nv * nv..(i + 1) * nv * nv]);
            }
        }
    }
}

#[test]
fn derivatives_bit_for_bit_with_single_calls() {
    for model in models() {
        let batch = 9;
        let (q, v, a) = inputs(&model, batch, 3);
        let (nq, nv) = (model.nq, model.nv);
        let m2 = nv * nv;
        let m3 = m2 * nv;
        let lam: Vec<f64> = v.iter().map(|x| 0.5 - x).collect();
        let run = || {
            let c = Control::new();
            let mut r = vec![unwritten(batch * m2); 9];
            let mut t = vec![unwritten(batch * m3); 4];
            let [r0, r1, r2, r3, r4, r5, r6, r7, r8] = &mut r[..] else { unreachable!() };
            assert!(dynamics::rnea_derivatives(&model, &c, batch, &q, &v, &a, Matrices3 { first: r0, second: r1, third: r2 }).unwrap().is_empty());
            assert!(dynamics::aba_derivatives(&model, &c, batch, &q, &v, &a, Matrices3 { first: r3, second: r4, third: r5 }).unwrap().is_empty());
            assert!(dynamics::rnea_second_order_contracted(&model, &c, batch, &q, [&v, &a, &lam], Matrices3 { first: r6, second: r7, third: r8 })
                .unwrap()
                .is_empty());
            let [t0, t1, t2, t3] = &mut t[..] else { unreachable!() };
            assert!(dynamics::rnea_second_order(&model, &c, batch, &q, &v, &a, Tensors4 { d2tau_dq2: t0, d2tau_dv2: t1, d2tau_dqdv: t2, dm_dq: t3 })
                .unwrap()
                .is_empty());
            (r.iter().map(|x| bits(x)).collect::<Vec<_>>(), t.iter().map(|x| bits(x)).collect::<Vec<_>>())
        };
        let (r, t) = same_for_all_threads(run);
        let mut ws = model.workspace();
        let mut ws2 = model.second_order_workspace();
        for i in 0..batch {
            let (qi, vi, ai, li) = (&q[i * nq..(i + 1) * nq], &v[i * nv..(i + 1) * nv], &a[i * nv..(i + 1) * nv], &lam[i * nv..(i + 1) * nv]);
            let blk = |k: usize| &r[k][i * m2..(i + 1) * m2];
            let d = rbd::rnea_derivatives(&model, &mut ws, qi, vi, ai, None).unwrap();
            assert_eq!(bits(&rows_of(d.dtau_dq)), blk(0));
            assert_eq!(bits(&rows_of(d.dtau_dv)), blk(1));
            assert_eq!(bits(&rows_of(d.dtau_da)), blk(2));
            let d = rbd::aba_derivatives(&model, &mut ws, qi, vi, ai, None).unwrap();
            assert_eq!(bits(&rows_of(d.dddq_dq)), blk(3));
            assert_eq!(bits(&rows_of(d.dddq_dv)), blk(4));
            assert_eq!(bits(&rows_of(d.dddq_dtau)), blk(5));
            let d = rbd::rnea_second_order_contracted(&model, &mut ws, qi, vi, ai, li, None).unwrap();
            assert_eq!(bits(&rows_of(d.d2tau_dq2)), blk(6));
            assert_eq!(bits(&rows_of(d.d2tau_dv2)), blk(7));
            assert_eq!(bits(&rows_of(d.d2tau_dqdv)), blk(8));
            let d = rbd::rnea_second_order(&model, &mut ws2, qi, vi, ai, None).unwrap();
            for (k, tk) in [d.d2tau_dq2, d.d2tau_dv2, d.d2tau_dqdv, d.dm_dq].into_iter().enumerate() {
                assert_eq!(bits(tk.as_slice()), t[k][i * m3..(i + 1) * m3]);
            }
        }
    }
}

#[test]
fn bad_rows_fail_alone() {
    // a tree with a free-flyer root: q[3..7] is a quaternion
    let model = random_tree(6, 5, &Joint::examples());
    let (nq, nv) = (model.nq, model.nv);
    let batch = 11;
    let (mut q, mut v, a) = inputs(&model, batch, 8);
    let quat = (0..model.nbodies())
        .find(|&b| matches!(model.joints[b], Joint::Spherical | Joint::FreeFlyer))
        .map(|b| model.idx_q[b] + if matches!(model.joints[b], Joint::FreeFlyer) { 3 } else { 0 });
    assert!(quat.is_some(), "the test tree should have a spherical or free-flyer joint");
    q[2 * nq] = f64::NAN; // row 2: NaN configuration
    v[5 * nv + nv - 1] = f64::INFINITY; // row 5: infinite velocity
    if let Some(iq) = quat {
        q[7 * nq + iq] *= 3.0; // row 7: non-unit quaternion
        q[7 * nq + iq + 1] += 1.0;
    }
    let c = Control::new();
    let mut tau = unwritten(batch * nv);
    let failures = dynamics::rnea(&model, &c, batch, &q, &v, &a, &mut tau).unwrap();
    let rows: Vec<usize> = failures.iter().map(|(r, _)| *r).collect();
    let expected: Vec<usize> = if quat.is_some() { vec![2, 5, 7] } else { vec![2, 5] };
    assert_eq!(rows, expected);
    assert!(matches!(failures[0].1, BatchError::Core(RbdError::NonFinite { arg: "q", .. })));
    assert!(matches!(failures[1].1, BatchError::Core(RbdError::NonFinite { arg: "v", .. })));
    if quat.is_some() {
        assert!(matches!(failures[2].1, BatchError::Core(RbdError::NotNormalized { .. })), "{:?}", failures[2]);
    }
    let mut ws = model.workspace();
    for i in 0..batch {
        let out = &tau[i * nv..(i + 1) * nv];
        if rows.contains(&i) {
            assert!(out.iter().all(marked));
        } else {
            assert_eq!(
                bits(out),
                bits(rbd::rnea(&model, &mut ws, &q[i * nq..(i + 1) * nq], &v[i * nv..(i + 1) * nv], &a[i * nv..(i + 1) * nv], None).unwrap())
            );
        }
    }
}

#[test]
fn shape_errors_fail_the_whole_call() {
    let model = pendulum_chain(3, true);
    let c = Control::new();
    let mut tau = vec![0.0; 6];
    let e = dynamics::rnea(&model, &c, 2, &[0.0; 5], &[0.0; 6], &[0.0; 6], &mut tau).unwrap_err();
    assert!(matches!(e, BatchError::Shape(ref m) if m.contains("q has 5 entries")), "{e}");
    let e = dynamics::aba(&model, &c, 2, &[0.0; 6], &[0.0; 6], &[0.0; 6], &mut tau[..5]).unwrap_err();
    assert!(matches!(e, BatchError::Shape(_)));
}

fn integrator(n: usize) -> VariationalIntegrator {
    VariationalIntegrator::new(Arc::new(pendulum_chain(n, false)), Scheme::trapezoid(), 0.01, None).unwrap()
}

#[test]
fn rollouts_and_linearisations_bit_for_bit_with_vidyn_vi() {
    for (vi, batch, steps) in [(integrator(3), 5, 40), (integrator(2), 1, 7), (integrator(4), 0, 3), (integrator(2), 3, 0)] {
        let n = vi.n();
        let mut rng = ChaCha8Rng::seed_from_u64(batch as u64);
        let mut draw = |len: usize, s: f64| (0..len).map(|_| s * rng.random_range(-1.0..1.0)).collect::<Vec<f64>>();
        let (q0, v0, u) = (draw(batch * n, 1.0), draw(batch * n, 1.0), draw(batch * steps * n, 2.0));
        let run = || {
            let c = Control::new();
            let (mut q, mut p, mut it) = (unwritten(batch * (steps + 1) * n), unwritten(batch * (steps + 1) * n), unwritten_counts(batch * steps));
            let f =
                trajectories::rollout(&vi, &c, batch, steps, &q0, Start::Velocity(&v0), &u, RolloutOut { q: &mut q, p: &mut p, iterations: &mut it }).unwrap();
            assert!(f.is_empty(), "{f:?}");
            assert_eq!(c.done(), batch * steps);
            let (mut a, mut b) = (unwritten(batch * steps * 4 * n * n), unwritten(batch * steps * 2 * n * n));
            let f = trajectories::linearize(&vi, &c, Trajectories { batch, steps, q: &q, p: &p, u: &u }, &mut a, &mut b).unwrap();
            assert!(f.is_empty(), "{f:?}");
            (bits(&q), bits(&p), it, bits(&a), bits(&b))
        };
        let (q, p, it, a, b) = same_for_all_threads(run);
        let mut ws = vi.workspace();
        let s1 = steps + 1;
        for t in 0..batch {
            let mut p0 = vec![0.0; n];
            vi.momentum(&mut ws, &q0[t * n..(t + 1) * n], &v0[t * n..(t + 1) * n], &mut p0).unwrap();
            let traj = vidyn_vi::rollout(&vi, &q0[t * n..(t + 1) * n], &p0, &u[t * steps * n..(t + 1) * steps * n]).unwrap();
            assert_eq!(bits(&traj.q), q[t * s1 * n..(t + 1) * s1 * n]);
            assert_eq!(bits(&traj.p), p[t * s1 * n..(t + 1) * s1 * n]);
            assert_eq!(traj.iterations.iter().map(|&i| i as i64).collect::<Vec<_>>(), it[t * steps..(t + 1) * steps]);
            let lin = vidyn_vi::linearize_trajectory(&vi, &traj).unwrap();
            for k in 0..steps {
                let r = t * steps + k;
                assert_eq!(bits(&rows_of(&lin.a[k])), a[r * 4 * n * n..(r + 1) * 4 * n * n]);
                assert_eq!(bits(&rows_of(&lin.b[k])), b[r * 2 * n * n..(r + 1) * 2 * n * n]);
            }
        }
    }
}

#[test]
fn a_failing_trajectory_is_reported_and_the_others_complete() {
    let vi = integrator(3).with_newton(1e-12, 4).unwrap();
    let (n, batch, steps) = (3, 4, 30);
    let q0 = vec![0.2; batch * n];
    let mut v0 = vec![0.1; batch * n];
    let mut u = vec![0.0; batch * steps * n];
    u[(steps + 12) * n + 1] = f64::NAN; // trajectory 1 fails at step 12 (bad control)
    for x in &mut v0[3 * n..4 * n] {
        *x = 1e4; // trajectory 3: Newton cannot converge in 4 iterations
    }
    let c = Control::new();
    let (mut q, mut p, mut it) = (unwritten(batch * (steps + 1) * n), unwritten(batch * (steps + 1) * n), unwritten_counts(batch * steps));
    let f = trajectories::rollout(&vi, &c, batch, steps, &q0, Start::Velocity(&v0), &u, RolloutOut { q: &mut q, p: &mut p, iterations: &mut it }).unwrap();
    assert_eq!(f.iter().map(|(b, _)| *b).collect::<Vec<_>>(), vec![1, 3], "{f:?}");
    assert!(matches!(f[0].1, BatchError::Core(ViError::Model(RbdError::NonFinite { arg: "u", .. }))), "{:?}", f[0].1);
    assert!(matches!(f[1].1, BatchError::Core(ViError::NewtonDiverged { .. })), "{:?}", f[1].1);
    let s1 = (steps + 1) * n;
    // trajectory 1 keeps its first 13 states, then NaN; iterations -1 from step 12
    assert!(q[s1..s1 + 13 * n].iter().all(|x| x.is_finite()));
    assert!(q[s1 + 13 * n..2 * s1].iter().all(marked));
    assert!(p[s1 + 13 * n..2 * s1].iter().all(marked));
    assert!(it[steps..steps + 12].iter().all(|&i| i >= 0) && it[steps + 12..2 * steps].iter().all(|&i| i == -1));
    // trajectories 0 and 2 are complete and equal to the sequential rollout
    for t in [0, 2] {
        let mut p0 = vec![0.0; n];
        vi.momentum(&mut vi.workspace(), &q0[t * n..(t + 1) * n], &v0[t * n..(t + 1) * n], &mut p0).unwrap();
        let traj = vidyn_vi::rollout(&vi, &q0[t * n..(t + 1) * n], &p0, &u[t * steps * n..(t + 1) * steps * n]).unwrap();
        assert_eq!(bits(&traj.q), bits(&q[t * s1..(t + 1) * s1]));
    }
    // linearising the batch: the pairs of the failed trajectories fail, grouped per trajectory
    let (mut a, mut b) = (unwritten(batch * steps * 4 * n * n), unwritten(batch * steps * 2 * n * n));
    let f = trajectories::linearize(&vi, &c, Trajectories { batch, steps, q: &q, p: &p, u: &u }, &mut a, &mut b).unwrap();
    let per = by_trajectory(f, steps);
    assert_eq!(per.iter().map(|(t, k, _)| (*t, *k)).collect::<Vec<_>>()[..1], [(1, 12)]);
    assert!(per.iter().all(|(t, _, _)| [1, 3].contains(t)));
    assert!(a[..steps * 4 * n * n].iter().all(|x| x.is_finite()));
    // every other pair is a result (finite) or marked
    let failed: Vec<usize> = per.iter().map(|(t, _, _)| *t).collect();
    for (r, blk) in a.chunks(4 * n * n).zip(b.chunks(2 * n * n)).enumerate() {
        let ok = |x: &f64| x.is_finite() || (failed.contains(&(r / steps)) && marked(x));
        assert!(blk.0.iter().all(ok) && blk.1.iter().all(ok), "pair {r}");
    }
}

#[test]
fn momentum_start_equals_velocity_start() {
    let vi = integrator(2);
    let (n, batch, steps) = (2, 3, 5);
    let q0: Vec<f64> = (0..batch * n).map(|i| 0.1 * i as f64).collect();
    let v0: Vec<f64> = (0..batch * n).map(|i| 0.3 - 0.05 * i as f64).collect();
    let mut p0 = vec![0.0; batch * n];
    let mut ws = vi.workspace();
    for t in 0..batch {
        vi.momentum(&mut ws, &q0[t * n..(t + 1) * n], &v0[t * n..(t + 1) * n], &mut p0[t * n..(t + 1) * n]).unwrap();
    }
    let u = vec![0.1; batch * steps * n];
    let run = |start: Start<'_>| {
        let (mut q, mut p, mut it) = (vec![0.0; batch * (steps + 1) * n], vec![0.0; batch * (steps + 1) * n], vec![0; batch * steps]);
        assert!(trajectories::rollout(&vi, &Control::new(), batch, steps, &q0, start, &u, RolloutOut { q: &mut q, p: &mut p, iterations: &mut it })
            .unwrap()
            .is_empty());
        (bits(&q), bits(&p))
    };
    assert_eq!(run(Start::Velocity(&v0)), run(Start::Momentum(&p0)));
}

/// A toy explicit system (symplectic Euler of `q̈ = u − sin q`, one dof) with analytic
/// second-order terms, to exercise the trait's optional methods, and which panics on a
/// control of exactly 1e300 to exercise the engine's panic isolation.
struct Toy {
    dt: f64,
}

impl DiscreteDynamics for Toy {
    type Workspace = ();
    type Error = RbdError;
    fn name(&self) -> &'static str {
        "Toy"
    }
    fn nq(&self) -> usize {
        1
    }
    fn nv(&self) -> usize {
        1
    }
    fn nu(&self) -> usize {
        1
    }
    fn workspace(&self) {}
    fn momentum(&self, _: &mut (), _: &[f64], v: &[f64], p: &mut [f64]) -> Result<(), BatchError<RbdError>> {
        p.copy_from_slice(v);
        Ok(())
    }
    fn step(&self, _: &mut (), at: StepInput<'_>, qn: &mut [f64], pn: &mut [f64]) -> Result<usize, BatchError<RbdError>> {
        let StepInput { q, p, u, .. } = at;
        assert!(u[0] != 1e300, "toy panic");
        pn[0] = p[0] + self.dt * (u[0] - q[0].sin());
        qn[0] = q[0] + self.dt * pn[0];
        Ok(0)
    }
    fn linearize(&self, _: &mut (), at: StepInput<'_>, a: &mut [f64], b: &mut [f64]) -> Result<usize, BatchError<RbdError>> {
        let (h, c) = (self.dt, at.q[0].cos());
        a.copy_from_slice(&[1.0 - h * h * c, h, -h * c, 1.0]);
        b.copy_from_slice(&[h * h, h]);
        Ok(0)
    }
    fn linearize_second_order(&self, ws: &mut (), at: StepInput<'_>, out: SecondOrderTerms<'_>) -> Result<(), BatchError<RbdError>> {
        if let Some((a, b)) = out.first {
            self.linearize(ws, at, a, b)?;
        }
        let (h, s) = (self.dt, at.q[0].sin());
        out.fxx.fill(0.0);
        out.fxx[0] = h * h * s; // [q', q, q]
        out.fxx[4] = h * s; // [p', q, q]
        out.fxu.fill(0.0);
        out.fuu.fill(0.0);
        Ok(())
    }
    fn linearize_second_order_contracted(&self, ws: &mut (), at: StepInput<'_>, lam: &[f64], out: ContractedTerms<'_>) -> Result<(), BatchError<RbdError>> {
        if let Some((a, b)) = out.first {
            self.linearize(ws, at, a, b)?;
        }
        let (h, s) = (self.dt, at.q[0].sin());
        out.xx.copy_from_slice(&[lam[0] * h * h * s + lam[1] * h * s, 0.0, 0.0, 0.0]);
        out.xu.fill(0.0);
        out.uu.fill(0.0);
        Ok(())
    }
}

#[test]
fn toy_system_second_order_and_contraction_agree() {
    let toy = Toy { dt: 0.1 };
    let (batch, steps) = (3, 4);
    let q0 = [0.3, -1.0, 2.0];
    let v0 = [0.0, 0.5, -0.5];
    let u = vec![0.2; batch * steps];
    let c = Control::new();
    let (mut q, mut p, mut it) = (vec![0.0; batch * (steps + 1)], vec![0.0; batch * (steps + 1)], vec![0; batch * steps]);
    assert!(trajectories::rollout(&toy, &c, batch, steps, &q0, Start::Velocity(&v0), &u, RolloutOut { q: &mut q, p: &mut p, iterations: &mut it })
        .unwrap()
        .is_empty());
    let rows = batch * steps;
    let (mut fxx, mut fxu, mut fuu) = (vec![0.0; rows * 8], vec![0.0; rows * 4], vec![0.0; rows * 2]);
    assert!(trajectories::linearize_second_order(
        &toy,
        &c,
        Trajectories { batch, steps, q: &q, p: &p, u: &u },
        SecondOrderOut { first: None, fxx: &mut fxx, fxu: &mut fxu, fuu: &mut fuu }
    )
    .unwrap()
    .is_empty());
    let lam: Vec<f64> = (0..rows * 2).map(|i| 1.0 + i as f64).collect();
    let (mut xx, mut xu, mut uu) = (vec![0.0; rows * 4], vec![0.0; rows * 2], vec![0.0; rows]);
    assert!(trajectories::linearize_second_order_contracted(
        &toy,
        &c,
        Trajectories { batch, steps, q: &q, p: &p, u: &u },
        &lam,
        ContractedOut { first: None, xx: &mut xx, xu: &mut xu, uu: &mut uu }
    )
    .unwrap()
    .is_empty());
    for r in 0..rows {
        for j in 0..2 {
            for k in 0..2 {
                let contracted: f64 = (0..2).map(|i| lam[2 * r + i] * fxx[r * 8 + i * 4 + j * 2 + k]).sum();
                assert!((contracted - xx[r * 4 + j * 2 + k]).abs() <= 1e-15 * (1.0 + contracted.abs()));
            }
        }
    }
}

#[test]
fn variational_integrator_second_order_terms_bit_for_bit_with_vidyn_vi() {
    let vi = integrator(3);
    let (n, batch, steps) = (3, 2, 5);
    let m = 2 * n;
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut draw = |len: usize, s: f64| (0..len).map(|_| s * rng.random_range(-1.0..1.0)).collect::<Vec<f64>>();
    let (q0, v0, u, lam) = (draw(batch * n, 1.0), draw(batch * n, 1.0), draw(batch * steps * n, 2.0), draw(batch * steps * m, 1.0));
    let c = Control::new();
    let (mut q, mut p, mut it) = (vec![0.0; batch * (steps + 1) * n], vec![0.0; batch * (steps + 1) * n], vec![0; batch * steps]);
    assert!(trajectories::rollout(&vi, &c, batch, steps, &q0, Start::Velocity(&v0), &u, RolloutOut { q: &mut q, p: &mut p, iterations: &mut it })
        .unwrap()
        .is_empty());
    let run = || {
        let rows = batch * steps;
        let (mut fxx, mut fxu, mut fuu) = (unwritten(rows * m * m * m), unwritten(rows * m * m * n), unwritten(rows * m * n * n));
        let (mut a, mut b) = (unwritten(rows * m * m), unwritten(rows * m * n));
        assert!(trajectories::linearize_second_order(
            &vi,
            &Control::new(),
            Trajectories { batch, steps, q: &q, p: &p, u: &u },
            SecondOrderOut { first: Some((&mut a, &mut b)), fxx: &mut fxx, fxu: &mut fxu, fuu: &mut fuu }
        )
        .unwrap()
        .is_empty());
        let (mut xx, mut xu, mut uu) = (unwritten(rows * m * m), unwritten(rows * m * n), unwritten(rows * n * n));
        let (mut a2, mut b2) = (unwritten(rows * m * m), unwritten(rows * m * n));
        assert!(trajectories::linearize_second_order_contracted(
            &vi,
            &Control::new(),
            Trajectories { batch, steps, q: &q, p: &p, u: &u },
            &lam,
            ContractedOut { first: Some((&mut a2, &mut b2)), xx: &mut xx, xu: &mut xu, uu: &mut uu }
        )
        .unwrap()
        .is_empty());
        ([fxx, fxu, fuu, xx, xu, uu].map(|t| bits(&t)), [a, b, a2, b2].map(|t| bits(&t)))
    };
    let ([fxx, fxu, fuu, xx, xu, uu], [a, b, a2, b2]) = same_for_all_threads(run);
    let mut so = vi.second_order_workspace();
    let s1 = steps + 1;
    for t in 0..batch {
        for k in 0..steps {
            let r = t * steps + k;
            let (qk, pk, uk, qn) = (&q[(t * s1 + k) * n..][..n], &p[(t * s1 + k) * n..][..n], &u[r * n..][..n], &q[(t * s1 + k + 1) * n..][..n]);
            let d = vi.linearize_second_order(&mut so, StepInput::new(k, qk, pk, uk).with_guess(Some(qn))).unwrap();
            assert_eq!(bits(&rows_of(&d.a)), a[r * m * m..(r + 1) * m * m]);
            assert_eq!(bits(&rows_of(&d.b)), b[r * m * n..(r + 1) * m * n]);
            assert_eq!(bits(&d.fxx), fxx[r * m * m * m..(r + 1) * m * m * m]);
            assert_eq!(bits(&d.fxu), fxu[r * m * m * n..(r + 1) * m * m * n]);
            assert_eq!(bits(&d.fuu), fuu[r * m * n * n..(r + 1) * m * n * n]);
            let d = vi.linearize_second_order_contracted(&mut so, StepInput::new(k, qk, pk, uk).with_guess(Some(qn)), &lam[r * m..(r + 1) * m]).unwrap();
            assert_eq!(bits(&rows_of(&d.a)), a2[r * m * m..(r + 1) * m * m]);
            assert_eq!(bits(&rows_of(&d.b)), b2[r * m * n..(r + 1) * m * n]);
            assert_eq!(bits(&rows_of(&d.hxx)), xx[r * m * m..(r + 1) * m * m]);
            assert_eq!(bits(&rows_of(&d.hxu)), xu[r * m * n..(r + 1) * m * n]);
            assert_eq!(bits(&rows_of(&d.huu)), uu[r * n * n..(r + 1) * n * n]);
        }
    }
    // a bad co-state is reported for its row only
    let mut bad = lam.clone();
    bad[m + 1] = f64::NAN;
    let rows = batch * steps;
    let (mut xx, mut xu, mut uu) = (vec![0.0; rows * m * m], vec![0.0; rows * m * n], vec![0.0; rows * n * n]);
    let f = trajectories::linearize_second_order_contracted(
        &vi,
        &Control::new(),
        Trajectories { batch, steps, q: &q, p: &p, u: &u },
        &bad,
        ContractedOut { first: None, xx: &mut xx, xu: &mut xu, uu: &mut uu },
    )
    .unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].0, 1);
    assert!(matches!(f[0].1, BatchError::Core(ViError::Model(vidyn_rbd::RbdError::NonFinite { arg: "lam", index: 1, .. }))), "{:?}", f[0].1);
}

#[test]
fn a_panicking_row_is_isolated() {
    let toy = Toy { dt: 0.1 };
    let (batch, steps) = (5, 3);
    let mut u = vec![0.0; batch * steps];
    u[2 * steps + 1] = 1e300;
    let (mut q, mut p, mut it) = (vec![0.0; batch * (steps + 1)], vec![0.0; batch * (steps + 1)], vec![0; batch * steps]);
    let f = trajectories::rollout(
        &toy,
        &Control::new(),
        batch,
        steps,
        &[0.1; 5],
        Start::Momentum(&[0.0; 5]),
        &u,
        RolloutOut { q: &mut q, p: &mut p, iterations: &mut it },
    )
    .unwrap();
    assert_eq!(f.len(), 1);
    assert!(matches!(f[0], (2, BatchError::Panicked(ref m)) if m.contains("toy panic")), "{f:?}");
    assert!(q[3 * (steps + 1)..].iter().all(|x| x.is_finite()));
}

#[test]
fn a_cancelled_batch_runs_no_row() {
    let model = pendulum_chain(3, true);
    let c = Control::new();
    c.cancel();
    let mut tau = vec![0.0; 12];
    let f = dynamics::rnea(&model, &c, 4, &[0.0; 12], &[0.0; 12], &[0.0; 12], &mut tau).unwrap();
    assert_eq!(f.len(), 4);
    assert!(f.iter().all(|(_, e)| matches!(e, BatchError::Cancelled)));
    assert_eq!(c.done(), 0);
}

#[test]
fn thread_count_setting() {
    let pool = new_pool(3).unwrap();
    assert_eq!(with_pool(&pool, vidyn_batch::num_threads), 3);
    assert!(vidyn_batch::default_num_threads() >= 1);
}

#[test]
fn a_failed_row_does_not_poison_the_thread_workspace() {
    // A bad guess fails its row; the next row on the same thread (one thread here) must still
    // compute normally (the engine also replaces the VI workspace after any failure).
    let vi = integrator(2);
    let (n, batch, steps) = (2, 3, 4);
    let mut q = vec![0.1; batch * (steps + 1) * n];
    let p = vec![0.0; batch * (steps + 1) * n];
    let u = vec![0.0; batch * steps * n];
    q[n] = f64::NAN; // q_1 of trajectory 0: the guess of pair (0, 0) and the state of pair (0, 1)
    let (mut a, mut b) = (vec![0.0; batch * steps * 4 * n * n], vec![0.0; batch * steps * 2 * n * n]);
    let f = with_pool(&new_pool(1).unwrap(), || {
        trajectories::linearize(&vi, &Control::new(), Trajectories { batch, steps, q: &q, p: &p, u: &u }, &mut a, &mut b).unwrap()
    });
    assert_eq!(f.iter().map(|(r, _)| *r).collect::<Vec<_>>(), vec![0, 1], "{f:?}");
    assert!(f.iter().all(|(_, e)| matches!(e, BatchError::Core(_))), "{f:?}");
    assert!(a[2 * 4 * n * n..].iter().all(|x| x.is_finite()));
}
