"""crocoddyl's bipedal walk (its ``examples/bipedal_walk.py``: Talos's legs, one walking cycle of
two steps, 0.6 m long and 0.1 m high, knots of 30 ms, 35-knot steps after 10-knot double
supports, the first step half as long), timed, as the peer of ``examples/talos_walk.py`` in
BENCHMARKS.md.

Needs crocoddyl with a binary-compatible pinocchio (see ``bench_ilqr_crocoddyl.py``). The
problems differ in their contact model and horizon: crocoddyl integrates the contact dynamics
of 6-D sole contacts (Euler, forward dynamics with Baumgarte stabilisation) with friction-cone
and wrench-cone costs and impulse models at touchdowns, 91 running knots, from the standing
state at every knot (``quasiStatic`` torques); vidyn steps a variational integrator with
bilateral 6-D sole contacts and a final 10-knot double support (100 steps), from a kinematic
state guess, by its own FDDP.

Run: ``python examples/bench_talos_crocoddyl.py [repeats]`` (prints iterations, cost and wall
time per solve).
"""

from __future__ import annotations

import sys
import time

import numpy as np


def main() -> None:
    import crocoddyl
    import example_robot_data
    from crocoddyl.utils.biped import SimpleBipedGaitProblem

    talos = example_robot_data.load("talos_legs")
    model = talos.model
    q0 = model.referenceConfigurations["half_sitting"].copy()
    x0 = np.concatenate([q0, np.zeros(model.nv)])
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for run in range(repeats):
        gait = SimpleBipedGaitProblem(model, "right_sole_link", "left_sole_link", fwddyn=True)
        problem = gait.createWalkingProblem(x0, 0.6, 0.1, 0.03, 35, 10)
        solver = crocoddyl.SolverFDDP(problem)
        xs = [x0] * (problem.T + 1)
        us = problem.quasiStatic([x0] * problem.T)
        started = time.perf_counter()
        solver.solve(xs, us, 100, False)
        wall = time.perf_counter() - started
        print(f"crocoddyl FDDP run {run}: T = {problem.T}, {solver.iter} iterations, cost {solver.cost:.5g}, {wall:.3f} s")


if __name__ == "__main__":
    main()
