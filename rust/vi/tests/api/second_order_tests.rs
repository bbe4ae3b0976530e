//! Checks of the second-order flow-map derivatives (module `second_order`) and the state
//! conversions (module `state`) against central differences of exact first derivatives.
//!
//! Step and tolerance of the differences of `A`, `B` (exact first derivatives of steps
//! re-solved to round-off): `A`'s momentum rows are sums of DEL-block terms of size
//! ~|M|/Δt that cancel to O(1), so `A` carries ~1e-12 absolute rounding, which a central
//! difference divides by 2h; truncation is h² times the fourth derivative of f over 6.
//! Measured on a 10-body tree (worst entry, tensors of size ~1.5): 1e-6 at h = 1e-6
//! (rounding), 4e-7 at h = 1e-5, 5e-8 at h = 1e-4, 3e-7 at h = 1e-3 (truncation). We take
//! h = 1e-5 and assert `|exact − fd| ≤ 1e-6 · (1 + max|tensor|)` (times `Σ|λ_i|` for a
//! contraction, whose rounding adds up): a margin of ≥ 3× over the measured noise, while any
//! wrong term, of the size of the tensor, fails it by orders of magnitude.

use crate::common::second_order::*;
use crate::*;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{binary_tree, random_tree};
use vidyn_rbd::{Model, RbdError};
use vidyn_vi::reference::DenseOracle;

fn models() -> Vec<Arc<Model>> {
    vec![Arc::new(random_tree(4, 3, &one_dof())), Arc::new(random_tree(7, 21, &one_dof())), Arc::new(binary_tree(2))]
}

/// Exact first-order `A`, `B` of the step at `(x, u)` by the dense reference oracle (an
/// implementation independent of module `second_order`, valid for every scheme).
fn first_order(vi: &VariationalIntegrator, x: &[f64], u: &[f64]) -> (DMatrix<f64>, DMatrix<f64>) {
    let n = vi.n();
    let mut ws = vi.workspace();
    let mut oracle = DenseOracle::new(vi);
    let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
    let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
    let guess = dense_solve(vi, &x[..n], &x[n..], u);
    oracle.linearize(&mut ws, StepInput::new(0, &x[..n], &x[n..], u).with_guess(Some(&guess)), &mut a, &mut b, &mut qn, &mut pn).unwrap();
    (a, b)
}

#[test]
fn first_order_part_equals_the_reference_and_the_b1_linearisation() {
    for model in models() {
        for (name, sc) in schemes() {
            let (vi, q, p, u) = setup(model.clone(), sc.clone(), 11);
            let n = vi.n();
            let mut so = vi.second_order_workspace();
            let out = vi
                .linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u).with_guess(Some(&dense_solve(&vi, &q, &p, &u))), &vec![0.0; 2 * n])
                .unwrap();
            let (a, b) = first_order(&vi, &[q.clone(), p.clone()].concat(), &u);
            let scale = 1.0 + a.amax().max(b.amax());
            assert!((&out.a - &a).amax() < 1e-11 * scale && (&out.b - &b).amax() < 1e-11 * scale, "{} {name}", model.name);
            assert!(out.hxx.amax() == 0.0 && out.huu.amax() == 0.0, "λ = 0 contracts to zero");
            if !sc.mixes_rows() {
                // the O(n²) B.1 path of `linearize` (the midpoint's B.1 path is being finished on main)
                let mut ws = vi.workspace();
                let (mut a1, mut b1) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
                let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
                vi.linearize(&mut ws, StepInput::new(0, &q, &p, &u), &mut a1, &mut b1, &mut qn, &mut pn).unwrap();
                assert!((&out.a - &a1).amax() < 1e-11 * scale && (&out.b - &b1).amax() < 1e-11 * scale, "{} {name}", model.name);
            }
        }
    }
}

#[test]
fn second_order_tensors_match_central_differences_of_a_and_b() {
    let h = 1e-5;
    for model in models() {
        for (name, sc) in schemes() {
            let (vi, q, p, u) = setup(model.clone(), sc, 5);
            let n = vi.n();
            let m = 2 * n;
            let mut so = vi.second_order_workspace();
            let out = vi.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u).with_guess(Some(&dense_solve(&vi, &q, &p, &u)))).unwrap().clone();
            let scale = 1.0 + out.fxx.iter().chain(&out.fxu).chain(&out.fuu).fold(0.0_f64, |s, x| s.max(x.abs()));
            let x0 = [q.clone(), p.clone()].concat();
            let tol = 1e-6 * scale;
            let mut worst = 0.0_f64;
            // ∂/∂x_k of A and B: fxx[:, :, k] and fxu[:, k, :]
            for k in 0..m {
                let (mut xp, mut xm) = (x0.clone(), x0.clone());
                xp[k] += h;
                xm[k] -= h;
                let ((ap, bp), (am, bm)) = (first_order(&vi, &xp, &u), first_order(&vi, &xm, &u));
                for i in 0..m {
                    for j in 0..m {
                        let fd = (ap[(i, j)] - am[(i, j)]) / (2.0 * h);
                        let e = (out.fxx[(i * m + j) * m + k] - fd).abs();
                        worst = worst.max(e);
                        assert!(e < tol, "{} {name}: fxx[{i},{j},{k}] = {} vs fd {fd}", model.name, out.fxx[(i * m + j) * m + k]);
                    }
                    for j in 0..n {
                        let fd = (bp[(i, j)] - bm[(i, j)]) / (2.0 * h);
                        let e = (out.fxu[(i * m + k) * n + j] - fd).abs();
                        assert!(e < tol, "{} {name}: fxu[{i},{k},{j}] = {} vs fd {fd} (from B)", model.name, out.fxu[(i * m + k) * n + j]);
                    }
                }
            }
            // ∂/∂u_k of A and B: fxu[:, :, k] and fuu[:, :, k]
            for k in 0..n {
                let (mut up, mut um) = (u.clone(), u.clone());
                up[k] += h;
                um[k] -= h;
                let ((ap, bp), (am, bm)) = (first_order(&vi, &x0, &up), first_order(&vi, &x0, &um));
                for i in 0..m {
                    for j in 0..m {
                        let fd = (ap[(i, j)] - am[(i, j)]) / (2.0 * h);
                        assert!((out.fxu[(i * m + j) * n + k] - fd).abs() < tol, "{} {name}: fxu[{i},{j},{k}] vs fd {fd} (from A)", model.name);
                    }
                    for j in 0..n {
                        let fd = (bp[(i, j)] - bm[(i, j)]) / (2.0 * h);
                        assert!((out.fuu[(i * n + j) * n + k] - fd).abs() < tol, "{} {name}: fuu[{i},{j},{k}] vs fd {fd}", model.name);
                    }
                }
            }
            println!("{} {name}: max |fxx − fd| = {worst:.2e}, scale {scale:.2e}", model.name);
            // the tensors are not trivial (damping, springs, controls and gravity all present)
            assert!(scale > 1.0 + 1e-3, "{} {name}: second derivatives vanish", model.name);
        }
    }
}

#[test]
fn tensors_are_symmetric_and_contraction_equals_the_contracted_form() {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    for model in [Arc::new(random_tree(9, 8, &one_dof())), Arc::new(binary_tree(3))] {
        for (name, sc) in schemes() {
            let (vi, q, p, u) = setup(model.clone(), sc, 2);
            let n = vi.n();
            let m = 2 * n;
            let mut so = vi.second_order_workspace();
            let full = vi.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u).with_guess(Some(&dense_solve(&vi, &q, &p, &u)))).unwrap().clone();
            let scale = full.fxx.iter().chain(&full.fxu).chain(&full.fuu).fold(0.0_f64, |s, x| s.max(x.abs()));
            for i in 0..m {
                for j in 0..m {
                    for k in 0..j {
                        let (x, y) = (full.fxx[(i * m + j) * m + k], full.fxx[(i * m + k) * m + j]);
                        assert!((x - y).abs() <= 1e-12 * scale, "{name} fxx[{i},{j},{k}] {x} vs {y}");
                    }
                }
                for j in 0..n {
                    for k in 0..j {
                        let (x, y) = (full.fuu[(i * n + j) * n + k], full.fuu[(i * n + k) * n + j]);
                        assert!((x - y).abs() <= 1e-12 * scale, "{name} fuu[{i},{j},{k}]");
                    }
                }
            }
            let lam = random(&mut rng, m, 3.0);
            let c = vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u).with_guess(Some(&dense_solve(&vi, &q, &p, &u))), &lam).unwrap();
            let lscale = scale * lam.iter().map(|x| x.abs()).sum::<f64>();
            for j in 0..m {
                for k in 0..m {
                    let want: f64 = (0..m).map(|i| lam[i] * full.fxx[(i * m + j) * m + k]).sum();
                    assert!((c.hxx[(j, k)] - want).abs() <= 1e-12 * lscale, "{name} hxx[{j},{k}]");
                }
                for k in 0..n {
                    let want: f64 = (0..m).map(|i| lam[i] * full.fxu[(i * m + j) * n + k]).sum();
                    assert!((c.hxu[(j, k)] - want).abs() <= 1e-12 * lscale, "{name} hxu[{j},{k}]");
                }
            }
            for j in 0..n {
                for k in 0..n {
                    let want: f64 = (0..m).map(|i| lam[i] * full.fuu[(i * n + j) * n + k]).sum();
                    assert!((c.huu[(j, k)] - want).abs() <= 1e-12 * lscale, "{name} huu[{j},{k}]");
                }
            }
        }
    }
}

#[test]
fn contracted_form_matches_differences_of_the_contracted_first_order_map() {
    // an independent check of the contracted path alone: λᵀ A and λᵀ B differentiated by
    // central differences (step and tolerance as in the module docs)
    let h = 1e-5;
    let model = Arc::new(random_tree(10, 31, &one_dof()));
    for (name, sc) in schemes() {
        let (vi, q, p, u) = setup(model.clone(), sc, 9);
        let n = vi.n();
        let m = 2 * n;
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let lam = random(&mut rng, m, 1.0);
        let mut so = vi.second_order_workspace();
        let c =
            vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u).with_guess(Some(&dense_solve(&vi, &q, &p, &u))), &lam).unwrap().clone();
        let x0 = [q.clone(), p.clone()].concat();
        let scale = (1.0 + c.hxx.amax().max(c.hxu.amax()).max(c.huu.amax())) * lam.iter().map(|x| x.abs()).sum::<f64>();
        let lt = |a: &DMatrix<f64>, j: usize| (0..m).map(|i| lam[i] * a[(i, j)]).sum::<f64>();
        for k in 0..3 * n {
            let (mut xp, mut xm, mut up, mut um) = (x0.clone(), x0.clone(), u.clone(), u.clone());
            if k < m {
                xp[k] += h;
                xm[k] -= h;
            } else {
                up[k - m] += h;
                um[k - m] -= h;
            }
            let ((ap, bp), (am, bm)) = (first_order(&vi, &xp, &up), first_order(&vi, &xm, &um));
            for j in 0..m {
                let fd = (lt(&ap, j) - lt(&am, j)) / (2.0 * h);
                let got = if k < m { c.hxx[(j, k)] } else { c.hxu[(j, k - m)] };
                assert!((got - fd).abs() < 1e-6 * scale, "{name}: H[{j},{k}] = {got} vs fd {fd}");
            }
            for j in 0..n {
                let fd = (lt(&bp, j) - lt(&bm, j)) / (2.0 * h);
                let got = if k < m { c.hxu[(k, j)] } else { c.huu[(j, k - m)] };
                assert!((got - fd).abs() < 1e-6 * scale, "{name}: H[{},{k}] = {got} vs fd {fd}", m + j);
            }
        }
    }
}

#[test]
fn bad_co_states_are_errors() {
    let (vi, q, p, u) = setup(Arc::new(random_tree(3, 1, &one_dof())), Scheme::trapezoid(), 1);
    let mut so = vi.second_order_workspace();
    assert!(matches!(
        vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &[0.0; 5]),
        Err(ViError::Model(RbdError::Dimension { arg: "lam", got: 5, expected: 6, .. }))
    ));
    assert!(matches!(
        vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &[f64::NAN; 6]),
        Err(ViError::Model(RbdError::NonFinite { arg: "lam", index: 0, .. }))
    ));
    let traj = rollout(&vi, &q, &p, &[0.0; 6]).unwrap();
    assert!(linearize_trajectory_contracted(&vi, &traj, &[0.0; 5]).is_err());
}

#[test]
fn trajectory_functions_equal_the_per_step_calls_for_any_thread_count() {
    let model = Arc::new(random_tree(6, 2, &one_dof()));
    let (vi, q, p, _) = setup(model, Scheme::simpson(), 3);
    let n = vi.n();
    let steps = 12;
    let u: Vec<f64> = (0..steps * n).map(|k| 0.3 * ((k % 5) as f64 - 2.0)).collect();
    let traj = rollout(&vi, &q, &p, &u).unwrap();
    let lam: Vec<f64> = (0..steps * 2 * n).map(|k| ((k * 7) % 11) as f64 - 5.0).collect();
    let full = linearize_trajectory_second_order(&vi, &traj).unwrap();
    let con = linearize_trajectory_contracted(&vi, &traj, &lam).unwrap();
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let (full1, con1) = one.install(|| (linearize_trajectory_second_order(&vi, &traj).unwrap(), linearize_trajectory_contracted(&vi, &traj, &lam).unwrap()));
    let mut so = vi.second_order_workspace();
    for k in 0..steps {
        assert_eq!(full.fxx[k], full1.fxx[k]);
        assert_eq!(con.hxx[k], con1.hxx[k]);
        assert_eq!(con.hxu[k], con1.hxu[k]);
        let out = vi
            .linearize_second_order_contracted(
                &mut so,
                StepInput::new(k, traj.q_at(k), traj.p_at(k), traj.u_at(k)).with_guess(Some(traj.q_at(k + 1))),
                &lam[k * 2 * n..(k + 1) * 2 * n],
            )
            .unwrap();
        assert_eq!(out.huu, con.huu[k]);
        assert_eq!(out.a, con.a[k]);
        assert_eq!(out.a, full.a[k]);
    }
    assert!(full.max_defect < 1e-9 && con.max_defect < 1e-9);
    assert!(full.hxx.is_empty() && con.fxx.is_empty());
}

#[test]
fn state_conversions_and_their_jacobians() {
    let h = 1e-6;
    for model in models() {
        let (vi, q, _, _) = setup(model.clone(), Scheme::trapezoid(), 4);
        let n = vi.n();
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let v = random(&mut rng, n, 2.0);
        let mut ws = vi.workspace();
        let (mut p, mut jp) = (vec![0.0; n], DMatrix::zeros(2 * n, 2 * n));
        vi.momentum_with_jacobian(&mut ws, &q, &v, &mut p, &mut jp).unwrap();
        let mut p_ref = vec![0.0; n];
        vi.momentum(&mut ws, &q, &v, &mut p_ref).unwrap();
        for i in 0..n {
            assert!((p[i] - p_ref[i]).abs() < 1e-12 * (1.0 + p_ref[i].abs()));
        }
        let (mut v2, mut jv) = (vec![0.0; n], DMatrix::zeros(2 * n, 2 * n));
        vi.velocity_with_jacobian(&mut ws, &q, &p, &mut v2, &mut jv).unwrap();
        for i in 0..n {
            assert!((v2[i] - v[i]).abs() < 1e-10 * (1.0 + v[i].abs()), "round trip");
        }
        // the two Jacobians are inverse to each other
        let eye = DMatrix::<f64>::identity(2 * n, 2 * n);
        assert!((&jv * &jp - &eye).amax() < 1e-10 * jp.amax() * jv.amax(), "{}", model.name);
        // ∂(M v)/∂q against RNEA: ∂τ/∂q at (q, 0, v) minus the gravity part at (q, 0, 0)
        let mut rws = model.workspace();
        let zero = vec![0.0; n];
        let d1 = vidyn_rbd::rnea_derivatives(&model, &mut rws, &q, &zero, &v, None).unwrap().dtau_dq.clone();
        let d0 = vidyn_rbd::rnea_derivatives(&model, &mut rws, &q, &zero, &zero, None).unwrap().dtau_dq.clone();
        let dmv = d1 - d0;
        assert!((jp.view((n, 0), (n, n)) - &dmv).amax() < 1e-10 * (1.0 + dmv.amax()), "{}", model.name);
        assert!(dmv.amax() > 1e-3, "non-trivial ∂(Mv)/∂q");
        // central differences of both maps (tolerance as in the module docs)
        for k in 0..2 * n {
            let shift = |d: f64| {
                let (mut qs, mut ys) = (q.clone(), v.clone());
                if k < n {
                    qs[k] += d;
                } else {
                    ys[k - n] += d;
                }
                let (mut ps, mut vs) = (vec![0.0; n], vec![0.0; n]);
                vi.momentum(&mut vi.workspace(), &qs, &ys, &mut ps).unwrap();
                let pp: Vec<f64> = if k < n { p.clone() } else { p.iter().enumerate().map(|(i, x)| x + if i == k - n { d } else { 0.0 }).collect() };
                vi.velocity(&mut vi.workspace(), &qs, &pp, &mut vs).unwrap();
                (ps, vs)
            };
            let ((pp, vp), (pm, vm)) = (shift(h), shift(-h));
            for i in 0..n {
                let fdp = (pp[i] - pm[i]) / (2.0 * h);
                assert!((jp[(n + i, k)] - fdp).abs() < 1e-6 * (1.0 + fdp.abs()), "∂p/∂(q,v) [{i},{k}]");
                let fdv = (vp[i] - vm[i]) / (2.0 * h);
                assert!((jv[(n + i, k)] - fdv).abs() < 1e-6 * (1.0 + fdv.abs()), "∂v/∂(q,p) [{i},{k}]");
            }
        }
    }
}

#[test]
fn prepared_steps_contract_like_the_one_shot_call() {
    let (vi, q, p, u) = setup(Arc::new(random_tree(6, 12, &one_dof())), Scheme::simpson(), 8);
    let n = vi.n();
    let mut so = vi.second_order_workspace();
    assert!(matches!(vi.contract_prepared_second_order(&mut so, &vec![1.0; 2 * n]), Err(ViError::InvalidParameter(_))));
    let a = vi.prepare_second_order(&mut so, StepInput::new(0, &q, &p, &u)).unwrap().a.clone();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut one = vi.second_order_workspace();
    for _ in 0..3 {
        let lam = random(&mut rng, 2 * n, 2.0);
        let got = vi.contract_prepared_second_order(&mut so, &lam).unwrap().clone();
        let want = vi.linearize_second_order_contracted(&mut one, StepInput::new(0, &q, &p, &u), &lam).unwrap();
        assert_eq!(got.hxx, want.hxx);
        assert_eq!(got.hxu, want.hxu);
        assert_eq!(got.huu, want.huu);
        assert_eq!(got.a, a);
    }
    // a failed preparation leaves nothing to contract
    assert!(vi.prepare_second_order(&mut so, StepInput::new(0, &q, &p, &[f64::NAN; 6])).is_err());
    assert!(matches!(vi.contract_prepared_second_order(&mut so, &vec![1.0; 2 * n]), Err(ViError::InvalidParameter(_))));
}
