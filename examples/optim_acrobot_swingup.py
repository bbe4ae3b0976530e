"""Acrobot swing-up by iLQR: only the elbow is actuated (``actuated=[1]``).

models.acrobot(): two 1 kg, 1 m rods hanging at q = 0; the goal is both links upright,
q = (π, 0), at rest. Cost on y = (q, v): Σ dt·[½|y − y*|²_W + ½ r u²] + ½|y_N − y*|²_WN,
W = diag(1, 1, .1, .1), r = 0.1, WN = 1e3·I; trapezoidal VI, dt = 0.02 s, T = 4 s.
Then the iLQR feedback gains K_k stabilise the swing-up from a perturbed start (closed loop)
where the open-loop controls miss the goal. Saves examples/out/optim_acrobot_swingup.png;
``--animate`` also saves the swing-up's motion, examples/out/optim_acrobot_swingup.gif (and
with meshcat an interactive page, .html).

    python examples/optim_acrobot_swingup.py [--animate]
"""

from __future__ import annotations

import argparse
import pathlib

import numpy as np

import vidyn as vd
from vidyn import optim

OUT = pathlib.Path(__file__).parent / "out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--animate", action="store_true", help="save the swing-up to examples/out/optim_acrobot_swingup.gif (and .html)")
    args = parser.parse_args()
    dt, T = 0.02, 4.0
    N = int(round(T / dt))
    vi = vd.VariationalIntegrator(vd.models.acrobot(), dt=dt)
    r = optim.ilqr(
        vi, [0.0, 0.0], U_init=np.zeros((N, 1)), actuated=[1], Q=dt * np.array([1.0, 1.0, 0.1, 0.1]), R=dt * 0.1,
        QN=1e3, x_ref=[np.pi, 0.0, 0.0, 0.0], cost_state="velocity", max_iterations=500, tolerance=1e-9,
    )
    again = vi.rollout([0.0, 0.0], [0.0, 0.0], r.U)
    print(f"acrobot: {r.status} after {r.iterations} iterations in {r.wall_time:.2f} s, cost {r.cost:.4f}, "
          f"final q = {np.round(r.q[-1], 4)}, max|u| = {np.abs(r.U).max():.1f} N·m, "
          f"re-simulation defect {np.abs(again.q - r.q).max():.1e}")
    # feedback from the last backward pass (time-varying LQR on the Gauss–Newton model)
    q0 = np.array([0.02, -0.02])
    cl = optim.closed_loop_rollout(vi, q0, p0=[0.0, 0.0], x_ref=np.hstack([r.q, r.p]), K=-r.K, u_ref=r.u, actuated=[1])
    ol = vi.rollout(q0, p0=[0.0, 0.0], u=r.U)
    print(f"perturbed start q0 = {q0}: final error open loop {np.abs(ol.q[-1] - r.q[-1]).max():.3f} rad, "
          f"closed loop {np.abs(cl.q[-1] - r.q[-1]).max():.4f} rad")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    t = np.arange(N + 1) * dt
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ax[0].plot(t, r.q[:, 0], label="shoulder q₁")
    ax[0].plot(t, r.q[:, 1], label="elbow q₂")
    ax[0].plot(t, ol.q[:, 0], "--", label="q₁ open loop, perturbed")
    ax[0].plot(t, cl.q[:, 0], ":", label="q₁ closed loop, perturbed")
    ax[0].set(title="joint angles (rad)", xlabel="t (s)")
    ax[0].legend()
    ax[1].step(t[:-1], r.U[:, 1], where="post")
    ax[1].set(title="elbow torque (N·m)", xlabel="t (s)")
    ax[2].semilogy(r.log["gradient_norm"], label="‖∂J/∂u‖")
    ax[2].semilogy(r.log["expected_reduction"], label="expected decrease")
    ax[2].set(title="convergence", xlabel="iteration")
    ax[2].legend()
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "optim_acrobot_swingup.png", dpi=110)
    print(f"saved {OUT / 'optim_acrobot_swingup.png'}")
    if args.animate:
        animate(vi.model, r.q, dt)


def animate(model: vd.Model, q: np.ndarray, dt: float) -> None:
    """The swing-up as a GIF (and, with meshcat, an interactive page) in examples/out/."""
    from vidyn import viz

    gif = viz.animate(model, q, dt, OUT / "optim_acrobot_swingup.gif", trace=["tip"], title="acrobot swing-up, elbow torque only (iLQR on the VI)")
    print(f"saved {gif}")
    try:
        viz.meshcat_html(model, q, dt, OUT / "optim_acrobot_swingup.html")
        print(f"saved {OUT / 'optim_acrobot_swingup.html'}")
    except ImportError as e:
        print(f"no interactive page: {e}")


if __name__ == "__main__":
    main()
