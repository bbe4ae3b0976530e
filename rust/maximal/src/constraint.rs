//! Joints as equality constraints built from one translational and one rotational primitive
//! (Brüdigam et al. 2023, Appendix B), with analytic Jacobians.
//!
//! A joint connects a parent body *a* (or the world) to a child body *b*. Each side carries a
//! joint frame: `(R_aj, p_aj)` in *a*'s maximal (centre-of-mass) frame, `(R_bj, p_bj)` in *b*'s.
//! With `r = x_b + R_b p_bj − x_a − R_a p_aj` (child joint origin minus parent joint origin) the
//! two primitives are
//! $$g_T = (R_a R_{aj})^\top r, \qquad g_R = \operatorname{vec}(q_r),\quad q_r = q_{aj}^{-1}\otimes q_a^{-1}\otimes q_b\otimes q_{bj},$$
//! the child joint frame's origin and orientation seen from the parent joint frame (for the
//! world, `x_a = 0`, `R_a = 1`). A joint keeps the rows `Dᵀg` selected by its kind
//! (the papers' `D_T`, `D_R`): all three, the two rows orthogonal to an axis (motion along /
//! about the axis stays free) or the one row along a plane normal.
//!
//! **Jacobians** in the tangent directions of [`crate::body`] (`δx` world, `δθ` body, full
//! angle), with `q_r = [q_s; q_v]`:
//! * `∂g_T/∂x_a = −(R_aR_aj)ᵀ`, `∂g_T/∂x_b = (R_aR_aj)ᵀ`,
//!   `∂g_T/∂θ_a = R_ajᵀ [(R_aᵀ r + p_aj)×]`, `∂g_T/∂θ_b = −(R_aR_aj)ᵀ R_b [p_bj×]`;
//! * `∂g_R/∂θ_b = ½ (q_s 1 + q_v×) R_bjᵀ`, `∂g_R/∂θ_a = −½ (q_s 1 − q_v×) R_ajᵀ`, no `x` terms.
//!
//! (Our derivation, the digest's §4 in full-angle units; every block is checked against central
//! differences in the tests.) The rotational rows vanish for `q_r = ±1` alike, so the double
//! cover needs no sign convention.

use crate::body::Pose;
use nalgebra::{Matrix3, Matrix6, UnitQuaternion, Vector3};
use vidyn_spatial::{skew, Se3};

/// Maximal number of rows of one joint.
pub const MAX_ROWS: usize = 6;

/// The kinds of joints, as (translational, rotational) constraint primitives. Axes and normals
/// are unit vectors in the joint frame. Rows: fixed 6, revolute 5, prismatic 5, cylindrical 4,
/// spherical 3, planar 3, point-on-line 2, point-on-plane 1, floating 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JointKind {
    /// No relative motion.
    Fixed,
    /// Rotation about `axis`.
    Revolute { axis: Vector3<f64> },
    /// Translation along `axis`.
    Prismatic { axis: Vector3<f64> },
    /// Rotation about and translation along `axis`.
    Cylindrical { axis: Vector3<f64> },
    /// Free rotation about the common origin (ball joint).
    Spherical,
    /// Translation in the plane normal to `normal` and rotation about it.
    Planar { normal: Vector3<f64> },
    /// The child origin stays on the parent's line through the origin along `axis`; free
    /// orientation (the papers' "cylindrical, free orientation").
    PointOnLine { axis: Vector3<f64> },
    /// The child origin stays in the parent's plane normal to `normal`; free orientation.
    PointOnPlane { normal: Vector3<f64> },
    /// No constraint (a floating base kept only for its actuation).
    Floating,
}

impl JointKind {
    /// Short name of the kind.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            JointKind::Fixed => "fixed",
            JointKind::Revolute { .. } => "revolute",
            JointKind::Prismatic { .. } => "prismatic",
            JointKind::Cylindrical { .. } => "cylindrical",
            JointKind::Spherical => "spherical",
            JointKind::Planar { .. } => "planar",
            JointKind::PointOnLine { .. } => "point_on_line",
            JointKind::PointOnPlane { .. } => "point_on_plane",
            JointKind::Floating => "floating",
        }
    }

    /// The selected rows: (translational row directions, rotational row directions), each a
    /// list of unit vectors in the joint frame.
    fn rows(&self) -> (Vec<Vector3<f64>>, Vec<Vector3<f64>>) {
        let all = vec![Vector3::x(), Vector3::y(), Vector3::z()];
        let ortho = |a: &Vector3<f64>| {
            let (u, w) = orthonormal_complement(a);
            vec![u, w]
        };
        match self {
            JointKind::Fixed => (all.clone(), all),
            JointKind::Revolute { axis } => (all, ortho(axis)),
            JointKind::Prismatic { axis } => (ortho(axis), all),
            JointKind::Cylindrical { axis } => (ortho(axis), ortho(axis)),
            JointKind::Spherical => (all, vec![]),
            JointKind::Planar { normal } => (vec![*normal], ortho(normal)),
            JointKind::PointOnLine { axis } => (ortho(axis), vec![]),
            JointKind::PointOnPlane { normal } => (vec![*normal], vec![]),
            JointKind::Floating => (vec![], vec![]),
        }
    }

    /// The axis or normal, if the kind has one.
    #[must_use]
    pub fn axis(&self) -> Option<Vector3<f64>> {
        match self {
            JointKind::Revolute { axis } | JointKind::Prismatic { axis } | JointKind::Cylindrical { axis } | JointKind::PointOnLine { axis } => Some(*axis),
            JointKind::Planar { normal } | JointKind::PointOnPlane { normal } => Some(*normal),
            _ => None,
        }
    }
}

/// Two unit vectors completing the unit vector `a` to a right-handed orthonormal basis
/// `(u, w, a)`; deterministic (built from the coordinate axis least aligned with `a`).
#[must_use]
pub fn orthonormal_complement(a: &Vector3<f64>) -> (Vector3<f64>, Vector3<f64>) {
    let k = (0..3).min_by(|&i, &j| a[i].abs().total_cmp(&a[j].abs())).unwrap_or(0);
    let u = a.cross(&Vector3::ith(k, 1.0)).normalize();
    (u, a.cross(&u))
}

/// A joint frame rigidly attached to a body (or the world): rotation and origin in the body's
/// maximal frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointFrame {
    pub rotation: Matrix3<f64>,
    pub quaternion: UnitQuaternion<f64>,
    pub origin: Vector3<f64>,
}

impl JointFrame {
    #[must_use]
    pub fn new(placement: &Se3) -> Self {
        let quaternion = UnitQuaternion::from_matrix(&placement.rotation);
        Self { rotation: quaternion.to_rotation_matrix().into_inner(), quaternion, origin: placement.translation }
    }
}

/// An equality constraint `Dᵀ g(z_a, z_b) = 0` between a parent (or the world) and a child.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub kind: JointKind,
    pub parent_frame: JointFrame,
    pub child_frame: JointFrame,
    t_rows: [Vector3<f64>; 3],
    nt: usize,
    r_rows: [Vector3<f64>; 3],
    nr: usize,
}

/// Relative geometry of the two joint frames.
#[derive(Clone, Copy, Debug)]
pub struct Relative {
    /// `r = x_b + R_b p_bj − x_a − R_a p_aj` (world).
    pub r: Vector3<f64>,
    /// `g_T = (R_a R_aj)ᵀ r`.
    pub gt: Vector3<f64>,
    /// `q_r = q_aj⁻¹ q_a⁻¹ q_b q_bj`.
    pub qr: UnitQuaternion<f64>,
}

impl Constraint {
    /// A constraint of `kind` between joint frames `parent` (in the parent's maximal frame, or
    /// the world) and `child` (in the child's maximal frame).
    #[must_use]
    pub fn new(kind: JointKind, parent: &Se3, child: &Se3) -> Self {
        let (t, r) = kind.rows();
        let mut t_rows = [Vector3::zeros(); 3];
        let mut r_rows = [Vector3::zeros(); 3];
        t_rows[..t.len()].copy_from_slice(&t);
        r_rows[..r.len()].copy_from_slice(&r);
        Self { kind, parent_frame: JointFrame::new(parent), child_frame: JointFrame::new(child), t_rows, nt: t.len(), r_rows, nr: r.len() }
    }

    /// Number of constraint rows `m`.
    #[inline]
    #[must_use]
    pub fn rows(&self) -> usize {
        self.nt + self.nr
    }

    /// The relative geometry of the joint frames; `a = None` is the world.
    #[inline]
    #[must_use]
    pub fn relative(&self, a: Option<&Pose>, b: &Pose) -> Relative {
        let (pf, cf) = (&self.parent_frame, &self.child_frame);
        let child_origin = b.point(&cf.origin);
        let (r, ra, qa) = match a {
            Some(a) => (child_origin - a.point(&pf.origin), a.rotation() * pf.rotation, a.q * pf.quaternion),
            None => (child_origin - pf.origin, pf.rotation, pf.quaternion),
        };
        Relative { r, gt: ra.transpose() * r, qr: qa.inverse() * b.q * cf.quaternion }
    }

    /// Constraint value `g` (first `m` entries of the returned vector; the rest are zero).
    #[inline]
    #[must_use]
    pub fn value(&self, a: Option<&Pose>, b: &Pose) -> [f64; MAX_ROWS] {
        let rel = self.relative(a, b);
        let mut g = [0.0; MAX_ROWS];
        let qv = rel.qr.imag();
        for i in 0..self.nt {
            g[i] = self.t_rows[i].dot(&rel.gt);
        }
        for i in 0..self.nr {
            g[self.nt + i] = self.r_rows[i].dot(&qv);
        }
        g
    }

    /// Jacobians `∂g/∂z_a` and `∂g/∂z_b` (rows `0..m`, zero below; columns `[δx; δθ]`). The
    /// parent block is zero for the world.
    #[must_use]
    pub fn jacobians(&self, a: Option<&Pose>, b: &Pose) -> (Matrix6<f64>, Matrix6<f64>) {
        let (pf, cf) = (&self.parent_frame, &self.child_frame);
        let rel = self.relative(a, b);
        let (ra, ra_full) = match a {
            Some(a) => {
                let r = a.rotation();
                (r, r * pf.rotation)
            }
            None => (Matrix3::identity(), pf.rotation),
        };
        let rb = b.rotation();
        let rat = ra_full.transpose();
        // translational primitive
        let dt_xb = rat;
        let dt_tb = -(rat * rb * skew(&cf.origin));
        let dt_xa = -rat;
        let dt_ta = pf.rotation.transpose() * skew(&(ra.transpose() * rel.r + pf.origin));
        // rotational primitive
        let (qs, qv) = (rel.qr.w, rel.qr.imag());
        let dr_tb = (Matrix3::identity() * qs + skew(&qv)) * cf.rotation.transpose() * 0.5;
        let dr_ta = -((Matrix3::identity() * qs - skew(&qv)) * pf.rotation.transpose() * 0.5);
        let (mut ja, mut jb) = (Matrix6::zeros(), Matrix6::zeros());
        for i in 0..self.nt {
            let d = self.t_rows[i].transpose();
            jb.fixed_view_mut::<1, 3>(i, 0).copy_from(&(d * dt_xb));
            jb.fixed_view_mut::<1, 3>(i, 3).copy_from(&(d * dt_tb));
            ja.fixed_view_mut::<1, 3>(i, 0).copy_from(&(d * dt_xa));
            ja.fixed_view_mut::<1, 3>(i, 3).copy_from(&(d * dt_ta));
        }
        for i in 0..self.nr {
            let d = self.r_rows[i].transpose();
            jb.fixed_view_mut::<1, 3>(self.nt + i, 3).copy_from(&(d * dr_tb));
            ja.fixed_view_mut::<1, 3>(self.nt + i, 3).copy_from(&(d * dr_ta));
        }
        if a.is_none() {
            ja.fill(0.0);
        }
        (ja, jb)
    }

    /// Derivatives of the constraint wrenches `W_a = G_a(z)ᵀλ`, `W_b = G_b(z)ᵀλ` (rows
    /// `[δx; δθ]` as in [`Self::jacobians`]) with respect to the poses, for fixed `λ` (first
    /// `m` entries used): returns `[[∂W_a/∂z_a, ∂W_a/∂z_b], [∂W_b/∂z_a, ∂W_b/∂z_b]]`.
    ///
    /// With `μ_T = D_T λ_T`, `μ_R = D_R λ_R` the wrenches are the gradients of
    /// `φ = μ_T·g_T + μ_R·vec(q_r)`. Writing `ν = R_a R_aj μ_T`, `m_a = R_aj μ_T`,
    /// `ρ = R_aᵀ(x_b + R_b p_bj − x_a)`: `W_b = [ν; p_bj × R_bᵀν] + [0; ½R_bj(q_s μ_R − q_v×μ_R)]`,
    /// `W_a = [−ν; m_a × ρ] + [0; −½R_aj(q_s μ_R + q_v×μ_R)]`; their derivatives follow from
    /// `δR = R δθ×` and the first-order changes of `q_r` (our derivation; checked against
    /// central differences of [`Self::jacobians`] in the tests). The world has no blocks.
    #[must_use]
    pub fn wrench_jacobians(&self, a: Option<&Pose>, b: &Pose, lambda: &[f64]) -> [[Matrix6<f64>; 2]; 2] {
        let (pf, cf) = (&self.parent_frame, &self.child_frame);
        let mut mu_t = Vector3::zeros();
        for i in 0..self.nt {
            mu_t += self.t_rows[i] * lambda[i];
        }
        let mut mu_r = Vector3::zeros();
        for i in 0..self.nr {
            mu_r += self.r_rows[i] * lambda[self.nt + i];
        }
        let rel = self.relative(a, b);
        let (qs, qv) = (rel.qr.w, rel.qr.imag());
        let ra = a.map_or(Matrix3::identity(), Pose::rotation);
        let rb = b.rotation();
        let xa = a.map_or(Vector3::zeros(), |a| a.x);
        let m_a = pf.rotation * mu_t;
        let nu = ra * m_a;
        let rho = ra.transpose() * (b.point(&cf.origin) - xa);
        let (sm, sp, smu) = (skew(&m_a), skew(&cf.origin), skew(&mu_r));
        let sqv = skew(&qv);
        let mut out = [[Matrix6::zeros(); 2]; 2];
        // translational primitive
        {
            let [[aa, ab], [ba, bb]] = &mut out;
            // W_b,x = ν
            ba.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-(ra * sm)));
            // W_b,θ = p_bj × R_bᵀ ν
            bb.fixed_view_mut::<3, 3>(3, 3).copy_from(&(sp * skew(&(rb.transpose() * nu))));
            ba.fixed_view_mut::<3, 3>(3, 3).copy_from(&(-(sp * rb.transpose() * ra * sm)));
            // W_a,x = −ν
            aa.fixed_view_mut::<3, 3>(0, 3).copy_from(&(ra * sm));
            // W_a,θ = m_a × ρ
            aa.fixed_view_mut::<3, 3>(3, 0).copy_from(&(-(sm * ra.transpose())));
            aa.fixed_view_mut::<3, 3>(3, 3).copy_from(&(sm * skew(&rho)));
            ab.fixed_view_mut::<3, 3>(3, 0).copy_from(&(sm * ra.transpose()));
            ab.fixed_view_mut::<3, 3>(3, 3).copy_from(&(-(sm * ra.transpose() * rb * sp)));
        }
        // rotational primitive
        {
            let outer = mu_r * qv.transpose();
            let (rbj, raj) = (&cf.rotation, &pf.rotation);
            let bb_r = rbj * (-outer + smu * qs + smu * sqv) * rbj.transpose() * 0.25;
            let ab_r = raj * (outer + smu * qs + smu * sqv) * rbj.transpose() * 0.25;
            let ba_r = -(rbj * (-outer + smu * qs - smu * sqv) * raj.transpose() * 0.25);
            let aa_r = -(raj * (outer + smu * qs - smu * sqv) * raj.transpose() * 0.25);
            let add = |m: &mut Matrix6<f64>, x: &Matrix3<f64>| {
                let cur = m.fixed_view::<3, 3>(3, 3) + x;
                m.fixed_view_mut::<3, 3>(3, 3).copy_from(&cur);
            };
            add(&mut out[1][1], &bb_r);
            add(&mut out[0][1], &ab_r);
            add(&mut out[1][0], &ba_r);
            add(&mut out[0][0], &aa_r);
        }
        if a.is_none() {
            out[0] = [Matrix6::zeros(); 2];
            out[1][0] = Matrix6::zeros();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn v3(r: &mut ChaCha8Rng) -> Vector3<f64> {
        Vector3::new(r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0))
    }
    fn pose(r: &mut ChaCha8Rng) -> Pose {
        Pose::new(v3(r), UnitQuaternion::from_scaled_axis(v3(r) * 3.0))
    }
    fn se3(r: &mut ChaCha8Rng) -> Se3 {
        Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(v3(r) * 3.0), v3(r))
    }

    pub(crate) fn kinds(r: &mut ChaCha8Rng) -> Vec<JointKind> {
        let a = v3(r).normalize();
        vec![
            JointKind::Fixed,
            JointKind::Revolute { axis: a },
            JointKind::Prismatic { axis: a },
            JointKind::Cylindrical { axis: a },
            JointKind::Spherical,
            JointKind::Planar { normal: a },
            JointKind::PointOnLine { axis: a },
            JointKind::PointOnPlane { normal: a },
        ]
    }

    #[test]
    fn jacobians_match_central_differences() {
        // h = 1e-6: truncation ~h² ≈ 1e-12 (second derivatives O(1) at these sizes), round-off
        // ~ε|g|/h ≈ 1e-10; tolerance 1e-8.
        let h = 1e-6;
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..10 {
            for kind in kinds(&mut rng) {
                for world in [false, true] {
                    let c = Constraint::new(kind, &se3(&mut rng), &se3(&mut rng));
                    let (a, b) = (pose(&mut rng), pose(&mut rng));
                    let pa = if world { None } else { Some(&a) };
                    let (ja, jb) = c.jacobians(pa, &b);
                    for k in 0..6 {
                        let (dx, dth) = if k < 3 { (Vector3::ith(k, h), Vector3::zeros()) } else { (Vector3::zeros(), Vector3::ith(k - 3, h)) };
                        let fd = |plus: [f64; 6], minus: [f64; 6]| -> Vec<f64> { (0..6).map(|i| (plus[i] - minus[i]) / (2.0 * h)).collect() };
                        let col_b = fd(c.value(pa, &b.retract(&dx, &dth)), c.value(pa, &b.retract(&-dx, &-dth)));
                        for i in 0..6 {
                            assert!((col_b[i] - jb[(i, k)]).abs() < 1e-8, "{} b row {i} col {k}: fd {} vs {}", kind.name(), col_b[i], jb[(i, k)]);
                        }
                        if !world {
                            let (ap, am) = (a.retract(&dx, &dth), a.retract(&-dx, &-dth));
                            let col_a = fd(c.value(Some(&ap), &b), c.value(Some(&am), &b));
                            for i in 0..6 {
                                assert!((col_a[i] - ja[(i, k)]).abs() < 1e-8, "{} a row {i} col {k}: fd {} vs {}", kind.name(), col_a[i], ja[(i, k)]);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn constraints_vanish_exactly_on_their_free_motions() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for kind in kinds(&mut rng) {
            let (pa, pb) = (se3(&mut rng), se3(&mut rng));
            let c = Constraint::new(kind, &pa, &pb);
            let a = pose(&mut rng);
            // a child placed so that the joint frames coincide, then moved along the free motions
            let axis = kind.axis().unwrap_or_else(Vector3::z);
            let (free_t, free_r): (Vector3<f64>, Vector3<f64>) = match kind {
                JointKind::Fixed => (Vector3::zeros(), Vector3::zeros()),
                JointKind::Revolute { .. } => (Vector3::zeros(), axis * 2.5),
                JointKind::Prismatic { .. } => (axis * 0.7, Vector3::zeros()),
                JointKind::Cylindrical { .. } => (axis * 0.7, axis * -2.9),
                JointKind::Spherical => (Vector3::zeros(), v3(&mut rng) * 3.0),
                JointKind::Planar { .. } => (orthonormal_complement(&axis).0 * 0.4, axis * 3.1),
                JointKind::PointOnLine { .. } => (axis * -0.3, v3(&mut rng) * 3.0),
                JointKind::PointOnPlane { .. } => (orthonormal_complement(&axis).1 * 0.4, v3(&mut rng) * 3.0),
                JointKind::Floating => unreachable!(),
            };
            let joint = Se3::from_quaternion(&UnitQuaternion::from_scaled_axis(free_r), free_t);
            let world_child = Se3::from_quaternion(&a.q, a.x) * pa * joint * pb.inverse();
            let b = Pose::new(world_child.translation, UnitQuaternion::from_matrix(&world_child.rotation));
            let g = c.value(Some(&a), &b);
            assert!(g.iter().all(|x| x.abs() < 1e-14), "{}: {g:?}", kind.name());
            // and a generic perturbation violates them
            let g = c.value(Some(&a), &b.retract(&v3(&mut rng), &v3(&mut rng)));
            assert!(g[..c.rows()].iter().any(|x| x.abs() > 1e-3), "{}", kind.name());
        }
    }

    #[test]
    fn wrench_jacobians_match_central_differences() {
        // W(z) = G(z)ᵀλ from the analytic first derivatives; h = 1e-6 central differences of
        // it: truncation ~h², round-off ~ε|W|/h ≈ 1e-10; tolerance 1e-8.
        let h = 1e-6;
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..10 {
            for kind in kinds(&mut rng) {
                for world in [false, true] {
                    let c = Constraint::new(kind, &se3(&mut rng), &se3(&mut rng));
                    let (a, b) = (pose(&mut rng), pose(&mut rng));
                    let lambda: Vec<f64> = (0..6).map(|_| rng.random_range(-2.0..2.0)).collect();
                    let mut lam = nalgebra::Vector6::zeros();
                    for i in 0..c.rows() {
                        lam[i] = lambda[i];
                    }
                    let wrench = |pa: Option<&Pose>, pb: &Pose| {
                        let (ja, jb) = c.jacobians(pa, pb);
                        (ja.transpose() * lam, jb.transpose() * lam)
                    };
                    let pa = if world { None } else { Some(&a) };
                    let jac = c.wrench_jacobians(pa, &b, &lambda);
                    for side in 0..2 {
                        if world && side == 0 {
                            continue;
                        }
                        for k in 0..6 {
                            let (dx, dth) = if k < 3 { (Vector3::ith(k, h), Vector3::zeros()) } else { (Vector3::zeros(), Vector3::ith(k - 3, h)) };
                            let (plus, minus) = if side == 0 {
                                (wrench(Some(&a.retract(&dx, &dth)), &b), wrench(Some(&a.retract(&-dx, &-dth)), &b))
                            } else {
                                (wrench(pa, &b.retract(&dx, &dth)), wrench(pa, &b.retract(&-dx, &-dth)))
                            };
                            let fd_a = (plus.0 - minus.0) / (2.0 * h);
                            let fd_b = (plus.1 - minus.1) / (2.0 * h);
                            let ea = (fd_a - jac[0][side].column(k)).amax();
                            let eb = (fd_b - jac[1][side].column(k)).amax();
                            assert!(world || ea < 1e-8, "{} ∂W_a/∂z_{side} col {k}: {ea:e}\n{fd_a}\n{}", kind.name(), jac[0][side].column(k));
                            assert!(eb < 1e-8, "{} world={world} ∂W_b/∂z_{side} col {k}: {eb:e}\n{fd_b}\n{}", kind.name(), jac[1][side].column(k));
                        }
                    }
                }
            }
        }
    }
}
