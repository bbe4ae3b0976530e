"""The Python call's share of ``vidyn.aba_derivatives`` (issue 25: "the per-call overhead of
``vd.aba_derivatives`` etc. measured and kept below 5 % of the kernel on panda").

For each robot, 2000 random states: the time per state of 2000 single calls from Python, and of
one ``vidyn.batch.aba_derivatives`` call over all of them on one thread (the kernel with the
call's fixed costs spread over 2000 states); best of 7 alternating rounds. Their difference
bounds the per-call overhead from above while the batch's output traffic stays small next to the
kernel (the small robots); on larger ones the batch, which writes three (2000, n, n) arrays, is
the slower of the two and the difference says nothing.

Run: ``python benches/call_overhead.py``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import vidyn

ROBOTS = ("ur5", "panda", "solo12", "talos")
STATES, ROUNDS = 2000, 7


def main() -> None:
    warnings.simplefilter("ignore")  # the URDFs' inertia notes
    vidyn.set_num_threads(1)
    rng = np.random.default_rng(0)
    print("| robot | nv | single call (µs) | batch, per state (µs) | difference | of the batch's time |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in ROBOTS:
        model = vidyn.models.example_robot(name)
        q = np.array([model.random_configuration() for _ in range(STATES)])
        v, tau = rng.normal(size=(STATES, model.nv)), rng.normal(size=(STATES, model.nv))

        def single():
            for i in range(STATES):
                vidyn.aba_derivatives(model, q[i], v[i], tau[i])

        def batch():
            vidyn.batch.aba_derivatives(model, q, v, tau)

        best = {single: np.inf, batch: np.inf}
        for _ in range(ROUNDS):
            for f in best:
                t0 = time.perf_counter()
                f()
                best[f] = min(best[f], time.perf_counter() - t0)
        s, b = best[single] / STATES * 1e6, best[batch] / STATES * 1e6
        print(f"| {name} | {model.nv} | {s:.2f} | {b:.2f} | {s - b:+.2f} | {(s - b) / b * 100:+.0f} % |")


if __name__ == "__main__":
    main()
