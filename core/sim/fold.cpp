// Folded layers (compiled chunks): the consecutive identical layers of a pipeline chunk's pass
// lowered as one layer whose work lasts as long as all of them (docs/performance.md).
#include "sim/lowering.hpp"

namespace ftplan::sim {

namespace detail {

namespace {

// The ops of one layer in one pass of one micro-batch: a maximal span of the IR whose ops with a
// layer all name the same one, with no pipeline send or receive inside (those end a chunk's pass:
// a stage's last layer may run its forward and then, after a receive, its backward) and one
// direction (a first stage's first layer runs a backward and then, with no receive between, the
// next micro-batch's forward: the allocations just before the forward's first op are its own);
// ops without a layer inside the span belong to it.
struct Group {
  std::size_t first, last;
};

std::vector<Group> layer_groups(const schedule::StepIR& ir) {
  std::vector<Group> out;
  int current = -1, direction = -1;  // direction: 0 forward, 1 recompute or backward
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if (op.peer >= 0) current = -1;
    if (op.layer < 0) continue;
    const int dir = op.pass == schedule::Pass::forward                                            ? 0
                    : op.pass == schedule::Pass::backward || op.pass == schedule::Pass::recompute ? 1
                                                                                                  : -1;
    if (op.layer == current && !out.empty() && !(dir >= 0 && direction >= 0 && dir != direction)) {
      out.back().last = i;
    } else if (op.layer == current && !out.empty()) {
      std::size_t from = i;
      while (from - 1 > out.back().first && ir.ops[from - 1].kind == OpKind::alloc) --from;
      out.back().last = from - 1;
      out.push_back({from, i});
    } else {
      out.push_back({i, i});
    }
    current = op.layer;
    if (dir >= 0) direction = dir;
    if (out.back().first == i) direction = dir;
  }
  return out;
}

// Whether two ops do the same work: what lowering reads of them, by kind (compute_seconds,
// collective_cost, host_path, the pools), and the pass (collect's phases); not the layer, the
// micro-batch, the tensor's identity or the dependencies.
bool same_work(const schedule::StepIR& ir, const Op& a, const Op& b) {
  if (a.kind != b.kind || a.stream != b.stream || a.pass != b.pass || a.peer != b.peer ||
      a.deps.size() != b.deps.size())
    return false;
  switch (a.kind) {
    case OpKind::gemm:
    case OpKind::attention:
    case OpKind::elementwise:
    case OpKind::loss:
    case OpKind::optimizer:
      return a.flops == b.flops && a.bytes == b.bytes && a.kernels == b.kernels && a.m == b.m && a.n == b.n &&
             a.k == b.k && a.fp8 == b.fp8 && a.flash == b.flash && a.flash_v1 == b.flash_v1 && a.causal == b.causal &&
             a.weight_grad == b.weight_grad;
    case OpKind::collective:
      return a.collective == b.collective && a.group == b.group && a.group_size == b.group_size && a.bytes == b.bytes &&
             a.host_s == b.host_s && a.kernels == b.kernels && a.element == b.element;
    case OpKind::copy: return a.src == b.src && a.dst == b.dst && a.bytes == b.bytes && a.host_s == b.host_s;
    case OpKind::alloc:
    case OpKind::free: {
      const schedule::Tensor &x = ir.tensors[a.tensor], &y = ir.tensors[b.tensor];
      return x.bytes == y.bytes && x.tier == y.tier && x.category == y.category;
    }
    case OpKind::marker: return true;
  }
  return false;
}

// Group `b` repeats group `a`, the one before it: the same work op by op, each dependency inside
// its own group at the same place, and any other dependency of `b` on the last op of `a` (the
// previous layer's end) where `a` has one outside itself.
bool repeats(const schedule::StepIR& ir, const Group& a, const Group& b) {
  if (b.first != a.last + 1 || b.last - b.first != a.last - a.first) return false;
  for (std::size_t k = 0; k <= a.last - a.first; ++k) {
    const Op& x = ir.ops[a.first + k];
    const Op& y = ir.ops[b.first + k];
    if (!same_work(ir, x, y)) return false;
    for (std::size_t d = 0; d < x.deps.size(); ++d) {
      const auto dx = static_cast<std::size_t>(x.deps[d]), dy = static_cast<std::size_t>(y.deps[d]);
      const bool in_x = dx >= a.first, in_y = dy >= b.first;
      if (in_x != in_y) return false;
      if (in_x ? dx - a.first != dy - b.first : dy != a.last) return false;
    }
  }
  return true;
}

// A run's ops form one serial chain: on the compute and comm streams only, each waiting on the op
// before it (explicitly, or as the next op of the same stream), and every other wait on an op the
// run's first op waits on too, or on an op of the compute stream issued before the run (either is
// finished before the run starts, the stream being serial); the run starts on the compute stream.
bool serial(const schedule::StepIR& ir, std::size_t first, std::size_t last) {
  if (ir.ops[first].stream != Stream::compute) return false;
  for (std::size_t i = first; i <= last; ++i) {
    const Op& op = ir.ops[i];
    if (op.stream != Stream::compute && op.stream != Stream::comm) return false;
    if (op.kind == OpKind::collective && op.collective == Collective::send_recv) return false;
    bool after_previous = i == first || ir.ops[i - 1].stream == op.stream;
    for (int d : op.deps) {
      const auto dep = static_cast<std::size_t>(d);
      after_previous = after_previous || dep == i - 1;
      if (dep < first && i != first && ir.ops[dep].stream != Stream::compute &&
          std::find(ir.ops[first].deps.begin(), ir.ops[first].deps.end(), d) == ir.ops[first].deps.end())
        return false;
    }
    if (!after_previous) return false;
  }
  return true;
}

}  // namespace

std::vector<int> fold_layers(const schedule::StepIR& ir) {
  std::vector<int> fold(ir.ops.size(), 1);
  const std::vector<Group> groups = layer_groups(ir);
  std::vector<std::pair<std::size_t, std::size_t>> runs;  // first and last group
  for (std::size_t g = 0; g < groups.size();) {
    std::size_t h = g;
    while (h + 1 < groups.size() && repeats(ir, groups[h], groups[h + 1])) ++h;
    if (h > g && serial(ir, groups[g].first, groups[h].last)) runs.emplace_back(g, h);
    g = h + 1;
  }
  if (runs.empty()) return fold;
  // Which run each op is in, to check that nothing outside a run waits on an op of it but its last.
  std::vector<int> run_of(ir.ops.size(), -1);
  for (std::size_t r = 0; r < runs.size(); ++r)
    for (std::size_t i = groups[runs[r].first].first; i <= groups[runs[r].second].last; ++i)
      run_of[i] = static_cast<int>(r);
  std::vector<char> ok(runs.size(), 1);
  for (std::size_t i = 0; i < ir.ops.size(); ++i)
    for (int d : ir.ops[i].deps) {
      const int r = run_of[d];
      if (r >= 0 && run_of[i] != r && static_cast<std::size_t>(d) != groups[runs[r].second].last) ok[r] = 0;
    }
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (!ok[r]) continue;
    const auto [g, h] = runs[r];
    const int copies = static_cast<int>(h - g + 1);
    for (std::size_t i = groups[g].first; i <= groups[g].last; ++i) fold[i] = copies;
    for (std::size_t i = groups[g + 1].first; i <= groups[h].last; ++i) fold[i] = 0;
  }
  return fold;
}

bool folds_undisturbed(const LoweredStep& step, const des::Result& r) {
  for (const Lowered& l : step.lowered) {
    if (l.folds.empty()) continue;
    // The runs of a stage follow one another on its serial compute stream: in time order.
    // Each run's span, and when it first holds a link: its first collective starts after the ops
    // before it in the first layer, which took `copies` times as long folded as one layer's do (a
    // flow that ends before one layer's worth of them, such as the pipeline send issued as the
    // run starts, meets neither form of the run; less `copies` ns of rounding).
    struct Span {
      des::Time from, to, links_from;
    };
    std::vector<Span> spans;
    spans.reserve(l.folds.size());
    for (const Lowered::Holder& run : l.folds) {
      const des::Time from = l.start(r, run.first), copies = l.fold[run.first];
      const des::Time first_link = !(run.nvlink || run.nic)        ? l.end(r, run.last)
                                   : run.from_op != Lowered::kNoOp ? l.start(r, run.from_op) - run.from_lead
                                                                   : r.tasks[run.from.index].start;
      spans.push_back({from, l.end(r, run.last), from + (first_link - from) / copies - copies});
    }
    for (const Lowered::Holder& o : l.others) {
      const des::Time from = r.tasks[o.from.index].start, to = l.end(r, o.last);
      // A run with chained collectives (Lowered::chained) left the comm stream's queue: an op of
      // that stream issued before it must be done as it starts, one issued after it must not
      // start before it ends (else the queue's order would have held one of them back). Runs
      // follow one another on the compute stream, in time as in issue order.
      if (o.comm) {
        auto after = std::upper_bound(l.folds.begin(), l.folds.end(), o.first,
                                      [](std::size_t op, const Lowered::Holder& run) { return op < run.first; });
        for (auto it = after; it != l.folds.end() && spans[static_cast<std::size_t>(it - l.folds.begin())].from < to;
             ++it)
          if (it->chained) return false;
        for (auto it = after;
             it != l.folds.begin() && spans[static_cast<std::size_t>(it - 1 - l.folds.begin())].to > from;)
          if ((--it)->chained) return false;
      }
      // The first run ending after `from`, and those after it that start before `to`.
      auto it =
          std::upper_bound(spans.begin(), spans.end(), from, [](des::Time t, const Span& span) { return t < span.to; });
      for (; it != spans.end() && it->from < to; ++it) {
        const Lowered::Holder& run = l.folds[static_cast<std::size_t>(it - spans.begin())];
        const bool links = (o.nvlink && run.nvlink) || (o.nic && run.nic);
        if ((o.comm && run.comm) || (links && to > it->links_from)) return false;
      }
    }
  }
  return true;
}

}  // namespace detail

}  // namespace ftplan::sim
