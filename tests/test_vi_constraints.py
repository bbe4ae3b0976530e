"""Holonomic constraints and kinematic joints in the variational integrator (Johnson 2012 §4.5,
§4.7): a four-bar linkage built as an open tree plus a loop closure stays closed at solver
tolerance, a prescribed cart follows its input, the linearisations match central differences,
and bad constraints raise clear errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vidyn

GROUND, CRANK, COUPLER, ROCKER = 2.5, 1.0, 2.0, 1.5


def _rod(builder, parent, name, length, offset):
    placement = np.eye(4)
    placement[:3, 3] = offset
    i = length**2 / 12
    body = builder.add_body(
        parent, name, "revolute", placement=placement, mass=1.0, com=[0, 0, -length / 2], inertia=np.diag([i, i, 1e-3]), axis=[0, 1, 0]
    )
    end = np.eye(4)
    end[2, 3] = -length
    builder.add_frame(name + "_end", body, end)
    return body


def four_bar() -> vidyn.Model:
    b = vidyn.ModelBuilder("four_bar")
    crank = _rod(b, None, "crank", CRANK, [0, 0, 0])
    _rod(b, crank, "coupler", COUPLER, [0, 0, -CRANK])
    _rod(b, None, "rocker", ROCKER, [GROUND, 0, 0])
    return b.build()


def closure(normals=((1, 0, 0), (0, 0, 1))):
    """The coupler's end on two planes through the rocker's end (normals in the rocker frame)."""
    return [vidyn.PointOnPlane("rocker_end", [0, 0, 0], n, "coupler_end", [0, 0, 0]) for n in normals]


def closed_configuration(model: vidyn.Model, t1: float) -> np.ndarray:
    """Crank angle t1, rocker angle by bisection, coupler angle from the gap."""
    a = np.array([-CRANK * np.sin(t1), 0, -CRANK * np.cos(t1)])

    def end(t3):
        return np.array([GROUND - ROCKER * np.sin(t3), 0, -ROCKER * np.cos(t3)])

    def gap(t3):
        return np.linalg.norm(end(t3) - a) - COUPLER

    lo, hi = -0.2, 1.5
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if gap(lo) * gap(mid) <= 0 else (mid, hi)
    t3 = 0.5 * (lo + hi)
    d = end(t3) - a
    q = np.zeros(3)
    q[model.joint_names.index("crank")] = t1
    q[model.joint_names.index("coupler")] = np.arctan2(-d[0], -d[2]) - t1
    q[model.joint_names.index("rocker")] = t3
    return q


SCHEMES = [("midpoint", None), ("trapezoid", None), ("simpson", None), ("lobatto", 3)]


@settings(deadline=None)
@given(t1=st.floats(0.1, 0.6), scheme=st.sampled_from(SCHEMES))
def test_loop_stays_closed(t1, scheme):
    """Every scheme keeps the loop closed at every knot (Simpson and Lobatto at every control
    point too, module ``constrained`` of vidyn-vi)."""
    model = four_bar()
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme=scheme[0], s=scheme[1], constraints=closure())
    q0 = closed_configuration(model, t1)
    assert np.abs(vi.constraint_values(q0)).max() < 1e-12
    traj = vi.rollout(q0, np.zeros(3), steps=500)
    h = np.array([vi.constraint_values(q) for q in traj.q])
    assert np.abs(h).max() < 1e-11
    # it moves: the rest position is near t1 = -0.23, so gravity swings it from these starts
    assert np.ptp(traj.q[:, 0]) > 0.05


@pytest.mark.parametrize("scheme", SCHEMES)
def test_constrained_linearisation_matches_central_differences(scheme):
    model = four_bar()
    vi = vidyn.VariationalIntegrator(model, 0.02, scheme=scheme[0], s=scheme[1], constraints=closure(), damping=np.full(3, 0.1))
    q = closed_configuration(model, 0.3)
    p = np.array([0.2, -0.1, 0.3])
    u = np.array([0.1, 0.0, -0.2])
    (q1, p1) = vi.step(q, p, u)
    a, b = vi.linearize(np.stack([q, q1]), np.stack([p, p1]), u[None])
    x0 = np.concatenate([q, p])
    # h = 1e-6: truncation O(h²) ≈ 1e-12, round-off ≈ 1e-16 / 1e-6 = 1e-10
    h = 1e-6
    fd = np.zeros((6, 9))
    for k in range(9):
        e = np.zeros(9)
        e[k] = h
        plus = np.concatenate(vi.step(*np.split(x0 + e[:6], 2), u + e[6:]))
        minus = np.concatenate(vi.step(*np.split(x0 - e[:6], 2), u - e[6:]))
        fd[:, k] = (plus - minus) / (2 * h)
    np.testing.assert_allclose(np.hstack([a[0], b[0]]), fd, atol=1e-7, rtol=1e-6)


def test_distance_constraint_holds():
    """A double pendulum whose tip is tethered to a world point by a rigid rod."""
    model = vidyn.models.pendulum_chain(2)
    q0 = np.array([0.4, -0.3])
    tip = vidyn.frame_placement(model, q0, "tip")[:3, 3]
    anchor = tip + np.array([1.0, 0.0, 0.5])
    tether = vidyn.Distance("world", anchor, "tip", [0, 0, 0], float(np.linalg.norm(tip - anchor)))
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme="midpoint", constraints=[tether])
    traj = vi.rollout(q0, np.zeros(2), steps=300)
    assert np.abs([vi.constraint_values(q) for q in traj.q]).max() < 1e-11


def test_constraint_errors():
    model = four_bar()
    with pytest.raises(vidyn.UnknownNameError, match="nowhere"):
        vidyn.VariationalIntegrator(model, 0.01, scheme="midpoint", constraints=[vidyn.PointOnPlane("nowhere", [0, 0, 0], [1, 0, 0], None, [0, 0, 0])])
    with pytest.raises(vidyn.InputError, match="PointOnPlane, vidyn.Distance or vidyn.Perpendicular"):
        vidyn.VariationalIntegrator(model, 0.01, constraints=["not a constraint"])
    with pytest.raises(vidyn.InputError, match="one-interval"):
        vidyn.VariationalIntegrator(model, 0.01, scheme="simpson", kinematic=["crank"])
    with pytest.raises(vidyn.InputError, match="length"):
        vidyn.VariationalIntegrator(model, 0.01, constraints=[vidyn.Distance(None, [0, 0, 0], "crank_end", [0, 0, 0], 0.0)])
    with pytest.raises(vidyn.InputError, match="shape"):
        vidyn.PointOnPlane(None, [0, 0], [1, 0, 0], "crank_end", [0, 0, 0])
    redundant = vidyn.VariationalIntegrator(model, 0.01, scheme="midpoint", constraints=closure(((1, 0, 0), (0, 0, 1), (0, 1, 0))))
    with pytest.raises(vidyn.ConvergenceError, match="redundant"):
        redundant.step(closed_configuration(model, 0.2), np.zeros(3))


def test_kinematic_cart_follows_its_input_and_linearises_exactly():
    """The cart of a cart-pole prescribed (Johnson 2012 §4.7): q[cart] follows u[cart], p[cart]
    is its velocity, and A, B (with B's cart column = d/d rho_{k+1}) match central differences."""
    model = vidyn.models.cartpole()
    cart = model.joint_names.index("cart")
    vi = vidyn.VariationalIntegrator(model, 0.02, scheme="midpoint", kinematic=["cart"])
    assert list(vi.kinematic) == [j == cart for j in range(2)]
    q, p = np.array([0.1, 0.4]), np.array([0.3, -0.2])
    u = np.array([0.0, 0.0])
    u[cart] = q[cart] + 0.02 * 0.5
    q1, p1 = vi.step(q, p, u)
    assert q1[cart] == pytest.approx(u[cart], abs=1e-15)
    assert p1[cart] == pytest.approx((u[cart] - q[cart]) / 0.02, rel=1e-12)
    a, b = vi.linearize(np.stack([q, q1]), np.stack([p, p1]), u[None])
    h = 1e-6  # central differences of the solved step, as in the other FD tests
    x0 = np.concatenate([q, p, u])
    fd = np.zeros((4, 6))
    for k in range(6):
        e = np.zeros(6)
        e[k] = h
        plus, minus = x0 + e, x0 - e
        fd[:, k] = (np.concatenate(vi.step(plus[:2], plus[2:4], plus[4:])) - np.concatenate(vi.step(minus[:2], minus[2:4], minus[4:]))) / (2 * h)
    np.testing.assert_allclose(np.hstack([a[0], b[0]]), fd, atol=1e-7, rtol=1e-6)
    with pytest.raises(vidyn.UnknownNameError):
        vidyn.VariationalIntegrator(model, 0.02, scheme="midpoint", kinematic=["wheel"])
    with pytest.raises(vidyn.InputError, match="every joint"):
        vidyn.VariationalIntegrator(model, 0.02, scheme="midpoint", kinematic=["cart", "pole"])


@pytest.mark.parametrize("scheme", [("simpson", None), ("lobatto", 3)])
def test_multistage_energy_stays_bounded_over_long_runs(scheme):
    """10⁵ steps (1000 s) of the undamped four-bar swinging under gravity with Simpson and
    Lobatto s = 3 (the loop closed at every control point): the knot energy (``energy``, the
    motion the constraints allow) ranges over 1.3e-8 (Simpson) and 6e-9 (Lobatto) J, without
    a trend (the first and last tenths' means differ by 4e-9 and 5e-9), where the one-interval
    schemes' range over 7e-5 (midpoint) and 6e-4 (trapezoid); the loop stays closed to 1e-15."""
    model = four_bar()
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme=scheme[0], s=scheme[1], constraints=closure(), damping=np.zeros(3))
    traj = vi.rollout(closed_configuration(model, 0.3), np.zeros(3), steps=100_000)
    e = np.asarray(vi.energy(traj.q, traj.p))
    tenth = len(e) // 10
    assert np.ptp(e) < 1e-7
    assert abs(e[-tenth:].mean() - e[:tenth].mean()) < 5e-8
    assert max(np.abs(vi.constraint_values(q)).max() for q in traj.q[::997]) < 1e-13
    assert np.ptp(traj.q[:, 0]) > 0.5  # it swings
