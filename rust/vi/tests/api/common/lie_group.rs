//! Helpers of the models with joints on Lie groups (`lie_group_tests`).

use crate::*;
use nalgebra::DMatrix;
use nalgebra::{Matrix3, Quaternion, UnitQuaternion, Vector3};
use std::sync::Arc;
use vidyn_rbd::{difference, integrate, Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

/// A free-flying base carrying a hinge, a ball joint and a planar joint (every composite
/// kind), with or without gravity.
pub(crate) fn floating_tree(gravity: bool) -> Model {
    let mut b = ModelBuilder::new("floating tree");
    b.gravity(if gravity { Vector3::new(0.0, 0.0, -9.81) } else { Vector3::zeros() });
    let body = |m: f64, c: [f64; 3], i: [f64; 3]| Inertia::new(m, Vector3::from(c), Matrix3::from_diagonal(&Vector3::from(i)));
    let at = |x: f64, y: f64, z: f64| Se3::new(Matrix3::identity(), Vector3::new(x, y, z));
    let base = b.add_body(None, "base", Joint::FreeFlyer, Se3::identity(), body(2.0, [0.05, -0.02, 0.01], [0.05, 0.08, 0.1])).unwrap();
    let arm = b
        .add_body(Some(base), "hinge", Joint::Revolute { axis: Vector3::y() }, at(0.1, 0.0, -0.05), body(0.5, [0.0, 0.0, -0.25], [0.01, 0.01, 0.001]))
        .unwrap();
    b.add_body(Some(arm), "ball", Joint::Spherical, at(0.0, 0.0, -0.5), body(0.3, [0.02, 0.0, -0.2], [0.004, 0.005, 0.002])).unwrap();
    b.add_body(Some(base), "slider", Joint::Planar, at(-0.1, 0.05, 0.0), body(0.4, [0.03, 0.01, 0.02], [0.003, 0.002, 0.004])).unwrap();
    b.build().unwrap()
}

pub(crate) fn unit(x: f64, y: f64, z: f64, w: f64) -> [f64; 4] {
    let q = UnitQuaternion::from_quaternion(Quaternion::new(w, x, y, z));
    [q.i, q.j, q.k, q.w]
}

/// `q0` of [`floating_tree`]: a tilted base, every joint away from its neutral position.
pub(crate) fn start(model: &Model) -> Vec<f64> {
    let mut q = vec![0.1, -0.2, 0.3];
    q.extend(unit(0.1, -0.2, 0.05, 1.0));
    q.push(0.8);
    q.extend(unit(0.3, 0.1, -0.2, 1.0));
    let phi: f64 = 0.4;
    q.extend([0.05, -0.02, phi.cos(), phi.sin()]);
    assert_eq!(q.len(), model.nq);
    q
}

/// Two constraints on [`floating_tree`]: the base hooked to a world anchor by a tether, and
/// the ball body's tip on the base's `y` plane, both met at `q0` when `slack` is 0 (the tether
/// `slack` longer, the plane `slack` off the tip otherwise).
pub(crate) fn tether_and_plane(model: &Model, q0: &[f64], slack: f64) -> Vec<Constraint> {
    let (base, ball) = (model.joint_index("base").unwrap(), model.joint_index("ball").unwrap());
    let anchor = BodyPoint { body: None, point: Vector3::new(0.1, -0.2, 1.3) };
    let hook = BodyPoint { body: Some(base), point: Vector3::new(0.05, 0.0, 0.02) };
    let tip = BodyPoint { body: Some(ball), point: Vector3::new(0.0, 0.0, -0.2) };
    let pair = |length: f64, offset: f64| {
        vec![
            Constraint::Distance { a: anchor.clone(), b: hook.clone(), length },
            Constraint::PointOnPlane { a: BodyPoint { body: Some(base), point: Vector3::y() * offset }, normal: Vector3::y(), b: tip.clone() },
        ]
    };
    // sized from their values at q0: h = |hook − anchor|² − 1 and the tip's y offset
    let probe = VariationalIntegrator::new(Arc::new(model.clone()), Scheme::trapezoid(), 0.02, None).unwrap().with_constraints(pair(1.0, 0.0)).unwrap();
    let mut h = [0.0; 2];
    probe.constraint_values(&mut probe.workspace(), q0, &mut h).unwrap();
    pair((1.0 + h[0]).sqrt() + slack, h[1] + slack)
}

/// Central differences, step `h`, of `output(q_{k+1}, p_{k+1}, workspace)` of `vi`'s step `k`
/// from `(q0, p0, u)` along the `3n` input directions: `q ⊕ h e_j` (`integrate`), `p`, `u`
/// added. Columns `(δq, δp, δu)`; rows those of `output`.
pub(crate) fn central_differences(
    vi: &VariationalIntegrator,
    k: usize,
    q0: &[f64],
    p0: &[f64],
    u: &[f64],
    h: f64,
    output: impl Fn(&[f64], &[f64], &ViWorkspace) -> Vec<f64>,
) -> DMatrix<f64> {
    let (n, nq) = (vi.n(), vi.nq());
    let moved = |c: usize, eps: f64| {
        let (mut dq, mut p, mut uu) = (vec![0.0; n], p0.to_vec(), u.to_vec());
        match c {
            c if c < n => dq[c] = eps,
            c if c < 2 * n => p[c - n] += eps,
            c => uu[c - 2 * n] += eps,
        }
        let q = integrate(vi.model(), q0, &dq).unwrap();
        let mut ws = vi.workspace();
        let (mut qn, mut pn) = (vec![0.0; nq], vec![0.0; n]);
        vi.step(&mut ws, StepInput::new(k, &q, &p, &uu), &mut qn, &mut pn).unwrap();
        output(&qn, &pn, &ws)
    };
    let columns: Vec<Vec<f64>> = (0..3 * n).map(|c| moved(c, h).iter().zip(moved(c, -h)).map(|(a, b)| (a - b) / (2.0 * h)).collect()).collect();
    DMatrix::from_fn(columns[0].len(), 3 * n, |r, c| columns[c][r])
}

/// `A`, `B` of `vi`'s step from `(q0, p0, u)` against central differences of the step map in
/// tangent coordinates: `q ↦ q ⊕ h e_j` (`integrate`) on the inputs and `difference(q', ·)`
/// on the outputs, h = 1e-6 with Newton at its round-off floor: truncation ~h² (third
/// derivatives of order 1) ≈ 1e-12, round-off ~ε |x| / h ≈ 1e-10; asserts agreement to 1e-7
/// relative to the largest entry.
pub(crate) fn assert_linearization_on_the_group(vi: &VariationalIntegrator, k: usize, q0: &[f64], p0: &[f64], u: &[f64], what: &str) {
    let model = vi.model().clone();
    let (n, nq) = (model.nv, model.nq);
    let mut ws = vi.workspace();
    let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
    let (mut q1, mut p1) = (vec![0.0; nq], vec![0.0; n]);
    vi.linearize(&mut ws, StepInput::new(k, q0, p0, u), &mut a, &mut b, &mut q1, &mut p1).unwrap();
    let fd = central_differences(vi, k, q0, p0, u, 1e-6, |qn, pn, _| {
        let mut d = difference(&model, &q1, qn).unwrap();
        d.extend(pn.iter().zip(&p1).map(|(x, y)| x - y));
        d
    });
    let mut exact = DMatrix::zeros(2 * n, 3 * n);
    exact.columns_mut(0, 2 * n).copy_from(&a);
    exact.columns_mut(2 * n, n).copy_from(&b);
    let scale = fd.amax().max(1.0);
    let diff = &exact - &fd;
    let at = (0..2 * n).flat_map(|r| (0..3 * n).map(move |c| (r, c))).max_by(|x, y| diff[*x].abs().total_cmp(&diff[*y].abs())).unwrap();
    assert!(diff[at].abs() < 1e-7 * scale, "{what}, step {k}: worst at {at:?}: {} vs {} (scale {scale:.3e})", exact[at], fd[at]);
}
