"""Accuracy of the variational integrators in the setting of Fan, Schultz & Murphey (2018),
Fig. 3: a 12-link pendulum simulated for T = 10 s from rest, q⁰ uniform in [−π/12, π/12],
error metric (1/T) ∫₀ᵀ ‖q(t) − q_ref(t)‖ dt.

The paper compares the Simpson VI with Hermite–Simpson collocation against an HS-DC reference
at Δt = 5e-4 s over 100 initial conditions. Here the Simpson VI (order 4), the trapezoidal VI
and the midpoint rule (order 2) are measured against a Galerkin–Lobatto VI with s = 4 (order
8) at Δt_ref = 1.25e-3 s, for one seeded initial condition (runtime). The script bounds the
reference's own error by rerunning it at 2Δt_ref. The paper's comparison itself (the Simpson VI
against Hermite–Simpson, error and wall time, ten draws) is the Rust benchmark
``cargo run --release -p vidyn-benches --bin fan_fig3`` (BENCHMARKS.md). The integral is the trapezoidal rule over
the nodes the two trajectories share. The chain is `vidyn.models.pendulum_chain(12)` (planar:
12 unit rods of 1 kg, all joints about y).

Over 10 s this chain is chaotic: an error grows by orders of magnitude, and every scheme's
error saturates at O(0.1–1) rad once Δt is large (order 2: Δt ≳ 2.5e-3 s; Simpson: Δt ≳ 2e-2
s; the midpoint rule also diverges at Δt = 0.05). The step sizes are therefore
Δt = 2.5e-3 … 1.5625e-4 s (order 2) and 2e-2 … 1.25e-3 s (Simpson), halving each time; the
printed slope is the least-squares fit over the three smallest, with the full fit and the
pairwise orders beside it. The runs take ≈ 15–30 s on a 2-core machine. Saves
examples/out/vi_fan_fig3.png:

    python examples/vi_fan_fig3.py
"""

from __future__ import annotations

import pathlib
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import vidyn as vd  # noqa: E402

OUT = pathlib.Path(__file__).parent / "out"
T = 10.0
LINKS = 12
DT_REF = 1.25e-3
# per scheme: name, s, order, step sizes (each a multiple or an integer fraction of DT_REF)
SCHEMES = {
    "midpoint": ("midpoint", None, 2, [2.5e-3, 1.25e-3, 6.25e-4, 3.125e-4, 1.5625e-4]),
    "trapezoid": ("trapezoid", None, 2, [2.5e-3, 1.25e-3, 6.25e-4, 3.125e-4, 1.5625e-4]),
    "Simpson": ("simpson", None, 4, [2e-2, 1e-2, 5e-3, 2.5e-3, 1.25e-3]),
}


def steps_of(dt: float) -> int:
    n = int(round(T / dt))
    assert abs(n * dt - T) < 1e-9
    return n


def on_common_grid(q: np.ndarray, dt: float, q_ref: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Both trajectories at the nodes they share: the coarser of the two grids."""
    if dt >= DT_REF:
        return q, q_ref[:: int(round(dt / DT_REF))], dt
    return q[:: int(round(DT_REF / dt))], q_ref, DT_REF


def mean_error(q: np.ndarray, dt: float, q_ref: np.ndarray) -> float:
    """(1/T) ∫ ‖q − q_ref‖ dt by the trapezoidal rule over the shared nodes; q (N+1, n) on the
    grid dt, q_ref on the grid DT_REF."""
    a, b, h = on_common_grid(q, dt, q_ref)
    d = np.linalg.norm(a - b, axis=1)
    return float(h * (d.sum() - 0.5 * (d[0] + d[-1])) / T)


def slope(dts: list[float], errors: list[float]) -> float:
    return float(np.polyfit(np.log(dts), np.log(errors), 1)[0])


def main() -> None:
    start = time.perf_counter()
    model = vd.models.pendulum_chain(LINKS)
    rng = np.random.default_rng(2018)
    q0 = rng.uniform(-np.pi / 12, np.pi / 12, LINKS)
    zero = np.zeros(LINKS)

    q_ref = vd.VariationalIntegrator(model, DT_REF, scheme="lobatto", s=4).rollout(q0, zero, steps=steps_of(DT_REF)).q
    # the reference's own error, bounded by comparing with twice its step
    coarse = vd.VariationalIntegrator(model, 2 * DT_REF, scheme="lobatto", s=4).rollout(q0, zero, steps=steps_of(2 * DT_REF)).q
    ref_error = mean_error(coarse, 2 * DT_REF, q_ref)
    print(f"reference: Lobatto s = 4 (order 8), dt = {DT_REF}; its error is at most (1/T)∫|q(2dt) - q(dt)| = {ref_error:.1e}")

    errors: dict[str, list[float]] = {}
    slopes: dict[str, float] = {}
    for label, (scheme, s, order, dts) in SCHEMES.items():
        errors[label] = []
        for dt in dts:
            vi = vd.VariationalIntegrator(model, dt, scheme=scheme, s=s)
            errors[label].append(mean_error(vi.rollout(q0, zero, steps=steps_of(dt)).q, dt, q_ref))
        # asymptotic slope: least squares over the three smallest steps
        slopes[label] = slope(dts[-3:], errors[label][-3:])
        print()
        print(f"{label} (order {order}): slope {slopes[label]:.2f} over the three smallest dt, {slope(dts, errors[label]):.2f} over all; pairwise " + ", ".join(
            f"{np.log2(errors[label][i] / errors[label][i + 1]):.2f}" for i in range(len(dts) - 1)))
        for dt, e in zip(dts, errors[label]):
            print(f"  dt = {dt:<9g} error = {e:.3e}")

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for label, (_, _, order, dts) in SCHEMES.items():
        ax.loglog(dts, errors[label], "o-", label=f"{label} (slope {slopes[label]:.2f}, order {order})")
        guide = errors[label][-1] * (np.array(dts) / dts[-1]) ** order
        ax.loglog(dts, guide, ":", color="gray", lw=1)
    ax.axhline(ref_error, color="k", lw=0.8, ls="--", label="reference error bound")
    ax.set_xlabel("Δt [s]")
    ax.set_ylabel("(1/T) ∫ ‖q − q_ref‖ dt [rad]")
    ax.set_title(f"{LINKS}-link pendulum, T = {T:g} s (Fan et al. 2018, Fig. 3 setting)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = OUT / "vi_fan_fig3.png"
    fig.savefig(path, dpi=120)
    print(f"\nsaved {path} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
