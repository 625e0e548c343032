// Reading model descriptions: zoo YAML files (docs/model-format.md) and Hugging Face config.json.
#pragma once

#include <filesystem>
#include <string_view>

#include "model/model.hpp"
#include "model/zoo.hpp"

namespace ftplan::io {

// One zoo file. Throws InputError listing every problem in it.
model::ModelSpec load_model_file(const std::filesystem::path& path);
// The same from text already in memory; `path` names it in messages and gives the default name.
model::ModelSpec parse_model_file(std::string_view text, const std::filesystem::path& path);
// Every models/*.yaml under `zoo_dir` (the model_zoo folder). Problems in all files are reported together.
model::Zoo load_zoo(const std::filesystem::path& zoo_dir);
// The same zoo, each model read when first asked for (the CLI's: a verb reads the models it
// names). A model file's problems are reported when that model is asked for.
model::Zoo lazy_zoo(const std::filesystem::path& zoo_dir);
// A Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2, Gemma2, Phi3, GPT-2, GPT-NeoX,
// BLOOM, Falcon, MPT, T5, BERT). The model name defaults to the folder holding the file.
model::ModelSpec load_hf_config(const std::filesystem::path& path);
// The same from text already in memory; `path` names it in messages and gives the default name.
model::ModelSpec parse_hf_config(std::string_view text, const std::filesystem::path& path);

}  // namespace ftplan::io
