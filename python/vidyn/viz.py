"""Seeing a motion: draw a trajectory of any vidyn model (issue 26, item 6).

What is drawn:

* the **skeleton**, a stick figure: the origin of every body (joint) frame, joined to its parent
  body's origin (a root joint that does not translate, revolute or spherical, to the world
  origin), plus segments from a body's origin to its "tip" frames (frames fixed to the body
  away from its joints: a tool centre point, a foot);
* optional **triads**, the axes of every body frame (x red, y green, z blue);
* optional **collision primitives** of a URDF (``<collision>`` spheres, cylinders, capsules and
  boxes; meshes are skipped), placed on the frame of their link, which vidyn keeps for every
  link, including links merged into their parent by fixed joints;
* for floating-base models, the ground plane z = 0.

Outputs:

* :func:`animate`: a 3-D animation with matplotlib, written to ``.gif`` (Pillow) or ``.mp4``
  (ffmpeg), sampled at ``fps`` frames per second of playback;
* :func:`strip`: snapshots of the motion side by side in one PNG (or any format matplotlib
  writes);
* :func:`draw`: one configuration in a matplotlib 3-D axes of your own;
* :func:`meshcat_html`: an interactive page (orbit, zoom, play / pause / scrub the animation) made
  with meshcat (``pip install meshcat``), written as one self-contained HTML file that works
  offline (meshcat's viewer script is inlined, no server runs). :func:`meshcat_visualizer` and
  :func:`meshcat_animation` are its parts, for adding objects of your own to the scene.

The geometry is pure NumPy and testable on its own: :class:`Skeleton` (points and segments of a
configuration), :func:`frame_bodies` (the body each frame is fixed to), :func:`collision_shapes`
(a URDF's primitives), :func:`shape_placements` and :func:`wireframe`. Everything is in the world
frame, in metres; trajectories are ``(N, nq)`` arrays of configurations (a ``Trajectory`` or
``MaximalTrajectory`` is read through its ``q``) sampled every ``dt`` seconds.

matplotlib and meshcat are imported when first needed; without them the functions that need
them raise ImportError naming the pip package.
"""

from __future__ import annotations

import base64
import dataclasses
import html as html_lib
import importlib
import math
import os
import pathlib
import xml.etree.ElementTree as ElementTree
from typing import Any, Literal, Sequence, Union

import numpy as np
import numpy.typing as npt

from vidyn._arrays import finite_f64, real_f64
from vidyn._core import InputError, Model, forward_kinematics, frame_placements, jacobian

__all__ = [
    "Shape",
    "Skeleton",
    "animate",
    "collision_shapes",
    "draw",
    "frame_bodies",
    "frame_indices",
    "meshcat_animation",
    "meshcat_html",
    "meshcat_visualizer",
    "shape_placements",
    "strip",
    "wireframe",
]

Array = npt.NDArray[np.float64]
ShapeKind = Literal["sphere", "cylinder", "capsule", "box"]
#: What ``collision=`` accepts: a URDF path, the name of an example robot
#: (:data:`vidyn.models.EXAMPLE_ROBOTS`), shapes already parsed, or None.
Collision = Union[str, "os.PathLike[str]", Sequence["Shape"], None]
#: What a trajectory argument accepts: an (N, nq) or (nq,) array, or anything with a ``q``
#: attribute holding one (Trajectory, MaximalTrajectory).
Configurations = Union[npt.ArrayLike, Any]

LINK_COLOR = "#1f5fa8"
JOINT_COLOR = "#202020"
SHAPE_COLOR = "#e8731a"
TRACE_COLOR = "#c0392b"
TRIAD_COLORS = ("#d62728", "#2ca02c", "#1f77b4")


# ----------------------------------------------------------------------------------------
# Optional dependencies
# ----------------------------------------------------------------------------------------


def _require(module: str, package: str, purpose: str) -> Any:
    """Imports ``module``, or raises ImportError saying which pip package provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"vidyn.viz needs {package} for {purpose}: pip install {package}") from e


def _figure(size: tuple[float, float]) -> Any:
    """A matplotlib figure of ``size`` inches that only writes files: made without pyplot, so
    neither the backend nor pyplot's figures of the session are touched."""
    return _require("matplotlib.figure", "matplotlib", "animations and snapshots").Figure(figsize=size)


# ----------------------------------------------------------------------------------------
# Trajectories
# ----------------------------------------------------------------------------------------


def _configurations(model: Model, q: Configurations) -> Array:
    """``q`` as a (N, nq) float64 array (a single configuration becomes N = 1)."""
    values = real_f64(getattr(q, "q", q), "q")
    if values.ndim == 1:
        values = values[None, :]
    if len(values) == 0:
        raise InputError(f"q has shape {values.shape}, expected (N, model.nq) = (N, {model.nq}) with N >= 1")
    return finite_f64(values, "q", ("N", model.nq), f"(N, model.nq) = (N, {model.nq}) with N >= 1")


def frame_indices(knots: int, dt: float, fps: float, speed: float = 1.0) -> npt.NDArray[np.intp]:
    """The knots of a trajectory shown by an animation at ``fps`` frames per second of playback:
    knot ``k`` is at time ``k·dt`` (s) of the motion, played ``speed`` times faster than real
    time; the nearest knot to each frame's time, and always the last knot. ``knots`` ≥ 1."""
    if knots < 1 or not dt > 0 or not fps > 0 or not speed > 0:
        raise InputError(f"need knots >= 1 and positive dt, fps, speed; got {knots}, {dt}, {fps}, {speed}")
    duration = (knots - 1) * dt
    times = np.arange(0.0, duration + 1e-12, speed / fps)
    idx = np.minimum(np.rint(times / dt).astype(np.intp), knots - 1)
    if idx[-1] != knots - 1:
        idx = np.append(idx, knots - 1)
    return idx


# ----------------------------------------------------------------------------------------
# Which body carries each frame
# ----------------------------------------------------------------------------------------


def _inverse(placements: Array) -> Array:
    """Inverses of rigid placements (..., 4, 4)."""
    rotation_t = np.swapaxes(placements[..., :3, :3], -1, -2)
    out = np.zeros_like(placements)
    out[..., :3, :3] = rotation_t
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", rotation_t, placements[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def frame_bodies(model: Model) -> list[int]:
    """The body each frame of ``model`` is fixed to (-1: the world), in the order of
    ``model.frame_names``.

    vidyn does not expose it, so it is read from the frame's Jacobian: the joints that move a
    frame are its body's and that body's ancestors (every other column of the Jacobian is
    exactly zero, and a joint that moves the frame has a non-zero column: its axis), and
    bodies are numbered parents first, so the frame's body is the last of them."""
    owner = np.empty(model.nv, dtype=np.intp)  # the body of each velocity coordinate
    starts = list(model.idx_v) + [model.nv]
    order = np.argsort(model.idx_v, kind="stable")
    for k, body in enumerate(order):
        end = starts[order[k + 1]] if k + 1 < len(order) else model.nv
        owner[model.idx_v[body] : end] = body
    q = model.neutral()
    bodies = []
    for frame in range(len(model.frame_names)):
        moving = np.flatnonzero(np.any(jacobian(model, q, frame, "local") != 0.0, axis=0))
        bodies.append(int(owner[moving].max()) if len(moving) else -1)
    return bodies


# ----------------------------------------------------------------------------------------
# Skeleton
# ----------------------------------------------------------------------------------------


class Skeleton:
    """The stick figure of ``model``: points, and segments joining them, both in the world
    frame (metres).

    Points, in this order: the origin of every body frame (``nbodies``, the joint positions of
    ``forward_kinematics(model, q).placements``), then the origins of the tip frames
    (``tip_frames``), then the world origin when a root joint is anchored to it.
    ``pairs`` (S, 2): the segments as indices into the points, ``(parent, child)``.

    ``tips``: True picks every frame fixed to a body whose origin is more than 1 mm from that
    body's origin, from its child joints' origins (at the neutral configuration) and from the
    tips already picked; False none; or a list of frame names."""

    def __init__(self, model: Model, tips: bool | Sequence[str] = True) -> None:
        self.model = model
        bodies = frame_bodies(model) if tips is not False else []
        if isinstance(tips, bool):
            chosen = _default_tips(model, bodies) if tips else []
        else:
            chosen = [model.frame_index(name) for name in tips]
        #: frame indices of the tips, in the order of their points
        self.tip_frames: list[int] = chosen
        n = model.nbodies
        pairs = []
        anchored = False
        for i, (parent, kind) in enumerate(zip(model.parents, model.joint_kinds)):
            if parent >= 0:
                pairs.append((parent, i))
            elif kind in ("revolute", "spherical"):
                anchored = True
                pairs.append((n + len(chosen), i))
        for k, f in enumerate(chosen):
            body = bodies[f]
            pairs.append((n + len(chosen) if body < 0 else body, n + k))
            anchored = anchored or body < 0
        #: whether the world origin is a point (a root joint, or a tip, fixed to the world)
        self.anchored = anchored
        #: (S, 2) the segments, as indices of their two points, the parent end first
        self.pairs: npt.NDArray[np.intp] = np.array(pairs, dtype=np.intp).reshape(-1, 2)

    @property
    def npoints(self) -> int:
        """Number of points: bodies, tips, and the world origin if anchored."""
        return self.model.nbodies + len(self.tip_frames) + int(self.anchored)

    def points(self, q: npt.ArrayLike) -> Array:
        """The points (npoints, 3) of configuration ``q`` (nq,), world frame, metres."""
        return self._points(forward_kinematics(self.model, q).placements, self._frames(q))

    def segments(self, q: npt.ArrayLike) -> Array:
        """The segments (S, 2, 3) of configuration ``q`` (nq,): start and end points, world
        frame, metres (the parent end first)."""
        return self.points(q)[self.pairs]

    def _frames(self, q: npt.ArrayLike) -> Array | None:
        return frame_placements(self.model, q) if self.tip_frames else None

    def _points(self, bodies: Array, frames: Array | None) -> Array:
        parts = [bodies[:, :3, 3]]
        if self.tip_frames:
            assert frames is not None
            parts.append(frames[self.tip_frames, :3, 3])
        if self.anchored:
            parts.append(np.zeros((1, 3)))
        return np.concatenate(parts)


def _default_tips(model: Model, bodies: list[int], separation: float = 1e-3) -> list[int]:
    """Frames fixed to a body, away (> ``separation`` m) from its origin, its child joints and
    the tips already picked, at the neutral configuration (see :class:`Skeleton`)."""
    q = model.neutral()
    placements = forward_kinematics(model, q).placements
    frames = frame_placements(model, q)
    taken: dict[int, list[Array]] = {b: [np.zeros(3)] for b in range(model.nbodies)}
    for child, parent in enumerate(model.parents):
        if parent >= 0:
            taken[parent].append((_inverse(placements[parent]) @ placements[child])[:3, 3])
    chosen = []
    for f, body in enumerate(bodies):
        if body < 0:
            continue
        local = (_inverse(placements[body]) @ frames[f])[:3, 3]
        if all(np.linalg.norm(local - p) > separation for p in taken[body]):
            taken[body].append(local)
            chosen.append(f)
    return chosen


# ----------------------------------------------------------------------------------------
# Collision primitives of a URDF
# ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Shape:
    """A collision primitive of a URDF link.

    ``kind`` and ``size`` (metres): ``"sphere"`` (radius,); ``"cylinder"`` and ``"capsule"``
    (radius, length) along the z axis of the shape's frame, centred on its origin (a
    capsule's length excludes its two hemispherical caps); ``"box"`` (x, y, z edge lengths),
    centred. ``placement`` (4, 4): the shape's frame in the frame of ``link`` (the URDF
    ``<origin>``)."""

    link: str
    kind: ShapeKind
    size: tuple[float, ...]
    placement: Array


def _urdf_path(urdf: str | os.PathLike[str]) -> pathlib.Path:
    """A URDF file: the path itself, or the URDF of the example robot of that name."""
    path = pathlib.Path(urdf)
    if not path.is_file() and isinstance(urdf, str):
        from vidyn import models

        if urdf in models.EXAMPLE_ROBOTS:
            robots = models.example_robot_data_dir()
            if robots is None:
                raise FileNotFoundError("example-robot-data is not installed: pip install example-robot-data")
            path = robots / models.EXAMPLE_ROBOTS[urdf].urdf
    if not path.is_file():
        raise FileNotFoundError(f"no URDF file {str(urdf)!r} (a path, or an example robot's name)")
    return path


def _origin(element: ElementTree.Element | None) -> Array:
    """The placement (4, 4) of a URDF ``<origin xyz rpy>``: ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    out = np.eye(4)
    if element is None:
        return out
    roll, pitch, yaw = (float(v) for v in element.get("rpy", "0 0 0").split())
    cr, sr, cp, sp, cy, sy = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw), math.sin(yaw)
    out[:3, :3] = [
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ]
    out[:3, 3] = [float(v) for v in element.get("xyz", "0 0 0").split()]
    return out


def _primitive(link: str, geometry: ElementTree.Element, placement: Array) -> Shape | None:
    """The shape of a ``<geometry>``, None for a mesh (or anything else)."""
    for child in geometry:
        if child.tag == "sphere":
            return Shape(link, "sphere", (float(child.get("radius", "0")),), placement)
        if child.tag in ("cylinder", "capsule"):
            kind: ShapeKind = "cylinder" if child.tag == "cylinder" else "capsule"
            return Shape(link, kind, (float(child.get("radius", "0")), float(child.get("length", "0"))), placement)
        if child.tag == "box":
            size = tuple(float(v) for v in child.get("size", "0 0 0").split())
            return Shape(link, "box", size, placement)
    return None


def collision_shapes(urdf: str | os.PathLike[str]) -> list[Shape]:
    """The collision primitives of a URDF (a path, or the name of an example robot of
    :data:`vidyn.models.EXAMPLE_ROBOTS`), in document order: ``<collision>`` spheres,
    cylinders, capsules and boxes of every link. Meshes are skipped."""
    root = ElementTree.parse(_urdf_path(urdf)).getroot()
    shapes = []
    for link in root.iter("link"):
        for collision in link.findall("collision"):
            geometry = collision.find("geometry")
            if geometry is None:
                continue
            shape = _primitive(link.get("name", ""), geometry, _origin(collision.find("origin")))
            if shape is not None:
                shapes.append(shape)
    return shapes


def _shapes(collision: Collision) -> list[Shape]:
    if collision is None:
        return []
    if isinstance(collision, (str, os.PathLike)):
        return collision_shapes(collision)
    return list(collision)


def _shape_placement(shape: Shape, i: int) -> Array:
    """The placement of ``shape``, the ``i``-th of the shapes given, as float64 (4, 4) with
    finite entries, or an InputError naming ``shapes[i].placement``."""
    return finite_f64(shape.placement, f"shapes[{i}].placement", (4, 4))


def shape_placements(model: Model, q: npt.ArrayLike, shapes: Sequence[Shape]) -> Array:
    """World placements (len(shapes), 4, 4) of the shapes' frames at configuration ``q``
    (nq,): the placement of the frame named after each shape's link, times the shape's
    placement in it. Raises UnknownNameError for a link the model has no frame for, and
    InputError for a placement with a non-finite entry."""
    if not shapes:
        return np.zeros((0, 4, 4))
    frames = frame_placements(model, q)
    index = [model.frame_index(s.link) for s in shapes]
    out: Array = np.einsum("kij,kjl->kil", frames[index], np.stack([_shape_placement(s, i) for i, s in enumerate(shapes)]))
    return out


def _circle(radius: float, axis: int, offset: float = 0.0, n: int = 24) -> Array:
    """Points (n + 1, 3), first and last equal, of the circle of radius ``radius`` about
    coordinate axis ``axis`` (0, 1, 2), in the plane at ``offset`` along it."""
    angles = np.linspace(0.0, 2 * math.pi, n + 1)
    u, v = [a for a in range(3) if a != axis]
    out = np.zeros((n + 1, 3))
    out[:, u], out[:, v], out[:, axis] = radius * np.cos(angles), radius * np.sin(angles), offset
    return out


def _local_wireframe(shape: Shape, resolution: int = 24) -> list[Array]:
    """Polylines of a shape's outline in its own frame."""
    if shape.kind == "sphere":
        (r,) = shape.size
        return [_circle(r, axis, n=resolution) for axis in range(3)]
    if shape.kind in ("cylinder", "capsule"):
        r, length = shape.size
        h = length / 2
        lines = [_circle(r, 2, -h, n=resolution), _circle(r, 2, h, n=resolution)]
        for a in np.linspace(0.0, 2 * math.pi, 4, endpoint=False):
            x, y = r * math.cos(a), r * math.sin(a)
            lines.append(np.array([[x, y, -h], [x, y, h]]))
        if shape.kind == "capsule":  # half circles over each cap, in the planes x-z and y-z
            angles = np.linspace(0.0, math.pi, resolution // 2 + 1)
            for axis in (0, 1):
                for sign in (1.0, -1.0):
                    arc = np.zeros((len(angles), 3))
                    arc[:, axis], arc[:, 2] = r * np.cos(angles), sign * (h + r * np.sin(angles))
                    lines.append(arc)
        return lines
    sx, sy, sz = (s / 2 for s in shape.size)
    corners = np.array([[x, y, z] for z in (-sz, sz) for y in (-sy, sy) for x in (-sx, sx)])
    loops = [corners[[0, 1, 3, 2, 0]], corners[[4, 5, 7, 6, 4]]]
    return loops + [corners[[i, i + 4]] for i in range(4)]


def wireframe(shape: Shape, placement: npt.ArrayLike, resolution: int = 24) -> list[Array]:
    """The outline of ``shape`` placed at ``placement`` (4, 4, world frame): polylines (k, 3)
    in the world frame, metres. A sphere: three great circles; a cylinder: its end circles and
    four lines along its side; a capsule: the same plus two half circles over each cap; a box:
    its twelve edges."""
    x = np.ascontiguousarray(finite_f64(placement, "placement", (4, 4)))
    return [line @ x[:3, :3].T + x[:3, 3] for line in _local_wireframe(shape, resolution)]


# ----------------------------------------------------------------------------------------
# One pose, computed (shared by matplotlib and meshcat)
# ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Pose:
    """What is drawn of one configuration, world frame, metres."""

    segments: Array  # (S, 2, 3)
    joints: Array  # (nbodies, 3)
    bodies: Array  # (nbodies, 4, 4)
    shapes: Array  # (K, 4, 4) world placements of the collision shapes
    traces: Array  # (T, 3) origins of the traced frames


class _Scene:
    """A model, its skeleton, collision shapes and traced frames: computes poses."""

    def __init__(self, model: Model, collision: Collision, tips: bool | Sequence[str], trace: Sequence[str]) -> None:
        self.model = model
        self.skeleton = Skeleton(model, tips)
        self.shapes = _shapes(collision)
        self.shape_frames = [model.frame_index(s.link) for s in self.shapes]
        self.trace = [model.frame_index(name) for name in trace]
        self.outlines = [_local_wireframe(s) for s in self.shapes]

    def pose(self, q: npt.ArrayLike) -> _Pose:
        """What is drawn of configuration ``q`` (nq,)."""
        bodies = forward_kinematics(self.model, q).placements
        needs_frames = self.skeleton.tip_frames or self.shapes or self.trace
        frames = frame_placements(self.model, q) if needs_frames else None
        points = self.skeleton._points(bodies, frames)
        shapes = np.zeros((0, 4, 4))
        traces = np.zeros((0, 3))
        if frames is not None and self.shapes:
            shapes = np.einsum("kij,kjl->kil", frames[self.shape_frames], np.stack([s.placement for s in self.shapes]))
        if frames is not None and self.trace:
            traces = frames[self.trace, :3, 3]
        return _Pose(points[self.skeleton.pairs], bodies[:, :3, 3], bodies, shapes, traces)

    def outline(self, pose: _Pose) -> list[Array]:
        """The polylines of every collision shape of a pose (world frame)."""
        return [line @ x[:3, :3].T + x[:3, 3] for x, lines in zip(pose.shapes, self.outlines) for line in lines]

    @property
    def floating(self) -> bool:
        """Whether a root joint is a free-flyer (the model walks: draw the ground)."""
        return any(p < 0 and k == "freeflyer" for p, k in zip(self.model.parents, self.model.joint_kinds))


def _bounds(scene: _Scene, poses: Sequence[_Pose], extra: npt.ArrayLike | None = None) -> tuple[Array, Array]:
    """Lower and upper corners (3,) of the box holding every pose."""
    chunks = [p.segments.reshape(-1, 3) for p in poses] + [p.joints for p in poses] + [p.traces for p in poses]
    chunks += [line for p in poses for line in scene.outline(p)]
    if extra is not None:
        chunks.append(np.asarray(extra, dtype=np.float64).reshape(-1, 3))
    points = np.concatenate([c for c in chunks if len(c)]) if any(len(c) for c in chunks) else np.zeros((1, 3))
    return points.min(axis=0), points.max(axis=0)


def _padded(lower: Array, upper: Array, margin: float = 0.08, thinnest: float = 0.25) -> tuple[Array, Array]:
    """Axis limits around a box: every side at least ``thinnest`` of the largest (a planar
    motion still gets some depth), then padded by ``margin`` of the largest on each end."""
    centre, extent = (lower + upper) / 2, upper - lower
    largest = max(float(extent.max()), 1e-3)
    extent = np.maximum(extent, thinnest * largest) + 2 * margin * largest
    return centre - extent / 2, centre + extent / 2


# ----------------------------------------------------------------------------------------
# matplotlib
# ----------------------------------------------------------------------------------------


class _Artists:
    """The matplotlib artists of one pose in one 3-D axes, updated in place per frame."""

    def __init__(self, ax: Any, scene: _Scene, triads: float, link_width: float) -> None:
        art3d = importlib.import_module("mpl_toolkits.mplot3d.art3d")
        self.ax, self.scene, self.triads = ax, scene, triads
        self.links = art3d.Line3DCollection([], colors=LINK_COLOR, linewidths=link_width, zorder=3)
        ax.add_collection3d(self.links, autolim=False)
        (self.joints,) = ax.plot([], [], [], "o", color=JOINT_COLOR, markersize=0.9 * link_width + 1, zorder=4)
        self.shapes = art3d.Line3DCollection([], colors=SHAPE_COLOR, linewidths=0.6, alpha=0.55, zorder=2)
        ax.add_collection3d(self.shapes, autolim=False)
        self.frames = art3d.Line3DCollection([], linewidths=1.2, zorder=5)
        ax.add_collection3d(self.frames, autolim=False)
        self.traces = [ax.plot([], [], [], "-", color=TRACE_COLOR, linewidth=1.0)[0] for _ in scene.trace]

    def update(self, pose: _Pose, history: Sequence[_Pose] = ()) -> None:
        """Shows ``pose``; the traced frames' paths go through ``history`` (earlier poses)."""
        self.links.set_segments(list(pose.segments))
        self.joints.set_data_3d(pose.joints[:, 0], pose.joints[:, 1], pose.joints[:, 2])
        self.shapes.set_segments(self.scene.outline(pose))
        if self.triads > 0:
            origin = pose.bodies[:, :3, 3]
            axes = [np.stack([origin, origin + self.triads * pose.bodies[:, :3, a]], axis=1) for a in range(3)]
            self.frames.set_segments([s for a in range(3) for s in axes[a]])
            self.frames.set_color([TRIAD_COLORS[a] for a in range(3) for _ in range(len(origin))])
        for t, line in enumerate(self.traces):
            path = np.array([p.traces[t] for p in (*history, pose)])
            line.set_data_3d(path[:, 0], path[:, 1], path[:, 2])


@dataclasses.dataclass
class _Box:
    """The axes of a motion: limits (world frame, m) and the default view
    ``(elevation, azimuth)`` in degrees."""

    lower: Array
    upper: Array
    view: tuple[float, float]


def _axes_box(scene: _Scene, poses: Sequence[_Pose], points: npt.ArrayLike | None) -> _Box:
    """Limits around every pose (and ``points``), padded; a motion in the x-z plane (the
    cart-pole, the acrobot: its extent along y under 15 % of the largest) is seen from the
    front, others obliquely."""
    lower, upper = _bounds(scene, poses, points)
    extent = upper - lower
    planar = extent[1] <= 0.15 * max(float(extent.max()), 1e-3)
    return _Box(*_padded(lower, upper), (8.0, -90.0) if planar else (22.0, -55.0))


def _setup_axes(ax: Any, scene: _Scene, box: _Box, view: tuple[float, float] | None, ground: bool | None, zoom: float = 1.0) -> None:
    """Fixed limits with equal scales on the three axes, labels in metres, view, ground."""
    lower, upper = box.lower, box.upper
    ax.set_xlim(lower[0], upper[0])
    ax.set_ylim(lower[1], upper[1])
    ax.set_zlim(lower[2], upper[2])
    ax.set_box_aspect(tuple(upper - lower), zoom=zoom)
    ticker = importlib.import_module("matplotlib.ticker")
    for axis in (ax.xaxis, ax.yaxis, ax.zaxis):
        axis.set_major_locator(ticker.MaxNLocator(4))
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    ax.tick_params(labelsize=7)
    elevation, azimuth = view if view is not None else box.view
    ax.view_init(elev=elevation, azim=azimuth)
    if abs(math.sin(math.radians(azimuth))) > 0.99 and abs(elevation) < 15:  # seen along y
        ax.set_yticks([])
        ax.set_ylabel("")
    if ground if ground is not None else (scene.floating and lower[2] <= 0.0 <= upper[2]):
        xs = np.array([[lower[0], upper[0]], [lower[0], upper[0]]])
        ys = np.array([[lower[1], lower[1]], [upper[1], upper[1]]])
        ax.plot_surface(xs, ys, np.zeros_like(xs), color="#9a9a9a", alpha=0.25, zorder=0, shade=False)


def _static_points(ax: Any, points: npt.ArrayLike | None) -> None:
    """Markers at fixed world points (targets)."""
    if points is not None:
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        ax.plot(p[:, 0], p[:, 1], p[:, 2], "*", color=TRACE_COLOR, markersize=10, zorder=6)


def draw(
    ax: Any,
    model: Model,
    q: npt.ArrayLike,
    *,
    collision: Collision = None,
    tips: bool | Sequence[str] = True,
    triads: float = 0.0,
    points: npt.ArrayLike | None = None,
    view: tuple[float, float] | None = None,
    ground: bool | None = None,
    link_width: float = 3.0,
) -> None:
    """Draws configuration ``q`` (nq,) of ``model`` in ``ax``, a matplotlib 3-D axes
    (``fig.add_subplot(projection="3d")``), with limits fitted to it. Options as in
    :func:`animate`."""
    scene = _Scene(model, collision, tips, ())
    pose = scene.pose(_configurations(model, q)[0])
    _setup_axes(ax, scene, _axes_box(scene, [pose], points), view, ground)
    _static_points(ax, points)
    _Artists(ax, scene, triads, link_width).update(pose)


def _writer(path: pathlib.Path, fps: float) -> Any:
    """The matplotlib movie writer for the file's suffix."""
    animation = _require("matplotlib.animation", "matplotlib", "animations")
    suffix = path.suffix.lower()
    if suffix == ".gif":
        return animation.PillowWriter(fps=fps)
    if suffix == ".mp4":
        if not animation.writers.is_available("ffmpeg"):
            raise RuntimeError("writing .mp4 needs the ffmpeg program (apt-get install ffmpeg); or write a .gif")
        return animation.FFMpegWriter(fps=fps, codec="libx264", extra_args=["-pix_fmt", "yuv420p"])
    raise InputError(f"unknown animation format {path.suffix!r}: use .gif or .mp4")


def animate(
    model: Model,
    q: Configurations,
    dt: float,
    path: str | os.PathLike[str],
    *,
    fps: float = 25.0,
    speed: float = 1.0,
    collision: Collision = None,
    tips: bool | Sequence[str] = True,
    triads: float = 0.0,
    trace: Sequence[str] = (),
    points: npt.ArrayLike | None = None,
    title: str | None = None,
    view: tuple[float, float] | None = None,
    ground: bool | None = None,
    size: tuple[float, float] = (6.0, 5.0),
    dpi: int = 80,
    link_width: float = 3.0,
) -> pathlib.Path:
    """Writes a 3-D animation of the motion ``q`` (N, nq) of ``model``, knots ``dt`` seconds
    apart, to ``path`` (``.gif`` with Pillow, ``.mp4`` with ffmpeg). Returns the path.

    The animation plays ``speed`` times real time at ``fps`` frames per second: it shows the
    knots :func:`frame_indices` picks (``len(frame_indices(N, dt, fps, speed))`` frames). The
    axes are fixed for the whole motion, fitted to its bounding box with equal scales (metres).

    ``collision``: a URDF path (or example robot name) or shapes whose collision primitives are
    drawn as wireframes; ``tips``: see :class:`Skeleton`; ``triads``: length (m) of the body
    frames' axes, 0 for none; ``trace``: frame names whose paths are drawn as they go;
    ``points`` (k, 3): fixed world points marked with a star (a target); ``view``:
    ``(elevation, azimuth)`` in degrees (default: from the front for motions in the x-z plane,
    else oblique); ``ground``: the plane z = 0 (default: for floating-base models);
    ``size`` (inches) and ``dpi``: the frame size. Colours: links blue, joints black, collision
    shapes orange, traced paths and points red, triads x red, y green, z blue."""
    out = pathlib.Path(path)
    configurations = _configurations(model, q)
    knots = frame_indices(len(configurations), dt, fps, speed)
    fig = _figure(size)
    writer = _writer(out, fps)
    scene = _Scene(model, collision, tips, trace)
    poses = [scene.pose(configurations[k]) for k in knots]
    ax = fig.add_subplot(projection="3d")
    ax.set_position((0.0, 0.03, 1.0, 0.91))
    _setup_axes(ax, scene, _axes_box(scene, poses, points), view, ground, zoom=0.9)
    _static_points(ax, points)
    ax.set_title(title if title is not None else model.name, fontsize=10)
    clock = ax.text2D(0.02, 0.95, "", transform=ax.transAxes, fontsize=9)
    artists = _Artists(ax, scene, triads, link_width)
    out.parent.mkdir(parents=True, exist_ok=True)
    with writer.saving(fig, str(out), dpi):
        for i, k in enumerate(knots):
            artists.update(poses[i], poses[:i])
            clock.set_text(f"t = {k * dt:.2f} s")
            writer.grab_frame()
    return out


def strip(
    model: Model,
    q: Configurations,
    path: str | os.PathLike[str],
    *,
    n: int = 5,
    dt: float | None = None,
    collision: Collision = None,
    tips: bool | Sequence[str] = True,
    triads: float = 0.0,
    trace: Sequence[str] = (),
    points: npt.ArrayLike | None = None,
    title: str | None = None,
    view: tuple[float, float] | None = None,
    ground: bool | None = None,
    panel: tuple[float, float] = (3.2, 3.4),
    dpi: int = 100,
    link_width: float = 2.5,
) -> pathlib.Path:
    """Writes ``n`` snapshots of the motion ``q`` (N, nq) side by side to ``path`` (PNG or any
    format matplotlib saves): the knots ``round(linspace(0, N - 1, n))``, all with the same
    axes (metres) so that the motion reads from left to right; each titled with its time
    when ``dt`` (s) is given, else with its knot. ``panel``: inches per snapshot. Other
    options as in :func:`animate` (``trace``: the paths up to each snapshot). Returns the
    path."""
    out = pathlib.Path(path)
    configurations = _configurations(model, q)
    if n < 1:
        raise InputError(f"n = {n}: need at least one snapshot")
    knots = np.unique(np.rint(np.linspace(0, len(configurations) - 1, n)).astype(np.intp))
    scene = _Scene(model, collision, tips, trace)
    shown = [scene.pose(configurations[k]) for k in knots]
    history = [scene.pose(x) for x in configurations] if trace else []  # for the traced paths
    box = _axes_box(scene, shown + history, points)
    fig = _figure((panel[0] * len(knots), panel[1]))
    for i, k in enumerate(knots):
        ax = fig.add_subplot(1, len(knots), i + 1, projection="3d")
        _setup_axes(ax, scene, box, view, ground)
        _static_points(ax, points)
        _Artists(ax, scene, triads, link_width).update(shown[i], history[:k])
        ax.set_title(f"t = {k * dt:.2f} s" if dt is not None else f"knot {k}", fontsize=9)
    fig.suptitle(title if title is not None else model.name, fontsize=11, y=0.985)
    fig.subplots_adjust(left=0.0, right=0.97, bottom=0.03, top=0.86, wspace=0.04)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    return out


# ----------------------------------------------------------------------------------------
# meshcat
# ----------------------------------------------------------------------------------------


class _RecordingWindow:
    """Stands in for the window (server connection) of a ``meshcat.Visualizer``: keeps every
    command sent, in order, and turns them into a page that replays them (no server)."""

    def __init__(self) -> None:
        self.commands: list[bytes] = []
        #: the point the camera orbits about, world frame (m); meshcat has no command for it
        self.camera_target: Array | None = None
        self._packb = _require("umsgpack", "meshcat", "the interactive HTML page").packb

    def send(self, command: Any) -> None:
        self.commands.append(self._packb(command.lower()))

    def get_scene(self) -> str:
        return _static_page(self.commands, self.camera_target)

    def close(self) -> None:
        """Nothing to close: no server runs."""

    def __repr__(self) -> str:
        return f"<recording, {len(self.commands)} commands>"


def _viewer_script() -> str:
    """meshcat's viewer (three.js and its controls) as one script."""
    meshcat = _require("meshcat", "meshcat", "the interactive HTML page")
    return pathlib.Path(meshcat.viewer_assets_path(), "dist", "main.min.js").read_text(encoding="utf-8")


def _static_page(commands: Sequence[bytes], target: Array | None = None, title: str = "vidyn") -> str:
    """A self-contained HTML page: meshcat's viewer inlined, then the commands replayed in
    order, decoded synchronously (so an animation never precedes the objects it moves);
    the camera orbits about ``target`` (world frame, m; default the origin). Opened as
    ``page.html#t=0.8``, the animation starts paused at 0.8 s."""
    replay = "\n".join(f'replay("{base64.b64encode(c).decode("ascii")}");' for c in commands)
    if target is not None:  # the camera's frame is y-up: world (x, y, z) is (x, z, -y) there
        x, y, z = (float(v) for v in target)
        replay += f"\nviewer.controls.target.set({x!r}, {z!r}, {-y!r});\nviewer.set_dirty();"
    script = _viewer_script().replace("</script", "<\\/script")
    return f"""<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>{html_lib.escape(title)}</title>
<style>body {{ margin: 0; }} #meshcat-pane {{ width: 100vw; height: 100vh; overflow: hidden; }}</style>
</head>
<body>
<div id="meshcat-pane"></div>
<script>{script}</script>
<script>
var viewer = new MeshCat.Viewer(document.getElementById("meshcat-pane"));
function replay(b64) {{
  var s = atob(b64), bytes = new Uint8Array(s.length);
  for (var i = 0; i < s.length; i++) bytes[i] = s.charCodeAt(i);
  viewer.handle_command_bytearray(bytes);
}}
{replay}
// page.html#t=0.8 opens the animation paused at 0.8 s (of playback)
var at = /[#&]t=([0-9.]+)/.exec(window.location.hash);
if (at) {{ viewer.animator.pause(); viewer.animator.seek(parseFloat(at[1])); }}
</script>
</body>
</html>
"""


def meshcat_visualizer() -> Any:
    """A ``meshcat.Visualizer`` that records instead of talking to a server: draw in it as
    usual (``vis["name"].set_object(...)``), then ``vis.static_html()`` gives the page, self
    contained and offline. Needs ``pip install meshcat``."""
    meshcat = _require("meshcat", "meshcat", "the interactive HTML page")
    return meshcat.Visualizer(window=_RecordingWindow())


def _hex(color: str | int) -> int:
    return int(color.lstrip("#"), 16) if isinstance(color, str) else int(color)


def _align_y(direction: Array) -> list[float]:
    """The quaternion ``[x, y, z, w]`` turning the y axis onto the unit vector ``direction``
    (three.js cylinders lie along y)."""
    y = np.array([0.0, 1.0, 0.0])
    w = 1.0 + float(direction @ y)
    if w < 1e-9:
        return [1.0, 0.0, 0.0, 0.0]  # opposite: half a turn about x
    q = np.concatenate([np.cross(y, direction), [w]])
    return [float(v) for v in q / np.linalg.norm(q)]


def _meshcat_shape(g: Any, shape: Shape, material: Any) -> list[tuple[Any, Array]]:
    """meshcat geometries of a shape and their placements in the shape's frame."""
    turn = np.eye(4)
    turn[:3, :3] = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]  # y (three.js cylinders) onto z (URDF)
    if shape.kind == "sphere":
        return [(g.Sphere(shape.size[0]), np.eye(4))]
    if shape.kind == "box":
        return [(g.Box(list(shape.size)), np.eye(4))]
    r, length = shape.size
    parts = [(g.Cylinder(length, r), turn)]
    if shape.kind == "capsule":
        for sign in (1.0, -1.0):
            cap = np.eye(4)
            cap[2, 3] = sign * length / 2
            parts.append((g.Sphere(r), cap))
    return parts


def meshcat_animation(
    vis: Any,
    model: Model,
    q: Configurations,
    dt: float,
    *,
    fps: float = 30.0,
    speed: float = 1.0,
    collision: Collision = None,
    tips: bool | Sequence[str] = True,
    color: str | int = 0xE8731A,
    shape_color: str | int = 0xD0D0D0,
    link_radius: float | None = None,
    loop: bool = True,
    camera: bool = True,
    view: tuple[float, float] | None = None,
) -> None:
    """Adds the motion ``q`` (N, nq) of ``model`` (knots ``dt`` s apart) to the meshcat
    visualizer ``vis`` (a recording one from :func:`meshcat_visualizer`, or a live
    ``meshcat.Visualizer()``) under ``vis["vidyn"]``: links as cylinders of ``color``, joints
    as dark spheres, collision primitives of ``shape_color``, half transparent, and an
    animation of the knots :func:`frame_indices` picks, played at ``speed`` times real time
    (``loop``: over and over). ``link_radius`` (m): default 1 % of the motion's extent.
    ``camera``: put the camera where it sees the whole motion, from ``view`` =
    ``(elevation, azimuth)`` in degrees (default as :func:`animate`'s)."""
    g = _require("meshcat.geometry", "meshcat", "the interactive HTML page")
    animation_module = _require("meshcat.animation", "meshcat", "the interactive HTML page")
    configurations = _configurations(model, q)
    scene = _Scene(model, collision, tips, ())
    knots = frame_indices(len(configurations), dt, fps, speed)
    poses = [scene.pose(configurations[k]) for k in knots]
    lower, upper = _bounds(scene, poses)
    radius = link_radius if link_radius is not None else 0.01 * max(float(np.linalg.norm(upper - lower)), 0.2)
    root = vis["vidyn"]
    link = g.MeshPhongMaterial(color=_hex(color))
    joint = g.MeshPhongMaterial(color=0x333333)
    for s in range(len(scene.skeleton.pairs)):
        root["links"][str(s)]["cylinder"].set_object(g.Cylinder(1.0, radius), link)
    for b in range(model.nbodies):
        root["joints"][str(b)]["sphere"].set_object(g.Sphere(1.5 * radius), joint)
    transparent = g.MeshPhongMaterial(color=_hex(shape_color), opacity=0.4, transparent=True)
    for k, shape in enumerate(scene.shapes):
        for j, (geometry, placement) in enumerate(_meshcat_shape(g, shape, transparent)):
            part = root["collision"][str(k)][str(j)]
            part.set_object(geometry, transparent)
            part.set_transform(placement)
    clip = animation_module.Animation(default_framerate=fps)
    for frame, pose in enumerate(poses):
        with clip.at_frame(root, frame) as at:
            _animate_pose(at, pose)
    vis.set_animation(clip, play=True, repetitions=10**9 if loop else 1)
    if camera:
        _place_camera(vis, lower, upper, view if view is not None else _axes_box(scene, poses, None).view)


def _animate_pose(at: Any, pose: _Pose) -> None:
    """One key frame: links (position, orientation, length), joints, collision shapes."""
    for s, (a, b) in enumerate(pose.segments):
        length = float(np.linalg.norm(b - a))
        direction = (b - a) / length if length > 1e-12 else np.array([0.0, 1.0, 0.0])
        node = at["links"][str(s)]
        node.set_property("position", "vector3", [float(v) for v in (a + b) / 2])
        node.set_property("quaternion", "quaternion", _align_y(direction))
        node.set_property("scale", "vector3", [1.0, max(length, 1e-9), 1.0])
    for i, p in enumerate(pose.joints):
        at["joints"][str(i)].set_property("position", "vector3", [float(v) for v in p])
    for k, placement in enumerate(pose.shapes):
        at["collision"][str(k)].set_transform(placement)


def _place_camera(vis: Any, lower: Array, upper: Array, view: tuple[float, float]) -> None:
    """Places meshcat's default camera at ``view`` = (elevation, azimuth) in degrees, as
    matplotlib's, from the centre of the motion's bounding box, far enough for the box to fit
    in its 75° field of view. A live viewer keeps looking at the world origin (meshcat has no
    command to move the target), so the distance then counts the centre's offset too; a
    recorded page looks at the centre."""
    centre, radius = (lower + upper) / 2, max(float(np.linalg.norm(upper - lower)) / 2, 0.1)
    elevation, azimuth = (math.radians(a) for a in view)
    direction = np.array([math.cos(elevation) * math.cos(azimuth), math.cos(elevation) * math.sin(azimuth), math.sin(elevation)])
    distance = 1.1 * radius / math.sin(math.radians(75.0 / 2))
    recording = isinstance(vis.window, _RecordingWindow)
    if recording:
        vis.window.camera_target = centre
        x, y, z = centre + direction * distance
    else:
        x, y, z = direction * (distance + float(np.linalg.norm(centre)))
    # the camera's parent frame is rotated (three.js is y-up): world (x, y, z) is (x, z, -y) there
    vis["/Cameras/default/rotated/<object>"].set_property("position", [float(x), float(z), float(-y)])


def meshcat_html(
    model: Model,
    q: Configurations,
    dt: float,
    path: str | os.PathLike[str] | None = None,
    **options: Any,
) -> str:
    """The interactive page of the motion ``q`` (N, nq) of ``model`` (knots ``dt`` s apart):
    meshcat's viewer with the scene of :func:`meshcat_animation` (``options`` are its keyword
    arguments), in one self-contained HTML file that works offline (``page.html#t=0.8`` opens
    it paused at 0.8 s of playback). Written to ``path`` when given; returns the HTML. Needs
    ``pip install meshcat``."""
    vis = meshcat_visualizer()
    meshcat_animation(vis, model, q, dt, **options)
    page = str(vis.static_html())
    if path is not None:
        out = pathlib.Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
    return page
