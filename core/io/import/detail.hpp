// Private machinery of the importers: one tree for JSON, YAML and TOML documents (each value with
// its file:line:column), the draft scenario the format readers fill, and a reader of one mapping
// that makes sure every key is either used or listed as ignored.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "io/import/import.hpp"
#include "model/zoo.hpp"

namespace ftplan::io::import {

// One value of a JSON, YAML or TOML document.
struct Node {
  enum class Kind { null, scalar, map, seq };
  Kind kind = Kind::null;
  std::string text;     // scalar text (TOML booleans "true"/"false")
  bool quoted = false;  // a string in the source (not a number or bool)
  struct Item;
  std::vector<Item> items;  // map, in file order (std::pair<std::string, Node> would need Node complete)
  std::vector<Node> elems;  // sequence
  SourceLocation where;

  bool is_map() const { return kind == Kind::map; }
  bool is_seq() const { return kind == Kind::seq; }
  bool is_scalar() const { return kind == Kind::scalar; }
  bool is_null() const { return kind == Kind::null; }
  const Node* find(std::string_view key) const;
};

struct Node::Item {
  std::string key;
  Node value;
};

// JSON and YAML through yaml-cpp (JSON is YAML), TOML through toml++. Throw InputError naming the
// file, line and column.
Node load_yaml_tree(const std::filesystem::path& path);
Node load_toml_tree(const std::filesystem::path& path);

// One scenario value and where it came from.
struct Entry {
  std::string key;         // "job.micro_batch", "plan.parallel.zero"; "_gas" etc. are facts, not emitted
  std::string value;       // YAML text
  std::string origin;      // comment text: "ds_config.json: zero_optimization.stage" or "default of ..."
  SourceLocation where;    // of the config value (file empty: a default or the command line)
  std::string source_key;  // the config key (or flag) it came from
  bool is_default = false;
};

struct Context;

// The scenario being assembled. Two files that give one key different values are an error at
// both places (as transformers' DeepSpeed integration refuses mismatches); a default yields to
// any value a file gives; the command line replaces everything.
class Draft {
 public:
  explicit Draft(Diagnostics& diagnostics) : diagnostics_(&diagnostics) {}
  void set(Entry e);
  void set_default(std::string key, std::string value, std::string origin);
  // Replaces the key's entry, whatever it holds: the command line's values, and what the importer
  // decides from several files together (import.cpp).
  void override_with(Entry e);
  // REQUIRES: nothing held across set/erase/override_with (entries move); copy what must outlive them.
  const Entry* get(std::string_view key) const;
  bool has(std::string_view key) const { return get(key) != nullptr; }
  void erase(std::string_view key);
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  Diagnostics* diagnostics_;
  std::vector<Entry> entries_;
};

// What the format readers share.
struct Context {
  Draft& draft;
  std::vector<IgnoredKey>& ignored;
  Diagnostics& diagnostics;
  const model::Zoo& zoo;
  std::vector<std::string>& files;
  std::vector<ConfigFormat>& formats;
  std::vector<std::pair<std::string, std::string>>& taken;  // ImportedScenario::taken
  // Scenario keys the command line sets: a file's value for one of them is replaced, not read
  // (a model the zoo lacks is no error when --model names another).
  std::set<std::string> overridden;
  // --model-config: the config.json of the model the files name, which the zoo may lack ("" none).
  std::string model_config;
  // Reads another file (a DeepSpeed config named by an accelerate config or TrainingArguments).
  std::function<void(const std::filesystem::path&, ConfigFormat expected, const SourceLocation& named_at)> read_file;
  // Reads an inline DeepSpeed config (TrainingArguments "deepspeed": {...}).
  std::function<void(const Node&, const std::string& file)> read_deepspeed_node;
};

// A mapping being read: each key is taken (used), ignored with a reason, or, at finish(), listed
// as not known to the importer. Nothing is dropped without a trace.
class Fields {
 public:
  Fields(Context& ctx, const Node& map, std::string file, std::string prefix, std::string format_name);

  const Node* take(std::string_view key);
  void ignore(std::string_view key, std::string reason);
  // Ignores every key not taken yet whose name starts with `prefix` ("" for all).
  void ignore_matching(std::string_view prefix, const std::string& reason);
  void finish();

  std::string key_path(std::string_view key) const {
    return prefix_.empty() ? std::string(key) : prefix_ + "." + std::string(key);
  }
  const std::string& file() const { return file_; }
  const std::string& format() const { return format_; }
  Context& ctx() { return *ctx_; }

  // An Entry for `key` of this map at `node`.
  Entry entry(std::string scenario_key, std::string value, std::string_view key, const Node& node,
              std::string note = {}) const;
  void set(std::string scenario_key, std::string value, std::string_view key, const Node& node, std::string note = {}) {
    ctx_->draft.set(entry(std::move(scenario_key), std::move(value), key, node, std::move(note)));
  }
  void error(const Node& node, std::string_view key, std::string message);
  void not_modelled(std::string_view key, const Node& node, std::string why);
  // A boolean key that turns on something ftplan does not model: taken, and listed when true.
  void not_modelled_if_true(std::string_view key, std::string why);
  // plan.parallel.fsdp from `key`; `resharding`: the key is FSDP2's reshard_after_forward, whose
  // true agrees with replication (HSDP) set by another key, in either order.
  void set_sharding(const std::string& sharding, std::string_view key, const Node& node, bool resharding = false,
                    std::string note = {});
  // True (and `key` listed as replaced) when the command line sets `scenario_key`: the file's
  // value is then not read, so a value ftplan could not read is no error.
  bool replaced(std::string_view key, const Node& node, const std::string& scenario_key);

  // The common shapes of a key that maps onto one scenario key (each takes `key` if present):
  // a whole number as its decimal text; a boolean as `if_true` or `if_false` ("": left unset).
  void take_int(std::string_view key, std::string scenario_key, std::string note = {});
  void take_bool(std::string_view key, std::string scenario_key, std::string if_true, std::string if_false);
  // FSDP's CPU offload (torch CPUOffload(offload_params=True), FSDP2 CPUOffloadPolicy): parameters,
  // gradients, optimizer state and the optimizer step on the host, from `key` at `node`.
  void set_cpu_offload(std::string_view key, const Node& node, const std::string& note = {});

 private:
  Context* ctx_;
  const Node* map_;
  std::string file_, prefix_, format_;
  std::vector<std::string> done_;
};

// Scalar readers: nullopt (and a diagnostic at the value) when the value is not of the kind.
std::optional<bool> as_bool(Fields& f, std::string_view key, const Node& n);
std::optional<long long> as_int(Fields& f, std::string_view key, const Node& n);
std::optional<std::string> as_string(Fields& f, std::string_view key, const Node& n);
bool is_auto(const Node& n);
std::string yaml_scalar(const std::string& text);  // quoted when YAML would read it otherwise
std::string yaml_flow_list(const std::vector<std::string>& items);

// The zoo entry for a Hugging Face model id ("meta-llama/Meta-Llama-3.1-8B-Instruct" ->
// llama-3.1-8b), or "" when none matches.
std::string zoo_name_for_hf_id(const std::string& id, const model::Zoo& zoo);
// Sets "model" for the model the files name `name` at `key`: the zoo entry `zoo_name`, or with
// --model-config that config.json under this name; else an error saying how to give it.
void set_model(Fields& f, std::string_view key, const Node& n, const std::string& name, const std::string& zoo_name);
// Sets "model" from a Hugging Face id, or reports that no zoo model matches.
void set_model_from_hf_id(Fields& f, std::string_view key, const Node& n);

// The format readers (one per file kind).
void read_deepspeed(Context& ctx, const Node& root, const std::string& file, const std::string& prefix = {});
void read_accelerate(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path);
void read_torchtune(Context& ctx, const Node& root, const std::string& file);
void read_torchtitan(Context& ctx, const Node& root, const std::string& file);
void read_training_args(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path);
void read_peft_adapter(Context& ctx, const Node& root, const std::string& file);

// FSDP's sharding as accelerate's FullyShardedDataParallelPlugin takes it: a ShardingStrategy name or
// torch's number 1-4, and with `takes_bool` FSDP2's reshard_after_forward true (FULL_SHARD) or false
// (SHARD_GRAD_OP). "" for anything else (5 / _HYBRID_SHARD_ZERO2 included).
std::string fsdp_sharding_of(const std::string& text, bool takes_bool);

// Shared by the TrainingArguments reader and the launchers whose files carry TrainingArguments or
// its fields (LLaMA-Factory, Axolotl).
void read_fsdp_options(Fields& top, const Node& block, const char* block_key);
// TrainingArguments.fsdp (and Axolotl's): "full_shard auto_wrap offload" or a list of the same words;
// sets the framework (FSDP2 with `fsdp2`), the sharding and CPU offload.
void read_fsdp_words(Fields& f, const Node& n, bool fsdp2);
// TrainingArguments' own keys, read into `f` (everything but the framework default and finish()).
void read_trainer_keys(Context& ctx, Fields& f, const Node& root, const std::filesystem::path& path);
// TrainingArguments.optim (transformers OptimizerNames) at `key`.
void read_hf_optim(Fields& f, std::string_view key, const Node& n);
// A LoRA target list: a list, a comma-separated string, or all-linear.
void set_lora_targets(Fields& f, const char* key, const Node& t);
// A file another names by a relative path: as the launcher opens it from the working directory
// (the repository root for the launchers' examples), else next to the naming file or in a folder above.
std::filesystem::path resolve_named_file(const std::filesystem::path& named, const std::filesystem::path& naming_file);
void read_llama_factory(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path);
void read_axolotl(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path);

// PEFT's own default targets for the model types ftplan's zoo has (peft/utils/constants.py
// TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING: llama, mistral, qwen2, gemma2 ["q_proj", "v_proj"]).
inline constexpr const char* kPeftDefaultTargets = "[q_proj, v_proj]";

// The `deepspeed` key of TrainingArguments and the launchers: an inline config, or a file's path
// (read as the launcher opens it: resolve_named_file).
void read_deepspeed_key(Fields& f, const std::filesystem::path& path);

// Reasons shared by several readers.
inline constexpr const char* kNoEffect = "no effect on memory or step time";
inline constexpr const char* kHyperparameter = "optimizer hyperparameter: no effect on memory or step time";
inline constexpr const char* kIo =
    "paths, logging, checkpoint saving or evaluation: outside the training step ftplan models";

}  // namespace ftplan::io::import
