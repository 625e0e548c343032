// What differs between training frameworks, for memory and (later) time: the precision recipe,
// how data-parallel state is sharded and gathered, buffer sizes and fixed overheads. One profile
// per Framework; each figure cites the framework source it comes from (docs/memory-model.md).
#pragma once

#include <string>

#include "plan/plan.hpp"

namespace ftplan::plan {

// How parameters, gradients and optimizer state are stored, per trainable parameter.
struct PrecisionRecipe {
  double weight_B = 4;       // bytes per stored (sharded) parameter
  double grad_B = 4;         // bytes per stored gradient element
  double master_B = 0;       // fp32 master copy kept by the optimizer (0 = weights are the master)
  double state_B = 4;        // bytes per optimizer state element (Adam m and v each)
  double compute_B = 2;      // bytes per element of the 16-bit compute copy (gathered/autocast)
  bool autocast_copies = false;  // weights cast to 16 bit per forward and saved for backward (PyTorch AMP)
  double activation_B = 2;   // bytes per activation element
  double gather_B = 2;       // bytes per element of gathered (unsharded) parameters (FSDP, ZeRO-3)
  double reduce_B = 2;       // bytes per element gradients are reduced in
};

enum class Sharding {
  none,       // each data-parallel rank holds everything (DDP, single GPU)
  deepspeed,  // ZeRO stages 1-3 (Rajbhandari et al. 2020), DeepSpeed's engine
  fsdp1,      // PyTorch FSDP (flat parameters per wrapped unit)
  fsdp2,      // PyTorch FSDP2 (per-parameter DTensor sharding, torchtitan)
  megatron,   // Megatron-LM distributed optimizer (ZeRO-1 equivalent)
  yafsdp,     // Yandex YaFSDP: preallocated gather/reduce buffers
};

struct FrameworkProfile {
  Framework framework = Framework::pytorch_fsdp;
  Sharding sharding = Sharding::fsdp1;
  // Units whose full parameters are gathered at once under ZeRO-3/FSDP (current + prefetched).
  int gathered_units = 2;
  // FSDP1: the root unit (embeddings, final norm, LM head) stays gathered from forward to
  // backward (torch/distributed/fsdp/_runtime_utils.py: the root does not reshard after forward).
  bool root_stays_gathered = true;
  // DDP keeps gradient buckets besides .grad unless gradient_as_bucket_view (torch DDP default False).
  bool ddp_bucket_copy = true;
  // DeepSpeed ZeRO-1/2 reduce and all-gather buckets, elements (HF "auto": hidden^2; DS default 5e8).
  bool buckets_hidden_squared = true;
  // Device overheads outside the caching allocator.
  double cuda_context_bytes = 0;   // CUDA context + loaded kernels (cuBLAS, cuDNN, NCCL modules)
  double nccl_buffer_bytes = 0;    // per rank when it communicates
  double workspace_bytes = 0;      // cuBLAS/cuBLASLt workspace, attention workspace
    // The optimizer implementation the framework uses by default.
  OptimizerImpl optimizer_impl = OptimizerImpl::foreach;
  // What "selective" activation checkpointing means in this framework.
  enum class Selective {
    attention_core,  // Megatron-LM: recompute softmax/dropout of attention (Korthikanti et al. 2022, sec. 5)
    every_other_mm,  // torchtitan op-level SAC: keep matmul and attention outputs except every second matmul
  } selective = Selective::attention_core;
  // Pointwise ops run as fused kernels (Megatron/Transformer Engine: fused layer norm, RoPE,
  // bias-GeLU/SwiGLU, softmax) rather than one eager kernel per op (HF transformers, torchtitan
  // without compile). torch.compile fuses them too.
  bool fused_pointwise = false;
  // With GQA, the model repeats K and V to all query heads before SDPA, so SDPA keeps them at
  // all heads' width for backward (torchtitan models/llama3/model/model.py Attention.forward:
  // keys = repeat_kv(xk, n_rep) before the SDPA call). HF transformers on torch >= 2.5 passes
  // enable_gqa=True instead (integrations/sdpa_attention.py use_gqa_in_sdpa), flash-attn takes
  // GQA natively: K and V stay at their KV width.
  bool sdpa_repeats_kv = false;
  // torch.compile of the model also compiles the loss (HF models compute it in forward; torchtune
  // compiles its loss; torchtitan compiles transformer blocks only).
  bool compile_covers_loss = true;
  // Caching-allocator slack: reserved / allocated - 1 at the peak.
  double fragmentation = 0.05;
  // Host memory of one training process (interpreter, framework, loaded model code), bytes.
  double host_process_bytes = 3.0e9;
};

// The profile of a job's framework, with its precision recipe resolved for the job.
FrameworkProfile framework_profile(const Job& job);

// How a plan's data-parallel state is really sharded: the ZeRO stage in effect (FSDP FULL_SHARD
// = 3, SHARD_GRAD_OP = 2, NO_SHARD = 0; Megatron's distributed optimizer 1; plain DDP 0) and the
// ranks it is split over: the data-parallel ranks times the context-parallel ones (framework.cpp). The one place that says it: inventory, step IR and every verb's label.
struct ShardingInEffect {
  int zero = 0;
  int shard_degree = 1;
  // FSDP2 inside pipeline stages (torchtitan): each stage's parameters are gathered once per step
  // and kept across its micro-batches, its gradients reduce-scattered once after its last
  // backward (inventory's FSDP case cites the sources). Parameters offloaded to the host are
  // still streamed unit by unit.
  bool gathered_for_step = false;
  std::string label;  // "FSDP full_shard", "ZeRO 2", "FSDP full_shard (1 rank: NO_SHARD)", ...
};
ShardingInEffect sharding_in_effect(const Plan& plan);
PrecisionRecipe precision_recipe(const Job& job, const FrameworkProfile& profile);

}  // namespace ftplan::plan
