#!/usr/bin/env bash
# Builds the libFuzzer targets for LONG runs in build-fuzz/: Clang 14, -O2, UBSan and libstdc++'s
# own bounds checks (_GLIBCXX_ASSERTIONS: operator[], front/back, string and span indices abort
# when out of range), no ASan. ASan costs the readers 2-4x in executions per CPU second (the
# figures are in docs/hardening.md, "Speed of the harnesses"); a long run wants executions, and
# what ASan alone would see is checked afterwards: scripts/fuzz.sh reruns the long run's whole
# corpus (every input that reached new coverage) under the ASan build, and a finding is
# reproduced there. CI's short runs and the sanitized test suites stay on build-asan/
# (scripts/build-asan.sh). Usage: scripts/build-fuzz.sh [TARGET...]   (default: the 12 fuzzers)
set -euo pipefail
cd "$(dirname "$0")/.."
FTPLAN_WITH_FUZZ=1 scripts/setup.sh
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [[ ! -f build-fuzz/CMakeCache.txt ]]; then
  # RelWithDebInfo: -O2 -g (symbolized stacks in a report); -fno-sanitize-recover: a UBSan report
  # ends the run at its input, as halt_on_error does under build-asan.
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
    -DFTPLAN_BUILD_CUDA=OFF -DFTPLAN_BUILD_GUI=OFF -DFTPLAN_BUILD_TESTS=OFF -DFTPLAN_SANITIZE=undefined \
    -DFTPLAN_BUILD_FUZZERS=ON -DFTPLAN_WERROR=ON \
    "-DCMAKE_CXX_FLAGS=-D_GLIBCXX_ASSERTIONS -fno-sanitize-recover=undefined" "${launcher[@]}" >/dev/null
fi
targets=("$@")
((${#targets[@]})) || targets=(scenario sweep model catalog profile hf_config import_deepspeed import_accelerate
  import_torchtune import_torchtitan import_training_args import_peft)
cmake --build build-fuzz --parallel "$(nproc)" --target "${targets[@]/#/fuzz_}"
