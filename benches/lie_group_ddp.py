"""Full DDP (second order on the Lie group) against iLQR on two floating-base problems
(BENCHMARKS.md, "Second order on the Lie group"), both methods started from a rough iLQR
solution (expected decrease ≤ 1e-4·J):

* the free box of ``tests/test_optim_lie_group.py`` turned by 180° about y, N = 50, dt 20 ms,
  midpoint, run to 1e-11·J; and from zero controls;
* solo12 without gravity turning its base by 0.3 rad with its 12 leg joints alone (the falling
  cat of the same test file), N = 50, dt 20 ms, trapezoid, run to 1e-10·J (iLQR at most 300
  iterations, DDP at most 30).

    .venv/bin/python benches/lie_group_ddp.py

Prints iterations, final cost, convergence and wall time per method.
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import vidyn  # noqa: E402
from reference_motion import solo12  # noqa: E402
from test_optim_lie_group import HALF_TURN_ABOUT_Y, free_box  # noqa: E402
from vidyn import optim  # noqa: E402


def compare(name: str, vi: vidyn.VariationalIntegrator, q0: np.ndarray, tolerance: float, iterations: dict[str, int], **problem) -> None:
    rough = optim.ilqr(vi, q0, tolerance=1e-4, max_iterations=200, **problem)
    print(f"{name}: rough iLQR {rough.iterations} iterations, J = {rough.cost:.10g}")
    for start, u_init in (("rough", rough.U), ("zero", None)):
        for method in ("ilqr", "ddp"):
            t = time.perf_counter()
            res = optim.ilqr(vi, q0, U_init=u_init, tolerance=tolerance, max_iterations=iterations[method], method=method, **problem)
            wall = time.perf_counter() - t
            print(f"  from {start:5s} {method:4s}: {res.iterations:3d} iterations, J = {res.cost:.10g}, converged {res.converged}, {wall:.2f} s")
        if name.startswith("solo12"):
            break  # from zero controls only the free box


def main() -> None:
    box = free_box()
    goal = np.concatenate([HALF_TURN_ABOUT_Y, np.zeros(6)])
    vi = vidyn.VariationalIntegrator(box, 0.02, scheme="midpoint")
    compare("free box", vi, box.neutral(), 1e-11, {"ilqr": 200, "ddp": 200}, steps=50, Q=1e-3, R=1e-2, QN=1e5, x_ref=goal)
    model = solo12().with_gravity([0.0, 0.0, 0.0])
    n = model.nv
    q0 = model.neutral()
    turn = np.zeros(n)
    turn[5] = 0.3
    goal = np.concatenate([model.integrate(q0, turn), np.zeros(n)])
    qn = np.concatenate([np.full(6, 1e3), np.ones(12), np.full(n, 10.0)])
    vi = vidyn.VariationalIntegrator(model, 0.02)
    compare("solo12 falling cat", vi, q0, 1e-10, {"ilqr": 300, "ddp": 30}, steps=50, Q=1e-4, R=1e-3, QN=qn, x_ref=goal, actuated=list(range(6, 18)))


if __name__ == "__main__":
    main()
