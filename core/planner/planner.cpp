#include "planner/planner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "footprint/footprint.hpp"
#include "plan/checks.hpp"
#include "plan/cluster.hpp"

namespace ftplan::planner {

// Layers for the last of `pp` pipeline stages so that they and the LM head cost about what an
// even stage costs: per token the head multiplies hidden x vocab weights, a layer its matmul
// weights (2 FLOPs per weight per token either way, forward and backward alike). The layers it
// gives up go to the middle stages, not the first (which holds the most micro-batches in flight
// under 1F1B). 0 = keep the even split: no pipeline, no head, or the busiest stage would not get
// at least 3% lighter.
int balanced_last_stage(const model::ModelSpec& m, int pp) {
  if (pp < 3 || !m.has_lm_head() || m.layers < 1) return 0;
  const double layer = static_cast<double>(model::layer_params(m, 0).active_matmul);
  if (layer <= 0) return 0;
  const double head = static_cast<double>(m.hidden) * static_cast<double>(m.vocab) / layer;  // in layers
  const int total = m.total_layers();
  const int base = total / pp;
  const int last = std::max(1, static_cast<int>(std::lround(static_cast<double>(total) / pp - head)));
  if (last >= base) return 0;
  // Busiest stage, in layers: even split (earlier stages take the remainder) against first = base,
  // last = `last`, the rest over the pp - 2 middle stages.
  const double even = std::max<double>(base + (total % pp ? 1 : 0), base + head);
  const int middle = total - base - last;
  const double balanced =
      std::max({static_cast<double>(base), last + head, std::ceil(static_cast<double>(middle) / (pp - 2))});
  return balanced < 0.97 * even ? last : 0;
}

using plan::OffloadPreset;
using plan::Tier;

namespace {

bool better_or_equal(const io::Evaluation& a, const io::Evaluation& b) {
  return a.cost.job_time_s <= b.cost.job_time_s && a.cost.cost_usd <= b.cost.cost_usd &&
         a.power.peak_power_w <= b.power.peak_power_w;
}

bool strictly_better_somewhere(const io::Evaluation& a, const io::Evaluation& b) {
  return a.cost.job_time_s < b.cost.job_time_s || a.cost.cost_usd < b.cost.cost_usd ||
         a.power.peak_power_w < b.power.peak_power_w;
}

}  // namespace

std::vector<int> pareto_front(const std::vector<Candidate>& c) {
  std::vector<int> front;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (!c[i].evaluation.feasible()) continue;
    bool dominated = false;
    for (std::size_t j = 0; j < c.size() && !dominated; ++j)
      dominated = j != i && c[j].evaluation.feasible() && better_or_equal(c[j].evaluation, c[i].evaluation) &&
                  strictly_better_somewhere(c[j].evaluation, c[i].evaluation);
    if (!dominated) front.push_back(static_cast<int>(i));
  }
  return front;
}

Result search(const model::ModelSpec& model, const plan::Job& job, const hardware::Catalog& catalog,
              const SearchSpace& space, const Constraints& k, const plan::CostSpec& cost, int threads) {
  const auto t0 = std::chrono::steady_clock::now();
  Result result;
  std::vector<plan::Plan> survivors;
  const bool fsdp = job.framework == plan::Framework::pytorch_fsdp || job.framework == plan::Framework::pytorch_fsdp2 ||
                    job.framework == plan::Framework::torchtune || job.framework == plan::Framework::yafsdp;

  for (const auto& gpu_name : space.gpus) {
    const hardware::NodeSpec* typical = catalog.default_node_for(gpu_name);
    if (!typical) continue;
    const std::vector<double> drams = space.dram_bytes.empty() ? std::vector<double>{0.0} : space.dram_bytes;
    const std::vector<int> drive_counts = space.drive_counts.empty() ? std::vector<int>{-1} : space.drive_counts;
    for (int gpus : space.gpu_counts) {
      if (k.max_gpus > 0 && gpus > k.max_gpus) continue;
      const int per_node = std::min(gpus, typical->gpus);
      if (gpus % per_node != 0) continue;
      for (double dram : drams)
        for (int drives : drive_counts) {
          hardware::NodeSpec node = *typical;
          if (dram > 0) node.dram_bytes = dram;
          if (drives >= 0 && !node.drives.empty()) node.drives = {{node.drives.front().name, drives}};
          plan::Plan base;
          base.job = job;
          base.cost = cost;
          if (!plan::resolve_cluster(catalog, node, gpus / per_node, per_node, base.cluster).empty()) continue;
          for (int tp : space.tp)
            for (int pp : space.pp)
              for (int zero : space.zero)
                for (int mb : space.micro_batch)
                  for (auto ckpt : space.checkpointing)
                    for (auto off : space.offload) {
                      if (tp * pp > gpus) continue;
                      // NVMe placements only vary with the drive count; CPU ones only with DRAM.
                      const bool nvme = off == OffloadPreset::zero_infinity || off == OffloadPreset::aidaptiv ||
                                        off == OffloadPreset::activation_nvme;
                      if (!nvme && drives >= 0 && drives != drive_counts.front()) continue;
                      if (off == OffloadPreset::none && dram > 0 && dram != drams.front()) continue;
                      ++result.enumerated;
                      plan::Plan p = base;
                      p.name = fmt::format("{}x {} tp{} pp{} zero{} mb{} {}{}{}", gpus, gpu_name, tp, pp, zero, mb,
                                           plan::to_string(ckpt),
                                           off == OffloadPreset::none ? "" : std::string(" ") + plan::to_string(off),
                                           dram > 0 ? fmt::format(" {:.0f}GiB", dram / (1u << 30)) : std::string());
                      if (drives >= 0 && nvme) p.name += fmt::format(" {}nvme", drives);
                      p.parallel.tp = tp;
                      p.parallel.pp = pp;
                      // A pipeline's last stage also runs the LM head and the loss: give it fewer
                      // layers so that its work matches the others' (as Megatron users set
                      // decoder_last_pipeline_num_layers), when that makes the busiest stage at least 3%
                      // lighter (balanced_last_stage).
                      if (const int last = balanced_last_stage(model, pp); last > 0) {
                        p.parallel.first_stage_layers = model.total_layers() / pp;
                        p.parallel.last_stage_layers = last;
                        p.name += fmt::format(" last{}", last);
                      }
                      p.parallel.dp = 0;
                      p.parallel.zero = zero;
                      if (fsdp)
                        p.parallel.fsdp = zero >= 3   ? plan::FsdpSharding::full_shard
                                          : zero == 2 ? plan::FsdpSharding::shard_grad_op
                                                      : plan::FsdpSharding::no_shard;
                      p.job.micro_batch = mb;
                      p.job.checkpointing = ckpt;
                      p.offload = plan::Offload{};
                      p.offload.preset = off;
                      plan::apply_preset(p.offload);
                      if (!plan::check_plan(model, p).empty()) {
                        ++result.invalid;
                        continue;
                      }
                      // One data-parallel rank has nothing to shard: ZeRO 1-3 without offload are the
                      // ZeRO 0 layout again (offload presets need their stage, so those stay).
                      if (zero > 0 && off == OffloadPreset::none && plan::data_parallel_degree(p) == 1) {
                        ++result.duplicates;
                        continue;
                      }
                      p.parallel.dp = plan::data_parallel_degree(p);
                      if (!footprint::footprint(model, p).fits) {
                        ++result.pruned_memory;
                        continue;
                      }
                      survivors.push_back(std::move(p));
                    }
        }
    }
  }

  // Simulate the survivors on all cores; each plan is self-contained, the model read-only.
  result.candidates.resize(survivors.size());
  const int n = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < n; ++t)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < survivors.size(); i = next++) {
        Candidate c;
        c.plan = survivors[i];
        c.evaluation = io::evaluate(model, c.plan);
        const auto& e = c.evaluation;
        c.meets_constraints = e.feasible() && (k.deadline_s <= 0 || e.cost.job_time_s <= k.deadline_s) &&
                              (k.budget_usd <= 0 || e.cost.cost_usd <= k.budget_usd) &&
                              (k.peak_power_w <= 0 || e.power.peak_power_w <= k.peak_power_w);
        result.candidates[i] = std::move(c);
      }
    });
  for (auto& t : pool) t.join();
  result.simulated = static_cast<std::int64_t>(survivors.size());

  result.pareto = pareto_front(result.candidates);
  const auto pick = [&](auto key) {
    int best = -1;
    for (std::size_t i = 0; i < result.candidates.size(); ++i) {
      if (!result.candidates[i].meets_constraints) continue;
      if (best < 0 || key(result.candidates[i]) < key(result.candidates[best])) best = static_cast<int>(i);
    }
    return best;
  };
  result.fastest = pick([](const Candidate& c) { return c.evaluation.cost.job_time_s; });
  result.cheapest = pick([](const Candidate& c) { return c.evaluation.cost.cost_usd; });
  result.lowest_power = pick([](const Candidate& c) { return c.evaluation.power.peak_power_w; });
  result.fewest_gpus = pick([](const Candidate& c) {
    return static_cast<double>(c.plan.cluster.gpus()) * 1e12 + c.evaluation.cost.job_time_s;  // ties: faster
  });
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace ftplan::planner
