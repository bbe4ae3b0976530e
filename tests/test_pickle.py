"""Pickling and saving: Model, VariationalIntegrator, Trajectory, MaximalIntegrator,
MaximalTrajectory and the optimiser results pickle to equal objects that compute the same
numbers bit for bit (in this process and in a spawned worker process); trajectories save to
and load from .npz files with their metadata; damaged or foreign states raise StateError."""

from __future__ import annotations

import concurrent.futures
import copy
import multiprocessing
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

import vidyn
from vidyn import models

# The content hash of pendulum_chain(3) under state format 1: a change of the encoding that
# keeps the format's version fails here (bump the version, then update this value).
PENDULUM_3_HASH = "24899222fe155e6920a80e7d9e298e1771a9a28664c9aef1ce8412196b6e5b52"


def same(x, y) -> bool:
    """Arrays equal bit for bit (dtype, shape and bytes)."""
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def round_trip(obj):
    """``obj`` through every pickle protocol and copy.deepcopy; all equal to it, returned."""
    copies = [pickle.loads(pickle.dumps(obj, protocol=p)) for p in range(2, pickle.HIGHEST_PROTOCOL + 1)]
    copies += [copy.deepcopy(obj), type(obj).from_bytes(obj.to_bytes())]
    for c in copies:
        assert type(c) is type(obj) and c == obj and not (c != obj)
        assert c.to_bytes() == obj.to_bytes()
    return copies[-1]


# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------


def _robot(name: str) -> vidyn.Model:
    if models.example_robot_data_dir() is None:
        pytest.skip("example-robot-data is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vidyn.ModelWarning)  # <mimic> joints of panda and talos
        return models.example_robot(name)


def _built() -> vidyn.Model:
    b = vidyn.ModelBuilder("built")
    base = b.add_body(None, "slider", "prismatic", mass=2.0, com=[0.1, 0, 0], inertia=np.diag([0.1, 0.2, 0.3]), axis=[1, 0, 0])
    arm = np.eye(4)
    arm[:3, 3] = [0.0, 0.2, 0.1]
    ball = b.add_body(base, "ball", "spherical", placement=arm, mass=1.0, com=[0, 0, -0.3], inertia=np.diag([0.02, 0.02, 0.01]))
    b.add_body(ball, "planar", "planar", mass=0.5, inertia=np.eye(3) * 1e-2)
    tool = np.eye(4)
    tool[2, 3] = -0.6
    b.add_frame("tool", ball, tool)
    b.set_gravity([0.0, -0.5, -9.7])
    return b.build()


MJCF = """<mujoco model="hinge_and_ball">
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" mass="1"/>
      <body name="lower" pos="0 0 -0.5">
        <joint name="elbow" type="ball"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.04" mass="0.6"/>
        <site name="hand" pos="0 0 -0.4"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def _mjcf() -> vidyn.Model:
    mujoco = pytest.importorskip("mujoco")
    return vidyn.mjcf.from_mjmodel(mujoco.MjModel.from_xml_string(MJCF))


MODELS = {
    "panda": lambda: _robot("panda"),
    "solo12": lambda: _robot("solo12"),
    "talos": lambda: _robot("talos"),
    "builder": _built,
    "single_dof": lambda: _robot("solo12").to_single_dof()[0],
    "random_tree": lambda: models.random_tree(8, seed=5),
    "with_gravity": lambda: models.pendulum_chain(4).with_gravity([0.0, 1.0, -3.0]),
    "mjcf": _mjcf,
}


@pytest.mark.parametrize("name", list(MODELS))
def test_models_round_trip_and_compute_the_same_numbers(name):
    model = MODELS[name]()
    back = round_trip(model)
    assert hash(back) == hash(model) and back.content_hash() == model.content_hash()
    assert (back.name, back.joint_names, back.joint_kinds, back.parents, back.frame_names) == (
        model.name,
        model.joint_names,
        model.joint_kinds,
        model.parents,
        model.frame_names,
    )
    for attr in ("gravity", "lower_position_limit", "upper_position_limit", "velocity_limit", "effort_limit", "damping", "friction"):
        assert same(getattr(back, attr), getattr(model, attr)), attr
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    v, a = rng.uniform(-1, 1, (2, model.nv))
    assert same(vidyn.rnea(back, q, v, a), vidyn.rnea(model, q, v, a))
    assert same(vidyn.crba(back, q), vidyn.crba(model, q))
    frame = model.frame_names[-1]
    assert same(vidyn.frame_placement(back, q, frame), vidyn.frame_placement(model, q, frame))
    for x, y in zip(vidyn.aba_derivatives(back, q, v, a), vidyn.aba_derivatives(model, q, v, a)):
        assert same(x, y)


def test_single_dof_models_keep_their_gimbals():
    """The gimbals decide where a single-dof integrator stops (pitch near ±π/2): an unpickled
    expansion must stop at the same step with the same message."""
    b = vidyn.ModelBuilder("spinner")
    b.set_gravity([0.0, 0.0, 0.0])
    b.add_body(None, "ball", "spherical", mass=2.0, com=[0, 0, -0.4], inertia=np.diag([0.2, 0.3, 0.05]))
    expanded, _ = b.build().to_single_dof()
    back = round_trip(expanded)
    vi, vi_back = vidyn.VariationalIntegrator(expanded, 0.01), vidyn.VariationalIntegrator(back, 0.01)
    assert vi_back == vi
    start, rate = np.array([0.1, np.pi / 2 - 0.2, 0.0]), np.array([0.0, 1.0, 0.0])
    errors = []
    for integrator in (vi, vi_back):
        with pytest.raises(vidyn.ModelError, match="pitch") as info:
            integrator.rollout(start, rate, steps=40)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_equality_and_hash_follow_the_data():
    a, b = models.pendulum_chain(3), models.pendulum_chain(3)
    assert a is not b and a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != models.pendulum_chain(4) and a != a.with_gravity([0.0, 0.0, -9.8])
    assert a.with_gravity([0.0, 0.0, -9.81]) == a
    assert a.with_gravity([-0.0, 0.0, -9.81]) != a  # bit for bit: -0.0 is another bit pattern
    assert a != "pendulum" and a != 3
    assert a.content_hash() == PENDULUM_3_HASH


def test_content_hash_is_the_same_in_another_process():
    code = "import vidyn; print(vidyn.models.pendulum_chain(3).content_hash(), vidyn.models.random_tree(8, seed=5).content_hash())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert out == [PENDULUM_3_HASH, models.random_tree(8, seed=5).content_hash()]


# ---------------------------------------------------------------------------------------------
# variational integrators and trajectories
# ---------------------------------------------------------------------------------------------


def _chain_vi() -> tuple[vidyn.VariationalIntegrator, np.ndarray, np.ndarray, np.ndarray]:
    """Constraints under a contact schedule, damping, springs, a kinematic joint and body
    wrenches: every argument of the integrator set."""
    model = models.pendulum_chain(4)
    n = model.nv
    # the tip's end held on the vertical plane x = x0 through its start, on and off
    tip = model.frame_names[-1]
    q0 = np.array([0.3, -0.2, 0.25, 0.1])
    x0 = vidyn.frame_placement(model, q0, tip)[:3, 3]
    constraints = [vidyn.PointOnPlane(None, x0, [1.0, 0.0, 0.0], tip, [0.0, 0.0, 0.0])]
    schedule = np.zeros((12, 1), dtype=bool)
    schedule[:6] = True
    wrenches = np.zeros((model.nbodies, 6))
    wrenches[2] = [0.2, 0.0, -0.1, 0.0, 0.05, 0.0]
    vi = vidyn.VariationalIntegrator(
        model,
        0.01,
        scheme="midpoint",
        damping=[0.1, 0.0, 0.05, 0.0],
        stiffness=[0.0, 2.0, 0.0, 1.0],
        rest=[0.0, 0.1, 0.0, -0.1],
        tolerance=1e-13,
        max_iterations=40,
        constraints=constraints,
        schedule=schedule,
        kinematic=[model.joint_names[0]],
        body_wrenches=wrenches,
        max_energy_error=np.inf,
    )
    u = np.zeros((12, n))
    u[:, 0] = q0[0] + 0.01 * np.arange(1, 13)  # the kinematic joint's prescribed path
    u[:, 2] = 0.3
    v0 = np.zeros(n)
    v0[1] = 0.2
    return vi, q0, v0, u


def test_integrator_with_every_argument_round_trips_and_steps_the_same():
    vi, q0, v0, u = _chain_vi()
    back = round_trip(vi)
    assert hash(back) == hash(vi)
    assert (back.dt, back.scheme, back.s, back.n, back.nq, back.constraint_count, back.max_energy_error) == (
        vi.dt,
        vi.scheme,
        vi.s,
        vi.n,
        vi.nq,
        vi.constraint_count,
        vi.max_energy_error,
    )
    assert same(back.kinematic, vi.kinematic) and same(back.schedule, vi.schedule) and same(back.body_wrenches, vi.body_wrenches)
    traj, traj_back = vi.rollout(q0, v0, u), back.rollout(q0, v0, u)
    assert traj_back == traj
    for name in ("q", "p", "u", "iterations"):
        assert same(getattr(traj_back, name), getattr(traj, name)), name
    for x, y in zip(back.linearize(traj_back), vi.linearize(traj)):
        assert same(x, y)
    assert same(back.multipliers(traj_back), vi.multipliers(traj))


@pytest.mark.parametrize("scheme", ["trapezoid", "simpson", ("lobatto", 3)])
def test_lie_group_integrators_round_trip(scheme):
    """solo12's free-flyer steps on its Lie group (the integrator's chart rebuilt on loading)."""
    model = _robot("solo12")
    name, s = scheme if isinstance(scheme, tuple) else (scheme, None)
    wrenches = np.zeros((model.nbodies, 6))
    wrenches[0, 2] = 5.0
    vi = vidyn.VariationalIntegrator(model, 0.005, scheme=name, s=s, body_wrenches=wrenches)
    back = round_trip(vi)
    rng = np.random.default_rng(4)
    q0, v0 = model.random_configuration(rng), rng.uniform(-0.3, 0.3, model.nv)
    traj, traj_back = vi.rollout(q0, v0, steps=3), back.rollout(q0, v0, steps=3)
    assert traj_back == traj and same(traj_back.q, traj.q)
    for x, y in zip(back.linearize(traj_back), vi.linearize(traj)):
        assert same(x, y)


def test_trajectories_round_trip_with_their_integrator():
    vi, q0, v0, u = _chain_vi()
    traj = vi.rollout(q0, v0, u)
    back = round_trip(traj)
    assert hash(back) == hash(traj) and len(back) == len(traj) == 12
    assert back.integrator == vi
    # the unpickled trajectory linearises with the original integrator, and vice versa
    for x, y in zip(vi.linearize(back), back.integrator.linearize(traj)):
        assert same(x, y)
    other = vidyn.VariationalIntegrator(vi.model, 0.02, scheme="midpoint")
    assert other.rollout(q0, steps=2) != vi.rollout(q0, v0, u)


# ---------------------------------------------------------------------------------------------
# maximal coordinates
# ---------------------------------------------------------------------------------------------


def _cylinder_chain(n: int) -> vidyn.Model:
    """Revolute links with a positive-definite inertia (maximal coordinates need one)."""
    b = vidyn.ModelBuilder("cylinders")
    parent = None
    for k in range(n):
        placement = np.eye(4)
        if k > 0:
            placement[2, 3] = -1.0
        parent = b.add_body(parent, f"joint{k + 1}", "revolute", placement, 1.0, [0, 0, -0.5], np.diag([0.09, 0.09, 0.005]), [0, 1, 0])
    return b.build()


def _maximal() -> tuple[vidyn.MaximalIntegrator, np.ndarray]:
    model = _cylinder_chain(3)
    vi = vidyn.MaximalIntegrator(model, 0.01, damping=[0.05, 0.0, 0.02], stiffness=[0.0, 1.0, 0.0])
    q0 = np.array([0.4, -0.3, 0.2])
    at_tip = np.eye(4)
    at_tip[2, 3] = -1.0
    ground = np.eye(4)
    kin = vidyn.forward_kinematics(model, q0, np.zeros(3), np.zeros(3))
    ground[:3, 3] = kin.placements[-1][:3, :3] @ [0.0, 0.0, -1.0] + kin.placements[-1][:3, 3]
    vi.add_loop_closure("closure", "point_on_line", None, "joint3", ground, at_tip, axis=[0, 1, 0])
    vi.add_contact("knee", "joint2", [0.0, 0.0, -1.0], radius=0.05, offset=-3.0, friction=0.8)
    vi.add_joint_limit("joint1", -1.0, 1.0)
    return vi, q0


def test_maximal_integrators_round_trip_with_their_additions():
    vi, q0 = _maximal()
    back = round_trip(vi)
    assert (back.nbodies, back.njoints, back.nloops, back.fill, back.dt) == (vi.nbodies, vi.njoints, vi.nloops, vi.fill, vi.dt)
    with pytest.raises(TypeError):
        hash(vi)  # add_* changes it
    u = np.full((20, 3), 0.1)
    traj, traj_back = vi.rollout(q0, None, u), back.rollout(q0, None, u)
    assert traj_back == traj and hash(traj_back) == hash(traj)
    for name in ("q", "u", "positions", "quaternions", "linear_velocities", "angular_velocities", "energy", "constraint_violation", "iterations"):
        assert same(getattr(traj_back, name), getattr(traj, name)), name
    for x, y in zip(back.linearize(traj_back), vi.linearize(traj)):
        assert same(x, y)
    t = round_trip(traj)
    assert t.integrator == vi
    # an addition changes the state, and a rebuilt one compares equal again
    vi.add_joint_limit("joint2", -2.0, 2.0)
    assert back != vi
    back.add_joint_limit("joint2", -2.0, 2.0)
    assert back == vi


# ---------------------------------------------------------------------------------------------
# damaged and foreign states
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Model", "VariationalIntegrator", "Trajectory", "MaximalIntegrator", "MaximalTrajectory"])
def test_damaged_states_raise_state_error(kind):
    vi, q0, v0, u = _chain_vi()
    mvi, mq0 = _maximal()
    objects = {
        "Model": vi.model,
        "VariationalIntegrator": vi,
        "Trajectory": vi.rollout(q0, v0, u),
        "MaximalIntegrator": mvi,
        "MaximalTrajectory": mvi.rollout(mq0, steps=2),
    }
    cls, data = getattr(vidyn, kind), objects[kind].to_bytes()
    rng = np.random.default_rng(0)
    for i in rng.choice(len(data), 40, replace=False):
        bad = bytearray(data)
        bad[i] ^= 1 << int(rng.integers(8))
        with pytest.raises(vidyn.StateError):
            cls.from_bytes(bytes(bad))
    for n in (0, 5, 20, len(data) // 2, len(data) - 1):
        with pytest.raises(vidyn.StateError):
            cls.from_bytes(data[:n])
    with pytest.raises(vidyn.StateError, match="not a vidyn state"):
        cls.from_bytes(b"\x80\x04not a state at all")
    for other, obj in objects.items():
        if other != kind:
            with pytest.raises(vidyn.StateError, match=f"holds a {other}, not a {kind}"):
                cls.from_bytes(obj.to_bytes())
    with pytest.raises(TypeError, match="data must be bytes"):
        cls.from_bytes("a string")
    assert cls.from_bytes(bytearray(data)) == objects[kind] == cls.from_bytes(memoryview(data))
    assert issubclass(vidyn.StateError, ValueError) and issubclass(vidyn.StateError, vidyn.VidynError)


def test_a_newer_format_is_refused_by_name():
    data = bytearray(models.pendulum_chain(2).to_bytes())
    at = 6 + 1 + len(b"Model")
    data[at : at + 2] = (3).to_bytes(2, "little")
    # the digest covers the header, so re-seal the altered state as a newer vidyn would
    import hashlib

    body = bytes(data[:-32])
    with pytest.raises(vidyn.StateError, match="format version 3.*reads versions 1 to 2"):
        vidyn.Model.from_bytes(body + hashlib.sha256(body).digest())


# ---------------------------------------------------------------------------------------------
# .npz files
# ---------------------------------------------------------------------------------------------


def test_trajectories_save_and_load(tmp_path):
    vi, q0, v0, u = _chain_vi()
    traj = vi.rollout(q0, v0, u)
    path = tmp_path / "chain.npz"
    traj.save(path)
    assert path.exists() and not (tmp_path / "chain.npz.npz").exists()
    for loaded in (vidyn.Trajectory.load(path), vidyn.Trajectory.load(str(path), vi), vidyn.Trajectory.load(path, vi.model)):
        assert loaded == traj and same(loaded.q, traj.q) and same(loaded.iterations, traj.iterations)
    with np.load(path, allow_pickle=False) as z:  # readable without vidyn, metadata included
        assert str(z["format"]) == "vidyn.Trajectory" and int(z["format_version"]) == vidyn.trajectory_io.FORMAT_VERSION
        assert str(z["model_name"]) == vi.model.name and str(z["model_hash"]) == vi.model.content_hash()
        assert float(z["dt"]) == vi.dt and str(z["scheme"]) == vi.scheme and int(z["s"]) == vi.s
        assert str(z["vidyn_version"]) == vidyn.__version__
        assert same(z["q"], traj.q) and same(z["p"], traj.p) and same(z["u"], traj.u)
    with pytest.raises(vidyn.StateError, match=r"saved from model 'pendulum_chain_4\w*' \(content hash [0-9a-f]{16}…\), not from the given model"):
        vidyn.Trajectory.load(path, models.pendulum_chain(5))
    with pytest.raises(vidyn.StateError, match=r"another integrator of this model: dt 0.01 \(given 0.02\)"):
        vidyn.Trajectory.load(path, vidyn.VariationalIntegrator(vi.model, 0.02, scheme="midpoint"))
    with pytest.raises(vidyn.StateError, match="other arguments"):
        vidyn.Trajectory.load(path, vidyn.VariationalIntegrator(vi.model, 0.01, scheme="midpoint"))
    with pytest.raises(TypeError, match="integrator must be"):
        vidyn.Trajectory.load(path, "pendulum")


def test_maximal_trajectories_save_and_load(tmp_path):
    vi, q0 = _maximal()
    traj = vi.rollout(q0, None, np.full((5, 3), 0.1))
    path = tmp_path / "maximal.npz"
    traj.save(path)
    assert vidyn.MaximalTrajectory.load(path) == traj
    assert vidyn.MaximalTrajectory.load(path, vi) == traj == vidyn.MaximalTrajectory.load(path, vi.model)
    unforced = vi.rollout(q0, steps=3)
    unforced.save(path)
    assert vidyn.MaximalTrajectory.load(path) == unforced and unforced.u.shape == (3, 0)
    with pytest.raises(vidyn.StateError, match="saved from model"):
        vidyn.MaximalTrajectory.load(path, _cylinder_chain(4))
    with pytest.raises(vidyn.StateError, match="not a saved vidyn.Trajectory"):
        vidyn.Trajectory.load(path)


def test_damaged_or_foreign_files_raise_state_error(tmp_path):
    vi, q0, v0, u = _chain_vi()
    path = tmp_path / "t.npz"
    vi.rollout(q0, v0, u).save(path)
    data = path.read_bytes()
    bad = tmp_path / "bad.npz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(vidyn.StateError, match="not a readable .npz file"):
        vidyn.Trajectory.load(bad)
    other = tmp_path / "other.npz"
    np.savez(other, q=np.zeros((3, 4)))
    with pytest.raises(vidyn.StateError, match="no 'format' entry"):
        vidyn.Trajectory.load(other)
    with np.load(path) as z:
        entries = dict(z)
    entries["format_version"] = np.array(99)
    np.savez(other, **entries)
    with pytest.raises(vidyn.StateError, match="file format version 99"):
        vidyn.Trajectory.load(other)
    entries["format_version"] = np.array(1)
    entries["q"] = entries["q"][:-1]
    np.savez(other, **entries)
    with pytest.raises(vidyn.StateError, match=r"q \(12, 4\)"):
        vidyn.Trajectory.load(other)
    with pytest.raises(FileNotFoundError):
        vidyn.Trajectory.load(tmp_path / "missing.npz")


# ---------------------------------------------------------------------------------------------
# optimiser results
# ---------------------------------------------------------------------------------------------


def test_optimiser_results_pickle_and_rebuild_their_trajectory():
    model = models.pendulum_chain(2)
    vi = vidyn.VariationalIntegrator(model, 0.05)
    x_ref = np.zeros((11, 4))
    x_ref[:, 0] = 0.3
    result = vidyn.optim.ilqr(vi, np.zeros(2), U_init=np.zeros((10, 2)), Q=1.0, R=1e-2, QN=10.0, x_ref=x_ref, max_iterations=5)
    back = pickle.loads(pickle.dumps(result))
    assert back == result and back is not result
    assert back.trajectory == result.trajectory and back.trajectory is not None  # rebuilt after unpickling
    result.trajectory  # noqa: B018  (cached, then pickled with the result)
    assert pickle.loads(pickle.dumps(result)).__dict__["trajectory"] == result.trajectory
    a, b = vi.linearize(result.trajectory)
    linear = vidyn.optim.ilqr_linear(a, b, np.zeros(4), np.zeros((10, 2)), Q=1.0, R=1.0)
    back = pickle.loads(pickle.dumps(linear))
    assert back == linear and back.trajectory is None
    projected = vidyn.optim.projection(vi, np.zeros(2), U_init=np.zeros((10, 2)), x_ref=x_ref, Q=1.0, R=1e-2, max_iterations=2)
    back = pickle.loads(pickle.dumps(projected))
    assert back == projected and back.trajectory == projected.trajectory
    assert result != linear


# ---------------------------------------------------------------------------------------------
# another process
# ---------------------------------------------------------------------------------------------


def _remote_rollout(vi, q0, v0, u):
    return vi.rollout(q0, v0, u)


def _remote_rnea(model, q, v, a):
    return model, vidyn.rnea(model, q, v, a)


def test_objects_travel_to_a_spawned_worker_process():
    """What multiprocessing, joblib, Dask and Ray do: pickle the objects to a fresh interpreter
    (spawn), compute there, pickle the results back."""
    vi, q0, v0, u = _chain_vi()
    model = _robot("panda")
    rng = np.random.default_rng(9)
    q, v, a = model.random_configuration(rng), *rng.uniform(-1, 1, (2, model.nv))
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        traj = pool.submit(_remote_rollout, vi, q0, v0, u).result(timeout=120)
        model_back, tau = pool.submit(_remote_rnea, model, q, v, a).result(timeout=120)
    local = vi.rollout(q0, v0, u)
    assert traj == local and same(traj.q, local.q) and same(traj.p, local.p)
    assert model_back == model and same(tau, vidyn.rnea(model, q, v, a))
