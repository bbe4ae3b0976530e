"""The VI step against MuJoCo's RK4 and Euler steps on 3-D chains of 5 to 50 links (issue 25,
"the VI step itself": a midpoint or trapezoid step at least level with an RK4 step on every
chain).

The chains of ``vidyn.models.pendulum_chain(n, planar=False)`` and their MJCF twins
(``batch_compare.chain_mjcf``), from rest at ``q0`` uniform in ``[−a, a]`` (``--amplitude``,
default π/12; seeded), no
damping, simulated for ``--seconds`` at ``--dt`` with one thread: ``VariationalIntegrator.rollout``
(the Newton steps in Rust, started from its Taylor predictor) against ``mujoco.rollout.rollout``
(the steps in C). µs per step, the best of ``--rounds`` whole runs; the VI's mean Newton
iterations per step (or the step where its rollout failed); ratio = vidyn / MuJoCo RK4.

Run: ``python benches/vi_step_mujoco.py [--links 5,12,20,50] [--dt 0.005] [--seconds 2] [--rounds 5] [--amplitude 0.26]``
"""

from __future__ import annotations

import argparse
import pathlib
import platform
import sys

import numpy as np

import vidyn

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from work_precision_mujoco import best_of, mujoco_rollout  # noqa: E402


def vidyn_step(n: int, scheme: str, dt: float, steps: int, q0: np.ndarray, rounds: int) -> str:
    """µs per step and mean Newton iterations per step of ``scheme`` on the n-link chain, or
    where the rollout failed."""
    vi = vidyn.VariationalIntegrator(vidyn.models.pendulum_chain(n, planar=False), dt, scheme=scheme, damping=np.zeros(n))
    try:
        traj, seconds = best_of(rounds, lambda: vi.rollout(q0, np.zeros(n), steps=steps))
    except vidyn.ConvergenceError as e:
        return f"fails ({str(e).split(':')[0]})", float("nan")
    return f"{1e6 * seconds / steps:.1f} ({np.mean(traj.iterations):.2f})", 1e6 * seconds / steps


def mujoco_step(n: int, integrator: str, dt: float, steps: int, q0: np.ndarray, rounds: int) -> float:
    """µs per step of MuJoCo's ``integrator`` on the n-link chain."""
    return 1e6 * mujoco_rollout(n, integrator, dt, q0, steps, rounds)[1] / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", default="5,12,20,50")
    parser.add_argument("--dt", type=float, default=5e-3)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--amplitude", type=float, default=np.pi / 12, help="q0 uniform in [-a, a] (rad)")
    args = parser.parse_args()
    vidyn.set_num_threads(1)
    steps = int(round(args.seconds / args.dt))
    rng = np.random.default_rng(25)
    print(f"{platform.processor() or platform.machine()}; dt = {args.dt:g} s, {steps} steps from rest, one thread, best of {args.rounds}")
    print()
    print("| links | midpoint (µs, Newton its) | trapezoid (µs, Newton its) | MuJoCo RK4 (µs) | MuJoCo Euler (µs) | midpoint / RK4 | trapezoid / RK4 |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.links.split(",")):
        q0 = rng.uniform(-args.amplitude, args.amplitude, n)
        (mid_cell, mid), (trap_cell, trap) = (vidyn_step(n, s, args.dt, steps, q0, args.rounds) for s in ("midpoint", "trapezoid"))
        rk4 = mujoco_step(n, "RK4", args.dt, steps, q0, args.rounds)
        euler = mujoco_step(n, "Euler", args.dt, steps, q0, args.rounds)
        print(f"| {n} | {mid_cell} | {trap_cell} | {rk4:.1f} | {euler:.1f} | {mid / rk4:.2f} | {trap / rk4:.2f} |", flush=True)


if __name__ == "__main__":
    main()
