//! "Hot paths allocate nothing", tested: a counting global allocator wraps the system one,
//! and every algorithm is run once its workspace exists. The count is per thread, so the
//! test harness's own threads cannot disturb it.

use vidyn_rbd::builders::random_tree;
use vidyn_rbd::*;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{allocations, CountingAlloc};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn algorithms_do_not_allocate_once_the_workspace_exists() {
    let model = random_tree(20, 7, &Joint::examples());
    let mut ws = model.workspace();
    let q = neutral(&model);
    let v: Vec<f64> = (0..model.nv).map(|k| 0.1 * k as f64).collect();
    let frame = model.frames.len() - 1;
    assert_eq!(allocations(|| rnea(&model, &mut ws, &q, &v, &v, None).map(|_| ())), 0, "rnea");
    assert_eq!(allocations(|| aba(&model, &mut ws, &q, &v, &v, None).map(|_| ())), 0, "aba");
    assert_eq!(allocations(|| crba(&model, &mut ws, &q).map(|_| ())), 0, "crba");
    assert_eq!(allocations(|| minverse(&model, &mut ws, &q).map(|_| ())), 0, "minverse");
    assert_eq!(allocations(|| forward_kinematics(&model, &mut ws, &q, &v, &v)), 0, "forward_kinematics");
    assert_eq!(allocations(|| gravity(&model, &mut ws, &q).map(|_| ())), 0, "gravity");
    assert_eq!(allocations(|| nonlinear_effects(&model, &mut ws, &q, &v).map(|_| ())), 0, "nle");
    assert_eq!(allocations(|| kinetic_energy(&model, &mut ws, &q, &v)), 0, "kinetic energy");
    assert_eq!(allocations(|| potential_energy(&model, &mut ws, &q)), 0, "potential energy");
    assert_eq!(allocations(|| rnea_derivatives(&model, &mut ws, &q, &v, &v, None).map(|_| ())), 0, "rnea derivatives");
    assert_eq!(allocations(|| aba_derivatives(&model, &mut ws, &q, &v, &v, None).map(|_| ())), 0, "aba derivatives");
    assert_eq!(allocations(|| frame_jacobian(&model, &mut ws, &q, frame, ReferenceFrame::World).map(|_| ())), 0, "jacobian");
}

#[test]
fn second_order_derivatives_do_not_allocate_once_the_workspace_exists() {
    let model = random_tree(20, 7, &Joint::examples());
    let mut ws = model.workspace();
    let mut so = model.second_order_workspace();
    let q = neutral(&model);
    let v: Vec<f64> = (0..model.nv).map(|k| 0.1 * k as f64).collect();
    assert_eq!(allocations(|| rnea_second_order(&model, &mut so, &q, &v, &v, None).map(|_| ())), 0, "rnea second order");
    assert_eq!(allocations(|| rnea_second_order_contracted(&model, &mut ws, &q, &v, &v, &v, None).map(|_| ())), 0, "contracted");
}

#[test]
fn external_forces_and_forward_second_order_do_not_allocate_once_the_workspace_exists() {
    let model = random_tree(20, 7, &Joint::examples());
    let mut ws = model.workspace();
    let mut aso = model.aba_second_order_workspace();
    let mut so = model.second_order_workspace();
    let q = neutral(&model);
    let v: Vec<f64> = (0..model.nv).map(|k| 0.1 * k as f64).collect();
    let fext: Vec<vidyn_spatial::Force> = (0..model.nbodies()).map(|b| vidyn_spatial::Force::from_vector(&nalgebra::Vector6::repeat(0.1 * b as f64))).collect();
    assert_eq!(allocations(|| rnea(&model, &mut ws, &q, &v, &v, Some(&fext)).map(|_| ())), 0, "rnea with fext");
    assert_eq!(allocations(|| aba(&model, &mut ws, &q, &v, &v, Some(&fext)).map(|_| ())), 0, "aba with fext");
    assert_eq!(allocations(|| rnea_derivatives(&model, &mut ws, &q, &v, &v, Some(&fext)).map(|_| ())), 0, "rnea_derivatives with fext");
    assert_eq!(allocations(|| aba_derivatives(&model, &mut ws, &q, &v, &v, Some(&fext)).map(|_| ())), 0, "aba_derivatives with fext");
    assert_eq!(allocations(|| rnea_second_order(&model, &mut so, &q, &v, &v, Some(&fext)).map(|_| ())), 0, "rnea_second_order with fext");
    assert_eq!(allocations(|| rnea_second_order_contracted(&model, &mut ws, &q, &v, &v, &v, Some(&fext)).map(|_| ())), 0, "contracted ext");
    assert_eq!(allocations(|| aba_second_order(&model, &mut aso, &q, &v, &v, None).map(|_| ())), 0, "aba_second_order");
    assert_eq!(allocations(|| aba_second_order(&model, &mut aso, &q, &v, &v, Some(&fext)).map(|_| ())), 0, "aba_second_order with fext");
    assert_eq!(allocations(|| aba_second_order_contracted(&model, &mut ws, &q, &v, &v, &v, None).map(|_| ())), 0, "aba_second_order_contracted");
    assert_eq!(
        allocations(|| aba_second_order_contracted(&model, &mut ws, &q, &v, &v, &v, Some(&fext)).map(|_| ())),
        0,
        "aba_second_order_contracted with fext"
    );
}

#[test]
fn forward_second_order_on_a_long_chain_does_not_allocate() {
    // 100 links: the O(n³) routes of aba_second_order (products and the articulated solve)
    let model = vidyn_rbd::builders::pendulum_chain(100, false);
    let mut aso = model.aba_second_order_workspace();
    let q: Vec<f64> = (0..model.nq).map(|k| 0.01 * k as f64).collect();
    let v: Vec<f64> = (0..model.nv).map(|k| 0.1 * k as f64).collect();
    assert_eq!(allocations(|| aba_second_order(&model, &mut aso, &q, &v, &v, None).map(|_| ())), 0, "aba_second_order, 100 links");
}
