"""Trajectory optimisation and regulation on the exact derivatives of the variational integrator.

Everything runs in Rust (crate ``vidyn-optim``) with the GIL released::

    import numpy as np, vidyn as vd
    from vidyn import optim

    vi = vd.VariationalIntegrator(vd.models.cartpole(), dt=0.02)
    res = optim.ilqr(vi, q0=[0, 0], U_init=np.zeros((125, 1)), actuated=[0],
                     Q=1e-4, R=1e-3, QN=[100, 100, 10, 10],
                     x_ref=[0, np.pi, 0, 0], cost_state="velocity")
    res.converged, res.iterations, res.trajectory.q[-1]

* :func:`lqr` — time-varying finite-horizon Riccati recursion (symmetrised each step).
* :func:`dlqr` — steady-state DLQR of an equilibrium (Riccati map iterated to convergence).
* :func:`tracking_lqr` and :func:`closed_loop_rollout` — the tracking controller
  ``u_k = u_ref,k − K_k (x_k ⊖ x_ref,k)`` about a trajectory, simulated with the VI step.
* :func:`ilqr` — iLQR on the VI's exact linearisation (every step linearised in parallel),
  Levenberg–Marquardt regularisation of ``Q_uu``, backtracking line search, box control
  limits (projected-Newton box QP, Tassa et al. 2014), convergence report. ``method="ddp"``
  (full DDP) uses the λ-contracted second-order VI derivatives: exact ones, with holonomic
  constraints (contact schedules included) and with free-flyer, spherical or planar joints
  (floating bases), in the same tangent coordinates as the first order
  (``NotImplementedError`` for a VI with kinematic joints or body wrenches, which has none);
  and on linear systems (:func:`ilqr_linear`) the zero ones.
* :func:`projection` — Johnson's (2012, Ch. 6) projection-operator method: every iterate is
  a VI trajectory ``P(ξ̄)`` (DLQR feedback about the current iterate, eq. 6.10), descent
  directions from a time-varying LQ problem (steepest / quasi-Newton; Newton needs the
  second-order VI derivatives), Armijo search with the projection-success check.
  :func:`project` applies ``P`` to a curve.
* :class:`Problem` — the problem (integrator, start, initial controls, actuated joints,
  cost) read and checked once; :func:`ilqr` and :func:`projection` take it, or its keywords.
* Costs: the quadratic tracking cost below; plus a Cartesian reaching term
  ``½ w |p_frame(q) − p*|²`` (``frame=``, ``frame_target=``), and points tracking targets
  that may change from stage to stage (:class:`Track`: frame origins such as swing feet, the
  centre of mass; ``tracks=``), all with exact gradients and Gauss–Newton Hessians from the
  points' Jacobians, in Rust; or, for prototyping, any Python object
  following :class:`StageCost` (``cost=``; slow: called once per stage, with the GIL).

Conventions
    The VI state is ``x = (q, p)`` (``p`` the discrete momentum; ``vi.momentum(q, v)``
    converts a velocity), ``nx = nq + n`` entries (``2n`` unless the model has free-flyer,
    spherical or planar joints, whose quaternions make ``nq > n``). Controls are the
    generalised forces of the ``actuated`` joints (all by default; the others get zero
    force), ``m`` of them. Costs follow the ½ convention of trep and crocoddyl::

        J = Σ_k ½ (x_k ⊖ x_ref,k)ᵀ Q_k (x_k ⊖ x_ref,k) + ½ (u_k − u_ref,k)ᵀ R_k (u_k − u_ref,k)
            + ½ (x_N ⊖ x_ref,N)ᵀ QN (x_N ⊖ x_ref,N)

    where ``x ⊖ x_ref = (model.difference(q_ref, q), p − p_ref)`` (``2n`` entries; plain
    subtraction without Lie-group joints), so the weights are ``2n × 2n``. With Lie-group
    joints the Jacobians, gains ``K`` (m, 2n) and cost derivatives are in these tangent
    coordinates (crocoddyl's state manifolds) and the Hessian of the state cost is the
    Gauss–Newton ``Jᵀ Q J``, for every optimiser here (iLQR, full DDP, FDDP, the projection
    method, the closed-loop helpers).

    With ``cost_state="velocity"`` the same formula applies to ``y = (q, v)``, ``v = M(q)⁻¹ p``
    (Gauss–Newton Hessian; value and gradient exact), and ``x_ref`` is then ``(q, v)``;
    :func:`ilqr` can then also iterate on ``y`` itself (``coordinates="velocity"``), where
    that cost is exactly quadratic. Weights may be a scalar (times identity), a vector
    (diagonal), a matrix, or a stack ``(N, d, d)`` of per-step matrices.

Full DDP and the projection method's Newton model use the VI's second derivatives
contracted with the value gradient / adjoint: exact, with holonomic constraints too (through
the constrained step and its momentum projection, on fixed and floating bases); not available
(NotImplementedError) with kinematic joints or body wrenches, nor on ``(q, v)``. With Lie-group joints they are the exact
second derivatives of ``δ ↦ f(x̄ ⊕ δ, ū + δu) ⊖ f(x̄, ū)`` (the expansion of ``V(x̄' ⊕ Δ)``
that DDP on a manifold uses, as crocoddyl's); the projection method is not implemented there.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Literal, NamedTuple, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from vidyn import _core
from vidyn._arrays import finite_f64, integer, real, real_f64, zeros
from vidyn._core import InputError, MaximalIntegrator, MaximalTrajectory, Trajectory, VariationalIntegrator

__all__ = [
    "ClosedLoopRollout",
    "DlqrSolution",
    "FrictionCone",
    "IlqrResult",
    "LqrSolution",
    "Problem",
    "ProjectionResult",
    "StageCost",
    "Track",
    "closed_loop_rollout",
    "dlqr",
    "fddp",
    "ilqr",
    "ilqr_linear",
    "lqr",
    "project",
    "projection",
    "tracking_lqr",
]

_Array = npt.NDArray[np.float64]
_ArrayLike = npt.ArrayLike


class LqrSolution(NamedTuple):
    """Gains ``K`` (N, nu, nx) — the optimal control is ``u_k = −K_k x_k`` — and costs-to-go
    ``P`` (N+1, nx, nx) (optimal cost ``x_0ᵀ P_0 x_0`` for ``Σ xᵀQx + uᵀRu + x_NᵀQN x_N``)."""

    K: _Array
    P: _Array


class DlqrSolution(NamedTuple):
    """Steady-state gain ``K`` (nu, nx), Riccati solution ``P`` (nx, nx), Riccati iterations."""

    K: _Array
    P: _Array
    iterations: int


class ClosedLoopRollout(NamedTuple):
    """A closed-loop simulation: ``q`` (N+1, nq), ``p`` (N+1, n) and the applied forces ``u`` (N, n)."""

    q: _Array
    p: _Array
    u: _Array


def _same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are equal, arrays and floats bit for bit (a NaN equals the same
    NaN), dicts, lists and tuples entry by entry."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _fields_equal(a: Any, b: Any) -> bool:
    """Whether two results of the same class have equal compared fields (:func:`_same`)."""
    return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a) if f.compare)


@dataclass(frozen=True, eq=False)
class _Resimulate:
    """``vi.rollout(q0, p0=p0, u=U)``: a result's re-simulation, kept as data (the integrator
    and the start) so that results pickle and rebuild their trajectory after unpickling."""

    vi: VariationalIntegrator
    q0: _Array
    p0: _Array
    U: _Array

    def __call__(self) -> Trajectory:
        return self.vi.rollout(self.q0, p0=self.p0, u=self.U)


@dataclass(frozen=True, eq=False)
class _ResimulateMaximal:
    """``mi.rollout(q0, v0, U)``: the re-simulation of a result on a MaximalIntegrator, kept as
    data as :class:`_Resimulate`."""

    mi: MaximalIntegrator
    q0: _Array
    v0: _Array
    U: _Array

    def __call__(self) -> MaximalTrajectory:
        return self.mi.rollout(self.q0, self.v0, self.U)


def _no_trajectory() -> None:
    """The re-simulation of a result without dynamics (:func:`ilqr_linear`)."""
    return None


@dataclass(frozen=True)
class IlqrResult:
    """Outcome of :func:`ilqr`.

    ``trajectory`` is ``vi.rollout(q0, p0=p0, u=U)``, the final controls re-simulated open
    loop (dynamically feasible by construction), computed on first access (so not part of the
    solve's time) and kept; ``q``, ``p``, ``x`` are the optimiser's own
    final states (they agree with it to the Newton tolerance). ``U`` (N, n) holds the forces of
    every joint, ``u`` (N, m) those of the actuated ones; ``k`` (N, m) and ``K`` (N, m, 2n) are
    the feed-forward terms and feedback gains of the last backward pass (at the final trajectory
    when converged): ``u = u* + K (x ⊖ x*)`` is a local tracking controller.
    ``cost_history[0]`` is the initial cost, one entry per accepted step follows. ``log``:
    per-iteration arrays ``cost``, ``expected_reduction`` (full step), ``expected_reduction_alpha``
    and ``actual_reduction`` (accepted step), ``alpha``, ``mu``, ``gradient_norm`` (‖∂J/∂u‖ of
    the open-loop cost, projected on the control limits; on an FDDP iterate with gaps, of the
    cost with the gaps held), ``time`` (s since the start).
    ``status``: ``"converged"``, ``"max_iterations"`` or ``"regularisation_limit"``.
    ``timing`` (s): ``forward`` (rollouts, with each trial's derivatives computed alongside on
    the other threads, and rejected trials), ``linearize`` (work after an accepted trial's
    rollout: its cost, the derivatives left and, alongside them, the next backward pass),
    ``backward`` (the first backward pass and those after a failed line search or a
    raised regularisation).
    From :func:`ilqr_linear`: ``trajectory`` is None and ``q``, ``p`` are empty. On a
    :class:`vidyn.MaximalIntegrator`: ``x`` is ``(q, v)`` (``v_k = (q_k − q_{k−1})/Δt``), ``p``
    is empty (N+1, 0), ``K`` is (N, m, 2n) and ``trajectory`` is ``mi.rollout(q0, v0, U)``.
    Results pickle (``resimulate`` keeps the integrator and the start, so ``trajectory`` is
    rebuilt after unpickling, equal to the original) and compare equal field by field, arrays
    bit for bit (``resimulate`` and ``trajectory`` are not compared)."""

    q: _Array
    p: _Array
    x: _Array
    U: _Array
    u: _Array
    k: _Array
    K: _Array
    cost: float
    cost_history: _Array
    iterations: int
    converged: bool
    status: str
    message: str
    wall_time: float
    timing: dict[str, float]
    log: dict[str, _Array]
    resimulate: Callable[[], Trajectory | MaximalTrajectory | None] = field(repr=False, compare=False)

    @functools.cached_property
    def trajectory(self) -> Trajectory | MaximalTrajectory | None:
        """The final controls re-simulated open loop (None from :func:`ilqr_linear`; a
        :class:`vidyn.MaximalTrajectory` on a MaximalIntegrator)."""
        return self.resimulate()

    def __eq__(self, other: object) -> bool:
        return _fields_equal(self, other)


class StageCost(Protocol):
    """A trajectory cost written in Python, ``J = Σ_k ℓ(k, x_k, u_k) + m(x_N)``, for
    prototyping (pass it as ``cost=`` to :func:`ilqr` or :func:`projection`). ``x`` is the VI
    state ``(q, p)`` (2n,), ``u`` the actuated controls (m,). Return values are converted to
    float64 arrays and must have exactly these shapes::

        running(k, x, u) -> float                                   # ℓ
        running_derivatives(k, x, u) -> (ℓ, ℓ_x (2n,), ℓ_u (m,), ℓ_xx (2n, 2n), ℓ_uu (m, m), ℓ_ux (m, 2n))
        terminal(x) -> float                                        # m
        terminal_derivatives(x) -> (m, m_x (2n,), m_xx (2n, 2n))

    Hessians may be Gauss–Newton approximations (iLQR and the quasi-Newton model only use them
    as the model's curvature); ``ℓ_uu`` must make the backward pass positive definite.
    Exceptions raised by these methods propagate out of the solver unchanged."""

    def running(self, k: int, x: _Array, u: _Array) -> float: ...
    def running_derivatives(self, k: int, x: _Array, u: _Array) -> tuple[float, _ArrayLike, _ArrayLike, _ArrayLike, _ArrayLike, _ArrayLike]: ...
    def terminal(self, x: _Array) -> float: ...
    def terminal_derivatives(self, x: _Array) -> tuple[float, _ArrayLike, _ArrayLike]: ...


class _CostAdapter:
    """Calls a :class:`StageCost` and converts what it returns (float, float64 arrays)."""

    def __init__(self, cost: StageCost) -> None:
        for name in ("running", "running_derivatives", "terminal", "terminal_derivatives"):
            if not callable(getattr(cost, name, None)):
                raise InputError(f"cost must have a method {name}() (see vidyn.optim.StageCost)")
        self.cost = cost

    def running(self, k: int, x: _Array, u: _Array) -> float:
        return float(self.cost.running(k, x, u))

    def terminal(self, x: _Array) -> float:
        return float(self.cost.terminal(x))

    def running_derivatives(self, k: int, x: _Array, u: _Array) -> tuple[Any, ...]:
        r: tuple[Any, ...] = tuple(self.cost.running_derivatives(k, x, u))
        if len(r) != 6:
            raise InputError(f"running_derivatives() returned {len(r)} items, expected 6: (l, l_x, l_u, l_xx, l_uu, l_ux)")
        return (float(r[0]), *(np.ascontiguousarray(real_f64(v, f"running_derivatives()[{i}]")) for i, v in enumerate(r[1:], 1)))

    def terminal_derivatives(self, x: _Array) -> tuple[Any, ...]:
        r: tuple[Any, ...] = tuple(self.cost.terminal_derivatives(x))
        if len(r) != 3:
            raise InputError(f"terminal_derivatives() returned {len(r)} items, expected 3: (l, l_x, l_xx)")
        return (float(r[0]), *(np.ascontiguousarray(real_f64(v, f"terminal_derivatives()[{i}]")) for i, v in enumerate(r[1:], 1)))


def _f64(x: _ArrayLike, name: str) -> _Array:
    a = real_f64(x, name)
    return a if a.ndim == 0 else np.ascontiguousarray(a)  # ascontiguousarray makes 0-d 1-d


def _weight(w: _ArrayLike | None, d: int, steps: int | None, name: str, default: float) -> _Array:
    """A weight as (steps, d, d) (or (d, d) when ``steps`` is None)."""
    a = _f64(default if w is None else w, name)
    if a.ndim == 0:
        m = float(a) * np.eye(d)
    elif a.ndim == 1:
        if a.shape != (d,):
            raise InputError(f"{name} has shape {a.shape}, expected a scalar, ({d},), ({d}, {d}) or (N, {d}, {d})")
        m = np.diag(a)
    elif a.ndim == 2:
        if a.shape != (d, d):
            raise InputError(f"{name} has shape {a.shape}, expected ({d}, {d})")
        m = a
    elif a.ndim == 3 and steps is not None:
        if a.shape != (steps, d, d):
            raise InputError(f"{name} has shape {a.shape}, expected (N, {d}, {d}) = ({steps}, {d}, {d})")
        return _f64(a, name)
    else:
        raise InputError(f"{name} has shape {a.shape}, expected a scalar, ({d},) or ({d}, {d})")
    if steps is None:
        return _f64(m, name)
    return _f64(np.broadcast_to(m, (steps, d, d)), name)


def _stage_weight(w: _ArrayLike | None, d: int, steps: int, name: str, default: float) -> _Array:
    """A running weight of the solvers' quadratic cost: (N, d, d) when given per step, else the
    one matrix used at every step as (1, d, d) (not copied N times)."""
    if w is not None and np.ndim(w) == 3:
        return _weight(w, d, steps, name, default)
    return _weight(w, d, None, name, default)[None]


def _rows(x: _ArrayLike | None, rows: int, d: int, name: str) -> _Array:
    """A reference as (rows, d) from None (zeros), (d,) or (rows, d); ``rows`` is set by the
    horizon (its steps)."""
    if x is None:
        return zeros((rows, d), f"{name} over the horizon's steps")
    a = _f64(x, name)
    if a.shape == (d,):
        out = zeros((rows, d), f"{name} over the horizon's steps")
        out[:] = a
        return out
    if a.shape != (rows, d):
        raise InputError(f"{name} has shape {a.shape}, expected ({d},) or ({rows}, {d})")
    return a


def lqr(A: _ArrayLike, B: _ArrayLike, Q: _ArrayLike, R: _ArrayLike, QN: _ArrayLike) -> LqrSolution:
    """Time-varying finite-horizon LQR by the Riccati recursion (Johnson 2012, App. B.2.2):
    ``Γ = R + BᵀP'B``, ``K = Γ⁻¹BᵀP'A``, ``P = Q + AᵀP'A − KᵀΓK``, symmetrised each step.

    A (N, nx, nx), B (N, nx, nu); Q, R per step or constant (scalar, diagonal, matrix or
    (N, d, d)); QN terminal. Raises InputError when ``R + BᵀPB`` is not positive definite."""
    a, b = _f64(A, "A"), _f64(B, "B")
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[1] != a.shape[2] or b.shape[1] != a.shape[1]:
        raise InputError(f"A must be (N, nx, nx) and B (N, nx, nu); got {a.shape} and {b.shape}")
    steps, nx, nu = a.shape[0], a.shape[1], b.shape[2]
    if steps == 0:
        raise InputError(f"A and B need at least one step (N ≥ 1); got A {a.shape} and B {b.shape}")
    k, p = _core._optim_lqr(a, b, _weight(Q, nx, steps, "Q", 0.0), _weight(R, nu, steps, "R", 0.0), _weight(QN, nx, None, "QN", 0.0))
    return LqrSolution(k, p)


def dlqr(
    A: _ArrayLike, B: _ArrayLike, Q: _ArrayLike, R: _ArrayLike, *, tolerance: float = 1e-12, max_iterations: int = 100_000
) -> DlqrSolution:
    """Steady-state discrete LQR: iterates the Riccati map from ``P = Q`` until
    ``max|ΔP| ≤ tolerance·max(1, max|P|)``. Raises ConvergenceError (with the last change)
    when it does not converge within ``max_iterations`` — e.g. ``(A, B)`` not stabilisable."""
    a, b = _f64(A, "A"), _f64(B, "B")
    if a.ndim != 2 or b.ndim != 2:
        raise InputError(f"A must be (nx, nx) and B (nx, nu); got {a.shape} and {b.shape}")
    nx, nu = a.shape[0], b.shape[1]
    k, p, it = _core._optim_dlqr(a, b, _weight(Q, nx, None, "Q", 0.0), _weight(R, nu, None, "R", 0.0), tolerance, max_iterations)
    return DlqrSolution(k, p, it)


def _indices(xs: Sequence[int], name: str) -> list[int]:
    """A list of ints, each checked (``name[j]`` in the message); the range is checked by the core."""
    return [integer(i, f"{name}[{j}]") for j, i in enumerate(xs)]


def _actuated(vi: VariationalIntegrator, actuated: Sequence[int] | None) -> tuple[list[int] | None, int]:
    if actuated is None:
        return None, vi.n
    act = _indices(actuated, "actuated")
    return act, len(act)


def _vector(x: _ArrayLike, n: int, name: str, size: str = "n") -> _Array:
    """``x`` as a contiguous (n,) float64 vector of finite entries; ``size`` names ``n``."""
    return np.ascontiguousarray(finite_f64(x, name, (n,), f"({size},) = ({n},)"))


def _start(vi: VariationalIntegrator, q0: _ArrayLike, v0: _ArrayLike | None, p0: _ArrayLike | None) -> tuple[_Array, _Array]:
    q = _vector(q0, vi.nq, "q0", "nq")
    if v0 is not None and p0 is not None:
        raise InputError("give either v0 or p0, not both")
    if p0 is not None:
        return q, _vector(p0, vi.n, "p0")
    if v0 is None:
        return q, np.zeros(vi.n)  # at rest p = M(q)·0
    return q, _f64(vi.momentum(q, _vector(v0, vi.n, "v0")), "v0")


def tracking_lqr(
    vi: VariationalIntegrator,
    traj: Trajectory,
    Q: _ArrayLike | None = None,
    R: _ArrayLike | None = None,
    QN: _ArrayLike | None = None,
    *,
    actuated: Sequence[int] | None = None,
) -> LqrSolution:
    """Time-varying LQR about a trajectory: linearises every step in parallel
    (``vi.linearize``) and solves the Riccati recursion. Defaults ``Q = R = QN = I`` (the
    thesis's choice). Returns gains (N, m, 2n) for the ``actuated`` joints."""
    act, m = _actuated(vi, actuated)
    a, b = vi.linearize(traj)
    if act is not None:
        b = b[:, :, act]
    n2 = 2 * vi.n
    return lqr(a, b, _weight(Q, n2, len(traj), "Q", 1.0), _weight(R, m, len(traj), "R", 1.0), _weight(QN, n2, None, "QN", 1.0))


def closed_loop_rollout(
    vi: VariationalIntegrator,
    q0: _ArrayLike,
    v0: _ArrayLike | None = None,
    *,
    p0: _ArrayLike | None = None,
    x_ref: _ArrayLike,
    K: _ArrayLike,
    u_ref: _ArrayLike | None = None,
    actuated: Sequence[int] | None = None,
    steps: int | None = None,
) -> ClosedLoopRollout:
    """Simulates ``u_k = u_ref,k − K_k (x_k ⊖ x_ref,k)`` with the VI step (Newton solve per
    step), ``x = (q, p)``, ``⊖`` the state difference of the gains' linearisation
    (``model.difference`` on the configuration, as :func:`tracking_lqr`'s and the iLQR gains
    ``K``, which are ``−K`` here). ``x_ref``: (N+1, nq + n) or (nq + n,) (an equilibrium; then
    give ``steps``); ``K``: (N, m, 2n) or (m, 2n) (time-invariant, e.g. from :func:`dlqr`);
    ``u_ref``: (N, m), (m,) or None (zero)."""
    act, m = _actuated(vi, actuated)
    nx = vi.nq + vi.n
    q, p = _start(vi, q0, v0, p0)
    xr = _f64(x_ref, "x_ref")
    gains = _f64(K, "K")
    if steps is not None:
        steps = integer(steps, "steps", 1)
    else:
        if xr.ndim == 2:
            steps = xr.shape[0] - 1
        elif gains.ndim == 3:
            steps = gains.shape[0]
        else:
            raise InputError("constant x_ref and K: give the number of steps")
    xr = _rows(xr, steps + 1, nx, "x_ref")
    if gains.ndim == 2:
        gains = _f64(np.broadcast_to(gains, (steps, *gains.shape)), "K")
    qs, ps, us = _core._optim_closed_loop(vi, q, p, xr, _rows(u_ref, steps, m, "u_ref"), gains, act)
    return ClosedLoopRollout(qs, ps, us)


def _horizon(steps: int | None) -> int | None:
    """``steps`` checked to be an int >= 1 (or None)."""
    return None if steps is None else integer(steps, "steps", 1)


def _initial_controls(vi: VariationalIntegrator, act: list[int] | None, m: int, U_init: _ArrayLike | None, steps: int | None) -> _Array:
    n = vi.n
    steps = _horizon(steps)
    if U_init is None:
        if steps is None:
            raise InputError("give U_init (N, m) or the number of steps")
        return zeros((steps, m), "the zero controls U_init of steps")
    u0 = _f64(U_init, "U_init")
    if u0.ndim == 2 and act is not None and u0.shape[1] == n and m != n:
        others = [i for i in range(n) if i not in act]
        if np.any(u0[:, others] != 0):
            raise InputError("U_init has nonzero forces on unactuated joints")
        u0 = _f64(u0[:, act], "U_init")
    if u0.ndim != 2 or u0.shape[1] != m:
        raise InputError(f"U_init has shape {u0.shape}, expected (N, m) = (N, {m})")
    if steps is not None and u0.shape[0] != steps:
        raise InputError(f"U_init has {u0.shape[0]} rows but steps = {steps}")
    return u0


@dataclass(frozen=True)
class Track:
    """A point held near a target: ``½ w_k |p(q_k) − p*_k|²`` at every stage ``k = 0..N``
    (``N`` the terminal stage), ``p`` the world position of ``point``, a frame name or
    ``"com"`` (the centre of mass). ``target``: (3,) for every stage, or (N+1, 3);
    ``weight``: a number for every stage, or (N+1,) (zero: the stage ignores the point, e.g.
    a foot in stance); ``offset``: (3,) the tracked point in the frame's axes (default its
    origin; none for ``"com"``): three points of one body not on a line track its placement.
    A swing foot following its path, a centre-of-mass reference, a reaching target."""

    point: str
    target: _ArrayLike
    weight: _ArrayLike = 1.0
    offset: _ArrayLike = (0.0, 0.0, 0.0)

    def _native(self, N: int, i: int) -> tuple[str, _Array, _Array, _Array]:
        t = real_f64(self.target, f"tracks[{i}].target")
        if t.shape == (3,):
            t = t[None, :]
        if t.ndim != 2 or t.shape[1] != 3 or t.shape[0] not in (1, N + 1):
            raise InputError(f"tracks[{i}].target has shape {t.shape}, expected (3,) or (N+1, 3) = ({N + 1}, 3)")
        w = real_f64(self.weight, f"tracks[{i}].weight")
        if w.ndim == 0:
            w = np.full(N + 1, float(w))
        if w.shape != (N + 1,):
            raise InputError(f"tracks[{i}].weight has shape {w.shape}, expected a number or (N+1,) = ({N + 1},)")
        return str(self.point), t, w, real_f64(self.offset, f"tracks[{i}].offset")


@dataclass(frozen=True)
class FrictionCone:
    """The friction cone ``μ f_z ≥ |f_t|`` of a point contact of the VI, as the penalty
    ``½ weight · min(0, μ f_z − √(|f_t|² + tip²))²`` on every step where it holds, ``f = −λ/dt``
    the contact's mean world force from the multipliers of its three constraints, which start
    at row ``first`` of the integrator's constraints (:func:`vidyn.point_contact`; for a
    :class:`vidyn.ContactSchedule`, ``rows[name].start``, or all at once with
    ``ContactSchedule.friction_cones``). The cone also makes the contact unilateral
    (``f_z ≥ tip/μ``). Exact gradient through the multipliers' derivatives (read from the
    steps the optimiser solved), Gauss–Newton Hessian plus the cone's own curvature; iLQR and
    FDDP decide which cones are violated at the step they take, not only at the current
    trajectory (``vidyn_optim::hinge``)."""

    first: int
    mu: float = 0.7
    weight: float = 1.0
    tip: float = 1e-2

    def _native(self, i: int) -> tuple[int, float, float, float]:
        if isinstance(self.first, bool) or not isinstance(self.first, (int, np.integer)) or self.first < 0:
            raise InputError(f"friction[{i}].first is {self.first!r}, expected an int >= 0: the first of a point contact's three rows")
        return int(self.first), float(self.mu), float(self.weight), float(self.tip)


def _tracks(
    tracks: Sequence[Track] | None, frame: str | None, frame_target: _ArrayLike | None, frame_weight: float, frame_weight_terminal: float, N: int
) -> list[tuple[str, _Array, _Array, _Array]]:
    """The tracked points, the reaching cost of ``frame``/``frame_target`` among them."""
    out = list(tracks or ())
    if any(not isinstance(t, Track) for t in out):
        raise InputError(f"tracks must be vidyn.optim.Track objects, got {[type(t).__name__ for t in out]}")
    if (frame is None) != (frame_target is None):
        raise InputError("give both frame and frame_target, or neither")
    if frame is not None:
        t = finite_f64(frame_target, "frame_target", (3,))
        w, w_end = (real(w, name) for w, name in ((frame_weight, "frame_weight"), (frame_weight_terminal, "frame_weight_terminal")))
        for name, v in (("frame_weight", w), ("frame_weight_terminal", w_end)):
            if not (np.isfinite(v) and v >= 0):
                raise InputError(f"{name} is {v!r}, expected a finite weight >= 0")
        weights = np.full(N + 1, w)
        weights[N] = w_end
        out.append(Track(str(frame), t, weights))
    return [t._native(N, i) for i, t in enumerate(out)]


def _cost_object(cost: StageCost | None, cost_state: str, given: dict[str, Any]) -> _CostAdapter | None:
    if cost_state not in ("momentum", "velocity"):
        raise InputError(f"cost_state must be 'momentum' or 'velocity', got {cost_state!r}")
    if cost is None:
        return None
    clash = [k for k, v in given.items() if v is not None]
    if clash or cost_state != "momentum":
        raise InputError(f"a Python cost replaces the built-in one: do not also give {', '.join(clash) or 'cost_state'}")
    return _CostAdapter(cost)


class Problem:
    """An optimal-control problem on a VI, read and checked once: the integrator, the initial
    state ``q0`` with velocity ``v0`` (or momentum ``p0``; rest by default), the initial controls
    ``U_init`` (N, m) (zeros for ``steps`` steps if omitted; (N, n) is accepted when the
    unactuated columns are zero), the ``actuated`` joints and the cost (module docstring):
    ``Q`` (running state weight, default 0), ``R`` (control, default 1), ``QN`` (terminal,
    default 0), references ``x_ref`` ((nq + n,) or (N+1, nq + n), ``(q, p)``; default the
    model's neutral configuration at rest; in ``(q, v)`` when ``cost_state="velocity"``) and
    ``u_ref`` ((m,) or (N, m)); ``frame``, ``frame_target`` (3,):
    adds ``½ frame_weight |p_frame(q_k) − p*|²`` at every step and
    ``½ frame_weight_terminal |p_frame(q_N) − p*|²`` at the end (world position of the named
    frame); ``tracks``: :class:`Track` points (frames, ``"com"``) with per-stage targets and
    weights; ``friction``: :class:`FrictionCone` penalties on contact forces (a constrained
    VI; not with ``coordinates="velocity"``); ``cost``: a :class:`StageCost` used *instead* of
    all of these.

    :func:`ilqr` and :func:`projection` solve it, as often as wanted (other methods, limits or
    tolerances) without reading the arrays again; given their problem keywords instead, they
    build one. Read-only: ``vi``, ``q0``, ``p0`` (n,), ``U_init`` (N, m), ``actuated``,
    ``cost_state``, ``steps``."""

    __slots__ = ("vi", "q0", "p0", "U_init", "actuated", "cost_state", "_native")
    vi: VariationalIntegrator
    q0: _Array
    p0: _Array
    U_init: _Array
    actuated: list[int] | None
    cost_state: str
    _native: _core._Problem

    def __init__(
        self,
        vi: VariationalIntegrator,
        q0: _ArrayLike,
        v0: _ArrayLike | None = None,
        U_init: _ArrayLike | None = None,
        *,
        p0: _ArrayLike | None = None,
        steps: int | None = None,
        Q: _ArrayLike | None = None,
        R: _ArrayLike | None = None,
        QN: _ArrayLike | None = None,
        x_ref: _ArrayLike | None = None,
        u_ref: _ArrayLike | None = None,
        actuated: Sequence[int] | None = None,
        cost_state: Literal["momentum", "velocity"] = "momentum",
        frame: str | None = None,
        frame_target: _ArrayLike | None = None,
        frame_weight: float = 0.0,
        frame_weight_terminal: float = 1.0,
        tracks: Sequence[Track] | None = None,
        friction: Sequence[FrictionCone] | None = None,
        cost: StageCost | None = None,
    ) -> None:
        act, m = _actuated(vi, actuated)
        n2, nx = 2 * vi.n, vi.nq + vi.n
        q, p = _start(vi, q0, v0, p0)
        if x_ref is None and vi.nq != vi.n:
            x_ref = np.concatenate([vi.model.neutral(), np.zeros(vi.n)])
        u0 = _initial_controls(vi, act, m, U_init, steps)
        adapter = _cost_object(cost, cost_state, dict(Q=Q, R=R, QN=QN, x_ref=x_ref, u_ref=u_ref, frame=frame, tracks=tracks, friction=friction))
        if any(not isinstance(c, FrictionCone) for c in friction or ()):
            raise InputError("friction must be a list of vidyn.optim.FrictionCone")
        N = u0.shape[0]
        points = _tracks(tracks, frame, frame_target, frame_weight, frame_weight_terminal, N)
        core = _core._Problem(
            vi,
            q,
            p,
            u0,
            _stage_weight(Q, n2, N, "Q", 0.0),
            _stage_weight(R, m, N, "R", 1.0),
            _weight(QN, n2, None, "QN", 0.0),
            _rows(x_ref, N + 1, nx, "x_ref"),
            _rows(u_ref, N, m, "u_ref"),
            act,
            cost_state == "velocity",
            points,
            [c._native(i) for i, c in enumerate(friction or ())],
            adapter,
        )
        for name, value in (("vi", vi), ("q0", q), ("p0", p), ("U_init", u0), ("actuated", act), ("cost_state", cost_state), ("_native", core)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Problem is read-only (tried to set {name!r}); build a new one")

    @property
    def steps(self) -> int:
        """The number of steps N."""
        return int(self.U_init.shape[0])

    def __repr__(self) -> str:
        return f"Problem(n={self.vi.n}, m={self.U_init.shape[1]}, steps={self.steps}, cost_state={self.cost_state!r})"


# The problem keywords of ilqr/projection and their defaults (None: absent).
_PROBLEM_DEFAULTS: dict[str, Any] = dict(
    q0=None,
    v0=None,
    U_init=None,
    p0=None,
    steps=None,
    Q=None,
    R=None,
    QN=None,
    x_ref=None,
    u_ref=None,
    actuated=None,
    cost_state="momentum",
    frame=None,
    frame_target=None,
    frame_weight=0.0,
    frame_weight_terminal=1.0,
    tracks=None,
    friction=None,
    cost=None,
)


def _problem(vi: VariationalIntegrator | Problem, given: dict[str, Any]) -> Problem:
    """``vi`` itself when it is a Problem (then no problem keyword may be given), else the
    problem the keywords describe."""
    if isinstance(vi, Problem):
        clash = [k for k, v in given.items() if (v is not None) if _PROBLEM_DEFAULTS[k] is None or v != _PROBLEM_DEFAULTS[k]]
        if clash:
            raise InputError(f"a Problem is given, and it holds the problem's arguments: give {', '.join(clash)} to Problem, not to the solver")
        return vi
    if given["q0"] is None:
        raise InputError("give a Problem, or the integrator and q0")
    q0 = given.pop("q0")
    return Problem(vi, q0, **given)


def _limits(u_min: _ArrayLike | None, u_max: _ArrayLike | None, m: int) -> tuple[_Array | None, _Array | None]:
    """The control limits as (m,) float64 each (a number for every control), or None:
    ``u_min`` finite or -inf, ``u_max`` finite or +inf (no limit)."""

    def limit(b: _ArrayLike | None, name: str, unbounded: float) -> _Array | None:
        if b is None:
            return None
        a = real_f64(b, name)
        if a.ndim == 0:
            a = np.full(m, float(a))
        if a.shape != (m,):
            raise InputError(f"{name} has shape {a.shape}, expected (m,) = ({m},)")
        bad = np.flatnonzero(~(np.isfinite(a) | (a == unbounded)))
        if bad.size:
            raise InputError(f"{name}[{bad[0]}] is {a[bad[0]]}, expected a finite limit or {unbounded} (none)")
        return np.ascontiguousarray(a)

    return limit(u_min, "u_min", -np.inf), limit(u_max, "u_max", np.inf)


def _limit_lists(u_min: _ArrayLike | None, u_max: _ArrayLike | None, m: int) -> tuple[list[float] | None, list[float] | None]:
    """:func:`_limits` as lists of floats."""
    lower, upper = _limits(u_min, u_max, m)
    return (None if lower is None else lower.tolist()), (None if upper is None else upper.tolist())


def ilqr(
    vi: VariationalIntegrator | Problem | MaximalIntegrator,
    q0: _ArrayLike | None = None,
    v0: _ArrayLike | None = None,
    U_init: _ArrayLike | None = None,
    *,
    p0: _ArrayLike | None = None,
    steps: int | None = None,
    Q: _ArrayLike | None = None,
    R: _ArrayLike | None = None,
    QN: _ArrayLike | None = None,
    x_ref: _ArrayLike | None = None,
    u_ref: _ArrayLike | None = None,
    u_min: _ArrayLike | None = None,
    u_max: _ArrayLike | None = None,
    actuated: Sequence[int] | None = None,
    cost_state: Literal["momentum", "velocity"] = "momentum",
    frame: str | None = None,
    frame_target: _ArrayLike | None = None,
    frame_weight: float = 0.0,
    frame_weight_terminal: float = 1.0,
    tracks: Sequence[Track] | None = None,
    friction: Sequence[FrictionCone] | None = None,
    cost: StageCost | None = None,
    method: Literal["ilqr", "ddp"] = "ilqr",
    max_iterations: int = 100,
    tolerance: float = 1e-8,
    mu_init: float = 0.0,
    alpha_max: float = 4.0,
    fitted_step: bool = True,
    coordinates: Literal["momentum", "velocity"] = "momentum",
    xreg: float | None = None,
) -> IlqrResult:
    """iLQR on a :class:`Problem`, or on the one its keywords describe (``vi``, ``q0``, ``v0``,
    ``U_init``, ``p0``, ``steps``, ``Q``, ``R``, ``QN``, ``x_ref``, ``u_ref``, ``actuated``,
    ``cost_state``, ``frame…``, ``tracks``, ``friction``, ``cost``: see :class:`Problem`). ``u_min``, ``u_max``:
    (m,) control limits (``±inf`` allowed). Stops when the expected decrease of a full step is
    at most ``tolerance·max(1, |J|)``. The line search tries ``α = 1, ½, ¼, …``; after two steps
    in a row that each gained over 1.5 times, or under half, the decrease the model predicted,
    it first tries the step those decreases fit: a longer one up to ``alpha_max`` (halved after
    each rejection, none below 1.5), kept if it beats the full step's prediction (``alpha_max=1``:
    none), or a shorter one (at least ¼) judged as any (vidyn-optim's module
    ``ilqr::fitted_step``; by :func:`fddp` ANYmal's jump in 11 iterations instead of 23,
    Talos's walk in 9 instead of 14). ``fitted_step=False``: every line search starts at
    ``α = 1``, as crocoddyl's. ``xreg`` (≥ 0; None: 0 here, 1e-2 for :func:`fddp`): the backward
    pass forms the next knot's value Hessian as ``V_xx + ρ·1`` (crocoddyl's ``xreg``) with
    ``ρ = xreg`` at first, a tenth of it after a full step and zero after two in a row, raised
    tenfold (to at least ``xreg/10``) after a shortened or refused one, and zero whenever
    convergence is judged: a proximal term on the states' deviation that shortens the first
    steps where the linearisation stops holding along the horizon, without moving the optimum
    (vidyn-optim's module ``ilqr::state_regularisation``). Its value is absolute: a problem
    whose value Hessians are small against it is damped in its first iterations (the
    gravity-free cart-pole's iLQR takes 9 iterations instead of 8 with ``xreg=1e-2``; by
    :func:`fddp` ANYmal's walk takes 8 instead of 16, BENCHMARKS.md, session 33).
    ``method="ddp"``: full DDP on the VI's
    λ-contracted second derivatives (exact, also with holonomic constraints and contact
    schedules, on fixed and floating bases: see the module docs; NotImplementedError with
    kinematic joints or body wrenches). Far from the optimum its exact ``Q_uu``
    may be indefinite: an iteration whose exact model is indefinite at the current
    regularisation, or has no acceptable step, is done on the Gauss–Newton model instead (on
    the free box of ``tests/test_optim_lie_group.py``: 2 DDP iterations against 12 of iLQR from
    a rough iLQR solution, 6 against 17 from zero controls; on ANYmal's trot 4 against iLQR's
    4 from the holding torques). The Newton solve failing on the
    *initial* rollout raises ConvergenceError; later failures only shorten the line search.
    Exceptions raised by a Python ``cost`` propagate.

    ``coordinates``: the state the iLQR iterates in, the VI's ``(q, p)`` (default) or
    ``(q, v)`` (``"velocity"``: only with ``cost_state="velocity"`` and ``method="ilqr"``, no
    kinematic joints). Both are exact; they change what the Gauss–Newton model neglects (in
    ``(q, v)`` the velocity cost is exactly quadratic), hence the iteration count, which
    either may win (``BENCHMARKS.md``: the gravity-free cart-pole 6 iterations instead of 8, the
    panda reach 20 instead of 16 with ``fitted_step=False``, 16 either way with fitted steps). The result is reported in ``(q, p)`` either way: ``x``
    with ``p_k = M(q_k) v_k``, and ``K`` mapped by ``∂(q, v)/∂(q, p)`` (the same feedback to
    first order).

    On a :class:`vidyn.MaximalIntegrator` (a tree of revolute and prismatic joints without loop
    closures) the state is the minimal coordinates ``x = (q, v)``, ``v_k = (q_k − q_{k−1})/Δt``,
    with the integrator's exact minimal-coordinate linearisation, and the cost is quadratic on
    that state (``Q``, ``QN`` (2n, 2n) or diagonals; ``x_ref`` (2n,) or (N+1, 2n), default
    zero); tracked points, friction cones, Python costs, ``p0``, ``cost_state``,
    ``coordinates`` and ``method="ddp"`` are refused there."""
    if isinstance(vi, MaximalIntegrator):
        _refuse_on_maximal(dict(p0=p0, frame=frame, tracks=tracks, friction=friction, cost=cost, xreg=xreg), cost_state, coordinates)
        if q0 is None:
            raise InputError("q0 is required")
        return _ilqr_maximal(vi, q0, v0, U_init, steps, Q, R, QN, x_ref, u_ref, actuated, u_min, u_max, method, max_iterations, tolerance, mu_init, alpha_max=alpha_max, fitted_step=fitted_step)
    problem = _problem(vi, dict(q0=q0, v0=v0, U_init=U_init, p0=p0, steps=steps, Q=Q, R=R, QN=QN, x_ref=x_ref, u_ref=u_ref, actuated=actuated, cost_state=cost_state, frame=frame, frame_target=frame_target, frame_weight=frame_weight, frame_weight_terminal=frame_weight_terminal, tracks=tracks, friction=friction, cost=cost))
    m = problem.U_init.shape[1]
    if coordinates not in ("momentum", "velocity"):
        raise InputError(f"coordinates must be 'momentum' or 'velocity', got {coordinates!r}")
    out = _core._optim_ilqr(
        problem._native, *_limits(u_min, u_max, m), method, max_iterations, tolerance, mu_init, coordinates == "velocity", alpha_max=alpha_max, fitted_step=fitted_step, xreg=_xreg(xreg)
    )
    return _result(out, _Resimulate(problem.vi, problem.q0, problem.p0, out.U))


def _xreg(xreg: float | None) -> float | None:
    """``xreg`` checked: a finite number ≥ 0, or None (the solver's default)."""
    if xreg is None:
        return None
    try:
        value = float(xreg)
    except (TypeError, ValueError):
        raise InputError(f"xreg must be a finite number ≥ 0, got {xreg!r}") from None
    if not (value >= 0.0 and np.isfinite(value)):
        raise InputError(f"xreg must be a finite number ≥ 0, got {xreg!r}")
    return value


def _refuse_on_maximal(given: dict[str, Any], cost_state: str, coordinates: str) -> None:
    """InputError naming the keywords of ``given`` that are set (and ``cost_state``,
    ``coordinates`` when not the default): the optimisers on a MaximalIntegrator do not take
    them."""
    names = [k for k, v in given.items() if v is not None] + (["cost_state"] if cost_state != "momentum" else []) + (["coordinates"] if coordinates != "momentum" else [])
    if names:
        raise InputError(f"{', '.join(names)}: not supported on a MaximalIntegrator (it takes q0, v0, U_init, steps, Q, R, QN, x_ref, u_ref, actuated, u_min, u_max, method, max_iterations, tolerance, mu_init; X_init for fddp)")


def _ilqr_maximal(
    mi: MaximalIntegrator,
    q0: _ArrayLike,
    v0: _ArrayLike | None,
    U_init: _ArrayLike | None,
    steps: int | None,
    Q: _ArrayLike | None,
    R: _ArrayLike | None,
    QN: _ArrayLike | None,
    x_ref: _ArrayLike | None,
    u_ref: _ArrayLike | None,
    actuated: Sequence[int] | None,
    u_min: _ArrayLike | None,
    u_max: _ArrayLike | None,
    method: str,
    max_iterations: int,
    tolerance: float,
    mu_init: float,
    X_init: _ArrayLike | None = None,
    alpha_max: float = 4.0,
    fitted_step: bool = True,
) -> IlqrResult:
    """:func:`ilqr` on a MaximalIntegrator (see there); with ``X_init`` (N+1, n) joint
    coordinates (velocities zero) or (N+1, 2n) states, :func:`fddp`."""
    n = mi.model.nv
    act = None if actuated is None else _indices(actuated, "actuated")
    m = n if act is None else len(act)
    q = _vector(q0, mi.model.nq, "q0", "model.nq")
    v = np.zeros(n) if v0 is None else _vector(v0, n, "v0", "model.nv")
    steps = _horizon(steps)
    if U_init is None:
        if steps is None:
            raise InputError("give U_init (N, m) or the number of steps")
        u0 = zeros((steps, m), "the zero controls U_init of steps")
    else:
        u0 = _f64(U_init, "U_init")
        if u0.ndim != 2 or u0.shape[1] != m or (steps is not None and u0.shape[0] != steps):
            raise InputError(f"U_init has shape {u0.shape}, expected (N, m) = (N, {m})")
    N = u0.shape[0]
    guess = None
    if X_init is not None:
        guess = _f64(X_init, "X_init")
        if guess.shape == (N + 1, n):
            guess = np.hstack([guess, np.zeros((N + 1, n))])
        if guess.shape != (N + 1, 2 * n):
            raise InputError(f"X_init has shape {guess.shape}, expected (N+1, n) = ({N + 1}, {n}) or (N+1, 2n) = ({N + 1}, {2 * n})")
    lower, upper = _limit_lists(u_min, u_max, m)
    out = _core._optim_ilqr_maximal(
        mi,
        np.concatenate([q, v]),
        u0,
        _stage_weight(Q, 2 * n, N, "Q", 0.0),
        _stage_weight(R, m, N, "R", 1.0),
        _weight(QN, 2 * n, None, "QN", 0.0),
        _rows(np.zeros(2 * n) if x_ref is None else x_ref, N + 1, 2 * n, "x_ref"),
        _rows(u_ref, N, m, "u_ref"),
        act,
        lower,
        upper,
        max_iterations,
        tolerance,
        mu_init,
        method,
        None if guess is None else np.ascontiguousarray(guess),
        alpha_max=alpha_max,
        fitted_step=fitted_step,
    )
    return _result(out, _ResimulateMaximal(mi, q, v, out.U), (out.x[:, :n], np.zeros((N + 1, 0))))


def fddp(
    vi: VariationalIntegrator | Problem | MaximalIntegrator,
    q0: _ArrayLike | None = None,
    X_init: _ArrayLike | None = None,
    U_init: _ArrayLike | None = None,
    *,
    v0: _ArrayLike | None = None,
    p0: _ArrayLike | None = None,
    steps: int | None = None,
    Q: _ArrayLike | None = None,
    R: _ArrayLike | None = None,
    QN: _ArrayLike | None = None,
    x_ref: _ArrayLike | None = None,
    u_ref: _ArrayLike | None = None,
    actuated: Sequence[int] | None = None,
    cost_state: Literal["momentum", "velocity"] = "momentum",
    frame: str | None = None,
    frame_target: _ArrayLike | None = None,
    frame_weight: float = 0.0,
    frame_weight_terminal: float = 1.0,
    tracks: Sequence[Track] | None = None,
    friction: Sequence[FrictionCone] | None = None,
    cost: StageCost | None = None,
    u_min: _ArrayLike | None = None,
    u_max: _ArrayLike | None = None,
    method: Literal["ilqr", "ddp"] = "ilqr",
    max_iterations: int = 100,
    tolerance: float = 1e-8,
    mu_init: float = 0.0,
    alpha_max: float = 4.0,
    fitted_step: bool = True,
    xreg: float | None = None,
) -> IlqrResult:
    """Multiple shooting (feasibility-driven DDP, crocoddyl's ``SolverFDDP``; Mastalli et al.
    2020) on the problem :func:`ilqr` takes, started from a *state guess* that need not follow
    the dynamics: ``X_init`` (N+1, nq) configurations (momenta zero) or (N+1, nq + n) states
    ``(q, p)`` — an interpolation between a start and a goal, a posture held, a reference
    motion —, with the controls ``U_init``. Each iteration is iLQR's on the linearisation along
    the guess, with the gaps ``f(x_k, u_k) ⊖ x_{k+1}`` folded into the backward pass; a full
    step closes every gap (the trajectory is then a rollout and the iteration iLQR's), a partial
    one keeps part of each. Use it where iLQR's first rollout of ``U_init`` falls apart (an
    unstable system, a poor control guess). The result is :func:`ilqr`'s; ``converged`` says the
    final trajectory is feasible too. ``u_min``, ``u_max``: (m,) control limits as in
    :func:`ilqr` (a box QP in the backward pass, crocoddyl's ``SolverBoxFDDP``);
    ``fitted_step``, ``alpha_max`` as in :func:`ilqr`, on feasible iterates
    (``fitted_step=False``: crocoddyl's line search, every one from ``α = 1``); ``xreg`` as in
    :func:`ilqr`, 1e-2 unless given (None): the first full steps from a guess drift over the
    horizon, and damping them took ANYmal's walk from 16 iterations to 8 and the cart-pole's
    swing-up from an interpolated guess from 37 to 23 (``xreg=0``: none).
    ``method="ddp"``: Gauss–Newton while gaps remain, then, once the trajectory is feasible,
    full DDP on the VI's exact λ-contracted second derivatives (as :func:`ilqr`'s; contact
    phases included); not with ``coordinates="velocity"``. On a :class:`vidyn.MaximalIntegrator` (see
    :func:`ilqr`) ``X_init`` is (N+1, n) joint coordinates or (N+1, 2n) states ``(q, v)``."""
    if X_init is None:
        raise InputError("X_init is required: the state guess (N+1, nq) or (N+1, nq + n) that multiple shooting starts from")
    if isinstance(vi, MaximalIntegrator):
        _refuse_on_maximal(dict(p0=p0, frame=frame, tracks=tracks, friction=friction, cost=cost, xreg=xreg), cost_state, "momentum")
        if q0 is None:
            raise InputError("q0 is required")
        return _ilqr_maximal(vi, q0, v0, U_init, steps, Q, R, QN, x_ref, u_ref, actuated, u_min, u_max, method, max_iterations, tolerance, mu_init, X_init, alpha_max, fitted_step)
    problem = _problem(vi, dict(q0=q0, v0=v0, U_init=U_init, p0=p0, steps=steps, Q=Q, R=R, QN=QN, x_ref=x_ref, u_ref=u_ref, actuated=actuated, cost_state=cost_state, frame=frame, frame_target=frame_target, frame_weight=frame_weight, frame_weight_terminal=frame_weight_terminal, tracks=tracks, friction=friction, cost=cost))
    guess = real_f64(X_init, "X_init")
    vi_, N = problem.vi, problem.steps
    if guess.ndim == 2 and guess.shape == (N + 1, vi_.nq):
        guess = np.hstack([guess, np.zeros((N + 1, vi_.n))])
    if guess.shape != (N + 1, vi_.nq + vi_.n):
        raise InputError(f"X_init has shape {guess.shape}, expected (N+1, nq) = ({N + 1}, {vi_.nq}) or (N+1, nq + n) = ({N + 1}, {vi_.nq + vi_.n})")
    m = problem.U_init.shape[1]
    out = _core._optim_ilqr(
        problem._native, *_limits(u_min, u_max, m), method, max_iterations, tolerance, mu_init, False, np.ascontiguousarray(guess), alpha_max, fitted_step, _xreg(xreg)
    )
    return _result(out, _Resimulate(problem.vi, problem.q0, problem.p0, out.U))


@dataclass(frozen=True)
class ProjectionResult:
    """Outcome of :func:`projection`: the final trajectory (``q``, ``p``, ``x`` (N+1, ·), controls
    ``U`` (N, n) of every joint and ``u`` (N, m) of the actuated ones), the projection gains ``K``
    (N, m, 2n) about it (a tracking controller ``u = u* − K (x ⊖ x*)``), ``cost``,
    ``cost_history`` (``[0]``: the first iterate), ``log`` (per iteration: ``cost``, ``slope`` =
    ``Dh∘δξ``, ``step`` λ, Armijo ``trials``, ``time``, and ``model``, the descent model used),
    ``status`` (``"converged"``: ``|Dh∘δξ| < tolerance``, ``"max_iterations"`` or
    ``"line_search_failed"``). ``trajectory`` re-simulates ``U`` with ``vi.rollout``.
    Results pickle and compare equal field by field, arrays bit for bit."""

    trajectory: Trajectory
    q: _Array
    p: _Array
    x: _Array
    U: _Array
    u: _Array
    K: _Array
    cost: float
    cost_history: _Array
    iterations: int
    converged: bool
    status: str
    message: str
    wall_time: float
    log: dict[str, Any]

    def __eq__(self, other: object) -> bool:
        return _fields_equal(self, other)


def projection(
    vi: VariationalIntegrator | Problem,
    q0: _ArrayLike | None = None,
    v0: _ArrayLike | None = None,
    U_init: _ArrayLike | None = None,
    *,
    p0: _ArrayLike | None = None,
    steps: int | None = None,
    x_guess: _ArrayLike | None = None,
    Q: _ArrayLike | None = None,
    R: _ArrayLike | None = None,
    QN: _ArrayLike | None = None,
    x_ref: _ArrayLike | None = None,
    u_ref: _ArrayLike | None = None,
    actuated: Sequence[int] | None = None,
    cost_state: Literal["momentum", "velocity"] = "momentum",
    frame: str | None = None,
    frame_target: _ArrayLike | None = None,
    frame_weight: float = 0.0,
    frame_weight_terminal: float = 1.0,
    tracks: Sequence[Track] | None = None,
    friction: Sequence[FrictionCone] | None = None,
    cost: StageCost | None = None,
    model: Literal["auto", "steepest", "quasi", "newton"] = "auto",
    newton_after: int = 10,
    max_iterations: int = 200,
    tolerance: float = 1e-6,
    proj_Q: _ArrayLike | None = None,
    proj_R: _ArrayLike | None = None,
    proj_QN: _ArrayLike | None = None,
) -> ProjectionResult:
    """Projection-operator trajectory optimisation (Johnson 2012, Ch. 6, Alg. 1 and 3).

    On a :class:`Problem`, or on the one its keywords describe, as for :func:`ilqr` (no
    control limits). The first iterate is the
    open-loop rollout of ``U_init``, or, with ``x_guess`` ((N+1, nq + n) in the VI state ``(q, p)``,
    e.g. the desired trajectory), its projection ``P(x_guess, U_init)``. On a floating base the
    directions live in the tangent space (``model.difference``) and a curve moves along one by
    ``model.integrate``. Each iteration: DLQR gains
    ``K`` about the iterate (weights ``proj_Q``, ``proj_R``, ``proj_QN``; identity by default),
    the descent direction of the LQ model ``model`` (``"auto"``: quasi-Newton, then Newton after
    ``newton_after`` iterations when the dynamics have second derivatives, as a VI does with
    or without holonomic constraints; ``"newton"`` raises NotImplementedError on a VI with
    kinematic joints or body wrenches), and the Armijo search
    ``P(ξ ⊕ λ δξ)`` (β = 0.7, α = 1e-5) that rejects failed projections. Stops when
    ``|Dh∘δξ| < tolerance`` (absolute, as in the thesis)."""
    problem = _problem(vi, dict(q0=q0, v0=v0, U_init=U_init, p0=p0, steps=steps, Q=Q, R=R, QN=QN, x_ref=x_ref, u_ref=u_ref, actuated=actuated, cost_state=cost_state, frame=frame, frame_target=frame_target, frame_weight=frame_weight, frame_weight_terminal=frame_weight_terminal, tracks=tracks, friction=friction, cost=cost))
    n2, m = 2 * problem.vi.n, problem.U_init.shape[1]
    out = _core._optim_projection(
        problem._native,
        None if x_guess is None else _f64(x_guess, "x_guess"),
        model,
        newton_after,
        max_iterations,
        tolerance,
        None if proj_Q is None else _weight(proj_Q, n2, None, "proj_Q", 1.0),
        None if proj_R is None else _weight(proj_R, m, None, "proj_R", 1.0),
        None if proj_QN is None else _weight(proj_QN, n2, None, "proj_QN", 1.0),
    )
    traj = problem.vi.rollout(problem.q0, p0=problem.p0, u=out.U)
    lg = out.log
    return ProjectionResult(
        trajectory=traj,
        q=out.q,
        p=out.p,
        x=out.x,
        U=out.U,
        u=out.u,
        K=out.K,
        cost=out.cost,
        cost_history=out.cost_history,
        iterations=out.iterations,
        converged=out.converged,
        status=out.status,
        message=out.message,
        wall_time=out.wall_time,
        log={"cost": lg.cost, "slope": lg.slope, "step": lg.step, "trials": lg.trials, "time": lg.time, "model": lg.model},
    )


def project(
    vi: VariationalIntegrator, x_bar: _ArrayLike, u_bar: _ArrayLike, K: _ArrayLike, *, actuated: Sequence[int] | None = None
) -> tuple[_Array, _Array]:
    """The projection ``P(ξ̄)`` of a curve ``ξ̄ = (x̄, ū)`` onto VI trajectories (Johnson 2012,
    eq. 6.10): ``x_0 = x̄_0``, ``u_k = ū_k − K_k (x_k ⊖ x̄_k)``, ``x_{k+1}`` the VI step.
    ``x_bar`` (N+1, nq + n) in ``(q, p)``, ``u_bar`` (N, m), ``K`` (N, m, 2n) (e.g.
    :func:`tracking_lqr`'s gains). Returns ``(x (N+1, nq + n), u (N, m))``; ``P(P(ξ̄)) = P(ξ̄)``."""
    act, _ = _actuated(vi, actuated)
    x, u = _core._optim_project(vi, _f64(x_bar, "x_bar"), _f64(u_bar, "u_bar"), _f64(K, "K"), act)
    return x, u


def _result(
    out: _core._IlqrOutput, resimulate: Callable[[], Trajectory | MaximalTrajectory | None], states: tuple[_Array, _Array] | None = None
) -> IlqrResult:
    """The :class:`IlqrResult` of a native run's output. ``states``: its ``q``, ``p``, by default
    the output's own, empty (0, 0) arrays where it has none."""
    if states is None:
        empty = np.zeros((0, 0))
        states = (empty if out.q is None else out.q, empty if out.p is None else out.p)
    lg = out.log
    return IlqrResult(
        q=states[0],
        p=states[1],
        x=out.x,
        U=out.U,
        u=out.u,
        k=out.k,
        K=out.K,
        cost=out.cost,
        cost_history=out.cost_history,
        iterations=out.iterations,
        converged=out.converged,
        status=out.status,
        message=out.message,
        wall_time=out.wall_time,
        timing={"linearize": out.time_linearize, "backward": out.time_backward, "forward": out.time_forward},
        log={
            "cost": lg.cost,
            "expected_reduction": lg.expected_reduction,
            "expected_reduction_alpha": lg.expected_reduction_alpha,
            "actual_reduction": lg.actual_reduction,
            "alpha": lg.alpha,
            "mu": lg.mu,
            "gradient_norm": lg.gradient_norm,
            "time": lg.time,
        },
        resimulate=resimulate,
    )


def ilqr_linear(
    A: _ArrayLike,
    B: _ArrayLike,
    x0: _ArrayLike,
    U_init: _ArrayLike,
    *,
    Q: _ArrayLike | None = None,
    R: _ArrayLike | None = None,
    QN: _ArrayLike | None = None,
    x_ref: _ArrayLike | None = None,
    u_ref: _ArrayLike | None = None,
    u_min: _ArrayLike | None = None,
    u_max: _ArrayLike | None = None,
    max_iterations: int = 100,
    tolerance: float = 1e-8,
    mu_init: float = 0.0,
    method: Literal["ilqr", "ddp"] = "ilqr",
    alpha_max: float = 4.0,
    fitted_step: bool = True,
) -> IlqrResult:
    """The same iLQR (or DDP, identical here: the second derivatives of a linear map vanish) on a time-varying linear system ``x_{k+1} = A_k x_k + B_k u_k``
    (A (N, nx, nx) or (nx, nx), B likewise): an LQ (or box-constrained LQ) solver, e.g. for a
    VI linearised once and held fixed. Without control limits it converges in one step.
    ``fitted_step``, ``alpha_max`` as in :func:`ilqr` (fitted steps follow steps whose decrease
    the model mispredicted, which on an LQ problem only the control limits' clamping can
    cause)."""
    u0 = _f64(U_init, "U_init")
    if u0.ndim != 2:
        raise InputError(f"U_init has shape {u0.shape}, expected (N, nu)")
    N, nu = u0.shape
    a, b = _f64(A, "A"), _f64(B, "B")
    if a.ndim == 2:
        a = _f64(np.broadcast_to(a, (N, *a.shape)), "A")
    if b.ndim == 2:
        b = _f64(np.broadcast_to(b, (N, *b.shape)), "B")
    if a.ndim != 3 or b.ndim != 3:
        raise InputError(f"A must be (N, nx, nx) and B (N, nx, nu); got {a.shape} and {b.shape}")
    nx = a.shape[1]

    lower, upper = _limit_lists(u_min, u_max, nu)

    out = _core._optim_ilqr_linear(
        a,
        b,
        _f64(x0, "x0"),
        u0,
        _stage_weight(Q, nx, N, "Q", 0.0),
        _stage_weight(R, nu, N, "R", 1.0),
        _weight(QN, nx, None, "QN", 0.0),
        _rows(x_ref, N + 1, nx, "x_ref"),
        _rows(u_ref, N, nu, "u_ref"),
        lower,
        upper,
        max_iterations,
        tolerance,
        mu_init,
        method,
        alpha_max,
        fitted_step,
    )
    return _result(out, _no_trajectory)
