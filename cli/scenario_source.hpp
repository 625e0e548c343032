// Where a verb's scenario comes from: a file (`ftplan memory SCENARIO`) or flags
// (`ftplan memory --model llama-3.1-8b --gpu h100-sxm-80gb --gpus 8 ...`). Flags are turned into
// scenario YAML and read by the same reader, so they are validated exactly like a file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <optional>
#include "app.hpp"

#include "evaluate/evaluate.hpp"
#include "io/import/import.hpp"
#include "io/rows.hpp"
#include "plan/scenario.hpp"
#include "sim/simulate.hpp"

namespace ftplan::cli {

// Options for the quick form (shortcuts for common keys, plus --set KEY=VALUE for any key).
std::vector<OptionSpec> scenario_options();

// The scenario named by the first positional, or built from the flags; keeps only --plan NAME if given.
// `whole_job`: the verb prices a whole job (compare), so --from configs that give no step count (a
// one-step job) are refused, as compare refuses the quick form without one (quick_form_without_amount).
plan::Scenario scenario_from_args(App& app, const Args& args, bool whole_job = false);

// `read` (the scenario file at `path`) with --set's KEY=VALUE items applied to its text (each
// plan's keys to every plan; docs/scenario-format.md) and read again; an item the reader refuses
// is an InputError naming it.
plan::Scenario apply_set(App& app, const std::string& path, const plan::Scenario& read,
                         const std::vector<std::pair<std::string, std::string>>& items);

// A scenario file; a training config given instead is refused with how to import it.
plan::Scenario load_scenario_file(App& app, const std::string& path);

// `--from` and `ftplan import`: the configuration files (--from's value, then the positionals),
// the quick-form flags and --set items as overrides of what they say, and the list of keys not used.
std::vector<std::filesystem::path> import_files(const Args& args);
std::vector<io::ImportOverride> import_overrides(const Args& args);
void print_ignored(const io::ImportedScenario& imported);

// --fidelity for the verbs that simulate, and the simulation options it asks for.
OptionSpec fidelity_option();
sim::Options simulation_options(const Args& args);

// What --profile (a calibration profile) measured, for `plan`: efficiencies and GPU power; nullopt for the
// GPU's shipped defaults.
std::optional<evaluate::Measured> profile_measured(const Args& args, const plan::Plan& plan);

// The table-format headline of a scenario: "<model> (<params> params), <method> fine-tune".
void print_headline(const App& app, const plan::Scenario& scenario);

// Prints result rows as the --format asks (json: one document with schema_version, the scenario,
// the model and `extra` top-level fields; csv: a header and one line per row). Table output is
// each verb's own; this does nothing for it.
void print_rows(const App& app, const plan::Scenario& scenario, const std::vector<io::Row>& rows, io::Row extra = {});

// The quick form (no scenario file, no --from) with no --tokens, --steps or --set job.tokens /
// job.steps / job.epochs: its job is one step (enough for memory, not for a job's cost).
bool quick_form_without_amount(const Args& args);

// The YAML text the quick-form flags stand for (exposed for tests and --dry-run style checks).
std::string quick_scenario_yaml(const Args& args);

}  // namespace ftplan::cli
