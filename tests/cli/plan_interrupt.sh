#!/usr/bin/env bash
# `ftplan plan` over a large search: progress on stderr while it runs, and Ctrl-C (SIGINT) prints
# the best plans among those simulated so far, then exits with 130 (128 + SIGINT).
# Usage: plan_interrupt.sh FTPLAN SCRATCH_DIR
set -uo pipefail
set -m  # the search runs as a job of its own, so SIGINT is not ignored in it
ftplan=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
cd "$(dirname "$0")/../.."
export FTPLAN_ZOO=model_zoo
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$dir/out.txt"; echo "--- stderr"; cat "$dir/err.txt"; exit 1; }
# The example search, widened to 15 GPU types x 13 counts (336,960 layouts, 42 s on this 2-core VM): long on one
# thread on any machine, so the search is still running when the first progress line (after 5 s) has
# been printed and the interrupt is sent. (A fixed sleep raced a fast machine: 54,000 layouts ended
# in 5.5 s.)
sed -e 's/gpus: \[.*\]/gpus: [h100-sxm-80gb, a100-sxm4-80gb, rtx-6000-ada, h200-sxm-141gb, b200, l40s, a100-sxm4-40gb, h100-pcie-80gb, mi300x, h100-96gb-500w, a100-pcie-80gb, rtx-a6000, rtx-4090, l4, v100-sxm2-32gb]/' \
    -e 's/gpu_counts: .*/gpu_counts: [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]/' \
    -e 's/pp: .*/pp: [1, 2, 4, 8]/' \
    -e 's/zero: .*/zero: [0, 1, 2, 3]/' -e "s/micro_batch: .*/micro_batch: [1, 2, 4, 8]/" -e "s/activation_checkpointing: .*/activation_checkpointing: [none, selective, full]/" \
    -e 's/max_gpus: .*/max_gpus: 256/' scenarios/llama70b-plan.yaml >"$dir/wide.yaml"
"$ftplan" plan --threads 1 "$dir/wide.yaml" >"$dir/out.txt" 2>"$dir/err.txt" &
pid=$!
# Interrupt once the first progress line is out (they come every 5 s when stderr is not a terminal).
for ((i = 0; i < 600; i++)); do
  grep -Eq '^plan: [0-9]+/[0-9]+ layouts' "$dir/err.txt" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$pid" 2>/dev/null || fail "the search ended before it could be interrupted"
kill -INT "$pid"
wait "$pid"
status=$?
[[ $status == 130 ]] || fail "exit status $status, expected 130"
grep -Eq '^plan: [0-9]+/[0-9]+ layouts' "$dir/err.txt" || fail "no progress line on stderr"
grep -q '^interrupted: [0-9]* of [0-9]* layouts examined' "$dir/err.txt" || fail "no word of the interruption"
grep -q 'examined before the interruption' "$dir/out.txt" || fail "the summary does not say the search was cut short"
grep -q '^best plans within' "$dir/out.txt" || fail "no best plans printed"
grep -q 'fastest' "$dir/out.txt" || fail "no fastest plan line"
echo "ok"
