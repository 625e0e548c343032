#!/usr/bin/env bash
# Lists on the command line read as in YAML: `--set job.lora.targets=q,v,o`, `=[q,v,o]` and
# `--lora-targets q,v,o` / `[q,v,o]` give the same rows as a scenario file with
# `targets: [q, v, o]`, and other rows than the default targets; a comma before KEY= starts the
# next --set item. Usage: set_lists.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*"; exit 1; }
quick=(memory --model llama-3.1-8b --gpu h100-sxm-80gb --gpus 1 --format csv)
cat >"$dir/qvo.yaml" <<'YAML'
schema_version: 1
name: command line
model: llama-3.1-8b
job:
  method: lora
  lora: {rank: 8, targets: [q, v, o]}
  steps: 1
plans:
  - name: quick
    cluster: {gpu: h100-sxm-80gb, gpus: 1}
YAML
"$ftplan" memory "$dir/qvo.yaml" --format csv >"$dir/file.csv" 2>&1 || fail "the scenario file: $(cat "$dir/file.csv")"
"$ftplan" "${quick[@]}" --method lora --lora-rank 8 >"$dir/default.csv" 2>&1 || fail "default targets: $(cat "$dir/default.csv")"
cmp -s "$dir/file.csv" "$dir/default.csv" && fail "targets [q, v, o] give the same rows as the default targets"
n=0
check() {
  n=$((n + 1))
  "$ftplan" "${quick[@]}" "$@" >"$dir/$n.csv" 2>&1 || fail "$*: exit status $?: $(cat "$dir/$n.csv")"
  diff -u "$dir/file.csv" "$dir/$n.csv" || fail "$* differs from the scenario file"
}
check --method lora --lora-rank 8 --set job.lora.targets=q,v,o
check --method lora --lora-rank 8 --set 'job.lora.targets=[q,v,o]'
check --method lora --lora-rank 8 --set 'job.lora.targets=[q, v, o]'
check --set job.method=lora,job.lora.targets=q,v,o,job.lora.rank=8
check --set 'job.lora.targets=[q,v,o],job.method=lora,job.lora.rank=8'
check --method lora --lora-rank 8 --lora-targets q,v,o
check --method lora --lora-rank 8 --lora-targets '[q,v,o]'
# A wrong item in a list is named by itself.
out=$("$ftplan" "${quick[@]}" --method lora --set job.lora.targets=q,x 2>&1)
[[ $? == 2 ]] || fail "a bad target: exit status, output: $out"
grep -q "'x' is not a module LoRA can target" <<<"$out" || fail "a bad target is not named: $out"
echo "ok"
