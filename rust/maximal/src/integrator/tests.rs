//! The Newton system of a step: its matrix against central differences of the residual and its
//! graph solve against a dense LU (on the unknowns gathered from the workspace), and the node
//! names in singular-pivot errors.

use crate::models::four_bar;
use crate::test_common::contact::box_with;
use crate::test_common::integrator::initial_state;
use crate::*;
use nalgebra::{DMatrix, DVector, Vector6};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// Unknowns `(v, ω, λ)` as one dense vector in node order.
fn gather(vi: &MaximalIntegrator, ws: &MaximalWorkspace) -> DVector<f64> {
    let o = ws.solver.offsets();
    let mut x = DVector::zeros(o[o.len() - 1]);
    for i in 0..vi.mechanism().nbodies() {
        x.rows_mut(o[i], 3).copy_from(&ws.v[i]);
        x.rows_mut(o[i] + 3, 3).copy_from(&ws.w[i]);
    }
    for (j, node) in vi.joint_node.iter().enumerate() {
        if let Some(n) = node {
            let m = ws.solver.dim(*n);
            x.rows_mut(o[*n], m).copy_from(&ws.lambda[j].rows(0, m));
        }
    }
    x
}

fn scatter(vi: &MaximalIntegrator, ws: &mut MaximalWorkspace, x: &DVector<f64>) {
    let o = ws.solver.offsets();
    for i in 0..vi.mechanism().nbodies() {
        ws.v[i] = x.fixed_rows::<3>(o[i]).into();
        ws.w[i] = x.fixed_rows::<3>(o[i] + 3).into();
    }
    for (j, node) in vi.joint_node.iter().enumerate() {
        if let Some(n) = node {
            let m = ws.solver.dim(*n);
            ws.lambda[j] = Vector6::zeros();
            ws.lambda[j].rows_mut(0, m).copy_from(&x.rows(o[*n], m));
        }
    }
}

fn residual_vector(ws: &MaximalWorkspace) -> DVector<f64> {
    let o = ws.solver.offsets();
    let mut r = DVector::zeros(o[o.len() - 1]);
    for k in 0..ws.solver.len() {
        let m = ws.solver.dim(k);
        r.rows_mut(o[k], m).copy_from(&ws.residual[k].rows(0, m));
    }
    r
}

/// The four-bar at a random moving state with random unknowns, ready for `evaluate`/`assemble`.
fn prepared(seed: u64) -> (MaximalIntegrator, MaximalWorkspace, DVector<f64>) {
    let (mut mech, q0) = four_bar();
    let n = mech.nu;
    mech.stiffness = vec![0.7; n];
    mech.damping = vec![0.2; n];
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.02).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let v: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let state = initial_state(&vi, &q0, &v);
    let mut ws = vi.workspace();
    let u: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    vi.prepare(&mut ws, 0, &state, &u, None).unwrap();
    let mut x = gather(&vi, &ws);
    for xi in x.iter_mut() {
        *xi += rng.random_range(-0.5..0.5);
    }
    scatter(&vi, &mut ws, &x);
    (vi, ws, x)
}

#[test]
fn newton_matrix_matches_central_differences_of_the_residual() {
    // h = 1e-6 on unknowns of size O(1): truncation ~h²·|r'''| ≈ 1e-10 (r has 1/Δt = 50
    // factors), round-off ~ε|r|/h ≈ 1e-8 for |r| ≈ 50; tolerance 1e-6 relative to max|F|.
    let h = 1e-6;
    for seed in 0..3 {
        let (vi, mut ws, x) = prepared(seed);
        vi.evaluate(&mut ws, 1.0).unwrap();
        vi.assemble(&mut ws);
        let f = ws.solver.to_dense();
        let scale = f.amax().max(1.0);
        for c in 0..x.len() {
            let mut xp = x.clone();
            xp[c] += h;
            scatter(&vi, &mut ws, &xp);
            vi.evaluate(&mut ws, 1.0).unwrap();
            let rp = residual_vector(&ws);
            xp[c] -= 2.0 * h;
            scatter(&vi, &mut ws, &xp);
            vi.evaluate(&mut ws, 1.0).unwrap();
            let rm = residual_vector(&ws);
            let fd = (rp - rm) / (2.0 * h);
            let err = (fd - f.column(c)).amax();
            assert!(err < 1e-6 * scale, "column {c}: error {err:e} (max |F| = {scale:e})");
        }
    }
}

#[test]
fn graph_solve_matches_dense_lu_on_the_newton_matrix() {
    for seed in 0..3 {
        let (vi, mut ws, _) = prepared(seed);
        vi.evaluate(&mut ws, 1.0).unwrap();
        vi.assemble(&mut ws);
        let f: DMatrix<f64> = ws.solver.to_dense();
        let r = residual_vector(&ws);
        let expected = f.clone().lu().solve(&r).unwrap();
        let sv = f.singular_values();
        let cond = sv.max() / sv.min();
        ws.solver.factorize().unwrap();
        let mut b = ws.residual.clone();
        ws.solver.solve(&mut b);
        let o = ws.solver.offsets();
        let mut err = 0.0_f64;
        for k in 0..ws.solver.len() {
            for i in 0..ws.solver.dim(k) {
                err = err.max((b[k][i] - expected[o[k] + i]).abs());
            }
        }
        let rel = err / expected.amax();
        println!("seed {seed}: cond {cond:.2e}, graph vs dense LU relative difference {rel:.2e}");
        // both are backward-stable solves; they may differ by ~cond·ε
        assert!(rel < 1e-12_f64.max(cond * 4.0 * f64::EPSILON), "relative difference {rel:e}, cond {cond:e}");
    }
}

#[test]
fn singular_contact_and_limit_pivots_are_named() {
    // a contact's pivot in a mechanism without joints (it used to index the joints: a panic)
    let vi = MaximalIntegrator::new(Arc::new(box_with(0.3, FrictionModel::Cone)), 0.01).unwrap();
    let err = vi.singular_pivot(vi.contact_node(2), 7).to_string();
    assert!(err.contains("contact 'corner2'") && err.contains("step 7"), "{err}");
    let mut mech = Mechanism::from_model(Arc::new(crate::models::cylinder_chain(2, true))).unwrap();
    mech.add_joint_limit(1, -0.2, 0.2).unwrap();
    let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).unwrap();
    let err = vi.singular_pivot(vi.limit_node(0), 0).to_string();
    assert!(err.contains("limit of joint 'joint2'"), "{err}");
}
