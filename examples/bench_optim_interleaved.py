"""vidyn iLQR vs crocoddyl FDDP on the panda reach and the cart-pole swing-ups, interleaved.

Each round runs every solver in turn, so that slow stretches of a noisy machine hit all of
them alike: first ``warm`` untimed solves (default 1), then one timed solve. The untimed solve
lets the machine settle after the previous solver: crocoddyl's OpenMP workers keep spinning for
a few milliseconds after their last parallel region (libgomp's default wait policy), holding
one of our two cores, so that whichever solver comes right after two-threaded crocoddyl
starts on a machine with one core taken (``warm = 0`` shows it: every solver's first solve is
slower, vidyn's by up to 2.3x). Prints the minimum and the median wall time over the rounds and
the ratios crocoddyl / vidyn. The problems and solvers are those of ``bench_panda_crocoddyl.py``
(panda, gravity) and ``bench_ilqr_crocoddyl.py`` (cart-pole with the penalised pole torque,
without and with gravity); same crocoddyl install as there.

    python examples/bench_optim_interleaved.py [rounds] [panda,cp,cpg] [warm] [vidyn,vidynv,croc1,croc2]

``vidyn`` iterates in the VI's state ``(q, p)``, ``vidynv`` in ``(q, v)``
(``optim.ilqr(coordinates="velocity")``).

and the percentiles 0/10/25/50/75/90/100 of each solver's times.
"""

import os
import statistics

import numpy as np
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_ilqr_crocoddyl as C  # noqa: E402
import bench_panda_crocoddyl as P  # noqa: E402

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
runs = {
  "panda vidyn": lambda: P.vidyn_run(1e-9, True)["wall"],
  "panda vidynv": lambda: P.vidyn_run(1e-9, True, "velocity")["wall"],
  "panda croc1": lambda: P.crocoddyl_run(1e-9, 1, True)["wall"],
  "panda croc2": lambda: P.crocoddyl_run(1e-9, 2, True)["wall"],
  "cp vidyn": lambda: C.vidyn_solve(0.02, 125, False, 1e-9)["wall"],
  "cp vidynv": lambda: C.vidyn_solve(0.02, 125, False, 1e-9, False, "velocity")["wall"],
  "cp croc1": lambda: C.crocoddyl_solve(0.02, 125, 1e-9, 1)["wall"],
  "cp croc2": lambda: C.crocoddyl_solve(0.02, 125, 1e-9, 2)["wall"],
  "cpg vidyn": lambda: C.vidyn_solve(0.02, 125, False, 1e-9, True)["wall"],
  "cpg vidynv": lambda: C.vidyn_solve(0.02, 125, False, 1e-9, True, "velocity")["wall"],
  "cpg croc1": lambda: C.crocoddyl_solve(0.02, 125, 1e-9, 1, True)["wall"],
  "cpg croc2": lambda: C.crocoddyl_solve(0.02, 125, 1e-9, 2, True)["wall"],
}
sel = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] != "all" else None
warm = int(sys.argv[3]) if len(sys.argv) > 3 else 1
solvers = sys.argv[4].split(",") if len(sys.argv) > 4 else None
t = {k: [] for k in runs if (sel is None or k.split()[0] in sel) and (solvers is None or k.split()[1] in solvers)}
for f in t: runs[f]()
for _ in range(rounds):
    for k in t:
        for _ in range(warm):
            runs[k]()
        t[k].append(1e3 * runs[k]())
for k, v in t.items():
    print(f"{k:12s} min {min(v):8.2f}  median {statistics.median(v):8.2f} ms")
for k, v in t.items():
    print(f"{k:12s} percentiles " + " ".join(f"{p:.1f}" for p in np.percentile(v, [0, 10, 25, 50, 75, 90, 100])))
for p in ("panda", "cp", "cpg"):
    for ours in ("vidyn", "vidynv"):
        if f"{p} {ours}" not in t:
            continue
        v = t[f"{p} {ours}"]
        for c in ("croc1", "croc2"):
            if f"{p} {c}" not in t:
                continue
            w = t[f"{p} {c}"]
            print(f"{p} {c}/{ours}: min {min(w)/min(v):.2f}x  median {statistics.median(w)/statistics.median(v):.2f}x")
