//! Cross-checks between the algorithms on random trees with every joint kind
//! (Pinocchio's `unittest/{rnea,aba,crba}.cpp` web of checks, in Rust).

use nalgebra::{DMatrix, DVector};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vidyn_rbd::builders::random_tree;
use vidyn_rbd::*;

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
    (0..4).map(|_| State { q: random_configuration(model, &mut rng), v: random_vec(&mut rng, model.nv), a: random_vec(&mut rng, model.nv) }).collect()
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
            let tau = rnea(&model, &mut ws, &s.q, &s.v, &s.a, None).unwrap().to_vec();
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
                let col: Vec<f64> = rnea(&model, &mut ws, &s.q, &zero, &e, None).unwrap().iter().zip(&g).map(|(t, g)| t - g).collect();
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
            let tau = rnea(&model, &mut ws, &s.q, &s.v, &s.a, None).unwrap().to_vec();
            let a = aba(&model, &mut ws, &s.q, &s.v, &tau, None).unwrap().to_vec();
            // round trip error grows with cond(M); these models stay below ~1e4
            assert!(rel_err(&a, &s.a) < 1e-8, "{}: {}", model.name, rel_err(&a, &s.a));
            let back = rnea(&model, &mut ws, &s.q, &s.v, &a, None).unwrap().to_vec();
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

/// `mass_solve(q, b)` is `M(q)⁻¹ b` (against Minverse, to the round-off of two O(n)
/// recursions: 1e-10 relative), and solves `M x = b` (against CRBA), on every model kind.
#[test]
fn mass_solve_matches_minverse() {
    for model in models() {
        let mut ws = model.workspace();
        for s in states(&model, 15) {
            let minv = minverse(&model, &mut ws, &s.q).unwrap().clone();
            let m = crba(&model, &mut ws, &s.q).unwrap().clone();
            let b = DVector::from_column_slice(&s.a);
            let x = DVector::from_column_slice(mass_solve(&model, &mut ws, &s.q, &s.a).unwrap());
            assert!(rel_err(x.as_slice(), (&minv * &b).as_slice()) < 1e-10, "{}", model.name);
            assert!(rel_err((&m * &x).as_slice(), b.as_slice()) < 1e-10, "{}", model.name);
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

/// `Joint::difference_jacobian` is the derivative of `q₁ ⊖ q₀` along `q₁ ⊕ h e_c` (central
/// differences, h = 1e-6: truncation ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10), at differences up
/// to 2.5 rad where `J_r⁻¹` is far from the identity.
#[test]
fn difference_jacobian_matches_central_differences() {
    let h = 1e-6;
    for model in models() {
        let mut rng = ChaCha8Rng::seed_from_u64(23);
        for _ in 0..3 {
            let q0 = random_configuration(&model, &mut rng);
            let v: Vec<f64> = random_vec(&mut rng, model.nv).iter().map(|x| 2.5 * x).collect();
            let q1 = integrate(&model, &q0, &v).unwrap();
            for (i, j) in model.joints.iter().enumerate() {
                let (iq, iv, d) = (model.idx_q[i], model.idx_v[i], j.nv());
                let jac = j.difference_jacobian(&q0[iq..iq + j.nq()], &q1[iq..iq + j.nq()]);
                for c in 0..d {
                    let moved = |eps: f64| {
                        let mut e = vec![0.0; model.nv];
                        e[iv + c] = eps;
                        difference(&model, &q0, &integrate(&model, &q1, &e).unwrap()).unwrap()
                    };
                    let (plus, minus) = (moved(h), moved(-h));
                    for r in 0..d {
                        let fd = (plus[iv + r] - minus[iv + r]) / (2.0 * h);
                        assert!((fd - jac[(r, c)]).abs() < 1e-8, "{} joint {i}: [{r},{c}] {} vs {fd}", model.name, jac[(r, c)]);
                    }
                }
            }
        }
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let model = random_tree(6, 5, &[Joint::FreeFlyer, Joint::Spherical]);
    let mut ws = model.workspace();
    let q = neutral(&model);
    let v = vec![0.0; model.nv];
    assert!(matches!(rnea(&model, &mut ws, &q[1..], &v, &v, None), Err(RbdError::Dimension { arg: "q", .. })));
    let mut bad = v.clone();
    bad[2] = f64::NAN;
    assert!(matches!(aba(&model, &mut ws, &q, &v, &bad, None), Err(RbdError::NonFinite { arg: "tau", index: 2, .. })));
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
            let d = rnea_derivatives(&model, &mut ws, &s.q, &s.v, &s.a, None).unwrap();
            let (dq, dv, da) = (d.dtau_dq.clone(), d.dtau_dv.clone(), d.dtau_da.clone());
            let tau = ws.tau.clone();
            let expected = rnea(&model, &mut ws2, &s.q, &s.v, &s.a, None).unwrap().to_vec();
            assert!(rel_err(&tau, &expected) < 1e-12, "{}: tau", model.name);
            let fd_q = central_difference(model.nv, |e| {
                let q = integrate(&model, &s.q, e).unwrap();
                rnea(&model, &mut ws2, &q, &s.v, &s.a, None).unwrap().to_vec()
            });
            let fd_v = central_difference(model.nv, |e| {
                let v: Vec<f64> = s.v.iter().zip(e).map(|(a, b)| a + b).collect();
                rnea(&model, &mut ws2, &s.q, &v, &s.a, None).unwrap().to_vec()
            });
            assert_close(&format!("{} dtau/dq", model.name), &dq, &fd_q, 1e-6);
            assert_close(&format!("{} dtau/dv", model.name), &dv, &fd_v, 1e-6);
            let m = crba(&model, &mut ws2, &s.q).unwrap();
            assert_close(&format!("{} dtau/da", model.name), &da, m, 1e-12);
        }
    }
}

/// `∂(M(q) a)/∂q` of [`mass_matrix_and_derivative`]: equal to the full RNEA derivative without
/// gravity at zero velocity (same quantity, other recursion: round-off, 1e-12), to central
/// differences of `M(q) a` (tolerance as in `central_difference`), with `a` chosen from `M`
/// by the hook (here `a = M⁻¹ b`) and `M` left in the workspace.
#[test]
fn mass_derivative_matches_rnea_derivatives_and_differences() {
    for model in models() {
        let nv = model.nv;
        let mut weightless = model.clone();
        weightless.gravity.linear.fill(0.0);
        let (mut ws, mut ws2) = (model.workspace(), model.workspace());
        for s in states(&model, 31).iter().take(2) {
            let mut a = s.a.clone();
            let t = mass_matrix_and_derivative(&model, &mut ws, &s.q, &mut a, |m, a| {
                let x = m.clone().lu().solve(&DVector::from_column_slice(a)).ok_or(RbdError::Singular { joint: String::new(), detail: "M".into() })?;
                a.copy_from_slice(x.as_slice());
                Ok::<(), RbdError>(())
            })
            .unwrap()
            .clone();
            let m = crba(&model, &mut ws2, &s.q).unwrap().clone();
            assert!(rel_err(ws.mass_matrix.as_slice(), m.as_slice()) < 1e-14, "{}: M", model.name);
            let ma: Vec<f64> = (m * DVector::from_column_slice(&a)).iter().copied().collect();
            assert!(rel_err(&ma, &s.a) < 1e-9, "{}: the hook's a = M⁻¹b", model.name);
            let zero = vec![0.0; nv];
            let full = rnea_derivatives(&weightless, &mut ws2, &s.q, &zero, &a, None).unwrap().dtau_dq.clone();
            assert_close(&format!("{} T vs rnea_derivatives", model.name), &t, &full, 1e-12);
            let fd = central_difference(nv, |e| {
                let m = crba(&model, &mut ws2, &integrate(&model, &s.q, e).unwrap()).unwrap().clone();
                (m * DVector::from_column_slice(&a)).iter().copied().collect()
            });
            assert_close(&format!("{} T vs differences", model.name), &t, &fd, 1e-6);
        }
    }
    let model = builders::cartpole();
    let mut ws = model.workspace();
    let short = mass_matrix_and_derivative(&model, &mut ws, &[0.0, 0.0], &mut [0.0], |_, _| Ok::<(), RbdError>(()));
    assert!(matches!(short, Err(RbdError::Dimension { .. })));
    let nan = mass_matrix_and_derivative(&model, &mut ws, &[0.0, 0.0], &mut [0.0, 0.0], |_, a| {
        a[1] = f64::NAN;
        Ok::<(), RbdError>(())
    });
    assert!(matches!(nan, Err(RbdError::NonFinite { .. })));
}

#[test]
fn aba_derivatives_match_finite_differences() {
    for model in models() {
        let mut ws = model.workspace();
        let mut ws2 = model.workspace();
        for s in states(&model, 19).iter().take(2) {
            let tau = s.a.clone();
            let d = aba_derivatives(&model, &mut ws, &s.q, &s.v, &tau, None).unwrap();
            let (dq, dv, dtau) = (d.dddq_dq.clone(), d.dddq_dv.clone(), d.dddq_dtau.clone());
            let fd_q = central_difference(model.nv, |e| {
                let q = integrate(&model, &s.q, e).unwrap();
                aba(&model, &mut ws2, &q, &s.v, &tau, None).unwrap().to_vec()
            });
            let fd_v = central_difference(model.nv, |e| {
                let v: Vec<f64> = s.v.iter().zip(e).map(|(a, b)| a + b).collect();
                aba(&model, &mut ws2, &s.q, &v, &tau, None).unwrap().to_vec()
            });
            // q̈ is M⁻¹(·): its differences lose a factor cond(M) ≲ 1e3 on these models
            assert_close(&format!("{} dddq/dq", model.name), &dq, &fd_q, 1e-5);
            assert_close(&format!("{} dddq/dv", model.name), &dv, &fd_v, 1e-5);
            let minv = minverse(&model, &mut ws2, &s.q).unwrap();
            assert_close(&format!("{} dddq/dtau", model.name), &dtau, minv, 1e-14);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Second-order derivatives (algorithms/rnea_second_order.rs)

/// `(nv·nv, nv)` matrix whose column `k` is page `k` of `t` flattened column-major, i.e. row
/// `j·nv + i` holds `t[i, j, k]` — the layout `central_difference` produces for a flattened
/// `DMatrix` output.
fn tensor_pages(t: &Tensor3) -> DMatrix<f64> {
    let [n0, n1, n2] = t.shape();
    DMatrix::from_fn(n0 * n1, n2, |row, k| t[[row % n0, row / n0, k]])
}

/// Same bodies on one root-to-leaf path: each pair is ancestor/descendant.
fn on_one_path(model: &Model, bodies: [usize; 3]) -> bool {
    let comparable = |a: usize, b: usize| model.is_ancestor(a, b) || model.is_ancestor(b, a);
    comparable(bodies[0], bodies[1]) && comparable(bodies[1], bodies[2]) && comparable(bodies[0], bodies[2])
}

fn dof_bodies(model: &Model) -> Vec<usize> {
    (0..model.nbodies()).flat_map(|b| std::iter::repeat_n(b, model.joints[b].nv())).collect()
}

/// Second-order tensors against central differences (h = 1e-6, `central_difference`) of the
/// analytic first-order derivatives (the paper's "Finite-Diff-2" oracle). Error budget,
/// relative to max(1, |H|∞): truncation h²·|∂³τ'| ≈ 1e-12·|∂³τ'| plus round-off
/// ε·|∂τ|∞/h ≈ 2e-10·|∂τ|∞ with |∂τ|∞ ≲ 1e3 here, so ≲ 1e-7 is expected; the observed
/// maximum over all models and tensors is ≈ 5e-9. 1e-6 leaves margin for other seeds, while
/// index, convention or errata bugs give O(0.1–1) (checked by mutation).
#[test]
fn rnea_second_order_matches_differences_of_first_order() {
    for model in models() {
        let nv = model.nv;
        let mut so = model.second_order_workspace();
        let mut ws2 = model.workspace();
        for s in states(&model, 20).iter().take(2) {
            let d2 = rnea_second_order(&model, &mut so, &s.q, &s.v, &s.a, None).unwrap();
            let (hqq, hvv, hqv, dm) = (tensor_pages(d2.d2tau_dq2), tensor_pages(d2.d2tau_dv2), tensor_pages(d2.d2tau_dqdv), tensor_pages(d2.dm_dq));
            let first = |ws: &mut Workspace, q: &[f64], v: &[f64]| {
                let d = rnea_derivatives(&model, ws, q, v, &s.a, None).unwrap();
                (d.dtau_dq.as_slice().to_vec(), d.dtau_dv.as_slice().to_vec())
            };
            let along_q = |e: &[f64]| integrate(&model, &s.q, e).unwrap();
            let along_v = |e: &[f64]| s.v.iter().zip(e).map(|(a, b)| a + b).collect::<Vec<f64>>();
            let fd_qq = central_difference(nv, |e| first(&mut ws2, &along_q(e), &s.v).0);
            let fd_vv = central_difference(nv, |e| first(&mut ws2, &s.q, &along_v(e)).1);
            // ∂/∂q̇_k (∂τ/∂q) and, since the two commute, the transpose of ∂/∂q_j (∂τ/∂q̇)
            let fd_qv = central_difference(nv, |e| first(&mut ws2, &s.q, &along_v(e)).0);
            let fd_vq = central_difference(nv, |e| first(&mut ws2, &along_q(e), &s.v).1);
            let fd_m = central_difference(nv, |e| crba(&model, &mut ws2, &along_q(e)).unwrap().as_slice().to_vec());
            let name = &model.name;
            assert_close(&format!("{name} d2tau/dq2"), &hqq, &fd_qq, 1e-6);
            assert_close(&format!("{name} d2tau/dv2"), &hvv, &fd_vv, 1e-6);
            assert_close(&format!("{name} d2tau/dqdv"), &hqv, &fd_qv, 1e-6);
            // fd_vq[(k·nv + i, j)] = ∂/∂q_j ∂τ_i/∂q̇_k = d2tau_dqdv[i, j, k]
            let swapped = DMatrix::from_fn(nv * nv, nv, |row, j| d2.d2tau_dqdv[[row % nv, j, row / nv]]);
            assert_close(&format!("{name} d2tau/dvdq"), &swapped, &fd_vq, 1e-6);
            assert_close(&format!("{name} dM/dq"), &dm, &fd_m, 1e-6);
        }
    }
}

#[test]
fn rnea_second_order_symmetries_and_structural_zeros() {
    for model in models() {
        let nv = model.nv;
        let body = dof_bodies(&model);
        let mut so = model.second_order_workspace();
        let mut ws = model.workspace();
        for s in states(&model, 21).iter().take(2) {
            let dq = rnea_derivatives(&model, &mut ws, &s.q, &s.v, &s.a, None).unwrap().dtau_dq.clone();
            let d2 = rnea_second_order(&model, &mut so, &s.q, &s.v, &s.a, None).unwrap();
            let scale = |t: &Tensor3| t.as_slice().iter().fold(1.0_f64, |m, x| m.max(x.abs()));
            let (sqq, svv, sm) = (scale(d2.d2tau_dq2), scale(d2.d2tau_dv2), scale(d2.dm_dq));
            for i in 0..nv {
                for j in 0..nv {
                    for k in 0..nv {
                        let (bi, bj, bk) = (body[i], body[j], body[k]);
                        // q̇ derivatives commute; M is symmetric
                        assert!((d2.d2tau_dv2[[i, j, k]] - d2.d2tau_dv2[[i, k, j]]).abs() <= 1e-12 * svv, "{} Hvv sym", model.name);
                        assert!((d2.dm_dq[[i, j, k]] - d2.dm_dq[[j, i, k]]).abs() <= 1e-12 * sm, "{} dM sym", model.name);
                        // q derivatives of different joints commute; within one joint the
                        // difference is the Lie bracket: H[:,j,k] − H[:,k,j] = Σ_c κ_c ∂τ/∂q_c
                        // with S_k × S_j = Σ_c κ_c S_c (local basis of the joint)
                        let expected = if bj == bk && j != k {
                            let joint = &model.joints[bj];
                            let (iv, sj, sk) = (model.idx_v[bj], joint.subspace_column(j - model.idx_v[bj]), joint.subspace_column(k - model.idx_v[bj]));
                            let bracket = sk.cross_motion(&sj).to_vector();
                            let mut residual = bracket;
                            let mut sum = 0.0;
                            for c in 0..joint.nv() {
                                let sc = joint.subspace_column(c).to_vector();
                                let kappa = sc.dot(&bracket);
                                residual -= sc * kappa;
                                sum += kappa * dq[(i, iv + c)];
                            }
                            assert!(residual.norm() < 1e-14, "bracket outside the joint's algebra");
                            sum
                        } else {
                            0.0
                        };
                        let asym = d2.d2tau_dq2[[i, j, k]] - d2.d2tau_dq2[[i, k, j]];
                        assert!((asym - expected).abs() <= 1e-10 * sqq, "{} Hqq [{i},{j},{k}]: {asym} vs {expected}", model.name);
                        // branch-induced sparsity: exact zeros off common paths
                        if !on_one_path(&model, [bi, bj, bk]) {
                            for t in [d2.d2tau_dq2, d2.d2tau_dv2, d2.d2tau_dqdv, d2.dm_dq] {
                                assert_eq!(t[[i, j, k]], 0.0, "{} [{i},{j},{k}] off-path", model.name);
                            }
                        }
                        // rotating the whole chain about a common ancestor leaves M unchanged
                        if model.is_ancestor(bk, bi) && model.is_ancestor(bk, bj) {
                            assert_eq!(d2.dm_dq[[i, j, k]], 0.0, "{} dM [{i},{j},{k}]", model.name);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn rnea_second_order_invariances() {
    // ∂²τ/∂q̇² and ∂M/∂q depend on q only; ∂²τ/∂q∂q̇ vanishes at q̇ = 0.
    for model in models() {
        let nv = model.nv;
        let mut so = model.second_order_workspace();
        let s = &states(&model, 22)[0];
        let zero = vec![0.0; nv];
        let d2 = rnea_second_order(&model, &mut so, &s.q, &s.v, &s.a, None).unwrap();
        let (hvv, dm) = (d2.d2tau_dv2.clone(), d2.dm_dq.clone());
        let d2 = rnea_second_order(&model, &mut so, &s.q, &zero, &zero, None).unwrap();
        assert!(rel_err(d2.d2tau_dv2.as_slice(), hvv.as_slice()) < 1e-12, "{}", model.name);
        assert!(rel_err(d2.dm_dq.as_slice(), dm.as_slice()) < 1e-12, "{}", model.name);
        assert!(d2.d2tau_dqdv.as_slice().iter().all(|x| x.abs() < 1e-12), "{}", model.name);
    }
}

#[test]
fn rnea_second_order_contracted_matches_contraction() {
    for model in models() {
        let nv = model.nv;
        let mut so = model.second_order_workspace();
        let mut ws = model.workspace();
        let mut rng = ChaCha8Rng::seed_from_u64(23);
        for s in states(&model, 23).iter().take(2) {
            let lambda = random_vec(&mut rng, nv);
            let d2 = rnea_second_order(&model, &mut so, &s.q, &s.v, &s.a, None).unwrap();
            let mut expected = DMatrix::zeros(nv, nv);
            let c = rnea_second_order_contracted(&model, &mut ws, &s.q, &s.v, &s.a, &lambda, None).unwrap();
            for (name, full, contracted) in [("qq", d2.d2tau_dq2, c.d2tau_dq2), ("vv", d2.d2tau_dv2, c.d2tau_dv2), ("qv", d2.d2tau_dqdv, c.d2tau_dqdv)] {
                full.contract_first(&lambda, &mut expected);
                assert_close(&format!("{} contracted {name}", model.name), contracted, &expected, 1e-12);
            }
        }
    }
    let model = random_tree(4, 3, &[]);
    let mut ws = model.workspace();
    let q = neutral(&model);
    let v = vec![0.0; model.nv];
    assert!(matches!(rnea_second_order_contracted(&model, &mut ws, &q, &v, &v, &v[1..], None), Err(RbdError::Dimension { arg: "lam", .. })));
}

#[test]
fn second_order_workspace_can_be_reused_across_trees() {
    // The tensors are cleared only when the tree changes: a workspace used for a chain and
    // then for a branched tree with the same nv must give the fresh workspace's result.
    let (chain, tree) = (builders::pendulum_chain(3, false), builders::binary_tree(2));
    assert_eq!(chain.nv, tree.nv);
    let (zero, a) = (vec![0.0; 3], vec![0.3, -0.2, 0.5]);
    let mut reused = chain.second_order_workspace();
    rnea_second_order(&chain, &mut reused, &neutral(&chain), &a, &a, None).unwrap();
    let mut fresh = tree.second_order_workspace();
    let expected = rnea_second_order(&tree, &mut fresh, &neutral(&tree), &a, &zero, None).unwrap().d2tau_dq2.clone();
    let got = rnea_second_order(&tree, &mut reused, &neutral(&tree), &a, &zero, None).unwrap();
    assert_eq!(got.d2tau_dq2, &expected);
    assert_eq!(reused.d2tau_dv2(), fresh.d2tau_dv2());
    assert_eq!(reused.dm_dq(), fresh.dm_dq());
}

// ---------------------------------------------------------------------------------------
// External forces (algorithms/external_forces.rs and the `fext` argument of the algorithms)

fn random_wrenches(rng: &mut ChaCha8Rng, n: usize) -> Vec<vidyn_spatial::Force> {
    (0..n).map(|_| vidyn_spatial::Force::from_vector(&nalgebra::Vector6::from_iterator(random_vec(rng, 6)))).collect()
}

#[test]
fn external_forces_enter_rnea_and_aba_as_joint_torques() {
    for model in models() {
        let mut ws = model.workspace();
        let mut rng = ChaCha8Rng::seed_from_u64(30);
        for s in states(&model, 30).iter().take(2) {
            let fext = random_wrenches(&mut rng, model.nbodies());
            let tau = rnea(&model, &mut ws, &s.q, &s.v, &s.a, None).unwrap().to_vec();
            let tau_ext = rnea(&model, &mut ws, &s.q, &s.v, &s.a, Some(&fext)).unwrap().to_vec();
            let mut jtf = vec![0.0; model.nv];
            external_joint_torques(&model, &mut ws, &s.q, &fext, &mut jtf).unwrap();
            let expected: Vec<f64> = tau.iter().zip(&jtf).map(|(t, e)| t - e).collect();
            assert!(rel_err(&tau_ext, &expected) < 1e-12, "{}", model.name);
            // Σ Jᵢᵀ fᵢ against the body Jacobians: a wrench on body b does virtual work
            // fᵀ(J_b δq) with J_b the local Jacobian of b, whose columns are the body-frame
            // joint axes of b's ancestors (checked through unit velocities and FK)
            let a = aba(&model, &mut ws, &s.q, &s.v, &tau_ext, Some(&fext)).unwrap().to_vec();
            assert!(rel_err(&a, &s.a) < 1e-8, "{}: aba with fext inverts rnea with fext ({})", model.name, rel_err(&a, &s.a));
            let zero = vec![0.0; model.nv];
            for k in 0..model.nv {
                let mut e = zero.clone();
                e[k] = 1.0;
                forward_kinematics(&model, &mut ws, &s.q, &e, &zero).unwrap();
                let power: f64 = (0..model.nbodies()).map(|b| ws.velocities[b].dot(&fext[b])).sum();
                assert!((power - jtf[k]).abs() < 1e-12 * (1.0 + power.abs()), "{} dof {k}", model.name);
            }
        }
    }
    let model = random_tree(4, 3, &[]);
    let mut ws = model.workspace();
    let q = neutral(&model);
    let v = vec![0.0; model.nv];
    let mut fext = vec![vidyn_spatial::Force::zero(); model.nbodies()];
    assert!(matches!(rnea(&model, &mut ws, &q, &v, &v, Some(&fext[1..])), Err(RbdError::Dimension { arg: "fext", .. })));
    fext[1].angular.y = f64::INFINITY;
    assert!(matches!(aba(&model, &mut ws, &q, &v, &v, Some(&fext)), Err(RbdError::NonFinite { arg: "fext", index: 10, .. })));
}

#[test]
fn external_force_derivatives_match_finite_differences() {
    for model in models() {
        let mut ws = model.workspace();
        let mut ws2 = model.workspace();
        let mut rng = ChaCha8Rng::seed_from_u64(31);
        for s in states(&model, 31).iter().take(2) {
            let fext = random_wrenches(&mut rng, model.nbodies());
            let d = rnea_derivatives(&model, &mut ws, &s.q, &s.v, &s.a, Some(&fext)).unwrap();
            let (dq, dv, da) = (d.dtau_dq.clone(), d.dtau_dv.clone(), d.dtau_da.clone());
            let expected = rnea(&model, &mut ws2, &s.q, &s.v, &s.a, Some(&fext)).unwrap().to_vec();
            assert!(rel_err(&ws.tau, &expected) < 1e-12, "{}: tau", model.name);
            let fd_q =
                central_difference(model.nv, |e| rnea(&model, &mut ws2, &integrate(&model, &s.q, e).unwrap(), &s.v, &s.a, Some(&fext)).unwrap().to_vec());
            assert_close(&format!("{} dtau/dq with fext", model.name), &dq, &fd_q, 1e-6);
            // q̇ and q̈ derivatives do not see the wrenches
            let plain = rnea_derivatives(&model, &mut ws2, &s.q, &s.v, &s.a, None).unwrap();
            assert_close(&format!("{} dtau/dv with fext", model.name), &dv, plain.dtau_dv, 1e-12);
            assert_close(&format!("{} dtau/da with fext", model.name), &da, plain.dtau_da, 1e-12);
            let tau = s.a.clone();
            let d = aba_derivatives(&model, &mut ws, &s.q, &s.v, &tau, Some(&fext)).unwrap();
            let (dq, dv) = (d.dddq_dq.clone(), d.dddq_dv.clone());
            let fd_q = central_difference(model.nv, |e| aba(&model, &mut ws2, &integrate(&model, &s.q, e).unwrap(), &s.v, &tau, Some(&fext)).unwrap().to_vec());
            let fd_v = central_difference(model.nv, |e| {
                let v: Vec<f64> = s.v.iter().zip(e).map(|(a, b)| a + b).collect();
                aba(&model, &mut ws2, &s.q, &v, &tau, Some(&fext)).unwrap().to_vec()
            });
            assert_close(&format!("{} dddq/dq with fext", model.name), &dq, &fd_q, 1e-5);
            assert_close(&format!("{} dddq/dv with fext", model.name), &dv, &fd_v, 1e-5);
        }
    }
}

/// Same error budget as `rnea_second_order_matches_differences_of_first_order`.
#[test]
fn external_force_second_order_matches_differences() {
    for model in models() {
        let nv = model.nv;
        let mut so = model.second_order_workspace();
        let mut ws = model.workspace();
        let mut ws2 = model.workspace();
        let mut rng = ChaCha8Rng::seed_from_u64(32);
        for s in states(&model, 32).iter().take(2) {
            let fext = random_wrenches(&mut rng, model.nbodies());
            let d2 = rnea_second_order(&model, &mut so, &s.q, &s.v, &s.a, Some(&fext)).unwrap();
            let hqq = tensor_pages(d2.d2tau_dq2);
            let fd_qq = central_difference(nv, |e| {
                rnea_derivatives(&model, &mut ws2, &integrate(&model, &s.q, e).unwrap(), &s.v, &s.a, Some(&fext)).unwrap().dtau_dq.as_slice().to_vec()
            });
            assert_close(&format!("{} d2tau/dq2 with fext", model.name), &hqq, &fd_qq, 1e-6);
            let (hvv, hqv, dm) = (d2.d2tau_dv2.clone(), d2.d2tau_dqdv.clone(), d2.dm_dq.clone());
            let plain = rnea_second_order(&model, &mut so, &s.q, &s.v, &s.a, None).unwrap();
            assert_eq!((&hvv, &hqv, &dm), (plain.d2tau_dv2, plain.d2tau_dqdv, plain.dm_dq), "{}: only d2tau/dq2 sees fext", model.name);
            let lambda = random_vec(&mut rng, nv);
            let full = rnea_second_order(&model, &mut so, &s.q, &s.v, &s.a, Some(&fext)).unwrap();
            let c = rnea_second_order_contracted(&model, &mut ws, &s.q, &s.v, &s.a, &lambda, Some(&fext)).unwrap();
            let mut expected = DMatrix::zeros(nv, nv);
            for (name, t, got) in [("qq", full.d2tau_dq2, c.d2tau_dq2), ("vv", full.d2tau_dv2, c.d2tau_dv2), ("qv", full.d2tau_dqdv, c.d2tau_dqdv)] {
                t.contract_first(&lambda, &mut expected);
                assert_close(&format!("{} contracted {name} with fext", model.name), got, &expected, 1e-12);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Second-order forward dynamics (algorithms/aba_second_order.rs)

/// FD-SO against central differences (h = 1e-6) of the analytic first-order ABA derivatives
/// (and of M⁻¹ for ∂²q̈/∂τ∂q). Error budget, relative to max(1, |T|∞): the first-order
/// derivatives carry a relative round-off ≈ cond(M)·ε·depth, which the difference quotient
/// divides by h: ≈ 1e3·2e-16·30/1e-6 ≈ 6e-6·|∂q̈| in the worst case here (observed ≤ 1.5e-8);
/// truncation h²·|∂³q̈| is negligible. 1e-5 relative to max(1, |T|, |∂q̈|) keeps a margin
/// over the observed errors while index or formula mistakes are O(1) (checked by mutation).
fn check_aba_second_order(model: &Model, s: &State, tau: &[f64], fext: Option<&[vidyn_spatial::Force]>, so: &mut AbaSecondOrderWorkspace) {
    let nv = model.nv;
    let mut ws2 = model.workspace();
    let d2 = match fext {
        Some(f) => aba_second_order(model, so, &s.q, &s.v, tau, Some(f)),
        None => aba_second_order(model, so, &s.q, &s.v, tau, None),
    }
    .unwrap();
    let (tqq, tvv, tqv, ttq) = (tensor_pages(d2.d2ddq_dq2), tensor_pages(d2.d2ddq_dv2), tensor_pages(d2.d2ddq_dqdv), tensor_pages(d2.d2ddq_dtaudq));
    let mut first = |q: &[f64], v: &[f64]| {
        let d = match fext {
            Some(f) => aba_derivatives(model, &mut ws2, q, v, tau, Some(f)),
            None => aba_derivatives(model, &mut ws2, q, v, tau, None),
        }
        .unwrap();
        (d.dddq_dq.as_slice().to_vec(), d.dddq_dv.as_slice().to_vec(), d.dddq_dtau.as_slice().to_vec())
    };
    let scale = {
        let (a, b, _) = first(&s.q, &s.v);
        a.iter().chain(&b).fold(1.0_f64, |m, x| m.max(x.abs()))
    };
    let along_q = |e: &[f64]| integrate(model, &s.q, e).unwrap();
    let along_v = |e: &[f64]| s.v.iter().zip(e).map(|(a, b)| a + b).collect::<Vec<f64>>();
    let fd_qq = central_difference(nv, |e| first(&along_q(e), &s.v).0);
    let fd_vv = central_difference(nv, |e| first(&s.q, &along_v(e)).1);
    let fd_qv = central_difference(nv, |e| first(&s.q, &along_v(e)).0);
    let fd_tq = central_difference(nv, |e| first(&along_q(e), &s.v).2);
    let name = format!("{}{}", model.name, if fext.is_some() { " with fext" } else { "" });
    for (what, t, fd) in [("d2ddq/dq2", &tqq, &fd_qq), ("d2ddq/dv2", &tvv, &fd_vv), ("d2ddq/dqdv", &tqv, &fd_qv), ("d2ddq/dtaudq", &ttq, &fd_tq)] {
        let err = (t - fd).amax() / t.amax().max(scale);
        assert!(err < 1e-5, "{name} {what}: relative error {err:e}");
    }
    // symmetries: q̇ derivatives commute, M⁻¹ is symmetric
    let (tv, tt) = (d2.d2ddq_dv2, d2.d2ddq_dtaudq);
    let sv = tv.as_slice().iter().fold(1.0_f64, |m, x| m.max(x.abs()));
    let st = tt.as_slice().iter().fold(1.0_f64, |m, x| m.max(x.abs()));
    for i in 0..nv {
        for j in 0..nv {
            for k in 0..nv {
                assert!((tv[[i, j, k]] - tv[[i, k, j]]).abs() <= 1e-10 * sv, "{name} d2ddq/dv2 symmetric");
                assert!((tt[[i, j, k]] - tt[[j, i, k]]).abs() <= 1e-10 * st, "{name} d2ddq/dtaudq symmetric");
            }
        }
    }
}

#[test]
fn aba_second_order_matches_differences_of_first_order() {
    for model in models() {
        let mut so = model.aba_second_order_workspace();
        let mut rng = ChaCha8Rng::seed_from_u64(33);
        for s in states(&model, 33).iter().take(1) {
            let tau = random_vec(&mut rng, model.nv);
            check_aba_second_order(&model, s, &tau, None, &mut so);
            let fext = random_wrenches(&mut rng, model.nbodies());
            check_aba_second_order(&model, s, &tau, Some(&fext), &mut so);
        }
    }
}

#[test]
fn aba_second_order_of_a_model_without_dofs_is_empty() {
    let model = urdf::from_urdf_str(r#"<?xml version="1.0"?><robot name="r"><link name="base"/></robot>"#, urdf::RootJoint::Fixed).unwrap();
    assert_eq!(model.nv, 0);
    let mut so = model.aba_second_order_workspace();
    let q = vec![0.0; model.nq];
    let d2 = aba_second_order(&model, &mut so, &q, &[], &[], None).unwrap();
    for t in [d2.d2ddq_dq2, d2.d2ddq_dv2, d2.d2ddq_dqdv, d2.d2ddq_dtaudq] {
        assert_eq!(t.shape(), [0; 3]);
    }
}

#[test]
fn aba_second_order_is_the_implicit_function_of_rnea_second_order() {
    // M · ∂²q̈/∂q̇² = −∂²τ/∂q̇² at q̈ (47), and ∂²q̈/∂τ∂q = −M⁻¹ (∂M/∂q) M⁻¹ (44), against
    // the inverse-dynamics tensors left in the workspace.
    for model in models() {
        let nv = model.nv;
        let mut so = model.aba_second_order_workspace();
        let mut ws = model.workspace();
        for s in states(&model, 34).iter().take(1) {
            let d2 = aba_second_order(&model, &mut so, &s.q, &s.v, &s.a, None).unwrap();
            let (tvv, ttq) = (d2.d2ddq_dv2.clone(), d2.d2ddq_dtaudq.clone());
            let m = crba(&model, &mut ws, &s.q).unwrap().clone();
            let minv = minverse(&model, &mut ws, &s.q).unwrap().clone();
            let (hvv, dm) = (so.inverse.d2tau_dv2(), so.inverse.dm_dq());
            let scale = hvv.as_slice().iter().fold(1.0_f64, |m, x| m.max(x.abs()));
            for j in 0..nv {
                for k in 0..nv {
                    let col = DVector::from_fn(nv, |i, _| tvv[[i, j, k]]);
                    let h = DVector::from_fn(nv, |i, _| hvv[[i, j, k]]);
                    assert!((&m * col + h).amax() < 1e-9 * scale, "{} (47)", model.name);
                }
                let dmk = DMatrix::from_fn(nv, nv, |a, b| dm[[a, b, j]]);
                let expected = -(&minv * dmk * &minv);
                let got = DMatrix::from_fn(nv, nv, |a, b| ttq[[a, b, j]]);
                assert!((&got - &expected).amax() < 1e-9 * expected.amax().max(1.0), "{} (44)", model.name);
            }
        }
    }
}

#[test]
fn aba_second_order_contracted_matches_contraction() {
    for model in models() {
        let nv = model.nv;
        let mut so = model.aba_second_order_workspace();
        let mut ws = model.workspace();
        let mut rng = ChaCha8Rng::seed_from_u64(35);
        for s in states(&model, 35).iter().take(2) {
            let lambda = random_vec(&mut rng, nv);
            let tau = random_vec(&mut rng, nv);
            let fext = random_wrenches(&mut rng, model.nbodies());
            for with_fext in [false, true] {
                let (full, c) = if with_fext {
                    (
                        aba_second_order(&model, &mut so, &s.q, &s.v, &tau, Some(&fext)).unwrap(),
                        aba_second_order_contracted(&model, &mut ws, &s.q, &s.v, &tau, &lambda, Some(&fext)).unwrap(),
                    )
                } else {
                    (
                        aba_second_order(&model, &mut so, &s.q, &s.v, &tau, None).unwrap(),
                        aba_second_order_contracted(&model, &mut ws, &s.q, &s.v, &tau, &lambda, None).unwrap(),
                    )
                };
                let mut expected = DMatrix::zeros(nv, nv);
                for (name, t, got) in [
                    ("qq", full.d2ddq_dq2, c.d2ddq_dq2),
                    ("vv", full.d2ddq_dv2, c.d2ddq_dv2),
                    ("qv", full.d2ddq_dqdv, c.d2ddq_dqdv),
                    ("tq", full.d2ddq_dtaudq, c.d2ddq_dtaudq),
                ] {
                    t.contract_first(&lambda, &mut expected);
                    // two routes through M⁻¹ (LᵀDL solve vs the ABA-based M⁻¹): cond(M)·ε
                    assert_close(&format!("{} contracted FD-SO {name} (fext: {with_fext})", model.name), got, &expected, 1e-9);
                }
            }
        }
    }
    let model = random_tree(4, 3, &[]);
    let mut ws = model.workspace();
    let q = neutral(&model);
    let v = vec![0.0; model.nv];
    assert!(matches!(aba_second_order_contracted(&model, &mut ws, &q, &v, &v, &v[1..], None), Err(RbdError::Dimension { arg: "lam", .. })));
}

/// `Joint::placed_transform` is the composition `placement · M(q)` it replaces (bit for bit
/// for the 1-dof shortcuts, whose skipped products are by the identity and by zero).
#[test]
fn placed_transform_is_the_composition() {
    for model in models() {
        let mut rng = ChaCha8Rng::seed_from_u64(23);
        let q = random_configuration(&model, &mut rng);
        let mut iq = 0;
        for (joint, placement) in model.joints.iter().zip(&model.joint_placements) {
            let qi = &q[iq..iq + joint.nq()];
            let (placed, composed) = (joint.placed_transform(placement, qi), *placement * joint.transform(qi));
            assert_eq!((placed.rotation, placed.translation), (composed.rotation, composed.translation), "{} {}", model.name, joint.kind_name());
            iq += joint.nq();
        }
    }
}

/// `Joint::placed_subspace_column` is `Ad_m S_k` (the same values: the skipped products are by
/// zero).
#[test]
fn placed_subspace_column_is_the_adjoint_action() {
    for model in models() {
        let mut rng = ChaCha8Rng::seed_from_u64(29);
        let q = random_configuration(&model, &mut rng);
        let mut ws = model.workspace();
        placements(&model, &mut ws, &q).unwrap();
        for (joint, m) in model.joints.iter().zip(&ws.placements) {
            for k in 0..joint.nv() {
                let (placed, acted) = (joint.placed_subspace_column(k, m), m.act_motion(&joint.subspace_column(k)));
                assert_eq!(placed.to_vector(), acted.to_vector(), "{} {}", model.name, joint.kind_name());
            }
        }
    }
}
