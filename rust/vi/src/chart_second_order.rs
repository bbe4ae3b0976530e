//! Exact second-order derivatives of a step on the Lie group (models with free-flyer,
//! spherical or planar joints, module `chart_step`): the λ-contracted form DDP needs and the
//! full tensors, in the tangent coordinates of the first-order linearisation (module
//! `chart_linearize`). Exact to rounding.
//!
//! # Which second derivative
//! States move by `x ⊕ δx = (q ⊕ δq, p + δp)` (`integrate`, right-trivialised, Pinocchio's
//! and crocoddyl's convention) and are compared by its inverse `⊖` (`difference`). At the
//! nominal `(x̄, ū)` with next state `x̄' = f(x̄, ū)`, the step in tangent coordinates is
//! `F(w) = f(x̄ ⊕ (δq, δp), ū + δu) ⊖ x̄'`, `w = (δq, δp, δu)` (`3n`), the map DDP on a
//! manifold expands (crocoddyl's `SolverDDP` writes the value function as `V(x̄' ⊕ Δ)`); its
//! second-order term is `H = ∇²(λᵀF)(0)` with `λ = V_x`, split into `hxx`, `hxu`, `huu`; the
//! full tensors are `∇²F_i(0)`.
//!
//! # The step in one fixed chart
//! Fix the chart centred at the nominal start `c = q̄_k` and write the step's variables as in
//! module `chart_linearize`: `X_0 = c ∘ τ(η)`, the control points `X_0 ∘ τ(θ^α)` with chart
//! coordinates `X^α = θ^α` relative to `X_0` (`θ^0 = 0` on composite joints; 1-dof joints
//! carry their own coordinate). The discrete Lagrangian `L̂(η, X)` is that of the centred
//! expansion ([`vidyn_rbd::CentredExpansion`]) with its centre joints held at `η` over the step,
//! a fixed-chart Lagrangian whose rows `row_x` (step variable `x = 0..s`, all `N = n + n_c`
//! coordinates) and their derivatives the fixed-chart machinery gives. Moving `X_0` by a right
//! perturbation `ξ` with the other step variables fixed on the group moves `η` by
//! `J(η)⁻¹ ξ` and `X^x` by `−S(X^x) J(0)⁻¹ ξ`, so at any `η` the step's first row on a
//! composite joint is (interior rows vanishing at a solution; `L̂_η = Σ_x row_{x,η}`)
//!
//! `R_0^c = J(0)ᵀ p_k + J(0)ᵀ J(η)⁻ᵀ L̂_η + Σ_α w_α Δt S(θ^α)ᵀ J(0)ᵀ u − S(y_s)ᵀ P = 0`,
//!
//! `P = row_{s,c}` the chart end momentum and `y_s = Σ_α endpoint[α] X^α` the end's chart
//! coordinates; at `η = 0` it is the row of `chart_linearize`. The other rows are the
//! fixed-chart ones on the chart coordinates (1-dof start rows with `p_k`, interior rows),
//! controls entering as `u_θ = J(0)ᵀ u`. The outputs are `q' ⊖ q̄' = log(τ(ȳ_s)⁻¹ τ(η) τ(y_s))`
//! on composite joints (`y_s` on 1-dof ones, less the nominal) and `p' = J(y_s)⁻ᵀ P` (`P`).
//! The input is `η = ι(δq)`, `τ(ι(δq)) = exp(δq)` on composite joints.
//!
//! # The second-order implicit-function theorem
//! With the unknowns `Z = (X^1, …, X^s)` solving `R = 0`, the adjoint `μ` of
//! `R_Zᵀ μ = F_Zᵀ λ` makes `ℒ = λᵀF − μᵀR` stationary in `Z`, so
//! `H = Wᵀ ∇²ℒ W + ℒ_η · ι''`, with `W = ∂(η, X, u)/∂w` (the first-order sensitivities,
//! `Z_w = −R_Z⁻¹ R_w`) and `∇²ℒ` the Hessian in `(η, X, u)` at fixed `μ` (`p` enters
//! linearly). `ℒ` is a weighted sum of the rows plus chart terms:
//! * `Σ_x ω_x · row_x` with weights `−μ` on the fixed-chart rows, `λ_p` on the 1-dof end
//!   rows, `a(η) = −J(η)⁻¹ J(0) μ_0^c` on the centre rows of every `x`, and
//!   `b(y_s) = S(y_s) μ_0^c + J(y_s)⁻¹ λ_p^c` on the composite end rows. Its Hessian is the
//!   frozen-weight one (module `rows_hessian`, on the centred expansion), plus
//!   `a' ⊗ ∇L̂_η`, `b' ⊗ ∇P` and their transposes, plus `L̂_η · a''` and `P · b''`;
//! * `−μ_0^c · Σ_α w_α Δt S(θ^α)ᵀ J(0)ᵀ u` (second derivatives `S''` and `S'` with `u`);
//! * `λ_q^c · log(τ(ȳ_s)⁻¹ τ(η) τ(y_s))`: with `Γ_y` the logarithm's curvature of the chart
//!   at `y` ([`vidyn_rbd::CompositeJoint::log_curvature`]) and `Ad = Ad_{τ(ȳ_s)⁻¹}`,
//!   Baker–Campbell–Hausdorff gives `∂²/∂η² = λ·Ad Γ_0`, `∂²/∂y_s² = λ·Γ_ȳ` and
//!   `∂²/∂η_i∂y_j = ½ λ·[Ad J(0) e_i, J(ȳ) e_j]` (`Ad J(0) = J(ȳ) S(ȳ)`).
//!
//! The derivatives of `J⁻¹` come from `J'`, `J''` (`(J⁻¹)'' = J⁻¹(J'_a J⁻¹ J'_b + J'_b J⁻¹ J'_a
//! − J''_ab) J⁻¹`), those of `S` from [`vidyn_rbd::CompositeJoint::shift_second_derivative_contractions`].
//! Finally `log τ(η) = J(0) η + ½ ηᵀ Γ_0 η + …` inverts to
//! `ι''[a, b] = −J(0)⁻¹ Γ_0[J(0)⁻¹ a, J(0)⁻¹ b]`, and `ℒ_η = J(0)ᵀ (Aᵀ λ)_{δq}`.
//!
//! # Cost and scope
//! Per prepared step: the step, the `(s+1)² N × N` blocks of the rows' Jacobian on the centred
//! expansion, one dense LU of the `s n × s n` residual Jacobian and its `3n` solves (whose
//! sensitivities give `A`, `B` as `F W`: no separate first-order linearisation), and the
//! λ-independent chart terms (`J''`, `S''ᵀw`, the logarithm's curvature; O(d³) per joint and
//! control point); per contraction one transposed solve, `s + 1` dual Hessian evaluations
//! (module `rows_hessian`), the chart terms' contractions and the projection `Wᵀ ∇²ℒ W` on the
//! unknowns' rows, O(s n³). Measured on solo12 (trapezoid): 1.8× a first-order linearisation
//! (`BENCHMARKS.md`). The full tensors are `2n` contractions. Gravity, controls on every joint, damping and springs on
//! 1-dof joints, every scheme, and holonomic constraints with their schedules and momentum
//! projection (module `constrained`: the multipliers in the Lagrangian, RATTLE's projection
//! in the chart); the caller refuses kinematic joints, mimic joints and body wrenches (module
//! `second_order`). Nothing allocates after the workspace exists.

use crate::chart_linearize::{block, centred_forces, CentredPoints};
use crate::chart_step::Chart;
use crate::del::JointForces;
use crate::dense::{gemm_nn, lu_factor_in, lu_solve_in, lu_solve_transposed_in, ColMajor, ColMajorMut};
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::rows_hessian::RowsHessian;
use crate::second_order::FlowDerivatives;
use constrained::ChartConstraints;
use nalgebra::{DMatrix, DMatrixViewMut, Matrix6, Vector6};
use vidyn_rbd::CompositeJoint;
use vidyn_system::StepInput;

/// The most control points of a scheme (Lobatto `s ≤ 12`).
const MAX_POINTS: usize = 13;

/// A composite joint's quantities at the prepared step (module docs), `d` its `nv`.
#[derive(Clone, Debug)]
struct JointTerms {
    /// First coordinate (= tangent index), `d`, first centre coordinate (centred expansion),
    /// first composite index (`0..n_c`).
    first: usize,
    d: usize,
    centre: usize,
    composite: usize,
    /// `θ^α` and `S(θ^α)` at the control points, `y_s`, `S(y_s)`, `J(y_s)` and its inverse.
    points: [Vector6<f64>; MAX_POINTS],
    shifts: [Matrix6<f64>; MAX_POINTS],
    end: Vector6<f64>,
    shift_end: Matrix6<f64>,
    j_end: Matrix6<f64>,
    j_end_inv: Matrix6<f64>,
    /// `J(0)`, `J(0)⁻¹`.
    j0: Matrix6<f64>,
    j0_inv: Matrix6<f64>,
    /// `u_θ`, the chart end momentum `P`, the projected one `P̃` (`= P` without
    /// constraints, module `constrained`), `p_{k+1} = J(y_s)⁻ᵀ P̃` and `L̂_η` (with constraints
    /// the centre rows of `Φ`, module `constrained`).
    u_theta: Vector6<f64>,
    p_chart: Vector6<f64>,
    p_projected: Vector6<f64>,
    p_next: Vector6<f64>,
    centre_rows: Vector6<f64>,
    /// The λ-independent chart terms of the contraction (module docs), `k, l < d`:
    /// `J(0)⁻¹ J'(0)[e_k]`, `S'(y_s)[e_k]`, `J(y_s)⁻¹ J'(y_s)[e_k] J(y_s)⁻¹`,
    centre_turn: [Matrix6<f64>; 6],
    end_shift: [Matrix6<f64>; 6],
    end_turn: [Matrix6<f64>; 6],
    /// `(J⁻¹)''(0)[e_k, e_l]ᵀ L̂_η`, `S''(y_s)[e_k, e_l]ᵀ P`, `(J⁻¹)''(y_s)[e_k, e_l]ᵀ P̃`,
    centre_curvature: Pairs,
    end_shift_curvature: Pairs,
    end_curvature: Pairs,
    /// the logarithm's terms `Ad Γ_0[k][l]`, `Γ_ȳ[k][l]`, `½ [Ad J(0) e_k, J(ȳ) e_l]` and
    /// `ι`'s `Σ_ij J(0)⁻¹[i, k] J(0)⁻¹[j, l] Γ_0[i][j]`,
    log_centre: Pairs,
    log_end: Pairs,
    log_cross: Pairs,
    log_input: Pairs,
    /// and per control point `α`: `S''(θ^α)[e_k, e_l]ᵀ u_θ` and `J(0) S'(θ^α)[e_k]`.
    control_curvature: Vec<Pairs>,
    control_turn: Vec<[Matrix6<f64>; 6]>,
}

/// A 6-vector per pair `(k, l)` of a joint's coordinates.
type Pairs = [[Vector6<f64>; 6]; 6];

impl JointTerms {
    fn new(joint: &CompositeJoint<'_>, centre: usize, composite: usize, points: usize) -> Self {
        let j0 = joint.velocity_map(&[0.0; 6]);
        Self {
            first: joint.first(),
            d: joint.nv(),
            centre,
            composite,
            points: [Vector6::zeros(); MAX_POINTS],
            shifts: [Matrix6::identity(); MAX_POINTS],
            end: Vector6::zeros(),
            shift_end: Matrix6::identity(),
            j_end: Matrix6::identity(),
            j_end_inv: Matrix6::identity(),
            j0,
            j0_inv: j0.try_inverse().unwrap_or_else(Matrix6::identity),
            u_theta: Vector6::zeros(),
            p_chart: Vector6::zeros(),
            p_projected: Vector6::zeros(),
            p_next: Vector6::zeros(),
            centre_rows: Vector6::zeros(),
            centre_turn: [Matrix6::zeros(); 6],
            end_shift: [Matrix6::zeros(); 6],
            end_turn: [Matrix6::zeros(); 6],
            centre_curvature: [[Vector6::zeros(); 6]; 6],
            end_shift_curvature: [[Vector6::zeros(); 6]; 6],
            end_curvature: [[Vector6::zeros(); 6]; 6],
            log_centre: [[Vector6::zeros(); 6]; 6],
            log_end: [[Vector6::zeros(); 6]; 6],
            log_cross: [[Vector6::zeros(); 6]; 6],
            log_input: [[Vector6::zeros(); 6]; 6],
            control_curvature: vec![[[Vector6::zeros(); 6]; 6]; points],
            control_turn: vec![[Matrix6::zeros(); 6]; points],
        }
    }

    /// The λ-independent chart terms (the fields after `centre_rows`) at the prepared step.
    fn chart_terms(&mut self, joint: &CompositeJoint<'_>, points: usize) {
        let (d, zero, end) = (self.d, [0.0; 6], self.end);
        let (centre_first, end_first) = (first_derivatives(joint, &zero), first_derivatives(joint, end.as_slice()));
        let (centre_second, end_second) = (joint.velocity_map_second_derivatives(&zero), joint.velocity_map_second_derivatives(end.as_slice()));
        let (gamma0, gamma_end) = (joint.log_curvature(&zero), joint.log_curvature(end.as_slice()));
        let turned = self.j_end * self.shift_end;
        let ad = turned * self.j0_inv;
        for k in 0..d {
            self.centre_turn[k] = self.j0_inv * centre_first[k];
            self.end_shift[k] = joint.shift_derivative(end.as_slice(), &unit(k));
            self.end_turn[k] = self.j_end_inv * end_first[k] * self.j_end_inv;
            for l in 0..d {
                let inverse = |j_inv: &Matrix6<f64>, first: &[Matrix6<f64>; 6], second: &Matrix6<f64>| {
                    j_inv * (first[k] * j_inv * first[l] + first[l] * j_inv * first[k] - second) * j_inv
                };
                self.centre_curvature[k][l] = inverse(&self.j0_inv, &centre_first, &centre_second[k][l]).transpose() * self.centre_rows;
                self.end_curvature[k][l] = inverse(&self.j_end_inv, &end_first, &end_second[k][l]).transpose() * self.p_projected;
                self.log_centre[k][l] = ad * gamma0[k][l];
                self.log_end[k][l] = gamma_end[k][l];
                self.log_cross[k][l] = 0.5 * joint.bracket(&turned.column(k).into_owned(), &self.j_end.column(l).into_owned());
            }
        }
        // ι's term Σ_im J(0)⁻¹[i, k] J(0)⁻¹[m, l] Γ_0[i][m], one index at a time
        let mut half = [[Vector6::zeros(); 6]; 6];
        for (i, row) in half.iter_mut().enumerate().take(d) {
            for (l, h) in row.iter_mut().enumerate().take(d) {
                *h = (0..d).map(|m| gamma0[i][m] * self.j0_inv[(m, l)]).sum();
            }
        }
        for k in 0..d {
            for l in 0..d {
                self.log_input[k][l] = (0..d).map(|i| half[i][l] * self.j0_inv[(i, k)]).sum();
            }
        }
        self.end_shift_curvature = joint.shift_second_derivative_contractions(end.as_slice(), &self.p_chart);
        for alpha in 0..points {
            let y = self.points[alpha];
            self.control_curvature[alpha] = joint.shift_second_derivative_contractions(y.as_slice(), &self.u_theta);
            for k in 0..d {
                self.control_turn[alpha][k] = self.j0 * joint.shift_derivative(y.as_slice(), &unit(k));
            }
        }
    }
}

/// `J'(y)[e_k]` for every `k < d`.
fn first_derivatives(joint: &CompositeJoint<'_>, y: &[f64]) -> [Matrix6<f64>; 6] {
    let mut out = [Matrix6::zeros(); 6];
    for (k, o) in out.iter_mut().enumerate().take(joint.nv()) {
        *o = joint.velocity_map_derivative(y, &unit(k));
    }
    out
}

/// The unit 6-vector `e_k`.
fn unit(k: usize) -> [f64; 6] {
    let mut e = [0.0; 6];
    e[k] = 1.0;
    e
}

/// Scratch of the exact second order on the group (module docs), `n` the model's `nv`, `N`
/// the centred expansion's, `n_c` the composite coordinates, `dim = n_c + (s+1) n` the
/// variables `(η, X)` and `e = dim + n` with the controls; with `m` constraints (module
/// `constrained`) the multipliers `Λ` (`s m`), `ṽ` (`n`) and `μ` (`m`) follow, `k = s m + n +
/// m` more variables and unknowns (`ev = e + k` variables, `s n + k` unknowns).
#[derive(Clone, Debug)]
pub(crate) struct GroupSecondOrder {
    /// The control points on the centred expansion (`η = 0`) and its forces.
    centred: CentredPoints,
    forces: JointForces,
    rows: RowsHessian,
    joints: Vec<JointTerms>,
    /// `(n,)` whether a tangent index belongs to a composite joint.
    in_composite: Vec<bool>,
    /// `((s+1)N)²` the rows' Jacobian in the control points, then `(s+1)N × (dim + s m)` in
    /// `(η, X, Λ)`.
    blocks: DMatrix<f64>,
    g: DMatrix<f64>,
    /// `s n × (dim + s m)`, `s n × 2n`: the residual's Jacobian in `(η, X, Λ)` and in `(p, u)`.
    rv: DMatrix<f64>,
    rpu: DMatrix<f64>,
    /// `2n × dim`, `2n × n`: the outputs' Jacobian.
    fv: DMatrix<f64>,
    fu: DMatrix<f64>,
    /// The Jacobian in the unknowns (`R_Z` without constraints), `nu × nu` column-major with
    /// `nu = s n + k` for the prepared step's active constraints (storage for all of them),
    /// then its LU and pivots; a right-hand side `nu × 3n` (leading dimension `nu`).
    rz: Vec<f64>,
    pivots: Vec<usize>,
    rhs: Vec<f64>,
    /// `W` (`ev × 3n`), its transpose and `[A B] = F W` (`2n × 3n`).
    w: DMatrix<f64>,
    wt: DMatrix<f64>,
    ab: DMatrix<f64>,
    /// With constraints (module `constrained`).
    constrained: Option<Box<ChartConstraints>>,
    /// The adjoint `(s n + k,)` (`μ` on the DEL rows first), the rows' weights `ω`
    /// `((s+1)N,)`, `∇²_Q̂ φ`, its columns in `(η, X)`, `∇²ℒ` (`ev × ev`) and `∇²ℒ W`.
    mu: Vec<f64>,
    omega: Vec<f64>,
    cmat: DMatrix<f64>,
    ce: DMatrix<f64>,
    ce_t: DMatrix<f64>,
    hbig: DMatrix<f64>,
    hw: DMatrix<f64>,
    /// One row of `∇²ℒ` `(ev,)`.
    tmp: Vec<f64>,
}

impl GroupSecondOrder {
    pub(crate) fn new(vi: &VariationalIntegrator, chart: &Chart) -> Self {
        let (n, s, np) = (vi.n(), vi.scheme().s, vi.scheme().points());
        let centred = &chart.centred;
        let big = centred.model.nv;
        let mut nc = 0;
        let joints: Vec<JointTerms> = chart
            .map
            .composite_joints()
            .zip(&centred.centres)
            .map(|(j, &centre)| {
                let t = JointTerms::new(&j, centre, nc, np);
                nc += j.nv();
                t
            })
            .collect();
        let dim = nc + np * n;
        let in_composite = (0..n).map(|i| joints.iter().any(|t| (t.first..t.first + t.d).contains(&i))).collect();
        let m = vi.constraints.len();
        let (lambdas, k) = if m == 0 { (0, 0) } else { (s * m, s * m + n + m) };
        let (nu, ev) = (s * n + k, dim + n + k);
        Self {
            centred: CentredPoints::new(centred, np),
            forces: centred_forces(vi, chart),
            rows: RowsHessian::new(big, np),
            joints,
            in_composite,
            blocks: DMatrix::zeros(np * big, np * big),
            g: DMatrix::zeros(np * big, dim + lambdas),
            rv: DMatrix::zeros(s * n, dim + lambdas),
            rpu: DMatrix::zeros(s * n, 2 * n),
            fv: DMatrix::zeros(2 * n, dim),
            fu: DMatrix::zeros(2 * n, n),
            rz: vec![0.0; nu * nu],
            pivots: vec![0; nu],
            rhs: vec![0.0; nu * 3 * n],
            w: DMatrix::zeros(ev, 3 * n),
            wt: DMatrix::zeros(3 * n, ev),
            ab: DMatrix::zeros(2 * n, 3 * n),
            constrained: (m > 0).then(|| Box::new(ChartConstraints::new(vi, chart, nc))),
            mu: vec![0.0; nu],
            omega: vec![0.0; np * big],
            cmat: DMatrix::zeros(np * big, np * big),
            ce: DMatrix::zeros(np * big, dim),
            ce_t: DMatrix::zeros(dim, np * big),
            hbig: DMatrix::zeros(ev, ev),
            hw: DMatrix::zeros(ev, 3 * n),
            tmp: vec![0.0; ev],
        }
    }

    /// The number of composite coordinates `n_c`.
    fn composite(&self) -> usize {
        self.joints.iter().map(|t| t.d).sum()
    }

    /// The extra variables `k` of the prepared step's constraints (module `constrained`).
    fn extra(&self) -> usize {
        self.constrained.as_deref().map_or(0, ChartConstraints::extra)
    }

    /// The unknowns `s n + k` of the prepared step.
    fn unknowns(&self) -> usize {
        self.rv.nrows() + self.extra()
    }

    /// Solves the step from `at` and keeps everything the contraction needs (module docs);
    /// writes the next state and `A`, `B` (`F W`: the first order of the same implicit-function
    /// theorem, equal to [`VariationalIntegrator::linearize`]'s to rounding) into `out`. Errors
    /// as [`VariationalIntegrator::linearize`].
    pub(crate) fn prepare(
        &mut self,
        vi: &VariationalIntegrator,
        chart: &Chart,
        ws: &mut ViWorkspace,
        at: StepInput<'_>,
        out: &mut FlowDerivatives,
    ) -> Result<usize> {
        let iterations = vi.step(ws, at, &mut out.q_next, &mut out.p_next)?;
        let step = at.k;
        let (n, sc, dt) = (vi.n(), vi.scheme(), vi.dt());
        let (s, np) = (sc.s, sc.points());
        let centred = &chart.centred;
        let (model, big) = (&*centred.model, centred.model.nv);
        let (pts, cw) = (&ws.points, &ws.chart);
        self.centred.set(chart, sc, dt, ws, &[]);
        self.centred.points.update_hessians(model);
        for x in 0..np {
            for beta in 0..np {
                self.centred.points.del_block(sc, dt, &self.forces, x, beta, &mut self.blocks.view_mut((x * big, beta * big), (big, big)));
            }
        }
        if let Some(c) = self.constrained.as_deref_mut() {
            c.prepare_points(vi, chart, ws, step, &self.centred.points, &mut self.blocks)?;
        }
        // the rows' Jacobian in (η, X) (and Λ)
        let nc = self.composite();
        let dim = nc + np * n;
        pull_back_columns(&self.joints, &centred.coordinates, np, &self.blocks, &mut self.g);
        if let Some(c) = self.constrained.as_deref() {
            c.lambda_columns(&mut self.g, dim);
        }
        for (t, j) in self.joints.iter_mut().zip(chart.map.composite_joints()) {
            for alpha in 0..np {
                t.points[alpha] = block(&pts.q[alpha], t.first, t.d);
                t.shifts[alpha] = j.shift(t.points[alpha].as_slice());
            }
            t.end = (0..np).map(|alpha| t.points[alpha] * sc.endpoint(alpha)).sum();
            t.shift_end = j.shift(t.end.as_slice());
            t.j_end = j.velocity_map(t.end.as_slice());
            t.j_end_inv = t.j_end.try_inverse().ok_or(ViError::SingularJacobian { step })?;
            t.u_theta = block(cw.u_theta(), t.first, t.d);
            t.p_chart = block(cw.p_theta_next(), t.first, t.d);
            t.p_next = block(&out.p_next, t.first, t.d);
            t.p_projected = t.j_end.transpose() * t.p_next;
            let control: Vector6<f64> = (0..np).map(|alpha| t.shifts[alpha].transpose() * t.u_theta * (sc.weights[alpha] * dt)).sum();
            t.centre_rows = t.shift_end.transpose() * t.p_chart - t.j0.transpose() * block(cw.momentum(), t.first, t.d) - control;
            t.chart_terms(&j, np);
        }
        self.residual_jacobian(vi, chart);
        self.output_jacobian(vi, chart);
        let (sn, e, ev) = (s * n, dim + n, self.w.nrows());
        if let Some(c) = self.constrained.as_deref_mut() {
            c.prepare_projection(step, &out.p_next, &self.joints)?;
            c.rows(&self.g, &self.joints, sc.control_weight(s) * dt, &mut self.fv);
        }
        // W: η = J(0)⁻¹ δq on composite joints, X^0 = δq on 1-dof ones, the unknowns U
        // (Z, and Λ, ṽ, μ with constraints) from G_U U_w = −G_w
        let (k, nu) = (self.extra(), self.unknowns());
        let rz = &mut self.rz[..nu * nu];
        let mut system = DMatrixViewMut::from_slice(rz, nu, nu);
        system.fill(0.0);
        system.view_mut((0, 0), (sn, sn)).copy_from(&self.rv.columns(nc + n, sn));
        if let Some(c) = self.constrained.as_deref() {
            let lambdas = c.lambdas();
            system.view_mut((0, sn), (sn, lambdas)).copy_from(&self.rv.columns(dim, lambdas));
            system.view_mut((sn, 0), (k, sn)).copy_from(&c.rows.view((0, nc + n), (k, sn)));
            system.view_mut((sn, sn), (k, k)).copy_from(&c.rows_extra.view((0, 0), (k, k)));
        }
        if !lu_factor_in(rz, nu, &mut self.pivots[..nu]) {
            return Err(if self.constrained.is_some() { ViError::DegenerateConstraints { step } } else { ViError::SingularJacobian { step } });
        }
        self.w.fill(0.0);
        for t in &self.joints {
            self.w.view_mut((t.composite, t.first), (t.d, t.d)).copy_from(&t.j0_inv.view((0, 0), (t.d, t.d)));
        }
        for i in (0..n).filter(|&i| !self.in_composite[i]) {
            self.w[(nc + i, i)] = 1.0;
        }
        for i in 0..n {
            self.w[(dim + i, 2 * n + i)] = 1.0;
        }
        let rhs = &mut self.rhs[..nu * 3 * n];
        rhs.fill(0.0);
        DMatrixViewMut::from_slice(rhs, nu, 3 * n).view_mut((0, n), (sn, 2 * n)).copy_from(&self.rpu);
        gemm_nn(sn, 3 * n, nc + n, ColMajor(self.rv.as_slice(), sn), ColMajor(self.w.as_slice(), ev), ColMajorMut(rhs, nu));
        if let Some(c) = self.constrained.as_deref() {
            let ld = c.rows.nrows();
            gemm_nn(k, 3 * n, nc + n, ColMajor(c.rows.as_slice(), ld), ColMajor(self.w.as_slice(), ev), ColMajorMut(&mut rhs[sn..], nu));
            for i in 0..n {
                for r in 0..k {
                    rhs[(2 * n + i) * nu + sn + r] += c.rows[(r, dim + i)];
                }
            }
        }
        for (c, column) in rhs.chunks_exact_mut(nu).enumerate() {
            lu_solve_in(&self.rz[..nu * nu], nu, &self.pivots[..nu], column);
            for (r, x) in column.iter().enumerate() {
                let row = if r < sn { nc + n + r } else { e + r - sn };
                self.w[(row, c)] = -x;
            }
        }
        self.w.transpose_to(&mut self.wt);
        // A, B = F_V W_V + F_u W_u (+ F_K W_K)
        self.ab.fill(0.0);
        gemm_nn(2 * n, 3 * n, dim, ColMajor(self.fv.as_slice(), 2 * n), ColMajor(self.w.as_slice(), ev), ColMajorMut(self.ab.as_mut_slice(), 2 * n));
        gemm_nn(2 * n, 3 * n, n, ColMajor(self.fu.as_slice(), 2 * n), ColMajor(&self.w.as_slice()[dim..], ev), ColMajorMut(self.ab.as_mut_slice(), 2 * n));
        if let Some(c) = self.constrained.as_deref() {
            gemm_nn(
                2 * n,
                3 * n,
                c.extra(),
                ColMajor(c.outputs.as_slice(), 2 * n),
                ColMajor(&self.w.as_slice()[e..], ev),
                ColMajorMut(self.ab.as_mut_slice(), 2 * n),
            );
        }
        out.a.copy_from(&self.ab.columns(0, 2 * n));
        out.b.copy_from(&self.ab.columns(2 * n, n));
        Ok(iterations)
    }

    /// `rv`, `rpu`: the residual's Jacobian in `(η, X)` and `(p, u)` (module docs).
    fn residual_jacobian(&mut self, vi: &VariationalIntegrator, chart: &Chart) {
        let (n, sc, dt) = (vi.n(), vi.scheme(), vi.dt());
        let (s, np) = (sc.s, sc.points());
        let centred = &chart.centred;
        let big = centred.model.nv;
        let nc = self.composite();
        self.rv.fill(0.0);
        self.rpu.fill(0.0);
        for x in 0..s {
            let cw = sc.control_weight(x) * dt;
            for (i, &c) in centred.coordinates.iter().enumerate() {
                if x == 0 && self.in_composite[i] {
                    continue;
                }
                add_row(&mut self.rv, x * n + i, &self.g, x * big + c, 1.0);
                if x == 0 {
                    self.rpu[(i, i)] = 1.0;
                }
                match self.joints.iter().find(|t| (t.first..t.first + t.d).contains(&i)) {
                    None => self.rpu[(x * n + i, n + i)] = cw,
                    Some(t) => {
                        for k in 0..t.d {
                            self.rpu[(x * n + i, n + t.first + k)] = cw * t.j0[(k, i - t.first)];
                        }
                    }
                }
            }
        }
        let cw_end = sc.control_weight(s) * dt;
        for (t, j) in self.joints.iter().zip(chart.map.composite_joints()) {
            let d = t.d;
            // J'(0)[e_k]ᵀ J(0)⁻ᵀ L̂_η, (S'(θ^α)[e_k])ᵀ u_θ, (S'(y_s)[e_k])ᵀ P by columns k
            let centre_force = t.j0_inv.transpose() * t.centre_rows;
            let end_curvature = j.shift_derivative_contraction(t.end.as_slice(), &t.p_chart);
            let mut control = Matrix6::zeros();
            for r in 0..d {
                let row = t.first + r;
                for x in 0..np {
                    add_row(&mut self.rv, row, &self.g, x * big + t.centre + r, 1.0);
                }
                for l in 0..d {
                    add_row(&mut self.rv, row, &self.g, s * big + centred.coordinates[t.first + l], -t.shift_end[(l, r)]);
                }
            }
            for k in 0..d {
                let jk = j.velocity_map_derivative(&[0.0; 6], &unit(k));
                let c = jk.transpose() * centre_force;
                for r in 0..d {
                    self.rv[(t.first + r, t.composite + k)] -= c[r];
                }
            }
            for alpha in 0..np {
                let wdt = sc.weights[alpha] * dt;
                let cc = j.shift_derivative_contraction(t.points[alpha].as_slice(), &t.u_theta);
                let e = sc.endpoint(alpha);
                for k in 0..d {
                    for r in 0..d {
                        self.rv[(t.first + r, nc + alpha * n + t.first + k)] += wdt * cc[(r, k)] - e * end_curvature[(r, k)];
                    }
                }
                control += t.shifts[alpha].transpose() * wdt;
            }
            let rp = t.j0.transpose();
            let ru = (control - t.shift_end.transpose() * cw_end) * t.j0.transpose();
            for r in 0..d {
                for k in 0..d {
                    self.rpu[(t.first + r, t.first + k)] = rp[(r, k)];
                    self.rpu[(t.first + r, n + t.first + k)] = ru[(r, k)];
                }
            }
        }
    }

    /// `fv`, `fu`: the Jacobian of `F = (q' ⊖ q̄', p' − p̄')` in `(η, X)` and `u` (module docs).
    fn output_jacobian(&mut self, vi: &VariationalIntegrator, chart: &Chart) {
        let (n, sc, dt) = (vi.n(), vi.scheme(), vi.dt());
        let (s, np) = (sc.s, sc.points());
        let centred = &chart.centred;
        let big = centred.model.nv;
        let nc = self.composite();
        let cw_end = sc.control_weight(s) * dt;
        self.fv.fill(0.0);
        self.fu.fill(0.0);
        for i in (0..n).filter(|&i| !self.in_composite[i]) {
            for alpha in 0..np {
                self.fv[(i, nc + alpha * n + i)] = sc.endpoint(alpha);
            }
            add_row(&mut self.fv, n + i, &self.g, s * big + centred.coordinates[i], 1.0);
            self.fu[(n + i, i)] = cw_end;
        }
        for (t, j) in self.joints.iter().zip(chart.map.composite_joints()) {
            let d = t.d;
            let turned = t.j_end * t.shift_end;
            let j_end_inv_t = t.j_end_inv.transpose();
            let pu = j_end_inv_t * t.j0.transpose() * cw_end;
            for r in 0..d {
                for k in 0..d {
                    self.fv[(t.first + r, t.composite + k)] = turned[(r, k)];
                    self.fu[(n + t.first + r, t.first + k)] = pu[(r, k)];
                }
                for l in 0..d {
                    add_row(&mut self.fv, n + t.first + r, &self.g, s * big + centred.coordinates[t.first + l], j_end_inv_t[(r, l)]);
                }
            }
            for k in 0..d {
                let curvature = -j_end_inv_t * (j.velocity_map_derivative(t.end.as_slice(), &unit(k)).transpose() * t.p_next);
                for alpha in 0..np {
                    let e = sc.endpoint(alpha);
                    if e == 0.0 {
                        continue;
                    }
                    for r in 0..d {
                        self.fv[(t.first + r, nc + alpha * n + t.first + k)] += e * t.j_end[(r, k)];
                        self.fv[(n + t.first + r, nc + alpha * n + t.first + k)] += e * curvature[r];
                    }
                }
            }
        }
    }

    /// `h = ∇²(λᵀF)` (`3n × 3n`, not symmetrised) at the step prepared with `a` its `A`
    /// (module docs).
    pub(crate) fn contract(&mut self, vi: &VariationalIntegrator, chart: &Chart, lambda: &[f64], a: &DMatrix<f64>, h: &mut DMatrix<f64>) -> Result<()> {
        let (n, sc, dt) = (vi.n(), vi.scheme(), vi.dt());
        let (s, np) = (sc.s, sc.points());
        let centred = &chart.centred;
        let (model, big) = (&*centred.model, centred.model.nv);
        let nc = self.composite();
        let dim = nc + np * n;
        let (lq, lp) = lambda.split_at(n);
        let (sn, e, ev) = (s * n, dim + n, self.w.nrows());
        // adjoint: G_Uᵀ ψ = F_Uᵀ λ (ψ = μ on the DEL rows first)
        for (r, m) in self.mu.iter_mut().enumerate() {
            *m = match (r < sn, self.constrained.as_deref()) {
                (true, _) => (0..2 * n).map(|i| self.fv[(i, nc + n + r)] * lambda[i]).sum(),
                (false, Some(c)) => (0..2 * n).map(|i| c.outputs[(i, r - sn)] * lambda[i]).sum(),
                (false, None) => 0.0,
            };
        }
        let nu = self.unknowns();
        lu_solve_transposed_in(&self.rz[..nu * nu], nu, &self.pivots[..nu], &mut self.mu[..nu]);
        // with constraints the projection's rows add ρ·P to the end rows' weights
        let rho = |i: usize| self.constrained.as_deref().map_or(0.0, |c| self.mu[sn + c.lambdas() + i]);
        // the rows' weights at η = 0: −μ on the fixed-chart rows, λ_p on the 1-dof end rows,
        // a = −μ_0^c on every centre row, b = S(y_s) μ_0^c + J(y_s)⁻¹ λ_p^c on the composite end
        self.omega.fill(0.0);
        for x in 0..s {
            for (i, &c) in centred.coordinates.iter().enumerate() {
                if x > 0 || !self.in_composite[i] {
                    self.omega[x * big + c] = -self.mu[x * n + i];
                }
            }
        }
        for (i, &c) in centred.coordinates.iter().enumerate() {
            if !self.in_composite[i] {
                self.omega[s * big + c] = lp[i] + rho(i);
            }
        }
        for t in &self.joints {
            let mu0 = block(&self.mu, t.first, t.d);
            let b = t.shift_end * mu0 + t.j_end_inv * block(lp, t.first, t.d);
            for r in 0..t.d {
                for x in 0..np {
                    self.omega[x * big + t.centre + r] = -mu0[r];
                }
                self.omega[s * big + centred.coordinates[t.first + r]] = b[r] + rho(t.first + r);
            }
        }
        self.rows.fill(model, &self.centred.points, sc, dt, &self.omega, &mut self.cmat);
        // ∇²ℒ in (η, X): the frozen-weight Hessian pulled back on both sides, `Eᵀ C E` with
        // `C E` transposed in between (C is a Hessian: symmetric)
        pull_back_columns(&self.joints, &centred.coordinates, np, &self.cmat, &mut self.ce);
        self.ce.transpose_to(&mut self.ce_t);
        self.hbig.fill(0.0);
        pull_back_columns(&self.joints, &centred.coordinates, np, &self.ce_t, &mut self.hbig);
        let cw_end = sc.control_weight(s) * dt;
        for t in &self.joints {
            let d = t.d;
            let mu0 = block(&self.mu, t.first, d);
            let lpc = block(lp, t.first, d);
            let lqc = block(lq, t.first, d);
            // a'(0)[e_k] ⊗ ∇L̂_η (∇Φ_η, with its Λ columns after `dim`) and its transpose
            for k in 0..d {
                let da = t.centre_turn[k] * mu0;
                self.tmp.fill(0.0);
                for r in 0..d {
                    for x in 0..np {
                        let row = self.g.row(x * big + t.centre + r);
                        for (v, g) in self.tmp[..dim].iter_mut().zip(row.iter()) {
                            *v += da[r] * g;
                        }
                        for (v, g) in self.tmp[e..].iter_mut().zip(row.iter().skip(dim)) {
                            *v += da[r] * g;
                        }
                    }
                }
                add_row_and_column(&mut self.hbig, t.composite + k, 1.0, &self.tmp);
            }
            // b'(y_s)[e_k] ⊗ ∇(P, u) and its transpose, at every control point of y_s
            for k in 0..d {
                let db = t.end_shift[k] * mu0 - t.end_turn[k] * lpc;
                self.tmp.fill(0.0);
                for r in 0..d {
                    for (v, g) in self.tmp[..dim].iter_mut().zip(self.g.row(s * big + centred.coordinates[t.first + r]).iter()) {
                        *v += db[r] * g;
                    }
                    for l in 0..d {
                        self.tmp[dim + t.first + l] += db[r] * cw_end * t.j0[(l, r)];
                    }
                }
                for alpha in 0..np {
                    let e = sc.endpoint(alpha);
                    if e != 0.0 {
                        add_row_and_column(&mut self.hbig, nc + alpha * n + t.first + k, e, &self.tmp);
                    }
                }
            }
            // L̂_η · a'' and P · b''; the log's curvature (λ_q^c)
            let j0_mu0 = t.j0 * mu0;
            for k in 0..d {
                for l in 0..d {
                    self.hbig[(t.composite + k, t.composite + l)] += -t.centre_curvature[k][l].dot(&j0_mu0) + lqc.dot(&t.log_centre[k][l]);
                    let yy = t.end_shift_curvature[k][l].dot(&mu0) + t.end_curvature[k][l].dot(&lpc) + lqc.dot(&t.log_end[k][l]);
                    let cross = lqc.dot(&t.log_cross[k][l]);
                    for alpha in 0..np {
                        let ea = sc.endpoint(alpha);
                        if ea == 0.0 {
                            continue;
                        }
                        self.hbig[(t.composite + k, nc + alpha * n + t.first + l)] += ea * cross;
                        self.hbig[(nc + alpha * n + t.first + l, t.composite + k)] += ea * cross;
                        for beta in 0..np {
                            let eb = sc.endpoint(beta);
                            if eb != 0.0 {
                                self.hbig[(nc + alpha * n + t.first + k, nc + beta * n + t.first + l)] += ea * eb * yy;
                            }
                        }
                    }
                }
            }
            // −μ_0^c · Σ_α w_α Δt S(θ^α)ᵀ J(0)ᵀ u
            for alpha in 0..np {
                let c = sc.weights[alpha] * dt;
                if c == 0.0 {
                    continue;
                }
                for k in 0..d {
                    let row = nc + alpha * n + t.first + k;
                    for l in 0..d {
                        self.hbig[(row, nc + alpha * n + t.first + l)] -= c * t.control_curvature[alpha][k][l].dot(&mu0);
                    }
                    let v = t.control_turn[alpha][k] * mu0;
                    for l in 0..d {
                        self.hbig[(row, dim + t.first + l)] -= c * v[l];
                        self.hbig[(dim + t.first + l, row)] -= c * v[l];
                    }
                }
            }
        }
        if let Some(c) = self.constrained.as_deref_mut() {
            c.add_hessian_terms(&mut self.hbig, &self.omega, &self.mu, lp, &self.joints, &self.centred.points)?;
        }
        // H = Wᵀ ∇²ℒ W + ℒ_η · ι'', with W = E + [0; W_Z; 0; W_K]: only the unknowns' rows W_Z
        // (and W_K of Λ, ṽ, μ) are dense, E is the input map (J(0)⁻¹ from δq to η, 1 from δq
        // to X^0 on 1-dof joints and from δu to u)
        // (the rows past `e + k`, storage for constraints the step does not impose, are zero)
        let (z0, k) = (nc + n, self.extra());
        let rows = e + k;
        self.hw.fill(0.0);
        gemm_nn(
            rows,
            3 * n,
            sn,
            ColMajor(&self.hbig.as_slice()[z0 * ev..], ev),
            ColMajor(&self.w.as_slice()[z0..], ev),
            ColMajorMut(self.hw.as_mut_slice(), ev),
        );
        if k > 0 {
            gemm_nn(
                rows,
                3 * n,
                k,
                ColMajor(&self.hbig.as_slice()[e * ev..], ev),
                ColMajor(&self.w.as_slice()[e..], ev),
                ColMajorMut(self.hw.as_mut_slice(), ev),
            );
        }
        self.add_input_map(n, dim);
        h.fill(0.0);
        gemm_nn(
            3 * n,
            3 * n,
            sn,
            ColMajor(&self.wt.as_slice()[z0 * 3 * n..], 3 * n),
            ColMajor(&self.hw.as_slice()[z0..], ev),
            ColMajorMut(h.as_mut_slice(), 3 * n),
        );
        if k > 0 {
            gemm_nn(
                3 * n,
                3 * n,
                k,
                ColMajor(&self.wt.as_slice()[e * 3 * n..], 3 * n),
                ColMajor(&self.hw.as_slice()[e..], ev),
                ColMajorMut(h.as_mut_slice(), 3 * n),
            );
        }
        self.add_input_map_rows(n, dim, h);
        for t in &self.joints {
            let mut ell = Vector6::zeros();
            for r in 0..t.d {
                ell[r] = (0..2 * n).map(|i| lambda[i] * a[(i, t.first + r)]).sum();
            }
            for p in 0..t.d {
                for q in 0..t.d {
                    h[(t.first + p, t.first + q)] -= ell.dot(&t.log_input[p][q]);
                }
            }
        }
        Ok(())
    }

    /// `hw += ∇²ℒ E` (module docs: `E` the input map of `W`), by columns of `∇²ℒ`.
    fn add_input_map(&mut self, n: usize, dim: usize) {
        let nc = self.composite();
        for t in &self.joints {
            for l in 0..t.d {
                let mut col = self.hw.column_mut(t.first + l);
                for k in 0..t.d {
                    col.axpy(t.j0_inv[(k, l)], &self.hbig.column(t.composite + k), 1.0);
                }
            }
        }
        for i in (0..n).filter(|&i| !self.in_composite[i]) {
            self.hw.column_mut(i).axpy(1.0, &self.hbig.column(nc + i), 1.0);
        }
        for i in 0..n {
            self.hw.column_mut(2 * n + i).axpy(1.0, &self.hbig.column(dim + i), 1.0);
        }
    }

    /// `h += Eᵀ (∇²ℒ W)` (module docs), by rows of `∇²ℒ W`.
    fn add_input_map_rows(&self, n: usize, dim: usize, h: &mut DMatrix<f64>) {
        let nc = self.composite();
        let m = 3 * n;
        for c in 0..m {
            for t in &self.joints {
                for l in 0..t.d {
                    h[(t.first + l, c)] += (0..t.d).map(|k| t.j0_inv[(k, l)] * self.hw[(t.composite + k, c)]).sum::<f64>();
                }
            }
            for i in (0..n).filter(|&i| !self.in_composite[i]) {
                h[(i, c)] += self.hw[(nc + i, c)];
            }
            for i in 0..n {
                h[(2 * n + i, c)] += self.hw[(dim + i, c)];
            }
        }
    }
}

/// `dst[.., (η, X)] = src E` for a matrix `src` with columns on the control points of the
/// centred expansion (`(s+1) N` of them): `E` maps `(η, X)` to those points, `η` entering
/// every point's centre joints and `X^α` point `α`'s chart coordinates. Writes the first
/// `src.nrows()` rows of `dst`'s first `n_c + (s+1) n` columns.
fn pull_back_columns(joints: &[JointTerms], coordinates: &[usize], points: usize, src: &DMatrix<f64>, dst: &mut DMatrix<f64>) {
    let (rows, big, n) = (src.nrows(), src.ncols() / points, coordinates.len());
    let nc: usize = joints.iter().map(|t| t.d).sum();
    for t in joints {
        for k in 0..t.d {
            let mut col = dst.view_mut((0, t.composite + k), (rows, 1));
            col.fill(0.0);
            for beta in 0..points {
                col += src.column(beta * big + t.centre + k);
            }
        }
    }
    for alpha in 0..points {
        for (i, &c) in coordinates.iter().enumerate() {
            dst.view_mut((0, nc + alpha * n + i), (rows, 1)).copy_from(&src.column(alpha * big + c));
        }
    }
}

/// `dst[r, ·] += scale · src[sr, ·]` (over the columns both have: the outputs' Jacobian has no
/// columns of `Λ`, which the end rows it copies do not depend on).
fn add_row(dst: &mut DMatrix<f64>, r: usize, src: &DMatrix<f64>, sr: usize, scale: f64) {
    for c in 0..src.ncols().min(dst.ncols()) {
        dst[(r, c)] += scale * src[(sr, c)];
    }
}

/// `m[r, ·] += e v` and `m[·, r] += e v` (`v` of length `m`'s size).
fn add_row_and_column(m: &mut DMatrix<f64>, r: usize, e: f64, v: &[f64]) {
    for (c, x) in v.iter().enumerate() {
        m[(r, c)] += e * x;
        m[(c, r)] += e * x;
    }
}

mod constrained;
#[cfg(test)]
mod tests;
