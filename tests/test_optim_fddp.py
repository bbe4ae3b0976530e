"""Multiple shooting from Python (``vidyn.optim.fddp``, issue 26 item 4): the VI cart-pole
swing-up and the panda reach from state-interpolated guesses, and what FDDP refuses.

The cart-pole guess turns the pole linearly from hanging to upright at rest with zero force — a
motion no rollout follows. FDDP converges to a feasible swing-up with iLQR's cost (measured:
4.3954 in 53 iterations; iLQR from zero forces needs 90), the re-simulated controls reproduce
it, and a guess of configurations alone (momenta zero) is the same guess. The panda guess
interpolates from the start to an inverse-kinematics goal posture (the guess of
``examples/optim_panda_reach.py --solver fddp``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import vidyn

DT, N = 0.02, 125


def problem():
    model = vidyn.models.cartpole()
    vi = vidyn.VariationalIntegrator(model, DT, scheme="trapezoid", damping=np.zeros(2))
    weights = dict(Q=np.diag([DT, DT, 0.1 * DT, 0.1 * DT]), R=1e-2 * DT, QN=1e3, x_ref=[0, np.pi, 0, 0], actuated=[0], cost_state="velocity")
    return vi, weights


def test_the_cartpole_swings_up_from_an_interpolated_guess():
    vi, weights = problem()
    guess = np.column_stack([np.zeros(N + 1), np.linspace(0.0, np.pi, N + 1)])
    shot = vidyn.optim.fddp(vi, [0, 0], guess, np.zeros((N, 1)), max_iterations=400, tolerance=1e-9, **weights)
    reference = vidyn.optim.ilqr(vi, [0, 0], U_init=np.zeros((N, 1)), max_iterations=400, tolerance=1e-9, **weights)
    assert shot.converged and "infeasible" not in shot.message, shot.message
    assert abs(shot.cost - reference.cost) < 1e-3 * reference.cost
    assert shot.iterations < reference.iterations
    assert abs(shot.q[-1][1] - np.pi) < 2e-3 and abs(shot.q[-1][0]) < 2e-3
    np.testing.assert_allclose(shot.trajectory.q, shot.q, rtol=0, atol=1e-6)
    states = np.hstack([guess, np.zeros((N + 1, 2))])
    again = vidyn.optim.fddp(vi, [0, 0], states, np.zeros((N, 1)), max_iterations=400, tolerance=1e-9, **weights)
    np.testing.assert_array_equal(again.u, shot.u)


def test_the_log_reports_the_gradient_norm():
    """``log["gradient_norm"]`` (was NaN on every FDDP iteration, found by the fuzzer in
    session 38): from a feasible guess (the rollout of the initial controls) FDDP's first
    iterate is iLQR's, and so is its norm; from the interpolated, infeasible guess it is the
    norm with the gaps held, finite and positive, and it falls as FDDP converges."""
    vi, weights = problem()
    u0 = np.zeros((N, 1))
    start = vi.rollout([0, 0], u=np.hstack([u0, np.zeros((N, 1))]))
    feasible = np.hstack([start.q, start.p])
    kw = dict(max_iterations=3, **{k: v for k, v in weights.items() if k != "cost_state"})
    first_ilqr = vidyn.optim.ilqr(vi, [0, 0], U_init=u0, **kw).log["gradient_norm"][0]
    first_fddp = vidyn.optim.fddp(vi, [0, 0], feasible, u0, **kw).log["gradient_norm"][0]
    assert first_fddp == pytest.approx(first_ilqr, rel=1e-12)
    guess = np.column_stack([np.zeros(N + 1), np.linspace(0.0, np.pi, N + 1)])
    shot = vidyn.optim.fddp(vi, [0, 0], guess, u0, max_iterations=400, tolerance=1e-9, **weights)
    norms = shot.log["gradient_norm"]
    assert np.all(np.isfinite(norms)) and norms[0] > 0
    assert norms[-1] < 1e-3 * norms[0], norms


def test_torque_limits():
    """With |u| ≤ 2 N (the unlimited swing-up pushes with up to 34 N; with 2 N the pole cannot
    get up in 2.5 s) FDDP from the same guess keeps every force within the limit, the limit
    binds, and it reaches the limited optimum iLQR reaches (measured: both 2225.0423)."""
    vi, weights = problem()
    guess = np.column_stack([np.zeros(N + 1), np.linspace(0.0, np.pi, N + 1)])
    shot = vidyn.optim.fddp(vi, [0, 0], guess, np.zeros((N, 1)), u_min=-2.0, u_max=2.0, max_iterations=400, tolerance=1e-9, **weights)
    reference = vidyn.optim.ilqr(vi, [0, 0], U_init=np.zeros((N, 1)), u_min=-2.0, u_max=2.0, max_iterations=400, tolerance=1e-9, **weights)
    assert shot.converged, shot.message
    assert np.abs(shot.u).max() <= 2.0 and np.isclose(np.abs(shot.u).max(), 2.0)
    assert abs(shot.cost - reference.cost) < 1e-3 * reference.cost, (shot.cost, reference.cost)


def test_what_fddp_refuses():
    vi, weights = problem()
    with pytest.raises(vidyn.InputError, match="X_init is required"):
        vidyn.optim.fddp(vi, [0, 0], None, np.zeros((N, 1)), **weights)
    with pytest.raises(vidyn.InputError, match=r"X_init has shape \(3, 2\)"):
        vidyn.optim.fddp(vi, [0, 0], np.zeros((3, 2)), np.zeros((N, 1)), **weights)
    guess = np.zeros((N + 1, 2))
    guess[5, 1] = np.nan
    with pytest.raises(vidyn.InputError, match="not finite"):
        vidyn.optim.fddp(vi, [0, 0], guess, np.zeros((N, 1)), **weights)


# The panda reach of examples/optim_panda_reach.py (with gravity): the tool centre point to a
# target 36 cm from the "ready" pose in 1 s, dt = 0.01 s, cost on y = (q, v)
# Σ dt·[½|p_tcp − p*|² + ½|y − y₀|²_W + ½ 1e-3 |u|²] + ½ 1e3 |p_tcp,N − p*|² + ½|y_N − y₀|²_WN.
PANDA_DT, PANDA_N, TCP = 0.01, 100, "panda_hand_tcp"
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02, 0.02])


def panda_reach():
    with warnings.catch_warnings():  # the URDF's mimic finger joint, read as an independent one
        warnings.simplefilter("ignore", vidyn.ModelWarning)
        model = vidyn.models.example_robot("panda")
    n = model.nv
    target = vidyn.frame_placement(model, READY, TCP)[:3, 3] + [0.15, 0.25, -0.2]
    y0 = np.concatenate([READY, np.zeros(n)])
    weights = dict(
        Q=PANDA_DT * np.concatenate([np.full(n, 1e-2), np.full(n, 1e-1)]), R=PANDA_DT * 1e-3,
        QN=np.concatenate([np.full(n, 1e-2), np.full(n, 10.0)]), x_ref=y0, cost_state="velocity",
        frame=TCP, frame_target=target, frame_weight=PANDA_DT * 1.0, frame_weight_terminal=1e3,
    )
    return model, vidyn.VariationalIntegrator(model, PANDA_DT), target, weights


def largest_gap(vi, q, p, U):
    """max_k |step(q_k, p_k, U_k) − (q_{k+1}, p_{k+1})|_∞: what multiple shooting must close."""
    return max(np.abs(np.concatenate(vi.step(q[k], p[k], U[k])) - np.concatenate([q[k + 1], p[k + 1]])).max() for k in range(len(U)))


def test_the_panda_reaches_from_an_interpolated_guess():
    """The guess: a goal posture on the target (damped least-squares inverse kinematics from the
    start), the configurations interpolated linearly from the start to it, at rest at every knot,
    with the torques that compensate gravity at each guessed posture — not a motion (the arm
    would stay where it is at every knot). FDDP from it ends feasible, on the target (the
    optimum stops 1.06 mm short: the terminal weight trades the last millimetre against the
    torques) and no worse than iLQR from the feasible guess (gravity compensation at rest);
    measured: both 0.44788279, FDDP 16 iterations, iLQR 16."""
    model, vi, target, weights = panda_reach()
    q = READY.copy()
    for _ in range(20):
        err = target - vidyn.frame_placement(model, q, TCP)[:3, 3]
        J = vidyn.jacobian(model, q, TCP)[:3]
        q = model.integrate(q, J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(3), err))
    assert np.linalg.norm(vidyn.frame_placement(model, q, TCP)[:3, 3] - target) < 1e-10
    towards = model.difference(READY, q)
    X = np.array([model.integrate(READY, s * towards) for s in np.linspace(0.0, 1.0, PANDA_N + 1)])
    U = np.array([vidyn.gravity(model, x) for x in X[:-1]])
    assert largest_gap(vi, X, np.zeros_like(X), U) > 5e-3  # |q_goal − q_start|_∞ / N: the guess is infeasible

    settings = dict(max_iterations=200, tolerance=1e-9)
    shot = vidyn.optim.fddp(vi, READY, X, U, v0=np.zeros(model.nv), **settings, **weights)
    reference = vidyn.optim.ilqr(vi, READY, np.zeros(model.nv), np.tile(vidyn.gravity(model, READY), (PANDA_N, 1)), **settings, **weights)
    assert reference.converged, reference.message
    assert shot.converged and shot.message.endswith("trajectory feasible"), shot.message
    assert shot.iterations > 1  # it had something to do
    np.testing.assert_array_equal(shot.q[0], READY)
    assert largest_gap(vi, shot.q, shot.p, shot.U) <= 1e-9
    np.testing.assert_allclose(shot.trajectory.q, shot.q, rtol=0, atol=1e-8)  # the controls alone reproduce it
    assert np.linalg.norm(vidyn.frame_placement(model, shot.q[-1], TCP)[:3, 3] - target) < 1.5e-3
    assert shot.cost <= reference.cost * (1 + 1e-7), (shot.cost, reference.cost)
