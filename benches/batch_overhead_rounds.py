"""The Python overhead of one batched call, in many alternating rounds (issue 25).

    cargo build --release -p vidyn-batch --example batch_timing
    PYTHONPATH=python python benches/batch_overhead_rounds.py [--op rnea_derivatives] [--rounds 8]

Each round times the engine from Rust (`batch_timing OP 12 1000 0 THREADS REPS preallocated`:
outputs allocated once) and then the same call from Python into `out=` buffers allocated once,
REPS repetitions each, and reports the overhead from the two minima. The spread over rounds
separates a real overhead from a lucky or unlucky round of `batch_compare.py --only overhead`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

import numpy as np
from batch_compare import ROOT, problem

import vidyn

LINKS, BATCH = 12, 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="rnea_derivatives", choices=["rnea", "crba", "rnea_derivatives"])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    exe = ROOT / "target" / "release" / "examples" / "batch_timing"
    model = vidyn.models.pendulum_chain(LINKS, planar=False)
    q, v, a, _ = problem(LINKS, BATCH, 0)
    n = LINKS
    call, out = {
        "rnea": (lambda o: vidyn.batch.rnea(model, q, v, a, out=o), np.empty((BATCH, n))),
        "crba": (lambda o: vidyn.batch.crba(model, q, out=o), np.empty((BATCH, n, n))),
        "rnea_derivatives": (lambda o: vidyn.batch.rnea_derivatives(model, q, v, a, out=o), tuple(np.empty((BATCH, n, n)) for _ in range(3))),
    }[args.op]
    for threads in (int(k) for k in args.threads.split(",")):
        vidyn.set_num_threads(threads)
        overheads = []
        for _ in range(args.rounds):
            cmd = [str(exe), args.op, str(LINKS), str(BATCH), "0", str(threads), str(args.reps), "preallocated"]
            rust = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])["times"]
            python = []
            for _ in range(args.reps):
                t0 = time.perf_counter()
                call(out)
                python.append(time.perf_counter() - t0)
            overheads.append(min(python) / min(rust) - 1)
            print(f"{args.op}, {threads} thread(s): Rust {min(rust) * 1e3:.3f} ms, Python {min(python) * 1e3:.3f} ms, overhead {overheads[-1] * 100:+.1f} %", flush=True)
        print(f"{args.op}, {threads} thread(s): overhead {min(overheads) * 100:+.1f} … {max(overheads) * 100:+.1f} %, median {statistics.median(overheads) * 100:+.1f} %")
    vidyn.set_num_threads(0)


if __name__ == "__main__":
    main()
