"""Array arguments read on the Python side as the Rust conversions read them (DESIGN.md,
"Robustness rules"): as float64, with complex values refused rather than cast, since a cast
drops the imaginary part with no more than a warning."""

from __future__ import annotations

from typing import Any

import numpy as np

from vidyn._core import InputError


def real_f64(x: Any, name: str) -> np.ndarray:
    """``x`` as a float64 array (any layout kept); an InputError naming ``name`` if it holds
    complex numbers."""
    a = np.asarray(x)
    if np.iscomplexobj(a):
        raise InputError(f"{name} has complex dtype {a.dtype}, expected real float64 values")
    try:
        return a.astype(np.float64, copy=False)
    except (TypeError, ValueError, OverflowError) as e:
        raise InputError(f"{name} cannot be read as float64 values ({e})") from None


def integer(x: Any, name: str, minimum: int | None = None) -> int:
    """``x`` as a Python int (a NumPy integer too, a bool not), at least ``minimum`` if given,
    or a TypeError or InputError naming ``name``."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(x).__name__} {x!r}")
    if minimum is not None and x < minimum:
        raise InputError(f"{name} is {x}, expected an int >= {minimum}")
    return int(x)


def real(x: Any, name: str) -> float:
    """``x`` (a Python or NumPy number, or a 0-d array of one, which the Rust conversions read as
    a number too) as a float, or a TypeError or InputError naming ``name``."""
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf":
        x = x[()]
    if not isinstance(x, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(x).__name__} {x!r}")
    try:
        return float(x)
    except OverflowError:
        raise InputError(f"{name} = {x} does not fit in a float64") from None


def zeros(shape: tuple[int, ...], name: str) -> np.ndarray:
    """``np.zeros(shape)``, a shape too large to address or to allocate reported naming ``name``."""
    try:
        return np.zeros(shape)
    except MemoryError:
        raise MemoryError(f"cannot allocate {name} of shape {shape}") from None
    except ValueError as e:
        raise InputError(f"{name} would have shape {shape}: {e}") from None


def finite_f64(x: Any, name: str, shape: tuple[int | str, ...], expected: str | None = None) -> np.ndarray:
    """``x`` as float64 of ``shape`` (a str: any length there, named so in the message) with
    every entry finite, or an InputError naming ``name``; ``expected`` (e.g.
    ``"(model.nq,) = (7,)"``) replaces the shape in the message."""
    a = real_f64(x, name)
    if a.ndim != len(shape) or any(isinstance(want, int) and got != want for got, want in zip(a.shape, shape)):
        wanted = expected or f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"
        raise InputError(f"{name} has shape {a.shape}, expected {wanted}")
    bad = np.argwhere(~np.isfinite(a))
    if bad.size:
        at = tuple(int(i) for i in bad[0])
        raise InputError(f"{name}[{', '.join(map(str, at))}] is not finite ({a[at]})")
    return a
