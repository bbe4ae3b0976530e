"""Tolerances shared by the Python test-suite, each with the reasoning behind it.

Notation: ``eps`` is the double-precision unit round-off (2.2e-16); ``scale`` is the size of
the quantities that were added up to form the compared value (never smaller than 1, so that
tiny results are compared absolutely: a torque of 1e-14 N·m is zero for every purpose here).

Every helper below raises ``AssertionError`` with the worst entry, so a failure report says
*where* two arrays disagree and by how much, not merely that they do.
"""

from __future__ import annotations

import numpy as np

EPS = float(np.finfo(np.float64).eps)

# --- identities between vidyn's own algorithms -------------------------------------------
#
# RNEA, CRBA, nle and gravity are sums of O(n·depth) products of bounded terms, each with a
# rounding error of a few eps.  For the random trees of `strategies.models` (≤ 30 bodies, depth
# ≤ 30, |v| ≤ 10) that is ≤ ~1e3 operations per entry, i.e. ~1e-13 relative to the largest
# intermediate.  1e-10 relative to `scale` (the largest of |τ|, ‖M‖·|a|, |b|) leaves three
# orders of margin for unlucky cancellations and still catches any real error (a wrong sign,
# a missing cross term or a frame mix-up is O(1) relative).
IDENTITY_RTOL = 1e-10

# ABA ∘ RNEA round trip, in torque space: rnea(q, v, aba(q, v, τ)) = τ.  ABA is a
# backward-stable way of solving M a = τ − b, so the *residual* is small relative to
# ‖M‖·|a| + |τ| + |b| regardless of the conditioning of M: same reasoning and bound as above.
ABA_RESIDUAL_RTOL = 1e-10

# ABA ∘ RNEA round trip, in acceleration space: aba(q, v, rnea(q, v, a)) = a.  The forward
# error of any linear solve is ≈ cond(M)·(backward error), so the allowed error is
# ACCEL_COND_FACTOR · eps · cond(M) · max(1, |a|); the factor 1e4 covers the ~n·depth
# operations of the recursions (≤ 900 for 30 bodies) with an order of magnitude to spare.
ACCEL_COND_FACTOR = 1e4

# M · M⁻¹ = I: same forward-error argument as above (columns of M⁻¹ are solutions of
# M x = e_k), so the tolerance is MINV_COND_FACTOR · eps · cond(M).
MINV_COND_FACTOR = 1e4

# Symmetry of CRBA's M and of M⁻¹: vidyn returns the full matrix.  If it mirrors one triangle
# the two halves are bit-identical; if it computes both it may differ by round-off.  We allow
# round-off (1e-13 relative to max |M_ij|) and no more.
SYMMETRY_RTOL = 1e-13

# --- finite differences on the configuration manifold ------------------------------------
#
# Central differences with step h: truncation error ≈ h²·|f'''|/6, round-off ≈ eps·|f|/h.
# With h = 1e-6 (in units where the model's lengths and rates are O(1)), truncation is ~1e-12
# and round-off ~2e-10 relative, so 1e-7 relative to max(1, ‖J‖) leaves room for the
# conditioning of the exp/log maps and still catches a real error (STYLE.md §9).
FD_STEP = 1e-6
FD_RTOL = 1e-7

# Energy balance dE/dt = vᵀτ (E = T + V, no damping in built models).  We evaluate E along the
# second-order Taylor trajectory q(±h) = q ⊕ (±h v + ½h² a), v(±h) = v ± h a, whose energy is a
# smooth function Ẽ(h) with Ẽ'(0) = dE/dt exactly (only the first derivative of the path enters
# the first derivative of E).  The central quotient D(h) = (Ẽ(h) − Ẽ(−h))/(2h) has an even error
# expansion c₂h² + c₄h⁴ + …, so Richardson's (4 D(h/2) − D(h))/3 leaves O(h⁴).  The time step is
# chosen relative to the fastest time scale of the state, h = ENERGY_STEP · s with
# s = 1 / max(1, Σ|v_i|, sqrt(Σ|a_i|)) (Σ|v_i| bounds any body's angular rate on a chain), so the
# truncation is ~(1e-3)⁴ = 1e-12 relative, and round-off ≈ eps·|E|/h ≈ 2e-13·|E|/s.  Both are
# measured against |E|/s, the natural size of a power at this state; 1e-7 leaves margin for
# the round-off of E itself (a sum of ~30 bodies' energies, some large and cancelling).
ENERGY_STEP = 1e-3
ENERGY_RTOL = 1e-7

# --- configuration-space maps -------------------------------------------------------------
#
# (q ⊕ v) ⊖ q = v for |ω| < π: exp then log of SO(3)/SE(3)/SE(2), each a few eps; measured
# ≤ 7e-15 absolute over 900 random cases (|v| from 1e-8 to 1), so 1e-12 absolute.
CONFIG_ATOL = 1e-12
# q ⊕ (q₁ ⊖ q) = q₁ for arbitrary q, q₁: the relative rotation can be close to π, where the
# log is ill-conditioned (its error grows like eps/|π − θ|); random pairs essentially never
# come within 1e-6 of π, so 1e-9 absolute.
CONFIG_ROUND_TRIP_ATOL = 1e-9
# ... and when q₁ has rotations of exactly π (states case "angles_at_pi") the log's axis comes
# from the symmetric part of R and loses up to half the digits (sqrt(eps) ≈ 1.5e-8).
CONFIG_NEAR_PI_ATOL = 1e-7

# --- oracle: Pinocchio --------------------------------------------------------------------
#
# Both libraries implement the same recursions in double precision, but in different orders
# and with different intermediate representations (Pinocchio's URDF parser also stores some
# joints as RX/RY/RZ and others as unaligned axes, with rotations built from sin/cos directly).
# For the robots of example-robot-data (≤ 101 dof, depth ≤ ~15) the round-off of each entry is
# ≲ 1e3·eps ≈ 2e-13 relative to the largest entry of the array, so 1e-9 relative to
# max(1, |y|_inf) is four orders above the noise and six below any modelling error (wrong
# inertia frame, missing joint offset…), which are ≥ 1e-3 relative.  Solves (ABA, M⁻¹)
# additionally amplify by cond(M); we use the same bound but add the cond(M)·eps term.
ORACLE_RTOL = 1e-9

# ABA and M⁻¹ compared with Pinocchio: two different (each backward-stable) solves of M x = b
# agree to ~cond(M)·eps·c, c ~ the depth of the recursions (≤ 100 here).  Some published robots
# have cond(M) up to ~1e9 (icub: 7.7e8, from near-massless finger links), so for them the
# comparison can only be that good; for the typical cond(M) ≤ 1e5 the bound is ORACLE_RTOL.
# When M is singular (zero-inertia leaf bodies, e.g. romeo.urdf) forward dynamics is undefined
# and the comparison is skipped.
ORACLE_SOLVE_COND_FACTOR = 1e2


def oracle_solve_rtol(cond_m: float) -> float:
    return max(ORACLE_RTOL, ORACLE_SOLVE_COND_FACTOR * EPS * cond_m)


def _worst(actual: np.ndarray, expected: np.ndarray) -> str:
    err = np.abs(actual - expected)
    idx = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    return f"worst entry {idx}: got {actual[idx]!r}, expected {expected[idx]!r} (|diff| = {err[idx]:.3e})"


def assert_close(actual, expected, rtol: float, *, scale: float | None = None, what: str = "") -> None:
    """|actual − expected|_inf ≤ rtol · max(1, scale), scale defaulting to |expected|_inf.

    NaNs and infinities are always failures: a NaN would make every comparison false and
    therefore silently "pass" a naive `not (err > tol)` check.
    """
    actual = np.asarray(actual, dtype=float)
    expected = np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != expected {expected.shape}"
    assert np.all(np.isfinite(actual)), f"{what}: non-finite entries in result"
    assert np.all(np.isfinite(expected)), f"{what}: non-finite entries in reference"
    if actual.size == 0:
        return
    if scale is None:
        scale = float(np.max(np.abs(expected)))
    tol = rtol * max(1.0, scale)
    err = float(np.max(np.abs(actual - expected)))
    assert err <= tol, f"{what}: max |diff| = {err:.3e} > tol {tol:.3e}; {_worst(actual, expected)}"


def relative_error(actual, expected) -> float:
    """|x − y|_inf / max(1, |y|_inf): the quantity bounded by ORACLE_RTOL (inf if non-finite)."""
    actual = np.asarray(actual, dtype=float)
    expected = np.asarray(expected, dtype=float)
    if actual.shape != expected.shape:
        return float("inf")
    if actual.size == 0:
        return 0.0
    if not (np.all(np.isfinite(actual)) and np.all(np.isfinite(expected))):
        return float("inf")
    return float(np.max(np.abs(actual - expected)) / max(1.0, float(np.max(np.abs(expected)))))


def cond(m: np.ndarray) -> float:
    """2-norm condition number (inf for a singular matrix); 1 for an empty one."""
    if m.size == 0:
        return 1.0
    return float(np.linalg.cond(m))

# --- second-order derivatives of the VI flow map ------------------------------------------
#
# The tensors are checked against central differences of the exact first-order A, B of steps
# re-solved to round-off (Newton tolerance 1e-15).  A's momentum rows are sums of DEL-block
# terms of size ~|M|/Δt that cancel to O(1), so A carries ~1e-12 absolute rounding that a
# central difference divides by 2h; truncation is ~h²·|f''''|/6.  Measured in the Rust tests
# (rust/vi/src/second_order_tests.rs, 10-body tree): worst error 1e-6 at h = 1e-6, 4e-7 at
# h = 1e-5, 5e-8 at h = 1e-4, 3e-7 at h = 1e-3.  So h = 1e-5 and 1e-6 · max(1, |tensor|)
# (times Σ|λ| for a contraction): ≥ 3× margin over the noise, orders of magnitude below any
# wrong term.
VI_SECOND_ORDER_FD_STEP = 1e-5
VI_SECOND_ORDER_FD_RTOL = 1e-6

# --- vidyn.spatial: SO(3)/SE(3) exp, log, Jacobians, actions -------------------------------
#
# Each is O(100) flops on entries of size ≤ max(1, |linear part|), and vidyn switches to Taylor
# series or another formula wherever a closed form would cancel badly, so its results are
# within a few hundred eps of the exact value at every angle. Measured (4000 draws of
# strategies.rotation_cases, the exact series of test_spatial.py, Pinocchio outside its bands
# below): worst 1.6e-13 relative to max(1, |y|_inf), for log3 just before its switch near π
# (~eps/(π − θ) at π − θ = 1e-3), ≤ 1e-13 everywhere else. 1e-12 leaves a 6× margin; a
# convention error (order, sign, left vs right, frame) is O(1).
SPATIAL_RTOL = 1e-12

# Pinocchio 4.1 switches from Taylor series to closed forms at θ ≈ 1.3e-4 (measured), and
# above that its closed forms cancel: the measured error of Jexp6 and Jlog6 is ≤ 2·eps/θ³, of
# Jlog3 and log6 ≤ 0.5·eps/θ² (up to a second switch at θ ≈ 2.4e-3), of exp6 and Jexp3
# ≤ eps/θ (relative to max(1, |y|_inf); e.g. 2e-5 for Jexp6 at θ = 1.5e-4, 1e-10 at 1e-2).
# Comparisons with Pinocchio allow 10× that on top of SPATIAL_RTOL above θ = 1e-4 (below it
# Pinocchio's Taylor branches are exact and the tolerance is SPATIAL_RTOL alone); vidyn's own
# accuracy there is checked separately against the exact series with SPATIAL_RTOL.
PINOCCHIO_TAYLOR_SWITCH = 1e-4
# Near π, Pinocchio's log3 reads the axis from R − Rᵀ (∝ sin θ) down to π − θ ≈ 5e-3 (measured)
# and only then switches to the symmetric part of R: its log3, Jlog3, log6 and Jlog6 lose
# ≤ 5·eps/(π − θ)² there (measured: 2.4e-11 for log3 at π − 5.6e-3). Allowed (10×) for
# π − θ ≥ 1e-3; closer to π Pinocchio is exact again. vidyn switches at π − 1e-3, and just
# before it loses ≤ eps/(π − θ) ≈ 2e-13 (measured 1.6e-13), within SPATIAL_RTOL.
PINOCCHIO_PI_SWITCH = 1e-3


def pinocchio_spatial_rtol(theta: float, power: int, pi_power: int = 0) -> float:
    """SPATIAL_RTOL plus Pinocchio's cancellation: ``10·eps/θ^power`` above its small-angle
    switch, and (for the logarithms, ``pi_power`` = 2) ``10·eps/(π − θ)^pi_power`` away from π."""
    tol = SPATIAL_RTOL
    if theta >= PINOCCHIO_TAYLOR_SWITCH:
        tol += 10.0 * EPS / theta**power
    if pi_power and np.pi - theta >= PINOCCHIO_PI_SWITCH:
        tol += 10.0 * EPS / (np.pi - theta) ** pi_power
    return tol


# Central differences of the group maps (Jacobians of exp and log). Just above vidyn's Taylor
# switch (θ ≈ 1e-3) the closed forms cancel to ~eps/θ, and just before log3's switch near π
# (π − θ ≈ 1e-3) its axis from R − Rᵀ is good to ~eps/(π − θ): about 2e-13, a few hundred
# eps rather than eps, and the two branches of log3 differ by as much at the switch. A
# central difference divides that noise by 2h: with FD_STEP = 1e-6 it reached 7.6e-8
# (measured over 4000 draws), too close to FD_RTOL. h = 1e-5 divides it by 10 (measured
# ≤ 1.8e-8, also across the switch) while truncation, ~h²·|f‴| ≈ 1e-10, stays far below
# FD_RTOL = 1e-7, which these checks keep.
SPATIAL_FD_STEP = 1e-5
