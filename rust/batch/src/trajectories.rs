//! Batched rollouts (parallel over trajectories) and batched linearisations (parallel over
//! every `(trajectory, step)` pair) of any [`DiscreteDynamics`].
//!
//! Layouts (row-major, `B` trajectories of `N` steps): `q` `(B, N+1, nq)`, `p` `(B, N+1, np)`,
//! `u` `(B, N, nu)`, `A` `(B, N, ndx, ndx)`, `B` `(B, N, ndx, nu)`, Newton iterations
//! `(B, N)`. A trajectory is simulated by exactly the sequential code of
//! `vidyn_vi::rollout` (same warm start), a pair is linearised by exactly the single call
//! that `vidyn_vi::linearize_trajectory` makes, so results are bit-for-bit equal to
//! theirs for any number of threads.

use crate::dynamics::row;
use rayon::prelude::*;
use vidyn_system::engine::{run_rows, OutRow};
use vidyn_system::{check_finite, check_len, BatchError, ContractedTerms, Control, DiscreteDynamics, Failures, SecondOrderTerms, StepInput};

/// How the initial momentum of each trajectory is given.
#[derive(Clone, Copy, Debug)]
pub enum Start<'a> {
    /// Initial velocities `(B, nv)`, turned into momenta by [`DiscreteDynamics::momentum`].
    Velocity(&'a [f64]),
    /// Initial momenta `(B, np)`.
    Momentum(&'a [f64]),
}

/// `batch` trajectories of `steps` steps: `q` `(B, N+1, nq)`, `p` `(B, N+1, np)`, `u`
/// `(B, N, nu)`, row-major (what [`rollout`] writes and the linearisations read).
#[derive(Clone, Copy, Debug)]
pub struct Trajectories<'a> {
    pub batch: usize,
    pub steps: usize,
    pub q: &'a [f64],
    pub p: &'a [f64],
    pub u: &'a [f64],
}

/// Output buffers of [`rollout`].
pub struct RolloutOut<'a> {
    /// `(B, N+1, nq)` configurations.
    pub q: &'a mut [f64],
    /// `(B, N+1, np)` momenta.
    pub p: &'a mut [f64],
    /// `(B, N)` solver iterations of each step (−1 for steps not taken).
    pub iterations: &'a mut [i64],
}

/// One trajectory's outputs. On failure, states after the last one computed become NaN and
/// the iterations of steps not taken −1; the computed prefix is kept.
struct TrajectoryRows<'a> {
    q: &'a mut [f64],
    p: &'a mut [f64],
    iterations: &'a mut [i64],
    /// States computed so far (including the initial one).
    valid: usize,
    nq: usize,
    np: usize,
}

impl OutRow for TrajectoryRows<'_> {
    fn mark_failed(&mut self) {
        let (nq, np, v) = (self.nq, self.np, self.valid);
        let (lq, lp, li) = (self.q.len(), self.p.len(), self.iterations.len());
        self.q[(v * nq).min(lq)..].fill(f64::NAN);
        self.p[(v * np).min(lp)..].fill(f64::NAN);
        self.iterations[v.saturating_sub(1).min(li)..].fill(-1);
    }
}

/// `buf.par_chunks_mut(stride)`, or, when `stride == 0` (a dimension of size zero), chunks
/// of a one-per-row dummy so that the zip with the other outputs still yields `rows` items.
fn chunks<'a, T: Send + Clone + Default>(buf: &'a mut [T], stride: usize, rows: usize, dummy: &'a mut Vec<T>) -> rayon::slice::ChunksMut<'a, T> {
    if stride == 0 {
        *dummy = vec![T::default(); rows];
        dummy.par_chunks_mut(1)
    } else {
        buf.par_chunks_mut(stride)
    }
}

/// Simulates `batch` trajectories of `steps` steps in parallel (one trajectory per task,
/// steps in sequence): from `q0` `(B, nq)` and `start`, under controls `u` `(B, N, nu)`.
/// `control` counts steps (`B·N` in all). Each step after the first is warm-started by
/// [`DiscreteDynamics::warm_start`], exactly as the sequential rollout.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths. A trajectory that fails (invalid input,
/// Newton failure at some step) is listed in the returned failures with its error; the
/// others complete.
// the batch's shape, its start (`q0`, `start`), controls and outputs: the start and the
// controls are inputs of different shapes, not one trajectory
#[allow(clippy::too_many_arguments)]
pub fn rollout<D: DiscreteDynamics>(
    sys: &D,
    control: &Control,
    batch: usize,
    steps: usize,
    q0: &[f64],
    start: Start<'_>,
    u: &[f64],
    out: RolloutOut<'_>,
) -> Result<Failures<D::Error>, BatchError<D::Error>> {
    let (nq, nv, np, nu) = (sys.nq(), sys.nv(), sys.np(), sys.nu());
    check_len("q0", q0.len(), batch, nq, "(B, nq)")?;
    match start {
        Start::Velocity(v0) => check_len("v0", v0.len(), batch, nv, "(B, nv)")?,
        Start::Momentum(p0) => check_len("p0", p0.len(), batch, np, "(B, np)")?,
    }
    check_len("u", u.len(), batch, steps * nu, "(B, N, nu)")?;
    check_len("q", out.q.len(), batch, (steps + 1) * nq, "(B, N+1, nq)")?;
    check_len("p", out.p.len(), batch, (steps + 1) * np, "(B, N+1, np)")?;
    check_len("iterations", out.iterations.len(), batch, steps, "(B, N)")?;
    let (mut dq, mut dp, mut di) = (Vec::new(), Vec::new(), Vec::new());
    let items =
        (chunks(out.q, (steps + 1) * nq, batch, &mut dq), chunks(out.p, (steps + 1) * np, batch, &mut dp), chunks(out.iterations, steps, batch, &mut di))
            .into_par_iter()
            .map(|(q, p, iterations)| TrajectoryRows { q, p, iterations, valid: 0, nq, np });
    let init = || (sys.workspace(), vec![0.0; nq]);
    Ok(run_rows(control, items, &init, 0, |(ws, guess), b, t| {
        let (qs, ps) = (&mut *t.q, &mut *t.p);
        check_finite(row(q0, b, nq), "q0")?;
        if nq > 0 {
            qs[..nq].copy_from_slice(row(q0, b, nq));
        }
        match start {
            Start::Momentum(p0) => {
                check_finite(row(p0, b, np), "p0")?;
                ps[..np].copy_from_slice(row(p0, b, np));
            }
            Start::Velocity(v0) => {
                check_finite(row(v0, b, nv), "v0")?;
                sys.momentum(ws, &qs[..nq], row(v0, b, nv), &mut ps[..np])?;
            }
        }
        t.valid = 1;
        for k in 0..steps {
            if control.is_cancelled() {
                return Err(BatchError::Cancelled);
            }
            let (done, rest) = qs.split_at_mut((k + 1) * nq);
            let (pd, pr) = ps.split_at_mut((k + 1) * np);
            let qk = &done[k * nq..];
            let warm = sys.warm_start(done, nq, guess);
            let uk = &u[(b * steps + k) * nu..(b * steps + k + 1) * nu];
            let at = StepInput::new(k, qk, &pd[k * np..], uk);
            let it = sys.step(ws, at.with_guess(warm.then_some(guess.as_slice())), &mut rest[..nq], &mut pr[..np])?;
            sys.check_step(ws, at, &rest[..nq], &pr[..np])?;
            t.iterations[k] = i64::try_from(it).unwrap_or(i64::MAX);
            t.valid = k + 2;
            control.advance(1);
        }
        Ok(())
    }))
}

/// Checks the shapes of a trajectory batch `q` `(B, N+1, nq)`, `p` `(B, N+1, np)`, `u` `(B, N, nu)`.
fn check_trajectories<D: DiscreteDynamics>(sys: &D, batch: usize, steps: usize, q: &[f64], p: &[f64], u: &[f64]) -> Result<(), BatchError<D::Error>> {
    check_len("q", q.len(), batch, (steps + 1) * sys.nq(), "(B, N+1, nq)")?;
    check_len("p", p.len(), batch, (steps + 1) * sys.np(), "(B, N+1, np)")?;
    check_len("u", u.len(), batch, steps * sys.nu(), "(B, N, nu)")
}

/// The inputs of pair `r = b·N + k`: `(k, q_k, p_k, u_k, q_{k+1})` of trajectory `b`.
struct Pairs<'a> {
    steps: usize,
    nq: usize,
    np: usize,
    nu: usize,
    q: &'a [f64],
    p: &'a [f64],
    u: &'a [f64],
}

impl<'a> Pairs<'a> {
    /// Pair `r`'s step, started at its stored end `q_{k+1}`.
    fn get(&self, r: usize) -> StepInput<'a> {
        let (b, k) = (r / self.steps, r % self.steps);
        let s = b * (self.steps + 1) + k; // state index in the flattened (B·(N+1)) rows
        StepInput::new(k, row(self.q, s, self.nq), row(self.p, s, self.np), row(self.u, r, self.nu)).with_guess(Some(row(self.q, s + 1, self.nq)))
    }
}

/// First-order linearisation of every step of `batch` trajectories, in parallel over all
/// `B·N` `(trajectory, step)` pairs: `a` `(B, N, ndx, ndx)`, `b` `(B, N, ndx, nu)`. Each pair
/// re-solves its step from `(q_k, p_k, u_k)` warm-started at the stored `q_{k+1}`. The
/// failures are indexed by pair `b·N + k` ([`by_trajectory`] regroups them); `control`
/// counts pairs.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths; per-pair errors are in the returned list.
pub fn linearize<D: DiscreteDynamics>(
    sys: &D,
    control: &Control,
    trajectories: Trajectories<'_>,
    a: &mut [f64],
    b: &mut [f64],
) -> Result<Failures<D::Error>, BatchError<D::Error>> {
    let Trajectories { batch, steps, q, p, u } = trajectories;
    check_trajectories(sys, batch, steps, q, p, u)?;
    let (ndx, nu, rows) = (sys.ndx(), sys.nu(), batch * steps);
    check_len("A", a.len(), rows, ndx * ndx, "(B, N, ndx, ndx)")?;
    check_len("B", b.len(), rows, ndx * nu, "(B, N, ndx, nu)")?;
    if rows == 0 {
        return Ok(Vec::new());
    }
    let pairs = Pairs { steps, nq: sys.nq(), np: sys.np(), nu, q, p, u };
    let (mut da, mut db) = (Vec::new(), Vec::new());
    let items = (chunks(a, ndx * ndx, rows, &mut da), chunks(b, ndx * nu, rows, &mut db)).into_par_iter();
    let init = || sys.workspace();
    Ok(run_rows(control, items, &init, 1, |ws, r, (ak, bk)| sys.linearize(ws, pairs.get(r), ak, bk).map(|_| ())))
}

/// Output buffers of [`linearize_second_order`], `(B, N, …)` each (see [`SecondOrderTerms`]);
/// `first`: `A` `(B, N, ndx, ndx)` and `B` `(B, N, ndx, nu)` too, when given.
pub struct SecondOrderOut<'a> {
    pub first: Option<(&'a mut [f64], &'a mut [f64])>,
    pub fxx: &'a mut [f64],
    pub fxu: &'a mut [f64],
    pub fuu: &'a mut [f64],
}

/// The optional `A`, `B` outputs of the second-order linearisations cut into rows: whether
/// they are wanted, and their row chunks (one-entry rows of `dummies` when they are not, so
/// that the zip with the other outputs keeps its length).
#[allow(clippy::type_complexity)]
fn first_order_rows<'b, E>(
    first: Option<(&'b mut [f64], &'b mut [f64])>,
    rows: usize,
    ndx: usize,
    nu: usize,
    dummies: &'b mut (Vec<f64>, Vec<f64>),
) -> Result<(bool, rayon::slice::ChunksMut<'b, f64>, rayon::slice::ChunksMut<'b, f64>), BatchError<E>> {
    let (da, db) = (&mut dummies.0, &mut dummies.1);
    Ok(match first {
        Some((a, b)) => {
            check_len("A", a.len(), rows, ndx * ndx, "(B, N, ndx, ndx)")?;
            check_len("B", b.len(), rows, ndx * nu, "(B, N, ndx, nu)")?;
            (true, chunks(a, ndx * ndx, rows, da), chunks(b, ndx * nu, rows, db))
        }
        None => (false, chunks(&mut [], 0, rows, da), chunks(&mut [], 0, rows, db)),
    })
}

/// Full second-order terms of every step, in parallel over `(trajectory, step)` pairs:
/// `fxx` `(B, N, ndx, ndx, ndx)`, `fxu` `(B, N, ndx, ndx, nu)`, `fuu` `(B, N, ndx, nu, nu)`.
/// Failures indexed by pair; a system without second-order terms reports
/// [`BatchError::Unsupported`] for every pair.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths.
pub fn linearize_second_order<D: DiscreteDynamics>(
    sys: &D,
    control: &Control,
    trajectories: Trajectories<'_>,
    out: SecondOrderOut<'_>,
) -> Result<Failures<D::Error>, BatchError<D::Error>> {
    let Trajectories { batch, steps, q, p, u } = trajectories;
    check_trajectories(sys, batch, steps, q, p, u)?;
    let (ndx, nu, rows) = (sys.ndx(), sys.nu(), batch * steps);
    check_len("fxx", out.fxx.len(), rows, ndx * ndx * ndx, "(B, N, ndx, ndx, ndx)")?;
    check_len("fxu", out.fxu.len(), rows, ndx * ndx * nu, "(B, N, ndx, ndx, nu)")?;
    check_len("fuu", out.fuu.len(), rows, ndx * nu * nu, "(B, N, ndx, nu, nu)")?;
    if rows == 0 {
        return Ok(Vec::new());
    }
    let pairs = Pairs { steps, nq: sys.nq(), np: sys.np(), nu, q, p, u };
    let (mut dummies, mut d) = ((Vec::new(), Vec::new()), [(); 3].map(|()| Vec::new()));
    let [d1, d2, d3] = &mut d;
    let (wanted, a, b) = first_order_rows(out.first, rows, ndx, nu, &mut dummies)?;
    let items =
        (a, b, chunks(out.fxx, ndx * ndx * ndx, rows, d1), chunks(out.fxu, ndx * ndx * nu, rows, d2), chunks(out.fuu, ndx * nu * nu, rows, d3)).into_par_iter();
    let init = || sys.workspace();
    Ok(run_rows(control, items, &init, 1, |ws, r, (a, b, fxx, fxu, fuu)| {
        let first = wanted.then_some((&mut **a, &mut **b));
        sys.linearize_second_order(ws, pairs.get(r), SecondOrderTerms { first, fxx, fxu, fuu })
    }))
}

/// Output buffers of [`linearize_second_order_contracted`], `(B, N, …)` each (see
/// [`ContractedTerms`]); `first` as in [`SecondOrderOut`].
pub struct ContractedOut<'a> {
    pub first: Option<(&'a mut [f64], &'a mut [f64])>,
    pub xx: &'a mut [f64],
    pub xu: &'a mut [f64],
    pub uu: &'a mut [f64],
}

/// Second-order terms of every step contracted with the co-states `lam` `(B, N, ndx)` (the
/// value-function gradient at `k+1` in DDP), in parallel over pairs: `xx` `(B, N, ndx, ndx)`,
/// `xu` `(B, N, ndx, nu)`, `uu` `(B, N, nu, nu)`. Failures indexed by pair.
///
/// # Errors
/// [`BatchError::Shape`] for inconsistent lengths.
pub fn linearize_second_order_contracted<D: DiscreteDynamics>(
    sys: &D,
    control: &Control,
    trajectories: Trajectories<'_>,
    lam: &[f64],
    out: ContractedOut<'_>,
) -> Result<Failures<D::Error>, BatchError<D::Error>> {
    let Trajectories { batch, steps, q, p, u } = trajectories;
    check_trajectories(sys, batch, steps, q, p, u)?;
    let (ndx, nu, rows) = (sys.ndx(), sys.nu(), batch * steps);
    check_len("lam", lam.len(), rows, ndx, "(B, N, ndx)")?;
    check_len("xx", out.xx.len(), rows, ndx * ndx, "(B, N, ndx, ndx)")?;
    check_len("xu", out.xu.len(), rows, ndx * nu, "(B, N, ndx, nu)")?;
    check_len("uu", out.uu.len(), rows, nu * nu, "(B, N, nu, nu)")?;
    if rows == 0 {
        return Ok(Vec::new());
    }
    let pairs = Pairs { steps, nq: sys.nq(), np: sys.np(), nu, q, p, u };
    let (mut dummies, mut d) = ((Vec::new(), Vec::new()), [(); 3].map(|()| Vec::new()));
    let [d1, d2, d3] = &mut d;
    let (wanted, a, b) = first_order_rows(out.first, rows, ndx, nu, &mut dummies)?;
    let items = (a, b, chunks(out.xx, ndx * ndx, rows, d1), chunks(out.xu, ndx * nu, rows, d2), chunks(out.uu, nu * nu, rows, d3)).into_par_iter();
    let init = || sys.workspace();
    Ok(run_rows(control, items, &init, 1, |ws, r, (a, b, xx, xu, uu)| {
        let first = wanted.then_some((&mut **a, &mut **b));
        sys.linearize_second_order_contracted(ws, pairs.get(r), row(lam, r, ndx), ContractedTerms { first, xx, xu, uu })
    }))
}

/// Regroups pair failures (`r = b·N + k`) by trajectory: for each failed trajectory `b`, its
/// first failed step `k` and that step's error, in increasing `b`.
#[must_use]
pub fn by_trajectory<E>(failures: Failures<E>, steps: usize) -> Vec<(usize, usize, BatchError<E>)> {
    let mut out: Vec<(usize, usize, BatchError<E>)> = Vec::new();
    for (r, e) in failures {
        let (b, k) = (r / steps.max(1), r % steps.max(1));
        if out.last().is_none_or(|(last, _, _)| *last != b) {
            out.push((b, k, e));
        }
    }
    out
}
