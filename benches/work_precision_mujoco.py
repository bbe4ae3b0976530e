"""Work–precision on the 12-link chain: vidyn's Simpson and trapezoidal VIs against MuJoCo's
RK4 and semi-implicit Euler (issue 25, "the VI step itself").

The 3-D chain of ``vidyn.models.pendulum_chain(12, planar=False)`` (unit rods of 1 kg, joints
alternately about y and x) and its MJCF twin (``batch_compare.chain_mjcf``: the same inertias,
``1e-9`` about the rod axis, which MuJoCo needs positive; no contacts, no damping), from rest at
``q0`` uniform in ``[−π/12, π/12]`` (seeded), simulated for T = 10 s at several steps each. Error:
``(1/T) ∫ ‖q − q_ref‖ dt`` over the knots a run shares with the reference (Fan et al.'s Fig. 3
metric), the reference vidyn's Galerkin–Lobatto VI with s = 4 (order 8) at 1.25e-3 s, checked
against MuJoCo's RK4 at 1.5625e-4 s. Wall time: one call for the whole run, one thread, the
best of ``--rounds``: ``VariationalIntegrator.rollout`` (the Newton steps in Rust) and
``mujoco.rollout.rollout`` (the steps in C).

Run: ``python benches/work_precision_mujoco.py [--draws 3] [--rounds 3] [--plot]`` (``--plot``
saves ``examples/out/work_precision_mujoco.png``).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

import vidyn

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from batch_compare import chain_mjcf  # noqa: E402

T, LINKS, REF_DT = 10.0, 12, 1.25e-3
#: per method, its step sizes (each a multiple or an integer fraction of REF_DT)
STEPS = {
    "vidyn Simpson VI": [2e-2, 1e-2, 5e-3, 2.5e-3, 1.25e-3],
    "vidyn trapezoidal VI": [1e-2, 5e-3, 2.5e-3, 1.25e-3, 6.25e-4],
    "MuJoCo RK4": [1e-2, 5e-3, 2.5e-3, 1.25e-3, 6.25e-4],
    "MuJoCo Euler": [2.5e-3, 1.25e-3, 6.25e-4, 3.125e-4, 1.5625e-4],
}


def steps_of(dt: float) -> int:
    n = int(round(T / dt))
    assert abs(n * dt - T) < 1e-9
    return n


def mean_error(q: np.ndarray, dt: float, q_ref: np.ndarray) -> float:
    """``(1/T) ∫ ‖q − q_ref‖ dt`` by the trapezoidal rule over the knots both grids share."""
    if dt >= REF_DT:
        a, b, h = q, q_ref[:: int(round(dt / REF_DT))], dt
    else:
        a, b, h = q[:: int(round(REF_DT / dt))], q_ref, REF_DT
    d = np.linalg.norm(a - b, axis=1)
    return float(h * (d.sum() - 0.5 * (d[0] + d[-1])) / T)


def best_of(rounds: int, run):
    """The result of ``run()`` and its shortest wall time over ``rounds`` calls."""
    out, best = None, float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - t0)
    return out, best


def vidyn_run(model, scheme: str, dt: float, q0: np.ndarray, rounds: int):
    vi = vidyn.VariationalIntegrator(model, dt, scheme=scheme, damping=np.zeros(LINKS))
    traj, seconds = best_of(rounds, lambda: vi.rollout(q0, np.zeros(LINKS), steps=steps_of(dt)))
    return traj.q, seconds


def mujoco_rollout(links: int, integrator: str, dt: float, q0: np.ndarray, steps: int, rounds: int):
    """MuJoCo's ``integrator`` on the ``links``-link chain from rest at ``q0``: the configurations
    ``(steps + 1, links)`` and the best wall time of ``rounds`` whole rollouts."""
    import mujoco
    from mujoco import rollout

    m = mujoco.MjModel.from_xml_string(chain_mjcf(links, integrator, dt))
    d = mujoco.MjData(m)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    x0 = np.zeros(mujoco.mj_stateSize(m, spec))
    d.qpos[:] = q0
    mujoco.mj_getState(m, d, x0, spec)
    control = np.zeros((1, steps, m.nu))
    states, seconds = best_of(rounds, lambda: rollout.rollout(m, d, x0[None, :], control, nstep=steps)[0][0])
    qpos = states[:, 1 : 1 + m.nq]  # the full-physics state is (time, qpos, qvel, ...)
    return np.vstack([q0, qpos]), seconds


def mujoco_run(integrator: str, dt: float, q0: np.ndarray, rounds: int):
    return mujoco_rollout(LINKS, integrator, dt, q0, steps_of(dt), rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plot", action="store_true")
    args = parser.parse_args()
    vidyn.set_num_threads(1)
    model = vidyn.models.pendulum_chain(LINKS, planar=False)
    rng = np.random.default_rng(2018)
    draws = [rng.uniform(-np.pi / 12, np.pi / 12, LINKS) for _ in range(args.draws)]
    results = {name: np.zeros((len(dts), 2)) for name, dts in STEPS.items()}
    check = 0.0
    for q0 in draws:
        q_ref = vidyn.VariationalIntegrator(model, REF_DT, scheme="lobatto", s=4, damping=np.zeros(LINKS)).rollout(q0, np.zeros(LINKS), steps=steps_of(REF_DT)).q
        fine, _ = mujoco_run("RK4", REF_DT / 8, q0, 1)
        check += mean_error(fine, REF_DT / 8, q_ref) / args.draws
        for name, dts in STEPS.items():
            for i, dt in enumerate(dts):
                if name.startswith("vidyn"):
                    q, seconds = vidyn_run(model, "simpson" if "Simpson" in name else "trapezoid", dt, q0, args.rounds)
                else:
                    q, seconds = mujoco_run("RK4" if "RK4" in name else "Euler", dt, q0, args.rounds)
                results[name][i] += [mean_error(q, dt, q_ref) / args.draws, seconds / args.draws]
    print(f"{LINKS}-link 3-D chain, T = {T:g} s, {args.draws} draws from rest; reference: Lobatto s = 4 VI at {REF_DT} s, "
          f"MuJoCo RK4 at {REF_DT / 8} s differs from it by {check:.1e} (the resolution below)")
    print()
    print("| method | dt (s) | error (rad) | wall time (ms) | µs per step |")
    print("|---|---:|---:|---:|---:|")
    for name, dts in STEPS.items():
        for dt, (err, sec) in zip(dts, results[name]):
            print(f"| {name} | {dt:g} | {err:.2e} | {1e3 * sec:.1f} | {1e6 * sec / steps_of(dt):.1f} |")
    if args.plot:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4.5))
        for name, res in results.items():
            ax.loglog(1e3 * res[:, 1], res[:, 0], "o-", label=name)
        ax.axhline(check, color="k", lw=0.8, ls="--", label="reference resolution")
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("wall time for 10 s (ms, one thread)")
        ax.set_ylabel("(1/T) ∫ ‖q − q_ref‖ dt (rad)")
        ax.set_title(f"{LINKS}-link chain: work against precision", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        out = pathlib.Path(__file__).resolve().parents[1] / "examples" / "out" / "work_precision_mujoco.png"
        out.parent.mkdir(exist_ok=True)
        fig.tight_layout()
        fig.savefig(out, dpi=120)
        print(f"saved {out}")


if __name__ == "__main__":
    main()
