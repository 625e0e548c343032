// What every verb shares: where the zoo is, the loaded zoo and catalog (loaded on first use),
// and the output format.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "hardware/hardware.hpp"
#include "io/output_schema.hpp"
#include "model/zoo.hpp"

namespace ftplan::cli {

using io::kOutputSchemaVersion;  // of the JSON documents the CLI prints

enum class Format { table, json, csv };

class App {
 public:
  explicit App(const Args& args);
  const model::Zoo& zoo();
  const hardware::Catalog& catalog();
  // Replaces the catalog the scenario reader sees (validate adds this machine as node "local").
  void set_catalog(hardware::Catalog catalog) { catalog_ = std::move(catalog); }
  const std::filesystem::path& zoo_dir() const { return zoo_dir_; }
  Format format() const { return format_; }

 private:
  std::filesystem::path zoo_dir_;
  Format format_ = Format::table;
  std::optional<model::Zoo> zoo_;
  std::optional<hardware::Catalog> catalog_;
};

// Options every verb takes.
std::vector<OptionSpec> common_options();

// --threads: a positive whole number, or 0 (all cores) when absent. Throws UsageError.
int parse_threads(const Args& args);

int cmd_zoo(const std::vector<std::string>& argv);
int cmd_hardware(const std::vector<std::string>& argv);
int cmd_check(const std::vector<std::string>& argv);
int cmd_memory(const std::vector<std::string>& argv);
int cmd_simulate(const std::vector<std::string>& argv);
int cmd_compare(const std::vector<std::string>& argv);
int cmd_plan(const std::vector<std::string>& argv);
int cmd_calibrate(const std::vector<std::string>& argv);
int cmd_validate(const std::vector<std::string>& argv);
int cmd_sweep(const std::vector<std::string>& argv);
int cmd_sweep_merge(const std::vector<std::string>& argv);
int cmd_import(const std::vector<std::string>& argv);

}  // namespace ftplan::cli
