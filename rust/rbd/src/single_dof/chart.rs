//! Step charts: local coordinates of the configuration space centred at a configuration `c`,
//! in which a composite joint is the 1-dof chain of [`super::to_single_dof`] starting at `c`.
//!
//! Composite joints have no global coordinates free of singularities (Euler angles lock at
//! pitch ±90°), but a chart re-centred at every step never comes near one. The chart
//! centred at `c` writes a configuration as `q = c ∘ τ(θ)`, with `τ(0)` the identity:
//!
//! | joint | `q = c ∘ τ(θ)` |
//! |---|---|
//! | revolute / prismatic | `q = θ` (its own coordinate, not re-centred) |
//! | planar | `M(q) = M(c) · Trans(θ₀, θ₁, 0) · Rz(θ₂)` |
//! | spherical | `R(q) = R(c) · Rz(θ₀) Ry(θ₁) Rx(θ₂)` |
//! | free-flyer | `M(q) = M(c) · Trans(θ₀, θ₁, θ₂) · Rz(θ₃) Ry(θ₄) Rx(θ₅)` |
//!
//! (`M` the joint's transform, Pinocchio's layouts.) It is the single-dof expansion's chain
//! with the first joint of each composite chain placed at `placement · M(c)` instead of
//! `placement` ([`SingleDofMap::chart_placements`]), so the expanded model's kinematics,
//! energies and DEL recursions hold in it unchanged. Since the centre is multiplied from the
//! left, the chart is left-invariant: charts centred at `g c` and `c` give the same `θ` to
//! `g q` and `q`. The velocity `v` (Pinocchio's tangent, body frame) is `v = J(θ) θ̇` with the
//! blocks of [`SingleDofMap::velocity_map`] at the relative angles, so the chart is regular
//! while the relative pitch `θ_pitch` stays away from ±90°.

use super::{planar_rotation, quaternion, zyx_angles, zyx_rate_matrix, zyx_rotation, Segment, SingleDofMap, GIMBAL_TOL};
use crate::error::{RbdError, Result};
use crate::joint::Joint;
use crate::model::Model;
use nalgebra::{Matrix2, Matrix3, Matrix6, UnitQuaternion, Vector2, Vector3, Vector6};
use vidyn_spatial::Se3;

/// The block `J_s(θ)` (`d × d`, `d` = the joint's nv, top-left of a 6×6 padded with the
/// identity) of the velocity map `v = J θ̇` of segment `s` at its chart coordinates `t`.
pub(super) fn velocity_block(joint: &Joint, t: &[f64]) -> Matrix6<f64> {
    let mut j = Matrix6::identity();
    match joint {
        Joint::Revolute { .. } | Joint::Prismatic { .. } => {}
        Joint::Planar => j.fixed_view_mut::<2, 2>(0, 0).copy_from(&planar_rotation(t[2]).transpose()),
        Joint::Spherical => j.fixed_view_mut::<3, 3>(0, 0).copy_from(&zyx_rate_matrix(t[1], t[2])),
        Joint::FreeFlyer => {
            j.fixed_view_mut::<3, 3>(0, 0).copy_from(&zyx_rotation(t[3], t[4], t[5]).to_rotation_matrix().matrix().transpose());
            j.fixed_view_mut::<3, 3>(3, 3).copy_from(&zyx_rate_matrix(t[4], t[5]));
        }
    }
    j
}

/// The derivative `J_s'(θ)[d] = (d/dε) J_s(θ + ε d)` of [`velocity_block`] (zero outside
/// the `d × d` block). With `R(θ + ε d) = R(θ) exp(ε [E d]×)` the rotation's transpose moves
/// as `−[E d]× Rᵀ`; `E`'s own derivative is [`rate_matrix_derivative`].
fn velocity_block_derivative(joint: &Joint, t: &[f64], d: &[f64]) -> Matrix6<f64> {
    let mut j = Matrix6::zeros();
    match joint {
        Joint::Revolute { .. } | Joint::Prismatic { .. } => {}
        Joint::Planar => {
            let (s, c) = vidyn_spatial::sin_cos(t[2]);
            j.fixed_view_mut::<2, 2>(0, 0).copy_from(&(Matrix2::new(-s, c, -c, -s) * d[2]));
        }
        Joint::Spherical => j.fixed_view_mut::<3, 3>(0, 0).copy_from(&rate_matrix_derivative(t[1], t[2], d[1], d[2])),
        Joint::FreeFlyer => {
            let rt = zyx_rotation(t[3], t[4], t[5]).to_rotation_matrix().matrix().transpose();
            let omega = zyx_rate_matrix(t[4], t[5]) * Vector3::new(d[3], d[4], d[5]);
            j.fixed_view_mut::<3, 3>(0, 0).copy_from(&(-omega.cross_matrix() * rt));
            j.fixed_view_mut::<3, 3>(3, 3).copy_from(&rate_matrix_derivative(t[4], t[5], d[4], d[5]));
        }
    }
    j
}

/// `∂E/∂β dβ + ∂E/∂γ dγ` of [`zyx_rate_matrix`] `E(β, γ)`.
fn rate_matrix_derivative(beta: f64, gamma: f64, d_beta: f64, d_gamma: f64) -> Matrix3<f64> {
    let (sb, cb) = vidyn_spatial::sin_cos(beta);
    let (sg, cg) = vidyn_spatial::sin_cos(gamma);
    let de_dbeta = Matrix3::new(-cb, 0.0, 0.0, -sg * sb, 0.0, 0.0, -cg * sb, 0.0, 0.0);
    let de_dgamma = Matrix3::new(0.0, 0.0, 0.0, cg * cb, -sg, 0.0, -sg * cb, -cg, 0.0);
    de_dbeta * d_beta + de_dgamma * d_gamma
}

/// `S'(y)[d] = −J⁻¹ (J'(y)[d] + ad_{J d} J) S` with `J = J(y)`, `J⁻¹` and `S = S(y)` given.
fn shift_derivative_with(joint: &Joint, y: &[f64], d: &[f64], j: &Matrix6<f64>, j_inv: &Matrix6<f64>, shift: &Matrix6<f64>) -> Matrix6<f64> {
    let xi = j * vec6(&d[..joint.nv()]);
    -j_inv * (velocity_block_derivative(joint, y, d) + adjoint(joint, &xi) * j) * shift
}

/// The adjoint `ad_ξ` of the joint's Lie algebra in its tangent coordinates (Pinocchio's,
/// body frame; zero outside the `d × d` block): free-flyer `ξ = (v, ω)`,
/// `ad_ξ = [[ω×, v×], [0, ω×]]`; spherical `ω×`; planar `ξ = (v, ω)`,
/// `ad_ξ (v', ω') = (ω ẑ × v' − ω' ẑ × v, 0)`.
fn adjoint(joint: &Joint, xi: &Vector6<f64>) -> Matrix6<f64> {
    let mut m = Matrix6::zeros();
    match joint {
        Joint::Revolute { .. } | Joint::Prismatic { .. } => {}
        Joint::Planar => {
            let (vx, vy, w) = (xi[0], xi[1], xi[2]);
            m.fixed_view_mut::<3, 3>(0, 0).copy_from(&Matrix3::new(0.0, -w, vy, w, 0.0, -vx, 0.0, 0.0, 0.0));
        }
        Joint::Spherical => m.fixed_view_mut::<3, 3>(0, 0).copy_from(&Vector3::new(xi[0], xi[1], xi[2]).cross_matrix()),
        Joint::FreeFlyer => {
            let (v, w) = (Vector3::new(xi[0], xi[1], xi[2]), Vector3::new(xi[3], xi[4], xi[5]));
            m.fixed_view_mut::<3, 3>(0, 0).copy_from(&w.cross_matrix());
            m.fixed_view_mut::<3, 3>(0, 3).copy_from(&v.cross_matrix());
            m.fixed_view_mut::<3, 3>(3, 3).copy_from(&w.cross_matrix());
        }
    }
    m
}

/// The relative pitch of a composite segment's rotation (`None` for joints without one).
fn pitch(joint: &Joint, t: &[f64]) -> Option<f64> {
    match joint {
        Joint::Spherical => Some(t[1]),
        Joint::FreeFlyer => Some(t[4]),
        _ => None,
    }
}

impl Segment {
    /// This segment's chart coordinates `θ` (first `nv` entries) of `q` in the chart centred
    /// at `c` (both `(nq,)`, the whole configurations).
    fn coordinates(&self, centre: &[f64], q: &[f64]) -> Vector6<f64> {
        let (c, x) = (&centre[self.iq..self.iq + self.joint.nq()], &q[self.iq..self.iq + self.joint.nq()]);
        let mut t = Vector6::zeros();
        match self.joint {
            Joint::Revolute { .. } | Joint::Prismatic { .. } => t[0] = x[0],
            Joint::Planar => {
                let (phi_c, phi) = (c[3].atan2(c[2]), x[3].atan2(x[2]));
                let d = planar_rotation(phi_c).transpose() * Vector2::new(x[0] - c[0], x[1] - c[1]);
                t[0] = d.x;
                t[1] = d.y;
                t[2] = (phi - phi_c).sin().atan2((phi - phi_c).cos());
            }
            Joint::Spherical => t.fixed_rows_mut::<3>(0).copy_from(&zyx_angles(&(quaternion(c).inverse() * quaternion(x)).to_rotation_matrix().into_inner())),
            Joint::FreeFlyer => {
                let rc = quaternion(&c[3..]);
                t.fixed_rows_mut::<3>(0).copy_from(&rc.inverse_transform_vector(&Vector3::new(x[0] - c[0], x[1] - c[1], x[2] - c[2])));
                t.fixed_rows_mut::<3>(3).copy_from(&zyx_angles(&(rc.inverse() * quaternion(&x[3..])).to_rotation_matrix().into_inner()));
            }
        }
        t
    }
    /// `Singular` when the segment's Euler chain is within [`GIMBAL_TOL`] of its lock at `t`.
    fn check_regular(&self, t: &[f64]) -> Result<()> {
        match pitch(&self.joint, t) {
            Some(beta) if beta.cos().abs() < GIMBAL_TOL => Err(RbdError::Singular {
                joint: self.name.clone(),
                detail: format!(
                    "Z-Y-X Euler angles at gimbal lock (pitch β = {beta}, |cos β| < {GIMBAL_TOL}): the angular velocity has no unique Euler-angle rates"
                ),
            }),
            _ => Ok(()),
        }
    }
    pub(super) fn nv(&self) -> usize {
        self.joint.nv()
    }
}

fn vec6(x: &[f64]) -> Vector6<f64> {
    let mut v = Vector6::zeros();
    v.rows_mut(0, x.len()).copy_from_slice(x);
    v
}

impl SingleDofMap {
    /// The composite joints, in model order.
    pub fn composite_joints(&self) -> impl Iterator<Item = CompositeJoint<'_>> {
        self.segments.iter().filter(|s| s.nv() > 1).map(CompositeJoint)
    }

    /// The joint placements `(n,)` of the expanded model `expanded` (of this map) in the chart
    /// centred at `centre` `(nq,)`: the first joint of each composite chain at
    /// `placement · M(centre)`, the others as in `expanded`. Only the composite chains' first
    /// entries are written, so `placements` should start as a copy of
    /// `expanded.joint_placements`. O(joints), no allocation.
    pub fn chart_placements(&self, expanded: &Model, centre: &[f64], placements: &mut [Se3]) {
        for s in self.segments.iter().filter(|s| s.nv() > 1) {
            placements[s.ie] = expanded.joint_placements[s.ie] * s.joint.transform(&centre[s.iq..s.iq + s.joint.nq()]);
        }
    }

    /// Chart coordinates `θ` `(n,)` of `q` `(nq,)` in the chart centred at `centre` `(nq,)`
    /// (module docs; quaternions of `q` need not be normalised). Angles in `(−π, π]`, the
    /// pitch in `[−π/2, π/2]`. O(joints), no allocation.
    pub fn chart_coordinates(&self, centre: &[f64], q: &[f64], theta: &mut [f64]) {
        for s in &self.segments {
            let t = s.coordinates(centre, q);
            theta[s.ie..s.ie + s.nv()].copy_from_slice(&t.as_slice()[..s.nv()]);
        }
    }

    /// Calls `f(i, δ_i)` for every velocity index `i` with the displacement from `centre` to
    /// `q` as a tangent vector at `centre`, `δ = J(0) θ` (`θ` the chart coordinates of `q`; for
    /// a 1-dof joint `q_i − centre_i`): the work of a generalised force `u` held constant in
    /// the chart over that displacement is `u·δ`. O(joints), no allocation.
    pub fn for_each_displacement(&self, centre: &[f64], q: &[f64], mut f: impl FnMut(usize, f64)) {
        for s in &self.segments {
            if s.nv() == 1 {
                f(s.iv, q[s.iq] - centre[s.iq]);
                continue;
            }
            let delta = velocity_block(&s.joint, &[0.0; 6]) * s.coordinates(centre, q);
            for k in 0..s.nv() {
                f(s.iv + k, delta[k]);
            }
        }
    }

    /// The configuration `q = centre ∘ τ(θ)` `(nq,)` of chart coordinates `θ` `(n,)` (module
    /// docs). Quaternions are `q_c ⊗ q(θ)`, renormalised (no sign flip, so that a sequence of
    /// steps gives a continuous quaternion path). O(joints), no allocation.
    pub fn chart_point(&self, centre: &[f64], theta: &[f64], q: &mut [f64]) {
        let write = |r: &UnitQuaternion<f64>, out: &mut [f64]| out.copy_from_slice(r.quaternion().coords.as_slice());
        for s in &self.segments {
            let (c, t, x) = (&centre[s.iq..s.iq + s.joint.nq()], &theta[s.ie..s.ie + s.nv()], &mut q[s.iq..s.iq + s.joint.nq()]);
            match s.joint {
                Joint::Revolute { .. } | Joint::Prismatic { .. } => x[0] = t[0],
                Joint::Planar => {
                    let phi_c = c[3].atan2(c[2]);
                    let d = planar_rotation(phi_c) * Vector2::new(t[0], t[1]);
                    let (sin, cos) = vidyn_spatial::sin_cos(phi_c + t[2]);
                    x.copy_from_slice(&[c[0] + d.x, c[1] + d.y, cos, sin]);
                }
                Joint::Spherical => write(&(quaternion(c) * zyx_rotation(t[0], t[1], t[2])), x),
                Joint::FreeFlyer => {
                    let rc = quaternion(&c[3..]);
                    let d = rc * Vector3::new(t[0], t[1], t[2]);
                    x[..3].copy_from_slice(&[c[0] + d.x, c[1] + d.y, c[2] + d.z]);
                    write(&(rc * zyx_rotation(t[3], t[4], t[5])), &mut x[3..]);
                }
            }
        }
    }

    /// The chart rates `θ̇ = J(θ)⁻¹ v` `(n,)` of the velocity `v` `(nv,)` at chart coordinates
    /// `θ` (also the expanded rates at absolute `θ`, [`Self::v_to_single_dof`]). Errors with
    /// [`RbdError::Singular`] where a chain is within [`GIMBAL_TOL`] of gimbal lock.
    pub fn chart_rates(&self, theta: &[f64], v: &[f64], theta_dot: &mut [f64]) -> Result<()> {
        for s in &self.segments {
            let (t, d) = (&theta[s.ie..s.ie + s.nv()], s.nv());
            s.check_regular(t)?;
            let rates = velocity_block(&s.joint, t).lu().solve(&vec6(&v[s.iv..s.iv + d])).ok_or_else(|| singular(s))?;
            theta_dot[s.ie..s.ie + d].copy_from_slice(&rates.as_slice()[..d]);
        }
        Ok(())
    }

    /// The chart covector `p_θ = J(θ)ᵀ p` `(n,)` of a momentum or force `p` `(nv,)` (dual to
    /// `v`): the same power `p·v = p_θ·θ̇`. O(joints), no allocation.
    pub fn chart_covector(&self, theta: &[f64], p: &[f64], p_theta: &mut [f64]) {
        for s in &self.segments {
            let d = s.nv();
            let out = velocity_block(&s.joint, &theta[s.ie..s.ie + d]).transpose() * vec6(&p[s.iv..s.iv + d]);
            p_theta[s.ie..s.ie + d].copy_from_slice(&out.as_slice()[..d]);
        }
    }

    /// The inverse of [`Self::chart_covector`]: `p = J(θ)⁻ᵀ p_θ` `(nv,)`. Errors with
    /// [`RbdError::Singular`] where a chain is within [`GIMBAL_TOL`] of gimbal lock.
    pub fn covector_from_chart(&self, theta: &[f64], p_theta: &[f64], p: &mut [f64]) -> Result<()> {
        for s in &self.segments {
            let (t, d) = (&theta[s.ie..s.ie + s.nv()], s.nv());
            s.check_regular(t)?;
            let out = velocity_block(&s.joint, t).transpose().lu().solve(&vec6(&p_theta[s.ie..s.ie + d])).ok_or_else(|| singular(s))?;
            p[s.iv..s.iv + d].copy_from_slice(&out.as_slice()[..d]);
        }
        Ok(())
    }
}

/// A composite (planar, spherical or free-flyer) joint of a [`SingleDofMap`], with the maps of
/// its step charts that a discrete Lagrangian on its group needs.
#[derive(Clone, Copy, Debug)]
pub struct CompositeJoint<'a>(&'a Segment);

impl CompositeJoint<'_> {
    /// The joint's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.0.name
    }
    /// Its first coordinate in the expanded model (= its first velocity index).
    #[must_use]
    pub fn first(&self) -> usize {
        self.0.ie
    }
    /// Its number of coordinates `d` (3 or 6).
    #[must_use]
    pub fn nv(&self) -> usize {
        self.0.nv()
    }
    /// The velocity indices of its 3-D rotation (whose Z-Y-X chart is singular at a relative
    /// pitch of 90°), if it has one: spherical and free-flyer joints.
    #[must_use]
    pub fn rotation(&self) -> Option<std::ops::Range<usize>> {
        match self.0.joint {
            Joint::Spherical => Some(self.0.iv..self.0.iv + 3),
            Joint::FreeFlyer => Some(self.0.iv + 3..self.0.iv + 6),
            _ => None,
        }
    }

    /// `S(y)` (top-left `d × d` of the result): how the chart coordinates `y` of a point
    /// change when the chart's centre moves by `δ` (chart coordinates at the centre) and the
    /// point does not, `y ↦ y − S(y) δ`; equivalently a left multiplication of the point by
    /// `τ(δ)` moves its coordinates by `S(y) δ`: `S(y) = J(y)⁻¹ Ad_{τ(y)⁻¹} J(0)`, `S(0) = 1`.
    /// Spherical: `E(y)⁻¹ R(y)ᵀ E(0)`; free-flyer: `(δt, δr) ↦ (δt + ω₀ × t, E⁻¹ Rᵀ ω₀)` with
    /// `ω₀ = E(0) δr`; planar: `(δt, δφ) ↦ (δt + δφ ẑ × t, δφ)`.
    #[must_use]
    pub fn shift(&self, y: &[f64]) -> Matrix6<f64> {
        let mut m = Matrix6::identity();
        match self.0.joint {
            Joint::Revolute { .. } | Joint::Prismatic { .. } => {}
            Joint::Planar => {
                m[(0, 2)] = -y[1];
                m[(1, 2)] = y[0];
            }
            Joint::Spherical => m.fixed_view_mut::<3, 3>(0, 0).copy_from(&RotationShift::new(&y[..3]).a),
            Joint::FreeFlyer => {
                m.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-Vector3::new(y[0], y[1], y[2]).cross_matrix() * zyx_rate_matrix(0.0, 0.0)));
                m.fixed_view_mut::<3, 3>(3, 3).copy_from(&RotationShift::new(&y[3..6]).a);
            }
        }
        m
    }

    /// The rate of [`Self::shift`] along a motion `y(t)` with `ẏ = ydot`, `(d/dt) S(y(t))`
    /// (top-left `d × d`). For a rotation with body angular velocity `ω = E ẏ` and
    /// `A = E⁻¹ Rᵀ E(0)`: `−E⁻¹ (Ė A + [ω]× Rᵀ E(0))`; for the translations of a free-flyer
    /// `−[ṫ]× E(0)`, of a planar joint `δφ ẑ × ṫ`.
    #[must_use]
    pub fn shift_rate(&self, y: &[f64], ydot: &[f64]) -> Matrix6<f64> {
        let mut m = Matrix6::zeros();
        match self.0.joint {
            Joint::Revolute { .. } | Joint::Prismatic { .. } => {}
            Joint::Planar => {
                m[(0, 2)] = -ydot[1];
                m[(1, 2)] = ydot[0];
            }
            Joint::Spherical => m.fixed_view_mut::<3, 3>(0, 0).copy_from(&RotationShift::new(&y[..3]).rate(&y[..3], &ydot[..3])),
            Joint::FreeFlyer => {
                m.fixed_view_mut::<3, 3>(0, 3).copy_from(&(-Vector3::new(ydot[0], ydot[1], ydot[2]).cross_matrix() * zyx_rate_matrix(0.0, 0.0)));
                m.fixed_view_mut::<3, 3>(3, 3).copy_from(&RotationShift::new(&y[3..6]).rate(&y[3..6], &ydot[3..6]));
            }
        }
        m
    }
}

impl CompositeJoint<'_> {
    /// The velocity map `J(y)` of the joint's chart (`v = J(y) ẏ`, top-left `d × d` of a
    /// 6×6 padded with the identity; [`SingleDofMap::velocity_map`]'s block).
    #[must_use]
    pub fn velocity_map(&self, y: &[f64]) -> Matrix6<f64> {
        velocity_block(&self.0.joint, y)
    }

    /// Its derivative `J'(y)[d] = (d/dε) J(y + ε d)` (top-left `d × d`, zero elsewhere).
    #[must_use]
    pub fn velocity_map_derivative(&self, y: &[f64], d: &[f64]) -> Matrix6<f64> {
        velocity_block_derivative(&self.0.joint, y, d)
    }

    /// The derivative `S'(y)[d] = (d/dε) S(y + ε d)` of [`Self::shift`] (top-left `d × d`,
    /// zero elsewhere). From `S = J⁻¹ Ad_{τ(y)⁻¹} J(0)` and `τ(y + ε d) = τ(y) exp(ε J d)`,
    /// so that `Ad_{τ⁻¹}` moves by `−ad_{J d} Ad_{τ⁻¹}`:
    /// `S'(y)[d] = −J(y)⁻¹ (J'(y)[d] + ad_{J(y) d} J(y)) S(y)`.
    #[must_use]
    pub fn shift_derivative(&self, y: &[f64], d: &[f64]) -> Matrix6<f64> {
        let joint = &self.0.joint;
        let j = velocity_block(joint, y);
        let Some(j_inv) = j.try_inverse() else { return Matrix6::repeat(f64::NAN) };
        shift_derivative_with(joint, y, d, &j, &j_inv, &self.shift(y))
    }

    /// The matrix `C` with `C d = (S'(y)[d])ᵀ w` for every direction `d` (column `i`:
    /// `(S'(y)[e_i])ᵀ w`, top `nv` rows and columns): [`Self::shift_derivative`] contracted
    /// with a covector, with `J(y)`, its inverse and `S(y)` formed once.
    #[must_use]
    pub fn shift_derivative_contraction(&self, y: &[f64], w: &Vector6<f64>) -> Matrix6<f64> {
        let joint = &self.0.joint;
        let j = velocity_block(joint, y);
        let Some(j_inv) = j.try_inverse() else { return Matrix6::repeat(f64::NAN) };
        let shift = self.shift(y);
        let mut c = Matrix6::zeros();
        for i in 0..self.nv() {
            let mut e = [0.0; 6];
            e[i] = 1.0;
            c.set_column(i, &(shift_derivative_with(joint, y, &e, &j, &j_inv, &shift).transpose() * w));
        }
        c
    }
}

/// Second derivatives of the chart maps, for the exact second order of a step on the group.
///
/// The chart is a product of exponentials, `τ(y) = exp(s_0 y_0) ⋯ exp(s_{d−1} y_{d−1})` (the
/// translations along the body axes commute; then the Z-Y-X rotations), so column `i` of
/// `J(y)` is `J_i = Ad_{E_{>i}⁻¹} s_i` with `E_{>i}` the factors after `i`. Moving `y_j` for
/// `j > i` conjugates `J_i` by one more factor: `∂J_i/∂y_j = [J_i, J_j]` (`ad_{J_i} J_j`, the
/// joint's Lie bracket [`CompositeJoint::bracket`]) for `j > i`, zero for `j ≤ i`. So
/// `J'(y)[b] e_i = [J_i, T_i(b)]` with `T_i(b) = Σ_{k>i} b_k J_k`, and once more
/// `J''(y)[a, b] e_i = [J'(y)[a] e_i, T_i(b)] + [J_i, Σ_{k>i} b_k J'(y)[a] e_k]`.
/// The same structure gives the second-order term of the chart's logarithm:
/// `τ(y)⁻¹ τ(y + δ) = Π_i exp(J_i δ_i)` in order, so by Baker–Campbell–Hausdorff
/// `log(τ(y)⁻¹ τ(y + δ)) = J(y) δ + ½ Σ_{i<j} [J_i, J_j] δ_i δ_j + O(|δ|³)`
/// ([`CompositeJoint::log_curvature`]).
impl CompositeJoint<'_> {
    /// The Lie bracket `[a, b] = ad_a b` of the joint's algebra in its tangent coordinates
    /// (Pinocchio's body-frame convention; zero-padded to 6).
    #[must_use]
    pub fn bracket(&self, a: &Vector6<f64>, b: &Vector6<f64>) -> Vector6<f64> {
        adjoint(&self.0.joint, a) * b
    }

    /// Every `J''(y)[e_k, e_l]` (`k, l < d`; row-major, each top-left `d × d`, symmetric in
    /// `k`, `l`), the second derivatives of [`Self::velocity_map`], from the brackets of the
    /// `impl` docs: column `i < l` of `J''[e_k, e_l]` is `[J'_k e_i, J_l] + [J_i, J'_k e_l]`
    /// (`J'_k = J'(y)[e_k]`), the others are zero. O(d³) brackets.
    #[must_use]
    pub fn velocity_map_second_derivatives(&self, y: &[f64]) -> [[Matrix6<f64>; 6]; 6] {
        let d = self.nv();
        let j = velocity_block(&self.0.joint, y);
        let first = self.velocity_map_derivatives(y);
        let mut out = [[Matrix6::zeros(); 6]; 6];
        for (k, jk) in first.iter().enumerate().take(d) {
            for l in 0..d {
                for i in 0..l {
                    let col = self.bracket(&jk.column(i).into_owned(), &j.column(l).into_owned())
                        + self.bracket(&j.column(i).into_owned(), &jk.column(l).into_owned());
                    out[k][l].set_column(i, &col);
                }
            }
        }
        out
    }

    /// Every `J'(y)[e_k]` (`k < d`), [`Self::velocity_map_derivative`] along the unit vectors.
    fn velocity_map_derivatives(&self, y: &[f64]) -> [Matrix6<f64>; 6] {
        let mut out = [Matrix6::zeros(); 6];
        for (k, o) in out.iter_mut().enumerate().take(self.nv()) {
            let mut e = [0.0; 6];
            e[k] = 1.0;
            *o = self.velocity_map_derivative(y, &e);
        }
        out
    }

    /// Every `S''(y)[e_k, e_l]ᵀ w` (`k, l < d`, symmetric in `k`, `l`): the second derivatives
    /// of [`Self::shift`] contracted with a covector, as [`Self::shift_derivative_contraction`]
    /// does for the first. With `K = J(y)⁻¹`, `Φ = Ad_{τ(y)⁻¹}` and `S = K Φ J(0)`:
    /// `Φ'_k = −ad_k Φ` (`ad_k = ad_{J e_k}`), `Φ''_kl = (ad_k ad_l − ad_{J'_l e_k}) Φ`,
    /// `K'_k = −K J'_k K`, `K''_kl = K (J'_k K J'_l + J'_l K J'_k − J''_kl) K` and
    /// `S''_kl = (K''_kl Φ + K'_k Φ'_l + K'_l Φ'_k + K Φ''_kl) J(0)`; transposed onto `w`, with
    /// `a = Kᵀ w` and `c_k = Kᵀ J'_kᵀ a`,
    /// `S''_klᵀ w = (Φ J(0))ᵀ [Kᵀ (J'_lᵀ c_k + J'_kᵀ c_l − J''_klᵀ a) + ad_lᵀ c_k +
    /// ad_kᵀ c_l + ad_lᵀ ad_kᵀ a − ad_{J'_l e_k}ᵀ a]`: matrix–vector products only. NaN where
    /// `J(y)` is singular.
    #[must_use]
    pub fn shift_second_derivative_contractions(&self, y: &[f64], w: &Vector6<f64>) -> [[Vector6<f64>; 6]; 6] {
        let (joint, d) = (&self.0.joint, self.nv());
        let j = velocity_block(joint, y);
        let Some(k) = j.try_inverse() else { return [[Vector6::repeat(f64::NAN); 6]; 6] };
        // (Φ J(0))ᵀ = (J S)ᵀ (the padding outside d × d is the identity in both)
        let back = (j * self.shift(y)).transpose();
        let (first, second) = (self.velocity_map_derivatives(y), self.velocity_map_second_derivatives(y));
        let (kt, a) = (k.transpose(), k.transpose() * w);
        let (mut adt, mut c, mut ada) = ([Matrix6::zeros(); 6], [Vector6::zeros(); 6], [Vector6::zeros(); 6]);
        for m in 0..d {
            adt[m] = adjoint(joint, &j.column(m).into_owned()).transpose();
            c[m] = kt * (first[m].transpose() * a);
            ada[m] = adt[m] * a;
        }
        let mut out = [[Vector6::zeros(); 6]; 6];
        for p in 0..d {
            for q in p..d {
                let inner = kt * (first[q].transpose() * c[p] + first[p].transpose() * c[q] - second[p][q].transpose() * a)
                    + adt[q] * c[p]
                    + adt[p] * c[q]
                    + adt[q] * ada[p]
                    - adjoint(joint, &first[q].column(p).into_owned()).transpose() * a;
                let mut v = back * inner;
                v.rows_mut(d, 6 - d).fill(0.0);
                out[p][q] = v;
                out[q][p] = v;
            }
        }
        out
    }

    /// The second-order term of the chart's logarithm at `y` (`impl` docs): `Γ[i][j] =
    /// ½ [J_i, J_j]` for `i < j` and `Γ[j][i] = Γ[i][j]` (`Γ[i][i] = 0`), so that
    /// `log(τ(y)⁻¹ τ(y + δ)) = J(y) δ + ½ Σ_{ij} Γ[i][j] δ_i δ_j + O(|δ|³)`: `Γ` is the
    /// Hessian of that logarithm at `δ = 0`. Row-major `d × d` of 6-vectors.
    #[must_use]
    pub fn log_curvature(&self, y: &[f64]) -> [[Vector6<f64>; 6]; 6] {
        let j = velocity_block(&self.0.joint, y);
        let mut g = [[Vector6::zeros(); 6]; 6];
        for i in 0..self.nv() {
            for k in i + 1..self.nv() {
                let v = 0.5 * self.bracket(&j.column(i).into_owned(), &j.column(k).into_owned());
                g[i][k] = v;
                g[k][i] = v;
            }
        }
        g
    }
}

/// The rotation block of [`CompositeJoint::shift`] at Z-Y-X angles `y`: `A = E⁻¹ Rᵀ E(0)`,
/// with `E⁻¹` and `Rᵀ E(0)` kept for the rate.
struct RotationShift {
    a: Matrix3<f64>,
    e: Matrix3<f64>,
    e_inv: Matrix3<f64>,
    rt_e0: Matrix3<f64>,
}

impl RotationShift {
    fn new(y: &[f64]) -> Self {
        let e = zyx_rate_matrix(y[1], y[2]);
        let e_inv = e.try_inverse().unwrap_or_else(|| Matrix3::repeat(f64::NAN));
        let rt_e0 = zyx_rotation(y[0], y[1], y[2]).to_rotation_matrix().matrix().transpose() * zyx_rate_matrix(0.0, 0.0);
        Self { a: e_inv * rt_e0, e, e_inv, rt_e0 }
    }

    /// `(d/dt) A = −E⁻¹ (Ė A + [ω]× Rᵀ E(0))` along `ẏ`, `ω = E ẏ`.
    fn rate(&self, y: &[f64], ydot: &[f64]) -> Matrix3<f64> {
        let e_dot = rate_matrix_derivative(y[1], y[2], ydot[1], ydot[2]);
        let omega = self.e * Vector3::new(ydot[0], ydot[1], ydot[2]);
        -self.e_inv * (e_dot * self.a + omega.cross_matrix() * self.rt_e0)
    }
}

fn singular(s: &Segment) -> RbdError {
    RbdError::Singular { joint: s.name.clone(), detail: "the chart's velocity map is not invertible here".into() }
}

#[cfg(test)]
mod tests {
    use crate::builders::random_tree;
    use crate::{kinetic_energy, placements, random_configuration, Joint};
    use nalgebra::{Matrix6, Vector3, Vector6};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn amax(x: impl IntoIterator<Item = f64>) -> f64 {
        x.into_iter().fold(0.0_f64, |m, v| m.max(v.abs()))
    }

    /// Trees mixing every composite joint with revolute ones.
    fn models() -> Vec<crate::Model> {
        let hinge = Joint::Revolute { axis: Vector3::new(0.3, -0.5, 0.8).normalize() };
        [Joint::FreeFlyer, Joint::Spherical, Joint::Planar].iter().enumerate().map(|(k, j)| random_tree(7, 20 + k as u64, &[*j, hinge])).collect()
    }

    /// The expanded model placed in the chart centred at `c` reproduces the original model's
    /// body placements and kinetic energy at `q = c ∘ τ(θ)`, `v = J(θ) θ̇`; coordinates and
    /// points are inverse maps; covectors keep the power `p·v`.
    #[test]
    fn the_chart_is_the_original_configuration_space() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for m in models() {
            let (e, map) = m.to_single_dof().unwrap();
            let (mut ws_m, mut ws_e) = (m.workspace(), e.workspace());
            for _ in 0..5 {
                let c = random_configuration(&m, &mut rng);
                let mut charted = e.clone();
                map.chart_placements(&e, &c, &mut charted.joint_placements);
                let theta: Vec<f64> = (0..map.n).map(|_| rng.random_range(-1.2..1.2)).collect();
                let mut q = vec![0.0; m.nq];
                map.chart_point(&c, &theta, &mut q);
                placements(&m, &mut ws_m, &q).unwrap();
                placements(&charted, &mut ws_e, &theta).unwrap();
                for (i, &b) in map.bodies.iter().enumerate() {
                    let (a, x) = (ws_m.placements[i], ws_e.placements[b]);
                    assert!((a.translation - x.translation).amax() < 1e-12 && (a.rotation - x.rotation).amax() < 1e-12, "{}: body {i}", m.name);
                }
                // coordinates of the point are θ again; the centre has θ = 0 on composite joints
                let mut back = vec![0.0; map.n];
                map.chart_coordinates(&c, &q, &mut back);
                assert!(amax(back.iter().zip(&theta).map(|(a, b)| a - b)) < 1e-12, "{}: {back:?} vs {theta:?}", m.name);
                map.chart_coordinates(&c, &c, &mut back);
                for j in map.composite_joints() {
                    assert!(amax(back[j.first()..j.first() + j.nv()].iter().copied()) < 1e-15);
                }
                // velocities and covectors
                let theta_dot: Vec<f64> = (0..map.n).map(|_| rng.random_range(-2.0..2.0)).collect();
                let v = map.v_from_single_dof(&theta, &theta_dot).unwrap();
                let mut rates = vec![0.0; map.n];
                map.chart_rates(&theta, &v, &mut rates).unwrap();
                assert!(amax(rates.iter().zip(&theta_dot).map(|(a, b)| a - b)) < 1e-12);
                let (ke_m, ke_e) = (kinetic_energy(&m, &mut ws_m, &q, &v).unwrap(), kinetic_energy(&charted, &mut ws_e, &theta, &theta_dot).unwrap());
                assert!((ke_m - ke_e).abs() < 1e-12 * ke_m.abs().max(1.0), "{}: {ke_m} vs {ke_e}", m.name);
                let p: Vec<f64> = (0..m.nv).map(|_| rng.random_range(-2.0..2.0)).collect();
                let (mut p_theta, mut p_back) = (vec![0.0; map.n], vec![0.0; m.nv]);
                map.chart_covector(&theta, &p, &mut p_theta);
                let power = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
                assert!((power(&p, &v) - power(&p_theta, &theta_dot)).abs() < 1e-12 * power(&p, &v).abs().max(1.0));
                map.covector_from_chart(&theta, &p_theta, &mut p_back).unwrap();
                assert!(amax(p_back.iter().zip(&p).map(|(a, b)| a - b)) < 1e-12);
            }
        }
    }

    /// `S(y) δ` is the change of chart coordinates when the point is left-multiplied by `τ(δ)`
    /// (central differences, h = 1e-6: error ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10), and
    /// `shift_rate` the time derivative of `S` along `y + t ẏ`.
    #[test]
    fn shifts_match_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let h = 1e-6;
        for m in models() {
            let (_, map) = m.to_single_dof().unwrap();
            let c = random_configuration(&m, &mut rng);
            let theta: Vec<f64> = (0..map.n).map(|_| rng.random_range(-0.8..0.8)).collect();
            let rate: Vec<f64> = (0..map.n).map(|_| rng.random_range(-2.0..2.0)).collect();
            for j in map.composite_joints() {
                let (f, d) = (j.first(), j.nv());
                let y = &theta[f..f + d];
                let (shift, shift_rate) = (j.shift(y), j.shift_rate(y, &rate[f..f + d]));
                for col in 0..d {
                    // y(±h) = coordinates of c τ(±h e_col) τ(y) in the chart centred at c
                    let moved = |eps: f64| {
                        let mut delta = vec![0.0; map.n];
                        delta[f + col] = eps;
                        for k in (0..map.n).filter(|&k| k < f || k >= f + d) {
                            delta[k] = theta[k]; // other joints: their own coordinates
                        }
                        let mut c2 = vec![0.0; m.nq];
                        map.chart_point(&c, &delta, &mut c2);
                        let (mut q, mut out) = (vec![0.0; m.nq], vec![0.0; map.n]);
                        map.chart_point(&c2, &theta, &mut q);
                        map.chart_coordinates(&c, &q, &mut out);
                        out
                    };
                    let (plus, minus) = (moved(h), moved(-h));
                    for r in 0..d {
                        let fd = (plus[f + r] - minus[f + r]) / (2.0 * h);
                        assert!((fd - shift[(r, col)]).abs() < 1e-8, "{} joint {}: S[{r},{col}] {} vs {fd}", m.name, j.name(), shift[(r, col)]);
                    }
                    let along = |eps: f64| {
                        let y2: Vec<f64> = y.iter().zip(&rate[f..f + d]).map(|(a, b)| a + eps * b).collect();
                        j.shift(&y2)
                    };
                    let fd = (along(h) - along(-h)) / (2.0 * h);
                    for r in 0..d {
                        assert!((fd[(r, col)] - shift_rate[(r, col)]).abs() < 1e-8, "{} joint {}: Ṡ[{r},{col}]", m.name, j.name());
                    }
                }
                assert!((j.shift(&[0.0; 6]).view((0, 0), (d, d)) - nalgebra::DMatrix::<f64>::identity(d, d)).amax() < 1e-15);
            }
        }
    }

    /// `J'(y)[d]` and `S'(y)[d]` are the derivatives of `J` and `S` along `y + t d` (central
    /// differences, h = 1e-6: truncation ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10).
    #[test]
    fn chart_map_derivatives_match_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let h = 1e-6;
        for m in models() {
            let (_, map) = m.to_single_dof().unwrap();
            for j in map.composite_joints() {
                let d = j.nv();
                for _ in 0..4 {
                    let y: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let dir: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let at = |eps: f64| y.iter().zip(&dir).map(|(a, b)| a + eps * b).collect::<Vec<f64>>();
                    let fd_j = (j.velocity_map(&at(h)) - j.velocity_map(&at(-h))) / (2.0 * h);
                    let fd_s = (j.shift(&at(h)) - j.shift(&at(-h))) / (2.0 * h);
                    let (dj, ds) = (j.velocity_map_derivative(&y, &dir), j.shift_derivative(&y, &dir));
                    assert!((fd_j - dj).amax() < 1e-8, "{} joint {}: J' {dj} vs {fd_j}", m.name, j.name());
                    assert!((fd_s - ds).amax() < 1e-8, "{} joint {}: S' {ds} vs {fd_s}", m.name, j.name());
                    let w = Vector6::from_fn(|r, _| if r < d { dir[r] - 0.3 } else { 0.0 });
                    let c = j.shift_derivative_contraction(&y, &w);
                    let direct = ds.transpose() * w;
                    let contracted = c * Vector6::from_fn(|r, _| if r < d { dir[r] } else { 0.0 });
                    assert!((direct - contracted).amax() < 1e-12, "{} joint {}: contraction", m.name, j.name());
                }
            }
        }
    }

    /// `J''`, `S''` and the logarithm's curvature (the brackets of the product of
    /// exponentials) against central differences of `J'`, `S'` and of `difference` itself:
    /// first differences at h = 1e-6 (truncation ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10,
    /// asserted 1e-8); the logarithm's second differences at h = 1e-4 (truncation ~h² ≈ 1e-8,
    /// round-off ~ε/h² ≈ 1e-8, asserted 1e-6).
    #[test]
    fn second_derivatives_of_the_chart_maps_match_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        for m in models() {
            let (_, map) = m.to_single_dof().unwrap();
            for j in map.composite_joints() {
                let (f, d) = (j.first(), j.nv());
                for _ in 0..4 {
                    let draw = |rng: &mut ChaCha8Rng| (0..d).map(|_| rng.random_range(-1.0..1.0)).collect::<Vec<f64>>();
                    let (y, a, b) = (draw(&mut rng), draw(&mut rng), draw(&mut rng));
                    let h = 1e-6;
                    let at = |eps: f64| y.iter().zip(&b).map(|(x, v)| x + eps * v).collect::<Vec<f64>>();
                    let fd_j = (j.velocity_map_derivative(&at(h), &a) - j.velocity_map_derivative(&at(-h), &a)) / (2.0 * h);
                    let fd_s = (j.shift_derivative(&at(h), &a) - j.shift_derivative(&at(-h), &a)) / (2.0 * h);
                    let j2 = j.velocity_map_second_derivatives(&y);
                    let jab = (0..d).flat_map(|k| (0..d).map(move |l| (k, l))).map(|(k, l)| j2[k][l] * (a[k] * b[l])).sum::<Matrix6<f64>>();
                    assert!((fd_j - jab).amax() < 1e-8, "{} joint {}: J'' {jab} vs {fd_j}", m.name, j.name());
                    // S''[a, b]ᵀ w against the derivative of S'[a]ᵀ w along b
                    let w = Vector6::from_fn(|r, _| if r < d { 0.7 - 0.3 * r as f64 } else { 0.0 });
                    let s2 = j.shift_second_derivative_contractions(&y, &w);
                    let sab: Vector6<f64> = (0..d).flat_map(|k| (0..d).map(move |l| (k, l))).map(|(k, l)| s2[k][l] * (a[k] * b[l])).sum();
                    let fd_sw = fd_s.transpose() * w;
                    assert!((fd_sw - sab).amax() < 1e-8, "{} joint {}: S''ᵀw {sab} vs {fd_sw}", m.name, j.name());
                    for k in 0..d {
                        for l in 0..d {
                            assert!((j2[k][l] - j2[l][k]).amax() < 1e-14, "J'' symmetric");
                        }
                    }
                    // log(τ(y)⁻¹ τ(y + δ)) read by `difference` between the two chart points
                    let c = random_configuration(&m, &mut rng);
                    let point = |t: &[f64]| {
                        let mut theta = vec![0.0; map.n];
                        theta[f..f + d].copy_from_slice(t);
                        let mut q = vec![0.0; m.nq];
                        map.chart_point(&c, &theta, &mut q);
                        q
                    };
                    let base = point(&y);
                    let h = 1e-4;
                    let log = |eps: f64| crate::difference(&m, &base, &point(&at(eps))).unwrap();
                    let (plus, minus) = (log(h), log(-h));
                    let gamma = j.log_curvature(&y);
                    for r in 0..d {
                        let fd = (plus[f + r] + minus[f + r]) / (h * h);
                        let exact: f64 = (0..d).flat_map(|i| (0..d).map(move |k| (i, k))).map(|(i, k)| gamma[i][k][r] * b[i] * b[k]).sum();
                        assert!((fd - exact).abs() < 1e-6, "{} joint {}: log curvature row {r}: {exact} vs {fd}", m.name, j.name());
                    }
                }
            }
        }
    }

    /// A chart is singular only at a relative pitch of ±90°, wherever its centre is: a
    /// free-flyer at absolute pitch 90° is regular in the chart centred there.
    #[test]
    fn a_chart_at_the_euler_singularity_is_regular() {
        let m = random_tree(1, 4, &[Joint::FreeFlyer]);
        let (_, map) = m.to_single_dof().unwrap();
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let c = [0.0, 0.0, 0.0, 0.0, h, 0.0, h]; // a quarter turn about y: pitch 90°
        let mut theta = [0.0; 6];
        let q = [0.1, 0.2, 0.3, 0.01, h, 0.02, h];
        map.chart_coordinates(&c, &q, &mut theta);
        let mut rates = [0.0; 6];
        map.chart_rates(&theta, &[1.0, 2.0, 3.0, 0.4, 0.5, 0.6], &mut rates).unwrap();
        assert!(map.chart_rates(&[0.0, 0.0, 0.0, 0.0, std::f64::consts::FRAC_PI_2, 0.0], &[0.0, 0.0, 0.0, 1.0, 0.0, 0.0], &mut rates).is_err());
    }
}
