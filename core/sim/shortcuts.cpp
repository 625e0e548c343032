#include "sim/lowering.hpp"

namespace ftplan::sim {


namespace detail {

namespace {

// Pipelines from this many stages are simulated shortened (shortened_pipeline).
constexpr int kShortenFromStages = 6;

}  // namespace

StageRun extrapolate_run(const StageRun& main, const std::vector<std::pair<const StageRun*, double>>& others) {
  StageRun out = main;
  for (const auto& [o, w] : others) {
    out.step_s += w * (main.step_s - o->step_s);
    out.compute_s += w * (main.compute_s - o->compute_s);
    out.exposed_comm_s += w * (main.exposed_comm_s - o->exposed_comm_s);
    out.nvme_written += w * (main.nvme_written - o->nvme_written);
    for (std::size_t i = 0; i < out.streams.size(); ++i) {
      const auto it = std::find_if(o->streams.begin(), o->streams.end(), [&](const StreamUse& x) { return x.name == main.streams[i].name; });
      out.streams[i].busy_s += w * (main.streams[i].busy_s - (it == o->streams.end() ? 0.0 : it->busy_s));
    }
    for (std::size_t i = 0; i < out.links.size(); ++i) {
      const auto it = std::find_if(o->links.begin(), o->links.end(), [&](const LinkUse& x) { return x.name == main.links[i].name; });
      out.links[i].bytes += w * (main.links[i].bytes - (it == o->links.end() ? 0.0 : it->bytes));
      out.links[i].busy_s += w * (main.links[i].busy_s - (it == o->links.end() ? 0.0 : it->busy_s));
    }
  }
  for (auto& st : out.streams) st.utilization = out.step_s > 0 ? st.busy_s / out.step_s : 0;
  for (auto& l : out.links) l.utilization = out.step_s > 0 ? l.busy_s / out.step_s : 0;
  return out;
}

double comm_busy_s(const StageRun& run) {
  double busy = 0;
  for (const auto& st : run.streams)
    if (st.name.ends_with("comm") || st.name.ends_with("comm-reduce")) busy = std::max(busy, st.busy_s);
  return busy;
}

double sm_sharing_slowdown(const Efficiency& eff, int sms, double comm_busy, double step_s) {
  const double overlap = step_s > 0 ? std::min(1.0, comm_busy / step_s) : 0.0;
  return 1.0 / (1.0 - overlap * std::min(0.5, static_cast<double>(eff.nccl_sms) / sms));
}

std::optional<Simulated> shortened_pipeline(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                                            const Efficiency& eff, std::int64_t accumulation, bool multi_gpu) {
  const int pp = std::max(1, p.parallel.pp);
  const bool interleaved = p.parallel.schedule == plan::PipelineSchedule::interleaved && p.parallel.virtual_stages > 1;
  if (options.fidelity != Options::Fidelity::representative || options.trace || options.max_micro_batches <= 0 ||
      pp < kShortenFromStages || p.parallel.schedule == plan::PipelineSchedule::gpipe || accumulation < pp ||
      m.architecture == model::Architecture::encoder_decoder)
    return std::nullopt;
  // Interleaved 1F1B runs micro-batches in groups of pp (Megatron requires whole groups): the
  // short pipelines' counts are whole groups of 3 and of 4 stages, and the plan's of pp.
  if (interleaved && accumulation % pp != 0) return std::nullopt;
  // The middle stages' layers, chunk by chunk and kind by kind (MoE or dense, local or global attention).
  const int chunks = interleaved ? p.parallel.virtual_stages : 1;
  std::vector<int> first_middle;
  std::vector<int> begin;
  for (int s = 1; s < pp - 1; ++s) {
    std::vector<int> kinds;
    const std::vector<int> layers = inventory::stage_layer_list(m, p, s, &begin);
    for (int c = 0; c < chunks; ++c) {
      kinds.push_back(begin[c] - begin[c + 1]);
      for (int i = begin[c]; i < begin[c + 1]; ++i) {
        const int l = layers[i];
        kinds.push_back((l < m.layers && m.is_moe_layer(l) ? 1 : 0) | (l < m.layers && m.is_local_layer(l) ? 2 : 0));
      }
    }
    if (s == 1) first_middle = std::move(kinds);
    else if (kinds != first_middle) return std::nullopt;
  }
  const int k_long = static_cast<int>(std::min<std::int64_t>(accumulation, interleaved ? 12 : 8));
  const int k_short = interleaved ? 8 : 4;
  if (interleaved && accumulation < 12) return std::nullopt;
  struct Shape {
    std::vector<int> real;  // the plan's stage at each position
    int micro;
  };
  const Shape shapes[3] = {{{0, 1, 2, pp - 1}, k_long}, {{0, 1, pp - 1}, k_long}, {{0, 1, 2, pp - 1}, k_short}};
  // The three runs extrapolate one stage's figures: their busiest stages must be the same plan stage.
  const auto same_stage = [&](const int(&stage)[3]) {
    return shapes[1].real[stage[1]] == shapes[0].real[stage[0]] && shapes[2].real[stage[2]] == shapes[0].real[stage[0]];
  };
  const double w_stages = pp - 4;
  const double w_micro = static_cast<double>(accumulation - k_long) / (k_long - k_short);
  std::map<int, inventory::Inventory> inventories;
  for (int s : shapes[0].real) inventories.emplace(s, inventory::build_inventory(m, p, s));
  std::vector<schedule::StepIR> irs[3];
  for (int i = 0; i < 3; ++i) {
    const int q = static_cast<int>(shapes[i].real.size());
    for (int pos = 0; pos < q; ++pos) {
      irs[i].push_back(schedule::build_step(m, p, inventories.at(shapes[i].real[pos]), shapes[i].micro, false,
                                            schedule::PipelineView{q, pos}));
      if (schedule::nvme_written_bytes(irs[i].back()) > 0) return std::nullopt;
    }
  }
  std::vector<LoweredStep> steps;
  for (int i = 0; i < 3; ++i) steps.push_back(lower_step(p, eff, false, irs[i], 1.0, false, shapes[i].real));
  if (multi_gpu) {
    StageRun probe[3];
    int stage[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) probe[i] = collect_step(steps[i], steps[i].e.run(), irs[i], stage[i], false, false);
    if (!same_stage(stage)) return std::nullopt;
    const StageRun whole = extrapolate_run(probe[0], {{&probe[1], w_stages}, {&probe[2], w_micro}});
    const double slowdown = sm_sharing_slowdown(eff, p.cluster.gpu.sm_count, comm_busy_s(whole), whole.step_s);
    for (int i = 0; i < 3; ++i) retime_step(steps[i], irs[i], slowdown);
  }
  StageRun run[3];
  int stage[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    run[i] = collect_step(steps[i], steps[i].e.run(), irs[i], stage[i], true, false, true);
    if (!run[i].problem.empty()) return std::nullopt;
  }
  if (!same_stage(stage)) return std::nullopt;
  Simulated sim;
  sim.run = extrapolate_run(run[0], {{&run[1], w_stages}, {&run[2], w_micro}});
  // Memory: positions 0 and 1 of A are the plan's stages 0 and 1 (B's too); the last position is
  // the plan's last stage.
  const std::array<double, 3> capacity = pool_capacities(p.cluster);
  const auto& a = run[0].stage_peaks;
  const auto& b = run[1].stage_peaks;
  for (int t = 0; t < 3; ++t) {
    // The last stage holds one micro-batch whatever the depth: A's own. The first and the first
    // middle stage hold one more per further stage through their steady state: A's, raised by
    // what one more stage in front adds (A's held bytes over B's as the first backward starts).
    double peak = std::max(a.back().steady[t], a.back().ramp[t]);
    for (const auto& x : a) peak = std::max(peak, x.after[t]);
    for (int pos : {0, 1})
      peak = std::max({peak, a[pos].ramp[t], a[pos].steady[t] + w_stages * (a[pos].held[t] - b[pos].held[t])});
    if (peak > 0.98 * capacity[t]) return std::nullopt;
    sim.run.peak[t] = peak;
  }
  const schedule::StepIR &ia = irs[0][stage[0]], &ib = irs[1][stage[1]], &ic = irs[2][stage[2]];
  const auto more = [&](double fa, double fb, double fc) { return fa + w_stages * (fa - fb) + w_micro * (fa - fc); };
  sim.model_flops = more(ia.model_flops_per_rank, ib.model_flops_per_rank, ic.model_flops_per_rank);
  sim.hardware_flops = more(ia.hardware_flops_per_rank, ib.hardware_flops_per_rank, ic.hardware_flops_per_rank);
  sim.frozen_grad_flops = more(ia.frozen_weight_grad_flops_per_rank, ib.frozen_weight_grad_flops_per_rank,
                               ic.frozen_weight_grad_flops_per_rank);
  sim.stage = shapes[0].real[stage[0]];
  sim.timeline.intervals = run[0].intervals;
  sim.timeline.step_s = run[0].step_s;
  sim.timeline.partials.push_back({std::move(run[1].intervals), run[1].step_s, w_stages});
  sim.timeline.partials.push_back({std::move(run[2].intervals), run[2].step_s, w_micro});
  return sim;
}

}  // namespace detail

}  // namespace ftplan::sim
