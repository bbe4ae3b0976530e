"""One step and its exact linearisation on a floating base, against MuJoCo's finite-difference
transition derivatives on the same robot (issue 23).

    source .venv/bin/activate && pip install mujoco && python benches/lie_group_mujoco.py

Robots: solo12 and talos (reduced) from example-robot-data, floating base. MuJoCo reads the
same URDF (visual and collision geometry removed: no contacts; the root attached to the world
by a ``floating`` joint, which MuJoCo makes a free joint; a motor on every other joint), and
the script checks that both see the same robot (nq, nv, total mass, and the eigenvalues of the
mass matrix at the neutral configuration, which do not depend on the order of the joints).

Timed, one thread each, over the 100 steps of a falling motion (gravity, no contact, dt =
5 ms, from the neutral configuration with a random joint velocity):

* vidyn: ``VariationalIntegrator.linearize`` of the rollout (``vidyn.batch`` pool of one
  thread), µs per step: exact A (2nv × 2nv) and B (2nv × nv) in tangent coordinates on the
  Lie group; and the same on the Euler-angle chain of ``model.to_single_dof()``;
* MuJoCo: ``mujoco.mjd_transitionFD`` (A 2nv × 2nv, B 2nv × nu) at each state of its own
  rollout, forward and centred differences, µs per call.

The methods differ (an implicit variational step solved by Newton, linearised exactly, vs.
finite differences of MuJoCo's explicit semi-implicit Euler step), so the ratio compares what
a DDP user pays per step for the derivatives of each simulator, not the same arithmetic.
Lowest of 5 runs.
"""

from __future__ import annotations

import argparse
import platform
import time
import xml.etree.ElementTree as ET

import numpy as np

import vidyn
from vidyn import models

DT, STEPS = 0.005, 100


def mujoco_model(name: str):
    """The robot's URDF in MuJoCo: no geometry, a free root, a motor on every hinge/slide."""
    import mujoco

    root = ET.parse(models.example_robot_data_dir() / models.EXAMPLE_ROBOTS[name].urdf).getroot()
    for link in root.findall("link"):
        for tag in ("visual", "collision"):
            for el in link.findall(tag):
                link.remove(el)
    children = {j.find("child").get("link") for j in root.findall("joint")}
    base = next(link.get("name") for link in root.findall("link") if link.get("name") not in children)
    ET.SubElement(root, "link", name="vidyn_world")
    free = ET.SubElement(root, "joint", name="vidyn_free", type="floating")
    ET.SubElement(free, "parent", link="vidyn_world")
    ET.SubElement(free, "child", link=base)
    spec = mujoco.MjSpec.from_string(ET.tostring(root, encoding="unicode"))
    probe = spec.compile()
    for j in range(probe.njnt):
        if probe.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            motor = spec.add_actuator()
            motor.target, motor.trntype = probe.joint(j).name, mujoco.mjtTrn.mjTRN_JOINT
    model = spec.compile()
    model.opt.timestep = DT
    return model


def check_same_robot(name: str, ours: vidyn.Model, theirs) -> None:
    import mujoco

    assert (ours.nq, ours.nv) == (theirs.nq, theirs.nv), (ours.nq, ours.nv, theirs.nq, theirs.nv)
    assert abs(ours.total_mass - float(np.sum(theirs.body_mass))) < 1e-9 * ours.total_mass
    d = mujoco.MjData(theirs)
    mujoco.mj_forward(theirs, d)
    m_theirs = np.zeros((theirs.nv, theirs.nv))
    mujoco.mj_fullM(theirs, d, m_theirs)
    e_ours, e_theirs = np.linalg.eigvalsh(vidyn.crba(ours, ours.neutral())), np.linalg.eigvalsh(m_theirs)
    assert np.allclose(e_ours, e_theirs, rtol=1e-6, atol=1e-9 * e_ours.max()), (name, np.abs(e_ours - e_theirs).max())


def best(f, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def vidyn_linearisation(model: vidyn.Model, v0: np.ndarray) -> tuple[float, float]:
    """µs per step of the rollout and of its linearisation."""
    vi = vidyn.VariationalIntegrator(model, DT)
    q0 = model.neutral()
    traj = vi.rollout(q0, v0, steps=STEPS)
    roll = best(lambda: vi.rollout(q0, v0, steps=STEPS)) / STEPS * 1e6
    lin = best(lambda: vi.linearize(traj)) / STEPS * 1e6
    return roll, lin


def mujoco_linearisation(model, v0: np.ndarray, centred: bool) -> float:
    import mujoco

    d = mujoco.MjData(model)
    nx, nu = 2 * model.nv, model.nu
    a, b = np.zeros((nx, nx)), np.zeros((nx, nu))

    def run() -> None:
        mujoco.mj_resetData(model, d)
        d.qvel[:] = v0
        for _ in range(STEPS):
            mujoco.mjd_transitionFD(model, d, 1e-6, centred, a, b, None, None)
            mujoco.mj_step(model, d)

    step_only = best(lambda: [mujoco.mj_step(model, d) for _ in range(STEPS)])
    return (best(run) - step_only) / STEPS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", default="solo12,talos")
    args = parser.parse_args()
    import mujoco

    vidyn.batch.set_num_threads(1)
    print(f"# {platform.processor() or platform.machine()}, vidyn pool of 1 thread, MuJoCo {mujoco.__version__}, dt = {DT}, {STEPS} steps")
    print("| robot | nv | vidyn step | vidyn A, B (Lie group) | vidyn A, B (Euler chain) | MuJoCo FD forward | MuJoCo FD centred | MuJoCo fwd / vidyn | MuJoCo centred / vidyn |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.robots.split(","):
        ours = models.example_robot(name)
        theirs = mujoco_model(name)
        check_same_robot(name, ours, theirs)
        rng = np.random.default_rng(1)
        v0 = np.zeros(ours.nv)
        v0[6:] = rng.uniform(-0.5, 0.5, ours.nv - 6)
        step, lie = vidyn_linearisation(ours, v0)
        chain, _ = ours.to_single_dof()
        _, euler = vidyn_linearisation(chain, v0)
        fwd, cen = mujoco_linearisation(theirs, v0, False), mujoco_linearisation(theirs, v0, True)
        print(f"| {name} | {ours.nv} | {step:.1f} µs | {lie:.1f} µs | {euler:.1f} µs | {fwd:.1f} µs | {cen:.1f} µs | {fwd / lie:.2f} | {cen / lie:.2f} |")


if __name__ == "__main__":
    main()
