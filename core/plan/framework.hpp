// What differs between training frameworks, for memory and (later) time: the precision recipe,
// how data-parallel state is sharded and gathered, buffer sizes and fixed overheads. One profile
// per Framework; each figure cites the framework source it comes from (docs/memory-model.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plan/plan.hpp"

namespace ftplan::plan {

// How parameters, gradients and optimizer state are stored, per trainable parameter.
struct PrecisionRecipe {
  double weight_B = 4;           // bytes per stored (sharded) parameter
  double grad_B = 4;             // bytes per stored gradient element
  double master_B = 0;           // fp32 master copy kept by the optimizer (0 = weights are the master)
  double state_B = 4;            // bytes per optimizer state element (Adam m and v each)
  double compute_B = 2;          // bytes per element of the 16-bit compute copy (gathered/autocast)
  bool autocast_copies = false;  // weights cast to 16 bit per forward and saved for backward (PyTorch AMP)
  double activation_B = 2;       // bytes per activation element
  double gather_B = 2;           // bytes per element of gathered (unsharded) parameters (FSDP, ZeRO-3)
  double reduce_B = 2;           // bytes per element gradients are reduced in
};

enum class Sharding {
  none,       // each data-parallel rank holds everything (DDP, single GPU)
  deepspeed,  // ZeRO stages 1-3 (Rajbhandari et al. 2020), DeepSpeed's engine
  fsdp1,      // PyTorch FSDP (flat parameters per wrapped unit)
  fsdp2,      // PyTorch FSDP2 (per-parameter DTensor sharding, torchtitan)
  megatron,   // Megatron-LM distributed optimizer (ZeRO-1 equivalent)
  yafsdp,     // Yandex YaFSDP: preallocated gather/reduce buffers
};

// One framework: its names and the mechanisms it switches on. The rows live in one table
// (`framework_table`, plan/framework.cpp); every other place reads these fields, never the
// Framework enum (docs/architecture.md, "where to add a framework").
struct FrameworkProfile {
  Framework framework = Framework::pytorch_fsdp;
  const char* name = "";          // the scenario's job.framework value
  const char* display_name = "";  // for people: "PyTorch FSDP", "DeepSpeed", ...
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
  // Device overheads outside the caching allocator, shared by all PyTorch-based stacks:
  // - CUDA context with lazy module loading (CUDA >= 11.7, PyTorch >= 1.13 default): ~0.5 GiB;
  //   older eager loading measured 1343 MB on a V100 (HF perf_train_gpu_one.md, transformers v4.27).
  //   A job's measured cuda_context_bytes replaces it (framework_profile).
  // - NCCL: NCCL_BUFFSIZE 4 MiB per channel and direction (NCCL env docs) x up to 32 channels -> 256 MiB.
  // - cuBLAS workspace: CUBLAS_WORKSPACE_CONFIG ":4096:8" on Hopper = 32 MiB (PyTorch CUDA semantics
  //   notes); attention/cuDNN workspaces add a similar amount.
  double cuda_context_bytes = 512.0 * (1 << 20);  // CUDA context + loaded kernels (cuBLAS, cuDNN, NCCL modules)
  double nccl_buffer_bytes = 256.0 * (1 << 20);   // per rank when it communicates
  double workspace_bytes = 64.0 * (1 << 20);      // cuBLAS/cuBLASLt workspace, attention workspace
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
  // How context parallelism brings every rank's K and V to its queries (ring attention).
  enum class RingAttention {
    // Megatron-core / Transformer Engine (cp_comm_type "p2p", its default): K and V blocks at
    // their KV width pass from rank to rank, each overlapping the previous block's compute; in
    // backward their gradients travel with them (Builder::attention).
    p2p,
    // PyTorch's context_parallel (torch/distributed/tensor/experimental/_attention.py, torch 2.6,
    // the version torchtitan ran at the end of 2024; its default rotate method "allgather"): one
    // all-gather of K and V as SDPA receives them per call, hidden only behind the first block;
    // partial outputs merged in fp32 by log-sum-exp after each further block; backward gathers
    // again, accumulates the gradients in fp32 and rotates dK, dV in fp32 around the ring
    // after every block, the last rotation exposed (Builder::gathered_ring).
    all_gather,
  } ring_attention = RingAttention::p2p;
  // torch.compile of the model also compiles the loss (HF models compute it in forward; torchtune
  // compiles its loss; torchtitan compiles transformer blocks only).
  bool compile_covers_loss = true;
  // Caching-allocator slack: reserved / allocated - 1 at the peak: an estimate (PyTorch "CUDA
  // semantics: memory management": blocks are rounded to 512 B / 2 MiB and split from 2 MiB /
  // 20 MiB segments; freed blocks that cannot be reused stay reserved).
  double fragmentation = 0.05;
  // Host memory of one training process (interpreter, framework, loaded model code), bytes:
  // 2.96-3.8 GB measured for single-GPU PEFT runs (huggingface/peft README, pre-2024: "CPU RAM
  // 2.96 GB" ... "3.8 GB").
  double host_process_bytes = 3.0e9;
  // Takes FSDP's MixedPrecision policy (job.fsdp_mixed_precision): the frameworks built on
  // torch.distributed.fsdp (FSDP1's MixedPrecision, FSDP2's MixedPrecisionPolicy).
  bool fsdp_mixed_precision_policy = false;
  // With one data-parallel rank the state is not sharded: FSDP1 switches FULL_SHARD to NO_SHARD
  // (torch/distributed/fsdp/_init_utils.py warns "switching to use NO_SHARD"), and torchtune's
  // single-device recipes use no FSDP at all.
  bool one_rank_unsharded = false;
  // FSDP2 reduces gradients in fp32 whatever the job's 16-bit type (torchtitan's
  // mixed_precision_reduce = "float32", torchtitan/config/job_config.py).
  bool reduces_in_fp32 = false;
  // FP8 weight casts are kept from the first micro-batch for the rest of the step (Transformer
  // Engine's weight caching across gradient accumulation, is_first_microbatch).
  bool caches_fp8_weights = false;
  // Full activation checkpointing copies each layer's saved input to pinned host memory as it
  // runs (non_blocking) and back for the recompute: the activation-offload machinery with the
  // inputs on the host and two layers' worth on the GPU (Unsloth's "unsloth" gradient
  // checkpointing: unsloth_zoo/gradient_checkpointing.py, UnslothCheckpointFunction with its
  // CPU_BUFFERS and double-buffered GPU_BUFFERS; Unsloth_Offloaded_Gradient_Checkpointer).
  bool offloads_checkpoint_inputs = false;
  // The LM head and the loss run fused, chunk by chunk of tokens, computing the hidden states'
  // gradient in forward: no logits of the whole sequence are kept (unsloth_zoo/fused_losses/
  // cross_entropy_loss.py, UnslothFusedLoss with torch.func.grad_and_value per chunk).
  bool fused_linear_loss = false;
  // The optimizer when the scenario names none.
  OptimizerKind default_optimizer = OptimizerKind::adamw;
  // The check's words when a plan gives parallel.fsdp to a framework that does not shard by it,
  // and (Sharding::none) parallel.zero > 0, `{}` standing for the stage: how to shard instead.
  const char* fsdp_refusal = "write job.framework: pytorch-fsdp, pytorch-fsdp2 or torchtune, or parallel.zero";
  const char* zero_refusal = "";
  // Why the framework refuses pipeline parallelism, `{}` standing for pp; "" = it accepts pp.
  const char* pipeline_refusal = "";
};

// Every framework ftplan knows, one row each, in Framework's order.
const std::vector<FrameworkProfile>& framework_table();
// The row of `f` (its defaults, before a job's overrides).
const FrameworkProfile& framework_row(Framework f);
// The framework named `name` (a row's `name`), or none.
std::optional<Framework> framework_named(std::string_view name);
// Whether the framework shards by parallel.fsdp (FSDP1, FSDP2, YaFSDP).
bool shards_by_fsdp(Sharding s);
// Where the plan's saved activations live: offload.activations, or host memory when the framework
// offloads its checkpoints' inputs by itself (FrameworkProfile::offloads_checkpoint_inputs) and
// the job checkpoints. The inventory (and through it the step IR and simulator) and `check` use it.
Tier activation_tier(const Plan& plan);

// The profile of a job's framework, with its precision recipe resolved for the job.
FrameworkProfile framework_profile(const Job& job);

// How a plan's data-parallel state is really sharded: the ZeRO stage in effect (FSDP FULL_SHARD
// = 3, SHARD_GRAD_OP = 2, NO_SHARD = 0; Megatron's distributed optimizer 1; plain DDP 0) and the
// ranks it is split over: the data-parallel ranks times the context-parallel ones (framework.cpp). The one place that
// says it: inventory, step IR and every verb's label.
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
