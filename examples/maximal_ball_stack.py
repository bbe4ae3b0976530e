"""Ball stacks (issue 27): contacts between bodies in the maximal-coordinate integrator.

1 kg balls of radius 25 cm, each with a ground contact and a sphere–sphere contact with every
other ball (``add_body_contact``), friction 0.8 on the 4-direction pyramid:

* a **column** of three balls released 1 mm apart settles on itself;
* a **pyramid**: three balls touching in a triangle on the ground and a fourth dropped from
  20 cm into the pocket between them; it must come to rest on all three, near the apex of the
  regular tetrahedron of touching balls, 2R·√(2/3) above the bottom layer's centres (the
  impact pushes the bottom layer apart by a fraction of a millimetre).

Checks printed: the smallest ball–ball and ball–ground gaps (≥ −1e-9 m: the interior point's
gap), the rest heights against the geometry, and the final speeds.

(A ball dropped on the *top* of such a pyramid rolls off it, as it should: the apex is an
unstable equilibrium.)

Run: ``python examples/maximal_ball_stack.py``.
"""

from __future__ import annotations

import numpy as np

import vidyn

R, MASS, FRICTION, DT = 0.25, 1.0, 0.8, 0.005


def stack(centres: list[list[float]], steps: int) -> tuple[vidyn.MaximalIntegrator, vidyn.MaximalTrajectory]:
    """Free balls at ``centres``, at rest, with every contact; simulated for ``steps``."""
    n = len(centres)
    b = vidyn.ModelBuilder("balls")
    for k in range(n):
        b.add_body(None, f"ball{k}", "freeflyer", mass=MASS, inertia=np.eye(3) * 0.4 * MASS * R * R)
    vi = vidyn.MaximalIntegrator(b.build(), DT)
    for k in range(n):
        vi.add_contact(f"ground{k}", k, [0.0, 0.0, 0.0], radius=R, friction=FRICTION)
    for i in range(n):
        for j in range(i + 1, n):
            vi.add_body_contact(f"ball{i}-ball{j}", i, ("sphere", [R]), j, ("sphere", [R]), friction=FRICTION)
    q0 = np.concatenate([np.concatenate([c, [0, 0, 0, 1.0]]) for c in centres])
    return vi, vi.rollout(q0, np.zeros(6 * n), steps=steps)


def report(name: str, vi: vidyn.MaximalIntegrator, traj: vidyn.MaximalTrajectory, expected: np.ndarray, spread: float) -> None:
    """Prints the checks; ``spread``: how far (m) the balls may have moved sideways (the rest
    heights are then checked to that too)."""
    gaps = vi.body_contact_distances(traj)[1:]  # after the start (touching balls start at 0)
    ground = traj.positions[:, :, 2].min() - R
    z = traj.positions[-1, :, 2]
    speed = np.abs(traj.linear_velocities[-1]).max()
    drift = np.abs(traj.positions[-1, :, :2] - traj.positions[0, :, :2]).max()
    print(f"{name}: {vi.nbody_contacts} ball–ball contacts, graph fill {vi.fill} blocks, ≤ {traj.iterations.max()} iterations per step")
    print(f"  smallest ball–ball distance {gaps.min():.2e} m, smallest ground gap {ground:.2e} m")
    touching = np.sum(gaps[-1] < 1e-6)
    print(f"  rest heights {np.round(z, 6)} m, expected {np.round(expected, 6)}; horizontal drift {drift:.1e} m; final speed {speed:.1e} m/s; {touching} pairs touching at the end")
    assert gaps.min() > -1e-9 and ground > -1e-9, "penetration"
    assert drift <= spread and np.abs(z - expected).max() <= max(spread, 1e-6) and speed < 1e-6, "not at rest where expected"


def main() -> None:
    vi, traj = stack([[0.0, 0.0, R + (2 * R + 1e-3) * k] for k in range(3)], steps=200)
    report("column", vi, traj, R + 2 * R * np.arange(3), spread=1e-12)

    apex = R + 2 * R * np.sqrt(2 / 3)
    centres = [[2 * R / np.sqrt(3) * np.cos(a), 2 * R / np.sqrt(3) * np.sin(a), R] for a in (0, 2 * np.pi / 3, 4 * np.pi / 3)]
    vi, traj = stack(centres + [[0.0, 0.0, apex + 0.2]], steps=400)
    # the impact's normal impulses exceed the ground friction's for a step or two: the bottom
    # balls slide apart by ~0.6 mm and the top one sits ~0.2 mm lower; it must rest on all three
    report("pyramid", vi, traj, np.array([R, R, R, apex]), spread=1e-3)
    assert np.all(vi.body_contact_distances(traj)[-1, [2, 4, 5]] < 1e-6), "the top ball must rest on all three"
    print("checks passed")


if __name__ == "__main__":
    main()
