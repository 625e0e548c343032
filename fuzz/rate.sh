#!/usr/bin/env bash
# Executions per CPU second of one fuzz target, in several builds, on the same fixed corpus and
# the same libFuzzer seed, so the figures compare (docs/hardening.md, "Speed of the harnesses").
# Each build runs twice from a fresh copy of CORPUS: -runs=0 (loading the corpus: every input run
# once) and -runs=RUNS; the rate is (RUNS - loaded) / (CPU(RUNS) - CPU(0)), the fuzzing loop
# alone, and the corpus load is printed beside it. The first build is the baseline of the ratios.
# Usage: fuzz/rate.sh RUNS TARGET CORPUS BUILD_DIR... [-- LIBFUZZER_ARGS...]
#   e.g. fuzz/rate.sh 20000 catalog fuzz/corpus/catalog build-asan build-fuzz -- -max_len=65536
set -euo pipefail
runs=$1 target=$2 corpus=$3
shift 3
builds=()
while (($#)) && [[ $1 != -- ]]; do builds+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
extra=("$@")
# The options scripts/fuzz.sh runs with (they matter: see there).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:max_malloc_fill_size=0:malloc_context_size=4:quarantine_size_mb=32
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cpu_of() {  # RUNS BUILD: prints "executions cpu_seconds" of one run from a fresh corpus copy
  rm -rf "$tmp/c" && cp -r "$corpus" "$tmp/c"
  /usr/bin/time -f '%U %S' -o "$tmp/time" "$2/fuzz/fuzz_$target" "$tmp/c" -seed=1 -runs="$1" "${extra[@]}" \
    >"$tmp/log" 2>&1 || { tail -20 "$tmp/log" >&2; exit 1; }
  local done_runs
  done_runs=$(grep -oE '^Done [0-9]+ runs' "$tmp/log" | awk '{print $2}')
  [[ -n $done_runs ]] || done_runs=$(grep -oE '^#[0-9]+ +INITED' "$tmp/log" | tr -d '#' | awk '{print $1}')
  echo "$done_runs $(awk '{print $1 + $2}' "$tmp/time")"
}

base=
for b in "${builds[@]}"; do
  read -r n0 c0 < <(cpu_of 0 "$b")
  read -r n1 c1 < <(cpu_of "$runs" "$b")
  rate=$(awk -v n="$((n1 - n0))" -v c="$c1" -v c0="$c0" 'BEGIN { printf "%.0f", n / (c - c0) }')
  [[ -n $base ]] || base=$rate
  printf '%s %-10s load %d inputs %.1f CPU s | loop %d execs %.1f CPU s: %d exec/CPU s (x%.2f)\n' \
    "$target" "$b" "$n0" "$c0" "$((n1 - n0))" "$(awk -v a="$c1" -v b="$c0" 'BEGIN{print a-b}')" "$rate" \
    "$(awk -v r="$rate" -v b="$base" 'BEGIN{print r/b}')"
done
