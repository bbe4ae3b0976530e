"""Typed interface of the compiled module ``vidyn._core`` (mirrors ``rust/python/src``).

Import from ``vidyn``, never from ``vidyn._core``. Shapes in the docstrings are the contract
that the tests check: ``nq``, ``nv``, ``nbodies`` are the model's, ``nframes`` is
``len(model.frame_names)``. Array arguments accept anything ``numpy.asarray(x, dtype=float64)``
accepts; results are new float64 arrays.
"""

import os
from typing import Callable, ClassVar, Final, Literal, NoReturn, final, overload
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "ConvergenceError",
    "Distance",
    "Perpendicular",
    "InputError",
    "Kinematics",
    "MaximalIntegrator",
    "MaximalTrajectory",
    "Model",
    "ModelBuilder",
    "ModelError",
    "ModelWarning",
    "PointOnPlane",
    "SingleDofMap",
    "StateError",
    "Trajectory",
    "UnknownNameError",
    "UrdfError",
    "VariationalIntegrator",
    "VidynError",
    "aba",
    "aba_derivatives",
    "aba_second_order",
    "aba_second_order_contracted",
    "acrobot",
    "binary_tree",
    "cartpole",
    "center_of_mass",
    "center_of_mass_velocity",
    "centroidal_momentum",
    "centroidal_momentum_matrix",
    "centroidal_momentum_matrix_time_variation",
    "com_jacobian",
    "crba",
    "forward_kinematics",
    "frame_acceleration",
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
    "nonlinear_effects",
    "pendulum_chain",
    "potential_energy",
    "random_tree",
    "rnea",
    "rnea_derivatives",
    "rnea_second_order",
    "rnea_second_order_contracted",
    "set_num_threads",
]

__version__: Final[str]

_Array = npt.NDArray[np.float64]
_ArrayLike = npt.ArrayLike
_Reference = Literal["world", "local", "local_world_aligned"]
_JointKind = Literal["revolute", "prismatic", "spherical", "freeflyer", "planar"]
#: A body contact's shape: ``(kind, size)`` or ``(kind, size, placement)``.
_ContactShape = tuple[Literal["sphere", "capsule", "box"], _ArrayLike] | tuple[Literal["sphere", "capsule", "box"], _ArrayLike, _ArrayLike | None]

# ----------------------------------------------------------------------------------------
# Exceptions
# ----------------------------------------------------------------------------------------

class VidynError(Exception):
    """Base class of every error raised by vidyn."""

class ModelError(VidynError):
    """The model is invalid (bad tree, non-physical inertia, …) or singular for the requested
    algorithm (joint-space inertia not positive definite)."""

class UrdfError(ModelError):
    """A URDF document or file that cannot be turned into a model."""

class InputError(VidynError, ValueError):
    """An argument has the wrong shape, holds NaN or inf, is not a unit quaternion, or is out of
    range. Also a ValueError."""

class UnknownNameError(VidynError, KeyError):
    """The model has no frame or joint of that name. Also a KeyError."""

class StateError(VidynError, ValueError):
    """A saved state that cannot be read: bytes given to ``from_bytes``, a pickle or an ``.npz``
    trajectory that is truncated, corrupted, of another kind of object, of a newer format
    version, or saved from another model than the one given. Also a ValueError."""

class ConvergenceError(VidynError):
    """An iterative solver or implicit integrator did not converge."""

class ModelWarning(UserWarning):
    """A model was built or loaded, but with something you should know: an inertia that no
    rigid body can have (principal moments violating the triangle inequality), or a URDF
    ``<mimic>`` joint read as an independent joint (``mimic=False``, the default of
    ``Model.from_urdf``)."""

# ----------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------

@final
class Model:
    """A kinematic tree: bodies, joints, inertias, frames and limits. Immutable and safe to
    share between threads.

    Bodies are numbered depth-first (parents before children); body ``i`` is moved by joint
    ``i``, whose coordinates are ``q[idx_q[i]:idx_q[i] + nq_i]`` and ``v[idx_v[i]:idx_v[i] + nv_i]``.
    Layouts: revolute/prismatic ``q = [θ]``; spherical ``q = [qx, qy, qz, qw]``, ``v = ω``
    (local); free-flyer ``q = [x, y, z, qx, qy, qz, qw]``, ``v = [v; ω]`` (local); planar
    ``q = [x, y, cos θ, sin θ]``, ``v = [vx, vy, ω]``.
    """

    @staticmethod
    def from_urdf(path: str | os.PathLike[str], floating_base: bool = False, mimic: bool = False) -> Model:
        """Loads a URDF file. ``floating_base=True`` attaches the root link to the world with a
        free-flyer joint named ``root_joint`` (nq += 7, nv += 6) instead of rigidly.
        ``mimic=True`` couples the ``<mimic>`` joints as Pinocchio's ``mimic=True`` does: a
        revolute, continuous or prismatic joint following another one as
        ``q = multiplier * q_leader + offset`` has no coordinate of its own (``nq``, ``nv``,
        limits and every algorithm are those of the remaining coordinates; ``mimic_joints``,
        ``extended``, ``coupling_matrix``); a ``<mimic>`` on a fixed joint is ignored. By
        default mimic joints are independent joints, with a ModelWarning.

        Raises UrdfError (unreadable file, malformed or unsupported URDF, a mimic of an unknown
        or fixed joint, a chain of mimics, a mimic of or by a floating or planar joint) or
        ModelError."""

    @staticmethod
    def from_urdf_string(xml: str, floating_base: bool = False, mimic: bool = False) -> Model:
        """Parses a URDF document given as a string (see ``from_urdf``)."""
    @staticmethod
    def from_mjcf(path: str | os.PathLike[str], ignore_armature: bool = False) -> Model:
        """Loads a MuJoCo model (MJCF ``.xml`` or compiled ``.mjb``) with MuJoCo's parser
        (``pip install mujoco``): kinematic tree, inertias, gravity, body and site frames.
        See :mod:`vidyn.mjcf` for what maps and what is refused (:class:`vidyn.mjcf.MjcfError`)."""

    @property
    def name(self) -> str:
        """Model name (the URDF robot name)."""
    @property
    def nq(self) -> int:
        """Number of configuration coordinates (without those of mimic joints)."""
    @property
    def nv(self) -> int:
        """Number of velocity coordinates, degrees of freedom (without those of mimic joints)."""
    @property
    def nbodies(self) -> int:
        """Number of moving bodies (= joints)."""
    @property
    def joint_names(self) -> list[str]:
        """(nbodies,) name of the joint moving each body."""
    @property
    def joint_kinds(self) -> list[str]:
        """(nbodies,) kind of each joint: "revolute", "prismatic", "spherical", "freeflyer" or
        "planar"."""
    @property
    def parents(self) -> list[int]:
        """(nbodies,) parent body of each body, -1 for the world; ``parents[i] < i``."""
    @property
    def idx_q(self) -> list[int]:
        """(nbodies,) first configuration index of each joint (a mimic joint's is its
        leader's, as in Pinocchio)."""
    @property
    def idx_v(self) -> list[int]:
        """(nbodies,) first velocity index of each joint (a mimic joint's is its leader's)."""
    @property
    def mimic_joints(self) -> list[tuple[str, str, float, float]]:
        """(nmimic,) the mimic joints ``(joint, leader, multiplier, offset)``, with
        ``q_joint = multiplier * q_leader + offset``; empty unless loaded with ``mimic=True``."""
    def extended(self) -> Model:
        """The same tree with every joint independent (the mimic joints with their own
        coordinates: the model ``mimic=False`` loads)."""
    def lift_configuration(self, q: _ArrayLike) -> _Array:
        """``G q + o`` (extended().nq,): the configuration of ``extended()`` of a configuration
        q (nq,), each mimic joint at ``multiplier * q_leader + offset``."""
    def lift_tangent(self, v: _ArrayLike) -> _Array:
        """``G v`` (extended().nv,): the velocity (or acceleration) of ``extended()`` of v (nv,)."""
    def coupling_matrix(self) -> _Array:
        """The coupling matrix G (extended().nv, nv), ``v_e = G v``: the mass matrix is
        ``G.T @ M_e @ G``, Jacobians ``J_e @ G``, generalised forces ``G.T @ tau_e``. The
        identity without mimic joints."""
    @property
    def frame_names(self) -> list[str]:
        """(nframes,) names of the frames (links, joints, operational frames)."""
    @property
    def gravity(self) -> _Array:
        """(3,) gravity in the world frame, m/s²."""
    def with_gravity(self, g: _ArrayLike) -> Model:
        """A copy of the model with gravity ``g`` (3,) in the world frame, m/s²."""
    @property
    def lower_position_limit(self) -> _Array:
        """(nq,) lower position limits (-inf when unbounded)."""
    @property
    def upper_position_limit(self) -> _Array:
        """(nq,) upper position limits (+inf when unbounded)."""
    @property
    def velocity_limit(self) -> _Array:
        """(nv,) velocity limits (+inf when unknown)."""
    @property
    def effort_limit(self) -> _Array:
        """(nv,) effort limits (+inf when unknown)."""
    @property
    def damping(self) -> _Array:
        """(nv,) viscous damping coefficients."""
    @property
    def friction(self) -> _Array:
        """(nv,) Coulomb friction coefficients."""
    @property
    def total_mass(self) -> float:
        """Sum of the body masses, kg."""

    def neutral(self) -> _Array:
        """The neutral configuration (nq,): zero angles and displacements, identity rotations."""

    def random_configuration(self, rng: int | np.random.Generator | None = None) -> _Array:
        """A random configuration (nq,) within the position limits (unbounded angles in
        [-π, π], unbounded translations in [-1, 1], rotations uniform).

        ``rng``: None (fresh entropy), an int seed in [0, 2**64), or a
        ``numpy.random.Generator`` (one integer is drawn from it as the seed)."""

    def integrate(self, q: _ArrayLike, v: _ArrayLike) -> _Array:
        """``q ⊕ v`` (nq,): the configuration reached from ``q`` (nq,) by following the constant
        velocity ``v`` (nv,) for unit time."""

    def difference(self, q0: _ArrayLike, q1: _ArrayLike) -> _Array:
        """``q1 ⊖ q0`` (nv,): the velocity ``v`` with ``integrate(q0, v) == q1``; q0, q1 (nq,)."""

    def lock_joints(self, joints: list[str], q_ref: _ArrayLike) -> Model:
        """This model with the joints ``joints`` (names) locked at their coordinates in
        ``q_ref`` (nq,), Pinocchio's ``buildReducedModel``: a locked joint's body is merged
        into its nearest unlocked ancestor; the other joints keep their names, limits and
        order. Raises UnknownNameError, InputError (``q_ref``) or ModelError (every joint
        locked, a name repeated, a model with mimic joints)."""
    def frame_index(self, name: str) -> int:
        """Index of the frame called ``name``. Raises UnknownNameError."""

    def joint_index(self, name: str) -> int:
        """Index of the body moved by the joint called ``name``. Raises UnknownNameError."""

    def to_single_dof(self) -> tuple[Model, SingleDofMap]:
        """This model with every composite joint replaced by a chain of 1-dof joints through
        massless intermediate bodies, and the maps between the two coordinate sets.

        planar ``j`` → prismatic ``j_tx``, ``j_ty``, revolute ``j_rz`` (x, y, φ); spherical ``j``
        → revolutes ``j_rz``, ``j_ry``, ``j_rx`` (Z-Y-X Euler angles α, β, γ with
        ``R = Rz(α) Ry(β) Rx(γ)``); free-flyer ``j`` → prismatic ``j_tx``, ``j_ty``, ``j_tz``
        then the spherical chain. Revolute and prismatic joints are unchanged. Frames keep their
        names and move to the last body of their chain; inertias too. The expanded model is what
        ``VariationalIntegrator`` needs. Singular at gimbal lock, pitch ``β = ±π/2``: there
        ``v_to_single_dof`` raises InputError, the mass matrix is singular (ABA and the
        integrator raise ModelError "not positive definite" for a configuration exactly on it)
        and ill-conditioned next to it (condition ∝ 1/cos²β, and so is the integration
        error): a ``VariationalIntegrator`` step whose pitch comes within 5.7° of ±π/2
        (``|cos β| < 0.1``) raises ModelError naming the joint, the step and the pitch instead
        of returning a wrong motion. Raises ModelError for rotational or anisotropic translational
        damping / friction of a composite joint (no per-coordinate equivalent)."""

    def content_hash(self) -> str:
        """A stable content hash of the model's defining data: the hexadecimal SHA-256 digest
        of ``to_bytes()``, the same in every process and on every machine, equal for equal
        models (unlike ``hash()``, which is an ``int`` for dicts and sets)."""
    def to_bytes(self) -> bytes:
        """The object as bytes: a versioned, checksummed state of what defines it (what pickling
        sends; format in the README). ``Model.from_bytes`` rebuilds an equal object."""
    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> Model:
        """The object of bytes made by ``to_bytes``; raises StateError for anything else
        (truncated, corrupted, another kind of object, a newer format version)."""
    def __eq__(self, other: object, /) -> bool:
        """Equal when what defines them is equal bit for bit."""
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Callable[[bytes], Model], tuple[bytes]]: ...

@final
class ModelBuilder:
    """Builds a Model body by body; ``build()`` consumes it (later calls raise VidynError)."""

    def __new__(cls, name: str = "model") -> ModelBuilder: ...
    def add_body(
        self,
        parent: int | None,
        name: str,
        joint: _JointKind,
        placement: _ArrayLike | None = None,
        mass: float = 0.0,
        com: _ArrayLike | None = None,
        inertia: _ArrayLike | None = None,
        axis: _ArrayLike | None = None,
    ) -> int:
        """Adds a body moved by a joint of kind ``joint``, attached to body ``parent`` (an index
        returned by ``add_body``; None or -1 for the world). Returns the new body's index.

        ``placement`` (4, 4), default identity: the joint frame in the parent body frame at the
        neutral configuration; its rotation must be orthonormal with det +1 (tolerance 1e-9).
        ``mass``, ``com`` (3,) and ``inertia`` (3, 3), rotational inertia about the centre of
        mass (symmetric positive semi-definite), are expressed in the body frame; defaults zero.
        ``axis`` (3,): required for "revolute" and "prismatic" (normalised; zero rejected),
        rejected for the other kinds.

        Indices are the builder's: ``build()`` renumbers bodies depth-first, keeping names.
        Raises InputError (shapes, kinds, axis, placement) or ModelError (duplicate name,
        non-physical inertia)."""

    def add_frame(self, name: str, parent: int | None, placement: _ArrayLike | None = None) -> None:
        """Adds an operational frame on body ``parent`` (None or -1 for the world) at
        ``placement`` (4, 4), default identity, in that body's frame."""

    def set_gravity(self, g: _ArrayLike) -> None:
        """Sets gravity (3,) in the world frame, m/s² (default [0, 0, -9.81])."""

    def build(self) -> Model:
        """Freezes the model. The builder cannot be used afterwards."""

@final
class Kinematics:
    """Result of ``forward_kinematics``."""

    @property
    def placements(self) -> _Array:
        """(nbodies, 4, 4) world placement of each body, homogeneous matrices."""
    @property
    def velocities(self) -> _Array:
        """(nbodies, 6) spatial velocity of each body in its own frame, [linear; angular]."""
    @property
    def accelerations(self) -> _Array:
        """(nbodies, 6) spatial acceleration of each body in its own frame, [linear; angular],
        gravity excluded."""

@final
class SingleDofMap:
    """Coordinate maps between a model (``q`` (nq,), ``v`` (nv,), Pinocchio's layouts) and its
    single-dof expansion (``theta``, ``theta_dot`` (n,)), from ``Model.to_single_dof``.

    ``v = J(theta) theta_dot`` with ``J`` block diagonal: 1 for a 1-dof joint,
    ``diag(R₂(φ)ᵀ, 1)`` planar, ``E(β, γ)`` spherical and ``diag(Rᵀ, E)`` free-flyer, where
    ``E`` maps Euler-angle rates to the body angular velocity (``det E = −cos β``). The
    expanded mass matrix is ``Jᵀ M J`` and momenta map as ``p_theta = Jᵀ p``."""

    @property
    def nq(self) -> int:
        """nq of the original model."""
    @property
    def nv(self) -> int:
        """nv of the original model."""
    @property
    def n(self) -> int:
        """nq = nv of the expanded model."""
    @property
    def bodies(self) -> list[int]:
        """(nbodies,) body of the expanded model that carries each original body."""
    def q_to_single_dof(self, q: _ArrayLike) -> _Array:
        """Expanded coordinates (n,) of a configuration ``q`` (nq,): α, γ in (−π, π],
        β in [−π/2, π/2], planar ``φ = atan2(sin, cos)``."""
    def q_from_single_dof(self, theta: _ArrayLike) -> _Array:
        """The configuration (nq,) of expanded coordinates ``theta`` (n,) (any angles;
        quaternions with ``qw >= 0``)."""
    def v_to_single_dof(self, q: _ArrayLike, v: _ArrayLike) -> _Array:
        """Expanded rates (n,) of a velocity ``v`` (nv,) at ``q`` (nq,). Raises InputError at
        gimbal lock (``|cos β| < 1e-9``)."""
    def v_from_single_dof(self, theta: _ArrayLike, theta_dot: _ArrayLike) -> _Array:
        """The velocity ``v = J(theta) theta_dot`` (nv,); theta, theta_dot (n,)."""
    def velocity_map(self, theta: _ArrayLike) -> _Array:
        """``J(theta)`` (nv, n) with ``v = J theta_dot``."""

@final
class Trajectory:
    """A simulated trajectory of N steps (returned by ``VariationalIntegrator.rollout``)."""

    @property
    def q(self) -> _Array:
        """(N+1, nq) configurations."""
    @property
    def p(self) -> _Array:
        """(N+1, n) discrete momenta."""
    @property
    def u(self) -> _Array:
        """(N, n) controls (generalised forces, constant over each step)."""
    @property
    def iterations(self) -> npt.NDArray[np.uintp]:
        """(N,) Newton iterations of each step."""
    @property
    def steps(self) -> int:
        """Number of steps N."""
    def __len__(self) -> int: ...
    @property
    def integrator(self) -> VariationalIntegrator:
        """The integrator that made the trajectory."""
    def save(self, path: str | os.PathLike[str]) -> None:
        """Saves the trajectory to the ``.npz`` file ``path`` (:mod:`vidyn.trajectory_io`): its
        arrays, its integrator, and metadata (model name and content hash, dt, scheme, s, vidyn
        version)."""
    @staticmethod
    def load(path: str | os.PathLike[str], integrator: VariationalIntegrator | Model | None = None) -> Trajectory:
        """The trajectory saved in ``path`` by ``save``. With ``integrator`` (a
        VariationalIntegrator or a Model) checks that the file was saved from it (the model by
        content hash, an integrator by equality) and raises StateError naming what differs."""
    @staticmethod
    def _from_arrays(integrator: VariationalIntegrator, q: _ArrayLike, p: _ArrayLike, u: _ArrayLike, iterations: Sequence[int]) -> Trajectory: ...
    def to_bytes(self) -> bytes:
        """The object as bytes: a versioned, checksummed state of what defines it (what pickling
        sends; format in the README). ``Trajectory.from_bytes`` rebuilds an equal object."""
    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> Trajectory:
        """The object of bytes made by ``to_bytes``; raises StateError for anything else
        (truncated, corrupted, another kind of object, a newer format version)."""
    def __eq__(self, other: object, /) -> bool:
        """Equal when what defines them is equal bit for bit."""
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Callable[[bytes], Trajectory], tuple[bytes]]: ...

@final
class PointOnPlane:
    """Holonomic constraint ``n·(p_b − p_a) = 0``: ``point_b`` (in ``frame_b``) stays on the
    plane through ``point_a`` (in ``frame_a``) with normal ``normal`` (in ``frame_a``). Frames
    are named frames of the model; ``None`` or ``"world"`` is the world. Two planes make a
    point-on-line, three a coincident point (a loop closure)."""

    def __new__(
        cls, frame_a: str | None, point_a: _ArrayLike, normal: _ArrayLike, frame_b: str | None, point_b: _ArrayLike
    ) -> PointOnPlane: ...

@final
class Distance:
    """Holonomic constraint ``|p_b − p_a|² − length² = 0`` between ``point_a`` of ``frame_a``
    and ``point_b`` of ``frame_b`` (``length > 0``; ``None`` or ``"world"`` is the world)."""

    def __new__(cls, frame_a: str | None, point_a: _ArrayLike, frame_b: str | None, point_b: _ArrayLike, length: float) -> Distance: ...

@final
class Perpendicular:
    """Holonomic constraint ``(R_a u)·(R_b w) = 0``: the axis ``axis_a`` of ``frame_a`` stays
    perpendicular to the axis ``axis_b`` of ``frame_b`` (each in its frame's coordinates,
    non-zero; ``None`` or ``"world"`` is the world). Three on the axis pairs ``(x, y)``,
    ``(y, z)``, ``(z, x)`` of two frames hold their relative orientation; with three
    PointOnPlane they make a 6-D contact (:func:`vidyn.frame_contact`).

    ``aligned``: ``(axis of frame_a, axis of frame_b)`` that must stay within 60° of each other
    on the steps that impose the constraint. Three perpendicular pairs also hold at relative
    turns of 180° and 120°; a step that ends on such a mirror image raises ConvergenceError
    instead of returning it."""

    def __new__(
        cls,
        frame_a: str | None,
        axis_a: _ArrayLike,
        frame_b: str | None,
        axis_b: _ArrayLike,
        aligned: tuple[_ArrayLike, _ArrayLike] | None = None,
    ) -> Perpendicular: ...

@final
class MaximalIntegrator:
    """Maximal-coordinate variational integrator (Brüdigam & Manchester 2020; Brüdigam et al.
    2023): every body of ``model`` is a free rigid body (centre of mass, unit quaternion),
    joints and loop closures are equality constraints kept at solver tolerance at every knot,
    and each step is a Newton solve on a graph-based sparse block LDU (O(n) for trees).
    First-order accurate, symplectic, exactly momentum-conserving.

    Every body needs a positive mass and a positive-definite rotational inertia (thin rods with
    zero axial inertia raise ModelError). ``damping``, ``stiffness``, ``rest``: (model.nv,)
    joint dampers (explicit, on the last interval's rate) and springs of the 1-dof joints;
    damping defaults to the model's. Newton stops at ``tolerance`` on the scaled residual
    (constraint rows in metres); raises ConvergenceError when it cannot, and ModelError for a
    singular pivot (redundant constraints)."""

    def __new__(
        cls,
        model: Model,
        dt: float,
        damping: _ArrayLike | None = None,
        stiffness: _ArrayLike | None = None,
        rest: _ArrayLike | None = None,
        tolerance: float = 1e-12,
        max_iterations: int = 30,
    ) -> MaximalIntegrator: ...
    @property
    def dt(self) -> float: ...
    @property
    def nbodies(self) -> int: ...
    @property
    def njoints(self) -> int:
        """Model joints plus loop closures."""
    @property
    def nloops(self) -> int:
        """Joints that close a loop."""
    @property
    def fill(self) -> int:
        """Fill blocks of the sparse factorisation (0 for trees)."""
    def add_loop_closure(
        self,
        name: str,
        kind: str,
        parent: str | int | None,
        child: str | int,
        parent_frame: _ArrayLike | None = None,
        child_frame: _ArrayLike | None = None,
        axis: _ArrayLike | None = None,
    ) -> int:
        """Add a loop-closure joint of ``kind`` (``"fixed"``, ``"revolute"``, ``"prismatic"``,
        ``"cylindrical"``, ``"spherical"``, ``"planar"``, ``"point_on_line"``,
        ``"point_on_plane"``) between ``parent_frame`` (4x4, in the parent body frame) on
        ``parent`` (model joint name, body index, or None / ``"world"``) and ``child_frame`` on
        ``child``. ``axis`` (3,): the joint-frame axis or normal of the kinds that have one.
        Returns the joint index."""
    def add_contact(
        self,
        name: str,
        body: str | int,
        point: _ArrayLike,
        radius: float = 0.0,
        normal: _ArrayLike | None = None,
        offset: float = 0.0,
        friction: float = 0.5,
        friction_model: Literal["pyramid", "cone", "frictionless"] = "pyramid",
    ) -> int:
        """Add a contact between a sphere of ``radius`` centred at ``point`` (3,) in the frame of
        ``body`` (model joint name or index) and the world plane through ``offset * normal``
        (unit ``normal`` (3,), default +z), with Coulomb ``friction``. ``friction_model``:
        ``"pyramid"`` (default) linearises the cone with 4 directions (exact along the tangents
        ``±t1``, ``±t2``; ``√2`` too strong along the diagonals); ``"cone"`` is the isotropic
        second-order cone ``|b| <= friction * normal force`` (needs ``friction > 0``);
        ``"frictionless"`` keeps the normal force alone (the pyramid with ``friction = 0`` has no
        interior for the interior point and may fail at an impact). Steps with contacts are
        solved by a primal-dual interior-point method (for the cone, with the cone's
        Jordan-algebra complementarity). Returns the contact index."""
    def add_body_contact(
        self,
        name: str,
        body_a: str | int,
        shape_a: _ContactShape,
        body_b: str | int,
        shape_b: _ContactShape,
        friction: float = 0.5,
        friction_model: Literal["pyramid", "cone", "frictionless"] | None = None,
    ) -> int:
        """Add a contact between ``shape_a`` on body ``body_a`` and ``shape_b`` on ``body_b``, each a
        body index (the shape in its frame), a frame fixed to a body (URDF link, joint,
        operational frame: the shape in that frame; not the world) or the name of the joint
        moving a body. A shape is ``(kind, size)`` or
        ``(kind, size, placement)`` in its frame: ``"sphere"`` ``(radius,)``, ``"capsule"``
        ``(radius, length)`` along z (length between the caps' centres, as URDF), ``"box"``
        ``(x, y, z)`` edge lengths, centred on ``placement`` (4, 4), default identity. Pairs:
        sphere–sphere, sphere–capsule, capsule–capsule, sphere–box. The signed distance between
        the shapes stays >= 0; equal and opposite forces act at the middle of the closest points
        (normal, and Coulomb ``friction`` on ``friction_model``: ``"pyramid"``, ``"cone"``, or
        ``"frictionless"``, the default when ``friction`` is 0). Returns the body contact's
        index. See :func:`vidyn.body_contacts.collision_contacts` for a URDF's pairs."""
    @property
    def nbody_contacts(self) -> int:
        """Number of body contacts."""
    def body_contact_distances(self, traj: MaximalTrajectory) -> _Array:
        """Signed distances (N+1, nbody_contacts) of the body contacts at every knot of
        ``traj``; negative when the shapes overlap."""
    def add_joint_limit(self, joint: str | int, lower: float, upper: float) -> int:
        """Add position limits ``lower <= q <= upper`` to the revolute or prismatic model joint
        ``joint`` (name or index), enforced by the interior-point solver. Returns the limit
        index."""
    def rollout(
        self, q0: _ArrayLike, v0: _ArrayLike | None = None, u: _ArrayLike | None = None, *, steps: int | None = None
    ) -> MaximalTrajectory:
        """Simulate from minimal coordinates ``q0`` (model.nq,) moving with ``v0`` (model.nv,)
        under generalised forces ``u`` (N, model.nv) (or ``steps`` force-free steps)."""
    def linearize(self, traj: MaximalTrajectory) -> tuple[_Array, _Array]:
        """Exact linearisation of every step (implicit function theorem on the graph
        factorisation), in parallel with the GIL released: ``A`` (N, 12·nbodies, 12·nbodies),
        ``B`` (N, 12·nbodies, model.nv), per body ``[δx (world); δθ (body); δv; δω (body)]``.
        With contacts or joint limits: of the interior-point system relaxed at its final
        barrier."""
    def linearize_minimal(
        self, q: _ArrayLike, v: _ArrayLike, u: _ArrayLike | None = None
    ) -> tuple[_Array, _Array, _Array, _Array]:
        """One step in minimal coordinates and its exact linearisation (trees of revolute /
        prismatic joints, no loop closures): ``q`` (n,), ``v`` (n,) the joint velocities of the
        last interval ``(q_k - q_{k-1}) / dt``, ``u`` (n,) -> ``(q_next, v_next, A (2n, 2n),
        B (2n, n))``."""

    @property
    def model(self) -> Model:
        """The model as given (shared, not copied)."""
    def to_bytes(self) -> bytes:
        """The object as bytes: a versioned, checksummed state of what defines it (what pickling
        sends; format in the README). ``MaximalIntegrator.from_bytes`` rebuilds an equal object."""
    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> MaximalIntegrator:
        """The object of bytes made by ``to_bytes``; raises StateError for anything else
        (truncated, corrupted, another kind of object, a newer format version)."""
    def __eq__(self, other: object, /) -> bool:
        """Equal when what defines them is equal bit for bit."""
    __hash__: ClassVar[None]  # type: ignore[assignment]
    def __reduce__(self) -> tuple[Callable[[bytes], MaximalIntegrator], tuple[bytes]]: ...

@final
class MaximalTrajectory:
    """Knots ``k = 0..N`` of a maximal-coordinate rollout; velocities are those of the interval
    ending at each knot."""

    @property
    def q(self) -> _Array:
        """Minimal coordinates, (N+1, model.nq)."""
    @property
    def positions(self) -> _Array:
        """Centres of mass (world), (N+1, nbodies, 3)."""
    @property
    def quaternions(self) -> _Array:
        """Body-to-world unit quaternions ``[x, y, z, w]``, (N+1, nbodies, 4)."""
    @property
    def linear_velocities(self) -> _Array:
        """World-frame linear velocities, (N+1, nbodies, 3)."""
    @property
    def angular_velocities(self) -> _Array:
        """Body-frame angular velocities, (N+1, nbodies, 3)."""
    @property
    def energy(self) -> _Array:
        """Energy at every knot, (N+1,)."""
    @property
    def constraint_violation(self) -> _Array:
        """Largest constraint violation at every knot, (N+1,)."""
    @property
    def iterations(self) -> npt.NDArray[np.uintp]:
        """Newton iterations per step, (N,)."""
    @property
    def steps(self) -> int: ...
    def __len__(self) -> int: ...
    @property
    def u(self) -> _Array:
        """Generalised forces of every step, (N, model.nv); (N, 0) when simulated without."""
    @property
    def integrator(self) -> MaximalIntegrator:
        """The integrator that made the trajectory (rebuilt from what defines it)."""
    def save(self, path: str | os.PathLike[str]) -> None:
        """Saves the trajectory to the ``.npz`` file ``path`` (:mod:`vidyn.trajectory_io`): its
        arrays, its integrator, and metadata (model name and content hash, dt, vidyn version)."""
    @staticmethod
    def load(path: str | os.PathLike[str], integrator: MaximalIntegrator | Model | None = None) -> MaximalTrajectory:
        """The trajectory saved in ``path`` by ``save``. With ``integrator`` (a
        MaximalIntegrator or a Model) checks that the file was saved from it and raises
        StateError naming what differs."""
    @staticmethod
    def _from_arrays(
        integrator: MaximalIntegrator,
        q: _ArrayLike,
        u: _ArrayLike,
        positions: _ArrayLike,
        quaternions: _ArrayLike,
        linear_velocities: _ArrayLike,
        angular_velocities: _ArrayLike,
        energy: _ArrayLike,
        constraint_violation: _ArrayLike,
        iterations: Sequence[int],
    ) -> MaximalTrajectory: ...
    def to_bytes(self) -> bytes:
        """The object as bytes: a versioned, checksummed state of what defines it (what pickling
        sends; format in the README). ``MaximalTrajectory.from_bytes`` rebuilds an equal object."""
    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> MaximalTrajectory:
        """The object of bytes made by ``to_bytes``; raises StateError for anything else
        (truncated, corrupted, another kind of object, a newer format version)."""
    def __eq__(self, other: object, /) -> bool:
        """Equal when what defines them is equal bit for bit."""
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Callable[[bytes], MaximalTrajectory], tuple[bytes]]: ...

@final
class VariationalIntegrator:
    """Variational integrator: the midpoint rule (Johnson 2012, as in trep) or a
    Galerkin–Lobatto scheme of order 2s (Fan, Schultz & Murphey 2018).

    The state is ``(q, p)`` with ``p`` the discrete momentum; ``momentum(q, v)`` gives the
    ``p`` of an initial velocity. Controls ``u`` (``n = model.nv`` generalised forces) are held
    constant over a step. Free-flyer, spherical and planar joints step on their Lie groups:
    ``q`` (``nq``,) in Pinocchio's layout (unit quaternions kept unit to round-off), ``p`` and
    ``u`` in the tangent space, each step in the chart centred at its start (no gimbal lock;
    the momenta of symmetries are conserved to the Newton tolerance; constraints, kinematic
    1-dof joints and body wrenches work with them; the first-order linearisation is in
    tangent coordinates, with constraints and kinematic joints too; the second order and full
    DDP too, exactly, with constraints and contact schedules too: see ``linearize``). For them the
    velocity-state maps and the projection method raise NotImplementedError for now
    (``optim.ilqr`` takes them); damping and springs act on
    1-dof joints only; a step that turns a joint by about 90° raises ConvergenceError. Mimic
    joints (``Model.from_urdf(..., mimic=True)``) step the reduced system exactly (its DEL
    equations ``Ĝᵀ r_e(Ĝ z + o)`` on a dense LU; every scheme, rollouts, energies, the
    first-order linearisation; ``n`` and the forces are the reduced ones) on models of
    revolute and prismatic joints; with them constraints, kinematic joints, body wrenches,
    the second order, the velocity-state maps and ``vidyn.optim`` raise ModelError. ``scheme``: ``"midpoint"`` (order 2, ``L_d = dt L(q̄, (q_{k+1} − q_k)/dt)``
    at ``q̄ = (q_k + q_{k+1})/2``), ``"trapezoid"`` (s = 1, order 2), ``"simpson"``
    (s = 2, order 4) or ``"lobatto"`` with ``s``. ``damping``, ``stiffness``, ``rest``: (n,)
    joint dampers and springs (damping defaults to the model's URDF damping). Newton stops at
    ``|residual| <= tolerance * max(1, |p|)``, or once it has levelled off within the round-off
    floor it measures (long chains, steps from rest); it starts from the extrapolated motion,
    then a Taylor predictor, then constant velocity, and raises ConvergenceError (residual,
    floor, advice) when none converges.
    ``constraints``: holonomic constraints (:class:`PointOnPlane`, :class:`Distance`,
    :class:`Perpendicular`) enforced exactly at every step with multipliers (Johnson 2012), for
    every scheme: at each step's end, and for ``"simpson"`` and ``"lobatto"`` at every control
    point within the step too (Fan, Schultz & Murphey 2018 eq. 6: the order 2s is kept);
    ConvergenceError when they are redundant. ``schedule``: contact phases, (N, m)
    booleans, row ``k`` the constraints step ``k`` imposes (a constraint switched on is a
    touchdown: the step's impulse brings its point onto it, a plastic impact; switched off, a
    lift-off); a step past row N - 1 raises InputError. See :class:`vidyn.ContactSchedule`.
    ``kinematic``: names of joints whose
    trajectory is prescribed (Johnson 2012 §4.7; midpoint and trapezoid): for such a joint
    ``i`` the slot ``p[i]`` holds its velocity ``(ρ_k − ρ_{k−1})/dt`` and ``u[i]`` its next
    coordinate ``ρ_{k+1}`` (not a force), so ``A``/``B`` keep their shapes and the ``u[i]``
    columns of ``B`` are derivatives with respect to ``ρ_{k+1}``. ``body_wrenches``: optional
    (nbodies, 6) constant external wrenches, row i acting on body i: ``[force; moment about
    body i's origin]`` in body frame i, turning with the body (the ``fext`` of :func:`aba`),
    applied by discrete Lagrange–d'Alembert; the first-order linearisation includes them,
    second-order derivatives raise NotImplementedError. ``max_energy_error``: every step of ``step``
    and ``rollout`` (and of ``vidyn.batch.rollout``) is checked to be a genuine step of the
    motion by its energy balance, ``r = |ΔE − W| / (T_k + T_{k+1} + |ΔV| + |W|)`` with ``W``
    the work of the controls and the damping (kinetic ``T``, potential ``V``): a step with
    ``r`` above the limit raises ConvergenceError (a time step too coarse for the motion,
    where Newton converged to a solution the motion does not follow; genuine steps measured
    ``r ≤ 0.22``); ``math.inf`` turns the check off. Not checked with kinematic joints or body
    wrenches, whose work the balance does not count, nor on the touchdown steps of a schedule. With constraints ``T`` is the kinetic
    energy of the motion they allow (see ``energy``)."""

    def __new__(
        cls,
        model: Model,
        dt: float,
        scheme: str = "trapezoid",
        s: int | None = None,
        damping: _ArrayLike | None = None,
        stiffness: _ArrayLike | None = None,
        rest: _ArrayLike | None = None,
        tolerance: float = 1e-12,
        max_iterations: int = 30,
        constraints: list[PointOnPlane | Distance] | None = None,
        kinematic: list[str] | None = None,
        body_wrenches: _ArrayLike | None = None,
        max_energy_error: float = 0.4,
        schedule: _ArrayLike | None = None,
    ) -> VariationalIntegrator: ...
    @property
    def model(self) -> Model:
        """The model as given (shared, not copied)."""
    @property
    def dt(self) -> float: ...
    @property
    def max_energy_error(self) -> float:
        """The largest energy inconsistency of a step accepted by ``step`` and ``rollout``
        (``inf``: not checked)."""
    @property
    def scheme(self) -> str: ...
    @property
    def s(self) -> int: ...
    @property
    def order(self) -> int:
        """Order of accuracy, 2s."""
    @property
    def n(self) -> int:
        """Degrees of freedom (= model.nv: the length of p, u and velocities)."""
    @property
    def nq(self) -> int:
        """Length of a configuration q (= model.nq; n + 1 per quaternion)."""
    @property
    def kinematic(self) -> npt.NDArray[np.bool_]:
        """(n,) which joints are kinematic (prescribed)."""
    @property
    def body_wrenches(self) -> _Array | None:
        """(nbodies, 6) the constant body wrenches, or None."""
    @property
    def constraint_count(self) -> int:
        """Number of holonomic constraints m."""
    @property
    def schedule(self) -> npt.NDArray[np.bool_] | None:
        """(N, m) which constraints each step imposes, or None (all, on every step)."""
    def constraint_values(self, q: _ArrayLike) -> _Array:
        """The constraint values ``h(q)``: (nq,) -> (m,)."""
    @overload
    def multipliers(self, traj_or_q: Trajectory | _ArrayLike, derivatives: Literal[False] = False, *, p: _ArrayLike | None = None, u: _ArrayLike | None = None) -> _Array: ...
    @overload
    def multipliers(self, traj_or_q: Trajectory | _ArrayLike, derivatives: Literal[True], *, p: _ArrayLike | None = None, u: _ArrayLike | None = None) -> tuple[_Array, _Array, _Array]: ...
    @overload
    def multipliers(self, traj_or_q: Trajectory | _ArrayLike, derivatives: bool, *, p: _ArrayLike | None = None, u: _ArrayLike | None = None) -> _Array | tuple[_Array, _Array, _Array]:
        """The constraint multipliers ``λ_k`` of every step of ``traj`` (made by this
        integrator), or of ``q`` (N+1, model.nq) with ``p=`` (N+1, n) and ``u=`` (N, n) (an
        optimiser's states, say, whose open-loop replay may drift away), (N, m): each step
        solved again from its knot, started at its end (the same
        solution); zero for constraints a schedule does not impose on the step. The constraint
        impulse on step ``k`` is ``λ_k = λ'_k + μ_{k+1}``, ``−Dh(q_k)ᵀ λ'_k`` at its start (with
        Simpson and Lobatto schemes plus the impulses at the step's interior control points) and
        RATTLE's momentum projection ``−Dh(q_{k+1})ᵀ μ_{k+1}`` at its end; for the three world planes of
        :func:`vidyn.point_contact` that is ``−λ_k`` as the world impulse on the frame's origin
        (divide by ``dt`` for the step's mean contact force). ``derivatives=True`` -> ``(λ,
        dλ/dx (N, m, 2n), dλ/du (N, m, n))``, exact, in the tangent coordinates of
        ``linearize`` (what costs on contact forces need); steps in parallel."""
    def momentum(self, q: _ArrayLike, v: _ArrayLike) -> _Array:
        """Legendre transform ``p = M(q) v``. (nq,), (n,) -> (n,)."""
    def velocity(self, q: _ArrayLike, p: _ArrayLike) -> _Array:
        """Inverse Legendre transform ``v = M(q)⁻¹ p``. (nq,), (n,) -> (n,)."""
    def energy(self, q: _ArrayLike, p: _ArrayLike, step: int = 0) -> float | _Array:
        """``½ pᵀ M⁻¹ p + V(q)`` (gravity plus the joint springs ``½ κ (q − rest)²``) of one
        state (nq,), (n,) -> float, or of each row of (N, nq), (N, n) arrays -> (N,). With
        constraints the kinetic part is that of the motion they allow, ``½ v_tᵀ M v_t`` with
        ``v_t`` the ``M``-orthogonal projection of ``v = M⁻¹ p`` onto ``Dh(q) v_t = 0`` (a knot
        momentum keeps the normal part of the next step's constraint impulse), for the
        constraints of step ``step`` (row ``k``: step ``step + k``; past the end of a schedule,
        its last step's): at a touchdown's knot, the energy after the plastic impact."""
    def step(self, q: _ArrayLike, p: _ArrayLike, u: _ArrayLike | None = None, *, k: int = 0) -> tuple[_Array, _Array]:
        """One step ``(q, p, u) -> (q_next, p_next)``: (nq,), (n,); ``k`` the step's index
        (which constraints a schedule imposes)."""
    def rollout(
        self,
        q0: _ArrayLike,
        v0: _ArrayLike | None = None,
        u: _ArrayLike | None = None,
        *,
        p0: _ArrayLike | None = None,
        steps: int | None = None,
    ) -> Trajectory:
        """Simulate from ``q0`` (nq,) with initial velocity ``v0`` (or momentum ``p0``) (n,)
        under controls ``u`` (N, n) (or ``steps`` zero-control steps)."""
    @overload
    def linearize(
        self,
        traj_or_q: Trajectory | _ArrayLike,
        p: _ArrayLike | None = None,
        u: _ArrayLike | None = None,
        *,
        order: Literal[1] = 1,
        lam: None = None,
    ) -> tuple[_Array, _Array]:
        """Exact derivatives of every step's flow map ``x_{k+1} = f(x_k, u_k)``, ``x = (q, p)``,
        computed in parallel with the GIL released. Takes a Trajectory, or q (N+1, model.nq),
        p (N+1, n) and u (N, n).

        ``order=1`` -> ``(A, B)``: ``A`` (N, 2n, 2n) = d(q_{k+1}, p_{k+1})/d(q_k, p_k),
        ``B`` (N, 2n, n) = d(q_{k+1}, p_{k+1})/du_k. With free-flyer, spherical or planar
        joints ``δq`` lives in the tangent space, as ``model.difference(q, q')`` (Pinocchio's
        and crocoddyl's convention): ``difference(q_{k+1}, f(integrate(q_k, δq), ...))`` to
        first order is ``A δ``. The second order with such joints is that of
        ``δ ↦ difference(x̄_{k+1}, f(x̄_k ⊕ δ, ū + δu))`` (the expansion DDP on a manifold uses),
        exact as on fixed charts. With holonomic constraints (contacts, schedules and touchdown
        steps included) the second order is exact too, through the constrained step and its
        closing momentum projection, on fixed and floating bases. It is not available
        (NotImplementedError naming the cause) with kinematic joints or with body wrenches.

        ``order=2`` -> ``(A, B, fxx, fxu, fuu)`` with the exact second-order tensors in C order
        ``[k, i, j, l]`` (step, output, input, input): ``fxx`` (N, 2n, 2n, 2n)
        ``= d²x_{k+1,i}/dx_j dx_l``, ``fxu`` (N, 2n, 2n, n) ``= d²x_{k+1,i}/dx_j du_l``,
        ``fuu`` (N, 2n, n, n); symmetric in the two state (or control) inputs.

        ``order=2, lam=`` co-states (N, 2n) (for DDP, the value gradient at step k+1) ->
        ``(A, B, hxx, hxu, huu)`` with ``hxx[k] = einsum("i,ijl->jl", lam[k], fxx[k])``
        (N, 2n, 2n), ``hxu`` (N, 2n, n), ``huu`` (N, n, n), computed without forming the
        tensors (one adjoint solve per step), far cheaper than the full tensors."""
    @overload
    def linearize(
        self,
        traj_or_q: Trajectory | _ArrayLike,
        p: _ArrayLike | None = None,
        u: _ArrayLike | None = None,
        *,
        order: Literal[2],
        lam: _ArrayLike | None = None,
    ) -> tuple[_Array, _Array, _Array, _Array, _Array]: ...
    @overload
    def linearize(
        self,
        traj_or_q: Trajectory | _ArrayLike,
        p: _ArrayLike | None = None,
        u: _ArrayLike | None = None,
        *,
        order: int,
        lam: _ArrayLike | None = None,
    ) -> tuple[_Array, ...]: ...
    def momentum_jacobian(self, q: _ArrayLike, v: _ArrayLike) -> tuple[_Array, _Array]:
        """``(q, v) -> (p, J)``: the momentum ``p = M(q) v`` (n,) and the Jacobian
        ``J = d(q, p)/d(q, v) = [[1, 0], [d(M v)/dq, M]]`` (2n, 2n), for optimisers that work
        with velocities."""
    def velocity_jacobian(self, q: _ArrayLike, p: _ArrayLike) -> tuple[_Array, _Array]:
        """``(q, p) -> (v, J)``: the velocity ``v = M(q)⁻¹ p`` (n,) and the Jacobian
        ``J = d(q, v)/d(q, p) = [[1, 0], [-M⁻¹ d(M v)/dq, M⁻¹]]`` (2n, 2n)."""

    def to_bytes(self) -> bytes:
        """The object as bytes: a versioned, checksummed state of what defines it (what pickling
        sends; format in the README). ``VariationalIntegrator.from_bytes`` rebuilds an equal object."""
    @staticmethod
    def from_bytes(data: bytes | bytearray | memoryview) -> VariationalIntegrator:
        """The object of bytes made by ``to_bytes``; raises StateError for anything else
        (truncated, corrupted, another kind of object, a newer format version)."""
    def __eq__(self, other: object, /) -> bool:
        """Equal when what defines them is equal bit for bit."""
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[Callable[[bytes], VariationalIntegrator], tuple[bytes]]: ...

# ----------------------------------------------------------------------------------------
# Algorithms
# ----------------------------------------------------------------------------------------

def rnea(model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, fext: _ArrayLike | None = None) -> _Array:
    """Inverse dynamics (RNEA): ``tau = M(q) a + C(q, v) v + g(q) - sum_i J_i(q)^T fext[i]``.

    q (nq,), v (nv,), a (nv,) -> tau (nv,).

    ``fext``: optional (nbodies, 6) external wrenches, row i acting on body i: ``[force;
    moment about body i's origin]`` expressed in body frame i (Pinocchio's ``fext`` in the
    local joint frames, without its universe entry), ``J_i`` the
    local Jacobian of body i."""

def aba(model: Model, q: _ArrayLike, v: _ArrayLike, tau: _ArrayLike, fext: _ArrayLike | None = None) -> _Array:
    """Forward dynamics (ABA): ``a = M(q)⁻¹ (tau + sum_i J_i(q)^T fext[i] - C(q, v) v - g(q))``.

    q (nq,), v (nv,), tau (nv,) -> a (nv,). Raises ModelError when a subtree has no inertia
    along a joint axis.

    ``fext``: optional (nbodies, 6) external wrenches, row i acting on body i: ``[force;
    moment about body i's origin]`` expressed in body frame i (Pinocchio's ``fext`` in the
    local joint frames, without its universe entry)."""

def rnea_derivatives(
    model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, fext: _ArrayLike | None = None
) -> tuple[_Array, _Array, _Array]:
    """First-order derivatives of inverse dynamics ``(dtau_dq, dtau_dv, dtau_da)``.

    q (nq,), v (nv,), a (nv,) -> three (nv, nv) arrays, row = torque, column = variable;
    ``dtau_da`` is ``M(q)``. Derivatives in q are along ``integrate(q, h e_k)`` (tangent
    space, dimension nv), Pinocchio's convention for ``computeRNEADerivatives``.

    ``fext``: optional (nbodies, 6) external wrenches, row i acting on body i: ``[force;
    moment about body i's origin]`` expressed in body frame i (Pinocchio's ``fext`` in the
    local joint frames, without its universe entry); the
    wrenches turn with their bodies, which adds to ``dtau_dq`` (as in Pinocchio)."""

def aba_derivatives(
    model: Model, q: _ArrayLike, v: _ArrayLike, tau: _ArrayLike, fext: _ArrayLike | None = None
) -> tuple[_Array, _Array, _Array]:
    """First-order derivatives of forward dynamics ``(dddq_dq, dddq_dv, dddq_dtau)``.

    q (nq,), v (nv,), tau (nv,) -> three (nv, nv) arrays, row = acceleration, column =
    variable; ``dddq_dtau`` is ``M(q)⁻¹``. Derivatives in q are along ``integrate(q, h e_k)``,
    Pinocchio's convention for ``computeABADerivatives``.

    ``fext``: optional (nbodies, 6) external wrenches, row i acting on body i: ``[force;
    moment about body i's origin]`` expressed in body frame i (Pinocchio's ``fext`` in the
    local joint frames, without its universe entry)."""

def rnea_second_order(
    model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, fext: _ArrayLike | None = None
) -> tuple[_Array, _Array, _Array, _Array]:
    """Second-order derivatives of inverse dynamics ``(d2tau_dq2, d2tau_dv2, d2tau_dqdv, dM_dq)``.

    q (nq,), v (nv,), a (nv,) -> four (nv, nv, nv) arrays in C order with
    ``T[i, j, k] = d/dx_k (d tau_i / dy_j)``: i = torque, j = inner, k = outer derivative.
    ``d2tau_dqdv[i, j, k] = d/dv_k (d tau_i / dq_j)``; ``dM_dq[i, j, k] = dM_ij / dq_k``.
    Derivatives in q are along ``integrate(q, h e_k)``; within one spherical, free-flyer or
    planar joint the q-q blocks are not symmetric (Lie bracket), see the README.
    Same layout as Pinocchio's C++ ``ComputeRNEASecondOrderDerivatives``.

    ``fext``: optional (nbodies, 6) external wrenches, row i acting on body i: ``[force;
    moment about body i's origin]`` expressed in body frame i (Pinocchio's ``fext`` in the
    local joint frames, without its universe entry); they
    change ``d2tau_dq2`` only."""

def rnea_second_order_contracted(
    model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, lam: _ArrayLike, fext: _ArrayLike | None = None
) -> tuple[_Array, _Array, _Array]:
    """``sum_i lam[i] * T[i]`` for the three tensors of ``rnea_second_order`` (DDP's term),
    computed without forming them. q (nq,), v, a, lam (nv,) -> three (nv, nv) arrays
    ``(d2tau_dq2, d2tau_dv2, d2tau_dqdv)`` contracted; ``fext`` as in ``rnea``."""

def aba_second_order(
    model: Model, q: _ArrayLike, v: _ArrayLike, tau: _ArrayLike, fext: _ArrayLike | None = None
) -> tuple[_Array, _Array, _Array, _Array]:
    """Second-order derivatives of forward dynamics
    ``(d2ddq_dq2, d2ddq_dv2, d2ddq_dqdv, d2ddq_dtaudq)``.

    q (nq,), v (nv,), tau (nv,) -> four (nv, nv, nv) arrays in C order with
    ``T[i, j, k] = d/dx_k (d ddq_i / dy_j)``: i = acceleration, j = inner, k = outer
    derivative (the layout of ``rnea_second_order``). ``d2ddq_dqdv[i, j, k] =
    d/dv_k (d ddq_i / dq_j)``; ``d2ddq_dtaudq[i, j, k] = d/dq_k (d ddq_i / dtau_j) =
    d(M⁻¹)_ij / dq_k``. Derivatives in q are along ``integrate(q, h e_k)``. Computed from
    ``rnea_second_order`` at ``ddq = aba(q, v, tau)`` by the implicit function theorem
    (Singh, Russell & Wensing 2023, eqs. 44-49).

    ``fext``: optional (nbodies, 6) external wrenches, row i acting on body i: ``[force;
    moment about body i's origin]`` expressed in body frame i (Pinocchio's ``fext`` in the
    local joint frames, without its universe entry)."""

def aba_second_order_contracted(
    model: Model, q: _ArrayLike, v: _ArrayLike, tau: _ArrayLike, lam: _ArrayLike, fext: _ArrayLike | None = None
) -> tuple[_Array, _Array, _Array, _Array]:
    """``sum_i lam[i] * T[i]`` for the four tensors of ``aba_second_order``, computed without
    forming them (from ``mu = M⁻¹ lam`` and the contracted inverse-dynamics forms).
    q (nq,), v, tau, lam (nv,) -> four (nv, nv) arrays
    ``(d2ddq_dq2, d2ddq_dv2, d2ddq_dqdv, d2ddq_dtaudq)`` contracted; ``fext`` as in ``aba``."""

def crba(model: Model, q: _ArrayLike) -> _Array:
    """Joint-space inertia matrix ``M(q)`` (CRBA), full and symmetric. q (nq,) -> (nv, nv)."""

def minverse(model: Model, q: _ArrayLike) -> _Array:
    """``M(q)⁻¹`` without forming M, full and symmetric. q (nq,) -> (nv, nv)."""

def gravity(model: Model, q: _ArrayLike) -> _Array:
    """Generalised gravity ``g(q) = rnea(q, 0, 0)``. q (nq,) -> (nv,)."""

def nonlinear_effects(model: Model, q: _ArrayLike, v: _ArrayLike) -> _Array:
    """``C(q, v) v + g(q) = rnea(q, v, 0)``. q (nq,), v (nv,) -> (nv,)."""

def kinetic_energy(model: Model, q: _ArrayLike, v: _ArrayLike) -> float:
    """``½ vᵀ M(q) v``. q (nq,), v (nv,)."""

def potential_energy(model: Model, q: _ArrayLike) -> float:
    """Potential energy of gravity ``-Σ mᵢ gᵀ cᵢ`` (zero at the world origin). q (nq,)."""

def center_of_mass(model: Model, q: _ArrayLike) -> _Array:
    """World centre of mass ``c = Σ mᵢ cᵢ / M`` (Pinocchio's ``centerOfMass``). q (nq,) -> (3,)."""

def center_of_mass_velocity(model: Model, q: _ArrayLike, v: _ArrayLike) -> tuple[_Array, _Array]:
    """``(c, ċ)`` with ``ċ = J_c(q) v`` (Pinocchio's ``vcom``). q (nq,), v (nv,) -> (3,), (3,)."""

def centroidal_momentum(model: Model, q: _ArrayLike, v: _ArrayLike) -> _Array:
    """Centroidal momentum ``h_G = A_G(q) v``: the whole model's spatial momentum about its
    centre of mass in world axes, ``[linear; angular]`` (Pinocchio's ``hg``). q (nq,), v (nv,)
    -> (6,)."""

def centroidal_momentum_matrix(model: Model, q: _ArrayLike) -> _Array:
    """Centroidal momentum matrix ``A_G(q)`` (6, nv) with ``h_G = A_G v`` (Pinocchio's
    ``ccrba``): world composite inertias times joint columns, moved to the centre of mass;
    its linear rows are ``M J_c``. q (nq,) -> (6, nv)."""

def centroidal_momentum_matrix_time_variation(model: Model, q: _ArrayLike, v: _ArrayLike) -> _Array:
    """``dA_G/dt`` (6, nv) with ``dh_G/dt = A_G a + (dA_G/dt) v`` (Pinocchio's ``dccrba``).
    q (nq,), v (nv,) -> (6, nv)."""

def com_jacobian(model: Model, q: _ArrayLike) -> _Array:
    """Jacobian of the centre of mass, ``ċ = J_c(q) v`` (Pinocchio's ``jacobianCenterOfMass``),
    column ``j`` = ``(σmⱼ vⱼ + ωⱼ × σpⱼ)/M`` from subtree masses and first moments, O(n).
    q (nq,) -> (3, nv)."""

def forward_kinematics(model: Model, q: _ArrayLike, v: _ArrayLike | None = None, a: _ArrayLike | None = None) -> Kinematics:
    """Placements, velocities and accelerations of every body. q (nq,); v, a (nv,), default
    zeros. Returns placements (nbodies, 4, 4), velocities and accelerations (nbodies, 6)."""

def frame_placement(model: Model, q: _ArrayLike, frame: str | int) -> _Array:
    """World placement (4, 4) of one frame, by name or index. q (nq,).

    Raises UnknownNameError for an unknown name, InputError for an index out of range."""

def frame_placements(model: Model, q: _ArrayLike) -> _Array:
    """World placements (nframes, 4, 4) of all frames, in the order of ``model.frame_names``."""

def jacobian(model: Model, q: _ArrayLike, frame: str | int, reference: _Reference = "local_world_aligned") -> _Array:
    """Frame Jacobian (6, nv), rows [linear; angular]: ``[v; ω] = J(q) q̇`` expressed in
    ``reference``: "world" (spatial velocity at the world origin, world axes), "local" (body
    velocity in the frame) or "local_world_aligned" (velocity of the frame origin, world axes).

    Raises InputError for an unknown ``reference``."""

def jacobian_time_variation(model: Model, q: _ArrayLike, v: _ArrayLike, frame: str | int, reference: _Reference = "local_world_aligned") -> _Array:
    """``dJ/dt`` (6, nv) of the frame Jacobian in ``reference`` along the velocity ``v``
    (Pinocchio's ``getFrameJacobianTimeVariation``): the frame's spatial acceleration is
    ``J a + dJ/dt v``."""

def frame_velocity(model: Model, q: _ArrayLike, v: _ArrayLike, frame: str | int, reference: _Reference = "local_world_aligned") -> _Array:
    """Velocity ``[v; ω]`` (6,) of a frame in ``reference`` (the frames of :func:`jacobian`):
    ``jacobian(model, q, frame, reference) @ v`` (Pinocchio's ``getFrameVelocity``)."""

def frame_velocity_derivatives(
    model: Model, q: _ArrayLike, v: _ArrayLike, frame: str | int, reference: _Reference = "local_world_aligned"
) -> tuple[_Array, _Array]:
    """``(∂v_f/∂q, ∂v_f/∂v)``, each (6, nv), of :func:`frame_velocity` in ``reference``: ``q``
    perturbed in the tangent space (``Model.integrate``), ``v`` held; ``∂v_f/∂v`` is the frame
    Jacobian (Pinocchio's ``getFrameVelocityDerivatives``). In "local_world_aligned" this is
    the exact derivative of :func:`frame_velocity`, which includes the turning of the lever
    arm, ``ω × ∂p``, that Pinocchio's leaves out (ours = Pinocchio's + ``[ω × J_lin; 0]``)."""

def frame_acceleration(
    model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, frame: str | int, reference: _Reference = "local_world_aligned", classical: bool = False
) -> _Array:
    """Spatial acceleration (6,) of a frame in ``reference``, gravity excluded (Pinocchio's
    ``getFrameAcceleration``); ``classical=True``: the classical acceleration, ``ω × v`` added
    to the linear part (``getFrameClassicalAcceleration``; in "local_world_aligned" the second
    time derivative of the frame origin's position)."""

# ----------------------------------------------------------------------------------------
# Built-in models (re-exported by vidyn.models)
# ----------------------------------------------------------------------------------------

def pendulum_chain(n: int, planar: bool = True) -> Model:
    """A chain of ``n`` revolute joints carrying 1 m, 1 kg rods hanging along -z. With
    ``planar`` every joint turns about y; otherwise the axes alternate y, x. Frames: ``jointK``,
    ``linkK`` and ``tip``. At most 10 000 bodies."""

def binary_tree(depth: int) -> Model:
    """A complete binary tree of ``depth`` levels, ``2**depth - 1`` revolute bodies (depth ≤ 13)."""

def cartpole() -> Model:
    """Cart-pole: prismatic ``cart`` along x (1 kg) and revolute ``pole`` about y (0.1 kg, 1 m
    rod, hanging down at q = 0). Frames include ``tip``."""

def acrobot() -> Model:
    """Acrobot: revolute ``shoulder`` and ``elbow`` about y, two 1 kg, 1 m rods hanging down at
    q = 0. Frames include ``tip``."""

def random_tree(n: int, seed: int = 0) -> Model:
    """A random tree of ``n`` bodies (≤ 10 000) reproducible from ``seed`` in [0, 2**64), with
    every joint kind, random placements and inertias. Frames ``jointK`` and ``linkK``."""

def _raise_core_error(variant: str) -> NoReturn:
    """Raises the exception a core error variant maps to (tests of the mapping only)."""

# ----------------------------------------------------------------------------------------
# Batch engine (vidyn.batch wraps the private functions; see its docstring)
# ----------------------------------------------------------------------------------------

_Progress = Callable[[int, int], object] | None
_Failures = list[tuple[int, BaseException]]
# None, one array, or a tuple/list with one array (or None) per result (filled in place)
_Out = npt.NDArray[np.float64] | npt.NDArray[np.int64] | tuple[npt.NDArray[np.float64] | npt.NDArray[np.int64] | None, ...] | list[npt.NDArray[np.float64] | npt.NDArray[np.int64] | None] | None

def set_num_threads(k: int) -> None:
    """Sets the number of threads of vidyn's batch engine (``vidyn.batch``); ``k = 0`` restores
    the default (``VIDYN_NUM_THREADS`` if set, else the number of CPUs). Batches already
    running keep their threads. Raises InputError for a negative ``k``."""

def get_num_threads() -> int:
    """Number of threads of vidyn's batch engine."""

def _batch_rnea(model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq), v, a (B, nv) -> (tau (B, nv), [(row, exception)])."""

def _batch_aba(model: Model, q: _ArrayLike, v: _ArrayLike, tau: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq), v, tau (B, nv) -> (ddq (B, nv), [(row, exception)])."""

def _batch_crba(model: Model, q: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq) -> (M (B, nv, nv), [(row, exception)])."""

def _batch_minverse(model: Model, q: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq) -> (Minv (B, nv, nv), [(row, exception)])."""

def _batch_center_of_mass(model: Model, q: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq) -> (com (B, 3), [(row, exception)])."""

def _batch_com_jacobian(model: Model, q: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq) -> (J_c (B, 3, nv), [(row, exception)])."""

def _batch_centroidal_momentum_matrix(model: Model, q: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq) -> (A_G (B, 6, nv), [(row, exception)])."""

def _batch_centroidal_momentum(model: Model, q: _ArrayLike, v: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq), v (B, nv) -> (h_G (B, 6), [(row, exception)])."""

def _batch_centroidal_momentum_matrix_time_variation(model: Model, q: _ArrayLike, v: _ArrayLike, progress: _Progress = None, out: _Out = None) -> tuple[_Array, _Failures]:
    """q (B, nq), v (B, nv) -> (dA_G/dt (B, 6, nv), [(row, exception)])."""

def _batch_rnea_derivatives(
    model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, progress: _Progress = None, out: _Out = None
) -> tuple[tuple[_Array, _Array, _Array], _Failures]:
    """q (B, nq), v, a (B, nv) -> ((dtau_dq, dtau_dv, dtau_da) each (B, nv, nv), [(row, exception)])."""

def _batch_aba_derivatives(
    model: Model, q: _ArrayLike, v: _ArrayLike, tau: _ArrayLike, progress: _Progress = None, out: _Out = None
) -> tuple[tuple[_Array, _Array, _Array], _Failures]:
    """q (B, nq), v, tau (B, nv) -> ((dddq_dq, dddq_dv, dddq_dtau) each (B, nv, nv), [(row, exception)])."""

def _batch_rnea_second_order(
    model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, progress: _Progress = None, out: _Out = None
) -> tuple[tuple[_Array, _Array, _Array, _Array], _Failures]:
    """q (B, nq), v, a (B, nv) -> (four (B, nv, nv, nv) tensors, [(row, exception)])."""

def _batch_rnea_second_order_contracted(
    model: Model, q: _ArrayLike, v: _ArrayLike, a: _ArrayLike, lam: _ArrayLike, progress: _Progress = None, out: _Out = None
) -> tuple[tuple[_Array, _Array, _Array], _Failures]:
    """q (B, nq), v, a, lam (B, nv) -> (three (B, nv, nv) arrays, [(row, exception)])."""

def _batch_rollout(
    vi: VariationalIntegrator,
    q0: _ArrayLike,
    v0: _ArrayLike | None,
    p0: _ArrayLike | None,
    u: _ArrayLike,
    progress: _Progress = None,
    out: _Out = None,
) -> tuple[_Array, _Array, npt.NDArray[np.int64], _Failures]:
    """q0 (B, n), one of v0 / p0 (B, n), u (B, N, n) -> (q (B, N+1, n), p (B, N+1, n),
    iterations (B, N), [(trajectory, exception)])."""

def _batch_linearize(
    vi: VariationalIntegrator, q: _ArrayLike, p: _ArrayLike, u: _ArrayLike, progress: _Progress = None, out: _Out = None
) -> tuple[_Array, _Array, _Failures]:
    """q, p (B, N+1, n), u (B, N, n) -> (A (B, N, 2n, 2n), B (B, N, 2n, n), [(trajectory, exception)])."""

def _batch_linearize_contracted(
    vi: VariationalIntegrator,
    q: _ArrayLike,
    p: _ArrayLike,
    u: _ArrayLike,
    lam: _ArrayLike,
    progress: _Progress = None,
    out: _Out = None,
) -> tuple[_Array, _Array, _Array, _Failures]:
    """q, p (B, N+1, n), u (B, N, n), lam (B, N, 2n) -> (hxx (B, N, 2n, 2n), hxu (B, N, 2n, n),
    huu (B, N, n, n), [(trajectory, exception)])."""

# ----------------------------------------------------------------------------------------
# Optimisation (vidyn.optim wraps the private functions; see its docstring)
# ----------------------------------------------------------------------------------------

def _optim_lqr(a: _ArrayLike, b: _ArrayLike, q: _ArrayLike, r: _ArrayLike, qn: _ArrayLike) -> tuple[_Array, _Array]:
    """A (N, nx, nx), B (N, nx, nu), Q (N, nx, nx), R (N, nu, nu), QN (nx, nx) -> (K (N, nu, nx), P (N+1, nx, nx))."""

def _optim_dlqr(a: _ArrayLike, b: _ArrayLike, q: _ArrayLike, r: _ArrayLike, tolerance: float, max_iterations: int) -> tuple[_Array, _Array, int]:
    """A (nx, nx), B (nx, nu), Q (nx, nx), R (nu, nu) -> (K (nu, nx), P (nx, nx), iterations)."""

def _optim_closed_loop(
    vi: VariationalIntegrator,
    q0: _ArrayLike,
    p0: _ArrayLike,
    x_ref: _ArrayLike,
    u_ref: _ArrayLike,
    gains: _ArrayLike,
    actuated: list[int] | None = None,
) -> tuple[_Array, _Array, _Array]:
    """q0, p0 (n,), x_ref (N+1, 2n), u_ref (N, m), K (N, m, 2n) -> (q (N+1, n), p (N+1, n), u (N, n))."""

@final
class _Problem:
    """An optimal-control problem on a VI, read and checked once (vidyn.optim.Problem builds it):
    ``q0``, ``p0`` (n,), ``u_init`` (N, m), ``q`` (N or 1, 2n, 2n), ``r`` (N or 1, m, m), ``qn``
    (2n, 2n), ``x_ref`` (N+1, 2n), ``u_ref`` (N, m); ``tracks``: ``(point, targets (1 or N+1,
    3), weights (N+1,), offset (3,))`` points (a frame name or ``"com"``, a point offset in the
    frame's axes) tracked on top of the quadratic
    cost; ``friction``: ``(first row, μ, weight, tip)`` friction cones on contact forces; ``cost``: an object with ``running``, ``running_derivatives``, ``terminal``,
    ``terminal_derivatives`` used instead of both."""

    def __new__(
        cls,
        vi: VariationalIntegrator,
        q0: _ArrayLike,
        p0: _ArrayLike,
        u_init: _ArrayLike,
        q: _ArrayLike,
        r: _ArrayLike,
        qn: _ArrayLike,
        x_ref: _ArrayLike,
        u_ref: _ArrayLike,
        actuated: list[int] | None = None,
        velocity_cost: bool = False,
        tracks: Sequence[tuple[str, _ArrayLike, _ArrayLike, _ArrayLike]] | None = None,
        friction: Sequence[tuple[int, float, float, float]] | None = None,
        cost: Any | None = None,
    ) -> _Problem: ...
    @property
    def steps(self) -> int:
        """The number of steps N."""

@final
class _IlqrLog:
    """The per-iteration log of an iLQR or FDDP run: one entry an outer iteration in each array."""

    @property
    def cost(self) -> _Array:
        """Cost at the start of the iteration."""
    @property
    def expected_reduction(self) -> _Array:
        """Decrease a full step was expected to give."""
    @property
    def expected_reduction_alpha(self) -> _Array:
        """Decrease expected for the accepted step length."""
    @property
    def actual_reduction(self) -> _Array:
        """Decrease the accepted step gave."""
    @property
    def alpha(self) -> _Array:
        """Accepted step length (0 when none)."""
    @property
    def mu(self) -> _Array:
        """Regularisation of the accepted backward pass."""
    @property
    def gradient_norm(self) -> _Array:
        """``‖∂J/∂u‖`` of the open-loop cost (projected on the control limits)."""
    @property
    def time(self) -> _Array:
        """Seconds since the start at the end of the iteration."""

@final
class _IlqrOutput:
    """What an iLQR or FDDP run (``_optim_ilqr``, ``_optim_ilqr_linear``, ``_optim_ilqr_maximal``)
    returns; vidyn.optim builds its ``IlqrResult`` from it."""

    @property
    def x(self) -> _Array:
        """(N+1, nx) the final states."""
    @property
    def q(self) -> _Array | None:
        """(N+1, nq) the configurations of ``x`` on a VI; None elsewhere."""
    @property
    def p(self) -> _Array | None:
        """(N+1, n) the momenta of ``x`` on a VI; None elsewhere."""
    @property
    def U(self) -> _Array:
        """(N, n) the forces of every joint."""
    @property
    def u(self) -> _Array:
        """(N, m) the optimised controls."""
    @property
    def k(self) -> _Array:
        """(N, m) the feed-forward terms of the last backward pass."""
    @property
    def K(self) -> _Array:
        """(N, m, ndx) the feedback gains of the last backward pass."""
    @property
    def cost(self) -> float:
        """The final cost."""
    @property
    def cost_history(self) -> _Array:
        """The initial cost, then one entry per accepted step."""
    @property
    def log(self) -> _IlqrLog:
        """The per-iteration log."""
    @property
    def iterations(self) -> int:
        """Accepted steps."""
    @property
    def converged(self) -> bool:
        """Whether the run converged."""
    @property
    def status(self) -> str:
        """``"converged"``, ``"max_iterations"`` or ``"regularisation_limit"``."""
    @property
    def message(self) -> str:
        """What the run ended with, in words."""
    @property
    def wall_time(self) -> float:
        """Seconds the run took."""
    @property
    def time_linearize(self) -> float:
        """Seconds of work after accepted rollouts (costs, derivatives, backward passes alongside)."""
    @property
    def time_backward(self) -> float:
        """Seconds of the backward passes not run alongside the derivatives."""
    @property
    def time_forward(self) -> float:
        """Seconds of the forward passes (rollouts, rejected trials)."""

def _optim_ilqr(
    problem: _Problem,
    u_min: _ArrayLike | None = None,
    u_max: _ArrayLike | None = None,
    method: str = "ilqr",
    max_iterations: int = 100,
    tolerance: float = 1e-8,
    mu_init: float = 0.0,
    velocity_state: bool = False,
    x_init: _ArrayLike | None = None,
    alpha_max: float = 4.0,
    fitted_step: bool = True,
    xreg: float | None = None,
) -> _IlqrOutput:
    """With ``x_init`` (N+1, nq + n): multiple shooting (FDDP) from that state guess. iLQR/DDP on a problem (vidyn.optim.ilqr builds the result from the output)."""

def _optim_ilqr_linear(
    a: _ArrayLike,
    b: _ArrayLike,
    x0: _ArrayLike,
    u_init: _ArrayLike,
    q: _ArrayLike,
    r: _ArrayLike,
    qn: _ArrayLike,
    x_ref: _ArrayLike,
    u_ref: _ArrayLike,
    u_min: list[float] | None = None,
    u_max: list[float] | None = None,
    max_iterations: int = 100,
    tolerance: float = 1e-8,
    mu_init: float = 0.0,
    method: str = "ilqr",
    alpha_max: float = 4.0,
    fitted_step: bool = True,
) -> _IlqrOutput:
    """iLQR (or DDP: zero second derivatives) on x_{k+1} = A_k x_k + B_k u_k (A (N, nx, nx), B (N, nx, nu)); an output without q, p."""

def _optim_ilqr_maximal(
    mi: MaximalIntegrator,
    x0: _ArrayLike,
    u_init: _ArrayLike,
    q: _ArrayLike,
    r: _ArrayLike,
    qn: _ArrayLike,
    x_ref: _ArrayLike,
    u_ref: _ArrayLike,
    actuated: list[int] | None = None,
    u_min: list[float] | None = None,
    u_max: list[float] | None = None,
    max_iterations: int = 100,
    tolerance: float = 1e-8,
    mu_init: float = 0.0,
    method: str = "ilqr",
    x_init: _ArrayLike | None = None,
    alpha_max: float = 4.0,
    fitted_step: bool = True,
) -> _IlqrOutput:
    """iLQR (FDDP from a state guess x_init (N+1, 2n)) on a MaximalIntegrator's minimal coordinates x = (q, v); an output without q, p."""

@final
class _ProjectionLog:
    """The per-iteration log of a projection-operator run."""

    @property
    def cost(self) -> _Array:
        """Cost at the start of the iteration."""
    @property
    def slope(self) -> _Array:
        """``Dh∘δξ`` of the direction used."""
    @property
    def step(self) -> _Array:
        """Accepted step λ (0 when none)."""
    @property
    def trials(self) -> _Array:
        """Armijo trials (as floats)."""
    @property
    def time(self) -> _Array:
        """Seconds since the start at the end of the iteration."""
    @property
    def model(self) -> list[str]:
        """The descent model of each iteration: ``"steepest"``, ``"quasi"`` or ``"newton"``."""

@final
class _ProjectionOutput:
    """What ``_optim_projection`` returns; vidyn.optim builds its ``ProjectionResult`` from it."""

    @property
    def x(self) -> _Array:
        """(N+1, 2n) the final states ``(q, p)``."""
    @property
    def q(self) -> _Array:
        """(N+1, n) the configurations of ``x``."""
    @property
    def p(self) -> _Array:
        """(N+1, n) the momenta of ``x``."""
    @property
    def U(self) -> _Array:
        """(N, n) the forces of every joint."""
    @property
    def u(self) -> _Array:
        """(N, m) the optimised controls."""
    @property
    def K(self) -> _Array:
        """(N, m, 2n) the projection gains about the final trajectory."""
    @property
    def cost(self) -> float:
        """The final cost."""
    @property
    def cost_history(self) -> _Array:
        """The cost of the first iterate, then one entry per iteration."""
    @property
    def log(self) -> _ProjectionLog:
        """The per-iteration log."""
    @property
    def iterations(self) -> int:
        """Iterations run."""
    @property
    def converged(self) -> bool:
        """Whether the run converged."""
    @property
    def status(self) -> str:
        """``"converged"``, ``"max_iterations"`` or ``"line_search_failed"``."""
    @property
    def message(self) -> str:
        """What the run ended with, in words."""
    @property
    def wall_time(self) -> float:
        """Seconds the run took."""

def _optim_projection(
    problem: _Problem,
    x_guess: _ArrayLike | None = None,
    model: str = "auto",
    newton_after: int = 10,
    max_iterations: int = 200,
    tolerance: float = 1e-6,
    proj_q: _ArrayLike | None = None,
    proj_r: _ArrayLike | None = None,
    proj_qn: _ArrayLike | None = None,
) -> _ProjectionOutput:
    """Johnson's projection-operator optimiser on a problem (vidyn.optim.projection builds the result from the output)."""

def _optim_project(
    vi: VariationalIntegrator, x_bar: _ArrayLike, u_bar: _ArrayLike, gains: _ArrayLike, actuated: list[int] | None = None
) -> tuple[_Array, _Array]:
    """The projection P(ξ̄): x_bar (N+1, 2n), u_bar (N, m), K (N, m, 2n) -> (x (N+1, 2n), u (N, m))."""

# ----------------------------------------------------------------------------------------
# Lie-group and spatial helpers (vidyn.spatial wraps the private functions; see its
# docstrings for the maths). 6-vectors [linear; angular]; placements 4x4 homogeneous;
# rotations orthonormal with det +1 to within 1e-9; right (local-frame) Jacobians.
# ----------------------------------------------------------------------------------------

def _spatial_skew(w: _ArrayLike) -> _Array:
    """w (3,) -> w× (3, 3)."""

def _spatial_exp3(w: _ArrayLike) -> _Array:
    """w (3,) -> R = exp(w×) (3, 3)."""

def _spatial_log3(r: _ArrayLike) -> _Array:
    """R (3, 3) -> w (3,), |w| ∈ [0, π]."""

def _spatial_jexp3(w: _ArrayLike) -> _Array:
    """w (3,) -> right Jacobian of exp3 (3, 3)."""

def _spatial_jlog3(r: _ArrayLike) -> _Array:
    """R (3, 3) -> right Jacobian of log3 (3, 3)."""

def _spatial_exp6(xi: _ArrayLike) -> _Array:
    """xi = [v; ω] (6,) -> M = exp(xi) (4, 4)."""

def _spatial_log6(m: _ArrayLike) -> _Array:
    """M (4, 4) -> xi = [v; ω] (6,), |ω| ∈ [0, π]."""

def _spatial_jexp6(xi: _ArrayLike) -> _Array:
    """xi (6,) -> right Jacobian of exp6 (6, 6)."""

def _spatial_jlog6(m: _ArrayLike) -> _Array:
    """M (4, 4) -> right Jacobian of log6 (6, 6)."""

def _spatial_action(m: _ArrayLike) -> _Array:
    """M (4, 4) -> Ad_M (6, 6), acting on motions."""

def _spatial_dual_action(m: _ArrayLike) -> _Array:
    """M (4, 4) -> Ad_M⁻ᵀ (6, 6), acting on forces."""

def _spatial_cross_motion(v: _ArrayLike) -> _Array:
    """v (6,) -> v× (6, 6)."""

def _spatial_cross_force(v: _ArrayLike) -> _Array:
    """v (6,) -> v×* = −(v×)ᵀ (6, 6)."""

def _spatial_act_motion(m: _ArrayLike, v: _ArrayLike) -> _Array:
    """M (4, 4), v (6,) -> Ad_M v (6,)."""

def _spatial_act_force(m: _ArrayLike, f: _ArrayLike) -> _Array:
    """M (4, 4), f (6,) -> Ad_M⁻ᵀ f (6,)."""

def _spatial_placement(m: _ArrayLike, name: str) -> _Array:
    """M read as a placement (checked as every placement argument is), a C-ordered copy;
    InputError naming ``name``."""
