//! The discrete-time dynamics the optimisers work on: `x_{k+1} = f_k(x_k, u_k)` with its exact
//! first-order linearisation along a trajectory.
//!
//! [`crate::ViDynamics`] wraps a [`vidyn_vi::VariationalIntegrator`] (state `x = (q, p)`, or
//! `(q, v)` with [`crate::ViDynamics::with_velocity_state`]; `nx = 2n`; controls the generalised
//! forces of the actuated joints, `nu = m ≤ n`, module `vi_dynamics`); [`crate::LinearDynamics`] is a
//! (time-varying) linear system `x_{k+1} = A_k x_k + B_k u_k`, for tests and for LQ problems.
//!
//! Trajectories are stored row-major: `x[k·nx + i]` for `k = 0..=N`, `u[k·nu + j]` for
//! `k = 0..N`.

use crate::checks::{check_finite, check_multiple};
use crate::error::{OptimError, Result};
use crate::state_space::StateSpace;
use nalgebra::DMatrix;

/// A control law `policy(k, x_k, u_k)` writing `u_k` from the state.
pub type Policy<'a> = dyn FnMut(usize, &[f64], &mut [f64]) + 'a;
/// Per-step Jacobians `(A_k, B_k)`.
pub type Jacobians = (Vec<DMatrix<f64>>, Vec<DMatrix<f64>>);

/// A discrete-time system with exact Jacobians. Implementations must be deterministic.
pub trait Dynamics: Sync {
    /// State dimension (entries of a state).
    fn nx(&self) -> usize;
    /// The manifold of the states ([`StateSpace`]): `A_k` is `ndx × ndx` and `B_k`
    /// `ndx × nu` in its tangent coordinates, and deviations from a trajectory are
    /// [`StateSpace::difference`]s. The default: `ℝ^nx`.
    fn state_space(&self) -> StateSpace {
        StateSpace::euclidean(self.nx())
    }
    /// Control dimension.
    fn nu(&self) -> usize;
    /// Simulates `steps` steps from `x0`; before step `k` `policy(k, x_k, u_k)` writes the
    /// control `u_k` (length `nu`) from the current state. Returns `(x, u)` row-major,
    /// `(steps + 1)·nx` and `steps·nu` entries. Fails when a step cannot be taken.
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)>;
    /// [`Dynamics::rollout`] of a trajectory expected to stay close to `near` (an iLQR trial
    /// around its nominal): implementations with an iterative step may start each solve from
    /// the nominal's linear prediction [`Nominal::predict`]. The result is the same
    /// trajectory to the step solver's own tolerance. The default ignores `near`.
    fn rollout_near(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>, near: &Nominal<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        let _ = near;
        self.rollout(x0, steps, policy)
    }
    /// One step `next = f_k(x, u)` from any state (not only one a rollout reached): what
    /// multiple shooting ([`crate::fddp()`]) needs to measure the gaps of a trajectory and to
    /// close them. `guess`: a state near the result, where an iterative step may start (the
    /// result is the same to the step solver's tolerance). The default reports
    /// [`OptimError::NotImplemented`].
    fn step(&self, k: usize, x: &[f64], u: &[f64], guess: Option<&[f64]>, next: &mut [f64]) -> Result<()> {
        let _ = (k, x, u, guess, next);
        Err(OptimError::NotImplemented("these dynamics take no single step from an arbitrary state (multiple shooting needs it)".into()))
    }
    /// `A_k = ∂f/∂x` (ndx×ndx) and `B_k = ∂f/∂u` (ndx×nu) at every step of `(x, u)`.
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians>;
    /// Whether [`Dynamics::linearize_steps`] is implemented: [`crate::ilqr()`] then linearises
    /// a trial trajectory a few steps at a time while it is still being simulated.
    fn linearizes_steps(&self) -> bool {
        false
    }
    /// `A_k`, `B_k` of the steps `k0, …, k0 + a.len() − 1` into `a`, `b` (shaped nx×nx and
    /// nx×nu), from the states `x = (x_{k0}, …, x_{k0 + a.len()})` and the controls
    /// `u = (u_{k0}, …)`, row-major: the matrices [`Dynamics::linearize`] gives for these steps,
    /// bit for bit. The default reports [`OptimError::NotImplemented`].
    fn linearize_steps(&self, k0: usize, x: &[f64], u: &[f64], a: &mut [DMatrix<f64>], b: &mut [DMatrix<f64>]) -> Result<()> {
        let _ = (k0, x, u, a, b);
        Err(OptimError::NotImplemented("these dynamics linearise whole trajectories only".into()))
    }
    /// Whether [`Dynamics::second_order_contracted`] is implemented (full DDP and the Newton
    /// model of the projection-operator method need it).
    fn has_second_order(&self) -> bool {
        false
    }
    /// The second derivatives of step `k`, `x_{k+1} = f_k(x_k, u_k)`, contracted with a
    /// co-vector `w` (nx) on the output:
    /// $$H_{xx} = \sum_i w_i \frac{\partial^2 f_i}{\partial x^2},\quad
    ///   H_{ux} = \sum_i w_i \frac{\partial^2 f_i}{\partial u\,\partial x},\quad
    ///   H_{uu} = \sum_i w_i \frac{\partial^2 f_i}{\partial u^2}$$
    /// written into `out` (`hxx` nx×nx, `hux` nu×nx, `huu` nu×nu; `hxx`, `huu` symmetric).
    /// DDP calls it with `w = V_x(k+1)` (Jacobson & Mayne 1970; Tassa, Erez & Todorov 2012,
    /// §II), the projection-operator Newton model with the adjoint `z_{k+1}` (Johnson 2012,
    /// Prop. 6–7). `x_k`, `u_k` are the states of the trajectory being linearised. The default
    /// reports [`OptimError::NotImplemented`].
    fn second_order_contracted(&self, k: usize, x: &[f64], u: &[f64], w: &[f64], out: &mut SecondOrder) -> Result<()> {
        let _ = (k, x, u, w, out);
        Err(OptimError::NotImplemented("these dynamics provide no second derivatives (full DDP and the Newton model need Σ_i w_i ∂²f_i/∂(x, u)²)".into()))
    }
}

/// A trajectory `(x̄, ū)` (row-major, as everywhere here) with its Jacobians `A_k`, `B_k`.
#[derive(Clone, Copy, Debug)]
pub struct Nominal<'a> {
    pub x: &'a [f64],
    pub u: &'a [f64],
    pub a: &'a [DMatrix<f64>],
    pub b: &'a [DMatrix<f64>],
}

impl Nominal<'_> {
    /// The first `out.len()` entries of the first-order prediction of `x_{k+1}` from `(x_k, u_k)`,
    /// `x̄_{k+1} ⊕ (A_k (x_k ⊖ x̄_k) + B_k (u_k − ū_k))` on the states of `space` (on a vector
    /// space `x̄_{k+1} + A_k (x_k − x̄_k) + B_k (u_k − ū_k)`); `scratch` holds
    /// [`NominalScratch`] buffers. `false` (and `out` untouched) when the nominal has no step
    /// `k` of these dimensions.
    #[must_use]
    pub fn predict(&self, space: &StateSpace, k: usize, xk: &[f64], uk: &[f64], scratch: &mut NominalScratch, out: &mut [f64]) -> bool {
        let (nx, ndx, nu) = (space.nx(), space.ndx(), uk.len());
        let (Some(a), Some(b)) = (self.a.get(k), self.b.get(k)) else { return false };
        if xk.len() != nx || a.shape() != (ndx, ndx) || b.shape() != (ndx, nu) || out.len() > nx || self.x.len() < (k + 2) * nx || self.u.len() < (k + 1) * nu {
            return false;
        }
        let (xb, ub, next) = (&self.x[k * nx..(k + 1) * nx], &self.u[k * nu..(k + 1) * nu], &self.x[(k + 1) * nx..(k + 2) * nx]);
        if space.is_euclidean() {
            // only the entries asked for
            out.copy_from_slice(&next[..out.len()]);
            for j in 0..nx {
                let d = xk[j] - xb[j];
                for (i, o) in out.iter_mut().enumerate() {
                    *o += a[(i, j)] * d;
                }
            }
            for j in 0..nu {
                let d = uk[j] - ub[j];
                for (i, o) in out.iter_mut().enumerate() {
                    *o += b[(i, j)] * d;
                }
            }
            return true;
        }
        scratch.resize(nx, ndx);
        let NominalScratch { deviation, step, state } = scratch;
        space.difference(xb, xk, deviation);
        step.fill(0.0);
        for (j, d) in deviation.iter().enumerate() {
            for (i, o) in step.iter_mut().enumerate() {
                *o += a[(i, j)] * d;
            }
        }
        for j in 0..nu {
            let d = uk[j] - ub[j];
            for (i, o) in step.iter_mut().enumerate() {
                *o += b[(i, j)] * d;
            }
        }
        space.integrate(next, step, state);
        out.copy_from_slice(&state[..out.len()]);
        true
    }
}

/// The buffers of [`Nominal::predict`] (sized on first use).
#[derive(Clone, Debug, Default)]
pub struct NominalScratch {
    deviation: Vec<f64>,
    step: Vec<f64>,
    state: Vec<f64>,
}

impl NominalScratch {
    fn resize(&mut self, nx: usize, ndx: usize) {
        self.deviation.resize(ndx, 0.0);
        self.step.resize(ndx, 0.0);
        self.state.resize(nx, 0.0);
    }
}

/// Second derivatives of one step contracted with a co-vector (see
/// [`Dynamics::second_order_contracted`]): `hxx` (nx×nx), `hux` (nu×nx), `huu` (nu×nu).
#[derive(Clone, Debug, PartialEq)]
pub struct SecondOrder {
    pub hxx: DMatrix<f64>,
    pub hux: DMatrix<f64>,
    pub huu: DMatrix<f64>,
}

impl SecondOrder {
    #[must_use]
    pub fn zeros(nx: usize, nu: usize) -> Self {
        Self { hxx: DMatrix::zeros(nx, nx), hux: DMatrix::zeros(nu, nx), huu: DMatrix::zeros(nu, nu) }
    }
}

/// Open-loop rollout of the controls `u` (`steps·nu` entries, row-major).
pub fn rollout_open_loop<D: Dynamics + ?Sized>(dynamics: &D, x0: &[f64], u: &[f64]) -> Result<(Vec<f64>, Vec<f64>)> {
    let nu = dynamics.nu();
    check_multiple(u.len(), nu, "u")?;
    let steps = u.len().checked_div(nu).unwrap_or(0);
    dynamics.rollout(x0, steps, &mut |k, _x, uk| uk.copy_from_slice(&u[k * nu..(k + 1) * nu]))
}

/// The loop every [`Dynamics::rollout`] runs: `x_0 = x0` (`nx` entries); for `k = 0..steps`
/// the policy writes `u_k` (`nu`) from `x_k`, refused when not finite, then
/// `advance(k, past, u_k, next)` writes `x_{k+1}` into `next` from the states so far (`past`:
/// `x_0 … x_k`, row-major). Returns `(x, u)` row-major.
pub(crate) fn run_policy(
    x0: &[f64],
    steps: usize,
    nu: usize,
    policy: &mut Policy<'_>,
    mut advance: impl FnMut(usize, &[f64], &[f64], &mut [f64]) -> Result<()>,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let nx = x0.len();
    let mut x = vec![0.0; (steps + 1) * nx];
    let mut u = vec![0.0; steps * nu];
    x[..nx].copy_from_slice(x0);
    for k in 0..steps {
        let (past, rest) = x.split_at_mut((k + 1) * nx);
        let uk = &mut u[k * nu..(k + 1) * nu];
        policy(k, &past[k * nx..], uk);
        check_finite(uk, "u")?;
        advance(k, past, uk, &mut rest[..nx])?;
    }
    Ok((x, u))
}
