#include "ir_checks.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "inventory/inventory.hpp"

namespace ftplan::exec {

using inventory::Category;
using plan::Tier;
using schedule::Op;
using schedule::OpKind;
using schedule::Stream;

AttentionCall attention_call(const schedule::Op& op) {
  AttentionCall a{op.m, op.n, op.k, 0};
  const double per = 4.0 * static_cast<double>(op.m) * static_cast<double>(op.n) * static_cast<double>(op.k);
  if (per <= 0 || op.flops <= 0) return a;
  a.repeats = std::max(1, static_cast<int>(op.flops / per));
  a.n = std::max<std::int64_t>(
      1, std::llround(op.flops / (4.0 * static_cast<double>(op.m) * static_cast<double>(op.k) * a.repeats)));
  return a;
}

std::vector<std::vector<std::size_t>> stream_order(const schedule::StepIR& ir) {
  std::vector<std::vector<std::size_t>> out(schedule::kStreams);
  for (std::size_t i = 0; i < ir.ops.size(); ++i) out[static_cast<std::size_t>(ir.ops[i].stream)].push_back(i);
  return out;
}

namespace {

// Run the workers symbolically: each takes its next op when that op's deps are done; until no
// worker can move. Every op must be taken; else which stream waits forever, and where.
std::string deadlock(const schedule::StepIR& ir) {
  const auto order = stream_order(ir);
  std::vector<std::size_t> next(order.size(), 0);
  std::vector<char> done(ir.ops.size(), 0);
  std::size_t taken = 0;
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t s = 0; s < order.size(); ++s)
      while (next[s] < order[s].size()) {
        const std::size_t i = order[s][next[s]];
        bool ready = true;
        for (const int d : ir.ops[i].deps)
          ready = ready && d >= 0 && static_cast<std::size_t>(d) < ir.ops.size() && done[static_cast<std::size_t>(d)];
        if (!ready) break;
        done[i] = 1;
        ++next[s];
        ++taken;
        moved = true;
      }
  }
  if (taken != ir.ops.size()) {
    for (std::size_t s = 0; s < order.size(); ++s)
      if (next[s] < order[s].size())
        return fmt::format("stream {} waits forever at op {} ({}): {} of {} ops ran",
                           schedule::to_string(static_cast<Stream>(s)), order[s][next[s]],
                           ir.ops[order[s][next[s]]].name, taken, ir.ops.size());
  }
  return {};
}

// Races: streams run concurrently, so an op may use a tensor only once its allocation has
// happened before it (through deps and stream order), and a free must come after every use.
std::string race(const schedule::StepIR& ir) {
  // Vector clocks over the streams: clock[i][s] = how many ops of stream s happen before op i ends.
  const std::size_t n = ir.ops.size();
  std::vector<std::array<std::uint32_t, schedule::kStreams>> clock(n);
  std::vector<std::uint32_t> position(n);  // 1-based place of each op in its stream
  std::array<std::uint32_t, schedule::kStreams> count{};
  std::array<int, schedule::kStreams> previous;
  previous.fill(-1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto st = static_cast<std::size_t>(ir.ops[i].stream);
    position[i] = ++count[st];
    auto& c = clock[i];
    c.fill(0);
    const auto join = [&](std::size_t d) {
      for (std::size_t k = 0; k < c.size(); ++k) c[k] = std::max(c[k], clock[d][k]);
    };
    if (previous[st] >= 0) join(static_cast<std::size_t>(previous[st]));
    for (const int d : ir.ops[i].deps) join(static_cast<std::size_t>(d));
    c[st] = position[i];
    previous[st] = static_cast<int>(i);
  }
  const auto before = [&](std::size_t a, std::size_t b) {  // a ends before b starts
    return a == b ? false : clock[b][static_cast<std::size_t>(ir.ops[a].stream)] >= position[a] && (a < b);
  };
  std::vector<int> alloc_of(ir.tensors.size(), -1);
  std::vector<std::vector<std::size_t>> users(ir.tensors.size());
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = ir.ops[i];
    if (op.kind == OpKind::alloc && op.tensor >= 0) {
      alloc_of[static_cast<std::size_t>(op.tensor)] = static_cast<int>(i);
      users[static_cast<std::size_t>(op.tensor)].clear();
      continue;
    }
    if (op.kind == OpKind::free && op.tensor >= 0) {
      for (const std::size_t u : users[static_cast<std::size_t>(op.tensor)])
        if (!before(u, i))
          return fmt::format("op {} ({}) frees {} while op {} ({}) may still use it", i, op.name,
                             ir.tensors[static_cast<std::size_t>(op.tensor)].name, u, ir.ops[u].name);
      continue;
    }
    for (const auto* list : {&op.reads, &op.writes})
      for (const int t : *list) {
        const int a = alloc_of[static_cast<std::size_t>(t)];
        if (a >= 0 && !before(static_cast<std::size_t>(a), i))
          return fmt::format("op {} ({}) may use {} before op {} ({}) allocates it", i, op.name,
                             ir.tensors[static_cast<std::size_t>(t)].name, a, ir.ops[static_cast<std::size_t>(a)].name);
        users[static_cast<std::size_t>(t)].push_back(i);
      }
  }
  return {};
}

}  // namespace

std::string schedulable(const schedule::StepIR& ir) {
  std::string why = deadlock(ir);
  return why.empty() ? race(ir) : why;
}

std::string unsupported(const schedule::StepIR& ir) {
  for (const Op& op : ir.ops) {
    if (op.kind == OpKind::collective && op.group_size > 1)
      return fmt::format("the step has collectives over {} ranks ({}); the executor runs one rank", op.group_size,
                         op.name);
    if (op.kind == OpKind::marker && op.peer >= 0)
      return "the step is one stage of a pipeline; the executor runs one rank";
  }
  for (const auto& t : ir.tensors)
    if (t.category == Category::gradients && t.tier == Tier::nvme)
      return "the plan keeps gradients on NVMe, and the IR never reads them back for the optimizer step";
  return {};
}

}  // namespace ftplan::exec
