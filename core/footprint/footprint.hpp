// Analytic memory accounting from the inventory: the peak bytes of one rank per tier and
// category, the GPU peak three ways (allocated, reserved, device), and whether the plan fits.
// Derivations and sources: docs/memory-model.md.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "inventory/inventory.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"

namespace ftplan::footprint {

struct TierBytes {
  std::array<double, inventory::kCategories> bytes{};  // indexed by inventory::Category
  double operator[](inventory::Category c) const { return bytes[static_cast<int>(c)]; }
  double total() const;
};

// The moments of a step where memory peaks.
enum class Phase { forward, backward, backward_end, optimizer };
const char* to_string(Phase p);

// Where a paged optimizer's unified-memory state sits, per GPU (bytes). Resident pages are on the
// GPU; the others in host memory, moved over PCIe both ways every optimizer step.
struct PagedPlacement {
  double state_bytes = 0;     // all paged state
  double resident_bytes = 0;  // on the GPU: what the device has left beside the caching allocator's peak
  double host_bytes = 0;      // the rest: paged out, and in and out again each optimizer step
};
PagedPlacement paged_placement(const inventory::Inventory& inv, const plan::Plan& plan);

struct Footprint {
  // Each tier by category (plan::kTiers): the GPU's per GPU (max over pipeline stages) at its peak
  // moment; host DRAM's, CXL memory's and NVMe's per node, each category at its own peak.
  plan::PerTier<TierBytes> tiers;
  // Each tier's peak, judged for fit: the GPU's device view (the caching allocator's reserved peak
  // plus CUDA context, NCCL, workspaces: nvidia-smi), per GPU; host DRAM's with the training
  // processes, per node; CXL memory's and NVMe's per node.
  plan::PerTier<double> peak_bytes{};
  // What each tier offers: usable per GPU; usable host DRAM, the expanders and the drives of the
  // plan's share of a node (0: the node has none).
  plan::PerTier<double> capacity_bytes{};
  // Per GPU: each category's own peak over the step (max over the step's phases and the
  // pipeline's stages): activations peak at the end of forward, gradients and optimizer
  // temporaries later, so these do not add up to the GPU peak (`gpu()` is the split at that moment).
  TierBytes gpu_category_peaks;
  PagedPlacement paged;                 // a paged optimizer's state (zero without one)
  double gpu_allocated_peak_bytes = 0;  // live tensors (torch.cuda.max_memory_allocated)
  double gpu_reserved_peak_bytes = 0;   // + caching allocator slack (max_memory_reserved)
  Phase peak_phase = Phase::forward;
  int peak_stage = 0;
  bool fits = false;
  std::string infeasible_reason;  // "" when it fits
  // DeepSpeed's NVMe optimizer swap: the swap buffers it holds at once (the most demanding
  // stage's; inventory::Inventory::optimizer_swap_buffers), judged against the pool's
  // offload.optimizer_buffer_count.
  int optimizer_swap_buffers = 0;

  const TierBytes& bytes(plan::Tier t) const { return tiers[plan::tier_index(t)]; }
  double peak(plan::Tier t) const { return peak_bytes[plan::tier_index(t)]; }
  double capacity(plan::Tier t) const { return capacity_bytes[plan::tier_index(t)]; }
  // The GPU's, the question most callers ask.
  const TierBytes& gpu() const { return bytes(plan::Tier::gpu); }
  double gpu_peak_bytes() const { return peak(plan::Tier::gpu); }
  double gpu_capacity_bytes() const { return capacity(plan::Tier::gpu); }
};

Footprint footprint(const inventory::Inventory& inv, const plan::Plan& plan);
// Over every pipeline stage of the plan (the worst GPU; host and NVMe of a node).
Footprint footprint(const model::ModelSpec& model, const plan::Plan& plan);

// The largest micro-batch (up to `limit`) with which the plan fits; 0 if not even 1 fits.
int max_micro_batch(const model::ModelSpec& model, plan::Plan plan, int limit = 4096);
// The largest sequence length (multiple of 128, up to the model's max context) that fits; 0 if none.
std::int64_t max_seq_len(const model::ModelSpec& model, plan::Plan plan);

// One change to a plan that does not fit, after which it fits: what changes, the changed plan
// and its GPU peak (device view, judged for fit).
struct FitChange {
  std::string change;  // "micro-batch 1 (16 accumulation steps)", "activation checkpointing full", ...
  plan::Plan plan;
  double gpu_peak_bytes = 0;
};
// What would make `plan` fit, nearest first: one knob at a time, from what leaves the job and the
// hardware as they are (micro-batch at the same global batch, checkpointing), through sharding,
// offload presets and 16-bit state, to more of the same GPU. Each change passes the framework's
// checks (plan::check_plan). From the footprint alone: no simulation. Empty when it fits already
// or nothing single does.
std::vector<FitChange> what_would_fit(const model::ModelSpec& model, const plan::Plan& plan);

}  // namespace ftplan::footprint
