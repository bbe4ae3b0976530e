"""vidyn's side of the gait benchmarks in BENCHMARKS.md: ANYmal's four gait cycles and its jump
(``anymal_walk.py``, three solves each), the four gaits with friction cones (one solve
each) and Talos's two steps (``talos_walk.py``, three solves), FDDP's iterations and wall time
(``res.wall_time``). The peers: ``bench_walk_crocoddyl.py`` and ``bench_talos_crocoddyl.py``.

Run: ``python examples/bench_gaits_vidyn.py``.
"""

from __future__ import annotations

import warnings

import anymal_walk
import talos_walk

import vidyn


def timed(solve, repeats: int) -> str:
    times = []
    for _ in range(repeats):
        res = solve()[-1]
        times.append(res.wall_time)
    return f"{res.iterations} it, {min(times):.3f}-{max(times):.3f} s, cost {res.cost:.4g}"


def main() -> None:
    warnings.simplefilter("ignore")  # the URDFs' inertia notes
    for name in ("walk", "trot", "pace", "bound", "jump"):
        print(f"{name}: {timed(lambda: anymal_walk.solve(name, verbose=False), 3)}")
    cone = vidyn.optim.FrictionCone(0, mu=0.7, weight=1e-2, tip=anymal_walk.CONE_TIP)
    for name in ("walk", "trot", "pace", "bound"):
        print(f"{name}, friction cones: {timed(lambda: anymal_walk.solve(name, friction=cone, verbose=False), 1)}")
    print(f"talos, two steps: {timed(lambda: talos_walk.solve(2, verbose=False), 3)}")


if __name__ == "__main__":
    main()
