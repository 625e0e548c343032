// Where the executor's workers run on its own process's cores (Linux). What it reads of and sets on
// the process (pinning, CPU time, peak RSS, block I/O) is runtime/process.hpp.
#pragma once

#include <vector>

#include "device.hpp"

namespace ftplan::exec {

// Where Options::pin_compute puts the workers on `device`: the compute worker on the first core
// the calling thread may use, every other worker on the rest. Both empty (no pinning) when the
// device does not compute on the host's cores, `pin_compute` is off or fewer than two cores are
// allowed. validate's rate probes run where the workers run (a thread pinned to one core of a
// loaded machine gets another share of it than one the kernel may move: docs/validation.md).
struct CorePlan {
  std::vector<int> compute, others;
};
CorePlan core_plan(const Device& device, bool pin_compute);

}  // namespace ftplan::exec
