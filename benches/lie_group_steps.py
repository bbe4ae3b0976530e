"""Steps of a floating-base model on its Lie group (each step in the chart centred at its
start) against the same model expanded into global Z-Y-X Euler-angle chains by
`Model.to_single_dof` (BENCHMARKS.md, "Lie-group steps against Euler chains").

    VIDYN_NUM_THREADS=1 .venv/bin/python benches/lie_group_steps.py [repeats]

solo12 from its neutral posture at 0.5 m height with random joint and base velocities,
dt 0.002, 500 steps; median of `repeats` rollouts (ms) and Newton iterations per step.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

import numpy as np

import vidyn as vd
from vidyn import models


def main() -> None:
    warnings.simplefilter("ignore")
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    model = models.example_robot("solo12")
    expanded, smap = model.to_single_dof()
    q0 = model.neutral()
    q0[2] = 0.5
    v0 = np.random.default_rng(1).uniform(-0.5, 0.5, model.nv)
    theta0, rates0 = smap.q_to_single_dof(q0), smap.v_to_single_dof(q0, v0)
    for scheme in ("trapezoid", "simpson"):
        lie = vd.VariationalIntegrator(model, 0.002, scheme=scheme)
        euler = vd.VariationalIntegrator(expanded, 0.002, scheme=scheme)
        results = {}
        for name, run in {"Lie group": lambda: lie.rollout(q0, v0, steps=500), "Euler chain": lambda: euler.rollout(theta0, rates0, steps=500)}.items():
            run()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                traj = run()
                times.append(time.perf_counter() - t0)
            results[name] = (statistics.median(times), traj.iterations.mean())
        (a, ia), (b, ib) = results["Lie group"], results["Euler chain"]
        print(f"solo12 {scheme:9s}: Lie group {1e3 * a:7.2f} ms ({ia:.2f} it/step), Euler chain {1e3 * b:7.2f} ms ({ib:.2f} it/step), ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
