//! Helpers of the second order on the Lie group (`chart_second_order_tests`).

use super::lie_group::{floating_tree, start};
use crate::*;
use nalgebra::DMatrix;
use std::sync::Arc;
use vidyn_rbd::Model;

pub(crate) fn schemes() -> Vec<Scheme> {
    vec![Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()]
}

/// `[hxx hxu; hxuᵀ huu]` of a contracted result, `3n × 3n`.
pub(crate) fn assembled(d: &FlowDerivatives) -> DMatrix<f64> {
    let (m, n) = (d.hxx.nrows(), d.huu.nrows());
    let mut h = DMatrix::zeros(m + n, m + n);
    h.view_mut((0, 0), (m, m)).copy_from(&d.hxx);
    h.view_mut((0, m), (m, n)).copy_from(&d.hxu);
    h.view_mut((m, 0), (n, m)).copy_from(&d.hxu.transpose());
    h.view_mut((m, m), (n, n)).copy_from(&d.huu);
    h
}

/// The floating tree with gravity at `q0`, moving (`v0`), forced (`u`), and a co-state `lam`.
pub(crate) struct TreeInputs {
    pub(crate) model: Arc<Model>,
    pub(crate) q0: Vec<f64>,
    pub(crate) v0: [f64; 13],
    pub(crate) u: Vec<f64>,
    pub(crate) lam: Vec<f64>,
}

pub(crate) fn floating_tree_inputs() -> TreeInputs {
    let model = Arc::new(floating_tree(true));
    let n = model.nv;
    let q0 = start(&model);
    let v0 = [0.3, -0.1, 0.2, 0.5, -0.4, 0.8, 1.0, 2.0, -1.0, 0.5, 0.2, -0.3, 0.7];
    let u = (0..n).map(|i| 0.3 * ((i as f64) * 1.3).sin()).collect();
    let lam = (0..2 * n).map(|i| ((i as f64) * 0.77).cos()).collect();
    TreeInputs { model, q0, v0, u, lam }
}

/// `DF(y)` of the map `F(y) = f(x̄ ⊕ (δq, δp), ū + δu) ⊖ x̄'` at `y = h e_j` (`2n × 3n`), from
/// the exact first-order linearisation of the moved step, carried to the tangent coordinates
/// at `x̄` and `x̄'`: `DF(y) = diag(E(q̄', q'), 1) [A(y) B(y)] diag(E(q̄, q(y))⁻¹, 1, 1)` with
/// `E(q₀, q₁) = ∂(q₁ ⊖ q₀)/∂v` ([`vidyn_rbd::Joint::difference_jacobian`]).
fn moved_jacobian(vi: &VariationalIntegrator, k: usize, at: (&[f64], &[f64], &[f64]), q_next: &[f64], j: usize, h: f64) -> DMatrix<f64> {
    let (q, p, u) = at;
    let (n, model) = (vi.n(), vi.model());
    let (mut dq, mut p2, mut u2) = (vec![0.0; n], p.to_vec(), u.to_vec());
    match j {
        j if j < n => dq[j] = h,
        j if j < 2 * n => p2[j - n] += h,
        _ => u2[j - 2 * n] += h,
    }
    let q2 = vidyn_rbd::integrate(model, q, &dq).unwrap();
    let (mut a, mut b, mut q3, mut p3) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), vec![0.0; vi.nq()], vec![0.0; n]);
    vi.linearize(&mut vi.workspace(), StepInput::new(k, &q2, &p2, &u2).with_guess(Some(q_next)), &mut a, &mut b, &mut q3, &mut p3).unwrap();
    let mut jac = DMatrix::zeros(2 * n, 3 * n);
    jac.columns_mut(0, 2 * n).copy_from(&a);
    jac.columns_mut(2 * n, n).copy_from(&b);
    for (i, joint) in model.joints.iter().enumerate() {
        let (iq, iv, d, dn) = (model.idx_q[i], model.idx_v[i], joint.nv(), joint.nq());
        if d == 1 {
            continue;
        }
        let e_in = joint.difference_jacobian(&q[iq..iq + dn], &q2[iq..iq + dn]).try_inverse().unwrap();
        let e_out = joint.difference_jacobian(&q_next[iq..iq + dn], &q3[iq..iq + dn]);
        let cols = jac.columns(iv, d) * e_in.view((0, 0), (d, d));
        jac.columns_mut(iv, d).copy_from(&cols);
        let rows = e_out.view((0, 0), (d, d)) * jac.rows(iv, d);
        jac.rows_mut(iv, d).copy_from(&rows);
    }
    jac
}

/// `∇²(λᵀF)(0)` (`3n × 3n`) of step `k` by central differences of the exact first order ([`moved_jacobian`])
/// with steps `h` on configurations, `h·max(1, |p̄|∞)` on momenta and `h·max(1, |ū|∞)` on
/// controls, Richardson-extrapolated from `h` and `2h` (truncation O(h⁴)); `vi` should run
/// Newton at its round-off floor (a solver error enters divided by `h`).
pub(crate) fn differenced_hessian(vi: &VariationalIntegrator, k: usize, at: (&[f64], &[f64], &[f64]), q_next: &[f64], lam: &[f64], h: f64) -> DMatrix<f64> {
    let n = vi.n();
    let scale = |x: &[f64]| x.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
    let mut out = DMatrix::zeros(3 * n, 3 * n);
    for j in 0..3 * n {
        let hj = h * match j {
            j if j < n => 1.0,
            j if j < 2 * n => scale(at.1),
            _ => scale(at.2),
        };
        let d = |step: f64| (moved_jacobian(vi, k, at, q_next, j, step) - moved_jacobian(vi, k, at, q_next, j, -step)) / (2.0 * step);
        let column = (d(hj) * 4.0 - d(2.0 * hj)) / 3.0; // ∂DF/∂y_j, (2n × 3n)
        let row = column.transpose() * nalgebra::DVector::from_column_slice(lam);
        out.row_mut(j).copy_from(&row.transpose());
    }
    out
}

/// The integrator of the floating tree with damping and a spring on its hinge, Newton at its
/// round-off floor, and the momentum of `v0` at `q0`.
pub(crate) fn damped_tree_at_its_floor(model: &Arc<Model>, scheme: Scheme, q0: &[f64], v0: &[f64]) -> (VariationalIntegrator, Vec<f64>) {
    let n = model.nv;
    let mut forces = JointForces::none(n);
    forces.damping[6] = 0.2;
    forces.stiffness[6] = 1.5;
    forces.rest[6] = 0.3;
    let vi = VariationalIntegrator::new(model.clone(), scheme, 0.02, Some(forces)).unwrap().with_newton(1e-15, 60).unwrap();
    let mut p0 = vec![0.0; n];
    vi.momentum(&mut vi.workspace(), q0, v0, &mut p0).unwrap();
    (vi, p0)
}
