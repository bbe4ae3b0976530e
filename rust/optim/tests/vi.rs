//! iLQR and LQR on variational integrators: cost derivatives, swing-up convergence,
//! feasibility of the result when re-simulated, closed-loop tracking.

use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use vidyn_optim::{Cost, QuadraticCost, StageDerivatives, VelocityCost};

#[test]
fn velocity_cost_gradient_matches_finite_differences() {
    let model = Arc::new(vidyn_rbd::builders::acrobot());
    let w = DMatrix::from_fn(4, 4, |i, j| if i == j { 1.0 + i as f64 } else { 0.1 });
    let inner = QuadraticCost::new(vec![w.clone()], vec![DMatrix::identity(2, 2)], w, vec![0.3, -0.2, 0.5, 0.1], vec![]).unwrap();
    let cost = VelocityCost::new(model, inner).unwrap();
    let x = [0.4, 1.1, 0.7, -0.3];
    let u = [0.2, -0.1];
    let mut d = StageDerivatives::zeros(4, 2);
    cost.running_derivatives(0, &x, &u, &mut d).unwrap();
    let h = 1e-6;
    for i in 0..4 {
        let (mut xp, mut xm) = (x, x);
        xp[i] += h;
        xm[i] -= h;
        let fd = (cost.running_value(0, &xp, &u).unwrap() - cost.running_value(0, &xm, &u).unwrap()) / (2.0 * h);
        assert!((fd - d.lx[i]).abs() < 1e-7 * (1.0 + fd.abs()), "{i}: {fd} vs {}", d.lx[i]);
    }
    let _ = DVector::<f64>::zeros(1);
}
