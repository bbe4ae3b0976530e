//! Stage costs `ℓ_k(x, u)` and the terminal cost `m(x)` with their first and second
//! derivatives, as iLQR consumes them.

use crate::checks::{check_finite, check_multiple, check_weights};
use crate::dense_kernels::symmetrise;
use crate::error::{OptimError, Result};
use crate::hinge::Hinges;
use crate::state_space::StateSpace;
use nalgebra::{Cholesky, DMatrix, DVector, DVectorViewMut, Dyn};
use rayon::prelude::*;
use std::sync::Arc;
use vidyn_batch::ScratchPool;

/// Value and derivatives of one stage: `l`, `l_x` (nx), `l_u` (nu), `l_xx` (nx×nx),
/// `l_uu` (nu×nu), `l_ux` (nu×nx), and the stage's hinge penalties (module [`crate::hinge`]).
/// The terminal stage leaves the `u` parts empty.
#[derive(Clone, Debug)]
pub struct StageDerivatives {
    pub l: f64,
    pub lx: DVector<f64>,
    pub lu: DVector<f64>,
    pub lxx: DMatrix<f64>,
    pub luu: DMatrix<f64>,
    pub lux: DMatrix<f64>,
    pub hinges: Hinges,
}

impl StageDerivatives {
    #[must_use]
    pub fn zeros(nx: usize, nu: usize) -> Self {
        Self {
            l: 0.0,
            lx: DVector::zeros(nx),
            lu: DVector::zeros(nu),
            lxx: DMatrix::zeros(nx, nx),
            luu: DMatrix::zeros(nu, nu),
            lux: DMatrix::zeros(nu, nx),
            hinges: Hinges::default(),
        }
    }

    /// Sets every entry to zero and forgets the hinges, keeping the sizes (what
    /// [`StageDerivatives::zeros`] returns).
    pub fn clear(&mut self) {
        self.l = 0.0;
        self.hinges.clear();
        // memsets; DMatrix::fill is a strided loop
        for m in [self.lx.as_mut_slice(), self.lu.as_mut_slice(), self.lxx.as_mut_slice(), self.luu.as_mut_slice(), self.lux.as_mut_slice()] {
            m.fill(0.0);
        }
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
    /// Whether [`Cost::running_derivatives`] sets `out.l` to what [`Cost::running_value`]
    /// returns for the same stage, bit for bit: iLQR then takes a trial's stage costs from the
    /// derivatives it has already computed instead of evaluating them again.
    fn value_in_derivatives(&self) -> bool {
        false
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
    fn value_in_derivatives(&self) -> bool {
        (**self).value_in_derivatives()
    }
}

/// Total cost of a trajectory (`x`: `(N+1)·nx`, `u`: `N·nu`). The stage values are
/// evaluated in parallel on the batch engine's pool (unless the cost says otherwise) and
/// summed in stage order, so the total does not depend on the thread count.
pub fn total_cost<C: Cost + ?Sized>(cost: &C, x: &[f64], u: &[f64], nx: usize, nu: usize) -> Result<f64> {
    trajectory_cost(cost, x, u, nx, nu, cost.parallel())
}

/// [`total_cost`] on the calling thread only (the same sum, in the same order).
pub(crate) fn trajectory_cost_sequential<C: Cost + ?Sized>(cost: &C, x: &[f64], u: &[f64], nx: usize, nu: usize) -> Result<f64> {
    trajectory_cost(cost, x, u, nx, nu, false)
}

fn trajectory_cost<C: Cost + ?Sized>(cost: &C, x: &[f64], u: &[f64], nx: usize, nu: usize, parallel: bool) -> Result<f64> {
    let steps = u.len() / nu;
    let stage = |k: usize| cost.running_value(k, &x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu]);
    let values: Vec<f64> = if parallel {
        vidyn_batch::install(|| (0..steps).into_par_iter().with_min_len(8).map(stage).collect::<Result<_>>())?
    } else {
        (0..steps).map(stage).collect::<Result<_>>()?
    };
    Ok(add_up(values.into_iter(), cost.terminal_value(&x[steps * nx..(steps + 1) * nx])?))
}

/// A trajectory's cost from its stage costs: their sum in stage order, then the terminal
/// cost (every evaluation of a trajectory's cost adds in this order, so that they agree to
/// the bit).
pub(crate) fn add_up(stages: impl Iterator<Item = f64>, terminal: f64) -> f64 {
    stages.fold(0.0, |j, v| j + v) + terminal
}

/// The quadratic tracking cost
/// `ℓ_k = ½ (x − x_ref,k)ᵀ Q_k (x − x_ref,k) + ½ (u − u_ref,k)ᵀ R_k (u − u_ref,k)` and
/// `m = ½ (x − x_ref,N)ᵀ Q_N (x − x_ref,N)` (trep's and crocoddyl's ½ convention).
///
/// Per-step lists hold `N` entries or one for every step; `x_ref` holds `(N+1)·nx` or `nx`
/// entries, `u_ref` `N·nu` or `nu` (or none: zero).
///
/// On a state manifold ([`QuadraticCost::on_space`], e.g. a floating base's quaternions) the
/// deviation is `δ = x ⊖ x_ref` (`ndx` entries, the weights `ndx × ndx`): value `½ δᵀ Q δ`,
/// gradient `Jᵀ Q δ` and Gauss–Newton Hessian `Jᵀ Q J` with `J = ∂δ/∂x` in tangent
/// coordinates ([`StateSpace::difference_jacobian`]; crocoddyl's `Jdiff`), exact at the
/// reference and where the joints' groups are flat.
#[derive(Clone, Debug)]
pub struct QuadraticCost {
    space: StateSpace,
    nu: usize,
    pub q: Vec<DMatrix<f64>>,
    pub r: Vec<DMatrix<f64>>,
    pub qn: DMatrix<f64>,
    pub x_ref: Vec<f64>,
    pub u_ref: Vec<f64>,
    /// Scratch of the deviations on a manifold (one per concurrent caller, shared by clones).
    scratch: Arc<ScratchPool<Deviation>>,
}

/// `δ = x ⊖ x_ref`, `J = ∂δ/∂x`, `W J` and `W δ` of one stage on a manifold.
#[derive(Debug)]
struct Deviation {
    delta: Vec<f64>,
    jac: DMatrix<f64>,
    weighted_jac: DMatrix<f64>,
    weighted: DVector<f64>,
}

impl QuadraticCost {
    /// Weights are symmetrised (`(W + Wᵀ)/2`, which leaves the cost unchanged).
    pub fn new(q: Vec<DMatrix<f64>>, r: Vec<DMatrix<f64>>, qn: DMatrix<f64>, x_ref: Vec<f64>, u_ref: Vec<f64>) -> Result<Self> {
        let nx = q.first().map_or(0, DMatrix::nrows);
        Self::on_space(StateSpace::euclidean(nx), q, r, qn, x_ref, u_ref)
    }

    /// The cost on the states of `space`: weights `ndx × ndx`, references `nx` entries per row
    /// (valid states: unit quaternions).
    pub fn on_space(
        space: StateSpace,
        mut q: Vec<DMatrix<f64>>,
        mut r: Vec<DMatrix<f64>>,
        mut qn: DMatrix<f64>,
        x_ref: Vec<f64>,
        u_ref: Vec<f64>,
    ) -> Result<Self> {
        let (Some(_), Some(r0)) = (q.first(), r.first()) else {
            return Err(OptimError::InvalidInput("Q and R need at least one matrix each".into()));
        };
        let (nx, nu) = (space.ndx(), r0.nrows());
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
        check_weights(&q, "Q")?;
        check_weights(&r, "R")?;
        check_weights(std::slice::from_ref(&qn), "QN")?;
        for m in q.iter_mut().chain(r.iter_mut()).chain(std::iter::once(&mut qn)) {
            symmetrise(m);
        }
        // no reference: the origin of a vector space (a Lie group has none to assume)
        let x_ref = match (x_ref.is_empty(), space.is_euclidean()) {
            (true, true) => vec![0.0; space.nx()],
            (true, false) => {
                return Err(OptimError::InvalidInput("x_ref is empty: states on a Lie group need a reference (e.g. the neutral configuration)".into()))
            }
            (false, _) => x_ref,
        };
        check_multiple(x_ref.len(), space.nx(), "x_ref")?;
        let u_ref = if u_ref.is_empty() { vec![0.0; nu] } else { u_ref };
        check_multiple(u_ref.len(), nu, "u_ref")?;
        check_finite(&x_ref, "x_ref")?;
        for (k, row) in x_ref.chunks_exact(space.nx()).enumerate() {
            space.check(row, &format!("x_ref[{k}]"))?;
        }
        check_finite(&u_ref, "u_ref")?;
        Ok(Self { space, nu, q, r, qn, x_ref, u_ref, scratch: Arc::default() })
    }

    /// The manifold of the states this cost weighs.
    #[must_use]
    pub fn space(&self) -> &StateSpace {
        &self.space
    }

    /// `½ δᵀ W δ` with `δ = x ⊖ r` on the manifold, and with `out` (`(l_x, l_xx)`) its
    /// gradient `Jᵀ W δ` and Gauss–Newton Hessian `Jᵀ W J` (struct docs).
    fn on_manifold(&self, w: &DMatrix<f64>, x: &[f64], r: &[f64], out: Option<(&mut DVector<f64>, &mut DMatrix<f64>)>) -> f64 {
        let ndx = self.space.ndx();
        let mut s = self.scratch.take(|| Deviation {
            delta: vec![0.0; ndx],
            jac: DMatrix::zeros(ndx, ndx),
            weighted_jac: DMatrix::zeros(ndx, ndx),
            weighted: DVector::zeros(ndx),
        });
        self.space.difference(r, x, &mut s.delta);
        let delta = &s.delta;
        let value = quad_of(w, ndx, |j| delta[j], Some(&mut s.weighted));
        if let Some((lx, lxx)) = out {
            self.space.difference_jacobian(r, x, &mut s.jac);
            // `J` is the identity but for the diagonal blocks of the joints on groups (a
            // free-flyer's 6×6, a ball's 3×3): with `B` such a block on the tangent range `R`,
            // `Jᵀ g` and `W J` differ from `g` and `W` on `R` only (`W J[:, R] = W[:, R] B`),
            // and `Jᵀ (W J)` from `W J` in the rows `R` only (`Bᵀ (W J)[R, :]`): O(ndx b²) in all
            let Deviation { jac, weighted_jac, weighted, .. } = &mut *s;
            lx.copy_from(weighted);
            weighted_jac.copy_from(w);
            for block in self.space.group_blocks() {
                for j in block.clone() {
                    lx[j] = block.clone().map(|k| jac[(k, j)] * weighted[k]).sum();
                    let mut column = weighted_jac.column_mut(j);
                    column.fill(0.0);
                    for k in block.clone() {
                        column.axpy(jac[(k, j)], &w.column(k), 1.0);
                    }
                }
            }
            lxx.copy_from(weighted_jac);
            for block in self.space.group_blocks() {
                for i in block.clone() {
                    for c in 0..ndx {
                        lxx[(i, c)] = block.clone().map(|k| jac[(k, i)] * weighted_jac[(k, c)]).sum();
                    }
                }
            }
            symmetrise(lxx);
        }
        self.scratch.give_back(s);
        value
    }

    /// Checks that the per-step data cover `steps` steps.
    pub fn check_horizon(&self, steps: usize) -> Result<()> {
        let ok = |len: usize, per: usize, need: usize| len == per || len == per * need;
        if !(self.q.len() == 1 || self.q.len() == steps) || !(self.r.len() == 1 || self.r.len() == steps) {
            return Err(OptimError::InvalidInput(format!("Q has {} and R {} matrices; expected 1 or N = {steps}", self.q.len(), self.r.len())));
        }
        let nx = self.space.nx();
        if !ok(self.x_ref.len(), nx, steps + 1) || !ok(self.u_ref.len(), self.nu, steps) {
            return Err(OptimError::InvalidInput(format!(
                "x_ref has {} rows and u_ref {}; expected 1 or N+1 = {} and 1 or N = {steps}",
                self.x_ref.len() / nx,
                self.u_ref.len() / self.nu,
                steps + 1
            )));
        }
        Ok(())
    }

    /// Entries of a state.
    #[must_use]
    pub fn nx(&self) -> usize {
        self.space.nx()
    }
    #[must_use]
    pub fn nu(&self) -> usize {
        self.nu
    }

    fn x_ref_at(&self, k: usize) -> &[f64] {
        let nx = self.space.nx();
        if self.x_ref.len() == nx {
            &self.x_ref
        } else {
            &self.x_ref[k * nx..(k + 1) * nx]
        }
    }

    /// The row of `x_ref` of the terminal state.
    fn terminal_ref(&self) -> &[f64] {
        let nx = self.space.nx();
        self.x_ref_at(if self.x_ref.len() == nx { 0 } else { self.x_ref.len() / nx - 1 })
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

/// `½ eᵀ W e` for `e = x − r`, writing `W e` into `grad` when given. `W` is symmetric
/// (symmetrised by [`QuadraticCost::new`]), so `(W e)_i` is column `i` (contiguous) times `e`.
/// No allocation: the cost runs once per stage of every trial trajectory.
fn quad(w: &DMatrix<f64>, x: &[f64], r: &[f64], grad: Option<&mut DVector<f64>>) -> f64 {
    quad_of(w, x.len(), |j| x[j] - r[j], grad)
}

/// `½ eᵀ W e` for the `n` entries `e(j)`, writing `W e` into `grad` when given ([`quad`]).
#[inline]
fn quad_of(w: &DMatrix<f64>, n: usize, e: impl Fn(usize) -> f64, mut grad: Option<&mut DVector<f64>>) -> f64 {
    let mut value = 0.0;
    for (i, column) in w.as_slice().chunks_exact(n.max(1)).take(n).enumerate() {
        let we: f64 = column.iter().enumerate().map(|(j, wji)| wji * e(j)).sum();
        if let Some(g) = grad.as_deref_mut() {
            g[i] = we;
        }
        value += e(i) * we;
    }
    0.5 * value
}

impl QuadraticCost {
    /// Errors unless `x` has `nx` entries and `out` is sized for `ndx` (a cost on another
    /// state manifold than the dynamics').
    fn check_sizes(&self, x: &[f64], out: &StageDerivatives) -> Result<()> {
        let (nx, ndx) = (self.space.nx(), self.space.ndx());
        if x.len() != nx || out.lx.len() != ndx || out.lxx.shape() != (ndx, ndx) {
            return Err(OptimError::InvalidInput(format!(
                "the quadratic cost weighs states of {nx} entries with {ndx} tangent directions; got a state of {} and derivatives of {}",
                x.len(),
                out.lx.len()
            )));
        }
        Ok(())
    }

    /// `½ δᵀ W δ` of the state, with `(l_x, l_xx)` into `out` when given.
    fn state_term(&self, w: &DMatrix<f64>, x: &[f64], r: &[f64], out: Option<(&mut DVector<f64>, &mut DMatrix<f64>)>) -> f64 {
        if !self.space.is_euclidean() {
            return self.on_manifold(w, x, r, out);
        }
        match out {
            None => quad(w, x, r, None),
            Some((lx, lxx)) => {
                lxx.copy_from(w);
                quad(w, x, r, Some(lx))
            }
        }
    }
}

impl Cost for QuadraticCost {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        Ok(self.state_term(Self::pick(&self.q, k), x, self.x_ref_at(k), None) + quad(Self::pick(&self.r, k), u, self.u_ref_at(k), None))
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        Ok(self.state_term(&self.qn, x, self.terminal_ref(), None))
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.check_sizes(x, out)?;
        let (q, r) = (Self::pick(&self.q, k), Self::pick(&self.r, k));
        out.l = self.state_term(q, x, self.x_ref_at(k), Some((&mut out.lx, &mut out.lxx))) + quad(r, u, self.u_ref_at(k), Some(&mut out.lu));
        out.luu.copy_from(r);
        out.lux.as_mut_slice().fill(0.0);
        Ok(())
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.check_sizes(x, out)?;
        out.l = self.state_term(&self.qn, x, self.terminal_ref(), Some((&mut out.lx, &mut out.lxx)));
        Ok(())
    }
    /// `l` and the value come from the same `quad` arithmetic (the gradient is a by-product).
    fn value_in_derivatives(&self) -> bool {
        true
    }
}

/// A [`QuadraticCost`] on the velocity state `y = (q, v)`, `v = M(q)⁻¹ p`, for VI states
/// `x = (q, p)` — the convention of most optimal-control codes (and of crocoddyl). The
/// value and gradient are exact; the Hessian is the Gauss–Newton one `Jᵀ W J` (the curvature
/// of `v(q, p)` is dropped, like the dynamics' in iLQR).
///
/// `v = M⁻¹p` by CRBA and a Cholesky factorisation of `M` (for the 9-dof panda about half
/// the instructions of ABA or of the dense `M⁻¹`). The Jacobian is
/// `J = ∂y/∂x = [[1, 0], [∂v/∂q, ∂v/∂p]]` with `[∂v/∂q | ∂v/∂p] = M⁻¹ [−T | 1]`,
/// `T = ∂(M(q) v)/∂q` at fixed `v`, formed with `M` in one pass over the tree
/// ([`vidyn_rbd::mass_matrix_and_derivative`]: the RNEA derivative at zero velocity without
/// gravity, whose `ℬ` terms vanish), and the same factor of `M` gives the whole block row
/// (checked against central differences in `tests/vi.rs`). The chain rule then uses the identity block instead of dense products:
/// with `X = [∂v/∂q | ∂v/∂p]` (n×2n) and `W J = [W_{·q} | 0] + W_{·v} X`,
/// $$\ell_x \leftarrow [g_q; 0] + X^T g_v,\quad
///   \ell_{xx} \leftarrow (WJ)_{q·} + X^T (WJ)_{v·},\quad
///   \ell_{ux} \leftarrow [\ell_{uq} | 0] + \ell_{uv} X,$$
/// where `g`, `W = ℓ_yy` and `ℓ_uy` come from `inner` at `y`. Per stage O(n) for the value,
/// O(n) + 8n³ + O(n²) for the derivatives; no buffers of our own are allocated once a
/// caller's scratch exists (for n > 5 the `gemm`s of the chain rule go through
/// matrixmultiply, which allocates its packing buffers per call).
///
/// On a floating base (free-flyer, spherical, planar joints) `q` keeps its `nq` coordinates,
/// `∂/∂q` is along the tangent directions of `model.difference` (as `T` is, the convention of
/// the RNEA derivatives) and `inner` measures `y ⊖ y_ref` on the same group, so the formulas
/// above hold unchanged in tangent coordinates.
#[derive(Debug)]
pub struct VelocityCost {
    pub inner: QuadraticCost,
    model: std::sync::Arc<vidyn_rbd::Model>,
    /// Scratch reused across calls, one per concurrent caller (boxed by the pool, so that
    /// taking one out and putting it back moves a pointer, not the workspace: moving it cost
    /// 3 % of the cart-pole swing-up's instructions).
    pool: ScratchPool<VelocityScratch>,
}

/// Scratch of one [`VelocityCost`] caller: the rigid-body workspace, `y` (nq + n), `M`
/// (n×n, factored in place), `X = [∂v/∂q | ∂v/∂p]` (n×2n) and `Xᵀ` (so that products are
/// plain `gemm`s), `g_v` (n), `W J` (2n×2n) and `ℓ_uv` (nu×n, sized on first use).
#[derive(Debug)]
struct VelocityScratch {
    ws: vidyn_rbd::Workspace,
    y: Vec<f64>,
    mass: DMatrix<f64>,
    x_jac: DMatrix<f64>,
    x_jac_t: DMatrix<f64>,
    gv: DVector<f64>,
    wj: DMatrix<f64>,
    luv: DMatrix<f64>,
}

impl VelocityCost {
    /// `inner` must have `nx = model.nq + model.nv` entries per state.
    pub fn new(model: std::sync::Arc<vidyn_rbd::Model>, inner: QuadraticCost) -> Result<Self> {
        let space = inner.space();
        if space.nx() != model.nq + model.nv || space.ndx() != 2 * model.nv {
            return Err(OptimError::InvalidInput(format!(
                "the velocity cost needs states of nx = nq + nv = {} entries and ndx = 2 nv = {} tangent directions; got nx = {}, ndx = {}",
                model.nq + model.nv,
                2 * model.nv,
                space.nx(),
                space.ndx()
            )));
        }
        Ok(Self { inner, model, pool: ScratchPool::default() })
    }

    fn with_scratch<T>(&self, f: impl FnOnce(&mut VelocityScratch) -> T) -> T {
        let (nq, n) = (self.model.nq, self.model.nv);
        let init = || VelocityScratch {
            ws: self.model.workspace(),
            y: vec![0.0; nq + n],
            mass: DMatrix::zeros(n, n),
            x_jac: DMatrix::zeros(n, 2 * n),
            x_jac_t: DMatrix::zeros(2 * n, n),
            gv: DVector::zeros(n),
            wj: DMatrix::zeros(2 * n, 2 * n),
            luv: DMatrix::zeros(0, n),
        };
        self.pool.with(init, f)
    }

    /// `y = (q, M⁻¹ p)`.
    pub fn velocity_state(&self, x: &[f64]) -> Result<Vec<f64>> {
        self.with_velocity_state(x, |y| Ok(y.to_vec()))
    }

    /// `f(y)` with `y = (q, M⁻¹ p)` in the scratch.
    fn with_velocity_state<T>(&self, x: &[f64], f: impl FnOnce(&[f64]) -> Result<T>) -> Result<T> {
        self.with_scratch(|s| {
            let chol = self.velocity_state_in(s, x)?;
            s.mass = chol.unpack_dirty();
            f(&s.y)
        })
    }

    /// Writes `y = (q, M⁻¹ p)` into `s.y` (`M` by CRBA, then Cholesky) and returns the factor
    /// of `M`, which owns `s.mass`'s buffer: the caller puts it back with `unpack_dirty`.
    fn velocity_state_in(&self, s: &mut VelocityScratch, x: &[f64]) -> Result<Cholesky<f64, Dyn>> {
        let nq = self.model.nq;
        let m = vidyn_rbd::crba(&self.model, &mut s.ws, &x[..nq])?;
        s.y.copy_from_slice(x);
        factor_and_solve(m, &mut s.mass, &mut s.y[nq..])
    }

    /// `s.y = y(x)` and `s.x_jac = [∂v/∂q | ∂v/∂p] = M⁻¹ [−T | 1]`, with `M` and
    /// `T = ∂(M v)/∂q` from one pass ([`vidyn_rbd::mass_matrix_and_derivative`]).
    fn jacobian_in(&self, s: &mut VelocityScratch, x: &[f64]) -> Result<()> {
        let (nq, n) = (self.model.nq, self.model.nv);
        s.y.copy_from_slice(x);
        let mut factor = None;
        let mass = &mut s.mass;
        let t = vidyn_rbd::mass_matrix_and_derivative(&self.model, &mut s.ws, &x[..nq], &mut s.y[nq..], |m, v| {
            factor = Some(factor_and_solve(m, mass, v)?);
            Ok::<(), OptimError>(())
        })?;
        let chol = factor.ok_or_else(|| OptimError::InvalidInput("internal: the mass matrix was not factored".into()))?;
        s.x_jac.columns_mut(0, n).copy_from(t);
        s.x_jac.columns_mut(0, n).neg_mut();
        s.x_jac.columns_mut(n, n).fill_with_identity();
        chol.solve_mut(&mut s.x_jac);
        s.mass = chol.unpack_dirty();
        Ok(())
    }

    /// The chain rule from `y` to `x` (see the type's documentation), in place on `out`.
    fn chain(&self, s: &mut VelocityScratch, out: &mut StageDerivatives) {
        let n = self.model.nv;
        let x = &s.x_jac;
        // ℓ_x = [g_q; 0] + Xᵀ g_v
        s.gv.copy_from(&out.lx.rows(n, n));
        out.lx.rows_mut(n, n).fill(0.0);
        out.lx.gemv_tr(1.0, x, &s.gv, 1.0);
        // W J = [W_{·q} | 0] + W_{·v} X, then ℓ_xx = (WJ)_{q·} + Xᵀ (WJ)_{v·}
        s.wj.gemm(1.0, &out.lxx.columns(n, n), x, 0.0);
        let mut wj_q = s.wj.columns_mut(0, n);
        wj_q += out.lxx.columns(0, n);
        out.lxx.copy_from(&s.wj);
        out.lxx.rows_mut(n, n).fill(0.0);
        s.x_jac_t.tr_copy_from(x);
        out.lxx.gemm(1.0, &s.x_jac_t, &s.wj.rows(n, n), 1.0);
        symmetrise(&mut out.lxx);
        // ℓ_ux = [ℓ_uq | 0] + ℓ_uv X
        let nu = out.lux.nrows();
        if nu > 0 {
            if s.luv.shape() != (nu, n) {
                s.luv = DMatrix::zeros(nu, n);
            }
            s.luv.copy_from(&out.lux.columns(n, n));
            out.lux.columns_mut(n, n).fill(0.0);
            out.lux.gemm(1.0, &s.luv, x, 1.0);
        }
    }
}

/// Factors `M` by Cholesky in the buffer `mass` (taken over by the factor; the caller puts it
/// back with `unpack_dirty`) and overwrites `p` with `M⁻¹ p`.
fn factor_and_solve(m: &DMatrix<f64>, mass: &mut DMatrix<f64>, p: &mut [f64]) -> Result<Cholesky<f64, Dyn>> {
    let n = m.nrows();
    // a failed factorisation consumes the buffer: re-sized here next time
    if mass.shape() != (n, n) {
        *mass = DMatrix::zeros(n, n);
    }
    mass.copy_from(m);
    let chol = Cholesky::new(std::mem::replace(mass, DMatrix::zeros(0, 0)))
        .ok_or_else(|| OptimError::NotPositiveDefinite("the mass matrix M(q) of the velocity cost is not positive definite".into()))?;
    chol.solve_mut(&mut DVectorViewMut::from_slice(p, n));
    Ok(chol)
}

impl From<vidyn_rbd::RbdError> for OptimError {
    fn from(e: vidyn_rbd::RbdError) -> Self {
        OptimError::Dynamics(vidyn_vi::ViError::Model(e))
    }
}

impl Cost for VelocityCost {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        self.with_velocity_state(x, |y| self.inner.running_value(k, y, u))
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        self.with_velocity_state(x, |y| self.inner.terminal_value(y))
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.with_scratch(|s| {
            self.jacobian_in(s, x)?;
            self.inner.running_derivatives(k, &s.y, u, out)?;
            self.chain(s, out);
            Ok(())
        })
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.with_scratch(|s| {
            self.jacobian_in(s, x)?;
            self.inner.terminal_derivatives(&s.y, out)?;
            self.chain(s, out);
            Ok(())
        })
    }
    /// `y` comes from the same CRBA and Cholesky solve either way, and the chain rule leaves
    /// `l` alone.
    fn value_in_derivatives(&self) -> bool {
        self.inner.value_in_derivatives()
    }
}

/// The stage derivatives of a cost along a trajectory (stages `0..N`, then the terminal one),
/// allocated once per solve and overwritten at every iterate.
pub(crate) struct CostDerivatives {
    pub(crate) stages: Vec<StageDerivatives>,
    pub(crate) terminal: StageDerivatives,
}

impl CostDerivatives {
    pub(crate) fn zeros(steps: usize, nx: usize, nu: usize) -> Self {
        Self { stages: vec![StageDerivatives::zeros(nx, nu); steps], terminal: StageDerivatives::zeros(nx, 0) }
    }

    /// Evaluates every stage along `(x, u)` (`(N+1)·nx` and `N·nu` entries); each stage is
    /// zeroed before the cost writes into it (in parallel on the batch engine's pool unless
    /// the cost says otherwise).
    pub(crate) fn evaluate<C: Cost + ?Sized>(&mut self, cost: &C, x: &[f64], u: &[f64]) -> Result<()> {
        // states have `nx` entries (more than the derivatives' tangent `lx` on a manifold)
        let (nu, steps) = (self.stages.first().map_or(0, |d| d.lu.len()), self.stages.len());
        let nx = x.len() / (steps + 1);
        let eval = |(k, d): (usize, &mut StageDerivatives)| -> Result<()> {
            d.clear();
            cost.running_derivatives(k, &x[k * nx..(k + 1) * nx], &u[k * nu..(k + 1) * nu], d)
        };
        if cost.parallel() {
            vidyn_batch::install(|| self.stages.par_iter_mut().enumerate().try_for_each(eval))?;
        } else {
            self.stages.iter_mut().enumerate().try_for_each(eval)?;
        }
        self.terminal.clear();
        cost.terminal_derivatives(&x[steps * nx..], &mut self.terminal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_space::StateSpace;
    use vidyn_rbd::builders::random_tree;
    use vidyn_rbd::Joint;

    /// On a manifold the Gauss–Newton Hessian `Jᵀ W J` formed block by block on the joints
    /// on groups equals the dense product, and the gradient `Jᵀ W δ` is central differences
    /// of the value along `x ⊕ h e_j` (h = 1e-6: truncation ~h² against entries of order 1,
    /// round-off ~1e-10; asserted to 1e-7): a random tree of every joint kind (free-flyer,
    /// ball and planar among them), a full symmetric weight.
    #[test]
    fn manifold_hessian_is_the_dense_gauss_newton_product() {
        let model = Arc::new(random_tree(6, 3, &Joint::examples()));
        let space = StateSpace::of_model(&model);
        assert!(model.joints.iter().any(|j| j.nq() != j.nv()), "the tree should have joints on groups");
        let (nx, ndx) = (space.nx(), space.ndx());
        let w = DMatrix::from_fn(ndx, ndx, |i, j| if i == j { 2.0 + i as f64 * 0.1 } else { 0.05 * ((i * 7 + j * 3) % 5) as f64 - 0.1 });
        let w = 0.5 * (&w + w.transpose());
        let step = |x: &[f64], scale: f64| {
            let dx: Vec<f64> = (0..ndx).map(|j| scale * ((j as f64) * 0.37).sin()).collect();
            let mut out = vec![0.0; nx];
            space.integrate(x, &dx, &mut out);
            out
        };
        let neutral: Vec<f64> = vidyn_rbd::neutral(&model).into_iter().chain(std::iter::repeat_n(0.0, ndx - model.nv)).collect();
        let (r, x) = (step(&neutral, 0.4), step(&neutral, -0.7));
        let cost = QuadraticCost::on_space(space.clone(), vec![w.clone()], vec![DMatrix::identity(1, 1)], w.clone(), r.clone(), vec![0.0]).unwrap();
        let (mut lx, mut lxx) = (DVector::zeros(ndx), DMatrix::zeros(ndx, ndx));
        let value = cost.state_term(&w, &x, &r, Some((&mut lx, &mut lxx)));
        let mut jac = DMatrix::zeros(ndx, ndx);
        space.difference_jacobian(&r, &x, &mut jac);
        let dense = jac.transpose() * &w * &jac;
        assert!((&lxx - &dense).amax() < 1e-12 * dense.amax(), "{}", (&lxx - &dense).amax());
        let h = 1e-6;
        for j in 0..ndx {
            let moved = |eps: f64| {
                let mut dx = vec![0.0; ndx];
                dx[j] = eps;
                let mut y = vec![0.0; nx];
                space.integrate(&x, &dx, &mut y);
                cost.state_term(&w, &y, &r, None)
            };
            let fd = (moved(h) - moved(-h)) / (2.0 * h);
            assert!((fd - lx[j]).abs() < 1e-7 * value.max(1.0), "column {j}: {fd} vs {}", lx[j]);
        }
    }
}
