"""Cart-pole swing-up by iLQR, or by multiple shooting (FDDP) from a state-interpolated guess,
on the exact linearisation of the variational integrator.

models.cartpole(): cart along x (1 kg), pole (0.1 kg, 1 m rod) hanging at θ = 0, upright at
θ = π. Only the cart is actuated (``actuated=[0]``). Cost (y = (q, v), velocity state):
Σ dt·[½|y − y*|²_W + ½ r u²] + ½|y_N − y*|²_WN with y* = (0, π, 0, 0), W = diag(1, 1, .1, .1),
r = 1e-2, WN = 1e3·I; trapezoidal VI, dt = 0.02 s, T = 2.5 s. A second solve adds the
control limit |u| ≤ 20 N (box QP). The returned controls are re-simulated open loop to show
the trajectory is dynamically feasible. Saves examples/out/optim_cartpole_swingup.png
(``…_fddp.png`` with ``--solver fddp``); ``--animate`` also saves the limited swing-up's
motion, examples/out/optim_cartpole_swingup.gif (and with meshcat an interactive page, .html).

``--solver ilqr`` (default) starts from zero force, a feasible guess (the pole stays down).
``--solver fddp`` (:func:`vidyn.optim.fddp`, crocoddyl's ``SolverFDDP``) starts from a guess
that no rollout follows: the cart at rest at x = 0 while the pole turns linearly from hanging
to upright, momenta zero at every knot, zero force. The guess's gaps (how far one VI step from
each guessed state lands from the next one) are printed, and the solution's, which FDDP
closes. ``examples/bench_fddp_crocoddyl.py`` runs crocoddyl's FDDP from the same guess.

    python examples/optim_cartpole_swingup.py [--solver ilqr|fddp] [--animate]
"""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

import numpy as np

import vidyn as vd
from vidyn import optim

OUT = pathlib.Path(__file__).parent / "out"


def interpolated_guess(steps: int) -> np.ndarray:
    """FDDP's warm start, configurations (N+1, 2): the cart held at x = 0, the pole angle linear
    from θ = 0 (hanging, the start) to θ = π (upright, the goal). Momenta are left to ``fddp``'s
    default, zero: the guess is at rest at every knot, hence not a motion of the VI."""
    return np.column_stack([np.zeros(steps + 1), np.linspace(0.0, np.pi, steps + 1)])


def max_gap(vi: vd.VariationalIntegrator, q: np.ndarray, p: np.ndarray, U: np.ndarray) -> float:
    """Largest gap |step(q_k, p_k, U_k) − (q_{k+1}, p_{k+1})|_∞ of a state trajectory: zero for a
    rollout (up to the VI's Newton tolerance), what multiple shooting closes otherwise."""
    gap = 0.0
    for k in range(len(U)):
        qn, pn = vi.step(q[k], p[k], U[k])
        gap = max(gap, float(np.abs(qn - q[k + 1]).max()), float(np.abs(pn - p[k + 1]).max()))
    return gap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", choices=["ilqr", "fddp"], default="ilqr", help="iLQR from zero force (default) or FDDP from the interpolated guess")
    parser.add_argument("--animate", action="store_true", help="save the limited swing-up to examples/out/optim_cartpole_swingup.gif (and .html)")
    args = parser.parse_args()
    dt, T = 0.02, 2.5
    N = int(round(T / dt))
    vi = vd.VariationalIntegrator(vd.models.cartpole(), dt=dt)
    # one problem, read once, solved with and without control limits
    problem = optim.Problem(
        vi, [0.0, 0.0], U_init=np.zeros((N, 1)), actuated=[0], Q=dt * np.array([1.0, 1.0, 0.1, 0.1]), R=dt * 1e-2, QN=1e3,
        x_ref=[0.0, np.pi, 0.0, 0.0], cost_state="velocity",
    )
    settings: dict[str, Any] = dict(max_iterations=500, tolerance=1e-9)
    if args.solver == "fddp":
        guess = interpolated_guess(N)
        print(f"guess: pole turned linearly 0 → π at rest, zero force; its largest gap {max_gap(vi, guess, np.zeros_like(guess), np.zeros((N, 2))):.3f}")
        runs = {
            "unconstrained": optim.fddp(problem, X_init=guess, **settings),
            "|u| ≤ 20 N": optim.fddp(problem, X_init=guess, u_min=-20, u_max=20, **settings),
        }
    else:
        runs = {"unconstrained": optim.ilqr(problem, **settings), "|u| ≤ 20 N": optim.ilqr(problem, u_min=-20, u_max=20, **settings)}
    label = "FDDP from an interpolated guess" if args.solver == "fddp" else "iLQR"
    for name, r in runs.items():
        again = vi.rollout([0.0, 0.0], [0.0, 0.0], r.U)
        feas = max(np.abs(again.q - r.q).max(), np.abs(again.p - r.p).max())
        print(f"{name:14s}: {r.status} after {r.iterations} iterations in {r.wall_time * 1e3:.0f} ms "
              f"(after the rollouts {r.timing['linearize'] * 1e3:.0f} ms), cost {r.cost_history[0]:.1f} -> {r.cost:.6f}, "
              f"final q = {np.round(r.q[-1], 4)}, max|u| = {np.abs(r.U).max():.1f} N, largest gap {max_gap(vi, r.q, r.p, r.U):.1e}, "
              f"re-simulation defect {feas:.1e}")
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
        # the cost of an infeasible iterate can be below the optimum: plot |J_i − J*|
        ax[1, 1].semilogy(np.abs(r.cost_history - r.cost) + 1e-12, label=name)
    if args.solver == "fddp":
        ax[0, 0].plot(t, guess[:, 1], "k--", lw=0.8, label="guess")
    ax[0, 0].axhline(np.pi, color="k", lw=0.5)
    ax[0, 0].set(title="pole angle θ (rad)", xlabel="t (s)")
    ax[0, 1].set(title="cart position x (m)", xlabel="t (s)")
    ax[1, 0].set(title="cart force u (N)", xlabel="t (s)")
    ax[1, 1].set(title="|J_i − J*| (accepted iterations)", xlabel="iteration")
    for a in ax.flat:
        a.legend()
    fig.suptitle(f"cart-pole swing-up: {label} on the exact VI linearisation")
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    png = OUT / ("optim_cartpole_swingup_fddp.png" if args.solver == "fddp" else "optim_cartpole_swingup.png")
    fig.savefig(png, dpi=110)
    print(f"saved {png}")
    if args.animate:
        animate(vi.model, runs["|u| ≤ 20 N"].q, dt, label)


def animate(model: vd.Model, q: np.ndarray, dt: float, solver: str = "iLQR") -> None:
    """The swing-up as a GIF (and, with meshcat, an interactive page) in examples/out/."""
    from vidyn import viz

    cart = [viz.Shape("cart_link", "box", (0.3, 0.15, 0.12), np.eye(4))]  # drawn like a URDF's collision box
    gif = viz.animate(model, q, dt, OUT / "optim_cartpole_swingup.gif", collision=cart, trace=["tip"],
                      title=f"cart-pole swing-up, |u| ≤ 20 N ({solver} on the VI)")
    print(f"saved {gif}")
    try:
        viz.meshcat_html(model, q, dt, OUT / "optim_cartpole_swingup.html", collision=cart)
        print(f"saved {OUT / 'optim_cartpole_swingup.html'}")
    except ImportError as e:
        print(f"no interactive page: {e}")


if __name__ == "__main__":
    main()
