"""Helpers of the API fuzzer (``test_api_fuzz.py``): memory-layout transforms, values that
survive dtype changes exactly, bit-for-bit comparison of results, the shared small models, and
a crash-isolating subprocess worker for hostile calls.

Layouts
    :data:`LAYOUTS` maps a name to a :class:`Layout`: a function that turns a C-contiguous
    float64 array into another object NumPy reads as the same values (Fortran order, strided
    and reversed views, byte-swapped, float32, int64, nested lists, read-only …). A layout
    with ``needs`` set only keeps the values when they are exact in that dtype; the value
    generators below take that requirement (``exact``) and draw values that satisfy it.

Worker
    :class:`Worker` runs snippets of Python in a child interpreter, one at a time, and
    reports for each one ``ok`` (with a summary of the result), the exception (class, MRO,
    message), a crash (return code and the tail of stderr) or a hang (timeout). A crash or
    hang costs one child; the next snippet starts a fresh one. The child limits its address
    space (``VIDYN_FUZZ_MEMORY_GB``, default 6) so that a runaway allocation fails fast
    instead of swapping the machine.
"""

from __future__ import annotations

import json
import math
import os
import queue
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import vidyn
from strategies import joint_blocks

# ------------------------------------------------------------------------------------------
# Layouts


def _rev(ndim: int) -> tuple[slice, ...]:
    return (slice(None, None, -1),) * ndim


def _strided(x: np.ndarray) -> np.ndarray:
    """``x`` as every other element of a bigger array (NaN in between), along every axis."""
    if x.ndim == 0:
        return x.copy()
    big = np.full(tuple(2 * s for s in x.shape), np.nan, dtype=x.dtype)
    view = big[(slice(None, None, 2),) * x.ndim]
    view[...] = x
    return view


def _negative(x: np.ndarray) -> np.ndarray:
    """A view with negative strides along every axis: the reversed view of a reversed copy."""
    return np.ascontiguousarray(x[_rev(x.ndim)])[_rev(x.ndim)]


def _readonly(x: np.ndarray) -> np.ndarray:
    y = np.array(x, copy=True)
    y.setflags(write=False)
    return y


def _byteswapped(x: np.ndarray) -> np.ndarray:
    return x.astype(x.dtype.newbyteorder())


@dataclass(frozen=True)
class Layout:
    name: str
    fn: Callable[[np.ndarray], Any]
    #: "f32" / "int": the values must be exact in float32 / integers for this layout
    needs: str | None = None

    def __call__(self, x: np.ndarray) -> Any:
        x = np.array(x, dtype=np.float64, order="C")  # keeps 0-d arrays 0-d
        y = self.fn(x)
        if x.ndim == 0 and isinstance(y, np.ndarray) and y.ndim != 0:
            y = y.reshape(())  # asfortranarray & co. make 0-d arrays 1-d
        return y

    def __repr__(self) -> str:
        return self.name


_LAYOUT_LIST = [
    Layout("C", lambda x: x),
    Layout("fortran", np.asfortranarray),
    Layout("strided", _strided),
    Layout("negative_strides", _negative),
    Layout("transposed_copy_T", lambda x: np.ascontiguousarray(x.T).T),
    Layout("byteswapped", _byteswapped),
    Layout("float32", lambda x: x.astype(np.float32), "f32"),
    Layout("int64", lambda x: x.astype(np.int64), "int"),
    # an empty nested list loses the trailing dimensions: empty arrays stay arrays
    Layout("list", lambda x: x.tolist() if x.size else x),
    Layout("readonly", _readonly),
    # combinations: two properties at once
    Layout("fortran_byteswapped", lambda x: _byteswapped(np.asfortranarray(x))),
    Layout("strided_float32", lambda x: _strided(x.astype(np.float32)), "f32"),
    Layout("negative_readonly", lambda x: _readonly(np.ascontiguousarray(x[_rev(x.ndim)]))[_rev(x.ndim)]),
    Layout("fortran_int64", lambda x: np.asfortranarray(x.astype(np.int64)), "int"),
]
LAYOUTS: dict[str, Layout] = {lay.name: lay for lay in _LAYOUT_LIST}
LAYOUT_NAMES = tuple(LAYOUTS)

#: Scalar "layouts" for float options (dt, mass, …): the same value as other Python/NumPy
#: scalar types, including 0-d arrays.
SCALAR_FORMS: dict[str, Callable[[float], Any]] = {
    "float": float,
    "np.float64": np.float64,
    "0-d array": lambda x: np.array(x),
    "np.float32": lambda x: np.float32(x),  # only used with values exact in float32
    "1-element array.item()": lambda x: np.array([x])[0],
}


def exact_requirement(layouts) -> str | None:
    """The strictest exactness any of ``layouts`` needs ("int" > "f32" > None)."""
    needs = {LAYOUTS[n].needs if isinstance(n, str) else n.needs for n in layouts}
    if "int" in needs:
        return "int"
    if "f32" in needs:
        return "f32"
    return None


# ------------------------------------------------------------------------------------------
# Values exact in the dtype a layout converts to

#: Unit quaternions [x, y, z, w] whose components are exact integers / exact in float32
#: (the binary tetrahedral group: ±e_i and (±½, ±½, ±½, ±½)).
INT_QUATERNIONS = [np.eye(4)[i] * s for i in range(4) for s in (1.0, -1.0)]
F32_QUATERNIONS = INT_QUATERNIONS + [np.array([a, b, c, d]) * 0.5 for a in (1, -1) for b in (1, -1) for c in (1, -1) for d in (1, -1)]


def scalars(rng: np.random.Generator, shape, exact: str | None, scale: float = 2.0) -> np.ndarray:
    """Random values of ``shape``: integers in [-3, 3] ("int"), multiples of 1/256 in
    [-scale, scale] ("f32", exact in float32), or uniform float64 (None)."""
    if exact == "int":
        return rng.integers(-3, 4, size=shape).astype(np.float64) + 0.0
    if exact == "f32":
        k = int(scale * 256)
        return rng.integers(-k, k + 1, size=shape).astype(np.float64) / 256.0
    return rng.uniform(-scale, scale, size=shape)


def configuration(model, rng: np.random.Generator, exact: str | None) -> np.ndarray:
    """A valid configuration (unit quaternions, planar (cos, sin) on the circle) whose values
    are exact under ``exact``; within the model's finite position limits."""
    if exact is None:
        return np.asarray(model.random_configuration(int(rng.integers(0, 2**63))), dtype=np.float64)
    q = np.zeros(model.nq)
    quats = INT_QUATERNIONS if exact == "int" else F32_QUATERNIONS
    lo, hi = np.asarray(model.lower_position_limit), np.asarray(model.upper_position_limit)
    for kind, sq, _ in joint_blocks(model):
        if kind in ("revolute", "prismatic"):
            x = scalars(rng, 1, exact, 1.0)[0]
            i = sq.start
            if np.isfinite(lo[i]) and np.isfinite(hi[i]):
                # an exact value inside the limits: the midpoint rounded to the grid
                grid = 1.0 if exact == "int" else 1 / 256
                x = np.clip(np.round(x / grid) * grid, np.ceil(lo[i] / grid) * grid, np.floor(hi[i] / grid) * grid)
            q[sq] = x
        elif kind == "spherical":
            q[sq] = quats[rng.integers(len(quats))]
        elif kind == "freeflyer":
            q[sq] = np.concatenate([scalars(rng, 3, exact, 1.0), quats[rng.integers(len(quats))]])
        elif kind == "planar":
            c, s = [(1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0)][rng.integers(4)]
            q[sq] = [*scalars(rng, 2, exact, 1.0), c, s]
        else:  # pragma: no cover
            raise AssertionError(f"unknown joint kind {kind}")
    return q + 0.0  # no -0.0: an int64 copy could not hold it


def signed_permutation(rng: np.random.Generator) -> np.ndarray:
    """A rotation matrix with entries in {-1, 0, 1} (det +1), exact in every dtype."""
    perm = rng.permutation(3)
    r = np.eye(3)[perm] * rng.choice([-1.0, 1.0], size=3)[:, None]
    if np.linalg.det(r) < 0:
        r[0] *= -1
    return r


def rotation(rng: np.random.Generator, exact: str | None) -> np.ndarray:
    if exact is not None:
        return signed_permutation(rng)
    qu = rng.standard_normal(4)
    x, y, z, w = qu / np.linalg.norm(qu)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def placement(rng: np.random.Generator, exact: str | None) -> np.ndarray:
    """A 4x4 homogeneous transform (rotation exact under ``exact``; never symmetric when exact,
    so a transposed read is always visible)."""
    m = np.eye(4)
    r = rotation(rng, exact)
    if exact is not None and np.array_equal(r, r.T):
        r = np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]])  # a 3-cycle: r != r.T
    m[:3, :3] = r
    m[:3, 3] = scalars(rng, 3, exact, 1.0)
    if not m[:3, 3].any():
        m[:3, 3] = [1.0, 0.0, 0.0]
    return m + 0.0 if exact else m  # no -0.0 in exact mode


def inertia(rng: np.random.Generator, exact: str | None) -> tuple[float, np.ndarray, np.ndarray]:
    """(mass, com (3,), rotational inertia (3, 3)): positive definite, triangle inequalities."""
    if exact is None:
        mass = float(rng.uniform(0.5, 3.0))
        r = rotation(rng, None)
        radii = rng.uniform(0.1, 0.5, size=3)
        sigma = mass * r @ np.diag(radii**2) @ r.T
        i3 = np.trace(sigma) * np.eye(3) - sigma
        return mass, rng.uniform(-0.3, 0.3, 3), 0.5 * (i3 + i3.T)
    mass = float(rng.integers(1, 4))
    d = rng.integers(2, 5, size=3).astype(float) if exact == "int" else rng.integers(64, 256, size=3) / 256.0
    sigma = mass * np.diag(d)
    i3 = np.trace(sigma) * np.eye(3) - sigma
    if exact == "f32":
        off = rng.integers(-8, 9) / 256.0  # small exact off-diagonal term, still positive definite
        i3[0, 1] = i3[1, 0] = off
    return mass, scalars(rng, 3, exact, 0.5), i3


# ------------------------------------------------------------------------------------------
# Comparison


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def difference(x: Any, y: Any, path: str = "result") -> str | None:
    """None when ``x`` and ``y`` are bit-for-bit equal (recursively through tuples, lists,
    dicts and vidyn result objects), else a description of the first difference."""
    if isinstance(x, BaseException) or isinstance(y, BaseException):
        if type(x) is not type(y) or str(x) != str(y):
            return f"{path}: {_describe(x)} != {_describe(y)}"
        return None
    if type(x) is not type(y):
        return f"{path}: type {type(x).__name__} != {type(y).__name__}"
    if isinstance(x, np.ndarray):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"{path}: shape/dtype {x.shape} {x.dtype} != {y.shape} {y.dtype}"
        if _bits(x) != _bits(y):
            if x.dtype.kind == "f":
                with np.errstate(invalid="ignore"):
                    diff = np.abs(x - y)
                where = np.argwhere(~((x == y) | (np.isnan(x) & np.isnan(y))))
                first = tuple(int(i) for i in where[0]) if len(where) else "?"
                return f"{path}: arrays differ at {len(where)} of {x.size} entries (first {first}: {x[first] if len(where) else ''} vs {y[first] if len(where) else ''}; max |diff| {np.nanmax(diff) if diff.size else 0:.3g})"
            return f"{path}: arrays differ: {x!r} vs {y!r}"
        return None
    if isinstance(x, float):
        if np.float64(x).tobytes() != np.float64(y).tobytes():
            return f"{path}: {x!r} != {y!r}"
        return None
    if isinstance(x, (tuple, list)):
        if len(x) != len(y):
            return f"{path}: length {len(x)} != {len(y)}"
        for i, (a, b) in enumerate(zip(x, y)):
            d = difference(a, b, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(x, dict):
        if set(x) != set(y):
            return f"{path}: keys {sorted(x)} != {sorted(y)}"
        for k in x:
            d = difference(x[k], y[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    fields = result_fields(x)
    if fields is not None:
        return difference(fields, result_fields(y), path)
    if x != y:
        return f"{path}: {x!r} != {y!r}"
    return None


#: Fields of an IlqrResult/ProjectionResult that measure time, not the computation.
_TIMING_FIELDS = {"wall_time", "timing", "resimulate", "trajectory"}


def result_fields(x: Any) -> dict[str, Any] | None:
    """The comparable content of a vidyn result object (None for other objects)."""
    if isinstance(x, vidyn.Trajectory):
        return {k: getattr(x, k) for k in ("q", "p", "u", "iterations", "steps")}
    if isinstance(x, vidyn.MaximalTrajectory):
        keys = ("q", "positions", "quaternions", "linear_velocities", "angular_velocities", "energy", "constraint_violation", "iterations", "steps")
        return {k: getattr(x, k) for k in keys}
    if isinstance(x, vidyn.Kinematics):
        return {k: getattr(x, k) for k in ("placements", "velocities", "accelerations")}
    if isinstance(x, vidyn.Model):
        return model_fingerprint(x)
    if isinstance(x, vidyn.batch.BatchStatus):
        return {"ok": x.ok, "messages": x.messages}
    if hasattr(x, "__dataclass_fields__"):
        out = {}
        for k in x.__dataclass_fields__:
            if k in _TIMING_FIELDS:
                continue
            v = getattr(x, k)
            if k == "log" and isinstance(v, dict):
                v = {kk: vv for kk, vv in v.items() if kk != "time"}
            out[k] = v
        return out
    return None


def model_fingerprint(m) -> dict[str, Any]:
    """What distinguishes two models: structure, limits, gravity, and the dynamics and frame
    placements at a fixed state (deterministic, so two equal models give equal bits)."""
    rng = np.random.default_rng(12345)
    q = np.asarray(m.random_configuration(7))
    v = rng.uniform(-1, 1, m.nv)
    out: dict[str, Any] = {
        "name": m.name,
        "nq": m.nq,
        "nv": m.nv,
        "joint_names": m.joint_names,
        "joint_kinds": m.joint_kinds,
        "parents": m.parents,
        "frame_names": m.frame_names,
        "gravity": m.gravity,
        "total_mass": m.total_mass,
    }
    try:
        out["crba"] = vidyn.crba(m, q)
        out["rnea"] = vidyn.rnea(m, q, v, v)
        out["frame_placements"] = vidyn.frame_placements(m, q)
    except Exception as e:  # a model whose dynamics raise is still comparable by its error
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def _describe(x: Any) -> str:
    """An exception with its class and message; anything else briefly (arrays by shape)."""
    if isinstance(x, BaseException):
        return f"{type(x).__module__}.{type(x).__qualname__}({str(x)!r})"
    if isinstance(x, np.ndarray):
        return f"array{x.shape}"
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__}({', '.join(_describe(a) for a in x[:6])}{', …' if len(x) > 6 else ''})"
    text = repr(x)
    return text if len(text) < 120 else text[:117] + "..."


def nonfinite(x: Any, path: str = "result") -> str | None:
    """The path of the first NaN/inf float in a result (recursively), or None."""
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f" and x.size and not np.all(np.isfinite(x)):
            return f"{path} has {int(np.sum(~np.isfinite(x)))} non-finite entries of {x.size}"
        return None
    if isinstance(x, float):
        return None if math.isfinite(x) else f"{path} = {x}"
    if isinstance(x, (tuple, list)):
        for i, a in enumerate(x):
            d = nonfinite(a, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(x, dict):
        for k, a in x.items():
            d = nonfinite(a, f"{path}[{k!r}]")
            if d:
                return d
        return None
    fields = result_fields(x)
    return nonfinite(fields, path) if fields is not None else None


def call(f: Callable[[], Any]) -> Any:
    """f() or the exception it raised (BaseException included: a PanicException is a result
    to report, not a reason to stop the test run)."""
    try:
        return f()
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return e


# ------------------------------------------------------------------------------------------
# Small models shared by the tests (built once per process)

_MODELS: dict[str, Any] = {}


def mixed_tree() -> "vidyn.Model":
    """A 6-body tree with every joint kind: free-flyer root, a spherical and a planar child,
    revolute and prismatic grandchildren (one branch), and two operational frames."""
    rng = np.random.default_rng(2024)
    b = vidyn.ModelBuilder("mixed_tree")

    def body(parent, name, kind, axis=None):
        mass, com, i3 = inertia(rng, None)
        kw = {} if axis is None else {"axis": axis}
        return b.add_body(parent, name, kind, placement=placement(rng, None), mass=mass, com=com, inertia=i3, **kw)

    root = body(None, "root", "freeflyer")
    ball = body(root, "ball", "spherical")
    plane = body(root, "plane", "planar")
    hinge = body(ball, "hinge", "revolute", [0.0, 0.6, 0.8])
    body(hinge, "slider", "prismatic", [1.0, 0.0, 0.0])
    body(plane, "elbow", "revolute", [0.0, 0.0, 1.0])
    b.add_frame("tool", hinge, placement(rng, None))
    b.add_frame("marker", None, placement(rng, None))
    return b.build()


def cylinder_chain(n: int, planar: bool = False) -> "vidyn.Model":
    """n solid cylinders on revolute joints (positive-definite inertias, for MaximalIntegrator);
    axes y, x, y, … (all y when ``planar``)."""
    b = vidyn.ModelBuilder("cylinder_chain")
    r, length = 0.05, 1.0
    it = (3 * r * r + length * length) / 12
    parent = None
    for k in range(n):
        pl = np.eye(4)
        if k > 0:
            pl[2, 3] = -length
        parent = b.add_body(parent, f"joint{k + 1}", "revolute", pl, 1.0, [0, 0, -length / 2], np.diag([it, it, 0.5 * r * r]), [0.0, 1.0, 0.0] if planar or k % 2 == 0 else [1.0, 0.0, 0.0])
    b.add_frame("tip", parent, np.array([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, -length], [0, 0, 0, 1]]))
    return b.build()


def free_box() -> "vidyn.Model":
    """A box on a free-flyer joint, no gravity (principal inertias 0.1, 0.2, 0.3), with two
    operational frames one metre from its origin, "low" at (0, 0, -1) and "side" at (1, 0, 0):
    integer offsets, so that a configuration that holds them at an integer point is exact in
    every dtype."""
    b = vidyn.ModelBuilder("free_box")
    b.set_gravity([0.0, 0.0, 0.0])
    box = b.add_body(None, "box", "freeflyer", mass=2.0, com=[0.0, 0.0, 0.0], inertia=np.diag([0.1, 0.2, 0.3]))
    for name, offset in (("low", [0.0, 0.0, -1.0]), ("side", [1.0, 0.0, 0.0])):
        at = np.eye(4)
        at[:3, 3] = offset
        b.add_frame(name, box, at)
    return b.build()


#: The "low" frame of :func:`free_box` in its body frame.
BOX_LOW = np.array([0.0, 0.0, -1.0])

_HAND_LINK = '<link name="{0}"><inertial><origin xyz="{1}"/><mass value="{2}"/><inertia ixx="{3}" iyy="{3}" izz="{3}" ixy="0" ixz="0" iyz="0"/></inertial></link>'
_HAND_JOINT = '<joint name="{0}" type="{1}"><parent link="{2}"/><child link="{3}"/><origin xyz="{4}"/><axis xyz="{5}"/><limit lower="-2" upper="2" effort="10" velocity="5"/>{6}</joint>'


def mimic_hand() -> "vidyn.Model":
    """A small hand from a URDF: three revolute joints ("wrist", "curl", "thumb") and a
    prismatic one ("pinch") that mimics "curl" (multiplier -0.5, offset 0.25), so nq = nv = 3
    reduced coordinates and 4 in the extended model."""
    links = [("palm", "0 0 0.1", 1.0, 0.02), ("knuckle", "0 0 0.2", 0.5, 0.01), ("finger", "0 0.1 0.1", 0.3, 0.005), ("slide", "0.05 0 0", 0.2, 0.004)]
    joints = [
        ("wrist", "revolute", "palm", "knuckle", "0 0 0.2", "0 1 0", ""),
        ("curl", "revolute", "knuckle", "finger", "0 0 0.3", "1 0 0", ""),
        ("thumb", "revolute", "palm", "slide", "0.1 0 0", "0 0 1", ""),
    ]
    mimic = ("pinch", "prismatic", "knuckle", "pinch_link", "0 0.05 0.1", "0 1 0", '<mimic joint="curl" multiplier="-0.5" offset="0.25"/>')
    urdf = "".join(_HAND_LINK.format(*link) for link in links + [("pinch_link", "0 0 0.02", 0.1, 0.002)])
    urdf += "".join(_HAND_JOINT.format(*j) for j in joints + [mimic])
    return vidyn.Model.from_urdf_string(f'<robot name="hand">{urdf}</robot>', mimic=True)


def two_balls() -> "vidyn.Model":
    """Two free balls (mass 1 and 1.5, radius 0.25), no gravity, for body contacts: joints "a"
    and "b", and frames "a_link", "b_link" at their centres (the links of collision shapes)."""
    b = vidyn.ModelBuilder("two_balls")
    b.set_gravity([0.0, 0.0, 0.0])
    for name, mass in (("a", 1.0), ("b", 1.5)):
        body = b.add_body(None, name, "freeflyer", mass=mass, com=[0.0, 0.0, 0.0], inertia=np.eye(3) * 0.4 * mass * 0.25**2)
        b.add_frame(f"{name}_link", body, np.eye(4))
    return b.build()


def model(name: str):
    """Small models by name: chain1, chain3, cartpole, tree (every joint kind), panda, cyl3,
    free_box (a free-flyer alone), hanging_box (the same under gravity), hand (a mimic joint),
    two_balls."""
    if name not in _MODELS:
        build = {
            "chain1": lambda: vidyn.models.pendulum_chain(1),
            "chain3": lambda: vidyn.models.pendulum_chain(3),
            "chain3_3d": lambda: vidyn.models.pendulum_chain(3, planar=False),
            "cartpole": vidyn.models.cartpole,
            "tree": mixed_tree,
            "panda": lambda: vidyn.models.example_robot("panda"),
            "cyl3": lambda: cylinder_chain(3),
            "cyl3p": lambda: cylinder_chain(3, planar=True),
            "free_box": free_box,
            "hanging_box": lambda: free_box().with_gravity([0.0, 0.0, -9.81]),
            "hand": mimic_hand,
            "two_balls": two_balls,
        }[name]
        _MODELS[name] = build()
    return _MODELS[name]


# ------------------------------------------------------------------------------------------
# Subprocess worker for calls that may crash the interpreter

_CHILD = r"""
import json, os, sys, traceback, math
proto = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)  # anything printed (by Python or Rust) goes to stderr, not the protocol
try:
    import resource
    gb = float(os.environ.get("VIDYN_FUZZ_MEMORY_GB", "6"))
    if gb > 0:
        lim = int(gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
except Exception:
    pass
sys.path.insert(0, TESTS_DIR)
import numpy as np
import vidyn
import fuzz_inputs as F

def summary(x, depth=0):
    if isinstance(x, np.ndarray):
        fl = x.dtype.kind == "f" and x.size > 0
        return {"array": list(x.shape), "dtype": str(x.dtype), "nonfinite": bool(fl and not np.all(np.isfinite(x))), "nan": bool(fl and np.isnan(x).any())}
    if isinstance(x, float):
        return {"float": repr(x), "nonfinite": not math.isfinite(x), "nan": math.isnan(x)}
    if isinstance(x, (bool, int, str)) or x is None:
        return {"value": repr(x)[:200], "nonfinite": False}
    if isinstance(x, (tuple, list)) and depth < 3:
        items = [summary(a, depth + 1) for a in x]
        return {"seq": items[:20], "nonfinite": any(i["nonfinite"] for i in items), "nan": any(i.get("nan") for i in items)}
    if isinstance(x, dict) and depth < 3:
        items = {str(k): summary(v, depth + 1) for k, v in x.items()}
        return {"dict": sorted(items)[:30], "nonfinite": any(i["nonfinite"] for i in items.values()), "nan": any(i.get("nan") for i in items.values())}
    fields = F.result_fields(x)
    if fields is not None and depth < 3:
        s = summary(fields, depth + 1)
        s["type"] = type(x).__name__
        return s
    return {"type": type(x).__name__, "nonfinite": False}

ns = {"np": np, "vidyn": vidyn, "F": F}
for line in sys.stdin:
    req = json.loads(line)
    proto.write(json.dumps({"started": req["id"]}) + "\n")
    try:
        local = dict(ns)
        exec(req["code"], local)
        out = {"status": "ok", "result": summary(local.get("result"))}
    except BaseException as e:
        out = {
            "status": "exception",
            "cls": type(e).__module__ + "." + type(e).__qualname__,
            "mro": [c.__module__ + "." + c.__qualname__ for c in type(e).__mro__],
            "is_exception": isinstance(e, Exception),
            "is_vidyn": isinstance(e, vidyn.VidynError),
            "msg": str(e)[:2000],
            "notes": [str(n)[:500] for n in getattr(e, "__notes__", [])],
            "where": traceback.format_exc(limit=4)[-1500:],
        }
    out["id"] = req["id"]
    proto.write(json.dumps(out) + "\n")
"""

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


class Worker:
    """A child interpreter that runs snippets (which set ``result``) and reports each outcome.

    ``run(code, timeout)`` returns a dict with ``status`` in {"ok", "exception", "crash",
    "hang"}: "ok" with ``result`` (a JSON summary: shapes, whether any float is NaN/inf),
    "exception" with ``cls``, ``mro``, ``is_exception``, ``is_vidyn``, ``msg``; "crash" with
    ``returncode`` and the tail of the child's ``stderr``; "hang" when it did not answer within
    ``timeout`` seconds (the child is then killed). Crashes and hangs restart the child.
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()
        self.stderr_file = None
        self.next_id = 0
        self.children_started = 0

    def _start(self) -> None:
        self.stderr_file = tempfile.TemporaryFile(mode="w+b")
        env = dict(os.environ)
        env.setdefault("VIDYN_NUM_THREADS", "2")
        env["RUST_BACKTRACE"] = "0"  # the cause, not a backtrace, in the report
        env.setdefault("RAYON_NUM_THREADS", "2")
        if self.env:
            env.update(self.env)
        code = _CHILD.replace("TESTS_DIR", repr(TESTS_DIR))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file, env=env, text=True, bufsize=1
        )
        self.children_started += 1
        self.lines = queue.Queue()
        proc, lines = self.proc, self.lines

        def pump() -> None:
            for line in proc.stdout:  # type: ignore[union-attr]
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def _stderr_tail(self) -> str:
        if self.stderr_file is None:
            return ""
        self.stderr_file.seek(0)
        data = self.stderr_file.read().decode("utf-8", "replace")
        return data[-1500:]

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # our own child, by its handle
            self.proc.wait()
        self.proc = None

    def _threads(self) -> int:
        """Threads of the child now (from /proc; 0 when unknown)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:  # type: ignore[union-attr]
                for line in f:
                    if line.startswith("Threads:"):
                        return int(line.split()[1])
        except (OSError, ValueError, AttributeError):
            pass
        return 0

    def run(self, code: str, timeout: float = 60.0, max_threads: int | None = None) -> dict[str, Any]:
        """Runs ``code``; with ``max_threads``, kills the child as soon as it holds more
        threads than that (status "threads")."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        self.next_id += 1
        rid = self.next_id
        if self.stderr_file is not None:
            self.stderr_file.seek(0)
            self.stderr_file.truncate()
        try:
            self.proc.stdin.write(json.dumps({"id": rid, "code": code}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        import time

        start = time.monotonic()
        deadline = start + timeout
        peak = 0
        while True:
            try:
                wait = max(0.0, deadline - time.monotonic())
                line = self.lines.get(timeout=min(wait, 0.02) if max_threads else wait)
            except queue.Empty:
                if max_threads:
                    peak = max(peak, self._threads())
                    if peak > max_threads:
                        self._kill()
                        return {"status": "threads", "threads": peak, "after": time.monotonic() - start, "stderr": self._stderr_tail()}
                    if time.monotonic() < deadline:
                        continue
                self._kill()
                return {"status": "hang", "timeout": timeout, "stderr": self._stderr_tail()}
            if line is None:  # the child died
                assert self.proc is not None
                rc = self.proc.wait()
                tail = self._stderr_tail()
                self.proc = None
                return {"status": "crash", "returncode": rc, "stderr": tail}
            msg = json.loads(line)
            if msg.get("id") == rid:
                msg["seconds"] = time.monotonic() - start
                if max_threads:
                    msg["peak_threads"] = peak
                return msg

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill()
        self.proc = None


def outcome_str(r: dict[str, Any]) -> str:
    """One line describing a worker outcome."""
    s = r["status"]
    if s == "ok":
        res = r["result"]
        return "ok" + (" (NaN in the result)" if res.get("nan") else " (inf in the result)" if res.get("nonfinite") else "")
    if s == "threads":
        return f"SPAWNS THREADS: {r['threads']} threads after {r['after']:.1f} s (child killed)"
    if s == "exception":
        return f"{r['cls']}: {r['msg'][:300]!r}"
    if s == "crash":
        lines = [ln.strip() for ln in r["stderr"].strip().splitlines() if ln.strip()]
        keys = ("memory allocation of", "panicked at", "Segmentation fault", "Fatal Python error", "fatal runtime error", "Aborted", "overflow")
        cause = [ln for ln in lines if any(k in ln for k in keys)] or lines[:2]
        return f"CRASH rc={r['returncode']} stderr: {' | '.join(cause[:3])[:400]}"
    return f"HANG (no answer within {r['timeout']} s)"
