"""What the per-step energy check of rollouts costs (issue 21): the same `vi.rollout` with the
check on (the default, `max_energy_error=0.4`) and off (`inf`), one thread, best of 15 runs of
2000 steps each, alternating, in one process.

    .venv/bin/python benches/energy_check_cost.py
"""

from __future__ import annotations

import platform
import time

import numpy as np

import vidyn
from vidyn import models


def best_per_step(vi: vidyn.VariationalIntegrator, q0: np.ndarray, steps: int) -> float:
    t0 = time.perf_counter()
    vi.rollout(q0, steps=steps)
    return (time.perf_counter() - t0) / steps


def cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main() -> None:
    vidyn.set_num_threads(1)
    print(f"CPU: {cpu()}; one thread; µs per step (best of 15)")
    cases = [(models.cartpole(), 0.01), (models.pendulum_chain(12, planar=False), 0.01), (models.pendulum_chain(50, planar=False), 0.005)]
    for model, dt in cases:
        q0 = model.neutral() + 0.1
        on, off = vidyn.VariationalIntegrator(model, dt), vidyn.VariationalIntegrator(model, dt, max_energy_error=np.inf)
        t_on = t_off = np.inf
        for _ in range(15):
            t_off = min(t_off, best_per_step(off, q0, 2000))
            t_on = min(t_on, best_per_step(on, q0, 2000))
        print(f"{model.name:24s} off {1e6 * t_off:7.2f}  on {1e6 * t_on:7.2f}  on/off {t_on / t_off:.2f}")


if __name__ == "__main__":
    main()
