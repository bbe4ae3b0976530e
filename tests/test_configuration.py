"""The configuration manifold: neutral, random_configuration, integrate (⊕) and difference (⊖).

Checked against each other on random trees (hypothesis), against the layouts documented in
DESIGN.md, and against Pinocchio's `integrate`/`difference` on identical models (random trees
built in both libraries, and URDF robots including continuous joints).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vidyn
from strategies import FREEFLYER_PI_BUG, FREEFLYER_SIGN_BUG, KIND_DIMS, SPHERICAL_SIGN_BUG, _kind_of, joint_blocks, model_specs, quat_from_rotvec, states, to_pinocchio
from tolerances import CONFIG_ATOL, CONFIG_NEAR_PI_ATOL, CONFIG_ROUND_TRIP_ATOL, FD_RTOL, assert_close

try:
    import pinocchio as pin
except ImportError:  # pragma: no cover - pin is a test dependency, but keep the rest usable
    pin = None

needs_pin = pytest.mark.skipif(pin is None, reason="pinocchio (pin) is not installed")


def same_configuration(model, qa, qb, atol, what=""):
    """Coordinates equal, except that q and −q are the same rotation for quaternion blocks."""
    qa, qb = np.asarray(qa, dtype=float), np.asarray(qb, dtype=float)
    assert qa.shape == qb.shape == (model.nq,)
    for kind, sq, _ in joint_blocks(model):
        kind = _kind_of(kind, sq)
        a, b = qa[sq], qb[sq]
        if kind in ("spherical", "freeflyer"):
            qs = slice(-4, None)
            if np.dot(a[qs], b[qs]) < 0:
                b = b.copy()
                b[qs] *= -1
        err = float(np.max(np.abs(a - b)))
        assert err <= atol, f"{what}: joint block {sq} ({kind}) differs by {err:.2e} > {atol:.1e}: {a} vs {b}"


def _align_quaternions(model, q, reference, kinds):
    """q with the quaternions of joints of `kinds` sign-flipped to the hemisphere of
    `reference`'s (only used while a *_SIGN_BUG is open)."""
    q = np.array(q, dtype=float)
    for kind, sq, _ in joint_blocks(model):
        if _kind_of(kind, sq) in kinds:
            qs = slice(sq.stop - 4, sq.stop)
            if np.dot(q[qs], reference[qs]) < 0:
                q[qs] *= -1
    return q


def small_velocity(model, rng, size=1.0):
    """Every component in [−size, size]: rotational blocks have |ω| ≤ √3·size < π for size ≤ 1."""
    return rng.uniform(-size, size, model.nv)


# --- layout ---------------------------------------------------------------------------------


NEUTRAL = {"revolute": [0.0], "prismatic": [0.0], "spherical": [0, 0, 0, 1.0], "freeflyer": [0, 0, 0, 0, 0, 0, 1.0], "planar": [0, 0, 1.0, 0]}


@given(model_specs())
def test_layout_and_neutral(spec):
    """nq/nv per kind, idx_q/idx_v contiguous, neutral = identity of every joint, and at the
    neutral configuration every body sits at the product of the joint placements."""
    model = spec.build()
    assert model.nbodies == len(spec.bodies)
    assert sorted(model.joint_names) == sorted(b.name for b in spec.bodies)
    assert model.nq == sum(KIND_DIMS[b.kind][0] for b in spec.bodies)
    assert model.nv == sum(KIND_DIMS[b.kind][1] for b in spec.bodies)
    q0 = model.neutral()
    assert q0.shape == (model.nq,)
    by_name = {b.name: b for b in spec.bodies}
    for name, (kind, sq, sv) in zip(model.joint_names, joint_blocks(model)):
        assert kind == by_name[name].kind
        assert (sq.stop - sq.start, sv.stop - sv.start) == KIND_DIMS[kind]
        np.testing.assert_array_equal(q0[sq], NEUTRAL[kind])
    # parents are consistent with the spec (after depth-first renumbering) and precede children
    for i, name in enumerate(model.joint_names):
        p = by_name[name].parent
        expected = -1 if p < 0 else model.joint_index(spec.bodies[p].name)
        assert model.parents[i] == expected
        assert model.parents[i] < i
    fk = vidyn.forward_kinematics(model, q0)
    for i, name in enumerate(model.joint_names):
        b = by_name[name]
        parent_pose = np.eye(4) if b.parent < 0 else fk.placements[model.joint_index(spec.bodies[b.parent].name)]
        assert_close(fk.placements[i], parent_pose @ b.placement, 1e-13, what=f"neutral placement of {name}")


# --- random_configuration -----------------------------------------------------------------


@given(model_specs(), st.integers(0, 2**32 - 1))
def test_random_configuration_is_reproducible_and_valid(spec, seed):
    model = spec.build()
    q1 = model.random_configuration(seed)
    np.testing.assert_array_equal(q1, model.random_configuration(seed))
    np.testing.assert_array_equal(model.random_configuration(np.random.default_rng(seed)), model.random_configuration(np.random.default_rng(seed)))
    assert q1.shape == (model.nq,) and np.all(np.isfinite(q1))
    assert np.all(q1 >= model.lower_position_limit) and np.all(q1 <= model.upper_position_limit)
    for kind, sq, _ in joint_blocks(model):
        blk = q1[sq]
        if kind == "spherical":
            assert abs(np.linalg.norm(blk) - 1) < 1e-14
        elif kind == "freeflyer":
            assert abs(np.linalg.norm(blk[3:]) - 1) < 1e-14
        elif kind == "planar":
            assert abs(np.hypot(blk[2], blk[3]) - 1) < 1e-14
        elif kind == "revolute":
            assert -np.pi <= blk[0] <= np.pi  # unbounded angles are drawn in [−π, π]
    qn = model.random_configuration()  # rng=None: fresh entropy, still valid
    assert qn.shape == (model.nq,) and np.all(np.isfinite(qn))


def test_random_configuration_depends_on_seed():
    model = vidyn.models.random_tree(10, 3)
    samples = {tuple(model.random_configuration(s)) for s in range(20)}
    assert len(samples) == 20
    rng = np.random.default_rng(0)
    assert not np.array_equal(model.random_configuration(rng), model.random_configuration(rng)), "a Generator must advance"


def _urdf_robots():
    try:
        root = vidyn.models.example_robot_data_dir()
    except Exception:  # noqa: BLE001 - example-robot-data is optional
        return []
    from pathlib import Path

    paths = sorted(Path(root).glob("**/*.urdf"))
    return [p for p in paths if p.name != "ur3.urdf"]


URDF_SAMPLE = ["talos_full_v2.urdf", "pr2.urdf", "kinova.urdf", "panda.urdf", "tiago.urdf", "solo12.urdf", "double_pendulum_continuous.urdf"]


@pytest.mark.parametrize("robot", URDF_SAMPLE)
def test_random_configuration_respects_urdf_limits(robot):
    paths = [p for p in _urdf_robots() if p.name == robot]
    if not paths:
        pytest.skip(f"{robot} not found (example-robot-data missing?)")
    for floating in (False, True):
        model = vidyn.Model.from_urdf(str(paths[0]), floating_base=floating)
        lo, hi = model.lower_position_limit, model.upper_position_limit
        assert lo.shape == hi.shape == (model.nq,)
        for seed in range(50):
            q = model.random_configuration(seed)
            assert np.all(q >= lo) and np.all(q <= hi), f"{robot}: seed {seed}: q outside limits at {np.flatnonzero((q < lo) | (q > hi))}"


# --- integrate / difference -----------------------------------------------------------------


@given(st.data())
def test_integrate_difference_round_trip(data):
    """q ⊕ (q₁ ⊖ q) = q₁ for arbitrary q, q₁ (including rotations at exactly π)."""
    spec = data.draw(model_specs(), label="spec")
    model = spec.build()
    s0 = data.draw(states(model), label="state0")
    s1 = data.draw(states(model), label="state1")
    d = model.difference(s0.q, s1.q)
    assert d.shape == (model.nv,)
    near_pi = "angles_at_pi" in (s0.case, s1.case)
    atol = CONFIG_NEAR_PI_ATOL if near_pi else CONFIG_ROUND_TRIP_ATOL
    same_configuration(model, model.integrate(s0.q, d), s1.q, atol, what="q ⊕ (q1 ⊖ q)")


@given(st.data())
def test_difference_of_integrate_is_identity(data):
    """(q ⊕ v) ⊖ q = v for |ω| < π per rotational block (log ∘ exp = id there)."""
    spec = data.draw(model_specs(), label="spec")
    model = spec.build()
    s = data.draw(states(model), label="state")
    rng = np.random.default_rng(s.seed)
    scale = data.draw(st.sampled_from([1.0, 1e-3, 1e-8]), label="|v|")
    v = small_velocity(model, rng, scale)
    q1 = model.integrate(s.q, v)
    assert_close(model.difference(s.q, q1), v, CONFIG_ATOL, scale=1.0, what=f"(q ⊕ v) ⊖ q, |v| ≤ {scale}")
    np.testing.assert_allclose(model.difference(s.q, s.q), 0.0, atol=CONFIG_ATOL)
    same_configuration(model, model.integrate(s.q, np.zeros(model.nv)), s.q, CONFIG_ATOL, what="q ⊕ 0")


@given(st.data())
def test_integrate_is_continuous_in_coordinates(data):
    """|q ⊕ v − q| = O(|v|) coordinate-wise, like Pinocchio (which picks the quaternion sign
    with ⟨q_out, q_in⟩ ≥ 0): a tiny step must not flip a quaternion to its antipode."""
    spec = data.draw(model_specs(), label="spec")
    model = spec.build()
    s = data.draw(states(model), label="state")
    v = small_velocity(model, np.random.default_rng(s.seed), 1e-6)
    q1 = model.integrate(s.q, v)
    if FREEFLYER_SIGN_BUG:  # pinned by test_regression_freeflyer_integrate_keeps_quaternion_hemisphere
        q1 = _align_quaternions(model, q1, s.q, ("freeflyer",))
    # each coordinate moves by at most ~|v|·(1 + |translation|) (quaternion coordinates: ½|ω|)
    bound = 1e-6 * 10 * (1 + np.max(np.abs(s.q)))
    err = np.max(np.abs(q1 - s.q))
    assert err <= bound, f"q ⊕ v jumped by {err:.2e} in coordinates: {s.q} -> {q1}"


@given(st.data())
def test_integrate_is_a_flow(data):
    """q ⊕ (t₁+t₂)v = (q ⊕ t₁v) ⊕ t₂v: each joint follows a one-parameter subgroup."""
    spec = data.draw(model_specs(), label="spec")
    model = spec.build()
    s = data.draw(states(model), label="state")
    v = small_velocity(model, np.random.default_rng(s.seed))
    t1, t2 = 0.3, 0.45
    same_configuration(model, model.integrate(model.integrate(s.q, t1 * v), t2 * v), model.integrate(s.q, (t1 + t2) * v), 1e-12, what="flow")


@given(st.data())
def test_integrate_matches_velocity_definition(data):
    """d/dt placement(q ⊕ t v) at t=0 is the body twist of v: forward_kinematics(q, v)."""
    spec = data.draw(model_specs(max_bodies=10), label="spec")
    model = spec.build()
    s = data.draw(states(model), label="state")
    h = 1e-6
    fk = vidyn.forward_kinematics(model, s.q, s.v)
    pp = vidyn.forward_kinematics(model, model.integrate(s.q, h * s.v)).placements
    pm = vidyn.forward_kinematics(model, model.integrate(s.q, -h * s.v)).placements
    from strategies import log3

    for i in range(model.nbodies):
        r0 = fk.placements[i][:3, :3]
        pdot = (pp[i][:3, 3] - pm[i][:3, 3]) / (2 * h)
        w = log3(pp[i][:3, :3] @ pm[i][:3, :3].T) / (2 * h)
        twist = np.concatenate([r0.T @ pdot, r0.T @ w])
        assert_close(fk.velocities[i], twist, FD_RTOL, scale=float(np.max(np.abs(twist))), what=f"body {i} velocity vs d/dt oMi")


def test_planar_and_spherical_layout_examples():
    """Hand-checked values of Pinocchio's layouts for ⊕ on single joints."""
    for kind, q, v, expected in [
        # planar: v = [vx, vy, ωz] in the local frame; pure rotation by π/2
        ("planar", [1.0, 2.0, 1.0, 0.0], [0.0, 0.0, np.pi / 2], [1.0, 2.0, 0.0, 1.0]),
        # planar: local x-velocity after a quarter turn moves along world y
        ("planar", [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0]),
        # spherical: rotation about local z by π/2
        ("spherical", [0, 0, 0, 1.0], [0, 0, np.pi / 2], [*quat_from_rotvec([0, 0, np.pi / 2])]),
        # free-flyer: the linear velocity is in the local (body) frame
        ("freeflyer", [0, 0, 0, *quat_from_rotvec([0, 0, np.pi / 2])], [1.0, 0, 0, 0, 0, 0], [0, 1.0, 0, *quat_from_rotvec([0, 0, np.pi / 2])]),
    ]:
        b = vidyn.ModelBuilder(kind)
        b.add_body(None, "j", kind, placement=np.eye(4), mass=1.0, com=np.zeros(3), inertia=np.eye(3))
        model = b.build()
        np.testing.assert_allclose(model.integrate(np.array(q), np.array(v)), expected, atol=1e-15, err_msg=kind)


# --- oracle: Pinocchio -----------------------------------------------------------------------


@needs_pin
@given(st.data())
def test_integrate_difference_match_pinocchio_on_random_trees(data):
    from pin_layout import ConfigurationMap

    spec = data.draw(model_specs(), label="spec")
    model = spec.build()
    pm = to_pinocchio(spec)
    cmap = ConfigurationMap(model, pm)
    s0 = data.draw(states(model, cases=("random", "near_identity", "zero_velocity")), label="s0")
    # s1 stays generic: Pinocchio's SE(2) log loses ~1e-8 absolute for relative angles ≲ 1e-7
    # (e.g. planar q0 = (0, 0, 1, 0), q1 = (−.5, −.6, cos 1e-8, sin 1e-8): q0 ⊕ (q1 ⊖ q0) is
    # off by 8e-9), so near-identity *differences* are checked by the round-trip tests instead
    s1 = data.draw(states(model, cases=("random",)), label="s1")
    q0p, q1p = cmap.q_to_pin(s0.q), cmap.q_to_pin(s1.q)
    # ⊕ with a large velocity (several turns): coordinates must agree, quaternion sign included
    v = cmap.v_to_pin(s0.v)
    expected = pin.integrate(pm, q0p, v)
    got_vd = model.integrate(s0.q, s0.v)
    # while a sign bug is open (pinned by the regression tests below), compare those quaternions
    # up to sign and keep testing everything else
    sign_bugs = ("freeflyer",) * FREEFLYER_SIGN_BUG + ("spherical",) * SPHERICAL_SIGN_BUG
    got_vd = _align_quaternions(model, got_vd, cmap.q_to_vidyn(expected), sign_bugs)
    got = cmap.q_to_pin(got_vd)
    assert_close(got, expected, 1e-11, scale=float(np.max(np.abs(expected))) * (1 + float(np.max(np.abs(s0.v)))), what="integrate vs pin")
    # ⊖ between random configurations (relative rotations away from π with probability 1)
    got_d = cmap.v_to_pin(model.difference(s0.q, s1.q))
    assert_close(got_d, pin.difference(pm, q0p, q1p), 1e-9, what="difference vs pin")
    # neutral agrees
    np.testing.assert_array_equal(cmap.q_to_pin(model.neutral()), pin.neutral(pm))


CONTINUOUS_ROBOTS = ["double_pendulum_continuous.urdf", "kinova.urdf", "pr2.urdf", "tiago.urdf", "tiago_pro.urdf"]


@needs_pin
@pytest.mark.parametrize("robot", CONTINUOUS_ROBOTS)
@pytest.mark.parametrize("floating_base", [False, True], ids=["fixed", "free"])
def test_urdf_configuration_maps_match_pinocchio(robot, floating_base):
    """Continuous joints: vidyn's angle ⊕ ω maps to Pinocchio's (cos, sin) ⊕ ω."""
    from pin_layout import ConfigurationMap

    paths = [p for p in _urdf_robots() if p.name == robot]
    if not paths:
        pytest.skip(f"{robot} not found (example-robot-data missing?)")
    model = vidyn.Model.from_urdf(str(paths[0]), floating_base=floating_base)
    pm = pin.buildModelFromUrdf(str(paths[0]), pin.JointModelFreeFlyer()) if floating_base else pin.buildModelFromUrdf(str(paths[0]))
    cmap = ConfigurationMap(model, pm)
    assert cmap.n_continuous > 0
    assert model.nq == pm.nq - cmap.n_continuous and model.nv == pm.nv
    np.testing.assert_allclose(cmap.q_to_pin(model.neutral()), pin.neutral(pm), atol=1e-15)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        q0, q1 = model.random_configuration(rng), model.random_configuration(rng)
        v = rng.uniform(-2, 2, model.nv)
        np.testing.assert_allclose(cmap.q_to_vidyn(cmap.q_to_pin(q0)), q0, atol=1e-15, rtol=0)
        expected = pin.integrate(pm, cmap.q_to_pin(q0), v)
        got = model.integrate(q0, v)
        if FREEFLYER_SIGN_BUG:  # pinned by test_regression_freeflyer_integrate_keeps_quaternion_hemisphere
            got = _align_quaternions(model, got, cmap.q_to_vidyn(expected), ("freeflyer",))
        assert_close(cmap.q_to_pin(got), expected, 1e-12, what=f"{robot} integrate")
        d_pin = pin.difference(pm, cmap.q_to_pin(q0), cmap.q_to_pin(q1))
        d_vd = model.difference(q0, q1)
        # revolute-unbounded: Pinocchio's ⊖ is the shortest angle, vidyn's the plain θ1 − θ0;
        # both reach q1, so compare the images under ⊕ for those joints
        d_vd_pin = cmap.v_to_pin(d_vd)
        for _, _, _, _, sv_pin, cont in cmap.blocks:
            if not cont:
                assert_close(d_vd_pin[sv_pin], d_pin[sv_pin], 1e-9, what=f"{robot} difference")
        same_configuration(model, model.integrate(q0, d_vd), q1, 1e-9, what=f"{robot} q0 ⊕ (q1 ⊖ q0)")


# --- regressions found by the property tests ---------------------------------------------------

_FF_PI = np.array([0.0, 0.0, 0.0, -0.2634616722330583, 0.2176488869954818, -0.9397962062350478, 0.0])


def _single_joint_model(kind):
    b = vidyn.ModelBuilder(kind)
    b.add_body(None, "root", kind, placement=np.eye(4), mass=1.0, com=np.zeros(3), inertia=np.eye(3))
    return b.build()


@pytest.mark.xfail(FREEFLYER_PI_BUG, strict=True, reason="vidyn bug: free-flyer integrate maps some exact-π rotations to the identity (reported to the lead)")
def test_regression_freeflyer_integrate_at_rotation_pi():
    """Found by test_difference_of_integrate_is_identity (case angles_at_pi): a free-flyer whose
    rotation is exactly π about this axis integrated by v = 0 came back as the identity
    quaternion.  (Cause: the rotation → quaternion conversion used nalgebra's iterative
    `UnitQuaternion::from_matrix`, which starts at the identity and stalls at a π rotation.)"""
    model = _single_joint_model("freeflyer")
    same_configuration(model, model.integrate(_FF_PI, np.zeros(6)), _FF_PI, 1e-15, what="q ⊕ 0 at a π rotation")
    v = np.array([0.1, -0.2, 0.3, 0.0, 0.0, 0.0])  # pure translation keeps the rotation at π
    assert abs(model.integrate(_FF_PI, v)[6]) < 1e-15


@pytest.mark.xfail(FREEFLYER_SIGN_BUG, strict=True, reason="vidyn differs from Pinocchio: free-flyer integrate may return -quaternion (reported to the lead)")
def test_regression_freeflyer_integrate_keeps_quaternion_hemisphere():
    """Found by test_integrate_is_continuous_in_coordinates: Pinocchio's free-flyer ⊕ returns the
    quaternion with ⟨q_out, q_in⟩ ≥ 0, so q ⊕ 0 = q coordinate-wise; vidyn returned −q for
    q_w < 0, i.e. a different array than Pinocchio for the same rotation."""
    model = _single_joint_model("freeflyer")
    q = np.array([0.0, 0.0, 0.0, 0.6, 0.0, 0.0, -0.8])
    np.testing.assert_allclose(model.integrate(q, np.zeros(6)), q, atol=1e-15)
    v = np.array([0.0, 0.0, 0.0, 1e-3, 0.0, 0.0])
    assert np.dot(model.integrate(q, v)[3:], q[3:]) > 0


@pytest.mark.xfail(SPHERICAL_SIGN_BUG, strict=True, reason="vidyn differs from Pinocchio: spherical integrate flips the quaternion to <q_out, q> >= 0, Pinocchio's SO(3) integrate does not (reported to the lead)")
def test_regression_spherical_integrate_matches_pinocchio_sign():
    """Found by test_integrate_difference_match_pinocchio_on_random_trees after commit 4f7cf5a:
    Pinocchio's spherical (SO(3)) ⊕ is q ⊗ exp(ω) with no sign choice (only its SE(3) ⊕ keeps
    ⟨q_out, q⟩ ≥ 0), so identity ⊕ (0, 0, 4) = (0, 0, sin 2, cos 2) = (0, 0, 0.909, −0.416)."""
    model = _single_joint_model("spherical")
    out = model.integrate(np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, 4.0]))
    np.testing.assert_allclose(out, [0.0, 0.0, np.sin(2.0), np.cos(2.0)], atol=1e-15)
