// Result rows of each verb, with the field names of DESIGN.md's contract.
#pragma once

#include "footprint/footprint.hpp"
#include "io/rows.hpp"
#include "plan/plan.hpp"

namespace ftplan::io {

// plan, feasible, infeasible_reason, gpu_count, gpu_*_peak_bytes, host_peak_bytes, nvme_bytes,
// memory.<tier>.<category>_bytes, peak phase and capacities.
Row footprint_row(const plan::Plan& plan, const footprint::Footprint& f);

}  // namespace ftplan::io
