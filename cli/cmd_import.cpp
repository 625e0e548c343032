// `ftplan import FILE... --out scenario.yaml`: a scenario from the training configs a team already
// has (docs/import.md). Every value carries a comment naming its source; keys not used are listed.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "app.hpp"
#include "io/import/import.hpp"
#include "io/output_file.hpp"
#include "scenario_source.hpp"

namespace ftplan::cli {

int cmd_import(const std::vector<std::string>& argv) {
  std::vector<OptionSpec> options;
  for (auto& o : scenario_options())
    if (o.name != "plan" && o.name != "profile" && o.name != "format" && o.name != "from") options.push_back(o);
  options.push_back({"out", true, "write the scenario here (default: print it)"});
  const Args args = [&] {
    try {
      return Args(argv, 2, options);
    } catch (const HelpRequested& e) {
      throw HelpRequested(
          "arguments:\n"
          "  FILE...              the training configs of one job, each recognised by its content: DeepSpeed\n"
          "                       ds_config.json, accelerate config YAML, torchtune recipe YAML, torchtitan .toml,\n"
          "                       TrainingArguments/TRL JSON or YAML, PEFT adapter_config.json, Axolotl and\n"
          "                       LLaMA-Factory YAML; a DeepSpeed config a file names is read too. The flags below\n"
          "                       replace what the files say (docs/import.md)\n" +
          std::string(e.what()));
    }
  }();
  App app(args);
  const io::ImportedScenario imported =
      io::import_configs(import_files(args), import_overrides(args), app.zoo(), &app.catalog());
  // Read it back as `check` would before anything is written: a value the scenario refuses is
  // reported at the config key it came from.
  const auto out = args.value("out");
  const std::filesystem::path base =
      out ? std::filesystem::absolute(*out).parent_path() : std::filesystem::current_path();
  const plan::Scenario s = io::load_imported(imported, base, app.zoo(), app.catalog());
  if (!out) {
    fmt::print("{}", imported.yaml);
    return 0;
  }
  io::write_file_atomically(*out, imported.yaml);
  fmt::print("wrote {}: {} on {}x {}, {} key(s) of the configs not used (listed at its top)\n", *out,
             s.model.display_name, s.plans.front().cluster.gpus(), s.plans.front().cluster.gpu.name,
             imported.ignored.size());
  return 0;
}

}  // namespace ftplan::cli
