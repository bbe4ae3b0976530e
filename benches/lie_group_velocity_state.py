"""iLQR with a cost on the velocity state ``(q, v)`` on floating bases, iterating on the VI's
``(q, p)`` (the cost through the Legendre transform) or on ``(q, v)`` itself
(``coordinates="velocity"``): iterations, final cost and the fastest of three wall times (one
thread). Problems: the falling cat of ``tests/test_optim_lie_group.py`` (solo12 without
gravity turning its base by 0.3 rad with its legs) and the free box's half turn.

Run: ``PYTHONPATH=python:tests python benches/lie_group_velocity_state.py``
"""

from __future__ import annotations

import numpy as np

import vidyn
from test_optim_lie_group import HALF_TURN_ABOUT_Y, free_box
from vidyn import optim


def falling_cat() -> tuple[vidyn.VariationalIntegrator, np.ndarray, dict]:
    model = vidyn.models.example_robot("solo12").with_gravity([0.0, 0.0, 0.0])
    turn = np.zeros(model.nv)
    turn[5] = 0.3
    goal = np.concatenate([model.integrate(model.neutral(), turn), np.zeros(model.nv)])
    end = np.concatenate([np.full(6, 1e3), np.ones(12), np.full(model.nv, 10.0)])
    problem = dict(steps=50, Q=1e-4, R=1e-3, QN=end, x_ref=goal, actuated=list(range(6, 18)), max_iterations=300)
    return vidyn.VariationalIntegrator(model, 0.02), model.neutral(), problem


def half_turn() -> tuple[vidyn.VariationalIntegrator, np.ndarray, dict]:
    model = free_box()
    goal = np.concatenate([HALF_TURN_ABOUT_Y, np.zeros(6)])
    weights = dict(Q=np.r_[np.full(6, 1e-3), np.full(6, 1e-1)], QN=np.r_[np.full(6, 1e5), np.full(6, 1e2)], R=1e-2)
    problem = dict(steps=50, x_ref=goal, tolerance=1e-12, max_iterations=300, **weights)
    return vidyn.VariationalIntegrator(model, 0.02), model.neutral(), problem


def main() -> None:
    vidyn.set_num_threads(1)
    print("| problem | iterating on | status | iterations | final cost | wall time (s) |")
    print("|---|---|---|---:|---:|---:|")
    for name, build in (("solo12 falling cat", falling_cat), ("free box half turn", half_turn)):
        vi, q0, problem = build()
        for coordinates in ("momentum", "velocity"):
            runs = [optim.ilqr(vi, q0, cost_state="velocity", coordinates=coordinates, **problem) for _ in range(3)]
            r = runs[-1]
            state = "(q, p)" if coordinates == "momentum" else "(q, v)"
            print(f"| {name} | {state} | {r.status} | {r.iterations} | {r.cost!r} | {min(x.wall_time for x in runs):.3f} |")


if __name__ == "__main__":
    main()
