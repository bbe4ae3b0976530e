//! Spatial vector algebra on SE(3) for vidyn.
//!
//! # Conventions (read once, relied on everywhere)
//! * **Ordering.** Every 6-vector is stored `[linear; angular]`, the order Pinocchio uses.
//!   The papers we implement (Featherstone 2008; Singh, Russell & Wensing 2023) write
//!   `[angular; linear]`; their formulas are translated here, once, by swapping the
//!   3×3 blocks. A [`Motion`] is `[v; ω]` (velocity of the frame origin, angular
//!   velocity); a [`Force`] is `[f; n]` (force, moment about the frame origin).
//! * **Placements.** An [`Se3`] `aMb` maps coordinates of frame *b* into frame *a*:
//!   `x_a = R x_b + p`. `oMi` is the placement of body *i* in the world.
//! * **Lie derivatives.** Jacobians of `exp` and `log` are *right* Jacobians:
//!   `exp(ξ + δ) ≈ exp(ξ)·exp(J_r(ξ) δ)`, matching Pinocchio's `Jexp3`/`Jexp6`.
//!
//! Small operations are `#[inline]`; singular branches switch to Taylor series below
//! the thresholds documented next to them and are tested on both sides.

/// Construction, conversion to and from `[linear; angular]` 6-vectors and the vector-space
/// operations (`+`, `−`, `+=`, `−=`, unary `−`, `· f64`) of a spatial vector type stored as
/// `linear` and `angular` 3-vector halves, written once for [`Motion`] and [`Force`].
macro_rules! impl_spatial_vector {
    ($t:ident) => {
        impl $t {
            #[inline]
            #[must_use]
            pub const fn new(linear: Vector3<f64>, angular: Vector3<f64>) -> Self {
                Self { linear, angular }
            }

            #[inline]
            #[must_use]
            pub fn zero() -> Self {
                Self::default()
            }

            /// From a `[linear; angular]` 6-vector.
            #[inline]
            #[must_use]
            pub fn from_vector(x: &Vector6<f64>) -> Self {
                Self::new(x.fixed_rows::<3>(0).into(), x.fixed_rows::<3>(3).into())
            }

            /// As a `[linear; angular]` 6-vector.
            #[inline]
            #[must_use]
            pub fn to_vector(&self) -> Vector6<f64> {
                let mut x = Vector6::zeros();
                x.fixed_rows_mut::<3>(0).copy_from(&self.linear);
                x.fixed_rows_mut::<3>(3).copy_from(&self.angular);
                x
            }
        }

        impl std::ops::Add for $t {
            type Output = $t;
            #[inline]
            fn add(self, o: $t) -> $t {
                $t::new(self.linear + o.linear, self.angular + o.angular)
            }
        }
        impl std::ops::Sub for $t {
            type Output = $t;
            #[inline]
            fn sub(self, o: $t) -> $t {
                $t::new(self.linear - o.linear, self.angular - o.angular)
            }
        }
        impl std::ops::AddAssign for $t {
            #[inline]
            fn add_assign(&mut self, o: $t) {
                self.linear += o.linear;
                self.angular += o.angular;
            }
        }
        impl std::ops::SubAssign for $t {
            #[inline]
            fn sub_assign(&mut self, o: $t) {
                self.linear -= o.linear;
                self.angular -= o.angular;
            }
        }
        impl std::ops::Neg for $t {
            type Output = $t;
            #[inline]
            fn neg(self) -> $t {
                $t::new(-self.linear, -self.angular)
            }
        }
        impl std::ops::Mul<f64> for $t {
            type Output = $t;
            #[inline]
            fn mul(self, s: f64) -> $t {
                $t::new(self.linear * s, self.angular * s)
            }
        }
    };
}
pub(crate) use impl_spatial_vector;

mod force;
mod inertia;
mod motion;
mod se3;
mod se3_exp;
mod sincos;
pub mod so3;
pub mod tensor;

pub use force::Force;
pub use inertia::{Inertia, OriginInertia};
pub use motion::Motion;
pub use se3::Se3;
pub use se3_exp::{exp6, jexp6, jlog6, log6};
pub use sincos::sin_cos;
pub use tensor::Tensor3;

pub use nalgebra::{Matrix3, Matrix6, UnitQuaternion, Vector3, Vector6};

/// `a · b` of two 6-vectors, summed as `(a₀b₀ + a₂b₂ + a₄b₄) + (a₁b₁ + a₃b₃ + a₅b₅)`: the two
/// partial sums are the lanes of one 2-wide SIMD register (SSE2, the portable x86-64
/// baseline), so it compiles to three packed products, two packed sums and one horizontal
/// sum, where nalgebra's `dot` is a sequential scalar sum (six products, six sums). For the
/// dot products in the innermost loops of the derivative kernels.
#[inline]
#[must_use]
pub fn dot6(a: &Vector6<f64>, b: &Vector6<f64>) -> f64 {
    let even = a[0] * b[0] + a[2] * b[2] + a[4] * b[4];
    let odd = a[1] * b[1] + a[3] * b[3] + a[5] * b[5];
    even + odd
}

/// The 3×3 skew-symmetric matrix `a×` with `(a×) b = a × b`.
#[inline]
#[must_use]
pub fn skew(a: &Vector3<f64>) -> Matrix3<f64> {
    Matrix3::new(0.0, -a.z, a.y, a.z, 0.0, -a.x, -a.y, a.x, 0.0)
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    pub fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }
    pub fn vec3(r: &mut ChaCha8Rng) -> Vector3<f64> {
        Vector3::new(r.random_range(-1.0..1.0), r.random_range(-1.0..1.0), r.random_range(-1.0..1.0))
    }
    pub fn motion(r: &mut ChaCha8Rng) -> Motion {
        Motion::new(vec3(r), vec3(r))
    }
    pub fn force(r: &mut ChaCha8Rng) -> Force {
        Force::new(vec3(r), vec3(r))
    }
    pub fn se3(r: &mut ChaCha8Rng) -> Se3 {
        Se3::new(so3::exp3(&(vec3(r) * 2.0)), vec3(r) * 3.0)
    }
    pub fn inertia(r: &mut ChaCha8Rng) -> Inertia {
        let a = Matrix3::from_fn(|_, _| r.random_range(-1.0..1.0));
        let sigma = a * a.transpose() + Matrix3::identity() * 0.1;
        let rot = Matrix3::identity() * sigma.trace() - sigma;
        Inertia::new(r.random_range(0.1..5.0), vec3(r), rot)
    }
    pub fn assert_close6(a: &Matrix6<f64>, b: &Matrix6<f64>, tol: f64) {
        let e = (a - b).abs().max();
        assert!(e <= tol, "max |a-b| = {e:e} > {tol:e}\n{a}\n{b}");
    }
}
