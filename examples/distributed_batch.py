"""Rollouts and exact linearisations of many trajectories, spread over a Dask cluster.

Starts a local cluster of 2 worker processes (1 thread each), simulates B trajectories of a
12-link pendulum chain under random controls with ``vidyn.distributed``, linearises every
step, checks that the result is bit-for-bit the single-machine ``vidyn.batch`` result and
prints the timings. Point ``--scheduler`` at a running ``dask scheduler`` to use a real
cluster (its workers need vidyn installed).

    python examples/distributed_batch.py [--trajectories 64] [--steps 200] [--scheduler tcp://host:8786]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import vidyn
import vidyn.distributed as vdd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--links", type=int, default=12)
    ap.add_argument("--scheduler", default=None, help="address of a running Dask scheduler (default: a local cluster)")
    args = ap.parse_args()

    from distributed import Client, LocalCluster

    if args.scheduler:
        client = Client(args.scheduler)
    else:
        client = Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None))
    print(client)

    # The integrator travels to the workers pickled (its model and arguments).
    vi = vidyn.VariationalIntegrator(vidyn.models.pendulum_chain(args.links), dt=0.01)
    n, b, steps = vi.n, args.trajectories, args.steps
    rng = np.random.default_rng(0)
    q0 = rng.uniform(-0.5, 0.5, (b, n))
    v0 = rng.uniform(-0.5, 0.5, (b, n))
    u = rng.uniform(-1.0, 1.0, (b, steps, n))

    vdd.rollout(client, vi, q0[:2], v0[:2], u[:2, :2], worker_threads=1)  # warm up the workers (import)
    t = time.perf_counter()
    roll = vdd.rollout(client, vi, q0, v0, u, worker_threads=1)
    t_roll = time.perf_counter() - t
    t = time.perf_counter()
    a, bm = vdd.linearize(client, vi, roll, worker_threads=1)
    t_lin = time.perf_counter() - t
    print(f"cluster: rollout {b}x{steps} steps of a {n}-link chain in {t_roll:.3f} s, linearisation in {t_lin:.3f} s")
    print(f"         q {roll.q.shape}, A {a.shape}, B {bm.shape}")

    t = time.perf_counter()
    local = vidyn.batch.rollout(vi, q0, v0, u)
    la, lb = vidyn.batch.linearize(vi, local)
    t_local = time.perf_counter() - t
    print(f"local ({vidyn.get_num_threads()} threads): rollout + linearisation in {t_local:.3f} s")
    identical = all(np.array_equal(x, y) for x, y in zip((roll.q, roll.p, a, bm), (local.q, local.p, la, lb)))
    print("cluster result identical to the local one:", identical)
    client.close()
    if not identical:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
