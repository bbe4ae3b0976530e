//! The manifold the optimisers' states live on: a vector space, or a VI state `x = (q, p)`
//! whose configuration `q` lies on the model's joint groups (free-flyer, spherical, planar
//! joints with quaternions: `nx = nq + nv` entries, `ndx = 2·nv` tangent directions).
//!
//! As in crocoddyl's state manifolds (and Pinocchio's `difference`/`integrate`), the
//! optimisers never subtract states: deviations are `x₁ ⊖ x₀ = (q₁ ⊖ q₀, p₁ − p₀)`
//! (`q₁ ⊖ q₀` the joint velocity that takes `q₀` to `q₁` in unit time, body frame), and the
//! Jacobians `A`, `B`, the gains and the cost derivatives are in these tangent coordinates.

use crate::error::{OptimError, Result};
use nalgebra::DMatrix;
use std::sync::Arc;
use vidyn_rbd::Model;

/// A state manifold (module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct StateSpace {
    /// The model whose joints carry `q` (the first `nq` entries), `None` for a vector space.
    configuration: Option<Arc<Model>>,
    nx: usize,
    ndx: usize,
}

impl StateSpace {
    /// `ℝⁿ`: `⊖` and `⊕` are subtraction and addition.
    #[must_use]
    pub fn euclidean(n: usize) -> Self {
        Self { configuration: None, nx: n, ndx: n }
    }

    /// `x = (q, p)` with `q` (`nq`) on `model`'s joint groups and `p` (`nv`) a vector; a
    /// vector space when every joint is revolute or prismatic.
    #[must_use]
    pub fn of_model(model: &Arc<Model>) -> Self {
        if model.nq == model.nv {
            return Self::euclidean(2 * model.nv);
        }
        Self { configuration: Some(Arc::clone(model)), nx: model.nq + model.nv, ndx: 2 * model.nv }
    }

    /// Number of entries of a state.
    #[must_use]
    pub fn nx(&self) -> usize {
        self.nx
    }

    /// Number of tangent directions (`A` is `ndx × ndx`).
    #[must_use]
    pub fn ndx(&self) -> usize {
        self.ndx
    }

    /// Whether states are vectors (`nx = ndx`, `⊖` is subtraction).
    #[must_use]
    pub fn is_euclidean(&self) -> bool {
        self.configuration.is_none()
    }

    /// `dx = x₁ ⊖ x₀` (`ndx`). No allocation.
    pub fn difference(&self, x0: &[f64], x1: &[f64], dx: &mut [f64]) {
        let Some(model) = self.configuration.as_deref() else {
            for ((d, a), b) in dx.iter_mut().zip(x0).zip(x1) {
                *d = b - a;
            }
            return;
        };
        let (nq, nv) = (model.nq, model.nv);
        for (i, j) in model.joints.iter().enumerate() {
            let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
            j.difference(&x0[iq..iq + j.nq()], &x1[iq..iq + j.nq()], &mut dx[iv..iv + j.nv()]);
        }
        for k in 0..nv {
            dx[nv + k] = x1[nq + k] - x0[nq + k];
        }
    }

    /// `out = x ⊕ dx` (`nx`). No allocation.
    pub fn integrate(&self, x: &[f64], dx: &[f64], out: &mut [f64]) {
        let Some(model) = self.configuration.as_deref() else {
            for ((o, a), d) in out.iter_mut().zip(x).zip(dx) {
                *o = a + d;
            }
            return;
        };
        let (nq, nv) = (model.nq, model.nv);
        for (i, j) in model.joints.iter().enumerate() {
            let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
            j.integrate(&x[iq..iq + j.nq()], &dx[iv..iv + j.nv()], &mut out[iq..iq + j.nq()]);
        }
        for k in 0..nv {
            out[nq + k] = x[nq + k] + dx[nv + k];
        }
    }

    /// `∂(x₁ ⊖ x₀)/∂δ` for `x₁ ↦ x₁ ⊕ δ` at `δ = 0` (`ndx × ndx`, written into `jac`): block
    /// diagonal, [`vidyn_rbd::Joint::difference_jacobian`] on the configuration's joints and the
    /// identity elsewhere. No allocation.
    pub fn difference_jacobian(&self, x0: &[f64], x1: &[f64], jac: &mut DMatrix<f64>) {
        jac.fill_with_identity();
        let Some(model) = self.configuration.as_deref() else { return };
        for (i, j) in model.joints.iter().enumerate() {
            if j.nv() == 1 {
                continue;
            }
            let (iq, iv) = (model.idx_q[i], model.idx_v[i]);
            let block = j.difference_jacobian(&x0[iq..iq + j.nq()], &x1[iq..iq + j.nq()]);
            for r in 0..j.nv() {
                for c in 0..j.nv() {
                    jac[(iv + r, iv + c)] = block[(r, c)];
                }
            }
        }
    }

    /// The tangent ranges `iv..iv + nv` of the joints on groups (more than one velocity: a
    /// free-flyer's 6, a ball's 3, a planar joint's 3), the only diagonal blocks where
    /// [`Self::difference_jacobian`] differs from the identity. None on a vector space.
    pub fn group_blocks(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        self.configuration.iter().flat_map(|model| model.joints.iter().zip(&model.idx_v).filter(|(j, _)| j.nv() > 1).map(|(j, &iv)| iv..iv + j.nv()))
    }

    /// Errors unless `x` is a state of this space: `nx` finite entries, unit quaternions (to
    /// 1e-6) and planar joints' `(cos φ, sin φ)` on the unit circle.
    pub fn check(&self, x: &[f64], name: &str) -> Result<()> {
        if x.len() != self.nx {
            return Err(OptimError::InvalidInput(format!("{name} has {} entries, expected nx = {}", x.len(), self.nx)));
        }
        if let Some(model) = self.configuration.as_deref() {
            vidyn_rbd::check_configuration(model, &x[..model.nq]).map_err(|e| OptimError::InvalidInput(format!("{name}: {e}")))?;
        }
        crate::checks::check_finite(x, name)
    }
}
