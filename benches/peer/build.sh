#!/usr/bin/env bash
# Builds the Pinocchio C++ peer harness against the `pin` wheel (pip install pin).
#
#   benches/peer/build.sh [OUT_DIR]     (default OUT_DIR: <cargo target dir>/peer)
#
# Produces two binaries in OUT_DIR:
#   pinocchio_timings_wheel   g++ -O3, explicit-instantiation mode, linked against the
#                             wheel's libpinocchio_default.so (the code Python users run)
#   pinocchio_timings_native  g++ -O3 -march=native, header-only (all templates compiled here)
#
# The wheel ships Pinocchio's and Boost's headers and libraries under
# <site-packages>/cmeel.prefix; the prefix is asked from Python, never hard-coded. Eigen's
# headers come from the cmeel-eigen wheel, installed here if missing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
CXX="${CXX:-g++}"

if [[ $# -ge 1 ]]; then
  OUT="$1"
else
  TARGET_DIR="$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
  OUT="$TARGET_DIR/peer"
fi
mkdir -p "$OUT"

PREFIX="$("$PY" -c 'import cmeel, os; print(os.path.join(os.path.dirname(cmeel.__path__[0]), "cmeel.prefix"))')"
if [[ ! -d "$PREFIX/include/pinocchio" ]]; then
  echo "build.sh: no Pinocchio headers under $PREFIX (pip install pin)" >&2
  exit 1
fi
if [[ ! -d "$PREFIX/include/eigen3/Eigen" ]]; then
  echo "build.sh: Eigen headers missing from $PREFIX; installing cmeel-eigen" >&2
  "$PY" -m pip install --quiet "cmeel-eigen>=3.4.1,<3.5"
fi

LIB="$PREFIX/lib"
DEFS=(-DBOOST_MPL_LIMIT_LIST_SIZE=30 -DBOOST_MPL_LIMIT_VECTOR_SIZE=30 -DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS
      -DBOOST_FUSION_INVOKE_MAX_ARITY=12 -DNDEBUG)
INCS=(-isystem "$PREFIX/include" -isystem "$PREFIX/include/eigen3")
SRC="$HERE/pinocchio_timings.cpp"

build() { # name, "compile flags", "link flags"
  local name="$1" cflags="$2" ldflags="$3"
  local out="$OUT/pinocchio_timings_$name"
  if [[ "$out" -nt "$SRC" && "$out" -nt "$0" ]]; then
    echo "build.sh: $out is up to date" >&2
    return
  fi
  echo "build.sh: building $out" >&2
  "$CXX" -std=c++17 -O3 "${DEFS[@]}" "${INCS[@]}" -DVARIANT_NAME="\"$name\"" $cflags "$SRC" -o "$out.tmp" \
    -L"$LIB" -Wl,-rpath,"$LIB" $ldflags -lboost_serialization
  mv "$out.tmp" "$out"
}

# Wheel variant: the algorithms resolve to the explicit instantiations in libpinocchio_default.
build wheel "-DPINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION" "-lpinocchio_default"
# Native variant: header-only, tuned for this CPU.
build native "-march=native" ""

echo "$OUT"
