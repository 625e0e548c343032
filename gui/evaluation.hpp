// What the GUI evaluates: scenario text plus the what-if knobs on top, through the same reader,
// checks and evaluation the CLI uses (io::parse_scenario, plan::check_plan, evaluate::evaluate_plan,
// io::verdict). Qt-free, so it runs on a worker thread and in tests.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hardware/hardware.hpp"
#include "io/results.hpp"
#include "model/zoo.hpp"
#include "plan/scenario.hpp"
#include "planner/planner.hpp"

namespace ftplan::gui {

// Knobs applied to every plan on top of what the text says; unset = as written.
struct Overrides {
  std::optional<std::int64_t> seq_len;
  std::optional<int> micro_batch;
  std::optional<plan::Checkpointing> checkpointing;
  std::optional<plan::Precision> precision;
  bool any() const { return seq_len || micro_batch || checkpointing || precision; }
};

struct Outcome {
  std::optional<plan::Scenario> scenario;     // set when the text read and checked clean
  // What to show side by side: the scenario's plans, or for a `search` scenario the planner's
  // picks (fastest, cheapest, lowest power, fewest GPUs among those meeting the constraints).
  std::vector<plan::Plan> plans;
  std::vector<evaluate::Evaluation> evaluations;    // one per shown plan
  std::optional<planner::Result> search;      // a `search` scenario's whole result
  std::string verdict;
  std::vector<std::string> errors;            // "name:line:col: key: message" or "plan 'X': key: message"
  int error_line = 0;                         // line of the first error in the text (1-based); 0 = none
  double seconds = 0;                         // evaluation time
};

Outcome evaluate(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
                 const model::Zoo& zoo, const hardware::Catalog& catalog, const Overrides& overrides);

}  // namespace ftplan::gui
