"""The isotropic (second-order cone) friction model of the maximal-coordinate integrator's
contacts, from Python: Coulomb's sliding distance in every direction, sticking below the
friction limit, no penetration, exact derivatives, clear errors, pickling.

The Rust crate (``rust/maximal/src/linearize/tests.rs``) checks the linearisation column by column
against central differences of the relaxed interior-point system; these tests check the
Python layer and the same physics through it.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import vidyn
from reference_motion import rotation

CF, G, A = 0.3, 9.81, 0.5  # friction coefficient, gravity, box edge


def box(friction_model: str, dt: float = 0.001, **kwargs) -> vidyn.MaximalIntegrator:
    """A 1 kg cube of edge 0.5 m on its four bottom corners (free-flyer root)."""
    b = vidyn.ModelBuilder("box")
    b.add_body(None, "root", "freeflyer", mass=1.0, inertia=np.eye(3) * A * A / 6)
    vi = vidyn.MaximalIntegrator(b.build(), dt, **kwargs)
    for k, (sx, sy) in enumerate([(-1, -1), (1, -1), (-1, 1), (1, 1)]):
        corner = np.array([sx, sy, -1.0]) * A / 2
        assert vi.add_contact(f"corner{k}", "root", corner, friction=CF, friction_model=friction_model) == k
    return vi


def slide(vi: vidyn.MaximalIntegrator, heading_deg: float, v0: float = 1.0, steps: int = 600) -> vidyn.MaximalTrajectory:
    th = np.radians(heading_deg)
    q0 = np.array([0.0, 0.0, A / 2, 0.0, 0.0, 0.0, 1.0])
    return vi.rollout(q0, np.array([v0 * np.cos(th), v0 * np.sin(th), 0.0, 0.0, 0.0, 0.0]), steps=steps)


def lowest_corner(traj: vidyn.MaximalTrajectory) -> float:
    """The lowest bottom corner over the trajectory (rotations from the quaternions)."""
    corners = np.array([[sx, sy, -1.0] for sx in (-1, 1) for sy in (-1, 1)]) * A / 2
    return float(min((traj.positions[k, 0] + corners @ rotation(traj.quaternions[k, 0]).T)[:, 2].min() for k in range(traj.steps + 1)))


@pytest.mark.parametrize("heading", [0.0, 45.0, 30.0])
def test_cone_slides_coulombs_distance_in_every_direction(heading):
    """Coulomb: deceleration c_f g along the motion, distance v0²/(2 c_f g) = 0.16989 m."""
    traj = slide(box("cone"), heading)
    d = traj.positions[-1, 0] - traj.positions[0, 0]
    th = np.radians(heading)
    along, across = d[0] * np.cos(th) + d[1] * np.sin(th), -d[0] * np.sin(th) + d[1] * np.cos(th)
    expected = 1.0 / (2 * CF * G)
    assert np.linalg.norm(traj.linear_velocities[-1]) < 1e-6
    # first order in dt: one step of travel (v0 dt = 1e-3 m) is the scale of the error
    assert abs(along - expected) < 2e-3, (along, expected)
    assert abs(across) < 1e-7
    assert lowest_corner(traj) > -1e-9


def test_cone_is_isotropic_where_the_pyramid_is_not():
    cone = [slide(box("cone"), h).positions[-1, 0, :2] for h in (0.0, 45.0)]
    assert abs(np.linalg.norm(cone[0]) - np.linalg.norm(cone[1])) < 1e-6
    # the pyramid is √2 too strong along the diagonal... and slides √2 farther there
    pyramid = [np.linalg.norm(slide(box("pyramid"), h).positions[-1, 0, :2]) for h in (0.0, 45.0)]
    assert abs(pyramid[0] - np.linalg.norm(cone[0])) < 1e-6  # along a pyramid edge: the same
    assert pyramid[1] > 1.35 * pyramid[0], pyramid


@pytest.mark.parametrize("heading", [0.0, 45.0])
def test_cone_sticks_below_the_friction_limit(heading):
    """Pushed at 0.9 c_f m g the box stays put; at 1.2 c_f m g it accelerates at 0.2 c_f g."""
    vi = box("cone", dt=0.01)
    th = np.radians(heading)
    q0 = np.array([0.0, 0.0, A / 2, 0.0, 0.0, 0.0, 1.0])
    for factor, expected in [(0.9, 0.0), (1.2, 0.2 * CF * G * 1.0)]:
        u = np.zeros((100, 6))
        u[:, :2] = factor * CF * G * np.array([np.cos(th), np.sin(th)])
        traj = vi.rollout(q0, np.zeros(6), u)
        speed = np.linalg.norm(traj.linear_velocities[-1])
        assert abs(speed - expected) < 1e-6, (factor, speed, expected)
        assert lowest_corner(traj) > -1e-9


def test_linearize_with_cone_contacts_matches_central_differences_of_a_rollout():
    """B of the first step against central differences of rollouts in the first control (the
    knot-1 linear velocity) for a box sliding diagonally: a sideways push turns the sliding
    direction, a downward push raises the friction. Tolerance 1e-15 reaches an interior-point
    residual ~1e-13, so h = 1e-5 leaves ~1e-8 of noise and ~1e-10 of truncation: atol 1e-6."""
    vi = box("cone", dt=0.01, tolerance=1e-15, max_iterations=60)
    q0 = np.array([0.0, 0.0, A / 2, 0.0, 0.0, 0.0, 1.0])
    v0 = np.array([0.6, 0.5, 0.0, 0.0, 0.0, 0.0])
    u = np.zeros((2, 6))
    u[:, 2] = -1.0
    a, b = vi.linearize(vi.rollout(q0, v0, u))
    assert a.shape == (2, 12, 12) and b.shape == (2, 12, 6)
    h = 1e-5
    for c in range(3):
        up, um = u.copy(), u.copy()
        up[0, c] += h
        um[0, c] -= h
        fd = (vi.rollout(q0, v0, up).linear_velocities[1, 0] - vi.rollout(q0, v0, um).linear_velocities[1, 0]) / (2 * h)
        np.testing.assert_allclose(b[0][6:9, c], fd, atol=1e-6)
    # the friction force turns with the push: a sideways push changes both horizontal components
    assert abs(b[0][7, 0]) > 1e-4 and abs(b[0][6, 1]) > 1e-4


def test_friction_model_errors_name_the_argument():
    vi = box("pyramid")
    with pytest.raises(vidyn.InputError, match=r"friction_model = 'cones'.*'pyramid', 'cone'"):
        vi.add_contact("c", "root", [0, 0, 0], friction_model="cones")
    with pytest.raises(vidyn.InputError, match=r"contact 'c'.*friction_model = 'cone' needs friction > 0 \(got 0\)"):
        vi.add_contact("c", "root", [0, 0, 0], friction=0.0, friction_model="cone")
    with pytest.raises(TypeError):
        vi.add_contact("c", "root", [0, 0, 0], friction_model=1)
    # a failed addition leaves the integrator as it was: the next contact gets index 4
    assert vi.add_contact("c", "root", [0, 0, 0], friction_model="cone") == 4


def test_pickled_cone_integrator_steps_bit_for_bit_alike():
    vi = box("cone", dt=0.01)
    clone = pickle.loads(pickle.dumps(vi))
    a, b = slide(vi, 45.0, steps=20), slide(clone, 45.0, steps=20)
    np.testing.assert_array_equal(a.positions, b.positions)
    # and it is a cone, not the pyramid it would fall back to
    assert not np.array_equal(a.positions, slide(box("pyramid", dt=0.01), 45.0, steps=20).positions)


def test_the_issue_27_box_slides_coulombs_distance_at_45_degrees():
    """Issue 27's report: a 1 kg cube (8 corners, c_f = 0.5) pushed at 2 m/s slid 0.576 m at 45°
    on the pyramid against Coulomb's 0.408 m; on the cone it slides the 0° distance at 45°."""
    b = vidyn.ModelBuilder("box")
    b.add_body(None, "root", "freeflyer", mass=1.0, inertia=np.eye(3) * A * A / 6)
    cube = b.build()
    corners = np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).reshape(3, -1).T * A / 2
    distances = {}
    for model in ("pyramid", "cone"):
        vi = vidyn.MaximalIntegrator(cube, 0.001)
        for k, c in enumerate(corners):
            vi.add_contact(f"corner{k}", "root", c, friction=0.5, friction_model=model)
        for heading in (0.0, 45.0):
            th = np.radians(heading)
            traj = vi.rollout(np.array([0.0, 0.0, A / 2, 0.0, 0.0, 0.0, 1.0]), np.array([2 * np.cos(th), 2 * np.sin(th), 0, 0, 0, 0]), steps=1000)
            assert np.linalg.norm(traj.linear_velocities[-1]) < 1e-6
            distances[model, heading] = np.linalg.norm(traj.positions[-1, 0, :2] - traj.positions[0, 0, :2])
    coulomb = 2.0**2 / (2 * 0.5 * G)
    assert abs(distances["cone", 0.0] - coulomb) < 2e-3 and abs(distances["cone", 45.0] - coulomb) < 2e-3, distances
    assert abs(distances["cone", 45.0] - distances["cone", 0.0]) < 1e-6, distances
    assert abs(distances["pyramid", 45.0] - 0.576) < 1e-3, distances  # the reported error, kept as the control
