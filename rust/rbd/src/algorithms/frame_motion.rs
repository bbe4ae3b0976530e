//! Velocities and accelerations of frames (Pinocchio's `getFrameVelocity`,
//! `getFrameAcceleration` and `getFrameClassicalAcceleration`), in the three
//! [`ReferenceFrame`]s of the frame Jacobians.
//!
//! A frame moves with its parent body `b`: its motion is the body's motion `m` (body frame,
//! at the body origin) expressed elsewhere: `⁰X_b m` in [`ReferenceFrame::World`] (at the
//! world origin), `ᶠX_b m` in [`ReferenceFrame::Local`], and that rotated to world axes in
//! [`ReferenceFrame::LocalWorldAligned`] (at the frame origin). So the frame velocity in a
//! reference is `J(q) v` with the frame Jacobian in the same reference. The spatial
//! acceleration is expressed the same way; the classical acceleration of the frame origin adds
//! `ω × v` to the spatial one's linear part (both in the reference).

use crate::algorithms::jacobian::ReferenceFrame;
use crate::algorithms::kinematics::{forward_kinematics, placements_unchecked, velocities_unchecked};
use crate::check::{check_configuration, check_tangent};
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use vidyn_spatial::{Motion, Se3};

/// The world placement of `frame` and of its parent body (`None`: fixed to the world), from
/// the body placements in `ws`; fills `ws.frame_placements[frame]`.
fn placed(model: &Model, ws: &mut Workspace, frame: usize) -> Result<(Se3, Option<usize>)> {
    let fr = model.frames.get(frame).ok_or(RbdError::IndexOutOfRange { what: "frame", index: frame, len: model.frames.len() })?;
    let of = match fr.parent {
        Some(b) => ws.placements[b] * fr.placement,
        None => fr.placement,
    };
    ws.frame_placements[frame] = of;
    Ok((of, fr.parent))
}

/// The body-frame motion `m` of the frame's parent body at `ob`, for a frame at `of`,
/// expressed in `reference` (module docs).
fn expressed(ob: &Se3, of: &Se3, m: &Motion, reference: ReferenceFrame) -> Motion {
    let world = ob.act_motion(m);
    match reference {
        ReferenceFrame::World => world,
        ReferenceFrame::Local => of.inv_act_motion(&world),
        ReferenceFrame::LocalWorldAligned => Motion::new(world.linear + world.angular.cross(&of.translation), world.angular),
    }
}

/// The velocity `[v; ω]` of `frame` at `(q, v)` in `reference` (= `J(q) v` with the frame
/// Jacobian in that reference). O(n). Fills placements, velocities and the frame's placement.
///
/// # Errors
/// Invalid inputs or frame index.
pub fn frame_velocity(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], frame: usize, reference: ReferenceFrame) -> Result<Motion> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    placements_unchecked(model, ws, q);
    velocities_unchecked(model, ws, v);
    let (of, parent) = placed(model, ws, frame)?;
    Ok(parent.map_or(Motion::zero(), |b| expressed(&ws.placements[b], &of, &ws.velocities[b], reference)))
}

/// The spatial acceleration of `frame` at `(q, v, a)` in `reference` (gravity excluded, as
/// [`forward_kinematics`]). O(n). Fills what [`forward_kinematics`] fills and the frame's
/// placement.
///
/// # Errors
/// Invalid inputs or frame index.
pub fn frame_acceleration(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], a: &[f64], frame: usize, reference: ReferenceFrame) -> Result<Motion> {
    forward_kinematics(model, ws, q, v, a)?;
    let (of, parent) = placed(model, ws, frame)?;
    Ok(parent.map_or(Motion::zero(), |b| expressed(&ws.placements[b], &of, &ws.accelerations[b], reference)))
}

/// The classical acceleration of `frame` at `(q, v, a)` in `reference`: the spatial one with
/// `ω × v` added to its linear part (velocity and acceleration in the same reference), the
/// second time derivative of the frame origin's position in
/// [`ReferenceFrame::LocalWorldAligned`]. O(n). Fills what [`frame_acceleration`] fills.
///
/// # Errors
/// Invalid inputs or frame index.
pub fn frame_classical_acceleration(
    model: &Model,
    ws: &mut Workspace,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    frame: usize,
    reference: ReferenceFrame,
) -> Result<Motion> {
    forward_kinematics(model, ws, q, v, a)?;
    let (of, parent) = placed(model, ws, frame)?;
    let Some(b) = parent else { return Ok(Motion::zero()) };
    let (ob, body) = (ws.placements[b], ws.velocities[b]);
    let velocity = expressed(&ob, &of, &body, reference);
    let spatial = expressed(&ob, &of, &ws.accelerations[b], reference);
    Ok(Motion::new(spatial.linear + velocity.angular.cross(&velocity.linear), spatial.angular))
}

/// The derivatives of [`frame_velocity`] in `reference`: `(∂v_f/∂q, ∂v_f/∂v)`, each
/// `(6, nv)`, `q` perturbed in the tangent space (`integrate(q, δ)`, `v` held: Pinocchio's
/// `getFrameVelocityDerivatives`). `∂v_f/∂v` is the frame Jacobian. Column `k` of `∂v_f/∂q`,
/// for a joint column `S̄_k` (world) on the frame's path with parent body velocity `v̄_λ`
/// (world): the columns after `k` turn with it, `∂v̄_f/∂δ_k = S̄_k ×ₘ (v̄_f − v̄_λ)` (World);
/// the frame turns too, `−ᶠX_0 (S̄_k ×ₘ v̄_λ)` (Local); and (LocalWorldAligned)
/// `[∂v + ∂ω × p + ω × ∂p; ∂ω]` with `∂p = S̄_k,lin + S̄_k,ang × p` the frame origin's motion
/// (the exact derivative of [`frame_velocity`]; Pinocchio's leaves out `ω × ∂p`).
/// O(n + 6·nv). Fills `ws.jacobian` (`∂v_f/∂v`), `ws.jacobian_rate` (`∂v_f/∂q`),
/// placements, velocities and the frame's placement.
///
/// # Errors
/// Invalid inputs or frame index.
pub fn frame_velocity_derivatives(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], frame: usize, reference: ReferenceFrame) -> Result<()> {
    check_tangent(model, v, "v")?;
    crate::frame_jacobian(model, ws, q, frame, reference)?;
    velocities_unchecked(model, ws, v);
    let (of, parent) = placed(model, ws, frame)?;
    ws.jacobian_rate.as_mut_slice().fill(0.0);
    let frame_velocity = parent.map_or(Motion::zero(), |b| ws.placements[b].act_motion(&ws.velocities[b]));
    let mut body = parent;
    while let Some(b) = body {
        let j = &model.joints[b];
        let parent_velocity = model.parents[b].map_or(Motion::zero(), |p| ws.placements[p].act_motion(&ws.velocities[p]));
        for k in 0..j.nv() {
            let s = j.placed_subspace_column(k, &ws.placements[b]);
            let turned = s.cross_motion(&(frame_velocity - parent_velocity));
            let col = match reference {
                ReferenceFrame::World => turned,
                ReferenceFrame::Local => -of.inv_act_motion(&s.cross_motion(&parent_velocity)),
                ReferenceFrame::LocalWorldAligned => {
                    let p = of.translation;
                    let dp = s.linear + s.angular.cross(&p);
                    Motion::new(turned.linear + turned.angular.cross(&p) + frame_velocity.angular.cross(&dp), turned.angular)
                }
            };
            ws.jacobian_rate.fixed_view_mut::<6, 1>(0, model.idx_v[b] + k).copy_from(&col.to_vector());
        }
        body = model.parents[b];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::random_tree;
    use crate::{frame_jacobian, random_configuration, update_frame_placements, Joint};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const REFERENCES: [ReferenceFrame; 3] = [ReferenceFrame::World, ReferenceFrame::Local, ReferenceFrame::LocalWorldAligned];

    /// The frame velocity is `J v` in every reference (trees with every joint kind), its
    /// derivatives match central differences, and on
    /// trees of 1-dof joints, moving along `q(t) = q + t v + ½ t² a`, the classical
    /// acceleration in world-aligned axes is the second derivative of the frame origin
    /// (central differences, h = 1e-4: error ~h² ≈ 1e-8, round-off ~ε/h² ≈ 2e-8) and its
    /// angular part the derivative of the world angular velocity.
    #[test]
    fn frame_motion_matches_jacobians_and_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        for (seed, kinds) in [(1, Joint::examples()), (2, Joint::examples().into_iter().filter(|j| j.nv() == 1).collect())] {
            let model = random_tree(7, seed, &kinds);
            let mut ws = model.workspace();
            let q = random_configuration(&model, &mut rng);
            let v: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-1.0..1.0)).collect();
            let a: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-1.0..1.0)).collect();
            assert!(model.frames.len() >= model.nbodies());
            for frame in 0..model.frames.len() {
                for reference in REFERENCES {
                    let jv = frame_jacobian(&model, &mut ws, &q, frame, reference).unwrap() * nalgebra::DVector::from_column_slice(&v);
                    let fv = frame_velocity(&model, &mut ws, &q, &v, frame, reference).unwrap().to_vector();
                    assert!((jv - fv).amax() < 1e-12, "seed {seed}, frame {frame}, {reference:?}");
                }
                // ∂v_f/∂q against central differences along integrate(q, ±h e_k), v held
                // (h = 1e-6: error ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10)
                for reference in REFERENCES {
                    frame_velocity_derivatives(&model, &mut ws, &q, &v, frame, reference).unwrap();
                    let (dq, dv) = (ws.jacobian_rate.clone(), ws.jacobian.clone());
                    let jac = frame_jacobian(&model, &mut ws, &q, frame, reference).unwrap();
                    assert!((jac - &dv).amax() < 1e-15);
                    for k in 0..model.nv {
                        let moved = |eps: f64, ws: &mut Workspace| {
                            let mut d = vec![0.0; model.nv];
                            d[k] = eps;
                            let qk = crate::integrate(&model, &q, &d).unwrap();
                            frame_velocity(&model, ws, &qk, &v, frame, reference).unwrap().to_vector()
                        };
                        let fd = (moved(1e-6, &mut ws) - moved(-1e-6, &mut ws)) / 2e-6;
                        assert!((fd - dq.column(k)).amax() < 1e-8, "seed {seed}, frame {frame}, {reference:?}, column {k}");
                    }
                }
                if model.nq != model.nv {
                    continue;
                }
                let h = 1e-4;
                let state = |t: f64| -> (nalgebra::Vector3<f64>, nalgebra::Vector3<f64>) {
                    let qt: Vec<f64> = (0..model.nv).map(|i| q[i] + t * v[i] + 0.5 * t * t * a[i]).collect();
                    let vt: Vec<f64> = (0..model.nv).map(|i| v[i] + t * a[i]).collect();
                    let mut ws = model.workspace();
                    let w = frame_velocity(&model, &mut ws, &qt, &vt, frame, ReferenceFrame::LocalWorldAligned).unwrap();
                    crate::placements(&model, &mut ws, &qt).unwrap();
                    update_frame_placements(&model, &mut ws);
                    (ws.frame_placements[frame].translation, w.angular)
                };
                let ((pm, wm), (p0, _), (pp, wp)) = (state(-h), state(0.0), state(h));
                let classical = frame_classical_acceleration(&model, &mut ws, &q, &v, &a, frame, ReferenceFrame::LocalWorldAligned).unwrap();
                assert!(((pp - 2.0 * p0 + pm) / (h * h) - classical.linear).amax() < 1e-6, "seed {seed}, frame {frame}: linear");
                assert!(((wp - wm) / (2.0 * h) - classical.angular).amax() < 1e-6, "seed {seed}, frame {frame}: angular");
            }
        }
    }
}
