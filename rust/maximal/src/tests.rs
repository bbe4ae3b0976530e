//! Cross-checks of the integrator: Newton matrix against finite differences and a dense LU,
//! discrete conservation laws, constraint drift on loops, agreement with the minimal-coordinate
//! variational integrator as Δt → 0, and clear errors.

use crate::body::Pose;
use crate::models::{cylinder_chain, four_bar, four_bar_chain, tip_position};
use crate::*;
use nalgebra::{DMatrix, DVector, Matrix3, UnitQuaternion, Vector3, Vector6};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_batch::Control;
use vidyn_rbd::Model;
use vidyn_spatial::Se3;

fn initial_state(vi: &MaximalIntegrator, q: &[f64], v: &[f64]) -> Vec<BodyState> {
    let mut s = vec![BodyState::default(); vi.mechanism().nbodies()];
    vi.mechanism().state_from_minimal(q, v, vi.dt(), &mut s).unwrap();
    s
}

/// Unknowns `(v, ω, λ)` as one dense vector in node order.
fn gather(vi: &MaximalIntegrator, ws: &MaximalWorkspace) -> DVector<f64> {
    let o = ws.solver.offsets();
    let mut x = DVector::zeros(o[o.len() - 1]);
    for i in 0..vi.mechanism().nbodies() {
        x.rows_mut(o[i], 3).copy_from(&ws.v[i]);
        x.rows_mut(o[i] + 3, 3).copy_from(&ws.w[i]);
    }
    for (j, node) in vi.joint_node.iter().enumerate() {
        if let Some(n) = node {
            let m = ws.solver.dim(*n);
            x.rows_mut(o[*n], m).copy_from(&ws.lambda[j].rows(0, m));
        }
    }
    x
}

fn scatter(vi: &MaximalIntegrator, ws: &mut MaximalWorkspace, x: &DVector<f64>) {
    let o = ws.solver.offsets();
    for i in 0..vi.mechanism().nbodies() {
        ws.v[i] = x.fixed_rows::<3>(o[i]).into();
        ws.w[i] = x.fixed_rows::<3>(o[i] + 3).into();
    }
    for (j, node) in vi.joint_node.iter().enumerate() {
        if let Some(n) = node {
            let m = ws.solver.dim(*n);
            ws.lambda[j] = Vector6::zeros();
            ws.lambda[j].rows_mut(0, m).copy_from(&x.rows(o[*n], m));
        }
    }
}

fn residual_vector(ws: &MaximalWorkspace) -> DVector<f64> {
    let o = ws.solver.offsets();
    let mut r = DVector::zeros(o[o.len() - 1]);
    for k in 0..ws.solver.len() {
        let m = ws.solver.dim(k);
        r.rows_mut(o[k], m).copy_from(&ws.residual[k].rows(0, m));
    }
    r
}

/// The four-bar at a random moving state with random unknowns, ready for `evaluate`/`assemble`.
fn prepared(seed: u64) -> (MaximalIntegrator, MaximalWorkspace, DVector<f64>) {
    let (mut mech, q0) = four_bar();
    let n = mech.nu;
    mech.stiffness = vec![0.7; n];
    mech.damping = vec![0.2; n];
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.02).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let v: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let state = initial_state(&vi, &q0, &v);
    let mut ws = vi.workspace();
    let u: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    vi.prepare(&mut ws, 0, &state, &u, None).unwrap();
    let mut x = gather(&vi, &ws);
    for xi in x.iter_mut() {
        *xi += rng.random_range(-0.5..0.5);
    }
    scatter(&vi, &mut ws, &x);
    (vi, ws, x)
}

#[test]
fn newton_matrix_matches_central_differences_of_the_residual() {
    // h = 1e-6 on unknowns of size O(1): truncation ~h²·|r'''| ≈ 1e-10 (r has 1/Δt = 50
    // factors), round-off ~ε|r|/h ≈ 1e-8 for |r| ≈ 50; tolerance 1e-6 relative to max|F|.
    let h = 1e-6;
    for seed in 0..3 {
        let (vi, mut ws, x) = prepared(seed);
        vi.evaluate(&mut ws, 1.0).unwrap();
        vi.assemble(&mut ws);
        let f = ws.solver.to_dense();
        let scale = f.amax().max(1.0);
        for c in 0..x.len() {
            let mut xp = x.clone();
            xp[c] += h;
            scatter(&vi, &mut ws, &xp);
            vi.evaluate(&mut ws, 1.0).unwrap();
            let rp = residual_vector(&ws);
            xp[c] -= 2.0 * h;
            scatter(&vi, &mut ws, &xp);
            vi.evaluate(&mut ws, 1.0).unwrap();
            let rm = residual_vector(&ws);
            let fd = (rp - rm) / (2.0 * h);
            let err = (fd - f.column(c)).amax();
            assert!(err < 1e-6 * scale, "column {c}: error {err:e} (max |F| = {scale:e})");
        }
    }
}

#[test]
fn graph_solve_matches_dense_lu_on_the_newton_matrix() {
    for seed in 0..3 {
        let (vi, mut ws, _) = prepared(seed);
        vi.evaluate(&mut ws, 1.0).unwrap();
        vi.assemble(&mut ws);
        let f: DMatrix<f64> = ws.solver.to_dense();
        let r = residual_vector(&ws);
        let expected = f.clone().lu().solve(&r).unwrap();
        let sv = f.singular_values();
        let cond = sv.max() / sv.min();
        ws.solver.factorize().unwrap();
        let mut b = ws.residual.clone();
        ws.solver.solve(&mut b);
        let o = ws.solver.offsets();
        let mut err = 0.0_f64;
        for k in 0..ws.solver.len() {
            for i in 0..ws.solver.dim(k) {
                err = err.max((b[k][i] - expected[o[k] + i]).abs());
            }
        }
        let rel = err / expected.amax();
        println!("seed {seed}: cond {cond:.2e}, graph vs dense LU relative difference {rel:.2e}");
        // both are backward-stable solves; they may differ by ~cond·ε
        assert!(rel < 1e-12_f64.max(cond * 4.0 * f64::EPSILON), "relative difference {rel:e}, cond {cond:e}");
    }
}

/// Three asymmetric bodies joined by a spherical and a revolute joint, floating, no gravity.
fn free_mechanism() -> (Mechanism, Vec<BodyState>) {
    let body = |name: &str, m: f64, d: [f64; 3]| Body { name: name.into(), mass: m, inertia: Matrix3::from_diagonal(&Vector3::from(d)) };
    let mut mech =
        Mechanism::new(vec![body("a", 2.0, [0.1, 0.2, 0.3]), body("b", 1.0, [0.05, 0.09, 0.12]), body("c", 0.7, [0.04, 0.02, 0.05])], Vector3::zeros())
            .unwrap();
    let frame = |x: f64, y: f64, z: f64, r: [f64; 3]| Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(Vector3::from(r)), Vector3::new(x, y, z));
    let (fa, fb) = (frame(0.4, 0.1, 0.0, [0.2, 0.0, 0.1]), frame(-0.3, 0.0, 0.05, [0.0, 0.3, 0.0]));
    let (fb2, fc) = (frame(0.25, -0.1, 0.0, [0.1, 0.1, 0.0]), frame(-0.2, 0.0, 0.0, [0.0, 0.0, 0.4]));
    mech.add_joint("ball", JointKind::Spherical, Some(0), fa, 1, fb).unwrap();
    let axis = Vector3::new(0.2, 0.5, 1.0).normalize();
    mech.add_joint("hinge", JointKind::Revolute { axis }, Some(1), fb2, 2, fc).unwrap();
    // consistent poses: joint frames coincide up to the free motions
    let pa = Pose::new(Vector3::new(0.1, 0.2, 0.3), UnitQuaternion::from_scaled_axis(Vector3::new(0.3, -0.2, 0.5)));
    let place = |parent: &Pose, pf: Se3, rel: Se3, cf: Se3| {
        let w = Se3::from_quaternion(&parent.q, parent.x) * pf * rel * cf.inverse();
        Pose::new(w.translation, UnitQuaternion::from_matrix(&w.rotation))
    };
    let pb = place(&pa, fa, Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(Vector3::new(0.7, -0.4, 0.2)), Vector3::zeros()), fb);
    let pc = place(&pb, fb2, Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(axis * 1.1), Vector3::zeros()), fc);
    // arbitrary incoming velocities: momentum conservation does not need consistent ones
    let s = |p: Pose, v: [f64; 3], w: [f64; 3]| BodyState { pose: p, v: Vector3::from(v), w: Vector3::from(w) };
    let state = vec![s(pa, [0.3, -0.2, 0.1], [1.0, 2.0, -0.5]), s(pb, [-0.1, 0.4, 0.0], [-2.0, 0.5, 1.5]), s(pc, [0.0, 0.1, -0.3], [0.5, -1.0, 3.0])];
    (mech, state)
}

#[test]
fn free_system_conserves_discrete_linear_and_angular_momentum() {
    let (mech, mut state) = free_mechanism();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let (p0, h0) = (vi.linear_momentum(&state), vi.angular_momentum(&state));
    let (mut dp, mut dh, mut viol, mut iters) = (0.0_f64, 0.0_f64, 0.0_f64, 0);
    for k in 0..1000 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        dp = dp.max((vi.linear_momentum(&state) - p0).amax());
        dh = dh.max((vi.angular_momentum(&state) - h0).amax());
        viol = viol.max(vi.constraint_violation(&state));
        for s in &state {
            assert!((s.pose.q.coords.norm() - 1.0).abs() < 1e-13);
        }
    }
    println!("free system, 1000 steps: |ΔP| = {dp:.1e}, |ΔH| = {dh:.1e}, max |g| = {viol:.1e}, max Newton iterations {iters}");
    assert!(dp < 1e-11 * p0.amax().max(1.0), "linear momentum drift {dp:e}");
    assert!(dh < 1e-11 * h0.amax().max(1.0), "angular momentum drift {dh:e}");
    assert!(viol < 1e-12, "constraint violation {viol:e}");
}

#[test]
fn four_bar_keeps_its_loop_closed_without_drift_over_ten_thousand_steps() {
    let (mech, q0) = four_bar();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    assert!(vi.is_loop(3) && !vi.is_loop(0) && !vi.is_loop(2));
    let mut state = initial_state(&vi, &q0, &[0.0; 3]);
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let (mut viol, mut first_half, mut e_min, mut e_max) = (0.0_f64, 0.0_f64, f64::INFINITY, f64::NEG_INFINITY);
    let (mut mean_a, mut mean_b) = (0.0, 0.0);
    let n = 10_000;
    for k in 0..n {
        vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
        viol = viol.max(vi.constraint_violation(&state));
        if k == n / 2 {
            first_half = viol;
        }
        let e = vi.energy(&state);
        e_min = e_min.min(e);
        e_max = e_max.max(e);
        if k < 1000 {
            mean_a += e / 1000.0;
        } else if k >= n - 1000 {
            mean_b += e / 1000.0;
        }
    }
    println!(
        "four-bar, 10⁴ steps: max |g| = {viol:.1e} (first half {first_half:.1e}); energy range {:.3e}, window means {mean_a:.6} → {mean_b:.6}",
        e_max - e_min
    );
    // within the Newton tolerance (1e-12 on |g|) at every one of the 10⁴ knots: no drift
    assert!(viol <= 1e-12, "constraint violation {viol:e}");
    // no drift: the energy oscillates (O(Δt) for this first-order scheme) around a fixed level
    assert!((mean_b - mean_a).abs() < 0.1 * (e_max - e_min).max(1e-9), "energy trend {mean_a} → {mean_b}");
}

#[test]
fn chain_of_closed_loop_segments_keeps_every_loop_closed() {
    let (mech, q0) = four_bar_chain(4);
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let nloops = (0..vi.mechanism().joints.len()).filter(|&j| vi.is_loop(j)).count();
    assert_eq!(nloops, 4);
    let mut state = initial_state(&vi, &q0, &vec![0.0; q0.len()]);
    assert!(vi.constraint_violation(&state) < 1e-14);
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let mut viol = 0.0_f64;
    let mut iters = 0;
    for k in 0..10_000 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        viol = viol.max(vi.constraint_violation(&state));
    }
    println!("chain of 4 four-bar segments, 10⁴ steps: max |g| = {viol:.1e}, fill blocks {}, max Newton iterations {iters}", vi.fill_edges());
    assert!(viol < 1e-12, "constraint violation {viol:e}");
}

#[test]
fn redundant_planar_loop_is_a_clear_singular_pivot_error() {
    let model = Arc::new(cylinder_chain(3, true));
    let q0 = [0.9, -1.4, -0.6];
    let mut mech = Mechanism::from_model(model.clone()).unwrap();
    let tip = tip_position(&model, &q0);
    // a revolute closure also fixes out-of-plane motions that the other joints already fix
    let at_tip = Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -1.0));
    mech.add_loop_closure("closure", JointKind::Revolute { axis: Vector3::y() }, None, Se3::new(Matrix3::identity(), tip), 2, at_tip).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let state = initial_state(&vi, &q0, &[0.0; 3]);
    let mut next = state.clone();
    let err = vi.step(&mut vi.workspace(), 7, &state, &[], None, &mut next).unwrap_err();
    assert!(matches!(&err, MaximalError::SingularPivot { node, step: 7, .. } if node.contains("closure")), "{err}");
}

#[test]
fn thin_rods_without_axial_inertia_are_rejected_clearly() {
    let err = Mechanism::from_model(Arc::new(vidyn_rbd::builders::pendulum_chain(2, true))).unwrap_err();
    assert!(err.to_string().contains("positive-definite inertia"), "{err}");
}

/// Final configuration after `t_end` of the maximal integrator on a model from `(q0, v0)`
/// with constant controls `u`.
fn maximal_final(mech: &Arc<Mechanism>, dt: f64, t_end: f64, q0: &[f64], v0: &[f64], u: &[f64]) -> Vec<f64> {
    let vi = MaximalIntegrator::new(mech.clone(), dt).unwrap();
    let mut state = initial_state(&vi, q0, v0);
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let steps = (t_end / dt).round() as usize;
    for k in 0..steps {
        vi.step(&mut ws, k, &state, u, None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
    }
    let poses: Vec<Pose> = state.iter().map(|s| s.pose).collect();
    let mut q = vec![0.0; q0.len()];
    mech.configuration(&poses, &mut q).unwrap();
    q
}

fn minimal_final(vi: &vidyn_vi::VariationalIntegrator, t_end: f64, q0: &[f64], v0: &[f64], u: &[f64]) -> Vec<f64> {
    let dt = vi.dt();
    let mut ws = vi.workspace();
    let mut p0 = vec![0.0; q0.len()];
    vi.momentum(&mut ws, q0, v0, &mut p0).unwrap();
    let steps = (t_end / dt).round() as usize;
    let controls: Vec<f64> = (0..steps).flat_map(|_| u.iter().copied()).collect();
    let traj = vidyn_vi::rollout(vi, q0, &p0, &controls).unwrap();
    traj.q_at(steps).to_vec()
}

#[test]
fn maximal_and_minimal_integrators_converge_to_the_same_motion() {
    // a spatial 3-link chain with controls, joint springs and dampers
    let model = Arc::new(cylinder_chain(3, false));
    let forces = vidyn_vi::JointForces { damping: vec![0.1, 0.05, 0.2], stiffness: vec![0.5, 1.0, 0.3], rest: vec![0.1, -0.2, 0.0] };
    let mut mech = Mechanism::from_model(model.clone()).unwrap();
    mech.damping = forces.damping.clone();
    mech.stiffness = forces.stiffness.clone();
    mech.rest = forces.rest.clone();
    let mech = Arc::new(mech);
    let (q0, v0, u) = ([0.6, -0.4, 0.3], [0.5, -0.3, 0.2], [0.3, -0.2, 0.1]);
    let t_end = 0.5;
    let minimal = |scheme, dt| vidyn_vi::VariationalIntegrator::new(model.clone(), scheme, dt, Some(forces.clone())).unwrap();
    let reference = minimal_final(&minimal(vidyn_vi::Scheme::simpson(), 2.5e-4), t_end, &q0, &v0, &u);
    let err = |q: &[f64]| q.iter().zip(&reference).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
    let dts = [0.004, 0.002, 0.001, 0.0005];
    let e_max: Vec<f64> = dts.iter().map(|&dt| err(&maximal_final(&mech, dt, t_end, &q0, &v0, &u))).collect();
    let e_min: Vec<f64> = dts.iter().map(|&dt| err(&minimal_final(&minimal(vidyn_vi::Scheme::trapezoid(), dt), t_end, &q0, &v0, &u))).collect();
    let order = |e: &[f64]| -> Vec<f64> { e.windows(2).map(|w| (w[0] / w[1]).log2()).collect() };
    println!("Δt {dts:?}\nmaximal errors {e_max:?} orders {:.2?}\nminimal (trapezoid) errors {e_min:?} orders {:.2?}", order(&e_max), order(&e_min));
    // first order: every halving of Δt halves the error (observed orders within 0.95..1.05)
    for p in order(&e_max) {
        assert!((0.95..1.05).contains(&p), "observed order {p}");
    }
    assert!(e_max[dts.len() - 1] < 5e-3, "maximal error {:e} at Δt = {}", e_max[dts.len() - 1], dts[dts.len() - 1]);
}

/// A tree with prismatic, spherical and skew revolute joints (cylinder bodies).
fn mixed_tree() -> Model {
    use vidyn_rbd::{Joint, ModelBuilder};
    let mut b = ModelBuilder::new("mixed");
    let c = crate::models::cylinder(1.3, 0.8);
    let at = |x: f64, y: f64, z: f64, r: [f64; 3]| Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(Vector3::from(r)), Vector3::new(x, y, z));
    let slider = b.add_body(None, "slider", Joint::Prismatic { axis: Vector3::new(1.0, 0.2, 0.0).normalize() }, at(0.1, 0.0, 0.2, [0.1, 0.2, 0.0]), c).unwrap();
    let ball = b.add_body(Some(slider), "ball", Joint::Spherical, at(0.0, 0.1, -0.8, [0.0, 0.3, 0.1]), crate::models::cylinder(0.7, 1.0)).unwrap();
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

/// Central differences (step `h`) of the solved interior-point step against `linearize` for a
/// body state `state` (no controls). The relaxed system is differentiated at the final barrier
/// `μ`, while each differenced step ends at its own `μ` and residual (≤ `ε_IP`): the
/// difference carries ~`ε_IP / h` of noise besides the `h²` truncation; tolerance 1e-5
/// relative to max(1, |column|), with `h` chosen per case below. Returns the largest relative
/// error.
fn check_ip_linearization(vi: &MaximalIntegrator, state: &[BodyState], h: f64) -> f64 {
    check_ip_linearization_at(vi, state, &[], h, false).0
}

/// [`check_ip_linearization`] under controls `u` (columns of `B` too), and with `relaxed` the
/// differenced steps solve the system relaxed at the base step's final `μ` (what `linearize`
/// differentiates), so only `ε_IP / h` and `h²` separate them. Returns the largest relative
/// errors of `A` and `B`.
fn check_ip_linearization_at(vi: &MaximalIntegrator, state: &[BodyState], u: &[f64], h: f64, relaxed: bool) -> (f64, f64) {
    let (nb, nu) = (state.len(), vi.mechanism().nu);
    let u = if u.is_empty() { vec![0.0; nu] } else { u.to_vec() };
    let u = u.as_slice();
    let mut ws = vi.workspace();
    let mut next = state.to_vec();
    let (mut a, mut b) = (DMatrix::zeros(12 * nb, 12 * nb), DMatrix::zeros(12 * nb, nu));
    let mu = vi.linearize(&mut ws, 0, state, u, &mut next, &mut a, &mut b).unwrap().barrier;
    let base = next.clone();
    let mut worst = (0.0_f64, 0.0_f64);
    let solve = |s: &[BodyState], u: &[f64]| {
        let mut out = s.to_vec();
        if relaxed {
            vi.step_relaxed(&mut vi.workspace(), s, u, mu, &mut out).unwrap();
        } else {
            vi.step(&mut vi.workspace(), 0, s, u, None, &mut out).unwrap();
        }
        out
    };
    for c in 0..12 * nb + nu {
        let (mut sp, mut sm) = (state.to_vec(), state.to_vec());
        let (mut up, mut um) = (u.to_vec(), u.to_vec());
        let (i, k) = (c / 12, c % 12);
        let e = |j: usize, s: f64| Vector3::ith(j, s * h);
        match k {
            _ if c >= 12 * nb => {
                up[c - 12 * nb] += h;
                um[c - 12 * nb] -= h;
            }
            0..=2 => {
                sp[i].pose = sp[i].pose.retract(&e(k, 1.0), &Vector3::zeros());
                sm[i].pose = sm[i].pose.retract(&e(k, -1.0), &Vector3::zeros());
            }
            3..=5 => {
                sp[i].pose = sp[i].pose.retract(&Vector3::zeros(), &e(k - 3, 1.0));
                sm[i].pose = sm[i].pose.retract(&Vector3::zeros(), &e(k - 3, -1.0));
            }
            6..=8 => {
                sp[i].v += e(k - 6, 1.0);
                sm[i].v -= e(k - 6, 1.0);
            }
            _ => {
                sp[i].w += e(k - 9, 1.0);
                sm[i].w -= e(k - 9, 1.0);
            }
        }
        let (p, m) = (solve(&sp, &up), solve(&sm, &um));
        let mut fd = DVector::zeros(12 * nb);
        for j in 0..nb {
            let dx = (p[j].pose.x - m[j].pose.x) / (2.0 * h);
            let dth = (body::rotation_difference(&base[j].pose.q, &p[j].pose.q) - body::rotation_difference(&base[j].pose.q, &m[j].pose.q)) / (2.0 * h);
            let (dv, dw) = ((p[j].v - m[j].v) / (2.0 * h), (p[j].w - m[j].w) / (2.0 * h));
            for r in 0..3 {
                fd[12 * j + r] = dx[r];
                fd[12 * j + 3 + r] = dth[r];
                fd[12 * j + 6 + r] = dv[r];
                fd[12 * j + 9 + r] = dw[r];
            }
        }
        let col = if c < 12 * nb { a.column(c) } else { b.column(c - 12 * nb) };
        let err = (&fd - col).amax();
        assert!(err < 1e-5 * fd.amax().max(1.0), "column {c}: error {err:e}\nfd {}\nan {}", fd.transpose(), col.transpose());
        let rel = err / fd.amax().max(1.0);
        if c < 12 * nb {
            worst.0 = worst.0.max(rel);
        } else {
            worst.1 = worst.1.max(rel);
        }
    }
    worst
}

#[test]
fn linearization_with_contacts_matches_central_differences() {
    // a box on four corners, sliding and turning (the contacts fix the normal motion)
    let vi = MaximalIntegrator::new(Arc::new(box_on_ground(0.3)), 0.01).unwrap().with_newton(1e-15, 50).unwrap();
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25), UnitQuaternion::identity());
    check_ip_linearization(&vi, &[BodyState { pose, v: Vector3::new(0.8, 0.3, 0.0), w: Vector3::new(0.0, 0.0, 0.4) }], 1e-6);
    // a tilted box hitting the ground on one corner while sliding: the friction force follows
    // c_f γ, so δv_x = c_f |δv_z| for a vertical shift (checked exactly below); this one
    // converges to 1e-10 only (tolerance 1e-12): h = 1e-4, noise ~1e-6
    let vi = MaximalIntegrator::new(Arc::new(box_on_ground(0.3)), 0.01).unwrap();
    let q = UnitQuaternion::from_scaled_axis(Vector3::new(0.3, 0.2, 0.1));
    let lowest = vi.mechanism().contacts.iter().map(|c| (q * c.point).z).fold(f64::INFINITY, f64::min);
    let state = [BodyState { pose: Pose::new(Vector3::new(0.0, 0.0, -lowest), q), v: Vector3::new(0.6, -0.2, -0.5), w: Vector3::new(0.3, -0.2, 0.1) }];
    check_ip_linearization(&vi, &state, 1e-4);
    let mut next = state.to_vec();
    let (mut a, mut b) = (DMatrix::zeros(12, 12), DMatrix::zeros(12, 0));
    vi.linearize(&mut vi.workspace(), 0, &state, &[], &mut next, &mut a, &mut b).unwrap();
    assert!((a[(6, 2)] + 0.3 * a[(8, 2)]).abs() < 1e-6 * a[(8, 2)].abs(), "δv_x = {}, δv_z = {}", a[(6, 2)], a[(8, 2)]);
    // Not checked here: the rotation derivative of the friction rows, which only moves ψ while
    // sliding; a sticking corner (c_f = 2) agreed to 4.5e-5 only, where the interior point
    // stops at 1e-10 and the differences (h = 1e-4) cannot resolve better.
}

#[test]
fn linearization_with_joint_limits_matches_central_differences() {
    // a pendulum pressed against its upper limit. (The derivative of the limit's wrench
    // direction only changes multipliers while the limit is engaged — the two bodies then move
    // as one — so this check cannot see that term; the limit rows themselves it does check.)
    let mut mech = Mechanism::from_model(Arc::new(cylinder_chain(2, true))).unwrap();
    mech.add_joint_limit(0, -0.3, 0.5).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap().with_newton(1e-15, 50).unwrap();
    let state = initial_state(&vi, &[0.5, -0.2], &[1.0, 0.3]);
    check_ip_linearization(&vi, &state, 1e-6);
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
        let c = crate::models::cylinder(1.1, 0.9);
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

fn gap(vi: &MaximalIntegrator, state: &[BodyState]) -> f64 {
    vi.mechanism().contacts.iter().map(|c| c.normal.dot(&state[c.body].pose.point(&c.point)) - c.radius - c.offset).fold(f64::INFINITY, f64::min)
}

/// A 1 kg cube of edge 0.5 m with its 8 corners in contact with the ground `z = 0`.
fn box_on_ground(friction: f64) -> Mechanism {
    let (m, a) = (1.0, 0.5);
    let body = Body { name: "box".into(), mass: m, inertia: Matrix3::identity() * (m * a * a / 6.0) };
    let mut mech = Mechanism::new(vec![body], Vector3::new(0.0, 0.0, -9.81)).unwrap();
    for (k, (sx, sy, sz)) in [(-1, -1, -1), (1, -1, -1), (-1, 1, -1), (1, 1, -1), (-1, -1, 1), (1, -1, 1), (-1, 1, 1), (1, 1, 1)].into_iter().enumerate() {
        let corner = Vector3::new(sx as f64, sy as f64, sz as f64) * (a / 2.0);
        mech.add_contact(&format!("corner{k}"), 0, Sphere { centre: corner, radius: 0.0 }, Plane::ground(), friction).unwrap();
    }
    mech
}

/// Brüdigam et al. 2023 §5.1(d): the cube of edge 0.5 m, 1 kg, of `vi` dropped from 0.4 m
/// turning and moving sideways, 300 steps: no penetration, at rest on the ground at the end.
pub(super) fn check_dropped_box_comes_to_rest(vi: &MaximalIntegrator, label: &str) {
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25 + 0.4), UnitQuaternion::from_scaled_axis(Vector3::new(0.1, -0.05, 0.3)));
    let mut state = vec![BodyState { pose, v: Vector3::new(0.3, 0.0, 0.0), w: Vector3::new(0.0, 0.5, 0.0) }];
    let (mut ws, mut next) = (vi.workspace(), state.clone());
    let (mut min_gap, mut iters) = (f64::INFINITY, 0);
    for k in 0..300 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        min_gap = min_gap.min(gap(vi, &state));
    }
    let s = &state[0];
    println!("{label}: min gap {min_gap:.2e} m, rest height {:.6} m, |v| {:.1e}, |ω| {:.1e}, max IP iterations {iters}", s.pose.x.z, s.v.norm(), s.w.norm());
    assert!(min_gap > -1e-9, "penetration {min_gap:e}");
    assert!((s.pose.x.z - 0.25).abs() < 1e-6, "rest height {}", s.pose.x.z);
    assert!(s.v.norm() < 1e-6 && s.w.norm() < 1e-6);
}

#[test]
fn dropped_box_comes_to_rest_on_the_ground_without_penetration() {
    check_dropped_box_comes_to_rest(&MaximalIntegrator::new(Arc::new(box_on_ground(0.5)), 0.01).unwrap(), "box");
}

#[test]
fn sliding_box_stops_after_the_coulomb_distance() {
    // on a basis direction of the linearised cone friction is exact: deceleration c_f g, so
    // a box sliding at v₀ stops after v₀²/(2 c_f g); first order in Δt
    let (cf, v0, g) = (0.3, 1.0, 9.81);
    let vi = MaximalIntegrator::new(Arc::new(box_on_ground(cf)), 0.001).unwrap();
    let pose = Pose::new(Vector3::new(0.0, 0.0, 0.25), UnitQuaternion::identity());
    let mut state = vec![BodyState { pose, v: Vector3::new(v0, 0.0, 0.0), w: Vector3::zeros() }];
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let mut min_gap = f64::INFINITY;
    for k in 0..600 {
        vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        std::mem::swap(&mut state, &mut next);
        min_gap = min_gap.min(gap(&vi, &state));
    }
    let expected = v0 * v0 / (2.0 * cf * g);
    let s = &state[0];
    println!("sliding box: distance {:.5} m (Coulomb {expected:.5} m), |v| {:.1e}, min gap {min_gap:.1e}", s.pose.x.x, s.v.norm());
    assert!(s.v.norm() < 1e-6, "still moving: {}", s.v.norm());
    // O(Δt) discretisation: one step of travel (v₀Δt = 1e-3 m) is the scale of the error
    assert!((s.pose.x.x - expected).abs() < 2e-3, "distance {} vs {expected}", s.pose.x.x);
    assert!(min_gap > -1e-9 && s.pose.rotation().m33 > 1.0 - 1e-9, "the box must neither sink nor tip");
}

#[test]
fn chain_of_spheres_rests_stably_on_the_ground() {
    // Brüdigam et al. 2023 Fig. 8b: spheres (r = 0.25 m, 1 kg) linked by spherical joints,
    // with ground contact and friction
    let (n, r) = (6, 0.25);
    let (mech, mut state) = crate::models::sphere_chain(n);
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let mut ws = vi.workspace();
    let mut next = state.clone();
    let (mut min_gap, mut viol, mut iters) = (f64::INFINITY, 0.0_f64, 0);
    for k in 0..400 {
        let st = vi.step(&mut ws, k, &state, &[], None, &mut next).unwrap();
        iters = iters.max(st.iterations);
        std::mem::swap(&mut state, &mut next);
        min_gap = min_gap.min(gap(&vi, &state));
        viol = viol.max(vi.constraint_violation(&state));
    }
    let vmax = state.iter().fold(0.0_f64, |m, s| m.max(s.v.norm()));
    println!("sphere chain: min gap {min_gap:.1e} m, max |g| {viol:.1e}, final max |v| {vmax:.1e}, max IP iterations {iters}");
    assert!(min_gap > -1e-9, "penetration {min_gap:e}");
    assert!(viol <= 1e-10, "joint violation {viol:e}");
    assert!(vmax < 1e-6, "not at rest: {vmax:e}");
    for s in &state {
        assert!((s.pose.x.z - r).abs() < 1e-6, "sphere centre at {}", s.pose.x.z);
    }
}

#[test]
fn joint_limits_hold_at_solver_tolerance_and_are_reached() {
    // a pendulum thrown at 3 rad/s would swing to ≈ 0.8 rad; limits [−0.3, 0.5]
    let model = Arc::new(cylinder_chain(2, true));
    let mut mech = Mechanism::from_model(model).unwrap();
    let (lo, hi) = (-0.3, 0.5);
    mech.add_joint_limit(0, lo, hi).unwrap();
    mech.add_joint_limit(1, -0.2, 0.2).unwrap();
    assert!(mech.add_joint_limit(1, 0.2, -0.2).is_err());
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let traj = rollout_minimal(&vi, &Control::new(), &[0.0, 0.0], &[3.0, 0.0], &[], 300).unwrap();
    let (th0, th1): (Vec<f64>, Vec<f64>) = (0..=300).map(|k| (traj.q[2 * k], traj.q[2 * k + 1])).unzip();
    let (min0, max0) = (th0.iter().copied().fold(f64::INFINITY, f64::min), th0.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let (min1, max1) = (th1.iter().copied().fold(f64::INFINITY, f64::min), th1.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let viol = traj.constraint_violation.iter().copied().fold(0.0, f64::max);
    println!(
        "joint limits: θ₀ ∈ [{min0:.9}, {max0:.9}] (limits [{lo}, {hi}]), θ₁ ∈ [{min1:.6}, {max1:.6}] (±0.2), max |g| {viol:.1e}, max iterations {}",
        traj.iterations.iter().max().unwrap()
    );
    assert!(min0 >= lo - 1e-9 && max0 <= hi + 1e-9, "limits violated: [{min0}, {max0}]");
    assert!(min1 >= -0.2 - 1e-9 && max1 <= 0.2 + 1e-9, "limits violated: [{min1}, {max1}]");
    assert!(max0 > hi - 1e-6 && min0 < lo + 1e-6, "the swing must reach both limits: [{min0}, {max0}]");
    assert!(viol <= 1e-10);
}

#[test]
fn random_trees_of_every_joint_kind_simulate_on_their_constraint_manifold() {
    use rand::SeedableRng;
    for seed in 0..6 {
        let model = Arc::new(vidyn_rbd::builders::random_tree(8, seed, &[]));
        let mech = Mechanism::from_model(model.clone()).unwrap();
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.005).unwrap();
        assert_eq!(vi.fill_edges(), 0, "a tree must factorise without fill");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let q0 = vidyn_rbd::random_configuration(&model, &mut rng);
        let v0: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-0.5..0.5)).collect();
        let traj = rollout_minimal(&vi, &Control::new(), &q0, &v0, &[], 200).unwrap();
        // knot 0 maps back to q0 (quaternions up to sign)
        let mut q = vec![0.0; model.nq];
        let poses: Vec<Pose> = traj.knot(0).iter().map(|s| s.pose).collect();
        vi.mechanism().configuration(&poses, &mut q).unwrap();
        let dq = vidyn_rbd::difference(&model, &q0, &q).unwrap();
        assert!(dq.iter().all(|x| x.abs() < 1e-9), "seed {seed}: configuration round trip {dq:?}");
        let viol = traj.constraint_violation.iter().copied().fold(0.0, f64::max);
        assert!(viol <= 1e-12, "seed {seed}: constraint violation {viol:e}");
        for s in &traj.states {
            assert!((s.pose.q.coords.norm() - 1.0).abs() < 1e-13);
        }
    }
}

mod body_contact;
mod cone;
mod geometry;
