#include <set>

#include "sim/lowering.hpp"

namespace ftplan::sim {

namespace detail {

namespace {

// What component an op keeps busy doing what (Interval); false for ops that draw no power of their own.
bool activity_kind(const Op& op, Interval& iv) {
  switch (op.kind) {
    case OpKind::gemm: iv.activity = Activity::gemm; return true;
    case OpKind::attention: iv.activity = Activity::attention; return true;
    case OpKind::elementwise:
    case OpKind::loss: iv.activity = Activity::memory_bound; return true;
    case OpKind::optimizer:
      iv.activity = op.stream == Stream::cpu ? Activity::cpu_compute : Activity::memory_bound;
      if (op.stream == Stream::cpu) iv.component = Interval::Component::cpu;
      return true;
    case OpKind::collective: iv.activity = Activity::communication; return true;
    case OpKind::copy:
      iv.activity = op.stream == Stream::nvme_write  ? Activity::nvme_write
                    : op.stream == Stream::nvme_read ? Activity::nvme_read
                                                     : Activity::copy;
      if (op.stream == Stream::nvme_read || op.stream == Stream::nvme_write) iv.component = Interval::Component::nvme;
      return true;
    default: return false;
  }
}

// Every op's interval, for the power model. A folded run's first layer (Lowered::fold, n >= 2)
// lasted n times as long as each of its layers: its intervals come out as its n layers', one after
// another, each op at 1/n of its folded time and place, so that what else runs meanwhile (a
// pipeline send) meets the kernels it meets with every layer lowered.
void activity_of(const schedule::StepIR& ir, const Lowered& l, const des::Result& r, StageRun& out) {
  std::vector<Interval> layer;  // the folded first layer's intervals
  des::Time layer_from = 0;
  out.intervals.reserve(ir.ops.size());  // about one per op: no regrowing
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if (l.folded(i)) continue;
    const int fold = l.fold.empty() ? 1 : l.fold[i];
    if (fold > 1 && (i == 0 || l.fold[i - 1] < 2)) layer_from = l.start(r, i);
    const des::Time start = l.start(r, i), end = l.end(r, i);
    Interval iv;
    iv.start_s = static_cast<double>(start) * 1e-9;
    iv.end_s = static_cast<double>(end) * 1e-9;
    iv.lane = static_cast<std::uint8_t>(op.stream);
    if (end > start && activity_kind(op, iv)) {
      if (op.stream == Stream::nvme_write) out.nvme_written += op.bytes;
      if (fold > 1)
        layer.push_back(iv);
      else
        push_merged(out.intervals, iv);
    }
    if (fold < 2 || (i + 1 < ir.ops.size() && l.fold[i + 1] > 1)) continue;
    // The end of a folded first layer: its n layers' intervals.
    const double from = static_cast<double>(layer_from) * 1e-9, each = (static_cast<double>(end) * 1e-9 - from) / fold;
    for (int k = 0; k < fold; ++k)
      for (const Interval& x : layer) {
        Interval piece = x;
        piece.start_s = from + k * each + (x.start_s - from) / fold;
        piece.end_s = from + k * each + (x.end_s - from) / fold;
        push_merged(out.intervals, piece);
      }
    layer.clear();
  }
}

// StageRun::compute_s alone, as collect_stage sums it (the GPU kernels' time on the compute
// stream, Lowered::kernels): what picks the busiest stage.
double compute_s_of(const Lowered& l, const des::Result& r) {
  double s = 0;
  for (const std::size_t i : l.kernels) s += static_cast<double>(l.end(r, i) - l.start(r, i)) * 1e-9;
  return s;
}

// The compute stream's time computing (StageRun::compute_s) and its gaps spent waiting for a
// collective or copy (exposed communication; any other gap is idle, pipeline bubbles included),
// counting what ops starting in [from, to) contribute (the whole run: from 0 on, to the end).
void compute_and_exposed(const schedule::StepIR& ir, const Lowered& l, const des::Result& r, des::Time from,
                         des::Time to, double& compute, double& exposed) {
  compute = exposed = 0;
  // Folded layers (Lowered::fold): a run's first layer stands for n. What of it runs after its
  // last compute-stream op (a collective) stood between each two layers, each time exposed, and
  // then before the op after the run, where it merges with that op's own wait (`skip`: the part of
  // that op's gap the layers in between took), as with every layer lowered.
  des::Time prev_end = 0;
  double skip = 0;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    const bool kernel_stream = op.stream == Stream::compute && !l.folded(i);
    const des::Time start = kernel_stream ? l.start(r, i) : 0, end = kernel_stream ? l.end(r, i) : 0;
    if (kernel_stream) {
      if (start >= to) break;  // the stream runs in order: nothing after starts inside
      const bool inside = from <= start;
      if (inside && gpu_kernel(op)) compute += static_cast<double>(end - start) * 1e-9;
      const double gap = static_cast<double>(start - prev_end) * 1e-9 - skip;
      skip = 0;
      if (inside && gap > 0) {
        bool comm = false;
        for (int d : op.deps) {
          const Op& dep = ir.ops[d];
          if ((dep.kind == OpKind::collective && dep.collective != Collective::send_recv) || dep.kind == OpKind::copy)
            if (l.end(r, d) >= start) comm = true;
        }
        if (comm) exposed += gap;
      }
      prev_end = std::max(prev_end, end);
    }
    const int fold = l.fold.empty() ? 1 : l.fold[i];
    if (fold > 1 && (i + 1 == ir.ops.size() || l.fold[i + 1] < 2)) {
      const double trailing = static_cast<double>(std::max<des::Time>(0, l.end(r, i) - prev_end)) * 1e-9;
      skip = trailing * (fold - 1) / fold;
      if (from <= l.start(r, i) && l.start(r, i) < to) exposed += skip;
    }
  }
}

}  // namespace

StageRun collect_stage(const des::Engine& e, const des::Result& r, const schedule::StepIR& ir, const Lowered& l,
                       bool activity) {
  StageRun out;
  out.step_s = static_cast<double>(r.makespan) * 1e-9;
  for (std::size_t t = 0; t < plan::kTierCount; ++t)
    if (l.has_pool[t]) out.peak[t] = r.pool_peak_bytes[l.pools[t].index];
  for (const des::QueueId q : l.queues) {
    const double busy = static_cast<double>(r.queue_busy[q.index]) * 1e-9;
    if (busy <= 0) continue;
    out.streams.push_back({e.queue_name(q), busy, out.step_s > 0 ? busy / out.step_s : 0});
  }
  for (const des::LinkId k : l.links) {
    if (r.link_bytes[k.index] <= 0) continue;
    const double busy = static_cast<double>(r.link_busy[k.index]) * 1e-9;
    out.links.push_back({e.link_name(k), r.link_bytes[k.index], busy, out.step_s > 0 ? busy / out.step_s : 0});
  }
  if (!activity) return out;
  compute_and_exposed(ir, l, r, 0, std::numeric_limits<des::Time>::max(), out.compute_s, out.exposed_comm_s);
  activity_of(ir, l, r, out);  // what each component did, for the power model
  return out;
}

std::string live_by_category(const schedule::StepIR& ir, const Lowered& l, const des::Result& r,
                             const des::OutOfMemory& oom) {
  std::array<double, inventory::kCategories> live{};
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if ((op.kind != OpKind::alloc && op.kind != OpKind::free) || l.task[i].index == des::kNone) continue;
    const schedule::Tensor& t = ir.tensors[op.tensor];
    const std::size_t tier = plan::tier_index(t.tier);
    if (!l.has_pool[tier] || l.pools[tier].index != oom.pool.index) continue;
    const des::Time end = r.tasks[l.task[i].index].end;
    if (end == des::kNever || end > oom.time || (end == oom.time && l.task[i].index > oom.task.index)) continue;
    live[static_cast<std::size_t>(t.category)] += op.kind == OpKind::alloc ? t.bytes : -t.bytes;
  }
  std::vector<std::pair<double, int>> largest;
  for (int c = 0; c < inventory::kCategories; ++c)
    if (live[static_cast<std::size_t>(c)] > 0.005 * oom.live_bytes)
      largest.emplace_back(live[static_cast<std::size_t>(c)], c);
  std::sort(largest.rbegin(), largest.rend());
  std::vector<std::string> parts;
  for (const auto& [bytes, c] : largest)
    parts.push_back(
        fmt::format("{} {:.2f} GiB", inventory::to_string(static_cast<inventory::Category>(c)), bytes / (1u << 30)));
  return parts.empty() ? std::string() : fmt::format(" ({})", fmt::join(parts, ", "));
}

namespace {

// A stage's memory by phase of a 1F1B step (StageRun::PhasePeaks): before the first backward
// (ramp, and what is held as it starts), while forwards and backwards alternate (steady), after
// the last backward.
StageRun::PhasePeaks phase_peaks(const schedule::StepIR& ir, const Lowered& l, const des::Result& r) {
  des::Time first_backward = std::numeric_limits<des::Time>::max(), last_forward = 0, last_backward = 0;
  int first_micro = -1;  // the micro-batch of the first backward
  for (const std::size_t i : l.kernels) {
    const Op& op = ir.ops[i];
    if (op.pass == schedule::Pass::backward) {
      if (l.start(r, i) < first_backward) first_micro = op.micro;
      first_backward = std::min(first_backward, l.start(r, i));
      last_backward = std::max(last_backward, l.end(r, i));
    } else if (op.pass == schedule::Pass::forward) {
      last_forward = std::max(last_forward, l.end(r, i));
    }
  }
  des::Time first_done = 0;  // the end of that micro-batch's backward
  for (const std::size_t i : l.kernels)
    if (ir.ops[i].pass == schedule::Pass::backward && ir.ops[i].micro == first_micro)
      first_done = std::max(first_done, l.end(r, i));
  StageRun::PhasePeaks pk;
  for (std::size_t t = 0; t < plan::kTierCount; ++t) {
    if (!l.has_pool[t]) continue;
    for (const des::PoolSample& x : r.pool_series[l.pools[t].index]) {
      if (x.time < first_backward) pk.held[t] = x.live_bytes;
      if (x.time <= first_done) pk.first[t] = std::max(pk.first[t], x.live_bytes);
      double& peak = x.time > last_backward                               ? pk.after[t]
                     : x.time >= first_backward && x.time <= last_forward ? pk.steady[t]
                                                                          : pk.ramp[t];
      peak = std::max(peak, x.live_bytes);
    }
    pk.steady[t] = std::max(pk.steady[t], pk.held[t]);
  }
  return pk;
}

// The first pool that ran out, when, and what was live in it by category.
std::string out_of_memory(const LoweredStep& step, const des::Result& r, const std::vector<schedule::StepIR>& irs) {
  const auto& oom = r.out_of_memory.front();
  std::string problem =
      fmt::format("{} ran out of memory at {:.3f} s: {:.2f} GiB live of {:.2f} GiB", step.e.pool_name(oom.pool),
                  static_cast<double>(oom.time) * 1e-9, oom.live_bytes / (1u << 30), oom.capacity_bytes / (1u << 30));
  for (std::size_t s = 0; s < irs.size(); ++s) {
    const Lowered& l = step.lowered[step.reported[s]];
    bool in_rank = false;
    for (std::size_t t = 0; t < plan::kTierCount; ++t) in_rank |= l.has_pool[t] && l.pools[t].index == oom.pool.index;
    if (in_rank) {
      problem += live_by_category(irs[s], l, r, oom);
      break;
    }
  }
  return problem;
}

// The same run as data: one rank's streams, links and pools (Options::trace).
StepTracks tracks_of(const des::Engine& e, const des::Result& r, const Lowered& l) {
  StepTracks tracks;
  std::set<std::string> mine;
  for (const des::QueueId q : l.queues) mine.insert(e.queue_name(q));
  for (const des::LinkId k : l.links) mine.insert(e.link_name(k));
  const des::TraceTracks traced = des::trace_tracks(e, r);
  const auto convert = [&](const std::vector<des::TraceTrack>& in, std::vector<Track>& to) {
    for (const des::TraceTrack& t : in) {
      if (!mine.count(t.name)) continue;
      Track track{t.name, {}};
      for (const des::TraceSpan& s : t.spans)
        track.spans.push_back({s.name, s.category, static_cast<double>(s.begin) * 1e-9,
                               static_cast<double>(s.end) * 1e-9, s.bytes, s.critical});
      to.push_back(std::move(track));
    }
  };
  convert(traced.queues, tracks.streams);
  convert(traced.links, tracks.links);
  for (std::size_t t = 0; t < plan::kTierCount; ++t) {
    if (!l.has_pool[t]) continue;
    for (const des::PoolSample& x : r.pool_series[l.pools[t].index])
      tracks.memory[t].push_back({static_cast<double>(x.time) * 1e-9, x.live_bytes});
    tracks.capacity_bytes[t] = e.pool_capacity(l.pools[t]);
  }
  return tracks;
}

}  // namespace

StageRun collect_step(const LoweredStep& step, const des::Result& r, const std::vector<schedule::StepIR>& irs,
                      int& stage_out, bool activity, bool trace, bool phases, int trace_stage) {
  const int pp = static_cast<int>(irs.size());
  const des::Engine& e = step.e;
  const std::vector<Lowered>& lowered = step.lowered;
  const std::vector<int>& reported = step.reported;
  const std::string& problem = step.problem;
  StageRun out;
  int best = 0;
  double best_busy = -1;
  plan::PerTier<double> peaks{};
  for (std::size_t i = 0; i < lowered.size(); ++i)
    for (std::size_t t = 0; t < plan::kTierCount; ++t)
      if (lowered[i].has_pool[t]) peaks[t] = std::max(peaks[t], r.pool_peak_bytes[lowered[i].pools[t].index]);
  std::vector<StageRun::PhasePeaks> stage_peaks(phases ? pp : 0);
  // The busiest stage by its compute time, then its figures (and timeline) read once.
  for (int s = 0; s < pp; ++s) {
    if (phases) stage_peaks[s] = phase_peaks(irs[s], lowered[reported[s]], r);
    const double busy = pp == 1 ? 0 : compute_s_of(lowered[reported[s]], r);
    if (busy > best_busy) {
      best_busy = busy;
      best = s;
    }
  }
  out = collect_stage(e, r, irs[best], lowered[reported[best]], activity);
  out.peak = peaks;
  out.stage_peaks = std::move(stage_peaks);
  if (!r.completed) out.problem = "the simulated step could not finish (a dependency cycle in the schedule)";
  if (!problem.empty()) out.problem = problem;
  if (!r.out_of_memory.empty()) out.problem = out_of_memory(step, r, irs);
  if (trace) {
    out.trace = des::chrome_trace(e, r);
    const int shown = trace_stage >= 0 && trace_stage < pp ? trace_stage : best;
    out.tracks = tracks_of(e, r, lowered[reported[shown]]);
    out.tracks.stage = shown;
  }
  stage_out = best;
  return out;
}

void mark_steady_window(LoweredStep& step, const std::vector<schedule::StepIR>& irs, int period) {
  constexpr std::size_t none = Lowered::kNoOp;
  for (std::size_t s = 0; s < irs.size(); ++s) {
    Lowered& l = step.lowered[step.reported[s]];
    const schedule::StepIR& ir = irs[s];
    l.window[0] = l.window[1] = none;
    bool after_backward = false;
    std::size_t from = none;
    for (const std::size_t i : l.kernels) {
      const Op& op = ir.ops[i];
      if (!after_backward) {
        after_backward = op.pass == schedule::Pass::backward;
        continue;
      }
      if (op.pass != schedule::Pass::forward) continue;
      if (from == none) {
        from = i;
        continue;
      }
      const Op& a = ir.ops[from];
      if (op.micro == a.micro + period && op.layer == a.layer && op.kind == a.kind) {
        l.window[0] = from;
        l.window[1] = i;
        step.e.mark(l.task[from]);
        step.e.mark(l.task[i]);
        break;
      }
    }
  }
}

// long: one derivation (the stage-symmetry figures of lowering.hpp, less one period) step by
// step over the same run; its intermediate figures are read by every later step.
std::optional<StageRun> less_one_period(const LoweredStep& step, const des::Result& r, const schedule::StepIR& ir,
                                        int stage, const StageRun& whole, int period, bool activity) {
  const Lowered& l = step.lowered[step.reported[stage]];
  if (l.window[0] == Lowered::kNoOp) return std::nullopt;
  const auto snapshot = [&](std::size_t op) -> const des::Snapshot* {
    for (const des::Snapshot& x : r.snapshots)
      if (x.task.index == l.task[op].index) return &x;
    return nullptr;
  };
  const des::Snapshot *a = snapshot(l.window[0]), *b = snapshot(l.window[1]);
  if (!a || !b || b->time <= a->time) return std::nullopt;
  const des::Time from = a->time, to = b->time, w = to - from;
  // Periodic: the window's ops against the next period's, as far as the last forward (after it
  // the drain begins). Allocations and frees take no time and are left out: the first backward of
  // a chunk allocates its gradients, the next period's does not.
  std::size_t last_forward = ir.ops.size();
  while (last_forward > 0) {
    const Op& op = ir.ops[--last_forward];
    if (op.stream == Stream::compute && op.pass == schedule::Pass::forward && gpu_kernel(op)) break;
  }
  const auto timed = [&](std::size_t i) {
    const Op& op = ir.ops[i];
    return op.kind != OpKind::alloc && op.kind != OpKind::free && !l.folded(i) && l.task[i].index != des::kNone;
  };
  int checked = 0;
  for (std::size_t i = l.window[0], j = l.window[1];; ++i, ++j) {
    while (i < l.window[1] && !timed(i)) ++i;
    while (j <= last_forward && !timed(j)) ++j;
    if (i >= l.window[1] || j > last_forward) break;
    const Op &x = ir.ops[i], &y = ir.ops[j];
    const bool per_micro =
        x.pass == schedule::Pass::forward || x.pass == schedule::Pass::recompute || x.pass == schedule::Pass::backward;
    if (x.kind != y.kind || x.stream != y.stream || x.layer != y.layer || x.pass != y.pass ||
        (per_micro && y.micro != x.micro + period) || l.start(r, j) - l.start(r, i) != w ||
        l.end(r, j) - l.end(r, i) != w)
      return std::nullopt;
    ++checked;
  }
  if (checked == 0) return std::nullopt;

  StageRun less = whole;
  const double ws = static_cast<double>(w) * 1e-9;
  less.step_s -= ws;
  if (activity) {
    double compute = 0, exposed = 0;
    compute_and_exposed(ir, l, r, from, to, compute, exposed);
    less.compute_s -= compute;
    less.exposed_comm_s -= exposed;
  }
  // Busy times and bytes: the snapshots' differences, corrected for the window's chained
  // collectives as credit_chained corrects the whole run's (the engine counted their time on the
  // compute stream; it belongs to the comm stream, their bytes and data-moving time to NVLink).
  const des::Engine& e = step.e;
  const auto busy = [](des::Time x) { return static_cast<double>(x) * 1e-9; };
  const auto take_stream = [&](des::QueueId q, double s) {
    for (StreamUse& st : less.streams)
      if (st.name == e.queue_name(q)) st.busy_s -= s;
  };
  const auto take_link = [&](des::LinkId k, double bytes, double s) {
    for (LinkUse& x : less.links)
      if (x.name == e.link_name(k)) {
        x.bytes -= bytes;
        x.busy_s -= s;
      }
  };
  for (const des::QueueId q : l.queues) take_stream(q, busy(b->queue_busy[q.index] - a->queue_busy[q.index]));
  for (const des::LinkId k : l.links)
    take_link(k, b->link_bytes[k.index] - a->link_bytes[k.index], busy(b->link_busy[k.index] - a->link_busy[k.index]));
  for (const Lowered::Chained& c : l.chained) {
    const des::Time start = l.start(r, c.op);
    if (start < from || start >= to) continue;
    const double time = busy(c.lead + l.duration[c.op]);
    take_stream(l.queues[static_cast<int>(Stream::compute)], -time);
    take_stream(l.queues[static_cast<int>(Stream::comm)], time);
    if (c.bytes > 0) take_link(l.nvlink, c.bytes, busy(c.moving));
  }
  // The intervals with the window cut out: what ran before it, then what ran after it, earlier
  // by its length.
  const double t1 = busy(from), t2 = busy(to);
  less.intervals.clear();
  less.intervals.reserve(whole.intervals.size() + 1);
  for (const Interval& iv : whole.intervals) {
    if (iv.start_s < t1) {
      Interval x = iv;
      x.end_s = std::min(iv.end_s, t1);
      push_merged(less.intervals, x);
    }
    if (iv.end_s > t2) {
      Interval x = iv;
      x.start_s = std::max(iv.start_s, t2) - ws;
      x.end_s = iv.end_s - ws;
      push_merged(less.intervals, x);
    }
  }
  return less;
}

}  // namespace detail

}  // namespace ftplan::sim
