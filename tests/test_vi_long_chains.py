"""Newton's method at scale (issue 23, deliverable 4): 3-D chains of 256 and 1024 links.

The mass matrix of an n-link chain spans about n⁴ in scale, and a step from rest has no
momentum to measure its residual against, so a fixed absolute tolerance and a constant-velocity
starting point both fail on long chains. The integrator now judges the residual against its
natural size (momenta, control and gravity impulses), accepts the round-off floor Newton levels
off at, and starts from the Taylor predictor (gravity included) with fallbacks. Checked here:

* chains swinging by up to 0.05 rad about rest (``q0 = 0.05 sin k``) roll out and linearise
  for the trapezoid and Simpson schemes at ``dt`` = 1e-2 and 1e-3, and the first step from
  rest takes a handful of Newton iterations;
* the steps found are those of the motion: the coarse rollout agrees with a ten-times finer
  one to the scheme's accuracy, and the linearisation agrees with central differences;
* where the discrete equations lose their solution (a chain curled into a loop, trapezoid at
  ``dt = 1e-2``), the error names the step and the floor Newton reached, and its advice (a
  smaller time step) is true.
"""

from __future__ import annotations

import numpy as np
import pytest

import vidyn as vd
from vidyn import models

SCHEMES = ["trapezoid", "simpson"]
STEPS = 5  # 0.05 s at dt = 1e-2: enough for the links to swing by about half their amplitude


def swinging(n: int) -> np.ndarray:
    """Every joint displaced by up to 0.05 rad (a spatial chain hanging close to rest)."""
    return 0.05 * np.sin(np.arange(n))


@pytest.fixture(scope="module", params=[256, 1024])
def chain(request) -> vd.Model:
    return models.pendulum_chain(request.param, planar=False)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("dt", [1e-2, 1e-3])
def test_long_chains_roll_out_and_linearise(chain, scheme, dt):
    vi = vd.VariationalIntegrator(chain, dt=dt, scheme=scheme)
    traj = vi.rollout(swinging(chain.nv), steps=STEPS)
    # measured: 2 iterations at dt = 1e-3; 4 (256 links) and 7 (1024 links) at dt = 1e-2,
    # where the gravity impulse is a hundred times larger relative to the step's momenta
    assert traj.iterations[0] <= (3 if dt == 1e-3 else 8), traj.iterations
    a, b = vi.linearize(traj)
    n = chain.nv
    assert a.shape == (STEPS, 2 * n, 2 * n) and b.shape == (STEPS, 2 * n, n)
    assert np.isfinite(a).all() and np.isfinite(b).all()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_coarse_steps_follow_the_motion(chain, scheme):
    """dt = 1e-2 against dt = 1e-3 over the same 0.05 s. Measured differences: trapezoid
    2.4e-3 (256 links) and 3.9e-3 (1024) for a motion of 2.3e-2 (its second-order error);
    Simpson 2.2e-5 and 1.2e-4. The bounds (a quarter and a fiftieth of the motion) hold for a
    step on the motion's branch and fail for one that jumped off it, which moves by O(1)."""
    q0 = swinging(chain.nv)
    coarse = vd.VariationalIntegrator(chain, dt=1e-2, scheme=scheme).rollout(q0, steps=STEPS)
    fine = vd.VariationalIntegrator(chain, dt=1e-3, scheme=scheme).rollout(q0, steps=10 * STEPS)
    motion = np.abs(fine.q[-1] - q0).max()
    assert motion > 0.01
    share = 0.25 if scheme == "trapezoid" else 0.02
    assert np.abs(coarse.q[-1] - fine.q[-1]).max() < share * motion


# (direction, step h, bound relative to |exact|) for the central differences below. The DEL
# Jacobian of a 256-link chain at dt = 1e-2 has condition ~1e8 (singular values 7 … 1.2e9), so
# each perturbed step is solved only to ~1e-12 of the momenta and that error, divided by h,
# is the floor of the differences; truncation grows as h². Measured best errors (and the h
# giving them): q 3e-8 (1e-5), p 6e-6 (1e-3), u 9e-6 (1e-1). Each bound is 10-30x the
# measurement; a wrong column or sign is O(1).
DIRECTIONS = [("q", 1e-5, 1e-6), ("p", 1e-3, 1e-4), ("u", 1e-1, 1e-4)]


@pytest.mark.parametrize(("part", "h", "rtol"), DIRECTIONS)
def test_long_chain_linearisation_matches_central_differences(part, h, rtol):
    """A·d (d in q or in p) and B·e on a 256-link chain against central differences of one
    step, in random directions."""
    n = 256
    vi = vd.VariationalIntegrator(models.pendulum_chain(n, planar=False), dt=1e-2, scheme="simpson")
    traj = vi.rollout(swinging(n), steps=3)
    x, u = np.concatenate([traj.q[2], traj.p[2]]), np.zeros(n)
    a, b = vi.linearize(traj.q[2:4], traj.p[2:4], u[None])
    d = np.random.default_rng(7).standard_normal(n)

    def step(dx, du):
        qn, pn = vi.step(x[:n] + dx[:n], x[n:] + dx[n:], u + du)
        return np.concatenate([qn, pn])

    if part == "u":
        exact, plus, minus = b[0] @ d, step(np.zeros(2 * n), h * d), step(np.zeros(2 * n), -h * d)
    else:
        dx = np.zeros(2 * n)
        offset = 0 if part == "q" else n
        dx[offset : offset + n] = d
        exact, plus, minus = a[0] @ dx, step(h * dx, np.zeros(n)), step(-h * dx, np.zeros(n))
    error = np.abs((plus - minus) / (2 * h) - exact).max() / np.abs(exact).max()
    assert error <= rtol, error


def test_a_step_without_a_solution_says_so_truly():
    """q0 = 0.05 on every joint curls the 3-D chain into a loop. The trapezoid equations at
    dt = 1e-2 lose their solution at step 8 (Newton fails there even from a 1e-5-accurate
    reference, and a Newton homotopy from the predictor meets a fold): the error names the
    step, reports the floor Newton levelled off at, and advises a smaller step, which works;
    Simpson, more accurate, solves the same steps at dt = 1e-2."""
    n = 256
    chain = models.pendulum_chain(n, planar=False)
    q0 = np.full(n, 0.05)
    with pytest.raises(vd.ConvergenceError, match=r"at step 8: .*levelled off at a residual of .* times the round-off floor.*try a smaller time step"):
        vd.VariationalIntegrator(chain, dt=1e-2, scheme="trapezoid").rollout(q0, steps=10)
    vd.VariationalIntegrator(chain, dt=1e-3, scheme="trapezoid").rollout(q0, steps=100)
    vd.VariationalIntegrator(chain, dt=1e-2, scheme="simpson").rollout(q0, steps=10)
