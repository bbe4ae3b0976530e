//! URDF import, reproducing Pinocchio's `buildModel` so that the joint order (and hence the
//! `v` arrays) of vidyn and Pinocchio agree index by index.
//!
//! # Tree
//! The root link is the one link that is no joint's child. The tree is walked depth-first
//! from it; at each link its child joints are visited in **byte-wise order of the joint
//! names**, each subtree completely before the next sibling. This is Pinocchio's order
//! (urdfdom stores joints in a name-sorted map and Pinocchio recurses over the children it
//! derives from it), and since [`ModelBuilder::build`] renumbers depth-first with children in
//! insertion order, body `i` here is Pinocchio's joint `i + 1`.
//!
//! # Joints
//! The joint frame sits at `<origin xyz rpy>` in the parent link frame (rotation
//! `R = Rz(yaw) Ry(pitch) Rx(roll)`, missing values zero); the child link frame is the joint
//! frame moved by the joint. `<axis xyz>` defaults to `(1, 0, 0)` and is normalised.
//!
//! | URDF type | vidyn | limits read |
//! |---|---|---|
//! | `revolute` | [`Joint::Revolute`] | `<limit lower upper effort velocity>`, `<dynamics damping friction>` |
//! | `continuous` | [`Joint::Revolute`], position limits `±∞` | `<limit effort velocity>`, `<dynamics>` |
//! | `prismatic` | [`Joint::Prismatic`] | as `revolute` |
//! | `floating` | [`Joint::FreeFlyer`] | none |
//! | `planar` | [`Joint::Planar`] in the plane normal to the axis | none |
//! | `fixed` | no body: merged into the moving body it hangs from | — |
//!
//! Missing limit values are `±∞`, missing damping and friction `0`.
//!
//! A `planar` joint moves in the xy plane of its joint frame, so the joint frame is
//! `origin · R_a`, where `R_a` is the smallest rotation taking `z` to the axis `a` (half a turn
//! about `x` when `a = −z`). The child link then sits at `R_aᵀ` in the body frame, which keeps
//! its inertia, frames and children where the URDF puts them.
//!
//! A `fixed` joint adds no body: the child link, at the accumulated placement
//! `P = P_parent · origin` in the frame of the moving body it ends up on, contributes its
//! inertia `P · I_link` to that body ([`ModelBuilder::append_inertia`]), and the walk goes on
//! below it with `P`.
//!
//! # Root
//! With [`RootJoint::FreeFlyer`] a free-flyer body named [`ROOT_JOINT_NAME`] carries the root
//! link (identity placement). With [`RootJoint::Fixed`] the root link is welded to the world:
//! its inertia, and that of every link fixed to it, belongs to the world and plays no part in
//! the dynamics (Pinocchio's universe).
//!
//! # Inertias
//! `<inertial>` gives the mass, the centre of mass `c = xyz` of its `<origin>` and the
//! rotational inertia `I` about the centre of mass in the axes of that origin, so the link
//! inertia has `I_c = R I Rᵀ`. A link without `<inertial>` has zero inertia; a missing
//! `<inertia>` element or attribute counts as zero. Every mass must be finite and
//! non-negative. Positive semi-definiteness is checked per *body*, on the sum of the links
//! merged into it, not per link: published URDFs contain slightly non-physical links (tiago's
//! antennas) that Pinocchio accepts and that are harmless once merged. Links welded to a fixed
//! base are not checked beyond their mass since they play no part in the dynamics.
//!
//! # Frames
//! One [`FrameKind::Body`] frame per link (on the body it moves with, identity for the link
//! that defines a body frame, on the world for links welded to a fixed base), one
//! [`FrameKind::Joint`] frame per moving joint (identity on its body) and one
//! [`FrameKind::FixedJoint`] frame per fixed joint (at the child link). Frame names are the
//! URDF link and joint names.
//!
//! # Differences from Pinocchio
//! * A continuous joint has **one** coordinate, the angle; Pinocchio's `JointModelRUB` uses
//!   `(cos θ, sin θ)` (nq = 2). The `v` arrays agree, the `q` arrays differ by one entry per
//!   continuous joint.
//! * The axis of a `planar` joint is honoured; Pinocchio ignores it and always uses the xy
//!   plane (the two agree for `axis = (0, 0, 1)`).
//! * A missing `<robot name>` is accepted (the model name is then `""`); a revolute or
//!   prismatic joint without `<limit>` is unbounded (urdfdom rejects it). Inside `<limit>`, a
//!   missing `lower`/`upper` is `0` as the URDF specification says. `lower > upper` is rejected.
//! * Mimic joints are independent joints by default (Pinocchio's default too); with `mimic`
//!   they are coupled ([`crate::mimic`], [`from_urdf_str_with_warnings`]), and, unlike
//!   Pinocchio, a leader may come after its follower in the tree order (romeo's and Talos'
//!   full hands, which Pinocchio refuses).
//!
//! Only the `<link>` and `<joint>` children of `<robot>` are read (`<gazebo>`,
//! `<transmission>`, `<material>`, visuals, collisions and sensors are ignored) and mesh files
//! are never opened.

use crate::error::{RbdError, Result};
use crate::joint::Joint;
use crate::mimic::Mimic;
use crate::model::{inertia_warning, FrameKind, JointLimits, Model, ModelBuilder};
use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use roxmltree::{Document, Node, ParsingOptions};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use vidyn_spatial::{Inertia, Se3};

/// How the root link is attached to the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootJoint {
    /// Welded to the world (fixed base).
    Fixed,
    /// Attached by a free-flyer joint named [`ROOT_JOINT_NAME`] (floating base).
    FreeFlyer,
}

/// Name of the free-flyer joint added by [`RootJoint::FreeFlyer`] (Pinocchio's name).
pub const ROOT_JOINT_NAME: &str = "root_joint";

/// Reads the URDF file at `path` (see [`from_urdf_str`]).
pub fn from_urdf_file(path: impl AsRef<Path>, root: RootJoint) -> Result<Model> {
    from_urdf_file_with_warnings(path, root, false).map(|(model, _)| model)
}

/// [`from_urdf_file`] with the reader's warnings, and `<mimic>` joints coupled when `mimic`
/// (see [`from_urdf_str_with_warnings`]).
pub fn from_urdf_file_with_warnings(path: impl AsRef<Path>, root: RootJoint, mimic: bool) -> Result<(Model, Vec<String>)> {
    let path = path.as_ref();
    let xml = std::fs::read_to_string(path).map_err(|e| RbdError::Urdf(format!("cannot read {}: {e}", path.display())))?;
    from_urdf_str_with_warnings(&xml, root, mimic)
}

/// Builds a model from a URDF document (see the module documentation for the mapping);
/// `<mimic>` joints are read as independent joints.
pub fn from_urdf_str(xml: &str, root: RootJoint) -> Result<Model> {
    from_urdf_str_with_warnings(xml, root, false).map(|(model, _)| model)
}

/// [`from_urdf_str`], with what the document holds that the model accepts but a user should
/// hear about: links whose inertia no rigid body can have ([`crate::model::inertia_warning`])
/// and, unless `mimic`, `<mimic>` joints, which are then read as independent joints. With
/// `mimic` they become the model's mimic joints ([`crate::mimic`], Pinocchio's
/// `buildModelFromUrdf(…, mimic=True)`): `<mimic joint multiplier offset>` (defaults 1 and 0)
/// on a revolute, continuous or prismatic joint following another such joint; a `<mimic>` on
/// a fixed joint is ignored (it has no coordinate), as Pinocchio does.
pub fn from_urdf_str_with_warnings(xml: &str, root: RootJoint, mimic: bool) -> Result<(Model, Vec<String>)> {
    let options = ParsingOptions { allow_dtd: true, ..ParsingOptions::default() };
    let doc = Document::parse_with_options(xml, options).map_err(|e| urdf(format!("malformed XML: {e}")))?;
    let robot = doc.root_element();
    if robot.tag_name().name() != "robot" {
        return Err(urdf(format!("the document element is <{}>, expected <robot>", robot.tag_name().name())));
    }
    let mut links = Vec::new();
    let mut link_index = HashMap::new();
    let mut warnings = Vec::new();
    for node in elements(robot, "link") {
        let name = node.attribute("name").ok_or_else(|| urdf("a <link> has no name attribute".into()))?;
        if link_index.insert(name, links.len()).is_some() {
            return Err(urdf(format!("link '{name}' is defined twice")));
        }
        let ctx = format!("link '{name}'");
        let inertia = parse_inertia(node, &ctx)?;
        warnings.extend(inertia_warning(&ctx, &inertia));
        links.push(Link { name, inertia });
    }
    if links.is_empty() {
        return Err(urdf("<robot> has no <link>".into()));
    }
    let mut joints = Vec::new();
    let mut joint_names = HashSet::new();
    let mut mimics = Vec::new();
    for node in elements(robot, "joint") {
        let joint = parse_joint(node, &link_index)?;
        if !joint_names.insert(joint.name) {
            return Err(urdf(format!("joint '{}' is defined twice", joint.name)));
        }
        if let Some(el) = element(node, "mimic") {
            if mimic {
                if joint.moving.is_some() {
                    mimics.push(parse_mimic(el, joint.name)?);
                }
            } else {
                let leader = el.attribute("joint").unwrap_or("?");
                let (multiplier, offset) = (el.attribute("multiplier").unwrap_or("1"), el.attribute("offset").unwrap_or("0"));
                warnings.push(format!("joint '{}' mimics joint '{leader}' (multiplier {multiplier}, offset {offset}); it is read as an independent joint with its own coordinate (load with mimic=True to couple it)", joint.name));
            }
        }
        joints.push(joint);
    }
    let model = assemble(robot.attribute("name").unwrap_or(""), &links, &joints, root)?;
    Ok((couple(model, &joints, &mimics)?, warnings))
}

/// A `<mimic>` element of joint `name`, leader by name.
struct UrdfMimic<'a> {
    joint: &'a str,
    leader: &'a str,
    multiplier: f64,
    offset: f64,
}

fn parse_mimic<'a>(el: Node<'a, '_>, name: &'a str) -> Result<UrdfMimic<'a>> {
    let ctx = format!("joint '{name}'");
    let leader = el.attribute("joint").ok_or_else(|| urdf(format!("{ctx}: <mimic> has no joint attribute")))?;
    Ok(UrdfMimic { joint: name, leader, multiplier: finite(el, "multiplier", &ctx)?.unwrap_or(1.0), offset: finite(el, "offset", &ctx)?.unwrap_or(0.0) })
}

/// `model` with the mimic joints `mimics` (by joint name) coupled ([`Model::with_mimics`]).
fn couple(model: Model, joints: &[UrdfJoint], mimics: &[UrdfMimic]) -> Result<Model> {
    if mimics.is_empty() {
        return Ok(model);
    }
    let mut coupled = Vec::with_capacity(mimics.len());
    for m in mimics {
        let ctx = format!("joint '{}' mimics joint '{}'", m.joint, m.leader);
        let leader = match joints.iter().find(|j| j.name == m.leader) {
            None => return Err(urdf(format!("{ctx}, which the URDF does not define"))),
            Some(j) if j.moving.is_none() => return Err(urdf(format!("{ctx}, which is fixed (it has no coordinate to follow)"))),
            Some(_) => model.joint_index(m.leader)?,
        };
        coupled.push(Mimic { joint: model.joint_index(m.joint)?, leader, multiplier: m.multiplier, offset: m.offset });
    }
    model.with_mimics(coupled).map_err(|e| urdf(e.to_string()))
}

struct Link<'a> {
    name: &'a str,
    inertia: Inertia,
}

/// What a non-fixed URDF joint becomes.
struct Moving {
    joint: Joint,
    /// Placement of the vidyn joint frame in the URDF joint frame (identity except planar).
    frame: Se3,
    limits: JointLimits,
}

struct UrdfJoint<'a> {
    name: &'a str,
    parent: usize,
    child: usize,
    origin: Se3,
    /// `None` for a fixed joint.
    moving: Option<Moving>,
}

/// Walks the tree from the root link and builds the model (see the module documentation).
fn assemble(name: &str, links: &[Link], joints: &[UrdfJoint], root: RootJoint) -> Result<Model> {
    let mut parent_joint: Vec<Option<usize>> = vec![None; links.len()];
    for (j, joint) in joints.iter().enumerate() {
        if let Some(other) = parent_joint[joint.child] {
            return Err(urdf(format!("link '{}' is the child of two joints, '{}' and '{}'", links[joint.child].name, joints[other].name, joint.name)));
        }
        parent_joint[joint.child] = Some(j);
    }
    let roots: Vec<usize> = (0..links.len()).filter(|&l| parent_joint[l].is_none()).collect();
    let root_link = match roots[..] {
        [r] => r,
        [] => return Err(urdf("no root link: every link is the child of a joint (the joints form a cycle)".into())),
        _ => {
            let names: Vec<String> = roots.iter().map(|&l| format!("'{}'", links[l].name)).collect();
            return Err(urdf(format!("several root links ({}): a URDF must describe a single tree", names.join(", "))));
        }
    };
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); links.len()];
    for (j, joint) in joints.iter().enumerate() {
        children[joint.parent].push(j);
    }
    for c in &mut children {
        c.sort_by(|&a, &b| joints[a].name.cmp(joints[b].name));
    }

    let mut builder = ModelBuilder::new(name);
    // Bodies are added with zero inertia; `merged[id]` sums the inertias of the links moving
    // with body `id` (in its frame) and is appended once at the end, so that the builder
    // checks the physical validity of each body rather than of each link.
    let mut merged: Vec<Inertia> = Vec::new();
    let mut body_link: Vec<&str> = Vec::new();
    let root_body = match root {
        RootJoint::Fixed => None,
        RootJoint::FreeFlyer => {
            let id = builder.add_body(None, ROOT_JOINT_NAME, Joint::FreeFlyer, Se3::identity(), Inertia::zero())?;
            builder.add_frame(ROOT_JOINT_NAME, Some(id), Se3::identity(), FrameKind::Joint)?;
            merged.push(links[root_link].inertia);
            body_link.push(links[root_link].name);
            Some(id)
        }
    };
    builder.add_frame(links[root_link].name, root_body, Se3::identity(), FrameKind::Body)?;
    let mut visited = vec![false; links.len()];
    visited[root_link] = true;
    // Explicit stack (deep chains must not overflow the call stack): (joint, body its parent
    // link moves with (`None`: world), placement of the parent link in that body's frame).
    let mut stack: Vec<(usize, Option<usize>, Se3)> = children[root_link].iter().rev().map(|&j| (j, root_body, Se3::identity())).collect();
    while let Some((j, body, parent_placement)) = stack.pop() {
        let joint = &joints[j];
        let link = &links[joint.child];
        visited[joint.child] = true;
        let (body, link_placement) = match &joint.moving {
            None => {
                let p = parent_placement * joint.origin;
                builder.add_frame(joint.name, body, p, FrameKind::FixedJoint)?;
                if let Some(id) = body {
                    merged[id] = merged[id] + link.inertia.transformed(&p);
                }
                (body, p)
            }
            Some(Moving { joint: kind, frame, limits }) => {
                let link_in_body = frame.inverse();
                let placement = parent_placement * joint.origin * *frame;
                let id = builder.add_body(body, joint.name, *kind, placement, Inertia::zero())?;
                builder.set_limits(id, limits.clone())?;
                builder.add_frame(joint.name, Some(id), Se3::identity(), FrameKind::Joint)?;
                merged.push(link.inertia.transformed(&link_in_body));
                body_link.push(link.name);
                (Some(id), link_in_body)
            }
        };
        builder.add_frame(link.name, body, link_placement, FrameKind::Body)?;
        stack.extend(children[joint.child].iter().rev().map(|&c| (c, body, link_placement)));
    }
    let detached: Vec<String> = (0..links.len()).filter(|&l| !visited[l]).map(|l| format!("'{}'", links[l].name)).collect();
    if !detached.is_empty() {
        return Err(urdf(format!("links {} are not connected to the root link '{}' (their joints form a cycle)", detached.join(", "), links[root_link].name)));
    }
    for (id, inertia) in merged.into_iter().enumerate() {
        builder
            .append_inertia(id, inertia)
            .map_err(|e| urdf(format!("link '{}' together with the links fixed to it has a non-physical inertia ({e})", body_link[id])))?;
    }
    builder.build()
}

fn parse_joint<'a>(node: Node<'a, '_>, links: &HashMap<&str, usize>) -> Result<UrdfJoint<'a>> {
    let name = node.attribute("name").ok_or_else(|| urdf("a <joint> has no name attribute".into()))?;
    let ctx = format!("joint '{name}'");
    let link_of = |tag: &str| -> Result<usize> {
        let el = element(node, tag).ok_or_else(|| urdf(format!("{ctx}: missing <{tag}> element")))?;
        let link = el.attribute("link").ok_or_else(|| urdf(format!("{ctx}: <{tag}> has no link attribute")))?;
        links.get(link).copied().ok_or_else(|| urdf(format!("{ctx}: <{tag} link=\"{link}\"> names an unknown link")))
    };
    let parent = link_of("parent")?;
    let child = link_of("child")?;
    let ty = node.attribute("type").ok_or_else(|| urdf(format!("{ctx}: <joint> has no type attribute")))?;
    let moving = match ty {
        "fixed" => None,
        "revolute" | "continuous" | "prismatic" => {
            let axis = parse_axis(node, &ctx)?;
            let joint = if ty == "prismatic" { Joint::Prismatic { axis } } else { Joint::Revolute { axis } };
            let limits = parse_limits(node, &ctx, &joint, ty != "continuous")?;
            Some(Moving { joint, frame: Se3::identity(), limits })
        }
        "floating" => Some(Moving { joint: Joint::FreeFlyer, frame: Se3::identity(), limits: JointLimits::unbounded(&Joint::FreeFlyer) }),
        "planar" => {
            let axis = parse_axis(node, &ctx)?;
            let r = UnitQuaternion::rotation_between(&Vector3::z(), &axis)
                .unwrap_or_else(|| UnitQuaternion::from_axis_angle(&Vector3::x_axis(), std::f64::consts::PI));
            Some(Moving { joint: Joint::Planar, frame: Se3::from_quaternion(&r, Vector3::zeros()), limits: JointLimits::unbounded(&Joint::Planar) })
        }
        other => return Err(urdf(format!("{ctx}: unknown joint type '{other}'"))),
    };
    Ok(UrdfJoint { name, parent, child, origin: parse_origin(node, &ctx)?, moving })
}

/// `<axis xyz>`, default `(1, 0, 0)`, normalised.
fn parse_axis(joint: Node, ctx: &str) -> Result<Vector3<f64>> {
    let axis = match element(joint, "axis") {
        Some(el) => vector3(el, "xyz", ctx)?.unwrap_or_else(Vector3::x),
        None => Vector3::x(),
    };
    let norm = axis.norm();
    if norm < 1e-12 {
        return Err(urdf(format!("{ctx}: <axis xyz> is the zero vector")));
    }
    Ok(axis / norm)
}

/// Limits of a one-dof joint; position limits only when `bounded` (not for continuous joints).
fn parse_limits(joint_node: Node, ctx: &str, joint: &Joint, bounded: bool) -> Result<JointLimits> {
    let mut limits = JointLimits::unbounded(joint);
    if let Some(el) = element(joint_node, "limit") {
        if bounded {
            // the URDF specification (and urdfdom) default both to 0
            limits.lower[0] = number(el, "lower", ctx)?.unwrap_or(0.0);
            limits.upper[0] = number(el, "upper", ctx)?.unwrap_or(0.0);
            if limits.lower[0] > limits.upper[0] {
                return Err(urdf(format!("{ctx}: <limit> has lower = {} > upper = {}", limits.lower[0], limits.upper[0])));
            }
        }
        if let Some(x) = number(el, "effort", ctx)? {
            limits.effort[0] = x;
        }
        if let Some(x) = number(el, "velocity", ctx)? {
            limits.velocity[0] = x;
        }
    }
    if let Some(el) = element(joint_node, "dynamics") {
        limits.damping[0] = finite(el, "damping", ctx)?.unwrap_or(0.0);
        limits.friction[0] = finite(el, "friction", ctx)?.unwrap_or(0.0);
    }
    Ok(limits)
}

/// The link inertia from `<inertial>` (zero when absent), with `I_c = R I Rᵀ`.
fn parse_inertia(link: Node, ctx: &str) -> Result<Inertia> {
    let Some(inertial) = element(link, "inertial") else {
        return Ok(Inertia::zero());
    };
    let frame = parse_origin(inertial, ctx)?;
    let mass_el = element(inertial, "mass").ok_or_else(|| urdf(format!("{ctx}: <inertial> has no <mass> element")))?;
    let mass = finite(mass_el, "value", ctx)?.ok_or_else(|| urdf(format!("{ctx}: <mass> has no value attribute")))?;
    if mass < 0.0 {
        return Err(urdf(format!("{ctx}: <mass value=\"{mass}\"> is negative")));
    }
    let mut tensor = Matrix3::zeros();
    if let Some(el) = element(inertial, "inertia") {
        let mut c = [0.0; 6];
        for (value, attr) in c.iter_mut().zip(["ixx", "ixy", "ixz", "iyy", "iyz", "izz"]) {
            *value = finite(el, attr, ctx)?.unwrap_or(0.0);
        }
        let [xx, xy, xz, yy, yz, zz] = c;
        tensor = Matrix3::new(xx, xy, xz, xy, yy, yz, xz, yz, zz);
    }
    Ok(Inertia::new(mass, frame.translation, frame.rotation * tensor * frame.rotation.transpose()))
}

/// `<origin xyz rpy>` child of `parent` (identity when absent, missing attributes zero).
fn parse_origin(parent: Node, ctx: &str) -> Result<Se3> {
    let Some(el) = element(parent, "origin") else {
        return Ok(Se3::identity());
    };
    let xyz = vector3(el, "xyz", ctx)?.unwrap_or_else(Vector3::zeros);
    let rpy = vector3(el, "rpy", ctx)?.unwrap_or_else(Vector3::zeros);
    Ok(Se3::from_rpy(&rpy, xyz))
}

/// Child elements of `node` called `name` (in `node`'s namespace, so `<xacro:…>` never matches).
fn elements<'a, 'i>(node: Node<'a, 'i>, name: &'static str) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children().filter(move |c| is_child_element(node, c, name))
}

/// The first child element of `node` called `name`.
fn element<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|c| is_child_element(node, c, name))
}

fn is_child_element(node: Node, child: &Node, name: &str) -> bool {
    child.is_element() && child.tag_name().name() == name && child.tag_name().namespace() == node.tag_name().namespace()
}

/// Attribute `attr` of `el` as a number (±∞ allowed, NaN not); `None` when absent.
fn number(el: Node, attr: &str, ctx: &str) -> Result<Option<f64>> {
    let Some(text) = el.attribute(attr) else {
        return Ok(None);
    };
    match text.trim().parse::<f64>() {
        Ok(x) if !x.is_nan() => Ok(Some(x)),
        _ => Err(bad_attribute(el, attr, ctx, "a number")),
    }
}

/// Attribute `attr` of `el` as a finite number; `None` when absent.
fn finite(el: Node, attr: &str, ctx: &str) -> Result<Option<f64>> {
    let x = number(el, attr, ctx)?;
    if x.is_some_and(f64::is_infinite) {
        return Err(bad_attribute(el, attr, ctx, "a finite number"));
    }
    Ok(x)
}

/// Attribute `attr` of `el` as three finite numbers separated by white space; `None` when absent.
fn vector3(el: Node, attr: &str, ctx: &str) -> Result<Option<Vector3<f64>>> {
    let Some(text) = el.attribute(attr) else {
        return Ok(None);
    };
    let values: Vec<f64> = text.split_whitespace().map(str::parse).collect::<std::result::Result<_, _>>().unwrap_or_default();
    match values[..] {
        [x, y, z] if values.iter().all(|v| v.is_finite()) => Ok(Some(Vector3::new(x, y, z))),
        _ => Err(bad_attribute(el, attr, ctx, "three finite numbers")),
    }
}

fn bad_attribute(el: Node, attr: &str, ctx: &str, expected: &str) -> RbdError {
    let text = el.attribute(attr).unwrap_or_default();
    urdf(format!("{ctx}: <{} {attr}=\"{text}\"> is not {expected}", el.tag_name().name()))
}

fn urdf(message: String) -> RbdError {
    RbdError::Urdf(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Frame;

    /// A two-link arm with a fixed tool, plus elements that must be ignored.
    const ARM: &str = r#"<?xml version="1.0"?>
<robot name="arm">
  <link name="base"><inertial><mass value="3"/><inertia ixx="1" iyy="1" izz="1"/></inertial></link>
  <link name="upper">
    <inertial><origin xyz="0 0 0.5"/><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.01"/></inertial>
    <visual><geometry><mesh filename="package://nowhere/upper.stl"/></geometry></visual>
  </link>
  <link name="fore"><inertial><origin xyz="0 0 0.25"/><mass value="1"/><inertia ixx="0.05" iyy="0.05" izz="0.005"/></inertial></link>
  <link name="tool"><inertial><origin xyz="0 0 0.1"/><mass value="0.5"/><inertia ixx="0.001" iyy="0.001" izz="0.001"/></inertial></link>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="upper"/><origin xyz="0 0 0.1"/><axis xyz="0 0 2"/>
    <limit lower="-1" upper="2" effort="10" velocity="3"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="upper"/><child link="fore"/><origin xyz="0 0 1" rpy="1.5707963267948966 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" effort="5" velocity="4"/><dynamics damping="0.5" friction="0.1"/>
  </joint>
  <joint name="tool_joint" type="fixed"><parent link="fore"/><child link="tool"/><origin xyz="0 0 0.5"/><axis xyz="0 0 0"/></joint>
  <gazebo reference="tool"><link name="bogus"/></gazebo>
  <transmission name="t"><joint name="elbow"/></transmission>
  <material name="blue"><color rgba="0 0 1 1"/></material>
</robot>"#;

    fn frame<'m>(m: &'m Model, name: &str, kind: FrameKind) -> &'m Frame {
        m.frames.iter().find(|f| f.name == name && f.kind == kind).unwrap_or_else(|| panic!("no {kind:?} frame '{name}'"))
    }

    fn assert_close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-12, "{a} != {b}");
    }

    fn err(xml: &str) -> String {
        match from_urdf_str(xml, RootJoint::Fixed) {
            Ok(_) => panic!("expected an error for\n{xml}"),
            Err(e) => e.to_string(),
        }
    }

    /// A robot with root link `r` and the given extra links and joints.
    fn robot(body: &str) -> String {
        format!(r#"<robot name="t"><link name="r"/>{body}</robot>"#)
    }

    #[test]
    fn arm_with_fixed_tool() {
        let m = from_urdf_str(ARM, RootJoint::Fixed).unwrap();
        assert_eq!(m.name, "arm");
        assert_eq!(m.joint_names, ["shoulder", "elbow"]);
        assert_eq!((m.nq, m.nv, m.nbodies()), (2, 2, 2));
        assert_eq!(m.parents, [None, Some(0)]);
        assert_eq!(m.joints[0], Joint::Revolute { axis: Vector3::z() });
        assert_eq!(m.joint_placements[0].translation, Vector3::new(0.0, 0.0, 0.1));
        let elbow = m.joint_placements[1];
        assert!((elbow.rotation * Vector3::y() - Vector3::z()).norm() < 1e-12);
        assert_eq!(elbow.translation, Vector3::new(0.0, 0.0, 1.0));
        // the tool is merged into the forearm; the base belongs to the world
        let fore = m.inertias[1];
        assert_close(fore.mass, 1.5);
        assert!((fore.com - Vector3::new(0.0, 0.0, (0.25 + 0.5 * 0.6) / 1.5)).norm() < 1e-12);
        assert_close(m.total_mass(), 3.5);
        assert_close(m.inertias[0].com.z, 0.5);
        // limits
        let l = &m.limits;
        assert_eq!((l.lower_position.as_slice(), l.upper_position.as_slice()), ([-1.0, -2.0].as_slice(), [2.0, 2.0].as_slice()));
        assert_eq!((l.effort.as_slice(), l.velocity.as_slice()), ([10.0, 5.0].as_slice(), [3.0, 4.0].as_slice()));
        assert_eq!((l.damping.as_slice(), l.friction.as_slice()), ([0.0, 0.5].as_slice(), [0.0, 0.1].as_slice()));
        // frames: links, moving joints, fixed joints; nothing from <gazebo>
        assert_eq!(m.frames.len(), 7);
        assert_eq!(frame(&m, "base", FrameKind::Body).parent, None);
        assert_eq!(frame(&m, "shoulder", FrameKind::Joint).parent, Some(0));
        assert_eq!(frame(&m, "upper", FrameKind::Body).placement, Se3::identity());
        for (name, kind) in [("tool_joint", FrameKind::FixedJoint), ("tool", FrameKind::Body)] {
            let f = frame(&m, name, kind);
            assert_eq!(f.parent, Some(1));
            assert_eq!(f.placement.translation, Vector3::new(0.0, 0.0, 0.5));
        }
        assert!(m.frame_index("bogus").is_err());
    }

    #[test]
    fn free_flyer_root_carries_the_root_link() {
        let m = from_urdf_str(ARM, RootJoint::FreeFlyer).unwrap();
        assert_eq!(m.joint_names, [ROOT_JOINT_NAME, "shoulder", "elbow"]);
        assert_eq!((m.nq, m.nv), (9, 8));
        assert_eq!(m.parents, [None, Some(0), Some(1)]);
        assert_close(m.inertias[0].mass, 3.0);
        assert_close(m.total_mass(), 6.5);
        assert_eq!(frame(&m, "base", FrameKind::Body).parent, Some(0));
        assert_eq!(frame(&m, ROOT_JOINT_NAME, FrameKind::Joint).parent, Some(0));
    }

    #[test]
    fn children_are_visited_depth_first_in_byte_order_of_joint_names() {
        let xml = robot(
            r#"<link name="lb"/><link name="la"/><link name="la2"/><link name="lB"/><link name="lc"/>
            <joint name="b" type="revolute"><parent link="r"/><child link="lb"/></joint>
            <joint name="a" type="revolute"><parent link="r"/><child link="la"/></joint>
            <joint name="c" type="continuous"><parent link="lb"/><child link="lc"/><limit effort="7" velocity="8"/></joint>
            <joint name="a_child" type="prismatic"><parent link="la"/><child link="la2"/><axis xyz="0 1 0"/></joint>
            <joint name="B" type="revolute"><parent link="r"/><child link="lB"/></joint>"#,
        );
        let m = from_urdf_str(&xml, RootJoint::Fixed).unwrap();
        assert_eq!(m.joint_names, ["B", "a", "a_child", "b", "c"]);
        assert_eq!(m.parents, [None, None, Some(1), None, Some(3)]);
        assert_eq!((m.nq, m.nv), (5, 5));
        assert_eq!(m.joints[0], Joint::Revolute { axis: Vector3::x() });
        assert_eq!(m.joints[2], Joint::Prismatic { axis: Vector3::y() });
        // the continuous joint is one unbounded angle; a <limit>-less revolute is unbounded
        assert_eq!(m.limits.lower_position, [f64::NEG_INFINITY; 5]);
        assert_eq!(m.limits.upper_position, [f64::INFINITY; 5]);
        assert_eq!((m.limits.effort[4], m.limits.velocity[4]), (7.0, 8.0));
        assert_eq!(m.limits.effort[3], f64::INFINITY);
    }

    #[test]
    fn prismatic_limits_and_dynamics() {
        let xml = robot(
            r#"<link name="s"/>
            <joint name="slider" type="prismatic"><parent link="r"/><child link="s"/><axis xyz="0 -3 0"/>
              <limit lower="-0.5" upper="0.5" effort="100"/><dynamics friction="0.3"/></joint>"#,
        );
        let m = from_urdf_str(&xml, RootJoint::Fixed).unwrap();
        assert_eq!(m.joints[0], Joint::Prismatic { axis: -Vector3::y() });
        let l = &m.limits;
        assert_eq!((l.lower_position[0], l.upper_position[0], l.effort[0], l.velocity[0]), (-0.5, 0.5, 100.0, f64::INFINITY));
        assert_eq!((l.damping[0], l.friction[0]), (0.0, 0.3));
    }

    #[test]
    fn floating_and_planar_joints() {
        let xml = robot(
            r#"<link name="f"/><link name="p"><inertial><origin xyz="1 2 3"/><mass value="1"/></inertial></link>
            <link name="p2"/>
            <joint name="float" type="floating"><parent link="r"/><child link="f"/><origin xyz="0 0 1"/></joint>
            <joint name="plane" type="planar"><parent link="r"/><child link="p"/><origin xyz="0 1 0" rpy="0 0 0.3"/><axis xyz="1 0 0"/></joint>
            <joint name="plane_fixed" type="fixed"><parent link="p"/><child link="p2"/><origin xyz="0 0 1"/></joint>"#,
        );
        let m = from_urdf_str(&xml, RootJoint::Fixed).unwrap();
        assert_eq!(m.joint_names, ["float", "plane"]);
        assert_eq!(m.joints, [Joint::FreeFlyer, Joint::Planar]);
        assert_eq!((m.nq, m.nv), (11, 9));
        // the plane of motion is normal to the URDF axis, expressed in the joint origin frame
        let origin = Se3::from_rpy(&Vector3::new(0.0, 0.0, 0.3), Vector3::new(0.0, 1.0, 0.0));
        let placement = m.joint_placements[1];
        assert!((placement.rotation * Vector3::z() - origin.rotation * Vector3::x()).norm() < 1e-12);
        assert!((placement.translation - origin.translation).norm() < 1e-12);
        // the link keeps its URDF placement: link frame = joint frame · R_aᵀ = origin at q = 0
        let link = frame(&m, "p", FrameKind::Body);
        assert!(((placement * link.placement).rotation - origin.rotation).abs().max() < 1e-12);
        let com_in_parent = placement.act_point(&m.inertias[1].com);
        assert!((com_in_parent - origin.act_point(&Vector3::new(1.0, 2.0, 3.0))).norm() < 1e-12);
        let tip = placement * frame(&m, "p2", FrameKind::Body).placement;
        assert!((tip.translation - origin.act_point(&Vector3::z())).norm() < 1e-12);
    }

    #[test]
    fn inertial_origin_rotates_the_inertia_tensor() {
        let xml = r#"<robot name="b"><link name="r"><inertial><origin xyz="0.1 0 0" rpy="0 0 1.5707963267948966"/>
            <mass value="2"/><inertia ixx="1" ixy="0" ixz="0" iyy="2" iyz="0" izz="3"/></inertial></link></robot>"#;
        let m = from_urdf_str(xml, RootJoint::FreeFlyer).unwrap();
        let i = m.inertias[0];
        assert_close(i.mass, 2.0);
        assert_eq!(i.com, Vector3::new(0.1, 0.0, 0.0));
        assert!((i.rot_inertia - Matrix3::from_diagonal(&Vector3::new(2.0, 1.0, 3.0))).abs().max() < 1e-12);
    }

    #[test]
    fn models_without_moving_joints() {
        let xml = r#"<robot name="rigid"><link name="a"/><link name="b"/>
            <joint name="weld" type="fixed"><parent link="a"/><child link="b"/></joint></robot>"#;
        let m = from_urdf_str(xml, RootJoint::Fixed).unwrap();
        assert_eq!((m.nq, m.nv, m.nbodies()), (0, 0, 0));
        assert_eq!(m.frames.len(), 3);
        let m = from_urdf_str(xml, RootJoint::FreeFlyer).unwrap();
        assert_eq!((m.nq, m.nv, m.nbodies()), (7, 6, 1));
        assert_eq!(frame(&m, "b", FrameKind::Body).parent, Some(0));
    }

    #[test]
    fn nameless_robot_is_accepted() {
        assert_eq!(from_urdf_str(r#"<robot><link name="a"/></robot>"#, RootJoint::Fixed).unwrap().name, "");
    }

    #[test]
    fn errors_name_the_culprit() {
        let revolute = |extra: &str| robot(&format!(r#"<link name="c"/><joint name="j" type="revolute"><parent link="r"/><child link="c"/>{extra}</joint>"#));
        let cases: Vec<(String, Vec<&str>)> = vec![
            (r#"<robot name="x"><link name="a"></robot>"#.into(), vec!["malformed XML"]),
            (r#"<model name="x"/>"#.into(), vec!["<model>", "<robot>"]),
            (r#"<robot name="x"/>"#.into(), vec!["no <link>"]),
            (
                robot(r#"<joint name="j" type="fixed"><parent link="r"/><child link="ghost"/></joint>"#),
                vec!["joint 'j'", "<child link=\"ghost\">", "unknown link"],
            ),
            (robot(r#"<joint name="j" type="fixed"><parent link="r"/></joint>"#), vec!["joint 'j'", "missing <child>"]),
            (robot(r#"<link name="a"/>"#), vec!["several root links", "'r'", "'a'"]),
            (
                r#"<robot name="x"><link name="a"/><link name="b"/>
                <joint name="j1" type="fixed"><parent link="a"/><child link="b"/></joint>
                <joint name="j2" type="fixed"><parent link="b"/><child link="a"/></joint></robot>"#
                    .into(),
                vec!["no root link", "cycle"],
            ),
            (
                robot(
                    r#"<link name="a"/><link name="b"/>
                    <joint name="j1" type="fixed"><parent link="a"/><child link="b"/></joint>
                    <joint name="j2" type="fixed"><parent link="b"/><child link="a"/></joint>"#,
                ),
                vec!["'a', 'b'", "not connected to the root link 'r'"],
            ),
            (
                robot(
                    r#"<link name="a"/><joint name="j1" type="fixed"><parent link="r"/><child link="a"/></joint>
                    <joint name="j2" type="fixed"><parent link="r"/><child link="a"/></joint>"#,
                ),
                vec!["link 'a'", "two joints", "'j1'", "'j2'"],
            ),
            (
                robot(r#"<link name="c"/><joint name="j" type="ball"><parent link="r"/><child link="c"/></joint>"#),
                vec!["joint 'j'", "unknown joint type 'ball'"],
            ),
            (revolute(r#"<axis xyz="0 0 0"/>"#), vec!["joint 'j'", "<axis xyz>", "zero"]),
            (revolute(r#"<axis xyz="0 1"/>"#), vec!["joint 'j'", "<axis xyz=\"0 1\">", "three finite numbers"]),
            (revolute(r#"<origin xyz="0 0 nan"/>"#), vec!["joint 'j'", "<origin xyz="]),
            (revolute(r#"<limit lower="1" upper="-1"/>"#), vec!["joint 'j'", "<limit>", "lower"]),
            (revolute(r#"<limit effort="lots"/>"#), vec!["joint 'j'", "<limit effort=\"lots\">", "not a number"]),
            (revolute(r#"<dynamics damping="inf"/>"#), vec!["joint 'j'", "<dynamics damping=\"inf\">", "finite"]),
            (robot(r#"<joint name="j" type="revolute"><parent link="r"/><child link="r"/></joint>"#), vec!["no root link"]),
            (
                robot(
                    r#"<link name="n"><inertial><mass value="-1"/></inertial></link><joint name="j" type="revolute"><parent link="r"/><child link="n"/></joint>"#,
                ),
                vec!["link 'n'", "<mass value=\"-1\">", "negative"],
            ),
            (robot(r#"<link name="n"><inertial/></link>"#), vec!["link 'n'", "no <mass>"]),
            (robot(r#"<link name="r"/>"#), vec!["link 'r'", "defined twice"]),
            (
                robot(
                    r#"<link name="n"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="-1"/></inertial></link><joint name="j" type="revolute"><parent link="r"/><child link="n"/></joint>"#,
                ),
                vec!["link 'n'", "non-physical inertia"],
            ),
        ];
        for (xml, needles) in cases {
            let e = err(&xml);
            assert!(e.starts_with("URDF error"), "{e}");
            for needle in needles {
                assert!(e.contains(needle), "error for\n{xml}\nis '{e}', which lacks '{needle}'");
            }
        }
        let e = from_urdf_file("/nonexistent/robot.urdf", RootJoint::Fixed).unwrap_err().to_string();
        assert!(e.contains("cannot read /nonexistent/robot.urdf"), "{e}");
    }

    /// Loads every `*.urdf` under `$EXAMPLE_ROBOT_DATA_DIR` (skipped when unset).
    #[test]
    fn example_robot_data_loads() {
        let Ok(dir) = std::env::var("EXAMPLE_ROBOT_DATA_DIR") else {
            return;
        };
        // Files without any link (Pinocchio rejects them too).
        const EMPTY: &[&str] = &["ur3.urdf"];
        // Files with non-positive-semi-definite body inertias (accepted by Pinocchio).
        const NON_PHYSICAL: &[&str] = &["romeo_laas_small.urdf"];
        let mut pending = vec![std::path::PathBuf::from(dir)];
        let mut count = 0;
        while let Some(path) = pending.pop() {
            if path.is_dir() {
                pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("urdf") {
                continue;
            }
            count += 1;
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            for root in [RootJoint::Fixed, RootJoint::FreeFlyer] {
                match from_urdf_file(&path, root) {
                    Ok(m) => {
                        assert!(!EMPTY.contains(&file.as_str()) && !NON_PHYSICAL.contains(&file.as_str()), "{file} loaded");
                        assert_eq!(m.nv, m.joints.iter().map(Joint::nv).sum::<usize>());
                        assert_eq!(root == RootJoint::FreeFlyer, m.joint_names.first().is_some_and(|n| n == ROOT_JOINT_NAME));
                    }
                    Err(e) => {
                        let e = e.to_string();
                        let expected = (EMPTY.contains(&file.as_str()) && e.contains("no <link>"))
                            || (NON_PHYSICAL.contains(&file.as_str()) && e.contains("non-physical inertia"));
                        assert!(expected, "{}: {e}", path.display());
                    }
                }
            }
        }
        assert!(count > 0, "no URDF found");
    }
}
