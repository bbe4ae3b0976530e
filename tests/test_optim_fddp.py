"""Multiple shooting from Python (``vidyn.optim.fddp``, issue 26 item 4): the VI cart-pole
swing-up from a state-interpolated guess, and what FDDP refuses.

The guess turns the pole linearly from hanging to upright at rest with zero force — a motion
no rollout follows. FDDP converges to a feasible swing-up with iLQR's cost (measured: 4.3954 in
53 iterations; iLQR from zero forces needs 90), the re-simulated controls reproduce it, and a
guess of configurations alone (momenta zero) is the same guess."""

from __future__ import annotations

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
