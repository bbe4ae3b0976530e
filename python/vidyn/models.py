"""Ready-made models: synthetic trees built in Rust, and robots from example-robot-data.

Synthetic (no dependency): :func:`pendulum_chain`, :func:`binary_tree`, :func:`cartpole`,
:func:`acrobot`, :func:`random_tree`.

Real robots: :func:`example_robot` loads a URDF shipped by the ``example-robot-data`` pip
package (``pip install example-robot-data``, or ``pip install vidyn[demo]``);
:func:`example_robot_data_dir` finds its ``robots`` directory.
"""

from __future__ import annotations

import os
import pathlib
import site
import sys
import sysconfig
from typing import NamedTuple

from vidyn._core import Model, acrobot, binary_tree, cartpole, pendulum_chain, random_tree

__all__ = [
    "EXAMPLE_ROBOTS",
    "ExampleRobot",
    "acrobot",
    "binary_tree",
    "cartpole",
    "example_robot",
    "example_robot_data_dir",
    "pendulum_chain",
    "random_tree",
]

# Where the pip package puts its data, relative to site-packages (a cmeel prefix).
_ROBOTS_SUBDIR = pathlib.PurePosixPath("cmeel.prefix/share/example-robot-data/robots")


class ExampleRobot(NamedTuple):
    """A URDF of example-robot-data: its path below ``robots/`` and whether it floats."""

    urdf: str
    floating_base: bool


#: The robots :func:`example_robot` knows, by name.
EXAMPLE_ROBOTS: dict[str, ExampleRobot] = {
    "ur5": ExampleRobot("ur_description/urdf/ur5_robot.urdf", False),
    "panda": ExampleRobot("panda_description/urdf/panda.urdf", False),
    "solo12": ExampleRobot("solo_description/robots/solo12.urdf", True),
    "talos": ExampleRobot("talos_data/robots/talos_reduced.urdf", True),
    "talos_full": ExampleRobot("talos_data/robots/talos_full_v2.urdf", True),
    "anymal": ExampleRobot("anymal_b_simple_description/robots/anymal.urdf", True),
    "double_pendulum": ExampleRobot("double_pendulum_description/urdf/double_pendulum.urdf", False),
    "kinova": ExampleRobot("kinova_description/robots/kinova.urdf", False),
    "iiwa": ExampleRobot("kinova_description/robots/kinova.urdf", False),  # alias: kinova arm
}


def _from_distribution() -> pathlib.Path | None:
    """The robots directory from the installed files of the ``example-robot-data`` distribution."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        dist = metadata.distribution("example-robot-data")
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        parts = pathlib.PurePosixPath(str(f).replace(os.sep, "/")).parts
        n = len(_ROBOTS_SUBDIR.parts)
        for i in range(len(parts) - n + 1):
            if parts[i : i + n] == _ROBOTS_SUBDIR.parts:
                located = pathlib.Path(str(dist.locate_file(pathlib.PurePosixPath(*parts[: i + n]))))
                if located.is_dir():
                    return located.resolve()
    return None


def _from_site_packages() -> pathlib.Path | None:
    """The robots directory in any site-packages directory of this interpreter."""
    candidates: list[str] = []
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            candidates.append(path)
    try:
        candidates.extend(site.getsitepackages())
    except AttributeError:  # pragma: no cover - some virtualenv versions
        pass
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if isinstance(user, str):
        candidates.append(user)
    candidates.extend(p for p in sys.path if p.endswith("site-packages"))
    for base in candidates:
        robots = pathlib.Path(base, _ROBOTS_SUBDIR)
        if robots.is_dir():
            return robots.resolve()
    return None


def example_robot_data_dir() -> pathlib.Path | None:
    """The ``robots`` directory of the installed ``example-robot-data`` package, or None."""
    return _from_distribution() or _from_site_packages()


def example_robot(name: str, floating_base: bool | None = None) -> Model:
    """Loads robot ``name`` (a key of :data:`EXAMPLE_ROBOTS`) from example-robot-data.

    ``floating_base`` overrides the robot's default (legged robots float, arms do not).
    Raises ``KeyError`` for an unknown name and ``FileNotFoundError`` when
    example-robot-data is not installed.
    """
    try:
        robot = EXAMPLE_ROBOTS[name]
    except KeyError:
        raise KeyError(f"unknown example robot {name!r}; known: {', '.join(sorted(EXAMPLE_ROBOTS))}") from None
    robots = example_robot_data_dir()
    if robots is None:
        raise FileNotFoundError(
            "example-robot-data is not installed; install it with `pip install example-robot-data` "
            "(or `pip install vidyn[demo]`)"
        )
    path = robots / robot.urdf
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: this example-robot-data version does not ship {name!r}")
    return Model.from_urdf(path, floating_base=robot.floating_base if floating_base is None else floating_base)
