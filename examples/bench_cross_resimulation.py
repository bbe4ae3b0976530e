"""Each library's gait optimum re-simulated by the other library's integrator at a fine step
(issue 24's benchmark: "dynamic feasibility of each result when re-simulated by the other's
integrator at a fine step, and contact-force profiles side by side").

Two optima of the same ANYmal gait at 10 ms knots:

* vidyn's (``anymal_walk.solve``): FDDP on the variational integrator, bilateral point contacts
  held at footholds, touchdowns as plastic impacts, midpoint rule;
* crocoddyl's (its ``SimpleQuadrupedalGaitProblem``, as ``bench_walk_crocoddyl.py``): FDDP on
  contact forward dynamics (Baumgarte gains (0, 50)) integrated by explicit Euler, an impulse
  model at each touchdown, friction-cone costs.

Each optimum's torques are held over its 10 ms knots and integrated from its start state with
``--substeps`` steps a knot (default 10: 1 ms) by

* vidyn's VI: the optimum's contact phases, each stance held at the point where that optimum
  put the foot when the stance began (a touchdown is the VI's plastic impact);
* crocoddyl's contact dynamics: the same phases, an impulse model for the landing feet at each
  touchdown, Euler at the fine step.

Printed: how far each of the four re-simulations drifts from the optimum it replays (base
position and orientation, joints, feet) at the knots, and the optima's vertical contact forces.
``--plot`` saves both optima's forces foot by foot, ``examples/out/cross_forces_<gait>.png``.

Needs crocoddyl (see ``bench_walk_crocoddyl.py``). Run:
``python examples/bench_cross_resimulation.py [--gait trot|walk|pace|bound|jump] [--substeps 10] [--plot]``.
"""

from __future__ import annotations

import argparse
import warnings
from dataclasses import dataclass

import numpy as np

import anymal_walk
import vidyn

FEET = anymal_walk.FEET


@dataclass
class Optimum:
    """A gait optimum at its knots: configurations (N+1, nq) and velocities (N+1, nv), joint
    torques (N, 12), contact phases ``(steps, feet)``, and each foot's world force per step
    (N, 3; NaN off the ground)."""

    dt: float
    q: np.ndarray
    v: np.ndarray
    u: np.ndarray
    phases: list[tuple[int, frozenset[str]]]
    forces: dict[str, np.ndarray]


def vidyn_optimum(gait: str) -> tuple[vidyn.Model, Optimum]:
    model, g, schedule, vi, res = anymal_walk.solve(gait, verbose=False)
    q, lam = anymal_walk.solution(model, vi, res)
    v = np.array([vi.velocity(x, p) for x, p in zip(q, res.x[:, model.nq :])])
    phases = [(steps, frozenset(name.split("@")[0] for name in names)) for steps, names in g.phases]
    forces = {f: np.full((schedule.steps, 3), np.nan) for f in FEET}
    for name in schedule.rows:
        held = schedule.holds(name)
        forces[name.split("@")[0]][held] = schedule.forces(lam, vi.dt, name)[held]
    print(f"vidyn:     {res.message}; {res.iterations} iterations, cost {res.cost:.5g}")
    return model, Optimum(vi.dt, q, v, np.asarray(res.u), phases, forces)


def crocoddyl_builder():
    """crocoddyl's ANYmal and its quadruped problem builder (Euler, controls held over a knot)."""
    import example_robot_data
    from crocoddyl.utils.quadruped import SimpleQuadrupedalGaitProblem

    anymal = example_robot_data.load("anymal")
    return anymal, SimpleQuadrupedalGaitProblem(anymal.model, *FEET, integrator="euler", control="zero")


def crocoddyl_optimum(gait: str) -> Optimum:
    """crocoddyl's FDDP optimum (100 iterations at most, its warm start), read at the knots: an
    impulse node takes no time, so the knot after it holds the state after the impact."""
    import crocoddyl
    import pinocchio

    import bench_walk_crocoddyl

    anymal, builder = crocoddyl_builder()
    model = anymal.model
    x0 = np.concatenate([model.referenceConfigurations["standing"], np.zeros(model.nv)])
    if gait == "jump":  # its quadrupedal_gaits.py jump, as anymal_walk.JUMP
        height, shift, ground, flying = anymal_walk.JUMP
        problem = builder.createJumpingProblem(x0, height, np.array(shift), 1e-2, ground, flying)
    else:
        name, length, height, knots, support = bench_walk_crocoddyl.GAITS[gait]
        problem = getattr(builder, name)(x0, length, height, 1e-2, knots, support)
    solver = crocoddyl.SolverFDDP(problem)
    solver.solve([x0] * (problem.T + 1), problem.quasiStatic([x0] * problem.T), 100, False)
    print(f"crocoddyl: {solver.iter} iterations, cost {solver.cost:.5g}, feasible {solver.isFeasible}")
    data = model.createData()
    states, torques, sets, forces = [], [], [], {f: [] for f in FEET}
    for i, (m, d) in enumerate(zip(problem.runningModels, problem.runningDatas)):
        if not hasattr(m, "differential"):
            continue  # an impulse: the next knot starts after it
        states.append(solver.xs[i])
        torques.append(np.asarray(solver.us[i]))
        contacts = d.differential.multibody.contacts.contacts.todict()
        sets.append(frozenset(c.removesuffix("_contact") for c in contacts))
        pinocchio.framesForwardKinematics(model, data, solver.xs[i][: model.nq])
        for f in FEET:
            c = contacts.get(f"{f}_contact")
            # the force on the foot in its local frame, turned into the world's axes
            world = data.oMf[model.getFrameId(f)].rotation @ c.f_local.linear if c is not None else np.full(3, np.nan)
            forces[f].append(world)
    states.append(solver.xs[-1])
    phases: list[tuple[int, frozenset[str]]] = []
    for s in sets:
        if phases and phases[-1][1] == s:
            phases[-1] = (phases[-1][0] + 1, s)
        else:
            phases.append((1, s))
    x = np.array(states)
    return Optimum(1e-2, x[:, : model.nq], x[:, model.nq :], np.array(torques), phases, {f: np.array(v) for f, v in forces.items()})


def footholds(model: vidyn.Model, opt: Optimum) -> list[dict[str, np.ndarray]]:
    """Per phase, where each stance foot is held: where the optimum had it when its stance began."""
    out, held, k = [], {}, 0
    for steps, feet in opt.phases:
        held = {f: held[f] if f in held else vidyn.frame_placement(model, opt.q[k], f)[:3, 3] for f in feet}
        out.append(held)
        k += steps
    return out


def resimulate_vidyn(model: vidyn.Model, opt: Optimum, substeps: int) -> np.ndarray:
    """The optimum's torques through vidyn's VI at ``dt / substeps``: states (N+1, nq + nv) at the knots."""
    contacts, phases, names = {}, [], {}
    for (steps, feet), held in zip(opt.phases, footholds(model, opt)):
        for f in feet:
            key = (f, tuple(held[f]))
            if key not in names:
                names[key] = f"{f}@{len(names)}"
                contacts[names[key]] = vidyn.point_contact(f, held[f])
        phases.append((steps * substeps, [names[(f, tuple(held[f]))] for f in sorted(feet)]))
    schedule = vidyn.ContactSchedule.of(contacts, phases)
    vi = vidyn.VariationalIntegrator(model, opt.dt / substeps, scheme="midpoint", constraints=schedule.constraints, schedule=schedule.active)
    u = np.zeros((len(opt.u) * substeps, model.nv))
    u[:, 6:] = np.repeat(opt.u, substeps, axis=0)
    traj = vi.rollout(opt.q[0], p0=vi.momentum(opt.q[0], opt.v[0]), u=u)
    knots = range(0, len(traj.q), substeps)
    return np.array([np.concatenate([traj.q[k], vi.velocity(traj.q[k], traj.p[k])]) for k in knots])


def resimulate_crocoddyl(opt: Optimum, substeps: int) -> np.ndarray:
    """The optimum's torques through crocoddyl's contact dynamics at ``dt / substeps`` (Euler),
    an impulse model for the landing feet at each touchdown: states at the knots."""
    import crocoddyl

    anymal, builder = crocoddyl_builder()
    ids = {f: anymal.model.getFrameId(f) for f in FEET}
    models, controls, knots, previous = [], [], [], frozenset()
    k = 0
    for steps, feet in opt.phases:
        landing = feet - previous
        if previous and landing:
            models.append(builder.createImpulseModel([ids[f] for f in sorted(landing)], None))
            controls.append(np.zeros(0))
        running = builder.createSwingFootModel(opt.dt / substeps, [ids[f] for f in sorted(feet)])
        for _ in range(steps):
            knots.append(len(models))
            for _ in range(substeps):
                models.append(running)
                controls.append(opt.u[k])
            k += 1
        previous = feet
    knots.append(len(models))
    x0 = np.concatenate([opt.q[0], opt.v[0]])
    problem = crocoddyl.ShootingProblem(x0, models, models[-1])
    xs = problem.rollout(controls)
    return np.array([xs[i] for i in knots])


def drift(model: vidyn.Model, opt: Optimum, states: np.ndarray) -> dict[str, float]:
    """Largest distances over the knots between a re-simulation and the optimum it replays."""
    nq = model.nq
    base, turn, joints, feet = [], [], [], []
    for q_opt, x in zip(opt.q, states):
        q = x[:nq]
        base.append(np.linalg.norm(q[:3] - q_opt[:3]))
        turn.append(np.linalg.norm(model.difference(q_opt, q)[3:6]))
        joints.append(np.abs(q[7:] - q_opt[7:]).max())
        feet.append(max(np.linalg.norm(vidyn.frame_placement(model, q, f)[:3, 3] - vidyn.frame_placement(model, q_opt, f)[:3, 3]) for f in FEET))
    return {"base (m)": max(base), "base turn (rad)": max(turn), "joints (rad)": max(joints), "feet (m)": max(feet), "base at the end (m)": base[-1]}


def plot(optima: dict[str, Optimum], gait: str) -> str:
    import pathlib

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(FEET), 1, sharex=True, figsize=(8, 8))
    for ax, f in zip(axes, FEET):
        for label, opt in optima.items():
            t = (np.arange(len(opt.u)) + 0.5) * opt.dt
            ax.plot(t, opt.forces[f][:, 2], label=label)
        ax.set_ylabel(f"{f} $f_z$ (N)")
        ax.grid(alpha=0.3)
    axes[0].legend()
    axes[-1].set_xlabel("time (s)")
    fig.suptitle(f"ANYmal {gait}: vertical contact forces of the two optima")
    out = pathlib.Path(__file__).parent / "out" / f"cross_forces_{gait}.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    return str(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gait", choices=[*sorted(anymal_walk.GAITS), "jump"], default="trot")
    parser.add_argument("--substeps", type=int, default=10)
    parser.add_argument("--plot", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the URDF's inertia notes
    model, mine = vidyn_optimum(args.gait)
    optima = {"vidyn": mine, "crocoddyl": crocoddyl_optimum(args.gait)}
    for name, opt in optima.items():
        fz = np.concatenate([opt.forces[f][:, 2] for f in FEET])
        print(f"{name} optimum: {len(opt.u)} steps, phases {[(s, ''.join(sorted(x[0] + x[1] for x in f))) for s, f in opt.phases]}, vertical forces {np.nanmin(fz):.1f} to {np.nanmax(fz):.1f} N")
    for name, opt in optima.items():
        for integrator, run in (("vidyn VI", lambda o: resimulate_vidyn(model, o, args.substeps)), ("crocoddyl", lambda o: resimulate_crocoddyl(o, args.substeps))):
            try:
                d = drift(model, opt, run(opt))
                print(f"{name} optimum through {integrator} at dt/{args.substeps}: " + ", ".join(f"{k} {v:.3g}" for k, v in d.items()))
            except vidyn.ConvergenceError as e:
                print(f"{name} optimum through {integrator} at dt/{args.substeps}: failed: {e}")
    if args.plot:
        print(f"saved {plot(optima, args.gait)}")


if __name__ == "__main__":
    main()
