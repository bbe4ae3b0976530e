"""Cart-pole swing-up by iLQR on the exact linearisation of the variational integrator.

models.cartpole(): cart along x (1 kg), pole (0.1 kg, 1 m rod) hanging at θ = 0, upright at
θ = π. Only the cart is actuated (``actuated=[0]``). Cost (y = (q, v), velocity state):
Σ dt·[½|y − y*|²_W + ½ r u²] + ½|y_N − y*|²_WN with y* = (0, π, 0, 0), W = diag(1, 1, .1, .1),
r = 1e-2, WN = 1e3·I; trapezoidal VI, dt = 0.02 s, T = 2.5 s. A second solve adds the
control limit |u| ≤ 20 N (box QP). The returned controls are re-simulated open loop to show
the trajectory is dynamically feasible. Saves examples/out/optim_cartpole_swingup.png.

    python examples/optim_cartpole_swingup.py
"""

from __future__ import annotations

import pathlib

import numpy as np

import vidyn as vd
from vidyn import optim

OUT = pathlib.Path(__file__).parent / "out"


def main() -> None:
    dt, T = 0.02, 2.5
    N = int(round(T / dt))
    vi = vd.VariationalIntegrator(vd.models.cartpole(), dt=dt)
    # one problem, read once, solved with and without control limits
    problem = optim.Problem(
        vi, [0.0, 0.0], U_init=np.zeros((N, 1)), actuated=[0], Q=dt * np.array([1.0, 1.0, 0.1, 0.1]), R=dt * 1e-2, QN=1e3,
        x_ref=[0.0, np.pi, 0.0, 0.0], cost_state="velocity",
    )
    settings = dict(max_iterations=500, tolerance=1e-9)
    runs = {"unconstrained": optim.ilqr(problem, **settings), "|u| ≤ 20 N": optim.ilqr(problem, u_min=-20, u_max=20, **settings)}
    for name, r in runs.items():
        again = vi.rollout([0.0, 0.0], [0.0, 0.0], r.U)
        feas = max(np.abs(again.q - r.q).max(), np.abs(again.p - r.p).max())
        print(f"{name:14s}: {r.status} after {r.iterations} iterations in {r.wall_time * 1e3:.0f} ms "
              f"(after the rollouts {r.timing['linearize'] * 1e3:.0f} ms), cost {r.cost_history[0]:.1f} -> {r.cost:.6f}, "
              f"final q = {np.round(r.q[-1], 4)}, max|u| = {np.abs(r.U).max():.1f} N, re-simulation defect {feas:.1e}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    t = np.arange(N + 1) * dt
    fig, ax = plt.subplots(2, 2, figsize=(11, 7))
    for name, r in runs.items():
        ax[0, 0].plot(t, r.q[:, 1], label=name)
        ax[0, 1].plot(t, r.q[:, 0], label=name)
        ax[1, 0].step(t[:-1], r.U[:, 0], where="post", label=name)
        ax[1, 1].semilogy(r.cost_history - r.cost + 1e-12, label=name)
    ax[0, 0].axhline(np.pi, color="k", lw=0.5)
    ax[0, 0].set(title="pole angle θ (rad)", xlabel="t (s)")
    ax[0, 1].set(title="cart position x (m)", xlabel="t (s)")
    ax[1, 0].set(title="cart force u (N)", xlabel="t (s)")
    ax[1, 1].set(title="J_i − J* (accepted iterations)", xlabel="iteration")
    for a in ax.flat:
        a.legend()
    fig.suptitle("cart-pole swing-up: iLQR on the exact VI linearisation")
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "optim_cartpole_swingup.png", dpi=110)
    print(f"saved {OUT / 'optim_cartpole_swingup.png'}")


if __name__ == "__main__":
    main()
