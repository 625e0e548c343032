// Hardware specs as read from the catalog (model_zoo/hardware/*.yaml, docs/hardware-catalog.md).
// All quantities in base units: bytes, bytes/s, FLOP/s, watts, USD, USD/hour, seconds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/enum_names.hpp"

namespace ftplan::hardware {

// Number formats a GPU computes in. Order matters only for display.
enum class Dtype { fp64, fp32, tf32, bf16, fp16, fp8, int8, int4 };
// Names as the catalog and profiles write them (common/enum_names.hpp).
inline std::span<const EnumName<Dtype>> enum_table(Dtype) {
  static constexpr EnumName<Dtype> t[] = {{Dtype::fp64, "fp64"}, {Dtype::fp32, "fp32"}, {Dtype::tf32, "tf32"},
                                          {Dtype::bf16, "bf16"}, {Dtype::fp16, "fp16"}, {Dtype::fp8, "fp8"},
                                          {Dtype::int8, "int8"}, {Dtype::int4, "int4"}};
  return t;
}
const char* to_string(Dtype d);

// Bytes per element of a stored tensor (int4 and NF4 are half a byte).
double bytes_per_element(Dtype d);

// How a node's GPUs reach each other: through the host's PCIe (root complex or switches), or a
// direct GPU-to-GPU fabric at the GPU's nvlink_bandwidth: NVLink, or AMD's Infinity Fabric (xGMI:
// each MI300X to its seven peers directly, AMD MI300X platform datasheet).
enum class GpuInterconnect { pcie, nvlink, infinity_fabric };
inline std::span<const EnumName<GpuInterconnect>> enum_table(GpuInterconnect) {
  static constexpr EnumName<GpuInterconnect> t[] = {{GpuInterconnect::pcie, "pcie"},
                                                    {GpuInterconnect::nvlink, "nvlink"},
                                                    {GpuInterconnect::infinity_fabric, "infinity-fabric"}};
  return t;
}
inline bool is_gpu_fabric(GpuInterconnect i) { return i != GpuInterconnect::pcie; }

struct PcieLink {
  int gen = 0;    // PCIe generation 1..6
  int lanes = 0;  // x1..x16
  // Raw rate per direction: lanes x per-lane rate after line encoding (PCIe base specs:
  // Gen1 2.5 GT/s 8b/10b, Gen2 5 GT/s 8b/10b, Gen3 8 GT/s, Gen4 16, Gen5 32, Gen6 64 GT/s 128b/130b).
  double bandwidth_Bps() const;
};

struct Price {
  std::optional<double> purchase_usd;        // to buy one
  std::optional<double> cloud_usd_per_hour;  // to rent one, on demand
  // Hosts: a GiB of DRAM more (or less) than `dram`, as the part in the host's price (its DIMMs).
  std::optional<double> dram_usd_per_gib;
  std::string as_of;  // when the prices were read
};

using Sources = std::map<std::string, std::string>;  // field (dotted) -> citation; "default" covers the rest

struct GpuSpec {
  std::string name, display_name, vendor, architecture, form_factor;
  int sm_count = 0;                // streaming multiprocessors (AMD: compute units); 0 = unknown
  double memory_bytes = 0;         // marketed capacity
  double usable_memory_bytes = 0;  // what the driver reports as total (nvidia-smi); = memory_bytes if not given
  double memory_bandwidth_Bps = 0;
  std::map<Dtype, double> peak_flops;  // dense peak per dtype, FLOP/s (int8: OP/s)
  double tdp_w = 0;
  double idle_power_w = 0;
  PcieLink host_link;
  double nvlink_bandwidth_Bps = 0;  // per direction, all links of one GPU; 0 = none
  // Large bf16 GEMMs' achieved rate over `peak` bf16 measured on this GPU (cuBLAS through
  // torch.matmul), when the catalog has a measurement: the simulator's Efficiency::gemm for it
  // instead of its architecture's default. 0 = none. Above 1 where boost clocks run past the
  // datasheet's clock.
  double gemm_efficiency = 0;
  Price price;
  Sources sources;
  std::string notes;

  // Peak for `d`, falling back to the next wider format the GPU has (fp8 -> bf16 on Ampere,
  // bf16 -> fp16 -> fp32 on Volta, whose tensor cores have no bf16).
  double peak_for(Dtype d) const;
};

struct HostSpec {
  std::string name, display_name;
  int sockets = 1;
  int cores_per_socket = 0;
  int threads_per_core = 1;
  double base_clock_hz = 0;
  std::string simd;
  int dram_channels_per_socket = 0;
  double dram_transfers_per_s = 0;  // per channel, e.g. 4800 MT/s
  double dram_bytes = 0;
  int pcie_gen = 0;
  int pcie_lanes_per_socket = 0;
  double cpu_tdp_w = 0;         // per socket
  double cpu_idle_power_w = 0;  // per socket
  double dram_power_per_dimm_w = 0;
  int dimms_per_socket = 0;
  Price price;
  Sources sources;
  std::string notes;

  int cores() const { return sockets * cores_per_socket; }
  // Theoretical DRAM bandwidth: sockets x channels x transfers/s x 8 bytes (DDR4/DDR5 64-bit channels).
  double dram_bandwidth_Bps() const { return sockets * dram_channels_per_socket * dram_transfers_per_s * 8.0; }
};

struct DriveSpec {
  std::string name, display_name, drive_class;
  PcieLink interface;
  double capacity_bytes = 0;
  double seq_read_Bps = 0;
  double seq_write_Bps = 0;
  double sustained_write_Bps = 0;  // after the write cache fills; = seq_write when not given
  double write_cache_bytes = 0;
  double random_read_iops = 0;
  double random_write_iops = 0;
  double read_power_w = 0, write_power_w = 0, idle_power_w = 0;
  double endurance_bytes = 0;  // rated bytes written over the warranty (from TBW, or DWPD x capacity x days)
  double dwpd = 0;
  double warranty_years = 0;
  Price price;
  Sources sources;
  std::string notes;
};

// A CXL 2.0 Type-3 memory expander (docs/tiered-memory.md, "CXL memory"): DRAM behind a PCIe 5.0
// port that the host maps as a NUMA node without cores; the CPU and GPU DMA reach it through the
// root complex.
struct CxlSpec {
  std::string name, display_name;
  PcieLink interface;
  double capacity_bytes = 0;
  // What one device moves: in all, reads and writes together (the datasheet's "up to"), and one
  // way, reads (to the host or a GPU) and writes (from them).
  double bandwidth_Bps = 0;
  double read_Bps = 0;
  double write_Bps = 0;
  double power_w = 0;  // under load (drawn whole while the node runs, as DIMMs are)
  Price price;
  Sources sources;
  std::string notes;
};

struct NicSpec {
  std::string name, display_name, fabric;
  double bandwidth_Bps = 0;  // per port, per direction
  int ports = 1;
  double latency_s = 0;
  double power_w = 0;
  double switch_power_per_port_w = 0;
  Price price;
  Sources sources;
  std::string notes;
};

struct DeviceCount {
  std::string name;
  int count = 0;
};

struct PcieSwitch {
  int count = 1;  // identical switches of this kind in the node
  PcieLink uplink;
  int gpus = 0, drives = 0, nics = 0;  // devices behind each switch
};

struct NodeSpec {
  std::string name, display_name;
  std::string gpu;  // catalog name
  int gpus = 0;
  std::string host;       // catalog name
  double dram_bytes = 0;  // 0 = the host's
  std::vector<DeviceCount> drives;
  std::vector<DeviceCount> nics;
  std::vector<DeviceCount> expanders;  // CXL memory expanders
  GpuInterconnect gpu_interconnect = GpuInterconnect::pcie;
  std::vector<PcieSwitch> pcie_switches;
  double base_power_w = 0;
  double max_power_w = 0;
  std::vector<std::string> default_for;
  // A named cloud instance (AWS p4de.24xlarge, GCP g2-standard-96): its price.cloud_hourly is that
  // provider's own list price. Otherwise a node's hourly rate is derived: gpus x the GPU's rate.
  bool cloud_instance = false;
  Price price;
  Sources sources;
  std::string notes;
};

// The entry of `items` called `name`, or nullptr; the names of all, in order (for a suggestion).
template <class T>
const T* find_named(const std::vector<T>& items, const std::string& name) {
  for (const T& t : items)
    if (t.name == name) return &t;
  return nullptr;
}
template <class T>
std::vector<std::string> names_of(const std::vector<T>& items) {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const T& t : items) out.push_back(t.name);
  return out;
}

// Everything in model_zoo/hardware, by name. Immutable once loaded. The devices a node counts
// (drives, nics, expanders) are found through plan::kDeviceKinds' rows.
struct Catalog {
  std::vector<GpuSpec> gpus;
  std::vector<HostSpec> hosts;
  std::vector<DriveSpec> drives;
  std::vector<NicSpec> nics;
  std::vector<CxlSpec> expanders;
  std::vector<NodeSpec> nodes;

  const GpuSpec* gpu(const std::string& name) const;
  const HostSpec* host(const std::string& name) const;
  const NodeSpec* node(const std::string& name) const;
  // The typical node for a GPU (the one whose default_for names it), or nullptr.
  const NodeSpec* default_node_for(const std::string& gpu_name) const;

  std::vector<std::string> gpu_names() const;
  std::vector<std::string> node_names() const;
  std::vector<std::string> host_names() const;
};

}  // namespace ftplan::hardware
