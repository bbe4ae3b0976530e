"""Step time of the maximal-coordinate VI against MuJoCo on the same chains (issue 7).

    source .venv/bin/activate && python benches/maximal_mujoco.py [--sizes 4,8,16,32,64,128,256]

Both simulate the 3-D chain of `vidyn_maximal::models::cylinder_chain(n, false)` (1 kg, 1 m
solid cylinders of radius 0.05, revolute joints about alternating y / x, 0.3 rad per joint at
rest, gravity, no contact, no control) for 200 steps of 0.01 s, each through its own C/Rust
loop: `vidyn.MaximalIntegrator.rollout` (GIL released, includes the per-knot energies and
minimal coordinates it returns) and `mujoco.rollout.rollout` (one thread) with the default
"Euler" integrator (semi-implicit) and with "RK4". Best of 5 runs, µs per step. The methods
differ (implicit first-order VI with Newton vs explicit integrators), so the ratio is the cost
of simulating the same mechanism, not of the same discretisation.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import vidyn

DT, STEPS, R = 0.01, 200, 0.05


def cylinder_chain(n: int) -> vidyn.Model:
    b = vidyn.ModelBuilder("cylinder_chain")
    it = (3 * R * R + 1.0) / 12
    parent = None
    for k in range(n):
        axis = [0.0, 1.0, 0.0] if k % 2 == 0 else [1.0, 0.0, 0.0]
        placement = np.eye(4)
        if k > 0:
            placement[2, 3] = -1.0
        parent = b.add_body(parent, f"joint{k + 1}", "revolute", placement, 1.0, [0, 0, -0.5], np.diag([it, it, 0.5 * R * R]), axis)
    return b.build()


def chain_mjcf(n: int, integrator: str) -> str:
    it = (3 * R * R + 1.0) / 12
    body = ""
    for k in range(n, 0, -1):
        axis = "0 1 0" if k % 2 == 1 else "1 0 0"
        pos = "0 0 0" if k == 1 else "0 0 -1"
        body = (
            f'<body name="link{k}" pos="{pos}"><joint name="joint{k}" type="hinge" axis="{axis}"/>'
            f'<inertial pos="0 0 -0.5" mass="1" diaginertia="{it!r} {it!r} {0.5 * R * R!r}"/>{body}</body>'
        )
    return (
        f'<mujoco model="chain{n}"><option timestep="{DT}" integrator="{integrator}"><flag contact="disable"/></option>'
        f"<worldbody>{body}</worldbody></mujoco>"
    )


def best(f, runs: int = 5) -> float:
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return min(t)


def main() -> None:
    import mujoco
    from mujoco import rollout as mj_rollout

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,8,16,32,64,128,256")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; mujoco {mujoco.__version__}; vidyn {vidyn.__version__}")
    print("\n| links | maximal VI (µs/step) | MuJoCo Euler (µs/step) | ratio | MuJoCo RK4 (µs/step) | ratio | |q_VI − q_RK4| at 2 s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sizes.split(",")):
        vi = vidyn.MaximalIntegrator(cylinder_chain(n), DT)
        q0 = np.full(n, 0.3)
        t_vi = best(lambda: vi.rollout(q0, steps=STEPS)) / STEPS
        traj = vi.rollout(q0, steps=STEPS)
        row = [f"{n}", f"{t_vi * 1e6:.1f}"]
        for integrator in ("Euler", "RK4"):
            m = mujoco.MjModel.from_xml_string(chain_mjcf(n, integrator))
            d = mujoco.MjData(m)
            d.qpos[:] = q0
            state = np.zeros((1, mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)))
            mujoco.mj_getState(m, d, state[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
            ctrl = np.zeros((1, STEPS, m.nu))
            t_mj = best(lambda: mj_rollout.rollout(m, d, state, ctrl, nstep=STEPS)) / STEPS
            row += [f"{t_mj * 1e6:.1f}", f"{t_vi / t_mj:.1f}"]
            if integrator == "RK4":
                qs, _ = mj_rollout.rollout(m, d, state, ctrl, nstep=STEPS)
                q_mj = qs[0, -1, 1 : 1 + n]  # state = [time, qpos, qvel, ...]
                row.append(f"{np.abs(traj.q[-1] - q_mj).max():.1e}")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
