"""Trajectories saved to and loaded from ``.npz`` files: what ``Trajectory.save`` /
``Trajectory.load`` and ``MaximalTrajectory.save`` / ``MaximalTrajectory.load`` call.

A file holds the trajectory's arrays under their attribute names (``q``, ``p``, ``u``,
``iterations`` …, readable with plain ``numpy.load``), metadata as 0-d arrays (``format``,
``format_version``, ``vidyn_version``, ``model_name``, ``model_hash`` — the model's
``content_hash()`` —, ``dt``, ``scheme`` and, for a ``Trajectory``, ``s``), and the
integrator that made it as bytes (``integrator``, its ``to_bytes()``), so that ``load`` needs
nothing else. Nothing in a file is a pickle: it is read with ``allow_pickle=False``.

``load(path, integrator)`` with a model or an integrator checks that the file was saved from
it (the model by content hash; an integrator by equality, which compares the model and every
argument) and raises :class:`vidyn.StateError` naming what differs.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from vidyn._core import MaximalIntegrator, MaximalTrajectory, Model, StateError, Trajectory, VariationalIntegrator, __version__

__all__ = ["FORMAT_VERSION", "save", "load", "load_maximal"]

#: The version of the file layout written here (and the newest one read).
FORMAT_VERSION = 1

_Path = Union[str, "os.PathLike[str]"]

_VI_ARRAYS = ("q", "p", "u", "iterations")
_MAXIMAL_ARRAYS = ("q", "u", "positions", "quaternions", "linear_velocities", "angular_velocities", "energy", "constraint_violation", "iterations")


def _metadata(kind: str, model: Model, dt: float, scheme: str) -> dict[str, npt.NDArray[Any]]:
    return {
        "format": np.array(f"vidyn.{kind}"),
        "format_version": np.array(FORMAT_VERSION),
        "vidyn_version": np.array(__version__),
        "model_name": np.array(model.name),
        "model_hash": np.array(model.content_hash()),
        "dt": np.array(dt, dtype=np.float64),
        "scheme": np.array(scheme),
    }


def save(traj: Trajectory | MaximalTrajectory, path: _Path) -> None:
    """Writes ``traj`` to the ``.npz`` file ``path`` (exactly that name: no suffix is added)."""
    names: tuple[str, ...]
    if isinstance(traj, Trajectory):
        vi = traj.integrator
        data = {**_metadata("Trajectory", vi.model, vi.dt, vi.scheme), "s": np.array(vi.s)}
        names = _VI_ARRAYS
        state = vi.to_bytes()
    elif isinstance(traj, MaximalTrajectory):
        mi = traj.integrator
        data = _metadata("MaximalTrajectory", mi.model, mi.dt, "maximal")
        names = _MAXIMAL_ARRAYS
        state = mi.to_bytes()
    else:
        raise TypeError(f"traj must be a vidyn.Trajectory or vidyn.MaximalTrajectory, got {type(traj).__name__}")
    data["integrator"] = np.frombuffer(state, dtype=np.uint8)
    for name in names:
        data[name] = np.asarray(getattr(traj, name))
    data["iterations"] = data["iterations"].astype(np.int64)
    with open(path, "wb") as f:
        np.savez_compressed(f, **data)  # type: ignore[arg-type]


def _read(path: _Path, kind: str, names: tuple[str, ...]) -> dict[str, npt.NDArray[Any]]:
    """The arrays of a file saved by :func:`save` for a ``kind``, format checked."""
    try:
        with np.load(path, allow_pickle=False) as z:
            files = set(z.files)
            data = {name: z[name] for name in files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise StateError(f"{os.fspath(path)!r} is not a readable .npz file: {type(e).__name__}: {e}") from e
    found = str(data["format"]) if "format" in data else None
    if found != f"vidyn.{kind}":
        what = "no 'format' entry" if found is None else f"format {found!r}"
        raise StateError(f"{os.fspath(path)!r} is not a saved vidyn.{kind} ({what})")
    version = int(data.get("format_version", np.array(0)))
    if not 1 <= version <= FORMAT_VERSION:
        raise StateError(f"{os.fspath(path)!r} has file format version {version}; this vidyn ({__version__}) reads 1 to {FORMAT_VERSION}")
    missing = [name for name in ("integrator", *names) if name not in data]
    if missing:
        raise StateError(f"{os.fspath(path)!r} lacks the entries {', '.join(missing)}")
    return data


def _check_model(path: _Path, saved: Model, model: Model) -> None:
    if saved.content_hash() != model.content_hash():
        raise StateError(
            f"{os.fspath(path)!r} was saved from model {saved.name!r} (content hash {saved.content_hash()[:16]}…), "
            f"not from the given model {model.name!r} (content hash {model.content_hash()[:16]}…)"
        )


def _differences(saved: Any, given: Any, names: tuple[str, ...]) -> str:
    diff = [f"{n} {getattr(saved, n)!r} (given {getattr(given, n)!r})" for n in names if getattr(saved, n) != getattr(given, n)]
    return ", ".join(diff) if diff else "other arguments (joint forces, Newton settings, constraints, schedule, kinematic joints, body wrenches, contacts, limits, loop closures)"


def _iterations(data: dict[str, npt.NDArray[Any]], path: _Path) -> list[int]:
    it = data["iterations"]
    if it.ndim != 1 or not np.issubdtype(it.dtype, np.integer) or (it < 0).any():
        raise StateError(f"{os.fspath(path)!r}: iterations must be non-negative integers (N,), got {it.dtype} {it.shape}")
    return [int(k) for k in it]


def _saved_integrator(path: _Path, data: Any, cls: Any, given: Any, fields: tuple[str, ...]) -> Any:
    """The integrator of class ``cls`` stored in ``data``, checked against ``given`` (an
    integrator of that class, which is then returned, a Model, or None); ``fields``: what to
    name when the stored and the given integrators differ."""
    saved = cls.from_bytes(data["integrator"].tobytes())
    if isinstance(given, cls):
        _check_model(path, saved.model, given.model)
        if given != saved:
            raise StateError(f"{os.fspath(path)!r} was saved from another integrator of this model: {_differences(saved, given, fields)} differ")
        return given
    if isinstance(given, Model):
        _check_model(path, saved.model, given)
    elif given is not None:
        raise TypeError(f"integrator must be a vidyn.{cls.__name__}, a vidyn.Model or None, got {type(given).__name__}")
    return saved


def load(path: _Path, integrator: VariationalIntegrator | Model | None = None) -> Trajectory:
    """The :class:`vidyn.Trajectory` saved in ``path``; with ``integrator`` (a
    VariationalIntegrator or a Model), checked to have been saved from it."""
    data = _read(path, "Trajectory", _VI_ARRAYS)
    vi = _saved_integrator(path, data, VariationalIntegrator, integrator, ("dt", "scheme", "s"))
    n, nq = vi.n, vi.nq
    q, p, u = (np.asarray(data[k], dtype=np.float64) for k in ("q", "p", "u"))
    steps = u.shape[0] if u.ndim == 2 else -1
    if q.shape != (steps + 1, nq) or p.shape != (steps + 1, n) or u.shape != (steps, n):
        raise StateError(f"{os.fspath(path)!r}: q {q.shape}, p {p.shape}, u {u.shape} are not (N+1, {nq}), (N+1, {n}), (N, {n})")
    return Trajectory._from_arrays(vi, q, p, u, _iterations(data, path))


def load_maximal(path: _Path, integrator: MaximalIntegrator | Model | None = None) -> MaximalTrajectory:
    """The :class:`vidyn.MaximalTrajectory` saved in ``path``; with ``integrator`` (a
    MaximalIntegrator or a Model), checked to have been saved from it."""
    data = _read(path, "MaximalTrajectory", _MAXIMAL_ARRAYS)
    mi = _saved_integrator(path, data, MaximalIntegrator, integrator, ("dt", "njoints", "nloops"))
    q, u, x, quat, v, w, energy, violation = (np.asarray(data[k], dtype=np.float64) for k in _MAXIMAL_ARRAYS[:-1])
    try:
        return MaximalTrajectory._from_arrays(mi, q, u, x, quat, v, w, energy, violation, _iterations(data, path))
    except ValueError as e:  # a shape that is not the integrator's (InputError)
        raise StateError(f"{os.fspath(path)!r}: {e}") from e
