#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite (this is what CI
# runs). Then, issue 22: the same suites again under ASan + UBSan, and each reader's fuzzer for a
# short time on the committed corpus. FTPLAN_TEST_QUICK=1 stops after the first suite (local use).
set -euo pipefail
cd "$(dirname "$0")/.."
FTPLAN_WITH_FUZZ=1 FTPLAN_WITH_GUI=1 scripts/setup.sh
# With the GUI, so that its Qt Test suite (ctest gui_window, off screen; issue 21) runs too.
if [[ -f build/CMakeCache.txt ]]; then cmake -S . -B build -DFTPLAN_BUILD_GUI=ON >/dev/null; fi
scripts/build.sh -DFTPLAN_BUILD_GUI=ON
# In parallel, one test per core: no test depends on an idle machine, and tests that share a
# drive take turns (tests/CMakeLists.txt).
ctest --test-dir build --output-on-failure --timeout 600 -j"$(nproc)"
[[ "${FTPLAN_TEST_QUICK:-0}" == 1 ]] && exit 0

# The suites under ASan + UBSan, in build-asan/ (the fuzzers' build: scripts/build-asan.sh).
# Any report fails the run: each sanitizer exits with status 86 and writes its report under
# build-asan/sanitizer/, checked below, so a report from a process whose status a test does not
# look at (one killed on purpose, one expected to fail) counts too.
start=$SECONDS
# The sanitized suites need the ASan build, whatever FTPLAN_FUZZ_BUILD the caller exported for
# long fuzzing runs (long: build-fuzz/, which has no tests).
export FTPLAN_FUZZ_BUILD=asan
scripts/build-asan.sh
reports=$PWD/build-asan/sanitizer
rm -rf "$reports" && mkdir -p "$reports"
# (log_path is common to both runtimes: one prefix.)
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:exitcode=86:log_path=$reports/report"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86:log_path=$reports/report"
# Left out: the tests labelled hardware (unit_hardware, cli_calibrate_quick) time this machine's
# CPU, memory and drives, which instrumented code does not measure; cli_bounds checks the release
# build's time and peak RSS, which ASan's shadow memory and checks multiply.
status=0
ctest --test-dir build-asan --output-on-failure --timeout 900 -j"$(nproc)" -LE hardware -E '^cli_bounds$' || status=1
if compgen -G "$reports/*" >/dev/null; then
  echo "sanitizer reports:" >&2
  cat "$reports"/* >&2
  status=1
fi
((status == 0)) || exit 1
echo "test.sh: sanitized build and suites took $((SECONDS - start)) s"

# Each reader fuzzed for FTPLAN_FUZZ_SECONDS (default 20) from its committed corpus.
start=$SECONDS
scripts/fuzz.sh "${FTPLAN_FUZZ_SECONDS:-20}"
echo "test.sh: fuzzing took $((SECONDS - start)) s"
