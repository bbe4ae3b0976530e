"""Lie-group and spatial-algebra helpers: SO(3) and SE(3) exponential, logarithm and their
Jacobians, the actions of placements on motions and forces, and the cross operators.

These are the functions the Rust core uses (crate ``vidyn-spatial``), computed in Rust::

    import numpy as np
    from vidyn import spatial

    M = spatial.exp6([0.1, 0.0, 0.2, 0.0, 0.0, np.pi / 2])   # twist -> 4x4 placement
    xi = spatial.log6(M)                                      # back: [0.1, 0, 0.2, 0, 0, π/2]
    v_a = spatial.act_motion(M, [1, 0, 0, 0, 0, 1])           # Ad_M v
    J = spatial.jexp6(xi)                                     # right Jacobian of exp6

Conventions (the same as the rest of vidyn, and as Pinocchio)
    * 6-vectors are ``[linear; angular]``: a motion (twist) ``ξ = [v; ω]``, a force
      ``f = [f; n]`` (``n`` the moment about the frame origin).
    * A placement ``M = aMb`` is the 4x4 homogeneous matrix ``[[R, p], [0, 0, 0, 1]]`` that maps
      coordinates in frame *b* to frame *a*, ``x_a = R x_b + p``.
    * Jacobians of ``exp`` and ``log`` are **right** Jacobians, in the local frame:
      ``exp(ξ + δ) = exp(ξ) · exp(J(ξ) δ) + O(|δ|²)`` and
      ``log(M · exp(δ)) = log(M) + J_log(M) δ + O(|δ|²)``; they equal Pinocchio's ``Jexp3``,
      ``Jlog3``, ``Jexp6`` and ``Jlog6``. (The left Jacobian, ``exp(ξ + δ) = exp(J_l δ) exp(ξ)``,
      is ``J_l(ξ) = J_r(−ξ)``.)
    * ``log3``/``log6`` return rotation angles ``|ω| ∈ [0, π]``; at exactly ``π`` both ``±π u``
      are logarithms and either may be returned.

Inputs: anything ``numpy.asarray(x, dtype=float64)`` accepts. Shapes and finiteness are
checked, and rotations (``R``, ``M[:3, :3]``) must be orthonormal with ``det R = +1`` to within
``1e-9`` (``max|RᵀR − I|`` and ``|det R − 1|``), and a placement's last row must be exactly
``[0, 0, 0, 1]``; anything else raises :class:`vidyn.InputError` (a ``ValueError``) naming the
argument. So does a finite input too large for a finite result (``|ω| ≳ 1e154``). Results are
new float64 arrays.

Near the singular points the core switches to Taylor series (``|ω| < 1e-3`` for the SO(3)
coefficients, ``< 0.1`` for ``jexp6``) and reads the axis of ``log3`` from the symmetric part of
``R`` within ``1e-3`` of ``π``, so every function is accurate to round-off at every angle.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from vidyn import _core

__all__ = [
    "act_force",
    "act_motion",
    "action",
    "cross_force",
    "cross_motion",
    "dual_action",
    "exp3",
    "exp6",
    "jexp3",
    "jexp6",
    "jlog3",
    "jlog6",
    "log3",
    "log6",
    "skew",
]

_Array = npt.NDArray[np.float64]
_ArrayLike = npt.ArrayLike


def skew(w: _ArrayLike) -> _Array:
    """The skew-symmetric matrix ``w×`` (3, 3) of ``w`` (3,), with ``(w×) u = w × u``::

        [[  0,  -w_z,  w_y],
         [ w_z,   0,  -w_x],
         [-w_y,  w_x,   0 ]]

    Pinocchio's ``skew``."""
    return _core._spatial_skew(w)


def exp3(w: _ArrayLike) -> _Array:
    """Rotation matrix ``R = exp(w×)`` (3, 3) of the rotation vector ``w`` (3,) (Rodrigues):
    ``R = I + (sin θ/θ) w× + ((1 − cos θ)/θ²) (w×)²``, ``θ = |w|``. Pinocchio's ``exp3``."""
    return _core._spatial_exp3(w)


def log3(R: _ArrayLike) -> _Array:
    """Rotation vector ``w`` (3,) with ``exp3(w) = R`` and ``|w| ∈ [0, π]``, for a rotation
    matrix ``R`` (3, 3). Pinocchio's ``log3``. At an angle of exactly π, ``w`` and ``−w`` are both
    logarithms; either is returned."""
    return _core._spatial_log3(R)


def jexp3(w: _ArrayLike) -> _Array:
    """Right Jacobian of ``exp3`` (3, 3) at ``w`` (3,), with ``θ = |w|``::

        exp3(w + δ) = exp3(w) · exp3(J δ) + O(|δ|²)
        J = I − ((1 − cos θ)/θ²) w× + ((θ − sin θ)/θ³) (w×)²

    Pinocchio's ``Jexp3``. The left Jacobian is ``jexp3(-w) = jexp3(w).T``."""
    return _core._spatial_jexp3(w)


def jlog3(R: _ArrayLike) -> _Array:
    """Right Jacobian of ``log3`` (3, 3) at the rotation ``R`` (3, 3): the inverse of
    ``jexp3(log3(R))``, with ``w = log3(R)``, ``θ = |w|``::

        log3(R · exp3(δ)) = log3(R) + J δ + O(|δ|²)
        J = I + ½ w× + (1/θ² − (1 + cos θ)/(2θ sin θ)) (w×)²

    Pinocchio's ``Jlog3``. Finite at ``θ = π`` too (where ``log3`` itself jumps)."""
    return _core._spatial_jlog3(R)


def exp6(xi: _ArrayLike) -> _Array:
    """Placement ``M = exp(ξ)`` (4, 4) of the twist ``ξ = [v; ω]`` (6,)::

        M = [[exp3(ω), J_l(ω) v], [0, 0, 0, 1]],   J_l(ω) = jexp3(ω).T

    (the screw motion that moves with constant body velocity ξ for unit time). Pinocchio's
    ``exp6(xi).homogeneous``."""
    return _core._spatial_exp6(xi)


def log6(M: _ArrayLike) -> _Array:
    """Twist ``ξ = [v; ω]`` (6,) with ``exp6(ξ) = M`` and ``|ω| ∈ [0, π]``, for a placement
    ``M`` (4, 4): ``ω = log3(R)``, ``v = J_l(ω)⁻¹ p``. Pinocchio's ``log6(M).vector``."""
    return _core._spatial_log6(M)


def jexp6(xi: _ArrayLike) -> _Array:
    """Right Jacobian of ``exp6`` (6, 6) at ``ξ`` (6,)::

        exp6(ξ + δ) = exp6(ξ) · exp6(J δ) + O(|δ|²)
        J = Σ_k (−ad_ξ)ᵏ / (k + 1)!,   ad_ξ = cross_motion(ξ)

    (closed form in ``ad_ξ`` up to its fourth power; series for ``|ω| < 0.1``). Block form
    ``[[jexp3(ω), B], [0, jexp3(ω)]]`` in the ``[linear; angular]`` order. Pinocchio's ``Jexp6``."""
    return _core._spatial_jexp6(xi)


def jlog6(M: _ArrayLike) -> _Array:
    """Right Jacobian of ``log6`` (6, 6) at the placement ``M`` (4, 4): the inverse of
    ``jexp6(log6(M))``::

        log6(M · exp6(δ)) = log6(M) + J δ + O(|δ|²)

    Pinocchio's ``Jlog6``."""
    return _core._spatial_jlog6(M)


def action(M: _ArrayLike) -> _Array:
    """Adjoint ``Ad_M`` (6, 6) of the placement ``M = aMb`` (4, 4), acting on motions: it maps
    a twist in frame *b* to the same twist in frame *a*::

        Ad_M = [[R, p× R], [0, R]],   Ad_M [v; ω] = [R v + p × (R ω); R ω]

    Pinocchio's ``SE3.action``. ``Ad_{M⁻¹} = Ad_M⁻¹`` and ``Ad_{M₁M₂} = Ad_{M₁} Ad_{M₂}``."""
    return _core._spatial_action(M)


def dual_action(M: _ArrayLike) -> _Array:
    """Dual adjoint ``Ad_M⁻ᵀ`` (6, 6) of ``M = aMb`` (4, 4), acting on forces (frame *b* to
    *a*, preserving power: ``⟨Ad_M v, Ad_M⁻ᵀ f⟩ = ⟨v, f⟩``)::

        Ad_M⁻ᵀ = [[R, 0], [p× R, R]],   Ad_M⁻ᵀ [f; n] = [R f; R n + p × (R f)]

    Pinocchio's ``SE3.dualAction``."""
    return _core._spatial_dual_action(M)


def cross_motion(v: _ArrayLike) -> _Array:
    """Motion cross-product matrix ``v×`` (6, 6) of the motion ``v = [v; ω]`` (6,), with
    ``(v×) m = v ×ₘ m``, the derivative of a motion moving with ``v``::

        v× = [[ω×, v×], [0, ω×]]

    This is ``ad_v``, the Lie bracket ``[v, m]`` of se(3). Pinocchio's ``Motion(v).action``."""
    return _core._spatial_cross_motion(v)


def cross_force(v: _ArrayLike) -> _Array:
    """Force cross-product matrix ``v×*`` (6, 6) of the motion ``v = [v; ω]`` (6,), with
    ``(v×*) f = v ×* f``::

        v×* = −(v×)ᵀ = [[ω×, 0], [v×, ω×]]

    Pinocchio's ``Motion(v).dualAction``."""
    return _core._spatial_cross_force(v)


def act_motion(M: _ArrayLike, v: _ArrayLike) -> _Array:
    """``Ad_M v`` (6,): the motion ``v = [v; ω]`` (6,) given in frame *b*, expressed in frame
    *a* by the placement ``M = aMb`` (4, 4); equals ``action(M) @ v``. Pinocchio's ``M.act(Motion(v))``."""
    return _core._spatial_act_motion(M, v)


def act_force(M: _ArrayLike, f: _ArrayLike) -> _Array:
    """``Ad_M⁻ᵀ f`` (6,): the force ``f = [f; n]`` (6,) given in frame *b*, expressed in frame
    *a* by ``M = aMb`` (4, 4); equals ``dual_action(M) @ f``. Pinocchio's ``M.act(Force(f))``."""
    return _core._spatial_act_force(M, f)
