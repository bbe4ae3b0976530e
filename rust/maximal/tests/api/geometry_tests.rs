//! Signed distances between shapes: witness points consistent with the distance, gradients and
//! contact-frame derivatives against central differences, near-degenerate pairs, closest points
//! on segments against sampling.

use nalgebra::{Matrix3, UnitQuaternion, Vector3};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vidyn_maximal::body::Pose;
use vidyn_maximal::geometry::{closest_on_segments, distance_gradient, proximity, proximity_jacobian, Shape};

fn v(x: f64, y: f64, z: f64) -> Vector3<f64> {
    Vector3::new(x, y, z)
}

/// The 12 pose coordinates `[δx_A, δθ_A, δx_B, δθ_B]` applied to `(pa, pb)`.
fn perturbed(pa: &Pose, pb: &Pose, k: usize, h: f64) -> (Pose, Pose) {
    let e = Vector3::ith(k % 3, h);
    let z = Vector3::zeros();
    match k / 3 {
        0 => (pa.retract(&e, &z), *pb),
        1 => (pa.retract(&z, &e), *pb),
        2 => (*pa, pb.retract(&e, &z)),
        _ => (*pa, pb.retract(&z, &e)),
    }
}

/// Largest difference between `distance_gradient` and central differences of `φ` (step `h`).
fn gradient_error(a: &Shape, pa: &Pose, b: &Shape, pb: &Pose, h: f64) -> f64 {
    let prox = proximity(&a.placed(pa), &b.placed(pb)).unwrap();
    let g = distance_gradient(&prox, (&pa.x, &pa.rotation()), (&pb.x, &pb.rotation()));
    let phi = |(qa, qb): (Pose, Pose)| proximity(&a.placed(&qa), &b.placed(&qb)).unwrap().distance;
    (0..12).map(|k| ((phi(perturbed(pa, pb, k, h)) - phi(perturbed(pa, pb, k, -h))) / (2.0 * h) - g[k]).abs()).fold(0.0, f64::max)
}

/// `w_A − w_B = φ n`, `|n| = 1`.
fn check_witnesses(a: &Shape, pa: &Pose, b: &Shape, pb: &Pose) {
    let p = proximity(&a.placed(pa), &b.placed(pb)).unwrap();
    assert!((p.normal.norm() - 1.0).abs() < 1e-14);
    assert!((p.point_a - p.point_b - p.normal * p.distance).amax() < 1e-14, "{p:?}");
}

fn random_pose(rng: &mut ChaCha8Rng, spread: f64) -> Pose {
    let mut r = || rng.random_range(-1.0..1.0);
    Pose::new(v(r(), r(), r()) * spread, UnitQuaternion::from_scaled_axis(v(r(), r(), r()) * 2.0))
}

fn random_shape(rng: &mut ChaCha8Rng, kind: usize) -> Shape {
    let mut r = || rng.random_range(-1.0_f64..1.0);
    let radius = 0.1 + 0.2 * r().abs();
    match kind {
        0 => Shape::Sphere { centre: v(r(), r(), r()) * 0.2, radius },
        1 => Shape::Capsule { a: v(r(), r(), r()) * 0.4, b: v(r(), r(), r()) * 0.4, radius },
        _ => Shape::Box {
            centre: v(r(), r(), r()) * 0.2,
            rotation: UnitQuaternion::from_scaled_axis(v(r(), r(), r())).to_rotation_matrix().into_inner(),
            half_extents: v(0.1 + 0.3 * r().abs(), 0.1 + 0.3 * r().abs(), 0.1 + 0.3 * r().abs()),
        },
    }
}

#[test]
fn signed_distance_gradients_match_central_differences() {
    // φ is smooth away from the switches between closest-feature regions; random
    // configurations land inside a region. h = 1e-6 on lengths and angles of O(1):
    // truncation h²|φ'''| ≈ 1e-12·(1/curvature radius²), round-off ε|φ|/h ≈ 1e-10;
    // tolerance 1e-7 (the curvature radii here are ≥ 0.1 m but near-parallel capsules make
    // |φ'''| large, so configurations within 1e-2 rad of parallel are left to the next test)
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let pairs = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (2, 0)];
    let mut worst = [0.0_f64; 6];
    let mut inside = 0;
    for (p, &(ka, kb)) in pairs.iter().enumerate() {
        let mut done = 0;
        while done < 200 {
            let (a, b) = (random_shape(&mut rng, ka), random_shape(&mut rng, kb));
            let (pa, pb) = (random_pose(&mut rng, 0.5), random_pose(&mut rng, 0.5));
            if let (Shape::Capsule { a: a0, b: a1, .. }, Shape::Capsule { a: b0, b: b1, .. }) = (a.placed(&pa), b.placed(&pb)) {
                let (u, w) = ((a1 - a0).normalize(), (b1 - b0).normalize());
                if u.cross(&w).norm() < 1e-2 {
                    continue;
                }
            }
            check_witnesses(&a, &pa, &b, &pb);
            let prox = proximity(&a.placed(&pa), &b.placed(&pb)).unwrap();
            inside += usize::from(prox.distance < 0.0);
            worst[p] = worst[p].max(gradient_error(&a, &pa, &b, &pb, 1e-6));
            done += 1;
        }
    }
    println!("∇φ vs central differences (sphere–sphere, sphere–capsule, capsule–sphere, capsule–capsule, sphere–box, box–sphere): {worst:?}; {inside} of 1200 overlapping");
    assert!(worst.iter().all(|&e| e < 1e-7), "{worst:?}");
    assert!(inside > 100, "too few overlapping configurations: {inside}");
}

#[test]
fn near_degenerate_configurations_keep_their_gradients() {
    let id = Pose::default();
    let still = |x: Vector3<f64>| Pose::new(x, UnitQuaternion::identity());
    let rod = Shape::Capsule { a: v(-0.5, 0.0, 0.0), b: v(0.5, 0.0, 0.0), radius: 0.1 };
    // (1) exactly parallel, overlapping capsules: φ has a kink under in-plane rotation (one end
    // comes closer either way), and the contact point in the middle of the overlap gives the
    // gradient that central differences see, the mean of the one-sided slopes; h = 1e-6, the
    // kink's second-order part cancels in the central difference: tolerance 1e-8
    let upper = still(v(0.3, 0.0, 0.25));
    let e = gradient_error(&rod, &upper, &rod, &id, 1e-6);
    let p = proximity(&rod.placed(&upper), &rod.placed(&id)).unwrap();
    println!("parallel capsules: φ = {}, contact point {:?}, ∇φ error {e:.1e}", p.distance, p.midpoint());
    assert!((p.distance - 0.05).abs() < 1e-15 && (p.midpoint() - v(0.15, 0.0, 0.125)).amax() < 1e-15);
    assert!(e < 1e-8, "{e:e}");
    // (2) 1e-4 rad from parallel: the closest points sit at the overlap's ends (clamped), smooth
    // again; φ''' ~ L/θ so h = 1e-8 (truncation h²·1e4 ≈ 1e-12, round-off ε/h ≈ 1e-8):
    // tolerance 1e-7
    let tilted = Pose::new(v(0.3, 0.0, 0.25), UnitQuaternion::from_scaled_axis(v(0.0, 1e-4, 0.0)));
    let e = gradient_error(&rod, &tilted, &rod, &id, 1e-8);
    println!("capsules 1e-4 rad from parallel: ∇φ error {e:.1e}");
    assert!(e < 1e-7, "{e:e}");
    // (3) crossing capsules whose cores almost touch (φ ≈ −r_A − r_B + 1e-9): the normal is still
    // defined; h = 1e-12 keeps the core distance positive under differencing (round-off
    // ε·|φ|/h ≈ 1e-4): tolerance 1e-3
    let cross = Pose::new(v(0.0, 0.0, 1e-9), UnitQuaternion::from_scaled_axis(v(0.0, 0.0, 1.0)));
    let e = gradient_error(&rod, &cross, &rod, &id, 1e-12);
    println!("crossing capsules with cores 1e-9 apart: ∇φ error {e:.1e}");
    assert!(e < 1e-3, "{e:e}");
    // (4) a sphere centre inside a box: the nearest face's normal, φ = −depth − r; away from
    // the medial surfaces φ is affine in the centre (exact differences: tolerance 1e-9)
    let bx = Shape::Box { centre: Vector3::zeros(), rotation: Matrix3::identity(), half_extents: v(0.5, 0.3, 0.2) };
    let ball = Shape::Sphere { centre: Vector3::zeros(), radius: 0.1 };
    let inside = still(v(0.1, -0.05, 0.12));
    let p = proximity(&ball.placed(&inside), &bx.placed(&id)).unwrap();
    println!("sphere centre inside a box: φ = {}, normal {:?}", p.distance, p.normal);
    assert!((p.distance - (-(0.2 - 0.12) - 0.1)).abs() < 1e-15 && (p.normal - Vector3::z()).amax() < 1e-15);
    let e = gradient_error(&ball, &inside, &bx, &id, 1e-6);
    assert!(e < 1e-9, "{e:e}");
    // (5) a sphere near a box's corner and edge (outside): the normal along the offset
    for x in [v(0.6, 0.4, 0.3), v(0.6, 0.4, 0.0), v(0.5 + 1e-9, 0.0, 0.0)] {
        let e = gradient_error(&ball, &still(x), &bx, &id, 1e-10_f64.max(1e-6 * (x.x - 0.5)));
        assert!(e < 1e-5, "at {x:?}: {e:e}");
    }
    // (6) a point capsule (a = b) and a sphere: the swept-sphere code's point–point branch
    let dot = Shape::Capsule { a: v(0.1, 0.0, 0.0), b: v(0.1, 0.0, 0.0), radius: 0.2 };
    let p = proximity(&dot.placed(&id), &ball.placed(&still(v(0.1, 0.0, 0.5)))).unwrap();
    assert!((p.distance - 0.2).abs() < 1e-15 && (p.normal + Vector3::z()).amax() < 1e-15);
}

#[test]
fn closest_points_on_segments_are_minimal() {
    // against a dense sampling of [0, 1]², including parallel and point segments
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for case in 0..300 {
        let mut r = || v(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0));
        let (p1, mut d1, p2, mut d2) = (r(), r(), r(), r());
        match case % 4 {
            1 => d2 = d1 * -0.7,
            2 => d1 = Vector3::zeros(),
            3 => d2 = d1 * (1.0 + 1e-9),
            _ => {}
        }
        let (s, t) = closest_on_segments(&p1, &d1, &p2, &d2);
        assert!((0.0..=1.0).contains(&s) && (0.0..=1.0).contains(&t));
        let best = (p1 + d1 * s - p2 - d2 * t).norm();
        let n = 200;
        let mut sampled = f64::INFINITY;
        for i in 0..=n {
            for j in 0..=n {
                sampled = sampled.min((p1 + d1 * (i as f64 / n as f64) - p2 - d2 * (j as f64 / n as f64)).norm());
            }
        }
        // the sampling's grid is 1/200 of segments of length ≤ 2√3: within 1e-12 of or below it
        assert!(best <= sampled + 1e-12, "case {case}: {best} > sampled {sampled}");
    }
}

#[test]
fn contact_frame_derivatives_match_central_differences() {
    // ∂n and ∂P (the linearisation's input): random sphere–sphere, sphere–capsule,
    // capsule–capsule pairs with their closest points inside or clamped, and sphere–box pairs
    // in both orders (face, edge and corner regions, centre inside); h = 1e-6: truncation
    // ~h²·|n'''| ≈ 1e-12/(distance³) and round-off ~ε/h ≈ 1e-10 for the distances ≥ 0.05 m kept
    // here: tolerance 1e-6
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let h = 1e-6;
    let mut worst = 0.0_f64;
    let mut tested = 0;
    let mut boxes_inside = 0;
    while tested < 1200 {
        let kinds = [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (2, 0)][tested % 6];
        let (a, b) = (random_shape(&mut rng, kinds.0), random_shape(&mut rng, kinds.1));
        let (pa, pb) = (random_pose(&mut rng, 0.6), random_pose(&mut rng, 0.6));
        let core_distance = |qa: &Pose, qb: &Pose| {
            let p = proximity(&a.placed(qa), &b.placed(qb)).unwrap();
            let radius = |s: &Shape| match s {
                Shape::Sphere { radius, .. } | Shape::Capsule { radius, .. } => *radius,
                Shape::Box { .. } => 0.0,
            };
            p.distance + radius(&a) + radius(&b)
        };
        let Some((jn, jp)) = proximity_jacobian(&a, &pa, &b, &pb) else { continue };
        // swept spheres: cores at least 5 cm apart; sphere–box: the centre 5 cm outside or
        // inside, at least 1e-3 from the clamp's region boundaries (where ∂n jumps) and, inside,
        // 1e-3 nearer one face than any other (the medial surfaces)
        if kinds.0 != 2 && kinds.1 != 2 && core_distance(&pa, &pb) < 0.05 {
            continue;
        }
        if kinds.0 == 2 || kinds.1 == 2 {
            let (sph, ps, bx, pbx) = if kinds.0 == 0 { (&a, &pa, &b, &pb) } else { (&b, &pb, &a, &pa) };
            let (Shape::Sphere { centre, .. }, Shape::Box { centre: o, rotation, half_extents }) = (sph, bx) else { unreachable!() };
            let p = (pbx.rotation() * rotation).transpose() * (ps.point(centre) - pbx.point(o));
            let depth = half_extents - p.abs();
            let inside = depth.min() > 0.0;
            let mut sorted: Vec<f64> = depth.iter().copied().collect();
            sorted.sort_by(f64::total_cmp);
            let outside_by = (p - p.zip_map(half_extents, |x, h| x.clamp(-h, h))).norm();
            if depth.abs().min() < 1e-3 || inside && sorted[1] - sorted[0] < 1e-3 || !inside && outside_by < 0.05 {
                continue;
            }
            boxes_inside += usize::from(inside);
        }
        let frame = |(qa, qb): (Pose, Pose)| {
            let p = proximity(&a.placed(&qa), &b.placed(&qb)).unwrap();
            (p.normal, p.midpoint())
        };
        for k in 0..12 {
            let ((np, pp), (nm, pm)) = (frame(perturbed(&pa, &pb, k, h)), frame(perturbed(&pa, &pb, k, -h)));
            worst = worst.max(((np - nm) / (2.0 * h) - jn.column(k)).amax()).max(((pp - pm) / (2.0 * h) - jp.column(k)).amax());
        }
        tested += 1;
    }
    println!("contact frame (∂n, ∂P) vs central differences, 1200 pairs ({boxes_inside} sphere centres inside a box): {worst:.1e}");
    assert!(worst < 1e-6, "{worst:e}");
    assert!(boxes_inside > 10, "too few centres inside a box: {boxes_inside}");
}
