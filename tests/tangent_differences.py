"""Central differences of a variational integrator's step on the Lie group, the oracle of its
exact linearisation: inputs moved by ``model.integrate`` (``q``) and added (``p``, ``u``),
outputs read by ``model.difference`` (``q``) and subtracted (``p``)."""

from __future__ import annotations

import numpy as np

import vidyn


def step_jacobians(
    vi: vidyn.VariationalIntegrator, q: np.ndarray, p: np.ndarray, u: np.ndarray, k: int = 0, h: float = 1e-6, h_u: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(A, B)`` of step ``k`` from ``(q, p, u)`` by central differences of step ``h`` (``h_u``
    for the controls, ``h`` by default): (2n, 2n) and (2n, n) in the tangent coordinates of
    ``vi.linearize``."""
    model, n = vi.model, vi.n
    q1, p1 = vi.step(q, p, u, k=k)

    def f(x: np.ndarray, du: np.ndarray) -> np.ndarray:
        qn, pn = vi.step(model.integrate(q, x[:n]), p + x[n:], u + du, k=k)
        return np.concatenate([model.difference(q1, qn), pn - p1])

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
