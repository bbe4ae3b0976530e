"""Locked joints (``Model.lock_joints``) against Pinocchio's ``buildReducedModel``: Talos with
only its legs free, as crocoddyl's biped examples build it, compared on every quantity of the
oracle suite; errors for bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

import vidyn
from test_pinocchio_oracle import compare_model
from vidyn import models

pin = pytest.importorskip("pinocchio")

#: the joints crocoddyl's Talos examples keep free (with the free-flyer base)
LEGS = [f"leg_{side}_{k}_joint" for side in ("left", "right") for k in range(1, 7)]


@pytest.fixture(scope="module")
def talos():
    robots = models.example_robot_data_dir()
    if robots is None:
        pytest.skip("example-robot-data is not installed")
    path = robots / models.EXAMPLE_ROBOTS["talos"].urdf
    vd = vidyn.Model.from_urdf(str(path), floating_base=True)
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    q_ref = models.reference_configuration(vd, "talos", "half_sitting")
    return vd, pm, q_ref


def test_talos_legs_match_pinocchios_reduced_model(talos):
    """Every joint but the base and the legs locked at the half-sitting posture: dimensions,
    joint names, and all oracle quantities (placements, frames, RNEA, ABA, CRBA, M⁻¹,
    energies, Jacobians) within the oracle tolerance on random states."""
    vd, pm, q_ref = talos
    locked = [name for name in vd.joint_names if name not in LEGS and name != "root_joint"]
    reduced = vd.lock_joints(locked, q_ref)
    assert (reduced.nq, reduced.nv) == (7 + 12, 6 + 12)
    assert list(reduced.joint_names) == [n for n in vd.joint_names if n not in locked]
    assert reduced.total_mass == pytest.approx(vd.total_mass, rel=1e-14)
    q_pin = np.concatenate([q_ref[:7], q_ref[7:]])  # same layout (no continuous joints)
    pm_reduced = pin.buildReducedModel(pm, [pm.getJointId(name) for name in locked], q_pin)
    results = compare_model(reduced, pm_reduced)
    worst = {key: err / tol for key, (err, tol) in results.items() if not key.startswith("_")}
    assert worst and max(worst.values()) <= 1.0, {k: v for k, v in worst.items() if v > 1.0}


def test_the_locked_posture_is_where_the_frames_stay(talos):
    """The hands of the reduced model are where the full model puts them at the reference
    posture, whatever the (kept) base does: the arms are rigid with the torso."""
    vd, _, q_ref = talos
    locked = [name for name in vd.joint_names if name not in LEGS and name != "root_joint"]
    reduced = vd.lock_joints(locked, q_ref)
    kept = [i for i, name in enumerate(vd.joint_names) if name not in locked]
    iq = np.concatenate([np.arange(vd.idx_q[i], vd.idx_q[i] + (7 if i == 0 else 1)) for i in kept])
    hand = "gripper_left_joint" if "gripper_left_joint" in vd.frame_names else "arm_left_7_link"
    np.testing.assert_allclose(vidyn.frame_placement(reduced, q_ref[iq], hand), vidyn.frame_placement(vd, q_ref, hand), atol=1e-14)


def test_bad_locks_are_errors(talos):
    vd, _, q_ref = talos
    with pytest.raises(vidyn.UnknownNameError):
        vd.lock_joints(["no_such_joint"], q_ref)
    with pytest.raises(vidyn.InputError, match="q_ref"):
        vd.lock_joints(["arm_left_1_joint"], q_ref[:-1])
    with pytest.raises(vidyn.ModelError, match="twice"):
        vd.lock_joints(["arm_left_1_joint", "arm_left_1_joint"], q_ref)
    with pytest.raises(vidyn.ModelError, match="every joint"):
        vd.lock_joints(list(vd.joint_names), q_ref)
