"""Contacts of a frame with the world as holonomic constraints of the variational integrator
(issue 24): lists of the scalar constraints :class:`vidyn.PointOnPlane` and
:class:`vidyn.Perpendicular`, for ``VariationalIntegrator(..., constraints=...)``.

* :func:`point_contact`: the frame's origin held at a world point (3 constraints: the origin
  on the three world planes through the point, normals x, y, z);
* :func:`frame_contact`: the frame's placement held (6 constraints: the point contact, and its
  axes kept perpendicular to the target's on the pairs ``(x, y)``, ``(y, z)``, ``(z, x)``,
  which fixes the relative rotation to first order about the target).

The multipliers of a trajectory (``VariationalIntegrator.multipliers(traj)``, (N, m)) give the
contact impulses: a point contact's three rows ``λ`` (in the order of its constraints) are
``−λ``, the world impulse on the frame's origin over the step, and ``−λ / dt`` its mean force
(:func:`point_contact_forces`). A contact set whose constraints are redundant (four 6-D feet on
one rigid body, for instance) makes the step's KKT system singular and raises an error, never
a silent wrong answer.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from vidyn._core import Perpendicular, PointOnPlane

__all__ = ["frame_contact", "point_contact", "point_contact_forces"]

_AXES = np.eye(3)


def point_contact(frame: str, target: npt.ArrayLike) -> list[PointOnPlane]:
    """The origin of ``frame`` held at the world point ``target`` (3,): three constraints."""
    p = np.asarray(target, dtype=np.float64)
    return [PointOnPlane(None, p, axis, frame, np.zeros(3)) for axis in _AXES]


def frame_contact(frame: str, target: npt.ArrayLike) -> list[PointOnPlane | Perpendicular]:
    """The placement of ``frame`` held at the world placement ``target`` (4, 4): its origin at
    ``target[:3, 3]`` and its axes perpendicular to the rotated target axes of the pairs
    ``(x, y)``, ``(y, z)``, ``(z, x)``; six constraints."""
    m = np.asarray(target, dtype=np.float64)
    if m.shape != (4, 4):
        from vidyn._core import InputError

        raise InputError(f"target has shape {m.shape}, expected a (4, 4) placement")
    rotation = m[:3, :3]
    pairs = ((0, 1), (1, 2), (2, 0))
    return [*point_contact(frame, m[:3, 3]), *(Perpendicular(None, rotation[:, j], frame, _AXES[i]) for i, j in pairs)]


def point_contact_forces(multipliers: npt.ArrayLike, dt: float, first: int = 0) -> np.ndarray:
    """The mean world force of the point contact whose three constraints start at row ``first``
    of the integrator's constraints, over each step: ``−λ[:, first:first + 3] / dt`` from the
    multipliers (N, m) of ``VariationalIntegrator.multipliers`` -> (N, 3)."""
    lam = np.asarray(multipliers, dtype=np.float64)
    return -lam[:, first : first + 3] / dt
