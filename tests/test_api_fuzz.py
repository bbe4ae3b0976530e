"""Property-based API fuzzer: every public function, every memory layout, hostile scalars.

The contract (project rule), checked for every public function and method:

1. **Layouts.** Every array argument given in any memory layout NumPy can produce (C order,
   Fortran order, strided and negative-stride views, transposed views of transposed copies,
   non-native byte order, float32 / int64 holding the same values exactly, nested lists,
   read-only arrays, combinations of these; 0-d / 1-element edge cases) gives **bit for bit**
   the result of the same call with C-contiguous float64 inputs. The layout is drawn per
   argument by hypothesis, so one example mixes layouts; values are drawn so that the dtype
   changes are exact (``fuzz_inputs.scalars``). A single (non-batch) call given finite
   inputs must not return NaN/inf silently.
2. **Hostile scalars and sizes.** Sizes, counts, indices, seeds and scalar options set to
   0, -1, 10**12, 2**62, 2**63, 2**64-1, NaN, ±inf, a float where an int is expected, a bool,
   None, a string, NumPy integers … give a result or an ``Exception`` with a non-empty
   message, of an expected class (``vidyn.VidynError``, ``TypeError``, ``ValueError``,
   ``OverflowError``, ``MemoryError``, ``KeyError``, ``IndexError``, ``NotImplementedError``)
   that names the argument in its message or in a note (pyo3 adds ``while processing 'x'``)
   unless the computation itself failed (``ConvergenceError``, ``ModelError``), never a crash (abort / SIGSEGV), never ``pyo3_runtime.PanicException`` (a
   ``BaseException``), never a hang. These calls run in a child interpreter
   (``fuzz_inputs.Worker``): a crash or a hang costs one child, reported with its return code
   and stderr, and the next call gets a fresh child. ``set_num_threads`` gets a fresh child per
   value (it changes process state) and must not make the process spawn a thread per unit.
3. **Bad values in arrays.** NaN / ±inf in any array argument of a single call raise
   ``InputError`` whose message names the argument; in ``vidyn.batch`` they fail only their
   row (``errors="return"``), with a non-empty message naming the row, and the other rows are
   unchanged bit for bit.

Failures are reported per function (the tests are parametrised over the tables ``CASES`` and
``HOSTILE``; add a row there to cover a new function or argument).

Running
    CI (bounded, deterministic; about a minute on 2 cores)::

        HYPOTHESIS_PROFILE=ci python -m pytest tests/test_api_fuzz.py -q

    Long run on demand (10x the examples per function and random hostile integers/floats in
    combinations; with ``thorough`` another 10x and random seeds)::

        VIDYN_FUZZ_LONG=1 HYPOTHESIS_PROFILE=ci python -m pytest tests/test_api_fuzz.py -q
        VIDYN_FUZZ_LONG=1 HYPOTHESIS_PROFILE=thorough python -m pytest tests/test_api_fuzz.py -q

    ``VIDYN_FUZZ_TIMEOUT`` (seconds, default 60) is the per-call hang timeout of the child
    interpreter; ``VIDYN_FUZZ_MEMORY_GB`` (default 6) its address-space limit. Add ``-s`` to
    see, for every hostile value, what it gave (result, exception class and message, crash).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz_inputs as F
import vidyn
import vidyn.distributed  # not imported by vidyn itself
from reference_motion import rotation
from vidyn import optim, spatial

LONG = os.environ.get("VIDYN_FUZZ_LONG", "") not in ("", "0")
TIMEOUT = float(os.environ.get("VIDYN_FUZZ_TIMEOUT", "60"))
#: The profile's max_examples relative to ci's 200 (dev 0.125, ci 1, thorough 10), times 10 when long.
SCALE = settings.default.max_examples / 200 * (10 if LONG else 1)


def examples(base: int) -> int:
    return max(2, int(round(base * SCALE)))


# ==========================================================================================
# 1. Layouts: the table of cases
# ==========================================================================================


class Gen:
    """Draws the inputs of one case: hypothesis choices through ``draw``, values from ``rng``,
    each array exact under the requirement of the layout drawn for it (``exact[name]``)."""

    def __init__(self, draw, rng: np.random.Generator, exact: dict[str, str | None]):
        self.draw, self.rng, self.exact = draw, rng, exact

    def choice(self, label: str, options):
        return self.draw(st.sampled_from(list(options)), label=label)

    def model(self, names=("chain3", "cartpole", "tree", "chain1", "panda")):
        return F.model(self.choice("model", names))

    def q(self, name: str, m) -> np.ndarray:
        return F.configuration(m, self.rng, self.exact.get(name))

    def qs(self, name: str, m, rows: int) -> np.ndarray:
        return np.array([F.configuration(m, self.rng, self.exact.get(name)) for _ in range(rows)]).reshape(rows, m.nq)

    def vec(self, name: str, shape, scale: float = 2.0) -> np.ndarray:
        return F.scalars(self.rng, shape, self.exact.get(name), scale)

    def placement(self, name: str) -> np.ndarray:
        return F.placement(self.rng, self.exact.get(name))

    def weight(self, name: str, d: int, steps: int | None = None) -> tuple[np.ndarray, str]:
        """A positive diagonal weight (d, d) as the baseline matrix and the form to pass it in:
        "scalar" (a constant diagonal), "vector", "matrix" or "stack" (N, d, d)."""
        forms = ["matrix", "scalar", "vector"] + (["stack"] if steps is not None else [])
        form = self.choice(f"form[{name}]", forms)
        ex = self.exact.get(name)
        if form == "scalar":
            diag = np.full(d, float(self.rng.integers(1, 5)) if ex else float(self.rng.uniform(0.1, 3)))
        else:
            diag = self.rng.integers(1, 5, d).astype(float) if ex else self.rng.uniform(0.1, 3, d)
        return np.diag(diag), form


@dataclass
class Formed:
    """An argument whose baseline is ``base`` (C float64) and whose variant is the drawn
    layout applied to ``form(base)`` (e.g. a weight matrix passed as a scalar or a vector)."""

    base: np.ndarray
    form: Callable[[np.ndarray], Any]


def weight_form(w: np.ndarray, form: str, steps: int | None) -> np.ndarray:
    """The baseline matrix ``w`` in ``form`` (a 0-d array for "scalar")."""
    if form == "scalar":
        return np.array(w[0, 0])
    if form == "vector":
        return np.ascontiguousarray(np.diag(w))
    if form == "stack":
        return np.ascontiguousarray(np.broadcast_to(w, (steps, *w.shape)))
    return w


@dataclass
class Case:
    """One function under test: ``arrays`` are the array arguments that get a layout each;
    ``make(gen)`` returns the C-contiguous float64 inputs (None: argument omitted) and
    ``run(inputs)``, which calls the function. ``batch``: results may hold NaN rows."""

    name: str
    arrays: tuple[str, ...]
    make: Callable[[Gen], tuple[dict[str, Any], Callable[[dict[str, Any]], Any]]]
    budget: int = 30
    batch: bool = False
    #: how each array's baseline becomes the object passed (e.g. a weight's form); default identity
    forms: dict[str, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)


CASES: dict[str, Case] = {}


def case(name: str, arrays: str, budget: int = 30, batch: bool = False):
    def deco(make):
        CASES[name] = Case(name, tuple(arrays.split()), make, budget, batch)
        return make

    return deco


DYN = ("chain3", "cartpole", "tree", "chain1", "panda")
FEXT = ("panda", "tree", "chain3")
VI_MODELS = ("chain3", "cartpole", "chain1")


def dyn_inputs(g: Gen, names: str, models=DYN) -> tuple[Any, dict[str, Any]]:
    """A model and the standard inputs q (nq,), v / a / tau / lam (nv,), fext (nbodies, 6)."""
    m = g.model(models)
    out: dict[str, Any] = {}
    for n in names.split():
        if n == "q":
            out[n] = g.q(n, m)
        elif n == "fext":
            out[n] = g.vec(n, (m.nbodies, 6), 3.0)
        else:
            out[n] = g.vec(n, m.nv)
    return m, out


def _single(fn, names: str, models=DYN, fext: str = "no"):
    """A case of ``fn(model, *names)``; ``fext``: "no", "yes" (always) or "maybe" (drawn)."""

    def make(g: Gen):
        with_fext = fext == "yes" or (fext == "maybe" and g.choice("with_fext", [True, False]))
        m, x = dyn_inputs(g, names + (" fext" if with_fext else ""), FEXT if with_fext else models)
        order = names.split()
        if with_fext:
            return x, lambda y: fn(m, *[y[n] for n in order], fext=y["fext"])
        return x, lambda y: fn(m, *[y[n] for n in order])

    return make


for _fn, _names in [
    (vidyn.rnea, "q v a"),
    (vidyn.aba, "q v tau"),
]:
    case(_fn.__name__, _names)(_single(_fn, _names))
    case(_fn.__name__ + "[fext]", _names + " fext")(_single(_fn, _names, fext="yes"))

for _fn, _names, _budget in [
    (vidyn.rnea_derivatives, "q v a", 25),
    (vidyn.aba_derivatives, "q v tau", 25),
    (vidyn.rnea_second_order, "q v a", 15),
    (vidyn.rnea_second_order_contracted, "q v a lam", 20),
    (vidyn.aba_second_order, "q v tau", 15),
    (vidyn.aba_second_order_contracted, "q v tau lam", 20),
]:
    case(_fn.__name__, _names + " fext", _budget)(_single(_fn, _names, fext="maybe"))

for _fn, _names in [
    (vidyn.crba, "q"),
    (vidyn.minverse, "q"),
    (vidyn.gravity, "q"),
    (vidyn.nonlinear_effects, "q v"),
    (vidyn.kinetic_energy, "q v"),
    (vidyn.potential_energy, "q"),
    (vidyn.frame_placements, "q"),
    (vidyn.center_of_mass, "q"),
    (vidyn.center_of_mass_velocity, "q v"),
    (vidyn.com_jacobian, "q"),
    (vidyn.centroidal_momentum, "q v"),
    (vidyn.centroidal_momentum_matrix, "q"),
    (vidyn.centroidal_momentum_matrix_time_variation, "q v"),
]:
    case(_fn.__name__, _names)(_single(_fn, _names))


@case("forward_kinematics", "q v a")
def _(g):
    m, x = dyn_inputs(g, "q v a")
    for n in ("v", "a"):
        if g.choice(f"pass_{n}", [True, False]) is False:
            x[n] = None
    return x, lambda y: vidyn.forward_kinematics(m, y["q"], y["v"], y["a"])


def _frame_and_reference(g, m):
    """A frame of ``m`` by name or index, and a reference frame, drawn by ``g``."""
    k = int(g.rng.integers(len(m.frame_names)))
    frame = m.frame_names[k] if g.choice("frame_by", ["name", "index"]) == "name" else k
    return frame, g.choice("reference", ["world", "local", "local_world_aligned"])


@case("frame_placement", "q")
def _(g):
    m, x = dyn_inputs(g, "q")
    k = int(g.rng.integers(len(m.frame_names)))
    frame = m.frame_names[k] if g.choice("frame_by", ["name", "index"]) == "name" else k
    return x, lambda y: vidyn.frame_placement(m, y["q"], frame)


@case("jacobian", "q")
def _(g):
    m, x = dyn_inputs(g, "q")
    frame, ref = _frame_and_reference(g, m)
    return x, lambda y: vidyn.jacobian(m, y["q"], frame, ref)


@case("frame_velocity", "q v")
def _(g):
    m, x = dyn_inputs(g, "q v")
    frame, ref = _frame_and_reference(g, m)
    return x, lambda y: vidyn.frame_velocity(m, y["q"], y["v"], frame, ref)


@case("jacobian_time_variation", "q v")
def _(g):
    m, x = dyn_inputs(g, "q v")
    frame, ref = _frame_and_reference(g, m)
    return x, lambda y: vidyn.jacobian_time_variation(m, y["q"], y["v"], frame, ref)


@case("frame_velocity_derivatives", "q v")
def _(g):
    m, x = dyn_inputs(g, "q v")
    frame, ref = _frame_and_reference(g, m)
    return x, lambda y: vidyn.frame_velocity_derivatives(m, y["q"], y["v"], frame, ref)


@case("frame_acceleration", "q v a")
def _(g):
    m, x = dyn_inputs(g, "q v a")
    frame, ref = _frame_and_reference(g, m)
    classical = g.choice("classical", [False, True])
    return x, lambda y: vidyn.frame_acceleration(m, y["q"], y["v"], y["a"], frame, ref, classical)


@case("Model.integrate", "q v")
def _(g):
    m, x = dyn_inputs(g, "q v")
    return x, lambda y: m.integrate(y["q"], y["v"])


@case("Model.difference", "q0 q1")
def _(g):
    m = g.model()
    x = {"q0": g.q("q0", m), "q1": g.q("q1", m)}
    return x, lambda y: m.difference(y["q0"], y["q1"])


@case("Model.with_gravity", "g")
def _(g):
    m = g.model()
    return {"g": g.vec("g", 3, 10.0)}, lambda y: m.with_gravity(y["g"])


INT_FORMS: dict[str, Callable[[int], Any]] = {
    # a form that cannot hold the value (np.int64(2**63)) falls back to int
    "int": int,
    "np.int64": lambda k: np.int64(k) if k < 2**63 else int(k),
    "np.uint64": np.uint64,
    "0-d int64 array": lambda k: np.array(k, dtype=np.int64) if k < 2**63 else int(k),
    "0-d uint64 array": lambda k: np.array(k, dtype=np.uint64),
    "np.int32": lambda k: np.int32(k) if k < 2**31 else int(k),
}


@case("Model.random_configuration", "")
def _(g):
    m = g.model()
    seed = g.choice("seed", [0, 1, 7, 2**31 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1])
    form = g.choice("seed_form", list(INT_FORMS))
    return {}, lambda y: m.random_configuration(seed if y.get("_baseline") else INT_FORMS[form](seed))


@case("ModelBuilder.add_body", "placement com inertia axis mass")
def _(g):
    mass, com, i3 = F.inertia(g.rng, g.exact.get("inertia"))
    kind = g.choice("joint", ["revolute", "prismatic", "spherical", "freeflyer", "planar"])
    x = {
        "placement": g.placement("placement"),
        "com": g.vec("com", 3, 0.5),
        "inertia": i3,
        "axis": (F.scalars(g.rng, 3, g.exact.get("axis"), 1.0) + np.array([0.0, 0.0, 2.0])) if kind in ("revolute", "prismatic") else None,
        "mass": np.array(float(g.rng.integers(1, 5)) / (1 if g.exact.get("mass") == "int" else 4)),  # 0-d: scalar forms
    }

    def run(y):
        b = vidyn.ModelBuilder("fuzz")
        root = b.add_body(None, "base", "revolute", np.eye(4), 1.0, [0.0, 0.0, -0.5], np.eye(3), [0.0, 1.0, 0.0])
        kw = {} if y["axis"] is None else {"axis": y["axis"]}
        b.add_body(root, "body", kind, placement=y["placement"], mass=y["mass"], com=y["com"], inertia=y["inertia"], **kw)
        b.add_frame("probe", root, np.eye(4))
        return b.build()

    return x, run


@case("ModelBuilder.add_frame", "placement")
def _(g):
    on_world = g.choice("parent", ["world", "body"]) == "world"

    def run(y):
        b = vidyn.ModelBuilder("fuzz")
        root = b.add_body(None, "base", "revolute", np.eye(4), 1.0, [0.0, 0.0, -0.5], np.eye(3), [0.0, 1.0, 0.0])
        b.add_frame("probe", None if on_world else root, y["placement"])
        return b.build()

    return {"placement": g.placement("placement")}, run


@case("ModelBuilder.set_gravity", "g")
def _(g):
    def run(y):
        b = vidyn.ModelBuilder("fuzz")
        b.add_body(None, "base", "revolute", np.eye(4), 1.0, [0.0, 0.0, -0.5], np.eye(3), [0.0, 1.0, 0.0])
        b.set_gravity(y["g"])
        return b.build()

    return {"g": g.vec("g", 3, 10.0)}, run


@case("SingleDofMap", "q v theta theta_dot")
def _(g):
    m = F.model("tree")
    m1, mp = m.to_single_dof()
    method = g.choice("method", ["q_to_single_dof", "v_to_single_dof", "q_from_single_dof", "v_from_single_dof", "velocity_map"])
    x = {"q": g.q("q", m), "v": g.vec("v", m.nv), "theta": g.vec("theta", mp.n, 1.0), "theta_dot": g.vec("theta_dot", mp.n)}
    uses = {"q_to_single_dof": "q", "v_to_single_dof": "q v", "q_from_single_dof": "theta", "v_from_single_dof": "theta theta_dot", "velocity_map": "theta"}
    x = {n: x[n] for n in uses[method].split()}
    calls = {
        "q_to_single_dof": lambda y: mp.q_to_single_dof(y["q"]),
        "v_to_single_dof": lambda y: mp.v_to_single_dof(y["q"], y["v"]),
        "q_from_single_dof": lambda y: mp.q_from_single_dof(y["theta"]),
        "v_from_single_dof": lambda y: mp.v_from_single_dof(y["theta"], y["theta_dot"]),
        "velocity_map": lambda y: mp.velocity_map(y["theta"]),
    }
    return x, calls[method]


# --- VariationalIntegrator ---------------------------------------------------------------


def vi_of(g: Gen, **kw):
    m = g.model(VI_MODELS)
    scheme = g.choice("scheme", ["trapezoid", "midpoint", "simpson"])
    return m, vidyn.VariationalIntegrator(m, 0.01, scheme=scheme, **kw)


@case("VariationalIntegrator()", "damping stiffness rest body_wrenches dt")
def _(g):
    m = g.model(VI_MODELS)
    x = {
        "damping": np.abs(g.vec("damping", m.nv, 1.0)),
        "stiffness": np.abs(g.vec("stiffness", m.nv, 4.0)),
        "rest": g.vec("rest", m.nv, 1.0),
        "body_wrenches": g.vec("body_wrenches", (m.nbodies, 6), 2.0),
        "dt": np.array(1 / 128),  # 0-d: scalar forms, exact in float32
    }
    x["dt"] = np.array({None: 0.01, "f32": 1 / 128, "int": 1.0}[g.exact.get("dt")])
    for n in ("damping", "stiffness", "rest", "body_wrenches"):
        if not g.choice(f"pass_{n}", [True, False]):
            x[n] = None
    q0 = np.linspace(0.1, 0.3, m.nv)

    def run(y):
        vi = vidyn.VariationalIntegrator(m, y["dt"], damping=y["damping"], stiffness=y["stiffness"], rest=y["rest"], body_wrenches=y["body_wrenches"])
        return vi.body_wrenches, vi.dt, vi.rollout(q0, np.ones(m.nv), steps=3), vi.energy(q0, np.ones(m.nv))

    return x, run


@case("VariationalIntegrator.step", "q p u")
def _(g):
    m, vi = vi_of(g)
    x = {"q": g.vec("q", m.nv, 1.0), "p": g.vec("p", m.nv, 1.0), "u": g.vec("u", m.nv, 1.0)}
    if not g.choice("pass_u", [True, False]):
        x["u"] = None
    return x, lambda y: vi.step(y["q"], y["p"], y["u"])


@case("VariationalIntegrator.rollout", "q0 v0 p0 u", budget=25)
def _(g):
    m, vi = vi_of(g)
    n_steps = g.choice("N", [2, 1, 3, 0])
    how = g.choice("form", ["v0+u", "p0+u", "v0+steps", "q0+steps"])
    x = {"q0": g.vec("q0", m.nv, 1.0), "v0": g.vec("v0", m.nv, 1.0), "p0": g.vec("p0", m.nv, 1.0), "u": g.vec("u", (n_steps, m.nv), 1.0)}
    uses = {"v0+u": "q0 v0 u", "p0+u": "q0 p0 u", "v0+steps": "q0 v0", "q0+steps": "q0"}
    x = {n: x[n] for n in uses[how].split()}
    calls = {
        "v0+u": lambda y: vi.rollout(y["q0"], y["v0"], y["u"]),
        "p0+u": lambda y: vi.rollout(y["q0"], p0=y["p0"], u=y["u"]),
        "v0+steps": lambda y: vi.rollout(y["q0"], y["v0"], steps=n_steps),
        "q0+steps": lambda y: vi.rollout(y["q0"], steps=n_steps),
    }
    return x, calls[how]


def vi_traj_arrays(g: Gen, m, n_steps: int) -> dict[str, np.ndarray]:
    return {"q": g.vec("q", (n_steps + 1, m.nv), 1.0), "p": g.vec("p", (n_steps + 1, m.nv), 1.0), "u": g.vec("u", (n_steps, m.nv), 1.0)}


@case("VariationalIntegrator.linearize", "q p u", budget=20)
def _(g):
    m, vi = vi_of(g)
    x = vi_traj_arrays(g, m, g.choice("N", [2, 1, 3, 0]))
    return x, lambda y: vi.linearize(y["q"], y["p"], y["u"])


@case("VariationalIntegrator.linearize(traj)", "q0 v0 u", budget=20)
def _(g):
    m, vi = vi_of(g)
    n_steps = g.choice("N", [2, 1, 3])
    x = {"q0": g.vec("q0", m.nv, 1.0), "v0": g.vec("v0", m.nv, 1.0), "u": g.vec("u", (n_steps, m.nv), 1.0)}
    return x, lambda y: vi.linearize(vi.rollout(y["q0"], y["v0"], y["u"]))


@case("VariationalIntegrator.linearize(order=2)", "q p u", budget=10)
def _(g):
    m, vi = vi_of(g)
    x = vi_traj_arrays(g, m, g.choice("N", [2, 1]))
    return x, lambda y: vi.linearize(y["q"], y["p"], y["u"], order=2)


@case("VariationalIntegrator.linearize(order=2, lam)", "q p u lam", budget=15)
def _(g):
    m, vi = vi_of(g)
    n_steps = g.choice("N", [2, 1, 3])
    x = vi_traj_arrays(g, m, n_steps)
    x["lam"] = g.vec("lam", (n_steps, 2 * m.nv), 1.0)
    return x, lambda y: vi.linearize(y["q"], y["p"], y["u"], order=2, lam=y["lam"])


@case("VariationalIntegrator.energy", "q p")
def _(g):
    m, vi = vi_of(g)
    rows = g.choice("rows", [2, None, 0, 1, 4])
    shape = m.nv if rows is None else (rows, m.nv)
    return {"q": g.vec("q", shape, 1.0), "p": g.vec("p", shape, 1.0)}, lambda y: vi.energy(y["q"], y["p"])


for _meth, _names in [("momentum", "q v"), ("velocity", "q p"), ("momentum_jacobian", "q v"), ("velocity_jacobian", "q p")]:

    def _make(g, _meth=_meth, _names=_names):
        m, vi = vi_of(g)
        x = {n: g.vec(n, m.nv, 1.0) for n in _names.split()}
        return x, lambda y: getattr(vi, _meth)(*[y[n] for n in _names.split()])

    case(f"VariationalIntegrator.{_meth}", _names)(_make)


@case("VariationalIntegrator.constraint_values", "q point_a normal point_b")
def _(g):
    m = F.model("chain3")
    kind = g.choice("constraint", ["Distance", "PointOnPlane"])
    x = {
        "q": g.vec("q", m.nv, 1.0),
        "point_a": g.vec("point_a", 3, 1.0),
        "normal": np.eye(3)[int(g.rng.integers(3))] if g.exact.get("normal") else F.rotation(g.rng, None)[:, 0],
        "point_b": g.vec("point_b", 3, 1.0),
    }
    if kind == "Distance":
        del x["normal"]

    def run(y):
        if kind == "Distance":
            c = vidyn.Distance("tip", y["point_a"], None, y["point_b"], 2.5)
        else:
            c = vidyn.PointOnPlane("tip", y["point_a"], y["normal"], None, y["point_b"])
        vi = vidyn.VariationalIntegrator(m, 0.01, scheme="midpoint", constraints=[c])
        return vi.constraint_values(y["q"])

    return x, run


# --- MaximalIntegrator ---------------------------------------------------------------------


@case("MaximalIntegrator.rollout", "damping stiffness rest q0 v0 u", budget=12)
def _(g):
    m = F.model("cyl3")
    n_steps = g.choice("N", [2, 0, 1, 3])
    x = {
        "damping": np.abs(g.vec("damping", 3, 1.0)),
        "stiffness": np.abs(g.vec("stiffness", 3, 4.0)),
        "rest": g.vec("rest", 3, 1.0),
        "q0": g.vec("q0", 3, 1.0),
        "v0": g.vec("v0", 3, 1.0),
        "u": g.vec("u", (n_steps, 3), 1.0),
    }
    for n in ("damping", "stiffness", "rest"):
        if not g.choice(f"pass_{n}", [True, False]):
            x[n] = None

    def run(y):
        mi = vidyn.MaximalIntegrator(m, 0.01, damping=y["damping"], stiffness=y["stiffness"], rest=y["rest"])
        return mi.rollout(y["q0"], y["v0"], y["u"])

    return x, run


@case("MaximalIntegrator.add_loop_closure", "parent_frame child_frame axis u", budget=12)
def _(g):
    m = F.model("cyl3p")
    q0 = np.array([np.pi / 2, -np.pi / 2, -np.pi / 2])  # a folded four-bar, tip at (0, 0, -1)
    ground = np.eye(4)
    ground[:3, 3] = [0.0, 0.0, -1.0]
    at_tip = np.eye(4)
    at_tip[2, 3] = -1.0
    x = {"parent_frame": ground, "child_frame": at_tip, "axis": np.array([0.0, 1.0, 0.0]), "u": g.vec("u", (2, 3), 1.0)}

    def run(y):
        mi = vidyn.MaximalIntegrator(m, 0.01)
        j = mi.add_loop_closure("closure", "point_on_line", None, "joint3", y["parent_frame"], y["child_frame"], axis=y["axis"])
        traj = mi.rollout(q0, np.zeros(3), y["u"])
        return j, traj

    return x, run


@case("MaximalIntegrator.add_contact", "point normal u", budget=10)
def _(g):
    m = F.model("cyl3")
    x = {"point": g.vec("point", 3, 0.5), "normal": np.eye(3)[int(g.rng.integers(3))] * g.choice("normal_sign", [1.0, -1.0]), "u": g.vec("u", (2, 3), 1.0)}

    def run(y):
        mi = vidyn.MaximalIntegrator(m, 0.01)
        k = mi.add_contact("c", "joint3", y["point"], radius=0.05, normal=y["normal"], offset=-3.5)
        return k, mi.rollout(np.zeros(3), np.zeros(3), y["u"])

    return x, run


@case("MaximalIntegrator.linearize", "q0 v0 u", budget=8)
def _(g):
    m = F.model("cyl3")
    x = {"q0": g.vec("q0", 3, 1.0), "v0": g.vec("v0", 3, 1.0), "u": g.vec("u", (2, 3), 1.0)}

    def run(y):
        mi = vidyn.MaximalIntegrator(m, 0.01)
        return mi.linearize(mi.rollout(y["q0"], y["v0"], y["u"]))

    return x, run


@case("MaximalIntegrator.linearize_minimal", "q v u", budget=12)
def _(g):
    m = F.model("cyl3")
    mi = vidyn.MaximalIntegrator(m, 0.01)
    x = {"q": g.vec("q", 3, 1.0), "v": g.vec("v", 3, 1.0), "u": g.vec("u", 3, 1.0)}
    return x, lambda y: mi.linearize_minimal(y["q"], y["v"], y["u"])


# --- vidyn.batch ---------------------------------------------------------------------------


def batch_inputs(g: Gen, names: str, models=("chain3", "tree", "cartpole", "chain1")):
    m = g.model(models)
    rows = g.choice("B", [2, 1, 3, 0, 5])
    x = {}
    for n in names.split():
        x[n] = g.qs(n, m, rows) if n == "q" else g.vec(n, (rows, m.nv), 2.0)
    return m, x


for _name, _names, _budget in [
    ("rnea", "q v a", 25),
    ("aba", "q v tau", 25),
    ("crba", "q", 25),
    ("minverse", "q", 25),
    ("rnea_derivatives", "q v a", 20),
    ("aba_derivatives", "q v tau", 20),
    ("rnea_second_order", "q v a", 12),
    ("rnea_second_order_contracted", "q v a lam", 15),
    ("center_of_mass", "q", 15),
    ("com_jacobian", "q", 15),
    ("centroidal_momentum", "q v", 15),
    ("centroidal_momentum_matrix", "q", 15),
    ("centroidal_momentum_matrix_time_variation", "q v", 15),
]:

    def _make(g, _name=_name, _names=_names):
        m, x = batch_inputs(g, _names)
        fn = getattr(vidyn.batch, _name)
        order = _names.split()
        return x, lambda y: fn(m, *[y[n] for n in order], errors="return")

    case(f"batch.{_name}", _names, _budget, batch=True)(_make)


@case("batch.rollout", "q0 v0 p0 u", budget=20, batch=True)
def _(g):
    m, vi = vi_of(g)
    rows, n_steps = g.choice("B", [2, 1, 3, 0]), g.choice("N", [2, 1, 0, 3])
    x = {n: g.vec(n, (rows, m.nv), 1.0) for n in ("q0", "v0", "p0")}
    x["u"] = g.vec("u", (rows, n_steps, m.nv), 1.0)
    how = g.choice("form", ["v0+u", "p0+u", "v0+steps"])
    x = {n: x[n] for n in {"v0+u": "q0 v0 u", "p0+u": "q0 p0 u", "v0+steps": "q0 v0"}[how].split()}
    calls = {
        "v0+u": lambda y: vidyn.batch.rollout(vi, y["q0"], y["v0"], y["u"], errors="return"),
        "p0+u": lambda y: vidyn.batch.rollout(vi, y["q0"], p0=y["p0"], u=y["u"], errors="return"),
        "v0+steps": lambda y: vidyn.batch.rollout(vi, y["q0"], y["v0"], steps=n_steps, errors="return"),
    }
    return x, calls[how]


@case("batch.linearize", "q p u", budget=15, batch=True)
def _(g):
    m, vi = vi_of(g)
    rows, n_steps = g.choice("B", [2, 1, 0]), g.choice("N", [2, 1])
    x = {"q": g.vec("q", (rows, n_steps + 1, m.nv), 1.0), "p": g.vec("p", (rows, n_steps + 1, m.nv), 1.0), "u": g.vec("u", (rows, n_steps, m.nv), 1.0)}
    return x, lambda y: vidyn.batch.linearize(vi, y["q"], y["p"], y["u"], errors="return")


@case("batch.linearize_contracted", "q p u lam", budget=12, batch=True)
def _(g):
    m, vi = vi_of(g)
    rows, n_steps = g.choice("B", [2, 1, 0]), g.choice("N", [2, 1])
    x = {"q": g.vec("q", (rows, n_steps + 1, m.nv), 1.0), "p": g.vec("p", (rows, n_steps + 1, m.nv), 1.0), "u": g.vec("u", (rows, n_steps, m.nv), 1.0)}
    x["lam"] = g.vec("lam", (rows, n_steps, 2 * m.nv), 1.0)
    return x, lambda y: vidyn.batch.linearize_contracted(vi, y["q"], y["p"], y["u"], lam=y["lam"], errors="return")


# --- vidyn.optim ---------------------------------------------------------------------------

def with_weights(g: Gen, x: dict[str, Any], names: dict[str, int], steps: int | None) -> None:
    """Adds weight arguments: baseline the (d, d) matrix, variant a drawn form of it (scalar,
    vector, matrix or, for the running weights Q and R, a per-step stack) in a drawn layout."""
    for n, d in names.items():
        n_steps = steps if n in ("Q", "R") else None
        w, form = g.weight(n, d, n_steps)
        x[n] = Formed(w, lambda w, form=form, n_steps=n_steps: weight_form(w, form, n_steps))


def weights(y: dict[str, Any], names: str) -> dict[str, Any]:
    return {n: y[n] for n in names.split()}


@case("optim.lqr", "A B Q R QN", budget=25)
def _(g):
    steps, nx, nu = g.choice("N", [2, 1, 3]), g.choice("nx", [3, 2, 1]), g.choice("nu", [2, 1])
    x = {"A": np.eye(nx) + g.vec("A", (steps, nx, nx), 0.5), "B": g.vec("B", (steps, nx, nu), 1.0)}
    with_weights(g, x, {"Q": nx, "R": nu, "QN": nx}, steps)
    return x, lambda y: optim.lqr(y["A"], y["B"], **weights(y, "Q R QN"))


@case("optim.dlqr", "A B Q R", budget=20)
def _(g):
    nx, nu = g.choice("nx", [3, 2, 1]), g.choice("nu", [2, 1])
    x = {"A": g.vec("A", (nx, nx), 0.75), "B": np.eye(nx, nu) + g.vec("B", (nx, nu), 0.25)}
    with_weights(g, x, {"Q": nx, "R": nu}, None)
    return x, lambda y: optim.dlqr(y["A"], y["B"], **weights(y, "Q R"), max_iterations=2000)


def cartpole_vi():
    if "cartpole_vi" not in F._MODELS:
        F._MODELS["cartpole_vi"] = vidyn.VariationalIntegrator(F.model("cartpole"), 0.05)
    return F._MODELS["cartpole_vi"]


@case("optim.tracking_lqr", "Q R QN", budget=15)
def _(g):
    vi = cartpole_vi()
    traj = vi.rollout([0.0, 0.3], [0.0, 0.0], np.full((3, 2), 0.1))
    x: dict[str, Any] = {}
    with_weights(g, x, {"Q": 4, "R": 1, "QN": 4}, 3)
    return x, lambda y: optim.tracking_lqr(vi, traj, **weights(y, "Q R QN"), actuated=[0])


@case("optim.ilqr", "q0 v0 U_init Q R QN x_ref u_ref u_min u_max", budget=10)
def _(g):
    vi = cartpole_vi()
    steps = 4
    x: dict[str, Any] = {
        "q0": g.vec("q0", 2, 0.5),
        "v0": g.vec("v0", 2, 0.5),
        "U_init": g.vec("U_init", (steps, 1), 1.0),
        "x_ref": g.vec("x_ref", (steps + 1, 4), 1.0) if g.choice("x_ref_rows", [True, False]) else g.vec("x_ref", 4, 1.0),
        "u_ref": g.vec("u_ref", (steps, 1), 1.0),
        "u_min": np.array([-4.0]),
        "u_max": np.array([4.0]),
    }
    with_weights(g, x, {"Q": 4, "R": 1, "QN": 4}, steps)
    method = g.choice("method", ["ilqr", "ddp"])

    def run(y):
        return optim.ilqr(
            vi, y["q0"], y["v0"], y["U_init"], actuated=[0], x_ref=y["x_ref"], u_ref=y["u_ref"], u_min=y["u_min"], u_max=y["u_max"], max_iterations=3, method=method, **weights(y, "Q R QN")
        )

    return x, run


@case("optim.projection", "q0 U_init Q R QN x_ref x_guess", budget=6)
def _(g):
    vi = cartpole_vi()
    steps = 3
    x: dict[str, Any] = {"q0": g.vec("q0", 2, 0.5), "U_init": g.vec("U_init", (steps, 1), 1.0), "x_ref": g.vec("x_ref", 4, 1.0), "x_guess": None}
    if g.choice("with_x_guess", [False, True]):
        x["x_guess"] = g.vec("x_guess", (steps + 1, 4), 0.5)
    with_weights(g, x, {"Q": 4, "R": 1, "QN": 4}, steps)
    return x, lambda y: optim.projection(vi, y["q0"], None, y["U_init"], actuated=[0], x_ref=y["x_ref"], x_guess=y["x_guess"], max_iterations=2, **weights(y, "Q R QN"))


@case("optim.closed_loop_rollout", "q0 v0 x_ref K u_ref", budget=15)
def _(g):
    vi = cartpole_vi()
    steps = 3
    x = {"q0": g.vec("q0", 2, 0.5), "v0": g.vec("v0", 2, 0.5), "x_ref": g.vec("x_ref", (steps + 1, 4), 0.5), "K": g.vec("K", (steps, 1, 4), 1.0), "u_ref": g.vec("u_ref", (steps, 1), 1.0)}
    return x, lambda y: optim.closed_loop_rollout(vi, y["q0"], y["v0"], x_ref=y["x_ref"], K=y["K"], u_ref=y["u_ref"], actuated=[0])


@case("optim.project", "x_bar u_bar K", budget=15)
def _(g):
    vi = cartpole_vi()
    steps = 3
    x = {"x_bar": g.vec("x_bar", (steps + 1, 4), 0.5), "u_bar": g.vec("u_bar", (steps, 1), 1.0), "K": g.vec("K", (steps, 1, 4), 1.0)}
    return x, lambda y: optim.project(vi, y["x_bar"], y["u_bar"], y["K"], actuated=[0])


@case("optim.ilqr_linear", "A B x0 U_init Q R QN", budget=15)
def _(g):
    steps, nx, nu = 3, 2, 1
    x = {"A": np.eye(nx) + g.vec("A", (steps, nx, nx), 0.25), "B": g.vec("B", (steps, nx, nu), 1.0), "x0": g.vec("x0", nx, 1.0), "U_init": g.vec("U_init", (steps, nu), 1.0)}
    with_weights(g, x, {"Q": nx, "R": nu, "QN": nx}, steps)
    return x, lambda y: optim.ilqr_linear(y["A"], y["B"], y["x0"], y["U_init"], max_iterations=3, **weights(y, "Q R QN"))


#: vidyn.spatial: (function, its array arguments). Rotation vectors and twists are drawn with
#: angles up to ~3.5 (beyond π too), rotations and placements by ``F.placement``.
SPATIAL_CASES = [
    (spatial.skew, "w"), (spatial.exp3, "w"), (spatial.log3, "R"), (spatial.jexp3, "w"), (spatial.jlog3, "R"),
    (spatial.exp6, "xi"), (spatial.log6, "M"), (spatial.jexp6, "xi"), (spatial.jlog6, "M"),
    (spatial.action, "M"), (spatial.dual_action, "M"), (spatial.cross_motion, "v"), (spatial.cross_force, "v"),
    (spatial.act_motion, "M v"), (spatial.act_force, "M f"),
]


def _spatial_case(fn, names: str):
    def make(g: Gen):
        x: dict[str, Any] = {}
        for n in names.split():
            if n == "M":
                x[n] = g.placement(n)
            elif n == "R":
                x[n] = np.ascontiguousarray(g.placement(n)[:3, :3])
            else:
                x[n] = g.vec(n, 3 if n == "w" else 6, 2.0)
        order = names.split()
        return x, lambda y: fn(*[y[n] for n in order])

    return make


for _fn, _names in SPATIAL_CASES:
    case(f"spatial.{_fn.__name__}", _names, budget=10)(_spatial_case(_fn, _names))


# --- floating bases: the integrator on Lie groups ------------------------------------------

#: Models with free-flyer (and, in "tree", spherical and planar) joints.
FLOATING = ("free_box", "tree")


def floating_vi(g: Gen):
    m = g.model(FLOATING)
    scheme = g.choice("scheme", ["trapezoid", "midpoint", "simpson"])
    return m, vidyn.VariationalIntegrator(m, 0.01, scheme=scheme)


@case("VariationalIntegrator.step[floating]", "q p u", budget=20)
def _(g):
    m, vi = floating_vi(g)
    x = {"q": g.q("q", m), "p": g.vec("p", m.nv, 1.0), "u": g.vec("u", m.nv, 1.0)}
    return x, lambda y: vi.step(y["q"], y["p"], y["u"])


@case("VariationalIntegrator.rollout[floating]", "q0 v0 u", budget=15)
def _(g):
    m, vi = floating_vi(g)
    n_steps = g.choice("N", [2, 1, 3])
    x = {"q0": g.q("q0", m), "v0": g.vec("v0", m.nv, 1.0), "u": g.vec("u", (n_steps, m.nv), 1.0)}
    return x, lambda y: vi.rollout(y["q0"], y["v0"], y["u"])


@case("VariationalIntegrator(body_wrenches)[floating]", "body_wrenches q0", budget=10)
def _(g):
    m = g.model(FLOATING)
    x = {"body_wrenches": g.vec("body_wrenches", (m.nbodies, 6), 2.0), "q0": g.q("q0", m)}

    def run(y):
        vi = vidyn.VariationalIntegrator(m, 0.01, body_wrenches=y["body_wrenches"])
        return vi.body_wrenches, vi.rollout(y["q0"], np.ones(m.nv), steps=2), vi.linearize(vi.rollout(y["q0"], steps=1))

    return x, run


@case("VariationalIntegrator.linearize[floating]", "q p u", budget=12)
def _(g):
    m, vi = floating_vi(g)
    n_steps = g.choice("N", [2, 1])
    x = {"q": g.qs("q", m, n_steps + 1), "p": g.vec("p", (n_steps + 1, m.nv), 1.0), "u": g.vec("u", (n_steps, m.nv), 1.0)}
    return x, lambda y: vi.linearize(y["q"], y["p"], y["u"])


@case("VariationalIntegrator.linearize(order=2, lam)[floating]", "q p u lam", budget=8)
def _(g):
    m, vi = floating_vi(g)
    n_steps = g.choice("N", [1, 2])
    x = {"q": g.qs("q", m, n_steps + 1), "p": g.vec("p", (n_steps + 1, m.nv), 1.0), "u": g.vec("u", (n_steps, m.nv), 1.0)}
    x["lam"] = g.vec("lam", (n_steps, 2 * m.nv), 1.0)
    return x, lambda y: vi.linearize(y["q"], y["p"], y["u"], order=2, lam=y["lam"])


@case("VariationalIntegrator.energy[floating]", "q p")
def _(g):
    m, vi = floating_vi(g)
    rows = g.choice("rows", [2, None, 1])
    x = {"q": g.q("q", m) if rows is None else g.qs("q", m, rows), "p": g.vec("p", m.nv if rows is None else (rows, m.nv), 1.0)}
    return x, lambda y: vi.energy(y["q"], y["p"])


for _meth, _names in [("momentum", "q v"), ("velocity", "q p"), ("momentum_jacobian", "q v"), ("velocity_jacobian", "q p")]:

    def _make(g, _meth=_meth, _names=_names):
        m, vi = floating_vi(g)
        second = _names.split()[1]
        x = {"q": g.q("q", m), second: g.vec(second, m.nv, 1.0)}
        return x, lambda y: getattr(vi, _meth)(y["q"], y[second])

    case(f"VariationalIntegrator.{_meth}[floating]", _names)(_make)


# --- contacts (vidyn.contacts) and constraint multipliers ----------------------------------

#: Point contacts of the hanging box's frames where they are at its neutral configuration.
BOX_TARGETS = {"low": np.array([0.0, 0.0, -1.0]), "side": np.array([1.0, 0.0, 0.0])}


def quaternion(g: Gen, name: str) -> np.ndarray:
    """A unit quaternion [x, y, z, w] exact under the layout drawn for ``name``."""
    ex = g.exact.get(name)
    if ex is None:
        qu = g.rng.standard_normal(4)
        return qu / np.linalg.norm(qu)
    quats = F.INT_QUATERNIONS if ex == "int" else F.F32_QUATERNIONS
    return quats[g.rng.integers(len(quats))] + 0.0


def box_held_at(g: Gen, name: str, rows: int, frame: str = "low") -> np.ndarray:
    """Configurations (rows, 7) of the box, each turned by its own drawn quaternion, with the
    origin of ``frame`` at its point contact's target (so a contact step starts on it)."""
    out = []
    offset = F.BOX_LOW if frame == "low" else np.array([1.0, 0.0, 0.0])
    for _ in range(rows):
        qu = quaternion(g, name)
        out.append(np.concatenate([BOX_TARGETS[frame] - rotation(qu) @ offset, qu]))
    return np.array(out).reshape(rows, 7) + 0.0


def contact_vi(scheme: str = "trapezoid") -> vidyn.VariationalIntegrator:
    key = f"contact_vi[{scheme}]"
    if key not in F._MODELS:
        F._MODELS[key] = vidyn.VariationalIntegrator(F.model("hanging_box"), 0.01, scheme=scheme, constraints=vidyn.point_contact("low", BOX_TARGETS["low"]))
    return F._MODELS[key]


def _constraints_seen(cons) -> tuple[str, np.ndarray]:
    """A comparable account of constraint objects: their repr (Rust's shortest round-trip
    floats) and their values at a fixed configuration of the hanging box."""
    vi = vidyn.VariationalIntegrator(F.model("hanging_box"), 0.01, constraints=list(cons))
    return repr(cons), vi.constraint_values(np.array([0.1, -0.2, 0.3, 0.1, 0.2, 0.3, np.sqrt(0.86)]))


@case("point_contact", "target", budget=10)
def _(g):
    return {"target": g.vec("target", 3, 2.0)}, lambda y: _constraints_seen(vidyn.point_contact("low", y["target"]))


@case("frame_contact", "target", budget=10)
def _(g):
    return {"target": g.placement("target")}, lambda y: _constraints_seen(vidyn.frame_contact("low", y["target"]))


@case("Perpendicular", "axis_a axis_b aligned", budget=10)
def _(g):
    x = {"axis_a": g.vec("axis_a", 3, 1.0), "axis_b": g.vec("axis_b", 3, 1.0), "aligned": g.vec("aligned", (2, 3), 1.0)}
    for a in (x["axis_a"], x["axis_b"], x["aligned"][0], x["aligned"][1]):
        if not a.any():
            a[0] = 1.0
    with_aligned = g.choice("with_aligned", [True, False])
    if not with_aligned:
        del x["aligned"]

    def run(y):
        aligned = tuple(y["aligned"]) if with_aligned else None
        return _constraints_seen([vidyn.Perpendicular(None, y["axis_a"], "low", y["axis_b"], aligned=aligned)])

    return x, run


@case("ContactSchedule.holds", "target", budget=8)
def _(g):
    x = {"target": g.vec("target", 3, 1.0)}
    phases = [(g.choice("first", [1, 2]), ["low"]), (1, ["low", "side"]), (g.choice("last", [1, 2]), ["side"])]

    def run(y):
        cs = vidyn.ContactSchedule.of({"low": vidyn.point_contact("low", y["target"]), "side": vidyn.point_contact("side", BOX_TARGETS["side"])}, phases)
        return cs.holds("low"), cs.holds("side"), cs.touchdowns(), cs.active, repr(cs.constraints), _constraints_seen(cs.constraints)[1]

    return x, run


def _box_schedule() -> tuple[vidyn.ContactSchedule, vidyn.VariationalIntegrator]:
    if "box_schedule" not in F._MODELS:
        cs = vidyn.ContactSchedule.of({k: vidyn.point_contact(k, t) for k, t in BOX_TARGETS.items()}, [(1, ["low"]), (1, ["side"]), (1, ["low"]), (1, [])])
        F._MODELS["box_schedule"] = (cs, vidyn.VariationalIntegrator(F.model("hanging_box"), 0.01, constraints=cs.constraints, schedule=cs.active))
    return F._MODELS["box_schedule"]


@case("ContactSchedule.touchdown_gaps", "q", budget=10)
def _(g):
    cs, vi = _box_schedule()
    return {"q": g.qs("q", F.model("hanging_box"), cs.steps + 1)}, lambda y: cs.touchdown_gaps(vi, y["q"])


@case("ContactSchedule.forces", "multipliers dt", budget=10)
def _(g):
    cs, _ = _box_schedule()
    name = g.choice("contact", ["low", "side"])
    x = {"multipliers": g.vec("multipliers", (cs.steps, len(cs.constraints)), 1.0), "dt": np.array({None: 0.01, "f32": 1 / 64, "int": 1.0}[g.exact.get("dt")])}
    return x, lambda y: cs.forces(y["multipliers"], y["dt"], name)


@case("point_contact_forces", "multipliers dt", budget=10)
def _(g):
    rows, m = g.choice("N", [2, 1, 0]), g.choice("m", [3, 6])
    first = g.choice("first", [0, m - 3])
    x = {"multipliers": g.vec("multipliers", (rows, m), 1.0), "dt": np.array({None: 0.01, "f32": 1 / 64, "int": 2.0}[g.exact.get("dt")])}
    return x, lambda y: vidyn.point_contact_forces(y["multipliers"], y["dt"], first)


@case("VariationalIntegrator.multipliers", "q p u", budget=10)
def _(g):
    vi = contact_vi(g.choice("scheme", ["trapezoid", "midpoint"]))
    n_steps = g.choice("N", [2, 1])
    x = {"q": box_held_at(g, "q", n_steps + 1), "p": g.vec("p", (n_steps + 1, 6), 0.5), "u": g.vec("u", (n_steps, 6), 0.5)}
    derivatives = g.choice("derivatives", [False, True])
    return x, lambda y: vi.multipliers(y["q"], derivatives, p=y["p"], u=y["u"])


@case("VariationalIntegrator.multipliers(traj)", "q0 v0 u", budget=8)
def _(g):
    vi = contact_vi(g.choice("scheme", ["trapezoid", "midpoint"]))
    n_steps = g.choice("N", [2, 1])
    x = {"q0": box_held_at(g, "q0", 1)[0], "v0": g.vec("v0", 6, 0.5), "u": g.vec("u", (n_steps, 6), 0.5)}
    derivatives = g.choice("derivatives", [True, False])
    return x, lambda y: vi.multipliers(vi.rollout(y["q0"], y["v0"], y["u"]), derivatives)


@case("VariationalIntegrator(schedule)", "schedule u", budget=8)
def _(g):
    m = F.model("hanging_box")
    n_steps = g.choice("N", [3, 2])
    rows = [np.repeat([1.0, 0.0], 3), np.repeat([0.0, 1.0], 3), np.zeros(6)]
    x = {"schedule": np.array([rows[g.rng.integers(3)] for _ in range(n_steps)]), "u": g.vec("u", (n_steps, 6), 0.25)}
    constraints = [c for k in BOX_TARGETS for c in vidyn.point_contact(k, BOX_TARGETS[k])]

    def run(y):
        vi = vidyn.VariationalIntegrator(m, 0.01, constraints=constraints, schedule=y["schedule"])
        traj = vi.rollout(m.neutral(), np.zeros(6), y["u"])
        return vi.schedule, traj, vi.multipliers(traj)

    return x, run


# --- vidyn.optim: multiple shooting, floating bases, maximal coordinates, tracked points -----


@case("optim.fddp", "q0 X_init U_init Q R QN x_ref", budget=8)
def _(g):
    vi = cartpole_vi()
    steps = 3
    width = g.choice("X_init", [4, 2])
    x: dict[str, Any] = {"q0": g.vec("q0", 2, 0.5), "X_init": g.vec("X_init", (steps + 1, width), 0.5), "U_init": g.vec("U_init", (steps, 1), 1.0), "x_ref": g.vec("x_ref", 4, 1.0)}
    with_weights(g, x, {"Q": 4, "R": 1, "QN": 4}, steps)
    method = g.choice("method", ["ilqr", "ddp"])
    return x, lambda y: optim.fddp(vi, y["q0"], y["X_init"], y["U_init"], actuated=[0], x_ref=y["x_ref"], max_iterations=2, method=method, **weights(y, "Q R QN"))


def free_box_vi() -> vidyn.VariationalIntegrator:
    if "free_box_vi" not in F._MODELS:
        F._MODELS["free_box_vi"] = vidyn.VariationalIntegrator(F.model("free_box"), 0.02)
    return F._MODELS["free_box_vi"]


def box_states(g: Gen, name: str, rows: int | None, scale: float = 0.5) -> np.ndarray:
    """States (q, p) of the free box, (13,) or (rows, 13), exact under ``name``'s layout."""
    m = F.model("free_box")
    if rows is None:
        return np.concatenate([g.q(name, m), g.vec(name, 6, scale)])
    return np.concatenate([g.qs(name, m, rows), g.vec(name, (rows, 6), scale)], axis=1)


@case("optim.ilqr[floating]", "q0 v0 p0 U_init Q R QN x_ref u_ref u_min u_max", budget=8)
def _(g):
    vi = free_box_vi()
    steps = 3
    x: dict[str, Any] = {
        "q0": g.q("q0", vi.model),
        "U_init": g.vec("U_init", (steps, 6), 1.0),
        "x_ref": box_states(g, "x_ref", steps + 1 if g.choice("x_ref_rows", [True, False]) else None),
        "u_ref": g.vec("u_ref", (steps, 6), 1.0),
        "u_min": np.full(6, -4.0),
        "u_max": np.full(6, 4.0),
    }
    with_weights(g, x, {"Q": 12, "R": 6, "QN": 12}, steps)
    method = g.choice("method", ["ilqr", "ddp"])
    start = g.choice("start", ["v0", "p0"])  # the initial velocity or momentum
    x[start] = g.vec(start, 6, 0.5)

    def run(y):
        return optim.ilqr(vi, y["q0"], U_init=y["U_init"], x_ref=y["x_ref"], u_ref=y["u_ref"], u_min=y["u_min"], u_max=y["u_max"], max_iterations=2, method=method, **{start: y[start]}, **weights(y, "Q R QN"))

    return x, run


@case("optim.ilqr(velocity)[floating]", "q0 v0 U_init Q R QN x_ref", budget=6)
def _(g):
    vi = free_box_vi()
    steps = 3
    x: dict[str, Any] = {"q0": g.q("q0", vi.model), "v0": g.vec("v0", 6, 0.5), "U_init": g.vec("U_init", (steps, 6), 1.0), "x_ref": box_states(g, "x_ref", None)}
    with_weights(g, x, {"Q": 12, "R": 6, "QN": 12}, steps)
    coordinates = g.choice("coordinates", ["velocity", "momentum"])  # the cost on (q, v) either way

    def run(y):
        return optim.ilqr(vi, y["q0"], y["v0"], y["U_init"], x_ref=y["x_ref"], cost_state="velocity", coordinates=coordinates, max_iterations=2, **weights(y, "Q R QN"))

    return x, run


@case("optim.fddp[floating]", "q0 X_init U_init Q R QN x_ref", budget=8)
def _(g):
    vi = free_box_vi()
    steps = 3
    guess = box_states(g, "X_init", steps + 1)
    if g.choice("X_init", ["states", "configurations"]) == "configurations":
        guess = np.ascontiguousarray(guess[:, :7])
    x: dict[str, Any] = {"q0": g.q("q0", vi.model), "X_init": guess, "U_init": g.vec("U_init", (steps, 6), 1.0), "x_ref": box_states(g, "x_ref", None)}
    with_weights(g, x, {"Q": 12, "R": 6, "QN": 12}, steps)
    return x, lambda y: optim.fddp(vi, y["q0"], y["X_init"], y["U_init"], x_ref=y["x_ref"], max_iterations=2, **weights(y, "Q R QN"))


@case("optim.tracking_lqr[floating]", "Q R QN", budget=10)
def _(g):
    vi = free_box_vi()
    traj = vi.rollout(np.array([0.1, 0.2, 0.3, 0.0, 0.6, 0.0, 0.8]), np.array([0.1, -0.2, 0.3, 0.5, -0.4, 0.3]), np.full((3, 6), 0.1))
    x: dict[str, Any] = {}
    with_weights(g, x, {"Q": 12, "R": 6, "QN": 12}, 3)
    return x, lambda y: optim.tracking_lqr(vi, traj, **weights(y, "Q R QN"))


@case("optim.closed_loop_rollout[floating]", "q0 v0 x_ref K u_ref", budget=12)
def _(g):
    vi = free_box_vi()
    steps = 3
    constant = g.choice("constant", [False, True])  # an equilibrium x_ref (13,), gains (6, 12), u_ref (6,) and steps
    x = {
        "q0": g.q("q0", vi.model),
        "v0": g.vec("v0", 6, 0.5),
        "x_ref": box_states(g, "x_ref", None if constant else steps + 1),
        "K": g.vec("K", (6, 12) if constant else (steps, 6, 12), 0.25),
        "u_ref": g.vec("u_ref", 6 if constant else (steps, 6), 1.0),
    }
    n_steps = steps if constant else None
    return x, lambda y: optim.closed_loop_rollout(vi, y["q0"], y["v0"], x_ref=y["x_ref"], K=y["K"], u_ref=y["u_ref"], steps=n_steps)


@case("optim.project[floating]", "x_bar u_bar K", budget=12)
def _(g):
    vi = free_box_vi()
    steps = 3
    x = {"x_bar": box_states(g, "x_bar", steps + 1), "u_bar": g.vec("u_bar", (steps, 6), 1.0), "K": g.vec("K", (steps, 6, 12), 0.25)}
    return x, lambda y: optim.project(vi, y["x_bar"], y["u_bar"], y["K"])


@case("optim.projection[floating]", "q0 U_init Q R QN x_ref x_guess proj_Q proj_R proj_QN", budget=5)
def _(g):
    vi = free_box_vi()
    steps = 3
    x: dict[str, Any] = {"q0": g.q("q0", vi.model), "U_init": g.vec("U_init", (steps, 6), 1.0), "x_ref": box_states(g, "x_ref", None), "x_guess": None}
    if g.choice("with_x_guess", [False, True]):
        x["x_guess"] = box_states(g, "x_guess", steps + 1)
    with_weights(g, x, {"Q": 12, "R": 6, "QN": 12, "proj_Q": 12, "proj_R": 6, "proj_QN": 12}, steps)
    return x, lambda y: optim.projection(vi, y["q0"], None, y["U_init"], x_ref=y["x_ref"], x_guess=y["x_guess"], max_iterations=2, **weights(y, "Q R QN proj_Q proj_R proj_QN"))


@case("optim.Problem", "q0 v0 U_init Q R QN x_ref u_ref", budget=8)
def _(g):
    vi = cartpole_vi()
    steps = 3
    x: dict[str, Any] = {"q0": g.vec("q0", 2, 0.5), "v0": g.vec("v0", 2, 0.5), "U_init": g.vec("U_init", (steps, 1), 1.0), "x_ref": g.vec("x_ref", (steps + 1, 4), 1.0), "u_ref": g.vec("u_ref", 1, 1.0)}
    with_weights(g, x, {"Q": 4, "R": 1, "QN": 4}, steps)

    def run(y):
        problem = optim.Problem(vi, y["q0"], y["v0"], y["U_init"], actuated=[0], x_ref=y["x_ref"], u_ref=y["u_ref"], **weights(y, "Q R QN"))
        return problem.q0, problem.p0, problem.U_init, optim.ilqr(problem, max_iterations=1)

    return x, run


@case("optim.Track", "target weight offset frame_target", budget=8)
def _(g):
    vi = cartpole_vi()
    steps = 3
    x = {
        "target": g.vec("target", (steps + 1, 3) if g.choice("target_rows", [True, False]) else 3, 1.0),
        "weight": np.abs(g.vec("weight", steps + 1, 2.0)) if g.choice("weight_rows", [True, False]) else np.array(1.0 if g.exact.get("weight") == "int" else 0.5),
        "offset": g.vec("offset", 3, 0.5),
        "frame_target": g.vec("frame_target", 3, 1.0),
    }
    point = g.choice("point", ["tip", "com", "pole"])
    if point == "com":
        del x["offset"]

    def run(y):
        track = optim.Track(point, y["target"], y["weight"]) if point == "com" else optim.Track(point, y["target"], y["weight"], y["offset"])
        return optim.ilqr(vi, [0.0, 0.3], steps=steps, actuated=[0], tracks=[track], frame="tip", frame_target=y["frame_target"], frame_weight=0.5, max_iterations=2)

    return x, run


def _maximal_problem(g: Gen, steps: int) -> dict[str, Any]:
    x: dict[str, Any] = {
        "q0": g.vec("q0", 3, 0.5),
        "v0": g.vec("v0", 3, 0.5),
        "U_init": g.vec("U_init", (steps, 3), 1.0),
        "x_ref": g.vec("x_ref", (steps + 1, 6) if g.choice("x_ref_rows", [True, False]) else 6, 1.0),
        "u_min": np.full(3, -5.0),
        "u_max": np.full(3, 5.0),
    }
    with_weights(g, x, {"Q": 6, "R": 3, "QN": 6}, steps)
    return x


@case("optim.ilqr[maximal]", "q0 v0 U_init Q R QN x_ref u_min u_max", budget=6)
def _(g):
    mi = vidyn.MaximalIntegrator(F.model("cyl3"), 0.01)
    x = _maximal_problem(g, 2)
    return x, lambda y: optim.ilqr(mi, y["q0"], y["v0"], y["U_init"], x_ref=y["x_ref"], u_min=y["u_min"], u_max=y["u_max"], max_iterations=2, **weights(y, "Q R QN"))


@case("optim.fddp[maximal]", "q0 v0 X_init U_init Q R QN x_ref", budget=6)
def _(g):
    mi = vidyn.MaximalIntegrator(F.model("cyl3"), 0.01)
    x = _maximal_problem(g, 2)
    del x["u_min"], x["u_max"]
    x["X_init"] = g.vec("X_init", (3, g.choice("X_init", [6, 3])), 0.5)
    return x, lambda y: optim.fddp(mi, y["q0"], y["X_init"], y["U_init"], v0=y["v0"], x_ref=y["x_ref"], max_iterations=2, **weights(y, "Q R QN"))


# --- Model: locked joints, mimic joints ------------------------------------------------------


@case("Model.lock_joints", "q_ref", budget=10)
def _(g):
    m = g.model(("tree", "panda"))
    k = g.choice("locked", [1, 2])
    joints = list(m.joint_names[-k:]) if m.name != "mixed_tree" else [["hinge"], ["plane", "slider"]][k - 1]
    return {"q_ref": g.q("q_ref", m)}, lambda y: m.lock_joints(joints, y["q_ref"])


@case("Model.lift_configuration", "q")
def _(g):
    m = F.model("hand")
    return {"q": g.q("q", m)}, lambda y: m.lift_configuration(y["q"])


@case("Model.lift_tangent", "v")
def _(g):
    m = F.model("hand")
    return {"v": g.vec("v", m.nv)}, lambda y: m.lift_tangent(y["v"])


# --- MaximalIntegrator body contacts, vidyn.collisions --------------------------------------

#: The pairs of shape kinds a body contact implements.
CONTACT_PAIRS = [("sphere", "sphere"), ("sphere", "capsule"), ("capsule", "capsule"), ("sphere", "box"), ("box", "sphere")]


def _shape_size(g: Gen, name: str | None, kind: str) -> np.ndarray:
    """Sizes of a shape (sphere (r,), capsule (r, length), box (x, y, z)) between 0.06 and 0.25
    m, exact under ``name``'s layout when drawn for it (multiples of 1/64 otherwise; 1 m when it
    needs integers)."""
    count = {"sphere": 1, "capsule": 2, "box": 3}[kind]
    ex = g.exact.get(name) if name else "f32"
    if ex is None:
        return g.rng.uniform(0.06, 0.25, count)
    if ex == "int":
        return np.ones(count)
    return g.rng.integers(4, 17, count) / 64.0


def near(g: Gen, name: str, placement: np.ndarray) -> np.ndarray:
    """``placement`` moved to within 0.4 m of its frame's origin (to its origin when the layout
    drawn for ``name`` needs integers), so that the shape touches the other ball."""
    placement[:3, 3] = 0.0 if g.exact.get(name) == "int" else placement[:3, 3] / 8
    return placement + 0.0


def _balls_q0(apart: float = 0.4) -> np.ndarray:
    """The two balls at x = ∓``apart``, unturned."""
    return np.array([-apart, 0.05, 0.0, 0.0, 0.0, 0.0, 1.0, apart, -0.05, 0.0, 0.0, 0.0, 0.0, 1.0])


def _two_ball_contact(g: Gen, arrays: str) -> tuple[dict[str, Any], Callable[[dict[str, Any]], Any]]:
    """add_body_contact of two shapes on the balls, then a short rollout towards each other:
    ``arrays`` "placement" (the shapes' placements (4, 4) get the layouts, drawn as translations
    and exact rotations) or "size" (their sizes do)."""
    kind_a, kind_b = g.choice("kinds", CONTACT_PAIRS)
    x: dict[str, Any] = {}
    fixed: dict[str, Any] = {}
    for side, kind in (("a", kind_a), ("b", kind_b)):
        name = f"shape_{side}"
        if arrays == "size":
            x[name] = _shape_size(g, name, kind)
            fixed[side] = np.eye(4)
        else:
            fixed[side] = _shape_size(g, None, kind)
            x[name] = near(g, name, g.placement(name))
    friction = g.choice("friction", [0.0, 0.5])
    # shapes of 1 m (integer sizes) start apart
    apart = 2.5 if arrays == "size" and "int" in (g.exact.get("shape_a"), g.exact.get("shape_b")) else 0.4

    def run(y):
        mi = vidyn.MaximalIntegrator(F.model("two_balls"), 0.01)
        shapes = {side: (kind, y[f"shape_{side}"], fixed[side]) if arrays == "size" else (kind, fixed[side], y[f"shape_{side}"]) for side, kind in (("a", kind_a), ("b", kind_b))}
        k = mi.add_body_contact("ab", "a", shapes["a"], "b", shapes["b"], friction=friction)
        traj = mi.rollout(_balls_q0(apart), np.array([1.0, 0, 0, 0, 0, 0.5, -1.0, 0, 0, 0, 0, 0]), steps=3)
        return k, traj, mi.body_contact_distances(traj)

    return x, run


@case("MaximalIntegrator.add_body_contact", "shape_a shape_b", budget=8)
def _(g):
    return _two_ball_contact(g, "placement")


@case("MaximalIntegrator.add_body_contact(size)", "shape_a shape_b", budget=8)
def _(g):
    return _two_ball_contact(g, "size")


@case("collisions.collision_contacts", "placement", budget=6)
def _(g):
    x = {"placement": near(g, "placement", g.placement("placement"))}
    kinds = g.choice("kinds", CONTACT_PAIRS)
    sizes = [tuple(_shape_size(g, None, k)) for k in kinds]
    other = near(g, "", g.placement(None))

    def run(y):
        shapes = [vidyn.viz.Shape("a_link", kinds[0], sizes[0], y["placement"]), vidyn.viz.Shape("b_link", kinds[1], sizes[1], other)]
        mi = vidyn.MaximalIntegrator(F.model("two_balls"), 0.01)
        found = vidyn.collisions.collision_contacts(mi, shapes, friction=0.3)
        traj = mi.rollout(_balls_q0(), np.array([1.0, 0, 0, 0, 0, 0, -1.0, 0, 0, 0, 0, 0]), steps=2)
        return [(a.link, b.link) for a, b in found.pairs], mi.body_contact_distances(traj)

    return x, run


# --- vidyn.viz (the geometry, not the drawing) -----------------------------------------------


@case("viz.shape_placements", "q placement", budget=10)
def _(g):
    m = F.model("tree")
    x = {"q": g.q("q", m), "placement": g.placement("placement")}
    return x, lambda y: vidyn.viz.shape_placements(m, y["q"], [vidyn.viz.Shape("tool", "box", (0.1, 0.2, 0.3), y["placement"]), vidyn.viz.Shape("marker", "sphere", (0.1,), np.eye(4))])


@case("viz.wireframe", "placement", budget=10)
def _(g):
    kind = g.choice("kind", ["sphere", "capsule", "cylinder", "box"])
    size = {"sphere": (0.1,), "capsule": (0.1, 0.3), "cylinder": (0.1, 0.3), "box": (0.1, 0.2, 0.3)}[kind]
    return {"placement": g.placement("placement")}, lambda y: vidyn.viz.wireframe(vidyn.viz.Shape("link", kind, size, np.eye(4)), y["placement"], resolution=8)


@case("viz.Skeleton", "q", budget=10)
def _(g):
    m = g.model(("tree", "chain3", "panda"))
    sk = vidyn.viz.Skeleton(m)
    return {"q": g.q("q", m)}, lambda y: (sk.points(y["q"]), sk.segments(y["q"]))


# --- vidyn.mjcf (only where MuJoCo is installed) ---------------------------------------------

try:
    import mujoco as _mujoco
except ImportError:  # pragma: no cover - depends on the environment
    _mujoco = None

_MJ_XML = """<mujoco model="fuzz"><worldbody>
  <body name="root" pos="0 0 1"><freejoint/><geom size="0.1" mass="2"/>
    <body name="arm" pos="0 0 -0.3"><joint name="ball" type="ball"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.04"/>
      <body name="hand" pos="0 0 -0.3"><joint name="hinge" type="hinge" axis="0 1 0"/><geom size="0.05"/></body>
    </body>
  </body></worldbody></mujoco>"""

#: vidyn.mjcf's state maps: (function, its array arguments); qpos-like arguments are MuJoCo's
#: layout of a configuration, q vidyn's.
MJCF_CASES = [
    ("qpos_to_vidyn", "qpos"), ("qpos_from_vidyn", "q"), ("velocity_map", "qpos"), ("qvel_to_vidyn", "qpos qvel"),
    ("qvel_from_vidyn", "q v"), ("qacc_to_vidyn", "qpos qvel qacc"), ("qacc_from_vidyn", "q v a"),
    ("force_to_vidyn", "qpos qfrc"), ("force_from_vidyn", "q tau"),
]


def _mj_model():
    if "mjcf" not in F._MODELS:
        mj = _mujoco.MjModel.from_xml_string(_MJ_XML)
        F._MODELS["mjcf"] = (mj, vidyn.mjcf.from_mjmodel(mj))
    return F._MODELS["mjcf"]


def _mjcf_case(name: str, names: str):
    def make(g: Gen):
        mj, m = _mj_model()
        x: dict[str, Any] = {}
        for n in names.split():
            if n == "q":
                x[n] = g.q(n, m)
            elif n == "qpos":
                x[n] = vidyn.mjcf.qpos_from_vidyn(mj, g.q(n, m)) + 0.0
            else:
                x[n] = g.vec(n, m.nv)
        fn = getattr(vidyn.mjcf, name)
        order = names.split()
        return x, lambda y: fn(mj, *[y[n] for n in order])

    return make


if _mujoco is not None:
    for _name, _names in MJCF_CASES:
        case(f"mjcf.{_name}", _names, budget=10)(_mjcf_case(_name, _names))


# --- vidyn.distributed (on an in-process stand-in for a Dask client) -------------------------


class _InlineClient:
    """What vidyn.distributed uses of a ``distributed.Client``, running each task at once."""

    def nthreads(self) -> dict[str, int]:
        return {"inline": 2}

    def submit(self, fn, *args, pure=True, **kwargs):
        return fn(*args, **kwargs)

    def gather(self, futures):
        return list(futures)


@case("distributed.rollout", "q0 v0 u", budget=8, batch=True)
def _(g):
    m, vi = vi_of(g)
    rows = g.choice("B", [3, 1])
    x = {"q0": g.vec("q0", (rows, m.nv), 1.0), "v0": g.vec("v0", (rows, m.nv), 1.0), "u": g.vec("u", (rows, 2, m.nv), 1.0)}
    return x, lambda y: vidyn.distributed.rollout(_InlineClient(), vi, y["q0"], y["v0"], y["u"], shards=2, errors="return")


@case("distributed.linearize", "q p u", budget=8, batch=True)
def _(g):
    m, vi = vi_of(g)
    rows = g.choice("B", [3, 1])
    x = {"q": g.vec("q", (rows, 3, m.nv), 1.0), "p": g.vec("p", (rows, 3, m.nv), 1.0), "u": g.vec("u", (rows, 2, m.nv), 1.0)}
    return x, lambda y: vidyn.distributed.linearize(_InlineClient(), vi, y["q"], y["p"], y["u"], shards=2, errors="return")


@case("distributed.map_batch", "q v a", budget=8, batch=True)
def _(g):
    m, x = batch_inputs(g, "q v a")
    return x, lambda y: vidyn.distributed.map_batch(_InlineClient(), "rnea", m, y["q"], y["v"], y["a"], shards=2, errors="return")


# ==========================================================================================
# 1. Layouts: the test
# ==========================================================================================

CASE_IDS = sorted(CASES)

def _inputs(x: dict[str, Any], layouts: dict[str, str]) -> dict[str, Any]:
    """The inputs in their drawn layouts; a 0-d baseline is a Python float."""
    out: dict[str, Any] = {}
    for n, a in x.items():
        if a is None:
            out[n] = None
        elif isinstance(a, Formed):
            out[n] = F.LAYOUTS[layouts[n]](a.form(a.base))
        elif isinstance(a, np.ndarray):
            out[n] = F.LAYOUTS[layouts[n]](a)
        else:
            out[n] = a
    return out


def _baseline(x: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"_baseline": True}
    for n, a in x.items():
        if isinstance(a, Formed):
            a = a.base
        if isinstance(a, np.ndarray):
            out[n] = float(a) if a.ndim == 0 else np.ascontiguousarray(a, dtype=np.float64)
        else:
            out[n] = a
    return out


@pytest.mark.parametrize("name", CASE_IDS)
def test_layouts_give_bit_identical_results(name):
    """Each array argument in a drawn layout (C, Fortran, strided, negative strides, T of a T
    copy, byte-swapped, float32/int64 when exact, list, read-only, combinations) gives exactly
    the bits of the call with C-contiguous float64 inputs; the baseline is reproducible and,
    for single calls, finite."""
    c = CASES[name]

    @settings(max_examples=examples(c.budget), suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(data=st.data())
    def check(data):
        layouts = {n: data.draw(st.sampled_from(F.LAYOUT_NAMES), label=f"layout[{n}]") for n in c.arrays}
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        g = Gen(data.draw, np.random.default_rng(seed), {n: F.LAYOUTS[lay].needs for n, lay in layouts.items()})
        x, run = c.make(g)
        used = {n: layouts[n] for n, a in x.items() if isinstance(a, (np.ndarray, Formed)) and n in layouts}
        base_in = _baseline(x)
        expected = F.call(lambda: run(base_in))
        again = F.call(lambda: run(_baseline(x)))
        d = F.difference(again, expected)
        assert d is None, f"{name}: two calls with the same C-contiguous inputs differ (not deterministic): {d}"
        assert not (isinstance(expected, BaseException) and not isinstance(expected, Exception)), f"{name}: baseline raised {F._describe(expected)} (not an Exception)"
        if not c.batch and not isinstance(expected, BaseException):
            bad = F.nonfinite(expected)
            assert bad is None, f"{name}: silent non-finite result from finite inputs: {bad}"
        got = F.call(lambda: run(_inputs(x, layouts)))
        d = F.difference(got, expected)
        assert d is None, f"{name}: layouts {used} change the result: {d}"

    check()


def test_table_covers_the_required_functions():
    """The table covers the functions the contract lists (guards against a silently dropped row)."""
    required = [
        "rnea", "rnea[fext]", "aba", "aba[fext]", "rnea_derivatives", "aba_derivatives", "rnea_second_order",
        "rnea_second_order_contracted", "aba_second_order", "aba_second_order_contracted", "crba", "minverse",
        "gravity", "nonlinear_effects", "kinetic_energy", "potential_energy", "forward_kinematics",
        "frame_placement", "frame_placements", "jacobian", "Model.integrate", "Model.difference",
        "Model.with_gravity", "Model.random_configuration", "ModelBuilder.add_body", "ModelBuilder.add_frame",
        "ModelBuilder.set_gravity", "VariationalIntegrator()", "VariationalIntegrator.step",
        "VariationalIntegrator.rollout", "VariationalIntegrator.linearize", "VariationalIntegrator.linearize(order=2, lam)",
        "VariationalIntegrator.energy", "VariationalIntegrator.momentum", "VariationalIntegrator.velocity",
        "VariationalIntegrator.momentum_jacobian", "VariationalIntegrator.velocity_jacobian",
        "VariationalIntegrator.constraint_values", "MaximalIntegrator.rollout", "MaximalIntegrator.add_loop_closure",
        "MaximalIntegrator.add_contact", "MaximalIntegrator.linearize", "optim.lqr", "optim.dlqr",
        "optim.tracking_lqr", "optim.ilqr", "optim.projection",
        # floating bases (free-flyer, spherical, planar joints: steps on Lie groups)
        "VariationalIntegrator.step[floating]", "VariationalIntegrator.rollout[floating]",
        "VariationalIntegrator(body_wrenches)[floating]", "VariationalIntegrator.linearize[floating]",
        "VariationalIntegrator.linearize(order=2, lam)[floating]", "VariationalIntegrator.energy[floating]",
        "VariationalIntegrator.momentum[floating]", "VariationalIntegrator.velocity[floating]",
        "VariationalIntegrator.momentum_jacobian[floating]", "VariationalIntegrator.velocity_jacobian[floating]",
        # contacts and multipliers
        "point_contact", "frame_contact", "Perpendicular", "point_contact_forces", "ContactSchedule.holds",
        "ContactSchedule.touchdown_gaps", "ContactSchedule.forces", "VariationalIntegrator.multipliers",
        "VariationalIntegrator.multipliers(traj)", "VariationalIntegrator(schedule)",
        # optim: multiple shooting, floating bases, maximal coordinates, problems and tracked points
        "optim.fddp", "optim.fddp[floating]", "optim.fddp[maximal]", "optim.ilqr[floating]", "optim.ilqr[maximal]",
        "optim.ilqr(velocity)[floating]",
        "optim.tracking_lqr[floating]", "optim.closed_loop_rollout", "optim.closed_loop_rollout[floating]",
        "optim.project", "optim.project[floating]", "optim.projection[floating]", "optim.ilqr_linear",
        "optim.Problem", "optim.Track",
        # models, body contacts, collisions, viz geometry, distributed
        "Model.lock_joints", "Model.lift_configuration", "Model.lift_tangent", "MaximalIntegrator.add_body_contact",
        "MaximalIntegrator.add_body_contact(size)", "MaximalIntegrator.linearize_minimal", "collisions.collision_contacts",
        "viz.shape_placements", "viz.wireframe", "viz.Skeleton", "distributed.rollout", "distributed.linearize",
        "distributed.map_batch",
    ] + [f"spatial.{n}" for n in vidyn.spatial.__all__] + [f"batch.{n}" for n in vidyn.batch.__all__ if n not in ("BatchStatus", "Rollout", "get_num_threads", "set_num_threads")]
    if _mujoco is not None:
        required += [f"mjcf.{n}" for n, _ in MJCF_CASES]
    missing = [r for r in required if r not in CASES]
    assert not missing, f"no layout case for {missing}"


def _draw_first(strategy, label=None):
    """A ``draw`` for deterministic sweeps: the first option of a ``sampled_from``."""
    return strategy.wrapped_strategy.elements[0] if hasattr(strategy, "wrapped_strategy") else strategy.elements[0]


@pytest.mark.parametrize("name", CASE_IDS)
def test_each_layout_of_each_argument(name):
    """Deterministic sweep complementing the hypothesis test: every layout of every array
    argument alone (the others C-contiguous float64), first option of every other choice;
    all differences of one function are reported together."""
    c = CASES[name]
    problems = []
    for arg in c.arrays:
        for lay in F.LAYOUT_NAMES:
            g = Gen(_draw_first, np.random.default_rng(1), {arg: F.LAYOUTS[lay].needs})
            x, run = c.make(g)
            if arg not in x or x[arg] is None:
                continue
            expected = F.call(lambda: run(_baseline(x)))
            got = F.call(lambda: run(_inputs(x, {n: (lay if n == arg else "C") for n in x})))
            d = F.difference(got, expected)
            if d:
                problems.append(f"{arg} as {lay}: {d}")
    assert not problems, f"{name}: {len(problems)} layouts change the result:\n  " + "\n  ".join(problems)


# ==========================================================================================
# 3. Bad values in arrays
# ==========================================================================================

#: Non-finite values that are valid for an argument (documented).
ALLOWED_NONFINITE = {"u_min": (-np.inf,), "u_max": (np.inf,)}


def _name_pattern(arg: str) -> str:
    return r"(?i)(?<![A-Za-z0-9_])" + arg + r"(?![A-Za-z0-9_])"


@pytest.mark.parametrize("name", [n for n in CASE_IDS if not CASES[n].batch])
def test_nonfinite_array_entries_raise_input_error_naming_the_argument(name):
    """NaN, inf or -inf at a drawn position of any array argument of a single call raises
    InputError (also a ValueError) with a non-empty message that names the argument."""
    import re

    c = CASES[name]

    @settings(max_examples=examples(max(10, c.budget)), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def check(data):
        seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
        g = Gen(data.draw, np.random.default_rng(seed), {})
        x, run = c.make(g)
        clean = _baseline(x)
        problems = []
        for arg, a in clean.items():
            if not isinstance(a, np.ndarray) or a.size == 0:
                continue
            bad = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]), label=f"bad[{arg}]")
            if bad in ALLOWED_NONFINITE.get(arg, ()):
                bad = np.nan
            idx = data.draw(st.integers(0, a.size - 1), label=f"index[{arg}]")
            poisoned = dict(clean)
            p = a.copy()
            p.flat[idx] = bad
            poisoned[arg] = p
            r = F.call(lambda: run(poisoned))
            where = f"{arg}.flat[{idx}] = {bad}"
            if not isinstance(r, BaseException):
                problems.append(f"{where}: no exception" + (f" (result: {F.nonfinite(r)})" if F.nonfinite(r) else " (finite result)"))
            elif not isinstance(r, vidyn.InputError):
                problems.append(f"{where}: {F._describe(r)} instead of InputError")
            elif not str(r).strip():
                problems.append(f"{where}: InputError with an empty message")
            elif not re.search(_name_pattern(arg), str(r)):
                problems.append(f"{where}: message does not name {arg!r}: {str(r)!r}")
        assert not problems, f"{name}:\n  " + "\n  ".join(problems)

    check()


BATCH_NAN = {
    # name: (argument names, call(vi_or_model, inputs, errors))
    "rnea": ("q v a", lambda m, y, e: vidyn.batch.rnea(m, y["q"], y["v"], y["a"], errors=e)),
    "aba": ("q v tau", lambda m, y, e: vidyn.batch.aba(m, y["q"], y["v"], y["tau"], errors=e)),
    "crba": ("q", lambda m, y, e: vidyn.batch.crba(m, y["q"], errors=e)),
    "minverse": ("q", lambda m, y, e: vidyn.batch.minverse(m, y["q"], errors=e)),
    "center_of_mass": ("q", lambda m, y, e: vidyn.batch.center_of_mass(m, y["q"], errors=e)),
    "com_jacobian": ("q", lambda m, y, e: vidyn.batch.com_jacobian(m, y["q"], errors=e)),
    "centroidal_momentum": ("q v", lambda m, y, e: vidyn.batch.centroidal_momentum(m, y["q"], y["v"], errors=e)),
    "centroidal_momentum_matrix": ("q", lambda m, y, e: vidyn.batch.centroidal_momentum_matrix(m, y["q"], errors=e)),
    "centroidal_momentum_matrix_time_variation": ("q v", lambda m, y, e: vidyn.batch.centroidal_momentum_matrix_time_variation(m, y["q"], y["v"], errors=e)),
    "rnea_derivatives": ("q v a", lambda m, y, e: vidyn.batch.rnea_derivatives(m, y["q"], y["v"], y["a"], errors=e)),
    "aba_derivatives": ("q v tau", lambda m, y, e: vidyn.batch.aba_derivatives(m, y["q"], y["v"], y["tau"], errors=e)),
    "rnea_second_order": ("q v a", lambda m, y, e: vidyn.batch.rnea_second_order(m, y["q"], y["v"], y["a"], errors=e)),
    "rnea_second_order_contracted": ("q v a lam", lambda m, y, e: vidyn.batch.rnea_second_order_contracted(m, y["q"], y["v"], y["a"], y["lam"], errors=e)),
    "rollout": ("q0 v0 u", lambda vi, y, e: vidyn.batch.rollout(vi, y["q0"], y["v0"], y["u"], errors=e)),
    "rollout(p0)": ("q0 p0 u", lambda vi, y, e: vidyn.batch.rollout(vi, y["q0"], p0=y["p0"], u=y["u"], errors=e)),
    "linearize": ("q p u", lambda vi, y, e: vidyn.batch.linearize(vi, y["q"], y["p"], y["u"], errors=e)),
    "linearize_contracted": ("q p u lam", lambda vi, y, e: vidyn.batch.linearize_contracted(vi, y["q"], y["p"], y["u"], lam=y["lam"], errors=e)),
}


def _batch_nan_inputs(name: str, rows: int, rng: np.random.Generator):
    names = BATCH_NAN[name][0].split()
    if name.startswith(("rollout", "linearize")):
        m = F.model("chain3")
        obj = vidyn.VariationalIntegrator(m, 0.01)
        n, steps = m.nv, 2
        shapes = {"q0": (rows, n), "v0": (rows, n), "p0": (rows, n), "u": (rows, steps, n), "q": (rows, steps + 1, n), "p": (rows, steps + 1, n), "lam": (rows, steps, 2 * n)}
        return obj, {k: rng.uniform(-0.5, 0.5, shapes[k]) for k in names}
    m = F.model("tree")
    out = {}
    for k in names:
        out[k] = np.array([m.random_configuration(int(rng.integers(2**32))) for _ in range(rows)]) if k == "q" else rng.uniform(-1, 1, (rows, m.nv))
    return m, out


def _rows_of(result) -> list[np.ndarray]:
    """The float arrays of a batch result (rollout: q and p; not iterations)."""
    if isinstance(result, vidyn.batch.Rollout):
        return [result.q, result.p]
    if isinstance(result, tuple):
        return [r for r in result if isinstance(r, np.ndarray)]
    return [result]


@pytest.mark.parametrize("name", list(BATCH_NAN))
def test_batch_nonfinite_rows_fail_alone(name):
    """A NaN/inf in row 1 of any input of a batch call fails row 1 only: with
    errors="return" the status marks it (an InputError whose message is non-empty and names
    the row and the argument), its outputs are NaN and rows 0 and 2 keep the bits of the clean
    call; with errors="raise" the InputError is raised."""
    import re

    names, fn = BATCH_NAN[name]
    problems = []
    for arg in names.split():
        for bad in (np.nan, np.inf, -np.inf):
            obj, clean = _batch_nan_inputs(name, 3, np.random.default_rng(5))
            ref = F.call(lambda: fn(obj, clean, "return"))
            if isinstance(ref, BaseException):
                problems.append(f"clean call raised {F._describe(ref)}")
                break
            y = dict(clean)
            y[arg] = clean[arg].copy()
            y[arg][1].flat[0] = bad
            where = f"{arg}[1].flat[0] = {bad}"
            r = F.call(lambda: fn(obj, y, "return"))
            if isinstance(r, BaseException):
                problems.append(f"{where}: errors='return' raised {F._describe(r)}")
                continue
            result, status = r
            if status.ok.tolist() != [True, False, True]:
                problems.append(f"{where}: status.ok = {status.ok.tolist()}, expected [True, False, True]")
                continue
            err = status.errors[1]
            msg = str(err)
            if not isinstance(err, vidyn.InputError):
                problems.append(f"{where}: row error {F._describe(err)} is not an InputError")
            if not msg.strip() or "1" not in msg or not re.search(_name_pattern(arg), msg):
                problems.append(f"{where}: row message does not name row 1 and {arg!r}: {msg!r}")
            for got, exp in zip(_rows_of(result), _rows_of(ref[0])):
                for row in (0, 2):
                    d = F.difference(got[row], exp[row])
                    if d:
                        problems.append(f"{where}: clean row {row} changed: {d}")
                # dynamics: the failed row is NaN; linearize: the failed (trajectory, step) blocks
                # are (so some of row 1); rollouts keep the states before the failure
                if name.startswith("linearize") and not np.isnan(got[1]).any():
                    problems.append(f"{where}: no NaN block in failed trajectory 1")
                elif not name.startswith(("rollout", "linearize")) and not np.all(np.isnan(got[1])):
                    problems.append(f"{where}: failed row 1 is not all NaN")
            raised = F.call(lambda: fn(obj, y, "raise"))
            if not isinstance(raised, vidyn.InputError) or not str(raised).strip():
                problems.append(f"{where}: errors='raise' gave {F._describe(raised)}")
    assert not problems, f"batch.{name}:\n  " + "\n  ".join(problems)


# ==========================================================================================
# vidyn.batch out= buffers
# ==========================================================================================

OUT_CASES = {
    # name: (call(model_or_vi, inputs, out), inputs(rng), result shapes and dtypes)
    "rnea": lambda m, vi, x, out: vidyn.batch.rnea(m, x["q"], x["v"], x["a"], out=out),
    "crba": lambda m, vi, x, out: vidyn.batch.crba(m, x["q"], out=out),
    "centroidal_momentum_matrix": lambda m, vi, x, out: vidyn.batch.centroidal_momentum_matrix(m, x["q"], out=out),
    "rnea_derivatives": lambda m, vi, x, out: vidyn.batch.rnea_derivatives(m, x["q"], x["v"], x["a"], out=out),
    "rnea_second_order_contracted": lambda m, vi, x, out: vidyn.batch.rnea_second_order_contracted(m, x["q"], x["v"], x["a"], x["v"], out=out),
    "rollout": lambda m, vi, x, out: vidyn.batch.rollout(vi, x["q"], x["v"], x["u"], out=out),
    "linearize": lambda m, vi, x, out: vidyn.batch.linearize(vi, x["qs"], x["ps"], x["u"], out=out),
}


def _out_like(result) -> list[np.ndarray]:
    if isinstance(result, vidyn.batch.Rollout):
        return [result.q, result.p, result.iterations]
    return list(result) if isinstance(result, tuple) else [result]


OUT_VARIANTS = {
    # name: (make buffer from the result array, valid?)
    "C": (lambda r: np.zeros_like(r, order="C"), True),
    "None in the tuple": (None, True),
    "fortran": (lambda r: np.zeros_like(r, order="F"), False),
    "strided": (lambda r: np.zeros((*r.shape[:-1], 2 * r.shape[-1]), r.dtype)[..., ::2], False),
    "negative": (lambda r: np.zeros_like(r)[::-1], False),
    "float32": (lambda r: np.zeros(r.shape, np.float32 if r.dtype.kind == "f" else np.int32), False),
    "byteswapped": (lambda r: np.zeros(r.shape, r.dtype.newbyteorder()), False),
    "readonly": (lambda r: F._readonly(np.zeros_like(r)), False),
    "wrong shape": (lambda r: np.zeros((r.shape[0] + 1, *r.shape[1:]), r.dtype), False),
    "list": (lambda r: np.zeros_like(r).tolist(), False),
}


@pytest.mark.parametrize("name", list(OUT_CASES))
def test_batch_out_buffers(name):
    """``out=`` fills exactly the given buffers: a C-contiguous writeable buffer of the
    result's dtype and shape gives the bits of the call without ``out=`` (the same object is
    returned); any other buffer (Fortran, strided, reversed, other dtype, byte-swapped,
    read-only, wrong shape, list, or an input itself) raises InputError, never a crash."""
    m = F.model("chain3")
    vi = vidyn.VariationalIntegrator(m, 0.01)
    rng = np.random.default_rng(3)
    rows = 3
    x = {
        "q": rng.uniform(-1, 1, (rows, m.nq)), "v": rng.uniform(-1, 1, (rows, m.nv)), "a": rng.uniform(-1, 1, (rows, m.nv)),
        "u": rng.uniform(-1, 1, (rows, 2, m.nv)), "qs": rng.uniform(-1, 1, (rows, 3, m.nv)), "ps": rng.uniform(-1, 1, (rows, 3, m.nv)),
    }
    fn = OUT_CASES[name]
    ref = fn(m, vi, x, None)
    arrays = _out_like(ref)
    problems = []
    for variant, (make, valid) in OUT_VARIANTS.items():
        for k in range(len(arrays)):
            if make is None:
                if len(arrays) == 1:
                    continue
                bufs = [None] * len(arrays)
                bufs[k] = np.zeros_like(arrays[k])
            else:
                bufs = [np.zeros_like(a) for a in arrays]
                bufs[k] = make(arrays[k])
            out = bufs[0] if len(arrays) == 1 else tuple(bufs)
            r = F.call(lambda: fn(m, vi, x, out))
            where = f"out[{k}] {variant}"
            if valid:
                if isinstance(r, BaseException):
                    problems.append(f"{where}: raised {F._describe(r)}")
                    continue
                d = F.difference(_out_like(r), arrays)
                if d:
                    problems.append(f"{where}: result differs from the call without out=: {d}")
                for got, buf in zip(_out_like(r), bufs):
                    if buf is not None and got is not buf:
                        problems.append(f"{where}: the returned array is not the buffer passed")
            elif not isinstance(r, vidyn.InputError) or not str(r).strip():
                problems.append(f"{where}: {F._describe(r) if isinstance(r, BaseException) else 'accepted'} instead of InputError")
    # an output that is an input (overlap)
    if name in ("rnea",):
        r = F.call(lambda: fn(m, vi, x, x["v"]))
        if not isinstance(r, vidyn.InputError):
            problems.append(f"out = the input v: {F._describe(r) if isinstance(r, BaseException) else 'accepted'} instead of InputError")
    assert not problems, f"batch.{name}:\n  " + "\n  ".join(problems)


# ==========================================================================================
# 2. Hostile scalars and sizes, in a child interpreter
# ==========================================================================================

INT_VALUES = [
    "0", "-1", "1", "10**12", "2**62", "2**63", "2**64-1", "2**64", "-2**63",
    "float('nan')", "float('inf')", "float('-inf')", "1.5", "True", "None", "'3'",
    "np.int64(-1)", "np.uint64(2**64-1)", "np.float64(2.0)",
]
FLOAT_VALUES = [
    "0.0", "-0.0", "-1.0", "1e-300", "1e300", "float('nan')", "float('inf')", "float('-inf')",
    "10**12", "2**64-1", "2**1024", "True", "None", "'0.1'", "np.float32('nan')",
]
NAME_VALUES = ["''", "'nope'", "None", "3", "'world'", "b'tip'", "'tip\\x00'", "['tip']"]
FRAME_VALUES = INT_VALUES + ["'nope'", "''", "b'tip'"]
VALUES = {"int": INT_VALUES, "float": FLOAT_VALUES, "name": NAME_VALUES, "frame": FRAME_VALUES, "fixed": ["<edge>"]}

_CHAIN = "m = F.model('chain3'); q = np.zeros(m.nq); v = np.zeros(m.nv)\n"
_VI = "m = F.model('chain3'); vi = vidyn.VariationalIntegrator(m, 0.01); n = vi.n; q0 = np.full(n, 0.2)\n"
_MI = "m = F.model('cyl3'); mi = vidyn.MaximalIntegrator(m, 0.01)\n"
_CP = "vi = vidyn.VariationalIntegrator(F.model('cartpole'), 0.05)\n"
_B2 = "b = vidyn.ModelBuilder('h'); r = b.add_body(None, 'a', 'revolute', mass=1.0, inertia=np.eye(3), axis=[0, 1, 0])\n"


@dataclass(frozen=True)
class Hostile:
    """A call with one hostile argument: ``code`` sets ``result``, ``{v}`` is the value."""

    function: str
    argument: str
    kind: str  # int | float | name | frame | fixed
    code: str
    #: float options that must be finite: ±inf must be rejected too (NaN always must)
    finite: bool = False

    @property
    def id(self) -> str:
        return f"{self.function}:{self.argument}"


HOSTILE = [
    # built-in models
    Hostile("pendulum_chain", "n", "int", "result = vidyn.models.pendulum_chain({v})"),
    Hostile("binary_tree", "depth", "int", "result = vidyn.models.binary_tree({v})"),
    Hostile("random_tree", "n", "int", "result = vidyn.models.random_tree({v}, 0)"),
    Hostile("random_tree", "seed", "int", "result = vidyn.models.random_tree(3, {v})"),
    Hostile("example_robot", "name", "name", "result = vidyn.models.example_robot({v})"),
    # Model
    Hostile("Model.random_configuration", "rng", "int", "m = F.model('tree')\nresult = m.random_configuration({v})"),
    Hostile("Model.frame_index", "name", "name", "result = F.model('chain3').frame_index({v})"),
    Hostile("Model.joint_index", "name", "name", "result = F.model('chain3').joint_index({v})"),
    Hostile("frame_placement", "frame", "frame", _CHAIN + "result = vidyn.frame_placement(m, q, {v})"),
    Hostile("jacobian", "frame", "frame", _CHAIN + "result = vidyn.jacobian(m, q, {v})"),
    Hostile("jacobian", "reference", "name", _CHAIN + "result = vidyn.jacobian(m, q, 'tip', {v})"),
    # ModelBuilder
    Hostile("ModelBuilder.add_body", "parent", "int", _B2 + "b.add_body({v}, 'b', 'revolute', mass=1.0, inertia=np.eye(3), axis=[0, 1, 0])\nresult = b.build()"),
    Hostile("ModelBuilder.add_body", "mass", "float", "b = vidyn.ModelBuilder('h')\nb.add_body(None, 'a', 'revolute', mass={v}, inertia=np.eye(3), axis=[0, 1, 0])\nm = b.build()\nresult = vidyn.aba(m, [0.1], [0.0], [0.0])", finite=True),
    Hostile("ModelBuilder.add_body", "joint", "name", "b = vidyn.ModelBuilder('h')\nresult = b.add_body(None, 'a', {v}, mass=1.0, inertia=np.eye(3))"),
    Hostile("ModelBuilder.add_frame", "parent", "int", _B2 + "b.add_frame('f', {v})\nresult = b.build()"),
    Hostile("ModelBuilder", "name", "name", "b = vidyn.ModelBuilder({v})\nb.add_body(None, 'a', 'revolute', mass=1.0, inertia=np.eye(3), axis=[0, 1, 0])\nresult = b.build()"),
    # VariationalIntegrator
    Hostile("VariationalIntegrator", "dt", "float", "m = F.model('chain3')\nvi = vidyn.VariationalIntegrator(m, {v})\nresult = vi.step(np.full(3, 0.2), np.zeros(3))", finite=True),
    Hostile("VariationalIntegrator", "s", "int", "m = F.model('chain3')\nvi = vidyn.VariationalIntegrator(m, 0.01, scheme='lobatto', s={v})\nresult = vi.step(np.full(3, 0.2), np.zeros(3))"),
    Hostile("VariationalIntegrator", "tolerance", "float", "m = F.model('chain3')\nvi = vidyn.VariationalIntegrator(m, 0.01, tolerance={v})\nresult = vi.step(np.full(3, 0.2), np.zeros(3))"),
    Hostile("VariationalIntegrator", "max_iterations", "int", "m = F.model('chain3')\nvi = vidyn.VariationalIntegrator(m, 0.01, max_iterations={v})\nresult = vi.step(np.full(3, 0.2), np.zeros(3))"),
    Hostile("VariationalIntegrator", "scheme", "name", "m = F.model('chain3')\nvi = vidyn.VariationalIntegrator(m, 0.01, scheme={v})\nresult = vi.step(np.full(3, 0.2), np.zeros(3))"),
    Hostile("VariationalIntegrator", "kinematic", "name", "m = F.model('chain3')\nvi = vidyn.VariationalIntegrator(m, 0.01, kinematic=[{v}])\nresult = vi.step(np.full(3, 0.2), np.zeros(3))"),
    Hostile("VariationalIntegrator.rollout", "steps", "int", _VI + "result = vi.rollout(q0, steps={v})"),
    Hostile("VariationalIntegrator.rollout", "steps (with u)", "int", _VI + "result = vi.rollout(q0, u=np.zeros((2, n)), steps={v})"),
    Hostile("VariationalIntegrator.linearize", "order", "int", _VI + "t = vi.rollout(q0, steps=2)\nresult = vi.linearize(t, order={v})"),
    Hostile("VariationalIntegrator.linearize", "order (with lam)", "int", _VI + "t = vi.rollout(q0, steps=2)\nresult = vi.linearize(t, order={v}, lam=np.zeros((2, 2 * n)))"),
    Hostile("Distance", "length", "float", "m = F.model('chain3')\nc = vidyn.Distance(None, [0.0, 0.0, 0.0], 'tip', [0.0, 0.0, 0.0], {v})\nvi = vidyn.VariationalIntegrator(m, 0.01, scheme='midpoint', constraints=[c])\nresult = vi.constraint_values(np.full(3, 0.2))", finite=True),
    # sizes: empty trajectories, batches and horizons
    Hostile("VariationalIntegrator.rollout", "u (N=0)", "fixed", _VI + "result = vi.rollout(q0, u=np.zeros((0, n)))"),
    Hostile("VariationalIntegrator.linearize", "q, p, u (N=0)", "fixed", _VI + "result = vi.linearize(np.zeros((1, n)), np.zeros((1, n)), np.zeros((0, n)))"),
    Hostile("VariationalIntegrator.linearize", "lam (N=0)", "fixed", _VI + "result = vi.linearize(np.zeros((1, n)), np.zeros((1, n)), np.zeros((0, n)), order=2, lam=np.zeros((0, 2 * n)))"),
    Hostile("VariationalIntegrator.energy", "rows (N=0)", "fixed", _VI + "result = vi.energy(np.zeros((0, n)), np.zeros((0, n)))"),
    Hostile("VariationalIntegrator.energy", "3-d rows", "fixed", _VI + "result = vi.energy(np.zeros((2, 2, n)), np.zeros((2, 2, n)))"),
    Hostile("batch.rnea", "B=0", "fixed", _CHAIN + "result = vidyn.batch.rnea(m, np.zeros((0, m.nq)), np.zeros((0, m.nv)), np.zeros((0, m.nv)))"),
    Hostile("batch.rollout", "B=0", "fixed", _VI + "result = vidyn.batch.rollout(vi, np.zeros((0, n)), steps=3)"),
    Hostile("batch.linearize", "N=0", "fixed", _VI + "result = vidyn.batch.linearize(vi, np.zeros((2, 1, n)), np.zeros((2, 1, n)), np.zeros((2, 0, n)))"),
    Hostile("optim.lqr", "N=0", "fixed", "result = vidyn.optim.lqr(np.zeros((0, 2, 2)), np.zeros((0, 2, 1)), 1.0, 1.0, 1.0)"),
    Hostile("optim.lqr", "nx=0", "fixed", "result = vidyn.optim.lqr(np.zeros((2, 0, 0)), np.zeros((2, 0, 1)), 1.0, 1.0, 1.0)"),
    Hostile("optim.dlqr", "nu=0", "fixed", "result = vidyn.optim.dlqr(np.eye(2) * 0.5, np.zeros((2, 0)), 1.0, 1.0)"),
    Hostile("optim.ilqr", "U_init (N=0)", "fixed", _CP + "result = vidyn.optim.ilqr(vi, [0.0, 0.3], U_init=np.zeros((0, 1)), actuated=[0], max_iterations=2)"),
    Hostile("MaximalIntegrator.rollout", "u (N=0)", "fixed", _MI + "result = mi.rollout(np.zeros(3), np.zeros(3), np.zeros((0, 3)))"),
    # batch
    Hostile("batch.rollout", "steps", "int", _VI + "result = vidyn.batch.rollout(vi, np.zeros((2, n)), steps={v})"),
    Hostile("batch.rnea", "errors", "name", _CHAIN + "result = vidyn.batch.rnea(m, np.zeros((2, m.nq)), np.zeros((2, m.nv)), np.zeros((2, m.nv)), errors={v})"),
    # MaximalIntegrator
    Hostile("MaximalIntegrator", "dt", "float", "mi = vidyn.MaximalIntegrator(F.model('cyl3'), {v})\nresult = mi.rollout(np.full(3, 0.2), np.zeros(3), steps=1)", finite=True),
    Hostile("MaximalIntegrator", "tolerance", "float", "mi = vidyn.MaximalIntegrator(F.model('cyl3'), 0.01, tolerance={v})\nresult = mi.rollout(np.full(3, 0.2), np.zeros(3), steps=1)"),
    Hostile("MaximalIntegrator", "max_iterations", "int", "mi = vidyn.MaximalIntegrator(F.model('cyl3'), 0.01, max_iterations={v})\nresult = mi.rollout(np.full(3, 0.2), np.zeros(3), steps=1)"),
    Hostile("MaximalIntegrator.rollout", "steps", "int", _MI + "result = mi.rollout(np.full(3, 0.2), np.zeros(3), steps={v})"),
    Hostile("MaximalIntegrator.add_loop_closure", "parent", "frame", _MI + "result = mi.add_loop_closure('c', 'spherical', {v}, 'joint3')"),
    Hostile("MaximalIntegrator.add_loop_closure", "child", "frame", _MI + "result = mi.add_loop_closure('c', 'spherical', None, {v})"),
    Hostile("MaximalIntegrator.add_loop_closure", "kind", "name", _MI + "result = mi.add_loop_closure('c', {v}, None, 'joint3', axis=[0, 1, 0])"),
    Hostile("MaximalIntegrator.add_contact", "body", "frame", _MI + "result = mi.add_contact('c', {v}, [0.0, 0.0, -1.0])"),
    Hostile("MaximalIntegrator.add_contact", "radius", "float", _MI + "mi.add_contact('c', 'joint3', [0.0, 0.0, -1.0], radius={v}, offset=-3.0)\nresult = mi.rollout(np.zeros(3), np.zeros(3), steps=1)", finite=True),
    Hostile("MaximalIntegrator.add_contact", "offset", "float", _MI + "mi.add_contact('c', 'joint3', [0.0, 0.0, -1.0], offset={v})\nresult = mi.rollout(np.zeros(3), np.zeros(3), steps=1)", finite=True),
    Hostile("MaximalIntegrator.add_contact", "friction", "float", _MI + "mi.add_contact('c', 'joint3', [0.0, 0.0, -1.0], friction={v}, offset=-3.0)\nresult = mi.rollout(np.zeros(3), np.zeros(3), steps=1)", finite=True),
    Hostile("MaximalIntegrator.add_joint_limit", "joint", "frame", _MI + "result = mi.add_joint_limit({v}, -0.5, 0.5)"),
    Hostile("MaximalIntegrator.add_joint_limit", "lower", "float", _MI + "mi.add_joint_limit('joint1', {v}, 0.5)\nresult = mi.rollout(np.zeros(3), np.zeros(3), steps=1)"),
    Hostile("MaximalIntegrator.add_joint_limit", "upper", "float", _MI + "mi.add_joint_limit('joint1', -0.5, {v})\nresult = mi.rollout(np.zeros(3), np.zeros(3), steps=1)"),
    # optim
    Hostile("optim.lqr", "Q (scalar)", "float", "result = vidyn.optim.lqr(np.tile(np.eye(2), (3, 1, 1)), np.ones((3, 2, 1)), {v}, 1.0, 1.0)"),
    Hostile("optim.dlqr", "tolerance", "float", "result = vidyn.optim.dlqr(np.eye(2) * 0.5, np.ones((2, 1)), 1.0, 1.0, tolerance={v}, max_iterations=1000)"),
    Hostile("optim.dlqr", "max_iterations", "int", "result = vidyn.optim.dlqr(np.eye(2) * 0.5, np.ones((2, 1)), 1.0, 1.0, max_iterations={v})"),
    Hostile("optim.ilqr", "steps", "int", _CP + "result = vidyn.optim.ilqr(vi, [0.0, 0.3], steps={v}, actuated=[0], max_iterations=2)"),
    Hostile("optim.ilqr", "max_iterations", "int", _CP + "result = vidyn.optim.ilqr(vi, [0.0, 0.3], steps=3, actuated=[0], max_iterations={v})"),
    Hostile("optim.ilqr", "tolerance", "float", _CP + "result = vidyn.optim.ilqr(vi, [0.0, 0.3], steps=3, actuated=[0], max_iterations=5, tolerance={v})"),
    Hostile("optim.ilqr", "mu_init", "float", _CP + "result = vidyn.optim.ilqr(vi, [0.0, 0.3], steps=3, actuated=[0], max_iterations=5, mu_init={v})"),
    Hostile("optim.ilqr", "actuated", "int", _CP + "result = vidyn.optim.ilqr(vi, [0.0, 0.3], steps=3, actuated=[{v}], max_iterations=2)"),
    Hostile("optim.ilqr", "frame_weight", "float", _CP + "result = vidyn.optim.ilqr(vi, [0.0, 0.3], steps=3, actuated=[0], max_iterations=2, frame='tip', frame_target=[0.0, 0.0, 1.0], frame_weight={v})", finite=True),
    Hostile("optim.projection", "max_iterations", "int", _CP + "result = vidyn.optim.projection(vi, [0.0, 0.3], steps=3, actuated=[0], max_iterations={v})"),
    Hostile("optim.projection", "newton_after", "int", _CP + "result = vidyn.optim.projection(vi, [0.0, 0.3], steps=3, actuated=[0], max_iterations=3, newton_after={v})"),
    Hostile("optim.projection", "tolerance", "float", _CP + "result = vidyn.optim.projection(vi, [0.0, 0.3], steps=3, actuated=[0], max_iterations=3, tolerance={v})"),
    Hostile("optim.closed_loop_rollout", "steps", "int", _CP + "result = vidyn.optim.closed_loop_rollout(vi, [0.0, 0.3], x_ref=np.zeros(4), K=np.zeros((1, 4)), actuated=[0], steps={v})"),
    Hostile("optim.ilqr_linear", "max_iterations", "int", "result = vidyn.optim.ilqr_linear(np.eye(2), np.ones((2, 1)), np.ones(2), np.zeros((3, 1)), QN=1.0, max_iterations={v})"),
    # contacts
    Hostile("point_contact_forces", "dt", "float", "result = vidyn.point_contact_forces(np.ones((2, 6)), {v}, 3)", finite=True),
    Hostile("point_contact_forces", "first", "int", "result = vidyn.point_contact_forces(np.ones((2, 6)), 0.01, {v})"),
]

#: Exception classes a hostile argument may raise (besides vidyn.VidynError and subclasses).
ALLOWED = ("builtins.TypeError", "builtins.ValueError", "builtins.OverflowError", "builtins.MemoryError", "builtins.KeyError", "builtins.IndexError", "builtins.NotImplementedError")
#: What a valid but absurd value may lead to (a step that does not converge, a singular pivot):
#: the failure of the computation, not of the argument, so it need not name the argument.
PHYSICS = ("vidyn.ConvergenceError", "vidyn.ModelError")
NONFINITE = ("float('nan')", "float('inf')", "float('-inf')", "np.float32('nan')")


def judge(h: Hostile, value: str, r: dict[str, Any]) -> str | None:
    """None when outcome ``r`` of ``h`` with ``value`` meets the contract, else why not."""
    s = r["status"]
    if s in ("crash", "hang", "threads"):
        return F.outcome_str(r)
    if s == "exception":
        if not r["is_exception"]:
            return f"{F.outcome_str(r)} (a BaseException, not an Exception)"
        if not r["msg"].strip():
            return f"{r['cls']} with an empty message"
        if not r["is_vidyn"] and not any(c in ALLOWED for c in r["mro"]):
            return f"unexpected exception class {F.outcome_str(r)}"
        if "internal error" in r["msg"]:
            return f"a Rust panic caught as {F.outcome_str(r)}"
        if h.kind in ("int", "float") and not any(c in r["mro"] for c in PHYSICS):
            name = h.argument.split(" ")[0]
            if not any(name in text for text in [r["msg"], *r.get("notes", [])]):
                return f"{F.outcome_str(r)} names neither in its message nor in a note the argument {name}"
        return None
    if value in ("float('nan')", "np.float32('nan')") and h.kind == "float":
        return f"NaN accepted silently: {F.outcome_str(r)}"
    if h.finite and value in NONFINITE:
        return f"{value} accepted silently: {F.outcome_str(r)}"
    if r["result"].get("nan") and value not in NONFINITE:
        return "silent NaN in the result of a call with finite inputs"
    return None


@pytest.fixture(scope="module")
def worker():
    w = F.Worker()
    yield w
    w.close()


HOSTILE_IDS = sorted({h.function for h in HOSTILE})


@pytest.mark.parametrize("function", HOSTILE_IDS)
def test_hostile_scalars_and_sizes(function, worker):
    """Every hostile value of every scalar argument of ``function`` (one at a time, the others
    valid) gives a result or an expected Exception with a message, in a child interpreter:
    no crash, no PanicException, no hang; NaN float options (and ±inf where a finite value is
    required) are rejected, and finite inputs never give a silent NaN/inf."""
    problems, seen = [], []
    for h in [h for h in HOSTILE if h.function == function]:
        for value in VALUES[h.kind]:
            code = h.code.replace("{v}", value)
            r = worker.run(code, timeout=TIMEOUT)
            seen.append(f"{h.argument}={value}: {F.outcome_str(r)}")
            why = judge(h, value, r)
            if why:
                problems.append(f"{h.argument}={value}: {why}")
    print(f"\n{function}:\n  " + "\n  ".join(seen))
    assert not problems, f"{function}: {len(problems)} hostile values break the contract:\n  " + "\n  ".join(problems)


_HOSTILE_INT = st.one_of(
    st.sampled_from([0, -1, 1, 2**31, 2**32, 10**12, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63)]),
    st.integers(-(2**70), 2**70),
)
_HOSTILE_FLOAT = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 5e-324, 1.7976931348623157e308]))


@pytest.mark.parametrize("function", HOSTILE_IDS)
def test_random_hostile_values(function, worker):
    """Random integers in ±2**70 and random floats (NaN, ±inf, subnormals, extremes) for one
    argument of ``function``, through the child interpreter: no crash, PanicException or hang.
    (A handful of examples under ``ci``; many more with ``VIDYN_FUZZ_LONG=1``.)"""
    rows = [h for h in HOSTILE if h.function == function and h.kind in ("int", "float", "frame")]
    if not rows:
        pytest.skip("no numeric scalar argument")

    @settings(max_examples=examples(3), suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def check(data):
        h = data.draw(st.sampled_from(rows), label="argument")
        x = data.draw(_HOSTILE_FLOAT if h.kind == "float" else _HOSTILE_INT, label="value")
        value = f"float('{x}')" if isinstance(x, float) and not np.isfinite(x) else repr(x)
        r = worker.run(h.code.replace("{v}", value), timeout=TIMEOUT)
        why = judge(h, value, r)
        assert why is None, f"{h.id}={value}: {why}"

    check()


THREAD_VALUES = ["0", "1", "-1", "10**6", "2**31", "2**62", "2**63", "2**64-1", "float('nan')", "1.5", "True", "None"]


@pytest.mark.parametrize("value", THREAD_VALUES)
def test_set_num_threads_hostile(value):
    """``set_num_threads(value)`` in a fresh child, then a 64-row batch: a result or an
    expected exception, no crash or hang, and the process never holds more than 256 threads
    (a huge count must not spawn a thread per unit). Reports get_num_threads()."""
    w = F.Worker(env={"VIDYN_NUM_THREADS": ""})
    # 20 s is plenty: the batch takes milliseconds; a thread per unit is caught within 20 ms
    code = (
        "import re\n"
        f"vidyn.set_num_threads({value})\n"
        "k = vidyn.get_num_threads()\n"
        "m = F.model('chain3')\n"
        "vidyn.batch.rnea(m, np.zeros((64, 3)), np.zeros((64, 3)), np.zeros((64, 3)))\n"
        "threads = int(re.search(r'Threads:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "assert threads <= 256, f'{threads} threads in the process after set_num_threads({k})'\n"
        "result = (k, threads)\n"
    )
    try:
        r = w.run(code, timeout=min(TIMEOUT, 20.0), max_threads=256)
    finally:
        w.close()
    print(f"\nset_num_threads({value}): {F.outcome_str(r)} {r.get('result', '')}")
    h = Hostile("set_num_threads", "k", "int", "")
    if r["status"] == "exception" and r["cls"] == "builtins.AssertionError":
        pytest.fail(f"set_num_threads({value}): {r['msg']}")
    why = judge(h, value, r)
    assert why is None, f"set_num_threads({value}): {why}"
