#!/usr/bin/env bash
# Configures and builds ftplan in build/ (Release, -O2). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# Warnings are errors here (FTPLAN_WERROR), so CI, which builds through this script, keeps the
# tree warning-free; a build/ configured without it is reconfigured once.
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DFTPLAN_WERROR=ON "$@" >/dev/null
elif ! grep -q '^FTPLAN_WERROR:BOOL=ON$' build/CMakeCache.txt; then
  cmake -S . -B build -DFTPLAN_WERROR=ON >/dev/null
fi
cmake --build build --parallel "$(nproc)"
