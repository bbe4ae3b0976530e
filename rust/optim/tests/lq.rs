//! LQR and iLQR on linear-quadratic problems against a dense KKT solve of the same problem,
//! and steady-state DLQR against the fixed point of the Riccati map.

use nalgebra::{DMatrix, DVector};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vidyn_optim::{closed_loop_rollout, dlqr, ilqr, lqr, IlqrOptions, LinearDynamics, Method, OptimError, QuadraticCost, TrackingController};

fn random_matrix(rng: &mut ChaCha8Rng, r: usize, c: usize, scale: f64) -> DMatrix<f64> {
    DMatrix::from_fn(r, c, |_, _| scale * rng.random_range(-1.0..1.0))
}

fn random_spd(rng: &mut ChaCha8Rng, n: usize, shift: f64) -> DMatrix<f64> {
    let m = random_matrix(rng, n, n, 1.0);
    &m * m.transpose() + DMatrix::identity(n, n) * shift
}

struct Problem {
    a: Vec<DMatrix<f64>>,
    b: Vec<DMatrix<f64>>,
    q: Vec<DMatrix<f64>>,
    r: Vec<DMatrix<f64>>,
    qn: DMatrix<f64>,
    x0: DVector<f64>,
}

fn problem(seed: u64, nx: usize, nu: usize, steps: usize) -> Problem {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // mildly unstable dynamics so the feedback matters
    let a = (0..steps).map(|_| DMatrix::identity(nx, nx) + random_matrix(&mut rng, nx, nx, 0.2)).collect();
    let b = (0..steps).map(|_| random_matrix(&mut rng, nx, nu, 1.0)).collect();
    let q = (0..steps).map(|_| random_spd(&mut rng, nx, 0.0) * 0.5).collect();
    let r = (0..steps).map(|_| random_spd(&mut rng, nu, 0.1)).collect();
    let qn = random_spd(&mut rng, nx, 0.5);
    let x0 = DVector::from_fn(nx, |_, _| rng.random_range(-1.0..1.0));
    Problem { a, b, q, r, qn, x0 }
}

/// Dense KKT solve of `min Σ ½(x_k − r_k)ᵀQ_k(x_k − r_k) + ½(u_k − s_k)ᵀR_k(u_k − s_k) +
/// ½(x_N − r_N)ᵀQ_N(x_N − r_N)` s.t. `x_0 = x0`, `x_{k+1} = A_k x_k + B_k u_k`.
/// Returns `(x (N+1)·nx, u N·nu, cost)`.
fn kkt(p: &Problem, x_ref: &[f64], u_ref: &[f64]) -> (Vec<f64>, Vec<f64>, f64) {
    let steps = p.a.len();
    let (nx, nu) = (p.a[0].nrows(), p.b[0].ncols());
    let nz = (steps + 1) * nx + steps * nu;
    let nc = (steps + 1) * nx;
    let xi = |k: usize| k * nx;
    let ui = |k: usize| (steps + 1) * nx + k * nu;
    let mut kkt = DMatrix::zeros(nz + nc, nz + nc);
    let mut rhs = DVector::zeros(nz + nc);
    for k in 0..=steps {
        let w = if k < steps { &p.q[k] } else { &p.qn };
        kkt.view_mut((xi(k), xi(k)), (nx, nx)).copy_from(w);
        let h = w * DVector::from_column_slice(&x_ref[k * nx..(k + 1) * nx]);
        rhs.rows_mut(xi(k), nx).copy_from(&h);
    }
    for k in 0..steps {
        kkt.view_mut((ui(k), ui(k)), (nu, nu)).copy_from(&p.r[k]);
        let h = &p.r[k] * DVector::from_column_slice(&u_ref[k * nu..(k + 1) * nu]);
        rhs.rows_mut(ui(k), nu).copy_from(&h);
    }
    // constraints: C z = d
    let mut c = DMatrix::zeros(nc, nz);
    let mut d = DVector::zeros(nc);
    c.view_mut((0, 0), (nx, nx)).fill_with_identity();
    d.rows_mut(0, nx).copy_from(&p.x0);
    for k in 0..steps {
        let row = (k + 1) * nx;
        c.view_mut((row, xi(k + 1)), (nx, nx)).fill_with_identity();
        c.view_mut((row, xi(k)), (nx, nx)).copy_from(&(-&p.a[k]));
        c.view_mut((row, ui(k)), (nx, nu)).copy_from(&(-&p.b[k]));
    }
    kkt.view_mut((nz, 0), (nc, nz)).copy_from(&c);
    kkt.view_mut((0, nz), (nz, nc)).copy_from(&c.transpose());
    rhs.rows_mut(nz, nc).copy_from(&d);
    let sol = kkt.lu().solve(&rhs).expect("KKT system is nonsingular");
    let x: Vec<f64> = sol.rows(0, (steps + 1) * nx).iter().copied().collect();
    let u: Vec<f64> = sol.rows((steps + 1) * nx, steps * nu).iter().copied().collect();
    let mut cost = 0.0;
    for k in 0..=steps {
        let w = if k < steps { &p.q[k] } else { &p.qn };
        let e = DVector::from_iterator(nx, (0..nx).map(|i| x[k * nx + i] - x_ref[k * nx + i]));
        cost += 0.5 * e.dot(&(w * &e));
    }
    for k in 0..steps {
        let e = DVector::from_iterator(nu, (0..nu).map(|i| u[k * nu + i] - u_ref[k * nu + i]));
        cost += 0.5 * e.dot(&(&p.r[k] * &e));
    }
    (x, u, cost)
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()))
}

#[test]
fn riccati_matches_kkt() {
    for (seed, nx, nu, steps) in [(1, 4, 2, 30), (2, 6, 3, 50), (3, 3, 1, 80)] {
        let p = problem(seed, nx, nu, steps);
        let sol = lqr(&p.a, &p.b, &p.q, &p.r, &p.qn).unwrap();
        // closed-loop simulation of u = −K x
        let mut x = vec![p.x0.clone()];
        let mut u = Vec::new();
        for k in 0..steps {
            let uk = -&sol.k[k] * &x[k];
            x.push(&p.a[k] * &x[k] + &p.b[k] * &uk);
            u.push(uk);
        }
        let xs: Vec<f64> = x.iter().flat_map(|v| v.iter().copied()).collect();
        let us: Vec<f64> = u.iter().flat_map(|v| v.iter().copied()).collect();
        let (xk, uk, ck) = kkt(&p, &vec![0.0; (steps + 1) * nx], &vec![0.0; steps * nu]);
        let cost_riccati = 0.5 * p.x0.dot(&(&sol.p[0] * &p.x0));
        let scale = uk.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
        let (ex, eu, ec) = (max_diff(&xs, &xk), max_diff(&us, &uk), (cost_riccati - ck).abs() / ck.max(1.0));
        println!("nx={nx} nu={nu} N={steps}: |x−x_kkt| {ex:.2e}, |u−u_kkt| {eu:.2e}, cost rel {ec:.2e}");
        assert!(ex < 1e-9 * scale && eu < 1e-9 * scale && ec < 1e-9, "{ex} {eu} {ec}");
        for pk in &sol.p {
            assert_eq!(pk, &pk.transpose(), "P is symmetrised");
        }
    }
}

#[test]
fn ilqr_and_ddp_on_lq_problem_converge_in_one_iteration_to_kkt() {
    let (nx, nu, steps) = (4, 2, 40);
    let p = problem(7, nx, nu, steps);
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let x_ref: Vec<f64> = (0..(steps + 1) * nx).map(|_| rng.random_range(-1.0..1.0)).collect();
    let u_ref: Vec<f64> = (0..steps * nu).map(|_| rng.random_range(-0.5..0.5)).collect();
    let u_init: Vec<f64> = (0..steps * nu).map(|_| rng.random_range(-1.0..1.0)).collect();
    let dynamics = LinearDynamics::new(p.a.clone(), p.b.clone()).unwrap();
    let cost = QuadraticCost::new(p.q.clone(), p.r.clone(), p.qn.clone(), x_ref.clone(), u_ref.clone()).unwrap();
    let (xk, uk, ck) = kkt(&p, &x_ref, &u_ref);
    for method in [Method::Ilqr, Method::Ddp] {
        let opts = IlqrOptions { method, ..IlqrOptions::default() };
        let res = ilqr(&dynamics, &cost, p.x0.as_slice(), &u_init, &opts).unwrap();
        let (ex, eu) = (max_diff(&res.x, &xk), max_diff(&res.u, &uk));
        println!(
            "{method:?} on LQ: {} iteration(s), status {:?}, |x−x_kkt| {ex:.2e}, |u−u_kkt| {eu:.2e}, cost {} vs {ck}",
            res.iterations, res.status, res.cost
        );
        assert!(res.converged, "{}", res.message);
        assert_eq!(res.iterations, 1, "{:?}", res.log);
        assert_eq!(res.log[0].alpha, 1.0);
        // the quadratic model is exact: expected and actual decrease agree
        let l0 = &res.log[0];
        assert!((l0.expected_reduction - l0.actual_reduction).abs() < 1e-9 * l0.actual_reduction.max(1.0));
        assert!(ex < 1e-9 && eu < 1e-9, "{ex} {eu}");
        assert!((res.cost - ck).abs() < 1e-9 * ck.max(1.0));
    }
}

/// Dynamics with first derivatives only: DDP must refuse them with a clear error.
struct FirstOrderOnly(LinearDynamics);

impl vidyn_optim::Dynamics for FirstOrderOnly {
    fn nx(&self) -> usize {
        self.0.nx()
    }
    fn nu(&self) -> usize {
        self.0.nu()
    }
    fn rollout(&self, x0: &[f64], steps: usize, policy: &mut vidyn_optim::Policy<'_>) -> vidyn_optim::Result<(Vec<f64>, Vec<f64>)> {
        self.0.rollout(x0, steps, policy)
    }
    fn linearize(&self, x: &[f64], u: &[f64]) -> vidyn_optim::Result<vidyn_optim::Jacobians> {
        self.0.linearize(x, u)
    }
}

#[test]
fn ddp_without_second_derivatives_is_not_implemented() {
    use vidyn_optim::Dynamics;
    let p = problem(3, 2, 1, 5);
    let dynamics = FirstOrderOnly(LinearDynamics::new(p.a.clone(), p.b.clone()).unwrap());
    assert!(!dynamics.has_second_order());
    let cost = QuadraticCost::new(p.q.clone(), p.r.clone(), p.qn.clone(), vec![0.0; 2], vec![]).unwrap();
    let opts = IlqrOptions { method: Method::Ddp, ..IlqrOptions::default() };
    let e = ilqr(&dynamics, &cost, p.x0.as_slice(), &[0.0; 5], &opts).unwrap_err();
    assert!(matches!(e, OptimError::NotImplemented(_)), "{e}");
    // iLQR on the same dynamics works
    assert!(ilqr(&dynamics, &cost, p.x0.as_slice(), &[0.0; 5], &IlqrOptions::default()).unwrap().converged);
}

#[test]
fn ilqr_box_constraints_hold_and_are_kkt() {
    // double integrator to the origin with |u| ≤ 0.5: a scalar control, so the first-order
    // conditions of the box QP are easy to check with the open-loop gradient
    let dt = 0.1;
    let a = DMatrix::from_row_slice(2, 2, &[1.0, dt, 0.0, 1.0]);
    let b = DMatrix::from_row_slice(2, 1, &[0.5 * dt * dt, dt]);
    let steps = 40;
    let dynamics = LinearDynamics::new(vec![a.clone()], vec![b.clone()]).unwrap();
    let cost =
        QuadraticCost::new(vec![DMatrix::identity(2, 2) * 0.1], vec![DMatrix::identity(1, 1) * 0.01], DMatrix::identity(2, 2) * 100.0, vec![0.0; 2], vec![])
            .unwrap();
    let opts = IlqrOptions { u_min: Some(vec![-0.5]), u_max: Some(vec![0.5]), ..IlqrOptions::default() };
    let x0 = [3.0, 0.0];
    let res = ilqr(&dynamics, &cost, &x0, &vec![0.0; steps], &opts).unwrap();
    assert!(res.converged, "{}", res.message);
    assert!(res.u.iter().all(|u| u.abs() <= 0.5 + 1e-15));
    assert!(res.u.iter().filter(|u| (u.abs() - 0.5).abs() < 1e-12).count() > 3, "the limit is active");
    // projected gradient ≈ 0 at the solution
    assert!(res.log.last().unwrap().gradient_norm < 1e-6, "{:?}", res.log.last());
    // a free QP (no box) from the clamped solution gives a lower cost that violates the box
    let free = ilqr(&dynamics, &cost, &x0, &vec![0.0; steps], &IlqrOptions::default()).unwrap();
    assert!(free.cost < res.cost && free.u.iter().any(|u| u.abs() > 0.5));
}

#[test]
fn dlqr_is_fixed_point_and_stabilises() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (nx, nu) = (4, 2);
    let a = DMatrix::identity(nx, nx) + random_matrix(&mut rng, nx, nx, 0.3);
    let b = random_matrix(&mut rng, nx, nu, 1.0);
    let q = DMatrix::identity(nx, nx);
    let r = DMatrix::identity(nu, nu);
    let (k, p, iterations) = dlqr(&a, &b, &q, &r, 1e-13, 100_000).unwrap();
    println!("DLQR converged in {iterations} iterations");
    // Riccati fixed point
    let g = &r + b.transpose() * &p * &b;
    let residual = &q + a.transpose() * &p * &a - a.transpose() * &p * &b * g.clone().lu().solve(&(b.transpose() * &p * &a)).unwrap() - &p;
    assert!(residual.amax() < 1e-9 * p.amax(), "{}", residual.amax());
    let closed = &a - &b * &k;
    let rho = closed.complex_eigenvalues().iter().map(|e| e.norm()).fold(0.0, f64::max);
    assert!(rho < 1.0, "spectral radius {rho}");
    // the controller drives a perturbed state to zero in closed loop
    let dynamics = LinearDynamics::new(vec![a.clone()], vec![b.clone()]).unwrap();
    let ctrl = TrackingController::new(vec![0.0; nx], vec![0.0; nu], vec![k]).unwrap();
    let (x, _) = closed_loop_rollout(&dynamics, &[1.0, -1.0, 0.5, 0.2], &ctrl, 200).unwrap();
    assert!(x[200 * nx..].iter().all(|v| v.abs() < 1e-6));
}

#[test]
fn dlqr_reports_non_convergence() {
    // unstable mode that the input cannot reach
    let a = DMatrix::from_row_slice(2, 2, &[1.5, 0.0, 0.0, 0.5]);
    let b = DMatrix::from_row_slice(2, 1, &[0.0, 1.0]);
    let e = dlqr(&a, &b, &DMatrix::identity(2, 2), &DMatrix::identity(1, 1), 1e-12, 5000).unwrap_err();
    assert!(matches!(e, OptimError::NotConverged(_)), "{e}");
    assert!(e.to_string().contains("did not converge"));
}
