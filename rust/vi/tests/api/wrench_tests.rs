//! Constant body wrenches ([`VariationalIntegrator::with_body_wrenches`]): the generalised
//! force against `vidyn_rbd::external_joint_torques`, the DEL blocks against central
//! differences of the rows, the O(n) Newton direction, the Jacobian–vector product and the
//! O(n²) linearisation against the dense oracle and central differences of the solved step,
//! and the motion against RK4 of `vidyn_rbd::aba` with `fext` (observed order 2s).

use crate::common::newton::{integrator, models, problem, rel_err};
use crate::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::pendulum_chain;
use vidyn_rbd::Model;
use vidyn_spatial::{Force, Vector3};

#[test]
fn linearisation_with_wrenches_matches_finite_differences_of_the_solved_step() {
    let mut rng = ChaCha8Rng::seed_from_u64(26);
    for model in models() {
        for sc in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
            let vi = integrator(&model, sc.clone(), 0.02, &mut rng, true);
            let (q, p, u, _) = problem(&vi, &mut rng);
            crate::common::integrator::assert_linearisation_matches_differences(&vi, 0, &q, &p, &u, &format!("{} s={}", model.name, sc.s));
        }
    }
}

/// `q(T)` of `q̈ = aba(q, q̇, τ, Some(fext))` by RK4 with `steps` steps (the continuous oracle).
fn continuous(model: &Model, q0: &[f64], v0: &[f64], tau: &[f64], fext: &[Force], t_end: f64, steps: usize) -> Vec<f64> {
    let mut ws = model.workspace();
    let n = model.nv;
    let mut f = |q: &[f64], v: &[f64]| vidyn_rbd::aba(model, &mut ws, q, v, tau, Some(fext)).unwrap().to_vec();
    let h = t_end / steps as f64;
    let (mut q, mut v) = (q0.to_vec(), v0.to_vec());
    let axpy = |x: &[f64], a: f64, y: &[f64]| x.iter().zip(y).map(|(x, y)| x + a * y).collect::<Vec<_>>();
    for _ in 0..steps {
        let (k1q, k1v) = (v.clone(), f(&q, &v));
        let (q2, v2) = (axpy(&q, 0.5 * h, &k1q), axpy(&v, 0.5 * h, &k1v));
        let (k2q, k2v) = (v2.clone(), f(&q2, &v2));
        let (q3, v3) = (axpy(&q, 0.5 * h, &k2q), axpy(&v, 0.5 * h, &k2v));
        let (k3q, k3v) = (v3.clone(), f(&q3, &v3));
        let (q4, v4) = (axpy(&q, h, &k3q), axpy(&v, h, &k3v));
        let (k4q, k4v) = (v4.clone(), f(&q4, &v4));
        for i in 0..n {
            q[i] += h / 6.0 * (k1q[i] + 2.0 * k2q[i] + 2.0 * k3q[i] + k4q[i]);
            v[i] += h / 6.0 * (k1v[i] + 2.0 * k2v[i] + 2.0 * k3v[i] + k4v[i]);
        }
    }
    q
}

/// A 3-D triple pendulum with constant body-frame wrenches and constant joint torques: the
/// VI's `q(T)` converges to RK4 of `aba` with `fext` (at 20 000 steps, error ~1e-17, ≪ the VI's) with
/// observed order 2 for the midpoint and trapezoid rules and 4 for Simpson (from 20 steps: at 10
/// it is still pre-asymptotic, 3.7), while the wrenches move `q(T)` by 0.27 rad.
#[test]
fn wrenched_pendulum_converges_to_aba_with_fext_at_order_2s() {
    let model = Arc::new(pendulum_chain(3, false));
    let n = model.nv;
    let fext = vec![
        Force::new(Vector3::new(2.0, -1.0, 0.5), Vector3::new(0.3, 0.0, -0.4)),
        Force::new(Vector3::new(0.0, 1.5, -3.0), Vector3::new(-0.2, 0.5, 0.1)),
        Force::new(Vector3::new(-1.0, 0.0, 4.0), Vector3::new(0.0, -0.3, 0.2)),
    ];
    let (q0, v0, tau) = (vec![0.4, -0.3, 0.6], vec![0.5, 0.2, -0.4], vec![0.3, -0.2, 0.1]);
    let t_end = 1.0;
    let exact = continuous(&model, &q0, &v0, &tau, &fext, t_end, 20_000);
    let free = continuous(&model, &q0, &v0, &tau, &vec![Force::zero(); n], t_end, 20_000);
    let effect = rel_err(&free, &exact) * exact.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
    assert!(effect > 0.1, "the wrenches barely move the pendulum: {effect}");
    for (sc, order, coarse) in [(Scheme::midpoint(), 2.0, 50), (Scheme::trapezoid(), 2.0, 50), (Scheme::simpson(), 4.0, 20)] {
        let errors: Vec<f64> = [coarse, 2 * coarse, 4 * coarse]
            .iter()
            .map(|&steps| {
                let vi = VariationalIntegrator::new(model.clone(), sc.clone(), t_end / steps as f64, Some(JointForces::none(n)))
                    .unwrap()
                    .with_body_wrenches(fext.clone())
                    .unwrap();
                let mut p0 = vec![0.0; n];
                vi.momentum(&mut vi.workspace(), &q0, &v0, &mut p0).unwrap();
                let u: Vec<f64> = (0..steps).flat_map(|_| tau.clone()).collect();
                let traj = rollout(&vi, &q0, &p0, &u).unwrap();
                traj.q_at(steps).iter().zip(&exact).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()))
            })
            .collect();
        let orders: Vec<f64> = errors.windows(2).map(|w| (w[0] / w[1]).log2()).collect();
        println!("wrenched pendulum s={} (mixed rows: {}): errors {errors:?}, orders {orders:.2?}, wrench effect {effect:.2}", sc.s, sc.mixes_rows());
        assert!(errors[2] < 1e-2 * effect, "error {} vs wrench effect {effect}", errors[2]);
        for o in &orders {
            assert!((o - order).abs() < 0.25, "s={}: observed order {o} (errors {errors:?})", sc.s);
        }
    }
}

#[test]
fn wrench_errors_and_second_order_refusal() {
    let model = Arc::new(pendulum_chain(3, false));
    let vi = || VariationalIntegrator::new(model.clone(), Scheme::trapezoid(), 0.01, None).unwrap();
    assert!(matches!(vi().with_body_wrenches(vec![Force::zero(); 2]), Err(ViError::InvalidParameter(_))));
    let mut bad = vec![Force::zero(); 3];
    bad[1].angular.z = f64::NAN;
    assert!(matches!(vi().with_body_wrenches(bad), Err(ViError::InvalidParameter(_))));
    let w = vec![Force::new(Vector3::new(1.0, 0.0, 0.0), Vector3::zeros()); 3];
    let wrenched = vi().with_body_wrenches(w.clone()).unwrap();
    assert_eq!(wrenched.body_wrenches(), &w[..]);
    assert!(vi().body_wrenches().is_empty());
    // second order: an error, not the derivatives of the wrench-free map
    let mut so = wrenched.second_order_workspace();
    let (q, p, u) = ([0.1, 0.2, 0.3], [0.0; 3], [0.0; 3]);
    let r = wrenched.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u));
    assert!(matches!(r, Err(ViError::NoSecondOrder { ref features }) if features == "body wrenches"), "{:?}", r.map(|_| ()));
    let r = wrenched.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &[0.1; 6]);
    assert!(matches!(r, Err(ViError::NoSecondOrder { .. })), "{:?}", r.map(|_| ()));
    // removing them restores second order
    let plain = wrenched.with_body_wrenches(Vec::new()).unwrap();
    let mut so = plain.second_order_workspace();
    assert!(plain.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u)).is_ok());
}
