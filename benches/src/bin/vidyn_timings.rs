//! Times vidyn's algorithms over a state file and prints one JSON line per algorithm; the
//! peer `benches/peer/pinocchio_timings.cpp` prints the same schema for Pinocchio. Driven by
//! `benches/compare.py`.
//!
//! ```text
//! vidyn_timings --urdf PATH --root fixed|freeflyer --states FILE [--robot NAME]
//!               [--variant NAME] [--passes N] [--min-time S] [--algos fk,rnea,aba,crba,minverse]
//!               [--check K]
//! vidyn_timings --urdf PATH --root fixed|freeflyer --describe
//! ```
//!
//! `--describe` prints the model's joints (name, kind, q and v offsets) so the driver can map
//! Pinocchio's coordinates onto vidyn's. `--check K` prints the RNEA, ABA, CRBA and M⁻¹ results
//! of the first K states instead of timing (matrices row-major). The timing method is in
//! `vidyn_benches` (crate documentation).

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
    check: usize,
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
        check: 0,
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
            "--check" => a.check = value()?.parse().map_err(|e| format!("--check: {e}"))?,
            "--describe" => a.describe = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.urdf.is_empty() || (a.states.is_none() && !a.describe) {
        return Err("usage: vidyn_timings --urdf PATH --root fixed|freeflyer (--states FILE | --describe) [--robot NAME] \
                    [--variant NAME] [--passes N] [--min-time S] [--algos LIST] [--check K]"
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

    if args.check > 0 {
        for k in 0..args.check.min(s.count) {
            let emit = |algo: &str, values: String| {
                println!("{{\"lib\":\"vidyn\",\"variant\":\"{variant}\",\"robot\":\"{robot}\",\"check\":\"{algo}\",\"state\":{k},\"values\":{values}}}");
            };
            let err = |e: vidyn_rbd::RbdError| e.to_string();
            emit("rnea", json_floats(vidyn_rbd::rnea(&model, &mut ws, s.q(k), s.v(k), s.a(k)).map_err(err)?.iter().copied()));
            emit("aba", json_floats(vidyn_rbd::aba(&model, &mut ws, s.q(k), s.v(k), s.tau(k)).map_err(err)?.iter().copied()));
            let m = vidyn_rbd::crba(&model, &mut ws, s.q(k)).map_err(err)?;
            emit("crba", json_floats(m.transpose().iter().copied()));
            let mi = vidyn_rbd::minverse(&model, &mut ws, s.q(k)).map_err(err)?;
            emit("minverse", json_floats(mi.transpose().iter().copied()));
        }
        return Ok(());
    }

    let (n, passes, min_time) = (s.count, args.passes, args.min_time);
    for algo in args.algos.split(',') {
        // Every call is checked (`expect`) and its result goes through `black_box`.
        let t = match algo {
            "fk" => time_passes(n, passes, min_time, |k| {
                vidyn_rbd::forward_kinematics(&model, &mut ws, s.q(k), s.v(k), s.a(k)).expect("fk");
                black_box(&ws.accelerations);
            }),
            "rnea" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::rnea(&model, &mut ws, s.q(k), s.v(k), s.a(k)).expect("rnea"));
            }),
            "aba" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::aba(&model, &mut ws, s.q(k), s.v(k), s.tau(k)).expect("aba"));
            }),
            "crba" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::crba(&model, &mut ws, s.q(k)).expect("crba"));
            }),
            "minverse" => time_passes(n, passes, min_time, |k| {
                black_box(vidyn_rbd::minverse(&model, &mut ws, s.q(k)).expect("minverse"));
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
