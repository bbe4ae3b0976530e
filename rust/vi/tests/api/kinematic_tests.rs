//! Kinematic (prescribed) joints (Johnson 2012 §4.7): a pendulum on a cart whose motion is
//! prescribed converges to the continuous solution with the VI's order, the prescribed joint
//! follows its input exactly, and the linearisation (with and without constraints) matches
//! central differences.

use crate::common::integrator::assert_linearisation_matches_differences;
use crate::common::kinematic::prescribed_case;
use crate::*;
use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{cartpole, random_tree};
use vidyn_rbd::Joint;

/// Cart motion `ρ(t) = A sin(ωt)` and its derivatives.
const AMP: f64 = 0.4;

const OMEGA: f64 = 3.0;

fn rho(t: f64) -> (f64, f64, f64) {
    (AMP * (OMEGA * t).sin(), AMP * OMEGA * (OMEGA * t).cos(), -AMP * OMEGA * OMEGA * (OMEGA * t).sin())
}

/// The pole's angle at `t_end` from the continuous dynamics with the cart prescribed: the pole
/// row of `τ = RNEA(q, v, a) = 0` is linear in `θ̈`, integrated by RK4 at a step far below
/// the VI's (an independent oracle: neither the VI nor its discrete Lagrangian is used).
fn continuous_pole(model: &vidyn_rbd::Model, theta0: f64, t_end: f64, steps: usize) -> f64 {
    let mut ws = model.workspace();
    let (cart, pole) = (model.joint_index("cart").unwrap(), model.joint_index("pole").unwrap());
    let mut accel = |t: f64, th: f64, om: f64| {
        let (r, rd, rdd) = rho(t);
        let mut q = [0.0; 2];
        let mut v = [0.0; 2];
        let mut a = [0.0; 2];
        (q[cart], q[pole], v[cart], v[pole], a[cart]) = (r, th, rd, om, rdd);
        let bias = vidyn_rbd::rnea(model, &mut ws, &q, &v, &a, None).unwrap()[pole];
        a[pole] = 1.0;
        let with_unit = vidyn_rbd::rnea(model, &mut ws, &q, &v, &a, None).unwrap()[pole];
        -bias / (with_unit - bias)
    };
    let h = t_end / steps as f64;
    let (mut th, mut om) = (theta0, 0.0);
    for k in 0..steps {
        let t = k as f64 * h;
        let k1 = (om, accel(t, th, om));
        let k2 = (om + 0.5 * h * k1.1, accel(t + 0.5 * h, th + 0.5 * h * k1.0, om + 0.5 * h * k1.1));
        let k3 = (om + 0.5 * h * k2.1, accel(t + 0.5 * h, th + 0.5 * h * k2.0, om + 0.5 * h * k2.1));
        let k4 = (om + h * k3.1, accel(t + h, th + h * k3.0, om + h * k3.1));
        th += h / 6.0 * (k1.0 + 2.0 * k2.0 + 2.0 * k3.0 + k4.0);
        om += h / 6.0 * (k1.1 + 2.0 * k2.1 + 2.0 * k3.1 + k4.1);
    }
    th
}

/// The VI's pole angle at `t_end` with `steps` steps, cart prescribed at the step times.
fn vi_pole(sc: Scheme, theta0: f64, t_end: f64, steps: usize) -> f64 {
    let model = Arc::new(cartpole());
    let (cart, pole) = (model.joint_index("cart").unwrap(), model.joint_index("pole").unwrap());
    let dt = t_end / steps as f64;
    let vi = VariationalIntegrator::new(model, sc, dt, Some(JointForces::none(2))).unwrap().with_kinematic(&[cart]).unwrap();
    let mut q = vec![0.0; 2];
    q[pole] = theta0;
    // the pole at rest; the cart's slot of p holds its velocity
    let mut v = vec![0.0; 2];
    v[cart] = rho(0.0).1;
    let mut p = vec![0.0; 2];
    vi.momentum(&mut vi.workspace(), &q, &v, &mut p).unwrap();
    // the pole's momentum must match the pole at rest while the cart moves: p = M v
    let mut u = vec![0.0; 2 * steps];
    for k in 0..steps {
        u[2 * k + cart] = rho((k + 1) as f64 * dt).0;
    }
    let traj = rollout(&vi, &q, &p, &u).unwrap();
    for k in 0..=steps {
        assert!((traj.q_at(k)[cart] - rho(k as f64 * dt).0).abs() < 1e-15, "the cart follows its input exactly");
    }
    traj.q_at(steps)[pole]
}

#[test]
fn prescribed_cart_converges_to_the_continuous_solution_at_order_two() {
    let model = cartpole();
    let (theta0, t_end) = (0.5, 2.0);
    let exact = continuous_pole(&model, theta0, t_end, 20_000);
    for sc in [Scheme::midpoint(), Scheme::trapezoid()] {
        let errors: Vec<f64> = [100, 200, 400].iter().map(|&steps| (vi_pole(sc.clone(), theta0, t_end, steps) - exact).abs()).collect();
        let orders: Vec<f64> = errors.windows(2).map(|w| (w[0] / w[1]).log2()).collect();
        println!("kinematic cart: errors {errors:?}, orders {orders:.2?}");
        for o in &orders {
            assert!((o - 2.0).abs() < 0.25, "observed order {o} (errors {errors:?})");
        }
    }
}

#[test]
fn linearisation_with_kinematic_joints_matches_finite_differences() {
    let kinds: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    for seed in [3, 11] {
        let model = Arc::new(random_tree(6, seed, &kinds));
        for sc in [Scheme::midpoint(), Scheme::trapezoid()] {
            // a root-side and a leaf-side joint are prescribed
            let (vi, q, p, u) = prescribed_case(&model, sc, &mut rng);
            assert_linearisation_matches_differences(&vi, 0, &q, &p, &u, &format!("{} s={}", model.name, vi.scheme().s));
        }
    }
}

#[test]
fn kinematic_errors() {
    let model = Arc::new(cartpole());
    let simpson = VariationalIntegrator::new(model.clone(), Scheme::simpson(), 0.01, None).unwrap();
    assert!(matches!(simpson.with_kinematic(&[0]), Err(ViError::InvalidParameter(_))));
    let mid = || VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.01, None).unwrap();
    assert!(matches!(mid().with_kinematic(&[2]), Err(ViError::InvalidParameter(_))));
    assert!(matches!(mid().with_kinematic(&[0, 1]), Err(ViError::InvalidParameter(_))));
    // the state conversions follow the kinematic slot convention, or refuse
    let vi = mid().with_kinematic(&[0]).unwrap();
    let mut ws = vi.workspace();
    let (q, v) = ([0.1, 0.4], [0.7, -0.3]);
    let (mut p, mut p2, mut jac) = ([0.0; 2], [0.0; 2], DMatrix::zeros(4, 4));
    vi.momentum(&mut ws, &q, &v, &mut p).unwrap();
    vi.momentum_with_jacobian(&mut ws, &q, &v, &mut p2, &mut jac).unwrap();
    assert_eq!(p, p2);
    assert_eq!(p[0], v[0]);
    assert_eq!((jac[(2, 0)], jac[(2, 1)], jac[(2, 2)], jac[(2, 3)]), (0.0, 0.0, 1.0, 0.0));
    assert!(matches!(vi.velocity_with_jacobian(&mut ws, &q, &p, &mut p2, &mut jac), Err(ViError::InvalidParameter(_))));
}
