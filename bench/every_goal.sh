#!/bin/bash
# Every goal of the performance issue in one run (docs/performance.md, "Every goal in one run"):
# the peer's three cases, the DES engine's workloads, the 8B sweep, the simulated step at scale
# and the Calculon-sized planner search, each bench printing its figure and ratio.
#
#   bench/every_goal.sh [BUILD [BASELINE_BUILD]]     (defaults: build, no baseline)
#
# With BASELINE_BUILD (an older commit's build folder), the GPT-3 case and the DES 'local'
# workload also run in alternating pairs, baseline first: this machine's rate moves with the
# host's load within a minute, so a figure is only comparable with the one run beside it.
# Figures are per CPU second of one thread where the bench says so. Nothing here is a test.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
base=${2:-}
pairs=${PAIRS:-3}

for b in calculon_bench des_bench sweep_bench parallel_bench planner_bench; do
  if [[ ! -x "$build/bench/$b" ]]; then
    echo "every_goal.sh: $build/bench/$b is missing: build it first (scripts/build.sh)" >&2
    exit 1
  fi
done
if [[ -n "$base" && ! -x "$base/bench/calculon_bench" ]]; then
  echo "every_goal.sh: $base/bench/calculon_bench is missing (BASELINE_BUILD)" >&2
  exit 1
fi

echo "$(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg); $(git log --oneline -1 2>/dev/null | cut -c1-60)"
echo "== the peer's cases (calculon_bench 3)"
"$build/bench/calculon_bench" 3
if [[ -n "$base" ]]; then
  for i in $(seq "$pairs"); do
    echo "== GPT-3 pair $i: baseline, then this build"
    "$base/bench/calculon_bench" 2 2 | grep -v '^#' | tail -1
    "$build/bench/calculon_bench" 2 2 | grep -v '^#' | tail -1
  done
  for i in $(seq "$pairs"); do
    echo "== DES 'local' pair $i: baseline, then this build"
    "$base/bench/des_bench" 1000000 local | grep '^local'
    "$build/bench/des_bench" 1000000 local | grep '^local'
  done
fi
echo "== DES engine (des_bench 1000000)"
"$build/bench/des_bench" 1000000
echo "== sweep of the 8B grid (sweep_bench 1)"
"$build/bench/sweep_bench" 1
echo "== a step at scale (parallel_bench)"
"$build/bench/parallel_bench"
echo "== the Calculon-sized planner search (planner_bench bench/data/plan-22b-8xa100.yaml)"
"$build/bench/planner_bench" bench/data/plan-22b-8xa100.yaml
