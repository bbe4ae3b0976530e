//! The minimal-coordinate [`VariationalIntegrator`] as a [`DiscreteDynamics`] system (state
//! `(q, p)`, `nq = nv = np = nu = n`), the one implementation the batch engine and the
//! optimisers drive it through.

use crate::{KnotEnergy, SecondOrderWorkspace, VariationalIntegrator, ViError, ViWorkspace};
use nalgebra::DMatrix;
use vidyn_system::{matrix_to_rows, BatchError, ContractedTerms, DiscreteDynamics, SecondOrderTerms, StepInput};

/// Per-thread scratch of a [`VariationalIntegrator`] in the engine: its own workspace plus
/// the nalgebra `A`, `B` and next state that [`VariationalIntegrator::linearize`] fills, and
/// the second-order scratch (created by the first second-order call on the thread).
pub struct SystemWorkspace {
    pub vi: ViWorkspace,
    second: Option<SecondOrderWorkspace>,
    a: DMatrix<f64>,
    b: DMatrix<f64>,
    q_next: Vec<f64>,
    p_next: Vec<f64>,
    /// The knot `(q, p)` that ended the last checked step, that step and the knot's energy
    /// (`None` before the first check), so that the next step of a rollout starts from it
    /// instead of computing it again (when it imposes the same constraints).
    knot_step: usize,
    knot_q: Vec<f64>,
    knot_p: Vec<f64>,
    knot_energy: Option<KnotEnergy>,
}

/// After a failed step the VI workspace is replaced by a fresh one (an allocation on the
/// error path only), so that no state of a failed row can reach the next row on the same
/// thread, whatever the failure (vidyn-vi once left a scratch buffer taken on an early
/// error return; `a_rejected_guess_leaves_the_workspace_usable` in `tests/api/integrator_tests.rs` pins that fix).
trait FreshAfterError {
    fn fresh_after_error<T>(&self, ws: &mut SystemWorkspace, r: Result<T, ViError>) -> Result<T, ViError>;
}

impl FreshAfterError for VariationalIntegrator {
    fn fresh_after_error<T>(&self, ws: &mut SystemWorkspace, r: Result<T, ViError>) -> Result<T, ViError> {
        if r.is_err() {
            ws.vi = VariationalIntegrator::workspace(self);
        }
        r
    }
}

impl DiscreteDynamics for VariationalIntegrator {
    type Workspace = SystemWorkspace;
    type Error = ViError;

    fn name(&self) -> &'static str {
        "VariationalIntegrator"
    }
    fn nq(&self) -> usize {
        VariationalIntegrator::nq(self)
    }
    fn nv(&self) -> usize {
        self.n()
    }
    fn nu(&self) -> usize {
        self.n()
    }
    fn workspace(&self) -> SystemWorkspace {
        let (n, nq) = (self.n(), VariationalIntegrator::nq(self));
        SystemWorkspace {
            vi: VariationalIntegrator::workspace(self),
            second: None,
            a: DMatrix::zeros(2 * n, 2 * n),
            b: DMatrix::zeros(2 * n, n),
            q_next: vec![0.0; nq],
            p_next: vec![0.0; n],
            knot_step: 0,
            knot_q: vec![0.0; nq],
            knot_p: vec![0.0; n],
            knot_energy: None,
        }
    }

    fn momentum(&self, ws: &mut SystemWorkspace, q: &[f64], v: &[f64], p: &mut [f64]) -> Result<(), BatchError<ViError>> {
        Ok(VariationalIntegrator::momentum(self, &mut ws.vi, q, v, p)?)
    }

    /// [`crate::predict_next`], as [`crate::rollout`] does.
    fn warm_start(&self, past: &[f64], stride: usize, guess: &mut [f64]) -> bool {
        crate::predict_next(past, stride, guess)
    }

    fn step(&self, ws: &mut SystemWorkspace, at: StepInput<'_>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize, BatchError<ViError>> {
        let r = VariationalIntegrator::step(self, &mut ws.vi, at, q_next, p_next);
        Ok(self.fresh_after_error(ws, r)?)
    }

    /// [`VariationalIntegrator::check_step_energy`]; the energy of `(q_k, p_k)` is the one the
    /// previous check computed for it, when it was that step's end.
    fn check_step(&self, ws: &mut SystemWorkspace, at: StepInput<'_>, q_next: &[f64], p_next: &[f64]) -> Result<(), BatchError<ViError>> {
        let StepInput { k: step, q, p, u, .. } = at;
        if !self.checks_energy() {
            return Ok(());
        }
        let before = match ws.knot_energy.take() {
            Some(e) if ws.knot_q == q && ws.knot_p == p && self.same_constraints(ws.knot_step, step) => e,
            _ => self.knot_energy(&mut ws.vi, step, q, p)?,
        };
        let after = self.knot_energy(&mut ws.vi, step, q_next, p_next)?;
        ws.knot_step = step;
        ws.knot_q.copy_from_slice(q_next);
        ws.knot_p.copy_from_slice(p_next);
        ws.knot_energy = Some(after);
        Ok(self.check_step_energy(step, before, after, q, q_next, u)?)
    }

    fn linearize(&self, ws: &mut SystemWorkspace, at: StepInput<'_>, a: &mut [f64], b: &mut [f64]) -> Result<usize, BatchError<ViError>> {
        let r = VariationalIntegrator::linearize(self, &mut ws.vi, at, &mut ws.a, &mut ws.b, &mut ws.q_next, &mut ws.p_next);
        let it = self.fresh_after_error(ws, r)?;
        matrix_to_rows(&ws.a, a);
        matrix_to_rows(&ws.b, b);
        Ok(it)
    }

    /// [`VariationalIntegrator::linearize`] writes nalgebra matrices itself.
    fn linearize_matrices(
        &self,
        ws: &mut SystemWorkspace,
        at: StepInput<'_>,
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) -> Result<usize, BatchError<ViError>> {
        let r = VariationalIntegrator::linearize(self, &mut ws.vi, at, a, b, &mut ws.q_next, &mut ws.p_next);
        Ok(self.fresh_after_error(ws, r)?)
    }

    /// Unless the integrator has kinematic joints, body wrenches, or holonomic constraints on
    /// a model with composite joints (module `second_order`; exact, on fixed charts with and
    /// without constraints and on the Lie group,
    /// [`VariationalIntegrator::linearize_second_order_contracted`]).
    fn has_second_order(&self) -> bool {
        self.second_order_gaps().is_none()
    }

    /// [`VariationalIntegrator::linearize_second_order`]: its tensors are already in this
    /// trait's C-order layouts (`fxu` `[i, j, k]`: `j` state, `k` control).
    fn linearize_second_order(&self, ws: &mut SystemWorkspace, at: StepInput<'_>, out: SecondOrderTerms<'_>) -> Result<(), BatchError<ViError>> {
        let so = ws.second.get_or_insert_with(|| self.second_order_workspace());
        match VariationalIntegrator::linearize_second_order(self, so, at) {
            Ok(d) => {
                if let Some((a, b)) = out.first {
                    matrix_to_rows(&d.a, a);
                    matrix_to_rows(&d.b, b);
                }
                out.fxx.copy_from_slice(&d.fxx);
                out.fxu.copy_from_slice(&d.fxu);
                out.fuu.copy_from_slice(&d.fuu);
                Ok(())
            }
            Err(e) => {
                ws.second = None; // fresh scratch after a failure, as for the first-order path
                Err(e.into())
            }
        }
    }

    /// [`VariationalIntegrator::linearize_second_order_contracted`] (one adjoint solve, no
    /// tensor is formed): `xx` `(2n, 2n)`, `xu` `(2n, n)`, `uu` `(n, n)`, C order.
    fn linearize_second_order_contracted(
        &self,
        ws: &mut SystemWorkspace,
        at: StepInput<'_>,
        lam: &[f64],
        out: ContractedTerms<'_>,
    ) -> Result<(), BatchError<ViError>> {
        let so = ws.second.get_or_insert_with(|| self.second_order_workspace());
        match VariationalIntegrator::linearize_second_order_contracted(self, so, at, lam) {
            Ok(d) => {
                if let Some((a, b)) = out.first {
                    matrix_to_rows(&d.a, a);
                    matrix_to_rows(&d.b, b);
                }
                matrix_to_rows(&d.hxx, out.xx);
                matrix_to_rows(&d.hxu, out.xu);
                matrix_to_rows(&d.huu, out.uu);
                Ok(())
            }
            Err(e) => {
                ws.second = None;
                Err(e.into())
            }
        }
    }
}
