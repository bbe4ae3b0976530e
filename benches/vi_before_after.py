"""vidyn's own VI rollout and linearisation times (no peer): run it with two builds'
interpreters, alternating, to compare them in one sitting (BENCHMARKS.md, "Before and after
the session-14 changes").

    .venv/bin/python benches/vi_before_after.py [repeats]

Panda and a 12-link 3-D pendulum chain, trapezoid, dt 0.01, 500 steps from rest; prints the
median and best of `repeats` calls (ms).
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


def timed(f: Callable[[], object], repeats: int) -> tuple[float, float]:
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> None:
    warnings.simplefilter("ignore")  # the panda's <mimic> ModelWarning
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    panda = models.example_robot("panda")
    vi = vd.VariationalIntegrator(panda, dt=0.01)
    q0 = panda.neutral()
    traj = vi.rollout(q0, steps=500)
    chain = vd.VariationalIntegrator(models.pendulum_chain(12), dt=0.01)
    qc = np.full(12, 0.1)
    traj_c = chain.rollout(qc, steps=500)
    cases = {
        "panda rollout 500": lambda: vi.rollout(q0, steps=500),
        "panda linearize 500": lambda: vi.linearize(traj),
        "chain12 rollout 500": lambda: chain.rollout(qc, steps=500),
        "chain12 linearize 500": lambda: chain.linearize(traj_c),
    }
    for name, run in cases.items():
        median, best = timed(run, repeats)
        print(f"{name:24s} median {1e3 * median:8.2f} ms  min {1e3 * best:8.2f} ms")


if __name__ == "__main__":
    main()
