#!/usr/bin/env bash
# The main demo: load a real robot, simulate it, linearise the motion, print and plot.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
python examples/demo.py "$@"
