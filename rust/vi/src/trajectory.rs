//! Whole trajectories: sequential rollouts and linearisation of every step in parallel.

use crate::error::{Result, ViError};
use crate::integrator::VariationalIntegrator;
use nalgebra::DMatrix;
use rayon::prelude::*;

/// A trajectory of `N` steps: states `(N+1, n)` and the controls `(N, n)` that produced it,
/// stored row-major (`q[k·n + i]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Trajectory {
    pub n: usize,
    pub steps: usize,
    pub q: Vec<f64>,
    pub p: Vec<f64>,
    pub u: Vec<f64>,
    /// Newton iterations used by each step.
    pub iterations: Vec<usize>,
}

impl Trajectory {
    #[must_use]
    pub fn q_at(&self, k: usize) -> &[f64] {
        &self.q[k * self.n..(k + 1) * self.n]
    }
    #[must_use]
    pub fn p_at(&self, k: usize) -> &[f64] {
        &self.p[k * self.n..(k + 1) * self.n]
    }
    #[must_use]
    pub fn u_at(&self, k: usize) -> &[f64] {
        &self.u[k * self.n..(k + 1) * self.n]
    }
}

/// Simulates `u.len() / n` steps from `(q0, p0)`; each step warm-starts from the previous
/// step's motion (`q_k + (q_k − q_{k−1})`). `u`: row-major `(N, n)`.
pub fn rollout(vi: &VariationalIntegrator, q0: &[f64], p0: &[f64], u: &[f64]) -> Result<Trajectory> {
    let n = vi.n();
    if !u.len().is_multiple_of(n.max(1)) {
        return Err(ViError::InvalidParameter(format!("controls have {} entries, not a multiple of n = {n}", u.len())));
    }
    let steps = u.len().checked_div(n).unwrap_or(0);
    let mut traj = Trajectory { n, steps, q: vec![0.0; (steps + 1) * n], p: vec![0.0; (steps + 1) * n], u: u.to_vec(), iterations: vec![0; steps] };
    traj.q[..n].copy_from_slice(q0);
    traj.p[..n].copy_from_slice(p0);
    let mut ws = vi.workspace();
    let mut guess = vec![0.0; n];
    for k in 0..steps {
        let (done, rest) = traj.q.split_at_mut((k + 1) * n);
        let (pd, pr) = traj.p.split_at_mut((k + 1) * n);
        let qk = &done[k * n..];
        let warm = if k > 0 {
            for i in 0..n {
                guess[i] = 2.0 * qk[i] - done[(k - 1) * n + i];
            }
            Some(guess.as_slice())
        } else {
            None
        };
        traj.iterations[k] = vi.step(&mut ws, k, qk, &pd[k * n..], &u[k * n..(k + 1) * n], warm, &mut rest[..n], &mut pr[..n])?;
    }
    Ok(traj)
}

/// First-order linearisation of every step of a trajectory: `a[k]` (2n×2n), `b[k]` (2n×n).
#[derive(Clone, Debug)]
pub struct Linearization {
    pub a: Vec<DMatrix<f64>>,
    pub b: Vec<DMatrix<f64>>,
    /// Largest deviation between the stored next state and the re-solved step
    /// (a consistency check: ~solver tolerance for a trajectory from [`rollout`]).
    pub max_defect: f64,
}

/// Linearises every step of `traj` independently and in parallel (rayon, one workspace per
/// worker). Each step is re-solved from `(q_k, p_k, u_k)`, warm-started at the stored
/// `q_{k+1}`. Results do not depend on the number of threads.
pub fn linearize_trajectory(vi: &VariationalIntegrator, traj: &Trajectory) -> Result<Linearization> {
    let n = vi.n();
    type StepLinearization = (DMatrix<f64>, DMatrix<f64>, f64);
    let results: Vec<Result<StepLinearization>> = (0..traj.steps)
        .into_par_iter()
        .map_init(
            || (vi.workspace(), vec![0.0; n], vec![0.0; n]),
            |(ws, qn, pn), k| {
                let mut a = DMatrix::zeros(2 * n, 2 * n);
                let mut b = DMatrix::zeros(2 * n, n);
                vi.linearize(ws, k, traj.q_at(k), traj.p_at(k), traj.u_at(k), Some(traj.q_at(k + 1)), &mut a, &mut b, qn, pn)?;
                let defect = qn.iter().zip(traj.q_at(k + 1)).chain(pn.iter().zip(traj.p_at(k + 1))).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()));
                Ok((a, b, defect))
            },
        )
        .collect();
    let mut lin = Linearization { a: Vec::with_capacity(traj.steps), b: Vec::with_capacity(traj.steps), max_defect: 0.0 };
    for r in results {
        let (a, b, d) = r?;
        lin.a.push(a);
        lin.b.push(b);
        lin.max_defect = lin.max_defect.max(d);
    }
    Ok(lin)
}
