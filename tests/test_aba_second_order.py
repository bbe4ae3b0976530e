"""Second-order derivatives of forward dynamics (Singh, Russell & Wensing 2023, eqs. 44–49),
on random trees with every joint kind, with and without external wrenches:

* central differences of the *analytic* first-order derivatives ``aba_derivatives`` (and of
  ``minverse`` for ``d2ddq_dtaudq``) — never double differences (STYLE.md §9);
* the implicit-function identities against ``rnea_second_order`` at ``ddq = aba(q, v, tau)``
  (exact up to round-off, so a tight tolerance);
* the contracted forms equal the contracted tensors.

Tensor layout (README): ``T[i, j, k] = d/dx_k (d ddq_i / dy_j)`` (acceleration, inner, outer).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import vidyn
from strategies import model_specs, states
from test_second_order import stacked_difference
from tolerances import EPS, FD_RTOL, IDENTITY_RTOL, assert_close, cond

NAMES = ("d2ddq_dq2", "d2ddq_dv2", "d2ddq_dqdv", "d2ddq_dtaudq")


def draw_case(data, max_bodies: int):
    model = data.draw(model_specs(max_bodies=max_bodies), label="spec").build()
    s = data.draw(states(model), label="state")
    rng = np.random.default_rng(s.seed)
    fext = rng.standard_normal((model.nbodies, 6)) * 5.0 if data.draw(st.booleans(), label="with fext") else None
    return model, s, fext


@given(st.data())
def test_aba_second_order_matches_differences_of_first_order(data):
    model, s, fext = draw_case(data, max_bodies=6)
    nv = model.nv
    tensors = vidyn.aba_second_order(model, s.q, s.v, s.tau, fext=fext)
    for t in tensors:
        assert t.shape == (nv, nv, nv)
    first = lambda q, v: vidyn.aba_derivatives(model, q, v, s.tau, fext=fext)  # noqa: E731
    on_manifold = lambda e: model.integrate(s.q, e)  # noqa: E731
    along_v = lambda e: s.v + e  # noqa: E731
    fd = (
        stacked_difference(lambda q: first(q, s.v)[0], nv, on_manifold),
        stacked_difference(lambda v: first(s.q, v)[1], nv, along_v),
        stacked_difference(lambda v: first(s.q, v)[0], nv, along_v),
        stacked_difference(lambda q: vidyn.minverse(model, q), nv, on_manifold),
    )
    # The first-order derivatives are M⁻¹(·) and carry a relative round-off ~cond(M)·eps, which
    # the difference quotient divides by h; as in test_derivatives.py the FD tolerance grows
    # with cond(M) beyond 1e3, and the scale includes the size of the differentiated
    # first-order derivatives (their round-off, not the result's, is what is amplified).
    kappa = cond(vidyn.crba(model, s.q))
    dq, dv, minv = first(s.q, s.v)
    base = max(1.0, *(float(np.max(np.abs(x), initial=0.0)) for x in (dq, dv, minv)))
    rtol = FD_RTOL * 10 * max(1.0, kappa * 1e-3)
    for name, ours, diff in zip(NAMES, tensors, fd):
        scale = max(base, float(np.max(np.abs(diff), initial=0.0)))
        assert_close(ours, diff, rtol, scale=scale, what=f"{name} vs differences of aba_derivatives (cond M = {kappa:.1e}, fext: {fext is not None})")
    assert_close(tensors[1], np.swapaxes(tensors[1], 1, 2), IDENTITY_RTOL, what="d2ddq_dv2 symmetric in (j, k)")
    assert_close(tensors[3], np.swapaxes(tensors[3], 0, 1), IDENTITY_RTOL, what="d2ddq_dtaudq symmetric in (i, j)")


@given(st.data())
def test_aba_second_order_is_the_implicit_function_of_rnea_second_order(data):
    """(46)–(49) written as linear identities: with H = rnea_second_order(q, v, ddq),
    M·d2ddq_dq2[:, b, c] = −(Hqq + dM[:, :, c]·FD_q[:, b] + dM[:, :, b]·FD_q[:, c]), etc."""
    model, s, fext = draw_case(data, max_bodies=10)
    ddq = vidyn.aba(model, s.q, s.v, s.tau, fext=fext)
    hqq, hvv, hqv, dm = vidyn.rnea_second_order(model, s.q, s.v, ddq, fext=fext)
    fq, fv, minv = vidyn.aba_derivatives(model, s.q, s.v, s.tau, fext=fext)
    m = vidyn.crba(model, s.q)
    tqq, tvv, tqv, ttq = vidyn.aba_second_order(model, s.q, s.v, s.tau, fext=fext)
    expected = {
        "d2ddq_dq2": -(hqq + np.einsum("alc,lb->abc", dm, fq) + np.einsum("alb,lc->abc", dm, fq)),
        "d2ddq_dv2": -hvv,
        "d2ddq_dqdv": -(hqv + np.einsum("alb,lc->abc", dm, fv)),
    }
    # a backward-stable solve: residual ~ eps·(‖M‖·|T| + |rhs|), a few hundred operations deep
    for name, t in zip(NAMES, (tqq, tvv, tqv)):
        lhs = np.einsum("al,lbc->abc", m, t)
        scale = float(np.max(np.abs(m))) * float(np.max(np.abs(t), initial=0.0)) + float(np.max(np.abs(expected[name]), initial=0.0))
        assert_close(lhs, expected[name], IDENTITY_RTOL, scale=scale, what=f"M {name} = -(inner term)")
    # (44): ∂(M⁻¹)/∂q_k = −M⁻¹ ∂M/∂q_k M⁻¹; the two M⁻¹ routes agree to cond(M)·eps
    kappa = cond(m)
    expected_tq = -np.einsum("al,lmk,mj->ajk", minv, dm, minv)
    assert_close(ttq, expected_tq, max(IDENTITY_RTOL, 1e4 * EPS * kappa), scale=float(np.max(np.abs(expected_tq), initial=0.0)), what="d2ddq_dtaudq = -Minv dM Minv")


@given(st.data())
def test_contracted_forms_equal_contracted_tensors(data):
    model, s, fext = draw_case(data, max_bodies=10)
    lam = np.random.default_rng(s.seed + 1).standard_normal(model.nv)
    full = vidyn.aba_second_order(model, s.q, s.v, s.tau, fext=fext)
    contracted = vidyn.aba_second_order_contracted(model, s.q, s.v, s.tau, lam, fext=fext)
    assert len(contracted) == 4
    # the contracted route goes through M⁻¹ (from the ABA) where the tensors use an LᵀDL solve:
    # they agree to cond(M)·eps relative to |lam|₁·|T|∞
    kappa = cond(vidyn.crba(model, s.q))
    for name, t, c in zip(NAMES, full, contracted):
        expected = np.einsum("i,ijk->jk", lam, t)
        scale = float(np.sum(np.abs(lam))) * float(np.max(np.abs(t), initial=1.0))
        assert_close(c, expected, max(IDENTITY_RTOL, 1e4 * EPS * kappa), scale=scale, what=f"contracted {name}")
