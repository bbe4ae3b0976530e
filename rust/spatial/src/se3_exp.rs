//! Exponential and logarithm of SE(3) and their right Jacobians.
//!
//! For a twist `ξ = [ρ; ω]` (our `[linear; angular]` order), `exp(ξ) = (exp3(ω), J_l(ω) ρ)`
//! with `J_l(ω) = J_r(ω)ᵀ`. The right Jacobian of the exponential is the series
//! `J_r(ξ) = Σₖ (−ad_ξ)ᵏ/(k+1)!` with `ad_ξ = crm(ξ)`. Because `ad_ξ` satisfies
//! `ad (ad² + θ²)² = 0` (θ = |ω|), the series closes to (Barfoot 2017, eq. 7.86, sign
//! flipped for the right Jacobian)
//! `J_r = I − c₁ ad + c₂ ad² − c₃ ad³ + c₄ ad⁴` with
//! `c₁ = (4 − θ sin θ − 4 cos θ)/(2θ²)`, `c₂ = (4θ − 5 sin θ + θ cos θ)/(2θ³)`,
//! `c₃ = (2 − θ sin θ − 2 cos θ)/(2θ⁴)`, `c₄ = (2θ − 3 sin θ + θ cos θ)/(2θ⁵)`.
//! Below θ = [`SERIES_THRESHOLD`] the closed form cancels catastrophically, so the
//! truncated series (14 terms, truncation < θ¹⁴/15! · |ξ|) is summed instead.

use crate::so3::{exp3, jr3, jr3_inv, log3};
use crate::{Matrix6, Motion, Se3};

/// Rotation angle below which [`jexp6`] sums the power series.
pub const SERIES_THRESHOLD: f64 = 0.1;

/// `exp(ξ) ∈ SE(3)` of a twist `ξ = [ρ; ω]`.
#[must_use]
pub fn exp6(xi: &Motion) -> Se3 {
    let rot = exp3(&xi.angular);
    let jl = jr3(&xi.angular).transpose();
    Se3::new(rot, jl * xi.linear)
}

/// `log(M) = [J_l(ω)⁻¹ p; log3(R)]`, the inverse of [`exp6`] for rotation angles below π.
#[must_use]
pub fn log6(m: &Se3) -> Motion {
    let w = log3(&m.rotation);
    let jl_inv = jr3_inv(&w).transpose();
    Motion::new(jl_inv * m.translation, w)
}

/// Right Jacobian of `exp6`: `exp(ξ + δ) = exp(ξ) exp(J_r(ξ) δ) + O(δ²)`.
#[must_use]
pub fn jexp6(xi: &Motion) -> Matrix6<f64> {
    let theta = xi.angular.norm();
    let ad = -xi.cross_motion_matrix();
    if theta < SERIES_THRESHOLD {
        let mut sum = Matrix6::identity();
        let mut term = Matrix6::identity();
        for k in 1..15 {
            term = term * ad / (k as f64 + 1.0);
            sum += term;
        }
        return sum;
    }
    let (s, c) = crate::sin_cos(theta);
    let t2 = theta * theta;
    let c1 = (4.0 - theta * s - 4.0 * c) / (2.0 * t2);
    let c2 = (4.0 * theta - 5.0 * s + theta * c) / (2.0 * t2 * theta);
    let c3 = (2.0 - theta * s - 2.0 * c) / (2.0 * t2 * t2);
    let c4 = (2.0 * theta - 3.0 * s + theta * c) / (2.0 * t2 * t2 * theta);
    let ad2 = ad * ad;
    Matrix6::identity() + ad * c1 + ad2 * c2 + ad2 * ad * c3 + ad2 * ad2 * c4
}

/// Right Jacobian of `log6` at `M = exp(ξ)`: `log(M exp(δ)) = ξ + J_r(ξ)⁻¹ δ + O(δ²)`.
///
/// Uses the block structure `J_r = [[A, B], [0, A]]` (A = `jr3(ω)`), whose inverse is
/// `[[A⁻¹, −A⁻¹ B A⁻¹], [0, A⁻¹]]`.
#[must_use]
pub fn jlog6(m: &Se3) -> Matrix6<f64> {
    let xi = log6(m);
    let j = jexp6(&xi);
    let ainv = jr3_inv(&xi.angular);
    let b = j.fixed_view::<3, 3>(0, 3).into_owned();
    let mut out = Matrix6::zeros();
    out.fixed_view_mut::<3, 3>(0, 0).copy_from(&ainv);
    out.fixed_view_mut::<3, 3>(3, 3).copy_from(&ainv);
    out.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-(ainv * b * ainv)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use crate::Vector6;

    fn twists() -> Vec<Motion> {
        let mut r = rng(6);
        [0.0, 1e-8, 0.05, 0.2, 1.0, 2.5, 3.1].iter().map(|&t| Motion::new(vec3(&mut r) * 2.0, vec3(&mut r).normalize() * t)).collect()
    }

    fn series(xi: &Motion, terms: usize) -> Matrix6<f64> {
        let ad = -xi.cross_motion_matrix();
        let (mut sum, mut term) = (Matrix6::identity(), Matrix6::identity());
        for k in 1..terms {
            term = term * ad / (k as f64 + 1.0);
            sum += term;
        }
        sum
    }

    #[test]
    fn exp_log_roundtrip() {
        for xi in twists() {
            let m = exp6(&xi);
            assert!(m.is_valid(1e-13));
            assert!((log6(&m) - xi).to_vector().norm() < 1e-9);
            let back = exp6(&log6(&m));
            assert_close6(&back.action_matrix(), &m.action_matrix(), 1e-12);
        }
    }

    #[test]
    fn closed_form_matches_long_series() {
        for xi in twists() {
            assert_close6(&jexp6(&xi), &series(&xi, 60), 1e-12);
        }
    }

    #[test]
    fn jacobians_match_central_differences() {
        // h = 1e-6 on the group (see so3 tests for the error budget)
        let h = 1e-6;
        for xi in twists() {
            let m = exp6(&xi);
            let (j, jl) = (jexp6(&xi), jlog6(&m));
            for k in 0..6 {
                let mut e = Vector6::zeros();
                e[k] = h;
                let d = Motion::from_vector(&e);
                let plus = log6(&m.inv_compose(&exp6(&(xi + d))));
                let minus = log6(&m.inv_compose(&exp6(&(xi - d))));
                let col = (plus - minus).to_vector() / (2.0 * h);
                assert!((col - j.column(k)).norm() < 1e-8);
                let plus = log6(&(m * exp6(&d)));
                let minus = log6(&(m * exp6(&(-d))));
                let col = (plus - minus).to_vector() / (2.0 * h);
                assert!((col - jl.column(k)).norm() < 1e-7, "{}", (col - jl.column(k)).norm());
            }
            assert_close6(&(j * jl), &Matrix6::identity(), 1e-11);
        }
    }
}
