// Reading the configuration files people already train with (docs/import.md): DeepSpeed
// ds_config.json, accelerate config YAML, torchtune recipe YAML, torchtitan TOML, Hugging Face
// TrainingArguments JSON and PEFT adapter_config.json. Several files combine into one scenario.
//
// The translation writes scenario YAML (docs/scenario-format.md) in which every value carries a
// comment naming the file and key it came from, or the framework default it stands for; every key
// of the inputs that does not reach the scenario is listed as ignored, with the reason. The text is
// then read by the scenario reader, and its findings are reported at the config key they came from.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "hardware/hardware.hpp"
#include "model/zoo.hpp"
#include "plan/scenario.hpp"

namespace ftplan::io {

enum class ConfigFormat {
  deepspeed,
  accelerate,
  torchtune,
  torchtitan,
  hf_training_args,
  peft_adapter,
  llama_factory,
  axolotl
};
std::string to_string(ConfigFormat f);

// The format of one file, from its content (and, for TOML, its extension). Throws InputError
// naming the file when it is none of the six.
ConfigFormat detect_config_format(const std::filesystem::path& path);

// A scenario value given on the command line, e.g. {"plan.cluster.gpu", "\"h100-sxm-80gb\"", "--gpu"}.
// Keys: "model", "job.*", "plan.cluster.*", "plan.parallel.*", "plan.offload.*". It replaces what the
// files say. "model_config" (its yaml_value a path) is the config.json of the model the files name.
struct ImportOverride {
  std::string key;
  std::string yaml_value;  // YAML text (a quoted scalar or a flow list)
  std::string origin;      // how the person gave it, for the comment: "command line --gpu"
};

// A key of an input that the scenario does not take, and why.
struct IgnoredKey {
  SourceLocation where;
  std::string key;  // dotted path in its file
  std::string reason;
};

// The result of one translation. `yaml` is a complete scenario file.
struct ImportedScenario {
  std::string yaml;
  std::string name;  // stands for the scenario in messages: "imported scenario"
  std::vector<std::string> files;
  std::vector<ConfigFormat> formats;
  std::vector<IgnoredKey> ignored;
  // Every key a reader took, as (file, dotted path): with `ignored`, the reader's account of each
  // file's keys (tests/unit/import_corpus_test.cpp checks it against the files' own keys).
  std::vector<std::pair<std::string, std::string>> taken;
  // Per line of `yaml` (index 0 = line 1): where its value came from (file empty: a default or
  // the command line; then `origin` says which).
  std::vector<SourceLocation> line_source;
  std::vector<std::string> line_key;  // the config key (or flag) of that line, "" for none
  // No file gave a step count, tokens or epochs with their dataset size: the scenario trains one
  // step (`steps: 1`), which prices no whole job (compare refuses it).
  bool one_step_default = false;
};

// Translates `files` (each of the six formats; a DeepSpeed config named by an accelerate config or
// TrainingArguments is read too). Throws InputError listing every problem found in the files.
// `catalog`, when given, counts the GPUs of a node named by --node (what the data-parallel degree,
// and so the global batch, is computed from when no GPU count is given).
ImportedScenario import_configs(const std::vector<std::filesystem::path>& files,
                                const std::vector<ImportOverride>& overrides, const model::Zoo& zoo,
                                const hardware::Catalog* catalog = nullptr);

// Reads the translated scenario with the scenario reader; its findings are reported at the file,
// line, column and key of the config value they concern.
plan::Scenario load_imported(const ImportedScenario& imported, const std::filesystem::path& base_dir,
                             const model::Zoo& zoo, const hardware::Catalog& catalog);

}  // namespace ftplan::io
