#include "planner/planner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "common/error.hpp"
#include "evaluate/pool.hpp"
#include "footprint/footprint.hpp"
#include "plan/checks.hpp"
#include "plan/cluster.hpp"
#include "plan/framework.hpp"

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

// A plan without a price ranks after every priced one on cost (cost::CostReport::unpriced).
double cost_rank(const evaluate::Evaluation& e) {
  return e.cost.priced() ? e.cost.cost_usd : std::numeric_limits<double>::infinity();
}

bool better_or_equal(const evaluate::Evaluation& a, const evaluate::Evaluation& b) {
  return a.cost.job_time_s <= b.cost.job_time_s && cost_rank(a) <= cost_rank(b) &&
         a.power.peak_power_w <= b.power.peak_power_w;
}

bool strictly_better_somewhere(const evaluate::Evaluation& a, const evaluate::Evaluation& b) {
  return a.cost.job_time_s < b.cost.job_time_s || cost_rank(a) < cost_rank(b) ||
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

namespace {

// One cluster the search tries (GPU type, count, DRAM, devices per node), resolved once; layouts
// refer to it.
struct Base {
  plan::Plan plan;
  std::string gpu_name;
  int gpus = 0;
  double dram = 0;
  std::vector<int> devices;  // per SearchSpace::devices axis: the count tried
};

// The tier each of the space's device axes backs (plan::kDeviceKinds).
std::vector<plan::Tier> axis_tiers(const SearchSpace& space) {
  std::vector<plan::Tier> out;
  for (const auto& axis : space.devices) {
    const std::optional<plan::Tier> tier = plan::device_tier(axis.kind);
    FTPLAN_ASSERT(tier.has_value(), "a search's device axis is a kind of device that backs a tier (scenario reader)");
    out.push_back(*tier);
  }
  return out;
}

// One layout on a base: the degrees and recipe choices. Small: a search may hold millions.
struct Layout {
  int base = 0;
  int tp = 1, pp = 1, zero = 0, mb = 1, vs = 1;
  bool sp = false;
  plan::Checkpointing ckpt = plan::Checkpointing::none;
  OffloadPreset off = OffloadPreset::none;
};

plan::Plan plan_of(const model::ModelSpec& model, const std::vector<plan::Tier>& tiers, const Base& b, const Layout& l,
                   bool fsdp) {
  plan::Plan p = b.plan;
  // The name says the whole layout, the framework included: the same degrees under another
  // framework are another plan (issue 41: a search row read as compare's DeepSpeed plan).
  p.name = fmt::format("{}x {} {} tp{}{} pp{}{} zero{} mb{} {}{}{}", b.gpus, b.gpu_name,
                       plan::framework_row(b.plan.job.framework).name, l.tp, l.sp ? " sp" : "", l.pp,
                       l.vs > 1 ? fmt::format(" v{}", l.vs) : std::string(), l.zero, l.mb, plan::to_string(l.ckpt),
                       l.off == OffloadPreset::none ? "" : std::string(" ") + plan::to_string(l.off),
                       b.dram > 0 ? fmt::format(" {:.0f}GiB", b.dram / (1u << 30)) : std::string());
  for (std::size_t i = 0; i < tiers.size(); ++i)
    if (plan::preset_places_on(l.off, tiers[i]))
      p.name += fmt::format(" {}{}", b.devices[i], plan::tier_info(tiers[i]).row);
  p.parallel.tp = l.tp;
  p.parallel.pp = l.pp;
  p.parallel.sequence_parallel = l.sp;
  if (l.vs > 1) {
    p.parallel.schedule = plan::PipelineSchedule::interleaved;
    p.parallel.virtual_stages = l.vs;
  }
  // A pipeline's last stage also runs the LM head and the loss: give it fewer layers so that its
  // work matches the others' (as Megatron users set decoder_last_pipeline_num_layers), when that
  // makes the busiest stage at least 3% lighter (balanced_last_stage).
  if (const int last = l.vs > 1 ? 0 : balanced_last_stage(model, l.pp); last > 0) {
    p.parallel.first_stage_layers = model.total_layers() / l.pp;
    p.parallel.last_stage_layers = last;
    p.name += fmt::format(" last{}", last);
  }
  p.parallel.dp = 0;
  p.parallel.zero = l.zero;
  if (fsdp)
    p.parallel.fsdp = l.zero >= 3   ? plan::FsdpSharding::full_shard
                      : l.zero == 2 ? plan::FsdpSharding::shard_grad_op
                                    : plan::FsdpSharding::no_shard;
  p.job.micro_batch = l.mb;
  p.job.checkpointing = l.ckpt;
  p.job.open_knobs_chosen = true;  // by the search, from its lists (a job's `auto` is one of them)
  p.offload = plan::Offload{};
  p.offload.preset = l.off;
  plan::apply_preset(p.offload);
  return p;
}

}  // namespace

namespace {

// Every layout the space holds (cheap: no plan is built yet), on the clusters it names.
struct Enumerated {
  std::vector<Base> bases;
  std::vector<Layout> layouts;
  std::vector<plan::Tier> tiers;  // per SearchSpace::devices axis, the tier it backs
};

// The layouts of one cluster: every combination of the space's degrees and recipe choices that
// makes sense on it.
void add_layouts(const SearchSpace& space, const std::vector<plan::Tier>& tiers, int base, const Base& b,
                 double first_dram, std::vector<Layout>& out) {
  for (int tp : space.tp)
    for (bool sp : space.sequence_parallel)
      for (int pp : space.pp)
        for (int vs : space.virtual_stages)
          for (int zero : space.zero)
            for (int mb : space.micro_batch)
              for (auto ckpt : space.checkpointing)
                for (auto off : space.offload) {
                  if (static_cast<std::int64_t>(tp) * pp > b.gpus) continue;
                  // Sequence parallelism needs tensor parallelism, virtual stages a pipeline.
                  if ((sp && tp == 1) || (vs > 1 && pp == 1)) continue;
                  // Placements on a device's tier vary with its count (none: nowhere to place it),
                  // others only with the first; CPU ones only with DRAM.
                  bool skip = false;
                  for (std::size_t i = 0; i < tiers.size(); ++i)
                    skip = skip ||
                           (plan::preset_places_on(off, tiers[i]) ? b.devices[i] == 0
                                                                  : b.devices[i] != space.devices[i].counts.front());
                  if (skip) continue;
                  if (off == OffloadPreset::none && b.dram > 0 && b.dram != first_dram) continue;
                  out.push_back({base, tp, pp, zero, mb, vs, sp, ckpt, off});
                }
}

// Sets `node`'s devices of the space's axes to `counts` (one per axis): the named device, or the
// node's own first of that kind (a node without one keeps none).
void set_devices(const SearchSpace& space, const std::vector<int>& counts, hardware::NodeSpec& node) {
  for (std::size_t i = 0; i < counts.size(); ++i)
    plan::for_each_device_kind([&](const auto& kind) {
      if (space.devices[i].kind != kind.key) return;
      std::vector<hardware::DeviceCount>& listed = node.*kind.in_node;
      std::string name = space.devices[i].name;
      if (name.empty() && !listed.empty()) name = listed.front().name;
      if (name.empty()) return;
      listed.clear();
      if (counts[i] > 0) listed.push_back({name, counts[i]});
    });
}

Enumerated enumerate(const plan::Job& job, const hardware::Catalog& catalog, const SearchSpace& space,
                     const Constraints& k, const plan::CostSpec& cost) {
  Enumerated e;
  const std::vector<double> drams = space.dram_bytes.empty() ? std::vector<double>{0.0} : space.dram_bytes;
  e.tiers = axis_tiers(space);
  const std::vector<plan::Tier>& tiers = e.tiers;
  // Every combination of the device axes' counts, the first axis slowest.
  std::vector<std::vector<int>> device_counts = {{}};
  for (const auto& axis : space.devices) {
    std::vector<std::vector<int>> next;
    for (const auto& head : device_counts)
      for (int n : axis.counts) {
        next.push_back(head);
        next.back().push_back(n);
      }
    device_counts = std::move(next);
  }
  for (const auto& gpu_name : space.gpus) {
    const hardware::NodeSpec* typical = catalog.default_node_for(gpu_name);
    if (!typical) continue;
    for (int gpus : space.gpu_counts) {
      if (k.max_gpus > 0 && gpus > k.max_gpus) continue;
      const int per_node = std::min(gpus, typical->gpus);
      if (gpus % per_node != 0) continue;
      for (double dram : drams)
        for (const auto& counts : device_counts) {
          Base b;
          hardware::NodeSpec node = *typical;
          if (dram > 0) node.dram_bytes = dram;
          set_devices(space, counts, node);
          b.plan.job = job;
          b.plan.cost = cost;
          if (!plan::resolve_cluster(catalog, node, gpus / per_node, per_node, b.plan.cluster).empty()) continue;
          b.gpu_name = gpu_name;
          b.gpus = gpus;
          b.dram = dram;
          b.devices = counts;
          add_layouts(space, tiers, static_cast<int>(e.bases.size()), b, drams.front(), e.layouts);
          e.bases.push_back(std::move(b));
        }
    }
  }
  return e;
}

// Why a layout is not simulated: its plan fails the checks, repeats another, or does not fit.
enum class Screen { simulate, invalid, duplicate, pruned };

Screen screen(const model::ModelSpec& model, const Layout& l, plan::Plan& p) {
  if (!plan::check_plan(model, p).empty()) return Screen::invalid;
  // One data-parallel rank has nothing to shard: ZeRO 1-3 without offload are the ZeRO 0 layout
  // again (offload presets need their stage, so those stay).
  if (l.zero > 0 && l.off == OffloadPreset::none && plan::data_parallel_degree(p) == 1) return Screen::duplicate;
  p.parallel.dp = plan::data_parallel_degree(p);
  if (!footprint::footprint(model, p).fits) return Screen::pruned;
  return Screen::simulate;
}

// A plan whose checks, footprint or evaluation threw: a failed candidate, with the reason.
void mark_failed(Candidate& c, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    c.error = e.what();
  } catch (...) {
    c.error = "unknown exception";
  }
  c.evaluation = evaluate::Evaluation{};
  c.evaluation.memory.fits = false;
  c.evaluation.memory.infeasible_reason = "could not be evaluated: " + c.error;
  c.meets_constraints = false;
}

// Each layout on a worker; each plan is self-contained, the model read-only. A plan whose
// evaluation throws is that plan's failure (evaluate::for_each), not the search's. Fills the
// result's counts and candidates (in layout order).
void run_layouts(const model::ModelSpec& model, const Enumerated& en, bool fsdp, const Constraints& k, int threads,
                 const Control& control, Result& result) {
  const auto plan_at = [&](std::size_t i) {
    return plan_of(model, en.tiers, en.bases[static_cast<std::size_t>(en.layouts[i].base)], en.layouts[i], fsdp);
  };
  std::vector<std::unique_ptr<Candidate>> slots(en.layouts.size());
  std::atomic<std::int64_t> invalid{0}, duplicates{0}, pruned{0}, simulated{0}, examined{0};
  std::mutex report;
  const auto progress = [&] {
    const std::int64_t done = ++examined;
    if (!control.progress) return;
    const std::unique_lock lock(report, std::try_to_lock);  // one reporter at a time; the others go on
    if (lock.owns_lock()) control.progress(done, result.enumerated, simulated.load());
  };
  const std::size_t ran = evaluate::for_each(
      en.layouts.size(), threads,
      [&](std::size_t i) {
        auto c = std::make_unique<Candidate>();
        c->plan = plan_at(i);
        switch (screen(model, en.layouts[i], c->plan)) {
          case Screen::invalid: ++invalid; return progress();
          case Screen::duplicate: ++duplicates; return progress();
          case Screen::pruned: ++pruned; return progress();
          case Screen::simulate: break;
        }
        // Counted before evaluating: a plan that throws is still a simulated candidate (failed).
        ++simulated;
        slots[i] = std::move(c);
        Candidate& s = *slots[i];
        s.evaluation = control.evaluate ? control.evaluate(s.plan) : evaluate::evaluate_plan(model, s.plan);
        // The activity timeline has served the power model; a search may keep millions of plans.
        s.evaluation.step.timeline = {};
        s.meets_constraints = evaluate::meets_constraints(k, s.plan, s.evaluation);
        progress();
      },
      [&](std::size_t i, std::exception_ptr error) {
        if (!slots[i]) {  // the checks or the footprint threw: the plan is a failed candidate all the same
          slots[i] = std::make_unique<Candidate>();
          slots[i]->plan = plan_at(i);
          ++simulated;
        }
        mark_failed(*slots[i], error);
        progress();
      },
      control.stop);
  result.interrupted = ran < en.layouts.size();
  result.invalid = invalid;
  result.duplicates = duplicates;
  result.pruned_memory = pruned;
  result.simulated = simulated;
  result.examined = examined;
  for (auto& slot : slots)
    if (slot) {
      if (!slot->error.empty()) ++result.failed;
      result.candidates.push_back(std::move(*slot));
    }
}

// The Pareto front and the best plan by each measure, among those that meet the constraints.
void pick_best(Result& result) {
  result.pareto = pareto_front(result.candidates);
  const auto pick = [&](auto key, bool needs_price = false) {
    int best = -1;
    for (std::size_t i = 0; i < result.candidates.size(); ++i) {
      if (!result.candidates[i].meets_constraints) continue;
      if (needs_price && !result.candidates[i].evaluation.cost.priced()) continue;
      if (best < 0 || key(result.candidates[i]) < key(result.candidates[best])) best = static_cast<int>(i);
    }
    return best;
  };
  result.fastest = pick([](const Candidate& c) { return c.evaluation.cost.job_time_s; });
  result.cheapest = pick([](const Candidate& c) { return c.evaluation.cost.cost_usd; }, true);
  result.lowest_power = pick([](const Candidate& c) { return c.evaluation.power.peak_power_w; });
  result.fewest_gpus = pick([](const Candidate& c) {
    return static_cast<double>(c.plan.cluster.gpus()) * 1e12 + c.evaluation.cost.job_time_s;  // ties: faster
  });
}

}  // namespace

Result search(const model::ModelSpec& model, const plan::Job& job, const hardware::Catalog& catalog,
              const SearchSpace& space, const Constraints& k, const plan::CostSpec& cost, int threads,
              const Control& control) {
  const auto t0 = std::chrono::steady_clock::now();
  Result result;
  const bool fsdp = plan::shards_by_fsdp(plan::framework_row(job.framework).sharding);
  // Enumerate the layouts, then check, size and simulate them on the workers, so that the first
  // plans are simulated at once and an interruption keeps them.
  const Enumerated en = enumerate(job, catalog, space, k, cost);
  result.enumerated = static_cast<std::int64_t>(en.layouts.size());
  run_layouts(model, en, fsdp, k, threads, control, result);
  pick_best(result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace ftplan::planner
