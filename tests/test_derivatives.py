"""First-order derivatives of inverse and forward dynamics.

* Hypothesis over random trees (all five joint kinds): central differences on the
  configuration manifold (q ⊕ h e_k) and in v, τ; ``∂τ/∂a = M``, ``∂q̈/∂τ = M⁻¹``; the
  structural zeros (dofs not on one root path do not interact).
* Pinocchio's ``computeRNEADerivatives`` / ``computeABADerivatives`` on every example-robot-data
  robot that both libraries load, fixed and floating base.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vidyn
from strategies import model_specs, states
from tolerances import EPS, FD_RTOL, FD_STEP, IDENTITY_RTOL, ORACLE_RTOL, assert_close, cond, oracle_solve_rtol, relative_error


def central_difference(f, x0_dim: int, step_fn, h: float = FD_STEP) -> np.ndarray:
    """Columns (f(step(+h e_k)) − f(step(−h e_k))) / 2h; FD_STEP/FD_RTOL reasoning in tolerances.py."""
    cols = []
    for k in range(x0_dim):
        e = np.zeros(x0_dim)
        e[k] = h
        cols.append((f(step_fn(e)) - f(step_fn(-e))) / (2 * h))
    return np.array(cols).T if cols else np.zeros((0, 0))


def related(model) -> np.ndarray:
    """(nv, nv) mask: dofs j, k lie on one path to the root (the only non-zero entries)."""
    body_of_dof = np.repeat(np.arange(model.nbodies), np.diff([*model.idx_v, model.nv]))
    anc = np.zeros((model.nbodies, model.nbodies), dtype=bool)
    for i in range(model.nbodies):
        j = i
        while j >= 0:
            anc[i, j] = True
            j = model.parents[j]
    body_rel = anc | anc.T
    return body_rel[np.ix_(body_of_dof, body_of_dof)]


@given(st.data())
def test_rnea_derivatives_match_finite_differences(data):
    model = data.draw(model_specs(max_bodies=12), label="spec").build()
    s = data.draw(states(model), label="state")
    dq, dv, da = vidyn.rnea_derivatives(model, s.q, s.v, s.a)
    fd_q = central_difference(lambda q: vidyn.rnea(model, q, s.v, s.a), model.nv, lambda e: model.integrate(s.q, e))
    fd_v = central_difference(lambda v: vidyn.rnea(model, s.q, v, s.a), model.nv, lambda e: s.v + e)
    scale = max(1.0, float(np.max(np.abs(vidyn.rnea(model, s.q, s.v, s.a)), initial=0.0)))
    assert_close(dq, fd_q, FD_RTOL, scale=max(scale, float(np.max(np.abs(fd_q), initial=0.0))), what="dtau/dq vs FD")
    assert_close(dv, fd_v, FD_RTOL, scale=max(scale, float(np.max(np.abs(fd_v), initial=0.0))), what="dtau/dv vs FD")
    assert_close(da, vidyn.crba(model, s.q), IDENTITY_RTOL, what="dtau/da vs crba")
    zero = ~related(model)
    assert np.all(dq[zero] == 0) and np.all(dv[zero] == 0), "structural zeros"


@given(st.data())
def test_aba_derivatives_match_finite_differences(data):
    model = data.draw(model_specs(max_bodies=12), label="spec").build()
    s = data.draw(states(model), label="state")
    m = vidyn.crba(model, s.q)
    kappa = cond(m)
    dq, dv, dtau = vidyn.aba_derivatives(model, s.q, s.v, s.tau)
    fd_q = central_difference(lambda q: vidyn.aba(model, q, s.v, s.tau), model.nv, lambda e: model.integrate(s.q, e))
    fd_v = central_difference(lambda v: vidyn.aba(model, s.q, v, s.tau), model.nv, lambda e: s.v + e)
    # q̈ = M⁻¹(τ − b): both the differences and the analytic product lose cond(M) digits, and
    # the differences' round-off is ε·|q̈|/h (not ε·|J|/h), so |q̈| joins the scale
    rtol = FD_RTOL * max(1.0, kappa * 1e-3)
    qdd = vidyn.aba(model, s.q, s.v, s.tau)
    for name, ours, fd in (("dddq/dq", dq, fd_q), ("dddq/dv", dv, fd_v)):
        scale = max(float(np.max(np.abs(fd), initial=0.0)), float(np.max(np.abs(qdd), initial=0.0)))
        assert_close(ours, fd, rtol, scale=scale, what=f"{name} vs FD (cond M = {kappa:.1e})")
    assert_close(dtau, vidyn.minverse(model, s.q), 0.0, what="dddq/dtau is minverse")
    # implicit-function identity: M ∂q̈/∂q = −∂τ/∂q at a = q̈
    dtau_dq, _, _ = vidyn.rnea_derivatives(model, s.q, s.v, qdd)
    assert_close(m @ dq, -dtau_dq, 1e4 * EPS * kappa, scale=float(np.max(np.abs(dtau_dq), initial=1.0)), what="M ddq_dq = -dtau_dq")


# --- Pinocchio oracle ----------------------------------------------------------------------

pin = pytest.importorskip("pinocchio")
try:
    from test_pinocchio_oracle import ROBOTS, load_pair, symmetrise_upper
except pytest.skip.Exception:  # example-robot-data missing
    ROBOTS = {}
from pin_layout import ConfigurationMap  # noqa: E402


@pytest.mark.parametrize("floating_base", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_derivatives_match_pinocchio(robot, floating_base):
    try:
        vd, pm = load_pair(ROBOTS[robot], floating_base)
    except vidyn.UrdfError as exc:
        pytest.skip(f"rejected by vidyn (see test_pinocchio_oracle): {exc}")
    cmap = ConfigurationMap(vd, pm)
    pd = pm.createData()
    for seed in range(2):
        rng = np.random.default_rng(seed)
        q = vd.random_configuration(rng)
        v, a, tau = (rng.standard_normal(vd.nv) for _ in range(3))
        qp, vp, ap, taup = cmap.q_to_pin(q), cmap.v_to_pin(v), cmap.v_to_pin(a), cmap.v_to_pin(tau)
        dq, dv, da = vidyn.rnea_derivatives(vd, q, v, a)
        pq, pv, pa = (np.asarray(x).reshape(pm.nv, pm.nv) for x in pin.computeRNEADerivatives(pm, pd, qp, vp, ap))
        for name, ours, theirs in (("dtau_dq", dq, pq), ("dtau_dv", dv, pv), ("dtau_da", da, symmetrise_upper(pa, pm.nv))):
            err = relative_error(ours, cmap.matrix_to_vidyn(theirs))
            assert err <= ORACLE_RTOL, f"{robot}: {name} relative error {err:.2e}"
        m = vidyn.crba(vd, q)
        kappa = cond(m)
        if not np.isfinite(kappa) or kappa > 1e12:
            continue  # forward dynamics undefined (massless subtrees)
        ddq, ddv, ddtau = vidyn.aba_derivatives(vd, q, v, tau)
        pin.computeABADerivatives(pm, pd, qp, vp, taup)
        theirs = {"dddq_dq": pd.ddq_dq, "dddq_dv": pd.ddq_dv, "dddq_dtau": symmetrise_upper(pd.Minv, pm.nv)}
        tol = oracle_solve_rtol(kappa)
        for name, ours in (("dddq_dq", ddq), ("dddq_dv", ddv), ("dddq_dtau", ddtau)):
            err = relative_error(ours, cmap.matrix_to_vidyn(np.asarray(theirs[name]).reshape(pm.nv, pm.nv)))
            assert err <= tol, f"{robot}: {name} relative error {err:.2e} > {tol:.1e} (cond M = {kappa:.1e})"
