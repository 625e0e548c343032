#include "plan/framework.hpp"
#include "plan/rank_layout.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "plan/checks.hpp"

namespace ftplan::plan {

FrameworkProfile framework_profile(const Job& job) {
  FrameworkProfile p;
  p.framework = job.framework;
  // Device overheads shared by all PyTorch-based stacks:
  // - CUDA context with lazy module loading (CUDA >= 11.7, PyTorch >= 1.13 default): ~0.5 GiB;
  //   older eager loading measured 1343 MB on a V100 (HF perf_train_gpu_one.md, transformers v4.27).
  // - NCCL: NCCL_BUFFSIZE 4 MiB per channel and direction (NCCL env docs) x up to 32 channels -> 256 MiB.
  // - cuBLAS workspace: CUBLAS_WORKSPACE_CONFIG ":4096:8" on Hopper = 32 MiB (PyTorch CUDA semantics
  //   notes); attention/cuDNN workspaces add a similar amount.
  p.cuda_context_bytes = job.cuda_context_bytes > 0 ? job.cuda_context_bytes : 512.0 * (1 << 20);
  p.nccl_buffer_bytes = 256.0 * (1 << 20);
  p.workspace_bytes = 64.0 * (1 << 20);
  // Reserved-vs-allocated slack of the caching allocator at the peak: an estimate (PyTorch
  // "CUDA semantics: memory management": blocks are rounded to 512 B / 2 MiB and split from
  // 2 MiB / 20 MiB segments; freed blocks that cannot be reused stay reserved).
  p.fragmentation = 0.05;
  // Host RSS of one training process: 2.96-3.8 GB measured for single-GPU PEFT runs
  // (huggingface/peft README, pre-2024: "CPU RAM 2.96 GB" ... "3.8 GB").
  p.host_process_bytes = 3.0e9;
  switch (job.framework) {
    case Framework::pytorch_fsdp:
      p.sharding = Sharding::fsdp1;
      // FSDP1 with limit_all_gathers=True lets at most two all-gathers be in flight
      // (torch/distributed/fsdp/_limiter_utils.py), so two units are gathered at once.
      p.gathered_units = 2;
      p.root_stays_gathered = true;
      break;
    case Framework::pytorch_fsdp2:
      p.sharding = Sharding::fsdp2;
      // torchtitan's op-level SAC policy (torchtitan/models/llama3/infra/parallelize.py, _custom_policy):
      // save mm, SDPA and reduce-scatter outputs, but recompute every second mm.
      p.selective = FrameworkProfile::Selective::every_other_mm;
      p.compile_covers_loss = false;  // torchtitan compiles each TransformerBlock, not the loss
      p.sdpa_repeats_kv = true;       // torchtitan's Attention.forward: repeat_kv, then SDPA
      // torchtitan wraps embeddings, each block and [norm, output] separately; output keeps
      // reshard_after_forward=False (torchtitan/models/llama3/infra/parallelize.py).
      p.gathered_units = 2;
      p.root_stays_gathered = false;
      break;
    case Framework::torchtune:
      p.sharding = Sharding::fsdp2;  // torchtune's distributed recipes use FSDP2 (fully_shard)
      p.optimizer_impl = OptimizerImpl::fused;  // recipes' default optimizer: AdamW(fused=True)
      p.gathered_units = 2;
      p.root_stays_gathered = false;
      break;
    case Framework::deepspeed:
      p.sharding = Sharding::deepspeed;
      p.optimizer_impl = OptimizerImpl::fused;  // FusedAdam on GPU, DeepSpeedCPUAdam on the host
      p.gathered_units = 2;  // current module + stage3_prefetch_bucket_size ("auto": 0.9 hidden^2)
      p.root_stays_gathered = false;
      p.fragmentation = 0.10;  // DeepSpeed allocates and frees flat buffers each step: more slack (estimate)
      break;
    case Framework::megatron:
      p.sharding = Sharding::megatron;
      p.optimizer_impl = OptimizerImpl::fused;  // Apex / Transformer Engine FusedAdam
      p.fused_pointwise = true;                 // megatron/core/fusions, Transformer Engine
      p.root_stays_gathered = false;
      break;
    case Framework::hf_trainer:
      // Plain Trainer: single GPU or DDP (FSDP/DeepSpeed through HF use those profiles).
      p.sharding = Sharding::none;
      p.ddp_bucket_copy = true;  // torch DDP gradient_as_bucket_view=False by default
      break;
    case Framework::yafsdp:
      p.sharding = Sharding::yafsdp;
      p.gathered_units = 2;  // two preallocated parameter buffers, reused layer after layer
      p.root_stays_gathered = false;
      break;
  }
  return p;
}

PrecisionRecipe precision_recipe(const Job& job, const FrameworkProfile& profile) {
  PrecisionRecipe r;
  switch (job.precision) {
    case Precision::fp32:
      r = {4, 4, 0, 4, 4, false, 4};
      break;
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
      if (job.framework == Framework::pytorch_fsdp2 || job.fsdp_mixed_precision.param == WireType::fp32) r.reduce_B = 4;
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
  const Sharding sharding = framework_profile(job).sharding;
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
    case Sharding::deepspeed:
      out.label = fmt::format("ZeRO {}", out.zero);
      break;
  }
  // One rank: FSDP1 switches FULL_SHARD to NO_SHARD (torch/distributed/fsdp/_init_utils.py warns
  // "switching to use NO_SHARD"), and torchtune's single-device recipes use no FSDP at all.
  if (dp == 1 && (sharding == Sharding::fsdp1 || job.framework == Framework::torchtune) && out.zero > 0) {
    out.zero = 0;
    out.label += " (1 rank: NO_SHARD)";
  }
  if (dp == 1) out.shard_degree = 1;
  out.gathered_for_step = sharding == Sharding::fsdp2 && par.pp > 1 && out.zero >= 2 && out.shard_degree > 1 &&
                          plan.offload.params == Tier::gpu;
  return out;
}

}  // namespace ftplan::plan
