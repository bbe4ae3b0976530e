//! Calls one kernel `N` times on one robot, cycling through a state file, for instruction
//! counts under callgrind (deterministic on a loaded machine, unlike wall clock):
//!
//! ```text
//! VIDYN_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=OUT \
//!     kernel_ir --urdf PATH --root fixed|freeflyer --states FILE --algo NAME --calls N
//! ```
//!
//! `NAME`: `rnea`, `aba`, `crba`, `minverse`, `rnea_d`, `aba_d`, `rnea_so` (the four tensors of
//! `rnea_second_order`), `aba_so` (the four tensors of `aba_second_order`). The state file is
//! `compare.py`'s (`--keep-tmp`). Ir per call = (Ir at `N` − Ir at `0`) / `N`.

use std::hint::black_box;
use vidyn_benches::States;
use vidyn_rbd::urdf::RootJoint;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).unwrap_or_else(|| panic!("missing {flag}")).clone();
    let root = if get("--root") == "freeflyer" { RootJoint::FreeFlyer } else { RootJoint::Fixed };
    let model = vidyn_rbd::urdf::from_urdf_file(get("--urdf"), root).expect("urdf");
    let states = States::read(get("--states")).expect("states");
    let calls: usize = get("--calls").parse().expect("--calls");
    let algo = get("--algo");
    let mut ws = model.workspace();
    let mut so_ws = (algo == "rnea_so").then(|| model.second_order_workspace());
    let mut aba_so_ws = (algo == "aba_so").then(|| model.aba_second_order_workspace());
    for n in 0..calls {
        let k = n % states.count;
        let (q, v, a, tau) = (states.q(k), states.v(k), states.a(k), states.tau(k));
        match algo.as_str() {
            "rnea" => drop(black_box(vidyn_rbd::rnea(&model, &mut ws, q, v, a, None).expect("rnea"))),
            "aba" => drop(black_box(vidyn_rbd::aba(&model, &mut ws, q, v, tau, None).expect("aba"))),
            "crba" => drop(black_box(vidyn_rbd::crba(&model, &mut ws, q).expect("crba"))),
            "minverse" => drop(black_box(vidyn_rbd::minverse(&model, &mut ws, q).expect("minverse"))),
            "rnea_d" => drop(black_box(vidyn_rbd::rnea_derivatives(&model, &mut ws, q, v, a, None).expect("rnea_d"))),
            "aba_d" => drop(black_box(vidyn_rbd::aba_derivatives(&model, &mut ws, q, v, tau, None).expect("aba_d"))),
            "rnea_so" => drop(black_box(vidyn_rbd::rnea_second_order(&model, so_ws.as_mut().expect("so_ws"), q, v, a, None).expect("rnea_so"))),
            "aba_so" => drop(black_box(vidyn_rbd::aba_second_order(&model, aba_so_ws.as_mut().expect("aba_so_ws"), q, v, tau, None).expect("aba_so"))),
            other => panic!("unknown --algo {other}"),
        }
    }
}
