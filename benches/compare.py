#!/usr/bin/env python3
"""vidyn vs Pinocchio C++: same robots, same inputs, same machine, same run; ratios.

    python3 benches/compare.py                 # everything; rewrites the table in BENCHMARKS.md
    python3 benches/compare.py --robots ur5,chain50 --algos rnea,aba --no-write
    python3 benches/compare.py --suite derivatives --rev HEAD --no-native   # first/second-order derivatives

Steps:
 1. Builds `vidyn_timings` (cargo, portable release build, and a `-C target-cpu=native
    -C target-feature=+prefer-256-bit` build in a separate target directory) and the
    Pinocchio peer (benches/peer/build.sh: against the `pin` wheel's shared library, and
    header-only with -march=native).
 2. For every robot, builds the Pinocchio model with pinocchio's Python API exactly as vidyn
    builds it (same URDF, fixed base or free-flyer root), saves it for the C++ peer, and asks
    `vidyn_timings --describe` for vidyn's joints. Coordinates are matched joint by joint by
    name (URDF `continuous` joints: (cos, sin) in Pinocchio, the angle in vidyn).
 3. Draws N seeded states (q: pin.randomConfiguration, free-flyer translation in [-1, 1];
    v, a, tau: standard normal), writes one state file per library, from the same draws.
 4. Checks that both libraries agree on the first few states (RNEA, ABA, CRBA, M^-1; with
    `--suite derivatives`: the RNEA and ABA derivatives, the second-order RNEA tensors and the
    contracted Hessian against the contraction of Pinocchio's tensors; max absolute
    difference), then times each algorithm, alternating the two libraries per algorithm so
    that both see the same machine load.
 5. Prints the table and rewrites the part of BENCHMARKS.md between the marker comments of the
    suite (`base`: FK, RNEA, ABA, CRBA, M^-1; `derivatives`: first- and second-order
    derivatives, with log-log scaling slopes over the chains and binary trees).

The n-link chains are written as URDFs (same geometry as vidyn_rbd::builders::pendulum_chain
with planar = false), the binary trees likewise (vidyn_rbd::builders::binary_tree), and loaded
by both libraries.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"
BEGIN_MARK = "<!-- BEGIN compare.py output (generated; do not edit by hand) -->"
END_MARK = "<!-- END compare.py output -->"
DERIV_BEGIN_MARK = "<!-- BEGIN compare.py --suite derivatives output (generated; do not edit by hand) -->"
DERIV_END_MARK = "<!-- END compare.py --suite derivatives output -->"
DERIV_HEADING = "## Derivatives"

# Same list as vidyn_benches::ROBOTS (benches/src/lib.rs).
ROBOTS = [
    ("double_pendulum", "double_pendulum_description/urdf/double_pendulum.urdf", "fixed"),
    ("ur5", "ur_description/urdf/ur5_robot.urdf", "fixed"),
    ("panda", "panda_description/urdf/panda.urdf", "fixed"),
    ("solo12", "solo_description/robots/solo12.urdf", "freeflyer"),
    ("talos", "talos_data/robots/talos_reduced.urdf", "freeflyer"),
    ("talos_full", "talos_data/robots/talos_full_v2.urdf", "freeflyer"),
]
CHAIN_SIZES = [5, 10, 20, 50, 100, 200]
NOISE_SPREAD = 1.15  # max/min of a program's per-round medians above which a row is flagged
ALGOS = ["fk", "rnea", "aba", "crba", "minverse"]
ALGO_TITLES = {"fk": "FK (q,v,a)", "rnea": "RNEA", "aba": "ABA", "crba": "CRBA", "minverse": "M⁻¹"}

# --suite derivatives
DERIV_ROBOTS = ["ur5", "panda", "solo12", "talos", "talos_full"]
DERIV_CHAIN_SIZES = [5, 10, 20, 50, 100]
TREE_DEPTHS = [2, 3, 4, 5, 6]
DERIV_ALGOS = ["rnea_d", "aba_d", "rnea_so", "rnea_so_c", "aba_so_c", "aba_so"]
VIDYN_ONLY = {"rnea_so_c", "aba_so_c", "aba_so"}
SECOND_ORDER_FULL = {"rnea_so", "aba_so"}  # O(nv^3) outputs: timed on fewer states (--so-count)
# vidyn-only algorithms whose cost is compared with a first-order one: the reference is timed
# again in the same program run, just before (reported as "<ref>@<algo>"), so that the ratio
# does not depend on the machine load changing between algorithms
PAIRED = {"rnea_so_c": "rnea_d", "aba_so_c": "aba_d"}
ALGO_TITLES.update({
    "rnea_d": "∂RNEA", "aba_d": "∂ABA", "rnea_so": "∂²RNEA", "rnea_so_zero": "∂²RNEA, Pinocchio with setZero",
    "rnea_so_c": "λᵀ∂²RNEA", "aba_so_c": "λᵀ∂²ABA", "aba_so": "∂²ABA",
})
# extra Pinocchio-only timings run in the same program invocation as the algorithm
PIN_EXTRA = {"crba": ["crba_upper"], "rnea_d": ["rnea_d_upper"], "rnea_so": ["rnea_so_zero"]}
# checks emitted by the timing programs (--check), per algorithm
CHECKS = {
    "rnea": ["rnea"], "aba": ["aba"], "crba": ["crba"], "minverse": ["minverse"],
    "rnea_d": ["rnea_d:dtau_dq", "rnea_d:dtau_dv", "rnea_d:dtau_da"],
    "aba_d": ["aba_d:ddq_dq", "aba_d:ddq_dv", "aba_d:ddq_dtau"],
    "rnea_so": ["rnea_so:d2tau_dq2", "rnea_so:d2tau_dv2", "rnea_so:d2tau_dqdv", "rnea_so:dm_dq"],
    "rnea_so_c": ["rnea_so_c:d2tau_dq2", "rnea_so_c:d2tau_dv2", "rnea_so_c:d2tau_dqdv"],
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmeel_prefix() -> Path:
    import cmeel  # installed with the pin wheel

    return Path(cmeel.__path__[0]).parent / "cmeel.prefix"


def robots_dir() -> Path:
    return cmeel_prefix() / "share" / "example-robot-data" / "robots"


def run(cmd: list[str], env: dict | None = None, capture: bool = True) -> str:
    res = subprocess.run(cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE if capture else None)
    if res.returncode != 0:
        raise SystemExit(f"command failed ({res.returncode}): {shlex.join(cmd)}")
    return res.stdout if capture else ""


NATIVE_FLAGS = "-C target-cpu=native -C target-feature=+prefer-256-bit"


def cargo_target_dir() -> Path:
    meta = json.loads(run(["cargo", "metadata", "--format-version", "1", "--no-deps"]))
    return Path(meta["target_directory"])


def build(native: bool, rev: str | None, tmp: Path) -> dict[str, Path]:
    """Builds the timing programs; returns {"lib:variant": executable}.

    Without `rev`, vidyn is built from the working tree. With `rev`, from `git archive rev`
    unpacked in `tmp`, in target directories of its own (other work in progress in the tree
    does not leak into the numbers)."""
    target = cargo_target_dir()
    src = ROOT
    if rev:
        src = tmp / "src"
        src.mkdir()
        log(f"compare.py: git archive {rev} -> {src}")
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, stdout=subprocess.PIPE, check=True).stdout
        # -m: the files get the time of extraction, not of the commit; otherwise cargo would
        # take a binary built earlier in the same target directory from another, newer
        # revision for up to date (the sources look older than it) and time that instead.
        subprocess.run(["tar", "-x", "-m", "-C", str(src)], input=archive, check=True)
    builds = [("portable", target / ("bench-rev" if rev else ""), "")]
    if native:
        # 256-bit vectors where the CPU has 512-bit ones: LLVM's 512-bit code for the 8-lane
        # kernels was 5–15 % slower on ∂RNEA, ∂ABA, M⁻¹ and 24–50 % on the VI's linearisation
        # on an AMD EPYC (Zen 4) (BENCHMARKS.md, session 29); clang's default on such CPUs
        builds.append(("native", target / ("bench-rev-native" if rev else "bench-native"), NATIVE_FLAGS))
    exes = {}
    for variant, tdir, flags in builds:
        env = dict(os.environ)
        if flags:
            env["RUSTFLAGS"] = (env.get("RUSTFLAGS", "") + " " + flags).strip()
        log(f"compare.py: {'RUSTFLAGS=' + shlex.quote(flags) + ' ' if flags else ''}cargo build --release -p vidyn-benches"
            f" --target-dir {tdir}" + (f" (in {src})" if rev else ""))
        cmd = ["cargo", "build", "--release", "-p", "vidyn-benches", "--bin", "vidyn_timings", "--target-dir", str(tdir)]
        res = subprocess.run(cmd, cwd=src, env=env)
        if res.returncode != 0:
            raise SystemExit(f"cargo build failed ({res.returncode}) in {src}")
        exes[f"vidyn:{variant}"] = tdir / "release" / "vidyn_timings"
    log("compare.py: benches/peer/build.sh")
    peer = Path(run(["bash", str(ROOT / "benches" / "peer" / "build.sh"), str(target / "peer")]).strip().splitlines()[-1])
    exes["pinocchio:wheel"] = peer / "pinocchio_timings_wheel"
    if native:
        exes["pinocchio:native"] = peer / "pinocchio_timings_native"
    return exes


def chain_urdf(n: int) -> str:
    """URDF of vidyn_rbd::builders::pendulum_chain(n, planar=false): unit rods (1 kg, 1 m)
    hanging along -z, joint k about y for odd k and about x for even k."""
    inertia = 1.0 / 12.0
    parts = ['<?xml version="1.0"?>', f'<robot name="chain{n}">', '  <link name="base"/>']
    for k in range(1, n + 1):
        parent = "base" if k == 1 else f"link{k - 1}"
        z = 0.0 if k == 1 else -1.0
        axis = "0 1 0" if k % 2 == 1 else "1 0 0"
        parts += [
            f'  <joint name="joint{k}" type="revolute">',
            f'    <parent link="{parent}"/><child link="link{k}"/>',
            f'    <origin xyz="0 0 {z}" rpy="0 0 0"/><axis xyz="{axis}"/>',
            '    <limit lower="-3.14159265358979" upper="3.14159265358979" effort="100" velocity="10"/>',
            "  </joint>",
            f'  <link name="link{k}">',
            '    <inertial><origin xyz="0 0 -0.5" rpy="0 0 0"/><mass value="1"/>',
            f'      <inertia ixx="{inertia!r}" ixy="0" ixz="0" iyy="{inertia!r}" iyz="0" izz="0"/></inertial>',
            "  </link>",
        ]
    parts.append("</robot>")
    return "\n".join(parts) + "\n"


def tree_urdf(depth: int) -> str:
    """URDF of vidyn_rbd::builders::binary_tree(depth): 2^depth - 1 bodies numbered depth-first
    (left subtree first); body k (0-based) is a rod of mass 1 + 0.1 k and length l_k = 1 + 0.05 k
    (centre of mass at (0, 0, -l_k/2), inertia diag(m l^2/12, m l^2/12, 0) about it) on a
    revolute joint `joint{k+1}` about y on even levels (root: level 0) and about x on odd ones;
    the children of body k hang at (+-l_k/4, 0, -l_k), the left one at +."""
    parts = ['<?xml version="1.0"?>', f'<robot name="tree{depth}">', '  <link name="base"/>']
    counter = [0]

    def visit(parent: str, level: int, x: float, z: float) -> None:
        k = counter[0]
        counter[0] += 1
        mass, length = 1.0 + 0.1 * k, 1.0 + 0.05 * k
        inertia = mass * length * length / 12.0
        axis = "0 1 0" if level % 2 == 0 else "1 0 0"
        parts.extend([
            f'  <joint name="joint{k + 1}" type="revolute">',
            f'    <parent link="{parent}"/><child link="link{k + 1}"/>',
            f'    <origin xyz="{x!r} 0 {z!r}" rpy="0 0 0"/><axis xyz="{axis}"/>',
            '    <limit lower="-3.14159265358979" upper="3.14159265358979" effort="100" velocity="10"/>',
            "  </joint>",
            f'  <link name="link{k + 1}">',
            f'    <inertial><origin xyz="0 0 {-length / 2.0!r}" rpy="0 0 0"/><mass value="{mass!r}"/>',
            f'      <inertia ixx="{inertia!r}" ixy="0" ixz="0" iyy="{inertia!r}" iyz="0" izz="0"/></inertial>',
            "  </link>",
        ])
        if level + 1 < depth:
            for side in (1.0, -1.0):
                visit(f"link{k + 1}", level + 1, side * length / 4.0, -length)

    if depth > 0:
        visit("base", 0, 0.0, 0.0)
    parts.append("</robot>")
    return "\n".join(parts) + "\n"


def write_states(path: Path, q: np.ndarray, v: np.ndarray, a: np.ndarray, tau: np.ndarray) -> None:
    count, nq = q.shape
    nv = v.shape[1]
    with open(path, "wb") as f:
        f.write(b"VDYNST01" + struct.pack("<3Q", nq, nv, count))
        for x in (q, v, a, tau):
            f.write(np.ascontiguousarray(x, dtype="<f8").tobytes())


class Mapping:
    """Coordinate correspondence between a Pinocchio model and vidyn's model of the same URDF."""

    def __init__(self, pin, pmodel, desc: dict):
        self.pin_nq, self.pin_nv = pmodel.nq, pmodel.nv
        self.vid_nq, self.vid_nv = desc["nq"], desc["nv"]
        by_name = {pmodel.names[j]: j for j in range(1, pmodel.njoints)}
        if len(desc["joints"]) != pmodel.njoints - 1:
            raise SystemExit(f"vidyn has {len(desc['joints'])} joints, Pinocchio {pmodel.njoints - 1}")
        self.v_perm = np.empty(self.vid_nv, dtype=int)  # vidyn v index -> Pinocchio v index
        self.q_ops = []  # (kind, vidyn idx_q, pin idx_q, nq)
        self.continuous = []
        for j in desc["joints"]:
            pj = by_name.get(j["name"])
            if pj is None:
                raise SystemExit(f"joint {j['name']} of vidyn is not in the Pinocchio model")
            jm = pmodel.joints[pj]
            if jm.nv != j["nv"]:
                raise SystemExit(f"joint {j['name']}: nv {j['nv']} (vidyn) vs {jm.nv} (Pinocchio {jm.shortname()})")
            self.v_perm[j["idx_v"]:j["idx_v"] + j["nv"]] = np.arange(jm.idx_v, jm.idx_v + jm.nv)
            unbounded = "Unbounded" in jm.shortname()
            if unbounded and j["kind"] == "revolute" and jm.nq == 2 and j["nq"] == 1:
                self.q_ops.append(("angle", j["idx_q"], jm.idx_q, 1))
                self.continuous.append(j["name"])
            elif jm.nq == j["nq"]:
                self.q_ops.append(("copy", j["idx_q"], jm.idx_q, jm.nq))
            else:
                raise SystemExit(f"joint {j['name']}: nq {j['nq']} (vidyn {j['kind']}) vs {jm.nq} (Pinocchio {jm.shortname()})")
        self.identity = bool(np.all(self.v_perm == np.arange(self.vid_nv))) and not self.continuous

    def q_to_vidyn(self, q_pin: np.ndarray) -> np.ndarray:
        out = np.empty((q_pin.shape[0], self.vid_nq))
        for kind, iv, ip, n in self.q_ops:
            if kind == "copy":
                out[:, iv:iv + n] = q_pin[:, ip:ip + n]
            else:  # Pinocchio's (cos, sin) -> angle
                out[:, iv] = np.arctan2(q_pin[:, ip + 1], q_pin[:, ip])
        return out

    def tangent_to_vidyn(self, x_pin: np.ndarray) -> np.ndarray:
        return x_pin[..., self.v_perm]

    def matrix_to_vidyn(self, m_pin: np.ndarray) -> np.ndarray:
        return m_pin[np.ix_(self.v_perm, self.v_perm)]

    def tensor_to_vidyn(self, t_pin: np.ndarray) -> np.ndarray:
        return t_pin[np.ix_(self.v_perm, self.v_perm, self.v_perm)]


def draw_states(pin, pmodel, count: int, seed: int):
    """q from pin.randomConfiguration (seeded), v, a, tau standard normal; Pinocchio layout."""
    lower, upper = pmodel.lowerPositionLimit.copy(), pmodel.upperPositionLimit.copy()
    for j in range(1, pmodel.njoints):
        jm = pmodel.joints[j]
        name = jm.shortname()
        if "FreeFlyer" in name:
            lower[jm.idx_q:jm.idx_q + 3], upper[jm.idx_q:jm.idx_q + 3] = -1.0, 1.0
        elif jm.nq == 1 and not (np.isfinite(lower[jm.idx_q]) and np.isfinite(upper[jm.idx_q])):
            lower[jm.idx_q], upper[jm.idx_q] = -math.pi, math.pi
    pin.seed(seed)
    q = np.array([pin.randomConfiguration(pmodel, lower, upper) for _ in range(count)])
    rng = np.random.default_rng(seed)
    v, a, tau = (rng.standard_normal((count, pmodel.nv)) for _ in range(3))
    return q, v, a, tau


def parse_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def check_agreement(exes, urdf, root, model_bin, vid_states, pin_states, mapping, k: int, algos: list[str],
                    lambdas: np.ndarray) -> dict[str, float]:
    """Max |vidyn - Pinocchio| over the first k states, per algorithm (portable/wheel builds),
    and max |Pinocchio| under `<algo>_scale`. Tensors (second order) on the first state only
    when nv >= 50. `rnea_so_c` (vidyn only) is compared with the contraction of Pinocchio's
    tensors with lambda (the state's tau, in vidyn's order), `lambdas[state]`."""
    checked = [a for a in algos if a in CHECKS]
    if not checked:
        return {}
    if "rnea_so_c" in checked and "rnea_so" not in checked:
        checked.append("rnea_so")
    nv = mapping.vid_nv
    k_tensors = k if nv < 50 else 1
    extra = ["--check", str(k), "--check-tensors", str(k_tensors), "--algos", ",".join(checked)]
    vout = parse_lines(run([str(exes["vidyn:portable"]), "--urdf", str(urdf), "--root", root, "--states", str(vid_states)] + extra))
    pout = parse_lines(run([str(exes["pinocchio:wheel"]), "--model", str(model_bin), "--states", str(pin_states)] + extra))
    pin_by_key = {}
    for r in pout:
        y = np.array(r["values"])
        if r["check"] in ("rnea", "aba"):
            y = mapping.tangent_to_vidyn(y)
        elif r["check"].startswith("rnea_so:"):
            y = mapping.tensor_to_vidyn(y.reshape(nv, nv, nv))
        else:
            y = mapping.matrix_to_vidyn(y.reshape(nv, nv))
        pin_by_key[(r["check"], r["state"])] = y
    for (check, state), t in list(pin_by_key.items()):  # Pinocchio's contracted forms
        if check.startswith("rnea_so:") and check != "rnea_so:dm_dq":
            pin_by_key[("rnea_so_c:" + check.split(":")[1], state)] = np.einsum("i,ijk->jk", lambdas[state], t)
    errs: dict[str, float] = {}
    for r in vout:
        check, state = r["check"], r["state"]
        y = pin_by_key.get((check, state))
        if y is None:
            continue  # rnea_so_c beyond the states with tensors
        x = np.array(r["values"]).reshape(y.shape)
        algo = check.split(":")[0]
        errs[algo] = max(errs.get(algo, 0.0), float(np.max(np.abs(x - y))) if x.size else 0.0)
        errs[algo + "_scale"] = max(errs.get(algo + "_scale", 0.0), float(np.max(np.abs(y))) if y.size else 0.0)
        errs[algo + "_states"] = max(errs.get(algo + "_states", 0), state + 1)
    return errs


def time_robot(exes, urdf, root, model_bin, vid_states, pin_states, name, algos, passes, min_time, rounds,
               so_limit: int) -> list[dict]:
    """Times every algorithm with every program, `rounds` times, alternating the order of the
    programs between rounds; keeps for each program the lowest of its per-round medians (the
    machine is shared, so the least disturbed round is the most representative). Algorithms
    of VIDYN_ONLY run vidyn's programs only; those of SECOND_ORDER_FULL use the first
    `so_limit` states."""
    rows = []
    for algo in algos:
        runs: dict[tuple, list[dict]] = {}
        items = [(k, e) for k, e in exes.items() if not (algo in VIDYN_ONLY and k.startswith("pinocchio:"))]
        for rnd in range(rounds):
            for key, exe in (items if rnd % 2 == 0 else items[::-1]):
                lib, variant = key.split(":")
                common = ["--robot", name, "--variant", variant, "--passes", str(passes), "--min-time", str(min_time)]
                if algo in SECOND_ORDER_FULL:
                    common += ["--limit", str(so_limit)]
                if lib == "vidyn":
                    vid_algos = ",".join(([PAIRED[algo]] if algo in PAIRED else []) + [algo])
                    cmd = [str(exe), "--urdf", str(urdf), "--root", root, "--states", str(vid_states), "--algos", vid_algos]
                else:
                    pin_algos = ",".join([algo] + PIN_EXTRA.get(algo, []))
                    cmd = [str(exe), "--model", str(model_bin), "--states", str(pin_states), "--algos", pin_algos]
                for r in parse_lines(run(cmd + common)):
                    if algo in PAIRED and r["algo"] == PAIRED[algo]:
                        r["algo"] = f"{PAIRED[algo]}@{algo}"
                    runs.setdefault((r["lib"], r["variant"], r["algo"]), []).append(r)
        for rs in runs.values():
            best = dict(min(rs, key=lambda r: r["median_ns"]))
            best["round_medians_ns"] = [r["median_ns"] for r in rs]
            rows.append(best)
    return rows


def machine_info(rev: str | None) -> dict[str, str]:
    def sh(cmd: str) -> str:
        try:
            return subprocess.run(cmd, shell=True, text=True, capture_output=True, cwd=ROOT).stdout.strip()
        except OSError:
            return ""

    model = ""
    for line in sh("lscpu").splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    import pinocchio

    if rev:
        commit = sh(f"git rev-parse --short {shlex.quote(rev)}^{{commit}}")
        if not commit:
            raise SystemExit(f"unknown revision {rev}")
    else:
        commit = sh("git rev-parse --short HEAD")
        if sh("git status --porcelain -- rust benches Cargo.toml Cargo.lock"):
            commit += " + uncommitted changes in rust/, benches/ or Cargo.*"
    return {
        "cpu": model or platform.processor(),
        "nproc": sh("nproc"),
        "flags_native": "avx2" if "avx2" in sh("grep -m1 flags /proc/cpuinfo") else "no avx2",
        "rustc": sh("rustc --version"),
        "cxx": sh("${CXX:-g++} --version | head -1"),
        "pinocchio": pinocchio.__version__,
        "commit": commit,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "load": sh("cut -d' ' -f1-3 /proc/loadavg"),
    }


def fmt_ns(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "–"
    return f"**{r:.2f}**" if r > 1.0 else f"{r:.2f}"


def reproducing_args(argv: list[str], rev: str | None = None) -> list[str]:
    """`argv` without the options that only choose where output goes, with `--rev` resolved."""
    out, skip, is_rev = [], False, False
    for a in argv:
        if skip:
            skip = False
        elif is_rev:
            out.append(rev or a)
            is_rev = False
        elif a == "--json-out":
            skip = True
        elif a.startswith("--json-out=") or a in ("--keep-tmp", "--no-write"):
            pass
        elif a.startswith("--rev="):
            out.append("--rev=" + (rev or a[6:]))
        else:
            out.append(a)
            is_rev = a == "--rev"
    return out


def run_header(info, args, native: bool) -> list[str]:
    """The lines describing the run (date, commit, machine, method), common to both suites."""
    lines = []
    cmd = "python3 benches/compare.py" + "".join(" " + shlex.quote(a) for a in reproducing_args(sys.argv[1:], info["commit"] if args.rev else None))
    lines += [
        f"Run of {info['date']}, vidyn built from "
        + (f"commit `{info['commit']}` (git archive)" if args.rev else f"the working tree at `{info['commit']}`")
        + f"; reproduced by `{cmd}`.",
        "",
        f"- Machine: {info['cpu']}, {info['nproc']} logical CPUs ({info['flags_native']}); load average at the start: {info['load']}",
        f"- {info['rustc']}; {info['cxx']}; Pinocchio {info['pinocchio']} (pin wheel)",
        f"- {args.count} random states per robot ({args.large_count} when nv ≥ 50"
        + (f"; {args.so_count} and {args.so_large_count} for the full second-order tensors" if args.suite == "derivatives" else "")
        + f"), seed {args.seed}; per program run, the median "
        f"over ≥ {args.passes} passes (and ≥ {args.min_time} s) of the per-call mean; {args.rounds} runs per program and "
        "algorithm, alternating the two libraries, keeping the lowest median",
        "",
        "Times are ns per call; ratio = vidyn / Pinocchio (≤ 1: vidyn is faster; **bold**: slower); "
        f"† marks a ratio whose runs varied by more than {100 * (NOISE_SPREAD - 1):.0f} % (machine noise).",
        "*portable*: `cargo build --release` vs the wheel's `libpinocchio_default.so` (g++ -O3 caller)."
        + (" *native*: `-C target-cpu=native -C target-feature=+prefer-256-bit` vs header-only Pinocchio at `-O3 -march=native`." if native else ""),
        "",
    ]
    return lines


def build_report(results, checks, info, args, robot_nv) -> str:
    med = {(r["lib"], r["variant"], r["robot"], r["algo"]): r["median_ns"] for r in results}
    spread = {(r["lib"], r["variant"], r["robot"], r["algo"]): max(r["round_medians_ns"]) / min(r["round_medians_ns"])
              for r in results}

    def noisy(robot, algo, variants) -> str:
        worst_spread = max(spread.get((lib, var, robot, algo), 1.0) for lib, var in variants)
        return " †" if worst_spread > NOISE_SPREAD else ""

    variants = sorted({(r["lib"], r["variant"]) for r in results})
    native = ("vidyn", "native") in variants and ("pinocchio", "native") in variants
    robots = list(dict.fromkeys(r["robot"] for r in results))
    lines = run_header(info, args, native)
    head = "| robot | nv | algorithm | vidyn | Pinocchio | ratio |"
    sep = "|---|---:|---|---:|---:|---:|"
    if native:
        head += " vidyn native | Pinocchio native | ratio native |"
        sep += "---:|---:|---:|"
    lines += [head, sep]
    ratios: dict[str, list[float]] = {}
    worst = []
    for robot in robots:
        for algo in ALGOS:
            v, p = med.get(("vidyn", "portable", robot, algo)), med.get(("pinocchio", "wheel", robot, algo))
            if v is None and p is None:
                continue
            r = v / p if v and p else None
            if r is not None:
                ratios.setdefault(algo, []).append(r)
                worst.append((r, robot, algo))
            mark = noisy(robot, algo, [("vidyn", "portable"), ("pinocchio", "wheel")])
            row = f"| {robot} | {robot_nv[robot]} | {ALGO_TITLES[algo]} | {fmt_ns(v)} | {fmt_ns(p)} | {fmt_ratio(r)}{mark} |"
            if native:
                vn, pn = med.get(("vidyn", "native", robot, algo)), med.get(("pinocchio", "native", robot, algo))
                rn = vn / pn if vn and pn else None
                mark = noisy(robot, algo, [("vidyn", "native"), ("pinocchio", "native")])
                row += f" {fmt_ns(vn)} | {fmt_ns(pn)} | {fmt_ratio(rn)}{mark} |"
            lines.append(row)
    lines += ["", "Geometric mean of the portable ratios over all robots and chains:", ""]
    lines += ["| algorithm | geo-mean ratio | best | worst |", "|---|---:|---:|---:|"]
    for algo in ALGOS:
        rs = ratios.get(algo)
        if rs:
            gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
            lines.append(f"| {ALGO_TITLES[algo]} | {fmt_ratio(gm)} | {min(rs):.2f} | {max(rs):.2f} |")
    worst.sort(reverse=True)
    if worst:
        lines += ["", "Largest portable ratios (where vidyn is furthest behind): "
                  + ", ".join(f"{ALGO_TITLES[a]} on {rb} ({r:.2f})" for r, rb, a in worst[:8]) + "."]
    crba_up = [(robot, med.get(("pinocchio", "wheel", robot, "crba")), med.get(("pinocchio", "wheel", robot, "crba_upper")))
               for robot in robots]
    crba_up = [(rb, full, up) for rb, full, up in crba_up if full and up]
    if crba_up:
        lines += ["", "Pinocchio's CRBA fills only the upper triangle; the CRBA and M⁻¹ columns above include copying it to "
                  "the lower triangle (vidyn returns the full matrix). Pinocchio CRBA upper triangle only, ns: "
                  + ", ".join(f"{rb} {fmt_ns(up)}" for rb, _, up in crba_up) + "."]
    lines += ["", "Agreement on the first %d states (max |vidyn − Pinocchio|; in brackets max |Pinocchio|):" % args.check_states, ""]
    lines += ["| robot | RNEA τ | ABA q̈ | CRBA M | M⁻¹ |", "|---|---:|---:|---:|---:|"]
    for robot in robots:
        e = checks.get(robot)
        if e:
            cells = [f"{e[a]:.1e} [{e[a + '_scale']:.1e}]" for a in ("rnea", "aba", "crba", "minverse")]
            lines.append(f"| {robot} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# Pinocchio C++ times quoted in issue 3 ("Performance"), ns: (panda, talos).
ISSUE_REFERENCE_NS = {"rnea_d": (3_800, 14_000), "aba_d": (5_900, 24_000), "rnea_so": (12_800, 102_000)}
PAPER_ABA_SO_NS = 2.1e6  # Singh et al.: second-order forward dynamics, 36-DoF humanoid


def loglog_slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of log(time) against log(nv)."""
    if len(points) < 2:
        return None
    x = np.log([p[0] for p in points])
    y = np.log([p[1] for p in points])
    return float(np.polyfit(x, y, 1)[0])


def build_deriv_report(results, checks, info, args, robot_nv) -> str:
    """Report of `--suite derivatives` (the Derivatives subsection of BENCHMARKS.md)."""
    med = {(r["lib"], r["variant"], r["robot"], r["algo"]): r["median_ns"] for r in results}
    spread = {(r["lib"], r["variant"], r["robot"], r["algo"]): max(r["round_medians_ns"]) / min(r["round_medians_ns"])
              for r in results}

    def noisy(keys) -> str:
        return " †" if max(spread.get(k, 1.0) for k in keys) > NOISE_SPREAD else ""

    variants = sorted({(r["lib"], r["variant"]) for r in results})
    native = ("vidyn", "native") in variants and ("pinocchio", "native") in variants
    robots = list(dict.fromkeys(r["robot"] for r in results))
    lines = run_header(info, args, native)
    lines += [
        "Pinocchio: `computeRNEADerivatives(model, data, q, v, a)` + copy of `data.M`'s upper triangle to the lower one "
        "(∂RNEA), `computeABADerivatives(model, data, q, v, tau)` (∂ABA; it symmetrises Minv itself, as vidyn does), "
        "`ComputeRNEASecondOrderDerivatives` into `data`'s four tensors zeroed once before timing (∂²RNEA: same work as "
        "vidyn, which does not clear its tensors either) and, on the row below, the documented 5-argument overload "
        "that `setZero()`s the 4·nv³ entries on every call. The wheel has no instantiation of the second-order "
        "derivatives: in the *portable* column they are compiled from the headers in the harness (g++ -O3, no -march); "
        "the first-order ones come from `libpinocchio_default.so`.",
        "",
    ]
    pairs = [("rnea_d", "rnea_d"), ("aba_d", "aba_d"), ("rnea_so", "rnea_so"), ("rnea_so", "rnea_so_zero")]
    head = "| robot | nv | algorithm | vidyn | Pinocchio | ratio |"
    sep = "|---|---:|---|---:|---:|---:|"
    if native:
        head += " vidyn native | Pinocchio native | ratio native |"
        sep += "---:|---:|---:|"
    lines += [head, sep]
    ratios: dict[str, list[float]] = {}
    worst = []
    for robot in robots:
        for va, pa in pairs:
            v, p = med.get(("vidyn", "portable", robot, va)), med.get(("pinocchio", "wheel", robot, pa))
            if v is None and p is None:
                continue
            r = v / p if v and p else None
            if r is not None:
                ratios.setdefault(pa, []).append(r)
                worst.append((r, robot, pa))
            mark = noisy([("vidyn", "portable", robot, va), ("pinocchio", "wheel", robot, pa)])
            row = f"| {robot} | {robot_nv[robot]} | {ALGO_TITLES[pa]} | {fmt_ns(v)} | {fmt_ns(p)} | {fmt_ratio(r)}{mark} |"
            if native:
                vn, pn = med.get(("vidyn", "native", robot, va)), med.get(("pinocchio", "native", robot, pa))
                rn = vn / pn if vn and pn else None
                mark = noisy([("vidyn", "native", robot, va), ("pinocchio", "native", robot, pa)])
                row += f" {fmt_ns(vn)} | {fmt_ns(pn)} | {fmt_ratio(rn)}{mark} |"
            lines.append(row)
    lines += ["", "Geometric mean of the portable ratios over all robots, chains and trees:", ""]
    lines += ["| algorithm | geo-mean ratio | best | worst |", "|---|---:|---:|---:|"]
    for _, pa in pairs:
        rs = ratios.get(pa)
        if rs:
            gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
            lines.append(f"| {ALGO_TITLES[pa]} | {fmt_ratio(gm)} | {min(rs):.2f} | {max(rs):.2f} |")
    worst.sort(reverse=True)
    if worst:
        lines += ["", "Largest portable ratios: " + ", ".join(f"{ALGO_TITLES[a]} on {rb} ({r:.2f})" for r, rb, a in worst[:8]) + "."]
    up = [(rb, med.get(("pinocchio", "wheel", rb, "rnea_d_upper"))) for rb in robots]
    up = [(rb, t) for rb, t in up if t]
    if up:
        lines += ["", "Pinocchio ∂RNEA without the copy of M's lower triangle, ns: " + ", ".join(f"{rb} {fmt_ns(t)}" for rb, t in up) + "."]

    # vidyn only: contracted forms and second-order forward dynamics
    lines += ["", "vidyn only (no Pinocchio counterpart), portable build, ns; λ = the state's τ (standard normal). ∂RNEA and "
              "∂ABA in this table were timed again in the same program runs as the contracted forms, just before them, so "
              "the ratios compare like with like:", "",
              "| robot | nv | ∂RNEA | λᵀ∂²RNEA | λᵀ∂²RNEA / ∂RNEA | ∂ABA | λᵀ∂²ABA | λᵀ∂²ABA / ∂ABA | ∂²ABA | ∂²ABA / ∂²RNEA |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for robot in robots:
        g = lambda a: med.get(("vidyn", "portable", robot, a))  # noqa: E731
        d, c, ad, ac, aso, so = (g("rnea_d@rnea_so_c") or g("rnea_d"), g("rnea_so_c"), g("aba_d@aba_so_c") or g("aba_d"),
                                 g("aba_so_c"), g("aba_so"), g("rnea_so"))
        if not any((c, ac, aso)):
            continue
        q = lambda x, y: f"{x / y:.2f}" if x and y else "–"  # noqa: E731
        mark = lambda a: noisy([("vidyn", "portable", robot, a)])  # noqa: E731
        lines.append(f"| {robot} | {robot_nv[robot]} | {fmt_ns(d)} | {fmt_ns(c)}{mark('rnea_so_c')} | {q(c, d)} | {fmt_ns(ad)} | "
                     f"{fmt_ns(ac)}{mark('aba_so_c')} | {q(ac, ad)} | {fmt_ns(aso)}{mark('aba_so')} | {q(aso, so)} |")

    # scaling slopes
    families = [("chains", [rb for rb in robots if rb.startswith("chain")]), ("binary trees", [rb for rb in robots if rb.startswith("tree")])]
    all_algos = ["rnea_d", "aba_d", "rnea_so", "rnea_so_zero", "rnea_so_c", "aba_so_c", "aba_so"]
    slope_rows = []
    for fam, members in families:
        if len(members) < 2:
            continue
        members = sorted(members, key=lambda rb: robot_nv[rb])
        for algo in all_algos:
            for lib, variant in (("vidyn", "portable"), ("pinocchio", "wheel")):
                if (lib == "vidyn" and algo == "rnea_so_zero") or (lib == "pinocchio" and algo in VIDYN_ONLY):
                    continue
                pts = [(robot_nv[rb], med[(lib, variant, rb, algo)]) for rb in members if (lib, variant, rb, algo) in med]
                if len(pts) < 2:
                    continue
                slope_rows.append((fam, algo, lib, loglog_slope(pts), loglog_slope(pts[-3:]), pts))
    if slope_rows:
        lines += ["", "Scaling: least-squares slope of log(time) against log(nv) (portable builds); *all* over every size, "
                  "*last 3* over the three largest:", "",
                  "| family (nv) | algorithm | library | slope, all | slope, last 3 | times, ns |", "|---|---|---|---:|---:|---|"]
        for fam, algo, lib, s_all, s_last, pts in slope_rows:
            nvs = ", ".join(str(n) for n, _ in pts)
            lines.append(f"| {fam} ({nvs}) | {ALGO_TITLES[algo]} | {lib} | {s_all:.2f} | {s_last:.2f} | "
                         + " / ".join(fmt_ns(t) for _, t in pts) + " |")

    # absolute times against the issue's reference numbers and targets
    ref_rows = []
    for algo, (ref_panda, ref_talos) in ISSUE_REFERENCE_NS.items():
        for robot, ref in (("panda", ref_panda), ("talos", ref_talos)):
            v, p = med.get(("vidyn", "portable", robot, algo)), med.get(("pinocchio", "wheel", robot, algo))
            pz = med.get(("pinocchio", "wheel", robot, "rnea_so_zero")) if algo == "rnea_so" else None
            if v or p:
                ref_rows.append(f"| {ALGO_TITLES[algo]} | {robot} | {fmt_ns(ref)} | {fmt_ns(p)}"
                                + (f" ({fmt_ns(pz)} with setZero)" if pz else "") + f" | {fmt_ns(v)} |")
    if ref_rows:
        lines += ["", "Absolute times against issue 3's reference (Pinocchio C++ on this machine class), ns:", "",
                  "| algorithm | robot | issue reference (Pinocchio) | Pinocchio, this run | vidyn, this run |", "|---|---|---:|---:|---:|"]
        lines += ref_rows
    targets = []
    t_aso = med.get(("vidyn", "portable", "talos", "aba_so"))
    if t_aso:
        targets.append(f"- ∂²ABA (all four tensors) on talos (reduced, nv = {robot_nv['talos']}, not 36): {t_aso / 1e3:,.0f} µs "
                       f"against the paper's 2.1 ms for a 36-DoF humanoid ({t_aso / PAPER_ABA_SO_NS:.2f}×): "
                       + ("**met**" if t_aso < 0.5 * PAPER_ABA_SO_NS else "**not met**" if t_aso >= PAPER_ABA_SO_NS else "under, but not by 2×") + ".")
    ref_d = {rb: med.get(("vidyn", "portable", rb, "rnea_d@rnea_so_c")) or med.get(("vidyn", "portable", rb, "rnea_d")) for rb in robots}
    rc = [(rb, med[("vidyn", "portable", rb, "rnea_so_c")] / ref_d[rb]) for rb in robots
          if ("vidyn", "portable", rb, "rnea_so_c") in med and ref_d[rb]]
    if rc:
        worst_c = max(rc, key=lambda x: x[1])
        targets.append(f"- Contracted Hessian λᵀ∂²RNEA ≤ 2× ∂RNEA: ratio {min(x for _, x in rc):.2f}–{worst_c[1]:.2f} "
                       f"(worst {worst_c[0]}): " + ("**met** everywhere" if worst_c[1] <= 2.0 else "**not met** on "
                       + ", ".join(rb for rb, x in rc if x > 2.0)) + ".")
    for _, pa in pairs[:3]:
        rs = [(r, rb) for r, rb, a in worst if a == pa]
        if rs:
            bad = [rb for r, rb in rs if r > 1.0]
            clear = [f"{rb} {r:.2f}" for r, rb in rs if r > 1.1]
            targets.append(f"- Ratio ≤ 1.0 for {ALGO_TITLES[pa]}: " + ("**met** everywhere" if not bad else
                           f"**not met** on {len(bad)} of {len(rs)} ({', '.join(bad)})") + "; above 1.1 (beyond the noise): "
                           + (", ".join(clear) if clear else "none") + ".")
    if targets:
        lines += ["", "Targets of issue 3:", ""] + targets

    lines += ["", "Agreement before timing (max |vidyn − Pinocchio| over every entry of the outputs, in brackets max "
              "|Pinocchio|; first-order outputs on the first %d states, tensors on the states in parentheses; λᵀ∂²RNEA "
              "against the contraction of Pinocchio's tensors):" % args.check_states, "",
              "| robot | ∂RNEA (∂τ/∂q, ∂τ/∂v, M) | ∂ABA (∂q̈/∂q, ∂q̈/∂v, M⁻¹) | ∂²RNEA (4 tensors) | λᵀ∂²RNEA (3 matrices) |",
              "|---|---:|---:|---:|---:|"]
    for robot in robots:
        e = checks.get(robot)
        if not e:
            continue
        cells = []
        for a in ("rnea_d", "aba_d", "rnea_so", "rnea_so_c"):
            if a in e:
                extra = f" ({e[a + '_states']})" if a in ("rnea_so", "rnea_so_c") else ""
                cells.append(f"{e[a]:.1e} [{e[a + '_scale']:.1e}]{extra}")
            else:
                cells.append("–")
        lines.append(f"| {robot} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def update_benchmarks_md(report: str, suite: str = "base") -> None:
    """Replaces the generated block of `suite` in BENCHMARKS.md; a missing derivatives block is
    added, under a "Derivatives" heading, after the base block's section (before any later
    "## " section), so that sections appended by others at the end stay where they are."""
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else ""
    begin, end = (BEGIN_MARK, END_MARK) if suite == "base" else (DERIV_BEGIN_MARK, DERIV_END_MARK)
    block = f"{begin}\n{report}\n{end}"
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        post = rest.split(end, 1)[1]
        text = pre + block + post
    elif suite == "base" or not text:
        text = (text.rstrip() + "\n\n" if text else "# Benchmarks\n\n") + block + "\n"
    else:
        section = f"{DERIV_HEADING}\n\n{block}\n"
        at = text.find(END_MARK)
        nxt = text.find("\n## ", text.find("\n## ", at) + 1) if at >= 0 else -1
        text = text.rstrip() + "\n\n" + section if nxt < 0 else text[:nxt + 1] + section + "\n" + text[nxt + 1:]
    BENCHMARKS_MD.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=["base", "derivatives"], default="base",
                    help="base: FK, RNEA, ABA, CRBA, M^-1 (default); derivatives: first- and second-order derivatives, "
                    "with chains and binary trees for the scaling slopes")
    ap.add_argument("--robots", help="comma-separated subset, e.g. ur5,talos,chain50,tree4 (default: all of the suite)")
    ap.add_argument("--algos", help="comma-separated subset of " + ",".join(ALGOS) + " (base) or " + ",".join(DERIV_ALGOS)
                    + " (derivatives); default: all of the suite")
    ap.add_argument("--count", type=int, default=1000, help="random states per robot (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--large-count", type=int, default=256,
                    help="random states per robot with nv >= 50 (default 256), to bound the run time")
    ap.add_argument("--so-count", type=int, default=64,
                    help="states used for the full second-order tensors (∂²RNEA, ∂²ABA) when nv < 50 (default 64)")
    ap.add_argument("--so-large-count", type=int, default=16,
                    help="states used for the full second-order tensors when nv >= 50 (default 16)")
    ap.add_argument("--passes", type=int, default=11, help="minimum timed passes over the pool (default 11)")
    ap.add_argument("--min-time", type=float, default=0.2, help="minimum total timed seconds per program run (default 0.2)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs of each program per algorithm, alternating the order; the lowest median is kept (default 3)")
    ap.add_argument("--check-states", type=int, default=3, help="states compared between the libraries (default 3)")
    ap.add_argument("--no-native", action="store_true", help="skip the target-cpu=native / -march=native builds")
    ap.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    ap.add_argument("--json-out", type=Path, help="also write the raw JSON lines here")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the state files and models")
    ap.add_argument("--rev", help="build vidyn from this git revision (git archive) instead of the working tree")
    ap.add_argument("--print-robots-dir", action="store_true", help="print example-robot-data's robots/ directory and exit")
    args = ap.parse_args()

    if args.print_robots_dir:
        print(robots_dir())
        return

    import pinocchio as pin

    suite_algos = ALGOS if args.suite == "base" else DERIV_ALGOS
    algos = [a for a in (args.algos or ",".join(suite_algos)).split(",") if a]
    for a in algos:
        if a not in suite_algos:
            raise SystemExit(f"unknown algorithm {a} for --suite {args.suite}; choose from {suite_algos}")
    erd = [(n, robots_dir() / p, root) for n, p, root in ROBOTS]
    every_robot = erd + [(f"chain{n}", None, "fixed") for n in sorted(set(CHAIN_SIZES) | set(DERIV_CHAIN_SIZES))] + [
        (f"tree{d}", None, "fixed") for d in TREE_DEPTHS]
    if args.suite == "base":
        all_robots = erd + [(f"chain{n}", None, "fixed") for n in CHAIN_SIZES]
    else:
        all_robots = [r for r in erd if r[0] in DERIV_ROBOTS] + [(f"chain{n}", None, "fixed") for n in DERIV_CHAIN_SIZES] + [
            (f"tree{d}", None, "fixed") for d in TREE_DEPTHS]
    if args.robots:
        wanted = args.robots.split(",")
        unknown = set(wanted) - {n for n, _, _ in every_robot}
        if unknown:
            raise SystemExit(f"unknown robots {sorted(unknown)}")
        all_robots = [r for r in every_robot if r[0] in wanted]

    info = machine_info(args.rev)
    tmp = Path(tempfile.mkdtemp(prefix="vidyn_compare_"))
    results, checks, robot_nv = [], {}, {}
    try:
        exes = build(not args.no_native, args.rev, tmp)
        for name, urdf, root in all_robots:
            if urdf is None:
                urdf = tmp / f"{name}.urdf"
                if name.startswith("chain"):
                    urdf.write_text(chain_urdf(int(name.removeprefix("chain"))))
                else:
                    urdf.write_text(tree_urdf(int(name.removeprefix("tree"))))
            if root == "freeflyer":
                pmodel = pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer())
            else:
                pmodel = pin.buildModelFromUrdf(str(urdf))
            model_bin = tmp / f"{name}.pinmodel"
            pmodel.saveToBinary(str(model_bin))
            desc = json.loads(run([str(exes["vidyn:portable"]), "--urdf", str(urdf), "--root", root, "--describe"]))
            mapping = Mapping(pin, pmodel, desc)
            robot_nv[name] = pmodel.nv
            count = args.count if pmodel.nv < 50 else min(args.count, args.large_count)
            q, v, a, tau = draw_states(pin, pmodel, count, args.seed)
            pin_states, vid_states = tmp / f"{name}.pin.states", tmp / f"{name}.vidyn.states"
            write_states(pin_states, q, v, a, tau)
            write_states(vid_states, mapping.q_to_vidyn(q), *(mapping.tangent_to_vidyn(x) for x in (v, a, tau)))
            note = "" if mapping.identity else " (coordinates permuted/converted" + (
                f"; continuous joints {mapping.continuous}" if mapping.continuous else "") + ")"
            log(f"compare.py: {name}: nq={pmodel.nq} nv={pmodel.nv}, {count} states{note}")
            check_algos = ["rnea", "aba", "crba", "minverse"] if args.suite == "base" else [a for a in algos if a in CHECKS]
            checks[name] = check_agreement(exes, urdf, root, model_bin, vid_states, pin_states, mapping, args.check_states,
                                           check_algos, mapping.tangent_to_vidyn(tau))
            log("    max |vidyn - pinocchio|: " + ", ".join(f"{k} {v:.2e}" for k, v in checks[name].items()
                                                           if not k.endswith(("_scale", "_states"))))
            so_limit = min(count, args.so_count if pmodel.nv < 50 else args.so_large_count)
            rows = time_robot(exes, urdf, root, model_bin, vid_states, pin_states, name, algos, args.passes, args.min_time,
                              args.rounds, so_limit)
            results += rows
            for algo in algos:
                v_ns = next((r["median_ns"] for r in rows if r["lib"] == "vidyn" and r["variant"] == "portable" and r["algo"] == algo), None)
                p_ns = next((r["median_ns"] for r in rows if r["lib"] == "pinocchio" and r["variant"] == "wheel" and r["algo"] == algo), None)
                if v_ns and p_ns:
                    log(f"    {algo:9s} vidyn {v_ns:10.1f} ns   pinocchio {p_ns:10.1f} ns   ratio {v_ns / p_ns:5.2f}")
                elif v_ns:
                    log(f"    {algo:9s} vidyn {v_ns:10.1f} ns")
    finally:
        if args.keep_tmp:
            log(f"compare.py: inputs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if args.json_out:
        args.json_out.write_text("".join(json.dumps(r) + "\n" for r in results))
    if args.suite == "base":
        report = build_report(results, checks, info, args, robot_nv)
    else:
        report = build_deriv_report(results, checks, info, args, robot_nv)
    print(report)
    if not args.no_write:
        update_benchmarks_md(report, args.suite)
        log(f"compare.py: updated {BENCHMARKS_MD}")


if __name__ == "__main__":
    main()
