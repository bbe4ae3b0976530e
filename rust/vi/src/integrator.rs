//! The one-step flow map `(q_k, p_k, u_k) ↦ (q_{k+1}, p_{k+1})` of a Galerkin–Lobatto
//! variational integrator, its Newton solve and its exact linearisation.
//!
//! For all but the smallest systems neither path forms the `sn × sn` DEL Jacobian: the Newton
//! direction comes from the O(s³ n) factorisation of Algorithms B.1/B.2
//! (`crate::newton_direction`), and the linearisation reuses that factorisation for its
//! right-hand sides, O(s² n²) per step. Below `s·n ≤ dense_max` (default 10; no constraints or
//! kinematic joints) forming `J` and factoring it by LU is cheaper (`crate::dense_step`), and
//! both take that path ([`VariationalIntegrator::with_dense_max`]); it is also the oracle the
//! recursion is tested against (`crate::reference`). Other steps keep the factorisation's
//! interface but form and factor `J` densely behind it in their Newton iterations up to
//! `s·n ≤ 28` and in their linearisations up to `s·n ≤ 48`
//! ([`VariationalIntegrator::with_dense_factorization_max`]).

use crate::chart_step::{Chart, ChartWork};
use crate::constrained::ConstraintWork;
use crate::constraints::Constraint;
use crate::contraction::Contraction;
use crate::del::{JointForces, StepPoints};
use crate::dense_step::{DenseStep, DEFAULT_DENSE_LINEARIZATION_MAX, DEFAULT_DENSE_MAX, DEFAULT_DENSE_NEWTON_MAX};
use crate::energy_check::DEFAULT_MAX_ENERGY_ERROR;
use crate::error::{Result, ViError};
use crate::mimic_step::{MimicSystem, MimicWork};
use crate::newton_direction::{Lanes, NewtonFactorization, LANES};
use crate::point_mass_solve::PointMassSolve;
use crate::predictor::{from_predictors, Predictor};
use crate::schedule::ConstraintSchedule;
use crate::scheme::Scheme;
use crate::solved::SolvedStep;
use nalgebra::DMatrix;
use std::sync::Arc;
use vidyn_rbd::{check_configuration, check_forces, check_tangent, Model, Workspace};
use vidyn_spatial::Force;
use vidyn_system::StepInput;

/// A variational integrator.
///
/// State convention: `x = (q, p)` with `p` the discrete momentum (for the continuous system
/// `p = M(q) v`, the Legendre transform used by [`VariationalIntegrator::momentum`]).
/// Controls `u` (`nv` generalised forces) are held constant over each step. With free-flyer,
/// spherical or planar joints `q` has Pinocchio's layout (`nq` entries, unit quaternions) and
/// `p`, `u` live in the tangent space; each step then runs on the Lie group in the chart
/// centred at its start (module `chart_step`).
#[derive(Clone, Debug)]
pub struct VariationalIntegrator {
    /// The model the DEL equations are written for: the user's, or its single-dof expansion
    /// when it has composite joints (then `chart` holds the user's).
    pub(crate) model: Arc<Model>,
    /// The user's model and the maps to `model`, for a model with composite joints.
    pub(crate) chart: Option<Arc<Chart>>,
    pub(crate) scheme: Scheme,
    pub(crate) dt: f64,
    pub(crate) forces: JointForces,
    /// Newton stops when `|r|∞ ≤ tolerance · max(1, |p_k|∞)`, or when its update has reached
    /// round-off (`|δz|∞ ≤ 8ε(1 + |z|∞)`) with `|r|∞ ≤ 1.5e-8 · max(1, |p_k|∞)`.
    pub(crate) tolerance: f64,
    pub(crate) max_iterations: usize,
    /// The coupling of the model's mimic joints and the joint forces on the extended tree
    /// (module `mimic_step`); `None` without mimic joints.
    pub(crate) mimic: Option<Arc<MimicSystem>>,
    /// Holonomic constraints `h(q) = 0` ([`crate::constrained`]), empty by default.
    pub(crate) constraints: Vec<Constraint>,
    /// `0..m`: the active constraints of every step without a schedule.
    all_constraints: Vec<usize>,
    /// Which constraints each step imposes ([`Self::with_constraint_schedule`]); `None`: all.
    pub(crate) schedule: Option<ConstraintSchedule>,
    /// `(n,)` prescribed (kinematic) joints ([`VariationalIntegrator::with_kinematic`]).
    pub(crate) prescribed: Vec<bool>,
    /// Constant body wrenches in the body frames, one per body of the DEL model `model`, or
    /// empty ([`VariationalIntegrator::with_body_wrenches`]).
    pub(crate) wrenches: Vec<Force>,
    /// The same, one per body of the model as given (what [`Self::body_wrenches`] returns).
    given_wrenches: Vec<Force>,
    /// Largest `s·n` solved by the dense LU of the DEL Jacobian ([`crate::dense_step`]);
    /// above it, Algorithms B.1/B.2 ([`VariationalIntegrator::with_dense_max`]).
    dense_max: usize,
    /// Largest `s·n` of a Newton factorisation formed densely where the dense path does not
    /// apply, for Newton iterations and for linearisations (module `newton_direction::dense`;
    /// [`VariationalIntegrator::with_dense_factorization_max`]).
    dense_newton_max: usize,
    dense_linearization_max: usize,
    /// Identity of these settings, for the stores of solved steps ([`crate::SolvedSteps`]):
    /// drawn anew by [`Self::new`] and by every builder method, kept by a clone.
    pub(crate) id: u64,
    /// The largest energy inconsistency of a genuine step ([`crate::energy_check`]).
    pub(crate) max_energy_error: f64,
}

/// Per-thread scratch of a [`VariationalIntegrator`] (create with
/// [`VariationalIntegrator::workspace`]); no step allocates after that.
#[derive(Clone, Debug)]
pub struct ViWorkspace {
    pub(crate) points: StepPoints,
    /// `(s·n,)` unknown control points `q^1..q^s`.
    pub(crate) z: Vec<f64>,
    /// `(s·n,)` residual, row `ϱ·n + i`.
    pub(crate) residual: Vec<f64>,
    /// `(s·n,)` Newton direction / one column of `J⁻¹ (·)`, entry `(γ−1)·n + i`.
    pub(crate) direction: Vec<f64>,
    /// `(s·n,)` the iterate at the start of a line search.
    pub(crate) z_start: Vec<f64>,
    /// The B.1/B.2 factorisation of the DEL Jacobian at the current iterate, O(s² n) storage.
    pub(crate) newton: NewtonFactorization,
    /// Linearisation, `LANES` columns at a time: right-hand sides `(s·n)`, solutions `(s·n)`,
    /// control-point variations `δq^α` and DEL-row variations `((s+1)·n)`, and the momentum
    /// row `(n)`.
    pub(crate) lane_rhs: Vec<Lanes>,
    pub(crate) lane_sol: Vec<Lanes>,
    pub(crate) lane_dq: Vec<Lanes>,
    pub(crate) lane_rows: Vec<Lanes>,
    pub(crate) lane_momentum: Vec<Lanes>,
    /// Scratch of the rigid-body algorithms on the model as given ([`VariationalIntegrator::model`]).
    pub(crate) rbd: Workspace,
    pub(crate) scratch: Vec<f64>,
    /// The scratch of a knot's `M⁻¹ p` on its point state (module `point_mass_solve`): the
    /// energy check's, and the Newton start's for `s ≥ 2`.
    pub(crate) point_solve: PointMassSolve,
    /// `(n,)` the generalised force of the Taylor predictor ([`Predictor::Taylor`]) and its
    /// acceleration (tangent coordinates).
    pub(crate) tau: Vec<f64>,
    pub(crate) acceleration: Vec<f64>,
    /// Multipliers, constraint Jacobians and the Schur complement of the constrained step.
    pub(crate) constraint: ConstraintWork,
    /// The dense DEL Jacobian and its LU, for small systems ([`crate::dense_step`]); empty
    /// when the integrator takes the recursive path.
    pub(crate) dense: DenseStep,
    /// Newton iterations of the last step.
    pub last_iterations: usize,
    /// Whether the last step was accepted with its residual within the tolerance (not
    /// stalled at a larger one) and without constraints: its control points are then exactly
    /// those a solve started at its `q_{k+1}` accepts at once ([`crate::solved`]).
    pub(crate) within_tolerance: bool,
    /// The buffer [`VariationalIntegrator::keep_solved`] fills next.
    pub(crate) spare_solved: Option<Box<SolvedStep>>,
    /// `(nq,)` a kept step's `q_{k+1}`, where [`VariationalIntegrator::linearize_kept`] starts
    /// its re-solve.
    pub(crate) kept_next: Vec<f64>,
    /// A step's chart with composite joints (module `chart_step`).
    pub(crate) chart: ChartWork,
    /// The scratch of a model with mimic joints (module `mimic_step`).
    pub(crate) mimic: Option<MimicWork>,
}

impl ViWorkspace {
    /// The rigid-body scratch of the integrator's state conversions ([`VariationalIntegrator::momentum`],
    /// [`VariationalIntegrator::velocity`], [`VariationalIntegrator::energy`]). Nothing is kept
    /// in it from one call to the next, so a caller may run its own rigid-body algorithms in it
    /// between steps instead of allocating a workspace of its own.
    pub fn rbd(&mut self) -> &mut Workspace {
        &mut self.rbd
    }
}

impl VariationalIntegrator {
    /// A new integrator. Errors for a non-positive or non-finite `dt`, forcing vectors of the
    /// wrong length, or joint forces (damping, springs) on composite joints. With mimic joints
    /// (module `mimic_step`) `n` and the forces are those of the reduced coordinates (the
    /// default damping the free coordinates' own).
    pub fn new(model: Arc<Model>, scheme: Scheme, dt: f64, forces: Option<JointForces>) -> Result<Self> {
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(ViError::InvalidParameter(format!("dt = {dt}; expected a positive finite time step")));
        }
        let coupling = model.has_mimics().then(|| model.coupling());
        let n = coupling.as_ref().map_or(model.nv, vidyn_rbd::Coupling::nv);
        let forces = forces.unwrap_or_else(|| {
            let mut damping = vec![0.0; n];
            match &coupling {
                Some(c) => c.restrict_tangent(&model.limits.damping, &mut damping),
                None => damping.clone_from(&model.limits.damping),
            }
            JointForces { damping, ..JointForces::none(n) }
        });
        for (name, v) in [("damping", &forces.damping), ("stiffness", &forces.stiffness), ("rest", &forces.rest)] {
            vidyn_rbd::check_vector(v, "forces", n, "model.nv")
                .map_err(|_| ViError::InvalidParameter(format!("{name} must have model.nv = {n} finite entries")))?;
        }
        let mimic = if model.has_mimics() { Some(Arc::new(MimicSystem::new(&model, &forces)?)) } else { None };
        let (model, chart) = if mimic.is_some() || model.joints.iter().all(|j| j.nv() == 1 && j.nq() == 1) {
            (model, None)
        } else {
            let (expanded, map) = vidyn_rbd::to_single_dof(&model)?;
            for j in map.composite_joints() {
                let dofs = j.first()..j.first() + j.nv();
                if forces.damping[dofs.clone()].iter().chain(&forces.stiffness[dofs]).any(|&x| x != 0.0) {
                    return Err(ViError::InvalidParameter(format!(
                        "joint '{}': damping and springs act on revolute and prismatic joints only, not on free-flyer, spherical or planar ones (give zeros for its {} entries)",
                        j.name(),
                        j.nv()
                    )));
                }
            }
            let centred = map.centred_expansion(&expanded)?;
            (Arc::new(expanded), Some(Arc::new(Chart { native: model, map, centred })))
        };
        Ok(Self {
            model,
            chart,
            scheme,
            dt,
            forces,
            tolerance: 1e-12,
            max_iterations: 30,
            mimic,
            constraints: Vec::new(),
            all_constraints: Vec::new(),
            schedule: None,
            prescribed: vec![false; n],
            wrenches: Vec::new(),
            given_wrenches: Vec::new(),
            dense_max: DEFAULT_DENSE_MAX,
            dense_newton_max: DEFAULT_DENSE_NEWTON_MAX,
            dense_linearization_max: DEFAULT_DENSE_LINEARIZATION_MAX,
            id: crate::solved::next_id(),
            max_energy_error: DEFAULT_MAX_ENERGY_ERROR,
        })
    }

    /// Adds holonomic constraints `h(q) = 0`, enforced at every step with multipliers
    /// (Johnson 2012 §4.5; Fan, Schultz & Murphey 2018 eq. 6; module `constrained`): at the
    /// end of each step, and for Simpson and Lobatto schemes (`s ≥ 2`) at every control point
    /// after the first. The initial configuration should satisfy them (the first step lands
    /// on them regardless). Bodies are those of the model as given ([`Self::model`]).
    pub fn with_constraints(mut self, constraints: Vec<Constraint>) -> Result<Self> {
        if !constraints.is_empty() {
            self.refuse_mimic("holonomic constraints (VariationalIntegrator constraints=)")?;
        }
        if !constraints.is_empty() && self.scheme.s > 1 && self.scheme.mixes_rows() {
            // the interior impulses sit on control-point rows (module `constrained`)
            return Err(ViError::InvalidParameter(format!(
                "holonomic constraints with s = {} need a scheme whose control points are its step variables (Lobatto)",
                self.scheme.s
            )));
        }
        for (i, c) in constraints.iter().enumerate() {
            c.validate(self.model().nbodies()).map_err(|e| ViError::InvalidParameter(format!("constraint {i}: {e}")))?;
        }
        // with composite joints, on the expanded model's bodies
        self.constraints = match &self.chart {
            None => constraints,
            Some(chart) => constraints.into_iter().map(|c| c.on_bodies(&chart.map.bodies)).collect(),
        };
        self.all_constraints = (0..self.constraints.len()).collect();
        self.schedule = None;
        self.id = crate::solved::next_id();
        Ok(self)
    }

    /// Imposes on each step only some of the constraints ([`Self::with_constraints`]): contact
    /// phases, with touchdowns as plastic impacts and lift-offs as releases (module
    /// `schedule`). `active` is row-major `(steps, m)`, `active[k·m + i]` whether step `k`
    /// imposes constraint `i`; a step past the schedule is an error
    /// ([`ViError::PastSchedule`]).
    ///
    /// # Errors
    /// [`ViError::InvalidParameter`] when there are no constraints or `active` is not
    /// `steps × m` flags with `steps ≥ 1`.
    pub fn with_constraint_schedule(mut self, active: &[bool]) -> Result<Self> {
        if self.constraints.is_empty() {
            return Err(ViError::InvalidParameter("a constraint schedule needs constraints: give them first (with_constraints)".into()));
        }
        self.schedule = Some(ConstraintSchedule::from_masks(active, self.constraints.len())?);
        self.id = crate::solved::next_id();
        Ok(self)
    }

    /// The constraint schedule, if any ([`Self::with_constraint_schedule`]).
    #[must_use]
    pub fn constraint_schedule(&self) -> Option<&ConstraintSchedule> {
        self.schedule.as_ref()
    }

    /// The constraints step `step` imposes (increasing indices): all of them without a
    /// schedule.
    ///
    /// # Errors
    /// [`ViError::PastSchedule`] for a step the schedule does not cover.
    pub fn active_constraints(&self, step: usize) -> Result<&[usize]> {
        match &self.schedule {
            None => Ok(&self.all_constraints),
            Some(s) => s.active(step).ok_or(ViError::PastSchedule { step, steps: s.steps() }),
        }
    }

    /// The constraints whose normals a knot's kinetic energy leaves out when it is the start of
    /// step `step` ([`Self::knot_energy`]): those of that step, or of the schedule's last step
    /// for a knot past its end (the end of the last step).
    pub(crate) fn knot_constraints(&self, step: usize) -> &[usize] {
        match &self.schedule {
            None => &self.all_constraints,
            Some(s) => s.active(step.min(s.steps() - 1)).unwrap_or(&[]),
        }
    }

    /// Whether steps `a` and `b` impose the same constraints (the same phase).
    #[must_use]
    pub fn same_constraints(&self, a: usize, b: usize) -> bool {
        self.schedule.as_ref().is_none_or(|s| s.phase(a.min(s.steps() - 1)) == s.phase(b.min(s.steps() - 1)))
    }

    /// Makes the listed joints kinematic (Johnson 2012 §4.7): their trajectory is an input of
    /// the step instead of a solution of it (an ideal actuator), their DEL rows are dropped,
    /// and the interface keeps its shapes by reusing the slots of such a joint `i`:
    ///
    /// * `q_i` is its coordinate `ρ_k`, as for any joint;
    /// * `p_i` holds its velocity `v_k = (ρ_k − ρ_{k−1})/Δt` (it has no discrete momentum);
    /// * `u_i` holds the prescribed next coordinate `ρ_{k+1}` (not a force).
    ///
    /// The step then returns `q_{k+1,i} = ρ_{k+1}` and `p_{k+1,i} = (ρ_{k+1} − ρ_k)/Δt`, and the
    /// linearisation's columns for `u_i` are `∂/∂ρ_{k+1}` — the state and input of the thesis's
    /// App. A.2 (`x = (q, ρ, p, v)`, `u = (u, ρ_{k+1})`) in one vector each. Only the
    /// one-interval schemes (midpoint, trapezoid) take kinematic joints; at least one joint must
    /// stay dynamic.
    pub fn with_kinematic(mut self, joints: &[usize]) -> Result<Self> {
        if !joints.is_empty() {
            self.refuse_mimic("kinematic joints (VariationalIntegrator kinematic=)")?;
        }
        if let Some(chart) = &self.chart {
            if let Some(j) = chart.map.composite_joints().find(|j| joints.iter().any(|&k| (j.first()..j.first() + j.nv()).contains(&k))) {
                return Err(ViError::InvalidParameter(format!(
                    "joint '{}': kinematic joints are revolute or prismatic, not free-flyer, spherical or planar",
                    j.name()
                )));
            }
        }
        let n = self.n();
        if !joints.is_empty() && self.scheme.s != 1 {
            return Err(ViError::InvalidParameter(format!(
                "kinematic joints are implemented for the one-interval schemes (midpoint, trapezoid), not for s = {}",
                self.scheme.s
            )));
        }
        let mut prescribed = vec![false; n];
        for &j in joints {
            if j >= n {
                return Err(ViError::InvalidParameter(format!("kinematic joint index {j} out of range (n = {n})")));
            }
            prescribed[j] = true;
        }
        if n > 0 && prescribed.iter().all(|&k| k) {
            return Err(ViError::InvalidParameter("every joint is kinematic: nothing is left to simulate".into()));
        }
        self.prescribed = prescribed;
        self.id = crate::solved::next_id();
        Ok(self)
    }

    /// Applies constant external wrenches to the bodies, one per body (`model.nbodies()`,
    /// finite): `wrenches[j]` is `[force; moment]` acting on body `j`, expressed in body frame
    /// `j` and taken about its origin (Pinocchio's `fext`, as in [`vidyn_rbd::aba`]), and
    /// held constant in that frame, so it turns with the body. The continuous equations become
    /// `M q̈ + C q̇ + g = u + Σ_j J_jᵀ F_j`.
    ///
    /// Discretely (discrete Lagrange–d'Alembert, Fan, Schultz & Murphey 2018 eq. 5 with
    /// Assumption 1) each control point `α` receives the force
    /// `w_α Δt S̄_i^α · σF_i^α`, `σF_i = Σ_{j ⪰ i} ⁰X*_j(q^α) F_j` (the world-frame subtree sum
    /// of the wrenches, module `point`), next to the joint forces; the Newton direction and
    /// the linearisation carry its exact derivative. An empty vector removes the wrenches.
    /// Second-order derivatives refuse integrators with wrenches.
    pub fn with_body_wrenches(mut self, wrenches: Vec<Force>) -> Result<Self> {
        if !wrenches.is_empty() {
            self.refuse_mimic("body wrenches (VariationalIntegrator body_wrenches=)")?;
        }
        if !wrenches.is_empty() {
            check_forces(self.model(), &wrenches, "wrenches").map_err(|e| ViError::InvalidParameter(format!("body wrenches: {e}")))?;
        }
        // with composite joints, each on the last body of its joint's chain (the others massless)
        self.wrenches = match &self.chart {
            Some(chart) if !wrenches.is_empty() => {
                let mut expanded = vec![Force::zero(); self.model.nbodies()];
                for (&b, w) in chart.map.bodies.iter().zip(&wrenches) {
                    expanded[b] = *w;
                }
                expanded
            }
            _ => wrenches.clone(),
        };
        self.given_wrenches = wrenches;
        self.id = crate::solved::next_id();
        Ok(self)
    }

    /// `(nbodies,)` the constant body wrenches ([`Self::with_body_wrenches`]), one per body of
    /// the model as given; empty without.
    #[must_use]
    pub fn body_wrenches(&self) -> &[Force] {
        &self.given_wrenches
    }

    /// `(n,)` which joints are kinematic ([`Self::with_kinematic`]).
    #[must_use]
    pub fn kinematic(&self) -> &[bool] {
        &self.prescribed
    }

    /// The holonomic constraints of this integrator (with composite joints, on the bodies of
    /// the model's single-dof expansion, `vidyn_rbd::SingleDofMap::bodies`).
    #[must_use]
    pub fn constraints(&self) -> &[Constraint] {
        &self.constraints
    }

    /// Steps and linearisations of systems with `s·n ≤ dense_max` (default
    /// [`DEFAULT_DENSE_MAX`]) form the `sn × sn` DEL Jacobian and factor it by LU, which is
    /// cheaper than the O(s³ n) recursion of Algorithms B.1/B.2 for a few joints
    /// (module `dense_step`); larger systems, and any integrator with constraints or
    /// kinematic joints, take the recursion. `0` always takes it. Both paths solve the same
    /// equations and agree to round-off.
    #[must_use]
    pub fn with_dense_max(mut self, dense_max: usize) -> Self {
        self.dense_max = dense_max;
        self.id = crate::solved::next_id();
        self
    }

    /// Steps that do not take the dense path of [`Self::with_dense_max`] (larger ones, and those
    /// with constraints, kinematic joints or composite joints) still form the DEL Jacobian's
    /// blocks from the energy Hessians and factor `J` by LU, answering every solve and
    /// Jacobian–vector product with dense products (module `newton_direction::dense`), in their
    /// Newton iterations when `s·n ≤ newton` (default [`DEFAULT_DENSE_NEWTON_MAX`]) and in their
    /// linearisations when `s·n ≤ linearization` (default [`DEFAULT_DENSE_LINEARIZATION_MAX`];
    /// `n` counts the centred expansion's coordinates in a linearisation on a chart).
    /// `(0, 0)` always takes Algorithms B.1/B.2. Both agree to round-off.
    #[must_use]
    pub fn with_dense_factorization_max(mut self, newton: usize, linearization: usize) -> Self {
        self.dense_newton_max = newton;
        self.dense_linearization_max = linearization;
        self.id = crate::solved::next_id();
        self
    }

    /// A Newton factorisation for `n` coordinates (`prescribed` as given), dense as
    /// [`Self::with_dense_factorization_max`] says.
    pub(crate) fn newton_factorization(&self, n: usize, prescribed: &[bool]) -> NewtonFactorization {
        let s = self.scheme.s;
        let mut newton = NewtonFactorization::new(n, s);
        newton.set_prescribed(prescribed);
        if s * n <= self.dense_linearization_max.max(self.dense_newton_max) {
            newton = newton.dense(s * n <= self.dense_newton_max, s * n <= self.dense_linearization_max);
        }
        newton
    }

    /// Whether steps and linearisations take the dense path ([`Self::with_dense_max`]); with
    /// mimic joints always (module `mimic_step`).
    #[must_use]
    pub fn uses_dense(&self) -> bool {
        self.mimic.is_some() || (self.scheme.s * self.n() <= self.dense_max && self.constraints.is_empty() && !self.prescribed.iter().any(|&k| k))
    }

    /// Sets the Newton tolerance (relative to `max(1, |p_k|∞)`) and iteration cap.
    pub fn with_newton(mut self, tolerance: f64, max_iterations: usize) -> Result<Self> {
        if !(tolerance > 0.0 && tolerance.is_finite()) || max_iterations == 0 {
            return Err(ViError::InvalidParameter(format!("tolerance {tolerance} and max_iterations {max_iterations} must be positive")));
        }
        self.tolerance = tolerance;
        self.max_iterations = max_iterations;
        self.id = crate::solved::next_id();
        Ok(self)
    }

    /// The model (as given: with composite joints, not its single-dof expansion).
    #[must_use]
    pub fn model(&self) -> &Arc<Model> {
        self.chart.as_ref().map_or(&self.model, |c| &c.native)
    }
    #[must_use]
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }
    #[must_use]
    pub fn dt(&self) -> f64 {
        self.dt
    }
    /// Whether `other` defines the same discrete map: the same model (by value), scheme,
    /// time step, joint forces, constraints, prescribed joints and body wrenches. The Newton
    /// settings may differ (they decide how precisely a step is solved, not which step), so
    /// a trajectory of either linearises with the other.
    #[must_use]
    pub fn same_dynamics(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.model, &other.model) || self.model == other.model)
            && self.chart == other.chart
            && self.scheme == other.scheme
            && self.dt.to_bits() == other.dt.to_bits()
            && self.forces == other.forces
            && self.constraints == other.constraints
            && self.schedule == other.schedule
            && self.prescribed == other.prescribed
            && self.wrenches == other.wrenches
            && self.mimic == other.mimic
    }
    #[must_use]
    pub fn forces(&self) -> &JointForces {
        &self.forces
    }

    /// Number of degrees of freedom `n` (= nv, the length of `p` and `u`; with mimic joints
    /// the reduced one).
    #[must_use]
    pub fn n(&self) -> usize {
        self.mimic.as_ref().map_or(self.model.nv, |m| m.coupling.nv())
    }

    /// Whether the model has free-flyer, spherical or planar joints, whose steps run on their
    /// Lie groups (module `chart_step`).
    #[must_use]
    pub fn has_composite_joints(&self) -> bool {
        self.chart.is_some()
    }

    /// Length of a configuration `q`: `n`, or more with composite joints (quaternions).
    #[must_use]
    pub fn nq(&self) -> usize {
        self.mimic.as_ref().map_or(self.model().nq, |m| m.coupling.nq())
    }

    /// Fresh scratch for this integrator.
    #[must_use]
    pub fn workspace(&self) -> ViWorkspace {
        let (n, s) = (self.n(), self.scheme.s);
        let newton = self.newton_factorization(n, &self.prescribed);
        ViWorkspace {
            points: StepPoints::new(&self.model, s + 1),
            z: vec![0.0; s * n],
            residual: vec![0.0; s * n],
            direction: vec![0.0; s * n],
            z_start: vec![0.0; s * n],
            newton,
            lane_rhs: vec![[0.0; LANES]; s * n],
            lane_sol: vec![[0.0; LANES]; s * n],
            lane_dq: vec![[0.0; LANES]; (s + 1) * n],
            lane_rows: vec![[0.0; LANES]; (s + 1) * n],
            lane_momentum: vec![[0.0; LANES]; n],
            rbd: self.model().workspace(),
            scratch: vec![0.0; n],
            point_solve: PointMassSolve::new(n),
            tau: vec![0.0; n],
            acceleration: vec![0.0; n],
            constraint: ConstraintWork::new(n, s, self.constraints.len(), &self.model.joint_placements),
            dense: if self.uses_dense() { DenseStep::new(n, s) } else { DenseStep::new(0, s) },
            chart: ChartWork::new(self.chart.as_deref()),
            mimic: self.mimic.as_ref().map(|_| MimicWork::new(&self.model, s)),
            last_iterations: 0,
            within_tolerance: false,
            spare_solved: None,
            kept_next: Vec::with_capacity(self.nq()),
        }
    }

    /// Legendre transform `p = M(q) q̇` (the momentum matching an initial velocity); the
    /// entries of kinematic joints are their velocities ([`Self::with_kinematic`]).
    pub fn momentum(&self, ws: &mut ViWorkspace, q: &[f64], qdot: &[f64], p: &mut [f64]) -> Result<()> {
        if self.mimic.is_some() {
            vidyn_rbd::check_vector(qdot, "v", self.n(), "model.nv")?;
            return self.mimic_momentum(ws, q, qdot, p);
        }
        check_tangent(self.model(), qdot, "v")?;
        let m = vidyn_rbd::crba(self.model(), &mut ws.rbd, q)?;
        for (i, pi) in p.iter_mut().enumerate() {
            *pi = if self.prescribed[i] { qdot[i] } else { (0..qdot.len()).map(|j| m[(i, j)] * qdot[j]).sum() };
        }
        Ok(())
    }

    /// Inverse Legendre transform `q̇ = M(q)⁻¹ p` (of a system without kinematic joints).
    pub fn velocity(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], qdot: &mut [f64]) -> Result<()> {
        if self.mimic.is_some() {
            vidyn_rbd::check_vector(p, "p", self.n(), "model.nv")?;
            return self.mimic_velocity(ws, q, p, qdot);
        }
        check_tangent(self.model(), p, "p")?;
        let minv = vidyn_rbd::minverse(self.model(), &mut ws.rbd, q)?;
        for (i, v) in qdot.iter_mut().enumerate() {
            *v = (0..p.len()).map(|j| minv[(i, j)] * p[j]).sum();
        }
        Ok(())
    }

    /// Mechanical energy `½ pᵀ M⁻¹ p + V(q) + Σ ½ κ_i (q_i − rest_i)²` (gravity and the joint
    /// springs) of a state, the start of step `step`; with constraints the kinetic part of the
    /// motion that step's constraints allow ([`Self::knot_energy`]).
    pub fn energy(&self, ws: &mut ViWorkspace, step: usize, q: &[f64], p: &[f64]) -> Result<f64> {
        self.knot_energy(ws, step, q, p).map(|e| e.total())
    }

    pub(crate) fn check_inputs(&self, q: &[f64], p: &[f64], u: &[f64]) -> Result<()> {
        check_configuration(&self.model, q)?;
        check_tangent(&self.model, p, "p")?;
        check_tangent(&self.model, u, "u")?;
        Ok(())
    }

    /// The DEL residual at unknown control points `z = (q^1, …, q^s)` (`(s·n,)`, entry
    /// `(γ−1)·n + i`): `r^0 = p_k + D_1 L_d + Q^0`, `r^ϱ = D_{ϱ+1} L_d + Q^ϱ` (Fan et al.
    /// eq. 5a–b by Algorithm 1), written to `r` (`(s·n,)`, row `ϱ·n + i`). Returns `max |r|`.
    /// O(s² n), no allocation.
    pub fn residual(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], u: &[f64], z: &[f64], r: &mut [f64]) -> Result<f64> {
        self.refuse_lie_group("the DEL residual in chart coordinates")?;
        self.refuse_mimic("the DEL residual primitive")?;
        self.check_inputs(q, p, u)?;
        self.check_unknowns(z)?;
        ws.points.set(&self.model, &self.scheme, self.dt, q, z, &self.wrenches);
        Ok(self.fill_residual(ws, p, u, r))
    }

    /// The exact Newton direction `δz = −J⁻¹ r` at unknown control points `z` (layouts as in
    /// [`Self::residual`]) by Algorithms B.1/B.2, O(s³ n), without forming `J`. Errors with
    /// [`ViError::SingularJacobian`] (labelled `at.k`) when some per-body `Λ_i` is singular;
    /// `at.guess` is not used.
    pub fn newton_direction(&self, ws: &mut ViWorkspace, at: StepInput<'_>, z: &[f64], dz: &mut [f64]) -> Result<()> {
        let StepInput { k: step, q, p, u, .. } = at;
        self.refuse_lie_group("the Newton direction in chart coordinates")?;
        self.refuse_mimic("the Newton direction primitive")?;
        self.check_inputs(q, p, u)?;
        self.check_unknowns(z)?;
        if dz.len() != z.len() {
            return Err(ViError::InvalidParameter(format!("dz has length {}, expected s·n = {}", dz.len(), z.len())));
        }
        ws.points.set(&self.model, &self.scheme, self.dt, q, z, &self.wrenches);
        let mut r = std::mem::take(&mut ws.residual);
        self.fill_residual(ws, p, u, &mut r);
        for x in &mut r {
            *x = -*x;
        }
        let ok = ws.newton.factorize(&self.model, &self.scheme, self.dt, &self.forces, &ws.points, false);
        if ok {
            ws.newton.solve(&self.model, &self.scheme, self.dt, &r, dz);
        }
        ws.residual = r;
        if ok {
            Ok(())
        } else {
            Err(ViError::SingularJacobian { step })
        }
    }

    pub(crate) fn check_unknowns(&self, z: &[f64]) -> Result<()> {
        let want = self.scheme.s * self.n();
        if z.len() != want || z.iter().any(|x| !x.is_finite()) {
            return Err(ViError::InvalidParameter(format!("z has length {} (or non-finite entries), expected s·n = {want} finite entries", z.len())));
        }
        Ok(())
    }

    /// Residual rows at the points currently set in `ws.points` (with the constraint impulse
    /// `−Dh(q_k)ᵀλ` on the first row when there are constraints); returns `max |r|`.
    pub(crate) fn fill_residual(&self, ws: &ViWorkspace, p: &[f64], u: &[f64], r: &mut [f64]) -> f64 {
        let (n, sc) = (self.n(), &self.scheme);
        for rho in 0..sc.s {
            ws.points.del_rows(sc, self.dt, &self.forces, u, rho, &mut r[rho * n..(rho + 1) * n]);
        }
        self.add_centre_term(&ws.points, u, &mut r[..n]);
        // `p_k` enters the first row only (`p` has n entries, `r` has s·n)
        for (ri, pi) in r.iter_mut().zip(p) {
            *ri += pi;
        }
        if !self.constraints.is_empty() {
            self.add_constraint_impulse(ws, r);
        }
        for (i, _) in self.prescribed.iter().enumerate().filter(|(_, &k)| k) {
            for rho in 0..sc.s {
                r[rho * n + i] = 0.0; // a kinematic joint has no DEL row
            }
        }
        r.iter().fold(0.0_f64, |m, x| if x.is_nan() || m.is_nan() { f64::NAN } else { m.max(x.abs()) })
    }

    /// Sets the unknown points at `ws.z` (`q^0 = q` was set by `set_start`), fills, with
    /// constraints, `h` at the constrained points (and the interior impulses' gradients, which
    /// the residual needs), then the residual `r`. Returns `(max |r|, max |h|)`.
    fn evaluate(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], u: &[f64], r: &mut [f64]) -> (f64, f64) {
        ws.points.set_unknowns(&self.model, &self.scheme, self.dt, &ws.z, &self.wrenches);
        let hmax = if self.constraints.is_empty() { 0.0 } else { self.step_constraint_values(ws, q) };
        let rmax = self.fill_residual(ws, p, u, r);
        (rmax, hmax)
    }

    /// One step: solves the DEL equations for `q_{k+1}` by Newton's method and evaluates
    /// `p_{k+1}`. On success `ws.points` holds the control points of the solution. Once a
    /// full Newton step has cut the merit a hundredfold, later iterations reuse that
    /// factorisation (simplified Newton) while each keeps cutting it a hundredfold; the count
    /// returned includes those cheaper iterations. On a 12-link chain (callgrind) this took a
    /// 200-step rollout from 149 M to 119 M instructions. Each iteration costs O(s³ n) (or the dense
    /// LU of small systems, [`Self::uses_dense`]): the residual by Algorithm 1 and the exact
    /// direction `−J⁻¹ r` by Algorithms B.1/B.2 (no Jacobian is formed). `at.guess`: an
    /// estimate of `q_{k+1}` (e.g. extrapolated from the previous steps). Newton starts from it,
    /// and when it fails there (or without a guess) from the next [`Predictor`] in turn; the
    /// count returned includes the iterations of the failed starts, the error is that of the
    /// first. `at.k` labels errors and selects the step's active constraints.
    ///
    /// Stopping rule: `max |r| ≤ tolerance · max(1, |p_k|∞)`, or, once Newton has levelled
    /// off (its update below the resolution of `z`, its observed contraction putting the
    /// iterate within round-off of the solution (module `contraction`), or the residual no
    /// longer halving),
    /// `max |r|` within the residual's round-off floor at the iterate (the change of `r` when
    /// `z` moves by 4 units in its last place):
    /// a step from rest (`p_k = 0`) or of a long chain, whose DEL Jacobian is large, is judged
    /// against what round-off allows there, not against an absolute tolerance.
    ///
    /// With composite joints `at.q`, `at.guess` and `q_next` have `nq` entries and the step runs in
    /// the chart centred at `q` (module `chart_step`).
    pub fn step(&self, ws: &mut ViWorkspace, at: StepInput<'_>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        if let Some(sys) = &self.mimic {
            return self.step_mimic(sys, ws, at, q_next, p_next);
        }
        let iterations = match &self.chart {
            None => self.step_in_coordinates(ws, at, q_next, p_next),
            Some(chart) => self.step_on_chart(chart, ws, at, q_next, p_next),
        }?;
        if !self.constraints.is_empty() {
            self.project_momentum(ws, at.k, q_next, p_next)?;
            self.check_alignment(ws, at.k, q_next)?;
        }
        Ok(iterations)
    }

    /// [`Self::step`] in the coordinates of the DEL model `self.model` (a chart's, with
    /// composite joints).
    pub(crate) fn step_in_coordinates(&self, ws: &mut ViWorkspace, at: StepInput<'_>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        let StepInput { k: step, q, p, u, guess, .. } = at;
        ws.within_tolerance = false;
        self.check_inputs(q, p, u)?;
        self.check_gimbals(step, q)?;
        // kinematic joints take no acceleration term: Taylor is then Drift
        let kinematic = self.prescribed.iter().any(|&k| k);
        let predictors = [Predictor::Guess, Predictor::Taylor, Predictor::Drift]
            .into_iter()
            .filter(|&start| !((start == Predictor::Guess && guess.is_none()) || (start == Predictor::Drift && kinematic)));
        from_predictors(step, predictors, |predictor| self.solve_from(ws, at, predictor, q_next, p_next))
    }

    /// Newton's method on the step's DEL equations from the first iterate `predictor` gives
    /// ([`Self::initial_guess`]), for [`Self::step`].
    fn solve_from(&self, ws: &mut ViWorkspace, at: StepInput<'_>, predictor: Predictor, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        self.initial_guess(ws, at, predictor)?;
        let StepInput { k: step, q, p, u, .. } = at;
        let sc = &self.scheme;
        // the configuration terms of q^0 = q_k are fixed for the whole solve
        ws.points.set_start(&self.model, q, &self.wrenches);
        let constrained = !self.constraints.is_empty();
        let dense = self.uses_dense();
        if dense {
            ws.dense.ensure(self.n(), sc.s);
        }
        if constrained {
            ws.points.set_unknowns(&self.model, sc, self.dt, &ws.z, &self.wrenches);
            self.begin_constrained_step(ws, step)?;
        }
        let scale = p.iter().fold(1.0_f64, |m, x| m.max(x.abs()));
        let tol = self.tolerance * scale;
        let mut residual = f64::INFINITY;
        // Newton has levelled off when its last update was below the resolution of z or its
        // observed contraction puts the iterate within round-off of the solution (`stalled`,
        // module `contraction`), or the residual stopped halving (quadratic convergence lost): the
        // iterate is then accepted if its residual is within the round-off floor estimated
        // there (`round_off_floor`), which on long chains lies far above ε times the momenta.
        let mut stalled = false;
        let mut previous = f64::INFINITY;
        let mut levelled_at: Option<f64> = None;
        let mut floor_estimate: Option<f64> = None;
        let mut r = std::mem::take(&mut ws.residual);
        let mut dz = std::mem::take(&mut ws.direction);
        let mut outcome = Err(ViError::NewtonDiverged { step, iterations: self.max_iterations, residual, tolerance: tol, floor: None, levelled: None });
        // the residual at ws.z when the line search has just evaluated it there
        let mut evaluated: Option<(f64, f64)> = None;
        let mut reuse = false;
        let mut contraction = Contraction::default();
        for it in 0..=self.max_iterations {
            let (rmax, hmax) = match evaluated.take() {
                Some(known) => known,
                None => self.evaluate(ws, q, p, u, &mut r),
            };
            // constraint values are judged against the tolerance in their own units
            residual = rmax.max(hmax * scale);
            if !residual.is_finite() {
                break;
            }
            let levelled = stalled || residual > 0.5 * previous;
            previous = residual;
            if levelled {
                levelled_at = Some(levelled_at.map_or(residual, |l| l.min(residual)));
            }
            // the floor barely changes over the iterates near a solution: estimated once a step,
            // and only when the tolerance alone does not end the solve
            let at_floor = residual > tol && levelled && residual <= *floor_estimate.get_or_insert_with(|| self.round_off_floor(ws, q, p, u, &mut r, &mut dz));
            if residual <= tol || at_floor {
                ws.last_iterations = it;
                ws.within_tolerance = residual <= tol && !constrained;
                sc.endpoint_from(q, &ws.z, q_next);
                ws.points.del_rows(sc, self.dt, &self.forces, u, sc.s, p_next);
                for (i, _) in self.prescribed.iter().enumerate().filter(|(_, &k)| k) {
                    p_next[i] = (u[i] - q[i]) / self.dt;
                }
                outcome = if q_next.iter().chain(p_next.iter()).all(|x| x.is_finite()) {
                    self.check_gimbals(step, q_next).map(|()| it)
                } else {
                    Err(ViError::NonFiniteState { step, dt: self.dt })
                };
                break;
            }
            if it == self.max_iterations {
                break;
            }
            let merit_before = merit(&r, &ws.constraint.h);
            for x in &mut r {
                *x = -*x;
            }
            // a simplified-Newton direction no shorter than the update before it diverges: the
            // Jacobian is factored again here instead (module `contraction`)
            let direction = loop {
                if !reuse && !self.factorize_jacobian(ws) {
                    break Err(ViError::SingularJacobian { step });
                }
                if dense {
                    dz.copy_from_slice(&r);
                    ws.dense.solve(&mut dz);
                } else {
                    ws.newton.solve(&self.model, sc, self.dt, &r, &mut dz);
                }
                if constrained && !self.constrain_direction(ws, &mut dz, reuse) {
                    break Err(ViError::DegenerateConstraints { step });
                }
                if reuse && contraction.ratio(&dz).is_some_and(|theta| theta >= 1.0) {
                    reuse = false;
                    continue;
                }
                break Ok(());
            };
            if let Err(e) = direction {
                outcome = Err(e);
                break;
            }
            // (with constraints the multipliers move too, and the merit weighs their residual)
            let tiny = !constrained && moves_at_most(&ws.z, &dz, 1.0, 8192.0);
            let (alpha, at_new_point) = self.line_search(ws, (q, p, u), &dz, &mut r, tiny);
            evaluated = at_new_point;
            // once a full step has cut the merit a hundredfold, the iterate is in Newton's
            // quadratic region and J barely changes: the next direction reuses this
            // factorisation (a simplified-Newton step, O(s² n) instead of O(s³ n)); any step
            // that does less than that refactorises
            reuse = alpha == 1.0 && at_new_point.is_some() && merit(&r, &ws.constraint.h) <= 1e-2 * merit_before;
            let converged = !constrained && contraction.record(&ws.z, &dz, alpha, self.tolerance);
            stalled = converged || moves_at_most(&ws.z, &dz, alpha, 8.0);
        }
        if let Err(ViError::NewtonDiverged { residual: res, floor, levelled, .. }) = &mut outcome {
            *res = residual;
            *levelled = levelled_at;
            if residual.is_finite() {
                *floor = Some(self.round_off_floor(ws, q, p, u, &mut r, &mut dz));
            }
        }
        ws.residual = r;
        ws.direction = dz;
        outcome
    }

    /// An estimate of the residual's round-off floor at `ws.z`: `max |r(z + δ) − r(z)|` with
    /// `δ_i = ±4ε max(1, |z_i|)` (alternating signs), i.e. `|J δ|`, what moving z by a few
    /// units in its last place does to the residual (about `4ε |J| max(1, |z|)`). A bound
    /// rather than a tight estimate: where Newton stalls, its residual sits at 3·10⁻⁵ … 5·10⁻⁴
    /// of this on chains of 5 to 1024 links at Δt = 10⁻² … 10⁻⁴ (on a 1024-link chain from
    /// 2·10⁻⁷ at Δt = 10⁻² to 10⁻² at 10⁻⁴, where |J| grows as 1/Δt). `r` holds `r(z)` on
    /// entry and on return (`ws.points` too); `scratch` (`s·n`) is overwritten. Two residual
    /// evaluations, O(s² n).
    fn round_off_floor(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], u: &[f64], r: &mut [f64], scratch: &mut [f64]) -> f64 {
        ws.z_start.copy_from_slice(&ws.z);
        for (i, z) in ws.z.iter_mut().enumerate() {
            let d = 4.0 * f64::EPSILON * z.abs().max(1.0);
            *z += if i % 2 == 0 { d } else { -d };
        }
        self.evaluate(ws, q, p, u, scratch);
        let floor = scratch.iter().zip(r.iter()).fold(0.0_f64, |m, (a, b)| m.max((a - b).abs()));
        ws.z.copy_from_slice(&ws.z_start);
        self.evaluate(ws, q, p, u, r);
        floor
    }

    /// Factors the DEL Jacobian at the points set in `ws` for the next Newton directions: its
    /// dense LU ([`Self::uses_dense`]) or Algorithms B.1/B.2. `false` when it is singular.
    fn factorize_jacobian(&self, ws: &mut ViWorkspace) -> bool {
        if self.uses_dense() {
            ws.dense.factorize(&self.model, &self.scheme, self.dt, &self.forces, &mut ws.points)
        } else {
            ws.newton.factorize(&self.model, &self.scheme, self.dt, &self.forces, &ws.points, false)
        }
    }

    /// Backtracking on the merit `½(|r|² + |h|²)`, for which the Newton direction `(dz, δλ)`
    /// is a descent direction: from `z₀` (the current `ws.z`, whose residual is `−r` on
    /// entry) accept the first `α = 1, ½, ¼, …` (at most 12 halvings) with
    /// `merit(z₀ + α dz) ≤ (1 − 2·10⁻⁴ α) merit(z₀)` (Armijo); if none does, take the full
    /// step, which lets Newton leave a region where the merit is flat. Leaves
    /// `ws.z = z₀ + α dz` (and `λ = λ₀ + α δλ`); returns `α` and, when the step was accepted
    /// by the test, `(max |r|, max |h|)` there (`r`, `ws.points` and `h` then hold that point's
    /// values, so the next iteration need not evaluate them again). `tiny`: the full step
    /// moves `z` by at most a few thousand units in its last place, so the residual it changes
    /// is round-off, whose merit a correct step need not lower: the full step is then taken
    /// as evaluated (its residual judged by the stopping rule; one that grew ends the reuse
    /// of the factorisation) instead of halving it down to nothing (on a 3-D 1024-link chain
    /// at Δt = 10⁻³, six evaluations in every trapezoid step's second iteration).
    fn line_search(&self, ws: &mut ViWorkspace, at: (&[f64], &[f64], &[f64]), dz: &[f64], r: &mut [f64], tiny: bool) -> (f64, Option<(f64, f64)>) {
        let (q, p, u) = at;
        let merit0 = merit(r, &ws.constraint.h);
        ws.z_start.copy_from_slice(&ws.z);
        self.save_multipliers(ws);
        let mut alpha = 1.0;
        for _ in 0..=12 {
            self.move_to(ws, dz, alpha);
            let maxima = self.evaluate(ws, q, p, u, r);
            if tiny || merit(r, &ws.constraint.h) <= (1.0 - 2e-4 * alpha) * merit0 {
                return (alpha, Some(maxima));
            }
            alpha *= 0.5;
        }
        self.move_to(ws, dz, 1.0);
        (1.0, None)
    }

    /// `z = z_start + α dz`, `λ = λ_start + α δλ`.
    fn move_to(&self, ws: &mut ViWorkspace, dz: &[f64], alpha: f64) {
        for ((z, z0), d) in ws.z.iter_mut().zip(&ws.z_start).zip(dz) {
            *z = z0 + alpha * d;
        }
        self.move_multipliers(ws, alpha);
    }

    /// Exact first-order linearisation of the step from `(q, p, u)` (solving it first):
    /// `A = ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k)` (2n×2n) and `B = ∂(q_{k+1}, p_{k+1})/∂u_k` (2n×n),
    /// by the implicit-function theorem on the DEL equations (Fan et al. 2018 digest §6.5):
    /// `dz/dx = −J⁻¹ ∂R/∂x`, `dq_{k+1} = Σ_α endpoint[α] dq^α` (`= dz_s` for Lobatto) and `dp_{k+1} = ∂P/∂x + Σ_γ ∂P/∂q^γ dz_γ`.
    ///
    /// Small systems ([`Self::uses_dense`]) factor the dense `J` at the solution and solve the
    /// `3n` right-hand sides with it (module `dense_step`, O(s³n³)). Otherwise:
    /// O(s² n²) per step, no `sn × sn` matrix: one B.1/B.2 factorisation of `J` at the solution
    /// (`crate::newton_direction`, O(s³ n)), carrying the momentum row `P = D_{s+1} L_d + Q^s`
    /// too, is applied to each of the `3n` columns in O(s² n) (8 columns per sweep), and that
    /// solve also returns `Σ_γ ∂P/∂q^γ dz_γ`. The `n` columns of `∂R/∂q_k` (and `∂P/∂q_k`)
    /// are DEL Jacobian–vector products with `δq^0 = e_c`, O(s² n) each. The first call on a
    /// workspace allocates the batched sweeps' scratch, O(s n); later calls allocate nothing. The explicit parts are
    /// `∂R^ϱ/∂p_k = δ_{ϱ0} 1`, `∂R^ϱ/∂u = c_ϱ Δt 1`, `∂P/∂p_k = 0` and `∂P/∂u = c_s Δt 1`
    /// with `c_x = Σ_α mix[x][α] w_α` ([`Scheme::control_weight`]); for one-interval schemes
    /// (`s = 1`) the control columns are then `c_0 Δt` times the `p_k` columns plus the explicit
    /// momentum term, so only `2n` columns are solved
    /// (controls constant over the step). With holonomic constraints the columns go through the
    /// KKT system of module `constrained`. Writes the next state too.
    pub fn linearize(
        &self,
        ws: &mut ViWorkspace,
        at: StepInput<'_>,
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
        q_next: &mut [f64],
        p_next: &mut [f64],
    ) -> Result<usize> {
        self.check_jacobian_shapes(a, b)?;
        let iterations = self.step(ws, at, q_next, p_next)?;
        self.linearize_solved(ws, at, q_next, p_next, a, b)?;
        Ok(iterations)
    }

    /// The linearisation part of [`Self::linearize`] for step `at` (to `(q_next, p_next)`),
    /// which `ws` has just solved (or holds as kept, module `solved`).
    pub(crate) fn linearize_solved(
        &self,
        ws: &mut ViWorkspace,
        at: StepInput<'_>,
        q_next: &[f64],
        p_next: &[f64],
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) -> Result<()> {
        let StepInput { k: step, q, .. } = at;
        match (self.mimic.as_deref(), self.chart.as_deref()) {
            (Some(sys), _) => self.linearize_mimic(sys, ws, step, a, b)?,
            (None, Some(chart)) => self.linearize_on_chart(chart, ws, step, a, b)?,
            (None, None) => self.linearize_converged(ws, step, q, a, b)?,
        }
        if self.projects_momenta() {
            self.project_linearization(ws, step, q_next, p_next, a, b)?;
        }
        Ok(())
    }

    pub(crate) fn check_jacobian_shapes(&self, a: &DMatrix<f64>, b: &DMatrix<f64>) -> Result<()> {
        let n = self.n();
        if a.shape() != (2 * n, 2 * n) || b.shape() != (2 * n, n) {
            return Err(ViError::InvalidParameter(format!("A is {:?} and B is {:?}; expected ({m}, {m}) and ({m}, {n})", a.shape(), b.shape(), m = 2 * n)));
        }
        Ok(())
    }

    /// The linearisation part of [`Self::linearize`], for the step from `q_k = q` whose
    /// converged solution `ws` holds (its control points in `ws.points`; with constraints, the
    /// multipliers of the solve too).
    pub(crate) fn linearize_converged(&self, ws: &mut ViWorkspace, step: usize, q: &[f64], a: &mut DMatrix<f64>, b: &mut DMatrix<f64>) -> Result<()> {
        // a step on the chart is linearised right after it is solved (`linearize_on_chart`)
        self.refuse_lie_group("the linearisation of kept solved steps")?;
        self.refuse_mimic("the linearisation of kept solved steps")?;
        let n = self.n();
        let (s, dt, sc, forces) = (self.scheme.s, self.dt, &self.scheme, &self.forces);
        // a converged step leaves `ws.points` at its solution (its last residual was there)
        if self.uses_dense() {
            if !ws.dense.factorize(&self.model, sc, dt, forces, &mut ws.points) {
                return Err(ViError::SingularJacobian { step });
            }
            ws.dense.linearize(&ws.points, sc, dt, forces, a, b);
            return Ok(());
        }
        if !ws.newton.factorize(&self.model, sc, dt, forces, &ws.points, true) {
            return Err(ViError::SingularJacobian { step });
        }
        ws.newton.ensure_lanes();
        let constrained = !self.constraints.is_empty();
        if constrained {
            self.step_constraint_values(ws, q);
            if !self.prepare_constrained_linearization(ws) {
                return Err(ViError::DegenerateConstraints { step });
            }
        }
        let zero = [0.0; LANES];
        // With one interval and no kinematic joint, a control enters only the first DEL row,
        // as a multiple of p_k: its column is the p_k column scaled (below), so only the 2n
        // columns of (q_k, p_k) are solved.
        let controls_from_momenta = s == 1 && !self.prescribed.iter().any(|&k| k);
        let columns = if controls_from_momenta { 2 * n } else { 3 * n };
        // the columns of x = (q_k, p_k, u), LANES at a time
        for c0 in (0..columns).step_by(LANES) {
            let lanes = LANES.min(columns - c0);
            let (f, rows, dq) = (&mut ws.lane_rhs, &mut ws.lane_rows, &mut ws.lane_dq);
            // f = −∂R/∂x e_c and rows[s n..] = ∂P/∂x e_c: the columns that move control
            // points by the DEL Jacobian–vector product — q_k (δq^0 = e_c, and for a kinematic
            // joint its prescribed point δz_c = −e_0/e_1) and the kinematic inputs ρ_{k+1}
            // (δz_c = 1/e_1) —, the others explicitly
            let moves_points = |c: usize| c < n || (c >= 2 * n && self.prescribed[c - 2 * n]);
            if (c0..c0 + lanes).any(moves_points) {
                dq.fill(zero);
                for l in 0..lanes {
                    let c = c0 + l;
                    if c < n {
                        dq[c][l] = 1.0;
                    }
                    if let Some(dz) = prescribed_point_variation(&self.prescribed, sc, n, c) {
                        dq[n + c % n][l] = dz;
                    }
                }
                ws.newton.del_jvp_lanes(&self.model, sc, dt, forces, dq, rows);
                for (fi, ri) in f.iter_mut().zip(&rows[..s * n]) {
                    for c in 0..LANES {
                        fi[c] = -ri[c];
                    }
                }
            } else {
                f.fill(zero);
                rows[s * n..].fill(zero);
            }
            for l in 0..lanes {
                let c = c0 + l;
                if (n..2 * n).contains(&c) {
                    f[c - n][l] = -1.0;
                } else if c >= 2 * n && !self.prescribed[c - 2 * n] {
                    for rho in 0..s {
                        f[rho * n + c - 2 * n][l] = -sc.control_weight(rho) * dt;
                    }
                    rows[s * n + c - 2 * n][l] = sc.control_weight(s) * dt;
                }
            }
            // dz = J⁻¹ f and Σ_γ ∂P/∂q^γ dz_γ (through the KKT system with constraints)
            if constrained {
                self.constrained_rhs(ws, c0, lanes);
            }
            ws.newton.solve_lanes(&self.model, sc, dt, forces, &ws.lane_rhs, &mut ws.lane_sol, Some(&mut ws.lane_momentum), None);
            // the prescribed part of δz (the solve returns 0 for kinematic joints)
            for l in 0..lanes {
                if let Some(dz) = prescribed_point_variation(&self.prescribed, sc, n, c0 + l) {
                    ws.lane_sol[(c0 + l) % n][l] += dz;
                }
            }
            if constrained {
                self.constrained_solution(ws, c0, lanes);
            }
            for l in 0..lanes {
                let c = c0 + l;
                let (m, col) = if c < 2 * n { (&mut *a, c) } else { (&mut *b, c - 2 * n) };
                for r in 0..n {
                    // q_{k+1} = Σ_α endpoint[α] q^α with δq^0 = e_c for the q_k columns
                    let own = if c == r { sc.endpoint(0) } else { 0.0 };
                    m[(r, col)] = own + (1..=s).map(|g| sc.endpoint(g) * ws.lane_sol[(g - 1) * n + r][l]).sum::<f64>();
                    m[(n + r, col)] = if self.prescribed[r] {
                        // v_{k+1} = (ρ_{k+1} − ρ_k)/Δt
                        if c == r {
                            -1.0 / dt
                        } else if c == 2 * n + r {
                            1.0 / dt
                        } else {
                            0.0
                        }
                    } else {
                        ws.lane_rows[s * n + r][l] + ws.lane_momentum[r][l]
                    };
                }
            }
        }
        if controls_from_momenta {
            // f_u = c_0 Δt f_p (rows of R) and ∂P/∂u = c_1 Δt 1 explicitly
            let (cu, cp) = (sc.control_weight(0) * dt, sc.control_weight(1) * dt);
            for c in 0..n {
                for r in 0..2 * n {
                    b[(r, c)] = cu * a[(r, n + c)];
                }
                b[(n + c, c)] += cp;
            }
            // and the multipliers' (the constraint rows do not see u or p_k)
            let dl = &mut ws.constraint.lambda_jacobian;
            for c in 0..dl.ncols() / 3 {
                for i in 0..dl.nrows() {
                    dl[(i, 2 * n + c)] = cu * dl[(i, n + c)];
                }
            }
        }
        Ok(())
    }
}

/// The variation of a kinematic joint's control point `z_j = (ρ_{k+1} − e_0 ρ_k)/e_1`
/// (`s = 1`) along input column `c` of `x = (q_k, p_k, u)`: `−e_0/e_1` for `c = ρ_k`,
/// `1/e_1` for `c = u_j = ρ_{k+1}`, `None` for every other column.
fn prescribed_point_variation(prescribed: &[bool], sc: &Scheme, n: usize, c: usize) -> Option<f64> {
    let (e0, e1) = (sc.endpoint(0), sc.endpoint(sc.s));
    if c < n && prescribed[c] {
        Some(-e0 / e1)
    } else if c >= 2 * n && prescribed[c - 2 * n] {
        Some(1.0 / e1)
    } else {
        None
    }
}

/// Whether the update `α dz` moves no entry of `z` by more than `ulps` units in the last place
/// of `1 + max |z|`.
fn moves_at_most(z: &[f64], dz: &[f64], alpha: f64, ulps: f64) -> bool {
    let (mut dmax, mut zmax) = (0.0_f64, 0.0_f64);
    for (z, d) in z.iter().zip(dz) {
        dmax = dmax.max((alpha * d).abs());
        zmax = zmax.max(z.abs());
    }
    dmax <= ulps * f64::EPSILON * (1.0 + zmax)
}

/// The Newton merit `|r|² + |h|²` (DEL residual and constraint values).
fn merit(r: &[f64], h: &[f64]) -> f64 {
    r.iter().chain(h).map(|x| x * x).sum()
}

#[cfg(test)]
mod tests;
