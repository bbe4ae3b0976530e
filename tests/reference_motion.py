"""Reference motions for the variational integrators' floating-base tests: models with
free-flyer, spherical and planar joints, and accurate solutions of their equations of motion
by classical RK4 (on the quaternion model, forward dynamics by ABA, or Euler's equations of a
free rigid body), against which the VI's convergence order is measured."""

from __future__ import annotations

import numpy as np
import pytest

import vidyn
from vidyn import models


def floating_pendulum(gravity: bool) -> vidyn.Model:
    """A free-flying box with a revolute pendulum and, below it, a ball-jointed rod."""
    b = vidyn.ModelBuilder("floating pendulum")
    if not gravity:
        b.set_gravity([0.0, 0.0, 0.0])
    base = b.add_body(None, "base", "freeflyer", mass=2.0, com=[0.05, -0.02, 0.01], inertia=np.diag([0.05, 0.08, 0.1]))
    hinge = np.eye(4)
    hinge[:3, 3] = [0.2, 0.0, -0.1]
    arm = b.add_body(base, "hinge", "revolute", placement=hinge, axis=[0, 1, 0], mass=0.5, com=[0, 0, -0.25], inertia=np.diag([0.01, 0.01, 0.001]))
    ball = np.eye(4)
    ball[:3, 3] = [0.0, 0.0, -0.5]
    b.add_body(arm, "ball", "spherical", placement=ball, mass=0.3, com=[0.02, 0.0, -0.2], inertia=np.diag([0.004, 0.005, 0.002]))
    b.add_frame("tip", arm, ball)
    return b.build()


def rotation(quat: np.ndarray) -> np.ndarray:
    x, y, z, w = quat
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def qdot(model: vidyn.Model, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """dq/dt in the embedding ℝ^nq: ṗ = R v_lin and quaternion ½ q ⊗ (ω, 0) for a free-flyer,
    q̇ = v for 1-dof joints (the only kinds used here)."""
    out = np.empty(model.nq)
    for kind, iq, iv in zip(model.joint_kinds, model.idx_q, model.idx_v):
        if kind in ("revolute", "prismatic"):
            out[iq] = v[iv]
        elif kind in ("freeflyer", "spherical"):
            at = iq + 3 if kind == "freeflyer" else iq
            w = v[iv + 3 : iv + 6] if kind == "freeflyer" else v[iv : iv + 3]
            quat = q[at : at + 4]
            if kind == "freeflyer":
                out[iq : iq + 3] = rotation(quat / np.linalg.norm(quat)) @ v[iv : iv + 3]
            u, s = quat[:3], quat[3]
            out[at : at + 3] = 0.5 * (s * w + np.cross(u, w))
            out[at + 3] = -0.5 * u @ w
        elif kind == "planar":
            c, s = q[iq + 2], q[iq + 3]
            out[iq : iq + 2] = np.array([[c, -s], [s, c]]) @ v[iv : iv + 2]
            out[iq + 2 : iq + 4] = v[iv + 2] * np.array([-s, c])
        else:
            raise NotImplementedError(kind)
    return out


def normalise(model: vidyn.Model, q: np.ndarray) -> None:
    """Unit quaternions and (cos, sin) pairs, in place."""
    for kind, iq in zip(model.joint_kinds, model.idx_q):
        sl = {"freeflyer": slice(iq + 3, iq + 7), "spherical": slice(iq, iq + 4), "planar": slice(iq + 2, iq + 4)}.get(kind)
        if sl is not None:
            q[sl] /= np.linalg.norm(q[sl])


def rk4_reference(model: vidyn.Model, q: np.ndarray, v: np.ndarray, t_end: float, steps: int, fext: np.ndarray | None = None) -> np.ndarray:
    """Classical RK4 on (q, v) with q in the embedding (quaternions and cos/sin pairs
    renormalised after each step, which keeps order 4), forward dynamics by ABA, zero torque,
    optional constant body wrenches ``fext`` (nbodies, 6)."""
    h = t_end / steps
    tau = np.zeros(model.nv)

    def f(q, v):
        qn = q.copy()
        normalise(model, qn)
        return qdot(model, qn, v), vidyn.aba(model, qn, v, tau, fext)

    for _ in range(steps):
        k1q, k1v = f(q, v)
        k2q, k2v = f(q + 0.5 * h * k1q, v + 0.5 * h * k1v)
        k3q, k3v = f(q + 0.5 * h * k2q, v + 0.5 * h * k2v)
        k4q, k4v = f(q + h * k3q, v + h * k3v)
        q = q + h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q)
        v = v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
        normalise(model, q)
    return q


def solo12() -> vidyn.Model:
    try:
        return models.example_robot("solo12")
    except (FileNotFoundError, KeyError) as e:  # example-robot-data missing or too old
        pytest.skip(str(e))


def torque_free_body() -> tuple[vidyn.Model, vidyn.Model, vidyn.SingleDofMap]:
    b = vidyn.ModelBuilder("body")
    b.set_gravity([0.0, 0.0, 0.0])
    b.add_body(None, "ball", "spherical", mass=1.0, com=[0, 0, 0], inertia=np.diag([1.0, 2.0, 3.0]))
    model = b.build()
    return (model, *model.to_single_dof())


def rk4_free_rotation(quat: np.ndarray, w: np.ndarray, inertia: np.ndarray, t: float, h: float = 1e-3) -> np.ndarray:
    """Reference: RK4 of Euler's equations `J ẇ = −w × J w` and `q̇ = ½ q ⊗ (w, 0)` (body
    angular velocity, quaternion [x y z w] renormalised each step; error ~h⁴ ≈ 1e-12)."""

    def mul(a, b):
        (x1, y1, z1, w1), (x2, y2, z2, w2) = a, b
        return np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])

    def f(s):
        return np.r_[0.5 * mul(s[:4], np.r_[s[4:], 0.0]), np.linalg.solve(inertia, -np.cross(s[4:], inertia @ s[4:]))]

    s = np.r_[quat, w]
    for _ in range(int(round(t / h))):
        k1 = f(s)
        k2 = f(s + h / 2 * k1)
        k3 = f(s + h / 2 * k2)
        k4 = f(s + h * k3)
        s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        s[:4] /= np.linalg.norm(s[:4])
    return s[:4]
