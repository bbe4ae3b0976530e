"""Exceptions: the class hierarchy, the mapping of every core error variant, and that bad
inputs raise the right class with a clear message (never a PanicException, which derives
from BaseException and escapes ``except Exception``)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import vidyn
from vidyn import models
from vidyn._core import _raise_core_error

# ---------------------------------------------------------------------------------------------
# hierarchy
# ---------------------------------------------------------------------------------------------

HIERARCHY = {
    vidyn.VidynError: (Exception,),
    vidyn.ModelError: (vidyn.VidynError,),
    vidyn.UrdfError: (vidyn.ModelError, vidyn.VidynError),
    vidyn.InputError: (vidyn.VidynError, ValueError),
    vidyn.UnknownNameError: (vidyn.VidynError, KeyError),
    vidyn.ConvergenceError: (vidyn.VidynError,),
}


@pytest.mark.parametrize("cls", list(HIERARCHY), ids=lambda c: c.__name__)
def test_exception_class(cls):
    for base in HIERARCHY[cls]:
        assert issubclass(cls, base)
    assert cls.__module__ == "vidyn"
    assert getattr(vidyn, cls.__name__) is cls
    assert cls.__doc__
    # picklable (by reference to vidyn.<name>) with its message
    e = pickle.loads(pickle.dumps(cls("message")))
    assert type(e) is cls and str(e) == "message"


def test_unrelated_classes_stay_apart():
    assert not issubclass(vidyn.InputError, vidyn.ModelError)
    assert not issubclass(vidyn.ModelError, ValueError)
    assert not issubclass(vidyn.UnknownNameError, ValueError)
    assert not issubclass(vidyn.ConvergenceError, vidyn.ModelError)


def test_unknown_name_error_prints_plain_message():
    # KeyError.__str__ would print the repr of the message (in quotes)
    assert str(vidyn.UnknownNameError("unknown frame 'x'")) == "unknown frame 'x'"


# ---------------------------------------------------------------------------------------------
# the mapping of every vidyn_rbd::RbdError variant (errors.rs: to_pyerr)
# ---------------------------------------------------------------------------------------------

CORE_VARIANTS = {
    "Dimension": (vidyn.InputError, "q has shape (6,), expected (model.nq,) = (7,)"),
    "NonFinite": (vidyn.InputError, "v[2] is not finite"),
    "NotNormalized": (vidyn.InputError, "q of joint 'root' (q[3..]) has norm 2"),
    "UnknownName": (vidyn.UnknownNameError, "unknown frame 'nowhere'"),
    "IndexOutOfRange": (vidyn.InputError, "frame index 9 out of range (model has 3)"),
    "InvalidModel": (vidyn.ModelError, "invalid model: sample"),
    "Urdf": (vidyn.UrdfError, "URDF error: sample"),
    "NotPositiveDefinite": (vidyn.ModelError, "joint 'j1' is not positive definite"),
    "Singular": (vidyn.InputError, "joint 'ball': gimbal lock"),
    "State": (vidyn.StateError, "sample"),
}


@pytest.mark.parametrize("variant", list(CORE_VARIANTS))
def test_core_error_mapping(variant):
    cls, fragment = CORE_VARIANTS[variant]
    with pytest.raises(cls) as info:
        _raise_core_error(variant)
    assert type(info.value) is cls
    assert fragment in str(info.value)


def test_core_error_mapping_rejects_unknown_variant():
    with pytest.raises(vidyn.InputError, match="unknown RbdError variant"):
        _raise_core_error("NoSuchVariant")


# ---------------------------------------------------------------------------------------------
# the same errors reached through the public API
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def free_model():
    """A random tree with spherical and free-flyer joints (nq > nv)."""
    for seed in range(100):
        m = models.random_tree(8, seed)
        if {"spherical", "freeflyer", "planar"} <= set(m.joint_kinds):
            return m
    raise AssertionError("no random tree with every quaternion-like joint")


def calls(model):
    """(name, f(q, v)) for every function that takes a configuration."""
    return [
        ("rnea", lambda q, v: vidyn.rnea(model, q, v, v)),
        ("aba", lambda q, v: vidyn.aba(model, q, v, v)),
        ("crba", lambda q, v: vidyn.crba(model, q)),
        ("minverse", lambda q, v: vidyn.minverse(model, q)),
        ("gravity", lambda q, v: vidyn.gravity(model, q)),
        ("nonlinear_effects", lambda q, v: vidyn.nonlinear_effects(model, q, v)),
        ("kinetic_energy", lambda q, v: vidyn.kinetic_energy(model, q, v)),
        ("potential_energy", lambda q, v: vidyn.potential_energy(model, q)),
        ("forward_kinematics", lambda q, v: vidyn.forward_kinematics(model, q, v, v)),
        ("frame_placement", lambda q, v: vidyn.frame_placement(model, q, 0)),
        ("frame_placements", lambda q, v: vidyn.frame_placements(model, q)),
        ("jacobian", lambda q, v: vidyn.jacobian(model, q, 0)),
        ("integrate", lambda q, v: model.integrate(q, v)),
        ("difference", lambda q, v: model.difference(q, q)),
    ]


def test_wrong_configuration_shape(free_model):
    m = free_model
    v = np.zeros(m.nv)
    for name, f in calls(m):
        for bad in (np.zeros(m.nq - 1), np.zeros(m.nq + 1), np.zeros((1, m.nq)), 0.0):
            shape = np.shape(bad)
            shape_str = f"({shape[0]},)" if len(shape) == 1 else str(shape)
            q_arg = "q0" if name == "difference" else "q"
            with pytest.raises(vidyn.InputError) as info:
                f(bad, v)
            assert str(info.value) == f"{q_arg} has shape {shape_str}, expected (model.nq,) = ({m.nq},)", name


def test_wrong_tangent_shape(free_model):
    m = free_model
    q = m.neutral()
    bad = np.zeros(m.nv + 2)
    for name, f in calls(m):
        if name in ("crba", "minverse", "gravity", "potential_energy", "frame_placement", "frame_placements", "jacobian", "difference"):
            continue
        with pytest.raises(vidyn.InputError, match=rf"^v has shape \({m.nv + 2},\), expected \(model.nv,\) = \({m.nv},\)$"):
            f(q, bad)
    with pytest.raises(vidyn.InputError, match=r"^tau has shape"):
        vidyn.aba(m, q, np.zeros(m.nv), bad)
    with pytest.raises(vidyn.InputError, match=r"^a has shape"):
        vidyn.rnea(m, q, np.zeros(m.nv), bad)
    with pytest.raises(vidyn.InputError, match=r"^a has shape"):
        vidyn.forward_kinematics(m, q, None, bad)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs(free_model, value):
    m = free_model
    q, v = m.neutral(), np.zeros(m.nv)
    q_bad = q.copy()
    q_bad[1] = value
    v_bad = v.copy()
    v_bad[3] = value
    for name, f in calls(m):
        with pytest.raises(vidyn.InputError, match=r"q0?\[1\] is not finite"):
            f(q_bad, v)
        if name in ("rnea", "aba", "nonlinear_effects", "kinetic_energy", "forward_kinematics", "integrate"):
            with pytest.raises(vidyn.InputError, match=r"v\[3\] is not finite"):
                f(q, v_bad)


def test_non_unit_quaternions(free_model):
    m = free_model
    v = np.zeros(m.nv)
    offsets = {"spherical": 0, "freeflyer": 3, "planar": 2}
    for body, kind in enumerate(m.joint_kinds):
        if kind not in offsets:
            continue
        q = m.neutral()
        q[m.idx_q[body] + offsets[kind]] = 1.5  # norm 1.5 (or sqrt(1 + 1.5**2))
        for name, f in calls(m):
            with pytest.raises(vidyn.InputError, match=f"joint '{m.joint_names[body]}'.*expected 1") as info:
                f(q, v)
            assert "norm" in str(info.value), name


def test_unknown_names(free_model):
    m = free_model
    q = m.neutral()
    for f in (
        lambda: vidyn.frame_placement(m, q, "no_such_frame"),
        lambda: vidyn.jacobian(m, q, "no_such_frame"),
        lambda: m.frame_index("no_such_frame"),
    ):
        with pytest.raises(vidyn.UnknownNameError, match="^unknown frame 'no_such_frame'$"):
            f()
        with pytest.raises(KeyError):  # also a KeyError
            f()
    with pytest.raises(vidyn.UnknownNameError, match="^unknown joint 'no_such_joint'$"):
        m.joint_index("no_such_joint")


@pytest.mark.parametrize("index", [-1, 10**6, 10**30])
def test_frame_index_out_of_range(free_model, index):
    m = free_model
    n = len(m.frame_names)
    with pytest.raises(vidyn.InputError, match=rf"frame index {index} out of range \(model has {n} frames\)"):
        vidyn.frame_placement(m, m.neutral(), index)
    with pytest.raises(vidyn.InputError):
        vidyn.jacobian(m, m.neutral(), index)


def test_frame_of_wrong_type(free_model):
    with pytest.raises(TypeError, match="frame must be a frame name"):
        vidyn.frame_placement(free_model, free_model.neutral(), 1.5)


def test_unknown_jacobian_reference(free_model):
    with pytest.raises(vidyn.InputError, match="reference = 'WORLD' is not accepted; expected 'world', 'local' or 'local_world_aligned'"):
        vidyn.jacobian(free_model, free_model.neutral(), 0, "WORLD")


def test_unconvertible_arrays(free_model):
    m = free_model
    v = np.zeros(m.nv)
    with pytest.raises(vidyn.InputError, match="^q cannot be converted to a float64 array"):
        vidyn.rnea(m, "abc", v, v)
    with pytest.raises(vidyn.InputError, match="^q cannot be converted to a float64 array"):
        vidyn.rnea(m, [[1.0], [1.0, 2.0]], v, v)
    with pytest.raises(vidyn.InputError, match="^v has complex dtype"):
        vidyn.rnea(m, m.neutral(), v.astype(complex), v)
    with pytest.raises(vidyn.InputError, match=r"^q has shape \(\), expected"):
        vidyn.rnea(m, None, v, v)


def test_model_argument_type(free_model):
    with pytest.raises(TypeError):
        vidyn.rnea("model", free_model.neutral(), np.zeros(free_model.nv), np.zeros(free_model.nv))


def test_random_configuration_rng_errors(free_model):
    with pytest.raises(vidyn.InputError, match=r"rng seed must be in \[0, 2\*\*64\), got -1"):
        free_model.random_configuration(-1)
    with pytest.raises(vidyn.InputError):
        free_model.random_configuration(2**64)
    with pytest.raises(TypeError, match="rng must be None, an int seed or a numpy.random.Generator"):
        free_model.random_configuration(0.5)


def test_builtin_model_arguments():
    with pytest.raises(vidyn.InputError, match="n must be a non-negative int, got -1"):
        models.pendulum_chain(-1)
    with pytest.raises(vidyn.InputError, match="too large"):
        models.pendulum_chain(10**9)
    with pytest.raises(vidyn.InputError, match="too large"):
        models.random_tree(10**9)
    with pytest.raises(vidyn.InputError, match="depth = 40 is too large"):
        models.binary_tree(40)
    with pytest.raises(vidyn.InputError, match=r"seed must be in \[0, 2\*\*64\)"):
        models.random_tree(3, -5)
    with pytest.raises(KeyError, match="unknown example robot 'nope'"):
        models.example_robot("nope")


# ---------------------------------------------------------------------------------------------
# URDF
# ---------------------------------------------------------------------------------------------

GOOD_URDF = """<robot name="r">
  <link name="base"/>
  <link name="l1"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>"""


def test_good_urdf_string_loads():
    m = vidyn.Model.from_urdf_string(GOOD_URDF)
    assert (m.nq, m.nv) == (1, 1)
    m = vidyn.Model.from_urdf_string(GOOD_URDF, floating_base=True)
    assert (m.nq, m.nv) == (8, 7)


@pytest.mark.parametrize(
    "xml",
    [
        "<robot",  # malformed XML
        "",  # empty
        "<notarobot/>",  # wrong document element
        GOOD_URDF.replace('<child link="l1"/>', '<child link="missing"/>'),  # dangling link
        GOOD_URDF.replace('type="revolute"', 'type="teleport"'),  # unknown joint type
    ],
    ids=["malformed", "empty", "not-robot", "dangling-link", "unknown-joint-type"],
)
def test_bad_urdf_string(xml):
    with pytest.raises(vidyn.UrdfError) as info:
        vidyn.Model.from_urdf_string(xml)
    assert isinstance(info.value, vidyn.ModelError)
    assert str(info.value).startswith("URDF error: ")


def test_missing_urdf_file(tmp_path):
    path = tmp_path / "missing.urdf"
    with pytest.raises(vidyn.UrdfError, match="missing.urdf"):
        vidyn.Model.from_urdf(path)  # os.PathLike
    with pytest.raises(vidyn.UrdfError, match="missing.urdf"):
        vidyn.Model.from_urdf(str(path))


def test_urdf_file_roundtrip(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text(GOOD_URDF)
    assert vidyn.Model.from_urdf(path).nv == 1


# ---------------------------------------------------------------------------------------------
# ModelBuilder
# ---------------------------------------------------------------------------------------------


def test_builder_input_errors():
    b = vidyn.ModelBuilder("b")
    root = b.add_body(None, "root", "revolute", axis=[0, 0, 1], mass=1.0, inertia=np.eye(3))
    cases = [
        (dict(joint="hinge"), vidyn.InputError, "joint = 'hinge' is not accepted; expected 'revolute', 'prismatic', 'spherical', 'freeflyer' or 'planar'"),
        (dict(joint="revolute"), vidyn.InputError, "a revolute joint needs an axis"),
        (dict(joint="prismatic", axis=[0, 0, 0]), vidyn.InputError, "axis has norm 0"),
        (dict(joint="spherical", axis=[0, 0, 1]), vidyn.InputError, "a spherical joint takes no axis"),
        (dict(joint="revolute", axis=[0, 1]), vidyn.InputError, r"axis has shape (2,), expected (3,)"),
        (dict(parent=5), vidyn.InputError, "parent 5 is not a body index: the builder has 1 bodies"),
        (dict(parent=-2), vidyn.InputError, "parent must be a non-negative int, got -2"),
        (dict(placement=np.eye(3)), vidyn.InputError, "placement has shape (3, 3), expected (4, 4)"),
        (dict(placement=2 * np.eye(4)), vidyn.InputError, "placement[3, :] is"),
        (dict(placement=np.diag([1.0, 1.0, -1.0, 1.0])), vidyn.InputError, "placement[:3, :3] is not a rotation matrix"),
        (dict(placement=np.diag([1.0, 1.0, 1.001, 1.0])), vidyn.InputError, "placement[:3, :3] is not a rotation matrix"),
        (dict(mass=float("nan")), vidyn.InputError, "mass is not finite (nan)"),
        (dict(com=[0.0, np.inf, 0.0]), vidyn.InputError, "com[1] is not finite (inf)"),
        (dict(inertia=np.full((3, 3), np.nan)), vidyn.InputError, "inertia[0, 0] is not finite (nan)"),
        (dict(mass=-1.0), vidyn.ModelError, "inertia is not physical"),
        (dict(mass=1.0, inertia=-np.eye(3)), vidyn.ModelError, "inertia is not physical"),
        (dict(name="root"), vidyn.ModelError, "duplicate joint name 'root'"),
    ]
    for overrides, cls, message in cases:
        kwargs = dict(parent=root, name="child", joint="spherical")
        kwargs.update(overrides)
        with pytest.raises(cls) as info:
            b.add_body(**kwargs)
        assert type(info.value) is cls, overrides
        assert message in str(info.value), (overrides, str(info.value))
    with pytest.raises(TypeError):
        b.add_body("root", "x", "spherical")
    with pytest.raises(vidyn.InputError, match="parent 3 is not a body index"):
        b.add_frame("f", 3)
    b.add_frame("f", root)
    with pytest.raises(vidyn.ModelError, match="duplicate frame 'f'"):
        b.add_frame("f", None)
    with pytest.raises(vidyn.InputError, match=r"g has shape \(2,\), expected \(3,\)"):
        b.set_gravity([0.0, 1.0])
    # the failed calls left the builder usable and unchanged
    m = b.build()
    assert m.nbodies == 1 and m.frame_names == ["f"]


def test_builder_is_consumed_by_build():
    b = vidyn.ModelBuilder()
    b.add_body(None, "a", "spherical", mass=1.0, inertia=np.eye(3))
    b.build()
    for f in (
        lambda: b.build(),
        lambda: b.add_body(None, "b", "spherical"),
        lambda: b.add_frame("f", None),
        lambda: b.set_gravity([0, 0, -1]),
    ):
        with pytest.raises(vidyn.VidynError, match="already been built"):
            f()


def test_massless_subtree_is_not_positive_definite():
    b = vidyn.ModelBuilder()
    b.add_body(None, "floating", "revolute", axis=[0, 0, 1])  # no mass
    m = b.build()
    for f in (lambda: vidyn.aba(m, [0.0], [0.0], [0.0]), lambda: vidyn.minverse(m, [0.0])):
        with pytest.raises(vidyn.ModelError, match="joint 'floating' is not positive definite"):
            f()


def test_model_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        vidyn.Model()  # type: ignore[call-arg]
