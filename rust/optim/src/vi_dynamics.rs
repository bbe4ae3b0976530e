//! A [`VariationalIntegrator`] as the optimisers' [`Dynamics`].

use crate::actuation::Actuation;
use crate::checks::trajectory_steps;
use crate::dynamics::{run_policy, Dynamics, Jacobians, Nominal, Policy, SecondOrder};
use crate::error::{OptimError, Result};
use crate::ilqr::IlqrResult;
use crate::newton_start::{NewtonStart, StepAt};
use crate::state_space::StateSpace;
use crate::velocity_state::{gains_to_momentum, jacobians_to_velocity, Legendre};
use nalgebra::DMatrix;
use rayon::prelude::*;
use vidyn_batch::ScratchPool;
use vidyn_vi::{SolvedSteps, StepInput, Trajectory, VariationalIntegrator};

/// A [`VariationalIntegrator`] as [`Dynamics`]: `x = (q, p)` (nx = nq + n; `q` on the joints'
/// groups with free-flyer, spherical or planar joints, [`StateSpace::of_model`]), or
/// `x = (q, v)` after [`ViDynamics::with_velocity_state`], and the controls are the
/// generalised forces of the `actuated` joints (nu = m; the other joints get zero force).
///
/// Rollouts start each Newton solve from [`vidyn_vi::predict_next`], as [`vidyn_vi::rollout`]
/// does; linearisations run chunks of steps in parallel on vidyn's pool (exact `A`, `B`,
/// written straight into the optimiser's matrices), keeping the actuated columns of `B`;
/// DDP's second-order terms come from the VI's λ-contracted second derivatives.
#[derive(Clone, Debug)]
pub struct ViDynamics<'a> {
    pub vi: &'a VariationalIntegrator,
    actuation: Actuation,
    /// `x = (q, v)` instead of `(q, p)` (the `velocity_state` module).
    velocity_state: bool,
    /// On the velocity state, the Legendre data of every node of the latest linearisation
    /// ([`Legendre::save`]), for [`ViDynamics::result_in_momentum`].
    node_maps: std::sync::Arc<std::sync::Mutex<Vec<f64>>>,
    /// Second-order workspaces, one per concurrent caller (allocated on first use).
    second_order_pool: std::sync::Arc<ScratchPool<vidyn_vi::SecondOrderWorkspace>>,
    /// Scratch of rollouts and [`Dynamics::linearize_steps`], one per concurrent caller.
    step_pool: std::sync::Arc<ScratchPool<StepScratch>>,
    /// The steps the latest rollout solved, which [`Dynamics::linearize_steps`] linearises
    /// without solving them again ([`VariationalIntegrator::keep_solved`]); shared by clones.
    solved: std::sync::Arc<SolvedSteps>,
}

/// What a rollout or [`ViDynamics::linearize_steps`] needs besides the caller's buffers: the VI
/// workspace, the full `B` (2n×n, all joints), the full controls, the next state, and for the
/// velocity state the momentum `p_k` and two nodes' Legendre data.
#[derive(Debug)]
struct StepScratch {
    ws: vidyn_vi::ViWorkspace,
    b: DMatrix<f64>,
    full: Vec<f64>,
    q_next: Vec<f64>,
    p_next: Vec<f64>,
    p: Vec<f64>,
    node: Legendre,
    next_node: Legendre,
}

impl StepScratch {
    fn new(vi: &VariationalIntegrator) -> Self {
        let n = vi.n();
        let node = || Legendre::new(vi.model());
        Self {
            ws: vi.workspace(),
            b: DMatrix::zeros(2 * n, n),
            full: vec![0.0; n],
            q_next: vec![0.0; vi.nq()],
            p_next: vec![0.0; n],
            p: vec![0.0; n],
            node: node(),
            next_node: node(),
        }
    }
}

impl<'a> ViDynamics<'a> {
    /// `actuated`: indices of the controlled joints (strictly increasing, `< n`); `None` for all.
    pub fn new(vi: &'a VariationalIntegrator, actuated: Option<Vec<usize>>) -> Result<Self> {
        Ok(Self {
            vi,
            actuation: Actuation::new(vi.n(), actuated)?,
            velocity_state: false,
            node_maps: std::sync::Arc::default(),
            second_order_pool: std::sync::Arc::default(),
            step_pool: std::sync::Arc::default(),
            solved: std::sync::Arc::default(),
        })
    }
    /// The same dynamics keeping their solved steps in `solved` (a store kept from one
    /// optimisation to the next spares the allocations of its entries; [`SolvedSteps`]).
    #[must_use]
    pub fn with_solved_steps(mut self, solved: std::sync::Arc<SolvedSteps>) -> Self {
        self.solved = solved;
        self
    }
    /// The same dynamics on the velocity state `x = (q, v)`, `v = M(q)⁻¹ p`
    /// (the `velocity_state` module): rollouts start from and return `(q, v)`, `A`, `B` are the
    /// exact Jacobians of the step in these coordinates, and a cost on `(q, v)` is used as it
    /// is (no [`crate::VelocityCost`]). No second derivatives (full DDP and the Newton model
    /// need the `(q, p)` state). Fails with kinematic joints, whose slots hold velocities
    /// already.
    pub fn with_velocity_state(mut self) -> Result<Self> {
        if self.vi.kinematic().iter().any(|&k| k) {
            return Err(OptimError::InvalidInput("the velocity state is not defined with kinematic joints".into()));
        }
        self.velocity_state = true;
        Ok(self)
    }
    /// Whether `x = (q, v)` ([`ViDynamics::with_velocity_state`]).
    #[must_use]
    pub fn has_velocity_state(&self) -> bool {
        self.velocity_state
    }
    /// The state `x` of `(q, p)` in these dynamics' coordinates.
    pub fn state_from_momentum(&self, q: &[f64], p: &[f64]) -> Result<Vec<f64>> {
        let mut x: Vec<f64> = q.iter().chain(p).copied().collect();
        if self.velocity_state {
            let (q, v) = x.split_at_mut(self.vi.nq());
            let mut s = self.take_scratch();
            s.node.velocity(self.vi.model(), s.ws.rbd(), q, p, v)?;
            self.return_scratch(s);
        }
        Ok(x)
    }
    /// An iLQR result on the velocity state expressed in the VI's `(q, p)`: every `x_k` by
    /// `p_k = M(q_k) v_k` (the momentum its rollout stepped with) and the gains by
    /// `K ← K ∂(q, v)/∂(q, p)`, the same feedback to first order, with the Legendre data the
    /// latest linearisation kept for these nodes (else computed: ≈ 6 k instructions per node
    /// on the cart-pole against ≈ 0.5 k). On the calling thread: waking the pool's workers
    /// for this took longer than the work. Nothing to do on `(q, p)`.
    pub fn result_in_momentum(&self, res: &mut IlqrResult) -> Result<()> {
        if !self.velocity_state {
            return Ok(());
        }
        let (nq, n, model) = (self.vi.nq(), self.vi.n(), self.vi.model());
        let mut s = self.take_scratch();
        let StepScratch { ws, node, .. } = &mut *s;
        for (k, xk) in res.x.chunks_exact_mut(nq + n).enumerate() {
            let (q, v) = xk.split_at_mut(nq);
            if !self.load_node(k, node, q, v) {
                node.linearize_at(model, ws.rbd(), q, v)?;
            }
            if let Some(gain) = res.gains.get_mut(k) {
                gains_to_momentum(gain, node);
            }
            node.momentum_in_place(v);
        }
        self.return_scratch(s);
        Ok(())
    }
    /// Keeps node `k`'s Legendre data at `y = (q, v)`.
    fn save_node(&self, k: usize, node: &Legendre, y: &[f64]) {
        let stride = Legendre::saved_len(self.vi.nq(), self.vi.n());
        if let Ok(mut maps) = self.node_maps.lock() {
            if maps.len() < (k + 1) * stride {
                maps.resize((k + 1) * stride, f64::NAN);
            }
            node.save(y, &mut maps[k * stride..(k + 1) * stride]);
        }
    }
    /// Node `k`'s kept Legendre data into `node` when it was computed at `(q, v)`, bit for bit.
    fn load_node(&self, k: usize, node: &mut Legendre, q: &[f64], v: &[f64]) -> bool {
        let stride = Legendre::saved_len(self.vi.nq(), self.vi.n());
        self.node_maps.lock().is_ok_and(|maps| maps.get(k * stride..(k + 1) * stride).is_some_and(|saved| node.load(q, v, saved)))
    }
    /// The actuated joints and the map of controls to generalised forces.
    #[must_use]
    pub fn actuation(&self) -> &Actuation {
        &self.actuation
    }
    /// [`Dynamics::rollout`], each Newton solve started from [`vidyn_vi::predict_next`] (as
    /// [`vidyn_vi::rollout`] does) or, given `near`, from its [`Nominal::predict`] when that was
    /// the better start at the step before.
    fn simulate(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>, near: Option<&Nominal<'_>>) -> Result<(Vec<f64>, Vec<f64>)> {
        let (n, nq, m) = (self.vi.n(), self.vi.nq(), self.actuation.nu());
        let nx = nq + n;
        let space = self.state_space();
        space.check(x0, "x0")?;
        let mut scratch = self.take_scratch();
        let StepScratch { ws, full, q_next: qn, p_next: pn, p: pk, node, .. } = &mut *scratch;
        let model = self.vi.model();
        let mut start = NewtonStart::new(nq);
        let out = run_policy(x0, steps, m, policy, |k, past, uk, next| {
            self.actuation.expand(uk, full);
            let xk = &past[k * nx..];
            let warm = start.choose(&space, StepAt { k, x: xk, u: uk, near }, |guess| vidyn_vi::predict_next(past, nx, guess));
            let (q, p) = (
                &xk[..nq],
                if self.velocity_state {
                    node.momentum(model, ws.rbd(), &xk[..nq], &xk[nq..nx], pk)?;
                    &pk[..]
                } else {
                    &xk[nq..]
                },
            );
            let at = StepInput::new(k, q, p, full);
            self.vi.step(ws, at.with_guess(warm), qn, pn)?;
            // for linearize_steps, which then need not solve the step again
            self.vi.keep_solved(&self.solved, ws, at, qn, pn);
            start.learn(qn);
            next[..nq].copy_from_slice(qn);
            if self.velocity_state {
                node.velocity(model, ws.rbd(), qn, pn, &mut next[nq..])?;
            } else {
                next[nq..].copy_from_slice(pn);
            }
            Ok(())
        })?;
        self.return_scratch(scratch);
        Ok(out)
    }
    /// Scratch for one rollout or linearisation from the pool (a new one when it is empty).
    fn take_scratch(&self) -> Box<StepScratch> {
        self.step_pool.take(|| StepScratch::new(self.vi))
    }
    /// Scratch back to the pool after a call that succeeded (a failed call drops its own, so
    /// that no state of a failure reaches the next call).
    fn return_scratch(&self, s: Box<StepScratch>) {
        self.step_pool.give_back(s);
    }
    /// The state trajectory `x` (in these dynamics' coordinates) and actuated controls `u` as
    /// a [`Trajectory`] of the VI (`(q, p)`, full controls; on the velocity state
    /// `p_k = M(q_k) v_k`, the momentum a rollout steps with).
    pub fn to_trajectory(&self, x: &[f64], u: &[f64]) -> Result<Trajectory> {
        let (n, nq) = (self.vi.n(), self.vi.nq());
        let steps = x.len() / (nq + n) - 1;
        let mut traj = Trajectory {
            n,
            nq,
            steps,
            q: Vec::with_capacity((steps + 1) * nq),
            p: vec![0.0; (steps + 1) * n],
            u: self.actuation.expand_all(u),
            iterations: vec![0; steps],
        };
        let mut s = self.velocity_state.then(|| self.take_scratch());
        for (xk, pk) in x.chunks_exact(nq + n).zip(traj.p.chunks_exact_mut(n)) {
            traj.q.extend_from_slice(&xk[..nq]);
            match s.as_deref_mut() {
                Some(StepScratch { ws, node, .. }) => node.momentum(self.vi.model(), ws.rbd(), &xk[..nq], &xk[nq..], pk)?,
                None => pk.copy_from_slice(&xk[nq..]),
            }
        }
        if let Some(s) = s {
            self.return_scratch(s);
        }
        Ok(traj)
    }
}

impl Dynamics for ViDynamics<'_> {
    fn nx(&self) -> usize {
        self.vi.nq() + self.vi.n()
    }
    fn state_space(&self) -> StateSpace {
        StateSpace::of_model(self.vi.model())
    }
    /// Second derivatives exist unless the VI has kinematic joints or body wrenches, or the
    /// state is `(q, v)`: exact ones, with and without constraints, on fixed charts and on the
    /// Lie group (free-flyer, spherical, planar joints;
    /// [`VariationalIntegrator::linearize_second_order_contracted`]).
    fn has_second_order(&self) -> bool {
        !self.velocity_state && vidyn_system::DiscreteDynamics::has_second_order(self.vi)
    }
    fn nu(&self) -> usize {
        self.actuation.nu()
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.simulate(x0, steps, policy, None)
    }
    /// The VI's step `k` from `x = (q, p)` (not on the velocity state), Newton started from
    /// `guess`'s configuration, then from its own predictors; kept for the linearisation as a
    /// rollout's steps are.
    fn step(&self, k: usize, x: &[f64], u: &[f64], guess: Option<&[f64]>, next: &mut [f64]) -> Result<()> {
        if self.velocity_state {
            return Err(OptimError::NotImplemented("single steps on the velocity state (q, v): use the (q, p) state".into()));
        }
        let nq = self.vi.nq();
        let mut s = self.take_scratch();
        self.actuation.expand(u, &mut s.full);
        let StepScratch { ws, full, q_next, p_next, .. } = &mut *s;
        let (q, p) = x.split_at(nq);
        let at = StepInput::new(k, q, p, full);
        self.vi.step(ws, at.with_guess(guess.map(|g| &g[..nq])), q_next, p_next)?;
        // for the linearisation and the contact-force costs of this step
        self.vi.keep_solved(&self.solved, ws, at, q_next, p_next);
        next[..nq].copy_from_slice(q_next);
        next[nq..].copy_from_slice(p_next);
        self.return_scratch(s);
        Ok(())
    }
    /// Each Newton solve starts from `near`'s linear prediction of `q_{k+1}` (error second order
    /// in the distance to the nominal) or from [`Dynamics::rollout`]'s extrapolation (error
    /// third to fifth order in `Δt`), whichever was closer to the solution at the step before.
    fn rollout_near(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>, near: &Nominal<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.simulate(x0, steps, policy, Some(near))
    }
    /// Chunks of [`Dynamics::linearize_steps`] in parallel on vidyn's pool (the matrices of
    /// the batch engine's linearisation of the same steps, written straight into nalgebra's
    /// layout; steps the latest rollout solved are not solved again).
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians> {
        const CHUNK: usize = 8;
        let (nx, ndx, m) = (self.nx(), 2 * self.vi.n(), self.actuation.nu());
        let steps = trajectory_steps("linearize", x, u, nx, m)?;
        let mut a = vec![DMatrix::zeros(ndx, ndx); steps];
        let mut b = vec![DMatrix::zeros(ndx, m); steps];
        vidyn_batch::install(|| {
            a.par_chunks_mut(CHUNK).zip(b.par_chunks_mut(CHUNK)).enumerate().try_for_each(|(c, (ac, bc))| {
                let k0 = c * CHUNK;
                self.linearize_steps(k0, &x[k0 * nx..(k0 + ac.len() + 1) * nx], &u[k0 * m..(k0 + ac.len()) * m], ac, bc)
            })
        })?;
        Ok((a, b))
    }
    fn linearizes_steps(&self) -> bool {
        true
    }
    /// Each step by [`VariationalIntegrator::linearize`] from `(q_k, p_k, u_k)`, warm-started at
    /// `q_{k+1}` — what the batch engine runs for every step of `vidyn_batch::linearize` — with
    /// scratch from a pool (one per concurrent caller; a failed step's is dropped, so that no
    /// state of a failure reaches the next call). A step the latest rollout solved is
    /// linearised from its kept control points instead
    /// ([`VariationalIntegrator::linearize_kept`]: the same matrices without the re-solve).
    /// On the velocity state each step gets `p_k = M(q_k) v_k` as the rollout did, and its
    /// `A`, `B` are mapped to `(q, v)` (the `velocity_state` module; each node's Legendre data
    /// computed once per call).
    fn linearize_steps(&self, k0: usize, x: &[f64], u: &[f64], a: &mut [DMatrix<f64>], b: &mut [DMatrix<f64>]) -> Result<()> {
        let (n, nq, m) = (self.vi.n(), self.vi.nq(), self.actuation.nu());
        let nx = nq + n;
        if x.len() != (a.len() + 1) * nx || u.len() != a.len() * m || b.len() != a.len() {
            return Err(OptimError::InvalidInput(format!(
                "linearize_steps: {} steps need {} state and {} control entries and as many B as A",
                a.len(),
                (a.len() + 1) * nx,
                a.len() * m
            )));
        }
        let mut s = self.take_scratch();
        let model = self.vi.model();
        if self.velocity_state && !a.is_empty() {
            s.node.linearize_at(model, s.ws.rbd(), &x[..nq], &x[nq..nx])?;
            self.save_node(k0, &s.node, &x[..nx]);
        }
        for (i, (ak, bk)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
            let (xk, next) = (&x[i * nx..(i + 1) * nx], &x[(i + 1) * nx..(i + 2) * nx]);
            let s = &mut *s;
            self.actuation.expand(&u[i * m..(i + 1) * m], &mut s.full);
            let p = if self.velocity_state {
                s.node.momentum_of(&xk[nq..], &mut s.p);
                &s.p[..]
            } else {
                &xk[nq..]
            };
            let at = StepInput::new(k0 + i, &xk[..nq], p, &s.full).with_guess(Some(&next[..nq]));
            self.vi.linearize_kept(&self.solved, &mut s.ws, at, ak, &mut s.b, &mut s.q_next, &mut s.p_next)?;
            self.actuation.select_columns(&s.b, bk);
            if self.velocity_state {
                s.next_node.linearize_at(model, s.ws.rbd(), &next[..nq], &next[nq..])?;
                self.save_node(k0 + i + 1, &s.next_node, next);
                jacobians_to_velocity(ak, bk, &s.node, &mut s.next_node);
                std::mem::swap(&mut s.node, &mut s.next_node);
            }
        }
        self.return_scratch(s);
        Ok(())
    }
    /// The VI's exact λ-contracted second derivatives
    /// ([`VariationalIntegrator::linearize_second_order_contracted`], co-state `w` on
    /// `x_{k+1}`), keeping the actuated rows of `hux` (`= hxuᵀ`) and the actuated rows and
    /// columns of `huu`. The step is re-solved from `(x_k, u_k)`, started at the solution the
    /// latest rollout kept for it when it has one (its `q_{k+1}` and multipliers: no Newton
    /// iteration then); one workspace per concurrent caller is kept in a pool.
    fn second_order_contracted(&self, k: usize, x: &[f64], u: &[f64], w: &[f64], out: &mut SecondOrder) -> Result<()> {
        if self.velocity_state {
            return Err(OptimError::NotImplemented("second derivatives on the velocity state (q, v): use the (q, p) state".into()));
        }
        let (n, nq) = (self.vi.n(), self.vi.nq());
        let mut full = vec![0.0; n];
        self.actuation.expand(u, &mut full);
        let (q, p) = (&x[..nq], &x[nq..nq + n]);
        let mut guess = vec![0.0; nq];
        let result = self.second_order_pool.with(
            || self.vi.second_order_workspace(),
            |so| {
                let kept = self.vi.kept_solution(&self.solved, k, q, p, &full, |q_next, lambda| {
                    guess.copy_from_slice(q_next);
                    so.guess_multipliers(lambda);
                });
                let at = StepInput::new(k, q, p, &full).with_guess(kept.map(|()| &guess[..]));
                self.vi.linearize_second_order_contracted(so, at, w).map(|d| {
                    out.hxx.copy_from(&d.hxx);
                    self.actuation.select_second_order(&d.hxu, &d.huu, &mut out.hux, &mut out.huu);
                })
            },
        );
        Ok(result?)
    }
}
