"""vidyn: rigid-body dynamics on kinematic trees, computed in Rust.

Build or load a :class:`Model`, then call the algorithms on NumPy arrays::

    import numpy as np
    import vidyn

    model = vidyn.models.example_robot("panda")      # or vidyn.Model.from_urdf(path)
    q, v = model.neutral(), np.zeros(model.nv)
    tau = vidyn.rnea(model, q, v, np.zeros(model.nv))  # inverse dynamics
    a = vidyn.aba(model, q, v, tau)                    # forward dynamics

Conventions: configurations ``q`` have shape ``(model.nq,)`` (quaternions ``[x, y, z, w]``),
velocities, accelerations and torques ``(model.nv,)``; spatial vectors are ``[linear; angular]``;
placements are 4x4 homogeneous matrices. Every array is float64. Errors derive from
:class:`VidynError`; bad inputs raise :class:`InputError`, which is also a ``ValueError``.
The SO(3)/SE(3) exponential and logarithm, their Jacobians, the actions of placements and the
cross operators that the core uses are in :mod:`vidyn.spatial`.

Inputs are copied before the computation, which runs without holding the GIL, so calls from
several threads run in parallel.
"""

from __future__ import annotations

from vidyn import batch, collisions, mjcf, models, optim, spatial, trajectory_io, viz
from vidyn.contacts import ContactSchedule, frame_contact, point_contact, point_contact_forces
from vidyn._core import (
    ConvergenceError,
    Distance,
    InputError,
    Kinematics,
    MaximalIntegrator,
    MaximalTrajectory,
    Model,
    ModelBuilder,
    ModelError,
    ModelWarning,
    Perpendicular,
    PointOnPlane,
    SingleDofMap,
    StateError,
    UnknownNameError,
    UrdfError,
    Trajectory,
    VariationalIntegrator,
    VidynError,
    __version__,
    aba,
    aba_derivatives,
    aba_second_order,
    aba_second_order_contracted,
    center_of_mass,
    center_of_mass_velocity,
    centroidal_momentum,
    centroidal_momentum_matrix,
    centroidal_momentum_matrix_time_variation,
    com_jacobian,
    crba,
    forward_kinematics,
    frame_acceleration,
    frame_placement,
    frame_placements,
    frame_velocity,
    frame_velocity_derivatives,
    get_num_threads,
    gravity,
    jacobian,
    jacobian_time_variation,
    kinetic_energy,
    minverse,
    nonlinear_effects,
    potential_energy,
    rnea,
    rnea_derivatives,
    rnea_second_order,
    rnea_second_order_contracted,
    set_num_threads,
)

__all__ = [
    "ContactSchedule",
    "ConvergenceError",
    "Distance",
    "InputError",
    "Kinematics",
    "MaximalIntegrator",
    "MaximalTrajectory",
    "Model",
    "ModelBuilder",
    "ModelError",
    "ModelWarning",
    "Perpendicular",
    "PointOnPlane",
    "SingleDofMap",
    "StateError",
    "UnknownNameError",
    "UrdfError",
    "Trajectory",
    "VariationalIntegrator",
    "VidynError",
    "__version__",
    "aba",
    "aba_derivatives",
    "aba_second_order",
    "aba_second_order_contracted",
    "batch",
    "center_of_mass",
    "center_of_mass_velocity",
    "centroidal_momentum",
    "centroidal_momentum_matrix",
    "centroidal_momentum_matrix_time_variation",
    "collisions",
    "com_jacobian",
    "crba",
    "forward_kinematics",
    "frame_acceleration",
    "frame_contact",
    "frame_placement",
    "frame_placements",
    "frame_velocity",
    "frame_velocity_derivatives",
    "get_num_threads",
    "gravity",
    "jacobian",
    "jacobian_time_variation",
    "kinetic_energy",
    "minverse",
    "mjcf",
    "models",
    "nonlinear_effects",
    "optim",
    "point_contact",
    "point_contact_forces",
    "potential_energy",
    "rnea",
    "rnea_derivatives",
    "rnea_second_order",
    "rnea_second_order_contracted",
    "set_num_threads",
    "spatial",
    "trajectory_io",
    "viz",
]
