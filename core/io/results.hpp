// Result rows of each verb, with the field names of DESIGN.md's contract.
#pragma once

#include "footprint/footprint.hpp"
#include "io/rows.hpp"
#include "plan/plan.hpp"
#include "cost/cost.hpp"
#include "sim/simulate.hpp"

namespace ftplan::io {

// plan, feasible, infeasible_reason, gpu_count, gpu_*_peak_bytes, host_peak_bytes, nvme_bytes,
// memory.<tier>.<category>_bytes, peak phase and capacities.
Row footprint_row(const plan::Plan& plan, const footprint::Footprint& f);

// Optimizer steps the job needs: its steps, or tokens / tokens per step, or epochs x dataset tokens / tokens per step.
double job_steps(const plan::Plan& plan, double tokens_per_step);

// The footprint row plus step_time_s, tokens_per_s, mfu, hfu, model/hardware TFLOP/s per GPU,
// job_time_s and the time split of the simulated step.
Row simulation_row(const plan::Plan& plan, const footprint::Footprint& f, const sim::StepResult& s);

// The simulation row plus power, energy and dollars.
Row cost_row(const plan::Plan& plan, const footprint::Footprint& f, const sim::StepResult& s, const cost::PowerReport& pw,
             const cost::CostReport& c);

// Everything about one plan, evaluated: memory, one simulated step, power and cost.
struct Evaluation {
  footprint::Footprint memory;
  sim::StepResult step;
  cost::PowerReport power;
  cost::CostReport cost;
  double steps = 0;
  bool feasible() const { return memory.fits && step.ok; }
  std::string reason() const { return !memory.fits ? memory.infeasible_reason : step.problem; }
};
// micro_batch: auto and activation_checkpointing: auto: sets the open knobs to the combination
// whose simulated step is fastest among those that fit and split the global batch over the
// data-parallel ranks (every choice trains the same recipe, so the fastest step is the shortest
// job); micro-batch 1 and full checkpointing when nothing fits. Knobs the plan fixes stay.
// Deterministic, so every verb that reads the scenario makes the same choice.
void choose_open_knobs(const model::ModelSpec& model, plan::Plan& plan);

// Dollars follow the plan's own cost settings (plan::Plan::cost).
Evaluation evaluate(const model::ModelSpec& model, const plan::Plan& plan, const sim::Options& options = {},
                    const sim::Efficiency* efficiency = nullptr);

}  // namespace ftplan::io
