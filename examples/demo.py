"""Main demo: simulate a real robot (Franka Panda from example-robot-data) under gravity with
joint damping, then linearise the discrete dynamics along the trajectory.

The step map is semi-implicit Euler on the configuration manifold,
    v_{k+1} = v_k + dt * aba(q_k, v_k, u_k - D v_k),   q_{k+1} = q_k (+) dt * v_{k+1},
and its Jacobians A_k = df/dx, B_k = df/du are taken here by central differences of that map
(the analytic variational-integrator linearisation replaces this once it lands).

Run:  bash scripts/demo.sh            (prints a summary, saves examples/out/demo_<robot>.png)
      bash scripts/demo.sh --robot talos --seconds 1
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np

import vidyn as vd
from vidyn import models


def step(model: vd.Model, q, v, u, dt, damping):
    a = vd.aba(model, q, v, u - damping * v)
    v_next = v + dt * a
    return model.integrate(q, dt * v_next), v_next


def linearise(model: vd.Model, q, v, u, dt, damping, h=1e-6):
    """Central differences of the step map in tangent coordinates: x = (q, v), dx = (dq, dv)."""
    nv = model.nv
    A = np.zeros((2 * nv, 2 * nv))
    B = np.zeros((2 * nv, nv))
    q0, _ = step(model, q, v, u, dt, damping)

    def out(qn, vn):
        return np.concatenate([model.difference(q0, qn), vn])

    for k in range(2 * nv):
        dx = np.zeros(2 * nv)
        dx[k] = h
        plus = step(model, model.integrate(q, dx[:nv]), v + dx[nv:], u, dt, damping)
        minus = step(model, model.integrate(q, -dx[:nv]), v - dx[nv:], u, dt, damping)
        A[:, k] = (out(*plus) - out(*minus)) / (2 * h)
    for k in range(nv):
        du = np.zeros(nv)
        du[k] = h
        B[:, k] = (out(*step(model, q, v, u + du, dt, damping)) - out(*step(model, q, v, u - du, dt, damping))) / (2 * h)
    return A, B


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="panda", help="example-robot-data robot (panda, ur5, solo12, talos, ...)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "out"))
    args = parser.parse_args()

    model = models.example_robot(args.robot)
    print(f"model: {model}")
    q = model.neutral()
    v = np.zeros(model.nv)
    damping = np.where(model.damping > 0, model.damping, 0.5)
    u = np.zeros(model.nv)
    steps = int(round(args.seconds / args.dt))

    qs, energies = [q.copy()], []
    t0 = time.perf_counter()
    for _ in range(steps):
        energies.append(vd.kinetic_energy(model, q, v) + vd.potential_energy(model, q))
        q, v = step(model, q, v, u, args.dt, damping)
        qs.append(q.copy())
    wall = time.perf_counter() - t0
    energies.append(vd.kinetic_energy(model, q, v) + vd.potential_energy(model, q))
    print(f"simulated {args.seconds:.2f} s ({steps} steps of {args.dt:g} s) in {wall * 1e3:.1f} ms "
          f"({wall / steps * 1e6:.1f} us/step from Python)")
    print(f"mechanical energy: start {energies[0]:.4f} J, end {energies[-1]:.4f} J (damping dissipates)")

    A, B = linearise(model, q, v, u, args.dt, damping)
    rho = max(abs(np.linalg.eigvals(A)))
    print(f"linearisation at the final state: A {A.shape}, B {B.shape}, spectral radius of A = {rho:.6f}")
    frame = model.frame_names[-1]
    J = vd.jacobian(model, q, frame)
    print(f"Jacobian of frame '{frame}' (local-world-aligned): shape {J.shape}, rank {np.linalg.matrix_rank(J)}")

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
    ax[0].plot(t, np.array(qs)[:, : min(model.nq, 9)])
    ax[0].set(xlabel="t [s]", ylabel="q", title=f"{args.robot}: joint positions")
    ax[1].plot(t, energies)
    ax[1].set(xlabel="t [s]", ylabel="E [J]", title="mechanical energy")
    fig.tight_layout()
    path = out / f"demo_{args.robot}.png"
    fig.savefig(path, dpi=100)
    print(f"plot saved to {path}")


if __name__ == "__main__":
    main()
