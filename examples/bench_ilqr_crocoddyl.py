"""Cart-pole swing-up: vidyn iLQR (exact VI linearisation) vs crocoddyl FDDP, same run.

Same model (vidyn's cartpole rebuilt in Pinocchio; mass matrices agree to 1e-17), horizon,
time step and cost, without gravity (turn the pole from θ = 0 to π by moving the cart) and with
it. Install crocoddyl with a binary-compatible pinocchio:
``pip install --no-deps crocoddyl==3.2.1 libcrocoddyl==3.2.1 pin==4.0.0 libpinocchio==4.0.0``.
With pin 4.1.0 (pip's default choice) crocoddyl 3.2.1 misreads the model: its forward dynamics
lose the gravity term whatever the model's gravity (this is what the first version of this
benchmark measured and attributed to crocoddyl), and frame residuals fail. Cost:

    J = Σ_k dt·[½ (y_k − y*)ᵀ W (y_k − y*) + ½ u_kᵀ R u_k] + ½ (y_N − y*)ᵀ W_N (y_N − y*),

y = (q, v), y* = (0, π, 0, 0) (pole upright). crocoddyl integrates the running cost the same
way (``IntegratedActionModelEuler``: cost·dt, terminal node with dt = 0). The dynamics differ
by construction: vidyn uses its trapezoidal variational integrator (state (q, p), cost on
v = M⁻¹p), crocoddyl its semi-implicit Euler step — the optima are close but not equal, so
both final costs are reported.

Actuation: the pole is unactuated in the real system. crocoddyl's compiled actuation models
cannot express "cart only" for a fixed-base model, so the benchmark gives both solvers the
same fully-actuated model with a heavy penalty on the pole torque (``R = diag(r, r_pole)``).
vidyn's exact underactuated solve (``actuated=[0]``) is reported as well, and vidyn's iLQR both
on the VI's state ``(q, p)`` (default) and on ``(q, v)`` (``coordinates="velocity"``).

Convergence: each solver runs to its own stopping test (vidyn: expected decrease of a full
step ≤ 1e-9·max(1, J); crocoddyl: ``th_stop = 1e-9``) with up to 1000 iterations; the
"time to tolerance" columns read each solver's cost history (per-iteration time stamps) and
report the first iteration whose cost is within 1e-6 (relative) of that solver's final cost.
Timings are the median of ``--repeat`` runs in one process; vidyn linearises on rayon's
global pool (all cores), crocoddyl is run with ``problem.nthreads`` = 1 and 2.

    python examples/bench_ilqr_crocoddyl.py [--repeat 5] [--dt 0.02] [--T 2.5]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

import vidyn as vd
from vidyn import optim

W = np.array([1.0, 1.0, 0.1, 0.1])
WN = np.full(4, 1e3)
R_CART, R_POLE = 1e-2, 1e2
GOAL = np.array([0.0, np.pi, 0.0, 0.0])


def cartpole(gravity: bool) -> vd.Model:
    """vidyn's cart-pole, optionally without gravity (rebuilt with the same inertias)."""
    if gravity:
        return vd.models.cartpole()
    b = vd.ModelBuilder("cartpole_no_gravity")
    cart = b.add_body(None, "cart", "prismatic", axis=[1, 0, 0], mass=1.0)
    b.add_body(cart, "pole", "revolute", axis=[0, 1, 0], mass=0.1, com=[0, 0, -0.5], inertia=np.diag([0.1 / 12, 0.1 / 12, 0.0]))
    b.set_gravity([0.0, 0.0, 0.0])
    return b.build()


def vidyn_solve(dt: float, steps: int, underactuated: bool, tol: float, gravity: bool = False, coordinates: str = "momentum") -> dict[str, object]:
    vi = vd.VariationalIntegrator(cartpole(gravity), dt=dt)
    if underactuated:
        kw = dict(actuated=[0], R=dt * R_CART, U_init=np.zeros((steps, 1)))
    else:
        kw = dict(R=dt * np.array([R_CART, R_POLE]), U_init=np.zeros((steps, 2)))
    t0 = time.perf_counter()
    res = optim.ilqr(
        vi, [0.0, 0.0], Q=dt * W, QN=WN, x_ref=GOAL, cost_state="velocity", max_iterations=1000, tolerance=tol, coordinates=coordinates, **kw  # type: ignore[arg-type]
    )
    wall = time.perf_counter() - t0
    # cost after each accepted step and its time stamp
    accepted = res.log["alpha"] > 0
    times = np.concatenate([[0.0], res.log["time"][accepted]])
    return dict(res=res, wall=wall, costs=res.cost_history, times=times, iterations=res.iterations, cost=res.cost)


def crocoddyl_problem(dt: float, steps: int, gravity: bool = False):  # type: ignore[no-untyped-def]
    import crocoddyl
    import pinocchio as pin

    m = pin.Model()
    # explicit: pinocchio's default model gravity is −9.81 z; the comparable problem is chosen
    # by the caller (crocoddyl only honours it with a binary-compatible pin, see the docstring)
    m.gravity = pin.Motion(np.array([0.0, 0.0, -9.81 if gravity else 0.0]), np.zeros(3))
    j1 = m.addJoint(0, pin.JointModelPX(), pin.SE3.Identity(), "cart")
    m.appendBodyToJoint(j1, pin.Inertia(1.0, np.zeros(3), np.zeros((3, 3))), pin.SE3.Identity())
    j2 = m.addJoint(j1, pin.JointModelRY(), pin.SE3.Identity(), "pole")
    m.appendBodyToJoint(j2, pin.Inertia(0.1, np.array([0, 0, -0.5]), np.diag([0.1 / 12, 0.1 / 12, 0])), pin.SE3.Identity())
    state = crocoddyl.StateMultibody(m)
    actuation = crocoddyl.ActuationModelFull(state)
    nu = actuation.nu

    def model(weights: np.ndarray, terminal: bool):  # type: ignore[no-untyped-def]
        costs = crocoddyl.CostModelSum(state, nu)
        xres = crocoddyl.ResidualModelState(state, GOAL, nu)
        costs.addCost("x", crocoddyl.CostModelResidual(state, crocoddyl.ActivationModelWeightedQuad(weights), xres), 1.0)
        if not terminal:
            ures = crocoddyl.ResidualModelControl(state, nu)
            act = crocoddyl.ActivationModelWeightedQuad(np.array([R_CART, R_POLE]))
            costs.addCost("u", crocoddyl.CostModelResidual(state, act, ures), 1.0)
        dam = crocoddyl.DifferentialActionModelFreeFwdDynamics(state, actuation, costs)
        return crocoddyl.IntegratedActionModelEuler(dam, 0.0 if terminal else dt)

    return crocoddyl.ShootingProblem(np.zeros(4), [model(W, False)] * steps, model(WN, True))


def crocoddyl_solve(dt: float, steps: int, tol: float, nthreads: int, gravity: bool = False) -> dict[str, object]:
    import crocoddyl

    problem = crocoddyl_problem(dt, steps, gravity)
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
    xs = [np.zeros(4)] * (steps + 1)
    us = [np.zeros(2)] * steps
    t0 = time.perf_counter()
    solver.solve(xs, us, 1000, False)
    wall = time.perf_counter() - t0
    # the callback's own cost is part of wall; it is a few µs per iteration
    return dict(
        solver=solver,
        wall=wall,
        costs=np.array(costs),
        times=np.array(times) - t0,
        iterations=solver.iter,
        cost=solver.cost,
        converged=solver.stop < tol,
    )


def time_to(costs: np.ndarray, times: np.ndarray, rel: float) -> tuple[int, float]:
    final = costs[-1]
    for i, c in enumerate(costs):
        if abs(c - final) <= rel * abs(final):
            return i, float(times[i])
    return len(costs) - 1, float(times[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dt", type=float, default=0.02)
    ap.add_argument("--T", type=float, default=2.5)
    ap.add_argument("--tol", type=float, default=1e-9)
    args = ap.parse_args()
    steps = int(round(args.T / args.dt))
    print(f"cart-pole swing-up, dt = {args.dt}, T = {args.T} s, N = {steps}; {platform.processor() or platform.machine()}, {vd.get_num_threads()} threads")
    rows = []
    for name, fn in [
        ("vidyn iLQR (penalised pole torque)", lambda: vidyn_solve(args.dt, steps, False, args.tol)),
        ("vidyn iLQR (cart only, exact)", lambda: vidyn_solve(args.dt, steps, True, args.tol)),
        ("vidyn iLQR, gravity (penalised)", lambda: vidyn_solve(args.dt, steps, False, args.tol, True)),
        ("vidyn iLQR, gravity (cart only, exact)", lambda: vidyn_solve(args.dt, steps, True, args.tol, True)),
        ("vidyn iLQR on (q, v) (penalised)", lambda: vidyn_solve(args.dt, steps, False, args.tol, False, "velocity")),
        ("vidyn iLQR on (q, v), gravity (penalised)", lambda: vidyn_solve(args.dt, steps, False, args.tol, True, "velocity")),
        ("crocoddyl FDDP (penalised, 1 thread)", lambda: crocoddyl_solve(args.dt, steps, args.tol, 1)),
        ("crocoddyl FDDP (penalised, 2 threads)", lambda: crocoddyl_solve(args.dt, steps, args.tol, 2)),
        ("crocoddyl FDDP, gravity (penalised, 1 thread)", lambda: crocoddyl_solve(args.dt, steps, args.tol, 1, True)),
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
        if "res" in r:
            tm = r["res"].timing  # type: ignore[attr-defined]
            print(f"{'':42s} (vidyn split: after the rollout (cost, derivatives left, next backward pass) {1e3 * tm['linearize']:.1f} ms, other backward {1e3 * tm['backward']:.1f} ms, forward passes {1e3 * tm['forward']:.1f} ms)")
        print(f"{name:42s} iterations {r['iterations']:4d}  wall {1e3 * statistics.median(walls):8.2f} ms  final cost {r['cost']:.8f}  within 1e-6: iteration {it6}, {1e3 * t6:.2f} ms")
    if len(rows) == 9:
        for v in (rows[0], rows[4]):
            for c in rows[6:8]:
                print(f"ratio {c[0]} / {v[0]}: wall to convergence {c[2] / v[2]:.2f}x, time to 1e-6 of the optimum {c[5] / v[5]:.2f}x")
        for v in (rows[2], rows[5]):
            c = rows[8]
            print(f"ratio {c[0]} / {v[0]}: wall to convergence {c[2] / v[2]:.2f}x, time to 1e-6 of the optimum {c[5] / v[5]:.2f}x")


if __name__ == "__main__":
    main()
