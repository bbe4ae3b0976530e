"""Peak memory of a linearisation from Python against the size of its outputs (issue 25: "every
linearisation written straight into its NumPy output, no 2× peak"), for
`VariationalIntegrator.linearize` and `vidyn.batch.linearize`: the growth of the process's peak
resident set (`ru_maxrss`) over the call, in a fresh process per method.

    .venv/bin/python benches/linearize_memory.py vi
    .venv/bin/python benches/linearize_memory.py batch

A 40-link pendulum chain, 400 steps of 2 ms from 0.02 rad (A, B: 29 MB).
"""

from __future__ import annotations

import resource
import sys

import numpy as np

import vidyn
import vidyn.batch as vb


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    method = sys.argv[1] if len(sys.argv) > 1 else "vi"
    n, steps = 40, 400
    vi = vidyn.VariationalIntegrator(vidyn.models.pendulum_chain(n), dt=0.002)
    traj = vi.rollout(np.full(n, 0.02), np.zeros(n), steps=steps)
    before = peak_mb()
    if method == "batch":
        a, b = vb.linearize(vi, traj.q[None], traj.p[None], traj.u[None])
    else:
        a, b = vi.linearize(traj)
    grown = peak_mb() - before
    outputs = (a.nbytes + b.nbytes) / 2**20
    print(f"{method}: outputs {outputs:.0f} MB, peak resident set grew {grown:.0f} MB ({grown / outputs:.2f}× the outputs)")


if __name__ == "__main__":
    main()
