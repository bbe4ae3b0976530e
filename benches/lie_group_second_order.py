"""The cost of the exact second order on the Lie group (`rust/vi/src/chart_second_order.rs`)
against the first-order linearisation, on
solo12 with its floating base; and, for scale, the exact second order of the same robot
expanded into Z-Y-X Euler-angle chains (`Model.to_single_dof`) against its own first order
(BENCHMARKS.md, "Second order on the Lie group").

    VIDYN_NUM_THREADS=1 .venv/bin/python benches/lie_group_second_order.py [repeats]

For instruction counts, `--only CASE OP CALLS` (CASE `group` or `chain`, OP `first`,
`contracted` or `full`) runs one operation CALLS times after a warm-up call, e.g.
`VIDYN_NUM_THREADS=1 valgrind --tool=callgrind --toggle-collect='*__pymethod_linearize__*' .venv/bin/python benches/lie_group_second_order.py --only group contracted 2`
counts the instructions inside the `(1 + 2) · 20` linearised steps.

solo12 from its neutral posture at 0.5 m height with random joint and base velocities and
controls, dt 0.005, trapezoid, N = 20 steps; per step, the median over `repeats` calls of
`vi.linearize(traj)` and `vi.linearize(traj, order=2, lam=lam)` (contracted) and
`vi.linearize(traj, order=2)` (full tensors).
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

import numpy as np

import vidyn as vd
from vidyn import models


def per_step_ms(run, steps: int, repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times) / steps


def main() -> None:
    warnings.simplefilter("ignore")
    only = sys.argv[1:4] if len(sys.argv) > 4 and sys.argv[1] == "--only" else None
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 and only is None else 5
    steps = 20
    model = models.example_robot("solo12")
    expanded, smap = model.to_single_dof()
    rng = np.random.default_rng(1)
    q0 = model.neutral()
    q0[2] = 0.5
    v0 = rng.uniform(-0.5, 0.5, model.nv)
    u = rng.uniform(-0.2, 0.2, (steps, model.nv))
    lam = rng.uniform(-1.0, 1.0, (steps, 2 * model.nv))
    cases = {
        "Lie group": (vd.VariationalIntegrator(model, 0.005, scheme="trapezoid"), q0, v0),
        "Euler chain (exact)": (vd.VariationalIntegrator(expanded, 0.005, scheme="trapezoid"), smap.q_to_single_dof(q0), smap.v_to_single_dof(q0, v0)),
    }
    if only is not None:
        vi, q, v = cases["Lie group" if only[1] == "group" else "Euler chain (exact)"]
        traj = vi.rollout(q, v, u=u)
        run = {"first": lambda: vi.linearize(traj), "contracted": lambda: vi.linearize(traj, order=2, lam=lam), "full": lambda: vi.linearize(traj, order=2)}[only[2]]
        for _ in range(1 + int(sys.argv[4])):
            run()
        return
    for name, (vi, q, v) in cases.items():
        traj = vi.rollout(q, v, u=u)
        first = per_step_ms(lambda: vi.linearize(traj), steps, repeats)
        contracted = per_step_ms(lambda: vi.linearize(traj, order=2, lam=lam), steps, repeats)
        full = per_step_ms(lambda: vi.linearize(traj, order=2), steps, repeats)
        print(f"{name:20s} first order {first:8.3f} ms/step   contracted second order {contracted:8.3f} ms/step ({contracted / first:6.1f}x)   full tensors {full:8.3f} ms/step ({full / first:6.1f}x)")


if __name__ == "__main__":
    main()
