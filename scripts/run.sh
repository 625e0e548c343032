#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on the default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
exec build/cli/ftplan compare scenarios/llama70b-full-h100-vs-workstation.yaml "$@"
