//! Hinge penalties (`vidyn_optim::hinge`): iLQR and FDDP decide which are active at the step
//! their backward pass takes (module `ilqr::active_set`), and reach the optimum that the plain
//! Gauss–Newton model of the penalties reaches, in fewer iterations.

use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vidyn_optim::{fddp, ilqr, rollout_open_loop, Cost, IlqrOptions, IlqrResult, LinearDynamics, QuadraticCost, Result, StageDerivatives};

/// A quadratic cost plus `½ w min(0, x_0 − floor)²` on every stage: the first state held above
/// a floor that its reference dips below. `record`: the penalty as a hinge
/// ([`StageDerivatives::add_hinge`]); otherwise its Gauss–Newton terms at the current point
/// only, which no solver can switch.
struct Floor {
    inner: QuadraticCost,
    floor: f64,
    weight: f64,
    record: bool,
}

impl Floor {
    fn penalty(&self, x: &[f64]) -> (f64, f64) {
        let g = x[0] - self.floor;
        (g, 0.5 * self.weight * g.min(0.0).powi(2))
    }
}

impl Cost for Floor {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        Ok(self.inner.running_value(k, x, u)? + self.penalty(x).1)
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        self.inner.terminal_value(x)
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.inner.running_derivatives(k, x, u, out)?;
        let (g, value) = self.penalty(x);
        if self.record {
            out.add_hinge(self.weight, g, |grad| grad[0] = 1.0);
        } else if g < 0.0 {
            out.l += value;
            out.lx[0] += self.weight * g;
            out.lxx[(0, 0)] += self.weight;
        }
        Ok(())
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.inner.terminal_derivatives(x, out)
    }
}

/// A mildly unstable time-varying LQ problem whose reference for `x_0` swings between ±1
/// along the horizon, with a stiff floor at −0.3: the dynamics, the two costs and the start.
fn problem(seed: u64, nx: usize, nu: usize, steps: usize) -> (LinearDynamics, [Floor; 2], Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut random = |r: usize, c: usize, s: f64| DMatrix::from_fn(r, c, |_, _| s * rng.random_range(-1.0..1.0));
    let a = (0..steps).map(|_| DMatrix::identity(nx, nx) + random(nx, nx, 0.2)).collect();
    let b = (0..steps).map(|_| random(nx, nu, 1.0)).collect();
    let x0 = random(nx, 1, 0.2).as_slice().to_vec();
    let x_ref: Vec<f64> = (0..=steps).flat_map(|k| (0..nx).map(move |i| if i == 0 { (k as f64 * 0.4).sin() } else { 0.0 })).collect();
    let cost = || {
        QuadraticCost::new(vec![DMatrix::identity(nx, nx)], vec![DMatrix::identity(nu, nu) * 0.1], DMatrix::identity(nx, nx), x_ref.clone(), vec![]).unwrap()
    };
    let floor = |record| Floor { inner: cost(), floor: -0.3, weight: 1e3, record };
    (LinearDynamics::new(a, b).unwrap(), [floor(true), floor(false)], x0)
}

/// Both solvers from the rollout of zero controls, with the penalty as a hinge and as plain
/// Gauss–Newton terms: the same
/// optimum (costs to 1e-10 relative; states to 1e-5: the stopping rule, a predicted decrease
/// below 1e-12 of a cost of about 3, leaves deviations up to `√(2·3e-12 / 0.1)` ≈ 8e-6 along
/// the weakest curvature, the controls' weight 0.1), and with the
/// hinges fewer iterations over the seeds and never more on one. The problem is piecewise
/// quadratic: without the hinges each iteration is one step of the semismooth Newton iteration
/// on the penalised cost, with them two.
#[test]
fn hinges_reach_the_same_optimum_in_fewer_iterations() {
    let (nx, nu, steps) = (4, 2, 40);
    let opts = IlqrOptions { tolerance: 1e-12, max_iterations: 200, ..IlqrOptions::default() };
    let mut totals = [[0; 2]; 2];
    for seed in 0..6 {
        let (dynamics, costs, x0) = problem(seed, nx, nu, steps);
        let u0 = vec![0.0; steps * nu];
        let (guess, _) = rollout_open_loop(&dynamics, &x0, &u0).unwrap();
        let solve = |solver: usize, cost: &Floor| -> IlqrResult {
            let res = if solver == 0 { ilqr(&dynamics, cost, &x0, &u0, &opts) } else { fddp(&dynamics, cost, &x0, &guess, &u0, &opts) }.unwrap();
            assert!(res.converged, "seed {seed}, solver {solver}: {}", res.message);
            res
        };
        for solver in 0..2 {
            let (hinged, plain) = (solve(solver, &costs[0]), solve(solver, &costs[1]));
            assert!((hinged.cost - plain.cost).abs() < 1e-10 * plain.cost, "seed {seed}, solver {solver}: {} vs {}", hinged.cost, plain.cost);
            let dx = hinged.x.iter().zip(&plain.x).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(dx < 1e-5, "seed {seed}, solver {solver}: states off by {dx:e}");
            assert!(hinged.iterations <= plain.iterations, "seed {seed}, solver {solver}: {} iterations against {}", hinged.iterations, plain.iterations);
            println!("seed {seed}, solver {solver}: {} against {} iterations, cost {}", hinged.iterations, plain.iterations, plain.cost);
            totals[solver][0] += hinged.iterations;
            totals[solver][1] += plain.iterations;
        }
    }
    for (solver, [hinged, plain]) in totals.iter().enumerate() {
        assert!(hinged < plain, "solver {solver}: {hinged} iterations in all against {plain}");
    }
}
