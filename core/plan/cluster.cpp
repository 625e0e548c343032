#include "plan/cluster.hpp"

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan::plan {

namespace {

// A node's list of one kind of device, resolved against the catalog (`find` looks one up, `names`
// lists them for a suggestion): each found into `out`; each missing, when `problems` is given, as
// a problem at `key` naming it as `what`.
template <class Spec>
void resolve_devices(const hardware::Catalog& catalog, const Spec* (hardware::Catalog::*find)(const std::string&) const,
                     std::vector<std::string> (hardware::Catalog::*names)() const,
                     const std::vector<hardware::DeviceCount>& listed, const char* key, const char* what,
                     std::vector<std::pair<Spec, int>>& out, std::vector<ClusterProblem>* problems) {
  out.clear();
  for (const auto& d : listed) {
    if (const Spec* spec = (catalog.*find)(d.name))
      out.emplace_back(*spec, d.count);
    else if (problems)
      problems->push_back(
          {key, fmt::format("no {} '{}' in the catalog{}", what, d.name, did_you_mean(d.name, (catalog.*names)()))});
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
  using hardware::Catalog;
  resolve_devices(catalog, &Catalog::drive, &Catalog::drive_names, node.drives, "drives", "drive", c.drives, &problems);
  resolve_devices(catalog, &Catalog::expander, &Catalog::expander_names, node.expanders, "expanders",
                  "CXL memory expander", c.expanders, &problems);
  resolve_devices(catalog, &Catalog::nic, &Catalog::nic_names, node.nics, "nics", "NIC", c.nics, &problems);
  // What the catalog sells under this node's name, for the bill of materials: the plan's
  // overrides keep the name (scenario cluster.dram/drives/nics, the planner's DRAM and drive axes).
  c.as_sold = {};
  if (const auto* h = catalog.host(node.host)) c.as_sold.host_dram_bytes = h->dram_bytes;
  if (const auto* sold = catalog.node(node.name)) {
    c.as_sold.catalog_node = true;
    c.as_sold.node_dram_bytes = sold->dram_bytes > 0 ? sold->dram_bytes : c.as_sold.host_dram_bytes;
    resolve_devices(catalog, &Catalog::drive, &Catalog::drive_names, sold->drives, "", "", c.as_sold.drives, nullptr);
    resolve_devices(catalog, &Catalog::nic, &Catalog::nic_names, sold->nics, "", "", c.as_sold.nics, nullptr);
    resolve_devices(catalog, &Catalog::expander, &Catalog::expander_names, sold->expanders, "", "", c.as_sold.expanders,
                    nullptr);
  }
  return problems;
}

}  // namespace ftplan::plan
