"""vidyn's own iLQR times (no peer): run it with two builds' interpreters, alternating, to
compare them in one sitting (BENCHMARKS.md, "iLQR before and after the session-13 changes").

    .venv/bin/python benches/ilqr_before_after.py [repeats]

Cart-pole swing-up with and without gravity (dt 0.02, T 2.5, cost on (q, v), cart actuated)
and a panda reach (100 steps, hand position); prints the median and best solve time.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from typing import Callable

import numpy as np

import vidyn as vd
from vidyn import models


def cartpole(gravity: bool) -> Callable[[], object]:
    m = models.cartpole()
    if not gravity:
        m = m.with_gravity([0.0, 0.0, 0.0])
    dt, steps = 0.02, 125
    vi = vd.VariationalIntegrator(m, dt=dt)
    q, r = np.diag([dt, dt, 0.1 * dt, 0.1 * dt]), np.array([[1e-2 * dt]])
    target = np.array([0.0, np.pi, 0.0, 0.0])
    return lambda: vd.optim.ilqr(vi, np.zeros(2), steps=steps, actuated=[0], Q=q, R=r, QN=np.eye(4) * 1e3, x_ref=target, cost_state="velocity", max_iterations=1000, tolerance=1e-9)


def panda() -> Callable[[], object]:
    m = models.example_robot("panda")
    vi = vd.VariationalIntegrator(m, dt=0.01)
    q0 = m.neutral()
    return lambda: vd.optim.ilqr(vi, q0, steps=100, Q=0.0, R=1e-3, frame="panda_hand", frame_target=[0.4, 0.2, 0.5], frame_weight=1.0, frame_weight_terminal=100.0, max_iterations=200, tolerance=1e-8)


def main() -> None:
    warnings.simplefilter("ignore")  # the panda's <mimic> ModelWarning
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    for name, run in {"cartpole-nog": cartpole(False), "cartpole-g": cartpole(True), "panda": panda()}.items():
        run()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = run()
            times.append(time.perf_counter() - t0)
        print(f"{name:14s} median {1e3 * statistics.median(times):7.2f} ms  min {1e3 * min(times):7.2f} ms  iters {result.iterations}")


if __name__ == "__main__":
    main()
