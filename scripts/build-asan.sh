#!/usr/bin/env bash
# Builds TARGETS (default: all) in build-asan/: Clang 14, ASan + UBSan, no CUDA, no GUI, with the
# libFuzzer targets (FTPLAN_BUILD_FUZZERS compiles everything with -fsanitize=fuzzer-no-link,
# which only adds coverage counters). One build serves both the sanitized test run
# (scripts/test.sh) and the fuzzers (scripts/fuzz.sh), so CI compiles the project under the
# sanitizers once. Usage: scripts/build-asan.sh [TARGET...]
# FTPLAN_FUZZ_BUILD=long builds build-fuzz/ instead, for long fuzzing runs (scripts/fuzz.sh sets
# it): -O2, UBSan and libstdc++'s own bounds checks (_GLIBCXX_ASSERTIONS: operator[], front/back,
# string and span indices abort when out of range), no ASan, no tests. ASan costs the readers
# 1.7-2.5x in executions per CPU second (docs/hardening.md, "Speed of the harnesses"); what ASan
# alone would see is checked afterwards: scripts/fuzz.sh reruns a long run's whole corpus under
# build-asan/, where a finding is reproduced too.
set -euo pipefail
cd "$(dirname "$0")/.."
FTPLAN_WITH_FUZZ=1 scripts/setup.sh
if [[ ${FTPLAN_FUZZ_BUILD:-asan} == long ]]; then
  # -fno-sanitize-recover: a UBSan report ends the run at its input, as halt_on_error does in build-asan/.
  dir=build-fuzz flags=(-DFTPLAN_SANITIZE=undefined -DFTPLAN_BUILD_TESTS=OFF
    "-DCMAKE_CXX_FLAGS=-D_GLIBCXX_ASSERTIONS -fno-sanitize-recover=undefined")
else
  dir=build-asan flags=(-DFTPLAN_SANITIZE=address,undefined)
fi
# ccache when there is one: the sanitized build is CI's longest step, and worktrees share a cache.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [[ ! -f $dir/CMakeCache.txt ]]; then
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DFTPLAN_BUILD_CUDA=OFF -DFTPLAN_BUILD_GUI=OFF "${flags[@]}" -DFTPLAN_BUILD_FUZZERS=ON -DFTPLAN_WERROR=ON \
    "${launcher[@]}" >/dev/null
elif ! grep -q '^FTPLAN_WERROR:BOOL=ON$' "$dir/CMakeCache.txt"; then
  cmake -S . -B "$dir" -DFTPLAN_WERROR=ON >/dev/null  # warnings are errors here too (Clang 14)
fi
targets=()
(($#)) && targets=(--target "$@")
cmake --build "$dir" --parallel "$(nproc)" "${targets[@]}"
