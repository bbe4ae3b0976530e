//! Cross-checks between the algorithms on random trees with every joint kind
//! (Pinocchio's `unittest/{rnea,aba,crba}.cpp` web of checks, in Rust).

use crate::builders::random_tree;
use crate::*;
use nalgebra::{DMatrix, DVector};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn models() -> Vec<Model> {
    let mut out = vec![builders::pendulum_chain(5, true), builders::binary_tree(3), builders::cartpole()];
    for (n, seed) in [(1, 0), (2, 1), (5, 2), (12, 3), (30, 4)] {
        out.push(random_tree(n, seed, &Joint::examples()));
    }
    out
}

fn random_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-2.0..2.0)).collect()
}

struct State {
    q: Vec<f64>,
    v: Vec<f64>,
    a: Vec<f64>,
}

fn states(model: &Model, seed: u64) -> Vec<State> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..4)
        .map(|_| State { q: random_configuration(model, &mut rng), v: random_vec(&mut rng, model.nv), a: random_vec(&mut rng, model.nv) })
        .collect()
}

/// max |x − y| / max(1, |y|∞)
fn rel_err(x: &[f64], y: &[f64]) -> f64 {
    let scale = y.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
    x.iter().zip(y).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs())) / scale
}

#[test]
fn rnea_is_mass_matrix_times_a_plus_bias() {
    for model in models() {
        let mut ws = model.workspace();
        for s in states(&model, 10) {
            let tau = rnea(&model, &mut ws, &s.q, &s.v, &s.a).unwrap().to_vec();
            let b = nonlinear_effects(&model, &mut ws, &s.q, &s.v).unwrap().to_vec();
            let m = crba(&model, &mut ws, &s.q).unwrap().clone();
            let expected = &m * DVector::from_column_slice(&s.a) + DVector::from_vec(b);
            assert!(rel_err(&tau, expected.as_slice()) < 1e-12, "{}", model.name);
        }
    }
}

#[test]
fn crba_matches_rnea_columns() {
    for model in models() {
        let mut ws = model.workspace();
        for s in states(&model, 11) {
            let zero = vec![0.0; model.nv];
            let g = gravity(&model, &mut ws, &s.q).unwrap().to_vec();
            let m = crba(&model, &mut ws, &s.q).unwrap().clone();
            assert!((&m - m.transpose()).amax() == 0.0, "M must be exactly symmetric");
            assert!(m.clone().cholesky().is_some(), "M must be positive definite");
            for k in 0..model.nv {
                let mut e = zero.clone();
                e[k] = 1.0;
                let col: Vec<f64> = rnea(&model, &mut ws, &s.q, &zero, &e).unwrap().iter().zip(&g).map(|(t, g)| t - g).collect();
                assert!(rel_err(&col, m.column(k).as_slice()) < 1e-12, "{} column {k}", model.name);
            }
        }
    }
}

#[test]
fn aba_inverts_rnea() {
    for model in models() {
        let mut ws = model.workspace();
        for s in states(&model, 12) {
            let tau = rnea(&model, &mut ws, &s.q, &s.v, &s.a).unwrap().to_vec();
            let a = aba(&model, &mut ws, &s.q, &s.v, &tau).unwrap().to_vec();
            // round trip error grows with cond(M); these models stay below ~1e4
            assert!(rel_err(&a, &s.a) < 1e-8, "{}: {}", model.name, rel_err(&a, &s.a));
            let back = rnea(&model, &mut ws, &s.q, &s.v, &a).unwrap().to_vec();
            assert!(rel_err(&back, &tau) < 1e-10, "{}", model.name);
        }
    }
}

#[test]
fn minverse_inverts_crba() {
    for model in models() {
        let mut ws = model.workspace();
        for s in states(&model, 13) {
            let m = crba(&model, &mut ws, &s.q).unwrap().clone();
            let minv = minverse(&model, &mut ws, &s.q).unwrap().clone();
            let err = (&m * &minv - DMatrix::identity(model.nv, model.nv)).amax();
            assert!(err < 1e-9, "{}: {err:e}", model.name);
            assert!((&minv - minv.transpose()).amax() == 0.0);
        }
    }
}

#[test]
fn kinetic_energy_is_quadratic_form_of_mass_matrix() {
    for model in models() {
        let mut ws = model.workspace();
        for s in states(&model, 14) {
            let t = kinetic_energy(&model, &mut ws, &s.q, &s.v).unwrap();
            let m = crba(&model, &mut ws, &s.q).unwrap();
            let v = DVector::from_column_slice(&s.v);
            let expected = 0.5 * v.dot(&(m * &v));
            assert!((t - expected).abs() < 1e-12 * (1.0 + expected.abs()));
        }
    }
}

#[test]
fn gravity_is_gradient_of_potential_energy() {
    // central differences on the manifold, h = 1e-6: truncation ~h² |V'''| ≪ round-off
    // ~ε|V|/h ≈ 1e-10 |V|; assert 1e-6 relative to max(1, |g|).
    let h = 1e-6;
    for model in models() {
        let mut ws = model.workspace();
        for s in states(&model, 15) {
            let g = gravity(&model, &mut ws, &s.q).unwrap().to_vec();
            let fd: Vec<f64> = (0..model.nv)
                .map(|k| {
                    let mut e = vec![0.0; model.nv];
                    e[k] = h;
                    let plus = integrate(&model, &s.q, &e).unwrap();
                    e[k] = -h;
                    let minus = integrate(&model, &s.q, &e).unwrap();
                    (potential_energy(&model, &mut ws, &plus).unwrap() - potential_energy(&model, &mut ws, &minus).unwrap()) / (2.0 * h)
                })
                .collect();
            assert!(rel_err(&fd, &g) < 1e-6, "{}: {}", model.name, rel_err(&fd, &g));
        }
    }
}

#[test]
fn jacobian_matches_finite_differences_of_frame_placement() {
    let h = 1e-6;
    for model in models() {
        let mut ws = model.workspace();
        let frame = model.frames.len().saturating_sub(1);
        if model.frames.is_empty() {
            continue;
        }
        for s in states(&model, 16).iter().take(2) {
            let j = frame_jacobian(&model, &mut ws, &s.q, frame, ReferenceFrame::Local).unwrap().clone();
            let of = ws.frame_placements[frame];
            let mut fd = DMatrix::zeros(6, model.nv);
            for k in 0..model.nv {
                let mut e = vec![0.0; model.nv];
                let mut place = |d: f64, ws: &mut Workspace| {
                    e[k] = d;
                    let q = integrate(&model, &s.q, &e).unwrap();
                    frame_jacobian(&model, ws, &q, frame, ReferenceFrame::Local).unwrap();
                    ws.frame_placements[frame]
                };
                let plus = vidyn_spatial::log6(&of.inv_compose(&place(h, &mut ws)));
                let minus = vidyn_spatial::log6(&of.inv_compose(&place(-h, &mut ws)));
                fd.set_column(k, &((plus - minus).to_vector() / (2.0 * h)));
            }
            assert!((&fd - &j).amax() < 1e-7 * j.amax().max(1.0), "{}", model.name);
            // the world and world-aligned Jacobians are re-expressions of the local one
            let jw = frame_jacobian(&model, &mut ws, &s.q, frame, ReferenceFrame::World).unwrap().clone();
            let jl = of.action_matrix() * j.fixed_rows::<6>(0);
            assert!((jw - jl).amax() < 1e-12 * j.amax().max(1.0));
        }
    }
}

#[test]
fn integrate_and_difference_are_inverse() {
    for model in models() {
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        for _ in 0..4 {
            let q0 = random_configuration(&model, &mut rng);
            let v: Vec<f64> = random_vec(&mut rng, model.nv).iter().map(|x| 0.5 * x).collect();
            let q1 = integrate(&model, &q0, &v).unwrap();
            let d = difference(&model, &q0, &q1).unwrap();
            assert!(rel_err(&d, &v) < 1e-10, "{}", model.name);
            assert!(difference(&model, &q0, &q0).unwrap().iter().all(|x| x.abs() < 1e-14));
        }
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let model = random_tree(6, 5, &[Joint::FreeFlyer, Joint::Spherical]);
    let mut ws = model.workspace();
    let q = neutral(&model);
    let v = vec![0.0; model.nv];
    assert!(matches!(rnea(&model, &mut ws, &q[1..], &v, &v), Err(RbdError::Dimension { arg: "q", .. })));
    let mut bad = v.clone();
    bad[2] = f64::NAN;
    assert!(matches!(aba(&model, &mut ws, &q, &v, &bad), Err(RbdError::NonFinite { arg: "tau", index: 2, .. })));
    let mut qn = q.clone();
    qn[6] = 2.0;
    assert!(matches!(crba(&model, &mut ws, &qn), Err(RbdError::NotNormalized { .. })));
    assert!(matches!(frame_jacobian(&model, &mut ws, &q, 10_000, ReferenceFrame::World), Err(RbdError::IndexOutOfRange { .. })));
}

/// Central difference of `f` along each tangent direction (the closure applies the step on
/// the manifold or in the vector space). h = 1e-6: truncation O(h²·|f'''|) ≈ 1e-12 is far
/// below round-off ε·|f|/h ≈ 2e-10·|f|, so 1e-6 relative to max(1, |J|∞) leaves room for
/// conditioning and still catches real errors (which are O(1) relative).
fn central_difference(nv: usize, mut f: impl FnMut(&[f64]) -> Vec<f64>) -> DMatrix<f64> {
    let h = 1e-6;
    let mut cols = Vec::with_capacity(nv);
    for k in 0..nv {
        let mut e = vec![0.0; nv];
        e[k] = h;
        let plus = f(&e);
        e[k] = -h;
        let minus = f(&e);
        cols.push(DVector::from_iterator(plus.len(), plus.iter().zip(&minus).map(|(p, m)| (p - m) / (2.0 * h))));
    }
    DMatrix::from_columns(&cols)
}

fn assert_close(name: &str, analytic: &DMatrix<f64>, fd: &DMatrix<f64>, tol: f64) {
    let err = (analytic - fd).amax() / analytic.amax().max(1.0);
    assert!(err < tol, "{name}: relative error {err:e}\nanalytic {analytic}\nfd {fd}");
}

#[test]
fn rnea_derivatives_match_finite_differences() {
    for model in models() {
        let mut ws = model.workspace();
        let mut ws2 = model.workspace();
        for s in states(&model, 18).iter().take(2) {
            let d = rnea_derivatives(&model, &mut ws, &s.q, &s.v, &s.a).unwrap();
            let (dq, dv, da) = (d.dtau_dq.clone(), d.dtau_dv.clone(), d.dtau_da.clone());
            let tau = ws.tau.clone();
            let expected = rnea(&model, &mut ws2, &s.q, &s.v, &s.a).unwrap().to_vec();
            assert!(rel_err(&tau, &expected) < 1e-12, "{}: tau", model.name);
            let fd_q = central_difference(model.nv, |e| {
                let q = integrate(&model, &s.q, e).unwrap();
                rnea(&model, &mut ws2, &q, &s.v, &s.a).unwrap().to_vec()
            });
            let fd_v = central_difference(model.nv, |e| {
                let v: Vec<f64> = s.v.iter().zip(e).map(|(a, b)| a + b).collect();
                rnea(&model, &mut ws2, &s.q, &v, &s.a).unwrap().to_vec()
            });
            assert_close(&format!("{} dtau/dq", model.name), &dq, &fd_q, 1e-6);
            assert_close(&format!("{} dtau/dv", model.name), &dv, &fd_v, 1e-6);
            let m = crba(&model, &mut ws2, &s.q).unwrap();
            assert_close(&format!("{} dtau/da", model.name), &da, m, 1e-12);
        }
    }
}

#[test]
fn aba_derivatives_match_finite_differences() {
    for model in models() {
        let mut ws = model.workspace();
        let mut ws2 = model.workspace();
        for s in states(&model, 19).iter().take(2) {
            let tau = s.a.clone();
            let d = aba_derivatives(&model, &mut ws, &s.q, &s.v, &tau).unwrap();
            let (dq, dv, dtau) = (d.dddq_dq.clone(), d.dddq_dv.clone(), d.dddq_dtau.clone());
            let fd_q = central_difference(model.nv, |e| {
                let q = integrate(&model, &s.q, e).unwrap();
                aba(&model, &mut ws2, &q, &s.v, &tau).unwrap().to_vec()
            });
            let fd_v = central_difference(model.nv, |e| {
                let v: Vec<f64> = s.v.iter().zip(e).map(|(a, b)| a + b).collect();
                aba(&model, &mut ws2, &s.q, &v, &tau).unwrap().to_vec()
            });
            // q̈ is M⁻¹(·): its differences lose a factor cond(M) ≲ 1e3 on these models
            assert_close(&format!("{} dddq/dq", model.name), &dq, &fd_q, 1e-5);
            assert_close(&format!("{} dddq/dv", model.name), &dv, &fd_v, 1e-5);
            let minv = minverse(&model, &mut ws2, &s.q).unwrap();
            assert_close(&format!("{} dddq/dtau", model.name), &dtau, minv, 1e-14);
        }
    }
}
