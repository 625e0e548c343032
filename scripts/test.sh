#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
# In parallel, one test per core: no test depends on an idle machine, and tests that share a
# drive take turns (tests/CMakeLists.txt).
ctest --test-dir build --output-on-failure --timeout 600 -j"$(nproc)"
