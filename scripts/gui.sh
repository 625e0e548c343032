#!/usr/bin/env bash
# Installs what is missing (Qt 6 Widgets and Charts included), builds ftplan-gui in build/, and
# opens a scenario in it (default: the main job's). Extra arguments go to ftplan-gui, e.g.
#   scripts/gui.sh scenarios/llama8b-single-gpu.yaml
#   scripts/gui.sh scenarios/llama70b-plan.yaml --screenshot plan.png   (no display needed)
set -euo pipefail
cd "$(dirname "$0")/.."
FTPLAN_WITH_GUI=1 scripts/setup.sh
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [[ -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -DFTPLAN_BUILD_GUI=ON >/dev/null
else
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DFTPLAN_BUILD_GUI=ON >/dev/null
fi
cmake --build build --target ftplan-gui --parallel "$(nproc)"
if [[ $# -eq 0 ]]; then set -- scenarios/llama70b-full-h100-vs-workstation.yaml; fi
exec build/gui/ftplan-gui "$@"
