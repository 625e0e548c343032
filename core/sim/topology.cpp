#include "sim/lowering.hpp"

namespace ftplan::sim {

HostPath host_path(const Op& op, const plan::Plan& p) {
  // A CPU optimizer step reads and writes its state where it lives (CPU Adam's 28 B a parameter,
  // schedule::kAdamBytesPerParam, are mostly the fp32 master, m and v).
  if (op.kind == OpKind::optimizer && op.stream == Stream::cpu)
    return {HostLink::cpu, p.offload.optimizer == plan::Tier::cxl ? HostLink::cxl : HostLink::dram};
  if (op.kind != OpKind::copy) return {};
  if (op.src == plan::Tier::nvme) return {HostLink::nvme_read, HostLink::dram};
  if (op.dst == plan::Tier::nvme) return {HostLink::nvme_write, HostLink::dram};
  const bool to_gpu = op.dst == plan::Tier::gpu;
  HostPath path;
  if (!p.offload.pinned) path.push_back(HostLink::pageable);
  path.push_back(to_gpu ? HostLink::pcie_h2d : HostLink::pcie_d2h);
  if (detail::gpus_per_switch(p.cluster) > 0) path.push_back(to_gpu ? HostLink::uplink_h2d : HostLink::uplink_d2h);
  // The host side: DRAM, or an expander's link one way and its memory (the root complex forwards
  // the GPU's DMA to the CXL port: no DRAM crossed).
  if ((to_gpu ? op.src : op.dst) == plan::Tier::cxl) {
    path.push_back(to_gpu ? HostLink::cxl_read : HostLink::cxl_write);
    path.push_back(HostLink::cxl);
  } else {
    path.push_back(HostLink::dram);
  }
  return path;
}

const char* to_string(HostLink l) { return detail::host_link_info(l).name; }

namespace detail {

namespace {

// Achievable DRAM bandwidth over the theoretical channels x speed x 8 B: STREAM triad reaches
// ~74-78% of peak (TI SPRAD45A; hardware-figures.md "Host").
constexpr double kDramEfficiency = 0.75;

}  // namespace

const hardware::PcieSwitch* gpu_switch(const plan::Cluster& c) {
  for (const auto& sw : c.node.pcie_switches)
    if (sw.gpus > 0) return &sw;
  return nullptr;
}

int gpus_per_switch(const plan::Cluster& c) {
  const hardware::PcieSwitch* sw = gpu_switch(c);
  return sw ? sw->gpus : 0;
}

Topology topology_of(const plan::Plan& p, const Efficiency& eff) {
  Topology t{plan::RankLayout(p)};
  const plan::Cluster& c = p.cluster;
  // A GPU-to-GPU fabric (hardware::GpuInterconnect) at the GPU's nvlink_bandwidth. (A fabric the
  // GPU has no bandwidth for is refused by plan::check_plan.)
  t.nvlink = hardware::is_gpu_fabric(c.node.gpu_interconnect) && c.gpu.nvlink_bandwidth_Bps > 0;
  if (t.nvlink)
    t.gpu_link_name = c.node.gpu_interconnect == hardware::GpuInterconnect::nvlink ? "nvlink" : "infinity fabric";
  t.pcie_Bps = c.gpu.host_link.bandwidth_Bps() * eff.pcie;
  t.nvlink_Bps = t.nvlink ? c.gpu.nvlink_bandwidth_Bps * eff.nvlink
                          : t.pcie_Bps * 0.5;  // GPU-to-GPU through the root complex: both directions share it
  double nic = 0, latency = 0;
  for (const auto& [spec, count] : c.nics) {
    nic += spec.bandwidth_Bps * spec.ports * count;
    latency = std::max(latency, spec.latency_s);
  }
  t.nic_Bps = nic > 0 ? nic / c.host_ranks() * eff.network : 1.25e9;  // no NIC listed: 10 GbE
  t.nic_latency_s = latency > 0 ? latency : 5e-6;

  // The switch uplink a GPU shares with the GPUs (and their traffic) behind the same switch.
  const hardware::PcieSwitch* sw = gpu_switch(c);
  t.uplink_Bps = sw ? std::min(t.pcie_Bps, sw->uplink.bandwidth_Bps() * eff.pcie / sw->gpus) : t.pcie_Bps;
  const int ranks = c.host_ranks();  // this rank's share of the host and drives
  t.dram_Bps = (eff.dram_Bps > 0 ? eff.dram_Bps : c.host.dram_bandwidth_Bps() * kDramEfficiency) / ranks;
  // Striped drives (RAID-0): the sum of the drives, each capped by its own PCIe link.
  double read = 0, write = 0;
  for (const auto& [d, n] : c.drives) {
    const double link = d.interface.bandwidth_Bps() > 0 ? d.interface.bandwidth_Bps() : d.seq_read_Bps;
    read += n * std::min(d.seq_read_Bps, link);
    write += n * std::min(d.sustained_write_Bps, link);
  }
  if (eff.nvme_read_Bps > 0) read = eff.nvme_read_Bps;  // measured on this machine's drives
  if (eff.nvme_write_Bps > 0) write = eff.nvme_write_Bps;
  t.nvme_read_Bps = read / ranks;
  t.nvme_write_Bps = write / ranks;
  // CXL memory expanders: each device's one-way rates and its total (catalog expanders.yaml).
  for (const auto& [x, n] : c.expanders) {
    t.cxl_read_Bps += n * x.read_Bps / ranks;
    t.cxl_write_Bps += n * x.write_Bps / ranks;
    t.cxl_Bps += n * x.bandwidth_Bps / ranks;
  }
  // CPU optimizer: DRAM-bound at ~28 B per parameter on the rank's share of the host, or what
  // the calibration measured.
  t.cpu_params_per_s = eff.cpu_optimizer_params_per_s > 0 ? eff.cpu_optimizer_params_per_s / ranks
                                                          : t.dram_Bps / schedule::kAdamBytesPerParam;
  return t;
}

double nvme_write_rate(const plan::Plan& p, const schedule::StepIR& ir, double sustained_share_Bps) {
  const double written =
      ir.nvme_step_written_bytes >= 0 ? ir.nvme_step_written_bytes : schedule::nvme_written_bytes(ir);
  double drives = 0, burst = 0, sustained = 0, cache = 0;
  for (const auto& [d, n] : p.cluster.drives) {
    drives += n;
    burst += n * d.seq_write_Bps;
    sustained += n * d.sustained_write_Bps;
    cache += n * d.write_cache_bytes;
  }
  if (written <= 0 || drives <= 0 || burst <= sustained) return sustained_share_Bps;
  const int ranks = p.cluster.host_ranks();  // the drives' share of this plan's ranks, and theirs
  const double node_bytes = written * ranks;
  const double cached = std::min(node_bytes, cache);
  const double node_rate = node_bytes / (cached / burst + (node_bytes - cached) / sustained);
  return node_rate / ranks;
}

namespace {

// PCIe is full duplex: one link per direction (PCI Express Base Specification 4.2). Pageable host
// memory: the driver copies through its own pinned staging buffer with the CPU, chunk by chunk,
// so such copies also cross that (slower) stage. The host's cores run a CPU optimizer step.
constexpr HostLinkInfo kHostLinkTable[kHostLinks] = {
    {HostLink::pcie_h2d, "pcie h2d", "pcie h2d", LinkScope::rank},
    {HostLink::pcie_d2h, "pcie d2h", "pcie d2h", LinkScope::rank},
    {HostLink::uplink_h2d, "pcie switch uplink h2d (share)", "h2d", LinkScope::pcie_switch},
    {HostLink::uplink_d2h, "pcie switch uplink d2h (share)", "d2h", LinkScope::pcie_switch},
    {HostLink::dram, "host dram (share)", "host dram", LinkScope::node},
    {HostLink::nvme_read, "nvme read (share)", "nvme read", LinkScope::node},
    {HostLink::nvme_write, "nvme write (share)", "nvme write", LinkScope::node},
    {HostLink::pageable, "pageable staging", "pageable staging", LinkScope::rank},
    {HostLink::cpu, "host cpu (share)", "host cpu", LinkScope::node},
    {HostLink::cxl_read, "cxl read (share)", "cxl read", LinkScope::node},
    {HostLink::cxl_write, "cxl write (share)", "cxl write", LinkScope::node},
    {HostLink::cxl, "cxl memory (share)", "cxl memory", LinkScope::node},
};
constexpr bool rows_follow_enum() {
  for (std::size_t i = 0; i < kHostLinks; ++i)
    if (kHostLinkTable[i].link != static_cast<HostLink>(i)) return false;
  return true;
}
static_assert(rows_follow_enum(), "the host links' table follows HostLink's order");

}  // namespace

const HostLinkInfo& host_link_info(HostLink h) { return kHostLinkTable[static_cast<std::size_t>(h)]; }

std::optional<double> host_link_rate(HostLink h, const plan::Plan& p, const schedule::StepIR& ir, const Topology& topo,
                                     const Efficiency& eff) {
  switch (h) {
    case HostLink::pcie_h2d:
    case HostLink::pcie_d2h: return topo.pcie_Bps;
    case HostLink::uplink_h2d:
    case HostLink::uplink_d2h:
      if (gpus_per_switch(p.cluster) == 0) return std::nullopt;  // no copy crosses an uplink (host_path)
      return topo.uplink_Bps;
    case HostLink::dram: return topo.dram_Bps;
    case HostLink::nvme_read: return topo.nvme_read_Bps;
    case HostLink::nvme_write: return nvme_write_rate(p, ir, topo.nvme_write_Bps);
    case HostLink::pageable: return topo.pcie_Bps * eff.pageable_fraction;
    case HostLink::cpu: return topo.cpu_params_per_s * schedule::kAdamBytesPerParam;
    // Without expanders nothing is placed there (check_plan).
    case HostLink::cxl_read: return topo.cxl_Bps > 0 ? std::optional(topo.cxl_read_Bps) : std::nullopt;
    case HostLink::cxl_write: return topo.cxl_Bps > 0 ? std::optional(topo.cxl_write_Bps) : std::nullopt;
    case HostLink::cxl: return topo.cxl_Bps > 0 ? std::optional(topo.cxl_Bps) : std::nullopt;
  }
  return std::nullopt;
}

RankLinks representative_links(des::Engine& e, const plan::Plan& p, const schedule::StepIR& ir, const Topology& topo,
                               const Efficiency& eff, const std::string& prefix) {
  RankLinks k;
  const auto link = [&](const std::string& name, double Bps) {
    k.own.push_back(e.add_link(prefix + name, std::max(1.0, Bps)));
    return k.own.back();
  };
  k.nvlink = link(topo.gpu_link_name, topo.nvlink_Bps);
  k.nic = link("network", topo.nic_Bps);
  for (std::size_t i = 0; i < kHostLinks; ++i) {
    const auto h = static_cast<HostLink>(i);
    if (const std::optional<double> rate = host_link_rate(h, p, ir, topo, eff)) k[h] = link(to_string(h), *rate);
  }
  return k;
}

plan::PerTier<double> pool_capacities(const plan::Cluster& c) {
  // The plan's share of the node (what the footprint judges fit against) over its ranks there.
  const double ranks = std::max(1, c.gpus_per_node);
  plan::PerTier<double> out = c.tier_capacities();
  for (const plan::TierInfo& t : plan::kTiers)
    if (t.tier != plan::Tier::gpu) out[plan::tier_index(t.tier)] /= ranks;
  // A plan without drives still has an NVMe pool, which nothing fills (check_plan refuses NVMe
  // placements without a drive): a byte, not zero, so that it is not full from the start.
  auto& nvme = out[plan::tier_index(plan::Tier::nvme)];
  nvme = std::max(1.0, nvme);
  return out;
}

}  // namespace detail

}  // namespace ftplan::sim
