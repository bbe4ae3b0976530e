//! Steps of a model with mimic joints (`vidyn_rbd::mimic`): the DEL equations of the reduced
//! system, solved and linearised on the dense path.
//!
//! # The maths
//! The coupling `q_e = G q + o` is affine and the Galerkin interpolation linear, so the
//! reduced system's discrete Lagrangian is the extended tree's at the lifted control points,
//! `L_d(q^0, …, q^s) = L_{d,e}(G q^0 + o, …, G q^s + o)`, and its discrete forces are
//! `Gᵀ Q_e`. By the chain rule the reduced DEL residual at the unknowns `z = (q^1, …, q^s)` is
//!
//! $$r = \hat G^T r_e(\hat G z + \hat o),\qquad J = \hat G^T J_e \hat G,$$
//!
//! `Ĝ = blockdiag(G, …, G)` over the `s` unknown control points, with `r_e` the extended
//! residual rows (module `del`) — its momentum term `p_e` only needs `Gᵀ p_e = p`, so `p`
//! itself is added to the reduced first row, and the controls enter through any `u_e` with
//! `Gᵀ u_e = u` (`vidyn_rbd::Coupling::lift_force`). The momentum is `p_{k+1} = Gᵀ P_e`.
//! Joint damping and springs act on the reduced coordinates: the extended forces hold them on
//! each free coordinate and nothing on the mimicking ones.
//!
//! The recursive Newton direction of Fan et al. (module `newton_direction`) works on the tree
//! and cannot take `Ĝ`, so every step forms the reduced `J` block by block
//! (`Gᵀ H_e(ϱ, γ) G`, O(n_e²) each) and factors it by LU (module `dense_step`), whatever the
//! size; the exact linearisation `A`, `B` reuses that factorisation with the reduced blocks.
//! Refused with mimic joints (with an error naming them): free-flyer, spherical and planar
//! joints, holonomic constraints, kinematic joints, body wrenches, the second-order
//! derivatives, the velocity state and the residual/direction primitives.

use crate::del::JointForces;
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::predictor::{from_predictors, Predictor};
use crate::scheme::Scheme;
use nalgebra::{DMatrix, DMatrixViewMut};
use vidyn_rbd::mimic::{self as rbd_mimic, MimicWorkspace};
use vidyn_rbd::{check_vector, Coupling, Model};
use vidyn_system::StepInput;

/// What an integrator of a model with mimic joints holds besides the model: its coupling and
/// the joint forces on the extended coordinates.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MimicSystem {
    pub(crate) coupling: Coupling,
    /// `(n_e,)` the reduced damping, stiffness and rest positions on the free coordinates.
    forces: JointForces,
}

impl MimicSystem {
    /// The system of `model` (with mimic joints) under the reduced joint forces `forces`.
    ///
    /// # Errors
    /// [`ViError::InvalidParameter`] for a model with free-flyer, spherical or planar joints.
    pub(crate) fn new(model: &Model, forces: &JointForces) -> Result<Self> {
        if let Some(b) = (0..model.nbodies()).find(|&b| model.joints[b].nv() != 1 || model.joints[b].nq() != 1) {
            return Err(ViError::InvalidParameter(format!(
                "joint '{}' is {}: the integrator takes mimic joints on models of revolute and prismatic joints only",
                model.joint_names[b],
                model.joints[b].kind_name()
            )));
        }
        let coupling = model.coupling();
        let mut extended = JointForces::none(model.nv);
        for (c, &e) in coupling.free_velocities().iter().enumerate() {
            extended.damping[e] = forces.damping[c];
            extended.stiffness[e] = forces.stiffness[c];
            extended.rest[e] = forces.rest[c];
        }
        Ok(Self { coupling, forces: extended })
    }
}

/// Per-thread scratch of the steps of [`MimicSystem`]s, allocated once.
#[derive(Clone, Debug)]
pub(crate) struct MimicWork {
    /// The reduced rigid-body algorithms (Legendre transforms, energies, predictors).
    pub(crate) dynamics: MimicWorkspace,
    /// `(n_e,)` the lifted `q_k`, `(s·n_e,)` the lifted unknowns, `(n_e,)` the lifted controls.
    q: Vec<f64>,
    z: Vec<f64>,
    u: Vec<f64>,
    /// `(n_e,)` one extended row block; `(n_e, n_e)` one extended DEL block.
    rows: Vec<f64>,
    block: DMatrix<f64>,
    /// `(n,)` scratch.
    v: Vec<f64>,
}

impl MimicWork {
    pub(crate) fn new(model: &Model, s: usize) -> Self {
        let (ne, n) = (model.nv, model.coupling().nv());
        Self {
            dynamics: MimicWorkspace::new(model),
            q: vec![0.0; model.nq],
            z: vec![0.0; s * ne],
            u: vec![0.0; ne],
            rows: vec![0.0; ne],
            block: DMatrix::zeros(ne, ne),
            v: vec![0.0; n],
        }
    }
}

impl VariationalIntegrator {
    /// [`Self::step`] of a model with mimic joints (module docs): Newton on the reduced DEL
    /// equations from the predictors in turn, each iteration on the reduced dense `J`, with
    /// the stopping rule of [`Self::step`] but for its round-off floor (an update below the
    /// resolution of `z` accepts a residual within `1.5·10⁻⁸ max(1, |p_k|∞)`).
    pub(crate) fn step_mimic(&self, sys: &MimicSystem, ws: &mut ViWorkspace, at: StepInput<'_>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        let StepInput { k: step, q, p, u, guess, .. } = at;
        ws.within_tolerance = false;
        let c = &sys.coupling;
        check_vector(q, "q", c.nq(), "model.nq")?;
        check_vector(p, "p", c.nv(), "model.nv")?;
        check_vector(u, "u", c.nv(), "model.nv")?;
        if let Some(g) = guess {
            check_vector(g, "guess", c.nq(), "model.nq")?;
        }
        let work = ws.mimic.as_mut().expect("a mimic integrator's workspace has mimic scratch");
        c.lift_configuration(q, &mut work.q);
        c.lift_force(u, &mut work.u);
        ws.points.set_start(&self.model, &work.q, &[]);
        ws.dense.ensure(c.nv(), self.scheme.s);
        let predictors = [Predictor::Guess, Predictor::Taylor, Predictor::Drift].into_iter().filter(|&start| !(start == Predictor::Guess && guess.is_none()));
        from_predictors(step, predictors, |predictor| {
            self.mimic_prediction(sys, ws, at, predictor)?;
            let it = self.mimic_newton(sys, ws, step, p)?;
            let work = ws.mimic.as_mut().expect("mimic scratch");
            self.scheme.endpoint_from(q, &ws.z, q_next);
            ws.points.del_rows(&self.scheme, self.dt, &sys.forces, &work.u, self.scheme.s, &mut work.rows);
            c.reduce_force(&work.rows, p_next);
            ws.last_iterations = it;
            if !q_next.iter().chain(p_next.iter()).all(|x| x.is_finite()) {
                return Err(ViError::NonFiniteState { step, dt: self.dt });
            }
            Ok(it)
        })
    }

    /// The first iterate `ws.z` (reduced) from a [`Predictor`], as [`Self::initial_guess`]
    /// does on a tree: `M⁻¹ p` and the forward dynamics of the reduced system.
    fn mimic_prediction(&self, sys: &MimicSystem, ws: &mut ViWorkspace, at: StepInput<'_>, predictor: Predictor) -> Result<()> {
        let StepInput { q, p, u, guess, .. } = at;
        let n = sys.coupling.nv();
        let nodes = &self.scheme.nodes[1..];
        if let (Predictor::Guess, Some(g)) = (predictor, guess) {
            for (gi, &c) in nodes.iter().enumerate() {
                for i in 0..n {
                    ws.z[gi * n + i] = if c == 1.0 { g[i] } else { q[i] + c * (g[i] - q[i]) };
                }
            }
            return Ok(());
        }
        let ViWorkspace { rbd, z, tau, mimic, .. } = ws;
        let work = mimic.as_mut().expect("mimic scratch");
        let minv = rbd_mimic::minverse(&self.model, rbd, &mut work.dynamics, q)?;
        for (i, v) in work.v.iter_mut().enumerate() {
            *v = (0..n).map(|j| minv[(i, j)] * p[j]).sum();
        }
        let f = &self.forces;
        for i in 0..n {
            tau[i] = u[i] - f.damping[i] * work.v[i] - f.stiffness[i] * (q[i] - f.rest[i]);
        }
        let a = if predictor == Predictor::Taylor { Some(rbd_mimic::aba(&self.model, rbd, &mut work.dynamics, q, &work.v, tau, None)?) } else { None };
        for (gi, &c) in nodes.iter().enumerate() {
            let h = c * self.dt;
            for i in 0..n {
                z[gi * n + i] = q[i] + h * work.v[i] + a.map_or(0.0, |a| 0.5 * h * h * a[i]);
            }
        }
        Ok(())
    }

    /// The reduced residual at `ws.z` into `r` (lifting `z` into the extended points first);
    /// returns `max |r|`.
    fn mimic_residual(&self, sys: &MimicSystem, ws: &mut ViWorkspace, p: &[f64], r: &mut [f64]) -> f64 {
        let (c, sc) = (&sys.coupling, &self.scheme);
        let (n, ne) = (c.nv(), c.nv_extended());
        let work = ws.mimic.as_mut().expect("mimic scratch");
        for g in 0..sc.s {
            c.lift_configuration(&ws.z[g * n..(g + 1) * n], &mut work.z[g * ne..(g + 1) * ne]);
        }
        ws.points.set_unknowns(&self.model, sc, self.dt, &work.z, &[]);
        for rho in 0..sc.s {
            ws.points.del_rows(sc, self.dt, &sys.forces, &work.u, rho, &mut work.rows);
            c.reduce_force(&work.rows, &mut r[rho * n..(rho + 1) * n]);
        }
        for (ri, pi) in r.iter_mut().zip(p) {
            *ri += pi;
        }
        r.iter().fold(0.0_f64, |m, x| if x.is_nan() || m.is_nan() { f64::NAN } else { m.max(x.abs()) })
    }

    /// Factors the reduced `J = Ĝᵀ J_e Ĝ` at the points set in `ws`; `false` when singular.
    fn mimic_factorize(&self, sys: &MimicSystem, ws: &mut ViWorkspace) -> bool {
        ws.points.update_hessians(&self.model);
        let ViWorkspace { points, dense, mimic, .. } = ws;
        let work = mimic.as_mut().expect("mimic scratch");
        let (sc, dt, forces) = (&self.scheme, self.dt, &sys.forces);
        dense.factorize_blocks(sc.s, |rho, gamma, out| reduced_block(&sys.coupling, &mut work.block, |b| points.del_block(sc, dt, forces, rho, gamma, b), out))
    }

    /// Newton's method on the reduced DEL equations from `ws.z`, with a backtracking line
    /// search on `|r|²`; returns the iterations.
    fn mimic_newton(&self, sys: &MimicSystem, ws: &mut ViWorkspace, step: usize, p: &[f64]) -> Result<usize> {
        let scale = p.iter().fold(1.0_f64, |m, x| m.max(x.abs()));
        let tol = self.tolerance * scale;
        let (mut r, mut dz) = (std::mem::take(&mut ws.residual), std::mem::take(&mut ws.direction));
        let mut residual = self.mimic_residual(sys, ws, p, &mut r);
        let mut outcome = Err(ViError::NewtonDiverged { step, iterations: self.max_iterations, residual, tolerance: tol, floor: None, levelled: None });
        for it in 0..=self.max_iterations {
            if residual <= tol {
                outcome = Ok(it);
                break;
            }
            if !residual.is_finite() || it == self.max_iterations {
                break;
            }
            if !self.mimic_factorize(sys, ws) {
                outcome = Err(ViError::SingularJacobian { step });
                break;
            }
            for (d, x) in dz.iter_mut().zip(&r) {
                *d = -x;
            }
            ws.dense.solve(&mut dz);
            let merit0 = r.iter().map(|x| x * x).sum::<f64>();
            ws.z_start.copy_from_slice(&ws.z);
            let mut alpha = 1.0;
            for _ in 0..=12 {
                for ((z, z0), d) in ws.z.iter_mut().zip(&ws.z_start).zip(&dz) {
                    *z = z0 + alpha * d;
                }
                residual = self.mimic_residual(sys, ws, p, &mut r);
                if r.iter().map(|x| x * x).sum::<f64>() <= (1.0 - 2e-4 * alpha) * merit0 {
                    break;
                }
                alpha *= 0.5;
            }
            let (dmax, zmax) = ws.z.iter().zip(&dz).fold((0.0_f64, 0.0_f64), |(d, m), (z, x)| (d.max((alpha * x).abs()), m.max(z.abs())));
            if dmax <= 8.0 * f64::EPSILON * (1.0 + zmax) && residual <= 1.5e-8 * scale {
                outcome = Ok(it + 1);
                break;
            }
        }
        if let Err(ViError::NewtonDiverged { residual: res, .. }) = &mut outcome {
            *res = residual;
        }
        ws.residual = r;
        ws.direction = dz;
        outcome
    }

    /// The linearisation `A`, `B` of the step [`Self::step_mimic`] has just solved: the
    /// linearisation of module `dense_step` with the reduced blocks `Gᵀ H_e(x, β) G`.
    pub(crate) fn linearize_mimic(&self, sys: &MimicSystem, ws: &mut ViWorkspace, step: usize, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>) -> Result<()> {
        if !self.mimic_factorize(sys, ws) {
            return Err(ViError::SingularJacobian { step });
        }
        let ViWorkspace { points, dense, mimic, .. } = ws;
        let work = mimic.as_mut().expect("mimic scratch");
        let (sc, dt, forces): (&Scheme, f64, &JointForces) = (&self.scheme, self.dt, &sys.forces);
        dense.linearize_blocks(
            sc,
            dt,
            |x, beta, out| reduced_block(&sys.coupling, &mut work.block, |b| points.del_block(sc, dt, forces, x, beta, b), out),
            a,
            b,
        );
        Ok(())
    }

    /// `M = Gᵀ M_e G` times `v` into `p` (the Legendre transform of the reduced system).
    pub(crate) fn mimic_momentum(&self, ws: &mut ViWorkspace, q: &[f64], v: &[f64], p: &mut [f64]) -> Result<()> {
        let ViWorkspace { rbd, mimic, .. } = ws;
        let m = rbd_mimic::crba(&self.model, rbd, &mut mimic.as_mut().expect("mimic scratch").dynamics, q)?;
        for (i, pi) in p.iter_mut().enumerate() {
            *pi = (0..v.len()).map(|j| m[(i, j)] * v[j]).sum();
        }
        Ok(())
    }

    /// `M⁻¹ p` into `v` (its inverse).
    pub(crate) fn mimic_velocity(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], v: &mut [f64]) -> Result<()> {
        let ViWorkspace { rbd, mimic, .. } = ws;
        let minv = rbd_mimic::minverse(&self.model, rbd, &mut mimic.as_mut().expect("mimic scratch").dynamics, q)?;
        for (i, vi) in v.iter_mut().enumerate() {
            *vi = (0..p.len()).map(|j| minv[(i, j)] * p[j]).sum();
        }
        Ok(())
    }

    /// Kinetic `½ pᵀ M⁻¹ p` and potential energy (gravity at the lifted `q`, springs on the
    /// reduced coordinates) of a knot.
    pub(crate) fn mimic_knot_energy(&self, sys: &MimicSystem, ws: &mut ViWorkspace, q: &[f64], p: &[f64]) -> Result<crate::KnotEnergy> {
        let mut v = std::mem::take(&mut ws.scratch);
        let kinetic = self.mimic_velocity(ws, q, p, &mut v).map(|()| 0.5 * v.iter().zip(p).map(|(a, b)| a * b).sum::<f64>());
        ws.scratch = v;
        let work = ws.mimic.as_mut().expect("mimic scratch");
        sys.coupling.lift_configuration(q, &mut work.q);
        let f = &self.forces;
        let springs: f64 = (0..q.len()).map(|i| 0.5 * f.stiffness[i] * (q[i] - f.rest[i]).powi(2)).sum();
        Ok(crate::KnotEnergy { kinetic: kinetic?, potential: vidyn_rbd::potential_energy(&self.model, &mut ws.rbd, &work.q)? + springs })
    }

    /// An error naming `what` when the integrator's model has mimic joints.
    pub(crate) fn refuse_mimic(&self, what: &'static str) -> Result<()> {
        Ok(self.model.refuse_mimics(what)?)
    }
}

/// `out = Gᵀ H_e G` of the extended block `H_e` that `extended` writes into `scratch`.
fn reduced_block(coupling: &Coupling, scratch: &mut DMatrix<f64>, extended: impl FnOnce(&mut DMatrixViewMut<'_, f64>), out: &mut DMatrixViewMut<'_, f64>) {
    let ne = scratch.nrows();
    extended(&mut scratch.view_mut((0, 0), (ne, ne)));
    coupling.reduce_matrix(scratch, out);
}
