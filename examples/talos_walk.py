"""Talos (legs) takes two steps: multiple shooting (FDDP) on the exact derivatives of the
variational integrator, with 6-D foot contacts (issue 24).

The problem is crocoddyl's ``examples/bipedal_walk_fwddyn.py`` (``crocoddyl.utils.biped``,
``createWalkingProblem``): Talos's legs (crocoddyl's ``talos_legs`` of example-robot-data:
the base and the twelve leg joints of ``talos_reduced.urdf``, the upper body dropped, 48.7 kg;
crocoddyl's model also has the motors' rotor inertias, which vidyn does not model), a time step of
30 ms, 10-knot double supports and 35-knot steps of 0.6 m with 0.1 m clearance, the first
(right) step half as long, the soles (``right_sole_link``, ``left_sole_link``) held flat on the
ground while they stand, the swing sole's path rising and falling linearly, and the centre
of mass moving forward by half of each step. Here a standing sole is a 6-D frame contact of
the VI (:func:`vidyn.frame_contact`: its placement held), a touchdown the plastic impact that
puts the sole on its next foothold, and FDDP (:func:`vidyn.optim.fddp`) minimises the swing
soles' distance to their paths (three points of each sole, so its placement, as crocoddyl's
frame-placement cost) and the centre of mass's to its ramp, with a regularisation of the
posture (base orientation, joints) and momenta about the half-sitting posture and of the
torques. crocoddyl starts from the standing state at every knot; a VI touchdown from there
would have to move the sole 0.3 m in one step (Newton finds no such step), so the state guess
here is kinematic instead: at every knot the posture with the soles where the gait puts them
and the centre of mass over its target (damped least squares), at rest; the torques are
crocoddyl's (those that hold the standing posture on each phase's stance soles). Each sole
lands on its foothold (weight ``LANDING`` at its last swing knot, crocoddyl's path ending
5.7 mm above the ground a knot early): without that the touchdown impulse moved it by 9 mm and
turned it by 13° within one 30 ms step (measured on a heavier model, the legs carrying the
locked upper body). Measured: 9 iterations (14 with every line search starting at the full step,
``fitted_step=False``), feasible (each step the VI's to 3e-12); the soles land within 0.44 mm and
0.73° of their footholds; vertical contact forces 163–491 N (the weight is 478 N). Open loop the
optimised torques follow the walk through its first step and touchdown (2.4e-7 at knot 46), then a biped in single support drifts away (the replay fails at the second
touchdown): the reports use FDDP's own knots (``anymal_walk.solution``).

The contacts are bilateral (no friction cones here): the result may pull on the ground. Some
torques alternate from step to step in single support (``--plot``): an alternating sequence
``u_k = (−1)^k a`` is a null mode of the midpoint rule's forcing (knot ``k`` receives
``Δt/2 (u_{k−1} + u_k)``), which only the momenta and the torque cost see; a larger ``R``
smooths it (measured on the heavier model: the largest second difference of the torques
575 N m at ``R = 1e-4``, 267 at 1e-3, 118 at 1e-2, where the soles start to pull; 300 N m on
this one at the example's ``R = 1e-4``).

Run: ``python examples/talos_walk.py [--steps 2] [--plot] [--animate]``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import dataclass, field
from xml.etree import ElementTree

import numpy as np

import vidyn
from anymal_walk import LANDING, plot, solution, static_torques
from vidyn import models

FEET = ("right_sole_link", "left_sole_link")
# three points of a sole, in its frame (flat on the ground at the half-sitting posture): the
# origin, one 0.1 m above and one 0.1 m ahead; tracking them tracks the sole's placement
SOLE_POINTS = (np.zeros(3), np.array([0.0, 0.0, 0.1]), np.array([0.1, 0.0, 0.0]))
LEGS = [f"leg_{side}_{k}_joint" for side in ("left", "right") for k in range(1, 7)]


@dataclass
class BipedGait:
    """Phases ``(steps, contacts that hold)``, the contacts (a foothold placement per stance),
    the soles' orientation at the start (``flat``), the swing soles' targets per step
    ``{step: [(sole, point)]}`` (where the sole should be at the end of that step; on the
    landing step, weighted ``LANDING``) and the centre of mass's target per knot."""

    phases: list[tuple[int, list[str]]] = field(default_factory=list)
    contacts: dict[str, list] = field(default_factory=dict)
    footholds: dict[str, np.ndarray] = field(default_factory=dict)
    flat: dict[str, np.ndarray] = field(default_factory=dict)
    swing: dict[int, list[tuple[str, np.ndarray]]] = field(default_factory=dict)
    swing_weight: dict[int, float] = field(default_factory=dict)
    com: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))


def talos_legs() -> tuple[vidyn.Model, np.ndarray]:
    """crocoddyl's Talos legs (example-robot-data's ``talos_legs``): ``talos_reduced.urdf`` with
    the base, what is fixed to it, and the twelve leg joints; the torso, arms and head are
    dropped, not locked, so their mass is not carried (48.7 kg in all, as crocoddyl's model;
    locked at the half-sitting posture by :meth:`vidyn.Model.lock_joints`, as Pinocchio's
    ``buildReducedModel``, they would add 41.6 kg). Returns the model and its half-sitting
    posture."""
    robots = models.example_robot_data_dir()
    if robots is None:
        raise FileNotFoundError("example-robot-data is not installed")
    root = ElementTree.parse(robots / models.EXAMPLE_ROBOTS["talos"].urdf).getroot()
    kept, grew = {"base_link"}, True
    while grew:  # the links reached from the base through fixed and leg joints
        grew = False
        for joint in root.findall("joint"):
            parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
            if parent in kept and child not in kept and (joint.get("type") == "fixed" or joint.get("name") in LEGS):
                kept.add(child)
                grew = True
    for element in list(root):
        if element.tag == "link" and element.get("name") not in kept:
            root.remove(element)
        elif element.tag == "joint" and element.find("child").get("link") not in kept:
            root.remove(element)
    with warnings.catch_warnings():  # the URDF's inertia notes
        warnings.simplefilter("ignore")
        model = vidyn.Model.from_urdf_string(ElementTree.tostring(root, encoding="unicode"), floating_base=True)
    return model, models.reference_configuration(model, "talos", "half_sitting")


def walking_gait(model: vidyn.Model, q0: np.ndarray, steps: int, length: float, height: float, step_knots: int, support_knots: int) -> BipedGait:
    """``steps`` alternating steps (right first, half as long) from ``q0``, each after a
    double support (crocoddyl's ``createWalkingProblem``, repeated)."""
    gait = BipedGait()
    placement = {f: vidyn.frame_placement(model, q0, f) for f in FEET}
    gait.flat = {f: placement[f][:3, :3].copy() for f in FEET}
    stance = {f: f"{f}@0" for f in FEET}
    for f in FEET:
        gait.contacts[stance[f]] = vidyn.frame_contact(f, placement[f])
        gait.footholds[stance[f]] = placement[f][:3, 3].copy()
    com0 = vidyn.center_of_mass(model, q0)
    com = [com0.copy()]
    k = 0
    for s in range(steps):
        foot, other = FEET[s % 2], FEET[1 - s % 2]
        gait.phases.append((support_knots, [stance[f] for f in FEET]))
        com += [com[-1].copy() for _ in range(support_knots)]
        k += support_knots
        stride = 0.5 * length if s == 0 else length
        start = placement[foot][:3, 3].copy()
        half = step_knots / 2
        for j in range(step_knots):
            # crocoddyl's linear rise and fall, which ends a knot before the ground: the sole
            # lands on its foothold at the last knot instead (``LANDING``)
            rise = height * (j / half if j < half else 1.0 - (j - half) / half) if j < step_knots - 1 else 0.0
            point = start + [stride * (j + 1) / step_knots, 0.0, rise]
            gait.swing.setdefault(k + j, []).append((foot, point))
            com.append(com[-1] + [0.5 * stride / step_knots, 0.0, 0.0])
        gait.swing_weight[k + step_knots - 1] = LANDING
        gait.phases.append((step_knots, [stance[other]]))
        k += step_knots
        placement[foot] = placement[foot].copy()
        placement[foot][0, 3] += stride
        stance[foot] = f"{foot}@{s + 1}"
        gait.contacts[stance[foot]] = vidyn.frame_contact(foot, placement[foot])
        gait.footholds[stance[foot]] = placement[foot][:3, 3].copy()
    gait.phases.append((support_knots, [stance[f] for f in FEET]))
    com += [com[-1].copy() for _ in range(support_knots)]
    gait.com = np.array(com)
    return gait


def kinematic_guess(model: vidyn.Model, q0: np.ndarray, gait: BipedGait) -> np.ndarray:
    """A state guess for every knot: the posture that puts the soles where the gait wants them
    (each stance sole flat on its foothold, the swing sole on its path, orientation kept) and
    the centre of mass over its target, by damped least squares from the knot before (with
    ``x_ref``-like regularisation towards ``q0``), zero momentum. Not a motion: FDDP closes
    the gaps it leaves."""
    knots = len(gait.com)
    guess = np.zeros((knots, model.nq))
    q = q0.copy()
    flat = {f: vidyn.frame_placement(model, q0, f)[:3, :3] for f in FEET}
    sole_at = {f: vidyn.frame_placement(model, q0, f)[:3, 3].copy() for f in FEET}
    for k in range(knots):
        for f, point in gait.swing.get(k - 1, []):
            sole_at[f] = point
        for _ in range(20):
            rows, errors = [], []
            for f in FEET:
                m = vidyn.frame_placement(model, q, f)
                rotation_error = 0.5 * np.cross(m[:3, :3], flat[f], axis=0).sum(axis=1)
                errors.append(np.concatenate([sole_at[f] - m[:3, 3], rotation_error]))
                rows.append(vidyn.jacobian(model, q, f, "local_world_aligned"))
            errors.append((gait.com[k] - vidyn.center_of_mass(model, q))[:2])
            rows.append(vidyn.com_jacobian(model, q)[:2])
            jac, err = np.vstack(rows), np.concatenate(errors)
            if np.abs(err).max() < 1e-10:
                break
            posture = model.difference(q, q0)
            step = np.linalg.solve(jac.T @ jac + 1e-6 * np.eye(model.nv), jac.T @ err + 1e-6 * posture)
            q = model.integrate(q, step)
        guess[k] = q
    return guess


def tracks(gait: BipedGait, steps: int, foot_weight: float, com_weight: float) -> list[vidyn.optim.Track]:
    """The swing soles' placements along their paths (weighted on their swing knots only),
    flat as they stand at the start, as three points of each sole: its origin, a point above
    it and one ahead of it (crocoddyl tracks the frame placement), and the centre of mass's
    ramp."""
    out = []
    for foot in FEET:
        target, weight = np.zeros((steps + 1, 3)), np.zeros(steps + 1)
        for k, targets in gait.swing.items():
            for f, point in targets:
                if f == foot:
                    target[k + 1], weight[k + 1] = point, gait.swing_weight.get(k, foot_weight)
        if weight.any():
            for offset in SOLE_POINTS:
                out.append(vidyn.optim.Track(foot, target + gait.flat[foot] @ offset, weight, offset=offset))
    out.append(vidyn.optim.Track("com", gait.com[: steps + 1], com_weight))
    return out


def solve(steps: int = 2, dt: float = 0.03, verbose: bool = True, alpha_max: float = 4.0, fitted_step: bool = True):
    """The walk by FDDP from crocoddyl's warm start (module docs); ``alpha_max``,
    ``fitted_step`` as in :func:`vidyn.optim.fddp`. Returns the model, the gait, its schedule and integrator, and
    FDDP's result."""
    model, q0 = talos_legs()
    n = model.nv
    gait = walking_gait(model, q0, steps, length=0.6, height=0.1, step_knots=35, support_knots=10)
    schedule = vidyn.ContactSchedule.of(gait.contacts, gait.phases)
    vi = vidyn.VariationalIntegrator(model, dt, scheme="midpoint", constraints=schedule.constraints, schedule=schedule.active)
    holding = [static_torques(model, q0, [c.split("@")[0] for c in names], rows=6) for _, names in gait.phases]
    u_init = np.vstack([np.tile(tau, (k, 1)) for tau, (k, _) in zip(holding, gait.phases)])
    weights = np.concatenate([[0.0] * 3, [500.0] * 3, [0.01] * (n - 6), [1.0] * n])
    started = time.perf_counter()
    res = vidyn.optim.fddp(
        vi,
        q0,
        kinematic_guess(model, q0, gait),
        u_init,
        Q=weights,
        QN=weights,
        R=1e-4,
        x_ref=np.concatenate([q0, np.zeros(n)]),
        actuated=range(6, n),
        tracks=tracks(gait, schedule.steps, 1e5, 1e5),
        max_iterations=200,
        alpha_max=alpha_max,
        fitted_step=fitted_step,
    )
    if verbose:
        print(f"talos, {schedule.steps} steps of {dt} s: {res.message}; cost {res.cost_history[0]:.4g} -> {res.cost:.4g}, {time.perf_counter() - started:.2f} s")
    return model, gait, schedule, vi, res


def report(model, gait, schedule, vi, res) -> dict[str, float]:
    """The base's advance, the soles' distance to their last footholds, the lowest swing
    clearance, how far each landing sole is from its foothold (position and turn) at the start
    of its touchdown step, and the vertical contact forces' range."""
    q, lam = solution(model, vi, res)
    position = lambda f, x: vidyn.frame_placement(model, x, f)[:3, 3]  # noqa: E731
    last = {name.split("@")[0]: name for name in gait.contacts}
    vertical = np.concatenate([schedule.forces(lam, vi.dt, name)[schedule.holds(name), 2] for name in schedule.rows])
    landings = [(name.split("@")[0], name, k) for k, name in schedule.touchdowns()]
    turn = lambda f, x: np.degrees(np.arccos(np.clip((np.trace(vidyn.frame_placement(model, x, f)[:3, :3] @ gait.flat[f].T) - 1) / 2, -1, 1)))  # noqa: E731
    return {
        "base advance (m)": q[-1, 0] - q[0, 0],
        "worst sole error at the end (m)": max(np.abs(position(f, q[-1]) - gait.footholds[c]).max() for f, c in last.items()),
        "worst touchdown gap (m)": max(np.abs(position(f, q[k]) - gait.footholds[c]).max() for f, c, k in landings),
        "worst touchdown turn (deg)": max(turn(f, q[k]) for f, _, k in landings),
        "highest swing sole (m)": max(position(f, x)[2] for x in q for f in FEET),
        "contact force z min (N)": vertical.min(),
        "contact force z max (N)": vertical.max(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2, help="number of steps (crocoddyl's problem: 2)")
    parser.add_argument("--plot", action="store_true", help="save the soles' heights, base and CoM, forces and torques to examples/out/talos_walk.png")
    parser.add_argument("--animate", action="store_true", help="save a GIF and a strip to examples/out/")
    args = parser.parse_args()
    model, gait, schedule, vi, res = solve(args.steps)
    for key, value in report(model, gait, schedule, vi, res).items():
        print(f"{key}: {value:.4g}")
    if args.plot:
        print(f"saved {plot(model, schedule, vi, res, 'walk', 0.7, feet=FEET, robot='talos')}")
    if args.animate:
        import pathlib

        out = pathlib.Path(__file__).resolve().parent / "out"
        q = res.x[:, : model.nq]
        vidyn.viz.animate(model, q, vi.dt, out / "talos_walk.gif", trace=FEET, title="Talos (legs), FDDP on the VI")
        vidyn.viz.strip(model, q, out / "talos_walk_strip.png", n=6, dt=vi.dt)
        print(f"saved {out / 'talos_walk.gif'} and {out / 'talos_walk_strip.png'}")


if __name__ == "__main__":
    main()
