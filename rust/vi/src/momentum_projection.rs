//! RATTLE's momentum projection at the end of a constrained step (Andersen 1983; Hairer,
//! Lubich & Wanner 2006 §VII.1.4; as a variational integrator on the constraint manifold's
//! cotangent bundle, Marsden & West 2001 §3.5).
//!
//! The constrained step of module `constrained` imposes `h(q_{k+1}) = 0` through the impulse
//! `−C(q_k)ᵀ λ_k` on its first row (and, for `s ≥ 2`, the impulses at its interior control
//! points), and its end momentum `D₂L_d + f⁺` keeps a normal part:
//! the knot velocity `M⁻¹ p` moves the contact points (by half a step of the stance wrench,
//! which the next step's impulse removes while the contact holds). Where the next step
//! releases the contact, that normal part became motion: a foot lifted while the leg pushes
//! got half a step of its push (on Talos's 6-D soles, 150 rad/s at the ankles). So each
//! constrained step ends as RATTLE does, with a second impulse at `q_{k+1}`:
//!
//! `p̃_{k+1} = p_{k+1} − Cᵀ μ_{k+1}`, `C M⁻¹ p̃_{k+1} = 0`, i.e. `μ = S⁻¹ C M⁻¹ p`, `S = C M⁻¹ Cᵀ`,
//!
//! with `C = Dh(q_{k+1})` of the constraints the step imposes and `M = M(q_{k+1})`
//! (tangent coordinates with composite joints): the knot momentum is that of a motion the
//! constraints allow. While a contact holds, the next step's impulse absorbs `μ`, so
//! configurations are unchanged (only the split of the impulse between the two ends of a
//! step); a lift-off starts from the projected momentum, a touchdown's knot keeps no normal
//! velocity (the plastic impact). The step's contact impulse reported by
//! [`crate::VariationalIntegrator::multipliers`] is `λ_k + μ_{k+1}` (its two halves, at `q_k`
//! and at `q_{k+1}`; for `s ≥ 2` with the interior impulses `λ^β` between them). Integrators
//! with kinematic joints, whose momentum slots hold prescribed velocities, are not projected.
//!
//! # Linearisation
//! With `ṽ = M⁻¹ p̃` (`C ṽ = 0`) and, along a tangent direction `δ` of `q_{k+1}` at fixed
//! momentum coordinates, `X δ = ∂(Cᵀ μ)/∂q δ`, `Y δ = ∂(C ṽ)/∂q δ`, `T δ = ∂(M ṽ)/∂q δ`
//! (`μ`, `ṽ` held), differentiating `C M⁻¹ p̃ = 0` gives
//!
//! `∂μ/∂q = S⁻¹ (Y − G (X + T))`, `∂μ/∂p = S⁻¹ G`, `G = C M⁻¹`,
//! `∂p̃/∂q = −X − Cᵀ ∂μ/∂q`, `∂p̃/∂p = 1 − Cᵀ ∂μ/∂p`,
//!
//! which compose with the step's own `A`, `B`: `D = ∂μ/∂q A_q + ∂μ/∂p A_p` (rows of `q_{k+1}`
//! and `p_{k+1}`, and the same for `B`) is `μ`'s Jacobian, and the momentum rows become
//! `A_p − X A_q − Cᵀ D`. `T` is [`vidyn_rbd::mass_matrix_and_derivative`]'s. `X`, `Y` come
//! from the constraint Hessians `H_i` in the chart centred at `q_{k+1}`, where
//! `C(q') = C_θ(θ) J(θ)⁻¹` (`J` the composite joints' velocity maps, `θ = J(0)⁻¹ δ + O(δ²)`):
//! `X = J(0)⁻ᵀ (Σ μ_i H_i − [J'(0)[·]ᵀ Cᵀμ]) J(0)⁻¹` and
//! `Y = (H_i J(0)⁻¹ ṽ − C J'(0)[·] J(0)⁻¹ ṽ) J(0)⁻¹`. O(a n² + n³) per step for `a` active
//! constraints, no allocation.

use crate::constraints::Constraint;
use crate::dense::{add_transposed_product, gemm_nn, lu_factor_in, lu_solve_in, ColMajor, ColMajorMut};
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use nalgebra::{DMatrix, Matrix6, Vector6};
use vidyn_rbd::CompositeJoint;
use vidyn_spatial::{Motion, Se3};

/// Scratch of the projection's linearisation (empty without constraints).
#[derive(Clone, Debug)]
pub(crate) struct ProjectionWork {
    /// `(m,)` the projection's multipliers `μ` (zero on inactive constraints).
    pub(crate) mu: Vec<f64>,
    /// `(n,)` `ṽ = M⁻¹ p̃`, `Cᵀ μ`, `J(0)⁻¹ ṽ`.
    velocity: Vec<f64>,
    ct_mu: Vec<f64>,
    chart_velocity: Vec<f64>,
    /// `(n, n)` `X + T`, `X`; `(m, n)` `Y`, `∂μ/∂q`, `∂μ/∂p` (first `a` rows); `(m, 3n)` `D`.
    hessian: DMatrix<f64>,
    x: DMatrix<f64>,
    y: DMatrix<f64>,
    dmu_dq: DMatrix<f64>,
    dmu_dp: DMatrix<f64>,
    d: DMatrix<f64>,
    /// `(n × n)` the LU factors of `M` at the knot (column-major) and their pivots.
    pub(crate) mass_lu: Vec<f64>,
    pub(crate) mass_pivots: Vec<usize>,
    /// `(n, 2n)` the change of the momentum rows of `A` (then `B`).
    change: DMatrix<f64>,
    column: Vec<f64>,
    /// `(n,)` a Hessian–vector product.
    column_n: Vec<f64>,
}

impl ProjectionWork {
    pub(crate) fn new(n: usize, m: usize) -> Self {
        let n = if m == 0 { 0 } else { n };
        Self {
            mu: vec![0.0; m],
            velocity: vec![0.0; n],
            ct_mu: vec![0.0; n],
            chart_velocity: vec![0.0; n],
            hessian: DMatrix::zeros(n, n),
            x: DMatrix::zeros(n, n),
            y: DMatrix::zeros(m, n),
            dmu_dq: DMatrix::zeros(m, n),
            dmu_dp: DMatrix::zeros(m, n),
            d: DMatrix::zeros(m, 3 * n),
            change: DMatrix::zeros(n, 2 * n),
            mass_lu: vec![0.0; n * n],
            mass_pivots: vec![0; n],
            column: vec![0.0; m],
            column_n: vec![0.0; n],
        }
    }
}

/// The knot's factors of a projected step ([`VariationalIntegrator::knot_constraint_factors`])
/// and its multipliers `μ`, what [`VariationalIntegrator::project_linearization`] reads besides
/// the step's end: kept with a solved step (module `solved`), so that its linearisation need
/// not compute them again.
#[derive(Clone, Debug)]
pub(crate) struct KeptKnot {
    placements: Vec<Se3>,
    columns: Vec<Motion>,
    c_knot: DMatrix<f64>,
    minv_ct: DMatrix<f64>,
    s_knot: Vec<f64>,
    s_pivots: Vec<usize>,
    mass_lu: Vec<f64>,
    mass_pivots: Vec<usize>,
    mu: Vec<f64>,
}

impl KeptKnot {
    /// A copy of the factors `ws` holds.
    pub(crate) fn of(ws: &ViWorkspace) -> Self {
        let (cw, pw) = (&ws.constraint, &ws.constraint.projection);
        Self {
            placements: cw.knot.placements.clone(),
            columns: cw.knot.columns.clone(),
            c_knot: cw.c_knot.clone(),
            minv_ct: cw.minv_ct.clone(),
            s_knot: cw.s_knot.clone(),
            s_pivots: cw.s_pivots.clone(),
            mass_lu: pw.mass_lu.clone(),
            mass_pivots: pw.mass_pivots.clone(),
            mu: pw.mu.clone(),
        }
    }

    /// Copies the factors `ws` holds into these (of the same integrator), without allocating.
    pub(crate) fn save(&mut self, ws: &ViWorkspace) {
        let (cw, pw) = (&ws.constraint, &ws.constraint.projection);
        self.placements.copy_from_slice(&cw.knot.placements);
        self.columns.copy_from_slice(&cw.knot.columns);
        self.c_knot.copy_from(&cw.c_knot);
        self.minv_ct.copy_from(&cw.minv_ct);
        self.s_knot.copy_from_slice(&cw.s_knot);
        self.s_pivots.copy_from_slice(&cw.s_pivots);
        self.mass_lu.copy_from_slice(&pw.mass_lu);
        self.mass_pivots.copy_from_slice(&pw.mass_pivots);
        self.mu.copy_from_slice(&pw.mu);
    }

    /// Puts these factors back into `ws`, as the step that computed them left them (the knot's
    /// placements and joint columns, the only kinematics they read).
    pub(crate) fn restore(&self, ws: &mut ViWorkspace) {
        let cw = &mut ws.constraint;
        cw.knot.restore_kinematics(&self.placements, &self.columns);
        cw.c_knot.copy_from(&self.c_knot);
        cw.minv_ct.copy_from(&self.minv_ct);
        cw.s_knot.copy_from_slice(&self.s_knot);
        cw.s_pivots.copy_from_slice(&self.s_pivots);
        let pw = &mut cw.projection;
        pw.mass_lu.copy_from_slice(&self.mass_lu);
        pw.mass_pivots.copy_from_slice(&self.mass_pivots);
        pw.mu.copy_from_slice(&self.mu);
    }
}

impl VariationalIntegrator {
    /// Whether the steps end with the momentum projection (module docs): with constraints and
    /// no kinematic joints.
    pub(crate) fn projects_momenta(&self) -> bool {
        !self.constraints.is_empty() && !self.prescribed.iter().any(|&k| k)
    }

    /// Projects the end momentum `p_next` of step `step` (solved in `ws`, at `q_next`) onto
    /// `C M⁻¹ p = 0` for the constraints the step imposes, sets `μ` and the step's reported
    /// impulse `λ + μ` (module docs; `μ = 0` when [`Self::projects_momenta`] is false).
    /// O(a n + a³).
    pub(crate) fn project_momentum(&self, ws: &mut ViWorkspace, step: usize, q_next: &[f64], p_next: &mut [f64]) -> Result<()> {
        let active = self.active_constraints(step)?;
        ws.constraint.projection.mu.fill(0.0);
        if self.projects_momenta() && !active.is_empty() {
            self.knot_constraint_factors(ws, step, active, q_next)?;
            let cw = &mut ws.constraint;
            let a = active.len();
            // μ = S⁻¹ (M⁻¹Cᵀ)ᵀ p
            for (r, c) in cw.compact[..a].iter_mut().enumerate() {
                *c = cw.minv_ct.column(r).iter().zip(p_next.iter()).map(|(x, y)| x * y).sum();
            }
            lu_solve_in(&cw.s_knot[..a * a], a, &cw.s_pivots, &mut cw.compact[..a]);
            for (r, &i) in active.iter().enumerate() {
                let mu = cw.compact[r];
                cw.projection.mu[i] = mu;
                for (pj, cj) in p_next.iter_mut().zip(cw.c_knot.row(r).iter()) {
                    *pj -= cj * mu;
                }
            }
        }
        // λ^0 + … + λ^{s−1} + μ (the interior blocks for s ≥ 2, module `constrained`)
        let (s, m) = (self.scheme.s, self.constraints.len());
        let cw = &mut ws.constraint;
        for (i, (out, mu)) in cw.impulse.iter_mut().zip(&cw.projection.mu).enumerate() {
            let mut l = cw.lambda[i];
            for beta in 1..s {
                l += cw.lambda[beta * m + i];
            }
            *out = l + mu;
        }
        Ok(())
    }

    /// Composes the step's `a`, `b` (tangent coordinates, before the projection) with the
    /// projection at `(q_next, p_next)` (`p_next` projected, as [`Self::project_momentum`] left
    /// it) and adds `∂μ/∂(q_k, p_k, u_k)` to the multipliers' Jacobian (module docs). Reads the
    /// knot's factors ([`Self::knot_constraint_factors`]) that [`Self::project_momentum`] left
    /// in `ws` at the end of [`Self::step`]: call it right after the step (nothing between them
    /// writes those factors; computing them again was 3 % of an ANYmal walk's FDDP solve).
    pub(crate) fn project_linearization(
        &self,
        ws: &mut ViWorkspace,
        step: usize,
        q_next: &[f64],
        p_next: &[f64],
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) -> Result<()> {
        let active = self.active_constraints(step)?;
        if active.is_empty() {
            return Ok(());
        }
        let n = self.n();
        let na = active.len();
        let ViWorkspace { constraint: cw, rbd, .. } = ws;
        let pw = &mut cw.projection;
        pw.velocity.copy_from_slice(p_next);
        lu_solve_in(&pw.mass_lu, n, &pw.mass_pivots, &mut pw.velocity);
        let t = vidyn_rbd::mass_matrix_and_derivative::<ViError>(self.model(), rbd, q_next, &mut pw.velocity, |_, _| Ok(()))?;
        // Cᵀμ and J(0)⁻¹ ṽ
        pw.ct_mu.fill(0.0);
        for (r, &i) in active.iter().enumerate() {
            for (c, x) in pw.ct_mu.iter_mut().zip(cw.c_knot.row(r).iter()) {
                *c += x * pw.mu[i];
            }
        }
        pw.chart_velocity.copy_from_slice(&pw.velocity);
        let chart = self.chart.as_deref();
        if let Some(chart) = chart {
            for j in chart.map.composite_joints() {
                let (f, d) = (j.first(), j.nv());
                let mapped = j0_inverse(&j) * padded(&pw.velocity, f, d);
                pw.chart_velocity[f..f + d].copy_from_slice(&mapped.as_slice()[..d]);
            }
        }
        // chart terms: Xc = Σ μ_i H_i, Yc rows (H_i J(0)⁻¹ṽ)ᵀ (Hessian–vector products)
        pw.x.fill(0.0);
        let mu = &pw.mu;
        Constraint::add_weighted_hessians(&self.constraints, active, &self.model, &cw.knot, &mut cw.scratch, |i| mu[i], &mut pw.x);
        for (r, &i) in active.iter().enumerate() {
            self.constraints[i].hessian_vector(&self.model, &cw.knot, &mut cw.scratch, &pw.chart_velocity, &mut pw.column_n);
            for (c, &v) in pw.column_n.iter().enumerate() {
                pw.y[(r, c)] = v;
            }
        }
        if let Some(chart) = chart {
            for j in chart.map.composite_joints() {
                let (f, d) = (j.first(), j.nv());
                let (c_block, b_block) = (padded(&pw.ct_mu, f, d), padded(&pw.chart_velocity, f, d));
                for e in 0..d {
                    let mut unit = [0.0; 6];
                    unit[e] = 1.0;
                    let jp = j.velocity_map_derivative(&[0.0; 6], &unit);
                    // X: −J'(0)[e]ᵀ Cᵀμ on the joint's rows; Y: −C J'(0)[e] J(0)⁻¹ṽ
                    let xt = jp.transpose() * c_block;
                    let yb = jp * b_block;
                    for k in 0..d {
                        pw.x[(f + k, f + e)] -= xt[k];
                    }
                    for r in 0..na {
                        pw.y[(r, f + e)] -= (0..d).map(|k| cw.c_knot[(r, f + k)] * yb[k]).sum::<f64>();
                    }
                }
                // X = J(0)⁻ᵀ Xc J(0)⁻¹, Y = Yc J(0)⁻¹ on the joint's rows and columns
                let inv = j0_inverse(&j);
                for c in 0..n {
                    let rows = nalgebra::Vector6::from_fn(|k, _| if k < d { pw.x[(f + k, c)] } else { 0.0 });
                    let mapped = inv.transpose() * rows;
                    for k in 0..d {
                        pw.x[(f + k, c)] = mapped[k];
                    }
                }
                for r in 0..n {
                    let cols = nalgebra::RowVector6::from_fn(|_, k| if k < d { pw.x[(r, f + k)] } else { 0.0 });
                    let mapped = cols * inv;
                    for k in 0..d {
                        pw.x[(r, f + k)] = mapped[k];
                    }
                }
                for r in 0..na {
                    let cols = nalgebra::RowVector6::from_fn(|_, k| if k < d { pw.y[(r, f + k)] } else { 0.0 });
                    let mapped = cols * inv;
                    for k in 0..d {
                        pw.y[(r, f + k)] = mapped[k];
                    }
                }
            }
        }
        // ∂μ/∂q = S⁻¹ (Y − G (X + T)), ∂μ/∂p = S⁻¹ G, G = (M⁻¹Cᵀ)ᵀ
        pw.hessian.copy_from(&pw.x);
        pw.hessian += t;
        let g_t = cw.minv_ct.columns(0, na);
        pw.dmu_dq.rows_mut(0, na).copy_from(&pw.y.rows(0, na));
        add_transposed_product(&mut pw.dmu_dq.rows_mut(0, na), -1.0, &g_t, &pw.hessian.as_view());
        pw.dmu_dp.rows_mut(0, na).tr_copy_from(&g_t);
        for c in 0..n {
            for m in [&mut pw.dmu_dq, &mut pw.dmu_dp] {
                for (r, x) in pw.column[..na].iter_mut().enumerate() {
                    *x = m[(r, c)];
                }
                lu_solve_in(&cw.s_knot[..na * na], na, &cw.s_pivots, &mut pw.column[..na]);
                for (r, x) in pw.column[..na].iter().enumerate() {
                    m[(r, c)] = *x;
                }
            }
        }
        // D = ∂μ/∂q [A_q B_q] + ∂μ/∂p [A_p B_p]; the momentum rows −= X [A_q B_q] + Cᵀ D
        let (mrows, ld_d) = (pw.dmu_dq.nrows(), pw.d.nrows());
        for (m, first, cols) in [(&mut *a, 0, 2 * n), (&mut *b, 2 * n, n)] {
            pw.d.view_mut((0, first), (na, cols)).fill(0.0);
            let d = ColMajorMut(&mut pw.d.as_mut_slice()[first * ld_d..], ld_d);
            let ld_m = m.nrows();
            let (m_q, m_p) = (ColMajor(m.as_slice(), ld_m), ColMajor(&m.as_slice()[n..], ld_m));
            gemm_nn(na, cols, n, ColMajor(pw.dmu_dq.as_slice(), mrows), m_q, d);
            let d = ColMajorMut(&mut pw.d.as_mut_slice()[first * ld_d..], ld_d);
            gemm_nn(na, cols, n, ColMajor(pw.dmu_dp.as_slice(), mrows), m_p, d);
            pw.change.columns_mut(0, cols).fill(0.0);
            gemm_nn(n, cols, n, ColMajor(pw.x.as_slice(), n), m_q, ColMajorMut(pw.change.as_mut_slice(), n));
            let mut change = pw.change.columns_mut(0, cols);
            add_transposed_product(&mut change, 1.0, &cw.c_knot.rows(0, na), &pw.d.view((0, first), (na, cols)));
            let mut rows = m.rows_mut(n, n);
            rows -= &change;
        }
        for (r, &i) in active.iter().enumerate() {
            for c in 0..3 * n {
                cw.lambda_jacobian[(i, c)] += pw.d[(r, c)];
            }
        }
        Ok(())
    }

    /// The kinematics of the knot `q` in `ws.constraint.knot` (world placements and joint
    /// columns; with composite joints in the chart centred at `q`).
    pub(crate) fn knot_kinematics(&self, ws: &mut ViWorkspace, q: &[f64]) {
        let ViWorkspace { constraint: cw, .. } = ws;
        let theta: &[f64] = match self.chart.as_deref() {
            Some(chart) => {
                chart.map.chart_placements(&self.model, q, &mut cw.knot_placements);
                chart.map.chart_coordinates(q, q, &mut cw.knot_theta);
                &cw.knot_theta
            }
            None => q,
        };
        cw.knot.update_kinematics(&self.model, &cw.knot_placements, theta);
    }

    /// At the knot `q` (`(nq,)`), for the constraints `active` (`a` of them): `C = Dh(q)` in
    /// tangent coordinates (rows `0..a` of `c_knot`; with composite joints `C_θ J(0)⁻¹` from the
    /// chart centred at `q`), `M⁻¹ Cᵀ` (columns `0..a` of `minv_ct`) and the LU of
    /// `S = C M⁻¹ Cᵀ` (`s_knot`), the kinematics at the knot in `knot`, the LU of `M` in
    /// `projection.mass_lu`. O(n·d + n³ + a n² + a³).
    pub(crate) fn knot_constraint_factors(&self, ws: &mut ViWorkspace, step: usize, active: &[usize], q: &[f64]) -> Result<()> {
        let m = active.len();
        self.knot_kinematics(ws, q);
        let ViWorkspace { constraint: cw, rbd, .. } = ws;
        // one LU of M for the a columns (on the ANYmal trot: 10 % fewer instructions in all
        // than an articulated-body solve per column)
        let pw = &mut cw.projection;
        pw.mass_lu.copy_from_slice(vidyn_rbd::crba(self.model(), rbd, q)?.as_slice());
        if !lu_factor_in(&mut pw.mass_lu, self.n(), &mut pw.mass_pivots) {
            return Err(ViError::SingularJacobian { step });
        }
        let c_knot = &mut cw.c_knot;
        Constraint::for_each_gradient(&self.constraints, active, &self.model, &cw.knot, &mut cw.scratch, &mut cw.rhs, |i, g| {
            c_knot.row_mut(i).iter_mut().zip(g).for_each(|(c, g)| *c = *g);
        });
        if let Some(chart) = self.chart.as_deref() {
            // δθ = J(0)⁻¹ δ on a composite joint's coordinates: C = C_θ J(0)⁻¹
            for j in chart.map.composite_joints() {
                let (f, d, map) = (j.first(), j.nv(), j0_inverse(&j).transpose());
                for i in 0..m {
                    let mapped = map * Vector6::from_fn(|k, _| if k < d { cw.c_knot[(i, f + k)] } else { 0.0 });
                    for k in 0..d {
                        cw.c_knot[(i, f + k)] = mapped[k];
                    }
                }
            }
        }
        let (n, rows) = (self.n(), cw.c_knot.nrows());
        for i in 0..m {
            cw.rhs.iter_mut().zip(cw.c_knot.row(i).iter()).for_each(|(g, c)| *g = *c);
            lu_solve_in(&cw.projection.mass_lu, n, &cw.projection.mass_pivots, &mut cw.rhs);
            cw.minv_ct.column_mut(i).copy_from_slice(&cw.rhs);
        }
        // S = C M⁻¹Cᵀ column by column over contiguous columns of C (each entry sums over k in order)
        let (c_knot, s_knot) = (cw.c_knot.as_slice(), &mut cw.s_knot[..m * m]);
        for (out, column) in s_knot.chunks_exact_mut(m).zip(cw.minv_ct.as_slice().chunks_exact(n)) {
            out.fill(0.0);
            for (c_k, &x) in c_knot.chunks_exact(rows).zip(column) {
                for (o, &a) in out.iter_mut().zip(&c_k[..m]) {
                    *o += a * x;
                }
            }
        }
        if !lu_factor_in(s_knot, m, &mut cw.s_pivots) {
            return Err(ViError::DegenerateConstraints { step });
        }
        Ok(())
    }
}

/// `J(0)⁻¹` of a composite joint's velocity map (padded with the identity past its `nv`).
fn j0_inverse(joint: &CompositeJoint<'_>) -> Matrix6<f64> {
    joint.velocity_map(&[0.0; 6]).try_inverse().unwrap_or_else(Matrix6::zeros)
}

/// The 6-vector of `x[first..first + d]`, zero-padded.
fn padded(x: &[f64], first: usize, d: usize) -> Vector6<f64> {
    Vector6::from_fn(|k, _| if k < d { x[first + k] } else { 0.0 })
}
