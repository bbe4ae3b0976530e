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
    return a.astype(np.float64, copy=False)


def finite_f64(x: Any, name: str, shape: tuple[int | str, ...]) -> np.ndarray:
    """``x`` as float64 of ``shape`` (a str: any length there, named so in the message) with
    every entry finite, or an InputError naming ``name``."""
    a = real_f64(x, name)
    if a.ndim != len(shape) or any(isinstance(want, int) and got != want for got, want in zip(a.shape, shape)):
        wanted = ", ".join(map(str, shape))
        raise InputError(f"{name} has shape {a.shape}, expected ({wanted}{',' if len(shape) == 1 else ''})")
    bad = np.argwhere(~np.isfinite(a))
    if bad.size:
        at = tuple(int(i) for i in bad[0])
        raise InputError(f"{name}[{', '.join(map(str, at))}] is not finite ({a[at]})")
    return a
