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
  c.expanders.clear();
  if (const auto* g = catalog.gpu(node.gpu))
    c.gpu = *g;
  else
    problems.push_back(
        {"gpu", fmt::format("no GPU '{}' in the catalog{}", node.gpu, did_you_mean(node.gpu, catalog.gpu_names()))});
  if (const auto* h = catalog.host(node.host)) {
    c.host = *h;
    if (node.dram_bytes > 0) c.host.dram_bytes = node.dram_bytes;
  } else {
    problems.push_back({"host", fmt::format("no host '{}' in the catalog{}", node.host,
                                            did_you_mean(node.host, catalog.host_names()))});
  }
  for (const auto& d : node.drives) {
    if (const auto* spec = catalog.drive(d.name))
      c.drives.emplace_back(*spec, d.count);
    else
      problems.push_back({"drives", fmt::format("no drive '{}' in the catalog{}", d.name,
                                                did_you_mean(d.name, catalog.drive_names()))});
  }
  for (const auto& x : node.expanders) {
    if (const auto* spec = catalog.expander(x.name))
      c.expanders.emplace_back(*spec, x.count);
    else
      problems.push_back({"expanders", fmt::format("no CXL memory expander '{}' in the catalog{}", x.name,
                                                   did_you_mean(x.name, catalog.expander_names()))});
  }
  for (const auto& n : node.nics) {
    if (const auto* spec = catalog.nic(n.name))
      c.nics.emplace_back(*spec, n.count);
    else
      problems.push_back(
          {"nics", fmt::format("no NIC '{}' in the catalog{}", n.name, did_you_mean(n.name, catalog.nic_names()))});
  }
  // What the catalog sells under this node's name, for the bill of materials: the plan's
  // overrides keep the name (scenario cluster.dram/drives/nics, the planner's DRAM and drive axes).
  c.as_sold = {};
  if (const auto* h = catalog.host(node.host)) c.as_sold.host_dram_bytes = h->dram_bytes;
  if (const auto* sold = catalog.node(node.name)) {
    c.as_sold.catalog_node = true;
    c.as_sold.node_dram_bytes = sold->dram_bytes > 0 ? sold->dram_bytes : c.as_sold.host_dram_bytes;
    for (const auto& d : sold->drives)
      if (const auto* spec = catalog.drive(d.name)) c.as_sold.drives.emplace_back(*spec, d.count);
    for (const auto& n : sold->nics)
      if (const auto* spec = catalog.nic(n.name)) c.as_sold.nics.emplace_back(*spec, n.count);
    for (const auto& x : sold->expanders)
      if (const auto* spec = catalog.expander(x.name)) c.as_sold.expanders.emplace_back(*spec, x.count);
  }
  return problems;
}

}  // namespace ftplan::plan
