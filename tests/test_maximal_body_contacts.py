"""Contacts between bodies of the maximal-coordinate integrator (issue 27): the binding
``MaximalIntegrator.add_body_contact``, pickling, errors, and contact pairs from a URDF's
``<collision>`` primitives (``vidyn.collisions``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vidyn
from vidyn.collisions import collision_contacts, collision_pairs

R = 0.2  # ball radius


def two_balls(masses=(1.0, 1.5), dt=0.01) -> vidyn.MaximalIntegrator:
    b = vidyn.ModelBuilder("two")
    for name, m in zip("ab", masses):
        b.add_body(None, name, "freeflyer", mass=m, inertia=np.eye(3) * 0.4 * m * R * R)
    model = b.build().with_gravity(np.zeros(3))
    return vidyn.MaximalIntegrator(model, dt)


def q_of(xa, xb):
    return np.concatenate([xa, [0, 0, 0, 1.0], xb, [0, 0, 0, 1.0]])


def momentum(traj, masses):
    return np.einsum("b,kbi->ki", np.asarray(masses), traj.linear_velocities)


def test_frictionless_head_on_collision_exchanges_momentum_without_penetration():
    vi = two_balls()
    assert vi.add_body_contact("ab", "a", ("sphere", [R]), "b", ("sphere", [R]), friction=0.0) == 0
    assert vi.nbody_contacts == 1
    traj = vi.rollout(q_of([-0.6, 0, 0], [0.3, 0, 0]), np.array([2.0, 0, 0, 0, 0, 0, -1.0, 0, 0, 0, 0, 0]), steps=100)
    p = momentum(traj, (1.0, 1.5))
    gap = vi.body_contact_distances(traj)
    assert gap.shape == (101, 1)
    # frictionless: Newton keeps Σ m v to round-off (Rust test: 4e-16)
    assert np.abs(p - p[0]).max() < 1e-13
    assert gap.min() > -1e-9 and gap[0, 0] == pytest.approx(0.9 - 2 * R)
    # plastic: both end near the common velocity 0.2 m/s (the barrier separates them by
    # < 1e-3 m/s, see the Rust test)
    assert np.abs(traj.linear_velocities[-1, :, 0] - 0.2).max() < 1e-3


@given(
    offset=st.floats(-0.3, 0.3),
    speed=st.floats(0.5, 3.0),
    mass=st.floats(0.3, 3.0),
    model=st.sampled_from(["frictionless", "pyramid", "cone"]),
)
def test_collisions_conserve_momentum_and_never_penetrate(offset, speed, mass, model):
    # any off-centre impact, any mass ratio, every friction model: the contact forces are equal
    # and opposite at one point, so Σ m v and the angular momentum change only by round-off
    # (the Rust tests measure 3e-15; 1e-12 relative allows for the sampled speeds), and the
    # gap stays above the barrier's (−1e-9 m)
    vi = two_balls((1.0, mass))
    friction = 0.0 if model == "frictionless" else 0.4
    vi.add_body_contact("ab", 0, ("sphere", [R]), 1, ("sphere", [R]), friction=friction, friction_model=model)
    v0 = np.array([speed, 0, 0, 0.3, -0.5, 1.0, 0, 0, 0, 0, 0, 0])
    traj = vi.rollout(q_of([-0.6, offset, 0], [0.0, 0, 0]), v0, steps=60)
    p = momentum(traj, (1.0, mass))
    assert np.abs(p - p[0]).max() < 1e-12 * max(1.0, np.abs(p[0]).max())
    assert vi.body_contact_distances(traj).min() > -1e-9


def test_body_contacts_pickle_and_step_bit_for_bit():
    vi = two_balls()
    vi.add_body_contact("ab", "a", ("capsule", [0.1, 0.4], np.eye(4)), "b", ("sphere", [R]), friction=0.3, friction_model="cone")
    box = np.eye(4)
    box[:3, 3] = [0.0, 0.0, 0.5]
    vi.add_body_contact("ba", "b", ("box", [0.2, 0.3, 0.1], box), "a", ("sphere", [0.05]), friction=0.0)
    again = pickle.loads(pickle.dumps(vi))
    assert again == vi and again.nbody_contacts == 2
    q0, v0 = q_of([-0.6, 0.05, 0], [0.0, 0, 0]), np.array([2.0, 0, 0, 0, 0, 0.5] + [0.0] * 6)
    a, b = vi.rollout(q0, v0, steps=40), again.rollout(q0, v0, steps=40)
    np.testing.assert_array_equal(a.positions, b.positions)
    np.testing.assert_array_equal(a.angular_velocities, b.angular_velocities)


def test_body_contact_errors_name_the_argument():
    vi = two_balls()
    with pytest.raises(vidyn.InputError, match="kind = 'cylinder' is not a contact shape"):
        vi.add_body_contact("c", "a", ("cylinder", [0.1, 0.2]), "b", ("sphere", [R]))
    with pytest.raises(vidyn.InputError, match=r"shape_b\[1\]"):
        vi.add_body_contact("c", "a", ("sphere", [R]), "b", ("capsule", [R]))
    with pytest.raises(vidyn.InputError, match="box–box contacts are not implemented"):
        vi.add_body_contact("c", "a", ("box", [1, 1, 1]), "b", ("box", [1, 1, 1]))
    with pytest.raises(vidyn.InputError, match="both shapes are on body 0"):
        vi.add_body_contact("c", "a", ("sphere", [R]), 0, ("sphere", [R]))
    with pytest.raises(vidyn.InputError, match="friction_model = 'cone' needs friction > 0"):
        vi.add_body_contact("c", "a", ("sphere", [R]), "b", ("sphere", [R]), friction=0.0, friction_model="cone")
    with pytest.raises(vidyn.UnknownNameError):
        vi.add_body_contact("c", "nope", ("sphere", [R]), "b", ("sphere", [R]))
    with pytest.raises(TypeError, match=r"shape_a must be a tuple \(kind, size\)"):
        vi.add_body_contact("c", "a", 3.0, "b", ("sphere", [R]))
    assert vi.nbody_contacts == 0


LINK = '<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>'


def collision(geometry: str, xyz: str = "0 0 0") -> str:
    return f'<collision><origin xyz="{xyz}"/><geometry>{geometry}</geometry></collision>'


def joint(name: str, parent: str, child: str, xyz: str) -> str:
    return (
        f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{xyz}"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>'
    )


# a base with two two-link fingers (capsules, sphere tips), a fixed pad on the base (merged
# into it) and a cylinder on the base (not a contact shape)
URDF = f"""<robot name="hand">
<link name="base">{LINK}{collision('<box size="0.2 0.2 0.05"/>')}{collision('<cylinder radius="0.02" length="0.1"/>', "0 0 0.1")}</link>
<link name="pad">{collision('<sphere radius="0.03"/>')}</link>
<joint name="pad_fixed" type="fixed"><parent link="base"/><child link="pad"/><origin xyz="0 0 0.05"/></joint>
<link name="l1">{LINK}{collision('<capsule radius="0.02" length="0.1"/>', "0 0 0.05")}</link>
<link name="t1">{LINK}{collision('<sphere radius="0.02"/>')}</link>
<link name="l2">{LINK}{collision('<capsule radius="0.02" length="0.1"/>', "0 0 0.05")}</link>
<link name="t2">{LINK}{collision('<sphere radius="0.02"/>')}</link>
{joint("j1", "base", "l1", "0.05 0 0.05")}{joint("k1", "l1", "t1", "0 0 0.1")}
{joint("j2", "base", "l2", "-0.05 0 0.05")}{joint("k2", "l2", "t2", "0 0 0.1")}
</robot>"""


@pytest.fixture
def hand(tmp_path):
    path = tmp_path / "hand.urdf"
    path.write_text(URDF)
    return vidyn.Model.from_urdf(path, floating_base=True), path


def test_collision_pairs_filter_same_body_adjacent_and_excluded_links(hand):
    model, path = hand
    found = collision_pairs(model, path)
    names = {frozenset((a.link, b.link)) for a, b in found.pairs}
    # base and pad are one body (fixed joint): never paired with each other, and both are the
    # fingers' parent body, so pad–l1 is skipped as base–l1 is (parent–child); the base box
    # meets the tips (sphere–box)
    expected = [("base", "t1"), ("base", "t2"), ("pad", "t1"), ("pad", "t2"), ("l1", "l2"), ("l1", "t2"), ("t1", "l2"), ("t1", "t2")]
    assert names == {frozenset(p) for p in expected}
    # the base's cylinder against the tips: passed the filter, no signed distance
    assert sorted((a.link, a.kind, b.link, b.kind) for a, b in found.unsupported) == [("base", "cylinder", "t1", "sphere"), ("base", "cylinder", "t2", "sphere")]
    assert not any({a.link, b.link} == {"base", "pad"} for a, b in found.pairs + found.unsupported)
    # adjacent pairs on request, excluded pairs dropped
    with_adjacent = collision_pairs(model, path, adjacent=True, exclude=[("t1", "t2")])
    names2 = {frozenset((a.link, b.link)) for a, b in with_adjacent.pairs}
    assert frozenset(("l1", "t1")) in names2 and frozenset(("pad", "l1")) in names2
    assert frozenset(("t1", "t2")) not in names2


def test_collision_contacts_hold_the_fingertips_apart(hand):
    # the fingers swung towards each other: the tip spheres and the capsules meet and stop
    model, path = hand
    vi = vidyn.MaximalIntegrator(model.with_gravity(np.zeros(3)), 0.005)
    found = collision_contacts(vi, path, friction=0.0)
    assert vi.nbody_contacts == len(found.pairs) == 8
    tips = [k for k, (a, b) in enumerate(found.pairs) if {a.link, b.link} == {"t1", "t2"}]
    q0 = np.concatenate([[0, 0, 0, 0, 0, 0, 1.0], [-0.3, 0.0, 0.3, 0.0]])
    v0 = np.concatenate([np.zeros(6), [-3.0, 0.0, 3.0, 0.0]])
    traj = vi.rollout(q0, v0, steps=80)
    gaps = vi.body_contact_distances(traj)
    assert gaps.min() > -1e-9
    assert gaps[:, tips[0]].min() < 1e-3, "the tips must touch"


def test_linearize_with_a_sphere_box_contact_matches_central_differences_of_a_rollout():
    # a ball (body b) pressed onto a box on body a, sliding: the exact linearisation of the first
    # step against central differences of one-step rollouts in x = (q, v) of the free flyers'
    # positions (h = 1e-6; the Rust tests check the full tangent spaces against the relaxed
    # system); tolerance 1e-4 relative (the rollouts are not relaxed at a fixed barrier: their
    # difference carries ~ε_IP/h ≈ 1e-4 of noise at the default tolerance)
    vi = two_balls((2.0, 0.3))
    vi.add_body_contact("ab", "b", ("sphere", [0.1]), "a", ("box", [0.4, 0.3, 0.2]), friction=0.5)
    q0 = q_of([0.0, 0.0, 0.0], [0.05, -0.02, 0.2])
    v0 = np.array([0.1, 0, 0, 0, 0, 0.3, 0.8, 0.3, -0.6, 0.5, 0.2, -0.1])
    traj = vi.rollout(q0, v0, steps=1)
    a, _ = vi.linearize(traj)
    assert a.shape == (1, 24, 24) and np.isfinite(a).all()
    assert vi.body_contact_distances(traj)[1, 0] == pytest.approx(0.0, abs=1e-8), "the contact must be active"
    h = 1e-6
    for i in range(3):  # the ball's position, column 12 + i of A; row 12 + i: its next position
        qp, qm = q0.copy(), q0.copy()
        qp[7 + i] += h
        qm[7 + i] -= h
        fd = (vi.rollout(qp, v0, steps=1).positions[1, 1] - vi.rollout(qm, v0, steps=1).positions[1, 1]) / (2 * h)
        np.testing.assert_allclose(a[0, 12:15, 12 + i], fd, atol=1e-4 * max(1.0, np.abs(fd).max()))
