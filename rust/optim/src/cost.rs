//! Stage costs `ℓ_k(x, u)` and the terminal cost `m(x)` with their first and second
//! derivatives, as iLQR consumes them.

use crate::dynamics::{check_finite, check_multiple};
use crate::error::{OptimError, Result};
use crate::lqr::symmetrise;
use nalgebra::{DMatrix, DVector};

/// Value and derivatives of one stage: `l`, `l_x` (nx), `l_u` (nu), `l_xx` (nx×nx),
/// `l_uu` (nu×nu), `l_ux` (nu×nx). The terminal stage leaves the `u` parts empty.
#[derive(Clone, Debug)]
pub struct StageDerivatives {
    pub l: f64,
    pub lx: DVector<f64>,
    pub lu: DVector<f64>,
    pub lxx: DMatrix<f64>,
    pub luu: DMatrix<f64>,
    pub lux: DMatrix<f64>,
}

impl StageDerivatives {
    #[must_use]
    pub fn zeros(nx: usize, nu: usize) -> Self {
        Self { l: 0.0, lx: DVector::zeros(nx), lu: DVector::zeros(nu), lxx: DMatrix::zeros(nx, nx), luu: DMatrix::zeros(nu, nu), lux: DMatrix::zeros(nu, nx) }
    }

    /// Sets every entry to zero, keeping the sizes (what [`StageDerivatives::zeros`] returns).
    pub fn clear(&mut self) {
        self.l = 0.0;
        self.lx.fill(0.0);
        self.lu.fill(0.0);
        self.lxx.fill(0.0);
        self.luu.fill(0.0);
        self.lux.fill(0.0);
    }
}

/// A trajectory cost `Σ_{k<N} ℓ_k(x_k, u_k) + m(x_N)`.
///
/// `parallel()` says whether `running*` may be called from several threads at once (false
/// for costs that call back into Python); iLQR then evaluates the stages in sequence.
pub trait Cost: Sync {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64>;
    fn terminal_value(&self, x: &[f64]) -> Result<f64>;
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()>;
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()>;
    fn parallel(&self) -> bool {
        true
    }
}

/// A boxed cost is a cost (lets bindings compose costs chosen at run time).
impl<C: Cost + ?Sized> Cost for Box<C> {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        (**self).running_value(k, x, u)
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        (**self).terminal_value(x)
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        (**self).running_derivatives(k, x, u, out)
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        (**self).terminal_derivatives(x, out)
    }
    fn parallel(&self) -> bool {
        (**self).parallel()
    }
}

/// Total cost of a trajectory (`x`: `(N+1)·nx`, `u`: `N·nu`).
pub fn total_cost<C: Cost + ?Sized>(cost: &C, x: &[f64], u: &[f64], nx: usize, nu: usize) -> Result<f64> {
    let steps = u.len() / nu;
    let mut j = 0.0;
    for k in 0..steps {
        j += cost.running_value(k, &x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu])?;
    }
    Ok(j + cost.terminal_value(&x[steps * nx..(steps + 1) * nx])?)
}

/// The quadratic tracking cost
/// `ℓ_k = ½ (x − x_ref,k)ᵀ Q_k (x − x_ref,k) + ½ (u − u_ref,k)ᵀ R_k (u − u_ref,k)` and
/// `m = ½ (x − x_ref,N)ᵀ Q_N (x − x_ref,N)` (trep's and crocoddyl's ½ convention).
///
/// Per-step lists hold `N` entries or one for every step; `x_ref` holds `(N+1)·nx` or `nx`
/// entries, `u_ref` `N·nu` or `nu` (or none: zero).
#[derive(Clone, Debug)]
pub struct QuadraticCost {
    nx: usize,
    nu: usize,
    pub q: Vec<DMatrix<f64>>,
    pub r: Vec<DMatrix<f64>>,
    pub qn: DMatrix<f64>,
    pub x_ref: Vec<f64>,
    pub u_ref: Vec<f64>,
}

impl QuadraticCost {
    /// Weights are symmetrised (`(W + Wᵀ)/2`, which leaves the cost unchanged).
    pub fn new(mut q: Vec<DMatrix<f64>>, mut r: Vec<DMatrix<f64>>, mut qn: DMatrix<f64>, x_ref: Vec<f64>, u_ref: Vec<f64>) -> Result<Self> {
        let (Some(q0), Some(r0)) = (q.first(), r.first()) else {
            return Err(OptimError::InvalidInput("Q and R need at least one matrix each".into()));
        };
        let (nx, nu) = (q0.nrows(), r0.nrows());
        for (name, list, dim) in [("Q", &q, nx), ("R", &r, nu)] {
            for (k, m) in list.iter().enumerate() {
                if m.shape() != (dim, dim) {
                    return Err(OptimError::InvalidInput(format!("{name}[{k}] is {:?}, expected ({dim}, {dim})", m.shape())));
                }
                check_finite(m.as_slice(), name)?;
            }
        }
        if qn.shape() != (nx, nx) {
            return Err(OptimError::InvalidInput(format!("QN is {:?}, expected ({nx}, {nx})", qn.shape())));
        }
        check_finite(qn.as_slice(), "QN")?;
        for m in q.iter_mut().chain(r.iter_mut()).chain(std::iter::once(&mut qn)) {
            symmetrise(m);
        }
        check_multiple(x_ref.len(), nx, "x_ref")?;
        let u_ref = if u_ref.is_empty() { vec![0.0; nu] } else { u_ref };
        check_multiple(u_ref.len(), nu, "u_ref")?;
        check_finite(&x_ref, "x_ref")?;
        check_finite(&u_ref, "u_ref")?;
        Ok(Self { nx, nu, q, r, qn, x_ref, u_ref })
    }

    /// Checks that the per-step data cover `steps` steps.
    pub fn check_horizon(&self, steps: usize) -> Result<()> {
        let ok = |len: usize, per: usize, need: usize| len == per || len == per * need;
        if !(self.q.len() == 1 || self.q.len() == steps) || !(self.r.len() == 1 || self.r.len() == steps) {
            return Err(OptimError::InvalidInput(format!("Q has {} and R {} matrices; expected 1 or N = {steps}", self.q.len(), self.r.len())));
        }
        if !ok(self.x_ref.len(), self.nx, steps + 1) || !ok(self.u_ref.len(), self.nu, steps) {
            return Err(OptimError::InvalidInput(format!("x_ref has {} rows and u_ref {}; expected 1 or N+1 = {} and 1 or N = {steps}", self.x_ref.len() / self.nx, self.u_ref.len() / self.nu, steps + 1)));
        }
        Ok(())
    }

    #[must_use]
    pub fn nx(&self) -> usize {
        self.nx
    }
    #[must_use]
    pub fn nu(&self) -> usize {
        self.nu
    }

    fn x_ref_at(&self, k: usize) -> &[f64] {
        if self.x_ref.len() == self.nx {
            &self.x_ref
        } else {
            &self.x_ref[k * self.nx..(k + 1) * self.nx]
        }
    }
    fn u_ref_at(&self, k: usize) -> &[f64] {
        if self.u_ref.len() == self.nu {
            &self.u_ref
        } else {
            &self.u_ref[k * self.nu..(k + 1) * self.nu]
        }
    }
    fn pick(list: &[DMatrix<f64>], k: usize) -> &DMatrix<f64> {
        &list[if list.len() == 1 { 0 } else { k }]
    }
}

/// `(½ eᵀ W e, W e)` for `e = x − r`.
fn quad(w: &DMatrix<f64>, x: &[f64], r: &[f64]) -> (f64, DVector<f64>) {
    let e = DVector::from_iterator(x.len(), x.iter().zip(r).map(|(a, b)| a - b));
    let we = w * &e;
    (0.5 * e.dot(&we), we)
}

impl Cost for QuadraticCost {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        let (lx, _) = quad(Self::pick(&self.q, k), x, self.x_ref_at(k));
        let (lu, _) = quad(Self::pick(&self.r, k), u, self.u_ref_at(k));
        Ok(lx + lu)
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        let steps = if self.x_ref.len() == self.nx { 0 } else { self.x_ref.len() / self.nx - 1 };
        Ok(quad(&self.qn, x, self.x_ref_at(steps)).0)
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        let (q, r) = (Self::pick(&self.q, k), Self::pick(&self.r, k));
        let (lx, gx) = quad(q, x, self.x_ref_at(k));
        let (lu, gu) = quad(r, u, self.u_ref_at(k));
        out.l = lx + lu;
        out.lx.copy_from(&gx);
        out.lu.copy_from(&gu);
        out.lxx.copy_from(q);
        out.luu.copy_from(r);
        out.lux.fill(0.0);
        Ok(())
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        let steps = if self.x_ref.len() == self.nx { 0 } else { self.x_ref.len() / self.nx - 1 };
        let (l, g) = quad(&self.qn, x, self.x_ref_at(steps));
        out.l = l;
        out.lx.copy_from(&g);
        out.lxx.copy_from(&self.qn);
        Ok(())
    }
}

/// A [`QuadraticCost`] on the velocity state `y = (q, v)`, `v = M(q)⁻¹ p`, for VI states
/// `x = (q, p)` — the convention of most optimal-control codes (and of crocoddyl). The
/// value and gradient are exact (`∂v/∂p = M⁻¹`, `∂v/∂q = −M⁻¹ ∂(M(q) v)/∂q`, the latter from
/// RNEA derivatives); the Hessian is the Gauss–Newton one `Jᵀ W J` (the curvature of
/// `v(q, p)` is dropped, like the dynamics' in iLQR).
#[derive(Debug)]
pub struct VelocityCost {
    pub inner: QuadraticCost,
    model: std::sync::Arc<vidyn_rbd::Model>,
    /// The same model without gravity: `∂(M(q) v)/∂q` is then one RNEA derivative.
    weightless: vidyn_rbd::Model,
    /// Scratch reused across calls (one per concurrent caller).
    pool: std::sync::Mutex<Vec<vidyn_rbd::Workspace>>,
}

impl VelocityCost {
    /// `inner` must have `nx = 2·model.nv` and the model 1-dof joints only (`nq = nv`).
    pub fn new(model: std::sync::Arc<vidyn_rbd::Model>, inner: QuadraticCost) -> Result<Self> {
        if model.nq != model.nv || inner.nx() != 2 * model.nv {
            return Err(OptimError::InvalidInput(format!("the velocity cost needs nq = nv and nx = 2nv; got nq = {}, nv = {}, nx = {}", model.nq, model.nv, inner.nx())));
        }
        let mut weightless = (*model).clone();
        weightless.gravity.linear.fill(0.0);
        Ok(Self { inner, model, weightless, pool: std::sync::Mutex::new(Vec::new()) })
    }

    fn with_workspace<T>(&self, f: impl FnOnce(&mut vidyn_rbd::Workspace) -> T) -> T {
        let ws = self.pool.lock().ok().and_then(|mut p| p.pop());
        let mut ws = ws.unwrap_or_else(|| self.model.workspace());
        let out = f(&mut ws);
        if let Ok(mut p) = self.pool.lock() {
            p.push(ws);
        }
        out
    }

    /// `y = (q, M⁻¹ p)`.
    pub fn velocity_state(&self, x: &[f64]) -> Result<Vec<f64>> {
        self.with_workspace(|ws| {
            let n = self.model.nv;
            let minv = vidyn_rbd::minverse(&self.model, ws, &x[..n])?;
            let mut y = x.to_vec();
            for i in 0..n {
                y[n + i] = (0..n).map(|j| minv[(i, j)] * x[n + j]).sum();
            }
            Ok(y)
        })
    }

    /// `(y, ∂y/∂x)`.
    fn jacobian(&self, x: &[f64]) -> Result<(Vec<f64>, DMatrix<f64>)> {
        self.with_workspace(|ws| self.jacobian_in(ws, x))
    }

    fn jacobian_in(&self, ws: &mut vidyn_rbd::Workspace, x: &[f64]) -> Result<(Vec<f64>, DMatrix<f64>)> {
        let n = self.model.nv;
        let q = &x[..n];
        let minv = vidyn_rbd::minverse(&self.model, ws, q)?.clone();
        let p = DVector::from_column_slice(&x[n..]);
        let v = &minv * &p;
        // ∂(M⁻¹p)/∂q = −M⁻¹ ∂(M(q) v)/∂q, and M(q) v = RNEA(q, 0, v) without gravity
        let zero = vec![0.0; n];
        let dv_dq = -&minv * vidyn_rbd::rnea_derivatives(&self.weightless, ws, q, &zero, v.as_slice())?.dtau_dq;
        let mut jac = DMatrix::zeros(2 * n, 2 * n);
        jac.view_mut((0, 0), (n, n)).fill_with_identity();
        jac.view_mut((n, 0), (n, n)).copy_from(&dv_dq);
        jac.view_mut((n, n), (n, n)).copy_from(&minv);
        let mut y = x.to_vec();
        y[n..].copy_from_slice(v.as_slice());
        Ok((y, jac))
    }

    fn chain(jac: &DMatrix<f64>, out: &mut StageDerivatives) {
        out.lx = jac.transpose() * &out.lx;
        out.lxx = jac.transpose() * &out.lxx * jac;
        symmetrise(&mut out.lxx);
        if out.lux.nrows() > 0 {
            out.lux = &out.lux * jac;
        }
    }
}

impl From<vidyn_rbd::RbdError> for OptimError {
    fn from(e: vidyn_rbd::RbdError) -> Self {
        OptimError::Dynamics(vidyn_vi::ViError::Model(e))
    }
}

impl Cost for VelocityCost {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        self.inner.running_value(k, &self.velocity_state(x)?, u)
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        self.inner.terminal_value(&self.velocity_state(x)?)
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        let (y, jac) = self.jacobian(x)?;
        self.inner.running_derivatives(k, &y, u, out)?;
        Self::chain(&jac, out);
        Ok(())
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        let (y, jac) = self.jacobian(x)?;
        self.inner.terminal_derivatives(&y, out)?;
        Self::chain(&jac, out);
        Ok(())
    }
}
