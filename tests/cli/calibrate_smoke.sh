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
[[ -z "$(ls -A "$dir/drive")" ]] || fail "scratch files left behind: $(ls -A "$dir/drive")"
echo "ok"
