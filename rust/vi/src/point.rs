//! World-frame kinematics, momenta and energy gradients at one control point, O(n).
//!
//! Notation (world frame, `[linear; angular]`, Fan, Schultz & Murphey 2018 §2 translated):
//! `S̄_i = ⁰X_i S_i` the joint column, `v̄_i = v̄_λ + S̄_i q̇_i` the body twist,
//! `ψ_i = v̄_λ × S̄_i = Ṡ̄_i` its time derivative, `I_i` the world-frame inertia,
//! `μ_i = Σ_{j ⪰ i} I_j v̄_j` the subtree momentum, and for gravity the subtree mass `σm_i`
//! and first moment `σp_i = Σ m_j c_j`.
//! Then (Fan et al. eqs. D.8–D.9, and the gradient of `V = −Σ m_j gᵀ c_j`):
//! `∂K/∂q̇_i = S̄_iᵀ μ_i`, `∂K/∂q_i = ψ_iᵀ μ_i`, `∂V/∂q_i = −gᵀ(ω_i × σp_i + σm_i v_i)` with
//! `S̄_i = [v_i; ω_i]`.
//!
//! Constant body wrenches `F_j` (body frame `j`, about its origin, Pinocchio's `fext`) enter
//! as the world-frame subtree sums `σF_i = Σ_{j ⪰ i} ⁰X*_j F_j` ([`PointState::update_wrenches`]),
//! whose generalised force on joint `i` is `S̄_i · σF_i` (`= Σ_j J_jᵀ F_j`, the virtual work
//! of the wrenches under `δq_i`).

use nalgebra::Vector3;
use vidyn_rbd::Model;
use vidyn_spatial::{Force, Inertia, Motion, Se3};

/// Everything known at one control point `(q, q̇)`. Sizes: `n` bodies (= dofs).
#[derive(Clone, Debug)]
pub struct PointState {
    /// `(n,)` world placements `oMi`.
    pub placements: Vec<Se3>,
    /// `(n,)` world-frame joint columns `S̄_i`.
    pub columns: Vec<Motion>,
    /// `(n,)` `ψ_i = v̄_λ × S̄_i` (= `Ṡ̄_i` for a 1-dof joint).
    pub column_rates: Vec<Motion>,
    /// `(n,)` world-frame body twists `v̄_i`.
    pub twists: Vec<Motion>,
    /// `(n,)` subtree momenta `μ_i`.
    pub momenta: Vec<Force>,
    /// `(n,)` `w_i = ω_i × σp_i + σm_i v_i`, so that `∂V/∂q_i = −gᵀ w_i`.
    pub gravity_lever: Vec<Vector3<f64>>,
    /// `(n,)` `∂K/∂q̇`.
    pub dk_dqdot: Vec<f64>,
    /// `(n,)` `∂K/∂q`.
    pub dk_dq: Vec<f64>,
    /// `(n,)` `∂V/∂q`.
    pub dv_dq: Vec<f64>,
    /// `(n,)` world-frame inertia `M̄_i` of body `i` alone.
    pub(crate) body_inertias: Vec<Inertia>,
    /// `(n,)` subtree mass `σm_i = Σ_{j ⪰ i} m_j`.
    pub(crate) sigma_m: Vec<f64>,
    /// `(n,)` subtree first moment `σp_i = Σ_{j ⪰ i} m_j c_j` (world frame).
    pub(crate) sigma_p: Vec<Vector3<f64>>,
    /// `(n,)` world-frame subtree sums of the body wrenches, `σF_i = Σ_{j ⪰ i} ⁰X*_j F_j`;
    /// meaningful only while `wrenched` holds.
    pub(crate) sigma_wrench: Vec<Force>,
    /// Whether [`Self::update_wrenches`] has filled `sigma_wrench` since the last
    /// [`Self::update`] (otherwise the point carries no wrenches).
    pub(crate) wrenched: bool,
    /// `(n,)` the configuration of the last [`Self::update_configuration`], and the address of
    /// its model (0 before the first), by which [`crate::del::StepPoints`] recognises
    /// configuration fields it can reuse.
    configured_q: Vec<f64>,
    configured_model: usize,
    /// `(n,)` each joint's [`vidyn_rbd::Joint::angle_sin_cos`] at the configured `q`.
    joint_sin_cos: Vec<(f64, f64)>,
}

impl PointState {
    pub(crate) fn new(n: usize) -> Self {
        Self {
            placements: vec![Se3::identity(); n],
            columns: vec![Motion::zero(); n],
            column_rates: vec![Motion::zero(); n],
            twists: vec![Motion::zero(); n],
            momenta: vec![Force::zero(); n],
            gravity_lever: vec![Vector3::zeros(); n],
            dk_dqdot: vec![0.0; n],
            dk_dq: vec![0.0; n],
            dv_dq: vec![0.0; n],
            body_inertias: vec![Inertia::zero(); n],
            sigma_m: vec![0.0; n],
            sigma_p: vec![Vector3::zeros(); n],
            sigma_wrench: vec![Force::zero(); n],
            wrenched: false,
            configured_q: vec![0.0; n],
            configured_model: 0,
            joint_sin_cos: vec![(0.0, 1.0); n],
        }
    }

    /// Copies every field of `other` (a state of the same size), without allocating.
    pub(crate) fn copy_from(&mut self, other: &PointState) {
        self.placements.copy_from_slice(&other.placements);
        self.columns.copy_from_slice(&other.columns);
        self.column_rates.copy_from_slice(&other.column_rates);
        self.twists.copy_from_slice(&other.twists);
        self.momenta.copy_from_slice(&other.momenta);
        self.gravity_lever.copy_from_slice(&other.gravity_lever);
        self.dk_dqdot.copy_from_slice(&other.dk_dqdot);
        self.dk_dq.copy_from_slice(&other.dk_dq);
        self.dv_dq.copy_from_slice(&other.dv_dq);
        self.body_inertias.copy_from_slice(&other.body_inertias);
        self.sigma_m.copy_from_slice(&other.sigma_m);
        self.sigma_p.copy_from_slice(&other.sigma_p);
        self.sigma_wrench.copy_from_slice(&other.sigma_wrench);
        self.wrenched = other.wrenched;
        self.configured_q.copy_from_slice(&other.configured_q);
        self.configured_model = other.configured_model;
    }

    /// Fills every field for configuration `q` and velocity `qdot` (1-dof joints only). O(n).
    /// Clears the wrenches: call [`Self::update_wrenches`] afterwards to add them.
    #[cfg(test)]
    pub(crate) fn update(&mut self, model: &Model, q: &[f64], qdot: &[f64]) {
        self.update_configuration(model, &model.joint_placements, q);
        self.update_velocity(model, qdot);
    }

    /// The fields that depend on `q` alone: placements, joint columns, world-frame body
    /// inertias, the subtree mass and first moment, and the gravity gradient `∂V/∂q`, with the
    /// joints placed at `joint_placements` (the model's own, or those of a step's chart,
    /// `vidyn_rbd::SingleDofMap::chart_placements`). O(n). Clears the wrenches. The velocity
    /// fields are stale until [`Self::update_velocity`].
    pub(crate) fn update_configuration(&mut self, model: &Model, joint_placements: &[Se3], q: &[f64]) {
        self.place_joints(model, joint_placements, q);
        self.configured_q.copy_from_slice(q);
        self.configured_model = std::ptr::from_ref(model) as usize;
        let n = model.nbodies();
        for i in 0..n {
            let inertia = model.inertias[i].transformed(&self.placements[i]);
            self.sigma_m[i] = inertia.mass;
            self.sigma_p[i] = inertia.com * inertia.mass;
            self.body_inertias[i] = inertia;
        }
        for i in (0..n).rev() {
            if let Some(p) = model.parents[i] {
                let (sm, sp) = (self.sigma_m[i], self.sigma_p[i]);
                self.sigma_m[p] += sm;
                self.sigma_p[p] += sp;
            }
        }
        let g = model.gravity.linear;
        for i in 0..n {
            let col = &self.columns[i];
            let lever = col.angular.cross(&self.sigma_p[i]) + col.linear * self.sigma_m[i];
            self.gravity_lever[i] = lever;
            self.dv_dq[i] = -g.dot(&lever);
        }
    }

    /// The placements and joint columns at `q` alone, with the joints placed at
    /// `joint_placements`: all that the holonomic constraints read (module `constraints`). The
    /// other fields are stale, and the state is not recognised as configured.
    pub(crate) fn update_kinematics(&mut self, model: &Model, joint_placements: &[Se3], q: &[f64]) {
        self.place_joints(model, joint_placements, q);
        self.configured_model = 0;
    }

    /// Placements and joint columns that an [`Self::update_kinematics`] computed (kept with a
    /// solved step), as that call left them.
    pub(crate) fn restore_kinematics(&mut self, placements: &[Se3], columns: &[Motion]) {
        self.placements.copy_from_slice(placements);
        self.columns.copy_from_slice(columns);
        self.wrenched = false;
        self.configured_model = 0;
    }

    /// World placements `oMi` and joint columns `S̄_i` at `q`. Clears the wrenches.
    fn place_joints(&mut self, model: &Model, joint_placements: &[Se3], q: &[f64]) {
        self.wrenched = false;
        // the sines first, off the chain of placements (as `vidyn_rbd`'s kinematic passes)
        for ((joint, &qi), sc) in model.joints.iter().zip(q).zip(&mut self.joint_sin_cos) {
            *sc = joint.angle_sin_cos(std::slice::from_ref(&qi));
        }
        for i in 0..model.nbodies() {
            let joint = &model.joints[i];
            let local = joint.placed_transform_sin_cos(&joint_placements[i], &q[i..=i], self.joint_sin_cos[i]);
            let o = match model.parents[i] {
                Some(p) => self.placements[p] * local,
                None => local,
            };
            self.placements[i] = o;
            self.columns[i] = o.act_motion(&joint.subspace_column(0));
        }
    }

    /// Gravity's potential `V = −Σ_j m_j gᵀ c_j` at the configuration of the last
    /// [`Self::update_configuration`], from the roots' subtree first moments (zero at the world
    /// origin, as `vidyn_rbd::potential_energy`). O(n).
    pub(crate) fn gravity_potential(&self, model: &Model) -> f64 {
        let g = model.gravity.linear;
        (0..model.nbodies()).filter(|&i| model.parents[i].is_none()).map(|i| -g.dot(&self.sigma_p[i])).sum()
    }

    /// Whether the configuration fields were last computed for exactly (bitwise) `q` with the
    /// model at address `model`.
    /// Makes [`Self::configured_for`] false until the next [`Self::update_configuration`]
    /// (after the joint placements changed).
    pub(crate) fn forget_configuration(&mut self) {
        self.configured_model = 0;
    }

    pub(crate) fn configured_for(&self, model: usize, q: &[f64]) -> bool {
        self.configured_model == model && self.configured_q.iter().zip(q).all(|(a, b)| a.to_bits() == b.to_bits())
    }

    /// The fields that depend on the velocity `qdot` at the configuration of the last
    /// [`Self::update_configuration`]: twists `v̄_i`, column rates `ψ_i`, subtree momenta `μ_i`,
    /// `∂K/∂q̇` and `∂K/∂q`. O(n).
    pub(crate) fn update_velocity(&mut self, model: &Model, qdot: &[f64]) {
        let n = model.nbodies();
        for i in 0..n {
            let parent_twist = match model.parents[i] {
                Some(p) => self.twists[p],
                None => Motion::zero(),
            };
            let col = self.columns[i];
            self.column_rates[i] = parent_twist.cross_motion(&col);
            self.twists[i] = parent_twist + col * qdot[i];
            self.momenta[i] = self.body_inertias[i].mul_motion(&self.twists[i]);
        }
        for i in (0..n).rev() {
            if let Some(p) = model.parents[i] {
                let mu = self.momenta[i];
                self.momenta[p] += mu;
            }
        }
        for i in 0..n {
            self.dk_dqdot[i] = self.columns[i].dot(&self.momenta[i]);
            self.dk_dq[i] = self.column_rates[i].dot(&self.momenta[i]);
        }
    }

    /// Sets the subtree sums `σF_i = Σ_{j ⪰ i} F̄_j` of the body wrenches `wrenches` (`(n,)`,
    /// body frame, about the body origin), `F̄_j = ⁰X*_j F_j = oMj.act_force(F_j)`, at the
    /// placements of the last [`Self::update`]. O(n), no allocation.
    pub(crate) fn update_wrenches(&mut self, model: &Model, wrenches: &[Force]) {
        let n = model.nbodies();
        for i in 0..n {
            self.sigma_wrench[i] = self.placements[i].act_force(&wrenches[i]);
        }
        for i in (0..n).rev() {
            if let Some(p) = model.parents[i] {
                let f = self.sigma_wrench[i];
                self.sigma_wrench[p] += f;
            }
        }
        self.wrenched = true;
    }

    /// The generalised force of the body wrenches on joint `i`, `S̄_i · σF_i` (0 without them).
    #[inline]
    pub(crate) fn wrench_force(&self, i: usize) -> f64 {
        if self.wrenched {
            self.columns[i].dot(&self.sigma_wrench[i])
        } else {
            0.0
        }
    }
}
