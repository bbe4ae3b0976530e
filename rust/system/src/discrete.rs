//! [`DiscreteDynamics`]: what the engine needs from a discrete-time system. The integrators
//! implement it in their own crates (`vidyn_vi::VariationalIntegrator`,
//! `vidyn_maximal::MaximalIntegrator`), so that the engine and the optimisers above drive
//! every integrator through this one interface.
//!
//! # State convention
//! A state is a pair `(q, p)`: `q` has `nq` coordinates on a configuration manifold whose
//! tangent space has dimension `nv`, and `p` (momentum or velocity) has `np` coordinates;
//! a control `u` has `nu`. Linearisations are taken in the tangent state space of dimension
//! `ndx = nv + np` (perturbations of `q` along the manifold, as everywhere in vidyn):
//! `A = ∂x_{k+1}/∂x_k` `(ndx, ndx)`, `B = ∂x_{k+1}/∂u_k` `(ndx, nu)`, written row-major
//! (C order) into caller slices. Second-order terms are tensors `[i, j, k] = ∂²x'_i/∂y_j∂z_k`
//! in C order.
//!
//! The minimal-coordinate VI has `nq = nv = np = nu = n` and `p` the discrete momentum. A
//! maximal-coordinate integrator (poses `nq = 7·bodies`, tangent `nv = 6·bodies`) fits the
//! same trait; so does a plain explicit integrator of ABA with `p = v`.

use crate::error::BatchError;
use nalgebra::DMatrix;

/// Output slices of the full second-order terms of one step, C order:
/// `fxx` `(ndx, ndx, ndx)`, `fxu` `(ndx, ndx, nu)` (`[i, j, k]`: `j` state, `k` control),
/// `fuu` `(ndx, nu, nu)`; and, when the caller wants them too, the first-order terms `A`
/// `(ndx, ndx)` and `B` `(ndx, nu)` of the same step (computed on the way).
pub struct SecondOrderTerms<'a> {
    pub first: Option<(&'a mut [f64], &'a mut [f64])>,
    pub fxx: &'a mut [f64],
    pub fxu: &'a mut [f64],
    pub fuu: &'a mut [f64],
}

/// Output slices of the second-order terms contracted with a co-state `λ` `(ndx,)`
/// (`Σ_i λ_i ∂²x'_i`), C order: `xx` `(ndx, ndx)`, `xu` `(ndx, nu)`, `uu` `(nu, nu)`; and
/// optionally `A`, `B` as in [`SecondOrderTerms`].
pub struct ContractedTerms<'a> {
    pub first: Option<(&'a mut [f64], &'a mut [f64])>,
    pub xx: &'a mut [f64],
    pub xu: &'a mut [f64],
    pub uu: &'a mut [f64],
}

/// Where one step starts: its index `k` (it labels errors, and selects the step's phase when
/// a system changes with time), the state `(q_k, p_k)`, the control `u_k`, for an implicit
/// step an optional estimate `guess` of `q_{k+1}` where its solver starts, and whether the
/// step `continues` the previous call on the same workspace (see [`StepInput::continuing`]).
#[derive(Clone, Copy, Debug)]
pub struct StepInput<'a> {
    pub k: usize,
    pub q: &'a [f64],
    pub p: &'a [f64],
    pub u: &'a [f64],
    pub guess: Option<&'a [f64]>,
    pub continues: bool,
}

impl<'a> StepInput<'a> {
    /// Step `k` from `(q, p)` under `u`, without an estimate of its end.
    #[must_use]
    pub fn new(k: usize, q: &'a [f64], p: &'a [f64], u: &'a [f64]) -> Self {
        Self { k, q, p, u, guess: None, continues: false }
    }

    /// The same step with its solver started at `guess` (`None`: the system's own start).
    #[must_use]
    pub fn with_guess(self, guess: Option<&'a [f64]>) -> Self {
        Self { guess, ..self }
    }

    /// The same step marked as the next step of a simulation whose previous step ran on the
    /// same workspace and ended at this step's `(q, p)`: a system may then carry over what
    /// that step left (a maximal integrator's knots and multipliers, which joint coordinates
    /// alone do not determine to the last bit). The result is then a function of the
    /// inputs and of that previous step; without the mark, of the inputs alone.
    #[must_use]
    pub fn continuing(self) -> Self {
        Self { continues: true, ..self }
    }
}

/// A discrete-time system `x_{k+1} = f(x_k, u_k)` with `x = (q, p)` (see the module docs).
///
/// Implementations must be deterministic (the same inputs give the same bits, whatever the
/// workspace held before): the engine's bit-for-bit guarantee rests on it.
pub trait DiscreteDynamics: Sync {
    /// Per-thread scratch, created once per thread by [`DiscreteDynamics::workspace`].
    type Workspace: Send;
    /// The system's own error (shapes, NaN, convergence …).
    type Error: std::error::Error + Clone + Send + Sync + 'static;

    /// Name used in error messages.
    fn name(&self) -> &'static str;
    /// Configuration coordinates.
    fn nq(&self) -> usize;
    /// Dimension of the configuration's tangent space.
    fn nv(&self) -> usize;
    /// Coordinates of the momentum (or velocity) part of the state.
    fn np(&self) -> usize {
        self.nv()
    }
    /// Controls per step.
    fn nu(&self) -> usize;
    /// Tangent state dimension `nv + np` (rows and columns of `A`).
    fn ndx(&self) -> usize {
        self.nv() + self.np()
    }
    /// Fresh scratch.
    fn workspace(&self) -> Self::Workspace;

    /// The momentum part `p` `(np,)` of the state at configuration `q` moving with velocity
    /// `v` `(nv,)` (the Legendre transform for a VI; a copy when `p = v`).
    ///
    /// # Errors
    /// Invalid inputs.
    fn momentum(&self, ws: &mut Self::Workspace, q: &[f64], v: &[f64], p: &mut [f64]) -> Result<(), BatchError<Self::Error>>;

    /// Writes an estimate of `q_{k+1}` from the configurations so far into `guess` for an
    /// implicit step, and returns `true`; the default (no estimate) returns `false`. `past`
    /// holds rows `0..=k` of `stride` entries whose first `nq` are `q_0, …, q_k` (the engine's
    /// configurations, `stride = nq`, or an optimiser's states `(q, p)`).
    fn warm_start(&self, past: &[f64], stride: usize, guess: &mut [f64]) -> bool {
        let _ = (past, stride, guess);
        false
    }

    /// One step `(q_k, p_k, u_k) ↦ (q_{k+1}, p_{k+1})` from `at` ([`StepInput`]). Returns the
    /// number of solver iterations (0 for explicit systems).
    ///
    /// # Errors
    /// Invalid inputs, or a solver that fails.
    fn step(&self, ws: &mut Self::Workspace, at: StepInput<'_>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize, BatchError<Self::Error>>;

    /// Checks that the step just taken from `at`, `(q_k, p_k, u_k) ↦ (q_{k+1}, p_{k+1})`, is a
    /// genuine step of the motion (an implicit step's solver may converge to another solution
    /// of its equations). Rollouts call it after every step; the default accepts every step.
    ///
    /// # Errors
    /// A step that is not genuine.
    fn check_step(&self, ws: &mut Self::Workspace, at: StepInput<'_>, q_next: &[f64], p_next: &[f64]) -> Result<(), BatchError<Self::Error>> {
        let _ = (ws, at, q_next, p_next);
        Ok(())
    }

    /// First-order linearisation of the step from `at`: `a` `(ndx, ndx)` and `b` `(ndx, nu)`,
    /// C order (the engine passes the stored `q_{k+1}` as `at.guess`). Returns the solver
    /// iterations.
    ///
    /// # Errors
    /// As [`DiscreteDynamics::step`].
    fn linearize(&self, ws: &mut Self::Workspace, at: StepInput<'_>, a: &mut [f64], b: &mut [f64]) -> Result<usize, BatchError<Self::Error>>;

    /// [`DiscreteDynamics::linearize`] into nalgebra's (column-major) matrices `a`
    /// `(ndx, ndx)` and `b` `(ndx, nu)`, for callers that keep them so (the optimisers): the
    /// same numbers without a layout round trip when the system overrides it; the default
    /// linearises into C order and copies (allocating two buffers).
    ///
    /// # Errors
    /// As [`DiscreteDynamics::linearize`].
    fn linearize_matrices(
        &self,
        ws: &mut Self::Workspace,
        at: StepInput<'_>,
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) -> Result<usize, BatchError<Self::Error>> {
        let (ndx, nu) = (self.ndx(), self.nu());
        let (mut rows_a, mut rows_b) = (vec![0.0; ndx * ndx], vec![0.0; ndx * nu]);
        let iterations = self.linearize(ws, at, &mut rows_a, &mut rows_b)?;
        *a = DMatrix::from_row_slice(ndx, ndx, &rows_a);
        *b = DMatrix::from_row_slice(ndx, nu, &rows_b);
        Ok(iterations)
    }

    /// Whether the second-order terms below are implemented for this system as configured
    /// (the optimisers' full DDP needs them). The default: no.
    fn has_second_order(&self) -> bool {
        false
    }

    /// Full second-order terms of the step (see [`SecondOrderTerms`]). Optional: the default
    /// reports [`BatchError::Unsupported`].
    ///
    /// # Errors
    /// [`BatchError::Unsupported`] unless implemented; otherwise as [`DiscreteDynamics::step`].
    fn linearize_second_order(&self, ws: &mut Self::Workspace, at: StepInput<'_>, out: SecondOrderTerms<'_>) -> Result<(), BatchError<Self::Error>> {
        let _ = (ws, at, out);
        Err(BatchError::Unsupported { system: self.name(), method: "linearize_second_order" })
    }

    /// Second-order terms contracted with `lam` `(ndx,)` (see [`ContractedTerms`]), the
    /// product DDP needs, ideally without forming the tensors. Optional: the default reports
    /// [`BatchError::Unsupported`].
    ///
    /// # Errors
    /// [`BatchError::Unsupported`] unless implemented; otherwise as [`DiscreteDynamics::step`].
    fn linearize_second_order_contracted(
        &self,
        ws: &mut Self::Workspace,
        at: StepInput<'_>,
        lam: &[f64],
        out: ContractedTerms<'_>,
    ) -> Result<(), BatchError<Self::Error>> {
        let _ = (ws, at, lam, out);
        Err(BatchError::Unsupported { system: self.name(), method: "linearize_second_order_contracted" })
    }
}

/// Copies a nalgebra (column-major) matrix into a C-order slice (entry `[i, j]` at
/// `i·ncols + j`), the layout of every output of this interface.
#[inline]
pub fn matrix_to_rows(m: &DMatrix<f64>, out: &mut [f64]) {
    let c = m.ncols();
    for (i, row) in out.chunks_exact_mut(c.max(1)).enumerate().take(m.nrows()) {
        for (j, x) in row.iter_mut().enumerate() {
            *x = m[(i, j)];
        }
    }
}
