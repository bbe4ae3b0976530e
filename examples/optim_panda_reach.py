"""Franka Panda (example-robot-data; 7 arm joints + 2 finger joints, all actuated) reaching a
Cartesian target with its end-effector frame ``panda_hand_tcp``: iLQR, or multiple shooting
(FDDP) from a state-interpolated guess, on the exact linearisation of vidyn's trapezoidal
variational integrator.

Cost (crocoddyl's convention: running terms weighted by dt, terminal ones not), on the
velocity state y = (q, v), v = M(q)⁻¹ p:

    J = Σ_k dt·[½ w_p |p_tcp(q_k) − p*|² + ½ |y_k − y₀|²_W + ½ w_u |u_k|²]
        + ½ w_pN |p_tcp(q_N) − p*|² + ½ |y_N − y₀|²_WN

Initial guess (``--solver ilqr``, default): the gravity-compensating torques of the start pose
(the arm at rest), a feasible trajectory. ``--solver fddp`` (:func:`vidyn.optim.fddp`,
crocoddyl's ``SolverFDDP``) starts instead from a state guess that is not a motion: the
configurations interpolated linearly (on the configuration space, ``integrate(q₀, s·(q_g ⊖ q₀))``)
from the start to a goal posture ``q_g`` that puts the tool centre point on the target (damped
least-squares inverse kinematics from the start, :func:`goal_posture`), at rest at every knot,
with the torques that compensate gravity at each guessed posture; ``bench_fddp_crocoddyl.py``
gives crocoddyl's FDDP the same guess. The frame
term is vidyn's Rust ``FramePositionCost`` (exact gradient Jᵀ(p − p*), Gauss–Newton
Hessian JᵀJ from the frame Jacobian). Runs with gravity (the real problem) and without it
(the problem ``bench_panda_crocoddyl.py`` compares with crocoddyl). Saves
examples/out/optim_panda_reach.png (``…_fddp.png`` with ``--solver fddp``); ``--animate`` also saves the gravity run's motion,
examples/out/optim_panda_reach.gif (the tool centre point's path and the target drawn), and
with meshcat an interactive page, examples/out/optim_panda_reach.html.

    python examples/optim_panda_reach.py [--solver ilqr|fddp] [--animate]
"""

from __future__ import annotations

import argparse
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


def cost_keywords(model: vd.Model) -> dict[str, object]:
    """The cost of the module docstring as keywords of :class:`vidyn.optim.Problem` (running
    terms times dt, terminal ones not)."""
    pb = problem(model)
    return dict(
        Q=DT * np.asarray(pb["W"]),
        R=DT * W_U,
        QN=np.asarray(pb["WN"]),
        x_ref=pb["y0"],
        cost_state="velocity",
        frame=FRAME,
        frame_target=pb["target"],
        frame_weight=DT * W_P,
        frame_weight_terminal=W_PN,
    )


def goal_posture(model: vd.Model, tolerance: float = 1e-12, max_iterations: int = 50) -> np.ndarray:
    """A posture with the tool centre point on the target: damped least-squares (Levenberg)
    steps ``δq = Jᵀ (J Jᵀ + λ I)⁻¹ (p* − p(q))`` on the frame's position Jacobian, from the start
    pose (each step the smallest that moves the point to the target to first order, so the
    posture stays near the start; the fingers do not move the point and stay put)."""
    target = np.asarray(problem(model)["target"])
    q = Q0.copy()
    for _ in range(max_iterations):
        err = target - vd.frame_placement(model, q, FRAME)[:3, 3]
        if np.linalg.norm(err) <= tolerance:
            return q
        J = vd.jacobian(model, q, FRAME)[:3]  # linear rows, world axes at the frame origin
        q = model.integrate(q, J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(3), err))
    raise RuntimeError(f"inverse kinematics: {1e3 * np.linalg.norm(err):.3g} mm from the target after {max_iterations} steps")


def interpolated_guess(model: vd.Model) -> tuple[np.ndarray, np.ndarray]:
    """FDDP's warm start: configurations (N+1, nq) from the start pose to :func:`goal_posture`,
    evenly spaced on the configuration space, at rest (``fddp`` sets the momenta to zero), and
    the controls (N, n) that compensate gravity at each guessed posture (zero without gravity).
    No rollout follows it: the arm does not move at rest, and the posture jumps every step."""
    steps = int(round(T / DT))
    towards = model.difference(Q0, goal_posture(model))
    X = np.array([model.integrate(Q0, s * towards) for s in np.linspace(0.0, 1.0, steps + 1)])
    U = np.array([vd.gravity(model, q) for q in X[:-1]])
    return X, U


def solve(
    model: vd.Model, tolerance: float = 1e-9, max_iterations: int = 500, coordinates: str = "momentum", solver: str = "ilqr"
) -> tuple[optim.IlqrResult, float]:
    """The reach solved by iLQR from :func:`initial_controls` (``solver="ilqr"``) or by FDDP from
    :func:`interpolated_guess` (``"fddp"``; ``coordinates`` must then be ``"momentum"``), and the
    solve's wall time (s; the guess is built before the clock starts)."""
    n = model.nv
    vi = vd.VariationalIntegrator(model, dt=DT)
    weights = dict(cost_keywords(model), max_iterations=max_iterations, tolerance=tolerance)
    if solver == "fddp":
        if coordinates != "momentum":
            raise ValueError("FDDP iterates on the VI's state (q, p) only")
        X, U = interpolated_guess(model)  # before the clock starts: the guess is the caller's
    t0 = time.perf_counter()
    if solver == "fddp":
        res = optim.fddp(vi, Q0, X, U, v0=np.zeros(n), **weights)  # type: ignore[arg-type]
    else:
        res = optim.ilqr(vi, Q0, np.zeros(n), initial_controls(model), coordinates=coordinates, **weights)  # type: ignore[arg-type]
    return res, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", choices=["ilqr", "fddp"], default="ilqr", help="iLQR from gravity compensation at rest (default) or FDDP from the interpolated guess")
    parser.add_argument("--animate", action="store_true", help="save the gravity run's motion to examples/out/optim_panda_reach.gif (and .html)")
    args = parser.parse_args()
    label = "FDDP from an interpolated guess" if args.solver == "fddp" else "iLQR"
    rows = {}
    for gravity in (True, False):
        model = panda(gravity)
        pb = problem(model)
        if args.solver == "fddp":
            X, U = interpolated_guess(model)
            vi = vd.VariationalIntegrator(model, dt=DT)
            # the guess's gaps: how far one VI step from each guessed knot lands from the next
            gap = max(np.abs(np.concatenate(vi.step(X[k], np.zeros(model.nv), U[k])) - np.concatenate([X[k + 1], np.zeros(model.nv)])).max() for k in range(len(U)))
            print(f"guess ({'gravity' if gravity else 'no gravity'}): start → goal posture at rest, {'gravity-compensating torques' if gravity else 'zero torques'}; its largest gap {gap:.3f}")
        res, wall = solve(model, solver=args.solver)
        tcp = np.array([vd.frame_placement(model, q, FRAME)[:3, 3] for q in res.q])
        err = np.linalg.norm(tcp[-1] - pb["target"])  # type: ignore[operator]
        again = vd.VariationalIntegrator(model, dt=DT).rollout(Q0, np.zeros(model.nv), res.U)
        defect = np.abs(again.q - res.q).max()
        vi = vd.VariationalIntegrator(model, dt=DT)
        gaps = max(np.abs(np.concatenate(vi.step(res.q[k], res.p[k], res.U[k])) - np.concatenate([res.q[k + 1], res.p[k + 1]])).max() for k in range(len(res.U)))
        name = "gravity" if gravity else "no gravity"
        print(
            f"{name:10s}: {res.status} in {res.iterations} iterations, {wall:.2f} s "
            f"(after the rollouts {res.timing['linearize']:.2f}, other backward {res.timing['backward']:.2f}, forward {res.timing['forward']:.2f}); "
            f"cost {res.cost:.6f}, final |p_tcp − p*| = {1e3 * err:.2f} mm, max|u| {np.abs(res.U).max():.1f} N·m, "
            f"largest gap {gaps:.1e}, re-simulation defect {defect:.1e}"
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
        # |J − J*|: an infeasible iterate's cost can be below the optimum
        ax[2].semilogy(np.maximum(np.abs(res.cost_history - res.cost), 1e-16), label=name)
        if name == "gravity":
            ax[1].plot(t[:-1], res.U[:, :7])
    ax[0].set(title="distance of panda_hand_tcp to the target (mm)", xlabel="t (s)")
    ax[1].set(title="joint torques, arm joints (gravity run)", xlabel="t (s)")
    ax[2].set(title="|J − J*| per iteration", xlabel="iteration")
    ax[0].legend()
    ax[2].legend()
    fig.suptitle(f"panda Cartesian reach, {label} on the VI (dt = {DT} s, T = {T} s)")
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    png = OUT / ("optim_panda_reach_fddp.png" if args.solver == "fddp" else "optim_panda_reach.png")
    fig.savefig(png, dpi=110)
    print(f"saved {png}")
    if args.animate:
        res, _, pb = rows["gravity"]
        animate(panda(True), res.q, np.asarray(pb["target"]), label)


def animate(model: vd.Model, q: np.ndarray, target: np.ndarray, solver: str = "iLQR") -> None:
    """The reach as a GIF (and, with meshcat, an interactive page) in examples/out/."""
    from vidyn import viz

    title = f"panda reach by {solver} on the VI (target: star, {FRAME} path: red)"
    gif = viz.animate(model, q, DT, OUT / "optim_panda_reach.gif", collision="panda", trace=[FRAME], points=target, title=title)
    print(f"saved {gif}")
    try:
        viz.meshcat_html(model, q, DT, OUT / "optim_panda_reach.html", collision="panda")
        print(f"saved {OUT / 'optim_panda_reach.html'}")
    except ImportError as e:
        print(f"no interactive page: {e}")


if __name__ == "__main__":
    main()
