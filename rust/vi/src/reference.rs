//! The dense reference path (module `dense_step`) as an oracle: the dense DEL Jacobian, the
//! Newton direction by its LU and the dense linearisation, whatever path the integrator itself
//! takes. The O(n) Newton direction (Algorithms B.1/B.2) and the O(n²) linearisation are
//! tested against it, and the scaling benchmark (`benches/src/bin/vi_scaling.rs`) times it.

use crate::dense_step::DenseStep;
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use nalgebra::DMatrix;
use vidyn_system::StepInput;

/// The dense path of the integrator `vi` with its scratch (allocated once; the energy
/// Hessians it needs are allocated in the [`ViWorkspace`] on first use).
#[derive(Clone, Debug)]
pub struct DenseOracle<'a> {
    vi: &'a VariationalIntegrator,
    dense: DenseStep,
    residual: Vec<f64>,
}

impl<'a> DenseOracle<'a> {
    #[must_use]
    pub fn new(vi: &'a VariationalIntegrator) -> Self {
        let (n, s) = (vi.n(), vi.scheme().s);
        Self { vi, dense: DenseStep::new(n, s), residual: vec![0.0; s * n] }
    }

    /// The dense DEL Jacobian `J = ∂r/∂z` at unknowns `z` (`(s·n, s·n)`, rows `ϱ·n + i`,
    /// columns `(γ−1)·n + j`).
    pub fn jacobian(&mut self, ws: &mut ViWorkspace, q: &[f64], z: &[f64]) -> Result<DMatrix<f64>> {
        let vi = self.vi;
        vi.check_unknowns(z)?;
        ws.points.set(vi.model(), vi.scheme(), vi.dt(), q, z, vi.body_wrenches());
        ws.points.update_hessians(vi.model());
        let n = vi.n();
        let mut jac = DMatrix::zeros(vi.scheme().s * n, vi.scheme().s * n);
        crate::del::assemble_jacobian(&ws.points, vi.scheme(), vi.dt(), vi.forces(), n, &mut jac);
        Ok(jac)
    }

    /// `δz = −J⁻¹ r` by forming `J` and factoring it (LU with partial pivoting), O(s³ n³).
    pub fn newton_direction(&mut self, ws: &mut ViWorkspace, at: StepInput<'_>, z: &[f64], dz: &mut [f64]) -> Result<()> {
        let (vi, StepInput { k: step, q, p, u, .. }) = (self.vi, at);
        vi.check_inputs(q, p, u)?;
        vi.check_unknowns(z)?;
        let (sc, dt) = (vi.scheme(), vi.dt());
        ws.points.set(vi.model(), sc, dt, q, z, vi.body_wrenches());
        vi.fill_residual(ws, p, u, &mut self.residual);
        if !self.dense.factorize(vi.model(), sc, dt, vi.forces(), &mut ws.points) {
            return Err(ViError::SingularJacobian { step });
        }
        self.dense.solve(&mut self.residual);
        for (d, r) in dz.iter_mut().zip(&self.residual) {
            *d = -r;
        }
        Ok(())
    }

    /// The linearisation of [`VariationalIntegrator::linearize`] by the dense path: the step,
    /// then one LU of `J` at its solution for the `3n` right-hand sides
    /// (module `dense_step`), O(s³ n³).
    pub fn linearize(
        &mut self,
        ws: &mut ViWorkspace,
        at: StepInput<'_>,
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
        q_next: &mut [f64],
        p_next: &mut [f64],
    ) -> Result<usize> {
        let (vi, step) = (self.vi, at.k);
        let iterations = vi.step(ws, at, q_next, p_next)?;
        let (sc, dt) = (vi.scheme(), vi.dt());
        // a converged step leaves `ws.points` at its solution
        if !self.dense.factorize(vi.model(), sc, dt, vi.forces(), &mut ws.points) {
            return Err(ViError::SingularJacobian { step });
        }
        self.dense.linearize(&ws.points, sc, dt, vi.forces(), a, b);
        Ok(iterations)
    }
}
