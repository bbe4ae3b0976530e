"""Mimic joints (``Model.from_urdf(..., mimic=True)``): a mimicking joint follows
``multiplier * q_leader + offset`` and has no coordinate of its own (Pinocchio 3's
``JointModelMimic``).

Oracles:

* Pinocchio's own mimic models (``pin.buildModelFromUrdf(path, mimic=True)``) on panda, pr2,
  tiago_pro and baxter for what pin 4.1 computes with mimics: dimensions, RNEA, CRBA,
  nonlinear effects, gravity, frame placements and Jacobians (three references), centre of
  mass and its Jacobian, CCRBA.
* For what pin refuses with mimics (ABA, M⁻¹, ∂RNEA, ∂ABA) and for the robots whose leaders
  follow their mimics in the tree order (romeo, Talos' full hands; pin refuses those models),
  Pinocchio's ``mimic=False`` model contracted with the coupling ``G``
  (``model.coupling_matrix()``): ``M = Gᵀ M_e G``, ``τ = Gᵀ τ_e``, ``∂τ/∂q = Gᵀ ∂τ_e/∂q_e G``,
  an independent computation of the same maths.
* Central differences on the mimic model itself for the derivatives, the second order and
  the integrator's linearisation; a fine RK4 solution of the reduced ODE (``vidyn.aba`` of
  the mimic model) for the integrator's convergence order.
"""

from __future__ import annotations

import numpy as np
import pytest

import vidyn
from pin_layout import ConfigurationMap
from tolerances import FD_RTOL, FD_STEP, ORACLE_RTOL, assert_close, oracle_solve_rtol, relative_error
from vidyn import models

pin = pytest.importorskip("pinocchio")

#: robots whose <mimic> joints pin 4.1 builds (leaders precede their mimics)
PIN_MIMIC = {
    "panda": "panda_description/urdf/panda.urdf",
    "pr2": "pr2_description/urdf/pr2.urdf",
    "tiago_pro": "tiago_pro_description/robots/tiago_pro.urdf",
    "baxter": "baxter_description/urdf/baxter.urdf",
}
#: robots with a leader after its mimic in the tree order (pin: "The parent joint of the mimic
#: joint is not in the kinematic tree"); vidyn couples them
LEADER_AFTER = {
    "romeo": "romeo_description/urdf/romeo.urdf",
    "talos_full": "talos_data/robots/talos_full_v2.urdf",
}
STATES = 3


def _path(relative: str) -> str:
    robots = models.example_robot_data_dir()
    if robots is None:
        pytest.skip("example-robot-data is not installed")
    return str(robots / relative)


class Oracle:
    """A vidyn mimic model with Pinocchio's extended (``mimic=False``) model and, when pin
    builds it, its mimic model; maps reduced vidyn states to both."""

    def __init__(self, relative: str, with_pin_mimic: bool):
        path = _path(relative)
        self.vd = vidyn.Model.from_urdf(path, mimic=True)
        self.extended = self.vd.extended()
        self.pe = pin.buildModelFromUrdf(path)
        self.pde = self.pe.createData()
        self.emap = ConfigurationMap(self.extended, self.pe)
        assert np.array_equal(self.emap.v_perm, np.arange(self.pe.nv)), "URDF models share the v order"
        self.G = self.vd.coupling_matrix()
        self.pm = pin.buildModelFromUrdf(path, mimic=True) if with_pin_mimic else None
        if self.pm is not None:
            self.pd = self.pm.createData()
            # pin's mimic q: its extended q without the mimicking joints' coordinates
            mimicking = [self.pe.getJointId(name) for name, *_ in self.vd.mimic_joints]
            self.q_drop = np.concatenate([np.arange(self.pe.joints[j].idx_q, self.pe.joints[j].idx_q + self.pe.joints[j].nq) for j in mimicking])

    def state(self, rng):
        vd = self.vd
        q = vd.random_configuration(rng)
        v, a, tau = (rng.standard_normal(vd.nv) for _ in range(3))
        return q, v, a, tau

    def q_ext(self, q):
        """Pinocchio's extended configuration of a reduced vidyn q."""
        return self.emap.q_to_pin(self.vd.lift_configuration(q))

    def q_pin(self, q):
        return np.delete(self.q_ext(q), self.q_drop)


@pytest.fixture(scope="module", params=sorted(PIN_MIMIC))
def robot(request):
    return Oracle(PIN_MIMIC[request.param], with_pin_mimic=True)


def test_dimensions_and_coupling_match_pinocchio(robot):
    vd, pm, pe = robot.vd, robot.pm, robot.pe
    # a continuous joint is one angle in vidyn, (cos, sin) in pin
    continuous = robot.emap.n_continuous - sum(1 for n, *_ in vd.mimic_joints if _is_continuous(pe, n))
    assert (vd.nq, vd.nv) == (pm.nq - continuous, pm.nv)
    assert robot.extended.nv == pe.nv and len(vd.mimic_joints) == pe.nv - pm.nv
    for name, leader, multiplier, offset in vd.mimic_joints:
        j = pm.joints[pm.getJointId(name)]
        assert j.shortname() == "JointModelMimic"
        assert pm.joints[pm.getJointId(leader)].idx_v == j.idx_v == vd.idx_v[vd.joint_names.index(name)]
    # the limits are those of the free coordinates, as pin's
    np.testing.assert_array_equal(vd.effort_limit, pm.effortLimit)
    np.testing.assert_array_equal(vd.damping, pm.damping)


def _is_continuous(pe, name) -> bool:
    j = pe.joints[pe.getJointId(name)]
    return j.nq == 2 and j.nv == 1


def test_dynamics_and_kinematics_match_pinocchios_mimic_model(robot, oracle_summary):
    vd, pm, pd = robot.vd, robot.pm, robot.pd
    worst: dict[str, float] = {}

    def record(key, err):
        worst[key] = max(worst.get(key, 0.0), err)

    rng = np.random.default_rng(26)
    for _ in range(STATES):
        q, v, a, _ = robot.state(rng)
        qp = robot.q_pin(q)
        record("rnea", relative_error(vidyn.rnea(vd, q, v, a), pin.rnea(pm, pd, qp, v, a)))
        M = pin.crba(pm, pd, qp)
        record("crba", relative_error(vidyn.crba(vd, q), np.triu(M) + np.triu(M, 1).T))
        record("nonlinear_effects", relative_error(vidyn.nonlinear_effects(vd, q, v), pin.nonLinearEffects(pm, pd, qp, v)))
        record("gravity", relative_error(vidyn.gravity(vd, q), pin.computeGeneralizedGravity(pm, pd, qp)))
        record("com", relative_error(vidyn.center_of_mass(vd, q), pin.centerOfMass(pm, pd, qp)))
        record("com_jacobian", relative_error(vidyn.com_jacobian(vd, q), pin.jacobianCenterOfMass(pm, pd, qp)))
        record("ccrba", relative_error(vidyn.centroidal_momentum_matrix(vd, q), pin.ccrba(pm, pd, qp, v)))
        pin.framesForwardKinematics(pm, pd, qp)
        oMf = vidyn.frame_placements(vd, q)
        names = list(vd.frame_names)
        pin.computeJointJacobians(pm, pd, qp)
        for fid, frame in enumerate(pm.frames):
            if frame.name not in names:
                continue
            k = names.index(frame.name)
            if np.max(np.abs(oMf[k] - pd.oMf[fid].homogeneous)) > 1e-6 and names.count(frame.name) > 1:
                continue  # a link and a joint of one name: compared under the other id
            record("frame_placements", relative_error(oMf[k], pd.oMf[fid].homogeneous))
            for ref, pref in (("world", pin.WORLD), ("local", pin.LOCAL), ("local_world_aligned", pin.LOCAL_WORLD_ALIGNED)):
                record("frame_jacobians", relative_error(vidyn.jacobian(vd, q, k, reference=ref), pin.getFrameJacobian(pm, pd, fid, pref)))
    oracle_summary[(f"{vd.name} (mimic)", "fixed")] = {**worst, "_nq": vd.nq, "_nv": vd.nv}
    assert worst and max(worst.values()) <= ORACLE_RTOL, worst


def _extended_dynamics(robot, q, v, tau):
    """(M, b, aba, M⁻¹) of the reduced system from pin's mimic=False model: Gᵀ M_e G, Gᵀ b_e."""
    pe, pd, G = robot.pe, robot.pde, robot.G
    qe, ve = robot.q_ext(q), G @ v
    Me = pin.crba(pe, pd, qe)
    Me = np.triu(Me) + np.triu(Me, 1).T
    M, b = G.T @ Me @ G, G.T @ pin.nonLinearEffects(pe, pd, qe, ve)
    if np.linalg.cond(M) > 1e12:  # romeo's massless finger links: forward dynamics is undefined
        return M, b, None, None
    return M, b, np.linalg.solve(M, tau - b), np.linalg.inv(M)


@pytest.mark.parametrize("name", sorted(PIN_MIMIC) + sorted(LEADER_AFTER))
def test_what_pinocchio_refuses_matches_its_extended_model_contracted(name):
    """ABA, M⁻¹, ∂RNEA and ∂ABA (pin: "does not support Joint Mimic"), and every dynamics
    quantity of the leader-after-follower robots (pin refuses the model)."""
    relative = {**PIN_MIMIC, **LEADER_AFTER}[name]
    robot = Oracle(relative, with_pin_mimic=False)
    vd, pe, pd, G = robot.vd, robot.pe, robot.pde, robot.G
    rng = np.random.default_rng(3)
    for _ in range(STATES):
        q, v, a, tau = robot.state(rng)
        M, b, ddq, Minv = _extended_dynamics(robot, q, v, tau)
        qe, ve, ae = robot.q_ext(q), G @ v, G @ a
        assert_close(vidyn.crba(vd, q), M, ORACLE_RTOL, what="crba")
        assert_close(vidyn.rnea(vd, q, v, a), G.T @ pin.rnea(pe, pd, qe, ve, ae), ORACLE_RTOL, what="rnea")
        assert_close(vidyn.jacobian(vd, q, vd.frame_names[-1]), vidyn.jacobian(robot.extended, vd.lift_configuration(q), vd.frame_names[-1]) @ G, ORACLE_RTOL)
        if ddq is None:
            with pytest.raises(vidyn.ModelError, match="not positive definite"):
                vidyn.aba(vd, q, v, tau)
            continue
        c = np.linalg.cond(M)
        assert_close(vidyn.aba(vd, q, v, tau), ddq, oracle_solve_rtol(c), what="aba")
        assert_close(vidyn.minverse(vd, q), Minv, oracle_solve_rtol(c), what="minverse")
        dq, dv, dm = pin.computeRNEADerivatives(pe, pd, qe, ve, ae)
        ours = vidyn.rnea_derivatives(vd, q, v, a)
        for got, want, what in zip(ours, (G.T @ dq @ G, G.T @ dv @ G, M), ("dtau_dq", "dtau_dv", "dtau_da")):
            assert_close(got, want, ORACLE_RTOL, what=what)
        dq, dv, _ = pin.computeRNEADerivatives(pe, pd, qe, ve, G @ ddq)
        ours = vidyn.aba_derivatives(vd, q, v, tau)
        for got, want, what in zip(ours, (-Minv @ G.T @ dq @ G, -Minv @ G.T @ dv @ G, Minv), ("dddq_dq", "dddq_dv", "dddq_dtau")):
            assert_close(got, want, oracle_solve_rtol(c), scale=np.abs(want).max(), what=what)


def test_talos_reduced_mimics_are_on_fixed_joints_and_ignored():
    """talos_reduced's <mimic> elements sit on fixed joints: no coordinate to couple (pin
    ignores them too)."""
    path = _path("talos_data/robots/talos_reduced.urdf")
    vd = vidyn.Model.from_urdf(path, mimic=True)
    pm = pin.buildModelFromUrdf(path, mimic=True)
    assert vd.mimic_joints == [] and (vd.nq, vd.nv) == (pm.nq, pm.nv)
    assert vd == vidyn.Model.from_urdf(path)


# --- the reduced system on a hand-made tree: multiplier ≠ 1, offset ≠ 0, leader after its mimic


def _hand_urdf(leader_first: bool = False) -> str:
    link = '<link name="{0}"><inertial><origin xyz="{1}"/><mass value="{2}"/><inertia ixx="{3}" iyy="{3}" izz="{4}"/></inertial></link>'
    joint = '<joint name="{0}" type="{1}"><parent link="{2}"/><child link="{3}"/><origin xyz="{4}" rpy="{5}"/><axis xyz="{6}"/>{7}</joint>'
    mimic = '<mimic joint="a_leader" multiplier="-0.6" offset="0.25"/>'
    # "a_leader" sorts before "b_follower" in name order: with leader_first=False the follower
    # is a child of an earlier branch and the leader comes after it in the tree order
    body = [
        link.format("base", "0 0 0", 1.0, 0.1, 0.1),
        link.format("arm", "0 0 0.4", 1.5, 0.08, 0.02),
        link.format("fore", "0.1 0 0.3", 0.8, 0.03, 0.01),
        link.format("finger", "0 0.05 0.1", 0.3, 0.004, 0.002),
        link.format("slider", "0.05 0 0", 0.4, 0.01, 0.01),
        joint.format("shoulder", "revolute", "base", "arm", "0 0 0.1", "0 0 0", "0 1 0", '<limit lower="-2" upper="2"/>'),
        joint.format("elbow", "continuous", "arm", "fore", "0 0 0.8", "0.3 0 0", "1 0 0", ""),
        joint.format("a_leader" if leader_first else "z_leader", "revolute", "fore", "finger", "0 0.1 0.5", "0 0.2 0", "0 0 1", '<limit lower="-1" upper="1"/>'),
        joint.format("b_follower", "prismatic", "arm", "slider", "0.1 0 0.2", "0 0 0", "0 0.6 0.8", mimic.replace("a_leader", "a_leader" if leader_first else "z_leader")),
    ]
    return '<robot name="hand">' + "".join(body) + "</robot>"


@pytest.fixture(scope="module", params=[False, True], ids=["leader_after", "leader_first"])
def hand(request):
    return vidyn.Model.from_urdf_string(_hand_urdf(request.param), mimic=True)


def test_the_coupling_is_affine_in_the_extended_model(hand):
    vd = hand
    (name, leader, m, o), = vd.mimic_joints
    assert (m, o) == (-0.6, 0.25) and (vd.nq, vd.nv) == (3, 3)
    ext = vd.extended()
    rng = np.random.default_rng(1)
    q, v = vd.random_configuration(rng), rng.standard_normal(3)
    qe = vd.lift_configuration(q)
    jf, jl = ext.joint_names.index(name), ext.joint_names.index(leader)
    assert qe[ext.idx_q[jf]] == pytest.approx(m * qe[ext.idx_q[jl]] + o, abs=1e-15)
    G = vd.coupling_matrix()
    np.testing.assert_array_equal(vd.lift_tangent(v), G @ v)
    # kinematic quantities are the extended model's at the lifted state, Jacobians times G
    np.testing.assert_array_equal(vidyn.frame_placements(vd, q), vidyn.frame_placements(ext, qe))
    assert_close(vidyn.jacobian(vd, q, "slider"), vidyn.jacobian(ext, qe, "slider") @ G, 1e-14)
    assert_close(vidyn.centroidal_momentum_matrix_time_variation(vd, q, v), vidyn.centroidal_momentum_matrix_time_variation(ext, qe, G @ v) @ G, 1e-14)
    assert vidyn.kinetic_energy(vd, q, v) == pytest.approx(vidyn.kinetic_energy(ext, qe, G @ v), rel=1e-15)
    # integrate/difference in the reduced coordinates
    q1 = vd.integrate(q, 0.1 * v)
    assert_close(vd.difference(q, q1), 0.1 * v, 1e-14)


def test_identities_of_the_reduced_dynamics(hand):
    """M·aba = τ − b; crba symmetric positive definite; M·M⁻¹ = 1; rnea(aba) = τ."""
    vd = hand
    rng = np.random.default_rng(2)
    for _ in range(5):
        q = vd.random_configuration(rng)
        v, tau = rng.standard_normal(vd.nv), rng.standard_normal(vd.nv)
        M, b = vidyn.crba(vd, q), vidyn.nonlinear_effects(vd, q, v)
        assert_close(M, M.T, 1e-15)
        assert np.all(np.linalg.eigvalsh(M) > 0)
        ddq = vidyn.aba(vd, q, v, tau)
        assert_close(M @ ddq, tau - b, 1e-12)
        assert_close(vidyn.rnea(vd, q, v, ddq), tau, 1e-12)
        assert_close(M @ vidyn.minverse(vd, q), np.eye(vd.nv), 1e-12)
        fext = rng.standard_normal((vd.nbodies, 6))
        assert_close(vidyn.rnea(vd, q, v, vidyn.aba(vd, q, v, tau, fext), fext), tau, 1e-12)


def _central(f, x, n, h, step=None):
    """Columns (f(x ⊕ h e_k) − f(x ⊖ h e_k)) / 2h, k < n (the last axis of the result)."""
    step = step or (lambda x, d: x + d)
    cols = []
    for k in range(n):
        d = np.zeros(n)
        d[k] = h
        cols.append((np.asarray(f(step(x, d))) - np.asarray(f(step(x, -d)))) / (2 * h))
    return np.stack(cols, axis=-1)


def test_derivatives_match_central_differences(hand):
    """∂aba/∂(q, v, τ) and the second-order tensors against central differences of the
    mimic model's own functions, step FD_STEP = 1e-6 (truncation ~h² ≈ 1e-12, round-off
    ~ε/h ≈ 2e-10 relative), within FD_RTOL = 1e-7 (tolerances.py)."""
    vd = hand
    rng = np.random.default_rng(4)
    q = vd.random_configuration(rng)
    v, tau, a = (rng.standard_normal(vd.nv) for _ in range(3))
    on_q = lambda x, d: vd.integrate(x, d)  # noqa: E731
    h = FD_STEP
    dq, dv, dtau = vidyn.aba_derivatives(vd, q, v, tau)
    fd = lambda f, x, step=None: _central(f, x, vd.nv, h, step)  # noqa: E731
    assert_close(dq, fd(lambda x: vidyn.aba(vd, x, v, tau), q, on_q), FD_RTOL, scale=np.abs(dq).max())
    assert_close(dv, fd(lambda x: vidyn.aba(vd, q, x, tau), v), FD_RTOL, scale=np.abs(dv).max())
    assert_close(dtau, fd(lambda x: vidyn.aba(vd, q, v, x), tau), FD_RTOL, scale=np.abs(dtau).max())
    tq, tv, M = vidyn.rnea_derivatives(vd, q, v, a)
    assert_close(tq, fd(lambda x: vidyn.rnea(vd, x, v, a), q, on_q), FD_RTOL, scale=np.abs(tq).max())
    assert_close(tv, fd(lambda x: vidyn.rnea(vd, q, x, a), v), FD_RTOL, scale=np.abs(tv).max())
    # second order: page k = the difference of the first order along k (outer derivative last)
    d2q, d2v, d2qv, dM = vidyn.rnea_second_order(vd, q, v, a)
    assert_close(d2q, fd(lambda x: vidyn.rnea_derivatives(vd, x, v, a)[0], q, on_q), 1e-6, scale=np.abs(d2q).max())
    assert_close(d2v, fd(lambda x: vidyn.rnea_derivatives(vd, q, x, a)[1], v), 1e-6, scale=np.abs(d2v).max())
    assert_close(d2qv, fd(lambda x: vidyn.rnea_derivatives(vd, q, x, a)[0], v), 1e-6, scale=np.abs(d2qv).max())
    assert_close(dM, fd(lambda x: vidyn.crba(vd, x), q, on_q), 1e-6, scale=np.abs(dM).max())
    f2q, f2v, f2qv, f2tq = vidyn.aba_second_order(vd, q, v, tau)
    assert_close(f2q, fd(lambda x: vidyn.aba_derivatives(vd, x, v, tau)[0], q, on_q), 1e-6, scale=np.abs(f2q).max())
    assert_close(f2v, fd(lambda x: vidyn.aba_derivatives(vd, q, x, tau)[1], v), 1e-6, scale=np.abs(f2v).max())
    assert_close(f2qv, fd(lambda x: vidyn.aba_derivatives(vd, q, x, tau)[0], v), 1e-6, scale=np.abs(f2qv).max())
    assert_close(f2tq, fd(lambda x: vidyn.minverse(vd, x), q, on_q), 1e-6, scale=np.abs(f2tq).max())
    # contracted forms are the contractions of the tensors
    lam = rng.standard_normal(vd.nv)
    for got, full in zip(vidyn.rnea_second_order_contracted(vd, q, v, a, lam), (d2q, d2v, d2qv)):
        assert_close(got, np.einsum("i,ijk->jk", lam, full), 1e-12)
    for got, full in zip(vidyn.aba_second_order_contracted(vd, q, v, tau, lam), (f2q, f2v, f2qv, f2tq)):
        assert_close(got, np.einsum("i,ijk->jk", lam, full), 1e-12)


def test_rnea_second_order_is_the_extended_tensor_contracted(hand):
    vd = hand
    ext, G = vd.extended(), vd.coupling_matrix()
    rng = np.random.default_rng(5)
    q = vd.random_configuration(rng)
    v, a = rng.standard_normal(vd.nv), rng.standard_normal(vd.nv)
    ours = vidyn.rnea_second_order(vd, q, v, a)
    theirs = vidyn.rnea_second_order(ext, vd.lift_configuration(q), G @ v, G @ a)
    for got, t in zip(ours, theirs):
        assert_close(got, np.einsum("ijk,ia,jb,kc->abc", t, G, G, G), 1e-13, scale=np.abs(t).max())


def test_mimic_models_integrators_and_trajectories_pickle_and_save(tmp_path):
    import pickle

    vd = vidyn.Model.from_urdf_string(_hand_urdf(), mimic=True)
    back = pickle.loads(pickle.dumps(vd))
    assert back == vd and back.mimic_joints == vd.mimic_joints and back.nv == 3
    assert vd.content_hash() != vd.extended().content_hash()
    assert vd.extended() == vidyn.Model.from_urdf_string(_hand_urdf())
    vi = vidyn.VariationalIntegrator(vd, dt=0.01, scheme="simpson", stiffness=np.ones(vd.nv))
    assert pickle.loads(pickle.dumps(vi)) == vi
    traj = vi.rollout(vd.neutral() + 0.1, v0=np.zeros(vd.nv), steps=10)
    assert pickle.loads(pickle.dumps(traj)) == traj
    traj.save(tmp_path / "hand.npz")
    np.testing.assert_array_equal(vidyn.Trajectory.load(tmp_path / "hand.npz", vi).q, traj.q)


# --- what is refused


def test_refused_inputs_name_the_culprit():
    vd = vidyn.Model.from_urdf_string(_hand_urdf(), mimic=True)
    q = vd.neutral()
    with pytest.raises(vidyn.InputError, match=r"q has shape \(4,\), expected \(model.nq,\) = \(3,\)"):
        vidyn.rnea(vd, np.zeros(4), np.zeros(3), np.zeros(3))
    with pytest.raises(vidyn.ModelError, match="lock_joints does not support mimic joints.*'b_follower' mimics 'z_leader'"):
        vd.lock_joints(["elbow"], q)
    with pytest.raises(vidyn.ModelError, match="to_single_dof does not support mimic"):
        vd.to_single_dof()
    with pytest.raises(vidyn.ModelError, match="vidyn.batch does not support mimic"):
        vidyn.batch.rnea(vd, q[None], np.zeros((1, 3)), np.zeros((1, 3)))
    with pytest.raises(vidyn.ModelError, match="MaximalIntegrator does not support mimic"):
        vidyn.MaximalIntegrator(vd, dt=0.01)


def test_bad_mimic_elements_are_urdf_errors():
    base = _hand_urdf()
    cases = {
        base.replace('joint="z_leader"', 'joint="nowhere"'): "joint 'b_follower' mimics joint 'nowhere', which the URDF does not define",
        base.replace('multiplier="-0.6"', 'multiplier="x"'): r"joint 'b_follower'.*multiplier",
        base.replace('<mimic joint="z_leader"', '<mimic'): "joint 'b_follower': <mimic> has no joint attribute",
        base.replace('joint="z_leader" multiplier', 'joint="b_follower" multiplier'): "cannot mimic itself",
    }
    for xml, message in cases.items():
        with pytest.raises(vidyn.UrdfError, match=message):
            vidyn.Model.from_urdf_string(xml, mimic=True)
    # a chain (the leader itself mimics) is refused by name
    chain = base.replace('<axis xyz="0 0 1"/><limit lower="-1" upper="1"/>', '<axis xyz="0 0 1"/><limit lower="-1" upper="1"/><mimic joint="shoulder"/>')
    with pytest.raises(vidyn.UrdfError, match="chains of mimic joints are not supported"):
        vidyn.Model.from_urdf_string(chain, mimic=True)
    # a leader with no coordinate
    fixed = base.replace('"z_leader" type="revolute"', '"z_leader" type="fixed"')
    with pytest.raises(vidyn.UrdfError, match="which is fixed"):
        vidyn.Model.from_urdf_string(fixed, mimic=True)
    # without mimic=True: independent joints, with the warning naming the keyword
    with pytest.warns(vidyn.ModelWarning, match="mimic=True"):
        assert vidyn.Model.from_urdf_string(base).nv == 4


# --- the variational integrator on the reduced system


def _reference(vd, q0, v0, T, steps=8000):
    """The reduced ODE q̈ = aba(q, q̇, 0) of the mimic model by classical RK4 with T/8000 steps
    (error ~h⁴ ≈ 1e-17 relative here, far below the VI errors measured)."""
    n, h = vd.nv, T / steps

    def f(x):
        return np.concatenate([x[n:], vidyn.aba(vd, x[:n], x[n:], np.zeros(n))])

    x = np.concatenate([q0, v0])
    for _ in range(steps):
        k1 = f(x)
        k2 = f(x + 0.5 * h * k1)
        k3 = f(x + 0.5 * h * k2)
        k4 = f(x + h * k3)
        x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return x[:n]


def _panda():
    return models.example_robot("panda", mimic=True) if models.example_robot_data_dir() else pytest.skip("example-robot-data is not installed")


@pytest.mark.parametrize("scheme,order,dts", [("trapezoid", 2, (0.02, 0.01)), ("simpson", 4, (0.05, 0.025)), ("midpoint", 2, (0.02, 0.01))])
@pytest.mark.parametrize("which", ["hand", "panda"])
def test_rollouts_converge_to_the_reduced_ode_at_the_schemes_order(which, scheme, order, dts):
    """The final configuration after T = 0.4 s against RK4 on `vidyn.aba` of the mimic model:
    the error falls by 2^order (within a factor 1.6) when dt halves."""
    vd = vidyn.Model.from_urdf_string(_hand_urdf(), mimic=True) if which == "hand" else _panda()
    rng = np.random.default_rng(7)
    q0 = vd.neutral() + 0.3 * rng.uniform(-1, 1, vd.nq) * (1 if which == "hand" else np.r_[np.ones(7), 0.02])
    v0 = 0.5 * rng.standard_normal(vd.nv) * (1 if which == "hand" else np.r_[np.ones(7), 0.02])
    T = 0.4
    ref = _reference(vd, q0, v0, T)
    errors = []
    for dt in dts:
        vi = vidyn.VariationalIntegrator(vd, dt=dt, scheme=scheme, damping=np.zeros(vd.nv))
        traj = vi.rollout(q0, v0=v0, steps=round(T / dt))
        assert traj.q.shape == (round(T / dt) + 1, vd.nq) and traj.p.shape[1] == vd.nv
        errors.append(np.abs(traj.q[-1] - ref).max())
    rate = np.log2(errors[0] / errors[1])
    assert abs(rate - order) < 0.7, (errors, rate)


@pytest.mark.parametrize("scheme", ["trapezoid", "simpson"])
def test_energy_stays_bounded_without_forces(scheme):
    """No damping, springs on every coordinate (conservative), no gravity (the slider would
    fall for ever): the energy of 2000 steps oscillates within O(dt^order) of its start."""
    vd = vidyn.Model.from_urdf_string(_hand_urdf(), mimic=True).with_gravity([0.0, 0.0, 0.0])
    vi = vidyn.VariationalIntegrator(vd, dt=0.01, scheme=scheme, damping=np.zeros(vd.nv), stiffness=np.full(vd.nv, 3.0))
    traj = vi.rollout(vd.neutral() + 0.4, v0=np.full(vd.nv, 0.5), steps=2000)
    E = vi.energy(traj.q, traj.p)
    assert np.ptp(E) < (1e-3 if scheme == "trapezoid" else 1e-6) * abs(E[0]), (np.ptp(E), E[0])
    assert abs(E[-1] - E[0]) < (1e-3 if scheme == "trapezoid" else 1e-6) * abs(E[0])
    # the Legendre transform is the reduced mass matrix's
    q, v = traj.q[5], rng_v(vd)
    np.testing.assert_allclose(vi.momentum(q, v), vidyn.crba(vd, q) @ v, rtol=1e-13, atol=1e-13)


def rng_v(vd):
    return np.random.default_rng(8).standard_normal(vd.nv)


@pytest.mark.parametrize("scheme", ["trapezoid", "simpson", "midpoint"])
def test_linearization_matches_central_differences(scheme):
    """A = ∂(q, p)_{k+1}/∂(q, p)_k and B = ∂(q, p)_{k+1}/∂u_k of the reduced steps against
    central differences of `step` (h = 1e-6, Newton solved to 1e-14 relative: truncation
    ~1e-12, solve noise ~1e-8 relative), within 1e-6 of max(1, |A|)."""
    vd = vidyn.Model.from_urdf_string(_hand_urdf(), mimic=True)
    vi = vidyn.VariationalIntegrator(vd, dt=0.01, scheme=scheme, tolerance=1e-14, damping=np.full(vd.nv, 0.1), stiffness=np.full(vd.nv, 2.0))
    rng = np.random.default_rng(9)
    n = vd.nv
    q, p, u = vd.neutral() + 0.3 * rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    A, B = vi.linearize(q[None].repeat(2, 0), p[None].repeat(2, 0), u[None])
    A, B = A[0], B[0]

    def step(x, uu):
        t = vi.rollout(x[:n], p0=x[n:], u=uu[None])
        return np.concatenate([t.q[1], t.p[1]])

    h, x = 1e-6, np.concatenate([q, p])
    fa = np.stack([(step(x + h * e, u) - step(x - h * e, u)) / (2 * h) for e in np.eye(2 * n)], axis=1)
    fb = np.stack([(step(x, u + h * e) - step(x, u - h * e)) / (2 * h) for e in np.eye(n)], axis=1)
    assert_close(A, fa, 1e-6, scale=np.abs(A).max())
    assert_close(B, fb, 1e-6, scale=np.abs(B).max())


def test_what_the_integrator_refuses_with_mimic_joints():
    vd = vidyn.Model.from_urdf_string(_hand_urdf(), mimic=True)
    with pytest.raises(vidyn.ModelError, match="kinematic joints .*does not support mimic joints"):
        vidyn.VariationalIntegrator(vd, dt=0.01, kinematic=["shoulder"])
    with pytest.raises(vidyn.ModelError, match="body wrenches .*does not support mimic joints"):
        vidyn.VariationalIntegrator(vd, dt=0.01, body_wrenches=np.zeros((vd.nbodies, 6)) + 1.0)
    with pytest.raises(vidyn.ModelError, match="holonomic constraints .*does not support mimic"):
        vidyn.VariationalIntegrator(vd, dt=0.01, constraints=vidyn.point_contact("slider", [0.0, 0.0, 0.0]))
    vi = vidyn.VariationalIntegrator(vd, dt=0.01)
    traj = vi.rollout(vd.neutral(), v0=np.zeros(vd.nv), steps=2)
    with pytest.raises(vidyn.ModelError, match="second-order derivatives does not support mimic"):
        vi.linearize(traj, order=2, lam=np.ones((2, 2 * vd.nv)))
    with pytest.raises(vidyn.InputError, match=r"damping has shape \(4,\), expected \(model.nv,\) = \(3,\)"):
        vidyn.VariationalIntegrator(vd, dt=0.01, damping=np.zeros(4))
    floating = vidyn.Model.from_urdf_string(_hand_urdf(), floating_base=True, mimic=True)
    with pytest.raises(vidyn.InputError, match="joint 'root_joint' is freeflyer: the integrator takes mimic joints on models of revolute and prismatic joints only"):
        vidyn.VariationalIntegrator(floating, dt=0.01)


def test_batch_rollouts_and_linearisations_take_mimic_integrators_and_optim_refuses_them():
    from vidyn import batch, optim

    vd = vidyn.Model.from_urdf_string(_hand_urdf(), mimic=True)
    vi = vidyn.VariationalIntegrator(vd, dt=0.01)
    q0 = vd.neutral() + np.array([[0.1], [0.2], [0.3]])
    rolled = batch.rollout(vi, q0, v0=np.zeros((3, vd.nv)), steps=5)
    single = vi.rollout(q0[1], v0=np.zeros(vd.nv), steps=5)
    np.testing.assert_array_equal(rolled.q[1], single.q)
    np.testing.assert_array_equal(batch.linearize(vi, rolled)[0][1], vi.linearize(single)[0])
    with pytest.raises(vidyn.ModelError, match="vidyn.optim does not support mimic joints"):
        optim.ilqr(vi, vd.neutral(), steps=5)
