"""Step time of the maximal-coordinate VI's contacts with the isotropic friction cone against
the 4-direction pyramid (issue 27, item 1).

    source .venv/bin/activate && python benches/maximal_friction_cone.py

Scenes, each rolled out with `friction_model="pyramid"` and `"cone"` on every contact:
* `box`: a 1 kg cube of edge 0.5 m on its four bottom corners (c_f = 0.3), sliding at 1 m/s
  at 45° to the x-axis until it stops, 600 steps of 1 ms;
* `spheres`: a chain of 8 spheres (r = 0.25 m, 1 kg) joined by spherical joints, one contact
  each (c_f = 0.4), dropped from 0.3 m while moving sideways at 0.5 m/s (Brüdigam et al. 2023
  Fig. 8b), 300 steps of 10 ms.
Best of 5 runs of `MaximalIntegrator.rollout` (GIL released); µs per step and the mean
interior-point iterations per step.
"""

from __future__ import annotations

import numpy as np

import vidyn
from maximal_mujoco import best  # the same timing for every maximal benchmark


def box(model: str) -> tuple[vidyn.MaximalIntegrator, np.ndarray, np.ndarray, int]:
    b = vidyn.ModelBuilder("box")
    b.add_body(None, "root", "freeflyer", mass=1.0, inertia=np.eye(3) * 0.25 / 6)
    vi = vidyn.MaximalIntegrator(b.build(), 0.001)
    for k, (sx, sy) in enumerate([(-1, -1), (1, -1), (-1, 1), (1, 1)]):
        vi.add_contact(f"corner{k}", "root", [0.25 * sx, 0.25 * sy, -0.25], friction=0.3, friction_model=model)
    v0 = np.array([np.sqrt(0.5), np.sqrt(0.5), 0.0, 0.0, 0.0, 0.0])
    return vi, np.array([0.0, 0.0, 0.25, 0.0, 0.0, 0.0, 1.0]), v0, 600


def spheres(model: str, n: int = 8) -> tuple[vidyn.MaximalIntegrator, np.ndarray, np.ndarray, int]:
    r = 0.25
    b = vidyn.ModelBuilder("spheres")
    parent = b.add_body(None, "s0", "freeflyer", mass=1.0, inertia=np.eye(3) * 0.4 * r * r)
    for k in range(1, n):
        placement = np.eye(4)
        placement[0, 3] = 2 * r
        parent = b.add_body(parent, f"s{k}", "spherical", placement, 1.0, [0, 0, 0], np.eye(3) * 0.4 * r * r)
    m = b.build()
    vi = vidyn.MaximalIntegrator(m, 0.01)
    for k in range(n):
        vi.add_contact(f"ground{k}", f"s{k}", [0.0, 0.0, 0.0], radius=r, friction=0.4, friction_model=model)
    q0 = np.zeros(m.nq)
    q0[2], q0[6] = r + 0.3, 1.0
    q0[10::4] = 1.0  # the spherical joints' w
    v0 = np.zeros(m.nv)
    v0[1] = 0.5
    return vi, q0, v0, 300


def main() -> None:
    print("| scene | pyramid µs/step | its/step | cone µs/step | its/step | cone / pyramid |")
    print("|---|---|---|---|---|---|")
    for name, scene in [("box", box), ("spheres", spheres)]:
        row = []
        for model in ("pyramid", "cone"):
            vi, q0, v0, steps = scene(model)
            traj = vi.rollout(q0, v0, steps=steps)
            t = best(lambda: vi.rollout(q0, v0, steps=steps)) / steps * 1e6
            row.append((t, float(np.mean(traj.iterations))))
        (tp, ip), (tc, ic) = row
        print(f"| {name} | {tp:.1f} | {ip:.1f} | {tc:.1f} | {ic:.1f} | {tc / tp:.2f} |")


if __name__ == "__main__":
    main()
