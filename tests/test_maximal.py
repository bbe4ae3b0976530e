"""Maximal-coordinate variational integrator (Brüdigam & Manchester 2020; Brüdigam et al.
2023) from Python: agreement with the minimal-coordinate VI as dt -> 0, loop closures kept at
solver tolerance, unit quaternions, bounded energy, and clear errors.

The Rust crate (``rust/maximal``) checks the Newton matrix against finite differences, the
graph solver against dense LU and the discrete momenta; these tests check the Python layer
and a few end-to-end properties through it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vidyn
from reference_motion import rotation


def cylinder_chain(n: int, planar: bool = True) -> vidyn.Model:
    """n solid cylinders (1 kg, 1 m, radius 0.05) hanging along -z on revolute joints."""
    b = vidyn.ModelBuilder("cylinder_chain")
    r, length = 0.05, 1.0
    it = (3 * r * r + length * length) / 12
    inertia = np.diag([it, it, 0.5 * r * r])
    parent = None
    for k in range(n):
        axis = [0.0, 1.0, 0.0] if planar or k % 2 == 0 else [1.0, 0.0, 0.0]
        placement = np.eye(4)
        if k > 0:
            placement[2, 3] = -length
        parent = b.add_body(parent, f"joint{k + 1}", "revolute", placement, 1.0, [0, 0, -length / 2], inertia, axis)
    return b.build()


def tip(model: vidyn.Model, q: np.ndarray) -> np.ndarray:
    kin = vidyn.forward_kinematics(model, q, np.zeros(model.nv), np.zeros(model.nv))
    last = kin.placements[-1]
    return last[:3, :3] @ np.array([0.0, 0.0, -1.0]) + last[:3, 3]


def four_bar(dt: float = 0.01) -> tuple[vidyn.MaximalIntegrator, np.ndarray]:
    model = cylinder_chain(3)
    q0 = np.array([0.9, -1.4, -0.6])
    vi = vidyn.MaximalIntegrator(model, dt)
    ground = np.eye(4)
    ground[:3, 3] = tip(model, q0)
    at_tip = np.eye(4)
    at_tip[2, 3] = -1.0
    j = vi.add_loop_closure("closure", "point_on_line", None, "joint3", ground, at_tip, axis=[0, 1, 0])
    assert j == 3
    return vi, q0


def test_rollout_shapes_and_unit_quaternions():
    model = cylinder_chain(4, planar=False)
    vi = vidyn.MaximalIntegrator(model, 0.01)
    assert (vi.nbodies, vi.njoints, vi.nloops, vi.fill) == (4, 4, 0, 0)
    traj = vi.rollout(np.array([0.3, -0.2, 0.5, 0.1]), np.array([0.5, 0.0, -0.3, 0.2]), np.zeros((200, 4)))
    assert len(traj) == traj.steps == 200
    assert traj.q.shape == (201, 4)
    assert traj.positions.shape == traj.linear_velocities.shape == traj.angular_velocities.shape == (201, 4, 3)
    assert traj.quaternions.shape == (201, 4, 4)
    assert traj.energy.shape == traj.constraint_violation.shape == (201,)
    assert traj.iterations.shape == (200,)
    np.testing.assert_allclose(traj.q[0], [0.3, -0.2, 0.5, 0.1], atol=1e-12)
    # exactly unit-norm updates: only round-off accumulates (~ε per step)
    assert np.abs(np.linalg.norm(traj.quaternions, axis=2) - 1).max() < 200 * np.finfo(float).eps
    assert traj.constraint_violation.max() <= 1e-12


def test_converges_to_the_minimal_coordinate_integrator_at_first_order():
    model = cylinder_chain(2, planar=False)
    q0, v0, t_end = np.array([0.6, -0.4]), np.array([0.5, -0.3]), 0.5
    ref = vidyn.VariationalIntegrator(model, 2.5e-4, scheme="simpson").rollout(q0, v0, steps=2000).q[-1]
    errors = []
    for dt in (0.004, 0.002, 0.001):
        traj = vidyn.MaximalIntegrator(model, dt).rollout(q0, v0, steps=round(t_end / dt))
        errors.append(np.abs(traj.q[-1] - ref).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((orders > 0.95) & (orders < 1.05)), (errors, orders)


def test_four_bar_loop_stays_closed_and_energy_does_not_drift():
    vi, q0 = four_bar()
    assert vi.nloops == 1
    traj = vi.rollout(q0, steps=3000)
    assert traj.constraint_violation.max() <= 1e-12
    e = traj.energy
    # first-order scheme: the energy oscillates by O(dt) around a constant level
    assert abs(e[-500:].mean() - e[:500].mean()) < 0.1 * np.ptp(e)


@settings(max_examples=10)
@given(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0), st.integers(0, 2**32 - 1))
def test_loop_closure_holds_for_any_start_velocity_along_the_mechanism(a, b, seed):
    """Any initial joint velocity of the open tree: the past knot it implies may violate the
    loop closure, but every knot the integrator produces satisfies it to solver tolerance."""
    vi, q0 = four_bar()
    rng = np.random.default_rng(seed)
    v0 = np.array([a, b, rng.uniform(-1, 1)])
    traj = vi.rollout(q0, v0, steps=50)
    assert traj.constraint_violation.max() <= 1e-12


def test_errors_are_clear():
    with pytest.raises(vidyn.ModelError, match="positive-definite inertia"):
        vidyn.MaximalIntegrator(vidyn.models.pendulum_chain(2), 0.01)
    model = cylinder_chain(2)
    with pytest.raises(vidyn.InputError):
        vidyn.MaximalIntegrator(model, -0.1)
    vi = vidyn.MaximalIntegrator(model, 0.01)
    with pytest.raises(vidyn.InputError):
        vi.rollout(np.zeros(3), steps=2)
    with pytest.raises(vidyn.InputError):
        vi.rollout(np.zeros(2), u=np.zeros((3, 5)))
    with pytest.raises(vidyn.InputError):
        vi.rollout(np.zeros(2))
    with pytest.raises(vidyn.UnknownNameError):
        vi.add_loop_closure("c", "spherical", None, "nope")
    with pytest.raises(vidyn.InputError, match="needs an axis"):
        vi.add_loop_closure("c", "revolute", None, "joint2")
    with pytest.raises(vidyn.InputError, match="unknown joint kind"):
        vi.add_loop_closure("c", "helical", None, "joint2", axis=[0, 0, 1])
    # a redundant planar loop: a singular pivot, named, not a silent regulariser
    vi, q0 = four_bar()
    model = cylinder_chain(3)
    red = vidyn.MaximalIntegrator(model, 0.01)
    ground = np.eye(4)
    ground[:3, 3] = tip(model, q0)
    at_tip = np.eye(4)
    at_tip[2, 3] = -1.0
    red.add_loop_closure("closure", "revolute", None, "joint3", ground, at_tip, axis=[0, 1, 0])
    with pytest.raises(vidyn.ModelError, match="singular pivot at joint 'closure'"):
        red.rollout(q0, steps=3)


def test_linearize_matches_central_differences_of_a_rollout():
    """B of the first step against central differences of rollouts in the first control
    (knot-1 linear velocities; A is checked column by column in the Rust tests)."""
    model = cylinder_chain(2, planar=False)
    vi = vidyn.MaximalIntegrator(model, 0.01, tolerance=1e-14, max_iterations=50)
    q0, v0 = np.array([0.4, -0.3]), np.array([0.2, 0.5])
    u = np.array([[0.3, -0.2], [0.1, 0.4]])
    traj = vi.rollout(q0, v0, u)
    a, b = vi.linearize(traj)
    assert a.shape == (2, 24, 24) and b.shape == (2, 24, 2)
    # step 0 only depends on u[0]; its effect on the knot-1 velocities of both bodies
    h = 1e-5
    for c in range(2):
        up, um = u.copy(), u.copy()
        up[0, c] += h
        um[0, c] -= h
        vp = vi.rollout(q0, v0, up).linear_velocities[1]
        vm = vi.rollout(q0, v0, um).linear_velocities[1]
        fd = (vp - vm) / (2 * h)
        np.testing.assert_allclose(b[0][[6, 7, 8, 18, 19, 20], c], fd.ravel(), atol=1e-6)


def test_linearize_with_springs_dampers_limits_and_contacts():
    model = cylinder_chain(2)
    vi = vidyn.MaximalIntegrator(model, 0.01, stiffness=[1.0, 0.0], damping=[0.1, 0.2])
    vi.add_joint_limit("joint1", -0.5, 0.5)
    vi.add_contact("tip", "joint2", [0.0, 0.0, -1.0], radius=0.05, offset=-3.0)
    a, b = vi.linearize(vi.rollout(np.zeros(2), np.array([0.3, -0.2]), steps=3))
    assert a.shape == (3, 24, 24) and b.shape == (3, 24, 2)
    assert np.isfinite(a).all() and np.isfinite(b).all()


def test_linearize_minimal_matches_central_differences():
    model = cylinder_chain(3, planar=False)
    vi = vidyn.MaximalIntegrator(model, 0.02, tolerance=1e-14, max_iterations=50)
    q, v, u = np.array([0.3, -0.4, 0.6]), np.array([0.5, 0.1, -0.8]), np.array([0.2, -0.1, 0.3])
    qn, vn, a, b = vi.linearize_minimal(q, v, u)
    assert qn.shape == vn.shape == (3,) and a.shape == (6, 6) and b.shape == (6, 3)
    h = 1e-5  # truncation ~h² / dt ≈ 1e-8, solver noise ~1e-14 / h; tolerance 1e-6
    for c in range(3):
        e = np.zeros(3)
        e[c] = h
        fd_q = (np.concatenate(vi.linearize_minimal(q + e, v, u)[:2]) - np.concatenate(vi.linearize_minimal(q - e, v, u)[:2])) / (2 * h)
        fd_u = (np.concatenate(vi.linearize_minimal(q, v, u + e)[:2]) - np.concatenate(vi.linearize_minimal(q, v, u - e)[:2])) / (2 * h)
        np.testing.assert_allclose(a[:, c], fd_q, atol=1e-6 * max(1.0, np.abs(fd_q).max()))
        np.testing.assert_allclose(b[:, c], fd_u, atol=1e-6 * max(1.0, np.abs(fd_u).max()))


def test_box_dropped_on_the_ground_rests_without_penetration():
    """Brüdigam et al. 2023 §5.1(d): a 1 kg cube of edge 0.5 m dropped from 0.4 m, dt = 0.01."""
    b = vidyn.ModelBuilder("box")
    a = 0.5
    b.add_body(None, "root", "freeflyer", mass=1.0, inertia=np.eye(3) * a * a / 6)
    model = b.build()
    vi = vidyn.MaximalIntegrator(model, 0.01)
    for k, corner in enumerate(np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T * a / 2):
        assert vi.add_contact(f"corner{k}", "root", corner, friction=0.5) == k
    q0 = np.array([0.0, 0.0, 0.25 + 0.4, 0.0, 0.0, 0.0, 1.0])
    traj = vi.rollout(q0, np.array([0.3, 0.0, 0.0, 0.0, 0.4, 0.0]), steps=300)
    assert abs(traj.positions[-1, 0, 2] - 0.25) < 1e-6
    assert np.abs(traj.linear_velocities[-1]).max() < 1e-6
    # lowest corner height over the whole drop (rotation from the quaternions)
    corners = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T * a / 2
    lowest = min((traj.positions[k, 0] + corners @ rotation(traj.quaternions[k, 0]).T)[:, 2].min() for k in range(traj.steps + 1))
    assert lowest > -1e-9, lowest


def test_joint_limits_are_never_exceeded():
    vi = vidyn.MaximalIntegrator(cylinder_chain(2), 0.01)
    assert vi.add_joint_limit("joint1", -0.3, 0.5) == 0
    traj = vi.rollout(np.zeros(2), np.array([3.0, 0.0]), steps=300)
    assert traj.q[:, 0].max() <= 0.5 + 1e-9 and traj.q[:, 0].min() >= -0.3 - 1e-9
    assert traj.q[:, 0].max() > 0.5 - 1e-6  # the limit was reached
    with pytest.raises(vidyn.InputError, match="lower < upper"):
        vi.add_joint_limit("joint2", 0.2, -0.2)
