//! The raw contraction of the second order (before its symmetrisation) against its rounding
//! bound.

use crate::test_common::second_order::*;
use crate::StepInput;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use vidyn_rbd::builders::{binary_tree, random_tree};

#[test]
fn raw_contraction_is_symmetric_to_rounding() {
    // H = Q_yᵀ C Q_y with C = ∇²_Q φ symmetric: the computed H (before the outputs take the mean
    // of its halves) may differ from Hᵀ only by the rounding of the products, which is
    // elementwise at most γ·(|Q_y|ᵀ|C||Q_y|)_{jk} with γ = 2·(s+1)n·ε for each half (Higham
    // 2002, §3.5). C's entries carry (1/Δt)·M-sized terms that cancel in H, so this bound, not
    // |H|, is the right scale; a transposed block or a wrong chain-rule coefficient gives an
    // asymmetry of the size of H itself.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for model in [Arc::new(random_tree(9, 8, &one_dof())), Arc::new(binary_tree(3))] {
        for (name, sc) in schemes() {
            let (vi, q, p, u) = setup(model.clone(), sc.clone(), 6);
            let n = vi.n();
            let mut so = vi.second_order_workspace();
            vi.second_order_prepare(&mut so, StepInput::new(0, &q, &p, &u).with_guess(Some(&dense_solve(&vi, &q, &p, &u)))).unwrap();
            let lam = random(&mut rng, 2 * n, 1.0);
            vi.second_order_contract(&mut so, &lam).unwrap();
            let h = so.hmat.clone();
            let bound = so.qy.abs().transpose() * so.cmat.abs() * so.qy.abs();
            let gamma = 2.0 * (sc.points() * n) as f64 * f64::EPSILON;
            let mut worst = 0.0_f64;
            for j in 0..3 * n {
                for k in 0..3 * n {
                    let asym = (h[(j, k)] - h[(k, j)]).abs();
                    worst = worst.max(asym / (2.0 * gamma * bound[(j, k)]).max(f64::MIN_POSITIVE));
                    assert!(asym <= 2.0 * gamma * bound[(j, k)], "{name}: H[{j},{k}] − H[{k},{j}] = {asym:e}, bound {:e}", 2.0 * gamma * bound[(j, k)]);
                }
            }
            println!("{} {name}: worst asymmetry / bound = {worst:.2e}", model.name);
            // and the returned halves are the mean: exactly symmetric
            let out =
                vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u).with_guess(Some(&dense_solve(&vi, &q, &p, &u))), &lam).unwrap();
            assert_eq!(out.hxx, out.hxx.transpose());
        }
    }
}
