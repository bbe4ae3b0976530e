//! Panda Cartesian reach by iLQR (the problem of `examples/optim_panda_reach.py`), for
//! profiling the optimiser without Python.
//! `[VELOCITY_STATE=1] cargo run -p vidyn-optim --release --example panda_reach -- path/to/panda.urdf [gravity 0|1] [repeats]`

use nalgebra::{DMatrix, DVector};
use std::sync::Arc;
use vidyn_optim::{ilqr, IlqrOptions, PointCost, PointTrack, QuadraticCost, VelocityCost, ViDynamics};
use vidyn_rbd::urdf::{from_urdf_file, RootJoint};
use vidyn_vi::{Scheme, VariationalIntegrator};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().expect("usage: panda_reach path/to/panda.urdf [gravity 0|1]");
    let gravity = args.get(1).is_none_or(|g| g != "0");
    let repeats: usize = args.get(2).map_or(3, |r| r.parse().expect("repeats: a count"));
    let mut model = from_urdf_file(path, RootJoint::Fixed).expect("panda URDF");
    if !gravity {
        model.gravity.linear.fill(0.0);
    }
    let model = Arc::new(model);
    let n = model.nv;
    let (dt, steps) = (0.01, 100);
    let q0 = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02, 0.02];
    let frame = model.frame_index("panda_hand_tcp").unwrap();
    let mut ws = model.workspace();
    vidyn_rbd::frame_jacobian(&model, &mut ws, &q0, frame, vidyn_rbd::ReferenceFrame::LocalWorldAligned).unwrap();
    let p0 = ws.frame_placements[frame].translation;
    let target = [p0[0] + 0.15, p0[1] + 0.25, p0[2] - 0.2];
    let w: Vec<f64> = (0..2 * n).map(|i| if i < n { 1e-2 } else { 1e-1 }).collect();
    let wn: Vec<f64> = (0..2 * n).map(|i| if i < n { 1e-2 } else { 10.0 }).collect();
    let y0: Vec<f64> = q0.iter().copied().chain(std::iter::repeat_n(0.0, n)).collect();
    let quad = QuadraticCost::new(
        vec![DMatrix::from_diagonal(&DVector::from_vec(w)) * dt],
        vec![DMatrix::identity(n, n) * 1e-3 * dt],
        DMatrix::from_diagonal(&DVector::from_vec(wn)),
        y0,
        vec![],
    )
    .unwrap();
    let vi = VariationalIntegrator::new(model.clone(), Scheme::by_name("trapezoid", None).unwrap(), dt, None).unwrap();
    // VELOCITY_STATE=1: iterate on (q, v) (`ViDynamics::with_velocity_state`)
    let velocity_state = std::env::var("VELOCITY_STATE").is_ok();
    let base: Box<dyn vidyn_optim::Cost> = if velocity_state { Box::new(quad) } else { Box::new(VelocityCost::new(model.clone(), quad).unwrap()) };
    let cost = PointCost::new(model.clone(), base, 2 * n, vec![PointTrack::reach(frame, target, dt, 1e3, steps)], steps).unwrap();
    let dynamics = ViDynamics::new(&vi, None).unwrap();
    let dynamics = if velocity_state { dynamics.with_velocity_state().unwrap() } else { dynamics };
    let g = vidyn_rbd::gravity(&model, &mut ws, &q0).unwrap().to_vec();
    let u0: Vec<f64> = (0..steps).flat_map(|_| g.iter().copied()).collect();
    let x0: Vec<f64> = q0.iter().copied().chain(std::iter::repeat_n(0.0, n)).collect();
    let opts = IlqrOptions { max_iterations: 1000, tolerance: 1e-9, ..IlqrOptions::default() };
    for _ in 0..repeats {
        let res = ilqr(&dynamics, &cost, &x0, &u0, &opts).unwrap();
        println!("{}: {} accepted steps ({} outer iterations), cost {:.8}, wall {:.1} ms (after the rollout: cost, derivatives left, next backward pass {:.1}, other backward {:.1}, forward {:.1})", res.message, res.iterations, res.log.len(), res.cost, 1e3 * res.wall_time, 1e3 * res.time_linearize, 1e3 * res.time_backward, 1e3 * res.time_forward);
    }
}
