"""Hypothesis strategies shared by the property tests and the random-tree oracle.

* :func:`model_specs` draws a random kinematic tree as a plain-data :class:`ModelSpec`, which
  can be built both as a vidyn model (:meth:`ModelSpec.build`) and, identically, as a
  Pinocchio model (:func:`to_pinocchio`).  :func:`models` is the same strategy mapped through
  ``build``.
* :func:`states` draws ``(q, v, a, tau)`` for a given model.

Design (STYLE.md §10): the *structure* of a tree (size, parents, joint kinds, axis and
placement flavours) is drawn by hypothesis so that it shrinks to the smallest failing tree;
the continuous parameters (rotations, lengths, inertias) come from ``np.random.default_rng``
seeded by one hypothesis integer, which is reproducible, shrinks towards seed 0 and keeps
examples small.  Special values (identity placements, aligned axes, zero velocity, rotations
within 1e-7 of the identity, angles of exactly ±π) are mixed in with ``st.sampled_from``
because uniform sampling essentially never hits them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from hypothesis import strategies as st

import vidyn

# Kinds the builder accepts.  If vidyn exports the list behind `Joint::examples()` we use it,
# so a new kind shows up here (and fails loudly below until the strategy knows its layout).
_KNOWN_KINDS = ("revolute", "prismatic", "spherical", "freeflyer", "planar")
JOINT_KINDS: tuple[str, ...] = tuple(getattr(vidyn, "JOINT_KINDS", _KNOWN_KINDS))
assert set(JOINT_KINDS) <= set(_KNOWN_KINDS), f"strategies.py does not know joint kinds {set(JOINT_KINDS) - set(_KNOWN_KINDS)}"

#: (nq, nv) of every kind, Pinocchio's layouts.
KIND_DIMS = {"revolute": (1, 1), "prismatic": (1, 1), "spherical": (4, 3), "freeflyer": (7, 6), "planar": (4, 3)}


# ------------------------------------------------------------------------------------------
# Small SO(3)/SE(3) helpers in NumPy (independent of vidyn, so usable as references).
# Quaternions are [x, y, z, w] like Pinocchio's q layout.


def quat_to_matrix(qu) -> np.ndarray:
    x, y, z, w = np.asarray(qu, dtype=float) / np.linalg.norm(qu)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_from_rotvec(w) -> np.ndarray:
    """Unit quaternion [x y z w] of the rotation exp(w×) (exact for tiny and large angles)."""
    w = np.asarray(w, dtype=float)
    th = float(np.linalg.norm(w))
    if th < 1e-8:
        # sin(θ/2)/θ = 1/2 − θ²/48 + …: second term below eps for θ < 1e-8
        s = 0.5
    else:
        s = np.sin(th / 2) / th
    return np.array([*(s * w), np.cos(th / 2)])


def skew(w) -> np.ndarray:
    return np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]], dtype=float)


def log3(r: np.ndarray) -> np.ndarray:
    """Rotation vector of a rotation matrix, accurate near 0 (used on near-identity inputs)."""
    vee = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / 2.0
    s = np.linalg.norm(vee)
    c = (np.trace(r) - 1.0) / 2.0
    th = np.arctan2(s, c)
    if th < 1e-6:
        return vee * (1.0 + th * th / 6.0)  # θ/sin θ = 1 + θ²/6 + O(θ⁴)
    assert th < np.pi - 1e-3, "log3 helper is only for rotations away from π"
    return vee * (th / s)


def homogeneous(rot: np.ndarray, trans) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = rot
    m[:3, 3] = trans
    return m


def inv_homogeneous(m: np.ndarray) -> np.ndarray:
    r, p = m[:3, :3], m[:3, 3]
    return homogeneous(r.T, -r.T @ p)


def act_motion_inv(m: np.ndarray, v6: np.ndarray) -> np.ndarray:
    """Express the motion `v6` ([lin; ang], in frame A) in frame B, where m = AMB."""
    r, p = m[:3, :3], m[:3, 3]
    lin, ang = v6[:3], v6[3:]
    return np.concatenate([r.T @ (lin - np.cross(p, ang)), r.T @ ang])


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    qu = rng.standard_normal(4)
    return quat_to_matrix(qu / np.linalg.norm(qu))


# ------------------------------------------------------------------------------------------
# Rotation vectors, twists and placements for the SO(3)/SE(3) maps (tests/test_spatial.py)

#: Rotation angles by kind. Each singular point of exp, log and their Jacobians is hit on
#: purpose: 0 exactly, "tiny" (~1e-9, deep in the Taylor branches), "small" (log-uniform in
#: [1e-6, 0.1], across the switches between Taylor series and closed forms: 1e-3 for vidyn's
#: SO(3) coefficients, 0.1 for its jexp6, ~1.3e-4 for Pinocchio's), "generic" (uniform
#: away from 0 and π), "toward_pi" (π − d, d log-uniform in [1e-6, 0.1], across the switches
#: of log3 to the symmetric part of R: π − 1e-3 in vidyn, ~π − 5e-3 in Pinocchio),
#: "near_pi" (π − ~1e-7) and exactly π (log is two-valued there).
ANGLE_KINDS = ("zero", "tiny", "small", "generic", "generic", "toward_pi", "near_pi", "pi")

_ANGLES = {
    "zero": lambda rng: 0.0,
    "tiny": lambda rng: 1e-9 * rng.uniform(0.5, 2.0),
    "small": lambda rng: 10.0 ** rng.uniform(-6.0, -1.0),
    "generic": lambda rng: rng.uniform(0.1, np.pi - 0.1),
    "toward_pi": lambda rng: np.pi - 10.0 ** rng.uniform(-6.0, -1.0),
    "near_pi": lambda rng: np.pi - 1e-7 * rng.uniform(0.5, 2.0),
    "pi": lambda rng: np.pi,
}

#: Sizes of the linear part of twists and of translations (0: pure rotations).
LINEAR_SCALES = (0.0, 1e-3, 1.0, 10.0)


@dataclass(frozen=True)
class RotationCase:
    """A rotation vector ``w`` of angle ``theta`` drawn as ``kind``, and a linear part
    ``rho`` (3,) of size ``~scale`` (the translation of a twist or of a placement)."""

    kind: str
    theta: float
    w: np.ndarray
    rho: np.ndarray

    @property
    def twist(self) -> np.ndarray:
        """``[rho; w]`` (6,)."""
        return np.concatenate([self.rho, self.w])

    @property
    def rotation(self) -> np.ndarray:
        """``exp(w×)`` built in NumPy through a quaternion (independent of vidyn and Pinocchio)."""
        return quat_to_matrix(quat_from_rotvec(self.w))

    @property
    def placement(self) -> np.ndarray:
        """``[[exp(w×), rho], [0, 0, 0, 1]]`` (4, 4), built in NumPy."""
        return homogeneous(self.rotation, self.rho)


@st.composite
def rotation_cases(draw, kinds: tuple[str, ...] = ANGLE_KINDS) -> RotationCase:
    """The angle kind and the scale of the linear part are drawn by hypothesis (they shrink
    to the simplest failing case); the axis and the values come from a seeded generator."""
    kind = draw(st.sampled_from(kinds), label="angle kind")
    scale = draw(st.sampled_from(LINEAR_SCALES), label="linear scale")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="seed"))
    axis = rng.standard_normal(3)
    axis /= np.linalg.norm(axis)
    theta = float(_ANGLES[kind](rng))
    return RotationCase(kind, theta, axis * theta, scale * rng.standard_normal(3))


# ------------------------------------------------------------------------------------------
# Model specifications


@dataclass(frozen=True)
class BodySpec:
    """One body in *insertion* order; `parent` is an earlier insertion index or -1 (world)."""

    name: str
    parent: int
    kind: str
    placement: np.ndarray  # (4, 4) joint frame in the parent body frame
    mass: float
    com: np.ndarray  # (3,)
    inertia: np.ndarray  # (3, 3) rotational inertia about the com
    axis: np.ndarray | None = None  # (3,) unit, revolute/prismatic only


@dataclass(frozen=True)
class FrameSpec:
    name: str
    parent: int  # insertion index of the body, -1 for the world
    placement: np.ndarray


@dataclass(frozen=True)
class ModelSpec:
    name: str
    bodies: tuple[BodySpec, ...]
    frames: tuple[FrameSpec, ...] = ()
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))

    def with_gravity(self, g) -> "ModelSpec":
        return replace(self, gravity=np.asarray(g, dtype=float))

    def build(self) -> "vidyn.Model":
        b = vidyn.ModelBuilder(self.name)
        ids: list[int] = []
        for body in self.bodies:
            kwargs = dict(placement=body.placement, mass=body.mass, com=body.com, inertia=body.inertia)
            if body.axis is not None:
                kwargs["axis"] = body.axis
            parent = None if body.parent < 0 else ids[body.parent]
            ids.append(b.add_body(parent, body.name, body.kind, **kwargs))
        for f in self.frames:
            b.add_frame(f.name, None if f.parent < 0 else ids[f.parent], f.placement)
        b.set_gravity(self.gravity)
        return b.build()

    def __repr__(self) -> str:  # compact, so hypothesis' falsifying examples stay readable
        parts = [f"{bd.name}<-{bd.parent}:{bd.kind}" + ("" if bd.axis is None else f"{np.round(bd.axis, 3).tolist()}") for bd in self.bodies]
        return f"ModelSpec({self.name!r}, [{', '.join(parts)}], frames={[(f.name, f.parent) for f in self.frames]})"

    def _repr_pretty_(self, p, cycle):  # used by hypothesis when printing falsifying examples
        p.text(repr(self))


def to_pinocchio(spec: ModelSpec):
    """The same tree as a `pinocchio.Model`; each spec frame becomes an OP_FRAME.

    Joints are added in depth-first pre-order (children in insertion order), which is the
    order vidyn's builder produces: Pinocchio's CRBA and M⁻¹ assume every subtree is a
    contiguous range of velocity indices and silently return wrong matrices otherwise.  The
    tests still match joints by name (`pin_layout.ConfigurationMap`), never by position.
    """
    import pinocchio as pin

    model = pin.Model()
    model.name = spec.name
    model.gravity = pin.Motion(np.concatenate([spec.gravity, np.zeros(3)]))
    jids: dict[int, int] = {}
    for i in depth_first_order(spec):
        body = spec.bodies[i]
        if body.kind == "revolute":
            jm = pin.JointModelRevoluteUnaligned(np.asarray(body.axis, dtype=float))
        elif body.kind == "prismatic":
            jm = pin.JointModelPrismaticUnaligned(np.asarray(body.axis, dtype=float))
        elif body.kind == "spherical":
            jm = pin.JointModelSpherical()
        elif body.kind == "freeflyer":
            jm = pin.JointModelFreeFlyer()
        elif body.kind == "planar":
            jm = pin.JointModelPlanar()
        else:  # pragma: no cover - guarded by JOINT_KINDS
            raise ValueError(body.kind)
        parent = 0 if body.parent < 0 else jids[body.parent]
        m = body.placement
        jid = model.addJoint(parent, jm, pin.SE3(m[:3, :3].copy(), m[:3, 3].copy()), body.name)
        model.appendBodyToJoint(jid, pin.Inertia(body.mass, body.com.copy(), body.inertia.copy()), pin.SE3.Identity())
        jids[i] = jid
    for f in spec.frames:
        parent = 0 if f.parent < 0 else jids[f.parent]
        m = f.placement
        model.addFrame(pin.Frame(f.name, parent, pin.SE3(m[:3, :3].copy(), m[:3, 3].copy()), pin.FrameType.OP_FRAME))
    return model


def depth_first_order(spec: ModelSpec) -> list[int]:
    """Insertion indices of the spec's bodies in depth-first pre-order, children in insertion
    order (the numbering documented for `ModelBuilder.build()`)."""
    kids: dict[int, list[int]] = {}
    for i, b in enumerate(spec.bodies):
        kids.setdefault(b.parent, []).append(i)
    order, stack = [], list(reversed(kids.get(-1, [])))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(kids.get(i, [])))
    return order


def _random_inertia(rng: np.random.Generator) -> tuple[float, np.ndarray, np.ndarray]:
    """mass > 0, com, and rotational inertia tr(Σ)·I − Σ from a random positive-definite Σ.

    Σ is the second moment of the mass distribution about its centre; every such inertia
    satisfies the triangle inequalities (I_xx + I_yy ≥ I_zz, …).  Masses 0.2–5 kg and sizes
    0.05–0.5 m keep cond(M) of 30-body trees within ~1e8, where the round-trip tolerances of
    `tolerances.py` still have margin.
    """
    mass = float(np.exp(rng.uniform(np.log(0.2), np.log(5.0))))
    rot = random_rotation(rng)
    radii = rng.uniform(0.05, 0.5, size=3)
    sigma = mass * rot @ np.diag(radii**2) @ rot.T
    inertia = np.trace(sigma) * np.eye(3) - sigma
    inertia = 0.5 * (inertia + inertia.T)
    com = rng.uniform(-0.3, 0.3, size=3)
    return mass, com, inertia


AXIS_FLAVOURS = ("x", "y", "z", "-z", "random")
PLACEMENT_FLAVOURS = ("random", "random", "identity", "translation_only", "rotation_only")


def _axis(flavour: str, rng: np.random.Generator) -> np.ndarray:
    fixed = {"x": [1.0, 0, 0], "y": [0, 1.0, 0], "z": [0, 0, 1.0], "-z": [0, 0, -1.0]}
    if flavour in fixed:
        return np.array(fixed[flavour])
    a = rng.standard_normal(3)
    return a / np.linalg.norm(a)


def _placement(flavour: str, rng: np.random.Generator) -> np.ndarray:
    rot = np.eye(3) if flavour in ("identity", "translation_only") else random_rotation(rng)
    trans = np.zeros(3) if flavour in ("identity", "rotation_only") else rng.uniform(-0.6, 0.6, size=3)
    return homogeneous(rot, trans)


@st.composite
def model_specs(draw, max_bodies: int = 30, kinds: tuple[str, ...] = JOINT_KINDS, min_frames: int = 0, max_frames: int = 3) -> ModelSpec:
    """A random tree of 1..max_bodies bodies with every joint kind (see module docstring).

    parent[i] < i in insertion order (−1 = world, always for the first body); vidyn's
    `build()` renumbers depth-first, which a non-DFS insertion order exercises.
    """
    n = draw(st.integers(1, max_bodies))
    parents = [-1] + [draw(st.integers(-1, i - 1)) for i in range(1, n)]
    body_kinds = [draw(st.sampled_from(kinds)) for _ in range(n)]
    axes = [draw(st.sampled_from(AXIS_FLAVOURS)) if k in ("revolute", "prismatic") else None for k in body_kinds]
    flavours = [draw(st.sampled_from(PLACEMENT_FLAVOURS)) for _ in range(n)]
    n_frames = draw(st.integers(min_frames, max(min_frames, max_frames)))
    frame_parents = [draw(st.integers(-1, n - 1)) for _ in range(n_frames)]
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    bodies = []
    for i in range(n):
        mass, com, inertia = _random_inertia(rng)
        bodies.append(
            BodySpec(
                name=f"j{i}_{body_kinds[i]}",
                parent=parents[i],
                kind=body_kinds[i],
                placement=_placement(flavours[i], rng),
                mass=mass,
                com=com,
                inertia=inertia,
                axis=None if axes[i] is None else _axis(axes[i], rng),
            )
        )
    frames = tuple(FrameSpec(f"frame{k}", p, _placement("random", rng)) for k, p in enumerate(frame_parents))
    return ModelSpec(name=f"random_tree_{seed}", bodies=tuple(bodies), frames=frames)


def models(max_bodies: int = 30, **kwargs):
    """Random vidyn models (see :func:`model_specs`)."""
    return model_specs(max_bodies=max_bodies, **kwargs).map(ModelSpec.build)


# ------------------------------------------------------------------------------------------
# Known library bugs.  Each is pinned by a strict-xfail regression test in
# test_configuration.py; while it is present the property tests step around its trigger (so
# that they keep testing everything else), and once it is fixed the flags turn False by
# themselves and the full strength returns.


def _single_freeflyer():
    b = vidyn.ModelBuilder("freeflyer")
    b.add_body(None, "root", "freeflyer", placement=np.eye(4), mass=1.0, com=np.zeros(3), inertia=np.eye(3))
    return b.build()


def _freeflyer_pi_bug() -> bool:
    """Free-flyer ⊕ turns some rotations of exactly π into the identity."""
    q = np.array([0.0, 0.0, 0.0, -0.2634616722330583, 0.2176488869954818, -0.9397962062350478, 0.0])
    out = _single_freeflyer().integrate(q, np.zeros(6))
    return abs(abs(float(np.dot(out[3:], q[3:]))) - 1.0) > 1e-12


def _freeflyer_sign_bug() -> bool:
    """Free-flyer ⊕ returns −quaternion (Pinocchio keeps ⟨q_out, q_in⟩ ≥ 0)."""
    q = np.array([0.0, 0.0, 0.0, 0.6, 0.0, 0.0, -0.8])
    return float(np.dot(_single_freeflyer().integrate(q, np.zeros(6))[3:], q[3:])) < 0


def _spherical_sign_bug() -> bool:
    """Spherical ⊕ flips the quaternion to ⟨q_out, q_in⟩ ≥ 0; Pinocchio's SO(3) integrate does
    not (only its SE(3) one does): q = identity, v = (0, 0, 4) gives (0, 0, sin 2, cos 2)."""
    b = vidyn.ModelBuilder("spherical")
    b.add_body(None, "root", "spherical", placement=np.eye(4), mass=1.0, com=np.zeros(3), inertia=np.eye(3))
    out = b.build().integrate(np.array([0.0, 0.0, 0.0, 1.0]), np.array([0.0, 0.0, 4.0]))
    return bool(out[3] > 0)


FREEFLYER_PI_BUG = _freeflyer_pi_bug()
FREEFLYER_SIGN_BUG = _freeflyer_sign_bug()
SPHERICAL_SIGN_BUG = _spherical_sign_bug()


# ------------------------------------------------------------------------------------------
# States

#: Special cases mixed into `states`: uniform sampling never produces them.
STATE_CASES = ("random", "random", "random", "zero_velocity", "near_identity", "angles_at_pi", "max_velocity", "neutral")
V_MAX = 10.0


@dataclass(frozen=True)
class State:
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau: np.ndarray
    case: str = "random"
    seed: int = 0

    def __repr__(self) -> str:
        return f"State(case={self.case!r}, seed={self.seed}, q={self.q.tolist()}, v={self.v.tolist()})"

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


def joint_blocks(model):
    """[(kind, q slice, v slice)] in the model's joint order, from its public layout."""
    out = []
    kinds = list(model.joint_kinds)
    for i, kind in enumerate(kinds):
        iq, iv = int(model.idx_q[i]), int(model.idx_v[i])
        nq_i = (int(model.idx_q[i + 1]) if i + 1 < len(kinds) else model.nq) - iq
        nv_i = (int(model.idx_v[i + 1]) if i + 1 < len(kinds) else model.nv) - iv
        out.append((kind, slice(iq, iq + nq_i), slice(iv, iv + nv_i)))
    return out


def _kind_of(kind: str, q_slice: slice) -> str:
    """Normalise kind names (URDF importers may report e.g. 'continuous') by layout."""
    n = q_slice.stop - q_slice.start
    if kind in KIND_DIMS:
        return kind
    if n == 1:
        return "revolute" if "prism" not in kind else "prismatic"
    return {7: "freeflyer"}.get(n, kind)


def special_configuration(model, q: np.ndarray, case: str, rng: np.random.Generator) -> np.ndarray:
    """Overwrite the rotational coordinates of `q` according to `case`."""
    q = q.copy()
    for kind, sq, _ in joint_blocks(model):
        kind = _kind_of(kind, sq)
        blk = q[sq]
        if case == "near_identity":
            d = rng.uniform(-1e-7, 1e-7, size=3)
            if kind == "revolute":
                blk[0] = d[0]
            elif kind == "spherical":
                blk[:] = quat_from_rotvec(d)
            elif kind == "freeflyer":
                blk[3:] = quat_from_rotvec(d)
            elif kind == "planar":
                blk[2:] = [np.cos(d[0]), np.sin(d[0])]
        elif case == "angles_at_pi":
            sign = rng.choice([-1.0, 1.0])
            axis = rng.standard_normal(3)
            axis /= np.linalg.norm(axis)
            if kind == "revolute":
                blk[0] = sign * np.pi
            elif kind == "spherical":
                blk[:] = [*axis, 0.0]  # rotation by exactly π
            elif kind == "freeflyer":
                # exactly π, or 1e-12 short of it while FREEFLYER_PI_BUG is open
                w = 1e-12 if FREEFLYER_PI_BUG else 0.0
                blk[3:] = [*(axis * np.sqrt(1.0 - w * w)), w]
            elif kind == "planar":
                blk[2:] = [-1.0, sign * 0.0]  # θ = ±π exactly (cos = −1, sin = ±0)
        q[sq] = blk
    return q


@st.composite
def states(draw, model, cases: tuple[str, ...] = STATE_CASES, v_max: float = V_MAX) -> State:
    """A reproducible state for `model`: seed → np.random.default_rng → model's own sampler.

    q comes from `model.random_configuration(rng)`, then `case` may overwrite rotations
    (within 1e-7 of identity, or at exactly ±π) or zero the velocity.  |v_i| ≤ v_max always.
    """
    seed = draw(st.integers(0, 2**32 - 1))
    case = draw(st.sampled_from(cases))
    rng = np.random.default_rng(seed)
    nv = model.nv
    q = np.asarray(model.random_configuration(rng), dtype=float)
    if case == "neutral":
        q = np.asarray(model.neutral(), dtype=float)
    elif case in ("near_identity", "angles_at_pi"):
        q = special_configuration(model, q, case, rng)
    if case in ("zero_velocity", "neutral"):
        v = np.zeros(nv)
    elif case == "max_velocity":
        v = v_max * rng.choice([-1.0, 1.0], size=nv)
    else:
        v = rng.uniform(-1.0, 1.0, size=nv) * v_max * rng.uniform(0.0, 1.0)
    a = rng.standard_normal(nv) * 5.0
    tau = rng.standard_normal(nv) * 10.0
    return State(q=q, v=v, a=a, tau=tau, case=case, seed=seed)
