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

# --set on a scenario file is applied, not ignored (issue 41): the rows are those of the file
# with the key edited in, a plan's keys reach every plan, and a key the reader does not know, or a
# plan the file does not have, is refused by name.
sed 's/rank: 8,/rank: 64,/' "$dir/qvo.yaml" >"$dir/r64.yaml"
"$ftplan" memory "$dir/r64.yaml" --format csv >"$dir/r64.csv" 2>&1 || fail "rank 64: $(cat "$dir/r64.csv")"
cmp -s "$dir/file.csv" "$dir/r64.csv" && fail "job.lora.rank does not change memory's rows; pick another key"
"$ftplan" memory "$dir/qvo.yaml" --set job.lora.rank=64 --format csv >"$dir/set.csv" 2>&1 || fail "--set on a file: $(cat "$dir/set.csv")"
diff -u "$dir/r64.csv" "$dir/set.csv" || fail "--set job.lora.rank=64 on the file differs from the file with rank: 64"
sed 's/gpus: 1}/gpus: 2}/' "$dir/qvo.yaml" >"$dir/two.yaml"
"$ftplan" memory "$dir/two.yaml" --format csv >"$dir/two.csv" 2>&1 || fail "two GPUs: $(cat "$dir/two.csv")"
for key in cluster.gpus plans.quick.cluster.gpus 'plans.*.cluster.gpus' plans.0.cluster.gpus 'plans[quick].cluster.gpus'; do
  "$ftplan" memory "$dir/qvo.yaml" --set "$key=2" --format csv >"$dir/set.csv" 2>&1 || fail "--set $key=2: $(cat "$dir/set.csv")"
  diff -u "$dir/two.csv" "$dir/set.csv" || fail "--set $key=2 on the file differs from the file with gpus: 2"
done
out=$("$ftplan" memory "$dir/qvo.yaml" --set this.is.not.a.key=1 2>&1)
[[ $? == 2 ]] || fail "an unknown key on a file: exit status, output: $out"
grep -q "with --set this.is.not.a.key: this: unknown key" <<<"$out" || fail "an unknown key is not named: $out"
out=$("$ftplan" memory "$dir/qvo.yaml" --set plans.other.cluster.gpus=2 2>&1)
[[ $? == 2 ]] || fail "an unknown plan: exit status, output: $out"
grep -q "no plan 'other'" <<<"$out" || fail "an unknown plan is not named: $out"
echo "ok"
