//! Holonomic constraints `h(q) = 0` between points of the bodies (Johnson 2012 §2.4.3, digest
//! §1.7): their values, their gradients `Dh`, the multiplier-weighted Hessians
//! `Σ_i λ_i D²h_i`, the Hessian-vector products `D²h·ω` and the third derivatives contracted
//! with one direction `D³h[ω, ·, ·]`, all from the world-frame joint columns of a
//! [`PointState`].
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
    /// Contraction with a direction `c` (`add_third_contracted`, `hessian_vector`; angular
    /// columns written `w_k`): `Σ_{k ⪯ j} c_k w_k` over the ancestors of `j` and `j` itself.
    above: Vec<Vector3<f64>>,
    /// `Σ_{k ≻ j} c_k ∂x/∂q_k` over the columns strictly below `j` on the path of `x = p_a`
    /// (`u` of a perpendicular pair), `p_b` (`w`), and the plane normal `n`.
    below_a: Vec<Vector3<f64>>,
    below_b: Vec<Vector3<f64>>,
    below_n: Vec<Vector3<f64>>,
    /// `D²x[c, e_j]` of the same three (zero off their paths).
    mixed_a: Vec<Vector3<f64>>,
    mixed_b: Vec<Vector3<f64>>,
    mixed_n: Vec<Vector3<f64>>,
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
            above: vec![Vector3::zeros(); n],
            below_a: vec![Vector3::zeros(); n],
            below_b: vec![Vector3::zeros(); n],
            below_n: vec![Vector3::zeros(); n],
            mixed_a: vec![Vector3::zeros(); n],
            mixed_b: vec![Vector3::zeros(); n],
            mixed_n: vec![Vector3::zeros(); n],
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

/// Contracts the derivatives of a body-fixed vector `x` (a point or a direction on `body`, with
/// columns `dx[j] = ∂x/∂q_j`) with a direction `c`, walking its path from the body to the root:
/// writes `below[j] = Σ_{k ≻ j} c_k dx[k]` and `mixed[j] = D²x[c, e_j] = above[j] × dx[j] +
/// w_j × below[j]` on the path (`mixed` zero off it) and returns `Dx[c] = Σ_k c_k dx[k]`.
/// `above` must hold `Σ_{k ⪯ j} c_k w_k` on the path (`w_k` the angular part of column `k`).
#[allow(clippy::too_many_arguments)]
fn contract_along_path(
    model: &Model,
    st: &PointState,
    body: Option<usize>,
    c: &[f64],
    dx: &[Vector3<f64>],
    above: &[Vector3<f64>],
    below: &mut [Vector3<f64>],
    mixed: &mut [Vector3<f64>],
) -> Vector3<f64> {
    mixed.fill(Vector3::zeros());
    let mut sum = Vector3::zeros();
    let mut node = body;
    while let Some(j) = node {
        below[j] = sum;
        mixed[j] = above[j].cross(&dx[j]) + st.columns[j].angular.cross(&sum);
        sum += c[j] * dx[j];
        node = model.parents[j];
    }
    sum
}

/// `D³x[c, e_j, e_l]` of a body-fixed vector `x` for columns `j ⪯ l` both on its path (module
/// docs of `add_third_contracted`): `A_j × (w_j × x_l) + w_j × ((A_l − A_j) × x_l) + w_j × (w_l ×
/// B_l)` with `x_l = ∂x/∂q_l`, `A = above`, `B_l = below[l]`.
fn third_along(wj: &Vector3<f64>, wl: &Vector3<f64>, aj: &Vector3<f64>, al: &Vector3<f64>, xl: &Vector3<f64>, bl: &Vector3<f64>) -> Vector3<f64> {
    aj.cross(&wj.cross(xl)) + wj.cross(&(al - aj).cross(xl)) + wj.cross(&wl.cross(bl))
}

/// What [`Constraint::contract`] returns: the points (axes) and normal, and their first
/// derivatives along the contraction direction `c`.
struct Contracted {
    pa: Vector3<f64>,
    pb: Vector3<f64>,
    n: Vector3<f64>,
    /// `Dp_a[c]`, `Dp_b[c]`, `Dn[c]`.
    ta: Vector3<f64>,
    tb: Vector3<f64>,
    tn: Vector3<f64>,
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

    /// The gradients `Dh_i` of `constraints[i]` for `i` in `active`, in order: `emit(k, row)`
    /// with `row` (`(n,)`, scratch) holding `Dh` of `active[k]`, as [`Self::gradient`] gives it.
    /// Consecutive world-fixed planes through one body point (the rows of a 3-D point contact)
    /// share one walk of the point's path: their rows are `n_i · ∂p_b/∂q`, the plane's normal
    /// having no derivative.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn for_each_gradient(
        constraints: &[Constraint],
        active: &[usize],
        model: &Model,
        st: &PointState,
        sc: &mut ConstraintScratch,
        row: &mut [f64],
        mut emit: impl FnMut(usize, &[f64]),
    ) {
        let mut k = 0;
        while k < active.len() {
            let first = &constraints[active[k]];
            let Constraint::PointOnPlane { a: BodyPoint { body: None, .. }, b, .. } = first else {
                first.gradient(model, st, sc, row);
                emit(k, row);
                k += 1;
                continue;
            };
            point_columns(model, st, b.body, &world_point(st, b), &mut sc.on_b, &mut sc.dpb);
            while let Some(&i) = active.get(k) {
                match &constraints[i] {
                    Constraint::PointOnPlane { a: BodyPoint { body: None, .. }, normal, b: other } if other == b => {
                        row.iter_mut().zip(&sc.dpb).for_each(|(r, dp)| *r = normal.dot(dp));
                        emit(k, row);
                    }
                    _ => break,
                }
                k += 1;
            }
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

    /// `out += Σ_{i ∈ active} weight(i) · D²h_i` at the configuration of `st`. Consecutive
    /// rows that hold one body point on world-fixed planes (the three rows of a 3-D point
    /// contact) are summed as one: their Hessian `n·D²p_b` is linear in the world normal `n`
    /// (`Dn = 0`), so `Σ_k w_k D²h_k = (Σ_k w_k n_k)·D²p_b`, one path sweep per point instead
    /// of one per row (equal up to rounding).
    pub(crate) fn add_weighted_hessians(
        constraints: &[Constraint],
        active: &[usize],
        model: &Model,
        st: &PointState,
        sc: &mut ConstraintScratch,
        weight: impl Fn(usize) -> f64,
        out: &mut DMatrix<f64>,
    ) {
        let mut k = 0;
        while k < active.len() {
            let first = &constraints[active[k]];
            let Constraint::PointOnPlane { a: BodyPoint { body: None, point }, b, .. } = first else {
                first.add_hessian(model, st, sc, weight(active[k]), out);
                k += 1;
                continue;
            };
            let mut normal = Vector3::zeros();
            while let Some(&i) = active.get(k) {
                match &constraints[i] {
                    Constraint::PointOnPlane { a: BodyPoint { body: None, .. }, normal: n, b: other } if other == b => normal += weight(i) * n,
                    _ => break,
                }
                k += 1;
            }
            let merged = Constraint::PointOnPlane { a: BodyPoint { body: None, point: *point }, normal, b: b.clone() };
            merged.add_hessian(model, st, sc, 1.0, out);
        }
    }

    /// The shared start of [`Self::hessian_vector`] and [`Self::add_third_contracted`]: the
    /// columns (as in [`Self::columns`]), the path, and the contraction of every column
    /// quantity with `c` into `above`, `below_*`, `mixed_*` (see [`ConstraintScratch`]). O(n).
    fn contract(&self, model: &Model, st: &PointState, sc: &mut ConstraintScratch, c: &[f64]) -> Contracted {
        let (pa, pb, n) = self.columns(model, st, sc);
        sc.path.clear();
        sc.path.extend((0..st.columns.len()).filter(|&j| sc.on_a[j] || sc.on_b[j]));
        // the path is closed under parents, which come first
        for &j in &sc.path {
            let up = model.parents[j].map_or_else(Vector3::zeros, |p| sc.above[p]);
            sc.above[j] = up + c[j] * st.columns[j].angular;
        }
        let (a, b) = self.points();
        let ta = contract_along_path(model, st, a.body, c, &sc.dpa, &sc.above, &mut sc.below_a, &mut sc.mixed_a);
        let tb = contract_along_path(model, st, b.body, c, &sc.dpb, &sc.above, &mut sc.below_b, &mut sc.mixed_b);
        let tn = match self {
            Constraint::PointOnPlane { .. } => contract_along_path(model, st, a.body, c, &sc.dn, &sc.above, &mut sc.below_n, &mut sc.mixed_n),
            Constraint::Distance { .. } | Constraint::Perpendicular { .. } => Vector3::zeros(),
        };
        Contracted { pa, pb, n, ta, tb, tn }
    }

    /// The Hessian-vector product `out = D²h · ω`, `out[j] = Σ_l ∂²h/∂q_j∂q_l ω_l`, overwriting
    /// `out` (`omega` and `out`: `(n,)`; `out` zero off the two points' paths).
    ///
    /// Here `w_k` is the angular part of column `k` (`ω_k` in the module docs: `ω` is the
    /// direction). For a body-fixed point or direction `x` with columns `x_j = ∂x/∂q_j`, the
    /// second-derivative rule of the module docs sums along `ω` to `D²x[ω, e_j] = (Σ_{k ⪯ j}
    /// ω_k w_k) × x_j + w_j × Σ_{k ≻ j} ω_k x_k` (sums over `x`'s path, `j` on it; zero off
    /// it), and the product rule gives, with `d = p_b − p_a`,
    ///
    /// * point on plane: `D²n[ω, e_j]·d + Dn[ω]·Dd[e_j] + Dn[e_j]·Dd[ω] + n·D²d[ω, e_j]`,
    /// * distance: `2 (Dd[e_j]·Dd[ω] + d·D²d[ω, e_j])`,
    /// * perpendicular `u·w`: `D²u[ω, e_j]·w + Du[ω]·Dw[e_j] + Du[e_j]·Dw[ω] + u·D²w[ω, e_j]`.
    ///
    /// The path sums are prefix and suffix sums, so the cost is O(n) (O(depth) past the fills).
    pub(crate) fn hessian_vector(&self, model: &Model, st: &PointState, sc: &mut ConstraintScratch, omega: &[f64], out: &mut [f64]) {
        let Contracted { pa, pb, n, ta, tb, tn } = self.contract(model, st, sc, omega);
        let d = pb - pa;
        let td = tb - ta;
        for j in 0..out.len() {
            let dd = sc.dpb[j] - sc.dpa[j];
            let cd = sc.mixed_b[j] - sc.mixed_a[j];
            out[j] = match self {
                Constraint::PointOnPlane { .. } => sc.mixed_n[j].dot(&d) + tn.dot(&dd) + sc.dn[j].dot(&td) + n.dot(&cd),
                Constraint::Distance { .. } => 2.0 * (dd.dot(&td) + d.dot(&cd)),
                // pa, pb are the world axes u, w here
                Constraint::Perpendicular { .. } => sc.mixed_a[j].dot(&pb) + ta.dot(&sc.dpb[j]) + sc.dpa[j].dot(&tb) + pa.dot(&sc.mixed_b[j]),
            };
        }
    }

    /// `out += weight · D³h[ω, ·, ·]`, i.e. `out[(j, l)] += weight · Σ_k ω_k ∂³h/∂q_k∂q_j∂q_l`:
    /// the derivative of `D²h` along `ω` (`omega`: `(n,)`). `out` stays symmetric; only entries
    /// whose two columns each move one of the points (either) change.
    ///
    /// # Third derivatives of a body-fixed vector
    ///
    /// Here `w_k` is the angular part of column `k` (`ω_k` in the module docs: `ω` is the
    /// direction). Differentiating the second-derivative rule of the module docs once more (with
    /// `∂w_a/∂q_m = w_m × w_a` for `m ≺ a`, zero otherwise, and the Jacobi identity to merge the
    /// two terms when `m ≺ a`) gives one rule for three columns on the path of a point `p`,
    /// sorted by depth as `a ⪯ b ⪯ e` (equal columns allowed): `∂³p/∂q_a∂q_b∂q_e = w_a × (w_b ×
    /// J_e)`, and for a direction `n`: `w_a × (w_b × (w_e × n))`; a column off the path gives
    /// zero. With `x_l` the first derivative (`J_l` or `w_l × n`), summing over `k` along `ω`
    /// for `j ⪯ l` splits by where `k` sits:
    ///
    /// `D³x[ω, e_j, e_l] = A_j × (w_j × x_l) + w_j × ((A_l − A_j) × x_l) + w_j × (w_l × B_l)`
    ///
    /// where the three terms collect `k ⪯ j`, `j ≺ k ⪯ l` and `l ≺ k`, through the prefix sums
    /// `A_j = Σ_{k ⪯ j} ω_k w_k` and the suffix sums `B_l = Σ_{k ≻ l} ω_k x_k` along the path.
    ///
    /// # Product rule
    ///
    /// With `d = p_b − p_a`, `x = e_j`, `y = e_l`:
    ///
    /// * point on plane, `h = n·d`: `D³n[ω,x,y]·d + D²n[ω,x]·Dd[y] + D²n[ω,y]·Dd[x] +
    ///   D²n[x,y]·Dd[ω] + Dn[ω]·D²d[x,y] + Dn[x]·D²d[ω,y] + Dn[y]·D²d[ω,x] + n·D³d[ω,x,y]`,
    /// * distance, `h = d·d − L²`: `2 (D²d[ω,x]·Dd[y] + Dd[x]·D²d[ω,y] + Dd[ω]·D²d[x,y] +
    ///   d·D³d[ω,x,y])`,
    /// * perpendicular, `h = u·w`: as the point on plane with `n → u`, `d → w`.
    ///
    /// `D²x[ω, ·]` and `Dx[ω]` come from the same prefix and suffix sums
    /// ([`Self::hessian_vector`]), so each entry is O(1) and the cost O(n + d²) for the `d`
    /// columns on the two points' paths, without allocation.
    pub(crate) fn add_third_contracted(&self, model: &Model, st: &PointState, sc: &mut ConstraintScratch, weight: f64, omega: &[f64], out: &mut DMatrix<f64>) {
        let Contracted { pa, pb, n, ta, tb, tn } = self.contract(model, st, sc, omega);
        let d = pb - pa;
        let td = tb - ta;
        for (il, &l) in sc.path.iter().enumerate() {
            let wl = &st.columns[l].angular;
            let al = &sc.above[l];
            for &j in &sc.path[..=il] {
                // j ≤ l: when both lie on one path, j is the ancestor
                let wj = &st.columns[j].angular;
                let aj = &sc.above[j];
                let (on_a, on_b) = (sc.on_a[j] && sc.on_a[l], sc.on_b[j] && sc.on_b[l]);
                // D²x[e_j, e_l] and D³x[ω, e_j, e_l] of p_a (u) and p_b (w)
                let (d2a, d3a) =
                    if on_a { (wj.cross(&sc.dpa[l]), third_along(wj, wl, aj, al, &sc.dpa[l], &sc.below_a[l])) } else { (Vector3::zeros(), Vector3::zeros()) };
                let (d2b, d3b) =
                    if on_b { (wj.cross(&sc.dpb[l]), third_along(wj, wl, aj, al, &sc.dpb[l], &sc.below_b[l])) } else { (Vector3::zeros(), Vector3::zeros()) };
                let h = match self {
                    Constraint::PointOnPlane { .. } => {
                        let (d2n, d3n) = if on_a {
                            (wj.cross(&sc.dn[l]), third_along(wj, wl, aj, al, &sc.dn[l], &sc.below_n[l]))
                        } else {
                            (Vector3::zeros(), Vector3::zeros())
                        };
                        let (ddj, ddl) = (sc.dpb[j] - sc.dpa[j], sc.dpb[l] - sc.dpa[l]);
                        let (cdj, cdl) = (sc.mixed_b[j] - sc.mixed_a[j], sc.mixed_b[l] - sc.mixed_a[l]);
                        d3n.dot(&d)
                            + sc.mixed_n[j].dot(&ddl)
                            + sc.mixed_n[l].dot(&ddj)
                            + d2n.dot(&td)
                            + tn.dot(&(d2b - d2a))
                            + sc.dn[j].dot(&cdl)
                            + sc.dn[l].dot(&cdj)
                            + n.dot(&(d3b - d3a))
                    }
                    Constraint::Distance { .. } => {
                        let (ddj, ddl) = (sc.dpb[j] - sc.dpa[j], sc.dpb[l] - sc.dpa[l]);
                        let (cdj, cdl) = (sc.mixed_b[j] - sc.mixed_a[j], sc.mixed_b[l] - sc.mixed_a[l]);
                        2.0 * (cdj.dot(&ddl) + ddj.dot(&cdl) + td.dot(&(d2b - d2a)) + d.dot(&(d3b - d3a)))
                    }
                    // pa, pb are the world axes u, w here
                    Constraint::Perpendicular { .. } => {
                        d3a.dot(&pb)
                            + sc.mixed_a[j].dot(&sc.dpb[l])
                            + sc.mixed_a[l].dot(&sc.dpb[j])
                            + d2a.dot(&tb)
                            + ta.dot(&d2b)
                            + sc.dpa[j].dot(&sc.mixed_b[l])
                            + sc.dpa[l].dot(&sc.mixed_b[j])
                            + pa.dot(&d3b)
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

    /// A constraint and the configuration to test it at.
    type Case = (Constraint, Vec<f64>);

    /// Random 7-body trees, each with the three constraint kinds between two random points
    /// (on branches that share a common ancestor, on the same branch, or on the world) and a
    /// random configuration per constraint.
    fn cases() -> Vec<(Model, Vec<Case>)> {
        let joints: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut out = Vec::new();
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
            let mut cs = Vec::new();
            for c in [
                Constraint::PointOnPlane { a: a.clone(), normal, b: b.clone() },
                Constraint::Distance { a: a.clone(), b: b.clone(), length: 0.7 },
                Constraint::Perpendicular { a: axes.0, b: axes.1, aligned: None },
            ] {
                c.validate(n).unwrap();
                let q: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                cs.push((c, q));
            }
            out.push((model, cs));
        }
        out
    }

    /// Gradients and Hessians against central differences (h = 1e-6: truncation ~1e-12,
    /// round-off ~1e-10 relative) on random trees, for points on branches that share a
    /// common ancestor, on the same branch, and on the world.
    #[test]
    fn derivatives_match_finite_differences() {
        for (model, cs) in cases() {
            let n = model.nv;
            for (c, q) in cs {
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

    /// `add_third_contracted` against central differences of `add_hessian` along a random
    /// direction `ω`, `(D²h(q + εω) − D²h(q − εω)) / 2ε`, on the cases of
    /// `derivatives_match_finite_differences`. With ε = 1e-5 the truncation error is
    /// `ε²/6 · |D⁵h[ω,ω,ω,·,·]|` ~ 1e-10 (the entries and their derivatives are O(1)–O(10)
    /// here), the round-off `~1e-16 · |D²h| / ε` ~ 1e-11 · |D²h|; the tolerance 1e-8 ·
    /// (1 + |fd|) leaves a margin of ~100 over both. Also `hessian_vector` against `add_hessian`
    /// times `ω` (the same sums in another order: 1e-12 · (1 + `Σ_l |D²h[j,l] ω_l|`), as entries
    /// that vanish in exact arithmetic come out at ~1e-17 from either side), and
    /// that `add_third_contracted` adds `weight ·` its result to `out` and keeps it symmetric.
    #[test]
    fn third_derivatives_match_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut worst_fd, mut worst_hv) = (0.0_f64, 0.0_f64);
        for (model, cs) in cases() {
            let n = model.nv;
            for (c, q) in cs {
                let omega: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let st = state(&model, &q);
                let mut sc = ConstraintScratch::new(n);
                let mut hess = DMatrix::zeros(n, n);
                c.add_hessian(&model, &st, &mut sc, 1.0, &mut hess);

                let mut hv = vec![f64::NAN; n];
                c.hessian_vector(&model, &st, &mut sc, &omega, &mut hv);
                for j in 0..n {
                    let (exact, scale) = (0..n).fold((0.0, 0.0), |(s, a), l| (s + hess[(j, l)] * omega[l], a + (hess[(j, l)] * omega[l]).abs()));
                    let dev = (hv[j] - exact).abs() / (1.0 + scale);
                    worst_hv = worst_hv.max(dev);
                    assert!(dev < 1e-12, "{c:?}: (D²h·ω)[{j}] {} vs {exact}", hv[j]);
                }

                // start from a symmetric matrix to check the accumulation
                let start = DMatrix::from_fn(n, n, |i, j| (i + j) as f64 * 0.25 - 1.0);
                let weight = -1.75;
                let mut third = start.clone();
                c.add_third_contracted(&model, &st, &mut sc, weight, &omega, &mut third);
                assert_eq!(third, third.transpose(), "{c:?}: D³h[ω] not symmetric");
                let third = (third - &start) / weight;

                let eps = 1e-5;
                let shifted = |e: f64| {
                    let qq: Vec<f64> = q.iter().zip(&omega).map(|(x, w)| x + e * w).collect();
                    let mut hs = DMatrix::zeros(n, n);
                    c.add_hessian(&model, &state(&model, &qq), &mut ConstraintScratch::new(n), 1.0, &mut hs);
                    hs
                };
                let fd = (shifted(eps) - shifted(-eps)) / (2.0 * eps);
                for j in 0..n {
                    for l in 0..n {
                        let dev = (third[(j, l)] - fd[(j, l)]).abs() / (1.0 + fd[(j, l)].abs());
                        worst_fd = worst_fd.max(dev);
                        assert!(dev < 1e-8, "{c:?}: D³h[ω][{j},{l}] {} vs {}", third[(j, l)], fd[(j, l)]);
                    }
                }
            }
        }
        eprintln!("third derivatives: max |D³h[ω] − fd| / (1 + |fd|) = {worst_fd:.2e}; max relative |D²h·ω − H ω| = {worst_hv:.2e}");
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

    /// The weighted sum of Hessians with a 3-D point contact's three rows merged equals the sum
    /// of every row's Hessian, beside rows that are not merged (a plane on a body, a distance)
    /// and a second contact point on another body.
    /// A random 7-joint tree at a random configuration with two 3-D point contacts (rows 1–3
    /// and 4–6: world planes through a foot), a distance (row 0) and a plane on a body (row 7).
    fn contact_rows(seed: u64, rng: &mut ChaCha8Rng) -> (Model, Vec<f64>, Vec<Constraint>) {
        let joints: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
        let model = random_tree(7, seed, &joints);
        let n = model.nv;
        let q: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let foot = |body| BodyPoint { body: Some(body), point: Vector3::new(0.1, -0.2, 0.3) };
        let world = |x: f64| BodyPoint { body: None, point: Vector3::new(x, 0.5, -0.1) };
        let mut cs = vec![Constraint::Distance { a: world(0.0), b: foot(1), length: 0.9 }];
        for body in [n - 1, 2] {
            for (k, normal) in [Vector3::x(), Vector3::y(), Vector3::new(0.2, 0.1, 1.0)].into_iter().enumerate() {
                cs.push(Constraint::PointOnPlane { a: world(k as f64), normal, b: foot(body) });
            }
        }
        cs.push(Constraint::PointOnPlane { a: foot(3), normal: Vector3::z(), b: foot(n - 1) });
        (model, q, cs)
    }

    #[test]
    fn merged_point_contact_hessians_equal_the_sum_of_the_rows() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for seed in 0..4 {
            let (model, q, cs) = contact_rows(seed, &mut rng);
            let n = model.nv;
            let weights: Vec<f64> = (0..cs.len()).map(|_| rng.random_range(-2.0..2.0)).collect();
            let active: Vec<usize> = (0..cs.len()).collect();
            let st = state(&model, &q);
            let mut sc = ConstraintScratch::new(n);
            let (mut merged, mut rows) = (DMatrix::zeros(n, n), DMatrix::zeros(n, n));
            Constraint::add_weighted_hessians(&cs, &active, &model, &st, &mut sc, |i| weights[i], &mut merged);
            for (c, w) in cs.iter().zip(&weights) {
                c.add_hessian(&model, &st, &mut sc, *w, &mut rows);
            }
            let err = (&merged - &rows).amax() / rows.amax();
            assert!(err < 1e-13, "seed {seed}: merged Hessians off by {err:e}");
        }
    }

    /// The gradients with a 3-D point contact's rows from one path walk are every row's own,
    /// in the order of `active`, also with a contact's rows permuted or split.
    #[test]
    fn merged_point_contact_gradients_are_the_rows_gradients() {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        for seed in 0..4 {
            let (model, q, cs) = contact_rows(seed, &mut rng);
            let n = model.nv;
            // the second contact's rows out of order, the first's split by another constraint
            let active = [0, 1, 2, 7, 3, 5, 4, 6];
            let st = state(&model, &q);
            let mut sc = ConstraintScratch::new(n);
            let (mut row, mut one) = (vec![0.0; n], vec![0.0; n]);
            let mut seen = Vec::new();
            let mut got = DMatrix::zeros(active.len(), n);
            Constraint::for_each_gradient(&cs, &active, &model, &st, &mut sc, &mut row, |k, g| {
                seen.push(k);
                got.row_mut(k).iter_mut().zip(g).for_each(|(o, g)| *o = *g);
            });
            assert_eq!(seen, (0..active.len()).collect::<Vec<_>>());
            for (k, &i) in active.iter().enumerate() {
                cs[i].gradient(&model, &st, &mut sc, &mut one);
                for j in 0..n {
                    assert_eq!(got[(k, j)], one[j] + 0.0, "seed {seed}: row {k} (constraint {i}), column {j}");
                }
            }
        }
    }
}
