//! Frame Jacobians.

use crate::algorithms::kinematics::placements_unchecked;
use crate::check::check_configuration;
use crate::error::{RbdError, Result};
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::Motion;

/// The frame in which a Jacobian (or a frame velocity) is expressed (Pinocchio's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReferenceFrame {
    /// Spatial velocity in the world frame, at the world origin.
    World,
    /// Body velocity in the frame itself.
    Local,
    /// Velocity of the frame's origin with world-aligned axes.
    LocalWorldAligned,
}

/// Jacobian `J(q)` (6, nv) of frame `frame` with `[v; ω] = J q̇` in `reference`.
/// Column block of each ancestor joint j: `⁰X_j S_j` (World); then `ᶠX_0 ·` (Local) or the
/// origin shift `[v + ω × p_f; ω]` (LocalWorldAligned). Columns of other joints are zero.
/// O(n + 6·nv). Fills `ws.jacobian`, placements and `ws.frame_placements[frame]`.
pub fn frame_jacobian<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], frame: usize, reference: ReferenceFrame) -> Result<&'w DMatrix<f64>> {
    check_configuration(model, q)?;
    let fr = model.frames.get(frame).ok_or(RbdError::IndexOutOfRange { what: "frame", index: frame, len: model.frames.len() })?;
    placements_unchecked(model, ws, q);
    let of = match fr.parent {
        Some(b) => ws.placements[b] * fr.placement,
        None => fr.placement,
    };
    ws.frame_placements[frame] = of;
    ws.jacobian.as_mut_slice().fill(0.0);
    let mut body = fr.parent;
    while let Some(b) = body {
        let j = &model.joints[b];
        for k in 0..j.nv() {
            let w = j.placed_subspace_column(k, &ws.placements[b]);
            let col = match reference {
                ReferenceFrame::World => w,
                ReferenceFrame::Local => of.inv_act_motion(&w),
                ReferenceFrame::LocalWorldAligned => Motion::new(w.linear + w.angular.cross(&of.translation), w.angular),
            };
            ws.jacobian.fixed_view_mut::<6, 1>(0, model.idx_v[b] + k).copy_from(&col.to_vector());
        }
        body = model.parents[b];
    }
    Ok(&ws.jacobian)
}

/// The time variation `J̇(q, v)` (6, nv) of the frame Jacobian of [`frame_jacobian`] in
/// `reference` along the motion with velocity `v` (Pinocchio's
/// `getFrameJacobianTimeVariation`), so that the frame's spatial acceleration is
/// `J q̈ + J̇ q̇`. A world column `S̄ = ⁰X_j S_j` moves with body `j`'s world velocity `v̄_j`:
/// `d S̄/dt = v̄_j ×ₘ S̄`. Then (Local) `d/dt (ᶠX_0 S̄) = ᶠX_0 (v̄_j ×ₘ S̄ − v̄_f ×ₘ S̄)`, `v̄_f`
/// the frame's world velocity, and (LocalWorldAligned) `d/dt [v + ω × p; ω] =
/// [v̇ + ω̇ × p + ω × ṗ; ω̇]` with `ṗ` the velocity of the frame origin. O(n + 6·nv). Fills
/// `ws.jacobian_rate`, placements, velocities and `ws.frame_placements[frame]`.
///
/// # Errors
/// Invalid inputs or frame index.
pub fn frame_jacobian_time_variation<'w>(
    model: &Model,
    ws: &'w mut Workspace,
    q: &[f64],
    v: &[f64],
    frame: usize,
    reference: ReferenceFrame,
) -> Result<&'w DMatrix<f64>> {
    crate::check::check_tangent(model, v, "v")?;
    check_configuration(model, q)?;
    let fr = model.frames.get(frame).ok_or(RbdError::IndexOutOfRange { what: "frame", index: frame, len: model.frames.len() })?;
    placements_unchecked(model, ws, q);
    crate::algorithms::kinematics::velocities_unchecked(model, ws, v);
    let of = match fr.parent {
        Some(b) => ws.placements[b] * fr.placement,
        None => fr.placement,
    };
    ws.frame_placements[frame] = of;
    ws.jacobian_rate.as_mut_slice().fill(0.0);
    // the frame's world velocity (at the world origin) and its origin's velocity
    let frame_velocity = fr.parent.map_or(Motion::zero(), |b| ws.placements[b].act_motion(&ws.velocities[b]));
    let origin_velocity = frame_velocity.linear + frame_velocity.angular.cross(&of.translation);
    let mut body = fr.parent;
    while let Some(b) = body {
        let j = &model.joints[b];
        let body_velocity = ws.placements[b].act_motion(&ws.velocities[b]);
        for k in 0..j.nv() {
            let s = j.placed_subspace_column(k, &ws.placements[b]);
            let rate = body_velocity.cross_motion(&s);
            let col = match reference {
                ReferenceFrame::World => rate,
                ReferenceFrame::Local => of.inv_act_motion(&(rate - frame_velocity.cross_motion(&s))),
                ReferenceFrame::LocalWorldAligned => {
                    Motion::new(rate.linear + rate.angular.cross(&of.translation) + s.angular.cross(&origin_velocity), rate.angular)
                }
            };
            ws.jacobian_rate.fixed_view_mut::<6, 1>(0, model.idx_v[b] + k).copy_from(&col.to_vector());
        }
        body = model.parents[b];
    }
    Ok(&ws.jacobian_rate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::random_tree;
    use crate::{integrate, random_configuration, Joint};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `J̇` against central differences of `J` along `q(t) = integrate(q, t v)` (velocity `v`
    /// at t = 0; h = 1e-6: error ~h² ≈ 1e-12, round-off ~ε/h ≈ 1e-10), every reference, trees
    /// with every joint kind.
    #[test]
    fn the_time_variation_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        for seed in 0..4 {
            let model = random_tree(6, seed, &Joint::examples());
            let mut ws = model.workspace();
            let q = random_configuration(&model, &mut rng);
            let v: Vec<f64> = (0..model.nv).map(|_| rng.random_range(-1.0..1.0)).collect();
            let h = 1e-6;
            let (qp, qm) = (
                integrate(&model, &q, &v.iter().map(|x| h * x).collect::<Vec<_>>()).unwrap(),
                integrate(&model, &q, &v.iter().map(|x| -h * x).collect::<Vec<_>>()).unwrap(),
            );
            assert!(!model.frames.is_empty());
            for frame in 0..model.frames.len() {
                for reference in [ReferenceFrame::World, ReferenceFrame::Local, ReferenceFrame::LocalWorldAligned] {
                    let plus = frame_jacobian(&model, &mut ws, &qp, frame, reference).unwrap().clone();
                    let minus = frame_jacobian(&model, &mut ws, &qm, frame, reference).unwrap().clone();
                    let rate = frame_jacobian_time_variation(&model, &mut ws, &q, &v, frame, reference).unwrap();
                    assert!(((plus - minus) / (2.0 * h) - rate).amax() < 1e-8, "seed {seed}, frame {frame}, {reference:?}");
                }
            }
        }
    }
}
