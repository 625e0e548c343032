// What the GUI evaluates: scenario text plus the what-if knobs on top, through the same reader,
// checks and evaluation the CLI uses (io::parse_scenario, plan::check_plan, evaluate::evaluate_plan,
// present::verdict). Qt-free, so it runs on a worker thread and in tests.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "footprint/footprint.hpp"
#include "hardware/hardware.hpp"
#include "io/results.hpp"
#include "model/zoo.hpp"
#include "plan/scenario.hpp"
#include "planner/planner.hpp"
#include "present/verdict.hpp"

namespace ftplan::gui {

// Knobs applied to every plan on top of what the text says; unset = as written. In a `search`
// scenario the micro-batch and checkpointing knobs replace the lists the planner searches.
struct Overrides {
  std::optional<std::int64_t> seq_len;
  std::optional<int> micro_batch;
  std::optional<plan::Checkpointing> checkpointing;
  std::optional<plan::Precision> precision;
  bool any() const { return seq_len || micro_batch || checkpointing || precision; }
};

struct Outcome {
  std::optional<plan::Scenario> scenario;  // set when the text read and checked clean
  // What to show side by side: the scenario's plans, or for a `search` scenario the planner's
  // picks (fastest, cheapest, lowest power, fewest GPUs among those meeting the constraints).
  std::vector<plan::Plan> plans;
  std::vector<evaluate::Evaluation> evaluations;  // one per shown plan
  // For each shown plan, its index in the text's `plans` (scenario->plans), or -1 for a search's
  // pick (a search shows its picks, then the text's own plans).
  std::vector<int> text_plan;
  // A `search` scenario's whole result (shared: an edit of the text's plans alone reuses it).
  std::shared_ptr<const planner::Result> search;
  std::string search_key;          // what the search depends on (search_key of the text and knobs)
  present::Comparison comparison;  // the table `ftplan compare` prints, cell by cell
  std::string answer;              // present::answer: the winner under the constraints, in one line
  std::string verdict;
  // What compare prints under its verdict: the owned plans' crossover (present::ownership; "" unless
  // two owned plans fit and are priced) and its notes (present::advice).
  std::string ownership;
  std::vector<std::string> advice;
  std::string rent;    // where each rented plan's rate comes from (present::rent_words); "" when none is rented
  std::string bought;  // what each plan's capex buys (present::bom_words); "" when no plan has a bill
  // For each shown plan that does not fit in memory: what would (footprint::what_would_fit), nearest first.
  std::vector<std::vector<footprint::FitChange>> fixes;
  std::vector<std::string> errors;  // "name:line:col: key: message" or "plan 'X': key: message"
  std::vector<int> error_lines;     // for each error, its line in the text (1-based); 0 = none
  bool cancelled = false;           // `stop` ended the evaluation: nothing to show
  double seconds = 0;               // evaluation time
};

// What a search's result depends on: the text without its `plans` (the search never reads them)
// and the knobs. Equal keys, equal searches.
std::string search_key(const std::string& text, const Overrides& overrides);

// A previous search, reused when its key is the text's (a plan added, a plan control changed: the
// search is not run again).
struct SearchReuse {
  std::string key;
  std::shared_ptr<const planner::Result> result;
};

// `stop` (may be null), once true, ends the evaluation early with `cancelled` set: the search
// stops between layouts, a comparison between plans (within a plan, when its simulation is done).
Outcome evaluate(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
                 const model::Zoo& zoo, const hardware::Catalog& catalog, const Overrides& overrides,
                 const std::atomic<bool>* stop = nullptr, const SearchReuse& reuse = {});

// The scenario text with the knobs written into its top-level `job` (io::yaml_set: each value
// replaced on its own line or in its flow mapping, a trailing comment kept, a missing key added
// at the block's indentation, every other line as it was). `problem` instead when that cannot say
// what the knobs do: the writer refuses the job (an alias, say), or a plan sets one of the keys
// itself (the knob overrides it there, the text's job would not). Checked by reading the result
// back: its plans run what the knobs made of the text.
struct KnobEdit {
  std::string text;     // the edited text ("" with a problem)
  std::string problem;  // why not ("" when done)
};
KnobEdit with_knobs(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
                    const model::Zoo& zoo, const hardware::Catalog& catalog, const Overrides& overrides);

// The shown plans as `ftplan compare --format json` and `--format csv` write them (io::cost_row
// per plan; the JSON with the scenario, the answer and the verdict on top). Empty without a scenario.
// What the new-scenario form asks (File > New scenario): a model (a zoo name, or the path of a
// Hugging Face config.json), the method, how much training, and where it runs: `count` GPUs of
// `gpu`, or `count` nodes of `node` when a node is given; an offload preset for a tiered plan.
struct NewScenario {
  std::string model = "llama-3.1-8b";
  std::string method = "lora";  // full | lora | qlora
  std::string tokens = "100M";  // as a scenario writes it
  int seq_len = 4096;
  std::string gpu = "h100-sxm-80gb";
  std::string node;  // "" = GPUs by count
  int count = 8;
  std::string offload = "none";  // an offload preset (plan::OffloadPreset's names)
  bool compare_tiered = false;   // a second plan: one node's GPUs with this offload preset
  // The device a preset placing state on a tier nodes may lack gets in its node (two of them), by
  // device kind (plan::kDeviceKinds' key): the catalog's first of the kind.
  std::map<std::string, std::string> tier_devices = {{"expanders", "micron-cz120-256gb"}};
};
// A commented scenario for `s`, as a person would write it (docs/scenario-format.md): its text
// reads back clean (io::parse_scenario) for every choice the form offers.
std::string new_scenario_text(const NewScenario& s);

std::string results_json(const Outcome& outcome);
std::string results_csv(const Outcome& outcome);

}  // namespace ftplan::gui
