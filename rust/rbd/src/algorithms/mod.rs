//! Dynamics algorithms, one per file. Every signature reads `model, workspace, inputs`
//! and returns a reference into the workspace.

pub mod aba;
pub mod aba_derivatives;
pub mod aba_second_order;
mod articulated_solve;
pub mod center_of_mass;
pub mod centroidal;
pub mod crba;
pub mod energy;
pub mod external_forces;
pub mod frame_motion;
pub mod jacobian;
pub mod kinematics;
pub mod mass_derivative;
pub mod minverse;
pub mod rnea;
pub mod rnea_derivatives;
pub mod rnea_second_order;
