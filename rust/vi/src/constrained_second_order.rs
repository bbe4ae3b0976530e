//! Exact second-order derivatives of a step with holonomic constraints (module `constrained`)
//! and its closing momentum projection (module `momentum_projection`), for models without
//! composite joints: the λ-contracted form DDP needs and the full tensors, as in module
//! `second_order` but through the whole constrained step.
//!
//! # The step as one system of equations
//! With `a` active constraints, the control points `Q = (q^0 = q_k, q^1, …, q^s)`, the end
//! point `q_e = Σ_α e_α q^α` ([`crate::Scheme::endpoint`]; `q^s` for Lobatto schemes, not a
//! control point for the midpoint rule) and `C_i(q) = Dh_i(q)`, the step solves for
//! `U = (z, Λ, ṽ, μ)` — the unknown control points `z = (q^1, …, q^s)`, the multipliers
//! `Λ = (λ^0, …, λ^{s−1})`, the projected end velocity `ṽ` and the projection's multipliers
//! `μ` —
//!
//! `R^β(Q, p_k, u) − C(q^β)ᵀ λ^β = 0` (`β = 0..s−1`, the DEL rows of module `constrained`),
//! `h(q^γ) = 0` (`γ = 1..s−1`), `h(q_e) = 0`,
//! `M(q_e) ṽ + C(q_e)ᵀ μ − P(Q, u) = 0`, `C(q_e) ṽ = 0`,
//!
//! the last two RATTLE's projection written as a saddle-point system: `μ = S⁻¹ C M⁻¹ P`
//! with `S = C M⁻¹ Cᵀ`, and `M ṽ = P − Cᵀ μ` the projected momentum. The outputs are
//! `q_{k+1} = q_e` and `p_{k+1} = P(Q, u) − C(q_e)ᵀ μ`. Only the step's active constraints (a
//! [`crate::ConstraintSchedule`]'s phase) have variables and rows, so the system's size follows
//! the phase (storage for all of them is made once).
//!
//! # The second-order implicit-function theorem
//! Write the variables as `V = (Q, q_e, Λ, ṽ, μ)`, an affine function of the inputs
//! `y = (q_k, p_k, u)` and the unknowns (`q_e` is a combination of `Q`, `p_k` and `u` enter
//! the rows linearly). With the equations `G(V, y) = 0`, the outputs `F(V, y)` and the
//! adjoint `ψ` of `G_Uᵀ ψ = F_Uᵀ λ`, the scalar `ℒ = λᵀ F − ψᵀ G` is stationary in `U`, so
//! `Σ_i λ_i ∂²f_i/∂y² = Wᵀ ∇²_V ℒ W` with `W = ∂V/∂y` (first-order sensitivities,
//! `U_y = −G_U⁻¹ G_y`). Splitting `ψ = (μ_R, ν, ρ, σ)` over the four row blocks,
//!
//! `ℒ = λ_q·q_e + (λ_p + ρ)·P − μ_R·R + Σ_β μ_R^β·C(q^β)ᵀλ^β − ν·h − (λ_p + ρ)·C(q_e)ᵀμ
//!  − ρ·M(q_e) ṽ − σ·C(q_e) ṽ`,
//!
//! whose Hessian has: the rows' part `(λ_p + ρ)·P − μ_R·R`, a weighted sum of DEL rows
//! (module `rows_hessian`); the impulses' third derivatives `Σ_i λ^β_i D³h_i(q^β)[μ_R^β]` and
//! cross terms `D²h_i(q^β) μ_R^β` with `λ^β_i`; the constraint rows' `−Σ_i ν_i D²h_i`; at the
//! end point `−Σ_i μ_i D³h_i(q_e)[λ_p + ρ]`, `−Σ_i σ_i D³h_i(q_e)[ṽ]` and
//! `−∂²(ρᵀ M(q) ṽ)/∂q²` (the λ-contracted second derivative of inverse dynamics at zero
//! velocity, less its gravity part), with the cross terms `−D²h_i(q_e)(λ_p + ρ)` (with `μ_i`),
//! `−Σ_i σ_i D²h_i(q_e)` and `−∂(M(q) ρ)/∂q` (with `ṽ`).
//!
//! # Cost and scope
//! Per prepared step: the step, the DEL Jacobian, the constraint gradients and Hessians at the
//! control points and the end, `M(q_e)` and `∂(M ṽ)/∂q`, one dense LU of the
//! `(s n + s m + n + m)`-square system and its `3n` solves (which give `A`, `B`). Per
//! contraction one transposed solve, the rows' Hessian, `(s + 2)·a` contracted third
//! derivatives of the constraints (O(d²) each for `d` columns on their points' paths), two
//! contracted second derivatives of inverse dynamics and one mass-matrix derivative, and the
//! projection `Wᵀ ∇²ℒ W`. Every scheme, schedules (a touchdown step is the same system with
//! its new constraints active), gravity, controls, damping and springs; kinematic joints,
//! mimic joints, body wrenches and composite joints are refused by the caller (module
//! `second_order`). Nothing allocates after the workspace exists.

use crate::constraints::ConstraintScratch;
use crate::del::assemble_jacobian;
use crate::dense::{gemm_nn, lu_factor, lu_factor_in, lu_solve, lu_solve_in, lu_solve_transposed_in, ColMajor, ColMajorMut};
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::point::PointState;
use crate::rows_hessian::RowsHessian;
use crate::second_order::FlowDerivatives;
use nalgebra::{DMatrix, DMatrixView, DMatrixViewMut};
use vidyn_system::StepInput;

/// Workspace of the constrained second order, for `n` coordinates, `s` intervals and `m`
/// constraints (module docs for the layouts of `U` and `V`).
#[derive(Clone, Debug)]
pub(crate) struct ConstrainedSecondOrder {
    n: usize,
    s: usize,
    m: usize,
    /// The constraints the prepared step imposes (`a` of them; slot `r` of `Λ`, `μ` and of
    /// their rows is constraint `order[r]`).
    order: Vec<usize>,
    /// Kinematics at the end point `q_e`, and `q_e`.
    end: PointState,
    q_end: Vec<f64>,
    scratch: ConstraintScratch,
    /// `(n,)` zeros (a velocity), the projected velocity `ṽ`, `λ_p + ρ`, a scratch row.
    zeros: Vec<f64>,
    velocity: Vec<f64>,
    weight: Vec<f64>,
    row: Vec<f64>,
    /// `((s+1)·m)` constraint gradients (rows `β·m + i`, `(n,)` each) and Hessians at the
    /// control points `β = 0..s−1` and (block `s`) at the end point.
    gradients: DMatrix<f64>,
    hessians: Vec<DMatrix<f64>>,
    /// `(n, (s+1)·n)` the momentum row's blocks `∂P/∂q^α`; `(s·n, s·n)` the DEL Jacobian
    /// `∂R/∂z` and `(s·n, n)` `∂R/∂q^0`.
    pq: DMatrix<f64>,
    del: DMatrix<f64>,
    del_start: DMatrix<f64>,
    /// `M(q_e)` and `T = ∂(M ṽ)/∂q` at the end point.
    mass: DMatrix<f64>,
    mass_rate: DMatrix<f64>,
    /// The `(N_U, N_U)` system `G_U` (then its LU) and pivots; `(N_U, 3n)` `−G_y`, then `U_y`
    /// (column-major with the prepared step's `N_U` as leading dimension; storage for all
    /// constraints).
    system: Vec<f64>,
    pivots: Vec<usize>,
    sensitivities: Vec<f64>,
    /// `(n_V, 3n)` `W = ∂V/∂y` and its transpose; `(n_V, n_V)` `∇²_V ℒ`; `(n_V, 3n)` its
    /// product with `W` (rows for all constraints; those past the prepared step's `n_V` zero).
    w: DMatrix<f64>,
    wt: DMatrix<f64>,
    hessian: DMatrix<f64>,
    product: DMatrix<f64>,
    /// `(N_U,)` the adjoint `ψ`; `((s+1)·n,)` the rows' weights; the rows' Hessian and its scratch.
    adjoint: Vec<f64>,
    omega: Vec<f64>,
    rows_hessian: DMatrix<f64>,
    rows: RowsHessian,
    /// `(n, n)` one block of `∇²ℒ` before it is placed.
    block: DMatrix<f64>,
}

/// Offsets of the blocks of `U` (rows and columns of `G_U`) and of `V` (module docs), for
/// `m` constraints in the system.
#[derive(Clone, Copy)]
struct Layout {
    n: usize,
    s: usize,
    m: usize,
}

impl Layout {
    /// `U`: `z` at 0, `Λ` (and the constraint rows `h`) at `s n`, `ṽ` (the projection's
    /// momentum rows) at `s n + s m`, `μ` (and the rows `C ṽ`) after it.
    fn u_lambda(self) -> usize {
        self.s * self.n
    }
    fn u_velocity(self) -> usize {
        self.u_lambda() + self.s * self.m
    }
    fn u_mu(self) -> usize {
        self.u_velocity() + self.n
    }
    fn unknowns(self) -> usize {
        self.u_mu() + self.m
    }
    /// `V`: `Q` at 0 (block `α` at `α n`), `q_e`, `Λ`, `ṽ`, `μ`.
    fn v_end(self) -> usize {
        (self.s + 1) * self.n
    }
    fn v_lambda(self) -> usize {
        self.v_end() + self.n
    }
    fn v_velocity(self) -> usize {
        self.v_lambda() + self.s * self.m
    }
    fn v_mu(self) -> usize {
        self.v_velocity() + self.n
    }
    fn variables(self) -> usize {
        self.v_mu() + self.m
    }
}

impl ConstrainedSecondOrder {
    pub(crate) fn new(n: usize, s: usize, m: usize) -> Self {
        let lay = Layout { n, s, m };
        let (nu, nv) = (lay.unknowns(), lay.variables());
        Self {
            n,
            s,
            m,
            order: Vec::with_capacity(m),
            end: PointState::new(n),
            q_end: vec![0.0; n],
            scratch: ConstraintScratch::new(n),
            zeros: vec![0.0; n],
            velocity: vec![0.0; n],
            weight: vec![0.0; n],
            row: vec![0.0; n],
            gradients: DMatrix::zeros((s + 1) * m, n),
            hessians: vec![DMatrix::zeros(n, n); (s + 1) * m],
            pq: DMatrix::zeros(n, (s + 1) * n),
            del: DMatrix::zeros(s * n, s * n),
            del_start: DMatrix::zeros(s * n, n),
            mass: DMatrix::zeros(n, n),
            mass_rate: DMatrix::zeros(n, n),
            system: vec![0.0; nu * nu],
            pivots: vec![0; nu],
            sensitivities: vec![0.0; nu * 3 * n],
            w: DMatrix::zeros(nv, 3 * n),
            wt: DMatrix::zeros(3 * n, nv),
            hessian: DMatrix::zeros(nv, nv),
            product: DMatrix::zeros(nv, 3 * n),
            adjoint: vec![0.0; nu],
            omega: vec![0.0; (s + 1) * n],
            rows_hessian: DMatrix::zeros((s + 1) * n, (s + 1) * n),
            rows: RowsHessian::new(n, s + 1),
            block: DMatrix::zeros(n, n),
        }
    }

    /// The layout of the prepared step's system (its active constraints).
    fn layout(&self) -> Layout {
        Layout { n: self.n, s: self.s, m: self.order.len() }
    }

    /// Solves the step from `at`, forms and factors `G_U`, and sets `W`, `A`, `B` and the next
    /// state in `out` (module docs). Leaves the points of `vi` at the solution. Returns the
    /// Newton iterations.
    pub(crate) fn prepare(&mut self, integ: &VariationalIntegrator, vi: &mut ViWorkspace, at: StepInput<'_>, out: &mut FlowDerivatives) -> Result<usize> {
        let (n, s, m) = (self.n, self.s, self.m);
        let (sc, dt, forces, model) = (integ.scheme(), integ.dt(), integ.forces(), &*integ.model);
        let iterations = integ.step(vi, at, &mut out.q_next, &mut out.p_next)?;
        let StepInput { k: step, q, .. } = at;
        let active = integ.active_constraints(step)?;
        self.order.clear();
        self.order.extend_from_slice(active);
        let lay = self.layout();
        let nu = lay.unknowns();
        let pts = &mut vi.points;
        pts.set(model, sc, dt, q, &vi.z, &[]);
        pts.update_hessians(model);
        assemble_jacobian(pts, sc, dt, forces, n, &mut self.del);
        for alpha in 0..=s {
            pts.del_block(sc, dt, forces, s, alpha, &mut self.pq.view_mut((0, alpha * n), (n, n)));
        }
        for beta in 0..s {
            pts.del_block(sc, dt, forces, beta, 0, &mut self.del_start.view_mut((beta * n, 0), (n, n)));
        }
        // the constraints' gradients and Hessians at q^0..q^{s−1} and at q_e
        sc.endpoint_from(q, &vi.z, &mut self.q_end);
        self.end.update_kinematics(model, pts.joint_placements(model), &self.q_end);
        for block in 0..=s {
            let st = if block < s { &pts.states[block] } else { &self.end };
            for &i in active {
                let con = &integ.constraints[i];
                con.gradient(model, st, &mut self.scratch, &mut self.row);
                self.gradients.row_mut(block * m + i).iter_mut().zip(&self.row).for_each(|(g, r)| *g = *r);
                let h = &mut self.hessians[block * m + i];
                h.fill(0.0);
                con.add_hessian(model, st, &mut self.scratch, 1.0, h);
            }
        }
        // M(q_e), ṽ = M⁻¹ p_{k+1} (the projected momentum) and T = ∂(M ṽ)/∂q
        let mass = vidyn_rbd::crba(model, &mut vi.rbd, &self.q_end)?;
        self.mass.copy_from(mass);
        self.block.copy_from(mass);
        if !lu_factor(&mut self.block, &mut self.pivots[..n]) {
            return Err(ViError::SingularJacobian { step });
        }
        self.velocity.copy_from_slice(&out.p_next);
        lu_solve(&self.block, &self.pivots[..n], &mut self.velocity);
        let rate = vidyn_rbd::mass_matrix_and_derivative::<ViError>(model, &mut vi.rbd, &self.q_end, &mut self.velocity, |_, _| Ok(()))?;
        self.mass_rate.copy_from(rate);
        self.assemble(integ, &vi.constraint.lambda, &vi.constraint.projection.mu);
        if !lu_factor_in(&mut self.system[..nu * nu], nu, &mut self.pivots[..nu]) {
            return Err(ViError::DegenerateConstraints { step });
        }
        for column in self.sensitivities[..nu * 3 * n].chunks_exact_mut(nu) {
            lu_solve_in(&self.system[..nu * nu], nu, &self.pivots[..nu], column);
        }
        self.sensitivities_to_variables(integ);
        // A, B: q_{k+1} = q_e, p_{k+1} = P − C(q_e)ᵀ μ
        let (w, cw) = (&self.w, sc.control_weight(s) * dt);
        for c in 0..3 * n {
            let (mat, col) = if c < 2 * n { (&mut out.a, c) } else { (&mut out.b, c - 2 * n) };
            for r in 0..n {
                mat[(r, col)] = w[(lay.v_end() + r, c)];
                let mut p: f64 = (0..(s + 1) * n).map(|k| self.pq[(r, k)] * w[(k, c)]).sum();
                for (slot, &i) in active.iter().enumerate() {
                    let mu = vi.constraint.projection.mu[i];
                    p -= mu * (0..n).map(|k| self.hessians[s * m + i][(r, k)] * w[(lay.v_end() + k, c)]).sum::<f64>();
                    p -= self.gradients[(s * m + i, r)] * w[(lay.v_mu() + slot, c)];
                }
                if c == 2 * n + r {
                    p += cw;
                }
                mat[(n + r, col)] = p;
            }
        }
        Ok(iterations)
    }

    /// `G_U` into `system` and `−G_y` into `sensitivities` (module docs), with the step's
    /// multipliers `lambda` `(s·m,)` and the projection's `mu` `(m,)`.
    fn assemble(&mut self, integ: &VariationalIntegrator, lambda: &[f64], mu: &[f64]) {
        let (n, s, m, lay) = (self.n, self.s, self.m, self.layout());
        let (sc, dt, a, nu) = (integ.scheme(), integ.dt(), self.order.len(), lay.unknowns());
        let mut g = DMatrixViewMut::from_slice(&mut self.system[..nu * nu], nu, nu);
        let mut gy = DMatrixViewMut::from_slice(&mut self.sensitivities[..nu * 3 * n], nu, 3 * n);
        g.fill(0.0);
        gy.fill(0.0);
        g.view_mut((0, 0), (s * n, s * n)).copy_from(&self.del);
        let e = |alpha: usize| sc.endpoint(alpha);
        // −G_y of the DEL rows: −∂R^β/∂q^0, −∂R^0/∂p_k = −1, −∂R^β/∂u
        gy.view_mut((0, 0), (s * n, n)).copy_from(&self.del_start);
        gy.view_mut((0, 0), (s * n, n)).neg_mut();
        for beta in 0..s {
            let cw = sc.control_weight(beta) * dt;
            for i in 0..n {
                gy[(beta * n + i, 2 * n + i)] = -cw;
            }
        }
        for i in 0..n {
            gy[(i, n + i)] = -1.0;
        }
        let (lam_row, vel_row, mu_row) = (lay.u_lambda(), lay.u_velocity(), lay.u_mu());
        for (slot, &i) in self.order.iter().enumerate() {
            for beta in 0..s {
                // the impulse −C(q^β)ᵀ λ^β: its column, and −λ^β_i D²h_i(q^β) on q^β
                let (grad, hess) = (self.gradients.row(beta * m + i), &self.hessians[beta * m + i]);
                let l = lambda[beta * m + i];
                for r in 0..n {
                    g[(beta * n + r, lam_row + beta * a + slot)] = -grad[r];
                    for c in 0..n {
                        if beta == 0 {
                            gy[(r, c)] += l * hess[(r, c)];
                        } else {
                            g[(beta * n + r, (beta - 1) * n + c)] -= l * hess[(r, c)];
                        }
                    }
                }
                // h(q^γ) at the interior points γ = β (rows of block β − 1)
                if beta >= 1 {
                    for c in 0..n {
                        g[(lam_row + (beta - 1) * a + slot, (beta - 1) * n + c)] = grad[c];
                    }
                }
            }
            // h(q_e) (the last block of constraint rows), and C(q_e) ṽ = 0
            let grad = self.gradients.row(s * m + i);
            integ.constraints[i].hessian_vector(&integ.model, &self.end, &mut self.scratch, &self.velocity, &mut self.row);
            for c in 0..n {
                for alpha in 0..=s {
                    let (ge, gv) = (e(alpha) * grad[c], e(alpha) * self.row[c]);
                    if alpha == 0 {
                        gy[(lam_row + (s - 1) * a + slot, c)] -= ge;
                        gy[(mu_row + slot, c)] -= gv;
                    } else {
                        g[(lam_row + (s - 1) * a + slot, (alpha - 1) * n + c)] += ge;
                        g[(mu_row + slot, (alpha - 1) * n + c)] += gv;
                    }
                }
                g[(mu_row + slot, vel_row + c)] = grad[c];
                g[(vel_row + c, mu_row + slot)] = grad[c];
            }
        }
        // the projection's momentum rows M(q_e) ṽ + C(q_e)ᵀ μ − P(Q, u)
        for r in 0..n {
            for c in 0..n {
                let mut d = self.mass_rate[(r, c)];
                for &i in &self.order {
                    d += mu[i] * self.hessians[s * m + i][(r, c)];
                }
                for alpha in 0..=s {
                    let x = e(alpha) * d - self.pq[(r, alpha * n + c)];
                    if alpha == 0 {
                        gy[(vel_row + r, c)] -= x;
                    } else {
                        g[(vel_row + r, (alpha - 1) * n + c)] += x;
                    }
                }
                g[(vel_row + r, vel_row + c)] = self.mass[(r, c)];
            }
            gy[(vel_row + r, 2 * n + r)] += sc.control_weight(s) * dt;
        }
    }
}

impl ConstrainedSecondOrder {
    /// `W = ∂V/∂y` and its transpose from `U_y` (module docs): `q^0 = q_k`, `q_e = Σ_α e_α q^α`.
    fn sensitivities_to_variables(&mut self, integ: &VariationalIntegrator) {
        let (n, s, lay) = (self.n, self.s, self.layout());
        let (sc, nu) = (integ.scheme(), lay.unknowns());
        let (w, uy) = (&mut self.w, DMatrixView::from_slice(&self.sensitivities[..nu * 3 * n], nu, 3 * n));
        w.fill(0.0);
        for i in 0..n {
            w[(i, i)] = 1.0;
        }
        w.view_mut((n, 0), (s * n, 3 * n)).copy_from(&uy.view((0, 0), (s * n, 3 * n)));
        let rest = nu - s * n;
        w.view_mut((lay.v_lambda(), 0), (rest, 3 * n)).copy_from(&uy.view((lay.u_lambda(), 0), (rest, 3 * n)));
        for c in 0..3 * n {
            for r in 0..n {
                w[(lay.v_end() + r, c)] = (0..=s).map(|alpha| sc.endpoint(alpha) * w[(alpha * n + r, c)]).sum();
            }
        }
        self.wt.tr_copy_from(&self.w);
    }

    /// `hmat = Σ_i λ_i ∂²f_i/∂y²` `(3n, 3n)` at the prepared step for the co-state `lam`
    /// `(2n,)` (module docs). `vi` holds the prepared step's points and multipliers.
    pub(crate) fn contract(&mut self, integ: &VariationalIntegrator, vi: &mut ViWorkspace, lam: &[f64], hmat: &mut DMatrix<f64>) -> Result<()> {
        let (n, s, m, lay) = (self.n, self.s, self.m, self.layout());
        let (sc, dt, model, a, nu) = (integ.scheme(), integ.dt(), &*integ.model, self.order.len(), lay.unknowns());
        let (lq, lp) = lam.split_at(n);
        let (lambda, mu) = (&vi.constraint.lambda, &vi.constraint.projection.mu);
        // the adjoint: G_Uᵀ ψ = F_Uᵀ λ
        let psi = &mut self.adjoint[..nu];
        psi.fill(0.0);
        for r in 0..n {
            // Σ_i μ_i D²h_i(q_e) λ_p, row r
            let mut curvature = 0.0;
            for &i in &self.order {
                curvature += mu[i] * (0..n).map(|k| self.hessians[s * m + i][(r, k)] * lp[k]).sum::<f64>();
            }
            for alpha in 1..=s {
                let pz: f64 = (0..n).map(|k| self.pq[(k, alpha * n + r)] * lp[k]).sum();
                psi[(alpha - 1) * n + r] = sc.endpoint(alpha) * (lq[r] - curvature) + pz;
            }
        }
        for (slot, &i) in self.order.iter().enumerate() {
            psi[lay.u_mu() + slot] = -(0..n).map(|k| self.gradients[(s * m + i, k)] * lp[k]).sum::<f64>();
        }
        lu_solve_transposed_in(&self.system[..nu * nu], nu, &self.pivots[..nu], psi);
        let (rho, sigma) = (&psi[lay.u_velocity()..lay.u_mu()], &psi[lay.u_mu()..]);
        for (wt, (l, r)) in self.weight.iter_mut().zip(lp.iter().zip(rho)) {
            *wt = l + r;
        }
        // the rows' part: weights −μ_R on the DEL rows, λ_p + ρ on the momentum row
        for (o, x) in self.omega.iter_mut().zip(&psi[..s * n]) {
            *o = -x;
        }
        self.omega[s * n..].copy_from_slice(&self.weight);
        let hess = &mut self.hessian;
        hess.fill(0.0);
        self.rows.fill(model, &vi.points, sc, dt, &self.omega, &mut self.rows_hessian);
        hess.view_mut((0, 0), ((s + 1) * n, (s + 1) * n)).copy_from(&self.rows_hessian);
        let pts = &vi.points;
        for (slot, &i) in self.order.iter().enumerate() {
            let con = &integ.constraints[i];
            // the impulses Σ_β λ^β_i μ_R^β·C_i(q^β)
            for beta in 0..s {
                let adj = &psi[beta * n..(beta + 1) * n];
                self.block.fill(0.0);
                con.add_third_contracted(model, &pts.states[beta], &mut self.scratch, lambda[beta * m + i], adj, &mut self.block);
                let mut v = hess.view_mut((beta * n, beta * n), (n, n));
                v += &self.block;
                let col = lay.v_lambda() + beta * a + slot;
                con.hessian_vector(model, &pts.states[beta], &mut self.scratch, adj, &mut self.row);
                for (r, x) in self.row.iter().enumerate() {
                    hess[(beta * n + r, col)] += x;
                    hess[(col, beta * n + r)] += x;
                }
            }
            // the constraint rows −ν·h at the interior points and the end
            for gamma in 1..=s {
                let (at, h) = if gamma < s { (gamma * n, &self.hessians[gamma * m + i]) } else { (lay.v_end(), &self.hessians[s * m + i]) };
                let weight = psi[lay.u_lambda() + (gamma - 1) * a + slot];
                hess.view_mut((at, at), (n, n)).zip_apply(h, |x, y| *x -= weight * y);
            }
            // −(λ_p + ρ)·C_i(q_e)ᵀ μ_i and −σ_i C_i(q_e) ṽ at the end
            let (e0, ev, em) = (lay.v_end(), lay.v_velocity(), lay.v_mu() + slot);
            self.block.fill(0.0);
            con.add_third_contracted(model, &self.end, &mut self.scratch, -mu[i], &self.weight, &mut self.block);
            con.add_third_contracted(model, &self.end, &mut self.scratch, -sigma[slot], &self.velocity, &mut self.block);
            let mut v = hess.view_mut((e0, e0), (n, n));
            v += &self.block;
            con.hessian_vector(model, &self.end, &mut self.scratch, &self.weight, &mut self.row);
            let h = &self.hessians[s * m + i];
            for r in 0..n {
                hess[(e0 + r, em)] -= self.row[r];
                hess[(em, e0 + r)] -= self.row[r];
                for c in 0..n {
                    hess[(e0 + r, ev + c)] -= sigma[slot] * h[(r, c)];
                    hess[(ev + c, e0 + r)] -= sigma[slot] * h[(r, c)];
                }
            }
        }
        // −ρ·M(q_e) ṽ: its second derivative in q (inverse dynamics at zero velocity less
        // gravity) and the cross term ∂(M ρ)/∂q with ṽ
        let (e0, ev) = (lay.v_end(), lay.v_velocity());
        let with = vidyn_rbd::rnea_second_order_contracted(model, &mut vi.rbd, &self.q_end, &self.zeros, &self.velocity, rho, None)?;
        hess.view_mut((e0, e0), (n, n)).zip_apply(with.d2tau_dq2, |x, y| *x -= y);
        let gravity = vidyn_rbd::rnea_second_order_contracted(model, &mut vi.rbd, &self.q_end, &self.zeros, &self.zeros, rho, None)?;
        hess.view_mut((e0, e0), (n, n)).zip_apply(gravity.d2tau_dq2, |x, y| *x += y);
        self.row.copy_from_slice(rho);
        let rate = vidyn_rbd::mass_matrix_and_derivative::<ViError>(model, &mut vi.rbd, &self.q_end, &mut self.row, |_, _| Ok(()))?;
        for j in 0..n {
            for l in 0..n {
                hess[(ev + j, e0 + l)] -= rate[(j, l)];
                hess[(e0 + l, ev + j)] -= rate[(j, l)];
            }
        }
        // H = Wᵀ (∇²ℒ W) over the prepared step's variables (leading dimension: all of them)
        let (nv, ld, m3) = (lay.variables(), self.hessian.nrows(), 3 * n);
        self.product.fill(0.0);
        gemm_nn(nv, m3, nv, ColMajor(self.hessian.as_slice(), ld), ColMajor(self.w.as_slice(), ld), ColMajorMut(self.product.as_mut_slice(), ld));
        hmat.fill(0.0);
        gemm_nn(m3, m3, nv, ColMajor(self.wt.as_slice(), m3), ColMajor(self.product.as_slice(), ld), ColMajorMut(hmat.as_mut_slice(), m3));
        Ok(())
    }
}
