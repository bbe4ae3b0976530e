//! Rigid bodies in maximal coordinates: pose, discrete velocities and the exactly
//! unit-norm quaternion knot update.
//!
//! A body's maximal frame sits at its centre of mass with the axes of its minimal-coordinate
//! body frame. Its configuration is `z = (x, q)`: `x` the centre of mass in the world, `q` the
//! unit quaternion of the body-to-world rotation `R(q)` (Hamilton product, scalar `w`). Its
//! discrete velocity over one knot interval is `ż = (v, ω)`: `v` the linear velocity in the
//! world frame, `ω` the angular velocity in the body frame.
//!
//! **Knot update** (Brüdigam et al. 2023, eqs. 11 and 17), with `h = Δt/2`:
//! $$x_{k+1} = x_k + \Delta t\, v_k, \qquad q_{k+1} = q_k \otimes \big[\sqrt{1 - h^2|\omega_k|^2};\ h\,\omega_k\big]$$
//! The step quaternion has unit norm by construction (`(1 − h²|ω|²) + h²|ω|² = 1`), so no
//! renormalisation is ever needed; it exists for `|ω| < 2/Δt` only.
//!
//! **Tangent directions.** Variations of a pose are right perturbations with a *full* rotation
//! angle: `(x, q) ⊕ (δx, δθ) = (x + δx, q ⊗ exp(δθ/2))`, `δx` in the world, `δθ` in the body
//! frame. The papers perturb by the half angle (`q ⊗ [1; ε]`); with `δθ = 2ε` every rotational
//! gradient and multiplier here is the physical torque, half the papers' value.

use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3};
use vidyn_spatial::skew;

/// Mass properties of one body.
#[derive(Clone, Debug, PartialEq)]
pub struct Body {
    pub name: String,
    /// Mass `m` (kg), positive.
    pub mass: f64,
    /// Rotational inertia `J` about the centre of mass, body axes, symmetric positive definite.
    pub inertia: Matrix3<f64>,
}

/// Configuration `z = (x, q)` of one body.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pose {
    /// Centre of mass in the world frame.
    pub x: Vector3<f64>,
    /// Body-to-world rotation.
    pub q: UnitQuaternion<f64>,
}

impl Default for Pose {
    fn default() -> Self {
        Self { x: Vector3::zeros(), q: UnitQuaternion::identity() }
    }
}

impl Pose {
    #[inline]
    #[must_use]
    pub fn new(x: Vector3<f64>, q: UnitQuaternion<f64>) -> Self {
        Self { x, q }
    }

    /// Rotation matrix `R(q)`.
    #[inline]
    #[must_use]
    pub fn rotation(&self) -> Matrix3<f64> {
        self.q.to_rotation_matrix().into_inner()
    }

    /// World coordinates of a point given in the body frame, `x + R p`.
    #[inline]
    #[must_use]
    pub fn point(&self, p: &Vector3<f64>) -> Vector3<f64> {
        self.x + self.q * p
    }

    /// `(x + δx, q ⊗ exp(δθ/2))`: the right retraction used for every tangent derivative.
    #[inline]
    #[must_use]
    pub fn retract(&self, dx: &Vector3<f64>, dtheta: &Vector3<f64>) -> Pose {
        Pose::new(self.x + dx, self.q * UnitQuaternion::from_scaled_axis(*dtheta))
    }
}

/// Discrete state of one body at knot `k`: its pose `z_k` and the discrete velocity
/// `ż_{k−1} = (v, ω)` of the interval that *ended* at this knot (so `z_{k−1} = z_k ⊖ Δt ż_{k−1}`).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct BodyState {
    pub pose: Pose,
    /// Linear velocity, world frame.
    pub v: Vector3<f64>,
    /// Angular velocity, body frame.
    pub w: Vector3<f64>,
}

/// The step quaternion `[√(1 − h²|ω|²); h ω]`, `h = Δt/2`; `None` when `h|ω| ≥ 1`.
#[inline]
#[must_use]
pub fn step_quaternion(w: &Vector3<f64>, dt: f64) -> Option<UnitQuaternion<f64>> {
    let hw = w * (0.5 * dt);
    let c2 = 1.0 - hw.norm_squared();
    if c2 > 0.0 {
        Some(UnitQuaternion::new_unchecked(Quaternion::new(c2.sqrt(), hw.x, hw.y, hw.z)))
    } else {
        None
    }
}

/// Knot update `z_{k+1} = (x + Δt v, q ⊗ [√(1 − h²|ω|²); hω])`; `None` when `|ω| ≥ 2/Δt`.
#[inline]
#[must_use]
pub fn advance(pose: &Pose, v: &Vector3<f64>, w: &Vector3<f64>, dt: f64) -> Option<Pose> {
    step_quaternion(w, dt).map(|s| Pose::new(pose.x + v * dt, pose.q * s))
}

/// Inverse knot update `z_{k−1} = (x − Δt v, q ⊗ [√(1 − h²|ω|²); hω]⁻¹)`.
#[inline]
#[must_use]
pub fn retreat(pose: &Pose, v: &Vector3<f64>, w: &Vector3<f64>, dt: f64) -> Option<Pose> {
    step_quaternion(w, dt).map(|s| Pose::new(pose.x - v * dt, pose.q * s.inverse()))
}

/// The discrete velocity that carries `z₀` to `z₁` in one step: `v = (x₁ − x₀)/Δt`,
/// `ω = (2/Δt) vec(q₀⁻¹ ⊗ q₁)` with the sign of `q₀⁻¹ ⊗ q₁` chosen so that its scalar part is
/// non-negative (the update's step quaternion always has one). Inverse of [`advance`].
#[inline]
#[must_use]
pub fn discrete_velocity(p0: &Pose, p1: &Pose, dt: f64) -> (Vector3<f64>, Vector3<f64>) {
    let r = p0.q.inverse() * p1.q;
    let sign = if r.w < 0.0 { -1.0 } else { 1.0 };
    ((p1.x - p0.x) / dt, r.imag() * (2.0 * sign / dt))
}

/// `s(ω) = √(4/Δt² − |ω|²)`, the scalar part of the papers' discrete quaternion velocity.
#[inline]
#[must_use]
pub fn scalar_rate(w: &Vector3<f64>, dt: f64) -> f64 {
    (4.0 / (dt * dt) - w.norm_squared()).max(0.0).sqrt()
}

/// Tangent map of the rotational knot update with respect to `ω`: `q_{k+1}(ω + δω) =
/// q_{k+1}(ω) ⊗ exp(E δω / 2) + O(δω²)` with, for `c = √(1 − h²|ω|²)`,
/// $$E(\omega) = \Delta t\,\big(c\,1 + (h^2/c)\,\omega\omega^\top - h\,\omega\times\big).$$
/// (From `δθ = 2 vec(w⁻¹ ⊗ δw)` for the step quaternion `w`; checked against central
/// differences in the tests.)
#[inline]
#[must_use]
pub fn update_tangent(w: &Vector3<f64>, dt: f64) -> Matrix3<f64> {
    let h = 0.5 * dt;
    let c = (1.0 - h * h * w.norm_squared()).max(f64::MIN_POSITIVE).sqrt();
    (Matrix3::identity() * c + w * w.transpose() * (h * h / c) - skew(w) * h) * dt
}

/// Full-angle rotation vector `δθ` with `q₁ = q₀ ⊗ exp(δθ/2)`, for small differences (tests).
#[inline]
#[must_use]
pub fn rotation_difference(q0: &UnitQuaternion<f64>, q1: &UnitQuaternion<f64>) -> Vector3<f64> {
    (q0.inverse() * q1).scaled_axis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_keeps_unit_norm_and_inverts() {
        let dt = 0.01;
        let mut p = Pose::new(Vector3::new(0.1, 0.2, 0.3), UnitQuaternion::from_euler_angles(0.3, -1.0, 2.0));
        let (v, w) = (Vector3::new(1.0, -2.0, 0.5), Vector3::new(30.0, -50.0, 80.0));
        for _ in 0..10_000 {
            p = advance(&p, &v, &w, dt).unwrap();
        }
        // no renormalisation: only round-off accumulates, at most ~ε per product (N ε ≈ 2e-12
        // for N = 10⁴); a step quaternion off unit norm by O(h⁴|ω|⁴) would give ~1e-2 here
        let drift = (p.q.quaternion().norm() - 1.0).abs();
        assert!(drift < 1e4 * f64::EPSILON, "{drift:e}");
        let p1 = advance(&p, &v, &w, dt).unwrap();
        let (v1, w1) = discrete_velocity(&p, &p1, dt);
        // differences of positions ~|x|: round-off ~ε|x|/Δt
        let tol = 10.0 * f64::EPSILON * p.x.norm() / dt;
        // q₀⁻¹ ⊗ q₁ carries the accumulated norm drift twice: relative error ≈ 2·drift
        let tol_w = w.norm() * (2.0 * drift + 10.0 * f64::EPSILON / dt);
        assert!((v1 - v).norm() < tol && (w1 - w).norm() < tol_w, "{} {}", (v1 - v).norm(), (w1 - w).norm());
        let back = retreat(&p1, &v, &w, dt).unwrap();
        assert!((back.x - p.x).norm() < 1e-14 && back.q.angle_to(&p.q) < 1e-14);
        assert!(advance(&p, &v, &(Vector3::x() * (2.0 / dt)), dt).is_none());
    }

    #[test]
    fn update_tangent_matches_central_differences() {
        // h = 1e-6: truncation ~h²|∂³q| ≈ 1e-12·dt, round-off ~ε/h ≈ 2e-10; tolerance 1e-8·dt.
        let (dt, h) = (0.05, 1e-6);
        let q = UnitQuaternion::from_euler_angles(0.7, 0.2, -0.4);
        let p = Pose::new(Vector3::zeros(), q);
        for w in [Vector3::new(3.0, -7.0, 11.0), Vector3::new(1e-3, 0.0, 0.0), Vector3::zeros()] {
            let e = update_tangent(&w, dt);
            let base = advance(&p, &Vector3::zeros(), &w, dt).unwrap();
            for k in 0..3 {
                let d = Vector3::ith(k, h);
                let plus = advance(&p, &Vector3::zeros(), &(w + d), dt).unwrap();
                let minus = advance(&p, &Vector3::zeros(), &(w - d), dt).unwrap();
                let fd = (rotation_difference(&base.q, &plus.q) - rotation_difference(&base.q, &minus.q)) / (2.0 * h);
                assert!((fd - e.column(k)).norm() < 1e-8 * dt, "{fd} {}", e.column(k));
            }
        }
    }
}
