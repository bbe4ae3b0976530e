"""Rollout steps of the VI on 3-D chains of 8 to 1024 links (issue 23, "Slopes on 3-D chains
n = 8 … 1024: whole step ≈ 1"): µs per step and mean Newton iterations per step of a rollout,
and the log-log slope of the time per step against n.

The chains of ``vidyn.models.pendulum_chain(n, planar=False)`` from rest at ``q0`` uniform in
``[−0.05, 0.05]`` (seeded by n), no damping, ``--steps`` steps of ``--dt`` with one thread,
``VariationalIntegrator.rollout`` (the Newton start of ``vidyn_vi::predict_next``); the best
of three rollouts up to 256 links, one above. A rollout that fails is reported as such.

Run: ``python benches/vi_long_chain_steps.py [--dt 0.001] [--steps 100] [--schemes trapezoid,simpson]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import vidyn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--schemes", default="trapezoid,simpson")
    parser.add_argument("--sizes", default="8,16,32,64,128,256,512,1024")
    args = parser.parse_args()
    vidyn.set_num_threads(1)
    print("| n | scheme | µs per step | Newton its |")
    print("|---:|---|---:|---:|")
    for scheme in args.schemes.split(","):
        sizes, times = [], []
        for n in (int(s) for s in args.sizes.split(",")):
            q0 = np.random.default_rng(n).uniform(-0.05, 0.05, n)
            vi = vidyn.VariationalIntegrator(vidyn.models.pendulum_chain(n, planar=False), args.dt, scheme=scheme, damping=np.zeros(n))
            best = np.inf
            try:
                for _ in range(3 if n <= 256 else 1):
                    start = time.perf_counter()
                    traj = vi.rollout(q0, np.zeros(n), steps=args.steps)
                    best = min(best, time.perf_counter() - start)
            except vidyn.ConvergenceError as e:
                print(f"| {n} | {scheme} | fails ({str(e).split(':')[0]}) | |", flush=True)
                continue
            sizes.append(n)
            times.append(1e6 * best / args.steps)
            print(f"| {n} | {scheme} | {times[-1]:.1f} | {np.mean(traj.iterations):.2f} |", flush=True)
        if len(sizes) >= 2:
            slope = np.polyfit(np.log(sizes), np.log(times), 1)[0]
            print(f"\n{scheme}: slope of µs per step against n, {sizes[0]}–{sizes[-1]} links: {slope:.2f}\n")


if __name__ == "__main__":
    main()
