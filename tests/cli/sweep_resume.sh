#!/usr/bin/env bash
# `ftplan sweep` end to end: stop a sweep mid-way with its journal's last line cut short (as a
# crash, a Slurm preemption or a full disk leaves it), rerun the same command, and check the result
# is each point exactly once and byte-identical to an uninterrupted run (with another thread
# count); shards merged by `ftplan sweep-merge` give the same file too, in CSV and JSON Lines.
# Usage: sweep_resume.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
cd "$(dirname "$0")/../.."  # repository root
export FTPLAN_ZOO=model_zoo
sweep=tests/data/sweeps/resume.yaml  # 36 points x 2 plans
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$dir" && mkdir -p "$dir" || fail "cannot make $dir"

# An uninterrupted run on 2 threads: the reference.
"$ftplan" sweep "$sweep" --out "$dir/ref.csv" --threads 2 --quiet 2>/dev/null || fail "reference run failed"
[[ -f "$dir/ref.csv" && ! -e "$dir/ref.csv.part" ]] || fail "reference run left no file or a journal"
[[ $(wc -l <"$dir/ref.csv") == 73 ]] || fail "reference has $(wc -l <"$dir/ref.csv") lines, expected 1 + 72"

# One thread, stopped mid-write by the file-size limit (ulimit -f, in KiB; SIGXFSZ ignored, so the
# write fails rather than killing it: to the journal both are a crash). Its lines are about 4 KB,
# so it stops after a few points, in the middle of a line, at the same place every time. (A kill
# after N lines depends on how busy the machine is: a fast run finishes first.)
(ulimit -f 32 && trap "" XFSZ && exec "$ftplan" sweep "$sweep" --out "$dir/run.csv" --threads 1 --quiet 2>/dev/null)
[[ $? == 1 ]] || fail "the sweep past the file-size limit did not fail"
[[ ! -e "$dir/run.csv" ]] || fail "the output exists after the failure: it must appear only when complete"
[[ $(tail -c 1 "$dir/run.csv.part") != "" ]] || fail "the journal's last line is whole; the test wants it cut"
done_points=$(($(wc -l <"$dir/run.csv.part") - 1))
((done_points >= 5 && done_points < 36)) || fail "stopped after $done_points points; expected mid-way"
# Cut short again, after more text of a line: resuming must drop it.
printf '{"point":35,"rows":[{"point":35,"pl' >>"$dir/run.csv.part"

# The same command again (on 2 threads this time) resumes.
msg=$("$ftplan" sweep "$sweep" --out "$dir/run.csv" 2>&1) || fail "resumed run failed: $msg"
grep -q "$done_points done before" <<<"$msg" || fail "resume did not skip the $done_points finished points: $msg"
[[ ! -e "$dir/run.csv.part" ]] || fail "the journal is left after completion"
cmp "$dir/ref.csv" "$dir/run.csv" || fail "resumed output differs from the uninterrupted run"
[[ $(tail -n +2 "$dir/run.csv" | cut -d, -f1 | uniq | wc -l) == 36 ]] || fail "points are not each there once"

# Shards (given to merge out of order) equal the unsharded run, CSV and JSON Lines.
for k in 1 2 3; do
  "$ftplan" sweep "$sweep" --shard "$k/3" --out "$dir/shard$k.csv" --quiet 2>/dev/null || fail "shard $k/3 failed"
done
"$ftplan" sweep-merge --out "$dir/merged.csv" "$dir/shard3.csv" "$dir/shard1.csv" "$dir/shard2.csv" 2>/dev/null ||
  fail "merge failed"
cmp "$dir/ref.csv" "$dir/merged.csv" || fail "merged CSV shards differ from the unsharded run"
"$ftplan" sweep-merge --out "$dir/partial.csv" "$dir/shard1.csv" "$dir/shard2.csv" >/dev/null 2>&1
[[ $? == 2 ]] || fail "merging without shard 3 must fail with status 2"

"$ftplan" sweep "$sweep" --out "$dir/ref.jsonl" --quiet 2>/dev/null || fail "JSON Lines run failed"
for k in 1 2; do
  "$ftplan" sweep "$sweep" --shard "$k/2" --out "$dir/shard$k.jsonl" --quiet 2>/dev/null || fail "shard $k/2 failed"
done
"$ftplan" sweep-merge --out "$dir/merged.jsonl" "$dir/shard2.jsonl" "$dir/shard1.jsonl" 2>/dev/null || fail "merge failed"
cmp "$dir/ref.jsonl" "$dir/merged.jsonl" || fail "merged JSON Lines shards differ from the unsharded run"
[[ $(wc -l <"$dir/ref.jsonl") == 72 ]] || fail "JSON Lines output is not one line per row"

# A journal of another sweep is refused, not mixed in.
echo '{"ftplan_sweep_journal":1,"fingerprint":"0000000000000001"}' >"$dir/other.csv.part"
"$ftplan" sweep "$sweep" --out "$dir/other.csv" --quiet >/dev/null 2>&1
[[ $? == 2 ]] || fail "a foreign journal must be refused with status 2"
echo "ok"
