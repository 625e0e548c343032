// The capacity planner: enumerate plans for a model and job over hardware and layout choices,
// with the job's global batch and token count held fixed (no plan wins by changing the training
// recipe), prune by the footprint, simulate the survivors on all cores, and report the Pareto
// front over (job time, dollars, peak power) and the best plan under each constraint.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "evaluate/evaluate.hpp"
#include "hardware/hardware.hpp"
#include "model/model.hpp"
#include "plan/cost_spec.hpp"
#include "plan/plan.hpp"
#include "plan/search_spec.hpp"

namespace ftplan::planner {

using plan::Constraints;
using plan::SearchSpace;

struct Candidate {
  plan::Plan plan;
  evaluate::Evaluation evaluation;
  bool meets_constraints = false;
  // Why the plan could not be evaluated (its evaluation threw); empty otherwise. Such a plan is
  // infeasible: evaluation.reason() says "could not be evaluated: " and this.
  std::string error;
};

struct Result {
  std::vector<Candidate> candidates;  // simulated, in enumeration order
  std::vector<int> pareto;            // indices into candidates: no other is better in time, $ and peak power
  int fastest = -1, cheapest = -1, lowest_power = -1, fewest_gpus = -1;  // among those meeting the constraints
  std::int64_t enumerated = 0;                                           // layouts generated
  std::int64_t invalid = 0;        // refused by the plan checks (degrees that do not divide, ...)
  std::int64_t duplicates = 0;     // the same layout as another (ZeRO stages on one data-parallel rank)
  std::int64_t pruned_memory = 0;  // do not fit by the footprint
  std::int64_t simulated = 0;      // candidates, failed ones included
  std::int64_t failed = 0;         // candidates whose evaluation threw (Candidate::error)
  std::int64_t examined = 0;       // layouts checked so far: `enumerated` unless interrupted
  bool interrupted = false;        // Control::stop ended the search before every layout was examined
  double seconds = 0;
};

// Watching and ending a search from outside (a progress line, Ctrl-C).
struct Control {
  // Once true, no further layout is examined; the result holds the plans simulated so far, with
  // `interrupted` set. Polled between layouts (a SIGINT handler may set it).
  const std::atomic<bool>* stop = nullptr;
  // Called now and then from a worker thread, never two at a time: layouts examined of
  // `enumerated`, and plans simulated so far.
  std::function<void(std::int64_t examined, std::int64_t enumerated, std::int64_t simulated)> progress;
  // How a plan that fits is evaluated; empty: evaluate::evaluate_plan (as every verb evaluates a plan). Called from the
  // workers at once; may throw (tests use it to fail a chosen plan).
  std::function<evaluate::Evaluation(const plan::Plan&)> evaluate;
};

// Runs the search on `threads` threads (0 = all cores). The job must set global_batch.
// A plan whose evaluation throws is listed as failed (Candidate::error); the search goes on.
Result search(const model::ModelSpec& model, const plan::Job& job, const hardware::Catalog& catalog,
              const SearchSpace& space, const Constraints& constraints, const plan::CostSpec& cost, int threads = 0,
              const Control& control = {});

// Plans of `candidates` that no other candidate beats in all of job time, cost and peak power.
std::vector<int> pareto_front(const std::vector<Candidate>& candidates);

// Layers for the last of `pp` pipeline stages that balance the LM head against the other
// stages' layers (the planner's pipelines use it, with total / pp on the first stage); 0 = keep
// the even split.
int balanced_last_stage(const model::ModelSpec& m, int pp);

}  // namespace ftplan::planner
