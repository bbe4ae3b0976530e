"""crocoddyl's ANYmal gait cycles (its ``examples/quadrupedal_gaits.py``: walking, trotting,
pacing, bounding, jumping), timed, as the peers of ``examples/anymal_walk.py --gait …`` in BENCHMARKS.md.

Needs crocoddyl with a binary-compatible pinocchio (see ``bench_ilqr_crocoddyl.py``):
``pip install --no-deps crocoddyl==3.2.1 libcrocoddyl==3.2.1 pin==4.0.0 libpinocchio==4.0.0``
plus ``example-robot-data-loaders``. The problems differ in their contact model: crocoddyl
integrates contact dynamics (Euler, 10 ms) with friction-cone costs and impulse models at
touchdowns and solves it by FDDP from a quasi-static warm start; vidyn steps a variational
integrator with bilateral point contacts (friction-cone penalties with ``--friction``) and
solves it by its own FDDP from the same kind of warm start.
"""

from __future__ import annotations

import sys
import time

import numpy as np

#: crocoddyl's gait parameters: problem builder, step length, height, knots, support knots
GAITS = {
    "walk": ("createWalkingProblem", 0.25, 0.15, 25, 2),
    "trot": ("createTrottingProblem", 0.15, 0.1, 25, 2),
    "pace": ("createPacingProblem", 0.15, 0.1, 25, 2),
    "bound": ("createBoundingProblem", 0.15, 0.1, 25, 5),
}


def main() -> None:
    import crocoddyl
    import example_robot_data
    import pinocchio
    from crocoddyl.utils.quadruped import SimpleQuadrupedalGaitProblem

    anymal = example_robot_data.load("anymal")
    feet = ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")
    q0 = anymal.model.referenceConfigurations["standing"].copy()
    x0 = np.concatenate([q0, np.zeros(anymal.model.nv)])
    name = sys.argv[1] if len(sys.argv) > 1 else "walk"
    for repeat in range(3):
        # a builder of its own each time: its first problem's first steps are half as long
        gait = SimpleQuadrupedalGaitProblem(anymal.model, *feet, integrator="euler", control="zero")
        if name == "jump":  # its quadrupedal_gaits.py jump: 0.15 m up, 0.3 m sideways
            problem = gait.createJumpingProblem(x0, 0.15, np.array([0.0, 0.3, 0.0]), 1e-2, 10, 20)
        else:
            builder, length, height, knots, support = GAITS[name]
            problem = getattr(gait, builder)(x0, length, height, 1e-2, knots, support)
        solver = crocoddyl.SolverFDDP(problem)
        xs = [x0] * (problem.T + 1)
        us = problem.quasiStatic([x0] * problem.T)
        start = time.perf_counter()
        solver.solve(xs, us, 100, False)
        elapsed = time.perf_counter() - start
        data = anymal.model.createData()
        pinocchio.forwardKinematics(anymal.model, data, solver.xs[-1][: anymal.model.nq])
        pinocchio.updateFramePlacements(anymal.model, data)
        advance = [data.oMf[anymal.model.getFrameId(f)].translation[0] for f in feet]
        print(f"{name} run {repeat}: {problem.T} knots, {solver.iter} FDDP iterations, {elapsed:.3f} s, cost {solver.cost:.4g}, feet x at the end {np.round(advance, 3)}, base x {solver.xs[-1][0]:.3f}")


if __name__ == "__main__":
    main()
