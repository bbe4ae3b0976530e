//! The exact first-order linearisation of a step on the Lie group (models with free-flyer,
//! spherical or planar joints, module `chart_step`): `A`, `B` in tangent coordinates,
//! `δq` as `model.difference` (right-trivialised, Pinocchio's and crocoddyl's convention),
//! `δp`, `δu` in the tangent space's dual.
//!
//! # The step in centre coordinates
//! Write the step's variables as `X_0 = c ∘ τ(η)` and `X_j = X_0 ∘ τ(y_j)`: `η` moves the
//! chart's centre, `y` are the chart coordinates of the step (`y_0 = 0` on composite joints).
//! In the centred expansion ([`vidyn_rbd::CentredExpansion`]) `η` are joints of their own, held
//! at `η = 0` over the step, so the discrete Lagrangian `L̂(η, y)` is an ordinary fixed-chart
//! one and the Newton factorisation, its solves and its Jacobian–vector products (module
//! `newton_direction`) give every derivative of it, with `η` as prescribed joints.
//! Moving `X_0` with the other step variables fixed on the group moves `η` and shifts each
//! `y_j` by `−S(y_j) δη`, so the first DEL row of a composite joint, `p_k = −D_{X_0} L_d`, reads
//! (the interior rows vanish at a solution, and `P = ∂L̂/∂y_s` is the end momentum in the chart)
//!
//! `J(0)ᵀ p_k + G − S(y_s)ᵀ P = 0`, `G = Σ_x ∂L̂/∂η_x + Σ_α w_α Δt S(y^α)ᵀ u_θ`,
//!
//! the discrete momentum balance `p_k + J(0)⁻ᵀ G = Ad*_{τ(y_s)} p_{k+1}` (`G` sums the rows of
//! the centre joints over the step variables `x`; the control term is the work of the chart
//! control `u_θ = J(0)ᵀ u` under a move of the centre, as in the centre term of
//! `chart_step`). It is the row the step solves, rearranged with the interior rows. Away from
//! `η = 0` a right perturbation `ξ` of `X_0` is `δη = J(η)⁻¹ ξ`, so the centre joints' rows
//! enter as `J(η)⁻ᵀ ∂L̂/∂η`, whose variation along `η` adds `(J'(0)[η])ᵀ J(0)⁻ᵀ ∂L̂/∂η`
//! (the control's work is measured in the step's own chart and has no such term).
//!
//! # The linearisation
//! Replace that row by the fixed-chart one with an auxiliary momentum `π̃` in place of
//! `J(0)ᵀ p_k`: the system is then the fixed-chart step of the centred expansion, whose
//! solution's variation along any input `(η, q_k's 1-dof coordinates, π̃, p_k's 1-dof part, u)`
//! is one Jacobian–vector product and one solve, whose forward pass also gives the variation
//! of the end momentum and of the rows of the (prescribed) centre joints. Each variation gives `e = J(0)ᵀ δp_k` implied by the row above,
//! `e = −δG + S(y_s)ᵀ δP + (S'(y_s)[δy_s])ᵀ P`; the `π̃` columns then correct every column so
//! that `e` matches the input (`J(0)ᵀ δp_k` on a momentum column, zero elsewhere), an
//! `n_c × n_c` solve (`n_c` the composite coordinates), and a column moving `η` gets the
//! `J'(0)[η]` term above. The input and outputs are mapped at the
//! ends: `δq_k` on a composite joint is `η = J(0)⁻¹ δ`; `δq_{k+1} = J(y_s)(S(y_s) η + δy_s)`
//! (`q_{k+1} = c ∘ τ(η) ∘ τ(y_s)`), `δp_{k+1} = J(y_s)⁻ᵀ (δP − (J'(y_s)[δy_s])ᵀ p_{k+1})`.
//! O(s² n (n + n_c)) per step, like the fixed-chart linearisation.
//!
//! Kinematic (prescribed) 1-dof joints are prescribed in the centred expansion too: their
//! `q_k` and `u` (= `ρ_{k+1}`) columns move their control point `z = (ρ_{k+1} − e_0 ρ_k)/e_1`
//! (module `integrator`), and their `p_{k+1}` slot is `(ρ_{k+1} − ρ_k)/Δt`.
//!
//! # With holonomic constraints
//! The step's first row carries the impulse `−C_1ᵀ λ^0`, `C_1 = ∂h/∂y_0` at the start in the
//! step's chart, for `s ≥ 2` each interior row its own `−C(X_β)ᵀ λ^β`, and `h = 0` closes it at
//! the end (and the interior control points; module `constrained`). In the centred expansion
//! `h` is a function of `(η, y)`, so the KKT elimination of module `constrained` runs on its
//! fixed-chart system unchanged (the same factors, `crate::constrained::KktFactors`) —
//! `K = J⁻¹ Ĉᵀ`, `δΛ = (C_2 K)⁻¹ (f_2 − C_2 w)` with `f_2 = −∂h/∂x` of each constrained point
//! along the input, the interior Hessians by their Woodbury term, and `Σ_i λ^β_i ∂²h_i` at
//! control point `β` times that point's input variation on row block `β` (the start's, and
//! with a moved centre every point's) — and the composite row above gains the impulses,
//! `J(0)ᵀ p_k = −G + S(y_s)ᵀ P + (C_1ᵀ λ^0)_c + Σ_β C_η(X_β)ᵀ λ^β`, `C_η = ∂h/∂η`: the interior
//! rows no longer vanish without their impulses, `Σ_β S(y_β)ᵀ C_y(X_β)ᵀ λ^β` remains, and
//! since moving `X_0` with `X_β` fixed on the group leaves `h(X_β)` unchanged,
//! `J(η)⁻ᵀ C_ηᵀ = J(0)⁻ᵀ S(y_β)ᵀ C_yᵀ` at any `η`. So the interior impulses turn with the centre
//! rows through `J(η)` (the `J'(0)[η]` term above acts on `G − Σ_β C_ηᵀ λ^β`), the start's
//! does not (it is written in the step's own chart). The row's variation gains
//! `(C_1ᵀ δλ^0 + Σ_i λ^0_i ∂²h_i δx_0)_c + Σ_β (C_η(X_β)ᵀ δλ^β + H_β[η, ·] δx_β)`.

use crate::chart_step::Chart;
use crate::constrained::{row, ConstraintSet, KktFactors, LaneBuffers};
use crate::constraints::{Constraint, ConstraintScratch};
use crate::del::{JointForces, StepPoints};
use crate::dense::{small_lu, small_solve};
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::newton_direction::{add_l6, mul_l6, mul_transposed_l6, Lanes, NewtonFactorization, LANES, ZERO_L6};
use crate::point::PointState;
use nalgebra::{DMatrix, Matrix6, Vector6};
use vidyn_spatial::Force;

/// One column of the linearisation on the chart: the auxiliary momentum `π̃` of composite
/// coordinate `k` (module docs), or a column of `x = (q_k, p_k, u)`.
#[derive(Clone, Copy, Debug)]
enum Column {
    Centre(usize),
    Q(usize),
    P(usize),
    U(usize),
}

/// Per composite joint, the step's quantities the columns need, `d` the joint's `nv`.
#[derive(Clone, Debug)]
struct JointTerms {
    /// First coordinate (DEL model = tangent index), `d`, first centre coordinate (centred
    /// expansion), first composite index (`0..n_c`).
    first: usize,
    d: usize,
    centre: usize,
    composite: usize,
    /// `S(y^α)` at the control points (`S(y^0) = 1`), `y^α` and `y_s`.
    shifts: Vec<Matrix6<f64>>,
    points: Vec<Vector6<f64>>,
    end: Vector6<f64>,
    shift_end: Matrix6<f64>,
    /// `J(0)`, `J(0)⁻¹`, `J(y_s)`, `J(y_s)⁻ᵀ`.
    j0: Matrix6<f64>,
    j0_inv: Matrix6<f64>,
    j_end: Matrix6<f64>,
    j_end_inv_t: Matrix6<f64>,
    /// The chart control `u_θ`, the chart end momentum `P` and `p_{k+1}` (tangent).
    u_theta: Vector6<f64>,
    /// The bilinear terms of the columns as matrices acting on the variation `d` ([`contraction`]):
    /// `(S'(y^α)[d])ᵀ u_θ` per control point (empty without a control on the joint),
    /// `(S'(y_s)[d])ᵀ P`, `(J'(0)[d])ᵀ J(0)⁻ᵀ G` (`G = S(y_s)ᵀ P − J(0)ᵀ p_k − Σ_α w_α Δt
    /// S(y^α)ᵀ u_θ`, the centre joints' rows, module docs: what moving `η` turns through `J(η)`)
    /// and `(J'(y_s)[d])ᵀ p_{k+1}`.
    control_curvature: Vec<Matrix6<f64>>,
    end_curvature: Matrix6<f64>,
    centre_curvature: Matrix6<f64>,
    momentum_curvature: Matrix6<f64>,
    p_chart: Vector6<f64>,
    p_next: Vector6<f64>,
}

/// Scratch of the linearisation on the chart, made by the first one (module docs).
#[derive(Clone, Debug)]
pub(crate) struct ChartLinWork {
    centred: CentredPoints,
    newton: NewtonFactorization,
    forces: JointForces,
    wrenches: Vec<Force>,
    dq: Vec<Lanes>,
    rows: Vec<Lanes>,
    rhs: Vec<Lanes>,
    sol: Vec<Lanes>,
    /// The chart control variation `δu_θ` of each lane, `(n,)`.
    du: Vec<Lanes>,
    /// The solve's part of the momentum row's variation and of the centre joints' rows
    /// (summed over the step variables), `(n + n_c,)` each.
    momentum: Vec<Lanes>,
    centre_rows: Vec<Lanes>,
    joints: Vec<JointTerms>,
    /// Columns `[δy_s (n); δP (n); e (n_c)]` of every [`Column`], `(2n + n_c) × (n_c + 3n)`.
    raw: DMatrix<f64>,
    /// The columns solved, with their columns of `raw`.
    solve: Vec<(Column, usize)>,
    /// The constrained step's part (`None` without constraints).
    kkt: Option<Box<Kkt>>,
    /// The `π̃` columns' `e` rows `H` (`n_c × n_c`, row-major) and their LU pivots, `H⁻¹`
    /// (column-major), a column's target `(n_c,)` and the corrections `Λ` of every column of `x`
    /// (`n_c × 3n`, column-major).
    h: Vec<f64>,
    pivots: Vec<usize>,
    h_inv: Vec<f64>,
    target: Vec<f64>,
    lambda: Vec<f64>,
}

/// The constrained linearisation's data on the centred expansion (module docs, "With
/// holonomic constraints"), `m` constraints, `na` coordinates, `s` intervals.
#[derive(Clone, Debug)]
struct Kkt {
    /// The integrator's constraints on the bodies of the centred expansion.
    constraints: Vec<Constraint>,
    scratch: ConstraintScratch,
    /// Kinematics at the step's end `q_{k+1}` (not a control point of the midpoint rule).
    end: PointState,
    q_end: Vec<f64>,
    /// `C_1`, `C_2` (with the interior rows), the Hessians, `K`, `W` and the LUs of module
    /// `constrained` on the centred expansion, whose prescribed coordinates (the centre
    /// joints, kinematic joints) are `prescribed` `(na,)`.
    factors: KktFactors,
    prescribed: Vec<bool>,
    /// A gradient row `(na,)`, the interior values `(s·m,)` (not needed here).
    row: Vec<f64>,
    values: Vec<f64>,
    /// `δλ^β` of every lane of the current chunk, `(s·m)` (entry `β·m + i`, zero on inactive
    /// constraints).
    lane_dlambda: Vec<Lanes>,
    /// The impulses' variations in the composite rows of every lane of the current chunk,
    /// `(s·n_c)` (block `β` at `β·n_c`, [`VariationalIntegrator::composite_impulses`]).
    lane_impulses: Vec<Lanes>,
    /// `Σ_β δλ^β` of every raw column (`m × (n_c + 3n)`), and their `π̃`-corrected combination,
    /// `∂λ/∂(q_k, p_k, u)` (`m × 3n`).
    raw_dlambda: DMatrix<f64>,
    jacobian: DMatrix<f64>,
}

impl Kkt {
    fn new(constraints: &[Constraint], centred: &vidyn_rbd::CentredExpansion, n: usize, s: usize, composite: usize, prescribed: Vec<bool>) -> Self {
        let (m, na) = (constraints.len(), centred.model.nv);
        Self {
            constraints: constraints.iter().map(|c| c.on_bodies(&centred.coordinates)).collect(),
            scratch: ConstraintScratch::new(na),
            end: PointState::new(na),
            q_end: vec![0.0; na],
            factors: KktFactors::new(na, s, m),
            prescribed,
            row: vec![0.0; na],
            values: vec![0.0; s * m],
            lane_dlambda: vec![[0.0; LANES]; s * m],
            lane_impulses: vec![[0.0; LANES]; s * composite],
            raw_dlambda: DMatrix::zeros(m, composite + 3 * n),
            jacobian: DMatrix::zeros(m, 3 * n),
        }
    }
}

impl ChartLinWork {
    fn new(vi: &VariationalIntegrator, chart: &Chart) -> Self {
        let (n, s, p) = (vi.n(), vi.scheme.s, vi.scheme.points());
        let centred = &chart.centred;
        let na = centred.model.nv;
        let mut prescribed = vec![true; na];
        for (i, &c) in centred.coordinates.iter().enumerate() {
            prescribed[c] = vi.prescribed[i];
        }
        let forces = centred_forces(vi, chart);
        let mut newton = vi.newton_factorization(na, &prescribed);
        let kkt = (!vi.constraints.is_empty()).then(|| Box::new(Kkt::new(&vi.constraints, centred, n, s, composite_count(chart), prescribed)));
        newton.ensure_lanes();
        let wrenches = if vi.wrenches.is_empty() {
            Vec::new()
        } else {
            let mut w = vec![Force::zero(); na];
            for (&c, f) in centred.coordinates.iter().zip(&vi.wrenches) {
                w[c] = *f;
            }
            w
        };
        let mut composite = 0;
        let joints = chart
            .map
            .composite_joints()
            .zip(&centred.centres)
            .map(|(j, &centre)| {
                let t = JointTerms {
                    first: j.first(),
                    d: j.nv(),
                    centre,
                    composite,
                    shifts: vec![Matrix6::identity(); p],
                    points: vec![Vector6::zeros(); p],
                    end: Vector6::zeros(),
                    shift_end: Matrix6::identity(),
                    j0: j.velocity_map(&[0.0; 6]),
                    j0_inv: j.velocity_map(&[0.0; 6]).try_inverse().unwrap_or_else(Matrix6::identity),
                    j_end: Matrix6::identity(),
                    j_end_inv_t: Matrix6::identity(),
                    u_theta: Vector6::zeros(),
                    control_curvature: Vec::with_capacity(p),
                    end_curvature: Matrix6::zeros(),
                    centre_curvature: Matrix6::zeros(),
                    momentum_curvature: Matrix6::zeros(),
                    p_chart: Vector6::zeros(),
                    p_next: Vector6::zeros(),
                };
                composite += j.nv();
                t
            })
            .collect();
        let lanes = |len: usize| vec![[0.0; LANES]; len];
        Self {
            centred: CentredPoints::new(centred, p),
            newton,
            forces,
            wrenches,
            dq: lanes(p * na),
            rows: lanes(p * na),
            rhs: lanes(s * na),
            sol: lanes(s * na),
            du: lanes(n),
            momentum: lanes(na),
            centre_rows: lanes(na),
            joints,
            raw: DMatrix::zeros(2 * n + composite, composite + 3 * n),
            solve: Vec::with_capacity(composite + 3 * n),
            kkt,
            h: vec![0.0; composite * composite],
            pivots: vec![0; composite],
            h_inv: vec![0.0; composite * composite],
            target: vec![0.0; composite],
            lambda: vec![0.0; composite * 3 * n],
        }
    }

    fn composite(&self) -> usize {
        self.joints.iter().map(|j| j.d).sum()
    }
}

/// The integrator's damping and springs on the coordinates of the centred expansion (none on
/// the centre joints).
pub(crate) fn centred_forces(vi: &VariationalIntegrator, chart: &Chart) -> JointForces {
    let centred = &chart.centred;
    let mut forces = JointForces::none(centred.model.nv);
    for (i, &c) in centred.coordinates.iter().enumerate() {
        forces.damping[c] = vi.forces.damping[i];
        forces.stiffness[c] = vi.forces.stiffness[i];
        forces.rest[c] = vi.forces.rest[i];
    }
    forces
}

/// A solved step's control points on the centred expansion with its centre joints at `η = 0`,
/// in the chart centred at the step's start: the point at which the linearisation and the
/// second order on the group (module `chart_second_order`) differentiate.
#[derive(Clone, Debug)]
pub(crate) struct CentredPoints {
    pub(crate) points: StepPoints,
    /// `q̂^0` `(N,)` and `ẑ = (q̂^1, …, q̂^s)` `(s N,)`, `N` the centred expansion's coordinates.
    q0: Vec<f64>,
    z: Vec<f64>,
}

impl CentredPoints {
    pub(crate) fn new(centred: &vidyn_rbd::CentredExpansion, points: usize) -> Self {
        let big = centred.model.nv;
        Self { points: StepPoints::new(&centred.model, points), q0: vec![0.0; big], z: vec![0.0; (points - 1) * big] }
    }

    /// The points of the step just solved in `ws` (its control points in `ws.points`, its
    /// chart's centre in `ws.chart`), with the centred expansion's body wrenches `wrenches`.
    pub(crate) fn set(&mut self, chart: &Chart, sc: &crate::Scheme, dt: f64, ws: &ViWorkspace, wrenches: &[Force]) {
        let (solution, centred) = (&ws.points, &chart.centred);
        let (model, big) = (&*centred.model, centred.model.nv);
        self.q0.fill(0.0);
        self.z.fill(0.0);
        for (i, &c) in centred.coordinates.iter().enumerate() {
            self.q0[c] = solution.q[0][i];
            for g in 1..sc.points() {
                self.z[(g - 1) * big + c] = solution.q[g][i];
            }
        }
        self.points.set_chart(model, |placements| centred.chart_placements(&chart.map, ws.chart.centre(), placements));
        self.points.set(model, sc, dt, &self.q0, &self.z, wrenches);
    }
}

/// The number of composite coordinates `n_c` of a chart.
fn composite_count(chart: &Chart) -> usize {
    chart.map.composite_joints().map(|j| j.nv()).sum()
}

/// The matrix `C` with `C d = (F'[d])ᵀ w` for all `d` (`d` entries): column `i` is
/// `(F'[e_i])ᵀ w`, `F'` a derivative in direction `e_i` given by `derivative`.
fn contraction(d: usize, derivative: impl Fn(&[f64]) -> Matrix6<f64>, w: &Vector6<f64>) -> Matrix6<f64> {
    let mut c = Matrix6::zeros();
    for i in 0..d {
        let mut e = [0.0; 6];
        e[i] = 1.0;
        c.set_column(i, &(derivative(&e).transpose() * w));
    }
    c
}

/// `out = raw[..out.len(), n_c + x] + Σ_k raw[..out.len(), k] Λ[k, x]` (`k < n_c`, the `π̃`
/// columns: the correction of column `x`, `lambda` its column of `Λ`).
fn corrected(raw: &DMatrix<f64>, nc: usize, x: usize, lambda: &[f64], out: &mut [f64]) {
    let (rows, len) = (raw.nrows(), out.len());
    let columns = raw.as_slice();
    out.copy_from_slice(&columns[(nc + x) * rows..(nc + x) * rows + len]);
    for (k, &l) in lambda.iter().enumerate() {
        for (o, &v) in out.iter_mut().zip(&columns[k * rows..k * rows + len]) {
            *o += v * l;
        }
    }
}

/// The lanes of the entries `at` (at most six) of `v`, zero-padded.
fn gather(v: &[Lanes], at: impl Iterator<Item = usize>) -> [Lanes; 6] {
    let mut x = ZERO_L6;
    for (xr, a) in x.iter_mut().zip(at) {
        *xr = v[a];
    }
    x
}

/// The 6-vector of a joint's block `x[first..first + d]`, zero-padded.
pub(crate) fn block(x: &[f64], first: usize, d: usize) -> Vector6<f64> {
    let mut v = Vector6::zeros();
    v.rows_mut(0, d).copy_from_slice(&x[first..first + d]);
    v
}

impl VariationalIntegrator {
    /// The linearisation (module docs) of the step of a model with composite joints that
    /// [`Self::step`] has just solved in `ws` (its control points in `ws.points`, its chart
    /// quantities in `ws.chart`): `a` `(2n × 2n)`, `b` `(2n × n)` in tangent coordinates.
    pub(crate) fn linearize_on_chart(&self, chart: &Chart, ws: &mut ViWorkspace, step: usize, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>) -> Result<()> {
        let mut lin = ws.chart.lin.take().unwrap_or_else(|| Box::new(ChartLinWork::new(self, chart)));
        let result = self.linearize_with(chart, ws, &mut lin, step, a, b);
        if let (Ok(()), Some(kkt)) = (&result, lin.kkt.as_deref()) {
            ws.constraint.lambda_jacobian.copy_from(&kkt.jacobian);
        }
        ws.chart.lin = Some(lin);
        result
    }

    /// [`Self::linearize_on_chart`] with its scratch `lin` taken out of `ws`.
    fn linearize_with(&self, chart: &Chart, ws: &ViWorkspace, lin: &mut ChartLinWork, step: usize, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>) -> Result<()> {
        let (n, p, dt) = (self.n(), self.scheme.points(), self.dt);
        let (points, cw) = (&ws.points, &ws.chart);
        let centred = &chart.centred;
        let (model, sc) = (&*centred.model, &self.scheme);
        lin.centred.set(chart, sc, dt, ws, &lin.wrenches);
        if !lin.newton.factorize(model, sc, dt, &lin.forces, &lin.centred.points, true) {
            return Err(ViError::SingularJacobian { step });
        }
        if lin.kkt.is_some() && !self.prepare_chart_kkt(chart, lin, &ws.constraint.lambda, &ws.constraint.kkt.active) {
            return Err(ViError::DegenerateConstraints { step });
        }
        for (t, j) in lin.joints.iter_mut().zip(chart.map.composite_joints()) {
            for (alpha, (shift, y)) in t.shifts.iter_mut().zip(&mut t.points).enumerate() {
                *y = block(&points.q[alpha], t.first, t.d);
                *shift = j.shift(y.as_slice());
            }
            t.end = (0..p).map(|alpha| t.points[alpha] * sc.endpoint(alpha)).sum();
            t.shift_end = j.shift(t.end.as_slice());
            t.j_end = j.velocity_map(t.end.as_slice());
            t.j_end_inv_t = t.j_end.transpose().try_inverse().ok_or(ViError::SingularJacobian { step })?;
            t.u_theta = block(cw.u_theta(), t.first, t.d);
            t.p_chart = block(cw.p_theta_next(), t.first, t.d);
            t.p_next = t.j_end_inv_t * t.p_chart;
            let control: Vector6<f64> = (0..p).map(|alpha| t.shifts[alpha].transpose() * t.u_theta * (sc.weights[alpha] * dt)).sum();
            let mut g = t.shift_end.transpose() * t.p_chart - t.j0.transpose() * block(cw.momentum(), t.first, t.d) - control;
            if let Some(kkt) = lin.kkt.as_deref() {
                // the constraint impulse (C_1ᵀ λ^0)_c of the step's first row (the interior ones
                // turn with the centre rows, module docs: g is G − Σ_β C_η(X_β)ᵀ λ^β)
                let (f, m) = (&kkt.factors, kkt.constraints.len());
                for (i, l) in ws.constraint.lambda[..m].iter().enumerate() {
                    for r in 0..t.d {
                        g[r] += f.c1[(i, centred.coordinates[t.first + r])] * l;
                    }
                }
            }
            let centre_force = t.j0.transpose().try_inverse().unwrap_or_else(Matrix6::identity) * g;
            t.control_curvature.clear();
            if t.u_theta != Vector6::zeros() {
                for y in &t.points {
                    t.control_curvature.push(j.shift_derivative_contraction(y.as_slice(), &t.u_theta));
                }
            }
            t.end_curvature = j.shift_derivative_contraction(t.end.as_slice(), &t.p_chart);
            t.centre_curvature = contraction(t.d, |e| j.velocity_map_derivative(&[0.0; 6], e), &centre_force);
            t.momentum_curvature = contraction(t.d, |e| j.velocity_map_derivative(t.end.as_slice(), e), &t.p_next);
        }
        // the columns to solve, with their places in `raw`: a composite joint's momentum
        // enters through `π̃` only (its own column is zero), and with one interval a control
        // enters the first row as the momenta do (`controls_from_chart_momenta`)
        let nc = lin.composite();
        // (a kinematic joint's u slot is no force)
        let one_interval = self.scheme.s == 1 && !self.prescribed.iter().any(|&k| k);
        let composite = |i: usize| lin.joints.iter().any(|t| (t.first..t.first + t.d).contains(&i));
        let mut solve = std::mem::take(&mut lin.solve);
        solve.clear();
        // those that move no point first, so that whole chunks skip the product
        solve.extend((0..nc).map(|k| (Column::Centre(k), k)));
        solve.extend((0..n).filter(|&i| !composite(i)).map(|i| (Column::P(i), nc + n + i)));
        if !one_interval {
            solve.extend((0..n).map(|i| (Column::U(i), nc + 2 * n + i)));
        }
        solve.extend((0..n).map(|i| (Column::Q(i), nc + i)));
        // every column is written in full below but a composite joint's momentum columns,
        // which are zero (they enter through π̃)
        for t in &lin.joints {
            for i in t.first..t.first + t.d {
                lin.raw.column_mut(nc + n + i).as_mut_slice().fill(0.0);
            }
        }
        for chunk in solve.chunks(LANES) {
            self.chart_columns(chart, lin, chunk);
        }
        lin.solve = solve;
        if one_interval {
            self.controls_from_chart_momenta(lin);
        }
        self.finish_chart_linearization(lin, step, a, b)
    }

    /// With one interval (`s = 1`) the raw control columns from the momentum ones: the chart
    /// control `δu_θ` enters the first DEL row as `c_0 Δt δu_θ`, as the momenta (`p_k` of a
    /// 1-dof joint, `π̃` of a composite one) enter it with weight 1, and adds
    /// `c_1 Δt δu_θ` to `δP` and `Σ_α w_α Δt S(y^α)ᵀ δu_θ` to `δG` explicitly (module docs).
    fn controls_from_chart_momenta(&self, lin: &mut ChartLinWork) {
        let (n, dt, sc) = (self.n(), self.dt, &self.scheme);
        let nc = lin.composite();
        let (c0, c1) = (sc.control_weight(0) * dt, sc.control_weight(1) * dt);
        for i in 0..n {
            let col = nc + 2 * n + i;
            match lin.joints.iter().find(|t| (t.first..t.first + t.d).contains(&i)) {
                None => {
                    for r in 0..lin.raw.nrows() {
                        lin.raw[(r, col)] = c0 * lin.raw[(r, nc + n + i)];
                    }
                    lin.raw[(n + i, col)] += c1;
                    if let Some(kkt) = lin.kkt.as_deref_mut() {
                        for r in 0..kkt.raw_dlambda.nrows() {
                            kkt.raw_dlambda[(r, col)] = c0 * kkt.raw_dlambda[(r, nc + n + i)];
                        }
                    }
                }
                Some(t) => {
                    // δu_θ = J(0)ᵀ e_i on the joint's coordinates, the π̃ columns of the joint
                    let du = t.j0.row(i - t.first).transpose();
                    for r in 0..lin.raw.nrows() {
                        lin.raw[(r, col)] = c0 * (0..t.d).map(|k| du[k] * lin.raw[(r, t.composite + k)]).sum::<f64>();
                    }
                    if let Some(kkt) = lin.kkt.as_deref_mut() {
                        for r in 0..kkt.raw_dlambda.nrows() {
                            kkt.raw_dlambda[(r, col)] = c0 * (0..t.d).map(|k| du[k] * kkt.raw_dlambda[(r, t.composite + k)]).sum::<f64>();
                        }
                    }
                    let dg: Vector6<f64> = (0..sc.points()).map(|alpha| t.shifts[alpha].transpose() * du * (sc.weights[alpha] * dt)).sum();
                    let de = -dg + t.shift_end.transpose() * du * c1;
                    for k in 0..t.d {
                        lin.raw[(n + t.first + k, col)] += c1 * du[k];
                        lin.raw[(2 * n + t.composite + k, col)] += de[k];
                    }
                }
            }
        }
    }

    /// The constrained linearisation's data at the solved step (module docs): `C_1`, `C_2`
    /// (with the interior rows for `s ≥ 2`), `Σ λ^0_i ∂²h_i` at the start and the interior
    /// Hessians, and the KKT factors of module `constrained` with their momentum and centre
    /// rows (`false` when singular), for the constraints `active` the step imposed and its
    /// multipliers `lambda` `(s·m,)`. The factorisation must be current.
    fn prepare_chart_kkt(&self, chart: &Chart, lin: &mut ChartLinWork, lambda: &[f64], active: &[usize]) -> bool {
        let (sc, dt, s) = (&self.scheme, self.dt, self.scheme.s);
        let (model, na) = (&*chart.centred.model, chart.centred.model.nv);
        let ChartLinWork { centred: CentredPoints { points, q0, z }, newton, forces, rhs, sol, momentum, centre_rows, kkt, .. } = lin;
        let Some(kkt) = kkt.as_deref_mut() else { return true };
        let m = kkt.constraints.len();
        let f = &mut kkt.factors;
        f.active.clear();
        f.active.extend_from_slice(active);
        kkt.raw_dlambda.as_mut_slice().fill(0.0);
        // the end q_{k+1} = Σ_α endpoint[α] x^α in the centred expansion's coordinates
        for (a, e) in kkt.q_end.iter_mut().enumerate() {
            *e = sc.endpoint(0) * q0[a] + (1..sc.points()).map(|g| sc.endpoint(g) * z[(g - 1) * na + a]).sum::<f64>();
        }
        kkt.end.update_kinematics(model, points.joint_placements(model), &kkt.q_end);
        let set = ConstraintSet { model, constraints: &kkt.constraints, s };
        set.gradient_rows(active, &points.states[0], &mut kkt.scratch, &mut f.c1.rows_mut(0, m), 1.0, &mut kkt.row);
        set.gradient_rows(active, &kkt.end, &mut kkt.scratch, &mut f.c2.rows_mut((s - 1) * m, m), sc.endpoint(s), &mut kkt.row);
        set.interior_rows(f, &points.states, &mut kkt.scratch, &mut kkt.values, &mut kkt.row);
        f.hessian.as_mut_slice().fill(0.0);
        Constraint::add_weighted_hessians(&kkt.constraints, active, model, &points.states[0], &mut kkt.scratch, |i| lambda[i], &mut f.hessian);
        set.interior_hessians(f, &points.states, &mut kkt.scratch, lambda);
        let mut buf = LaneBuffers { rhs, sol, momentum: Some(&mut momentum[..]), centre: Some(&mut centre_rows[..]) };
        f.factor(&mut buf, &kkt.prescribed, false, |b| {
            newton.solve_lanes(model, sc, dt, forces, b.rhs, b.sol, b.momentum.as_deref_mut(), b.centre.as_deref_mut())
        })
    }

    /// The raw columns (module docs) of `kinds` (at most [`LANES`], each with its column of
    /// `raw`), one lane each.
    fn chart_columns(&self, chart: &Chart, lin: &mut ChartLinWork, kinds: &[(Column, usize)]) {
        let (n, s, p, dt, sc) = (self.n(), self.scheme.s, self.scheme.points(), self.dt, &self.scheme);
        let centred = &chart.centred;
        let (model, na, coord) = (&*centred.model, centred.model.nv, &centred.coordinates);
        let composite_of = |i: usize| lin.joints.iter().position(|t| (t.first..t.first + t.d).contains(&i));
        lin.dq.fill([0.0; LANES]);
        lin.rhs.fill([0.0; LANES]);
        lin.du.fill([0.0; LANES]);
        let mut lanes = 0;
        // the input directions: point variations, explicit right-hand sides, chart controls
        for (l, &(kind, _)) in kinds.iter().enumerate() {
            lanes = l + 1;
            match kind {
                Column::Centre(k) => {
                    // k < n_c: some composite joint holds it
                    if let Some(t) = lin.joints.iter().find(|t| (t.composite..t.composite + t.d).contains(&k)) {
                        lin.rhs[coord[t.first + k - t.composite]][l] -= 1.0;
                    }
                }
                Column::Q(i) => match composite_of(i) {
                    None => {
                        lin.dq[coord[i]][l] = 1.0;
                        if self.prescribed[i] {
                            // a kinematic joint's control point z = (ρ_{k+1} − e_0 ρ_k)/e_1
                            lin.dq[na + coord[i]][l] = -sc.endpoint(0) / sc.endpoint(1);
                        }
                    }
                    Some(j) => {
                        let t = &lin.joints[j];
                        let eta = t.j0_inv.column(i - t.first);
                        for alpha in 0..p {
                            for r in 0..t.d {
                                lin.dq[alpha * na + t.centre + r][l] = eta[r];
                            }
                        }
                    }
                },
                Column::P(i) => {
                    if composite_of(i).is_none() {
                        lin.rhs[coord[i]][l] -= 1.0;
                    }
                }
                Column::U(i) => match composite_of(i) {
                    // a kinematic joint's u slot is ρ_{k+1}, not a force
                    None if self.prescribed[i] => lin.dq[na + coord[i]][l] = 1.0 / sc.endpoint(1),
                    None => lin.du[i][l] = 1.0,
                    Some(j) => {
                        let t = &lin.joints[j];
                        for r in 0..t.d {
                            lin.du[t.first + r][l] = t.j0[(i - t.first, r)];
                        }
                    }
                },
            }
        }
        for i in 0..n {
            for rho in 0..s {
                let w = sc.control_weight(rho) * dt;
                for l in 0..LANES {
                    lin.rhs[rho * na + coord[i]][l] -= w * lin.du[i][l];
                }
            }
        }
        if let Some(kkt) = lin.kkt.as_deref() {
            // the start's constraint impulse moves with it: f_1 += Σ λ^0_i ∂²h_i δx_0 (row 0), and
            // an interior one with its point's input variation (a moved centre): f_β += H_β δx_β
            // (column by column: each row still sums over b in order; a point no lane moves adds nothing)
            let f = &kkt.factors;
            for (beta, h) in std::iter::once(&f.hessian).chain(&f.interior).enumerate() {
                for (b, column) in h.as_slice().chunks_exact(na).enumerate() {
                    let d = lin.dq[beta * na + b];
                    if d == [0.0; LANES] {
                        continue;
                    }
                    for (a, &hab) in column.iter().enumerate() {
                        if hab != 0.0 {
                            for l in 0..LANES {
                                lin.rhs[beta * na + a][l] += hab * d[l];
                            }
                        }
                    }
                }
            }
        }
        // δz = J⁻¹ (f − (∂R/∂x) dx); the rows' variation along the whole direction is the
        // product's (input direction) plus the solve's (δz): the momentum row, and the rows of
        // the centre joints (prescribed in the centred expansion) summed over the step variables
        if lin.dq.iter().any(|d| d.iter().any(|&x| x != 0.0)) {
            lin.newton.del_jvp_lanes(model, sc, dt, &lin.forces, &lin.dq, &mut lin.rows);
        } else {
            lin.rows.fill([0.0; LANES]);
        }
        for (f, r) in lin.rhs.iter_mut().zip(&lin.rows) {
            for l in 0..LANES {
                f[l] -= r[l];
            }
        }
        lin.newton.solve_lanes(model, sc, dt, &lin.forces, &lin.rhs, &mut lin.sol, Some(&mut lin.momentum), Some(&mut lin.centre_rows));
        Self::constrain_chart_columns(lin, sc, na);
        if let Some(kkt) = lin.kkt.as_deref_mut() {
            let m = kkt.constraints.len();
            for (l, &(_, col)) in kinds.iter().enumerate().take(lanes) {
                for &i in &kkt.factors.active {
                    let mut dl = kkt.lane_dlambda[i][l];
                    for beta in 1..s {
                        dl += kkt.lane_dlambda[beta * m + i][l];
                    }
                    kkt.raw_dlambda[(i, col)] = dl;
                }
            }
        }
        for (d, x) in lin.dq[na..].iter_mut().zip(&lin.sol) {
            for l in 0..LANES {
                d[l] += x[l];
            }
        }
        Self::composite_impulses(lin, s, na, coord);
        let (cs, w, nc) = (sc.control_weight(s) * dt, &sc.weights, lin.composite());
        for (l, &(_, col)) in kinds.iter().enumerate().take(lanes) {
            let mut raw = lin.raw.column_mut(col);
            for (i, &c) in coord[..n].iter().enumerate() {
                raw[i] = (0..p).map(|alpha| sc.endpoint(alpha) * lin.dq[alpha * na + c][l]).sum();
                raw[n + i] = lin.rows[s * na + c][l] + lin.momentum[c][l] + cs * lin.du[i][l];
            }
        }
        // the composite rows e of every lane at once
        for t in &lin.joints {
            let centre = t.centre..t.centre + t.d;
            let own = &coord[t.first..t.first + t.d];
            let mut dg = gather(&lin.centre_rows, centre.clone());
            for x in 0..p {
                add_l6(&mut dg, &gather(&lin.rows, centre.clone().map(|c| x * na + c)));
            }
            let du = gather(&lin.du, t.first..t.first + t.d);
            let mut dy_end = ZERO_L6;
            for alpha in 0..p {
                let dy = gather(&lin.dq, own.iter().map(|&c| alpha * na + c));
                let mut term = mul_transposed_l6(&t.shifts[alpha], &du);
                if let Some(c) = t.control_curvature.get(alpha) {
                    add_l6(&mut term, &mul_l6(c, &dy));
                }
                let (wdt, e) = (w[alpha] * dt, sc.endpoint(alpha));
                for k in 0..6 {
                    for l in 0..LANES {
                        dg[k][l] += term[k][l] * wdt;
                        dy_end[k][l] += dy[k][l] * e;
                    }
                }
            }
            let mut dp = gather(&lin.rows, own.iter().map(|&c| s * na + c));
            add_l6(&mut dp, &gather(&lin.momentum, own.iter().copied()));
            // a moved centre X_0 = c τ(η) reads the rows of η through J(η)⁻ᵀ
            let eta = gather(&lin.dq, centre);
            let mut e = dg.map(|x| x.map(|v| -v));
            for k in 0..6 {
                for l in 0..LANES {
                    dp[k][l] += du[k][l] * cs;
                }
            }
            add_l6(&mut e, &mul_transposed_l6(&t.shift_end, &dp));
            add_l6(&mut e, &mul_l6(&t.end_curvature, &dy_end));
            add_l6(&mut e, &mul_l6(&t.centre_curvature, &eta));
            if let Some(kkt) = lin.kkt.as_deref() {
                // the impulses' variations (Self::composite_impulses), block β = 0 first
                for beta in 0..s {
                    add_l6(&mut e, &gather(&kkt.lane_impulses, (t.composite..t.composite + t.d).map(|r| beta * nc + r)));
                }
            }
            for (l, &(_, col)) in kinds.iter().enumerate().take(lanes) {
                for r in 0..t.d {
                    lin.raw[(2 * n + t.composite + r, col)] = e[r][l];
                }
            }
        }
    }

    /// The variations of the impulses in the composite rows (module docs, "With holonomic
    /// constraints") on every lane, block `β` of `lane_impulses` at `β·n_c`: for `β = 0` the
    /// start's `(C_1ᵀ δλ^0 + Σ λ^0_i ∂²h_i δx_0)_c`, for `β ≥ 1` the interior one's along the
    /// centre, `C_η(X_β)ᵀ δλ^β + H_β[η, ·] δx_β` (`δx` in `lin.dq` with the solution added,
    /// `δλ` in `lane_dlambda`). Nothing without constraints.
    fn composite_impulses(lin: &mut ChartLinWork, s: usize, na: usize, coord: &[usize]) {
        let ChartLinWork { kkt, joints, dq, .. } = lin;
        let Some(kkt) = kkt.as_deref_mut() else { return };
        let (f, m) = (&kkt.factors, kkt.constraints.len());
        let nc: usize = joints.iter().map(|t| t.d).sum();
        for t in joints.iter() {
            for beta in 0..s {
                for r in 0..t.d {
                    // the start's rows are the composite coordinates, the interior ones the centre's
                    let (a, c, h) = if beta == 0 { (coord[t.first + r], &f.c1, &f.hessian) } else { (t.centre + r, &f.c2, &f.interior[beta - 1]) };
                    let first = if beta == 0 { 0 } else { (beta - 1) * m };
                    let mut impulse = [0.0; LANES];
                    for &i in &f.active {
                        let (ci, dl) = (c[(first + i, a)], &kkt.lane_dlambda[beta * m + i]);
                        for l in 0..LANES {
                            impulse[l] += ci * dl[l];
                        }
                    }
                    let mut curvature = [0.0; LANES];
                    // row a of the column-major h
                    for (b, &hab) in h.as_slice().iter().skip(a).step_by(na).enumerate().filter(|&(_, &hab)| hab != 0.0) {
                        let d = &dq[beta * na + b];
                        for l in 0..LANES {
                            curvature[l] += hab * d[l];
                        }
                    }
                    for l in 0..LANES {
                        kkt.lane_impulses[beta * nc + t.composite + r][l] = impulse[l] + curvature[l];
                    }
                }
            }
        }
    }

    /// The KKT completion of the lanes' solutions `w = J⁻¹ f_1` (module docs, module
    /// `constrained`): `f_2 = −Dh·δx` of each constrained point along the input direction (in
    /// `lin.dq`, before the solution is added: the end `e_0/e_s δx^0 + δx^s` scaled as `C_2`,
    /// an interior point its own), then `δz`, the momentum and the centre rows gain the
    /// solution's. Keeps `δλ^β` for the composite rows' impulses. Nothing without constraints.
    fn constrain_chart_columns(lin: &mut ChartLinWork, sc: &crate::scheme::Scheme, na: usize) {
        let ChartLinWork { dq, rhs, sol, momentum, centre_rows, kkt, .. } = lin;
        let Some(kkt) = kkt.as_deref_mut() else { return };
        let (s, m) = (sc.s, kkt.constraints.len());
        let ratio = sc.endpoint(0) / sc.endpoint(s);
        let f = &mut kkt.factors;
        let a = f.active.len();
        let mut buf = LaneBuffers { rhs, sol, momentum: Some(&mut momentum[..]), centre: Some(&mut centre_rows[..]) };
        for gr in 0..f.size() {
            let (g, i) = (gr / a, f.active[gr % a]);
            let mut point = [0.0; LANES];
            for (x, c) in row(&f.c2, g * m + i).enumerate() {
                // a contact's gradient is zero off its body's path (most of the coordinates)
                if c == 0.0 {
                    continue;
                }
                if g == s - 1 {
                    let (start, end) = (&dq[x], &dq[s * na + x]);
                    for l in 0..LANES {
                        point[l] += c * (ratio * start[l] + end[l]);
                    }
                } else {
                    let at = &dq[(g + 1) * na + x];
                    for l in 0..LANES {
                        point[l] += c * at[l];
                    }
                }
            }
            f.lane_compact[gr] = point.map(|p| -p);
        }
        f.solve_lanes(&mut buf);
        for bc in 0..f.size() {
            kkt.lane_dlambda[(bc / a) * m + f.active[bc % a]] = f.lane_compact[bc];
        }
    }

    /// `A`, `B` from the raw columns: the `π̃` correction and the maps at the step's ends
    /// (module docs).
    fn finish_chart_linearization(&self, lin: &mut ChartLinWork, step: usize, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>) -> Result<()> {
        let (n, dt) = (self.n(), self.dt);
        let nc = lin.composite();
        for r in 0..nc {
            for c in 0..nc {
                lin.h[r * nc + c] = lin.raw[(2 * n + r, c)];
            }
        }
        let pivot = small_lu(&mut lin.h, nc, &mut lin.pivots);
        if !(pivot > 0.0 && pivot.is_finite()) {
            return Err(ViError::SingularJacobian { step });
        }
        // H⁻¹ column by column (n_c solves instead of one per column of x)
        lin.h_inv.fill(0.0);
        for (k, column) in lin.h_inv.chunks_exact_mut(nc).enumerate() {
            column[k] = 1.0;
            small_solve(&lin.h, nc, &lin.pivots, column);
        }
        // column x of Λ is H⁻¹ ((J(0)ᵀ δp_k of a momentum column, else 0) − e)
        for (x, lambda) in lin.lambda.chunks_exact_mut(nc).enumerate() {
            let target = &mut lin.target;
            for (k, t) in target.iter_mut().enumerate() {
                *t = -lin.raw[(2 * n + k, nc + x)];
            }
            if let Some(t) = lin.joints.iter().find(|t| (n + t.first..n + t.first + t.d).contains(&x)) {
                for r in 0..t.d {
                    target[t.composite + r] += t.j0[(x - n - t.first, r)];
                }
            }
            for (r, l) in lambda.iter_mut().enumerate() {
                *l = target.iter().enumerate().map(|(k, &v)| lin.h_inv[k * nc + r] * v).sum();
            }
        }
        // [A B] is the corrected columns' first 2n rows, but for the rows below
        for x in 0..3 * n {
            let (m, mc) = if x < 2 * n { (&mut *a, x) } else { (&mut *b, x - 2 * n) };
            corrected(&lin.raw, nc, x, &lin.lambda[x * nc..(x + 1) * nc], m.column_mut(mc).as_mut_slice());
        }
        if let Some(kkt) = lin.kkt.as_deref_mut() {
            for x in 0..3 * n {
                corrected(&kkt.raw_dlambda, nc, x, &lin.lambda[x * nc..(x + 1) * nc], kkt.jacobian.column_mut(x).as_mut_slice());
            }
        }
        // a kinematic joint's p slot is v_{k+1} = (ρ_{k+1} − ρ_k)/Δt
        for i in (0..n).filter(|&i| self.prescribed[i]) {
            a.row_mut(n + i).fill(0.0);
            b.row_mut(n + i).fill(0.0);
            a[(n + i, i)] = -1.0 / dt;
            b[(n + i, i)] = 1.0 / dt;
        }
        // a composite joint's rows through the maps at the ends; only its own q_k columns
        // move the centre (η = J(0)⁻¹ δ)
        for t in &lin.joints {
            for x in 0..3 * n {
                let (m, mc) = if x < 2 * n { (&mut *a, x) } else { (&mut *b, x - 2 * n) };
                let column = m.column(mc);
                let column = column.as_slice();
                let dy = block(column, t.first, t.d);
                let dp = block(&column[n..], t.first, t.d);
                let moved = if (t.first..t.first + t.d).contains(&x) { t.shift_end * t.j0_inv.column(x - t.first) + dy } else { dy };
                let dq = t.j_end * moved;
                let dpn = t.j_end_inv_t * (dp - t.momentum_curvature * dy);
                for r in 0..t.d {
                    m[(t.first + r, mc)] = dq[r];
                    m[(n + t.first + r, mc)] = dpn[r];
                }
            }
        }
        Ok(())
    }
}
