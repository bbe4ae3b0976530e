"""Pinocchio's C++ ``ComputeRNEASecondOrderDerivatives`` as the oracle of ``rnea_second_order``.

Pinocchio's Python API has no binding of the second-order derivatives, so a small C++ program
(``benches/peer/pinocchio_second_order.cpp``, built once per session by
``benches/peer/build_second_order.sh`` against the ``pin`` wheel and cached under
``target/peer/`` keyed by a hash of its source and build script) reads the Pinocchio model
(built from the URDF by ``pin.buildModelFromUrdf`` with or without a free-flyer root and
serialised with ``saveToBinary``) and states in Pinocchio's layout, and writes the four tensors.
The module is skipped, with the reason, when Pinocchio, example-robot-data, a C++ compiler or
the headers are missing.

Index conventions (checked here, not assumed): Pinocchio's tensors are indexed exactly like
vidyn's, ``T(i, j, k) = d/dx_k (d tau_i / dy_j)``:

* ``d2tau_dqdq``: inner q_j, outer q_k, the outer right-perturbation applied first — the
  same convention as vidyn on spherical and free-flyer joints, whose same-joint blocks are
  not symmetric (the comparison with j, k swapped fails at O(1) on every floating base);
* ``dtau_dqdv(i, j, k) = d/dv_k (d tau_i / dq_j)``: j indexes q, k indexes v, like vidyn's
  ``d2tau_dqdv`` (the header's prose, "v along the columns, q along the pages", does not
  match what the code stores, ``dtau_dqdv_(ip, kr, jq) = -p1`` as Algorithm 1's line 44);
* ``dtau_dadq(i, j, k) = dM_ij / dq_k``.

Random trees with every joint kind (spherical and planar included), built identically in
both libraries (``strategies.to_pinocchio``), are compared as well.

So the only mapping is the permutation of velocity indices between the two models' joint
orders (``pin_layout.ConfigurationMap``), applied to all three axes.  Agreement is required to
``ORACLE_RTOL`` relative to max(1, |T|_inf) (same reasoning as the first-order oracle: both
libraries run the same recursion in double precision, in different orders).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vidyn
from strategies import model_specs, states, to_pinocchio
from tolerances import ORACLE_RTOL, relative_error

pin = pytest.importorskip("pinocchio")
from test_pinocchio_oracle import ROBOTS, load_pair, nonphysical_bodies  # noqa: E402  (skips without example-robot-data)
from pin_layout import ConfigurationMap  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "benches" / "peer"
SOURCES = (PEER / "pinocchio_second_order.cpp", PEER / "build_second_order.sh")
N_STATES = 2
NAMES = ("d2tau_dq2", "d2tau_dv2", "d2tau_dqdv", "dM_dq")
MAGIC = b"PINSO001"

#: worst relative error per (robot, base) and tensor, filled by the tests (printed with -s)
RESULTS: dict[tuple[str, str], dict[str, float]] = {}


def _binary_path() -> Path:
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES)).hexdigest()[:16]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "peer" / f"pinocchio_second_order-{digest}"


@pytest.fixture(scope="session")
def pin_second_order() -> Path:
    """Path of the oracle binary, built on first use (about a minute) and cached by hash."""
    exe = _binary_path()
    if exe.exists():
        return exe
    env = dict(os.environ, PYTHON=sys.executable)
    try:
        r = subprocess.run(["bash", str(PEER / "build_second_order.sh"), str(exe)], capture_output=True, text=True, env=env, timeout=1200)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot build the Pinocchio C++ oracle: {exc}")
    if r.returncode != 0 or not exe.exists():
        tail = (r.stderr or r.stdout).strip().splitlines()[-12:]
        pytest.skip("cannot build the Pinocchio C++ oracle (g++ and the pin wheel's headers are needed): " + " | ".join(tail))
    return exe


def pin_tensors(exe: Path, pm, states_pin, tmp_path: Path):
    """[(tau, (4, nv, nv, nv) tensors)] of Pinocchio for states [(q, v, a)] in its layout."""
    model_file = tmp_path / "model.bin"
    pm.saveToBinary(str(model_file))
    lines = [str(len(states_pin))]
    for q, v, a in states_pin:
        lines.append(" ".join("%.17g" % x for x in (*q, *v, *a)))
    r = subprocess.run([str(exe), str(model_file)], input=("\n".join(lines) + "\n").encode(), capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    out = r.stdout
    assert out[:8] == MAGIC, out[:8]
    nv, count = (int(x) for x in np.frombuffer(out[8:24], dtype="<u8"))
    assert nv == pm.nv and count == len(states_pin)
    data = np.frombuffer(out[24:], dtype="<f8")
    per_state = nv + 4 * nv**3
    assert data.size == count * per_state
    result = []
    for s in range(count):
        block = data[s * per_state : (s + 1) * per_state]
        result.append((block[:nv], block[nv:].reshape(4, nv, nv, nv)))
    return result


def tensor_to_vidyn(cmap: ConfigurationMap, t: np.ndarray) -> np.ndarray:
    """(nv, nv, nv) tensor in Pinocchio's velocity order → vidyn's (all three axes)."""
    to_pin = np.asarray(cmap.v_perm)  # v_pin[p] = v_vd[v_perm[p]]
    out = np.empty_like(t)
    out[np.ix_(to_pin, to_pin, to_pin)] = t
    return out


PARAMS = [pytest.param(r, fb, id=f"{r}-{'free' if fb else 'fixed'}") for r in sorted(ROBOTS) for fb in (False, True)]


@pytest.mark.parametrize(("robot", "floating_base"), PARAMS)
def test_rnea_second_order_matches_pinocchio_cpp(robot, floating_base, pin_second_order, tmp_path):
    path = ROBOTS[robot]
    try:
        vd, pm = load_pair(path, floating_base)
    except vidyn.UrdfError as exc:
        pm = pin.buildModelFromUrdf(str(path))
        if nonphysical_bodies(pm):
            pytest.skip(f"non-physical inertia, rejected by vidyn as documented: {exc}")
        raise
    cmap = ConfigurationMap(vd, pm)
    rng = np.random.default_rng(7)
    states = []
    for s in range(N_STATES + 1):  # N_STATES random configurations, then the neutral one
        q = vd.neutral() if s == N_STATES else vd.random_configuration(rng)
        states.append((q, rng.standard_normal(vd.nv), rng.standard_normal(vd.nv)))
    theirs = pin_tensors(pin_second_order, pm, [(cmap.q_to_pin(q), cmap.v_to_pin(v), cmap.v_to_pin(a)) for q, v, a in states], tmp_path)
    worst = {name: 0.0 for name in ("tau", *NAMES)}
    for (q, v, a), (tau_pin, tensors) in zip(states, theirs):
        # the state reached Pinocchio as intended
        worst["tau"] = max(worst["tau"], relative_error(vidyn.rnea(vd, q, v, a), cmap.v_to_vidyn(tau_pin)))
        ours = vidyn.rnea_second_order(vd, q, v, a)
        for name, mine, t in zip(NAMES, ours, tensors):
            worst[name] = max(worst[name], relative_error(mine, tensor_to_vidyn(cmap, t)))
    RESULTS[(robot, "free" if floating_base else "fixed")] = {"nv": vd.nv, **worst}
    print(f"\n{robot} ({'free' if floating_base else 'fixed'}, nv={vd.nv}): " + ", ".join(f"{k} {e:.1e}" for k, e in worst.items()))
    for name, err in worst.items():
        assert err <= ORACLE_RTOL, f"{robot}: {name} relative error {err:.2e} > {ORACLE_RTOL:.0e}"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_trees_match_pinocchio_cpp(pin_second_order, tmp_path_factory, data):
    """Every joint kind (spherical and planar joints appear in no URDF), trees built
    identically in both libraries."""
    spec = data.draw(model_specs(max_bodies=10), label="spec")
    vd, pm = spec.build(), to_pinocchio(spec)
    cmap = ConfigurationMap(vd, pm)
    s = data.draw(states(vd), label="state")
    (tau_pin, tensors), = pin_tensors(pin_second_order, pm, [(cmap.q_to_pin(s.q), cmap.v_to_pin(s.v), cmap.v_to_pin(s.a))], tmp_path_factory.mktemp("tree"))
    assert relative_error(vidyn.rnea(vd, s.q, s.v, s.a), cmap.v_to_vidyn(tau_pin)) <= ORACLE_RTOL, "tau"
    for name, mine, t in zip(NAMES, vidyn.rnea_second_order(vd, s.q, s.v, s.a), tensors):
        err = relative_error(mine, tensor_to_vidyn(cmap, t))
        assert err <= ORACLE_RTOL, f"{spec.name}: {name} relative error {err:.2e}"


def test_oracle_coverage():
    """≥ 20 robots incl. talos_full_v2 and a free-flying quadruped (all run with both bases)."""
    robots = {r for r, _ in (p.values for p in PARAMS)}
    assert len(robots) >= 20, sorted(robots)
    assert "talos_data/talos_full_v2" in robots
    assert {"solo/solo12", "anymal_c_simple/anymal", "go1/go1", "a1/a1", "hyq/hyq_no_sensors"} & robots
