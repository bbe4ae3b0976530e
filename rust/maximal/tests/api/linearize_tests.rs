//! The linearisation of the step without contacts against central differences of the solved
//! step (loops, chains, a mixed tree, springs and dampers, minimal coordinates), and the
//! trajectory linearisation against the step's, bit for bit across threads and integrators.

use crate::common::integrator::initial_state;
use nalgebra::{DMatrix, DVector, Matrix3, UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_batch::Control;
use vidyn_maximal::models::{cylinder_chain, four_bar};
use vidyn_maximal::*;
use vidyn_rbd::Model;
use vidyn_spatial::Se3;

/// A tree with prismatic, spherical and skew revolute joints (cylinder bodies).
fn mixed_tree() -> Model {
    use vidyn_rbd::{Joint, ModelBuilder};
    let mut b = ModelBuilder::new("mixed");
    let c = vidyn_maximal::models::cylinder(1.3, 0.8);
    let at = |x: f64, y: f64, z: f64, r: [f64; 3]| Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(Vector3::from(r)), Vector3::new(x, y, z));
    let slider = b.add_body(None, "slider", Joint::Prismatic { axis: Vector3::new(1.0, 0.2, 0.0).normalize() }, at(0.1, 0.0, 0.2, [0.1, 0.2, 0.0]), c).unwrap();
    let ball = b.add_body(Some(slider), "ball", Joint::Spherical, at(0.0, 0.1, -0.8, [0.0, 0.3, 0.1]), vidyn_maximal::models::cylinder(0.7, 1.0)).unwrap();
    b.add_body(Some(ball), "hinge", Joint::Revolute { axis: Vector3::new(0.3, -0.5, 0.8).normalize() }, at(0.05, 0.0, -1.0, [0.2, 0.0, -0.1]), c).unwrap();
    b.add_body(Some(slider), "side", Joint::Revolute { axis: Vector3::y() }, at(0.3, 0.0, 0.0, [0.0, 0.0, 0.0]), c).unwrap();
    // a prismatic joint between two bodies: its force has lever arms on both
    b.add_body(Some(ball), "telescope", Joint::Prismatic { axis: Vector3::new(0.2, 0.3, -1.0).normalize() }, at(0.1, -0.1, -0.6, [0.3, 0.1, 0.0]), c).unwrap();
    b.build().unwrap()
}

/// Central differences of the solved step along the 12 tangent directions of every body and
/// along the controls, against `linearize`.
fn check_linearization(mech: Mechanism, q0: &[f64], v0: &[f64], u: &[f64]) {
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.02).unwrap().with_newton(1e-14, 50).unwrap();
    let mech = vi.mechanism().clone();
    let (nb, nu) = (mech.nbodies(), mech.nu);
    // a moving state one step into the motion
    let mut state = initial_state(&vi, q0, v0);
    let mut ws = vi.workspace();
    let mut next = state.clone();
    vi.step(&mut ws, 0, &state, u, None, &mut next).unwrap();
    state.clone_from(&next);
    let (mut a, mut b) = (DMatrix::zeros(12 * nb, 12 * nb), DMatrix::zeros(12 * nb, nu));
    vi.linearize(&mut ws, 1, &state, u, &mut next, &mut a, &mut b).unwrap();
    let base = next.clone();
    let solve = |s: &[BodyState], u: &[f64]| {
        let mut ws = vi.workspace();
        let mut out = s.to_vec();
        vi.step(&mut ws, 1, s, u, None, &mut out).unwrap();
        out
    };
    let diff = |plus: &[BodyState], minus: &[BodyState], h: f64| -> DVector<f64> {
        let mut d = DVector::zeros(12 * nb);
        for i in 0..nb {
            let dx = (plus[i].pose.x - minus[i].pose.x) / (2.0 * h);
            let dth = (body::rotation_difference(&base[i].pose.q, &plus[i].pose.q) - body::rotation_difference(&base[i].pose.q, &minus[i].pose.q)) / (2.0 * h);
            let dv = (plus[i].v - minus[i].v) / (2.0 * h);
            let dw = (plus[i].w - minus[i].w) / (2.0 * h);
            for r in 0..3 {
                d[12 * i + r] = dx[r];
                d[12 * i + 3 + r] = dth[r];
                d[12 * i + 6 + r] = dv[r];
                d[12 * i + 9 + r] = dw[r];
            }
        }
        d
    };
    // h = 1e-5: truncation ~h²·|∂³x⁺| ≲ 1e-8 (third derivatives carry 1/Δt² = 2500), solver
    // noise ~1e-14/h = 1e-9; tolerance 1e-6 relative to max(1, max|column|)
    let h = 1e-5;
    let perturb = |c: usize, sign: f64| -> Vec<BodyState> {
        let mut s = state.clone();
        let (i, k) = (c / 12, c % 12);
        let e = |j: usize| Vector3::ith(j, sign * h);
        match k {
            0..=2 => s[i].pose = s[i].pose.retract(&e(k), &Vector3::zeros()),
            3..=5 => s[i].pose = s[i].pose.retract(&Vector3::zeros(), &e(k - 3)),
            6..=8 => s[i].v += e(k - 6),
            _ => s[i].w += e(k - 9),
        }
        s
    };
    for c in 0..12 * nb {
        let fd = diff(&solve(&perturb(c, 1.0), u), &solve(&perturb(c, -1.0), u), h);
        let err = (&fd - a.column(c)).amax();
        assert!(
            err < 1e-6 * fd.amax().max(1.0),
            "A column {c} (body {}, coordinate {}): error {err:e}\nfd {}\nA  {}",
            c / 12,
            c % 12,
            fd.transpose(),
            a.column(c).transpose()
        );
    }
    for c in 0..nu {
        let (mut up, mut um) = (u.to_vec(), u.to_vec());
        up[c] += h;
        um[c] -= h;
        let fd = diff(&solve(&state, &up), &solve(&state, &um), h);
        let err = (&fd - b.column(c)).amax();
        assert!(err < 1e-6 * fd.amax().max(1.0), "B column {c}: error {err:e}\nfd {}\nB  {}", fd.transpose(), b.column(c).transpose());
    }
}

#[test]
fn linearization_matches_central_differences_of_the_solved_step() {
    let (mech, q0) = four_bar();
    check_linearization(mech, &q0, &[0.4, -0.3, 0.5], &[0.4, -0.3, 0.2]);
    let chain = Arc::new(cylinder_chain(3, false));
    check_linearization(Mechanism::from_model(chain).unwrap(), &[0.3, -0.5, 0.8], &[1.0, 0.5, -0.7], &[0.2, 0.6, -0.4]);
    let tree = Arc::new(mixed_tree());
    let mut q = vidyn_rbd::neutral(&tree);
    q[0] = 0.2;
    let (iq_ball, iq_hinge) = (tree.idx_q[tree.joint_index("ball").unwrap()], tree.idx_q[tree.joint_index("hinge").unwrap()]);
    let r = UnitQuaternion::from_scaled_axis(Vector3::new(0.3, -0.2, 0.4));
    q[iq_ball..iq_ball + 4].copy_from_slice(r.coords.as_slice());
    q[iq_hinge] = 0.7;
    let v: Vec<f64> = (0..tree.nv).map(|k| 0.3 * (k as f64 + 1.0).sin()).collect();
    let u: Vec<f64> = (0..tree.nv).map(|k| 0.5 * (k as f64 + 2.0).cos()).collect();
    check_linearization(Mechanism::from_model(tree).unwrap(), &q, &v, &u);
}

#[test]
fn linearization_with_springs_and_dampers_matches_central_differences() {
    let (mut mech, q0) = four_bar();
    mech.stiffness = vec![1.5, 0.0, 0.7];
    mech.damping = vec![0.3, 0.2, 0.0];
    mech.rest = vec![0.2, -0.1, 0.0];
    check_linearization(mech, &q0, &[0.4, -0.3, 0.5], &[0.4, -0.3, 0.2]);
    let tree = Arc::new(mixed_tree());
    let mut mech = Mechanism::from_model(tree.clone()).unwrap();
    mech.stiffness = (0..tree.nv).map(|k| 0.5 + 0.1 * k as f64).collect();
    mech.damping = (0..tree.nv).map(|k| 0.2 * (k % 3) as f64).collect();
    let mut q = vidyn_rbd::neutral(&tree);
    q[0] = 0.2;
    let v: Vec<f64> = (0..tree.nv).map(|k| 0.3 * (k as f64 + 1.0).sin()).collect();
    let u: Vec<f64> = (0..tree.nv).map(|k| 0.5 * (k as f64 + 2.0).cos()).collect();
    check_linearization(mech, &q, &v, &u);
}

#[test]
fn trajectory_linearisation_matches_step_linearisation() {
    let (mech, q0) = four_bar();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let u: Vec<f64> = (0..20 * 3).map(|k| 0.3 * (k as f64).sin()).collect();
    let traj = rollout_minimal(&vi, &Control::new(), &q0, &[0.2, 0.0, -0.1], &u, 20).unwrap();
    let (mut rows_a, mut rows_b) = (vec![0.0; 20 * 36 * 36], vec![0.0; 20 * 36 * 3]);
    let defect = linearize_trajectory(&vi, &Control::new(), &traj, LinearizationOut { a: &mut rows_a, b: &mut rows_b }).unwrap();
    assert!(defect < 1e-12, "re-solved knots differ by {defect:e}");
    let mut ws = vi.workspace();
    let mut next = traj.knot(7).to_vec();
    let (mut a, mut b) = (DMatrix::zeros(36, 36), DMatrix::zeros(36, 3));
    vi.linearize(&mut ws, 7, traj.knot(7), &u[21..24], &mut next, &mut a, &mut b).unwrap();
    // step 7's rows, bit for bit (every step starts Newton from zero multipliers, as a
    // fresh workspace does), whatever the thread count
    assert_eq!(DMatrix::from_row_slice(36, 36, &rows_a[7 * 36 * 36..8 * 36 * 36]), a);
    assert_eq!(DMatrix::from_row_slice(36, 3, &rows_b[7 * 36 * 3..8 * 36 * 3]), b);
    let one = vidyn_batch::new_pool(1).unwrap();
    let (mut one_a, mut one_b) = (vec![0.0; 20 * 36 * 36], vec![0.0; 20 * 36 * 3]);
    vidyn_batch::with_pool(&one, || linearize_trajectory(&vi, &Control::new(), &traj, LinearizationOut { a: &mut one_a, b: &mut one_b })).unwrap();
    assert!(one_a == rows_a && one_b == rows_b);
    // a cancelled control stops it
    let cancelled = Control::new();
    cancelled.cancel();
    let r = linearize_trajectory(&vi, &cancelled, &traj, LinearizationOut { a: &mut rows_a, b: &mut rows_b });
    assert!(matches!(r, Err(MaximalError::Cancelled { step: 0 })), "{r:?}");
}

#[test]
fn integrators_of_the_same_mechanism_linearise_bit_for_bit_alike() {
    // Each integrator has its own graph solver, whose block lookup is a hash map with its own
    // random iteration order: no sum may follow that order (an unpickled integrator must
    // compute what the original did). A limit makes the linearisation refine its solves
    // against the unfactorised matrix (`GraphSolver::mul_vec`).
    let (mut mech, q0) = four_bar();
    mech.add_joint_limit(0, -2.0, 2.0).unwrap();
    let mech = Arc::new(mech);
    let u: Vec<f64> = (0..10 * 3).map(|k| 0.2 * (k as f64).cos()).collect();
    let rows = |vi: &MaximalIntegrator| {
        let traj = rollout_minimal(vi, &Control::new(), &q0, &[0.1, -0.2, 0.0], &u, 10).unwrap();
        let (mut a, mut b) = (vec![0.0; 10 * 36 * 36], vec![0.0; 10 * 36 * 3]);
        linearize_trajectory(vi, &Control::new(), &traj, LinearizationOut { a: &mut a, b: &mut b }).unwrap();
        (traj.q, a, b)
    };
    let first = rows(&MaximalIntegrator::new(Arc::clone(&mech), 0.01).unwrap());
    for _ in 0..4 {
        let other = rows(&MaximalIntegrator::new(Arc::new((*mech).clone()), 0.01).unwrap());
        let bits = |x: &[f64]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert!(bits(&other.0) == bits(&first.0) && bits(&other.1) == bits(&first.1) && bits(&other.2) == bits(&first.2));
    }
}

#[test]
fn minimal_coordinate_linearisation_matches_central_differences() {
    // a 3-D chain and a tree with a prismatic joint between two bodies
    let mut trees = vec![Arc::new(cylinder_chain(3, false))];
    {
        use vidyn_rbd::{Joint, ModelBuilder};
        let mut b = ModelBuilder::new("rp");
        let c = vidyn_maximal::models::cylinder(1.1, 0.9);
        let down = Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.1, -0.9));
        let r0 = b.add_body(None, "r0", Joint::Revolute { axis: Vector3::new(0.2, 1.0, 0.1).normalize() }, Se3::identity(), c).unwrap();
        let p1 = b.add_body(Some(r0), "p1", Joint::Prismatic { axis: Vector3::new(0.3, -0.2, 1.0).normalize() }, down, c).unwrap();
        b.add_body(Some(p1), "r2", Joint::Revolute { axis: Vector3::x() }, down, c).unwrap();
        b.add_body(Some(r0), "r3", Joint::Revolute { axis: Vector3::z() }, Se3::new(Matrix3::identity(), Vector3::new(0.4, 0.0, -0.2)), c).unwrap();
        trees.push(Arc::new(b.build().unwrap()));
    }
    for model in trees {
        let n = model.nv;
        let vi = MaximalIntegrator::new(Arc::new(Mechanism::from_model(model.clone()).unwrap()), 0.02).unwrap().with_newton(1e-14, 50).unwrap();
        let q: Vec<f64> = (0..n).map(|k| 0.4 * (k as f64 + 1.0).sin()).collect();
        let v: Vec<f64> = (0..n).map(|k| 0.7 * (k as f64 + 0.5).cos()).collect();
        let u: Vec<f64> = (0..n).map(|k| 0.3 * (k as f64 - 1.0)).collect();
        let mut ws = vi.workspace();
        let (mut qn, mut vn) = (vec![0.0; n], vec![0.0; n]);
        let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
        vi.linearize_minimal(&mut ws, StepInput::new(0, &q, &v, &u), &mut qn, &mut vn, &mut a, &mut b).unwrap();
        let step = |q: &[f64], v: &[f64], u: &[f64]| -> DVector<f64> {
            let (mut qn, mut vn) = (vec![0.0; n], vec![0.0; n]);
            let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
            vi.linearize_minimal(&mut vi.workspace(), StepInput::new(0, q, v, u), &mut qn, &mut vn, &mut a, &mut b).unwrap();
            DVector::from_iterator(2 * n, qn.into_iter().chain(vn))
        };
        // h = 1e-5, as for the maximal linearisation (v⁺ divides by Δt = 0.02: tolerance 1e-6
        // relative to max(1, |column|))
        let h = 1e-5;
        for c in 0..3 * n {
            let (mut x, mut y, mut w) = (q.clone(), v.clone(), u.clone());
            let (mut x2, mut y2, mut w2) = (q.clone(), v.clone(), u.clone());
            match c {
                c if c < n => {
                    x[c] += h;
                    x2[c] -= h;
                }
                c if c < 2 * n => {
                    y[c - n] += h;
                    y2[c - n] -= h;
                }
                c => {
                    w[c - 2 * n] += h;
                    w2[c - 2 * n] -= h;
                }
            }
            let fd = (step(&x, &y, &w) - step(&x2, &y2, &w2)) / (2.0 * h);
            let col = if c < 2 * n { a.column(c).into_owned() } else { b.column(c - 2 * n).into_owned() };
            let err = (&fd - &col).amax();
            assert!(err < 1e-6 * fd.amax().max(1.0), "{}: column {c}: error {err:e}\nfd {}\nan {}", model.name, fd.transpose(), col.transpose());
        }
    }
}
