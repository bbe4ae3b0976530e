//! Whole trajectories: sequential rollouts and linearisation of every step in parallel.

use crate::error::{Result, ViError};
use crate::integrator::VariationalIntegrator;
use nalgebra::DMatrix;
use rayon::prelude::*;
use vidyn_system::StepInput;

/// A trajectory of `N` steps: configurations `(N+1, nq)`, momenta `(N+1, n)` and the
/// controls `(N, n)` that produced them, stored row-major (`q[k·nq + i]`; `nq = n` unless
/// the model has composite joints).
#[derive(Clone, Debug, PartialEq)]
pub struct Trajectory {
    pub n: usize,
    pub nq: usize,
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
        &self.q[k * self.nq..(k + 1) * self.nq]
    }
    #[must_use]
    pub fn p_at(&self, k: usize) -> &[f64] {
        &self.p[k * self.n..(k + 1) * self.n]
    }
    #[must_use]
    pub fn u_at(&self, k: usize) -> &[f64] {
        &self.u[k * self.n..(k + 1) * self.n]
    }
    /// Step `k` of this trajectory, with its stored end `q_{k+1}` as the solver's start.
    #[must_use]
    pub fn step_input(&self, k: usize) -> StepInput<'_> {
        StepInput::new(k, self.q_at(k), self.p_at(k), self.u_at(k)).with_guess(Some(self.q_at(k + 1)))
    }
}

/// The Newton starting point of step k from the configurations so far: `past` holds rows
/// `0..=k` of `stride` entries each, whose first `guess.len()` entries are `q_0, …, q_k`. The
/// estimate is the polynomial extrapolation through the last `m + 1` configurations,
/// `q_{k+1} ≈ Σ_{j=0}^{m} (−1)^j C(m+1, j+1) q_{k−j}` (error O(Δt^{m+1}) on a smooth motion):
/// linear with two rows, quadratic with three to seven, and from eight rows on the degree
/// `m ∈ {2, 3, 4}` whose extrapolations of each of `q_k, q_{k−1}, q_{k−2}` from the rows
/// before it were closest (largest entry of the errors), so that a smooth motion gets the
/// higher orders and a motion the step resolves poorly (a fast mode, a contact's kink) keeps
/// the quadratic: on sampled sinusoids the chosen degree's error is at most the quadratic's
/// at every frequency, 1 % of it at ten samples per radian (one back-tested row instead of
/// three: up to 2.8× the quadratic's error at 1.5–2.5 rad per sample); none (`false`) with
/// one row. Newton iterations per step of the 3-D chains from rest at Δt = 5 ms, ±15°
/// (quadratic → chosen degree): 5 links 1.98 → 1.0, 12 links 2.46 → 1.8, 50 links 3.67 → 2.5.
pub fn predict_next(past: &[f64], stride: usize, guess: &mut [f64]) -> bool {
    let n = guess.len();
    let rows = (past.len() + stride).saturating_sub(n).checked_div(stride).unwrap_or(0);
    // configuration entry i of the row j places before the last
    let q = |j: usize, i: usize| past[(rows - 1 - j) * stride + i];
    // the degree-m extrapolation of entry i of the row after row `from` (counted back)
    let extrapolate = |m: usize, from: usize, i: usize| (0..=m).map(|j| EXTRAPOLATION[m][j] * q(from + j, i)).sum::<f64>();
    // the largest error of the degree-m extrapolations of the last three rows
    let back_tested = |m: usize| (0..3).flat_map(|b| (0..n).map(move |i| (b, i))).fold(0.0_f64, |e, (b, i)| e.max((q(b, i) - extrapolate(m, b + 1, i)).abs()));
    let degree = match rows {
        0 | 1 => return false,
        2 => 1,
        3..=7 => 2,
        _ => (2..=4).map(|m| (m, back_tested(m))).fold((2, f64::INFINITY), |best, (m, e)| if e < best.1 { (m, e) } else { best }).0,
    };
    for (i, g) in guess.iter_mut().enumerate() {
        *g = extrapolate(degree, 0, i);
    }
    true
}

/// `(−1)^j C(m+1, j+1)`, the weights of [`predict_next`]'s degree-`m` extrapolation.
const EXTRAPOLATION: [[f64; 5]; 5] =
    [[1.0, 0.0, 0.0, 0.0, 0.0], [2.0, -1.0, 0.0, 0.0, 0.0], [3.0, -3.0, 1.0, 0.0, 0.0], [4.0, -6.0, 4.0, -1.0, 0.0], [5.0, -10.0, 10.0, -5.0, 1.0]];

/// Simulates `u.len() / n` steps from `(q0, p0)`; each step starts its Newton iteration from
/// [`predict_next`] and is checked to be a genuine step of the motion
/// ([`VariationalIntegrator::check_step_energy`]). `u`: row-major `(N, n)`.
pub fn rollout(vi: &VariationalIntegrator, q0: &[f64], p0: &[f64], u: &[f64]) -> Result<Trajectory> {
    let (n, nq) = (vi.n(), vi.nq());
    if !u.len().is_multiple_of(n.max(1)) {
        return Err(ViError::InvalidParameter(format!("controls have {} entries, not a multiple of n = {n}", u.len())));
    }
    let steps = u.len().checked_div(n).unwrap_or(0);
    if q0.len() != nq || p0.len() != n {
        return Err(ViError::InvalidParameter(format!("q0 has {} and p0 {} entries; expected nq = {nq} and n = {n}", q0.len(), p0.len())));
    }
    let mut traj = Trajectory { n, nq, steps, q: vec![0.0; (steps + 1) * nq], p: vec![0.0; (steps + 1) * n], u: u.to_vec(), iterations: vec![0; steps] };
    traj.q[..nq].copy_from_slice(q0);
    traj.p[..n].copy_from_slice(p0);
    let mut ws = vi.workspace();
    let mut guess = vec![0.0; nq];
    let checked = vi.checks_energy();
    let mut before = if checked && steps > 0 { Some(vi.knot_energy(&mut ws, 0, q0, p0)?) } else { None };
    for k in 0..steps {
        let (done, rest) = traj.q.split_at_mut((k + 1) * nq);
        let (pd, pr) = traj.p.split_at_mut((k + 1) * n);
        let qk = &done[k * nq..];
        let warm = predict_next(done, nq, &mut guess).then_some(guess.as_slice());
        let uk = &u[k * n..(k + 1) * n];
        traj.iterations[k] = vi.step(&mut ws, StepInput::new(k, qk, &pd[k * n..], uk).with_guess(warm), &mut rest[..nq], &mut pr[..n])?;
        if let Some(e) = before {
            // both knots with the step's constraints; the next step reuses its start's energy
            // when it imposes the same ones
            let after = vi.knot_energy(&mut ws, k, &rest[..nq], &pr[..n])?;
            vi.check_step_energy(k, e, after, qk, &rest[..nq], uk)?;
            before = Some(if vi.same_constraints(k, k + 1) { after } else { vi.knot_energy(&mut ws, k + 1, &rest[..nq], &pr[..n])? });
        }
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

/// The constraint multipliers of every step of `traj`: `lambda` row-major `(N, m)` and, when
/// asked for, `jacobian` row-major `(N, m, 3n)`, `∂λ_k/∂(q_k, p_k, u_k)`
/// ([`VariationalIntegrator::multiplier_jacobian`]; empty otherwise).
#[derive(Clone, Debug, Default)]
pub struct TrajectoryMultipliers {
    pub lambda: Vec<f64>,
    pub jacobian: Vec<f64>,
}

/// [`TrajectoryMultipliers`] of `traj`, each step solved again from its knot (started at its
/// end: the same solution) and, with `derivatives`, linearised; steps in parallel (rayon, one
/// workspace per worker; the result does not depend on the number of threads).
pub fn trajectory_multipliers(vi: &VariationalIntegrator, traj: &Trajectory, derivatives: bool) -> Result<TrajectoryMultipliers> {
    let (n, m) = (vi.n(), vi.constraints().len());
    let per_step: Vec<Result<(Vec<f64>, Vec<f64>)>> = (0..traj.steps)
        .into_par_iter()
        .map_init(
            || (vi.workspace(), vec![0.0; traj.nq], vec![0.0; n], DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n)),
            |(ws, qn, pn, a, b), k| {
                let at = traj.step_input(k);
                if !derivatives {
                    vi.step(ws, at, qn, pn)?;
                    return Ok((vi.multipliers(ws).to_vec(), Vec::new()));
                }
                vi.linearize(ws, at, a, b, qn, pn)?;
                let jac = vi.multiplier_jacobian(ws);
                Ok((vi.multipliers(ws).to_vec(), (0..m).flat_map(|i| jac.row(i).iter().copied().collect::<Vec<_>>()).collect()))
            },
        )
        .collect();
    let mut out = TrajectoryMultipliers {
        lambda: Vec::with_capacity(traj.steps * m),
        jacobian: Vec::with_capacity(if derivatives { traj.steps * m * 3 * n } else { 0 }),
    };
    for r in per_step {
        let (lambda, jacobian) = r?;
        out.lambda.extend(lambda);
        out.jacobian.extend(jacobian);
    }
    Ok(out)
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
                vi.linearize(ws, traj.step_input(k), &mut a, &mut b, qn, pn)?;
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

#[cfg(test)]
mod tests {
    use super::predict_next;

    /// Rows `(q_0 … q_k)` of two configuration entries and a third, ignored entry (a momentum)
    /// per row, sampled from `f` at `t = 0 … k`.
    fn rows(k: usize, f: impl Fn(f64) -> [f64; 2]) -> Vec<f64> {
        (0..=k)
            .flat_map(|t| {
                let [a, b] = f(t as f64);
                [a, b, 7.0]
            })
            .collect()
    }

    /// With two rows the extrapolation is exact on lines, with three to seven on parabolas, and
    /// from eight rows on quartics (the degree the back-test then finds exact): relative 1e-12.
    #[test]
    fn exact_on_polynomials_of_the_degree_the_rows_allow() {
        let quartic = |t: f64| [0.3 - 0.2 * t + 0.05 * t * t - 0.01 * t.powi(3) + 0.002 * t.powi(4), 1.0 + 0.1 * t * t];
        let parabola = |t: f64| [0.3 - 0.2 * t + 0.05 * t * t, -0.4 * t];
        let line = |t: f64| [0.3 - 0.2 * t, 2.0];
        let mut guess = [0.0; 2];
        assert!(!predict_next(&rows(0, line), 3, &mut guess));
        for (k, f) in [(1, &line as &dyn Fn(f64) -> [f64; 2]), (2, &parabola), (6, &parabola), (7, &quartic), (12, &quartic)] {
            assert!(predict_next(&rows(k, f), 3, &mut guess));
            let expected = f((k + 1) as f64);
            for (g, e) in guess.iter().zip(&expected) {
                assert!((g - e).abs() <= 1e-12 * e.abs().max(1.0), "rows {}: {g} vs {e}", k + 1);
            }
        }
        // seven rows of a quartic get the quadratic rule only: not exact
        assert!(predict_next(&rows(6, quartic), 3, &mut guess));
        assert!((guess[0] - quartic(7.0)[0]).abs() > 1e-3);
    }

    /// On sinusoids sampled at 0.05 to 2.5 rad per row (from resolved to far under-resolved),
    /// over 50 phases, the chosen degree's largest error is at most the quadratic rule's, and
    /// 1 % of it at 0.1 rad per row.
    #[test]
    fn the_chosen_degree_is_never_worse_than_the_quadratic_on_sinusoids() {
        // the quadratic rule's estimate of row 10 from rows 7, 8, 9
        let quadratic = |q: &[f64]| 3.0 * q[3 * 9] - 3.0 * q[3 * 8] + q[3 * 7];
        for step in [0.05, 0.1, 0.3, 0.6, 1.0, 1.5, 2.0, 2.5] {
            let (mut chosen, mut quad) = (0.0_f64, 0.0_f64);
            for j in 0..50 {
                let phase = 2.0 * std::f64::consts::PI * f64::from(j) / 50.0;
                let f = |t: f64| [(step * t + phase).sin(), 0.0];
                let past = rows(9, f);
                let mut guess = [0.0; 2];
                assert!(predict_next(&past, 3, &mut guess));
                let exact = f(10.0)[0];
                chosen = chosen.max((guess[0] - exact).abs());
                quad = quad.max((quadratic(&past) - exact).abs());
            }
            assert!(chosen <= quad * (1.0 + 1e-9), "{step} rad per row: chosen {chosen:e}, quadratic {quad:e}");
            if step == 0.1 {
                assert!(chosen <= 0.01 * quad, "{chosen:e} vs {quad:e}");
            }
        }
    }
}
