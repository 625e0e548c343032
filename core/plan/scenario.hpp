// A scenario: one model, one job, several plans to compare (docs/scenario-format.md).
#pragma once

#include <string>
#include <vector>

#include "model/model.hpp"
#include "plan/cost_spec.hpp"
#include "plan/job.hpp"
#include "plan/plan.hpp"
#include "plan/search_spec.hpp"

namespace ftplan::plan {

// The scenario-format version this ftplan writes and reads.
inline constexpr int kScenarioSchemaVersion = 1;

struct Scenario {
  int schema_version = kScenarioSchemaVersion;
  std::string name;
  std::string description;
  std::string file;  // where it was read from ("" when built in code)
  model::ModelSpec model;
  Job job;
  std::vector<Plan> plans;
  CostSpec cost;
  bool has_search = false;  // a `search` block was given (plans may then be empty)
  SearchSpace search;
  Constraints constraints;
};

}  // namespace ftplan::plan
