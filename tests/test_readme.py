"""The Python examples of the README run as written (each ```python block in a fresh
namespace), so the documentation cannot drift from the API."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def run(block: str) -> dict:
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    return namespace


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, capsys):
    run(BLOCKS[index])


def test_the_urdf_example_simulates_and_linearises_in_ten_lines(capsys):
    block = next(b for b in BLOCKS if "VariationalIntegrator(panda" in b)
    assert len(block.strip().splitlines()) <= 10
    ns = run(block)
    assert ns["A"].shape == (200, 18, 18) and ns["B"].shape == (200, 18, 9)
    assert np.isfinite(ns["traj"].q).all()
