//! The constrained step (module `constrained`) on a four-bar linkage built as an open tree
//! plus a loop-closure constraint: no drift, bounded energy, exact linearisation, symplecticity
//! on the constraint set, and clear errors.

use crate::common::constraint::*;
use crate::*;
use nalgebra::{Matrix3, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

#[test]
fn redundant_constraints_are_errors() {
    let model = four_bar_tree();
    let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.01, None).unwrap().with_constraints(loop_closure(&model, true)).unwrap();
    let q = closed_configuration(&model, 0.3);
    let (mut qn, mut pn) = (vec![0.0; 3], vec![0.0; 3]);
    let err = vi.step(&mut vi.workspace(), StepInput::new(4, &q, &[0.0; 3], &[0.0; 3]), &mut qn, &mut pn).unwrap_err();
    assert_eq!(err, ViError::DegenerateConstraints { step: 4 });
    // and the second order says the same
    let mut so = vi.second_order_workspace();
    let second = vi.linearize_second_order_contracted(&mut so, StepInput::new(4, &q, &[0.0; 3], &[0.0; 3]), &[0.0; 6]);
    assert_eq!(second.unwrap_err(), ViError::DegenerateConstraints { step: 4 });
    // the redundant plane is as singular at every control point of a Simpson step
    let simpson = VariationalIntegrator::new(model.clone(), Scheme::simpson(), 0.01, None).unwrap().with_constraints(loop_closure(&model, true)).unwrap();
    let err = simpson.step(&mut simpson.workspace(), StepInput::new(2, &q, &[0.0; 3], &[0.0; 3]), &mut qn, &mut pn).unwrap_err();
    assert_eq!(err, ViError::DegenerateConstraints { step: 2 });
}

/// A point mass on a prismatic `x` slider (mass `m1`) and a prismatic `z` joint (mass `m2`)
/// held at distance `L` from the world origin: a pendulum in Cartesian coordinates, whose
/// angle obeys `a(θ) θ̈ + ½ a'(θ) θ̇² + m2 g L sin θ = 0`, `a = L² (m2 + m1 cos² θ)`.
fn cartesian_pendulum() -> (VariationalIntegrator, f64, f64, f64) {
    let (m1, m2, length) = (0.5, 1.0, 0.8);
    let mut b = ModelBuilder::new("cartesian pendulum");
    let small = Matrix3::from_diagonal(&Vector3::new(1e-3, 1e-3, 1e-3));
    let slider = b.add_body(None, "slider", Joint::Prismatic { axis: Vector3::x() }, Se3::identity(), Inertia::new(m1, Vector3::zeros(), small)).unwrap();
    let bob = b.add_body(Some(slider), "bob", Joint::Prismatic { axis: Vector3::z() }, Se3::identity(), Inertia::new(m2, Vector3::zeros(), small)).unwrap();
    let model = Arc::new(b.build().unwrap());
    let rod = Constraint::Distance { a: BodyPoint { body: None, point: Vector3::zeros() }, b: BodyPoint { body: Some(bob), point: Vector3::zeros() }, length };
    let vi = VariationalIntegrator::new(model, Scheme::trapezoid(), 0.1, None).unwrap().with_constraints(vec![rod]).unwrap();
    (vi, m1, m2, length)
}

/// `(θ, θ̇)` at `t` from `(θ0, 0)` by RK4 with 2·10⁴ steps per second on the angle's equation
/// (its error, O(h⁴) ≈ 1e-17 relative, is far below the integrators' tested here).
fn pendulum_angle(m1: f64, m2: f64, length: f64, g: f64, theta0: f64, t: f64) -> (f64, f64) {
    let f = |th: f64, w: f64| {
        let a = length * length * (m2 + m1 * th.cos().powi(2));
        let da = -2.0 * length * length * m1 * th.cos() * th.sin();
        (w, -(0.5 * da * w * w + m2 * g * length * th.sin()) / a)
    };
    let steps = (t * 2e4).round() as usize;
    let h = t / steps as f64;
    let (mut th, mut w) = (theta0, 0.0);
    for _ in 0..steps {
        let k1 = f(th, w);
        let k2 = f(th + 0.5 * h * k1.0, w + 0.5 * h * k1.1);
        let k3 = f(th + 0.5 * h * k2.0, w + 0.5 * h * k2.1);
        let k4 = f(th + h * k3.0, w + h * k3.1);
        th += h / 6.0 * (k1.0 + 2.0 * k2.0 + 2.0 * k3.0 + k4.0);
        w += h / 6.0 * (k1.1 + 2.0 * k2.1 + 2.0 * k3.1 + k4.1);
    }
    (th, w)
}

/// The constrained step converges at the order of its scheme: the Cartesian pendulum
/// ([`cartesian_pendulum`]) from 0.9 rad at rest to `t = 1.2 s` (past the bottom) against the
/// angle's own equation by RK4, error `max(|Δq|, |Δp|)` over the state `(q, p)` (the exact `p`
/// is `M q̇`). Orders from halving `Δt` twice: 2 for the midpoint rule and the trapezoid, 4 for
/// Simpson, 6 for Lobatto `s = 3` (the interior control points on the constraint set, module
/// `constrained`; constraining only the step's end would leave every scheme at order 2).
/// Measured: 2.00, 2.00 (both; equal errors here, the potential being linear), 3.99, 4.00 and
/// 6.06, 6.01.
#[test]
fn constrained_schemes_converge_at_their_order() {
    let (base, m1, m2, length) = cartesian_pendulum();
    let g = -base.model().gravity.linear.z;
    let (theta0, t) = (0.9_f64, 1.2);
    let (th, w) = pendulum_angle(m1, m2, length, g, theta0, t);
    let exact_q = [length * th.sin(), -length * th.cos()];
    let exact_p = [(m1 + m2) * length * th.cos() * w, m2 * length * th.sin() * w];
    let q0 = [length * theta0.sin(), -length * theta0.cos()];
    for (name, scheme, steps, order) in [
        ("midpoint", Scheme::midpoint(), [48, 96, 192], 2.0),
        ("trapezoid", Scheme::trapezoid(), [48, 96, 192], 2.0),
        ("Simpson", Scheme::simpson(), [12, 24, 48], 4.0),
        ("Lobatto s = 3", Scheme::lobatto(3).unwrap(), [6, 12, 24], 6.0),
    ] {
        let errors: Vec<f64> = steps
            .iter()
            .map(|&n| {
                let vi = VariationalIntegrator::new(base.model().clone(), scheme.clone(), t / n as f64, None)
                    .unwrap()
                    .with_newton(1e-14, 50)
                    .unwrap()
                    .with_constraints(base.constraints().to_vec())
                    .unwrap();
                let traj = rollout(&vi, &q0, &[0.0, 0.0], &vec![0.0; 2 * n]).unwrap();
                let mut h = [0.0];
                vi.constraint_values(&mut vi.workspace(), traj.q_at(n), &mut h).unwrap();
                assert!(h[0].abs() < 1e-12, "s = {}: |h| = {:e} at the end", scheme.s, h[0]);
                let (q, p) = (traj.q_at(n), traj.p_at(n));
                (0..2).map(|i| (q[i] - exact_q[i]).abs().max((p[i] - exact_p[i]).abs())).fold(0.0, f64::max)
            })
            .collect();
        let measured: Vec<f64> = errors.windows(2).map(|e| (e[0] / e[1]).log2()).collect();
        let listed = errors.iter().map(|e| format!("{e:.2e}")).collect::<Vec<_>>().join(", ");
        println!("{name}: errors {listed}, orders {measured:.2?}");
        for m in &measured {
            assert!((m - order).abs() < 0.35, "{name}: measured order {m:.2}, expected {order} (errors {listed})");
        }
    }
}

/// A free box whose frame is held by a 6-D contact at the identity (three world planes through
/// the origin, three perpendicular axis pairs with their aligned axes), started turned about
/// `z` by `degrees`: the step's orientation equalities are also met at 180° (module
/// `constraints`, "Mirror images"). Returns the step's result and the turn it ended at.
fn box_held_turned(degrees: f64, aligned: bool) -> (Result<usize>, f64) {
    let mut b = ModelBuilder::new("box");
    b.add_body(None, "box", Joint::FreeFlyer, Se3::identity(), Inertia::new(1.5, Vector3::zeros(), Matrix3::from_diagonal(&Vector3::new(0.02, 0.03, 0.04))))
        .unwrap();
    let model = Arc::new(b.build().unwrap());
    let axis = |i: usize| Vector3::ith(i, 1.0);
    let mut constraints: Vec<Constraint> = (0..3)
        .map(|i| Constraint::PointOnPlane {
            a: BodyPoint { body: None, point: Vector3::zeros() },
            normal: axis(i),
            b: BodyPoint { body: Some(0), point: Vector3::zeros() },
        })
        .collect();
    for (i, j) in [(0, 1), (1, 2), (2, 0)] {
        let held = aligned.then(|| AlignedAxes { a: axis(i), b: axis(i) });
        constraints.push(Constraint::Perpendicular {
            a: BodyPoint { body: None, point: axis(j) },
            b: BodyPoint { body: Some(0), point: axis(i) },
            aligned: held,
        });
    }
    let vi = VariationalIntegrator::new(model, Scheme::midpoint(), 0.01, None).unwrap().with_constraints(constraints).unwrap();
    let half = degrees.to_radians() / 2.0;
    let q = [0.0, 0.0, 0.0, 0.0, 0.0, half.sin(), half.cos()];
    let (mut qn, mut pn) = (vec![0.0; 7], vec![0.0; 6]);
    let out = vi.step(&mut vi.workspace(), StepInput::new(0, &q, &[0.0; 6], &[0.0; 6]), &mut qn, &mut pn);
    (out, 2.0 * qn[6].abs().clamp(0.0, 1.0).acos().to_degrees())
}

#[test]
fn aligned_axes_refuse_a_mirror_image() {
    // without aligned axes the step from 170° lands on the 180° solution
    let (plain, turn) = box_held_turned(170.0, false);
    assert!(plain.is_ok() && (turn - 180.0).abs() < 1e-6, "{plain:?} at {turn}°");
    let (guarded, _) = box_held_turned(170.0, true);
    assert!(matches!(guarded, Err(ViError::Misaligned { constraint: 3, degrees, .. }) if (degrees - 180.0).abs() < 1e-6), "{guarded:?}");
    // from 100° the same step reaches the target itself, and the guard lets it pass
    let (ok, turn) = box_held_turned(100.0, true);
    assert!(ok.is_ok() && turn < 1e-6, "{ok:?} at {turn}°");
}

/// The energy range allowed over the floating tree's 2 s: measured 7.3e-8 (Simpson) and
/// 2.2e-11 (Lobatto `s = 3`) on an energy of 7.06 J, without a trend.
const ENERGY_RANGE: f64 = 1e-6;

/// Contacts on a floating base stepping on its Lie group, Simpson and Lobatto `s = 3`: the
/// floating tree tethered to a world anchor with its tip on the base's plane (common
/// `lie_group`) keeps both constraints at solver tolerance at every knot of a 2 s fall and
/// swing, with its energy (`VariationalIntegrator::energy`: the motion the constraints allow)
/// bounded.
#[test]
fn a_floating_base_keeps_its_contacts_on_every_scheme() {
    use crate::common::lie_group::{floating_tree, start, tether_and_plane};
    let model = Arc::new(floating_tree(true));
    let q0 = start(&model);
    let contacts = tether_and_plane(&model, &q0, 0.0);
    for scheme in [Scheme::simpson(), Scheme::lobatto(3).unwrap()] {
        let s = scheme.s;
        let vi = VariationalIntegrator::new(model.clone(), scheme, 0.01, None).unwrap().with_constraints(contacts.clone()).unwrap();
        let (n, steps) = (vi.n(), 200);
        let traj = rollout(&vi, &q0, &vec![0.0; n], &vec![0.0; n * steps]).unwrap();
        let mut ws = vi.workspace();
        let (mut h, mut worst) = ([0.0; 2], 0.0_f64);
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for k in 0..=steps {
            vi.constraint_values(&mut ws, traj.q_at(k), &mut h).unwrap();
            worst = worst.max(h[0].abs()).max(h[1].abs());
            let e = vi.energy(&mut ws, k, traj.q_at(k), traj.p_at(k)).unwrap();
            (lo, hi) = (lo.min(e), hi.max(e));
        }
        let travel = (0..3).map(|i| (traj.q_at(steps)[i] - q0[i]).abs()).fold(0.0, f64::max);
        println!("s = {s}: max |h| {worst:.1e}, energy range {:.2e} over [{lo:.4}, {hi:.4}], base moved {travel:.3}", hi - lo);
        assert!(worst < 1e-11, "s = {s}: constraint violation {worst:e}");
        assert!(travel > 1e-2, "s = {s}: the base must move");
        assert!(hi - lo < ENERGY_RANGE, "s = {s}: energy range {}", hi - lo);
    }
}
