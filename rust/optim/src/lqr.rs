//! Discrete LQR: the time-varying finite-horizon Riccati recursion, the steady-state DLQR of
//! an equilibrium, and the tracking controller `u_k = u_ref,k − K_k (x_k ⊖ x_ref,k)` in
//! closed-loop rollouts.
//!
//! Problem: minimise `Σ_{k<N} (x_kᵀ Q_k x_k + u_kᵀ R_k u_k) + x_Nᵀ Q_N x_N` subject to
//! `x_{k+1} = A_k x_k + B_k u_k` (a common factor ½ changes nothing). Recursion (Johnson's
//! thesis App. B.2.2, the corrected form of its Ch. 5; digest §4.3 and erratum 4):
//!
//! ```text
//! P_N = Q_N;  Γ_k = R_k + B_kᵀ P_{k+1} B_k;  K_k = Γ_k⁻¹ B_kᵀ P_{k+1} A_k;
//! P_k = Q_k + A_kᵀ P_{k+1} A_k − K_kᵀ Γ_k K_k,   then P_k ← (P_k + P_kᵀ)/2.
//! ```
//!
//! The optimal control is `u_k = −K_k x_k` and the optimal cost `x_0ᵀ P_0 x_0`. `K_kᵀ Γ_k K_k`
//! is evaluated as `(B_kᵀ P_{k+1} A_k)ᵀ K_k`, and `P` is symmetrised at every step, as trep
//! does ("absolutely necessary for stability").

use crate::checks::{check_finite, check_weights};
use crate::dense_kernels::symmetrise;
use crate::dynamics::Dynamics;
use crate::error::{OptimError, Result};
use crate::state_space::StateSpace;
use nalgebra::DMatrix;

/// Gains `K_k` (nu×nx, `k = 0..N`) and costs-to-go `P_k` (nx×nx, `k = 0..=N`).
#[derive(Clone, Debug, PartialEq)]
pub struct LqrSolution {
    pub k: Vec<DMatrix<f64>>,
    pub p: Vec<DMatrix<f64>>,
}

/// Element `k` of a per-step list, or its only element.
fn at<T>(v: &[T], k: usize) -> &T {
    &v[if v.len() == 1 { 0 } else { k }]
}

fn check_list(v: &[DMatrix<f64>], steps: usize, shape: (usize, usize), name: &str) -> Result<()> {
    if v.len() != 1 && v.len() != steps {
        return Err(OptimError::InvalidInput(format!("{name} has {} matrices; expected 1 or N = {steps}", v.len())));
    }
    for (k, m) in v.iter().enumerate() {
        if m.shape() != shape {
            return Err(OptimError::InvalidInput(format!("{name}[{k}] is {:?}, expected {shape:?}", m.shape())));
        }
        check_finite(m.as_slice(), name)?;
    }
    Ok(())
}

/// One Riccati step: `(K, P)` from `P' = P_{k+1}`; `step` labels errors.
pub fn riccati_step(
    a: &DMatrix<f64>,
    b: &DMatrix<f64>,
    q: &DMatrix<f64>,
    r: &DMatrix<f64>,
    p_next: &DMatrix<f64>,
    step: usize,
) -> Result<(DMatrix<f64>, DMatrix<f64>)> {
    let pb = p_next * b; // nx×nu
    let gamma = r + b.transpose() * &pb;
    let bpa = pb.transpose() * a; // nu×nx
    let chol = gamma.clone().cholesky().ok_or_else(|| {
        OptimError::NotPositiveDefinite(format!(
            "R + BᵀPB is not positive definite at step {step} (R must be positive definite, Q and Q_N positive semi-definite)"
        ))
    })?;
    let k = chol.solve(&bpa);
    let mut p = q + a.transpose() * p_next * a - bpa.transpose() * &k;
    symmetrise(&mut p);
    Ok((k, p))
}

/// Time-varying finite-horizon LQR. `a`, `b`: one matrix per step (`N` of each, `N ≥ 1`);
/// `q`, `r`: `N` matrices or one for every step; `qn`: terminal weight.
pub fn lqr(a: &[DMatrix<f64>], b: &[DMatrix<f64>], q: &[DMatrix<f64>], r: &[DMatrix<f64>], qn: &DMatrix<f64>) -> Result<LqrSolution> {
    let steps = a.len();
    if steps == 0 || b.is_empty() {
        return Err(OptimError::InvalidInput("A and B need at least one step".into()));
    }
    let (nx, nu) = (a[0].nrows(), b[0].ncols());
    check_list(a, steps, (nx, nx), "A")?;
    check_list(b, steps, (nx, nu), "B")?;
    if b.len() != steps {
        return Err(OptimError::InvalidInput(format!("A has {steps} steps but B has {}", b.len())));
    }
    check_list(q, steps, (nx, nx), "Q")?;
    check_list(r, steps, (nu, nu), "R")?;
    check_list(std::slice::from_ref(qn), 1, (nx, nx), "QN")?;
    check_weights(q, "Q")?;
    check_weights(r, "R")?;
    check_weights(std::slice::from_ref(qn), "QN")?;
    let mut p = vec![DMatrix::zeros(nx, nx); steps + 1];
    let mut gains = vec![DMatrix::zeros(nu, nx); steps];
    p[steps] = qn.clone();
    symmetrise(&mut p[steps]);
    for k in (0..steps).rev() {
        let (kk, pk) = riccati_step(&a[k], &b[k], at(q, k), at(r, k), &p[k + 1], k)?;
        if !(kk.iter().chain(pk.iter()).all(|x| x.is_finite())) {
            return Err(OptimError::NotConverged(format!(
                "the Riccati recursion overflowed at step {k} (P or K is not finite): the weights or the dynamics are too large for float64; scale them down"
            )));
        }
        gains[k] = kk;
        p[k] = pk;
    }
    Ok(LqrSolution { k: gains, p })
}

/// Steady-state DLQR of `(A, B, Q, R)`: iterates the Riccati map from `P = Q` until
/// `max|P_{i+1} − P_i| ≤ tolerance · max(1, max|P_i|)`. Returns `(K, P, iterations)`.
/// Errors with [`OptimError::NotConverged`] (reporting the last change) after
/// `max_iterations`, or when `P` stops being finite — `(A, B)` not stabilisable, or `(A, Q)`
/// with an undetectable unstable mode.
pub fn dlqr(
    a: &DMatrix<f64>,
    b: &DMatrix<f64>,
    q: &DMatrix<f64>,
    r: &DMatrix<f64>,
    tolerance: f64,
    max_iterations: usize,
) -> Result<(DMatrix<f64>, DMatrix<f64>, usize)> {
    let (nx, nu) = (a.nrows(), b.ncols());
    check_list(std::slice::from_ref(a), 1, (nx, nx), "A")?;
    check_list(std::slice::from_ref(b), 1, (nx, nu), "B")?;
    check_list(std::slice::from_ref(q), 1, (nx, nx), "Q")?;
    check_list(std::slice::from_ref(r), 1, (nu, nu), "R")?;
    check_weights(std::slice::from_ref(q), "Q")?;
    check_weights(std::slice::from_ref(r), "R")?;
    if !(tolerance > 0.0 && tolerance.is_finite()) || max_iterations == 0 {
        return Err(OptimError::InvalidInput(format!("tolerance {tolerance} and max_iterations {max_iterations} must be positive")));
    }
    let mut p = q.clone();
    symmetrise(&mut p);
    let mut change = f64::INFINITY;
    for it in 1..=max_iterations {
        let (k, pn) = riccati_step(a, b, q, r, &p, it)?;
        let scale = p.amax().max(1.0);
        change = (&pn - &p).amax();
        if !change.is_finite() || !pn.amax().is_finite() {
            break;
        }
        p = pn;
        if change <= tolerance * scale {
            return Ok((k, p, it));
        }
    }
    Err(OptimError::NotConverged(format!(
        "the discrete Riccati iteration did not converge: last change max|ΔP| = {change:e} after {max_iterations} iterations (tolerance {tolerance:e} relative); (A, B) may not be stabilisable or the closed loop is nearly marginal — raise max_iterations or check the linearisation"
    )))
}

/// A tracking controller `u_k = u_ref,k − K_k (x_k ⊖ x_ref,k)` on a state manifold
/// ([`StateSpace`]: on a floating base `q ⊖ q_ref` is the joint velocity taking `q_ref` to `q`
/// in unit time, as `model.difference`; in `ℝⁿ` it is `x − x_ref`). `x_ref`: `(N+1)·nx` (or
/// `nx` for an equilibrium), `u_ref`: `N·nu` (or `nu`), `gains`: `N` matrices `nu × ndx` (or
/// one, time-invariant), in the tangent coordinates of the linearisation they came from.
#[derive(Clone, Debug)]
pub struct TrackingController {
    pub x_ref: Vec<f64>,
    pub u_ref: Vec<f64>,
    pub gains: Vec<DMatrix<f64>>,
    space: StateSpace,
    nu: usize,
}

impl TrackingController {
    /// A controller on `ℝ^nx`, `nx` the gains' columns.
    pub fn new(x_ref: Vec<f64>, u_ref: Vec<f64>, gains: Vec<DMatrix<f64>>) -> Result<Self> {
        let ndx = gains.first().map_or(0, DMatrix::ncols);
        Self::on(StateSpace::euclidean(ndx), x_ref, u_ref, gains)
    }

    /// A controller on the states of `space` (gains `nu × space.ndx()`); the references are
    /// checked to be states of it (unit quaternions, finite entries).
    pub fn on(space: StateSpace, x_ref: Vec<f64>, u_ref: Vec<f64>, gains: Vec<DMatrix<f64>>) -> Result<Self> {
        let Some(g0) = gains.first() else {
            return Err(OptimError::InvalidInput("the controller needs at least one gain".into()));
        };
        let nu = g0.nrows();
        if gains.iter().any(|g| g.shape() != (nu, space.ndx())) {
            return Err(OptimError::InvalidInput(format!("every gain must be {nu}×{} (nu × ndx)", space.ndx())));
        }
        crate::checks::check_multiple(x_ref.len(), space.nx(), "x_ref")?;
        crate::checks::check_multiple(u_ref.len(), nu, "u_ref")?;
        for (k, xk) in x_ref.chunks_exact(space.nx()).enumerate() {
            space.check(xk, &format!("x_ref[{k}]"))?;
        }
        check_finite(&u_ref, "u_ref")?;
        Ok(Self { x_ref, u_ref, gains, space, nu })
    }

    /// Number of steps the references cover (`usize::MAX` when all are constant).
    #[must_use]
    pub fn horizon(&self) -> usize {
        let (nx, nu) = (self.space.nx(), self.nu);
        let mut h = usize::MAX;
        if self.x_ref.len() > nx {
            h = h.min(self.x_ref.len() / nx - 1);
        }
        if self.u_ref.len() > nu {
            h = h.min(self.u_ref.len() / nu);
        }
        if self.gains.len() > 1 {
            h = h.min(self.gains.len());
        }
        h
    }

    /// `u = u_ref,k − K_k (x ⊖ x_ref,k)`; `dx` (`ndx`) is scratch for the difference.
    pub fn control(&self, k: usize, x: &[f64], u: &mut [f64], dx: &mut [f64]) {
        let (nx, nu) = (self.space.nx(), self.nu);
        let xr = if self.x_ref.len() == nx { &self.x_ref[..] } else { &self.x_ref[k * nx..(k + 1) * nx] };
        let ur = if self.u_ref.len() == nu { &self.u_ref[..] } else { &self.u_ref[k * nu..(k + 1) * nu] };
        track(&self.space, at(&self.gains, k), xr, ur, x, u, dx);
    }
}

/// `u = u_ref − K (x ⊖ x_ref)` (`K`: `nu × ndx`, `dx` scratch of `ndx`): the feedback of
/// [`TrackingController`] and of the projection operator (Johnson 2012, eq. 6.10).
pub(crate) fn track(space: &StateSpace, gain: &DMatrix<f64>, x_ref: &[f64], u_ref: &[f64], x: &[f64], u: &mut [f64], dx: &mut [f64]) {
    space.difference(x_ref, x, dx);
    for (i, (ui, ur)) in u.iter_mut().zip(u_ref).enumerate() {
        *ui = ur - dx.iter().enumerate().map(|(j, d)| gain[(i, j)] * d).sum::<f64>();
    }
}

/// Closed-loop rollout of `steps` steps under a tracking controller (with the dynamics' own
/// step, e.g. the VI's Newton solve). Returns `(x, u)` row-major.
pub fn closed_loop_rollout<D: Dynamics + ?Sized>(dynamics: &D, x0: &[f64], controller: &TrackingController, steps: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let space = dynamics.state_space();
    let own = &controller.space;
    if own.nx() != space.nx() || own.ndx() != space.ndx() || own.is_euclidean() != space.is_euclidean() || controller.nu != dynamics.nu() {
        return Err(OptimError::InvalidInput(format!(
            "controller is for nx = {}, ndx = {}, nu = {} but the dynamics have nx = {}, ndx = {}, nu = {}",
            own.nx(),
            own.ndx(),
            controller.nu,
            space.nx(),
            space.ndx(),
            dynamics.nu()
        )));
    }
    if steps > controller.horizon() {
        return Err(OptimError::InvalidInput(format!("{steps} steps requested but the controller's references cover {}", controller.horizon())));
    }
    let mut dx = vec![0.0; space.ndx()];
    dynamics.rollout(x0, steps, &mut |k, x, u| controller.control(k, x, u, &mut dx))
}

/// Tracking LQR about a trajectory `(x, u)`: linearises every step (in parallel for a VI) and
/// solves the time-varying Riccati recursion; the thesis uses `Q = R = 1`.
pub fn tracking_lqr<D: Dynamics + ?Sized>(
    dynamics: &D,
    x: &[f64],
    u: &[f64],
    q: &[DMatrix<f64>],
    r: &[DMatrix<f64>],
    qn: &DMatrix<f64>,
) -> Result<LqrSolution> {
    let (a, b) = dynamics.linearize(x, u)?;
    lqr(&a, &b, q, r, qn)
}
