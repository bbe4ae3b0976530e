//! The dense reference path: form the `sn × sn` DEL Jacobian `J = [H(ϱ, γ)]` from the O(n²)
//! energy Hessians (Algorithms 2 and 3 and the chain rule of module `del`) and factor it by
//! LU, O(s³ n³). **Not used by the integrator**: it exists only as the oracle against which
//! the O(n) Newton direction (Algorithms B.1/B.2) and the O(n²) linearisation are tested, and
//! as the baseline of the scaling benchmark (`benches/benches/vi_scaling.rs`).

use crate::del::assemble_jacobian;
use crate::dense::{lu_factor, lu_solve};
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use nalgebra::DMatrix;

/// Scratch of the dense path (allocated once; the energy Hessians it needs are allocated in
/// the [`ViWorkspace`] on first use).
#[derive(Clone, Debug)]
pub struct DenseOracle {
    /// `(s·n, s·n)` Jacobian, then its LU factors.
    jacobian: DMatrix<f64>,
    pivots: Vec<usize>,
    /// `(s·n, 3n)` right-hand sides / solutions of the linearisation.
    sensitivities: DMatrix<f64>,
    /// `(n, n)` scratch block.
    block: DMatrix<f64>,
    residual: Vec<f64>,
}

impl DenseOracle {
    #[must_use]
    pub fn new(vi: &VariationalIntegrator) -> Self {
        let (n, s) = (vi.n(), vi.scheme().s);
        Self { jacobian: DMatrix::zeros(s * n, s * n), pivots: vec![0; s * n], sensitivities: DMatrix::zeros(s * n, 3 * n), block: DMatrix::zeros(n, n), residual: vec![0.0; s * n] }
    }

    /// The dense DEL Jacobian `J = ∂r/∂z` at unknowns `z` (`(s·n, s·n)`, rows `ϱ·n + i`,
    /// columns `(γ−1)·n + j`).
    pub fn jacobian(&mut self, vi: &VariationalIntegrator, ws: &mut ViWorkspace, q: &[f64], z: &[f64]) -> Result<DMatrix<f64>> {
        vi.check_unknowns(z)?;
        ws.points.set(vi.model(), vi.scheme(), vi.dt(), q, z, vi.body_wrenches());
        ws.points.update_hessians(vi.model());
        assemble_jacobian(&ws.points, vi.scheme(), vi.dt(), vi.forces(), vi.n(), &mut self.jacobian);
        Ok(self.jacobian.clone())
    }

    /// `δz = −J⁻¹ r` by forming `J` and factoring it (LU with partial pivoting), O(s³ n³).
    pub fn newton_direction(&mut self, vi: &VariationalIntegrator, ws: &mut ViWorkspace, step: usize, q: &[f64], p: &[f64], u: &[f64], z: &[f64], dz: &mut [f64]) -> Result<()> {
        vi.check_inputs(q, p, u)?;
        vi.check_unknowns(z)?;
        let (sc, dt, n) = (vi.scheme(), vi.dt(), vi.n());
        ws.points.set(vi.model(), sc, dt, q, z, vi.body_wrenches());
        vi.fill_residual(ws, p, u, &mut self.residual);
        ws.points.update_hessians(vi.model());
        assemble_jacobian(&ws.points, sc, dt, vi.forces(), n, &mut self.jacobian);
        if !lu_factor(&mut self.jacobian, &mut self.pivots) {
            return Err(ViError::SingularJacobian { step });
        }
        lu_solve(&self.jacobian, &self.pivots, &mut self.residual);
        for (d, r) in dz.iter_mut().zip(&self.residual) {
            *d = -r;
        }
        Ok(())
    }

    /// The linearisation of [`VariationalIntegrator::linearize`] by the dense path: one LU of
    /// `J` for the `3n` right-hand sides (formed from the DEL blocks `H(ϱ, 0)`), and
    /// `dp_{k+1} = H(s, 0) δq_k + Σ_γ H(s, γ) dz_γ` as dense products, O(s³ n³).
    pub fn linearize(&mut self, vi: &VariationalIntegrator, ws: &mut ViWorkspace, step: usize, q: &[f64], p: &[f64], u: &[f64], guess: Option<&[f64]>, a: &mut DMatrix<f64>, b: &mut DMatrix<f64>, q_next: &mut [f64], p_next: &mut [f64]) -> Result<usize> {
        let iterations = vi.step(ws, step, q, p, u, guess, q_next, p_next)?;
        let (n, s, dt) = (vi.n(), vi.scheme().s, vi.dt());
        let (sc, forces) = (vi.scheme(), vi.forces());
        let pts = &mut ws.points;
        pts.set(vi.model(), sc, dt, q, &ws.z, vi.body_wrenches());
        pts.update_hessians(vi.model());
        assemble_jacobian(pts, sc, dt, forces, n, &mut self.jacobian);
        if !lu_factor(&mut self.jacobian, &mut self.pivots) {
            return Err(ViError::SingularJacobian { step });
        }
        // right-hand sides ∂R/∂x for x = (q_k, p_k, u): columns [0, n), [n, 2n), [2n, 3n)
        let rhs = &mut self.sensitivities;
        rhs.fill(0.0);
        for rho in 0..s {
            let mut blk = rhs.view_mut((rho * n, 0), (n, n));
            pts.del_block(sc, dt, forces, rho, 0, &mut blk);
            for i in 0..n {
                rhs[(rho * n + i, 2 * n + i)] = sc.control_weight(rho) * dt;
            }
        }
        for i in 0..n {
            rhs[(i, n + i)] = 1.0;
        }
        for c in 0..3 * n {
            let mut col = rhs.column_mut(c);
            lu_solve(&self.jacobian, &self.pivots, col.as_mut_slice());
            col.neg_mut();
        }
        // q_{k+1} = Σ_α endpoint[α] q^α (= z_s for Lobatto schemes)
        for r in 0..n {
            for c in 0..3 * n {
                let own = if c == r { sc.endpoint(0) } else { 0.0 };
                let v = own + (1..=s).map(|g| sc.endpoint(g) * rhs[((g - 1) * n + r, c)]).sum::<f64>();
                if c < 2 * n {
                    a[(r, c)] = v;
                } else {
                    b[(r, c - 2 * n)] = v;
                }
            }
        }
        // p_{k+1} = P(q^0, …, q^s, u)
        for r in 0..n {
            for c in 0..2 * n {
                a[(n + r, c)] = 0.0;
            }
            for c in 0..n {
                b[(n + r, c)] = if r == c { sc.control_weight(s) * dt } else { 0.0 };
            }
        }
        let blk = &mut self.block;
        pts.del_block(sc, dt, forces, s, 0, &mut blk.view_mut((0, 0), (n, n)));
        for r in 0..n {
            for c in 0..n {
                a[(n + r, c)] += blk[(r, c)];
            }
        }
        for gamma in 1..=s {
            pts.del_block(sc, dt, forces, s, gamma, &mut blk.view_mut((0, 0), (n, n)));
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
