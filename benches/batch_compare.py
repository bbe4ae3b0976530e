#!/usr/bin/env python3
"""Batch engine benchmarks: parallel efficiency, Python overhead, and peers in the same run.

    python benches/batch_compare.py                      # everything; prints a markdown report
    python benches/batch_compare.py --quick              # fewer rounds (a smoke run)
    python benches/batch_compare.py --write              # also puts the report at the end of BENCHMARKS.md
    python benches/batch_compare.py --only overhead      # one section (or a comma list); not with --write

It first rebuilds the extension (`maturin develop --release`, so run it inside the project's
virtualenv) and the Rust timing binary from the same tree, then reruns itself.

What is measured (pendulum chains `vidyn.models.pendulum_chain(n, planar=False)`: unit rods,
joints alternating about y and x; the same chain as URDF for Pinocchio and as MJCF for MuJoCo):

1. Parallel efficiency of `vidyn.batch.rollout` and `vidyn.batch.linearize` for B = 64
   trajectories x N = 200 steps (trapezoidal VI, dt = 0.01): T(1 thread) / T(k threads) for
   k = 1 .. cores, thread counts alternated round by round, min over the rounds.
2. Python overhead: the same batched calls timed through `vidyn.batch` and from Rust
   (`cargo run --release -p vidyn-batch --example batch_timing`, identical inputs by formula),
   minima and medians over all repetitions, the sides alternated round by round:
   overhead = T_python / T_rust - 1 (from the minima, and from the medians),
   in two pairings that do the same work on both sides:
   * fresh outputs: Python allocating new NumPy outputs in every call (the default) against
     Rust allocating its outputs (`vec![0.0; len]`) inside the timed region in every
     repetition (both pay allocation and first-touch page faults);
   * preallocated outputs: Python with `out=` buffers allocated once against Rust writing
     into buffers allocated once outside the timed region (the engine alone).
   On both sides a call's result is released after the clock stops (a caller keeps it).
3. Peers, where installed:
   * Pinocchio (`pin`): batched RNEA/ABA over B = 1000 states as a Python loop of `pin.rnea` /
     `pin.aba`, and `pin.rneaInParallel` / `pin.abaInParallel` with a `ModelPool` (pin >= 3.x);
     agreement with vidyn is checked first.
   * MuJoCo (`mujoco`): `mujoco.rollout.rollout` of the same B x N controls (1 and k threads)
     and `mujoco.mjd_transitionFD` (centred finite differences) at every (trajectory, step)
     state, against `vidyn.batch.rollout` / `vidyn.batch.linearize`. Not the same
     discretisation: MuJoCo steps explicit RK4 (four forward dynamics per step), vidyn the
     implicit trapezoidal variational integrator (a Newton solve per step, exact
     derivatives); the rows compare the cost of the same task on the same chain.

The machine is shared and noisy (2 cores; other jobs may run): every number is a minimum over
rounds, and the load average is printed with the report.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import vidyn

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
BEGIN = "<!-- BEGIN batch_compare.py output (generated; do not edit by hand) -->"
END = "<!-- END batch_compare.py output -->"
HEADING = "## Batch engine (issue 5)"
SECTIONS = ("efficiency", "overhead", "pinocchio", "mujoco")
DT = 0.01


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def inputs(length: int, scale: float, freq: float, phase: float) -> np.ndarray:
    """The formula of rust/batch/examples/batch_timing.rs (`input`)."""
    return scale * np.sin(freq * np.arange(length, dtype=np.float64) + phase)


def problem(links: int, batch: int, steps: int):
    n = links
    q = inputs(batch * n, 0.5, 0.1, 0.3).reshape(batch, n)
    v = inputs(batch * n, 0.7, 0.13, 0.1).reshape(batch, n)
    a = inputs(batch * n, 1.0, 0.17, 0.2).reshape(batch, n)
    u = inputs(batch * steps * n, 0.5, 0.07, 0.4).reshape(batch, steps, n)
    return q, v, a, u


def samples(f, reps: int, min_time: float = 0.0) -> list[float]:
    """Wall times of f() over `reps` calls (at least `min_time` seconds in all). The result of
    each call is released after the clock stops, as a caller keeping it would."""
    times = []
    start = time.perf_counter()
    while len(times) < reps or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        result = f()
        times.append(time.perf_counter() - t0)
        del result
    return times


def best(f, reps: int, min_time: float = 0.0) -> float:
    """Minimum wall time of f() over `reps` calls (see `samples`)."""
    return min(samples(f, reps, min_time))


# ------------------------------------------------------------------------------------------
# 1. parallel efficiency


def efficiency(links_list, batch, steps, rounds, threads_list):
    rows = []
    for links in links_list:
        model = vidyn.models.pendulum_chain(links, planar=False)
        vi = vidyn.VariationalIntegrator(model, DT)
        q, v, _, u = problem(links, batch, steps)
        roll = vidyn.batch.rollout(vi, q, v, u)
        t = {("rollout", k): float("inf") for k in threads_list} | {("linearize", k): float("inf") for k in threads_list}
        for _ in range(rounds):
            for k in threads_list:
                vidyn.set_num_threads(k)
                t["rollout", k] = min(t["rollout", k], best(lambda: vidyn.batch.rollout(vi, q, v, u), 1))
                t["linearize", k] = min(t["linearize", k], best(lambda: vidyn.batch.linearize(vi, roll), 1))
        for op in ("rollout", "linearize"):
            for k in threads_list:
                rows.append((op, links, k, t[op, 1], t[op, k]))
        log(f"efficiency: {links} links done")
    vidyn.set_num_threads(0)
    return rows


# ------------------------------------------------------------------------------------------
# 2. Python overhead


def rust_timing_binary() -> Path:
    log("cargo build --release -p vidyn-batch --example batch_timing")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "vidyn-batch", "--example", "batch_timing"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release" / "examples" / "batch_timing"


def rust_samples(exe: Path, op: str, links: int, batch: int, steps: int, threads: int, reps: int, outputs: str) -> list[float]:
    """Times of the `reps` repetitions of the Rust timing binary; `outputs`: "fresh" or
    "preallocated" (see rust/batch/examples/batch_timing.rs)."""
    cmd = [str(exe), op, str(links), str(batch), str(steps), str(threads), str(reps), outputs]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [float(t) for t in json.loads(out.strip().splitlines()[-1])["times"]]


def python_call(op: str, links: int, batch: int, steps: int, prealloc: bool = False):
    """The batched call; with `prealloc`, into outputs allocated once (``out=``)."""
    model = vidyn.models.pendulum_chain(links, planar=False)
    vi = vidyn.VariationalIntegrator(model, DT)
    q, v, a, u = problem(links, batch, steps)
    roll = vidyn.batch.rollout(vi, q, v, u)
    n = links
    calls = {
        "rnea": (lambda out: vidyn.batch.rnea(model, q, v, a, out=out), lambda: np.empty((batch, n))),
        "aba": (lambda out: vidyn.batch.aba(model, q, v, a, out=out), lambda: np.empty((batch, n))),
        "crba": (lambda out: vidyn.batch.crba(model, q, out=out), lambda: np.empty((batch, n, n))),
        "rnea_derivatives": (lambda out: vidyn.batch.rnea_derivatives(model, q, v, a, out=out), lambda: tuple(np.empty((batch, n, n)) for _ in range(3))),
        "rollout": (lambda out: vidyn.batch.rollout(vi, q, v, u, out=out), lambda: (np.empty((batch, steps + 1, n)), np.empty((batch, steps + 1, n)), np.empty((batch, steps), dtype=np.int64))),
        "linearize": (lambda out: vidyn.batch.linearize(vi, roll, out=out), lambda: (np.empty((batch, steps, 2 * n, 2 * n)), np.empty((batch, steps, 2 * n, n)))),
    }
    call, make = calls[op]
    if prealloc:
        buffers = make()
        return lambda: call(buffers)
    return lambda: call(None)


def overhead(exe: Path, cases, threads_list, rounds: int):
    """Rows (op, links, B, N, threads, Rust fresh, Python fresh, Rust preallocated, Python out=),
    each time a pair (minimum, median) over all repetitions of all rounds."""
    rows = []
    for op, links, batch, steps, reps in cases:
        py_fresh, py_out = python_call(op, links, batch, steps), python_call(op, links, batch, steps, prealloc=True)
        for k in threads_list:
            vidyn.set_num_threads(k)
            t: list[list[float]] = [[], [], [], []]
            for _ in range(rounds):  # alternate so that all see the same load
                now = (
                    rust_samples(exe, op, links, batch, steps, k, reps, "fresh"),
                    samples(py_fresh, reps),
                    rust_samples(exe, op, links, batch, steps, k, reps, "preallocated"),
                    samples(py_out, reps),
                )
                for acc, new in zip(t, now):
                    acc.extend(new)
            rows.append((op, links, batch, steps, k, *[(min(x), statistics.median(x)) for x in t]))
        log(f"overhead: {op} done")
    vidyn.set_num_threads(0)
    return rows


# ------------------------------------------------------------------------------------------
# 3. peers


def chain_urdf(n: int) -> str:
    """URDF of vidyn.models.pendulum_chain(n, planar=False)."""
    inertia = 1.0 / 12.0
    parts = ['<?xml version="1.0"?>', f'<robot name="chain{n}">', '  <link name="base"/>']
    for k in range(1, n + 1):
        parent = "base" if k == 1 else f"link{k - 1}"
        z = 0.0 if k == 1 else -1.0
        axis = "0 1 0" if k % 2 == 1 else "1 0 0"
        parts += [
            f'  <joint name="joint{k}" type="revolute"><parent link="{parent}"/><child link="link{k}"/>',
            f'    <origin xyz="0 0 {z}" rpy="0 0 0"/><axis xyz="{axis}"/>',
            '    <limit lower="-3.14159265358979" upper="3.14159265358979" effort="100" velocity="10"/></joint>',
            f'  <link name="link{k}"><inertial><origin xyz="0 0 -0.5" rpy="0 0 0"/><mass value="1"/>',
            f'    <inertia ixx="{inertia!r}" ixy="0" ixz="0" iyy="{inertia!r}" iyz="0" izz="0"/></inertial></link>',
        ]
    parts.append("</robot>")
    return "\n".join(parts) + "\n"


def chain_mjcf(n: int, integrator: str = "RK4", dt: float = DT) -> str:
    """MJCF of the same chain (no contacts, one motor per joint, time step ``dt``). RK4 for the
    rollouts (semi-implicit Euler blows up on the 12-link chain at this step under these
    controls); `mjd_transitionFD` does not support RK4, so the linearisation uses
    "implicitfast" (one forward dynamics per step: the cheapest FD MuJoCo offers)."""
    inertia = 1.0 / 12.0
    body = ""
    for k in range(n, 0, -1):
        axis = "0 1 0" if k % 2 == 1 else "1 0 0"
        pos = "0 0 0" if k == 1 else "0 0 -1"
        body = (
            f'<body name="link{k}" pos="{pos}"><joint name="joint{k}" type="hinge" axis="{axis}"/>'
            f'<inertial pos="0 0 -0.5" mass="1" diaginertia="{inertia!r} {inertia!r} 1e-9"/>{body}</body>'
        )
    motors = "".join(f'<motor joint="joint{k}" gear="1"/>' for k in range(1, n + 1))
    return (
        f'<mujoco model="chain{n}"><option timestep="{dt!r}" integrator="{integrator}"><flag contact="disable"/></option>'
        f"<worldbody>{body}</worldbody><actuator>{motors}</actuator></mujoco>"
    )


def pinocchio_rows(links: int, batch: int, threads_list, rounds: int):
    try:
        import pinocchio as pin
    except ImportError:
        log("pinocchio not installed: skipped")
        return [], "not installed"
    model = pin.buildModelFromXML(chain_urdf(links))
    data = model.createData()
    vm = vidyn.models.pendulum_chain(links, planar=False)
    q, v, a, _ = problem(links, batch, 0)
    tau = vidyn.batch.rnea(vm, q, v, a)
    ref = np.array([pin.rnea(model, data, q[i], v[i], a[i]) for i in range(batch)])
    err = float(np.abs(tau - ref).max())
    ddq = vidyn.batch.aba(vm, q, v, tau)
    ref_aba = np.array([pin.aba(model, data, q[i], v[i], tau[i]) for i in range(batch)])
    err = max(err, float(np.abs(ddq - ref_aba).max()))
    rows = []
    parallel = hasattr(pin, "rneaInParallel") and hasattr(pin, "ModelPool")
    pool = pin.ModelPool(model, max(threads_list)) if parallel else None
    qt, vt, at, taut = (np.asfortranarray(x.T) for x in (q, v, a, tau))

    def loop_rnea():
        for i in range(batch):
            pin.rnea(model, data, q[i], v[i], a[i])

    def loop_aba():
        for i in range(batch):
            pin.aba(model, data, q[i], v[i], tau[i])

    for algo, loop, vid, par in (
        ("rnea", loop_rnea, lambda: vidyn.batch.rnea(vm, q, v, a), (lambda k: pin.rneaInParallel(k, pool, qt, vt, at)) if parallel else None),
        ("aba", loop_aba, lambda: vidyn.batch.aba(vm, q, v, tau), (lambda k: pin.abaInParallel(k, pool, qt, vt, taut)) if parallel else None),
    ):
        t_loop = min(best(loop, 3) for _ in range(rounds))
        rows.append((algo, "pin Python loop", 1, t_loop))
        for k in threads_list:
            vidyn.set_num_threads(k)
            t_vid, t_par = float("inf"), float("inf")
            for _ in range(rounds):
                t_vid = min(t_vid, best(vid, 20))
                if par is not None:
                    t_par = min(t_par, best(lambda: par(k), 20))
            rows.append((algo, "vidyn.batch", k, t_vid))
            if par is not None:
                rows.append((algo, f"pin.{algo}InParallel", k, t_par))
    vidyn.set_num_threads(0)
    log("pinocchio done")
    return rows, f"pin {pin.__version__}, max |vidyn - pin| over RNEA and ABA = {err:.1e}"


def mujoco_rows(links: int, batch: int, steps: int, threads_list, rounds: int, fd_pairs: int):
    try:
        import mujoco
        from mujoco import rollout as mj_rollout
    except ImportError:
        log("mujoco not installed: skipped")
        return [], "not installed"
    m = mujoco.MjModel.from_xml_string(chain_mjcf(links))
    d = mujoco.MjData(m)
    q, v, _, u = problem(links, batch, steps)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    nstate = mujoco.mj_stateSize(m, spec)
    x0 = np.zeros((batch, nstate))
    for i in range(batch):
        mujoco.mj_resetData(m, d)
        d.qpos[:] = q[i]
        d.qvel[:] = v[i]
        mujoco.mj_getState(m, d, x0[i], spec)
    vm = vidyn.models.pendulum_chain(links, planar=False)
    vi = vidyn.VariationalIntegrator(vm, DT)
    rows = []
    datas = [mujoco.MjData(m) for _ in range(max(threads_list))]
    for k in threads_list:
        vidyn.set_num_threads(k)
        t_mj, t_vid = float("inf"), float("inf")
        for _ in range(rounds):
            t_mj = min(t_mj, best(lambda: mj_rollout.rollout(m, datas[:k], x0, u, nstep=steps), 1))
            t_vid = min(t_vid, best(lambda: vidyn.batch.rollout(vi, q, v, u), 1))
        rows.append(("rollout", f"{batch}x{steps}", "mujoco.rollout (RK4)", k, t_mj))
        rows.append(("rollout", f"{batch}x{steps}", "vidyn.batch.rollout", k, t_vid))
    # linearisation at every (trajectory, step) state: mjd_transitionFD in a Python loop over a
    # subset of `fd_pairs` states (extrapolated to B*N), vidyn over all of them
    states = mj_rollout.rollout(m, datas[:1], x0, u, nstep=steps)[0]  # (B, N, nstate), states after each step
    m = mujoco.MjModel.from_xml_string(chain_mjcf(links, "implicitfast"))
    d = mujoco.MjData(m)
    pairs = batch * steps
    nv = m.nv
    a_fd = np.zeros((2 * nv + m.na, 2 * nv + m.na))
    b_fd = np.zeros((2 * nv + m.na, m.nu))
    sub = [(i % batch, (i * 7) % steps) for i in range(min(fd_pairs, pairs))]

    def fd_loop():
        for bb, kk in sub:
            st = x0[bb] if kk == 0 else states[bb, kk - 1]
            mujoco.mj_setState(m, d, st, spec)
            d.ctrl[:] = u[bb, kk]
            mujoco.mjd_transitionFD(m, d, 1e-6, True, a_fd, b_fd, None, None)

    t_fd = min(best(fd_loop, 1) for _ in range(rounds)) * pairs / len(sub)
    rows.append(("linearize", f"{batch}x{steps}", f"mujoco.mjd_transitionFD loop (centred, implicitfast; timed on {len(sub)} states, scaled)", 1, t_fd))
    roll = vidyn.batch.rollout(vi, q, v, u)
    for k in threads_list:
        vidyn.set_num_threads(k)
        t_vid = min(best(lambda: vidyn.batch.linearize(vi, roll), 1) for _ in range(rounds))
        rows.append(("linearize", f"{batch}x{steps}", "vidyn.batch.linearize (exact)", k, t_vid))
    vidyn.set_num_threads(0)
    log("mujoco done")
    return rows, f"mujoco {mujoco.__version__}"


# ------------------------------------------------------------------------------------------
# report


def ms(t: float) -> str:
    return f"{t * 1e3:.3f} ms" if t < 0.1 else f"{t * 1e3:.0f} ms"


def report(args, eff, ovh, pin_rows, pin_note, mj_rows, mj_note, command: str) -> str:
    cores = os.cpu_count()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    out = [
        f"Run {_dt.date.today().isoformat()} on {platform.machine()}, {cores} cores "
        f"({platform.processor() or platform.platform()}); load average after the run "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min) - a shared, noisy machine: "
        f"every time is the minimum over {args.rounds} rounds. Command:",
        "",
        f"    {command}",
    ]
    if eff is not None:
        out += [
            "",
            f"### Parallel efficiency (B = {args.batch} trajectories x N = {args.steps} steps, trapezoidal VI)",
            "",
            "| operation | links | threads | T(1 thread) | T(k threads) | speed-up T1/Tk | efficiency T1/(k Tk) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for op, links, k, t1, tk in eff:
            out.append(f"| {op} | {links} | {k} | {ms(t1)} | {ms(tk)} | {t1 / tk:.2f} | {100 * t1 / (k * tk):.0f} % |")
    if ovh is not None:
        out += [
            "",
            "### Python overhead (vidyn.batch vs the same engine call from Rust)",
            "",
            "Two pairings, each the same work on both sides. Fresh outputs: `vidyn.batch` allocating",
            "new NumPy outputs in every call (the default) vs Rust allocating them (`vec![0.0; len]`)",
            "in every repetition, inside the timed region. Preallocated: `vidyn.batch` with `out=`",
            "buffers allocated once vs Rust writing into buffers allocated once (the engine alone).",
            "On both sides a result is released after the clock stops. Times are minima over all",
            "repetitions; the overhead is given from the minima and from the medians of the same",
            "repetitions (on this shared 2-core VM the two-thread minima are the noisier estimate).",
            "",
            "| operation | links | B | N | threads | Rust, fresh outputs | Python, fresh outputs | overhead (min / median) | Rust, preallocated | Python, out= | overhead (min / median) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]

        def pct(py: tuple[float, float], rs: tuple[float, float]) -> str:
            return f"{100 * (py[0] / rs[0] - 1):+.1f} % / {100 * (py[1] / rs[1] - 1):+.1f} %"

        for op, links, batch, steps, k, rs_fresh, py_fresh, rs_pre, py_out in ovh:
            out.append(
                f"| {op} | {links} | {batch} | {steps or '-'} | {k} | {ms(rs_fresh[0])} | {ms(py_fresh[0])} | {pct(py_fresh, rs_fresh)} "
                f"| {ms(rs_pre[0])} | {ms(py_out[0])} | {pct(py_out, rs_pre)} |"
            )
    if pin_rows is not None:
        out += ["", f"### Pinocchio, batched RNEA/ABA ({args.peer_links}-link chain, B = {args.peer_batch}; {pin_note})", ""]
    if pin_rows:
        out += ["| algorithm | implementation | threads | time | per state | vs vidyn.batch (same threads) |", "|---|---|---:|---:|---:|---:|"]
        vid = {(algo, k): t for algo, impl, k, t in pin_rows if impl == "vidyn.batch"}
        for algo, impl, k, t in pin_rows:
            ref = vid.get((algo, k), vid.get((algo, 1)))
            out.append(f"| {algo} | {impl} | {k} | {ms(t)} | {t / args.peer_batch * 1e9:.0f} ns | {t / ref:.2f}x |")
    if mj_rows is not None:
        out += ["", f"### MuJoCo, rollouts and linearisations ({args.peer_links}-link chain; {mj_note})", ""]
    if mj_rows:
        out += ["| task | B x N | implementation | threads | time | per step |", "|---|---|---|---:|---:|---:|"]
        for task, size, impl, k, t in mj_rows:
            out.append(f"| {task} | {size} | {impl} | {k} | {ms(t)} | {t / (args.batch * args.steps) * 1e6:.2f} us |")
    return "\n".join(out) + "\n"


def write(section: str) -> None:
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else ""
    block = f"{BEGIN}\n{section}{END}\n"
    if BEGIN in text and END in text:
        pre, rest = text.split(BEGIN, 1)
        _, post = rest.split(END, 1)
        text = pre + block + post.lstrip("\n")
    else:
        text = text.rstrip("\n") + f"\n\n{HEADING}\n\n{block}"
    BENCHMARKS_MD.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--links", default="4,8,12", help="chains for the parallel efficiency (longer ones need dt < 0.01 for these initial velocities)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--peer-links", type=int, default=12)
    ap.add_argument("--peer-batch", type=int, default=1000)
    ap.add_argument("--fd-pairs", type=int, default=1000, help="states timed for mjd_transitionFD (scaled to B*N)")
    ap.add_argument("--quick", action="store_true", help="2 rounds, fewer chains")
    ap.add_argument("--write", action="store_true", help="put the report at the end of BENCHMARKS.md")
    ap.add_argument("--no-build", action="store_true", help="skip rebuilding the extension and the Rust timing binary")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of the sections to run, of {', '.join(SECTIONS)} (default: all)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if not only <= set(SECTIONS):
        ap.error(f"--only takes sections of {', '.join(SECTIONS)}, got {args.only!r}")
    if args.write and only != set(SECTIONS):
        ap.error("--write needs every section (the block in BENCHMARKS.md is replaced as a whole)")
    if not args.no_build:
        # The extension and the Rust binary must be built from the same tree, or the overhead
        # rows compare two versions of the library: rebuild both, then rerun in a fresh process
        # (this one has already imported the old extension).
        log("maturin develop --release")
        subprocess.run(["maturin", "develop", "--release", "--quiet"], cwd=ROOT, check=True, stdout=sys.stderr)
        rust_timing_binary()
        os.execv(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--no-build"])
    if args.quick:
        args.rounds, args.links = 2, "12"
    command = "python benches/batch_compare.py " + " ".join(shlex.quote(a) for a in sys.argv[1:] if a not in ("--write", "--no-build"))
    cores = os.cpu_count() or 1
    threads_list = sorted({1, *range(2, cores + 1)})
    links_list = [int(x) for x in args.links.split(",")]

    pl = args.peer_links
    eff = ovh = pin_rows = mj_rows = None
    pin_note = mj_note = ""
    if "efficiency" in only:
        eff = efficiency(links_list, args.batch, args.steps, args.rounds, threads_list)
    if "overhead" in only:
        cases = [
            ("rnea", pl, 1000, 0, 50),
            ("crba", pl, 1000, 0, 50),
            ("rnea_derivatives", pl, 1000, 0, 20),
            ("rollout", pl, args.batch, args.steps, 2),
            ("linearize", pl, args.batch, args.steps, 2),
        ]
        ovh = overhead(rust_timing_binary(), cases, threads_list, args.rounds)
    if "pinocchio" in only:
        pin_rows, pin_note = pinocchio_rows(pl, args.peer_batch, threads_list, args.rounds)
    if "mujoco" in only:
        try:
            mj_rows, mj_note = mujoco_rows(pl, args.batch, args.steps, threads_list, args.rounds, args.fd_pairs)
        except Exception as e:  # a peer failing must not lose the rest of the report
            mj_rows, mj_note = [], f"failed: {type(e).__name__}: {e}"
    text = report(args, eff, ovh, pin_rows, pin_note, mj_rows, mj_note, command)
    print(text)
    if args.write:
        write(text)
        log(f"wrote {BENCHMARKS_MD}")


if __name__ == "__main__":
    main()
