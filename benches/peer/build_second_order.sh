#!/usr/bin/env bash
# Builds the Pinocchio C++ oracle for second-order RNEA derivatives
# (pinocchio_second_order.cpp) against the `pin` wheel, like build.sh builds the timing harness.
#
#   benches/peer/build_second_order.sh [OUT_FILE]
#       default OUT_FILE: ${CARGO_TARGET_DIR:-<repo>/target}/peer/pinocchio_second_order
#
# Pinocchio's and Boost's headers and libraries come from <site-packages>/cmeel.prefix of the
# Python that has `pin` ($PYTHON, default python3); the prefix is asked from Python, never
# hard-coded. Eigen's headers are looked for in that prefix, then in the cmeel prefix of the
# base interpreter (a virtualenv's parent), then $EIGEN3_INCLUDE_DIR and /usr/include/eigen3;
# as a last resort the cmeel-eigen wheel is installed (as build.sh does).
#
# -O2 with PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION: the common algorithms resolve to the wheel's
# libpinocchio_default, only the second-order derivatives are compiled here (about a minute).
# Exit status 3 means a prerequisite (compiler, headers) is missing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
CXX="${CXX:-g++}"
SRC="$HERE/pinocchio_second_order.cpp"
OUT="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/peer/pinocchio_second_order}"
mkdir -p "$(dirname "$OUT")"

if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "build_second_order.sh: no C++ compiler ($CXX)" >&2
  exit 3
fi
PREFIX="$("$PY" -c 'import cmeel, os; print(os.path.join(os.path.dirname(cmeel.__path__[0]), "cmeel.prefix"))' 2>/dev/null || true)"
if [[ -z "$PREFIX" || ! -f "$PREFIX/include/pinocchio/algorithm/rnea-second-order-derivatives.hpp" ]]; then
  echo "build_second_order.sh: no Pinocchio headers under '${PREFIX}' (pip install pin)" >&2
  exit 3
fi
BASE_PREFIX="$("$PY" -c 'import sys, sysconfig, os; print(os.path.join(sysconfig.get_path("purelib", vars={"base": sys.base_prefix}), "cmeel.prefix"))' 2>/dev/null || true)"
EIGEN=""
for cand in "$PREFIX/include/eigen3" "$BASE_PREFIX/include/eigen3" "${EIGEN3_INCLUDE_DIR:-}" /usr/include/eigen3 /usr/local/include/eigen3; do
  if [[ -n "$cand" && -f "$cand/Eigen/Core" ]]; then
    EIGEN="$cand"
    break
  fi
done
if [[ -z "$EIGEN" ]]; then
  echo "build_second_order.sh: Eigen headers not found; installing cmeel-eigen" >&2
  "$PY" -m pip install --quiet "cmeel-eigen>=3.4.1,<3.5" || exit 3
  EIGEN="$PREFIX/include/eigen3"
fi

LIB="$PREFIX/lib"
DEFS=(-DBOOST_MPL_LIMIT_LIST_SIZE=30 -DBOOST_MPL_LIMIT_VECTOR_SIZE=30 -DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS
      -DBOOST_FUSION_INVOKE_MAX_ARITY=12 -DNDEBUG -DPINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION)
INCS=(-isystem "$PREFIX/include" -isystem "$EIGEN")

echo "build_second_order.sh: building $OUT (Eigen from $EIGEN)" >&2
"$CXX" -std=c++17 -O2 "${DEFS[@]}" "${INCS[@]}" "$SRC" -o "$OUT.tmp.$$" \
  -L"$LIB" -Wl,-rpath,"$LIB" -lpinocchio_default -lboost_serialization
mv "$OUT.tmp.$$" "$OUT"
echo "$OUT"
