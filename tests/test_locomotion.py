"""Legged locomotion on the constrained VI (issue 24, items 4–5 in part): the ANYmal gait
cycles of ``examples/anymal_walk.py`` (crocoddyl's walking, trotting, pacing and bounding
gaits, 10 ms steps), solved by multiple shooting (FDDP) from crocoddyl's warm start.

Measured (walk / trot / pace / bound: 16 / 5 / 8 / 8 FDDP iterations): each converges to a
feasible trajectory; every
foot ends on its last foothold (2e-16 m), clears its path's height (0.1495 / 0.0997 / 0.1001 /
0.0998 m), lands within 0.055 / 0.034 / 0.13 / 0.10 mm of its foothold (``LANDING``: the
touchdown's impact closes the rest; with the swing's own weight there it was 2–10 mm); the
base advances 0.13 / 0.047 / 0.047 / 0.054 m (68 / 42 / 42 / 48 % of the centre of mass's
target). The contacts are bilateral, and but for the trot (≥ 16.7 N) these motions pull on
the ground (down to −49 / −213 / −161 N) unless friction cones are added (last test). The
optimised controls replay bit for bit through an
integrator with the default energy check.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import warnings

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str = "anymal_walk"):
    if name != "anymal_walk":
        load_example()  # the other examples import its helpers
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["walk", "trot", "pace", "bound"])
def test_anymal_gait_cycles(name):
    walk = load_example()
    try:
        model, gait, schedule, vi, res = walk.solve(name, verbose=False)
    except (FileNotFoundError, KeyError) as e:  # example-robot-data missing
        pytest.skip(str(e))
    halves, (_, height, support) = walk.GAITS[name]
    assert res.converged, res.message
    assert schedule.steps == support + sum(25 * len(groups) + support for groups in halves) and len(gait.contacts) == 8
    measured = walk.report(model, gait, schedule, vi, res)
    assert measured["worst foot error at the end (m)"] < 1e-9
    assert measured["lowest swing clearance (m)"] > 0.95 * height
    assert measured["worst touchdown gap (m)"] < 5e-4
    assert measured["base advance (m)"] > 0.35 * (gait.com[-1, 0] - gait.com[0, 0])
    # the controls replay exactly through the default integrator, energy check on
    import vidyn

    strict = vidyn.VariationalIntegrator(model, vi.dt, scheme="midpoint", constraints=schedule.constraints, schedule=schedule.active)
    replay = strict.rollout(res.trajectory.q[0], u=res.trajectory.u)
    np.testing.assert_array_equal(replay.q, res.trajectory.q)


def test_ddp_through_contact_phases():
    """Full DDP (``method="ddp"``) on the exact second order of the constrained VI — contacts,
    touchdowns and lift-offs, the floating base on its Lie group — through ANYmal's trot (56
    steps). From the rollout of the holding torques, far from the optimum, where the exact
    ``Q_uu`` is indefinite and those iterations fall back on the Gauss–Newton model, DDP takes
    4 iterations as iLQR does (61 before that fallback); from two iLQR iterations it converges
    in 2, to the optimum iLQR reaches (costs agree to 6e-10)."""
    walk = load_example()
    try:
        model, gait, schedule, vi, q0, guess, u_init, cost = walk.problem("trot")
    except (FileNotFoundError, KeyError) as e:  # example-robot-data missing
        pytest.skip(str(e))
    import vidyn

    v0 = np.zeros(model.nv)
    from_holding = vidyn.optim.ilqr(vi, q0, v0, u_init, method="ddp", **cost)
    assert from_holding.converged and from_holding.iterations <= 6, (from_holding.message, from_holding.iterations)
    rough = vidyn.optim.ilqr(vi, q0, v0, u_init, max_iterations=2, **cost)
    ddp = vidyn.optim.ilqr(vi, q0, v0, rough.U, method="ddp", **cost)
    ilqr = vidyn.optim.ilqr(vi, q0, v0, rough.U, **cost)
    assert ddp.converged and ilqr.converged, (ddp.message, ilqr.message)
    assert ddp.iterations <= 3, ddp.iterations
    assert abs(ddp.cost - ilqr.cost) <= 1e-8 * ilqr.cost, (ddp.cost, ilqr.cost)
    assert abs(from_holding.cost - ilqr.cost) <= 1e-8 * ilqr.cost, (from_holding.cost, ilqr.cost)


def test_fddp_with_ddp_jumps_in_fewer_iterations():
    """Multiple shooting with DDP's exact second order through contact phases
    (``optim.fddp(..., method="ddp")``: Gauss–Newton while gaps remain or where the exact model
    has no step, the exact one on the feasible iterates) on ANYmal's jump from crocoddyl's
    warm start: the Gauss–Newton optimum (costs within 1e-7), in fewer iterations (measured
    10 against 23; 5/8 on the pace, 7/8 on the bound, 18/16 on the walk, 5/5 on the trot)."""
    walk = load_example()
    try:
        model, gait, schedule, vi, q0, guess, u_init, cost = walk.problem("jump")
    except (FileNotFoundError, KeyError) as e:  # example-robot-data missing
        pytest.skip(str(e))
    import vidyn

    gauss_newton = vidyn.optim.fddp(vi, q0, guess, u_init, max_iterations=200, **cost)
    ddp = vidyn.optim.fddp(vi, q0, guess, u_init, max_iterations=200, method="ddp", **cost)
    assert gauss_newton.converged and ddp.converged, (gauss_newton.message, ddp.message)
    assert abs(ddp.cost - gauss_newton.cost) <= 1e-7 * gauss_newton.cost, (ddp.cost, gauss_newton.cost)
    assert ddp.iterations < gauss_newton.iterations, (ddp.iterations, gauss_newton.iterations)


def test_torque_limits_hold():
    """The walk with torques bounded by 0.75 of the URDF's effort limits (60 N m, box-QP
    FDDP; unlimited, the walk's largest torque is 79.5 N m): converged, every torque within its
    bound, the same gait quality as without bounds (measured: 15 iterations instead of 16, two
    torques at the bound, the cost 167.07 against 166.27 unlimited, touchdown gaps 0.055 mm in
    both)."""
    walk = load_example()
    try:
        model, gait, schedule, vi, res = walk.solve("walk", limits=0.75, verbose=False)
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    assert res.converged, res.message
    bound = 0.75 * model.effort_limit[6:]
    assert np.all(np.abs(res.u) <= bound) and np.any(np.abs(res.u) >= bound - 1e-9)
    assert walk.report(model, gait, schedule, vi, res)["worst touchdown gap (m)"] < 5e-4


def test_friction_cones_make_the_contacts_push():
    """The walk's first two swings (three phases, 52 steps) with the example's friction cones
    (μ = 0.7, weight 1e-2, tip ``CONE_TIP`` = 10 N) on every contact: without them a stance foot
    pulls (−25.7 N on this horizon); with them every foot pushes (measured: 11 iterations, every
    vertical force ≥ 14.1 N, |f_t|/f_z ≤ 0.653)."""
    walk = load_example()
    cone = walk.friction_cone("walk")
    try:
        model, gait, schedule, vi, res = walk.solve("walk", friction=cone, phases=3, verbose=False)
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    assert res.converged, res.message
    measured = walk.report(model, gait, schedule, vi, res)
    assert measured["contact force z min (N)"] > 0.5 * walk.CONE_TIP / cone.mu
    assert measured["largest |f_t| / f_z (N/N)"] < 0.75
    assert walk.plot(model, schedule, vi, res, "test_first_swings", cone.mu).is_file()
    free = walk.solve("walk", phases=3, verbose=False)
    assert walk.report(*free)["contact force z min (N)"] < -5.0


def test_state_regularisation_shortens_the_walk():
    """FDDP's state regularisation (``xreg``, 1e-2 by default, dropped after the first full
    steps) takes the walk to the optimum it reaches without (``xreg=0``; cost equal to 1e-9
    relative) in half the iterations (measured: 8 against 16): the regularised steps stop the
    full steps' closed-loop rollouts drifting along the horizon (BENCHMARKS.md, sessions
    31–33)."""
    walk = load_example()
    try:
        plain = walk.solve("walk", verbose=False, xreg=0.0)[-1]
        regularised = walk.solve("walk", verbose=False)[-1]
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    assert plain.converged and regularised.converged, (plain.message, regularised.message)
    assert regularised.iterations <= 0.6 * plain.iterations, (regularised.iterations, plain.iterations)
    assert abs(regularised.cost - plain.cost) <= 1e-9 * plain.cost


def test_friction_cones_give_the_same_iterates_on_any_thread_count():
    """FDDP through contact phases with friction cones is reproducible bit for bit: the bound
    with the example's cones gives the same states, controls and cost history on one thread
    and, twice, on two. Before session 32 the cones' stage costs read the multipliers of a
    step's solve or of its linearisation, whichever had last written them, and a stage whose
    kept step was being linearised on another thread solved that step again: the iterates
    differed from run to run by 4e-14 to 6e-14 (in four runs out of four)."""
    import vidyn

    walk = load_example()
    before = vidyn.get_num_threads()
    runs = []
    try:
        for threads in (1, 2, 2):
            vidyn.set_num_threads(threads)
            try:
                runs.append(walk.solve("bound", friction=walk.friction_cone("bound"), verbose=False)[-1])
            except (FileNotFoundError, KeyError) as e:
                pytest.skip(str(e))
    finally:
        vidyn.set_num_threads(before)
    first = runs[0]
    assert first.converged, first.message
    for res in runs[1:]:
        assert np.array_equal(res.x, first.x) and np.array_equal(res.u, first.u)
        assert np.array_equal(res.cost_history, first.cost_history)


@pytest.mark.parametrize("name", ["pace", "bound", "jump"])
def test_hard_gaits_push_with_friction_cones(name):
    """The motions that pull hardest without cones (pace −213 N, bound −161 N, jump −364 N)
    with the example's cones (``friction_cone``: weight 0.1 on the jump): converged (measured
    11 / 13 / 20 iterations (the jump 29 before the line search's fitted steps of session 25, 40
    before FDDP judged infeasible steps by an exact-on-LQ model); before the cone's own curvature entered the penalty's Hessian, 87 /
    38 / none in 200), every vertical force ≥ 7.9 / 12.4 / 11.1 N, |f_t|/f_z ≤ 0.70 / 0.63 /
    0.70: a jump that only pushes on the ground."""
    walk = load_example()
    try:
        model, gait, schedule, vi, res = walk.solve(name, friction=walk.friction_cone(name), verbose=False)
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    assert res.converged, res.message
    measured = walk.report(model, gait, schedule, vi, res)
    assert measured["contact force z min (N)"] > 5.0
    assert measured["largest |f_t| / f_z (N/N)"] < 0.75


def test_reference_configurations_from_srdf(tmp_path):
    """``models.reference_configuration`` reads SRDF postures as Pinocchio's
    ``loadReferenceConfigurations``: ANYmal's and solo12's "standing" (the values of their
    SRDFs), talos's "half_sitting" on the reduced model (joints it lacks are skipped); unknown
    states and values of the wrong length are errors."""
    import vidyn
    from vidyn import models

    try:
        anymal = models.example_robot("anymal")
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    q = models.reference_configuration(anymal, "anymal")
    np.testing.assert_array_equal(q[:7], [0, 0, 0.4792, 0, 0, 0, 1])
    np.testing.assert_array_equal(q[anymal.idx_q[anymal.joint_index("RH_KFE")]], 1.0)
    assert q.shape == (anymal.nq,)
    solo = models.example_robot("solo12")
    np.testing.assert_array_equal(models.reference_configuration(solo, "solo12")[7:10], [0.1, 0.8, -1.6])
    talos = models.example_robot("talos")
    half = models.reference_configuration(talos, "talos", "half_sitting")
    assert half[2] == 1.01927 and half.shape == (talos.nq,)
    with pytest.raises(vidyn.InputError, match="'sitting' is not in anymal.srdf"):
        models.reference_configuration(anymal, "anymal", "sitting")
    srdf = tmp_path / "bad.srdf"
    srdf.write_text('<robot name="r"><group_state name="s" group="g"><joint name="root_joint" value="0 0 1" /></group_state></robot>')
    with pytest.raises(vidyn.InputError, match="has 3 values, expected 7"):
        models.reference_configuration(anymal, srdf, "s")


@pytest.mark.parametrize("scheme, order", [("midpoint", 2), ("trapezoid", 2), ("simpson", 4)])
def test_a_flight_phase_is_ballistic(scheme, order):
    """ANYmal thrown upward (0.4 s, no contact) while its legs flail under sinusoidal torques:
    the centre of mass follows the ballistic parabola and the angular momentum about it is
    kept, both to the scheme's order (halving dt divides the errors by 4.0–4.3 for midpoint and
    trapezoid, by 14–16 for Simpson; measured at dt = 2.5 ms: 5e-6 m and 5e-4 kg m²/s for
    midpoint, 2e-9 m and 8e-8 for Simpson); the vertical momentum falls by exactly M g T
    (discrete Noether with a constant force: 1e-12 relative)."""
    import vidyn
    from vidyn import models

    with warnings.catch_warnings():  # ANYmal's URDF has a massless base link
        warnings.simplefilter("ignore")
        try:
            model = models.example_robot("anymal")
        except (FileNotFoundError, KeyError) as e:
            pytest.skip(str(e))
    q0, n = models.reference_configuration(model, "anymal"), model.nv
    v0 = np.r_[0.5, 0.1, 2.0, 0.3, -0.2, 0.4, np.random.default_rng(0).uniform(-1, 1, n - 6)]
    duration, errors = 0.4, []
    h0 = vidyn.centroidal_momentum(model, q0, v0)
    c0, cdot0 = vidyn.center_of_mass(model, q0), h0[:3] / model.total_mass
    for dt in (0.01, 0.005, 0.0025):
        vi = vidyn.VariationalIntegrator(model, dt, scheme=scheme, damping=np.zeros(n))
        steps = int(round(duration / dt))
        u = np.zeros((steps, n))
        u[:, 6:] = 5.0 * np.sin(3.0 * dt * np.arange(steps))[:, None]
        traj = vi.rollout(q0, v0=v0, u=u)
        h = vidyn.centroidal_momentum(model, traj.q[-1], vi.velocity(traj.q[-1], traj.p[-1]))
        parabola = c0 + cdot0 * duration + 0.5 * np.array([0.0, 0.0, -9.81]) * duration**2
        errors.append((np.abs(vidyn.center_of_mass(model, traj.q[-1]) - parabola).max(), np.abs(h[3:] - h0[3:]).max()))
        np.testing.assert_allclose(h[2] - h0[2], -model.total_mass * 9.81 * duration, rtol=1e-9)
    for coarse, fine in zip(errors, errors[1:]):
        for e_coarse, e_fine in zip(coarse, fine):
            assert e_coarse / e_fine > 0.8 * 2**order, (errors, scheme)


def test_talos_walk_takes_shorter_steps_where_the_model_overshoots():
    """On Talos's walk the Gauss–Newton full steps realise 0.30–0.49 of their predicted decrease
    over the last eight of the plain line search's 14 iterations (measured); by default, after
    two such steps, the line search first tries the shorter step those decreases fit (kept at
    0.63 and 0.62, measured) and converges in 9 to the same optimum."""
    walk = load_example("talos_walk")
    try:
        *_, plain = walk.solve(2, verbose=False, fitted_step=False)
        *_, fitted = walk.solve(2, verbose=False)
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    assert plain.converged and fitted.converged, (plain.message, fitted.message)
    assert set(plain.log["alpha"]) <= {1.0, 0.5, 0.25, 0.125}
    shorter = fitted.log["alpha"][(fitted.log["alpha"] > 0.5) & (fitted.log["alpha"] < 1.0)]
    assert len(shorter) >= 1
    assert fitted.iterations < 0.8 * plain.iterations
    # both stop once a full step's predicted decrease is below 1e-8 of the cost (4361)
    assert abs(fitted.cost - plain.cost) <= 1e-7 * plain.cost


def test_talos_takes_two_steps():
    """crocoddyl's bipedal walk on Talos's legs (``examples/talos_walk.py``: crocoddyl's
    legs-only model, 6-D sole contacts, dt 30 ms, two steps, FDDP from a kinematic guess):
    converged and feasible; every step of the result is the VI's step from its knot (measured
    3.3e-12, the Taylor predictor constrained, so a lone ``vi.step`` from a stance knot finds the
    same root); the open-loop replay follows it through the first step, lift-off and touchdown
    included (2.4e-7 at knot 46; a biped in single support then drifts away open loop); the
    soles end on their footholds and land within 0.44 mm and 0.73° of them (measured); the swing
    sole rises to its 0.1 m apex; the ground only pushes (vertical forces 163–491 N, the weight
    478 N)."""
    walk = load_example("talos_walk")
    try:
        model, gait, schedule, vi, res = walk.solve(2, verbose=False)
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    assert res.converged, res.message
    assert abs(model.total_mass - 48.69) < 0.05  # crocoddyl's talos_legs, not the locked upper body
    nq = model.nq
    q, p = res.x[:, :nq], res.x[:, nq:]
    for k in range(schedule.steps):
        q1, p1 = vi.step(q[k], p[k], res.U[k], k=k)
        assert np.abs(model.difference(q1, q[k + 1])).max() < 1e-9, k
    replay = vi.rollout(q[0], p0=p[0], u=res.U[:46])
    drift = [np.abs(model.difference(a, b)).max() for a, b in zip(replay.q, q)]
    assert max(drift) < 2e-6
    measured = walk.report(model, gait, schedule, vi, res)
    assert measured["worst sole error at the end (m)"] < 1e-9
    assert measured["worst touchdown gap (m)"] < 2e-3 and measured["worst touchdown turn (deg)"] < 3.0
    assert measured["highest swing sole (m)"] > 0.09
    assert measured["contact force z min (N)"] > 0.0
    assert measured["base advance (m)"] > 0.4
    assert walk.plot(model, schedule, vi, res, "test_walk", 0.7, feet=walk.FEET, robot="talos").is_file()


def test_anymal_jump_takes_longer_steps_where_the_model_underestimates():
    """On the jump every Gauss–Newton full step gains about 1.75 times its predicted decrease
    (measured), so the plain line search (``fitted_step=False``) converges linearly (23
    iterations), and so it does with ``alpha_max=1``; by default it tries the longer step those
    decreases fit after two such full steps, keeps steps longer than 1 and converges in 11
    (measured) to the same optimum."""
    import vidyn

    walk = load_example()
    try:
        model, gait, schedule, vi, q0, guess, u_init, cost = walk.problem("jump")
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    plain = vidyn.optim.fddp(vi, q0, guess, u_init, max_iterations=200, fitted_step=False, **cost)
    capped = vidyn.optim.fddp(vi, q0, guess, u_init, max_iterations=200, alpha_max=1.0, **cost)
    longer = vidyn.optim.fddp(vi, q0, guess, u_init, max_iterations=200, **cost)
    assert plain.converged and longer.converged, (plain.message, longer.message)
    assert capped.iterations == plain.iterations and np.array_equal(capped.x, plain.x)
    assert (plain.log["alpha"] <= 1.0).all() and (longer.log["alpha"] > 1.0).any()
    assert longer.iterations < 0.7 * plain.iterations
    # the plain steps stop with about 2e-4 of their linear tail left (last predicted decrease
    # 4.9e-5, each full step gaining 1.75 times it, the prediction falling by 0.56 per step):
    # measured 1.06e-4 above the longer steps' optimum
    assert 0.0 <= plain.cost - longer.cost <= 1e-7 * plain.cost


def test_anymal_jumps():
    """crocoddyl's ANYmal jump (``anymal_walk.py --gait jump``: the centre of mass 0.15 m up and
    0.3 m sideways, 10 ground knots, 20 up, 20 down, 10 ground, 10 ms): converged (30
    iterations), feasible, replayed open loop (measured 4.1e-11), the feet on their new
    footholds, landing within 0.5 mm of them; the centre of mass rises 0.167 m and lands 0.280 m
    sideways (measured). In the flight the motion is ballistic: the centre of mass's second
    differences are gravity to 4.9e-3 m/s² and the angular momentum about it
    (``centroidal_momentum`` of ``M⁻¹p``) stays within 6.7e-4 of its size (measured: the VI's
    discretisation error at this step; asserted with a margin of 1.5 to 6)."""
    import vidyn

    walk = load_example()
    try:
        model, gait, schedule, vi, res = walk.solve("jump", verbose=False)
    except (FileNotFoundError, KeyError) as e:
        pytest.skip(str(e))
    assert res.converged, res.message
    q, p, dt = res.trajectory.q, res.trajectory.p, vi.dt
    assert max(np.abs(model.difference(a, b)).max() for a, b in zip(q, res.x[:, : model.nq])) < 1e-8
    measured = walk.report(model, gait, schedule, vi, res)
    assert measured["worst foot error at the end (m)"] < 1e-9
    assert measured["worst touchdown gap (m)"] < 1e-3
    com = np.array([vidyn.center_of_mass(model, x) for x in q])
    assert com[:, 2].max() - com[0, 2] > 0.9 * walk.JUMP[0]
    assert com[-1, 1] - com[0, 1] > 0.25
    flight = [k for k in range(1, schedule.steps) if not schedule.active[k - 1].any() and not schedule.active[k].any()]
    assert len(flight) == 2 * walk.JUMP[3] - 1
    second = np.array([(com[k + 1] - 2 * com[k] + com[k - 1]) / dt**2 for k in flight])
    assert np.abs(second - [0.0, 0.0, -9.81]).max() < 3e-2
    angular = np.array([vidyn.centroidal_momentum(model, q[k], vi.velocity(q[k], p[k]))[3:] for k in flight])
    assert np.ptp(angular, axis=0).max() < 1e-3 * np.abs(angular).max()
