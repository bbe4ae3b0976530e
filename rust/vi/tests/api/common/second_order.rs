//! Helpers of the second-order derivatives (`second_order_tests`).

use crate::reference::DenseOracle;
use crate::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::{Joint, Model};

pub(crate) fn one_dof() -> Vec<Joint> {
    Joint::examples().into_iter().filter(|j| j.nv() == 1).collect()
}

pub(crate) fn random(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| scale * rng.random_range(-1.0..1.0)).collect()
}

pub(crate) fn schemes() -> Vec<(&'static str, Scheme)> {
    vec![("trapezoid", Scheme::trapezoid()), ("simpson", Scheme::simpson()), ("midpoint", Scheme::midpoint())]
}

/// An integrator with random damping, springs and rest positions, and a random state and
/// control.
pub(crate) fn setup(model: Arc<Model>, sc: Scheme, seed: u64) -> (VariationalIntegrator, Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = model.nv;
    let forces = JointForces {
        damping: random(&mut rng, n, 0.5).iter().map(|x| x.abs()).collect(),
        stiffness: random(&mut rng, n, 3.0).iter().map(|x| x.abs()).collect(),
        rest: random(&mut rng, n, 0.5),
    };
    // Newton to round-off: the differences below divide the solver's error by h
    let vi = VariationalIntegrator::new(model, sc, 0.02, Some(forces)).unwrap().with_newton(1e-15, 60).unwrap();
    let q = random(&mut rng, n, 1.0);
    let v = random(&mut rng, n, 1.5);
    let u = random(&mut rng, n, 2.0);
    let mut p = vec![0.0; n];
    vi.momentum(&mut vi.workspace(), &q, &v, &mut p).unwrap();
    (vi, q, p, u)
}

/// `q_{k+1}` by Newton's method with the dense oracle's direction (formed `J`, LU), to
/// round-off. Passed as the `guess` of the step, it makes the step converge in 0 iterations,
/// so these tests do not depend on the B.1 Newton direction (tested on its own elsewhere).
pub(crate) fn dense_solve(vi: &VariationalIntegrator, q: &[f64], p: &[f64], u: &[f64]) -> Vec<f64> {
    let (n, sc) = (vi.n(), vi.scheme().clone());
    let mut ws = vi.workspace();
    let mut oracle = DenseOracle::new(vi);
    let mut v = vec![0.0; n];
    vi.velocity(&mut ws, q, p, &mut v).unwrap();
    let mut z: Vec<f64> = (1..=sc.s).flat_map(|g| (0..n).map(move |i| (g, i))).map(|(g, i)| q[i] + sc.nodes[g] * vi.dt() * v[i]).collect();
    let (mut dz, mut r) = (vec![0.0; z.len()], vec![0.0; z.len()]);
    let scale = p.iter().fold(1.0_f64, |m, x| m.max(x.abs()));
    for _ in 0..40 {
        if vi.residual(&mut ws, q, p, u, &z, &mut r).unwrap() <= 1e-14 * scale {
            break;
        }
        oracle.newton_direction(&mut ws, StepInput::new(0, q, p, u), &z, &mut dz).unwrap();
        for (a, d) in z.iter_mut().zip(&dz) {
            *a += d;
        }
    }
    let mut qn = vec![0.0; n];
    sc.endpoint_from(q, &z, &mut qn);
    qn
}
