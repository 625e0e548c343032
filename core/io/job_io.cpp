// A scenario's `job:` block (and a plan's own `job:`), docs/scenario-format.md.
#include <algorithm>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/readers.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"

namespace ftplan::io::detail {

using namespace ftplan::plan;

namespace {

// The names job.framework takes: the framework table's (plan/framework.cpp).
const std::vector<std::pair<std::string, Framework>>& framework_names() {
  static const std::vector<std::pair<std::string, Framework>> names = [] {
    std::vector<std::pair<std::string, Framework>> out;
    for (const plan::FrameworkProfile& row : plan::framework_table()) out.emplace_back(row.name, row.framework);
    return out;
  }();
  return names;
}

std::string canonical_lora_target(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"q_proj", "q"},   {"k_proj", "k"},       {"v_proj", "v"}, {"o_proj", "o"}, {"gate_proj", "gate"},
      {"up_proj", "up"}, {"down_proj", "down"}, {"query", "q"},  {"key", "k"},    {"value", "v"},
      {"dense", "o"},    {"w1", "gate"},        {"w3", "up"},    {"w2", "down"},  {"fc1", "up"},
      {"fc2", "down"},   {"output_proj", "o"}};
  for (const auto& [alias, canonical] : aliases)
    if (alias == name) return canonical;
  return name;
}

// lora.targets: module names (HF's, torchtune's or ours) and groups (all-linear, attention, mlp),
// resolved to ours, sorted and without repeats.
void read_lora_targets(MapView& v, MapView& l, Job& job, const model::ModelSpec& model) {
  std::vector<std::string> targets;
  if (!l.get_strings("targets", targets)) return;
  std::vector<std::string> resolved;
  for (const auto& t : targets) {
    const std::string c = canonical_lora_target(t);
    if (c == "all-linear" || c == "all") {
      resolved = {"q", "k", "v", "o", "up", "down"};
      if (model::is_gated(model.ffn_kind)) resolved.push_back("gate");
    } else if (c == "attention") {
      for (const char* x : {"q", "k", "v", "o"}) resolved.emplace_back(x);
    } else if (c == "mlp") {
      for (const char* x : {"up", "down"}) resolved.emplace_back(x);
      if (model::is_gated(model.ffn_kind)) resolved.emplace_back("gate");
    } else {
      const auto& names = lora_target_names();
      if (std::find(names.begin(), names.end(), c) == names.end()) {
        std::vector<std::string> options = names;
        for (const char* x : {"all-linear", "attention", "mlp", "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                              "up_proj", "down_proj"})
          options.emplace_back(x);
        v.reader().error(l.location_of("targets"), l.key_path("targets"),
                         fmt::format("'{}' is not a module LoRA can target{}; use {}", t, did_you_mean(t, options),
                                     join(options, ", ")));
        continue;
      }
      resolved.push_back(c);
    }
  }
  std::sort(resolved.begin(), resolved.end());
  resolved.erase(std::unique(resolved.begin(), resolved.end()), resolved.end());
  if (!resolved.empty()) job.lora.targets = resolved;
}

// method, lora, quant.
bool read_method(MapView& v, Job& job, const model::ModelSpec& model) {
  const bool method_ok = !v.has("method") || v.get_enum<Method>("method", job.method);
  if (MapView l = v.map("lora"); l.valid()) {
    l.get("rank", job.lora.rank, 1, 65536);
    l.get("alpha", job.lora.alpha, 0.0);
    l.get("dropout", job.lora.dropout, 0.0, 1.0);
    read_lora_targets(v, l, job, model);
    l.finish();
  }
  if (MapView q = v.map("quant"); q.valid()) {
    q.get_enum<QuantKind>("kind", job.quant.kind);
    q.get("double_quant", job.quant.double_quant);
    q.get("block_size", job.quant.block_size, 16, 4096);
    // Double quantization is bitsandbytes' 4-bit (NF4/FP4) scheme; GPTQ-style int4 and LLM.int8
    // have none to switch (set here, it would be accepted and ignored).
    if (job.quant.kind == QuantKind::int4 || job.quant.kind == QuantKind::int8) {
      if (q.has("double_quant"))
        v.reader().error(q.location_of("double_quant"), q.key_path("double_quant"),
                         "is bitsandbytes' NF4/FP4 double quantization; int4 and int8 have none");
      job.quant.double_quant = false;
    }
    q.finish();
  }
  return method_ok;
}

// seq_len, samples, micro_batch, global_batch and how long: tokens, steps, epochs, dataset_tokens.
void read_batch(MapView& v, Job& job) {
  v.get("seq_len", job.seq_len, 1, 100'000'000);
  if (MapView s = v.map("samples"); s.valid()) {
    s.get_enum<Packing>("packing", job.samples.packing);
    s.get_enum<LengthDistribution>("distribution", job.samples.distribution);
    s.get("mean", job.samples.mean_tokens, 1.0);
    s.get("std", job.samples.std_tokens, 0.0);
    s.get("min", job.samples.min_tokens, 1);
    s.get("max", job.samples.max_tokens, 1);
    if (job.samples.max_tokens > 0 && job.samples.min_tokens > job.samples.max_tokens)
      v.reader().error(s.location_of("min"), s.key_path("min"), "is larger than samples.max");
    const auto refuse = [&](const char* k, const char* why) {
      if (s.has(k)) v.reader().error(s.location_of(k), s.key_path(k), why);
    };
    const LengthDistribution d = job.samples.distribution;
    if (job.samples.packing == Packing::packed) {
      // Sample lengths decide how much of a padded sequence is padding; packed samples fill it.
      for (const char* k : {"distribution", "mean", "std", "min", "max"})
        refuse(k, "describes padded samples' lengths; packed samples fill seq_len (write packing: padded)");
    } else {
      // Each length key belongs to some distributions (plan::expected_sample_tokens): fixed
      // lengths are `mean`; uniform ones span [min, max]; normal and lognormal ones have a mean and
      // a spread, truncated to [min, max]. A key its distribution has no use for is refused.
      if (d == LengthDistribution::fixed || d == LengthDistribution::uniform)
        refuse("std", "is the spread of normal or lognormal lengths (samples.distribution)");
      if (d == LengthDistribution::uniform)
        refuse("mean", "uniform lengths span [min, max]; their mean is (min + max) / 2");
      if (d == LengthDistribution::fixed)
        for (const char* k : {"min", "max"})
          refuse(k, "bounds lengths that vary (uniform, normal, lognormal); fixed ones are all `mean`");
    }
    s.finish();
  }
  if (v.has("micro_batch") && v.raw()["micro_batch"].IsScalar() && v.raw()["micro_batch"].Scalar() == "auto") {
    v.take("micro_batch");
    job.micro_batch_auto = true;
    job.micro_batch = 1;  // until chosen per plan (evaluate::choose_open_knobs)
  } else if (v.get("micro_batch", job.micro_batch, 1, 1'000'000)) {
    job.micro_batch_auto = false;
  }
  v.get("global_batch", job.global_batch, 1, plan::kMaxGlobalBatch);
  v.get("tokens", job.tokens, 1);
  v.get("steps", job.steps, 1);
  v.get("epochs", job.epochs, 0.0);
  v.get("dataset_tokens", job.dataset_tokens, 1);
}

// optimizer: a name, bitsandbytes' paged-* names, or {name, in_backward, paged, implementation}.
void read_optimizer(MapView& v, Job& job) {
  job.optimizer_given = job.optimizer_given || v.has("optimizer");  // (before the key is taken)
  if (v.has("optimizer") && v.raw()["optimizer"].IsMap()) {
    MapView o = v.map("optimizer");
    o.require("name");
    o.get_enum<OptimizerKind>("name", job.optimizer.kind);
    o.get("in_backward", job.optimizer.in_backward);
    o.get("paged", job.optimizer.paged);
    o.get_enum<OptimizerImpl>("implementation", job.optimizer.implementation);
    o.finish();
  } else if (v.has("optimizer") && v.raw()["optimizer"].IsScalar() &&
             v.raw()["optimizer"].Scalar().rfind("paged-", 0) == 0) {
    // bitsandbytes' names: paged-adamw and paged-adamw-32bit (32-bit state), paged-adamw-8bit, paged-lion.
    v.get_enum<OptimizerKind>("optimizer", job.optimizer.kind,
                              {{"paged-adamw", OptimizerKind::adamw},
                               {"paged-adamw-32bit", OptimizerKind::adamw},
                               {"paged-adamw-8bit", OptimizerKind::adamw_8bit},
                               {"paged-lion", OptimizerKind::lion}});
    job.optimizer.paged = true;
  } else {
    v.get_enum<OptimizerKind>("optimizer", job.optimizer.kind);
  }
}

// activation_checkpointing's names: the table's, and "auto" (read before them; named among the
// choices a wrong name is told).
const std::vector<std::pair<std::string, Checkpointing>>& checkpointing_choices() {
  static const auto choices = [] {
    auto c = choices_of<Checkpointing>();
    c.emplace_back("auto", Checkpointing::none);
    return c;
  }();
  return choices;
}

// activation_checkpointing, attention, framework (and its default optimizer), zero3_fetch.
void read_kernels(MapView& v, Job& job) {
  if (v.has("activation_checkpointing") && v.raw()["activation_checkpointing"].IsScalar() &&
      v.raw()["activation_checkpointing"].Scalar() == "auto") {
    v.take("activation_checkpointing");
    job.checkpointing_auto = true;
    job.checkpointing = Checkpointing::none;  // until chosen per plan (evaluate::choose_open_knobs)
  } else if (v.get_enum<Checkpointing>("activation_checkpointing", job.checkpointing, checkpointing_choices())) {
    job.checkpointing_auto = false;
  }
  v.get_enum<AttentionImpl>("attention", job.attention);
  v.get_enum<Framework>("framework", job.framework, framework_names());
  // A framework's own default optimizer (Unsloth's notebooks: adamw_8bit) unless the scenario or
  // this plan named one.
  if (!job.optimizer_given) job.optimizer.kind = plan::framework_row(job.framework).default_optimizer;
  v.get_enum<Zero3Fetch>("zero3_fetch", job.zero3_fetch);
  if (v.has("zero3_fetch") && plan::framework_row(job.framework).sharding != plan::Sharding::deepspeed)
    v.reader().error(v.location_of("zero3_fetch"), v.key_path("zero3_fetch"),
                     "describes DeepSpeed ZeRO-3's parameter fetch; set framework: deepspeed");
}

// fsdp_mixed_precision: {param_dtype, reduce_dtype}, values as torch names them; the 16-bit one
// must be the job's own 16-bit type.
void read_fsdp_mixed_precision(MapView& v, Job& job) {
  MapView mp = v.map("fsdp_mixed_precision");
  if (!mp.valid()) return;
  const bool fp16 = job.precision == plan::Precision::fp16_mixed;
  const char* half = fp16 ? "fp16" : "bf16";
  const std::vector<std::pair<std::string, plan::WireType>> types = {{half, plan::WireType::half},
                                                                     {"fp32", plan::WireType::fp32}};
  mp.get_enum<plan::WireType>("param_dtype", job.fsdp_mixed_precision.param, types);
  mp.get_enum<plan::WireType>("reduce_dtype", job.fsdp_mixed_precision.reduce, types);
  mp.finish();
  // (A framework other than FSDP's is refused per plan by plan::check_plan: a plan may change it.)
  if (job.precision != plan::Precision::bf16_mixed && job.precision != plan::Precision::fp16_mixed)
    v.reader().error(v.location_of("fsdp_mixed_precision"), v.key_path("fsdp_mixed_precision"),
                     "applies to precision bf16-mixed or fp16-mixed");
}

}  // namespace

void read_job(MapView& v, Job& job, const model::ModelSpec& model) {
  const bool method_ok = read_method(v, job, model);
  read_batch(v, job);
  v.get_enum<Precision>("precision", job.precision);
  read_optimizer(v, job);
  read_kernels(v, job);
  read_fsdp_mixed_precision(v, job);
  v.get("checkpoint_every", job.checkpoint_every, 1, 1 << 20);  // (with full checkpointing: plan::check_plan)
  v.get("dropout", job.dropout, 0.0, 1.0);
  v.get("compile", job.compile);
  v.get("gradients_persist", job.gradients_persist);
  v.get_quantity("cuda_context", Quantity::bytes, job.cuda_context_bytes, 0);
  if (MapView l = v.map("loss"); l.valid()) {
    l.get("fp32_logits", job.loss.fp32_logits);
    l.get("chunks", job.loss.chunks, 0, 1024);
    l.finish();
  }
  if (!method_ok) return;
  if (job.method == Method::full && v.has("lora"))
    v.reader().error(v.location_of("lora"), v.key_path("lora"),
                     "is set, but job.method is full; use method: lora or qlora");
  if (job.method != Method::qlora && v.has("quant"))
    v.reader().error(v.location_of("quant"), v.key_path("quant"),
                     "quantizes the frozen base of QLoRA; set method: qlora");
}

}  // namespace ftplan::io::detail
