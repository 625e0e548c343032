// Evaluating a plan: the chain model -> inventory -> footprint and step IR -> sim -> cost that
// every verb (compare, simulate, plan, sweep, the GUI) runs, in one place (docs/architecture.md),
// with the job's step count and the one judgement of a scenario's constraints.
#pragma once

#include <string>

#include "cost/cost.hpp"
#include "footprint/footprint.hpp"
#include "hardware/profile.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"
#include "plan/scenario.hpp"
#include "plan/search_spec.hpp"
#include "sim/simulate.hpp"

namespace ftplan::evaluate {

// Optimizer steps the job needs: its steps, or tokens / tokens per step, or epochs x dataset tokens / tokens per step.
double job_steps(const plan::Plan& plan, double tokens_per_step);

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
// The same for each plan of the scenario that leaves a knob open. The reader leaves them open
// (io::parse_scenario simulates nothing); each verb chooses them for the plans it evaluates, once.
void choose_open_knobs(plan::Scenario& s);

// What a calibration profile measured on a machine, as evaluation uses it: the simulator's
// efficiencies (sim::efficiency_from_profile) and the GPU's power per activity
// (cost::gpu_power_from_profile), both for one plan's GPU and precision.
struct Measured {
  sim::Efficiency efficiency;
  cost::GpuPower gpu_power;
};
Measured measured_from_profile(const hardware::CalibrationProfile& profile, const plan::Plan& plan);

// Dollars follow the plan's own cost settings (plan::Plan::cost). Rates and power are the
// catalog's unless `measured` is given.
Evaluation evaluate_plan(const model::ModelSpec& model, const plan::Plan& plan, const sim::Options& options = {},
                         const Measured* measured = nullptr);

// The scenario's `constraints` (deadline, budget, peak power, GPU count), as `plan` and `sweep`
// judge them: a plan meets them when it runs and is within every limit that is set.
bool meets_constraints(const plan::Constraints& k, const plan::Plan& plan, const Evaluation& e);

}  // namespace ftplan::evaluate
