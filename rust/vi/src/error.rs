//! Errors of the variational integrators.

use thiserror::Error;

/// Everything that can go wrong setting up or running a variational integrator.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ViError {
    /// An error of the underlying model or inputs (shapes, NaN, …).
    #[error(transparent)]
    Model(#[from] vidyn_rbd::RbdError),
    /// A computation not implemented yet for models with composite joints (free-flyer,
    /// spherical, planar), whose steps run on their Lie groups (module `chart_step`).
    #[error("{what} is not implemented yet for models with free-flyer, spherical or planar joints (their steps run on the Lie group); for now use model.to_single_dof(), whose Z-Y-X Euler-angle coordinates have it, away from pitch ±90°")]
    NotOnLieGroup { what: &'static str },
    /// A composite joint turned so far within one step that the step's chart (Z-Y-X angles
    /// centred at the step's start, module `chart_step`) neared its singularity at ±90°.
    #[error("step {step}: joint '{joint}' turns by about {degrees:.0}° within one step, near or past the 90° at which the step's Z-Y-X chart degenerates (a rotation too fast for dt = {dt}, or a momentum p far from the motion's): use a smaller time step")]
    StepTooLarge { step: usize, joint: String, degrees: f64, dt: f64 },
    /// Second-order derivatives asked of an integrator with kinematic joints or body wrenches
    /// (`features` names those it has), which they are not implemented for (module
    /// `second_order`).
    #[error("second-order derivatives are not implemented for integrators with {features} (first order is)")]
    NoSecondOrder { features: String },
    /// A bad scheme name or order.
    #[error("invalid scheme: {0}")]
    InvalidScheme(String),
    /// A bad integrator parameter (time step, tolerance, …).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// Newton's method did not converge on the discrete Euler–Lagrange equations.
    /// `floor`: the residual's round-off floor estimated at the last iterate (when finite);
    /// `levelled`: the smallest residual once Newton levelled off, when it did.
    #[error("Newton's method did not converge at step {step}: residual {residual:e} after {iterations} iterations (tolerance {tolerance:e}{}); {}", floor_note(*floor), newton_advice(*levelled, *floor))]
    NewtonDiverged { step: usize, iterations: usize, residual: f64, tolerance: f64, floor: Option<f64>, levelled: Option<f64> },
    /// The step solved the discrete equations but not on the branch the motion follows: its
    /// energy balance is off by more than the integrator's limit (module `energy_check`).
    #[error("step {step} is not a genuine step of the motion: the energy went from {before:.6e} to {after:.6e}, and {error:.2} of the energy the step moved is not accounted for by the work done (the limit is {limit}); dt = {dt} is too large to resolve this motion: use a smaller time step (or raise max_energy_error if a coarse motion is intended)")]
    NotGenuine { step: usize, error: f64, limit: f64, before: f64, after: f64, dt: f64 },
    /// A Z-Y-X Euler-angle chain of `vidyn_rbd::to_single_dof` came within
    /// [`crate::GIMBAL_MARGIN`] of its lock (pitch ±π/2), where the integration error grows
    /// like `1/cos²β` and the result would be silently wrong.
    #[error("step {step}: joint '{joint}' (expanded by to_single_dof into Z-Y-X Euler angles) reached pitch β = {pitch:.4} rad, |cos β| = {cos:.3e} < {margin}, {degrees:.1}° from ±90° where the Euler angles lock: the discretisation error there grows like 1/cos²β (≥ {amplification:.0}× that at level pitch), so the motion would be wrong; keep the pitch away from ±90° (choose the chain's zero attitude accordingly), or simulate the floating body with MaximalIntegrator (quaternions, no such singularity)")]
    GimbalLock { step: usize, joint: String, pitch: f64, cos: f64, margin: f64, degrees: f64, amplification: f64 },
    /// The solved step's state overflowed (`q_{k+1}` or `p_{k+1}` not finite).
    #[error("the state after step {step} is not finite (it overflowed): dt = {dt} is too large for this motion; use a smaller time step")]
    NonFiniteState { step: usize, dt: f64 },
    /// The DEL Jacobian is singular (e.g. a massless subtree).
    #[error("the discrete Euler–Lagrange Jacobian is singular at step {step} (massless subtree or degenerate configuration)")]
    SingularJacobian { step: usize },
    /// The constraint Jacobians make the step's KKT system singular (redundant constraints,
    /// or a configuration where they lose rank).
    #[error("the holonomic constraints are redundant or degenerate at step {step}: Dh(q_(k+1)) J⁻¹ Dh(q_k)ᵀ is singular (with Simpson and Lobatto schemes, its blocks at the step's control points)")]
    DegenerateConstraints { step: usize },
    /// A step met its constraints on a mirror image of the intended solution: the aligned axes
    /// of a perpendicular pair ([`crate::AlignedAxes`]) ended `degrees` apart.
    #[error("step {step} met its constraints on a mirror image of the intended solution: the aligned axes of constraint {constraint} (a perpendicular pair, e.g. of a 6-D contact) end {degrees:.0}° apart, more than {limit}° (three perpendicular pairs also hold at 180° and 120° turns); the frame started the step too far from its target orientation for the step to reach it: steer its orientation towards the target before the contact (track it), or hold it with a point contact")]
    Misaligned { step: usize, constraint: usize, degrees: f64, limit: f64 },
    /// A step the integrator's constraint schedule does not cover.
    #[error("step {step} is past the end of the constraint schedule, which covers steps 0 to {} ({steps} steps): give the schedule a row for every step to be taken", steps.saturating_sub(1))]
    PastSchedule { step: usize, steps: usize },
}

pub type Result<T> = std::result::Result<T, ViError>;

fn floor_note(floor: Option<f64>) -> String {
    floor.map_or(String::new(), |f| format!(", round-off floor at the last iterate {f:e}"))
}

/// What to do about a Newton solve that failed, from how it failed.
fn newton_advice(levelled: Option<f64>, floor: Option<f64>) -> String {
    match (levelled, floor) {
        (Some(l), Some(f)) if l > f => format!(
            "Newton levelled off at a residual of {l:e}, {:.0e} times the round-off floor: the discrete equations have no solution near the predicted motion (the step is too large for it) or are nearly singular here (a massless subtree, a singular configuration); try a smaller time step",
            l / f
        ),
        _ => "the residual was still far from converging: the step is too large for this motion, or the configuration is near a singularity; try a smaller time step".to_string(),
    }
}
