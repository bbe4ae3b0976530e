//! Hinge penalties `½ w min(0, g)²` on scalar functions `g(x, u)` of a stage (the friction
//! cones of [`crate::ContactForceCost`]), recorded beside the stage's derivatives so that a
//! solver can decide which of them act on the step it is about to take, not only at the
//! current trajectory.
//!
//! A penalty is *active* when its Gauss–Newton terms are in the stage's derivatives: `w g ∇g`
//! in the gradient and `w ∇g ∇gᵀ` in the Hessian, the expansion of `½ w (g + ∇g·δ)²` about
//! `δ = 0` (`δ = (δx, δu)`, tangent state deviation then control). A cost adds each penalty
//! with [`StageDerivatives::add_hinge`], active where it is violated (`g < 0`), which is the
//! Gauss–Newton model of the penalty at the current point. Solvers may then switch penalties
//! on and off ([`StageDerivatives::set_hinge`]) by the sign of their linearisation
//! `g + ∇g·δ` at the step the model takes (module `ilqr::active_set`): the model of
//! `½ w min(0, g + ∇g·δ)²` instead of the quadratic of the current point's active set.

use crate::cost::StageDerivatives;
use crate::dense_kernels::dot;
use nalgebra::{DMatrix, DVectorView};

/// The hinge penalties of one stage: weight `w`, value `g`, gradient `∇g` (`ndx + nu`
/// entries: the tangent state's, then the controls') and whether its Gauss–Newton terms are
/// in the stage's derivatives.
#[derive(Clone, Debug, Default)]
pub struct Hinges {
    weight: Vec<f64>,
    value: Vec<f64>,
    active: Vec<bool>,
    /// `∇g` of every penalty, one after the other
    gradient: Vec<f64>,
}

impl Hinges {
    #[must_use]
    pub fn len(&self) -> usize {
        self.weight.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.weight.is_empty()
    }

    /// Forgets every penalty, keeping the storage.
    pub(crate) fn clear(&mut self) {
        self.weight.clear();
        self.value.clear();
        self.active.clear();
        self.gradient.clear();
    }

    /// Penalty `i`'s weight `w`.
    #[must_use]
    pub fn weight(&self, i: usize) -> f64 {
        self.weight[i]
    }

    /// Penalty `i`'s value `g` at the stage's `(x, u)`.
    #[must_use]
    pub fn value(&self, i: usize) -> f64 {
        self.value[i]
    }

    /// Whether penalty `i`'s Gauss–Newton terms are in the derivatives.
    #[must_use]
    pub fn is_active(&self, i: usize) -> bool {
        self.active[i]
    }

    /// `g + ∇g·(δx, δu)` of penalty `i`: its value to first order at the deviation `(δx, δu)`.
    #[must_use]
    pub fn linearised(&self, i: usize, dx: &[f64], du: &[f64]) -> f64 {
        let grad = self.gradient_of(i);
        let (gx, gu) = grad.split_at(dx.len());
        self.value[i] + dot(gx, dx) + dot(gu, du)
    }

    fn gradient_of(&self, i: usize) -> &[f64] {
        let width = self.gradient.len() / self.len();
        &self.gradient[i * width..(i + 1) * width]
    }
}

impl StageDerivatives {
    /// Adds the penalty `½ w min(0, g)²` of a scalar `g` whose gradient `∇g` (`ndx + nu`
    /// entries, zeroed before) `gradient` writes: its value to `l`, its Gauss–Newton terms
    /// when `g < 0` (module docs), and records it in [`StageDerivatives::hinges`]. A curvature
    /// of `g` itself (`w g ∇²g`) is the caller's to add.
    pub fn add_hinge(&mut self, weight: f64, g: f64, gradient: impl FnOnce(&mut [f64])) {
        let width = self.lx.len() + self.lu.len();
        let h = &mut self.hinges;
        let start = h.gradient.len();
        h.gradient.resize(start + width, 0.0);
        gradient(&mut h.gradient[start..]);
        h.weight.push(weight);
        h.value.push(g);
        h.active.push(false);
        self.l += 0.5 * weight * g.min(0.0).powi(2);
        self.set_hinge(self.hinges.len() - 1, g < 0.0);
    }

    /// Adds (`active`) or removes penalty `i`'s Gauss–Newton terms, if it is not already so;
    /// `l` stays the stage's cost.
    pub fn set_hinge(&mut self, i: usize, active: bool) {
        if self.hinges.active[i] == active {
            return;
        }
        self.hinges.active[i] = active;
        let ndx = self.lx.len();
        let (w, g) = (self.hinges.weight[i], self.hinges.value[i]);
        let w = if active { w } else { -w };
        let (gx, gu) = self.hinges.gradient_of(i).split_at(ndx);
        let (gx, gu) = (DVectorView::from_slice(gx, ndx), DVectorView::from_slice(gu, gu.len()));
        self.lx.axpy(w * g, &gx, 1.0);
        self.lu.axpy(w * g, &gu, 1.0);
        add_outer(&mut self.lxx, w, &gx);
        add_outer(&mut self.luu, w, &gu);
        self.lux.ger(w, &gu, &gx, 1.0);
    }
}

/// `m += w v vᵀ`, each entry `w (v_i v_j)` so that `m` stays symmetric to the bit.
fn add_outer(m: &mut DMatrix<f64>, w: f64, v: &DVectorView<'_, f64>) {
    let rows = m.nrows();
    for (j, column) in m.as_mut_slice().chunks_exact_mut(rows).enumerate() {
        for (entry, vi) in column.iter_mut().zip(v.iter()) {
            *entry += w * (vi * v[j]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DVector;

    /// The stage's quadratic model with a penalty active is its model without plus the
    /// expansion of `½ w (g + ∇g·δ)²` (to round-off, at random deviations); switching it off
    /// gives back the derivatives without it, and `l` holds the penalty's value throughout.
    #[test]
    fn active_penalty_is_the_expansion_of_its_linearisation() {
        let (ndx, nu) = (5, 3);
        let base = {
            let mut d = StageDerivatives::zeros(ndx, nu);
            d.l = 1.5;
            d.lx = DVector::from_fn(ndx, |i, _| (i as f64 * 0.7).sin());
            d.lu = DVector::from_fn(nu, |i, _| (i as f64 * 1.3).cos());
            d.lxx = DMatrix::from_fn(ndx, ndx, |i, j| if i == j { 2.0 } else { 0.1 / (1 + i + j) as f64 });
            d.luu = DMatrix::identity(nu, nu);
            d.lux = DMatrix::from_fn(nu, ndx, |i, j| 0.01 * (i + 2 * j) as f64);
            d
        };
        let grad: Vec<f64> = (0..ndx + nu).map(|i| (i as f64 * 0.37 + 0.2).sin()).collect();
        let (w, g) = (0.3, -0.8);
        let model = |d: &StageDerivatives, dx: &DVector<f64>, du: &DVector<f64>| {
            d.lx.dot(dx) + d.lu.dot(du) + 0.5 * dx.dot(&(&d.lxx * dx)) + 0.5 * du.dot(&(&d.luu * du)) + du.dot(&(&d.lux * dx))
        };
        let mut d = base.clone();
        d.add_hinge(w, g, |out| out.copy_from_slice(&grad));
        assert!(d.hinges.is_active(0));
        assert!((d.l - (1.5 + 0.5 * w * g * g)).abs() < 1e-15);
        for s in 0..5 {
            let dx = DVector::from_fn(ndx, |i, _| ((i + 7 * s) as f64 * 0.91).cos());
            let du = DVector::from_fn(nu, |i, _| ((i + 3 * s) as f64 * 0.53).sin());
            let lin = d.hinges.linearised(0, dx.as_slice(), du.as_slice());
            let direct =
                g + grad[..ndx].iter().zip(dx.iter()).map(|(a, b)| a * b).sum::<f64>() + grad[ndx..].iter().zip(du.iter()).map(|(a, b)| a * b).sum::<f64>();
            assert!((lin - direct).abs() < 1e-14);
            let expected = model(&base, &dx, &du) + 0.5 * w * (direct * direct - g * g);
            assert!((model(&d, &dx, &du) - expected).abs() < 1e-13, "{} vs {expected}", model(&d, &dx, &du));
        }
        d.set_hinge(0, false);
        assert!(!d.hinges.is_active(0));
        for (a, b) in [(&d.lx, &base.lx), (&d.lu, &base.lu)] {
            assert!((a - b).amax() < 1e-15);
        }
        for (a, b) in [(&d.lxx, &base.lxx), (&d.luu, &base.luu), (&d.lux, &base.lux)] {
            assert!((a - b).amax() < 1e-15);
        }
        // a satisfied penalty is recorded, inactive, and adds nothing
        let mut e = base.clone();
        e.add_hinge(w, 0.4, |out| out.copy_from_slice(&grad));
        assert!(!e.hinges.is_active(0) && e.hinges.len() == 1);
        assert!(e.l == base.l && e.lx == base.lx && e.lxx == base.lxx);
        e.clear();
        assert!(e.hinges.is_empty());
    }
}
