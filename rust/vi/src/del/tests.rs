//! The DEL rows and blocks (module `del`): against finite differences of the discrete
//! Lagrangian, the midpoint rule's rows as derivatives of its Lagrangian, and with body
//! wrenches (their generalised force, the blocks against differences of the rows).

mod lagrangian {
    use crate::test_common::integrator::*;
    use crate::*;
    use nalgebra::DMatrix;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use vidyn_rbd::Model;

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
}

mod wrenches {
    use crate::del::DelTerms;
    use crate::test_common::newton::{integrator, models, problem, random, schemes, wrenches};
    use crate::*;
    use nalgebra::DMatrix;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The wrench part of each control-point row is `w_α Δt Σ_j J_jᵀ F_j` at `q^α`, with the
    /// joint torques from the rigid-body library (an independent O(n) pass in body frames).
    #[test]
    fn wrench_rows_are_the_joint_torques_of_the_wrenches() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let dt = 0.05;
        for model in models() {
            let n = model.nv;
            let fext = wrenches(&mut rng, n);
            let mut ws = model.workspace();
            for sc in [Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
                let q0 = random(&mut rng, n, 1.0);
                let z: Vec<f64> = (0..sc.s * n).map(|k| q0[k % n] + 0.1 * rng.random_range(-1.0..1.0)).collect();
                let (mut with, mut without) = (del::StepPoints::new(&model, sc.points()), del::StepPoints::new(&model, sc.points()));
                with.set(&model, &sc, dt, &q0, &z, &fext);
                without.set(&model, &sc, dt, &q0, &z, &[]);
                let (u, forces) = (vec![0.0; n], JointForces::none(n));
                let mut tau = vec![0.0; n];
                for a in 0..sc.points() {
                    vidyn_rbd::external_joint_torques(&model, &mut ws, &with.q[a], &fext, &mut tau).unwrap();
                    let (mut rows_with, mut rows_without) = (vec![0.0; n], vec![0.0; n]);
                    with.add_point_rows(DelTerms { scheme: &sc, dt, forces: &forces }, &u, 1.0, a, &mut rows_with);
                    without.add_point_rows(DelTerms { scheme: &sc, dt, forces: &forces }, &u, 1.0, a, &mut rows_without);
                    for i in 0..n {
                        let got = rows_with[i] - rows_without[i];
                        let want = sc.weights[a] * dt * tau[i];
                        assert!(
                            (got - want).abs() < 1e-12 * (1.0 + want.abs() + rows_without[i].abs()),
                            "{} s={} point {a} joint {i}: {got} vs {want}",
                            model.name,
                            sc.s
                        );
                    }
                }
                assert!(tau.iter().any(|t| t.abs() > 0.1), "the wrenches must load the joints: {tau:?}");
            }
        }
    }

    /// `del_block(x, β)` with wrenches (plus damping and springs) against central differences of
    /// `del_rows(x)` — the rows are not gradients of anything now, so the rows themselves are the
    /// reference. h = 1e-6: truncation O(h²) ≈ 1e-12 relative, round-off ≈ ε|row|/h ≈ 1e-10.
    #[test]
    fn del_blocks_with_wrenches_match_finite_differences_of_the_rows() {
        let h = 1e-6;
        let dt = 0.05;
        let mut rng = ChaCha8Rng::seed_from_u64(22);
        let mut worst = 0.0_f64;
        for model in models() {
            for sc in schemes() {
                let n = model.nv;
                let vi = integrator(&model, sc.clone(), dt, &mut rng, true);
                let (q0, _p, u, z) = problem(&vi, &mut rng);
                let pts: Vec<Vec<f64>> = std::iter::once(q0.clone()).chain(z.chunks(n).map(<[f64]>::to_vec)).collect();
                let mut sp = del::StepPoints::new(&model, sc.points());
                sp.set(&model, &sc, dt, &q0, &z, vi.body_wrenches());
                sp.update_hessians(&model);
                // the wrenches contribute to the blocks (else the test could not fail on them)
                let mut wq_max = 0.0_f64;
                for hs in &sp.hessians {
                    wq_max = wq_max.max(hs.wq.amax());
                }
                assert!(wq_max > 0.1, "{}: W_q = 0", model.name);
                for x in 0..sc.points() {
                    for b in 0..sc.points() {
                        let mut blk = DMatrix::zeros(n, n);
                        sp.del_block(&sc, dt, vi.forces(), x, b, &mut blk.view_mut((0, 0), (n, n)));
                        for k in 0..n {
                            let rows = |d: f64| {
                                let mut p = pts.clone();
                                p[b][k] += d;
                                let mut s2 = del::StepPoints::new(&model, sc.points());
                                s2.set(&model, &sc, dt, &p[0], &p[1..].concat(), vi.body_wrenches());
                                let mut r = vec![0.0; n];
                                s2.del_rows(&sc, dt, vi.forces(), &u, x, &mut r);
                                r
                            };
                            let (plus, minus) = (rows(h), rows(-h));
                            for i in 0..n {
                                let fd = (plus[i] - minus[i]) / (2.0 * h);
                                let err = (blk[(i, k)] - fd).abs() / (1.0 + fd.abs());
                                worst = worst.max(err);
                                assert!(err < 1e-6, "{} s={} block ({x},{b})[{i},{k}]: {} vs {fd}", model.name, sc.s, blk[(i, k)]);
                            }
                        }
                    }
                }
            }
        }
        println!("DEL blocks with wrenches vs central differences: worst {worst:.1e}");
    }
}
