//! `GroupSecondOrder`'s first order: its fixed-chart formulation reproduces the exact
//! linearisation.

use crate::test_common::chart_second_order::*;
use crate::*;
use nalgebra::DMatrix;

/// `A`, `B` of the second order's fixed-chart formulation (`F W`, the first order of its
/// implicit-function theorem) are those of [`VariationalIntegrator::linearize`] (module
/// `chart_linearize`, derived differently: the `π̃` correction instead of the rearranged first
/// row), every scheme: measured agreement below 1e-13 relative, asserted 1e-11.
#[test]
fn the_fixed_chart_formulation_reproduces_the_linearisation() {
    let TreeInputs { model, q0, v0, u, .. } = floating_tree_inputs();
    let (n, nq) = (model.nv, model.nq);
    for scheme in schemes() {
        let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, None).unwrap();
        let mut p0 = vec![0.0; n];
        vi.momentum(&mut vi.workspace(), &q0, &v0, &mut p0).unwrap();
        let mut so = vi.second_order_workspace();
        let out = vi.prepare_second_order(&mut so, StepInput::new(0, &q0, &p0, &u)).unwrap().clone();
        let (mut a, mut b, mut q1, mut p1) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), vec![0.0; nq], vec![0.0; n]);
        vi.linearize(&mut vi.workspace(), StepInput::new(0, &q0, &p0, &u), &mut a, &mut b, &mut q1, &mut p1).unwrap();
        let err = (&out.a - &a).amax().max((&out.b - &b).amax()) / (1.0 + a.amax().max(b.amax()));
        assert!(err < 1e-11, "s = {}: {err:.3e}", scheme.s);
        assert_eq!((q1, p1), (out.q_next.clone(), out.p_next.clone()), "the same step");
    }
}
