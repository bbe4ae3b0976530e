"""vidyn.optim: LQR against a dense KKT solve, DLQR, tracking in closed loop, iLQR on an LQ
problem (one step to the KKT solution) and on the cart-pole swing-up (convergence, dynamic
feasibility of the result, control limits, the expected vs actual decrease)."""

from __future__ import annotations

import numpy as np
import pytest

import vidyn as vd
from vidyn import optim

DT = 0.02
STEPS = 125
GOAL = np.array([0.0, np.pi, 0.0, 0.0])


def kkt(A, B, Q, R, QN, x0, x_ref, u_ref):
    """Dense KKT solve of min Σ ½|x_k − r_k|²_Q + ½|u_k − s_k|²_R + ½|x_N − r_N|²_QN."""
    N, nx, nu = B.shape
    nz = (N + 1) * nx + N * nu
    nc = (N + 1) * nx
    H = np.zeros((nz, nz))
    h = np.zeros(nz)
    C = np.zeros((nc, nz))
    d = np.zeros(nc)
    for k in range(N + 1):
        W = Q[k] if k < N else QN
        H[k * nx : (k + 1) * nx, k * nx : (k + 1) * nx] = W
        h[k * nx : (k + 1) * nx] = W @ x_ref[k]
    for k in range(N):
        i = (N + 1) * nx + k * nu
        H[i : i + nu, i : i + nu] = R[k]
        h[i : i + nu] = R[k] @ u_ref[k]
    C[:nx, :nx] = np.eye(nx)
    d[:nx] = x0
    for k in range(N):
        r = (k + 1) * nx
        C[r : r + nx, (k + 1) * nx : (k + 2) * nx] = np.eye(nx)
        C[r : r + nx, k * nx : (k + 1) * nx] = -A[k]
        i = (N + 1) * nx + k * nu
        C[r : r + nx, i : i + nu] = -B[k]
    K = np.block([[H, C.T], [C, np.zeros((nc, nc))]])
    z = np.linalg.solve(K, np.concatenate([h, d]))
    return z[: (N + 1) * nx].reshape(N + 1, nx), z[(N + 1) * nx : nz].reshape(N, nu)


def random_lq(seed, nx=4, nu=2, N=30):
    rng = np.random.default_rng(seed)
    A = np.eye(nx) + 0.2 * rng.uniform(-1, 1, (N, nx, nx))
    B = rng.uniform(-1, 1, (N, nx, nu))
    M = rng.uniform(-1, 1, (N, nx, nx))
    Q = 0.5 * M @ M.transpose(0, 2, 1)
    S = rng.uniform(-1, 1, (N, nu, nu))
    R = S @ S.transpose(0, 2, 1) + 0.1 * np.eye(nu)
    QN = np.eye(nx) * 2.0
    return A, B, Q, R, QN, rng.uniform(-1, 1, nx)


@pytest.fixture(scope="module")
def cartpole_vi():
    return vd.VariationalIntegrator(vd.models.cartpole(), dt=DT)


def swing_up(vi, **kw):
    args = dict(
        U_init=np.zeros((STEPS, 1)),
        actuated=[0],
        Q=DT * np.array([1.0, 1.0, 0.1, 0.1]),
        R=DT * 1e-2,
        QN=1e3,
        x_ref=GOAL,
        cost_state="velocity",
        max_iterations=400,
        tolerance=1e-9,
    )
    args.update(kw)
    return optim.ilqr(vi, [0.0, 0.0], **args)


@pytest.fixture(scope="module")
def swing(cartpole_vi):
    return swing_up(cartpole_vi)


def test_lqr_matches_kkt():
    for seed in range(3):
        A, B, Q, R, QN, x0 = random_lq(seed)
        sol = optim.lqr(A, B, Q, R, QN)
        N = len(A)
        xs, us = [x0], []
        for k in range(N):
            us.append(-sol.K[k] @ xs[k])
            xs.append(A[k] @ xs[k] + B[k] @ us[k])
        xk, uk = kkt(A, B, Q, R, QN, x0, np.zeros((N + 1, 4)), np.zeros((N, 2)))
        assert np.abs(np.array(xs) - xk).max() < 1e-9
        assert np.abs(np.array(us) - uk).max() < 1e-9
        cost = sum(xs[k] @ Q[k] @ xs[k] + us[k] @ R[k] @ us[k] for k in range(N)) + xs[N] @ QN @ xs[N]
        assert x0 @ sol.P[0] @ x0 == pytest.approx(cost, rel=1e-9)
        assert np.array_equal(sol.P, sol.P.transpose(0, 2, 1))


def test_ilqr_linear_one_step_to_kkt_on_a_fixed_vi_linearisation(cartpole_vi):
    """The VI linearised once about the upright equilibrium and held fixed: an LQ problem."""
    vi = cartpole_vi
    traj = vi.rollout([0.0, np.pi], [0.0, 0.0], np.zeros((1, 2)))
    A1, B1 = vi.linearize(traj)
    N = 60
    A = np.repeat(A1, N, axis=0)
    B = np.repeat(B1[:, :, :1], N, axis=0)
    rng = np.random.default_rng(3)
    x_ref = rng.uniform(-0.2, 0.2, (N + 1, 4))
    Q = np.broadcast_to(np.diag([1.0, 10.0, 0.1, 0.1]), (N, 4, 4))
    R = np.broadcast_to(np.eye(1) * 0.01, (N, 1, 1))
    QN = np.eye(4) * 100
    x0 = np.array([0.1, -0.2, 0.05, 0.0])
    res = optim.ilqr_linear(A, B, x0, rng.uniform(-1, 1, (N, 1)), Q=Q, R=R, QN=QN, x_ref=x_ref)
    xk, uk = kkt(A, B, Q, R, QN, x0, x_ref, np.zeros((N, 1)))
    assert res.converged and res.iterations == 1 and res.log["alpha"][0] == 1.0
    scale = max(1.0, np.abs(uk).max())
    assert np.abs(res.x - xk).max() < 1e-9 * scale
    assert np.abs(res.u - uk).max() < 1e-9 * scale
    # exact quadratic model: expected == actual decrease
    assert res.log["actual_reduction"][0] == pytest.approx(res.log["expected_reduction"][0], rel=1e-9)


def test_dlqr_stabilises_the_upright_cartpole(cartpole_vi):
    vi = cartpole_vi
    traj = vi.rollout([0.0, np.pi], [0.0, 0.0], np.zeros((1, 2)))
    A, B = vi.linearize(traj)
    sol = optim.dlqr(A[0], B[0][:, :1], np.eye(4), np.eye(1))
    P = sol.P
    G = 1.0 + B[0][:, :1].T @ P @ B[0][:, :1]
    residual = np.eye(4) + A[0].T @ P @ A[0] - A[0].T @ P @ B[0][:, :1] @ np.linalg.solve(G, B[0][:, :1].T @ P @ A[0]) - P
    assert np.abs(residual).max() < 1e-8 * np.abs(P).max()
    assert np.abs(np.linalg.eigvals(A[0] - B[0][:, :1] @ sol.K)).max() < 1.0
    # nonlinear closed loop from a perturbed state returns upright; open loop falls
    x_ref = np.array([0.0, np.pi, 0.0, 0.0])
    cl = optim.closed_loop_rollout(vi, [0.2, np.pi - 0.3], [0.0, 0.0], x_ref=x_ref, K=sol.K, actuated=[0], steps=400)
    assert abs(cl.q[-1, 1] - np.pi) < 1e-3 and abs(cl.q[-1, 0]) < 1e-2
    ol = vi.rollout([0.2, np.pi - 0.3], [0.0, 0.0], np.zeros((400, 2)))
    assert np.abs(ol.q[:, 1] - np.pi).max() > 1.0
    assert np.all(cl.u[:, 1] == 0.0)


def test_dlqr_reports_non_convergence():
    with pytest.raises(vd.ConvergenceError, match="did not converge"):
        optim.dlqr(np.diag([1.5, 0.5]), np.array([[0.0], [1.0]]), np.eye(2), np.eye(1), max_iterations=2000)
    with pytest.raises(vd.InputError):
        optim.dlqr(np.eye(2), np.ones((2, 1)), np.eye(2), -np.eye(1))


def test_swing_up_converges(swing):
    assert swing.converged, swing.message
    assert swing.status == "converged"
    assert swing.iterations < 200
    np.testing.assert_allclose(swing.q[-1], [0.0, np.pi], atol=2e-3)
    assert np.all(np.diff(swing.cost_history) < 0)  # monotone decrease
    assert swing.cost_history[0] > 10 * swing.cost
    assert swing.U.shape == (STEPS, 2) and np.all(swing.U[:, 1] == 0.0)
    assert swing.K.shape == (STEPS, 1, 4) and swing.k.shape == (STEPS, 1)
    assert set(swing.timing) == {"linearize", "backward", "forward"}


def test_swing_up_is_dynamically_feasible(cartpole_vi, swing):
    """Every step of the optimiser's trajectory, re-solved by the VI from its own state and
    control, lands on the next state (Newton tolerance); re-simulating the whole control
    sequence stays on it too, up to those per-step differences amplified along the swing-up
    (the optimiser's rollouts start each Newton solve elsewhere than the plain rollout)."""
    defect = 0.0
    for k in range(STEPS):
        qn, pn = cartpole_vi.step(swing.q[k], swing.p[k], swing.U[k])
        defect = max(defect, np.abs(qn - swing.q[k + 1]).max(), np.abs(pn - swing.p[k + 1]).max())
    assert defect < 1e-10
    again = cartpole_vi.rollout([0.0, 0.0], [0.0, 0.0], swing.U)
    assert np.abs(again.q - swing.q).max() < 1e-6
    assert np.abs(again.p - swing.p).max() < 1e-6
    assert np.array_equal(swing.trajectory.q, again.q)


def test_concurrent_solves_from_python_threads_match_one_solve(cartpole_vi, swing):
    """iLQR runs on the calling thread and borrows the pool's workers for its helpers; several
    Python threads solving at once share the pool and still get the single solve's iterates,
    bit for bit (the pipeline's results do not depend on who computed what)."""
    import threading

    results: list = [None] * 3
    errors: list = []

    def solve(i: int) -> None:
        try:
            results[i] = swing_up(cartpole_vi)
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=solve, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in results:
        assert r.iterations == swing.iterations
        assert np.array_equal(r.x, swing.x) and np.array_equal(r.u, swing.u)


def test_expected_and_actual_decrease_near_convergence(cartpole_vi):
    """Near the optimum both decrease linearly and stay in a fixed ratio: the Gauss–Newton
    model of iLQR drops the dynamics' curvature (DDP would make the ratio → 1). The gradient
    norm goes to zero. (With the plain line search, ``fitted_step=False``: the default may try
    a fitted step where that ratio persists.)"""
    swing = swing_up(cartpole_vi, fitted_step=False)
    log = swing.log
    full = log["alpha"] == 1.0
    ratio = log["actual_reduction"][full] / log["expected_reduction_alpha"][full]
    tail = ratio[-5:]
    assert np.all(tail > 0.5) and np.all(tail < 2.5)
    assert np.ptp(tail) < 0.05 * np.mean(tail)  # a constant ratio
    assert log["gradient_norm"][-1] < 1e-3 * log["gradient_norm"][0]
    assert log["expected_reduction"][-1] <= 1e-9 * max(1.0, swing.cost)


def test_alpha_max_must_be_finite(cartpole_vi):
    with pytest.raises(vd.InputError, match="alpha_max"):
        swing_up(cartpole_vi, alpha_max=float("nan"), max_iterations=2)
    plain = swing_up(cartpole_vi, alpha_max=1.0, max_iterations=3)
    assert (plain.log["alpha"] <= 1.0).all()


def test_control_limits(cartpole_vi, swing):
    res = swing_up(cartpole_vi, u_min=-20.0, u_max=20.0)
    assert res.converged, res.message
    assert np.abs(res.U).max() <= 20.0 + 1e-12
    assert np.isclose(np.abs(res.U[:, 0]).max(), 20.0)  # the limit is active
    assert res.cost > swing.cost  # constrained optimum costs more
    np.testing.assert_allclose(res.q[-1], [0.0, np.pi], atol=5e-3)


def test_tracking_lqr_rejects_a_perturbation(cartpole_vi, swing):
    vi = cartpole_vi
    gains = optim.tracking_lqr(vi, swing.trajectory, actuated=[0])
    x_ref = np.hstack([swing.q, swing.p])
    q0 = np.array([0.05, 0.1])
    cl = optim.closed_loop_rollout(vi, q0, p0=[0.0, 0.0], x_ref=x_ref, K=gains.K, u_ref=swing.u, actuated=[0])
    ol = vi.rollout(q0, p0=[0.0, 0.0], u=swing.U)
    err_cl = np.abs(cl.q[-1] - swing.q[-1]).max()
    err_ol = np.abs(ol.q[-1] - swing.q[-1]).max()
    assert err_cl < 0.05 and err_ol > 10 * err_cl


def test_ddp_on_the_vi_needs_fewer_iterations_than_ilqr(cartpole_vi):
    """Full DDP on the VI's exact λ-contracted second derivatives, from a rough iLQR solution
    (from zero controls the two may reach different local optima of the swing-up)."""
    rough = swing_up(cartpole_vi, tolerance=1e-4)
    il = swing_up(cartpole_vi, U_init=rough.U, tolerance=1e-11)
    ddp = swing_up(cartpole_vi, U_init=rough.U, tolerance=1e-11, method="ddp")
    assert il.converged and ddp.converged, (il.message, ddp.message)
    assert ddp.cost == pytest.approx(il.cost, rel=1e-6)
    assert ddp.iterations < il.iterations, (ddp.iterations, il.iterations)


def test_ilqr_in_velocity_coordinates_reaches_the_same_optimum(cartpole_vi, swing):
    """``coordinates="velocity"`` iterates on ``(q, v)``, where the velocity cost is exactly
    quadratic: the same optimum (both stop at an expected decrease ≤ 1e-9·J, so the costs agree
    to about that), reported in ``(q, p)``: a VI trajectory from the same start, and gains that
    stabilise it like the ``(q, p)`` run's (they are the same feedback to first order)."""
    res = swing_up(cartpole_vi, coordinates="velocity")
    assert res.converged, res.message
    assert res.cost == pytest.approx(swing.cost, rel=1e-8)
    np.testing.assert_allclose(res.q, swing.q, atol=1e-4)
    np.testing.assert_array_equal(res.x[0], [0.0, 0.0, 0.0, 0.0])
    defect = 0.0
    for k in range(STEPS):
        qn, pn = cartpole_vi.step(res.q[k], res.p[k], res.U[k])
        defect = max(defect, np.abs(qn - res.q[k + 1]).max(), np.abs(pn - res.p[k + 1]).max())
    assert defect < 1e-10
    np.testing.assert_allclose(res.K, swing.K, rtol=1e-3, atol=1e-3 * np.abs(swing.K).max())
    for bad in (dict(cost_state="momentum"), dict(method="ddp"), dict(coordinates="joint")):
        with pytest.raises(vd.InputError, match="coordinates"):
            swing_up(cartpole_vi, **{"coordinates": "velocity", **bad})


def test_bad_inputs(cartpole_vi):
    with pytest.raises(vd.InputError):
        swing_up(cartpole_vi, Q=np.ones(3))
    with pytest.raises(vd.InputError):
        swing_up(cartpole_vi, x_ref=np.zeros((STEPS, 4)))
    with pytest.raises(vd.InputError):
        optim.ilqr(cartpole_vi, [0.0, 0.0], U_init=np.ones((5, 2)), actuated=[0])
    with pytest.raises(vd.InputError):
        swing_up(cartpole_vi, u_min=1.0, u_max=-1.0)
    with pytest.raises(vd.InputError, match="at least one step"):
        optim.lqr(np.zeros((0, 2, 2)), np.zeros((0, 2, 1)), 1.0, 1.0, 1.0)


def test_ddp_on_linear_system_one_step_to_kkt():
    A, B, Q, R, QN, x0 = random_lq(4)
    N = len(A)
    rng = np.random.default_rng(8)
    x_ref = rng.uniform(-1, 1, (N + 1, 4))
    xk, uk = kkt(A, B, Q, R, QN, x0, x_ref, np.zeros((N, 2)))
    for method in ("ilqr", "ddp"):
        res = optim.ilqr_linear(A, B, x0, rng.uniform(-1, 1, (N, 2)), Q=Q, R=R, QN=QN, x_ref=x_ref, method=method)
        assert res.converged and res.iterations == 1
        assert np.abs(res.u - uk).max() < 1e-9 * max(1.0, np.abs(uk).max())
    with pytest.raises(vd.InputError, match="method"):
        optim.ilqr_linear(A, B, x0, np.zeros((N, 2)), method="newton")


def pendulum_on_cart() -> vd.Model:
    b = vd.ModelBuilder("pendulum_on_cart")
    cart = b.add_body(None, "cart", "prismatic", axis=[1, 0, 0], mass=10.0)
    b.add_body(cart, "pendulum", "revolute", axis=[0, 1, 0], mass=1.0, com=[0, 0, -1.0])
    b.set_gravity([0, 0, -9.8])
    return b.build()


def thesis_problem():
    """Johnson (2012) §6.7.1: Δt = 0.01 s, 10 s, θ_d up to 130°; trep's weights."""
    dt, N = 0.01, 1000
    t = np.arange(N + 1) * dt
    x_ref = np.zeros((N + 1, 4))
    x_ref[:, 1] = np.where((t >= 3) & (t <= 7), np.deg2rad(130) * (1 - np.cos(np.pi * (t - 3) / 2)) / 2, 0.0)
    vi = vd.VariationalIntegrator(pendulum_on_cart(), dt=dt)
    Q = np.diag([0.01, 100.0, 0.01, 0.01])
    return vi, dict(U_init=np.zeros((N, 1)), actuated=[0], Q=Q, QN=Q, R=1e-2, x_ref=x_ref)


def test_projection_method_on_pendulum_on_cart():
    vi, kw = thesis_problem()
    res = optim.projection(vi, [0.0, 0.0], x_guess=np.asarray(kw["x_ref"]), model="quasi", tolerance=1e-6, max_iterations=300, **kw)
    assert res.status == "converged", res.message
    assert abs(res.log["slope"][-1]) < 1e-6
    assert np.all(np.diff(res.cost_history) < 0)  # Armijo: monotone
    assert res.cost < 0.5 * res.cost_history[0]
    assert set(res.log["model"]) == {"quasi"}
    # every iterate is a VI trajectory: the result re-simulates to itself
    assert np.abs(res.trajectory.q - res.q).max() < 1e-8
    assert res.K.shape == (1000, 1, 4)


def test_projection_is_idempotent(cartpole_vi, swing):
    vi = cartpole_vi
    gains = optim.tracking_lqr(vi, swing.trajectory, actuated=[0]).K
    x = np.hstack([swing.q, swing.p])
    # a trajectory is a fixed point
    x1, u1 = optim.project(vi, x, swing.u, gains, actuated=[0])
    assert np.abs(x1 - x).max() < 1e-9 and np.abs(u1 - swing.u).max() < 1e-9
    # a curve that is not one: P(P(ξ̄)) = P(ξ̄)
    rng = np.random.default_rng(0)
    xb = x + 0.05 * rng.standard_normal(x.shape)
    xb[0] = x[0]
    ub = swing.u + 0.5 * rng.standard_normal(swing.u.shape)
    xp, up = optim.project(vi, xb, ub, gains, actuated=[0])
    assert np.abs(xp - xb).max() > 1e-2
    xpp, upp = optim.project(vi, xp, up, gains, actuated=[0])
    assert np.abs(xpp - xp).max() < 1e-9 and np.abs(upp - up).max() < 1e-9
    with pytest.raises(vd.InputError):
        optim.project(vi, xb[:-1], ub, gains, actuated=[0])


def test_projection_newton_model_runs_on_the_vi(cartpole_vi):
    res = optim.projection(cartpole_vi, [0.0, 0.0], steps=10, actuated=[0], model="newton")
    assert res.cost_history[-1] <= res.cost_history[0]
    with pytest.raises(vd.InputError, match="model"):
        optim.projection(cartpole_vi, [0.0, 0.0], steps=10, actuated=[0], model="bfgs")  # type: ignore[arg-type]


def test_frame_cost_acrobot_tip_reaches_target():
    model = vd.models.acrobot()
    vi = vd.VariationalIntegrator(model, dt=0.02)
    target = np.array([1.2, 0.0, 0.8])
    res = optim.ilqr(vi, [0.0, 0.0], steps=100, Q=1e-3, R=1e-3, frame="tip", frame_target=target, frame_weight=0.1, frame_weight_terminal=1e3, max_iterations=200)
    assert res.converged, res.message
    tip = vd.frame_placement(model, res.q[-1], "tip")[:3, 3]
    start = vd.frame_placement(model, res.q[0], "tip")[:3, 3]
    assert np.linalg.norm(tip - target) < 1e-2 < np.linalg.norm(start - target)
    with pytest.raises(KeyError):
        optim.ilqr(vi, [0.0, 0.0], steps=5, frame="nope", frame_target=target)
    with pytest.raises(vd.InputError):
        optim.ilqr(vi, [0.0, 0.0], steps=5, frame="tip")


class QuadraticPythonCost:
    """The built-in quadratic cost written in Python (½ convention)."""

    def __init__(self, Q, R, QN, x_ref, fail_at=None):
        self.Q, self.R, self.QN, self.x_ref, self.fail_at = Q, R, QN, x_ref, fail_at
        self.calls = 0

    def running(self, k, x, u):
        e = x - self.x_ref
        return 0.5 * e @ self.Q @ e + 0.5 * u @ self.R @ u

    def running_derivatives(self, k, x, u):
        self.calls += 1
        if self.fail_at is not None and k == self.fail_at:
            raise ZeroDivisionError(f"user cost failed at step {k}")
        e = x - self.x_ref
        return self.running(k, x, u), self.Q @ e, self.R @ u, self.Q, self.R, np.zeros((len(u), len(x)))

    def terminal(self, x):
        e = x - self.x_ref
        return 0.5 * e @ self.QN @ e

    def terminal_derivatives(self, x):
        e = x - self.x_ref
        return self.terminal(x), self.QN @ e, self.QN


def test_python_cost_matches_builtin_quadratic_cost(cartpole_vi):
    Q, R, QN = np.diag([1.0, 1.0, 0.1, 0.1]) * DT, np.eye(1) * 1e-2 * DT, np.eye(4) * 1e3
    kw = dict(U_init=np.zeros((60, 1)), actuated=[0], max_iterations=100, tolerance=1e-9)
    ref = optim.ilqr(cartpole_vi, [0.0, 0.0], Q=Q, R=R, QN=QN, x_ref=GOAL, **kw)
    cost = QuadraticPythonCost(Q, R, QN, GOAL)
    res = optim.ilqr(cartpole_vi, [0.0, 0.0], cost=cost, **kw)
    assert res.iterations == ref.iterations and cost.calls > 0
    assert res.cost == pytest.approx(ref.cost, rel=1e-12)
    assert np.abs(res.u - ref.u).max() < 1e-9
    proj = optim.projection(cartpole_vi, [0.0, 0.0], cost=cost, model="quasi", max_iterations=3, U_init=np.zeros((60, 1)), actuated=[0])
    assert proj.cost < proj.cost_history[0]


def test_python_cost_errors_propagate(cartpole_vi):
    Q, R, QN = np.eye(4), np.eye(1), np.eye(4)
    kw = dict(U_init=np.zeros((20, 1)), actuated=[0], max_iterations=5)
    with pytest.raises(ZeroDivisionError, match="step 7"):
        optim.ilqr(cartpole_vi, [0.0, 0.0], cost=QuadraticPythonCost(Q, R, QN, GOAL, fail_at=7), **kw)
    with pytest.raises(ZeroDivisionError, match="step 3"):
        optim.projection(cartpole_vi, [0.0, 0.0], cost=QuadraticPythonCost(Q, R, QN, GOAL, fail_at=3), **kw)

    class BadShape(QuadraticPythonCost):
        def running_derivatives(self, k, x, u):
            l, lx, lu, lxx, luu, lux = super().running_derivatives(k, x, u)
            return l, lx[:3], lu, lxx, luu, lux

    with pytest.raises(vd.InputError, match="l_x"):
        optim.ilqr(cartpole_vi, [0.0, 0.0], cost=BadShape(Q, R, QN, GOAL), **kw)

    class Missing:
        def running(self, k, x, u):
            return 0.0

    with pytest.raises(vd.InputError, match="running_derivatives"):
        optim.ilqr(cartpole_vi, [0.0, 0.0], cost=Missing(), **kw)  # type: ignore[arg-type]
    with pytest.raises(vd.InputError, match="replaces"):
        optim.ilqr(cartpole_vi, [0.0, 0.0], cost=QuadraticPythonCost(Q, R, QN, GOAL), Q=Q, **kw)


def test_a_problem_is_built_once_and_solved_by_each_solver(cartpole_vi, swing):
    """``optim.Problem`` reads and checks the problem once; ``ilqr`` and ``projection`` solve
    it as often as wanted, with the same results bit for bit as from the keyword form; a
    Python cost works through it too; it is read-only, and problem keywords next to a given
    problem are refused."""
    arguments = dict(U_init=np.zeros((STEPS, 1)), actuated=[0], Q=DT * np.array([1.0, 1.0, 0.1, 0.1]), R=DT * 1e-2, QN=1e3, x_ref=GOAL, cost_state="velocity")
    problem = optim.Problem(cartpole_vi, [0.0, 0.0], **arguments)
    assert problem.steps == STEPS and problem.U_init.shape == (STEPS, 1) and "steps=125" in repr(problem)
    res = optim.ilqr(problem, max_iterations=400, tolerance=1e-9)
    np.testing.assert_array_equal(res.x, swing.x)
    np.testing.assert_array_equal(res.K, swing.K)
    assert res.cost == swing.cost
    again = optim.ilqr(problem, max_iterations=400, tolerance=1e-9)
    np.testing.assert_array_equal(again.x, res.x)
    np.testing.assert_array_equal(again.trajectory.q, res.trajectory.q)
    # another solver on the same problem, and its keyword form
    short = dict(model="quasi", max_iterations=3)
    by_problem = optim.projection(problem, **short)
    by_keywords = optim.projection(cartpole_vi, [0.0, 0.0], **arguments, **short)
    np.testing.assert_array_equal(by_problem.x, by_keywords.x)
    assert by_problem.cost_history[-1] < by_problem.cost_history[0]
    with pytest.raises(AttributeError, match="read-only"):
        problem.q0 = np.ones(2)  # type: ignore[misc]
    with pytest.raises(vd.InputError, match="give Q to Problem, not to the solver"):
        optim.ilqr(problem, Q=1.0)
    with pytest.raises(vd.InputError, match="Problem, or the integrator and q0"):
        optim.ilqr(cartpole_vi)


def test_a_problem_with_a_python_cost_is_solved_twice(cartpole_vi):
    class Quadratic:
        def running(self, k, x, u):
            return 0.5 * float(x @ x + u @ u)

        def running_derivatives(self, k, x, u):
            return self.running(k, x, u), x, u, np.eye(4), np.eye(1), np.zeros((1, 4))

        def terminal(self, x):
            return 0.5 * float(x @ x)

        def terminal_derivatives(self, x):
            return self.terminal(x), x, np.eye(4)

    problem = optim.Problem(cartpole_vi, [0.1, 0.2], steps=20, actuated=[0], cost=Quadratic())
    first, second = optim.ilqr(problem), optim.ilqr(problem)
    assert first.converged and first.cost < first.cost_history[0]
    np.testing.assert_array_equal(first.x, second.x)
