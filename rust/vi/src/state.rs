//! Conversions between the VI's state `(q, p)` and the velocity state `(q, v)`, with their
//! Jacobians, for optimisers that want velocities.
//!
//! The conversion is the continuous Legendre transform `p = M(q) v` (the one
//! [`VariationalIntegrator::momentum`] uses to start a rollout). Its Jacobian is
//! `∂(q, p)/∂(q, v) = [[1, 0], [∂(M v)/∂q, M]]`, and `∂(M v)/∂q` is the energy Hessian
//! `K_q̇q = ∂/∂q (∂K/∂q̇)` at `(q, v)` (`∂K/∂q̇ = M(q) v`) — the same matrix as `∂τ/∂q` of RNEA
//! at `(q, q̇ = 0, q̈ = v)` without gravity, formed with `M` in one O(n·d) pass over the tree
//! ([`vidyn_rbd::mass_matrix_and_derivative`]). On free-flyer, spherical and planar joints
//! `∂/∂q` is along the tangent directions of `model.difference` (the VI's linearisation's),
//! and `q` keeps its `nq` coordinates.
//! The inverse map `v = M(q)⁻¹ p` has `∂v/∂q = −M⁻¹ ∂(M v)/∂q`, `∂v/∂p = M⁻¹`.
//! For a state `x` and a quantity `g`, chain rules apply as usual: e.g. a cost `ℓ(q, v)` has
//! `∂ℓ/∂(q, p) = ∂ℓ/∂(q, v) · ∂(q, v)/∂(q, p)`.

use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use nalgebra::DMatrix;
use vidyn_rbd::{check_configuration, check_tangent};

impl VariationalIntegrator {
    /// `T = ∂(M v)/∂q` at `(q, v)`, with `M(q)` left in `ws.rbd.mass_matrix` (module docs).
    fn mass_and_its_derivative<'w>(&self, ws: &'w mut ViWorkspace, q: &[f64], v: &[f64]) -> Result<&'w DMatrix<f64>> {
        let ViWorkspace { rbd, scratch, .. } = ws;
        scratch.copy_from_slice(v);
        vidyn_rbd::mass_matrix_and_derivative(self.model(), rbd, q, scratch, |_, _| Ok::<(), ViError>(()))
    }

    fn check_jacobian_shape(&self, jac: &DMatrix<f64>) -> Result<()> {
        let m = 2 * self.n();
        if jac.shape() != (m, m) {
            return Err(ViError::InvalidParameter(format!("jacobian is {:?}; expected ({m}, {m})", jac.shape())));
        }
        Ok(())
    }

    /// `(q, v) ↦ (q, p)`, `p = M(q) v`, writing `p` `(n,)` and `jac = ∂(q, p)/∂(q, v)`
    /// `(2n, 2n)` `= [[1, 0], [∂(M v)/∂q, M]]` (module docs). O(n·d) plus the O(n²) copy.
    pub fn momentum_with_jacobian(&self, ws: &mut ViWorkspace, q: &[f64], v: &[f64], p: &mut [f64], jac: &mut DMatrix<f64>) -> Result<()> {
        self.refuse_mimic("the velocity state")?;
        check_configuration(self.model(), q)?;
        check_tangent(self.model(), v, "v")?;
        self.check_jacobian_shape(jac)?;
        let n = self.n();
        let t = self.mass_and_its_derivative(ws, q, v)?;
        jac.fill(0.0);
        for i in 0..n {
            jac[(i, i)] = 1.0;
        }
        jac.view_mut((n, 0), (n, n)).copy_from(t);
        let m = &ws.rbd.mass_matrix;
        for (i, pi) in p.iter_mut().enumerate() {
            *pi = (0..n).map(|j| m[(i, j)] * v[j]).sum();
        }
        jac.view_mut((n, n), (n, n)).copy_from(m);
        // a kinematic joint's slot holds its velocity (`with_kinematic`), as in `momentum`
        for (i, _) in self.kinematic().iter().enumerate().filter(|(_, &k)| k) {
            p[i] = v[i];
            for j in 0..2 * n {
                jac[(n + i, j)] = if j == n + i { 1.0 } else { 0.0 };
            }
        }
        Ok(())
    }

    /// `(q, p) ↦ (q, v)`, `v = M(q)⁻¹ p`, writing `v` `(n,)` and `jac = ∂(q, v)/∂(q, p)`
    /// `(2n, 2n)` `= [[1, 0], [−M⁻¹ ∂(M v)/∂q, M⁻¹]]` (module docs). O(n³) for the product.
    /// Not defined with kinematic joints (their slots mix velocities and momenta).
    pub fn velocity_with_jacobian(&self, ws: &mut ViWorkspace, q: &[f64], p: &[f64], v: &mut [f64], jac: &mut DMatrix<f64>) -> Result<()> {
        self.refuse_mimic("the velocity state")?;
        self.check_jacobian_shape(jac)?;
        if self.kinematic().iter().any(|&k| k) {
            return Err(ViError::InvalidParameter("velocity_with_jacobian is not defined with kinematic joints".into()));
        }
        self.velocity(ws, q, p, v)?;
        let n = self.n();
        jac.fill(0.0);
        // T = ∂(M v)/∂q parked in the upper right block (zero in the result) while M⁻¹ is formed
        jac.view_mut((0, n), (n, n)).copy_from(self.mass_and_its_derivative(ws, q, v)?);
        let minv = vidyn_rbd::minverse(self.model(), &mut ws.rbd, q)?;
        for i in 0..n {
            jac[(i, i)] = 1.0;
        }
        // −M⁻¹ T, column-axpy order (nalgebra's gemm would allocate its packing buffer)
        for j in 0..n {
            for k in 0..n {
                let x = jac[(k, n + j)];
                if x != 0.0 {
                    for i in 0..n {
                        jac[(n + i, j)] -= minv[(i, k)] * x;
                    }
                }
            }
        }
        jac.view_mut((0, n), (n, n)).fill(0.0);
        jac.view_mut((n, n), (n, n)).copy_from(minv);
        Ok(())
    }
}
