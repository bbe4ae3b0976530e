//! The maximal-coordinate integrator as a [`vidyn_system::DiscreteDynamics`] system, so that
//! the batch engine (parallel rollouts and linearisations) and the optimisers can drive it.
//!
//! State layout (per body, bodies in order): `q` = `[x (3); quaternion [x y z w] (4)]`
//! (`nq = 7 nb`), tangent `[δx (world); δθ (body)]` (`nv = 6 nb`); `p` = `[v (world); ω (body)]`,
//! the discrete velocity of the interval ending at the knot (`np = 6 nb`); `u` the model's
//! generalised forces. `A`, `B` rows/columns: all configuration tangents first, then all
//! velocities (the engine's `(δq, δp)` order). Each call starts Newton with zero multipliers,
//! so results do not depend on what a workspace computed before (the engine's bit-for-bit
//! guarantee); [`crate::rollout`] keeps the previous multipliers as warm start instead.

use crate::body::{BodyState, Pose};
use crate::error::MaximalError;
use crate::integrator::{MaximalIntegrator, MaximalWorkspace};
use nalgebra::{DMatrix, Quaternion, UnitQuaternion, Vector3};
use vidyn_system::{BatchError, DiscreteDynamics, StepInput};

/// Per-thread scratch of a [`MaximalIntegrator`] in the batch engine.
pub struct SystemWorkspace {
    pub ws: MaximalWorkspace,
    state: Vec<BodyState>,
    next: Vec<BodyState>,
    a: DMatrix<f64>,
    b: DMatrix<f64>,
}

fn unpack(q: &[f64], p: &[f64], out: &mut [BodyState]) -> Result<(), MaximalError> {
    if q.len() != 7 * out.len() || p.len() != 6 * out.len() {
        return Err(MaximalError::InvalidParameter(format!(
            "q has {} and p {} entries; expected 7·nb = {} and 6·nb = {}",
            q.len(),
            p.len(),
            7 * out.len(),
            6 * out.len()
        )));
    }
    for (i, s) in out.iter_mut().enumerate() {
        let (qi, pi) = (&q[7 * i..7 * i + 7], &p[6 * i..6 * i + 6]);
        let quat = Quaternion::new(qi[6], qi[3], qi[4], qi[5]);
        let norm = quat.norm();
        if !norm.is_finite() || (norm - 1.0).abs() > 1e-9 {
            return Err(MaximalError::InvalidParameter(format!("q[{}..{}] (body {i}) is not a unit quaternion (norm {norm})", 7 * i + 3, 7 * i + 7)));
        }
        *s = BodyState {
            pose: Pose::new(Vector3::new(qi[0], qi[1], qi[2]), UnitQuaternion::new_unchecked(quat)),
            v: Vector3::new(pi[0], pi[1], pi[2]),
            w: Vector3::new(pi[3], pi[4], pi[5]),
        };
    }
    Ok(())
}

fn pack(states: &[BodyState], q: &mut [f64], p: &mut [f64]) {
    for (i, s) in states.iter().enumerate() {
        q[7 * i..7 * i + 3].copy_from_slice(s.pose.x.as_slice());
        q[7 * i + 3..7 * i + 7].copy_from_slice(s.pose.q.coords.as_slice());
        p[6 * i..6 * i + 3].copy_from_slice(s.v.as_slice());
        p[6 * i + 3..6 * i + 6].copy_from_slice(s.w.as_slice());
    }
}

/// Engine index of maximal tangent coordinate `c` (per body `[δx δθ δv δω]`, 12 each).
#[inline]
fn engine_index(c: usize, nb: usize) -> usize {
    let (i, k) = (c / 12, c % 12);
    if k < 6 {
        6 * i + k
    } else {
        6 * nb + 6 * i + k - 6
    }
}

impl DiscreteDynamics for MaximalIntegrator {
    type Workspace = SystemWorkspace;
    type Error = MaximalError;

    fn name(&self) -> &'static str {
        "MaximalIntegrator"
    }
    fn nq(&self) -> usize {
        7 * self.mechanism().nbodies()
    }
    fn nv(&self) -> usize {
        6 * self.mechanism().nbodies()
    }
    fn nu(&self) -> usize {
        self.mechanism().nu
    }
    fn workspace(&self) -> SystemWorkspace {
        let nb = self.mechanism().nbodies();
        SystemWorkspace {
            ws: MaximalIntegrator::workspace(self),
            state: vec![BodyState::default(); nb],
            next: vec![BodyState::default(); nb],
            a: DMatrix::zeros(12 * nb, 12 * nb),
            b: DMatrix::zeros(12 * nb, self.mechanism().nu),
        }
    }

    /// The velocity part of the state is the velocity itself: `p = v`.
    fn momentum(&self, _ws: &mut SystemWorkspace, _q: &[f64], v: &[f64], p: &mut [f64]) -> Result<(), BatchError<MaximalError>> {
        if v.len() != p.len() {
            return Err(BatchError::Core(MaximalError::InvalidParameter(format!("v has {} entries, expected 6·nb = {}", v.len(), p.len()))));
        }
        p.copy_from_slice(v);
        Ok(())
    }

    /// `at.guess` is not used: the step starts from the integrator's own prediction.
    fn step(&self, ws: &mut SystemWorkspace, at: StepInput<'_>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize, BatchError<MaximalError>> {
        let StepInput { k: step, q, p, u, .. } = at;
        unpack(q, p, &mut ws.state)?;
        ws.ws.forget_multipliers();
        let stats = MaximalIntegrator::step(self, &mut ws.ws, step, &ws.state, u, None, &mut ws.next)?;
        pack(&ws.next, q_next, p_next);
        Ok(stats.iterations)
    }

    fn linearize(&self, ws: &mut SystemWorkspace, at: StepInput<'_>, a: &mut [f64], b: &mut [f64]) -> Result<usize, BatchError<MaximalError>> {
        let StepInput { k: step, q, p, u, .. } = at;
        unpack(q, p, &mut ws.state)?;
        ws.ws.forget_multipliers();
        let stats = MaximalIntegrator::linearize(self, &mut ws.ws, step, &ws.state, u, &mut ws.next, &mut ws.a, &mut ws.b)?;
        let (nb, nu) = (ws.state.len(), self.mechanism().nu);
        let ndx = 12 * nb;
        for r in 0..ndx {
            let er = engine_index(r, nb);
            for c in 0..ndx {
                a[er * ndx + engine_index(c, nb)] = ws.a[(r, c)];
            }
            for c in 0..nu {
                b[er * nu + c] = ws.b[(r, c)];
            }
        }
        Ok(stats.iterations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::four_bar;
    use std::sync::Arc;
    use vidyn_batch::{new_pool, with_pool, Control, RolloutOut, Start};

    #[test]
    fn batch_engine_rollouts_and_linearisations_match_the_sequential_ones_bit_for_bit() {
        let (mech, q0) = four_bar();
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
        let (nq, np, nu, ndx) = (vi.nq(), vi.np(), vi.nu(), vi.ndx());
        let (batch, steps) = (3, 15);
        let mut init = vec![BodyState::default(); 3];
        let (mut q0s, mut p0s) = (Vec::new(), Vec::new());
        for b in 0..batch {
            vi.mechanism().state_from_minimal(&q0, &[0.1 * b as f64, 0.0, -0.2], 0.01, &mut init).unwrap();
            let (mut q, mut p) = (vec![0.0; nq], vec![0.0; np]);
            pack(&init, &mut q, &mut p);
            q0s.extend(q);
            p0s.extend(p);
        }
        let u: Vec<f64> = (0..batch * steps * nu).map(|k| 0.2 * (k as f64 * 0.7).sin()).collect();
        let run = |threads: usize| {
            let (mut q, mut p, mut it) = (vec![0.0; batch * (steps + 1) * nq], vec![0.0; batch * (steps + 1) * np], vec![0i64; batch * steps]);
            let pool = new_pool(threads).unwrap();
            let failures = with_pool(&pool, || {
                vidyn_batch::rollout(
                    &vi,
                    &Control::new(),
                    batch,
                    steps,
                    &q0s,
                    Start::Momentum(&p0s),
                    &u,
                    RolloutOut { q: &mut q, p: &mut p, iterations: &mut it },
                )
                .unwrap()
            });
            assert!(failures.is_empty());
            let (mut a, mut bm) = (vec![0.0; batch * steps * ndx * ndx], vec![0.0; batch * steps * ndx * nu]);
            let failures = with_pool(&pool, || {
                vidyn_batch::linearize(&vi, &Control::new(), vidyn_batch::Trajectories { batch, steps, q: &q, p: &p, u: &u }, &mut a, &mut bm).unwrap()
            });
            assert!(failures.is_empty());
            (q, p, a, bm)
        };
        let one = run(1);
        assert_eq!(one, run(2), "results depend on the thread count");
        // the sequential trait calls give the same bits, and the loop stays closed
        let mut ws = DiscreteDynamics::workspace(&vi);
        let (mut qn, mut pn) = (vec![0.0; nq], vec![0.0; np]);
        for b in 0..batch {
            for k in 0..steps {
                let s = b * (steps + 1) + k;
                let (qk, pk) = (&one.0[s * nq..(s + 1) * nq], &one.1[s * np..(s + 1) * np]);
                DiscreteDynamics::step(&vi, &mut ws, StepInput::new(k, qk, pk, &u[(b * steps + k) * nu..(b * steps + k + 1) * nu]), &mut qn, &mut pn).unwrap();
                assert_eq!(qn.as_slice(), &one.0[(s + 1) * nq..(s + 2) * nq]);
                unpack(&qn, &pn, &mut init).unwrap();
                assert!(vi.constraint_violation(&init) <= 1e-12);
            }
        }
        // the permuted A equals the maximal-layout linearisation
        let (mut a, mut bm) = (DMatrix::zeros(36, 36), DMatrix::zeros(36, 3));
        unpack(&one.0[..nq], &one.1[..np], &mut init).unwrap();
        let mut next = init.clone();
        let mut mws = MaximalIntegrator::workspace(&vi);
        MaximalIntegrator::linearize(&vi, &mut mws, 0, &init, &u[..nu], &mut next, &mut a, &mut bm).unwrap();
        for r in 0..36 {
            for c in 0..36 {
                assert_eq!(one.2[engine_index(r, 3) * ndx + engine_index(c, 3)], a[(r, c)]);
            }
        }
    }
}
