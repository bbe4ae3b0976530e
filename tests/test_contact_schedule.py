"""Contact phases of the minimal-coordinate VI (issue 24, item 2): ``vidyn.ContactSchedule``
and ``VariationalIntegrator(..., schedule=...)``.

solo12 without torques, standing on its four feet, then trotting in place: one diagonal pair
lifts for ten steps, lands back on its footholds, the other pair lifts. Checked: stance feet
stay at their footholds to round-off, swing feet move and land, contacts not holding carry no
impulse, every step (touchdowns and lift-offs included) passes the energy check, ``A``, ``B``
match central differences on the group on the switching steps, the batch engine gives the
same trajectory bit for bit, and bad schedules are clear errors.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vidyn
from reference_motion import solo12
from strategies import FrameSpec, model_specs
from tangent_differences import extrapolated_step_jacobians, step_jacobians

DT = 0.005
PHASE = 10


def trot(max_energy_error: float = 0.4) -> tuple[vidyn.Model, vidyn.ContactSchedule, vidyn.VariationalIntegrator, np.ndarray]:
    model = solo12()
    q0 = model.neutral()
    feet = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    contacts = {f: vidyn.point_contact(f, vidyn.frame_placement(model, q0, f)[:3, 3]) for f in feet}
    cs = vidyn.ContactSchedule.of(
        contacts,
        [(PHASE, feet), (PHASE, ["FL_FOOT", "HR_FOOT"]), (PHASE, feet), (PHASE, ["FR_FOOT", "HL_FOOT"]), (PHASE, feet)],
    )
    vi = vidyn.VariationalIntegrator(
        model, DT, constraints=cs.constraints, schedule=cs.active, tolerance=1e-15, max_iterations=60, max_energy_error=max_energy_error
    )
    return model, cs, vi, q0


def test_a_trot_in_place_on_solo12():
    """Measured: stance feet within 2e-16 m of their footholds, swing feet 0.1–10 mm away
    before they land, back on their footholds at the touchdown's end knot."""
    model, cs, vi, q0 = trot()
    assert cs.steps == 5 * PHASE and len(cs.constraints) == 12
    np.testing.assert_array_equal(vi.schedule, cs.active)
    traj = vi.rollout(q0, steps=cs.steps)
    lam = vi.multipliers(traj)
    assert lam.shape == (cs.steps, 12)
    for foot, rows in cs.rows.items():
        foothold = vidyn.frame_placement(model, q0, foot)[:3, 3]
        held = cs.holds(foot)
        gaps = np.array([np.abs(vidyn.frame_placement(model, q, foot)[:3, 3] - foothold).max() for q in traj.q])
        # knot k + 1 ends step k: held there when step k holds the contact
        assert gaps[1:][held].max() < 1e-12, foot
        assert gaps[1:][~held].max() > 1e-3, f"{foot} swings"
        assert np.all(lam[~held, rows] == 0.0), f"{foot}: no impulse while it does not hold"
        assert np.abs(lam[held, rows]).max() > 0.0
        forces = cs.forces(lam, DT, foot)
        assert forces.shape == (cs.steps, 3)
        np.testing.assert_array_equal(forces[~held], 0.0)
    # the touchdowns (steps 20 and 40: the swing pairs landing) and their gaps: each foot's
    # distance from its foothold at the knot its touchdown starts from
    assert cs.touchdowns() == [(2 * PHASE, "FR_FOOT"), (2 * PHASE, "HL_FOOT"), (4 * PHASE, "FL_FOOT"), (4 * PHASE, "HR_FOOT")]
    expected = [np.abs(vidyn.frame_placement(model, traj.q[k], f)[:3, 3] - vidyn.frame_placement(model, q0, f)[:3, 3]).max() for k, f in cs.touchdowns()]
    np.testing.assert_allclose(cs.touchdown_gaps(vi, traj.q), expected, rtol=1e-12, atol=1e-15)
    assert min(expected) > 1e-3
    # the batch engine takes the same steps
    batch = vidyn.batch.rollout(vi, np.stack([q0, q0]), steps=cs.steps)
    np.testing.assert_array_equal(batch.q[1], traj.q)
    np.testing.assert_array_equal(batch.p[0], traj.p)


def test_knot_momenta_are_those_of_motions_the_contacts_allow():
    """RATTLE's projection ends every constrained step (``vidyn_vi`` module
    ``momentum_projection``): at the knot after a step that holds a foot, the velocity
    ``M⁻¹ p`` leaves that foot at rest (measured ≤ 4e-16 m/s), lift-off knots included, so a
    lifted foot starts its swing from rest (without the projection it kept half a step of its
    stance push: 7 cm into an ANYmal swing, 150 rad/s at Talos's ankles)."""
    model, cs, vi, q0 = trot()
    traj = vi.rollout(q0, steps=cs.steps)
    for foot in cs.rows:
        held = cs.holds(foot)
        lift_offs = [k for k in range(1, cs.steps) if held[k - 1] and not held[k]]
        assert lift_offs, foot
        for k in np.flatnonzero(held):
            v = vi.velocity(traj.q[k + 1], traj.p[k + 1])
            speed = np.abs(vidyn.jacobian(model, traj.q[k + 1], foot, "local_world_aligned")[:3] @ v).max()
            assert speed < 1e-12, (foot, k, speed)


@pytest.mark.parametrize("k", [PHASE - 1, PHASE, 2 * PHASE, 3 * PHASE])
def test_linearization_on_switching_steps(k):
    """A, B of a step that lifts feet off (k = 10, 30), that lands them (k = 20) and of the
    stance step before, against central differences on the group: inputs moved with
    ``integrate``, outputs read with ``difference``, h = 1e-6 with Newton at its round-off
    floor (truncation ~h², round-off ~1e-16/h); measured agreement: A within 9e-10, B within
    4e-8 of the largest entry. The
    perturbed steps start off the footholds, which the step then closes: a move of the energy
    check (off) flags, not of the map."""
    model, cs, vi, q0 = trot(max_energy_error=math.inf)
    n = model.nv
    traj = vi.rollout(q0, steps=k + 1)
    a, b = vi.linearize(traj)
    q, p, u = traj.q[k], traj.p[k], np.zeros(n)
    q1, p1 = vi.step(q, p, u, k=k)
    np.testing.assert_allclose(np.concatenate([q1, p1]), np.concatenate([traj.q[k + 1], traj.p[k + 1]]), rtol=0, atol=1e-12)
    fd_a, fd_b = step_jacobians(vi, q, p, u, k)
    np.testing.assert_allclose(a[k], fd_a, rtol=0, atol=1e-7 * np.abs(fd_a).max())
    np.testing.assert_allclose(b[k], fd_b, rtol=0, atol=1e-7 * max(1.0, np.abs(fd_b).max()))


def test_schedules_are_checked():
    model, cs, vi, q0 = trot()
    with pytest.raises(vidyn.InputError, match="past the end of the constraint schedule"):
        vi.rollout(q0, steps=cs.steps + 1)
    with pytest.raises(vidyn.InputError, match="schedule has shape"):
        vidyn.VariationalIntegrator(model, DT, constraints=cs.constraints, schedule=cs.active[:, :5])
    bad = cs.active.astype(float)
    bad[3, 2] = 0.5
    with pytest.raises(vidyn.InputError, match=r"schedule\[3, 2\] is 0.5"):
        vidyn.VariationalIntegrator(model, DT, constraints=cs.constraints, schedule=bad)
    with pytest.raises(vidyn.InputError, match="needs constraints"):
        vidyn.VariationalIntegrator(model, DT, schedule=np.ones((3, 0), dtype=bool))
    contacts = {"a": vidyn.point_contact("FL_FOOT", [0.0, 0.0, 0.0])}
    with pytest.raises(vidyn.InputError, match="'b', which is not one of contacts"):
        vidyn.ContactSchedule.of(contacts, [(3, ["a"]), (2, ["b"])])
    with pytest.raises(vidyn.InputError, match="lasts 0 steps"):
        vidyn.ContactSchedule.of(contacts, [(0, ["a"])])
    with pytest.raises(vidyn.InputError, match="phases is empty"):
        vidyn.ContactSchedule.of(contacts, [])
    # a Fortran-ordered schedule is read in its logical order
    fortran = np.asfortranarray(cs.active)
    again = vidyn.VariationalIntegrator(model, DT, constraints=cs.constraints, schedule=fortran)
    np.testing.assert_array_equal(again.schedule, cs.active)


def test_ilqr_holds_a_posture_through_the_phases():
    """iLQR on the scheduled, constrained VI (first-order derivatives on the group through
    every switch): the twelve leg torques keep solo12 in its standing posture while its feet
    trot in place. Measured: cost 634 -> 0.0134 in 9 iterations, the posture within 2.3e-3 of
    neutral, swing feet within 0.7 mm of their footholds (the free fall of an unactuated trot
    moved them up to 10 mm)."""
    model, cs, vi, q0 = trot()
    n = model.nv
    weights = np.concatenate([np.full(n, 10.0), np.full(n, 0.1)])
    res = vidyn.optim.ilqr(
        vi, q0, steps=cs.steps, Q=np.diag(weights), R=1e-3 * np.eye(12), QN=np.diag(weights), actuated=list(range(6, 18)), max_iterations=30
    )
    assert res.converged
    assert res.cost_history[-1] < 1e-3 * res.cost_history[0]
    assert max(np.abs(model.difference(q0, q)).max() for q in res.trajectory.q) < 1e-2
    for foot in cs.rows:
        foothold = vidyn.frame_placement(model, q0, foot)[:3, 3]
        assert max(np.abs(vidyn.frame_placement(model, q, foot)[:3, 3] - foothold).max() for q in res.trajectory.q) < 2e-3


def test_contact_force_derivatives_on_switching_steps():
    """``multipliers(traj, derivatives=True)``: dλ/dx and dλ/du of the touchdown step (20) and
    the lift-off step (30) against central differences (the step re-solved from a moved knot
    by an integrator whose schedule starts at that step), h = 1e-6, Newton at its round-off
    floor. Measured agreement: 3e-9 of the largest entry. Contacts that do not hold have zero
    rows."""
    model, cs, vi, q0 = trot(max_energy_error=math.inf)
    n, m = model.nv, len(cs.constraints)
    traj = vi.rollout(q0, steps=cs.steps)
    lam, dx, du = vi.multipliers(traj, derivatives=True)
    np.testing.assert_array_equal(lam, vi.multipliers(traj))
    assert dx.shape == (cs.steps, m, 2 * n) and du.shape == (cs.steps, m, n)
    np.testing.assert_array_equal(dx[~cs.active], 0.0)
    for k in (2 * PHASE, 3 * PHASE):
        tail = vidyn.VariationalIntegrator(
            model, DT, constraints=cs.constraints, schedule=cs.active[k:], tolerance=1e-15, max_iterations=60, max_energy_error=math.inf
        )
        q, p = traj.q[k], traj.p[k]

        def lam_of(x: np.ndarray, u: np.ndarray) -> np.ndarray:
            one = tail.rollout(model.integrate(q, x[:n]), p0=p + x[n:], u=u[None, :])
            return tail.multipliers(one)[0]

        np.testing.assert_allclose(lam_of(np.zeros(2 * n), np.zeros(n)), lam[k], rtol=0, atol=1e-9 * np.abs(lam[k]).max())
        h = 1e-6
        fd_x = np.column_stack([(lam_of(h * e, np.zeros(n)) - lam_of(-h * e, np.zeros(n))) / (2 * h) for e in np.eye(2 * n)])
        fd_u = np.column_stack([(lam_of(np.zeros(2 * n), h * e) - lam_of(np.zeros(2 * n), -h * e)) / (2 * h) for e in np.eye(n)])
        scale = max(np.abs(fd_x).max(), np.abs(fd_u).max())
        np.testing.assert_allclose(dx[k], fd_x, rtol=0, atol=1e-7 * scale)
        np.testing.assert_allclose(du[k], fd_u, rtol=0, atol=1e-7 * scale)


def test_a_robot_standing_on_its_feet_stays_put():
    """ANYmal in its standing posture on four point contacts, under the joint torques that hold
    it against gravity (the least-norm ``(τ, f)`` of ``g(q) = Sᵀτ + Σ J_fᵀ f``), 10⁴ steps of
    10 ms. Constant torques alone leave the standing robot an unstable equilibrium (its legs
    fold after 456 steps from round-off), so the joints also get springs about the posture and
    dampers (the VI's own ``stiffness``/``rest``/``damping``, exact in its steps). The feet stay
    at their footholds and the configuration at its start to round-off (measured 2e-16 m and
    2e-15), and the four vertical contact forces sum to the robot's weight on every step
    (measured 5e-14 relative): each step's impulse is its two halves, ``λ_k`` at its start and
    RATTLE's ``μ_{k+1}`` at its end."""
    import warnings

    from vidyn import models

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model = models.example_robot("anymal")
        except (FileNotFoundError, KeyError) as e:
            pytest.skip(str(e))
    q0 = models.reference_configuration(model, "anymal")
    feet = ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]
    n = model.nv
    selection = np.hstack([np.zeros((n - 6, 6)), np.eye(n - 6)])
    jacobians = [vidyn.jacobian(model, q0, f, "local_world_aligned")[:3] for f in feet]
    tau = np.linalg.lstsq(np.vstack([selection, *jacobians]).T, vidyn.gravity(model, q0), rcond=None)[0][: n - 6]
    contacts = [c for f in feet for c in vidyn.point_contact(f, vidyn.frame_placement(model, q0, f)[:3, 3])]
    springs = np.r_[np.zeros(6), np.full(n - 6, 100.0)]
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme="midpoint", constraints=contacts, stiffness=springs, rest=np.r_[np.zeros(6), q0[7:]], damping=springs / 100.0)
    steps = 10_000
    u = np.zeros((steps, n))
    u[:, 6:] = tau
    traj = vi.rollout(q0, u=u)
    footholds = [vidyn.frame_placement(model, q0, f)[:3, 3] for f in feet]
    for q in traj.q[:: steps // 10]:
        assert max(np.abs(vidyn.frame_placement(model, q, f)[:3, 3] - h).max() for f, h in zip(feet, footholds)) < 1e-10
    assert np.abs(traj.q - q0).max() < 1e-12
    lam = vi.multipliers(traj)
    vertical = sum(vidyn.point_contact_forces(lam, vi.dt, 3 * i)[:, 2] for i in range(4))
    weight = model.total_mass * 9.81
    np.testing.assert_allclose(vertical, weight, rtol=1e-9)


def _root_of(spec, i: int) -> int:
    """The insertion index of the root body of body ``i``'s chain."""
    while spec.bodies[i].parent >= 0:
        i = spec.bodies[i].parent
    return i


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_linearization_across_random_schedules_on_random_trees(data):
    """Random trees with a free-flying first body (every other joint kind anywhere), a point
    contact on a random frame held at its start position, a random schedule of four steps
    (touchdowns, stances, lift-offs, flights in any order), every scheme: ``A``, ``B``
    of a random step of the rollout against central differences on the group (as in
    ``test_linearization_on_switching_steps``), and the contact's multipliers zero exactly on
    the steps that do not impose it. The differences are extrapolated (Richardson, h = 2e-4 and
    1e-4, ``tangent_differences.extrapolated_step_jacobians``): plain central differences met
    the constrained Newton solves' noise (about 1.4e-13 in a step's result, growing as 1/h in
    the quotient) and the truncation (∝ h²) at about 1e-7 for the one-interval schemes, and
    not below 7e-7 on Lobatto s = 3 touchdowns, whose gap closes by the first control point
    (truncation 9e-6 / 9e-8 / 8.6e-9 at h = 1e-4 / 1e-5 / 3e-6, then noise); extrapolated, the
    worst over 1500 random cases (30 hypothesis seeds) was 8e-10 (midpoint, trapezoid), 1.8e-9
    (Simpson) and 3.0e-9 (Lobatto s = 3) of the largest entry, for A and B: bound 2e-8."""
    kinds = ("freeflyer", "spherical", "planar", "revolute", "prismatic")
    spec = data.draw(model_specs(max_bodies=4, kinds=kinds, min_frames=1, max_frames=2), label="spec")
    root = dataclasses.replace(spec.bodies[0], kind="freeflyer", axis=None)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    # a body moved by the free-flyer (another root, e.g. a ball joint on the world, cannot
    # move a point in three directions: a degenerate contact, rightly an error)
    under_root = [i for i in range(len(spec.bodies)) if _root_of(spec, i) == 0]
    body = data.draw(st.sampled_from(under_root), label="contact body")
    frame = FrameSpec("contact", body, spec.frames[0].placement)
    model = dataclasses.replace(spec, bodies=(root, *spec.bodies[1:]), frames=(frame,)).build()
    scheme, s = data.draw(st.sampled_from([("midpoint", None), ("trapezoid", None), ("simpson", None), ("lobatto", 3)]), label="scheme")
    holds = data.draw(st.lists(st.booleans(), min_size=4, max_size=4), label="holds")
    k = data.draw(st.integers(0, 3), label="step")
    q0 = model.random_configuration(rng)
    n = model.nv
    cs = vidyn.ContactSchedule.of({"c": vidyn.point_contact("contact", vidyn.frame_placement(model, q0, "contact")[:3, 3])}, [(1, ["c"] if h else []) for h in holds])
    vi = vidyn.VariationalIntegrator(
        model, 0.01, scheme=scheme, s=s, constraints=cs.constraints, schedule=cs.active, tolerance=1e-15, max_iterations=60, max_energy_error=math.inf
    )
    u = rng.uniform(-0.5, 0.5, (4, n))
    traj = vi.rollout(q0, v0=np.zeros(n), u=u)
    a, b = vi.linearize(traj)
    lam = vi.multipliers(traj)
    np.testing.assert_array_equal(lam[~np.array(holds)], 0.0)
    fd_a, fd_b = extrapolated_step_jacobians(vi, traj.q[k], traj.p[k], u[k], k)
    np.testing.assert_allclose(a[k], fd_a, rtol=0, atol=2e-8 * max(1.0, np.abs(fd_a).max()))
    np.testing.assert_allclose(b[k], fd_b, rtol=0, atol=2e-8 * max(1.0, np.abs(fd_b).max()))
