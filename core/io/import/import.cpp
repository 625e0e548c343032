// Import: which format each file is, the readers in turn, the defaults of the frameworks, the
// batch arithmetic, and the scenario text with a comment on every value.
#include "io/import/import.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/import/detail.hpp"
#include "io/scenario_io.hpp"

namespace ftplan::io {

using import::Context;
using import::Draft;
using import::Entry;
using import::Node;

std::string to_string(ConfigFormat f) {
  switch (f) {
    case ConfigFormat::deepspeed: return "DeepSpeed config";
    case ConfigFormat::accelerate: return "accelerate config";
    case ConfigFormat::torchtune: return "torchtune recipe";
    case ConfigFormat::torchtitan: return "torchtitan config";
    case ConfigFormat::hf_training_args: return "TrainingArguments";
    case ConfigFormat::peft_adapter: return "PEFT adapter config";
    case ConfigFormat::llama_factory: return "LLaMA-Factory config";
    case ConfigFormat::axolotl: return "Axolotl config";
  }
  return "?";
}

namespace {

// Framework versions whose defaults this importer states (docs/import.md).
constexpr const char* kDeepSpeed = "DeepSpeed 0.16.5";
constexpr const char* kTransformers = "transformers (fd798335)";
constexpr const char* kTorchtitan = "torchtitan v0.2.2";
constexpr const char* kTorchtune = "torchtune 0.7.0";
constexpr const char* kAccelerate = "accelerate 1.x";

bool has_component(const Node& n, int depth = 0) {
  if (depth > 3 || !n.is_map()) return false;
  for (const auto& [k, v] : n.items) {
    if (k == "_component_" && v.is_scalar() && v.text.rfind("torchtune.", 0) == 0) return true;
    if (has_component(v, depth + 1)) return true;
  }
  return false;
}

struct Loaded {
  ConfigFormat format;
  Node root;
};

Loaded load_config(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".toml") {
    Node root = import::load_toml_tree(path);
    return {ConfigFormat::torchtitan, std::move(root)};
  }
  Node root = import::load_yaml_tree(path);
  const SourceLocation at{path.string(), 1, 1};
  if (!root.is_map())
    throw InputError(at, "", "not a configuration ftplan imports: expected a mapping (JSON object) at the top");
  const auto has = [&](const char* k) { return root.find(k) != nullptr; };
  if (has("peft_type")) return {ConfigFormat::peft_adapter, std::move(root)};
  if (has("zero_optimization") || has("train_micro_batch_size_per_gpu") || has("train_batch_size") ||
      (root.find("bf16") && root.find("bf16")->is_map()) || (root.find("fp16") && root.find("fp16")->is_map()))
    return {ConfigFormat::deepspeed, std::move(root)};
  if (has("distributed_type") || has("compute_environment")) return {ConfigFormat::accelerate, std::move(root)};
  if (has_component(root)) return {ConfigFormat::torchtune, std::move(root)};
  // The launchers' own keys (neither TrainingArguments nor each other has them): Axolotl names the
  // model base_model and the batch micro_batch_size; LLaMA-Factory has stage, finetuning_type and
  // cutoff_len beside TrainingArguments' model_name_or_path.
  if (has("base_model") &&
      (has("micro_batch_size") || has("sequence_len") || has("datasets") || has("adapter") || has("num_epochs")))
    return {ConfigFormat::axolotl, std::move(root)};
  if (has("stage") || has("finetuning_type") || has("cutoff_len") || has("lora_target") || has("quantization_bit") ||
      (has("template") && has("model_name_or_path")))
    return {ConfigFormat::llama_factory, std::move(root)};
  if (has("per_device_train_batch_size") || has("gradient_checkpointing") || has("output_dir") || has("optim") ||
      has("num_train_epochs") || has("learning_rate"))
    return {ConfigFormat::hf_training_args, std::move(root)};
  if (has("schema_version") && has("plans"))
    throw InputError(at, "", "this is an ftplan scenario: give it to check, memory, simulate or compare as it is");
  if (has("model_type") || has("hidden_size"))
    throw InputError(at, "", "this is a Hugging Face model config.json: give it with --model");
  throw InputError(at, "",
                   "not a configuration ftplan imports: none of the keys of a DeepSpeed config (zero_optimization, "
                   "train_micro_batch_size_per_gpu), an accelerate config (distributed_type), a torchtune recipe "
                   "(model._component_ torchtune.*), TrainingArguments (per_device_train_batch_size, output_dir), a "
                   "PEFT adapter_config.json (peft_type), an Axolotl config (base_model with micro_batch_size) or a "
                   "LLaMA-Factory config (stage, finetuning_type, cutoff_len); torchtitan configs are .toml files");
}

long long int_of(const Entry* e) {
  if (!e) return -1;
  std::string t = e->value;
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
  long long v = -1;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  // Counts past 2^20 are left to the scenario reader's range checks; the batch arithmetic below
  // multiplies at most three of them, which then cannot overflow.
  return ec == std::errc() && p == t.data() + t.size() && v <= (1LL << 20) ? v : -1;
}

// A value the importer works out from a config value: `from`'s place and key, another scenario key,
// `from`'s origin followed by how.
Entry derived(const Entry& from, std::string key, std::string value, const std::string& how) {
  Entry e = from;
  e.key = std::move(key);
  e.value = std::move(value);
  e.origin += " " + how;
  return e;
}

// The order keys appear in the scenario (docs/scenario-format.md's order); others follow.
int rank_of(const std::string& key) {
  static const std::vector<std::string> order = {"model",
                                                 "job.framework",
                                                 "job.method",
                                                 "job.lora.rank",
                                                 "job.lora.alpha",
                                                 "job.lora.dropout",
                                                 "job.lora.targets",
                                                 "job.quant.kind",
                                                 "job.seq_len",
                                                 "job.samples.packing",
                                                 "job.micro_batch",
                                                 "job.global_batch",
                                                 "job.steps",
                                                 "job.tokens",
                                                 "job.precision",
                                                 "job.fsdp_mixed_precision.param_dtype",
                                                 "job.fsdp_mixed_precision.reduce_dtype",
                                                 "job.optimizer.name",
                                                 "job.optimizer.implementation",
                                                 "job.optimizer.in_backward",
                                                 "job.optimizer.paged",
                                                 "job.activation_checkpointing",
                                                 "job.checkpoint_every",
                                                 "job.attention",
                                                 "job.compile",
                                                 "job.loss.chunks",
                                                 "plan.cluster.gpu",
                                                 "plan.cluster.node",
                                                 "plan.cluster.gpus",
                                                 "plan.cluster.nodes",
                                                 "plan.cluster.gpus_per_node",
                                                 "plan.parallel.dp",
                                                 "plan.parallel.tp",
                                                 "plan.parallel.pp",
                                                 "plan.parallel.cp",
                                                 "plan.parallel.ep",
                                                 "plan.parallel.sequence_parallel",
                                                 "plan.parallel.async_tp",
                                                 "plan.parallel.zero",
                                                 "plan.parallel.fsdp",
                                                 "plan.parallel.schedule",
                                                 "plan.offload.preset",
                                                 "plan.offload.params",
                                                 "plan.offload.gradients",
                                                 "plan.offload.optimizer",
                                                 "plan.offload.activations",
                                                 "plan.offload.optimizer_step",
                                                 "plan.offload.pinned",
                                                 "plan.offload.buffer_count",
                                                 "plan.offload.buffer_size"};
  const auto it = std::find(order.begin(), order.end(), key);
  return it == order.end() ? 1000 : static_cast<int>(it - order.begin());
}

struct TreeNode {
  std::string name;
  const Entry* entry = nullptr;
  std::vector<TreeNode> children;
};

void insert(TreeNode& t, const Entry& e) {
  TreeNode* at = &t;
  std::size_t start = 0;
  for (;;) {
    const auto dot = e.key.find('.', start);
    const std::string part = e.key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    auto it = std::find_if(at->children.begin(), at->children.end(), [&](const TreeNode& c) { return c.name == part; });
    if (it == at->children.end()) {
      at->children.push_back({part, nullptr, {}});
      it = at->children.end() - 1;
    }
    at = &*it;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  at->entry = &e;
}

// Config text in a comment: control characters (line breaks above all) become spaces.
std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

class Writer {
 public:
  explicit Writer(ImportedScenario& out) : out_(out) {}
  void line(const std::string& text, const Entry* e = nullptr) {
    out_.yaml += text + "\n";
    out_.line_source.push_back(e ? e->where : SourceLocation{});
    out_.line_key.push_back(e ? e->source_key : std::string());
  }
  void tree(const TreeNode& t, int indent) {
    for (const auto& c : t.children) {
      const std::string pad(static_cast<std::size_t>(indent), ' ');
      if (c.entry)
        // The comment quotes config text: on one line, so nothing in it can become YAML.
        line(one_line(fmt::format("{}{}: {}  # {}", pad, c.name, c.entry->value, c.entry->origin)), c.entry);
      else {
        line(pad + c.name + ":");
        tree(c, indent + 2);
      }
    }
  }

 private:
  ImportedScenario& out_;
};

}  // namespace

ConfigFormat detect_config_format(const std::filesystem::path& path) { return load_config(path).format; }

namespace {

// Reads each config file (and the files they name) into the draft, each once.
void read_files(const std::vector<std::filesystem::path>& files, Context& ctx) {
  Diagnostics& diagnostics = ctx.diagnostics;
  std::set<std::filesystem::path> seen;
  std::function<void(const std::filesystem::path&, const Loaded&)> read_loaded;
  const auto read_path = [&](const std::filesystem::path& path, std::optional<ConfigFormat> expected,
                             const SourceLocation& named_at) {
    std::error_code ec;
    const auto canonical = std::filesystem::weakly_canonical(path, ec);
    if (!seen.insert(ec ? path : canonical).second) return;
    try {
      const Loaded l = load_config(path);
      if (expected && l.format != *expected) {
        diagnostics.error(
            named_at.file.empty() ? SourceLocation{path.string(), 1, 1} : named_at, "",
            fmt::format("{} is a {}, expected a {}", path.string(), to_string(l.format), to_string(*expected)));
        return;
      }
      read_loaded(path, l);
    } catch (const InputError& e) {
      diagnostics.append(e.diagnostics());
    }
  };
  read_loaded = [&](const std::filesystem::path& path, const Loaded& l) {
    const std::string file = path.string();
    ctx.files.push_back(file);
    ctx.formats.push_back(l.format);
    switch (l.format) {
      case ConfigFormat::deepspeed: import::read_deepspeed(ctx, l.root, file); break;
      case ConfigFormat::accelerate: import::read_accelerate(ctx, l.root, file, path); break;
      case ConfigFormat::torchtune: import::read_torchtune(ctx, l.root, file); break;
      case ConfigFormat::torchtitan: import::read_torchtitan(ctx, l.root, file); break;
      case ConfigFormat::hf_training_args: import::read_training_args(ctx, l.root, file, path); break;
      case ConfigFormat::peft_adapter: import::read_peft_adapter(ctx, l.root, file); break;
      case ConfigFormat::llama_factory: import::read_llama_factory(ctx, l.root, file, path); break;
      case ConfigFormat::axolotl: import::read_axolotl(ctx, l.root, file, path); break;
    }
  };
  ctx.read_file = [&](const std::filesystem::path& p, ConfigFormat expected, const SourceLocation& at) {
    std::error_code exists_error;
    if (!std::filesystem::exists(p, exists_error)) {
      diagnostics.error(at, "", fmt::format("names {}, which does not exist", p.string()));
      return;
    }
    read_path(p, expected, at);
  };
  ctx.read_deepspeed_node = [&](const Node& n, const std::string& file) {
    import::read_deepspeed(ctx, n, file, "deepspeed");
  };
  for (const auto& f : files) read_path(f, std::nullopt, {});
}

// The command line's flags and --set, over what the configs say.
void apply_overrides(Draft& draft, const std::vector<ImportOverride>& overrides) {
  for (const auto& o : overrides) {
    Entry e;
    e.key = o.key;
    e.value = o.yaml_value;
    e.origin = o.origin;
    e.where = {"command line", 0, 0};
    e.source_key = o.origin.rfind("command line ", 0) == 0 ? o.origin.substr(13) : o.origin;
    draft.override_with(e);
  }
}

// The micro-batch, GPU count, accumulation and global batch: the configs' numbers, DeepSpeed's
// batch triangle and the launchers' defaults.
// long: DeepSpeed's batch triangle and each launcher's defaults resolve one another's unknowns
// in a fixed order over the same four numbers; split, the order would be spread over functions.
// `node_gpus`: the GPUs of the node(s) the plan names (0: none named, or not known).
void fill_batch(Draft& draft, Diagnostics& diagnostics, const std::string& framework, bool hf, bool ds_auto,
                long long node_gpus) {
  const SourceLocation cli{"command line", 0, 0};
  if (!draft.has("job.micro_batch")) {
    if (hf || ds_auto)
      draft.set_default(
          "job.micro_batch", "8",
          fmt::format("{}default of {}: TrainingArguments.per_device_train_batch_size 8 (training_args.py); "
                      "--micro-batch sets it",
                      ds_auto ? "DeepSpeed auto, filled from TrainingArguments: " : "", kTransformers));
    else if (framework == "pytorch-fsdp2" && draft.has("_torchtitan"))
      draft.set_default("job.micro_batch", "8",
                        fmt::format("default of {}: training.local_batch_size 8 (config/job_config.py)", kTorchtitan));
  }
  // DeepSpeed's batch triangle: train_batch_size = micro x gradient_accumulation_steps x world
  // (deepspeed/runtime/config.py _set_batch_related_parameters, transformers fills it the same way).
  const long long tp = std::max(1LL, int_of(draft.get("plan.parallel.tp"))),
                  pp = std::max(1LL, int_of(draft.get("plan.parallel.pp"))),
                  cp = std::max(1LL, int_of(draft.get("plan.parallel.cp")));
  long long gpus = int_of(draft.get("plan.cluster.gpus"));
  if (gpus <= 0) gpus = node_gpus;  // a node's GPUs, all of them (the scenario reader's default)
  long long micro = int_of(draft.get("job.micro_batch"));
  long long gas = int_of(draft.get("_gas"));
  // Entries are copied out of the draft: a set() may move them (a pointer into it would dangle).
  const Entry tb_at = draft.has("_train_batch") ? *draft.get("_train_batch") : Entry{};
  const Entry* tb_entry = draft.has("_train_batch") ? &tb_at : nullptr;
  const long long tb = int_of(tb_entry);
  if (tb > 0 && gpus <= 0 && micro > 0 && gas > 0 && tb % (micro * gas) == 0 &&
      tb / (micro * gas) <= (1LL << 30) / (tp * pp * cp)) {
    gpus = tb / (micro * gas) * tp * pp * cp;
    draft.set(derived(*tb_entry, "plan.cluster.gpus", std::to_string(gpus),
                      fmt::format("/ (micro-batch {} x gradient_accumulation_steps {})", micro, gas)));
  }
  if (gpus <= 0 && !draft.has("plan.cluster.nodes") && !draft.has("plan.cluster.node"))
    diagnostics.error(cli, "--gpus",
                      "the configs do not say how many GPUs (the launcher does: torchrun --nproc_per_node, tune run, "
                      "NGPU): give --gpus N");
  const long long dp = gpus > 0 ? gpus / (tp * pp * cp) : -1;
  if (tb > 0 && dp > 0) {
    // DeepSpeed's order (runtime/config.py _set_batch_related_parameters), in whole divisions,
    // then its _batch_assertion: train_batch_size = micro x accumulation x data-parallel ranks.
    const auto from_tb = [&](const char* key, long long value, const std::string& how) {
      draft.set(derived(*tb_entry, key, std::to_string(value), how));
    };
    if (micro <= 0 && gas > 0) {
      micro = tb / dp / gas;
      from_tb("job.micro_batch", micro,
              fmt::format("/ {} data-parallel ranks / gradient_accumulation_steps {}", dp, gas));
    } else if (micro > 0 && gas <= 0) {
      gas = tb / micro / dp;
      from_tb("_gas", gas, fmt::format("/ micro-batch {} / {} data-parallel ranks", micro, dp));
    } else if (micro <= 0 && gas <= 0) {
      gas = 1;
      micro = tb / dp;
      from_tb("job.micro_batch", micro, fmt::format("/ {} data-parallel ranks (gradient_accumulation_steps 1)", dp));
    }
    if (micro <= 0 || gas <= 0 || tb != micro * gas * dp)
      diagnostics.error(tb_entry->where, tb_entry->source_key,
                        fmt::format("train_batch_size {} is not micro-batch {} x gradient_accumulation_steps {} x {} "
                                    "data-parallel ranks = {} (DeepSpeed refuses this too)",
                                    tb, micro, gas, dp, micro * gas * dp));
  }
  if (gas <= 0) gas = 1;  // DeepSpeed, TrainingArguments and torchtune: 1 when not given
  if (!draft.has("job.micro_batch")) {
    // accelerate configs and PEFT adapters carry no batch size: the training script's dataloader has it.
    draft.set_default(
        "job.micro_batch", "1",
        "not in the configs (the training script's dataloader sets it): ftplan's default 1; --micro-batch sets it");
    micro = 1;
  }
  // torchtitan pipelines each rank's local batch in micro-batches of pipeline_parallel_microbatch_size
  // samples (default 1); before 2025 as pipeline_parallel_microbatches of them (default the pipeline
  // degree): torchtitan/distributed/pipeline_parallel.py n_microbatches = local_batch_size / size.
  if (draft.has("_torchtitan") && pp > 1 && micro > 0 && dp > 0 &&
      draft.get("job.micro_batch")->where.file != "command line") {
    const Entry local = *draft.get("job.micro_batch");
    const Entry* size = draft.get("_pp_micro");
    const Entry* count = draft.get("_pp_microbatches");
    long long pp_micro = size ? int_of(size) : count ? (int_of(count) > 0 ? micro / int_of(count) : -1) : 1;
    const long long n_count = count ? int_of(count) : 0;
    const Entry at = size ? *size : count ? *count : local;  // a copy: set() below may move the entries
    const bool by_size = size != nullptr, by_count = count != nullptr;
    size = count = nullptr;
    if (pp_micro <= 0 || micro % pp_micro != 0 || (by_count && pp_micro * n_count != micro)) {
      diagnostics.error(at.where, at.source_key,
                        fmt::format("local batch {} does not split into pipeline micro-batches of this size or "
                                    "count (torchtitan refuses it too)",
                                    micro));
    } else {
      if (!draft.has("job.global_batch")) {
        draft.set(derived(local, "job.global_batch", std::to_string(micro * gas * dp),
                          fmt::format("x gradient accumulation {} x {} data-parallel ranks", gas, dp)));
      }
      Entry m = by_size || by_count ? at : Entry{};
      m.is_default = !by_size && !by_count;
      m.key = "job.micro_batch";
      m.value = std::to_string(pp_micro);
      m.origin = by_size    ? m.origin + " (samples a pipeline micro-batch)"
                 : by_count ? m.origin + fmt::format(" micro-batches of local batch {}", micro)
                            : fmt::format(
                                  "default of {}: parallelism.pipeline_parallel_microbatch_size 1 "
                                  "(local batch {} in micro-batches of 1)",
                                  kTorchtitan, micro);
      draft.override_with(m);
      micro = pp_micro;
    }
  }
  if (!draft.has("job.global_batch") && micro > 0 && dp > 0) {
    const Entry* g = draft.get("_gas");
    Entry e;
    e.key = "job.global_batch";
    e.value = std::to_string(micro * gas * dp);
    e.origin = fmt::format("micro-batch {} x gradient accumulation {} x {} data-parallel ranks ({})", micro, gas, dp,
                           g ? g->origin : "gradient accumulation: default 1");
    if (g) {
      e.where = g->where;
      e.source_key = g->source_key;
    }
    draft.set(e);
  }
}

// What the configs leave open: the framework's own default, each with its source, then ftplan's.
// long: one default after another, each with its framework's source; they read and fill one Draft.
void fill_defaults(Draft& draft, const std::string& framework, bool hf) {
  // TRL's SFTConfig (trl f2cd5771 trainer/sft_config.py, base_config.py): max_length 1024, no
  // packing, gradient checkpointing on, bf16 unless fp16.
  if (draft.has("_trl")) {
    draft.set_default("job.seq_len", "1024", "default of TRL (f2cd5771): SFTConfig.max_length 1024");
    draft.set_default("job.activation_checkpointing", "full",
                      "default of TRL (f2cd5771): SFTConfig.gradient_checkpointing True");
    draft.set_default("job.precision", "bf16-mixed", "default of TRL (f2cd5771): SFTConfig.bf16 = not fp16");
  }
  if (hf) {
    draft.set_default("job.samples.packing", "padded",
                      fmt::format("default of {}: the Trainer does not pack (each batch padded to its longest "
                                  "sample; ftplan pads to seq_len, the bound)",
                                  kTransformers));
    draft.set_default(
        "job.attention", "sdpa",
        fmt::format("default of {}: attn_implementation sdpa (torch's scaled_dot_product_attention)", kTransformers));
  }
  if (!draft.has("job.precision")) {
    if (framework == "deepspeed")
      draft.set_default("job.precision", "fp32",
                        draft.has("_ds_precision_auto")
                            ? fmt::format("fp16/bf16 enabled auto: TrainingArguments bf16 and fp16, default False ({})",
                                          kTransformers)
                            : fmt::format("default of {}: fp16 and bf16 disabled (runtime/config.py)", kDeepSpeed));
    else if (hf)
      draft.set_default("job.precision", "fp32",
                        fmt::format("default of {}: TrainingArguments bf16 and fp16 False", kTransformers));
    else if (framework == "hf-trainer" || framework == "pytorch-fsdp")
      draft.set_default("job.precision", "fp32", fmt::format("default of {}: mixed_precision no", kAccelerate));
  }
  if (!draft.has("job.activation_checkpointing")) {
    if (draft.has("_torchtitan"))
      draft.set_default(
          "job.activation_checkpointing", "full",
          fmt::format(
              "default of {}: activation_checkpoint.mode selective, selective_ac_option \"2\" (every 2nd block)",
              kTorchtitan));
    else if (framework == "torchtune")
      draft.set_default(
          "job.activation_checkpointing", "none",
          fmt::format("default of {}: enable_activation_checkpointing False (recipes' cfg.get)", kTorchtune));
    else if (hf)
      draft.set_default("job.activation_checkpointing", "none",
                        fmt::format("default of {}: TrainingArguments.gradient_checkpointing False", kTransformers));
    else if (!framework.empty())
      draft.set_default(
          "job.activation_checkpointing", "none",
          fmt::format("the configs enable no activation checkpointing ({} checkpoints only what the model asks)",
                      framework));
  }
  if (draft.has("_torchtitan") && !draft.has("job.checkpoint_every") &&
      draft.get("job.activation_checkpointing")->is_default)
    draft.set_default("job.checkpoint_every", "2",
                      fmt::format("default of {}: selective_ac_option \"2\"", kTorchtitan));
  if (framework == "deepspeed" && !draft.has("plan.parallel.zero"))
    draft.set_default("plan.parallel.zero", "0",
                      fmt::format("default of {}: zero_optimization.stage 0 (runtime/zero/config.py)", kDeepSpeed));
  if (const Entry* u = draft.get("_optimizer_unmodelled"); u && !draft.has("job.optimizer.name"))
    draft.set_default(
        "job.optimizer.name", "adamw",
        fmt::format("{}: not modelled, AdamW's state and step stand in for it (see the keys not used)", u->origin));
  if (!draft.has("job.optimizer.name") && (hf || framework == "deepspeed"))
    draft.set_default(
        "job.optimizer.name", "adamw",
        fmt::format("default of {}: TrainingArguments.optim adamw_torch (adamw_torch_fused with torch >= 2.8)",
                    kTransformers));
  // The Trainer's FSDP is accelerate's: parameters and gradient reduction in the 16-bit type
  // (accelerate utils/dataclasses.py FullyShardedDataParallelPlugin.set_mixed_precision).
  if (hf && (framework == "pytorch-fsdp" || framework == "pytorch-fsdp2") &&
      !draft.has("job.fsdp_mixed_precision.reduce_dtype"))
    if (const Entry* p = draft.get("job.precision"); p && (p->value == "bf16-mixed" || p->value == "fp16-mixed")) {
      const std::string half = p->value.substr(0, 4);
      for (const char* k : {"job.fsdp_mixed_precision.param_dtype", "job.fsdp_mixed_precision.reduce_dtype"})
        draft.set_default(
            k, half,
            fmt::format("default of {}: FSDP MixedPrecision param_dtype = reduce_dtype = the compute type, {}",
                        kAccelerate, half));
    }
  // What no file and no framework default decides: ftplan's own default, said so.
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"job.framework", "pytorch-fsdp"},
                                                        {"job.precision", "bf16-mixed"},
                                                        {"job.activation_checkpointing", "none"}})
    draft.set_default(key, value,
                      fmt::format("not in the configs: ftplan's default {}; --set {}=... sets it", value, key));
  if (!draft.has("job.seq_len"))
    draft.set_default("job.seq_len", "2048",
                      draft.has("_torchtitan") ? fmt::format("default of {}: training.seq_len 2048", kTorchtitan)
                                               : "not in the configs: ftplan's default 2048; --seq sets it");
  if (!draft.has("job.steps") && !draft.has("job.tokens") && !draft.has("job.epochs"))
    draft.set_default(
        "job.steps", "1",
        "no step count in the configs (epochs need the dataset size): one step; --steps or --tokens sets it");
}

// The dtype a Trainer script loads the model in (torch_dtype / dtype): what it changes depends on
// who keeps the trained weights.
void apply_load_dtype(Draft& draft, std::vector<IgnoredKey>& ignored, const std::string& framework) {
  // _load_dtype_implied: a launcher's precision key that also sets the load dtype (Axolotl's bf16);
  // that key is used, so only what it decides is written, no note on it.
  const bool implied = !draft.has("_load_dtype") && draft.has("_load_dtype_implied");
  const Entry* d = draft.get(implied ? "_load_dtype_implied" : "_load_dtype");
  if (!d) return;
  const Entry* m = draft.get("job.method");
  const bool adapters = m && m->value != "full";
  const bool wide = d->value == "float32";
  const auto note = [&](std::string reason) {
    if (!implied) ignored.push_back({d->where, d->source_key, std::move(reason)});
  };
  if (adapters) {
    if (wide)
      note(
          "not modelled yet: a frozen base loaded in float32 (4 bytes a weight); ftplan keeps a LoRA base in the "
          "16-bit compute type");
    else
      note(
          "the frozen base in 16-bit, as ftplan keeps a LoRA base (auto: the checkpoint's dtype, 16-bit for the "
          "zoo's models)");
  } else if (framework == "deepspeed") {
    note(
        "DeepSpeed keeps fp32 master weights and optimizer state whatever dtype the model was loaded in "
        "(runtime/zero/stage_1_and_2.py, stage3.py _create_fp32_partitions; runtime/bf16_optimizer.py)");
  } else if (framework == "pytorch-fsdp" || framework == "pytorch-fsdp2") {
    const Entry* p = draft.get("job.precision");
    if (p && p->value != "fp32")
      note(
          "accelerate's FSDP upcasts 16-bit trainable parameters to fp32 master weights under mixed precision "
          "(accelerator.py prepare_model, utils/fsdp_utils.py fsdp2_prepare_model)");
    else if (!wide)
      note("not modelled yet: FSDP without mixed precision over 16-bit parameters");
  } else if (!wide) {
    // The Trainer neither upcasts nor keeps master copies: a 16-bit model trains in 16-bit, its
    // gradients and AdamW state in the parameters' dtype (torch.optim.AdamW's state is zeros_like(p)).
    if (d->value == "float16") {
      note(
          "not modelled yet: training fp16 parameters without master copies (the Trainer's fp16 grad scaler "
          "refuses fp16 gradients)");
      return;
    }
    if (const Entry* p = draft.get("job.precision"); p && p->where.file == "command line") return;
    draft.override_with(derived(*d, "job.precision", "bf16",
                                "(the Trainer keeps no fp32 copy: parameters, gradients and AdamW state in bf16; "
                                "auto: the checkpoint's dtype)"));
  }
}

// What the configs' combination decides beyond any one file.
void apply_combinations(Draft& draft, const std::string& framework, const model::Zoo& zoo) {
  // A pre-quantized checkpoint (GPTQ, AWQ) trains only with adapters: QLoRA over 4-bit groups.
  if (draft.has("_prequantized")) {
    const Entry q = *draft.get("_prequantized");  // a copy: erase() below moves the entries
    const Entry* m = draft.get("job.method");
    if (m && m->value == "lora" && m->where.file != "command line") {
      draft.override_with(
          derived(q, "job.method", "qlora", "(a pre-quantized checkpoint: LoRA over its 4-bit weights)"));
    }
    if (const Entry* now = draft.get("job.method"); now && now->value == "qlora" && !draft.has("job.quant.kind")) {
      draft.set(derived(q, "job.quant.kind", "int4", "(GPTQ/AWQ: 4-bit weights with a scale and zero per group)"));
    }
  }
  // With ZeRO offloading the optimizer, accelerate swaps the Trainer's torch optimizer for
  // DeepSpeedCPUAdam (utils/deepspeed.py map_pytorch_optim_to_deepspeed, accelerator.py under
  // zero_force_ds_cpu_optimizer, default true): 32-bit Adam state whatever `optim` named.
  const Entry* off = draft.get("plan.offload.optimizer");
  const Entry* o = draft.get("job.optimizer.name");
  if (framework == "deepspeed" && off && off->value != "gpu" && !draft.has("_ds_optimizer") &&
      !draft.has("_ds_keep_optimizer") && o && o->where.file != "command line" && o->value != "adamw" &&
      o->value != "adam" && o->value != "lion") {
    draft.override_with(
        derived(*o, o->key, "adam", "(replaced by DeepSpeedCPUAdam, 32-bit state: ZeRO offloads the optimizer)"));
    draft.erase("job.optimizer.paged");
  }
  // A sequence past the model's context (long-context training with extended RoPE, ALST): the zoo
  // model with max_context raised to it, as the scenario takes it (docs/scenario-format.md).
  const Entry* m = draft.get("model");
  const Entry* s = draft.get("job.seq_len");
  if (m && s && m->value.find('{') == std::string::npos && int_of(s) > 0)
    if (const auto* z = zoo.find(m->value); z && z->max_context > 0 && int_of(s) > z->max_context) {
      draft.override_with(
          derived(*m, "model", fmt::format("{{zoo: {}, max_context: {}}}", m->value, int_of(s)),
                  fmt::format("(its context {} raised to the configs' sequence length)", z->max_context)));
    }
}

// The scenario text: a header naming the files and the keys not used, then the keys in the
// scenario's order, each with its origin.
void write_scenario(ImportedScenario& out, const Draft& draft, const std::vector<std::filesystem::path>& files) {
  std::vector<const Entry*> entries;
  for (const auto& e : draft.entries())
    if (!e.key.empty() && e.key[0] != '_') entries.push_back(&e);
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry* a, const Entry* b) { return rank_of(a->key) < rank_of(b->key); });
  TreeNode root;
  for (const Entry* e : entries) insert(root, *e);
  Writer w(out);
  w.line("# Imported by `ftplan import` (docs/import.md) from:");
  for (std::size_t i = 0; i < out.files.size(); ++i)
    w.line(one_line(fmt::format("#   {} ({})", out.files[i], to_string(out.formats[i]))));
  if (out.ignored.empty()) {
    w.line("# Every key of the configs was used.");
  } else {
    w.line(fmt::format("# {} keys of the configs are not used here:", out.ignored.size()));
    for (const auto& i : out.ignored)
      w.line(one_line(fmt::format("#   {}:{}:{} {}: {}", i.where.file, i.where.line, i.where.column, i.key, i.reason)));
  }
  w.line("schema_version: 1");
  std::string name = files.empty() ? "imported" : files.front().stem().string();
  w.line("name: " + import::yaml_scalar(name));
  TreeNode plan;
  for (const auto& c : root.children) {
    if (c.name == "plan") {
      plan = c;
      continue;
    }
    TreeNode one;
    one.children.push_back(c);
    w.tree(one, 0);
  }
  w.line("plans:");
  w.line("  - name: imported  # the configs describe one job on one cluster");
  w.tree(plan, 4);
}

}  // namespace

ImportedScenario import_configs(const std::vector<std::filesystem::path>& files,
                                const std::vector<ImportOverride>& overrides, const model::Zoo& zoo,
                                const hardware::Catalog* catalog) {
  ImportedScenario out;
  out.name = "imported scenario";
  Diagnostics diagnostics;
  Draft draft(diagnostics);
  Context ctx{draft, out.ignored, diagnostics, zoo, out.files, out.formats, out.taken, {}, {}, {}, {}};
  std::vector<ImportOverride> rest;
  for (const auto& o : overrides) {
    if (o.key == "model_config")
      ctx.model_config = o.yaml_value;
    else
      ctx.overridden.insert(o.key), rest.push_back(o);
  }
  read_files(files, ctx);
  diagnostics.throw_if_any();
  apply_overrides(draft, rest);
  // torchtitan's degrees with none -1 are its world size, which it checks (parallel_dims.py).
  if (const Entry* world = draft.get("_torchtitan_world"))
    if (const Entry* g = draft.get("plan.cluster.gpus");
        g && g->where.file == "command line" && int_of(g) != int_of(world))
      diagnostics.error(g->where, g->source_key,
                        fmt::format("{} GPUs, but {} multiplies its parallel degrees to {} (no degree is -1), and "
                                    "torchtitan refuses any other world size: give --gpus {} or a degree -1",
                                    g->value, world->where.file, world->value, world->value));

  const Entry* fw = draft.get("job.framework");
  const std::string framework = fw ? fw->value : "";
  const bool hf = draft.has("_hf_trainer");
  const SourceLocation cli{"command line", 0, 0};
  if (!draft.has("model") && !ctx.model_config.empty())
    draft.set({"model",
               fmt::format("{{hf_config: {}}}", import::yaml_scalar(ctx.model_config)),
               "command line --model-config",
               {"command line", 0, 0},
               "--model-config",
               false});
  if (!draft.has("model")) {
    std::string kinds;
    for (const auto f : out.formats) {
      const std::string k = to_string(f);
      if (kinds.find(k) == std::string::npos) kinds += (kinds.empty() ? "" : ", ") + k;
    }
    diagnostics.error(cli, "--model",
                      fmt::format("no model: the configs ({}) do not name one (the training script loads it); give "
                                  "--model NAME (ftplan zoo list) or --model path/to/config.json",
                                  kinds));
  }
  if (!draft.has("plan.cluster.gpu") && !draft.has("plan.cluster.node"))
    diagnostics.error(cli, "--gpu",
                      "the configs do not say which GPU: give --gpu NAME (ftplan hardware list gpus) or --node NAME");
  long long node_gpus = 0;
  if (const Entry* node = draft.get("plan.cluster.node"); node && catalog)
    if (const hardware::NodeSpec* spec = catalog->node(node->value))
      node_gpus = static_cast<long long>(spec->gpus) * std::max(1LL, int_of(draft.get("plan.cluster.nodes")));
  fill_batch(draft, diagnostics, framework, hf, draft.has("_ds_micro_auto"), node_gpus);
  fill_defaults(draft, framework, hf);
  out.one_step_default = draft.get("job.steps") && draft.get("job.steps")->is_default;
  apply_load_dtype(draft, out.ignored, framework);
  apply_combinations(draft, framework, zoo);
  diagnostics.throw_if_any();
  write_scenario(out, draft, files);
  return out;
}

plan::Scenario load_imported(const ImportedScenario& imported, const std::filesystem::path& base_dir,
                             const model::Zoo& zoo, const hardware::Catalog& catalog) {
  try {
    return parse_scenario(imported.yaml, imported.name, base_dir, zoo, catalog);
  } catch (const InputError& e) {
    // Each finding at the config value it concerns, with the scenario key it became.
    std::vector<Diagnostic> ds = e.diagnostics();
    for (auto& d : ds) {
      if (d.where.file != imported.name || d.where.line <= 0) continue;
      const auto i = static_cast<std::size_t>(d.where.line - 1);
      if (i >= imported.line_source.size()) continue;
      const SourceLocation& src = imported.line_source[i];
      if (src.file.empty()) continue;
      d.message += fmt::format(" (imported as scenario key {})", d.key);
      d.key = imported.line_key[i];
      d.where = src;
    }
    throw InputError(ds);
  }
}

}  // namespace ftplan::io
