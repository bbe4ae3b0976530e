//! The constrained step (module `constrained`) on a four-bar linkage built as an open tree
//! plus a loop-closure constraint: no drift, bounded energy, exact linearisation, symplecticity
//! on the constraint set, and clear errors.

use crate::tests::assert_linearisation_matches_differences;
use crate::*;
use nalgebra::{DMatrix, Matrix3, Vector3};
use std::sync::Arc;
use vidyn_rbd::{Joint, Model, ModelBuilder};
use vidyn_spatial::{Inertia, Se3};

const GROUND: f64 = 2.5;
const CRANK: f64 = 1.0;
const COUPLER: f64 = 2.0;
const ROCKER: f64 = 1.5;

fn rod(length: f64) -> Inertia {
    let i = length * length / 12.0;
    Inertia::new(1.0, Vector3::new(0.0, 0.0, -length / 2.0), Matrix3::from_diagonal(&Vector3::new(i, i, 1e-3)))
}

/// Crank (pivot at the origin) → coupler, and a rocker pivoting at `(GROUND, 0, 0)`; all
/// joints turn about `y`, rods hang along `−z` at `q = 0`.
pub(crate) fn four_bar_tree() -> Arc<Model> {
    let mut b = ModelBuilder::new("four_bar");
    let y = Joint::Revolute { axis: Vector3::y() };
    let crank = b.add_body(None, "crank", y, Se3::identity(), rod(CRANK)).unwrap();
    b.add_body(Some(crank), "coupler", y, Se3::new(Matrix3::identity(), Vector3::new(0.0, 0.0, -CRANK)), rod(COUPLER)).unwrap();
    b.add_body(None, "rocker", y, Se3::new(Matrix3::identity(), Vector3::new(GROUND, 0.0, 0.0)), rod(ROCKER)).unwrap();
    Arc::new(b.build().unwrap())
}

/// The coupler's free end coincides with the rocker's: two planes through the rocker end,
/// normals `x` and `z` of the rocker (the third direction, `y`, is the joints' common axis).
pub(crate) fn loop_closure(model: &Model, with_redundant_plane: bool) -> Vec<Constraint> {
    let (coupler, rocker) = (model.joint_index("coupler").unwrap(), model.joint_index("rocker").unwrap());
    let a = BodyPoint { body: Some(rocker), point: Vector3::new(0.0, 0.0, -ROCKER) };
    let b = BodyPoint { body: Some(coupler), point: Vector3::new(0.0, 0.0, -COUPLER) };
    let mut normals = vec![Vector3::x(), Vector3::z()];
    if with_redundant_plane {
        normals.push(Vector3::y());
    }
    normals.into_iter().map(|normal| Constraint::PointOnPlane { a: a.clone(), normal, b: b.clone() }).collect()
}

/// A configuration on the constraint set for crank angle `t1` (bisection on the rocker angle).
pub(crate) fn closed_configuration(model: &Model, t1: f64) -> Vec<f64> {
    let crank_end = Vector3::new(-CRANK * t1.sin(), 0.0, -CRANK * t1.cos());
    let rocker_end = |t3: f64| Vector3::new(GROUND - ROCKER * t3.sin(), 0.0, -ROCKER * t3.cos());
    let gap = |t3: f64| (rocker_end(t3) - crank_end).norm() - COUPLER;
    let (mut lo, mut hi) = (-0.2, 1.5);
    assert!(gap(lo) * gap(hi) < 0.0);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if gap(lo) * gap(mid) <= 0.0 {
            hi = mid
        } else {
            lo = mid
        }
    }
    let t3 = 0.5 * (lo + hi);
    let d = rocker_end(t3) - crank_end;
    let phi = (-d.x).atan2(-d.z);
    let mut q = vec![0.0; 3];
    q[model.joint_index("crank").unwrap()] = t1;
    q[model.joint_index("coupler").unwrap()] = phi - t1;
    q[model.joint_index("rocker").unwrap()] = t3;
    q
}

fn integrator(sc: Scheme, dt: f64, forces: Option<JointForces>) -> VariationalIntegrator {
    let model = four_bar_tree();
    let c = loop_closure(&model, false);
    VariationalIntegrator::new(model, sc, dt, forces).unwrap().with_constraints(c).unwrap()
}

pub(crate) fn constraint_max(vi: &VariationalIntegrator, q: &[f64]) -> f64 {
    let mut st = crate::point::PointState::new(vi.n());
    st.update(vi.model(), q, &vec![0.0; vi.n()]);
    vi.constraints().iter().map(|c| c.value(&st).abs()).fold(0.0, f64::max)
}

/// 10⁴ midpoint steps (100 s) of the four-bar falling from rest under gravity: the loop stays
/// closed at solver tolerance at every step, and the energy `½ v̄ᵀM(q̄)v̄ + V(q̄)` at the step
/// midpoints oscillates without a trend.
#[test]
fn four_bar_stays_closed_without_drift_for_ten_thousand_steps() {
    for sc in [Scheme::midpoint(), Scheme::trapezoid()] {
        let vi = integrator(sc, 0.01, Some(JointForces::none(3)));
        let q0 = closed_configuration(vi.model(), 0.3);
        assert!(constraint_max(&vi, &q0) < 1e-12);
        let steps = 10_000;
        let traj = rollout(&vi, &q0, &[0.0; 3], &vec![0.0; 3 * steps]).unwrap();
        let mut ws = vi.model().workspace();
        let (mut worst, mut energies) = (0.0_f64, Vec::with_capacity(steps));
        for k in 1..=steps {
            worst = worst.max(constraint_max(&vi, traj.q_at(k)));
            let (qa, qb) = (traj.q_at(k - 1), traj.q_at(k));
            let mid: Vec<f64> = qa.iter().zip(qb).map(|(a, b)| 0.5 * (a + b)).collect();
            let vel: Vec<f64> = qa.iter().zip(qb).map(|(a, b)| (b - a) / vi.dt()).collect();
            energies
                .push(vidyn_rbd::kinetic_energy(vi.model(), &mut ws, &mid, &vel).unwrap() + vidyn_rbd::potential_energy(vi.model(), &mut ws, &mid).unwrap());
        }
        let (lo, hi) = energies.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &e| (l.min(e), h.max(e)));
        let tenth = steps / 10;
        let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
        let trend = (mean(&energies[steps - tenth..]) - mean(&energies[..tenth])).abs();
        let crank = vi.model().joint_index("crank").unwrap();
        let swing = (0..=steps).map(|k| traj.q_at(k)[crank]).fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| (l.min(x), h.max(x)));
        println!(
            "{}: crank swings over [{:.2}, {:.2}] rad, max |h| {worst:.1e}, energy range {:.2e}, trend {trend:.1e}",
            vi.scheme().s,
            swing.0,
            swing.1,
            hi - lo
        );
        assert!(swing.1 - swing.0 > 0.5, "the linkage must actually move: {swing:?}");
        assert!(worst < 1e-11, "constraint drift {worst:e}");
        // the swing exchanges ≈ 4 J between kinetic and potential energy
        assert!(hi - lo < 2e-2, "energy range {}", hi - lo);
        assert!(trend < 2e-3, "energy trend {trend}");
    }
}

/// `A`, `B` of the constrained step against central differences of the solved step (h = 1e-6,
/// tolerance as in the unconstrained test), with damping, springs and controls, from a
/// configuration slightly off the constraint set (the step is defined there too).
#[test]
fn constrained_linearisation_matches_finite_differences() {
    for sc in [Scheme::midpoint(), Scheme::trapezoid()] {
        let forces = JointForces { damping: vec![0.2, 0.1, 0.3], stiffness: vec![0.5, 1.0, 0.0], rest: vec![0.1, -1.0, 0.3] };
        let vi = integrator(sc, 0.02, Some(forces));
        let mut q = closed_configuration(vi.model(), 0.4);
        q[0] += 1e-3;
        let p = vec![0.3, -0.2, 0.1];
        let u = vec![0.5, -0.3, 0.2];
        let (qn, _) = assert_linearisation_matches_differences(&vi, 0, &q, &p, &u, &format!("four-bar s={}", vi.scheme().s));
        assert!(constraint_max(&vi, &qn) < 1e-11);
    }
}

#[test]
fn constrained_flow_is_symplectic_on_the_constraint_set() {
    let vi = integrator(Scheme::midpoint(), 0.02, Some(JointForces::none(3)));
    let n = 3;
    let q = closed_configuration(vi.model(), 0.2);
    let p = vec![0.0; n];
    let mut ws = vi.workspace();
    let (mut a, mut b) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n));
    let (mut qn, mut pn) = (vec![0.0; n], vec![0.0; n]);
    vi.linearize(&mut ws, StepInput::new(0, &q, &p, &[0.0; 3]), &mut a, &mut b, &mut qn, &mut pn).unwrap();
    // tangent directions: the null space of Dh(q_k) (one), and every momentum direction
    let mut st = crate::point::PointState::new(n);
    st.update(vi.model(), &q, &[0.0; 3]);
    let mut scratch = crate::constraints::ConstraintScratch::new(n);
    let mut dh = DMatrix::zeros(2, n);
    let mut row = vec![0.0; n];
    for (i, c) in vi.constraints().iter().enumerate() {
        c.gradient(vi.model(), &st, &mut scratch, &mut row);
        dh.row_mut(i).copy_from_slice(&row);
    }
    let tangent = dh.row(0).transpose().cross(&dh.row(1).transpose());
    let mut basis = DMatrix::zeros(2 * n, 1 + n);
    basis.view_mut((0, 0), (n, 1)).copy_from(&tangent);
    for i in 0..n {
        basis[(n + i, 1 + i)] = 1.0;
    }
    let mut j = DMatrix::zeros(2 * n, 2 * n);
    for i in 0..n {
        j[(i, n + i)] = 1.0;
        j[(n + i, i)] = -1.0;
    }
    let form = basis.transpose() * (a.transpose() * &j * &a - &j) * &basis;
    assert!(form.amax() < 1e-10 * a.amax().powi(2), "Nᵀ(AᵀJA − J)N = {form}");
}

#[test]
fn redundant_constraints_and_multistage_schemes_are_errors() {
    let model = four_bar_tree();
    let vi = VariationalIntegrator::new(model.clone(), Scheme::midpoint(), 0.01, None).unwrap().with_constraints(loop_closure(&model, true)).unwrap();
    let q = closed_configuration(&model, 0.3);
    let (mut qn, mut pn) = (vec![0.0; 3], vec![0.0; 3]);
    let err = vi.step(&mut vi.workspace(), StepInput::new(4, &q, &[0.0; 3], &[0.0; 3]), &mut qn, &mut pn).unwrap_err();
    assert_eq!(err, ViError::DegenerateConstraints { step: 4 });
    // second order is not implemented with constraints: an error, not a wrong answer
    let closed = integrator(Scheme::midpoint(), 0.01, None);
    let mut so = closed.second_order_workspace();
    let second = closed.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &[0.0; 3], &[0.0; 3]), &[0.0; 6]);
    assert!(matches!(second, Err(ViError::InvalidParameter(_))));
    let simpson = VariationalIntegrator::new(model.clone(), Scheme::simpson(), 0.01, None).unwrap();
    assert!(matches!(simpson.with_constraints(loop_closure(&model, false)), Err(ViError::InvalidParameter(_))));
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
