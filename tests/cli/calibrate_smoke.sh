#!/usr/bin/env bash
# Smoke test of `ftplan calibrate --quick`: runs it on a scratch directory and checks that it exits 0,
# writes a profile, reports the CPU and storage figures, says
# plainly what it did with the GPU, and leaves no scratch file behind.
# Usage: calibrate_smoke.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir/drive"
fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$dir/out.txt"; echo "--- stderr"; cat "$dir/err.txt"; exit 1; }
"$ftplan" calibrate --quick --repeats 2 --storage-dir "$dir/drive" --out "$dir/profile.yaml" >"$dir/out.txt" 2>"$dir/err.txt" \
  || fail "exit status $?"
grep -q '^schema_version: 1$' "$dir/profile.yaml" || fail "no schema_version in the profile"
grep -q 'STREAM triad' "$dir/out.txt" || fail "no triad figure"
grep -q 'AdamW step' "$dir/out.txt" || fail "no AdamW figure"
grep -q 'read 1 MiB QD16' "$dir/out.txt" || fail "no storage figure"
if command -v fio >/dev/null; then grep -q ' fio$' "$dir/out.txt" || fail "fio installed but not beside the storage figures"; fi
grep -qE 'GPU not measured: |gemm ' "$dir/out.txt" || fail "nothing said about the GPU"
grep -q '^\[ 1/' "$dir/err.txt" || fail "no progress on stderr"
grep -q '^cpu device  GEMM fp32, median of ' "$dir/out.txt" || fail "no CPU device GEMM figure"
grep -q '^cpu device  read .*drive striped' "$dir/out.txt" || fail "no CPU device storage figure"
grep -q '^cpu_device:$' "$dir/profile.yaml" || fail "no cpu_device section in the profile"
[[ -z "$(ls -A "$dir/drive")" ]] || fail "scratch files left behind: $(ls -A "$dir/drive")"

# validate predicts from that profile (issue 40): a small plan, two steps.
small=(scenarios/validate-local.yaml --plan ZeRO-Infinity --scale layers=2,hidden=128,vocab=512,seq=128 --steps 2
  --storage-dir "$dir/drive")
cd "$(dirname "$0")/../.."
"$ftplan" validate "${small[@]}" --profile "$dir/profile.yaml" >"$dir/out.txt" 2>"$dir/err.txt" ||
  fail "validate --profile: exit status $?"
grep -q 'predicted (profile)' "$dir/out.txt" || fail "validate did not say the prediction is the profile's"
"$ftplan" validate "${small[@]}" --format json --profile "$dir/profile.yaml" --in-run-rates >"$dir/out.txt" 2>"$dir/err.txt" ||
  fail "validate --in-run-rates: exit status $?"
grep -q '"rates_from": "profile"' "$dir/out.txt" || fail "no rates_from in the JSON"
grep -q '"in_run_step_time_error_pct"' "$dir/out.txt" || fail "no in-run diagnostic in the JSON"
# Without a profile it refuses plainly (exit 2), and says how to make one.
"$ftplan" validate "${small[@]}" >"$dir/out.txt" 2>"$dir/err.txt"
[[ $? == 2 ]] || fail "validate without --profile: exit status not 2"
grep -q 'ftplan calibrate --quick --storage-dir DIR --out P' "$dir/err.txt" || fail "no advice on making a profile"
[[ -z "$(ls -A "$dir/drive")" ]] || fail "validate left files behind: $(ls -A "$dir/drive")"
echo "ok"
