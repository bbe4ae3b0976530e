//! Rigid placements `aMb ∈ SE(3)` and their actions on motions, forces and inertias.

use crate::{skew, Force, Matrix3, Matrix6, Motion, UnitQuaternion, Vector3};
use std::ops::Mul;

/// A placement `aMb = (R, p)`: maps coordinates of frame *b* into frame *a*, `x_a = R x_b + p`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Se3 {
    /// Rotation `aRb`.
    pub rotation: Matrix3<f64>,
    /// Origin of *b* expressed in *a*.
    pub translation: Vector3<f64>,
}

impl Default for Se3 {
    fn default() -> Self {
        Self::identity()
    }
}

impl Se3 {
    #[inline]
    #[must_use]
    pub const fn new(rotation: Matrix3<f64>, translation: Vector3<f64>) -> Self {
        Self { rotation, translation }
    }

    #[inline]
    #[must_use]
    pub fn identity() -> Self {
        Self::new(Matrix3::identity(), Vector3::zeros())
    }

    /// From a unit quaternion and a translation.
    #[inline]
    #[must_use]
    pub fn from_quaternion(q: &UnitQuaternion<f64>, p: Vector3<f64>) -> Self {
        Self::new(q.to_rotation_matrix().into_inner(), p)
    }

    /// From roll-pitch-yaw (URDF `rpy`: `R = Rz(yaw) Ry(pitch) Rx(roll)`) and a translation.
    #[must_use]
    pub fn from_rpy(rpy: &Vector3<f64>, p: Vector3<f64>) -> Self {
        let r = UnitQuaternion::from_euler_angles(rpy.x, rpy.y, rpy.z);
        Self::from_quaternion(&r, p)
    }

    /// `aMb · bMc = aMc`.
    #[inline]
    #[must_use]
    pub fn compose(&self, other: &Se3) -> Se3 {
        Se3::new(self.rotation * other.rotation, self.rotation * other.translation + self.translation)
    }

    /// `aMb⁻¹ = bMa = (Rᵀ, −Rᵀp)`.
    #[inline]
    #[must_use]
    pub fn inverse(&self) -> Se3 {
        let rt = self.rotation.transpose();
        Se3::new(rt, -(rt * self.translation))
    }

    /// `aMb⁻¹ · aMc = bMc` without forming the inverse.
    #[inline]
    #[must_use]
    pub fn inv_compose(&self, other: &Se3) -> Se3 {
        let rt = self.rotation.transpose();
        Se3::new(rt * other.rotation, rt * (other.translation - self.translation))
    }

    /// Point map `x_a = R x_b + p`.
    #[inline]
    #[must_use]
    pub fn act_point(&self, x: &Vector3<f64>) -> Vector3<f64> {
        self.rotation * x + self.translation
    }

    /// Adjoint action on a motion, `Ad_M m = [R v + p×(R ω); R ω]` (Featherstone's `aXb`).
    #[inline]
    #[must_use]
    pub fn act_motion(&self, m: &Motion) -> Motion {
        let w = self.rotation * m.angular;
        Motion::new(self.rotation * m.linear + self.translation.cross(&w), w)
    }

    /// Inverse adjoint action `Ad_M⁻¹ m = [Rᵀ(v − p×ω); Rᵀω]`.
    #[inline]
    #[must_use]
    pub fn inv_act_motion(&self, m: &Motion) -> Motion {
        let rt = self.rotation.transpose();
        Motion::new(rt * (m.linear - self.translation.cross(&m.angular)), rt * m.angular)
    }

    /// Dual action on a force, `Ad_M⁻ᵀ f = [R f; R n + p×(R f)]` (Featherstone's `aX*b`).
    #[inline]
    #[must_use]
    pub fn act_force(&self, f: &Force) -> Force {
        let lin = self.rotation * f.linear;
        Force::new(lin, self.rotation * f.angular + self.translation.cross(&lin))
    }

    /// Inverse dual action `[Rᵀ f; Rᵀ(n − p×f)]`.
    #[inline]
    #[must_use]
    pub fn inv_act_force(&self, f: &Force) -> Force {
        let rt = self.rotation.transpose();
        Force::new(rt * f.linear, rt * (f.angular - self.translation.cross(&f.linear)))
    }

    /// The 6×6 adjoint `Ad_M = [[R, p×R], [0, R]]`, so that `Ad_M · m = act_motion(m)`.
    #[must_use]
    pub fn action_matrix(&self) -> Matrix6<f64> {
        let mut x = Matrix6::zeros();
        x.fixed_view_mut::<3, 3>(0, 0).copy_from(&self.rotation);
        x.fixed_view_mut::<3, 3>(3, 3).copy_from(&self.rotation);
        x.fixed_view_mut::<3, 3>(0, 3).copy_from(&(skew(&self.translation) * self.rotation));
        x
    }

    /// The 6×6 dual adjoint `Ad_M⁻ᵀ = [[R, 0], [p×R, R]]`.
    #[must_use]
    pub fn dual_action_matrix(&self) -> Matrix6<f64> {
        self.inverse().action_matrix().transpose()
    }

    /// Re-expresses an inertia-like symmetric 6×6 matrix (mapping motions to forces, e.g. an
    /// articulated-body inertia) from frame *b* to frame *a*: `X* I Xᵀ*` with `X* = Ad_M⁻ᵀ`.
    ///
    /// With `I = [[A, B], [Bᵀ, C]]` rotated blockwise (`A' = R A Rᵀ` …) and `p×` the translation,
    /// the result is `[[A', B'' ], [B''ᵀ, C' + p× B'' − B'ᵀ p×]]` where `B'' = B' − A' p×`.
    /// About 2× cheaper than the two dense 6×6 products; only the symmetric part of `I` is read.
    #[must_use]
    pub fn act_inertia_matrix(&self, i: &Matrix6<f64>) -> Matrix6<f64> {
        let r = &self.rotation;
        let a = r * i.fixed_view::<3, 3>(0, 0) * r.transpose();
        let b = r * i.fixed_view::<3, 3>(0, 3) * r.transpose();
        let c = r * i.fixed_view::<3, 3>(3, 3) * r.transpose();
        let px = skew(&self.translation);
        let b2 = b - a * px;
        let c2 = c + px * b2 - b.transpose() * px;
        let mut out = Matrix6::zeros();
        out.fixed_view_mut::<3, 3>(0, 0).copy_from(&a);
        out.fixed_view_mut::<3, 3>(0, 3).copy_from(&b2);
        out.fixed_view_mut::<3, 3>(3, 0).copy_from(&b2.transpose());
        out.fixed_view_mut::<3, 3>(3, 3).copy_from(&c2);
        out
    }

    /// Whether `R` is a rotation to within `tol` (orthonormal, det = +1).
    #[must_use]
    pub fn is_valid(&self, tol: f64) -> bool {
        let r = &self.rotation;
        (r.transpose() * r - Matrix3::identity()).abs().max() <= tol && (r.determinant() - 1.0).abs() <= tol
    }
}

impl Mul for Se3 {
    type Output = Se3;
    #[inline]
    fn mul(self, o: Se3) -> Se3 {
        self.compose(&o)
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::*;

    #[test]
    fn adjoint_identities() {
        let mut r = rng(5);
        for _ in 0..20 {
            let (a, b) = (se3(&mut r), se3(&mut r));
            let (m, f, n) = (motion(&mut r), force(&mut r), motion(&mut r));
            // Ad of a composition is the product of the adjoints
            assert_close6(&(a * b).action_matrix(), &(a.action_matrix() * b.action_matrix()), 1e-13);
            // actions agree with their matrices, inverses undo them
            assert!((a.action_matrix() * m.to_vector() - a.act_motion(&m).to_vector()).norm() < 1e-13);
            assert!((a.dual_action_matrix() * f.to_vector() - a.act_force(&f).to_vector()).norm() < 1e-13);
            assert!((a.inv_act_motion(&a.act_motion(&m)).to_vector() - m.to_vector()).norm() < 1e-13);
            assert!((a.inv_act_force(&a.act_force(&f)).to_vector() - f.to_vector()).norm() < 1e-13);
            assert_close6(&(a.inverse().action_matrix() * a.action_matrix()), &Matrix6::identity(), 1e-13);
            // power is frame invariant: ⟨Ad m, Ad* f⟩ = ⟨m, f⟩
            assert!((a.act_motion(&m).dot(&a.act_force(&f)) - m.dot(&f)).abs() < 1e-12);
            // Ad (m × n) = (Ad m) × (Ad n), and the same for ×*
            let lhs = a.act_motion(&m.cross_motion(&n));
            assert!((lhs - a.act_motion(&m).cross_motion(&a.act_motion(&n))).to_vector().norm() < 1e-12);
            let lhs = a.act_force(&m.cross_force(&f));
            assert!((lhs - a.act_motion(&m).cross_force(&a.act_force(&f))).to_vector().norm() < 1e-12);
            let im = inertia(&mut r).to_matrix();
            let expected = a.dual_action_matrix() * im * a.dual_action_matrix().transpose();
            assert_close6(&a.act_inertia_matrix(&im), &expected, 1e-12);
            let c = a.inv_compose(&b);
            assert_close6(&c.action_matrix(), &(a.inverse() * b).action_matrix(), 1e-13);
        }
    }
}
