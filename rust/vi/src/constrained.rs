//! The constrained step of Johnson (2012) §4.5 (digest §2.3–2.4) on top of the O(n) Newton
//! factorisation, for every scheme, with the constraint rows of Fan, Schultz & Murphey (2018)
//! eq. 6. With `m` constraints and the control points `q^α` of step `k` (`q^0 = q_k`, module
//! `scheme`), the unknowns are `z = (q^1, …, q^s)` and multipliers `λ^0, …, λ^{s−1}`:
//!
//! `r^0 = p_k + D_0 L_d + Q^0 − Dh(q_k)ᵀ λ^0 = 0`,
//! `r^β = D_β L_d + Q^β − Dh(q^β)ᵀ λ^β = 0` (`β = 1..s−1`),
//! `h(q^γ) = 0` (`γ = 1..s`, `q^s = q_{k+1}`), `p_{k+1} = D_s L_d + Q^s`,
//!
//! so that the constraints hold at every knot to solver tolerance (no drift, no stabilisation
//! parameter); the end momentum is then projected as RATTLE does (module
//! `momentum_projection`: `p_{k+1} − Dh(q_{k+1})ᵀ μ_{k+1}`, a motion the constraints allow).
//! For the one-interval schemes (midpoint, trapezoid) this is Johnson's step: one multiplier
//! block at `q_k` and `h(q_{k+1}) = 0` with `q_{k+1} = e_0 q_k + e_1 z`
//! ([`crate::Scheme::endpoint`]; for the midpoint rule the control point `z = q̄` is not
//! `q_{k+1}`, and only the end is constrained).
//!
//! # Where the constraints are imposed within a step, and why at every control point
//! For `s ≥ 2` (Lobatto schemes, whose control points are the step variables) `h` holds at
//! every control point after the first and each interior row carries its own multiplier:
//! the Galerkin discretisation of the augmented action `∫ L − λᵀh dt` with the Lobatto
//! quadrature at the control points, Fan et al. 2018 eq. 6a–6d (their `A^{k,α} λ^{k,α}` on rows
//! `α = 0..s−1`, `h` at `α = 1..s`), which is the Lobatto IIIA–IIIB pair for constrained
//! mechanical systems (Jay 1996, superconvergent of order `2s` in `q` and `p`). Constraining
//! only the end point instead, with `Dh(q_k)ᵀλ` on the first row alone, is the unconstrained
//! discrete Lagrangian restricted to the constraint set: its interior curve leaves the set by
//! `O(Δt²)`, so it differs from the constrained exact discrete Lagrangian by `O(Δt³)` and the
//! scheme is of order 2 whatever `s` (a free particle on a circle: the interior stationarity
//! makes the Simpson curve the chord, and the step is RATTLE's, of order 2). With the interior
//! constraints the measured orders are `2s` (4 for Simpson, 6 for Lobatto `s = 3`, on a
//! pendulum in Cartesian coordinates; tests).
//!
//! # Newton direction
//! The KKT system `[[J − H, −Ĉᵀ], [C_2, 0]] (δz, δΛ) = −(r, h)`: `J` the DEL Jacobian (the
//! O(n) factorisation of B.1/B.2), `Ĉᵀ` the `s·a` columns `Dh_i(q^β)ᵀ` in row block `β`
//! (`a` active constraints; `Dh(q_k)` fixed over the step), `C_2` the rows `Dh_i(q^{γ+1})` on
//! unknown block `γ` (the end row scaled by `e_s`), and `H = Σ_i λ^β_i D²h_i(q^β)` on the
//! interior diagonal blocks (the interior impulses move with their points; `H = 0` for
//! `s = 1`). First the system with `H = 0` by its Schur complement: `w = J⁻¹ f_1`,
//! `K = J⁻¹ Ĉᵀ` (`s·a` solves), `(C_2 K) δΛ = f_2 − C_2 w` (LU, `s·a` square), `δz = w + K δΛ`.
//! `H` is then added exactly by the Sherman–Morrison–Woodbury formula: with `H = U Vᵀ`, `U`
//! the `r` non-zero columns of the `H_β` (the dofs on the constrained points' paths) and `V`
//! the unit vectors selecting them from `δz`, the solution is `y = ŷ + W t`, where `ŷ` and the
//! columns `W` solve the `H = 0` system for `(f_1, f_2)` and `(U, 0)`, and
//! `(1 − Vᵀ W_z) t = Vᵀ ŷ_z` (`r × r` LU, `r ≤ (s − 1) n`). So Newton converges
//! quadratically and the linearisation is exact, with `s·a + r` solves per factorisation.
//! `C_2 K` is singular when the constraints are redundant (e.g. three point-on-plane
//! constraints on a planar loop), which is reported as an error rather than regularised.
//!
//! With a [`crate::ConstraintSchedule`] only the constraints of the step's phase are imposed:
//! the others have no rows (`λ_i = 0`, and `h_i` is not asked of the step's points), and the
//! Schur complement is that of the active ones. A touchdown step imposes them at its interior
//! points too, so its impulse at `q_k` brings the point onto its foothold by `q^1` (module
//! `schedule`).
//!
//! # Linearisation
//! For an input direction `x` the same elimination applies to the right-hand side
//! `f_1 = −∂R/∂x`, `f_2 = −∂h/∂x`: besides the unconstrained terms, `∂r^0/∂q_k` gains
//! `−Σ_i λ^0_i D²h_i(q_k)`, and the end constraint `∂h(q_{k+1})/∂q_k = e_0 Dh(q_{k+1})` (zero
//! for Lobatto schemes, whose constrained points are all unknowns). The momentum row
//! `p_{k+1}` has no multiplier term, so `δp_{k+1} = ∂P/∂x + P_z δz`, where the B.1 sweep
//! returns `P_z w`, `P_z K` and `P_z W` alongside the solutions. The reported impulse of the
//! step is `Σ_β λ^β + μ_{k+1}` (module `momentum_projection`), so its Jacobian sums the blocks'.

use crate::constraints::{Constraint, ConstraintScratch};
use crate::dense::lu_solve_in;
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::momentum_projection::ProjectionWork;
use crate::newton_direction::LANES;
use crate::point::PointState;
use nalgebra::{DMatrix, DMatrixViewMut};
use vidyn_rbd::Model;

mod kkt;
pub(crate) use kkt::{row, KktFactors, LaneBuffers};

/// Workspace of the constrained step (empty when the integrator has no constraints). Sizes
/// for `m` constraints, `n` coordinates and `s` intervals; a block index `β` (or `γ`) runs over
/// `0..s` (module docs).
#[derive(Clone, Debug)]
pub(crate) struct ConstraintWork {
    /// Kinematics at `q_{k+1}` (not a control point of the midpoint rule).
    end_state: PointState,
    q_end: Vec<f64>,
    /// The KKT factors: the active constraints, `C_1`, `C_2`, the Hessians, `K`, `W` and the
    /// LUs (module `kkt`).
    pub(crate) kkt: KktFactors,
    /// `(s·m,)` `h` at the control points `1..s` (entry `γ·m + i`), the multipliers `λ^β`
    /// (entry `β·m + i`), their value at the start of a line search, the step (zero on
    /// inactive constraints).
    pub(crate) h: Vec<f64>,
    pub(crate) lambda: Vec<f64>,
    /// `(m,)` the step's reported contact impulse `Σ_β λ^β + μ_{k+1}` (module
    /// `momentum_projection`), and that projection's scratch.
    pub(crate) impulse: Vec<f64>,
    pub(crate) projection: ProjectionWork,
    lambda_start: Vec<f64>,
    /// `(s·m,)` where the next step's Newton solve starts `λ` when `guessed`
    /// ([`ViWorkspace::guess_multipliers`]; one step only), else at zero.
    lambda_guess: Vec<f64>,
    guessed: bool,
    dlambda: Vec<f64>,
    /// `(m,)` a right-hand side of the knots' `C M⁻¹ Cᵀ`, `(n,)` a gradient row.
    pub(crate) compact: Vec<f64>,
    pub(crate) rhs: Vec<f64>,
    pub(crate) scratch: ConstraintScratch,
    /// `(m, 3n)` the multipliers' derivatives `∂(Σ_β λ^β + μ)/∂(q_k, p_k, u_k)` of the last
    /// linearised step (tangent coordinates; zero rows for inactive constraints).
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
    /// Scratch for `m` constraints on a DEL model of `n` coordinates and a scheme of `s`
    /// intervals, with joint placements `placements` (nothing without constraints).
    pub(crate) fn new(n: usize, s: usize, m: usize, placements: &[vidyn_spatial::Se3]) -> Self {
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
            kkt: KktFactors::new(n, s, m),
            h: vec![0.0; s * m],
            lambda: vec![0.0; s * m],
            impulse: vec![0.0; m],
            projection: ProjectionWork::new(n, m),
            lambda_start: vec![0.0; s * m],
            lambda_guess: vec![0.0; s * m],
            guessed: false,
            dlambda: vec![0.0; s * m],
            compact: vec![0.0; m],
            rhs: vec![0.0; nm],
            scratch: ConstraintScratch::new(nm),
            lambda_jacobian: DMatrix::zeros(m, 3 * nm),
        }
    }
}

/// The constraints of a step on the bodies of its DEL model (the integrator's, or the centred
/// expansion's of module `chart_linearize`): the rows and Hessians the KKT factors need.
pub(crate) struct ConstraintSet<'a> {
    pub model: &'a Model,
    pub constraints: &'a [Constraint],
    /// `s`, the scheme's number of intervals.
    pub s: usize,
}

impl ConstraintSet<'_> {
    /// Rows `i ∈ active` of `out` = `scale · Dh_i` at the kinematics `st` (`row`: scratch).
    pub(crate) fn gradient_rows(
        &self,
        active: &[usize],
        st: &PointState,
        scratch: &mut ConstraintScratch,
        out: &mut DMatrixViewMut<'_, f64>,
        scale: f64,
        row: &mut [f64],
    ) {
        Constraint::for_each_gradient(self.constraints, active, self.model, st, scratch, row, |k, g| {
            for (j, g) in g.iter().enumerate() {
                out[(active[k], j)] = scale * g;
            }
        });
    }

    /// The interior rows of `C_2` (`γ·m + i`, `Dh_i(q^{γ+1})`) at the control points `states`
    /// (`s + 1` of them) for the active constraints of `kkt`, and their values into `h`
    /// (`(s·m,)`); returns `max |h|` over them (0 for `s = 1`).
    pub(crate) fn interior_rows(&self, kkt: &mut KktFactors, states: &[PointState], scratch: &mut ConstraintScratch, h: &mut [f64], row: &mut [f64]) -> f64 {
        let m = self.constraints.len();
        let mut hmax = 0.0_f64;
        for g in 0..self.s - 1 {
            let st = &states[g + 1];
            for &i in &kkt.active {
                let hi = self.constraints[i].value(st);
                h[g * m + i] = hi;
                hmax = if hi.is_nan() || hmax.is_nan() { f64::NAN } else { hmax.max(hi.abs()) };
            }
            self.gradient_rows(&kkt.active, st, scratch, &mut kkt.c2.rows_mut(g * m, m), 1.0, row);
        }
        hmax
    }

    /// The interior Hessians `H_β = Σ_i λ^β_i D²h_i(q^β)` (`β = 1..s−1`) of `kkt` at the control
    /// points `states`, multipliers `lambda` (`(s·m,)`).
    pub(crate) fn interior_hessians(&self, kkt: &mut KktFactors, states: &[PointState], scratch: &mut ConstraintScratch, lambda: &[f64]) {
        let m = self.constraints.len();
        let KktFactors { active, interior, .. } = kkt;
        for (beta, h) in (1..self.s).zip(interior.iter_mut()) {
            h.as_mut_slice().fill(0.0);
            Constraint::add_weighted_hessians(self.constraints, active, self.model, &states[beta], scratch, |i| lambda[beta * m + i], h);
        }
    }
}

impl ViWorkspace {
    /// Starts the multipliers of the next constrained step solved in this workspace at
    /// `lambda` (`(s·m,)`, block `β` the multipliers `λ^β` of row block `β`, module
    /// `constrained`; the rows a step does not impose are ignored) instead of zero: the
    /// multipliers a solve of the same step found before let a solve that starts at its
    /// solution stop at once. Used by one step, the next (whichever predictor it starts from);
    /// ignored when `lambda` has not `s·m` entries.
    pub fn guess_multipliers(&mut self, lambda: &[f64]) {
        let cw = &mut self.constraint;
        if lambda.len() == cw.lambda_guess.len() && !lambda.is_empty() {
            cw.lambda_guess.copy_from_slice(lambda);
            cw.guessed = true;
        }
    }
}

impl VariationalIntegrator {
    /// The multipliers `λ` `(s·m,)` and impulse `(m,)` that the solve of step `step` found
    /// (kept with it, module `solved`) back into `ws`, with the step's active constraints, as
    /// that solve left them.
    pub(crate) fn restore_multipliers(&self, ws: &mut ViWorkspace, step: usize, lambda: &[f64], impulse: &[f64]) -> crate::Result<()> {
        let cw = &mut ws.constraint;
        cw.kkt.active.clear();
        cw.kkt.active.extend_from_slice(self.active_constraints(step)?);
        cw.lambda.copy_from_slice(lambda);
        cw.impulse.copy_from_slice(impulse);
        Ok(())
    }

    /// The integrator's constraints on its DEL model.
    fn constraint_set(&self) -> ConstraintSet<'_> {
        ConstraintSet { model: &self.model, constraints: &self.constraints, s: self.scheme.s }
    }

    /// The constraints of step `step` become the active ones, `C_1 = Dh(q_k)` from the
    /// kinematics of control point 0 (`= q_k`, set by the last `points.set`), and `λ = 0`, or
    /// the guess of [`ViWorkspace::guess_multipliers`] on the active rows (which it uses up).
    /// The step must be covered by the schedule ([`Self::active_constraints`]).
    pub(crate) fn begin_constrained_step(&self, ws: &mut ViWorkspace, step: usize) -> crate::Result<()> {
        let m = self.constraints.len();
        let cw = &mut ws.constraint;
        let kkt = &mut cw.kkt;
        kkt.active.clear();
        kkt.active.extend_from_slice(self.active_constraints(step)?);
        self.constraint_set().gradient_rows(&kkt.active, &ws.points.states[0], &mut cw.scratch, &mut kkt.c1.rows_mut(0, m), 1.0, &mut cw.rhs);
        cw.lambda.fill(0.0);
        if std::mem::take(&mut cw.guessed) {
            for beta in 0..self.scheme.s {
                for &i in &kkt.active {
                    cw.lambda[beta * m + i] = cw.lambda_guess[beta * m + i];
                }
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
        let ViWorkspace { constraint: cw, points, chart, .. } = ws;
        let q = if charted { chart.coordinates() } else { q };
        cw.end_state.update_kinematics(&self.model, points.joint_placements(&self.model), q);
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
    /// impulse `Σ_β λ^β + μ_{k+1}`, of which `−Dh(q_k)ᵀ λ^0` acts at its start, `−Dh(q^β)ᵀ λ^β`
    /// at its interior control points (`s ≥ 2`, module `constrained`) and
    /// `−Dh(q_{k+1})ᵀ μ_{k+1}` (RATTLE's momentum projection, module `momentum_projection`) at
    /// its end; zero on the constraints the step does not impose.
    #[must_use]
    pub fn multipliers<'a>(&self, ws: &'a ViWorkspace) -> &'a [f64] {
        &ws.constraint.impulse
    }

    /// The derivatives `∂(Σ_β λ^β + μ_{k+1})/∂(q_k, p_k, u_k)` `(m, 3n)` of the multipliers of the last step
    /// linearised with `ws` ([`Self::linearize`]), in the tangent coordinates of `A`, `B`
    /// (`δq` as `model.difference` with composite joints); zero rows for the constraints the
    /// step does not impose. What costs on contact forces (friction cones, unilateral
    /// contacts) need: the mean force of a point contact is `−λ/Δt`.
    #[must_use]
    pub fn multiplier_jacobian<'a>(&self, ws: &'a ViWorkspace) -> &'a DMatrix<f64> {
        &ws.constraint.lambda_jacobian
    }

    /// `h` at the constrained points of the current iterate (`ws.z`, the points set in
    /// `ws.points`): `q_{k+1}` and, for `s ≥ 2`, the interior control points, whose gradients
    /// (rows `γ·m + i` of `C_2`, also the interior impulses' columns) it sets too. Returns
    /// `max |h|`.
    pub(crate) fn step_constraint_values(&self, ws: &mut ViWorkspace, q: &[f64]) -> f64 {
        let (s, m) = (self.scheme.s, self.constraints.len());
        let ViWorkspace { constraint: cw, points, z, .. } = ws;
        self.scheme.endpoint_from(q, z, &mut cw.q_end);
        // in the step's chart with composite joints (module `chart_step`)
        cw.end_state.update_kinematics(&self.model, points.joint_placements(&self.model), &cw.q_end);
        let mut hmax = 0.0_f64;
        let end = (s - 1) * m;
        for &i in &cw.kkt.active {
            let hi = self.constraints[i].value(&cw.end_state);
            cw.h[end + i] = hi;
            hmax = if hi.is_nan() { f64::NAN } else { hmax.max(hi.abs()) };
        }
        if s > 1 {
            let interior = self.constraint_set().interior_rows(&mut cw.kkt, &points.states, &mut cw.scratch, &mut cw.h, &mut cw.rhs);
            hmax = if interior.is_nan() || hmax.is_nan() { f64::NAN } else { hmax.max(interior) };
        }
        hmax
    }

    /// The constraint impulses on the DEL rows: `r^0 −= C_1ᵀ λ^0` and, for `s ≥ 2`,
    /// `r^β −= Dh(q^β)ᵀ λ^β` on the interior rows (gradients of the last
    /// [`Self::step_constraint_values`]).
    pub(crate) fn add_constraint_impulse(&self, ws: &ViWorkspace, r: &mut [f64]) {
        let (n, m) = (self.n(), self.constraints.len());
        let (cw, kkt) = (&ws.constraint, &ws.constraint.kkt);
        for &i in &kkt.active {
            let l = cw.lambda[i];
            for (rj, c) in r[..n].iter_mut().zip(row(&kkt.c1, i)) {
                *rj -= c * l;
            }
        }
        for beta in 1..self.scheme.s {
            for &i in &kkt.active {
                let l = cw.lambda[beta * m + i];
                for (rj, c) in r[beta * n..(beta + 1) * n].iter_mut().zip(row(&kkt.c2, (beta - 1) * m + i)) {
                    *rj -= c * l;
                }
            }
        }
    }

    /// The factors of the KKT system at the current factorisation of `J` (module docs, module
    /// `kkt`): the end rows of `C_2`, the interior Hessians, `K` (and the momentum rows
    /// `with_momentum`), `W`; `keep_k`: `K` from the last call still holds
    /// ([`KktFactors::factor`]). Returns `false` when the system is singular (redundant or
    /// degenerate constraints).
    fn factor_kkt(&self, ws: &mut ViWorkspace, with_momentum: bool, keep_k: bool) -> bool {
        let (s, m) = (self.scheme.s, self.constraints.len());
        let (sc, dt) = (&self.scheme, self.dt);
        let set = self.constraint_set();
        let ViWorkspace { constraint: cw, points, newton, lane_rhs, lane_sol, lane_momentum, .. } = ws;
        let kkt = &mut cw.kkt;
        set.gradient_rows(&kkt.active, &cw.end_state, &mut cw.scratch, &mut kkt.c2.rows_mut((s - 1) * m, m), sc.endpoint(s), &mut cw.rhs);
        set.interior_hessians(kkt, &points.states, &mut cw.scratch, &cw.lambda);
        newton.ensure_lanes();
        let mut buf = LaneBuffers { rhs: lane_rhs, sol: lane_sol, momentum: with_momentum.then_some(&mut lane_momentum[..]), centre: None };
        kkt.factor(&mut buf, &self.prescribed, keep_k, |b| newton.solve_lanes(&self.model, sc, dt, &self.forces, b.rhs, b.sol, b.momentum.as_deref_mut(), None))
    }

    /// Turns the unconstrained direction `dz = −J⁻¹ r` (factorisation current) into the KKT
    /// direction and sets `δλ` (module docs). `false` when the KKT system is singular.
    /// `reused`: the factorisation of `J` is the one the step's previous direction used (a
    /// simplified-Newton iteration); with one interval `K = J⁻¹ C_1ᵀ` is then that
    /// direction's too (`C_1` is fixed over the step), and only `C_2 K` is formed again: on
    /// ANYmal's walk a third of the rollouts' instructions went to recomputing it.
    pub(crate) fn constrain_direction(&self, ws: &mut ViWorkspace, dz: &mut [f64], reused: bool) -> bool {
        if !self.factor_kkt(ws, false, reused && self.scheme.s == 1) {
            return false;
        }
        let m = self.constraints.len();
        let cw = &mut ws.constraint;
        let kkt = &mut cw.kkt;
        let (a, big) = (kkt.active.len(), kkt.size());
        for gr in 0..big {
            kkt.compact[gr] = -cw.h[(gr / a) * m + kkt.active[gr % a]];
        }
        kkt.solve_one(dz);
        for bc in 0..big {
            cw.dlambda[(bc / a) * m + kkt.active[bc % a]] = kkt.compact[bc];
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
    /// momentum row current): the KKT factors of [`Self::factor_kkt`] with their momentum rows
    /// and `Σ λ^0_i D²h_i(q_k)`.
    pub(crate) fn prepare_constrained_linearization(&self, ws: &mut ViWorkspace) -> bool {
        let ok = self.factor_kkt(ws, true, false);
        let cw = &mut ws.constraint;
        let kkt = &mut cw.kkt;
        kkt.hessian.as_mut_slice().fill(0.0);
        cw.lambda_jacobian.as_mut_slice().fill(0.0);
        let lambda = &cw.lambda;
        Constraint::add_weighted_hessians(&self.constraints, &kkt.active, &self.model, &ws.points.states[0], &mut cw.scratch, |i| lambda[i], &mut kkt.hessian);
        ok
    }

    /// Adds the constraint terms of the `LANES` right-hand sides starting at input column
    /// `c0` (`x = (q_k, p_k, u)`): `f_1 += Σλ^0 D²h(q_k) e_c` for the `q_k` columns (row block
    /// 0; the interior impulses move with the unknowns only).
    pub(crate) fn constrained_rhs(&self, ws: &mut ViWorkspace, c0: usize, lanes: usize) {
        let n = self.n();
        for l in 0..lanes {
            let c = c0 + l;
            if c < n {
                for j in 0..n {
                    ws.lane_rhs[j][l] += ws.constraint.kkt.hessian[(j, c)];
                }
            }
        }
    }

    /// Completes the `LANES` solutions `w = J⁻¹ f_1` (and `P_z w`) of the input columns from
    /// `c0` into the constrained ones (module docs, module `kkt`), with `f_2 = −e_0
    /// Dh(q_{k+1}) e_c` on the end rows for the `q_k` columns (zero for Lobatto schemes);
    /// `Σ_β δλ^β` is column `c` of the multipliers' Jacobian.
    pub(crate) fn constrained_solution(&self, ws: &mut ViWorkspace, c0: usize, lanes: usize) {
        let (n, s, m) = (self.n(), self.scheme.s, self.constraints.len());
        // the end rows are C_2 = e_s Dh(q_{k+1}), so e_0 Dh(q_{k+1}) e_c = (e_0 / e_s) C_2[·, c]
        let ratio = self.scheme.endpoint(0) / self.scheme.endpoint(s);
        let ViWorkspace { constraint: cw, lane_rhs, lane_sol, lane_momentum, .. } = ws;
        let kkt = &mut cw.kkt;
        let a = kkt.active.len();
        let mut buf = LaneBuffers { rhs: lane_rhs, sol: lane_sol, momentum: Some(&mut lane_momentum[..]), centre: None };
        for gr in 0..kkt.size() {
            let (g, i) = (gr / a, kkt.active[gr % a]);
            for l in 0..LANES {
                let c = c0 + l;
                kkt.lane_compact[gr][l] = if l < lanes && c < n && g == s - 1 { -ratio * kkt.c2[(g * m + i, c)] } else { 0.0 };
            }
        }
        kkt.solve_lanes(&mut buf);
        for l in 0..lanes {
            for (r, &i) in kkt.active.iter().enumerate() {
                let mut dl = kkt.lane_compact[r][l];
                for beta in 1..s {
                    dl += kkt.lane_compact[beta * a + r][l];
                }
                cw.lambda_jacobian[(i, c0 + l)] = dl;
            }
        }
    }
}

#[cfg(test)]
mod tests;
