"""vidyn's side of the gait benchmarks in BENCHMARKS.md: ANYmal's four gait cycles and its jump
(``anymal_walk.py``, three solves each), the same with friction cones (three solves each) and Talos's two steps (``talos_walk.py``, three solves), FDDP's iterations and wall time
(``res.wall_time``). The peers: ``bench_walk_crocoddyl.py`` and ``bench_talos_crocoddyl.py``.

Run: ``python examples/bench_gaits_vidyn.py``.
"""

from __future__ import annotations

import warnings

import anymal_walk
import talos_walk


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
    for name in ("walk", "trot", "pace", "bound", "jump"):
        cone = anymal_walk.friction_cone(name)
        print(f"{name}, friction cones: {timed(lambda: anymal_walk.solve(name, friction=cone, verbose=False), 3)}")
    print(f"talos, two steps: {timed(lambda: talos_walk.solve(2, verbose=False), 3)}")


if __name__ == "__main__":
    main()
