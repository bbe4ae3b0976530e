//! Composite joints as chains of 1-dof joints: a [`Model`] → an equivalent [`Model`] whose
//! every joint is revolute or prismatic, plus the [`SingleDofMap`] between the coordinates
//! of the two.
//!
//! The minimal-coordinate variational integrators (`vidyn-vi`, Johnson 2012; Fan, Schultz &
//! Murphey 2018) work in coordinates `q ∈ ℝⁿ` with `q̇ = v`; they have no quaternions. This
//! module rewrites every multi-dof joint as a chain of 1-dof joints through massless
//! intermediate bodies (all joint placements identity except the first, which is the
//! original placement):
//!
//! | original joint `name` | chain (joint names) | expanded coordinates θ |
//! |---|---|---|
//! | revolute / prismatic | unchanged (`name`) | the angle / displacement |
//! | planar | `name_tx` (prismatic x), `name_ty` (prismatic y), `name_rz` (revolute z) | `(x, y, φ)` |
//! | spherical | `name_rz`, `name_ry`, `name_rx` (revolutes z, y, x) | `(α, β, γ)` |
//! | free-flyer | `name_tx`, `name_ty`, `name_tz` (prismatic x, y, z), then `name_rz`, `name_ry`, `name_rx` | `(x, y, z, α, β, γ)` |
//!
//! The last body of each chain carries the original body's inertia, children and frames
//! (frames keep their names and placements: the last chain body's frame *is* the original
//! body's frame), so forward kinematics, energies and dynamics are those of the original
//! model. The intermediate bodies have zero inertia; each has a massive descendant (the last
//! body of its chain), so no *leaf* is massless and the articulated inertias that ABA and the
//! VI's Newton factorisation (Fan et al. Algorithms B.1/B.2) pivot on stay invertible away
//! from the singularity below.
//!
//! # Rotations: Z-Y-X intrinsic Euler angles
//! The rotation of a spherical or free-flyer joint is `R = Rz(α) Ry(β) Rx(γ)` (yaw, pitch,
//! roll, the URDF `rpy` convention). Its body angular velocity is
//! $$\omega = E(\beta, \gamma)\,(\dot\alpha, \dot\beta, \dot\gamma),\quad
//! E = \begin{pmatrix} -\sin\beta & 0 & 1 \\ \sin\gamma\cos\beta & \cos\gamma & 0 \\ \cos\gamma\cos\beta & -\sin\gamma & 0\end{pmatrix},
//! \quad \det E = -\cos\beta.$$
//! **Gimbal lock** at `β = ±π/2` (the first and last revolute axes align): `E` is singular,
//! the expanded mass matrix `Eᵀ M E` is singular (one direction of `(α̇, γ̇)` costs no kinetic
//! energy) and its condition number grows like `1/cos²β` next to it.
//! [`SingleDofMap::v_to_single_dof`] fails with [`RbdError::Singular`] (within
//! [`GIMBAL_TOL`] of it); ABA, `M⁻¹` and hence the VI's initial guess `q + Δt M⁻¹ p` fail with
//! [`RbdError::NotPositiveDefinite`] when a configuration lands on it, and the DEL Newton
//! Jacobian (whose leading term is `M/Δt`) is singular there (`vidyn-vi`'s
//! `SingularJacobian`) and ill-conditioned near it, where the integration error grows like
//! `1/cos²β`: the expanded model lists its chains' pitch coordinates ([`Model::gimbals`]), and
//! `vidyn-vi` refuses a step that comes within `GIMBAL_MARGIN` (`|cos β| < 0.1`) of the lock
//! (`GimbalLock`) instead of returning a wrong motion. The neutral
//! configuration (`β = 0`) is as far from it as possible, so a floating base that stays
//! within ±90° of level pitch is safe; a Lie-group free-flyer (a DEL on SE(3)) would have no
//! such singularity but is not a chain of 1-dof joints.
//!
//! # Coordinate maps
//! Original coordinates follow Pinocchio's layouts (see [`crate::joint`]): free-flyer
//! `q = (p, quaternion)`, `v = (Rᵀ ṗ, ω)` (both in the body frame); planar
//! `q = (x, y, cos φ, sin φ)`, `v = (R₂(φ)ᵀ (ẋ, ẏ), φ̇)`; spherical `q` a quaternion,
//! `v = ω`. The velocity map `v = J(θ) θ̇` ([`SingleDofMap::velocity_map`]) is block diagonal
//! with blocks `1` (1-dof), `diag(R₂(φ)ᵀ, 1)` (planar), `E` (spherical) and `diag(Rᵀ, E)`
//! (free-flyer). Since the kinetic energies agree, the expanded mass matrix is
//! `M_θ(θ) = Jᵀ M(q(θ)) J` and generalised forces map as `τ_θ = Jᵀ τ`, momenta as `p_θ = Jᵀ p`.
//!
//! # Limits and joint friction
//! Position limits of translations carry over (they are parent-frame coordinates in both
//! models); angles of composite joints are unbounded. Velocity and effort limits, damping and
//! Coulomb friction carry over where a chain coordinate's velocity is an original velocity
//! component (1-dof joints, the planar `φ`); elsewhere velocity and effort limits become `+∞`.
//! Viscous damping `d` that is the same on the 2 (planar) or 3 (free-flyer) translational
//! components is exact on `(x, y[, z])` too (`J_tᵀ d 1 J_t = d 1` for the rotation `J_t`), so
//! it is copied; damping that is anisotropic in translation, damping of a rotation of a
//! spherical or free-flyer joint (`Eᵀ D E` is not diagonal) and Coulomb friction on any
//! composite coordinate other than the planar `φ` have no per-coordinate equivalent, and the
//! expansion fails with [`RbdError::InvalidModel`] unless they are zero.

mod centred;
mod chart;

pub use centred::CentredExpansion;
pub use chart::CompositeJoint;

use crate::check::check_vector;
use crate::error::{RbdError, Result};
use crate::joint::Joint;
use crate::model::{JointLimits, Model, ModelBuilder};
use nalgebra::{DMatrix, Matrix2, Matrix3, Quaternion, UnitQuaternion, Vector3};
use vidyn_spatial::{Inertia, Se3};

/// `|cos β|` below which [`SingleDofMap::v_to_single_dof`] reports gimbal lock: `E⁻¹` has
/// norm ≈ `1/|cos β|`, so the converted rates would carry a relative error ≈ `ε / |cos β|`
/// (≥ 2e-7 here) and grow without bound.
pub const GIMBAL_TOL: f64 = 1e-9;

/// The pitch `β` of a Z-Y-X Euler-angle chain in an expanded model: where its gimbal locks.
#[derive(Clone, Debug, PartialEq)]
pub struct Gimbal {
    /// The original (spherical or free-flyer) joint.
    pub joint: String,
    /// The configuration index of `β` (the `name_ry` coordinate).
    pub pitch: usize,
}

/// How one original joint is expanded.
#[derive(Clone, Debug, PartialEq)]
struct Segment {
    joint: Joint,
    name: String,
    /// First configuration / velocity index in the original model.
    iq: usize,
    iv: usize,
    /// First coordinate in the expanded model.
    ie: usize,
}

/// Coordinate maps between a model (configuration `q` of length `nq`, velocity `v` of length
/// `nv`) and its single-dof expansion (coordinates `θ`, rates `θ̇`, both of length `n`); see
/// the module documentation for the layouts.
#[derive(Clone, Debug, PartialEq)]
pub struct SingleDofMap {
    /// `nq` of the original model.
    pub nq: usize,
    /// `nv` of the original model.
    pub nv: usize,
    /// `nq = nv` of the expanded model.
    pub n: usize,
    /// `bodies[i]`: the body of the expanded model that carries original body `i` (the last
    /// body of its chain), `(nbodies,)`.
    pub bodies: Vec<usize>,
    segments: Vec<Segment>,
}

/// Names of the chain joints of a composite joint, in chain order.
#[must_use]
pub fn chain_joint_names(joint: &Joint, name: &str) -> Vec<String> {
    let suffixes: &[&str] = match joint {
        Joint::Revolute { .. } | Joint::Prismatic { .. } => return vec![name.to_string()],
        Joint::Planar => &["tx", "ty", "rz"],
        Joint::Spherical => &["rz", "ry", "rx"],
        Joint::FreeFlyer => &["tx", "ty", "tz", "rz", "ry", "rx"],
    };
    suffixes.iter().map(|s| format!("{name}_{s}")).collect()
}

/// The 1-dof joints of the chain that replaces `joint`, in order.
fn chain_joints(joint: &Joint) -> Vec<Joint> {
    let (px, py, pz) = (Joint::Prismatic { axis: Vector3::x() }, Joint::Prismatic { axis: Vector3::y() }, Joint::Prismatic { axis: Vector3::z() });
    let (rx, ry, rz) = (Joint::Revolute { axis: Vector3::x() }, Joint::Revolute { axis: Vector3::y() }, Joint::Revolute { axis: Vector3::z() });
    match joint {
        Joint::Revolute { .. } | Joint::Prismatic { .. } => vec![*joint],
        Joint::Planar => vec![px, py, rz],
        Joint::Spherical => vec![rz, ry, rx],
        Joint::FreeFlyer => vec![px, py, pz, rz, ry, rx],
    }
}

/// Limits of each chain joint (module documentation, "Limits and joint friction").
fn chain_limits(model: &Model, body: usize) -> Result<Vec<JointLimits>> {
    let (joint, name) = (&model.joints[body], &model.joint_names[body]);
    let (iq, iv) = (model.idx_q[body], model.idx_v[body]);
    let l = &model.limits;
    let one = |lo: f64, hi: f64, vel: f64, eff: f64, damp: f64, fric: f64| JointLimits {
        lower: vec![lo],
        upper: vec![hi],
        velocity: vec![vel],
        effort: vec![eff],
        damping: vec![damp],
        friction: vec![fric],
    };
    let inf = f64::INFINITY;
    let damping = &l.damping[iv..iv + joint.nv()];
    let friction = &l.friction[iv..iv + joint.nv()];
    let fail = |what: &str| {
        RbdError::InvalidModel(format!(
            "joint '{name}' ({}): {what} has no per-coordinate equivalent on the single-dof chain (see vidyn_rbd::single_dof)",
            joint.kind_name()
        ))
    };
    // isotropic translational damping, or an error
    let translational = |k: usize| -> Result<f64> {
        let d = damping[0];
        if damping[..k].iter().any(|&x| x != d) {
            return Err(fail("anisotropic translational damping"));
        }
        if friction[..k].iter().any(|&x| x != 0.0) {
            return Err(fail("translational Coulomb friction"));
        }
        Ok(d)
    };
    let rotational = |from: usize| -> Result<()> {
        if damping[from..].iter().chain(&friction[from..]).any(|&x| x != 0.0) {
            return Err(fail("rotational damping or friction"));
        }
        Ok(())
    };
    Ok(match joint {
        Joint::Revolute { .. } | Joint::Prismatic { .. } => {
            vec![one(l.lower_position[iq], l.upper_position[iq], l.velocity[iv], l.effort[iv], damping[0], friction[0])]
        }
        Joint::Planar => {
            let d = translational(2)?;
            vec![
                one(l.lower_position[iq], l.upper_position[iq], inf, inf, d, 0.0),
                one(l.lower_position[iq + 1], l.upper_position[iq + 1], inf, inf, d, 0.0),
                one(-inf, inf, l.velocity[iv + 2], l.effort[iv + 2], damping[2], friction[2]),
            ]
        }
        Joint::Spherical => {
            rotational(0)?;
            vec![one(-inf, inf, inf, inf, 0.0, 0.0); 3]
        }
        Joint::FreeFlyer => {
            let d = translational(3)?;
            rotational(3)?;
            let mut out: Vec<JointLimits> = (0..3).map(|k| one(l.lower_position[iq + k], l.upper_position[iq + k], inf, inf, d, 0.0)).collect();
            out.extend(std::iter::repeat_n(one(-inf, inf, inf, inf, 0.0, 0.0), 3));
            out
        }
    })
}

/// The single-dof expansion of `model` and the coordinate maps to it (module
/// documentation). Bodies keep the original depth-first order with each composite body
/// replaced by its chain, so `bodies[i]` is increasing. O(n).
///
/// Errors: [`RbdError::InvalidModel`] for damping or friction without a per-coordinate
/// equivalent, when a chain joint name (`name_tx`, …) is already taken, or for a model with
/// mimic joints ([`crate::mimic`]).
pub fn to_single_dof(model: &Model) -> Result<(Model, SingleDofMap)> {
    model.refuse_mimics("to_single_dof")?;
    let mut b = ModelBuilder::new(&model.name);
    b.gravity(model.gravity.linear);
    let n = model.nbodies();
    let mut last = vec![0; n];
    let mut segments = Vec::with_capacity(n);
    let mut ie = 0;
    for i in 0..n {
        let joint = model.joints[i];
        let name = &model.joint_names[i];
        let limits = chain_limits(model, i)?;
        let joints = chain_joints(&joint);
        let names = chain_joint_names(&joint, name);
        let mut parent = model.parents[i].map(|p| last[p]);
        for (k, ((j, jn), lim)) in joints.iter().zip(&names).zip(limits).enumerate() {
            let first = k == 0;
            let placement = if first { model.joint_placements[i] } else { Se3::identity() };
            let inertia = if k + 1 == joints.len() { model.inertias[i] } else { Inertia::zero() };
            let id = b.add_body(parent, jn, *j, placement, inertia)?;
            b.set_limits(id, lim)?;
            parent = Some(id);
        }
        last[i] = parent.ok_or_else(|| RbdError::InvalidModel(format!("joint '{name}' expands to no body")))?;
        segments.push(Segment { joint, name: name.clone(), iq: model.idx_q[i], iv: model.idx_v[i], ie });
        ie += joints.len();
    }
    for f in &model.frames {
        b.add_frame(&f.name, f.parent.map(|p| last[p]), f.placement, f.kind)?;
    }
    let mut expanded = b.build()?;
    for (j, name) in model.joints.iter().zip(&model.joint_names) {
        if matches!(j, Joint::Spherical | Joint::FreeFlyer) {
            let pitch = expanded.idx_q[expanded.joint_index(&format!("{name}_ry"))?];
            expanded.gimbals.push(Gimbal { joint: name.clone(), pitch });
        }
    }
    let bodies = model
        .joints
        .iter()
        .zip(&model.joint_names)
        .map(|(j, name)| chain_joint_names(j, name).last().map_or(Ok(0), |jn| expanded.joint_index(jn)))
        .collect::<Result<Vec<usize>>>()?;
    let map = SingleDofMap { nq: model.nq, nv: model.nv, n: expanded.nv, bodies, segments };
    Ok((expanded, map))
}

impl Model {
    /// This model with every joint a revolute or prismatic one, and the coordinate maps
    /// ([`to_single_dof`]).
    pub fn to_single_dof(&self) -> Result<(Model, SingleDofMap)> {
        to_single_dof(self)
    }
}

/// `Rz(α) Ry(β) Rx(γ)`.
#[must_use]
pub fn zyx_rotation(alpha: f64, beta: f64, gamma: f64) -> UnitQuaternion<f64> {
    UnitQuaternion::from_axis_angle(&Vector3::z_axis(), alpha)
        * UnitQuaternion::from_axis_angle(&Vector3::y_axis(), beta)
        * UnitQuaternion::from_axis_angle(&Vector3::x_axis(), gamma)
}

/// Z-Y-X Euler angles `(α, β, γ)` with `R = Rz(α) Ry(β) Rx(γ)`, `α, γ ∈ (−π, π]`,
/// `β ∈ [−π/2, π/2]`. `α = atan2(R₁₀, R₀₀)` (0 at gimbal lock, where only `α ± γ` is
/// defined), then `β` and `γ` are read off `N = Rz(α)ᵀ R = Ry(β) Rx(γ)`, which keeps the
/// reconstruction accurate to round-off even next to gimbal lock (where `α` itself is
/// ill-determined).
#[must_use]
pub fn zyx_angles(r: &Matrix3<f64>) -> Vector3<f64> {
    let alpha = if r[(1, 0)] == 0.0 && r[(0, 0)] == 0.0 { 0.0 } else { r[(1, 0)].atan2(r[(0, 0)]) };
    let nm = vidyn_spatial::so3::rotation_about(&Vector3::z(), alpha).transpose() * r;
    let beta = (-nm[(2, 0)]).atan2(nm[(0, 0)]);
    let gamma = (-nm[(1, 2)]).atan2(nm[(1, 1)]);
    Vector3::new(alpha, beta, gamma)
}

/// `E(β, γ)`: body angular velocity `ω = E (α̇, β̇, γ̇)` of `Rz(α) Ry(β) Rx(γ)`.
#[must_use]
pub fn zyx_rate_matrix(beta: f64, gamma: f64) -> Matrix3<f64> {
    let (sb, cb) = vidyn_spatial::sin_cos(beta);
    let (sg, cg) = vidyn_spatial::sin_cos(gamma);
    Matrix3::new(-sb, 0.0, 1.0, sg * cb, cg, 0.0, cg * cb, -sg, 0.0)
}

/// Unit quaternion from Pinocchio's `[qx qy qz qw]` (renormalised).
fn quaternion(q: &[f64]) -> UnitQuaternion<f64> {
    UnitQuaternion::from_quaternion(Quaternion::new(q[3], q[0], q[1], q[2]))
}

/// Writes `r` as `[qx qy qz qw]` with `qw ≥ 0`.
fn write_quaternion(r: &UnitQuaternion<f64>, out: &mut [f64]) {
    let c = r.quaternion().coords;
    let sign = if c.w < 0.0 { -1.0 } else { 1.0 };
    for (o, x) in out.iter_mut().zip(c.iter()) {
        *o = sign * x;
    }
}

fn planar_rotation(phi: f64) -> Matrix2<f64> {
    let (s, c) = vidyn_spatial::sin_cos(phi);
    Matrix2::new(c, -s, s, c)
}

impl SingleDofMap {
    fn check_q(&self, q: &[f64]) -> Result<()> {
        check_vector(q, "q", self.nq, "model.nq")?;
        for s in &self.segments {
            s.joint.check_configuration(&q[s.iq..s.iq + s.joint.nq()], &s.name, s.iq)?;
        }
        Ok(())
    }

    /// Expanded coordinates `θ` `(n,)` of the configuration `q` `(nq,)`: angles by
    /// [`zyx_angles`] (`α, γ ∈ (−π, π]`, `β ∈ [−π/2, π/2]`), planar `φ = atan2(sin, cos)`.
    /// Errors for a wrong length, non-finite entries or non-unit quaternions.
    pub fn q_to_single_dof(&self, q: &[f64]) -> Result<Vec<f64>> {
        self.check_q(q)?;
        let mut out = vec![0.0; self.n];
        for s in &self.segments {
            let (q, t) = (&q[s.iq..s.iq + s.joint.nq()], &mut out[s.ie..s.ie + s.joint.nv()]);
            match s.joint {
                Joint::Revolute { .. } | Joint::Prismatic { .. } => t[0] = q[0],
                Joint::Planar => {
                    t[0] = q[0];
                    t[1] = q[1];
                    t[2] = q[3].atan2(q[2]);
                }
                Joint::Spherical => t.copy_from_slice(zyx_angles(quaternion(q).to_rotation_matrix().matrix()).as_slice()),
                Joint::FreeFlyer => {
                    t[..3].copy_from_slice(&q[..3]);
                    t[3..].copy_from_slice(zyx_angles(quaternion(&q[3..]).to_rotation_matrix().matrix()).as_slice());
                }
            }
        }
        Ok(out)
    }

    /// The configuration `q` `(nq,)` of expanded coordinates `θ` `(n,)` (any angles;
    /// quaternions with `qw ≥ 0`, planar `(cos φ, sin φ)`).
    pub fn q_from_single_dof(&self, theta: &[f64]) -> Result<Vec<f64>> {
        check_vector(theta, "theta", self.n, "n")?;
        let mut out = vec![0.0; self.nq];
        for s in &self.segments {
            let (t, q) = (&theta[s.ie..s.ie + s.joint.nv()], &mut out[s.iq..s.iq + s.joint.nq()]);
            match s.joint {
                Joint::Revolute { .. } | Joint::Prismatic { .. } => q[0] = t[0],
                Joint::Planar => {
                    q[0] = t[0];
                    q[1] = t[1];
                    q[2] = t[2].cos();
                    q[3] = t[2].sin();
                }
                Joint::Spherical => write_quaternion(&zyx_rotation(t[0], t[1], t[2]), q),
                Joint::FreeFlyer => {
                    q[..3].copy_from_slice(&t[..3]);
                    write_quaternion(&zyx_rotation(t[3], t[4], t[5]), &mut q[3..]);
                }
            }
        }
        Ok(out)
    }

    /// The velocity map `J(θ)` `(nv, n)`: `v = J θ̇` (module documentation). Block diagonal.
    pub fn velocity_map(&self, theta: &[f64]) -> Result<DMatrix<f64>> {
        check_vector(theta, "theta", self.n, "n")?;
        let mut j = DMatrix::zeros(self.nv, self.n);
        for s in &self.segments {
            let d = s.joint.nv();
            let block = chart::velocity_block(&s.joint, &theta[s.ie..s.ie + d]);
            j.view_mut((s.iv, s.ie), (d, d)).copy_from(&block.view((0, 0), (d, d)));
        }
        Ok(j)
    }

    /// The original velocity `v = J(θ) θ̇` `(nv,)` of expanded rates `θ̇` `(n,)` at `θ`.
    pub fn v_from_single_dof(&self, theta: &[f64], theta_dot: &[f64]) -> Result<Vec<f64>> {
        check_vector(theta_dot, "theta_dot", self.n, "n")?;
        let j = self.velocity_map(theta)?;
        Ok((j * nalgebra::DVector::from_column_slice(theta_dot)).as_slice().to_vec())
    }

    /// Expanded rates `θ̇ = J⁻¹ v` `(n,)` of the velocity `v` `(nv,)` at configuration `q`
    /// `(nq,)` (with `θ` = [`Self::q_to_single_dof`]`(q)`). Errors with
    /// [`RbdError::Singular`] at gimbal lock (`|cos β| < GIMBAL_TOL`, module documentation).
    pub fn v_to_single_dof(&self, q: &[f64], v: &[f64]) -> Result<Vec<f64>> {
        let theta = self.q_to_single_dof(q)?;
        check_vector(v, "v", self.nv, "model.nv")?;
        let mut out = vec![0.0; self.n];
        self.chart_rates(&theta, v, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::{pendulum_chain, random_tree};
    use crate::{crba, forward_kinematics, kinetic_energy, placements, potential_energy, random_configuration, update_frame_placements};
    use crate::{difference, FrameKind};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn models() -> Vec<Model> {
        let mut out = vec![pendulum_chain(4, false)];
        for (n, seed) in [(1, 0), (3, 1), (7, 2), (15, 3), (30, 4)] {
            out.push(random_tree(n, seed, &Joint::examples()));
        }
        for kind in [Joint::Spherical, Joint::FreeFlyer, Joint::Planar] {
            out.push(random_tree(6, 9, &[kind, Joint::Revolute { axis: Vector3::x() }]));
        }
        out
    }

    fn random_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
        (0..n).map(|_| rng.random_range(-2.0..2.0)).collect()
    }

    fn amax(x: impl IntoIterator<Item = f64>) -> f64 {
        x.into_iter().fold(0.0_f64, |m, v| m.max(v.abs()))
    }

    /// max over entries of |a − b|, relative to max(1, |b|∞)
    fn rel(a: &[f64], b: &[f64]) -> f64 {
        amax(a.iter().zip(b).map(|(x, y)| x - y)) / amax(b.iter().copied()).max(1.0)
    }

    #[test]
    fn structure_names_and_limits() {
        let m = random_tree(12, 5, &Joint::examples());
        let (e, map) = m.to_single_dof().unwrap();
        assert!(e.joints.iter().all(|j| matches!(j, Joint::Revolute { .. } | Joint::Prismatic { .. })));
        assert_eq!((map.nq, map.nv, map.n, e.nq, e.nv), (m.nq, m.nv, m.nv, m.nv, m.nv));
        assert_eq!(e.nbodies(), m.nv);
        assert!((e.total_mass() - m.total_mass()).abs() < 1e-12);
        // bodies in chain order, original depth-first order kept
        let names: Vec<String> = m.joints.iter().zip(&m.joint_names).flat_map(|(j, n)| chain_joint_names(j, n)).collect();
        assert_eq!(e.joint_names, names);
        for (i, &bi) in map.bodies.iter().enumerate() {
            assert_eq!(e.inertias[bi], m.inertias[i]);
            let want = m.joint_names[i].clone();
            assert!(e.joint_names[bi] == want || e.joint_names[bi].starts_with(&format!("{want}_")));
            // parent of a chain's first body is the last body of the original parent's chain
            let first = bi + 1 - m.joints[i].nv();
            assert_eq!(e.parents[first], m.parents[i].map(|p| map.bodies[p]));
            for k in first..bi {
                assert_eq!(e.inertias[k].mass, 0.0);
                assert_eq!(e.parents[k + 1], Some(k));
            }
        }
        assert_eq!(e.frames.len(), m.frames.len());
        for (f, g) in e.frames.iter().zip(&m.frames) {
            assert_eq!((&f.name, f.kind, f.placement), (&g.name, g.kind, g.placement));
            assert_eq!(f.parent, g.parent.map(|p| map.bodies[p]));
        }
        assert_eq!(e.gravity, m.gravity);
        // a floating-base example: names of the free-flyer chain
        let ff = random_tree(2, 1, &[Joint::FreeFlyer]);
        let (e, _) = ff.to_single_dof().unwrap();
        assert_eq!(&e.joint_names[..6], ["joint1_tx", "joint1_ty", "joint1_tz", "joint1_rz", "joint1_ry", "joint1_rx"]);
        assert_eq!(e.frames.iter().find(|f| f.name == "joint1" && f.kind == FrameKind::Joint).unwrap().parent, Some(5));
    }

    #[test]
    fn limits_and_damping_carry_over_where_exact() {
        let mut b = ModelBuilder::new("limits");
        let unit = Inertia::new(1.0, Vector3::new(0.1, 0.2, 0.3), Matrix3::identity());
        let base = b.add_body(None, "base", Joint::FreeFlyer, Se3::identity(), unit).unwrap();
        let mut l = JointLimits::unbounded(&Joint::FreeFlyer);
        l.lower[..3].copy_from_slice(&[-1.0, -2.0, -3.0]);
        l.upper[..3].copy_from_slice(&[1.0, 2.0, 3.0]);
        l.damping[..3].fill(0.5);
        b.set_limits(base, l).unwrap();
        let plane = b.add_body(Some(base), "plane", Joint::Planar, Se3::identity(), unit).unwrap();
        let mut l = JointLimits::unbounded(&Joint::Planar);
        l.damping.copy_from_slice(&[0.2, 0.2, 0.7]);
        l.effort[2] = 4.0;
        l.friction[2] = 0.1;
        b.set_limits(plane, l).unwrap();
        let hinge = b.add_body(Some(plane), "hinge", Joint::Revolute { axis: Vector3::y() }, Se3::identity(), unit).unwrap();
        let mut l = JointLimits::unbounded(&Joint::Revolute { axis: Vector3::y() });
        (l.lower[0], l.upper[0], l.velocity[0], l.effort[0], l.damping[0], l.friction[0]) = (-1.5, 1.5, 3.0, 9.0, 0.3, 0.05);
        b.set_limits(hinge, l).unwrap();
        let m = b.build().unwrap();
        let (e, _) = m.to_single_dof().unwrap();
        let inf = f64::INFINITY;
        assert_eq!(e.limits.lower_position, [-1.0, -2.0, -3.0, -inf, -inf, -inf, -inf, -inf, -inf, -1.5]);
        assert_eq!(e.limits.upper_position, [1.0, 2.0, 3.0, inf, inf, inf, inf, inf, inf, 1.5]);
        assert_eq!(e.limits.damping, [0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.2, 0.2, 0.7, 0.3]);
        assert_eq!(e.limits.friction, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.05]);
        assert_eq!(e.limits.effort[8..], [4.0, 9.0]);
        assert_eq!(e.limits.velocity[9], 3.0);

        // what has no per-coordinate equivalent is refused
        let refuse = |joint: Joint, set: &dyn Fn(&mut JointLimits)| {
            let mut b = ModelBuilder::new("refuse");
            let id = b.add_body(None, "j", joint, Se3::identity(), unit).unwrap();
            let mut l = JointLimits::unbounded(&joint);
            set(&mut l);
            b.set_limits(id, l).unwrap();
            let err = b.build().unwrap().to_single_dof().unwrap_err();
            assert!(matches!(err, RbdError::InvalidModel(ref s) if s.contains("'j'")), "{err}");
        };
        refuse(Joint::Spherical, &|l| l.damping[1] = 0.1);
        refuse(Joint::FreeFlyer, &|l| l.damping[0] = 0.1);
        refuse(Joint::FreeFlyer, &|l| l.damping[4] = 0.1);
        refuse(Joint::Planar, &|l| l.friction[0] = 0.1);
        refuse(Joint::Planar, &|l| l.damping[1] = 0.1);

        // a chain joint name that is already taken
        let mut b = ModelBuilder::new("clash");
        let s = b.add_body(None, "ball", Joint::Spherical, Se3::identity(), unit).unwrap();
        b.add_body(Some(s), "ball_rx", Joint::Revolute { axis: Vector3::x() }, Se3::identity(), unit).unwrap();
        assert!(matches!(b.build().unwrap().to_single_dof(), Err(RbdError::InvalidModel(_))));
    }

    /// World placements of every original body and frame agree to 1e-12, from original
    /// random configurations (through `q_to_single_dof`) and from random expanded
    /// coordinates (through `q_from_single_dof`, any angles).
    #[test]
    fn forward_kinematics_agrees() {
        for m in models() {
            let (e, map) = m.to_single_dof().unwrap();
            let (mut ws, mut we) = (m.workspace(), e.workspace());
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            for trial in 0..12 {
                let (q, theta) = if trial % 2 == 0 {
                    let q = random_configuration(&m, &mut rng);
                    let t = map.q_to_single_dof(&q).unwrap();
                    (q, t)
                } else {
                    let t: Vec<f64> = (0..map.n).map(|_| rng.random_range(-4.0..4.0)).collect();
                    (map.q_from_single_dof(&t).unwrap(), t)
                };
                placements(&m, &mut ws, &q).unwrap();
                placements(&e, &mut we, &theta).unwrap();
                update_frame_placements(&m, &mut ws);
                update_frame_placements(&e, &mut we);
                for (i, &bi) in map.bodies.iter().enumerate() {
                    let (a, b) = (&ws.placements[i], &we.placements[bi]);
                    let scale = a.translation.norm().max(1.0);
                    assert!((a.rotation - b.rotation).abs().max() < 1e-12, "{} body {i}", m.name);
                    assert!((a.translation - b.translation).abs().max() < 1e-12 * scale, "{} body {i}", m.name);
                }
                for (a, b) in ws.frame_placements.iter().zip(&we.frame_placements) {
                    assert!(
                        (a.rotation - b.rotation).abs().max() < 1e-12 && (a.translation - b.translation).abs().max() < 1e-12 * a.translation.norm().max(1.0)
                    );
                }
                // round trip through the other coordinates reproduces the placement
                let back = map.q_to_single_dof(&map.q_from_single_dof(&theta).unwrap()).unwrap();
                placements(&e, &mut we, &back).unwrap();
                for (i, &bi) in map.bodies.iter().enumerate() {
                    assert!((ws.placements[i].rotation - we.placements[bi].rotation).abs().max() < 1e-12);
                }
            }
        }
    }

    /// Body velocities, kinetic and potential energy agree under `v = J θ̇`; the velocity
    /// maps are inverse to each other; `M_θ = Jᵀ M J`.
    #[test]
    fn velocities_energies_and_mass_matrix_agree() {
        for m in models() {
            let (e, map) = m.to_single_dof().unwrap();
            let (mut ws, mut we) = (m.workspace(), e.workspace());
            let mut rng = ChaCha8Rng::seed_from_u64(2);
            for _ in 0..8 {
                let q = random_configuration(&m, &mut rng);
                let theta = map.q_to_single_dof(&q).unwrap();
                let theta_dot = random_vec(&mut rng, map.n);
                let v = map.v_from_single_dof(&theta, &theta_dot).unwrap();
                let (zv, ze) = (vec![0.0; m.nv], vec![0.0; map.n]);
                forward_kinematics(&m, &mut ws, &q, &v, &zv).unwrap();
                forward_kinematics(&e, &mut we, &theta, &theta_dot, &ze).unwrap();
                for (i, &bi) in map.bodies.iter().enumerate() {
                    let (a, b) = (ws.velocities[i].to_vector(), we.velocities[bi].to_vector());
                    assert!((a - b).abs().max() < 1e-12 * a.abs().max().max(1.0), "{} body {i}", m.name);
                }
                let (t, te) = (kinetic_energy(&m, &mut ws, &q, &v).unwrap(), kinetic_energy(&e, &mut we, &theta, &theta_dot).unwrap());
                assert!((t - te).abs() < 1e-12 * t.abs().max(1.0), "{}: {t} vs {te}", m.name);
                let (u, ue) = (potential_energy(&m, &mut ws, &q).unwrap(), potential_energy(&e, &mut we, &theta).unwrap());
                assert!((u - ue).abs() < 1e-12 * u.abs().max(1.0), "{}: {u} vs {ue}", m.name);
                // inverse map: random states are away from gimbal lock with probability 1;
                // the round trip loses ≈ ε·cond(E) ≈ ε/|cos β|
                let back = map.v_to_single_dof(&q, &v).unwrap();
                let min_cos = map
                    .segments
                    .iter()
                    .filter_map(|s| match s.joint {
                        Joint::Spherical => Some(theta[s.ie + 1].cos().abs()),
                        Joint::FreeFlyer => Some(theta[s.ie + 4].cos().abs()),
                        _ => None,
                    })
                    .fold(1.0_f64, f64::min);
                assert!(rel(&back, &theta_dot) < 1e-13 / min_cos, "{}: {} (min |cos β| {min_cos})", m.name, rel(&back, &theta_dot));
                let j = map.velocity_map(&theta).unwrap();
                let big = crba(&m, &mut ws, &q).unwrap().clone();
                let me = crba(&e, &mut we, &theta).unwrap().clone();
                let want = j.transpose() * big * &j;
                assert!((&me - &want).abs().max() < 1e-12 * want.abs().max().max(1.0), "{}", m.name);
            }
        }
    }

    /// `J θ̇` is the derivative of `q(θ)`: central differences on the manifold,
    /// `(q(θ + hθ̇) ⊖ q(θ − hθ̇)) / 2h`, h = 1e-6 (truncation ≈ h² ≈ 1e-12, round-off ≈ ε/h ≈
    /// 2e-10 relative), asserted to 1e-7 relative.
    #[test]
    fn velocity_map_is_the_derivative_of_the_configuration_map() {
        let h = 1e-6;
        for m in models() {
            let (_, map) = m.to_single_dof().unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(3);
            for _ in 0..6 {
                let theta: Vec<f64> = (0..map.n).map(|_| rng.random_range(-3.0..3.0)).collect();
                let td = random_vec(&mut rng, map.n);
                let shift = |s: f64| -> Vec<f64> { theta.iter().zip(&td).map(|(t, d)| t + s * h * d).collect() };
                let (qp, qm) = (map.q_from_single_dof(&shift(1.0)).unwrap(), map.q_from_single_dof(&shift(-1.0)).unwrap());
                let fd: Vec<f64> = difference(&m, &qm, &qp).unwrap().iter().map(|x| x / (2.0 * h)).collect();
                let v = map.v_from_single_dof(&theta, &td).unwrap();
                assert!(rel(&fd, &v) < 1e-7, "{}: {}", m.name, rel(&fd, &v));
            }
        }
    }

    #[test]
    fn gimbal_lock_is_reported_and_singular() {
        let mut b = ModelBuilder::new("ball");
        let rod = Inertia::new(1.0, Vector3::new(0.0, 0.0, -0.5), Matrix3::from_diagonal(&Vector3::new(0.1, 0.1, 0.01)));
        b.add_body(None, "ball", Joint::Spherical, Se3::identity(), rod).unwrap();
        let m = b.build().unwrap();
        let (e, map) = m.to_single_dof().unwrap();
        for pitch in [std::f64::consts::FRAC_PI_2, -std::f64::consts::FRAC_PI_2] {
            let q = map.q_from_single_dof(&[0.3, pitch, -0.2]).unwrap();
            let err = map.v_to_single_dof(&q, &[0.1, 0.2, 0.3]).unwrap_err();
            assert!(matches!(err, RbdError::Singular { ref joint, .. } if joint == "ball"), "{err}");
            // E has rank 2 there, so M_θ = Eᵀ M E is singular
            let mut we = e.workspace();
            let me = crba(&e, &mut we, &[0.3, pitch, -0.2]).unwrap().clone();
            let eig = me.symmetric_eigenvalues();
            assert!(eig.min().abs() < 1e-12 * eig.max(), "{eig}");
        }
        // just away from it the map works
        let q = map.q_from_single_dof(&[0.3, 1.5, -0.2]).unwrap();
        assert!(map.v_to_single_dof(&q, &[0.1, 0.2, 0.3]).is_ok());
    }

    #[test]
    fn euler_angles_are_exact_near_gimbal_lock() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        for k in 0..200 {
            let off = if k % 2 == 0 { 10f64.powi(-(k % 17)) } else { rng.random_range(-1.5..1.5) };
            let (a, bt, g) = (rng.random_range(-3.0..3.0), std::f64::consts::FRAC_PI_2 - off, rng.random_range(-3.0..3.0));
            let r = zyx_rotation(a, bt, g).to_rotation_matrix().into_inner();
            let t = zyx_angles(&r);
            let back = zyx_rotation(t.x, t.y, t.z).to_rotation_matrix().into_inner();
            assert!((back - r).abs().max() < 1e-14, "{k}: {}", (back - r).abs().max());
            assert!(t.y.abs() <= std::f64::consts::FRAC_PI_2 && t.x.abs() <= std::f64::consts::PI && t.z.abs() <= std::f64::consts::PI);
        }
    }

    #[test]
    fn bad_inputs_are_errors() {
        let m = random_tree(4, 2, &[Joint::FreeFlyer, Joint::Spherical]);
        let (_, map) = m.to_single_dof().unwrap();
        assert!(matches!(map.q_to_single_dof(&vec![0.0; m.nq + 1]), Err(RbdError::Dimension { .. })));
        assert!(matches!(map.q_to_single_dof(&vec![0.0; m.nq]), Err(RbdError::NotNormalized { .. })));
        assert!(matches!(map.q_from_single_dof(&vec![f64::NAN; map.n]), Err(RbdError::NonFinite { .. })));
        assert!(matches!(map.velocity_map(&[0.0]), Err(RbdError::Dimension { .. })));
        let q = crate::neutral(&m);
        assert!(matches!(map.v_to_single_dof(&q, &[0.0]), Err(RbdError::Dimension { .. })));
        assert!(matches!(map.v_from_single_dof(&vec![0.0; map.n], &[0.0]), Err(RbdError::Dimension { .. })));
    }
}
