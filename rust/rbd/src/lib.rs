//! Rigid-body dynamics on kinematic trees: models, URDF import and the classic recursive
//! algorithms (forward kinematics, Jacobians, RNEA, ABA, CRBA, M⁻¹, energies).
//!
//! The [`Model`] is immutable and shareable across threads; all scratch lives in a
//! [`Workspace`] created once by [`Model::workspace`]. Algorithms take
//! `(model, workspace, inputs…)` and return references into the workspace. Spatial
//! conventions are those of [`vidyn_spatial`] (`[linear; angular]`, body frames).

pub mod algorithms;
pub mod builders;
mod check;
pub mod configuration;
pub mod error;
pub mod joint;
mod locked;
pub mod mimic;
pub mod model;
pub mod single_dof;
pub mod state;
pub mod urdf;
mod workspace;

pub use algorithms::aba::{aba, mass_solve};
pub use algorithms::aba_derivatives::{aba_derivatives, AbaDerivatives};
pub use algorithms::aba_second_order::{aba_second_order, aba_second_order_contracted, AbaSecondOrder, AbaSecondOrderContracted, AbaSecondOrderWorkspace};
pub use algorithms::center_of_mass::{center_of_mass, center_of_mass_velocity, com_jacobian};
pub use algorithms::centroidal::{centroidal_momentum, centroidal_momentum_matrix, centroidal_momentum_matrix_time_variation};
pub use algorithms::crba::crba;
pub use algorithms::energy::{kinetic_energy, potential_energy};
pub use algorithms::external_forces::external_joint_torques;
pub use algorithms::frame_motion::{frame_acceleration, frame_classical_acceleration, frame_velocity, frame_velocity_derivatives};
pub use algorithms::jacobian::{frame_jacobian, frame_jacobian_time_variation, ReferenceFrame};
pub use algorithms::kinematics::{forward_kinematics, placements, update_frame_placements};
pub use algorithms::mass_derivative::mass_matrix_and_derivative;
pub use algorithms::minverse::minverse;
pub use algorithms::rnea::{gravity, nonlinear_effects, rnea};
pub use algorithms::rnea_derivatives::{rnea_derivatives, RneaDerivatives};
pub use algorithms::rnea_second_order::{rnea_second_order, rnea_second_order_contracted, RneaSecondOrder, RneaSecondOrderContracted, SecondOrderWorkspace};
pub use check::{check_configuration, check_forces, check_tangent, check_vector};
pub use configuration::{difference, integrate, neutral, random_configuration};
pub use error::{RbdError, Result};
pub use joint::Joint;
pub use locked::lock_joints;
pub use mimic::{Coupling, Mimic};
pub use model::{inertia_warning, Frame, FrameKind, JointLimits, Limits, Model, ModelBuilder};
pub use single_dof::{to_single_dof, CentredExpansion, CompositeJoint, Gimbal, SingleDofMap};
pub use vidyn_spatial::Tensor3;
pub use workspace::Workspace;
