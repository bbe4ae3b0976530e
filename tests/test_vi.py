"""Variational integrators (Fan, Schultz & Murphey 2018): the properties every VI must have,
checked from Python on random trees of revolute/prismatic joints and on chains.

* the exact linearisation equals central differences of the Newton-solved step;
* the unforced linearised flow is symplectic, AᵀJA = J;
* a coordinate whose rotation leaves the Lagrangian invariant keeps its momentum (Noether);
* energy oscillates without drift over 10⁵ steps of a double pendulum;
* the measured order of accuracy is 2s; steps are time-reversible;
* errors: unsupported joints, bad shapes, a step Newton cannot solve.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vidyn
from strategies import model_specs

ONE_DOF = ("revolute", "prismatic")


def symplectic_form(n: int) -> np.ndarray:
    return np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])


def initial_state(vi, model, seed):
    rng = np.random.default_rng(seed)
    q0 = rng.uniform(-1, 1, model.nv)
    v0 = rng.uniform(-1, 1, model.nv)
    return q0, vi.momentum(q0, v0)


@settings(max_examples=30)
@given(st.data())
def test_linearisation_matches_finite_differences(data):
    model = data.draw(model_specs(max_bodies=6, kinds=ONE_DOF), label="spec").build()
    scheme = data.draw(st.sampled_from(["midpoint", "trapezoid", "simpson"]), label="scheme")
    n = model.nv
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme=scheme, damping=np.full(n, 0.2), stiffness=np.full(n, 0.5))
    q, p = initial_state(vi, model, data.draw(st.integers(0, 2**16), label="seed"))
    u = np.linspace(-0.5, 0.5, n)
    traj = vi.rollout(q, u=u[None, :], p0=p)
    a, b = vi.linearize(traj)
    h = 1e-6  # central differences: truncation ~h², round-off ~ε|x|/h ≈ 2e-10; see tolerances.FD_STEP
    x0 = np.concatenate([q, p])

    def f(x, u):
        return np.concatenate(vi.step(x[:n], x[n:], u))

    fd_a = np.column_stack([(f(x0 + h * e, u) - f(x0 - h * e, u)) / (2 * h) for e in np.eye(2 * n)])
    fd_b = np.column_stack([(f(x0, u + h * e) - f(x0, u - h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(a[0], fd_a, rtol=0, atol=1e-6 * max(1.0, np.abs(fd_a).max()))
    np.testing.assert_allclose(b[0], fd_b, rtol=0, atol=1e-6 * max(1.0, np.abs(fd_b).max()))


@settings(max_examples=30)
@given(st.data())
def test_unforced_linearised_flow_is_symplectic(data):
    model = data.draw(model_specs(max_bodies=8, kinds=ONE_DOF), label="spec").build()
    scheme = data.draw(st.sampled_from(["midpoint", "trapezoid", "simpson"]), label="scheme")
    vi = vidyn.VariationalIntegrator(model, 0.02, scheme=scheme, damping=np.zeros(model.nv))
    q, p = initial_state(vi, model, data.draw(st.integers(0, 2**16), label="seed"))
    a, _ = vi.linearize(vi.rollout(q, p0=p, steps=5))
    j = symplectic_form(model.nv)
    for ak in a:
        err = np.abs(ak.T @ j @ ak - j).max()
        assert err <= 1e-10 * max(1.0, np.abs(ak).max() ** 2), err


def yaw_symmetric_chain():
    """First joint about world z, gravity along z: the Lagrangian does not change when the
    whole chain turns about z, so that joint's discrete momentum is conserved."""
    b = vidyn.ModelBuilder("yaw chain")
    inertia = np.diag([0.02, 0.03, 0.01])
    parent = b.add_body(None, "yaw", "revolute", axis=[0, 0, 1], mass=1.0, com=[0.3, 0.1, -0.4], inertia=inertia)
    for k, axis in enumerate(([1, 0, 0], [0, 1, 0], [1, 0, 0])):
        placement = np.eye(4)
        placement[:3, 3] = [0.2, 0.0, -0.5]
        parent = b.add_body(parent, f"j{k}", "revolute", placement=placement, axis=axis, mass=0.7, com=[0.3, 0.1, -0.4], inertia=inertia)
    return b.build()


@pytest.mark.parametrize("scheme", ["midpoint", "trapezoid", "simpson"])
def test_symmetric_momentum_is_conserved(scheme):
    model = yaw_symmetric_chain()
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme=scheme)
    q, p = initial_state(vi, model, 3)
    traj = vi.rollout(q, p0=p, steps=2000)
    drift = np.abs(traj.p[:, 0] - p[0]).max()
    assert drift <= 1e-10 * max(1.0, abs(p[0])), drift


def test_energy_is_bounded_over_1e5_steps_of_a_double_pendulum():
    model = vidyn.models.pendulum_chain(2)
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme="trapezoid")
    q0 = np.array([1.2, -0.7])
    traj = vi.rollout(q0, np.zeros(2), steps=100_000)
    e = vi.energy(traj.q, traj.p) - vi.energy(q0, vi.momentum(q0, np.zeros(2)))
    quarter = len(e) // 4
    first, last = np.abs(e[:quarter]).max(), np.abs(e[-quarter:]).max()
    # a variational integrator's energy error oscillates with an O(Δt²) amplitude and no
    # secular trend: the last quarter is no worse than the first (×1.5 for the chaotic
    # motion visiting other regions), and the amplitude is small against the energy scale
    assert last <= 1.5 * first, (first, last)
    assert first < 1e-2 * 2 * 9.81 * 1.0, first


def test_convergence_order_is_2s():
    model = vidyn.models.pendulum_chain(3, planar=False)
    t_end = 0.5
    ref = vidyn.VariationalIntegrator(model, t_end / 200, scheme="lobatto", s=4)
    q0 = np.array([0.4, -0.3, 0.6])
    p0 = ref.momentum(q0, np.array([0.5, -0.2, 0.1]))
    exact = ref.rollout(q0, p0=p0, steps=200)
    x_ref = np.concatenate([exact.q[-1], exact.p[-1]])
    for scheme, s, coarse, expected in (("midpoint", None, 20, 2), ("trapezoid", None, 20, 2), ("simpson", None, 10, 4), ("lobatto", 3, 5, 6)):
        errors = []
        for steps in (coarse, 2 * coarse):
            vi = vidyn.VariationalIntegrator(model, t_end / steps, scheme=scheme, s=s)
            t = vi.rollout(q0, p0=p0, steps=steps)
            errors.append(np.abs(np.concatenate([t.q[-1], t.p[-1]]) - x_ref).max())
        order = np.log2(errors[0] / errors[1])
        assert abs(order - expected) < 0.3, (scheme, s, order)


def test_time_reversibility():
    model = vidyn.models.acrobot()
    vi = vidyn.VariationalIntegrator(model, 0.02, scheme="simpson")
    q, p = np.array([0.3, 0.2]), vi.momentum(np.array([0.3, 0.2]), np.array([1.0, -0.5]))
    fwd = vi.rollout(q, p0=p, steps=100)
    back = vi.rollout(fwd.q[-1], p0=-fwd.p[-1], steps=100)
    np.testing.assert_allclose(back.q[-1], q, atol=1e-9)
    np.testing.assert_allclose(back.p[-1], -p, atol=1e-9)


def test_controls_and_damping_enter_as_forces():
    """With damping, energy decreases monotonically; a constant torque does work."""
    model = vidyn.models.pendulum_chain(2)
    damped = vidyn.VariationalIntegrator(model, 0.01, damping=[0.5, 0.5])
    traj = damped.rollout(np.array([1.0, 0.5]), np.zeros(2), steps=500)
    e = damped.energy(traj.q, traj.p)
    assert np.all(np.diff(e) < 1e-9), "damping must dissipate"
    free = vidyn.VariationalIntegrator(model, 0.01)
    pushed = free.rollout(np.zeros(2), np.zeros(2), np.tile([2.0, 0.0], (50, 1)))
    assert free.energy(pushed.q[-1], pushed.p[-1]) > free.energy(np.zeros(2), np.zeros(2))


def test_errors_are_python_exceptions():
    model = vidyn.models.pendulum_chain(2)
    with pytest.raises(vidyn.InputError, match="scheme"):
        vidyn.VariationalIntegrator(model, 0.01, scheme="rk4")
    with pytest.raises(ValueError, match="dt"):
        vidyn.VariationalIntegrator(model, -0.1)
    vi = vidyn.VariationalIntegrator(model, 0.01)
    with pytest.raises(vidyn.InputError, match=r"q has shape \(3,\)"):
        vi.step(np.zeros(3), np.zeros(2))
    with pytest.raises(vidyn.InputError, match="not finite"):
        vi.step(np.array([0.0, np.nan]), np.zeros(2))
    with pytest.raises(vidyn.InputError, match="u has shape"):
        vi.rollout(np.zeros(2), np.zeros(2), np.zeros((5, 3)))
    coarse = vidyn.VariationalIntegrator(model, 5.0, max_iterations=3)
    with pytest.raises(vidyn.ConvergenceError, match="step 0"):
        coarse.step(np.array([0.3, -2.0]), np.array([40.0, -30.0]))


# --- second-order derivatives of the flow map -----------------------------------------------


def _first_order(vi, x, u):
    """Exact A, B of the step from x = (q, p) under u, the step re-solved from scratch."""
    n = vi.n
    qn, pn = vi.step(x[:n], x[n:], u)
    return vi.linearize(np.stack([x[:n], qn]), np.stack([x[n:], pn]), u[None, :])


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_second_order_tensors_match_differences_of_the_first_order_ones(data):
    from tolerances import VI_SECOND_ORDER_FD_RTOL, VI_SECOND_ORDER_FD_STEP

    model = data.draw(model_specs(max_bodies=5, kinds=ONE_DOF), label="spec").build()
    scheme = data.draw(st.sampled_from(["midpoint", "trapezoid", "simpson"]), label="scheme")
    n = model.nv
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    vi = vidyn.VariationalIntegrator(
        model, 0.02, scheme=scheme, damping=rng.uniform(0, 0.5, n), stiffness=rng.uniform(0, 3, n),
        rest=rng.uniform(-0.5, 0.5, n), tolerance=1e-15, max_iterations=60,
    )
    q, p = initial_state(vi, model, int(rng.integers(2**16)))
    u = rng.uniform(-2, 2, n)
    traj = vi.rollout(q, u=u[None, :], p0=p)
    a, b, fxx, fxu, fuu = vi.linearize(traj, order=2)
    m = 2 * n
    assert a.shape == (1, m, m) and b.shape == (1, m, n)
    assert fxx.shape == (1, m, m, m) and fxu.shape == (1, m, m, n) and fuu.shape == (1, m, n, n)
    a1, b1 = vi.linearize(traj)
    np.testing.assert_allclose(a, a1, rtol=0, atol=1e-11 * max(1.0, np.abs(a1).max()))
    h = VI_SECOND_ORDER_FD_STEP
    tol = VI_SECOND_ORDER_FD_RTOL * max(1.0, np.abs(fxx).max(), np.abs(fxu).max(), np.abs(fuu).max())
    x0 = np.concatenate([q, p])
    for k in range(m):
        e = np.eye(m)[k]
        (ap, bp), (am, bm) = _first_order(vi, x0 + h * e, u), _first_order(vi, x0 - h * e, u)
        np.testing.assert_allclose(fxx[0][:, :, k], (ap[0] - am[0]) / (2 * h), rtol=0, atol=tol)
        np.testing.assert_allclose(fxu[0][:, k, :], (bp[0] - bm[0]) / (2 * h), rtol=0, atol=tol)
    for k in range(n):
        e = np.eye(n)[k]
        (ap, bp), (am, bm) = _first_order(vi, x0, u + h * e), _first_order(vi, x0, u - h * e)
        np.testing.assert_allclose(fxu[0][:, :, k], (ap[0] - am[0]) / (2 * h), rtol=0, atol=tol)
        np.testing.assert_allclose(fuu[0][:, :, k], (bp[0] - bm[0]) / (2 * h), rtol=0, atol=tol)


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_contracted_second_order_is_the_contraction_of_the_tensors(data):
    model = data.draw(model_specs(max_bodies=8, kinds=ONE_DOF), label="spec").build()
    scheme = data.draw(st.sampled_from(["midpoint", "trapezoid", "simpson"]), label="scheme")
    n, m = model.nv, 2 * model.nv
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    vi = vidyn.VariationalIntegrator(model, 0.01, scheme=scheme, damping=np.full(n, 0.3), stiffness=np.full(n, 1.0))
    q, p = initial_state(vi, model, int(rng.integers(2**16)))
    traj = vi.rollout(q, u=rng.uniform(-1, 1, (4, n)), p0=p)
    lam = rng.standard_normal((4, m))
    a, b, fxx, fxu, fuu = vi.linearize(traj, order=2)
    a2, b2, hxx, hxu, huu = vi.linearize(traj, order=2, lam=lam)
    assert hxx.shape == (4, m, m) and hxu.shape == (4, m, n) and huu.shape == (4, n, n)
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    scale = max(1.0, np.abs(fxx).max(), np.abs(fxu).max(), np.abs(fuu).max()) * np.abs(lam).sum(axis=1).max()
    # the same products summed in another order: rounding only
    np.testing.assert_allclose(hxx, np.einsum("ki,kijl->kjl", lam, fxx), rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(hxu, np.einsum("ki,kijl->kjl", lam, fxu), rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(huu, np.einsum("ki,kijl->kjl", lam, fuu), rtol=0, atol=1e-12 * scale)
    # symmetric in the two inputs, exactly: the core returns the mean of the two computed
    # halves (their raw difference is bounded by the rounding of the products in the Rust test
    # `second_order_tests::raw_contraction_is_symmetric_to_rounding`)
    np.testing.assert_array_equal(fxx, fxx.transpose(0, 1, 3, 2))
    np.testing.assert_array_equal(fuu, fuu.transpose(0, 1, 3, 2))
    np.testing.assert_array_equal(hxx, hxx.transpose(0, 2, 1))


def test_state_conversions_and_their_jacobians():
    from tolerances import FD_STEP

    model = vidyn.models.pendulum_chain(4)
    vi = vidyn.VariationalIntegrator(model, 0.01)
    rng = np.random.default_rng(3)
    q, v = rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    p, jp = vi.momentum_jacobian(q, v)
    np.testing.assert_allclose(p, vi.momentum(q, v), rtol=1e-12, atol=1e-12)
    v2, jv = vi.velocity_jacobian(q, p)
    np.testing.assert_allclose(v2, v, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(jv @ jp, np.eye(8), rtol=0, atol=1e-10 * np.abs(jp).max() * np.abs(jv).max())
    h = FD_STEP
    x = np.concatenate([q, v])
    fd = np.column_stack([(np.concatenate([x[:4] + h * e[:4], vi.momentum(x[:4] + h * e[:4], x[4:] + h * e[4:])])
                           - np.concatenate([x[:4] - h * e[:4], vi.momentum(x[:4] - h * e[:4], x[4:] - h * e[4:])])) / (2 * h)
                          for e in np.eye(8)])
    np.testing.assert_allclose(jp, fd, rtol=0, atol=1e-7 * max(1.0, np.abs(fd).max()))


def test_second_order_errors_are_python_exceptions():
    model = vidyn.models.pendulum_chain(2)
    vi = vidyn.VariationalIntegrator(model, 0.01)
    traj = vi.rollout(np.array([0.3, 0.1]), np.zeros(2), steps=3)
    with pytest.raises(vidyn.InputError, match="order"):
        vi.linearize(traj, order=3)
    with pytest.raises(vidyn.InputError, match="order=2"):
        vi.linearize(traj, lam=np.zeros((3, 4)))
    with pytest.raises(vidyn.InputError, match=r"lam has shape \(3, 3\)"):
        vi.linearize(traj, order=2, lam=np.zeros((3, 3)))
    with pytest.raises(vidyn.InputError, match="lam has 2 rows"):
        vi.linearize(traj, order=2, lam=np.zeros((2, 4)))
    with pytest.raises(vidyn.InputError, match="not finite"):
        vi.linearize(traj, order=2, lam=np.full((3, 4), np.nan))


# --- constant body wrenches ------------------------------------------------------------------


def _rk4_aba(model, q0, v0, fext, t_end, steps):
    """q(T) of q̈ = aba(q, v, 0, fext) by RK4 (the continuous oracle)."""
    tau = np.zeros(model.nv)

    def f(x):
        q, v = x[: model.nv], x[model.nv :]
        return np.concatenate([v, vidyn.aba(model, q, v, tau, fext=fext)])

    h, x = t_end / steps, np.concatenate([q0, v0])
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + 0.5 * h * k1)
        k3 = f(x + 0.5 * h * k2)
        k4 = f(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x[: model.nv]


def test_body_wrenches_follow_aba_with_fext_at_order_two():
    """The wrenches are the ``fext`` of ``aba`` (body frames, [force; moment]): the VI's q(T)
    converges to RK4 of ``aba(..., fext=...)`` with error ratio ≈ 4 per halving of dt
    (order 2), and the wrench moves q(T) far more than that error."""
    model = vidyn.models.pendulum_chain(3, planar=False)
    fext = np.array([[2.0, -1.0, 0.5, 0.3, 0.0, -0.4], [0.0, 1.5, -3.0, -0.2, 0.5, 0.1], [-1.0, 0.0, 4.0, 0.0, -0.3, 0.2]])
    q0, v0, t_end = np.array([0.4, -0.3, 0.6]), np.array([0.5, 0.2, -0.4]), 0.5
    exact = _rk4_aba(model, q0, v0, fext, t_end, 2000)
    free = _rk4_aba(model, q0, v0, None, t_end, 2000)
    for scheme in ("midpoint", "trapezoid"):
        errors = []
        for steps in (25, 50):
            vi = vidyn.VariationalIntegrator(model, t_end / steps, scheme=scheme, body_wrenches=fext)
            np.testing.assert_array_equal(vi.body_wrenches, fext)
            traj = vi.rollout(q0, p0=vi.momentum(q0, v0), steps=steps)
            errors.append(np.abs(traj.q[-1] - exact).max())
        ratio = errors[0] / errors[1]
        assert 3.5 < ratio < 4.5, (scheme, errors)
        assert errors[1] < 1e-2 * np.abs(free - exact).max(), (scheme, errors, np.abs(free - exact).max())


def test_body_wrench_errors():
    model = vidyn.models.pendulum_chain(3)
    assert vidyn.VariationalIntegrator(model, 0.01).body_wrenches is None
    with pytest.raises(vidyn.InputError, match="body_wrenches"):
        vidyn.VariationalIntegrator(model, 0.01, body_wrenches=np.zeros((2, 6)))
    with pytest.raises(vidyn.InputError, match="body_wrenches"):
        vidyn.VariationalIntegrator(model, 0.01, body_wrenches=np.zeros((3, 3)))
    bad = np.zeros((3, 6))
    bad[1, 4] = np.nan
    with pytest.raises(vidyn.InputError, match="body_wrenches"):
        vidyn.VariationalIntegrator(model, 0.01, body_wrenches=bad)
    vi = vidyn.VariationalIntegrator(model, 0.01, body_wrenches=np.ones((3, 6)))
    traj = vi.rollout(np.zeros(3), np.zeros(3), steps=2)
    with pytest.raises(NotImplementedError, match="wrenches"):
        vi.linearize(traj, order=2)


def test_second_order_refusals_name_their_cause():
    """Second derivatives with kinematic joints or body wrenches are not implemented (first
    order is): NotImplementedError naming what the integrator has, from ``linearize(order=2)``
    and from full DDP, rather than the derivatives of another map. Holonomic constraints have
    exact second derivatives, on fixed bases and floating ones
    (``tests/test_vi_constrained_second_order.py``)."""
    b = vidyn.ModelBuilder("two links")
    parent = None
    for k in range(2):
        placement = np.eye(4)
        placement[2, 3] = -0.5 * (k > 0)
        parent = b.add_body(parent, f"j{k}", "revolute", placement, 1.0, [0, 0, -0.25], np.diag([0.02, 0.02, 0.001]), [0.0, 1.0, 0.0])
    model = b.build()
    wrenched = vidyn.VariationalIntegrator(model, 0.01, body_wrenches=np.tile([0.0, 0.0, 0.5, 0.0, 0.0, 0.0], (model.nbodies, 1)))
    kinematic = vidyn.VariationalIntegrator(model, 0.01, kinematic=["j0"])
    for vi, cause in ((wrenched, "body wrenches"), (kinematic, "kinematic joints")):
        q, p, u = np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((1, 2))
        with pytest.raises(NotImplementedError, match=cause):
            vi.linearize(q, p, u, order=2, lam=np.ones((1, 4)))
    with pytest.raises(NotImplementedError, match="body wrenches"):
        vidyn.optim.ilqr(wrenched, np.zeros(2), steps=3, method="ddp")
