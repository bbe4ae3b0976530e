use crate::*;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::Model;

/// `model`'s damped and sprung integrator with a root-side and a leaf-side joint prescribed
/// (joints 1 and n−1), and a random `(q, p, u)` whose kinematic inputs move those two joints a
/// little from `q`.
pub(crate) fn prescribed_case(model: &Arc<Model>, sc: Scheme, rng: &mut ChaCha8Rng) -> (VariationalIntegrator, Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = model.nv;
    let forces = JointForces { damping: vec![0.2; n], stiffness: vec![0.7; n], rest: vec![0.1; n] };
    let vi = VariationalIntegrator::new(model.clone(), sc, 0.02, Some(forces)).unwrap().with_kinematic(&[1, n - 1]).unwrap();
    let q: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let p: Vec<f64> = (0..n).map(|_| rng.random_range(-0.5..0.5)).collect();
    let mut u: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    u[1] = q[1] + 0.01;
    u[n - 1] = q[n - 1] - 0.02;
    (vi, q, p, u)
}
