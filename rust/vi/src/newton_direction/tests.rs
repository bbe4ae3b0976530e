//! The DEL Jacobian–vector product of the Newton factorisation against the dense DEL blocks.

use crate::test_common::newton::*;
use nalgebra::DMatrix;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn del_jacobian_vector_product_matches_the_dense_blocks() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for model in models() {
        for (sc, wrenched) in with_and_without_wrenches() {
            let (s, n) = (sc.s, model.nv);
            let vi = integrator(&model, sc.clone(), 0.03, &mut rng, wrenched);
            let (q, _p, _u, z) = problem(&vi, &mut rng);
            let mut ws = vi.workspace();
            let sc = vi.scheme().clone();
            ws.points.set(&model, &sc, vi.dt(), &q, &z, vi.body_wrenches());
            assert!(ws.newton.factorize(&model, &sc, vi.dt(), vi.forces(), &ws.points, true));
            ws.points.update_hessians(&model);
            // LANES random directions at once
            use crate::newton_direction::{Lanes, LANES};
            let dq: Vec<Lanes> = (0..(s + 1) * n).map(|_| std::array::from_fn(|_| rng.random_range(-1.0..1.0))).collect();
            let mut out = vec![[0.0; LANES]; (s + 1) * n];
            ws.newton.ensure_lanes();
            ws.newton.del_jvp_lanes(&model, &sc, vi.dt(), vi.forces(), &dq, &mut out);
            let mut blk = DMatrix::zeros(n, n);
            for lane in 0..LANES {
                for a in 0..=s {
                    let mut want = vec![0.0; n];
                    for b in 0..=s {
                        ws.points.del_block(&sc, vi.dt(), vi.forces(), a, b, &mut blk.view_mut((0, 0), (n, n)));
                        let v = nalgebra::DVector::from_iterator(n, (0..n).map(|i| dq[b * n + i][lane]));
                        let x = &blk * v;
                        for i in 0..n {
                            want[i] += x[i];
                        }
                    }
                    let got: Vec<f64> = (0..n).map(|i| out[a * n + i][lane]).collect();
                    let err = rel_err(&got, &want);
                    assert!(err < 1e-11, "{} s={s} wrenched={wrenched} row {a} lane {lane}: JVP vs blocks {err:e}", model.name);
                }
            }
        }
    }
}
