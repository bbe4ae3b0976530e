"""Contacts of a frame with the world as holonomic constraints of the variational integrator
(issue 24): lists of the scalar constraints :class:`vidyn.PointOnPlane` and
:class:`vidyn.Perpendicular`, for ``VariationalIntegrator(..., constraints=...)``.

* :func:`point_contact`: the frame's origin held at a world point (3 constraints: the origin
  on the three world planes through the point, normals x, y, z);
* :func:`frame_contact`: the frame's placement held (6 constraints: the point contact, and its
  axes kept perpendicular to the target's on the pairs ``(x, y)``, ``(y, z)``, ``(z, x)``,
  which fixes the relative rotation to first order about the target).

Contacts that come and go (a gait) are a :class:`ContactSchedule`: every contact of the
horizon, each foothold of each stance its own, and the phases that say which hold on each step
(``VariationalIntegrator(..., constraints=cs.constraints, schedule=cs.active)``). A contact
switched on is a touchdown, resolved by the step as a plastic impact; switched off, a lift-off.

The multipliers of a trajectory (``VariationalIntegrator.multipliers(traj)``, (N, m)) give the
contact impulses: a point contact's three rows ``λ`` (in the order of its constraints) are
``−λ``, the world impulse on the frame's origin over the step, and ``−λ / dt`` its mean force
(:func:`point_contact_forces`). A contact set whose constraints are redundant (four 6-D feet on
one rigid body, for instance) makes the step's KKT system singular and raises an error, never
a silent wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from vidyn._arrays import finite_f64, real
from vidyn._core import InputError, Perpendicular, PointOnPlane, UnknownNameError, VariationalIntegrator, _spatial_placement
from vidyn.optim import FrictionCone

__all__ = ["ContactSchedule", "frame_contact", "point_contact", "point_contact_forces"]

Contact = Sequence[PointOnPlane | Perpendicular]

_AXES = np.eye(3)


def point_contact(frame: str, target: npt.ArrayLike) -> list[PointOnPlane]:
    """The origin of ``frame`` held at the world point ``target`` (3,): three constraints."""
    p = finite_f64(target, "target", (3,))
    return [PointOnPlane(None, p, axis, frame, np.zeros(3)) for axis in _AXES]


def frame_contact(frame: str, target: npt.ArrayLike) -> list[PointOnPlane | Perpendicular]:
    """The placement of ``frame`` held at the world placement ``target`` (4, 4): its origin at
    ``target[:3, 3]`` and its axes perpendicular to the rotated target axes of the pairs
    ``(x, y)``, ``(y, z)``, ``(z, x)``; six constraints. Those pairs are also perpendicular when
    the frame is turned by 180° about one of its axes or 120° about a diagonal: each pair's
    ``aligned`` axes (the frame's and the target's same axis) make a step that ends there
    raise ConvergenceError instead (a touchdown of a frame turned far from its target)."""
    m = _spatial_placement(target, "target")
    rotation = m[:3, :3]
    pairs = ((0, 1), (1, 2), (2, 0))
    return [
        *point_contact(frame, m[:3, 3]),
        *(Perpendicular(None, rotation[:, j], frame, _AXES[i], aligned=(rotation[:, i], _AXES[i])) for i, j in pairs),
    ]


def point_contact_forces(multipliers: npt.ArrayLike, dt: float, first: int = 0) -> np.ndarray:
    """The mean world force of the point contact whose three constraints start at row ``first``
    of the integrator's constraints, over each step: ``−λ[:, first:first + 3] / dt`` from the
    multipliers (N, m) of ``VariationalIntegrator.multipliers`` -> (N, 3)."""
    lam = finite_f64(multipliers, "multipliers", ("N", "m"))
    m = lam.shape[1]
    if isinstance(first, bool) or not isinstance(first, (int, np.integer)) or not 0 <= first <= m - 3:
        raise InputError(f"first is {first!r}, expected an int in 0..{m - 3}: the first of the contact's three columns among the multipliers' {m}")
    try:
        step = np.nan if isinstance(dt, (bool, np.bool_)) else real(dt, "dt")
    except (TypeError, InputError):
        step = np.nan
    if not (np.isfinite(step) and step > 0):
        raise InputError(f"dt is {dt!r}, expected a finite time step > 0")
    return -lam[:, first : first + 3] / step


@dataclass(frozen=True)
class ContactSchedule:
    """Named contacts and the phases in which they hold, as the ``constraints`` and
    ``schedule`` of a :class:`vidyn.VariationalIntegrator`.

    ``constraints``: every contact's constraints, in the order of ``contacts``; ``active``:
    (N, m) booleans, row ``k`` the constraints step ``k`` imposes; ``rows``: each contact's
    slice of the constraints (and of the multipliers' columns)."""

    constraints: list[PointOnPlane | Perpendicular]
    active: np.ndarray = field(repr=False)
    rows: dict[str, slice]

    @classmethod
    def of(cls, contacts: Mapping[str, Contact], phases: Sequence[tuple[int, Iterable[str]]]) -> ContactSchedule:
        """``contacts``: name -> its constraints (:func:`point_contact`, :func:`frame_contact`;
        a foot that lands twice at different places is two contacts); ``phases``: ``(steps,
        names)`` in order, the contacts that hold for that many steps."""
        constraints: list[PointOnPlane | Perpendicular] = []
        rows: dict[str, slice] = {}
        for name, cons in contacts.items():
            rows[name] = slice(len(constraints), len(constraints) + len(cons))
            constraints.extend(cons)
        if not constraints:
            raise InputError("contacts has no constraints: give at least one contact")
        masks, counts = [], []
        for i, (steps, names) in enumerate(phases):
            if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 1:
                raise InputError(f"phases[{i}] lasts {steps!r} steps, expected an int >= 1")
            mask = np.zeros(len(constraints), dtype=bool)
            for name in names:
                if name not in rows:
                    raise InputError(f"phases[{i}] names contact {name!r}, which is not one of contacts: {sorted(rows)}")
                mask[rows[name]] = True
            masks.append(mask)
            counts.append(int(steps))
        if not masks:
            raise InputError("phases is empty: give at least one (steps, names) phase")
        try:
            active = np.repeat(np.array(masks), counts, axis=0)
        except (ValueError, OverflowError, MemoryError) as e:
            raise InputError(f"phases last {sum(counts)} steps in all, too many for a schedule ({e})") from None
        active.flags.writeable = False
        return cls(constraints, active, rows)

    @property
    def steps(self) -> int:
        """Number of steps N the phases cover."""
        return int(self.active.shape[0])

    def _rows_of(self, name: str) -> slice:
        if name not in self.rows:
            raise UnknownNameError(f"name {name!r} is not a contact of this schedule; its contacts: {list(self.rows)}")
        return self.rows[name]

    def holds(self, name: str) -> np.ndarray:
        """(N,) whether contact ``name`` holds on each step."""
        return np.asarray(self.active[:, self._rows_of(name).start])

    def touchdowns(self) -> list[tuple[int, str]]:
        """``(step, name)`` of every touchdown: a step on which a contact holds that did not
        hold on the step before (the start's contacts are not touchdowns), in step order."""
        out = []
        for name in self.rows:
            held = self.holds(name)
            out += [(int(k), name) for k in np.flatnonzero(held[1:] & ~held[:-1]) + 1]
        return sorted(out)

    def touchdown_gaps(self, vi: VariationalIntegrator, q: npt.ArrayLike) -> np.ndarray:
        """How far each touchdown's contact is from holding when its step starts: the largest
        ``|h|`` of the contact's constraints at the knot ``q[step]`` (``q`` (N+1, model.nq), a
        trajectory's configurations), in the order of :meth:`touchdowns`: metres for a point
        contact and a frame contact's origin, the cosine between axes that should be
        perpendicular for a frame contact's orientation. The touchdown's impulse closes that
        gap within one step; a gap that is not small next to what the foot travels in a step
        is a jump that a finer time step would not reproduce."""
        configurations = finite_f64(q, "q", (self.steps + 1, vi.nq))
        return np.array([np.abs(vi.constraint_values(configurations[k])[self.rows[name]]).max() for k, name in self.touchdowns()])

    def friction_cones(self, mu: float = 0.7, weight: float = 1.0, tip: float = 1e-2) -> list[FrictionCone]:
        """A :class:`vidyn.optim.FrictionCone` for every contact (its first three rows, the
        point part of a frame contact), for ``optim.ilqr(..., friction=...)``."""
        return [FrictionCone(rows.start, mu, weight, tip) for rows in self.rows.values()]

    def forces(self, multipliers: npt.ArrayLike, dt: float, name: str) -> np.ndarray:
        """The mean world force on the origin of the point (or frame) contact ``name`` over
        each step, from the multipliers (N, m) of ``VariationalIntegrator.multipliers``
        -> (N, 3); zero on steps where it does not hold."""
        rows = self._rows_of(name)
        lam = finite_f64(multipliers, "multipliers", ("N", len(self.constraints)))
        return point_contact_forces(lam, dt, rows.start)
