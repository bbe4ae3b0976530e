//! Times vidyn's algorithms over a state file and prints one JSON line per algorithm; the
//! peer `benches/peer/pinocchio_timings.cpp` prints the same schema for Pinocchio. Driven by
//! `benches/compare.py`.
//!
//! ```text
//! vidyn_timings --urdf PATH --root fixed|freeflyer --states FILE [--robot NAME]
//!               [--variant NAME] [--passes N] [--min-time S] [--algos LIST] [--limit N]
//!               [--check K] [--check-tensors K2]
//! vidyn_timings --urdf PATH --root fixed|freeflyer --describe
//! ```
//!
//! Algorithms (`--algos`, comma-separated):
//! * `fk`, `rnea`, `aba`, `crba`, `minverse`: forward kinematics (q, v, a), RNEA, ABA, CRBA,
//!   M⁻¹;
//! * `rnea_d` = [`vidyn_rbd::rnea_derivatives`] (∂τ/∂q, ∂τ/∂q̇, M full), `aba_d` =
//!   [`vidyn_rbd::aba_derivatives`] (∂q̈/∂q, ∂q̈/∂q̇, M⁻¹ full), `rnea_so` =
//!   [`vidyn_rbd::rnea_second_order`] (the four `(nv, nv, nv)` tensors);
//! * vidyn only (no Pinocchio counterpart): `rnea_so_c` = [`vidyn_rbd::rnea_second_order_contracted`]
//!   and `aba_so_c` = [`vidyn_rbd::aba_second_order_contracted`] with `λ` = the state's τ
//!   (standard normal), `aba_so` = [`vidyn_rbd::aba_second_order`].
//!
//! `--limit N` times only the first N states of the file (for the expensive second-order
//! algorithms). `--describe` prints the model's joints (name, kind, q and v offsets) so the
//! driver can map Pinocchio's coordinates onto vidyn's. `--check K` prints, instead of timing,
//! the results of the algorithms of `--algos` that have a check (`rnea`, `aba`, `crba`,
//! `minverse`, `rnea_d`, `aba_d`, `rnea_so`, `rnea_so_c`) on the first K states (matrices
//! row-major, tensors in C order `[i, j, k]`); tensors only on the first K2 states
//! (`--check-tensors`, default K). The timing method is in `vidyn_benches` (crate
//! documentation).

use std::fmt::Write as _;
use std::hint::black_box;
use std::process::ExitCode;
use vidyn_benches::{time_passes, States};
use vidyn_rbd::urdf::RootJoint;

struct Args {
    urdf: String,
    root: RootJoint,
    states: Option<String>,
    robot: String,
    variant: String,
    passes: usize,
    min_time: f64,
    algos: String,
    limit: usize,
    check: usize,
    check_tensors: Option<usize>,
    describe: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut a = Args {
        urdf: String::new(),
        root: RootJoint::Fixed,
        states: None,
        robot: "robot".into(),
        variant: "portable".into(),
        passes: 21,
        min_time: 0.3,
        algos: "fk,rnea,aba,crba,minverse".into(),
        limit: usize::MAX,
        check: 0,
        check_tensors: None,
        describe: false,
    };
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("missing value after {arg}"));
        match arg.as_str() {
            "--urdf" => a.urdf = value()?,
            "--root" => {
                a.root = match value()?.as_str() {
                    "fixed" => RootJoint::Fixed,
                    "freeflyer" => RootJoint::FreeFlyer,
                    other => return Err(format!("--root must be fixed or freeflyer, not {other}")),
                }
            }
            "--states" => a.states = Some(value()?),
            "--robot" => a.robot = value()?,
            "--variant" => a.variant = value()?,
            "--passes" => a.passes = value()?.parse().map_err(|e| format!("--passes: {e}"))?,
            "--min-time" => a.min_time = value()?.parse().map_err(|e| format!("--min-time: {e}"))?,
            "--algos" => a.algos = value()?,
            "--limit" => a.limit = value()?.parse().map_err(|e| format!("--limit: {e}"))?,
            "--check" => a.check = value()?.parse().map_err(|e| format!("--check: {e}"))?,
            "--check-tensors" => a.check_tensors = Some(value()?.parse().map_err(|e| format!("--check-tensors: {e}"))?),
            "--describe" => a.describe = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.urdf.is_empty() || (a.states.is_none() && !a.describe) {
        return Err("usage: vidyn_timings --urdf PATH --root fixed|freeflyer (--states FILE | --describe) [--robot NAME] \
                    [--variant NAME] [--passes N] [--min-time S] [--algos LIST] [--limit N] [--check K] [--check-tensors K2]"
            .into());
    }
    Ok(a)
}

fn json_floats(x: impl IntoIterator<Item = f64>) -> String {
    let mut s = String::from("[");
    for (i, v) in x.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        // `{:?}` prints the shortest representation that round-trips.
        write!(s, "{v:?}").expect("write to String");
    }
    s.push(']');
    s
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let model = vidyn_rbd::urdf::from_urdf_file(&args.urdf, args.root).map_err(|e| e.to_string())?;
    if args.describe {
        let joints: Vec<String> = (0..model.nbodies())
            .map(|i| {
                let j = &model.joints[i];
                format!(
                    "{{\"name\":\"{}\",\"kind\":\"{}\",\"idx_q\":{},\"nq\":{},\"idx_v\":{},\"nv\":{}}}",
                    model.joint_names[i],
                    j.kind_name(),
                    model.idx_q[i],
                    j.nq(),
                    model.idx_v[i],
                    j.nv()
                )
            })
            .collect();
        println!("{{\"nq\":{},\"nv\":{},\"joints\":[{}]}}", model.nq, model.nv, joints.join(","));
        return Ok(());
    }
    let path = args.states.as_deref().expect("checked in parse_args");
    let s = States::read(path).map_err(|e| e.to_string())?;
    if s.nq != model.nq || s.nv != model.nv {
        return Err(format!("state file has nq={} nv={}, model has nq={} nv={}", s.nq, s.nv, model.nq, model.nv));
    }
    let mut ws = model.workspace();
    let (robot, variant) = (&args.robot, &args.variant);

    let algos: Vec<&str> = args.algos.split(',').filter(|a| !a.is_empty()).collect();
    let wants = |name: &str| algos.contains(&name);
    // The second-order workspaces hold 4·nv³ (8·nv³) doubles: only created when asked for.
    let mut so_ws = (wants("rnea_so")).then(|| model.second_order_workspace());
    let mut aba_so_ws = (wants("aba_so")).then(|| model.aba_second_order_workspace());

    if args.check > 0 {
        let err = |e: vidyn_rbd::RbdError| e.to_string();
        // nalgebra matrices are column-major: emit the transpose's storage (row-major).
        macro_rules! row_major {
            ($m:expr) => {
                json_floats($m.transpose().iter().copied())
            };
        }
        let k_tensors = args.check_tensors.unwrap_or(args.check);
        if let Some(so) = so_ws.as_mut() {
            // As in the timing loop, the tensors are not cleared between calls: fill them from
            // another state first, so that the check covers stale entries too.
            vidyn_rbd::rnea_second_order(&model, so, s.q(s.count - 1), s.v(s.count - 1), s.a(s.count - 1), None).map_err(err)?;
        }
        for k in 0..args.check.min(s.count) {
            let emit = |algo: &str, values: String| {
                println!("{{\"lib\":\"vidyn\",\"variant\":\"{variant}\",\"robot\":\"{robot}\",\"check\":\"{algo}\",\"state\":{k},\"values\":{values}}}");
            };
            if wants("rnea") {
                emit("rnea", json_floats(vidyn_rbd::rnea(&model, &mut ws, s.q(k), s.v(k), s.a(k), None).map_err(err)?.iter().copied()));
            }
            if wants("aba") {
                emit("aba", json_floats(vidyn_rbd::aba(&model, &mut ws, s.q(k), s.v(k), s.tau(k), None).map_err(err)?.iter().copied()));
            }
            if wants("crba") {
                emit("crba", row_major!(vidyn_rbd::crba(&model, &mut ws, s.q(k)).map_err(err)?));
            }
            if wants("minverse") {
                emit("minverse", row_major!(vidyn_rbd::minverse(&model, &mut ws, s.q(k)).map_err(err)?));
            }
            if wants("rnea_d") {
                let d = vidyn_rbd::rnea_derivatives(&model, &mut ws, s.q(k), s.v(k), s.a(k), None).map_err(err)?;
                emit("rnea_d:dtau_dq", row_major!(d.dtau_dq));
                emit("rnea_d:dtau_dv", row_major!(d.dtau_dv));
                emit("rnea_d:dtau_da", row_major!(d.dtau_da));
            }
            if wants("aba_d") {
                let d = vidyn_rbd::aba_derivatives(&model, &mut ws, s.q(k), s.v(k), s.tau(k), None).map_err(err)?;
                emit("aba_d:ddq_dq", row_major!(d.dddq_dq));
                emit("aba_d:ddq_dv", row_major!(d.dddq_dv));
                emit("aba_d:ddq_dtau", row_major!(d.dddq_dtau));
            }
            if wants("rnea_so_c") {
                let c = vidyn_rbd::rnea_second_order_contracted(&model, &mut ws, s.q(k), s.v(k), s.a(k), s.tau(k), None).map_err(err)?;
                emit("rnea_so_c:d2tau_dq2", row_major!(c.d2tau_dq2));
                emit("rnea_so_c:d2tau_dv2", row_major!(c.d2tau_dv2));
                emit("rnea_so_c:d2tau_dqdv", row_major!(c.d2tau_dqdv));
            }
            if let (Some(so), true) = (so_ws.as_mut(), k < k_tensors) {
                let t = vidyn_rbd::rnea_second_order(&model, so, s.q(k), s.v(k), s.a(k), None).map_err(err)?;
                emit("rnea_so:d2tau_dq2", json_floats(t.d2tau_dq2.as_slice().iter().copied()));
                emit("rnea_so:d2tau_dv2", json_floats(t.d2tau_dv2.as_slice().iter().copied()));
                emit("rnea_so:d2tau_dqdv", json_floats(t.d2tau_dqdv.as_slice().iter().copied()));
                emit("rnea_so:dm_dq", json_floats(t.dm_dq.as_slice().iter().copied()));
            }
        }
        return Ok(());
    }

    let (n, passes, min_time) = (s.count.min(args.limit).max(1), args.passes, args.min_time);
    for &algo in &algos {
        // Every call is checked (`expect`) and its result goes through `black_box`.
        let t = match algo {
            "fk" => time_passes(n, passes, min_time, |k| {
                vidyn_rbd::forward_kinematics(&model, &mut ws, s.q(k), s.v(k), s.a(k)).expect("fk");
                black_box(&ws.accelerations);
            }),
            "rnea" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::rnea(&model, &mut ws, s.q(k), s.v(k), s.a(k), None).expect("rnea"));
            }),
            "aba" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::aba(&model, &mut ws, s.q(k), s.v(k), s.tau(k), None).expect("aba"));
            }),
            "crba" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::crba(&model, &mut ws, s.q(k)).expect("crba"));
            }),
            "minverse" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::minverse(&model, &mut ws, s.q(k)).expect("minverse"));
            }),
            "rnea_d" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::rnea_derivatives(&model, &mut ws, s.q(k), s.v(k), s.a(k), None).expect("rnea_d"));
            }),
            "aba_d" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::aba_derivatives(&model, &mut ws, s.q(k), s.v(k), s.tau(k), None).expect("aba_d"));
            }),
            "rnea_so" => {
                let so = so_ws.as_mut().expect("created above");
                time_passes(n, passes, min_time, |k| {
                    black_box(vidyn_rbd::rnea_second_order(&model, so, s.q(k), s.v(k), s.a(k), None).expect("rnea_so"));
                })
            }
            "rnea_so_c" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::rnea_second_order_contracted(&model, &mut ws, s.q(k), s.v(k), s.a(k), s.tau(k), None).expect("rnea_so_c"));
            }),
            "aba_so" => {
                let so = aba_so_ws.as_mut().expect("created above");
                time_passes(n, passes, min_time, |k| {
                    black_box(vidyn_rbd::aba_second_order(&model, so, s.q(k), s.v(k), s.tau(k), None).expect("aba_so"));
                })
            }
            "aba_so_c" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::aba_second_order_contracted(&model, &mut ws, s.q(k), s.v(k), s.tau(k), s.tau(k), None).expect("aba_so_c"));
            }),
            other => return Err(format!("unknown algorithm {other}")),
        };
        println!(
            "{{\"lib\":\"vidyn\",\"variant\":\"{variant}\",\"robot\":\"{robot}\",\"algo\":\"{algo}\",\"nq\":{},\"nv\":{},\"count\":{n},\
             \"passes\":{},\"median_ns\":{:.2},\"min_ns\":{:.2},\"max_ns\":{:.2}}}",
            s.nq, s.nv, t.passes, t.median_ns, t.min_ns, t.max_ns
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vidyn_timings: {e}");
            ExitCode::FAILURE
        }
    }
}
