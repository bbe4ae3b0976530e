"""Batched dynamics, rollouts and linearisations over a leading batch axis, in parallel.

Every function takes NumPy float64 arrays with a leading batch axis ``B`` (other array-likes
are converted once), runs the whole batch in Rust on vidyn's thread pool with the GIL
released, and returns new float64 arrays that the engine filled in place (no Python object
per row)::

    import numpy as np, vidyn as vd

    model = vd.models.pendulum_chain(12)
    q = rng.uniform(-1, 1, (1000, model.nq)); v = ...; a = ...
    tau = vd.batch.rnea(model, q, v, a)                     # (1000, nv)

    vi = vd.VariationalIntegrator(model, dt=0.01)
    roll = vd.batch.rollout(vi, q0, v0, u)                  # u (B, N, n) -> roll.q (B, N+1, n)
    A, B = vd.batch.linearize(vi, roll)                     # (B, N, 2n, 2n), (B, N, 2n, n)

Guarantees
    * Row ``i`` of a result is bit-for-bit what the single call (``vidyn.rnea(model, q[i],
      …)``, ``vi.rollout(q0[i], v0[i], u[i])``, ``vi.linearize(...)``) returns, whatever the
      number of threads: each row runs the same sequential code and no sum crosses rows.
    * ``vidyn.set_num_threads(k)`` sets the pool size (default: ``VIDYN_NUM_THREADS``, else
      the number of CPUs); ``vidyn.get_num_threads()`` reads it. The one pool runs
      ``vidyn.batch``, ``VariationalIntegrator.linearize`` (a one-trajectory batch) and
      ``vidyn.optim``.
    * Ctrl-C works during long batches: the calling thread checks for signals every 50 ms;
      rows not yet started are skipped and ``KeyboardInterrupt`` is raised.

Bad rows
    A row with NaN/inf inputs, a non-unit quaternion, a singular inertia or (for rollouts) a
    Newton solve that fails does not stop the batch: the other rows are computed, and the
    failed rows' outputs are NaN (rollouts keep the states computed before the failure;
    their iteration counts are -1 from the failed step on). Then, with

    * ``errors="raise"`` (the default), the exception of the first failed row is raised, of
      the class the single call would raise (``InputError``, ``ModelError``,
      ``ConvergenceError``), its message naming the row (``"row 3: q[0] is not finite"``) and
      how many rows failed;
    * ``errors="return"``, the function returns ``(result, status)`` where ``result`` is what
      it returns otherwise and ``status`` a :class:`BatchStatus` (``status.ok`` (B,) bool,
      ``status.errors`` ``{row: exception}``, ``status.messages``).

    Shape errors (wrong number of columns, inconsistent ``B`` or ``N``) always raise
    ``InputError`` before anything runs.

Progress
    ``progress=callback`` (off by default) calls ``callback(done, total)`` from the calling
    thread about every 50 ms while the batch runs, and once at the end; units are rows
    (``(trajectory, step)`` pairs for :func:`linearize`, steps for :func:`rollout`). An
    exception raised by the callback cancels the batch and propagates. With ``tqdm``::

        bar = tqdm(total=B * N)
        roll = vd.batch.rollout(vi, q0, v0, u, progress=lambda d, t: bar.update(d - bar.n))

Preallocated outputs
    ``out=`` takes the arrays to fill instead of allocating new ones (one array, or a tuple
    with one array or None per result: ``out=(A, B)`` for :func:`linearize`, ``out=(q, p,
    iterations)`` for :func:`rollout`, iterations int64): exact shape, the result's dtype,
    C-contiguous and writeable, not overlapping an input (refused with ``InputError``). The
    same arrays are returned. A loop that reuses its buffers then allocates nothing per call.

Inputs must not be modified by other Python threads while a batch runs (they are read in
place, without a copy, when they are C-contiguous float64 arrays).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, NamedTuple, Optional, TypeVar, Union, overload

import numpy as np
import numpy.typing as npt

from vidyn import _core
from vidyn._arrays import integer, zeros
from vidyn._core import Model, VariationalIntegrator, get_num_threads, set_num_threads

__all__ = [
    "BatchStatus",
    "Rollout",
    "aba",
    "aba_derivatives",
    "center_of_mass",
    "centroidal_momentum",
    "centroidal_momentum_matrix",
    "centroidal_momentum_matrix_time_variation",
    "com_jacobian",
    "crba",
    "get_num_threads",
    "linearize",
    "linearize_contracted",
    "minverse",
    "rnea",
    "rnea_derivatives",
    "rnea_second_order",
    "rnea_second_order_contracted",
    "rollout",
    "set_num_threads",
]

Array = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike
Errors = Literal["raise", "return"]
#: ``callback(done, total)``, called from the calling thread while a batch runs.
Progress = Callable[[int, int], object]
#: Preallocated outputs: one array (functions with one result) or a tuple with one array (or
#: None) per result, of the result's dtype and exact shape, C-contiguous and writeable.
Out = Union[npt.NDArray[Any], tuple[Optional[npt.NDArray[Any]], ...], None]
_Failures = list[tuple[int, BaseException]]
_T = TypeVar("_T")


@dataclass(frozen=True)
class BatchStatus:
    """Per-row outcome of a batched call made with ``errors="return"``.

    ``ok``: (B,) bool, False for the rows (trajectories for rollouts and linearisations)
    that failed. ``errors``: ``{row: exception}`` for the failed rows, in increasing row
    order; each exception is of the class the single call would raise, its message naming
    the row.
    """

    ok: npt.NDArray[np.bool_]
    errors: dict[int, BaseException] = field(default_factory=dict)

    @property
    def failed(self) -> npt.NDArray[np.intp]:
        """Indices of the failed rows, increasing."""
        return np.flatnonzero(~self.ok)

    @property
    def messages(self) -> list[str | None]:
        """(B,) the error message of each row, None where the row succeeded."""
        return [str(self.errors[i]) if i in self.errors else None for i in range(len(self.ok))]

    def __bool__(self) -> bool:
        return bool(self.ok.all())

    def raise_first(self) -> None:
        """Raises the first row's error (with the number of failed rows), if any."""
        if self.errors:
            row, exc = next(iter(self.errors.items()))
            more = len(self.errors) - 1
            if more:
                note = f" ({more} more row{'s' if more > 1 else ''} failed: {self.failed.tolist()[:10]}{'…' if more > 9 else ''}; pass errors='return' to get every row's status)"
                exc = type(exc)(f"{exc}{note}")
            raise exc


class Rollout(NamedTuple):
    """Batched trajectories (returned by :func:`rollout`).

    ``q``, ``p``: (B, N+1, n) configurations and discrete momenta; ``u``: (B, N, n) the
    controls; ``iterations``: (B, N) int64 Newton iterations of each step, -1 for steps not
    taken (after a failure, where ``q`` and ``p`` are NaN).
    """

    q: Array
    p: Array
    u: Array
    iterations: npt.NDArray[np.int64]


def _status(batch: int, failures: _Failures) -> BatchStatus:
    ok = np.ones(batch, dtype=bool)
    for row, _ in failures:
        ok[row] = False
    return BatchStatus(ok=ok, errors=dict(failures))


def _finish(result: _T, batch: int, failures: _Failures, errors: Errors) -> _T | tuple[_T, BatchStatus]:
    if errors == "raise":
        if failures:
            _status(batch, failures).raise_first()
        return result
    if errors == "return":
        return result, _status(batch, failures)
    raise _core.InputError(f"errors must be 'raise' or 'return', got {errors!r}")


def _check_errors(errors: str) -> None:
    if errors not in ("raise", "return"):
        raise _core.InputError(f"errors must be 'raise' or 'return', got {errors!r}")


def _rows(x: Any) -> int:
    return int(np.shape(x)[0]) if np.ndim(x) > 0 else 0


# --------------------------------------------------------------------------------------------
# Batched dynamics


@overload
def rnea(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def rnea(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def rnea(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """Inverse dynamics of every row: q (B, nq), v (B, nv), a (B, nv) -> tau (B, nv)."""
    _check_errors(errors)
    tau, failures = _core._batch_rnea(model, q, v, a, progress, out)
    return _finish(tau, len(tau), failures, errors)


@overload
def aba(model: Model, q: ArrayLike, v: ArrayLike, tau: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def aba(model: Model, q: ArrayLike, v: ArrayLike, tau: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def aba(model: Model, q: ArrayLike, v: ArrayLike, tau: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """Forward dynamics of every row: q (B, nq), v (B, nv), tau (B, nv) -> ddq (B, nv)."""
    _check_errors(errors)
    ddq, failures = _core._batch_aba(model, q, v, tau, progress, out)
    return _finish(ddq, len(ddq), failures, errors)


@overload
def crba(model: Model, q: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def crba(model: Model, q: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def crba(model: Model, q: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """Joint-space inertia of every row: q (B, nq) -> M (B, nv, nv), full and symmetric."""
    _check_errors(errors)
    m, failures = _core._batch_crba(model, q, progress, out)
    return _finish(m, len(m), failures, errors)


@overload
def minverse(model: Model, q: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def minverse(model: Model, q: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def minverse(model: Model, q: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """Inverse joint-space inertia of every row: q (B, nq) -> M⁻¹ (B, nv, nv)."""
    _check_errors(errors)
    m, failures = _core._batch_minverse(model, q, progress, out)
    return _finish(m, len(m), failures, errors)


@overload
def center_of_mass(model: Model, q: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def center_of_mass(model: Model, q: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def center_of_mass(model: Model, q: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """World centre of mass of every row (:func:`vidyn.center_of_mass`): q (B, nq) -> (B, 3)."""
    _check_errors(errors)
    c, failures = _core._batch_center_of_mass(model, q, progress, out)
    return _finish(c, len(c), failures, errors)


@overload
def com_jacobian(model: Model, q: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def com_jacobian(model: Model, q: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def com_jacobian(model: Model, q: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """Centre-of-mass Jacobian of every row (:func:`vidyn.com_jacobian`): q (B, nq) -> (B, 3, nv)."""
    _check_errors(errors)
    j, failures = _core._batch_com_jacobian(model, q, progress, out)
    return _finish(j, len(j), failures, errors)


@overload
def centroidal_momentum_matrix(model: Model, q: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def centroidal_momentum_matrix(model: Model, q: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def centroidal_momentum_matrix(model: Model, q: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """Centroidal momentum matrix of every row (:func:`vidyn.centroidal_momentum_matrix`):
    q (B, nq) -> A_G (B, 6, nv)."""
    _check_errors(errors)
    a, failures = _core._batch_centroidal_momentum_matrix(model, q, progress, out)
    return _finish(a, len(a), failures, errors)


@overload
def centroidal_momentum(model: Model, q: ArrayLike, v: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def centroidal_momentum(model: Model, q: ArrayLike, v: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[Array, BatchStatus]: ...
def centroidal_momentum(model: Model, q: ArrayLike, v: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> Array | tuple[Array, BatchStatus]:
    """Centroidal momentum of every row (:func:`vidyn.centroidal_momentum`): q (B, nq),
    v (B, nv) -> h_G (B, 6), ``[linear; angular]``."""
    _check_errors(errors)
    h, failures = _core._batch_centroidal_momentum(model, q, v, progress, out)
    return _finish(h, len(h), failures, errors)


@overload
def centroidal_momentum_matrix_time_variation(model: Model, q: ArrayLike, v: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> Array: ...
@overload
def centroidal_momentum_matrix_time_variation(
    model: Model, q: ArrayLike, v: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...
) -> tuple[Array, BatchStatus]: ...
def centroidal_momentum_matrix_time_variation(
    model: Model, q: ArrayLike, v: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None
) -> Array | tuple[Array, BatchStatus]:
    """``dA_G/dt`` of every row (:func:`vidyn.centroidal_momentum_matrix_time_variation`):
    q (B, nq), v (B, nv) -> (B, 6, nv)."""
    _check_errors(errors)
    d, failures = _core._batch_centroidal_momentum_matrix_time_variation(model, q, v, progress, out)
    return _finish(d, len(d), failures, errors)


_Three = tuple[Array, Array, Array]
_Four = tuple[Array, Array, Array, Array]


@overload
def rnea_derivatives(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> _Three: ...
@overload
def rnea_derivatives(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[_Three, BatchStatus]: ...
def rnea_derivatives(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> _Three | tuple[_Three, BatchStatus]:
    """``(dtau_dq, dtau_dv, dtau_da)`` of every row, each (B, nv, nv) (see ``vidyn.rnea_derivatives``)."""
    _check_errors(errors)
    res, failures = _core._batch_rnea_derivatives(model, q, v, a, progress, out)
    return _finish(res, len(res[0]), failures, errors)


@overload
def aba_derivatives(model: Model, q: ArrayLike, v: ArrayLike, tau: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> _Three: ...
@overload
def aba_derivatives(model: Model, q: ArrayLike, v: ArrayLike, tau: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[_Three, BatchStatus]: ...
def aba_derivatives(model: Model, q: ArrayLike, v: ArrayLike, tau: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> _Three | tuple[_Three, BatchStatus]:
    """``(dddq_dq, dddq_dv, dddq_dtau)`` of every row, each (B, nv, nv) (see ``vidyn.aba_derivatives``)."""
    _check_errors(errors)
    res, failures = _core._batch_aba_derivatives(model, q, v, tau, progress, out)
    return _finish(res, len(res[0]), failures, errors)


@overload
def rnea_second_order(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> _Four: ...
@overload
def rnea_second_order(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[_Four, BatchStatus]: ...
def rnea_second_order(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> _Four | tuple[_Four, BatchStatus]:
    """``(d2tau_dq2, d2tau_dv2, d2tau_dqdv, dM_dq)`` of every row, each (B, nv, nv, nv) (see
    ``vidyn.rnea_second_order`` for the index meaning)."""
    _check_errors(errors)
    res, failures = _core._batch_rnea_second_order(model, q, v, a, progress, out)
    return _finish(res, len(res[0]), failures, errors)


@overload
def rnea_second_order_contracted(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, lam: ArrayLike, *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...) -> _Three: ...
@overload
def rnea_second_order_contracted(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, lam: ArrayLike, *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...) -> tuple[_Three, BatchStatus]: ...
def rnea_second_order_contracted(model: Model, q: ArrayLike, v: ArrayLike, a: ArrayLike, lam: ArrayLike, *, errors: Errors = "raise", progress: Progress | None = None, out: Out = None) -> _Three | tuple[_Three, BatchStatus]:
    """``sum_i lam[b, i] * T[b, i]`` for the three tensors of every row, each (B, nv, nv)."""
    _check_errors(errors)
    res, failures = _core._batch_rnea_second_order_contracted(model, q, v, a, lam, progress, out)
    return _finish(res, len(res[0]), failures, errors)


# --------------------------------------------------------------------------------------------
# Trajectories of a variational integrator


@overload
def rollout(
    vi: VariationalIntegrator, q0: ArrayLike, v0: ArrayLike | None = ..., u: ArrayLike | None = ..., *, p0: ArrayLike | None = ..., steps: int | None = ..., errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...
) -> Rollout: ...
@overload
def rollout(
    vi: VariationalIntegrator, q0: ArrayLike, v0: ArrayLike | None = ..., u: ArrayLike | None = ..., *, p0: ArrayLike | None = ..., steps: int | None = ..., errors: Literal["return"], progress: Progress | None = ..., out: Out = ...
) -> tuple[Rollout, BatchStatus]: ...
def rollout(
    vi: VariationalIntegrator,
    q0: ArrayLike,
    v0: ArrayLike | None = None,
    u: ArrayLike | None = None,
    *,
    p0: ArrayLike | None = None,
    steps: int | None = None,
    errors: Errors = "raise",
    progress: Progress | None = None,
    out: Out = None,
) -> Rollout | tuple[Rollout, BatchStatus]:
    """Simulates B trajectories in parallel (steps of one trajectory in sequence).

    ``q0`` (B, nq) with initial velocities ``v0`` (B, n) (default zeros; converted by the
    Legendre transform) or momenta ``p0`` (B, n), under controls ``u`` (B, N, n) or ``steps``
    zero-control steps. Returns a :class:`Rollout`; trajectory ``b`` equals
    ``vi.rollout(q0[b], v0[b], u[b])`` bit for bit. A trajectory whose Newton solve fails is
    reported in the status (``errors="return"``) and the others complete.
    """
    _check_errors(errors)
    n = vi.n
    if v0 is not None and p0 is not None:
        raise _core.InputError("give either v0 or p0, not both")
    if u is None:
        if steps is None:
            raise _core.InputError("give the controls u (B, N, n) or the number of steps")
        steps = integer(steps, "steps", 0)
        u = zeros((_rows(q0), steps, n), "the zero controls u of steps")
    elif steps is not None and np.ndim(u) == 3 and np.shape(u)[1] != integer(steps, "steps", 0):
        raise _core.InputError(f"u has {np.shape(u)[1]} steps but steps = {steps}")
    if v0 is None and p0 is None:
        v0 = np.zeros((_rows(q0), n))
    q, p, iterations, failures = _core._batch_rollout(vi, q0, v0, p0, u, progress, out)
    result = Rollout(q=q, p=p, u=np.ascontiguousarray(u, dtype=np.float64), iterations=iterations)
    return _finish(result, len(q), failures, errors)


@overload
def linearize(
    vi: VariationalIntegrator, q: Rollout | ArrayLike, p: ArrayLike | None = ..., u: ArrayLike | None = ..., *, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...
) -> tuple[Array, Array]: ...
@overload
def linearize(
    vi: VariationalIntegrator, q: Rollout | ArrayLike, p: ArrayLike | None = ..., u: ArrayLike | None = ..., *, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...
) -> tuple[tuple[Array, Array], BatchStatus]: ...
def linearize(
    vi: VariationalIntegrator,
    q: Rollout | ArrayLike,
    p: ArrayLike | None = None,
    u: ArrayLike | None = None,
    *,
    errors: Errors = "raise",
    progress: Progress | None = None,
    out: Out = None,
) -> tuple[Array, Array] | tuple[tuple[Array, Array], BatchStatus]:
    """Exact linearisation of every step of B trajectories, in parallel over all (trajectory,
    step) pairs: ``linearize(vi, rollout)`` or ``linearize(vi, q, p, u)`` with q
    (B, N+1, model.nq), p (B, N+1, n) and u (B, N, n) -> ``(A, B)``, A (B, N, 2n, 2n) =
    d(q', p')/d(q, p), B (B, N, 2n, n) = d(q', p')/du (``δq`` in the tangent space, as
    ``model.difference``, with Lie-group joints). ``A[b]``, ``B[b]`` equal ``vi.linearize(q[b], p[b], u[b])``
    bit for bit. A failed pair marks its trajectory (the status reports the first failed
    step) and its blocks are NaN.
    """
    _check_errors(errors)
    if isinstance(q, Rollout):
        if p is not None or u is not None:
            raise _core.InputError("linearize takes a Rollout, or q, p and u — not both")
        roll = q
        q, p, u = roll.q, roll.p, roll.u
    elif p is None or u is None:
        raise _core.InputError("linearize takes a Rollout, or q (B, N+1, model.nq), p (B, N+1, n) and u (B, N, n)")
    a, b, failures = _core._batch_linearize(vi, q, p, u, progress, out)
    return _finish((a, b), len(a), failures, errors)



@overload
def linearize_contracted(
    vi: VariationalIntegrator, q: Rollout | ArrayLike, p: ArrayLike | None = ..., u: ArrayLike | None = ..., *, lam: ArrayLike, errors: Literal["raise"] = ..., progress: Progress | None = ..., out: Out = ...
) -> _Three: ...
@overload
def linearize_contracted(
    vi: VariationalIntegrator, q: Rollout | ArrayLike, p: ArrayLike | None = ..., u: ArrayLike | None = ..., *, lam: ArrayLike, errors: Literal["return"], progress: Progress | None = ..., out: Out = ...
) -> tuple[_Three, BatchStatus]: ...
def linearize_contracted(
    vi: VariationalIntegrator,
    q: Rollout | ArrayLike,
    p: ArrayLike | None = None,
    u: ArrayLike | None = None,
    *,
    lam: ArrayLike,
    errors: Errors = "raise",
    progress: Progress | None = None,
    out: Out = None,
) -> _Three | tuple[_Three, BatchStatus]:
    """Exact second-order derivatives of every step of B trajectories contracted with the
    co-states ``lam`` (B, N, 2n) (for DDP, the value gradient at step k+1), in parallel over
    all (trajectory, step) pairs: ``linearize_contracted(vi, rollout, lam=lam)`` or
    ``linearize_contracted(vi, q, p, u, lam=lam)`` -> ``(hxx, hxu, huu)``, hxx (B, N, 2n, 2n)
    ``= sum_i lam[b, k, i] d²x'_i/dx²``, hxu (B, N, 2n, n), huu (B, N, n, n). Row ``[b]``
    equals ``vi.linearize(q[b], p[b], u[b], order=2, lam=lam[b])[2:]`` bit for bit. A failed
    pair marks its trajectory (the status reports the first failed step); its blocks are NaN.
    With free-flyer, spherical or planar joints: in tangent coordinates, by central differences
    of the exact first order (relative error below 1e-7; ``vi.linearize``'s docs).
    """
    _check_errors(errors)
    if isinstance(q, Rollout):
        if p is not None or u is not None:
            raise _core.InputError("linearize_contracted takes a Rollout, or q, p and u — not both")
        roll = q
        q, p, u = roll.q, roll.p, roll.u
    elif p is None or u is None:
        raise _core.InputError("linearize_contracted takes a Rollout, or q (B, N+1, model.nq), p (B, N+1, n) and u (B, N, n)")
    xx, xu, uu, failures = _core._batch_linearize_contracted(vi, q, p, u, lam, progress, out)
    return _finish((xx, xu, uu), len(xx), failures, errors)

