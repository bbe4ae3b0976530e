"""Main demo: simulate a real robot (Franka Panda from example-robot-data) with a 4th-order
variational integrator and linearise every step of the motion exactly.

What it shows:
* URDF loading with Pinocchio's joint order; RNEA/ABA consistency on the loaded model;
* a Simpson variational integrator (Fan, Schultz & Murphey 2018) released near its neutral pose
  under gravity, without damping: the energy error stays small (the plot shows how small, and
  where). The VI does not enforce joint limits, so prismatic joints (the Panda's fingers) are
  held by springs (200 N/m about mid-stroke) — free, they would be flung out by the spinning
  arm;
* the exact flow-map Jacobians A_k = d(q,p)_{k+1}/d(q,p)_k and B_k = d(q,p)_{k+1}/du_k of all
  steps, computed in parallel, checked against central differences on one step, and the
  symplectic identity AᵀJA = J;
* a plot, saved to examples/out/demo_<robot>.png: the arm's joint angles, the fingers'
  positions (prismatic joints) and the energy error E(t) − E(0) as it is (signed, linear
  scale, and relative to the largest kinetic energy of the motion);
* an animation of the motion (``vidyn.viz``), examples/out/demo_<robot>.gif, and, with meshcat
  installed, an interactive page to open in a browser, examples/out/demo_<robot>.html.

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
    except ImportError:
        print("matplotlib not installed: skipping the plot and the animation")
        return
    t = np.arange(steps + 1) * args.dt
    kinetic = np.array([vd.kinetic_energy(model, q, vi.velocity(q, p)) for q, p in zip(traj.q, traj.p)])
    path = out / f"demo_{args.robot}.png"
    plot(args, model, traj.q, t, energy, kinetic, path)
    print(f"plot saved to {path}")

    from vidyn import viz

    gif = viz.animate(model, traj.q, args.dt, out / f"demo_{args.robot}.gif", collision=args.robot, fps=20,
                      title=f"{args.robot} released under gravity ({args.scheme} VI, dt = {args.dt:g} s)")
    print(f"animation saved to {gif}")
    try:
        page = out / f"demo_{args.robot}.html"
        viz.meshcat_html(model, traj.q, args.dt, page, collision=args.robot)
        print(f"interactive page saved to {page} (open it in a browser)")
    except ImportError as e:
        print(f"no interactive page: {e}")


def plot(args, model, q, t, energy, kinetic, path) -> None:
    """Joint angles (rad) of the revolute joints, positions (mm) of the prismatic ones (the
    fingers, about their springs' rest), and the energy error E(t) − E(0) (J) with what it
    amounts to against the largest kinetic energy."""
    import matplotlib.pyplot as plt

    kinds = np.array(model.joint_kinds)
    names = np.array(model.joint_names)
    revolute, prismatic = np.flatnonzero(kinds == "revolute"), np.flatnonzero(kinds == "prismatic")
    panels = 2 + (len(prismatic) > 0)
    fig, ax = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2))
    for i in revolute:
        ax[0].plot(t, q[:, model.idx_q[i]], label=names[i])
    ax[0].set(xlabel="t (s)", ylabel="joint angle (rad)", title=f"{args.robot}: arm joint angles ({args.scheme} VI)")
    ax[0].legend(fontsize=7, ncol=2)
    if len(prismatic):
        for i in prismatic:
            ax[1].plot(t, 1e3 * q[:, model.idx_q[i]], label=names[i])
        ax[1].set(xlabel="t (s)", ylabel="position (mm)", title="finger positions (springs 200 N/m)")
        ax[1].legend(fontsize=7)
    error = energy - energy[0]
    peak = np.abs(error).max()
    ax[-1].plot(t, error, color="k", linewidth=0.8, label="E(t) − E(0), E: kinetic + gravity + finger springs")
    ax[-1].axhline(0.0, color="gray", linewidth=0.5)
    ax[-1].set(xlabel="t (s)", ylabel="energy error (J)")
    ax[-1].set_title(f"energy error: peak {peak:.1e} J ({peak / kinetic.max():.1e} of the peak kinetic energy, "
                     f"{kinetic.max():.0f} J);\nat t = {t[-1]:g} s: {error[-1]:.1e} J", fontsize=9)
    ax[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)

if __name__ == "__main__":
    main()
