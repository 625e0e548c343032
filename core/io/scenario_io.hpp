// Reading scenario files (docs/scenario-format.md): validates everything and reports every
// problem at once, each with file:line:column and key.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "hardware/hardware.hpp"
#include "model/zoo.hpp"
#include "plan/scenario.hpp"

namespace YAML {
class Node;
}

namespace ftplan::io {

plan::Scenario load_scenario(const std::filesystem::path& path, const model::Zoo& zoo,
                             const hardware::Catalog& catalog);

// A scenario file's text as load_scenario reads it: a missing, unreadable or oversized file, or a
// directory, is an InputError naming it (for callers that edit the text before parsing it).
std::string read_scenario_text(const std::filesystem::path& path);

// The same from text in memory; `name` stands for the file in messages and relative paths
// (hf_config) resolve against `base_dir`.
plan::Scenario parse_scenario(std::string_view text, const std::string& name, const std::filesystem::path& base_dir,
                              const model::Zoo& zoo, const hardware::Catalog& catalog);
// The same from a document already parsed (a sweep's point, built from its base's tree without
// writing it out as text and scanning it again). Problems carry the nodes' marks, where they have any.
plan::Scenario parse_scenario(const YAML::Node& root, const std::string& name, const std::filesystem::path& base_dir,
                              const model::Zoo& zoo, const hardware::Catalog& catalog);

}  // namespace ftplan::io
