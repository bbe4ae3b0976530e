//! The O(n) Newton direction (Algorithms B.1/B.2) and the O(n²) linearisation against the
//! dense reference path (form `J`, LU) on random branched trees with damping and springs, with
//! and without body wrenches.

use crate::reference::DenseOracle;
use crate::*;
use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{Joint, Model, ModelBuilder};
use vidyn_spatial::{Force, Inertia, Matrix3, Se3, Vector3};

pub(crate) fn one_dof() -> Vec<Joint> {
    Joint::examples().into_iter().filter(|j| j.nv() == 1).collect()
}

pub(crate) fn models() -> Vec<Arc<Model>> {
    vec![
        Arc::new(pendulum_chain(4, false)),
        Arc::new(random_tree(6, 3, &one_dof())),
        Arc::new(random_tree(12, 11, &one_dof())),
        Arc::new(random_tree(20, 29, &one_dof())),
    ]
}

pub(crate) fn random(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| scale * rng.random_range(-1.0..1.0)).collect()
}

pub(crate) fn forcing(rng: &mut ChaCha8Rng, n: usize) -> JointForces {
    JointForces {
        damping: random(rng, n, 0.8).iter().map(|x| x.abs()).collect(),
        stiffness: random(rng, n, 3.0).iter().map(|x| x.abs()).collect(),
        rest: random(rng, n, 1.0),
    }
}

/// A random state and unknowns `z` near (not at) the solution: `q^γ = q + c_γ Δt v + noise`.
pub(crate) fn problem(vi: &VariationalIntegrator, rng: &mut ChaCha8Rng) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = vi.n();
    let q = random(rng, n, 1.0);
    let v = random(rng, n, 2.0);
    let u = random(rng, n, 1.0);
    let mut p = vec![0.0; n];
    vi.momentum(&mut vi.workspace(), &q, &v, &mut p).unwrap();
    let sc = vi.scheme();
    let mut z = vec![0.0; sc.s * n];
    for g in 1..=sc.s {
        for i in 0..n {
            z[(g - 1) * n + i] = q[i] + sc.nodes[g] * vi.dt() * v[i] + 0.02 * rng.random_range(-1.0..1.0);
        }
    }
    (q, p, u, z)
}

/// Every family of schemes: the midpoint rule (mixed rows) and Lobatto s = 1, 2, 3.
pub(crate) fn schemes() -> Vec<Scheme> {
    vec![Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()]
}

/// Every scheme, each without and with random body wrenches.
fn with_and_without_wrenches() -> Vec<(Scheme, bool)> {
    schemes().into_iter().flat_map(|sc| [(sc.clone(), false), (sc, true)]).collect()
}

/// Random wrenches of O(1–3) N and N·m, one per body.
pub(crate) fn wrenches(rng: &mut ChaCha8Rng, n: usize) -> Vec<Force> {
    (0..n).map(|_| Force::new(Vector3::from_fn(|_, _| 3.0 * rng.random_range(-1.0..1.0)), Vector3::from_fn(|_, _| rng.random_range(-1.0..1.0)))).collect()
}

/// An integrator with random damping and springs, and random body wrenches if `wrenched`, on
/// the recursive path (B.1/B.2) whatever its size, so that the dense oracle checks it.
pub(crate) fn integrator(model: &Arc<Model>, sc: Scheme, dt: f64, rng: &mut ChaCha8Rng, wrenched: bool) -> VariationalIntegrator {
    let n = model.nv;
    let vi = VariationalIntegrator::new(model.clone(), sc, dt, Some(forcing(rng, n))).unwrap().with_dense_max(0);
    if wrenched {
        vi.with_body_wrenches(wrenches(rng, n)).unwrap()
    } else {
        vi
    }
}

pub(crate) fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0_f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter().zip(b).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs())) / scale
}

#[test]
fn b1_direction_equals_the_dense_newton_direction() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut worst = 0.0_f64;
    for model in models() {
        for (sc, wrenched) in with_and_without_wrenches() {
            let s = sc.s;
            for dt in [0.01, 0.05] {
                let n = model.nv;
                let vi = integrator(&model, sc.clone(), dt, &mut rng, wrenched);
                let (q, p, u, z) = problem(&vi, &mut rng);
                let mut ws = vi.workspace();
                let mut oracle = DenseOracle::new(&vi);
                let (mut fast, mut dense) = (vec![0.0; s * n], vec![0.0; s * n]);
                vi.newton_direction(&mut ws, StepInput::new(0, &q, &p, &u), &z, &mut fast).unwrap();
                oracle.newton_direction(&mut ws, StepInput::new(0, &q, &p, &u), &z, &mut dense).unwrap();
                let err = rel_err(&fast, &dense);
                worst = worst.max(err);
                assert!(err < 1e-10, "{} s={s} dt={dt} wrenched={wrenched}: B.1 vs dense relative error {err:e}", model.name);
                // and the direction solves J δz = −r (J from the dense oracle)
                let j = oracle.jacobian(&mut ws, &q, &z).unwrap();
                let mut r = vec![0.0; s * n];
                vi.residual(&mut ws, &q, &p, &u, &z, &mut r).unwrap();
                let jd = &j * nalgebra::DVector::from_column_slice(&fast);
                let neg_r: Vec<f64> = r.iter().map(|x| -x).collect();
                assert!(rel_err(jd.as_slice(), &neg_r) < 1e-9, "{} s={s}: |J δz + r|", model.name);
            }
        }
    }
    println!("B.1 vs dense Newton direction: worst relative error {worst:.2e}");
}

#[test]
fn del_jacobian_vector_product_matches_the_dense_blocks() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for model in models() {
        for (sc, wrenched) in with_and_without_wrenches() {
            let (s, n) = (sc.s, model.nv);
            let vi = integrator(&model, sc.clone(), 0.03, &mut rng, wrenched);
            let (q, _p, _u, z) = problem(&vi, &mut rng);
            let mut ws = vi.workspace();
            let sc = vi.scheme().clone();
            ws.points.set(&model, &sc, vi.dt(), &q, &z, vi.body_wrenches());
            assert!(ws.newton.factorize(&model, &sc, vi.dt(), vi.forces(), &ws.points, true));
            ws.points.update_hessians(&model);
            // LANES random directions at once
            use crate::newton_direction::{Lanes, LANES};
            let dq: Vec<Lanes> = (0..(s + 1) * n).map(|_| std::array::from_fn(|_| rng.random_range(-1.0..1.0))).collect();
            let mut out = vec![[0.0; LANES]; (s + 1) * n];
            ws.newton.ensure_lanes();
            ws.newton.del_jvp_lanes(&model, &sc, vi.dt(), vi.forces(), &dq, &mut out);
            let mut blk = DMatrix::zeros(n, n);
            for lane in 0..LANES {
                for a in 0..=s {
                    let mut want = vec![0.0; n];
                    for b in 0..=s {
                        ws.points.del_block(&sc, vi.dt(), vi.forces(), a, b, &mut blk.view_mut((0, 0), (n, n)));
                        let v = nalgebra::DVector::from_iterator(n, (0..n).map(|i| dq[b * n + i][lane]));
                        let x = &blk * v;
                        for i in 0..n {
                            want[i] += x[i];
                        }
                    }
                    let got: Vec<f64> = (0..n).map(|i| out[a * n + i][lane]).collect();
                    let err = rel_err(&got, &want);
                    assert!(err < 1e-11, "{} s={s} wrenched={wrenched} row {a} lane {lane}: JVP vs blocks {err:e}", model.name);
                }
            }
        }
    }
}

/// From a 1e-3 perturbation of the solved step, the B.1 Newton iteration converges
/// quadratically: the step lengths `e_k = |δz_k|∞` (≈ the error of iterate k) satisfy
/// `e_{k+1} ≤ C e_k²` with `C ≤ 2e3` (measured 0.3–400, largest on the first step, which
/// is pre-asymptotic; a linearly convergent method, `e_{k+1} = ρ e_k`, breaks the bound as
/// soon as `e_k < ρ / 2e3`), and the residual reaches round-off within 4 iterations.
#[test]
fn newton_converges_quadratically() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for model in [Arc::new(pendulum_chain(12, false)), Arc::new(random_tree(15, 5, &one_dof()))] {
        for sc in schemes() {
            let (s, n) = (sc.s, model.nv);
            let vi = VariationalIntegrator::new(model.clone(), sc.clone(), 0.02, Some(forcing(&mut rng, n))).unwrap();
            let (q, p, u, _) = problem(&vi, &mut rng);
            let mut ws = vi.workspace();
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).unwrap();
            let mut z: Vec<f64> = ws.z.iter().map(|x| x + 1e-3 * rng.random_range(-1.0..1.0)).collect();
            let (mut r, mut dz) = (vec![0.0; s * n], vec![0.0; s * n]);
            let (mut residuals, mut steps) = (Vec::new(), Vec::new());
            let tol = 1e-12 * (1.0 + p.iter().fold(0.0_f64, |m, x| m.max(x.abs())));
            for _ in 0..8 {
                let res = vi.residual(&mut ws, &q, &p, &u, &z, &mut r).unwrap();
                residuals.push(res);
                if res < tol {
                    break;
                }
                vi.newton_direction(&mut ws, StepInput::new(0, &q, &p, &u), &z, &mut dz).unwrap();
                let step = dz.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
                steps.push(step);
                if step < 1e-15 {
                    break;
                }
                for (zi, d) in z.iter_mut().zip(&dz) {
                    *zi += d;
                }
            }
            let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.1e}")).collect::<Vec<_>>();
            println!("{} s={s}: residuals {:?}, |δz| {:?}", model.name, fmt(&residuals), fmt(&steps));
            assert!(residuals.len() <= 5 && *residuals.last().unwrap() < 10.0 * tol, "{} s={s}: {residuals:?}", model.name);
            let constants: Vec<f64> = steps.windows(2).filter(|w| w[1] > 1e-13).map(|w| w[1] / (w[0] * w[0])).collect();
            assert!(!constants.is_empty(), "{} s={s}: {steps:?}", model.name);
            for c in &constants {
                assert!(*c < 2e3, "{} s={s}: e_(k+1)/e_k² = {constants:?} (|δz| {steps:?})", model.name);
            }
        }
    }
}

#[test]
fn o_n2_linearisation_equals_the_dense_linearisation() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut worst = 0.0_f64;
    for model in models() {
        for (sc, wrenched) in with_and_without_wrenches() {
            let (s, n) = (sc.s, model.nv);
            let vi = integrator(&model, sc.clone(), 0.02, &mut rng, wrenched);
            let (q, p, u, _) = problem(&vi, &mut rng);
            let mut ws = vi.workspace();
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut a2, mut b2) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
            let mut oracle = DenseOracle::new(&vi);
            oracle.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a2, &mut b2, &mut qn, &mut pn).unwrap();
            let ea = (&a - &a2).amax() / a2.amax();
            let eb = (&b - &b2).amax() / b2.amax();
            worst = worst.max(ea).max(eb);
            assert!(ea < 1e-10 && eb < 1e-10, "{} s={s} wrenched={wrenched}: A {ea:e}, B {eb:e}", model.name);
        }
    }
    println!("O(n²) vs dense linearisation: worst relative error {worst:.2e}");
}

/// A chain whose leaf is massless and has neither damping nor a spring: its `Λ` is zero.
#[test]
fn a_massless_leaf_is_a_singular_jacobian() {
    let mut b = ModelBuilder::new("massless_leaf");
    let rod = Inertia::new(1.0, Vector3::new(0.0, 0.0, -0.5), Matrix3::from_diagonal(&Vector3::new(0.1, 0.1, 0.01)));
    let at = Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0));
    let root = b.add_body(None, "j1", Joint::Revolute { axis: Vector3::y() }, Se3::identity(), rod).unwrap();
    b.add_body(Some(root), "j2", Joint::Revolute { axis: Vector3::x() }, at, Inertia::zero()).unwrap();
    let model = b.build().unwrap();
    let vi = VariationalIntegrator::new(Arc::new(model), Scheme::simpson(), 0.01, Some(JointForces::none(2))).unwrap();
    let mut ws = vi.workspace();
    let mut dz = [0.0; 4];
    let r = vi.newton_direction(&mut ws, StepInput::new(5, &[0.1, 0.2], &[0.3, 0.0], &[0.0; 2]), &[0.1, 0.2, 0.1, 0.2], &mut dz);
    assert!(matches!(r, Err(ViError::SingularJacobian { step: 5 })), "{r:?}");
}

/// A step reuses the configuration terms of `q_k` held by its workspace (from the previous
/// step's end point, `StepPoints::set_start`): a rollout in one workspace equals, bit for bit,
/// steps taken in fresh workspaces from the same guesses, and a workspace moved to an
/// integrator on another model of the same size, or on the same model with other wrenches,
/// carries no stale terms over.
#[test]
fn reused_point_states_change_no_bit_of_a_step() {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let (a, b) = (Arc::new(random_tree(6, 3, &one_dof())), Arc::new(random_tree(6, 5, &one_dof())));
    for (sc, wrenched) in with_and_without_wrenches() {
        let vi = integrator(&a, sc.clone(), 0.01, &mut rng, wrenched);
        let others = [integrator(&b, sc.clone(), 0.01, &mut rng, wrenched), integrator(&a, sc.clone(), 0.01, &mut rng, !wrenched)];
        let n = vi.n();
        let (q0, p0, u) = (random(&mut rng, n, 1.0), random(&mut rng, n, 2.0), random(&mut rng, 6 * n, 1.0));
        let reused = rollout(&vi, &q0, &p0, &u).unwrap();
        let mut guess = vec![0.0; n];
        for k in 0..6 {
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            let warm = predict_next(&reused.q[..(k + 1) * n], n, &mut guess).then_some(guess.as_slice());
            let (q, p) = (&reused.q[k * n..(k + 1) * n], &reused.p[k * n..(k + 1) * n]);
            vi.step(&mut vi.workspace(), StepInput::new(k, q, p, &u[k * n..(k + 1) * n]).with_guess(warm), &mut qn, &mut pn).unwrap();
            assert_eq!((&qn[..], &pn[..]), (&reused.q[(k + 1) * n..(k + 2) * n], &reused.p[(k + 1) * n..(k + 2) * n]), "s = {} step {k}", sc.s);
        }
        for other in &others {
            // `ws` ends a step of `vi` at (q1, p1); `other` steps from there with it
            let mut ws = vi.workspace();
            let (mut q1, mut p1) = (vec![0.0; n], vec![0.0; n]);
            vi.step(&mut ws, StepInput::new(0, &q0, &p0, &u[..n]), &mut q1, &mut p1).unwrap();
            let (mut moved, mut fresh) = ((vec![0.0; n], vec![0.0; n]), (vec![0.0; n], vec![0.0; n]));
            other.step(&mut ws, StepInput::new(1, &q1, &p1, &u[n..2 * n]), &mut moved.0, &mut moved.1).unwrap();
            other.step(&mut other.workspace(), StepInput::new(1, &q1, &p1, &u[n..2 * n]), &mut fresh.0, &mut fresh.1).unwrap();
            assert_eq!(moved, fresh, "s = {}", sc.s);
        }
    }
}

/// Small systems take the dense path by default (`with_dense_max`): its steps and
/// linearisations equal the recursive path's to round-off, with and without wrenches, for
/// every scheme, and large systems keep the recursion.
#[test]
fn the_dense_path_of_small_systems_equals_the_recursive_path() {
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    for model in [Arc::new(pendulum_chain(2, false)), Arc::new(random_tree(5, 3, &one_dof()))] {
        for (sc, wrenched) in with_and_without_wrenches() {
            let recursive = integrator(&model, sc.clone(), 0.01, &mut rng, wrenched);
            let dense = recursive.clone().with_dense_max(DEFAULT_DENSE_MAX.max(sc.s * model.nv));
            assert!(dense.uses_dense() && !recursive.uses_dense());
            let (q, p, u, _) = problem(&recursive, &mut rng);
            let n = model.nv;
            let (mut a1, mut b1, mut a2, mut b2) =
                (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut q1, mut p1, mut q2, mut p2) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            recursive.linearize(&mut recursive.workspace(), StepInput::new(0, &q, &p, &u), &mut a1, &mut b1, &mut q1, &mut p1).unwrap();
            dense.linearize(&mut dense.workspace(), StepInput::new(0, &q, &p, &u), &mut a2, &mut b2, &mut q2, &mut p2).unwrap();
            let s = sc.s;
            assert!(rel_err(&q2, &q1) < 1e-12 && rel_err(&p2, &p1) < 1e-12, "{} s={s}: states", model.name);
            assert!(rel_err(a2.as_slice(), a1.as_slice()) < 1e-10 && rel_err(b2.as_slice(), b1.as_slice()) < 1e-10, "{} s={s}: A, B", model.name);
        }
    }
    let big = VariationalIntegrator::new(Arc::new(pendulum_chain(DEFAULT_DENSE_MAX + 1, false)), Scheme::trapezoid(), 0.01, None).unwrap();
    assert!(!big.uses_dense());
}
