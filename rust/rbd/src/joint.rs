//! The closed set of joint kinds and everything that depends on the kind.
//!
//! Every joint's velocity is expressed in its own (child) frame, so its motion subspace `S`
//! is a constant 6×nv matrix (`Ṡ = 0`, no bias `c_J`): the joint transform `M(q)` is the only
//! configuration-dependent quantity. Configuration layouts are Pinocchio's (see the README):
//!
//! | kind | nq | nv | q | v | S columns (`[lin; ang]`) |
//! |---|---|---|---|---|---|
//! | revolute (axis a) | 1 | 1 | θ | θ̇ | `[0; a]` |
//! | prismatic (axis a) | 1 | 1 | d | ḋ | `[a; 0]` |
//! | spherical | 4 | 3 | `[qx qy qz qw]` | ω (local) | `[0; I₃]` |
//! | free-flyer | 7 | 6 | `[x y z qx qy qz qw]` | `[v; ω]` (local) | `I₆` |
//! | planar (xy plane) | 4 | 3 | `[x y cos θ sin θ]` | `[vx vy ω_z]` (local) | `e_x, e_y, e_ωz` |
//!
//! All `match`es on the kind live in this file, so a new kind is one variant plus its arms.

use crate::error::{RbdError, Result};
use nalgebra::{Matrix3, Matrix6, Quaternion, UnitQuaternion, Vector3};
use rand::{Rng, RngExt};
use vidyn_spatial::{exp6, jlog6, log6, so3, Force, Motion, Se3};

/// Tolerance on `|‖quaternion‖ − 1|` (and `cos² + sin² − 1` for planar joints) accepted in `q`.
/// Inputs within it are renormalised before use; inputs outside it are rejected.
pub const UNIT_NORM_TOL: f64 = 1e-6;

/// One joint kind with its constant parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Joint {
    /// Rotation about a unit axis of the joint frame.
    Revolute { axis: Vector3<f64> },
    /// Translation along a unit axis of the joint frame.
    Prismatic { axis: Vector3<f64> },
    /// Free rotation (ball joint), unit quaternion.
    Spherical,
    /// Free rigid motion (floating base): position and unit quaternion.
    FreeFlyer,
    /// Motion in the joint frame's xy plane: translation x, y and rotation about z.
    Planar,
}

impl Joint {
    /// One example of each kind, shared by tests and strategies so that a new kind is
    /// exercised everywhere automatically.
    #[must_use]
    pub fn examples() -> Vec<Joint> {
        let skew_axis = Vector3::new(0.3, -0.5, 0.8).normalize();
        vec![
            Joint::Revolute { axis: Vector3::z() },
            Joint::Revolute { axis: skew_axis },
            Joint::Prismatic { axis: Vector3::x() },
            Joint::Prismatic { axis: skew_axis },
            Joint::Spherical,
            Joint::FreeFlyer,
            Joint::Planar,
        ]
    }

    /// Short name of the kind: `revolute`, `prismatic`, `spherical`, `freeflyer`, `planar`.
    #[must_use]
    pub fn kind_name(&self) -> &'static str {
        match self {
            Joint::Revolute { .. } => "revolute",
            Joint::Prismatic { .. } => "prismatic",
            Joint::Spherical => "spherical",
            Joint::FreeFlyer => "freeflyer",
            Joint::Planar => "planar",
        }
    }

    /// Number of configuration coordinates.
    #[inline]
    #[must_use]
    pub fn nq(&self) -> usize {
        match self {
            Joint::Revolute { .. } | Joint::Prismatic { .. } => 1,
            Joint::Spherical | Joint::Planar => 4,
            Joint::FreeFlyer => 7,
        }
    }

    /// Number of velocity coordinates (tangent-space dimension).
    #[inline]
    #[must_use]
    pub fn nv(&self) -> usize {
        match self {
            Joint::Revolute { .. } | Joint::Prismatic { .. } => 1,
            Joint::Spherical | Joint::Planar => 3,
            Joint::FreeFlyer => 6,
        }
    }

    /// Joint transform `M(q)`: placement of the child frame in the joint's parent-side frame.
    /// `q` is this joint's slice; quaternions are renormalised (see [`UNIT_NORM_TOL`]).
    #[inline]
    #[must_use]
    pub fn transform(&self, q: &[f64]) -> Se3 {
        match self {
            Joint::Revolute { axis } => Se3::new(so3::rotation_about(axis, q[0]), Vector3::zeros()),
            Joint::Prismatic { axis } => Se3::new(Matrix3::identity(), axis * q[0]),
            Joint::Spherical => Se3::new(quaternion_rotation(&q[0..4]), Vector3::zeros()),
            Joint::FreeFlyer => Se3::new(quaternion_rotation(&q[3..7]), Vector3::new(q[0], q[1], q[2])),
            Joint::Planar => {
                let n = q[2].hypot(q[3]);
                let (c, s) = (q[2] / n, q[3] / n);
                let r = Matrix3::new(c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0);
                Se3::new(r, Vector3::new(q[0], q[1], 0.0))
            }
        }
    }

    /// `placement · M(q)`: the joint's fixed placement in its parent body composed with its
    /// transform, skipping the products by the identity rotation or the zero translation of a
    /// 1-dof joint (the same value as the composition).
    #[inline]
    #[must_use]
    pub fn placed_transform(&self, placement: &Se3, q: &[f64]) -> Se3 {
        self.placed_transform_sin_cos(placement, q, self.angle_sin_cos(q))
    }

    /// `(sin q, cos q)` of a revolute joint's angle, `(0, 1)` for the other joints. The
    /// kinematic passes take these for all joints first: the joints' sines are independent
    /// of each other, where each placement waits for its parent's.
    #[inline]
    #[must_use]
    pub fn angle_sin_cos(&self, q: &[f64]) -> (f64, f64) {
        match self {
            Joint::Revolute { .. } => vidyn_spatial::sin_cos(q[0]),
            _ => (0.0, 1.0),
        }
    }

    /// [`Self::placed_transform`] given [`Self::angle_sin_cos`]`(q)` as `sin_cos`. Always
    /// inlined (a call returns the placement through memory, read back at once by the caller).
    #[inline(always)]
    #[must_use]
    pub fn placed_transform_sin_cos(&self, placement: &Se3, q: &[f64], sin_cos: (f64, f64)) -> Se3 {
        match self {
            Joint::Revolute { axis } => Se3::new(so3::times_rotation_about_sin_cos(&placement.rotation, axis, sin_cos), placement.translation),
            Joint::Prismatic { axis } => Se3::new(placement.rotation, placement.rotation * (axis * q[0]) + placement.translation),
            _ => *placement * self.transform(q),
        }
    }

    /// Column `k` of the motion subspace `S` (a unit twist in the joint frame).
    #[inline]
    #[must_use]
    pub fn subspace_column(&self, k: usize) -> Motion {
        let e = |i: usize| Vector3::ith(i, 1.0);
        let z = Vector3::zeros();
        match self {
            Joint::Revolute { axis } => Motion::new(z, *axis),
            Joint::Prismatic { axis } => Motion::new(*axis, z),
            Joint::Spherical => Motion::new(z, e(k)),
            Joint::FreeFlyer if k < 3 => Motion::new(e(k), z),
            Joint::FreeFlyer => Motion::new(z, e(k - 3)),
            Joint::Planar if k < 2 => Motion::new(e(k), z),
            Joint::Planar => Motion::new(z, e(2)),
        }
    }

    /// Column `k` of the motion subspace placed by `m`, `Ad_m S_k` (with the body's world
    /// placement `oMi`, the world-frame joint column `J_k`): `[p × R a; R a]` for a rotation
    /// about `a`, `[R a; 0]` for a translation along `a` — [`Se3::act_motion`] of
    /// [`Self::subspace_column`] without its products by the zero half, the same values.
    /// Always inlined: in the per-dof loops the joint kind is usually known, and the call
    /// (a 48-byte return through the stack) cost more than the arithmetic.
    #[inline(always)]
    #[must_use]
    pub fn placed_subspace_column(&self, k: usize, m: &Se3) -> Motion {
        let rotation = |w: Vector3<f64>| Motion::new(m.translation.cross(&w), w);
        let translation = |v: Vector3<f64>| Motion::new(v, Vector3::zeros());
        match self {
            Joint::Revolute { axis } => rotation(m.rotation * axis),
            Joint::Prismatic { axis } => translation(m.rotation * axis),
            Joint::Spherical => rotation(m.rotation.column(k).into_owned()),
            Joint::FreeFlyer if k < 3 => translation(m.rotation.column(k).into_owned()),
            Joint::FreeFlyer => rotation(m.rotation.column(k - 3).into_owned()),
            Joint::Planar if k < 2 => translation(m.rotation.column(k).into_owned()),
            Joint::Planar => rotation(m.rotation.column(2).into_owned()),
        }
    }

    /// Joint twist `S·v` for this joint's velocity slice `v`.
    #[inline]
    #[must_use]
    pub fn motion(&self, v: &[f64]) -> Motion {
        match self {
            Joint::Revolute { axis } => Motion::new(Vector3::zeros(), axis * v[0]),
            Joint::Prismatic { axis } => Motion::new(axis * v[0], Vector3::zeros()),
            Joint::Spherical => Motion::new(Vector3::zeros(), Vector3::new(v[0], v[1], v[2])),
            Joint::FreeFlyer => Motion::new(Vector3::new(v[0], v[1], v[2]), Vector3::new(v[3], v[4], v[5])),
            Joint::Planar => Motion::new(Vector3::new(v[0], v[1], 0.0), Vector3::new(0.0, 0.0, v[2])),
        }
    }

    /// Projection `Sᵀ f` of a force onto the joint axes, written into `out` (length nv).
    #[inline]
    pub fn project_force(&self, f: &Force, out: &mut [f64]) {
        match self {
            Joint::Revolute { axis } => out[0] = axis.dot(&f.angular),
            Joint::Prismatic { axis } => out[0] = axis.dot(&f.linear),
            Joint::Spherical => out[..3].copy_from_slice(f.angular.as_slice()),
            Joint::FreeFlyer => {
                out[..3].copy_from_slice(f.linear.as_slice());
                out[3..6].copy_from_slice(f.angular.as_slice());
            }
            Joint::Planar => {
                out[0] = f.linear.x;
                out[1] = f.linear.y;
                out[2] = f.angular.z;
            }
        }
    }

    /// `X·S` for a 6×6 matrix `X` acting on motions: the first nv columns of the result
    /// (the others are zero).
    #[inline]
    #[must_use]
    pub fn mul_subspace(&self, x: &Matrix6<f64>) -> Matrix6<f64> {
        let mut out = Matrix6::zeros();
        match self {
            Joint::Revolute { axis } => out.set_column(0, &(x.fixed_columns::<3>(3) * axis)),
            Joint::Prismatic { axis } => out.set_column(0, &(x.fixed_columns::<3>(0) * axis)),
            Joint::Spherical => out.fixed_columns_mut::<3>(0).copy_from(&x.fixed_columns::<3>(3)),
            Joint::FreeFlyer => out = *x,
            Joint::Planar => {
                out.fixed_columns_mut::<2>(0).copy_from(&x.fixed_columns::<2>(0));
                out.set_column(2, &x.column(5));
            }
        }
        out
    }

    /// Neutral configuration (identity placement) into `q` (length nq).
    pub fn neutral(&self, q: &mut [f64]) {
        q.fill(0.0);
        match self {
            Joint::Spherical => q[3] = 1.0,
            Joint::FreeFlyer => q[6] = 1.0,
            Joint::Planar => q[2] = 1.0,
            _ => {}
        }
    }

    /// Checks the unit-norm constraint of quaternion / planar coordinates. Inlined, so that
    /// the check of a joint without one (revolute, prismatic) compiles to nothing.
    #[inline]
    pub fn check_configuration(&self, q: &[f64], name: &str, offset: usize) -> Result<()> {
        let (norm, at) = match self {
            Joint::Spherical => (norm(&q[0..4]), 0),
            Joint::FreeFlyer => (norm(&q[3..7]), 3),
            Joint::Planar => (norm(&q[2..4]), 2),
            _ => return Ok(()),
        };
        if (norm - 1.0).abs() > UNIT_NORM_TOL {
            return Err(not_normalized(name, offset + at, norm));
        }
        Ok(())
    }

    /// `q ⊕ v`: the configuration reached from `q` by following the constant joint velocity
    /// `v` for unit time, `M(q_out) = M(q) exp(S v)` (right, local-frame convention).
    /// Rotations are composed as quaternions, `q_out = q ⊗ exp(ω/2)`, never through a rotation
    /// matrix (whose conversion back is ill-posed at half turns). As in Pinocchio, the
    /// free-flyer result's sign is chosen so that `⟨q_out, q⟩ ≥ 0`, while the spherical joint
    /// keeps the plain product `q ⊗ exp(ω/2)`.
    pub fn integrate(&self, q: &[f64], v: &[f64], out: &mut [f64]) {
        match self {
            Joint::Revolute { .. } | Joint::Prismatic { .. } => out[0] = q[0] + v[0],
            Joint::Spherical => {
                let r = quaternion(&q[0..4]) * UnitQuaternion::from_scaled_axis(Vector3::new(v[0], v[1], v[2]));
                write_quaternion(&r, &mut out[0..4]);
            }
            Joint::FreeFlyer => {
                let step = exp6(&self.motion(v));
                let q0 = quaternion(&q[3..7]);
                let p = Vector3::new(q[0], q[1], q[2]) + q0 * step.translation;
                out[0..3].copy_from_slice(p.as_slice());
                let r = q0 * UnitQuaternion::from_scaled_axis(Vector3::new(v[3], v[4], v[5]));
                write_quaternion(&same_hemisphere(r, &q0), &mut out[3..7]);
            }
            Joint::Planar => {
                let m = self.transform(q) * exp6(&self.motion(v));
                out[0] = m.translation.x;
                out[1] = m.translation.y;
                out[2] = m.rotation[(0, 0)];
                out[3] = m.rotation[(1, 0)];
            }
        }
    }

    /// `q₁ ⊖ q₀`: the velocity `v` with `q₀ ⊕ v = q₁`, i.e. `S v = log(M(q₀)⁻¹ M(q₁))`.
    pub fn difference(&self, q0: &[f64], q1: &[f64], out: &mut [f64]) {
        match self {
            Joint::Revolute { .. } | Joint::Prismatic { .. } => out[0] = q1[0] - q0[0],
            _ => {
                let xi = log6(&self.transform(q0).inv_compose(&self.transform(q1)));
                let full = Force::new(xi.linear, xi.angular); // read off S-coordinates
                self.project_force(&full, out);
            }
        }
    }

    /// `∂(q₁ ⊖ q₀)/∂v` for `q₁ ↦ q₁ ⊕ v` at `v = 0` (Pinocchio's `dDifference` in its second
    /// argument), top-left `nv × nv` of the result: `Sᵀ J_r(ξ)⁻¹ S` with
    /// `ξ = log(M(q₀)⁻¹ M(q₁))` ([`vidyn_spatial::jlog6`]); `1` for 1-dof joints.
    #[must_use]
    pub fn difference_jacobian(&self, q0: &[f64], q1: &[f64]) -> Matrix6<f64> {
        let mut out = Matrix6::identity();
        if self.nv() == 1 {
            return out;
        }
        let jlog = jlog6(&self.transform(q0).inv_compose(&self.transform(q1)));
        let (mut unit, mut column) = ([0.0; 6], [0.0; 6]);
        for c in 0..self.nv() {
            unit.fill(0.0);
            unit[c] = 1.0;
            let w = jlog * self.motion(&unit).to_vector();
            self.project_force(&Force::new(Vector3::new(w[0], w[1], w[2]), Vector3::new(w[3], w[4], w[5])), &mut column);
            for r in 0..self.nv() {
                out[(r, c)] = column[r];
            }
        }
        out
    }

    /// A random configuration: bounded coordinates uniform in `[lower, upper]`; unbounded ones
    /// (including ranges too wide for f64, `upper − lower = ∞`) uniform in `[−π, π]` for angles
    /// and `[−1, 1]` for translations; rotations uniform on SO(3) (Shoemake's method).
    pub fn random_configuration<R: Rng + ?Sized>(&self, rng: &mut R, lower: &[f64], upper: &[f64], out: &mut [f64]) {
        let pi = std::f64::consts::PI;
        let draw = |i: usize, default: f64, rng: &mut R| {
            if lower[i] < upper[i] && (upper[i] - lower[i]).is_finite() {
                rng.random_range(lower[i]..=upper[i])
            } else if lower[i].is_finite() && lower[i] == upper[i] {
                lower[i]
            } else {
                rng.random_range(-default..=default)
            }
        };
        match self {
            Joint::Revolute { .. } => out[0] = draw(0, pi, rng),
            Joint::Prismatic { .. } => out[0] = draw(0, 1.0, rng),
            Joint::Spherical => write_quaternion(&random_rotation(rng), &mut out[0..4]),
            Joint::FreeFlyer => {
                for (i, x) in out.iter_mut().take(3).enumerate() {
                    *x = draw(i, 1.0, rng);
                }
                write_quaternion(&random_rotation(rng), &mut out[3..7]);
            }
            Joint::Planar => {
                out[0] = draw(0, 1.0, rng);
                out[1] = draw(1, 1.0, rng);
                let t: f64 = rng.random_range(-pi..=pi);
                out[2] = t.cos();
                out[3] = t.sin();
            }
        }
    }
}

/// The error of a coordinate block off the unit circle/sphere (kept out of line).
#[cold]
fn not_normalized(joint: &str, index: usize, norm: f64) -> RbdError {
    RbdError::NotNormalized { joint: joint.to_string(), index, norm, tol: UNIT_NORM_TOL }
}

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|a| a * a).sum::<f64>().sqrt()
}

/// Unit quaternion from `[qx qy qz qw]`, renormalised.
#[inline]
fn quaternion(q: &[f64]) -> UnitQuaternion<f64> {
    UnitQuaternion::from_quaternion(Quaternion::new(q[3], q[0], q[1], q[2]))
}

#[inline]
fn quaternion_rotation(q: &[f64]) -> Matrix3<f64> {
    quaternion(q).to_rotation_matrix().into_inner()
}

/// `r` or `−r` (the same rotation), whichever has a non-negative dot product with `reference`.
#[inline]
fn same_hemisphere(r: UnitQuaternion<f64>, reference: &UnitQuaternion<f64>) -> UnitQuaternion<f64> {
    if r.coords.dot(&reference.coords) < 0.0 {
        UnitQuaternion::new_unchecked(-r.into_inner())
    } else {
        r
    }
}

#[inline]
fn write_quaternion(r: &UnitQuaternion<f64>, out: &mut [f64]) {
    let c = r.quaternion().coords; // nalgebra stores [i j k w]
    out.copy_from_slice(c.as_slice());
}

fn random_rotation<R: Rng + ?Sized>(rng: &mut R) -> UnitQuaternion<f64> {
    let tau = 2.0 * std::f64::consts::PI;
    let (u1, u2, u3): (f64, f64, f64) = (rng.random(), rng.random(), rng.random());
    let (a, b) = ((1.0 - u1).sqrt(), u1.sqrt());
    let q = Quaternion::new(b * (tau * u3).cos(), a * (tau * u2).sin(), a * (tau * u2).cos(), b * (tau * u3).sin());
    UnitQuaternion::from_quaternion(q)
}
