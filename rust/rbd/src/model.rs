//! The immutable kinematic-tree model and the builder that produces it.

use crate::error::{RbdError, Result};
use crate::joint::Joint;
use crate::mimic::Mimic;
use crate::single_dof::Gimbal;
use nalgebra::Vector3;
use vidyn_spatial::{Inertia, Motion, Se3};

/// Standard gravity, pointing along −z of the world frame (Pinocchio's default).
pub const STANDARD_GRAVITY: f64 = 9.81;

/// What a [`Frame`] marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// The frame of a moving joint (child side).
    Joint,
    /// A fixed joint that was merged into its parent body.
    FixedJoint,
    /// A link (URDF `<link>`), moving or merged.
    Body,
    /// A user-defined operational frame.
    Operational,
}

/// A named frame rigidly attached to a body (or to the world when `parent` is `None`).
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub name: String,
    /// Body the frame is attached to; `None` for the world.
    pub parent: Option<usize>,
    /// Placement of the frame in the parent body's frame.
    pub placement: Se3,
    pub kind: FrameKind,
}

/// Per-coordinate limits and joint friction parameters (Pinocchio's names and layout).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Limits {
    /// Lower position limits, `(nq,)`; `-inf` when unbounded.
    pub lower_position: Vec<f64>,
    /// Upper position limits, `(nq,)`; `+inf` when unbounded.
    pub upper_position: Vec<f64>,
    /// Velocity limits, `(nv,)`; `+inf` when unknown.
    pub velocity: Vec<f64>,
    /// Effort limits, `(nv,)`; `+inf` when unknown.
    pub effort: Vec<f64>,
    /// Viscous damping coefficients, `(nv,)`.
    pub damping: Vec<f64>,
    /// Coulomb friction coefficients, `(nv,)`.
    pub friction: Vec<f64>,
}

/// An immutable kinematic tree of `n` bodies, each attached to its parent by one joint.
///
/// Bodies are numbered `0..n` in depth-first pre-order, so every subtree is a contiguous
/// range of bodies and of velocity coordinates. The world is not a body; its index is
/// written `None`. Body `i` moves with joint `i`: its frame is the joint's child frame, and
/// its placement in the parent body frame is `joint_placements[i] · joints[i].transform(q_i)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub name: String,
    /// Joint of each body.
    pub joints: Vec<Joint>,
    /// Name of each joint (URDF joint names).
    pub joint_names: Vec<String>,
    /// Parent body of each body; `None` for the world.
    pub parents: Vec<Option<usize>>,
    /// Placement of joint `i`'s frame in its parent body frame (at `q_i` neutral).
    pub joint_placements: Vec<Se3>,
    /// Inertia of body `i` (all links merged into it) in body frame `i`.
    pub inertias: Vec<Inertia>,
    /// Children of each body, in order.
    pub children: Vec<Vec<usize>>,
    /// First configuration index of joint `i`.
    pub idx_q: Vec<usize>,
    /// First velocity index of joint `i`.
    pub idx_v: Vec<usize>,
    /// Number of velocity coordinates in the subtree rooted at body `i` (including `i`).
    pub nv_subtree: Vec<usize>,
    /// Number of bodies in the subtree rooted at body `i` (including `i`).
    pub subtree_size: Vec<usize>,
    pub nq: usize,
    pub nv: usize,
    /// Gravity as a spatial acceleration of the world, `[g; 0]`.
    pub gravity: Motion,
    pub limits: Limits,
    /// Named frames (links, joints, fixed joints, operational frames).
    pub frames: Vec<Frame>,
    /// The pitch coordinates of the Z-Y-X Euler-angle chains that [`crate::to_single_dof`]
    /// made of spherical and free-flyer joints, where the chain locks (`cos β = 0`); empty
    /// for every other model.
    pub gimbals: Vec<Gimbal>,
    /// The mimic joints ([`crate::mimic`]): the tree above is the extended one (every joint
    /// with its own coordinate, what the algorithms compute on), reduced by the coupling of
    /// these; empty for most models.
    pub mimics: Vec<Mimic>,
}

impl Model {
    /// Number of bodies (= moving joints).
    #[inline]
    #[must_use]
    pub fn nbodies(&self) -> usize {
        self.joints.len()
    }

    /// Index of the frame called `name`.
    pub fn frame_index(&self, name: &str) -> Result<usize> {
        self.frames.iter().position(|f| f.name == name).ok_or_else(|| RbdError::UnknownName { what: "frame", name: name.to_string() })
    }

    /// Index of the body moved by the joint called `name`.
    pub fn joint_index(&self, name: &str) -> Result<usize> {
        self.joint_names.iter().position(|n| n == name).ok_or_else(|| RbdError::UnknownName { what: "joint", name: name.to_string() })
    }

    /// Total mass.
    #[must_use]
    pub fn total_mass(&self) -> f64 {
        self.inertias.iter().map(|i| i.mass).sum()
    }

    /// A fresh workspace sized for this model.
    #[must_use]
    pub fn workspace(&self) -> crate::Workspace {
        crate::Workspace::new(self)
    }

    /// `true` when body `ancestor` is `body` or lies on its path to the world.
    #[inline]
    #[must_use]
    pub fn is_ancestor(&self, ancestor: usize, body: usize) -> bool {
        ancestor <= body && body < ancestor + self.subtree_size[ancestor]
    }
}

/// Builds a [`Model`] body by body. Bodies may be added in any order that names an existing
/// parent; `build` renumbers them depth-first (children in insertion order).
#[derive(Clone, Debug, Default)]
pub struct ModelBuilder {
    name: String,
    bodies: Vec<BodySpec>,
    frames: Vec<Frame>,
    gravity: Option<Vector3<f64>>,
    /// What the builder accepted but a user should hear about ([`ModelBuilder::warnings`]).
    warnings: Vec<String>,
}

#[derive(Clone, Debug)]
struct BodySpec {
    name: String,
    joint: Joint,
    parent: Option<usize>,
    placement: Se3,
    inertia: Inertia,
    limits: Option<JointLimits>,
}

/// Limits of one joint, one entry per coordinate (`nq` for positions, `nv` for the rest).
#[derive(Clone, Debug, PartialEq)]
pub struct JointLimits {
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub velocity: Vec<f64>,
    pub effort: Vec<f64>,
    pub damping: Vec<f64>,
    pub friction: Vec<f64>,
}

impl JointLimits {
    /// No limits, no friction.
    #[must_use]
    pub fn unbounded(joint: &Joint) -> Self {
        let (nq, nv) = (joint.nq(), joint.nv());
        let mut lower = vec![f64::NEG_INFINITY; nq];
        let mut upper = vec![f64::INFINITY; nq];
        // Unit-quaternion and cos/sin coordinates are bounded by construction.
        let unit = match joint {
            Joint::Spherical => 0..4,
            Joint::FreeFlyer => 3..7,
            Joint::Planar => 2..4,
            _ => 0..0,
        };
        for i in unit {
            lower[i] = -1.0;
            upper[i] = 1.0;
        }
        Self { lower, upper, velocity: vec![f64::INFINITY; nv], effort: vec![f64::INFINITY; nv], damping: vec![0.0; nv], friction: vec![0.0; nv] }
    }
}

impl ModelBuilder {
    #[must_use]
    pub fn new(name: &str) -> Self {
        Self { name: name.to_string(), ..Self::default() }
    }

    /// Sets gravity (world frame, m/s²). Default `[0, 0, −9.81]`.
    pub fn gravity(&mut self, g: Vector3<f64>) -> &mut Self {
        self.gravity = Some(g);
        self
    }

    /// Adds a body moved by `joint`, whose frame sits at `placement` in the parent body frame
    /// (world when `parent` is `None`) at neutral configuration. Returns the builder's index
    /// of the new body (before depth-first renumbering; the name is stable).
    pub fn add_body(&mut self, parent: Option<usize>, name: &str, joint: Joint, placement: Se3, inertia: Inertia) -> Result<usize> {
        if let Some(p) = parent {
            if p >= self.bodies.len() {
                return Err(RbdError::InvalidModel(format!("joint '{name}': parent body {p} does not exist")));
            }
        }
        if self.bodies.iter().any(|b| b.name == name) {
            return Err(RbdError::InvalidModel(format!("duplicate joint name '{name}'")));
        }
        match joint {
            Joint::Revolute { axis } | Joint::Prismatic { axis } if (axis.norm() - 1.0).abs() > 1e-9 => {
                return Err(RbdError::InvalidModel(format!("joint '{name}': axis {axis:?} is not a unit vector")));
            }
            _ => {}
        }
        if !placement.is_valid(1e-9) || !placement.translation.iter().all(|x| x.is_finite()) {
            return Err(RbdError::InvalidModel(format!("joint '{name}': placement is not a rigid transform")));
        }
        check_inertia(name, &inertia)?;
        if let Some(w) = inertia_warning(&format!("body '{name}'"), &inertia) {
            self.warnings.push(w);
        }
        self.bodies.push(BodySpec { name: name.to_string(), joint, parent, placement, inertia, limits: None });
        Ok(self.bodies.len() - 1)
    }

    /// Records a warning about the model being built (the URDF reader's, for instance).
    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// What the builder accepted but a user should hear about, in the order it happened:
    /// inertias that no rigid body can have ([`inertia_warning`]), and the URDF reader's
    /// notes (`<mimic>` joints read as independent joints).
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Sets the limits of body `body`'s joint.
    pub fn set_limits(&mut self, body: usize, limits: JointLimits) -> Result<()> {
        let b = self.bodies.get_mut(body).ok_or(RbdError::IndexOutOfRange { what: "body", index: body, len: 0 })?;
        let (nq, nv) = (b.joint.nq(), b.joint.nv());
        if limits.lower.len() != nq
            || limits.upper.len() != nq
            || limits.velocity.len() != nv
            || limits.effort.len() != nv
            || limits.damping.len() != nv
            || limits.friction.len() != nv
        {
            return Err(RbdError::InvalidModel(format!("joint '{}': limits have the wrong sizes", b.name)));
        }
        b.limits = Some(limits);
        Ok(())
    }

    /// Adds `inertia` (expressed in body `body`'s frame) to that body, e.g. a merged fixed link.
    pub fn append_inertia(&mut self, body: usize, inertia: Inertia) -> Result<()> {
        let len = self.bodies.len();
        let b = self.bodies.get_mut(body).ok_or(RbdError::IndexOutOfRange { what: "body", index: body, len })?;
        check_inertia(&b.name, &inertia)?;
        b.inertia = b.inertia + inertia;
        Ok(())
    }

    /// Adds a named frame on body `parent` (builder index) or on the world.
    pub fn add_frame(&mut self, name: &str, parent: Option<usize>, placement: Se3, kind: FrameKind) -> Result<()> {
        if self.frames.iter().any(|f| f.name == name && f.kind == kind) {
            return Err(RbdError::InvalidModel(format!("duplicate frame '{name}'")));
        }
        self.frames.push(Frame { name: name.to_string(), parent, placement, kind });
        Ok(())
    }

    /// Number of bodies added so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Renumbers the bodies depth-first and freezes the model (its [`ModelBuilder::warnings`]
    /// are dropped: read them before).
    pub fn build(self) -> Result<Model> {
        let n = self.bodies.len();
        // depth-first pre-order, children in insertion order
        let mut kids: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, b) in self.bodies.iter().enumerate() {
            match b.parent {
                Some(p) => kids[p].push(i),
                None => roots.push(i),
            }
        }
        let mut order = Vec::with_capacity(n);
        let mut stack: Vec<usize> = roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            order.push(i);
            stack.extend(kids[i].iter().rev());
        }
        let mut new_index = vec![0; n];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let g = self.gravity.unwrap_or(Vector3::new(0.0, 0.0, -STANDARD_GRAVITY));
        let mut m = Model {
            name: self.name,
            joints: Vec::with_capacity(n),
            joint_names: Vec::with_capacity(n),
            parents: Vec::with_capacity(n),
            joint_placements: Vec::with_capacity(n),
            inertias: Vec::with_capacity(n),
            children: vec![Vec::new(); n],
            idx_q: Vec::with_capacity(n),
            idx_v: Vec::with_capacity(n),
            nv_subtree: vec![0; n],
            subtree_size: vec![0; n],
            nq: 0,
            nv: 0,
            gravity: Motion::new(g, Vector3::zeros()),
            limits: Limits::default(),
            frames: Vec::new(),
            gimbals: Vec::new(),
            mimics: Vec::new(),
        };
        for &old in &order {
            let b = &self.bodies[old];
            let parent = b.parent.map(|p| new_index[p]);
            if let Some(p) = parent {
                m.children[p].push(m.joints.len());
            }
            m.joints.push(b.joint);
            m.joint_names.push(b.name.clone());
            m.parents.push(parent);
            m.joint_placements.push(b.placement);
            m.inertias.push(b.inertia);
            m.idx_q.push(m.nq);
            m.idx_v.push(m.nv);
            m.nq += b.joint.nq();
            m.nv += b.joint.nv();
            let l = b.limits.clone().unwrap_or_else(|| JointLimits::unbounded(&b.joint));
            m.limits.lower_position.extend(l.lower);
            m.limits.upper_position.extend(l.upper);
            m.limits.velocity.extend(l.velocity);
            m.limits.effort.extend(l.effort);
            m.limits.damping.extend(l.damping);
            m.limits.friction.extend(l.friction);
        }
        for i in (0..n).rev() {
            m.subtree_size[i] += 1;
            m.nv_subtree[i] += m.joints[i].nv();
            if let Some(p) = m.parents[i] {
                m.subtree_size[p] += m.subtree_size[i];
                m.nv_subtree[p] += m.nv_subtree[i];
            }
        }
        m.frames = self.frames.into_iter().map(|f| Frame { parent: f.parent.map(|p| new_index[p]), ..f }).collect();
        Ok(m)
    }
}

/// Relative tolerance of the triangle inequalities in [`inertia_warning`]: violations below
/// `1e-6` of the trace are rounding in published inertias.
const TRIANGLE_TOLERANCE: f64 = 1e-6;

/// A warning when `inertia` (of `what`) is not one a rigid body can have: its principal
/// moments `I₁ ≤ I₂ ≤ I₃` about the centre of mass violate the triangle inequality
/// `I₁ + I₂ ≥ I₃` (every real mass distribution satisfies it, since `I₁ + I₂ − I₃ =
/// 2 ∫ ρ x₃² dV ≥ 0` along the third principal axis). The model is still valid — the
/// algorithms only need a positive semi-definite inertia, which [`ModelBuilder::add_body`]
/// checks — so this is a warning, not an error: 48 links of example-robot-data's URDFs
/// violate it (icub, tiago, anymal, …), most of them by more than 10 %.
#[must_use]
pub fn inertia_warning(what: &str, inertia: &Inertia) -> Option<String> {
    let moments = inertia.rot_inertia.symmetric_eigenvalues();
    let mut m = [moments[0], moments[1], moments[2]];
    m.sort_by(f64::total_cmp);
    let trace = m.iter().sum::<f64>();
    let margin = m[0] + m[1] - m[2];
    (trace > 0.0 && margin < -TRIANGLE_TOLERANCE * trace).then(|| {
        format!(
            "{what} has an inertia no rigid body can have: its principal moments ({}, {}, {}) violate the triangle inequality I1 + I2 >= I3 (by {:.1} % of their sum); its dynamics are computed as given",
            m[0],
            m[1],
            m[2],
            -100.0 * margin / trace
        )
    })
}

fn check_inertia(name: &str, inertia: &Inertia) -> Result<()> {
    let finite = inertia.mass.is_finite() && inertia.com.iter().all(|x| x.is_finite()) && inertia.rot_inertia.iter().all(|x| x.is_finite());
    // Symmetric positive semi-definite is required; the triangle inequalities are not, since
    // published URDFs violate them slightly and the algorithms do not depend on them.
    let tol = 1e-9 * (1.0 + inertia.rot_inertia.abs().max());
    let r = &inertia.rot_inertia;
    let psd = finite && (r - r.transpose()).abs().max() <= tol && r.symmetric_eigenvalues().min() >= -tol;
    if !finite || inertia.mass < 0.0 || !psd {
        return Err(RbdError::InvalidModel(format!(
            "body '{name}': inertia is not physical (mass {}, rotational inertia {:?})",
            inertia.mass, inertia.rot_inertia
        )));
    }
    Ok(())
}
