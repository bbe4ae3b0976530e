//! Built-in models for tests, benchmarks and examples.
//!
//! Links are uniform thin rods hanging along `−z` of their body frame: a rod of mass `m` and
//! length `ℓ` has its centre of mass at `(0, 0, −ℓ/2)` and rotational inertia
//! `diag(mℓ²/12, mℓ²/12, 0)` about it. The next joint sits at the rod's end `(0, 0, −ℓ)`, so at
//! `q = 0` every chain hangs straight down (stable equilibrium) under the default gravity
//! `(0, 0, −9.81)`. Each body comes with a [`FrameKind::Joint`] frame named after its joint and
//! a [`FrameKind::Body`] frame for its link.

use crate::joint::Joint;
use crate::model::{FrameKind, Model, ModelBuilder};
use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vidyn_spatial::{Inertia, Se3};

const VALID: &str = "built-in models are valid by construction";

/// A chain of `n` unit rods (1 m, 1 kg) hanging from the world origin.
///
/// Joints `joint1 … jointN` are revolute; with `planar` they all turn about `y` (motion in the
/// xz plane), otherwise odd-numbered joints (`joint1`, `joint3`, …) turn about `y` and
/// even-numbered ones about `x`, giving a spatial chain. Frames: `jointK` (joint), `linkK`
/// (body) and the operational frame `tip` at the end of the last rod (at the world origin
/// when `n = 0`).
#[must_use]
pub fn pendulum_chain(n: usize, planar: bool) -> Model {
    let mut b = ModelBuilder::new(&format!("pendulum_chain_{n}_{}", if planar { "planar" } else { "3d" }));
    let mut parent = None;
    for k in 0..n {
        let axis = if planar || k % 2 == 0 { Vector3::y() } else { Vector3::x() };
        let placement = if k == 0 { Se3::identity() } else { rod_end(1.0) };
        let joint = Joint::Revolute { axis };
        parent = Some(add_link(&mut b, parent, &format!("joint{}", k + 1), &format!("link{}", k + 1), joint, placement, rod(1.0, 1.0)));
    }
    let tip = if parent.is_some() { rod_end(1.0) } else { Se3::identity() };
    b.add_frame("tip", parent, tip, FrameKind::Operational).expect(VALID);
    b.build().expect(VALID)
}

/// A complete binary tree of `depth` levels, `2^depth − 1` bodies (none for `depth = 0`).
///
/// Bodies are numbered depth-first, left subtree first; body `k` (0-based) is a rod of mass
/// `1 + 0.1 k` and length `ℓ_k = 1 + 0.05 k` on a revolute joint `joint{k+1}` about `y` on even
/// levels (the root is level 0) and about `x` on odd ones. The children of body `k` hang at
/// `(±ℓ_k / 4, 0, −ℓ_k)`, the left one at `+`. Frames: `joint{k+1}` and `link{k+1}`.
#[must_use]
pub fn binary_tree(depth: usize) -> Model {
    let mut b = ModelBuilder::new(&format!("binary_tree_{depth}"));
    // (parent, level, placement in the parent); popping the left child first numbers it first
    let mut stack: Vec<(Option<usize>, usize, Se3)> = Vec::new();
    if depth > 0 {
        stack.push((None, 0, Se3::identity()));
    }
    while let Some((parent, level, placement)) = stack.pop() {
        let k = b.len();
        let length = 1.0 + 0.05 * k as f64;
        let axis = if level % 2 == 0 { Vector3::y() } else { Vector3::x() };
        let inertia = rod(1.0 + 0.1 * k as f64, length);
        let id = add_link(&mut b, parent, &format!("joint{}", k + 1), &format!("link{}", k + 1), Joint::Revolute { axis }, placement, inertia);
        if level + 1 < depth {
            for side in [-1.0, 1.0] {
                let at = Se3::new(Matrix3::identity(), Vector3::new(side * length / 4.0, 0.0, -length));
                stack.push((Some(id), level + 1, at));
            }
        }
    }
    b.build().expect(VALID)
}

/// Cart-pole: joint `cart` slides along `x` carrying a 1 kg point mass; joint `pole` turns
/// about `y` at the cart carrying a 0.1 kg, 1 m rod (centre of mass 0.5 m from the pivot). The
/// pole hangs down at `q = 0` and is upright at `θ = π`. Frames: `cart`, `pole` (joints),
/// `cart_link`, `pole_link` (bodies) and `tip` at the free end of the pole.
#[must_use]
pub fn cartpole() -> Model {
    let mut b = ModelBuilder::new("cartpole");
    let point_mass = Inertia::new(1.0, Vector3::zeros(), Matrix3::zeros());
    let cart = add_link(&mut b, None, "cart", "cart_link", Joint::Prismatic { axis: Vector3::x() }, Se3::identity(), point_mass);
    let pole = add_link(&mut b, Some(cart), "pole", "pole_link", Joint::Revolute { axis: Vector3::y() }, Se3::identity(), rod(0.1, 1.0));
    b.add_frame("tip", Some(pole), rod_end(1.0), FrameKind::Operational).expect(VALID);
    b.build().expect(VALID)
}

/// Acrobot (classic parameters `ℓ₁ = ℓ₂ = 1`, `m₁ = m₂ = 1`, centres of mass at 0.5,
/// `I_c = 1/12`): joints `shoulder` and `elbow` both turn about `y`; hanging down at `q = 0`.
/// Frames: `shoulder`, `elbow` (joints), `link1`, `link2` (bodies) and `tip`.
#[must_use]
pub fn acrobot() -> Model {
    let mut b = ModelBuilder::new("acrobot");
    let axis = Vector3::y();
    let upper = add_link(&mut b, None, "shoulder", "link1", Joint::Revolute { axis }, Se3::identity(), rod(1.0, 1.0));
    let lower = add_link(&mut b, Some(upper), "elbow", "link2", Joint::Revolute { axis }, rod_end(1.0), rod(1.0, 1.0));
    b.add_frame("tip", Some(lower), rod_end(1.0), FrameKind::Operational).expect(VALID);
    b.build().expect(VALID)
}

/// Probability that a body other than the first hangs from the world in [`random_tree`].
const WORLD_PROBABILITY: f64 = 0.1;

/// A random tree of `n` bodies, reproducible from `seed` (ChaCha8).
///
/// Body `i` (in creation order) is attached to the world when `i = 0` and with probability
/// 0.1 otherwise, else to a body drawn uniformly from `0..i`; bodies are then renumbered
/// depth-first by [`ModelBuilder::build`]. Its joint `joint{i+1}` is drawn uniformly from
/// `kinds` (from [`Joint::examples`] when `kinds` is empty), with a fresh uniformly random unit
/// axis for revolute and prismatic joints. The joint placement has a uniformly random rotation
/// and a translation uniform in `[−1, 1]³`. The inertia has mass uniform in `[0.1, 5]`, centre
/// of mass uniform in `[−1, 1]³` and rotational inertia `tr(Σ) 1 − Σ` with `Σ = AAᵀ + 0.1·1`,
/// `A` uniform in `[−1, 1]^{3×3}` (positive definite and satisfying the triangle
/// inequalities). Frames: `joint{i+1}` (identity) and `link{i+1}`, a body frame at a random
/// placement like a link merged through a fixed joint.
#[must_use]
pub fn random_tree(n: usize, seed: u64, kinds: &[Joint]) -> Model {
    let examples = Joint::examples();
    let kinds = if kinds.is_empty() { &examples[..] } else { kinds };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut b = ModelBuilder::new(&format!("random_tree_{n}_seed{seed}"));
    for i in 0..n {
        let parent = if i == 0 || rng.random_range(0.0..1.0) < WORLD_PROBABILITY { None } else { Some(rng.random_range(0..i)) };
        let joint = match kinds[rng.random_range(0..kinds.len())] {
            Joint::Revolute { .. } => Joint::Revolute { axis: random_unit_vector(&mut rng) },
            Joint::Prismatic { .. } => Joint::Prismatic { axis: random_unit_vector(&mut rng) },
            other => other,
        };
        let placement = random_placement(&mut rng);
        let inertia = random_inertia(&mut rng);
        let name = format!("joint{}", i + 1);
        let id = b.add_body(parent, &name, joint, placement, inertia).expect(VALID);
        b.add_frame(&name, Some(id), Se3::identity(), FrameKind::Joint).expect(VALID);
        let link = random_placement(&mut rng);
        b.add_frame(&format!("link{}", i + 1), Some(id), link, FrameKind::Body).expect(VALID);
    }
    b.build().expect(VALID)
}

/// Adds a body together with its joint frame and its link's body frame (both identity).
fn add_link(b: &mut ModelBuilder, parent: Option<usize>, joint_name: &str, link_name: &str, joint: Joint, placement: Se3, inertia: Inertia) -> usize {
    let id = b.add_body(parent, joint_name, joint, placement, inertia).expect(VALID);
    b.add_frame(joint_name, Some(id), Se3::identity(), FrameKind::Joint).expect(VALID);
    b.add_frame(link_name, Some(id), Se3::identity(), FrameKind::Body).expect(VALID);
    id
}

/// Uniform thin rod of mass `m` and length `ℓ` hanging along `−z` from the body origin.
fn rod(mass: f64, length: f64) -> Inertia {
    let i = mass * length * length / 12.0;
    Inertia::new(mass, Vector3::new(0.0, 0.0, -length / 2.0), Matrix3::from_diagonal(&Vector3::new(i, i, 0.0)))
}

/// The free end of a rod of length `ℓ`, `(0, 0, −ℓ)`.
fn rod_end(length: f64) -> Se3 {
    Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -length))
}

fn cube_point(rng: &mut ChaCha8Rng) -> Vector3<f64> {
    Vector3::from_fn(|_, _| rng.random_range(-1.0..1.0))
}

/// Uniform on the unit sphere: a point uniform in the unit ball (by rejection), normalised.
fn random_unit_vector(rng: &mut ChaCha8Rng) -> Vector3<f64> {
    loop {
        let p = cube_point(rng);
        let r = p.norm();
        if (0.1..=1.0).contains(&r) {
            return p / r;
        }
    }
}

/// Uniform rotation (a point uniform in the unit 4-ball, normalised to a unit quaternion) and
/// translation uniform in `[−1, 1]³`.
fn random_placement(rng: &mut ChaCha8Rng) -> Se3 {
    let q = loop {
        let q = Quaternion::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0));
        if (0.1..=1.0).contains(&q.norm()) {
            break UnitQuaternion::from_quaternion(q);
        }
    };
    Se3::from_quaternion(&q, cube_point(rng))
}

fn random_inertia(rng: &mut ChaCha8Rng) -> Inertia {
    let mass = rng.random_range(0.1..5.0);
    let com = cube_point(rng);
    let a = Matrix3::from_fn(|_, _| rng.random_range(-1.0..1.0));
    let sigma = a * a.transpose() + Matrix3::identity() * 0.1;
    Inertia::new(mass, com, Matrix3::identity() * sigma.trace() - sigma)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Placement of body `i` in the world at `q = 0`.
    fn neutral_placement(m: &Model, i: usize) -> Se3 {
        let local = m.joint_placements[i];
        m.parents[i].map_or(local, |p| neutral_placement(m, p) * local)
    }

    /// Bodies are in depth-first pre-order: parents first, subtrees contiguous.
    fn assert_depth_first(m: &Model) {
        for i in 0..m.nbodies() {
            if let Some(p) = m.parents[i] {
                assert!(p < i && m.is_ancestor(p, i), "{}: body {i}", m.name);
            }
            let end = i + m.subtree_size[i];
            assert!((i + 1..end).all(|j| m.parents[j].is_some_and(|p| p >= i)), "{}: subtree of {i}", m.name);
        }
    }

    #[test]
    fn pendulum_chains() {
        for planar in [true, false] {
            for n in 0..6 {
                let m = pendulum_chain(n, planar);
                assert_eq!((m.nq, m.nv, m.nbodies()), (n, n, n));
                assert_eq!(m.parents, (0..n).map(|i| i.checked_sub(1)).collect::<Vec<_>>());
                assert!((m.total_mass() - n as f64).abs() < 1e-12);
                assert_eq!(m.joint_names, (1..=n).map(|k| format!("joint{k}")).collect::<Vec<_>>());
                assert_eq!(m.frames.len(), 2 * n + 1);
                let tip = &m.frames[m.frame_index("tip").unwrap()];
                let tip_in_world = tip.parent.map_or(Se3::identity(), |p| neutral_placement(&m, p)) * tip.placement;
                assert!((tip_in_world.translation - Vector3::new(0.0, 0.0, -(n as f64))).norm() < 1e-12);
                for (k, j) in m.joints.iter().enumerate() {
                    let axis = if planar || k % 2 == 0 { Vector3::y() } else { Vector3::x() };
                    assert_eq!(*j, Joint::Revolute { axis });
                }
                assert_depth_first(&m);
            }
        }
        let m = pendulum_chain(2, true);
        assert_eq!(m.inertias[1].com, Vector3::new(0.0, 0.0, -0.5));
        assert!((m.inertias[1].rot_inertia[(1, 1)] - 1.0 / 12.0).abs() < 1e-15);
    }

    #[test]
    fn binary_trees() {
        for depth in 0..6 {
            let m = binary_tree(depth);
            let n = (1 << depth) - 1;
            assert_eq!((m.nq, m.nv, m.nbodies()), (n, n, n));
            assert_depth_first(&m);
            for i in 0..n {
                let kids = &m.children[i];
                // a leaf, or two children of which the first (left) directly follows its parent
                assert!(kids.is_empty() || (kids.len() == 2 && kids[0] == i + 1), "{:?}", kids);
                assert!((m.inertias[i].mass - (1.0 + 0.1 * i as f64)).abs() < 1e-12);
            }
            if depth > 0 {
                assert_eq!(m.subtree_size[0], n);
            }
        }
        let m = binary_tree(3);
        // bodies 0 (root), 1 (left), 2 (left-left), 3 (left-right), 4 (right), …
        assert_eq!(m.parents, [None, Some(0), Some(1), Some(1), Some(0), Some(4), Some(4)]);
        assert_eq!(m.joints[0], Joint::Revolute { axis: Vector3::y() });
        assert_eq!(m.joints[1], Joint::Revolute { axis: Vector3::x() });
        assert_eq!(m.joints[2], Joint::Revolute { axis: Vector3::y() });
        assert!((m.joint_placements[1].translation - Vector3::new(0.25, 0.0, -1.0)).norm() < 1e-12);
        assert!((m.joint_placements[4].translation - Vector3::new(-0.25, 0.0, -1.0)).norm() < 1e-12);
        assert!((m.joint_placements[3].translation - Vector3::new(-1.05 / 4.0, 0.0, -1.05)).norm() < 1e-12);
    }

    #[test]
    fn cartpole_and_acrobot() {
        let m = cartpole();
        assert_eq!(m.joint_names, ["cart", "pole"]);
        assert_eq!(m.joints, [Joint::Prismatic { axis: Vector3::x() }, Joint::Revolute { axis: Vector3::y() }]);
        assert_eq!((m.nq, m.nv), (2, 2));
        assert_eq!((m.inertias[0].mass, m.inertias[1].mass), (1.0, 0.1));
        assert_eq!(m.inertias[1].com, Vector3::new(0.0, 0.0, -0.5));
        assert_eq!(m.gravity.linear, Vector3::new(0.0, 0.0, -9.81));

        let m = acrobot();
        assert_eq!(m.joint_names, ["shoulder", "elbow"]);
        assert_eq!(m.parents, [None, Some(0)]);
        assert_eq!(m.joint_placements[1].translation, Vector3::new(0.0, 0.0, -1.0));
        for i in &m.inertias {
            assert_eq!((i.mass, i.com), (1.0, Vector3::new(0.0, 0.0, -0.5)));
            assert!((i.rot_inertia[(1, 1)] - 1.0 / 12.0).abs() < 1e-15);
        }
        assert_eq!(m.frames[m.frame_index("tip").unwrap()].parent, Some(1));
    }

    #[test]
    fn random_trees_are_reproducible_depth_first_and_cover_every_kind() {
        let m = random_tree(80, 7, &Joint::examples());
        assert_eq!(m.nbodies(), 80);
        assert_eq!(m.nq, m.joints.iter().map(Joint::nq).sum::<usize>());
        assert_depth_first(&m);
        let kinds: BTreeSet<&str> = m.joints.iter().map(Joint::kind_name).collect();
        let all: BTreeSet<&str> = Joint::examples().iter().map(Joint::kind_name).collect();
        assert_eq!(kinds, all);
        assert!(m.parents.iter().filter(|p| p.is_none()).count() > 1, "no second root");
        for (j, i) in m.joints.iter().zip(&m.inertias) {
            if let Joint::Revolute { axis } | Joint::Prismatic { axis } = j {
                assert!((axis.norm() - 1.0).abs() < 1e-12);
                assert!(!Joint::examples().contains(j), "axis not redrawn");
            }
            assert!(i.is_physical(1e-12) && (0.1..5.0).contains(&i.mass));
        }
        assert_eq!(m.frames.len(), 160);

        let again = random_tree(80, 7, &[]);
        assert_eq!((again.joints, again.joint_placements, again.inertias), (m.joints.clone(), m.joint_placements.clone(), m.inertias.clone()));
        assert_ne!(random_tree(80, 8, &[]).joint_placements, m.joint_placements);

        let m = random_tree(10, 1, &[Joint::FreeFlyer]);
        assert_eq!((m.nq, m.nv), (70, 60));
        assert_eq!(random_tree(0, 1, &[]).nbodies(), 0);
    }
}
