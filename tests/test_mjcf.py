"""vidyn.mjcf against MuJoCo itself: the imported model's kinematics, mass matrix and inverse
dynamics equal MuJoCo's (``data.xpos``/``xmat``, ``mj_objectVelocity``, ``mj_fullM``,
``mj_rne``) on small MJCF models written here, after converting the states with
vidyn.mjcf's helpers; and every refused or dropped MJCF feature is named.

Each model exercises one part of the mapping: joint anchors (``pos``) and ``ref`` offsets
with rotated body frames, ball and slide joints in a tree on a welded base, free joints with
welded (jointless) bodies carrying their own inertia, several joints in one body.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import vidyn  # noqa: E402
from tolerances import ORACLE_RTOL, assert_close  # noqa: E402
from vidyn import mjcf  # noqa: E402

# Tolerance: MuJoCo and vidyn compute the same recursions in double precision in different
# orders (MuJoCo in world-aligned coordinates at the subtree centre of mass, vidyn in body
# frames), from the same compiled numbers; the placements differ by a few eps (quaternion →
# matrix in each, composed through ≤ 6 frames). Measured: ≤ 1e-13 relative to max(1, |y|).
# A modelling error (a missing joint offset, an inertia in the wrong frame, a free-joint
# velocity in the wrong axes) is ≥ 1e-3 relative for these models, so ORACLE_RTOL = 1e-9 has
# four orders of margin on both sides (see tolerances.py).
RTOL = ORACLE_RTOL

# Angles are MJCF's default degrees. Hinges with anchors away from the body origin, non-unit axes, `ref` offsets, bodies rotated
# every which way (quat, euler, axisangle, xyaxes) and inertias with their own rotation.
HINGE_CHAIN = """
<mujoco model="hinge_chain">
  <option gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <body name="l1" pos="0.1 -0.2 0.3" quat="0.9 0.2 -0.3 0.1">
      <joint name="j1" type="hinge" axis="0 0 1" pos="0.05 0.02 -0.1"/>
      <inertial pos="0.1 0.02 -0.3" quat="0.7 0.1 0.6 0.2" mass="2.0" diaginertia="0.05 0.04 0.02"/>
      <body name="l2" pos="0.2 0 -0.6" euler="30 -20 45">
        <joint name="j2" type="hinge" axis="1 1 0" pos="-0.03 0.1 0.04" ref="25"/>
        <inertial pos="0 0.05 -0.25" mass="1.5" fullinertia="0.03 0.025 0.01 0.002 -0.001 0.003"/>
        <body name="l3" pos="0 0.1 -0.5" axisangle="0.2 1 0.3 70">
          <joint name="j3" type="hinge" axis="0.2 -0.4 1" pos="0 0 0.1" ref="-70"/>
          <inertial pos="0.02 0 -0.2" quat="0.5 0.5 0.5 0.5" mass="1.0" diaginertia="0.02 0.015 0.006"/>
          <body name="l4" pos="0.01 0.02 -0.4" xyaxes="0 1 0 -1 0 0">
            <joint name="j4" type="hinge" axis="1 0 0"/>
            <inertial pos="0 0 -0.1" mass="0.5" diaginertia="0.004 0.003 0.002"/>
            <site name="tip" pos="0 0 -0.2" euler="0 90 0"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

# A welded, rotated base; ball joints with anchors, slides with anchors and `ref`, two
# branches; inertias computed by MuJoCo from geoms (inertiafromgeom).
BALL_SLIDE_TREE = """
<mujoco model="ball_slide_tree">
  <worldbody>
    <body name="base" pos="0.5 0.2 1.0" euler="10 -30 60">
      <geom type="box" size="0.2 0.1 0.05" density="800"/>
      <body name="upper" pos="0 0.1 -0.1">
        <joint name="shoulder" type="ball" pos="0 0.02 0.03"/>
        <geom type="capsule" fromto="0 0 0 0.05 0.1 -0.4" size="0.04"/>
        <body name="carriage" pos="0.05 0.1 -0.4" quat="0.6 0.0 0.8 0.0">
          <joint name="rail" type="slide" axis="0.2 0.1 1" pos="0.3 -0.2 0.1" ref="0.25"/>
          <geom type="box" size="0.05 0.06 0.07" pos="0.01 0 -0.05"/>
          <body name="wrist" pos="0 0 -0.15">
            <joint name="wrist" type="ball"/>
            <geom type="ellipsoid" size="0.03 0.05 0.08" pos="0.02 -0.01 -0.06"/>
          </body>
        </body>
      </body>
      <body name="slider" pos="-0.2 0 0" euler="90 0 0">
        <joint name="lift" type="slide" axis="0 0 1" pos="1 1 1"/>
        <geom type="cylinder" size="0.05 0.1" pos="0 0 0.1"/>
        <body name="pendulum" pos="0 0 0.2">
          <joint name="swing" type="hinge" axis="0 1 0" pos="0 0 -0.05"/>
          <geom type="sphere" size="0.06" pos="0 0 -0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

# A floating humanoid-ish tree: a free root with a rotated model pose (ignored by MuJoCo for
# a free body), a welded head with its own inertia and a site, a welded pelvis whose children
# move, two joints in the thigh, a ball shoulder; plus a second free body and a mocap body.
HUMANOID = """
<mujoco model="humanoidish">
  <worldbody>
    <body name="torso" pos="0 0 1.3" quat="0.9 0.1 -0.2 0.3">
      <freejoint name="root"/>
      <inertial pos="0.01 0.02 -0.03" quat="0.8 0.2 0.1 0.4" mass="10" diaginertia="0.3 0.25 0.2"/>
      <body name="head" pos="0 0 0.3" euler="10 20 30">
        <inertial pos="0 0.01 0.1" quat="0.9 0 0.3 0" mass="2" diaginertia="0.02 0.015 0.01"/>
        <site name="eye" pos="0.1 0 0.05" euler="0 90 0"/>
      </body>
      <body name="pelvis" pos="0 0 -0.3" euler="0 0 45">
        <inertial pos="0.01 0 -0.02" mass="3" fullinertia="0.05 0.04 0.03 0.001 0.002 -0.003"/>
        <body name="thigh" pos="0 0.1 -0.1" euler="5 -10 15">
          <joint name="hip_x" type="hinge" axis="1 0 0" pos="0 0 0.05"/>
          <joint name="hip_y" type="hinge" axis="0 1 0.2" pos="0.01 0 0.04" ref="20"/>
          <inertial pos="0 0 -0.2" mass="4" diaginertia="0.06 0.06 0.01"/>
          <body name="shin" pos="0 0 -0.4">
            <joint name="knee" type="hinge" axis="0 1 0" pos="0 0 0.02" ref="-30"/>
            <inertial pos="0 0 -0.2" mass="2" diaginertia="0.03 0.03 0.005"/>
            <body name="foot" pos="0.05 0 -0.42" euler="0 -15 0">
              <inertial pos="0.05 0 0" mass="0.8" diaginertia="0.002 0.004 0.004"/>
              <site name="sole" pos="0.05 0 -0.03"/>
            </body>
          </body>
        </body>
        <body name="arm" pos="0 -0.2 0.5">
          <joint name="shoulder" type="ball" pos="0 -0.05 0"/>
          <inertial pos="0 -0.2 0" quat="1 1 0 0" mass="1.5" diaginertia="0.02 0.02 0.003"/>
        </body>
      </body>
    </body>
    <body name="box" pos="2 0 0.5">
      <freejoint/>
      <geom type="box" size="0.1 0.2 0.3" density="500"/>
    </body>
    <body name="target" mocap="true" pos="1 1 1"/>
  </worldbody>
</mujoco>
"""

# Several joints in one body (a chain of massless vidyn bodies): a universal joint with
# offset anchors, slide-hinge-slide, hinge followed by a ball.
MULTI_JOINT = """
<mujoco model="multi_joint">
  <option gravity="0 0 -3"/>
  <worldbody>
    <body name="cardan" pos="0 0 1" euler="0 30 0">
      <joint name="u1" type="hinge" axis="1 0 0" pos="0 0 0.1"/>
      <joint name="u2" type="hinge" axis="0 1 0" pos="0.02 -0.01 0.12" ref="40"/>
      <inertial pos="0.1 0.05 -0.2" quat="0.3 0.4 0.5 0.6" mass="1.2" diaginertia="0.03 0.02 0.015"/>
      <body name="screw" pos="0 0 -0.4" euler="20 0 -40">
        <joint name="s1" type="slide" axis="0 0 1" pos="0.1 0 0" ref="-0.2"/>
        <joint name="h1" type="hinge" axis="0 0 1" pos="0.03 0.04 0.05" ref="30"/>
        <joint name="s2" type="slide" axis="1 -1 0"/>
        <inertial pos="0.02 0 -0.1" mass="0.7" diaginertia="0.01 0.008 0.004"/>
        <body name="knob" pos="0.1 0 -0.2">
          <joint name="k_hinge" type="hinge" axis="0 1 1" pos="0 0.01 0.02"/>
          <joint name="k_ball" type="ball" pos="0.01 0 -0.03"/>
          <inertial pos="0 0.02 -0.05" mass="0.3" diaginertia="0.002 0.0015 0.001"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

MODELS = {"hinge_chain": HINGE_CHAIN, "ball_slide_tree": BALL_SLIDE_TREE, "humanoid": HUMANOID, "multi_joint": MULTI_JOINT}


@pytest.fixture(autouse=True, scope="module")
def _mujoco_log_elsewhere(tmp_path_factory):
    """MuJoCo appends its warnings (a missing file, a near-singular inertia matrix) to
    MUJOCO_LOG.TXT in the working directory: keep it out of the repository."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path_factory.mktemp("mujoco_log"))
        yield


@functools.cache
def load(name: str):
    """(MjModel, vidyn Model) of one of MODELS, cached: hypothesis calls each test many times."""
    mj = mujoco.MjModel.from_xml_string(MODELS[name])
    return mj, mjcf.from_mjmodel(mj)


def random_state(mj, seed: int, flavour: str):
    """MuJoCo (qpos, qvel, qacc): random angles in [-π, π], translations in [-1, 1], random
    unit quaternions; velocities and accelerations N(0, 2²) per coordinate. ``"rest"`` has
    zero velocity, ``"model_pose"`` is MuJoCo's qpos0 (every hinge at its ``ref``)."""
    rng = np.random.default_rng(seed)
    qpos = rng.uniform(-np.pi, np.pi, mj.nq)
    for j in range(mj.njnt):
        a = mj.jnt_qposadr[j]
        if mj.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a : a + 3] = rng.uniform(-1, 1, 3)
            qpos[a + 3 : a + 7] = rng.normal(size=4) / 0.7  # not normalised: MuJoCo normalises
        elif mj.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            qpos[a : a + 4] = rng.normal(size=4)
        elif mj.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE:
            qpos[a] = rng.uniform(-1, 1)
    if flavour == "model_pose":
        qpos = mj.qpos0.copy()
    qvel = np.zeros(mj.nv) if flavour == "rest" else rng.normal(0, 2, mj.nv)
    qacc = rng.normal(0, 2, mj.nv)
    return qpos, qvel, qacc


def mujoco_data(mj, qpos, qvel, qacc):
    d = mujoco.MjData(mj)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_forward(mj, d)
    d.qacc[:] = qacc  # mj_forward computed its own
    return d


def mujoco_mass_matrix(mj, d):
    m = np.zeros((mj.nv, mj.nv))
    if hasattr(d, "qM"):  # MuJoCo 3: mj_fullM(m, dst, qM)
        mujoco.mj_fullM(mj, m, d.qM)
    else:  # MuJoCo 4: mj_fullM(m, d, dst)
        mujoco.mj_fullM(mj, d, m)
    return m


def vidyn_state(mj, qpos, qvel, qacc):
    return mjcf.qpos_to_vidyn(mj, qpos), mjcf.qvel_to_vidyn(mj, qpos, qvel), mjcf.qacc_to_vidyn(mj, qpos, qvel, qacc)


states = st.tuples(st.sampled_from(sorted(MODELS)), st.integers(0, 2**32 - 1), st.sampled_from(["random", "random", "rest", "model_pose"]))


# ------------------------------------------------------------------------------------------
# Structure


def test_structure_of_the_humanoid():
    mj, model = load("humanoid")
    assert model.name == "humanoidish"
    assert model.joint_names == ["root", "hip_x", "hip_y", "knee", "shoulder", "box_joint0"]
    assert model.joint_kinds == ["freeflyer", "revolute", "revolute", "revolute", "spherical", "freeflyer"]
    assert (model.nq, model.nv) == (mj.nq, mj.nv)
    # every MuJoCo body but the world is a frame, then the sites
    assert model.frame_names == ["torso", "head", "pelvis", "thigh", "shin", "foot", "arm", "box", "target", "eye", "sole"]
    # welded bodies are merged, the mocap body (welded to the world) has no mass in the model
    assert model.total_mass == pytest.approx(float(mj.body_mass.sum() - mj.body_mass[mj.body("target").id]), rel=1e-12)
    assert_close(model.gravity, mj.opt.gravity, 1e-15, what="gravity")


def test_joint_order_and_ranges_are_mujocos():
    for name in MODELS:
        mj, model = load(name)
        assert model.idx_q == list(mj.jnt_qposadr), name
        assert model.idx_v == list(mj.jnt_dofadr), name
        assert model.joint_names == [mj.joint(j).name or f"{mj.body(mj.jnt_bodyid[j]).name}_joint0" for j in range(mj.njnt)], name


def test_site_names_and_unnamed_elements():
    xml = """<mujoco><worldbody><body name="a"><joint type="hinge"/><geom size="0.1"/>
      <site name="a"/><site/><body><joint type="slide"/><joint type="hinge"/><geom size="0.1"/></body>
      <body name="body2"><joint name="a_joint0_1" type="hinge"/><joint type="hinge"/><geom size="0.1"/></body>
      </body></worldbody></mujoco>"""
    model = mjcf.from_mjcf_string(xml)
    assert model.joint_names == ["a_joint0", "body2_1_joint0", "body2_1_joint1", "a_joint0_1", "body2_joint1"]
    assert model.frame_names == ["a", "body2_1", "body2", "a_site", "site1"]


def test_a_model_without_joints_has_no_body():
    model = mjcf.from_mjcf_string('<mujoco><worldbody><body name="table" pos="0 0 1"><geom size="0.1"/><site name="top"/></body></worldbody></mujoco>')
    assert (model.nq, model.nv, model.nbodies) == (0, 0, 0)
    assert_close(vidyn.frame_placement(model, np.zeros(0), "top")[:3, 3], [0, 0, 1], 0, what="top")


def test_two_joints_in_a_body_make_a_chain():
    mj, model = load("multi_joint")
    assert model.joint_names == ["u1", "u2", "s1", "h1", "s2", "k_hinge", "k_ball"]
    assert model.parents == [-1, 0, 1, 2, 3, 4, 5]
    assert model.joint_kinds == ["revolute", "revolute", "prismatic", "revolute", "prismatic", "revolute", "spherical"]


# ------------------------------------------------------------------------------------------
# Against MuJoCo


@given(states)
def test_kinematics_match_mujoco(case):
    """Every MuJoCo body and site frame: placement (xpos, xmat) and body velocity in its own
    axes (mj_objectVelocity, [ω; v] reordered), which checks qpos_to_vidyn and qvel_to_vidyn."""
    name, seed, flavour = case
    mj, model = load(name)
    qpos, qvel, qacc = random_state(mj, seed, flavour)
    d = mujoco_data(mj, qpos, qvel, qacc)
    q, v, _ = vidyn_state(mj, qpos, qvel, qacc)
    res = np.zeros(6)
    for b in range(1, mj.nbody):
        frame = mj.body(b).name
        placement = vidyn.frame_placement(model, q, frame)
        assert_close(placement[:3, 3], d.xpos[b], RTOL, what=f"{name} {frame} position")
        assert_close(placement[:3, :3], d.xmat[b].reshape(3, 3), RTOL, what=f"{name} {frame} rotation")
        mujoco.mj_objectVelocity(mj, d, mujoco.mjtObj.mjOBJ_XBODY, b, res, 1)
        assert_close(vidyn.frame_velocity(model, q, v, frame, "local"), np.r_[res[3:], res[:3]], RTOL, what=f"{name} {frame} velocity")
    for s in range(mj.nsite):
        placement = vidyn.frame_placement(model, q, mj.site(s).name)
        assert_close(placement[:3, 3], d.site_xpos[s], RTOL, what=f"{name} site {s} position")
        assert_close(placement[:3, :3], d.site_xmat[s].reshape(3, 3), RTOL, what=f"{name} site {s} rotation")


@given(states)
def test_mass_matrix_matches_mj_fullM(case):
    """mj_fullM = Jᵀ crba J, J = velocity_map (the identity without free joints)."""
    name, seed, flavour = case
    mj, model = load(name)
    qpos, qvel, qacc = random_state(mj, seed, flavour)
    d = mujoco_data(mj, qpos, qvel, qacc)
    q = mjcf.qpos_to_vidyn(mj, qpos)
    jmap = mjcf.velocity_map(mj, qpos)
    assert_close(jmap.T @ vidyn.crba(model, q) @ jmap, mujoco_mass_matrix(mj, d), RTOL, what=f"{name} M")


@given(states)
def test_inverse_dynamics_matches_mj_rne(case):
    """mj_rne(flg_acc=1) = M qacc + Coriolis, centrifugal and gravity terms (no armature, no
    passive or constraint forces) = Jᵀ rnea(q, v, a); with flg_acc=0 it is qfrc_bias."""
    name, seed, flavour = case
    mj, model = load(name)
    qpos, qvel, qacc = random_state(mj, seed, flavour)
    d = mujoco_data(mj, qpos, qvel, qacc)
    q, v, a = vidyn_state(mj, qpos, qvel, qacc)
    expected = np.zeros(mj.nv)
    mujoco.mj_rne(mj, d, 1, expected)
    assert_close(mjcf.force_from_vidyn(mj, q, vidyn.rnea(model, q, v, a)), expected, RTOL, what=f"{name} rnea")
    assert_close(vidyn.rnea(model, q, v, a), mjcf.force_to_vidyn(mj, qpos, expected), RTOL, what=f"{name} rnea (vidyn side)")
    # qacc = 0 is not a = 0 for a free joint (a_lin = −ω × v_lin): qfrc_bias is not vidyn's nle
    a0 = mjcf.qacc_to_vidyn(mj, qpos, qvel, np.zeros(mj.nv))
    assert_close(mjcf.force_from_vidyn(mj, q, vidyn.rnea(model, q, v, a0)), d.qfrc_bias, RTOL, what=f"{name} bias")


@given(states)
def test_site_jacobians_match_mj_jacSite(case):
    """velocity_map turns vidyn's Jacobians into MuJoCo's: jacobian(…, "local_world_aligned") @ J
    (velocity of the site, world axes) = [mj_jacSite's jacp; jacr]."""
    name, seed, flavour = case
    mj, model = load(name)
    qpos, qvel, qacc = random_state(mj, seed, flavour)
    d = mujoco_data(mj, qpos, qvel, qacc)
    q, jmap = mjcf.qpos_to_vidyn(mj, qpos), mjcf.velocity_map(mj, qpos)
    jacp, jacr = np.zeros((3, mj.nv)), np.zeros((3, mj.nv))
    for s in range(mj.nsite):
        mujoco.mj_jacSite(mj, d, jacp, jacr, s)
        jac = vidyn.jacobian(model, q, mj.site(s).name, "local_world_aligned") @ jmap
        assert_close(jac, np.vstack([jacp, jacr]), RTOL, what=f"{name} site {s} Jacobian")


@given(states)
def test_state_conversions_round_trip(case):
    name, seed, flavour = case
    mj, _ = load(name)
    qpos, qvel, qacc = random_state(mj, seed, flavour)
    qpos = mjcf.qpos_from_vidyn(mj, mjcf.qpos_to_vidyn(mj, qpos))  # normalised quaternions
    q, v, a = vidyn_state(mj, qpos, qvel, qacc)
    assert_close(mjcf.qpos_from_vidyn(mj, q), qpos, 1e-15, what="qpos")
    assert_close(mjcf.qvel_from_vidyn(mj, q, v), qvel, 1e-14, what="qvel")
    assert_close(mjcf.qacc_from_vidyn(mj, q, v, a), qacc, 1e-13, what="qacc")
    jmap = mjcf.velocity_map(mj, qpos)
    assert_close(jmap @ qvel, v, 1e-14, what="velocity_map")
    assert_close(jmap.T @ jmap, np.eye(mj.nv), 1e-14, what="J orthogonal")


def test_qpos_to_vidyn_reorders_and_normalises_quaternions():
    mj, _ = load("humanoid")
    qpos = mj.qpos0.copy()
    qpos[3:7] = [2.0, 0.0, 0.0, 0.0]  # root: [w x y z], not unit
    qpos[mj.joint("shoulder").qposadr[0] :][:4] = [0.0, 0.0, 3.0, 4.0]
    q = mjcf.qpos_to_vidyn(mj, qpos)
    assert_close(q[3:7], [0, 0, 0, 1], 0, what="root")
    assert_close(q[mj.joint("shoulder").qposadr[0] :][:4], [0, 3 / 5, 4 / 5, 0], 1e-16, what="shoulder")
    assert_close(q[:3], [0, 0, 1.3], 0, what="root position")
    with pytest.raises(vidyn.InputError, match="shape"):
        mjcf.qpos_to_vidyn(mj, qpos[:-1])
    qpos[3:7] = 0.0
    with pytest.raises(vidyn.InputError, match="quaternion"):
        mjcf.qpos_to_vidyn(mj, qpos)


def test_hinge_ref_and_gravity_flag():
    """At MuJoCo's qpos0 (hinges at their `ref`) the vidyn model is in the model pose; with
    gravity disabled in MJCF the model has none."""
    mj, model = load("hinge_chain")
    q = mjcf.qpos_to_vidyn(mj, mj.qpos0)
    assert_close(q[1:3], np.deg2rad([25, -70]), 1e-15, what="ref (MJCF angles are in degrees)")
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    assert_close(vidyn.frame_placement(model, q, "l3")[:3, 3], d.xpos[mj.body("l3").id], RTOL, what="l3")
    no_gravity = mjcf.from_mjcf_string(HINGE_CHAIN.replace("<option ", '<option><flag gravity="disable"/></option><option '))
    assert_close(no_gravity.gravity, np.zeros(3), 0, what="gravity")


def test_from_mjcf_reads_files(tmp_path):
    path = tmp_path / "chain.xml"
    path.write_text(HINGE_CHAIN)
    mj, expected = load("hinge_chain")
    model = mjcf.from_mjcf(path)
    q = model.random_configuration(0)
    assert_close(vidyn.crba(model, q), vidyn.crba(expected, q), 0, what="M")
    binary = tmp_path / "chain.mjb"
    mujoco.mj_saveModel(mj, str(binary), None)
    assert mjcf.from_mjcf(str(binary)).joint_names == expected.joint_names
    with pytest.raises(mjcf.MjcfError, match="cannot load"):
        mjcf.from_mjcf(tmp_path / "missing.xml")


# ------------------------------------------------------------------------------------------
# Refused and dropped features


def one_body(joint: str, extra: str = "", inside: str = "") -> str:
    return f"""<mujoco><worldbody><body name="b" pos="0 0 1">{joint}
      <inertial pos="0 0 -0.1" mass="1" diaginertia="0.01 0.01 0.01"/>{inside}</body>
      <body name="c"><joint name="c" type="hinge"/><geom size="0.1"/></body></worldbody>{extra}</mujoco>"""


def test_armature_is_refused_unless_ignored():
    xml = one_body('<joint name="hinge" type="hinge" armature="0.1"/>')
    with pytest.raises(mjcf.MjcfError, match="armature on joint.* 'hinge'.*ignore_armature=True"):
        mjcf.from_mjcf_string(xml)
    with pytest.warns(vidyn.ModelWarning, match="armature on joint.* 'hinge'"):
        model = mjcf.from_mjcf_string(xml, ignore_armature=True)
    # the mass matrix is MuJoCo's without the armature
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    assert_close(vidyn.crba(model, model.neutral()) + np.diag(mj.dof_armature), mujoco_mass_matrix(mj, d), RTOL, what="M")


def test_errors_are_model_and_value_errors():
    assert issubclass(mjcf.MjcfError, vidyn.ModelError) and issubclass(mjcf.MjcfError, ValueError)


@pytest.mark.parametrize(
    ("joint", "extra", "inside", "feature"),
    [
        ('<joint name="j" type="hinge" damping="0.5"/>', "", "", "joint damping on 'j'"),
        ('<joint name="j" type="slide" stiffness="3" springref="0.1"/>', "", "", "joint stiffness on 'j'"),
        ('<joint name="j" type="ball" frictionloss="0.2"/>', "", "", "joint frictionloss on 'j'"),
        ('<joint name="j" type="hinge"/>', "", "", None),
        ('<joint name="j" type="hinge"/>', "", '<body gravcomp="1"><geom size="0.1"/></body>', "gravcomp"),
        ('<joint name="j" type="hinge"/>', '<equality><joint joint1="j" joint2="c"/></equality>', "", "1 equality constraint"),
        ('<joint name="j" type="hinge"/>', '<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>', "", "1 tendon"),
        ('<joint name="j" type="hinge"/>', '<option density="1.2"/>', "", "fluid forces"),
    ],
)
def test_dropped_features_are_named_in_a_warning(joint, extra, inside, feature, recwarn):
    xml = one_body(joint, extra, inside)
    mjcf.from_mjcf_string(xml)
    messages = [str(w.message) for w in recwarn if issubclass(w.category, vidyn.ModelWarning)]
    if feature is None:  # geoms, limits, actuators, sensors: ignored silently
        assert messages == []
    else:
        assert len(messages) == 1 and feature in messages[0], messages
    # and the rigid-body dynamics is still MuJoCo's
    mj = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mj)
    mujoco.mj_forward(mj, d)
    model = mjcf.from_mjmodel(mj)
    assert_close(vidyn.crba(model, mjcf.qpos_to_vidyn(mj, mj.qpos0)), mujoco_mass_matrix(mj, d), RTOL, what="M")


def test_limits_actuators_sensors_and_geometry_are_ignored_silently(recwarn):
    xml = one_body(
        '<joint name="j" type="hinge" range="-1 1" limited="true" margin="0.01"/>',
        '<actuator><motor joint="j" gear="2"/><position joint="c" kp="10"/></actuator><sensor><jointpos joint="j"/></sensor>',
        '<geom type="box" size="0.1 0.1 0.1" margin="0.02" mass="0"/><camera name="cam"/><light/>',
    )
    mjcf.from_mjcf_string(xml)
    assert [w for w in recwarn if issubclass(w.category, vidyn.ModelWarning)] == []


def test_mujoco_refusals_are_mjcf_errors():
    nested_free = one_body('<joint name="j" type="hinge"/>', inside='<body><freejoint/><geom size="0.1"/></body>')
    with pytest.raises(mjcf.MjcfError, match="free joint"):
        mjcf.from_mjcf_string(nested_free)
    with pytest.raises(mjcf.MjcfError, match="cannot compile"):
        mjcf.from_mjcf_string("<mujoco><worldbody><body>")


def test_unknown_joint_types_are_refused():
    mj = mujoco.MjModel.from_xml_string(one_body('<joint name="j" type="hinge"/>'))
    mj.jnt_type[0] = 7  # a joint type of a future MuJoCo
    with pytest.raises(mjcf.MjcfError, match="joint 'j' has type 7"):
        mjcf.from_mjmodel(mj)
