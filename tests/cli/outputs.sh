#!/usr/bin/env bash
# The files the CLI writes are replaced whole or not at all: a write that fails midway (here the
# file-size limit, `ulimit -f`, which fails writes as a full disk does) keeps the previous file and
# leaves no temporary beside it; a calibration that measured none of its storage directories
# fails and keeps the previous profile.
# Usage: outputs.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
cd "$(dirname "$0")/../.."  # repository root
export FTPLAN_ZOO=model_zoo
fail() { echo "FAIL: $*"; echo "--- output"; cat "$dir/out.txt" 2>/dev/null; exit 1; }
rm -rf "$dir" && mkdir -p "$dir" || fail "cannot make $dir"
files() { (cd "$dir/$1" && ls -A | tr '\n' ' '); }

# simulate --trace and --ir: written whole when they fit ...
mkdir "$dir/sim"
"$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" --trace "$dir/sim/trace.json" \
  --ir "$dir/sim/step.json" >"$dir/out.txt" 2>&1 || fail "simulate: exit status $?"
[[ $(tail -c 2 "$dir/sim/trace.json" | tr -d '\n') == *"}"* ]] || fail "the trace does not end its JSON"
trace_bytes=$(wc -c <"$dir/sim/trace.json")
((trace_bytes > 64 * 1024)) || fail "the trace is $trace_bytes bytes; the test needs more than 64 KiB"
# ... and past a 64 KiB file-size limit the old files stay as they were, and nothing else appears.
echo old-trace >"$dir/sim/trace.json"
echo old-ir >"$dir/sim/step.json"
(ulimit -f 64 && exec "$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" \
  --trace "$dir/sim/trace.json" >"$dir/out.txt" 2>&1)
status=$?
[[ $status == 1 ]] || fail "simulate --trace past the file-size limit: exit status $status, expected 1"
grep -q "^error: writing $dir/sim/trace.json failed: File too large" "$dir/out.txt" || fail "no error naming the trace"
[[ $(cat "$dir/sim/trace.json") == old-trace ]] || fail "the old trace was lost: $(head -c 80 "$dir/sim/trace.json")"
(ulimit -f 64 && exec "$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" \
  --ir "$dir/sim/step.json" >"$dir/out.txt" 2>&1)
status=$?
[[ $status == 1 ]] || fail "simulate --ir past the file-size limit: exit status $status, expected 1"
[[ $(cat "$dir/sim/step.json") == old-ir ]] || fail "the old step IR was lost: $(head -c 80 "$dir/sim/step.json")"
[[ $(files sim) == "step.json trace.json " ]] || fail "files left beside the outputs: $(files sim)"

# calibrate: storage asked for on a directory that cannot hold a file (/proc: no free space, like a
# full or read-only disk) measures nothing there, so it fails, and the old profile stays.
mkdir "$dir/cal"
echo old-profile >"$dir/cal/profile.yaml"
"$ftplan" calibrate --quick --no-cpu --no-gpu --storage-dir /proc --out "$dir/cal/profile.yaml" >"$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "calibrate with nothing measurable: exit status $status, expected 1"
grep -q "^error: storage: not one of the directories asked for could be measured" "$dir/out.txt" ||
  fail "no error saying storage measured nothing"
[[ $(cat "$dir/cal/profile.yaml") == old-profile ]] || fail "the old profile was lost"
[[ $(files cal) == "profile.yaml " ]] || fail "files left beside the profile: $(files cal)"
# A directory that is not there fails at once, before anything is measured.
"$ftplan" calibrate --quick --no-gpu --storage-dir "$dir/none" --out "$dir/cal/profile.yaml" >"$dir/out.txt" 2>&1
status=$?
[[ $status == 2 ]] || fail "calibrate --storage-dir on a missing directory: exit status $status, expected 2"
grep -q "^error: --storage-dir: '$dir/none' is not a directory (it does not exist)" "$dir/out.txt" ||
  fail "no error naming the missing directory"
[[ $(cat "$dir/cal/profile.yaml") == old-profile ]] || fail "the old profile was lost"
echo "ok"
