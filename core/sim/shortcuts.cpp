#include "sim/lowering.hpp"

#include <fmt/format.h>

#include "plan/framework.hpp"

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
      const auto it = std::find_if(o->streams.begin(), o->streams.end(),
                                   [&](const StreamUse& x) { return x.name == main.streams[i].name; });
      out.streams[i].busy_s += w * (main.streams[i].busy_s - (it == o->streams.end() ? 0.0 : it->busy_s));
    }
    for (std::size_t i = 0; i < out.links.size(); ++i) {
      const auto it = std::find_if(o->links.begin(), o->links.end(),
                                   [&](const LinkUse& x) { return x.name == main.links[i].name; });
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

namespace {

// A stage's layers, chunk by chunk: each chunk's layer count, then each layer's kind (MoE or
// dense, local or global attention).
std::vector<int> stage_kinds(const model::ModelSpec& m, const plan::Plan& p, int stage, int chunks) {
  std::vector<int> kinds, begin;
  const std::vector<int> layers = inventory::stage_layer_list(m, p, stage, &begin);
  for (int c = 0; c < chunks; ++c) {
    kinds.push_back(begin[c] - begin[c + 1]);
    for (int i = begin[c]; i < begin[c + 1]; ++i) {
      const int l = layers[i];
      kinds.push_back((l < m.layers && m.is_moe_layer(l) ? 1 : 0) | (l < m.layers && m.is_local_layer(l) ? 2 : 0));
    }
  }
  return kinds;
}

// Whether every middle stage runs the same layers, chunk by chunk and kind by kind: the stage
// symmetry's condition.
bool middle_stages_alike(const model::ModelSpec& m, const plan::Plan& p, int pp, int chunks) {
  const std::vector<int> first_middle = stage_kinds(m, p, 1, chunks);
  for (int s = 2; s < pp - 1; ++s)
    if (stage_kinds(m, p, s, chunks) != first_middle) return false;
  return true;
}

// The whole pipeline's memory peaks from the short runs' (positions 0 and 1 of A are the plan's
// stages 0 and 1, B's too; the last position is the plan's last stage); nullopt near a pool's
// capacity, where the extrapolation would judge fit.
std::optional<plan::PerTier<double>> shortened_peaks(const StageRun& run_a, const StageRun& run_b, int pp,
                                                     std::int64_t accumulation, bool first_as_middle,
                                                     const plan::Cluster& cluster) {
  const plan::PerTier<double> capacity = pool_capacities(cluster);
  const auto& a = run_a.stage_peaks;
  const auto& b = run_b.stage_peaks;
  plan::PerTier<double> peaks{};
  for (std::size_t t = 0; t < plan::kTierCount; ++t) {
    // The last stage holds one micro-batch whatever the depth: A's own. The first and the first
    // middle stage hold one more per further stage through their steady state: A's, raised by
    // what one more stage in front adds (A's held bytes over B's as the first backward starts).
    // `first_as_middle`: B's first stage ran out of micro-batches before its warm-up ended, and
    // the first stage runs the same layers as the first middle one: what one more stage adds is
    // read at the first middle stage (shortened).
    // A 1F1B stage s holds min(pp - s, M) micro-batches as its first backward starts (warm-up
    // min(pp - s - 1, M) forwards, then one more; Megatron-LM schedules.py
    // forward_backward_pipelining_without_interleaving), A's stage at position s 4 - s (its 6
    // micro-batches cover its warm-up): `more` micro-batches more. Where M <= pp - s the stage runs
    // no forward after its first backward (its steady state is at most F_M, B_1): its high-water
    // mark is A's through its first backward with `more` held more, or, once that backward has
    // left what a backward leaves (gradients), A's steady state with one fewer (A's next backward,
    // B2, runs beside F2..F5; the stage's own beside M - 1 forwards). With more micro-batches,
    // forwards follow backwards, as in A's steady state.
    const int q_a = static_cast<int>(a.size());
    double peak = std::max(a.back().steady[t], a.back().ramp[t]);
    for (const auto& x : a) peak = std::max(peak, x.after[t]);
    for (int pos : {0, 1}) {
      const int at = first_as_middle ? 1 : pos;
      const double one = a[at].held[t] - b[at].held[t];  // one more micro-batch held
      const double more = static_cast<double>(std::min<std::int64_t>(pp - pos, accumulation) - (q_a - pos));
      if (accumulation <= pp - pos)
        peak = std::max({peak, a[pos].ramp[t], a[pos].first[t] + more * one, a[pos].steady[t] + (more - 1) * one});
      else
        peak = std::max({peak, a[pos].ramp[t], a[pos].steady[t] + more * one});
    }
    if (peak > 0.98 * capacity[t]) return std::nullopt;
    peaks[t] = peak;
  }
  return peaks;
}

// Whether the stage symmetry applies: a representative, untraced simulation with the micro-batch
// shortcut on, of a 1F1B or interleaved pipeline of at least kShortenFromStages stages whose middle
// stages are alike (interleaved: whole groups of pp micro-batches, as Megatron requires). 1F1B
// with fewer micro-batches than stages is included (issue 44): its step is as linear in stages
// and micro-batches as with more, (M + pp - 1)(t_f + t_b) for alike stages (the last stage busy
// from the first forward's arrival to the last backward, then the drain), and what its first
// stages hold stops at M (shortened_peaks).
bool stage_symmetry_applies(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                            std::int64_t accumulation) {
  const int pp = std::max(1, p.parallel.pp);
  const bool interleaved = p.parallel.schedule == plan::PipelineSchedule::interleaved && p.parallel.virtual_stages > 1;
  if (options.fidelity != Options::Fidelity::representative || options.trace || options.max_micro_batches <= 0 ||
      pp < kShortenFromStages || p.parallel.schedule == plan::PipelineSchedule::gpipe ||
      m.architecture == model::Architecture::encoder_decoder)
    return false;
  // Interleaved 1F1B runs micro-batches in groups of pp (Megatron requires whole groups): the
  // short pipelines' counts are whole groups of 3 and of 4 stages, and the plan's of pp.
  if (interleaved && accumulation % pp != 0) return false;  // (so interleaved never has M < pp)
  return middle_stages_alike(m, p, pp, interleaved ? p.parallel.virtual_stages : 1);
}

// One short pipeline: the plan's stage at each of its positions, and its micro-batches.
struct ShortRun {
  std::vector<int> real;
  int micro;
};

// The first `runs` short pipelines' IRs, each stage built once (`fold`: with the builder's folded
// runs); false when one writes to NVMe (a drive's write rate depends on the whole step's bytes,
// which the short runs do not have).
bool build_short_runs(const model::ModelSpec& m, const plan::Plan& p, const ShortRun (&shapes)[3], int runs,
                      std::vector<schedule::StepIR> (&irs)[3], bool fold) {
  std::map<int, inventory::Inventory> inventories;
  for (int s : shapes[0].real) inventories.emplace(s, inventory::build_inventory(m, p, s));
  for (int i = 0; i < runs; ++i) {
    irs[i].clear();
    const int q = static_cast<int>(shapes[i].real.size());
    for (int pos = 0; pos < q; ++pos) {
      irs[i].push_back(schedule::build_step(m, p, inventories.at(shapes[i].real[pos]), shapes[i].micro, false,
                                            schedule::PipelineView{q, pos, fold}));
      if (schedule::nvme_written_bytes(irs[i].back()) > 0) return false;
      irs[i].back().nvme_step_written_bytes = 0;  // nor, then, does the whole step (read by the lowering)
    }
  }
  return true;
}

// One run of a short pipeline: its result, and whether its folded layers ran undisturbed. With
// `less` (a steady-state period's micro-batches, > 0): also the run less one period
// (less_one_period), empty where its steady state is not one period repeated. The SM-sharing
// probe's run (`probe`) reads no activity: the step runs again after it.
StageRun run_short(LoweredStep& step, const std::vector<schedule::StepIR>& irs, int& stage, bool probe, bool& disturbed,
                   int period = 0, std::optional<StageRun>* less = nullptr) {
  des::Result r = step.e.run(probe);
  credit_chained(step, r);
  disturbed = disturbed || !folds_undisturbed(step, r);
  StageRun run = collect_step(step, r, irs, stage, !probe, false, !probe);
  if (less) *less = less_one_period(step, r, irs[stage], stage, run, period, !probe);
  return run;
}

// The short pipelines lowered (their layers folded or not), the SM-sharing probe, then the runs:
// `run` and the busiest stage of each. With a `period` (> 0), C is not run: run[2] is A less one
// period of its steady state. Disturbed: folded runs that were not exact (folds_undisturbed), to
// be lowered again layer by layer; aperiodic: A's steady state is not one period repeated (C is
// to be run); failed: a run's problem (out of memory) or busiest stages that differ.
enum class ShortRuns { ok, disturbed, aperiodic, failed };
ShortRuns run_shorts(const plan::Plan& p, const Efficiency& eff, const ShortRun (&shapes)[3],
                     const std::vector<schedule::StepIR> (&irs)[3], double w_b, double w_c, bool multi_gpu, bool fold,
                     int period, StageRun (&run)[3], int (&stage)[3]) {
  const int runs = period > 0 ? 2 : 3;
  // The runs extrapolate one stage's figures: their busiest stages must be the same plan stage.
  const auto same_stage = [&] {
    for (int i = 1; i < runs; ++i)
      if (shapes[i].real[stage[i]] != shapes[0].real[stage[0]]) return false;
    return true;
  };
  bool disturbed = false;
  std::vector<LoweredStep> steps;
  for (int i = 0; i < runs; ++i) steps.push_back(lower_step(p, eff, false, irs[i], 1.0, false, shapes[i].real, fold));
  if (period > 0) mark_steady_window(steps[0], irs[0], period);
  std::optional<StageRun> less;
  if (multi_gpu) {
    StageRun probe[3];
    for (int i = 0; i < runs; ++i)
      probe[i] = run_short(steps[i], irs[i], stage[i], true, disturbed, period, i == 0 && period > 0 ? &less : nullptr);
    if (disturbed) return ShortRuns::disturbed;
    if (!same_stage()) return ShortRuns::failed;
    if (period > 0) {
      if (!less) return ShortRuns::aperiodic;
      probe[2] = std::move(*less);
    }
    const StageRun whole = extrapolate_run(probe[0], {{&probe[1], w_b}, {&probe[2], w_c}});
    const double slowdown = sm_sharing_slowdown(eff, p.cluster.gpu.sm_count, comm_busy_s(whole), whole.step_s);
    for (int i = 0; i < runs; ++i) retime_step(steps[i], irs[i], slowdown);
  }
  for (int i = 0; i < runs; ++i) {
    run[i] = run_short(steps[i], irs[i], stage[i], false, disturbed, period, i == 0 && period > 0 ? &less : nullptr);
    if (!run[i].problem.empty()) return disturbed ? ShortRuns::disturbed : ShortRuns::failed;
  }
  if (disturbed) return ShortRuns::disturbed;
  if (!same_stage()) return ShortRuns::failed;
  if (period > 0) {
    if (!less) return ShortRuns::aperiodic;
    run[2] = std::move(*less);
    stage[2] = stage[0];
  }
  return ShortRuns::ok;
}

// The stage symmetry, its short pipelines' layers folded where that is exact (`fold`), the
// micro-batch slope read from A's steady state where it repeats (`window`).
// long: the stage symmetry's three short pipelines and their combination (lowering.hpp), one
// derivation whose figures are read by every later step.
std::optional<Simulated> shortened(const model::ModelSpec& m, const plan::Plan& p, const Efficiency& eff,
                                   std::int64_t accumulation, bool multi_gpu, bool fold, bool window) {
  const int pp = std::max(1, p.parallel.pp);
  const bool interleaved = p.parallel.schedule == plan::PipelineSchedule::interleaved && p.parallel.virtual_stages > 1;
  // Micro-batch counts: A = 4 stages x kA, B = 3 stages x kB, C = 3 stages x kC, each at least
  // the pipeline's depth (1F1B: every warm-up whole and a steady state; Narayanan et al. 2021
  // sec. 2.2.1) and, interleaved, whole groups of the short pipeline's stages with room for the
  // warm-up of (q - 1) 2 + (v - 1) q chunks (Megatron-LM schedules.py
  // forward_backward_pipelining_with_interleaving): two groups at least (one group is all
  // warm-up at v >= 2). A, whose memory is read (below), runs longer: its first stages' steady
  // state then holds their high-water mark (sim/lowering.hpp). 1F1B's C runs one micro-batch
  // more than B: a 1F1B step is linear in k from k = q on (q - 1 warm-up forwards, then one
  // forward and one backward per further micro-batch), so kB = 3 and kC = 4 give the slope g
  // exactly, and C's memory is not read (kC 6 -> 4: 1T on 64 stages 51 -> 45 stage-micro-batches
  // a run, step time unchanged to 0.000%).
  // Interleaved B runs one group (3 x 3) where the slope comes from A's steady state and the
  // first stage runs the same layers, chunk by chunk, as the first middle one: its timing figures
  // lie on the line already (GPT-3: 3 x 3, 3 x 6 and 3 x 9 step 0.713635331, 1.258973348 and
  // 1.804311365 s), but its first stage runs all 9 chunk passes before its first backward (its
  // warm-up would be (3 - 1) 2 + (v - 1) 3 = 10), so it does not hold what a longer B's first
  // stage holds. What one more stage in front adds, v + 1 more chunk passes in flight (two of
  // chunk 0, one of each other; Megatron's warm-up), is then read at the first middle stage,
  // whose chunks are the same layers (shortened_peaks).
  // Its busiest stage must be the last one, whose steady state it has (else, and where C is run,
  // B runs 3 x 6).
  bool one_group_b = window && interleaved &&
                     stage_kinds(m, p, 0, p.parallel.virtual_stages) == stage_kinds(m, p, 1, p.parallel.virtual_stages);
  const int k_a = interleaved ? 12 : 6, k_c = interleaved ? 9 : 4;
  int k_b = interleaved && !one_group_b ? 6 : 3;
  if (accumulation < k_a) return std::nullopt;
  ShortRun shapes[3] = {{{0, 1, 2, pp - 1}, k_a}, {{0, 1, pp - 1}, k_b}, {{0, 1, pp - 1}, k_c}};
  // f(q, k) = f(A) + (q - 4) s + (k - kA) g: linear in stages and micro-batches with no cross
  // term, g per micro-batch and s = f(A) - f(3 stages x kA) = f(A) - f(B) - (kA - kB) g per
  // stage. As f(A) + w_B (f(A) - f(B)) + w_C (f(A) - f(C)):
  // - g = (f(C) - f(B)) / (kC - kB): w_B = (pp - 4) + h, w_C = -h,
  //   h = ((M - kA) - (pp - 4)(kA - kB)) / (kC - kB);
  // - or, with no C, g = (f(A) - f(A less one period)) / period, read from A's steady state, which
  //   repeats every `period` micro-batches (1F1B one, interleaved a group of A's 4 stages; the
  //   run less one period is A's with one period's window taken out, less_one_period): as the
  //   same sum with C := A less one period, w_B = pp - 4, w_C = ((M - kA) - (pp - 4)(kA - kB)) /
  //   period. Where A's steady state does not repeat exactly, C is run after all.
  const double w_stages = pp - 4;
  int period = window ? (interleaved ? static_cast<int>(shapes[0].real.size()) : 1) : 0;
  double w_b = 0, w_c = 0;
  std::vector<schedule::StepIR> irs[3];
  StageRun run[3];
  int stage[3] = {0, 0, 0};
  ShortRuns outcome = ShortRuns::failed;
  for (bool folded = fold;;) {
    const double rest = static_cast<double>(accumulation - k_a) - w_stages * (k_a - k_b);
    w_b = period > 0 ? w_stages : w_stages + rest / (k_c - k_b);
    w_c = period > 0 ? rest / period : -rest / (k_c - k_b);
    if (!build_short_runs(m, p, shapes, period > 0 ? 2 : 3, irs, folded)) return std::nullopt;
    outcome = run_shorts(p, eff, shapes, irs, w_b, w_c, multi_gpu, folded, period, run, stage);
    if (outcome == ShortRuns::disturbed) {
      // Lowered again layer by layer, from whole IRs where the builder left later layers out.
      folded = false;
      if (std::any_of(std::begin(irs), std::end(irs), [](const auto& stages) {
            return std::any_of(stages.begin(), stages.end(),
                               [](const schedule::StepIR& ir) { return !ir.fold.empty(); });
          }))
        build_short_runs(m, p, shapes, period > 0 ? 2 : 3, irs, false);
      outcome = run_shorts(p, eff, shapes, irs, w_b, w_c, multi_gpu, false, period, run, stage);
    }
    const bool last_busiest = stage[1] == static_cast<int>(shapes[1].real.size()) - 1;
    if (outcome == ShortRuns::aperiodic)
      period = 0;
    else if (!one_group_b || (outcome == ShortRuns::ok && last_busiest))
      break;
    if (one_group_b) {  // again with B of two groups
      one_group_b = false;
      shapes[1].micro = k_b = 6;
    }
  }
  if (outcome != ShortRuns::ok) return std::nullopt;
  Simulated sim;
  sim.run = extrapolate_run(run[0], {{&run[1], w_b}, {&run[2], w_c}});
  const auto peaks = shortened_peaks(run[0], run[1], pp, accumulation, one_group_b, p.cluster);
  if (!peaks) return std::nullopt;
  sim.run.peak = *peaks;
  // A stage's FLOPs are linear in its micro-batches whatever the stage count: C's, or A's less one
  // period's micro-batches at A's and B's slope.
  const auto more = [&](double schedule::StepIR::*f) {
    const double fa = irs[0][stage[0]].*f, fb = irs[1][stage[1]].*f;
    const double fc = period > 0 ? fa - period * (fa - fb) / (k_a - k_b) : irs[2][stage[2]].*f;
    return fa + w_b * (fa - fb) + w_c * (fa - fc);
  };
  sim.model_flops = more(&schedule::StepIR::model_flops_per_rank);
  sim.hardware_flops = more(&schedule::StepIR::hardware_flops_per_rank);
  sim.frozen_grad_flops = more(&schedule::StepIR::frozen_weight_grad_flops_per_rank);
  sim.stage = shapes[0].real[stage[0]];
  sim.timeline.intervals = run[0].intervals;
  sim.timeline.step_s = run[0].step_s;
  sim.timeline.partials.push_back({std::move(run[1].intervals), run[1].step_s, w_b});
  sim.timeline.partials.push_back({std::move(run[2].intervals), run[2].step_s, w_c});
  return sim;
}

}  // namespace

std::optional<Simulated> shortened_pipeline(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                                            const Efficiency& eff, std::int64_t accumulation, bool multi_gpu) {
  if (!stage_symmetry_applies(m, p, options, accumulation)) return std::nullopt;
  return shortened(m, p, eff, accumulation, multi_gpu, options.fold_layers, options.steady_window);
}

namespace {

// The fewest layers the layer shortcut simulates (fewer_layers): the first and the last layers
// differ from the middle ones (the embedding before, the head after, parameter prefetch that
// starts or ends), so the shorter run keeps middle layers on both sides of that.
constexpr int kFewestLayers = 4;
// The longest period of layer kinds the layer shortcut follows (MoE every other layer, local
// attention every k-th, full checkpointing every k-th).
constexpr int kMaxLayerPeriod = 4;

// Each pool's high-water mark by where the step's compute stream is when the pool changes: the
// (pass, micro-batch, place among the `layers` layers: -1 none, 0 the first, 1 a middle one, 2
// the last) of the last GPU kernel started by then ({-2, -2, -2} before the first).
std::map<std::array<int, 3>, plan::PerTier<double>> peaks_by_place(const schedule::StepIR& ir, const Lowered& l,
                                                                   const des::Result& r, int layers) {
  std::vector<std::pair<des::Time, std::array<int, 3>>> kernels;  // by start; the stream is serial
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if (!gpu_kernel(op)) continue;
    const int place = op.layer < 0 ? -1 : op.layer == 0 ? 0 : op.layer == layers - 1 ? 2 : 1;
    kernels.push_back({l.start(r, i), {static_cast<int>(op.pass), op.micro, place}});
  }
  std::map<std::array<int, 3>, plan::PerTier<double>> out;
  for (std::size_t t = 0; t < plan::kTierCount; ++t) {
    if (!l.has_pool[t]) continue;
    for (const des::PoolSample& x : r.pool_series[l.pools[t].index]) {
      const auto it = std::upper_bound(kernels.begin(), kernels.end(), x.time,
                                       [](des::Time at, const auto& k) { return at < k.first; });
      auto& peak = out[it == kernels.begin() ? std::array<int, 3>{-2, -2, -2} : std::prev(it)->second];
      peak[t] = std::max(peak[t], x.live_bytes);
    }
  }
  return out;
}

// y(L) = a + b L + c / L through three points (x[i], y[i]), at `at`: the quadratic x y through
// (x[i], x[i] y[i]) (Lagrange), over `at`.
double fit_at(const double (&x)[3], const double (&y)[3], double at) {
  double q = 0;
  for (int i = 0; i < 3; ++i) {
    double term = x[i] * y[i];
    for (int j = 0; j < 3; ++j)
      if (j != i) term *= (at - x[j]) / (x[i] - x[j]);
    q += term;
  }
  return q / at;
}

// The stretches of a step where its compute stream runs layers [first, first + count) (a
// micro-batch's forward, its backward with any recompute): from the first such kernel's start
// to the start of the next kernel, in seconds.
std::vector<std::pair<double, double>> layer_windows(const schedule::StepIR& ir, const Lowered& l, const des::Result& r,
                                                     int first, int count) {
  std::vector<std::pair<double, double>> out;
  bool inside = false;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if (!gpu_kernel(op)) continue;
    const bool in = op.layer >= first && op.layer < first + count;
    const double at = static_cast<double>(l.start(r, i)) * 1e-9;
    if (in && !inside) out.push_back({at, at});
    if (!in && inside) out.back().second = at;
    inside = in;
  }
  if (inside) out.clear();  // a step does not end inside its layers (the head, the optimizer follow)
  return out;
}

// The pieces of an unrolled timeline, lane by lane, each lane in time order as the simulation
// gives them (the power model merges lanes rather than sorting): a lane's pieces in a window are
// followed by their `copies` copies when the lane leaves the window.
class UnrolledLanes {
 public:
  UnrolledLanes(const std::vector<std::pair<double, double>>& windows, int copies)
      : windows_(windows), copies_(copies) {}

  // A piece outside every window (window -1), or copy 0 of a piece of window `window`.
  void emit(const Interval& piece, int window) {
    if (piece.lane >= lanes_.size()) lanes_.resize(piece.lane + 1u);
    Lane& l = lanes_[piece.lane];
    if (l.window != window) release(l);
    push_merged(l.out, piece);  // an interval across a window and its copies stays one
    if (window < 0) return;
    l.held.push_back(piece);
    l.window = window;
  }

  std::vector<Interval> take(std::size_t reserve) {
    std::vector<Interval> out;
    out.reserve(reserve);
    for (Lane& l : lanes_) {
      release(l);
      out.insert(out.end(), l.out.begin(), l.out.end());
    }
    return out;
  }

 private:
  struct Lane {
    std::vector<Interval> out;
    std::vector<Interval> held;  // the pieces of window `window` so far (copy 0)
    int window = -1;
  };

  void release(Lane& l) {
    if (l.window < 0) return;
    const auto& [a, b] = windows_[static_cast<std::size_t>(l.window)];
    for (int c = 1; c <= copies_; ++c)
      for (Interval piece : l.held) {
        piece.start_s += c * (b - a);
        piece.end_s += c * (b - a);
        push_merged(l.out, piece);
      }
    l.held.clear();
    l.window = -1;
  }

  const std::vector<std::pair<double, double>>& windows_;
  int copies_;
  std::vector<Lane> lanes_;
};

// A step's intervals with each window's content repeated `copies` more times (what follows it
// shifted): the timeline of the step with that many more periods of layers, for the power model
// (its highest 1-second average needs the step's own shape, not a shorter one's).
std::vector<Interval> unroll(const std::vector<Interval>& in, const std::vector<std::pair<double, double>>& windows,
                             int copies) {
  UnrolledLanes lanes(windows, copies);
  // The shift of a time outside every window: the copies of the windows before it.
  const auto shift = [&](double t) {
    double s = 0;
    for (const auto& [a, b] : windows)
      if (b <= t) s += copies * (b - a);
    return s;
  };
  const auto piece_of = [](Interval piece, double start, double end) {
    piece.start_s = start;
    piece.end_s = end;
    return piece;
  };
  for (const Interval& iv : in) {
    double from = iv.start_s;
    // Cut at the windows' edges: pieces outside shift; pieces inside repeat.
    for (std::size_t w = 0; w < windows.size(); ++w) {
      const auto [a, b] = windows[w];
      if (b <= from || a >= iv.end_s) continue;
      if (from < a) {
        lanes.emit(piece_of(iv, from + shift(from), a + shift(from)), -1);
        from = a;
      }
      const double to = std::min(b, iv.end_s), base = shift(a);
      lanes.emit(piece_of(iv, from + base, to + base), static_cast<int>(w));
      from = to;
    }
    if (from < iv.end_s) lanes.emit(piece_of(iv, from + shift(from), iv.end_s + shift(from)), -1);
  }
  return lanes.take(in.size() * 2);
}

// The layer symmetry's period P: the kinds of layer (MoE or dense, local or global attention,
// checkpointed or kept) repeat every P layers, and the short runs keep the plan's layer count
// modulo P. 0: the shortcut does not apply (a traced, full-fidelity or unshortened simulation, a
// pipeline, an encoder-decoder, DeepSpeed ZeRO-3, or no period up to kMaxLayerPeriod).
int layer_symmetry_period(const model::ModelSpec& m, const plan::Plan& p, const Options& options) {
  if (options.fidelity != Options::Fidelity::representative || options.trace || options.max_micro_batches <= 0 ||
      std::max(1, p.parallel.pp) != 1 || m.architecture == model::Architecture::encoder_decoder)
    return 0;
  // DeepSpeed ZeRO-3's parameter coordinator: on the DGX-2 example (Llama-2-13B, 16 V100s) the
  // GPU high-water mark of 40 layers lies 8% above the line its runs of 5 to 11 layers draw (two
  // more gathered layers live at the last backward); the mechanism is not found, so such steps
  // are simulated whole (tests/unit/simulate_test.cpp keeps the case).
  if (plan::framework_profile(p.job).sharding == plan::Sharding::deepspeed && plan::sharding_in_effect(p).zero >= 3)
    return 0;
  const auto kind = [&](int l) {
    return (m.is_moe_layer(l) ? 1 : 0) | (m.is_local_layer(l) ? 2 : 0) | (p.job.checkpointed(l) ? 4 : 0);
  };
  for (int q = 1; q <= kMaxLayerPeriod; ++q) {
    bool repeats = true;
    for (int l = q; l < m.layers && repeats; ++l) repeats = kind(l) == kind(l % q);
    if (repeats) return q;
  }
  return 0;
}

using Places = std::map<std::array<int, 3>, plan::PerTier<double>>;  // (pass, micro-batch, place) -> peaks

// Memory: the high-water mark of each pool while the compute stream is at one place of the
// step (peaks_by_place): the first and the last layer sit at a fixed distance from the step's
// ends, and across the middle layers the live bytes follow a trend (weights, gradients and
// saved activations come and go a layer at a time) plus what one layer holds for itself, so
// their high-water mark is at the first or the last middle layer. What a place holds is then
// a + b L + c / L: layers' tensors a layer at a time, and tensors that split a whole by L (the
// inventory's per-layer shares of gradients that include the embedding's): fitted through L1,
// L2 and L3 = L1 + P. Where a place departs from that form (a trend that turns inside the
// middle layers), the fit and the straight line through L1 and L2 part: by more than 5% of
// the pool's high-water mark, the whole step is simulated (nullopt). So it is near a pool's
// capacity, for the exact verdict; past it by more than the fit's play, the fit stands where
// `past_capacity` (the step's problem names the pool; simulate_step adds the moment where asked).
std::optional<plan::PerTier<double>> fitted_peaks(const Places (&places)[3], const std::array<int, 3>& counts,
                                                  int layers, double w_layers, const plan::PerTier<double>& capacity,
                                                  bool past_capacity) {
  if (places[0].size() != places[1].size() || places[0].size() != places[2].size()) return std::nullopt;
  const double xs[3] = {static_cast<double>(counts[0]), static_cast<double>(counts[1]), static_cast<double>(counts[2])};
  plan::PerTier<double> peaks{};
  for (std::size_t t = 0; t < plan::kTierCount; ++t) {
    double peak = 0, apart = 0;
    for (const auto& [where, at_l1] : places[0]) {
      const auto b = places[1].find(where), c = places[2].find(where);
      if (b == places[1].end() || c == places[2].end()) return std::nullopt;
      const double ys[3] = {at_l1[t], b->second[t], c->second[t]};
      const double fitted = fit_at(xs, ys, layers);
      peak = std::max(peak, fitted);
      apart = std::max(apart, std::abs(fitted - extrapolate(at_l1[t], b->second[t], w_layers)));
    }
    if (apart > 0.05 * peak) return std::nullopt;
    if (peak > 0.98 * capacity[t] && !(past_capacity && peak - apart > 1.02 * capacity[t])) return std::nullopt;
    peaks[t] = peak;
  }
  return peaks;
}

struct UnrollShape {
  int layers, l1, period;
  double w_layers;
};

// The layer shortcut's timeline for the power model; false when the (L1, k1) run shows no window
// of middle layers to repeat.
bool unrolled_timeline(Timeline& timeline, std::vector<StageRun>& run,
                       const std::vector<std::pair<double, double>>& windows, const std::vector<double>& weights,
                       const UnrollShape& shape) {
  const std::size_t n = weights.size();
  // The power model's timeline. Its main step is the (L1, k1) run with its window of P middle
  // layers repeated (L - L1) / P more times: the whole step's shape at k1 micro-batches, for the
  // highest 1-second average (a short step's would average over its optimizer step and head).
  // Every additive figure (time, energy, idle time) is still the runs' extrapolation: partials
  // (L1, k1) with weight -1 - W and the others with theirs (W their sum), as
  // U + (-1 - W)(U - f0) + sum w_i (U - f_i) = f0 + sum w_i (f0 - f_i) for every U.
  if (windows.empty()) return false;
  const int copies = (shape.layers - shape.l1) / shape.period;
  double unrolled_s = run[0].step_s;
  for (const auto& [a, b] : windows) unrolled_s += copies * (b - a);
  timeline.intervals = unroll(run[0].intervals, windows, copies);
  // What follows the last layer (gradient reductions, the optimizer step over every layer's
  // parameters) grows with the layers too: stretched to the extrapolated step's length.
  const double k1_step_s = run[0].step_s + shape.w_layers * (run[0].step_s - run[1].step_s);
  const double tail_from = windows.back().second + (unrolled_s - run[0].step_s);
  const double tail_s = unrolled_s - tail_from;
  if (tail_s > 0 && k1_step_s > tail_from) {
    const double stretch = (k1_step_s - tail_from) / tail_s;
    const auto map = [&](double t) { return t <= tail_from ? t : tail_from + (t - tail_from) * stretch; };
    for (Interval& iv : timeline.intervals) {
      iv.start_s = map(iv.start_s);
      iv.end_s = map(iv.end_s);
    }
    unrolled_s = k1_step_s;
  }
  timeline.step_s = unrolled_s;
  double others = 0;
  for (std::size_t i = 1; i < n; ++i) others += weights[i];
  timeline.partials.push_back({std::move(run[0].intervals), run[0].step_s, -1 - others});
  for (std::size_t i = 1; i < n; ++i)
    timeline.partials.push_back({std::move(run[i].intervals), run[i].step_s, weights[i]});
  return true;
}

// The layer shortcut's runs and their weights: (L1, k1), (L2, k1) and, under the micro-batch
// shortcut, (L1, k2), (L2, k2); then (L3, k1) for memory only (the last shape, not weighted).
struct LayerRuns {
  struct Shape {
    int layers, micro;
  };
  std::vector<Shape> shapes;
  std::vector<double> weights;  // of the first n shapes
  std::size_t n = 0;
  int l1 = 0, l2 = 0, l3 = 0;
  double w_layers = 0;
};

std::optional<LayerRuns> layer_runs(int layers, int period, int prefetch_depth, std::int64_t accumulation,
                                    std::optional<std::pair<int, int>> micro) {
  LayerRuns r;
  // L2 >= kFewestLayers (and past the parameter prefetch at both ends), L2 = L mod P, L1 = L2 + P.
  const int fewest = kFewestLayers + std::max(1, prefetch_depth);
  r.l2 = fewest + ((layers - fewest) % period + period) % period;
  r.l1 = r.l2 + period;
  if (layers <= r.l1 + r.l2) return std::nullopt;  // taken only where it saves work
  r.w_layers = static_cast<double>(layers - r.l1) / (r.l1 - r.l2);
  const double w_micro =
      micro ? static_cast<double>(accumulation - micro->first) / (micro->first - micro->second) : 0.0;
  // Time is bilinear in layers and micro-batches (each micro-batch passes through every layer):
  // f = f11 + wL (f11 - f21) + wM (f11 - f12) + wL wM (f11 - f21 - f12 + f22), as main + sum w (main - other).
  r.shapes = {{r.l1, micro ? micro->first : 0}, {r.l2, micro ? micro->first : 0}};
  r.weights = {0, r.w_layers + r.w_layers * w_micro};
  if (micro) {
    r.shapes.push_back({r.l1, micro->second});
    r.shapes.push_back({r.l2, micro->second});
    r.weights.push_back(w_micro + r.w_layers * w_micro);
    r.weights.push_back(-r.w_layers * w_micro);
  }
  r.n = r.shapes.size();
  // Memory takes a third layer count at k1: L3 = L1 + P.
  r.l3 = r.l1 + period;
  r.shapes.push_back({r.l3, r.shapes[0].micro});
  return r;
}

// A fitted step's problem where a pool's peak is past its capacity (the first such pool; the
// moment it ran out is a whole run's: Options::out_of_memory_moment, simulate_step), else "".
std::string past_capacity_problem(const plan::PerTier<double>& peak, const plan::PerTier<double>& capacity) {
  for (const plan::TierInfo& t : plan::kTiers)
    if (const std::size_t i = plan::tier_index(t.tier); capacity[i] > 0 && peak[i] > capacity[i])
      return fmt::format("{} runs out of memory: {:.2f} GiB at the step's peak of {:.2f} GiB", t.pool,
                         peak[i] / (1u << 30), capacity[i] / (1u << 30));
  return "";
}

// Whether a short run's one problem is a pool running out of memory (the whole step's then does
// too, past its capacity).
bool ran_out_only(const LoweredStep& step, const des::Result& r) {
  return r.completed && step.problem.empty() && !r.out_of_memory.empty();
}

// The layer shortcut's runs (LayerRuns), each built and lowered, for fewer_layers. The first,
// (L1, k1), also runs (its SM-sharing probe where `multi_gpu`) before the others are built: where
// it runs out of memory (a plan that does not fit), so does the whole step: unless its peak can be
// fitted past capacity (`past_capacity`), simulate_layers then simulates it layer by layer, and
// building the other runs would be wasted. Null where the shortcut does not apply.
struct FewerLayerRuns {
  std::vector<std::vector<schedule::StepIR>> irs;
  std::vector<LoweredStep> steps;
  std::vector<StageRun> probe;       // the first's probe, where multi_gpu (the others' to come)
  std::optional<des::Result> first;  // the first's run, where no probe precedes it
};

std::optional<FewerLayerRuns> layer_shortcut_runs(const model::ModelSpec& m, const plan::Plan& p, const Efficiency& eff,
                                                  bool multi_gpu, bool past_capacity, const LayerRuns& runs) {
  const std::size_t n = runs.n;
  FewerLayerRuns out;
  out.irs.resize(n + 1);
  out.steps.reserve(n + 1);
  out.probe.resize(n);
  for (std::size_t i = 0; i <= n; ++i) {
    model::ModelSpec shorter = m;
    shorter.layers = runs.shapes[i].layers;
    out.irs[i] = build_stages(shorter, p, runs.shapes[i].micro, false);
    // A drive's write rate depends on the whole step's bytes (nvme_write_rate): not extrapolated.
    if (schedule::nvme_written_bytes(out.irs[i][0]) > 0) return std::nullopt;
    out.steps.push_back(lower_step(p, eff, false, out.irs[i], 1.0, false));
    if (i > 0) continue;
    int stage = 0;
    if (multi_gpu) {
      const des::Result r = out.steps[0].e.run(true);
      out.probe[0] = collect_step(out.steps[0], r, out.irs[0], stage, false, false);
      if (!out.probe[0].problem.empty() && !(past_capacity && ran_out_only(out.steps[0], r))) return std::nullopt;
    } else {
      out.first = out.steps[0].e.run();
      if (!collect_step(out.steps[0], *out.first, out.irs[0], stage, false, false).problem.empty() &&
          !(past_capacity && ran_out_only(out.steps[0], *out.first)))
        return std::nullopt;
    }
  }
  return out;
}

}  // namespace

std::optional<Simulated> fewer_layers(const model::ModelSpec& m, const plan::Plan& p, const Options& options,
                                      const Efficiency& eff, bool multi_gpu, std::int64_t accumulation,
                                      std::optional<std::pair<int, int>> micro) {
  const int layers = m.layers;
  const int period = layer_symmetry_period(m, p, options);
  if (period == 0) return std::nullopt;
  const auto runs = layer_runs(layers, period, p.offload.prefetch_depth, accumulation, micro);
  if (!runs) return std::nullopt;
  const auto& shapes = runs->shapes;
  const auto& weights = runs->weights;
  const std::size_t n = runs->n;
  const int l1 = runs->l1, l2 = runs->l2, l3 = runs->l3;
  const double w_layers = runs->w_layers;
  // Past a pool's capacity the fit holds unless a paged optimizer's state fills what the GPU has
  // left (footprint::paged_placement: not linear in the layers).
  const bool past_capacity = !p.job.optimizer.paged;
  auto built = layer_shortcut_runs(m, p, eff, multi_gpu, past_capacity, *runs);
  if (!built) return std::nullopt;
  // Named references, not a structured binding: clang 14 lets no lambda capture one (the more lambda below).
  auto& irs = built->irs;
  auto& steps = built->steps;
  auto& probe = built->probe;
  auto& first = built->first;
  const auto combine = [&](std::vector<StageRun>& run) {
    std::vector<std::pair<const StageRun*, double>> others;
    for (std::size_t i = 1; i < n; ++i) others.emplace_back(&run[i], weights[i]);
    return extrapolate_run(run[0], others);
  };
  if (multi_gpu) {
    // The SM-sharing probe sees the whole step, extrapolated the same way.
    for (std::size_t i = 1; i < n; ++i) {
      int stage = 0;
      probe[i] = collect_step(steps[i], steps[i].e.run(true), irs[i], stage, false, false);
    }
    const StageRun whole = combine(probe);
    const double slowdown = sm_sharing_slowdown(eff, p.cluster.gpu.sm_count, comm_busy_s(whole), whole.step_s);
    for (std::size_t i = 0; i <= n; ++i) retime_step(steps[i], irs[i], slowdown);
  }
  std::vector<StageRun> run(n + 1);
  Places places[3];
  // Where the step's compute stream runs one period of middle layers (layers 2 .. 2 + P - 1),
  // in the (L1, k1) run, for the power model's timeline (unroll).
  std::vector<std::pair<double, double>> windows[1];
  for (std::size_t i = 0; i <= n; ++i) {
    int stage = 0;
    const des::Result r = i == 0 && first ? std::move(*first) : steps[i].e.run();
    // The last run, (L3, k1), is for memory alone: its activity (the timeline's intervals) is not needed.
    run[i] = collect_step(steps[i], r, irs[i], stage, i < n, false);
    if (!run[i].problem.empty()) {
      if (!(past_capacity && ran_out_only(steps[i], r))) return std::nullopt;
      run[i].problem.clear();  // the whole step's verdict is its fitted peaks' (below)
    }
    // Memory from the k1 runs: a one-stage step holds no more with more micro-batches.
    if (i < 2 || i == n) places[i == n ? 2 : i] = peaks_by_place(irs[i][0], steps[i].lowered[0], r, shapes[i].layers);
    if (i == 0) windows[0] = layer_windows(irs[i][0], steps[i].lowered[0], r, 2, period);
  }
  Simulated sim;
  sim.run = combine(run);
  // Memory: each pool's high-water mark by place, fitted over L1, L2 and L3 (fitted_peaks).
  const plan::PerTier<double> capacity = pool_capacities(p.cluster);
  const auto peaks = fitted_peaks(places, {l1, l2, l3}, layers, w_layers, capacity, past_capacity);
  if (!peaks) return std::nullopt;
  sim.run.peak = *peaks;
  sim.run.problem = past_capacity_problem(sim.run.peak, capacity);
  sim.run.stage_peaks.clear();
  const auto more = [&](double schedule::StepIR::*f) {
    double v = irs[0][0].*f;
    for (std::size_t i = 1; i < n; ++i) v += weights[i] * (irs[0][0].*f - irs[i][0].*f);
    return v;
  };
  sim.model_flops = more(&schedule::StepIR::model_flops_per_rank);
  sim.hardware_flops = more(&schedule::StepIR::hardware_flops_per_rank);
  sim.frozen_grad_flops = more(&schedule::StepIR::frozen_weight_grad_flops_per_rank);
  sim.stage = 0;
  if (!unrolled_timeline(sim.timeline, run, windows[0], weights, UnrollShape{layers, l1, period, w_layers}))
    return std::nullopt;
  return sim;
}

}  // namespace detail

}  // namespace ftplan::sim
