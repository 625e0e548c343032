#include "footprint/footprint.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "common/units.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"

namespace ftplan::footprint {

using inventory::Category;
using inventory::Lifetime;
using inventory::TensorGroup;
using plan::Tier;

double TierBytes::total() const {
  double t = 0;
  for (double b : bytes) t += b;
  return t;
}

const char* to_string(Phase p) {
  switch (p) {
    case Phase::forward: return "end of forward (loss)";
    case Phase::backward: return "start of backward";
    case Phase::backward_end: return "end of backward";
    case Phase::optimizer: return "optimizer step";
  }
  return "?";
}

namespace {

// Capacities of the plan's hardware and whether the footprint fits them.
void judge(Footprint& f, const plan::Plan& plan) {
  const plan::Cluster& c = plan.cluster;
  f.capacity_bytes = c.tier_capacities();

  std::string reason;
  for (const plan::TierInfo& t : plan::kTiers) {
    const double need = f.peak(t.tier), have = f.capacity(t.tier);
    if (need <= have) continue;
    if (!reason.empty()) reason += "; ";
    // A tier the node lacks (CXL memory without expanders; check_plan refuses placing state there).
    if (have <= 0 && !t.always) {
      reason += fmt::format("{} needs {} {} and the node has none", t.label, ftplan::format_bytes(need), t.per);
      continue;
    }
    reason += fmt::format("{} needs {} of {} {} (short by {})", t.label, ftplan::format_bytes(need),
                          ftplan::format_bytes(have), t.per, ftplan::format_bytes(need - have));
  }
  // DeepSpeed's optimizer swap takes its sub-groups' buffers from a pool of buffer_count: short of
  // them, the swapper stops the run (its assertion "ran out of swap buffers").
  if (f.optimizer_swap_buffers > plan.offload.optimizer_buffer_count) {
    if (!reason.empty()) reason += "; ";
    reason += fmt::format(
        "DeepSpeed's optimizer swap holds {} swap buffers at once ({} sub-group(s) in flight x {}: master, m, v, "
        "gradient) and offload.optimizer_buffer_count gives {}: the run stops (\"ran out of swap buffers\"); give "
        "optimizer_buffer_count: {}",
        f.optimizer_swap_buffers, f.optimizer_swap_buffers / plan::kOptimizerSwapBuffersPerSubGroup,
        plan::kOptimizerSwapBuffersPerSubGroup, plan.offload.optimizer_buffer_count, f.optimizer_swap_buffers);
  }
  f.fits = reason.empty();
  f.infeasible_reason = reason;
}

// Bytes of `g` alive at `phase`. With gradient accumulation the gradients of earlier
// micro-batches are alive from the start; without, they grow layer by layer during backward
// (the first backward layer holds one layer's share). Under GPipe every forward comes before any
// backward, so no gradient of the step is alive at the end of the forwards.
double live(const TensorGroup& g, Phase phase, std::int64_t accumulation, int layers, bool forwards_first) {
  switch (g.lifetime) {
    case Lifetime::persistent: return g.total();
    case Lifetime::gradients:
      if (forwards_first && phase == Phase::forward) return 0;
      if (accumulation > 1 || phase == Phase::backward_end || phase == Phase::optimizer) return g.total();
      return phase == Phase::backward ? g.total() / std::max(1, layers) : 0;
    case Lifetime::forward_backward: return phase == Phase::optimizer ? 0 : g.total();
    case Lifetime::saved:
      if (phase == Phase::forward || phase == Phase::backward) return g.total();
      // The last layer's backward still holds that layer's saved tensors.
      return phase == Phase::backward_end && g.per_layer ? g.bytes : 0;
    case Lifetime::layer: return phase == Phase::optimizer ? 0 : g.total();
    case Lifetime::backward_layer: return phase == Phase::backward || phase == Phase::backward_end ? g.total() : 0;
    case Lifetime::loss:
    case Lifetime::loss_peak: return phase == Phase::forward ? g.total() : 0;
    case Lifetime::optimizer: return phase == Phase::optimizer ? g.total() : 0;
  }
  return 0;
}

constexpr Phase kPhases[] = {Phase::forward, Phase::backward, Phase::backward_end, Phase::optimizer};
constexpr std::size_t kPhaseCount = std::size(kPhases);

// Each tier's bytes by category at each phase, from one pass over the inventory's groups (the
// planner judges millions of layouts by it). Paged (unified-memory) groups are not the caching
// allocator's: paged_placement places them.
struct PhaseBytes {
  plan::PerTier<std::array<TierBytes, kPhaseCount>> at{};

  explicit PhaseBytes(const inventory::Inventory& inv) {
    for (const auto& g : inv.groups) {
      if (g.paged) continue;
      auto& tier = at[plan::tier_index(g.tier)];
      const auto c = static_cast<std::size_t>(g.category);
      for (std::size_t p = 0; p < kPhaseCount; ++p)
        tier[p].bytes[c] += live(g, kPhases[p], inv.grad_accumulation, inv.layers, inv.forwards_first);
    }
  }
  const TierBytes& operator()(Tier tier, std::size_t phase) const { return at[plan::tier_index(tier)][phase]; }

  // The peak of a tier over the phases of a step, with the category split at that moment (the
  // first phase of the highest total).
  std::pair<TierBytes, Phase> peak(Tier tier) const {
    std::size_t best = 0;
    double best_total = -1;
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      const double total = (*this)(tier, p).total();
      if (total > best_total) {
        best = p;
        best_total = total;
      }
    }
    return {(*this)(tier, best), kPhases[best]};
  }
};

// The device view of the caching allocator's peak: reserved (allocated plus its slack) plus the
// memory outside it (CUDA context, NCCL, workspaces).
double device_peak(const TierBytes& gpu, double fragmentation) {
  const double overhead = gpu[Category::overhead];
  return (gpu.total() - overhead) * (1.0 + fragmentation) + overhead;
}

}  // namespace

namespace {

PagedPlacement paged_placement(const inventory::Inventory& inv, const PhaseBytes& phases, const plan::Plan& plan) {
  PagedPlacement out;
  for (const auto& g : inv.groups)
    if (g.paged && g.tier == Tier::gpu)
      out.state_bytes += live(g, Phase::optimizer, inv.grad_accumulation, inv.layers, inv.forwards_first);
  if (out.state_bytes <= 0) return out;
  // The caching allocator keeps its peak reserved for the rest of the run, and cudaMalloc'd memory
  // is never evicted: unified memory gets what the GPU has left beside it. Pages beyond that live
  // in host memory; each step's optimizer update prefetches them (bitsandbytes
  // Optimizer8bit.prefetch_state -> functional.prefetch_tensor -> cudaMemPrefetchAsync), evicting
  // as many (QLoRA paper, Dettmers et al. 2023, sec. 3 "Paged Optimizers").
  const double other = device_peak(phases.peak(Tier::gpu).first, inv.profile.fragmentation);
  out.resident_bytes = std::clamp(plan.cluster.gpu.usable_memory_bytes - other, 0.0, out.state_bytes);
  out.host_bytes = out.state_bytes - out.resident_bytes;
  return out;
}

}  // namespace

PagedPlacement paged_placement(const inventory::Inventory& inv, const plan::Plan& plan) {
  return paged_placement(inv, PhaseBytes(inv), plan);
}

Footprint footprint(const inventory::Inventory& inv, const plan::Plan& plan) {
  Footprint f;
  const PhaseBytes phases(inv);
  auto [gpu, phase] = phases.peak(Tier::gpu);
  const double overhead = gpu[Category::overhead];
  // torch.cuda's counters never see unified memory (bitsandbytes functional.get_paged wraps the
  // cudaMallocManaged pointer with torch.frombuffer): allocated and reserved exclude paged state;
  // the device view (nvidia-smi) holds what is resident.
  f.gpu_allocated_peak_bytes = gpu.total() - overhead;
  f.gpu_reserved_peak_bytes = f.gpu_allocated_peak_bytes * (1.0 + inv.profile.fragmentation);
  f.paged = paged_placement(inv, phases, plan);
  gpu.bytes[static_cast<int>(Category::optimizer)] += f.paged.resident_bytes;
  f.tiers[plan::tier_index(Tier::gpu)] = gpu;
  for (std::size_t p = 0; p < kPhaseCount; ++p) {
    TierBytes t = phases(Tier::gpu, p);
    t.bytes[static_cast<int>(Category::optimizer)] += f.paged.resident_bytes;
    for (int c = 0; c < inventory::kCategories; ++c)
      f.gpu_category_peaks.bytes[c] = std::max(f.gpu_category_peaks.bytes[c], t.bytes[c]);
  }
  f.peak_phase = phase;
  f.peak_stage = inv.stage;
  f.optimizer_swap_buffers = inv.optimizer_swap_buffers;
  f.peak_bytes[plan::tier_index(Tier::gpu)] = f.gpu_reserved_peak_bytes + overhead + f.paged.resident_bytes;

  // The node's tiers hold its ranks' shares, each at the tier's own peak; host DRAM also holds the
  // training processes and a paged optimizer's pages out of the GPU.
  for (const plan::TierInfo& t : plan::kTiers) {
    if (t.tier == Tier::gpu) continue;
    TierBytes node = phases.peak(t.tier).first;
    if (t.tier == Tier::cpu) {
      node.bytes[static_cast<int>(Category::overhead)] += inv.profile.host_process_bytes;
      node.bytes[static_cast<int>(Category::optimizer)] += f.paged.host_bytes;
    }
    for (double& b : node.bytes) b *= inv.ranks_per_node;
    f.tiers[plan::tier_index(t.tier)] = node;
    f.peak_bytes[plan::tier_index(t.tier)] = node.total();
  }

  judge(f, plan);
  return f;
}

Footprint footprint(const model::ModelSpec& model, const plan::Plan& plan) {
  Footprint worst;
  plan::PerTier<double> node{};  // the node's tiers, the most demanding stage's
  TierBytes category_peaks;
  int swap_buffers = 0;
  inventory::Inventory inv;
  for (int stage = 0; stage < std::max(1, plan.parallel.pp); ++stage) {
    inventory::build_inventory(model, plan, stage, inv);
    Footprint f = footprint(inv, plan);
    for (std::size_t t = 0; t < plan::kTierCount; ++t) node[t] = std::max(node[t], f.peak_bytes[t]);
    for (int c = 0; c < inventory::kCategories; ++c)
      category_peaks.bytes[c] = std::max(category_peaks.bytes[c], f.gpu_category_peaks.bytes[c]);
    swap_buffers = std::max(swap_buffers, f.optimizer_swap_buffers);
    if (stage == 0 || f.gpu_peak_bytes() > worst.gpu_peak_bytes()) worst = std::move(f);
  }
  worst.gpu_category_peaks = category_peaks;
  worst.optimizer_swap_buffers = swap_buffers;
  // A node hosts ranks of several stages; take the most demanding one for every rank (an upper bound).
  for (const plan::TierInfo& t : plan::kTiers)
    if (t.tier != Tier::gpu) worst.peak_bytes[plan::tier_index(t.tier)] = node[plan::tier_index(t.tier)];
  judge(worst, plan);
  return worst;
}

namespace {

// The largest n in [1, limit] with fits(n), for a `fits` that holds up to some n and not beyond
// (memory grows monotonically with the micro-batch and the sequence): double, then bisect. 0 when
// not even 1 fits.
template <class Int, class Fits>
Int largest_fitting(Int limit, const Fits& fits) {
  if (!fits(Int{1})) return 0;
  Int lo = 1, hi = 2;
  while (hi <= limit && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  hi = std::min(hi, limit + 1);
  while (hi - lo > 1) {
    const Int mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

int max_micro_batch(const model::ModelSpec& model, plan::Plan plan, int limit) {
  return largest_fitting(limit, [&](int mb) {
    plan.job.micro_batch = mb;
    plan.job.global_batch = 0;  // the question is memory, not the recipe's batch split
    return footprint(model, plan).fits;
  });
}

std::int64_t max_seq_len(const model::ModelSpec& model, plan::Plan plan) {
  constexpr std::int64_t kStep = 128;
  const std::int64_t limit = std::max<std::int64_t>(1, model.max_context / kStep);
  return kStep * largest_fitting(limit, [&](std::int64_t steps) {
           plan.job.seq_len = steps * kStep;
           return footprint(model, plan).fits;
         });
}

namespace {

// what_would_fit's search: each family of changes adds the ones after which the plan fits (and
// passes check_plan) to `out`, nearest first.
class FitSearch {
 public:
  FitSearch(const model::ModelSpec& model, const plan::Plan& plan)
      : model_(model), plan_(plan), job_(plan.job), sharding_(plan::framework_row(plan.job.framework).sharding) {}

  std::vector<FitChange> out;

  // The largest micro-batch below the plan's that splits the global batch and fits with `p`'s
  // other settings (more accumulation steps), as a change; none when no smaller one fits.
  void smaller_micro_batch(plan::Plan p, const std::string& also) {
    for (int mb = job_.micro_batch - 1; mb >= 1; --mb) {
      p.job.micro_batch = mb;
      if (!plan::splits_global_batch(p, mb) || !footprint(model_, p).fits) continue;
      consider(fmt::format("micro-batch {} ({} accumulation steps){}", mb, plan::grad_accumulation_steps(p), also), p);
      return;
    }
  }

  // Activation checkpointing; then with a smaller micro-batch too, when neither alone is enough.
  void checkpointing() {
    for (auto c : {plan::Checkpointing::selective, plan::Checkpointing::full})
      if (static_cast<int>(c) > static_cast<int>(job_.checkpointing)) {
        plan::Plan p = plan_;
        p.job.checkpointing = c;
        p.job.checkpoint_every = 1;
        consider(fmt::format("activation checkpointing {}", plan::to_string(c)), p);
      }
    if (out.empty() && job_.checkpointing != plan::Checkpointing::full) {
      plan::Plan p = plan_;
      p.job.checkpointing = plan::Checkpointing::full;
      p.job.checkpoint_every = 1;
      smaller_micro_batch(p, " and activation checkpointing full");
    }
  }

  // Sharding, as the framework does it (or FSDP, for a framework that does not shard).
  void sharding() {
    if (sharding_ == plan::Sharding::deepspeed) {
      for (int z = plan_.parallel.zero + 1; z <= 3; ++z) {
        plan::Plan p = plan_;
        p.parallel.zero = z;
        consider(fmt::format("ZeRO {}", z), p);
      }
    } else if (plan::shards_by_fsdp(sharding_)) {
      if (plan_.parallel.fsdp != plan::FsdpSharding::full_shard) {
        plan::Plan p = plan_;
        p.parallel.fsdp = plan::FsdpSharding::full_shard;
        p.parallel.zero = 0;
        consider("FSDP full_shard", p);
      }
    } else if (plan::data_parallel_degree(plan_) > 1) {
      plan::Plan p = plan_;
      p.job.framework = plan::Framework::pytorch_fsdp;
      p.parallel.zero = 0;
      p.parallel.fsdp = plan::FsdpSharding::full_shard;
      consider("framework pytorch-fsdp (FSDP full_shard)", p);
    }
  }

  // Offload presets (DeepSpeed's systems under DeepSpeed; activation offload anywhere), each where
  // the nodes have the tiers it places state on (CXL ones where they have expanders, NVMe ones
  // where they have drives).
  void offload_presets() {
    offload(plan::OffloadPreset::activation_cpu, false, 0);
    offload(plan::OffloadPreset::zero_offload, true, 2);
    offload(plan::OffloadPreset::zero_offload_cxl, true, 2);
    offload(plan::OffloadPreset::zero_infinity, true, 3);
    offload(plan::OffloadPreset::aidaptiv, true, 3);
  }

  // 16-bit state: pure bf16 (torchtune's dtype=bf16) and 8-bit Adam.
  void lighter_state() {
    if (job_.precision == plan::Precision::bf16_mixed) {
      plan::Plan p = plan_;
      p.job.precision = plan::Precision::bf16;
      consider("precision bf16 (16-bit weights, gradients and optimizer state)", p);
    }
    if (job_.optimizer.kind == plan::OptimizerKind::adamw || job_.optimizer.kind == plan::OptimizerKind::adam) {
      plan::Plan p = plan_;
      p.job.optimizer.kind = plan::OptimizerKind::adamw_8bit;
      p.job.optimizer.implementation = plan::OptimizerImpl::framework_default;
      consider("optimizer adamw-8bit", p);
    }
  }

  // More of the same GPU (state sharded or split over more ranks), up to 8x: the fewest that fit.
  void more_gpus() {
    for (int k : {2, 4, 8}) {
      plan::Plan p = plan_;
      const int gpus = plan_.cluster.gpus() * k;
      p.cluster.gpus_per_node = std::min(gpus, std::max(plan_.cluster.gpus_per_node, plan_.cluster.node.gpus));
      if (gpus % p.cluster.gpus_per_node != 0) continue;
      p.cluster.nodes = gpus / p.cluster.gpus_per_node;
      const std::size_t before = out.size();
      consider(fmt::format("{} GPUs", gpus), p);
      if (out.size() > before) break;
    }
  }

 private:
  // Keeps `p` as a change when it passes the checks and fits.
  void consider(std::string change, plan::Plan p) {
    if (p.parallel.dp > 0) p.parallel.dp = 0;  // re-derived for the changed layout
    if (!plan::check_plan(model_, p).empty()) return;
    p.parallel.dp = plan::data_parallel_degree(p);
    const Footprint f = footprint(model_, p);
    if (f.fits) out.push_back({std::move(change), std::move(p), f.gpu_peak_bytes()});
  }

  // One offload preset, with DeepSpeed and at least ZeRO `zero` when the preset is DeepSpeed's.
  void offload(plan::OffloadPreset preset, bool deepspeed, int zero) {
    if (plan_.offload.preset == preset) return;
    const plan::PerTier<double> capacity = plan_.cluster.tier_capacities();
    for (const plan::TierInfo& t : plan::kTiers)
      if (t.tier != plan::Tier::gpu && capacity[plan::tier_index(t.tier)] <= 0 &&
          plan::preset_places_on(preset, t.tier))
        return;
    plan::Plan p = plan_;
    std::string change = std::string("offload ") + plan::to_string(preset);
    if (deepspeed && sharding_ != plan::Sharding::deepspeed) {
      p.job.framework = plan::Framework::deepspeed;
      change += " (framework deepspeed)";
    }
    if (deepspeed && p.parallel.zero < zero) {
      p.parallel.zero = zero;
      change += fmt::format(" with ZeRO {}", zero);
    }
    p.offload = plan::Offload{};
    p.offload.preset = preset;
    plan::apply_preset(p.offload);
    consider(change, p);
  }

  const model::ModelSpec& model_;
  const plan::Plan& plan_;
  const plan::Job& job_;
  const plan::Sharding sharding_;
};

}  // namespace

std::vector<FitChange> what_would_fit(const model::ModelSpec& model, const plan::Plan& plan) {
  if (footprint(model, plan).fits) return {};
  // Nearest first: what leaves the job and the hardware as they are, then sharding, offload,
  // lighter state, more GPUs.
  FitSearch search(model, plan);
  search.smaller_micro_batch(plan, "");
  search.checkpointing();
  search.sharding();
  search.offload_presets();
  search.lighter_state();
  search.more_gpus();
  return std::move(search.out);
}

}  // namespace ftplan::footprint
