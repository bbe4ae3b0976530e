"""Second-order derivatives of inverse dynamics (Singh, Russell & Wensing 2023), checked on
random trees with every joint kind by central differences of the *analytic* first-order
derivatives (STYLE.md §9: never double differences), plus the contracted forms.

Tensor layout (README): ``T[i, j, k] = d/dx_k (d tau_i / dy_j)`` (torque, inner, outer).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import vidyn
from strategies import model_specs, states
from tolerances import FD_RTOL, FD_STEP, IDENTITY_RTOL, assert_close


def stacked_difference(f, n: int, step, h: float = FD_STEP) -> np.ndarray:
    """(…, n) array whose last axis holds (f(step(+h e_k)) − f(step(−h e_k))) / 2h."""
    cols = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = h
        cols.append((f(step(e)) - f(step(-e))) / (2 * h))
    return np.stack(cols, axis=-1)


@given(st.data())
def test_second_order_tensors_match_differences_of_first_order(data):
    model = data.draw(model_specs(max_bodies=8), label="spec").build()
    s = data.draw(states(model), label="state")
    nv = model.nv
    d2q, d2v, d2qv, dm = vidyn.rnea_second_order(model, s.q, s.v, s.a)
    for t in (d2q, d2v, d2qv, dm):
        assert t.shape == (nv, nv, nv)
    on_manifold = lambda e: model.integrate(s.q, e)  # noqa: E731
    fd_q = stacked_difference(lambda q: vidyn.rnea_derivatives(model, q, s.v, s.a)[0], nv, on_manifold)
    fd_v = stacked_difference(lambda v: vidyn.rnea_derivatives(model, s.q, v, s.a)[1], nv, lambda e: s.v + e)
    fd_qv = stacked_difference(lambda v: vidyn.rnea_derivatives(model, s.q, v, s.a)[0], nv, lambda e: s.v + e)
    fd_m = stacked_difference(lambda q: vidyn.crba(model, q), nv, on_manifold)
    # first-order derivatives are O(|τ|)-sized: the tolerance reasoning of FD_RTOL applies
    # with the scale of the differentiated quantity
    for name, ours, fd in (("d2tau_dq2", d2q, fd_q), ("d2tau_dv2", d2v, fd_v), ("d2tau_dqdv", d2qv, fd_qv), ("dM_dq", dm, fd_m)):
        scale = max(float(np.max(np.abs(fd), initial=0.0)), 1.0)
        assert_close(ours, fd, FD_RTOL * 10, scale=scale, what=f"{name} vs differences of the first-order derivatives")
    # symmetries that hold for every joint kind
    assert_close(d2v, np.swapaxes(d2v, 1, 2), IDENTITY_RTOL, what="d2tau_dv2 symmetric in (j, k)")
    assert_close(dm, np.swapaxes(dm, 0, 1), IDENTITY_RTOL, what="dM_dq symmetric in (i, j)")


@given(st.data())
def test_contracted_forms_equal_contracted_tensors(data):
    model = data.draw(model_specs(max_bodies=10), label="spec").build()
    s = data.draw(states(model), label="state")
    lam = np.random.default_rng(s.seed).standard_normal(model.nv)
    full = vidyn.rnea_second_order(model, s.q, s.v, s.a)[:3]
    contracted = vidyn.rnea_second_order_contracted(model, s.q, s.v, s.a, lam)
    for name, t, c in zip(("d2tau_dq2", "d2tau_dv2", "d2tau_dqdv"), full, contracted):
        expected = np.einsum("i,ijk->jk", lam, t)
        assert_close(c, expected, IDENTITY_RTOL, scale=float(np.sum(np.abs(lam)) * np.max(np.abs(t), initial=1.0)), what=f"contracted {name}")
