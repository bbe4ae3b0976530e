"""Multiple shooting from an infeasible warm start: vidyn FDDP (exact VI derivatives) vs
crocoddyl's ``SolverFDDP``, same problems, same guesses, in one process, interleaved.

Problems (horizon, dt, cost weights as in the examples and the earlier crocoddyl benchmarks):

* ``cartpole``: the swing-up of ``optim_cartpole_swingup.py`` / ``bench_ilqr_crocoddyl.py``,
  with gravity, dt = 0.02 s, T = 2.5 s (N = 125), cost
  ``Σ dt·[½|y − y*|²_W + ½ uᵀ R u] + ½|y_N − y*|²_WN``, y = (q, v), y* = (0, π, 0, 0),
  W = diag(1, 1, .1, .1), WN = 1e3·I. crocoddyl's compiled actuation models cannot leave the
  pole of a fixed-base model unactuated, so the compared problem actuates both joints and
  penalises the pole torque, R = diag(1e-2, 1e2) (as ``bench_ilqr_crocoddyl.py``); vidyn's
  exact cart-only problem (``actuated=[0]``, R = 1e-2, the example's) is reported beside it.
  Guess (``optim_cartpole_swingup.interpolated_guess``): the cart at rest at x = 0 while the
  pole turns linearly from θ = 0 to π, zero velocity at every knot, zero forces.
* ``panda``: the reach of ``optim_panda_reach.py`` / ``bench_panda_crocoddyl.py``, with
  gravity, dt = 0.01 s, T = 1 s (N = 100), ``panda_hand_tcp`` to a target 36 cm away.
  Guess (``optim_panda_reach.interpolated_guess``): the configurations interpolated linearly
  from the start pose to an inverse-kinematics goal posture at the target, zero velocity at
  every knot, the torques compensating gravity at each guessed posture.

Both solvers get the same guess: vidyn as configurations with zero momenta (``p = M v = 0``),
crocoddyl as states ``(q, v = 0)``, and the same controls. Neither guess is a motion: the
largest gap of the guess is printed (vidyn's, in (q, p)).

What differs, by construction:

* the dynamics: vidyn steps its trapezoidal variational integrator (state (q, p), the cost
  reads v = M(q)⁻¹ p), crocoddyl integrates its free forward dynamics by semi-implicit Euler
  (``IntegratedActionModelEuler``: state (q, v), running cost × dt, terminal node dt = 0), so
  the optima are close, not equal, and each solver's own final cost is reported;
* the gaps, measured in each solver's own state space (vidyn: one VI step from each knot
  against the next knot, in (q, p); crocoddyl: its action model's ``xnext`` against the next
  knot, ``state.diff``, in (q, v)); both ∞-norms, including the start ``x_0 ⊖ x̄_0``;
* the stopping tests: vidyn stops when the trajectory is feasible (gaps ≤ 1e-9) and a full
  step's predicted decrease is ≤ tol·max(1, J); crocoddyl when it was feasible and its
  stopping criterion is ≤ ``th_stop = tol``. Both accept steps by the same rule (a tenth of the
  predicted decrease; while infeasible a rise of up to twice the predicted change, crocoddyl's
  ``th_acceptStep``, ``th_acceptNegStep``), both use Gauss–Newton cost Hessians;
* the line search and regularisation: vidyn tries step lengths 1, ½, …, 2⁻¹¹ and
  regularises ``Q_uu`` by Tassa's schedule (μ from 0, factor 1.6, μ_min = 1e-6); crocoddyl
  tries 1, ½, …, 2⁻⁹ and starts its regularisation at 1e-9, ×10 after a step shorter than
  0.01 (``th_stepInc``; a failed line search ends at 2⁻⁹), ÷10 after one longer than 0.5.
  crocoddyl counts gaps below ``th_gapTol = 1e-16`` as closed, vidyn below 1e-9 (a VI step is
  a Newton solve);
* threads: vidyn linearises on its pool (``vidyn.get_num_threads()``), crocoddyl with
  ``problem.nthreads`` = 1 and 2.

Method: ``--rounds`` rounds; in each, every solver in turn runs ``--warm`` untimed solves and
then one timed solve (``time.perf_counter`` around the solve call only: problems and guesses
are built before). The untimed solve lets the machine settle after the previous solver (after
two-threaded crocoddyl, libgomp's workers spin for a few ms; see BENCHMARKS.md, session 9).
Printed per solver: the accepted steps (vidyn's ``iterations``; for crocoddyl the iterations
whose cost changed, with its ``iter``, the index of its last iteration, beside them), the
accepted step at which the gaps were closed (the first full step), the median and the spread
of the wall times, the initial cost (the guess's: equal in both solvers, both at rest, which
checks that the cost terms agree), the final cost, the largest remaining gap and the task
error; then the ratios crocoddyl / vidyn FDDP per round (median, min–max). vidyn's iLQR from
its usual feasible guess (zero force; gravity compensation at rest) and crocoddyl's FDDP from
that feasible guess are timed alongside for reference.

Run it where crocoddyl and a binary-compatible pinocchio are installed (crocoddyl 3.2.1 with
pin 4.0.0, see ``bench_ilqr_crocoddyl.py``; pip pairs crocoddyl with pin 4.1.0 unless told),
with this tree's vidyn on the path (the venv's Python must be the one ``_core`` was built for;
the venv's example-robot-data 5.0.0 has the same panda URDF, which ``bench_panda_crocoddyl``
checks), from the repository's root::

    python3 -m venv /tmp/crocvenv
    /tmp/crocvenv/bin/pip install crocoddyl==3.2.1 libcrocoddyl==3.2.1 pin==4.0.0 libpinocchio==4.0.0 example-robot-data-loaders numpy
    PYTHONPATH=python:examples /tmp/crocvenv/bin/python examples/bench_fddp_crocoddyl.py [--rounds 10] [--problems cartpole,panda]

Without crocoddyl only vidyn's rows are measured.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vidyn as vd  # noqa: E402
from vidyn import optim  # noqa: E402

import bench_ilqr_crocoddyl as cartpole_bench  # noqa: E402
import bench_panda_crocoddyl as panda_bench  # noqa: E402
import optim_cartpole_swingup as cartpole_example  # noqa: E402
import optim_panda_reach as reach  # noqa: E402

MAX_ITERATIONS = 1000

Run = Callable[[], dict[str, Any]]


# ---------------------------------------------------------------- vidyn


def vidyn_gap(vi: vd.VariationalIntegrator, q0: np.ndarray, p0: np.ndarray, q: np.ndarray, p: np.ndarray, U: np.ndarray) -> float:
    """Largest gap (∞-norm, in (q, p)) of a vidyn trajectory: the start against (q0, p0), then
    one VI step from each knot under its controls against the next knot."""
    gap = max(float(np.abs(q[0] - q0).max()), float(np.abs(p[0] - p0).max()))
    for k in range(len(U)):
        qn, pn = vi.step(q[k], p[k], U[k])
        gap = max(gap, float(np.abs(qn - q[k + 1]).max()), float(np.abs(pn - p[k + 1]).max()))
    return gap


def first_full_step(alphas: np.ndarray) -> int | None:
    """1-based iteration of the first full step (α = 1), the one that closes every gap."""
    full = np.flatnonzero(np.asarray(alphas) == 1.0)
    return int(full[0]) + 1 if len(full) else None


def vidyn_runner(problem: optim.Problem, guess: np.ndarray | None, tol: float, task_error: Callable[[np.ndarray], float]) -> Run:
    """A timed solve of ``problem``: FDDP from the state guess, or iLQR (``guess`` None) from
    the problem's controls."""
    vi = problem.vi

    def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        if guess is None:
            res = optim.ilqr(problem, max_iterations=MAX_ITERATIONS, tolerance=tol)
        else:
            res = optim.fddp(problem, X_init=guess, max_iterations=MAX_ITERATIONS, tolerance=tol)
        wall = time.perf_counter() - t0
        return dict(
            wall=wall,
            iterations=res.iterations,
            accepted=res.iterations,  # vidyn counts the accepted steps only
            converged=res.converged,
            initial=res.cost_history[0],
            cost=res.cost,
            closed=first_full_step(res.log["alpha"]) if guess is not None else 0,
            gap=vidyn_gap(vi, problem.q0, problem.p0, res.q, res.p, res.U),
            error=task_error(res.q[-1]),
        )

    return run


# ---------------------------------------------------------------- crocoddyl


def crocoddyl_gap(problem: Any, xs: list[np.ndarray], us: list[np.ndarray]) -> float:
    """Largest gap (∞-norm, in crocoddyl's tangent (q, v) space) of a crocoddyl trajectory:
    ``x̄_0 ⊖ x_0``, then each running model's ``xnext`` from (x̄_k, u_k) against x̄_{k+1}."""
    state = problem.runningModels[0].state
    gap = float(np.abs(state.diff(problem.x0, xs[0])).max())
    for k, (model, data) in enumerate(zip(problem.runningModels, problem.runningDatas)):
        model.calc(data, xs[k], us[k])
        gap = max(gap, float(np.abs(state.diff(xs[k + 1], data.xnext)).max()))
    return gap


def crocoddyl_runner(build: Callable[[], Any], xs0: list[np.ndarray], us0: list[np.ndarray], tol: float, nthreads: int, feasible: bool, task_error: Callable[[np.ndarray], float]) -> Run:
    """A timed ``SolverFDDP.solve`` from (xs0, us0); the problem is built before the clock
    starts. ``feasible``: xs0 is the rollout of us0 (crocoddyl's ``is_feasible``)."""
    import crocoddyl

    def run() -> dict[str, Any]:
        problem = build()
        problem.nthreads = nthreads
        solver = crocoddyl.SolverFDDP(problem)
        solver.th_stop = tol
        steps: list[float] = []
        costs: list[float] = []

        class Log(crocoddyl.CallbackAbstract):  # type: ignore[misc]
            """Records each iteration's step length and cost (a few µs per iteration)."""

            def __call__(self, s):  # type: ignore[no-untyped-def]
                steps.append(s.stepLength)
                costs.append(s.cost)

        solver.setCallbacks([Log()])
        xs = [x.copy() for x in xs0]
        us = [u.copy() for u in us0]
        initial = problem.calc(xs, us)  # the guess's cost, to tell accepted iterations (outside the clock)
        t0 = time.perf_counter()
        converged = solver.solve(xs, us, MAX_ITERATIONS, feasible)
        wall = time.perf_counter() - t0
        xs_out, us_out = [np.asarray(x) for x in solver.xs], [np.asarray(u) for u in solver.us]
        # vidyn counts accepted steps; crocoddyl's ``iter`` is the index of its last iteration
        # (the callback runs once per iteration, ``iter + 1`` times), including those whose
        # line search failed, which leave the cost as it was
        taken = [c != b for b, c in zip([initial] + costs[:-1], costs)]
        alphas = np.array([a for a, t in zip(steps, taken) if t])
        return dict(
            wall=wall,
            iterations=solver.iter,
            accepted=int(sum(taken)),
            converged=bool(converged),
            initial=initial,
            cost=solver.cost,
            closed=first_full_step(alphas) if not feasible else 0,
            gap=crocoddyl_gap(problem, xs_out, us_out),
            error=task_error(xs_out[-1]),
        )

    return run


# ---------------------------------------------------------------- problems


def cartpole_runs(tol: float, with_crocoddyl: bool) -> tuple[str, dict[str, Run], str]:
    dt, steps = 0.02, 125
    C = cartpole_bench
    vi = vd.VariationalIntegrator(C.cartpole(True), dt=dt)
    guess = cartpole_example.interpolated_guess(steps)  # (N+1, 2): x = 0, θ linear 0 → π
    cost = dict(Q=dt * C.W, QN=C.WN, x_ref=C.GOAL, cost_state="velocity")

    def error(x: np.ndarray) -> float:
        """Distance of the final configuration to the goal (cart at 0, pole upright)."""
        return float(np.abs(np.asarray(x)[:2] - C.GOAL[:2]).max())

    penalised = optim.Problem(vi, [0.0, 0.0], U_init=np.zeros((steps, 2)), R=dt * np.array([C.R_CART, C.R_POLE]), **cost)  # type: ignore[arg-type]
    exact = optim.Problem(vi, [0.0, 0.0], U_init=np.zeros((steps, 1)), actuated=[0], R=dt * C.R_CART, **cost)  # type: ignore[arg-type]
    runs = {
        "vidyn FDDP": vidyn_runner(penalised, guess, tol, error),
        "vidyn FDDP, cart only (exact)": vidyn_runner(exact, guess, tol, error),
        "vidyn iLQR, feasible guess": vidyn_runner(penalised, None, tol, error),
    }
    if with_crocoddyl:
        xs = [np.concatenate([q, np.zeros(2)]) for q in guess]
        us = [np.zeros(2) for _ in range(steps)]
        build = lambda: C.crocoddyl_problem(dt, steps, True)  # noqa: E731
        runs["crocoddyl FDDP, 1 thread"] = crocoddyl_runner(build, xs, us, tol, 1, False, error)
        runs["crocoddyl FDDP, 2 threads"] = crocoddyl_runner(build, xs, us, tol, 2, False, error)
        rest = [np.zeros(4) for _ in range(steps + 1)]  # the rollout of zero force from rest
        runs["crocoddyl FDDP 1 thread, feasible guess"] = crocoddyl_runner(build, rest, us, tol, 1, True, error)
    gap = vidyn_gap(vi, np.zeros(2), np.zeros(2), guess, np.zeros_like(guess), np.zeros((steps, 2)))
    return "cart-pole swing-up, gravity, penalised pole torque (dt 0.02, N 125)", runs, f"guess's largest gap {gap:.3g}; error: max |q_N − (0, π)|"


def panda_runs(tol: float, with_crocoddyl: bool) -> tuple[str, dict[str, Run], str]:
    with warnings.catch_warnings():  # the URDF's finger mimic joint, read as independent
        warnings.simplefilter("ignore")
        model = reach.panda(True)
    steps, n = int(round(reach.T / reach.DT)), model.nv
    vi = vd.VariationalIntegrator(model, dt=reach.DT)
    X, U = reach.interpolated_guess(model)
    target = np.asarray(reach.problem(model)["target"])
    cost = reach.cost_keywords(model)

    def error(x: np.ndarray) -> float:
        """Distance of the tool centre point to the target at the end (m), vidyn's kinematics."""
        return float(np.linalg.norm(vd.frame_placement(model, np.asarray(x)[: model.nq], reach.FRAME)[:3, 3] - target))

    from_guess = optim.Problem(vi, reach.Q0, np.zeros(n), U, **cost)  # type: ignore[arg-type]
    feasible = optim.Problem(vi, reach.Q0, np.zeros(n), reach.initial_controls(model), **cost)  # type: ignore[arg-type]
    runs = {
        "vidyn FDDP": vidyn_runner(from_guess, X, tol, error),
        "vidyn iLQR, feasible guess": vidyn_runner(feasible, None, tol, error),
    }
    if with_crocoddyl:
        xs = [np.concatenate([q, np.zeros(n)]) for q in X]
        us = [u.copy() for u in U]
        build = lambda: panda_bench.crocoddyl_problem(True)[0]  # noqa: E731
        runs["crocoddyl FDDP, 1 thread"] = crocoddyl_runner(build, xs, us, tol, 1, False, error)
        runs["crocoddyl FDDP, 2 threads"] = crocoddyl_runner(build, xs, us, tol, 2, False, error)
        rest = [np.concatenate([reach.Q0, np.zeros(n)]) for _ in range(steps + 1)]  # gravity compensation holds the arm
        runs["crocoddyl FDDP 1 thread, feasible guess"] = crocoddyl_runner(build, rest, list(reach.initial_controls(model)), tol, 1, True, error)
    gap = vidyn_gap(vi, reach.Q0, np.zeros(n), X, np.zeros_like(X), U)
    return "panda reach, gravity (dt 0.01, N 100)", runs, f"guess's largest gap {gap:.3g}; error: final |p_tcp − p*|"


# ---------------------------------------------------------------- main


def crocoddyl_available() -> bool:
    """crocoddyl importable and reading pinocchio models correctly (its dynamics equal to
    pinocchio's ``aba`` with gravity; a pin version it was not built for loses gravity)."""
    try:
        diff = panda_bench.check_crocoddyl_gravity()
    except ImportError as e:
        print(f"crocoddyl not installed ({e}): vidyn only")
        return False
    print(f"crocoddyl forward dynamics vs pinocchio aba (with gravity): max difference {diff:.3g}")
    if diff > 1e-9:
        print("crocoddyl misreads the model (pinocchio version?): vidyn only")
        return False
    return True


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def spread(values: list[float]) -> str:
    return f"{min(values):.3g}–{max(values):.3g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--warm", type=int, default=1, help="untimed solves before each timed one")
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--problems", default="cartpole,panda")
    args = ap.parse_args()
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(vd._core.__file__)))
    print(f"{cpu_model()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; vidyn {vd.get_num_threads()} threads, _core built {built}; "
          f"{args.rounds} rounds, {args.warm} untimed solve(s) before each timed one, tol {args.tol:g}")
    with_crocoddyl = crocoddyl_available()
    builders = {"cartpole": cartpole_runs, "panda": panda_runs}
    for key in args.problems.split(","):
        title, runs, note = builders[key](args.tol, with_crocoddyl)
        print(f"\n## {title}: {note}")
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, run in runs.items():
                for _ in range(args.warm):
                    run()
                results[name].append(run())
        print("| solver | accepted steps | gaps closed at | wall, median (min–max) | initial cost | final cost | largest gap | error | converged |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for name, rs in results.items():
            its = sorted({f"{r['accepted']}" + (f" (iter {r['iterations']})" if name.startswith("crocoddyl") else "") for r in rs})
            walls = [1e3 * r["wall"] for r in rs]
            r = rs[-1]
            closed = "—" if r["closed"] == 0 else str(r["closed"])
            print(f"| {name} | {'/'.join(map(str, its))} | {closed} | {statistics.median(walls):.1f} ms ({spread(walls)}) | {r['initial']:.8f} | {r['cost']:.8f} | "
                  f"{max(x['gap'] for x in rs):.1e} | {r['error']:.2e} | {all(x['converged'] for x in rs)} |")
        if "vidyn FDDP" in results:
            ours = [r["wall"] for r in results["vidyn FDDP"]]
            for name in results:
                if name.startswith("crocoddyl"):
                    theirs = [r["wall"] for r in results[name]]
                    paired = [t / o for t, o in zip(theirs, ours)]
                    print(f"ratio {name} / vidyn FDDP: medians {statistics.median(theirs) / statistics.median(ours):.2f}x, "
                          f"per round median {statistics.median(paired):.2f}x (min–max {spread(paired)})")
            ilqr = [r["wall"] for r in results["vidyn iLQR, feasible guess"]]
            print(f"ratio vidyn FDDP / vidyn iLQR (feasible guess): medians {statistics.median(ours) / statistics.median(ilqr):.2f}x")


if __name__ == "__main__":
    main()
