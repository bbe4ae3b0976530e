#!/usr/bin/env bash
# Creates .venv (if missing), installs the Python dependencies and builds vidyn into it.
# Sourced by demo.sh and test.sh; safe to run again (incremental rebuild).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
source .venv/bin/activate
python -m pip install --quiet --upgrade pip
python -m pip install --quiet -r requirements-dev.txt
echo "Building vidyn (release; the first build compiles the Rust crates for a few minutes and prints little)"
# PIP_QUIET: the pip that maturin runs would list every optional dependency it skips
PIP_QUIET=1 maturin develop --release --quiet
