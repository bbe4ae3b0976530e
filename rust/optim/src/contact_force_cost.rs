//! Costs on the contact forces of a constrained VI: friction cones (which make contacts
//! unilateral), added to any other [`Cost`].
//!
//! A point contact of the VI (`vidyn.point_contact`: a frame's origin on the three world
//! planes through its foothold, normals `x`, `y`, `z`) carries the multipliers
//! `λ = (λ_x, λ_y, λ_z)` of its three constraints on step `k`; its mean world force over the
//! step is `f = −λ/Δt`. The cone `μ f_z ≥ |f_t|` (`f_t = (f_x, f_y)`, the ground's normal
//! along world `z`) holds when
//!
//! `g(f) = μ f_z − √(|f_t|² + ε²) ≥ 0`
//!
//! (`ε` rounds the cone's tip so that `g` is smooth; it also asks for `f_z ≥ ε/μ`), and the cost
//! is the quadratic penalty `½ w min(0, g)²`, zero inside the cone — crocoddyl's quadratic
//! barrier on its friction-cone residual. `λ` is a function of the stage's state and control
//! through the step (module `vidyn_vi::constrained`), and `∂λ/∂(x, u)` comes from the step's
//! exact linearisation ([`VariationalIntegrator::multiplier_jacobian`]): gradient
//! `w g ∂g/∂(x, u)`, and on the violated cones the Hessian `w ∂gᵀ∂g + w g ∂λᵀ (∂²g/∂λ²) ∂λ`
//! — the Gauss–Newton term and the cone's own curvature, which leave out only `λ`'s second
//! derivatives. The second term is positive semidefinite (`g < 0` there and `g` is concave)
//! and grows like `1/ε` at the cone's rounded tip: without it FDDP's model of the penalty
//! overshot by 10–100× near the tip (measured on ANYmal's pace with cones: 87 iterations
//! with `ε` = 10 N, 200 without converging with 1 N; with it 11 and 13). Every cone of a step
//! is recorded as a hinge ([`StageDerivatives::add_hinge`]), so that iLQR and FDDP choose the
//! violated set at the step they take rather than at the current trajectory (module
//! `ilqr::active_set`: ANYmal's gaits with cones in 9–15 iterations instead of 10–19). The
//! multipliers and their Jacobian are read from the dynamics' own solves and linearisations when they
//! share their store of solved steps ([`ContactForceCost::with_solved_steps`],
//! [`VariationalIntegrator::kept_multipliers`]); otherwise, or for a stage the dynamics did
//! not solve, the cost solves the step itself, from the integrator's own start, so that the
//! value depends on the stage's inputs only (none on ANYmal's gaits with cones since a step's
//! kept multipliers stay readable while it is linearised; before, 0–17 per optimisation, and
//! the iterates then varied from run to run in their last bits).

use crate::actuation::Actuation;
use crate::cost::{Cost, StageDerivatives};
use crate::error::{OptimError, Result};
use nalgebra::{DMatrix, Vector3};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use vidyn_batch::ScratchPool;
use vidyn_vi::{Constraint, SolvedSteps, StepInput, VariationalIntegrator, ViWorkspace};

/// The friction cone of one point contact: its three constraints start at row `first` of the
/// integrator's constraints (planes with normals world `x`, `y`, `z`, in that order).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrictionCone {
    pub first: usize,
    /// Friction coefficient `μ > 0`.
    pub mu: f64,
    /// Penalty weight `w ≥ 0`.
    pub weight: f64,
    /// Rounding of the cone's tip `ε > 0` (newtons).
    pub tip: f64,
}

/// Per-caller scratch: the VI workspace and the step's outputs.
#[derive(Debug)]
struct Scratch {
    ws: ViWorkspace,
    full: Vec<f64>,
    a: DMatrix<f64>,
    b: DMatrix<f64>,
    q_next: Vec<f64>,
    p_next: Vec<f64>,
}

/// `inner` plus the friction-cone penalties of `cones` on every step (module docs). The state
/// is the VI's `x = (q, p)` (`nq + n` entries), the controls the generalised forces of the
/// `actuated` joints; derivatives in the tangent coordinates of `A`, `B`.
#[derive(Debug)]
pub struct ContactForceCost<C: Cost> {
    pub inner: C,
    vi: Arc<VariationalIntegrator>,
    actuation: Actuation,
    cones: Vec<FrictionCone>,
    pool: ScratchPool<Scratch>,
    /// Steps this cost has solved itself (not read from the dynamics' store).
    own_solves: AtomicUsize,
    /// The dynamics' solved steps, whose multipliers are read before solving a step here.
    solved: Option<Arc<SolvedSteps>>,
}

/// Whether `rows` (three constraints) are a point contact with the world (module docs): one
/// pair of points, the first on the world, held on the world planes of normals `x`, `y`, `z`
/// in turn, so that their multipliers are the contact's world impulse.
fn is_point_contact(rows: &[Constraint]) -> bool {
    let Some(Constraint::PointOnPlane { a: a0, b: b0, .. }) = rows.first() else { return false };
    a0.body.is_none()
        && rows.len() == 3
        && rows
            .iter()
            .enumerate()
            .all(|(axis, c)| matches!(c, Constraint::PointOnPlane { a, normal, b } if a == a0 && b == b0 && *normal == Vector3::ith(axis, 1.0)))
}

impl<C: Cost> ContactForceCost<C> {
    /// Errors when a cone's rows are not three constraints of `vi`, or `μ`, `w`, `ε` are out of
    /// range, or `actuated` is not a valid list.
    pub fn new(vi: Arc<VariationalIntegrator>, inner: C, actuated: Option<Vec<usize>>, cones: Vec<FrictionCone>) -> Result<Self> {
        let m = vi.constraints().len();
        for (i, c) in cones.iter().enumerate() {
            if c.first + 3 > m {
                return Err(OptimError::InvalidInput(format!(
                    "cone {i}: rows {}..{} are not constraints of the integrator (it has {m})",
                    c.first,
                    c.first + 3
                )));
            }
            if !is_point_contact(&vi.constraints()[c.first..c.first + 3]) {
                return Err(OptimError::InvalidInput(format!(
                    "cone {i}: rows {}..{} are not one point contact with the world (three PointOnPlane constraints of one pair of points, the first on the world, normals x, y, z in turn, as vidyn.point_contact makes them)",
                    c.first,
                    c.first + 3
                )));
            }
            if !(c.mu > 0.0 && c.mu.is_finite() && c.weight >= 0.0 && c.weight.is_finite() && c.tip > 0.0 && c.tip.is_finite()) {
                return Err(OptimError::InvalidInput(format!("cone {i}: expected μ > 0, weight ≥ 0 and tip > 0, finite; got {c:?}")));
            }
        }
        let actuation = Actuation::new(vi.n(), actuated)?;
        Ok(Self { inner, vi, actuation, cones, pool: ScratchPool::default(), own_solves: AtomicUsize::new(0), solved: None })
    }

    /// The same cost reading the multipliers of the steps kept in `solved` (the store of the
    /// dynamics being optimised, `vidyn_optim::ViDynamics::with_solved_steps`), which spares
    /// solving those steps again; the values are the same to the step solver's tolerance.
    #[must_use]
    pub fn with_solved_steps(mut self, solved: Arc<SolvedSteps>) -> Self {
        self.solved = Some(solved);
        self
    }

    fn with_scratch<T>(&self, f: impl FnOnce(&mut Scratch) -> T) -> T {
        let (n, nq) = (self.vi.n(), self.vi.nq());
        let init = || Scratch {
            ws: self.vi.workspace(),
            full: vec![0.0; n],
            a: DMatrix::zeros(2 * n, 2 * n),
            b: DMatrix::zeros(2 * n, n),
            q_next: vec![0.0; nq],
            p_next: vec![0.0; n],
        };
        self.pool.with(init, f)
    }

    /// How many steps this cost has solved itself so far, rather than reading their
    /// multipliers from the dynamics' store ([`Self::with_solved_steps`]).
    #[must_use]
    pub fn own_solves(&self) -> usize {
        self.own_solves.load(Ordering::Relaxed)
    }

    /// The cones that step `k` imposes.
    fn active(&self, k: usize) -> Result<Vec<FrictionCone>> {
        let active = self.vi.active_constraints(k).map_err(|e| OptimError::InvalidInput(e.to_string()))?;
        Ok(self.cones.iter().filter(|c| active.contains(&c.first)).copied().collect())
    }

    /// Solves step `k` from `(x, u)` (linearising it when `derivatives`) in `s`.
    fn solve(&self, s: &mut Scratch, k: usize, x: &[f64], u: &[f64], derivatives: bool) -> Result<()> {
        let (q, p) = self.split(x, u)?;
        self.actuation.expand(u, &mut s.full);
        let vi = &self.vi;
        let at = StepInput::new(k, q, p, &s.full);
        self.own_solves.fetch_add(1, Ordering::Relaxed);
        let r = if derivatives {
            vi.linearize(&mut s.ws, at, &mut s.a, &mut s.b, &mut s.q_next, &mut s.p_next).map(|_| ())
        } else {
            vi.step(&mut s.ws, at, &mut s.q_next, &mut s.p_next).map(|_| ())
        };
        r.map_err(|e| OptimError::InvalidInput(format!("the contact-force cost could not solve step {k}: {e}")))
    }

    /// `(g, ∂g/∂λ)` of cone `c` at the multipliers `lambda` (module docs).
    fn cone(&self, c: &FrictionCone, lambda: &[f64]) -> (f64, Vector3<f64>) {
        let dt = self.vi.dt();
        let f = -Vector3::new(lambda[c.first], lambda[c.first + 1], lambda[c.first + 2]) / dt;
        let t = (f.x * f.x + f.y * f.y + c.tip * c.tip).sqrt();
        let g = c.mu * f.z - t;
        // ∂g/∂f = (−f_x/t, −f_y/t, μ), ∂f/∂λ = −1/Δt
        (g, Vector3::new(f.x / t, f.y / t, -c.mu) / dt)
    }

    /// `(q, p)` of the state `x`, after checking the sizes of `x` and `u`.
    fn split<'x>(&self, x: &'x [f64], u: &[f64]) -> Result<(&'x [f64], &'x [f64])> {
        let (nq, n) = (self.vi.nq(), self.vi.n());
        if x.len() != nq + n || u.len() != self.actuation.nu() {
            return Err(OptimError::InvalidInput(format!("state/control have {}/{} entries, expected {}/{}", x.len(), u.len(), nq + n, self.actuation.nu())));
        }
        Ok(x.split_at(nq))
    }

    fn penalty(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        let cones = self.active(k)?;
        if cones.is_empty() {
            return Ok(0.0);
        }
        let (q, p) = self.split(x, u)?;
        let value = |lambda: &[f64]| cones.iter().map(|c| 0.5 * c.weight * self.cone(c, lambda).0.min(0.0).powi(2)).sum();
        self.with_scratch(|s| {
            self.actuation.expand(u, &mut s.full);
            if let Some(kept) = self.solved.as_deref().and_then(|store| self.vi.kept_multipliers(store, k, q, p, &s.full, |lambda, _| value(lambda))) {
                return Ok(kept);
            }
            self.solve(s, k, x, u, false)?;
            Ok(value(self.vi.multipliers(&s.ws)))
        })
    }

    fn add_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        let cones = self.active(k)?;
        if cones.is_empty() {
            return Ok(());
        }
        let (q, p) = self.split(x, u)?;
        self.with_scratch(|s| {
            self.actuation.expand(u, &mut s.full);
            let kept = self.solved.as_deref().and_then(|store| {
                self.vi.kept_multipliers(store, k, q, p, &s.full, |lambda, jac| jac.map(|jac| self.add_cone_terms(&cones, lambda, jac, out))).flatten()
            });
            if kept.is_none() {
                self.solve(s, k, x, u, true)?;
                self.add_cone_terms(&cones, self.vi.multipliers(&s.ws), self.vi.multiplier_jacobian(&s.ws), out);
            }
            Ok(())
        })
    }

    /// Adds the penalties of `cones` to `out` as hinges ([`StageDerivatives::add_hinge`]: the
    /// Gauss–Newton terms of the violated ones) and the cone's own curvature on the violated
    /// ones, from the multipliers `lambda` and their Jacobian `jac` (`(m, 3n)`, columns
    /// `(δq, δp, δu)` over all joints).
    fn add_cone_terms(&self, cones: &[FrictionCone], lambda: &[f64], jac: &DMatrix<f64>, out: &mut StageDerivatives) {
        let n = self.vi.n();
        let joints = self.actuation.joints();
        for c in cones {
            let (g, dg) = self.cone(c, lambda);
            // ∂g/∂(x, u_full) = dgᵀ ∂λ_c/∂(x, u_full), then the actuated columns of u
            let row = |col: usize| (0..3).map(|r| dg[r] * jac[(c.first + r, col)]).sum::<f64>();
            out.add_hinge(c.weight, g, |grad| {
                let (gx, gu) = grad.split_at_mut(2 * n);
                for (col, v) in gx.iter_mut().enumerate() {
                    *v = row(col);
                }
                for (v, &j) in gu.iter_mut().zip(joints) {
                    *v = row(2 * n + j);
                }
            });
            if g >= 0.0 {
                continue;
            }
            let w = c.weight;
            {
                // w g ∂²g/∂λ² through ∂λ (module docs): positive semidefinite while g < 0
                let h = self.cone_curvature(c, lambda) * (w * g);
                // the tangential rows of ∂λ_c/∂x (column `col`) and /∂u (joint `j`)
                let tx = |col: usize| [jac[(c.first, col)], jac[(c.first + 1, col)]];
                let tu = |j: usize| tx(2 * n + joints[j]);
                // aᵀ h b, written symmetric in a and b (the same number for (a, b) and (b, a),
                // bit for bit): each symmetric block computed on and below its diagonal, mirrored
                let quad = |a: [f64; 2], b: [f64; 2]| h[(0, 0)] * (a[0] * b[0]) + h[(1, 1)] * (a[1] * b[1]) + h[(0, 1)] * (a[0] * b[1] + a[1] * b[0]);
                let mirrored = |m: &mut DMatrix<f64>, size: usize, t: &dyn Fn(usize) -> [f64; 2]| {
                    for i in 0..size {
                        let a = t(i);
                        for j in 0..i {
                            let v = quad(a, t(j));
                            m[(i, j)] += v;
                            m[(j, i)] += v;
                        }
                        m[(i, i)] += quad(a, a);
                    }
                };
                mirrored(&mut out.lxx, 2 * n, &tx);
                mirrored(&mut out.luu, joints.len(), &tu);
                for i in 0..joints.len() {
                    let a = tu(i);
                    for j in 0..2 * n {
                        out.lux[(i, j)] += quad(a, tx(j));
                    }
                }
            }
        }
    }

    /// `∂²g/∂(λ_x, λ_y)²` of cone `c` (`g` is linear in `λ_z`): `−∇²t / Δt²`,
    /// `t = √(f_x² + f_y² + ε²)`, `∇²t = [[f_y² + ε², −f_x f_y], [−f_x f_y, f_x² + ε²]] / t³`.
    fn cone_curvature(&self, c: &FrictionCone, lambda: &[f64]) -> nalgebra::Matrix2<f64> {
        let dt = self.vi.dt();
        let (fx, fy) = (-lambda[c.first] / dt, -lambda[c.first + 1] / dt);
        let e2 = c.tip * c.tip;
        let t = (fx * fx + fy * fy + e2).sqrt();
        -nalgebra::Matrix2::new(fy * fy + e2, -fx * fy, -fx * fy, fx * fx + e2) / (t * t * t * dt * dt)
    }
}

impl<C: Cost> Cost for ContactForceCost<C> {
    fn running_value(&self, k: usize, x: &[f64], u: &[f64]) -> Result<f64> {
        Ok(self.inner.running_value(k, x, u)? + self.penalty(k, x, u)?)
    }
    fn terminal_value(&self, x: &[f64]) -> Result<f64> {
        self.inner.terminal_value(x)
    }
    fn running_derivatives(&self, k: usize, x: &[f64], u: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.inner.running_derivatives(k, x, u, out)?;
        self.add_derivatives(k, x, u, out)
    }
    fn terminal_derivatives(&self, x: &[f64], out: &mut StageDerivatives) -> Result<()> {
        self.inner.terminal_derivatives(x, out)
    }
    fn parallel(&self) -> bool {
        self.inner.parallel()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::QuadraticCost;
    use nalgebra::Matrix3;
    use vidyn_rbd::{integrate, Joint, ModelBuilder};
    use vidyn_spatial::{Inertia, Se3};
    use vidyn_vi::{BodyPoint, Constraint, Scheme};

    /// A free base on a two-link leg whose foot is held at a world point (three planes), hip
    /// and knee actuated, tipping under gravity.
    fn tipping_leg() -> (Arc<VariationalIntegrator>, Vec<f64>) {
        leg_held_by(|world, foot| {
            [Vector3::x(), Vector3::y(), Vector3::z()].map(|normal| Constraint::PointOnPlane { a: world.clone(), normal, b: foot.clone() }).to_vec()
        })
    }

    /// The leg of [`tipping_leg`] with the constraints `rows(world point, foot point)`.
    fn leg_held_by(rows: impl Fn(&BodyPoint, &BodyPoint) -> Vec<Constraint>) -> (Arc<VariationalIntegrator>, Vec<f64>) {
        let mut b = ModelBuilder::new("leg");
        let body = |m: f64, c: [f64; 3]| Inertia::new(m, Vector3::from(c), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.01)));
        let at = |x: f64, z: f64| Se3::new(Matrix3::identity(), Vector3::new(x, 0.0, z));
        let base = b.add_body(None, "base", Joint::FreeFlyer, Se3::identity(), body(3.0, [0.05, 0.01, 0.0])).unwrap();
        let thigh = b.add_body(Some(base), "hip", Joint::Revolute { axis: Vector3::y() }, at(0.1, -0.05), body(0.5, [0.0, 0.0, -0.1])).unwrap();
        let shank = b.add_body(Some(thigh), "knee", Joint::Revolute { axis: Vector3::y() }, at(0.0, -0.2), body(0.3, [0.0, 0.0, -0.1])).unwrap();
        let model = Arc::new(b.build().unwrap());
        let mut q = vidyn_rbd::neutral(&model);
        q[2] = 0.45;
        q[7] = 0.3;
        q[8] = -0.5;
        // the foot (0.2 below the knee) where it is at q
        let mut ws = model.workspace();
        vidyn_rbd::placements(&model, &mut ws, &q).unwrap();
        let foot = Vector3::new(0.0, 0.0, -0.2);
        let at_q = ws.placements[shank].act_point(&foot);
        let contact = rows(&BodyPoint { body: None, point: at_q }, &BodyPoint { body: Some(shank), point: foot });
        let vi = VariationalIntegrator::new(model, Scheme::midpoint(), 0.01, None).unwrap().with_newton(1e-15, 50).unwrap().with_constraints(contact).unwrap();
        (Arc::new(vi), q)
    }

    /// The penalty's gradient in tangent coordinates (`q ⊕ δ` by `integrate`; `p`, `u`
    /// added) against central differences of the penalty (the step solved to its round-off
    /// floor each time), h = 1e-7: the penalty curves fast (its truncation error measured
    /// 0.64 at h = 1e-5 and 6e-3 at 1e-6 on a gradient of 1.9e3, shrinking as h²), agreement
    /// 1e-6 relative; a cone violated by the tipping leg's lateral force (μ = 0.05) has a
    /// positive penalty, a wide one (μ = 50) none.
    /// `∂²g/∂λ²` of [`ContactForceCost::cone_curvature`] against central differences of the
    /// gradient `∂g/∂λ` (h = 1e-6 on impulses of order 1: truncation ~1e-12, round-off ~1e-10).
    #[test]
    fn cone_curvature_matches_central_differences() {
        let (vi, q) = tipping_leg();
        let n = vi.n();
        let z = DMatrix::zeros(2 * n, 2 * n);
        let x_ref: Vec<f64> = q.iter().copied().chain(std::iter::repeat_n(0.0, n)).collect();
        let zero = QuadraticCost::on_space(crate::StateSpace::of_model(vi.model()), vec![z.clone()], vec![DMatrix::zeros(2, 2)], z, x_ref, vec![]).unwrap();
        let cone = FrictionCone { first: 0, mu: 0.7, weight: 1.0, tip: 0.5 };
        let cost = ContactForceCost::new(Arc::clone(&vi), zero, Some(vec![6, 7]), vec![cone]).unwrap();
        for lambda in [[0.01, -0.02, -0.1], [0.0, 0.0, -0.05], [-0.03, 0.004, 0.02]] {
            let h = cost.cone_curvature(&cone, &lambda);
            for j in 0..2 {
                let moved = |e: f64| {
                    let mut l = lambda;
                    l[j] += e;
                    cost.cone(&cone, &l).1
                };
                let fd = (moved(1e-6) - moved(-1e-6)) / 2e-6;
                for i in 0..2 {
                    assert!((h[(i, j)] - fd[i]).abs() < 1e-6 * (1.0 + fd[i].abs()), "∂²g/∂λ{i}∂λ{j}: {} vs {}", h[(i, j)], fd[i]);
                }
                assert!(fd[2].abs() < 1e-9, "g is linear in λ_z");
            }
        }
    }

    #[test]
    fn cone_gradient_matches_central_differences() {
        let (vi, q) = tipping_leg();
        let (nq, n) = (vi.nq(), vi.n());
        let zero = || {
            let mut x_ref = q.clone();
            x_ref.extend(std::iter::repeat_n(0.0, n));
            let z = DMatrix::zeros(2 * n, 2 * n);
            QuadraticCost::on_space(crate::StateSpace::of_model(vi.model()), vec![z.clone()], vec![DMatrix::zeros(2, 2)], z, x_ref, vec![]).unwrap()
        };
        let x: Vec<f64> = q.iter().copied().chain(std::iter::repeat_n(0.0, n)).collect();
        let u = [1.5, -2.0];
        let wide = ContactForceCost::new(Arc::clone(&vi), zero(), Some(vec![6, 7]), vec![FrictionCone { first: 0, mu: 50.0, weight: 1.0, tip: 1e-2 }]).unwrap();
        assert_eq!(wide.running_value(0, &x, &u).unwrap(), 0.0);
        let cost = ContactForceCost::new(Arc::clone(&vi), zero(), Some(vec![6, 7]), vec![FrictionCone { first: 0, mu: 0.05, weight: 2.0, tip: 1e-2 }]).unwrap();
        let value = cost.running_value(0, &x, &u).unwrap();
        assert!(value > 1e-3, "{value}");
        let mut d = StageDerivatives::zeros(2 * n, 2);
        cost.running_derivatives(0, &x, &u, &mut d).unwrap();
        // the value and the derivatives solve the step separately (from different Newton
        // starts): they agree to the multipliers' round-off floor (measured 1.5e-12 relative)
        assert!((d.l - value).abs() < 1e-11 * value, "{} vs {value}", d.l);
        let h = 1e-7;
        let moved = |c: usize, eps: f64| {
            let (mut dq, mut y, mut v) = (vec![0.0; n], x.clone(), u);
            match c {
                c if c < n => dq[c] = eps,
                c if c < 2 * n => y[nq + c - n] += eps,
                c => v[c - 2 * n] += eps,
            }
            y[..nq].copy_from_slice(&integrate(vi.model(), &q, &dq).unwrap());
            cost.running_value(0, &y, &v).unwrap()
        };
        let grad: Vec<f64> = d.lx.iter().chain(d.lu.iter()).copied().collect();
        let scale = grad.iter().fold(0.0_f64, |m, g| m.max(g.abs()));
        for (c, g) in grad.iter().enumerate() {
            let fd = (moved(c, h) - moved(c, -h)) / (2.0 * h);
            assert!((fd - g).abs() < 1e-6 * scale, "input {c}: {fd} vs {g} (scale {scale:e})");
        }
        assert!((&d.lxx - d.lxx.transpose()).amax() == 0.0 && (&d.luu - d.luu.transpose()).amax() == 0.0);
    }

    /// Reading the multipliers from the dynamics' solved steps: after a step of the dynamics
    /// (value) and their linearisation (derivatives), the cost sharing their store takes both
    /// from it without solving a step, and agrees with the
    /// cost that solves the steps itself to the step solver's tolerance (1e-9 relative).
    #[test]
    fn multipliers_come_from_the_dynamics_solves() {
        use crate::dynamics::Dynamics;
        let (vi, q) = tipping_leg();
        let n = vi.n();
        let zero = || {
            let mut x_ref = q.clone();
            x_ref.extend(std::iter::repeat_n(0.0, n));
            let z = DMatrix::zeros(2 * n, 2 * n);
            QuadraticCost::on_space(crate::StateSpace::of_model(vi.model()), vec![z.clone()], vec![DMatrix::zeros(2, 2)], z, x_ref, vec![]).unwrap()
        };
        let cone = vec![FrictionCone { first: 0, mu: 0.05, weight: 2.0, tip: 1e-2 }];
        let store = Arc::new(SolvedSteps::new());
        let dynamics = crate::ViDynamics::new(&vi, Some(vec![6, 7])).unwrap().with_solved_steps(Arc::clone(&store));
        let shared = ContactForceCost::new(Arc::clone(&vi), zero(), Some(vec![6, 7]), cone.clone()).unwrap().with_solved_steps(store);
        let own = ContactForceCost::new(Arc::clone(&vi), zero(), Some(vec![6, 7]), cone).unwrap();
        let x: Vec<f64> = q.iter().copied().chain(std::iter::repeat_n(0.0, n)).collect();
        let u = [1.5, -2.0];
        let mut next = vec![0.0; x.len()];
        dynamics.step(0, &x, &u, None, &mut next).unwrap();
        let (value, expected) = (shared.running_value(0, &x, &u).unwrap(), own.running_value(0, &x, &u).unwrap());
        assert!(value > 1e-3 && (value - expected).abs() < 1e-9 * expected, "{value} vs {expected}");
        let xs: Vec<f64> = x.iter().chain(&next).copied().collect();
        dynamics.linearize(&xs, &u).unwrap();
        let (mut d, mut e) = (StageDerivatives::zeros(2 * n, 2), StageDerivatives::zeros(2 * n, 2));
        shared.running_derivatives(0, &x, &u, &mut d).unwrap();
        own.running_derivatives(0, &x, &u, &mut e).unwrap();
        let scale = e.lx.amax().max(e.lu.amax());
        assert!((&d.lx - &e.lx).amax() < 1e-9 * scale && (&d.lu - &e.lu).amax() < 1e-9 * scale && (&d.lxx - &e.lxx).amax() < 1e-9 * e.lxx.amax());
        assert_eq!(shared.own_solves(), 0, "the shared cost solved a step");
        assert_eq!(own.own_solves(), 2);
    }

    /// A cone reads its three rows as a world force, so they must be one point contact with
    /// the world, normals `x`, `y`, `z` in turn: the same rows in another order, or with a
    /// body-fixed first point, are refused by name.
    #[test]
    fn a_cone_off_a_point_contact_is_refused() {
        let cone = vec![FrictionCone { first: 0, mu: 0.7, weight: 1.0, tip: 1e-2 }];
        let swapped = |world: &BodyPoint, foot: &BodyPoint| {
            [Vector3::y(), Vector3::x(), Vector3::z()].map(|normal| Constraint::PointOnPlane { a: world.clone(), normal, b: foot.clone() }).to_vec()
        };
        let on_base = |world: &BodyPoint, foot: &BodyPoint| {
            let base = BodyPoint { body: Some(0), point: world.point };
            [Vector3::x(), Vector3::y(), Vector3::z()].map(|normal| Constraint::PointOnPlane { a: base.clone(), normal, b: foot.clone() }).to_vec()
        };
        for (i, (vi, q)) in [tipping_leg(), leg_held_by(swapped), leg_held_by(on_base)].into_iter().enumerate() {
            let n = vi.n();
            let z = DMatrix::zeros(2 * n, 2 * n);
            let x_ref = q.iter().copied().chain(std::iter::repeat_n(0.0, n)).collect();
            let zero = QuadraticCost::on_space(crate::StateSpace::of_model(vi.model()), vec![z.clone()], vec![DMatrix::zeros(2, 2)], z, x_ref, vec![]).unwrap();
            let result = ContactForceCost::new(vi, zero, Some(vec![6, 7]), cone.clone());
            match (i, result) {
                (0, r) => assert!(r.is_ok(), "the point contact itself was refused"),
                (_, Ok(_)) => panic!("case {i} accepted"),
                (_, Err(e)) => assert!(e.to_string().contains("not one point contact with the world"), "{e}"),
            }
        }
    }
}
