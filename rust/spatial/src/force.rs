//! Spatial force vectors (wrenches, momenta).

use crate::{skew, Matrix6, Vector3, Vector6};

/// A spatial force vector `f = [f; n]` in F⁶: force, then moment about the frame origin.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Force {
    /// Linear force `f`.
    pub linear: Vector3<f64>,
    /// Moment about the frame origin `n`.
    pub angular: Vector3<f64>,
}

impl Force {
    /// The cross-bar operator of Singh, Russell & Wensing (2023, Table I):
    /// the 6×6 matrix `f ×̄*` with `(f ×̄*)·m = m ×* f` for every motion `m`.
    /// In our `[linear; angular]` order it is `[[0, -f×], [-f×, -n×]]`.
    #[must_use]
    pub fn cross_bar_matrix(&self) -> Matrix6<f64> {
        let mut x = Matrix6::zeros();
        let fx = skew(&self.linear);
        x.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-fx));
        x.fixed_view_mut::<3, 3>(3, 0).copy_from(&(-fx));
        x.fixed_view_mut::<3, 3>(3, 3).copy_from(&(-skew(&self.angular)));
        x
    }
}

crate::impl_spatial_vector!(Force);

#[cfg(test)]
mod tests {
    use crate::testutil::*;

    #[test]
    fn cross_bar_swaps_arguments_of_force_cross() {
        let mut r = rng(2);
        for _ in 0..20 {
            let (m, f) = (motion(&mut r), force(&mut r));
            let lhs = f.cross_bar_matrix() * m.to_vector();
            assert!((lhs - m.cross_force(&f).to_vector()).norm() < 1e-14);
            // f ×̄* m = crf(m) f: one bilinear map read from either argument.
            assert!((lhs - m.cross_force_matrix() * f.to_vector()).norm() < 1e-14);
        }
    }
}
