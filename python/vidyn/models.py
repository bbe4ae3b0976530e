"""Ready-made models: synthetic trees built in Rust, and robots from example-robot-data.

Synthetic (no dependency): :func:`pendulum_chain`, :func:`binary_tree`, :func:`cartpole`,
:func:`acrobot`, :func:`random_tree`.

Real robots: :func:`example_robot` loads a URDF shipped by the ``example-robot-data`` pip
package (``pip install example-robot-data``, or ``pip install vidyn[demo]``);
:func:`example_robot_data_dir` finds its ``robots`` directory; :func:`reference_configuration`
reads a named posture (``"standing"``, ``"half_sitting"``) from an SRDF, as Pinocchio's
``loadReferenceConfigurations`` does.
"""

from __future__ import annotations

import os
import pathlib
import site
import sys
import sysconfig
import xml.etree.ElementTree as ElementTree
from typing import NamedTuple

import numpy as np

from vidyn._core import InputError, Model, acrobot, binary_tree, cartpole, pendulum_chain, random_tree

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
    "reference_configuration",
]

# Where the pip package puts its data, relative to site-packages (a cmeel prefix).
_ROBOTS_SUBDIR = pathlib.PurePosixPath("cmeel.prefix/share/example-robot-data/robots")


class ExampleRobot(NamedTuple):
    """A URDF of example-robot-data: its path below ``robots/``, whether it floats, and its
    SRDF (named postures), if any."""

    urdf: str
    floating_base: bool
    srdf: str | None = None


#: The robots :func:`example_robot` knows, by name.
EXAMPLE_ROBOTS: dict[str, ExampleRobot] = {
    "ur5": ExampleRobot("ur_description/urdf/ur5_robot.urdf", False),
    "panda": ExampleRobot("panda_description/urdf/panda.urdf", False),
    "solo12": ExampleRobot("solo_description/robots/solo12.urdf", True, "solo_description/srdf/solo.srdf"),
    "talos": ExampleRobot("talos_data/robots/talos_reduced.urdf", True, "talos_data/srdf/talos.srdf"),
    "talos_full": ExampleRobot("talos_data/robots/talos_full_v2.urdf", True, "talos_data/srdf/talos.srdf"),
    "anymal": ExampleRobot("anymal_b_simple_description/robots/anymal.urdf", True, "anymal_b_simple_description/srdf/anymal.srdf"),
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


def example_robot(name: str, floating_base: bool | None = None, mimic: bool = False) -> Model:
    """Loads robot ``name`` (a key of :data:`EXAMPLE_ROBOTS`) from example-robot-data.

    ``floating_base`` overrides the robot's default (legged robots float, arms do not);
    ``mimic=True`` couples the URDF's ``<mimic>`` joints (``Model.from_urdf``).
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
    return Model.from_urdf(path, floating_base=robot.floating_base if floating_base is None else floating_base, mimic=mimic)


def reference_configuration(model: Model, srdf: str | os.PathLike[str], state: str = "standing") -> np.ndarray:
    """The configuration ``(model.nq,)`` named ``state`` in an SRDF's ``<group_state>``: each
    listed joint of ``model`` takes its values (a free-flyer ``x y z qx qy qz qw``); joints the
    state does not list, or the model does not have (a reduced model), stay neutral.
    ``srdf``: a path, or the name of an example robot (a key of :data:`EXAMPLE_ROBOTS` with an
    SRDF). Raises ``InputError`` for an unknown state or a value of the wrong length."""
    path = pathlib.Path(srdf)
    if str(srdf) in EXAMPLE_ROBOTS:
        robot, robots = EXAMPLE_ROBOTS[str(srdf)], example_robot_data_dir()
        if robot.srdf is None or robots is None:
            raise FileNotFoundError(f"no SRDF for example robot {srdf!r} (example-robot-data installed: {robots is not None})")
        path = robots / robot.srdf
    states = {g.get("name"): g for g in ElementTree.parse(path).getroot().iter("group_state")}
    if state not in states:
        raise InputError(f"state {state!r} is not in {path.name}; it names {sorted(str(k) for k in states)}")
    q = model.neutral()
    names = list(model.joint_names)
    for joint in states[state].iter("joint"):
        name = joint.get("name")
        if name not in names:
            continue
        i = names.index(name)
        values = [float(v) for v in str(joint.get("value", "")).split()]
        width = (model.idx_q[i + 1] if i + 1 < len(names) else model.nq) - model.idx_q[i]
        if len(values) != width:
            raise InputError(f"joint {name!r} of state {state!r} has {len(values)} values, expected {width}")
        q[model.idx_q[i] : model.idx_q[i] + width] = values
    return q
