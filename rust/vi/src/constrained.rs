//! The constrained step of Johnson (2012) §4.5 (digest §2.3–2.4) on top of the O(n) Newton
//! factorisation: with multipliers `λ_k` (`m` constraints),
//!
//! `R^0 = p_k + D_1 L_d + f⁻ − Dh(q_k)ᵀ λ_k = 0`, `h(q_{k+1}) = 0`, `p_{k+1} = D_2 L_d + f⁺`,
//!
//! solved for `(q_{k+1}, λ_k)` so that the constraints hold at every step to solver tolerance
//! (no drift, no stabilisation parameter); the end momentum is then projected as RATTLE does
//! (module `momentum_projection`: `p_{k+1} − Dh(q_{k+1})ᵀ μ_{k+1}`, a motion the constraints
//! allow). Only the one-interval schemes (midpoint,
//! trapezoid) take constraints: there the unknown `z` is the single control point `q^1` and
//! `q_{k+1} = e_0 q_k + e_1 z` ([`crate::Scheme::endpoint`]).
//!
//! # Newton direction in O(n m + m³)
//!
//! The KKT system `[[J, −C_1ᵀ], [C_2, 0]] (δz, δλ) = −(r, h)` with `C_1 = Dh(q_k)` (fixed over
//! the step) and `C_2 = e_1 Dh(q_{k+1})` is solved by its Schur complement: `w = −J⁻¹ r` and
//! `K = J⁻¹ C_1ᵀ` from the B.1/B.2 factorisation (`m + 1` sweeps), then
//! `(C_2 K) δλ = −h − C_2 w` (m×m LU) and `δz = w + K δλ`. `C_2 K` is singular when the
//! constraints are redundant (e.g. three point-on-plane constraints on a planar loop), which is
//! reported as an error rather than regularised.
//!
//! With a [`crate::ConstraintSchedule`] only the constraints of the step's phase are imposed:
//! the others have no rows (`λ_i = 0`, and `h_i` is not asked of `q_{k+1}`), and `C_2 K` is the
//! Schur complement of the active ones.
//!
//! # Linearisation
//!
//! For an input direction `x` the same elimination applies to the right-hand side
//! `f_1 = −∂R/∂x`, `f_2 = −∂h(q_{k+1})/∂x`: besides the unconstrained terms, `∂R^0/∂q_k` gains
//! `−Σ_i λ_i D²h_i(q_k)` and `∂h(q_{k+1})/∂q_k = e_0 Dh(q_{k+1})`. The momentum row
//! `p_{k+1}` has no multiplier term, so `δp_{k+1} = ∂P/∂x + P_z (w + K δλ)`, where the B.1 sweep
//! returns `P_z w` and `P_z K` alongside the solutions.

use crate::constraints::{Constraint, ConstraintScratch};
use crate::dense::{lu_factor_in, lu_solve_in};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::momentum_projection::ProjectionWork;
use crate::newton_direction::LANES;
use crate::point::PointState;
use nalgebra::DMatrix;

/// Workspace of the constrained step (empty when the integrator has no constraints).
#[derive(Clone, Debug)]
pub(crate) struct ConstraintWork {
    /// Kinematics at `q_{k+1}` (not a control point of the midpoint rule).
    end_state: PointState,
    q_end: Vec<f64>,
    /// `(m, n)` `C_1 = Dh(q_k)`, fixed over a step.
    c1: DMatrix<f64>,
    /// `(m, n)` `C_2 = e_1 Dh(q_{k+1})` at the current iterate.
    c2: DMatrix<f64>,
    /// The constraints the current step imposes (increasing indices, all of them without a
    /// schedule); the rows of `C_1`, `C_2`, `K` of the others are stale and never read.
    pub(crate) active: Vec<usize>,
    /// `(m,)` `h(q_{k+1})`, multipliers, their value at the start of a line search, the step
    /// (zero on inactive constraints).
    pub(crate) h: Vec<f64>,
    pub(crate) lambda: Vec<f64>,
    /// `(m,)` the step's reported contact impulse `λ_k + μ_{k+1}` (module
    /// `momentum_projection`), and that projection's scratch.
    pub(crate) impulse: Vec<f64>,
    pub(crate) projection: ProjectionWork,
    lambda_start: Vec<f64>,
    /// `(m,)` where the next step's Newton solve starts `λ` when `guessed`
    /// ([`ViWorkspace::guess_multipliers`]; one step only), else at zero.
    lambda_guess: Vec<f64>,
    guessed: bool,
    dlambda: Vec<f64>,
    /// `(n, m)` column-major `K = J⁻¹ C_1ᵀ` and (linearisation) `P_z K`.
    k: Vec<f64>,
    k_momentum: Vec<f64>,
    /// The Schur complement `C_2 K` of the active constraints (`a × a` column-major in the
    /// first `a²` entries, `a` active) and its LU pivots; `(m,)` a right-hand side of it.
    schur: Vec<f64>,
    pivots: Vec<usize>,
    pub(crate) compact: Vec<f64>,
    pub(crate) rhs: Vec<f64>,
    pub(crate) scratch: ConstraintScratch,
    /// `(n, n)` `Σ_i λ_i D²h_i(q_k)` (linearisation).
    hessian: DMatrix<f64>,
    /// `(m, 3n)` the multipliers' derivatives `∂λ_k/∂(q_k, p_k, u_k)` of the last linearised
    /// step (tangent coordinates; zero rows for inactive constraints).
    pub(crate) lambda_jacobian: DMatrix<f64>,
    /// The normal part of a knot's kinetic energy ([`VariationalIntegrator::normal_kinetic_energy`]):
    /// kinematics at the knot and its chart placements and coordinates, for the `a` constraints
    /// counted: `C = Dh` in tangent coordinates (rows `0..a` of `(m, n)`), `M⁻¹ Cᵀ` (columns
    /// `0..a` of `(n, m)`), `C M⁻¹ Cᵀ` (`a × a` column-major) and its pivots, `C v` `(m,)`.
    pub(crate) knot: PointState,
    pub(crate) knot_placements: Vec<vidyn_spatial::Se3>,
    pub(crate) knot_theta: Vec<f64>,
    pub(crate) c_knot: DMatrix<f64>,
    pub(crate) minv_ct: DMatrix<f64>,
    pub(crate) s_knot: Vec<f64>,
    pub(crate) s_pivots: Vec<usize>,
    cv: Vec<f64>,
}

impl ConstraintWork {
    /// Scratch for `m` constraints on a DEL model of `n` coordinates with joint placements
    /// `placements` (nothing without constraints).
    pub(crate) fn new(n: usize, m: usize, placements: &[vidyn_spatial::Se3]) -> Self {
        let nm = if m == 0 { 0 } else { n };
        Self {
            knot: PointState::new(nm),
            knot_placements: if m == 0 { Vec::new() } else { placements.to_vec() },
            knot_theta: vec![0.0; nm],
            c_knot: DMatrix::zeros(m, nm),
            minv_ct: DMatrix::zeros(nm, m),
            s_knot: vec![0.0; m * m],
            s_pivots: vec![0; m],
            cv: vec![0.0; m],
            end_state: PointState::new(nm),
            q_end: vec![0.0; nm],
            c1: DMatrix::zeros(m, nm),
            c2: DMatrix::zeros(m, nm),
            h: vec![0.0; m],
            lambda: vec![0.0; m],
            impulse: vec![0.0; m],
            projection: ProjectionWork::new(n, m),
            lambda_start: vec![0.0; m],
            lambda_guess: vec![0.0; m],
            guessed: false,
            dlambda: vec![0.0; m],
            k: vec![0.0; nm * m],
            k_momentum: vec![0.0; nm * m],
            active: (0..m).collect(),
            schur: vec![0.0; m * m],
            pivots: vec![0; m],
            compact: vec![0.0; m],
            rhs: vec![0.0; nm],
            scratch: ConstraintScratch::new(nm),
            hessian: DMatrix::zeros(if m == 0 { 0 } else { n }, nm),
            lambda_jacobian: DMatrix::zeros(m, 3 * nm),
        }
    }
}

impl ViWorkspace {
    /// Starts the multipliers of the next constrained step solved in this workspace at
    /// `lambda` (`(m,)`, one per constraint of the integrator; the rows a step does not
    /// impose are ignored) instead of zero: the multipliers a solve of the same step found
    /// before let a solve that starts at its solution stop at once. Used by one step, the
    /// next (whichever predictor it starts from); ignored when `lambda` has not `m` entries.
    pub fn guess_multipliers(&mut self, lambda: &[f64]) {
        let cw = &mut self.constraint;
        if lambda.len() == cw.lambda_guess.len() && !lambda.is_empty() {
            cw.lambda_guess.copy_from_slice(lambda);
            cw.guessed = true;
        }
    }
}

impl VariationalIntegrator {
    /// Rows `i ∈ active` of `out` = `scale · Dh_i` at the kinematics `st` (`row`: scratch).
    fn gradient_rows(&self, active: &[usize], st: &PointState, scratch: &mut ConstraintScratch, out: &mut DMatrix<f64>, scale: f64, row: &mut [f64]) {
        for &i in active {
            self.constraints[i].gradient(&self.model, st, scratch, row);
            for (j, g) in row.iter().enumerate() {
                out[(i, j)] = scale * g;
            }
        }
    }

    /// The constraints of step `step` become the active ones, `C_1 = Dh(q_k)` from the
    /// kinematics of control point 0 (`= q_k`, set by the last `points.set`), and `λ = 0`, or
    /// the guess of [`ViWorkspace::guess_multipliers`] on the active rows (which it uses up).
    /// The step must be covered by the schedule ([`Self::active_constraints`]).
    pub(crate) fn begin_constrained_step(&self, ws: &mut ViWorkspace, step: usize) -> crate::Result<()> {
        let cw = &mut ws.constraint;
        cw.active.clear();
        cw.active.extend_from_slice(self.active_constraints(step)?);
        self.gradient_rows(&cw.active, &ws.points.states[0], &mut cw.scratch, &mut cw.c1, 1.0, &mut cw.rhs);
        cw.lambda.fill(0.0);
        if std::mem::take(&mut cw.guessed) {
            for &i in &cw.active {
                cw.lambda[i] = cw.lambda_guess[i];
            }
        }
        cw.dlambda.fill(0.0);
        cw.h.fill(0.0);
        Ok(())
    }

    /// The guard against mirror images (module `constraints`): the [`crate::AlignedAxes`] of
    /// the constraints step `step` imposes, at its end `q_next`. O(n) kinematics, only when
    /// such a constraint is active.
    pub(crate) fn check_alignment(&self, ws: &mut ViWorkspace, step: usize, q_next: &[f64]) -> crate::Result<()> {
        let active = self.active_constraints(step)?;
        let aligned = |i: &&usize| matches!(self.constraints[**i], Constraint::Perpendicular { aligned: Some(_), .. });
        if !active.iter().any(|i| aligned(&i)) {
            return Ok(());
        }
        self.knot_kinematics(ws, q_next);
        for &i in active.iter().filter(aligned) {
            if let Some(degrees) = self.constraints[i].misalignment(&ws.constraint.knot) {
                return Err(crate::ViError::Misaligned { step, constraint: i, degrees, limit: crate::ALIGNED_WITHIN_DEGREES });
            }
        }
        Ok(())
    }

    /// The constraint values `h(q)` (`(m,)`), e.g. to check an initial configuration (`q`
    /// `(nq,)`; with composite joints evaluated in the chart centred at `q`).
    pub fn constraint_values(&self, ws: &mut ViWorkspace, q: &[f64], h: &mut [f64]) -> crate::Result<()> {
        vidyn_rbd::check_configuration(self.model(), q)?;
        if h.len() != self.constraints.len() {
            return Err(crate::ViError::InvalidParameter(format!("h has length {}, expected the number of constraints {}", h.len(), self.constraints.len())));
        }
        let charted = self.centre_chart(ws, q);
        let ViWorkspace { constraint: cw, points, chart, scratch_zero, .. } = ws;
        let q = if charted { chart.coordinates() } else { q };
        cw.end_state.update_configuration(&self.model, points.joint_placements(&self.model), q);
        cw.end_state.update_velocity(&self.model, scratch_zero);
        for (hi, con) in h.iter_mut().zip(&self.constraints) {
            *hi = con.value(&cw.end_state);
        }
        Ok(())
    }

    /// The part of `½ pᵀ M⁻¹ p` that the normals of the constraints `active` carry at the knot
    /// `(q, p)`, with `v = M⁻¹ p` given: `½ (C v)ᵀ (C M⁻¹ Cᵀ)⁻¹ (C v)`, `C = Dh(q)` in tangent
    /// coordinates (with composite joints `C_θ J(0)⁻¹` from the chart centred at `q`). The
    /// kinetic energy of the motion the constraints allow is the rest, `½ v_tᵀ M v_t` with `v_t`
    /// the `M`-orthogonal projection of `v` onto `C v_t = 0`. O(a n + a³) for `a` constraints, no
    /// allocation.
    pub(crate) fn normal_kinetic_energy(&self, ws: &mut ViWorkspace, active: &[usize], q: &[f64], v: &[f64]) -> crate::Result<f64> {
        let m = active.len();
        if m == 0 {
            return Ok(0.0);
        }
        self.knot_constraint_factors(ws, 0, active, q)?;
        let cw = &mut ws.constraint;
        for (i, cv) in cw.cv[..m].iter_mut().enumerate() {
            *cv = cw.c_knot.row(i).iter().zip(v).map(|(c, x)| c * x).sum();
        }
        cw.compact[..m].copy_from_slice(&cw.cv[..m]);
        lu_solve_in(&cw.s_knot[..m * m], m, &cw.s_pivots, &mut cw.compact[..m]);
        Ok(0.5 * cw.cv[..m].iter().zip(&cw.compact[..m]).map(|(a, b)| a * b).sum::<f64>())
    }

    /// The multipliers of the last step solved with `ws` (`(m,)`): the step's constraint
    /// impulse `λ_k + μ_{k+1}`, of which `−Dh(q_k)ᵀ λ_k` acts at its start and
    /// `−Dh(q_{k+1})ᵀ μ_{k+1}` (RATTLE's momentum projection, module `momentum_projection`) at
    /// its end; zero on the constraints the step does not impose.
    #[must_use]
    pub fn multipliers<'a>(&self, ws: &'a ViWorkspace) -> &'a [f64] {
        &ws.constraint.impulse
    }

    /// The derivatives `∂(λ_k + μ_{k+1})/∂(q_k, p_k, u_k)` `(m, 3n)` of the multipliers of the last step
    /// linearised with `ws` ([`Self::linearize`]), in the tangent coordinates of `A`, `B`
    /// (`δq` as `model.difference` with composite joints); zero rows for the constraints the
    /// step does not impose. What costs on contact forces (friction cones, unilateral
    /// contacts) need: the mean force of a point contact is `−λ/Δt`.
    #[must_use]
    pub fn multiplier_jacobian<'a>(&self, ws: &'a ViWorkspace) -> &'a DMatrix<f64> {
        &ws.constraint.lambda_jacobian
    }

    /// `h(q_{k+1})` at the current iterate (`ws.z`); returns `max |h|`.
    pub(crate) fn endpoint_constraint_values(&self, ws: &mut ViWorkspace, q: &[f64]) -> f64 {
        let cw = &mut ws.constraint;
        self.scheme.endpoint_from(q, &ws.z, &mut cw.q_end);
        // in the step's chart with composite joints (module `chart_step`)
        cw.end_state.update_configuration(&self.model, ws.points.joint_placements(&self.model), &cw.q_end);
        cw.end_state.update_velocity(&self.model, &ws.scratch_zero);
        let mut hmax = 0.0_f64;
        for &i in &cw.active {
            let hi = self.constraints[i].value(&cw.end_state);
            cw.h[i] = hi;
            hmax = if hi.is_nan() { f64::NAN } else { hmax.max(hi.abs()) };
        }
        hmax
    }

    /// `r^0 −= C_1ᵀ λ` (the constraint impulse on the first DEL row).
    pub(crate) fn add_constraint_impulse(&self, ws: &ViWorkspace, r: &mut [f64]) {
        let cw = &ws.constraint;
        for &i in &cw.active {
            let l = cw.lambda[i];
            for j in 0..self.n() {
                r[j] -= cw.c1[(i, j)] * l;
            }
        }
    }

    /// `K = J⁻¹ C_1ᵀ`, `C_2` and the LU of `C_2 K` at the current factorisation. Returns
    /// `false` when `C_2 K` is singular (redundant or degenerate constraints).
    fn factor_schur(&self, ws: &mut ViWorkspace, with_momentum: bool) -> bool {
        let n = self.n();
        let a = ws.constraint.active.len();
        let (sc, dt) = (&self.scheme, self.dt);
        {
            let cw = &mut ws.constraint;
            let e1 = sc.endpoint(1);
            self.gradient_rows(&cw.active, &cw.end_state, &mut cw.scratch, &mut cw.c2, e1, &mut cw.rhs);
        }
        // LANES columns of C_1ᵀ at a time (and P_z K for the linearisation)
        ws.newton.ensure_lanes();
        let zero = [0.0; LANES];
        for c0 in (0..a).step_by(LANES) {
            let lanes = LANES.min(a - c0);
            ws.lane_rhs.fill(zero);
            for l in 0..lanes {
                let i = ws.constraint.active[c0 + l];
                for j in 0..n {
                    ws.lane_rhs[j][l] = ws.constraint.c1[(i, j)];
                }
            }
            let momentum = if with_momentum { Some(&mut ws.lane_momentum[..]) } else { None };
            ws.newton.solve_lanes(&self.model, sc, dt, &self.forces, &ws.lane_rhs, &mut ws.lane_sol, momentum, None);
            let cw = &mut ws.constraint;
            for l in 0..lanes {
                let i = cw.active[c0 + l];
                for j in 0..n {
                    cw.k[i * n + j] = ws.lane_sol[j][l];
                    if with_momentum {
                        cw.k_momentum[i * n + j] = ws.lane_momentum[j][l];
                    }
                }
            }
        }
        let cw = &mut ws.constraint;
        for (r, &i) in cw.active.iter().enumerate() {
            for (c, &j) in cw.active.iter().enumerate() {
                cw.schur[c * a + r] = (0..n).map(|x| cw.c2[(i, x)] * cw.k[j * n + x]).sum();
            }
        }
        lu_factor_in(&mut cw.schur[..a * a], a, &mut cw.pivots)
    }

    /// Turns the unconstrained direction `dz = −J⁻¹ r` (factorisation current) into the KKT
    /// direction and sets `δλ` (module docs). `false` when `C_2 K` is singular.
    pub(crate) fn constrain_direction(&self, ws: &mut ViWorkspace, dz: &mut [f64]) -> bool {
        if !self.factor_schur(ws, false) {
            return false;
        }
        let n = self.n();
        let cw = &mut ws.constraint;
        let a = cw.active.len();
        for (r, &i) in cw.active.iter().enumerate() {
            cw.compact[r] = -cw.h[i] - (0..n).map(|j| cw.c2[(i, j)] * dz[j]).sum::<f64>();
        }
        lu_solve_in(&cw.schur[..a * a], a, &cw.pivots, &mut cw.compact[..a]);
        for (r, &i) in cw.active.iter().enumerate() {
            let dl = cw.compact[r];
            cw.dlambda[i] = dl;
            for j in 0..n {
                dz[j] += cw.k[i * n + j] * dl;
            }
        }
        true
    }

    /// Saves `λ` before a line search.
    pub(crate) fn save_multipliers(&self, ws: &mut ViWorkspace) {
        let cw = &mut ws.constraint;
        cw.lambda_start.copy_from_slice(&cw.lambda);
    }

    /// `λ = λ_start + α δλ`.
    pub(crate) fn move_multipliers(&self, ws: &mut ViWorkspace, alpha: f64) {
        let cw = &mut ws.constraint;
        for ((l, l0), d) in cw.lambda.iter_mut().zip(&cw.lambda_start).zip(&cw.dlambda) {
            *l = l0 + alpha * d;
        }
    }

    /// Prepares the constrained linearisation at the solved step (factorisation with the
    /// momentum row current): `K`, `P_z K`, the Schur LU and `Σ λ_i D²h_i(q_k)`.
    pub(crate) fn prepare_constrained_linearization(&self, ws: &mut ViWorkspace) -> bool {
        let ok = self.factor_schur(ws, true);
        let cw = &mut ws.constraint;
        cw.hessian.fill(0.0);
        cw.lambda_jacobian.fill(0.0);
        for &i in &cw.active {
            self.constraints[i].add_hessian(&self.model, &ws.points.states[0], &mut cw.scratch, cw.lambda[i], &mut cw.hessian);
        }
        ok
    }

    /// Adds the constraint terms of the `LANES` right-hand sides starting at input column
    /// `c0` (`x = (q_k, p_k, u)`): `f_1 += Σλ D²h(q_k) e_c` for the `q_k` columns.
    pub(crate) fn constrained_rhs(&self, ws: &mut ViWorkspace, c0: usize, lanes: usize) {
        let n = self.n();
        for l in 0..lanes {
            let c = c0 + l;
            if c < n {
                for j in 0..n {
                    ws.lane_rhs[j][l] += ws.constraint.hessian[(j, c)];
                }
            }
        }
    }

    /// Completes the `LANES` solutions `w = J⁻¹ f_1` (and `P_z w`) of the input columns from
    /// `c0` into the constrained ones: `δλ = (C_2 K)⁻¹ (f_2 − C_2 w)`, `δz = w + K δλ`,
    /// `P_z δz = P_z w + P_z K δλ`, with `f_2 = −e_0 Dh(q_{k+1}) e_c` for the `q_k` columns;
    /// `δλ` is column `c` of the multipliers' Jacobian.
    pub(crate) fn constrained_solution(&self, ws: &mut ViWorkspace, c0: usize, lanes: usize) {
        let n = self.n();
        let ratio = self.scheme.endpoint(0) / self.scheme.endpoint(1);
        let cw = &mut ws.constraint;
        let a = cw.active.len();
        for l in 0..lanes {
            let c = c0 + l;
            for (r, &i) in cw.active.iter().enumerate() {
                // C_2 = e_1 Dh(q_{k+1}), so e_0 Dh(q_{k+1}) e_c = (e_0 / e_1) C_2[i, c]
                let f2 = if c < n { -ratio * cw.c2[(i, c)] } else { 0.0 };
                cw.compact[r] = f2 - (0..n).map(|j| cw.c2[(i, j)] * ws.lane_sol[j][l]).sum::<f64>();
            }
            lu_solve_in(&cw.schur[..a * a], a, &cw.pivots, &mut cw.compact[..a]);
            for (&i, dl) in cw.active.iter().zip(&cw.compact[..a]) {
                cw.lambda_jacobian[(i, c)] = *dl;
                for j in 0..n {
                    ws.lane_sol[j][l] += cw.k[i * n + j] * dl;
                    ws.lane_momentum[j][l] += cw.k_momentum[i * n + j] * dl;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
