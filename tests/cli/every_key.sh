#!/usr/bin/env bash
# Issue 41: no input is accepted and then ignored. Every key docs/scenario-format.md lists for
# `job`, `parallel`, `offload` and `cost` is set, in a context where it applies, on one base
# scenario with `compare --set`; the JSON must differ from the same scenario without it, or the
# command must refuse it (exit 2). A key that moves no figure by design is listed as inert, with
# why, and must still be accepted. A documented key with no case here fails the test, so a new key
# comes with its case. Usage: every_key.sh FTPLAN SCRATCH_DIR
set -uo pipefail
ftplan=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*"; exit 1; }
cat >"$dir/base.yaml" <<'YAML'
schema_version: 1
name: base
model: llama-3.1-8b
job:
  method: lora
  seq_len: 2048
  micro_batch: 2
  global_batch: 32
  tokens: 50M
  framework: pytorch-fsdp
  activation_checkpointing: full
plans:
  - name: p
    cluster: {gpu: h100-sxm-80gb, gpus: 8}
YAML
# The same job sized by steps, and by epochs of a dataset (a job gives one of tokens, steps, epochs).
sed 's/^  tokens: 50M$/  steps: 10/' "$dir/base.yaml" >"$dir/steps.yaml"
sed 's/^  tokens: 50M$/  epochs: 1\n  dataset_tokens: 10M/' "$dir/base.yaml" >"$dir/epochs.yaml"
sed 's/^model: llama-3.1-8b$/model: mixtral-8x7b/' "$dir/base.yaml" >"$dir/moe.yaml"
# KEY=VALUE | context (--set items before it; "file=NAME" first: NAME.yaml as the base) | change,
# or "inert: why"
cases=$(cat <<'EOF'
job.method=full | | change
job.lora.rank=64 | | change
job.lora.alpha=8 | | inert: scales the adapters' output by alpha / r, which moves no byte and no FLOP
job.lora.dropout=0.1 | | change
job.lora.targets=all-linear | | change
job.quant.kind=int4 | job.method=qlora | change
job.quant.double_quant=false | job.method=qlora | change
job.quant.block_size=128 | job.method=qlora | change
job.seq_len=4096 | | change
job.samples.packing=padded | | inert: padded samples of the fixed length seq_len are all tokens, as packed ones
job.samples.distribution=uniform | job.samples.packing=padded | change
job.samples.mean=1024 | job.samples.packing=padded,job.samples.distribution=normal,job.samples.std=200 | change
job.samples.std=600 | job.samples.packing=padded,job.samples.distribution=normal,job.samples.mean=1024 | change
job.samples.min=1024 | job.samples.packing=padded,job.samples.distribution=uniform | change
job.samples.max=1024 | job.samples.packing=padded,job.samples.distribution=uniform | change
job.micro_batch=4 | | change
job.global_batch=64 | | change
job.tokens=100M | | change
job.steps=100 | file=steps | change
job.epochs=2 | file=epochs | change
job.dataset_tokens=20M | file=epochs | change
job.precision=fp32 | | change
job.optimizer=adamw-8bit | | change
job.activation_checkpointing=selective | | change
job.checkpoint_every=2 | | change
job.attention=eager | | change
job.framework=pytorch-fsdp2 | | change
job.zero3_fetch=per-parameter | job.framework=deepspeed,parallel.zero=3 | change
job.fsdp_mixed_precision={param_dtype: fp32, reduce_dtype: bf16} | | change
job.dropout=0.1 | | change
job.compile=true | | change
job.gradients_persist=true | job.method=full | change
job.cuda_context=2 GiB | | change
job.optimizer.implementation=per-parameter | model=llama-3.2-1b,job.method=full,job.optimizer.name=adamw,cluster.gpus=1,job.seq_len=128,job.micro_batch=1 | change
job.loss.fp32_logits=false | | change
job.loss.chunks=8 | | change
parallel.dp=4 | parallel.tp=2 | inert: dp is derived from the GPUs and tp, pp, cp; given, it is checked (a wrong one is refused)
parallel.tp=2 | | change
parallel.pp=2 | | change
parallel.cp=2 | | change
parallel.ep=2 | file=moe | change
parallel.sequence_parallel=true | parallel.tp=2 | change
parallel.async_tp=true | parallel.tp=2,parallel.sequence_parallel=true | change
parallel.zero=2 | job.framework=deepspeed | change
parallel.fsdp=shard_grad_op | | change
parallel.schedule=gpipe | parallel.pp=2 | change
parallel.virtual_stages=4 | parallel.pp=2,parallel.schedule=interleaved,parallel.virtual_stages=2 | change
parallel.first_stage_layers=12 | parallel.pp=2 | change
parallel.last_stage_layers=12 | parallel.pp=2 | change
parallel.capacity_factor=1.25 | file=moe | change
offload.preset=activation-cpu | | change
offload.params=cpu | | change
offload.gradients=cpu | | change
offload.optimizer=cpu | | change
offload.activations=cpu | | change
offload.optimizer_step=cpu | offload.optimizer=cpu | change
offload.pinned=false | offload.params=cpu | change
offload.prefetch_depth=4 | | change
offload.buffer_count=8 | job.framework=deepspeed,parallel.zero=3,offload.params=nvme | change
offload.buffer_size=2 GiB | job.framework=deepspeed,parallel.zero=3,offload.params=nvme | change
offload.chunk_size=64 MiB | job.framework=deepspeed,parallel.zero=3,offload.optimizer=nvme,offload.optimizer_step=cpu | change
offload.optimizer_buffer_count=8 | job.framework=deepspeed,parallel.zero=3,offload.optimizer=nvme,offload.optimizer_step=cpu | change
offload.pipeline_read=true | job.method=full,job.framework=deepspeed,parallel.zero=3,offload.optimizer=nvme,offload.optimizer_step=cpu,offload.chunk_size=1 GiB,offload.optimizer_buffer_count=8 | change
offload.pipeline_write=true | job.method=full,job.framework=deepspeed,parallel.zero=3,offload.optimizer=nvme,offload.optimizer_step=cpu,offload.chunk_size=1 GiB,offload.optimizer_buffer_count=8 | change
offload.delayed_update=true | job.framework=deepspeed,parallel.zero=2,offload.optimizer=cpu,offload.optimizer_step=cpu | change
cluster.gpu=a100-sxm4-80gb | | change
cluster.gpus=16 | | change
cluster.gpus_per_node=4 | | change
cluster.dram=512 GiB | offload.optimizer=cpu,offload.optimizer_step=cpu,job.framework=deepspeed,parallel.zero=2 | change
cluster.drives=[{drive: micron-9550-max-6.4tb, count: 4}] | | change
cluster.expanders=[{expander: micron-cz120-256gb, count: 2}] | | change
cluster.nics=[{nic: connectx-6-hdr, count: 2}] | cluster.gpus=16 | change
cluster.exclusive=true | cluster.gpus=4 | change
cost.mode=own | | change
cost.billing=per-hour | | change
cost.energy_price=$0.30/kWh | cost.mode=own | change
cost.pue=1.5 | | change
cost.lifetime_years=3 | cost.mode=own | change
cost.utilization=0.5 | cost.mode=own | change
cost.rent=$50/h | | change
EOF
)
# Every key the reference documents has a case (cells like `a`, `b` or `a` / `b` name several).
covered=$(cut -d'|' -f1 <<<"$cases" | sed 's/=.*//; s/ //g')
section=""
while IFS= read -r line; do
  case "$line" in
    "## \`job\`"*) section=job ;; "### \`parallel\`"*) section=parallel ;; "### \`offload\`"*) section=offload ;;
    "## \`cost\`"*) section=cost ;; "## "* | "### "*) section="" ;;
    "| \`"*)
      [[ -z "$section" ]] && continue
      for key in $(cut -d'|' -f2 <<<"$line" | grep -o '`[a-z_.]*`' | tr -d '`'); do
        grep -qx "$section.$key" <<<"$covered" || fail "docs/scenario-format.md documents $section.$key; give it a case here"
      done ;;
  esac
done <docs/scenario-format.md
n=0
while IFS='|' read -r kv ctx expect; do
  kv=$(sed 's/^ *//; s/ *$//' <<<"$kv"); ctx=$(sed 's/^ *//; s/ *$//' <<<"$ctx"); expect=$(sed 's/^ *//; s/ *$//' <<<"$expect")
  n=$((n + 1))
  base=base
  if [[ $ctx == file=* ]]; then
    base=${ctx%%,*}
    base=${base#file=}
    [[ $ctx == *,* ]] && ctx=${ctx#*,} || ctx=""
  fi
  if [[ -n "$ctx" ]]; then
    "$ftplan" compare "$dir/$base.yaml" --set "$ctx" --format json >"$dir/before.json" 2>&1 || fail "the context of $kv ($ctx): $(head -2 "$dir/before.json")"
    # The case's key replaces the context's value of it (--set refuses a key given twice).
    kept=$(tr ',' '\n' <<<"$ctx" | grep -v "^${kv%%=*}=" | paste -sd, -)
    items="${kept:+$kept,}$kv"
  else
    "$ftplan" compare "$dir/$base.yaml" --format json >"$dir/before.json" 2>&1 || fail "the base scenario $base: $(head -2 "$dir/before.json")"
    items="$kv"
  fi
  "$ftplan" compare "$dir/$base.yaml" --set "$items" --format json >"$dir/after.json" 2>&1
  status=$?
  if [[ "$expect" == inert:* ]]; then
    [[ $status == 0 ]] || fail "$kv (inert) is refused: $(head -2 "$dir/after.json")"
    continue
  fi
  # Each case sets its key where it applies: a refusal there is a failure (a list of mappings was
  # once split on its commas by --set and refused).
  [[ $status == 0 ]] || fail "$kv: exit status $status: $(head -2 "$dir/after.json")"
  cmp -s "$dir/before.json" "$dir/after.json" && fail "$kv is accepted and changes nothing"
done <<<"$cases"
# The other side: a key set where it applies to nothing (a swap buffer without a swap, a pipeline
# schedule without a pipeline, an owned-only price on a rented plan) is refused with its key, not
# taken and ignored. KEY=VALUE | context (--set items before it)
refused=$(cat <<'EOF'
offload.buffer_count=8 | job.framework=deepspeed,parallel.zero=3
offload.buffer_size=2 GiB | job.framework=deepspeed,parallel.zero=3,offload.params=cpu
offload.chunk_size=64 MiB | job.framework=deepspeed,parallel.zero=3
offload.optimizer_buffer_count=8 | job.framework=deepspeed,parallel.zero=3,offload.optimizer=cpu,offload.optimizer_step=cpu
offload.pipeline_read=true | job.framework=deepspeed,parallel.zero=2,offload.optimizer=cpu,offload.optimizer_step=cpu
offload.pipeline_write=true |
offload.pinned=false |
offload.delayed_update=true |
parallel.schedule=gpipe |
parallel.virtual_stages=2 | parallel.pp=2
parallel.first_stage_layers=12 |
parallel.sequence_parallel=true |
parallel.capacity_factor=1.25 |
cost.lifetime_years=3 |
cost.utilization=0.5 |
cost.energy_price=$0.30/kWh |
cost.billing=per-hour | cost.mode=own
cost.rent=$50/h | cost.mode=own
job.samples.std=600 | job.samples.packing=padded
job.samples.min=1024 | job.samples.packing=padded
job.samples.mean=1024 | job.samples.packing=padded,job.samples.distribution=uniform
job.quant.kind=int4 |
job.lora.rank=64 | job.method=full
job.zero3_fetch=per-parameter | job.framework=deepspeed,parallel.zero=2
job.dataset_tokens=20M |
job.fsdp_mixed_precision={param_dtype: fp32} | job.framework=deepspeed
job.checkpoint_every=2 | job.activation_checkpointing=none
EOF
)
while IFS='|' read -r kv ctx; do
  kv=$(sed 's/^ *//; s/ *$//' <<<"$kv"); ctx=$(sed 's/^ *//; s/ *$//' <<<"$ctx")
  key=${kv%%=*}
  "$ftplan" compare "$dir/base.yaml" --set "${ctx:+$ctx,}$kv" --format json >"$dir/after.json" 2>&1
  status=$?
  [[ $status == 2 ]] || fail "$kv${ctx:+ (with $ctx)} applies to nothing there, yet exit status $status: $(head -2 "$dir/after.json")"
  # The error names the key (or its block: job.quant, job.lora).
  grep -q "${key%.*}" "$dir/after.json" || fail "$kv: the refusal does not name it: $(head -2 "$dir/after.json")"
done <<<"$refused"
# The flags: each flag of `compare --help` is given, with the others of a quick-form base (or a
# scenario file where the flag needs one), a value other than the base's; the JSON must change or
# the command refuse it (exit 2). A flag with no case here fails the test.
base_flags=(--model llama-3.1-8b --gpu h100-sxm-80gb --gpus 8 --method lora --seq 2048 --micro-batch 2
  --global-batch 32 --tokens 50M)
cp -r model_zoo "$dir/zoo" && sed -i 's/^layers: 32$/layers: 16/' "$dir/zoo/models/llama-3.1-8b.yaml"
cat >"$dir/two.yaml" <<'YAML'
schema_version: 1
name: two
model: llama-3.1-8b
job: {method: lora, seq_len: 2048, micro_batch: 2, global_batch: 32, tokens: 50M}
plans:
  - name: a
    cluster: {gpu: h100-sxm-80gb, gpus: 8}
  - name: b
    cluster: {gpu: a100-sxm4-80gb, gpus: 8}
YAML
# FLAG VALUE | context: changes to the base (FLAG VALUE ...; "drop FLAG ..."), or "scenario ARGS"
# for a base of its own | change, "inert: why" (accepted, moves nothing by design) or "refused: why"
flag_cases=$(cat <<FLAGS
--model llama-3.2-1b | | change
--gpu a100-sxm4-80gb | | change
--gpus 16 | | change
--gpus-per-node 4 | | change
--node dgx-a100-80gb | drop --gpu --gpus; --node dgx-h100 | change
--nodes 2 | drop --gpu --gpus; --node dgx-h100 | change
--dram 512GiB | | change
--dp 4 | --tp 2 | inert: dp is derived from the GPUs and tp, pp, cp; given, it is checked (a wrong one is refused)
--tp 2 | | change
--pp 2 | | change
--cp 2 | | change
--ep 2 | --model mixtral-8x7b | change
--zero 2 | --framework deepspeed | change
--fsdp shard_grad_op | | change
--offload zero-offload | --framework deepspeed --zero 2 | change
--method full | | change
--lora-rank 64 | | change
--lora-targets all-linear | | change
--seq 4096 | | change
--micro-batch 4 | | change
--global-batch 64 | | change
--tokens 100M | | change
--steps 100 | drop --tokens; --steps 50 | change
--precision fp32 | | change
--optimizer adamw-8bit | | change
--ckpt full | | change
--attention eager | | change
--framework pytorch-fsdp2 | | change
--zoo $dir/zoo | | change
--format csv | | change
--set job.loss.chunks=8 | | change
--fidelity full | --pp 2 | change
--profile model_zoo/hardware/profiles/dev-vm-cpu-storage.yaml | --framework deepspeed --zero 3 --set offload.params=nvme | change
--model-config tests/data/hf/llama-3.1-8b/config.json | | refused: it belongs to --from
--plan b | scenario $dir/two.yaml | change
--from tests/data/import/torchtune/8B_full.yaml | scenario --from tests/data/import/torchtune/8B_lora.yaml --gpu h100-sxm-80gb --gpus 8 --tokens 50M | change
FLAGS
)
covered=$(cut -d'|' -f1 <<<"$flag_cases" | awk '{print $1}')
for flag in $("$ftplan" compare --help | grep -o '^  --[a-z-]*' | tr -d ' '); do
  grep -qx -- "$flag" <<<"$covered" || fail "compare --help lists $flag; give it a case here"
done
while IFS='|' read -r flag ctx expect; do
  read -r -a given <<<"$flag"
  ctx=$(sed 's/^ *//; s/ *$//' <<<"$ctx"); expect=$(sed 's/^ *//; s/ *$//' <<<"$expect")
  n=$((n + 1))
  if [[ "$ctx" == scenario* ]]; then
    read -r -a before <<<"${ctx#scenario }"
  else
    before=("${base_flags[@]}")
    IFS=';' read -r -a parts <<<"$ctx"
    for part in "${parts[@]}"; do
      read -r -a words <<<"$part"
      ((${#words[@]})) || continue
      if [[ ${words[0]} == drop ]]; then
        for d in "${words[@]:1}"; do
          kept=()
          for ((i = 0; i < ${#before[@]}; i += 2)); do
            [[ ${before[$i]} == "$d" ]] || kept+=("${before[$i]}" "${before[i + 1]}")
          done
          before=("${kept[@]}")
        done
      else
        for ((w = 0; w < ${#words[@]}; w += 2)); do
          found=0
          for ((i = 0; i < ${#before[@]}; i += 2)); do
            [[ ${before[$i]} == "${words[$w]}" ]] && before[i + 1]=${words[w + 1]} && found=1
          done
          ((found)) || before+=("${words[$w]}" "${words[w + 1]}")
        done
      fi
    done
  fi
  # The flag's own value replaces the base's (a flag given twice is refused).
  after=("${before[@]}")
  found=0
  for ((i = 0; i < ${#after[@]}; i += 2)); do
    [[ ${after[$i]} == "${given[0]}" ]] && after[i + 1]=${given[1]} && found=1
  done
  ((found)) || after+=("${given[@]}")
  "$ftplan" compare "${before[@]}" --format json >"$dir/before.json" 2>&1 || fail "$flag: the base: $(head -2 "$dir/before.json")"
  fmt=(--format json)
  [[ ${given[0]} == --format ]] && fmt=()
  "$ftplan" compare "${after[@]}" "${fmt[@]}" >"$dir/after.json" 2>&1
  status=$?
  if [[ "$expect" == refused:* ]]; then
    [[ $status == 2 ]] || fail "$flag is accepted where it does nothing: exit status $status"
    continue
  fi
  if [[ "$expect" == inert:* ]]; then
    [[ $status == 0 ]] || fail "$flag (inert) is refused: $(head -2 "$dir/after.json")"
    continue
  fi
  [[ $status == 2 ]] && fail "$flag is refused in a context where it applies: $(head -2 "$dir/after.json")"
  [[ $status == 0 ]] || fail "$flag: exit status $status: $(head -2 "$dir/after.json")"
  cmp -s "$dir/before.json" "$dir/after.json" && fail "$flag is accepted and changes nothing"
done <<<"$flag_cases"
# `plan`'s `search` and `constraints` keys: each changed on one small search must change the JSON
# or be refused; a key the reference documents without a case here fails the test.
write_search() {  # FILE, then KEY=VALUE items over the base search
  local file=$1
  shift
  declare -A search=([gpus]="[h100-sxm-80gb]" [gpu_counts]="[8]" [tp]="[1]" [pp]="[1]")
  declare -A constraints=()
  for kv in "$@"; do
    local key=${kv%%=*} value=${kv#*=}
    case $key in search.*) search[${key#search.}]=$value ;; constraints.*) constraints[${key#constraints.}]=$value ;; esac
  done
  {
    printf 'schema_version: 1\nname: search\nmodel: llama-3.2-1b\n'
    printf 'job: {method: lora, seq_len: 2048, micro_batch: 2, global_batch: 32, tokens: 50M}\nsearch:\n'
    for k in "${!search[@]}"; do printf '  %s: %s\n' "$k" "${search[$k]}"; done
    if ((${#constraints[@]})); then
      printf 'constraints:\n'
      for k in "${!constraints[@]}"; do printf '  %s: %s\n' "$k" "${constraints[$k]}"; done
    fi
  } >"$file"
}
search_cases=$(cat <<'SEARCH'
search.gpus=[a100-sxm4-80gb] | | change
search.gpu_counts=[8, 16] | | change
search.tp=[1, 2] | | change
search.pp=[1, 2] | | change
search.virtual_stages=[1, 2] | search.pp=[2] | change
search.sequence_parallel=[false, true] | search.tp=[2] | change
search.zero=[3] | | change
search.micro_batch=[1] | | change
search.activation_checkpointing=[full] | | change
search.offload=[none, activation-cpu] | | change
search.dram=[2 TiB] | | change
search.drives=[4] | | change
search.expanders={expander: micron-cz120-256gb, counts: [2]} | | change
constraints.deadline=1 min | | change
constraints.budget=$0.01 | | change
constraints.peak_power=1 kW | | change
constraints.max_gpus=4 | search.gpu_counts=[4, 8] | change
SEARCH
)
documented=$(sed -n '/^## `search` and `constraints`/,/^## The quick form/p' docs/scenario-format.md | tr '\n' ' ' |
  sed 's/`search`: /\nSEARCH /; s/`constraints`: /\nCONSTRAINTS /; s/ See scenarios/\nEND/')
for section in search constraints; do
  tag=${section^^}
  for key in $(grep "^$tag " <<<"$documented" | sed 's/ Layouts that repeat.*//' | grep -o '`[a-z_]*`' | tr -d '`'); do
    grep -q "^$section\.$key=" <<<"$search_cases" || fail "docs/scenario-format.md documents $section.$key; give it a case here"
  done
done
while IFS='|' read -r kv ctx expect; do
  kv=$(sed 's/^ *//; s/ *$//' <<<"$kv"); ctx=$(sed 's/^ *//; s/ *$//' <<<"$ctx")
  n=$((n + 1))
  context=()
  [[ -n "$ctx" ]] && IFS=';' read -r -a context <<<"$ctx"
  write_search "$dir/before.yaml" "${context[@]}"
  write_search "$dir/after.yaml" "${context[@]}" "$kv"
  "$ftplan" plan "$dir/before.yaml" --format json >"$dir/before.json" 2>/dev/null || fail "$kv: the base search fails"
  "$ftplan" plan "$dir/after.yaml" --format json >"$dir/after.json" 2>&1
  status=$?
  [[ $status == 2 ]] && continue
  [[ $status == 0 ]] || fail "$kv: exit status $status: $(head -2 "$dir/after.json")"
  cmp -s "$dir/before.json" "$dir/after.json" && fail "$kv is accepted and changes nothing"
done <<<"$search_cases"
echo "ok: $n keys and flags"
