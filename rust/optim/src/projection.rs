//! Projection-operator trajectory optimisation for discrete systems (Johnson 2012, Ch. 6,
//! after Hauser's continuous-time method): every iterate is a trajectory of the dynamics.
//!
//! **Projection** (6.10): a time-varying feedback `K_k` turns any curve `ξ̄ = (x̄, ū)` into a
//! trajectory `ξ = P(ξ̄)`:
//! ```text
//! x_0 = x̄_0,   u_k = ū_k − K_k (x_k ⊖ x̄_k),   x_{k+1} = f_k(x_k, u_k).
//! ```
//! On a state manifold ([`crate::StateSpace`], a floating base) `⊖` is its difference and every
//! direction below lives in its tangent coordinates (`ndx`, as the linearisation's `A`, `B`);
//! a curve moves along a direction by `x̄ ⊕ λ δx` (the retraction [`crate::StateSpace::integrate`]).
//! `P(ξ) = ξ` for a trajectory, hence `P(P(ξ̄)) = P(ξ̄)` (Prop. 2). `K` is the DLQR gain of the
//! linearisation about the current iterate (App. B.2.2, weights `Q = R = Q_N = 1` by default).
//!
//! **Descent direction** (6.17, discrete form (6.29)–(6.30), written here with a factor ½):
//! minimise over trajectories `δξ` of `δx_{k+1} = A_k δx_k + B_k δu_k`, `δx_0 = 0`,
//! ```text
//! Σ_k [ℓ_xᵀδx_k + ℓ_uᵀδu_k + ½ (δx_kᵀQ_kδx_k + 2 δx_kᵀS_kδu_k + δu_kᵀR_kδu_k)]
//!     + m_xᵀδx_N + ½ δx_NᵀQ_Nδx_N,
//! ```
//! solved by the affine Riccati recursion (App. B.2.3):
//! ```text
//! P_N = Q_N, b_N = m_x;  Γ = R + BᵀP'B;  K = Γ⁻¹(BᵀP'A + Sᵀ);  C = Γ⁻¹(Bᵀb' + ℓ_u);
//! P = Q + AᵀP'A − KᵀΓK;  b = (A − BK)ᵀb' + ℓ_x − Kᵀℓ_u;   δu = −Kδx − C.
//! ```
//! Models ([`DescentModel`]): *steepest descent* `Q = R = Q_N = 1, S = 0`; *quasi-Newton*
//! `Q = ℓ_xx, S = ℓ_xu, R = ℓ_uu, Q_N = m_xx` (second derivatives of the dynamics dropped);
//! *Newton* (Prop. 6–7) adds `Σ_i z_{k+1,i} ∂²f_i/∂(x,u)²` to those blocks, with the adjoint
//! ```text
//! z_N = m_x,   z_k = ℓ_x − K_kᵀℓ_u + (A_k − B_k K_k)ᵀ z_{k+1}     (K: projection gain),
//! ```
//! which makes the model the exact second derivative of `g(ξ̄) = h(P(ξ̄))` on the tangent space
//! (checked against finite differences in `tests/second_order.rs`). On a manifold the state
//! cost's Hessian is its Gauss–Newton one (as in iLQR) and the retraction's curvature is left
//! out, so the model is exact up to those terms; the iterations measured quadratic all the same
//! on the free box's half turn (`tests/test_optim_lie_group.py`).
//!
//! **Line search** (Alg. 3): `λ = β^m`, `ξ_n = P(ξ_i ⊕ λ δξ)` with the *same* `K`; accepted when
//! the projection succeeds (the dynamics' step did not fail, the cost is finite) and
//! `h(ξ_n) < h(ξ_i) + α λ Dh(ξ_i)∘δξ`. The iteration stops when `|Dh(ξ_i)∘δξ| < tolerance`
//! (Alg. 1). Each iteration linearises the iterate once ([`Dynamics::linearize`], every step in
//! parallel for a VI) and is linear in the horizon.

use crate::checks::{check_finite, check_multiple, check_start};
use crate::cost::CostDerivatives;
use crate::cost::{total_cost, Cost, StageDerivatives};
use crate::dense_kernels::symmetrise;
use crate::dynamics::{rollout_open_loop, Dynamics, Nominal, SecondOrder};
use crate::error::{OptimError, Result};
use crate::lqr::{lqr, track};
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;
use std::time::Instant;

/// The quadratic model of the descent-direction LQ problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescentModel {
    Steepest,
    QuasiNewton,
    /// Needs [`Dynamics::second_order_contracted`].
    Newton,
    /// Quasi-Newton for the first [`ProjectionOptions::newton_after`] iterations, then Newton
    /// when the dynamics provide second derivatives (quasi-Newton otherwise).
    Auto,
}

/// Options of [`projection_optimize`]; defaults are trep's (`β = 0.7`, `α = 1e-5`, 30 Armijo
/// trials, tolerance 1e-6, `Q = R = Q_N = 1` for the projection).
#[derive(Clone, Debug)]
pub struct ProjectionOptions {
    pub model: DescentModel,
    pub newton_after: usize,
    pub max_iterations: usize,
    /// Stop when `|Dh(ξ)∘δξ| < tolerance`.
    pub tolerance: f64,
    pub armijo_alpha: f64,
    pub armijo_beta: f64,
    pub max_armijo: usize,
    /// Weights of the DLQR that defines the projection (`None`: identity).
    pub proj_q: Option<DMatrix<f64>>,
    pub proj_r: Option<DMatrix<f64>>,
    pub proj_qn: Option<DMatrix<f64>>,
}

impl Default for ProjectionOptions {
    fn default() -> Self {
        Self {
            model: DescentModel::Auto,
            newton_after: 10,
            max_iterations: 200,
            tolerance: 1e-6,
            armijo_alpha: 1e-5,
            armijo_beta: 0.7,
            max_armijo: 30,
            proj_q: None,
            proj_r: None,
            proj_qn: None,
        }
    }
}

/// Why [`projection_optimize`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectionStatus {
    Converged,
    MaxIterations,
    /// No Armijo trial was accepted with any model (stationary to round-off, or `K` cannot
    /// stabilise any step along the direction).
    LineSearchFailed,
}

/// One iteration of [`projection_optimize`].
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectionLog {
    /// Cost `h(ξ_i)` at the start.
    pub cost: f64,
    /// `Dh(ξ_i)∘δξ` of the direction used (negative).
    pub slope: f64,
    /// The model that produced the direction.
    pub model: DescentModel,
    /// Accepted step `λ` (0 when none) and Armijo trials.
    pub step: f64,
    pub trials: usize,
    /// Seconds since the start at the end of the iteration.
    pub time: f64,
}

/// Result of [`projection_optimize`]: the final trajectory, its projection gains, the cost
/// history (`[0]`: the initial trajectory) and the per-iteration log.
#[derive(Clone, Debug)]
pub struct ProjectionResult {
    pub x: Vec<f64>,
    pub u: Vec<f64>,
    pub gains: Vec<DMatrix<f64>>,
    pub cost: f64,
    pub cost_history: Vec<f64>,
    pub log: Vec<ProjectionLog>,
    pub iterations: usize,
    pub converged: bool,
    pub status: ProjectionStatus,
    pub message: String,
    pub wall_time: f64,
}

/// The projection `P(ξ̄)` (6.10) with gains `K_k` (nu×ndx, `N` of them): `x̄` `(N+1)·nx`
/// (states of the dynamics' [`crate::StateSpace`]), `ū` `N·nu`. Fails when a step of the dynamics fails.
pub fn project<D: Dynamics + ?Sized>(dynamics: &D, x_bar: &[f64], u_bar: &[f64], gains: &[DMatrix<f64>]) -> Result<(Vec<f64>, Vec<f64>)> {
    let space = dynamics.state_space();
    let (nx, ndx, nu) = (space.nx(), space.ndx(), dynamics.nu());
    check_multiple(u_bar.len(), nu, "u_bar")?;
    let steps = u_bar.len() / nu;
    if x_bar.len() != (steps + 1) * nx || gains.len() != steps || gains.iter().any(|g| g.shape() != (nu, ndx)) {
        return Err(OptimError::InvalidInput(format!(
            "projection: x_bar needs (N+1)·nx = {} entries and N = {steps} gains of shape ({nu}, {ndx}); got {} entries and {} gains",
            (steps + 1) * nx,
            x_bar.len(),
            gains.len()
        )));
    }
    let mut dx = vec![0.0; ndx];
    dynamics.rollout(&x_bar[..nx], steps, &mut |k, xk, uk| {
        track(&space, &gains[k], &x_bar[k * nx..(k + 1) * nx], &u_bar[k * nu..(k + 1) * nu], xk, uk, &mut dx);
    })
}

/// The derivative of the projection `δξ = DP(ξ̄)∘δξ̄` (6.11): the trajectory of
/// `δx_{k+1} = A_k δx_k + B_k δu_k`, `δu_k = δū_k − K_k (δx_k − δx̄_k)`, `δx_0 = δx̄_0`, with
/// `A_k`, `B_k` the linearisation along `P(ξ̄)`.
#[must_use]
pub fn project_tangent(
    a: &[DMatrix<f64>],
    b: &[DMatrix<f64>],
    gains: &[DMatrix<f64>],
    dx_bar: &[DVector<f64>],
    du_bar: &[DVector<f64>],
) -> (Vec<DVector<f64>>, Vec<DVector<f64>>) {
    let steps = a.len();
    let mut dx = Vec::with_capacity(steps + 1);
    let mut du = Vec::with_capacity(steps);
    dx.push(dx_bar[0].clone());
    for k in 0..steps {
        let u = &du_bar[k] - &gains[k] * (&dx[k] - &dx_bar[k]);
        let next = &a[k] * &dx[k] + &b[k] * &u;
        du.push(u);
        dx.push(next);
    }
    (dx, du)
}

/// The DLQR projection gains about `(x, u)` (weights default to identity).
pub fn projection_gains<D: Dynamics + ?Sized>(dynamics: &D, a: &[DMatrix<f64>], b: &[DMatrix<f64>], options: &ProjectionOptions) -> Result<Vec<DMatrix<f64>>> {
    let (ndx, nu) = (dynamics.state_space().ndx(), dynamics.nu());
    let q = options.proj_q.clone().unwrap_or_else(|| DMatrix::identity(ndx, ndx));
    let r = options.proj_r.clone().unwrap_or_else(|| DMatrix::identity(nu, nu));
    let qn = options.proj_qn.clone().unwrap_or_else(|| DMatrix::identity(ndx, ndx));
    Ok(lqr(a, b, std::slice::from_ref(&q), std::slice::from_ref(&r), &qn)?.k)
}

/// The quadratic model `(Q_k, S_k, R_k, Q_N)` of the descent problem, along with the data it
/// was built from (the first-order cost terms and the linearisation). `s[k]` is `S_kᵀ`
/// (nu×nx), like [`StageDerivatives::lux`].
#[derive(Clone, Debug)]
pub struct LqModel {
    pub model: DescentModel,
    pub q: Vec<DMatrix<f64>>,
    pub s: Vec<DMatrix<f64>>,
    pub r: Vec<DMatrix<f64>>,
    pub qn: DMatrix<f64>,
}

impl LqModel {
    /// `q(ξ)∘(δξ, δξ)` of (6.29) (without the ½): `Σ [δxᵀQδx + 2δxᵀSδu + δuᵀRδu] + δx_NᵀQ_Nδx_N`.
    #[must_use]
    pub fn form(&self, dx: &[DVector<f64>], du: &[DVector<f64>]) -> f64 {
        let steps = du.len();
        let mut v = 0.0;
        for k in 0..steps {
            v += dx[k].dot(&(&self.q[k] * &dx[k])) + 2.0 * du[k].dot(&(&self.s[k] * &dx[k])) + du[k].dot(&(&self.r[k] * &du[k]));
        }
        v + dx[steps].dot(&(&self.qn * &dx[steps]))
    }
}

/// The Newton adjoint of Prop. 7: `z_N = m_x`, `z_k = ℓ_x − K_kᵀℓ_u + (A_k − B_kK_k)ᵀ z_{k+1}`
/// (`N+1` vectors).
#[must_use]
pub fn newton_adjoint(a: &[DMatrix<f64>], b: &[DMatrix<f64>], gains: &[DMatrix<f64>], d: &[StageDerivatives], term: &StageDerivatives) -> Vec<DVector<f64>> {
    let steps = a.len();
    let mut z = vec![DVector::zeros(term.lx.len()); steps + 1];
    z[steps] = term.lx.clone();
    for k in (0..steps).rev() {
        let acl = &a[k] - &b[k] * &gains[k];
        z[k] = &d[k].lx - gains[k].transpose() * &d[k].lu + acl.transpose() * &z[k + 1];
    }
    z
}

/// Builds the model `model` (not [`DescentModel::Auto`]) along the trajectory `nominal` (with
/// its linearisation), cost derivatives `(d, term)` and projection gains.
pub fn lq_model<D: Dynamics + ?Sized>(
    dynamics: &D,
    model: DescentModel,
    nominal: Nominal<'_>,
    gains: &[DMatrix<f64>],
    d: &[StageDerivatives],
    term: &StageDerivatives,
) -> Result<LqModel> {
    let Nominal { x, u, a, b } = nominal;
    let (nx, ndx, nu) = (dynamics.nx(), dynamics.state_space().ndx(), dynamics.nu());
    let steps = a.len();
    match model {
        DescentModel::Steepest => Ok(LqModel {
            model,
            q: vec![DMatrix::identity(ndx, ndx); steps],
            s: vec![DMatrix::zeros(nu, ndx); steps],
            r: vec![DMatrix::identity(nu, nu); steps],
            qn: DMatrix::identity(ndx, ndx),
        }),
        DescentModel::QuasiNewton => Ok(LqModel {
            model,
            q: d.iter().map(|s| s.lxx.clone()).collect(),
            s: d.iter().map(|s| s.lux.clone()).collect(),
            r: d.iter().map(|s| s.luu.clone()).collect(),
            qn: term.lxx.clone(),
        }),
        DescentModel::Newton => {
            let z = newton_adjoint(a, b, gains, d, term);
            let blocks: Result<Vec<SecondOrder>> = vidyn_batch::install(|| {
                (0..steps)
                    .into_par_iter()
                    .map(|k| {
                        let mut so = SecondOrder::zeros(ndx, nu);
                        dynamics.second_order_contracted(k, &x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu], z[k + 1].as_slice(), &mut so)?;
                        Ok(so)
                    })
                    .collect()
            });
            let blocks = blocks?;
            let mut q = Vec::with_capacity(steps);
            let mut s = Vec::with_capacity(steps);
            let mut r = Vec::with_capacity(steps);
            for (k, so) in blocks.into_iter().enumerate() {
                let mut qk = &d[k].lxx + so.hxx;
                let mut rk = &d[k].luu + so.huu;
                symmetrise(&mut qk);
                symmetrise(&mut rk);
                q.push(qk);
                s.push(&d[k].lux + so.hux);
                r.push(rk);
            }
            Ok(LqModel { model, q, s, r, qn: term.lxx.clone() })
        }
        DescentModel::Auto => Err(OptimError::InvalidInput("lq_model needs a concrete model (steepest, quasi-Newton or Newton)".into())),
    }
}

/// A descent direction `(δx (N+1 vectors), δu (N vectors), Dh∘δξ)`.
pub type Direction = (Vec<DVector<f64>>, Vec<DVector<f64>>, f64);

/// Solves the descent LQ problem for `model`; `None` when `Γ_k` is not positive definite
/// (an indefinite Newton model). Returns `(δx, δu, Dh∘δξ)`.
#[must_use]
pub fn lq_descent(a: &[DMatrix<f64>], b: &[DMatrix<f64>], model: &LqModel, d: &[StageDerivatives], term: &StageDerivatives) -> Option<Direction> {
    let steps = a.len();
    let mut p = model.qn.clone();
    symmetrise(&mut p);
    let mut bv = term.lx.clone();
    let mut kk = Vec::with_capacity(steps);
    let mut cc = Vec::with_capacity(steps);
    for k in (0..steps).rev() {
        let (ak, bk) = (&a[k], &b[k]);
        let pb = &p * bk;
        let mut gamma = &model.r[k] + bk.transpose() * &pb;
        symmetrise(&mut gamma);
        let chol = gamma.clone().cholesky()?;
        let kgain = chol.solve(&(pb.transpose() * ak + &model.s[k]));
        let c = chol.solve(&(bk.transpose() * &bv + &d[k].lu));
        let acl = ak - bk * &kgain;
        let mut pn = &model.q[k] + ak.transpose() * &p * ak - kgain.transpose() * &gamma * &kgain;
        symmetrise(&mut pn);
        bv = acl.transpose() * &bv + &d[k].lx - kgain.transpose() * &d[k].lu;
        p = pn;
        kk.push(kgain);
        cc.push(c);
    }
    kk.reverse();
    cc.reverse();
    let nx = term.lx.len();
    let mut dx = vec![DVector::zeros(nx)];
    let mut du = Vec::with_capacity(steps);
    let mut slope = 0.0;
    for k in 0..steps {
        let u = -&kk[k] * &dx[k] - &cc[k];
        slope += d[k].lx.dot(&dx[k]) + d[k].lu.dot(&u);
        let next = &a[k] * &dx[k] + &b[k] * &u;
        du.push(u);
        dx.push(next);
    }
    slope += term.lx.dot(&dx[steps]);
    if !slope.is_finite() {
        return None;
    }
    Some((dx, du, slope))
}

/// Johnson's discrete projection-operator optimiser (Alg. 1 with the Armijo search of Alg. 3)
/// from `x0` and the controls `u_init` (`N·nu`). With `x_guess` (`(N+1)·nx`, e.g. the desired
/// trajectory) the first iterate is `P(x_guess, u_init)` with the DLQR gains about that curve;
/// without it, the open-loop rollout of `u_init`. Errors when the inputs are inconsistent, the
/// cost fails, the first iterate cannot be formed, or [`DescentModel::Newton`] is requested
/// for dynamics without second derivatives.
pub fn projection_optimize<D: Dynamics + ?Sized, C: Cost + ?Sized>(
    dynamics: &D,
    cost: &C,
    x0: &[f64],
    u_init: &[f64],
    x_guess: Option<&[f64]>,
    options: &ProjectionOptions,
) -> Result<ProjectionResult> {
    let space = dynamics.state_space();
    let (nx, ndx, nu) = (space.nx(), space.ndx(), dynamics.nu());
    let steps = check_start(x0, u_init, nx, nu)?;
    space.check(x0, "x0")?;
    let o = options;
    if !(o.tolerance >= 0.0
        && o.max_iterations > 0
        && o.armijo_alpha > 0.0
        && o.armijo_alpha < 1.0
        && o.armijo_beta > 0.0
        && o.armijo_beta < 1.0
        && o.max_armijo > 0)
    {
        return Err(OptimError::InvalidInput(
            "options: need tolerance ≥ 0, max_iterations ≥ 1, 0 < armijo_alpha < 1, 0 < armijo_beta < 1, max_armijo ≥ 1".into(),
        ));
    }
    for (w, dim, name) in [(&o.proj_q, ndx, "proj_Q"), (&o.proj_r, nu, "proj_R"), (&o.proj_qn, ndx, "proj_QN")] {
        if let Some(w) = w {
            if w.shape() != (dim, dim) {
                return Err(OptimError::InvalidInput(format!("{name} is {:?}, expected ({dim}, {dim})", w.shape())));
            }
            check_finite(w.as_slice(), name)?;
        }
    }
    if o.model == DescentModel::Newton && !dynamics.has_second_order() {
        // the dynamics' own message says why (e.g. the VI's)
        let probe = dynamics.second_order_contracted(0, x0, &u_init[..nu], &vec![0.0; ndx], &mut SecondOrder::zeros(ndx, nu));
        return Err(match probe {
            Err(e) => e,
            Ok(()) => OptimError::NotImplemented("the Newton model needs second derivatives of the dynamics (Dynamics::has_second_order is false)".into()),
        });
    }
    let start = Instant::now();
    let (mut x, mut u) = match x_guess {
        None => rollout_open_loop(dynamics, x0, u_init)?,
        Some(xg) => {
            if xg.len() != (steps + 1) * nx {
                return Err(OptimError::InvalidInput(format!("x_guess has {} entries, expected (N+1)·nx = {}", xg.len(), (steps + 1) * nx)));
            }
            for (k, xk) in xg.chunks_exact(nx).enumerate() {
                space.check(xk, &format!("x_guess[{k}]"))?;
            }
            let mut xb = xg.to_vec();
            xb[..nx].copy_from_slice(x0);
            let (a, b) = dynamics.linearize(&xb, u_init)?;
            let gains = projection_gains(dynamics, &a, &b, o)?;
            project(dynamics, &xb, u_init, &gains)?
        }
    };
    let mut j = total_cost(cost, &x, &u, nx, nu)?;
    if !j.is_finite() {
        return Err(OptimError::InvalidInput(format!("the initial trajectory has cost {j}")));
    }
    let mut cost_history = vec![j];
    let mut log = Vec::new();
    let mut gains = Vec::new();
    let mut status = ProjectionStatus::MaxIterations;
    let mut message = String::new();
    let mut iterations = 0;
    let mut derivatives = CostDerivatives::zeros(u.len() / nu, ndx, nu);
    'outer: for it in 0..o.max_iterations {
        let (a, b) = dynamics.linearize(&x, &u)?;
        gains = projection_gains(dynamics, &a, &b, o)?;
        derivatives.evaluate(cost, &x, &u)?;
        let (d, term) = (&derivatives.stages, &derivatives.terminal);
        let first = match o.model {
            DescentModel::Auto if it >= o.newton_after && dynamics.has_second_order() => DescentModel::Newton,
            DescentModel::Auto => DescentModel::QuasiNewton,
            m => m,
        };
        // fallback chain newton → quasi-Newton → steepest (trep's)
        let chain: &[DescentModel] = match first {
            DescentModel::Newton => &[DescentModel::Newton, DescentModel::QuasiNewton, DescentModel::Steepest],
            DescentModel::QuasiNewton => &[DescentModel::QuasiNewton, DescentModel::Steepest],
            _ => &[DescentModel::Steepest],
        };
        let mut last_slope = f64::NAN;
        for &m in chain {
            let model = lq_model(dynamics, m, Nominal { x: &x, u: &u, a: &a, b: &b }, &gains, d, term)?;
            let Some((dx, du, slope)) = lq_descent(&a, &b, &model, d, term) else {
                continue;
            };
            last_slope = slope;
            if slope.abs() < o.tolerance {
                log.push(ProjectionLog { cost: j, slope, model: m, step: 0.0, trials: 0, time: start.elapsed().as_secs_f64() });
                status = ProjectionStatus::Converged;
                message = format!("converged: |Dh∘δξ| = {:.3e} < {:e} after {iterations} iterations ({m:?} model)", slope.abs(), o.tolerance);
                break 'outer;
            }
            if slope >= 0.0 {
                continue;
            }
            // Armijo search on the projected curve ξ ⊕ λ δξ with the same K
            let mut lambda = 1.0;
            let mut xb = x.clone();
            let mut ub = u.clone();
            let mut step = DVector::zeros(ndx);
            for trial in 1..=o.max_armijo {
                for k in 0..=steps {
                    step.copy_from(&dx[k]);
                    step *= lambda;
                    space.integrate(&x[k * nx..(k + 1) * nx], step.as_slice(), &mut xb[k * nx..(k + 1) * nx]);
                    if k < steps {
                        for i in 0..nu {
                            ub[k * nu + i] = u[k * nu + i] + lambda * du[k][i];
                        }
                    }
                }
                // a failed trial shortens the step; a cancelled one ends the run
                let projected = project(dynamics, &xb, &ub, &gains);
                if let Err(OptimError::Cancelled) = projected {
                    return Err(OptimError::Cancelled);
                }
                if let Ok((xn, un)) = projected {
                    if let Ok(jn) = total_cost(cost, &xn, &un, nx, nu) {
                        if jn.is_finite() && jn < j + o.armijo_alpha * lambda * slope {
                            log.push(ProjectionLog { cost: j, slope, model: m, step: lambda, trials: trial, time: start.elapsed().as_secs_f64() });
                            x = xn;
                            u = un;
                            j = jn;
                            cost_history.push(j);
                            iterations += 1;
                            continue 'outer;
                        }
                    }
                }
                lambda *= o.armijo_beta;
            }
        }
        log.push(ProjectionLog { cost: j, slope: last_slope, model: first, step: 0.0, trials: o.max_armijo, time: start.elapsed().as_secs_f64() });
        status = ProjectionStatus::LineSearchFailed;
        message = format!("no Armijo step accepted with any model (last Dh∘δξ = {last_slope:.3e}) after {iterations} iterations");
        break;
    }
    if status == ProjectionStatus::MaxIterations {
        message = format!("reached max_iterations = {} (cost {j:.6e})", o.max_iterations);
    }
    if gains.is_empty() {
        let (a, b) = dynamics.linearize(&x, &u)?;
        gains = projection_gains(dynamics, &a, &b, o)?;
    }
    Ok(ProjectionResult {
        x,
        u,
        gains,
        cost: j,
        cost_history,
        log,
        iterations,
        converged: status == ProjectionStatus::Converged,
        status,
        message,
        wall_time: start.elapsed().as_secs_f64(),
    })
}
