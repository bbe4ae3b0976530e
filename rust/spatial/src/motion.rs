//! Spatial motion vectors (twists, spatial velocities and accelerations).

use crate::{skew, Force, Matrix6, Vector3, Vector6};

/// A spatial motion vector `m = [v; ω]` in M⁶ (linear part first, see the crate docs).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Motion {
    /// Linear velocity of the frame origin, `v`.
    pub linear: Vector3<f64>,
    /// Angular velocity, `ω`.
    pub angular: Vector3<f64>,
}

impl Motion {
    /// Motion cross product `self ×ₘ m = [ω×v_m + v×ω_m; ω×ω_m]` (Featherstone 2008, eq. 2.31).
    #[inline]
    #[must_use]
    pub fn cross_motion(&self, m: &Motion) -> Motion {
        Motion::new(self.angular.cross(&m.linear) + self.linear.cross(&m.angular), self.angular.cross(&m.angular))
    }

    /// Force cross product `self ×* f = [ω×f; ω×n + v×f]` (Featherstone 2008, eq. 2.32).
    #[inline]
    #[must_use]
    pub fn cross_force(&self, f: &Force) -> Force {
        Force::new(self.angular.cross(&f.linear), self.angular.cross(&f.angular) + self.linear.cross(&f.linear))
    }

    /// Power pairing `⟨m, f⟩ = v·f + ω·n`.
    #[inline]
    #[must_use]
    pub fn dot(&self, f: &Force) -> f64 {
        self.linear.dot(&f.linear) + self.angular.dot(&f.angular)
    }

    /// The 6×6 matrix `crm(m)` with `crm(m)·x = m ×ₘ x`: `[[ω×, v×], [0, ω×]]`.
    #[must_use]
    pub fn cross_motion_matrix(&self) -> Matrix6<f64> {
        let mut x = Matrix6::zeros();
        let w = skew(&self.angular);
        x.fixed_view_mut::<3, 3>(0, 0).copy_from(&w);
        x.fixed_view_mut::<3, 3>(3, 3).copy_from(&w);
        x.fixed_view_mut::<3, 3>(0, 3).copy_from(&skew(&self.linear));
        x
    }

    /// The 6×6 matrix `crf(m)` with `crf(m)·f = m ×* f`; equals `-crm(m)ᵀ`.
    #[must_use]
    pub fn cross_force_matrix(&self) -> Matrix6<f64> {
        -self.cross_motion_matrix().transpose()
    }

    /// The product `crf(m)·X = (m ×*) X`, each column of `X` taken as a force: six force cross
    /// products (108 multiplications) instead of a dense 6×6 product (216). Always inlined,
    /// like [`crate::Inertia::transformed`]: as calls from the Python extension's ∂RNEA they
    /// added 1.3 % instructions that a Rust binary's inlined copy does not run.
    #[inline(always)]
    #[must_use]
    pub fn cross_force_mul(&self, x: &Matrix6<f64>) -> Matrix6<f64> {
        let mut out = Matrix6::zeros();
        for k in 0..6 {
            let c = x.column(k);
            let f = Force::new(Vector3::new(c[0], c[1], c[2]), Vector3::new(c[3], c[4], c[5]));
            out.set_column(k, &self.cross_force(&f).to_vector());
        }
        out
    }
}

crate::impl_spatial_vector!(Motion);

#[cfg(test)]
mod tests {
    use crate::testutil::*;
    use crate::Matrix6;

    #[test]
    fn cross_matrices_match_products_and_duality() {
        let mut r = rng(1);
        for _ in 0..20 {
            let (a, b, f) = (motion(&mut r), motion(&mut r), force(&mut r));
            let x = a.cross_motion_matrix() * b.to_vector();
            assert!((x - a.cross_motion(&b).to_vector()).norm() < 1e-14);
            let y = a.cross_force_matrix() * f.to_vector();
            assert!((y - a.cross_force(&f).to_vector()).norm() < 1e-14);
            let x = Matrix6::from_fn(|i, j| (i as f64 - 2.5) * f.to_vector()[j] + b.to_vector()[i]);
            assert_close6(&a.cross_force_mul(&x), &(a.cross_force_matrix() * x), 1e-13);
            // (v×)ᵀ = -(v×*)
            assert_close6(&a.cross_motion_matrix().transpose(), &(-a.cross_force_matrix()), 0.0);
            // v × v = 0 and ⟨a×b, f⟩ = -⟨b, a×*f⟩
            assert!(a.cross_motion(&a).to_vector().norm() < 1e-15);
            assert!((a.cross_motion(&b).dot(&f) + b.dot(&a.cross_force(&f))).abs() < 1e-14);
        }
    }
}
