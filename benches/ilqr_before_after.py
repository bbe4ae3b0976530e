"""vidyn's own iLQR times (no peer): run it with two builds' interpreters, alternating, to
compare them in one sitting (BENCHMARKS.md, "iLQR before and after the session-13 changes").

    .venv/bin/python benches/ilqr_before_after.py [repeats]

Cart-pole swing-up with and without gravity (dt 0.02, T 2.5, cost on (q, v), cart actuated)
and a panda reach (100 steps, hand position); prints the median and best solve time.
"""

import statistics
import sys
import time
import warnings

import numpy as np

import vidyn as vd
warnings.simplefilter("ignore")
from vidyn import models
def cartpole(gravity):
    m = models.cartpole()
    if not gravity: m = m.with_gravity([0.0, 0.0, 0.0])
    dt, T = 0.02, 2.5; N = int(round(T / dt))
    vi = vd.VariationalIntegrator(m, dt=dt)
    Q = np.diag([dt, dt, 0.1 * dt, 0.1 * dt]); R = np.array([[1e-2 * dt]])
    run = lambda: vd.optim.ilqr(vi, np.zeros(2), steps=N, actuated=[0], Q=Q, R=R, QN=np.eye(4) * 1e3, x_ref=np.array([0, np.pi, 0, 0.0]), cost_state="velocity", max_iterations=1000, tolerance=1e-9)
    return run
def panda():
    m = models.example_robot("panda")
    vi = vd.VariationalIntegrator(m, dt=0.01)
    q0 = m.neutral()
    run = lambda: vd.optim.ilqr(vi, q0, steps=100, Q=0.0, R=1e-3, frame="panda_hand", frame_target=[0.4, 0.2, 0.5], frame_weight=1.0, frame_weight_terminal=100.0, max_iterations=200, tolerance=1e-8)
    return run
cases = {"cartpole-nog": cartpole(False), "cartpole-g": cartpole(True), "panda": panda()}
for name, run in cases.items():
    run()
    ts = []
    for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 15):
        t0 = time.perf_counter(); r = run(); ts.append(time.perf_counter() - t0)
    print(f"{name:14s} median {1e3*statistics.median(ts):7.2f} ms  min {1e3*min(ts):7.2f} ms  iters {r.iterations}")
