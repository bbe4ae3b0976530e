//! Scaling of the maximal-coordinate variational integrator (issue 7, "Performance";
//! Brüdigam & Manchester 2020 Fig. 4c, Brüdigam et al. 2023 Figs. 8–9): time per step against
//! the number of bodies on chains and on chains of closed four-bar segments, the graph-based
//! block LDU against a dense LU of the same Newton matrix, and the minimal-coordinate VI on
//! the same chains. Prints a markdown table (µs per call) and log-log slopes.
//!
//! ```text
//! cargo run --release -p vidyn-benches --bin maximal_scaling -- [--sizes 4,8,16,32,64,128,256]
//!     [--dense-max 1500] [--min-time 0.5] [--pool 4]
//! ```
//!
//! Models (`vidyn_maximal::models`): `cylinder_chain(n, false)` (3-D chain of 1 kg, 1 m solid
//! cylinders on revolute joints about alternating y / x, start 0.3 rad per joint, at rest) and
//! `four_bar_chain(s)` (s = n/3 parallelogram segments, 3 bodies and 4 joints each, hangers at
//! 0.4 rad). Δt = 0.01 s, no control. The pool holds the states after 10, 20, … steps of a
//! rollout; each is timed alone (`time_passes`, fastest pass) and the table gives the median
//! over the pool. Columns: **step**: one full step (Newton, 2–4 iterations); **assemble**:
//! prepare + residual + Newton matrix; **graph solve**: assemble + block LDU + solve;
//! **dense LU**: LU factorisation and solve of the same matrix as a dense `N × N` matrix
//! (`N` = total unknowns, only up to `--dense-max`); **minimal VI step**: `vidyn_vi`
//! trapezoid step on the same chain (loop-free only). A third table times interior-point steps
//! of `sphere_chain(n)` (spheres on ball joints, each in frictional ground contact).

use std::hint::black_box;
use std::sync::Arc;
use vidyn_benches::time_passes;
use vidyn_maximal::models::{cylinder_chain, four_bar_chain, sphere_chain};
use vidyn_maximal::{rollout, rollout_minimal, BodyState, MaximalIntegrator, Mechanism};
use vidyn_vi::StepInput;
use vidyn_vi::{Scheme, VariationalIntegrator};

struct Args {
    sizes: Vec<usize>,
    dense_max: usize,
    min_time: f64,
    pool: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { sizes: vec![4, 8, 16, 32, 64, 128, 256], dense_max: 1500, min_time: 0.5, pool: 4 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--sizes" => a.sizes = val()?.split(',').map(|x| x.trim().parse::<usize>().map_err(|e| format!("--sizes: {e}"))).collect::<Result<_, _>>()?,
            "--dense-max" => a.dense_max = val()?.parse().map_err(|e| format!("--dense-max: {e}"))?,
            "--min-time" => a.min_time = val()?.parse().map_err(|e| format!("--min-time: {e}"))?,
            "--pool" => a.pool = val()?.parse().map_err(|e| format!("--pool: {e}"))?,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(a)
}

fn slope(points: &[(usize, f64)]) -> f64 {
    let m = points.len() as f64;
    let (xs, ys): (Vec<f64>, Vec<f64>) = points.iter().map(|&(n, t)| ((n as f64).ln(), t.ln())).unzip();
    let (mx, my) = (xs.iter().sum::<f64>() / m, ys.iter().sum::<f64>() / m);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    sxy / sxx
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

struct Row {
    bodies: usize,
    unknowns: usize,
    step: f64,
    assemble: f64,
    graph: f64,
    dense: Option<f64>,
    minimal: Option<f64>,
    iterations: f64,
}

fn measure(mech: Mechanism, q0: &[f64], args: &Args, minimal: bool) -> Row {
    let model = mech.model.clone().expect("built from a model");
    let mech = Arc::new(mech);
    let vi = MaximalIntegrator::new(mech.clone(), 0.01).expect("valid mechanism");
    let nb = mech.nbodies();
    let steps = 10 * args.pool;
    let traj = rollout_minimal(&vi, &vidyn_batch::Control::new(), q0, &vec![0.0; model.nv], &[], steps).expect("rollout converges");
    let pool: Vec<Vec<BodyState>> = (1..=args.pool).map(|k| traj.knot(10 * k).to_vec()).collect();
    let budget = args.min_time / args.pool as f64;
    let mut ws = vi.workspace();
    let mut next = vec![BodyState::default(); nb];
    let step = median(
        pool.iter()
            .map(|s| {
                time_passes(1, 3, budget, |_| {
                    black_box(vi.step(&mut ws, 0, s, &[], None, &mut next).expect("step"));
                })
                .min_ns
            })
            .collect(),
    );
    let assemble = median(pool.iter().map(|s| time_passes(1, 3, budget, |_| vi.assemble_newton(&mut ws, s, &[]).expect("assemble")).min_ns).collect());
    let graph = median(
        pool.iter()
            .map(|s| {
                time_passes(1, 3, budget, |_| {
                    vi.assemble_newton(&mut ws, s, &[]).expect("assemble");
                    vi.solve_assembled(&mut ws).expect("solve");
                })
                .min_ns
            })
            .collect(),
    );
    vi.assemble_newton(&mut ws, &pool[0], &[]).expect("assemble");
    let (a, r) = vi.assembled_dense(&ws);
    let unknowns = a.nrows();
    let dense = (unknowns <= args.dense_max).then(|| {
        time_passes(1, 1, args.min_time, |_| {
            black_box(a.clone().lu().solve(&r));
        })
        .min_ns
    });
    let minimal = minimal.then(|| {
        let mvi = VariationalIntegrator::new(model.clone(), Scheme::trapezoid(), 0.01, None).expect("1-dof joints");
        let mut mws = mvi.workspace();
        let (mut qn, mut pn) = (vec![0.0; model.nv], vec![0.0; model.nv]);
        let p0 = vec![0.0; model.nv];
        let u = vec![0.0; model.nv];
        let q = traj.q[10 * model.nq..11 * model.nq].to_vec();
        time_passes(1, 3, args.min_time, |_| {
            black_box(mvi.step(&mut mws, StepInput::new(0, &q, &p0, &u), &mut qn, &mut pn).expect("minimal step"));
        })
        .min_ns
    });
    let iterations = traj.iterations.iter().sum::<usize>() as f64 / steps as f64;
    Row { bodies: nb, unknowns, step, assemble, graph, dense, minimal, iterations }
}

fn print(title: &str, rows: &[Row]) {
    println!("\n### {title}\n");
    println!("| bodies | unknowns | Newton its/step | step (µs) | assemble (µs) | graph solve (µs) | dense LU (µs) | dense / graph | minimal VI step (µs) | maximal / minimal |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let d = r.dense.map_or("–".into(), |d| format!("{:.1}", d / 1e3));
        let ratio = r.dense.map_or("–".into(), |d| format!("{:.1}", d / r.graph));
        let m = r.minimal.map_or("–".into(), |m| format!("{:.1}", m / 1e3));
        let mr = r.minimal.map_or("–".into(), |m| format!("{:.2}", r.step / m));
        println!(
            "| {} | {} | {:.2} | {:.1} | {:.1} | {:.1} | {d} | {ratio} | {m} | {mr} |",
            r.bodies,
            r.unknowns,
            r.iterations,
            r.step / 1e3,
            r.assemble / 1e3,
            r.graph / 1e3
        );
    }
    let big: Vec<&Row> = rows.iter().filter(|r| r.bodies >= 16).collect();
    let fit = |f: &dyn Fn(&Row) -> Option<f64>| {
        let pts: Vec<(usize, f64)> = big.iter().filter_map(|r| f(r).map(|t| (r.bodies, t))).collect();
        if pts.len() >= 2 {
            format!("{:.2}", slope(&pts))
        } else {
            "–".into()
        }
    };
    println!(
        "\nlog-log slopes over ≥ 16 bodies: step {}, graph solve {}, dense LU {}, minimal VI step {}",
        fit(&|r| Some(r.step)),
        fit(&|r| Some(r.graph)),
        fit(&|r| r.dense),
        fit(&|r| r.minimal)
    );
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut chains = Vec::new();
    for &n in &args.sizes {
        let model = Arc::new(cylinder_chain(n, false));
        let mech = Mechanism::from_model(model).expect("cylinders are valid");
        chains.push(measure(mech, &vec![0.3; n], &args, true));
    }
    print("Chains of n cylinders on revolute joints (3-D)", &chains);
    let mut loops = Vec::new();
    for &n in &args.sizes {
        let segments = (n / 3).max(1);
        let (mech, q0) = four_bar_chain(segments);
        loops.push(measure(mech, &q0, &args, false));
    }
    print("Chains of closed four-bar segments (3 bodies, 4 joints each)", &loops);
    // chains of spheres in ground contact: interior-point steps, one contact per body
    println!("\n### Chains of spheres on ball joints, each in frictional ground contact (interior point)\n");
    println!("| spheres | unknowns | IP iterations/step | step (µs) | per sphere (µs) |");
    println!("|---:|---:|---:|---:|---:|");
    let mut pts = Vec::new();
    for &n in &args.sizes {
        let (mech, start) = sphere_chain(n);
        let vi = MaximalIntegrator::new(Arc::new(mech), 0.01).expect("valid mechanism");
        let steps = 10 * args.pool;
        let traj = rollout(&vi, &vidyn_batch::Control::new(), &start, &[], steps).expect("rollout converges");
        let pool: Vec<Vec<BodyState>> = (1..=args.pool).map(|k| traj.knot(10 * k).to_vec()).collect();
        let budget = args.min_time / args.pool as f64;
        let mut ws = vi.workspace();
        let mut next = start.clone();
        let t = median(
            pool.iter()
                .map(|s| {
                    time_passes(1, 3, budget, |_| {
                        black_box(vi.step(&mut ws, 0, s, &[], None, &mut next).expect("step"));
                    })
                    .min_ns
                })
                .collect(),
        );
        vi.assemble_newton(&mut ws, &pool[0], &[]).expect("assemble");
        let unknowns = vi.assembled_dense(&ws).0.nrows();
        let its = traj.iterations.iter().sum::<usize>() as f64 / steps as f64;
        println!("| {n} | {unknowns} | {its:.1} | {:.1} | {:.2} |", t / 1e3, t / 1e3 / n as f64);
        if n >= 16 {
            pts.push((n, t));
        }
    }
    if pts.len() >= 2 {
        println!("\nlog-log slope over ≥ 16 spheres: {:.2}", slope(&pts));
    }
}
