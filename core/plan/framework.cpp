#include "plan/framework.hpp"
#include "plan/rank_layout.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.hpp"
#include "plan/checks.hpp"

namespace ftplan::plan {

// The frameworks, one row each: everything else reads these fields. Unnamed fields keep the
// defaults of FrameworkProfile's members (framework.hpp, each with its source).
// Data, not logic: the one function in core over ~80 lines (scripts/long_functions.py), as it
// grows by a row per framework.
// long: a table, one row per framework (data, not logic).
const std::vector<FrameworkProfile>& framework_table() {
  using S = FrameworkProfile::Selective;
  static const std::vector<FrameworkProfile> table = {
      {
          .framework = Framework::pytorch_fsdp,
          .name = "pytorch-fsdp",
          .display_name = "PyTorch FSDP",
          .sharding = Sharding::fsdp1,
          // FSDP1 with limit_all_gathers=True lets at most two all-gathers be in flight
          // (torch/distributed/fsdp/_limiter_utils.py), so two units are gathered at once.
          .gathered_units = 2,
          .root_stays_gathered = true,
          .fsdp_mixed_precision_policy = true,
          .one_rank_unsharded = true,
      },
      {
          .framework = Framework::pytorch_fsdp2,
          .name = "pytorch-fsdp2",
          .display_name = "PyTorch FSDP2 (torchtitan)",
          .sharding = Sharding::fsdp2,
          // torchtitan wraps embeddings, each block and [norm, output] separately; output keeps
          // reshard_after_forward=False (torchtitan/models/llama3/infra/parallelize.py).
          .gathered_units = 2,
          .root_stays_gathered = false,
          // torchtitan's op-level SAC policy (torchtitan/models/llama3/infra/parallelize.py,
          // _custom_policy): save mm, SDPA and reduce-scatter outputs, but recompute every second mm.
          .selective = S::every_other_mm,
          .sdpa_repeats_kv = true,  // torchtitan's Attention.forward: repeat_kv, then SDPA
          // torchtitan's context_parallel_rotate_method default "allgather" (config_manager.py)
          .ring_attention = FrameworkProfile::RingAttention::all_gather,
          .compile_covers_loss = false,  // torchtitan compiles each TransformerBlock, not the loss
          .fsdp_mixed_precision_policy = true,
          .reduces_in_fp32 = true,
      },
      {
          .framework = Framework::deepspeed,
          .name = "deepspeed",
          .display_name = "DeepSpeed",
          .sharding = Sharding::deepspeed,
          .gathered_units = 2,  // current module + stage3_prefetch_bucket_size ("auto": 0.9 hidden^2)
          .root_stays_gathered = false,
          .optimizer_impl = OptimizerImpl::fused,  // FusedAdam on GPU, DeepSpeedCPUAdam on the host
          .fragmentation = 0.10,  // DeepSpeed allocates and frees flat buffers each step: more slack (estimate)
      },
      {
          .framework = Framework::megatron,
          .name = "megatron",
          .display_name = "Megatron-LM",
          .sharding = Sharding::megatron,
          .root_stays_gathered = false,
          .optimizer_impl = OptimizerImpl::fused,  // Apex / Transformer Engine FusedAdam
          .fused_pointwise = true,                 // megatron/core/fusions, Transformer Engine
          .caches_fp8_weights = true,
      },
      {
          // Plain Trainer: single GPU or DDP (FSDP/DeepSpeed through HF use those profiles).
          .framework = Framework::hf_trainer,
          .name = "hf-trainer",
          .display_name = "Hugging Face Trainer",
          .sharding = Sharding::none,
          .ddp_bucket_copy = true,  // torch DDP gradient_as_bucket_view=False by default
          .fsdp_refusal = "HF Trainer shards through FSDP with job.framework: pytorch-fsdp (Trainer --fsdp)",
          .zero_refusal = "HF Trainer shards through its DeepSpeed or FSDP integration: write job.framework: "
                          "deepspeed (Trainer --deepspeed) with parallel.zero: {}, or pytorch-fsdp (Trainer --fsdp) "
                          "with parallel.fsdp",
      },
      {
          .framework = Framework::torchtune,
          .name = "torchtune",
          .display_name = "torchtune",
          .sharding = Sharding::fsdp2,  // torchtune's distributed recipes use FSDP2 (fully_shard)
          .gathered_units = 2,
          .root_stays_gathered = false,
          .optimizer_impl = OptimizerImpl::fused,  // recipes' default optimizer: AdamW(fused=True)
          .fsdp_mixed_precision_policy = true,
          .one_rank_unsharded = true,
          // torchtune's distributed recipes parallelize over dp_replicate x dp_shard x tp (x cp): no
          // pipeline stages (torchtune/training/_distributed.py, ParallelDims).
          .pipeline_refusal = "torchtune's recipes have no pipeline parallelism (its ParallelDims are dp_replicate x "
                              "dp_shard x tp); for FSDP inside pipeline stages write job.framework: pytorch-fsdp2 "
                              "(torchtitan), pp {}",
      },
      {
          .framework = Framework::yafsdp,
          .name = "yafsdp",
          .display_name = "YaFSDP",
          .sharding = Sharding::yafsdp,
          .gathered_units = 2,  // two preallocated parameter buffers, reused layer after layer
          .root_stays_gathered = false,
      },
      {
          // Unsloth (unslothai/unsloth, unslothai/unsloth-zoo): one GPU (or DDP through
          // accelerate), HF Trainer/TRL underneath, its own kernels and checkpointing.
          .framework = Framework::unsloth,
          .name = "unsloth",
          .display_name = "Unsloth",
          .sharding = Sharding::none,
          .ddp_bucket_copy =
              true,  // torch DDP (through accelerate), gradient_as_bucket_view=False
                     // Triton kernels for RMSNorm (unsloth/kernels/rms_layernorm.py), RoPE (rope_embedding.py),
                     // SwiGLU with the LoRA MLP and QKV (swiglu.py, fast_lora.py LoRA_MLP, LoRA_QKV).
          .fused_pointwise = true,
          .offloads_checkpoint_inputs = true,
          .fused_linear_loss = true,
          // Unsloth's notebooks train with optim = "adamw_8bit" (SFTConfig / TrainingArguments).
          .default_optimizer = OptimizerKind::adamw_8bit,
          .fsdp_refusal = "Unsloth trains on one GPU or with DDP; it does not shard by FSDP",
          .zero_refusal = "Unsloth trains on one GPU or with DDP; it has no ZeRO stage {}: for sharded state write "
                          "job.framework: deepspeed or pytorch-fsdp",
          // Unsloth's trainer wraps HF Trainer/TRL on one device or DDP: no pipeline stages.
          .pipeline_refusal = "Unsloth trains on one GPU or with DDP: no pipeline parallelism (pp {})",
      },
  };
  return table;
}

const FrameworkProfile& framework_row(Framework f) {
  const auto& table = framework_table();
  const auto i = static_cast<std::size_t>(f);
  FTPLAN_ASSERT(i < table.size() && table[i].framework == f, "framework_table rows follow Framework's order");
  return table[i];
}

std::optional<Framework> framework_named(std::string_view name) {
  for (const FrameworkProfile& row : framework_table())
    if (name == row.name) return row.framework;
  return std::nullopt;
}

bool shards_by_fsdp(Sharding s) { return s == Sharding::fsdp1 || s == Sharding::fsdp2 || s == Sharding::yafsdp; }

const char* to_string(Framework f) { return framework_row(f).name; }

Tier activation_tier(const Plan& plan) {
  const Tier given = plan.offload.activations;
  const bool self_offloads =
      framework_row(plan.job.framework).offloads_checkpoint_inputs && plan.job.checkpointing == Checkpointing::full;
  return given == Tier::gpu && self_offloads ? Tier::cpu : given;
}

FrameworkProfile framework_profile(const Job& job) {
  FrameworkProfile p = framework_row(job.framework);
  if (job.cuda_context_bytes > 0) p.cuda_context_bytes = job.cuda_context_bytes;
  return p;
}

PrecisionRecipe precision_recipe(const Job& job, const FrameworkProfile& profile) {
  PrecisionRecipe r;
  switch (job.precision) {
    case Precision::fp32: r = {4, 4, 0, 4, 4, false, 4}; break;
    case Precision::bf16:
      // Pure bf16 (torchtune dtype=bf16): weights, gradients and optimizer state all 16-bit.
      r = {2, 2, 0, 2, 2, false, 2};
      break;
    case Precision::bf16_mixed:
    case Precision::fp16_mixed:
    case Precision::fp8_mixed:  // fp8 linears on a bf16-mixed recipe: state as bf16-mixed
      switch (profile.sharding) {
        case Sharding::deepspeed:
        case Sharding::yafsdp:
          // 16-bit weights and gradients, fp32 master + Adam m, v: 2 + 2 + 12 bytes (ZeRO paper, sec. 3.1).
          r = {2, 2, 4, 4, 2, false, 2};
          break;
        case Sharding::megatron:
          // bf16 weights, fp32 main_grad buffer, fp32 master + m + v: 18 bytes/param
          // (Megatron-LM docs/source/api-guide/dist_optimizer.md, table of bytes per parameter).
          r = {2, 4, 4, 4, 2, false, 2};
          break;
        case Sharding::fsdp1:
        case Sharding::fsdp2:
          // FSDP MixedPrecision(param_dtype=bf16): sharded fp32 parameters and gradients, bf16 copies
          // only in the gathered units (torch/distributed/fsdp/_flat_param.py). With
          // param_dtype=fp32 the units are gathered in fp32 and torch.autocast casts the weights
          // to 16 bits on each forward, keeping the casts for backward.
          r = {4, 4, 0, 4, 2, false, 2};
          if (job.fsdp_mixed_precision.param == WireType::fp32) r.autocast_copies = true;
          break;
        case Sharding::none:
          // torch.autocast: fp32 parameters and gradients; each forward casts the weights to bf16 and
          // autograd keeps the casts for backward (torch/csrc/autograd autocast weight cache).
          r = {4, 4, 0, 4, 2, true, 2};
          break;
      }
      break;
  }
  // Gathered parameters: the compute type, or fp32 under an fp32 FSDP param_dtype.
  r.gather_B = job.fsdp_mixed_precision.param == WireType::fp32 ? 4.0 : r.compute_B;
  // Gradient reduction, in the type each framework reduces in:
  // - DDP all-reduces the .grad tensors themselves: fp32 under torch.autocast (fp32 parameters);
  // - Megatron-LM with bf16 accumulates and all-reduces gradients in fp32 (megatron/training/
  //   arguments.py: bf16 forces accumulate_allreduce_grads_in_fp32), with fp16 in 16 bits;
  // - torchtitan's FSDP2 reduces in fp32 (its mixed_precision_reduce = "float32");
  // - FSDP1 (MixedPrecision without reduce_dtype reduces in param_dtype), DeepSpeed, YaFSDP and
  //   torchtune in the 16-bit compute type;
  // - an FSDP reduce_dtype, when the job gives one, wins.
  r.reduce_B = r.compute_B;
  switch (profile.sharding) {
    case Sharding::none: r.reduce_B = r.grad_B; break;
    case Sharding::megatron:
      if (job.precision == Precision::bf16_mixed || job.precision == Precision::fp8_mixed) r.reduce_B = r.grad_B;
      break;
    case Sharding::fsdp1:
      if (job.fsdp_mixed_precision.param == WireType::fp32) r.reduce_B = 4;
      break;
    case Sharding::fsdp2:
      if (profile.reduces_in_fp32 || job.fsdp_mixed_precision.param == WireType::fp32) r.reduce_B = 4;
      break;
    default: break;
  }
  if (job.fsdp_mixed_precision.reduce != WireType::framework_default)
    r.reduce_B = job.fsdp_mixed_precision.reduce == WireType::fp32 ? 4.0 : 2.0;
  return r;
}

ShardingInEffect sharding_in_effect(const Plan& plan) {
  const Parallel& par = plan.parallel;
  const Job& job = plan.job;
  const FrameworkProfile& profile = framework_row(job.framework);
  const Sharding sharding = profile.sharding;
  // The data-parallel group that reduces gradients and shards state includes the context-parallel
  // ranks (they hold the same parameters and see other parts of the sequence): torchtitan builds
  // its FSDP mesh over dp_shard x cp (torchtitan/distributed/parallel_dims.py, "dp_shard_cp"),
  // Megatron's distributed optimizer shards over get_data_parallel_group(with_context_parallel=True)
  // (megatron/core/parallel_state.py), DeepSpeed's ZeRO over the sequence-data-parallel group
  // with Ulysses (deepspeed/runtime/engine.py, seq_data_parallel_group).
  const int dp = gradient_group_size(plan);
  ShardingInEffect out;
  out.zero = par.zero;
  out.shard_degree = dp;
  const char* name = "ZeRO";
  switch (sharding) {
    case Sharding::fsdp1:
    case Sharding::fsdp2:
    case Sharding::yafsdp:
      name = sharding == Sharding::yafsdp ? "YaFSDP" : sharding == Sharding::fsdp2 ? "FSDP2" : "FSDP";
      switch (par.fsdp) {
        case FsdpSharding::full_shard: out.zero = 3; break;
        case FsdpSharding::shard_grad_op: out.zero = 2; break;
        case FsdpSharding::hybrid_shard:
          out.zero = 3;
          // Shard inside a node, replicate across nodes: the shard group is the data-parallel
          // ranks of one node (torch.distributed.fsdp HYBRID_SHARD; torchtitan dp_shard x dp_replicate).
          out.shard_degree = RankLayout(plan).members_per_node(Group::dp, dp);
          break;
        case FsdpSharding::no_shard: out.zero = 0; break;
      }
      out.label = fmt::format("{} {}", name, to_string(par.fsdp));
      break;
    case Sharding::megatron:
      out.zero = std::min(out.zero, 1);  // the distributed optimizer shards optimizer state only
      out.label = out.zero == 1 ? "distributed optimizer (ZeRO 1)" : "ZeRO 0";
      break;
    case Sharding::none:
      out.zero = 0;
      out.label = "DDP (ZeRO 0)";
      break;
    case Sharding::deepspeed: out.label = fmt::format("ZeRO {}", out.zero); break;
  }
  // One rank: FSDP1 switches FULL_SHARD to NO_SHARD, torchtune's single-device recipes use no
  // FSDP at all (FrameworkProfile::one_rank_unsharded).
  if (dp == 1 && profile.one_rank_unsharded && out.zero > 0) {
    out.zero = 0;
    out.label += " (1 rank: NO_SHARD)";
  }
  if (dp == 1) out.shard_degree = 1;
  out.gathered_for_step = sharding == Sharding::fsdp2 && par.pp > 1 && out.zero >= 2 && out.shard_degree > 1 &&
                          plan.offload.params == Tier::gpu;
  return out;
}

}  // namespace ftplan::plan
