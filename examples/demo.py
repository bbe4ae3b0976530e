"""Main demo: simulate a real robot (Franka Panda from example-robot-data) with a 4th-order
variational integrator and linearise every step of the motion exactly.

What it shows:
* URDF loading with Pinocchio's joint order; RNEA/ABA consistency on the loaded model;
* a Simpson variational integrator (Fan, Schultz & Murphey 2018) released near its neutral pose
  under gravity, without damping: energy stays bounded. The VI does not enforce joint limits,
  so prismatic joints (the Panda's fingers) are held by springs (200 N/m about mid-stroke) —
  free, they would be flung out by the spinning arm;
* the exact flow-map Jacobians A_k = d(q,p)_{k+1}/d(q,p)_k and B_k = d(q,p)_{k+1}/du_k of all
  steps, computed in parallel, checked against central differences on one step, and the
  symplectic identity AᵀJA = J;
* a plot of the joint angles and the energy error, saved to examples/out/.

Run:  bash scripts/demo.sh                      (panda, 2 s)
      bash scripts/demo.sh --robot ur5 --seconds 5
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

import vidyn as vd
from vidyn import models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="panda", help="fixed-base example-robot-data robot with revolute/prismatic joints (panda, ur5, kinova, ...)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--dt", type=float, default=0.0025)
    parser.add_argument("--scheme", default="simpson", choices=["trapezoid", "simpson"])
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "out"))
    args = parser.parse_args()

    model = models.example_robot(args.robot, floating_base=False)
    print(f"model: {model}, joints {', '.join(model.joint_names)}")

    rng = np.random.default_rng(0)
    q0 = model.neutral() + 0.3 * rng.standard_normal(model.nv) * (np.array(model.joint_kinds) == "revolute")
    v0 = np.zeros(model.nv)
    tau = vd.rnea(model, q0, v0, np.zeros(model.nv))
    print(f"gravity torques at the start pose: {np.array2string(tau, precision=2)}")
    print(f"aba(rnea(a)) round trip: {np.abs(vd.aba(model, q0, v0, tau)).max():.1e} (should be ~0)")

    prismatic = np.array([k == "prismatic" for k in model.joint_kinds])
    lo, hi = model.lower_position_limit, model.upper_position_limit
    rest = np.where(prismatic & np.isfinite(lo) & np.isfinite(hi), 0.5 * (lo + hi), 0.0)
    stiffness = np.where(prismatic, 200.0, 0.0)
    vi = vd.VariationalIntegrator(model, args.dt, scheme=args.scheme, damping=np.zeros(model.nv), stiffness=stiffness, rest=rest)
    steps = int(round(args.seconds / args.dt))
    t0 = time.perf_counter()
    traj = vi.rollout(q0, v0, np.zeros((steps, model.nv)))
    t_sim = time.perf_counter() - t0
    energy = vi.energy(traj.q, traj.p)  # includes the finger springs' potential
    drift = np.abs(energy - energy[0])
    print(f"simulated {args.seconds:g} s = {steps} steps of {args.dt:g} s ({vi}) in {t_sim * 1e3:.1f} ms, "
          f"{traj.iterations.mean():.2f} Newton iterations per step")
    half = len(drift) // 2
    print(f"energy: {energy[0]:.6f} J at start; max |E - E0| = {drift[:half].max():.2e} J in the first half, "
          f"{drift[half:].max():.2e} J in the second")

    t0 = time.perf_counter()
    A, B = vi.linearize(traj)
    t_lin = time.perf_counter() - t0
    n = model.nv
    J = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    symplectic = max(np.abs(a.T @ J @ a - J).max() for a in A)
    print(f"linearised all {steps} steps in {t_lin * 1e3:.1f} ms: A {A.shape}, B {B.shape}; max |AᵀJA - J| = {symplectic:.1e}")

    k = steps // 2
    h = 1e-6
    x = np.concatenate([traj.q[k], traj.p[k]])

    def f(x):
        return np.concatenate(vi.step(x[:n], x[n:]))

    a_fd = np.column_stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2 * n)])
    rel = np.abs(A[k] - a_fd).max() / np.abs(a_fd).max()
    print(f"step {k}: max |A - A_fd| / max |A_fd| = {rel:.1e} (central differences, h = {h:g})")
    print(f"spectral radius of A_{k}: {max(abs(np.linalg.eigvals(A[k]))):.6f}")

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: skipping the plot")
        return
    t = np.arange(steps + 1) * args.dt
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot(t, traj.q)
    ax[0].set(xlabel="t [s]", ylabel="q [rad, m]", title=f"{args.robot}: joint positions ({args.scheme} VI)")
    ax[1].semilogy(t[1:], np.maximum(drift[1:], 1e-16))
    ax[1].set(xlabel="t [s]", ylabel="|E - E0| [J]", title="energy error (bounded)")
    fig.tight_layout()
    path = out / f"demo_{args.robot}.png"
    fig.savefig(path, dpi=100)
    print(f"plot saved to {path}")


if __name__ == "__main__":
    main()
