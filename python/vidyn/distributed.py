"""Shard a :mod:`vidyn.batch` computation across a Dask distributed cluster and reassemble it.

Requires the ``distributed`` package (``pip install distributed``); this module itself does
not import it: pass any ``distributed.Client``::

    from distributed import Client, LocalCluster
    import vidyn.distributed as vdd

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    vi = vidyn.VariationalIntegrator(vidyn.models.pendulum_chain(12), dt=0.01)
    roll = vdd.rollout(client, vi, q0, v0, u)              # B trajectories over the cluster
    A, B = vdd.linearize(client, vi, roll)

How it works
    The batch axis (axis 0 of every array argument) is cut into ``shards`` contiguous pieces
    (default: the cluster's total number of worker threads); each piece is one Dask task
    that runs the :mod:`vidyn.batch` function on its worker (where the batch engine uses
    ``worker_threads`` threads, default: vidyn's default there), and the pieces are
    concatenated in order. Rows are independent, so the result is bit-for-bit the local
    ``vidyn.batch`` result. Per-row errors keep their global row index; ``errors`` works as
    in :mod:`vidyn.batch`.

What travels
    The ``Model`` or ``VariationalIntegrator`` itself: they pickle (their defining data,
    versioned and checksummed), so any model -- from a URDF, an MJCF file, a builder or
    ``ModelBuilder`` -- and any integrator, with constraints, schedules, kinematic joints and
    body wrenches, reaches the workers as it is.

    The recipes of earlier versions (:class:`ModelRecipe`, :class:`IntegratorRecipe`) still
    work but are deprecated: making one warns with a ``DeprecationWarning``; pass the object
    instead.
"""

from __future__ import annotations

import functools
import importlib
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal, NamedTuple, Union, cast

import numpy as np
import numpy.typing as npt

import vidyn
from vidyn import batch as _batch
from vidyn._core import InputError, Model, VariationalIntegrator

__all__ = ["IntegratorRecipe", "ModelRecipe", "map_batch", "rollout", "linearize"]

Array = npt.NDArray[np.float64]


def _deprecated(name: str, replacement: str) -> None:
    warnings.warn(f"vidyn.distributed.{name} is deprecated: {replacement} pickles, pass it to map_batch, rollout and linearize instead", DeprecationWarning, stacklevel=4)


@dataclass(frozen=True)
class ModelRecipe:
    """How to build a :class:`vidyn.Model` on a worker (hashable, picklable). Deprecated: a
    ``Model`` pickles, pass it instead.

    Make one with :meth:`from_urdf`, :meth:`from_urdf_string`, :meth:`builder` or
    :meth:`callable`; :meth:`build` builds the model (cached per process).
    """

    kind: Literal["urdf", "builder", "callable"]
    #: URDF document, builder name in ``vidyn.models``, or ``"module:function"``.
    source: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    floating_base: bool = False

    def __post_init__(self) -> None:
        _deprecated("ModelRecipe", "the vidyn.Model itself")

    @classmethod
    def from_urdf(cls, path: str | os.PathLike[str], floating_base: bool = False) -> ModelRecipe:
        """A URDF file, read here (workers need not see the file)."""
        with open(path, encoding="utf-8") as f:
            return cls("urdf", f.read(), floating_base=floating_base)

    @classmethod
    def from_urdf_string(cls, xml: str, floating_base: bool = False) -> ModelRecipe:
        """A URDF document given as a string."""
        return cls("urdf", xml, floating_base=floating_base)

    @classmethod
    def builder(cls, name: str, *args: Any, **kwargs: Any) -> ModelRecipe:
        """A builder function of :mod:`vidyn.models` (``pendulum_chain``, ``random_tree``,
        ``example_robot`` …) called with ``args`` and ``kwargs`` (hashable values)."""
        if name not in vidyn.models.__all__ or not callable(getattr(vidyn.models, name)):
            raise InputError(f"unknown builder {name!r}; known: {', '.join(n for n in vidyn.models.__all__ if callable(getattr(vidyn.models, n)))}")
        return cls("builder", name, tuple(args), tuple(sorted(kwargs.items())))

    @classmethod
    def callable(cls, function: Callable[..., Model], *args: Any, **kwargs: Any) -> ModelRecipe:
        """A module-level function returning a Model, importable on the workers (named by its
        module and qualified name), called with ``args`` and ``kwargs``."""
        module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
        if not module or "<" in name:
            raise InputError("ModelRecipe.callable needs a module-level function importable on the workers")
        return cls("callable", f"{module}:{name}", tuple(args), tuple(sorted(kwargs.items())))

    def build(self) -> Model:
        """The model (built once per process and recipe)."""
        return _build_model(self)


@functools.lru_cache(maxsize=32)
def _build_model(recipe: ModelRecipe) -> Model:
    kwargs = dict(recipe.kwargs)
    if recipe.kind == "urdf":
        return Model.from_urdf_string(recipe.source, floating_base=recipe.floating_base)
    if recipe.kind == "builder":
        return cast(Model, getattr(vidyn.models, recipe.source)(*recipe.args, **kwargs))
    if recipe.kind == "callable":
        module, _, name = recipe.source.partition(":")
        obj: Any = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
        return cast(Model, obj(*recipe.args, **kwargs))
    raise InputError(f"unknown recipe kind {recipe.kind!r}")


def _tuple(x: npt.ArrayLike | None) -> tuple[float, ...] | None:
    return None if x is None else tuple(float(v) for v in np.asarray(x, dtype=np.float64).ravel())


@dataclass(frozen=True)
class IntegratorRecipe:
    """How to build a :class:`vidyn.VariationalIntegrator` on a worker: the model's recipe and
    the constructor's arguments (arrays are stored as tuples, so recipes stay hashable).
    ``body_wrenches`` is stored flattened ((nbodies·6,)); holonomic ``constraints`` cannot be
    given to a recipe. Deprecated: a ``VariationalIntegrator`` (constraints included) pickles,
    pass it instead."""

    model: ModelRecipe
    dt: float
    scheme: str = "trapezoid"
    s: int | None = None
    damping: tuple[float, ...] | None = None
    stiffness: tuple[float, ...] | None = None
    rest: tuple[float, ...] | None = None
    tolerance: float = 1e-12
    max_iterations: int = 30
    kinematic: tuple[str, ...] | None = None
    body_wrenches: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        _deprecated("IntegratorRecipe", "the vidyn.VariationalIntegrator itself")

    @classmethod
    def of(
        cls,
        model: ModelRecipe,
        dt: float,
        scheme: str = "trapezoid",
        s: int | None = None,
        damping: npt.ArrayLike | None = None,
        stiffness: npt.ArrayLike | None = None,
        rest: npt.ArrayLike | None = None,
        tolerance: float = 1e-12,
        max_iterations: int = 30,
        kinematic: list[str] | None = None,
        body_wrenches: npt.ArrayLike | None = None,
    ) -> IntegratorRecipe:
        """Same arguments as ``VariationalIntegrator(model, …)``, with arrays for the forces."""
        names = None if kinematic is None else tuple(str(k) for k in kinematic)
        return cls(model, float(dt), scheme, s, _tuple(damping), _tuple(stiffness), _tuple(rest), float(tolerance), int(max_iterations), names, _tuple(body_wrenches))

    def build(self) -> VariationalIntegrator:
        """The integrator (built once per process and recipe)."""
        return _build_integrator(self)


@functools.lru_cache(maxsize=32)
def _build_integrator(r: IntegratorRecipe) -> VariationalIntegrator:
    wrenches = None if r.body_wrenches is None else np.reshape(r.body_wrenches, (-1, 6))
    kinematic = None if r.kinematic is None else list(r.kinematic)
    return VariationalIntegrator(
        r.model.build(),
        r.dt,
        scheme=r.scheme,
        s=r.s,
        damping=r.damping,
        stiffness=r.stiffness,
        rest=r.rest,
        tolerance=r.tolerance,
        max_iterations=r.max_iterations,
        kinematic=kinematic,
        body_wrenches=wrenches,
    )


Recipe = Union[ModelRecipe, IntegratorRecipe]
#: What ``map_batch`` runs on: the model or integrator itself, or a (deprecated) recipe.
System = Union[Model, VariationalIntegrator, ModelRecipe, IntegratorRecipe]


class _Shard(NamedTuple):
    result: Any
    ok: npt.NDArray[np.bool_]
    errors: dict[int, BaseException]


def _run_shard(function: str, system: System, args: tuple[Any, ...], kwargs: dict[str, Any], worker_threads: int | None) -> _Shard:
    """One task: run ``vidyn.batch.<function>`` on the shard (a recipe is built first, cached)."""
    if worker_threads is not None and vidyn.get_num_threads() != worker_threads:
        vidyn.set_num_threads(worker_threads)
    if isinstance(system, (ModelRecipe, IntegratorRecipe)):
        system = system.build()
    result, status = getattr(_batch, function)(system, *args, errors="return", **kwargs)
    if isinstance(result, _batch.Rollout):
        result = tuple(result)  # a plain tuple travels without importing vidyn.batch types
    return _Shard(result, status.ok, status.errors)


def _rows(x: Any) -> int | None:
    return int(x.shape[0]) if isinstance(x, np.ndarray) and x.ndim > 0 else None


def _concat(parts: list[Any]) -> Any:
    if isinstance(parts[0], tuple):
        return tuple(_concat([p[i] for p in parts]) for i in range(len(parts[0])))
    return np.concatenate(parts, axis=0)


def _renumber(e: BaseException, local: int, row: int) -> BaseException:
    """The shard's exception with its message naming the global row (``row 7: …``)."""
    msg = str(e)
    for word in ("row", "trajectory"):
        prefix = f"{word} {local}"
        if msg.startswith(prefix) and msg[len(prefix) : len(prefix) + 1] in (":", ","):
            try:
                return type(e)(f"{word} {row}{msg[len(prefix):]}")
            except Exception:  # pragma: no cover - an exception class with another signature
                return e
    return e


def _default_shards(client: Any) -> int:
    try:
        return max(1, sum(int(v) for v in client.nthreads().values()))
    except Exception:  # pragma: no cover - a client-like object without nthreads()
        return 1


def map_batch(
    client: Any,
    function: str,
    system: System,
    *args: Any,
    shards: int | None = None,
    worker_threads: int | None = None,
    errors: Literal["raise", "return"] = "raise",
    **kwargs: Any,
) -> Any:
    """Runs ``vidyn.batch.<function>(system, *args, **kwargs)`` over the cluster of ``client``.

    ``system`` is what the function takes first: a :class:`vidyn.Model` for the dynamics
    functions, a :class:`vidyn.VariationalIntegrator` for ``rollout`` and ``linearize``
    (pickled to the workers; a deprecated recipe is built there). Every NumPy
    array among ``args``/``kwargs`` whose first dimension is the batch size ``B`` (that of
    the first array argument) is cut along axis 0 into ``shards`` contiguous pieces (default:
    the cluster's worker threads; at most ``B``); other arguments go to every task as they
    are. Returns what the local function returns (``(result, BatchStatus)`` with
    ``errors="return"``), rows in the original order.
    """
    if function not in _batch.__all__ or function in ("BatchStatus", "Rollout", "get_num_threads", "set_num_threads"):
        raise InputError(f"vidyn.batch has no batched function {function!r}")
    if errors not in ("raise", "return"):
        raise InputError(f"errors must be 'raise' or 'return', got {errors!r}")
    args = tuple(np.ascontiguousarray(a, dtype=np.float64) if isinstance(a, (list, np.ndarray)) else a for a in args)
    kwargs = {k: np.ascontiguousarray(v, dtype=np.float64) if isinstance(v, (list, np.ndarray)) else v for k, v in kwargs.items()}
    sizes = [r for r in (_rows(a) for a in (*args, *kwargs.values())) if r is not None]
    if not sizes:
        raise InputError("map_batch needs at least one array argument with a leading batch axis")
    batch = sizes[0]
    n = max(1, min(shards if shards is not None else _default_shards(client), batch))
    bounds = np.linspace(0, batch, n + 1).astype(int)

    def cut(x: Any, lo: int, hi: int) -> Any:
        return x[lo:hi] if _rows(x) == batch else x

    futures = [
        client.submit(
            _run_shard,
            function,
            system,
            tuple(cut(a, lo, hi) for a in args),
            {k: cut(v, lo, hi) for k, v in kwargs.items()},
            worker_threads,
            pure=False,
        )
        for lo, hi in zip(bounds[:-1], bounds[1:])
    ]
    parts: list[_Shard] = client.gather(futures)
    result = _concat([p.result for p in parts])
    if function == "rollout":
        result = _batch.Rollout(*result)
    ok = np.concatenate([p.ok for p in parts]) if parts else np.ones(0, dtype=bool)
    errs = {int(lo) + row: _renumber(e, row, int(lo) + row) for lo, p in zip(bounds[:-1], parts) for row, e in p.errors.items()}
    status = _batch.BatchStatus(ok=ok, errors=dict(sorted(errs.items())))
    if errors == "return":
        return result, status
    status.raise_first()
    return result


def rollout(
    client: Any,
    system: VariationalIntegrator | IntegratorRecipe,
    q0: npt.ArrayLike,
    v0: npt.ArrayLike | None = None,
    u: npt.ArrayLike | None = None,
    *,
    p0: npt.ArrayLike | None = None,
    steps: int | None = None,
    shards: int | None = None,
    worker_threads: int | None = None,
    errors: Literal["raise", "return"] = "raise",
) -> Any:
    """:func:`vidyn.batch.rollout` with the trajectories spread over the cluster."""
    return map_batch(client, "rollout", system, np.asarray(q0, dtype=np.float64), v0=v0, u=u, p0=p0, steps=steps, shards=shards, worker_threads=worker_threads, errors=errors)


def linearize(
    client: Any,
    system: VariationalIntegrator | IntegratorRecipe,
    q: _batch.Rollout | npt.ArrayLike,
    p: npt.ArrayLike | None = None,
    u: npt.ArrayLike | None = None,
    *,
    shards: int | None = None,
    worker_threads: int | None = None,
    errors: Literal["raise", "return"] = "raise",
) -> Any:
    """:func:`vidyn.batch.linearize` with the trajectories spread over the cluster (each
    worker linearises its trajectories' steps in parallel)."""
    if isinstance(q, _batch.Rollout):
        roll = q
        q, p, u = roll.q, roll.p, roll.u
    elif p is None or u is None:
        raise InputError("linearize takes a Rollout, or q (B, N+1, model.nq), p (B, N+1, n) and u (B, N, n)")
    return map_batch(client, "linearize", system, np.asarray(q, dtype=np.float64), p, u, shards=shards, worker_threads=worker_threads, errors=errors)

