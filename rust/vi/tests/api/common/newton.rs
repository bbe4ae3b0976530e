//! Helpers of the Newton direction and the linearisation against the dense path (`newton_tests`).

use crate::*;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{Joint, Model};
use vidyn_spatial::{Force, Vector3};

pub(crate) fn one_dof() -> Vec<Joint> {
    Joint::examples().into_iter().filter(|j| j.nv() == 1).collect()
}

pub(crate) fn models() -> Vec<Arc<Model>> {
    vec![
        Arc::new(pendulum_chain(4, false)),
        Arc::new(random_tree(6, 3, &one_dof())),
        Arc::new(random_tree(12, 11, &one_dof())),
        Arc::new(random_tree(20, 29, &one_dof())),
    ]
}

pub(crate) fn random(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| scale * rng.random_range(-1.0..1.0)).collect()
}

pub(crate) fn forcing(rng: &mut ChaCha8Rng, n: usize) -> JointForces {
    JointForces {
        damping: random(rng, n, 0.8).iter().map(|x| x.abs()).collect(),
        stiffness: random(rng, n, 3.0).iter().map(|x| x.abs()).collect(),
        rest: random(rng, n, 1.0),
    }
}

/// A random state and unknowns `z` near (not at) the solution: `q^γ = q + c_γ Δt v + noise`.
pub(crate) fn problem(vi: &VariationalIntegrator, rng: &mut ChaCha8Rng) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = vi.n();
    let q = random(rng, n, 1.0);
    let v = random(rng, n, 2.0);
    let u = random(rng, n, 1.0);
    let mut p = vec![0.0; n];
    vi.momentum(&mut vi.workspace(), &q, &v, &mut p).unwrap();
    let sc = vi.scheme();
    let mut z = vec![0.0; sc.s * n];
    for g in 1..=sc.s {
        for i in 0..n {
            z[(g - 1) * n + i] = q[i] + sc.nodes[g] * vi.dt() * v[i] + 0.02 * rng.random_range(-1.0..1.0);
        }
    }
    (q, p, u, z)
}

/// Every family of schemes: the midpoint rule (mixed rows) and Lobatto s = 1, 2, 3.
pub(crate) fn schemes() -> Vec<Scheme> {
    vec![Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()]
}

/// Every scheme, each without and with random body wrenches.
pub(crate) fn with_and_without_wrenches() -> Vec<(Scheme, bool)> {
    schemes().into_iter().flat_map(|sc| [(sc.clone(), false), (sc, true)]).collect()
}

/// Random wrenches of O(1–3) N and N·m, one per body.
pub(crate) fn wrenches(rng: &mut ChaCha8Rng, n: usize) -> Vec<Force> {
    (0..n).map(|_| Force::new(Vector3::from_fn(|_, _| 3.0 * rng.random_range(-1.0..1.0)), Vector3::from_fn(|_, _| rng.random_range(-1.0..1.0)))).collect()
}

/// An integrator with random damping and springs, and random body wrenches if `wrenched`, on
/// the recursive path (B.1/B.2) whatever its size, so that the dense oracle checks it.
pub(crate) fn integrator(model: &Arc<Model>, sc: Scheme, dt: f64, rng: &mut ChaCha8Rng, wrenched: bool) -> VariationalIntegrator {
    let n = model.nv;
    let vi = VariationalIntegrator::new(model.clone(), sc, dt, Some(forcing(rng, n))).unwrap().with_dense_max(0);
    if wrenched {
        vi.with_body_wrenches(wrenches(rng, n)).unwrap()
    } else {
        vi
    }
}

pub(crate) fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0_f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter().zip(b).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs())) / scale
}
