//! [`Cancellable`]: any [`Dynamics`] that stops when its caller cancels, so that a long
//! optimisation can be interrupted (the Python binding cancels on Ctrl-C).

use crate::dynamics::{Dynamics, Jacobians, Nominal, Policy, SecondOrder};
use crate::error::{OptimError, Result};
use nalgebra::DMatrix;
use vidyn_batch::Control;

/// `dynamics` checked against `control`: once `control` is cancelled, rollouts and
/// linearisations fail with [`OptimError::Cancelled`], which ends the optimiser's run. A
/// rollout stops at its next step: the policy it is given writes NaN controls once
/// cancelled, which the steps refuse (or, for dynamics that would propagate them, the
/// rollout's result is replaced by the error). Each simulated or linearised step advances
/// `control` by one, so its poll hook runs as the solve progresses. Results of a run that is
/// not cancelled are those of `dynamics`, bit for bit.
pub struct Cancellable<'c, 'a, D: ?Sized> {
    dynamics: &'c D,
    control: &'c Control<'a>,
}

impl<'c, 'a, D: Dynamics + ?Sized> Cancellable<'c, 'a, D> {
    #[must_use]
    pub fn new(dynamics: &'c D, control: &'c Control<'a>) -> Self {
        Self { dynamics, control }
    }

    fn check(&self) -> Result<()> {
        if self.control.is_cancelled() {
            return Err(OptimError::Cancelled);
        }
        Ok(())
    }

    /// `r`, after counting `steps` steps of progress; the cancellation error if the run was
    /// cancelled meanwhile.
    fn counted<T>(&self, steps: usize, r: Result<T>) -> Result<T> {
        self.control.advance(steps);
        self.check().and(r)
    }

    /// `policy`, counting each step and writing NaN controls once cancelled.
    fn policy<'p, 'q: 'p>(&'p self, policy: &'p mut Policy<'q>) -> impl FnMut(usize, &[f64], &mut [f64]) + use<'p, 'q, 'c, 'a, D> {
        move |k, x, u| {
            policy(k, x, u);
            self.control.advance(1);
            if self.control.is_cancelled() {
                u.fill(f64::NAN);
            }
        }
    }
}

impl<D: Dynamics + ?Sized> Dynamics for Cancellable<'_, '_, D> {
    fn nx(&self) -> usize {
        self.dynamics.nx()
    }
    fn state_space(&self) -> crate::StateSpace {
        self.dynamics.state_space()
    }
    fn nu(&self) -> usize {
        self.dynamics.nu()
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.check()?;
        let r = self.dynamics.rollout(x0, steps, &mut self.policy(policy));
        self.counted(0, r)
    }
    fn rollout_near(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>, near: &Nominal<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.check()?;
        let r = self.dynamics.rollout_near(x0, steps, &mut self.policy(policy), near);
        self.counted(0, r)
    }
    fn step(&self, k: usize, x: &[f64], u: &[f64], guess: Option<&[f64]>, next: &mut [f64]) -> Result<()> {
        self.check()?;
        self.counted(1, self.dynamics.step(k, x, u, guess, next))
    }
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians> {
        self.check()?;
        let steps = u.len().checked_div(self.nu()).unwrap_or(0);
        self.counted(steps, self.dynamics.linearize(x, u))
    }
    fn linearizes_steps(&self) -> bool {
        self.dynamics.linearizes_steps()
    }
    fn linearize_steps(&self, k0: usize, x: &[f64], u: &[f64], a: &mut [DMatrix<f64>], b: &mut [DMatrix<f64>]) -> Result<()> {
        self.check()?;
        self.counted(a.len(), self.dynamics.linearize_steps(k0, x, u, a, b))
    }
    fn has_second_order(&self) -> bool {
        self.dynamics.has_second_order()
    }
    fn second_order_contracted(&self, k: usize, x: &[f64], u: &[f64], w: &[f64], out: &mut SecondOrder) -> Result<()> {
        self.check()?;
        self.counted(1, self.dynamics.second_order_contracted(k, x, u, w, out))
    }
}
