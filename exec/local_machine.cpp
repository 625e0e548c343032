#include "local_machine.hpp"

#include <unistd.h>

#include <algorithm>
#include <vector>

namespace ftplan::exec {

namespace {

// The CPU device's nominal peak: every measured rate is a fraction of it (the simulator wants
// rates as fractions of a peak; any positive number serves).
constexpr double kPeak = 1e12;

// The CPU device as a catalog GPU: every dtype at the nominal peak (the simulator takes the
// measured rates as fractions of it), `device_bytes` of memory.
hardware::GpuSpec cpu_device_gpu(const DeviceRates& r, double device_bytes) {
  hardware::GpuSpec g;
  g.name = "cpu-device";
  g.display_name = "CPU device (this machine)";
  g.vendor = "ftplan";
  g.architecture = "cpu-device";
  g.sm_count = 0;  // no wave quantization: rates are measured per shape
  g.memory_bytes = g.usable_memory_bytes = device_bytes;
  g.memory_bandwidth_Bps = std::max(1.0, r.memory_Bps);
  for (const auto d : {hardware::Dtype::fp32, hardware::Dtype::tf32, hardware::Dtype::bf16, hardware::Dtype::fp16,
                       hardware::Dtype::fp8})
    g.peak_flops[d] = kPeak;
  g.host_link.gen = 4;
  g.host_link.lanes = 16;
  return g;
}

// A storage directory of this machine as a drive.
hardware::DriveSpec storage_dir_drive(double read_Bps, double write_Bps) {
  hardware::DriveSpec d;
  d.name = "local-dir";
  d.display_name = "a storage directory of this machine";
  d.interface.gen = 4;
  d.interface.lanes = 4;
  d.capacity_bytes = 1e12;
  d.seq_read_Bps = std::max(1.0, read_Bps);
  d.seq_write_Bps = d.sustained_write_Bps = std::max(1.0, write_Bps);
  d.write_cache_bytes = 0;
  return d;
}

}  // namespace

plan::Plan on_this_machine(const plan::Plan& plan, const DeviceRates& r, double device_bytes, int storage_dirs) {
  plan::Plan p = plan;
  p.cluster.gpu = cpu_device_gpu(r, device_bytes);
  p.cluster.nodes = 1;
  p.cluster.gpus_per_node = 1;
  p.cluster.exclusive = true;
  p.cluster.node.gpus = 1;
  p.cluster.node.pcie_switches.clear();
  if (plan.cluster.node.name != kLocalNode)
    p.cluster.host.dram_bytes =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  p.cluster.drives.clear();
  if (storage_dirs > 0)
    p.cluster.drives.emplace_back(storage_dir_drive(r.nvme_read_Bps / storage_dirs, r.nvme_write_Bps / storage_dirs),
                                  storage_dirs);
  return p;
}

hardware::Catalog with_local_node(hardware::Catalog catalog, const hardware::CalibrationProfile& profile,
                                  int storage_dirs) {
  const hardware::ProfileCpu& cpu = profile.machine.cpu;
  hardware::HostSpec h;
  h.name = kLocalNode;
  h.display_name = cpu.model.empty() ? "this machine" : "this machine (" + cpu.model + ")";
  h.sockets = std::max(1, cpu.sockets);
  h.cores_per_socket = std::max(1, cpu.cores / h.sockets);
  h.threads_per_core = std::max(1, cpu.threads / std::max(1, cpu.cores));
  h.simd = cpu.simd;
  h.dram_bytes = cpu.dram_bytes;
  // DRAM bandwidth as channels x transfers x 8 B: one channel per socket carrying the measured
  // figure (STREAM triad, McCalpin; the profile's best over thread counts), else the firmware bound.
  double dram = profile.cpu.dram_bound_Bps;
  for (const auto& d : profile.cpu.dram)
    if (d.kernel == "triad") dram = std::max(dram, d.bandwidth_Bps);
  h.dram_channels_per_socket = 1;
  h.dram_transfers_per_s = dram / 8.0 / h.sockets;
  h.pcie_gen = 4;
  h.pcie_lanes_per_socket = 16;
  h.notes = "from the calibration profile of " +
            (profile.machine.hostname.empty() ? std::string("this machine") : profile.machine.hostname);
  double read = 0, write = 0;  // one directory's sequential 1 MiB rates
  for (const auto& run : profile.storage.runs) {
    if (run.paths.size() != 1 || run.block_bytes != (1 << 20)) continue;
    if (run.op == hardware::StorageOp::read) read = std::max(read, run.bandwidth_Bps);
    if (run.op == hardware::StorageOp::write) write = std::max(write, run.bandwidth_Bps);
  }
  hardware::NodeSpec n;
  n.name = kLocalNode;
  n.display_name = h.display_name;
  n.gpu = "cpu-device";
  n.gpus = 1;
  n.host = kLocalNode;
  if (storage_dirs > 0) n.drives.push_back({"local-dir", storage_dirs});
  n.notes = "cluster: {node: local}: ftplan validate's CPU device on this machine";
  std::erase_if(catalog.gpus, [](const auto& g) { return g.name == "cpu-device"; });
  std::erase_if(catalog.hosts, [](const auto& x) { return x.name == kLocalNode; });
  std::erase_if(catalog.drives, [](const auto& x) { return x.name == "local-dir"; });
  std::erase_if(catalog.nodes, [](const auto& x) { return x.name == kLocalNode; });
  catalog.gpus.push_back(cpu_device_gpu(DeviceRates{}, 1e15));
  catalog.hosts.push_back(h);
  catalog.drives.push_back(storage_dir_drive(read > 0 ? read : 1e9, write > 0 ? write : 1e9));
  catalog.nodes.push_back(n);
  return catalog;
}

sim::Efficiency efficiency_of(const DeviceRates& r) {
  sim::Efficiency e;
  std::vector<double> fractions;
  for (const auto& g : r.gemm) {
    e.gemm_shapes.push_back({static_cast<double>(g.m), static_cast<double>(g.n), static_cast<double>(g.k),
                             g.flops_per_s / kPeak, g.layout});
    fractions.push_back(g.flops_per_s / kPeak);
  }
  std::sort(fractions.begin(), fractions.end());
  if (!fractions.empty()) e.gemm = fractions[fractions.size() / 2];
  if (r.attention_flops_per_s > 0) e.attention = r.attention_flops_per_s / kPeak;
  e.memory = 1.0;
  hardware::PcieLink link{4, 16};
  e.pcie = r.copy_Bps / link.bandwidth_Bps();
  // The executor issues each op from its stream's thread: no framework dispatch to model.
  e.launch_s = e.launch_backward_s = e.collective_launch_s = 1e-6;
  e.copy_latency_s = 0;
  e.pageable_fraction = 1.0;  // memcpy from pageable memory is memcpy
  e.dram_Bps = r.dram_Bps;
  e.cpu_optimizer_params_per_s = r.adam_params_per_s;
  e.nvme_read_Bps = r.nvme_read_Bps;
  e.nvme_write_Bps = r.nvme_write_Bps;
  e.source = "the executor's CPU device, measured by ftplan validate";
  return e;
}

}  // namespace ftplan::exec
