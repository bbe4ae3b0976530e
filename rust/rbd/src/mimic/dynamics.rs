//! The dynamics of a model with mimic joints in its reduced coordinates: each function lifts
//! its inputs with the [`Coupling`], runs this crate's algorithm on the extended tree and
//! reduces the result (formulas in the [module documentation](super)). Forward dynamics and
//! `M⁻¹` solve with a Cholesky factorisation of the reduced `M` (dense, O(n³)): the coupled
//! tree has no articulated-body recursion. No allocation once the [`MimicWorkspace`] exists
//! (the full second-order tensors live in a [`MimicSecondOrder`]).

use super::Coupling;
use crate::algorithms::rnea_second_order::SecondOrderWorkspace;
use crate::check::check_vector;
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::{Force, Tensor3};

/// Scratch and results of the reduced algorithms of a model with mimic joints. Sizes: `n`
/// reduced and `n_e` extended velocity coordinates.
#[derive(Clone, Debug)]
pub struct MimicWorkspace {
    /// The model's coupling.
    pub coupling: Coupling,
    /// `(nq_e,)`, `(n_e,)`, `(n_e,)`, `(n_e,)`: the lifted inputs of the last call.
    pub q: Vec<f64>,
    pub v: Vec<f64>,
    pub a: Vec<f64>,
    pub lambda: Vec<f64>,
    /// `(n,)` generalised forces ([`rnea`]) and accelerations ([`aba`]).
    pub tau: Vec<f64>,
    pub ddq: Vec<f64>,
    /// `(n, n)` `M` ([`crba`]), its Cholesky factor `L` (lower triangle), `M⁻¹` ([`minverse`]).
    pub mass: DMatrix<f64>,
    chol: DMatrix<f64>,
    pub mass_inv: DMatrix<f64>,
    /// `(n, n)` first derivatives ([`rnea_derivatives`], [`aba_derivatives`]).
    pub dtau_dq: DMatrix<f64>,
    pub dtau_dv: DMatrix<f64>,
    pub dddq_dq: DMatrix<f64>,
    pub dddq_dv: DMatrix<f64>,
    /// `(n, n)` λ-contracted second derivatives ([`rnea_second_order_contracted`]).
    pub contracted: [DMatrix<f64>; 3],
}

impl MimicWorkspace {
    /// Scratch for `model`'s reduced algorithms.
    #[must_use]
    pub fn new(model: &Model) -> Self {
        let coupling = Coupling::new(model);
        let (n, ne) = (coupling.nv(), model.nv);
        let square = || DMatrix::zeros(n, n);
        Self {
            q: vec![0.0; model.nq],
            v: vec![0.0; ne],
            a: vec![0.0; ne],
            lambda: vec![0.0; ne],
            tau: vec![0.0; n],
            ddq: vec![0.0; n],
            mass: square(),
            chol: square(),
            mass_inv: square(),
            dtau_dq: square(),
            dtau_dv: square(),
            dddq_dq: square(),
            dddq_dv: square(),
            contracted: [square(), square(), square()],
            coupling,
        }
    }

    /// Checks the reduced inputs and lifts them into `self.q`, `self.v`, `self.a`.
    fn lift(&mut self, q: &[f64], v: Option<&[f64]>, a: Option<&[f64]>) -> Result<()> {
        let c = &self.coupling;
        check_vector(q, "q", c.nq(), "model.nq")?;
        c.lift_configuration(q, &mut self.q);
        for (x, arg, out) in [(v, "v", &mut self.v), (a, "a", &mut self.a)] {
            match x {
                Some(x) => {
                    check_vector(x, arg, c.nv(), "model.nv")?;
                    c.lift_tangent(x, out);
                }
                None => out.fill(0.0),
            }
        }
        Ok(())
    }

    /// `M` at the lifted `self.q`, reduced, and its Cholesky factor.
    fn factor_mass(&mut self, model: &Model, ws: &mut Workspace) -> Result<()> {
        let m = crate::crba(model, ws, &self.q)?;
        self.coupling.reduce_matrix(m, &mut self.mass);
        cholesky(&self.mass, &mut self.chol).map_err(|c| RbdError::NotPositiveDefinite { joint: joint_of(model, &self.coupling, c) })
    }

    /// `M⁻¹` from the factor of [`Self::factor_mass`].
    fn invert_mass(&mut self) {
        let n = self.mass.nrows();
        self.mass_inv.fill_with_identity();
        for c in 0..n {
            cholesky_solve(&self.chol, self.mass_inv.column_mut(c).as_mut_slice());
        }
    }
}

/// The name of the joint of reduced coordinate `c`.
fn joint_of(model: &Model, coupling: &Coupling, c: usize) -> String {
    let e = coupling.free_velocities()[c];
    let body = (0..model.nbodies()).rev().find(|&b| model.idx_v[b] <= e).unwrap_or(0);
    model.joint_names.get(body).cloned().unwrap_or_default()
}

/// `L Lᵀ = a` in the lower triangle of `l` (`a` symmetric); `Err(k)` when pivot `k` is not
/// positive. O(n³/3), no allocation.
fn cholesky(a: &DMatrix<f64>, l: &mut DMatrix<f64>) -> std::result::Result<(), usize> {
    let n = a.nrows();
    l.copy_from(a);
    let scale = (0..n).fold(0.0_f64, |m, k| m.max(a[(k, k)].abs()));
    for k in 0..n {
        let mut d = l[(k, k)];
        for j in 0..k {
            d -= l[(k, j)] * l[(k, j)];
        }
        // NaN fails too
        if d.is_nan() || d <= 1e-14 * scale {
            return Err(k);
        }
        let d = d.sqrt();
        l[(k, k)] = d;
        for i in k + 1..n {
            let mut x = l[(i, k)];
            for j in 0..k {
                x -= l[(i, j)] * l[(k, j)];
            }
            l[(i, k)] = x / d;
        }
    }
    Ok(())
}

/// `b ← (L Lᵀ)⁻¹ b` with the factor of [`cholesky`].
fn cholesky_solve(l: &DMatrix<f64>, b: &mut [f64]) {
    let n = l.nrows();
    for i in 0..n {
        let mut x = b[i];
        for j in 0..i {
            x -= l[(i, j)] * b[j];
        }
        b[i] = x / l[(i, i)];
    }
    for i in (0..n).rev() {
        let mut x = b[i];
        for j in i + 1..n {
            x -= l[(j, i)] * b[j];
        }
        b[i] = x / l[(i, i)];
    }
}

/// `out = −M⁻¹ d` with the Cholesky factor of `M`, column by column.
fn solve_negated(l: &DMatrix<f64>, d: &DMatrix<f64>, out: &mut DMatrix<f64>) {
    out.copy_from(d);
    out.neg_mut();
    for c in 0..out.ncols() {
        cholesky_solve(l, out.column_mut(c).as_mut_slice());
    }
}

/// Inverse dynamics `τ = Gᵀ τ_e(Gq + o, Gv, Ga)` (`fext`: one wrench per body, as
/// [`crate::rnea`]). `q`: `(nq,)`, `v`, `a`: `(n,)` reduced; returns `τ` `(n,)`.
pub fn rnea<'w>(model: &Model, ws: &mut Workspace, mw: &'w mut MimicWorkspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) -> Result<&'w [f64]> {
    mw.lift(q, Some(v), Some(a))?;
    let tau = crate::rnea(model, ws, &mw.q, &mw.v, &mw.a, fext)?;
    mw.coupling.reduce_force(tau, &mut mw.tau);
    Ok(&mw.tau)
}

/// The mass matrix `M = Gᵀ M_e(Gq + o) G` `(n, n)`.
pub fn crba<'w>(model: &Model, ws: &mut Workspace, mw: &'w mut MimicWorkspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    mw.lift(q, None, None)?;
    let m = crate::crba(model, ws, &mw.q)?;
    mw.coupling.reduce_matrix(m, &mut mw.mass);
    Ok(&mw.mass)
}

/// Forward dynamics `\dot v = M⁻¹(τ − Gᵀ b_e)` with `b_e = τ_e(q_e, v_e, 0)` (gravity,
/// velocity products and the wrenches `fext`, as [`crate::aba`]); Cholesky of the reduced `M`.
/// Errors with [`RbdError::NotPositiveDefinite`] when `M` is singular.
pub fn aba<'w>(model: &Model, ws: &mut Workspace, mw: &'w mut MimicWorkspace, q: &[f64], v: &[f64], tau: &[f64], fext: Option<&[Force]>) -> Result<&'w [f64]> {
    check_vector(tau, "tau", mw.coupling.nv(), "model.nv")?;
    mw.lift(q, Some(v), None)?;
    mw.factor_mass(model, ws)?;
    let bias = crate::rnea(model, ws, &mw.q, &mw.v, &mw.a, fext)?;
    mw.coupling.reduce_force(bias, &mut mw.ddq);
    for (x, t) in mw.ddq.iter_mut().zip(tau) {
        *x = t - *x;
    }
    cholesky_solve(&mw.chol, &mut mw.ddq);
    Ok(&mw.ddq)
}

/// `M⁻¹` `(n, n)` of the reduced mass matrix.
pub fn minverse<'w>(model: &Model, ws: &mut Workspace, mw: &'w mut MimicWorkspace, q: &[f64]) -> Result<&'w DMatrix<f64>> {
    mw.lift(q, None, None)?;
    mw.factor_mass(model, ws)?;
    mw.invert_mass();
    Ok(&mw.mass_inv)
}

/// First derivatives, borrowed from the [`MimicWorkspace`]: of inverse dynamics
/// ([`rnea_derivatives`]: `∂τ/∂q`, `∂τ/∂v`, `M`) or of forward dynamics ([`aba_derivatives`]:
/// `∂\dot v/∂q`, `∂\dot v/∂v`, `M⁻¹`).
#[derive(Debug)]
pub struct MimicDerivatives<'w> {
    pub d_dq: &'w DMatrix<f64>,
    pub d_dv: &'w DMatrix<f64>,
    pub d_dx: &'w DMatrix<f64>,
}

/// `∂τ/∂q = Gᵀ (∂τ_e/∂q_e) G`, `∂τ/∂v = Gᵀ (∂τ_e/∂v_e) G` and `∂τ/∂a = M` at the lifted state.
pub fn rnea_derivatives<'w>(
    model: &Model,
    ws: &mut Workspace,
    mw: &'w mut MimicWorkspace,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    fext: Option<&[Force]>,
) -> Result<MimicDerivatives<'w>> {
    mw.lift(q, Some(v), Some(a))?;
    reduce_rnea_derivatives(model, ws, mw, fext)?;
    Ok(MimicDerivatives { d_dq: &mw.dtau_dq, d_dv: &mw.dtau_dv, d_dx: &mw.mass })
}

/// The reduced inverse-dynamics derivatives at the lifted `mw.{q, v, a}`.
fn reduce_rnea_derivatives(model: &Model, ws: &mut Workspace, mw: &mut MimicWorkspace, fext: Option<&[Force]>) -> Result<()> {
    let d = crate::rnea_derivatives(model, ws, &mw.q, &mw.v, &mw.a, fext)?;
    let c = &mw.coupling;
    c.reduce_matrix(d.dtau_dq, &mut mw.dtau_dq);
    c.reduce_matrix(d.dtau_dv, &mut mw.dtau_dv);
    c.reduce_matrix(d.dtau_da, &mut mw.mass);
    Ok(())
}

/// `\dot v = aba(q, v, τ)` (in `mw.ddq`) and its derivatives `∂\dot v/∂(q, v) = −M⁻¹ ∂τ/∂(q, v)`
/// at `\dot v`, `∂\dot v/∂τ = M⁻¹` (implicit function theorem on `τ = rnea(q, v, \dot v)`).
pub fn aba_derivatives<'w>(
    model: &Model,
    ws: &mut Workspace,
    mw: &'w mut MimicWorkspace,
    q: &[f64],
    v: &[f64],
    tau: &[f64],
    fext: Option<&[Force]>,
) -> Result<MimicDerivatives<'w>> {
    aba(model, ws, mw, q, v, tau, fext)?;
    aba_derivatives_after_aba(model, ws, mw, fext)?;
    Ok(MimicDerivatives { d_dq: &mw.dddq_dq, d_dv: &mw.dddq_dv, d_dx: &mw.mass_inv })
}

/// The derivatives once `mw` holds `\dot v` and the factor of `M` (after [`aba`]).
fn aba_derivatives_after_aba(model: &Model, ws: &mut Workspace, mw: &mut MimicWorkspace, fext: Option<&[Force]>) -> Result<()> {
    mw.coupling.lift_tangent(&mw.ddq, &mut mw.a);
    reduce_rnea_derivatives(model, ws, mw, fext)?;
    mw.invert_mass();
    solve_negated(&mw.chol, &mw.dtau_dq, &mut mw.dddq_dq);
    solve_negated(&mw.chol, &mw.dtau_dv, &mut mw.dddq_dv);
    Ok(())
}

/// `Σ_i λ_i T[i, j, k]` of the three inverse-dynamics tensors of [`rnea_second_order`]
/// (`∂²τ/∂q²`, `∂²τ/∂v²`, `∂²τ/∂q∂v`) without the tensors: the extended contraction with
/// `λ_e = G λ`, then `Gᵀ (·) G`. In `mw.contracted`.
// the tree's workspace, the mimic one and the tree function's inputs
#[allow(clippy::too_many_arguments)]
pub fn rnea_second_order_contracted<'w>(
    model: &Model,
    ws: &mut Workspace,
    mw: &'w mut MimicWorkspace,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    lambda: &[f64],
    fext: Option<&[Force]>,
) -> Result<&'w [DMatrix<f64>; 3]> {
    check_vector(lambda, "lam", mw.coupling.nv(), "model.nv")?;
    mw.lift(q, Some(v), Some(a))?;
    mw.coupling.lift_tangent(lambda, &mut mw.lambda);
    let c = crate::rnea_second_order_contracted(model, ws, &mw.q, &mw.v, &mw.a, &mw.lambda, fext)?;
    let [dq2, dv2, dqdv] = &mut mw.contracted;
    mw.coupling.reduce_matrix(c.d2tau_dq2, dq2);
    mw.coupling.reduce_matrix(c.d2tau_dv2, dv2);
    mw.coupling.reduce_matrix(c.d2tau_dqdv, dqdv);
    Ok(&mw.contracted)
}

/// The full second-order tensors of a model with mimic joints: the extended
/// [`SecondOrderWorkspace`] and four reduced `(n, n, n)` tensors, the inverse-dynamics ones
/// ([`rnea_second_order`]: `∂²τ/∂q²`, `∂²τ/∂v²`, `∂²τ/∂q∂v`, `∂M/∂q`) or the forward-dynamics
/// ones ([`aba_second_order`]: `∂²\dot v/∂q²`, `∂²\dot v/∂v²`, `∂²\dot v/∂q∂v`, `∂²\dot v/∂τ∂q`),
/// in the layout of [`crate::rnea_second_order`].
#[derive(Clone, Debug)]
pub struct MimicSecondOrder {
    extended: SecondOrderWorkspace,
    pub tensors: [Tensor3; 4],
    /// `(n, n, n)` scratch: the inverse-dynamics tensors under the forward-dynamics ones.
    inverse: [Tensor3; 4],
    /// `(n,)` scratch.
    column: Vec<f64>,
}

impl MimicSecondOrder {
    /// The tensors' storage for `model` (O(n_e³)).
    #[must_use]
    pub fn new(model: &Model) -> Self {
        let n = Coupling::new(model).nv();
        let zeros = || Tensor3::zeros([n; 3]);
        Self {
            extended: SecondOrderWorkspace::new(model),
            tensors: [zeros(), zeros(), zeros(), zeros()],
            inverse: [zeros(), zeros(), zeros(), zeros()],
            column: vec![0.0; n],
        }
    }
}

/// The four reduced inverse-dynamics tensors into `out` at the lifted `mw.{q, v, a}`.
fn reduce_rnea_tensors(model: &Model, so: &mut SecondOrderWorkspace, mw: &MimicWorkspace, fext: Option<&[Force]>, out: &mut [Tensor3; 4]) -> Result<()> {
    let t = crate::rnea_second_order(model, so, &mw.q, &mw.v, &mw.a, fext)?;
    for (e, r) in [t.d2tau_dq2, t.d2tau_dv2, t.d2tau_dqdv, t.dm_dq].into_iter().zip(out.iter_mut()) {
        mw.coupling.reduce_tensor(e, r);
    }
    Ok(())
}

/// The reduced second-order tensors of inverse dynamics, `T[a, b, c] = Σ G_ia G_jb G_kc T_e[i, j, k]`.
pub fn rnea_second_order<'w>(
    model: &Model,
    mw: &mut MimicWorkspace,
    so: &'w mut MimicSecondOrder,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    fext: Option<&[Force]>,
) -> Result<&'w [Tensor3; 4]> {
    mw.lift(q, Some(v), Some(a))?;
    reduce_rnea_tensors(model, &mut so.extended, mw, fext, &mut so.tensors)?;
    Ok(&so.tensors)
}

/// The reduced second-order tensors of forward dynamics by the implicit-function formulas of
/// [`crate::aba_second_order`] (Singh et al. 2023, eqs. 44–49) on the reduced quantities —
/// they hold for any inverse dynamics, the reduced one included — with dense products
/// (O(n⁴)): with `H` the inverse-dynamics tensors at `\dot v = aba(q, v, τ)`,
/// `FD_q = ∂\dot v/∂q`, `FD_v = ∂\dot v/∂v`,
/// `∂²\dot v/∂q²[:, b, c] = −M⁻¹(Hqq[:, b, c] + Σ_l dM[:, l, c] FD_q[l, b] + Σ_l dM[:, l, b] FD_q[l, c])`,
/// `∂²\dot v/∂v² = −M⁻¹ Hvv`, `∂²\dot v/∂q∂v[:, b, c] = −M⁻¹(Hqv[:, b, c] + Σ_l dM[:, l, b] FD_v[l, c])`,
/// `∂²\dot v/∂τ∂q[:, j, k] = −(M⁻¹ ∂M/∂q_k M⁻¹)[:, j]`.
// the tree's workspace, the mimic one and the tree function's inputs
#[allow(clippy::too_many_arguments)]
pub fn aba_second_order<'w>(
    model: &Model,
    ws: &mut Workspace,
    mw: &mut MimicWorkspace,
    so: &'w mut MimicSecondOrder,
    q: &[f64],
    v: &[f64],
    tau: &[f64],
    fext: Option<&[Force]>,
) -> Result<&'w [Tensor3; 4]> {
    aba(model, ws, mw, q, v, tau, fext)?;
    aba_derivatives_after_aba(model, ws, mw, fext)?;
    reduce_rnea_tensors(model, &mut so.extended, mw, fext, &mut so.inverse)?;
    let n = mw.coupling.nv();
    let [hqq, hvv, hqv, dm] = &so.inverse;
    let [fqq, fvv, fqv, ftq] = &mut so.tensors;
    let (fd_q, fd_v, minv) = (&mw.dddq_dq, &mw.dddq_dv, &mw.mass_inv);
    // the brackets, then −M⁻¹ on the first index (columns of M⁻¹ are its rows: symmetric)
    for b in 0..n {
        for c in 0..n {
            for i in 0..n {
                let (mut xqq, mut xqv) = (hqq[[i, b, c]], hqv[[i, b, c]]);
                for l in 0..n {
                    xqq += dm[[i, l, c]] * fd_q[(l, b)] + dm[[i, l, b]] * fd_q[(l, c)];
                    xqv += dm[[i, l, b]] * fd_v[(l, c)];
                }
                fqq[[i, b, c]] = xqq;
                fqv[[i, b, c]] = xqv;
                fvv[[i, b, c]] = hvv[[i, b, c]];
                // (∂M/∂q_c M⁻¹)[i, b]
                ftq[[i, b, c]] = (0..n).map(|l| dm[[i, l, c]] * minv[(l, b)]).sum::<f64>();
            }
        }
    }
    let column = &mut so.column;
    for t in [fqq, fvv, fqv, ftq] {
        for b in 0..n {
            for c in 0..n {
                for (i, x) in column.iter_mut().enumerate() {
                    *x = t[[i, b, c]];
                }
                for i in 0..n {
                    t[[i, b, c]] = -(0..n).map(|l| minv[(i, l)] * column[l]).sum::<f64>();
                }
            }
        }
    }
    Ok(&so.tensors)
}
