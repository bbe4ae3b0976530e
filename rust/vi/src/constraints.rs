//! Holonomic constraints `h(q) = 0` between points of the bodies (Johnson 2012 §2.4.3, digest
//! §1.7): their values, their gradients `Dh` and the multiplier-weighted Hessians
//! `Σ_i λ_i D²h_i`, all from the world-frame joint columns of a [`PointState`].
//!
//! # Derivatives of a body point
//!
//! A point with world position `p` fixed on body `k` moves with the joints on `k`'s path to the
//! world: `∂p/∂q_j = J_j = v_j + ω_j × p` for `j ⪯ k`, with `S̄_j = [v_j; ω_j]` the world-frame
//! joint column. Because `∂S̄_j/∂q_l = S̄_l ×ₘ S̄_j` for `l ≺ j` and `S̄_j` does not depend on its
//! own or later joints, the Jacobi identity collapses both orderings into one rule: for `j, l`
//! on the path, `∂²p/∂q_j∂q_l = ω_a × J_d` where `a` is the one of `j, l` nearer the root and `d`
//! the other. A direction `n` fixed on body `k` (a plane normal) follows the same rule without
//! the translation: `∂n/∂q_j = ω_j × n`, `∂²n/∂q_j∂q_l = ω_a × (ω_d × n)`.
//!
//! # Constraint kinds
//!
//! * [`Constraint::PointOnPlane`]: `h = n·(p_b − p_a)`, point `b` stays on the plane through
//!   point `a` with normal `n` fixed on `a`'s body. Two planes make a point-on-line, three a
//!   coincident point (a loop closure).
//! * [`Constraint::Distance`]: `h = |p_b − p_a|² − L²`. `L` must be positive: at `L = 0` the
//!   gradient vanishes on the constraint set and the step's KKT system is singular.
//! * [`Constraint::Perpendicular`]: `h = (R_a u)·(R_b w)`, axis `u` fixed on body `a` stays
//!   perpendicular to axis `w` on body `b`. Three of them on the pairs `(x, y)`, `(y, z)`,
//!   `(z, x)` of two frames hold their relative orientation (to first order about a
//!   coincident pair: the gradient there is the relative rotation's three components), so
//!   with three point-on-plane constraints they make a 6-D contact.
//!
//! # Mirror images
//!
//! Equalities cannot tell an orientation from its mirror images: the three perpendicular pairs
//! of a 6-D contact also hold at a relative rotation of 180° about any of the frame's axes, and
//! of 120° about a diagonal (the axes permuted). A step that starts far enough from the target
//! orientation (a touchdown with the foot turned) may converge there, a solution of the
//! discrete equations and a wrong motion. A perpendicular pair may therefore name two axes that
//! must stay *aligned* ([`AlignedAxes`]: within [`ALIGNED_WITHIN_DEGREES`] of each other) on
//! the steps that impose it; the integrator checks them at the end of every such step and
//! raises an error instead of returning a mirrored solution.

use crate::point::PointState;
use nalgebra::{DMatrix, Vector3};
use vidyn_rbd::Model;

/// A point fixed on a body (`body = None`: the world), in that body's frame.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyPoint {
    pub body: Option<usize>,
    pub point: Vector3<f64>,
}

impl BodyPoint {
    /// The same point with its body renumbered by `bodies` (`bodies[i]`: the new index of body
    /// `i`).
    fn on_bodies(&self, bodies: &[usize]) -> Self {
        Self { body: self.body.map(|b| bodies[b]), point: self.point }
    }
}

/// How far apart (degrees) the two axes of [`AlignedAxes`] may turn: 60° leaves a held frame
/// (0°) every margin and rejects the mirror images of a 6-D contact (90° and 180°).
pub const ALIGNED_WITHIN_DEGREES: f64 = 60.0;

/// Two axes, `a` fixed on the first body of a [`Constraint::Perpendicular`] and `b` on the
/// second (in those bodies' frames, non-zero), that must stay within
/// [`ALIGNED_WITHIN_DEGREES`] of each other wherever the constraint holds (module docs,
/// "Mirror images"): not a constraint row, a check of which solution the step found.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignedAxes {
    pub a: Vector3<f64>,
    pub b: Vector3<f64>,
}

/// One scalar holonomic constraint `h(q) = 0` (module docs).
#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    /// `n·(p_b − p_a) = 0` with the normal `n` given in the frame of `a`'s body.
    PointOnPlane { a: BodyPoint, normal: Vector3<f64>, b: BodyPoint },
    /// `|p_b − p_a|² − L² = 0`, `L > 0`.
    Distance { a: BodyPoint, b: BodyPoint, length: f64 },
    /// `(R_a u)·(R_b w) = 0` with `u`, `w` the `point`s of `a`, `b` read as directions;
    /// `aligned`: axes that tell the intended solution from its mirror images.
    Perpendicular { a: BodyPoint, b: BodyPoint, aligned: Option<AlignedAxes> },
}

impl Constraint {
    /// The same constraint with its bodies renumbered by `bodies` (`bodies[i]`: the new index
    /// of body `i`), e.g. onto a single-dof expansion (`vidyn_rbd::SingleDofMap::bodies`).
    #[must_use]
    pub fn on_bodies(&self, bodies: &[usize]) -> Self {
        match self {
            Self::PointOnPlane { a, normal, b } => Self::PointOnPlane { a: a.on_bodies(bodies), normal: *normal, b: b.on_bodies(bodies) },
            Self::Distance { a, b, length } => Self::Distance { a: a.on_bodies(bodies), b: b.on_bodies(bodies), length: *length },
            Self::Perpendicular { a, b, aligned } => Self::Perpendicular { a: a.on_bodies(bodies), b: b.on_bodies(bodies), aligned: aligned.clone() },
        }
    }
}

/// Per-joint scratch of the constraint derivatives (allocated once per workspace).
#[derive(Clone, Debug)]
pub(crate) struct ConstraintScratch {
    dpa: Vec<Vector3<f64>>,
    dpb: Vec<Vector3<f64>>,
    dn: Vec<Vector3<f64>>,
    on_a: Vec<bool>,
    on_b: Vec<bool>,
    /// The columns on either point's path to the root, in increasing order (`add_hessian`).
    path: Vec<usize>,
}

impl ConstraintScratch {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            dpa: vec![Vector3::zeros(); n],
            dpb: vec![Vector3::zeros(); n],
            dn: vec![Vector3::zeros(); n],
            on_a: vec![false; n],
            on_b: vec![false; n],
            path: Vec::with_capacity(n),
        }
    }
}

/// World position of a body point.
fn world_point(st: &PointState, bp: &BodyPoint) -> Vector3<f64> {
    match bp.body {
        Some(k) => st.placements[k].act_point(&bp.point),
        None => bp.point,
    }
}

/// World direction of an axis fixed on a body (the `point` of `bp` read as a direction).
fn world_axis(st: &PointState, bp: &BodyPoint) -> Vector3<f64> {
    match bp.body {
        Some(k) => st.placements[k].rotation * bp.point,
        None => bp.point,
    }
}

/// Marks the path of `body` in `on` and writes `∂u/∂q_j = ω_j × u` of a world axis `u` fixed on
/// it (zero off the path).
fn axis_columns(model: &Model, st: &PointState, body: Option<usize>, u: &Vector3<f64>, on: &mut [bool], du: &mut [Vector3<f64>]) {
    on.fill(false);
    du.fill(Vector3::zeros());
    let mut node = body;
    while let Some(j) = node {
        on[j] = true;
        du[j] = st.columns[j].angular.cross(u);
        node = model.parents[j];
    }
}

/// Marks the path of `body` in `on` and writes `∂p/∂q_j = v_j + ω_j × p` (zero off the path).
fn point_columns(model: &Model, st: &PointState, body: Option<usize>, p: &Vector3<f64>, on: &mut [bool], dp: &mut [Vector3<f64>]) {
    on.fill(false);
    dp.fill(Vector3::zeros());
    let mut node = body;
    while let Some(j) = node {
        let c = &st.columns[j];
        on[j] = true;
        dp[j] = c.linear + c.angular.cross(p);
        node = model.parents[j];
    }
}

impl Constraint {
    /// Checks body indices and parameters against a model with `nbodies` bodies.
    pub(crate) fn validate(&self, nbodies: usize) -> Result<(), String> {
        let (a, b) = match self {
            Constraint::PointOnPlane { a, normal, b } => {
                if !(normal.norm() > 0.0 && normal.iter().all(|x| x.is_finite())) {
                    return Err(format!("point-on-plane normal [{}, {}, {}] must be a finite non-zero vector", normal.x, normal.y, normal.z));
                }
                (a, b)
            }
            Constraint::Distance { a, b, length } => {
                if !(*length > 0.0 && length.is_finite()) {
                    return Err(format!("distance constraint length {length} must be positive and finite (L = 0 makes the constraint gradient vanish)"));
                }
                (a, b)
            }
            Constraint::Perpendicular { a, b, aligned } => {
                let extra = aligned.iter().flat_map(|x| [&x.a, &x.b]);
                if let Some(axis) = [&a.point, &b.point].into_iter().chain(extra).find(|x| !(x.norm() > 0.0 && x.iter().all(|c| c.is_finite()))) {
                    return Err(format!("perpendicular-axes constraint: axis [{}, {}, {}] must be a finite non-zero vector", axis.x, axis.y, axis.z));
                }
                (a, b)
            }
        };
        for bp in [a, b] {
            if let Some(k) = bp.body.filter(|&k| k >= nbodies) {
                return Err(format!("constraint point on body {k}: the model has {nbodies} bodies"));
            }
            if bp.point.iter().any(|x| !x.is_finite()) {
                return Err(format!("constraint point [{}, {}, {}] is not finite", bp.point.x, bp.point.y, bp.point.z));
            }
        }
        if a.body == b.body {
            let body = a.body.map_or_else(|| "the world".to_string(), |k| format!("body {k}"));
            return Err(format!("both points of the constraint are on {body}: h would be constant"));
        }
        Ok(())
    }

    fn points(&self) -> (&BodyPoint, &BodyPoint) {
        match self {
            Constraint::PointOnPlane { a, b, .. } | Constraint::Distance { a, b, .. } | Constraint::Perpendicular { a, b, .. } => (a, b),
        }
    }

    /// The angle (degrees) between the [`AlignedAxes`] of a perpendicular pair at the
    /// configuration of `st`, when it exceeds [`ALIGNED_WITHIN_DEGREES`] (`None` otherwise and
    /// for constraints without such axes).
    pub(crate) fn misalignment(&self, st: &PointState) -> Option<f64> {
        let Constraint::Perpendicular { a, b, aligned: Some(axes) } = self else { return None };
        let u = world_axis(st, &BodyPoint { body: a.body, point: axes.a });
        let w = world_axis(st, &BodyPoint { body: b.body, point: axes.b });
        let degrees = (u.dot(&w) / (u.norm() * w.norm())).clamp(-1.0, 1.0).acos().to_degrees();
        (degrees > ALIGNED_WITHIN_DEGREES).then_some(degrees)
    }

    /// World-frame normal of a point-on-plane constraint.
    fn world_normal(st: &PointState, a: &BodyPoint, normal: &Vector3<f64>) -> Vector3<f64> {
        match a.body {
            Some(k) => st.placements[k].rotation * normal,
            None => *normal,
        }
    }

    /// `h(q)` at the configuration of `st`.
    pub(crate) fn value(&self, st: &PointState) -> f64 {
        let (a, b) = self.points();
        let d = || world_point(st, b) - world_point(st, a);
        match self {
            Constraint::PointOnPlane { normal, .. } => Self::world_normal(st, a, normal).dot(&d()),
            Constraint::Distance { length, .. } => d().norm_squared() - length * length,
            Constraint::Perpendicular { .. } => world_axis(st, a).dot(&world_axis(st, b)),
        }
    }

    /// Fills the scratch with `∂p_a/∂q`, `∂p_b/∂q` (and `∂n/∂q`); returns `(p_a, p_b, n)`. For
    /// [`Constraint::Perpendicular`] the world axes and their derivatives `ω_j × u` instead.
    fn columns(&self, model: &Model, st: &PointState, sc: &mut ConstraintScratch) -> (Vector3<f64>, Vector3<f64>, Vector3<f64>) {
        let (a, b) = self.points();
        if let Constraint::Perpendicular { .. } = self {
            let (ua, wb) = (world_axis(st, a), world_axis(st, b));
            axis_columns(model, st, a.body, &ua, &mut sc.on_a, &mut sc.dpa);
            axis_columns(model, st, b.body, &wb, &mut sc.on_b, &mut sc.dpb);
            return (ua, wb, Vector3::zeros());
        }
        let (pa, pb) = (world_point(st, a), world_point(st, b));
        point_columns(model, st, a.body, &pa, &mut sc.on_a, &mut sc.dpa);
        point_columns(model, st, b.body, &pb, &mut sc.on_b, &mut sc.dpb);
        let n = match self {
            Constraint::PointOnPlane { normal, .. } => {
                let n = Self::world_normal(st, a, normal);
                for j in 0..st.columns.len() {
                    sc.dn[j] = if sc.on_a[j] { st.columns[j].angular.cross(&n) } else { Vector3::zeros() };
                }
                n
            }
            Constraint::Distance { .. } | Constraint::Perpendicular { .. } => Vector3::zeros(),
        };
        (pa, pb, n)
    }

    /// The gradient `Dh` (`(n,)`) at the configuration of `st`. O(depth).
    pub(crate) fn gradient(&self, model: &Model, st: &PointState, sc: &mut ConstraintScratch, out: &mut [f64]) {
        let (pa, pb, n) = self.columns(model, st, sc);
        let d = pb - pa;
        for j in 0..out.len() {
            let dd = sc.dpb[j] - sc.dpa[j];
            out[j] = match self {
                Constraint::PointOnPlane { .. } => sc.dn[j].dot(&d) + n.dot(&dd),
                Constraint::Distance { .. } => 2.0 * d.dot(&dd),
                // pa, pb are the world axes u_a, w_b here
                Constraint::Perpendicular { .. } => sc.dpa[j].dot(&pb) + pa.dot(&sc.dpb[j]),
            };
        }
    }

    /// `out += weight · D²h` at the configuration of `st` (module docs), O(d²) for the `d`
    /// columns on the two points' paths to the root: every term of an entry `(j, l)` has a
    /// factor that vanishes unless both columns move one of the points.
    pub(crate) fn add_hessian(&self, model: &Model, st: &PointState, sc: &mut ConstraintScratch, weight: f64, out: &mut DMatrix<f64>) {
        let (pa, pb, n) = self.columns(model, st, sc);
        let d = pb - pa;
        sc.path.clear();
        sc.path.extend((0..st.columns.len()).filter(|&j| sc.on_a[j] || sc.on_b[j]));
        for (il, &l) in sc.path.iter().enumerate() {
            for &j in &sc.path[..=il] {
                // j ≤ l in depth-first order: when both lie on one path, j is the ancestor
                let w = &st.columns[j].angular;
                let mut d2d = Vector3::zeros();
                if sc.on_b[j] && sc.on_b[l] {
                    d2d += w.cross(&sc.dpb[l]);
                }
                if sc.on_a[j] && sc.on_a[l] {
                    d2d -= w.cross(&sc.dpa[l]);
                }
                let (ddj, ddl) = (sc.dpb[j] - sc.dpa[j], sc.dpb[l] - sc.dpa[l]);
                let h = match self {
                    Constraint::PointOnPlane { .. } => {
                        let d2n = if sc.on_a[j] && sc.on_a[l] { w.cross(&sc.dn[l]) } else { Vector3::zeros() };
                        d2n.dot(&d) + sc.dn[j].dot(&ddl) + sc.dn[l].dot(&ddj) + n.dot(&d2d)
                    }
                    Constraint::Distance { .. } => 2.0 * (ddj.dot(&ddl) + d.dot(&d2d)),
                    Constraint::Perpendicular { .. } => {
                        // ∂²u/∂q_j∂q_l = ω_j × ∂u/∂q_l (j the ancestor), the same for w
                        let d2a = if sc.on_a[j] && sc.on_a[l] { w.cross(&sc.dpa[l]) } else { Vector3::zeros() };
                        let d2b = if sc.on_b[j] && sc.on_b[l] { w.cross(&sc.dpb[l]) } else { Vector3::zeros() };
                        d2a.dot(&pb) + sc.dpa[j].dot(&sc.dpb[l]) + sc.dpa[l].dot(&sc.dpb[j]) + pa.dot(&d2b)
                    }
                };
                out[(j, l)] += weight * h;
                if j != l {
                    out[(l, j)] += weight * h;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use vidyn_rbd::builders::random_tree;
    use vidyn_rbd::Joint;

    fn state(model: &Model, q: &[f64]) -> PointState {
        let mut st = PointState::new(model.nv);
        st.update(model, q, &vec![0.0; model.nv]);
        st
    }

    /// Gradients and Hessians against central differences (h = 1e-6: truncation ~1e-12,
    /// round-off ~1e-10 relative) on random trees, for points on branches that share a
    /// common ancestor, on the same branch, and on the world.
    #[test]
    fn derivatives_match_finite_differences() {
        let joints: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for seed in 0..6 {
            let model = random_tree(7, seed, &joints);
            let n = model.nv;
            let pick = |rng: &mut ChaCha8Rng| {
                let body = if rng.random_range(0.0..1.0) < 0.2 { None } else { Some(rng.random_range(0..n)) };
                BodyPoint { body, point: Vector3::from_fn(|_, _| rng.random_range(-0.5..0.5)) }
            };
            let (a, mut b) = (pick(&mut rng), pick(&mut rng));
            if a.body == b.body {
                b.body = if a.body == Some(0) { None } else { Some(0) };
            }
            let normal = Vector3::from_fn(|_, _| rng.random_range(-1.0..1.0));
            let axes = (BodyPoint { body: a.body, point: normal }, BodyPoint { body: b.body, point: Vector3::new(0.3, -0.8, 0.5) });
            for c in [
                Constraint::PointOnPlane { a: a.clone(), normal, b: b.clone() },
                Constraint::Distance { a: a.clone(), b: b.clone(), length: 0.7 },
                Constraint::Perpendicular { a: axes.0, b: axes.1, aligned: None },
            ] {
                c.validate(n).unwrap();
                let q: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let st = state(&model, &q);
                let mut sc = ConstraintScratch::new(n);
                let mut grad = vec![0.0; n];
                c.gradient(&model, &st, &mut sc, &mut grad);
                let mut hess = DMatrix::zeros(n, n);
                c.add_hessian(&model, &st, &mut sc, 1.0, &mut hess);
                let h = 1e-6;
                for k in 0..n {
                    let shifted = |e: f64| {
                        let mut qq = q.clone();
                        qq[k] += e;
                        state(&model, &qq)
                    };
                    let (sp, sm) = (shifted(h), shifted(-h));
                    let fd = (c.value(&sp) - c.value(&sm)) / (2.0 * h);
                    assert!((grad[k] - fd).abs() < 1e-8 * (1.0 + fd.abs()), "{c:?}: Dh[{k}] {} vs {fd}", grad[k]);
                    let (mut gp, mut gm) = (vec![0.0; n], vec![0.0; n]);
                    c.gradient(&model, &sp, &mut sc, &mut gp);
                    c.gradient(&model, &sm, &mut sc, &mut gm);
                    for j in 0..n {
                        let fd2 = (gp[j] - gm[j]) / (2.0 * h);
                        assert!((hess[(j, k)] - fd2).abs() < 1e-7 * (1.0 + fd2.abs()), "{c:?}: D²h[{j},{k}] {} vs {fd2}", hess[(j, k)]);
                    }
                }
            }
        }
    }

    #[test]
    fn bad_constraints_are_rejected() {
        let p = |body| BodyPoint { body, point: Vector3::zeros() };
        assert!(Constraint::Distance { a: p(Some(0)), b: p(None), length: 0.0 }.validate(2).is_err());
        assert!(Constraint::Distance { a: p(Some(5)), b: p(None), length: 1.0 }.validate(2).is_err());
        assert!(Constraint::PointOnPlane { a: p(Some(1)), normal: Vector3::zeros(), b: p(None) }.validate(2).is_err());
        assert!(Constraint::PointOnPlane { a: p(Some(1)), normal: Vector3::x(), b: p(Some(1)) }.validate(2).is_err());
        assert!(Constraint::Perpendicular { a: p(Some(1)), b: BodyPoint { body: None, point: Vector3::x() }, aligned: None }.validate(2).is_err());
        let axis = |body| BodyPoint { body, point: Vector3::x() };
        let aligned = Some(AlignedAxes { a: Vector3::y(), b: Vector3::zeros() });
        assert!(Constraint::Perpendicular { a: axis(Some(1)), b: axis(None), aligned }.validate(2).is_err());
    }
}
