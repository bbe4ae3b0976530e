"""vidyn.distributed on a real local Dask cluster (2 worker processes, 1 thread each): sharded
results equal the local vidyn.batch results bit for bit, per-row errors keep their global
row, recipes pickle and build. Skipped (with the reason) when ``distributed`` is missing or
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


CHAIN = vdd.ModelRecipe.builder("pendulum_chain", 4, planar=False)
INTEGRATOR = vdd.IntegratorRecipe.of(CHAIN, 0.01, scheme="simpson", damping=[0.1, 0.0, 0.2, 0.0])


def test_recipes_pickle_and_build():
    for recipe in (CHAIN, INTEGRATOR):
        back = pickle.loads(pickle.dumps(recipe))
        assert back == recipe and hash(back) == hash(recipe)
    model = CHAIN.build()
    assert model.nv == 4 and CHAIN.build() is model  # cached per process
    vi = INTEGRATOR.build()
    assert vi.n == 4 and vi.scheme == "simpson"
    xml = """<robot name="r"><link name="base"/><link name="l1"><inertial><mass value="1"/>
      <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/><axis xyz="0 1 0"/>
      <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""
    assert vdd.ModelRecipe.from_urdf_string(xml).build().nv == 1
    with pytest.raises(vidyn.InputError, match="unknown builder"):
        vdd.ModelRecipe.builder("no_such_model")


def test_dynamics_sharded_equal_local(client):
    model = CHAIN.build()
    rng = np.random.default_rng(0)
    b = 37
    q, v, a = rng.uniform(-1, 1, (3, b, model.nv))
    tau = vdd.map_batch(client, "rnea", CHAIN, q, v, a)
    assert same(tau, vidyn.batch.rnea(model, q, v, a))
    d = vdd.map_batch(client, "aba_derivatives", CHAIN, q, v, a, shards=5)
    for x, y in zip(d, vidyn.batch.aba_derivatives(model, q, v, a)):
        assert same(x, y)


def test_bad_rows_keep_their_global_index(client):
    model = CHAIN.build()
    q = np.zeros((10, model.nq))
    q[7, 1] = np.nan
    with pytest.raises(vidyn.InputError, match=r"^row 7: q\[1\]"):
        vdd.map_batch(client, "crba", CHAIN, q, shards=3)
    m, status = vdd.map_batch(client, "crba", CHAIN, q, shards=3, errors="return")
    assert status.failed.tolist() == [7] and np.isnan(m[7]).all()
    assert same(m[:7], vidyn.batch.crba(model, q[:7]))


def test_rollouts_and_linearisations_sharded_equal_local(client):
    vi = INTEGRATOR.build()
    rng = np.random.default_rng(1)
    b, steps, n = 9, 25, vi.n
    q0, v0 = rng.uniform(-1, 1, (2, b, n))
    u = rng.uniform(-1, 1, (b, steps, n))
    roll = vdd.rollout(client, INTEGRATOR, q0, v0, u, worker_threads=1)
    local = vidyn.batch.rollout(vi, q0, v0, u)
    assert isinstance(roll, vidyn.batch.Rollout)
    for x, y in zip(roll, local):
        assert same(x, y)
    a, bm = vdd.linearize(client, INTEGRATOR, roll)
    la, lb = vidyn.batch.linearize(vi, local)
    assert same(a, la) and same(bm, lb)
    rest = vdd.rollout(client, INTEGRATOR, q0, steps=3, shards=2)
    assert rest.q.shape == (b, 4, n)


def test_floating_base_rollouts_and_linearisations_sharded_equal_local(client):
    """A tree with free-flyer, spherical and planar joints (steps on their Lie groups, A and B
    in tangent coordinates): q (B, N+1, nq) in and out of the cluster, bit for bit."""
    tree = vdd.ModelRecipe.builder("random_tree", 6, seed=31)
    recipe = vdd.IntegratorRecipe.of(tree, 0.01)
    vi, model = recipe.build(), tree.build()
    rng = np.random.default_rng(2)
    b = 5
    q0 = np.stack([model.random_configuration(rng) for _ in range(b)])
    v0 = rng.uniform(-0.5, 0.5, (b, model.nv))
    roll = vdd.rollout(client, recipe, q0, v0, steps=6, shards=2)
    local = vidyn.batch.rollout(vi, q0, v0, steps=6)
    assert roll.q.shape == (b, 7, model.nq) and model.nq > model.nv
    for x, y in zip(roll, local):
        assert same(x, y)
    a, bm = vdd.linearize(client, recipe, roll, shards=2)
    la, lb = vidyn.batch.linearize(vi, local)
    assert same(a, la) and same(bm, lb)


def test_recipes_carry_kinematic_joints_and_body_wrenches():
    """Built locally (no cluster needed): the recipe reproduces the integrator it describes."""
    model = vdd.ModelRecipe.builder("cartpole")
    wrenches = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0, 0.1, 0.0]])
    recipe = vdd.IntegratorRecipe.of(model, 0.02, scheme="midpoint", kinematic=["cart"], body_wrenches=wrenches)
    hash(recipe)
    vi = recipe.build()
    direct = vidyn.VariationalIntegrator(model.build(), 0.02, scheme="midpoint", kinematic=["cart"], body_wrenches=wrenches)
    np.testing.assert_array_equal(vi.kinematic, direct.kinematic)
    np.testing.assert_array_equal(vi.body_wrenches, wrenches)
    q, p, u = np.array([0.1, 0.3]), np.array([0.2, 0.0]), np.array([0.11, 0.0])
    for a, b in zip(vi.step(q, p, u), direct.step(q, p, u)):
        np.testing.assert_array_equal(a, b)
