//! Second-order partial derivatives of forward dynamics, `∂²q̈/∂q²`, `∂²q̈/∂q̇²`,
//! `∂²q̈/∂q∂q̇`, `∂²q̈/∂τ∂q` (FDSVA-SO, Singh, Russell & Wensing 2023, §VI, eqs. 44–49), and
//! their contractions `λᵀ∂²q̈` computed without the tensors.
//!
//! # Layout
//! As for inverse dynamics ([`crate::rnea_second_order`]): `(nv, nv, nv)` [`Tensor3`]s in
//! NumPy C order with `T[i, j, k] = ∂/∂x_k (∂q̈_i/∂y_j)` — `i` the acceleration, `j` the
//! inner and `k` the outer derivative, q-derivatives along `q ⊕ δ e_k` with the outer
//! perturbation applied first. So `d2ddq_dqdv[i, j, k] = ∂/∂q̇_k (∂q̈_i/∂q_j)` (`j` is q, `k`
//! is q̇; the two commute), and `d2ddq_dtaudq[i, j, k] = ∂/∂q_k (∂q̈_i/∂τ_j) = ∂(M⁻¹)_ij/∂q_k`.
//! `∂²q̈/∂τ² = ∂²q̈/∂τ∂q̇ = 0`. Same-joint q–q blocks of spherical, free-flyer and planar joints
//! are not symmetric (the Lie bracket, as for `∂²τ/∂q²`).
//!
//! # Formulas (implicit function theorem)
//! Write `ID(q, q̇, q̈)` for inverse dynamics, `FD(q, q̇, τ)` for forward dynamics, all
//! inverse-dynamics quantities evaluated at `q̈ = FD(q, q̇, τ)`, `M⁻¹ = ∂FD/∂τ` and
//! `FD_u = ∂FD/∂u = −M⁻¹ ∂ID/∂u` (first order, [`crate::aba_derivatives`]). Differentiating
//! the identity `∂ID/∂u_b + M ∂FD/∂u_b = 0` (which holds at every `(q, q̇)`) along `w_c`, with
//! `∂(∂ID/∂u_b)/∂q̈_l = ∂M_{·l}/∂u_b` (a and q derivatives commute) and `∂M/∂q̇ = 0`, gives
//! (46):
//! $$\frac{\partial^2 FD}{\partial u_b\,\partial w_c} = -M^{-1}\Big(\frac{\partial^2 ID}{\partial u_b\,\partial w_c}
//!   + \sum_l \frac{\partial M_{\cdot l}}{\partial w_c}\,FD_{u,lb} + \sum_l \frac{\partial M_{\cdot l}}{\partial u_b}\,FD_{w,lc}\Big)$$
//! * `∂²q̈/∂q²[:, b, c] = −M⁻¹(Hqq[:, b, c] + Σ_l dM[:, l, c] FD_q[l, b] + Σ_l dM[:, l, b] FD_q[l, c])`;
//! * `∂²q̈/∂q̇² = −M⁻¹ Hvv` (47);
//! * `∂²q̈/∂q∂q̇[:, b, c] = −M⁻¹(Hqv[:, b, c] + Σ_l dM[:, l, b] FD_v[l, c])` (49);
//! * `∂²q̈/∂τ∂q[:, j, k] = −(M⁻¹ ∂M/∂q_k M⁻¹)[:, j]` (44),
//!
//! where `Hqq`, `Hvv`, `Hqv`, `dM` are [`crate::rnea_second_order`]'s tensors at
//! `q̈ = FD(q, q̇, τ)` (with the same external wrenches, if any: they enter `Hqq` and the first
//! order terms, never `M`).
//!
//! # Implementation of the full tensors
//! "Inner terms" (the bracket): for each acceleration row `l`, the products with `dM[l, ·, ·]`
//! visit only its non-zero entries: row `x` of `[Xᵀ | Zᵀ | Y] = Σ_m dM[l, m, x] [FD_q | M⁻¹ |
//! FD_v][m, ·]` is one pass over a length-`3nv` row per eight non-zeros, O(nv·nnz(dM)) =
//! O(nv·N·d²) in all. "Outer term" (`−M⁻¹ ·`): instead of a dense product with `M⁻¹` (O(nv⁴)
//! per tensor), each tensor is solved with the sparse `M = LᵀDL` factorisation (Featherstone
//! 2008, §6.5; `L` has the tree's sparsity), all right-hand sides at once, in cache-sized
//! blocks of columns `(j, k)` (in place, or copied into a panel when only some columns are
//! solved), and each sweep writes a block row once, pulling up to eight rows of its descendants (leaves to root) or
//! ancestors (root to leaves, with `D⁻¹`) per pass. `∂²q̈/∂q̇²` is symmetric in `(j, k)` and so
//! is `∂²q̈/∂q²` outside the same-joint blocks (the q-perturbations of different joints
//! commute), so only their columns `k ≥ j` (`k ≥` the first dof of `j`'s joint for `∂²q̈/∂q²`)
//! are solved and the others mirrored: three tensors' worth of solves in place of four. Cost
//! O(nv²·(2·Σ_i depth_i + nv)) for the solves — O(nv⁴) for a chain, a few times less for
//! humanoids. No allocation once the [`AbaSecondOrderWorkspace`] exists.
//!
//! # Routes
//! Both forms above are O(nv⁴) on a chain (`nnz(dM) ≈ nv³/3`, `Σ depth ≈ nv²/2`). Singh et
//! al. (§VI-A) give O(n³) ones: the inner terms from one first-order product `∂(M y)/∂q` per
//! column `y` of `[FD_q | M⁻¹ | FD_v]` (IDFOZA, eq. 52: O(N·d) each,
//! `inner_terms_by_products`), the outer term by the articulated-body recursion per
//! right-hand side (AZA, eq. 50: O(N) each, module `articulated_solve`). Their constants are
//! larger, and as in the paper (inner crossover at N ≈ 45, outer beyond 100 on serial chains)
//! they pay only on long chains: each call takes, per term, the form whose operation count is
//! lower — the products when `nnz(dM) > 10·(Σ depth + nv²)`, the articulated solve when
//! `2·Σ depth − nv > 2.5·Σ_joints (6 + 24 d + 2 d²)` (the sparse forms do several times more
//! useful work per instruction; both ratios measured on chains of 20–200 links, BENCHMARKS.md).
//! Robots of example-robot-data keep the sparse forms; a 100-link chain takes both O(n³) ones.

//! # Contracted forms
//! With `μ = M⁻¹λ` (M is symmetric, so `λᵀM⁻¹ = μᵀ`), contracting (44)–(49) with `λ`:
//! * `λᵀ∂²q̈/∂q² = −(μᵀHqq + FD_qᵀP + PᵀFD_q)`, `λᵀ∂²q̈/∂q̇² = −μᵀHvv`,
//!   `λᵀ∂²q̈/∂q∂q̇ = −(μᵀHqv + PᵀFD_v)`, `λᵀ∂²q̈/∂τ∂q = −M⁻¹P`,
//!
//! where `P[l, c] = Σ_a μ_a ∂M_al/∂q_c = ∂(Mμ)_l/∂q_c` is the first-order `∂τ/∂q` of inverse
//! dynamics at `(q, q̇ = 0, q̈ = μ)` without gravity (IDFOZA, (52)), computed by the O(N·d)
//! first-order recursion, and `μᵀH` are [`crate::rnea_second_order_contracted`]'s forms
//! (O(N·d), no tensors). `P` has the tree sparsity of `∂τ/∂q`, so the three products cost
//! O(nv²·d). Total: ABA derivatives + two O(N·d) recursions + O(nv²·d).

use crate::algorithms::aba_derivatives::{aba_derivatives, mul_by_tree_sparse};
use crate::algorithms::articulated_solve::{ArticulatedFactors, ArticulatedScratch};
use crate::algorithms::crba::{crba, world_composites};
use crate::algorithms::mass_derivative::{mass_derivative_product_unchecked, mass_derivative_product_world};
use crate::algorithms::rnea_second_order::{rnea_second_order_contracted_unchecked, rnea_second_order_unchecked, SecondOrderWorkspace};
use crate::check::check_tangent;
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::Force;
use vidyn_spatial::Tensor3;

/// The four second-order partials of forward dynamics, borrowed from an
/// [`AbaSecondOrderWorkspace`]. Layout: module documentation (`[i, j, k]` = acceleration,
/// inner, outer derivative; C order).
#[derive(Debug)]
pub struct AbaSecondOrder<'w> {
    /// `(nv, nv, nv)`: `[i, j, k] = ∂/∂q_k (∂q̈_i/∂q_j)`.
    pub d2ddq_dq2: &'w Tensor3,
    /// `(nv, nv, nv)`: `[i, j, k] = ∂/∂q̇_k (∂q̈_i/∂q̇_j)`, symmetric in `j, k`.
    pub d2ddq_dv2: &'w Tensor3,
    /// `(nv, nv, nv)`: `[i, j, k] = ∂/∂q̇_k (∂q̈_i/∂q_j)` — `j` is q, `k` is q̇.
    pub d2ddq_dqdv: &'w Tensor3,
    /// `(nv, nv, nv)`: `[i, j, k] = ∂/∂q_k (∂q̈_i/∂τ_j) = ∂(M⁻¹)_ij/∂q_k`, symmetric in `i, j`.
    pub d2ddq_dtaudq: &'w Tensor3,
}

/// The `λ`-contracted second-order partials of forward dynamics, borrowed from the
/// [`Workspace`]: `[j, k] = Σ_i λ_i T[i, j, k]` for each tensor `T` of [`AbaSecondOrder`].
#[derive(Debug)]
pub struct AbaSecondOrderContracted<'w> {
    /// `(nv, nv)`: `[j, k] = Σ_i λ_i ∂/∂q_k (∂q̈_i/∂q_j)`.
    pub d2ddq_dq2: &'w DMatrix<f64>,
    /// `(nv, nv)`: `[j, k] = Σ_i λ_i ∂/∂q̇_k (∂q̈_i/∂q̇_j)`, symmetric.
    pub d2ddq_dv2: &'w DMatrix<f64>,
    /// `(nv, nv)`: `[j, k] = Σ_i λ_i ∂/∂q̇_k (∂q̈_i/∂q_j)` — `j` is q, `k` is q̇.
    pub d2ddq_dqdv: &'w DMatrix<f64>,
    /// `(nv, nv)`: `[j, k] = Σ_i λ_i ∂(M⁻¹)_ij/∂q_k`.
    pub d2ddq_dtaudq: &'w DMatrix<f64>,
}

/// Workspace of [`aba_second_order`]: a [`SecondOrderWorkspace`] (ordinary workspace plus the
/// inverse-dynamics tensors, which are evaluated at `q̈` and readable after the call) plus the
/// four forward-dynamics tensors and O(nv²) scratch: `8·nv³` doubles in all (2.9 MB at
/// nv = 36). Create it once with [`Model::aba_second_order_workspace`]; [`aba_second_order`]
/// then allocates nothing.
#[derive(Clone, Debug)]
pub struct AbaSecondOrderWorkspace {
    /// Inverse-dynamics second-order workspace; after [`aba_second_order`] its tensors hold
    /// `∂²τ` at `q̈ = FD(q, q̇, τ)` and its `workspace` the first-order results (`ddq`,
    /// `derivatives.dddq_dq`, `derivatives.dddq_dv`, `mass_matrix_inv`).
    pub inverse: SecondOrderWorkspace,
    d2ddq_dq2: Tensor3,
    d2ddq_dv2: Tensor3,
    d2ddq_dqdv: Tensor3,
    d2ddq_dtaudq: Tensor3,
    /// `[∂q̈/∂q | M⁻¹ | ∂q̈/∂q̇]`, `(nv, 3nv)` row-major: row `m` holds the three rows `m`.
    rows: Vec<f64>,
    /// `(nv, 3nv)` row-major scratch of one acceleration row's inner terms, `[Xᵀ | Zᵀ | Y]`.
    inner: Vec<f64>,
    /// `(nv, PANEL)` row-major panel of right-hand sides for the blocked solve.
    panel: Vec<f64>,
    /// First dof of the joint of each dof.
    joint_start: Vec<usize>,
    /// `M = LᵀDL`, row-major: `D` on the diagonal, `L[k, i]` below it (`i` an ancestor dof).
    ltdl: Vec<f64>,
    /// Parent dof of each dof (`usize::MAX` at a root).
    dof_parent: Vec<usize>,
    /// `L` by rows (`(j, L_ij)` for the ancestors `j` of `i`) and by columns (`(i, L_ij)` for
    /// the descendants `i` of `j`), `nv` lists of at most `nv` entries each.
    by_row: Terms,
    by_col: Terms,
    /// `(x, (m, dM[l, m, x]))` lists of one acceleration row `l`'s non-zeros of `∂M/∂q`.
    dm_terms: Terms,
    /// Scratch of the articulated-body solve.
    articulated: ArticulatedScratch,
    /// `(nv,)`: one column of `[FD_q | M⁻¹ | FD_v]`; `(2nv,)` scratch of [`Routes::for_tree`].
    column: Vec<f64>,
    counts: Vec<f64>,
}

impl AbaSecondOrderWorkspace {
    /// Allocates everything [`aba_second_order`] needs for `model`.
    #[must_use]
    pub fn new(model: &Model) -> Self {
        let nv = model.nv;
        let shape = [nv; 3];
        Self {
            inverse: SecondOrderWorkspace::new(model),
            d2ddq_dq2: Tensor3::zeros(shape),
            d2ddq_dv2: Tensor3::zeros(shape),
            d2ddq_dqdv: Tensor3::zeros(shape),
            d2ddq_dtaudq: Tensor3::zeros(shape),
            rows: vec![0.0; 3 * nv * nv],
            inner: vec![0.0; 3 * nv * nv],
            panel: vec![0.0; nv * panel_width(nv)],
            joint_start: vec![0; nv],
            ltdl: vec![0.0; nv * nv],
            dof_parent: vec![usize::MAX; nv],
            by_row: Terms::new(nv),
            by_col: Terms::new(nv),
            dm_terms: Terms::new(nv),
            articulated: ArticulatedScratch::new(model.nbodies()),
            column: vec![0.0; nv],
            counts: vec![0.0; 2 * nv],
        }
    }

    /// `∂²q̈/∂q²` of the last [`aba_second_order`] call.
    #[must_use]
    pub fn d2ddq_dq2(&self) -> &Tensor3 {
        &self.d2ddq_dq2
    }

    /// `∂²q̈/∂q̇²` of the last call.
    #[must_use]
    pub fn d2ddq_dv2(&self) -> &Tensor3 {
        &self.d2ddq_dv2
    }

    /// `∂²q̈/∂q∂q̇` of the last call.
    #[must_use]
    pub fn d2ddq_dqdv(&self) -> &Tensor3 {
        &self.d2ddq_dqdv
    }

    /// `∂²q̈/∂τ∂q` of the last call.
    #[must_use]
    pub fn d2ddq_dtaudq(&self) -> &Tensor3 {
        &self.d2ddq_dtaudq
    }
}

impl Model {
    /// A fresh [`AbaSecondOrderWorkspace`] for [`aba_second_order`].
    #[must_use]
    pub fn aba_second_order_workspace(&self) -> AbaSecondOrderWorkspace {
        AbaSecondOrderWorkspace::new(self)
    }
}

/// Second-order partial derivatives of forward dynamics `q̈ = aba(q, v, τ)`:
/// $$\frac{\partial^2\ddot q}{\partial q^2},\ \frac{\partial^2\ddot q}{\partial\dot q^2},\
///   \frac{\partial^2\ddot q}{\partial q\,\partial\dot q},\ \frac{\partial^2\ddot q}{\partial\tau\,\partial q}$$
/// by the implicit-function formulas (44)–(49) of Singh et al. from [`crate::rnea_second_order`]
/// at `q̈`, [`crate::aba_derivatives`] and the sparse `LᵀDL` factorisation of `M` (module
/// documentation). `q`: (nq,), `v`, `tau`: (nv,); four `(nv, nv, nv)` tensors, `[i, j, k]` =
/// acceleration, inner, outer derivative, C order. No allocation.
/// Errors: those of [`crate::aba`] (bad inputs, singular `M`).
/// Checked against central differences of [`crate::aba_derivatives`] in
/// `tests::aba_second_order_matches_differences_of_first_order`.
/// `fext`: the optional wrenches of [`crate::aba`].
pub fn aba_second_order<'w>(
    model: &Model,
    ws: &'w mut AbaSecondOrderWorkspace,
    q: &[f64],
    v: &[f64],
    tau: &[f64],
    fext: Option<&[Force]>,
) -> Result<AbaSecondOrder<'w>> {
    aba_second_order_impl(model, ws, q, v, tau, fext, None)?;
    Ok(ws.result())
}

impl AbaSecondOrderWorkspace {
    fn result(&self) -> AbaSecondOrder<'_> {
        AbaSecondOrder { d2ddq_dq2: &self.d2ddq_dq2, d2ddq_dv2: &self.d2ddq_dv2, d2ddq_dqdv: &self.d2ddq_dqdv, d2ddq_dtaudq: &self.d2ddq_dtaudq }
    }
}

/// Which forms of the inner and outer terms a call uses (module docs, "Routes").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Routes {
    /// The inner terms from `3nv` products `∂(M y)/∂q` ([`inner_terms_by_products`]) instead
    /// of the sparse rows of `∂M/∂q`.
    inner_by_products: bool,
    /// The outer term by the articulated-body recursion (module `articulated_solve`) instead
    /// of the sparse `LᵀDL` solve.
    outer_articulated: bool,
}

/// The inner terms by products pay when `nnz(∂M/∂q)` exceeds this multiple of
/// `Σ depth + nv²` (measured; module docs, "Routes").
const PRODUCTS_PAY: f64 = 10.0;
/// The articulated solve pays when `LᵀDL`'s `2·Σ depth − nv` per right-hand side exceeds this
/// multiple of its own operation count (measured; module docs, "Routes").
const ARTICULATED_PAYS: f64 = 2.5;

impl Routes {
    /// The cheaper routes for the tree of `model` (`dof_parent` from [`dof_parents`]) by the
    /// operation counts of module docs, "Routes". `counts`: `(2nv,)` scratch.
    fn for_tree(model: &Model, dof_parent: &[usize], counts: &mut [f64]) -> Self {
        let nv = model.nv;
        let (depth, subtree) = counts.split_at_mut(nv);
        // depth[i]: the dofs on the path from the root to i; subtree[i]: i's subtree, i included
        for i in 0..nv {
            depth[i] = if dof_parent[i] == usize::MAX { 1.0 } else { depth[dof_parent[i]] + 1.0 };
        }
        subtree[..nv].fill(1.0);
        for i in (0..nv).rev() {
            if dof_parent[i] != usize::MAX {
                subtree[dof_parent[i]] += subtree[i];
            }
        }
        let path_pairs: f64 = depth.iter().sum();
        // nnz(∂M/∂q) = Σ_m Σ_{l ⪯ m} (depth(m) − depth(l) + subtree(m)): ∂M_lm/∂q_x vanishes
        // unless x lies on the path from l (excluded) to m or below m
        let nnz: f64 = depth.iter().zip(&subtree[..nv]).map(|(&d, &t)| d * (d + t) - d * (d + 1.0) / 2.0).sum();
        let ltdl = 2.0 * path_pairs - nv as f64;
        let articulated: f64 = model.joints.iter().map(|j| j.nv() as f64).map(|d| 6.0 + 24.0 * d + 2.0 * d * d).sum();
        Self { inner_by_products: nnz > PRODUCTS_PAY * (path_pairs + (nv * nv) as f64), outer_articulated: ltdl > ARTICULATED_PAYS * articulated }
    }
}

/// [`aba_second_order`] on the given routes (`None`: the cheaper ones for the tree,
/// [`Routes::for_tree`]).
fn aba_second_order_impl(
    model: &Model,
    ws: &mut AbaSecondOrderWorkspace,
    q: &[f64],
    v: &[f64],
    tau: &[f64],
    fext: Option<&[Force]>,
    routes: Option<Routes>,
) -> Result<()> {
    let nv = model.nv;
    assert_eq!(ws.d2ddq_dq2.shape(), [nv; 3], "aba_second_order: the workspace was created for a model with another nv");
    // first order: q̈, FD_q, FD_v, M⁻¹; and M
    let w = &mut ws.inverse.workspace;
    aba_derivatives(model, w, q, v, tau, fext)?;
    crba(model, w, q)?;
    // inverse-dynamics second order at q̈
    let ddq = std::mem::take(&mut ws.inverse.workspace.ddq);
    rnea_second_order_unchecked(model, &mut ws.inverse, q, v, &ddq, fext);
    ws.inverse.workspace.ddq = ddq;
    if nv == 0 {
        return Ok(()); // the tensors are empty
    }

    let w = &ws.inverse.workspace;
    let d = &w.derivatives;
    let n3 = 3 * nv;
    for m in 0..nv {
        for c in 0..nv {
            ws.rows[m * n3 + c] = d.dddq_dq[(m, c)];
            ws.rows[m * n3 + nv + c] = w.mass_matrix_inv[(m, c)];
            ws.rows[m * n3 + 2 * nv + c] = d.dddq_dv[(m, c)];
            ws.ltdl[m * nv + c] = w.mass_matrix[(m, c)];
        }
    }
    dof_parents(model, &mut ws.dof_parent);
    joint_starts(model, &mut ws.joint_start);
    let routes = routes.unwrap_or_else(|| Routes::for_tree(model, &ws.dof_parent, &mut ws.counts));
    ltdl_factor(&mut ws.ltdl, &ws.dof_parent, nv);

    // inner terms (module docs, "Routes")
    let (w, [hqq, hvv, hqv, dm]) = ws.inverse.workspace_and_tensors();
    let (hqq, hvv, hqv, dm) = (hqq.as_slice(), hvv.as_slice(), hqv.as_slice(), dm.as_slice());
    let (oqq, ovv, oqv, otq) = (ws.d2ddq_dq2.as_mut_slice(), ws.d2ddq_dv2.as_mut_slice(), ws.d2ddq_dqdv.as_mut_slice(), ws.d2ddq_dtaudq.as_mut_slice());
    if routes.inner_by_products {
        inner_terms_by_products(model, w, q, &ws.rows, (hqq, hqv), &ws.joint_start, (oqq, oqv, otq), &mut ws.column);
    } else {
        let scratch = (&mut ws.inner[..], &mut ws.dm_terms);
        inner_terms_by_rows(nv, &ws.rows, (hqq, hqv, dm), &ws.joint_start, (oqq, oqv, otq), scratch);
    }
    // outer term: T ← −M⁻¹ T by the LᵀDL factorisation or the articulated-body recursion;
    // ∂²q̈/∂q² and ∂²q̈/∂q̇² only on the columns (j, k ≥ j) and the same-joint blocks, then
    // mirrored
    ws.by_row.clear();
    ws.by_col.clear();
    for i in 0..nv {
        let mut j = ws.dof_parent[i];
        while j != usize::MAX {
            ws.by_row.push(i, j, ws.ltdl[i * nv + j]);
            ws.by_col.push(j, i, ws.ltdl[i * nv + j]);
            j = ws.dof_parent[j];
        }
    }
    let js = &ws.joint_start;
    let w: &Workspace = w;
    let articulated = routes.outer_articulated.then(|| ArticulatedFactors { model, columns: &w.derivatives.columns, u: &w.u, d_inv: &w.d_inv });
    let mut f = Outer { ltdl: Factor { ltdl: &ws.ltdl, by_row: &ws.by_row, by_col: &ws.by_col, nv }, articulated, scratch: &mut ws.articulated };
    let panel = &mut ws.panel;
    f.solve_columns(None, oqq, |j| js[j], panel);
    mirror(oqq, nv, |j| js[j]);
    f.solve_columns(Some(hvv), ovv, |j| j, panel);
    mirror(ovv, nv, |j| j);
    f.solve_columns(None, oqv, |_| 0, panel);
    f.solve_columns(None, otq, |_| 0, panel);
    Ok(())
}

/// The inner terms (module docs) from the sparse rows of `∂M/∂q`, one acceleration row `l` of
/// every tensor at a time: row `x` of `[Xᵀ | Zᵀ | Y] = Σ_m dM[l, m, x] R[m, ·]` with
/// `R = [FD_q | M⁻¹ | FD_v]` (`rows`, row-major `(nv, 3nv)`), one pass over a length-`3nv` row
/// per eight non-zeros. `scratch`: `(nv, 3nv)` rows and the non-zero lists.
fn inner_terms_by_rows(
    nv: usize,
    rows: &[f64],
    (hqq, hqv, dm): (&[f64], &[f64], &[f64]),
    js: &[usize],
    (oqq, oqv, otq): (&mut [f64], &mut [f64], &mut [f64]),
    (inner, terms): (&mut [f64], &mut Terms),
) {
    let (nv2, n3) = (nv * nv, 3 * nv);
    for l in 0..nv {
        let block = l * nv2..(l + 1) * nv2;
        // inner[x, ·] = Σ_m dM[l, m, x] [FD_q | M⁻¹ | FD_v][m, ·] = [Xᵀ | Zᵀ | Y][x, ·]
        terms.clear();
        for m in 0..nv {
            for (x, &e) in dm[(l * nv + m) * nv..(l * nv + m + 1) * nv].iter().enumerate() {
                if e != 0.0 {
                    terms.push(x, m, -e);
                }
            }
        }
        for (x, y) in inner.chunks_exact_mut(n3).enumerate() {
            sub_rows(y, &Rows { src: rows, len: n3, stride: n3, base: 0 }, terms.get(x), Start::Set);
        }
        let (tqq, tqv, ttq) = (&mut oqq[block.clone()], &mut oqv[block.clone()], &mut otq[block.clone()]);
        let (hqq_l, hqv_l) = (&hqq[block.clone()], &hqv[block]);
        // by rows b of the pages: T_qv[b, ·] = Hqv[b, ·] + Y[b, ·], T_τq[b, c] = Zᵀ[c, b] and
        // T_qq[b, c] = Hqq[b, c] + Xᵀ[b, c] + Xᵀ[c, b] on the columns c ≥ js[b] the solve visits
        // (see `solve_columns`)
        let rows = tqq.chunks_exact_mut(nv).zip(tqv.chunks_exact_mut(nv)).zip(ttq.chunks_exact_mut(nv));
        for (b, (((q, v), t), x)) in rows.zip(inner.chunks_exact(n3)).enumerate() {
            for ((t, h), y) in v.iter_mut().zip(&hqv_l[b * nv..(b + 1) * nv]).zip(&x[2 * nv..]) {
                *t = h + y;
            }
            for (t, xc) in t.iter_mut().zip(inner.chunks_exact(n3)) {
                *t = xc[nv + b];
            }
            let from = js[b];
            let cols = q[from..].iter_mut().zip(&hqq_l[b * nv + from..(b + 1) * nv]).zip(&x[from..nv]);
            for (((t, h), y), xc) in cols.zip(inner.chunks_exact(n3).skip(from)) {
                *t = h + y + xc[b];
            }
        }
    }
}

/// The inner terms (module docs) from one `∂(M y)/∂q` product per column `y` of
/// `R = [FD_q | M⁻¹ | FD_v]` (IDFOZA, Singh et al. eq. 52; module `mass_derivative`):
/// `P_c[l, x] = Σ_m dM[l, m, x] R[m, c]`, so that `T_qq[l, b, c] = Hqq[l, b, c] + P_c[l, b] +
/// P_b[l, c]` (on the columns `c ≥ js[b]` the solve visits), `T_qv[l, b, c] = Hqv[l, b, c] +
/// P_{2nv+c}[l, b]` and `T_τq[l, b, c] = P_{nv+b}[l, c]`. `3nv` products of O(N·d) and O(nv²)
/// each: O(nv²·N·d) in all, where the sparse rows cost O(nv·nnz(∂M/∂q)), O(nv⁴) on a chain.
/// `rows`: `R` row-major `(nv, 3nv)`; `column`: `(nv,)` scratch.
#[allow(clippy::too_many_arguments)]
fn inner_terms_by_products(
    model: &Model,
    w: &mut Workspace,
    q: &[f64],
    rows: &[f64],
    (hqq, hqv): (&[f64], &[f64]),
    js: &[usize],
    (oqq, oqv, otq): (&mut [f64], &mut [f64], &mut [f64]),
    column: &mut [f64],
) {
    let nv = model.nv;
    let (nv2, n3) = (nv * nv, 3 * nv);
    oqv.copy_from_slice(hqv);
    for (t, h) in oqq.chunks_exact_mut(nv2).zip(hqq.chunks_exact(nv2)) {
        for b in 0..nv {
            t[b * nv + js[b]..(b + 1) * nv].copy_from_slice(&h[b * nv + js[b]..(b + 1) * nv]);
        }
    }
    world_composites(model, w, q);
    for c in 0..n3 {
        for (y, row) in column.iter_mut().zip(rows.chunks_exact(n3)) {
            *y = row[c];
        }
        mass_derivative_product_unchecked(model, w, column);
        let p = w.derivatives.dtau_dq.as_slice(); // P[l, x] at l + x·nv
        for l in 0..nv {
            let page = l * nv2;
            if c < nv {
                let k = c;
                for x in 0..nv {
                    let v = p[l + x * nv];
                    if k >= js[x] {
                        oqq[page + x * nv + k] += v;
                    }
                    if x >= js[k] {
                        oqq[page + k * nv + x] += v;
                    }
                }
            } else if c < 2 * nv {
                let b = c - nv;
                for x in 0..nv {
                    otq[page + b * nv + x] = p[l + x * nv];
                }
            } else {
                let k = c - 2 * nv;
                for b in 0..nv {
                    oqv[page + b * nv + k] += p[l + b * nv];
                }
            }
        }
    }
}

/// Doubles in the panel of [`Factor::solve_columns`] (128 KiB: the panel stays in a core's
/// L2 cache through the `2·Σ depth + nv` row operations of the solve).
const PANEL_DOUBLES: usize = 16 * 1024;

/// Columns of the panel for `nv` dofs: at least one tensor row block `T[i, j, ·]`, at most all.
fn panel_width(nv: usize) -> usize {
    (PANEL_DOUBLES / nv.max(1)).min(nv * nv).max(nv)
}

/// The sparse factorisation `M = LᵀDL` of [`ltdl_factor`], with `L` listed by rows and by
/// columns.
struct Factor<'a> {
    ltdl: &'a [f64],
    by_row: &'a Terms,
    by_col: &'a Terms,
    nv: usize,
}

/// The outer term's solver: the sparse `LᵀDL` factorisation, or the articulated-body
/// recursion where it costs less (module docs).
struct Outer<'a> {
    ltdl: Factor<'a>,
    articulated: Option<ArticulatedFactors<'a>>,
    scratch: &'a mut ArticulatedScratch,
}

impl Outer<'_> {
    /// Solves `M X = s·B` in place for the `nv` rows `B[i] = t[i·stride ..][..len]`.
    fn solve_rows(&mut self, len: usize, stride: usize, s: f64, t: &mut [f64]) {
        match &self.articulated {
            Some(a) => a.solve_rows(len, stride, s, t, self.scratch),
            None => self.ltdl.solve_rows(len, stride, s, t),
        }
    }

    /// `t[:, j, k] = −M⁻¹ s[:, j, k]` for every `j` and `k ≥ first(j)` (`s` = `src`, or `t`
    /// itself when `None`), `t` an `(nv, nv, nv)` tensor in C order, in blocks of at most
    /// [`panel_width`] columns that stay in cache through the solve: in place when every
    /// column is solved from `t` itself (the rows of a block at stride `nv²`), else runs
    /// `[i, j, first(j)..nv]` of consecutive `j` copied into a contiguous `(nv, w)` block of
    /// `panel`, solved, copied back. Leaves `t[:, j, k < first(j)]` untouched.
    fn solve_columns(&mut self, src: Option<&[f64]>, t: &mut [f64], first: impl Fn(usize) -> usize, panel: &mut [f64]) {
        let nv = self.ltdl.nv;
        let (nv2, cap) = (nv * nv, panel_width(nv));
        if src.is_none() && (0..nv).all(|j| first(j) == 0) {
            // every column: blocks of the tensor's own rows, no copies
            for c0 in (0..nv2).step_by(cap) {
                self.solve_rows(cap.min(nv2 - c0), nv2, -1.0, &mut t[c0..]);
            }
            return;
        }
        let mut j0 = 0;
        while j0 < nv {
            let (mut j1, mut width) = (j0, 0);
            while j1 < nv && width + nv - first(j1) <= cap {
                width += nv - first(j1);
                j1 += 1;
            }
            let from: &[f64] = src.unwrap_or(t);
            for i in 0..nv {
                let mut at = i * width;
                for j in j0..j1 {
                    let run = i * nv2 + j * nv + first(j)..i * nv2 + (j + 1) * nv;
                    panel[at..at + run.len()].copy_from_slice(&from[run.clone()]);
                    at += run.len();
                }
            }
            self.solve_rows(width, width, -1.0, &mut panel[..nv * width]);
            for i in 0..nv {
                let mut at = i * width;
                for j in j0..j1 {
                    let run = i * nv2 + j * nv + first(j)..i * nv2 + (j + 1) * nv;
                    let len = run.len();
                    t[run].copy_from_slice(&panel[at..at + len]);
                    at += len;
                }
            }
            j0 = j1;
        }
    }
}

impl Factor<'_> {
    /// Solves `M X = s·B` in place for the `nv` rows `B[i] = t[i·stride ..][..len]` (all
    /// `len` right-hand sides at once): `Lᵀ Y = B` leaves to root, each row pulling from its
    /// descendants' rows, `Y_i = B_i − Σ_{k desc. of i} L_ki Y_k`; then root to leaves
    /// `X_i = s·D_i⁻¹ Y_i − Σ_{j anc. of i} L_ij X_j`. Each row is written once per sweep with
    /// all its terms ([`sub_rows`]).
    fn solve_rows(&self, len: usize, stride: usize, s: f64, t: &mut [f64]) {
        let nv = self.nv;
        for i in (0..nv).rev() {
            let (lo, hi) = t.split_at_mut(((i + 1) * stride).min(t.len()));
            let rows = Rows { src: hi, len, stride, base: i + 1 };
            sub_rows(&mut lo[i * stride..], &rows, self.by_col.get(i), Start::Keep);
        }
        for i in 0..nv {
            let (lo, hi) = t.split_at_mut(i * stride);
            let rows = Rows { src: lo, len, stride, base: 0 };
            sub_rows(hi, &rows, self.by_row.get(i), Start::Scale(s / self.ltdl[i * nv + i]));
        }
    }
}

/// `nv` lists of `(index, coefficient)` pairs, at most `nv` per list, in fixed storage.
#[derive(Clone, Debug)]
struct Terms {
    len: Vec<usize>,
    entries: Vec<(usize, f64)>,
}

impl Terms {
    fn new(nv: usize) -> Self {
        Self { len: vec![0; nv], entries: vec![(0, 0.0); nv * nv] }
    }

    fn clear(&mut self) {
        self.len.fill(0);
    }

    /// Appends `(index, c)` to list `list`.
    fn push(&mut self, list: usize, index: usize, c: f64) {
        let n = self.len.len();
        self.entries[list * n + self.len[list]] = (index, c);
        self.len[list] += 1;
    }

    fn get(&self, list: usize) -> &[(usize, f64)] {
        let n = self.len.len();
        &self.entries[list * n..list * n + self.len[list]]
    }
}

/// What [`sub_rows`] does with the old `y`.
#[derive(Clone, Copy)]
enum Start {
    /// `y ← y − Σ`.
    Keep,
    /// `y ← −Σ` (the old `y` is not read).
    Set,
    /// `y ← f·y − Σ`.
    Scale(f64),
}

/// Rows `r ≥ base` of a matrix, `x_r = src[(r − base)·stride ..][..len]`.
struct Rows<'a> {
    src: &'a [f64],
    len: usize,
    stride: usize,
    base: usize,
}

/// `y ← y − Σ_t c_t x_{r_t}` (or as `start` says) over the terms `(r_t, c_t)` and the rows
/// `x`; up to eight rows per pass over `y`, so `y` is loaded and stored once per eight terms.
fn sub_rows(y: &mut [f64], x: &Rows<'_>, terms: &[(usize, f64)], start: Start) {
    let y = &mut y[..x.len];
    let row = |r: usize| &x.src[(r - x.base) * x.stride..][..x.len];
    let (mut start, mut rest) = (start, terms);
    while rest.len() >= 8 {
        let (t, tail) = rest.split_at(8);
        sub_n(y, std::array::from_fn::<_, 8, _>(|k| row(t[k].0)), std::array::from_fn(|k| t[k].1), start);
        (start, rest) = (Start::Keep, tail);
    }
    if rest.len() >= 4 {
        let (t, tail) = rest.split_at(4);
        sub_n(y, std::array::from_fn::<_, 4, _>(|k| row(t[k].0)), std::array::from_fn(|k| t[k].1), start);
        (start, rest) = (Start::Keep, tail);
    }
    match *rest {
        [(r0, c0), (r1, c1), (r2, c2)] => sub_n(y, [row(r0), row(r1), row(r2)], [c0, c1, c2], start),
        [(r0, c0), (r1, c1)] => sub_n(y, [row(r0), row(r1)], [c0, c1], start),
        [(r0, c0)] => sub_n(y, [row(r0)], [c0], start),
        _ => match start {
            Start::Keep => {}
            Start::Set => y.fill(0.0),
            Start::Scale(f) => y.iter_mut().for_each(|y| *y *= f),
        },
    }
}

/// `y ← y − Σ_{t<N} c_t x_t` (or as `start` says), one pass over `y`.
#[inline(always)]
fn sub_n<const N: usize>(y: &mut [f64], x: [&[f64]; N], c: [f64; N], start: Start) {
    let n = y.len();
    let x = x.map(|x| &x[..n]);
    let sum = |k: usize| (1..N).fold(c[0] * x[0][k], |s, t| s + c[t] * x[t][k]);
    match start {
        Start::Keep => (0..n).for_each(|k| y[k] -= sum(k)),
        Start::Set => (0..n).for_each(|k| y[k] = -sum(k)),
        Start::Scale(f) => (0..n).for_each(|k| y[k] = f * y[k] - sum(k)),
    }
}

/// `t[i, j, k] = t[i, k, j]` for `k < first(j)` (the columns [`Factor::solve_columns`] skipped).
fn mirror(t: &mut [f64], nv: usize, first: impl Fn(usize) -> usize) {
    for page in t.chunks_exact_mut(nv * nv) {
        for j in 1..nv {
            let (done, rest) = page.split_at_mut(j * nv);
            for (y, row) in rest[..first(j)].iter_mut().zip(done.chunks_exact(nv)) {
                *y = row[j];
            }
        }
    }
}

/// Parent dof of every dof: the previous dof of the same joint, else the last dof of the
/// parent body (`usize::MAX` for the first dof of a root body).
fn dof_parents(model: &Model, out: &mut [usize]) {
    for b in 0..model.nbodies() {
        let iv = model.idx_v[b];
        for c in 0..model.joints[b].nv() {
            out[iv + c] = if c > 0 {
                iv + c - 1
            } else {
                match model.parents[b] {
                    Some(p) => model.idx_v[p] + model.joints[p].nv() - 1,
                    None => usize::MAX,
                }
            };
        }
    }
}

/// First dof of the joint of every dof.
fn joint_starts(model: &Model, out: &mut [usize]) {
    for b in 0..model.nbodies() {
        let iv = model.idx_v[b];
        out[iv..iv + model.joints[b].nv()].fill(iv);
    }
}

/// In-place `LᵀDL` factorisation of the symmetric row-major `h` (nv × nv) with the tree's
/// sparsity (Featherstone 2008, Table 6.3): afterwards `h[k, k] = D_k` and, for each ancestor
/// dof `i` of `k`, `h[k, i] = L_ki` (`L` unit lower triangular), `M = LᵀDL`. O(Σ depth²).
fn ltdl_factor(h: &mut [f64], parent: &[usize], nv: usize) {
    for k in (0..nv).rev() {
        let mut i = parent[k];
        while i != usize::MAX {
            let a = h[k * nv + i] / h[k * nv + k];
            let mut j = i;
            while j != usize::MAX {
                h[i * nv + j] -= a * h[k * nv + j];
                j = parent[j];
            }
            h[k * nv + i] = a;
            i = parent[i];
        }
    }
}

/// The `λ`-contracted second-order partials of forward dynamics `q̈ = aba(q, v, τ)`,
/// $$\sum_i \lambda_i \frac{\partial^2\ddot q_i}{\partial q^2},\
///   \sum_i \lambda_i \frac{\partial^2\ddot q_i}{\partial\dot q^2},\
///   \sum_i \lambda_i \frac{\partial^2\ddot q_i}{\partial q\,\partial\dot q},\
///   \sum_i \lambda_i \frac{\partial^2\ddot q_i}{\partial\tau\,\partial q}$$
/// (`[j, k]` as in [`AbaSecondOrder`]), computed without any tensor from `μ = M⁻¹λ`, the
/// contracted inverse-dynamics forms at `q̈` and `P = μᵀ∂M/∂q` (module documentation).
/// `q`: (nq,), `v`, `tau`, `lambda`: (nv,); four `(nv, nv)` matrices in `ws.second_order`.
/// Cost: [`crate::aba_derivatives`] + two O(N·d) recursions + O(nv²·d). No allocation.
/// Leaves the first-order results of [`crate::aba_derivatives`] in the workspace
/// (`ddq`, `derivatives.dddq_dq`, `derivatives.dddq_dv`, `mass_matrix_inv`); overwrites
/// `derivatives.dtau_*` with scratch.
/// Checked against the contraction of [`aba_second_order`]'s tensors in
/// `tests::aba_second_order_contracted_matches_contraction`.
/// `fext`: the optional wrenches of [`crate::aba`].
pub fn aba_second_order_contracted<'w>(
    model: &Model,
    ws: &'w mut Workspace,
    q: &[f64],
    v: &[f64],
    tau: &[f64],
    lambda: &[f64],
    fext: Option<&[Force]>,
) -> Result<AbaSecondOrderContracted<'w>> {
    check_tangent(model, lambda, "lam")?;
    aba_derivatives(model, ws, q, v, tau, fext)?;
    aba_second_order_contracted_impl(model, ws, q, v, lambda, fext)?;
    Ok(contracted_result(ws))
}

fn contracted_result(ws: &Workspace) -> AbaSecondOrderContracted<'_> {
    let so = &ws.second_order;
    AbaSecondOrderContracted { d2ddq_dq2: &so.d2ddq_dq2, d2ddq_dv2: &so.d2ddq_dv2, d2ddq_dqdv: &so.d2ddq_dqdv, d2ddq_dtaudq: &so.d2ddq_dtaudq }
}

/// Once [`crate::aba_derivatives`] has run (inputs checked).
fn aba_second_order_contracted_impl(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], lambda: &[f64], fext: Option<&[Force]>) -> Result<()> {
    let nv = model.nv;
    // μ = M⁻¹λ
    let mut mu = std::mem::take(&mut ws.second_order.mu);
    for (r, m) in mu.iter_mut().enumerate() {
        *m = (0..nv).map(|c| ws.mass_matrix_inv[(r, c)] * lambda[c]).sum();
    }
    // μᵀ∂²ID at q̈ (with the wrenches), then P = ∂(Mμ)/∂q into derivatives.dtau_dq
    let ddq = std::mem::take(&mut ws.ddq);
    rnea_second_order_contracted_unchecked(model, ws, q, v, &ddq, &mu, fext);
    ws.ddq = ddq;
    mass_derivative_product_world(model, ws, q, &mu);
    ws.second_order.mu = mu;

    let d = &ws.derivatives;
    let so = &mut ws.second_order;
    let p = &d.dtau_dq;
    let [tr, prod] = &mut so.scratch;
    // λᵀ∂²q̈/∂q² = −(μᵀHqq + FD_qᵀP + PᵀFD_q)
    d.dddq_dq.transpose_to(tr);
    mul_by_tree_sparse(model, tr, p, 1.0, prod);
    for c in 0..nv {
        for b in 0..nv {
            so.d2ddq_dq2[(b, c)] = -(so.d2tau_dq2[(b, c)] + prod[(b, c)] + prod[(c, b)]);
        }
    }
    // λᵀ∂²q̈/∂q∂q̇ = −(μᵀHqv + PᵀFD_v)
    d.dddq_dv.transpose_to(tr);
    mul_by_tree_sparse(model, tr, p, 1.0, prod);
    for c in 0..nv {
        for b in 0..nv {
            so.d2ddq_dqdv[(b, c)] = -(so.d2tau_dqdv[(b, c)] + prod[(c, b)]);
        }
    }
    // λᵀ∂²q̈/∂q̇² = −μᵀHvv, λᵀ∂²q̈/∂τ∂q = −M⁻¹P
    for c in 0..nv {
        for b in 0..nv {
            so.d2ddq_dv2[(b, c)] = -so.d2tau_dv2[(b, c)];
        }
    }
    mul_by_tree_sparse(model, &ws.mass_matrix_inv, p, -1.0, &mut so.d2ddq_dtaudq);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{binary_tree, pendulum_chain, random_tree};
    use crate::configuration::random_configuration;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The four routes give the same tensors to round-off, on trees with every joint kind
    /// (several roots, free-flyer, spherical and planar joints) and on chains (one of 60
    /// links, at the scale where the routes change); with wrenches.
    #[test]
    fn every_route_gives_the_same_tensors() {
        let models = [random_tree(7, 3, &[]), random_tree(9, 8, &[]), pendulum_chain(12, false), binary_tree(3), pendulum_chain(60, false)];
        let mut rng = ChaCha8Rng::seed_from_u64(41);
        for model in &models {
            let nv = model.nv;
            let q = random_configuration(model, &mut rng);
            let [v, tau]: [Vec<f64>; 2] = std::array::from_fn(|_| (0..nv).map(|_| rng.random_range(-1.0..1.0)).collect());
            let fext: Vec<Force> = (0..model.nbodies()).map(|_| Force::from_vector(&nalgebra::Vector6::from_fn(|_, _| rng.random_range(-1.0..1.0)))).collect();
            let mut ws = model.aba_second_order_workspace();
            let routes = |inner_by_products, outer_articulated| Some(Routes { inner_by_products, outer_articulated });
            aba_second_order_impl(model, &mut ws, &q, &v, &tau, Some(&fext), routes(false, false)).unwrap();
            let reference: Vec<Tensor3> = [ws.d2ddq_dq2(), ws.d2ddq_dv2(), ws.d2ddq_dqdv(), ws.d2ddq_dtaudq()].map(Tensor3::clone).into();
            for (inner, outer) in [(true, false), (false, true), (true, true)] {
                aba_second_order_impl(model, &mut ws, &q, &v, &tau, Some(&fext), routes(inner, outer)).unwrap();
                for (got, want) in [ws.d2ddq_dq2(), ws.d2ddq_dv2(), ws.d2ddq_dqdv(), ws.d2ddq_dtaudq()].iter().zip(&reference) {
                    let scale = want.as_slice().iter().fold(1.0_f64, |m, x| m.max(x.abs()));
                    let err = got.as_slice().iter().zip(want.as_slice()).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
                    assert!(err < 1e-11 * scale, "{}: routes ({inner}, {outer}) differ by {err:e} (scale {scale:e})", model.name);
                }
            }
        }
    }

    /// The operation counts choose the O(n³) routes on long chains only.
    #[test]
    fn long_chains_take_the_cubic_routes() {
        let routes = |model: &Model| {
            let mut parents = vec![0; model.nv];
            dof_parents(model, &mut parents);
            Routes::for_tree(model, &parents, &mut vec![0.0; 2 * model.nv])
        };
        let both = |a, b| Routes { inner_by_products: a, outer_articulated: b };
        assert_eq!(routes(&pendulum_chain(20, false)), both(false, false));
        assert_eq!(routes(&pendulum_chain(50, false)), both(true, false));
        assert_eq!(routes(&pendulum_chain(100, false)), both(true, true));
        assert_eq!(routes(&binary_tree(6)), both(false, false));
    }
}
