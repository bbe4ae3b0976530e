//! The constrained step, its linearisation and the knot projections, checked through the
//! constraint functions themselves (`Constraint::value`, `Constraint::gradient` at a
//! `PointState`) or the workspace's projection factors: the four-bar linkage, kinematic joints
//! with constraints, and contact schedules.

mod four_bar {
    use crate::test_common::constraint::*;
    use crate::test_common::integrator::assert_linearisation_matches_differences;
    use crate::*;
    use nalgebra::DMatrix;

    pub(crate) fn constraint_max(vi: &VariationalIntegrator, q: &[f64]) -> f64 {
        let mut st = crate::point::PointState::new(vi.n());
        st.update(vi.model(), q, &vec![0.0; vi.n()]);
        vi.constraints().iter().map(|c| c.value(&st).abs()).fold(0.0, f64::max)
    }

    /// The schemes the constrained step takes: all of them (module docs).
    pub(crate) fn schemes() -> [Scheme; 4] {
        [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()]
    }

    /// 10⁴ steps (100 s) of the four-bar falling from rest under gravity, every scheme: the loop
    /// stays closed at solver tolerance at every step, and the energy `½ v̄ᵀM(q̄)v̄ + V(q̄)` at
    /// the step midpoints oscillates without a trend.
    #[test]
    fn four_bar_stays_closed_without_drift_for_ten_thousand_steps() {
        for sc in schemes() {
            let vi = integrator(sc, 0.01, Some(JointForces::none(3)));
            let q0 = closed_configuration(vi.model(), 0.3);
            assert!(constraint_max(&vi, &q0) < 1e-12);
            let steps = 10_000;
            let traj = rollout(&vi, &q0, &[0.0; 3], &vec![0.0; 3 * steps]).unwrap();
            let mut ws = vi.model().workspace();
            let (mut worst, mut energies) = (0.0_f64, Vec::with_capacity(steps));
            for k in 1..=steps {
                worst = worst.max(constraint_max(&vi, traj.q_at(k)));
                let (qa, qb) = (traj.q_at(k - 1), traj.q_at(k));
                let mid: Vec<f64> = qa.iter().zip(qb).map(|(a, b)| 0.5 * (a + b)).collect();
                let vel: Vec<f64> = qa.iter().zip(qb).map(|(a, b)| (b - a) / vi.dt()).collect();
                energies.push(
                    vidyn_rbd::kinetic_energy(vi.model(), &mut ws, &mid, &vel).unwrap() + vidyn_rbd::potential_energy(vi.model(), &mut ws, &mid).unwrap(),
                );
            }
            let (lo, hi) = energies.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &e| (l.min(e), h.max(e)));
            let tenth = steps / 10;
            let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
            let trend = (mean(&energies[steps - tenth..]) - mean(&energies[..tenth])).abs();
            let crank = vi.model().joint_index("crank").unwrap();
            let swing = (0..=steps).map(|k| traj.q_at(k)[crank]).fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| (l.min(x), h.max(x)));
            println!(
                "{}: crank swings over [{:.2}, {:.2}] rad, max |h| {worst:.1e}, energy range {:.2e}, trend {trend:.1e}",
                vi.scheme().s,
                swing.0,
                swing.1,
                hi - lo
            );
            assert!(swing.1 - swing.0 > 0.5, "the linkage must actually move: {swing:?}");
            assert!(worst < 1e-11, "constraint drift {worst:e}");
            // the swing exchanges ≈ 4 J between kinetic and potential energy
            assert!(hi - lo < 2e-2, "energy range {}", hi - lo);
            assert!(trend < 2e-3, "energy trend {trend}");
        }
    }

    /// `A`, `B` of the constrained step against central differences of the solved step (h = 1e-6,
    /// tolerance as in the unconstrained test), with damping, springs and controls, from a
    /// configuration slightly off the constraint set (the step is defined there too).
    #[test]
    fn constrained_linearisation_matches_finite_differences() {
        for sc in schemes() {
            let forces = JointForces { damping: vec![0.2, 0.1, 0.3], stiffness: vec![0.5, 1.0, 0.0], rest: vec![0.1, -1.0, 0.3] };
            let vi = integrator(sc, 0.02, Some(forces));
            let mut q = closed_configuration(vi.model(), 0.4);
            q[0] += 1e-3;
            let p = vec![0.3, -0.2, 0.1];
            let u = vec![0.5, -0.3, 0.2];
            let (qn, _) = assert_linearisation_matches_differences(&vi, 0, &q, &p, &u, &format!("four-bar s={}", vi.scheme().s));
            assert!(constraint_max(&vi, &qn) < 1e-11);
        }
    }

    /// Simpson and Lobatto `s = 3` impose the constraints at every control point after the
    /// first (module docs): after a step from a state on the constraint set, every control
    /// point `q^1..q^s` of the solution (kept in the workspace) closes the loop to solver
    /// tolerance, and the interior impulses are not zero (the interior rows carry them).
    #[test]
    fn every_control_point_of_a_multistage_step_is_on_the_constraint_set() {
        for sc in [Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
            let vi = integrator(sc, 0.05, None);
            let (n, s, m) = (3, vi.scheme().s, 2);
            let q = closed_configuration(vi.model(), 0.4);
            let mut ws = vi.workspace();
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.step(&mut ws, StepInput::new(0, &q, &[0.4, -0.1, 0.2], &[0.0; 3]), &mut qn, &mut pn).unwrap();
            for alpha in 1..=s {
                let h = vi.constraints().iter().map(|c| c.value(&ws.points.states[alpha]).abs()).fold(0.0, f64::max);
                assert!(h < 1e-12, "s = {s}: control point {alpha} is off the constraint set by {h:e}");
            }
            assert!(constraint_max(&vi, &qn) < 1e-12);
            let interior = &ws.constraint.lambda[m..s * m];
            assert!(interior.iter().all(|l| l.abs() > 1e-6), "s = {s}: interior impulses {interior:?}");
        }
    }

    #[test]
    fn constrained_flow_is_symplectic_on_the_constraint_set() {
        let vi = integrator(Scheme::midpoint(), 0.02, Some(JointForces::none(3)));
        let n = 3;
        let q = closed_configuration(vi.model(), 0.2);
        let p = vec![0.0; n];
        let mut ws = vi.workspace();
        let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
        let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
        vi.linearize(&mut ws, StepInput::new(0, &q, &p, &[0.0; 3]), &mut a, &mut b, &mut qn, &mut pn).unwrap();
        // tangent directions: the null space of Dh(q_k) (one), and every momentum direction
        let mut st = crate::point::PointState::new(n);
        st.update(vi.model(), &q, &[0.0; 3]);
        let mut scratch = crate::constraints::ConstraintScratch::new(n);
        let mut dh = DMatrix::zeros(2, n);
        let mut row = vec![0.0; n];
        for (i, c) in vi.constraints().iter().enumerate() {
            c.gradient(vi.model(), &st, &mut scratch, &mut row);
            dh.row_mut(i).copy_from_slice(&row);
        }
        let tangent = dh.row(0).transpose().cross(&dh.row(1).transpose());
        let mut basis = DMatrix::zeros(2 * n, 1 + n);
        basis.view_mut((0, 0), (n, 1)).copy_from(&tangent);
        for i in 0..n {
            basis[(n + i, 1 + i)] = 1.0;
        }
        let mut j = DMatrix::zeros(2 * n, 2 * n);
        for i in 0..n {
            j[(i, n + i)] = 1.0;
            j[(n + i, i)] = -1.0;
        }
        let form = basis.transpose() * (a.transpose() * &j * &a - &j) * &basis;
        assert!(form.amax() < 1e-10 * a.amax().powi(2), "Nᵀ(AᵀJA − J)N = {form}");
    }
}

mod kinematic {
    use crate::test_common::integrator::assert_linearisation_matches_differences;
    use crate::*;
    use nalgebra::Vector3;

    use std::sync::Arc;

    /// Both features at once: the four-bar's rocker driven by a prescribed angle would lock the
    /// loop, so here a tethered double pendulum has its first joint prescribed.
    #[test]
    fn kinematic_joints_and_constraints_together_linearise_exactly() {
        let model = Arc::new(vidyn_rbd::builders::pendulum_chain(3, true));
        let q = vec![0.3, -0.4, 0.2];
        // a rigid tether from the tip to a world anchor, of the length it has at q
        let tip = BodyPoint { body: Some(2), point: Vector3::new(0.0, 0.0, -1.0) };
        let mut st = crate::point::PointState::new(3);
        st.update(&model, &q, &[0.0; 3]);
        let tip_world = st.placements[2].act_point(&tip.point);
        let anchor = tip_world + Vector3::new(0.8, 0.0, 0.6);
        let tether = Constraint::Distance { a: BodyPoint { body: None, point: anchor }, b: tip, length: (tip_world - anchor).norm() };
        let vi = VariationalIntegrator::new(
            model,
            Scheme::midpoint(),
            0.01,
            Some(JointForces { damping: vec![0.1; 3], stiffness: vec![0.0; 3], rest: vec![0.0; 3] }),
        )
        .unwrap()
        .with_constraints(vec![tether])
        .unwrap()
        .with_kinematic(&[0])
        .unwrap();
        assert_linearisation_matches_differences(&vi, 0, &q, &[0.05, 0.1, -0.2], &[q[0] + 0.004, 0.3, -0.1], "tethered, joint 0 prescribed");
    }
}

mod schedule {
    use crate::test_common::constraint::{closed_configuration, four_bar_tree, loop_closure};
    use crate::test_common::integrator::assert_linearisation_matches_differences;
    use crate::test_common::lie_group::{assert_linearization_on_the_group, central_differences, floating_tree, start, tether_and_plane};
    use crate::test_common::schedule::*;
    use crate::*;
    use nalgebra::DMatrix;
    use std::sync::Arc;

    /// `∂λ/∂(q, p, u)` of step `k` ([`VariationalIntegrator::multiplier_jacobian`]; the step's
    /// impulse `Σ_β λ^β + μ_{k+1}`, module `momentum_projection`) against Richardson-extrapolated
    /// central differences of the multipliers of the solved step (`q` moved by `integrate`),
    /// `(4 D(h/2) − D(h))/3` with h = 2e-4 and Newton near its round-off floor: agreement to
    /// 1e-8 of the largest entry. Plain central differences err by truncation `∝ h²` plus the
    /// impulse's round-off over `h`, which meet too high for Simpson and Lobatto (on the
    /// four-bar's stance step, scale 0.52: 6.5e-7 / 6.8e-9 / 7.5e-9 at h = 1e-4 / 1e-5 / 1e-6 for
    /// `s = 2`, 2.0e-8 at best for `s = 3`); extrapolated, the `h²` term cancels and the error
    /// is round-off: 7e-11 / 2.4e-10 / 7.3e-10 for `s = 1, 2, 3` at h = 2e-4 (rising as h
    /// shrinks).
    fn assert_multiplier_jacobian(vi: &VariationalIntegrator, k: usize, q: &[f64], p: &[f64], u: &[f64], what: &str) {
        let (n, nq, m) = (vi.n(), vi.nq(), vi.constraints().len());
        let mut ws = vi.workspace();
        let (mut a, mut b, mut qn, mut pn) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), vec![0.0; nq], vec![0.0; n]);
        vi.linearize(&mut ws, StepInput::new(k, q, p, u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
        let exact = vi.multiplier_jacobian(&ws).clone();
        assert_eq!(exact.shape(), (m, 3 * n));
        let differences = |h: f64| central_differences(vi, k, q, p, u, h, |_, _, ws| vi.multipliers(ws).to_vec());
        let h = 2e-4;
        let fd = (differences(h / 2.0) * 4.0 - differences(h)) / 3.0;
        let scale = fd.amax().max(1e-3);
        assert!((&exact - &fd).amax() < 1e-8 * scale, "{what}, step {k}: ∂λ off by {:e} (scale {scale:e})", (&exact - &fd).amax());
        let active = vi.active_constraints(k).unwrap();
        for i in (0..m).filter(|i| !active.contains(i)) {
            assert!(exact.row(i).iter().all(|&x| x == 0.0), "{what}, step {k}: an inactive constraint's multiplier moves");
        }
    }

    /// `A`, `B` against central differences on every step of a phase sequence free → touchdown →
    /// stance → lift-off → free: the four-bar's loop closure as the contact (fixed base, module
    /// `constrained`), and the floating tree's tether and plane (module `chart_linearize`), from
    /// states of a rollout through the phases, every scheme (the interior impulses of Simpson
    /// and Lobatto `s = 3` with their Hessians, module `constrained`).
    #[test]
    fn linearization_holds_across_contact_switches() {
        let model = four_bar_tree();
        let closure = loop_closure(&model, false);
        let phases = masks(2, &[&[], &[0, 1], &[0, 1], &[], &[]]);
        for scheme in super::four_bar::schemes() {
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
        for scheme in super::four_bar::schemes() {
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
        let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.02, None)
            .unwrap()
            .with_newton(1e-15, 60)
            .unwrap()
            .with_constraints(contacts)
            .unwrap();
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
}
