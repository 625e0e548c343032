#!/usr/bin/env bash
# Fuzzes the readers (scenario, sweep, a sweep's journal and shard tables, model, catalog, profile,
# HF config.json, and the importers' DeepSpeed, accelerate, torchtune, torchtitan,
# TrainingArguments and PEFT readers) with libFuzzer:
# seeds each target from the files it reads in scenarios/, model_zoo/ and tests/data/ and from the
# committed corpus fuzz/corpus/TARGET, and runs each for SECONDS (default 20) on one core.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (CI: scripts/test.sh runs it for a few seconds each)
#        scripts/fuzz.sh --long [TARGET...]       (10 M executions per target: below)
# FTPLAN_FUZZ_RUNS=N also stops each target after N executions (libFuzzer's -runs; whichever of the
# two limits comes first), for a long run sized to reach a total.
# Two builds (docs/hardening.md, "Fuzzing"), both made by scripts/build-asan.sh:
# - default: build-asan/ (ASan + UBSan): what CI runs, and where a finding is reproduced;
# - FTPLAN_FUZZ_BUILD=long: build-fuzz/ (UBSan and libstdc++'s bounds checks, -O2, no ASan: 1.7-2.5x
#   the executions per CPU second) for long local runs. After each target's run, the inputs it
#   keeps (build-fuzz/fuzz/corpus/TARGET: every one reached new coverage) are run once under
#   build-asan/, so what ASan alone would see in them (a read past a buffer that does not crash, a
#   use after free, a leak) is not missed.
# New inputs go to BUILD/fuzz/corpus/TARGET (kept between runs, so a longer run continues; the
# other build's corpus is read too); a crash, hang or leak leaves its input in
# BUILD/fuzz/crashes/TARGET-* and fails the script.
# Per target it prints libFuzzer's last status line (executions, coverage, corpus, exec/s) and the
# executions per CPU second.
# --long [TARGET...]: the nightly run: each target (all by default) on the long build until it has
# run FTPLAN_FUZZ_RUNS executions (default 10 M) in this run, a day at most; per target it prints
# libFuzzer's coverage (edges, features, corpus) and, for its corpus checked under ASan, the same.
# Stop it with SIGINT, never SIGSTOP: -timeout is a wall-clock alarm (docs/hardening.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --long ]]; then
  shift
  export FTPLAN_FUZZ_BUILD=long FTPLAN_FUZZ_RUNS=${FTPLAN_FUZZ_RUNS:-10000000}
  exec "$0" 86400 "$@"
fi
seconds=${1:-20}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(scenario sweep sweep_output model catalog profile hf_config import_deepspeed import_accelerate import_torchtune
  import_torchtitan import_training_args import_peft import_axolotl import_llama_factory)

build=build-asan other=build-fuzz
if [[ ${FTPLAN_FUZZ_BUILD:-asan} == long ]]; then
  build=build-fuzz other=build-asan
  scripts/build-asan.sh "${targets[@]/#/fuzz_}"
fi
FTPLAN_FUZZ_BUILD=asan scripts/build-asan.sh "${targets[@]/#/fuzz_}"  # a long run's corpus is checked here

# Seeds: the shipped and test files of each kind.
seeds_of() {
  case $1 in
    scenario) ls scenarios/*.yaml tests/data/scenarios/* | grep -v '/sweep-' ;;
    sweep) ls scenarios/sweep-*.yaml tests/data/sweeps/*.yaml ;;
    sweep_output) ls tests/data/sweeps/journal.part tests/data/sweeps/shard.* ;;
    model) ls model_zoo/models/*.yaml ;;
    catalog) ls model_zoo/hardware/*.yaml ;;
    profile) ls model_zoo/hardware/profiles/*.yaml ;;
    hf_config) ls tests/data/hf/*/config.json ;;
    import_deepspeed) ls tests/data/import/deepspeed/*.json tests/data/import/accelerate/deepspeed_config_templates/*.json
      find tests/data/import/corpus -name '*.json' ;;
    import_accelerate) ls tests/data/import/accelerate/*.yaml tests/data/import/accelerate/config_yaml_templates/*.yaml
      grep -rl '^distributed_type' tests/data/import/corpus ;;
    import_torchtune) ls tests/data/import/torchtune/*.yaml; find tests/data/import/corpus/torchtune -name '*.yaml' ;;
    import_torchtitan) ls tests/data/import/torchtitan/*.toml; find tests/data/import/corpus -name '*.toml' ;;
    import_training_args) ls tests/data/import/hf_trainer/*.json tests/data/import/corpus/alignment-handbook/recipes/*/sft/*.yaml ;;
    import_peft) ls tests/data/import/peft/*.json ;;
    import_axolotl) find tests/data/import/corpus/axolotl -name '*.y*ml' ;;
    import_llama_factory) find tests/data/import/corpus/llama-factory/examples -name '*.yaml' -not -path '*/accelerate/*' ;;
  esac
}

# Speed (measured on fuzz_catalog: 1.85x the executions per CPU second): no 0xbe fill of new
# blocks, allocation stacks 4 frames deep, a 32 MiB quarantine of freed blocks (ASan's defaults:
# fill up to 4 KiB, 30 frames, 256 MiB). A crash's own stack is whole; rerun its input without
# these for deeper allocation stacks.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:max_malloc_fill_size=0:malloc_context_size=4:quarantine_size_mb=32
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
status=0
for t in "${targets[@]}"; do
  seeds=$build/fuzz/seeds/$t corpus=$build/fuzz/corpus/$t crashes=$build/fuzz/crashes
  rm -rf "$seeds" && mkdir -p "$seeds" "$corpus" "$crashes"
  seeds_of "$t" | while read -r f; do cp "$f" "$seeds/$(echo "$f" | tr / _)"; done
  log=$build/fuzz/$t.log
  # -timeout: one input taking longer than 10 s is a hang (wall clock: a long run niced on a busy
  # machine sets FTPLAN_FUZZ_TIMEOUT=60, or a starved process reads as a hang); -rss_limit_mb:
  # 2 GiB is a blow-up.
  more=()
  [[ -n ${FTPLAN_FUZZ_RUNS:-} ]] && more+=("-runs=$FTPLAN_FUZZ_RUNS")
  [[ -d fuzz/corpus/$t ]] && more+=("fuzz/corpus/$t")
  [[ -d $other/fuzz/corpus/$t ]] && more+=("$other/fuzz/corpus/$t")
  # The CPU seconds beside the executions: on a shared machine libFuzzer's exec/s (per wall second)
  # says more about the load than about the target.
  TIMEFORMAT='%U %S'
  if { time $build/fuzz/fuzz_"$t" "$corpus" "${more[@]}" "$seeds" -max_total_time="$seconds" -timeout="${FTPLAN_FUZZ_TIMEOUT:-10}" \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$crashes/$t-" >"$log" 2>&1; } 2>"$log.cpu"; then
    execs=$(grep -oE 'number_of_executed_units: [0-9]+' "$log" | awk '{print $2}')
    cpu=$(awk '{printf "%.0f", $1 + $2}' "$log.cpu")
    echo "fuzz_$t: $(grep -E '^#[0-9]+.*DONE' "$log" | tail -1); $execs executions in $cpu CPU s ($((execs / (cpu > 0 ? cpu : 1))) per CPU s)"
  else
    status=1
    echo "fuzz_$t: FAILED (log: $log; reproduce under ASan: build-asan/fuzz/fuzz_$t FILE)"
    grep -E 'ERROR|SUMMARY|terminate|what\(\)|Test unit written' "$log" | head -8
    continue
  fi
  if [[ $build == build-fuzz ]]; then
    # The run's corpus once under ASan (-runs=0: load and run every input, no mutation).
    check=$build/fuzz/$t.asan.log
    if build-asan/fuzz/fuzz_"$t" "$corpus" -runs=0 -timeout="${FTPLAN_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$crashes/$t-asan-" >"$check" 2>&1; then
      echo "fuzz_$t: its corpus under ASan: $(grep -E '^#[0-9]+.*INITED' "$check" | tail -1)"
    else
      status=1
      echo "fuzz_$t: its corpus under ASan FAILED (log: $check)"
      grep -E 'ERROR|SUMMARY|terminate|what\(\)|Test unit written' "$check" | head -8
    fi
  fi
done
exit $status
