//! Tracking of points in space: frame origins and the centre of mass held near targets that
//! may change from stage to stage (a swing foot's path, a centre-of-mass reference, a reaching
//! target), added to any other [`Cost`].

use crate::checks::check_finite;
use crate::cost::{Cost, StageDerivatives};
use crate::error::{OptimError, Result};
use nalgebra::Vector3;
use std::sync::Arc;
use vidyn_batch::ScratchPool;
use vidyn_rbd::{center_of_mass, com_jacobian, frame_jacobian, placements, Model, ReferenceFrame, Workspace};

/// A point of the robot whose world position a [`PointTrack`] follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrackedPoint {
    /// The origin of a frame (an index of [`Model::frames`]).
    Frame(usize),
    /// The centre of mass of the whole model.
    CentreOfMass,
}

/// `½ w_k |p(q_k) − p*_k|²` at every stage `k = 0..=N` (`N` the terminal stage), `p` the world
/// position of [`Self::point`] (with [`Self::offset`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PointTrack {
    pub point: TrackedPoint,
    /// For a frame, the tracked point in the frame's axes (zero: its origin). Three points of a
    /// body that are not on one line track its placement (a swing foot's orientation as well
    /// as its position). Zero for the centre of mass.
    pub offset: Vector3<f64>,
    /// One target for every stage, or one per stage `0..=N`.
    pub targets: Vec<Vector3<f64>>,
    /// One weight per stage `0..=N` (entry `N`: the terminal's), finite and ≥ 0.
    pub weights: Vec<f64>,
}

impl PointTrack {
    /// A fixed target for frame `frame` with weight `running` on the stages `0..N` and
    /// `terminal` on the last (a reaching cost over `steps = N` steps).
    #[must_use]
    pub fn reach(frame: usize, target: [f64; 3], running: f64, terminal: f64, steps: usize) -> Self {
        let mut weights = vec![running; steps + 1];
        weights[steps] = terminal;
        Self { point: TrackedPoint::Frame(frame), offset: Vector3::zeros(), targets: vec![Vector3::from(target)], weights }
    }

    fn target(&self, k: usize) -> Vector3<f64> {
        self.targets[if self.targets.len() == 1 { 0 } else { k }]
    }
}

/// `ℓ_k(x, u) = inner.ℓ_k(x, u) + Σ_t ½ w_{t,k} |p_t(q) − p*_{t,k}|²` and the same with
/// `k = N` at the end, over the [`PointTrack`]s `t`; `q` is the first `nq` entries of the state
/// (VI states `x = (q, p)`; with Lie-group joints the derivatives are in the tangent
/// coordinates of [`crate::StateSpace`], whose first `nv` entries are `q`'s).
///
/// Gradient (exact): `∂/∂q = w J_pᵀ (p − p*)`, with `J_p = ∂p/∂q` (3 × nv): the linear rows
/// of the frame Jacobian in `LocalWorldAligned` axes, or the centre-of-mass Jacobian.
/// Hessian: the Gauss–Newton term `w J_pᵀ J_p` (the curvature of `p(q)` is dropped; it
/// vanishes as the point reaches its target), crocoddyl's convention for residual costs, so
/// both solvers optimise with the same model. Stages whose weight is zero cost nothing.
#[derive(Debug)]
pub struct PointCost<C: Cost> {
    pub inner: C,
    model: Arc<Model>,
    tracks: Vec<PointTrack>,
    /// `N`: every track has `N + 1` weights.
    steps: usize,
    nx: usize,
    /// Scratch reused across calls, one per concurrent caller.
    pool: ScratchPool<Workspace>,
}

impl<C: Cost> PointCost<C> {
    /// `nx`: the number of entries of a state of `inner` (≥ `model.nq`); every track with
    /// `steps + 1` finite weights ≥ 0 and one or `steps + 1` finite targets, frames of `model`,
    /// a finite offset (zero for the centre of mass).
    pub fn new(model: Arc<Model>, inner: C, nx: usize, tracks: Vec<PointTrack>, steps: usize) -> Result<Self> {
        if nx < model.nq {
            return Err(OptimError::InvalidInput(format!("a point cost reads q from the state: need nx ≥ nq = {}, got nx = {nx}", model.nq)));
        }
        for (i, t) in tracks.iter().enumerate() {
            if let TrackedPoint::Frame(f) = t.point {
                if f >= model.frames.len() {
                    return Err(OptimError::InvalidInput(format!("track {i}: frame index {f} out of range 0..{}", model.frames.len())));
                }
            }
            if t.weights.len() != steps + 1 || t.weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
                return Err(OptimError::InvalidInput(format!("track {i}: expected N + 1 = {} finite weights ≥ 0, got {:?}", steps + 1, t.weights)));
            }
            if t.targets.len() != 1 && t.targets.len() != steps + 1 {
                return Err(OptimError::InvalidInput(format!("track {i}: expected 1 or N + 1 = {} targets, got {}", steps + 1, t.targets.len())));
            }
            for p in &t.targets {
                check_finite(p.as_slice(), "target")?;
            }
            check_finite(t.offset.as_slice(), "offset")?;
            if t.point == TrackedPoint::CentreOfMass && t.offset != Vector3::zeros() {
                return Err(OptimError::InvalidInput(format!("track {i}: the centre of mass takes no offset, got {:?}", t.offset.as_slice())));
            }
        }
        Ok(Self { inner, model, tracks, steps, nx, pool: ScratchPool::default() })
    }

    fn with_workspace<T>(&self, f: impl FnOnce(&mut Workspace) -> T) -> T {
        self.pool.with(|| self.model.workspace(), f)
    }

    /// World position of `point` (for a frame, of the point `offset` in its axes) at
    /// configuration `q` (nq entries). O(n).
    pub fn position(&self, point: TrackedPoint, offset: &Vector3<f64>, q: &[f64]) -> Result<Vector3<f64>> {
        self.with_workspace(|ws| match point {
            TrackedPoint::CentreOfMass => Ok(center_of_mass(&self.model, ws, q)?),
            TrackedPoint::Frame(f) => {
                placements(&self.model, ws, q)?;
                let f = &self.model.frames[f];
                let local = f.placement.act_point(offset);
                Ok(match f.parent {
                    Some(b) => ws.placements[b].act_point(&local),
                    None => local,
                })
            }
        })
    }

    fn stage(&self, k: usize) -> Result<usize> {
        if k > self.steps {
            return Err(OptimError::InvalidInput(format!("stage {k} is past the point cost's horizon N = {}", self.steps)));
        }
        Ok(k)
    }

    fn value(&self, k: usize, x: &[f64]) -> Result<f64> {
        let q = &x[..self.model.nq];
        let mut total = 0.0;
        for t in self.tracks.iter().filter(|t| t.weights[k] != 0.0) {
            total += 0.5 * t.weights[k] * (self.position(t.point, &t.offset, q)? - t.target(k)).norm_squared();
        }
        Ok(total)
    }

    /// Adds `½ w |e|²`, `w J_pᵀ e` and `w J_pᵀ J_p` of every track weighted at stage `k`.
    fn add_derivatives(&self, k: usize, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        let q = &x[..self.model.nq];
        self.with_workspace(|ws| {
            for t in self.tracks.iter().filter(|t| t.weights[k] != 0.0) {
                match t.point {
                    TrackedPoint::CentreOfMass => {
                        let c = center_of_mass(&self.model, ws, q)?;
                        let jac = com_jacobian(&self.model, ws, q)?;
                        add_residual(t.weights[k], &(c - t.target(k)), jac.ncols(), |i| jac.fixed_view::<3, 1>(0, i).into_owned(), out);
                    }
                    TrackedPoint::Frame(f) => {
                        // the point r = R_f offset from the frame's origin moves with v + ω × r
                        frame_jacobian(&self.model, ws, q, f, ReferenceFrame::LocalWorldAligned)?;
                        let (jac, frame) = (&ws.jacobian, &ws.frame_placements[f]);
                        let r = frame.rotation * t.offset;
                        let column = |i: usize| jac.fixed_view::<3, 1>(0, i) + jac.fixed_view::<3, 1>(3, i).cross(&r);
                        add_residual(t.weights[k], &(frame.translation + r - t.target(k)), jac.ncols(), column, out);
                    }
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

/// `out += (½ w |e|², w Jᵀ e, w Jᵀ J)` on the first `nv` state coordinates, `J` `(3, nv)`
/// given by its columns.
fn add_residual(w: f64, e: &Vector3<f64>, nv: usize, column: impl Fn(usize) -> Vector3<f64>, out: &mut StageDerivatives) {
    out.l += 0.5 * w * e.norm_squared();
    for i in 0..nv {
        let ci = column(i);
        out.lx[i] += w * ci.dot(e);
        for j in 0..nv {
            out.lxx[(i, j)] += w * ci.dot(&column(j));
        }
    }
}

impl<C: Cost> Cost for PointCost<C> {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        self.check(x)?;
        Ok(self.inner.running_value(k, x, u)? + self.value(self.stage(k)?, x)?)
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        self.check(x)?;
        Ok(self.inner.terminal_value(x)? + self.value(self.steps, x)?)
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.check(x)?;
        self.inner.running_derivatives(k, x, u, out)?;
        self.add_derivatives(self.stage(k)?, x, out)
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.check(x)?;
        self.inner.terminal_derivatives(x, out)?;
        self.add_derivatives(self.steps, x, out)
    }
    fn parallel(&self) -> bool {
        self.inner.parallel()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::QuadraticCost;
    use nalgebra::{DMatrix, Matrix3};
    use vidyn_rbd::{integrate, Joint, ModelBuilder};
    use vidyn_spatial::{Inertia, Se3};

    /// A quadratic cost with zero weights on the states of `model` (the tracks alone count).
    fn zero_cost(model: &Arc<Model>) -> QuadraticCost {
        let nv = model.nv;
        let mut x_ref = vidyn_rbd::neutral(model);
        x_ref.extend(std::iter::repeat_n(0.0, nv));
        let zeros = DMatrix::zeros(2 * nv, 2 * nv);
        QuadraticCost::on_space(crate::StateSpace::of_model(model), vec![zeros.clone()], vec![DMatrix::zeros(2, 2)], zeros, x_ref, vec![]).unwrap()
    }

    /// A free-flying base with a two-link leg, its foot a frame.
    fn leg() -> Arc<Model> {
        let mut b = ModelBuilder::new("leg");
        let body = |m: f64, c: [f64; 3]| Inertia::new(m, Vector3::from(c), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.01)));
        let at = |z: f64| Se3::new(Matrix3::identity(), Vector3::new(0.1, 0.0, z));
        let base = b.add_body(None, "base", Joint::FreeFlyer, Se3::identity(), body(3.0, [0.0, 0.01, 0.0])).unwrap();
        let thigh = b.add_body(Some(base), "hip", Joint::Revolute { axis: Vector3::y() }, at(-0.05), body(0.5, [0.0, 0.0, -0.1])).unwrap();
        let shank = b.add_body(Some(thigh), "knee", Joint::Revolute { axis: Vector3::y() }, at(-0.2), body(0.3, [0.0, 0.0, -0.1])).unwrap();
        b.add_frame("foot", Some(shank), Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -0.2)), vidyn_rbd::FrameKind::Operational).unwrap();
        Arc::new(b.build().unwrap())
    }

    /// The gradient in tangent coordinates (`q ⊕ δ` by `integrate`) against central
    /// differences (h = 1e-6: truncation ~h², round-off ~ε/h), for a foot track with per-stage
    /// targets, a point offset on the foot's frame and a centre-of-mass track whose weight is
    /// zero on some stages; the terminal
    /// stage reads entry N; the Gauss–Newton Hessian is symmetric positive semi-definite.
    #[test]
    fn gradients_on_the_group_match_central_differences() {
        let model = leg();
        let (nq, nv, steps) = (model.nq, model.nv, 3);
        let nx = nq + nv;
        let foot = model.frame_index("foot").unwrap();
        let tracks = vec![
            PointTrack {
                point: TrackedPoint::Frame(foot),
                offset: Vector3::zeros(),
                targets: (0..=steps).map(|k| Vector3::new(0.1 * k as f64, 0.05, -0.3)).collect(),
                weights: vec![2.0, 0.0, 3.0, 5.0],
            },
            PointTrack {
                point: TrackedPoint::Frame(foot),
                offset: Vector3::new(0.08, -0.03, 0.05),
                targets: vec![Vector3::new(0.2, 0.0, -0.25)],
                weights: vec![1.5, 2.0, 0.0, 4.0],
            },
            PointTrack {
                point: TrackedPoint::CentreOfMass,
                offset: Vector3::zeros(),
                targets: vec![Vector3::new(0.0, 0.0, 0.1)],
                weights: vec![1.0, 4.0, 0.0, 7.0],
            },
        ];
        let inner = zero_cost(&model);
        let cost = PointCost::new(model.clone(), inner, nx, tracks, steps).unwrap();
        let mut q = vec![0.1, -0.2, 0.3, 0.1, -0.2, 0.05, 0.0, 0.4, -0.7];
        let norm = q[3..7].iter().map(|x| x * x).sum::<f64>().sqrt();
        q[3..7].iter_mut().for_each(|x| *x /= norm);
        let x: Vec<f64> = q.iter().copied().chain(std::iter::repeat_n(0.0, nv)).collect();
        let u = [0.0; 2];
        let h = 1e-6;
        for k in 0..=steps {
            let value = |x: &[f64]| if k < steps { cost.running_value(k, x, &u).unwrap() } else { cost.terminal_value(x).unwrap() };
            let mut d = StageDerivatives::zeros(2 * nv, 2);
            if k < steps {
                cost.running_derivatives(k, &x, &u, &mut d).unwrap();
            } else {
                cost.terminal_derivatives(&x, &mut d).unwrap();
            }
            assert!((d.l - value(&x)).abs() < 1e-14, "stage {k}");
            for i in 0..nv {
                let moved = |eps: f64| {
                    let mut dq = vec![0.0; nv];
                    dq[i] = eps;
                    let mut y = integrate(&model, &q, &dq).unwrap();
                    y.extend(std::iter::repeat_n(0.0, nv));
                    value(&y)
                };
                let fd = (moved(h) - moved(-h)) / (2.0 * h);
                assert!((fd - d.lx[i]).abs() < 1e-7 * (1.0 + fd.abs()), "stage {k}, coordinate {i}: {fd} vs {}", d.lx[i]);
            }
            assert!((&d.lxx - d.lxx.transpose()).amax() == 0.0);
            assert!(d.lxx.symmetric_eigenvalues().iter().all(|&e| e >= -1e-12));
        }
        assert!(cost.running_value(steps + 1, &x, &u).is_err());
        let bad = PointTrack { point: TrackedPoint::CentreOfMass, offset: Vector3::zeros(), targets: vec![Vector3::zeros()], weights: vec![1.0; steps] };
        let inner = zero_cost(&model);
        assert!(PointCost::new(model.clone(), inner, nx, vec![bad], steps).is_err());
        let offset_com = PointTrack { point: TrackedPoint::CentreOfMass, offset: Vector3::x(), targets: vec![Vector3::zeros()], weights: vec![1.0; steps + 1] };
        assert!(PointCost::new(model, zero_cost(&leg()), nx, vec![offset_com], steps).is_err());
    }
}
