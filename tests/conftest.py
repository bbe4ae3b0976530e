"""Shared pytest configuration: hypothesis profiles and the oracle's per-robot summary.

Hypothesis profiles (pick one with ``HYPOTHESIS_PROFILE=…``, default ``dev``):

* ``dev``: 25 examples per property, random seeds and the example database, for quick local
  runs.
* ``ci``: 200 examples, ``derandomize=True`` (the same examples on every run, so a CI failure
  is reproducible locally with the same profile), no database, ``print_blob=True`` (a failure
  prints ``@reproduce_failure(...)``).  The whole suite stays under ~10 minutes on 2 cores
  (about 1 minute today).
* ``thorough``: like ``ci`` but 2000 random examples, for occasional bug hunts.

``deadline=None`` everywhere: building a 30-body model and the first call into the extension
vary a lot in time on shared CI machines, and timing is what benchmarks are for.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    # model_specs draws O(30) structural values per example; generation is not the slow part
    suppress_health_check=[HealthCheck.too_slow],
)
# for occasional bug hunts (≈ 10× the ci runtime), not for CI
settings.register_profile("thorough", parent=settings.get_profile("ci"), max_examples=2000, derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

_SUMMARY_KEY = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SUMMARY_KEY] = {}
    # example-robot-data's URDFs give ModelWarnings (inertias violating the triangle
    # inequality, <mimic> joints) on every load, over a thousand per run; the tests of those
    # warnings record them with pytest.warns, which sees them whatever this filter says.
    config.addinivalue_line("filterwarnings", "ignore::vidyn.ModelWarning")


@pytest.fixture(scope="session")
def oracle_summary(request: pytest.FixtureRequest) -> dict:
    """{(robot, base): {quantity: max relative error or error string}}, printed at the end."""
    return request.config.stash[_SUMMARY_KEY]


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    summary = config.stash.get(_SUMMARY_KEY, {})
    if not summary:
        return
    tr = terminalreporter
    tr.section("Pinocchio oracle: max relative error per robot (|x-y|_inf / max(1, |y|_inf))")
    quantities = sorted({k for row in summary.values() for k in row if not k.startswith("_")})
    for (robot, base), row in sorted(summary.items()):
        worst = [v for k, v in row.items() if not k.startswith("_") and isinstance(v, float)]
        failures = [f"{k}: {v}" for k, v in row.items() if not k.startswith("_") and not isinstance(v, float)]
        head = f"{robot:48s} {base:6s} nq={row.get('_nq', '?'):>3} nv={row.get('_nv', '?'):>3}"
        tail = f"max {max(worst):.1e}" if worst else row.get("_note", "no numeric comparisons")
        tr.write_line(f"{head}  {tail}" + (f"  ERRORS: {'; '.join(failures)}" if failures else ""))
    compared = {r for (r, _), row in summary.items() if any(isinstance(v, float) for k, v in row.items() if not k.startswith("_"))}
    tr.write_line(f"{len(summary)} (robot, base) pairs over {len({r for r, _ in summary})} robots; {len(compared)} robots compared numerically; quantities: {', '.join(quantities)}")
