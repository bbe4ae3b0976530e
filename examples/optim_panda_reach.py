"""Franka Panda (example-robot-data; 7 arm joints + 2 finger joints, all actuated) reaching a
Cartesian target with its end-effector frame ``panda_hand_tcp``: iLQR on the exact
linearisation of vidyn's trapezoidal variational integrator.

Cost (crocoddyl's convention: running terms weighted by dt, terminal ones not), on the
velocity state y = (q, v), v = M(q)⁻¹ p:

    J = Σ_k dt·[½ w_p |p_tcp(q_k) − p*|² + ½ |y_k − y₀|²_W + ½ w_u |u_k|²]
        + ½ w_pN |p_tcp(q_N) − p*|² + ½ |y_N − y₀|²_WN

Initial guess: the gravity-compensating torques of the start pose (the arm at rest). The frame
term is vidyn's Rust ``FramePositionCost`` (exact gradient Jᵀ(p − p*), Gauss–Newton
Hessian JᵀJ from the frame Jacobian). Runs with gravity (the real problem) and without it
(the problem ``bench_panda_crocoddyl.py`` compares with crocoddyl). Saves
examples/out/optim_panda_reach.png.

    python examples/optim_panda_reach.py
"""

from __future__ import annotations

import pathlib
import time

import numpy as np

import vidyn as vd
from vidyn import models, optim

OUT = pathlib.Path(__file__).parent / "out"
FRAME = "panda_hand_tcp"
DT, T = 0.01, 1.0
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02, 0.02])  # "ready" pose, fingers open
OFFSET = np.array([0.15, 0.25, -0.2])  # target = start + offset
W_P, W_PN = 1.0, 1e3
W_Q, W_V, W_VN = 1e-2, 1e-1, 10.0
W_U = 1e-3


def panda(gravity: bool) -> vd.Model:
    m = models.example_robot("panda")
    return m if gravity else m.with_gravity([0.0, 0.0, 0.0])


def problem(model: vd.Model) -> dict[str, object]:
    """The shared problem data: horizon, weights, references, target."""
    n = model.nv
    steps = int(round(T / DT))
    target = vd.frame_placement(model, Q0, FRAME)[:3, 3] + OFFSET
    W = np.concatenate([np.full(n, W_Q), np.full(n, W_V)])
    WN = np.concatenate([np.full(n, W_Q), np.full(n, W_VN)])
    y0 = np.concatenate([Q0, np.zeros(n)])
    return dict(steps=steps, target=target, W=W, WN=WN, y0=y0)


def initial_controls(model: vd.Model) -> np.ndarray:
    """Gravity compensation of the start pose at every step (the arm then stays at rest; zero
    with gravity off): the initial guess of both solvers in the benchmark."""
    steps = int(round(T / DT))
    return np.tile(vd.gravity(model, Q0), (steps, 1))


def solve(model: vd.Model, tolerance: float = 1e-9, max_iterations: int = 500, coordinates: str = "momentum") -> tuple[optim.IlqrResult, float]:
    pb = problem(model)
    n, steps = model.nv, int(pb["steps"])  # type: ignore[call-overload]
    vi = vd.VariationalIntegrator(model, dt=DT)
    t0 = time.perf_counter()
    res = optim.ilqr(
        vi,
        Q0,
        np.zeros(n),
        initial_controls(model),
        Q=DT * np.asarray(pb["W"]),
        R=DT * W_U,
        QN=np.asarray(pb["WN"]),
        x_ref=pb["y0"],
        cost_state="velocity",
        frame=FRAME,
        frame_target=pb["target"],  # type: ignore[arg-type]
        frame_weight=DT * W_P,
        frame_weight_terminal=W_PN,
        max_iterations=max_iterations,
        tolerance=tolerance,
        coordinates=coordinates,  # type: ignore[arg-type]
    )
    return res, time.perf_counter() - t0


def main() -> None:
    rows = {}
    for gravity in (True, False):
        model = panda(gravity)
        pb = problem(model)
        res, wall = solve(model)
        tcp = np.array([vd.frame_placement(model, q, FRAME)[:3, 3] for q in res.q])
        err = np.linalg.norm(tcp[-1] - pb["target"])  # type: ignore[operator]
        again = vd.VariationalIntegrator(model, dt=DT).rollout(Q0, np.zeros(model.nv), res.U)
        defect = np.abs(again.q - res.q).max()
        name = "gravity" if gravity else "no gravity"
        print(
            f"{name:10s}: {res.status} in {res.iterations} iterations, {wall:.2f} s "
            f"(after the rollouts {res.timing['linearize']:.2f}, other backward {res.timing['backward']:.2f}, forward {res.timing['forward']:.2f}); "
            f"cost {res.cost:.6f}, final |p_tcp − p*| = {1e3 * err:.2f} mm, max|u| {np.abs(res.U).max():.1f} N·m, "
            f"re-simulation defect {defect:.1e}"
        )
        rows[name] = (res, tcp, pb)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, (res, tcp, pb) in rows.items():
        t = np.arange(len(tcp)) * DT
        dist = np.linalg.norm(tcp - pb["target"], axis=1)
        ax[0].plot(t, 1e3 * dist, label=name)
        ax[2].semilogy(np.maximum(res.cost_history - res.cost, 1e-16), label=name)
        if name == "gravity":
            ax[1].plot(t[:-1], res.U[:, :7])
    ax[0].set(title="distance of panda_hand_tcp to the target (mm)", xlabel="t (s)")
    ax[1].set(title="joint torques, arm joints (gravity run)", xlabel="t (s)")
    ax[2].set(title="J − J* per iteration", xlabel="iteration")
    ax[0].legend()
    ax[2].legend()
    fig.suptitle(f"panda Cartesian reach, iLQR on the VI (dt = {DT} s, T = {T} s)")
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "optim_panda_reach.png", dpi=110)
    print(f"saved {OUT / 'optim_panda_reach.png'}")


if __name__ == "__main__":
    main()
