#!/usr/bin/env bash
# Sweeps on a real Slurm (issue 45): starts a single-node cluster on this machine (munged,
# slurmctld and slurmd from Debian's slurm-wlm, a configuration of its own in a scratch folder),
# submits docs/sweep-format.md's job array and the dependent merge, requeues one array task while
# it runs (Slurm kills it; its rerun resumes from the task's journal), and checks that the merged
# CSV is byte-identical to one local single-process sweep of the same file.
#
#   scripts/slurm-sweep-check.sh FTPLAN [SCRATCH_DIR]
#
# Needs root (the daemons and munge's key). Installs slurm-wlm and munge with apt-get when they are
# missing and apt can; exits 77 (skipped) where neither is possible, so CI runs it wherever
# slurm-wlm installs. Everything it starts is stopped on exit, also when a check fails.
set -uo pipefail
ftplan=$(realpath "$1")
dir=$(realpath -m "${2:-$(mktemp -d)}")
root=$(cd "$(dirname "$0")/.." && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*"
  for f in "$dir"/log/*; do [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}

[[ $(id -u) == 0 ]] || skip "needs root to run slurmctld, slurmd and munged"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || skip "slurm-wlm is not installed and there is no apt-get"
  { apt-get install -y -q slurm-wlm munge || { apt-get update -q && apt-get install -y -q slurm-wlm munge; }; } \
    >"${TMPDIR:-/tmp}/ftplan-slurm-apt.log" 2>&1 || skip "slurm-wlm does not install here (apt-get failed)"
fi

rm -rf "$dir" && mkdir -p "$dir"/{log,spool,state,munge,results}
chmod 700 "$dir/munge"
pids=()
cleanup() {
  scancel --quiet --full 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT

# munge: a key of its own, its own socket; the daemons and the clients are pointed at them.
dd if=/dev/urandom of="$dir/munge/key" bs=1024 count=1 status=none && chmod 400 "$dir/munge/key"
munged --force --foreground --key-file="$dir/munge/key" --socket="$dir/munge/socket" \
  --pid-file="$dir/munge/pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" &
pids+=($!)

host=$(hostname -s)
cpus=$(nproc)
cat >"$dir/slurm.conf" <<EOF
ClusterName=ftplan-check
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# A requeued job waits cred_expire + 1 s before it may start again (slurm.conf(5), AuthInfo):
# 5 s rather than the default 120.
AuthInfo=socket=$dir/munge/socket,cred_expire=5
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldPort=$((20000 + RANDOM % 10000))
SlurmdPort=$((30000 + RANDOM % 10000))
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmdSpoolDir=$dir/spool
StateSaveLocation=$dir/state
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=check Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
for _ in $(seq 50); do [[ -S $dir/munge/socket ]] && break; sleep 0.1; done
[[ -S $dir/munge/socket ]] || fail "munged did not start"
slurmctld -D -i -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do sinfo -h -o %t 2>/dev/null | grep -qx idle && break; sleep 0.2; done
sinfo -h -o %t 2>/dev/null | grep -qx idle || fail "the node did not come up idle: $(sinfo 2>&1)"

# The sweep: 1,200 Latin-hypercube points over the shipped single-GPU scenario, every micro-batch
# simulated (steady_state: false), so that each of three slices runs for seconds, long enough to
# be requeued mid-run.
cat >"$dir/sweep.yaml" <<EOF
schema_version: 1
name: slurm check
base: $root/scenarios/llama8b-single-gpu.yaml
steady_state: false
axes:
  - key: job.seq_len
    range: {from: 512, to: 8192, step: 512}
  - key: job.lora.rank
    values: [4, 8, 16, 32, 64, 128]
  - key: job.micro_batch
    range: {from: 1, to: 4, step: 1}
sample: {method: lhs, count: 1200, seed: 11}
EOF

# docs/sweep-format.md's job array (3 slices of one CPU here) and its dependent merge.
cat >"$dir/array.sh" <<EOF
#!/bin/bash
#SBATCH --job-name=ftplan-sweep
#SBATCH --array=1-3
#SBATCH --cpus-per-task=1
#SBATCH --requeue
#SBATCH --output=$dir/log/task-%a.out
cd $dir
mkdir -p results
srun $ftplan sweep sweep.yaml --threads "\$SLURM_CPUS_PER_TASK" \\
     --shard "\$SLURM_ARRAY_TASK_ID/\$SLURM_ARRAY_TASK_COUNT" \\
     --out "results/grid.\$SLURM_ARRAY_TASK_ID.csv"
EOF
cat >"$dir/merge.sh" <<EOF
#!/bin/bash
#SBATCH --job-name=ftplan-merge
#SBATCH --output=$dir/log/merge.out
cd $dir
$ftplan sweep-merge --out results/grid.csv results/grid.*.csv
EOF
array=$(sbatch --parsable "$dir/array.sh") || fail "sbatch of the array refused"
merge=$(sbatch --parsable --dependency="afterok:$array" "$dir/merge.sh") || fail "sbatch of the merge refused"

# Requeue task 2 once its journal holds finished points (a header line, then a line per point):
# Slurm kills it and runs it again; the rerun resumes. (Under ASan a point takes ~0.2 s: a requeue
# at the header alone left the rerun nothing to resume, and the check failed.)
journal=$dir/results/grid.2.csv.part
rows() { [[ -f $journal ]] && wc -l <"$journal" || echo 0; }
for _ in $(seq 1200); do (($(rows) >= 9)) && break; sleep 0.05; done
(($(rows) >= 9)) || fail "task 2 wrote no two points to $journal in 60 s"
scontrol requeue "${array}_2" || fail "scontrol requeue ${array}_2 refused"
echo "requeued task 2 with $(wc -l <"$journal") journal lines written"

for _ in $(seq 600); do
  state=$(sacct -n -X -j "$merge" -o State 2>/dev/null | head -1 | tr -d ' ')
  [[ -z $state ]] && state=$(squeue -h -j "$merge" -o %T 2>/dev/null)
  [[ -z $state || $state == COMPLETED ]] && [[ -f $dir/results/grid.csv ]] && break
  [[ $state == FAILED || $state == CANCELLED* || $state == TIMEOUT ]] && fail "the merge job ended $state"
  sleep 0.2
done
[[ -f $dir/results/grid.csv ]] || fail "no merged CSV after 2 minutes (merge job $merge: $(squeue -h -j "$merge" -o '%T %r' 2>&1))"
grep -q "resum" "$dir/log/task-2.out" || fail "task 2's rerun did not resume from its journal: $(cat "$dir/log/task-2.out")"

"$ftplan" sweep "$dir/sweep.yaml" --threads 1 --quiet --out "$dir/local.csv" >/dev/null 2>&1 || fail "the local sweep failed"
cmp "$dir/results/grid.csv" "$dir/local.csv" || fail "the Slurm array's merged CSV differs from the local sweep's"
echo "ok: $(($(wc -l <"$dir/local.csv") - 1)) rows, merged from 3 array tasks (task 2 requeued mid-run) = one local sweep, byte for byte"
