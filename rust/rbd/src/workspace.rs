//! The reusable scratch of every algorithm (Pinocchio's `Data`). Created once per model and
//! thread with [`Model::workspace`]; no algorithm allocates after that.

use crate::algorithms::rnea_derivatives::DerivativeWorkspace;
use crate::algorithms::rnea_second_order::SecondOrderScratch;
use crate::model::Model;
use nalgebra::{DMatrix, Matrix6, Vector3};
use vidyn_spatial::{Force, Inertia, Motion, OriginInertia, Se3};

/// Scratch and results of the algorithms. Sizes: `n` bodies, `nv` velocity coordinates,
/// `nframes` frames. Each field says which algorithm fills it.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// `(n,)` `(sin q_i, cos q_i)` of each revolute joint's angle (the other entries are not
    /// read). Every kinematic pass, first.
    pub joint_sin_cos: Vec<(f64, f64)>,
    /// `(n,)` placement of body i in its parent body frame (`liMi`). Every algorithm.
    pub parent_placements: Vec<Se3>,
    /// `(n,)` placement of body i in the world (`oMi`). Kinematics, Jacobians, energies.
    pub placements: Vec<Se3>,
    /// `(nframes,)` placement of each frame in the world (`oMf`). Frame kinematics.
    pub frame_placements: Vec<Se3>,
    /// `(n,)` spatial velocity of body i in body frame i. Kinematics (order ≥ 1), RNEA, ABA.
    pub velocities: Vec<Motion>,
    /// `(n,)` spatial acceleration of body i in body frame i. Forward kinematics leaves it
    /// without gravity; RNEA and ABA leave it with the world's fictitious `−g` included.
    pub accelerations: Vec<Motion>,
    /// `(n,)` spatial force transmitted by joint i to body i, in body frame i. RNEA.
    pub forces: Vec<Force>,
    /// `(nv,)` joint torques. RNEA.
    pub tau: Vec<f64>,
    /// `(nv,)` joint accelerations. ABA.
    pub ddq: Vec<f64>,
    /// `(nv, nv)` joint-space inertia matrix (full, symmetric). CRBA.
    pub mass_matrix: DMatrix<f64>,
    /// `(nv, nv)` inverse of the joint-space inertia matrix (full, symmetric). Minverse.
    pub mass_matrix_inv: DMatrix<f64>,
    /// `(6, nv)` Jacobian of the last `jacobian` call.
    pub jacobian: DMatrix<f64>,
    /// `(6, nv)` time variation of the last frame Jacobian (`frame_jacobian_time_variation`),
    /// or `∂v_f/∂q` (`frame_velocity_derivatives`).
    pub jacobian_rate: DMatrix<f64>,
    /// `(3, nv)` Jacobian of the centre of mass. `com_jacobian`.
    pub com_jacobian: DMatrix<f64>,
    /// `(6, nv)` centroidal momentum matrix `A_G`. `centroidal_momentum_matrix`.
    pub centroidal_matrix: DMatrix<f64>,
    /// `(6, nv)` its time variation and `(n,)` the world composite inertias' rates (6×6).
    /// `centroidal_momentum_matrix_time_variation`.
    pub centroidal_rate: DMatrix<f64>,
    pub composite_inertia_rates: Vec<Matrix6<f64>>,
    /// `(n,)` mass `Σ_{j⪰i} m_j` and world first moment `Σ_{j⪰i} m_j c_j` of the subtree of
    /// body i. Centre of mass.
    pub subtree_mass: Vec<f64>,
    pub subtree_moment: Vec<Vector3<f64>>,
    /// `(n,)` composite rigid-body inertia of the subtree of body i, world frame. Centroidal
    /// momentum.
    pub composite_inertias: Vec<Inertia>,
    /// `(n,)` the same subtree inertias as moments about the world origin (additive, see
    /// `OriginInertia`). CRBA, `mass_matrix_and_derivative`.
    pub origin_composites: Vec<OriginInertia>,
    /// `(n,)` articulated-body inertia of body i: body frame i after ABA, world frame after
    /// Minverse and the ABA derivatives (which leave it unreduced, `I^A_i`).
    pub articulated_inertias: Vec<Matrix6<f64>>,
    /// `(n,)` articulated bias force of body i: body frame i (ABA), world frame (ABA
    /// derivatives).
    pub bias_forces: Vec<Force>,
    /// `(n,)` velocity-product acceleration `c_i = v_i ×ₘ (S_i q̇_i)`: body frame i (ABA),
    /// world frame (ABA derivatives).
    pub bias_accelerations: Vec<Motion>,
    /// `(n,)` `U_i = I_i^A S_i` (first nv_i columns used), in the frame of
    /// `articulated_inertias`. ABA, Minverse, ABA derivatives.
    pub u: Vec<Matrix6<f64>>,
    /// `(n,)` `D_i⁻¹ = (S_iᵀ U_i)⁻¹` (top-left nv_i block used). ABA, Minverse, ABA
    /// derivatives.
    pub d_inv: Vec<Matrix6<f64>>,
    /// `(n,)` `u_i = τ_i − S_iᵀ p_i` (first nv_i entries used). ABA, ABA derivatives.
    pub u_bias: Vec<[f64; 6]>,
    /// `(n,)` `(6, nv)` force columns of body i for all unit torques at once. Minverse.
    pub minv_forces: Vec<DMatrix<f64>>,
    /// `(n,)` `(6, nv)` acceleration columns of body i for all unit torques at once. Minverse.
    pub minv_accelerations: Vec<DMatrix<f64>>,
    /// `(nv,)` scratch vector.
    pub scratch_nv: Vec<f64>,
    /// World-frame scratch and results of the dynamics derivatives.
    pub derivatives: DerivativeWorkspace,
    /// O(n + nv²) scratch and results of the second-order derivatives (the contracted forms;
    /// the full `(nv, nv, nv)` tensors live in a separate `SecondOrderWorkspace`).
    pub second_order: SecondOrderScratch,
}

impl Workspace {
    /// Allocates everything the algorithms need for `model`.
    #[must_use]
    pub fn new(model: &Model) -> Self {
        let (n, nv) = (model.nbodies(), model.nv);
        Self {
            joint_sin_cos: vec![(0.0, 1.0); n],
            parent_placements: vec![Se3::identity(); n],
            placements: vec![Se3::identity(); n],
            frame_placements: vec![Se3::identity(); model.frames.len()],
            velocities: vec![Motion::zero(); n],
            accelerations: vec![Motion::zero(); n],
            forces: vec![Force::zero(); n],
            tau: vec![0.0; nv],
            ddq: vec![0.0; nv],
            mass_matrix: DMatrix::zeros(nv, nv),
            mass_matrix_inv: DMatrix::zeros(nv, nv),
            jacobian: DMatrix::zeros(6, nv),
            jacobian_rate: DMatrix::zeros(6, nv),
            com_jacobian: DMatrix::zeros(3, nv),
            centroidal_matrix: DMatrix::zeros(6, nv),
            centroidal_rate: DMatrix::zeros(6, nv),
            composite_inertia_rates: vec![Matrix6::zeros(); n],
            subtree_mass: vec![0.0; n],
            subtree_moment: vec![Vector3::zeros(); n],
            composite_inertias: vec![Inertia::zero(); n],
            origin_composites: vec![OriginInertia::zero(); n],
            articulated_inertias: vec![Matrix6::zeros(); n],
            bias_forces: vec![Force::zero(); n],
            bias_accelerations: vec![Motion::zero(); n],
            u: vec![Matrix6::zeros(); n],
            d_inv: vec![Matrix6::zeros(); n],
            u_bias: vec![[0.0; 6]; n],
            minv_forces: vec![DMatrix::zeros(6, nv); n],
            minv_accelerations: vec![DMatrix::zeros(6, nv); n],
            scratch_nv: vec![0.0; nv],
            derivatives: DerivativeWorkspace::new(model),
            second_order: SecondOrderScratch::new(model),
        }
    }
}
