//! Is a solved step a genuine one? The energy balance of the step, checked against the work
//! done on it.
//!
//! Newton's method can converge to a solution of the discrete Euler–Lagrange equations that
//! the motion does not follow: at a time step too coarse for the motion (a 3-D pendulum chain
//! at `dt = 10`, an acrobot at `dt = 0.3`), the midpoint rule's equations have solutions on
//! other branches, where a joint swings through several turns per step and the energy grows
//! by orders of magnitude in a few steps (issue 21: −137.6 J to +212 059 J in five steps, with
//! every step "converged"). A variational integrator keeps its energy error small and bounded
//! on every step that resolves the motion, so the balance of one step tells the two apart:
//! with `T` the kinetic and `V` the potential energy (gravity and joint springs) at the two
//! knots and `W` the work of the controls and the joint damping over the step,
//! $$r = \frac{|\Delta E - W|}{T_k + T_{k+1} + |V_{k+1} - V_k| + |W|} \in [0, 1],$$
//! the share of the energy that the step moved which is not accounted for (zero when the
//! unaccounted energy is within what the energies are known to: their round-off and the
//! Newton tolerance, relative to their size). It is independent of the potential's zero. Measured on pendulum chains (3, 5 and 12 links, planar and 3-D),
//! the acrobot and the cart-pole from rest, fast and under random torques, for the midpoint
//! rule, trapezoid and Simpson at `dt` from 1e-3 to 10: every run whose energy stayed bounded
//! had `r ≤ 0.22` on every step (most below 0.01), and the runs whose energy exploded had a step
//! with `r ≥ 0.48` (most ≥ 0.99). A step with `r` above the integrator's limit (default
//! [`DEFAULT_MAX_ENERGY_ERROR`] = 0.4) is an error ([`ViError::NotGenuine`]).
//!
//! The work is `W = uᵀ Δq − Σ_i d_i Δq_i² / Δt` (constant controls, damping at the step's mean
//! velocity; both exact to the scheme's order). Kinematic (prescribed) joints and body
//! wrenches do work that this balance does not count, so steps of integrators that have them
//! are not checked, nor are touchdowns of a contact schedule (whose impulse does work when it
//! closes a gap, module `schedule`). Ideal holonomic constraints do no work, but a knot momentum
//! given by the user or left by an integrator with kinematic joints (not projected, module
//! `momentum_projection`) may keep a normal part that the next step's impulse removes, so
//! `½ pᵀ M⁻¹ p` would overstate the kinetic energy by about the impulse's share (a robot
//! standing on its contacts, where gravity's impulse is mostly normal, measured `r = 1.00` on
//! its first step from rest that way: solo12 on four point contacts): the kinetic energy of a
//! constrained knot is that of the motion the constraints allow,
//! `½ (pᵀ v − (C v)ᵀ (C M⁻¹ Cᵀ)⁻¹ C v)`, `v = M⁻¹ p`, `C = Dh(q)` ([`VariationalIntegrator::knot_energy`]).

use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use vidyn_rbd::check_tangent;
use vidyn_system::StepInput;

/// The smallest `|cos β|` of the pitch of a `to_single_dof` Euler-angle chain that a step
/// may reach (≈ 5.7° from ±90°). The expanded mass matrix `EᵀME` has condition ∝ `1/cos²β`,
/// and so has the integration error: a torque-free body J = diag(1, 2, 3) started
/// `δ` from the lock (trapezoid, dt = 0.01, 5 s, against RK4 of the quaternion equations)
/// ends with errors 8.8e-5, 1.0e-3, 1.5e-2 and 5.8e-2 rad for `δ` = 0.5, 0.1, 0.02, 0.01 — a
/// hundredfold more at this margin than at level pitch.
pub const GIMBAL_MARGIN: f64 = 0.1;

/// The largest energy inconsistency `r` of a step accepted by default (module docs).
pub const DEFAULT_MAX_ENERGY_ERROR: f64 = 0.4;

/// Kinetic and potential energy at a knot `(q, p)` (the potential includes joint springs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KnotEnergy {
    pub kinetic: f64,
    pub potential: f64,
}

impl KnotEnergy {
    #[must_use]
    pub fn total(&self) -> f64 {
        self.kinetic + self.potential
    }
}

impl VariationalIntegrator {
    /// Kinetic energy `½ pᵀ M(q)⁻¹ p` and potential energy `V(q)` (gravity and springs) of a
    /// knot, the start of step `step`. O(n): on the knot's point state in the world frame
    /// (module `point_mass_solve`; the step just solved has configured it, or the next step
    /// from it takes it over), by [`vidyn_rbd::mass_solve`] and
    /// [`vidyn_rbd::potential_energy`] with composite joints. With holonomic constraints the
    /// kinetic energy of the motion they allow, `½ v_tᵀ M v_t` with `v_t` the `M`-orthogonal
    /// projection of `v = M⁻¹ p` onto `Dh(q) v_t = 0` for the constraints of step `step` (of the
    /// schedule's last step past its end): a knot momentum not projected may keep a normal part that
    /// the next step's impulse removes (module docs), and at a touchdown the rest is the energy
    /// after the plastic impact. O(m n + m³) more.
    ///
    /// # Errors
    /// Invalid `q` or `p` (shapes, NaN, singular mass matrix), degenerate constraints.
    pub fn knot_energy(&self, ws: &mut ViWorkspace, step: usize, q: &[f64], p: &[f64]) -> Result<KnotEnergy> {
        if let Some(sys) = &self.mimic {
            return self.mimic_knot_energy(sys, ws, q, p);
        }
        let model = self.model();
        let mut v = std::mem::take(&mut ws.scratch);
        let gravity = match ws.points.knot_state(model, q) {
            // the world-frame solve on the knot's point state (module `point_mass_solve`)
            Some(point) => {
                check_tangent(model, p, "p").and_then(|()| point.mass_solve(model, p, &mut ws.point_solve, &mut v)).map(|()| point.gravity_potential(model))
            }
            None => {
                vidyn_rbd::mass_solve(model, &mut ws.rbd, q, p).map(|m| v.copy_from_slice(m)).and_then(|()| vidyn_rbd::potential_energy(model, &mut ws.rbd, q))
            }
        };
        let energies = gravity.map_err(ViError::from).and_then(|gravity| {
            let total = 0.5 * v.iter().zip(p).map(|(a, b)| a * b).sum::<f64>();
            Ok((total - self.normal_kinetic_energy(ws, self.knot_constraints(step), q, &v)?, gravity))
        });
        ws.scratch = v;
        let (kinetic, gravity) = energies?;
        let f = &self.forces;
        // springs act on 1-dof joints only (the integrator refuses them on composite ones)
        let springs: f64 = (0..model.nbodies())
            .filter(|&j| model.joints[j].nv() == 1)
            .map(|j| {
                let (iq, iv) = (model.idx_q[j], model.idx_v[j]);
                0.5 * f.stiffness[iv] * (q[iq] - f.rest[iv]).powi(2)
            })
            .sum();
        Ok(KnotEnergy { kinetic, potential: gravity + springs })
    }

    /// [`ViError::GimbalLock`] when configuration `q` (of step `step`) has an Euler-angle
    /// chain of `vidyn_rbd::to_single_dof` within [`GIMBAL_MARGIN`] of its lock. O(chains).
    ///
    /// # Errors
    /// As said.
    pub(crate) fn check_gimbals(&self, step: usize, q: &[f64]) -> Result<()> {
        for g in &self.model.gimbals {
            let pitch = q.get(g.pitch).copied().unwrap_or(0.0);
            let cos = pitch.cos().abs();
            if cos < GIMBAL_MARGIN && self.chart.is_some() {
                // the pitch of a step's chart is the rotation the step made
                return Err(ViError::StepTooLarge { step, joint: g.joint.clone(), degrees: pitch.abs().to_degrees(), dt: self.dt });
            }
            if cos < GIMBAL_MARGIN {
                let amplification = (1.0 / GIMBAL_MARGIN).powi(2);
                return Err(ViError::GimbalLock {
                    step,
                    joint: g.joint.clone(),
                    pitch,
                    cos,
                    margin: GIMBAL_MARGIN,
                    degrees: cos.asin().to_degrees(),
                    amplification,
                });
            }
        }
        Ok(())
    }

    /// Whether [`Self::check_step_energy`] checks anything: not without a limit, nor with
    /// kinematic joints or body wrenches (module docs).
    #[must_use]
    pub fn checks_energy(&self) -> bool {
        self.max_energy_error.is_finite() && !self.prescribed.iter().any(|&p| p) && self.wrenches.is_empty()
    }

    /// The energy inconsistency `r ∈ [0, 1]` of the step `q → q_next` under controls `u`
    /// between knots of energies `before` and `after` (module docs).
    #[must_use]
    pub fn energy_error(&self, before: KnotEnergy, after: KnotEnergy, q: &[f64], q_next: &[f64], u: &[f64]) -> f64 {
        let d = &self.forces.damping;
        // the work of the controls and the damping over the step's displacement δ (a tangent
        // vector: q_next − q, or with composite joints its chart coordinates in the step's chart)
        let mut work = 0.0;
        let mut add = |i: usize, delta: f64| work += delta * (u[i] - d[i] * delta / self.dt);
        match &self.chart {
            None => (0..q.len()).for_each(|i| add(i, q_next[i] - q[i])),
            Some(chart) => chart.map.for_each_displacement(q, q_next, add),
        }
        let moved = before.kinetic + after.kinetic + (after.potential - before.potential).abs() + work.abs();
        let unexplained = (after.total() - before.total() - work).abs();
        // what the energies are known to: their round-off, and the Newton tolerance the step
        // was solved to (a robot held still by its torques moves 1e-13 of its energy in a step,
        // all of it solver error: measured 4e-13 of 0.85 J on solo12 standing)
        let precision = (64.0 * f64::EPSILON).max(self.tolerance);
        let floor = precision * (before.total().abs() + after.total().abs() + before.potential.abs() + after.potential.abs());
        if unexplained <= floor {
            0.0
        } else {
            unexplained / moved
        }
    }

    /// [`ViError::NotGenuine`] when the step `k` (`q → q_next` under `u`, knot energies
    /// `before`, `after`) has an energy inconsistency above the integrator's limit.
    ///
    /// # Errors
    /// As said.
    pub fn check_step_energy(&self, step: usize, before: KnotEnergy, after: KnotEnergy, q: &[f64], q_next: &[f64], u: &[f64]) -> Result<()> {
        if !self.checks_energy() || self.schedule.as_ref().is_some_and(|s| s.touches_down(step)) {
            // a touchdown's impulse does work when it also closes a gap (module `schedule`)
            return Ok(());
        }
        let error = self.energy_error(before, after, q, q_next, u);
        if error > self.max_energy_error || error.is_nan() {
            return Err(ViError::NotGenuine { step, error, limit: self.max_energy_error, before: before.total(), after: after.total(), dt: self.dt });
        }
        Ok(())
    }

    /// [`Self::check_step_energy`] of the step `(q, p, u) → (q_next, p_next)`, with both knot
    /// energies computed here (two Legendre transforms and potentials, O(n)), both with the
    /// constraints of step `step` (a touchdown's impact is then the plastic one the step makes).
    ///
    /// # Errors
    /// As [`Self::check_step_energy`], or invalid states.
    pub fn check_step(&self, ws: &mut ViWorkspace, at: StepInput<'_>, q_next: &[f64], p_next: &[f64]) -> Result<()> {
        let StepInput { k: step, q, p, u, .. } = at;
        if !self.checks_energy() {
            return Ok(());
        }
        let before = self.knot_energy(ws, step, q, p)?;
        let after = self.knot_energy(ws, step, q_next, p_next)?;
        self.check_step_energy(step, before, after, q, q_next, u)
    }

    /// The energy limit of [`Self::check_step_energy`]: steps whose energy inconsistency
    /// exceeds `limit` (in `[0, 1]`; `f64::INFINITY` turns the check off) are errors.
    ///
    /// # Errors
    /// A negative or NaN `limit`.
    pub fn with_max_energy_error(mut self, limit: f64) -> Result<Self> {
        if limit.is_nan() || limit < 0.0 {
            return Err(ViError::InvalidParameter(format!("max_energy_error = {limit}; expected a number ≥ 0 (or inf to turn the check off)")));
        }
        self.max_energy_error = limit;
        Ok(self)
    }

    /// The energy limit ([`Self::with_max_energy_error`]).
    #[must_use]
    pub fn max_energy_error(&self) -> f64 {
        self.max_energy_error
    }
}

#[cfg(test)]
mod tests {
    use crate::*;
    use std::sync::Arc;
    use vidyn_rbd::builders::pendulum_chain;

    fn chain(scheme: Scheme, dt: f64, damping: f64) -> VariationalIntegrator {
        let model = Arc::new(pendulum_chain(5, false));
        let n = model.nv;
        let forces = JointForces { damping: vec![damping; n], ..JointForces::none(n) };
        VariationalIntegrator::new(model, scheme, dt, Some(forces)).unwrap()
    }

    /// The case of issue 21: a 3-D five-link chain under the midpoint rule at `dt = 10`
    /// converges step after step while its energy runs away; the rollout now stops at the
    /// first such step, and turning the check off gives back the old behaviour (over four
    /// steps: Newton finds no solution for the fifth from that state).
    #[test]
    fn a_step_off_the_motion_is_an_error() {
        let vi = chain(Scheme::midpoint(), 10.0, 0.0);
        let (q, p, u) = ([0.3; 5], [0.0; 5], [0.0; 5 * 5]);
        match rollout(&vi, &q, &p, &u) {
            Err(ViError::NotGenuine { step, error, limit, .. }) => assert!(step < 5 && error > limit && error <= 1.0, "step {step}: {error}"),
            other => panic!("{:?}", other.map(|t| t.p)),
        }
        let unchecked = vi.with_max_energy_error(f64::INFINITY).unwrap();
        assert!(!unchecked.checks_energy());
        let traj = rollout(&unchecked, &q, &p, &u[..4 * 5]).unwrap();
        let mut ws = unchecked.workspace();
        let (first, last) =
            (unchecked.energy(&mut ws, 0, traj.q_at(0), traj.p_at(0)).unwrap(), unchecked.energy(&mut ws, 4, traj.q_at(4), traj.p_at(4)).unwrap());
        assert!(last - first > 10.0 * first.abs(), "energy {first} -> {last}");
    }

    /// A resolved motion passes with a small inconsistency on every step, with damping and
    /// controls doing work (the balance counts it: the energy falls by far more than the
    /// inconsistency), and a chain at rest in its equilibrium has none at all.
    #[test]
    fn resolved_steps_balance_their_energy() {
        for scheme in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::by_name("simpson", None).unwrap()] {
            let vi = chain(scheme, 0.01, 0.5);
            let steps = 200;
            let u: Vec<f64> = (0..steps * 5).map(|i| 2.0 * (i as f64 * 0.37).sin()).collect();
            let traj = rollout(&vi, &[0.4, -0.3, 0.2, 0.5, -0.1], &[0.0; 5], &u).unwrap();
            let mut ws = vi.workspace();
            let energies: Vec<KnotEnergy> = (0..=steps).map(|k| vi.knot_energy(&mut ws, k, traj.q_at(k), traj.p_at(k)).unwrap()).collect();
            let worst = (0..steps).map(|k| vi.energy_error(energies[k], energies[k + 1], traj.q_at(k), traj.q_at(k + 1), traj.u_at(k))).fold(0.0, f64::max);
            assert!(worst < 0.05, "{worst}");
            let rest = [0.0; 5];
            let e = vi.knot_energy(&mut ws, 0, &rest, &rest).unwrap();
            assert_eq!(vi.energy_error(e, e, &rest, &rest, &rest), 0.0);
        }
    }
}
