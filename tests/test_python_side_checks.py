"""Arguments read on the Python side (``vidyn.optim``, ``vidyn.contacts``) and trajectories
passed back to an integrator are checked as the Rust conversions check theirs (DESIGN.md,
"Robustness rules"): complex values refused, shapes, finiteness and ranges named by argument,
a trajectory of another integrator refused, never a silent wrong answer or a panic.

Each case was found by an audit of the newer APIs (session 37): before, complex targets and
weights lost their imaginary part with a warning, a maximal trajectory of another integrator
was linearised as if it were this one's (or panicked in ``body_contact_distances``), ``p`` and
``u`` given beside a Trajectory were ignored, a friction cone's ``first`` could straddle two
contacts, and contact forces of the wrong columns came out as (N, 0) or (N, 2) arrays.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import vidyn
from fuzz_inputs import cylinder_chain
from reference_motion import solo12

FEET = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]


@pytest.fixture(scope="module")
def trot() -> tuple[vidyn.Model, vidyn.ContactSchedule, vidyn.VariationalIntegrator, np.ndarray]:
    model = solo12()
    q0 = model.neutral()
    contacts = {f: vidyn.point_contact(f, vidyn.frame_placement(model, q0, f)[:3, 3]) for f in FEET}
    cs = vidyn.ContactSchedule.of(contacts, [(2, FEET), (2, ["FL_FOOT", "HR_FOOT"]), (2, FEET)])
    vi = vidyn.VariationalIntegrator(model, 0.005, constraints=cs.constraints, schedule=cs.active)
    return model, cs, vi, q0


def test_complex_arguments_are_refused_by_name(trot) -> None:
    model, cs, vi, q0 = trot
    x_ref = np.r_[q0, np.zeros(vi.n)]
    calls = {
        "Q": lambda: vidyn.optim.ilqr(vi, q0, steps=2, Q=np.ones(2 * vi.n) * (1 + 1j), max_iterations=1),
        "x_ref": lambda: vidyn.optim.ilqr(vi, q0, steps=2, x_ref=x_ref + 1j, max_iterations=1),
        "tracks[0].target": lambda: vidyn.optim.ilqr(vi, q0, steps=2, tracks=[vidyn.optim.Track("com", [0, 0, 0.3 + 2j])], max_iterations=1),
        "X_init": lambda: vidyn.optim.fddp(vi, q0, np.tile(x_ref + 0j, (3, 1)), steps=2, max_iterations=1),
        "u_min": lambda: vidyn.optim.ilqr(vi, q0, steps=2, u_min=-1 + 1j, max_iterations=1),
        "A": lambda: vidyn.optim.lqr(np.ones((2, 2, 2)) * 1j, np.ones((2, 2, 1)), 1.0, 1.0, 1.0),
        "target": lambda: vidyn.point_contact("FL_FOOT", [0.1 + 9j, 0, 0]),
        "multipliers": lambda: vidyn.point_contact_forces(np.ones((3, 3)) * 1j, 0.01),
    }
    for name, call in calls.items():
        with pytest.raises(vidyn.InputError, match="^" + re.escape(name) + " has complex dtype"):
            call()


def test_p_and_u_beside_a_trajectory_are_refused(trot) -> None:
    model, cs, vi, q0 = trot
    traj = vi.rollout(q0, steps=cs.steps)
    for call in (lambda: vi.multipliers(traj, p=np.zeros((7, vi.n))), lambda: vi.linearize(traj, None, np.zeros((6, vi.n)))):
        with pytest.raises(vidyn.InputError, match="not both"):
            call()
    assert vi.multipliers(traj).shape == (cs.steps, len(cs.constraints))


def test_contact_forces_check_their_columns_step_and_name(trot) -> None:
    model, cs, vi, q0 = trot
    traj = vi.rollout(q0, steps=cs.steps)
    lam = vi.multipliers(traj)
    np.testing.assert_array_equal(cs.forces(lam, vi.dt, "HR_FOOT"), -lam[:, 9:12] / vi.dt)
    with pytest.raises(vidyn.InputError, match=r"multipliers has shape \(6, 6\), expected \(N, 12\)"):
        cs.forces(lam[:, :6], vi.dt, "FL_FOOT")
    with pytest.raises(vidyn.InputError, match=r"first is 100, expected an int in 0\.\.9"):
        vidyn.point_contact_forces(lam, vi.dt, first=100)
    for dt in (0.0, -1.0, np.inf):
        with pytest.raises(vidyn.InputError, match="dt is"):
            cs.forces(lam, dt, "FL_FOOT")
    bad = lam.copy()
    bad[2, 4] = np.nan
    with pytest.raises(vidyn.InputError, match=r"multipliers\[2, 4\] is not finite"):
        cs.forces(bad, vi.dt, "FL_FOOT")
    for call in (lambda: cs.forces(lam, vi.dt, "NOPE"), lambda: cs.holds("NOPE")):
        with pytest.raises(vidyn.UnknownNameError, match="'NOPE' is not a contact of this schedule"):
            call()


def test_touchdown_gaps_check_the_configurations(trot) -> None:
    model, cs, vi, q0 = trot
    q = vi.rollout(q0, steps=cs.steps).q.copy()
    assert cs.touchdown_gaps(vi, q).shape == (len(cs.touchdowns()),)
    with pytest.raises(vidyn.InputError, match=rf"q has shape \(3, {model.nq}\), expected \({cs.steps + 1}, {model.nq}\)"):
        cs.touchdown_gaps(vi, q[:3])
    q[1, 0] = np.nan
    with pytest.raises(vidyn.InputError, match=r"q\[1, 0\] is not finite"):
        cs.touchdown_gaps(vi, q)


def test_contact_targets_are_named_and_placements_checked(trot) -> None:
    model, cs, vi, q0 = trot
    with pytest.raises(vidyn.InputError, match=r"target\[0\] is not finite"):
        vidyn.point_contact("FL_FOOT", [np.nan, 0, 0])
    with pytest.raises(vidyn.InputError, match=r"target has shape \(2,\), expected \(3,\)"):
        vidyn.point_contact("FL_FOOT", [0, 0])
    m = vidyn.frame_placement(model, q0, "FL_FOOT")
    assert len(vidyn.frame_contact("FL_FOOT", m)) == 6
    scaled, reflected, skewed = m.copy(), np.diag([1.0, 1.0, -1.0, 1.0]), m.copy()
    scaled[:3, :3] *= 2.0
    skewed[3] = [1.0, 2.0, 3.0, 4.0]
    for wrong, message in ((scaled, r"target\[:3, :3\] is not a rotation"), (reflected, r"target\[:3, :3\] is not a rotation"), (skewed, r"target\[3, :\]")):
        with pytest.raises(vidyn.InputError, match=message):
            vidyn.frame_contact("FL_FOOT", wrong)


def test_friction_cones_sit_on_one_point_contact(trot) -> None:
    model, cs, vi, q0 = trot
    cone = vidyn.optim.FrictionCone
    assert vidyn.optim.ilqr(vi, q0, steps=2, friction=[cone(3)], max_iterations=1).status is not None
    with pytest.raises(vidyn.InputError, match="rows 1..4 are not one point contact with the world"):
        vidyn.optim.ilqr(vi, q0, steps=2, friction=[cone(1)], max_iterations=1)
    for first in (1.5, -1, True):
        with pytest.raises(vidyn.InputError, match=r"friction\[0\]\.first is"):
            vidyn.optim.ilqr(vi, q0, steps=2, friction=[cone(first)], max_iterations=1)


def test_limits_horizon_and_reaching_cost_are_named(trot) -> None:
    model, cs, vi, q0 = trot
    cases = {
        r"u_min\[0\] is inf": dict(u_min=np.inf),
        r"u_max\[0\] is -inf": dict(u_max=-np.inf),
        r"u_min\[0\] is nan": dict(u_min=np.nan),
        r"frame_target\[0\] is not finite": dict(frame="FL_FOOT", frame_target=[np.nan, 0, 0]),
        r"frame_weight is -1.0": dict(frame="FL_FOOT", frame_target=[0, 0, 0], frame_weight=-1.0),
        r"frame_weight_terminal is inf": dict(frame="FL_FOOT", frame_target=[0, 0, 0], frame_weight_terminal=np.inf),
    }
    for message, kwargs in cases.items():
        with pytest.raises(vidyn.InputError, match=message):
            vidyn.optim.ilqr(vi, q0, **{"steps": 2, "max_iterations": 1, **kwargs})
    for steps in (0, -1):
        with pytest.raises(vidyn.InputError, match=r"steps is .*, expected an int >= 1"):
            vidyn.optim.ilqr(vi, q0, steps=steps, max_iterations=1)
    with pytest.raises(TypeError, match=r"steps must be an int, got float 2.5"):  # as the Rust side's counts
        vidyn.optim.ilqr(vi, q0, steps=2.5, max_iterations=1)


def free_bodies(names: str) -> vidyn.MaximalIntegrator:
    b = vidyn.ModelBuilder("bodies")
    for name in names:
        b.add_body(None, name, "freeflyer", mass=1.0, inertia=np.eye(3) * 0.1)
    return vidyn.MaximalIntegrator(b.build(), 0.01)


def test_a_maximal_trajectory_is_read_only_by_an_integrator_with_its_dynamics() -> None:
    model = cylinder_chain(2, planar=True)
    made = vidyn.MaximalIntegrator(model, 0.01)
    traj = made.rollout(np.array([0.5, 0.2]), np.zeros(2), steps=4)
    a, b = made.linearize(traj)
    twin = vidyn.MaximalIntegrator(model, 0.01)
    np.testing.assert_array_equal(twin.linearize(traj)[0], a)
    limited = vidyn.MaximalIntegrator(model, 0.01)
    limited.add_joint_limit("joint1", -0.1, 0.1)
    for other in (vidyn.MaximalIntegrator(model, 0.02), vidyn.MaximalIntegrator(model, 0.01, damping=[1.0, 1.0]), limited):
        with pytest.raises(vidyn.InputError, match="traj was made by another integrator"):
            other.linearize(traj)
    three = free_bodies("abc")
    three.add_body_contact("ac", "a", ("sphere", [0.2]), "c", ("sphere", [0.2]))
    lone = free_bodies("a").rollout(np.array([0, 0, 0, 0, 0, 0, 1.0]), np.zeros(6), steps=3)
    with pytest.raises(vidyn.InputError, match="traj was made by another integrator"):
        three.body_contact_distances(lone)


def test_session_38_audit_names_the_argument(trot) -> None:
    """Found in session 38 by requiring the hostile-value fuzzer's messages (or pyo3's
    ``while processing`` notes) to name the argument: a non-unit quaternion in ``q0`` was
    reported as ``x0``, one in ``X_init`` as ``x_init[k]``; a zero ``aligned`` axis as
    ``axis [0, 0, 0]``; ``batch.rollout(steps=1.5)`` ran 1 step; huge horizons gave NumPy's
    unnamed errors."""
    model, cs, vi, q0 = trot
    tilted = q0.copy()
    tilted[3:7] = [0.0, 0.0, 0.0, 2.0]
    x_ref = np.r_[q0, np.zeros(vi.n)]
    guess = np.tile(x_ref, (3, 1))
    guess[1, :7] = tilted[:7]
    cases = {
        "q0: q of joint 'root_joint'": lambda: vidyn.optim.ilqr(vi, tilted, steps=2, max_iterations=1),
        re.escape("X_init[1]: q of joint 'root_joint'"): lambda: vidyn.optim.fddp(vi, q0, guess, steps=2, max_iterations=1),
        re.escape("aligned[1] is [0, 0, 0]"): lambda: vidyn.Perpendicular("FL_FOOT", [1, 0, 0], None, [0, 1, 0], aligned=([1, 0, 0], [0, 0, 0])),
        "steps is 0, expected an int >= 1": lambda: vidyn.optim.closed_loop_rollout(vi, q0, x_ref=x_ref, K=np.zeros((vi.n, 2 * vi.n)), steps=0),
        "phases last .* steps in all, too many": lambda: vidyn.ContactSchedule.of({"a": vidyn.point_contact("FL_FOOT", [0, 0, 0])}, [(2**70, ["a"])]),
        "the zero controls U_init of steps": lambda: vidyn.optim.ilqr(vi, q0, steps=2**62, max_iterations=1),
        "x_ref over the horizon's steps": lambda: vidyn.optim.closed_loop_rollout(vi, q0, x_ref=x_ref, K=np.zeros((vi.n, 2 * vi.n)), steps=2**62),
        "the zero controls u of steps": lambda: vidyn.batch.rollout(vi, np.tile(q0, (2, 1)), steps=2**62),
    }
    for pattern, call in cases.items():
        with pytest.raises(vidyn.InputError, match="^" + pattern):
            call()
    for name, call in {
        "steps": lambda: vidyn.batch.rollout(vi, np.tile(q0, (2, 1)), steps=1.5),
        "actuated[0]": lambda: vidyn.optim.ilqr(vi, q0, steps=2, actuated=[float("nan")], max_iterations=1),
        "frame_weight": lambda: vidyn.optim.ilqr(vi, q0, steps=2, frame="FL_FOOT", frame_target=[0, 0, 0], frame_weight="0.1", max_iterations=1),
    }.items():
        with pytest.raises(TypeError, match="^" + re.escape(name) + " must be"):
            call()
