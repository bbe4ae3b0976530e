"""Contacts as holonomic constraints of the variational integrator (issue 24, item 1 in part):
``vidyn.point_contact`` (a frame's origin held at a world point) and ``vidyn.frame_contact``
(a frame's placement held: three planes and three ``Perpendicular`` axis pairs), on floating
bases stepping on their Lie groups.

* a floating UR5 whose base is held by a 6-D frame contact moves as the fixed-base UR5: the
  same joint trajectory to the Newton tolerance, the base still to round-off;
* solo12 standing on four point contacts sags under gravity with its feet fixed to
  round-off, and its exact linearisation with the contacts matches central differences;
* a redundant contact set (four 6-D feet on solo12) is a clear error, not a wrong motion.
"""

from __future__ import annotations

import numpy as np
import pytest

import vidyn
from reference_motion import solo12
from vidyn import models


def ur5(floating: bool) -> vidyn.Model:
    try:
        return models.example_robot("ur5", floating_base=floating)
    except (FileNotFoundError, KeyError) as e:  # example-robot-data missing
        pytest.skip(str(e))


@pytest.mark.parametrize("scheme", [("midpoint", None), ("trapezoid", None), ("simpson", None), ("lobatto", 3)])
def test_a_base_held_by_a_frame_contact_moves_as_a_fixed_base(scheme):
    """Measured over 100 steps of 10 ms: joints within 1.8e-11 (midpoint), 7.6e-11
    (trapezoid), 1.4e-11 (Simpson, Lobatto s = 3) of the fixed-base arm, momenta within 8e-11,
    the base within 1e-24. Simpson and Lobatto hold the base at every control point of a step,
    so the arm's steps are the fixed-base ones there too."""
    floating, fixed = ur5(True), ur5(False)
    q0 = floating.neutral()
    q0[7:] = [0.3, -1.0, 1.2, 0.2, 0.5, -0.3]
    contact = vidyn.frame_contact("base_link", vidyn.frame_placement(floating, q0, "base_link"))
    assert len(contact) == 6
    held = vidyn.VariationalIntegrator(floating, 0.01, scheme=scheme[0], s=scheme[1], constraints=contact, damping=np.zeros(floating.nv))
    arm = vidyn.VariationalIntegrator(fixed, 0.01, scheme=scheme[0], s=scheme[1], damping=np.zeros(fixed.nv))
    a, b = held.rollout(q0, steps=100), arm.rollout(q0[7:], steps=100)
    assert np.abs(a.q[:, 7:] - b.q).max() < 1e-9
    assert np.abs(a.p[:, 6:] - b.p).max() < 1e-9
    assert np.abs(a.q[:, :7] - q0[:7]).max() < 1e-14


@pytest.mark.parametrize("scheme", [("trapezoid", None), ("simpson", None), ("lobatto", 3)])
def test_a_quadruped_on_four_point_contacts(scheme):
    """solo12 from rest on its four feet, no torques: the legs fold (the base drops by about
    0.2 m in 0.5 s) while every foot stays at its point (measured drift 1.7e-14 m); A, B with
    the twelve contact constraints against central differences on the group (h = 1e-6, Newton
    at its round-off floor). Simpson and Lobatto hold the feet at every control point, with the
    interior impulses in the linearisation (module ``constrained`` of vidyn-vi)."""
    model = solo12()
    q0 = model.neutral()
    feet = [f for f in model.frame_names if f.endswith("FOOT")]
    assert len(feet) == 4
    contacts = [c for f in feet for c in vidyn.point_contact(f, vidyn.frame_placement(model, q0, f)[:3, 3])]
    vi = vidyn.VariationalIntegrator(model, 0.005, scheme=scheme[0], s=scheme[1], constraints=contacts, tolerance=1e-15, max_iterations=60)
    traj = vi.rollout(q0, steps=100)
    for f in feet:
        start = vidyn.frame_placement(model, q0, f)[:3, 3]
        assert max(np.abs(vidyn.frame_placement(model, q, f)[:3, 3] - start).max() for q in traj.q) < 1e-12
    assert traj.q[-1][2] < traj.q[0][2] - 0.1
    k, n = 50, model.nv
    q, p, u = traj.q[k], traj.p[k], np.zeros(n)
    a, b = vi.linearize(traj.q[k : k + 2], traj.p[k : k + 2], u[None, :])
    q1, p1 = vi.step(q, p, u)

    def f(x: np.ndarray, du: np.ndarray) -> np.ndarray:
        qn, pn = vi.step(model.integrate(q, x[:n]), p + x[n:], u + du)
        return np.concatenate([model.difference(q1, qn), pn - p1])

    h = 1e-6
    fd_a = np.column_stack([(f(h * e, np.zeros(n)) - f(-h * e, np.zeros(n))) / (2 * h) for e in np.eye(2 * n)])
    fd_b = np.column_stack([(f(np.zeros(2 * n), h * e) - f(np.zeros(2 * n), -h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(a[0], fd_a, rtol=0, atol=1e-7 * np.abs(fd_a).max())
    np.testing.assert_allclose(b[0], fd_b, rtol=0, atol=1e-7 * max(1.0, np.abs(fd_b).max()))


def test_redundant_contacts_are_an_error():
    """Four 6-D feet hold solo12 with 24 constraints on 18 degrees of freedom: the step's KKT
    system is singular, and says so."""
    model = solo12()
    q0 = model.neutral()
    feet = [f for f in model.frame_names if f.endswith("FOOT")]
    contacts = [c for f in feet for c in vidyn.frame_contact(f, vidyn.frame_placement(model, q0, f))]
    vi = vidyn.VariationalIntegrator(model, 0.005, constraints=contacts)
    with pytest.raises(vidyn.ConvergenceError, match="redundant or degenerate"):
        vi.rollout(q0, steps=3)


def test_contact_helpers_check_their_inputs():
    with pytest.raises(vidyn.InputError, match="4, 4"):
        vidyn.frame_contact("FL_FOOT", np.eye(3))
    with pytest.raises(vidyn.InputError, match="axis"):
        vidyn.VariationalIntegrator(solo12(), 0.01, constraints=[vidyn.Perpendicular(None, [0, 0, 0], "FL_FOOT", [1, 0, 0])])


def test_a_hanging_body_is_held_by_its_weight():
    """A box (1.5 kg) held at its centre of mass by a point contact, at rest with gravity: the
    contact's mean force over every step is its weight, upward, to round-off (its torque
    about the contact is zero, so nothing moves): the step's impulse ``λ_k + μ_{k+1}``, half
    at each end (RATTLE's projection gives the second half; the knot momenta stay zero). The
    multipliers come back one row per step."""
    b = vidyn.ModelBuilder("hanging box")
    box = b.add_body(None, "box", "freeflyer", mass=1.5, com=[0.0, 0.0, 0.0], inertia=np.diag([0.02, 0.03, 0.04]))
    b.add_frame("hook", box, np.eye(4))
    model = b.build()
    dt = 0.01
    vi = vidyn.VariationalIntegrator(model, dt, constraints=vidyn.point_contact("hook", [0.0, 0.0, 0.0]))
    traj = vi.rollout(model.neutral(), steps=20)
    lam = vi.multipliers(traj)
    assert lam.shape == (20, 3)
    force = vidyn.point_contact_forces(lam, dt)
    weight = np.array([0.0, 0.0, 1.5 * 9.81])
    np.testing.assert_allclose(force, np.tile(weight, (20, 1)), rtol=0, atol=1e-9)
    np.testing.assert_allclose(traj.p, 0.0, rtol=0, atol=1e-12)
    assert np.abs(traj.q - model.neutral()).max() < 1e-12
    # the same from arrays (an optimiser's states, say), with and without derivatives
    np.testing.assert_array_equal(vi.multipliers(traj.q, p=traj.p, u=traj.u), lam)
    for a, b in zip(vi.multipliers(traj.q, True, p=traj.p, u=traj.u), vi.multipliers(traj, derivatives=True)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(vidyn.InputError, match="multipliers takes a Trajectory, or q"):
        vi.multipliers(traj.q, p=traj.p)
    with pytest.raises(vidyn.InputError, match="expected N\\+1, N\\+1 and N"):
        vi.multipliers(traj.q, p=traj.p, u=traj.u[:-1])
    free = vidyn.VariationalIntegrator(model, dt)
    assert free.multipliers(free.rollout(model.neutral(), steps=3)).shape == (3, 0)
    with pytest.raises(vidyn.InputError, match="another integrator"):
        free.multipliers(traj)


def _box_with_sole() -> vidyn.Model:
    b = vidyn.ModelBuilder("box")
    box = b.add_body(None, "box", "freeflyer", mass=1.5, com=[0.0, 0.0, 0.0], inertia=np.diag([0.02, 0.03, 0.04]))
    b.add_frame("sole", box, np.eye(4))
    return b.build()


def _turned(model: vidyn.Model, degrees: float) -> np.ndarray:
    q = model.neutral()
    half = np.radians(degrees) / 2
    q[3:7] = [0.0, 0.0, np.sin(half), np.cos(half)]
    return q


def _angle(model: vidyn.Model, q: np.ndarray) -> float:
    rotation = vidyn.frame_placement(model, q, "sole")[:3, :3]
    return float(np.degrees(np.arccos(np.clip((np.trace(rotation) - 1) / 2, -1, 1))))


@pytest.mark.parametrize("degrees", [150.0, 170.0])
def test_a_frame_contact_refuses_a_mirror_image(degrees):
    """A box whose sole starts turned about z by 150° or 170° from a 6-D contact's target:
    the step's Newton converges to the nearest solution of the six equalities, the sole
    turned by 180° (measured: exactly 180° for both). Plain perpendicular pairs return that
    mirror image as a motion; ``frame_contact``'s pairs carry aligned axes and raise."""
    model = _box_with_sole()
    q0, target = _turned(model, degrees), np.eye(4)
    plain = [c for c in vidyn.point_contact("sole", target[:3, 3])]
    plain += [vidyn.Perpendicular(None, target[:3, j], "sole", np.eye(3)[i]) for i, j in ((0, 1), (1, 2), (2, 0))]
    q1, _ = vidyn.VariationalIntegrator(model, 0.01, constraints=plain).step(q0, np.zeros(6), np.zeros(6))
    assert abs(_angle(model, q1) - 180.0) < 1e-6
    vi = vidyn.VariationalIntegrator(model, 0.01, constraints=vidyn.frame_contact("sole", target))
    with pytest.raises(vidyn.ConvergenceError, match=r"mirror image.*constraint 3.*180°"):
        vi.step(q0, np.zeros(6), np.zeros(6))
    with pytest.raises(vidyn.ConvergenceError, match="mirror image"):
        vi.rollout(q0, steps=2)


@pytest.mark.parametrize("degrees", [20.0, 60.0, 100.0])
def test_a_frame_contact_turns_a_frame_onto_its_target(degrees):
    """From up to 100° away the same step lands on the target orientation itself (0° to
    round-off), and the aligned axes let it pass; they survive pickling."""
    model = _box_with_sole()
    vi = vidyn.VariationalIntegrator(model, 0.01, constraints=vidyn.frame_contact("sole", np.eye(4)))
    q1, _ = vi.step(_turned(model, degrees), np.zeros(6), np.zeros(6))
    assert _angle(model, q1) < 1e-6
    again = vidyn.VariationalIntegrator.from_bytes(vi.to_bytes())
    assert again == vi
    with pytest.raises(vidyn.ConvergenceError, match="mirror image"):
        again.step(_turned(model, 170.0), np.zeros(6), np.zeros(6))


def test_perpendicular_checks_its_aligned_axes():
    with pytest.raises(vidyn.InputError, match="aligned"):
        vidyn.Perpendicular(None, [1, 0, 0], "sole", [0, 1, 0], aligned=([1, 0, 0], [0, 0]))
    with pytest.raises(vidyn.InputError, match=r"aligned\[0\] is \[0, 0, 0\], expected a non-zero direction"):
        vidyn.Perpendicular(None, [1, 0, 0], "sole", [0, 1, 0], aligned=([0, 0, 0], [1, 0, 0]))
    assert "aligned=" in repr(vidyn.Perpendicular(None, [1, 0, 0], "sole", [0, 1, 0], aligned=([1, 0, 0], [1, 0, 0])))
