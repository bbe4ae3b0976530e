//! Any [`DiscreteDynamics`] system as the optimisers' [`Dynamics`]: the one adapter between
//! the discrete-time system interface and the optimisers.
//!
//! The state is the system's `x = (q, p)` (`nx = nq + np`, on the [`StateSpace`] given at
//! construction), the controls are the forces of the [`Actuation`]'s joints (the others get
//! zero). A rollout steps the system with each Newton solve started as [`crate::ViDynamics`]
//! starts them (module `newton_start`), marks every step after the first
//! [`StepInput::continuing`] and checks each step ([`DiscreteDynamics::check_step`]);
//! linearisations run chunks of steps in parallel on vidyn's pool, each step written by
//! [`DiscreteDynamics::linearize_matrices`] straight into the optimiser's matrices; the
//! second-order terms are the system's λ-contracted ones.
//!
//! [`crate::MaximalDynamics`] is this adapter on the maximal integrator's joint coordinates.
//! The minimal-coordinate VI has its own adapter, [`crate::ViDynamics`], for what only it
//! offers: the velocity state `(q, v)`, linearisations that reuse the rollout's solved steps
//! and run a few steps at a time while a trial is simulated. On `(q, p)` the two give the
//! same trajectories and matrices bit for bit (`tests/system_dynamics.rs`).

use crate::actuation::Actuation;
use crate::checks::trajectory_steps;
use crate::dynamics::{run_policy, Dynamics, Jacobians, Nominal, Policy, SecondOrder};
use crate::error::{OptimError, Result};
use crate::newton_start::{NewtonStart, StepAt};
use crate::state_space::StateSpace;
use nalgebra::DMatrix;
use rayon::prelude::*;
use std::sync::Arc;
use vidyn_system::{BatchError, ContractedTerms, DiscreteDynamics, ScratchPool, StepInput};

/// A [`DiscreteDynamics`] system as [`Dynamics`] (module docs).
pub struct SystemDynamics<S: DiscreteDynamics> {
    system: S,
    space: StateSpace,
    actuation: Actuation,
    /// Scratch of single steps and second-order terms, one per concurrent caller.
    pool: Arc<ScratchPool<Scratch<S::Workspace>>>,
}

impl<S: DiscreteDynamics + Clone> Clone for SystemDynamics<S> {
    fn clone(&self) -> Self {
        Self { system: self.system.clone(), space: self.space.clone(), actuation: self.actuation.clone(), pool: Arc::clone(&self.pool) }
    }
}

impl<S: DiscreteDynamics + std::fmt::Debug> std::fmt::Debug for SystemDynamics<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemDynamics").field("system", &self.system).field("space", &self.space).field("actuation", &self.actuation).finish_non_exhaustive()
    }
}

/// The system's workspace and the buffers of one step: full controls, the full `B`, and the
/// second-order terms in C order and as matrices.
struct Scratch<W> {
    ws: W,
    full: Vec<f64>,
    b: DMatrix<f64>,
    xx: Vec<f64>,
    xu: Vec<f64>,
    uu: Vec<f64>,
    hxu: DMatrix<f64>,
    huu: DMatrix<f64>,
}

/// The optimisers' error for a system's: its own converted, the engine's reported as invalid
/// input or, for a method the system lacks, as not implemented.
fn system_error<E: Into<OptimError> + std::fmt::Display>(e: BatchError<E>) -> OptimError {
    match e {
        BatchError::Core(e) => e.into(),
        BatchError::Unsupported { system, method } => OptimError::NotImplemented(format!("{system} does not implement {method}")),
        other => OptimError::InvalidInput(other.to_string()),
    }
}

impl<S: DiscreteDynamics> SystemDynamics<S>
where
    S::Error: Into<OptimError>,
{
    /// `system` on the states of `space` (which must have `nq + np` entries and `nv + np`
    /// tangent directions), controls on the `actuated` joints (strictly increasing indices
    /// `< nu`; `None`: all).
    ///
    /// # Errors
    /// A state space of other dimensions, or a bad joint list.
    pub fn new(system: S, space: StateSpace, actuated: Option<Vec<usize>>) -> Result<Self> {
        if space.nx() != system.nq() + system.np() || space.ndx() != system.ndx() {
            return Err(OptimError::InvalidInput(format!(
                "the state space has {} entries and {} tangent directions; {} has nq + np = {} and nv + np = {}",
                space.nx(),
                space.ndx(),
                system.name(),
                system.nq() + system.np(),
                system.ndx()
            )));
        }
        let actuation = Actuation::new(system.nu(), actuated)?;
        Ok(Self { system, space, actuation, pool: Arc::default() })
    }

    /// The system driven.
    #[must_use]
    pub fn system(&self) -> &S {
        &self.system
    }

    /// Which joints the controls act on.
    #[must_use]
    pub fn actuation(&self) -> &Actuation {
        &self.actuation
    }

    fn scratch(&self) -> Box<Scratch<S::Workspace>> {
        let (sys, ndx, nu) = (&self.system, self.system.ndx(), self.system.nu());
        self.pool.take(|| Scratch {
            ws: sys.workspace(),
            full: vec![0.0; nu],
            b: DMatrix::zeros(ndx, nu),
            xx: vec![0.0; ndx * ndx],
            xu: vec![0.0; ndx * nu],
            uu: vec![0.0; nu * nu],
            hxu: DMatrix::zeros(ndx, nu),
            huu: DMatrix::zeros(nu, nu),
        })
    }

    /// [`Dynamics::rollout`], each Newton solve started as module `newton_start` says.
    fn simulate(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>, near: Option<&Nominal<'_>>) -> Result<(Vec<f64>, Vec<f64>)> {
        let (sys, nq, nx) = (&self.system, self.system.nq(), self.space.nx());
        self.space.check(x0, "x0")?;
        let mut s = self.scratch();
        let Scratch { ws, full, .. } = &mut *s;
        let mut start = NewtonStart::new(nq);
        let out = run_policy(x0, steps, self.actuation.nu(), policy, |k, past, uk, next| {
            self.actuation.expand(uk, full);
            let xk = &past[k * nx..];
            let warm = start.choose(&self.space, StepAt { k, x: xk, u: uk, near }, |guess| sys.warm_start(past, nx, guess));
            let mut at = StepInput::new(k, &xk[..nq], &xk[nq..], full).with_guess(warm);
            if k > 0 {
                at = at.continuing();
            }
            let (q_next, p_next) = next.split_at_mut(nq);
            sys.step(ws, at, q_next, p_next).map_err(system_error)?;
            sys.check_step(ws, at, q_next, p_next).map_err(system_error)?;
            start.learn(q_next);
            Ok(())
        })?;
        self.pool.give_back(s);
        Ok(out)
    }
}

impl<S: DiscreteDynamics> Dynamics for SystemDynamics<S>
where
    S::Error: Into<OptimError>,
{
    fn nx(&self) -> usize {
        self.space.nx()
    }
    fn state_space(&self) -> StateSpace {
        self.space.clone()
    }
    fn nu(&self) -> usize {
        self.actuation.nu()
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.simulate(x0, steps, policy, None)
    }
    fn rollout_near(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>, near: &Nominal<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        self.simulate(x0, steps, policy, Some(near))
    }
    /// The system's step `k` from `x`, its solver started at `guess`'s configuration; depends
    /// on the inputs only (not a continuing step).
    fn step(&self, k: usize, x: &[f64], u: &[f64], guess: Option<&[f64]>, next: &mut [f64]) -> Result<()> {
        let (nq, nx) = (self.system.nq(), self.space.nx());
        if x.len() != nx || next.len() != nx || u.len() != self.actuation.nu() {
            return Err(OptimError::InvalidInput(format!("step: x and next need nx = {nx} entries and u {}", self.actuation.nu())));
        }
        let mut s = self.scratch();
        let Scratch { ws, full, .. } = &mut *s;
        self.actuation.expand(u, full);
        let at = StepInput::new(k, &x[..nq], &x[nq..], full).with_guess(guess.map(|g| &g[..nq]));
        let (q_next, p_next) = next.split_at_mut(nq);
        self.system.step(ws, at, q_next, p_next).map_err(system_error)?;
        self.pool.give_back(s);
        Ok(())
    }
    /// Chunks of steps in parallel on vidyn's pool (a scratch per chunk from the pool), each
    /// step from `(x_k, u_k)` with the stored `q_{k+1}` as the solver's start, as the batch
    /// engine linearises it.
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians> {
        const CHUNK: usize = 8;
        let (sys, nq, nx, m) = (&self.system, self.system.nq(), self.space.nx(), self.actuation.nu());
        let steps = trajectory_steps("linearize", x, u, nx, m)?;
        let ndx = sys.ndx();
        let mut a = vec![DMatrix::zeros(ndx, ndx); steps];
        let mut b = vec![DMatrix::zeros(ndx, m); steps];
        vidyn_batch::install(|| {
            a.par_chunks_mut(CHUNK).zip(b.par_chunks_mut(CHUNK)).enumerate().try_for_each(|(c, (ac, bc))| {
                let mut s = self.scratch();
                let Scratch { ws, full, b: b_full, .. } = &mut *s;
                for (i, (ak, bk)) in ac.iter_mut().zip(bc.iter_mut()).enumerate() {
                    let k = c * CHUNK + i;
                    let (xk, next) = (&x[k * nx..(k + 1) * nx], &x[(k + 1) * nx..(k + 2) * nx]);
                    self.actuation.expand(&u[k * m..(k + 1) * m], full);
                    let at = StepInput::new(k, &xk[..nq], &xk[nq..], full).with_guess(Some(&next[..nq]));
                    sys.linearize_matrices(ws, at, ak, b_full).map_err(system_error)?;
                    self.actuation.select_columns(b_full, bk);
                }
                self.pool.give_back(s);
                Ok::<(), OptimError>(())
            })
        })?;
        Ok((a, b))
    }
    fn has_second_order(&self) -> bool {
        self.system.has_second_order()
    }
    /// The system's λ-contracted second-order terms
    /// ([`DiscreteDynamics::linearize_second_order_contracted`], co-state `w` on `x_{k+1}`),
    /// keeping the actuated rows of `hux` and the actuated rows and columns of `huu`.
    fn second_order_contracted(&self, k: usize, x: &[f64], u: &[f64], w: &[f64], out: &mut SecondOrder) -> Result<()> {
        let nq = self.system.nq();
        let mut s = self.scratch();
        let Scratch { ws, full, xx, xu, uu, hxu, huu, .. } = &mut *s;
        self.actuation.expand(u, full);
        let at = StepInput::new(k, &x[..nq], &x[nq..], full);
        self.system.linearize_second_order_contracted(ws, at, w, ContractedTerms { first: None, xx, xu, uu }).map_err(system_error)?;
        rows_into(xx, &mut out.hxx);
        rows_into(xu, hxu);
        rows_into(uu, huu);
        self.actuation.select_second_order(hxu, huu, &mut out.hux, &mut out.huu);
        self.pool.give_back(s);
        Ok(())
    }
}

/// The C-order entries `rows` into the column-major matrix `m` of the same shape.
fn rows_into(rows: &[f64], m: &mut DMatrix<f64>) {
    let c = m.ncols();
    for (i, row) in rows.chunks_exact(c.max(1)).enumerate().take(m.nrows()) {
        for (j, &x) in row.iter().enumerate() {
            m[(i, j)] = x;
        }
    }
}
