"""LQR regulation with the variational integrator (Johnson's thesis §4.7 / §5.3: DLQR with
Q = R = I stabilising a perturbed trajectory; error vs time, open vs closed loop).

1. Tracking: the cart-pole swing-up of examples/optim_cartpole_swingup.py, extended by 2 s
   holding the pole upright (u = 0 there is the equilibrium's feed-forward), is the nominal
   trajectory. Time-varying LQR (every step linearised in parallel, Riccati with
   Q = R = I; ``optim.tracking_lqr`` does the same from a Trajectory) gives K_k; from a perturbed initial state (Δx = 5 cm, Δθ = 0.1 rad) the
   closed loop u_k = u_nom,k − K_k (x_k − x_nom,k) is compared with the open-loop controls.
2. Regulation: steady-state DLQR (``dlqr``) at the upright equilibrium from Δθ = 0.3 rad.

Saves examples/out/optim_dlqr_perturbed.png.

    python examples/optim_dlqr_perturbed.py
"""

from __future__ import annotations

import pathlib

import numpy as np

import vidyn as vd
from vidyn import optim

OUT = pathlib.Path(__file__).parent / "out"


def main() -> None:
    dt, T, hold = 0.02, 2.5, 2.0
    N, H = int(round(T / dt)), int(round(hold / dt))
    vi = vd.VariationalIntegrator(vd.models.cartpole(), dt=dt)
    goal = [0.0, np.pi, 0.0, 0.0]
    swing = optim.ilqr(
        vi, [0.0, 0.0], U_init=np.zeros((N, 1)), actuated=[0], Q=dt * np.array([1.0, 1.0, 0.1, 0.1]), R=dt * 1e-2,
        QN=1e3, x_ref=goal, cost_state="velocity", max_iterations=500, tolerance=1e-9,
    )
    U = np.vstack([swing.U, np.zeros((H, 2))])
    nominal = vi.rollout([0.0, 0.0], [0.0, 0.0], U)
    # the open-loop nominal drifts off the unstable equilibrium during the hold: track the
    # swing-up then the exact equilibrium
    x_nom = np.hstack([nominal.q, nominal.p])
    x_nom[N:] = goal
    A, B = vi.linearize(x_nom[:, :2], x_nom[:, 2:], U)  # every step in parallel
    gains = optim.lqr(A, B[:, :, :1], np.eye(4), np.eye(1), np.eye(4))
    dq = np.array([0.05, 0.1])
    cl = optim.closed_loop_rollout(vi, dq, p0=[0.0, 0.0], x_ref=x_nom, K=gains.K, u_ref=U[:, :1], actuated=[0])
    ol = vi.rollout(dq, p0=[0.0, 0.0], u=U)
    err_cl = np.linalg.norm(np.hstack([cl.q, cl.p]) - x_nom, axis=1)
    err_ol = np.linalg.norm(np.hstack([ol.q, ol.p]) - x_nom, axis=1)
    print(f"tracking (TV-LQR, Q = R = I): state error at the end open loop {err_ol[-1]:.3g}, closed loop {err_cl[-1]:.2e}")

    traj = vi.rollout([0.0, np.pi], [0.0, 0.0], np.zeros((1, 2)))
    A, B = vi.linearize(traj)
    sol = optim.dlqr(A[0], B[0][:, :1], np.eye(4), np.eye(1))
    rho = np.abs(np.linalg.eigvals(A[0] - B[0][:, :1] @ sol.K)).max()
    steps = 300
    reg = optim.closed_loop_rollout(vi, [0.0, np.pi - 0.3], p0=[0.0, 0.0], x_ref=goal, K=sol.K, actuated=[0], steps=steps)
    free = vi.rollout([0.0, np.pi - 0.3], p0=[0.0, 0.0], u=np.zeros((steps, 2)))
    e_reg = np.abs(reg.q[:, 1] - np.pi)
    e_free = np.abs(free.q[:, 1] - np.pi)
    print(f"DLQR at the upright equilibrium: {sol.iterations} Riccati iterations, closed-loop spectral radius {rho:.4f}; "
          f"|θ − π| after {steps * dt:.0f} s: closed loop {e_reg[-1]:.1e}, open loop {e_free[-1]:.2f} (max {e_free.max():.2f})")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    t = np.arange(N + H + 1) * dt
    fig, ax = plt.subplots(1, 2, figsize=(13, 4.5))
    ax[0].semilogy(t, err_ol, label="open loop")
    ax[0].semilogy(t, err_cl, label="closed loop (TV-LQR)")
    ax[0].axvline(T, color="k", lw=0.5)
    ax[0].set(title="swing-up + hold from a perturbed start: ‖x − x_nom‖", xlabel="t (s)")
    ax[0].legend()
    ts = np.arange(steps + 1) * dt
    ax[1].semilogy(ts, e_free + 1e-16, label="open loop (u = 0)")
    ax[1].semilogy(ts, e_reg + 1e-16, label="closed loop (DLQR)")
    ax[1].set(title="upright equilibrium, Δθ₀ = 0.3 rad: |θ − π|", xlabel="t (s)")
    ax[1].legend()
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "optim_dlqr_perturbed.png", dpi=110)
    print(f"saved {OUT / 'optim_dlqr_perturbed.png'}")


if __name__ == "__main__":
    main()
