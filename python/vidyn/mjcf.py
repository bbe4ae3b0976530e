"""MJCF import: the kinematic tree and inertias of a MuJoCo model as a :class:`vidyn.Model`.

Needs MuJoCo's Python package (``pip install mujoco``), which parses and compiles the MJCF
file; this module reads the *compiled* ``mujoco.MjModel`` (so defaults, ``childclass``,
``inertiafromgeom``, ``balanceinertia``, ``boundmass``, includes and ``<frame>`` are applied by
MuJoCo itself) and imports nothing from ``mujoco`` until a function here is called::

    import mujoco, vidyn
    from vidyn import mjcf

    model = mjcf.from_mjcf("robot.xml")                    # or vidyn.Model.from_mjcf(...)
    mj = mujoco.MjModel.from_xml_path("robot.xml")
    data = mujoco.MjData(mj)
    q = mjcf.qpos_to_vidyn(mj, data.qpos)
    v = mjcf.qvel_to_vidyn(mj, data.qpos, data.qvel)
    a = mjcf.qacc_to_vidyn(mj, data.qpos, data.qvel, data.qacc)
    qfrc = mjcf.force_from_vidyn(mj, q, vidyn.rnea(model, q, v, a))  # = mj_rne(mj, data, 1, …)

What maps
    Bodies, their placements (``pos``/``quat``, after MuJoCo's compilation) and inertias
    (``mass``, ``inertial pos/quat``, principal inertia) → vidyn bodies. Joints: ``hinge`` →
    revolute, ``slide`` → prismatic, ``ball`` → spherical, ``free`` → free-flyer. A joint's
    ``pos`` (its anchor in the body) and ``ref`` (the ``qpos`` at which the body sits at its
    model pose) are built into the joint placements, so vidyn's ``q`` is MuJoCo's ``qpos``
    up to the quaternion layout. A body with several joints becomes a chain of massless
    vidyn bodies, the last of which carries the body's inertia; a body with no joint (welded to
    its parent, mocap bodies included, at their model pose) is merged into its nearest moving
    ancestor (mass, centre of mass and inertia combined with the parallel-axis theorem;
    dropped when welded to the world, where it cannot move). Gravity: ``option/gravity``,
    zero when ``<flag gravity="disable"/>``. Angles in the MJCF (``ref``, ``euler``,
    ``axisangle``) are in the document's unit (degrees by default): MuJoCo's compiler has
    converted them, and every angle vidyn sees or returns is in radians.

Names and frames
    Each vidyn joint has the MuJoCo joint's name (unnamed ones: ``<body>_joint<k>``, ``k``
    its rank in the body; an unnamed body is ``body<id>``; ``_1``, ``_2``… are appended to a
    generated name that is taken). Every MuJoCo body except the world
    is a frame of that name placed exactly at the MuJoCo body frame (``data.xpos``,
    ``data.xmat``), and every site a frame of its name (``<name>_site`` if a body has that
    name; unnamed sites ``site<id>``). vidyn's body frames sit at the joint anchors, so use
    these frames, not body indices, to compare with MuJoCo.

Coordinates
    vidyn's joint order is MuJoCo's (checked when the model is built): ``q`` and ``v`` use
    MuJoCo's ``jnt_qposadr``/``jnt_dofadr`` ranges, so no permutation is needed. Hinge and
    slide coordinates are equal. Quaternions are ``[w, x, y, z]`` in MuJoCo and ``[x, y, z, w]``
    in vidyn. A ball joint's velocity is the angular velocity in the child body frame in both.
    A free joint's MuJoCo velocity is ``[ṗ (world axes); ω (body axes)]`` and vidyn's is
    ``[Rᵀṗ; ω]`` (Pinocchio's body velocity), so free-joint velocities, accelerations and
    forces need the rotation ``R`` of the body: use :func:`qvel_to_vidyn`,
    :func:`qacc_to_vidyn`, :func:`force_to_vidyn` and their inverses. With
    ``v = J qvel`` (:func:`velocity_map`), ``M_mujoco = Jᵀ M J`` and ``qfrc = Jᵀ tau``.

What is refused (:class:`MjcfError`)
    Joint ``armature`` (MuJoCo adds it to the diagonal of the mass matrix; vidyn's mass matrix
    has no such term): pass ``ignore_armature=True`` to drop it with a warning. Joint types
    other than the four above, and free joints below a moving body or combined with other
    joints (MuJoCo's compiler refuses these too).

What is dropped with a :class:`vidyn.ModelWarning` (MuJoCo's simulation would differ, but
the mass matrix and ``rnea`` are unchanged)
    Joint damping, stiffness (springs, ``springref``), ``frictionloss``, gravity compensation
    (``gravcomp``), fluid forces (``density``, ``viscosity``), equality constraints, tendons,
    flex (deformable) objects (their vertex bodies and joints are imported as ordinary
    bodies; the elasticity is dropped) and engine plugins.

What is ignored silently (not part of a rigid-body tree's equations of motion)
    Geometry (geoms, meshes, heightfields) and everything about contacts (``margin``,
    ``gap``, ``friction``, ``solref``, ``solimp``, contact pairs and exclusions), joint limits
    (``range``, ``limited``), actuators, sensors, cameras, lights, keyframes (convert their
    ``qpos`` with :func:`qpos_to_vidyn`), visual and simulator options.
"""

from __future__ import annotations

import importlib
import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal

import numpy as np
import numpy.typing as npt

from vidyn._arrays import finite_f64
from vidyn._core import InputError, Model, ModelBuilder, ModelError, ModelWarning

__all__ = [
    "MjcfError",
    "force_from_vidyn",
    "force_to_vidyn",
    "from_mjcf",
    "from_mjcf_string",
    "from_mjmodel",
    "qacc_from_vidyn",
    "qacc_to_vidyn",
    "qpos_from_vidyn",
    "qpos_to_vidyn",
    "qvel_from_vidyn",
    "qvel_to_vidyn",
    "velocity_map",
]

Array = npt.NDArray[np.float64]
#: A ``mujoco.MjModel``; typed ``Any`` because the ``mujoco`` package has no type stubs and is
#: an optional dependency.
MjModel = Any

# MuJoCo's joint types (mjtJoint): stable values of the C API.
_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_JointKind = Literal["revolute", "prismatic", "spherical", "freeflyer"]
_KIND: dict[int, _JointKind] = {_FREE: "freeflyer", _BALL: "spherical", _SLIDE: "prismatic", _HINGE: "revolute"}


class MjcfError(ModelError, ValueError):
    """An MJCF model that cannot be imported exactly; the message names the MJCF feature and
    the elements that use it. Also a ValueError."""


# ------------------------------------------------------------------------------------------
# Loading


def _mujoco() -> Any:
    """The ``mujoco`` module, or ImportError saying how to install it."""
    try:
        return importlib.import_module("mujoco")
    except ImportError as e:
        raise ImportError("vidyn.mjcf needs MuJoCo's Python package: pip install mujoco") from e


def from_mjcf(source: str | os.PathLike[str], *, ignore_armature: bool = False) -> Model:
    """Loads an MJCF file (``.xml``; a compiled ``.mjb`` works too) with MuJoCo's parser and
    returns its kinematic tree and inertias as a vidyn Model (see the module docstring for
    what maps, what is refused and what is dropped).

    ``ignore_armature``: drop joint armature with a ModelWarning instead of refusing it.
    Raises MjcfError (a file MuJoCo cannot compile, or a refused feature); warns
    ModelWarning for dropped features."""
    mujoco = _mujoco()
    path = os.fspath(source)
    try:
        if path.endswith(".mjb"):
            mj = mujoco.MjModel.from_binary_path(path)
        else:
            mj = mujoco.MjModel.from_xml_path(path)
    except ValueError as e:
        raise MjcfError(f"MuJoCo cannot load {path!r}: {e}") from e
    model, notes = _convert(mj, ignore_armature)
    _warn(notes, stacklevel=2)
    return model


def from_mjcf_string(xml: str, *, ignore_armature: bool = False) -> Model:
    """Like :func:`from_mjcf`, for an MJCF document given as a string (files it includes
    or meshes it loads are looked up relative to the working directory)."""
    mujoco = _mujoco()
    try:
        mj = mujoco.MjModel.from_xml_string(xml)
    except ValueError as e:
        raise MjcfError(f"MuJoCo cannot compile the MJCF document: {e}") from e
    model, notes = _convert(mj, ignore_armature)
    _warn(notes, stacklevel=2)
    return model


def from_mjmodel(mj_model: MjModel, *, ignore_armature: bool = False) -> Model:
    """Like :func:`from_mjcf`, for a compiled ``mujoco.MjModel``."""
    model, notes = _convert(mj_model, ignore_armature)
    _warn(notes, stacklevel=2)
    return model


def _warn(notes: list[str], stacklevel: int) -> None:
    if notes:
        text = "; ".join(notes)
        warnings.warn(f"MJCF features not imported into the vidyn model: {text}", ModelWarning, stacklevel=stacklevel + 1)


# ------------------------------------------------------------------------------------------
# Small SE(3) helpers: 4x4 homogeneous matrices, MuJoCo quaternions [w, x, y, z].


def _quat_matrix(q_wxyz: npt.ArrayLike) -> Array:
    """Rotation matrix of a (normalised here) quaternion ``[w, x, y, z]``."""
    w, x, y, z = np.asarray(q_wxyz, dtype=np.float64) / np.linalg.norm(q_wxyz)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _axis_angle(axis: Array, angle: float) -> Array:
    """Rotation matrix by ``angle`` about the unit vector ``axis`` (Rodrigues)."""
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    rotation: Array = np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)
    return rotation


def _transform(rotation: Array | None = None, translation: npt.ArrayLike | None = None) -> Array:
    t = np.eye(4)
    if rotation is not None:
        t[:3, :3] = rotation
    if translation is not None:
        t[:3, 3] = translation
    return t


def _pose(pos: npt.ArrayLike, quat_wxyz: npt.ArrayLike) -> Array:
    """The transform of a MuJoCo ``pos``/``quat`` pair (a frame in its parent frame)."""
    return _transform(_quat_matrix(quat_wxyz), pos)


# ------------------------------------------------------------------------------------------
# Conversion


@dataclass
class _Inertia:
    """Mass, centre of mass and rotational inertia about it, in one vidyn body frame."""

    mass: float = 0.0
    com: Array = field(default_factory=lambda: np.zeros(3))
    inertia: Array = field(default_factory=lambda: np.zeros((3, 3)))

    def __add__(self, other: _Inertia) -> _Inertia:
        """The two rigidly joined (parallel-axis theorem about the common centre of mass)."""
        mass = self.mass + other.mass
        if mass <= 0.0:
            return _Inertia(0.0, np.zeros(3), self.inertia + other.inertia)
        com = (self.mass * self.com + other.mass * other.com) / mass
        total = self.inertia + other.inertia
        for part in (self, other):
            d = part.com - com
            total = total + part.mass * (float(d @ d) * np.eye(3) - np.outer(d, d))
        return _Inertia(mass, com, 0.5 * (total + total.T))


@dataclass
class _Body:
    """One vidyn body to add: its builder parent (None: world), joint and placement."""

    parent: int | None
    name: str
    kind: _JointKind
    placement: Array
    axis: Array | None
    inertia: _Inertia = field(default_factory=_Inertia)


@dataclass
class _Tree:
    """What ``ModelBuilder`` needs, gathered from an MjModel before anything is added."""

    bodies: list[_Body] = field(default_factory=list)
    #: (name, builder body or None for the world, placement in that body's frame)
    frames: list[tuple[str, int | None, Array]] = field(default_factory=list)


def _names(mj: MjModel) -> tuple[list[str], list[str]]:
    """Body and joint names, with generated names for unnamed ones (module docstring)."""
    bodies = [mj.body(i).name for i in range(mj.nbody)]
    named = set(bodies)
    for i, name in enumerate(bodies):
        if not name:
            bodies[i] = _unique(f"body{i}", named)
            named.add(bodies[i])
    joints = []
    taken = {mj.joint(j).name for j in range(mj.njnt)}
    for j in range(mj.njnt):
        name = mj.joint(j).name
        if not name:
            b = int(mj.jnt_bodyid[j])
            name = _unique(f"{bodies[b]}_joint{j - int(mj.body_jntadr[b])}", taken)
            taken.add(name)
        joints.append(name)
    return bodies, joints


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 1
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    return candidate


def _check_refused(mj: MjModel, joint_names: list[str], ignore_armature: bool) -> list[str]:
    """Raises MjcfError for what cannot be imported exactly; returns the notes for the
    ModelWarning about dropped armature."""
    refused, notes = [], []
    for j in range(mj.njnt):
        t, b = int(mj.jnt_type[j]), int(mj.jnt_bodyid[j])
        if t not in _KIND:
            refused.append(f"joint '{joint_names[j]}' has type {t}, which vidyn does not know")
        elif t == _FREE and (int(mj.body_jntnum[b]) != 1 or _moving_ancestor(mj, b)):
            refused.append(f"free joint '{joint_names[j]}' is combined with other joints or below a moving body")
    armed = [joint_names[int(mj.dof_jntid[k])] for k in range(mj.nv) if mj.dof_armature[k] != 0.0]
    if armed:
        what = f"armature on joint(s) {_list(armed)}"
        if ignore_armature:
            notes.append(f"{what} (ignore_armature=True: MuJoCo's mass matrix is vidyn's plus diag(armature))")
        else:
            refused.append(f"{what} (MuJoCo adds it to the diagonal of the mass matrix, vidyn's mass matrix has no such term; pass ignore_armature=True to drop it)")
    if refused:
        raise MjcfError("cannot import this MJCF model exactly: " + "; ".join(refused))
    return notes


def _moving_ancestor(mj: MjModel, body: int) -> bool:
    p = int(mj.body_parentid[body])
    while p != 0:
        if int(mj.body_jntnum[p]) > 0:
            return True
        p = int(mj.body_parentid[p])
    return False


def _list(names: Iterable[str]) -> str:
    """``'a', 'b'``: the distinct names, at most five of them."""
    quoted = [f"'{n}'" for n in dict.fromkeys(names)]
    return ", ".join(quoted[:5]) + (f" and {len(quoted) - 5} more" if len(quoted) > 5 else "")


def _nonzero_joints(mj: MjModel, joint_names: list[str], values: Any, per_dof: bool) -> list[str]:
    """Joints with a non-zero entry in ``values`` (one row per dof, or per joint); ``values``
    None for an array this MuJoCo version does not have."""
    if values is None or len(values) == 0:
        return []
    rows = np.flatnonzero(np.any(np.asarray(values, dtype=np.float64).reshape(len(values), -1) != 0.0, axis=1))
    return [joint_names[int(mj.dof_jntid[r]) if per_dof else int(r)] for r in rows]


def _dropped(mj: MjModel, joint_names: list[str], body_names: list[str]) -> list[str]:
    """Notes on the features that change MuJoCo's simulation but not M(q) nor rnea."""
    per_joint = {
        "damping": [(mj.dof_damping, True), (getattr(mj, "dof_dampingpoly", None), True)],
        "stiffness": [(mj.jnt_stiffness, False), (getattr(mj, "jnt_stiffnesspoly", None), False)],
        "frictionloss": [(mj.dof_frictionloss, True)],
    }
    notes = []
    for what, arrays in per_joint.items():
        found = [n for values, per_dof in arrays for n in _nonzero_joints(mj, joint_names, values, per_dof)]
        if found:
            notes.append(f"joint {what} on {_list(found)}")
    gravcomp = [body_names[i] for i in np.flatnonzero(mj.body_gravcomp)]
    if gravcomp:
        notes.append(f"gravcomp on bodies {_list(gravcomp)}")
    if mj.opt.density != 0.0 or mj.opt.viscosity != 0.0:
        notes.append("fluid forces (option density/viscosity)")
    counts = {"equality constraint(s)": mj.neq, "tendon(s)": mj.ntendon, "flex object(s)": getattr(mj, "nflex", 0), "engine plugin(s)": mj.nplugin}
    notes += [f"{count} {what}" for what, count in counts.items() if count]
    return notes


def _convert(mj: MjModel, ignore_armature: bool) -> tuple[Model, list[str]]:
    """The vidyn Model of a compiled MjModel, and the notes for a ModelWarning."""
    body_names, joint_names = _names(mj)
    notes = _check_refused(mj, joint_names, ignore_armature)
    notes += _dropped(mj, joint_names, body_names)
    tree = _tree(mj, body_names, joint_names)
    model = _build(tree, _model_name(mj), _gravity(mj))
    _check_order(mj, model, joint_names)
    return model, notes


def _model_name(mj: MjModel) -> str:
    """MuJoCo stores the model name first in its names buffer."""
    return bytes(mj.names).split(b"\0", 1)[0].decode() or "mjcf"


def _gravity(mj: MjModel) -> Array:
    if int(mj.opt.disableflags) & int(_mujoco().mjtDisableBit.mjDSBL_GRAVITY):
        return np.zeros(3)
    return np.array(mj.opt.gravity, dtype=np.float64)


def _tree(mj: MjModel, body_names: list[str], joint_names: list[str]) -> _Tree:
    """Walks MuJoCo's bodies (parents come first) and lays out the vidyn bodies and frames.

    For MuJoCo body ``i``, ``host[i]`` is the vidyn body that carries it (None: the world)
    and ``offset[i]`` its body frame in that vidyn body's frame. A joint's vidyn body frame
    sits at the joint anchor ``jnt_pos`` with the MuJoCo body's orientation, so ``offset`` of
    a moving body is a translation by ``-jnt_pos`` of its last joint."""
    tree = _Tree()
    host: list[int | None] = [None] * mj.nbody
    offset = [np.eye(4) for _ in range(mj.nbody)]
    for i in range(1, mj.nbody):
        p = int(mj.body_parentid[i])
        pre = offset[p] @ _pose(mj.body_pos[i], mj.body_quat[i])  # body frame at qpos0
        host[i], offset[i] = host[p], pre
        for j in range(int(mj.body_jntadr[i]), int(mj.body_jntadr[i]) + int(mj.body_jntnum[i])):
            body, anchor = _joint_body(mj, j, host[i], offset[i], joint_names[j])
            tree.bodies.append(body)
            host[i], offset[i] = len(tree.bodies) - 1, _transform(translation=-anchor)
        _add_inertia(mj, i, host[i], offset[i], tree)
        tree.frames.append((body_names[i], host[i], offset[i]))
    taken = set(body_names)
    for s in range(mj.nsite):
        name = mj.site(s).name or f"site{s}"
        name = _unique(name if name not in taken else f"{name}_site", taken)
        taken.add(name)
        b = int(mj.site_bodyid[s])
        tree.frames.append((name, host[b], offset[b] @ _pose(mj.site_pos[s], mj.site_quat[s])))
    return tree


def _joint_body(mj: MjModel, j: int, parent: int | None, pre: Array, name: str) -> tuple[_Body, Array]:
    """The vidyn body of MuJoCo joint ``j`` and its anchor (``jnt_pos``, the origin of the
    vidyn body frame in the MuJoCo body frame). ``pre``: the frame the joint moves (the MuJoCo
    body frame at ``qpos0``, after the body's earlier joints) in the frame of vidyn body
    ``parent``.

    MuJoCo moves that frame by ``T(p) · R(a, qpos − ref) · T(−p)`` (hinge, ``p`` the anchor,
    ``a`` the axis), ``T(a (qpos − ref))`` (slide) or ``T(p) · R(quat) · T(−p)`` (ball); the
    vidyn joint frame is ``pre · T(p)`` turned (hinge) or shifted (slide) by ``−ref``, so that
    vidyn's coordinate is ``qpos`` itself. A free joint sets the world pose directly: its
    placement is the identity and its body frame the MuJoCo body frame."""
    t = int(mj.jnt_type[j])
    if t == _FREE:
        return _Body(parent, name, "freeflyer", np.eye(4), None), np.zeros(3)
    anchor = np.array(mj.jnt_pos[j], dtype=np.float64)
    axis = np.array(mj.jnt_axis[j], dtype=np.float64)
    placement = pre @ _transform(translation=anchor)
    ref = float(mj.qpos0[int(mj.jnt_qposadr[j])])  # the joint's `ref` (hinge, slide)
    if t == _HINGE:
        placement = placement @ _transform(rotation=_axis_angle(axis / np.linalg.norm(axis), -ref))
    elif t == _SLIDE:
        placement = placement @ _transform(translation=-ref * axis / np.linalg.norm(axis))
    return _Body(parent, name, _KIND[t], placement, None if t == _BALL else axis), anchor


def _add_inertia(mj: MjModel, i: int, host: int | None, offset: Array, tree: _Tree) -> None:
    """Adds MuJoCo body ``i``'s inertia (principal moments ``body_inertia`` about the centre
    of mass ``body_ipos``, axes ``body_iquat``, in the body frame) to vidyn body ``host``,
    where the MuJoCo body frame is at ``offset``; dropped on the world."""
    mass = float(mj.body_mass[i])
    if host is None or (mass == 0.0 and not np.any(mj.body_inertia[i])):
        return
    rot = offset[:3, :3] @ _quat_matrix(mj.body_iquat[i])
    com = offset[:3, :3] @ mj.body_ipos[i] + offset[:3, 3]
    inertia = rot @ np.diag(np.asarray(mj.body_inertia[i], dtype=np.float64)) @ rot.T
    body = tree.bodies[host]
    body.inertia = body.inertia + _Inertia(mass, com, 0.5 * (inertia + inertia.T))


def _build(tree: _Tree, name: str, gravity: Array) -> Model:
    builder = ModelBuilder(name)
    for body in tree.bodies:
        i = body.inertia
        builder.add_body(body.parent, body.name, body.kind, body.placement, i.mass, i.com, i.inertia, body.axis)
    for frame, parent, placement in tree.frames:
        builder.add_frame(frame, parent, placement)
    builder.set_gravity(gravity)
    return builder.build()


def _check_order(mj: MjModel, model: Model, joint_names: list[str]) -> None:
    """vidyn numbers bodies depth-first in insertion order, MuJoCo numbers bodies depth-first
    in document order: the joint orders and coordinate ranges must coincide."""
    same = (
        model.joint_names == joint_names
        and model.idx_q == [int(a) for a in mj.jnt_qposadr]
        and model.idx_v == [int(a) for a in mj.jnt_dofadr]
        and (model.nq, model.nv) == (mj.nq, mj.nv)
    )
    if not same:
        raise MjcfError("internal error: vidyn's joint order differs from MuJoCo's (please report with the MJCF file)")


# ------------------------------------------------------------------------------------------
# States: MuJoCo (qpos, qvel, qacc, qfrc) <-> vidyn (q, v, a, tau)


def _vector(x: npt.ArrayLike, n: int, what: str) -> Array:
    """A copy of ``x`` as an (n,) float64 vector of finite entries."""
    return np.array(finite_f64(x, what, (n,)))


def _unit(quat: Array, what: str) -> Array:
    n = float(np.linalg.norm(quat))
    if n < 1e-9:
        raise InputError(f"{what} has a quaternion of norm {n}, which is not a rotation")
    return quat / n


def _joints_of_type(mj: MjModel, t: int) -> list[tuple[int, int]]:
    """(qpos address, dof address) of the joints of MuJoCo type ``t``."""
    return [(int(mj.jnt_qposadr[j]), int(mj.jnt_dofadr[j])) for j in range(mj.njnt) if int(mj.jnt_type[j]) == t]


def _free_rotations(mj: MjModel, q: Array, xyzw: bool) -> list[tuple[int, Array]]:
    """(dof address, world rotation R of the body) of each free joint at configuration ``q``
    (vidyn's layout when ``xyzw``, else MuJoCo's)."""
    out = []
    for qa, da in _joints_of_type(mj, _FREE):
        quat = q[qa + 3 : qa + 7]
        out.append((da, _quat_matrix(np.roll(quat, 1) if xyzw else quat)))
    return out


def qpos_to_vidyn(mj_model: MjModel, qpos: npt.ArrayLike) -> Array:
    """vidyn's ``q`` (nq,) of MuJoCo's ``qpos`` (nq,): quaternions reordered from
    ``[w, x, y, z]`` to ``[x, y, z, w]`` and normalised (MuJoCo normalises them in its
    kinematics too); everything else is unchanged."""
    q = _vector(qpos, mj_model.nq, "qpos")
    for t, first in ((_FREE, 3), (_BALL, 0)):
        for qa, _ in _joints_of_type(mj_model, t):
            s = slice(qa + first, qa + first + 4)
            q[s] = np.roll(_unit(q[s], "qpos"), -1)
    return q


def qpos_from_vidyn(mj_model: MjModel, q: npt.ArrayLike) -> Array:
    """MuJoCo's ``qpos`` (nq,) of vidyn's ``q`` (nq,): the inverse of :func:`qpos_to_vidyn`."""
    qpos = _vector(q, mj_model.nq, "q")
    for t, first in ((_FREE, 3), (_BALL, 0)):
        for qa, _ in _joints_of_type(mj_model, t):
            s = slice(qa + first, qa + first + 4)
            qpos[s] = np.roll(_unit(qpos[s], "q"), 1)
    return qpos


def velocity_map(mj_model: MjModel, qpos: npt.ArrayLike) -> Array:
    """``J`` (nv, nv) with vidyn's ``v = J @ qvel`` at MuJoCo's ``qpos`` (nq,): the identity
    but for a block ``Rᵀ`` on the linear velocity of each free joint (``R``: the body's world
    rotation). ``J`` is orthogonal; ``M_mujoco = Jᵀ M_vidyn J``, ``qfrc = Jᵀ tau``, and a
    vidyn Jacobian ``jac`` becomes MuJoCo's as ``jac @ J``."""
    rotations = _free_rotations(mj_model, _vector(qpos, mj_model.nq, "qpos"), xyzw=False)
    jmap = np.eye(mj_model.nv)
    for da, r in rotations:
        jmap[da : da + 3, da : da + 3] = r.T
    return jmap


def qvel_to_vidyn(mj_model: MjModel, qpos: npt.ArrayLike, qvel: npt.ArrayLike) -> Array:
    """vidyn's ``v`` (nv,) of MuJoCo's ``qvel`` (nv,) at ``qpos`` (nq,): a free joint's linear
    velocity goes from world to body axes, ``v_lin = Rᵀ qvel_lin``; the rest is unchanged."""
    v = _vector(qvel, mj_model.nv, "qvel")
    for da, r in _free_rotations(mj_model, _vector(qpos, mj_model.nq, "qpos"), xyzw=False):
        v[da : da + 3] = r.T @ v[da : da + 3]
    return v


def qvel_from_vidyn(mj_model: MjModel, q: npt.ArrayLike, v: npt.ArrayLike) -> Array:
    """MuJoCo's ``qvel`` (nv,) of vidyn's ``v`` (nv,) at vidyn's ``q`` (nq,):
    ``qvel_lin = R v_lin`` for each free joint."""
    qvel = _vector(v, mj_model.nv, "v")
    for da, r in _free_rotations(mj_model, _vector(q, mj_model.nq, "q"), xyzw=True):
        qvel[da : da + 3] = r @ qvel[da : da + 3]
    return qvel


def qacc_to_vidyn(mj_model: MjModel, qpos: npt.ArrayLike, qvel: npt.ArrayLike, qacc: npt.ArrayLike) -> Array:
    """vidyn's ``a = dv/dt`` (nv,) of MuJoCo's ``qacc`` (nv,) at ``qpos``, ``qvel``: for a free
    joint ``d(Rᵀ ṗ)/dt = Rᵀ p̈ − ω × (Rᵀ ṗ)`` (``ω`` in body axes), the rest unchanged."""
    qvel_ = _vector(qvel, mj_model.nv, "qvel")
    a = _vector(qacc, mj_model.nv, "qacc")
    for da, r in _free_rotations(mj_model, _vector(qpos, mj_model.nq, "qpos"), xyzw=False):
        a[da : da + 3] = r.T @ a[da : da + 3] - np.cross(qvel_[da + 3 : da + 6], r.T @ qvel_[da : da + 3])
    return a


def qacc_from_vidyn(mj_model: MjModel, q: npt.ArrayLike, v: npt.ArrayLike, a: npt.ArrayLike) -> Array:
    """MuJoCo's ``qacc`` (nv,) of vidyn's ``a`` (nv,) at vidyn's ``q``, ``v``: the inverse of
    :func:`qacc_to_vidyn`, ``p̈ = R (a_lin + ω × v_lin)`` for a free joint."""
    v_ = _vector(v, mj_model.nv, "v")
    qacc = _vector(a, mj_model.nv, "a")
    for da, r in _free_rotations(mj_model, _vector(q, mj_model.nq, "q"), xyzw=True):
        qacc[da : da + 3] = r @ (qacc[da : da + 3] + np.cross(v_[da + 3 : da + 6], v_[da : da + 3]))
    return qacc


def force_to_vidyn(mj_model: MjModel, qpos: npt.ArrayLike, qfrc: npt.ArrayLike) -> Array:
    """vidyn's generalised force ``tau`` (nv,) of MuJoCo's ``qfrc`` (nv,) (``qfrc_bias``,
    ``mj_rne``'s result, ``qfrc_applied``…) at ``qpos``: the same power for every velocity,
    so a free joint's force goes to body axes, ``tau_lin = Rᵀ qfrc_lin``."""
    tau = _vector(qfrc, mj_model.nv, "qfrc")
    for da, r in _free_rotations(mj_model, _vector(qpos, mj_model.nq, "qpos"), xyzw=False):
        tau[da : da + 3] = r.T @ tau[da : da + 3]
    return tau


def force_from_vidyn(mj_model: MjModel, q: npt.ArrayLike, tau: npt.ArrayLike) -> Array:
    """MuJoCo's ``qfrc`` (nv,) of vidyn's ``tau`` (nv,) at vidyn's ``q``: ``qfrc = Jᵀ tau``
    (:func:`velocity_map`), ``qfrc_lin = R tau_lin`` for a free joint."""
    qfrc = _vector(tau, mj_model.nv, "tau")
    for da, r in _free_rotations(mj_model, _vector(q, mj_model.nq, "q"), xyzw=True):
        qfrc[da : da + 3] = r @ qfrc[da : da + 3]
    return qfrc
