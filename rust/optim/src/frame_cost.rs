//! A Cartesian reaching cost: the squared distance of a frame's origin from a target, added
//! to any other [`Cost`].

use crate::checks::check_finite;
use crate::cost::{Cost, StageDerivatives};
use crate::error::{OptimError, Result};
use nalgebra::Vector3;
use std::sync::{Arc, Mutex};
use vidyn_rbd::{frame_jacobian, placements, Model, ReferenceFrame, Workspace};

/// `ℓ_k(x, u) = inner.ℓ_k(x, u) + ½ w_run |p_f(q) − p*|²` and
/// `m(x) = inner.m(x) + ½ w_term |p_f(q) − p*|²`, where `p_f(q)` is the world position of
/// frame `f` and `q` the first `nq` entries of the state (VI states `x = (q, p)`; with
/// Lie-group joints the derivatives are in the tangent coordinates of [`crate::StateSpace`],
/// whose first `nv` entries are `q`'s).
///
/// Gradient (exact): `∂/∂q = w J_pᵀ (p_f − p*)`, with `J_p` the linear rows (3×nv) of the
/// frame Jacobian in `LocalWorldAligned` axes, i.e. `∂p_f/∂q`. Hessian: the Gauss–Newton
/// term `w J_pᵀ J_p` (the curvature of `p_f(q)` is dropped; it vanishes as the frame reaches
/// the target) — the same convention as crocoddyl's residual costs, so both solvers optimise
/// with the same model.
#[derive(Debug)]
pub struct FramePositionCost<C: Cost> {
    pub inner: C,
    model: Arc<Model>,
    frame: usize,
    pub target: Vector3<f64>,
    pub weight_running: f64,
    pub weight_terminal: f64,
    nx: usize,
    /// Scratch reused across calls (one per concurrent caller, boxed: see [`crate::VelocityCost`]).
    #[allow(clippy::vec_box)]
    pool: Mutex<Vec<Box<Workspace>>>,
}

impl<C: Cost> FramePositionCost<C> {
    /// `nx`: the number of entries of a state of `inner` (≥ `model.nq`); `frame`: a frame
    /// index of `model`; weights ≥ 0 and finite.
    pub fn new(model: Arc<Model>, inner: C, nx: usize, frame: usize, target: [f64; 3], weight_running: f64, weight_terminal: f64) -> Result<Self> {
        if nx < model.nq {
            return Err(OptimError::InvalidInput(format!("the frame cost reads q from the state: need nx ≥ nq = {}, got nx = {nx}", model.nq)));
        }
        if frame >= model.frames.len() {
            return Err(OptimError::InvalidInput(format!("frame index {frame} out of range 0..{}", model.frames.len())));
        }
        check_finite(&target, "target")?;
        if !(weight_running >= 0.0 && weight_terminal >= 0.0 && weight_running.is_finite() && weight_terminal.is_finite()) {
            return Err(OptimError::InvalidInput(format!("frame cost weights must be finite and ≥ 0; got {weight_running}, {weight_terminal}")));
        }
        Ok(Self { inner, model, frame, target: Vector3::from(target), weight_running, weight_terminal, nx, pool: Mutex::new(Vec::new()) })
    }

    fn with_workspace<T>(&self, f: impl FnOnce(&mut Workspace) -> T) -> T {
        let ws = self.pool.lock().ok().and_then(|mut p| p.pop());
        let mut ws = ws.unwrap_or_else(|| Box::new(self.model.workspace()));
        let out = f(&mut ws);
        if let Ok(mut p) = self.pool.lock() {
            p.push(ws);
        }
        out
    }

    /// World position of the frame at configuration `q` (nq entries): `⁰p_f = ⁰M_b · ᵇp_f` from
    /// the body placements alone (no Jacobian). O(n).
    pub fn position(&self, q: &[f64]) -> Result<Vector3<f64>> {
        let f = &self.model.frames[self.frame];
        self.with_workspace(|ws| {
            placements(&self.model, ws, q)?;
            Ok(match f.parent {
                Some(b) => ws.placements[b].act_point(&f.placement.translation),
                None => f.placement.translation,
            })
        })
    }

    fn value(&self, x: &[f64], w: f64) -> Result<f64> {
        if w == 0.0 {
            return Ok(0.0);
        }
        let e = self.position(&x[..self.model.nq])? - self.target;
        Ok(0.5 * w * e.norm_squared())
    }

    /// Adds `½ w |e|²`, `w J_pᵀ e` and `w J_pᵀ J_p` to `out`.
    fn add_derivatives(&self, x: &[f64], w: f64, out: &mut StageDerivatives) -> Result<()> {
        if w == 0.0 {
            return Ok(());
        }
        let (nq, nv) = (self.model.nq, self.model.nv);
        self.with_workspace(|ws| {
            frame_jacobian(&self.model, ws, &x[..nq], self.frame, ReferenceFrame::LocalWorldAligned)?;
            let (jac, e) = (&ws.jacobian, ws.frame_placements[self.frame].translation - self.target);
            out.l += 0.5 * w * e.norm_squared();
            for i in 0..nv {
                out.lx[i] += w * (0..3).map(|r| jac[(r, i)] * e[r]).sum::<f64>();
                for j in 0..nv {
                    out.lxx[(i, j)] += w * (0..3).map(|r| jac[(r, i)] * jac[(r, j)]).sum::<f64>();
                }
            }
            Ok(())
        })
    }

    fn check(&self, x: &[f64]) -> Result<()> {
        if x.len() != self.nx {
            return Err(OptimError::InvalidInput(format!("state has {} entries, expected nx = {}", x.len(), self.nx)));
        }
        Ok(())
    }
}

impl<C: Cost> Cost for FramePositionCost<C> {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        self.check(x)?;
        Ok(self.inner.running_value(k, x, u)? + self.value(x, self.weight_running)?)
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        self.check(x)?;
        Ok(self.inner.terminal_value(x)? + self.value(x, self.weight_terminal)?)
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.check(x)?;
        self.inner.running_derivatives(k, x, u, out)?;
        self.add_derivatives(x, self.weight_running, out)
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.check(x)?;
        self.inner.terminal_derivatives(x, out)?;
        self.add_derivatives(x, self.weight_terminal, out)
    }
    fn parallel(&self) -> bool {
        self.inner.parallel()
    }
}
