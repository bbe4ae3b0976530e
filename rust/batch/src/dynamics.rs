//! Batched rigid-body dynamics: the `vidyn_rbd` algorithms over a leading batch axis.
//!
//! Every function takes the batch size `batch`, row-major inputs (`q`: `(batch, nq)`, the
//! tangent inputs `(batch, nv)`) and caller-provided row-major outputs, which it fills row by
//! row through disjoint `par_chunks_mut` on the engine's pool ([`vidyn_system::engine`]). Row `i`
//! is computed by exactly the single call `vidyn_rbd::f(model, ws, q_i, …)` and copied out
//! (matrices in C order: entry `[i, j]` of an `(nv, nv)` block at `i·nv + j`), so results are
//! bit-for-bit those of a loop of single calls, for any thread count.
//!
//! A row whose inputs are invalid (NaN/inf, non-unit quaternion) or whose model is singular
//! there fails alone: it is listed in the returned [`Failures`] with its `RbdError`, and its
//! outputs are set to NaN. Inconsistent buffer lengths fail the whole call
//! ([`BatchError::Shape`]). `control` counts finished rows.

use rayon::prelude::*;
use vidyn_rbd::{self as rbd, Model, RbdError, SecondOrderWorkspace, Workspace};
use vidyn_system::engine::run_rows;
use vidyn_system::{check_len, matrix_to_rows, BatchError, Control, Failures};

type Result<T> = std::result::Result<T, BatchError<RbdError>>;

/// `(row i of x)` for a row-major `(rows, stride)` buffer.
#[inline]
pub(crate) fn row(x: &[f64], i: usize, stride: usize) -> &[f64] {
    &x[i * stride..(i + 1) * stride]
}

pub(crate) struct Shapes<'a> {
    pub(crate) batch: usize,
    pub(crate) nq: usize,
    pub(crate) nv: usize,
    q: &'a [f64],
}

impl<'a> Shapes<'a> {
    pub(crate) fn new(model: &Model, batch: usize, q: &'a [f64]) -> Result<Self> {
        check_len("q", q.len(), batch, model.nq, "(batch, model.nq)")?;
        Ok(Self { batch, nq: model.nq, nv: model.nv, q })
    }
    pub(crate) fn tangent(&self, x: &[f64], name: &str) -> Result<()> {
        check_len(name, x.len(), self.batch, self.nv, "(batch, model.nv)")
    }
    pub(crate) fn out(&self, x: &[f64], name: &str, per_row: usize, shape: &str) -> Result<()> {
        check_len(name, x.len(), self.batch, per_row, shape)
    }
    pub(crate) fn q(&self, i: usize) -> &[f64] {
        row(self.q, i, self.nq)
    }
}

pub(crate) fn workspace(model: &Model) -> impl Fn() -> Workspace + Sync + '_ {
    move || model.workspace()
}

/// Batched [`vidyn_rbd::rnea`]: `tau` `(batch, nv)` from `q` `(batch, nq)`, `v`, `a` `(batch, nv)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn rnea(model: &Model, control: &Control, batch: usize, q: &[f64], v: &[f64], a: &[f64], tau: &mut [f64]) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.tangent(a, "a")?;
    s.out(tau, "tau", s.nv, "(batch, model.nv)")?;
    if s.nv == 0 {
        return Ok(Vec::new());
    }
    let nv = s.nv;
    Ok(run_rows(control, tau.par_chunks_mut(nv), &workspace(model), 1, |ws, i, out| {
        out.copy_from_slice(rbd::rnea(model, ws, s.q(i), row(v, i, nv), row(a, i, nv), None)?);
        Ok(())
    }))
}

/// Batched [`vidyn_rbd::aba`]: `ddq` `(batch, nv)` from `q` `(batch, nq)`, `v`, `tau` `(batch, nv)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn aba(model: &Model, control: &Control, batch: usize, q: &[f64], v: &[f64], tau: &[f64], ddq: &mut [f64]) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.tangent(tau, "tau")?;
    s.out(ddq, "ddq", s.nv, "(batch, model.nv)")?;
    if s.nv == 0 {
        return Ok(Vec::new());
    }
    let nv = s.nv;
    Ok(run_rows(control, ddq.par_chunks_mut(nv), &workspace(model), 1, |ws, i, out| {
        out.copy_from_slice(rbd::aba(model, ws, s.q(i), row(v, i, nv), row(tau, i, nv), None)?);
        Ok(())
    }))
}

/// Batched [`vidyn_rbd::crba`]: `mass` `(batch, nv, nv)` (full, symmetric) from `q` `(batch, nq)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn crba(model: &Model, control: &Control, batch: usize, q: &[f64], mass: &mut [f64]) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.out(mass, "mass", s.nv * s.nv, "(batch, model.nv, model.nv)")?;
    if s.nv == 0 {
        return Ok(Vec::new());
    }
    Ok(run_rows(control, mass.par_chunks_mut(s.nv * s.nv), &workspace(model), 1, |ws, i, out| {
        matrix_to_rows(rbd::crba(model, ws, s.q(i))?, out);
        Ok(())
    }))
}

/// Batched [`vidyn_rbd::minverse`]: `minv` `(batch, nv, nv)` from `q` `(batch, nq)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn minverse(model: &Model, control: &Control, batch: usize, q: &[f64], minv: &mut [f64]) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.out(minv, "minv", s.nv * s.nv, "(batch, model.nv, model.nv)")?;
    if s.nv == 0 {
        return Ok(Vec::new());
    }
    Ok(run_rows(control, minv.par_chunks_mut(s.nv * s.nv), &workspace(model), 1, |ws, i, out| {
        matrix_to_rows(rbd::minverse(model, ws, s.q(i))?, out);
        Ok(())
    }))
}

/// Three `(batch, nv, nv)` output buffers, C order.
pub struct Matrices3<'a> {
    pub first: &'a mut [f64],
    pub second: &'a mut [f64],
    pub third: &'a mut [f64],
}

/// Batched [`vidyn_rbd::rnea_derivatives`]: `(dtau_dq, dtau_dv, dtau_da = M)`, each
/// `(batch, nv, nv)`, from `q` `(batch, nq)`, `v`, `a` `(batch, nv)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn rnea_derivatives(model: &Model, control: &Control, batch: usize, q: &[f64], v: &[f64], a: &[f64], out: Matrices3<'_>) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.tangent(a, "a")?;
    let (nv, m) = (s.nv, s.nv * s.nv);
    for (x, name) in [(&*out.first, "dtau_dq"), (&*out.second, "dtau_dv"), (&*out.third, "dtau_da")] {
        s.out(x, name, m, "(batch, model.nv, model.nv)")?;
    }
    if nv == 0 {
        return Ok(Vec::new());
    }
    let items = (out.first.par_chunks_mut(m), out.second.par_chunks_mut(m), out.third.par_chunks_mut(m)).into_par_iter();
    Ok(run_rows(control, items, &workspace(model), 1, |ws, i, (dq, dv, da)| {
        let d = rbd::rnea_derivatives(model, ws, s.q(i), row(v, i, nv), row(a, i, nv), None)?;
        matrix_to_rows(d.dtau_dq, dq);
        matrix_to_rows(d.dtau_dv, dv);
        matrix_to_rows(d.dtau_da, da);
        Ok(())
    }))
}

/// Batched [`vidyn_rbd::aba_derivatives`]: `(dddq_dq, dddq_dv, dddq_dtau = M⁻¹)`, each
/// `(batch, nv, nv)`, from `q` `(batch, nq)`, `v`, `tau` `(batch, nv)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn aba_derivatives(model: &Model, control: &Control, batch: usize, q: &[f64], v: &[f64], tau: &[f64], out: Matrices3<'_>) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.tangent(tau, "tau")?;
    let (nv, m) = (s.nv, s.nv * s.nv);
    for (x, name) in [(&*out.first, "dddq_dq"), (&*out.second, "dddq_dv"), (&*out.third, "dddq_dtau")] {
        s.out(x, name, m, "(batch, model.nv, model.nv)")?;
    }
    if nv == 0 {
        return Ok(Vec::new());
    }
    let items = (out.first.par_chunks_mut(m), out.second.par_chunks_mut(m), out.third.par_chunks_mut(m)).into_par_iter();
    Ok(run_rows(control, items, &workspace(model), 1, |ws, i, (dq, dv, dtau)| {
        let d = rbd::aba_derivatives(model, ws, s.q(i), row(v, i, nv), row(tau, i, nv), None)?;
        matrix_to_rows(d.dddq_dq, dq);
        matrix_to_rows(d.dddq_dv, dv);
        matrix_to_rows(d.dddq_dtau, dtau);
        Ok(())
    }))
}

/// Batched [`vidyn_rbd::rnea_second_order_contracted`]: `Σ_i λ_i ∂²τ_i` as
/// `(d2tau_dq2, d2tau_dv2, d2tau_dqdv)`, each `(batch, nv, nv)`, from `q` `(batch, nq)` and
/// `[v, a, lam]`, each `(batch, nv)`.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn rnea_second_order_contracted(
    model: &Model,
    control: &Control,
    batch: usize,
    q: &[f64],
    [v, a, lam]: [&[f64]; 3],
    out: Matrices3<'_>,
) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.tangent(a, "a")?;
    s.tangent(lam, "lam")?;
    let (nv, m) = (s.nv, s.nv * s.nv);
    for (x, name) in [(&*out.first, "d2tau_dq2"), (&*out.second, "d2tau_dv2"), (&*out.third, "d2tau_dqdv")] {
        s.out(x, name, m, "(batch, model.nv, model.nv)")?;
    }
    if nv == 0 {
        return Ok(Vec::new());
    }
    let items = (out.first.par_chunks_mut(m), out.second.par_chunks_mut(m), out.third.par_chunks_mut(m)).into_par_iter();
    Ok(run_rows(control, items, &workspace(model), 1, |ws, i, (qq, vv, qv)| {
        let d = rbd::rnea_second_order_contracted(model, ws, s.q(i), row(v, i, nv), row(a, i, nv), row(lam, i, nv), None)?;
        matrix_to_rows(d.d2tau_dq2, qq);
        matrix_to_rows(d.d2tau_dv2, vv);
        matrix_to_rows(d.d2tau_dqdv, qv);
        Ok(())
    }))
}

/// Four `(batch, nv, nv, nv)` output buffers, C order.
pub struct Tensors4<'a> {
    pub d2tau_dq2: &'a mut [f64],
    pub d2tau_dv2: &'a mut [f64],
    pub d2tau_dqdv: &'a mut [f64],
    pub dm_dq: &'a mut [f64],
}

/// Batched [`vidyn_rbd::rnea_second_order`]: the four `(batch, nv, nv, nv)` tensors (layout
/// of [`vidyn_rbd::Tensor3`], C order) from `q` `(batch, nq)`, `v`, `a` `(batch, nv)`. One
/// `SecondOrderWorkspace` (three nv³ tensors) per thread.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-row errors are in the returned list.
pub fn rnea_second_order(model: &Model, control: &Control, batch: usize, q: &[f64], v: &[f64], a: &[f64], out: Tensors4<'_>) -> Result<Failures<RbdError>> {
    let s = Shapes::new(model, batch, q)?;
    s.tangent(v, "v")?;
    s.tangent(a, "a")?;
    let (nv, t) = (s.nv, s.nv * s.nv * s.nv);
    for (x, name) in [(&*out.d2tau_dq2, "d2tau_dq2"), (&*out.d2tau_dv2, "d2tau_dv2"), (&*out.d2tau_dqdv, "d2tau_dqdv"), (&*out.dm_dq, "dm_dq")] {
        s.out(x, name, t, "(batch, model.nv, model.nv, model.nv)")?;
    }
    if nv == 0 {
        return Ok(Vec::new());
    }
    let items =
        (out.d2tau_dq2.par_chunks_mut(t), out.d2tau_dv2.par_chunks_mut(t), out.d2tau_dqdv.par_chunks_mut(t), out.dm_dq.par_chunks_mut(t)).into_par_iter();
    let init = || SecondOrderWorkspace::new(model);
    Ok(run_rows(control, items, &init, 1, |ws, i, (qq, vv, qv, dm)| {
        let d = rbd::rnea_second_order(model, ws, s.q(i), row(v, i, nv), row(a, i, nv), None)?;
        qq.copy_from_slice(d.d2tau_dq2.as_slice());
        vv.copy_from_slice(d.d2tau_dv2.as_slice());
        qv.copy_from_slice(d.d2tau_dqdv.as_slice());
        dm.copy_from_slice(d.dm_dq.as_slice());
        Ok(())
    }))
}
