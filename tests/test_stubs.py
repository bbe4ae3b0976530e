"""The stub python/vidyn/_core.pyi mirrors the compiled module exactly (mypy.stubtest), and
the pure-Python part of the package type-checks against it (mypy --strict)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (pip install vidyn[test])")

import vidyn  # noqa: E402

PACKAGE = pathlib.Path(vidyn.__file__).parent
# Entries (one per line, each with a comment saying why) for differences stubtest may not
# fix; empty today. Only passed when present.
ALLOWLIST = pathlib.Path(__file__).parent / "stubtest-allowlist.txt"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=600)


def test_stubtest():
    args = ["mypy.stubtest", "vidyn._core"]
    if ALLOWLIST.exists():
        args += ["--allowlist", str(ALLOWLIST)]
    r = run(*args)
    assert r.returncode == 0, r.stdout + r.stderr


def test_package_typechecks():
    r = run("mypy", "--strict", "--no-incremental", str(PACKAGE))
    assert r.returncode == 0, r.stdout + r.stderr


def test_stub_exists_next_to_the_module():
    assert (PACKAGE / "_core.pyi").is_file()
    assert (PACKAGE / "py.typed").is_file()
