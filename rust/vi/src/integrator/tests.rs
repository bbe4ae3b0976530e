//! Newton's quadratic convergence, from the iterates the integrator keeps in its workspace.

use crate::test_common::newton::*;
use crate::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{pendulum_chain, random_tree};

/// From a 1e-3 perturbation of the solved step, the B.1 Newton iteration converges
/// quadratically: the step lengths `e_k = |δz_k|∞` (≈ the error of iterate k) satisfy
/// `e_{k+1} ≤ C e_k²` with `C ≤ 2e3` (measured 0.3–400, largest on the first step, which
/// is pre-asymptotic; a linearly convergent method, `e_{k+1} = ρ e_k`, breaks the bound as
/// soon as `e_k < ρ / 2e3`), and the residual reaches round-off within 4 iterations.
#[test]
fn newton_converges_quadratically() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for model in [Arc::new(pendulum_chain(12, false)), Arc::new(random_tree(15, 5, &one_dof()))] {
        for sc in schemes() {
            let (s, n) = (sc.s, model.nv);
            let vi = VariationalIntegrator::new(model.clone(), sc.clone(), 0.02, Some(forcing(&mut rng, n))).unwrap();
            let (q, p, u, _) = problem(&vi, &mut rng);
            let mut ws = vi.workspace();
            let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
            vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut qn, &mut pn).unwrap();
            let mut z: Vec<f64> = ws.z.iter().map(|x| x + 1e-3 * rng.random_range(-1.0..1.0)).collect();
            let (mut r, mut dz) = (vec![0.0; s * n], vec![0.0; s * n]);
            let (mut residuals, mut steps) = (Vec::new(), Vec::new());
            let tol = 1e-12 * (1.0 + p.iter().fold(0.0_f64, |m, x| m.max(x.abs())));
            for _ in 0..8 {
                let res = vi.residual(&mut ws, &q, &p, &u, &z, &mut r).unwrap();
                residuals.push(res);
                if res < tol {
                    break;
                }
                vi.newton_direction(&mut ws, StepInput::new(0, &q, &p, &u), &z, &mut dz).unwrap();
                let step = dz.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
                steps.push(step);
                if step < 1e-15 {
                    break;
                }
                for (zi, d) in z.iter_mut().zip(&dz) {
                    *zi += d;
                }
            }
            let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.1e}")).collect::<Vec<_>>();
            println!("{} s={s}: residuals {:?}, |δz| {:?}", model.name, fmt(&residuals), fmt(&steps));
            assert!(residuals.len() <= 5 && *residuals.last().unwrap() < 10.0 * tol, "{} s={s}: {residuals:?}", model.name);
            let constants: Vec<f64> = steps.windows(2).filter(|w| w[1] > 1e-13).map(|w| w[1] / (w[0] * w[0])).collect();
            assert!(!constants.is_empty(), "{} s={s}: {steps:?}", model.name);
            for c in &constants {
                assert!(*c < 2e3, "{} s={s}: e_(k+1)/e_k² = {constants:?} (|δz| {steps:?})", model.name);
            }
        }
    }
}
