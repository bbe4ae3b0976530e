//! The one-step flow map `(q_k, p_k, u_k) ↦ (q_{k+1}, p_{k+1})` of a Galerkin–Lobatto
//! variational integrator, its Newton solve and its exact linearisation.

use crate::del::{assemble_jacobian, JointForces, StepPoints};
use crate::dense::{lu_factor, lu_solve};
use crate::error::{Result, ViError};
use crate::scheme::Scheme;
use nalgebra::DMatrix;
use std::sync::Arc;
use vidyn_rbd::{check_configuration, check_tangent, Joint, Model, Workspace};

/// A variational integrator for a model whose joints are all revolute or prismatic.
///
/// State convention: `x = (q, p)` with `p` the discrete momentum (for the continuous system
/// `p = M(q) q̇`, the Legendre transform used by [`VariationalIntegrator::momentum`]).
/// Controls `u` (one per joint, generalised forces) are held constant over each step.
#[derive(Clone, Debug)]
pub struct VariationalIntegrator {
    model: Arc<Model>,
    scheme: Scheme,
    dt: f64,
    forces: JointForces,
    /// Newton stops when `|r|∞ ≤ tolerance · max(1, |p_k|∞)`, or when its update has reached
    /// round-off (`|δz|∞ ≤ 8ε(1 + |z|∞)`) with `|r|∞ ≤ 1.5e-8 · max(1, |p_k|∞)`.
    tolerance: f64,
    max_iterations: usize,
}

/// Per-thread scratch of a [`VariationalIntegrator`] (create with
/// [`VariationalIntegrator::workspace`]); no step allocates after that.
#[derive(Clone, Debug)]
pub struct ViWorkspace {
    pub(crate) points: StepPoints,
    /// `(s·n,)` unknown control points `q^1..q^s`.
    pub(crate) z: Vec<f64>,
    /// `(s·n,)` residual.
    pub(crate) residual: Vec<f64>,
    /// `(s·n, s·n)` Newton Jacobian, then its LU factors.
    pub(crate) jacobian: DMatrix<f64>,
    pub(crate) pivots: Vec<usize>,
    /// `(s·n, 3n)` right-hand sides / solutions of the linearisation.
    pub(crate) sensitivities: DMatrix<f64>,
    /// `(n, n)` scratch block.
    pub(crate) block: DMatrix<f64>,
    pub(crate) rbd: Workspace,
    pub(crate) scratch: Vec<f64>,
    /// Newton iterations of the last step.
    pub last_iterations: usize,
}

impl VariationalIntegrator {
    /// A new integrator. Errors for non-1-dof joints, a non-positive or non-finite `dt`,
    /// or forcing vectors of the wrong length.
    pub fn new(model: Arc<Model>, scheme: Scheme, dt: f64, forces: Option<JointForces>) -> Result<Self> {
        for (i, j) in model.joints.iter().enumerate() {
            if !matches!(j, Joint::Revolute { .. } | Joint::Prismatic { .. }) {
                return Err(ViError::UnsupportedJoint { joint: model.joint_names[i].clone(), kind: j.kind_name() });
            }
        }
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(ViError::InvalidParameter(format!("dt = {dt}; expected a positive finite time step")));
        }
        let n = model.nv;
        let forces = forces.unwrap_or_else(|| JointForces { damping: model.limits.damping.clone(), ..JointForces::none(n) });
        for (name, v) in [("damping", &forces.damping), ("stiffness", &forces.stiffness), ("rest", &forces.rest)] {
            check_tangent(&model, v, "forces").map_err(|_| ViError::InvalidParameter(format!("{name} must have model.nv = {n} finite entries")))?;
        }
        Ok(Self { model, scheme, dt, forces, tolerance: 1e-12, max_iterations: 30 })
    }

    /// Sets the Newton tolerance (relative to `max(1, |p_k|∞)`) and iteration cap.
    pub fn with_newton(mut self, tolerance: f64, max_iterations: usize) -> Result<Self> {
        if !(tolerance > 0.0 && tolerance.is_finite()) || max_iterations == 0 {
            return Err(ViError::InvalidParameter(format!("tolerance {tolerance} and max_iterations {max_iterations} must be positive")));
        }
        self.tolerance = tolerance;
        self.max_iterations = max_iterations;
        Ok(self)
    }

    #[must_use]
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }
    #[must_use]
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }
    #[must_use]
    pub fn dt(&self) -> f64 {
        self.dt
    }
    #[must_use]
    pub fn forces(&self) -> &JointForces {
        &self.forces
    }

    /// Number of degrees of freedom `n` (= nq = nv).
    #[must_use]
    pub fn n(&self) -> usize {
        self.model.nv
    }

    /// Fresh scratch for this integrator.
    #[must_use]
    pub fn workspace(&self) -> ViWorkspace {
        let (n, s) = (self.n(), self.scheme.s);
        ViWorkspace {
            points: StepPoints::new(n, s + 1),
            z: vec![0.0; s * n],
            residual: vec![0.0; s * n],
            jacobian: DMatrix::zeros(s * n, s * n),
            pivots: vec![0; s * n],
            sensitivities: DMatrix::zeros(s * n, 3 * n),
            block: DMatrix::zeros(n, n),
            rbd: self.model.workspace(),
            scratch: vec![0.0; n],
            last_iterations: 0,
        }
    }

    /// Legendre transform `p = M(q) q̇` (the momentum matching an initial velocity).
    pub fn momentum(&self, ws: &mut ViWorkspace, q: &[f64], qdot: &[f64], p: &mut [f64]) -> Result<()> {
        check_tangent(&self.model, qdot, "v")?;
        let m = vidyn_rbd::crba(&self.model, &mut ws.rbd, q)?;
        for (i, pi) in p.iter_mut().enumerate() {
            *pi = (0..qdot.len()).map(|j| m[(i, j)] * qdot[j]).sum();
        }
        Ok(())
    }

    /// Inverse Legendre transform `q̇ = M(q)⁻¹ p`.
    pub fn velocity(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], qdot: &mut [f64]) -> Result<()> {
        check_tangent(&self.model, p, "p")?;
        let minv = vidyn_rbd::minverse(&self.model, &mut ws.rbd, q)?;
        for (i, v) in qdot.iter_mut().enumerate() {
            *v = (0..p.len()).map(|j| minv[(i, j)] * p[j]).sum();
        }
        Ok(())
    }

    /// Mechanical energy `½ pᵀ M⁻¹ p + V(q)` of a state.
    pub fn energy(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64]) -> Result<f64> {
        let mut v = std::mem::take(&mut ws.scratch);
        let result = self.velocity(ws, q, p, &mut v).and_then(|()| {
            let t = 0.5 * v.iter().zip(p).map(|(a, b)| a * b).sum::<f64>();
            Ok(t + vidyn_rbd::potential_energy(&self.model, &mut ws.rbd, q)?)
        });
        ws.scratch = v;
        result
    }

    fn check_inputs(&self, q: &[f64], p: &[f64], u: &[f64]) -> Result<()> {
        check_configuration(&self.model, q)?;
        check_tangent(&self.model, p, "p")?;
        check_tangent(&self.model, u, "u")?;
        Ok(())
    }

    /// One step: solves the DEL equations for `q_{k+1}` by Newton's method (dense Jacobian,
    /// LU) and evaluates `p_{k+1}`. `guess`: an estimate of `q_{k+1}` (e.g. from the previous
    /// trajectory), otherwise `q_k + Δt M⁻¹ p_k` is used; interior points are interpolated.
    /// `step` only labels errors.
    pub fn step(&self, ws: &mut ViWorkspace, step: usize, q: &[f64], p: &[f64], u: &[f64], guess: Option<&[f64]>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        self.check_inputs(q, p, u)?;
        let n = self.n();
        self.initial_guess(ws, q, p, guess)?;
        let sc = &self.scheme;
        let scale = p.iter().fold(1.0_f64, |m, x| m.max(x.abs()));
        let tol = self.tolerance * scale;
        let mut residual = f64::INFINITY;
        // set when the last Newton update was at round-off level: the residual cannot shrink
        // further, so it is accepted if it is at least small (√ε relative)
        let mut stalled = false;
        for it in 0..=self.max_iterations {
            ws.points.set(&self.model, sc, self.dt, q, &ws.z);
            residual = 0.0;
            for rho in 0..sc.s {
                for i in 0..n {
                    let mut r = ws.points.del_row(sc, self.dt, &self.forces, u, rho, i);
                    if rho == 0 {
                        r += p[i];
                    }
                    ws.residual[rho * n + i] = r;
                    residual = residual.max(r.abs());
                }
            }
            if !residual.is_finite() {
                break;
            }
            if residual <= tol || (stalled && residual <= 1.5e-8 * scale) {
                ws.last_iterations = it;
                q_next.copy_from_slice(&ws.z[(sc.s - 1) * n..]);
                for (i, pn) in p_next.iter_mut().enumerate() {
                    *pn = ws.points.del_row(sc, self.dt, &self.forces, u, sc.s, i);
                }
                return Ok(it);
            }
            if it == self.max_iterations {
                break;
            }
            ws.points.update_hessians(&self.model);
            assemble_jacobian(&ws.points, sc, self.dt, &self.forces, n, &mut ws.jacobian);
            if !lu_factor(&mut ws.jacobian, &mut ws.pivots) {
                return Err(ViError::SingularJacobian { step });
            }
            lu_solve(&ws.jacobian, &ws.pivots, &mut ws.residual);
            let (mut dmax, mut zmax) = (0.0_f64, 0.0_f64);
            for (z, d) in ws.z.iter_mut().zip(&ws.residual) {
                *z -= d;
                dmax = dmax.max(d.abs());
                zmax = zmax.max(z.abs());
            }
            stalled = dmax <= 8.0 * f64::EPSILON * (1.0 + zmax);
        }
        Err(ViError::NewtonDiverged { step, iterations: self.max_iterations, residual, tolerance: tol })
    }

    fn initial_guess(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], guess: Option<&[f64]>) -> Result<()> {
        let n = self.n();
        let mut end = std::mem::take(&mut ws.scratch);
        match guess {
            Some(g) => {
                check_configuration(&self.model, g)?;
                end.copy_from_slice(g);
            }
            None => {
                let r = self.velocity(ws, q, p, &mut end);
                if let Err(e) = r {
                    ws.scratch = end;
                    return Err(e);
                }
                for (e, qi) in end.iter_mut().zip(q) {
                    *e = qi + self.dt * *e;
                }
            }
        }
        for g in 1..=self.scheme.s {
            let c = self.scheme.nodes[g];
            for i in 0..n {
                ws.z[(g - 1) * n + i] = q[i] + c * (end[i] - q[i]);
            }
        }
        ws.scratch = end;
        Ok(())
    }

    /// Exact first-order linearisation of the step from `(q, p, u)` (solving it first):
    /// `A = ∂(q_{k+1}, p_{k+1})/∂(q_k, p_k)` (2n×2n) and `B = ∂(q_{k+1}, p_{k+1})/∂u_k` (2n×n),
    /// by the implicit-function theorem on the DEL equations (Fan et al. 2018 digest §6.5):
    /// `dz/dx = −J⁻¹ ∂R/∂x` with one LU of `J` for all `3n` right-hand sides, then
    /// `dq_{k+1} = dz_s` and `dp_{k+1} = ∂P/∂x + Σ_γ H(s, γ) dz_γ`. Writes the next state too.
    pub fn linearize(&self, ws: &mut ViWorkspace, step: usize, q: &[f64], p: &[f64], u: &[f64], guess: Option<&[f64]>, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        let iterations = self.step(ws, step, q, p, u, guess, q_next, p_next)?;
        let (n, s, dt) = (self.n(), self.scheme.s, self.dt);
        let sc = &self.scheme;
        let pts = &mut ws.points;
        pts.set(&self.model, sc, dt, q, &ws.z);
        pts.update_hessians(&self.model);
        assemble_jacobian(pts, sc, dt, &self.forces, n, &mut ws.jacobian);
        if !lu_factor(&mut ws.jacobian, &mut ws.pivots) {
            return Err(ViError::SingularJacobian { step });
        }
        // right-hand sides ∂R/∂x for x = (q_k, p_k, u): columns [0, n), [n, 2n), [2n, 3n)
        let rhs = &mut ws.sensitivities;
        rhs.fill(0.0);
        for rho in 0..s {
            let mut blk = rhs.view_mut((rho * n, 0), (n, n));
            pts.del_block(sc, dt, &self.forces, rho, 0, &mut blk);
            for i in 0..n {
                rhs[(rho * n + i, 2 * n + i)] = sc.weights[rho] * dt;
            }
        }
        for i in 0..n {
            rhs[(i, n + i)] = 1.0;
        }
        for c in 0..3 * n {
            let mut col = rhs.column_mut(c);
            lu_solve(&ws.jacobian, &ws.pivots, col.as_mut_slice());
            col.neg_mut();
        }
        // q_{k+1} = z_s
        let last = (s - 1) * n;
        for r in 0..n {
            for c in 0..2 * n {
                a[(r, c)] = rhs[(last + r, c)];
            }
            for c in 0..n {
                b[(r, c)] = rhs[(last + r, 2 * n + c)];
            }
        }
        // p_{k+1} = P(q^0, …, q^s, u)
        for r in 0..n {
            for c in 0..2 * n {
                a[(n + r, c)] = 0.0;
            }
            for c in 0..n {
                b[(n + r, c)] = if r == c { sc.weights[s] * dt } else { 0.0 };
            }
        }
        let blk = &mut ws.block;
        pts.del_block(sc, dt, &self.forces, s, 0, &mut blk.view_mut((0, 0), (n, n)));
        for r in 0..n {
            for c in 0..n {
                a[(n + r, c)] += blk[(r, c)];
            }
        }
        for gamma in 1..=s {
            pts.del_block(sc, dt, &self.forces, s, gamma, &mut blk.view_mut((0, 0), (n, n)));
            let off = (gamma - 1) * n;
            for r in 0..n {
                for k in 0..n {
                    let h = blk[(r, k)];
                    if h == 0.0 {
                        continue;
                    }
                    for c in 0..2 * n {
                        a[(n + r, c)] += h * rhs[(off + k, c)];
                    }
                    for c in 0..n {
                        b[(n + r, c)] += h * rhs[(off + k, 2 * n + c)];
                    }
                }
            }
        }
        Ok(iterations)
    }
}
