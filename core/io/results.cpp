#include "io/results.hpp"

#include <cmath>

namespace ftplan::io {

namespace {
Value bytes(double b) { return static_cast<std::int64_t>(std::llround(b)); }  // bytes are whole numbers
}  // namespace

Row footprint_row(const plan::Plan& plan, const footprint::Footprint& f) {
  Row r;
  r.set("plan", plan.name);
  r.set("feasible", f.fits);
  r.set("infeasible_reason", f.fits ? Value(nullptr) : Value(f.infeasible_reason));
  r.set("gpu_count", static_cast<std::int64_t>(plan.cluster.gpus()));
  r.set("gpu", plan.cluster.gpu.name);
  r.set("gpu_allocated_peak_bytes", bytes(f.gpu_allocated_peak_bytes));
  r.set("gpu_reserved_peak_bytes", bytes(f.gpu_reserved_peak_bytes));
  r.set("gpu_peak_bytes", bytes(f.gpu_peak_bytes));
  r.set("gpu_capacity_bytes", bytes(f.gpu_capacity_bytes));
  r.set("host_peak_bytes", bytes(f.host_peak_bytes));
  r.set("host_capacity_bytes", bytes(f.host_capacity_bytes));
  r.set("nvme_bytes", bytes(f.nvme_bytes));
  r.set("nvme_capacity_bytes", bytes(f.nvme_capacity_bytes));
  r.set("peak_phase", footprint::to_string(f.peak_phase));
  r.set("peak_stage", static_cast<std::int64_t>(f.peak_stage));
  const std::pair<const char*, const footprint::TierBytes*> tiers[] = {{"gpu", &f.gpu}, {"host", &f.host}, {"nvme", &f.nvme}};
  const auto bytes_of = [](const footprint::TierBytes& t, int c) { return bytes(t.bytes[c]); };
  for (const auto& [tier, tier_bytes] : tiers)
    for (int c = 0; c < inventory::kCategories; ++c)
      r.set(std::string("memory.") + tier + "." + inventory::to_string(static_cast<inventory::Category>(c)) + "_bytes",
            bytes_of(*tier_bytes, c));
  return r;
}

}  // namespace ftplan::io
