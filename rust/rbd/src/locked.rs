//! Models with some joints locked at a configuration: Pinocchio's `buildReducedModel`, the
//! usual way to drop a humanoid's arms or head from a locomotion problem (crocoddyl's Talos
//! examples lock every joint but the legs').
//!
//! A locked joint becomes a fixed one at its coordinates in the reference configuration
//! `q_ref`: its body is merged into the nearest unlocked ancestor (or the world) exactly as the
//! URDF reader merges fixed joints. With `X_i` the placement of body `i` in its nearest
//! unlocked ancestor `a(i)`,
//!
//! * an unlocked body keeps its joint, inertia and limits; its joint placement becomes
//!   `X_{parent} · placement_i` (`X = 1` for an unlocked parent);
//! * a locked body has `X_i = X_{parent} · placement_i · joint_i(q_ref,i)`, and its inertia is
//!   added to `a(i)`'s as `X_i · I_i` (dropped when `a(i)` is the world, where it cannot
//!   move);
//! * every frame on body `i` moves to `a(i)` with placement `X_i · placement`; a locked
//!   joint's own frame becomes a [`FrameKind::FixedJoint`] frame.
//!
//! Bodies keep their names and depth-first order, so the remaining coordinates are those of
//! `q_ref` with the locked joints' coordinates removed.

use crate::check::check_configuration;
use crate::error::{RbdError, Result};
use crate::model::{FrameKind, JointLimits, Model, ModelBuilder};
use vidyn_spatial::Se3;

/// `model` with the joints `locked` (body indices, any order, no repeats) fixed at their
/// coordinates in `q_ref` (`(nq,)`, a valid configuration) (module docs). Errors on an
/// invalid `q_ref`, an index out of range or repeated, when the joints left would form no
/// body, on a model with mimic joints, or on a model of Euler-angle chains ([`crate::to_single_dof`]: lock joints of the
/// native model, then expand it).
pub fn lock_joints(model: &Model, locked: &[usize], q_ref: &[f64]) -> Result<Model> {
    check_configuration(model, q_ref)?;
    model.refuse_mimics("lock_joints")?;
    if !model.gimbals.is_empty() {
        return Err(RbdError::InvalidModel(
            "joints of an Euler-angle-chain model (to_single_dof) cannot be locked: lock them on the native model first".into(),
        ));
    }
    let n = model.nbodies();
    let mut is_locked = vec![false; n];
    for &i in locked {
        if i >= n {
            return Err(RbdError::IndexOutOfRange { what: "locked joint", index: i, len: n });
        }
        if std::mem::replace(&mut is_locked[i], true) {
            return Err(RbdError::InvalidModel(format!("joint '{}' is locked twice", model.joint_names[i])));
        }
    }
    if is_locked.iter().all(|&l| l) {
        return Err(RbdError::InvalidModel("every joint is locked: the reduced model would have no body".into()));
    }
    let mut builder = ModelBuilder::new(&model.name);
    builder.gravity(model.gravity.linear);
    // per body: the builder index of its nearest unlocked ancestor-or-self, and its placement there
    let mut anchor: Vec<(Option<usize>, Se3)> = Vec::with_capacity(n);
    for i in 0..n {
        let (owner, above) = match model.parents[i] {
            Some(p) => anchor[p],
            None => (None, Se3::identity()),
        };
        let placement = above * model.joint_placements[i];
        let joint = &model.joints[i];
        if is_locked[i] {
            let (q0, nq) = (model.idx_q[i], joint.nq());
            let x = placement * joint.transform(&q_ref[q0..q0 + nq]);
            if let Some(a) = owner {
                builder.append_inertia(a, model.inertias[i].transformed(&x))?;
            }
            anchor.push((owner, x));
        } else {
            let id = builder.add_body(owner, &model.joint_names[i], *joint, placement, model.inertias[i])?;
            builder.set_limits(id, joint_limits(model, i))?;
            anchor.push((Some(id), Se3::identity()));
        }
    }
    for f in &model.frames {
        let (parent, placement, kind) = match f.parent {
            Some(body) => {
                let (owner, x) = anchor[body];
                let kind = if is_locked[body] && f.kind == FrameKind::Joint { FrameKind::FixedJoint } else { f.kind };
                (owner, x * f.placement, kind)
            }
            None => (None, f.placement, f.kind),
        };
        builder.add_frame(&f.name, parent, placement, kind)?;
    }
    builder.build()
}

/// The limits and friction of body `i`'s joint, read from `model.limits`.
fn joint_limits(model: &Model, i: usize) -> JointLimits {
    let (q0, v0) = (model.idx_q[i], model.idx_v[i]);
    let (nq, nv) = (model.joints[i].nq(), model.joints[i].nv());
    let l = &model.limits;
    JointLimits {
        lower: l.lower_position[q0..q0 + nq].to_vec(),
        upper: l.upper_position[q0..q0 + nq].to_vec(),
        velocity: l.velocity[v0..v0 + nv].to_vec(),
        effort: l.effort[v0..v0 + nv].to_vec(),
        damping: l.damping[v0..v0 + nv].to_vec(),
        friction: l.friction[v0..v0 + nv].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::random_tree;
    use crate::{crba, placements, random_configuration, rnea, update_frame_placements, Joint};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// With the locked joints at their reference coordinates and at rest, the reduced model
    /// is the full one restricted to the unlocked coordinates: its mass matrix is the full
    /// one's unlocked block, its inverse dynamics the full one's unlocked rows, and every frame
    /// (kept by name) sits where it sits in the full model, to round-off; on random trees of
    /// every joint kind with random locked sets (the root's included), random states.
    #[test]
    fn a_reduced_model_is_the_full_one_at_rest_in_the_locked_joints() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for seed in 0..8 {
            let model = random_tree(9, seed, &Joint::examples());
            let n = model.nbodies();
            let locked: Vec<usize> = (0..n).filter(|_| rng.random_bool(0.4)).collect();
            if locked.len() == n {
                continue;
            }
            let q_ref = random_configuration(&model, &mut rng);
            let reduced = lock_joints(&model, &locked, &q_ref).unwrap();
            // coordinates kept, in order
            let (mut qi, mut vi) = (Vec::new(), Vec::new());
            for i in (0..n).filter(|i| !locked.contains(i)) {
                qi.extend(model.idx_q[i]..model.idx_q[i] + model.joints[i].nq());
                vi.extend(model.idx_v[i]..model.idx_v[i] + model.joints[i].nv());
            }
            assert_eq!((reduced.nq, reduced.nv), (qi.len(), vi.len()));
            let mut q = random_configuration(&model, &mut rng);
            for i in &locked {
                let (a, k) = (model.idx_q[*i], model.joints[*i].nq());
                q[a..a + k].copy_from_slice(&q_ref[a..a + k]);
            }
            let (mut v, mut a) = (vec![0.0; model.nv], vec![0.0; model.nv]);
            for &j in &vi {
                v[j] = rng.random_range(-1.0..1.0);
                a[j] = rng.random_range(-1.0..1.0);
            }
            let pick = |x: &[f64], idx: &[usize]| idx.iter().map(|&j| x[j]).collect::<Vec<f64>>();
            let (qr, vr, ar) = (pick(&q, &qi), pick(&v, &vi), pick(&a, &vi));
            let (mut ws, mut wr) = (model.workspace(), reduced.workspace());
            let m_full = crba(&model, &mut ws, &q).unwrap().clone();
            let m_red = crba(&reduced, &mut wr, &qr).unwrap().clone();
            let tau_full = rnea(&model, &mut ws, &q, &v, &a, None).unwrap().to_vec();
            let tau_red = rnea(&reduced, &mut wr, &qr, &vr, &ar, None).unwrap().to_vec();
            let scale = m_full.amax().max(1.0);
            for (r, &i) in vi.iter().enumerate() {
                assert!((tau_red[r] - tau_full[i]).abs() < 1e-11 * scale.max(tau_full[i].abs()), "seed {seed}: τ[{i}]");
                for (c, &j) in vi.iter().enumerate() {
                    assert!((m_red[(r, c)] - m_full[(i, j)]).abs() < 1e-11 * scale, "seed {seed}: M[{i}, {j}]");
                }
            }
            placements(&model, &mut ws, &q).unwrap();
            update_frame_placements(&model, &mut ws);
            placements(&reduced, &mut wr, &qr).unwrap();
            update_frame_placements(&reduced, &mut wr);
            for (k, f) in model.frames.iter().enumerate() {
                let r = reduced.frames.iter().position(|g| g.name == f.name).expect("every frame is kept");
                let (x, y) = (&ws.frame_placements[k], &wr.frame_placements[r]);
                assert!((x.rotation - y.rotation).amax() < 1e-12 && (x.translation - y.translation).amax() < 1e-12, "seed {seed}: frame {}", f.name);
            }
        }
    }

    #[test]
    fn bad_locks_are_errors() {
        let model = random_tree(4, 1, &Joint::examples());
        let q = crate::neutral(&model);
        assert!(lock_joints(&model, &[7], &q).is_err());
        assert!(lock_joints(&model, &[1, 1], &q).is_err());
        assert!(lock_joints(&model, &[0, 1, 2, 3], &q).is_err());
        assert!(lock_joints(&model, &[1], &q[1..]).is_err());
    }
}
