"""The cost of the exact second order through contact phases (`rust/vi/src/chart_second_order/constrained.rs`:
the constrained step and its momentum projection on the Lie group) against the first-order
linearisation, and full DDP against iLQR on the same gait (BENCHMARKS.md, "Second order through
contact phases").

    VIDYN_NUM_THREADS=1 .venv/bin/python benches/contact_second_order.py [repeats]

ANYmal's trot of `examples/anymal_walk.py` (midpoint, dt 10 ms, 56 steps through its contact
phases, 24 contact constraints of which 0–12 active per step), at its FDDP optimum: per step,
the median over `repeats` calls of `vi.linearize(traj)`, `vi.linearize(traj, order=2, lam=lam)`
(contracted) and `vi.linearize(traj, order=2)` (full tensors, on the first 10 steps). Then
iLQR and DDP from the holding torques and from two iLQR iterations: iterations, cost, seconds.

For instruction counts, `--only OP CALLS` (OP `first`, `contracted` or `full`) runs one
operation CALLS times after a warm-up call, e.g.
`VIDYN_NUM_THREADS=1 valgrind --tool=callgrind --toggle-collect='*__pymethod_linearize__*' .venv/bin/python benches/contact_second_order.py --only contracted 2`
counts the instructions inside the `(1 + 2) · 56` linearised steps (10 steps for `full`).
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import anymal_walk  # noqa: E402
from lie_group_second_order import per_step_ms  # noqa: E402

import vidyn  # noqa: E402


def main() -> None:
    only = sys.argv[2:4] if len(sys.argv) > 3 and sys.argv[1] == "--only" else None
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 and only is None else 5
    model, gait, schedule, vi, q0, guess, u_init, cost = anymal_walk.problem("trot")
    res = vidyn.optim.fddp(vi, q0, guess, u_init, max_iterations=200, **cost)
    traj = res.trajectory
    steps, n = traj.u.shape
    lam = np.random.default_rng(3).uniform(-1.0, 1.0, (steps, 2 * n))
    short = 10
    q, p, u = traj.q[: short + 1], traj.p[: short + 1], traj.u[:short]
    ops = {
        "first": (lambda: vi.linearize(traj), steps),
        "contracted": (lambda: vi.linearize(traj, order=2, lam=lam), steps),
        "full": (lambda: vi.linearize(q, p, u, order=2), short),
    }
    if only is not None:
        run, _ = ops[only[0]]
        for _ in range(1 + int(only[1])):
            run()
        return
    times = {name: per_step_ms(run, count, repeats) for name, (run, count) in ops.items()}
    first = times["first"]
    print(f"ANYmal trot ({steps} steps, {len(schedule.constraints)} constraints), ms per step:")
    print(f"  first order {first:.3f}, contracted second order {times['contracted']:.3f} ({times['contracted'] / first:.1f}×), full tensors {times['full']:.2f} ({times['full'] / first:.0f}×)")
    v0 = np.zeros(model.nv)
    for start, iterations in (("holding torques", 0), ("two iLQR iterations", 2)):
        u0 = u_init if iterations == 0 else vidyn.optim.ilqr(vi, q0, v0, u_init, max_iterations=iterations, **cost).U
        for method in ("ilqr", "ddp"):
            t = time.perf_counter()
            out = vidyn.optim.ilqr(vi, q0, v0, u0, method=method, max_iterations=100, **cost)
            print(f"  from {start}: {method} {out.iterations} iterations, cost {out.cost:.10g}, converged {out.converged}, {time.perf_counter() - t:.2f} s")
    print(f"  FDDP (crocoddyl's warm start): {res.iterations} iterations, cost {res.cost:.10g}")


if __name__ == "__main__":
    main()
