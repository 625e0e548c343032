#!/usr/bin/env bash
# `ftplan simulate --ir`: writes the step IR of each plan (one file per pipeline stage) as JSON an
# executor can read (docs/step-ir.md), and names the files on stdout.
# Usage: simulate_ir.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*"; cat "$dir/out.txt"; exit 1; }
"$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" --ir "$dir/step.json" >"$dir/out.txt" 2>&1 \
  || fail "exit status $?"
grep -q "step IR of '8x H100 LoRA' written to $dir/step.json" "$dir/out.txt" || fail "the file is not named on stdout"
# (The graph's consistency is checked in tests/unit/schedule_test.cpp; here, that the file is it.)
grep -q '"format": "ftplan-step-ir"' "$dir/step.json" || fail "no format in the file"
grep -q '"kind": "gemm"' "$dir/step.json" || fail "no GEMM in the file"
grep -q '"element": "bf16"' "$dir/step.json" || fail "no element types in the file"
# A pipeline writes one file per stage.
"$ftplan" simulate --model llama-3.1-8b --gpu h100-sxm-80gb --gpus 8 --tp 2 --pp 2 --framework megatron --zero 1 --seq 1024 \
  --ir "$dir/pp.json" >"$dir/out.txt" 2>&1 || fail "pipeline: exit status $?"
[[ -s "$dir/pp.stage0.json" && -s "$dir/pp.stage1.json" ]] || fail "no file per stage: $(ls "$dir")"
echo "ok"
