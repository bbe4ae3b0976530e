//! Checks of the variational integrator against finite differences and the properties every
//! variational integrator must have (Fan, Schultz & Murphey 2018, §10 of the digest).

use crate::*;
use nalgebra::{DMatrix, Vector3};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Matrix3, Se3};

fn one_dof() -> Vec<Joint> {
    Joint::examples().into_iter().filter(|j| j.nv() == 1).collect()
}

fn models() -> Vec<Arc<Model>> {
    vec![Arc::new(pendulum_chain(3, false)), Arc::new(random_tree(5, 3, &one_dof())), Arc::new(random_tree(8, 11, &one_dof()))]
}

fn random(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| scale * rng.random_range(-1.0..1.0)).collect()
}

/// Brute-force discrete Lagrangian `Δt Σ_α w_α (T − V)(q^α, q̇^α)` from the rigid-body library.
fn discrete_lagrangian(model: &Model, sc: &Scheme, dt: f64, pts: &[Vec<f64>]) -> f64 {
    let mut ws = model.workspace();
    let n = model.nv;
    (0..sc.points())
        .map(|a| {
            let qdot: Vec<f64> = (0..n).map(|i| (0..sc.points()).map(|b| sc.b(a, b) * pts[b][i]).sum::<f64>() / dt).collect();
            let t = vidyn_rbd::kinetic_energy(model, &mut ws, &pts[a], &qdot).unwrap();
            let v = vidyn_rbd::potential_energy(model, &mut ws, &pts[a]).unwrap();
            dt * sc.weights[a] * (t - v)
        })
        .sum()
}

#[test]
fn del_rows_and_blocks_match_finite_differences_of_the_discrete_lagrangian() {
    // h = 1e-6 central differences: truncation ~h², round-off ~ε|L_d|/h ≈ 1e-10 |L_d|.
    let h = 1e-6;
    let dt = 0.05;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for model in models() {
        for sc in [Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
            let n = model.nv;
            let forces = JointForces {
                damping: random(&mut rng, n, 0.5).iter().map(|x| x.abs()).collect(),
                stiffness: random(&mut rng, n, 2.0).iter().map(|x| x.abs()).collect(),
                rest: random(&mut rng, n, 1.0),
            };
            let q0 = random(&mut rng, n, 1.0);
            let pts: Vec<Vec<f64>> = (0..sc.points()).map(|_| q0.iter().map(|x| x + 0.05 * rng.random_range(-1.0..1.0)).collect()).collect();
            let z: Vec<f64> = pts[1..].concat();
            let mut sp = del::StepPoints::new(&model, sc.points());
            sp.set(&model, &sc, dt, &pts[0], &z, &[]);
            sp.update_hessians(&model);
            let zero_u = vec![0.0; n];
            let no_forces = JointForces::none(n);
            for a in 0..sc.points() {
                // rows: D_{a+1} L_d by differences of the brute-force L_d
                for i in 0..n {
                    let shifted = |d: f64| {
                        let mut p = pts.clone();
                        p[a][i] += d;
                        discrete_lagrangian(&model, &sc, dt, &p)
                    };
                    let fd = (shifted(h) - shifted(-h)) / (2.0 * h);
                    let mut rows = vec![0.0; n];
                    sp.del_rows(&sc, dt, &no_forces, &zero_u, a, &mut rows);
                    let row = rows[i];
                    assert!((row - fd).abs() < 1e-6 * (1.0 + fd.abs()), "{} s={} row ({a},{i}): {row} vs {fd}", model.name, sc.s);
                }
                // blocks: H(a, b) by differences of the analytic rows (with forces)
                for b in 0..sc.points() {
                    let mut blk = DMatrix::zeros(n, n);
                    sp.del_block(&sc, dt, &forces, a, b, &mut blk.view_mut((0, 0), (n, n)));
                    for k in 0..n {
                        let rows = |d: f64| {
                            let mut p = pts.clone();
                            p[b][k] += d;
                            let mut s2 = del::StepPoints::new(&model, sc.points());
                            s2.set(&model, &sc, dt, &p[0], &p[1..].concat(), &[]);
                            let mut r = vec![0.0; n];
                            s2.del_rows(&sc, dt, &forces, &zero_u, a, &mut r);
                            r
                        };
                        let (plus, minus) = (rows(h), rows(-h));
                        for i in 0..n {
                            let fd = (plus[i] - minus[i]) / (2.0 * h);
                            assert!(
                                (blk[(i, k)] - fd).abs() < 1e-6 * (1.0 + fd.abs()),
                                "{} s={} H({a},{b})[{i},{k}]: {} vs {fd}",
                                model.name,
                                sc.s,
                                blk[(i, k)]
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The midpoint rule in its own variables: `p_k + D_1 L_d(q_k, q_{k+1}) + f⁻ = 0` and
/// `p_{k+1} = D_2 L_d(q_k, q_{k+1}) + f⁺` with `L_d = Δt L((q_k + q_{k+1})/2, (q_{k+1} − q_k)/Δt)`
/// and `f^± = Δt/2 (u − d q̇ − κ (q̄ − rest))` (Johnson 2012 §3.2), by central differences of
/// the brute-force `L_d` — an oracle independent of the control-point mixing of `Scheme`.
#[test]
fn midpoint_rows_are_the_derivatives_of_the_midpoint_lagrangian() {
    let (h, dt) = (1e-6, 0.05);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let sc = Scheme::midpoint();
    for model in models() {
        let n = model.nv;
        let mut ws = model.workspace();
        let mut ld = |qa: &[f64], qb: &[f64]| {
            let mid: Vec<f64> = qa.iter().zip(qb).map(|(a, b)| 0.5 * (a + b)).collect();
            let vel: Vec<f64> = qa.iter().zip(qb).map(|(a, b)| (b - a) / dt).collect();
            dt * (vidyn_rbd::kinetic_energy(&model, &mut ws, &mid, &vel).unwrap() - vidyn_rbd::potential_energy(&model, &mut ws, &mid).unwrap())
        };
        let forces = JointForces {
            damping: random(&mut rng, n, 0.5).iter().map(|x| x.abs()).collect(),
            stiffness: random(&mut rng, n, 2.0).iter().map(|x| x.abs()).collect(),
            rest: random(&mut rng, n, 1.0),
        };
        let u = random(&mut rng, n, 1.0);
        let qa = random(&mut rng, n, 1.0);
        let qb: Vec<f64> = qa.iter().map(|x| x + 0.05 * rng.random_range(-1.0..1.0)).collect();
        let z: Vec<f64> = qa.iter().zip(&qb).map(|(a, b)| 0.5 * (a + b)).collect();
        let mut sp = del::StepPoints::new(&model, 2);
        sp.set(&model, &sc, dt, &qa, &z, &[]);
        for i in 0..n {
            let vel = (qb[i] - qa[i]) / dt;
            let force = 0.5 * dt * (u[i] - forces.damping[i] * vel - forces.stiffness[i] * (z[i] - forces.rest[i]));
            let mut d = |which: usize| {
                let mut shifted = |e: f64| {
                    let (mut a, mut b) = (qa.clone(), qb.clone());
                    if which == 0 {
                        a[i] += e
                    } else {
                        b[i] += e
                    }
                    ld(&a, &b)
                };
                (shifted(h) - shifted(-h)) / (2.0 * h)
            };
            let (d1, d2) = (d(0) + force, d(1) + force);
            let (mut r0, mut p1) = (vec![0.0; n], vec![0.0; n]);
            sp.del_rows(&sc, dt, &forces, &u, 0, &mut r0);
            sp.del_rows(&sc, dt, &forces, &u, 1, &mut p1);
            let (r0, p1) = (r0[i], p1[i]);
            assert!((r0 - d1).abs() < 1e-6 * (1.0 + d1.abs()), "{}: D_1 L_d row {i}: {r0} vs {d1}", model.name);
            assert!((p1 - d2).abs() < 1e-6 * (1.0 + d2.abs()), "{}: D_2 L_d row {i}: {p1} vs {d2}", model.name);
        }
        let mut qn = vec![0.0; n];
        sc.endpoint_from(&qa, &z, &mut qn);
        assert!(qn.iter().zip(&qb).all(|(a, b)| (a - b).abs() < 1e-14));
    }
}

fn state(vi: &VariationalIntegrator, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = vi.n();
    let q = random(&mut rng, n, 1.0);
    let v = random(&mut rng, n, 1.0);
    let mut p = vec![0.0; n];
    vi.momentum(&mut vi.workspace(), &q, &v, &mut p).unwrap();
    (q, p)
}

#[test]
fn linearisation_matches_finite_differences_of_the_solved_step() {
    for model in models() {
        for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
            let n = model.nv;
            let forces = JointForces { damping: vec![0.3; n], stiffness: vec![1.0; n], rest: vec![0.2; n] };
            let vi = VariationalIntegrator::new(model.clone(), sc.clone(), 0.02, Some(forces)).unwrap();
            let (q, p) = state(&vi, 7);
            let u: Vec<f64> = (0..n).map(|i| 0.1 * i as f64).collect();
            assert_linearisation_matches_differences(&vi, 0, &q, &p, &u, &format!("{} s={}", model.name, sc.s));
        }
    }
}

/// `A`, `B` of [`VariationalIntegrator::linearize`] at `(q, p, u)` against central differences
/// of the solved step (h = 1e-6: truncation ≈ 1e-12, the step's Newton tolerance 1e-12
/// relative gives ≈ 1e-6 round-off in the quotient; tolerance 1e-6 relative). Returns the
/// next state.
pub(crate) fn assert_linearisation_matches_differences(
    vi: &VariationalIntegrator,
    k: usize,
    q: &[f64],
    p: &[f64],
    u: &[f64],
    label: &str,
) -> (Vec<f64>, Vec<f64>) {
    let n = vi.n();
    let mut ws = vi.workspace();
    let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
    let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
    vi.linearize(&mut ws, StepInput::new(k, q, p, u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
    let mut step = |x: &[f64], u: &[f64]| {
        let (mut q1, mut p1) = (vec![0.0; n], vec![0.0; n]);
        vi.step(&mut ws, StepInput::new(k, &x[..n], &x[n..], u), &mut q1, &mut p1).unwrap();
        [q1, p1].concat()
    };
    let h = 1e-6;
    let x0 = [q.to_vec(), p.to_vec()].concat();
    for c in 0..3 * n {
        let (fp, fm) = if c < 2 * n {
            let (mut xp, mut xm) = (x0.clone(), x0.clone());
            xp[c] += h;
            xm[c] -= h;
            (step(&xp, u), step(&xm, u))
        } else {
            let (mut up, mut um) = (u.to_vec(), u.to_vec());
            up[c - 2 * n] += h;
            um[c - 2 * n] -= h;
            (step(&x0, &up), step(&x0, &um))
        };
        for r in 0..2 * n {
            let fd = (fp[r] - fm[r]) / (2.0 * h);
            let got = if c < 2 * n { a[(r, c)] } else { b[(r, c - 2 * n)] };
            assert!((got - fd).abs() < 1e-6 * (1.0 + fd.abs()), "{label}: step {k}, column {c} row {r}: {got} vs {fd}");
        }
    }
    (qn, pn)
}

#[test]
fn unforced_flow_is_symplectic() {
    for model in models() {
        for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
            let n = model.nv;
            let vi = VariationalIntegrator::new(model.clone(), sc.clone(), 0.03, Some(JointForces::none(n))).unwrap();
            let (q, p) = state(&vi, 3);
            let mut ws = vi.workspace();
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.linearize(&mut ws, StepInput::new(0, &q, &p, &vec![0.0; n]), &mut a, &mut b, &mut qn, &mut pn).unwrap();
            let mut j = DMatrix::zeros(2 * n, 2 * n);
            for i in 0..n {
                j[(i, n + i)] = 1.0;
                j[(n + i, i)] = -1.0;
            }
            let err = (a.transpose() * &j * &a - &j).amax();
            assert!(err < 1e-10 * a.amax().powi(2), "{} s={}: |AᵀJA − J| = {err:e}", model.name, sc.s);
        }
    }
}

/// A chain whose first joint turns about the world z axis, with gravity along z: the
/// Lagrangian is invariant under that rotation, so its discrete momentum is conserved.
fn symmetric_chain() -> Arc<Model> {
    let mut b = ModelBuilder::new("symmetric");
    let rod = |m: f64| Inertia::new(m, Vector3::new(0.3, 0.1, -0.4), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.01)));
    let mut parent = b.add_body(None, "yaw", Joint::Revolute { axis: Vector3::z() }, Se3::identity(), rod(1.0)).unwrap();
    for (k, axis) in [Vector3::x(), Vector3::y(), Vector3::x()].into_iter().enumerate() {
        let at = Se3::new(Matrix3::identity(), Vector3::new(0.2, 0.0, -0.5));
        parent = b.add_body(Some(parent), &format!("j{k}"), Joint::Revolute { axis }, at, rod(0.7)).unwrap();
    }
    Arc::new(b.build().unwrap())
}

#[test]
fn symmetric_momentum_is_conserved_and_energy_does_not_drift() {
    let model = symmetric_chain();
    let vi = VariationalIntegrator::new(model.clone(), Scheme::trapezoid(), 0.01, None).unwrap();
    let (q, p) = state(&vi, 5);
    let steps = 3000;
    let traj = rollout(&vi, &q, &p, &vec![0.0; steps * model.nv]).unwrap();
    let mut ws = vi.workspace();
    let e0 = vi.energy(&mut ws, 0, &q, &p).unwrap();
    let (mut max_dp, mut e_first, mut e_last) = (0.0_f64, 0.0_f64, 0.0_f64);
    for k in 0..=steps {
        max_dp = max_dp.max((traj.p_at(k)[0] - p[0]).abs());
        let de = (vi.energy(&mut ws, k, traj.q_at(k), traj.p_at(k)).unwrap() - e0).abs();
        if k < steps / 2 {
            e_first = e_first.max(de);
        } else {
            e_last = e_last.max(de);
        }
    }
    assert!(max_dp < 1e-10 * (1.0 + p[0].abs()), "yaw momentum drift {max_dp:e}");
    // bounded oscillation, no secular growth: the second half is no worse than the first
    // by more than a factor 2, and the error stays small relative to the energy scale
    assert!(e_last < 2.0 * e_first + 1e-12, "energy error grows: {e_first:e} then {e_last:e}");
    assert!(e_first < 1e-2 * (1.0 + e0.abs()), "energy error {e_first:e} vs E = {e0}");
}

#[test]
fn time_reversibility() {
    let model = Arc::new(pendulum_chain(3, false));
    for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
        let vi = VariationalIntegrator::new(model.clone(), sc, 0.02, Some(JointForces::none(3))).unwrap();
        let (q, p) = state(&vi, 9);
        let fwd = rollout(&vi, &q, &p, &[0.0; 3 * 50]).unwrap();
        let pn: Vec<f64> = fwd.p_at(50).iter().map(|x| -x).collect();
        let back = rollout(&vi, fwd.q_at(50), &pn, &[0.0; 3 * 50]).unwrap();
        for i in 0..3 {
            assert!((back.q_at(50)[i] - q[i]).abs() < 1e-9);
            assert!((back.p_at(50)[i] + p[i]).abs() < 1e-9);
        }
    }
}

/// Global error at T = 0.5 s on a 3-link chain against a Lobatto s = 4 reference at a fine
/// step; halving Δt must divide the error by ≈ 2^(2s).
#[test]
fn convergence_order_is_2s() {
    let model = Arc::new(pendulum_chain(3, false));
    let t_end = 0.5;
    let make = |sc: Scheme, steps: usize| VariationalIntegrator::new(model.clone(), sc, t_end / steps as f64, Some(JointForces::none(3))).unwrap();
    let reference = make(Scheme::lobatto(4).unwrap(), 200);
    let (q0, p0) = state(&reference, 4);
    let final_state = |vi: &VariationalIntegrator, steps: usize| {
        let t = rollout(vi, &q0, &p0, &vec![0.0; 3 * steps]).unwrap();
        [t.q_at(steps).to_vec(), t.p_at(steps).to_vec()].concat()
    };
    let exact = final_state(&reference, 200);
    for (sc, coarse, expected) in
        [(Scheme::midpoint(), 20, 2.0), (Scheme::trapezoid(), 20, 2.0), (Scheme::simpson(), 10, 4.0), (Scheme::lobatto(3).unwrap(), 5, 6.0)]
    {
        let err = |steps: usize| {
            let x = final_state(&make(sc.clone(), steps), steps);
            x.iter().zip(&exact).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()))
        };
        let order = (err(coarse) / err(2 * coarse)).log2();
        println!("s = {}: measured order {order:.2}", sc.s);
        assert!((order - expected).abs() < 0.3, "s = {}: measured order {order:.2}, expected {expected}", sc.s);
    }
}

#[test]
fn bad_parameters_are_errors() {
    let chain = Arc::new(pendulum_chain(2, true));
    assert!(matches!(VariationalIntegrator::new(chain.clone(), Scheme::trapezoid(), -1.0, None), Err(ViError::InvalidParameter(_))));
    let vi = VariationalIntegrator::new(chain, Scheme::trapezoid(), 0.01, None).unwrap();
    let mut ws = vi.workspace();
    let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
    assert!(matches!(vi.step(&mut ws, StepInput::new(0, &[0.0, f64::NAN], &[0.0; 2], &[0.0; 2]), &mut a, &mut b), Err(ViError::Model(_))));
    // an absurd step cannot converge: reported, not a panic or a silent answer
    let fast = VariationalIntegrator::new(vi.model().clone(), Scheme::trapezoid(), 5.0, None).unwrap().with_newton(1e-12, 3).unwrap();
    let r = fast.step(&mut fast.workspace(), StepInput::new(7, &[0.3, -2.0], &[40.0, -30.0], &[0.0; 2]), &mut a, &mut b);
    assert!(matches!(r, Err(ViError::NewtonDiverged { step: 7, .. }) | Err(ViError::SingularJacobian { step: 7 })), "{r:?}");
}

#[test]
fn parallel_linearisation_equals_sequential_and_is_thread_count_independent() {
    let model = Arc::new(random_tree(6, 2, &one_dof()));
    let vi = VariationalIntegrator::new(model.clone(), Scheme::simpson(), 0.01, None).unwrap();
    let (q, p) = state(&vi, 1);
    let traj = rollout(&vi, &q, &p, &vec![0.1; 6 * 40]).unwrap();
    let par = linearize_trajectory(&vi, &traj).unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| linearize_trajectory(&vi, &traj).unwrap());
    for k in 0..40 {
        assert_eq!(par.a[k], one.a[k]);
        assert_eq!(par.b[k], one.b[k]);
    }
    assert!(par.max_defect < 1e-9, "{}", par.max_defect);
}

#[test]
fn a_rejected_guess_leaves_the_workspace_usable() {
    let vi = VariationalIntegrator::new(Arc::new(pendulum_chain(2, true)), Scheme::trapezoid(), 0.01, None).unwrap();
    let mut ws = vi.workspace();
    let (mut qn, mut pn) = ([0.0; 2], [0.0; 2]);
    let bad = [f64::NAN, 0.0];
    assert!(vi.step(&mut ws, StepInput::new(0, &[0.1, 0.2], &[0.0; 2], &[0.0; 2]).with_guess(Some(&bad)), &mut qn, &mut pn).is_err());
    vi.step(&mut ws, StepInput::new(1, &[0.1, 0.2], &[0.0; 2], &[0.0; 2]), &mut qn, &mut pn).unwrap();
}
