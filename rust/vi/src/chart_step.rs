//! Models with composite joints (free-flyer, spherical, planar): each step on the joints' Lie
//! groups, in the chart centred at the step's start.
//!
//! # Construction
//! The configuration `q` keeps Pinocchio's layout (free-flyer `[x y z qx qy qz qw]`, unit
//! quaternions), the momentum `p`, the controls `u` and every velocity live in the tangent
//! space (`nv` entries, Pinocchio's body-frame convention). Step `k` runs in the chart
//! centred at `q_k` (`vidyn_rbd::SingleDofMap`'s step charts): a composite joint is the
//! single-dof chain of `to_single_dof` re-centred there, `q = q_k ∘ τ(θ)` with `τ(0)` the
//! identity (free-flyer: translation along the body axes, then Z-Y-X angles). The step's
//! Galerkin curve is the usual polynomial `θ(t)` through its control points with `θ(0) = 0` on
//! composite joints, so the discrete Lagrangian
//! `L_d(q_k, q_{k+1}) = Δt Σ_α w_α L(q_k ∘ τ(θ^α), ·)` is a function on the group itself: the
//! Lie-group Galerkin construction of Bou-Rabee & Marsden (2009) and Hall & Leok (2015) with
//! the chain retraction `τ` in place of the exponential. Because the centre multiplies from
//! the left, `L_d(g q_k, g q_{k+1}) = L_d(q_k, q_{k+1})` for a left-invariant Lagrangian, so
//! the map is symplectic and conserves the momentum maps of the symmetries (a free body's
//! linear and angular momentum) to the Newton tolerance. In the chart every joint is 1-dof,
//! so the DEL residual, its O(n) Newton direction and the rest of the step are those of the
//! expanded model, evaluated with the chart's joint placements.
//!
//! Why `τ` and not `exp`: with it a spherical or free-flyer joint is three (six) 1-dof
//! joints inside the step, so the O(s³ n) recursions of Fan, Schultz & Murphey (2018) apply
//! unchanged; `exp` would need 3- and 6-dof blocks in every recursion. The chart is singular
//! only at a relative pitch of 90° within one step, a rotation no resolved step makes; a
//! step that comes within `GIMBAL_MARGIN` of it is refused ([`ViError::StepTooLarge`]).
//!
//! # At the step's ends
//! Momenta and controls enter the chart as covectors, `p_θ = J(0)ᵀ p_k`, `u_θ = J(0)ᵀ u`
//! (`v = J(θ) θ̇`; the control is a body-frame wrench held constant in the step's chart), the
//! step gives `θ_{k+1}` and `p_{θ,k+1} = D₂L_d`, and the state leaves the chart as
//! `q_{k+1} = q_k ∘ τ(θ_{k+1})` (quaternions renormalised) and
//! `p_{k+1} = J(θ_{k+1})⁻ᵀ p_{θ,k+1}`: the same covector at `q_{k+1}`, which the next step
//! reads in its own chart.
//!
//! # The centre term
//! The step's curve is a polynomial in the chart of its own start, so moving `q_k` moves the
//! chart too, and `D₁L_d` is not the fixed-chart derivative `∂S/∂θ⁰` the recursions form.
//! Moving the centre by `δ` with the other step variables fixed on the group shifts each
//! step variable's chart coordinates `x` by `S(x) δ`, `S(y) = J(y)⁻¹ Ad_{τ(y)⁻¹} J(0)`
//! (`vidyn_rbd::CompositeJoint::shift`), and the polynomial through them differs from the
//! moved one: at control point `α`, positions by `P_α δ`, `P_α = S(θ^α) − S̄^α`, and
//! velocities by `V_α δ`, `V_α = Ṡ(θ^α)[θ̇^α] − (1/Δt) Σ_β b[α][β] S̄^β`, with
//! `S̄^β = Σ_x T[β][x] S(x)` the shifts mixed to the control points (module `scheme`). So
//! `D₁L_d = ∂S/∂θ⁰ + Σ_α [P_αᵀ (Δt w_α L_θ^α + Q^α) + Δt w_α V_αᵀ L_θ̇^α]` on each composite
//! joint's coordinates, added to the first DEL row ([`VariationalIntegrator::add_centre_term`]).
//! For Lobatto schemes `P_α = 0`. The term is O(Δt |v|) next to the rest, so Newton keeps the
//! fixed-chart Jacobian; with the term a free system's world momentum is conserved to
//! round-off (without it, to O(Δt²): 2e-5 over 500 steps of a free body).

use crate::chart_linearize::ChartLinWork;
use crate::del::StepPoints;
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
#[cfg(doc)]
use crate::Predictor;
use nalgebra::{Matrix6, Vector6};
use std::sync::Arc;
use vidyn_rbd::{check_configuration, check_tangent, CentredExpansion, Model, SingleDofMap};
use vidyn_system::StepInput;

/// The most control points of a scheme (Lobatto `s ≤ 12`).
const MAX_POINTS: usize = 13;

/// A model with composite joints: the user's model and the coordinate maps of its
/// single-dof expansion (the integrator's DEL model).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Chart {
    pub native: Arc<Model>,
    pub map: SingleDofMap,
    /// The expanded model with the centre joints, for the linearisation (module
    /// `chart_linearize`).
    pub centred: CentredExpansion,
}

/// Scratch of a step on the chart: the step's start in the model's coordinates (the chart's
/// centre `q_k` `(nq,)`, `p_k`, `u_k` `(nv,)`) and the chart's coordinates, covectors and
/// rates, each `(n,)`. Empty without composite joints.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChartWork {
    centre: Vec<f64>,
    p: Vec<f64>,
    u: Vec<f64>,
    theta: Vec<f64>,
    p_theta: Vec<f64>,
    u_theta: Vec<f64>,
    guess: Vec<f64>,
    theta_next: Vec<f64>,
    p_theta_next: Vec<f64>,
    /// Chart rates and accelerations of the predictors ([`VariationalIntegrator::chart_prediction`]).
    rates: Vec<f64>,
    accelerations: Vec<f64>,
    /// The linearisation's scratch, made by the first one (module `chart_linearize`).
    pub(crate) lin: Option<Box<ChartLinWork>>,
}

impl ChartWork {
    /// The chart coordinates of the last [`VariationalIntegrator::centre_chart`].
    pub(crate) fn coordinates(&self) -> &[f64] {
        &self.theta
    }

    /// The last step's start `q_k` `(nq,)`, the centre of its chart.
    pub(crate) fn centre(&self) -> &[f64] {
        &self.centre
    }

    /// The last step's momentum `p_k` `(n,)` (tangent).
    pub(crate) fn momentum(&self) -> &[f64] {
        &self.p
    }

    /// The last step's chart control `u_θ = J(0)ᵀ u` `(n,)`.
    pub(crate) fn u_theta(&self) -> &[f64] {
        &self.u_theta
    }

    /// The last step's end momentum in its chart, `p_θ,k+1 = J(θ_{k+1})ᵀ p_{k+1}` `(n,)`.
    pub(crate) fn p_theta_next(&self) -> &[f64] {
        &self.p_theta_next
    }

    pub(crate) fn new(chart: Option<&Chart>) -> Self {
        let Some(c) = chart else { return Self::default() };
        let (nq, n) = (c.map.nq, c.map.n);
        Self {
            centre: vec![0.0; nq],
            p: vec![0.0; n],
            u: vec![0.0; n],
            theta: vec![0.0; n],
            p_theta: vec![0.0; n],
            u_theta: vec![0.0; n],
            guess: vec![0.0; n],
            theta_next: vec![0.0; n],
            p_theta_next: vec![0.0; n],
            rates: vec![0.0; n],
            accelerations: vec![0.0; n],
            lin: None,
        }
    }
}

/// What the linearisation of a step on the chart reads of its solve besides the step's
/// inputs, end and multipliers (module `chart_linearize`): the control points' chart
/// coordinates and the chart's centre `q_k`, `p_k`, `u_θ` and `p_θ,k+1`. Kept with a solved
/// step (module `solved`), so that its linearisation need not solve it again.
#[derive(Clone, Debug)]
pub(crate) struct KeptChart {
    points: Vec<Vec<f64>>,
    centre: Vec<f64>,
    p: Vec<f64>,
    u_theta: Vec<f64>,
    p_theta_next: Vec<f64>,
}

impl KeptChart {
    /// A copy of the step on the chart that `ws` has just solved.
    pub(crate) fn of(ws: &ViWorkspace) -> Self {
        let cw = &ws.chart;
        Self { points: ws.points.q.clone(), centre: cw.centre.clone(), p: cw.p.clone(), u_theta: cw.u_theta.clone(), p_theta_next: cw.p_theta_next.clone() }
    }

    /// Copies the step `ws` has just solved into this one (of the same integrator), without
    /// allocating.
    pub(crate) fn save(&mut self, ws: &ViWorkspace) {
        let cw = &ws.chart;
        for (mine, theirs) in self.points.iter_mut().zip(&ws.points.q) {
            mine.copy_from_slice(theirs);
        }
        for (mine, theirs) in
            [(&mut self.centre, &cw.centre), (&mut self.p, &cw.p), (&mut self.u_theta, &cw.u_theta), (&mut self.p_theta_next, &cw.p_theta_next)]
        {
            mine.copy_from_slice(theirs);
        }
    }

    /// Puts the step back into `ws` for its linearisation: the control points' coordinates
    /// (not their point states, which the linearisation computes on the centred expansion)
    /// and the chart's quantities.
    pub(crate) fn restore(&self, ws: &mut ViWorkspace) {
        for (theirs, mine) in ws.points.q.iter_mut().zip(&self.points) {
            theirs.copy_from_slice(mine);
        }
        let cw = &mut ws.chart;
        for (theirs, mine) in
            [(&mut cw.centre, &self.centre), (&mut cw.p, &self.p), (&mut cw.u_theta, &self.u_theta), (&mut cw.p_theta_next, &self.p_theta_next)]
        {
            theirs.copy_from_slice(mine);
        }
    }
}

impl VariationalIntegrator {
    /// [`VariationalIntegrator::step`] of a model with composite joints (module docs): into
    /// the chart centred at `q`, the step of the expanded model there, and back.
    pub(crate) fn step_on_chart(&self, chart: &Chart, ws: &mut ViWorkspace, at: StepInput<'_>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        let StepInput { k: step, q, p, u, guess, .. } = at;
        let (native, map) = (&*chart.native, &chart.map);
        check_configuration(native, q)?;
        check_tangent(native, p, "p")?;
        check_tangent(native, u, "u")?;
        if q_next.len() != map.nq || p_next.len() != map.n {
            return Err(ViError::InvalidParameter(format!(
                "q_next has {} and p_next {} entries; expected model.nq = {} and model.nv = {}",
                q_next.len(),
                p_next.len(),
                map.nq,
                map.n
            )));
        }
        let cw = &mut ws.chart;
        cw.centre.copy_from_slice(q);
        cw.p.copy_from_slice(p);
        cw.u.copy_from_slice(u);
        map.chart_coordinates(q, q, &mut cw.theta);
        map.chart_covector(&cw.theta, p, &mut cw.p_theta);
        map.chart_covector(&cw.theta, u, &mut cw.u_theta);
        // a guess of the wrong length or with a zero quaternion is no guess
        let guessed = guess.filter(|g| g.len() == map.nq).is_some_and(|g| {
            map.chart_coordinates(q, g, &mut cw.guess);
            cw.guess.iter().all(|x| x.is_finite())
        });
        let model = &*self.model;
        ws.points.set_chart(model, |placements| map.chart_placements(model, q, placements));
        // the chart's vectors leave the workspace for the step and come back whatever it gives
        let take = |v: &mut Vec<f64>| std::mem::take(v);
        let cw = &mut ws.chart;
        let (theta, p_theta, u_theta, g, mut theta_next, mut p_theta_next) =
            (take(&mut cw.theta), take(&mut cw.p_theta), take(&mut cw.u_theta), take(&mut cw.guess), take(&mut cw.theta_next), take(&mut cw.p_theta_next));
        let result = self
            .step_in_coordinates(
                ws,
                StepInput { k: step, q: &theta, p: &p_theta, u: &u_theta, guess: guessed.then_some(&g[..]), continues: false },
                &mut theta_next,
                &mut p_theta_next,
            )
            .and_then(|it| {
                map.chart_point(q, &theta_next, q_next);
                map.covector_from_chart(&theta_next, &p_theta_next, p_next)?;
                if q_next.iter().chain(p_next.iter()).all(|x| x.is_finite()) {
                    Ok(it)
                } else {
                    Err(ViError::NonFiniteState { step, dt: self.dt })
                }
            });
        let cw = &mut ws.chart;
        (cw.theta, cw.p_theta, cw.u_theta, cw.guess, cw.theta_next, cw.p_theta_next) = (theta, p_theta, u_theta, g, theta_next, p_theta_next);
        match result {
            Err(ViError::NewtonDiverged { .. } | ViError::SingularJacobian { .. }) => {
                Err(self.too_fast(chart, ws, step).unwrap_or_else(|| result.unwrap_err()))
            }
            other => other,
        }
    }

    /// Why a step on the chart failed when a joint turns by more than a radian in it at the
    /// step's start velocity `v = M⁻¹ p_k`: near the chart's singularity (module docs).
    fn too_fast(&self, chart: &Chart, ws: &mut ViWorkspace, step: usize) -> Option<ViError> {
        let ViWorkspace { rbd, chart: cw, .. } = ws;
        let v = vidyn_rbd::mass_solve(&chart.native, rbd, &cw.centre, &cw.p).ok()?;
        chart.map.composite_joints().find_map(|j| {
            let turn = j.rotation().map_or(0.0, |r| v[r].iter().map(|w| w * w).sum::<f64>().sqrt() * self.dt);
            (turn > 1.0).then(|| ViError::StepTooLarge { step, joint: j.name().to_string(), degrees: turn.to_degrees(), dt: self.dt })
        })
    }

    /// The first iterate of a step on the chart from the [`Predictor::Taylor`] or (without
    /// `acceleration`) [`Predictor::Drift`] estimate: `v = M⁻¹ p_k` and `v̇` (ABA) of the
    /// user's model at the chart's centre, taken to the chart as rates `θ̇ = J(θ_k)⁻¹ v`,
    /// `θ̈ ≈ J(θ_k)⁻¹ v̇` (the `J̇ θ̇` term left out: an estimate). O(n).
    pub(crate) fn chart_prediction(&self, ws: &mut ViWorkspace, step: usize, theta: &[f64], acceleration: bool) -> Result<()> {
        let Some(chart) = self.chart.as_deref() else { return Ok(()) };
        let (n, dt, native, map) = (self.n(), self.dt, &*chart.native, &chart.map);
        {
            let ViWorkspace { rbd, scratch: v, tau, chart: cw, acceleration: a, .. } = &mut *ws;
            v.copy_from_slice(vidyn_rbd::mass_solve(native, rbd, &cw.centre, &cw.p)?);
            map.chart_rates(theta, v, &mut cw.rates)?;
            if acceleration {
                let f = &self.forces;
                for i in 0..n {
                    // damping and springs act on 1-dof joints only, whose θ_i is their coordinate
                    tau[i] = cw.u[i] - f.damping[i] * v[i] - f.stiffness[i] * (theta[i] - f.rest[i]);
                }
                let wrenches = (!self.body_wrenches().is_empty()).then_some(self.body_wrenches());
                a.copy_from_slice(vidyn_rbd::aba(native, rbd, &cw.centre, v, tau, wrenches)?);
            }
        }
        if acceleration {
            let centre = std::mem::take(&mut ws.chart.centre);
            let constrained = self.constrain_acceleration(ws, step, &centre);
            ws.chart.centre = centre;
            constrained?;
        }
        let ViWorkspace { z, chart: cw, acceleration: a, .. } = ws;
        if acceleration {
            map.chart_rates(theta, a, &mut cw.accelerations)?;
        } else {
            cw.accelerations.fill(0.0);
        }
        for (gi, &c) in self.scheme.nodes[1..].iter().enumerate() {
            let h = c * dt;
            for i in 0..n {
                z[gi * n + i] = theta[i] + h * cw.rates[i] + 0.5 * h * h * cw.accelerations[i];
            }
        }
        Ok(())
    }

    /// Adds to the first DEL rows `r0` `(n,)` what the chart's centre moving with `q_k` adds to
    /// `D₁L_d` (module docs, "The centre term"), at the control points set in `points` and
    /// under the chart controls `u`. O(s²) 6×6 products per composite joint, no allocation.
    pub(crate) fn add_centre_term(&self, points: &StepPoints, u: &[f64], r0: &mut [f64]) {
        // the per-point 6×6 blocks live on the stack, as many as the scheme has points:
        // clearing MAX_POINTS of them cost more than the midpoint rule's whole term (a 7.5 kB
        // memset per residual, 1.8 % of the instructions of ANYmal's walk)
        match self.scheme.points() {
            2 => self.add_centre_term_on::<2>(points, u, r0),
            3 => self.add_centre_term_on::<3>(points, u, r0),
            _ => self.add_centre_term_on::<MAX_POINTS>(points, u, r0),
        }
    }

    /// [`Self::add_centre_term`] with room for `P ≥ s + 1` control points.
    fn add_centre_term_on<const P: usize>(&self, points: &StepPoints, u: &[f64], r0: &mut [f64]) {
        let Some(chart) = self.chart.as_deref() else { return };
        let (sc, dt) = (&self.scheme, self.dt);
        let (s, pts, mixes) = (sc.s, sc.points(), sc.mixes_rows());
        for joint in chart.map.composite_joints() {
            let (f, d) = (joint.first(), joint.nv());
            let block = |x: &[f64]| -> [f64; 6] {
                let mut out = [0.0; 6];
                out[..d].copy_from_slice(&x[f..f + d]);
                out
            };
            // S at the step variables x^0 = q_k, the interior control points, x^s = q_{k+1};
            // mixed to the control points, S̄^β = Σ_x T[β][x] S(x)
            let mut shift_x = [Matrix6::zeros(); P];
            for (x, sx) in shift_x.iter_mut().enumerate().take(pts) {
                let y = if x == s {
                    let mut end = [0.0; 6];
                    for (a, q) in points.q.iter().enumerate() {
                        for (e, v) in end.iter_mut().zip(block(q)) {
                            *e += sc.endpoint(a) * v;
                        }
                    }
                    end
                } else {
                    block(&points.q[x])
                };
                *sx = joint.shift(&y);
            }
            let mut mixed = [Matrix6::zeros(); P];
            for (beta, m) in mixed.iter_mut().enumerate().take(pts) {
                for (x, sx) in shift_x.iter().enumerate().take(pts) {
                    let t = sc.mix(x, beta);
                    if t != 0.0 {
                        *m += sx * t;
                    }
                }
            }
            let mut term = Vector6::zeros();
            for alpha in 0..pts {
                let (q, qdot, st) = (block(&points.q[alpha]), block(&points.qdot[alpha]), &points.states[alpha]);
                let wdt = sc.weights[alpha] * dt;
                // P_α = S(θ^α) − S̄^α vanishes when the control points are the step variables
                let position = if mixes { joint.shift(&q) - mixed[alpha] } else { Matrix6::zeros() };
                let mut velocity = joint.shift_rate(&q, &qdot);
                for (beta, m) in mixed.iter().enumerate().take(pts) {
                    velocity -= m * (sc.b(alpha, beta) / dt);
                }
                let (mut force, mut momentum) = (Vector6::zeros(), Vector6::zeros());
                for k in 0..d {
                    let i = f + k;
                    force[k] = wdt * (st.dk_dq[i] - st.dv_dq[i] + u[i] + st.wrench_force(i));
                    momentum[k] = wdt * st.dk_dqdot[i];
                }
                term += position.transpose() * force + velocity.transpose() * momentum;
            }
            for k in 0..d {
                r0[f + k] += term[k];
            }
        }
    }

    /// With composite joints: centres the workspace's chart at `q` (`(nq,)`) and writes `q`'s
    /// chart coordinates there ([`ChartWork::coordinates`]); returns whether it did.
    pub(crate) fn centre_chart(&self, ws: &mut ViWorkspace, q: &[f64]) -> bool {
        let Some(chart) = self.chart.as_deref() else { return false };
        let (map, model) = (&chart.map, &*self.model);
        ws.points.set_chart(model, |placements| map.chart_placements(model, q, placements));
        map.chart_coordinates(q, q, &mut ws.chart.theta);
        true
    }

    /// The refusal of a computation not implemented for composite joints yet.
    pub(crate) fn refuse_lie_group(&self, what: &'static str) -> Result<()> {
        match self.chart {
            Some(_) => Err(ViError::NotOnLieGroup { what }),
            None => Ok(()),
        }
    }
}
