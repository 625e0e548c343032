#include "hardware/hardware.hpp"

#include <algorithm>

namespace ftplan::hardware {

const char* to_string(Dtype d) { return name_of(d); }

double bytes_per_element(Dtype d) {
  switch (d) {
    case Dtype::fp64: return 8;
    case Dtype::fp32:
    case Dtype::tf32: return 4;
    case Dtype::bf16:
    case Dtype::fp16: return 2;
    case Dtype::fp8:
    case Dtype::int8: return 1;
    case Dtype::int4: return 0.5;
  }
  return 0;
}

double PcieLink::bandwidth_Bps() const {
  // GT/s per lane and encoding efficiency per generation (PCI-SIG base specifications 1.0-6.0;
  // Gen6 uses PAM4 with FLIT mode at 242/256, taken here as 128b/130b's equivalent rate).
  double gts = 0, efficiency = 128.0 / 130.0;
  switch (gen) {
    case 1:
      gts = 2.5;
      efficiency = 0.8;
      break;
    case 2:
      gts = 5.0;
      efficiency = 0.8;
      break;
    case 3: gts = 8.0; break;
    case 4: gts = 16.0; break;
    case 5: gts = 32.0; break;
    case 6: gts = 64.0; break;
    default: return 0;
  }
  return gts * 1e9 * efficiency / 8.0 * lanes;
}

double GpuSpec::peak_for(Dtype d) const {
  static const Dtype chain[] = {Dtype::fp8, Dtype::bf16, Dtype::fp16, Dtype::fp32};
  if (auto it = peak_flops.find(d); it != peak_flops.end()) return it->second;
  bool started = false;
  for (Dtype c : chain) {
    if (c == d) started = true;
    if (!started) continue;
    if (auto it = peak_flops.find(c); it != peak_flops.end()) return it->second;
  }
  if (auto it = peak_flops.find(Dtype::fp32); it != peak_flops.end()) return it->second;
  return 0;
}

const GpuSpec* Catalog::gpu(const std::string& name) const { return find_named(gpus, name); }
const HostSpec* Catalog::host(const std::string& name) const { return find_named(hosts, name); }
const NodeSpec* Catalog::node(const std::string& name) const { return find_named(nodes, name); }

const NodeSpec* Catalog::default_node_for(const std::string& gpu_name) const {
  for (const auto& n : nodes)
    if (std::find(n.default_for.begin(), n.default_for.end(), gpu_name) != n.default_for.end()) return &n;
  return nullptr;
}

std::vector<std::string> Catalog::gpu_names() const { return names_of(gpus); }
std::vector<std::string> Catalog::node_names() const { return names_of(nodes); }
std::vector<std::string> Catalog::host_names() const { return names_of(hosts); }

}  // namespace ftplan::hardware
