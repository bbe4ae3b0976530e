//! The generic adapter [`SystemDynamics`]: on the minimal-coordinate VI it gives, bit for bit,
//! what the VI's own adapter [`ViDynamics`] gives (rollouts with and without a nominal,
//! single steps, Jacobians, contracted second order), on a fixed-base chain and on a floating
//! base; on the maximal integrator's joint coordinates ([`MaximalDynamics`]) its rollouts are
//! the integrator's own minimal rollout bit for bit (the knots carried from step to step).

use nalgebra::{Matrix3, Vector3};
use std::sync::Arc;
use vidyn_maximal::{models, rollout_minimal, MaximalIntegrator, Mechanism};
use vidyn_optim::{rollout_open_loop, Dynamics, MaximalDynamics, Nominal, SecondOrder, StateSpace, SystemDynamics, ViDynamics};
use vidyn_rbd::{Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};
use vidyn_vi::{Scheme, VariationalIntegrator};

/// Both adapters on `vi` with the same actuated joints, and an open-loop control sequence.
fn check_adapters_agree(model: Model, actuated: Vec<usize>, q0: &[f64], steps: usize) {
    let model = Arc::new(model);
    let vi = VariationalIntegrator::new(Arc::clone(&model), Scheme::trapezoid(), 0.01, None).unwrap();
    let ours = SystemDynamics::new(vi.clone(), StateSpace::of_model(&model), Some(actuated.clone())).unwrap();
    let theirs = ViDynamics::new(&vi, Some(actuated.clone())).unwrap();
    let (n, m) = (model.nv, actuated.len());
    let mut x0 = q0.to_vec();
    x0.extend((0..n).map(|i| 0.1 * (i as f64 + 1.0).sin()));
    let u: Vec<f64> = (0..steps * m).map(|k| 0.5 * (0.37 * k as f64).cos()).collect();
    let (x, _) = rollout_open_loop(&ours, &x0, &u).unwrap();
    assert_eq!(x, rollout_open_loop(&theirs, &x0, &u).unwrap().0, "rollouts");
    let (a, b) = ours.linearize(&x, &u).unwrap();
    assert_eq!((&a, &b), (&theirs.linearize(&x, &u).unwrap().0, &theirs.linearize(&x, &u).unwrap().1), "Jacobians");
    // a trial near the nominal: each Newton solve may start from its linear prediction
    let near = Nominal { x: &x, u: &u, a: &a, b: &b };
    let shifted: Vec<f64> = u.iter().map(|v| v + 1e-3).collect();
    let open = |k: usize, _: &[f64], uk: &mut [f64]| uk.copy_from_slice(&shifted[k * m..(k + 1) * m]);
    let (xs, _) = ours.rollout_near(&x0, steps, &mut { open }, &near).unwrap();
    assert_eq!(xs, theirs.rollout_near(&x0, steps, &mut { open }, &near).unwrap().0, "rollouts near a nominal");
    // single steps, and the contracted second order
    let nx = x0.len();
    let (mut one, mut other) = (vec![0.0; nx], vec![0.0; nx]);
    let w: Vec<f64> = (0..2 * n).map(|i| 1.0 - 0.1 * i as f64).collect();
    for k in [0, steps / 2, steps - 1] {
        let (xk, uk) = (&x[k * nx..(k + 1) * nx], &u[k * m..(k + 1) * m]);
        ours.step(k, xk, uk, None, &mut one).unwrap();
        theirs.step(k, xk, uk, None, &mut other).unwrap();
        assert_eq!(one, other, "step {k}");
        assert!(ours.has_second_order() && theirs.has_second_order());
        let (mut s1, mut s2) = (SecondOrder::zeros(2 * n, m), SecondOrder::zeros(2 * n, m));
        ours.second_order_contracted(k, xk, uk, &w, &mut s1).unwrap();
        theirs.second_order_contracted(k, xk, uk, &w, &mut s2).unwrap();
        assert_eq!(s1, s2, "second order, step {k}");
    }
}

#[test]
fn on_a_fixed_base_chain_the_generic_adapter_is_the_vi_adapter_bit_for_bit() {
    let model = vidyn_rbd::builders::pendulum_chain(4, false);
    check_adapters_agree(model, vec![0, 2, 3], &[0.3, -0.2, 0.4, 0.1], 30);
}

/// A free-flying base carrying two links on revolute joints, with gravity.
fn floating_two_link() -> Model {
    let mut b = ModelBuilder::new("floating two-link");
    let inertia = |m: f64| Inertia::new(m, Vector3::new(0.0, 0.0, -0.2), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.01)));
    let base = b.add_body(None, "base", Joint::FreeFlyer, Se3::identity(), inertia(3.0)).unwrap();
    let down = Se3::from_rpy(&Vector3::zeros(), Vector3::new(0.0, 0.0, -0.4));
    let first = b.add_body(Some(base), "first", Joint::Revolute { axis: Vector3::y() }, down, inertia(1.0)).unwrap();
    b.add_body(Some(first), "second", Joint::Revolute { axis: Vector3::x() }, down, inertia(0.5)).unwrap();
    b.build().unwrap()
}

#[test]
fn on_a_floating_base_the_generic_adapter_is_the_vi_adapter_bit_for_bit() {
    let model = floating_two_link();
    let q0 = [0.1, -0.2, 0.5, 0.0, 0.29552020666134, 0.0, 0.955336489125606, 0.3, -0.4];
    check_adapters_agree(model, vec![6, 7], &q0, 12);
}

#[test]
fn a_state_space_of_other_dimensions_is_refused() {
    let model = Arc::new(vidyn_rbd::builders::pendulum_chain(3, false));
    let vi = VariationalIntegrator::new(Arc::clone(&model), Scheme::trapezoid(), 0.01, None).unwrap();
    let e = SystemDynamics::new(vi, StateSpace::euclidean(5), None).unwrap_err().to_string();
    assert!(e.contains("5 entries") && e.contains("nq + np = 6"), "{e}");
}

#[test]
fn maximal_rollouts_carry_the_knots_as_the_integrators_own_rollout_does() {
    let model = Arc::new(models::cylinder_chain(3, true));
    let mi = MaximalIntegrator::new(Arc::new(Mechanism::from_model(model).unwrap()), 0.01).unwrap();
    let dynamics = MaximalDynamics::in_joint_coordinates(&mi, None).unwrap();
    let (q0, v0, steps) = ([0.4, -0.3, 0.2], [0.5, 0.2, -0.1], 40);
    let u: Vec<f64> = (0..3 * steps).map(|k| 0.3 * ((k / 3) as f64 * 0.2).sin()).collect();
    let x0: Vec<f64> = q0.iter().chain(&v0).copied().collect();
    let (x, _) = rollout_open_loop(&dynamics, &x0, &u).unwrap();
    let traj = rollout_minimal(&mi, &vidyn_batch::Control::new(), &q0, &v0, &u, steps).unwrap();
    // (the knot's own joint coordinates at k = 0 are x0's to round-off)
    for k in 1..=steps {
        assert_eq!(&x[6 * k..6 * k + 3], &traj.q[k * traj.nq..k * traj.nq + 3], "step {k}");
    }
    // a single step rebuilds the knots from (q, v) and starts Newton from zero multipliers:
    // the same motion to the Newton tolerance (1e-12 on the scaled residual), so q within
    // 1e-10 and v = Δq/Δt within 1e-10/Δt
    let mut next = [0.0; 6];
    dynamics.step(5, &x[30..36], &u[15..18], None, &mut next).unwrap();
    for (i, (a, b)) in next.iter().zip(&x[36..42]).enumerate() {
        assert!((a - b).abs() < if i < 3 { 1e-10 } else { 1e-8 }, "entry {i}: {a} vs {b}");
    }
}
