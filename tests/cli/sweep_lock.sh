#!/usr/bin/env bash
# Two sweeps on one --out: the second is refused at once, naming the first one's pid, and touches
# nothing; once the first is gone (even killed, leaving its lock file) the next one runs. The same
# for sweep-merge, which takes the same lock on its --out.
# The "first sweep" is flock(1) holding the lock file and writing "PID VERB" there, as a sweep or
# a sweep-merge does, so the test does not depend on how fast a real sweep runs. The refusal names
# the holder as it wrote itself: a sweep, a sweep-merge, or (a pid alone) another process.
# Usage: sweep_lock.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
cd "$(dirname "$0")/../.."  # repository root
export FTPLAN_ZOO=model_zoo
sweep=tests/data/sweeps/resume.yaml
fail() { echo "FAIL: $*"; echo "--- output"; cat "$dir/out.txt" 2>/dev/null; exit 1; }
rm -rf "$dir" && mkdir -p "$dir" || fail "cannot make $dir"
command -v flock >/dev/null || fail "flock(1) (util-linux) is not installed"

# held LOCK HOLDER ARGS...: runs `ftplan ARGS...` (output in out.txt) while a shell holds LOCK,
# having written "PID HOLDER" there as ftplan does (HOLDER "": its pid alone, as another program
# would); sets $holder to that shell's pid and $status to ftplan's exit status.
held() {
  local lock=$1 text=$2
  shift 2
  # shellcheck disable=SC2016  # $$ and $1.. belong to the inner shell
  flock -n "$lock" sh -c 'echo "$$${1:+ $1}" >"$2"; echo $$ >"$3"; out=$4; shift 4; "$@" >"$out" 2>&1; echo $? >"$out.status"' \
    sh "$text" "$lock" "$dir/holder.pid" "$dir/out.txt" "$ftplan" "$@" || fail "flock could not take $lock"
  holder=$(cat "$dir/holder.pid")
  status=$(cat "$dir/out.txt.status")
}

held "$dir/out.csv.lock" sweep sweep "$sweep" --out "$dir/out.csv" --quiet
[[ $status == 1 ]] || fail "the second sweep: exit status $status, expected 1"
grep -q "^error: $dir/out.csv: another ftplan sweep writes this file, pid $holder (lock $dir/out.csv.lock)$" "$dir/out.txt" ||
  fail "no error naming the other sweep's pid $holder"
[[ ! -e "$dir/out.csv" && ! -e "$dir/out.csv.part" ]] || fail "the refused sweep wrote something"
[[ -e "$dir/out.csv.lock" ]] || fail "the refused sweep removed the holder's lock file"

# The holder is gone; its lock file (with its pid) is left, as after a kill: the next sweep runs.
"$ftplan" sweep "$sweep" --out "$dir/out.csv" --quiet >"$dir/out.txt" 2>&1 || fail "the sweep after the holder: exit status $?"
[[ $(wc -l <"$dir/out.csv") == 73 ]] || fail "out.csv has $(wc -l <"$dir/out.csv") lines, expected 1 + 72"
[[ ! -e "$dir/out.csv.lock" && ! -e "$dir/out.csv.part" ]] || fail "lock file or journal left after the sweep"

# A sweep refused by a sweep-merge that writes the file names the sweep-merge.
held "$dir/out.csv.lock" sweep-merge sweep "$sweep" --out "$dir/out.csv" --quiet
[[ $status == 1 ]] || fail "the sweep refused by a merge: exit status $status, expected 1"
grep -q "^error: $dir/out.csv: another ftplan sweep-merge writes this file, pid $holder (lock $dir/out.csv.lock)$" \
  "$dir/out.txt" || fail "no error naming the sweep-merge that holds the lock, pid $holder"
rm -f "$dir/out.csv.lock"

# sweep-merge takes the same lock on its --out: refused while another process holds it (here one
# that wrote only its pid), writing nothing; runs once the holder is gone, and removes its lock file.
held "$dir/merged.csv.lock" "" sweep-merge --out "$dir/merged.csv" "$dir/out.csv"
[[ $status == 1 ]] || fail "the locked sweep-merge: exit status $status, expected 1"
grep -q "^error: $dir/merged.csv: another process writes this file, pid $holder (lock $dir/merged.csv.lock)$" "$dir/out.txt" ||
  fail "sweep-merge: no error naming the holder's pid $holder"
[[ ! -e "$dir/merged.csv" ]] || fail "the refused sweep-merge wrote its output"
"$ftplan" sweep-merge --out "$dir/merged.csv" "$dir/out.csv" >"$dir/out.txt" 2>&1 || fail "sweep-merge after the holder: exit status $?"
cmp -s "$dir/merged.csv" "$dir/out.csv" || fail "merging one complete shard changed it"
[[ ! -e "$dir/merged.csv.lock" ]] || fail "sweep-merge left its lock file"

# A shard a sweep still writes (its lock held) is not merged: refused naming the sweep's pid.
held "$dir/out.csv.lock" sweep sweep-merge --out "$dir/merged2.csv" "$dir/out.csv"
[[ $status == 2 ]] || fail "sweep-merge of a shard being written: exit status $status, expected 2"
grep -q "^error: $dir/out.csv: ftplan sweep (pid $holder) is still writing it: merge when it has finished$" "$dir/out.txt" ||
  fail "sweep-merge: no error naming the running sweep's pid $holder"
[[ ! -e "$dir/merged2.csv" ]] || fail "the refused sweep-merge wrote its output"
rm -f "$dir/out.csv.lock"

# Storage and state directories: one calibrate or validate at a time, the holder named.
mkdir "$dir/storage"
held "$dir/storage/ftplan-directory.lock" calibrate calibrate --quick --no-cpu --no-gpu --storage-dir "$dir/storage" \
  --out "$dir/profile.yaml"
[[ $status == 1 ]] || fail "calibrate on a directory in use: exit status $status, expected 1"
grep -q "^error: $dir/storage: another ftplan calibrate uses this directory, pid $holder$" "$dir/out.txt" ||
  fail "calibrate: no error naming the other calibrate's pid $holder"
[[ ! -e "$dir/profile.yaml" ]] || fail "the refused calibrate wrote a profile"
echo "ok"
