//! iLQR on states whose configuration lies on Lie groups (a free-flying body with quaternions):
//! the manifold cost's derivatives in tangent coordinates, and a reorientation through the
//! pitch of 90° at which Euler angles lock.

use nalgebra::{DMatrix, Matrix3, UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_optim::{ilqr, Cost, IlqrOptions, QuadraticCost, StageDerivatives, StateSpace, ViDynamics};
use vidyn_rbd::{Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};
use vidyn_vi::{Scheme, VariationalIntegrator};

/// A free-flying box (mass 2 kg, inertia diag(0.1, 0.2, 0.3)), no gravity.
fn free_box() -> Model {
    let mut b = ModelBuilder::new("free box");
    b.gravity(Vector3::zeros());
    b.add_body(None, "box", Joint::FreeFlyer, Se3::identity(), Inertia::new(2.0, Vector3::zeros(), Matrix3::from_diagonal(&Vector3::new(0.1, 0.2, 0.3))))
        .unwrap();
    b.build().unwrap()
}

/// `[x y z qx qy qz qw]` of a rotation about `axis` by `angle` at position `p`.
fn pose(p: [f64; 3], axis: Vector3<f64>, angle: f64) -> Vec<f64> {
    let r = UnitQuaternion::from_axis_angle(&nalgebra::Unit::new_normalize(axis), angle);
    vec![p[0], p[1], p[2], r.i, r.j, r.k, r.w]
}

/// The quadratic cost on `x ⊖ x_ref`: its gradient against central differences along
/// `x ⊕ h e_j` (h = 1e-6: truncation ~h², round-off ~ε/h ≈ 1e-10), and its Hessian the
/// Gauss–Newton `Jᵀ Q J` with `J` the derivative of `x ⊖ x_ref` (also by differences), at a
/// state 2 rad from the reference, where `J` is far from the identity.
#[test]
fn the_manifold_cost_has_tangent_derivatives() {
    let model = Arc::new(free_box());
    let space = StateSpace::of_model(&model);
    assert_eq!((space.nx(), space.ndx()), (13, 12));
    let w = DMatrix::from_fn(12, 12, |i, j| if i == j { 1.0 + i as f64 } else { 0.05 });
    let mut x_ref = pose([0.1, 0.2, 0.3], Vector3::new(0.0, 1.0, 0.2), 0.4);
    x_ref.extend([0.5; 6]);
    let cost = QuadraticCost::on_space(space.clone(), vec![w.clone()], vec![DMatrix::identity(6, 6)], w.clone(), x_ref.clone(), vec![]).unwrap();
    let mut x = pose([1.0, -0.5, 0.7], Vector3::new(1.0, 0.3, -0.4), 2.4);
    x.extend([0.3, -0.2, 0.1, 0.4, 0.0, -0.6]);
    let u = [0.0; 6];
    let mut d = StageDerivatives::zeros(12, 6);
    cost.running_derivatives(0, &x, &u, &mut d).unwrap();
    assert_eq!(d.l.to_bits(), cost.running_value(0, &x, &u).unwrap().to_bits());
    let h = 1e-6;
    let moved = |j: usize, eps: f64| {
        let mut dx = [0.0; 12];
        dx[j] = eps;
        let mut out = vec![0.0; 13];
        space.integrate(&x, &dx, &mut out);
        out
    };
    let mut jac = DMatrix::zeros(12, 12);
    for j in 0..12 {
        let (xp, xm) = (moved(j, h), moved(j, -h));
        let fd = (cost.running_value(0, &xp, &u).unwrap() - cost.running_value(0, &xm, &u).unwrap()) / (2.0 * h);
        assert!((fd - d.lx[j]).abs() < 1e-7 * (1.0 + fd.abs()), "l_x[{j}]: {} vs {fd}", d.lx[j]);
        let (mut dp, mut dm) = (vec![0.0; 12], vec![0.0; 12]);
        space.difference(&x_ref, &xp, &mut dp);
        space.difference(&x_ref, &xm, &mut dm);
        for r in 0..12 {
            jac[(r, j)] = (dp[r] - dm[r]) / (2.0 * h);
        }
    }
    let gauss_newton = jac.transpose() * &w * &jac;
    assert!((&d.lxx - &gauss_newton).amax() < 1e-7 * gauss_newton.amax(), "{}", (&d.lxx - &gauss_newton).amax());
}

/// The free box's half turn: the start at rest and the goal, turned by 180° about y and moved
/// by 1 m along x, at rest.
fn half_turn() -> (Vec<f64>, Vec<f64>) {
    let mut x0 = pose([0.0, 0.0, 0.0], Vector3::y(), 0.0);
    x0.extend([0.0; 6]);
    let mut x_goal = pose([1.0, 0.0, 0.0], Vector3::y(), std::f64::consts::PI);
    x_goal.extend([0.0; 6]);
    (x0, x_goal)
}

/// Its cost on the state manifold: a light state and control regularisation, a heavy terminal
/// weight on the goal.
fn half_turn_cost(space: &StateSpace, n: usize, x_goal: &[f64]) -> QuadraticCost {
    let q_run = DMatrix::from_diagonal_element(2 * n, 2 * n, 1e-3);
    let q_end = DMatrix::from_diagonal_element(2 * n, 2 * n, 1e5);
    QuadraticCost::on_space(space.clone(), vec![q_run], vec![DMatrix::from_diagonal_element(n, n, 1e-2)], q_end, x_goal.to_vec(), vec![]).unwrap()
}

/// iLQR turns a free box by 180° about its y axis (through pitch 90°, where a Z-Y-X chart
/// locks) and moves it by 1 m in 1 s with body-frame wrenches, on the Lie group: converged,
/// the cost falling every iteration, and the final pose within 1e-2 rad and 1e-2 m of the
/// target (the weights trade it against effort; measured 2.4e-4 m and 7.4e-6 rad after 13
/// iterations with every scheme).
#[test]
fn ilqr_reorients_a_free_body_through_the_euler_singularity() {
    let model = Arc::new(free_box());
    let (n, steps) = (model.nv, 50);
    let (x0, x_goal) = half_turn();
    for scheme in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
        let vi = VariationalIntegrator::new(Arc::clone(&model), scheme.clone(), 1.0 / steps as f64, None).unwrap();
        let dynamics = ViDynamics::new(&vi, None).unwrap();
        let space = StateSpace::of_model(&model);
        let cost = half_turn_cost(&space, n, &x_goal);
        let options = IlqrOptions { max_iterations: 100, tolerance: 1e-9, ..IlqrOptions::default() };
        let res = ilqr(&dynamics, &cost, &x0, &vec![0.0; steps * n], &options).unwrap();
        assert!(res.converged, "s = {}: {}", scheme.s, res.message);
        assert!(res.cost_history.windows(2).all(|w| w[1] < w[0]), "s = {}: {:?}", scheme.s, res.cost_history);
        let last = &res.x[steps * 13..];
        let mut miss = vec![0.0; 12];
        space.difference(&x_goal, last, &mut miss);
        let (position, angle) = (miss[..3].iter().map(|v| v * v).sum::<f64>().sqrt(), miss[3..6].iter().map(|v| v * v).sum::<f64>().sqrt());
        assert!(position < 1e-2 && angle < 1e-2, "s = {}: {position} m, {angle} rad off ({} iterations)", scheme.s, res.iterations);
        // the pitch passed 90° on the way
        let pitch = |xk: &[f64]| UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(xk[6], xk[3], xk[4], xk[5])).euler_angles().1;
        assert!(res.x.chunks_exact(13).any(|xk| pitch(xk).abs() > 1.5), "s = {}", scheme.s);
    }
}

/// Full DDP on the Lie group (the VI's second order there: central differences of its exact
/// first order, `vidyn_vi`'s module `chart_second_order`) against iLQR, on the free box's half
/// turn above with its weights, both from a rough iLQR solution (expected decrease ≤ 1e-4·J) to
/// 1e-11·J, as the cart-pole test of `vi.rs`: the same optimum, DDP in fewer iterations
/// (measured 2 against 12 for every scheme; DDP's expected decrease 9.6e-4 → 1.4e-7 → 1.8e-14,
/// quadratic), and its decrease near the optimum what its model predicts (measured
/// actual/expected 1.00009).
#[test]
fn ddp_reorients_the_free_body_in_fewer_iterations_than_ilqr() {
    use vidyn_optim::Method;
    let model = Arc::new(free_box());
    let (n, steps) = (model.nv, 50);
    let (x0, x_goal) = half_turn();
    for (name, scheme) in [("midpoint", Scheme::midpoint()), ("trapezoid", Scheme::trapezoid())] {
        let vi = VariationalIntegrator::new(Arc::clone(&model), scheme, 1.0 / steps as f64, None).unwrap();
        let dynamics = ViDynamics::new(&vi, None).unwrap();
        let cost = half_turn_cost(&StateSpace::of_model(&model), n, &x_goal);
        let rough =
            ilqr(&dynamics, &cost, &x0, &vec![0.0; steps * n], &IlqrOptions { max_iterations: 100, tolerance: 1e-4, ..IlqrOptions::default() }).unwrap();
        assert!(rough.converged, "{}", rough.message);
        let run =
            |method| ilqr(&dynamics, &cost, &x0, &rough.u, &IlqrOptions { method, max_iterations: 200, tolerance: 1e-11, ..IlqrOptions::default() }).unwrap();
        let (il, ddp) = (run(Method::Ilqr), run(Method::Ddp));
        assert!(il.converged && ddp.converged, "{name}: {} / {}", il.message, ddp.message);
        assert!((il.cost - ddp.cost).abs() < 1e-9 * il.cost, "{name}: {} vs {}", il.cost, ddp.cost);
        assert!(ddp.iterations < il.iterations, "{name}: DDP {} vs iLQR {} iterations", ddp.iterations, il.iterations);
        let last = ddp.log.iter().rfind(|l| l.alpha == 1.0 && l.actual_reduction > 1e-9).expect("DDP takes full steps near the optimum");
        let ratio = last.actual_reduction / last.expected_reduction_alpha;
        println!("{name}: iLQR {} iterations, DDP {} (actual/expected {ratio}), J {} vs {}", il.iterations, ddp.iterations, il.cost, ddp.cost);
        assert!((ratio - 1.0).abs() < 1e-3, "{name}: DDP actual/expected = {ratio}");
    }
}
