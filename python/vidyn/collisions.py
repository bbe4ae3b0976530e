"""Contacts between the bodies of a :class:`vidyn.MaximalIntegrator` taken from a URDF's
``<collision>`` primitives (issue 27).

:func:`collision_pairs` lists the pairs of collision shapes (:class:`vidyn.viz.Shape`, as read
by :func:`vidyn.viz.collision_shapes`) that may touch, after a filter:

* shapes on the same body never (links joined by fixed joints are one body);
* shapes on a parent and its child body not unless ``adjacent=True`` (their collision
  geometry usually overlaps at the joint by design);
* pairs of links named in ``exclude`` not;
* pairs whose signed distance is not implemented (box–box, capsule–box; cylinders and meshes
  are never contact shapes) not: they are returned separately, so that nothing is dropped
  silently.

:func:`collision_contacts` adds a body contact
(:meth:`vidyn.MaximalIntegrator.add_body_contact`) for each pair.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from vidyn._core import MaximalIntegrator, Model
from vidyn.viz import Shape, _shape_placement, _shapes, collision_shapes, frame_bodies

__all__ = ["CollisionPairs", "collision_contacts", "collision_pairs"]

_ContactKind = Literal["sphere", "capsule", "box"]
#: The pairs of shape kinds whose signed distance a body contact implements.
_PAIRS = {frozenset({"sphere"}), frozenset({"sphere", "capsule"}), frozenset({"capsule"}), frozenset({"sphere", "box"})}


@dataclass(frozen=True)
class CollisionPairs:
    """The pairs of :func:`collision_pairs`: ``pairs`` to contact, and ``unsupported``, the
    pairs that passed the filter but whose kinds have no signed distance (or are not contact
    shapes: cylinders)."""

    pairs: list[tuple[Shape, Shape]]
    unsupported: list[tuple[Shape, Shape]]


def _body_of(model: Model) -> dict[str, int]:
    """Link (frame) name -> the body it is fixed to (-1: the world)."""
    return dict(zip(model.frame_names, frame_bodies(model)))


def collision_pairs(
    model: Model,
    shapes: Sequence[Shape] | str | os.PathLike[str],
    *,
    exclude: Iterable[tuple[str, str]] = (),
    adjacent: bool = False,
) -> CollisionPairs:
    """The pairs of collision ``shapes`` (or of the URDF file of that path) of ``model`` that
    may touch (module docs). Raises KeyError for a shape whose link is not a frame of
    ``model`` and ValueError for a link fixed to the world (contact it with the ground through
    ``add_contact``)."""
    if isinstance(shapes, (str, os.PathLike)):
        shapes = collision_shapes(shapes)
    body = _body_of(model)
    for s in shapes:
        if s.link not in body:
            raise KeyError(f"link '{s.link}' of a collision shape is not a frame of the model")
    excluded = {frozenset(p) for p in exclude}
    parents = model.parents
    pairs, unsupported = [], []
    for i, a in enumerate(shapes):
        for b in shapes[i + 1 :]:
            ba, bb = body[a.link], body[b.link]
            if ba == bb or frozenset((a.link, b.link)) in excluded:
                continue
            if not adjacent and (ba >= 0 and parents[ba] == bb or bb >= 0 and parents[bb] == ba):
                continue
            if ba < 0 or bb < 0:
                world = a.link if ba < 0 else b.link
                raise ValueError(f"link '{world}' is fixed to the world: give its contacts with add_contact, or exclude its pairs")
            if frozenset((a.kind, b.kind)) in _PAIRS:
                pairs.append((a, b))
            else:
                unsupported.append((a, b))
    return CollisionPairs(pairs, unsupported)


def _contact_shape(s: Shape) -> tuple[_ContactKind, tuple[float, ...], npt.NDArray[np.float64]]:
    """``(kind, size, placement)`` of a shape of a supported pair."""
    kind = s.kind
    if kind == "sphere" or kind == "capsule" or kind == "box":
        return (kind, s.size, s.placement)
    raise ValueError(f"a {kind} is not a contact shape")


def collision_contacts(
    integrator: MaximalIntegrator,
    shapes: Sequence[Shape] | str | os.PathLike[str],
    *,
    friction: float = 0.5,
    friction_model: Literal["pyramid", "cone", "frictionless"] | None = None,
    exclude: Iterable[tuple[str, str]] = (),
    adjacent: bool = False,
) -> CollisionPairs:
    """Adds a body contact to ``integrator`` for every pair of :func:`collision_pairs` (named
    ``"<link a>|<link b>#<k>"``, in order, so that the ``k``-th body contact added is
    ``pairs[k]``); returns the pairs. Raises InputError, adding none, for a shape whose
    placement has a non-finite entry."""
    shapes = _shapes(shapes)
    for i, s in enumerate(shapes):
        _shape_placement(s, i)  # a non-finite placement is named here, before any contact is added
    found = collision_pairs(integrator.model, shapes, exclude=exclude, adjacent=adjacent)
    for k, (a, b) in enumerate(found.pairs):
        integrator.add_body_contact(
            f"{a.link}|{b.link}#{k}", a.link, _contact_shape(a), b.link, _contact_shape(b), friction=friction, friction_model=friction_model
        )
    return found
