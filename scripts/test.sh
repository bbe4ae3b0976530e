#!/usr/bin/env bash
# The whole test suite: Rust unit/integration tests, then pytest (hypothesis + Pinocchio oracle).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
cargo test --workspace --exclude vidyn-py --release
HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}" python -m pytest tests -q
