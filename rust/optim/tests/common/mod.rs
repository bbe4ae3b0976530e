//! Helpers shared by the optimiser's integration tests.

use vidyn_optim::ViDynamics;
use vidyn_vi::StepInput;
use vidyn_vi::VariationalIntegrator;

/// The largest deviation between the states `x` (row-major `(N+1)·(q, p)`) of an optimiser's
/// result and the VI's step from each of them under the result's controls `u` (`N·m`): how far
/// the trajectory is from being dynamically feasible (each step re-solved with the plain
/// rollout's Newton start). Models without Lie-group joints (`nq = n`).
pub fn dynamic_defect(vi: &VariationalIntegrator, dynamics: &ViDynamics<'_>, x: &[f64], u: &[f64]) -> f64 {
    let n = vi.n();
    let full = dynamics.actuation().expand_all(u);
    let mut ws = vi.workspace();
    let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
    let mut defect = 0.0_f64;
    for k in 0..full.len() / n {
        let (xk, next) = (&x[2 * n * k..2 * n * (k + 1)], &x[2 * n * (k + 1)..2 * n * (k + 2)]);
        vi.step(&mut ws, StepInput::new(k, &xk[..n], &xk[n..], &full[n * k..n * (k + 1)]), &mut qn, &mut pn).unwrap();
        defect = qn.iter().chain(&pn).zip(next).fold(defect, |m, (a, b)| m.max((a - b).abs()));
    }
    defect
}
