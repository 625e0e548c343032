#include "plan/cluster.hpp"

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan::plan {

std::vector<ClusterProblem> resolve_cluster(const hardware::Catalog& catalog, const hardware::NodeSpec& node, int nodes,
                                            int gpus_per_node, Cluster& c) {
  std::vector<ClusterProblem> problems;
  c.node = node;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.drives.clear();
  c.nics.clear();
  if (const auto* g = catalog.gpu(node.gpu)) c.gpu = *g;
  else problems.push_back({"gpu", fmt::format("no GPU '{}' in the catalog{}", node.gpu, did_you_mean(node.gpu, catalog.gpu_names()))});
  if (const auto* h = catalog.host(node.host)) {
    c.host = *h;
    if (node.dram_bytes > 0) c.host.dram_bytes = node.dram_bytes;
  } else {
    problems.push_back({"host", fmt::format("no host '{}' in the catalog{}", node.host, did_you_mean(node.host, catalog.host_names()))});
  }
  for (const auto& d : node.drives) {
    if (const auto* spec = catalog.drive(d.name)) c.drives.emplace_back(*spec, d.count);
    else problems.push_back({"drives", fmt::format("no drive '{}' in the catalog{}", d.name, did_you_mean(d.name, catalog.drive_names()))});
  }
  for (const auto& n : node.nics) {
    if (const auto* spec = catalog.nic(n.name)) c.nics.emplace_back(*spec, n.count);
    else problems.push_back({"nics", fmt::format("no NIC '{}' in the catalog{}", n.name, did_you_mean(n.name, catalog.nic_names()))});
  }
  return problems;
}

}  // namespace ftplan::plan
