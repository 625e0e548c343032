// What to train: the job (docs/scenario-format.md, section `job`). Defaults live here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/enum_names.hpp"

namespace ftplan::plan {

enum class Method { full, lora, qlora };
enum class Precision {
  fp32,        // everything fp32
  bf16_mixed,  // 16-bit compute, fp32 master weights/optimizer (AMP or DeepSpeed/Megatron style per framework)
  fp16_mixed,  // as bf16_mixed with fp16 and loss scaling
  bf16,        // pure bf16: weights, grads and optimizer states in bf16 (torchtune dtype=bf16)
  fp8_mixed,   // fp8 linears (Transformer Engine / torchao float8) on a bf16-mixed recipe
};
enum class OptimizerKind { adamw, adam, adamw_8bit, sgd, sgd_momentum, adafactor, lion };
enum class Checkpointing { none, selective, full };
// flash_v1: FlashAttention-1-class kernels (flash-attn 1.x, the Triton FlashAttention of 2022-23
// that llm-foundry ran as attn_impl: triton), about half FlashAttention-2's speed.
enum class AttentionImpl { flash, sdpa, eager, flash_v1 };
// Keys of plan::framework_table's rows (plan/framework.cpp), in its order.
enum class Framework { pytorch_fsdp, pytorch_fsdp2, deepspeed, megatron, hf_trainer, torchtune, yafsdp, unsloth };
// How DeepSpeed ZeRO-3 brings a module's parameters in before it runs.
enum class Zero3Fetch {
  // Coalesced all-gathers per module, prefetched ahead on their own stream while compute runs
  // (DeepSpeed since PR #1453, Nov 2021: PartitionedParameterCoordinator, all_gather_coalesced).
  prefetch,
  // DeepSpeed before PR #1188 (mid-2021): one all-gather per parameter tensor through
  // torch.distributed's list API, each after a device synchronize, so none overlaps compute
  // (issue #1069: ~0.5 ms per parameter on one 8-GPU node, "pre_launch 130us, launch 250us").
  per_parameter,
};
enum class QuantKind { nf4, fp4, int8, int4 };
enum class Packing { packed, padded };
enum class LengthDistribution { fixed, uniform, normal, lognormal };

struct LoraSpec {
  int rank = 16;
  double alpha = 32;
  double dropout = 0.0;
  // Canonical module names: q, k, v, o, gate, up, down (HF names like q_proj are accepted on input).
  std::vector<std::string> targets = {"q", "k", "v", "o"};
};

struct QuantSpec {
  QuantKind kind = QuantKind::nf4;
  bool double_quant = true;  // QLoRA's double quantization of the absmax constants (Dettmers et al. 2023)
  int block_size = 64;       // elements per quantization block
};

// How the optimizer step is implemented, which decides its temporaries.
enum class OptimizerImpl {
  framework_default,  // what the framework uses (FrameworkProfile::optimizer_impl)
  foreach,            // torch.optim multi-tensor (default on CUDA): one full-size temporary list
  fused,              // torch.optim fused=True / DeepSpeed FusedAdam / CPU Adam: no full-size temporary
  per_parameter,      // a loop over parameters (HF's legacy AdamW "adamw_hf"): one parameter's temporary
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::adamw;
  OptimizerImpl implementation = OptimizerImpl::framework_default;
  // Fuse the step into backward and free each gradient right after (torchtune optimizer_in_bwd).
  bool in_backward = false;
  // bitsandbytes' paged optimizers (PagedAdamW, PagedAdamW8bit, PagedAdamW32bit, PagedLion; HF
  // optim="paged_adamw_8bit"): the state of large tensors in CUDA unified memory, paged to host
  // memory when the GPU is full (footprint::paged_placement).
  bool paged = false;
};

struct SampleSpec {
  Packing packing = Packing::packed;
  LengthDistribution distribution = LengthDistribution::fixed;
  double mean_tokens = 0;  // mean sample length; 0 = seq_len
  double std_tokens = 0;   // normal/lognormal spread
  std::int64_t min_tokens = 1;
  std::int64_t max_tokens = 0;  // 0 = seq_len
};

struct LossSpec {
  bool fp32_logits = true;  // logits upcast to fp32 before cross-entropy (HF/torchtitan default)
  int chunks = 0;           // chunked cross-entropy pieces; 0 = not chunked (torchtune: 8)
};

// FSDP's mixed-precision policy under bf16/fp16-mixed (torch.distributed.fsdp.MixedPrecision,
// FSDP2's MixedPrecisionPolicy): the type units are gathered in (`param`) and the type gradients
// are reduced in (`reduce`). `framework_default` is what the framework does unless told
// otherwise: FSDP1 gathers and reduces in the 16-bit type; torchtitan's FSDP2 gathers in 16 bits
// and reduces in fp32; torchtune 16 bits both. An fp32 `param` keeps the gathered weights in fp32
// and computes under torch.autocast (Composer's "DEFAULT" before 2024: param fp32, reduce 16-bit).
enum class WireType { framework_default, half, fp32 };
struct FsdpMixedPrecision {
  WireType param = WireType::framework_default;
  WireType reduce = WireType::framework_default;
  bool operator==(const FsdpMixedPrecision&) const = default;
};

// Samples per optimizer step, at most. Published batches reach about 16k samples (LLaMA's 4M
// tokens of 2048, Touvron et al. 2023; DeepSeek-V3's 15,360); 2^24 is 1,000x that, and keeps a
// step's accumulation count (at most global_batch) within an int.
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 24;

struct Job {
  Method method = Method::full;
  LoraSpec lora;
  QuantSpec quant;  // for QLoRA's frozen base
  std::int64_t seq_len = 2048;
  SampleSpec samples;
  int micro_batch = 1;
  // micro_batch: auto: the micro-batch is chosen per plan, at the fixed global batch, as the one
  // whose simulated step is fastest among those that fit (evaluate::choose_open_knobs); micro_batch
  // then holds the choice.
  bool micro_batch_auto = false;
  std::int64_t global_batch = 0;  // samples per optimizer step; 0 = micro_batch x data-parallel degree
  std::int64_t tokens = 0;        // tokens to train on; exactly one of tokens, steps, epochs is given
  std::int64_t steps = 0;
  double epochs = 0;
  std::int64_t dataset_tokens = 0;  // with epochs
  Precision precision = Precision::bf16_mixed;
  OptimizerSpec optimizer;
  Checkpointing checkpointing = Checkpointing::none;
  // activation_checkpointing: auto: chosen per plan with the micro-batch (evaluate::choose_open_knobs):
  // the fastest fitting step over none, selective and full; `checkpointing` then holds the choice.
  bool checkpointing_auto = false;
  // Whether micro_batch and checkpointing hold the choice for the auto ones: the reader leaves them
  // open (false); evaluate::choose_open_knobs chooses them, and evaluation refuses a plan it has not.
  bool open_knobs_chosen = false;
  bool knobs_open() const { return (micro_batch_auto || checkpointing_auto) && !open_knobs_chosen; }
  // The scenario named the optimizer (else the framework's default_optimizer applies).
  bool optimizer_given = false;
  // Under full checkpointing, every `checkpoint_every`-th layer of a stage is checkpointed and the
  // others keep their activations (torchtitan's layer SAC, ac_freq; Megatron-LM's uniform
  // --recompute-num-layers): the 2nd, 4th, ... with 2. 1 = every layer.
  int checkpoint_every = 1;
  // Whether the layer at `index` on its stage (0-based) is recomputed in backward.
  bool checkpointed(int index) const {
    return checkpointing == Checkpointing::full && (index + 1) % checkpoint_every == 0;
  }
  AttentionImpl attention = AttentionImpl::flash;
  Framework framework = Framework::pytorch_fsdp;
  Zero3Fetch zero3_fetch = Zero3Fetch::prefetch;  // DeepSpeed ZeRO-3 only
  FsdpMixedPrecision fsdp_mixed_precision;        // FSDP frameworks only
  double dropout = -1;                            // training dropout; < 0 = the model's published value
  bool compile = false;  // torch.compile: fused pointwise ops are recomputed in backward, not saved
  // Gradients stay allocated between steps: optimizer.zero_grad(set_to_none=False), PyTorch's
  // default before 2.0 (torch/optim/optimizer.py); since 2.0 they are freed each step.
  bool gradients_persist = false;
  double cuda_context_bytes = 0;  // measured CUDA context of the user's stack; 0 = the profile's
  LossSpec loss;

  double dropout_for(double model_dropout) const { return dropout >= 0 ? dropout : model_dropout; }
};

// Each enum's names (common/enum_names.hpp): as scenarios write them, in the order choices are offered.
inline std::span<const EnumName<Method>> enum_table(Method) {
  static constexpr EnumName<Method> t[] = {{Method::full, "full"}, {Method::lora, "lora"}, {Method::qlora, "qlora"}};
  return t;
}
inline std::span<const EnumName<Precision>> enum_table(Precision) {
  static constexpr EnumName<Precision> t[] = {{Precision::fp32, "fp32"},
                                              {Precision::bf16_mixed, "bf16-mixed"},
                                              {Precision::fp16_mixed, "fp16-mixed"},
                                              {Precision::bf16, "bf16"},
                                              {Precision::fp8_mixed, "fp8-mixed"}};
  return t;
}
inline std::span<const EnumName<OptimizerKind>> enum_table(OptimizerKind) {
  static constexpr EnumName<OptimizerKind> t[] = {{OptimizerKind::adamw, "adamw"},
                                                  {OptimizerKind::adam, "adam"},
                                                  {OptimizerKind::adamw_8bit, "adamw-8bit"},
                                                  {OptimizerKind::sgd, "sgd"},
                                                  {OptimizerKind::sgd_momentum, "sgd-momentum"},
                                                  {OptimizerKind::adafactor, "adafactor"},
                                                  {OptimizerKind::lion, "lion"}};
  return t;
}
// (framework_default is what is left unwritten: not a name a scenario gives; to_string says it.)
inline std::span<const EnumName<OptimizerImpl>> enum_table(OptimizerImpl) {
  static constexpr EnumName<OptimizerImpl> t[] = {{OptimizerImpl::foreach, "foreach"},
                                                  {OptimizerImpl::fused, "fused"},
                                                  {OptimizerImpl::per_parameter, "per-parameter"}};
  return t;
}
inline std::span<const EnumName<Checkpointing>> enum_table(Checkpointing) {
  static constexpr EnumName<Checkpointing> t[] = {
      {Checkpointing::none, "none"}, {Checkpointing::selective, "selective"}, {Checkpointing::full, "full"}};
  return t;
}
inline std::span<const EnumName<AttentionImpl>> enum_table(AttentionImpl) {
  static constexpr EnumName<AttentionImpl> t[] = {{AttentionImpl::flash, "flash"},
                                                  {AttentionImpl::sdpa, "sdpa"},
                                                  {AttentionImpl::eager, "eager"},
                                                  {AttentionImpl::flash_v1, "flash-v1"}};
  return t;
}
inline std::span<const EnumName<Zero3Fetch>> enum_table(Zero3Fetch) {
  static constexpr EnumName<Zero3Fetch> t[] = {{Zero3Fetch::prefetch, "prefetch"},
                                               {Zero3Fetch::per_parameter, "per-parameter"}};
  return t;
}
inline std::span<const EnumName<QuantKind>> enum_table(QuantKind) {
  static constexpr EnumName<QuantKind> t[] = {
      {QuantKind::nf4, "nf4"}, {QuantKind::fp4, "fp4"}, {QuantKind::int8, "int8"}, {QuantKind::int4, "int4"}};
  return t;
}
inline std::span<const EnumName<Packing>> enum_table(Packing) {
  static constexpr EnumName<Packing> t[] = {{Packing::packed, "packed"}, {Packing::padded, "padded"}};
  return t;
}
inline std::span<const EnumName<LengthDistribution>> enum_table(LengthDistribution) {
  static constexpr EnumName<LengthDistribution> t[] = {{LengthDistribution::fixed, "fixed"},
                                                       {LengthDistribution::uniform, "uniform"},
                                                       {LengthDistribution::normal, "normal"},
                                                       {LengthDistribution::lognormal, "lognormal"}};
  return t;
}

const char* to_string(Method m);
const char* to_string(Precision p);
const char* to_string(OptimizerKind o);
const char* to_string(OptimizerImpl o);
const char* to_string(Checkpointing c);
const char* to_string(AttentionImpl a);
const char* to_string(Framework f);
const char* to_string(QuantKind q);

}  // namespace ftplan::plan
