"""Panda Cartesian reach: vidyn iLQR (exact VI linearisation + Rust frame-position cost) vs
crocoddyl FDDP, same run, same problem.

Problem (``optim_panda_reach.py`` defines it): Franka Panda from example-robot-data (9 joints:
7 arm + 2 fingers, all actuated), start at the "ready" pose at rest, dt = 0.01 s, T = 1 s
(N = 100), end-effector frame ``panda_hand_tcp`` to a target 36 cm away, cost

    J = Σ_k dt·[½ w_p |p_tcp(q_k) − p*|² + ½ |y_k − y₀|²_W + ½ w_u |u_k|²]
        + ½ w_pN |p_tcp(q_N) − p*|² + ½ |y_N − y₀|²_WN,      y = (q, v),

built in crocoddyl from ``ResidualModelFrameTranslation`` (quadratic activation),
``ResidualModelState`` and ``ResidualModelControl`` (weighted quadratic activations) in an
``IntegratedActionModelEuler`` (running cost × dt, terminal node dt = 0). Both solvers use the
Gauss–Newton Hessian of the frame term.

**Gravity and the pinocchio version.** The crocoddyl 3.2.1 wheels are binary-compatible with
pin 4.0.0, not with pin 4.1.0 (which pip picks by default): with 4.1.0, crocoddyl reads the
model wrongly (its forward dynamics lose the gravity term, and frame residuals fail with "The
index of the Joint is outside the bounds" or crash). The script checks crocoddyl's dynamics
against pinocchio's ``aba`` at a random state and, with ``--gravity auto`` (default), solves the
gravity-loaded problem when they agree and the gravity-free one (both solvers) when they do not.
The discretisations differ (vidyn: trapezoidal VI on (q, p); crocoddyl: semi-implicit
Euler), so the two optima are close, not equal: each solver's final cost is reported, and the
"time to 1e-6" column reads each solver's cost history against its own optimum.

Both solvers start from the same feasible guess, the gravity-compensating torques of the start
pose (the arm at rest), and run to their own stopping test (vidyn: expected decrease of a full
step ≤ tol·max(1, J); crocoddyl: ``th_stop = tol``), up to 1000 iterations. Timings are the
median of ``--repeat`` runs in one process.

    python examples/bench_panda_crocoddyl.py [--repeat 5] [--tol 1e-9]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

import vidyn as vd
from vidyn import models

import optim_panda_reach as reach


def vidyn_run(tol: float, gravity: bool, coordinates: str = "momentum") -> dict[str, object]:
    res, wall = reach.solve(reach.panda(gravity), tolerance=tol, max_iterations=1000, coordinates=coordinates)
    accepted = res.log["alpha"] > 0
    times = np.concatenate([[0.0], res.log["time"][accepted]])
    return dict(res=res, wall=wall, costs=res.cost_history, times=times, iterations=res.iterations, cost=res.cost)


def crocoddyl_problem(gravity: bool):  # type: ignore[no-untyped-def]
    import crocoddyl
    import pinocchio as pin

    path = models.example_robot_data_dir() / models.EXAMPLE_ROBOTS["panda"].urdf  # type: ignore[operator]
    m = pin.buildModelFromUrdf(str(path))
    if not gravity:
        m.gravity = pin.Motion.Zero()
    vm = reach.panda(gravity)
    pb = reach.problem(vm)
    n = m.nv
    state = crocoddyl.StateMultibody(m)
    actuation = crocoddyl.ActuationModelFull(state)
    nu = actuation.nu
    frame = m.getFrameId(reach.FRAME)
    # same target and kinematics as vidyn
    d = m.createData()
    pin.framesForwardKinematics(m, d, reach.Q0)
    assert np.abs(d.oMf[frame].translation - vd.frame_placement(vm, reach.Q0, reach.FRAME)[:3, 3]).max() < 1e-12
    y0 = np.asarray(pb["y0"])

    def action(terminal: bool):  # type: ignore[no-untyped-def]
        costs = crocoddyl.CostModelSum(state, nu)
        goal = crocoddyl.ResidualModelFrameTranslation(state, frame, np.asarray(pb["target"]), nu)
        costs.addCost("goal", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelQuad(3), goal), reach.W_PN if terminal else reach.W_P)
        xw = np.asarray(pb["WN"] if terminal else pb["W"])
        xres = crocoddyl.ResidualModelState(state, y0, nu)
        costs.addCost("xreg", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(xw), xres), 1.0)
        if not terminal:
            ures = crocoddyl.ResidualModelControl(state, nu)
            costs.addCost("ureg", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelQuad(n), ures), reach.W_U)
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else reach.DT)

    steps = int(pb["steps"])  # type: ignore[call-overload]
    return crocoddyl.ShootingProblem(y0, [action(False)] * steps, action(True)), steps, m


def check_crocoddyl_gravity() -> float:
    """max |a_crocoddyl − aba(with gravity)| on the panda *with* gravity (0 would mean
    crocoddyl includes gravity)."""
    import crocoddyl
    import pinocchio as pin

    path = models.example_robot_data_dir() / models.EXAMPLE_ROBOTS["panda"].urdf  # type: ignore[operator]
    m = pin.buildModelFromUrdf(str(path))
    state = crocoddyl.StateMultibody(m)
    act = crocoddyl.ActuationModelFull(state)
    dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, act, crocoddyl.CostModelSum(state, act.nu))
    data = dam.createData()
    rng = np.random.default_rng(0)
    q, v, u = pin.randomConfiguration(m), rng.standard_normal(m.nv), rng.standard_normal(m.nv)
    dam.calc(data, np.concatenate([q, v]), u)
    return float(np.abs(data.xout - pin.aba(m, m.createData(), q, v, u)).max())


def crocoddyl_run(tol: float, nthreads: int, gravity: bool) -> dict[str, object]:
    import crocoddyl

    problem, steps, m = crocoddyl_problem(gravity)
    problem.nthreads = nthreads
    solver = crocoddyl.SolverFDDP(problem)
    solver.th_stop = tol
    costs: list[float] = []
    times: list[float] = []

    class Log(crocoddyl.CallbackAbstract):  # type: ignore[misc]
        def __call__(self, s):  # type: ignore[no-untyped-def]
            costs.append(s.cost)
            times.append(time.perf_counter())

    solver.setCallbacks([Log()])
    # the same initial guess as vidyn: gravity compensation of the start pose, arm at rest
    # (a feasible trajectory of both discretisations)
    u0 = reach.initial_controls(reach.panda(gravity))
    xs = [problem.x0] * (steps + 1)
    us = [u.copy() for u in u0]
    t0 = time.perf_counter()
    solver.solve(xs, us, 1000, False)
    wall = time.perf_counter() - t0
    # final distance to the target with crocoddyl's own kinematics
    import pinocchio as pin

    d = m.createData()
    pin.framesForwardKinematics(m, d, np.asarray(solver.xs[-1])[: m.nq])
    target = np.asarray(reach.problem(reach.panda(gravity))["target"])
    err = float(np.linalg.norm(d.oMf[m.getFrameId(reach.FRAME)].translation - target))
    return dict(wall=wall, costs=np.array(costs), times=np.array(times) - t0, iterations=solver.iter, cost=solver.cost, err=err)


def time_to(costs: np.ndarray, times: np.ndarray, rel: float) -> tuple[int, float]:
    final = costs[-1]
    for i, c in enumerate(costs):
        if abs(c - final) <= rel * abs(final):
            return i, float(times[i])
    return len(costs) - 1, float(times[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--gravity", choices=["auto", "on", "off"], default="auto")
    args = ap.parse_args()
    print(f"panda reach, dt = {reach.DT}, T = {reach.T} s, N = {int(round(reach.T / reach.DT))}; {platform.processor() or platform.machine()}, {vd.get_num_threads()} threads")
    gravity = args.gravity == "on"
    try:
        diff = check_crocoddyl_gravity()
        print(f"crocoddyl forward dynamics vs pinocchio aba (with gravity): max difference {diff:.3g}")
        if args.gravity == "auto":
            gravity = diff < 1e-9
    except ImportError as e:
        print(f"crocoddyl not installed ({e}): vidyn only")
        gravity = args.gravity != "off"
    print(f"problem: {'with' if gravity else 'WITHOUT'} gravity")
    rows = []
    for name, fn in [
        ("vidyn iLQR", lambda: vidyn_run(args.tol, gravity)),
        ("vidyn iLQR on (q, v)", lambda: vidyn_run(args.tol, gravity, "velocity")),
        ("crocoddyl FDDP, 1 thread", lambda: crocoddyl_run(args.tol, 1, gravity)),
        ("crocoddyl FDDP, 2 threads", lambda: crocoddyl_run(args.tol, 2, gravity)),
    ]:
        try:
            runs = [fn() for _ in range(args.repeat)]
        except ImportError as e:
            print(f"{name}: skipped ({e})")
            continue
        r = runs[0]
        walls = [x["wall"] for x in runs]
        it6, _ = time_to(np.asarray(r["costs"]), np.asarray(r["times"]), 1e-6)
        t6 = statistics.median(time_to(np.asarray(x["costs"]), np.asarray(x["times"]), 1e-6)[1] for x in runs)
        rows.append((name, r["iterations"], statistics.median(walls), r["cost"], it6, t6))
        extra = ""
        if "res" in r:
            res = r["res"]
            tm = res.timing  # type: ignore[attr-defined]
            m = reach.panda(gravity)
            tcp = vd.frame_placement(m, res.q[-1], reach.FRAME)[:3, 3]  # type: ignore[attr-defined]
            err = np.linalg.norm(tcp - np.asarray(reach.problem(m)["target"]))
            extra = f", |p − p*| {1e3 * err:.2f} mm (split: after the rollout (cost, derivatives left, next backward pass) {1e3 * tm['linearize']:.1f} ms, other backward {1e3 * tm['backward']:.1f} ms, forward {1e3 * tm['forward']:.1f} ms)"
        else:
            extra = f", |p − p*| {1e3 * float(r['err']):.2f} mm"  # type: ignore[arg-type]
        print(f"{name:28s} iterations {r['iterations']:4d}  wall {1e3 * statistics.median(walls):8.2f} ms  final cost {r['cost']:.8f}  within 1e-6: iteration {it6}, {1e3 * t6:.2f} ms{extra}")
    for v in rows[:2]:
        for c in rows[2:]:
            print(f"ratio {c[0]} / {v[0]}: wall to convergence {c[2] / v[2]:.2f}x, time to 1e-6 of the own optimum {c[5] / v[5]:.2f}x")


if __name__ == "__main__":
    main()
