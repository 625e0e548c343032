// Resolving a node description against the catalog into a plan's Cluster (its GPU, host, drives
// and NICs copied in, so a plan is self-contained and can be evaluated on any thread).
#pragma once

#include <string>
#include <vector>

#include "hardware/hardware.hpp"
#include "plan/plan.hpp"

namespace ftplan::plan {

struct ClusterProblem {
  std::string key;  // "gpu", "host", or a device kind's key ("drives": plan::kDeviceKinds)
  std::string message;
};

// Fills cluster.gpu, host and each kind of device (plan::kDeviceKinds) from `node`'s names. Returns what could not be
// found.
std::vector<ClusterProblem> resolve_cluster(const hardware::Catalog& catalog, const hardware::NodeSpec& node, int nodes,
                                            int gpus_per_node, Cluster& cluster);

}  // namespace ftplan::plan
