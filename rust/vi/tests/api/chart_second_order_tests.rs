//! Checks of the second order on the Lie group (module `chart_second_order`): against the
//! exact second order where both exist (fixed charts), against second differences of the step
//! map on the group (an oracle that shares nothing with the first-order linearisation), and
//! the consistency of the full tensors with the contraction.

use crate::common::chart_second_order::*;
use crate::common::lie_group::{floating_tree, start};
use crate::*;
use nalgebra::{DMatrix, Vector3};
use std::sync::Arc;
use vidyn_rbd::{difference, integrate};

/// `λᵀ F(y)` of the module docs: the step from `(q̄ ⊕ δq, p̄ + δp, ū + δu)` read at `x̄'` by
/// `difference` and subtraction.
struct TangentStep<'a> {
    vi: &'a VariationalIntegrator,
    q: &'a [f64],
    p: &'a [f64],
    u: &'a [f64],
    q_next: Vec<f64>,
    p_next: Vec<f64>,
    lam: &'a [f64],
}

impl TangentStep<'_> {
    fn phi(&self, y: &[f64], ws: &mut ViWorkspace) -> f64 {
        let (n, nq) = (self.vi.n(), self.vi.nq());
        let q = integrate(self.vi.model(), self.q, &y[..n]).unwrap();
        let p: Vec<f64> = self.p.iter().zip(&y[n..2 * n]).map(|(a, b)| a + b).collect();
        let u: Vec<f64> = self.u.iter().zip(&y[2 * n..]).map(|(a, b)| a + b).collect();
        let (mut qn, mut pn) = (vec![0.0; nq], vec![0.0; n]);
        self.vi.step(ws, StepInput::new(0, &q, &p, &u).with_guess(Some(&self.q_next)), &mut qn, &mut pn).unwrap();
        let dq = difference(self.vi.model(), &self.q_next, &qn).unwrap();
        dq.iter().chain(&pn.iter().zip(&self.p_next).map(|(a, b)| a - b).collect::<Vec<_>>()).zip(self.lam).map(|(f, l)| f * l).sum()
    }

    /// `∇²(λᵀF)(0)` by second central differences with steps `h` per input, Richardson-
    /// extrapolated from `h` and `2h`: `(4 D(h) − D(2h))/3`, `D` the four-point formula
    /// `[φ(h e_j + h e_k) − φ(h e_j − h e_k) − φ(−h e_j + h e_k) + φ(−h e_j − h e_k)] / (4 h_j h_k)`.
    fn hessian(&self, h: &[f64]) -> DMatrix<f64> {
        let m = h.len();
        let mut ws = self.vi.workspace();
        let d = |scale: f64, j: usize, k: usize, ws: &mut ViWorkspace| {
            let mut y = vec![0.0; m];
            let mut at = |sj: f64, sk: f64| {
                y.fill(0.0);
                y[j] += sj * scale * h[j];
                y[k] += sk * scale * h[k];
                self.phi(&y, ws)
            };
            (at(1.0, 1.0) - at(1.0, -1.0) - at(-1.0, 1.0) + at(-1.0, -1.0)) / (4.0 * scale * scale * h[j] * h[k])
        };
        let mut out = DMatrix::zeros(m, m);
        for j in 0..m {
            for k in j..m {
                let v = (4.0 * d(1.0, j, k, &mut ws) - d(2.0, j, k, &mut ws)) / 3.0;
                out[(j, k)] = v;
                out[(k, j)] = v;
            }
        }
        out
    }
}

/// The contracted second order on the floating tree (a free-flying base carrying a hinge, a
/// ball joint and a planar joint), every scheme, with gravity, controls on every joint (the
/// base's too), damping and a spring on the hinge ([`damped_tree_at_its_floor`]), against the
/// Hessian of `λᵀF` by second differences of the step map itself on the group (inputs moved
/// by `integrate`, outputs read by `difference`: the quantity DDP expands, module docs).
/// The oracle's steps 1e-3 (configurations), 1e-3·max(1, |p̄|) and 1e-3·max(1, |ū|) with
/// Richardson extrapolation: truncation O(h⁴) ≈ 1e-12, rounding ~1e-15 / h² ≈ 1e-9 (Newton at
/// its floor). Measured worst deviation relative to `(1 + max|H|) Σ|λ_i|`: 8.9e-8 (the
/// trapezoid's momentum block; 1e-10 to 2e-9 on the other schemes), the oracle's own error
/// (the next test's oracle agrees with the exact form to 5e-11); asserted below 1e-6.
#[test]
fn second_order_on_the_group_matches_second_differences_of_the_step() {
    let TreeInputs { model, q0, v0, u, lam } = floating_tree_inputs();
    let n = model.nv;
    let mut worst = 0.0_f64;
    for scheme in schemes() {
        let (vi, p0) = damped_tree_at_its_floor(&model, scheme.clone(), &q0, &v0);
        let mut so = vi.second_order_workspace();
        let d = vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q0, &p0, &u), &lam).unwrap();
        let h = assembled(d);
        let oracle = TangentStep { vi: &vi, q: &q0, p: &p0, u: &u, q_next: d.q_next.clone(), p_next: d.p_next.clone(), lam: &lam };
        let scale = |x: &[f64]| x.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
        let steps: Vec<f64> = (0..3 * n)
            .map(|j| {
                1e-3 * if j < n {
                    1.0
                } else if j < 2 * n {
                    scale(&p0)
                } else {
                    scale(&u)
                }
            })
            .collect();
        let fd = oracle.hessian(&steps);
        let diff = &h - &fd;
        let bound = (1.0 + fd.amax()) * lam.iter().map(|x| x.abs()).sum::<f64>();
        let at = (0..3 * n).flat_map(|r| (0..3 * n).map(move |c| (r, c))).max_by(|x, y| diff[*x].abs().total_cmp(&diff[*y].abs())).unwrap();
        worst = worst.max(diff[at].abs() / bound);
        assert!(diff[at].abs() < 1e-6 * bound, "s = {}: worst at {at:?}: {} vs {} (bound {bound:.3e})", scheme.s, h[at], fd[at]);
    }
    eprintln!("second order on the group vs second differences of the step: worst {worst:.2e} relative");
}

/// The exact second order on the group against central differences of the exact first order
/// (the tangent coordinates transported at both ends, Richardson-extrapolated from h = 2e-4
/// and 4e-4; Newton at its round-off floor), on the floating tree with gravity, controls on
/// every joint, damping and a spring, every scheme. The raw (unsymmetrised) differenced
/// Hessian is compared with the exact one, so the transport's bracket terms are checked too.
/// Measured, relative to `(1 + max|H|) Σ|λ_i|`: at h = 3e-3 / 1e-3 / 3e-4 / 1e-4 the
/// deviation falls as h⁴ (2.4e-6 / 3.0e-8 / 2.4e-10 / 3.1e-12 on the trapezoid's momentum
/// block, the worst) down to the differences' rounding; at h = 2e-4 at most 5e-11 on every
/// scheme. Asserted below 1e-10.
#[test]
fn second_order_on_the_group_matches_differences_of_the_first_order() {
    let TreeInputs { model, q0, v0, u, lam } = floating_tree_inputs();
    let mut worst = 0.0_f64;
    for scheme in schemes() {
        let (vi, p0) = damped_tree_at_its_floor(&model, scheme.clone(), &q0, &v0);
        let mut so = vi.second_order_workspace();
        let d = vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q0, &p0, &u), &lam).unwrap();
        let h = assembled(d);
        let fd = differenced_hessian(&vi, 0, (&q0, &p0, &u), &d.q_next, &lam, 2e-4);
        let bound = (1.0 + fd.amax()) * lam.iter().map(|x| x.abs()).sum::<f64>();
        let err = (&h - &fd).amax() / bound;
        worst = worst.max(err);
        assert!(err < 1e-10, "s = {}: {err:.3e} relative", scheme.s);
    }
    eprintln!("exact second order on the group vs differences of the first order: worst {worst:.2e} relative");
}

/// The full tensors on the group contract to the contracted form, and both return the
/// first-order linearisation of [`VariationalIntegrator::linearize`] and its next state.
#[test]
fn full_tensors_on_the_group_agree_with_the_contraction_and_the_first_order() {
    let model = Arc::new(floating_tree(true));
    let (n, nq) = (model.nv, model.nq);
    let q0 = start(&model);
    let p0: Vec<f64> = (0..n).map(|i| 0.2 * ((i as f64) * 0.9).sin()).collect();
    let u: Vec<f64> = (0..n).map(|i| 0.1 * (i as f64).cos()).collect();
    let lam: Vec<f64> = (0..2 * n).map(|i| 1.0 - 0.1 * i as f64).collect();
    let vi = VariationalIntegrator::new(model, Scheme::simpson(), 0.01, None).unwrap();
    let mut so = vi.second_order_workspace();
    let c = vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q0, &p0, &u), &lam).unwrap().clone();
    let f = vi.linearize_second_order(&mut so, StepInput::new(0, &q0, &p0, &u)).unwrap();
    let (m, mut worst) = (2 * n, 0.0_f64);
    for j in 0..m {
        for k in 0..m {
            let s: f64 = (0..m).map(|i| lam[i] * f.fxx[(i * m + j) * m + k]).sum();
            worst = worst.max((s - c.hxx[(j, k)]).abs());
        }
        for k in 0..n {
            let s: f64 = (0..m).map(|i| lam[i] * f.fxu[(i * m + j) * n + k]).sum();
            worst = worst.max((s - c.hxu[(j, k)]).abs());
        }
    }
    for j in 0..n {
        for k in 0..n {
            let s: f64 = (0..m).map(|i| lam[i] * f.fuu[(i * n + j) * n + k]).sum();
            worst = worst.max((s - c.huu[(j, k)]).abs());
        }
    }
    assert!(worst < 1e-10 * (1.0 + c.hxx.amax()), "{worst:.3e}");
    let mut ws = vi.workspace();
    let (mut a, mut b, mut q1, mut p1) = (DMatrix::zeros(m, m), DMatrix::zeros(m, n), vec![0.0; nq], vec![0.0; n]);
    vi.linearize(&mut ws, StepInput::new(0, &q0, &p0, &u), &mut a, &mut b, &mut q1, &mut p1).unwrap();
    // the second order runs Newton to its round-off floor, the first order to 1e-12
    assert!((&a - &f.a).amax() < 1e-9 && (&b - &f.b).amax() < 1e-9);
    assert!(q1.iter().zip(&f.q_next).all(|(x, y)| (x - y).abs() < 1e-11) && p1.iter().zip(&f.p_next).all(|(x, y)| (x - y).abs() < 1e-10));
}

/// Kinematic joints and body wrenches on the group: refused by name (holonomic constraints
/// have the second order, `constrained_second_order_tests`).
#[test]
fn kinematic_or_wrenched_second_order_on_the_group_is_refused() {
    let model = Arc::new(floating_tree(true));
    let n = model.nv;
    let q0 = start(&model);
    let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.01, None).unwrap();
    let wrenched = vi.clone().with_body_wrenches(vec![vidyn_spatial::Force::new(Vector3::new(0.0, 0.0, 1.0), Vector3::zeros()); model.nbodies()]).unwrap();
    let kinematic = vi.with_kinematic(&[6]).unwrap();
    for (vi, expected) in [(kinematic, "kinematic joints"), (wrenched, "body wrenches")] {
        let mut so = vi.second_order_workspace();
        let err =
            vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q0, &vec![0.0; n], &vec![0.0; n]), &vec![1.0; 2 * n]).unwrap_err().to_string();
        assert!(err.contains("second-order derivatives are not implemented for integrators with") && err.contains(expected), "{err}");
    }
}
