// Result rows of each verb, with the field names of DESIGN.md's contract.
#pragma once

#include "cost/cost.hpp"
#include "evaluate/evaluate.hpp"
#include "footprint/footprint.hpp"
#include "io/rows.hpp"
#include "plan/plan.hpp"
#include "sim/simulate.hpp"

namespace ftplan::io {

// plan, feasible, infeasible_reason, gpu_count, gpu_*_peak_bytes, each node tier's peak and capacity (plan::kTiers),
// memory.<tier>.<category>_bytes, peak phase and capacities.
Row footprint_row(const plan::Plan& plan, const footprint::Footprint& f);

// The footprint row plus step_time_s, tokens_per_s, mfu, hfu, model/hardware TFLOP/s per GPU,
// job_time_s and the time split of the simulated step.
Row simulation_row(const plan::Plan& plan, const footprint::Footprint& f, const sim::StepResult& s);

// The simulation row plus power, energy and dollars.
Row cost_row(const plan::Plan& plan, const footprint::Footprint& f, const sim::StepResult& s,
             const cost::PowerReport& pw, const cost::CostReport& c);

}  // namespace ftplan::io
