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
# With a trace, simulate says where the critical path runs (the streams the GUI's timeline bands).
grep -Eq "^critical path \(what the step's end waited for\): compute [0-9]+%" "$dir/out.txt" ||
  fail "no critical path line: $(grep -i critical "$dir/out.txt")"
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
# A step ftplan refuses to simulate (past its layer-pass bound) has no trace: none is written, the
# old file stays, and the command fails (it once wrote 0 bytes over the file and exited 0).
echo old-trace >"$dir/sim/trace.json"
"$ftplan" simulate --model llama-3.1-8b --gpu h100-sxm-80gb --gpus 1 --global-batch 4096 --micro-batch 1 \
  --tokens 1B --method lora --trace "$dir/sim/trace.json" >"$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "simulate --trace of a refused step: exit status $status, expected 1"
grep -q "^error: no trace of 'quick' written to $dir/sim/trace.json: not simulated" "$dir/out.txt" ||
  fail "no error saying the trace was not written"
[[ $(cat "$dir/sim/trace.json") == old-trace ]] || fail "the old trace was lost: $(head -c 80 "$dir/sim/trace.json")"

# What an output path is decides how it is written: a device or a FIFO is written through (never
# replaced by a plain file), a symbolic link is followed (the file it names replaced, the link
# kept), "-" is standard output, a directory is refused; a dead writer's temporary is removed.
mkdir "$dir/kinds"
step() { "$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" "$@" >"$dir/out.txt" 2>&1; }
step --ir /dev/null || fail "simulate --ir /dev/null: exit status $?"
[[ -c /dev/null ]] || fail "/dev/null is no longer a character device"
mkfifo "$dir/kinds/fifo"
cat "$dir/kinds/fifo" >"$dir/kinds/from-fifo.json" &
reader=$!
step --ir "$dir/kinds/fifo" || fail "simulate --ir FIFO: exit status $?"
for _ in $(seq 50); do kill -0 $reader 2>/dev/null || break; sleep 0.1; done
kill $reader 2>/dev/null  # still waiting: nothing was written through (the FIFO was replaced)
wait $reader
[[ -p "$dir/kinds/fifo" ]] || fail "the FIFO was replaced by a plain file"
grep -q '"ops"' "$dir/kinds/from-fifo.json" || fail "nothing came through the FIFO"
echo old >"$dir/kinds/real.json"
ln -s real.json "$dir/kinds/link.json"
step --ir "$dir/kinds/link.json" || fail "simulate --ir through a symbolic link: exit status $?"
[[ -L "$dir/kinds/link.json" ]] || fail "the symbolic link was replaced by a plain file"
grep -q '"ops"' "$dir/kinds/real.json" || fail "the file the link names was not written"
"$ftplan" simulate scenarios/llama8b-single-gpu.yaml --plan "8x H100 LoRA" --ir - --format json >"$dir/kinds/stdout.txt" 2>&1 ||
  fail "simulate --ir -: exit status $?"
grep -q '"ops"' "$dir/kinds/stdout.txt" || fail "--ir - wrote nothing to standard output"
[[ ! -e "$dir/kinds/-" ]] || fail "--ir - wrote a file named -"
mkdir "$dir/kinds/adir"
step --ir "$dir/kinds/adir"
status=$?
[[ $status == 1 ]] || fail "simulate --ir DIRECTORY: exit status $status, expected 1"
grep -q "it is a directory" "$dir/out.txt" || fail "no error saying the output is a directory"
sleep 0 & dead=$!
wait $dead
# ".real.json.123.$dead..." is a temporary of real.json.123, not of real.json: never real.json's to remove.
touch "$dir/kinds/.real.json.$dead.0.0000abcd.tmp" "$dir/kinds/.real.json.$$.0.0000abcd.tmp" \
  "$dir/kinds/.real.json.$dead.$$.0.0000abcd.tmp"
step --ir "$dir/kinds/real.json" || fail "simulate --ir: exit status $?"
[[ ! -e "$dir/kinds/.real.json.$dead.0.0000abcd.tmp" ]] || fail "a dead writer's temporary was left"
[[ -e "$dir/kinds/.real.json.$$.0.0000abcd.tmp" ]] || fail "a live process's temporary was removed"
[[ -e "$dir/kinds/.real.json.$dead.$$.0.0000abcd.tmp" ]] || fail "another file's temporary was removed"

# calibrate's fio dies with it (issue 45: it ran on 1-2 s after a kill): a stand-in fio first on
# PATH writes its pid and sleeps; calibrate is killed with SIGKILL while it waits for it; the
# stand-in must be gone (or a zombie) within 2 s.
mkdir -p "$dir/fio/bin" "$dir/fio/d"
printf '#!/bin/sh\necho $$ >"%s"\nexec sleep 60\n' "$dir/fio/pid" >"$dir/fio/bin/fio"
chmod +x "$dir/fio/bin/fio"
PATH="$dir/fio/bin:$PATH" "$ftplan" calibrate --quick --no-cpu --no-gpu --storage-dir "$dir/fio/d" \
  --out "$dir/fio/profile.yaml" >"$dir/out.txt" 2>&1 &
cal=$!
for _ in $(seq 600); do [[ -s $dir/fio/pid ]] && break; sleep 0.1; done
[[ -s $dir/fio/pid ]] || { kill -9 $cal 2>/dev/null; fail "calibrate did not start the stand-in fio within 60 s"; }
kill -9 $cal
wait $cal 2>/dev/null
standin=$(cat "$dir/fio/pid")
alive() { [[ -e /proc/$1/stat ]] && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]; }
for _ in $(seq 20); do alive "$standin" || break; sleep 0.1; done
if alive "$standin"; then kill "$standin"; fail "fio (pid $standin) outlived the calibrate that started it"; fi
echo "ok"
