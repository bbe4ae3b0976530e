//! Helpers of the integrator's checks against finite differences (`integrator_tests`).

use crate::*;
use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{pendulum_chain, random_tree};
use vidyn_rbd::{Joint, Model};

pub(crate) fn one_dof() -> Vec<Joint> {
    Joint::examples().into_iter().filter(|j| j.nv() == 1).collect()
}

pub(crate) fn models() -> Vec<Arc<Model>> {
    vec![Arc::new(pendulum_chain(3, false)), Arc::new(random_tree(5, 3, &one_dof())), Arc::new(random_tree(8, 11, &one_dof()))]
}

pub(crate) fn random(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| scale * rng.random_range(-1.0..1.0)).collect()
}

pub(crate) fn state(vi: &VariationalIntegrator, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = vi.n();
    let q = random(&mut rng, n, 1.0);
    let v = random(&mut rng, n, 1.0);
    let mut p = vec![0.0; n];
    vi.momentum(&mut vi.workspace(), &q, &v, &mut p).unwrap();
    (q, p)
}

/// `A`, `B` of [`VariationalIntegrator::linearize`] at `(q, p, u)` against central differences
/// of the solved step (h = 1e-6: truncation ≈ 1e-12, the step's Newton tolerance 1e-12
/// relative gives ≈ 1e-6 round-off in the quotient; tolerance 1e-6 relative). Returns the
/// next state.
pub(crate) fn assert_linearisation_matches_differences(
    vi: &VariationalIntegrator,
    k: usize,
    q: &[f64],
    p: &[f64],
    u: &[f64],
    label: &str,
) -> (Vec<f64>, Vec<f64>) {
    let n = vi.n();
    let mut ws = vi.workspace();
    let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
    let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
    vi.linearize(&mut ws, StepInput::new(k, q, p, u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
    let mut step = |x: &[f64], u: &[f64]| {
        let (mut q1, mut p1) = (vec![0.0; n], vec![0.0; n]);
        vi.step(&mut ws, StepInput::new(k, &x[..n], &x[n..], u), &mut q1, &mut p1).unwrap();
        [q1, p1].concat()
    };
    let h = 1e-6;
    let x0 = [q.to_vec(), p.to_vec()].concat();
    for c in 0..3 * n {
        let (fp, fm) = if c < 2 * n {
            let (mut xp, mut xm) = (x0.clone(), x0.clone());
            xp[c] += h;
            xm[c] -= h;
            (step(&xp, u), step(&xm, u))
        } else {
            let (mut up, mut um) = (u.to_vec(), u.to_vec());
            up[c - 2 * n] += h;
            um[c - 2 * n] -= h;
            (step(&x0, &up), step(&x0, &um))
        };
        for r in 0..2 * n {
            let fd = (fp[r] - fm[r]) / (2.0 * h);
            let got = if c < 2 * n { a[(r, c)] } else { b[(r, c - 2 * n)] };
            assert!((got - fd).abs() < 1e-6 * (1.0 + fd.abs()), "{label}: step {k}, column {c} row {r}: {got} vs {fd}");
        }
    }
    (qn, pn)
}
