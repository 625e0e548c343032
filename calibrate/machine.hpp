// Who is being measured: CPU, memory, the drive behind a directory, the host name and the time,
// read from /proc and /sys (Linux). Fields the kernel does not expose are left empty.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "hardware/hardware.hpp"
#include "hardware/profile.hpp"

namespace ftplan::calibrate {

hardware::ProfileCpu read_cpu_identity();

// The drive holding `dir` and, for a PCIe device (NVMe), its current link.
struct DriveInfo {
  hardware::ProfileDrive identity;
  hardware::PcieLink link;  // gen 0 = not a PCIe device, or unknown
};
DriveInfo identify_drive(const std::filesystem::path& dir);

// The NUMA node of each CPU (index = CPU number; -1 where unknown). One node when /sys says nothing.
std::vector<int> numa_node_of_cpus();

// Size of the largest cache level one CPU sees, bytes; 0 when unknown.
double last_level_cache_bytes();

// DRAM bound from the firmware's memory table (dmidecode, root only): populated DIMMs x configured
// speed x 8 B, assuming one DIMM per channel (so an upper estimate). 0 when unreadable (VMs, non-root).
struct DramBound {
  double bandwidth_Bps = 0;
  std::string source;
};
DramBound dram_bound_from_dmidecode();

std::string host_name();
std::string kernel_release();  // "Linux 6.1.0-18-amd64"
std::string utc_now_iso8601();

// First line of `path` with surrounding blanks removed; "" when unreadable.
std::string read_line(const std::filesystem::path& path);

}  // namespace ftplan::calibrate
