#include <algorithm>
#include <utility>
#include <vector>

#include "sim/lowering.hpp"

namespace ftplan::sim {

using namespace detail;

namespace {

// Steady-state shortcut: simulate k1 and k2 < k1 micro-batches and extrapolate linearly. Without
// a pipeline k1 = k, k2 = k - 1. A pipeline's step is linear in the micro-batch count only once
// its warm-up and cool-down are whole ((m + pp - 1) slots for 1F1B; Narayanan et al. 2021
// sec. 2.2): k2 is the first multiple of pp at or above k and pp, k1 = k2 + pp (whole groups,
// as interleaved schedules need).
struct MicroBatchShortcut {
  bool on = false;
  int k1 = 0, k2 = 0;
  // Under the shortcut every additive figure is extrapolated: f(n) = f(k1) + repeats (f(k1) -
  // f(k2)) (sim/timeline.hpp).
  double repeats = 0;
  std::optional<std::pair<int, int>> counts() const { return on ? std::optional(std::pair{k1, k2}) : std::nullopt; }
};

MicroBatchShortcut micro_batch_shortcut(const plan::Plan& p, const Options& options, std::int64_t accumulation) {
  const int pp = std::max(1, p.parallel.pp);
  // A trace (or the GUI's timeline) shows the whole step: every micro-batch simulated, whatever
  // the caller asked of the shortcut (the stage and layer shortcuts likewise step aside for it).
  const int k = options.trace ? 0 : options.max_micro_batches;
  MicroBatchShortcut s;
  s.k1 = k;
  s.k2 = k - 1;
  if (pp > 1 && k > 0) {
    s.k2 = pp * ((std::max(k, pp) + pp - 1) / pp);
    s.k1 = s.k2 + pp;
  }
  // Not for GPipe: it holds every micro-batch's activations at once, so its memory peak (not an
  // additive figure) grows with the count (1F1B holds at most pp, which k2 >= pp covers). Taken
  // only where it saves work: simulating k1 + k2 micro-batches instead of all of them.
  s.on = k >= 2 && accumulation > s.k1 + s.k2 && !(pp > 1 && p.parallel.schedule == plan::PipelineSchedule::gpipe);
  s.repeats = s.on ? static_cast<double>(accumulation - s.k1) / (s.k1 - s.k2) : 0.0;
  return s;
}

// Why a step is not simulated: full fidelity over too many ranks, or IRs too large to hold (each
// holds every op of the micro-batches it builds, and full fidelity lowers them once per rank:
// refused at schedule::kMaxLayerPasses rather than exhausting memory). Empty: simulate it.
std::string refusal(const model::ModelSpec& m, const plan::Plan& p, bool full, const MicroBatchShortcut& mb) {
  if (full && p.cluster.gpus() > kMaxFullRanks)
    return fmt::format(
        "full fidelity simulates every rank; {} ranks are more than its limit of {} (use the default, "
        "representative fidelity)",
        p.cluster.gpus(), kMaxFullRanks);
  std::string why = schedule::too_large(m, p, mb.on ? mb.k1 : 0);
  const std::int64_t copies = full ? static_cast<std::int64_t>(plan::RankLayout(p).stage_ranks()) : 1;
  const std::int64_t passes = schedule::layer_passes(m, p, mb.on ? mb.k1 : 0);
  if (why.empty() && passes * copies > schedule::kMaxLayerPasses)
    why = fmt::format(
        "not simulated: full fidelity holds {} ranks' copies of a step of {} layer passes, more than "
        "ftplan's limit of {} (use the default, representative fidelity)",
        copies, passes, schedule::kMaxLayerPasses);
  return why;
}

// Every layer of every stage simulated (with the micro-batch shortcut when it applies). NCCL
// kernels take SMs from the compute kernels they overlap with: simulate once, measure how much
// of the step the communication streams are busy, slow the compute kernels by the SM share they
// lose for that fraction of the time, and simulate again.
Simulated simulate_layers(const model::ModelSpec& m, const plan::Plan& p, const Options& options, const Efficiency& eff,
                          const MicroBatchShortcut& mb, bool multi_gpu) {
  const bool full = options.fidelity == Options::Fidelity::full;
  Simulated sim;
  // The probe and the step simulate the same IR (only kernel durations differ): built once.
  std::vector<schedule::StepIR> irs = build_stages(m, p, mb.on ? mb.k1 : 0, options.trace);
  std::vector<schedule::StepIR> fewer_irs;
  if (mb.on) {
    fewer_irs = build_stages(m, p, mb.k2, false);
    // A drive's write rate depends on how much of the whole step its cache absorbs.
    for (std::size_t s = 0; s < irs.size(); ++s) {
      const double whole =
          extrapolate(schedule::nvme_written_bytes(irs[s]), schedule::nvme_written_bytes(fewer_irs[s]), mb.repeats);
      irs[s].nvme_step_written_bytes = fewer_irs[s].nvme_step_written_bytes = whole;
    }
  }
  // Lowered once at full speed; the SM-sharing probe runs it, then it runs again retimed.
  LoweredStep step = lower_step(p, eff, false, irs, 1.0, full);
  std::optional<LoweredStep> fewer_step;
  if (mb.on) fewer_step.emplace(lower_step(p, eff, false, fewer_irs, 1.0, full));
  double slowdown = 1.0;
  if (multi_gpu) {
    // The probe sees the whole step: under the shortcut its k1 and k2 runs extrapolated the same
    // way as the step's.
    int probe_stage = 0;
    StageRun probe = collect_step(step, step.e.run(true), irs, probe_stage, false, false);
    if (mb.on) {
      const StageRun fewer = collect_step(*fewer_step, fewer_step->e.run(true), fewer_irs, probe_stage, false, false);
      probe = extrapolate_run(probe, {{&fewer, mb.repeats}});
    }
    slowdown = sm_sharing_slowdown(eff, p.cluster.gpu.sm_count, comm_busy_s(probe), probe.step_s);
    retime_step(step, irs, slowdown);
    if (mb.on) retime_step(*fewer_step, fewer_irs, slowdown);
  }
  // A trace keeps one engine task per op: lowered again for it.
  StageRun run;
  if (options.trace) {
    LoweredStep traced = lower_step(p, eff, true, irs, slowdown, full);
    run = collect_step(traced, traced.e.run(), irs, sim.stage, true, true, false, options.trace_stage);
  } else {
    run = collect_step(step, step.e.run(), irs, sim.stage, true, false);
  }
  const schedule::StepIR& ir = irs[sim.stage];
  sim.model_flops = ir.model_flops_per_rank;
  sim.hardware_flops = ir.hardware_flops_per_rank;
  sim.frozen_grad_flops = ir.frozen_weight_grad_flops_per_rank;
  sim.timeline.step_s = run.step_s;
  sim.timeline.intervals = run.intervals;
  if (mb.on) {
    // Every further micro-batch repeats the same work: each additive figure grows by its
    // difference between the k1 and k2 runs per (k1 - k2) micro-batches. The same stage is
    // compared in both runs (a pipeline's bottleneck stage does not change with the count).
    int fewer_stage = sim.stage;
    StageRun less = collect_step(*fewer_step, fewer_step->e.run(), fewer_irs, fewer_stage, true, false);
    const schedule::StepIR& fewer_ir = fewer_irs[sim.stage];
    sim.model_flops = extrapolate(sim.model_flops, fewer_ir.model_flops_per_rank, mb.repeats);
    sim.hardware_flops = extrapolate(sim.hardware_flops, fewer_ir.hardware_flops_per_rank, mb.repeats);
    sim.frozen_grad_flops = extrapolate(sim.frozen_grad_flops, fewer_ir.frozen_weight_grad_flops_per_rank, mb.repeats);
    sim.timeline.partials.push_back({std::move(less.intervals), less.step_s, mb.repeats});
    run = extrapolate_run(run, {{&less, mb.repeats}});
  }
  sim.run = std::move(run);
  return sim;
}

// The reported stage's run as the result: times, streams and links (and which bound the step),
// memory peaks, the trace.
void take_run(StepResult& res, Simulated& sim) {
  res.stage = sim.stage;
  res.timeline = std::move(sim.timeline);
  StageRun& worst = sim.run;
  res.step_time_s = worst.step_s;
  res.compute_s = worst.compute_s;
  res.exposed_comm_s = worst.exposed_comm_s;
  res.idle_s = std::max(0.0, worst.step_s - worst.compute_s - worst.exposed_comm_s);
  res.streams = worst.streams;
  res.links = worst.links;
  for (const auto& st : res.streams)
    if (st.utilization > res.bound_utilization) {
      res.bound_utilization = st.utilization;
      res.bound_by = "stream " + st.name;
    }
  for (const auto& l : res.links)
    if (l.utilization > res.bound_utilization) {
      res.bound_utilization = l.utilization;
      res.bound_by = "link " + l.name;
    }
  res.peak_bytes = worst.peak;
  res.trace_json = std::move(worst.trace);
  res.tracks = std::move(worst.tracks);
  res.nvme_written_bytes = worst.nvme_written;
  if (!worst.problem.empty()) {
    res.ok = false;
    res.problem = worst.problem;
  }
}

// Tokens per second and FLOPs: model FLOPs are PaLM's 6N + 12 L H Q T per token
// (model::flops_per_token), N incl. the head, less the weight gradients a frozen LoRA base does not
// compute (the IR's share of them); hardware FLOPs add recompute counted the same way (Narayanan et
// al. 2021, eq. 3).
void rates(StepResult& res, const model::ModelSpec& m, const plan::Plan& p, const Simulated& sim) {
  const int gpus = p.cluster.gpus();
  // Every sample slot of the step, padding included (padding is computed, not learned).
  const double slot_tokens = static_cast<double>(plan::global_batch_samples(p)) * static_cast<double>(p.job.seq_len);
  res.tokens_per_step = slot_tokens * plan::real_token_fraction(p.job);
  if (res.step_time_s > 0) {
    res.tokens_per_s = res.tokens_per_step / res.step_time_s;
    res.tokens_per_s_per_gpu = res.tokens_per_s / gpus;
  }
  const auto per_token = model::flops_per_token(m, p.job.seq_len);
  const double method_share = sim.model_flops > 0 ? sim.model_flops / (sim.model_flops + sim.frozen_grad_flops) : 1.0;
  res.model_flops_per_step = per_token.training() * slot_tokens * method_share;
  const double recompute_share = sim.model_flops > 0 ? sim.hardware_flops / sim.model_flops : 1.0;
  res.hardware_flops_per_step = res.model_flops_per_step * recompute_share;
  if (res.step_time_s > 0) {
    res.model_tflops_per_gpu = res.model_flops_per_step / gpus / res.step_time_s / 1e12;
    res.hardware_tflops_per_gpu = res.hardware_flops_per_step / gpus / res.step_time_s / 1e12;
    const double peak = p.cluster.gpu.peak_for(plan::compute_dtype(p.job.precision));
    if (peak > 0) {
      res.mfu = res.model_tflops_per_gpu * 1e12 / peak;
      res.hfu = res.hardware_tflops_per_gpu * 1e12 / peak;
    }
  }
}

}  // namespace

double covered_s(const Track& track, bool critical_only) {
  std::vector<std::pair<double, double>> spans;
  for (const TrackSpan& sp : track.spans)
    if (sp.end_s > sp.start_s && (sp.critical || !critical_only)) spans.emplace_back(sp.start_s, sp.end_s);
  std::sort(spans.begin(), spans.end());
  double total = 0, end = -1;
  for (const auto& [a, b] : spans) {
    total += std::max(0.0, b - std::max(a, end));
    end = std::max(end, b);
  }
  return total;
}

StepResult simulate_step(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                         const Efficiency* efficiency) {
  StepResult res;
  res.efficiency = efficiency ? *efficiency : default_efficiency(p.cluster.gpu);
  const std::int64_t accumulation = plan::grad_accumulation_steps(p);
  const MicroBatchShortcut mb = micro_batch_shortcut(p, options, accumulation);
  if (std::string why = refusal(m, p, options.fidelity == Options::Fidelity::full, mb); !why.empty()) {
    res.ok = false;
    res.problem = std::move(why);
    return res;
  }
  // The stage symmetry, else the layer symmetry, else every layer (sim/shortcuts.cpp).
  const bool multi_gpu = p.cluster.gpu.sm_count > 0 && p.cluster.gpus() > 1;
  Simulated sim;
  if (auto shortened = shortened_pipeline(m, p, options, res.efficiency, accumulation, multi_gpu))
    sim = std::move(*shortened);
  else if (auto fewer = fewer_layers(m, p, options, res.efficiency, multi_gpu, accumulation, mb.counts())) {
    sim = std::move(*fewer);
    // Past a pool's capacity the figures are the fit's, as every verb gives them; the moment memory
    // ran out, where asked for, is a whole run's (Options::out_of_memory_moment).
    if (!sim.run.problem.empty() && options.out_of_memory_moment.value_or(true))
      if (std::string moment = simulate_layers(m, p, options, res.efficiency, mb, multi_gpu).run.problem;
          !moment.empty())
        sim.run.problem = std::move(moment);
  } else
    sim = simulate_layers(m, p, options, res.efficiency, mb, multi_gpu);
  take_run(res, sim);
  rates(res, m, p, sim);
  return res;
}

}  // namespace ftplan::sim
