//! The discrete Euler–Lagrange (DEL) equations of one step and their derivatives.
//!
//! With the control points `q^0 = q_k, q^1, …, q^s` of step k (`q^s = q_{k+1}`), the discrete
//! Lagrangian `L_d = Δt Σ_α w_α L(q^α, q̇^α)` and the discrete forces
//! `Q^α = w_α Δt (u − d ⊙ q̇^α − κ ⊙ (q^α − q_rest) + W^α)` (controls held constant over the
//! step, joint damping `d`, joint springs `κ`, and the generalised force
//! `W_i^α = S̄_i^α · σF_i^α` of constant body wrenches, [`crate::point`]), the DEL equations are
//! (Fan, Schultz & Murphey 2018, eq. 5, discrete Lagrange–d'Alembert):
//! * `r^0 = p_k + D_1 L_d + Q^0 = 0`, `r^ϱ = D_{ϱ+1} L_d + Q^ϱ = 0` for `ϱ = 1..s−1`,
//! * `p_{k+1} = D_{s+1} L_d + Q^s`,
//!
//! where `D_{α+1} L_d = Δt w_α (K_q − V_q)^α + Σ_β w_β b[β][α] (K_q̇)^β` (eq. 4 differentiated,
//! energy gradients from [`crate::point`]). Their second derivatives are the blocks
//! `H(α, β) = ∂(D_{α+1}L_d + Q^α)/∂q^β`:
//!
//! `δ_αβ w_α Δt (K_qq − V_qq + W_q)^α + w_α b[α][β] (K_q̇q^α)ᵀ + w_β b[β][α] K_q̇q^β
//!  + (1/Δt) Σ_γ w_γ b[γ][α] b[γ][β] K_q̇q̇^γ − w_α diag(b[α][β] d + δ_αβ Δt κ)`
//!
//! (the chain rule of the digest's §6.4, checked against finite differences in the tests).
//! The wrench term depends on its own control point only (Fan et al. Assumption 1: each wrench
//! is a function of its body's pose), and `W_q[i, k] = S̄_i · (S̄_k ×* σF_k)` for `k` a strict
//! descendant of `i`, zero otherwise ([`crate::hessians`]): it is not symmetric, the wrenches
//! being non-conservative.

use crate::dense::axpy;
use crate::hessians::EnergyHessians;
use crate::point::PointState;
use crate::scheme::Scheme;
use nalgebra::{DMatrix, DMatrixViewMut};
use std::sync::{Arc, Weak};
use vidyn_rbd::Model;
use vidyn_spatial::{Force, Se3};

/// Joint forces that depend only on the joint's own coordinate and rate.
#[derive(Clone, Debug, PartialEq)]
pub struct JointForces {
    /// `(n,)` viscous damping `d` (N·m·s/rad or N·s/m).
    pub damping: Vec<f64>,
    /// `(n,)` spring stiffness `κ`.
    pub stiffness: Vec<f64>,
    /// `(n,)` spring rest positions.
    pub rest: Vec<f64>,
}

impl JointForces {
    /// No damping, no springs.
    #[must_use]
    pub fn none(n: usize) -> Self {
        Self { damping: vec![0.0; n], stiffness: vec![0.0; n], rest: vec![0.0; n] }
    }
}

/// What the DEL rows of a step weigh its control points with: the scheme's quadrature,
/// the step `Δt` and the joint forces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DelTerms<'a> {
    pub scheme: &'a Scheme,
    pub dt: f64,
    pub forces: &'a JointForces,
}

/// Everything evaluated at the `s + 1` control points of one step.
#[derive(Clone, Debug)]
pub struct StepPoints {
    /// `(s+1)` configurations `q^α`, each `(n,)`.
    pub q: Vec<Vec<f64>>,
    /// `(s+1)` velocities `q̇^α = (1/Δt) Σ_β b[α][β] q^β`.
    pub qdot: Vec<Vec<f64>>,
    pub states: Vec<PointState>,
    /// Energy Hessians per control point: only the dense reference path and the tests use
    /// them, so they are allocated by the first [`StepPoints::update_hessians`].
    pub hessians: Vec<EnergyHessians>,
    /// The model these points are evaluated for. Holding it keeps its allocation alive, so no
    /// other model can appear at its address: a point state configured at that address was
    /// configured with this model ([`Self::set_start`]).
    model: Weak<Model>,
    /// The joint placements of the current step's chart ([`Self::set_chart`]); empty: the
    /// model's own.
    chart_placements: Vec<Se3>,
    /// A knot's point state that no control point holds ([`Self::knot_state`]).
    knot: PointState,
}

impl StepPoints {
    pub(crate) fn new(model: &Arc<Model>, points: usize) -> Self {
        let n = model.nv;
        Self {
            q: vec![vec![0.0; n]; points],
            qdot: vec![vec![0.0; n]; points],
            states: (0..points).map(|_| PointState::new(n)).collect(),
            hessians: Vec::new(),
            model: Arc::downgrade(model),
            chart_placements: Vec::new(),
            knot: PointState::new(n),
        }
    }

    /// The joint placements the points are evaluated with: the current chart's, or the model's.
    pub(crate) fn joint_placements<'a>(&'a self, model: &'a Model) -> &'a [Se3] {
        if self.chart_placements.is_empty() {
            &model.joint_placements
        } else {
            &self.chart_placements
        }
    }

    /// Places the joints for the next steps at the placements `place` writes (given the
    /// previous ones; the first call starts from the model's): the chart of a step of a model
    /// with composite joints (`vidyn_rbd::SingleDofMap::chart_placements`). Forgets every
    /// point's configuration. O(n); allocates on the first call only.
    pub(crate) fn set_chart(&mut self, model: &Model, place: impl FnOnce(&mut [Se3])) {
        if self.chart_placements.len() != model.nbodies() {
            self.chart_placements.clone_from(&model.joint_placements);
        }
        place(&mut self.chart_placements);
        for st in self.states.iter_mut().chain([&mut self.knot]) {
            st.forget_configuration();
        }
    }

    /// A point state configured at the knot `q` for `model` with the model's own joint
    /// placements: a control point's when one is there (bit for bit; the end knot of a Lobatto
    /// step just solved), otherwise the spare `knot`, configured now, which the next step from
    /// `q` takes over ([`Self::set_start`]; the midpoint rule's end knot). `None` for another
    /// model or inside a chart. O(n) when it configures, O(s n) otherwise.
    pub(crate) fn knot_state(&mut self, model: &Model, q: &[f64]) -> Option<&PointState> {
        let address = std::ptr::from_ref(model) as usize;
        if self.model.as_ptr() as usize != address || !self.chart_placements.is_empty() {
            return None;
        }
        if let Some(i) = self.states.iter().rposition(|st| st.configured_for(address, q)) {
            return Some(&self.states[i]);
        }
        if !self.knot.configured_for(address, q) {
            self.knot.update_configuration(model, &model.joint_placements, q);
        }
        Some(&self.knot)
    }

    /// Sets `q^0 = q_k` and `q^γ = z[(γ−1)n..γn]`, then the velocities and point states, with
    /// the constant body wrenches `wrenches` (`(n,)`, body frames; empty for none). O(s²n).
    pub(crate) fn set(&mut self, model: &Model, scheme: &Scheme, dt: f64, q_k: &[f64], z: &[f64], wrenches: &[Force]) {
        self.set_start(model, q_k, wrenches);
        self.set_unknowns(model, scheme, dt, z, wrenches);
    }

    /// The part of [`Self::set`] that depends on `q_k` alone: `q^0` and the configuration
    /// fields of its point state. A Newton solve calls it once per step and then only
    /// [`Self::set_unknowns`] per iterate. The configuration fields are reused when point 0
    /// already holds them, or taken over from the last point or the spare knot state when it
    /// was configured at `q_k` (the end of the previous step of a rollout: its last control
    /// point for Lobatto schemes, the knot its energy check configured for the midpoint rule). O(n).
    pub(crate) fn set_start(&mut self, model: &Model, q_k: &[f64], wrenches: &[Force]) {
        self.q[0].copy_from_slice(q_k);
        let last = self.states.len() - 1;
        let address = std::ptr::from_ref(model) as usize;
        let ours = self.model.as_ptr() as usize == address;
        if !(ours && self.states[0].configured_for(address, q_k)) {
            if ours && self.states[last].configured_for(address, q_k) {
                self.states.swap(0, last);
            } else if ours && self.knot.configured_for(address, q_k) {
                std::mem::swap(&mut self.states[0], &mut self.knot);
            } else {
                let placements = if self.chart_placements.is_empty() { &model.joint_placements } else { &self.chart_placements };
                self.states[0].update_configuration(model, placements, q_k);
            }
        }
        if wrenches.is_empty() {
            self.states[0].wrenched = false;
        } else {
            self.states[0].update_wrenches(model, wrenches);
        }
    }

    /// The rest of [`Self::set`], for `q^0` set by the last [`Self::set_start`]: `q^γ` from
    /// `z`, every velocity `q̇^α = (1/Δt) Σ_β b[α][β] q^β`, the configuration fields of points
    /// `1..s` and the velocity fields of all points. O(s²n).
    pub(crate) fn set_unknowns(&mut self, model: &Model, scheme: &Scheme, dt: f64, z: &[f64], wrenches: &[Force]) {
        let n = self.q[0].len();
        let placements = if self.chart_placements.is_empty() { &model.joint_placements } else { &self.chart_placements };
        for g in 1..scheme.points() {
            self.q[g].copy_from_slice(&z[(g - 1) * n..g * n]);
            self.states[g].update_configuration(model, placements, &self.q[g]);
            if !wrenches.is_empty() {
                self.states[g].update_wrenches(model, wrenches);
            }
        }
        for a in 0..scheme.points() {
            for i in 0..n {
                self.qdot[a][i] = (0..scheme.points()).map(|b| scheme.b(a, b) * self.q[b][i]).sum::<f64>() / dt;
            }
            self.states[a].update_velocity(model, &self.qdot[a]);
        }
    }

    /// Copies the points, velocities and point states of `other` (same model and scheme), not
    /// the Hessians; no allocation. O(s n).
    pub(crate) fn copy_from(&mut self, other: &StepPoints) {
        for (mine, theirs) in self.q.iter_mut().zip(&other.q).chain(self.qdot.iter_mut().zip(&other.qdot)) {
            mine.copy_from_slice(theirs);
        }
        for (mine, theirs) in self.states.iter_mut().zip(&other.states) {
            mine.copy_from(theirs);
        }
    }

    /// Exchanges the points, velocities and point states with `other`, keeping each side's
    /// Hessian storage. O(1).
    pub(crate) fn swap_states(&mut self, other: &mut StepPoints) {
        std::mem::swap(&mut self.q, &mut other.q);
        std::mem::swap(&mut self.qdot, &mut other.qdot);
        std::mem::swap(&mut self.states, &mut other.states);
    }

    /// Energy Hessians at every control point (allocated on first use). O(s n d).
    pub(crate) fn update_hessians(&mut self, model: &Model) {
        if self.hessians.len() != self.states.len() {
            let n = model.nbodies();
            self.hessians = (0..self.states.len()).map(|_| EnergyHessians::new(n)).collect();
        }
        for (h, st) in self.hessians.iter_mut().zip(&self.states) {
            h.update(model, st);
        }
    }

    /// `out += m · (D_{α+1} L_d + Q^α)` for every joint (`out`: `(n,)`) at control point `α`
    /// (no mixing, no `p_k`). O(s n).
    pub(crate) fn add_point_rows(&self, terms: DelTerms<'_>, u: &[f64], m: f64, alpha: usize, out: &mut [f64]) {
        let DelTerms { scheme, dt, forces } = terms;
        let n = out.len();
        let w = &scheme.weights;
        let st = &self.states[alpha];
        let (q, qdot, dk_dq, dv_dq) = (&self.q[alpha][..n], &self.qdot[alpha][..n], &st.dk_dq[..n], &st.dv_dq[..n]);
        let (damping, stiffness, rest, u) = (&forces.damping[..n], &forces.stiffness[..n], &forces.rest[..n], &u[..n]);
        for i in 0..n {
            let mut r = dt * w[alpha] * (dk_dq[i] - dv_dq[i]);
            for (beta, other) in self.states.iter().enumerate() {
                r += w[beta] * scheme.b(beta, alpha) * other.dk_dqdot[i];
            }
            let joint_force = u[i] - damping[i] * qdot[i] - stiffness[i] * (q[i] - rest[i]) + st.wrench_force(i);
            out[i] += m * (r + w[alpha] * dt * joint_force);
        }
    }

    /// The DEL row of step variable `x` (without `p_k`) for every joint, written to `out`
    /// (`(n,)`): `Σ_α mix[x][α] (D_{α+1} L_d + Q^α)` ([`Scheme::mix`]; the control-point row
    /// itself for Lobatto schemes). `x = s` gives `p_{k+1}`. O(s² n).
    pub(crate) fn del_rows(&self, scheme: &Scheme, dt: f64, forces: &JointForces, u: &[f64], x: usize, out: &mut [f64]) {
        out.fill(0.0);
        for alpha in x..scheme.points() {
            let m = scheme.mix(x, alpha);
            if m != 0.0 {
                self.add_point_rows(DelTerms { scheme, dt, forces }, u, m, alpha, out);
            }
        }
    }

    /// Writes the DEL Hessian block `∂(row x)/∂q^β = Σ_α mix[x][α] H(α, β)` (see the module
    /// docs for `H`) into `out` (n×n), from the Hessians of [`Self::update_hessians`]
    /// ([`del_block`]).
    pub(crate) fn del_block(&self, scheme: &Scheme, dt: f64, forces: &JointForces, x: usize, beta: usize, out: &mut DMatrixViewMut<'_, f64>) {
        del_block(&self.hessians, DelTerms { scheme, dt, forces }, x, beta, out);
    }
}

/// Writes the DEL Hessian block `∂(row x)/∂q^β = Σ_α mix[x][α] H(α, β)` (see the module docs
/// for `H`) into `out` (n×n), from the energy Hessians at every control point. Element loops,
/// no temporaries: O((s+1)² n²), no allocation.
pub(crate) fn del_block(hessians: &[EnergyHessians], terms: DelTerms<'_>, x: usize, beta: usize, out: &mut DMatrixViewMut<'_, f64>) {
    // column by column: a view's `fill` is a strided element loop
    for mut column in out.column_iter_mut() {
        column.as_mut_slice().fill(0.0);
    }
    for alpha in x..terms.scheme.points() {
        let m = terms.scheme.mix(x, alpha);
        if m != 0.0 {
            add_point_block(hessians, terms, m, alpha, beta, out);
        }
    }
}

/// `out += m · H(α, β)`, one column at a time: the scalar coefficients of the module docs'
/// formula are formed once per block and every term is an `axpy` on a column (terms whose
/// coefficient vanishes are skipped).
fn add_point_block(hessians: &[EnergyHessians], terms: DelTerms<'_>, m: f64, alpha: usize, beta: usize, out: &mut DMatrixViewMut<'_, f64>) {
    let DelTerms { scheme, dt, forces } = terms;
    let w = &scheme.weights;
    let (ha, hb) = (&hessians[alpha], &hessians[beta]);
    let potential = if alpha == beta { m * w[alpha] * dt } else { 0.0 };
    let mixed_a = m * w[alpha] * scheme.b(alpha, beta);
    let mixed_b = m * w[beta] * scheme.b(beta, alpha);
    let n = out.nrows();
    // the Hessians as column-major slices: (r, c) at r + c·n (nalgebra's (r, c) indexing of a
    // dynamic matrix costs ~25 instructions per entry)
    for c in 0..n {
        let mut col = out.column_mut(c);
        let col = col.as_mut_slice();
        if potential != 0.0 {
            for (((x, k), v), w) in col.iter_mut().zip(column(&ha.kqq, c, n)).zip(column(&ha.vqq, c, n)).zip(column(&ha.wq, c, n)) {
                *x += potential * (k - v + w);
            }
        }
        if mixed_a != 0.0 {
            // row c of K_q̇q
            for (x, k) in col.iter_mut().zip(ha.kvq.as_slice()[c..].iter().step_by(n)) {
                *x += mixed_a * k;
            }
        }
        if mixed_b != 0.0 {
            axpy(col, mixed_b, column(&hb.kvq, c, n));
        }
        for g in 0..scheme.points() {
            let kinetic = m * w[g] * scheme.b(g, alpha) * scheme.b(g, beta) / dt;
            if kinetic != 0.0 {
                axpy(col, kinetic, column(&hessians[g].kvv, c, n));
            }
        }
    }
    for i in 0..n {
        let spring = if alpha == beta { dt * forces.stiffness[i] } else { 0.0 };
        out[(i, i)] -= m * w[alpha] * (scheme.b(alpha, beta) * forces.damping[i] + spring);
    }
}

/// Column `c` of the `n × n` matrix `m`, a slice.
fn column(m: &DMatrix<f64>, c: usize, n: usize) -> &[f64] {
    &m.as_slice()[c * n..(c + 1) * n]
}

/// Assembles the Newton Jacobian `J = [∂(row ϱ)/∂q^γ]` (ϱ = 0..s−1 rows, γ = 1..s columns).
pub(crate) fn assemble_jacobian(pts: &StepPoints, scheme: &Scheme, dt: f64, forces: &JointForces, n: usize, jac: &mut DMatrix<f64>) {
    for rho in 0..scheme.s {
        for gamma in 1..=scheme.s {
            let mut block = jac.view_mut((rho * n, (gamma - 1) * n), (n, n));
            pts.del_block(scheme, dt, forces, rho, gamma, &mut block);
        }
    }
}

#[cfg(test)]
mod tests;
