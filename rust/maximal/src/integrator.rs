//! One step of the maximal-coordinate variational integrator: the discrete Euler–Lagrange
//! equations with constraints and their Newton solve on the graph solver.
//!
//! **State.** At knot `k` every body has its pose `z_k` and the discrete velocity
//! `ż_{k−1} = (v, ω)` of the interval that ended there ([`BodyState`]). One step solves for
//! the velocities `ż_k` of all bodies and the joint multipliers `λ_k` (a wrench-like vector per
//! joint) from, per body (Brüdigam et al. 2023, eqs. 10, 16 and 20a–b; rotational rows in
//! full-angle units, i.e. half the papers' eq. 16, with `s(ω) = √(4/Δt² − |ω|²)`):
//! $$d_T = m\,\frac{v_k - v_{k-1}}{\Delta t} - m\,g - f_k - G_x(z_k)^\top \lambda_k = 0$$
//! $$d_R = \tfrac12\big(s_k J\omega_k + \omega_k\times J\omega_k\big) - \tfrac12\big(s_{k-1} J\omega_{k-1} - \omega_{k-1}\times J\omega_{k-1}\big) - \tau_k - G_\theta(z_k)^\top\lambda_k = 0$$
//! and per joint `g(z_{k+1}(ż_k))/Δt = 0` with `z_{k+1} = z_k ⊕ Δt ż_k` (the knot update of
//! [`crate::body`]). The constraint forces use the Jacobians at the known `z_k`, the
//! constraints themselves hold at the new knot, so they are satisfied to solver tolerance at
//! every knot and never drift. `f_k` (world) and `τ_k` (body frame) collect external wrenches
//! and the joint forces of [`Mechanism::add_joint_wrenches`] at `z_k` (dampers on the rate of
//! the last interval, i.e. explicitly).
//!
//! **Newton.** The Jacobian with respect to `(ż_k, λ_k)` has the mechanism's block pattern:
//! a body block `diag(m/Δt·1, ½(sJ − Jω ωᵀ/s + ω×J − (Jω)×))`, body–joint blocks `−G(z_k)ᵀ`
//! and joint–body blocks `G(z_{k+1})·diag(1, E(ω)/Δt)` ([`crate::body::update_tangent`]). It
//! is factorised by [`crate::graph::GraphSolver`]; each iteration is followed by a backtracking
//! line search on the scaled residual (rows `Δt d/p` with `p` the momentum scale, and `g`).
//! After a full Newton step the next iterations are chord steps on the same factors (a solve
//! and a residual, about a fifth of an assembly and factorisation at 32 links) while each
//! lowers the merit `½|W r|²` at least a hundredfold; one that lowers it less is kept and the
//! next iteration factorises again, one that raises it is undone first. A step that ends on a
//! chord update stops at a hundredth of the tolerance, where Newton's last (quadratic) update
//! lands anyway (a free three-body system's angular-momentum drift over 1000 steps: 3e-13
//! Newton only, 1e-12 with chord steps and without that margin 2.3e-11).

use crate::body::{scalar_rate, update_tangent, BodyState, Pose};
use crate::error::{MaximalError, Result};
use crate::graph::{elimination_order_with_loops, GraphSolver};
use crate::mechanism::Mechanism;
use nalgebra::{Matrix3, Matrix6, Vector3, Vector6};
use std::sync::Arc;
use vidyn_spatial::{skew, Force};

/// Solver statistics of one step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepStats {
    /// Newton iterations.
    pub iterations: usize,
    /// Final scaled residual (max norm).
    pub residual: f64,
    /// Largest constraint violation `|g(z_{k+1})|∞` at the accepted solution.
    pub constraint_violation: f64,
    /// Final barrier parameter `μ` of the interior-point method (0 without contacts).
    pub barrier: f64,
}

/// The maximal-coordinate variational integrator of a [`Mechanism`].
#[derive(Clone, Debug)]
pub struct MaximalIntegrator {
    mech: Arc<Mechanism>,
    dt: f64,
    tolerance: f64,
    max_iterations: usize,
    /// The solver with its symbolic factorisation, cloned into each workspace.
    template: GraphSolver,
    /// Graph node of each joint (`None` for joints without rows).
    pub(crate) joint_node: Vec<Option<usize>>,
    /// Whether each joint closes a loop.
    is_loop: Vec<bool>,
    /// Number of body and joint nodes; contact `c` is node `n_eq + c`.
    n_eq: usize,
}

/// Per-thread scratch of a [`MaximalIntegrator`]; no step allocates after its creation.
#[derive(Clone, Debug)]
pub struct MaximalWorkspace {
    pub(crate) solver: GraphSolver,
    /// `z_k`, `z_{k−1}`, and the trial `z_{k+1}`.
    now: Vec<Pose>,
    pub(crate) before: Vec<Pose>,
    pub(crate) next: Vec<Pose>,
    /// Unknowns: velocities `v` (world), `ω` (body) per body, multipliers per joint.
    pub(crate) v: Vec<Vector3<f64>>,
    pub(crate) w: Vec<Vector3<f64>>,
    /// `(njoints,)` multipliers `λ_k` (first `m` entries), kept as the next step's warm start.
    pub lambda: Vec<Vector6<f64>>,
    /// The iterate at the start of a line search.
    v_base: Vec<Vector3<f64>>,
    w_base: Vec<Vector3<f64>>,
    lambda_base: Vec<Vector6<f64>>,
    /// The known part of each body residual, `[−m v_{k−1}/Δt − m g − f; −½(s J ω − ω×Jω)_{k−1} − τ]`.
    known: Vec<Vector6<f64>>,
    force: Vec<Vector3<f64>>,
    torque: Vec<Vector3<f64>>,
    /// `(njoints,)` constraint Jacobians at `z_k`: (parent, child).
    jac_now: Vec<(Matrix6<f64>, Matrix6<f64>)>,
    /// Per-node residual / Newton direction.
    pub(crate) residual: Vec<Vector6<f64>>,
    pub(crate) direction: Vec<Vector6<f64>>,
    /// Interior-point variables of the contacts.
    pub ct: crate::contact::ContactWorkspace,
    /// Newton iterations of the last step.
    pub last_stats: StepStats,
}

impl MaximalWorkspace {
    /// Starts the next step's Newton solve from `λ = 0`, as a fresh workspace does, instead of
    /// from the multipliers of the step solved last: the result of a solve then depends on
    /// its inputs only, not on what the workspace solved before (which differs from run to run
    /// when workspaces are shared by the tasks of a thread pool).
    pub fn forget_multipliers(&mut self) {
        self.lambda.fill(Vector6::zeros());
    }

    /// The poses `z_k` of the last prepared step.
    #[must_use]
    pub fn now_poses(&self) -> &[Pose] {
        &self.now
    }
}

/// A chord step (old factors) keeps them for the next iteration when it lowers the merit
/// `½|W r|²` at least this much (the residual 10×).
const CHORD_CONTRACTION: f64 = 0.01;
/// A step ended by a chord update stops at this fraction of the tolerance: Newton's last update
/// lands far below the tolerance (quadratic convergence), a chord one just below it.
const CHORD_MARGIN: f64 = 0.01;

impl MaximalIntegrator {
    /// An integrator with time step `dt`. Errors for a non-positive `dt` or a mechanism whose
    /// graph cannot be built.
    pub fn new(mech: Arc<Mechanism>, dt: f64) -> Result<Self> {
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(MaximalError::InvalidParameter(format!("dt = {dt}; expected a positive finite time step")));
        }
        let nb = mech.nbodies();
        let mut dims = vec![6; nb];
        let mut joint_node = vec![None; mech.joints.len()];
        let mut pairs = Vec::new();
        let mut edges = Vec::new();
        for (j, jt) in mech.joints.iter().enumerate() {
            let m = jt.constraint.rows();
            if m == 0 {
                continue;
            }
            let node = dims.len();
            joint_node[j] = Some(node);
            dims.push(m);
            pairs.push((jt.parent, jt.child));
            edges.push((node, jt.child));
            if let Some(p) = jt.parent {
                edges.push((node, p));
            }
        }
        // body contacts close loops through their two bodies (module docs of crate::graph)
        let contact_pairs: Vec<(usize, usize)> = mech.body_contacts.iter().map(|bc| (bc.bodies[0], bc.bodies[1])).collect();
        let (tree_order, loops) = elimination_order_with_loops(nb, &pairs, &contact_pairs);
        // contacts: leaves of their bodies (6-dimensional pyramid, 4-dimensional cone nodes) with
        // invertible pivots, eliminated first
        let n_eq = dims.len();
        for ct in &mech.contacts {
            edges.push((dims.len(), ct.body));
            dims.push(ct.friction_model.node_dim());
        }
        // joint limits: 2-dimensional nodes on the joint's bodies, also eliminated first
        for lim in &mech.limits {
            let jt = &mech.joints[lim.joint];
            let node = dims.len();
            dims.push(2);
            edges.push((node, jt.child));
            if let Some(p) = jt.parent {
                edges.push((node, p));
            }
        }
        // body contacts: nodes on both bodies, ordered as loop closures (after a body of theirs)
        let first_body_contact = dims.len();
        for bc in &mech.body_contacts {
            let node = dims.len();
            dims.push(bc.friction_model.node_dim());
            edges.push((node, bc.bodies[0]));
            edges.push((node, bc.bodies[1]));
        }
        // the tree order numbers the body contacts n_eq + k
        let node_of = |k: usize| if k >= n_eq { k - n_eq + first_body_contact } else { k };
        let order: Vec<usize> = (n_eq..first_body_contact).chain(tree_order.into_iter().map(node_of)).collect();
        let template = GraphSolver::new(&dims, &edges, &order).map_err(MaximalError::InvalidMechanism)?;
        let mut is_loop = vec![false; mech.joints.len()];
        for (j, node) in joint_node.iter().enumerate() {
            if let Some(node) = node {
                is_loop[j] = loops[node - nb];
            }
        }
        Ok(Self { mech, dt, tolerance: 1e-12, max_iterations: 30, template, joint_node, is_loop, n_eq })
    }

    /// Sets the Newton tolerance (on the scaled residual, see the module docs) and iteration cap.
    pub fn with_newton(mut self, tolerance: f64, max_iterations: usize) -> Result<Self> {
        if !(tolerance > 0.0 && tolerance.is_finite()) || max_iterations == 0 {
            return Err(MaximalError::InvalidParameter(format!("tolerance {tolerance} and max_iterations {max_iterations} must be positive")));
        }
        self.tolerance = tolerance;
        self.max_iterations = max_iterations;
        Ok(self)
    }

    #[must_use]
    pub fn mechanism(&self) -> &Arc<Mechanism> {
        &self.mech
    }
    #[must_use]
    pub fn dt(&self) -> f64 {
        self.dt
    }
    #[must_use]
    pub fn tolerance(&self) -> f64 {
        self.tolerance
    }
    #[must_use]
    pub fn max_iterations(&self) -> usize {
        self.max_iterations
    }
    /// Number of contacts: plane contacts, then body contacts (one index range for the
    /// interior point's variables).
    #[inline]
    pub(crate) fn ncontacts(&self) -> usize {
        self.mech.contacts.len() + self.mech.body_contacts.len()
    }
    /// Graph node of contact `c` (plane contacts, then limits, then body contacts).
    #[inline]
    pub(crate) fn contact_node(&self, c: usize) -> usize {
        let nc = self.mech.contacts.len();
        if c < nc {
            self.n_eq + c
        } else {
            self.n_eq + c + self.mech.limits.len()
        }
    }
    /// Bodies, friction coefficient and model of contact `c`.
    #[inline]
    pub(crate) fn contact_info(&self, c: usize) -> crate::contact::ContactInfo {
        use crate::contact::ContactInfo;
        match self.mech.contacts.get(c) {
            Some(ct) => ContactInfo { body: ct.body, other: None, friction: ct.friction, model: ct.friction_model },
            None => {
                let bc = &self.mech.body_contacts[c - self.mech.contacts.len()];
                ContactInfo { body: bc.bodies[0], other: Some(bc.bodies[1]), friction: bc.friction, model: bc.friction_model }
            }
        }
    }
    /// Graph node of joint limit `l`.
    #[inline]
    pub(crate) fn limit_node(&self, l: usize) -> usize {
        self.n_eq + self.mech.contacts.len() + l
    }
    /// Whether joint `j` closes a loop (lies outside the spanning forest of the graph).
    #[must_use]
    pub fn is_loop(&self, j: usize) -> bool {
        self.is_loop[j]
    }
    /// Number of fill blocks of the factorisation (zero for trees).
    #[must_use]
    pub fn fill_edges(&self) -> usize {
        self.template.fill_edges()
    }

    /// Fresh scratch for this integrator.
    #[must_use]
    pub fn workspace(&self) -> MaximalWorkspace {
        let (nb, nj, nn) = (self.mech.nbodies(), self.mech.joints.len(), self.template.len());
        let z3 = vec![Vector3::zeros(); nb];
        MaximalWorkspace {
            solver: self.template.clone(),
            now: vec![Pose::default(); nb],
            before: vec![Pose::default(); nb],
            next: vec![Pose::default(); nb],
            v: z3.clone(),
            w: z3.clone(),
            lambda: vec![Vector6::zeros(); nj],
            v_base: z3.clone(),
            w_base: z3.clone(),
            lambda_base: vec![Vector6::zeros(); nj],
            known: vec![Vector6::zeros(); nb],
            force: z3.clone(),
            torque: z3,
            jac_now: vec![(Matrix6::zeros(), Matrix6::zeros()); nj],
            residual: vec![Vector6::zeros(); nn],
            direction: vec![Vector6::zeros(); nn],
            ct: crate::contact::ContactWorkspace::new(self.ncontacts()).with_limits(self.mech.limits.len()),
            last_stats: StepStats::default(),
        }
    }

    fn check_state(&self, state: &[BodyState], what: &str) -> Result<()> {
        let nb = self.mech.nbodies();
        if state.len() != nb {
            return Err(MaximalError::InvalidParameter(format!("{what} has {} bodies, expected {nb}", state.len())));
        }
        for (i, s) in state.iter().enumerate() {
            let finite = s.pose.x.iter().chain(s.v.iter()).chain(s.w.iter()).chain(s.pose.q.coords.iter()).all(|x| x.is_finite());
            if !finite || (s.pose.q.coords.norm() - 1.0).abs() > 1e-9 {
                return Err(MaximalError::InvalidParameter(format!(
                    "{what}[{i}] (body '{}') is not finite or its quaternion is not unit norm",
                    self.mech.bodies[i].name
                )));
            }
        }
        Ok(())
    }

    /// One step from `state` (knot `k`) with generalised forces `u` (`(nu,)`, may be empty
    /// for zero) and optional external wrenches `fext` (per body: world force at the centre of
    /// mass, body-frame moment), writing knot `k + 1` into `next`. `step` labels errors.
    pub fn step(
        &self,
        ws: &mut MaximalWorkspace,
        step: usize,
        state: &[BodyState],
        u: &[f64],
        fext: Option<&[Force]>,
        next: &mut [BodyState],
    ) -> Result<StepStats> {
        let nb = self.mech.nbodies();
        if next.len() != nb {
            return Err(MaximalError::InvalidParameter(format!("next has {} bodies, expected {nb}", next.len())));
        }
        let p_scale = self.prepare(ws, step, state, u, fext)?;
        if self.mech.has_inequalities() {
            return self.step_interior_point(ws, step, p_scale, next, None);
        }
        let tol = self.tolerance;
        let mut merit = self.evaluate(ws, p_scale).ok_or_else(|| self.spin(ws, step))?;
        let mut stalled = false;
        // whether the factors of an earlier iterate may serve this one (a chord step), and
        // whether the last update was one
        let (mut chord, mut chorded) = (false, false);
        for it in 0..=self.max_iterations {
            let res = ws.residual.iter().fold(0.0_f64, |m, r| m.max(r.amax()));
            let scaled = self.scaled_max(ws, p_scale);
            let margin = if chorded { CHORD_MARGIN } else { 1.0 };
            if scaled <= tol * margin || (stalled && scaled <= 1e-8) {
                let violation = self.violation(ws);
                for i in 0..nb {
                    next[i] = BodyState { pose: ws.next[i], v: ws.v[i], w: ws.w[i] };
                }
                ws.last_stats = StepStats { iterations: it, residual: scaled, constraint_violation: violation, barrier: 0.0 };
                return Ok(ws.last_stats);
            }
            if it == self.max_iterations || !res.is_finite() {
                return Err(MaximalError::NewtonDiverged { step, iterations: it, residual: scaled, tolerance: tol });
            }
            ws.v_base.copy_from_slice(&ws.v);
            ws.w_base.copy_from_slice(&ws.w);
            ws.lambda_base.copy_from_slice(&ws.lambda);
            if chord {
                // the full step along the old factors' direction, kept if it lowers the merit;
                // kept factors only while it contracts fast
                for (d, r) in ws.direction.iter_mut().zip(&ws.residual) {
                    *d = -r;
                }
                ws.solver.solve(&mut ws.direction);
                self.set_trial(ws, 1.0);
                match self.evaluate(ws, p_scale) {
                    Some(m) if m < merit => {
                        chord = m <= CHORD_CONTRACTION * merit;
                        (chorded, merit) = (true, m);
                        continue;
                    }
                    _ => {
                        self.set_trial(ws, 0.0);
                        merit = self.evaluate(ws, p_scale).ok_or_else(|| self.spin(ws, step))?;
                    }
                }
            }
            self.assemble(ws);
            ws.solver.factorize().map_err(|node| self.singular(node, step))?;
            for (d, r) in ws.direction.iter_mut().zip(&ws.residual) {
                *d = -r;
            }
            ws.solver.solve(&mut ws.direction);
            // backtracking on the scaled merit; the full step if nothing decreases it
            let mut alpha = 1.0;
            let mut accepted = None;
            for _ in 0..=10 {
                self.set_trial(ws, alpha);
                if let Some(m) = self.evaluate(ws, p_scale) {
                    if m <= (1.0 - 1e-4 * alpha) * merit {
                        accepted = Some(m);
                        break;
                    }
                }
                alpha *= 0.5;
            }
            let m = match accepted {
                Some(m) => m,
                None => {
                    alpha = 1.0;
                    self.set_trial(ws, 1.0);
                    self.evaluate(ws, p_scale).ok_or_else(|| self.spin(ws, step))?
                }
            };
            let step_size = ws.direction.iter().fold(0.0_f64, |a, d| a.max(d.amax())) * alpha;
            let size = ws.v.iter().chain(ws.w.iter()).fold(0.0_f64, |a, d| a.max(d.amax()));
            stalled = step_size <= 8.0 * f64::EPSILON * (1.0 + size);
            chord = alpha == 1.0 && !stalled;
            (chorded, merit) = (false, m);
        }
        unreachable!("the loop returns at it == max_iterations")
    }

    /// Test hook: the step from `state` under `u` with the interior point's barrier held at
    /// `mu` (the relaxed system that [`Self::linearize`] differentiates at its final `μ`).
    #[cfg(test)]
    pub(crate) fn step_relaxed(&self, ws: &mut MaximalWorkspace, state: &[BodyState], u: &[f64], mu: f64, next: &mut [BodyState]) -> Result<StepStats> {
        let p_scale = self.prepare(ws, 0, state, u, None)?;
        self.step_interior_point(ws, 0, p_scale, next, Some(mu))
    }

    /// Checks the inputs and evaluates everything known at knot `k`: `z_k`, `z_{k−1}`, the
    /// forces, the constant part of the body residuals, `G(z_k)`; sets the warm start.
    /// Returns the momentum scale `p` of the residual weights.
    pub(crate) fn prepare(&self, ws: &mut MaximalWorkspace, step: usize, state: &[BodyState], u: &[f64], fext: Option<&[Force]>) -> Result<f64> {
        let (mech, dt) = (&*self.mech, self.dt);
        let nb = mech.nbodies();
        self.check_state(state, "state")?;
        if !u.is_empty() && u.len() != mech.nu || u.iter().any(|x| !x.is_finite()) {
            return Err(MaximalError::InvalidParameter(format!("u has length {} (or non-finite entries), expected nu = {} finite entries", u.len(), mech.nu)));
        }
        if let Some(f) = fext {
            if f.len() != nb || f.iter().any(|w| !w.to_vector().iter().all(|x| x.is_finite())) {
                return Err(MaximalError::InvalidParameter(format!("fext has {} wrenches (or non-finite entries), expected {nb}", f.len())));
            }
        }
        // knots k and k−1, forces at z_k
        let mut p_scale = 1.0_f64;
        for (i, s) in state.iter().enumerate() {
            ws.now[i] = s.pose;
            p_scale = p_scale.max(mech.bodies[i].mass * s.v.norm()).max((mech.bodies[i].inertia * s.w).norm());
        }
        mech.previous_poses(state, dt, &mut ws.before).map_err(|e| relabel(e, step))?;
        for i in 0..nb {
            ws.force[i] = mech.gravity * mech.bodies[i].mass;
            ws.torque[i] = Vector3::zeros();
            if let Some(f) = fext {
                ws.force[i] += f[i].linear;
                ws.torque[i] += f[i].angular;
            }
        }
        mech.add_joint_wrenches(&ws.now, &ws.before, dt, u, &mut ws.force, &mut ws.torque);
        for (i, s) in state.iter().enumerate() {
            let b = &mech.bodies[i];
            let jw = b.inertia * s.w;
            let known_r = -0.5 * (jw * scalar_rate(&s.w, dt) - s.w.cross(&jw)) - ws.torque[i];
            let known_t = -s.v * (b.mass / dt) - ws.force[i];
            ws.known[i] = stack(&known_t, &known_r);
        }
        for (j, jt) in mech.joints.iter().enumerate() {
            if self.joint_node[j].is_some() {
                ws.jac_now[j] = jt.constraint.jacobians(jt.parent.map(|p| &ws.now[p]), &ws.now[jt.child]);
            }
        }
        // Newton starts from ż_k = ż_{k−1}, λ_k = λ_{k−1}
        for (i, s) in state.iter().enumerate() {
            ws.v[i] = s.v;
            ws.w[i] = s.w;
        }
        Ok(p_scale)
    }

    /// Saves the current unknowns as the line search's base point.
    pub(crate) fn save_base(&self, ws: &mut MaximalWorkspace) {
        ws.v_base.copy_from_slice(&ws.v);
        ws.w_base.copy_from_slice(&ws.w);
        ws.lambda_base.copy_from_slice(&ws.lambda);
    }

    pub(crate) fn set_trial_pub(&self, ws: &mut MaximalWorkspace, alpha: f64) {
        self.set_trial(ws, alpha);
    }

    /// Unknowns `x_base + α Δx` into `ws.v`, `ws.w`, `ws.lambda`.
    fn set_trial(&self, ws: &mut MaximalWorkspace, alpha: f64) {
        for i in 0..self.mech.nbodies() {
            let d = &ws.direction[i];
            ws.v[i] = ws.v_base[i] + d.fixed_rows::<3>(0) * alpha;
            ws.w[i] = ws.w_base[i] + d.fixed_rows::<3>(3) * alpha;
        }
        for (j, node) in self.joint_node.iter().enumerate() {
            if let Some(n) = node {
                ws.lambda[j] = ws.lambda_base[j] + ws.direction[*n] * alpha;
            }
        }
    }

    /// Residual at the unknowns `ws.v`, `ws.w`, `ws.lambda` into `ws.residual` (and `z_{k+1}`
    /// into `ws.next`); returns the merit `½|W r|²` or `None` when a body spins too fast for
    /// the knot update.
    pub(crate) fn evaluate(&self, ws: &mut MaximalWorkspace, p_scale: f64) -> Option<f64> {
        let (mech, dt) = (&*self.mech, self.dt);
        let nb = mech.nbodies();
        let (v, w, lambda) = (&ws.v, &ws.w, &ws.lambda);
        Mechanism::advance_all(&ws.now, v, w, dt, &mut ws.next)?;
        for i in 0..nb {
            let b = &mech.bodies[i];
            let jw = b.inertia * w[i];
            let rt = v[i] * (b.mass / dt);
            let rr = 0.5 * (jw * scalar_rate(&w[i], dt) + w[i].cross(&jw));
            ws.residual[i] = ws.known[i] + stack(&rt, &rr);
        }
        for (j, jt) in mech.joints.iter().enumerate() {
            let Some(node) = self.joint_node[j] else { continue };
            let (ja, jb) = &ws.jac_now[j];
            ws.residual[jt.child] -= jb.transpose() * lambda[j];
            if let Some(p) = jt.parent {
                ws.residual[p] -= ja.transpose() * lambda[j];
            }
            let g = jt.constraint.value(jt.parent.map(|p| &ws.next[p]), &ws.next[jt.child]);
            ws.residual[node] = Vector6::from_column_slice(&g) / dt;
        }
        if mech.has_inequalities() {
            self.subtract_contact_wrenches(ws);
        }
        let scale = dt / p_scale;
        let mut merit = 0.0;
        for (k, r) in ws.residual[..self.n_eq].iter().enumerate() {
            let s = if k < nb { scale } else { dt };
            merit += (r * s).norm_squared();
        }
        Some(0.5 * merit)
    }

    pub(crate) fn scaled_max(&self, ws: &MaximalWorkspace, p_scale: f64) -> f64 {
        let nb = self.mech.nbodies();
        ws.residual[..self.n_eq].iter().enumerate().fold(0.0_f64, |m, (k, r)| m.max(r.amax() * if k < nb { self.dt / p_scale } else { self.dt }))
    }

    pub(crate) fn violation(&self, ws: &MaximalWorkspace) -> f64 {
        let nb = self.mech.nbodies();
        ws.residual[nb..self.n_eq].iter().fold(0.0_f64, |m, r| m.max(r.amax())) * self.dt
    }

    /// The Newton matrix at the current unknowns into `ws.solver`.
    pub(crate) fn assemble(&self, ws: &mut MaximalWorkspace) {
        let (mech, dt) = (&*self.mech, self.dt);
        ws.solver.clear();
        for i in 0..mech.nbodies() {
            let b = &mech.bodies[i];
            let (w, j) = (ws.w[i], b.inertia);
            let s = scalar_rate(&w, dt);
            let jw = j * w;
            let rot: Matrix3<f64> = (j * s - jw * w.transpose() / s + skew(&w) * j - skew(&jw)) * 0.5;
            let d = ws.solver.diagonal_mut(i);
            d.fixed_view_mut::<3, 3>(0, 0).copy_from(&(Matrix3::identity() * (b.mass / dt)));
            d.fixed_view_mut::<3, 3>(3, 3).copy_from(&rot);
        }
        for (j, jt) in mech.joints.iter().enumerate() {
            let Some(node) = self.joint_node[j] else { continue };
            let (ja_now, jb_now) = &ws.jac_now[j];
            let (ja, jb) = jt.constraint.jacobians(jt.parent.map(|p| &ws.next[p]), &ws.next[jt.child]);
            // written in place (whole-matrix temporaries were copied through memcpy)
            for (body, now, next) in [(Some(jt.child), jb_now, &jb), (jt.parent, ja_now, &ja)] {
                let Some(b) = body else { continue };
                if let Some(blk) = ws.solver.block_mut(b, node) {
                    blk.tr_copy_from(now);
                    blk.neg_mut();
                }
                let e = update_tangent(&ws.w[b], dt) / dt;
                if let Some(blk) = ws.solver.block_mut(node, b) {
                    blk.fixed_view_mut::<6, 3>(0, 0).copy_from(&next.fixed_view::<6, 3>(0, 0));
                    blk.fixed_view_mut::<6, 3>(0, 3).copy_from(&(next.fixed_view::<6, 3>(0, 3) * e));
                }
            }
        }
    }

    /// Benchmark and test hook: prepares the step from `state` and assembles the Newton matrix
    /// at the warm start (`ż_k = ż_{k−1}`, `λ` from the workspace), with the residual as
    /// right-hand side. Follow with [`Self::solve_assembled`] or [`Self::assembled_dense`].
    #[cfg(any(test, feature = "oracles"))]
    pub fn assemble_newton(&self, ws: &mut MaximalWorkspace, state: &[BodyState], u: &[f64]) -> Result<()> {
        let p_scale = self.prepare(ws, 0, state, u, None)?;
        self.evaluate(ws, p_scale).ok_or_else(|| self.spin(ws, 0))?;
        self.assemble(ws);
        Ok(())
    }

    /// Benchmark hook: factorises the assembled matrix on the graph and solves for the Newton
    /// direction (in place: assemble again before the next call).
    #[cfg(any(test, feature = "oracles"))]
    pub fn solve_assembled(&self, ws: &mut MaximalWorkspace) -> Result<()> {
        ws.solver.factorize().map_err(|node| self.singular(node, 0))?;
        for (d, r) in ws.direction.iter_mut().zip(&ws.residual) {
            *d = -r;
        }
        ws.solver.solve(&mut ws.direction);
        Ok(())
    }

    /// Benchmark hook: the assembled Newton matrix as a dense matrix and the right-hand side
    /// `−r` (node order), for the dense-LU baseline.
    #[cfg(any(test, feature = "oracles"))]
    #[must_use]
    pub fn assembled_dense(&self, ws: &MaximalWorkspace) -> (nalgebra::DMatrix<f64>, nalgebra::DVector<f64>) {
        let o = ws.solver.offsets();
        let mut r = nalgebra::DVector::zeros(o[o.len() - 1]);
        for k in 0..ws.solver.len() {
            let m = ws.solver.dim(k);
            r.rows_mut(o[k], m).copy_from(&(-ws.residual[k]).rows(0, m));
        }
        (ws.solver.to_dense(), r)
    }

    pub(crate) fn spin(&self, ws: &MaximalWorkspace, step: usize) -> MaximalError {
        let (i, w) = ws.w.iter().enumerate().max_by(|a, b| a.1.norm().total_cmp(&b.1.norm())).map(|(i, w)| (i, *w)).unwrap_or((0, Vector3::zeros()));
        self.mech.spin_error(i, step, &w, self.dt)
    }

    pub(crate) fn singular_pivot(&self, node: usize, step: usize) -> MaximalError {
        self.singular(node, step)
    }

    fn singular(&self, node: usize, step: usize) -> MaximalError {
        let nb = self.mech.nbodies();
        if node < nb {
            return MaximalError::SingularPivot { node: format!("body '{}'", self.mech.bodies[node].name), step, hint: "its mass or inertia is degenerate" };
        }
        if node >= self.n_eq {
            let c = node - self.n_eq;
            let (nc, nl) = (self.mech.contacts.len(), self.mech.limits.len());
            let name = match self.mech.contacts.get(c) {
                Some(ct) => format!("contact '{}'", ct.name),
                None if c < nc + nl => format!("limit of joint '{}'", self.mech.joints[self.mech.limits[c - nc].joint].name),
                None => format!("body contact '{}'", self.mech.body_contacts[c - nc - nl].name),
            };
            return MaximalError::SingularPivot {
                node: name,
                step,
                hint: "its interior-point pivot lost its conditioning (the barrier went below what its scale allows)",
            };
        }
        let j = self.joint_node.iter().position(|n| *n == Some(node)).unwrap_or(0);
        MaximalError::SingularPivot {
            node: format!("joint '{}'", self.mech.joints[j].name),
            step,
            hint: "its constraint rows are redundant with other joints (e.g. a planar loop closed by a joint that also fixes out-of-plane motion: use a point-on-line or spherical closure), or the mechanism is at a singular configuration",
        }
    }

    /// Linear momentum `Σ m v` of a state (conserved exactly without gravity, external forces
    /// and world joints).
    #[must_use]
    pub fn linear_momentum(&self, state: &[BodyState]) -> Vector3<f64> {
        state.iter().zip(&self.mech.bodies).map(|(s, b)| s.v * b.mass).sum()
    }

    /// Discrete angular momentum about the world origin, `Σ x_k × m v + R(q_k) ½Δt (s I − ω×) J ω`
    /// (the discrete Legendre transform of the rotation-invariant Lagrangian: exactly conserved,
    /// discrete Noether theorem, where the continuous `x × m v + R J ω` only oscillates).
    #[must_use]
    pub fn angular_momentum(&self, state: &[BodyState]) -> Vector3<f64> {
        let dt = self.dt;
        state
            .iter()
            .zip(&self.mech.bodies)
            .map(|(s, b)| {
                let jw = b.inertia * s.w;
                s.pose.x.cross(&(s.v * b.mass)) + s.pose.q * ((jw * scalar_rate(&s.w, dt) - s.w.cross(&jw)) * (0.5 * dt))
            })
            .sum()
    }

    /// Energy `Σ ½ m |v|² + ½ ωᵀ J ω − m gᵀ x_k` plus joint springs (velocities of the last
    /// interval, positions at the knot).
    #[must_use]
    pub fn energy(&self, state: &[BodyState]) -> f64 {
        let mech = &*self.mech;
        let mut e: f64 = state
            .iter()
            .zip(&mech.bodies)
            .map(|(s, b)| 0.5 * b.mass * s.v.norm_squared() + 0.5 * s.w.dot(&(b.inertia * s.w)) - b.mass * mech.gravity.dot(&s.pose.x))
            .sum();
        let poses: Vec<Pose> = state.iter().map(|s| s.pose).collect();
        for (j, jt) in mech.joints.iter().enumerate() {
            if let (Some((_, iv)), Some(th)) = (jt.minimal, mech.joint_coordinate(j, &poses)) {
                e += 0.5 * mech.stiffness[iv] * (th - mech.rest[iv]).powi(2);
            }
        }
        e
    }

    /// Largest constraint violation `|g(z)|∞` over all joints at the poses of `state`.
    #[must_use]
    pub fn constraint_violation(&self, state: &[BodyState]) -> f64 {
        self.mech
            .joints
            .iter()
            .map(|jt| {
                let g = jt.constraint.value(jt.parent.map(|p| &state[p].pose), &state[jt.child].pose);
                g.iter().fold(0.0_f64, |m, x| m.max(x.abs()))
            })
            .fold(0.0, f64::max)
    }
}

fn relabel(e: MaximalError, step: usize) -> MaximalError {
    match e {
        MaximalError::AngularVelocityTooLarge { body, omega, limit, .. } => MaximalError::AngularVelocityTooLarge { body, step, omega, limit },
        other => other,
    }
}

#[inline]
fn stack(a: &Vector3<f64>, b: &Vector3<f64>) -> Vector6<f64> {
    Vector6::new(a.x, a.y, a.z, b.x, b.y, b.z)
}

#[cfg(test)]
mod tests;
