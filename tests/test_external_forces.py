"""External wrenches ``fext`` (nbodies, 6): row i acts on body i, ``[force; moment about body
i's origin]`` in body frame i — Pinocchio's ``fext`` in the local joint frames, minus its
universe entry.  A body-frame wrench turns with its body, so the q-derivatives get extra terms
(rust/rbd/src/algorithms/rnea_derivatives.rs, "External forces").

* Hypothesis over random trees (all joint kinds): the generalised force ``Σ J_iᵀ f_i``
  (``J_i`` the local Jacobian of body i, read off forward kinematics with unit velocities),
  ABA ∘ RNEA round trip, central differences of ``rnea``/``aba`` and of the first-order
  derivatives, which tensors the wrenches may change, contracted forms.
* Pinocchio as the oracle: ``rnea``, ``aba``, ``computeRNEADerivatives``,
  ``computeABADerivatives`` with ``fext`` on the same random trees and on a handful of
  example-robot-data robots (fixed and free-flyer base).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vidyn
from strategies import model_specs, states
from test_second_order import stacked_difference
from tolerances import ABA_RESIDUAL_RTOL, FD_RTOL, FD_STEP, IDENTITY_RTOL, ORACLE_RTOL, assert_close, cond, oracle_solve_rtol, relative_error


def central_difference(f, n: int, step, h: float = FD_STEP) -> np.ndarray:
    return stacked_difference(f, n, step, h)


def random_fext(model, seed: int, size: float = 5.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((model.nbodies, 6)) * size


def body_jacobians(model, q) -> np.ndarray:
    """(nbodies, 6, nv): column k of J_i is body i's velocity (own frame) for v = e_k."""
    zero = np.zeros(model.nv)
    cols = []
    for k in range(model.nv):
        e = zero.copy()
        e[k] = 1.0
        cols.append(vidyn.forward_kinematics(model, q, e, zero).velocities)
    return np.stack(cols, axis=-1) if cols else np.zeros((model.nbodies, 6, 0))


@given(st.data())
def test_wrenches_enter_as_generalised_forces(data):
    model = data.draw(model_specs(max_bodies=12), label="spec").build()
    s = data.draw(states(model), label="state")
    fext = random_fext(model, s.seed)
    jtf = np.einsum("bik,bi->k", body_jacobians(model, s.q), fext)
    tau = vidyn.rnea(model, s.q, s.v, s.a, fext=fext)
    plain = vidyn.rnea(model, s.q, s.v, s.a)
    assert_close(tau, plain - jtf, IDENTITY_RTOL, scale=float(np.max(np.abs(plain))) + float(np.max(np.abs(jtf), initial=0.0)), what="rnea(fext) = rnea - Σ Jᵀf")
    # None is the same as no argument, zeros the same as None
    assert_close(vidyn.rnea(model, s.q, s.v, s.a, fext=None), plain, 0.0, what="fext=None")
    assert_close(vidyn.rnea(model, s.q, s.v, s.a, np.zeros((model.nbodies, 6))), plain, 0.0, what="fext=0")
    # forward dynamics inverts it (residual in torque space, as ABA_RESIDUAL_RTOL)
    ddq = vidyn.aba(model, s.q, s.v, s.tau, fext=fext)
    back = vidyn.rnea(model, s.q, s.v, ddq, fext=fext)
    scale = float(np.max(np.abs(vidyn.crba(model, s.q)))) * float(np.max(np.abs(ddq), initial=0.0)) + float(np.max(np.abs(s.tau))) + float(np.max(np.abs(jtf), initial=0.0))
    assert_close(back, s.tau, ABA_RESIDUAL_RTOL, scale=scale, what="rnea(aba(tau, fext), fext) = tau")


def test_fext_shape_and_values_are_checked():
    model = vidyn.models.random_tree(4, seed=1)
    q, v = model.neutral(), np.zeros(model.nv)
    with pytest.raises(vidyn.InputError, match=r"fext has shape \(3, 6\), expected \(model.nbodies, 6\) = \(4, 6\)"):
        vidyn.rnea(model, q, v, v, fext=np.zeros((3, 6)))
    bad = np.zeros((4, 6))
    bad[2, 4] = np.nan
    with pytest.raises(vidyn.InputError, match=r"fext\[2, 4\] is not finite"):
        vidyn.aba_derivatives(model, q, v, v, fext=bad)


@given(st.data())
def test_first_order_derivatives_with_fext_match_finite_differences(data):
    model = data.draw(model_specs(max_bodies=10), label="spec").build()
    s = data.draw(states(model), label="state")
    fext = random_fext(model, s.seed)
    nv = model.nv
    on_manifold = lambda e: model.integrate(s.q, e)  # noqa: E731
    dq, dv, da = vidyn.rnea_derivatives(model, s.q, s.v, s.a, fext=fext)
    fd_q = central_difference(lambda q: vidyn.rnea(model, q, s.v, s.a, fext=fext), nv, on_manifold)
    scale = max(float(np.max(np.abs(fd_q), initial=0.0)), float(np.max(np.abs(vidyn.rnea(model, s.q, s.v, s.a, fext=fext)), initial=0.0)))
    assert_close(dq, fd_q, FD_RTOL, scale=scale, what="dtau/dq with fext vs FD")
    # the wrenches depend on q only
    pq, pv, pa = vidyn.rnea_derivatives(model, s.q, s.v, s.a)
    assert_close(dv, pv, 0.0, what="dtau/dv does not see fext")
    assert_close(da, pa, 0.0, what="dtau/da does not see fext")
    # forward dynamics (same cond(M) allowance as test_derivatives.py)
    kappa = cond(vidyn.crba(model, s.q))
    fq, fv, minv = vidyn.aba_derivatives(model, s.q, s.v, s.tau, fext=fext)
    qdd = vidyn.aba(model, s.q, s.v, s.tau, fext=fext)
    rtol = FD_RTOL * max(1.0, kappa * 1e-3)
    for name, ours, fd in (
        ("dddq/dq", fq, central_difference(lambda q: vidyn.aba(model, q, s.v, s.tau, fext=fext), nv, on_manifold)),
        ("dddq/dv", fv, central_difference(lambda v: vidyn.aba(model, s.q, v, s.tau, fext=fext), nv, lambda e: s.v + e)),
    ):
        scale = max(float(np.max(np.abs(fd), initial=0.0)), float(np.max(np.abs(qdd), initial=0.0)))
        assert_close(ours, fd, rtol, scale=scale, what=f"{name} with fext vs FD (cond M = {kappa:.1e})")
    assert_close(minv, vidyn.minverse(model, s.q), 0.0, what="dddq/dtau is minverse")


@given(st.data())
def test_second_order_derivatives_with_fext(data):
    model = data.draw(model_specs(max_bodies=8), label="spec").build()
    s = data.draw(states(model), label="state")
    fext = random_fext(model, s.seed)
    nv = model.nv
    hqq, hvv, hqv, dm = vidyn.rnea_second_order(model, s.q, s.v, s.a, fext=fext)
    fd = stacked_difference(lambda q: vidyn.rnea_derivatives(model, q, s.v, s.a, fext=fext)[0], nv, lambda e: model.integrate(s.q, e))
    assert_close(hqq, fd, FD_RTOL * 10, scale=max(1.0, float(np.max(np.abs(fd), initial=0.0))), what="d2tau_dq2 with fext vs differences of dtau_dq")
    for name, ours, plain in zip(("d2tau_dv2", "d2tau_dqdv", "dM_dq"), (hvv, hqv, dm), vidyn.rnea_second_order(model, s.q, s.v, s.a)[1:]):
        assert_close(ours, plain, 0.0, what=f"{name} does not see fext")
    lam = np.random.default_rng(s.seed + 1).standard_normal(nv)
    for name, t, c in zip(("d2tau_dq2", "d2tau_dv2", "d2tau_dqdv"), (hqq, hvv, hqv), vidyn.rnea_second_order_contracted(model, s.q, s.v, s.a, lam, fext=fext)):
        expected = np.einsum("i,ijk->jk", lam, t)
        assert_close(c, expected, IDENTITY_RTOL, scale=float(np.sum(np.abs(lam)) * np.max(np.abs(t), initial=1.0)), what=f"contracted {name} with fext")


# --- Pinocchio oracle ----------------------------------------------------------------------

pin = pytest.importorskip("pinocchio")
from pin_layout import ConfigurationMap  # noqa: E402
from strategies import to_pinocchio  # noqa: E402


def pin_fext(pm, cmap: ConfigurationMap, fext: np.ndarray):
    """Pinocchio's StdVec_Force: entry 0 the universe (zero), entry j the wrench of the vidyn
    body that is Pinocchio's joint j; both in the joint's local frame."""
    out = pin.StdVec_Force()
    out.append(pin.Force.Zero())
    for body in cmap.vd_body_of_pin_joint:
        out.append(pin.Force(np.asarray(fext[body], dtype=float)))
    return out


def compare_with_pinocchio(vd, pm, q, v, a, tau, fext) -> dict[str, tuple[float, float]]:
    """{quantity: (relative error, tolerance)} for rnea, aba and their derivatives with fext."""
    cmap = ConfigurationMap(vd, pm)
    pd = pm.createData()
    qp, vp, ap, taup, fp = cmap.q_to_pin(q), cmap.v_to_pin(v), cmap.v_to_pin(a), cmap.v_to_pin(tau), pin_fext(pm, cmap, fext)
    out: dict[str, tuple[float, float]] = {}
    out["rnea"] = (relative_error(vidyn.rnea(vd, q, v, a, fext=fext), cmap.v_to_vidyn(pin.rnea(pm, pd, qp, vp, ap, fp))), ORACLE_RTOL)
    dq, dv, _ = vidyn.rnea_derivatives(vd, q, v, a, fext=fext)
    pq, pv, _ = (np.asarray(x).reshape(pm.nv, pm.nv) for x in pin.computeRNEADerivatives(pm, pd, qp, vp, ap, fp))
    out["dtau_dq"] = (relative_error(dq, cmap.matrix_to_vidyn(pq)), ORACLE_RTOL)
    out["dtau_dv"] = (relative_error(dv, cmap.matrix_to_vidyn(pv)), ORACLE_RTOL)
    kappa = cond(vidyn.crba(vd, q))
    if np.isfinite(kappa) and kappa < 1e12:  # forward dynamics undefined for singular M
        tol = oracle_solve_rtol(kappa)
        out["aba"] = (relative_error(vidyn.aba(vd, q, v, tau, fext=fext), cmap.v_to_vidyn(pin.aba(pm, pd, qp, vp, taup, fp))), tol)
        fq, fv, _ = vidyn.aba_derivatives(vd, q, v, tau, fext=fext)
        pin.computeABADerivatives(pm, pd, qp, vp, taup, fp)
        out["dddq_dq"] = (relative_error(fq, cmap.matrix_to_vidyn(np.asarray(pd.ddq_dq).reshape(pm.nv, pm.nv))), tol)
        out["dddq_dv"] = (relative_error(fv, cmap.matrix_to_vidyn(np.asarray(pd.ddq_dv).reshape(pm.nv, pm.nv))), tol)
    return out


def assert_results(results, what: str):
    for name, (err, tol) in results.items():
        assert err <= tol, f"{what}: {name} with fext, relative error {err:.2e} > {tol:.1e}"


@given(st.data())
def test_random_trees_with_fext_match_pinocchio(data):
    spec = data.draw(model_specs(max_bodies=12), label="spec")
    vd = spec.build()
    s = data.draw(states(vd), label="state")
    assert_results(compare_with_pinocchio(vd, to_pinocchio(spec), s.q, s.v, s.a, s.tau, random_fext(vd, s.seed)), spec.name)


FEXT_ROBOTS = ("ur/ur5_robot", "panda/panda", "solo/solo12", "anymal_c_simple/anymal", "talos_data/talos_reduced", "double_pendulum/double_pendulum_continuous", "tiago/tiago")


@pytest.mark.parametrize("floating_base", [False, True], ids=["fixed", "free"])
@pytest.mark.parametrize("robot", FEXT_ROBOTS)
def test_robots_with_fext_match_pinocchio(robot, floating_base):
    try:
        from test_pinocchio_oracle import ROBOTS, load_pair
    except pytest.skip.Exception:
        pytest.skip("example-robot-data is not installed")
    if robot not in ROBOTS:
        pytest.skip(f"{robot} not in this example-robot-data")
    vd, pm = load_pair(ROBOTS[robot], floating_base)
    for seed in range(2):
        rng = np.random.default_rng(seed)
        q = vd.random_configuration(rng)
        v, a, tau = (rng.standard_normal(vd.nv) for _ in range(3))
        assert_results(compare_with_pinocchio(vd, pm, q, v, a, tau, random_fext(vd, 100 + seed, size=20.0)), robot)
