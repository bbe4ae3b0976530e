//! A (time-varying) linear system as [`Dynamics`], for tests and LQ problems.

use crate::checks::check_finite;
use crate::dynamics::{run_policy, Dynamics, Jacobians, Policy, SecondOrder};
use crate::error::{OptimError, Result};
use nalgebra::DMatrix;

/// A time-varying linear system `x_{k+1} = A_k x_k + B_k u_k` (`A_k`, `B_k` of one step
/// repeated when a single matrix is given).
#[derive(Clone, Debug)]
pub struct LinearDynamics {
    pub a: Vec<DMatrix<f64>>,
    pub b: Vec<DMatrix<f64>>,
}

impl LinearDynamics {
    /// Checks that every `A_k` is nx×nx and every `B_k` nx×nu, and that the lists have the
    /// same length (or one of them length 1).
    pub fn new(a: Vec<DMatrix<f64>>, b: Vec<DMatrix<f64>>) -> Result<Self> {
        if a.is_empty() || b.is_empty() {
            return Err(OptimError::InvalidInput("A and B need at least one matrix each".into()));
        }
        let (nx, nu) = (a[0].nrows(), b[0].ncols());
        if a.iter().any(|m| m.shape() != (nx, nx)) || b.iter().any(|m| m.shape() != (nx, nu)) {
            return Err(OptimError::InvalidInput(format!("A must be {nx}×{nx} and B {nx}×{nu} at every step")));
        }
        if a.len() != b.len() && a.len() != 1 && b.len() != 1 {
            return Err(OptimError::InvalidInput(format!("A has {} steps and B {}", a.len(), b.len())));
        }
        Ok(Self { a, b })
    }
    fn a_at(&self, k: usize) -> &DMatrix<f64> {
        &self.a[k.min(self.a.len() - 1)]
    }
    fn b_at(&self, k: usize) -> &DMatrix<f64> {
        &self.b[k.min(self.b.len() - 1)]
    }
}

impl Dynamics for LinearDynamics {
    fn nx(&self) -> usize {
        self.a[0].nrows()
    }
    fn nu(&self) -> usize {
        self.b[0].ncols()
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        let (nx, nu) = (self.nx(), self.nu());
        if x0.len() != nx {
            return Err(OptimError::InvalidInput(format!("x0 has {} entries, expected {nx}", x0.len())));
        }
        run_policy(x0, steps, nu, policy, |k, past, uk, next| {
            let (a, b, xk) = (self.a_at(k), self.b_at(k), &past[k * nx..]);
            for (i, x) in next.iter_mut().enumerate() {
                *x = (0..nx).map(|j| a[(i, j)] * xk[j]).sum::<f64>() + (0..nu).map(|j| b[(i, j)] * uk[j]).sum::<f64>();
            }
            check_finite(next, "x")
        })
    }
    fn step(&self, k: usize, x: &[f64], u: &[f64], _guess: Option<&[f64]>, next: &mut [f64]) -> Result<()> {
        let next_x = self.a_at(k) * nalgebra::DVector::from_column_slice(x) + self.b_at(k) * nalgebra::DVector::from_column_slice(u);
        next.copy_from_slice(next_x.as_slice());
        Ok(())
    }
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians> {
        let steps = u.len() / self.nu();
        let _ = x;
        Ok(((0..steps).map(|k| self.a_at(k).clone()).collect(), (0..steps).map(|k| self.b_at(k).clone()).collect()))
    }
    fn linearizes_steps(&self) -> bool {
        true
    }
    fn linearize_steps(&self, k0: usize, _x: &[f64], _u: &[f64], a: &mut [DMatrix<f64>], b: &mut [DMatrix<f64>]) -> Result<()> {
        for (i, (ak, bk)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
            ak.copy_from(self.a_at(k0 + i));
            bk.copy_from(self.b_at(k0 + i));
        }
        Ok(())
    }
    fn has_second_order(&self) -> bool {
        true
    }
    /// A linear map has zero second derivatives.
    fn second_order_contracted(&self, _k: usize, _x: &[f64], _u: &[f64], _w: &[f64], out: &mut SecondOrder) -> Result<()> {
        out.hxx.fill(0.0);
        out.hux.fill(0.0);
        out.huu.fill(0.0);
        Ok(())
    }
}
