"""A chain of spheres falling on itself (issue 27): contacts between bodies in the
maximal-coordinate integrator.

Eight 0.5 kg spheres (radius 10 cm) linked by ball joints through their centres hang from the
first one, slightly tilted, and are dropped onto the ground from 5 cm: the column buckles and
folds, and the spheres land on each other. Every sphere has a ground contact and every pair of
spheres two or more links apart a sphere–sphere contact (``add_body_contact``; neighbours
touch at their joint by construction); friction 0.3 on the 4-direction pyramid.

Checks printed: no sphere in the ground, no two spheres overlapping beyond the interior
point's gap (both ≥ −1e-9 m), the joints closed to the solver's tolerance, and how many
sphere pairs came into contact.

Run: ``python examples/maximal_chain_self_contact.py``.
"""

from __future__ import annotations

import numpy as np

import vidyn

N, R, MASS, FRICTION, DT, STEPS = 8, 0.1, 0.5, 0.3, 0.005, 400
# Newton tolerance: at the default 1e-12 the interior point stalls at a residual of 1.8e-10
# (target 1e-10) on step 137, where three layers of spheres press on each other (statically
# indeterminate contacts, as crate::friction_cone describes for boxes); 1e-11 converges
TOL = 1e-11


def chain() -> vidyn.Model:
    """Spheres hanging along −z: sphere ``k`` is centred on its ball joint, 2R below sphere
    ``k − 1``'s centre; the first is a free flyer."""
    b = vidyn.ModelBuilder("sphere_chain")
    inertia = np.eye(3) * 0.4 * MASS * R * R
    below = np.eye(4)
    below[2, 3] = -2 * R
    parent = b.add_body(None, "s0", "freeflyer", mass=MASS, inertia=inertia)
    for k in range(1, N):
        parent = b.add_body(parent, f"s{k}", "spherical", below, mass=MASS, inertia=inertia)
    return b.build()


def main() -> None:
    vi = vidyn.MaximalIntegrator(chain(), DT, tolerance=TOL)
    for k in range(N):
        vi.add_contact(f"ground{k}", k, [0.0, 0.0, 0.0], radius=R, friction=FRICTION)
    pairs = [(i, j) for i in range(N) for j in range(i + 2, N)]
    for i, j in pairs:
        vi.add_body_contact(f"s{i}-s{j}", i, ("sphere", [R]), j, ("sphere", [R]), friction=FRICTION)
    print(f"{N} spheres, {len(pairs)} sphere–sphere contacts, {N} ground contacts; graph fill {vi.fill} blocks")

    # the top sphere 5 cm above the column's height, tilted 0.15 rad, drifting sideways
    tilt = 0.15
    q0 = np.concatenate([[0.0, 0.0, R + 2 * R * (N - 1) + 0.05], [np.sin(tilt / 2), 0.0, 0.0, np.cos(tilt / 2)], np.tile([0.0, 0.0, 0.0, 1.0], N - 1)])
    v0 = np.zeros(6 + 3 * (N - 1))
    v0[1] = 0.3
    traj = vi.rollout(q0, v0, steps=STEPS)

    ground = traj.positions[:, :, 2].min() - R
    gaps = vi.body_contact_distances(traj)
    touched = [pairs[c] for c in range(len(pairs)) if gaps[:, c].min() < 1e-3]
    heights = traj.positions[-1, :, 2]
    print(f"smallest ground gap {ground:.2e} m, smallest sphere–sphere distance {gaps.min():.2e} m")
    print(f"largest joint violation {traj.constraint_violation.max():.1e} m, Newton/IP iterations per step ≤ {traj.iterations.max()}")
    print(f"sphere pairs that touched: {len(touched)} {touched}")
    print(f"final heights of the centres (m): {np.round(heights, 3)}  (one layer on the ground: {R})")
    assert ground > -1e-9 and gaps.min() > -1e-9, "penetration"
    assert traj.constraint_violation.max() < 1e-9
    assert touched, "the chain must fall on itself"
    print("checks passed")


if __name__ == "__main__":
    main()
