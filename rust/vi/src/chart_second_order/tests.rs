//! `GroupSecondOrder`, the second order on the Lie group by differences of the exact first
//! order: against the exact second order on fixed charts, and the symmetry its transport gives.

use crate::chart_second_order::GroupSecondOrder;
use crate::test_common::chart_second_order::*;
use crate::*;
use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::random_tree;
use vidyn_rbd::Joint;

fn random(rng: &mut ChaCha8Rng, n: usize, scale: f64) -> Vec<f64> {
    (0..n).map(|_| scale * rng.random_range(-1.0..1.0)).collect()
}

/// `(H + Hᵀ)/2` of a raw `3n × 3n` contraction.
fn symmetric(h: &DMatrix<f64>) -> DMatrix<f64> {
    (h + h.transpose()) * 0.5
}

/// The differencing itself, run on fixed-chart (1-dof) models, where the exact second order
/// (module `second_order`) is the oracle: this measures the method's error. The transport
/// matrices are 1 there, so this checks the step sizes and the tensor's layout; the test on
/// the group below checks the transport. Measured worst `|differenced − exact|` relative to
/// `(1 + max|H|) Σ|λ_i|`: 2.8e-9; asserted below 1e-7 (the error model of the module docs).
#[test]
fn differenced_second_order_matches_the_exact_one_on_fixed_charts() {
    let kinds: Vec<Joint> = Joint::examples().into_iter().filter(|j| j.nv() == 1).collect();
    let mut worst = 0.0_f64;
    for (seed, scheme) in schemes().into_iter().enumerate() {
        let model = Arc::new(random_tree(6, 11 + seed as u64, &kinds));
        let n = model.nv;
        let mut rng = ChaCha8Rng::seed_from_u64(seed as u64);
        let forces = JointForces {
            damping: random(&mut rng, n, 0.5).iter().map(|x| x.abs()).collect(),
            stiffness: random(&mut rng, n, 3.0).iter().map(|x| x.abs()).collect(),
            rest: random(&mut rng, n, 0.5),
        };
        let vi = VariationalIntegrator::new(model, scheme, 0.02, Some(forces)).unwrap().with_newton(1e-15, 60).unwrap();
        let (q, v, u, lam) = (random(&mut rng, n, 1.0), random(&mut rng, n, 1.5), random(&mut rng, n, 2.0), random(&mut rng, 2 * n, 1.0));
        let mut p = vec![0.0; n];
        vi.momentum(&mut vi.workspace(), &q, &v, &mut p).unwrap();
        let mut so = vi.second_order_workspace();
        let mut out = vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &lam).unwrap().clone();
        let exact = assembled(&out);
        let mut group = GroupSecondOrder::new(&vi);
        group.prepare(StepInput::new(0, &q, &p, &u), &mut out).unwrap();
        let mut raw = DMatrix::zeros(3 * n, 3 * n);
        group.contract(&lam, &mut raw);
        let diff = (symmetric(&raw) - &exact).amax();
        let scale = (1.0 + exact.amax()) * lam.iter().map(|x| x.abs()).sum::<f64>();
        worst = worst.max(diff / scale);
        assert!(diff < 1e-7 * scale, "s = {}: {diff:.3e} against scale {scale:.3e}", vi.scheme().s);
    }
    eprintln!("differenced vs exact second order on fixed charts: worst {worst:.2e} relative");
}

/// What the transport of the tangent coordinates does (module docs): at `y = 0` the first
/// derivatives of `E` are brackets, antisymmetric in the two inputs (the quadratic term of
/// `log(exp a exp b)` is `½[a, b]`), so they cancel in `(H + Hᵀ)/2` and the comparison above
/// cannot see them; they decide whether the *differenced* Hessian is symmetric. With the
/// transport the raw contraction is symmetric to the differences' error (measured 1.8e-8
/// relative to `(1 + max|H|) Σ|λ_i|` on the floating tree, every scheme; asserted below
/// 1e-6); without it the q blocks are off by `½ λᵀ ad(A a) A b`, measured 8e-2 relative.
#[test]
fn the_transport_makes_the_differenced_hessian_symmetric() {
    let TreeInputs { model, q0, v0, u, lam } = floating_tree_inputs();
    let n = model.nv;
    let mut worst = 0.0_f64;
    for scheme in schemes() {
        let vi = VariationalIntegrator::new(model.clone(), scheme.clone(), 0.02, None).unwrap();
        let mut p0 = vec![0.0; n];
        vi.momentum(&mut vi.workspace(), &q0, &v0, &mut p0).unwrap();
        let mut out = vi.second_order_workspace();
        let mut out = vi.prepare_second_order(&mut out, StepInput::new(0, &q0, &p0, &u)).unwrap().clone();
        let mut group = GroupSecondOrder::new(&vi);
        group.prepare(StepInput::new(0, &q0, &p0, &u), &mut out).unwrap();
        let mut raw = DMatrix::zeros(3 * n, 3 * n);
        group.contract(&lam, &mut raw);
        let asymmetry = (&raw - raw.transpose()).amax();
        let bound = (1.0 + raw.amax()) * lam.iter().map(|x| x.abs()).sum::<f64>();
        worst = worst.max(asymmetry / bound);
        assert!(asymmetry < 1e-6 * bound, "s = {}: asymmetry {asymmetry:.3e} (bound {bound:.3e})", scheme.s);
    }
    eprintln!("raw differenced Hessian on the group: asymmetry {worst:.2e} relative");
}
