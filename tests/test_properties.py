"""Property tests: vidyn's algorithms checked against each other on random trees (hypothesis).

Every identity here holds for *any* tree, joint kind and state, so a failure is a bug in one
of the algorithms involved (or in a tolerance: see tolerances.py for the reasoning behind each).
Models come from `strategies.model_specs` (≤ 30 bodies, all five joint kinds), states from
`strategies.states` (random, zero velocity, near-identity rotations, angles at ±π, …).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import vidyn
from strategies import ModelSpec, act_motion_inv, log3, model_specs, states
from tolerances import (
    ABA_RESIDUAL_RTOL,
    ACCEL_COND_FACTOR,
    ENERGY_RTOL,
    ENERGY_STEP,
    EPS,
    FD_RTOL,
    FD_STEP,
    IDENTITY_RTOL,
    MINV_COND_FACTOR,
    SYMMETRY_RTOL,
    assert_close,
    cond,
)

REFERENCES = ("local", "world", "local_world_aligned")


def draw_model_and_state(data, **spec_kwargs):
    spec = data.draw(model_specs(**spec_kwargs), label="spec")
    model = spec.build()
    state = data.draw(states(model), label="state")
    return spec, model, state


def inf_norm(m: np.ndarray) -> float:
    return float(np.max(np.sum(np.abs(m), axis=1))) if m.size else 0.0


def vmax(x) -> float:
    x = np.asarray(x)
    return float(np.max(np.abs(x))) if x.size else 0.0


# --- inverse and forward dynamics ------------------------------------------------------------


@given(st.data())
def test_rnea_of_aba_is_identity(data):
    """rnea(q, v, aba(q, v, τ)) = τ (torque-space residual: backward error, cond-free)."""
    _, model, s = draw_model_and_state(data)
    a = vidyn.aba(model, s.q, s.v, s.tau)
    tau = vidyn.rnea(model, s.q, s.v, a)
    m = vidyn.crba(model, s.q)
    b = vidyn.nonlinear_effects(model, s.q, s.v)
    scale = max(vmax(s.tau), inf_norm(m) * vmax(a), vmax(b))
    assert_close(tau, s.tau, ABA_RESIDUAL_RTOL, scale=scale, what="rnea(aba(tau))")


@given(st.data())
def test_aba_of_rnea_is_identity(data):
    """aba(q, v, rnea(q, v, a)) = a, to cond(M)·eps (forward error of a linear solve)."""
    _, model, s = draw_model_and_state(data)
    tau = vidyn.rnea(model, s.q, s.v, s.a)
    a = vidyn.aba(model, s.q, s.v, tau)
    m = vidyn.crba(model, s.q)
    kappa = cond(m)
    b = vidyn.nonlinear_effects(model, s.q, s.v)
    # the solve sees τ = M a + b and must cancel b: the error is relative to |a| + |M⁻¹|·|b|
    scale = max(vmax(s.a), inf_norm(np.linalg.inv(m)) * vmax(b))
    assert_close(a, s.a, ACCEL_COND_FACTOR * EPS * kappa, scale=scale, what=f"aba(rnea(a)), cond(M)={kappa:.1e}")


@given(st.data())
def test_rnea_is_mass_matrix_times_a_plus_nle(data):
    """rnea(q, v, a) = M(q) a + nle(q, v)."""
    _, model, s = draw_model_and_state(data)
    m = vidyn.crba(model, s.q)
    b = vidyn.nonlinear_effects(model, s.q, s.v)
    tau = vidyn.rnea(model, s.q, s.v, s.a)
    scale = max(inf_norm(m) * vmax(s.a), vmax(b))
    assert_close(tau, m @ s.a + b, IDENTITY_RTOL, scale=scale, what="rnea vs M a + nle")


@given(st.data())
def test_gravity_and_nle_are_rnea_special_cases(data):
    """gravity(q) = rnea(q, 0, 0) = nle(q, 0); nle(q, v) = rnea(q, v, 0)."""
    _, model, s = draw_model_and_state(data)
    z = np.zeros(model.nv)
    g = vidyn.gravity(model, s.q)
    assert_close(g, vidyn.rnea(model, s.q, z, z), IDENTITY_RTOL, what="gravity vs rnea(q,0,0)")
    assert_close(vidyn.nonlinear_effects(model, s.q, z), g, IDENTITY_RTOL, what="nle(q,0) vs gravity")
    assert_close(vidyn.nonlinear_effects(model, s.q, s.v), vidyn.rnea(model, s.q, s.v, z), IDENTITY_RTOL, what="nle vs rnea(q,v,0)")


# --- mass matrix ---------------------------------------------------------------------------


@given(st.data())
def test_crba_is_symmetric_positive_definite(data):
    _, model, s = draw_model_and_state(data)
    m = vidyn.crba(model, s.q)
    assert m.shape == (model.nv, model.nv)
    assert_close(m, m.T, SYMMETRY_RTOL, what="M - M^T")
    # Cholesky succeeds iff M is positive definite (every body has a PD spatial inertia)
    np.linalg.cholesky(0.5 * (m + m.T))
    assert np.all(np.diag(m) > 0)


@given(st.data())
def test_crba_columns_are_rnea_differences(data):
    """M e_k = rnea(q, 0, e_k) − rnea(q, 0, 0) (gravity on), = rnea(q, 0, e_k) with g = 0."""
    spec, model, s = draw_model_and_state(data)
    m = vidyn.crba(model, s.q)
    z = np.zeros(model.nv)
    g = vidyn.rnea(model, s.q, z, z)
    eye = np.eye(model.nv)
    cols = np.column_stack([vidyn.rnea(model, s.q, z, eye[k]) - g for k in range(model.nv)]) if model.nv else m
    scale = max(vmax(m), vmax(g))
    assert_close(cols, m, IDENTITY_RTOL, scale=scale, what="M columns from rnea differences")

    zero_g = spec.with_gravity([0.0, 0.0, 0.0]).build()
    assert_close(np.asarray(zero_g.gravity), np.zeros(3), 0.0, what="set_gravity(0)")
    assert_close(vidyn.gravity(zero_g, s.q), z, 0.0, what="gravity with g = 0")
    cols0 = np.column_stack([vidyn.rnea(zero_g, s.q, z, eye[k]) for k in range(model.nv)])
    assert_close(cols0, m, IDENTITY_RTOL, scale=vmax(m), what="M columns from rnea with g = 0")


@given(st.data())
def test_minverse_is_inverse_of_crba(data):
    _, model, s = draw_model_and_state(data)
    m = vidyn.crba(model, s.q)
    minv = vidyn.minverse(model, s.q)
    assert_close(minv, minv.T, SYMMETRY_RTOL, what="Minv symmetric")
    kappa = cond(m)
    assert_close(m @ minv, np.eye(model.nv), MINV_COND_FACTOR * EPS * kappa, what=f"M Minv = I, cond(M)={kappa:.1e}")


@given(st.data())
def test_kinetic_energy_is_quadratic_form(data):
    """T = ½ vᵀ M v; V(q ⊕ h v) − V(q ⊕ −h v) ≈ 2h vᵀ g(q) (gravity torque is ∂V/∂q)."""
    _, model, s = draw_model_and_state(data)
    m = vidyn.crba(model, s.q)
    t = vidyn.kinetic_energy(model, s.q, s.v)
    assert_close(t, 0.5 * s.v @ m @ s.v, IDENTITY_RTOL, scale=0.5 * inf_norm(m) * vmax(s.v) ** 2, what="T vs ½vᵀMv")
    # ∂V/∂q along v, central difference on the manifold
    h = FD_STEP
    vp = vidyn.potential_energy(model, model.integrate(s.q, h * s.v))
    vm = vidyn.potential_energy(model, model.integrate(s.q, -h * s.v))
    g = vidyn.gravity(model, s.q)
    v0 = vidyn.potential_energy(model, s.q)
    # round-off of the quotient ≈ eps·|V|/h; V is a sum of m_i g z_i, bounded by Σ|terms|
    scale = max(vmax(g) * np.sum(np.abs(s.v)), abs(v0) * EPS / h / FD_RTOL)
    assert_close((vp - vm) / (2 * h), s.v @ g, FD_RTOL, scale=scale, what="dV/dt vs vᵀ g(q)")


@given(st.data())
def test_energy_balance(data):
    """dE/dt = vᵀτ along the motion a = aba(q, v, τ), E = T + V (no damping in built models).

    E is evaluated on the 2nd-order Taylor path q(t) = q ⊕ (t v + ½t² a), v(t) = v + t a at
    t = ±h, ±h/2; Richardson extrapolation of the central quotients leaves O(h⁴) (see
    tolerances.ENERGY_STEP for the choice of h and the tolerance).
    """
    _, model, s = draw_model_and_state(data)
    a = vidyn.aba(model, s.q, s.v, s.tau)
    timescale = 1.0 / max(1.0, float(np.sum(np.abs(s.v))), float(np.sqrt(np.sum(np.abs(a)))))
    h = ENERGY_STEP * timescale

    def energy(t):
        q = model.integrate(s.q, t * s.v + 0.5 * t * t * a)
        v = s.v + t * a
        return vidyn.kinetic_energy(model, q, v) + vidyn.potential_energy(model, q)

    def central(step):
        return (energy(step) - energy(-step)) / (2 * step)

    de_dt = (4.0 * central(h / 2) - central(h)) / 3.0
    power = float(s.v @ s.tau)
    # |E| sets the round-off of each energy evaluation; |E|/timescale is a power of that size
    e_size = 1.0 + vidyn.kinetic_energy(model, s.q, s.v) + abs(vidyn.potential_energy(model, s.q))
    scale = max(abs(power), float(np.sum(np.abs(s.v) * np.abs(s.tau))), e_size / timescale)
    assert_close(de_dt, power, ENERGY_RTOL, scale=scale, what=f"dE/dt vs vᵀτ (h={h:.1e})")


# --- kinematics and Jacobians --------------------------------------------------------------


def _frame_parents(spec: ModelSpec, model):
    """{frame name: (vidyn body index or None, placement in that body)} for the spec's frames."""
    out = {}
    for f in spec.frames:
        body = None if f.parent < 0 else model.joint_index(spec.bodies[f.parent].name)
        out[f.name] = (body, f.placement)
    return out


@given(st.data())
def test_frame_placements_follow_body_placements(data):
    spec, model, s = draw_model_and_state(data)
    fk = vidyn.forward_kinematics(model, s.q)
    for name, (body, place) in _frame_parents(spec, model).items():
        expected = place if body is None else fk.placements[body] @ place
        assert_close(vidyn.frame_placement(model, s.q, name), expected, IDENTITY_RTOL, what=f"oMf {name}")
    # and frame_placements() agrees with frame_placement() frame by frame
    all_f = vidyn.frame_placements(model, s.q)
    assert len(all_f) == len(model.frame_names)
    for k, name in enumerate(model.frame_names):
        np.testing.assert_array_equal(all_f[k], vidyn.frame_placement(model, s.q, k))


def fd_jacobians(model, q, frame, h=FD_STEP):
    """Central differences of frame_placement on the manifold, q ⊕ ±h e_k, in each reference.

    Columns: ṗ (world) and ω_world = log(R₊ R₋ᵀ)/(2h) (O(h²) by BCH); then
    LOCAL = [Rᵀṗ; Rᵀω], LOCAL_WORLD_ALIGNED = [ṗ; ω], WORLD = [ṗ − ω × p; ω].
    """
    nv = model.nv
    m0 = vidyn.frame_placement(model, q, frame)
    r0, p0 = m0[:3, :3], m0[:3, 3]
    out = {ref: np.zeros((6, nv)) for ref in REFERENCES}
    for k in range(nv):
        e = np.zeros(nv)
        e[k] = h
        mp = vidyn.frame_placement(model, model.integrate(q, e), frame)
        mm = vidyn.frame_placement(model, model.integrate(q, -e), frame)
        pdot = (mp[:3, 3] - mm[:3, 3]) / (2 * h)
        w = log3(mp[:3, :3] @ mm[:3, :3].T) / (2 * h)
        out["local_world_aligned"][:, k] = np.concatenate([pdot, w])
        out["world"][:, k] = np.concatenate([pdot - np.cross(w, p0), w])
        out["local"][:, k] = np.concatenate([r0.T @ pdot, r0.T @ w])
    return out


@given(st.data())
def test_jacobians_match_finite_differences(data):
    spec, model, s = draw_model_and_state(data, max_bodies=12, min_frames=1)
    frame = data.draw(st.sampled_from([f.name for f in spec.frames]), label="frame")
    fd = fd_jacobians(model, s.q, frame)
    for ref in REFERENCES:
        j = vidyn.jacobian(model, s.q, frame, reference=ref)
        assert j.shape == (6, model.nv)
        assert_close(j, fd[ref], FD_RTOL, scale=vmax(fd[ref]), what=f"J({frame}, {ref}) vs finite differences")


@given(st.data())
def test_jacobian_times_v_is_frame_velocity(data):
    """J_local(q) v equals the frame's body velocity from forward_kinematics, and J_world,
    J_lwa are its re-expressions; default reference is local_world_aligned."""
    spec, model, s = draw_model_and_state(data, min_frames=1)
    fk = vidyn.forward_kinematics(model, s.q, s.v)
    assert fk.velocities.shape == (model.nbodies, 6)
    for name, (body, place) in _frame_parents(spec, model).items():
        v_body = np.zeros(6) if body is None else fk.velocities[body]
        v_local = act_motion_inv(place, v_body)
        j_local = vidyn.jacobian(model, s.q, name, reference="local")
        assert_close(j_local @ s.v, v_local, IDENTITY_RTOL, scale=vmax(j_local) * vmax(s.v), what=f"J_local v ({name})")
        om = vidyn.frame_placement(model, s.q, name)
        r, p = om[:3, :3], om[:3, 3]
        lin_w, ang_w = r @ v_local[:3], r @ v_local[3:]
        j_lwa = vidyn.jacobian(model, s.q, name, reference="local_world_aligned")
        j_w = vidyn.jacobian(model, s.q, name, reference="world")
        sc = vmax(j_w) * vmax(s.v) + vmax(j_local) * vmax(s.v)
        assert_close(j_lwa @ s.v, np.concatenate([lin_w, ang_w]), IDENTITY_RTOL, scale=sc, what=f"J_lwa v ({name})")
        assert_close(j_w @ s.v, np.concatenate([lin_w - np.cross(ang_w, p), ang_w]), IDENTITY_RTOL, scale=sc, what=f"J_world v ({name})")
        np.testing.assert_array_equal(vidyn.jacobian(model, s.q, name), j_lwa)


@given(st.data())
def test_body_accelerations_at_rest_are_jacobian_times_a(data):
    """With v = 0 the (gravity-free) body acceleration of a frame is J_local a."""
    spec, model, s = draw_model_and_state(data, min_frames=1)
    fk = vidyn.forward_kinematics(model, s.q, np.zeros(model.nv), s.a)
    for name, (body, place) in _frame_parents(spec, model).items():
        a_body = np.zeros(6) if body is None else fk.accelerations[body]
        j_local = vidyn.jacobian(model, s.q, name, reference="local")
        assert_close(j_local @ s.a, act_motion_inv(place, a_body), IDENTITY_RTOL, scale=vmax(j_local) * vmax(s.a), what=f"a_frame ({name})")


@given(st.data())
def test_body_acceleration_is_time_derivative_of_velocity(data):
    """fk.accelerations[i] = d/dt fk.velocities[i] along q(t) = q ⊕ (t v + ½t²a), v(t) = v + t a
    (body-frame spatial acceleration, Pinocchio's data.a: no frame-change term)."""
    _, model, s = draw_model_and_state(data, max_bodies=12)
    fk = vidyn.forward_kinematics(model, s.q, s.v, s.a)
    h = FD_STEP

    def vel(t):
        q = model.integrate(s.q, t * s.v + 0.5 * t * t * s.a)
        return vidyn.forward_kinematics(model, q, s.v + t * s.a).velocities

    fd = (vel(h) - vel(-h)) / (2 * h)
    scale = max(vmax(fd), vmax(fk.velocities) ** 2)
    assert_close(fk.accelerations, fd, FD_RTOL * 10, scale=scale, what="fk.accelerations vs d/dt fk.velocities")


@pytest.mark.parametrize("kind", ["revolute", "prismatic", "spherical", "freeflyer", "planar"])
def test_every_joint_kind_is_generated(kind):
    """The strategies know every kind vidyn exposes (a new kind must not go untested)."""
    from strategies import JOINT_KINDS

    assert kind in JOINT_KINDS


# --- the built-in models ------------------------------------------------------------------


BUILTIN = {
    "pendulum_chain(6)": lambda: vidyn.models.pendulum_chain(6),
    "pendulum_chain(5, planar=False)": lambda: vidyn.models.pendulum_chain(5, planar=False),
    "binary_tree(3)": lambda: vidyn.models.binary_tree(3),
    "cartpole": vidyn.models.cartpole,
    "acrobot": vidyn.models.acrobot,
    "random_tree(20, 7)": lambda: vidyn.models.random_tree(20, 7),
}


@pytest.mark.parametrize("name", list(BUILTIN))
def test_builtin_models_satisfy_the_identities(name):
    """The same web of identities on vidyn.models' fixed models, five seeded states each."""
    model = BUILTIN[name]()
    for seed in range(5):
        rng = np.random.default_rng(seed)
        q = model.random_configuration(rng)
        v, tau = rng.uniform(-3, 3, model.nv), rng.standard_normal(model.nv)
        m = vidyn.crba(model, q)
        np.linalg.cholesky(m)
        a = vidyn.aba(model, q, v, tau)
        b = vidyn.nonlinear_effects(model, q, v)
        assert_close(vidyn.rnea(model, q, v, a), tau, ABA_RESIDUAL_RTOL, scale=max(vmax(tau), inf_norm(m) * vmax(a), vmax(b)), what=f"{name}: rnea(aba)")
        assert_close(m @ vidyn.minverse(model, q), np.eye(model.nv), MINV_COND_FACTOR * EPS * cond(m), what=f"{name}: M Minv")
        assert_close(vidyn.kinetic_energy(model, q, v), 0.5 * v @ m @ v, IDENTITY_RTOL, scale=inf_norm(m) * vmax(v) ** 2, what=f"{name}: T")
