#!/usr/bin/env bash
# A full disk (issue 45): on a small file system every writer fails with an error naming its file,
# keeps the previous file and leaves no temporary; a sweep that ran out of space resumes once space
# is freed and ends with the file an uninterrupted run writes. The file system is a tmpfs of a few
# hundred KiB, mounted here: it needs root (or CAP_SYS_ADMIN); elsewhere the test is skipped
# (exit 77, which ctest reports as skipped).
# Usage: disk_full.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
cd "$(dirname "$0")/../.."  # repository root
export FTPLAN_ZOO=model_zoo
fail() { echo "FAIL: $*"; echo "--- output"; cat "$dir/out.txt" 2>/dev/null; exit 1; }
rm -rf "$dir" && mkdir -p "$dir/full" || fail "cannot make $dir"
mnt=$dir/full
if ! mount -t tmpfs -o size=256k tmpfs "$mnt" 2>/dev/null; then
  echo "skipped: cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN)"
  exit 77
fi
trap 'umount "$mnt" 2>/dev/null' EXIT
files() { (cd "$mnt" && ls -A | grep -v '^filler$' | tr '\n' ' '); }
fill() {  # leaves about $1 KiB free
  rm -f "$mnt/filler"
  local free_kib
  free_kib=$(df -k --output=avail "$mnt" | tail -1)
  ((free_kib > $1)) && head -c $(((free_kib - $1) * 1024)) /dev/zero >"$mnt/filler"
}

# simulate --trace (about 1 MiB) and --ir with 16 KiB free: refused whole, the old files kept.
echo old-trace >"$mnt/trace.json"
echo old-ir >"$mnt/step.json"
fill 16
"$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" --trace "$mnt/trace.json" >"$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "simulate --trace on a full disk: exit status $status, expected 1"
grep -q "^error: writing $mnt/trace.json failed: No space left on device" "$dir/out.txt" || fail "no error naming the trace"
[[ $(cat "$mnt/trace.json") == old-trace ]] || fail "the old trace was lost"
"$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" --ir "$mnt/step.json" >"$dir/out.txt" 2>&1
[[ $? == 1 ]] || fail "simulate --ir on a full disk did not fail"
[[ $(cat "$mnt/step.json") == old-ir ]] || fail "the old step IR was lost"
[[ $(files) == "step.json trace.json " ]] || fail "files left on the full disk: $(files)"

# import --out: the same.
echo old-scenario >"$mnt/imported.yaml"
fill 1
"$ftplan" import tests/data/import/torchtune/8B_lora.yaml --gpu h100-sxm-80gb --gpus 2 --out "$mnt/imported.yaml" \
  >"$dir/out.txt" 2>&1
[[ $? == 1 ]] || fail "import --out on a full disk did not fail"
grep -q "$mnt/imported.yaml" "$dir/out.txt" || fail "the import error does not name its file"
[[ $(cat "$mnt/imported.yaml") == old-scenario ]] || fail "the old imported scenario was lost"
rm -f "$mnt/imported.yaml" "$mnt/trace.json" "$mnt/step.json"

# A sweep whose journal fills the disk stops with an error; with space freed, the same command
# resumes and writes the file an uninterrupted run writes.
sweep=tests/data/sweeps/resume.yaml
"$ftplan" sweep "$sweep" --out "$dir/ref.csv" --quiet 2>/dev/null || fail "the reference sweep failed"
fill 24
"$ftplan" sweep "$sweep" --out "$mnt/out.csv" --threads 1 --quiet >"$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "the sweep on a full disk: exit status $status, expected 1"
grep -q "No space left on device" "$dir/out.txt" || fail "the sweep's error does not say the disk is full"
[[ ! -e "$mnt/out.csv" ]] || fail "the sweep's output appeared before it was complete"
[[ -s "$mnt/out.csv.part" ]] || fail "the sweep kept no journal of the points it finished"
rm -f "$mnt/filler"
"$ftplan" sweep "$sweep" --out "$mnt/out.csv" --threads 1 --quiet >"$dir/out.txt" 2>&1 || fail "the resumed sweep failed"
cmp -s "$mnt/out.csv" "$dir/ref.csv" || fail "the resumed sweep's file differs from an uninterrupted run's"
[[ $(files) == "out.csv " ]] || fail "files left after the resumed sweep: $(files)"
echo "ok"
