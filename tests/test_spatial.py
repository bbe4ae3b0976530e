"""vidyn.spatial: SO(3)/SE(3) exp, log, their Jacobians, actions and cross operators.

Checked three ways, on rotation vectors, twists and placements from
``strategies.rotation_cases`` (angles 0, ~1e-9, across the Taylor switches, generic, toward π,
π − ~1e-7 and π; linear parts 0 to ~10):

* against Pinocchio (the oracle of the issue: ``pin.exp3``, ``pin.Jexp6``, ``SE3.action`` …);
  where Pinocchio's own closed forms lose digits (just above its small-angle switch and,
  for the logarithms, within ~0.1 of π) the tolerance adds its measured error
  (``tolerances.pinocchio_spatial_rtol``);
* against an exact rational-arithmetic evaluation of the Jacobian series in that band, so
  vidyn's own accuracy there is still held to ``SPATIAL_RTOL``;
* against identities: exp∘log, log∘exp, Ad_{M⁻¹} = Ad_M⁻¹, the dual action, the cross
  operators, and the Jacobians against central differences on the group.

Inputs are built in NumPy (rotations through quaternions, ``strategies.quat_to_matrix``), so no
reference shares code with what it checks.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given

import vidyn
from strategies import RotationCase, homogeneous, inv_homogeneous, rotation_cases, skew
from tolerances import FD_RTOL, SPATIAL_FD_STEP, SPATIAL_RTOL, assert_close, pinocchio_spatial_rtol
from vidyn import spatial

pin = pytest.importorskip("pinocchio")

#: Distance to π below which a central difference of log may cross π, where log jumps from
#: πu to −πu (a step of h changes the angle by at most h): 10 steps.
LOG_FD_MARGIN = 10 * SPATIAL_FD_STEP


def scale_of(x) -> float:
    return max(1.0, float(np.max(np.abs(x))))


def same_representative(w_a: np.ndarray, w_b: np.ndarray) -> bool:
    """Whether two rotation vectors of angle π are the same (not ``u π`` and ``−u π``)."""
    return float(np.dot(w_a, w_b)) >= 0.0


# ------------------------------------------------------------------------------------------
# Against Pinocchio


@given(rotation_cases())
def test_so3_matches_pinocchio(c: RotationCase):
    w, R, th = c.w, c.rotation, c.theta
    assert_close(spatial.exp3(w), pin.exp3(w), SPATIAL_RTOL, what="exp3")
    assert_close(spatial.skew(w), pin.skew(w), 0.0, what="skew")
    assert_close(spatial.jexp3(w), pin.Jexp3(w), pinocchio_spatial_rtol(th, 1), what="jexp3")
    ours, theirs = spatial.log3(R), pin.log3(R)
    if c.kind == "pi" and not same_representative(ours, theirs):
        # both ±πu are logarithms of a half turn; compare at ours
        theirs, jlog = -theirs, np.linalg.inv(pin.Jexp3(ours))
    else:
        jlog = pin.Jlog3(R)
    assert_close(ours, theirs, pinocchio_spatial_rtol(th, 0, pi_power=2), what="log3")
    assert_close(spatial.jlog3(R), jlog, pinocchio_spatial_rtol(th, 2, pi_power=2), what="jlog3")


@given(rotation_cases())
def test_se3_matches_pinocchio(c: RotationCase):
    xi, M, th = c.twist, c.placement, c.theta
    assert_close(spatial.exp6(xi), pin.exp6(xi).homogeneous, pinocchio_spatial_rtol(th, 1), what="exp6")
    assert_close(spatial.jexp6(xi), pin.Jexp6(xi), pinocchio_spatial_rtol(th, 3), what="jexp6")
    ours, theirs = spatial.log6(M), pin.log6(pin.SE3(M)).vector
    if c.kind == "pi" and not same_representative(ours[3:], theirs[3:]):
        # the other half-turn representative: its linear part differs too; compare through
        # Pinocchio's exp6 and Jexp6 at ours
        assert_close(pin.exp6(ours).homogeneous, M, SPATIAL_RTOL, what="pin.exp6(log6)")
        assert_close(spatial.jlog6(M), np.linalg.inv(pin.Jexp6(ours)), SPATIAL_RTOL, what="jlog6")
        return
    assert_close(ours, theirs, pinocchio_spatial_rtol(th, 2, pi_power=2), what="log6")
    assert_close(spatial.jlog6(M), pin.Jlog6(pin.SE3(M)), pinocchio_spatial_rtol(th, 3, pi_power=2), what="jlog6")


@given(rotation_cases(), rotation_cases())
def test_actions_and_cross_operators_match_pinocchio(a: RotationCase, b: RotationCase):
    M, se3 = a.placement, pin.SE3(a.placement)
    v = b.twist  # any 6-vector: used as a motion and as a force
    tol = SPATIAL_RTOL
    assert_close(spatial.action(M), se3.action, tol, what="action")
    assert_close(spatial.dual_action(M), se3.dualAction, tol, what="dual_action")
    assert_close(spatial.cross_motion(v), pin.Motion(v).action, 0.0, what="cross_motion")
    assert_close(spatial.cross_force(v), pin.Motion(v).dualAction, 0.0, what="cross_force")
    assert_close(spatial.act_motion(M, v), se3.act(pin.Motion(v)).vector, tol, what="act_motion")
    assert_close(spatial.act_force(M, v), se3.act(pin.Force(v)).vector, tol, what="act_force")


# ------------------------------------------------------------------------------------------
# Against the exact series, where Pinocchio is not exact


def _crm(xi) -> list[list]:
    """``ad_ξ = [[ω×, v×], [0, ω×]]`` with entries of any numeric type."""
    v, w = xi[:3], xi[3:]
    zero = [[0, 0, 0]] * 3

    def sk(a):
        return [[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]]

    top = [r1 + r2 for r1, r2 in zip(sk(w), sk(v))]
    bottom = [r1 + r2 for r1, r2 in zip(zero, sk(w))]
    return top + bottom


def exact_jexp6(xi: np.ndarray, terms: int = 16) -> np.ndarray:
    """``J_r(ξ) = Σ_k (−ad_ξ)ᵏ/(k+1)!`` in exact rational arithmetic on the float inputs, rounded
    once at the end. For |ω| ≤ 0.11 and |v| ≤ 40 the first omitted term is below
    40·0.11¹⁵/17! ≈ 3e-27."""
    ad = [[-Fraction(float(x)) for x in row] for row in _crm(xi)]
    total = [[Fraction(int(i == j)) for j in range(6)] for i in range(6)]
    term = [row[:] for row in total]
    for k in range(1, terms):
        term = [[sum(term[i][m] * ad[m][j] for m in range(6)) / (k + 1) for j in range(6)] for i in range(6)]
        total = [[total[i][j] + term[i][j] for j in range(6)] for i in range(6)]
    return np.array([[float(x) for x in row] for row in total])


# Both sides of every switch: vidyn's SO(3) Taylor branch (1e-3) and jexp6 series (0.1),
# Pinocchio's (~1.3e-4), and the band between where Pinocchio's Jexp6 loses the most.
SMALL_ANGLES = (1e-6, 9e-5, 1.5e-4, 3e-4, 9.9e-4, 1.01e-3, 1e-2, 0.099, 0.101)


@pytest.mark.parametrize("theta", SMALL_ANGLES)
def test_jacobians_are_exact_across_the_taylor_switches(theta):
    rng = np.random.default_rng(int(theta * 1e7))
    for _ in range(2):
        axis = rng.standard_normal(3)
        xi = np.concatenate([10.0 * rng.standard_normal(3), theta * axis / np.linalg.norm(axis)])
        J = exact_jexp6(xi)
        assert_close(spatial.jexp6(xi), J, SPATIAL_RTOL, what="jexp6")
        assert_close(spatial.jexp3(xi[3:]), J[3:, 3:], SPATIAL_RTOL, what="jexp3")
        # M = exp6(ξ) rounded to float: log6(M) = ξ + O(eps·|ξ|), and J_log is smooth there
        assert_close(spatial.jlog6(spatial.exp6(xi)), np.linalg.inv(J), SPATIAL_RTOL, what="jlog6")
        assert_close(spatial.jlog3(spatial.exp3(xi[3:])), np.linalg.inv(J[3:, 3:]), SPATIAL_RTOL, what="jlog3")


# ------------------------------------------------------------------------------------------
# Identities


@given(rotation_cases())
def test_exp_and_log_invert_each_other(c: RotationCase):
    R, M = c.rotation, c.placement
    assert_close(spatial.exp3(spatial.log3(R)), R, SPATIAL_RTOL, what="exp3(log3(R))")
    assert_close(spatial.exp6(spatial.log6(M)), M, SPATIAL_RTOL, what="exp6(log6(M))")
    assert abs(np.linalg.norm(spatial.log3(R)) - c.theta) <= SPATIAL_RTOL * np.pi
    if c.kind != "pi":  # log is single-valued below π
        assert_close(spatial.log3(R), c.w, SPATIAL_RTOL, what="log3 of the drawn rotation")
        xi = c.twist
        assert_close(spatial.log6(spatial.exp6(xi)), xi, SPATIAL_RTOL, what="log6(exp6(xi))")
        eye = np.eye(6)
        assert_close(spatial.jlog6(spatial.exp6(xi)) @ spatial.jexp6(xi), eye, SPATIAL_RTOL, scale=scale_of(xi) ** 2, what="jlog6·jexp6")
        assert_close(spatial.jlog3(spatial.exp3(c.w)) @ spatial.jexp3(c.w), eye[:3, :3], SPATIAL_RTOL, what="jlog3·jexp3")
    # left Jacobian = J_r(−w) = J_r(w)ᵀ; exp6 of a pure rotation is exp3
    assert_close(spatial.jexp3(-c.w), spatial.jexp3(c.w).T, SPATIAL_RTOL, what="jexp3(-w)")
    assert_close(spatial.exp6(np.concatenate([np.zeros(3), c.w]))[:3, :3], spatial.exp3(c.w), 0.0, what="exp6 rotation")


@given(rotation_cases(), rotation_cases(), rotation_cases())
def test_action_identities(a: RotationCase, b: RotationCase, m: RotationCase):
    M1, M2, v, f = a.placement, b.placement, m.twist, m.twist[::-1].copy()
    ad = spatial.action(M1)
    s = scale_of(M1[:3, 3])
    assert_close(spatial.action(inv_homogeneous(M1)), np.linalg.inv(ad), SPATIAL_RTOL, scale=s**2, what="Ad(M⁻¹) = Ad(M)⁻¹")
    assert_close(spatial.dual_action(M1), np.linalg.inv(ad).T, SPATIAL_RTOL, scale=s**2, what="Ad* = Ad⁻ᵀ")
    assert_close(spatial.action(M1 @ M2), ad @ spatial.action(M2), SPATIAL_RTOL, scale=s * scale_of(M2[:3, 3]) + s, what="Ad(M1 M2)")
    assert_close(spatial.act_motion(M1, v), ad @ v, SPATIAL_RTOL, scale=s * scale_of(v), what="act_motion")
    assert_close(spatial.act_force(M1, f), spatial.dual_action(M1) @ f, SPATIAL_RTOL, scale=s * scale_of(f), what="act_force")
    power = float(np.dot(spatial.act_motion(M1, v), spatial.act_force(M1, f)))
    assert abs(power - float(np.dot(v, f))) <= SPATIAL_RTOL * s * scale_of(v) * scale_of(f) * 6, "power is frame invariant"
    # cross operators: v×* = −(v×)ᵀ, v × v = 0, and Ad (v×) Ad⁻¹ = (Ad v)×
    assert_close(spatial.cross_force(v), -spatial.cross_motion(v).T, 0.0, what="crf = -crmᵀ")
    assert_close(spatial.cross_motion(v) @ v, np.zeros(6), SPATIAL_RTOL, scale=scale_of(v) ** 2, what="v × v")
    lhs = ad @ spatial.cross_motion(v) @ np.linalg.inv(ad)
    assert_close(lhs, spatial.cross_motion(ad @ v), SPATIAL_RTOL, scale=(s + 1) ** 3 * scale_of(v), what="Ad (v×) Ad⁻¹")
    u = m.rho
    assert_close(spatial.skew(a.w) @ u, np.cross(a.w, u), SPATIAL_RTOL, scale=scale_of(u) * np.pi, what="skew")
    assert_close(spatial.skew(a.w), skew(a.w), 0.0, what="skew vs NumPy")


# ------------------------------------------------------------------------------------------
# Jacobians against central differences on the group
#
# Step SPATIAL_FD_STEP = 1e-5 (not FD_STEP; see tolerances.py for why), tolerance
# FD_RTOL = 1e-7 relative to max(1, |J|): any wrong term (O(1)) fails.


def central_difference(f, x: np.ndarray, h: float = SPATIAL_FD_STEP) -> np.ndarray:
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        cols.append((f(x + e) - f(x - e)) / (2 * h))
    return np.stack(cols, axis=1)


@given(rotation_cases())
def test_jexp_matches_central_differences(c: RotationCase):
    w, xi = c.w, c.twist
    R_inv, M_inv = spatial.exp3(w).T, inv_homogeneous(spatial.exp6(xi))
    # J = d/dδ log(exp(x)⁻¹ exp(x + δ)) at δ = 0
    J3 = central_difference(lambda x: spatial.log3(R_inv @ spatial.exp3(x)), w)
    assert_close(spatial.jexp3(w), J3, FD_RTOL, what="jexp3 vs FD")
    J6 = central_difference(lambda x: spatial.log6(M_inv @ spatial.exp6(x)), xi)
    assert_close(spatial.jexp6(xi), J6, FD_RTOL, what="jexp6 vs FD")


@given(rotation_cases())
def test_jlog_matches_central_differences(c: RotationCase):
    if np.pi - c.theta < LOG_FD_MARGIN:
        return  # the stencil may cross π (jlog there: the identities and Pinocchio)
    R, M = c.rotation, c.placement
    J3 = central_difference(lambda d: spatial.log3(R @ spatial.exp3(d)), np.zeros(3))
    assert_close(spatial.jlog3(R), J3, FD_RTOL, what="jlog3 vs FD")
    J6 = central_difference(lambda d: spatial.log6(M @ spatial.exp6(d)), np.zeros(6))
    assert_close(spatial.jlog6(M), J6, FD_RTOL, what="jlog6 vs FD")


# ------------------------------------------------------------------------------------------
# Inputs and outputs

FUNCTIONS = {
    "skew": (spatial.skew, ("w",), (3, 3)),
    "exp3": (spatial.exp3, ("w",), (3, 3)),
    "log3": (spatial.log3, ("R",), (3,)),
    "jexp3": (spatial.jexp3, ("w",), (3, 3)),
    "jlog3": (spatial.jlog3, ("R",), (3, 3)),
    "exp6": (spatial.exp6, ("xi",), (4, 4)),
    "log6": (spatial.log6, ("M",), (6,)),
    "jexp6": (spatial.jexp6, ("xi",), (6, 6)),
    "jlog6": (spatial.jlog6, ("M",), (6, 6)),
    "action": (spatial.action, ("M",), (6, 6)),
    "dual_action": (spatial.dual_action, ("M",), (6, 6)),
    "cross_motion": (spatial.cross_motion, ("v",), (6, 6)),
    "cross_force": (spatial.cross_force, ("v",), (6, 6)),
    "act_motion": (spatial.act_motion, ("M", "v"), (6,)),
    "act_force": (spatial.act_force, ("M", "f"), (6,)),
}
SHAPES = {"w": (3,), "R": (3, 3), "xi": (6,), "M": (4, 4), "v": (6,), "f": (6,)}


def valid(name: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    w = rng.standard_normal(3)
    return {"w": w, "R": spatial.exp3(w), "M": homogeneous(spatial.exp3(w), rng.standard_normal(3))}.get(name, rng.standard_normal(6))


def test_public_names():
    assert sorted(spatial.__all__) == sorted(FUNCTIONS)
    assert vidyn.spatial is spatial


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_outputs_are_new_float64_arrays_of_the_documented_shape(fn):
    f, args, shape = FUNCTIONS[fn]
    x = [valid(a) for a in args]
    out = f(*x)
    assert out.dtype == np.float64 and out.shape == shape and out.flags.c_contiguous and out.flags.writeable
    # nested lists, Fortran order and strided views give the same result
    assert np.array_equal(f(*[a.tolist() for a in x]), out)
    assert np.array_equal(f(*[np.asfortranarray(a) for a in x]), out)
    assert np.array_equal(f(*[np.repeat(a, 2, axis=-1)[..., ::2] for a in x]), out)
    assert f.__doc__ and "Pinocchio" in f.__doc__


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_wrong_shapes_and_non_finite_values_raise_input_error_naming_the_argument(fn):
    f, args, _ = FUNCTIONS[fn]
    for k, name in enumerate(args):
        good = [valid(a) for a in args]
        bad = list(good)
        bad[k] = np.zeros(SHAPES[name][:-1] + (SHAPES[name][-1] + 1,))
        with pytest.raises(vidyn.InputError, match=rf"^{name} has shape \(.*\), expected {_shape_re(SHAPES[name])}"):
            f(*bad)
        bad[k] = good[k].copy()
        bad[k].flat[1] = np.nan
        with pytest.raises(ValueError, match=rf"^{name}\[.*\] is not finite \(nan\)"):
            f(*bad)


def _shape_re(shape: tuple[int, ...]) -> str:
    return r"\(" + r", ".join(str(n) for n in shape) + (r",\)" if len(shape) == 1 else r"\)")


def test_rotations_must_be_orthonormal_with_det_one():
    R = spatial.exp3([0.3, -0.2, 0.5])
    # the tolerance is 1e-9 on max|RᵀR − I| and |det R − 1|: 1e-10 passes, 1e-8 fails
    spatial.log3(R * (1 + 1e-11))
    for bad, what in [(R * (1 + 1e-8), "R"), (-R, "R"), (np.diag([1.0, 1.0, -1.0]), "R")]:
        with pytest.raises(vidyn.InputError, match=rf"^{what} is not a rotation matrix: .*det R = .*accepted: orthonormal with det \+1"):
            spatial.log3(bad)
    M = homogeneous(R, [1.0, 2.0, 3.0])
    M[:3, :3] *= 1.001
    for fn in (spatial.log6, spatial.jlog6, spatial.action, spatial.dual_action):
        with pytest.raises(vidyn.InputError, match=r"^M\[:3, :3\] is not a rotation matrix"):
            fn(M)
    M = homogeneous(R, [1.0, 2.0, 3.0])
    M[3, 0] = 1e-3
    with pytest.raises(vidyn.InputError, match=r"^M\[3, :\] is .*expected \[0, 0, 0, 1\]"):
        spatial.log6(M)


def test_overflowing_results_raise_input_error_instead_of_returning_nan():
    with pytest.raises(vidyn.InputError, match=r"^exp3: the result is not finite.*max \|w\| = 1e200"):
        spatial.exp3([1e200, 0.0, 0.0])
    with pytest.raises(vidyn.InputError, match=r"^act_motion: the result is not finite"):
        spatial.act_motion(homogeneous(np.eye(3), [1e300, 0, 0]), [0, 0, 0, 0, 1e300, 0])
    assert np.all(np.isfinite(spatial.exp6([1e150, 0, 0, 0, 0, 3.0])))
