"""Regression tests of issue 21: inputs in any memory layout read as their C-order float64
values, sizes that cannot be allocated, thread counts, Ctrl-C during long single calls,
trajectories linearised by an integrator that did not make them.

Calls that used to abort the interpreter (or that must be interrupted by a signal) run in a
child interpreter (:func:`isolated`), so that a regression fails this test instead of
killing the test session.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import vidyn
from vidyn import models

# ---------------------------------------------------------------------------------------------
# layouts: every way NumPy can lay out the same values
# ---------------------------------------------------------------------------------------------


def _strided(x: np.ndarray) -> np.ndarray:
    """The same values as a view with gaps between entries (every other entry of a buffer)."""
    buf = np.zeros((*x.shape[:-1], 2 * x.shape[-1])) if x.ndim else np.zeros(2)
    view = buf[..., ::2]
    view[...] = x
    return view


LAYOUTS = {
    "fortran": np.asfortranarray,
    "transposed view": lambda x: np.ascontiguousarray(x.T).T,
    "strided": _strided,
    "negative strides": lambda x: np.ascontiguousarray(x[::-1])[::-1] if x.ndim else x,
    "byte-swapped": lambda x: x.astype(x.dtype.newbyteorder()),
    "read-only": lambda x: _readonly(x),
    "nested list": lambda x: x.tolist(),
}


def _readonly(x: np.ndarray) -> np.ndarray:
    y = np.array(x)
    y.setflags(write=False)
    return y


def _same(a, b) -> bool:
    """Bit-for-bit equality of results (arrays, scalars, tuples of them)."""
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.fixture(scope="module")
def panda():
    return models.example_robot("panda")


@pytest.fixture(scope="module")
def chain():
    return models.pendulum_chain(3, planar=False)


def _two_d_calls(panda, chain):
    """(name, function of one 2-D array, the array): the calls of issue 21 that read 2-D inputs."""
    rng = np.random.default_rng(21)
    q, v, a = panda.random_configuration(rng), rng.standard_normal(panda.nv), rng.standard_normal(panda.nv)
    fext = rng.standard_normal((panda.nbodies, 6))
    vi = vidyn.VariationalIntegrator(chain, dt=0.01)
    u = rng.standard_normal((5, chain.nv))
    traj = vi.rollout(chain.neutral() + 0.2, u=u)
    rotation = np.eye(4)
    rotation[:3, :3] = [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    placement = rotation.copy()
    placement[:3, 3] = [0.1, -0.2, 0.3]

    def build(p):
        b = vidyn.ModelBuilder("one")
        b.add_body(None, "j", "revolute", p, 1.0, [0.0, 0.0, 0.1], np.eye(3) * 0.01, [0.0, 0.0, 1.0])
        b.add_frame("f", 0, p)
        return vidyn.frame_placements(b.build(), [0.3])

    def maximal(uu):
        mi = vidyn.MaximalIntegrator(_cylinder_chain(2), 0.01)
        return mi.rollout(np.array([0.3, -0.2]), u=uu).q

    def loop(frame):
        mi = vidyn.MaximalIntegrator(_cylinder_chain(2), 0.01)
        mi.add_loop_closure("c", "spherical", None, "joint2", frame, np.eye(4))
        return mi.njoints

    return [
        ("rnea fext", lambda f: vidyn.rnea(panda, q, v, a, fext=f), fext),
        ("aba fext", lambda f: vidyn.aba(panda, q, v, a, fext=f), fext),
        ("rollout u", lambda x: vi.rollout(chain.neutral() + 0.2, u=x).q, u),
        ("body_wrenches", lambda w: vidyn.VariationalIntegrator(chain, 0.01, body_wrenches=w).rollout(chain.neutral(), steps=2).q, rng.standard_normal((chain.nbodies, 6))),
        ("energy rows q", lambda x: vi.energy(x, traj.p), traj.q),
        ("linearize q", lambda x: vi.linearize(x, traj.p, traj.u), traj.q),
        ("linearize u", lambda x: vi.linearize(traj.q, traj.p, x), traj.u),
        ("builder rotation-only placement", build, rotation),
        ("builder placement with translation", build, placement),
        ("maximal rollout u", maximal, rng.standard_normal((4, 2))),
        ("loop-closure frame", loop, placement),
    ]


def _cylinder_chain(n: int) -> vidyn.Model:
    b = vidyn.ModelBuilder("cylinders")
    parent = None
    for k in range(n):
        p = np.eye(4)
        p[2, 3] = -1.0 if k else 0.0
        parent = b.add_body(parent, f"joint{k + 1}", "revolute", p, 1.0, [0, 0, -0.5], np.diag([0.084, 0.084, 0.00125]), [0, 1, 0])
    return b.build()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_two_d_inputs_in_any_layout_give_the_c_order_result(panda, chain, layout):
    """Fortran-ordered inputs were read transposed (silently wrong results; issue 21, item 1)."""
    for name, call, x in _two_d_calls(panda, chain):
        x = np.ascontiguousarray(x, dtype=np.float64)
        expected = call(x)
        assert _same(call(LAYOUTS[layout](x)), expected), f"{name}: {layout} input gives another result"


# ---------------------------------------------------------------------------------------------
# child interpreters for calls that could abort or must be interrupted
# ---------------------------------------------------------------------------------------------

_PRELUDE = f"""
import os, signal, sys, threading, time
import numpy as np
import vidyn
from vidyn import models
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_robustness import _cylinder_chain as cylinders
"""


def isolated(code: str, timeout: float = 120) -> str:
    """Runs `code` in a fresh interpreter; returns its stdout. Fails on a crash or a hang."""
    done = subprocess.run([sys.executable, "-c", _PRELUDE + textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"child exited with {done.returncode}:\n{done.stderr[-2000:]}"
    return done.stdout.strip()


def _outcome(call: str) -> str:
    """`'ok'`, or `'<exception class>: <message>'` of `call` run in a child interpreter."""
    return isolated(
        f"""
        chain = models.pendulum_chain(3)
        vi = vidyn.VariationalIntegrator(chain, dt=0.01)
        try:
            {call}
            print("ok")
        except Exception as e:
            print(f"{{type(e).__name__}}: {{e}}")
        """
    )


HUGE = [
    # (call, exception class, words of the message) — each aborted, panicked or wrapped before
    ("vi.rollout(chain.neutral(), steps=10**12)", "MemoryError", "cannot allocate"),
    ("vi.rollout(chain.neutral(), steps=2**64 - 1)", "InputError", "too many entries"),
    ("vi.rollout(chain.neutral(), steps=2**62)", "InputError", "too many entries"),
    ("vi.rollout(chain.neutral(), steps=2**64)", "InputError", "steps must be a non-negative int below 2**64"),
    ("vi.rollout(chain.neutral(), steps=-1)", "InputError", "steps must be a non-negative int, got -1"),
    ("vidyn.MaximalIntegrator(cylinders(2), 0.01).rollout(np.zeros(2), steps=10**12)", "MemoryError", "cannot allocate"),
    ("vidyn.MaximalIntegrator(cylinders(2), 0.01).rollout(np.zeros(2), steps=2**63)", "MemoryError", "cannot allocate"),
    ("z = np.zeros((400, 400)); vidyn.batch.rnea_second_order(models.pendulum_chain(400), z, z, z)", "MemoryError", "cannot allocate"),
]


@pytest.mark.parametrize("call,cls,words", HUGE, ids=[h[0][:60] for h in HUGE])
def test_huge_sizes_raise_instead_of_aborting(call, cls, words):
    out = _outcome(call)
    assert out.startswith(f"{cls}:") and words in out, out


def test_thread_count_is_bounded():
    """`set_num_threads(10000)` started 10 000 OS threads (issue 21, item 3)."""
    out = isolated(
        """
        before = vidyn.get_num_threads()
        for k in (10_000, 2**40, 2**70, -1):
            try:
                vidyn.set_num_threads(k)
                print("accepted", k)
            except vidyn.InputError as e:
                assert str(e), k
        vidyn.set_num_threads(3)
        assert vidyn.get_num_threads() == 3
        vidyn.set_num_threads(0)
        print("count", vidyn.get_num_threads() == before, len(os.listdir("/proc/self/task")) < 300)
        """
    )
    assert out == "count True True", out


# ---------------------------------------------------------------------------------------------
# Ctrl-C
# ---------------------------------------------------------------------------------------------

_CHAIN12 = "chain = models.pendulum_chain(12, planar=False)\nvi = vidyn.VariationalIntegrator(chain, dt=0.01)\n"
_TARGET = "x_ref=np.r_[chain.neutral() + 1.0, np.zeros(chain.nv)]"
LONG_CALLS = {
    # (set-up, a call that runs for at least several seconds unless interrupted)
    "rollout": (_CHAIN12, "vi.rollout(chain.neutral() + 0.1, steps=10**6)"),
    "linearize": (_CHAIN12 + "traj = vi.rollout(chain.neutral() + 0.1, steps=200)", "[vi.linearize(traj, order=2) for _ in range(10**5)]"),
    "linearize one call": (_CHAIN12 + "traj = vi.rollout(chain.neutral() + 0.1, steps=30_000)", "vi.linearize(traj, order=2)"),
    "maximal rollout": ("mi = vidyn.MaximalIntegrator(cylinders(2), 0.01)", "mi.rollout(np.array([0.0, 0.3]), steps=10**6)"),
    "maximal linearize": ("vidyn.set_num_threads(1)\nmi = vidyn.MaximalIntegrator(cylinders(6), 0.01)\ntraj = mi.rollout(np.full(6, 0.3), steps=40_000)", "mi.linearize(traj)"),
    "ilqr": (_CHAIN12, f"vidyn.optim.ilqr(vi, chain.neutral(), steps=2000, Q=1.0, R=1e-3, {_TARGET}, max_iterations=10**6, tolerance=0.0)"),
    "projection": (_CHAIN12, f"vidyn.optim.projection(vi, chain.neutral(), steps=2000, Q=1.0, R=1e-3, {_TARGET}, max_iterations=10**6, tolerance=0.0)"),
}


@pytest.mark.parametrize("name", list(LONG_CALLS))
def test_ctrl_c_stops_long_single_calls(name):
    """Single long calls ignored SIGINT until they finished (issue 21, item 5). The signal is
    sent 1 s into the call; the call must raise KeyboardInterrupt soon after (the binding
    polls every 50 ms; a second leaves room for a loaded machine)."""
    setup, call = LONG_CALLS[name]
    out = isolated(
        setup
        + f"""
sent = []
def interrupt():
    sent.append(time.perf_counter())
    os.kill(os.getpid(), signal.SIGINT)
threading.Timer(1.0, interrupt).start()
try:
    {call}
    print("finished")
except KeyboardInterrupt:
    print(f"interrupted {{time.perf_counter() - sent[0]:.3f}}")
""",
        timeout=300,
    )
    word, *latency = out.split()
    assert word == "interrupted", out
    assert float(latency[0]) < 1.0, out


# ---------------------------------------------------------------------------------------------
# trajectories of another integrator
# ---------------------------------------------------------------------------------------------


def test_linearize_refuses_a_trajectory_of_other_dynamics(chain):
    """`vi.linearize` and `optim.tracking_lqr` accepted a trajectory made with another model
    or time step, and linearised the wrong steps (issue 21, item 4)."""
    vi = vidyn.VariationalIntegrator(chain, dt=0.01)
    traj = vi.rollout(chain.neutral() + 0.1, steps=5)
    others = [
        vidyn.VariationalIntegrator(chain, dt=0.02),
        vidyn.VariationalIntegrator(chain, dt=0.01, scheme="midpoint"),
        vidyn.VariationalIntegrator(chain, dt=0.01, damping=np.full(chain.nv, 0.1)),
        vidyn.VariationalIntegrator(models.pendulum_chain(3, planar=True), dt=0.01),
    ]
    for other in others:
        with pytest.raises(vidyn.InputError, match="traj was made by another integrator"):
            other.linearize(traj)
        with pytest.raises(vidyn.InputError, match="traj was made by another integrator"):
            vidyn.optim.tracking_lqr(other, traj)
    # the same dynamics in another object (a rebuilt model, other Newton settings) is fine, and
    # arrays are taken as they are
    same = vidyn.VariationalIntegrator(models.pendulum_chain(3, planar=False), dt=0.01, tolerance=1e-11)
    assert _same(same.linearize(traj), vi.linearize(traj))
    assert others[0].linearize(traj.q, traj.p, traj.u)[0].shape == (5, 6, 6)


# ---------------------------------------------------------------------------------------------
# memory of large models
# ---------------------------------------------------------------------------------------------


def test_model_memory_is_linear_in_the_number_of_bodies():
    """`pendulum_chain(10000)` took 16 GB and 21 s, a 5000-link URDF 4 GB: every model carried
    an `nv × nv` workspace from birth (issue 21, item 6). Now a model of 10 000 bodies, and one
    of 5000 links from URDF, together add less than 100 MB to the peak memory (measured in a
    child interpreter: the peak of the process, in kB on Linux)."""
    out = isolated(
        """
        import resource
        links = "".join(f'<link name="l{k}"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>' for k in range(5001))
        joints = "".join(f'<joint name="j{k}" type="revolute"><parent link="l{k}"/><child link="l{k + 1}"/><origin xyz="0 0 -1"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>' for k in range(5000))
        xml = f'<robot name="long">{links}{joints}</robot>'
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        chain = models.pendulum_chain(10_000, planar=False)
        urdf = vidyn.Model.from_urdf_string(xml)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(chain.nbodies, urdf.nbodies, (after - before) // 1024)
        """
    )
    bodies, links, megabytes = map(int, out.split())
    assert (bodies, links) == (10_000, 5000)
    assert megabytes < 100, out


# ---------------------------------------------------------------------------------------------
# silent garbage
# ---------------------------------------------------------------------------------------------


def test_a_step_off_the_motion_raises():
    """Midpoint at dt = 10 'converged' while the energy went from −137.6 J to +212 059 J in
    five steps (issue 21, item 4): a step whose energy balance is off is now an error, in
    rollouts (single and batch) and in `step`, and the limit can be lifted on purpose."""
    chain = models.pendulum_chain(5, planar=False)
    vi = vidyn.VariationalIntegrator(chain, dt=10.0, scheme="midpoint")
    q0 = chain.neutral() + 0.3
    with pytest.raises(vidyn.ConvergenceError, match="not a genuine step of the motion"):
        vi.rollout(q0, steps=5)
    _, status = vidyn.batch.rollout(vi, q0[None], np.zeros((1, chain.nv)), np.zeros((1, 5, chain.nv)), errors="return")
    assert "not a genuine step" in status.messages[0]
    # unchecked, four steps run away (Newton finds no solution for a fifth from there)
    traj = vidyn.VariationalIntegrator(chain, dt=10.0, scheme="midpoint", max_energy_error=np.inf).rollout(q0, steps=4)
    bad = int(np.argmax(np.abs(np.diff(vi.energy(traj.q, traj.p)))))
    with pytest.raises(vidyn.ConvergenceError, match="not a genuine step"):
        [vi.step(traj.q[k], traj.p[k]) for k in range(bad + 1)]
    # a resolved motion of the same chain passes
    assert vidyn.VariationalIntegrator(chain, dt=0.01, scheme="midpoint").rollout(q0, steps=100).steps == 100


def test_an_overflowing_step_raises():
    """`VariationalIntegrator(dt=1e300).step` returned NaN and inf silently."""
    chain = models.pendulum_chain(3)
    with pytest.raises(vidyn.ConvergenceError):
        vidyn.VariationalIntegrator(chain, dt=1e300).step(chain.neutral() + 0.1, np.zeros(3))


@pytest.mark.parametrize("weights", [dict(R=-1.0), dict(Q=-1.0), dict(QN=[[1.0, 2.0, 0, 0, 0, 0]] * 6), dict(R=np.diag([1.0, -1e-3, 1.0]))], ids=str)
def test_weights_that_are_not_positive_semi_definite_are_refused(weights):
    """`optim.ilqr(R=-1)` ran to a cost of −2.3e7 (issue 21, item 4)."""
    chain = models.pendulum_chain(3)
    vi = vidyn.VariationalIntegrator(chain, dt=0.01)
    base = dict(Q=1.0, R=1.0, QN=1.0)
    with pytest.raises(vidyn.InputError, match="not positive semi-definite"):
        vidyn.optim.ilqr(vi, chain.neutral(), steps=10, **{**base, **weights})
    traj = vi.rollout(chain.neutral() + 0.1, steps=10)
    with pytest.raises(vidyn.InputError, match="not positive semi-definite"):
        vidyn.optim.tracking_lqr(vi, traj, **{**base, **weights})


# ---------------------------------------------------------------------------------------------
# messages name the argument, the value and what is accepted
# ---------------------------------------------------------------------------------------------


def test_messages_name_the_argument_the_value_and_what_is_accepted(chain):
    """Issue 21, item 7: 'unknown scheme 'simpson' (with s = Some(3))', 'a weld joint needs an
    axis' for an unknown kind, contact errors without the bad value, Rust's `Some(…)`."""
    cases = [
        (lambda: vidyn.VariationalIntegrator(chain, 0.01, scheme="simpson", s=3), ["scheme 'simpson' has s = 2", "s = 3", "lobatto"]),
        (lambda: vidyn.VariationalIntegrator(chain, 0.01, scheme="rk4"), ["unknown scheme 'rk4'", "midpoint"]),
        (lambda: vidyn.MaximalIntegrator(_cylinder_chain(2), 0.01).add_loop_closure("c", "weld", None, "joint2"), ["kind = 'weld'", "point_on_plane"]),
        (lambda: vidyn.MaximalIntegrator(_cylinder_chain(2), 0.01).add_contact("c", "joint2", [0, 0, 0], radius=-1.0), ["radius = -1", "≥ 0"]),
        (lambda: vidyn.MaximalIntegrator(_cylinder_chain(2), 0.01).add_contact("c", "joint2", [0, 0, 0], friction=np.nan), ["friction = NaN"]),
        (lambda: vidyn.MaximalIntegrator(_cylinder_chain(2), 0.01).add_contact("c", "joint2", [0, 0, 0], offset=np.inf), ["offset = inf"]),
        (lambda: vidyn.VariationalIntegrator(chain, 0.01, constraints=[vidyn.Distance("joint1", [0, 0, 0], "joint1", [0, 0, 1], 1.0)]), ["both points of the constraint are on body 0"]),
        (lambda: vidyn.VariationalIntegrator(chain, 0.01).rollout(chain.neutral(), steps=-1), ["steps must be a non-negative int, got -1"]),
    ]
    for call, words in cases:
        with pytest.raises(vidyn.InputError) as info:
            call()
        message = str(info.value)
        assert all(w in message for w in words) and "Some(" not in message, message


# ---------------------------------------------------------------------------------------------
# models that load, with something to say
# ---------------------------------------------------------------------------------------------

_IMPOSSIBLE = '<inertial><mass value="1"/><inertia ixx="0.001" iyy="0.001" izz="0.5" ixy="0" ixz="0" iyz="0"/></inertial>'


def test_impossible_inertias_warn_from_urdf_and_from_the_builder():
    """A physically impossible inertia (principal moments violating the triangle inequality)
    loaded from URDF without a word (issue 21, item 4); the builder accepted it too. Both warn
    now, alike (refusing would reject 48 links of example-robot-data's own URDFs), and a
    physical inertia stays silent."""
    xml = f'<robot name="r"><link name="base"/><link name="rod">{_IMPOSSIBLE}</link><joint name="j" type="continuous"><parent link="base"/><child link="rod"/><axis xyz="0 0 1"/></joint></robot>'
    with pytest.warns(vidyn.ModelWarning, match=r"link 'rod' has an inertia no rigid body can have: its principal moments \(0\.001, 0\.001, 0\.5\)"):
        m = vidyn.Model.from_urdf_string(xml)
    assert m.nv == 1
    b = vidyn.ModelBuilder("r")
    with pytest.warns(vidyn.ModelWarning, match="body 'j' has an inertia no rigid body can have"):
        b.add_body(None, "j", "revolute", None, 1.0, [0, 0, 0], np.diag([0.001, 0.001, 0.5]), [0, 0, 1])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b.add_body(0, "k", "revolute", None, 1.0, [0, 0, 0], np.diag([0.3, 0.3, 0.5]), [0, 0, 1])
        vidyn.Model.from_urdf_string(xml.replace(_IMPOSSIBLE, _IMPOSSIBLE.replace('izz="0.5"', 'izz="0.002"')))


def test_mimic_joints_warn_that_they_are_read_as_independent():
    """`<mimic>` joints were silently treated as independent (issue 21, item 4)."""
    link = '<link name="{0}"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
    joint = '<joint name="{0}" type="prismatic"><parent link="base"/><child link="{1}"/><axis xyz="0 1 0"/><limit lower="0" upper="0.04" effort="20" velocity="0.2"/>{2}</joint>'
    xml = "<robot name='hand'><link name='base'/>" + link.format("left") + link.format("right")
    xml += joint.format("finger1", "left", "") + joint.format("finger2", "right", '<mimic joint="finger1" multiplier="-1" offset="0.01"/>') + "</robot>"
    with pytest.warns(vidyn.ModelWarning, match=r"joint 'finger2' mimics joint 'finger1' \(multiplier -1, offset 0.01\)") as record:
        m = vidyn.Model.from_urdf_string(xml)
    assert m.nv == 2 and len(record) == 1
