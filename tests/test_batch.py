"""vidyn.batch: batched results equal the loop of single calls bit for bit, for 1 and 2
threads; bad rows give per-row errors (NaN, inf, non-unit quaternion, Newton failure) and the
other rows complete; shapes; progress callback; Ctrl-C; the GIL is released; thread setting.

Batch sizes are drawn by hypothesis over 0, 1, odd and large values (STYLE.md §9-§10)."""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vidyn
from strategies import model_specs

BATCH_SIZES = st.one_of(st.sampled_from([0, 1, 2, 3, 65, 257]), st.integers(0, 40))
ONE_DOF = ("revolute", "prismatic")
THREAD_COUNTS = (1, 2)


@pytest.fixture(autouse=True)
def restore_threads():
    k = vidyn.get_num_threads()
    yield
    vidyn.set_num_threads(k)


def batch_inputs(model, batch: int, seed: int):
    rng = np.random.default_rng(seed)
    q = np.array([model.random_configuration(rng) for _ in range(batch)]).reshape(batch, model.nq)
    v = rng.uniform(-3, 3, (batch, model.nv))
    a = rng.uniform(-3, 3, (batch, model.nv))
    return q, v, a


def same(x, y) -> bool:
    """Bit-for-bit equality (same shape, same bits; NaN equal to NaN)."""
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x.view(np.uint64), y.view(np.uint64))


def for_each_thread_count(f):
    """f() for 1 and 2 threads; asserts identical results and returns them."""
    results = []
    for k in THREAD_COUNTS:
        vidyn.set_num_threads(k)
        assert vidyn.get_num_threads() == k
        results.append(f())
    for r in results[1:]:
        for x, y in zip(r, results[0]):
            assert same(x, y)
    return results[0]


@settings(max_examples=25)
@given(spec=model_specs(max_bodies=8), batch=BATCH_SIZES, seed=st.integers(0, 2**32 - 1))
def test_centroidal_quantities_equal_single_calls_bit_for_bit(spec, batch, seed):
    """Issue 26: the centre of mass, its Jacobian, the centroidal momentum, its matrix and
    the matrix's time variation over a batch: the single calls, bit for bit, for 1 and 2
    threads, in C order."""
    model = spec.build()
    q, v, _ = batch_inputs(model, batch, seed)

    def run():
        return (
            vidyn.batch.center_of_mass(model, q),
            vidyn.batch.com_jacobian(model, q),
            vidyn.batch.centroidal_momentum(model, q, v),
            vidyn.batch.centroidal_momentum_matrix(model, q),
            vidyn.batch.centroidal_momentum_matrix_time_variation(model, q, v),
        )

    out = for_each_thread_count(run)
    nv = model.nv
    assert [o.shape for o in out] == [(batch, 3), (batch, 3, nv), (batch, 6), (batch, 6, nv), (batch, 6, nv)]
    assert all(o.dtype == np.float64 and o.flags.c_contiguous for o in out)
    for i in range(batch):
        single = (
            vidyn.center_of_mass(model, q[i]),
            vidyn.com_jacobian(model, q[i]),
            vidyn.centroidal_momentum(model, q[i], v[i]),
            vidyn.centroidal_momentum_matrix(model, q[i]),
            vidyn.centroidal_momentum_matrix_time_variation(model, q[i], v[i]),
        )
        for k, (x, y) in enumerate(zip(out, single)):
            assert same(x[i], y), (k, i)

@settings(max_examples=25)
@given(spec=model_specs(max_bodies=8), batch=BATCH_SIZES, seed=st.integers(0, 2**32 - 1))
def test_dynamics_equal_single_calls_bit_for_bit(spec, batch, seed):
    model = spec.build()
    q, v, a = batch_inputs(model, batch, seed)
    lam = np.cos(v)

    def run():
        return (
            vidyn.batch.rnea(model, q, v, a),
            vidyn.batch.aba(model, q, v, a),
            vidyn.batch.crba(model, q),
            vidyn.batch.minverse(model, q),
            *vidyn.batch.rnea_derivatives(model, q, v, a),
            *vidyn.batch.aba_derivatives(model, q, v, a),
            *vidyn.batch.rnea_second_order_contracted(model, q, v, a, lam),
        )

    out = for_each_thread_count(run)
    nv = model.nv
    shapes = [(batch, nv)] * 2 + [(batch, nv, nv)] * 11
    assert [o.shape for o in out] == shapes
    assert all(o.dtype == np.float64 and o.flags.c_contiguous for o in out)
    for i in range(batch):
        single = (
            vidyn.rnea(model, q[i], v[i], a[i]),
            vidyn.aba(model, q[i], v[i], a[i]),
            vidyn.crba(model, q[i]),
            vidyn.minverse(model, q[i]),
            *vidyn.rnea_derivatives(model, q[i], v[i], a[i]),
            *vidyn.aba_derivatives(model, q[i], v[i], a[i]),
            *vidyn.rnea_second_order_contracted(model, q[i], v[i], a[i], lam[i]),
        )
        for k, (x, y) in enumerate(zip(out, single)):
            assert same(x[i], y), (k, i)


@settings(max_examples=10)
@given(spec=model_specs(max_bodies=5), batch=st.sampled_from([0, 1, 5]), seed=st.integers(0, 2**32 - 1))
def test_second_order_tensors_equal_single_calls(spec, batch, seed):
    model = spec.build()
    q, v, a = batch_inputs(model, batch, seed)
    out = for_each_thread_count(lambda: vidyn.batch.rnea_second_order(model, q, v, a))
    assert [t.shape for t in out] == [(batch, model.nv, model.nv, model.nv)] * 4
    for i in range(batch):
        for x, y in zip(out, vidyn.rnea_second_order(model, q[i], v[i], a[i])):
            assert same(x[i], y)


def chain_integrator(n=3, **kwargs):
    return vidyn.VariationalIntegrator(vidyn.models.pendulum_chain(n, planar=False), 0.01, **kwargs)


@settings(max_examples=15)
@given(
    spec=model_specs(max_bodies=5, kinds=ONE_DOF),
    batch=st.sampled_from([0, 1, 3, 8]),
    steps=st.sampled_from([0, 1, 6]),
    scheme=st.sampled_from(["trapezoid", "simpson"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_rollouts_and_linearisations_equal_single_calls(spec, batch, steps, scheme, seed):
    model = spec.build()
    n = model.nv
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme=scheme)
    rng = np.random.default_rng(seed)
    q0, v0 = rng.uniform(-1, 1, (batch, n)), rng.uniform(-1, 1, (batch, n))
    u = rng.uniform(-1, 1, (batch, steps, n))

    def run():
        roll = vidyn.batch.rollout(vi, q0, v0, u)
        a, b = vidyn.batch.linearize(vi, roll)
        return roll.q, roll.p, roll.iterations, a, b

    q, p, it, a, b = for_each_thread_count(run)
    assert q.shape == p.shape == (batch, steps + 1, n)
    assert it.shape == (batch, steps) and it.dtype == np.int64
    assert a.shape == (batch, steps, 2 * n, 2 * n) and b.shape == (batch, steps, 2 * n, n)
    for t in range(batch):
        traj = vi.rollout(q0[t], v0[t], u[t])
        assert same(traj.q, q[t]) and same(traj.p, p[t])
        assert np.array_equal(traj.iterations, it[t])
        if steps:
            a1, b1 = vi.linearize(traj)
            assert same(a1, a[t]) and same(b1, b[t])


def test_rollout_start_options():
    vi = chain_integrator(2)
    q0 = np.array([[0.1, 0.2], [0.3, -0.4]])
    v0 = np.array([[0.5, 0.0], [-0.2, 0.1]])
    p0 = np.array([vi.momentum(q, v) for q, v in zip(q0, v0)])
    u = np.zeros((2, 5, 2))
    by_v = vidyn.batch.rollout(vi, q0, v0, u)
    by_p = vidyn.batch.rollout(vi, q0, p0=p0, u=u)
    assert same(by_v.q, by_p.q)
    by_steps = vidyn.batch.rollout(vi, q0, v0, steps=5)
    assert same(by_steps.q, by_v.q)
    at_rest = vidyn.batch.rollout(vi, q0, steps=3)
    assert same(at_rest.q, vidyn.batch.rollout(vi, q0, np.zeros((2, 2)), np.zeros((2, 3, 2))).q)
    with pytest.raises(vidyn.InputError, match="either v0 or p0"):
        vidyn.batch.rollout(vi, q0, v0, u, p0=p0)
    with pytest.raises(vidyn.InputError, match="controls u"):
        vidyn.batch.rollout(vi, q0, v0)


def tree_with_quaternion():
    b = vidyn.ModelBuilder("ball")
    root = b.add_body(None, "root", "freeflyer", mass=2.0, com=[0, 0, 0.1], inertia=np.diag([0.1, 0.2, 0.3]))
    b.add_body(root, "ball", "spherical", placement=np.eye(4), mass=1.0, com=[0, 0, -0.5], inertia=np.diag([0.05, 0.05, 0.02]))
    b.add_body(root, "hinge", "revolute", axis=[0, 1, 0], mass=0.5, com=[0.2, 0, 0], inertia=np.diag([0.01, 0.02, 0.02]))
    return b.build()


def test_bad_rows_give_per_row_errors():
    model = tree_with_quaternion()
    q, v, a = batch_inputs(model, 9, 4)
    q[2, 0] = np.nan  # NaN position of the free flyer
    v[4, 1] = np.inf
    q[6, 3:7] *= 2.0  # non-unit free-flyer quaternion
    q[7, 7:11] = [0.0, 0.0, 0.0, 0.0]  # zero spherical quaternion
    bad = [2, 4, 6, 7]
    with pytest.raises(vidyn.InputError, match=r"^row 2: q\[0\] is not finite.*3 more rows failed: \[2, 4, 6, 7\]") as e:
        vidyn.batch.rnea(model, q, v, a)
    assert isinstance(e.value, ValueError)
    for name, call in [
        ("rnea", lambda **kw: vidyn.batch.rnea(model, q, v, a, **kw)),
        ("aba", lambda **kw: vidyn.batch.aba(model, q, v, a, **kw)),
        ("rnea_derivatives", lambda **kw: vidyn.batch.rnea_derivatives(model, q, v, a, **kw)),
        ("aba_derivatives", lambda **kw: vidyn.batch.aba_derivatives(model, q, v, a, **kw)),
    ]:
        result, status = call(errors="return")
        assert status.failed.tolist() == bad, name
        assert not status and status.ok.tolist() == [i not in bad for i in range(9)]
        assert all(isinstance(status.errors[i], vidyn.InputError) for i in bad)
        msgs = status.messages
        assert msgs[0] is None and msgs[2].startswith("row 2: q[0]") and msgs[4].startswith("row 4: v[1]")
        assert "norm" in msgs[6] and "norm" in msgs[7]
        for arr in result if isinstance(result, tuple) else (result,):
            assert np.isnan(arr[bad]).all()
            assert np.isfinite(np.delete(arr, bad, axis=0)).all()
    # configuration-only functions: rows 4 (bad v) is fine there
    m, status = vidyn.batch.crba(model, q, errors="return")
    assert status.failed.tolist() == [2, 6, 7]
    good = [i for i in range(9) if i not in (2, 6, 7)]
    for i in good:
        assert same(m[i], vidyn.crba(model, q[i]))
    _, status = vidyn.batch.minverse(model, q, errors="return")
    assert status.failed.tolist() == [2, 6, 7]
    # the single call raises the same class for the same row
    with pytest.raises(vidyn.InputError):
        vidyn.rnea(model, q[6], v[6], a[6])


def test_all_good_status():
    model = vidyn.models.pendulum_chain(2)
    q, v, a = batch_inputs(model, 3, 0)
    tau, status = vidyn.batch.rnea(model, q, v, a, errors="return")
    assert status and status.failed.size == 0 and status.messages == [None] * 3 and status.errors == {}
    status.raise_first()  # nothing to raise


def test_shape_errors():
    model = vidyn.models.pendulum_chain(3)
    q, v, a = batch_inputs(model, 4, 0)
    with pytest.raises(vidyn.InputError, match=r"q has shape \(4, 2\), expected \(B, model.nq\) = \(B, 3\)"):
        vidyn.batch.rnea(model, q[:, :2], v, a)
    with pytest.raises(vidyn.InputError, match=r"v has shape \(3, 3\), expected \(B, model.nv\) = \(4, 3\)"):
        vidyn.batch.rnea(model, q, v[:3], a)
    with pytest.raises(vidyn.InputError, match=r"q has shape \(3,\)"):
        vidyn.batch.crba(model, q[0])
    with pytest.raises(vidyn.InputError, match="complex"):
        vidyn.batch.crba(model, q.astype(complex))
    with pytest.raises(vidyn.InputError, match="errors must be"):
        vidyn.batch.rnea(model, q, v, a, errors="ignore")  # type: ignore[call-overload]
    vi = chain_integrator(3)
    with pytest.raises(vidyn.InputError, match=r"u has shape \(4, 5, 2\), expected \(B, N, n\) = \(4, N, 3\)"):
        vidyn.batch.rollout(vi, q, v, np.zeros((4, 5, 2)))
    with pytest.raises(vidyn.InputError, match=r"p has shape \(4, 5, 3\), expected \(B, N\+1, n\) = \(4, 6, 3\)"):
        vidyn.batch.linearize(vi, np.zeros((4, 6, 3)), np.zeros((4, 5, 3)), np.zeros((4, 5, 3)))
    with pytest.raises(vidyn.InputError, match="Rollout, or q"):
        vidyn.batch.linearize(vi, np.zeros((4, 6, 3)))


def test_inputs_any_layout_and_lists():
    model = vidyn.models.pendulum_chain(3)
    q, v, a = batch_inputs(model, 5, 1)
    expected = vidyn.batch.rnea(model, q, v, a)
    fortran = np.asfortranarray(q)
    strided = np.repeat(v, 2, axis=0)[::2]
    assert same(vidyn.batch.rnea(model, fortran, strided, a.tolist()), expected)
    assert same(vidyn.batch.rnea(model, q.astype(np.float32).astype(np.float64), v, a), vidyn.batch.rnea(model, q.astype(np.float32), v, a))


def test_failing_trajectories_are_reported_and_the_others_complete():
    vi = chain_integrator(3, max_iterations=4)
    batch, steps, n = 5, 30, 3
    rng = np.random.default_rng(2)
    q0, v0 = rng.uniform(-0.5, 0.5, (batch, n)), rng.uniform(-0.5, 0.5, (batch, n))
    u = rng.uniform(-0.5, 0.5, (batch, steps, n))
    u[1, 12, 0] = np.nan  # trajectory 1 fails at step 12: bad control
    v0[3] = 1e4  # trajectory 3: Newton cannot converge in 4 iterations
    with pytest.raises(vidyn.InputError, match=r"^trajectory 1: u\[0\] is not finite.*1 more row failed"):
        vidyn.batch.rollout(vi, q0, v0, u)
    roll, status = vidyn.batch.rollout(vi, q0, v0, u, errors="return")
    assert status.failed.tolist() == [1, 3]
    assert isinstance(status.errors[1], vidyn.InputError)
    assert isinstance(status.errors[3], vidyn.ConvergenceError)
    assert "Newton" in status.messages[3]
    # trajectory 1 keeps its first 13 states
    assert np.isfinite(roll.q[1, :13]).all() and np.isnan(roll.q[1, 13:]).all()
    assert (roll.iterations[1, :12] >= 0).all() and (roll.iterations[1, 12:] == -1).all()
    for t in (0, 2, 4):
        single = vi.rollout(q0[t], v0[t], u[t])
        assert same(single.q, roll.q[t]) and same(single.p, roll.p[t])
    (a, b), lin_status = vidyn.batch.linearize(vi, roll, errors="return")
    assert lin_status.failed.tolist() == [1, 3]
    assert lin_status.messages[1].startswith("trajectory 1, step 12: ")
    assert np.isfinite(a[[0, 2, 4]]).all() and np.isnan(a[1, 12:]).all()
    a0, b0 = vi.linearize(vi.rollout(q0[0], v0[0], u[0]))
    assert same(a0, a[0]) and same(b0, b[0])


def test_progress_callback():
    vi = chain_integrator(4)
    batch, steps = 6, 40
    calls: list[tuple[int, int]] = []
    roll = vidyn.batch.rollout(vi, np.zeros((batch, 4)), np.ones((batch, 4)), np.zeros((batch, steps, 4)), progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (batch * steps, batch * steps)
    assert all(t == batch * steps for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    calls.clear()
    vidyn.batch.linearize(vi, roll, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (batch * steps, batch * steps)
    calls.clear()
    model = vidyn.models.pendulum_chain(3)
    vidyn.batch.crba(model, np.zeros((7, 3)), progress=lambda d, t: calls.append((d, t)))
    assert calls == [(7, 7)]


def long_batch(vi, batch=32, steps=4000):
    return vi, np.zeros((batch, vi.n)), np.full((batch, vi.n), 0.5), np.zeros((batch, steps, vi.n))


def test_an_exception_in_the_progress_callback_cancels_the_batch():
    vi, q0, v0, u = long_batch(chain_integrator(8))

    def stop(done, total):
        raise RuntimeError(f"stop at {done}")

    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="stop at"):
        vidyn.batch.rollout(vi, q0, v0, u, progress=stop)
    assert time.perf_counter() - start < 5.0


def test_ctrl_c_interrupts_a_long_batch():
    """Ctrl-C (simulated by `_thread.interrupt_main`) cancels a running batch. The test installs
    its own SIGINT handler for its duration, so that whatever handler the process has (a library
    may have replaced Python's) the signal reaches the batch's polling loop as in a terminal;
    the handler raises once and ignores later signals, which lets the signal be resent every
    0.2 s until it is seen (once failed under heavy load with a single timer)."""
    vi, q0, v0, u = long_batch(chain_integrator(8))
    vidyn.set_num_threads(1)
    t0 = time.perf_counter()
    vidyn.batch.rollout(vi, q0[:1], v0[:1], u[:1, :200])
    one = (time.perf_counter() - t0) * 32 * 20  # the whole batch on one thread, estimated
    seen: list[float] = []

    def handler(signum, frame):
        if not seen:
            seen.append(time.perf_counter())
            raise KeyboardInterrupt

    stop = threading.Event()

    def interrupter():
        while not stop.wait(0.2):
            _thread.interrupt_main()

    previous = signal.signal(signal.SIGINT, handler)
    thread = threading.Thread(target=interrupter)
    thread.start()
    start = time.perf_counter()
    try:
        try:
            vidyn.batch.rollout(vi, q0, v0, u)
        except KeyboardInterrupt:
            elapsed = time.perf_counter() - start
        else:
            pytest.fail(f"not interrupted: the batch ran {time.perf_counter() - start:.2f} s (one-thread estimate {one:.2f} s)")
    finally:
        stop.set()
        thread.join()
        signal.signal(signal.SIGINT, previous)
    # cancelled soon after the first signal was handled: rows in flight finish, no new ones start
    assert elapsed - (seen[0] - start) < 2.0, (elapsed, seen[0] - start)
    assert elapsed < 0.5 * one, (elapsed, one)


def test_the_gil_is_released_during_a_batch():
    vi, q0, v0, u = long_batch(chain_integrator(8), batch=8, steps=3000)
    ticks = 0
    running = True

    def count():
        nonlocal ticks
        while running:
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    start = time.perf_counter()
    vidyn.batch.rollout(vi, q0, v0, u)
    elapsed = time.perf_counter() - start
    running = False
    t.join()
    assert elapsed > 0.05, "batch too short to measure"
    assert ticks >= 10, (ticks, elapsed)


def test_thread_setting():
    vidyn.set_num_threads(3)
    assert vidyn.get_num_threads() == 3
    vidyn.set_num_threads(0)
    assert vidyn.get_num_threads() >= 1
    with pytest.raises(vidyn.InputError, match="non-negative"):
        vidyn.set_num_threads(-1)


def test_env_var_sets_the_default_thread_count():
    env = dict(os.environ, VIDYN_NUM_THREADS="3")
    r = subprocess.run([sys.executable, "-c", "import vidyn; print(vidyn.get_num_threads())"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def test_out_arrays_are_filled_in_place():
    model = vidyn.models.pendulum_chain(3)
    q, v, a = batch_inputs(model, 6, 3)
    tau = np.full((6, 3), 7.0)
    assert vidyn.batch.rnea(model, q, v, a, out=tau) is tau
    assert same(tau, vidyn.batch.rnea(model, q, v, a))
    mats = tuple(np.empty((6, 3, 3)) for _ in range(3))
    res = vidyn.batch.aba_derivatives(model, q, v, a, out=mats)
    assert all(r is m for r, m in zip(res, mats))
    for x, y in zip(res, vidyn.batch.aba_derivatives(model, q, v, a)):
        assert same(x, y)
    part = vidyn.batch.rnea_derivatives(model, q, v, a, out=(None, mats[0], None))
    assert part[1] is mats[0] and part[0] is not mats[0]
    vi = chain_integrator(3)
    u = np.zeros((6, 4, 3))
    bufs = (np.empty((6, 5, 3)), np.empty((6, 5, 3)), np.empty((6, 4), dtype=np.int64))
    roll = vidyn.batch.rollout(vi, q, v, u, out=bufs)
    assert roll.q is bufs[0] and roll.iterations is bufs[2]
    assert same(roll.q, vidyn.batch.rollout(vi, q, v, u).q)
    ab = (np.empty((6, 4, 6, 6)), np.empty((6, 4, 6, 3)))
    a_lin, b_lin = vidyn.batch.linearize(vi, roll, out=ab)
    assert a_lin is ab[0] and b_lin is ab[1]
    ref_a, ref_b = vidyn.batch.linearize(vi, roll)
    assert same(a_lin, ref_a) and same(b_lin, ref_b)


def test_bad_out_arrays_are_refused():
    model = vidyn.models.pendulum_chain(3)
    q, v, a = batch_inputs(model, 4, 0)
    with pytest.raises(vidyn.InputError, match=r"out has shape \(4, 2\), expected \(4, 3\)"):
        vidyn.batch.rnea(model, q, v, a, out=np.empty((4, 2)))
    with pytest.raises(vidyn.InputError, match="dtype float64"):
        vidyn.batch.rnea(model, q, v, a, out=np.empty((4, 3), dtype=np.float32))
    with pytest.raises(vidyn.InputError, match="C-contiguous"):
        vidyn.batch.rnea(model, q, v, a, out=np.empty((3, 4)).T)
    frozen = np.empty((4, 3))
    frozen.setflags(write=False)
    with pytest.raises(vidyn.InputError, match="cannot be written"):
        vidyn.batch.rnea(model, q, v, a, out=frozen)
    with pytest.raises(vidyn.InputError, match="overlaps an input"):
        vidyn.batch.rnea(model, q, v, a, out=v)
    with pytest.raises(vidyn.InputError, match="expected 3"):
        vidyn.batch.rnea_derivatives(model, q, v, a, out=(np.empty((4, 3, 3)),) * 2)
    with pytest.raises(vidyn.InputError, match="overlaps"):
        same_buffer = np.empty((4, 3, 3))
        vidyn.batch.rnea_derivatives(model, q, v, a, out=(same_buffer, same_buffer, None))


def test_contracted_second_order_equals_single_calls():
    vi = chain_integrator(3, damping=np.full(3, 0.2))
    rng = np.random.default_rng(4)
    batch, steps, n = 3, 4, 3
    q0, v0 = rng.uniform(-1, 1, (batch, n)), rng.uniform(-1, 1, (batch, n))
    u = rng.uniform(-1, 1, (batch, steps, n))
    lam = rng.standard_normal((batch, steps, 2 * n))
    roll = vidyn.batch.rollout(vi, q0, v0, u)
    xx, xu, uu = for_each_thread_count(lambda: vidyn.batch.linearize_contracted(vi, roll, lam=lam))
    assert xx.shape == (batch, steps, 2 * n, 2 * n) and xu.shape == (batch, steps, 2 * n, n) and uu.shape == (batch, steps, n, n)
    for t in range(batch):
        _, _, hxx, hxu, huu = vi.linearize(roll.q[t], roll.p[t], u[t], order=2, lam=lam[t])
        assert same(hxx, xx[t]) and same(hxu, xu[t]) and same(huu, uu[t])
    # non-finite or mis-shaped co-states are input errors of the whole call
    bad = lam.copy()
    bad[1, 2, 0] = np.nan
    with pytest.raises(vidyn.InputError, match="lam"):
        vidyn.batch.linearize_contracted(vi, roll, lam=bad)
    with pytest.raises(vidyn.InputError, match="lam has shape"):
        vidyn.batch.linearize_contracted(vi, roll, lam=lam[:, :, :5])
