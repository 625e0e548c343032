#!/usr/bin/env bash
# Each example config of tests/data/import (tests/data/import/README.md) imports into a scenario
# that `check` accepts and `simulate` runs end to end; `simulate --from` gives the same rows as
# simulating the written file; the written file names every config file it read.
# Usage: import.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
cd "$(dirname "$0")/../.."
export FTPLAN_ZOO=model_zoo
fail() { echo "FAIL: $*"; exit 1; }
d=tests/data/import
n=0
round_trip() {
  n=$((n + 1))
  local out="$dir/$n.yaml"
  "$ftplan" import "$@" --gpu h100-sxm-80gb --out "$out" >"$dir/$n.log" 2>&1 || fail "import $*: $(cat "$dir/$n.log")"
  grep -q "^wrote $out: " "$dir/$n.log" || fail "import $*: no summary: $(cat "$dir/$n.log")"
  for f in "$@"; do
    [[ $f == -* || ! -f $f ]] && continue
    grep -q "^#   $f (" "$out" || fail "import $*: $out does not name $f"
  done
  "$ftplan" check "$out" >"$dir/$n.check" 2>&1 || fail "check of import $*: $(cat "$dir/$n.check")"
  grep -q "scenario is valid: 1 plan(s)" "$dir/$n.check" || fail "check of import $*: $(cat "$dir/$n.check")"
  "$ftplan" simulate "$out" --format csv >"$dir/$n.csv" 2>&1 || fail "simulate of import $*: $(cat "$dir/$n.csv")"
  "$ftplan" simulate --from "$@" --gpu h100-sxm-80gb --format csv >"$dir/$n.from.csv" 2>"$dir/$n.from.err" ||
    fail "simulate --from $*: $(cat "$dir/$n.from.err")"
  cmp -s "$dir/$n.csv" "$dir/$n.from.csv" || fail "simulate --from $* differs from simulating the imported file"
  [[ $(wc -l <"$dir/$n.csv") -eq 2 ]] || fail "simulate of import $*: expected a header and one row: $(cat "$dir/$n.csv")"
}
round_trip $d/deepspeed/ds_config_func_bs8_zero2_offload.json --model llama-3.2-1b --gpus 8
round_trip $d/deepspeed/ds_config_z3.json --model llama-3.2-1b --gpus 8
round_trip $d/deepspeed/zero_stage3_offload_config.json --model llama-3.1-8b --gpus 8
round_trip $d/accelerate/config_yaml_templates/deepspeed.yaml --model llama-3.2-1b
round_trip $d/accelerate/config_yaml_templates/fsdp.yaml --model llama-3.2-1b
round_trip $d/accelerate/config_yaml_templates/multi_gpu.yaml --model llama-3.2-1b
round_trip $d/accelerate/peft_fsdp_config_qlora.yaml --model llama-3.2-1b
round_trip $d/torchtune/8B_lora.yaml --gpus 2
round_trip $d/torchtune/8B_qlora_single_device.yaml --gpus 1
round_trip $d/torchtune/8B_full.yaml --gpus 8
round_trip $d/torchtitan/llama3_8b.toml --gpus 8
round_trip $d/torchtitan/llama3_70b.toml --gpus 64
round_trip $d/hf_trainer/run_peft_deepspeed_args.json $d/hf_trainer/accelerate_deepspeed_config.yaml
round_trip $d/peft/adapter_config.json --model llama-3.2-3b --gpus 1
# --from lists the keys it does not use on stderr, in table output.
"$ftplan" memory --from $d/torchtitan/llama3_8b.toml --gpu h100-sxm-80gb --gpus 8 >"$dir/t.txt" 2>"$dir/t.err" ||
  fail "memory --from: $(cat "$dir/t.err")"
grep -q "^note: .* key(s) of the configs are not used" "$dir/t.err" || fail "memory --from: no list of unused keys"
grep -q "checkpoint: paths, logging" "$dir/t.err" || fail "memory --from: [checkpoint] not listed: $(cat "$dir/t.err")"
echo "ok: $n imports round-trip through check and simulate"
