//! Contact phases (module `schedule`): a touchdown is a plastic impact that keeps the momenta
//! about the contact point, lift-offs release, the linearisation holds across switches (fixed
//! base and on the Lie group), and a step past the schedule is an error.

use crate::constraint_tests::{closed_configuration, four_bar_tree, loop_closure};
use crate::lie_group_tests::{assert_linearization_on_the_group, central_differences, floating_tree, start, tether_and_plane, world_momentum};
use crate::tests::assert_linearisation_matches_differences;
use crate::*;
use nalgebra::{DMatrix, Matrix3, Quaternion, UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

/// Row-major `(steps, m)` flags from the active sets of the steps.
fn masks(m: usize, steps: &[&[usize]]) -> Vec<bool> {
    steps.iter().flat_map(|active| (0..m).map(move |i| active.contains(&i))).collect()
}

/// The world position of body point `c` of a free body at `q`.
fn world_point(q: &[f64], c: &Vector3<f64>) -> Vector3<f64> {
    let r = UnitQuaternion::from_quaternion(Quaternion::new(q[6], q[3], q[4], q[5]));
    Vector3::new(q[0], q[1], q[2]) + r * c
}

/// A free box without gravity whose corner reaches the world point `X` exactly at knot `j` of
/// its free flight; from step `j` on the corner is held at `X` (three planes through it). The
/// impulse acts at `X`, so the angular momentum about `X` is kept through the impact and after
/// it (discrete Noether: rotations about `X` are symmetries of every step), to round-off
/// (Newton at 1e-15); the knots up to `j` are the free flight's; the corner stays at `X`; the
/// linear momentum is not kept; and the kinetic energy drops at once to the plastic impact's,
/// the motion's energy with the corner's normal part removed in the metric of `M`
/// (`knot_energy` of the impact step at knot `j`), about which the variational step keeps it
/// (measured: 97 % of the energy lost, then within 1e-7 relative of the plastic energy over
/// the 48 steps after).
#[test]
fn a_touchdown_is_a_plastic_impact_about_the_contact_point() {
    let mut b = ModelBuilder::new("box");
    b.gravity(Vector3::zeros());
    let inertia = Inertia::new(2.0, Vector3::new(0.01, -0.02, 0.0), Matrix3::from_diagonal(&Vector3::new(0.03, 0.05, 0.04)));
    b.add_body(None, "box", Joint::FreeFlyer, Se3::identity(), inertia).unwrap();
    let model = Arc::new(b.build().unwrap());
    let corner = Vector3::new(0.1, -0.05, -0.08);
    let mut q0 = vec![0.0; 7];
    q0[6] = 1.0;
    let v0 = [0.4, 0.1, -0.5, 0.6, -0.3, 0.8];
    let (j, steps) = (12, 60);
    for scheme in [Scheme::midpoint(), Scheme::trapezoid()] {
        let free = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.01, None).unwrap().with_newton(1e-15, 50).unwrap();
        let mut p0 = vec![0.0; 6];
        free.momentum(&mut free.workspace(), &q0, &v0, &mut p0).unwrap();
        let flight = rollout(&free, &q0, &p0, &vec![0.0; steps * 6]).unwrap();
        let x = world_point(flight.q_at(j), &corner);
        let contact: Vec<Constraint> = [Vector3::x(), Vector3::y(), Vector3::z()]
            .into_iter()
            .map(|normal| Constraint::PointOnPlane { a: BodyPoint { body: None, point: x }, normal, b: BodyPoint { body: Some(0), point: corner } })
            .collect();
        let schedule: Vec<&[usize]> = (0..steps).map(|k| if k < j { &[][..] } else { &[0, 1, 2][..] }).collect();
        let vi = free.clone().with_constraints(contact).unwrap().with_constraint_schedule(&masks(3, &schedule)).unwrap();
        let traj = rollout(&vi, &q0, &p0, &vec![0.0; steps * 6]).unwrap();
        let about_x = |q: &[f64], p: &[f64]| {
            let w = world_momentum(q, p);
            (Vector3::new(w[0], w[1], w[2]), Vector3::new(w[3], w[4], w[5]) - x.cross(&Vector3::new(w[0], w[1], w[2])))
        };
        let (f0, l0) = about_x(&q0, &p0);
        let scale = l0.amax().max(f0.amax());
        for k in 0..=steps {
            let (q, p) = (traj.q_at(k), traj.p_at(k));
            assert!((about_x(q, p).1 - l0).amax() < 1e-12 * scale, "s = {}: angular momentum about X at knot {k}", scheme.s);
            if k <= j {
                let same = q.iter().zip(flight.q_at(k)).chain(p.iter().zip(flight.p_at(k))).all(|(a, b)| (a - b).abs() < 1e-12);
                assert!(same, "s = {}: knot {k} before the touchdown is the free flight's", scheme.s);
            } else {
                assert!((world_point(q, &corner) - x).amax() < 1e-12, "s = {}: the corner is held at knot {k}", scheme.s);
            }
        }
        let (f_end, _) = about_x(traj.q_at(steps), traj.p_at(steps));
        assert!((f_end - f0).amax() > 0.1 * f0.amax(), "the impact changes the linear momentum");
        let mut ws = vi.workspace();
        let flying = free.energy(&mut ws, j, flight.q_at(j), flight.p_at(j)).unwrap();
        let plastic = vi.energy(&mut ws, j, traj.q_at(j), traj.p_at(j)).unwrap();
        assert!(plastic < 0.9 * flying, "the impact dissipates: {flying} -> {plastic}");
        let mut worst = 0.0_f64;
        for k in j + 1..=steps {
            let e = vi.energy(&mut ws, k, traj.q_at(k), traj.p_at(k)).unwrap();
            worst = worst.max((e - plastic).abs() / plastic);
        }
        println!("s = {}: energy {flying:.6} -> {plastic:.6} at the impact, then within {worst:.1e} relative", scheme.s);
        assert!(worst < 1e-6, "s = {}: energy off the plastic impact's by {worst:e}", scheme.s);
        // no impulse before the touchdown
        let mut step_ws = vi.workspace();
        let (mut qn, mut pn) = (vec![0.0; 7], vec![0.0; 6]);
        for k in 0..steps {
            vi.step(&mut step_ws, StepInput::new(k, traj.q_at(k), traj.p_at(k), &[0.0; 6]), &mut qn, &mut pn).unwrap();
            let lambda = vi.multipliers(&step_ws);
            assert_eq!(lambda.iter().any(|&l| l != 0.0), k >= j, "step {k}: {lambda:?}");
        }
    }
}

/// `A`, `B` against central differences on every step of a phase sequence free → touchdown →
/// stance → lift-off → free: the four-bar's loop closure as the contact (fixed base, module
/// `constrained`), and the floating tree's tether and plane (module `chart_linearize`), from
/// states of a rollout through the phases.
#[test]
fn linearization_holds_across_contact_switches() {
    let model = four_bar_tree();
    let closure = loop_closure(&model, false);
    let phases = masks(2, &[&[], &[0, 1], &[0, 1], &[], &[]]);
    for scheme in [Scheme::midpoint(), Scheme::trapezoid()] {
        let forces = JointForces { damping: vec![0.2, 0.1, 0.3], stiffness: vec![0.5, 1.0, 0.0], rest: vec![0.1, -1.0, 0.3] };
        let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, Some(forces))
            .unwrap()
            .with_newton(1e-14, 50)
            .unwrap()
            .with_constraints(closure.clone())
            .unwrap()
            .with_constraint_schedule(&phases)
            .unwrap();
        let mut q0 = closed_configuration(&model, 0.4);
        q0[0] += 2e-3; // the linkage starts open; the touchdown closes it
        let u = [0.5, -0.3, 0.2];
        let traj = rollout(&vi, &q0, &[0.3, -0.2, 0.1], &u.repeat(5)).unwrap();
        let mut st = PointState::new(3);
        for k in 0..5 {
            assert_linearisation_matches_differences(&vi, k, traj.q_at(k), traj.p_at(k), &u, &format!("four-bar s = {}", scheme.s));
            assert_multiplier_jacobian(&vi, k, traj.q_at(k), traj.p_at(k), &u, &format!("four-bar s = {}", scheme.s));
            st.update(&model, traj.q_at(k + 1), &[0.0; 3]);
            let gap = closure.iter().map(|c| c.value(&st).abs()).fold(0.0, f64::max);
            if k == 1 || k == 2 {
                assert!(gap < 1e-11, "the loop is closed after step {k}: {gap:e}");
            }
        }
    }

    let model = Arc::new(floating_tree(true));
    let n = model.nv;
    let q0 = start(&model);
    // the tether a little longer than the start's distance, the plane a little off the tip
    let contacts = tether_and_plane(&model, &q0, 1e-3);
    let phases = masks(2, &[&[], &[0], &[0, 1], &[1], &[]]);
    let u: Vec<f64> = (0..n).map(|i| 0.2 * ((i as f64) * 0.7).cos()).collect();
    for scheme in [Scheme::midpoint(), Scheme::trapezoid()] {
        let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, None)
            .unwrap()
            .with_newton(1e-15, 60)
            .unwrap()
            .with_constraints(contacts.clone())
            .unwrap()
            .with_constraint_schedule(&phases)
            .unwrap();
        let traj = rollout(&vi, &q0, &vec![0.0; n], &u.repeat(5)).unwrap();
        for k in 0..5 {
            assert_linearization_on_the_group(&vi, k, traj.q_at(k), traj.p_at(k), &u, &format!("floating tree s = {}", scheme.s));
            assert_multiplier_jacobian(&vi, k, traj.q_at(k), traj.p_at(k), &u, &format!("floating tree s = {}", scheme.s));
        }
    }
}

/// `∂λ/∂(q, p, u)` of step `k` ([`VariationalIntegrator::multiplier_jacobian`]; the step's
/// impulse `λ_k + μ_{k+1}`, module `momentum_projection`) against central differences of the
/// multipliers of the solved step (`q` moved by `integrate`), h = 3e-6 with Newton near its
/// round-off floor: agreement to 1e-8 of the largest entry. The differences' error is
/// truncation `∝ h²` plus the impulse's round-off over `h`: measured on the four-bar 2.7e-7 /
/// 2.4e-9 / 6.6e-9 at h = 1e-4 / 3e-6 / 1e-6 (scale 0.52), on the floating tree 6e-7 /
/// 5.6e-10 / 1.9e-10 (scale 1.5).
fn assert_multiplier_jacobian(vi: &VariationalIntegrator, k: usize, q: &[f64], p: &[f64], u: &[f64], what: &str) {
    let (n, nq, m) = (vi.n(), vi.nq(), vi.constraints().len());
    let mut ws = vi.workspace();
    let (mut a, mut b, mut qn, mut pn) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), vec![0.0; nq], vec![0.0; n]);
    vi.linearize(&mut ws, StepInput::new(k, q, p, u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
    let exact = vi.multiplier_jacobian(&ws).clone();
    assert_eq!(exact.shape(), (m, 3 * n));
    let fd = central_differences(vi, k, q, p, u, 1e-5, |_, _, ws| vi.multipliers(ws).to_vec());
    let scale = fd.amax().max(1e-3);
    assert!((&exact - &fd).amax() < 1e-8 * scale, "{what}, step {k}: ∂λ off by {:e} (scale {scale:e})", (&exact - &fd).amax());
    let active = vi.active_constraints(k).unwrap();
    for i in (0..m).filter(|i| !active.contains(i)) {
        assert!(exact.row(i).iter().all(|&x| x == 0.0), "{what}, step {k}: an inactive constraint's multiplier moves");
    }
}

/// A step past the schedule, a schedule without constraints or of the wrong shape: errors
/// that say so.
#[test]
fn schedules_are_checked() {
    let model = four_bar_tree();
    let closure = loop_closure(&model, false);
    let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.01, None).unwrap();
    let err = vi.clone().with_constraint_schedule(&[true, true]).unwrap_err().to_string();
    assert!(err.contains("needs constraints"), "{err}");
    let vi = vi.with_constraints(closure).unwrap();
    assert!(vi.clone().with_constraint_schedule(&[true, true, false]).is_err());
    let vi = vi.with_constraint_schedule(&masks(2, &[&[0, 1], &[0, 1]])).unwrap();
    let q0 = closed_configuration(&model, 0.4);
    assert_eq!(rollout(&vi, &q0, &[0.0; 3], &[0.0; 6]).unwrap().steps, 2);
    match rollout(&vi, &q0, &[0.0; 3], &[0.0; 9]) {
        Err(e @ ViError::PastSchedule { step: 2, steps: 2 }) => assert!(e.to_string().contains("covers steps 0 to 1"), "{e}"),
        other => panic!("{:?}", other.map(|t| t.steps)),
    }
}

/// RATTLE's projection and the constrained predictor on the floating tree with its tether and
/// plane (module `momentum_projection`, `predictor`): after a step that imposes both, the
/// knot velocity `M⁻¹ p` moves neither constraint (`C v = 0` to round-off), the step's impulse
/// is `λ + μ`, and the Taylor predictor's acceleration satisfies `C a = 0` (it is the free
/// acceleration with the part the constraints forbid taken out, `M`-orthogonally).
#[test]
fn knot_momenta_and_predicted_accelerations_respect_the_constraints() {
    let model = Arc::new(floating_tree(true));
    let n = model.nv;
    let q0 = start(&model);
    let contacts = tether_and_plane(&model, &q0, 0.0);
    let vi =
        VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.02, None).unwrap().with_newton(1e-15, 60).unwrap().with_constraints(contacts).unwrap();
    let mut ws = vi.workspace();
    let u: Vec<f64> = (0..n).map(|i| 0.3 * ((i as f64) * 1.3).sin()).collect();
    let (mut q1, mut p1) = (vec![0.0; vi.nq()], vec![0.0; n]);
    vi.step(&mut ws, StepInput::new(0, &q0, &vec![0.1; n], &u), &mut q1, &mut p1).unwrap();
    let mut v = vec![0.0; n];
    vi.velocity(&mut ws, &q1, &p1, &mut v).unwrap();
    vi.knot_constraint_factors(&mut ws, 0, &[0, 1], &q1).unwrap();
    let c = ws.constraint.c_knot.rows(0, 2).into_owned();
    let cv = &c * nalgebra::DVector::from_column_slice(&v);
    assert!(cv.amax() < 1e-12 * (1.0 + v.iter().fold(0.0_f64, |m, x| m.max(x.abs()))), "C v = {cv:?}");
    let mu = ws.constraint.projection.mu.clone();
    assert!(mu.iter().all(|m| m.abs() > 0.0), "both constraints project: {mu:?}");
    for (i, (impulse, lambda)) in vi.multipliers(&ws).iter().zip(&ws.constraint.lambda).enumerate() {
        assert_eq!(*impulse, lambda + mu[i]);
    }
    let free: Vec<f64> = (0..n).map(|i| 1.0 + 0.5 * (i as f64).cos()).collect();
    ws.acceleration.copy_from_slice(&free);
    vi.constrain_acceleration(&mut ws, 0, &q1).unwrap();
    let ca = &c * nalgebra::DVector::from_column_slice(&ws.acceleration);
    assert!(ca.amax() < 1e-12 * 10.0, "C a = {ca:?}");
    assert!(ws.acceleration.iter().zip(&free).any(|(a, f)| (a - f).abs() > 1e-3), "the constraints take something out");
}
