//! The second order on the group with holonomic constraints: the step of module
//! `constrained` and its momentum projection (module `momentum_projection`) in the fixed chart
//! of the parent module, on the centred expansion.
//!
//! # The constrained step in the fixed chart
//! With the multipliers `Λ = (λ^0, …, λ^{s−1})` put into the discrete Lagrangian,
//! `Φ(η, X, Λ) = L̂(η, X) − Σ_β λ^β·h(η, X^β)` (`h` on the centred expansion, a function of
//! the centre coordinates `η` and point `β`'s chart coordinates), the step's rows are those of
//! the parent module with `Φ` in place of `L̂`: the fixed-chart rows `∂Φ/∂X^x` carry the
//! impulses `−C_y(X^β)ᵀ λ^β` (the 1-dof start rows and the interior rows), and the composite
//! first row `J(0)ᵀ p_k + J(0)ᵀ J(η)⁻ᵀ Φ_η + … − S(y_s)ᵀ P` carries every impulse through
//! the centre rows `Φ_η`: moving `X_0` with `X_β` fixed on the group leaves `h(X_β)` unchanged,
//! so `J(η)⁻ᵀ C_ηᵀ = J(0)⁻ᵀ S(X^β)ᵀ C_yᵀ` (module `chart_linearize`), and at the start itself
//! `J(0)ᵀ J(η)⁻ᵀ C_η(η, 0)ᵀ = C_y(η, 0)ᵀ` (both are `J(0)ᵀ` times the tangent gradient at
//! `X_0`), as functions of `η`. So the parent's chart terms apply unchanged to `Φ`, and at a
//! solution its `L̂_η` (solved from the composite row) is `Φ_η`. The constraint rows are
//! `h(η, X^γ) = 0` (`γ = 1..s−1`) and `h(η, y_s) = 0` at the end, `y_s = Σ_α e_α X^α`.
//!
//! # The projection in the chart
//! In chart coordinates at the end, `C = C_θ J(y_s)⁻¹`, `M = J(y_s)⁻ᵀ M_θ J(y_s)⁻¹`, so
//! `S = C M⁻¹ Cᵀ = C_θ M_θ⁻¹ C_θᵀ` and RATTLE's projection is the same saddle-point system in
//! the chart: `M_θ ṽ + C_θᵀ μ − P = 0`, `C_θ ṽ = 0`, with `p_{k+1} = J(y_s)⁻ᵀ (P − C_θᵀ μ)` on
//! composite joints (`M_θ` the expansion's mass matrix on the chart coordinates, its centre
//! joints held). The unknowns `(Λ, ṽ, μ)` and these rows extend those of the parent module
//! (layouts there), for the step's active constraints only (a schedule's phase; storage for
//! all of them is made once).
//!
//! # The extra terms of `∇²ℒ`
//! With the adjoint `(μ_R, ν, ρ, σ)` on (DEL rows, constraint rows, projection rows, `C_θ ṽ`):
//! the impulses `−Σ_i λ^β_i D³h_i(X^β)[ω_β]` (`ω_β` the rows' weights at point `β`, parent
//! module) and `−D²h_i ω_β` with `λ^β_i`; `−Σ_i ν_i D²h_i` at the constrained points; `ρ`
//! added to the end rows' weights (`+ρ·P`); at the end `−Σ_i μ_i D³h_i[w̃ + ρ]`,
//! `−D²h_i (w̃ + ρ)` with `μ_i`, where `w̃ = J(y_s)⁻¹ λ_p` on composite joints (`λ_p` on 1-dof
//! ones) moves with `y_s` (its first derivative against `−∇(C_θᵀ μ)`, its second through the
//! parent's `(J⁻¹)''ᵀ P̃` with the projected `P̃ = P − C_θᵀ μ`); `−∂²(ρᵀ M_θ ṽ)` (inverse
//! dynamics at zero velocity less gravity) with `−∂(M_θ ρ)` against `ṽ`; `−Σ_i σ_i D³h_i[ṽ]`
//! with `−Σ_i σ_i D²h_i` against `ṽ`.

use super::{add_row_and_column, JointTerms};
use crate::chart_step::Chart;
use crate::constraints::{Constraint, ConstraintScratch};
use crate::del::StepPoints;
use crate::dense::{lu_factor, lu_solve};
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::point::PointState;
use nalgebra::{DMatrix, Vector6};
use vidyn_rbd::Model;

/// What a coordinate of the centred expansion is among the variables: a centre coordinate
/// (component `v` of `η`) or chart coordinate `i` (of the point's `X`).
#[derive(Clone, Copy, Debug)]
enum Coordinate {
    Centre(usize),
    Chart(usize),
}

/// Where a constraint term is evaluated: at control point `α`, or at the end `y_s`.
#[derive(Clone, Copy, Debug)]
enum At {
    Point(usize),
    End,
}

/// Where the expansion's coordinates sit among the variables `(η, X)` (module docs of the
/// parent): `n` coordinates, `n_c` composite ones, the scheme's endpoint weights.
#[derive(Clone, Debug)]
struct Targets {
    kinds: Vec<Coordinate>,
    n: usize,
    nc: usize,
    endpoint: Vec<f64>,
}

impl Targets {
    /// The variables coordinate `a` of the expansion moves at `at`, with their coefficients.
    fn each(&self, at: At, a: usize, mut f: impl FnMut(usize, f64)) {
        match (self.kinds[a], at) {
            (Coordinate::Centre(v), _) => f(v, 1.0),
            (Coordinate::Chart(i), At::Point(alpha)) => f(self.nc + alpha * self.n + i, 1.0),
            (Coordinate::Chart(i), At::End) => {
                for (alpha, &e) in self.endpoint.iter().enumerate() {
                    if e != 0.0 {
                        f(self.nc + alpha * self.n + i, e);
                    }
                }
            }
        }
    }

    /// `h[va, vc] += scale · b[a, c]` over the variables of coordinates `a`, `c` at `at`.
    fn add_block(&self, h: &mut DMatrix<f64>, at: At, b: &DMatrix<f64>, scale: f64) {
        let big = b.nrows();
        for c in 0..big {
            for a in 0..big {
                let x = b[(a, c)];
                if x != 0.0 {
                    self.each(at, a, |va, ca| self.each(at, c, |vc, cc| h[(va, vc)] += scale * ca * cc * x));
                }
            }
        }
    }

    /// `h[va, var] += scale · v_a` and its mirror over the variables of the coordinates `a`.
    fn add_cross(&self, h: &mut DMatrix<f64>, at: At, v: impl Iterator<Item = f64>, var: usize, scale: f64) {
        for (a, x) in v.enumerate() {
            if x != 0.0 {
                self.each(at, a, |va, ca| {
                    h[(va, var)] += scale * ca * x;
                    h[(var, va)] += scale * ca * x;
                });
            }
        }
    }

    /// `out[va] += scale · v_a` over the variables of the coordinates `a` at `at`.
    fn pull(&self, at: At, v: impl Iterator<Item = f64>, out: &mut [f64], scale: f64) {
        for (a, x) in v.enumerate() {
            if x != 0.0 {
                self.each(at, a, |va, ca| out[va] += scale * ca * x);
            }
        }
    }
}

/// Scratch of the constrained terms (module docs), `m` constraints, `n` coordinates, `N` the
/// centred expansion's, `s` intervals; `k = s m + n + m` extra variables `(Λ, ṽ, μ)`.
#[derive(Clone, Debug)]
pub(super) struct ChartConstraints {
    /// The integrator's constraints on the bodies of the centred expansion.
    constraints: Vec<Constraint>,
    /// The centred expansion with the joint placements of the prepared step's chart (for the
    /// mass matrix and inverse dynamics at the end).
    expansion: Model,
    rbd: vidyn_rbd::Workspace,
    m: usize,
    n: usize,
    s: usize,
    nc: usize,
    coordinates: Vec<usize>,
    targets: Targets,
    /// The prepared step's active constraints (`a` of them, in order; the variables and rows
    /// of `Λ`, `μ` are theirs only, slot `r` for `order[r]`), its multipliers `(s m,)` and the
    /// projection's `(m,)` (by constraint).
    order: Vec<usize>,
    lambda: Vec<f64>,
    mu: Vec<f64>,
    scratch: ConstraintScratch,
    /// Kinematics and coordinates `(N,)` at the end, zeros `(N,)`, a row `(N,)`.
    end: PointState,
    end_q: Vec<f64>,
    zeros: Vec<f64>,
    row: Vec<f64>,
    /// `((s+1) m, N)` gradients and `(s+1) m` Hessians at the points `0..s−1` and (block
    /// `s`) the end; `Σ_i μ_i D²h_i` at the end.
    gradients: DMatrix<f64>,
    hessians: Vec<DMatrix<f64>>,
    curvature: DMatrix<f64>,
    /// `M_θ` `(n, n)` and its LU, `ṽ` `(n,)`, `∂(M_θ ṽ)/∂` the end's coordinates `(n, N)`.
    mass: DMatrix<f64>,
    mass_lu: DMatrix<f64>,
    pivots: Vec<usize>,
    velocity: Vec<f64>,
    mass_rate: DMatrix<f64>,
    /// `ṽ`, `ρ`, `w̃ + ρ` and one `w̃'` on the expansion's coordinates `(N,)`.
    velocity_n: Vec<f64>,
    rho_n: Vec<f64>,
    weight_n: Vec<f64>,
    turn_n: Vec<f64>,
    /// The rows after the DEL rows in `(η, X, u)` `(k, e)` and in `(Λ, ṽ, μ)` `(k, k)`; the
    /// outputs in `(Λ, ṽ, μ)` `(2n, k)`.
    pub(super) rows: DMatrix<f64>,
    pub(super) rows_extra: DMatrix<f64>,
    pub(super) outputs: DMatrix<f64>,
    /// `(N, N)` scratch, a row of the variables `(ev,)`, the projected chart momentum `(n,)`.
    block: DMatrix<f64>,
    line: Vec<f64>,
    projected: Vec<f64>,
}

impl ChartConstraints {
    pub(super) fn new(vi: &VariationalIntegrator, chart: &Chart, nc: usize) -> Self {
        let (n, s, m) = (vi.n(), vi.scheme().s, vi.constraints.len());
        let centred = &chart.centred;
        let big = centred.model.nv;
        let mut kinds = vec![Coordinate::Centre(0); big];
        let mut composite = 0;
        for (j, &centre) in chart.map.composite_joints().zip(&centred.centres) {
            for k in 0..j.nv() {
                kinds[centre + k] = Coordinate::Centre(composite + k);
            }
            composite += j.nv();
        }
        for (i, &c) in centred.coordinates.iter().enumerate() {
            kinds[c] = Coordinate::Chart(i);
        }
        let k = s * m + n + m;
        let e = nc + (s + 2) * n;
        Self {
            constraints: vi.constraints.iter().map(|c| c.on_bodies(&centred.coordinates)).collect(),
            expansion: (*centred.model).clone(),
            rbd: centred.model.workspace(),
            m,
            n,
            s,
            nc,
            coordinates: centred.coordinates.clone(),
            targets: Targets { kinds, n, nc, endpoint: (0..=s).map(|a| vi.scheme().endpoint(a)).collect() },
            order: Vec::with_capacity(m),
            lambda: vec![0.0; s * m],
            mu: vec![0.0; m],
            scratch: ConstraintScratch::new(big),
            end: PointState::new(big),
            end_q: vec![0.0; big],
            zeros: vec![0.0; big],
            row: vec![0.0; big],
            gradients: DMatrix::zeros((s + 1) * m, big),
            hessians: vec![DMatrix::zeros(big, big); (s + 1) * m],
            curvature: DMatrix::zeros(big, big),
            mass: DMatrix::zeros(n, n),
            mass_lu: DMatrix::zeros(n, n),
            pivots: vec![0; n],
            velocity: vec![0.0; n],
            mass_rate: DMatrix::zeros(n, big),
            velocity_n: vec![0.0; big],
            rho_n: vec![0.0; big],
            weight_n: vec![0.0; big],
            turn_n: vec![0.0; big],
            rows: DMatrix::zeros(k, e),
            rows_extra: DMatrix::zeros(k, k),
            outputs: DMatrix::zeros(2 * n, k),
            block: DMatrix::zeros(big, big),
            line: vec![0.0; e + k],
            projected: vec![0.0; n],
        }
    }

    /// `s a`, the size of `Λ` at the prepared step (`a` active constraints).
    pub(super) fn lambdas(&self) -> usize {
        self.s * self.order.len()
    }

    /// The extra variables `k = s a + n + a` at the prepared step (`Λ`, `ṽ`, `μ`).
    pub(super) fn extra(&self) -> usize {
        self.lambdas() + self.n + self.order.len()
    }

    /// Reads the step solved in `ws` (step `step`): its multipliers, the end's kinematics,
    /// the constraints' gradients and Hessians at the points `0..s−1` and the end, and
    /// subtracts the impulses' Hessians `Σ_i λ^β_i D²h_i` from the diagonal blocks of the
    /// rows' Jacobian `blocks` (module docs: the rows are `Φ`'s).
    pub(super) fn prepare_points(
        &mut self,
        vi: &VariationalIntegrator,
        chart: &Chart,
        ws: &ViWorkspace,
        step: usize,
        points: &StepPoints,
        blocks: &mut DMatrix<f64>,
    ) -> Result<()> {
        let (s, m, big) = (self.s, self.m, self.end_q.len());
        self.order.clear();
        self.order.extend_from_slice(vi.active_constraints(step)?);
        self.lambda.copy_from_slice(&ws.constraint.lambda);
        self.mu.copy_from_slice(&ws.constraint.projection.mu);
        self.end_q.fill(0.0);
        for (i, &c) in self.coordinates.iter().enumerate() {
            self.end_q[c] = (0..=s).map(|alpha| self.targets.endpoint[alpha] * ws.points.q[alpha][i]).sum();
        }
        let placements = points.joint_placements(&chart.centred.model);
        self.expansion.joint_placements.copy_from_slice(placements);
        let model = &self.expansion;
        self.end.update_kinematics(model, &model.joint_placements, &self.end_q);
        for block in 0..=s {
            for &i in &self.order {
                let st = if block < s { &points.states[block] } else { &self.end };
                let con = &self.constraints[i];
                con.gradient(model, st, &mut self.scratch, &mut self.row);
                self.gradients.row_mut(block * m + i).iter_mut().zip(&self.row).for_each(|(g, r)| *g = *r);
                let h = &mut self.hessians[block * m + i];
                h.fill(0.0);
                con.add_hessian(model, st, &mut self.scratch, 1.0, h);
                if block < s {
                    let l = self.lambda[block * m + i];
                    let mut diag = blocks.view_mut((block * big, block * big), (big, big));
                    diag.zip_apply(h, |x, y| *x -= l * y);
                }
            }
        }
        self.curvature.fill(0.0);
        for &i in &self.order {
            let mu = self.mu[i];
            self.curvature.zip_apply(&self.hessians[s * m + i], |x, y| *x += mu * y);
        }
        Ok(())
    }

    /// `g`'s columns of `Λ` (after its first `dim`): `−∂h_i/∂` point `β`'s coordinates on the
    /// rows of point `β < s` (the impulses of `Φ`'s rows); the columns past the prepared
    /// step's `s a` zero.
    pub(super) fn lambda_columns(&self, g: &mut DMatrix<f64>, dim: usize) {
        let (s, m, big, a) = (self.s, self.m, self.end_q.len(), self.order.len());
        g.columns_mut(dim, s * m).fill(0.0);
        for beta in 0..s {
            for (r, &i) in self.order.iter().enumerate() {
                for x in 0..big {
                    g[(beta * big + x, dim + beta * a + r)] = -self.gradients[(beta * m + i, x)];
                }
            }
        }
    }

    /// The projection at the end (module docs): `M_θ`, `ṽ = M_θ⁻¹ P̃` with the projected
    /// chart momentum `P̃` (`p_next` `(n,)`, the step's projected end momentum, mapped by
    /// `J(y_s)ᵀ` on the composite joints of `joints`), and `∂(M_θ ṽ)/∂` the end's coordinates.
    pub(super) fn prepare_projection(&mut self, step: usize, p_next: &[f64], joints: &[JointTerms]) -> Result<()> {
        self.projected.copy_from_slice(p_next);
        for t in joints {
            self.projected[t.first..t.first + t.d].copy_from_slice(&t.p_projected.as_slice()[..t.d]);
        }
        let model = &self.expansion;
        let mass = vidyn_rbd::crba(model, &mut self.rbd, &self.end_q)?;
        for (j, &cj) in self.coordinates.iter().enumerate() {
            for (i, &ci) in self.coordinates.iter().enumerate() {
                self.mass[(i, j)] = mass[(ci, cj)];
            }
        }
        self.mass_lu.copy_from(&self.mass);
        if !lu_factor(&mut self.mass_lu, &mut self.pivots) {
            return Err(ViError::SingularJacobian { step });
        }
        self.velocity.copy_from_slice(&self.projected);
        lu_solve(&self.mass_lu, &self.pivots, &mut self.velocity);
        self.velocity_n.fill(0.0);
        for (&c, v) in self.coordinates.iter().zip(&self.velocity) {
            self.velocity_n[c] = *v;
        }
        let rate = vidyn_rbd::mass_matrix_and_derivative::<ViError>(model, &mut self.rbd, &self.end_q, &mut self.velocity_n, |_, _| Ok(()))?;
        for (j, &c) in self.coordinates.iter().enumerate() {
            self.mass_rate.row_mut(j).copy_from(&rate.row(c));
        }
        Ok(())
    }

    /// The constraint and projection rows in `(η, X, u)` and `(Λ, ṽ, μ)`, the outputs'
    /// columns of `μ`, and the change of the momentum outputs' rows `fv` by `−∂(C_θᵀμ)`
    /// (module docs). `g`: the rows' Jacobian in `(η, X)` on the expansion's points;
    /// `joints`: the composite joints' terms; `cw_end`: the end row's control weight times `Δt`.
    pub(super) fn rows(&mut self, g: &DMatrix<f64>, joints: &[JointTerms], cw_end: f64, fv: &mut DMatrix<f64>) {
        let (n, s, m, big) = (self.n, self.s, self.m, self.end_q.len());
        let a = self.order.len();
        let (sa, dim) = (s * a, self.nc + (s + 1) * n);
        self.rows.fill(0.0);
        self.rows_extra.fill(0.0);
        self.outputs.fill(0.0);
        let row = &mut self.line[..dim + n];
        // h at the interior points and the end
        for gamma in 1..=s {
            let (at, block) = if gamma < s { (At::Point(gamma), gamma) } else { (At::End, s) };
            for (slot, &i) in self.order.iter().enumerate() {
                let r = (gamma - 1) * a + slot;
                row.fill(0.0);
                self.targets.pull(at, self.gradients.row(block * m + i).iter().copied(), row, 1.0);
                self.rows.row_mut(r).iter_mut().zip(row.iter()).for_each(|(x, y)| *x = *y);
            }
        }
        // M_θ ṽ + C_θᵀ μ − P
        for j in 0..n {
            let r = sa + j;
            row.fill(0.0);
            let c = self.coordinates[j];
            let (rate, curvature) = (self.mass_rate.row(j), self.curvature.row(c));
            self.targets.pull(At::End, rate.iter().zip(curvature.iter()).map(|(a, b)| a + b), row, 1.0);
            for (x, y) in row[..dim].iter_mut().zip(g.row(s * big + c).iter()) {
                *x -= y;
            }
            match joints.iter().find(|t| (t.first..t.first + t.d).contains(&j)) {
                None => row[dim + j] -= cw_end,
                Some(t) => {
                    for l in 0..t.d {
                        row[dim + t.first + l] -= cw_end * t.j0[(l, j - t.first)];
                    }
                }
            }
            self.rows.row_mut(r).iter_mut().zip(row.iter()).for_each(|(x, y)| *x = *y);
            for k in 0..n {
                self.rows_extra[(r, sa + k)] = self.mass[(j, k)];
            }
            for (slot, &i) in self.order.iter().enumerate() {
                self.rows_extra[(r, sa + n + slot)] = self.gradients[(s * m + i, c)];
            }
        }
        // C_θ ṽ = 0
        for (slot, &i) in self.order.iter().enumerate() {
            let r = sa + n + slot;
            row.fill(0.0);
            let h = &self.hessians[s * m + i];
            let hv = (0..big).map(|a| (0..big).map(|b| h[(a, b)] * self.velocity_n[b]).sum::<f64>());
            self.targets.pull(At::End, hv, row, 1.0);
            self.rows.row_mut(r).iter_mut().zip(row.iter()).for_each(|(x, y)| *x = *y);
            for (k, &c) in self.coordinates.iter().enumerate() {
                self.rows_extra[(r, sa + k)] = self.gradients[(s * m + i, c)];
            }
        }
        // the momentum outputs p' = J(y_s)⁻ᵀ (P − C_θᵀ μ) (P − C_θᵀ μ on 1-dof joints)
        for j in 0..n {
            // the rows of C_θᵀ μ and of its derivative, mapped by J(y_s)⁻ᵀ on composite joints
            let joint = joints.iter().find(|t| (t.first..t.first + t.d).contains(&j));
            let (first, d) = joint.map_or((j, 1), |t| (t.first, t.d));
            row.fill(0.0);
            for l in first..first + d {
                let f = joint.map_or(1.0, |t| t.j_end_inv[(l - first, j - first)]);
                let c = self.coordinates[l];
                self.targets.pull(At::End, self.curvature.row(c).iter().copied(), row, -f);
                for (slot, &i) in self.order.iter().enumerate() {
                    self.outputs[(n + j, sa + n + slot)] -= f * self.gradients[(s * m + i, c)];
                }
            }
            for (x, y) in fv.row_mut(n + j).iter_mut().zip(&row[..dim]) {
                *x += y;
            }
        }
    }

    /// The constraint terms of `∇²ℒ` (module docs) into `h` (`ev × ev`, the extra variables
    /// from `e`): `omega` the rows' weights on the expansion's points, `adjoint` `(s n + k,)`,
    /// `lp` the co-state of `p'`, `points` the expansion's control points.
    pub(super) fn add_hessian_terms(
        &mut self,
        h: &mut DMatrix<f64>,
        omega: &[f64],
        adjoint: &[f64],
        lp: &[f64],
        joints: &[JointTerms],
        points: &StepPoints,
    ) -> Result<()> {
        let (n, s, m, big) = (self.n, self.s, self.m, self.end_q.len());
        let a = self.order.len();
        let (sa, e, sn) = (s * a, self.nc + (s + 2) * n, s * n);
        let (nu, rho, sigma) = (&adjoint[sn..sn + sa], &adjoint[sn + sa..sn + sa + n], &adjoint[sn + sa + n..sn + sa + n + a]);
        let model = &self.expansion;
        // w̃ + ρ on the chart coordinates
        self.weight_n.fill(0.0);
        self.rho_n.fill(0.0);
        for j in 0..n {
            let c = self.coordinates[j];
            self.rho_n[c] = rho[j];
            self.weight_n[c] = rho[j] + if joints.iter().any(|t| (t.first..t.first + t.d).contains(&j)) { 0.0 } else { lp[j] };
        }
        for t in joints {
            let w = t.j_end_inv * super::block(lp, t.first, t.d);
            for r in 0..t.d {
                self.weight_n[self.coordinates[t.first + r]] += w[r];
            }
        }
        for (slot, &i) in self.order.iter().enumerate() {
            let con = &self.constraints[i];
            // the impulses −λ^β_i ω_β·∇h_i(X^β)
            for beta in 0..s {
                let w = &omega[beta * big..(beta + 1) * big];
                self.block.fill(0.0);
                con.add_third_contracted(model, &points.states[beta], &mut self.scratch, -self.lambda[beta * m + i], w, &mut self.block);
                self.targets.add_block(h, At::Point(beta), &self.block, 1.0);
                con.hessian_vector(model, &points.states[beta], &mut self.scratch, w, &mut self.row);
                self.targets.add_cross(h, At::Point(beta), self.row.iter().copied(), e + beta * a + slot, -1.0);
            }
            // −ν·h at the constrained points
            for gamma in 1..=s {
                let (at, block) = if gamma < s { (At::Point(gamma), gamma) } else { (At::End, s) };
                self.targets.add_block(h, at, &self.hessians[block * m + i], -nu[(gamma - 1) * a + slot]);
            }
            // −(w̃ + ρ)·C_θᵀ μ and −σ·C_θ ṽ at the end
            self.block.fill(0.0);
            con.add_third_contracted(model, &self.end, &mut self.scratch, -self.mu[i], &self.weight_n, &mut self.block);
            con.add_third_contracted(model, &self.end, &mut self.scratch, -sigma[slot], &self.velocity_n, &mut self.block);
            self.targets.add_block(h, At::End, &self.block, 1.0);
            con.hessian_vector(model, &self.end, &mut self.scratch, &self.weight_n, &mut self.row);
            self.targets.add_cross(h, At::End, self.row.iter().copied(), e + sa + n + slot, -1.0);
            for (j, &c) in self.coordinates.iter().enumerate() {
                self.targets.add_cross(h, At::End, self.hessians[s * m + i].column(c).iter().copied(), e + sa + j, -sigma[slot]);
            }
        }
        // w̃'(y_s)[e_k] against −∇(C_θᵀ μ), at every control point of y_s
        let tmp = &mut self.line;
        for t in joints {
            let lpc = super::block(lp, t.first, t.d);
            for k in 0..t.d {
                let turn: Vector6<f64> = -(t.end_turn[k] * lpc);
                self.turn_n.fill(0.0);
                for r in 0..t.d {
                    self.turn_n[self.coordinates[t.first + r]] = turn[r];
                }
                tmp.fill(0.0);
                let bent = (0..big).map(|a| (0..big).map(|b| self.curvature[(a, b)] * self.turn_n[b]).sum::<f64>());
                self.targets.pull(At::End, bent, tmp, -1.0);
                for (slot, &i) in self.order.iter().enumerate() {
                    tmp[e + sa + n + slot] -= (0..big).map(|x| self.gradients[(s * m + i, x)] * self.turn_n[x]).sum::<f64>();
                }
                for (alpha, &ea) in self.targets.endpoint.iter().enumerate() {
                    if ea != 0.0 {
                        add_row_and_column(h, self.nc + alpha * n + t.first + k, ea, tmp);
                    }
                }
            }
        }
        // −ρ·M_θ ṽ: inverse dynamics at zero velocity less gravity, and −∂(M_θ ρ) against ṽ
        let with = vidyn_rbd::rnea_second_order_contracted(model, &mut self.rbd, &self.end_q, &self.zeros, &self.velocity_n, &self.rho_n, None)?;
        self.block.copy_from(with.d2tau_dq2);
        let gravity = vidyn_rbd::rnea_second_order_contracted(model, &mut self.rbd, &self.end_q, &self.zeros, &self.zeros, &self.rho_n, None)?;
        self.block -= gravity.d2tau_dq2;
        self.targets.add_block(h, At::End, &self.block, -1.0);
        self.row.copy_from_slice(&self.rho_n);
        let rate = vidyn_rbd::mass_matrix_and_derivative::<ViError>(model, &mut self.rbd, &self.end_q, &mut self.row, |_, _| Ok(()))?;
        self.block.copy_from(rate);
        for (j, &c) in self.coordinates.iter().enumerate() {
            self.targets.add_cross(h, At::End, self.block.row(c).iter().copied(), e + sa + j, -1.0);
        }
        Ok(())
    }
}
