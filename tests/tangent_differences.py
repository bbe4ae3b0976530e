"""Central differences of a variational integrator's step on the Lie group, the oracle of its
exact linearisation (first and second order): inputs moved by ``model.integrate`` (``q``) and
added (``p``, ``u``), outputs read by ``model.difference`` (``q``) and subtracted (``p``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

import vidyn


def tangent_step(vi: vidyn.VariationalIntegrator, q: np.ndarray, p: np.ndarray, u: np.ndarray, k: int = 0) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The step map ``k`` in tangent coordinates about ``(q, p, u)``: ``x = (δq, δp)``, ``δu``
    -> ``(difference(q1, q1'), p1' − p1)`` with ``(q1, p1)`` the unperturbed step and
    ``(q1', p1')`` the step from ``(integrate(q, δq), p + δp, u + δu)``."""
    model, n = vi.model, vi.n
    q1, p1 = vi.step(q, p, u, k=k)

    def f(x: np.ndarray, du: np.ndarray) -> np.ndarray:
        qn, pn = vi.step(model.integrate(q, x[:n]), p + x[n:], u + du, k=k)
        return np.concatenate([model.difference(q1, qn), pn - p1])

    return f


def contracted_step(vi: vidyn.VariationalIntegrator, q: np.ndarray, p: np.ndarray, u: np.ndarray, lam: np.ndarray, k: int = 0) -> Callable[[np.ndarray], float]:
    """``φ(y) = λᵀ F(y)``, ``F`` the step map :func:`tangent_step` (``y = (δq, δp, δu)``, 3n),
    the map whose Hessian DDP on a manifold needs."""
    f = tangent_step(vi, q, p, u, k)
    n = vi.n
    return lambda y: lam @ f(y[: 2 * n], y[2 * n :])


def richardson_hessian(phi: Callable[[np.ndarray], float], h: np.ndarray) -> np.ndarray:
    """The Hessian of ``phi`` at 0 by the four-point second difference with steps ``h`` (one per
    input), ``D[j, k] = [φ(a + b) − φ(a − b) − φ(b − a) + φ(−a − b)] / (4 h_j h_k)`` with
    ``a = h_j e_j``, ``b = h_k e_k``, Richardson-extrapolated from ``h`` and ``2h``:
    ``(4 D(h) − D(2h)) / 3`` (truncation O(h⁴))."""
    m = len(h)
    eye = np.eye(m)

    def d(scale: float, j: int, k: int) -> float:
        a, b = scale * h[j] * eye[j], scale * h[k] * eye[k]
        return (phi(a + b) - phi(a - b) - phi(b - a) + phi(-a - b)) / (4 * scale**2 * h[j] * h[k])

    out = np.zeros((m, m))
    for j in range(m):
        for k in range(j, m):
            out[j, k] = out[k, j] = (4 * d(1.0, j, k) - d(2.0, j, k)) / 3
    return out


def step_jacobians(
    vi: vidyn.VariationalIntegrator, q: np.ndarray, p: np.ndarray, u: np.ndarray, k: int = 0, h: float = 1e-6, h_u: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)`` of step ``k`` from ``(q, p, u)`` by central differences of step ``h`` (``h_u``
    for the controls, ``h`` by default): (2n, 2n) and (2n, n) in the tangent coordinates of
    ``vi.linearize``."""
    n = vi.n
    f = tangent_step(vi, q, p, u, k)
    a = np.column_stack([(f(h * e, np.zeros(n)) - f(-h * e, np.zeros(n))) / (2 * h) for e in np.eye(2 * n)])
    hu = h if h_u is None else h_u
    b = np.column_stack([(f(np.zeros(2 * n), hu * e) - f(np.zeros(2 * n), -hu * e)) / (2 * hu) for e in np.eye(n)])
    return a, b


def extrapolated_step_jacobians(
    vi: vidyn.VariationalIntegrator, q: np.ndarray, p: np.ndarray, u: np.ndarray, k: int = 0, h: float = 2e-4
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`step_jacobians` extrapolated (Richardson): ``(4 D(h/2) − D(h)) / 3`` cancels the
    ``h²`` truncation of central differences ``D``, leaving ``O(h⁴)`` and the step's round-off
    over ``h``, so a moderate ``h`` serves steps whose third derivatives are large (a touchdown
    of Lobatto s = 3, whose gap closes by its first control point) and steps whose Newton noise
    is large (3n unknowns) alike."""
    a1, b1 = step_jacobians(vi, q, p, u, k, h)
    a2, b2 = step_jacobians(vi, q, p, u, k, h / 2)
    return (4 * a2 - a1) / 3, (4 * b2 - b1) / 3
