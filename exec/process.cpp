#include "process.hpp"

#include "runtime/measure.hpp"

namespace ftplan::exec {

CorePlan core_plan(const Device& device, bool pin_compute) {
  CorePlan plan;
  if (!pin_compute || !device.computes_on_host()) return plan;
  const std::vector<int> cores = runtime::allowed_cpus();
  if (cores.size() < 2) return plan;
  plan.compute.assign(cores.begin(), cores.begin() + 1);
  plan.others.assign(cores.begin() + 1, cores.end());
  return plan;
}

}  // namespace ftplan::exec
