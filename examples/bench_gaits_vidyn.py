"""vidyn's side of the gait benchmarks in BENCHMARKS.md: ANYmal's four gait cycles and its jump
(``anymal_walk.py``), with ``--friction`` the same with friction cones, and Talos's two steps
(``talos_walk.py``), each solved ``--repeats`` times; FDDP's iterations and the range of its wall
time (``res.wall_time``). The peers: ``bench_walk_crocoddyl.py`` and ``bench_talos_crocoddyl.py``.

Run: ``python examples/bench_gaits_vidyn.py [--plain] [--alpha-max A] [--repeats R] [--gaits walk,jump,…,talos] [--friction] [--xreg ρ]``
(``--plain``: every line search of FDDP from ``α = 1``, as before session 25).
"""

from __future__ import annotations

import argparse
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha-max", type=float, default=4.0, help="the longest step of FDDP's line search (1: none beyond the full step)")
    parser.add_argument("--plain", action="store_true", help="every line search from the full step (no fitted first step)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gaits", default="walk,trot,pace,bound,jump,talos", help="comma-separated: walk, trot, pace, bound, jump, talos")
    parser.add_argument("--friction", action="store_true", help="only the ANYmal gaits with friction cones")
    parser.add_argument("--xreg", type=float, default=None, help="FDDP's first state regularisation on the ANYmal gaits (default: vidyn.optim.fddp's, 1e-2; 0: none)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the URDFs' inertia notes
    gaits = args.gaits.split(",")
    for name in (g for g in gaits if g != "talos"):
        cone = anymal_walk.friction_cone(name) if args.friction else None
        label = f"{name}, friction cones" if args.friction else name
        print(f"{label}: {timed(lambda: anymal_walk.solve(name, friction=cone, verbose=False, alpha_max=args.alpha_max, fitted_step=not args.plain, xreg=args.xreg), args.repeats)}")
    if "talos" in gaits and not args.friction:
        print(f"talos, two steps: {timed(lambda: talos_walk.solve(2, verbose=False, alpha_max=args.alpha_max, fitted_step=not args.plain), args.repeats)}")


if __name__ == "__main__":
    main()
