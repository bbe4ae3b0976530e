//! Full DDP and the projection-operator method on a small nonlinear discrete system whose
//! first and second derivatives are derived by hand (and checked here against central
//! differences): quadratic convergence of DDP with fewer iterations than iLQR, expected vs
//! actual decrease, idempotence of the projection, the Newton model against finite
//! differences of the projected cost, and convergence of the projection method.

use nalgebra::{DMatrix, DVector};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vidyn_optim::{
    ilqr, lq_descent, lq_model, project, project_tangent, projection_gains, projection_optimize, rollout_open_loop, total_cost, Cost, DescentModel, Dynamics,
    IlqrOptions, Jacobians, Method, Nominal, Policy, ProjectionOptions, ProjectionStatus, QuadraticCost, Result, SecondOrder, StageDerivatives,
};

/// A forced, damped pendulum with a control-dependent gain, stepped by symplectic Euler
/// (`h` the time step), state `x = (θ, ω)`, one control:
/// ```text
/// a(θ, ω, u) = −g sin θ + c ω sin θ − d ω³ + u cos θ + e u²
/// ω' = ω + h a,   θ' = θ + h ω' = θ + h ω + h² a.
/// ```
/// Every derivative of `f` is `∂θ' = h² ∂a` plus the linear terms, `∂ω' = h ∂a`; the
/// contraction with `w` is `(w_θ h² + w_ω h) ∂²a`.
struct Pendulum {
    h: f64,
    g: f64,
    c: f64,
    d: f64,
    e: f64,
}

/// `(a, ∇a = (a_θ, a_ω, a_u), ∇²a)` with ∇²a over `(θ, ω, u)`.
impl Pendulum {
    fn accel(&self, x: &[f64], u: f64) -> (f64, [f64; 3], [[f64; 3]; 3]) {
        let (th, w) = (x[0], x[1]);
        let (s, c) = th.sin_cos();
        let a = -self.g * s + self.c * w * s - self.d * w.powi(3) + u * c + self.e * u * u;
        let grad = [-self.g * c + self.c * w * c - u * s, self.c * s - 3.0 * self.d * w * w, c + 2.0 * self.e * u];
        let hess = [[self.g * s - self.c * w * s - u * c, self.c * c, -s], [self.c * c, -6.0 * self.d * w, 0.0], [-s, 0.0, 2.0 * self.e]];
        (a, grad, hess)
    }
    fn step(&self, x: &[f64], u: f64) -> [f64; 2] {
        let (a, _, _) = self.accel(x, u);
        let w1 = x[1] + self.h * a;
        [x[0] + self.h * w1, w1]
    }
    fn jac(&self, x: &[f64], u: f64) -> (DMatrix<f64>, DMatrix<f64>) {
        let (h, (_, g, _)) = (self.h, self.accel(x, u));
        let a = DMatrix::from_row_slice(2, 2, &[1.0 + h * h * g[0], h + h * h * g[1], h * g[0], 1.0 + h * g[1]]);
        let b = DMatrix::from_row_slice(2, 1, &[h * h * g[2], h * g[2]]);
        (a, b)
    }
}

impl Dynamics for Pendulum {
    fn nx(&self) -> usize {
        2
    }
    fn nu(&self) -> usize {
        1
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut Policy<'_>) -> Result<(Vec<f64>, Vec<f64>)> {
        let mut x = x0.to_vec();
        let mut u = vec![0.0; steps];
        for k in 0..steps {
            let xk = [x[2 * k], x[2 * k + 1]];
            policy(k, &xk, &mut u[k..k + 1]);
            x.extend_from_slice(&self.step(&xk, u[k]));
        }
        Ok((x, u))
    }
    fn linearize(&self, x: &[f64], u: &[f64]) -> Result<Jacobians> {
        Ok(u.iter().enumerate().map(|(k, &uk)| self.jac(&x[2 * k..2 * k + 2], uk)).unzip())
    }
    fn has_second_order(&self) -> bool {
        true
    }
    fn second_order_contracted(&self, _k: usize, x: &[f64], u: &[f64], w: &[f64], out: &mut SecondOrder) -> Result<()> {
        let (_, _, hs) = self.accel(x, u[0]);
        let s = w[0] * self.h * self.h + w[1] * self.h;
        for i in 0..2 {
            for j in 0..2 {
                out.hxx[(i, j)] = s * hs[i][j];
            }
            out.hux[(0, i)] = s * hs[2][i];
        }
        out.huu[(0, 0)] = s * hs[2][2];
        Ok(())
    }
}

fn pendulum() -> Pendulum {
    Pendulum { h: 0.05, g: 9.81, c: 0.3, d: 0.05, e: 0.02 }
}

/// Towards the top: small running weights, a terminal weight on `(π, 0)` (the optimum stops
/// short of it, with a large costate — where iLQR's Gauss–Newton model is poor).
fn swing_up_cost(steps: usize) -> QuadraticCost {
    QuadraticCost::new(
        vec![DMatrix::identity(2, 2) * 1e-2],
        vec![DMatrix::identity(1, 1) * 0.1],
        DMatrix::identity(2, 2) * 10.0,
        [vec![0.0; 2 * steps], vec![std::f64::consts::PI, 0.0]].concat(),
        vec![],
    )
    .unwrap()
}

/// Central differences with h = 1e-6: truncation O(h²) ≈ 1e-12 is far below round-off
/// O(ε/h) ≈ 2e-10 relative, so 1e-7·max(1, |value|) catches any real error.
#[test]
fn hand_derived_derivatives_match_central_differences() {
    let p = pendulum();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let hd = 1e-6;
    for _ in 0..20 {
        let x = [rng.random_range(-3.0..3.0), rng.random_range(-3.0..3.0)];
        let u = rng.random_range(-5.0..5.0);
        let w = [rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0)];
        let (a, b) = p.jac(&x, u);
        let mut so = SecondOrder::zeros(2, 1);
        p.second_order_contracted(0, &x, &[u], &w, &mut so).unwrap();
        // perturb (θ, ω, u): first derivatives from f, second from the analytic Jacobians
        for j in 0..3 {
            let (mut xp, mut xm, mut up, mut um) = (x, x, u, u);
            if j < 2 {
                xp[j] += hd;
                xm[j] -= hd;
            } else {
                up += hd;
                um -= hd;
            }
            let (fp, fm) = (p.step(&xp, up), p.step(&xm, um));
            for i in 0..2 {
                let fd = (fp[i] - fm[i]) / (2.0 * hd);
                let exact = if j < 2 { a[(i, j)] } else { b[(i, 0)] };
                assert!((fd - exact).abs() < 1e-7 * exact.abs().max(1.0), "∂f_{i}/∂y_{j}: {fd} vs {exact}");
            }
            // w-contracted derivative of the Jacobian row [A B] along y_j
            let (ap, bp) = p.jac(&xp, up);
            let (am, bm) = p.jac(&xm, um);
            for col in 0..3 {
                let dp = |a: &DMatrix<f64>, b: &DMatrix<f64>| (0..2).map(|i| w[i] * if col < 2 { a[(i, col)] } else { b[(i, 0)] }).sum::<f64>();
                let fd = (dp(&ap, &bp) - dp(&am, &bm)) / (2.0 * hd);
                let exact = match (col, j) {
                    (c, r) if c < 2 && r < 2 => so.hxx[(r, c)],
                    (2, r) if r < 2 => so.hux[(0, r)],
                    (c, 2) if c < 2 => so.hux[(0, c)],
                    _ => so.huu[(0, 0)],
                };
                assert!((fd - exact).abs() < 1e-7 * exact.abs().max(1.0), "second derivative ({col}, {j}): {fd} vs {exact}");
            }
        }
    }
}

#[test]
fn ddp_converges_quadratically_and_faster_than_ilqr() {
    let p = pendulum();
    let steps = 60;
    let cost = swing_up_cost(steps);
    let u0 = vec![0.5; steps];
    let mut runs = Vec::new();
    for method in [Method::Ilqr, Method::Ddp] {
        let opts = IlqrOptions { method, max_iterations: 500, tolerance: 1e-13, ..IlqrOptions::default() };
        let res = ilqr(&p, &cost, &[0.0, 0.0], &u0, &opts).unwrap();
        println!("{method:?}: {} — {} iterations, cost {:.12}, {:.2} ms", res.message, res.iterations, res.cost, 1e3 * res.wall_time);
        for l in res.log.iter().rev().take(8).rev() {
            println!(
                "   J {:.14} expected {:.3e} (α: {:.3e}) actual {:.3e} α {} μ {:.1e} |∇J| {:.3e}",
                l.cost, l.expected_reduction, l.expected_reduction_alpha, l.actual_reduction, l.alpha, l.mu, l.gradient_norm
            );
        }
        assert!(res.converged, "{method:?}: {}", res.message);
        // dynamically feasible: re-simulated open loop gives the same states
        let (xs, _) = rollout_open_loop(&p, &[0.0, 0.0], &res.u).unwrap();
        assert!(xs.iter().zip(&res.x).all(|(a, b)| (a - b).abs() < 1e-12));
        println!("   θ_N = {}", res.x[2 * steps]);
        runs.push(res);
    }
    let (il, ddp) = (&runs[0], &runs[1]);
    assert!((il.cost - ddp.cost).abs() < 1e-8 * il.cost, "same optimum: {} vs {}", il.cost, ddp.cost);
    assert!(ddp.iterations < il.iterations, "DDP {} vs iLQR {} iterations", ddp.iterations, il.iterations);
    // near the optimum DDP's model is exact to second order: full steps whose actual decrease
    // matches the prediction; iLQR's Gauss–Newton prediction stays off by a constant factor
    let tail: Vec<_> = ddp.log.iter().filter(|l| l.alpha == 1.0 && l.actual_reduction > 1e-10).collect();
    let last = tail.last().expect("DDP takes full steps near the optimum");
    let ratio = last.actual_reduction / last.expected_reduction_alpha;
    assert!((ratio - 1.0).abs() < 1e-3, "DDP actual/expected = {ratio}");
    let il_last = il.log.iter().rfind(|l| l.alpha == 1.0 && l.actual_reduction > 1e-10).unwrap();
    let il_ratio = il_last.actual_reduction / il_last.expected_reduction_alpha;
    println!("actual/expected near the optimum: DDP {ratio:.6}, iLQR {il_ratio:.6}");
    assert!((il_ratio - 1.0).abs() > 10.0 * (ratio - 1.0).abs());
    // quadratic convergence: once the gradient is small, it is roughly squared per iteration
    let g: Vec<f64> = ddp.log.iter().map(|l| l.gradient_norm).collect();
    let k = g.iter().position(|&v| v < 1e-2).expect("gradient gets small");
    assert!(g.len() > k + 1);
    for i in k..g.len() - 1 {
        if g[i] > 1e-9 {
            assert!(g[i + 1] < 10.0 * g[i] * g[i], "gradient {} → {} is not quadratic", g[i], g[i + 1]);
        }
    }
}

fn random_curve(rng: &mut ChaCha8Rng, x: &[f64], u: &[f64], scale: f64) -> (Vec<f64>, Vec<f64>) {
    let mut xb: Vec<f64> = x.iter().map(|v| v + scale * rng.random_range(-1.0..1.0)).collect();
    xb[..2].copy_from_slice(&x[..2]);
    (xb, u.iter().map(|v| v + scale * rng.random_range(-1.0..1.0)).collect())
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()))
}

#[test]
fn projection_is_idempotent() {
    let p = pendulum();
    let steps = 80;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let u: Vec<f64> = (0..steps).map(|k| (0.1 * k as f64).sin()).collect();
    let (x, u) = rollout_open_loop(&p, &[0.3, 0.0], &u).unwrap();
    let (a, b) = p.linearize(&x, &u).unwrap();
    let gains = projection_gains(&p, &a, &b, &ProjectionOptions::default()).unwrap();
    // a trajectory is a fixed point
    let (xp, up) = project(&p, &x, &u, &gains).unwrap();
    assert!(max_diff(&xp, &x) == 0.0 && max_diff(&up, &u) == 0.0);
    // a curve that is not a trajectory: P(P(ξ̄)) = P(ξ̄) with the same K
    let (xb, ub) = random_curve(&mut rng, &x, &u, 0.2);
    let (x1, u1) = project(&p, &xb, &ub, &gains).unwrap();
    assert!(max_diff(&x1, &xb) > 1e-2, "the curve was not a trajectory");
    let (x2, u2) = project(&p, &x1, &u1, &gains).unwrap();
    assert!(max_diff(&x2, &x1) < 1e-14 && max_diff(&u2, &u1) < 1e-14, "{} {}", max_diff(&x2, &x1), max_diff(&u2, &u1));
    // DP is a projection too: DP(DP δξ̄) = DP δξ̄
    let (a1, b1) = p.linearize(&x1, &u1).unwrap();
    let dxb: Vec<DVector<f64>> =
        (0..=steps).map(|k| if k == 0 { DVector::zeros(2) } else { DVector::from_fn(2, |_, _| rng.random_range(-1.0..1.0)) }).collect();
    let dub: Vec<DVector<f64>> = (0..steps).map(|_| DVector::from_fn(1, |_, _| rng.random_range(-1.0..1.0))).collect();
    let (dx, du) = project_tangent(&a1, &b1, &gains, &dxb, &dub);
    let (dx2, du2) = project_tangent(&a1, &b1, &gains, &dx, &du);
    let e = dx.iter().zip(&dx2).chain(du.iter().zip(&du2)).map(|(a, b)| (a - b).amax()).fold(0.0, f64::max);
    assert!(e < 1e-12, "{e}");
}

/// `Dg(ξ̄)∘δξ̄ = Dh(P(ξ̄))∘DP(ξ̄)δξ̄` with `g = h∘P` for fixed gains.
fn projected_slope(p: &Pendulum, cost: &QuadraticCost, gains: &[DMatrix<f64>], xb: &[f64], ub: &[f64], dxb: &[DVector<f64>], dub: &[DVector<f64>]) -> f64 {
    let (x, u) = project(p, xb, ub, gains).unwrap();
    let (a, b) = p.linearize(&x, &u).unwrap();
    let (dx, du) = project_tangent(&a, &b, gains, dxb, dub);
    let steps = u.len();
    let mut s = 0.0;
    let mut d = StageDerivatives::zeros(2, 1);
    for k in 0..steps {
        cost.running_derivatives(k, &x[2 * k..2 * k + 2], &u[k..k + 1], &mut d).unwrap();
        s += d.lx.dot(&dx[k]) + d.lu.dot(&du[k]);
    }
    let mut t = StageDerivatives::zeros(2, 0);
    cost.terminal_derivatives(&x[2 * steps..], &mut t).unwrap();
    s + t.lx.dot(&dx[steps])
}

#[test]
fn newton_model_matches_finite_differences_of_projected_cost() {
    let p = pendulum();
    let steps = 50;
    let cost = swing_up_cost(steps);
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let u: Vec<f64> = (0..steps).map(|k| 2.0 * (0.2 * k as f64).cos()).collect();
    let (x, u) = rollout_open_loop(&p, &[0.0, 0.0], &u).unwrap();
    let (a, b) = p.linearize(&x, &u).unwrap();
    let gains = projection_gains(&p, &a, &b, &ProjectionOptions::default()).unwrap();
    let mut d = Vec::new();
    for k in 0..steps {
        let mut s = StageDerivatives::zeros(2, 1);
        cost.running_derivatives(k, &x[2 * k..2 * k + 2], &u[k..k + 1], &mut s).unwrap();
        d.push(s);
    }
    let mut term = StageDerivatives::zeros(2, 0);
    cost.terminal_derivatives(&x[2 * steps..], &mut term).unwrap();
    let newton = lq_model(&p, DescentModel::Newton, Nominal { x: &x, u: &u, a: &a, b: &b }, &gains, &d, &term).unwrap();
    let quasi = lq_model(&p, DescentModel::QuasiNewton, Nominal { x: &x, u: &u, a: &a, b: &b }, &gains, &d, &term).unwrap();
    for trial in 0..3 {
        // a tangent direction δξ = DP(ξ)∘δξ̄
        let dxb: Vec<DVector<f64>> =
            (0..=steps).map(|k| if k == 0 { DVector::zeros(2) } else { DVector::from_fn(2, |_, _| rng.random_range(-1.0..1.0)) }).collect();
        let dub: Vec<DVector<f64>> = (0..steps).map(|_| DVector::from_fn(1, |_, _| rng.random_range(-1.0..1.0))).collect();
        let (dx, du) = project_tangent(&a, &b, &gains, &dxb, &dub);
        let flat = |dx: &[DVector<f64>], du: &[DVector<f64>], e: f64| -> (Vec<f64>, Vec<f64>) {
            (x.iter().enumerate().map(|(i, v)| v + e * dx[i / 2][i % 2]).collect(), u.iter().enumerate().map(|(i, v)| v + e * du[i][0]).collect())
        };
        // central difference of the exact first derivative along δξ: O(ε²) truncation
        let eps = 1e-5;
        let (xp, up) = flat(&dx, &du, eps);
        let (xm, um) = flat(&dx, &du, -eps);
        let fd = (projected_slope(&p, &cost, &gains, &xp, &up, &dx, &du) - projected_slope(&p, &cost, &gains, &xm, &um, &dx, &du)) / (2.0 * eps);
        let exact = newton.form(&dx, &du);
        let gauss_newton = quasi.form(&dx, &du);
        println!("trial {trial}: D²g(δξ, δξ) by FD {fd:.10e}, Newton model {exact:.10e}, quasi-Newton {gauss_newton:.10e}");
        assert!((fd - exact).abs() < 1e-6 * exact.abs().max(1.0), "{fd} vs {exact}");
        assert!((fd - gauss_newton).abs() > 1e-3 * fd.abs(), "the dynamics' curvature matters here");
        // the first derivative is consistent too: Dg(ξ)∘δξ against central differences of g
        let g = |xb: &[f64], ub: &[f64]| {
            let (xx, uu) = project(&p, xb, ub, &gains).unwrap();
            total_cost(&cost, &xx, &uu, 2, 1).unwrap()
        };
        let fd1 = (g(&xp, &up) - g(&xm, &um)) / (2.0 * eps);
        let s = projected_slope(&p, &cost, &gains, &x, &u, &dx, &du);
        assert!((fd1 - s).abs() < 1e-6 * s.abs().max(1.0), "{fd1} vs {s}");
    }
    // steepest and quasi-Newton directions are descent directions
    for m in [DescentModel::Steepest, DescentModel::QuasiNewton] {
        let model = lq_model(&p, m, Nominal { x: &x, u: &u, a: &a, b: &b }, &gains, &d, &term).unwrap();
        let (_, _, slope) = lq_descent(&a, &b, &model, &d, &term).unwrap();
        assert!(slope < 0.0, "{m:?}: {slope}");
    }
}

#[test]
fn projection_method_converges_newton_fastest() {
    let p = pendulum();
    let steps = 60;
    let cost = swing_up_cost(steps);
    let u0 = vec![0.5; steps];
    let mut its = Vec::new();
    for model in [DescentModel::QuasiNewton, DescentModel::Auto] {
        let opts = ProjectionOptions { model, newton_after: 5, tolerance: 1e-9, max_iterations: 1000, ..ProjectionOptions::default() };
        let res = projection_optimize(&p, &cost, &[0.0, 0.0], &u0, None, &opts).unwrap();
        println!("{model:?}: {} — cost {:.12}, {:.2} ms", res.message, res.cost, 1e3 * res.wall_time);
        for l in res.log.iter().rev().take(5).rev() {
            println!("   J {:.14} slope {:.3e} {:?} λ {} trials {}", l.cost, l.slope, l.model, l.step, l.trials);
        }
        assert_eq!(res.status, ProjectionStatus::Converged, "{}", res.message);
        assert!(res.cost_history.windows(2).all(|w| w[1] < w[0]), "Armijo: monotone decrease");
        let (xs, _) = rollout_open_loop(&p, &[0.0, 0.0], &res.u).unwrap();
        assert!(max_diff(&xs, &res.x) < 1e-12, "every iterate is a trajectory");
        its.push((res.iterations, res.cost));
    }
    // both reach the same stationary point of the same problem; Newton needs fewer iterations
    assert!((its[0].1 - its[1].1).abs() < 1e-6 * its[0].1, "{its:?}");
    assert!(its[1].0 < its[0].0, "{its:?}");
}
