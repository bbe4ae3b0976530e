"""vidyn.viz: the geometry drawn (skeleton, frames' bodies, URDF collision primitives) against
forward kinematics and Pinocchio's geometry model, the files written (GIF frames, strip, MP4),
the meshcat page's content, and the page rendered by a real browser (headless Chromium) with
its pixels checked.

The browser test needs ``chromium`` (Debian: ``apt-get install chromium``; or the binary named
by ``VIDYN_CHROMIUM``) and ``meshcat`` (pip); it is skipped, saying why, without them. Its
screenshots are kept in ``VIDYN_VIZ_ARTEFACTS`` (default ``examples/out/``):
``viz_meshcat_anymal.png`` and ``viz_meshcat_empty.png``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

import vidyn
from vidyn import models, viz
from pin_layout import ConfigurationMap

pytest.importorskip("matplotlib", reason="vidyn.viz draws with matplotlib (pip install matplotlib)")
Image = pytest.importorskip("PIL.Image", reason="reading the written images needs Pillow")

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARTEFACTS = pathlib.Path(os.environ.get("VIDYN_VIZ_ARTEFACTS", ROOT / "examples" / "out"))


def robot(name: str) -> vidyn.Model:
    with warnings.catch_warnings():  # inertia and <mimic> warnings of example-robot-data
        warnings.simplefilter("ignore")
        return models.example_robot(name)


def urdf(name: str) -> str:
    robots = models.example_robot_data_dir()
    assert robots is not None
    return str(robots / models.EXAMPLE_ROBOTS[name].urdf)


def pinocchio_model(name: str):
    pin = pytest.importorskip("pinocchio")
    if models.EXAMPLE_ROBOTS[name].floating_base:
        return pin.buildModelFromUrdf(urdf(name), pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(urdf(name))


def swinging_acrobot(knots: int = 51, dt: float = 0.02) -> tuple[vidyn.Model, np.ndarray]:
    """The acrobot released from 1 rad and 0.5 rad: a motion that visibly moves."""
    model = models.acrobot()
    vi = vidyn.VariationalIntegrator(model, dt)
    return model, vi.rollout([1.0, 0.5], [0.0, 0.0], steps=knots - 1).q


# ----------------------------------------------------------------------------------------
# Sampling, skeleton, frames' bodies
# ----------------------------------------------------------------------------------------


def test_frame_indices_sample_the_motion_at_the_playback_rate():
    idx = viz.frame_indices(101, 0.01, 25.0)  # 1 s at 25 frames per second
    assert len(idx) == 26 and idx[0] == 0 and idx[1] == 4 and idx[-1] == 100
    assert np.all(np.diff(idx) == 4)
    fast = viz.frame_indices(101, 0.01, 25.0, speed=2.0)  # twice real time: half the frames
    assert len(fast) == 14 and np.all(np.diff(fast)[:-1] == 8) and fast[-1] == 100
    assert viz.frame_indices(7, 0.1, 3.0).tolist() == [0, 3, 6]
    assert viz.frame_indices(1, 0.01, 25.0).tolist() == [0]
    with pytest.raises(vidyn.InputError):
        viz.frame_indices(10, 0.01, 0.0)


@pytest.mark.parametrize("name", ["panda", "anymal"])
def test_skeleton_points_are_the_joint_positions_of_pinocchio(name):
    pin = pytest.importorskip("pinocchio")
    model, pmodel = robot(name), pinocchio_model(name)
    pdata, layout = pmodel.createData(), ConfigurationMap(model, pmodel)
    skeleton = viz.Skeleton(model)
    for seed in range(3):
        q = model.random_configuration(seed)
        points = skeleton.points(q)
        assert points.shape == (skeleton.npoints, 3)
        np.testing.assert_allclose(points[: model.nbodies], vidyn.forward_kinematics(model, q).placements[:, :3, 3], atol=1e-14)
        pin.forwardKinematics(pmodel, pdata, layout.q_to_pin(q))
        for body, name_ in enumerate(model.joint_names):
            np.testing.assert_allclose(points[body], pdata.oMi[pmodel.getJointId(name_)].translation, atol=1e-12)
        for k, frame in enumerate(skeleton.tip_frames):
            np.testing.assert_allclose(points[model.nbodies + k], vidyn.frame_placement(model, q, frame)[:3, 3], atol=1e-14)
        np.testing.assert_array_equal(skeleton.segments(q), points[skeleton.pairs])


def test_skeleton_segments_join_parents_to_children_and_fixed_roots_to_the_world():
    panda, anymal = robot("panda"), robot("anymal")
    for model in (panda, anymal):
        pairs = {tuple(p) for p in viz.Skeleton(model, tips=False).pairs}
        assert {(p, i) for i, p in enumerate(model.parents) if p >= 0} <= pairs
    fixed = viz.Skeleton(panda, tips=False)  # revolute root: the base column from the world origin
    assert fixed.anchored and (fixed.npoints - 1, 0) in {tuple(p) for p in fixed.pairs}
    q = panda.random_configuration(0)
    np.testing.assert_array_equal(fixed.points(q)[-1], np.zeros(3))
    floating = viz.Skeleton(anymal, tips=False)  # a free-flyer hangs from nothing
    assert not floating.anchored and len(floating.pairs) == anymal.nbodies - 1


def test_skeleton_tips_reach_the_end_effector_and_feet():
    panda = robot("panda")
    tips = [panda.frame_names[f] for f in viz.Skeleton(panda).tip_frames]
    assert any(name.startswith("panda_hand_tcp") for name in tips)  # 10 cm past the flange
    feet = ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]
    anymal = robot("anymal")
    skeleton = viz.Skeleton(anymal, tips=feet)
    assert [anymal.frame_names[f] for f in skeleton.tip_frames] == feet
    knees = [anymal.joint_index(f"{leg}_KFE") for leg in ("LF", "RF", "LH", "RH")]
    assert [tuple(p) for p in skeleton.pairs[-4:]] == [(k, anymal.nbodies + i) for i, k in enumerate(knees)]
    with pytest.raises(vidyn.UnknownNameError):
        viz.Skeleton(anymal, tips=["no_such_frame"])


@pytest.mark.parametrize("name", ["panda", "anymal", "talos"])
def test_frame_bodies_are_pinocchios_parent_joints(name):
    model, pmodel = robot(name), pinocchio_model(name)
    parent = {f.name: pmodel.names[f.parentJoint] for f in pmodel.frames}
    bodies = viz.frame_bodies(model)
    assert len(bodies) == len(model.frame_names)
    checked = 0
    for frame, body in zip(model.frame_names, bodies):
        if frame in parent:
            expected = -1 if parent[frame] == "universe" else model.joint_index(parent[frame])
            assert body == expected, frame
            checked += 1
    assert checked >= len(model.frame_names) - 1


def test_frame_bodies_of_every_joint_kind():
    model = models.random_tree(40, seed=5)  # revolute, prismatic, spherical, planar, free-flyer
    assert set(model.joint_kinds) == {"revolute", "prismatic", "spherical", "planar", "freeflyer"}
    body = {name: model.joint_index(name.replace("link", "joint")) for name in model.frame_names}  # jointK, linkK
    assert viz.frame_bodies(model) == [body[name] for name in model.frame_names]


# ----------------------------------------------------------------------------------------
# Collision primitives
# ----------------------------------------------------------------------------------------


def test_collision_shapes_are_placed_like_pinocchios_geometry_model():
    """ANYmal's URDF: 41 boxes, cylinders and spheres, some on links merged into their parent
    by fixed joints (adapters, feet, IMU): the fixed joints' placements must be composed."""
    pin = pytest.importorskip("pinocchio")
    model, pmodel = robot("anymal"), pinocchio_model("anymal")
    robots = models.example_robot_data_dir()
    gmodel = pin.buildGeomFromUrdf(pmodel, urdf("anymal"), pin.GeometryType.COLLISION, package_dirs=[str(robots.parent.parent)])
    shapes = viz.collision_shapes("anymal")
    assert len(shapes) == gmodel.ngeoms == 41
    assert {"LF_FOOT", "LF_ADAPTER", "imu_link"} <= {s.link for s in shapes}
    assert {s.kind for s in shapes} == {"box", "cylinder", "sphere"}
    named, count = {}, {}
    for s in shapes:  # Pinocchio names the k-th collision of a link "<link>_<k>"
        named[f"{s.link}_{count.get(s.link, 0)}"] = s
        count[s.link] = count.get(s.link, 0) + 1
    order = [named[g.name] for g in gmodel.geometryObjects]
    for shape, g in zip(order, gmodel.geometryObjects):
        geometry = g.geometry
        kind = type(geometry).__name__.lower()
        assert kind == shape.kind, g.name
        if kind == "sphere":
            assert shape.size == pytest.approx((geometry.radius,))
        elif kind == "cylinder":
            assert shape.size == pytest.approx((geometry.radius, 2 * geometry.halfLength))
        else:
            assert shape.size == pytest.approx(tuple(2 * geometry.halfSide))
    gdata, pdata, layout = gmodel.createData(), pmodel.createData(), ConfigurationMap(model, pmodel)
    for seed in range(3):
        q = model.random_configuration(seed)
        pin.updateGeometryPlacements(pmodel, pdata, gmodel, gdata, layout.q_to_pin(q))
        ours = viz.shape_placements(model, q, order)
        theirs = np.array([m.homogeneous for m in gdata.oMg])
        np.testing.assert_allclose(ours, theirs, atol=1e-12)


URDF = """<robot name="shapes">
  <link name="base">
    <collision><origin xyz="0.1 -0.2 0.3" rpy="0.3 -0.4 1.2"/><geometry><sphere radius="0.05"/></geometry></collision>
    <collision><geometry><mesh filename="package://nothing/here.stl"/></geometry></collision>
    <collision><origin xyz="0 0 0.5"/><geometry><cylinder radius="0.02" length="0.4"/></geometry></collision>
  </link>
  <link name="arm">
    <collision><origin rpy="1.5707963267948966 0 0"/><geometry><capsule radius="0.03" length="0.2"/></geometry></collision>
    <collision><geometry><box size="0.1 0.2 0.3"/></geometry></collision>
  </link>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 1"/><axis xyz="0 1 0"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>
"""


def test_collision_shapes_read_every_primitive_and_skip_meshes(tmp_path):
    pin = pytest.importorskip("pinocchio")
    path = tmp_path / "shapes.urdf"
    path.write_text(URDF)
    shapes = viz.collision_shapes(path)
    assert [(s.link, s.kind, s.size) for s in shapes] == [
        ("base", "sphere", (0.05,)),
        ("base", "cylinder", (0.02, 0.4)),
        ("arm", "capsule", (0.03, 0.2)),
        ("arm", "box", (0.1, 0.2, 0.3)),
    ]
    np.testing.assert_allclose(shapes[0].placement[:3, :3], pin.rpy.rpyToMatrix(0.3, -0.4, 1.2), atol=1e-15)
    np.testing.assert_allclose(shapes[0].placement[:3, 3], [0.1, -0.2, 0.3])
    model = vidyn.Model.from_urdf(path)
    q = np.array([0.7])
    placements = viz.shape_placements(model, q, shapes)
    np.testing.assert_allclose(placements[3], vidyn.frame_placement(model, q, "arm"), atol=1e-15)
    np.testing.assert_allclose(placements[0], shapes[0].placement, atol=1e-15)  # base: fixed to the world
    with pytest.raises(FileNotFoundError):
        viz.collision_shapes(tmp_path / "missing.urdf")
    with pytest.raises(vidyn.UnknownNameError):
        viz.shape_placements(model, q, [viz.Shape("no_such_link", "sphere", (0.1,), np.eye(4))])


def random_placement(rng: np.random.Generator) -> np.ndarray:
    x = np.eye(4)
    x[:3, :3] = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    if np.linalg.det(x[:3, :3]) < 0:
        x[:3, 0] *= -1
    x[:3, 3] = rng.standard_normal(3)
    return x


@pytest.mark.parametrize(
    "kind, size",
    [("sphere", (0.3,)), ("cylinder", (0.1, 0.6)), ("capsule", (0.1, 0.6)), ("box", (0.2, 0.4, 0.6))],
)
def test_wireframes_lie_on_their_shapes_and_span_them(kind, size):
    rng = np.random.default_rng(7)
    x = random_placement(rng)
    shape = viz.Shape("l", kind, size, np.eye(4))
    lines = viz.wireframe(shape, x)
    local = np.concatenate([(line - x[:3, 3]) @ x[:3, :3] for line in lines])  # back in the shape's frame
    if kind == "sphere":
        np.testing.assert_allclose(np.linalg.norm(local, axis=1), size[0], atol=1e-12)
        np.testing.assert_allclose(np.abs(local).max(axis=0), size[0], atol=1e-12)
    elif kind == "cylinder":
        np.testing.assert_allclose(np.hypot(local[:, 0], local[:, 1]), size[0], atol=1e-12)
        np.testing.assert_allclose([local[:, 2].min(), local[:, 2].max()], [-size[1] / 2, size[1] / 2], atol=1e-12)
    elif kind == "capsule":
        nearest = np.clip(local[:, 2], -size[1] / 2, size[1] / 2)  # on the axis segment
        distance = np.linalg.norm(local - np.c_[np.zeros((len(local), 2)), nearest], axis=1)
        np.testing.assert_allclose(distance, size[0], atol=1e-12)
        np.testing.assert_allclose(local[:, 2].max(), size[1] / 2 + size[0], atol=1e-12)
    else:
        half = np.array(size) / 2
        np.testing.assert_allclose(np.abs(local).max(axis=0), half, atol=1e-12)
        on_edges = np.sum(np.isclose(np.abs(local), half, atol=1e-12), axis=1)
        assert np.all(on_edges >= 2)  # every point on an edge: two coordinates at the faces


# ----------------------------------------------------------------------------------------
# matplotlib: GIF, MP4, strip, one pose
# ----------------------------------------------------------------------------------------


def test_gif_has_one_frame_per_sampled_knot_and_shows_the_motion(tmp_path):
    model, q = swinging_acrobot()  # 51 knots, 1 s
    path = viz.animate(model, q, 0.02, tmp_path / "acrobot.gif", fps=10, size=(4.0, 3.0), dpi=50)
    expected = len(viz.frame_indices(len(q), 0.02, 10.0))
    assert expected == 11
    with Image.open(path) as gif:
        assert gif.n_frames == expected
        assert gif.size == (200, 150)
        assert gif.info["duration"] == 100  # ms per frame at 10 fps
        first = np.asarray(gif.convert("RGB"), dtype=float)
        gif.seek(gif.n_frames - 1)
        last = np.asarray(gif.convert("RGB"), dtype=float)
    assert np.abs(first - last).sum(axis=2).astype(bool).sum() > 200  # the links moved


def test_mp4_needs_ffmpeg_and_says_so(tmp_path, monkeypatch):
    animation = pytest.importorskip("matplotlib.animation")
    model, q = swinging_acrobot(11)
    if animation.writers.is_available("ffmpeg"):
        path = viz.animate(model, q, 0.02, tmp_path / "acrobot.mp4", fps=25, size=(3.0, 2.0), dpi=40)
        assert path.read_bytes()[4:8] == b"ftyp"  # an ISO media file
    monkeypatch.setattr(animation.writers, "is_available", lambda name: False)
    with pytest.raises(RuntimeError, match="ffmpeg"):
        viz.animate(model, q, 0.02, tmp_path / "again.mp4")


def test_strip_puts_the_snapshots_side_by_side(tmp_path):
    model, q = swinging_acrobot()
    path = viz.strip(model, q, tmp_path / "strip.png", n=4, dt=0.02, panel=(2.0, 2.0), dpi=50, trace=["tip"])
    with Image.open(path) as png:
        assert png.size == (400, 100)
        pixels = np.asarray(png.convert("RGB"), dtype=float)
    quarters = np.split(pixels, 4, axis=1)
    assert all(np.abs(quarters[0] - other).sum(axis=2).astype(bool).sum() > 100 for other in quarters[1:])


def test_draw_fits_equal_axes_around_the_pose():
    figure = pytest.importorskip("matplotlib.figure")
    model = robot("anymal")
    q = models.reference_configuration(model, "anymal", "standing")
    ax = figure.Figure().add_subplot(projection="3d")
    viz.draw(ax, model, q, collision="anymal", triads=0.05)
    limits = np.array([ax.get_xlim(), ax.get_ylim(), ax.get_zlim()])
    shapes = viz.collision_shapes("anymal")
    outline = [line for s, x in zip(shapes, viz.shape_placements(model, q, shapes)) for line in viz.wireframe(s, x)]
    for points in (viz.Skeleton(model).points(q), np.concatenate(outline)):
        assert np.all(points >= limits[:, 0]) and np.all(points <= limits[:, 1])
    aspect = np.asarray(ax.get_box_aspect())  # a metre is as long on the three axes
    np.testing.assert_allclose(aspect / aspect[0], np.ptp(limits, axis=1) / np.ptp(limits[0]), rtol=1e-9)


def test_triads_draw_the_body_axes():
    figure = pytest.importorskip("matplotlib.figure")
    agg = pytest.importorskip("matplotlib.backends.backend_agg")
    model = models.pendulum_chain(3)
    q = np.array([0.3, -0.5, 0.8])

    def render(triads: float) -> np.ndarray:
        fig = figure.Figure(figsize=(4.0, 4.0), dpi=80)
        canvas = agg.FigureCanvasAgg(fig)
        viz.draw(fig.add_subplot(projection="3d"), model, q, triads=triads, view=(30.0, -60.0))
        canvas.draw()
        return np.asarray(canvas.buffer_rgba())[..., :3].astype(float) / 255

    def green(pixels: np.ndarray) -> int:  # the y axes' colour, in nothing else
        return int(np.sum((pixels[..., 1] > 0.45) & (pixels[..., 1] > pixels[..., 0] + 0.2) & (pixels[..., 1] > pixels[..., 2] + 0.2)))

    assert green(render(0.0)) == 0 and green(render(0.5)) > 30


def test_bad_inputs_raise(tmp_path):
    model, q = swinging_acrobot(5)
    with pytest.raises(vidyn.InputError, match="model.nq"):
        viz.animate(model, q[:, :1], 0.02, tmp_path / "x.gif")
    with pytest.raises(vidyn.InputError, match="gif"):
        viz.animate(model, q, 0.02, tmp_path / "x.avi")
    with pytest.raises(FileNotFoundError):
        viz.animate(model, q, 0.02, tmp_path / "x.gif", collision=tmp_path / "missing.urdf")
    with pytest.raises(vidyn.InputError):
        viz.strip(model, q, tmp_path / "x.png", n=0)


def test_missing_packages_are_named(monkeypatch):
    model, q = swinging_acrobot(3)
    monkeypatch.setitem(sys.modules, "meshcat", None)
    with pytest.raises(ImportError, match="pip install meshcat"):
        viz.meshcat_html(model, q, 0.02)
    for module in ("matplotlib", "matplotlib.figure"):  # as if not installed (both are loaded)
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        viz.animate(model, q, 0.02, "never.gif")


# ----------------------------------------------------------------------------------------
# meshcat: the page, then the page in a browser
# ----------------------------------------------------------------------------------------


def replayed(page: str) -> list[dict]:
    """The meshcat commands a page replays, decoded."""
    import base64
    import re

    umsgpack = pytest.importorskip("umsgpack")
    return [umsgpack.unpackb(base64.b64decode(b)) for b in re.findall(r'replay\("([A-Za-z0-9+/=]*)"\);', page)]


def test_meshcat_page_is_self_contained_and_animates_the_skeleton():
    pytest.importorskip("meshcat", reason="meshcat is optional (pip install meshcat)")
    model, q = swinging_acrobot()
    page = viz.meshcat_html(model, q, 0.02, fps=10.0)
    assert "<script src" not in page and "<link" not in page and "MeshCat.Viewer" in page
    commands = replayed(page)
    skeleton = viz.Skeleton(model)
    objects = [c for c in commands if c["type"] == "set_object"]
    assert len(objects) == len(skeleton.pairs) + model.nbodies
    (animation,) = [c for c in commands if c["type"] == "set_animation"]
    knots = viz.frame_indices(len(q), 0.02, 10.0)
    clips = {a["path"]: a["clip"] for a in animation["animations"]}
    for body in range(model.nbodies):
        (track,) = clips[f"/meshcat/vidyn/joints/{body}"]["tracks"]
        assert [k["time"] for k in track["keys"]] == list(range(len(knots)))
        expected = np.array([skeleton.points(q[k])[body] for k in knots])
        np.testing.assert_allclose([k["value"] for k in track["keys"]], expected, atol=1e-12)
    for s, (a, b) in enumerate(skeleton.pairs):  # a unit cylinder along y, moved onto the segment
        tracks = {t["name"]: [k["value"] for k in t["keys"]] for t in clips[f"/meshcat/vidyn/links/{s}"]["tracks"]}
        for frame, k in enumerate(knots):
            start, end = skeleton.points(q[k])[[a, b]]
            (x, y, z, w), scale = tracks[".quaternion"][frame], tracks[".scale"][frame]
            turned_y = np.array([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)])  # R e_y
            np.testing.assert_allclose(turned_y * scale[1], end - start, atol=2e-9)  # length >= 1e-9
            np.testing.assert_allclose(tracks[".position"][frame], (start + end) / 2, atol=1e-12)


def chromium() -> str | None:
    for name in (os.environ.get("VIDYN_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def screenshot(browser: str, page: pathlib.Path, png: pathlib.Path, at: float | None = None) -> np.ndarray:
    """Headless Chromium renders ``page`` (WebGL in software, SwiftShader; no network), its
    animation paused at ``at`` seconds when given, into an 800x600 ``png``; returns its RGB
    pixels in [0, 1]."""
    url = page.as_uri() + (f"#t={at}" if at is not None else "")
    with tempfile.TemporaryDirectory() as profile:
        command = [
            browser, "--headless", "--no-sandbox", "--disable-dev-shm-usage", "--no-first-run",
            "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}",
            "--window-size=800,600", "--virtual-time-budget=3000", f"--screenshot={png}", url,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and png.is_file(), done.stderr[-2000:]
    with Image.open(png) as image:
        return np.asarray(image.convert("RGB"), dtype=float) / 255


def orange(pixels: np.ndarray) -> np.ndarray:
    """Pixels of the links' colour (#e8731a, hue 26°) however lit: red the largest channel, hue
    between 12° and 42°, saturated, not dark."""
    high, low = pixels.max(axis=2), pixels.min(axis=2)
    hue = 60 * (pixels[..., 1] - pixels[..., 2]) / np.maximum(high - low, 1e-9)
    return (pixels[..., 0] >= high) & (high > 0.3) & (high - low > 0.5 * high) & (hue > 12) & (hue < 42)


def test_chromium_draws_the_robot_of_the_meshcat_page(tmp_path):
    pytest.importorskip("meshcat", reason="meshcat is not installed (pip install meshcat)")
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium to render the page (apt-get install chromium, or set VIDYN_CHROMIUM)")
    model = robot("anymal")
    q = np.tile(models.reference_configuration(model, "anymal", "standing"), (31, 1))
    q[:, 7:] += 0.4 * np.sin(np.linspace(0.0, np.pi, 31))[:, None]  # every joint bends and back, 1.5 s
    robot_page, empty_page = tmp_path / "anymal.html", tmp_path / "empty.html"
    viz.meshcat_html(model, q, 0.05, robot_page, collision="anymal")
    empty_page.write_text(viz.meshcat_visualizer().static_html())
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    bent = screenshot(browser, robot_page, ARTEFACTS / "viz_meshcat_anymal.png", at=0.75)  # knees most bent
    empty = screenshot(browser, empty_page, ARTEFACTS / "viz_meshcat_empty.png")
    start = screenshot(browser, robot_page, tmp_path / "start.png", at=0.0)
    links, none = orange(bent), orange(empty)
    assert links.sum() > 1500, f"{links.sum()} pixels of the links' colour"  # measured: ~4600 of 480 000
    assert none.sum() < 60, f"{none.sum()} pixels of the links' colour without a robot"
    rows, cols = np.nonzero(links)
    assert 150 < cols.mean() < 650 and 100 < rows.mean() < 500  # in the middle of the view
    changed = lambda a, b: int(np.sum(np.abs(a - b).max(axis=2) > 0.1))  # noqa: E731
    assert changed(bent, empty) > 10_000  # the robot and its shapes
    assert changed(bent, start) > 1_000  # the animation moves the robot
    assert orange(start).sum() > 1500
