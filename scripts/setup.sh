#!/usr/bin/env bash
# Installs the Debian packages ftplan builds with, skipping the work when all are present.
# Idempotent: run it as often as you like. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libeigen3-dev libfmt-dev libyaml-cpp-dev doctest-dev nlohmann-json3-dev
  # core/io/yaml_reader.cpp: libyaml parses YAML text into yaml-cpp's nodes (7x fewer instructions).
  libyaml-dev
  # core/io/import: torchtitan's train configs are TOML; toml++ reports line and column of every value.
  libtomlplusplus-dev
  # calibrate/: io_uring for the storage benchmarks, and fio as the reference they are checked against.
  liburing-dev fio
  # tests: scripts/long_functions.py --check (ctest long_functions), scripts/check-format.sh (ctest format).
  python3 clang-format-14
)
# The GUI (FTPLAN_BUILD_GUI) needs Qt 6 Widgets and Charts; installed on request: FTPLAN_WITH_GUI=1.
if [[ "${FTPLAN_WITH_GUI:-0}" == 1 ]]; then
  # qt6-svg-dev: charts exported as SVG (optional: without it the window exports PNG only).
  packages+=(qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev libgl-dev)
fi
# The sanitized build (scripts/build-asan.sh: scripts/test.sh, so CI, and scripts/fuzz.sh) needs
# Clang 14 with its ASan, UBSan and libFuzzer runtimes: FTPLAN_WITH_FUZZ=1 (those scripts set it).
if [[ "${FTPLAN_WITH_FUZZ:-0}" == 1 ]]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
