"""Smoke tests of the Python API: every function, method and property exists, takes what the
stub says and returns float64 arrays of the documented shapes. The maths is checked elsewhere
(test_properties.py, the Pinocchio oracle); here only a few identities confirm the wiring."""

from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest

import vidyn
from vidyn import models

PUBLIC = [
    "ContactSchedule",
    "ConvergenceError",
    "Distance",
    "InputError",
    "Kinematics",
    "MaximalIntegrator",
    "MaximalTrajectory",
    "Model",
    "ModelBuilder",
    "ModelError",
    "ModelWarning",
    "Perpendicular",
    "PointOnPlane",
    "SingleDofMap",
    "StateError",
    "Trajectory",
    "UnknownNameError",
    "UrdfError",
    "VariationalIntegrator",
    "VidynError",
    "__version__",
    "aba",
    "aba_derivatives",
    "aba_second_order",
    "aba_second_order_contracted",
    "batch",
    "center_of_mass",
    "center_of_mass_velocity",
    "centroidal_momentum",
    "centroidal_momentum_matrix",
    "centroidal_momentum_matrix_time_variation",
    "collisions",
    "com_jacobian",
    "crba",
    "forward_kinematics",
    "frame_acceleration",
    "frame_contact",
    "frame_placement",
    "frame_placements",
    "frame_velocity",
    "frame_velocity_derivatives",
    "get_num_threads",
    "gravity",
    "jacobian",
    "jacobian_time_variation",
    "kinetic_energy",
    "minverse",
    "mjcf",
    "models",
    "nonlinear_effects",
    "optim",
    "point_contact",
    "point_contact_forces",
    "potential_energy",
    "rnea",
    "rnea_derivatives",
    "rnea_second_order",
    "rnea_second_order_contracted",
    "set_num_threads",
    "spatial",
    "trajectory_io",
    "viz",
]


def test_public_names():
    assert sorted(vidyn.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(vidyn, name), name
    assert isinstance(vidyn.__version__, str) and vidyn.__version__.count(".") >= 2
    for name in models.__all__:
        assert hasattr(models, name), name


def test_signatures_and_docstrings():
    """help() shows a signature and a docstring for every function (text_signature)."""
    expected = {
        "rnea": "(model, q, v, a, fext=None)",
        "aba": "(model, q, v, tau, fext=None)",
        "rnea_derivatives": "(model, q, v, a, fext=None)",
        "aba_derivatives": "(model, q, v, tau, fext=None)",
        "rnea_second_order": "(model, q, v, a, fext=None)",
        "rnea_second_order_contracted": "(model, q, v, a, lam, fext=None)",
        "aba_second_order": "(model, q, v, tau, fext=None)",
        "aba_second_order_contracted": "(model, q, v, tau, lam, fext=None)",
        "crba": "(model, q)",
        "minverse": "(model, q)",
        "gravity": "(model, q)",
        "nonlinear_effects": "(model, q, v)",
        "kinetic_energy": "(model, q, v)",
        "potential_energy": "(model, q)",
        "center_of_mass": "(model, q)",
        "center_of_mass_velocity": "(model, q, v)",
        "com_jacobian": "(model, q)",
        "centroidal_momentum": "(model, q, v)",
        "centroidal_momentum_matrix": "(model, q)",
        "centroidal_momentum_matrix_time_variation": "(model, q, v)",
        "forward_kinematics": "(model, q, v=None, a=None)",
        "frame_placement": "(model, q, frame)",
        "frame_placements": "(model, q)",
        "jacobian": "(model, q, frame, reference='local_world_aligned')",
        "frame_velocity": "(model, q, v, frame, reference='local_world_aligned')",
        "frame_velocity_derivatives": "(model, q, v, frame, reference='local_world_aligned')",
        "jacobian_time_variation": "(model, q, v, frame, reference='local_world_aligned')",
        "frame_acceleration": "(model, q, v, a, frame, reference='local_world_aligned', classical=False)",
    }
    for name, sig in expected.items():
        f = getattr(vidyn, name)
        assert str(inspect.signature(f)) == sig, name
        assert f.__doc__ and len(f.__doc__) > 20, name
    assert str(inspect.signature(vidyn.Model.random_configuration)) == "(self, /, rng=None)"
    assert str(inspect.signature(models.pendulum_chain)) == "(n, planar=True)"
    assert str(inspect.signature(models.random_tree)) == "(n, seed=0)"


def check_vector(x, n):
    assert isinstance(x, np.ndarray) and x.dtype == np.float64 and x.shape == (n,), (type(x), getattr(x, "shape", None))


BUILTINS = {
    "pendulum_chain(4)": lambda: models.pendulum_chain(4),
    "pendulum_chain(5, planar=False)": lambda: models.pendulum_chain(5, planar=False),
    "binary_tree(3)": lambda: models.binary_tree(3),
    "cartpole()": models.cartpole,
    "acrobot()": models.acrobot,
    "random_tree(12, seed=7)": lambda: models.random_tree(12, seed=7),
}


@pytest.fixture(params=list(BUILTINS), scope="module")
def model(request):
    return BUILTINS[request.param]()


def test_model_properties(model):
    m = model
    n = m.nbodies
    assert isinstance(m.name, str) and m.name
    assert isinstance(m.nq, int) and isinstance(m.nv, int) and m.nq >= m.nv
    for lst in (m.joint_names, m.joint_kinds, m.parents, m.idx_q, m.idx_v):
        assert isinstance(lst, list) and len(lst) == n
    assert all(isinstance(s, str) for s in m.joint_names + m.joint_kinds + m.frame_names)
    assert set(m.joint_kinds) <= {"revolute", "prismatic", "spherical", "freeflyer", "planar"}
    assert all(-1 <= p < i for i, p in enumerate(m.parents))
    nq_of = {"revolute": 1, "prismatic": 1, "spherical": 4, "freeflyer": 7, "planar": 4}
    nv_of = {"revolute": 1, "prismatic": 1, "spherical": 3, "freeflyer": 6, "planar": 3}
    assert m.idx_q == list(np.cumsum([0] + [nq_of[k] for k in m.joint_kinds])[:-1])
    assert m.idx_v == list(np.cumsum([0] + [nv_of[k] for k in m.joint_kinds])[:-1])
    assert sum(nq_of[k] for k in m.joint_kinds) == m.nq
    assert len(set(m.frame_names)) <= len(m.frame_names)
    check_vector(m.gravity, 3)
    np.testing.assert_array_equal(m.gravity, [0.0, 0.0, -9.81])
    check_vector(m.lower_position_limit, m.nq)
    check_vector(m.upper_position_limit, m.nq)
    for x in (m.velocity_limit, m.effort_limit, m.damping, m.friction):
        check_vector(x, m.nv)
    assert isinstance(m.total_mass, float) and m.total_mass > 0
    assert repr(m) == f"Model(name={m.name!r}, nq={m.nq}, nv={m.nv}, nbodies={m.nbodies})"
    # properties return copies: mutating them does not change the model
    g = m.gravity
    g[:] = 0
    np.testing.assert_array_equal(m.gravity, [0.0, 0.0, -9.81])
    with pytest.raises(AttributeError):
        m.nq = 3  # type: ignore[misc]
    # with_gravity returns a modified copy
    m0 = m.with_gravity([0.0, 0.0, 0.0])
    np.testing.assert_array_equal(m0.gravity, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(m.gravity, [0.0, 0.0, -9.81])
    assert m0.nq == m.nq and m0.frame_names == m.frame_names
    with pytest.raises(vidyn.InputError):
        m.with_gravity([0.0, 1.0])


def test_names_and_indices(model):
    m = model
    for k, name in enumerate(m.frame_names):
        assert m.frame_names[m.frame_index(name)] == name
        assert isinstance(m.frame_index(name), int)
    for i, name in enumerate(m.joint_names):
        assert m.joint_index(name) == i


def test_configuration_methods(model):
    m = model
    q0 = m.neutral()
    check_vector(q0, m.nq)
    q1 = m.random_configuration(3)
    check_vector(q1, m.nq)
    np.testing.assert_array_equal(q1, m.random_configuration(3))  # reproducible from a seed
    np.testing.assert_array_equal(m.random_configuration(np.random.default_rng(5)), m.random_configuration(np.random.default_rng(5)))
    check_vector(m.random_configuration(), m.nq)
    check_vector(m.random_configuration(np.int64(2)), m.nq)
    v = m.difference(q0, q1)
    check_vector(v, m.nv)
    q2 = m.integrate(q0, v)
    check_vector(q2, m.nq)
    np.testing.assert_allclose(m.difference(q1, q2), np.zeros(m.nv), atol=1e-9)
    np.testing.assert_array_equal(m.integrate(q0, np.zeros(m.nv)), q0)


def test_algorithms_shapes(model):
    m = model
    rng = np.random.default_rng(0)
    q = m.random_configuration(rng)
    v, a = rng.standard_normal(m.nv), rng.standard_normal(m.nv)
    tau = vidyn.rnea(m, q, v, a)
    check_vector(tau, m.nv)
    check_vector(vidyn.aba(m, q, v, tau), m.nv)
    check_vector(vidyn.gravity(m, q), m.nv)
    check_vector(vidyn.nonlinear_effects(m, q, v), m.nv)
    M, Minv = vidyn.crba(m, q), vidyn.minverse(m, q)
    for x in (M, Minv):
        assert x.dtype == np.float64 and x.shape == (m.nv, m.nv) and x.flags.c_contiguous
    assert isinstance(vidyn.kinetic_energy(m, q, v), float)
    assert isinstance(vidyn.potential_energy(m, q), float)
    fk = vidyn.forward_kinematics(m, q, v, a)
    assert isinstance(fk, vidyn.Kinematics)
    assert fk.placements.shape == (m.nbodies, 4, 4) and fk.placements.dtype == np.float64
    assert fk.velocities.shape == (m.nbodies, 6) and fk.accelerations.shape == (m.nbodies, 6)
    np.testing.assert_array_equal(fk.placements[:, 3, :], np.tile([0.0, 0.0, 0.0, 1.0], (m.nbodies, 1)))
    assert repr(fk) == f"Kinematics(nbodies={m.nbodies})"
    fk0 = vidyn.forward_kinematics(m, q)
    np.testing.assert_array_equal(fk0.placements, fk.placements)
    np.testing.assert_array_equal(fk0.velocities, np.zeros((m.nbodies, 6)))
    np.testing.assert_array_equal(fk0.accelerations, np.zeros((m.nbodies, 6)))
    nframes = len(m.frame_names)
    all_f = vidyn.frame_placements(m, q)
    assert all_f.shape == (nframes, 4, 4) and all_f.dtype == np.float64
    for k, name in enumerate(m.frame_names):
        np.testing.assert_array_equal(vidyn.frame_placement(m, q, name), all_f[m.frame_index(name)])
        np.testing.assert_array_equal(vidyn.frame_placement(m, q, k), all_f[k])
    if nframes:
        for reference in ("world", "local", "local_world_aligned"):
            J = vidyn.jacobian(m, q, m.frame_names[-1], reference)
            assert J.shape == (6, m.nv) and J.dtype == np.float64 and J.flags.c_contiguous
        np.testing.assert_array_equal(vidyn.jacobian(m, q, 0), vidyn.jacobian(m, q, 0, reference="local_world_aligned"))


def test_identities_wiring(model):
    """A few identities that would fail if arguments were swapped or matrices transposed."""
    m = model
    rng = np.random.default_rng(1)
    q = m.random_configuration(rng)
    v, tau = rng.standard_normal(m.nv), rng.standard_normal(m.nv)
    a = vidyn.aba(m, q, v, tau)
    M = vidyn.crba(m, q)
    scale = 1 + np.abs(tau).max()
    np.testing.assert_allclose(vidyn.rnea(m, q, v, a), tau, atol=1e-8 * scale)
    np.testing.assert_allclose(M @ a + vidyn.nonlinear_effects(m, q, v), tau, atol=1e-8 * scale)
    np.testing.assert_allclose(vidyn.minverse(m, q) @ M, np.eye(m.nv), atol=1e-8 * np.linalg.cond(M))
    np.testing.assert_allclose(vidyn.gravity(m, q), vidyn.rnea(m, q, np.zeros(m.nv), np.zeros(m.nv)), atol=1e-12 * scale)
    np.testing.assert_allclose(vidyn.kinetic_energy(m, q, v), 0.5 * v @ M @ v, rtol=1e-9, atol=1e-12)


def test_rnea_inverts_aba_on_pendulum_chain():
    m = models.pendulum_chain(6)
    rng = np.random.default_rng(42)
    for _ in range(5):
        q = m.random_configuration(rng)
        v, tau = rng.standard_normal(m.nv), rng.standard_normal(m.nv)
        np.testing.assert_allclose(vidyn.rnea(m, q, v, vidyn.aba(m, q, v, tau)), tau, rtol=1e-10, atol=1e-10)


def test_pendulum_tip_hangs_below_origin():
    """Layout check (C order, [R p; 0 1]): a straight chain of n unit rods hangs to z = -n."""
    m = models.pendulum_chain(3)
    tip = vidyn.frame_placement(m, m.neutral(), "tip")
    np.testing.assert_allclose(tip, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, -3], [0, 0, 0, 1]], atol=1e-12)
    # the tip of a pendulum turned by +90° about y moves to +x ... or -x: either way |x| = 3
    q = np.array([np.pi / 2, 0.0, 0.0])
    tip = vidyn.frame_placement(m, q, "tip")
    assert abs(abs(tip[0, 3]) - 3) < 1e-12 and abs(tip[2, 3]) < 1e-12
    # Jacobian in world-aligned axes: first column is the tip velocity for a unit joint-1 rate
    J = vidyn.jacobian(m, q, "tip")
    np.testing.assert_allclose(J[3:, 0], [0.0, 1.0, 0.0], atol=1e-12)  # angular part = axis y
    np.testing.assert_allclose(J[:3, 0], np.cross([0.0, 1.0, 0.0], tip[:3, 3]), atol=1e-12)


def test_array_like_inputs():
    m = models.pendulum_chain(3)
    q = np.array([0.1, -0.2, 0.3])
    ref = vidyn.rnea(m, q, q, q)
    np.testing.assert_array_equal(vidyn.rnea(m, list(q), tuple(q), q), ref)
    np.testing.assert_allclose(vidyn.rnea(m, q.astype(np.float32), q, q), ref, rtol=1e-6)
    strided = np.repeat(q, 2)[::2]
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(vidyn.rnea(m, strided, strided, strided), ref)
    big_endian = q.astype(">f8")
    np.testing.assert_array_equal(vidyn.rnea(m, big_endian, q, q), ref)
    # integer arrays are converted
    vidyn.rnea(m, np.zeros(3, dtype=int), [0, 0, 0], [0, 0, 0])
    # inputs are not modified, outputs are fresh arrays
    q_copy = q.copy()
    vidyn.aba(m, q, q, q)
    np.testing.assert_array_equal(q, q_copy)
    out1, out2 = vidyn.rnea(m, q, q, q), vidyn.rnea(m, q, q, q)
    assert out1 is not out2 and not np.shares_memory(out1, out2)


def test_model_builder_roundtrip():
    b = vidyn.ModelBuilder("arm")
    assert repr(b) == "ModelBuilder(nbodies=0)"
    T = np.eye(4)
    T[:3, 3] = [0.0, 0.0, 0.5]
    I3 = np.diag([0.01, 0.02, 0.03])
    base = b.add_body(None, "base_yaw", "revolute", axis=[0, 0, 3], mass=2.0, com=[0, 0, 0.1], inertia=I3)
    ball = b.add_body(base, "ball", "spherical", placement=T, mass=1.0, inertia=I3)
    slide = b.add_body(ball, "slide", "prismatic", placement=T, mass=0.5, inertia=I3, axis=np.array([1.0, 0.0, 0.0]))
    free = b.add_body(-1, "free", "freeflyer", mass=1.0, inertia=I3)
    b.add_body(free, "plane", "planar", mass=1.0, inertia=I3)
    assert (base, ball, slide, free) == (0, 1, 2, 3)
    b.add_frame("tool", slide, T)
    b.add_frame("world_marker", None)
    b.set_gravity([0.0, 0.0, -1.62])
    assert repr(b) == "ModelBuilder(nbodies=5)"
    m = b.build()
    assert isinstance(m, vidyn.Model)
    assert repr(b) == "ModelBuilder(<built>)"
    assert m.name == "arm"
    assert m.joint_names == ["base_yaw", "ball", "slide", "free", "plane"]
    assert m.joint_kinds == ["revolute", "spherical", "prismatic", "freeflyer", "planar"]
    assert m.parents == [-1, 0, 1, -1, 3]
    assert (m.nq, m.nv, m.nbodies) == (1 + 4 + 1 + 7 + 4, 1 + 3 + 1 + 6 + 3, 5)
    assert m.frame_names == ["tool", "world_marker"]
    np.testing.assert_array_equal(m.gravity, [0.0, 0.0, -1.62])
    assert m.total_mass == pytest.approx(5.5)
    q = m.neutral()
    np.testing.assert_allclose(vidyn.frame_placement(m, q, "tool")[:3, 3], [0.0, 0.0, 1.5])  # 3 × 0.5
    np.testing.assert_array_equal(vidyn.frame_placement(m, q, "world_marker"), np.eye(4))
    # the revolute axis [0, 0, 3] was normalised: its Jacobian column is a unit rotation rate
    J = vidyn.jacobian(m, q, "tool", "world")
    np.testing.assert_allclose(J[3:, 0], [0.0, 0.0, 1.0])


def test_builder_renumbers_depth_first():
    b = vidyn.ModelBuilder()
    kw = dict(mass=1.0, inertia=np.eye(3) * 0.1)
    r = b.add_body(None, "r", "spherical", **kw)
    b.add_body(None, "s", "spherical", **kw)
    b.add_body(r, "r_child", "spherical", **kw)
    m = b.build()
    assert m.joint_names == ["r", "r_child", "s"]
    assert m.parents == [-1, 0, -1]
    assert m.joint_index("s") == 2


def test_builtin_models():
    assert models.pendulum_chain(7).nbodies == 7
    assert models.pendulum_chain(0).nv == 0
    assert models.binary_tree(4).nbodies == 15
    cp = models.cartpole()
    assert cp.joint_names == ["cart", "pole"] and cp.joint_kinds == ["prismatic", "revolute"]
    ac = models.acrobot()
    assert ac.joint_names == ["shoulder", "elbow"]
    t1, t2 = models.random_tree(9, 4), models.random_tree(9, 4)
    assert t1.joint_kinds == t2.joint_kinds and t1.parents == t2.parents
    np.testing.assert_array_equal(vidyn.crba(t1, t1.neutral()), vidyn.crba(t2, t2.neutral()))
    assert models.random_tree(5).nbodies == 5


def test_empty_model():
    m = models.pendulum_chain(0)
    empty = np.zeros(0)
    assert vidyn.rnea(m, empty, empty, empty).shape == (0,)
    assert vidyn.crba(m, empty).shape == (0, 0)
    assert vidyn.forward_kinematics(m, empty).placements.shape == (0, 4, 4)
    assert vidyn.jacobian(m, empty, "tip").shape == (6, 0)
    assert vidyn.kinetic_energy(m, empty, empty) == 0.0


def test_calls_from_many_threads_agree():
    """The model's workspace is shared; concurrent calls fall back to fresh workspaces."""
    m = models.random_tree(20, 1)
    rng = np.random.default_rng(0)
    inputs = [(m.random_configuration(rng), rng.standard_normal(m.nv), rng.standard_normal(m.nv)) for _ in range(8)]
    expected = [vidyn.aba(m, q, v, tau) for q, v, tau in inputs]
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(200):
                for (q, v, tau), ref in zip(inputs, expected):
                    np.testing.assert_array_equal(vidyn.aba(m, q, v, tau), ref)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# ---------------------------------------------------------------------------------------------
# example-robot-data
# ---------------------------------------------------------------------------------------------


def test_example_robot_data_dir_type():
    d = models.example_robot_data_dir()
    assert d is None or (d.is_dir() and d.name == "robots")


@pytest.mark.parametrize("name", sorted(models.EXAMPLE_ROBOTS))
def test_example_robots(name):
    if models.example_robot_data_dir() is None:
        pytest.skip("example-robot-data is not installed")
    robot = models.EXAMPLE_ROBOTS[name]
    m = models.example_robot(name)
    assert ("freeflyer" in m.joint_kinds) == robot.floating_base
    q = m.neutral()
    check_vector(vidyn.rnea(m, q, np.zeros(m.nv), np.zeros(m.nv)), m.nv)
    flipped = models.example_robot(name, floating_base=not robot.floating_base)
    assert abs(flipped.nv - m.nv) == 6
    # from_urdf accepts str paths too
    same = vidyn.Model.from_urdf(str(models.example_robot_data_dir() / robot.urdf), floating_base=robot.floating_base)
    assert (same.nq, same.nv, same.joint_names) == (m.nq, m.nv, m.joint_names)


def test_builder_reentrant_conversion():
    """Converting an argument may run Python code that uses the same builder: no deadlock."""
    b = vidyn.ModelBuilder()

    class CallsBack:
        def __array__(self, dtype=None, copy=None):
            b.add_body(None, "inner", "spherical", mass=1.0, inertia=np.eye(3))
            return np.eye(3)

    b.add_body(None, "outer", "spherical", mass=1.0, inertia=CallsBack())
    assert b.build().joint_names == ["inner", "outer"]
