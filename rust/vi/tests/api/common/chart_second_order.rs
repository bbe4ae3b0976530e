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
