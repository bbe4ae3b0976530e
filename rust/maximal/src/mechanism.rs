//! A mechanism in maximal coordinates: bodies, joints (equality constraints) and the map to and
//! from a minimal-coordinate [`vidyn_rbd::Model`].
//!
//! From a model, body `i` becomes a free body at its centre of mass `c_i` (axes of body frame
//! `i`), and joint `i` a constraint between the parent's joint frame `(R, p − c_parent)` (the
//! model's joint placement moved to the parent's centre of mass) and the child's body frame
//! origin `(1, −c_i)`: revolute → revolute, prismatic → prismatic, spherical → spherical,
//! planar → planar about `z`, free-flyer → floating (no rows). Loop closures are added on top.
//!
//! **Joint forces.** A model joint with generalised force `u` (controls, springs
//! `−κ (θ − θ_rest)` and dampers `−d θ̇` for 1-dof joints) acts as the wrench `S u` at the
//! child joint frame (the joint's constant motion subspace, child-frame coordinates) on the
//! child and its opposite on the parent — Brüdigam et al. 2023 eq. 1; its power on any motion
//! is `u · q̇`, so it is the minimal-coordinate generalised force exactly.

use crate::body::{advance, discrete_velocity, retreat, Body, BodyState, Pose};
use crate::constraint::{Constraint, JointKind};
use crate::error::{MaximalError, Result};
use nalgebra::{UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, Model};
use vidyn_spatial::{Force, Se3};

/// `([[∂W_a/∂z_a, ∂W_a/∂z_b], [∂W_b/∂z_a, ∂W_b/∂z_b]], (W_a, W_b))` of a joint force.
pub type WrenchJacobians = ([[nalgebra::Matrix6<f64>; 2]; 2], (nalgebra::Vector6<f64>, nalgebra::Vector6<f64>));

/// One joint of a mechanism.
#[derive(Clone, Debug)]
pub struct MechanismJoint {
    pub name: String,
    /// Parent body, `None` for the world.
    pub parent: Option<usize>,
    pub child: usize,
    pub constraint: Constraint,
    /// For joints of the source model: the model joint and its first velocity index.
    pub minimal: Option<(Joint, usize)>,
}

/// Bodies and joints with gravity; immutable once built (add loops before creating an
/// integrator).
#[derive(Clone, Debug)]
pub struct Mechanism {
    pub bodies: Vec<Body>,
    pub joints: Vec<MechanismJoint>,
    /// Gravity (world frame, m/s²).
    pub gravity: Vector3<f64>,
    /// Centre of mass of each body in its minimal-coordinate body frame (zero for bodies
    /// defined directly at their centre of mass).
    pub com: Vec<Vector3<f64>>,
    /// The source model, when built from one.
    pub model: Option<Arc<Model>>,
    /// Number of generalised forces `u` (the model's `nv`, 0 without a model).
    pub nu: usize,
    /// `(nu,)` joint spring stiffness κ, rest positions and viscous damping d (1-dof joints).
    pub stiffness: Vec<f64>,
    pub rest: Vec<f64>,
    pub damping: Vec<f64>,
    /// Sphere–plane contacts ([`crate::contact`]).
    pub contacts: Vec<crate::contact::Contact>,
    /// Position limits of 1-dof model joints ([`crate::contact::JointLimit`]).
    pub limits: Vec<crate::contact::JointLimit>,
    /// Contacts between two bodies ([`crate::body_contact`]).
    pub body_contacts: Vec<crate::body_contact::BodyContact>,
}

impl Mechanism {
    /// The mechanism of a minimal-coordinate model (damping from the model's limits, no
    /// springs). Errors for bodies without positive mass and positive-definite inertia.
    pub fn from_model(model: Arc<Model>) -> Result<Self> {
        let n = model.nbodies();
        let mut bodies = Vec::with_capacity(n);
        let mut com = Vec::with_capacity(n);
        for (i, inertia) in model.inertias.iter().enumerate() {
            let name = model.joint_names[i].clone();
            if inertia.mass.is_nan() || inertia.mass <= 0.0 || inertia.rot_inertia.cholesky().is_none() {
                return Err(MaximalError::InvalidMechanism(format!(
                    "body of joint '{name}' has mass {} and rotational inertia {:?}: maximal coordinates need positive mass and a positive-definite inertia for every body",
                    inertia.mass, inertia.rot_inertia
                )));
            }
            bodies.push(Body { name, mass: inertia.mass, inertia: inertia.rot_inertia });
            com.push(inertia.com);
        }
        let mut joints = Vec::with_capacity(n);
        for i in 0..n {
            let jp = model.joint_placements[i];
            let parent_frame = match model.parents[i] {
                Some(p) => Se3::new(jp.rotation, jp.translation - com[p]),
                None => jp,
            };
            let child_frame = Se3::new(nalgebra::Matrix3::identity(), -com[i]);
            let kind = match model.joints[i] {
                Joint::Revolute { axis } => JointKind::Revolute { axis },
                Joint::Prismatic { axis } => JointKind::Prismatic { axis },
                Joint::Spherical => JointKind::Spherical,
                Joint::Planar => JointKind::Planar { normal: Vector3::z() },
                Joint::FreeFlyer => JointKind::Floating,
            };
            joints.push(MechanismJoint {
                name: model.joint_names[i].clone(),
                parent: model.parents[i],
                child: i,
                constraint: Constraint::new(kind, &parent_frame, &child_frame),
                minimal: Some((model.joints[i], model.idx_v[i])),
            });
        }
        let nu = model.nv;
        Ok(Self {
            bodies,
            joints,
            gravity: model.gravity.linear,
            com,
            damping: model.limits.damping.clone(),
            stiffness: vec![0.0; nu],
            rest: vec![0.0; nu],
            nu,
            model: Some(model),
            contacts: Vec::new(),
            limits: Vec::new(),
            body_contacts: Vec::new(),
        })
    }

    /// A mechanism of free bodies (frames at their centres of mass) under `gravity`; add
    /// joints with [`Self::add_joint`].
    pub fn new(bodies: Vec<Body>, gravity: Vector3<f64>) -> Result<Self> {
        for b in &bodies {
            if !b.mass.is_finite() || b.mass <= 0.0 || b.inertia.cholesky().is_none() || (b.inertia - b.inertia.transpose()).amax() > 1e-12 * b.inertia.amax() {
                return Err(MaximalError::InvalidMechanism(format!("body '{}' needs a positive mass and a symmetric positive-definite inertia", b.name)));
            }
        }
        let n = bodies.len();
        Ok(Self {
            bodies,
            joints: Vec::new(),
            gravity,
            com: vec![Vector3::zeros(); n],
            model: None,
            nu: 0,
            stiffness: vec![],
            rest: vec![],
            damping: vec![],
            contacts: Vec::new(),
            limits: Vec::new(),
            body_contacts: Vec::new(),
        })
    }

    /// Whether the mechanism has contacts or joint limits (steps then run the interior point).
    #[must_use]
    pub fn has_inequalities(&self) -> bool {
        !self.contacts.is_empty() || !self.limits.is_empty() || !self.body_contacts.is_empty()
    }

    /// Adds a loop-closure joint; the same as [`Self::add_joint`] (whether a joint closes a
    /// loop is decided by the graph, not by how it was added).
    pub fn add_loop_closure(&mut self, name: &str, kind: JointKind, parent: Option<usize>, parent_frame: Se3, child: usize, child_frame: Se3) -> Result<usize> {
        self.add_joint(name, kind, parent, parent_frame, child, child_frame)
    }

    /// Adds a joint of `kind` between the frame `parent_frame` on body `parent` (`None`: the
    /// world) and `child_frame` on body `child`, both given in the bodies' minimal-coordinate
    /// body frames (the model's frames; the centre-of-mass frames for [`Self::new`]). The joint
    /// carries no actuation. Returns the joint's index.
    pub fn add_joint(&mut self, name: &str, kind: JointKind, parent: Option<usize>, parent_frame: Se3, child: usize, child_frame: Se3) -> Result<usize> {
        let nb = self.bodies.len();
        if child >= nb || parent.is_some_and(|p| p >= nb || p == child) {
            let parent = parent.map_or_else(|| "the world".to_string(), |p| format!("body {p}"));
            return Err(MaximalError::InvalidMechanism(format!(
                "loop closure '{name}': {parent} and body {child} must be distinct bodies of the {nb} (or the world for the parent)"
            )));
        }
        if self.joints.iter().any(|j| j.name == name) {
            return Err(MaximalError::InvalidMechanism(format!("duplicate joint name '{name}'")));
        }
        if let Some(a) = kind.axis() {
            if (a.norm() - 1.0).abs() > 1e-9 {
                return Err(MaximalError::InvalidMechanism(format!("loop closure '{name}': axis {a:?} is not a unit vector")));
            }
        }
        for f in [&parent_frame, &child_frame] {
            if !f.is_valid(1e-9) || !f.translation.iter().all(|x| x.is_finite()) {
                return Err(MaximalError::InvalidMechanism(format!("loop closure '{name}': frame is not a rigid transform")));
            }
        }
        let shift = |f: Se3, body: Option<usize>| match body {
            Some(b) => Se3::new(f.rotation, f.translation - self.com[b]),
            None => f,
        };
        let constraint = Constraint::new(kind, &shift(parent_frame, parent), &shift(child_frame, Some(child)));
        self.joints.push(MechanismJoint { name: name.to_string(), parent, child, constraint, minimal: None });
        Ok(self.joints.len() - 1)
    }

    /// Number of bodies.
    #[must_use]
    pub fn nbodies(&self) -> usize {
        self.bodies.len()
    }

    /// Body poses of a minimal configuration `q` (forward kinematics of the source model).
    pub fn poses(&self, q: &[f64], out: &mut [Pose]) -> Result<()> {
        let model = self.require_model()?;
        let mut ws = model.workspace();
        vidyn_rbd::placements(model, &mut ws, q)?;
        for (i, o) in out.iter_mut().enumerate() {
            let m = &ws.placements[i];
            *o = Pose::new(m.act_point(&self.com[i]), UnitQuaternion::from_matrix(&m.rotation));
        }
        Ok(())
    }

    /// The discrete state at a minimal configuration `q` moving with velocity `v`: poses
    /// `z_k = FK(q)` and, as incoming velocities, the discrete velocities from
    /// `z_{k−1} = FK(q ⊕ (−Δt v))` — a constraint-consistent past knot, so the first step
    /// starts on the joints' manifold with momentum matching `v` to O(Δt).
    pub fn state_from_minimal(&self, q: &[f64], v: &[f64], dt: f64, out: &mut [BodyState]) -> Result<()> {
        let model = self.require_model()?;
        vidyn_rbd::check_tangent(model, v, "v")?;
        let n = self.nbodies();
        let mut now = vec![Pose::default(); n];
        let mut before = vec![Pose::default(); n];
        self.poses(q, &mut now)?;
        let back: Vec<f64> = v.iter().map(|x| -dt * x).collect();
        let q_prev = vidyn_rbd::integrate(model, q, &back)?;
        self.poses(&q_prev, &mut before)?;
        for i in 0..n {
            let (vl, w) = discrete_velocity(&before[i], &now[i], dt);
            out[i] = BodyState { pose: now[i], v: vl, w };
        }
        Ok(())
    }

    /// Minimal coordinates `q` (model layout) of body poses, joint by joint from the relative
    /// placement of the joint frames (revolute angles in `[−π, π]`). Tree models only; loop
    /// joints are ignored.
    pub fn configuration(&self, poses: &[Pose], q: &mut [f64]) -> Result<()> {
        let model = self.require_model()?;
        if q.len() != model.nq || poses.len() != self.nbodies() {
            return Err(MaximalError::InvalidParameter(format!(
                "q has length {}, expected model.nq = {}; poses {} for {} bodies",
                q.len(),
                model.nq,
                poses.len(),
                self.nbodies()
            )));
        }
        for (i, j) in self.joints.iter().enumerate().take(model.nbodies()) {
            let iq = model.idx_q[i];
            let rel = j.constraint.relative(j.parent.map(|p| &poses[p]), &poses[j.child]);
            let qr = if rel.qr.w < 0.0 { UnitQuaternion::new_unchecked(-rel.qr.into_inner()) } else { rel.qr };
            match model.joints[i] {
                Joint::Revolute { axis } => q[iq] = 2.0 * axis.dot(&qr.imag()).atan2(qr.w),
                Joint::Prismatic { axis } => q[iq] = axis.dot(&rel.gt),
                Joint::Spherical => q[iq..iq + 4].copy_from_slice(qr.quaternion().coords.as_slice()),
                Joint::FreeFlyer => {
                    q[iq..iq + 3].copy_from_slice(rel.gt.as_slice());
                    q[iq + 3..iq + 7].copy_from_slice(qr.quaternion().coords.as_slice());
                }
                Joint::Planar => {
                    let th = 2.0 * qr.k.atan2(qr.w);
                    q[iq] = rel.gt.x;
                    q[iq + 1] = rel.gt.y;
                    q[iq + 2] = th.cos();
                    q[iq + 3] = th.sin();
                }
            }
        }
        Ok(())
    }

    /// Coordinate of a 1-dof model joint from the poses (revolute angle in `[−π, π]`,
    /// prismatic displacement); `None` for other joints.
    #[must_use]
    pub fn joint_coordinate(&self, j: usize, poses: &[Pose]) -> Option<f64> {
        let jt = &self.joints[j];
        let rel = jt.constraint.relative(jt.parent.map(|p| &poses[p]), &poses[jt.child]);
        match jt.minimal?.0 {
            Joint::Revolute { axis } => {
                let s = if rel.qr.w < 0.0 { -1.0 } else { 1.0 };
                Some(2.0 * (s * axis.dot(&rel.qr.imag())).atan2(s * rel.qr.w))
            }
            Joint::Prismatic { axis } => Some(axis.dot(&rel.gt)),
            _ => None,
        }
    }

    /// Adds the body wrenches of the joint forces to `force` (world, per body) and `torque`
    /// (body frame, about the centre of mass): controls `u` plus springs at `now` and dampers
    /// with the rate `(θ(now) − θ(before))/Δt`. `u` has `nu` entries (may be empty: zero).
    pub fn add_joint_wrenches(&self, now: &[Pose], before: &[Pose], dt: f64, u: &[f64], force: &mut [Vector3<f64>], torque: &mut [Vector3<f64>]) {
        let mut gen = [0.0; 6];
        for (j, jt) in self.joints.iter().enumerate() {
            let Some((mj, iv)) = jt.minimal else { continue };
            let nv = mj.nv();
            let mut any = false;
            for k in 0..nv {
                gen[k] = u.get(iv + k).copied().unwrap_or(0.0);
                any |= gen[k] != 0.0;
            }
            if nv == 1 && (self.stiffness[iv] != 0.0 || self.damping[iv] != 0.0) {
                if let (Some(th), Some(th0)) = (self.joint_coordinate(j, now), self.joint_coordinate(j, before)) {
                    let mut rate = th - th0;
                    if matches!(mj, Joint::Revolute { .. }) {
                        rate = (rate + std::f64::consts::PI).rem_euclid(2.0 * std::f64::consts::PI) - std::f64::consts::PI;
                    }
                    gen[0] += -self.stiffness[iv] * (th - self.rest[iv]) - self.damping[iv] * rate / dt;
                    any = true;
                }
            }
            if !any {
                continue;
            }
            let s = mj.motion(&gen[..nv]); // S u: [force; moment] in the child joint frame
            let w = Force::new(s.linear, s.angular);
            apply_joint_wrench(&jt.constraint, jt.parent, jt.child, now, &w, force, torque);
        }
    }

    /// Derivatives of the wrenches that a constant generalised force `gen` (`nv` entries) of
    /// joint `j` applies (as in [`Self::add_joint_wrenches`]: child `[R_b f_b; n_b + p_bj × f_b]`,
    /// parent `[−R_b f_b; −R_aᵀ(R_b n_b + s × R_b f_b)]` with `f_b = R_bj f`, `n_b = R_bj n`,
    /// `[f; n] = S·gen`, `s = x_b + R_b p_bj − x_a`) with respect to the poses:
    /// `[[∂W_a/∂z_a, ∂W_a/∂z_b], [∂W_b/∂z_a, ∂W_b/∂z_b]]`, rows `[force (world); torque
    /// (body)]`, columns `[δx; δθ]`. Also returns the wrenches themselves `(W_a, W_b)`, which
    /// are linear in `gen`. Only the rotation of the force and the lever arms depend on `z`.
    #[must_use]
    pub fn joint_wrench_jacobians(&self, j: usize, poses: &[Pose], gen: &[f64]) -> WrenchJacobians {
        use nalgebra::{Matrix6, Vector6};
        use vidyn_spatial::skew;
        let jt = &self.joints[j];
        let mut out = [[Matrix6::zeros(); 2]; 2];
        let Some((mj, _)) = jt.minimal else { return (out, (Vector6::zeros(), Vector6::zeros())) };
        let s = mj.motion(gen);
        let cf = &jt.constraint.child_frame;
        let b = &poses[jt.child];
        let rb = b.rotation();
        let (f_b, n_b) = (cf.rotation * s.linear, cf.rotation * s.angular);
        let fw = rb * f_b;
        let wb = Vector6::new(fw.x, fw.y, fw.z, 0.0, 0.0, 0.0) + {
            let t = n_b + cf.origin.cross(&f_b);
            Vector6::new(0.0, 0.0, 0.0, t.x, t.y, t.z)
        };
        out[1][1].fixed_view_mut::<3, 3>(0, 3).copy_from(&(-(rb * skew(&f_b))));
        let mut wa = Vector6::zeros();
        if let Some(p) = jt.parent {
            let a = &poses[p];
            let ra = a.rotation();
            let sv = b.point(&cf.origin) - a.x;
            let y = rb * n_b + sv.cross(&fw);
            let ta = -(ra.transpose() * y);
            wa = Vector6::new(-fw.x, -fw.y, -fw.z, ta.x, ta.y, ta.z);
            out[0][1].fixed_view_mut::<3, 3>(0, 3).copy_from(&(rb * skew(&f_b)));
            out[0][0].fixed_view_mut::<3, 3>(3, 3).copy_from(&(-skew(&(ra.transpose() * y))));
            out[0][1].fixed_view_mut::<3, 3>(3, 0).copy_from(&(ra.transpose() * skew(&fw)));
            out[0][0].fixed_view_mut::<3, 3>(3, 0).copy_from(&(-(ra.transpose() * skew(&fw))));
            let dy_db = -(rb * skew(&n_b)) + skew(&fw) * rb * skew(&cf.origin) - skew(&sv) * rb * skew(&f_b);
            out[0][1].fixed_view_mut::<3, 3>(3, 3).copy_from(&(-(ra.transpose() * dy_db)));
        }
        (out, (wa, wb))
    }

    /// Whether any model joint has a spring or a damper.
    #[must_use]
    pub fn has_springs_or_dampers(&self) -> bool {
        self.stiffness.iter().chain(&self.damping).any(|&x| x != 0.0)
    }

    /// The minimal-coordinate model the mechanism was built from (an error for mechanisms
    /// assembled body by body).
    pub fn require_model(&self) -> Result<&Model> {
        self.model.as_deref().ok_or(MaximalError::InvalidParameter("this mechanism was not built from a minimal-coordinate model".to_string()))
    }

    /// `z_{k−1}` of every body from a state (inverse knot update).
    pub fn previous_poses(&self, state: &[BodyState], dt: f64, out: &mut [Pose]) -> Result<()> {
        for (i, s) in state.iter().enumerate() {
            out[i] = retreat(&s.pose, &s.v, &s.w, dt).ok_or_else(|| self.spin_error(i, 0, &s.w, dt))?;
        }
        Ok(())
    }

    pub(crate) fn spin_error(&self, body: usize, step: usize, w: &Vector3<f64>, dt: f64) -> MaximalError {
        MaximalError::AngularVelocityTooLarge { body: self.bodies[body].name.clone(), step, omega: w.norm(), limit: 2.0 / dt }
    }

    /// `z_{k+1}` of every body from poses and discrete velocities; `None` on too fast a spin.
    #[must_use]
    pub fn advance_all(poses: &[Pose], v: &[Vector3<f64>], w: &[Vector3<f64>], dt: f64, out: &mut [Pose]) -> Option<()> {
        for i in 0..poses.len() {
            out[i] = advance(&poses[i], &v[i], &w[i], dt)?;
        }
        Some(())
    }
}

/// Applies the wrench `w = [f; n]` (child joint frame coordinates, at its origin) to the child
/// and `−w` to the parent, as world forces and body-frame moments about the centres of mass.
fn apply_joint_wrench(c: &Constraint, parent: Option<usize>, child: usize, poses: &[Pose], w: &Force, force: &mut [Vector3<f64>], torque: &mut [Vector3<f64>]) {
    let cf = &c.child_frame;
    let b = &poses[child];
    let f_b = cf.rotation * w.linear; // child body frame
    let n_b = cf.rotation * w.angular;
    let f_world = b.q * f_b;
    force[child] += f_world;
    torque[child] += n_b + cf.origin.cross(&f_b);
    if let Some(p) = parent {
        let a = &poses[p];
        let point = b.point(&cf.origin);
        let moment_world = -(b.q * n_b) - (point - a.x).cross(&f_world);
        force[p] -= f_world;
        torque[p] += a.q.inverse() * moment_world;
    }
}
