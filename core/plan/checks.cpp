#include "plan/checks.hpp"
#include "plan/framework.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

namespace ftplan::plan {

const char* to_string(Method m) { return name_of(m); }
const char* to_string(Precision p) { return name_of(p); }
const char* to_string(OptimizerKind o) { return name_of(o); }
const char* to_string(OptimizerImpl o) {
  return o == OptimizerImpl::framework_default ? "framework default" : name_of(o);
}
const char* to_string(Checkpointing c) { return name_of(c); }
const char* to_string(AttentionImpl a) { return name_of(a); }
const char* to_string(QuantKind q) { return name_of(q); }
std::string file_tag(const std::string& plan_name) {
  std::string tag = plan_name;
  for (char& ch : tag)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return tag;
}

const char* to_string(Tier t) { return name_of(t); }
const char* to_string(FsdpSharding s) { return name_of(s); }
const char* to_string(PipelineSchedule s) { return name_of(s); }
const char* to_string(OffloadPreset p) { return name_of(p); }

// Where each preset puts the training state (sources and data movement: docs/tiered-memory.md).
void apply_preset(Offload& o) {
  switch (o.preset) {
    case OffloadPreset::none: break;
    case OffloadPreset::zero_offload:  // Ren et al. 2021: fp32 optimizer state and gradients on the host, CPU Adam
      o.optimizer = Tier::cpu;
      o.gradients = Tier::cpu;
      o.optimizer_step = Tier::cpu;
      break;
    // ZeRO-Offload run under `numactl --membind` to the expanders' NUMA node: the offloaded state
    // (fp32 gradients, master weights and Adam moments) in CXL memory, the step on the host's cores.
    // Liaw and Chen (2025, arXiv 2507.03305, DeepSpeed 0.16 with a libnuma allocator) measured this
    // placement's CPU Adam ~4x slower than in DRAM and kept the optimizer state in DRAM for speed:
    // write `optimizer: cpu` beside it for theirs (docs/tiered-memory.md, "CXL memory").
    case OffloadPreset::zero_offload_cxl:
      o.optimizer = Tier::cxl;
      o.gradients = Tier::cxl;
      o.optimizer_step = Tier::cpu;
      break;
    case OffloadPreset::zero_infinity:  // Rajbhandari et al. 2021: params and optimizer on NVMe, CPU step
      o.params = Tier::nvme;
      o.optimizer = Tier::nvme;
      o.gradients = Tier::cpu;
      o.optimizer_step = Tier::cpu;
      break;
    case OffloadPreset::aidaptiv:  // Phison aiDAPTIV+: layers swapped between HBM, DRAM and the flash cache
      o.params = Tier::nvme;
      o.optimizer = Tier::nvme;
      o.gradients = Tier::nvme;
      o.activations = Tier::cpu;
      o.optimizer_step = Tier::cpu;
      break;
    case OffloadPreset::activation_cpu: o.activations = Tier::cpu; break;
    case OffloadPreset::activation_nvme: o.activations = Tier::nvme; break;
  }
}

bool places_on(const Offload& o, Tier t) {
  return o.params == t || o.gradients == t || o.optimizer == t || o.activations == t;
}

bool preset_places_on(OffloadPreset preset, Tier t) {
  Offload o;
  o.preset = preset;
  apply_preset(o);
  return places_on(o, t);
}

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (model::Linear l : model::kLinears) n.emplace_back(model::to_string(l));
    return n;
  }();
  return names;
}

bool splits_global_batch(const Plan& plan, int micro_batch) {
  const std::int64_t per_step = static_cast<std::int64_t>(micro_batch) * data_parallel_degree(plan);
  return plan.job.global_batch <= 0 || per_step <= 0 || plan.job.global_batch % per_step == 0;
}

hardware::Dtype compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::fp32: return hardware::Dtype::fp32;
    case Precision::fp16_mixed: return hardware::Dtype::fp16;
    case Precision::fp8_mixed: return hardware::Dtype::fp8;
    default: return hardware::Dtype::bf16;
  }
}

int gradient_group_size(const Plan& plan) { return data_parallel_degree(plan) * std::max(1, plan.parallel.cp); }

int data_parallel_degree(const Plan& plan) {
  if (plan.parallel.dp > 0) return plan.parallel.dp;
  const int model_parallel = plan.parallel.tp * plan.parallel.pp * plan.parallel.cp;
  return model_parallel > 0 ? std::max(1, plan.cluster.gpus() / model_parallel) : 1;
}

double expected_sample_tokens(const Job& job) {
  const SampleSpec& s = job.samples;
  const double lo = static_cast<double>(std::max<std::int64_t>(1, s.min_tokens));
  const double hi = s.max_tokens > 0 ? static_cast<double>(s.max_tokens) : static_cast<double>(job.seq_len);
  const double mean = s.mean_tokens > 0 ? s.mean_tokens : static_cast<double>(job.seq_len);
  // The standard normal's density and distribution function.
  const auto phi = [](double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi); };
  const auto Phi = [](double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); };
  switch (s.distribution) {
    case LengthDistribution::fixed: return std::clamp(mean, lo, hi);
    case LengthDistribution::uniform: return 0.5 * (lo + hi);  // lengths uniform on [min, max]
    case LengthDistribution::normal: {
      if (s.std_tokens <= 0) return std::clamp(mean, lo, hi);
      // A normal truncated to [min, max]: mu + sigma (phi(a) - phi(b)) / (Phi(b) - Phi(a)),
      // a and b the bounds in standard units (Johnson, Kotz & Balakrishnan, "Continuous Univariate
      // Distributions" vol. 1, ch. 13, the truncated normal's mean).
      const double a = (lo - mean) / s.std_tokens, b = (hi - mean) / s.std_tokens;
      const double z = Phi(b) - Phi(a);
      return z > 0 ? std::clamp(mean + s.std_tokens * (phi(a) - phi(b)) / z, lo, hi) : std::clamp(mean, lo, hi);
    }
    case LengthDistribution::lognormal: {
      if (s.std_tokens <= 0) return std::clamp(mean, lo, hi);
      // Lengths lognormal with that mean and standard deviation (so log-space sigma^2 =
      // ln(1 + std^2 / mean^2) and mu = ln(mean) - sigma^2 / 2), truncated to [min, max]:
      // E = e^(mu + sigma^2/2) (Phi((ln b - mu - sigma^2) / sigma) - Phi((ln a - mu - sigma^2) / sigma))
      //     / (Phi((ln b - mu) / sigma) - Phi((ln a - mu) / sigma)) (the same reference, ch. 14).
      const double s2 = std::log1p(s.std_tokens * s.std_tokens / (mean * mean)), sigma = std::sqrt(s2);
      const double mu = std::log(mean) - 0.5 * s2;
      const double z = Phi((std::log(hi) - mu) / sigma) - Phi((std::log(lo) - mu) / sigma);
      if (z <= 0) return std::clamp(mean, lo, hi);
      const double e =
          std::exp(mu + 0.5 * s2) * (Phi((std::log(hi) - mu - s2) / sigma) - Phi((std::log(lo) - mu - s2) / sigma)) / z;
      return std::clamp(e, lo, hi);
    }
  }
  return mean;
}

double real_token_fraction(const Job& job) {
  // Padded samples fill seq_len with their own tokens and padding; packed ones fill it whole.
  if (job.samples.packing == Packing::padded) return expected_sample_tokens(job) / static_cast<double>(job.seq_len);
  return 1.0;
}

std::int64_t global_batch_samples(const Plan& plan) {
  return plan.job.global_batch > 0 ? plan.job.global_batch
                                   : static_cast<std::int64_t>(plan.job.micro_batch) * data_parallel_degree(plan);
}

std::int64_t grad_accumulation_steps(const Plan& plan) {
  const std::int64_t per_step = static_cast<std::int64_t>(plan.job.micro_batch) * data_parallel_degree(plan);
  return per_step > 0 ? std::max<std::int64_t>(1, global_batch_samples(plan) / per_step) : 1;
}

std::vector<Finding> check_job(const model::ModelSpec& model, const Job& job) {
  std::vector<Finding> out;
  const auto bad = [&](std::string key, std::string message) { out.push_back({"job." + key, std::move(message)}); };
  const int amounts = (job.tokens > 0) + (job.steps > 0) + (job.epochs > 0);
  if (amounts != 1)
    bad("tokens", amounts == 0 ? "say how much to train: one of tokens, steps, or epochs (with dataset_tokens)"
                               : "give only one of tokens, steps and epochs");
  if (job.epochs > 0 && job.dataset_tokens <= 0) bad("dataset_tokens", "is required with epochs");
  if (job.epochs <= 0 && job.dataset_tokens > 0)
    bad("dataset_tokens", "sizes the dataset for epochs; with tokens or steps it would be ignored");
  if (job.global_batch > kMaxGlobalBatch)
    bad("global_batch",
        fmt::format("{} samples per step are more than ftplan's limit of {}", job.global_batch, kMaxGlobalBatch));
  // The model's context length bounds a sample. Learned position embeddings have max_context rows
  // and cannot go further. RoPE's max_context is the range its frequencies were trained (or scaled,
  // HF config.json max_position_embeddings with rope_scaling) for; beyond it attention degrades
  // unless the run rescales RoPE (position interpolation, YaRN; MLPerf's Llama-2-70B LoRA trains at
  // 8192 of 4096), which the scenario says with model: {zoo: NAME, max_context: N}. ALiBi: MPT's
  // forward refuses longer input (llm-foundry modeling_mpt.py, "Cannot forward input with seq_len >
  // max_seq_len"). T5's bucketed relative positions and position-free models record no limit and
  // take any length.
  const bool bounded = model.positional == model::Positional::learned || model.positional == model::Positional::rope ||
                       model.positional == model::Positional::alibi;
  if (bounded && model.max_context > 0 && job.seq_len > model.max_context)
    bad("seq_len",
        fmt::format("{} is longer than {}; to train past it, write model: {{zoo: {}, "
                    "max_context: {}}} (or max_context beside hf_config)",
                    job.seq_len,
                    model.positional == model::Positional::learned
                        ? fmt::format("the {} positions {} has learned embeddings for (its max_context)",
                                      model.max_context, model.name)
                        : fmt::format("{}'s context of {} tokens (its max_context)", model.name, model.max_context),
                    model.name, job.seq_len));
  if (job.samples.max_tokens > job.seq_len)
    bad("samples.max", fmt::format("{} is longer than seq_len {}", job.samples.max_tokens, job.seq_len));
  if (job.samples.mean_tokens > static_cast<double>(job.seq_len))
    bad("samples.mean", fmt::format("{} is longer than seq_len {}", job.samples.mean_tokens, job.seq_len));
  if (job.method != Method::full) {
    for (const auto& t : job.lora.targets)
      if ((t == "gate") && !model::is_gated(model.ffn_kind))
        bad("lora.targets", fmt::format("'gate' names no module: {}'s MLP is not gated", model.name));
  }
  if (job.loss.chunks < 0) bad("loss.chunks", "must not be negative");
  return out;
}

namespace {

// Collects the findings of check_plan's families, in the order they run (every problem is
// reported, so a person fixes them all at once).
class Findings {
 public:
  explicit Findings(std::vector<Finding>& out) : out_(out) {}
  void operator()(std::string key, std::string message) { out_.push_back({std::move(key), std::move(message)}); }

 private:
  std::vector<Finding>& out_;
};

// Tensor and sequence parallelism, and the pipeline's depth and schedule.
void check_tensor_and_pipeline(const model::ModelSpec& model, const Plan& plan, Findings& bad) {
  const Parallel& p = plan.parallel;
  const int kv = model.kv_heads_or_default();
  // Megatron-LM splits attention heads and KV groups across tensor-parallel ranks
  // (megatron/core/transformer/attention.py: num_query_groups % tp == 0).
  if (p.tp > 1) {
    if (model.heads % p.tp != 0)
      bad("parallel.tp", fmt::format("{} does not divide {} attention heads of {}", p.tp, model.heads, model.name));
    else if (kv % p.tp != 0)
      bad("parallel.tp", fmt::format("{} does not divide {} KV heads of {}", p.tp, kv, model.name));
    else if (model.ffn > 0 && model.ffn % p.tp != 0)
      bad("parallel.tp", fmt::format("{} does not divide the FFN size {} of {}", p.tp, model.ffn, model.name));
  }
  if (p.sequence_parallel && p.tp < 2) bad("parallel.sequence_parallel", "needs tensor parallelism (tp > 1)");
  if (p.async_tp && !p.sequence_parallel)
    bad("parallel.async_tp", "overlaps sequence parallelism's collectives; needs sequence_parallel: true");
  if (p.pp > model.layers)
    bad("parallel.pp", fmt::format("{} pipeline stages for {} layers of {}", p.pp, model.layers, model.name));
  if (p.schedule != PipelineSchedule::one_f_one_b && p.schedule != PipelineSchedule::interleaved && p.pp < 2)
    bad("parallel.schedule",
        fmt::format("orders a pipeline's micro-batches ({}); needs pp > 1", to_string(p.schedule)));
  if (p.schedule == PipelineSchedule::interleaved) {
    if (p.pp < 2) bad("parallel.schedule", "interleaved 1F1B needs pp > 1");
    if (p.virtual_stages < 2) bad("parallel.virtual_stages", "interleaved 1F1B needs at least 2 virtual stages");
    // Layers that do not divide evenly: the virtual stages differ by one layer, earlier ones
    // taking the remainder (inventory::stage_layer_list; torchtitan and Megatron accept it). Each
    // virtual stage needs a layer.
    if (model.total_layers() < p.pp * std::max(1, p.virtual_stages))
      bad("parallel.virtual_stages",
          fmt::format("pp {} x virtual_stages {} = {} virtual stages for {} layers", p.pp, p.virtual_stages,
                      p.pp * std::max(1, p.virtual_stages), model.total_layers()));
    // Megatron-LM asserts it (schedules.py, forward_backward_pipelining_with_interleaving).
    if (p.pp > 1 && grad_accumulation_steps(plan) % p.pp != 0)
      bad("parallel.schedule",
          fmt::format("interleaved 1F1B needs the micro-batches per step ({}) to be a multiple of pp {}",
                      grad_accumulation_steps(plan), p.pp));
  } else if (p.virtual_stages != 1) {
    bad("parallel.virtual_stages", "only interleaved schedules have virtual stages");
  }
}

// Megatron-core's rules for uneven end stages with virtual stages (transformer_config.py
// __post_init__, "Uneven PP"; transformer_block.py get_num_layers_to_build): each end stage's
// layers and each middle stage's share divide by the virtual stages, the middle layers by the
// middle stages.
// `middle` stages between the end ones run the `rest` of the `total` layers.
void check_interleaved_end_stages(const Parallel& p, const char* key, int total, int middle, int rest, Findings& bad) {
  const int vp = std::max(1, p.virtual_stages);
  if (p.first_stage_layers > 0 && p.first_stage_layers % vp != 0)
    bad("parallel.first_stage_layers", fmt::format("number of layers at first stage: {} must be divisible by virtual "
                                                   "pipeline parallel degree {} (Megatron-core)",
                                                   p.first_stage_layers, vp));
  if (p.last_stage_layers > 0 && p.last_stage_layers % vp != 0)
    bad("parallel.last_stage_layers", fmt::format("number of layers at last stage: {} must be divisible by virtual "
                                                  "pipeline parallel degree {} (Megatron-core)",
                                                  p.last_stage_layers, vp));
  if (middle == 0 ? rest != 0 : (rest <= 0 || rest % middle != 0))
    bad(key, fmt::format("number of layers at middle stage: {} must be divisible by the middle pipeline model parallel "
                         "size {} (Megatron-core; first {} + last {} of {} layers)",
                         rest, middle, p.first_stage_layers, p.last_stage_layers, total));
  else if (middle > 0 && (rest / middle) % vp != 0)
    bad(key, fmt::format("{} layers on each middle stage must be divisible by virtual pipeline parallel degree {} "
                         "(Megatron-core)",
                         rest / middle, vp));
}

// The layers of the first and last pipeline stages (Parallel::first_stage_layers, last_stage_layers).
void check_end_stages(const model::ModelSpec& model, const Parallel& p, Findings& bad) {
  if (p.first_stage_layers <= 0 && p.last_stage_layers <= 0) return;
  const char* key = p.last_stage_layers > 0 ? "parallel.last_stage_layers" : "parallel.first_stage_layers";
  const int total = model.total_layers();
  const int middle = p.pp - (p.first_stage_layers > 0 ? 1 : 0) - (p.last_stage_layers > 0 ? 1 : 0);
  const int rest = total - p.first_stage_layers - p.last_stage_layers;
  if (p.pp < 2)
    bad(key, "sets the layers of an end pipeline stage; needs pp > 1");
  else if (p.schedule == PipelineSchedule::interleaved)
    check_interleaved_end_stages(p, key, total, middle, rest, bad);
  else if (middle == 0 ? rest != 0 : rest < middle)
    bad(key,
        fmt::format("first {} + last {} leave {} of the {} layers for {} middle stage(s){}", p.first_stage_layers,
                    p.last_stage_layers, rest, total, middle, middle == 0 ? " (they must add up to all layers)" : ""));
}

// Context parallelism, the product of the degrees against the GPUs, and expert parallelism.
void check_degrees(const model::ModelSpec& model, const Plan& plan, Findings& bad) {
  const Parallel& p = plan.parallel;
  const int gpus = plan.cluster.gpus();
  // Load-balanced ring attention cuts each sequence into 2 x cp chunks (Megatron-core context parallel).
  if (p.cp > 1 && plan.job.seq_len % (2 * p.cp) != 0)
    bad("parallel.cp", fmt::format("2 x cp = {} does not divide seq_len {}", 2 * p.cp, plan.job.seq_len));
  const int model_parallel = p.tp * p.pp * p.cp;
  if (p.dp > 0) {
    if (model_parallel * p.dp != gpus)
      bad("parallel.dp", fmt::format("dp {} x tp {} x pp {} x cp {} = {}, but the plan has {} GPUs", p.dp, p.tp, p.pp,
                                     p.cp, p.dp * model_parallel, gpus));
  } else if (gpus % model_parallel != 0) {
    bad("parallel", fmt::format("tp {} x pp {} x cp {} = {} does not divide the plan's {} GPUs", p.tp, p.pp, p.cp,
                                model_parallel, gpus));
  }
  const int dp = data_parallel_degree(plan);
  if (p.ep > 1) {
    if (!model.is_moe())
      bad("parallel.ep", fmt::format("{} has no experts to spread", model.name));
    else if (model.moe.experts % p.ep != 0)
      bad("parallel.ep", fmt::format("{} does not divide {} experts of {}", p.ep, model.moe.experts, model.name));
    // Megatron-core: expert-parallel groups are carved out of data x context parallel ranks.
    if ((dp * p.cp) % p.ep != 0) bad("parallel.ep", fmt::format("{} does not divide dp x cp = {}", p.ep, dp * p.cp));
  }
  if (p.capacity_factor > 0 && !model.is_moe())
    bad("parallel.capacity_factor", fmt::format("{} has no experts to route to", model.name));
}

// What the framework runs with pipeline stages, ZeRO-3's fetch and FSDP's precision policy.
void check_framework_modes(const Plan& plan, const FrameworkProfile& prof, Findings& bad) {
  const Parallel& p = plan.parallel;
  const bool deepspeed = prof.sharding == Sharding::deepspeed;
  // DeepSpeed's PipelineEngine supports ZeRO stages 0 and 1 only (deepspeed/runtime/pipe/engine.py,
  // PipelineEngine.__init__: assert zero_optimization_stage() < ZeroStageEnum.gradients, "ZeRO-2 and
  // ZeRO-3 are incompatible with pipeline parallelism"). FSDP runs inside each stage instead
  // (torchtitan: fully_shard on each stage's model part; torch.distributed.pipelining's stage
  // drives it), so pp with FSDP full_shard / shard_grad_op is accepted for the FSDP frameworks.
  if (deepspeed && p.pp > 1 && p.zero >= 2)
    bad("parallel.zero",
        fmt::format("DeepSpeed's PipelineEngine: \"ZeRO-2 and ZeRO-3 are incompatible with pipeline "
                    "parallelism\" (pp {}); use zero 0 or 1, or FSDP inside each stage (job.framework: "
                    "pytorch-fsdp2, as torchtitan)",
                    p.pp));
  // Frameworks without pipeline parallelism say so in their row (FrameworkProfile::pipeline_refusal).
  if (p.pp > 1 && *prof.pipeline_refusal != '\0')
    bad("parallel.pp", fmt::format(fmt::runtime(prof.pipeline_refusal), p.pp));
  if (plan.job.zero3_fetch != Zero3Fetch::prefetch && deepspeed && p.zero != 3)
    bad("job.zero3_fetch",
        fmt::format("describes how ZeRO stage 3 gathers parameters; this plan runs ZeRO {}", p.zero));

  if (plan.job.fsdp_mixed_precision != FsdpMixedPrecision{} && !prof.fsdp_mixed_precision_policy)
    bad("job.fsdp_mixed_precision",
        fmt::format(
            "is FSDP's mixed-precision policy; this plan runs {} (use pytorch-fsdp, pytorch-fsdp2 or torchtune)",
            to_string(plan.job.framework)));
}

// The job against the plan: checkpointed layers, the global batch's split, the GPU's precisions.
void check_job_on_plan(const Plan& plan, Findings& bad) {
  if (plan.job.checkpoint_every > 1 && plan.job.checkpointing != Checkpointing::full)
    bad("job.checkpoint_every",
        fmt::format("picks the layers full checkpointing recomputes; this plan's checkpointing is {}",
                    to_string(plan.job.checkpointing)));

  const int dp = data_parallel_degree(plan);
  const std::int64_t per_step = static_cast<std::int64_t>(plan.job.micro_batch) * dp;
  if (!splits_global_batch(plan, plan.job.micro_batch))
    bad("job.global_batch",
        fmt::format("{} samples do not split into micro_batch {} x dp {} = {} per accumulation step",
                    plan.job.global_batch, plan.job.micro_batch, dp, per_step));

  // The GPU must compute in the job's precision.
  const Cluster& c = plan.cluster;
  const bool wants_bf16 = plan.job.precision == Precision::bf16_mixed || plan.job.precision == Precision::bf16;
  const auto& peaks = c.gpu.peak_flops;
  if (wants_bf16 && peaks.count(hardware::Dtype::bf16) == 0)
    bad("job.precision", fmt::format("{} has no bf16 support; use fp16-mixed or fp32", c.gpu.display_name));
  if (plan.job.precision == Precision::fp8_mixed && peaks.count(hardware::Dtype::fp8) == 0)
    bad("job.precision",
        fmt::format("{} has no FP8 tensor cores (Ada, Hopper, Blackwell and CDNA3 do)", c.gpu.display_name));
}

// Offload placement rules of DeepSpeed (runtime/zero/offload_config.py): parameters leave the
// GPU only under ZeRO-3; the optimizer state only under ZeRO >= 1. And where the step may run.
void check_offload(const Plan& plan, const FrameworkProfile& prof, Findings& bad) {
  const Parallel& p = plan.parallel;
  const Cluster& c = plan.cluster;
  const Offload& o = plan.offload;
  if (prof.sharding == Sharding::deepspeed) {
    if (o.params != Tier::gpu && p.zero != 3)
      bad("offload.params", "DeepSpeed offloads parameters only with ZeRO stage 3");
    if (o.optimizer != Tier::gpu && p.zero < 1)
      bad("offload.optimizer", "DeepSpeed offloads the optimizer only with ZeRO stage 1, 2 or 3");
  }
  if (o.optimizer_step == Tier::cpu && o.optimizer == Tier::gpu)
    bad("offload.optimizer_step",
        "a CPU optimizer step needs the optimizer state off the GPU (offload.optimizer: cpu, cxl or nvme)");
  if (o.optimizer_step != Tier::gpu && o.optimizer_step != Tier::cpu)
    bad("offload.optimizer_step", "the optimizer step runs on gpu or cpu");
  if (o.delayed_update && o.optimizer_step != Tier::cpu)
    bad("offload.delayed_update",
        "the one-step delayed update overlaps a CPU optimizer step (offload.optimizer_step: cpu)");
  if (places_on(o, Tier::nvme) && c.drives.empty())
    bad("offload", fmt::format("places state on NVMe, but a {} node has no drives; add cluster.drives", c.node.name));
  if (places_on(o, Tier::cxl) && c.expanders.empty())
    bad("offload",
        fmt::format("places state in CXL memory, but a {} node has no CXL memory expanders; add cluster.expanders",
                    c.node.name));
  // The engines' tuning keys size what only some placements have (inventory::add_offload_buffers,
  // schedule::Builder::swapped_optimizer_step): refused where the plan has no such thing.
  const Offload defaults;
  if (o.params != Tier::nvme) {
    if (o.buffer_count != defaults.buffer_count)
      bad("offload.buffer_count", fmt::format("counts the parameter swap buffers of offload.params: nvme (DeepSpeed "
                                              "offload_param.buffer_count); this plan keeps parameters on {}",
                                              to_string(o.params)));
    if (o.buffer_bytes != defaults.buffer_bytes)
      bad("offload.buffer_size", fmt::format("sizes the parameter swap buffers of offload.params: nvme (DeepSpeed "
                                             "offload_param.buffer_size); this plan keeps parameters on {}",
                                             to_string(o.params)));
  }
  if (o.optimizer != Tier::nvme && o.optimizer_buffer_count != defaults.optimizer_buffer_count)
    bad("offload.optimizer_buffer_count",
        fmt::format("counts the optimizer-state swap buffers of offload.optimizer: nvme (DeepSpeed offload_optimizer."
                    "buffer_count); this plan keeps the optimizer state on {}",
                    to_string(o.optimizer)));
  if (o.optimizer != Tier::nvme && o.chunk_bytes != defaults.chunk_bytes)
    bad("offload.chunk_size", fmt::format("sizes the optimizer-state swap of offload.optimizer: nvme; this plan keeps "
                                          "the optimizer state on {}",
                                          to_string(o.optimizer)));
  for (const auto& [key, on] :
       {std::pair{"offload.pipeline_read", o.pipeline_read}, std::pair{"offload.pipeline_write", o.pipeline_write}})
    if (o.optimizer != Tier::nvme && on)
      bad(key, fmt::format("overlaps the optimizer-state swap of offload.optimizer: nvme (DeepSpeed offload_optimizer."
                           "{}); this plan keeps the optimizer state on {}",
                           std::string_view(key).substr(8), to_string(o.optimizer)));
  // Page-locked or pageable: the host buffers of state that crosses PCIe (sim::host_path).
  const bool offloads = o.params != Tier::gpu || o.gradients != Tier::gpu || o.optimizer != Tier::gpu ||
                        o.activations != Tier::gpu || o.optimizer_step != Tier::gpu;
  if (!offloads && o.pinned != defaults.pinned)
    bad("offload.pinned",
        "page-locks the host buffers offloaded state crosses PCIe through; this plan offloads nothing");
}

// Keys the framework would not act on: say what to write instead of computing something else.
void check_sharding_keys(const Plan& plan, const FrameworkProfile& prof, Findings& bad) {
  const Parallel& p = plan.parallel;
  const Offload& o = plan.offload;
  const Framework fw = plan.job.framework;
  const bool fsdp_like = shards_by_fsdp(prof.sharding);
  if (prof.sharding == Sharding::none && p.zero > 0)
    bad("parallel.zero", fmt::format(fmt::runtime(prof.zero_refusal), p.zero));
  if (prof.sharding == Sharding::megatron && p.zero > 1)
    bad("parallel.zero",
        fmt::format("Megatron's distributed optimizer shards the optimizer state only (ZeRO 1); ZeRO {} "
                    "is DeepSpeed's (job.framework: deepspeed)",
                    p.zero));
  if (p.fsdp_given && !fsdp_like)
    bad("parallel.fsdp",
        fmt::format("is FSDP's sharding strategy; this plan runs {} ({})", to_string(fw), prof.fsdp_refusal));
  if (fsdp_like && (p.zero > 0 || p.zero_given)) {
    const int fsdp_zero = p.fsdp == FsdpSharding::shard_grad_op ? 2 : p.fsdp == FsdpSharding::no_shard ? 0 : 3;
    if (p.zero != fsdp_zero)
      bad("parallel.zero", fmt::format("{} shards by parallel.fsdp ({} = ZeRO {}); for ZeRO {} write fsdp: {}",
                                       to_string(fw), to_string(p.fsdp), fsdp_zero, p.zero,
                                       p.zero == 2   ? "shard_grad_op"
                                       : p.zero == 3 ? "full_shard"
                                                     : "no_shard"));
  }
  // The presets named after DeepSpeed's systems are DeepSpeed's (Ren et al. 2021; Rajbhandari et
  // al. 2021): under another framework they would keep that framework's state where it is.
  const bool zero_offload = o.preset == OffloadPreset::zero_offload || o.preset == OffloadPreset::zero_offload_cxl;
  if ((zero_offload || o.preset == OffloadPreset::zero_infinity) && prof.sharding != Sharding::deepspeed)
    bad("offload.preset",
        fmt::format("{} is DeepSpeed's: write job.framework: deepspeed and parallel.zero: {} (this plan runs {})",
                    to_string(o.preset), zero_offload ? "2" : "3", to_string(fw)));
}

// The optimizer's implementation and paging, and QLoRA's compute precision.
void check_optimizer(const Plan& plan, Findings& bad) {
  const Offload& o = plan.offload;
  const OptimizerSpec& opt = plan.job.optimizer;
  if (opt.kind == OptimizerKind::adamw_8bit && opt.implementation != OptimizerImpl::framework_default &&
      opt.implementation != OptimizerImpl::fused)
    bad("job.optimizer.implementation",
        fmt::format("bitsandbytes' 8-bit AdamW has one fused implementation, not {}", to_string(opt.implementation)));
  // bitsandbytes has paged AdamW/Adam (8 and 32 bit) and Lion (bitsandbytes/optim/adamw.py,
  // adam.py, lion.py: Paged* classes pass is_paged=True); their state lives in CUDA unified memory
  // on the GPU that trains, so it cannot also be offloaded.
  if (opt.paged) {
    const OptimizerKind k = opt.kind;
    if (k != OptimizerKind::adamw && k != OptimizerKind::adam && k != OptimizerKind::adamw_8bit &&
        k != OptimizerKind::lion)
      bad("job.optimizer.paged",
          fmt::format("bitsandbytes has paged AdamW, Adam, 8-bit AdamW and Lion, not {}", to_string(k)));
    if (o.optimizer != Tier::gpu || o.optimizer_step != Tier::gpu)
      bad("job.optimizer.paged",
          "a paged optimizer keeps its state in CUDA unified memory and steps on the GPU; drop "
          "offload.optimizer and offload.optimizer_step (it pages to host memory by itself)");
    if (opt.implementation != OptimizerImpl::framework_default && opt.implementation != OptimizerImpl::fused)
      bad("job.optimizer.implementation",
          fmt::format("bitsandbytes' paged optimizers have one fused implementation, not {}",
                      to_string(opt.implementation)));
  }
  if (plan.job.method == Method::qlora && plan.job.precision == Precision::fp32)
    bad("job.precision", "QLoRA computes in 16-bit; use bf16-mixed, fp16-mixed or bf16");
}

}  // namespace

std::vector<Finding> check_offload(const Plan& plan) {
  std::vector<Finding> out;
  Findings bad(out);
  check_offload(plan, framework_row(plan.job.framework), bad);
  return out;
}

std::vector<Finding> check_plan(const model::ModelSpec& model, const Plan& plan) {
  std::vector<Finding> out;
  Findings bad(out);
  const Cluster& c = plan.cluster;
  // nodes x gpus_per_node in 64 bits: both are bounded by the reader, their product is not.
  if (static_cast<std::int64_t>(c.nodes) * c.gpus_per_node > kMaxGpus) {
    bad("cluster.nodes",
        fmt::format("{} nodes of {} GPUs are more than ftplan's limit of {} GPUs", c.nodes, c.gpus_per_node, kMaxGpus));
    return out;  // the degrees below multiply the GPU count
  }
  if (c.gpus_per_node > c.node.gpus)
    bad("cluster.gpus_per_node",
        fmt::format("{} is more than the {} GPUs of a {} node", c.gpus_per_node, c.node.gpus, c.node.name));
  // A GPU-to-GPU fabric needs the GPU's bandwidth on it (sim::topology_of); without, it would run over PCIe.
  if (hardware::is_gpu_fabric(c.node.gpu_interconnect) && c.gpu.nvlink_bandwidth_Bps <= 0)
    bad(c.as_sold.catalog_node ? "cluster.node" : "cluster.parts.gpu_interconnect",
        fmt::format("{0}: {1} has no {0} bandwidth in the catalog (nvlink_bandwidth); its GPUs talk over PCIe "
                    "(gpu_interconnect: pcie)",
                    name_of(c.node.gpu_interconnect), c.gpu.display_name));
  // The families in a fixed order: a plan's findings list in the same order every time.
  const FrameworkProfile& prof = framework_row(plan.job.framework);
  check_tensor_and_pipeline(model, plan, bad);
  check_end_stages(model, plan.parallel, bad);
  check_degrees(model, plan, bad);
  check_framework_modes(plan, prof, bad);
  check_job_on_plan(plan, bad);
  check_offload(plan, prof, bad);
  check_sharding_keys(plan, prof, bad);
  check_optimizer(plan, bad);
  return out;
}

}  // namespace ftplan::plan
