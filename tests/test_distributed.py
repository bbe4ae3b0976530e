"""vidyn.distributed on a real local Dask cluster (2 worker processes, 1 thread each): sharded
results equal the local vidyn.batch results bit for bit, per-row errors keep their global
row; models and integrators travel pickled (constraints included), and the deprecated
recipes still work, with a DeprecationWarning. Skipped (with the reason) when ``distributed`` is missing or
cannot start a local cluster here."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import vidyn
import vidyn.distributed as vdd

distributed = pytest.importorskip("distributed", reason="the 'distributed' package is not installed (pip install distributed)")


@pytest.fixture(scope="module")
def client():
    try:
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, worker_dashboard_address=None)
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"distributed cannot start a local cluster here: {type(e).__name__}: {e}")
    c = distributed.Client(cluster)
    try:
        c.wait_for_workers(2, timeout=60)
        yield c
    finally:
        c.close()
        cluster.close()


def same(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and np.array_equal(x.view(np.uint64), y.view(np.uint64))


MODEL = vidyn.models.pendulum_chain(4, planar=False)
VI = vidyn.VariationalIntegrator(MODEL, 0.01, scheme="simpson", damping=[0.1, 0.0, 0.2, 0.0])


def recipes() -> tuple[vdd.ModelRecipe, vdd.IntegratorRecipe]:
    """The deprecated recipes of MODEL and VI (each warns when made)."""
    with pytest.warns(DeprecationWarning, match="ModelRecipe is deprecated: the vidyn.Model itself pickles"):
        chain = vdd.ModelRecipe.builder("pendulum_chain", 4, planar=False)
    with pytest.warns(DeprecationWarning, match="IntegratorRecipe is deprecated: the vidyn.VariationalIntegrator itself pickles"):
        integrator = vdd.IntegratorRecipe.of(chain, 0.01, scheme="simpson", damping=[0.1, 0.0, 0.2, 0.0])
    return chain, integrator


def test_recipes_pickle_and_build():
    chain, integrator = recipes()
    for recipe in (chain, integrator):
        back = pickle.loads(pickle.dumps(recipe))
        assert back == recipe and hash(back) == hash(recipe)
    model = chain.build()
    assert model.nv == 4 and chain.build() is model and model == MODEL  # cached per process
    vi = integrator.build()
    assert vi.n == 4 and vi.scheme == "simpson" and vi == VI
    xml = """<robot name="r"><link name="base"/><link name="l1"><inertial><mass value="1"/>
      <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/>
      <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""
    with pytest.warns(DeprecationWarning):
        assert vdd.ModelRecipe.from_urdf_string(xml).build().nv == 1
    with pytest.raises(vidyn.InputError, match="unknown builder"):
        vdd.ModelRecipe.builder("no_such_model")


def test_deprecated_recipes_still_run_on_the_cluster(client):
    chain, integrator = recipes()
    rng = np.random.default_rng(5)
    q, v, a = rng.uniform(-1, 1, (3, 6, MODEL.nv))
    assert same(vdd.map_batch(client, "rnea", chain, q, v, a, shards=2), vidyn.batch.rnea(MODEL, q, v, a))
    roll = vdd.rollout(client, integrator, q, v, steps=4, shards=2)
    for x, y in zip(roll, vidyn.batch.rollout(VI, q, v, steps=4)):
        assert same(x, y)


def test_dynamics_sharded_equal_local(client):
    model = MODEL
    rng = np.random.default_rng(0)
    b = 37
    q, v, a = rng.uniform(-1, 1, (3, b, model.nv))
    tau = vdd.map_batch(client, "rnea", MODEL, q, v, a)
    assert same(tau, vidyn.batch.rnea(model, q, v, a))
    d = vdd.map_batch(client, "aba_derivatives", MODEL, q, v, a, shards=5)
    for x, y in zip(d, vidyn.batch.aba_derivatives(model, q, v, a)):
        assert same(x, y)


def test_bad_rows_keep_their_global_index(client):
    model = MODEL
    q = np.zeros((10, model.nq))
    q[7, 1] = np.nan
    with pytest.raises(vidyn.InputError, match=r"^row 7: q\[1\]"):
        vdd.map_batch(client, "crba", MODEL, q, shards=3)
    m, status = vdd.map_batch(client, "crba", MODEL, q, shards=3, errors="return")
    assert status.failed.tolist() == [7] and np.isnan(m[7]).all()
    assert same(m[:7], vidyn.batch.crba(model, q[:7]))


def test_rollouts_and_linearisations_sharded_equal_local(client):
    vi = VI
    rng = np.random.default_rng(1)
    b, steps, n = 9, 25, vi.n
    q0, v0 = rng.uniform(-1, 1, (2, b, n))
    u = rng.uniform(-1, 1, (b, steps, n))
    roll = vdd.rollout(client, VI, q0, v0, u, worker_threads=1)
    local = vidyn.batch.rollout(vi, q0, v0, u)
    assert isinstance(roll, vidyn.batch.Rollout)
    for x, y in zip(roll, local):
        assert same(x, y)
    a, bm = vdd.linearize(client, VI, roll)
    la, lb = vidyn.batch.linearize(vi, local)
    assert same(a, la) and same(bm, lb)
    rest = vdd.rollout(client, VI, q0, steps=3, shards=2)
    assert rest.q.shape == (b, 4, n)


def test_floating_base_rollouts_and_linearisations_sharded_equal_local(client):
    """A tree with free-flyer, spherical and planar joints (steps on their Lie groups, A and B
    in tangent coordinates): q (B, N+1, nq) in and out of the cluster, bit for bit."""
    model = vidyn.models.random_tree(6, seed=31)
    vi = vidyn.VariationalIntegrator(model, 0.01)
    rng = np.random.default_rng(2)
    b = 5
    q0 = np.stack([model.random_configuration(rng) for _ in range(b)])
    v0 = rng.uniform(-0.5, 0.5, (b, model.nv))
    roll = vdd.rollout(client, vi, q0, v0, steps=6, shards=2)
    local = vidyn.batch.rollout(vi, q0, v0, steps=6)
    assert roll.q.shape == (b, 7, model.nq) and model.nq > model.nv
    for x, y in zip(roll, local):
        assert same(x, y)
    a, bm = vdd.linearize(client, vi, roll, shards=2)
    la, lb = vidyn.batch.linearize(vi, local)
    assert same(a, la) and same(bm, lb)


def test_constrained_integrators_travel_to_the_cluster(client):
    """What no recipe could carry: an integrator with holonomic constraints, pickled as it is."""
    model = vidyn.models.pendulum_chain(3, planar=False)
    tip = model.frame_names[-1]
    q0 = np.array([0.3, -0.4, 0.2])
    x0 = vidyn.frame_placement(model, q0, tip)[:3, 3]
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme="midpoint", constraints=[vidyn.PointOnPlane(None, x0, [1.0, 0.0, 0.0], tip, [0.0, 0.0, 0.0])])
    q = np.stack([q0] * 4)
    v = np.zeros_like(q)
    v[:, 1] = np.linspace(-0.2, 0.2, 4)
    roll = vdd.rollout(client, vi, q, v, steps=5, shards=2)
    for x, y in zip(roll, vidyn.batch.rollout(vi, q, v, steps=5)):
        assert same(x, y)


def test_recipes_carry_kinematic_joints_and_body_wrenches():
    """Built locally (no cluster needed): the recipe reproduces the integrator it describes."""
    with pytest.warns(DeprecationWarning):
        model = vdd.ModelRecipe.builder("cartpole")
    wrenches = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0, 0.1, 0.0]])
    with pytest.warns(DeprecationWarning):
        recipe = vdd.IntegratorRecipe.of(model, 0.02, scheme="midpoint", kinematic=["cart"], body_wrenches=wrenches)
    hash(recipe)
    vi = recipe.build()
    direct = vidyn.VariationalIntegrator(model.build(), 0.02, scheme="midpoint", kinematic=["cart"], body_wrenches=wrenches)
    np.testing.assert_array_equal(vi.kinematic, direct.kinematic)
    np.testing.assert_array_equal(vi.body_wrenches, wrenches)
    q, p, u = np.array([0.1, 0.3]), np.array([0.2, 0.0]), np.array([0.11, 0.0])
    for a, b in zip(vi.step(q, p, u), direct.step(q, p, u)):
        np.testing.assert_array_equal(a, b)
