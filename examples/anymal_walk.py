"""ANYmal walks (or trots, paces, bounds, jumps) one gait cycle: multiple shooting (FDDP) on
the exact derivatives of the variational integrator, through its contact phases (issue 24).

The gaits are crocoddyl's (``examples/quadrupedal_gaits.py`` and ``utils/quadruped.py``, time
step 10 ms, 25-knot swings, phases in its order and of its lengths, the first half cycle's
steps half as long): walking, 0.25 m steps with 0.15 m clearance, feet in the order RH, RF,
then 2-knot support, then LH, LF; trotting (diagonal pairs RF+LH, then LF+RH) and pacing
(lateral pairs RF+RH, then LF+LH), 0.15 m steps with 0.1 m clearance, 2-knot supports;
bounding (front pair, hind pair), 0.15 m and 0.1 m, 5-knot supports; every cycle starts and
ends with a support phase. Jumping (``--gait jump``, ``JUMP``): the centre of mass 0.15 m up and
0.3 m sideways, 10 knots on the ground, 20 up, 20 down and 10 on the ground again, from the
standing posture carried along the centre of mass's path (its own state guess; the flight's
feet follow that posture). Here a stance foot is a point contact of the VI held at its foothold
(:class:`vidyn.ContactSchedule`), a touchdown is the plastic impact that puts the foot on its
next foothold, and FDDP (:func:`vidyn.optim.fddp`, crocoddyl's solver) minimises

* the swing feet's distance to their paths (much more at the knot where they land, ``LANDING``)
  and the centre of mass's to a forward ramp (:class:`vidyn.optim.Track`),
* a regularisation of the posture (base orientation, joints) and the momenta about the
  standing posture, and of the torques (``Q``, ``R``).

from crocoddyl's warm start: the standing state at every knot and, in each phase, the torques
that hold that posture on the phase's stance feet. No rollout of those torques survives the
gait (iLQR would need one); multiple shooting starts from the guess as it is and closes its
gaps as it goes.

The contacts of the VI are bilateral: without more, the optimal motion pulls on the ground
(but for the trot: walk −49 N, pace −213 N, bound −161 N). ``--friction`` adds friction-cone
penalties on the contact forces (``friction_cone``), which make them unilateral: walk / trot /
pace / bound / jump in 10 / 10 / 9 / 10 / 15 iterations (the solver decides which cones are
violated at the step it takes), every foot pushing (≥ 7.9 N), |f_t|/f_z ≤ 0.70.

``--limits [FRACTION]`` bounds the joint torques by the URDF's effort limits (80 N m), or by
that fraction of them (a box QP in each backward pass, crocoddyl's BoxFDDP).

``--xreg ρ`` sets the first state regularisation of FDDP's backward pass (``V_xx + ρ 1``,
:func:`vidyn.optim.fddp`'s ``xreg``, 1e-2 by default, dropped after the first full steps): with
``--xreg 0`` the walk converges in 16 iterations instead of 8, to the same optimum.

Run: ``python examples/anymal_walk.py [--gait walk|trot|pace|bound|jump] [--friction] [--limits [FRACTION]] [--xreg ρ] [--plot] [--animate]``
(``--plot`` saves the feet's and the base's paths to ``examples/out/anymal_<gait>.png``;
``--animate`` saves the motion, ``examples/out/anymal_<gait>.gif``, and snapshots of it side by
side, ``examples/out/anymal_<gait>_strip.png``, with ``vidyn.viz``).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

import vidyn
from vidyn import models

FEET = ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")
#: per gait, its two half cycles (each the groups of feet that swing together, in order, then
#: a support phase) and (step length, clearance, support knots), as crocoddyl builds them
GAITS = {
    "walk": (((("RH_FOOT",), ("RF_FOOT",)), (("LH_FOOT",), ("LF_FOOT",))), (0.25, 0.15, 2)),
    "trot": (((("RF_FOOT", "LH_FOOT"),), (("LF_FOOT", "RH_FOOT"),)), (0.15, 0.1, 2)),
    "pace": (((("RF_FOOT", "RH_FOOT"),), (("LF_FOOT", "LH_FOOT"),)), (0.15, 0.1, 2)),
    "bound": (((("LF_FOOT", "RF_FOOT"),), (("LH_FOOT", "RH_FOOT"),)), (0.15, 0.1, 5)),
}


#: crocoddyl's jump: apex height of the centre of mass, its displacement (sideways), knots on
#: the ground before and after, knots of the flight up (and as many down)
JUMP = (0.15, (0.0, 0.3, 0.0), 10, 20)
#: the rounding of the friction cones' tip (newtons, :class:`vidyn.optim.FrictionCone`): it
#: also asks a stance foot for at least ``CONE_TIP / μ`` = 14 N; with 1 N the optima of the pace
#: and the bound still pull a little (−4.6 N, −0.3 N: the penalty is too weak there to forbid it)
CONE_TIP = 10.0


def friction_cone(gait_name: str) -> vidyn.optim.FrictionCone:
    """The example's friction cones (``--friction``): μ = 0.7, the tip rounded by ``CONE_TIP``,
    weight 1e-2 on the gaits and 0.1 on the jump, whose take-off and landing forces are larger
    (with 1e-2 its optimum still pulls 13 N; 0.1 is crocoddyl's weight, 10 times its step)."""
    return vidyn.optim.FrictionCone(0, mu=0.7, weight=0.1 if gait_name == "jump" else 1e-2, tip=CONE_TIP)
#: the weight of a swing foot's distance to its foothold at the knot where it lands (the start
#: of the touchdown step): with the rest of the swing's 1e4 (crocoddyl's 1e6 times its 10 ms
#: step) feet landed 4–9 mm from their footholds and the touchdown's impulse moved them there
#: within one step, a kick that a replay at a finer step does not forgive
#: (``bench_cross_resimulation.py``); 1e6 brings the gaps below 0.15 mm (crocoddyl's impulse
#: models track landing feet with 1e7)
LANDING = 1e6


@dataclass
class Gait:
    """Phases ``(steps, contacts that hold)``, the contacts (a foothold per stance) and their
    footholds, each swing knot's targets ``{step: [(foot, point), …]}`` (the feet's positions at
    the end of that step), the centre of mass's target per knot, and the state guess's base
    position per knot (``None``: the standing posture everywhere, crocoddyl's warm start)."""

    phases: list[tuple[int, list[str]]] = field(default_factory=list)
    contacts: dict[str, list] = field(default_factory=dict)
    footholds: dict[str, np.ndarray] = field(default_factory=dict)
    swing: dict[int, list[tuple[str, np.ndarray]]] = field(default_factory=dict)
    com: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    base: np.ndarray | None = None
    #: per swing step, a weight of its own for the feet's targets (else the tracks' foot weight)
    swing_weight: dict[int, float] = field(default_factory=dict)

    def schedule(self, phases: int) -> vidyn.ContactSchedule:
        """The first ``phases`` phases as a contact schedule."""
        return vidyn.ContactSchedule.of(self.contacts, self.phases[:phases])


def standing(model: vidyn.Model) -> np.ndarray:
    """ANYmal's standing posture (its SRDF), lowered so that the feet touch z = 0."""
    q = models.reference_configuration(model, "anymal", "standing")
    q[2] -= min(vidyn.frame_placement(model, q, f)[2, 3] for f in FEET)
    return q


def quadruped_gait(model: vidyn.Model, q0: np.ndarray, halves, length: float, height: float, swing_knots: int, support_knots: int) -> Gait:
    """One cycle from ``q0``: a support phase, then for each half cycle (``GAITS``) a swing of
    each of its groups of feet forward, by ``length`` (by half of it in the first half cycle,
    as crocoddyl's first steps), with ``height`` clearance, and a support phase. The centre of
    mass's target moves at a constant rate to the feet's mean advance."""
    gait = Gait()
    foothold = {f: vidyn.frame_placement(model, q0, f)[:3, 3] for f in FEET}
    stance = {f: f"{f}@0" for f in FEET}  # a foot's contacts: @0, then @1 after its step
    for f in FEET:
        gait.contacts[stance[f]] = vidyn.point_contact(f, foothold[f])
        gait.footholds[stance[f]] = foothold[f]
    gait.phases.append((support_knots, list(stance.values())))
    k = support_knots
    for half, groups in enumerate(halves):
        stride = 0.5 * length if half == 0 else length
        for group in groups:
            for foot in group:
                start, end = foothold[foot], foothold[foot] + [stride, 0.0, 0.0]
                for j in range(swing_knots):
                    s = (j + 1) / swing_knots
                    gait.swing.setdefault(k + j, []).append((foot, start + s * (end - start) + [0.0, 0.0, height * math.sin(math.pi * s)]))
                gait.swing_weight[k + swing_knots - 1] = LANDING
                foothold[foot] = end
            gait.phases.append((swing_knots, [stance[f] for f in FEET if f not in group]))
            k += swing_knots
            for foot in group:
                stance[foot] = f"{foot}@1"
                gait.contacts[stance[foot]] = vidyn.point_contact(foot, foothold[foot])
                gait.footholds[stance[foot]] = foothold[foot]
        gait.phases.append((support_knots, list(stance.values())))
        k += support_knots
    advance = np.mean([foothold[f][0] - gait.footholds[f"{f}@0"][0] for f in FEET])
    gait.com = np.tile(vidyn.center_of_mass(model, q0), (k + 1, 1))
    gait.com[:, 0] += np.linspace(0.0, advance, k + 1)
    return gait


def jumping_gait(model: vidyn.Model, q0: np.ndarray, height: float, shift, ground_knots: int, flying_knots: int) -> Gait:
    """crocoddyl's ``createJumpingProblem``: all four feet on the ground, a flight in which the
    centre of mass rises to ``height`` above its start while moving half of ``shift``, then
    falls as far again, a touchdown of all four feet at their footholds moved by ``shift``,
    and the ground again. The centre of mass is tracked all along (crocoddyl leaves the fall
    free), the feet in the flight along the standing posture carried by the base (landing on
    their footholds with weight ``LANDING``); that posture is also the state guess."""
    gait, shift = Gait(), np.asarray(shift, dtype=float)
    for f in FEET:
        foothold = vidyn.frame_placement(model, q0, f)[:3, 3]
        for side, point in (("0", foothold), ("1", foothold + shift)):
            gait.contacts[f"{f}@{side}"] = vidyn.point_contact(f, point)
            gait.footholds[f"{f}@{side}"] = point
    gait.phases = [(ground_knots, [f"{f}@0" for f in FEET]), (2 * flying_knots, []), (ground_knots, [f"{f}@1" for f in FEET])]
    steps = 2 * (ground_knots + flying_knots)
    com0 = vidyn.center_of_mass(model, q0)
    gait.com = np.tile(com0, (steps + 1, 1))
    apex = np.array([0.5 * shift[0], 0.5 * shift[1], 0.5 * shift[2] + height])
    for k in range(flying_knots):
        s = (k + 1) / flying_knots
        gait.com[ground_knots + 1 + k] = com0 + s * apex
        gait.com[ground_knots + flying_knots + 1 + k] = com0 + apex + s * (shift - apex)
    gait.com[ground_knots + 2 * flying_knots + 1 :] = com0 + shift
    gait.base = q0[:3] + gait.com - com0
    for k in range(ground_knots, ground_knots + 2 * flying_knots):
        carried = q0.copy()
        carried[:3] = gait.base[k + 1]
        gait.swing[k] = [(f, vidyn.frame_placement(model, carried, f)[:3, 3]) for f in FEET]
    gait.swing_weight[ground_knots + 2 * flying_knots - 1] = LANDING
    return gait


def tracks(gait: Gait, steps: int, foot_weight: float, com_weight: float) -> list[vidyn.optim.Track]:
    """The swing feet's paths (weighted on their swing knots only) and the centre of mass's
    ramp over ``steps`` steps."""
    out = []
    for foot in FEET:
        target, weight = np.zeros((steps + 1, 3)), np.zeros(steps + 1)
        for k, targets in gait.swing.items():
            for f, point in targets:
                if f == foot and k < steps:
                    target[k + 1], weight[k + 1] = point, gait.swing_weight.get(k, foot_weight)
        if weight.any():
            out.append(vidyn.optim.Track(foot, target, weight))
    out.append(vidyn.optim.Track("com", gait.com[: steps + 1], com_weight))
    return out


def static_torques(model: vidyn.Model, q: np.ndarray, support: list[str], rows: int = 3) -> np.ndarray:
    """Joint torques that hold ``q`` against gravity with the ``support`` feet carrying the
    rest: the least-norm ``(τ, f)`` of ``g(q) = Sᵀτ + Σ J_fᵀ f``, with forces on the feet
    (``rows = 3``, point contacts) or wrenches (``rows = 6``, frame contacts)."""
    n = model.nv
    selection = np.zeros((n - 6, n))
    selection[:, 6:] = np.eye(n - 6)
    jacobians = [vidyn.jacobian(model, q, f, "local_world_aligned")[:rows] for f in support]
    return np.linalg.lstsq(np.vstack([selection, *jacobians]).T, vidyn.gravity(model, q), rcond=None)[0][: n - 6]


def problem(gait_name: str = "walk", swing_knots: int = 25, dt: float = 0.01, friction: vidyn.optim.FrictionCone | None = None, phases: int | None = None, limits: float = 0.0):
    """The optimal-control problem of gait ``gait_name`` (a key of ``GAITS``, or ``"jump"``:
    ``JUMP``; module docs): the model, the gait, its schedule and integrator, the start ``q0``,
    crocoddyl's warm start (the configurations ``guess`` and the torques ``u_init`` that hold
    each phase's stance) and the keywords of the cost and limits that :func:`vidyn.optim.fddp`
    and :func:`vidyn.optim.ilqr` share. ``friction``, ``phases``, ``limits`` as in
    :func:`solve`."""
    with warnings.catch_warnings():  # ANYmal's URDF has a massless base link: a warning, not an error
        warnings.simplefilter("ignore")
        model = models.example_robot("anymal")
    q0, n = standing(model), model.nv
    if gait_name == "jump":
        gait = jumping_gait(model, q0, *JUMP)
    else:
        halves, (length, height, support_knots) = GAITS[gait_name]
        gait = quadruped_gait(model, q0, halves, length, height, swing_knots, support_knots)
    count = phases or len(gait.phases)
    schedule = gait.schedule(count)
    vi = vidyn.VariationalIntegrator(model, dt, scheme="midpoint", constraints=schedule.constraints, schedule=schedule.active)
    holding = [static_torques(model, q0, [c.split("@")[0] for c in names]) for _, names in gait.phases[:count]]
    u_init = np.vstack([np.tile(tau, (steps, 1)) for tau, (steps, _) in zip(holding, gait.phases)])
    weights = np.concatenate([[0.0] * 3, [50.0] * 3, [1e-3] * 12, [0.1] * n])
    guess = np.tile(q0, (schedule.steps + 1, 1))
    if gait.base is not None:
        guess[:, :3] = gait.base[: schedule.steps + 1]
    cost = dict(
        Q=weights,
        QN=weights,
        R=1e-3,
        x_ref=np.concatenate([q0, np.zeros(n)]),
        actuated=range(6, n),
        tracks=tracks(gait, schedule.steps, 1e4, 1e4 if gait_name == "jump" else 1e3),
        friction=None if friction is None else schedule.friction_cones(friction.mu, friction.weight, friction.tip),
        u_min=-limits * model.effort_limit[6:] if limits else None,
        u_max=limits * model.effort_limit[6:] if limits else None,
    )
    return model, gait, schedule, vi, q0, guess, u_init, cost


def solve(
    gait_name: str = "walk",
    swing_knots: int = 25,
    dt: float = 0.01,
    friction: vidyn.optim.FrictionCone | None = None,
    phases: int | None = None,
    limits: float = 0.0,
    verbose: bool = True,
    method: str = "ilqr",
    alpha_max: float = 4.0,
    fitted_step: bool = True,
    xreg: float | None = None,
):
    """The cycle of gait ``gait_name`` (a key of ``GAITS``, or ``"jump"``: ``JUMP``) by FDDP from crocoddyl's warm start
    (module docs); with ``friction`` (its ``first`` ignored) a friction cone on every contact;
    ``phases``: only that many phases; ``limits``: bounds on the torques, that fraction of the
    URDF's effort limits (0: none); ``method="ddp"``: DDP's exact second order on the feasible
    iterates; ``alpha_max``, ``fitted_step``: its line search's first step; ``xreg``: its first state
    regularisation (:func:`vidyn.optim.fddp`; None: its default). Returns the model, the gait, its schedule and integrator, and FDDP's result."""
    model, gait, schedule, vi, q0, guess, u_init, cost = problem(gait_name, swing_knots, dt, friction, phases, limits)
    started = time.perf_counter()
    res = vidyn.optim.fddp(vi, q0, guess, u_init, max_iterations=200, method=method, alpha_max=alpha_max, fitted_step=fitted_step, xreg=xreg, **cost)
    if verbose:
        print(f"{gait_name}, {schedule.steps} steps: {res.message}; cost {res.cost_history[0]:.4g} -> {res.cost:.4g}, {time.perf_counter() - started:.2f} s")
    return model, gait, schedule, vi, res


def solution(model: vidyn.Model, vi: vidyn.VariationalIntegrator, res) -> tuple[np.ndarray, np.ndarray]:
    """FDDP's own knots ``q`` and the contact multipliers of its steps: each step is a step of
    the VI to its tolerance, where the open-loop replay ``res.trajectory`` of an unstable motion
    (a biped in single support) drifts away from it."""
    q, p = res.x[:, : model.nq], res.x[:, model.nq :]
    return q, vi.multipliers(q, p=p, u=res.U)


def report(model, gait, schedule, vi, res) -> dict[str, float]:
    """What the motion achieved: the base's advance, the feet's distance to their last
    footholds and their clearance, the touchdowns' gaps to their footholds (the foot at the
    start of its first stance step, :meth:`vidyn.ContactSchedule.touchdown_gaps`), the contact
    forces' vertical range."""
    (q, lam), dt = solution(model, vi, res), vi.dt
    foot = {name: name.split("@")[0] for name in gait.contacts}
    last = {foot[name]: name for name in gait.contacts}  # the last contact of each foot
    position = lambda f, x: vidyn.frame_placement(model, x, f)[:3, 3]  # noqa: E731
    vertical = np.concatenate([schedule.forces(lam, dt, name)[schedule.holds(name), 2] for name in schedule.rows])
    return {
        "base advance (m)": q[-1, 0] - q[0, 0],
        "worst foot error at the end (m)": max(np.abs(position(f, q[-1]) - gait.footholds[c]).max() for f, c in last.items()),
        "lowest swing clearance (m)": min(max(position(f, x)[2] for x in q) for f in FEET),
        "worst touchdown gap (m)": schedule.touchdown_gaps(vi, q).max(initial=0.0),
        "contact force z min (N)": vertical.min(),
        "contact force z max (N)": vertical.max(),
        "largest |f_t| / f_z (N/N)": max(friction_ratio(schedule.forces(lam, dt, name)[schedule.holds(name)]) for name in schedule.rows if schedule.holds(name).any()),
    }


def friction_ratio(forces: np.ndarray) -> float:
    """The largest tangential-to-normal ratio of world forces (rows ``(f_x, f_y, f_z)``);
    infinite for a force that does not push."""
    normal = forces[:, 2]
    tangential = np.linalg.norm(forces[:, :2], axis=1)
    return float(np.max(np.where(normal > 0, tangential / np.maximum(normal, 1e-300), np.inf)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gait", choices=[*sorted(GAITS), "jump"], default="walk")
    parser.add_argument("--plot", action="store_true", help="save the paths to examples/out/anymal_<gait>.png")
    parser.add_argument("--friction", action="store_true", help="friction cones (μ = 0.7) on the contact forces")
    parser.add_argument("--limits", type=float, nargs="?", const=1.0, default=0.0, help="bound the joint torques by this fraction of the URDF's effort limits (1 if no value)")
    parser.add_argument("--animate", action="store_true", help="save the motion to examples/out/anymal_<gait>.gif and _strip.png")
    parser.add_argument("--ddp", action="store_true", help="DDP's exact second order through the contact phases on the feasible iterates")
    parser.add_argument("--xreg", type=float, default=None, help="FDDP's first state regularisation (default: vidyn.optim.fddp's, 1e-2; 0: none)")
    args = parser.parse_args()
    cone = friction_cone(args.gait) if args.friction else None
    model, gait, schedule, vi, res = solve(args.gait, friction=cone, limits=args.limits, method="ddp" if args.ddp else "ilqr", xreg=args.xreg)
    for key, value in report(model, gait, schedule, vi, res).items():
        print(f"{key}: {value:.4g}")
    if args.plot:
        out = plot(model, schedule, vi, res, args.gait, cone.mu if cone else 0.7)
        print(f"saved {out}")
    if args.animate:
        for out in animate(model, vi, res, args.gait):
            print(f"saved {out}")


def animate(model, vi, res, name: str):
    """The motion as a GIF (legs drawn to the feet, the URDF's collision shapes, the feet's
    paths traced) and five snapshots side by side, ``examples/out/anymal_<name>.gif`` and ``_strip.png``."""
    import pathlib

    from vidyn import viz

    q, out = res.x[:, : model.nq], pathlib.Path(__file__).parent / "out"
    title = f"ANYmal, one {name} cycle (FDDP on the VI)"
    style = dict(collision="anymal", tips=FEET, trace=FEET, title=title)
    gif = viz.animate(model, q, vi.dt, out / f"anymal_{name}.gif", **style)
    png = viz.strip(model, q, out / f"anymal_{name}_strip.png", n=5, dt=vi.dt, **style)
    return gif, png


def plot(model, schedule, vi, res, name: str, mu: float, feet=FEET, robot: str = "anymal"):
    """Four panels against time: the ``feet``'s heights, the base's and the centre of mass's
    forward and vertical positions, each contact's vertical force with the friction cone's
    ratio |f_t|/f_z (against ``mu``), and the joint torques; saved to
    ``examples/out/<robot>_<name>.png``."""
    import pathlib

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (q, forces), dt = solution(model, vi, res), vi.dt
    t = dt * np.arange(len(q))
    fig, axes = plt.subplots(4, 1, figsize=(8, 10), sharex=True)
    for f in feet:
        axes[0].plot(t, [vidyn.frame_placement(model, x, f)[2, 3] for x in q], label=f)
    axes[0].set_ylabel("foot height (m)")
    com = np.array([vidyn.center_of_mass(model, x) for x in q])
    for series, label in ((q[:, 0], "base x"), (q[:, 2], "base z"), (com[:, 0], "CoM x"), (com[:, 2], "CoM z")):
        axes[1].plot(t, series, label=label)
    axes[1].set_ylabel("position (m)")
    for name_, rows in schedule.rows.items():
        held = schedule.holds(name_)
        f = schedule.forces(forces, dt, name_)
        axes[2].plot(t[:-1][held], f[held, 2], ".", markersize=3, label=f"{name_} f_z")
    axes[2].axhline(0.0, color="k", linewidth=0.5)
    axes[2].set_ylabel("vertical force (N)")
    ratio = axes[2].twinx()
    for name_ in schedule.rows:
        held = schedule.holds(name_)
        f = schedule.forces(forces, dt, name_)[held]
        ratio.plot(t[:-1][held], np.linalg.norm(f[:, :2], axis=1) / np.maximum(f[:, 2], 1e-9), "x", markersize=2, color="gray")
    ratio.axhline(mu, color="r", linewidth=0.8)
    ratio.set_ylim(0, 2 * mu)
    ratio.set_ylabel(f"|f_t|/f_z (μ = {mu})")
    axes[3].plot(t[:-1], res.u)
    axes[3].set_ylabel("joint torques (N m)")
    axes[3].set_xlabel("time (s)")
    for ax in axes[:3]:
        ax.legend(fontsize=6, ncol=4)
    out = pathlib.Path(__file__).parent / "out" / f"{robot}_{name}.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return out


if __name__ == "__main__":
    main()
