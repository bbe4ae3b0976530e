//! The reduced algorithms against dense products with `G`, central differences and their
//! identities, on random trees of every joint kind with mimics of multipliers ≠ 1 and
//! offsets ≠ 0 (leaders before and after their followers).

use super::*;
use crate::builders::random_tree;
use crate::{random_configuration, Joint, Workspace};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random tree with up to three mimics among its one-coordinate joints.
fn mimic_tree(seed: u64) -> Model {
    let model = random_tree(10, seed, &Joint::examples());
    let single: Vec<usize> = (0..model.nbodies()).filter(|&b| model.joints[b].nv() == 1).collect();
    let mut mimics = Vec::new();
    let (multipliers, offsets) = ([-0.7, 1.3, 0.5], [0.3, -0.2, 0.0]);
    // pairs (follower, leader): the last leads the first (leader after follower), then two more
    for (k, pair) in single.chunks_exact(2).take(3).enumerate() {
        let (joint, leader) = if k == 0 { (pair[0], pair[1]) } else { (pair[1], pair[0]) };
        mimics.push(Mimic { joint, leader, multiplier: multipliers[k], offset: offsets[k] });
    }
    model.with_mimics(mimics).expect("valid mimics")
}

fn random_vector(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// A random reduced state `(q, v, w)` of `model`.
fn state(model: &Model, rng: &mut ChaCha8Rng) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let c = model.coupling();
    let mut q = vec![0.0; c.nq()];
    c.restrict_configuration(&random_configuration(model, rng), &mut q);
    (q, random_vector(rng, c.nv()), random_vector(rng, c.nv()))
}

fn max_diff(a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    (a - b).amax()
}

#[test]
fn the_coupling_is_the_dense_map() {
    for seed in 0..6 {
        let model = mimic_tree(seed);
        let c = model.coupling();
        assert_eq!(c.nv(), model.nv - model.mimics.len());
        assert_eq!(c.nq(), model.nq - model.mimics.len());
        let g = c.matrix();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (q, v, f) = state(&model, &mut rng);
        // lifting then restricting is the identity; the lifted q satisfies the coupling
        let mut q_e = vec![0.0; model.nq];
        c.lift_configuration(&q, &mut q_e);
        let mut back = vec![0.0; c.nq()];
        c.restrict_configuration(&q_e, &mut back);
        assert_eq!(back, q);
        for m in &model.mimics {
            assert_eq!(q_e[model.idx_q[m.joint]], m.multiplier * q_e[model.idx_q[m.leader]] + m.offset);
        }
        let mut v_e = vec![0.0; model.nv];
        c.lift_tangent(&v, &mut v_e);
        assert_eq!(nalgebra::DVector::from_vec(v_e), &g * nalgebra::DVector::from_vec(v.clone()));
        // Gᵀ (lift_force f) = f
        let mut f_e = vec![0.0; model.nv];
        c.lift_force(&f, &mut f_e);
        let mut f_back = vec![0.0; c.nv()];
        c.reduce_force(&f_e, &mut f_back);
        assert!(f_back.iter().zip(&f).all(|(a, b)| (a - b).abs() < 1e-15));
        // matrices and tensors against dense products with G
        let a_e = DMatrix::from_fn(model.nv, model.nv, |_, _| rng.random_range(-1.0..1.0));
        let mut a = DMatrix::zeros(c.nv(), c.nv());
        c.reduce_matrix(&a_e, &mut a);
        assert!(max_diff(&a, &(g.transpose() * &a_e * &g)) < 1e-14);
        let mut cols = DMatrix::zeros(model.nv, c.nv());
        c.reduce_columns(&a_e, &mut cols);
        assert!(max_diff(&cols, &(&a_e * &g)) < 1e-14);
        let t_e = Tensor3::from_vec([model.nv; 3], random_vector(&mut rng, model.nv.pow(3))).expect("shape");
        let mut t = Tensor3::zeros([c.nv(); 3]);
        c.reduce_tensor(&t_e, &mut t);
        for k in 0..c.nv() {
            // page k of the reduced tensor = Gᵀ (Σ_e G_ek page_e) G
            let page = (0..model.nv).fold(DMatrix::zeros(model.nv, model.nv), |acc, e| acc + t_e.page(e) * g[(e, k)]);
            assert!(max_diff(&t.page(k), &(g.transpose() * page * &g)) < 1e-13, "seed {seed} page {k}");
        }
    }
}

/// `M = Gᵀ M_e G` is symmetric positive definite, `M · aba = τ − b`, `M · M⁻¹ = 1`, and the
/// reduced RNEA is linear in `a` with slope `M`.
#[test]
fn forward_dynamics_inverts_inverse_dynamics() {
    for seed in 0..6 {
        let model = mimic_tree(seed);
        let (mut ws, mut mw) = (Workspace::new(&model), MimicWorkspace::new(&model));
        let mut rng = ChaCha8Rng::seed_from_u64(10 + seed);
        let (q, v, tau) = state(&model, &mut rng);
        let m = crba(&model, &mut ws, &mut mw, &q).unwrap().clone();
        assert!(max_diff(&m, &m.transpose()) <= 1e-14 * m.amax());
        assert!(m.clone().cholesky().is_some());
        let ddq = aba(&model, &mut ws, &mut mw, &q, &v, &tau, None).unwrap().to_vec();
        let back = rnea(&model, &mut ws, &mut mw, &q, &v, &ddq, None).unwrap().to_vec();
        let scale = m.amax().max(1.0) * ddq.iter().fold(1.0_f64, |x, y| x.max(y.abs()));
        assert!(back.iter().zip(&tau).all(|(a, b)| (a - b).abs() < 1e-11 * scale), "seed {seed}");
        let minv = minverse(&model, &mut ws, &mut mw, &q).unwrap().clone();
        assert!(max_diff(&(&m * minv), &DMatrix::identity(m.nrows(), m.nrows())) < 1e-9, "seed {seed}");
    }
}

/// Central differences of a reduced function of `x` along each reduced coordinate (the
/// coordinates of mimic models' reduced `q` are all plain numbers or Lie-group blocks whose
/// extended directions `G e_k` are moved by `integrate`).
fn central_difference(n: usize, h: f64, mut f: impl FnMut(usize, f64) -> Vec<f64>) -> DMatrix<f64> {
    let mut d = DMatrix::zeros(f(0, 0.0).len(), n);
    for k in 0..n {
        let (p, m) = (f(k, h), f(k, -h));
        for (r, (a, b)) in p.iter().zip(&m).enumerate() {
            d[(r, k)] = (a - b) / (2.0 * h);
        }
    }
    d
}

/// The reduced configuration `q ⊕ h e_k`: the extended `integrate(G q + o, h G e_k)`, restricted.
fn moved(model: &Model, q: &[f64], k: usize, h: f64) -> Vec<f64> {
    let c = model.coupling();
    let (mut q_e, mut dv, mut e) = (vec![0.0; model.nq], vec![0.0; model.nv], vec![0.0; c.nv()]);
    c.lift_configuration(q, &mut q_e);
    e[k] = h;
    c.lift_tangent(&e, &mut dv);
    let q1 = crate::integrate(model, &q_e, &dv).unwrap();
    let mut out = vec![0.0; c.nq()];
    c.restrict_configuration(&q1, &mut out);
    out
}

#[test]
fn first_derivatives_match_central_differences() {
    const H: f64 = 1e-6;
    for seed in 0..4 {
        let model = mimic_tree(seed);
        let (mut ws, mut mw) = (Workspace::new(&model), MimicWorkspace::new(&model));
        let mut rng = ChaCha8Rng::seed_from_u64(20 + seed);
        let (q, v, tau) = state(&model, &mut rng);
        let n = mw.coupling.nv();
        let d = aba_derivatives(&model, &mut ws, &mut mw, &q, &v, &tau, None).unwrap();
        let (dq, dv, minv) = (d.d_dq.clone(), d.d_dv.clone(), d.d_dx.clone());
        let mut aba_at = |q: &[f64], v: &[f64], t: &[f64]| aba(&model, &mut ws, &mut mw, q, v, t, None).unwrap().to_vec();
        let fd_q = central_difference(n, H, |k, h| aba_at(&moved(&model, &q, k, h), &v, &tau));
        let fd_v = central_difference(n, H, |k, h| {
            let mut v1 = v.clone();
            v1[k] += h;
            aba_at(&q, &v1, &tau)
        });
        let fd_t = central_difference(n, H, |k, h| {
            let mut t1 = tau.clone();
            t1[k] += h;
            aba_at(&q, &v, &t1)
        });
        for (name, exact, fd) in [("q", &dq, &fd_q), ("v", &dv, &fd_v), ("tau", &minv, &fd_t)] {
            let err = max_diff(exact, fd) / exact.amax().max(1.0);
            assert!(err < 1e-6, "seed {seed}: d aba / d {name} off by {err:e}");
        }
    }
}

#[test]
fn second_order_tensors_match_differences_of_the_first_order() {
    const H: f64 = 1e-6;
    for seed in 0..3 {
        let model = mimic_tree(seed);
        let (mut ws, mut mw, mut so) = (Workspace::new(&model), MimicWorkspace::new(&model), MimicSecondOrder::new(&model));
        let mut rng = ChaCha8Rng::seed_from_u64(30 + seed);
        let (q, v, tau) = state(&model, &mut rng);
        let n = mw.coupling.nv();
        let [fqq, fvv, fqv, ftq] = aba_second_order(&model, &mut ws, &mut mw, &mut so, &q, &v, &tau, None).unwrap().clone();
        let inverse = rnea_second_order(&model, &mut mw, &mut so, &q, &v, &tau, None).unwrap().clone();
        // page k of a tensor = the difference of the first order along coordinate k
        let mut first = |q: &[f64], v: &[f64]| {
            let d = aba_derivatives(&model, &mut ws, &mut mw, q, v, &tau, None).unwrap();
            [d.d_dq.clone(), d.d_dv.clone(), d.d_dx.clone()]
        };
        for k in 0..n {
            let (qp, qm) = (moved(&model, &q, k, H), moved(&model, &q, k, -H));
            let (mut vp, mut vm) = (v.clone(), v.clone());
            vp[k] += H;
            vm[k] -= H;
            let (aq, bq) = (first(&qp, &v), first(&qm, &v));
            let (av, bv) = (first(&q, &vp), first(&q, &vm));
            for (name, t, fd) in [
                ("dq2", &fqq, (&aq[0] - &bq[0]) / (2.0 * H)),
                ("dv2", &fvv, (&av[1] - &bv[1]) / (2.0 * H)),
                ("dqdv", &fqv, (&av[0] - &bv[0]) / (2.0 * H)),
                ("dtaudq", &ftq, (&aq[2] - &bq[2]) / (2.0 * H)),
            ] {
                let err = max_diff(&t.page(k), &fd) / fd.amax().max(1.0);
                assert!(err < 1e-5, "seed {seed}: {name} page {k} off by {err:e}");
            }
        }
        // dM/dq of the inverse tensors, against differences of the reduced mass matrix
        for k in 0..n {
            let mp = crba(&model, &mut ws, &mut mw, &moved(&model, &q, k, H)).unwrap().clone();
            let mm = crba(&model, &mut ws, &mut mw, &moved(&model, &q, k, -H)).unwrap().clone();
            let fd = (mp - mm) / (2.0 * H);
            assert!(max_diff(&inverse[3].page(k), &fd) / fd.amax().max(1.0) < 1e-6, "seed {seed}: dM/dq page {k}");
        }
        // the λ-contracted forms are contractions of the tensors
        let lambda = random_vector(&mut rng, n);
        let contracted = rnea_second_order_contracted(&model, &mut ws, &mut mw, &q, &v, &tau, &lambda, None).unwrap().clone();
        for (t, c) in inverse.iter().zip(&contracted) {
            let mut full = DMatrix::zeros(n, n);
            t.contract_first(&lambda, &mut full);
            assert!(max_diff(&full, c) < 1e-10 * full.amax().max(1.0));
        }
    }
}

#[test]
fn models_with_mimics_round_trip_through_their_state() {
    let model = mimic_tree(3);
    let state = model.to_state();
    assert_eq!(u16::from_le_bytes([state[12], state[13]]), 2, "version 2 with mimics");
    let back = Model::from_state(&state).expect("reads");
    assert_eq!(back, model);
    assert_ne!(back.content_hash(), Model { mimics: Vec::new(), ..model.clone() }.content_hash());
    // a model without mimics keeps its version-1 state
    let plain = random_tree(4, 1, &Joint::examples()).to_state();
    assert_eq!(u16::from_le_bytes([plain[12], plain[13]]), 1);
}

#[test]
fn bad_mimics_are_refused_by_name() {
    let model = mimic_tree(0);
    let single: Vec<usize> = (0..model.nbodies()).filter(|&b| model.joints[b].nv() == 1).collect();
    let composite = (0..model.nbodies()).find(|&b| model.joints[b].nv() > 1).expect("a composite joint");
    let plain = Model { mimics: Vec::new(), ..model.clone() };
    let m = |joint, leader| Mimic { joint, leader, multiplier: 1.0, offset: 0.0 };
    let (a, b, c) = (single[0], single[1], single[2]);
    let cases = [
        (vec![m(a, a)], "itself"),
        (vec![m(a, composite)], "revolute or prismatic"),
        (vec![m(a, b), m(a, c)], "two leaders"),
        (vec![m(a, b), m(b, c)], "chains"),
        (vec![Mimic { multiplier: f64::NAN, ..m(a, b) }], "finite"),
    ];
    for (mimics, needle) in cases {
        let e = plain.clone().with_mimics(mimics).unwrap_err().to_string();
        assert!(e.contains(needle) && e.contains(&plain.joint_names[a]), "{e}");
    }
    assert!(plain.clone().with_mimics(vec![m(a, 99)]).is_err());
    assert!(crate::lock_joints(&model, &[a], &crate::neutral(&model)).unwrap_err().to_string().contains("lock_joints does not support mimic"));
    assert!(model.to_single_dof().unwrap_err().to_string().contains("to_single_dof does not support mimic"));
}
