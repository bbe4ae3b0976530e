//! The single-dof expansion with each composite chain's chart centre as joints of its own:
//! the model in which the derivatives of a step on the Lie group are fixed-chart derivatives.
//!
//! A step of the minimal-coordinate VI on a composite joint runs in the chart centred at its
//! start `c` ([`super::chart`]): the joint's configuration along the step is `c ∘ τ(y)`.
//! Moving the start to `c ∘ τ(η)` moves the chart with it, `c ∘ τ(η) ∘ τ(y)`, which is the
//! chain `τ` written twice: a copy with coordinates `η` (the *centre joints*) followed by the
//! chain itself. In this model, with the centre joints held at `η = 0`, the kinematics are
//! those of the expanded model in the chart centred at `c`, and the derivatives of the
//! step's discrete Lagrangian with respect to its start are ordinary joint-space derivatives
//! in `η` (`vidyn-vi`'s exact linearisation on the group uses them).

use super::{chain_joints, SingleDofMap};
use crate::error::Result;
use crate::model::{Model, ModelBuilder};
use std::sync::Arc;
use vidyn_spatial::{Inertia, Se3};

/// The expanded model of a [`SingleDofMap`] with a massless copy of every composite chain
/// (the centre joints) inserted in front of it (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct CentredExpansion {
    /// The model: the expanded model's bodies in the same order, each composite chain
    /// preceded by its centre joints (the copy carries the chain's placement, the chain
    /// itself sits at the identity on it). Frames are not carried over.
    pub model: Arc<Model>,
    /// `(n,)`: the coordinate of `model` of each expanded coordinate (every joint of `model`
    /// has one coordinate, so it is also the body's index).
    pub coordinates: Vec<usize>,
    /// Per composite joint (in [`SingleDofMap::composite_joints`] order): the first
    /// coordinate of its centre joints (`nv` of them, in chain order).
    pub centres: Vec<usize>,
}

impl SingleDofMap {
    /// The [`CentredExpansion`] of `expanded` (this map's expanded model). O(n).
    ///
    /// Errors: [`crate::RbdError::InvalidModel`] when a centre joint's name (`<chain
    /// joint>~centre`) is already taken.
    pub fn centred_expansion(&self, expanded: &Model) -> Result<CentredExpansion> {
        let mut b = ModelBuilder::new(&expanded.name);
        b.gravity(expanded.gravity.linear);
        let n = expanded.nbodies();
        let mut ids = vec![0; n];
        for i in 0..n {
            let mut parent = expanded.parents[i].map(|p| ids[p]);
            let mut placement = expanded.joint_placements[i];
            if let Some(seg) = self.segments.iter().find(|s| s.ie == i && s.nv() > 1) {
                for (k, joint) in chain_joints(&seg.joint).into_iter().enumerate() {
                    let name = format!("{}~centre", expanded.joint_names[i + k]);
                    let first = if k == 0 { placement } else { Se3::identity() };
                    parent = Some(b.add_body(parent, &name, joint, first, Inertia::zero())?);
                }
                placement = Se3::identity();
            }
            ids[i] = b.add_body(parent, &expanded.joint_names[i], expanded.joints[i], placement, expanded.inertias[i])?;
        }
        let model = b.build()?;
        // every joint has one coordinate, so a body's index is its coordinate's
        debug_assert!(model.idx_v.iter().enumerate().all(|(j, &v)| j == v));
        let coordinates = expanded.joint_names.iter().map(|name| model.joint_index(name)).collect::<Result<Vec<_>>>()?;
        let centres = self.composite_joints().map(|j| model.joint_index(&format!("{}~centre", expanded.joint_names[j.first()]))).collect::<Result<Vec<_>>>()?;
        Ok(CentredExpansion { model: Arc::new(model), coordinates, centres })
    }
}

impl CentredExpansion {
    /// The joint placements `(nbodies,)` of [`Self::model`] in the chart centred at `centre`
    /// `(nq,)` of the map's original model: every centre chain's first joint at
    /// `placement · M(centre)` (as [`SingleDofMap::chart_placements`]). Only those entries are
    /// written, so `placements` should start as a copy of `model.joint_placements`. O(joints),
    /// no allocation.
    pub fn chart_placements(&self, map: &SingleDofMap, centre: &[f64], placements: &mut [Se3]) {
        for (s, &c) in map.segments.iter().filter(|s| s.nv() > 1).zip(&self.centres) {
            placements[c] = self.model.joint_placements[c] * s.joint.transform(&centre[s.iq..s.iq + s.joint.nq()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::builders::random_tree;
    use crate::{placements, random_configuration, Joint};
    use nalgebra::Vector3;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// With the centre joints at `η`, the centred model places every body where the expanded
    /// model in the chart centred at `c ∘ τ(η)` does (so at `η = 0` it is that chart).
    #[test]
    fn centre_joints_move_the_chart() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let hinge = Joint::Revolute { axis: Vector3::new(0.6, 0.0, 0.8) };
        for (k, joint) in [Joint::FreeFlyer, Joint::Spherical, Joint::Planar].into_iter().enumerate() {
            let m = random_tree(6, 40 + k as u64, &[joint, hinge]);
            let (e, map) = m.to_single_dof().unwrap();
            let centred = map.centred_expansion(&e).unwrap();
            let cm = &centred.model;
            assert_eq!(cm.nv, e.nv + map.composite_joints().map(|j| j.nv()).sum::<usize>());
            let c = random_configuration(&m, &mut rng);
            let theta: Vec<f64> = (0..map.n).map(|_| rng.random_range(-0.8..0.8)).collect();
            let mut eta = vec![0.0; map.n];
            let mut x = vec![0.0; cm.nv];
            for (j, &first) in map.composite_joints().zip(&centred.centres) {
                for d in 0..j.nv() {
                    eta[j.first() + d] = rng.random_range(-0.5..0.5);
                    x[first + d] = eta[j.first() + d];
                }
            }
            for (i, &ci) in centred.coordinates.iter().enumerate() {
                x[ci] = theta[i];
            }
            // the moved centre c' = c ∘ τ(η) (η on composite joints, the 1-dof ones as in θ)
            let shift: Vec<f64> =
                (0..map.n).map(|i| if map.composite_joints().any(|j| (j.first()..j.first() + j.nv()).contains(&i)) { eta[i] } else { theta[i] }).collect();
            let mut moved = vec![0.0; m.nq];
            map.chart_point(&c, &shift, &mut moved);
            let (mut at_moved, mut centred_at_c) = (e.clone(), (**cm).clone());
            map.chart_placements(&e, &moved, &mut at_moved.joint_placements);
            centred.chart_placements(&map, &c, &mut centred_at_c.joint_placements);
            let (mut ws_e, mut ws_c) = (e.workspace(), cm.workspace());
            placements(&at_moved, &mut ws_e, &theta).unwrap();
            placements(&centred_at_c, &mut ws_c, &x).unwrap();
            for (i, &ci) in centred.coordinates.iter().enumerate() {
                let (a, b) = (ws_e.placements[i], ws_c.placements[ci]);
                assert!((a.translation - b.translation).amax() < 1e-12 && (a.rotation - b.rotation).amax() < 1e-12, "{}: body {i}", m.name);
            }
        }
    }
}
