//! Where Newton's method starts a step: the first iterate of the unknown control points.
//!
//! A step's DEL equations are solved by Newton's method ([`VariationalIntegrator::step`]),
//! whose basin around the solution shrinks as the system grows stiff or long (the mass matrix
//! of an n-link chain spans ~n⁴ in scale). Three estimates of `q_{k+1}` are tried in turn,
//! each only when Newton failed from the one before, so a step that converges from the first
//! costs nothing more.

use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use vidyn_rbd::{check_configuration, check_tangent};
use vidyn_system::StepInput;

/// An estimate of the step's end point `q_{k+1}`, in the order [`VariationalIntegrator::step`]
/// tries them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Predictor {
    /// The caller's guess (a rollout extrapolates the last configurations by a polynomial,
    /// [`crate::predict_next`]; a linearisation passes the known `q_{k+1}`).
    Guess,
    /// The second-order Taylor expansion of the continuous motion,
    /// `q(t_k + h) ≈ q_k + h q̇ + ½ h² q̈` with `q̇ = M⁻¹ p_k` and `q̈` the forward dynamics
    /// under `u`, the joint forces and the body wrenches: O(Δt³) from the solution where
    /// `M⁻¹ p_k` is close to the velocity, and the only estimate that sees gravity in a step
    /// from rest (on a 3-D 1024-link chain at Δt = 10⁻³ the first step converges in 2
    /// iterations instead of failing).
    Taylor,
    /// Constant velocity, `q_k + h M⁻¹ p_k`: the safe fallback when `Δt` is so large that the
    /// acceleration term throws the estimate far off.
    Drift,
}

impl VariationalIntegrator {
    /// Fills `ws.z` with the first iterate of a step from `(q, p)` under `u`: control point
    /// `α` at `c_α` of the way along the predicted motion (`h = c_α Δt` in the expansions of
    /// [`Predictor`]). A guess `g` of the end sets the interior points (`s ≥ 2`) on the
    /// parabola that leaves `q` at the knot's velocity `v = M⁻¹ p` and ends at `g`,
    /// `q + c h v + c² (g − q − h v)` with `h = Δt` (O(Δt³) from the motion when `g` is; the
    /// straight line `q + c (g − q)` is O(Δt²) off: on 3-D chains of 256 and 512 links at
    /// Δt = 10⁻³ the Simpson steps took 4.4 and 7.3 Newton iterations from it, 3.2 and 3.6
    /// from the parabola), or on the line where `v` is not at hand ([`Self::knot_velocity`]). O(n):
    /// `M⁻¹ p` by [`vidyn_rbd::mass_solve`], `q̈` by [`vidyn_rbd::aba`]. With kinematic
    /// joints (whose `u` are positions, not forces) the Taylor estimate drops its acceleration
    /// term; their control points are set from `u` ([`Self::with_kinematic`]).
    pub(crate) fn initial_guess(&self, ws: &mut ViWorkspace, at: StepInput<'_>, predictor: Predictor) -> Result<()> {
        let StepInput { k: step, q, p, u, guess, .. } = at;
        let (n, dt) = (self.n(), self.dt);
        match (predictor, guess) {
            (Predictor::Guess, Some(g)) => {
                check_configuration(&self.model, g)?;
                let hermite = self.scheme.s >= 2 && self.knot_velocity(ws, q, p);
                let ViWorkspace { z, scratch: v, .. } = ws;
                for (gi, &c) in self.scheme.nodes[1..].iter().enumerate() {
                    for i in 0..n {
                        z[gi * n + i] = if c == 1.0 {
                            // the end node exactly (q + 1·(end − q) may differ from end in the last bit)
                            g[i]
                        } else if hermite {
                            let hv = dt * v[i];
                            q[i] + c * hv + c * c * (g[i] - q[i] - hv)
                        } else {
                            q[i] + c * (g[i] - q[i])
                        };
                    }
                }
            }
            _ if self.chart.is_some() => self.chart_prediction(ws, step, q, predictor == Predictor::Taylor && !self.prescribed.iter().any(|&k| k))?,
            _ => {
                check_tangent(&self.model, p, "p")?;
                let accelerate = predictor == Predictor::Taylor && !self.prescribed.iter().any(|&k| k);
                {
                    let ViWorkspace { rbd, scratch: v, tau, acceleration, .. } = &mut *ws;
                    v.copy_from_slice(vidyn_rbd::mass_solve(&self.model, rbd, q, p)?);
                    if accelerate {
                        let f = &self.forces;
                        for i in 0..n {
                            tau[i] = u[i] - f.damping[i] * v[i] - f.stiffness[i] * (q[i] - f.rest[i]);
                        }
                        let wrenches = (!self.wrenches.is_empty()).then_some(self.wrenches.as_slice());
                        acceleration.copy_from_slice(vidyn_rbd::aba(&self.model, rbd, q, v, tau, wrenches)?);
                    }
                }
                if accelerate {
                    self.constrain_acceleration(ws, step, q)?;
                }
                let ViWorkspace { z, scratch: v, acceleration, .. } = ws;
                for (gi, &c) in self.scheme.nodes[1..].iter().enumerate() {
                    let h = c * dt;
                    for i in 0..n {
                        z[gi * n + i] = q[i] + h * v[i] + if accelerate { 0.5 * h * h * acceleration[i] } else { 0.0 };
                    }
                }
            }
        }
        // kinematic joints: the control point that puts q_{k+1} at ρ_{k+1} = u_i (s = 1)
        let (e0, e1) = (self.scheme.endpoint(0), self.scheme.endpoint(self.scheme.s));
        for (i, _) in self.prescribed.iter().enumerate().filter(|(_, &k)| k) {
            ws.z[i] = (u[i] - e0 * q[i]) / e1;
        }
        Ok(())
    }
}

impl VariationalIntegrator {
    /// `ws.scratch = M(q)⁻¹ p`, the velocity at the knot `(q, p)`, by the world-frame solve on
    /// the knot's point state (module `point_mass_solve`; after a Lobatto step of a rollout its
    /// last control point is that knot, already configured). `false` (and nothing written
    /// that matters) where it does not apply: kinematic joints (whose `p` are velocities), a
    /// chart's coordinates, a singular mass matrix.
    fn knot_velocity(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64]) -> bool {
        if self.prescribed.iter().any(|&k| k) {
            return false;
        }
        let ViWorkspace { points, point_solve, scratch, .. } = ws;
        points.knot_state(&self.model, q).is_some_and(|point| point.mass_solve(&self.model, p, point_solve, scratch).is_ok())
    }

    /// Takes out of `ws.acceleration` (tangent coordinates at the knot `q`, `(nq,)`) what
    /// the constraints of step `step` forbid: `a − M⁻¹Cᵀ (C M⁻¹ Cᵀ)⁻¹ C a`, the constrained
    /// acceleration up to the velocity term `Ċ v` (the free forward dynamics of a robot
    /// standing on its feet throws its light links far off, and Newton from there can find
    /// a root the motion does not follow). Nothing without projected momenta
    /// ([`Self::projects_momenta`]). O(a n + a³).
    pub(crate) fn constrain_acceleration(&self, ws: &mut ViWorkspace, step: usize, q: &[f64]) -> Result<()> {
        let active = self.active_constraints(step)?;
        if !self.projects_momenta() || active.is_empty() {
            return Ok(());
        }
        self.knot_constraint_factors(ws, step, active, q)?;
        let ViWorkspace { constraint: cw, acceleration, .. } = ws;
        let a = active.len();
        for (r, c) in cw.compact[..a].iter_mut().enumerate() {
            *c = cw.c_knot.row(r).iter().zip(acceleration.iter()).map(|(x, y)| x * y).sum();
        }
        crate::dense::lu_solve_in(&cw.s_knot[..a * a], a, &cw.s_pivots, &mut cw.compact[..a]);
        for (r, l) in cw.compact[..a].iter().enumerate() {
            for (ai, m) in acceleration.iter_mut().zip(cw.minv_ct.column(r).iter()) {
                *ai -= m * l;
            }
        }
        Ok(())
    }
}

/// Newton from each of `predictors` in turn (`attempt` runs one solve) until one converges:
/// returns its iterations plus those of the starts that diverged, or the first failure, which
/// describes the step best. Errors other than divergence and a singular Jacobian end the
/// search at once.
pub(crate) fn from_predictors(
    step: usize,
    predictors: impl IntoIterator<Item = Predictor>,
    mut attempt: impl FnMut(Predictor) -> Result<usize>,
) -> Result<usize> {
    let (mut spent, mut first_failure) = (0, None);
    for predictor in predictors {
        match attempt(predictor) {
            Ok(it) => return Ok(it + spent),
            Err(e @ (ViError::NewtonDiverged { .. } | ViError::SingularJacobian { .. })) => {
                if let ViError::NewtonDiverged { iterations, .. } = e {
                    spent += iterations;
                }
                first_failure.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(first_failure.unwrap_or(ViError::SingularJacobian { step }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::Scheme;
    use std::sync::Arc;
    use vidyn_rbd::builders::pendulum_chain;

    /// The largest distance of Simpson's interior control point, as [`VariationalIntegrator::initial_guess`]
    /// sets it from the exact end point, to its value at the solution, on a 3-D 6-link chain
    /// moving at ~1 rad/s.
    fn interior_guess_error(dt: f64) -> f64 {
        let model = Arc::new(pendulum_chain(6, false));
        let vi = VariationalIntegrator::new(model, Scheme::simpson(), dt, None).unwrap();
        let mut ws = vi.workspace();
        let q: Vec<f64> = (0..6).map(|i| 0.4 * (1.7 * f64::from(i)).sin()).collect();
        let v: Vec<f64> = (0..6).map(|i| (0.9 * f64::from(i)).cos()).collect();
        let (u, mut p) = (vec![0.0; 6], vec![0.0; 6]);
        vi.momentum(&mut ws, &q, &v, &mut p).unwrap();
        let (mut q_next, mut p_next) = (vec![0.0; 6], vec![0.0; 6]);
        vi.step(&mut ws, StepInput::new(0, &q, &p, &u), &mut q_next, &mut p_next).unwrap();
        let solution = ws.z[..6].to_vec();
        vi.initial_guess(&mut ws, StepInput::new(0, &q, &p, &u).with_guess(Some(&q_next)), Predictor::Guess).unwrap();
        ws.z[..6].iter().zip(&solution).fold(0.0, |m, (a, b)| m.max((a - b).abs()))
    }

    /// The parabola through the knot's velocity puts the interior point O(Δt³) from the
    /// solution: halving Δt divides the error by about 8 (the straight line's by 4).
    #[test]
    fn the_interior_guess_is_third_order() {
        let (coarse, fine) = (interior_guess_error(0.02), interior_guess_error(0.01));
        let order = (coarse / fine).log2();
        assert!((order - 3.0).abs() < 0.3, "order {order} ({coarse:e}, {fine:e})");
    }
}
