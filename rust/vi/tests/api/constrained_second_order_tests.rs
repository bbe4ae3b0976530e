//! Checks of the second order through the constrained step and its momentum projection (module
//! `constrained_second_order`): against central differences of the exact first-order
//! linearisation (an independent derivation: the KKT elimination of module `constrained` and
//! the projection's own linearisation), on the four-bar linkage for every scheme and at the
//! steps around a touchdown of a contact schedule; `A`, `B` equal to the first-order
//! linearisation's; the full tensors consistent with the contraction.

use crate::common::chart_second_order::{assembled, differenced_hessian};
use crate::common::constraint::{closed_configuration, integrator};
use crate::common::schedule::masks;
use crate::common::second_order::{one_dof, random};
use crate::*;
use nalgebra::{DMatrix, Vector3};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

fn schemes() -> [Scheme; 4] {
    [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson(), Scheme::lobatto(3).unwrap()]
}

/// `A`, `B` of the first-order linearisation at `(q, p, u)` of step `k`, and the next state.
fn first_order(vi: &VariationalIntegrator, k: usize, q: &[f64], p: &[f64], u: &[f64]) -> (DMatrix<f64>, Vec<f64>) {
    let n = vi.n();
    let (mut a, mut b, mut qn, mut pn) = (DMatrix::zeros(2 * n, 2 * n), DMatrix::zeros(2 * n, n), vec![0.0; vi.nq()], vec![0.0; n]);
    vi.linearize(&mut vi.workspace(), StepInput::new(k, q, p, u), &mut a, &mut b, &mut qn, &mut pn).unwrap();
    let mut ab = DMatrix::zeros(2 * n, 3 * n);
    ab.columns_mut(0, 2 * n).copy_from(&a);
    ab.columns_mut(2 * n, n).copy_from(&b);
    (ab, qn)
}

/// The step of the differences of the first order ([`differenced_hessian`], Richardson from
/// `h` and `2h`): truncation O(h⁴) and the first order's rounding over `h` meet near it. Over
/// every case below the deviation is at most 1.6e-10 of `|H|` at 1e-4 (a rounding-dominated
/// fixed-base touchdown) against 9.1e-10 at 2e-4 and 1.5e-8 at 4e-4 (a floating-base flight
/// step whose truncation falls 16-fold per halving of `h`).
const STEP: f64 = 1e-4;

/// The contracted second order at `(q, p, u)` of step `k` against Richardson differences of
/// the exact first order, and its `A`, `B` against the first order's; returns the relative
/// deviation of the second order `max|H − D| / max|D|`.
fn deviation(vi: &VariationalIntegrator, k: usize, q: &[f64], p: &[f64], u: &[f64], lam: &[f64], what: &str) -> f64 {
    let n = vi.n();
    let (ab, q_next) = first_order(vi, k, q, p, u);
    let mut so = vi.second_order_workspace();
    let d = vi.linearize_second_order_contracted(&mut so, StepInput::new(k, q, p, u), lam).unwrap();
    let mut ours = DMatrix::zeros(2 * n, 3 * n);
    ours.columns_mut(0, 2 * n).copy_from(&d.a);
    ours.columns_mut(2 * n, n).copy_from(&d.b);
    let first = (&ours - &ab).amax() / ab.amax();
    assert!(first < 1e-11, "{what}: A, B off the first-order linearisation's by {first:e}");
    let h = assembled(d);
    let reference = differenced_hessian(vi, k, (q, p, u), &q_next, lam, STEP);
    let dev = (&h - &reference).amax() / reference.amax();
    println!("{what}: |A,B − linearize| {first:.1e}, |H − differences| / |H| = {dev:.1e} (|H| = {:.2e})", reference.amax());
    dev
}

/// The four-bar linkage (two loop-closure constraints) with damping, springs and controls,
/// from a configuration slightly off the constraint set, every scheme, against the differences
/// of the first order ([`STEP`]; their error, truncation and rounding, is at most 1.6e-10 of
/// `|H|` over this file's cases, asserted 1e-9); a wrong term (a missing third derivative of
/// `h`, a transposed block of the projection) is of the size of `H` itself.
#[test]
fn the_four_bar_second_order_matches_differences_of_the_first_order() {
    for sc in schemes() {
        let forces = JointForces { damping: vec![0.2, 0.1, 0.3], stiffness: vec![0.5, 1.0, 0.0], rest: vec![0.1, -1.0, 0.3] };
        let vi = integrator(sc, 0.02, Some(forces)).with_newton(1e-15, 60).unwrap();
        let mut q = closed_configuration(vi.model(), 0.4);
        q[0] += 1e-3;
        let (p, u) = (vec![0.3, -0.2, 0.1], vec![0.5, -0.3, 0.2]);
        let lam = [0.7, -0.4, 1.1, 0.3, 0.9, -0.6];
        let dev = deviation(&vi, 0, &q, &p, &u, &lam, &format!("four-bar s = {}", vi.scheme().s));
        assert!(dev < 1e-9, "four-bar s = {}: second order off the differences by {dev:e}", vi.scheme().s);
    }
}

/// A random 5-link tree with gravity, damping, springs and controls whose last body's point
/// touches the plane `z = z_j` at knot `j` of its free motion, held there from step `j` on (a
/// schedule), trapezoid and midpoint. The last free step's second order is the unconstrained
/// one (module `second_order`) to rounding (1e-10 of `|H|`: both sum `(1/Δt)·M`-sized terms
/// that cancel in this small `H`, by different operations; measured 1.1e-12); the touchdown step's (an impulse at its start) and
/// a stance step's match the differences of the first order to 1e-9 relative (measured
/// up to 1.6e-10 at [`STEP`]; on the free step the differences' rounding alone reaches 3e-8
/// of its far smaller `H`, which is why that step is checked against the exact form instead).
#[test]
fn the_second_order_holds_across_a_touchdown() {
    let model = Arc::new(vidyn_rbd::builders::random_tree(5, 3, &one_dof()));
    let n = model.nv;
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let forces = JointForces { damping: vec![0.1; n], stiffness: vec![0.4; n], rest: random(&mut rng, n, 0.3) };
    let (j, steps) = (4, 8);
    for sc in [Scheme::trapezoid(), Scheme::midpoint()] {
        let free = VariationalIntegrator::new(model.clone(), sc, 0.01, Some(forces.clone())).unwrap().with_newton(1e-15, 60).unwrap();
        let q0 = random(&mut rng, n, 0.8);
        let v0 = random(&mut rng, n, 1.0);
        let mut p0 = vec![0.0; n];
        free.momentum(&mut free.workspace(), &q0, &v0, &mut p0).unwrap();
        let u = random(&mut rng, steps * n, 0.5);
        let flight = rollout(&free, &q0, &p0, &u).unwrap();
        let foot = Vector3::new(0.05, -0.1, 0.2);
        let x = tip_point(&model, flight.q_at(j), n - 1, &foot);
        let contact =
            vec![Constraint::PointOnPlane { a: BodyPoint { body: None, point: x }, normal: Vector3::z(), b: BodyPoint { body: Some(n - 1), point: foot } }];
        let schedule: Vec<&[usize]> = (0..steps).map(|k| if k < j { &[][..] } else { &[0][..] }).collect();
        let vi = free.clone().with_constraints(contact).unwrap().with_constraint_schedule(&masks(1, &schedule)).unwrap();
        let traj = rollout(&vi, &q0, &p0, &u).unwrap();
        let lam = random(&mut rng, 2 * n, 1.0);
        let at = |k: usize| StepInput::new(k, traj.q_at(k), traj.p_at(k), &u[k * n..(k + 1) * n]);
        let contracted =
            |vi: &VariationalIntegrator| assembled(vi.linearize_second_order_contracted(&mut vi.second_order_workspace(), at(j - 1), &lam).unwrap());
        let (ours, unconstrained) = (contracted(&vi), contracted(&free));
        let off = (&ours - &unconstrained).amax() / unconstrained.amax();
        assert!(off < 1e-10, "s = {}: the free step's second order off the unconstrained one by {off:e}", vi.scheme().s);
        for k in [j, j + 1] {
            let what = format!("touchdown s = {} step {k}", vi.scheme().s);
            let dev = deviation(&vi, k, traj.q_at(k), traj.p_at(k), &u[k * n..(k + 1) * n], &lam, &what);
            assert!(dev < 1e-9, "{what}: second order off the differences by {dev:e}");
        }
    }
}

/// The world position of point `c` of body `body` at `q`.
fn tip_point(model: &vidyn_rbd::Model, q: &[f64], body: usize, c: &Vector3<f64>) -> Vector3<f64> {
    let mut ws = model.workspace();
    vidyn_rbd::placements(model, &mut ws, q).unwrap();
    ws.placements[body].act_point(c)
}

/// The full tensors of a constrained step contracted with `λ` equal the contracted form.
#[test]
fn the_full_tensors_are_the_contraction() {
    let vi = integrator(Scheme::simpson(), 0.02, None);
    let n = vi.n();
    let q = closed_configuration(vi.model(), 0.2);
    let (p, u) = (vec![0.1, 0.2, -0.1], vec![0.3, 0.0, -0.2]);
    let lam = [0.2, -0.7, 0.5, 1.0, -0.3, 0.4];
    let mut so = vi.second_order_workspace();
    let contracted = assembled(vi.linearize_second_order_contracted(&mut so, StepInput::new(0, &q, &p, &u), &lam).unwrap());
    let full = vi.linearize_second_order(&mut so, StepInput::new(0, &q, &p, &u)).unwrap();
    let (m, mut worst) = (2 * n, 0.0_f64);
    for j in 0..m {
        for k in 0..m {
            let x: f64 = (0..m).map(|i| lam[i] * full.fxx[(i * m + j) * m + k]).sum();
            worst = worst.max((x - contracted[(j, k)]).abs());
        }
    }
    assert!(worst < 1e-12 * contracted.amax(), "fxx·λ vs hxx: {worst:e}");
}

/// On the Lie group (module `chart_second_order`, constraints in its fixed chart): the floating
/// tree with gravity, damping and a spring, a tether from the world to its base and its tip
/// held on a plane of the base (both constraints between moving bodies and through every
/// joint kind), every scheme, against the differences of the exact first order on the
/// manifold (tangent coordinates carried by `difference`; tolerance as for the four-bar).
#[test]
fn the_second_order_on_the_group_matches_differences_with_constraints() {
    use crate::common::chart_second_order::{damped_tree_at_its_floor, floating_tree_inputs, TreeInputs};
    use crate::common::lie_group::tether_and_plane;
    let TreeInputs { model, q0, v0, u, lam } = floating_tree_inputs();
    for scheme in schemes() {
        let (free, _) = damped_tree_at_its_floor(&model, scheme, &q0, &v0);
        let vi = free.with_constraints(tether_and_plane(&model, &q0, 0.0)).unwrap();
        let mut p0 = vec![0.0; vi.n()];
        vi.momentum(&mut vi.workspace(), &q0, &v0, &mut p0).unwrap();
        let what = format!("floating tree s = {}", vi.scheme().s);
        let dev = deviation(&vi, 0, &q0, &p0, &u, &lam, &what);
        assert!(dev < 1e-9, "{what}: second order off the differences by {dev:e}");
    }
}

/// The same tree through a touchdown: a first step with no contact, then the plane held, the
/// tether engaging at knot `j` of that motion (its length the distance there): the flight
/// step, the last step before the touchdown, the touchdown step and the next, midpoint,
/// trapezoid and Simpson (whose touchdown imposes the tether at its interior point too).
#[test]
fn the_second_order_on_the_group_holds_across_a_touchdown() {
    use crate::common::chart_second_order::{damped_tree_at_its_floor, floating_tree_inputs, TreeInputs};
    use crate::common::lie_group::tether_and_plane;
    let TreeInputs { model, q0, v0, lam, .. } = floating_tree_inputs();
    let n = model.nv;
    let (j, steps) = (3, 6);
    let u: Vec<f64> = (0..steps * n).map(|i| 0.4 * ((i as f64) * 0.61).sin()).collect();
    for scheme in [Scheme::midpoint(), Scheme::trapezoid(), Scheme::simpson()] {
        let (free, p0) = damped_tree_at_its_floor(&model, scheme, &q0, &v0);
        let plane = tether_and_plane(&model, &q0, 0.0)[1].clone();
        let planar = free.clone().with_constraints(vec![plane.clone()]).unwrap();
        let motion = rollout(&planar, &q0, &p0, &u).unwrap();
        let Constraint::Distance { a, b, .. } = tether_and_plane(&model, &q0, 0.0)[0].clone() else { unreachable!() };
        let mut h = [0.0];
        let probe = free.clone().with_constraints(vec![Constraint::Distance { a: a.clone(), b: b.clone(), length: 1.0 }]).unwrap();
        probe.constraint_values(&mut probe.workspace(), motion.q_at(j), &mut h).unwrap();
        let tether = Constraint::Distance { a, b, length: (1.0 + h[0]).sqrt() };
        // (step 0 imposes nothing: a flight step of the constrained integrator)
        let schedule: Vec<&[usize]> = (0..steps)
            .map(|k| {
                if k == 0 {
                    &[][..]
                } else if k < j {
                    &[1][..]
                } else {
                    &[0, 1][..]
                }
            })
            .collect();
        let vi = free.with_constraints(vec![tether, plane]).unwrap().with_constraint_schedule(&masks(2, &schedule)).unwrap();
        let traj = rollout(&vi, &q0, &p0, &u).unwrap();
        for k in [0, j - 1, j, j + 1] {
            let what = format!("floating tree touchdown s = {} step {k}", vi.scheme().s);
            let dev = deviation(&vi, k, traj.q_at(k), traj.p_at(k), &u[k * n..(k + 1) * n], &lam, &what);
            assert!(dev < 1e-9, "{what}: second order off the differences by {dev:e}");
        }
    }
}
