//! Rigid-body spatial inertia, stored as 10 numbers (mass, centre of mass, rotational inertia).

use crate::{skew, Force, Matrix3, Matrix6, Motion, Se3, Vector3};
use std::ops::Add;

/// Spatial inertia of a rigid body expressed in some frame *F*.
///
/// `I·m = [m (v − c×ω); I_c ω + c × m (v − c×ω)]`, i.e. the 6×6 matrix
/// `[[m 1, −m c×], [m c×, I_c − m c× c×]]` (Featherstone 2008, eq. 2.63, blocks swapped).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Inertia {
    /// Mass `m` (kg).
    pub mass: f64,
    /// Centre of mass `c` in *F*.
    pub com: Vector3<f64>,
    /// Rotational inertia about the centre of mass, axes of *F*, symmetric.
    pub rot_inertia: Matrix3<f64>,
}

impl Default for Inertia {
    fn default() -> Self {
        Self::zero()
    }
}

impl Inertia {
    #[inline]
    #[must_use]
    pub fn new(mass: f64, com: Vector3<f64>, rot_inertia: Matrix3<f64>) -> Self {
        Self { mass, com, rot_inertia }
    }

    #[inline]
    #[must_use]
    pub fn zero() -> Self {
        Self::new(0.0, Vector3::zeros(), Matrix3::zeros())
    }

    /// Momentum `I·m` of a body moving with twist `m`.
    #[inline]
    #[must_use]
    pub fn mul_motion(&self, m: &Motion) -> Force {
        let lin = (m.linear - self.com.cross(&m.angular)) * self.mass;
        Force::new(lin, self.rot_inertia * m.angular + self.com.cross(&lin))
    }

    /// Kinetic energy `½ mᵀ I m`.
    #[inline]
    #[must_use]
    pub fn kinetic_energy(&self, m: &Motion) -> f64 {
        0.5 * m.dot(&self.mul_motion(m))
    }

    /// The same body expressed in the parent frame: `aMb · I_b = Ad⁻ᵀ I_b Ad⁻¹`.
    #[inline(always)]
    #[must_use]
    pub fn transformed(&self, m: &Se3) -> Inertia {
        Inertia::new(self.mass, m.act_point(&self.com), m.rotation * self.rot_inertia * m.rotation.transpose())
    }

    /// The 6×6 matrix of the inertia. Always inlined: a call returns its 288 bytes through
    /// memory, which the hot loops that store it into a workspace would copy once more.
    #[inline(always)]
    #[must_use]
    pub fn to_matrix(&self) -> Matrix6<f64> {
        let cx = skew(&self.com);
        let mut x = Matrix6::zeros();
        x.fixed_view_mut::<3, 3>(0, 0).copy_from(&(Matrix3::identity() * self.mass));
        x.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-cx * self.mass));
        x.fixed_view_mut::<3, 3>(3, 0).copy_from(&(cx * self.mass));
        x.fixed_view_mut::<3, 3>(3, 3).copy_from(&(self.rot_inertia - cx * cx * self.mass));
        x
    }

    /// Whether the inertia is physically valid: `m ≥ 0`, `I_c` symmetric positive
    /// semi-definite and satisfying the triangle inequalities on its principal moments.
    #[must_use]
    pub fn is_physical(&self, tol: f64) -> bool {
        let sym = (self.rot_inertia - self.rot_inertia.transpose()).abs().max() <= tol;
        let eig = self.rot_inertia.symmetric_eigenvalues();
        let (a, b, c) = (eig[0], eig[1], eig[2]);
        self.mass >= 0.0 && self.mass.is_finite() && sym && a >= -tol && b >= -tol && c >= -tol && a + b >= c - tol && b + c >= a - tol && a + c >= b - tol
    }
}

/// Lumping two bodies rigidly attached in the same frame (parallel-axis theorem):
/// `m = m₁ + m₂`, `c = (m₁c₁ + m₂c₂)/m`, `I_c = Σ I_k + m_k (|d_k|² 1 − d_k d_kᵀ)` with
/// `d_k = c_k − c`; since `d₁ = (m₂/m) d`, `d₂ = −(m₁/m) d` for `d = c₁ − c₂`, the two shifts
/// sum to `(m₁m₂/m)(|d|² 1 − d dᵀ)`: one reciprocal and one outer product (the composite
/// inertias of CRBA and the centroidal algorithms are chains of these sums, so the latency of
/// three divisions per sum showed in CRBA's time).
impl Add for Inertia {
    type Output = Inertia;
    fn add(self, o: Inertia) -> Inertia {
        let mass = self.mass + o.mass;
        if mass <= 0.0 {
            return Inertia::zero();
        }
        let inv = 1.0 / mass;
        let com = self.com * (self.mass * inv) + o.com * (o.mass * inv);
        let d = self.com - o.com;
        let shift = (Matrix3::identity() * d.norm_squared() - d * d.transpose()) * (self.mass * o.mass * inv);
        Inertia::new(mass, com, self.rot_inertia + o.rot_inertia + shift)
    }
}

/// A spatial inertia stored by its moments about the origin of its frame *F*: mass `m`,
/// first moment `h = m c` and rotational inertia about the origin
/// `I_O = I_c + m (|c|² 1 − c cᵀ)` (parallel-axis theorem), i.e. the 6×6 matrix
/// `[[m 1, −h×], [h×, I_O]]` (Featherstone 2008, eq. 2.63 with `I_O = I_c − m c×c×`, blocks
/// swapped). The three moments are additive, so inertias of bodies expressed in one frame
/// sum entry by entry — no reciprocal and no outer product per sum, unlike [`Inertia`]'s
/// `+`: the form for the composite inertias of CRBA-like backward sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OriginInertia {
    /// Mass `m` (kg).
    pub mass: f64,
    /// First moment of mass `h = m c` about the origin of *F*.
    pub first_moment: Vector3<f64>,
    /// Rotational inertia about the origin of *F*, axes of *F*, symmetric.
    pub rot_inertia: Matrix3<f64>,
}

impl Default for OriginInertia {
    fn default() -> Self {
        Self::zero()
    }
}

impl OriginInertia {
    #[inline]
    #[must_use]
    pub fn zero() -> Self {
        Self { mass: 0.0, first_moment: Vector3::zeros(), rot_inertia: Matrix3::zeros() }
    }

    /// The inertia `i` of a body given in frame *b*, placed by `m = aMb`, about the origin
    /// of *a*: with `c = R c_b + p`, `h = m c` and `I_O = R I_c Rᵀ + (h·c) 1 − h cᵀ`.
    #[inline]
    #[must_use]
    pub fn placed(i: &Inertia, m: &Se3) -> Self {
        let c = m.act_point(&i.com);
        let h = c * i.mass;
        let shift = Matrix3::from_diagonal_element(h.dot(&c)) - h * c.transpose();
        Self { mass: i.mass, first_moment: h, rot_inertia: m.rotation * i.rot_inertia * m.rotation.transpose() + shift }
    }

    /// Momentum `[m v − h × ω; h × v + I_O ω]` of a body moving with twist `m = [v; ω]`.
    #[inline]
    #[must_use]
    pub fn mul_motion(&self, m: &Motion) -> Force {
        let h = &self.first_moment;
        Force::new(m.linear * self.mass - h.cross(&m.angular), h.cross(&m.linear) + self.rot_inertia * m.angular)
    }

    /// The 6×6 matrix of the inertia.
    #[must_use]
    pub fn to_matrix(&self) -> Matrix6<f64> {
        let hx = skew(&self.first_moment);
        let mut x = Matrix6::zeros();
        x.fixed_view_mut::<3, 3>(0, 0).copy_from(&(Matrix3::identity() * self.mass));
        x.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-hx));
        x.fixed_view_mut::<3, 3>(3, 0).copy_from(&hx);
        x.fixed_view_mut::<3, 3>(3, 3).copy_from(&self.rot_inertia);
        x
    }
}

/// Bodies in one frame: the moments add.
impl std::ops::AddAssign for OriginInertia {
    #[inline]
    fn add_assign(&mut self, o: OriginInertia) {
        self.mass += o.mass;
        self.first_moment += o.first_moment;
        self.rot_inertia += o.rot_inertia;
    }
}

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::OriginInertia;

    #[test]
    fn matrix_form_agrees_and_transforms_congruently() {
        let mut r = rng(7);
        for _ in 0..20 {
            let (i, m, x) = (inertia(&mut r), motion(&mut r), se3(&mut r));
            assert!(i.is_physical(1e-12));
            let mat = i.to_matrix();
            assert!((mat * m.to_vector() - i.mul_motion(&m).to_vector()).norm() < 1e-12);
            assert_close6(&mat, &mat.transpose(), 1e-13);
            assert!(mat.cholesky().is_some());
            let expected = x.dual_action_matrix() * mat * x.inverse().action_matrix();
            assert_close6(&i.transformed(&x).to_matrix(), &expected, 1e-12);
            let j = inertia(&mut r);
            assert_close6(&(i + j).to_matrix(), &(mat + j.to_matrix()), 1e-12);
            let mut o = OriginInertia::placed(&i, &x);
            assert_close6(&o.to_matrix(), &expected, 1e-12);
            assert!((o.mul_motion(&m).to_vector() - expected * m.to_vector()).norm() < 1e-12);
            o += OriginInertia::placed(&j, &x);
            assert_close6(&o.to_matrix(), &(i + j).transformed(&x).to_matrix(), 1e-12);
            assert!((i.kinetic_energy(&m) - 0.5 * m.to_vector().dot(&(mat * m.to_vector()))).abs() < 1e-12);
        }
    }
}
