"""Johnson's projection-operator method (2012, Ch. 6) on the pendulum on a cart of the thesis
(§6.7.1; trep's ``pend-on-cart-optimization.py`` settings): cart 10 kg actuated horizontally,
pendulum a 1 kg point mass on 1 m, g = 9.8, Δt = 0.01 s over 10 s, desired pendulum angle
θ_d(t) = 130°·(1 − cos(π(t − 3)/2))/2 on 3 ≤ t ≤ 7 s. Cost on the VI state x = (q, p):
Σ ½|x − x_d|²_Q + ½ r u² + ½|x_N − x_d|²_Q, Q = diag(0.01, 100, 0.01, 0.01), r = 1e-2.

Like trep, the first iterate is the projection of the desired curve, P(x_d, 0), with the DLQR
feedback (Q = R = 1) about it. Each iteration: DLQR about the iterate, the quasi-Newton
descent direction of the LQ problem, Armijo search P(ξ + λδξ) with the projection-success
check, until |Dh∘δξ| < 1e-6 (the thesis's tolerance). iLQR on the same problem from zero
controls for comparison (it stops in a poorer local minimum, the pendulum below horizontal —
the stall the thesis reports without dynamic embedding).
The Newton model is not available on the VI yet (it needs the second-order VI derivatives).
Also prints the idempotence check P(P(ξ̄)) = P(ξ̄) on a perturbed curve. Saves
examples/out/optim_projection_pendulum_on_cart.png.

    python examples/optim_projection_pendulum_on_cart.py
"""

from __future__ import annotations

import pathlib
import time

import numpy as np

import vidyn as vd
from vidyn import optim

OUT = pathlib.Path(__file__).parent / "out"


def pendulum_on_cart() -> vd.Model:
    b = vd.ModelBuilder("pendulum_on_cart")
    cart = b.add_body(None, "cart", "prismatic", axis=[1, 0, 0], mass=10.0)
    b.add_body(cart, "pendulum", "revolute", axis=[0, 1, 0], mass=1.0, com=[0, 0, -1.0])
    b.set_gravity([0, 0, -9.8])
    return b.build()


def main() -> None:
    dt, N = 0.01, 1000
    t = np.arange(N + 1) * dt
    theta_d = np.where((t >= 3) & (t <= 7), np.deg2rad(130.0) * (1 - np.cos(np.pi * (t - 3) / 2)) / 2, 0.0)
    x_ref = np.zeros((N + 1, 4))
    x_ref[:, 1] = theta_d
    Q = np.diag([0.01, 100.0, 0.01, 0.01])
    vi = vd.VariationalIntegrator(pendulum_on_cart(), dt=dt)
    kw = dict(U_init=np.zeros((N, 1)), actuated=[0], Q=Q, QN=Q, R=1e-2, x_ref=x_ref)

    t0 = time.perf_counter()
    proj = optim.projection(vi, [0.0, 0.0], x_guess=x_ref, model="quasi", tolerance=1e-6, max_iterations=500, **kw)  # type: ignore[arg-type]
    t_proj = time.perf_counter() - t0
    t0 = time.perf_counter()
    il = optim.ilqr(vi, [0.0, 0.0], max_iterations=500, tolerance=1e-10, **kw)  # type: ignore[arg-type]
    t_il = time.perf_counter() - t0
    for name, res, secs in (("projection (quasi-Newton)", proj, t_proj), ("iLQR", il, t_il)):
        err = np.abs(res.q[:, 1] - theta_d)
        print(f"{name:26s}: {res.status}, {res.iterations} iterations, {secs:.2f} s, cost {res.cost:.4f} (from {res.cost_history[0]:.1f}), "
              f"max θ {np.rad2deg(res.q[:, 1].max()):.1f}°, max|θ − θ_d| {np.rad2deg(err.max()):.1f}°, max|u| {np.abs(res.U[:, 0]).max():.0f} N")
    print(f"projection: final |Dh∘δξ| = {abs(proj.log['slope'][-1]):.2e}, Armijo trials per iteration: mean {np.mean(proj.log['trials'][:-1]):.2f}")
    # idempotence of the projection on a curve that is not a trajectory
    x = np.hstack([proj.q, proj.p])
    rng = np.random.default_rng(1)
    xb = x + 0.02 * rng.standard_normal(x.shape)
    xb[0] = x[0]
    ub = proj.u + 5.0 * rng.standard_normal(proj.u.shape)
    x1, u1 = optim.project(vi, xb, ub, proj.K, actuated=[0])
    x2, u2 = optim.project(vi, x1, u1, proj.K, actuated=[0])
    print(f"P(P(ξ̄)) − P(ξ̄): {max(np.abs(x2 - x1).max(), np.abs(u2 - u1).max()):.1e}  (ξ̄ − P(ξ̄): {np.abs(x1 - xb).max():.1e})")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ax[0].plot(t, np.rad2deg(theta_d), "k", lw=2, label="desired θ_d")
    for name, res in (("projection", proj), ("iLQR", il)):
        ax[0].plot(t, np.rad2deg(res.q[:, 1]), label=name)
        ax[1].plot(t[:-1], res.U[:, 0], label=name)
        ax[2].semilogy(np.maximum(res.cost_history - min(proj.cost, il.cost), 1e-12), label=name)
    ax[0].set(title="pendulum angle (deg)", xlabel="t (s)")
    ax[1].set(title="cart force (N)", xlabel="t (s)")
    ax[2].set(title="J − J_best per iteration", xlabel="iteration")
    for a in ax:
        a.legend(fontsize=8)
    fig.suptitle("projection-operator method (Johnson 2012) vs iLQR, pendulum on a cart, thesis settings")
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "optim_projection_pendulum_on_cart.png", dpi=110)
    print(f"saved {OUT / 'optim_projection_pendulum_on_cart.png'}")


if __name__ == "__main__":
    main()
