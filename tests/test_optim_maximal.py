"""``optim.ilqr`` on a ``MaximalIntegrator`` (issue 27 item 3): the maximal-coordinate VI's
exact minimal-coordinate linearisation under the same optimiser call as the minimal VI."""

from __future__ import annotations

import numpy as np
import pytest

import vidyn
from test_maximal import cylinder_chain


def test_a_pendulum_swings_up_and_the_controls_replay():
    """A 1 m cylinder pendulum from rest to upright (θ = π) in 2 s of 20 ms steps: iLQR
    converges, the end is within 0.02 rad and 0.1 rad/s of the target, and the optimised
    controls re-simulated open loop by the integrator give the optimiser's states bit for bit
    (its rollouts are the integrator's own steps)."""
    mi = vidyn.MaximalIntegrator(cylinder_chain(1), 0.02)
    res = vidyn.optim.ilqr(mi, np.zeros(1), steps=100, QN=[1e3, 1e2], R=1e-2, x_ref=[np.pi, 0.0], max_iterations=200)
    assert res.converged, res.message
    assert res.cost < 1e-2 * res.cost_history[0]
    assert abs(res.x[-1, 0] - np.pi) < 0.02 and abs(res.x[-1, 1]) < 0.1, res.x[-1]
    traj = res.trajectory
    assert isinstance(traj, vidyn.MaximalTrajectory)
    np.testing.assert_array_equal(traj.q, res.q)
    assert res.p.shape == (101, 0) and res.K.shape == (100, 1, 2)


def test_a_two_link_arm_reaches_a_posture_with_one_motor_limited():
    """A two-link arm (both joints actuated) moves from hanging to a posture under a torque
    limit on the shoulder: the limit holds at every step and the final posture is reached to
    within 0.02 rad."""
    mi = vidyn.MaximalIntegrator(cylinder_chain(2), 0.02)
    target = np.array([1.0, -0.8])
    res = vidyn.optim.ilqr(
        mi, np.zeros(2), steps=75, Q=[1.0, 1.0, 0.0, 0.0], QN=[1e3, 1e3, 1e2, 1e2], R=1e-3, x_ref=np.r_[target, 0.0, 0.0], u_max=[12.0, np.inf], u_min=[-12.0, -np.inf], max_iterations=200
    )
    assert res.converged, res.message
    assert np.all(np.abs(res.u[:, 0]) <= 12.0 + 1e-12)
    assert np.abs(res.u[:, 0]).max() > 11.0, "the limit should be active somewhere"
    np.testing.assert_allclose(res.x[-1, :2], target, atol=0.02)


def test_what_the_maximal_optimiser_does_not_take_is_refused():
    mi = vidyn.MaximalIntegrator(cylinder_chain(2), 0.02)
    q0 = np.zeros(2)
    for keyword, value in (("tracks", [vidyn.optim.Track("joint2", np.zeros(3), 1.0)]), ("p0", np.zeros(2)), ("coordinates", "velocity"), ("xreg", 0.0)):
        with pytest.raises(vidyn.InputError, match=keyword):
            vidyn.optim.ilqr(mi, q0, steps=5, **{keyword: value})
    # an explicit state regularisation, even none, is refused rather than replaced by the default
    with pytest.raises(vidyn.InputError, match="xreg"):
        vidyn.optim.fddp(mi, q0, np.zeros((6, 2)), np.zeros((5, 2)), xreg=0.0)
    with pytest.raises(NotImplementedError):
        vidyn.optim.ilqr(mi, q0, steps=5, method="ddp")
    with pytest.raises(vidyn.InputError, match="U_init"):
        vidyn.optim.ilqr(mi, q0, np.zeros(2), np.zeros((5, 3)))
    b = vidyn.ModelBuilder("ball")
    b.add_body(None, "ball", "spherical", None, 1.0, [0.0, 0.0, -0.5], np.eye(3) * 0.01)
    with pytest.raises(vidyn.InputError, match="revolute and prismatic"):
        vidyn.optim.ilqr(vidyn.MaximalIntegrator(b.build(), 0.02), np.array([0.0, 0.0, 0.0, 1.0]), steps=5)


def test_multiple_shooting_from_an_interpolated_guess_reaches_ilqrs_optimum():
    """FDDP on the maximal integrator from the angles interpolated from rest to upright (not a
    motion) ends feasible (the open-loop replay equals its states) at the optimum iLQR reaches
    from a rollout of zero torques (costs equal to 1e-6 relative)."""
    mi = vidyn.MaximalIntegrator(cylinder_chain(1), 0.02)
    keywords = dict(QN=[1e3, 1e2], R=1e-2, x_ref=[np.pi, 0.0], max_iterations=300)
    guess = np.linspace(0.0, np.pi, 101)[:, None]
    shooting = vidyn.optim.fddp(mi, np.zeros(1), guess, np.zeros((100, 1)), **keywords)
    single = vidyn.optim.ilqr(mi, np.zeros(1), steps=100, **keywords)
    assert shooting.converged and single.converged, (shooting.message, single.message)
    np.testing.assert_allclose(shooting.trajectory.q, shooting.q, atol=1e-9)
    assert abs(shooting.cost - single.cost) < 1e-6 * single.cost, (shooting.cost, single.cost)
