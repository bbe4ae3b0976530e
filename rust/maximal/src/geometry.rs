//! Convex collision primitives on bodies and the signed distance between two of them, for the
//! body–body contacts of [`crate::body_contact`].
//!
//! **Shapes** ([`Shape`]): spheres, capsules (the points within `r` of a segment) and boxes
//! (centre, orientation, half extents: the URDF `<box>`). Spheres and capsules are *swept
//! spheres*: a core (a point or a segment) inflated by a radius, so the distance between two of
//! them is the distance between their cores minus both radii.
//!
//! **Signed distance** ([`proximity`]) of shapes `A`, `B` placed in the world: `φ` (negative
//! when they overlap), the unit normal `n` pointing from `B` to `A`, and witness points
//! `w_A`, `w_B` on the two surfaces with `w_A − w_B = φ n`. For swept spheres with closest core
//! points `a ∈ core A`, `b ∈ core B`: `φ = |a − b| − r_A − r_B`, `n = (a − b)/|a − b|`,
//! `w_A = a − r_A n`, `w_B = b + r_B n`. Segment–segment closest points
//! ([`closest_on_segments`]) minimise `|p₁ + s d₁ − p₂ − t d₂|²` over `[0, 1]²`; for parallel
//! segments the minimiser is not unique and the middle of the overlap of their projections is
//! taken (the point a resting capsule's normal force acts through). Sphere–box: with the
//! centre `c` in box coordinates `p = Rᵀ(c − o)` and its clamp `q` onto `[−h, h]`, outside the
//! box `φ = |p − q| − r`, `n = R (p − q)/|p − q|`; with the centre inside (`p = q`) the nearest
//! face is taken, `φ = −min_i (h_i − |p_i|) − r` with that face's outward normal — continuous,
//! but the normal jumps where two faces are equally near (the interior's medial surfaces); the
//! interior point keeps `φ ≥ 0`, so this only matters for shapes that start overlapping.
//! When the cores touch (`a = b`) the normal is undefined; `+z` is returned.
//!
//! **Gradients.** For a rigid motion of body `A` (`δx` world, `δθ` body frame, right
//! perturbation as everywhere in this crate) `δφ = nᵀδx + (p_A × Rᵀn)ᵀδθ` with `p_A` any point of
//! the normal line through the witnesses in `A`'s frame (the envelope theorem: the witness
//! points' own motion is orthogonal to `n` to first order); `B` gets the negatives.
//! [`proximity_jacobian`] gives the first derivatives of `n` and of the contact point
//! `P = (w_A + w_B)/2` for swept spheres (what the linearisation of a step needs).

use crate::body::Pose;
use nalgebra::{Matrix3, SMatrix, Vector3};
use vidyn_spatial::skew;

/// A convex collision primitive, in a body's frame (or, [`Shape::placed`], in the world).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// The ball of `radius` about `centre`.
    Sphere { centre: Vector3<f64>, radius: f64 },
    /// The points within `radius` of the segment from `a` to `b`.
    Capsule { a: Vector3<f64>, b: Vector3<f64>, radius: f64 },
    /// The box `centre + rotation · [−h, h]` with half extents `h`.
    Box { centre: Vector3<f64>, rotation: Matrix3<f64>, half_extents: Vector3<f64> },
}

impl Shape {
    /// The shape moved by the rigid transform `(R, x)`: `y ↦ x + R y`.
    #[must_use]
    pub fn transformed(&self, rotation: &Matrix3<f64>, translation: &Vector3<f64>) -> Self {
        let map = |y: &Vector3<f64>| translation + rotation * y;
        match *self {
            Self::Sphere { centre, radius } => Self::Sphere { centre: map(&centre), radius },
            Self::Capsule { a, b, radius } => Self::Capsule { a: map(&a), b: map(&b), radius },
            Self::Box { centre, rotation: r, half_extents } => Self::Box { centre: map(&centre), rotation: rotation * r, half_extents },
        }
    }

    /// The shape of a body at `pose`, in the world.
    #[must_use]
    pub fn placed(&self, pose: &Pose) -> Self {
        self.transformed(&pose.rotation(), &pose.x)
    }

    /// Core segment `(p, d)` (`d = 0` for a sphere) and radius of a swept sphere.
    fn core(&self) -> Option<(Vector3<f64>, Vector3<f64>, f64)> {
        match *self {
            Self::Sphere { centre, radius } => Some((centre, Vector3::zeros(), radius)),
            Self::Capsule { a, b, radius } => Some((a, b - a, radius)),
            Self::Box { .. } => None,
        }
    }

    /// Whether the shape's parameters are finite and its sizes non-negative.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        let finite = |v: &Vector3<f64>| v.iter().all(|x| x.is_finite());
        match self {
            Self::Sphere { centre, radius } => finite(centre) && radius.is_finite() && *radius >= 0.0,
            Self::Capsule { a, b, radius } => finite(a) && finite(b) && radius.is_finite() && *radius >= 0.0,
            Self::Box { centre, rotation, half_extents } => {
                finite(centre)
                    && half_extents.iter().all(|h| h.is_finite() && *h >= 0.0)
                    && (rotation.transpose() * rotation - Matrix3::identity()).amax() < 1e-9
                    && rotation.determinant() > 0.0
            }
        }
    }

    /// `"sphere"`, `"capsule"` or `"box"`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Sphere { .. } => "sphere",
            Self::Capsule { .. } => "capsule",
            Self::Box { .. } => "box",
        }
    }
}

/// Whether [`proximity`] handles the pair (sphere–sphere, sphere–capsule, capsule–capsule,
/// sphere–box, in either order).
#[must_use]
pub fn supported(a: &Shape, b: &Shape) -> bool {
    a.core().is_some() && b.core().is_some() || matches!((a, b), (Shape::Sphere { .. }, Shape::Box { .. }) | (Shape::Box { .. }, Shape::Sphere { .. }))
}

/// Signed distance, normal (from `B` to `A`) and surface witness points of two placed shapes
/// (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Proximity {
    pub distance: f64,
    pub normal: Vector3<f64>,
    pub point_a: Vector3<f64>,
    pub point_b: Vector3<f64>,
}

impl Proximity {
    /// The contact point `P = (w_A + w_B)/2`, where the forces of a body–body contact act.
    #[must_use]
    pub fn midpoint(&self) -> Vector3<f64> {
        (self.point_a + self.point_b) * 0.5
    }

    fn swapped(self) -> Self {
        Self { distance: self.distance, normal: -self.normal, point_a: self.point_b, point_b: self.point_a }
    }
}

/// Closest-point parameters `(s, t) ∈ [0, 1]²` of the segments `p₁ + s d₁` and `p₂ + t d₂`
/// (either may be a point, `d = 0`); parallel segments give the middle of the overlap of their
/// projections on the first (module docs).
#[must_use]
pub fn closest_on_segments(p1: &Vector3<f64>, d1: &Vector3<f64>, p2: &Vector3<f64>, d2: &Vector3<f64>) -> (f64, f64) {
    let r = p1 - p2;
    let (a, e, b) = (d1.norm_squared(), d2.norm_squared(), d1.dot(d2));
    let (c, f) = (d1.dot(&r), d2.dot(&r));
    // a segment shorter than this (relative to the other) is a point
    let tiny = 1e-24 * (1.0 + a + e);
    let clamp = |x: f64| x.clamp(0.0, 1.0);
    if a <= tiny && e <= tiny {
        return (0.0, 0.0);
    }
    if a <= tiny {
        return (0.0, clamp(f / e));
    }
    if e <= tiny {
        return (clamp(-c / a), 0.0);
    }
    let denom = a * e - b * b;
    // t of the point of segment 2 closest to p₁ + s d₁, and s back from t
    let t_of = |s: f64| clamp((b * s + f) / e);
    let s_of = |t: f64| clamp((b * t - c) / a);
    if denom <= 1e-12 * a * e {
        // parallel: segment 2's ends project to s = −c/a and (b − c)/a on segment 1
        let (s0, s1) = (-c / a, (b - c) / a);
        let (lo, hi) = (s0.min(s1).max(0.0), s0.max(s1).min(1.0));
        let s = if lo <= hi {
            0.5 * (lo + hi)
        } else if s0.max(s1) < 0.0 {
            0.0
        } else {
            1.0
        };
        let t = t_of(s);
        return (s_of(t), t);
    }
    let s = clamp((b * f - c * e) / denom);
    let t = (b * s + f) / e;
    if t < 0.0 {
        (s_of(0.0), 0.0)
    } else if t > 1.0 {
        (s_of(1.0), 1.0)
    } else {
        (s, t)
    }
}

/// Proximity of two swept spheres with cores `p + s d` and radii.
fn swept_spheres(a: (Vector3<f64>, Vector3<f64>, f64), b: (Vector3<f64>, Vector3<f64>, f64)) -> Proximity {
    let (s, t) = closest_on_segments(&a.0, &a.1, &b.0, &b.1);
    let (ca, cb) = (a.0 + a.1 * s, b.0 + b.1 * t);
    let diff = ca - cb;
    let d = diff.norm();
    let normal = if d > 0.0 { diff / d } else { Vector3::z() };
    Proximity { distance: d - a.2 - b.2, normal, point_a: ca - normal * a.2, point_b: cb + normal * b.2 }
}

/// Proximity of a sphere (`A`) and a box (`B`).
fn sphere_box(c: &Vector3<f64>, r: f64, o: &Vector3<f64>, rot: &Matrix3<f64>, h: &Vector3<f64>) -> Proximity {
    let p = rot.transpose() * (c - o);
    let q = p.zip_map(h, |x, hi| x.clamp(-hi, hi));
    let out = p - q;
    let d = out.norm();
    let (distance, local_normal, local_witness) = if d > 0.0 {
        (d - r, out / d, q)
    } else {
        // inside: the nearest face
        let depth = h - p.abs();
        let i = depth.imin();
        let sign = if p[i] >= 0.0 { 1.0 } else { -1.0 };
        let mut w = p;
        w[i] = sign * h[i];
        (-depth[i] - r, Vector3::ith(i, sign), w)
    };
    let normal = rot * local_normal;
    Proximity { distance, normal, point_a: c - normal * r, point_b: o + rot * local_witness }
}

/// The signed distance of two placed shapes (module docs); `None` for a pair that
/// [`supported`] rejects.
#[must_use]
pub fn proximity(a: &Shape, b: &Shape) -> Option<Proximity> {
    if let (Some(ca), Some(cb)) = (a.core(), b.core()) {
        return Some(swept_spheres(ca, cb));
    }
    match (*a, *b) {
        (Shape::Sphere { centre, radius }, Shape::Box { centre: o, rotation, half_extents }) => Some(sphere_box(&centre, radius, &o, &rotation, &half_extents)),
        (Shape::Box { .. }, Shape::Sphere { .. }) => proximity(b, a).map(Proximity::swapped),
        _ => None,
    }
}

/// `∂(φ)/∂(δx, δθ)` of body `A` (first 6 entries) and body `B` (last 6) at poses with centres of
/// mass `x_a`, `x_b` and rotations `r_a`, `r_b` (module docs: `[n; Rᵀ((P − x) × n)]` and its
/// negative).
#[must_use]
pub fn distance_gradient(prox: &Proximity, (x_a, r_a): (&Vector3<f64>, &Matrix3<f64>), (x_b, r_b): (&Vector3<f64>, &Matrix3<f64>)) -> SMatrix<f64, 12, 1> {
    let (n, p) = (prox.normal, prox.midpoint());
    let (ma, mb) = (r_a.transpose() * (p - x_a).cross(&n), r_b.transpose() * (p - x_b).cross(&n));
    let mut g = SMatrix::<f64, 12, 1>::zeros();
    g.fixed_rows_mut::<3>(0).copy_from(&n);
    g.fixed_rows_mut::<3>(3).copy_from(&ma);
    g.fixed_rows_mut::<3>(6).copy_from(&(-n));
    g.fixed_rows_mut::<3>(9).copy_from(&(-mb));
    g
}

/// First derivatives `(∂n, ∂P)` (3×12 each, columns `[δx_A, δθ_A, δx_B, δθ_B]`) of the normal
/// and of the contact point `P` of two shapes given in their bodies' frames (`shape_a`,
/// `shape_b`) at poses `pose_a`, `pose_b`, for the pairs [`proximity`] handles; `None` where
/// they are not defined: touching cores, parallel segments (the closest points are not locally
/// unique), a sphere centred on a box's surface. Sphere–box: the closest point on the box moves
/// with the free (unclamped) coordinates of the sphere's centre in box coordinates, the normal
/// with the clamped ones and the box's rotation (derivation at `sphere_box_jacobian`).
///
/// Swept spheres:
/// With core points `a = p_A + s d_A`, `b = p_B + t d_B` (world) and `D = a − b`: a rigid motion
/// of `A` moves `p_A` by `δx − R[p]×δθ` and `d_A` by `−R[d]×δθ`; a parameter strictly inside
/// `(0, 1)` follows from differentiating the stationarity conditions `Dᵀd_A = 0`, `Dᵀd_B = 0`
/// (a 2×2 system in `δs`, `δt`, or 1×1 when one is clamped), a clamped one is fixed. Then
/// `δn = (I − nnᵀ) δD/|D|` and `δP = (δa + δb)/2 + (r_B − r_A) δn/2`.
#[must_use]
pub fn proximity_jacobian(shape_a: &Shape, pose_a: &Pose, shape_b: &Shape, pose_b: &Pose) -> Option<(SMatrix<f64, 3, 12>, SMatrix<f64, 3, 12>)> {
    match (shape_a, shape_b) {
        (Shape::Sphere { .. }, Shape::Box { .. }) => return sphere_box_jacobian(shape_a, pose_a, shape_b, pose_b),
        (Shape::Box { .. }, Shape::Sphere { .. }) => {
            // the sphere's frame: n flips, P stays; columns swap bodies
            let (jn, jp) = sphere_box_jacobian(shape_b, pose_b, shape_a, pose_a)?;
            let swap = |j: &SMatrix<f64, 3, 12>| {
                let mut out = SMatrix::<f64, 3, 12>::zeros();
                out.fixed_columns_mut::<6>(0).copy_from(&j.fixed_columns::<6>(6));
                out.fixed_columns_mut::<6>(6).copy_from(&j.fixed_columns::<6>(0));
                out
            };
            return Some((-swap(&jn), swap(&jp)));
        }
        _ => {}
    }
    let ((pa, da, ra), (pb, db, rb)) = (shape_a.core()?, shape_b.core()?);
    let (rot_a, rot_b) = (pose_a.rotation(), pose_b.rotation());
    let (wa, wda) = (pose_a.point(&pa), rot_a * da);
    let (wb, wdb) = (pose_b.point(&pb), rot_b * db);
    let (s, t) = closest_on_segments(&wa, &wda, &wb, &wdb);
    let free = |x: f64, d: &Vector3<f64>| x > 0.0 && x < 1.0 && d.norm_squared() > 0.0;
    let (fs, ft) = (free(s, &wda), free(t, &wdb));
    if fs && ft && (wda.norm_squared() * wdb.norm_squared() - wda.dot(&wdb).powi(2)) <= 1e-12 * wda.norm_squared() * wdb.norm_squared() {
        return None;
    }
    let diff = (wa + wda * s) - (wb + wdb * t);
    let dist = diff.norm();
    if dist == 0.0 {
        return None;
    }
    // derivatives at fixed parameters: of p_A + s d_A and of d_A (and for B)
    let mut j_a = SMatrix::<f64, 3, 12>::zeros();
    let mut j_da = SMatrix::<f64, 3, 12>::zeros();
    let mut j_b = SMatrix::<f64, 3, 12>::zeros();
    let mut j_db = SMatrix::<f64, 3, 12>::zeros();
    j_a.fixed_view_mut::<3, 3>(0, 0).copy_from(&Matrix3::identity());
    j_a.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-rot_a * skew(&(pa + da * s))));
    j_da.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-rot_a * skew(&da)));
    j_b.fixed_view_mut::<3, 3>(0, 6).copy_from(&Matrix3::identity());
    j_b.fixed_view_mut::<3, 3>(0, 9).copy_from(&(-rot_b * skew(&(pb + db * t))));
    j_db.fixed_view_mut::<3, 3>(0, 9).copy_from(&(-rot_b * skew(&db)));
    // δD at fixed parameters, then the parameters' motion: stationarity of the free ones,
    // rows Dᵀd_A = 0 (if s free), Dᵀd_B = 0 (if t free): (δD + d_A δs − d_B δt)ᵀ d + Dᵀδd = 0
    let j_d0 = j_a - j_b;
    let rows: [(bool, &Vector3<f64>, &SMatrix<f64, 3, 12>); 2] = [(fs, &wda, &j_da), (ft, &wdb, &j_db)];
    let mut m = nalgebra::Matrix2::<f64>::identity();
    let mut rhs = SMatrix::<f64, 2, 12>::zeros();
    for (i, (active, d, jd)) in rows.iter().enumerate() {
        if !active {
            continue;
        }
        m[(i, 0)] = if fs { d.dot(&wda) } else { 0.0 };
        m[(i, 1)] = if ft { -d.dot(&wdb) } else { 0.0 };
        let r = -(d.transpose() * j_d0 + diff.transpose() * *jd);
        rhs.set_row(i, &r);
    }
    let params = m.try_inverse()? * rhs;
    let (ds, dt) = (params.row(0), params.row(1));
    let j_ca = j_a + wda * ds;
    let j_cb = j_b + wdb * dt;
    let n = diff / dist;
    let j_n = (Matrix3::identity() - n * n.transpose()) * (j_ca - j_cb) / dist;
    let j_p = (j_ca + j_cb) * 0.5 + j_n * (0.5 * (rb - ra));
    Some((j_n, j_p))
}

/// [`proximity_jacobian`] of a sphere (`A`, centre `c_A` in its body) and a box (`B`, centre
/// `o_B`, axes `R_box` in its body). With `c = x_A + R_A c_A`, `o = x_B + R_B o_B`,
/// `R = R_B R_box`, the box's world rotation rate `ω = R_B δθ_B` and the centre in box
/// coordinates `p = Rᵀ(c − o)`: `δp = Rᵀ([c − o]× ω + δc − δo)`. Outside the box the clamp
/// `q = S p + (I − S) q₀` keeps the free coordinates (`S`, inside `[−h, h]`), so
/// `d = (I − S)(p − q₀)`, `n = R d/|d|`: `δn = −[n]× ω + R (I − n̂n̂ᵀ)(I − S) δp/|d|`, and the
/// witness on the box `w_B = o + R q`: `δw_B = δo − [R q]× ω + R S δp`. Inside, the nearest
/// face's normal only turns with the box, `δn = −[n]× ω`, and `w_B` is `p` moved onto that face
/// (`S` all but the face's axis). `w_A = c − r n`, `P = (w_A + w_B)/2`.
fn sphere_box_jacobian(sphere: &Shape, pose_a: &Pose, bx: &Shape, pose_b: &Pose) -> Option<(SMatrix<f64, 3, 12>, SMatrix<f64, 3, 12>)> {
    type Jac = SMatrix<f64, 3, 12>;
    let (Shape::Sphere { centre: ca, radius }, Shape::Box { centre: ob, rotation: rbox, half_extents: h }) = (*sphere, *bx) else {
        return None;
    };
    let (rot_a, rot_b) = (pose_a.rotation(), pose_b.rotation());
    let (c, o, r) = (pose_a.point(&ca), pose_b.point(&ob), rot_b * rbox);
    let mut jc = Jac::zeros();
    jc.fixed_view_mut::<3, 3>(0, 0).copy_from(&Matrix3::identity());
    jc.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-rot_a * skew(&ca)));
    let mut jo = Jac::zeros();
    jo.fixed_view_mut::<3, 3>(0, 6).copy_from(&Matrix3::identity());
    jo.fixed_view_mut::<3, 3>(0, 9).copy_from(&(-rot_b * skew(&ob)));
    let mut jw = Jac::zeros();
    jw.fixed_view_mut::<3, 3>(0, 9).copy_from(&rot_b);
    let p = r.transpose() * (c - o);
    let jp_local: Jac = r.transpose() * (skew(&(c - o)) * jw + jc - jo);
    let q = p.zip_map(&h, |x, hi| x.clamp(-hi, hi));
    let d = p - q;
    let dist = d.norm();
    let (free, witness, jn) = if dist > 0.0 {
        let free = Matrix3::from_diagonal(&p.zip_map(&h, |x, hi| if x.abs() < hi { 1.0 } else { 0.0 }));
        let nl = d / dist;
        let jn: Jac = -skew(&(r * nl)) * jw + r * (Matrix3::identity() - nl * nl.transpose()) * (Matrix3::identity() - free) * jp_local / dist;
        (free, q, jn)
    } else {
        let depth = h - p.abs();
        let i = depth.imin();
        if depth[i] == 0.0 {
            return None;
        }
        let sign = if p[i] >= 0.0 { 1.0 } else { -1.0 };
        let mut w = p;
        w[i] = sign * h[i];
        let mut free = Matrix3::identity();
        free[(i, i)] = 0.0;
        (free, w, -skew(&(r * Vector3::ith(i, sign))) * jw)
    };
    let jwb: Jac = jo - skew(&(r * witness)) * jw + r * free * jp_local;
    let jwa: Jac = jc - jn * radius;
    Some((jn, (jwa + jwb) * 0.5))
}
