#include "plan/cluster.hpp"

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan::plan {

namespace {

// A node's list of one kind of device (a row of kDeviceKinds), resolved against the catalog: each
// found into `out`; each missing, when `problems` is given, as a problem at the kind's key.
template <class Kind, class Spec = typename Kind::spec_type>
void resolve_devices(const hardware::Catalog& catalog, const Kind& kind,
                     const std::vector<hardware::DeviceCount>& listed, std::vector<std::pair<Spec, int>>& out,
                     std::vector<ClusterProblem>* problems) {
  const std::vector<Spec>& known = catalog.*kind.in_catalog;
  out.clear();
  for (const auto& d : listed) {
    if (const Spec* spec = hardware::find_named(known, d.name))
      out.emplace_back(*spec, d.count);
    else if (problems)
      problems->push_back({kind.key, fmt::format("no {} '{}' in the catalog{}", kind.what, d.name,
                                                 did_you_mean(d.name, hardware::names_of(known)))});
  }
}

}  // namespace

std::vector<ClusterProblem> resolve_cluster(const hardware::Catalog& catalog, const hardware::NodeSpec& node, int nodes,
                                            int gpus_per_node, Cluster& c) {
  std::vector<ClusterProblem> problems;
  c.node = node;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
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
  for_each_device_kind(
      [&](const auto& kind) { resolve_devices(catalog, kind, node.*kind.in_node, c.*kind.in_cluster, &problems); });
  // What the catalog sells under this node's name, for the bill of materials: the plan's
  // overrides keep the name (scenario cluster.dram/drives/nics, the planner's DRAM and drive axes).
  c.as_sold = {};
  if (const auto* h = catalog.host(node.host)) c.as_sold.host_dram_bytes = h->dram_bytes;
  if (const auto* sold = catalog.node(node.name)) {
    c.as_sold.catalog_node = true;
    c.as_sold.node_dram_bytes = sold->dram_bytes > 0 ? sold->dram_bytes : c.as_sold.host_dram_bytes;
    for_each_device_kind([&](const auto& kind) {
      resolve_devices(catalog, kind, (*sold).*kind.in_node, c.as_sold.*kind.as_sold, nullptr);
    });
  }
  return problems;
}

}  // namespace ftplan::plan
