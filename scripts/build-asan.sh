#!/usr/bin/env bash
# Builds TARGETS (default: all) in build-asan/: Clang 14, ASan + UBSan, no CUDA, no GUI, with the
# libFuzzer targets (FTPLAN_BUILD_FUZZERS compiles everything with -fsanitize=fuzzer-no-link,
# which only adds coverage counters). One build serves both the sanitized test run
# (scripts/test.sh) and the fuzzers (scripts/fuzz.sh), so CI compiles the project under the
# sanitizers once. Usage: scripts/build-asan.sh [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
FTPLAN_WITH_FUZZ=1 scripts/setup.sh
# ccache when there is one: the sanitized build is CI's longest step, and worktrees share a cache.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [[ ! -f build-asan/CMakeCache.txt ]]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DFTPLAN_BUILD_CUDA=OFF -DFTPLAN_BUILD_GUI=OFF -DFTPLAN_SANITIZE=address,undefined -DFTPLAN_BUILD_FUZZERS=ON -DFTPLAN_WERROR=ON \
    "${launcher[@]}" >/dev/null
elif ! grep -q '^FTPLAN_WERROR:BOOL=ON$' build-asan/CMakeCache.txt; then
  cmake -S . -B build-asan -DFTPLAN_WERROR=ON >/dev/null  # warnings are errors here too (Clang 14)
fi
targets=()
(($#)) && targets=(--target "$@")
cmake --build build-asan --parallel "$(nproc)" "${targets[@]}"
