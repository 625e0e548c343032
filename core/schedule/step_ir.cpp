#include "schedule/builder.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "common/error.hpp"
#include "plan/checks.hpp"

namespace ftplan::schedule {

void Ids::grow() {
  const std::uint32_t capacity = capacity_ * 2;
  int* heap = new int[capacity];
  const int* from = data();
  for (std::uint32_t k = 0; k < size_; ++k) heap[k] = from[k];
  release();
  heap_ = heap;
  capacity_ = capacity;
}

const char* to_string(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::comm: return "comm";
    case Stream::comm_reduce: return "comm-reduce";
    case Stream::h2d: return "h2d";
    case Stream::d2h: return "d2h";
    case Stream::cpu: return "cpu";
    case Stream::nvme_read: return "nvme-read";
    case Stream::nvme_write: return "nvme-write";
    case Stream::p2p: return "p2p";
  }
  return "?";
}

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::elementwise: return "elementwise";
    case OpKind::loss: return "loss";
    case OpKind::optimizer: return "optimizer";
    case OpKind::collective: return "collective";
    case OpKind::copy: return "copy";
    case OpKind::alloc: return "alloc";
    case OpKind::free: return "free";
    case OpKind::marker: return "marker";
  }
  return "?";
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all-reduce";
    case Collective::all_gather: return "all-gather";
    case Collective::reduce_scatter: return "reduce-scatter";
    case Collective::all_to_all: return "all-to-all";
    case Collective::send_recv: return "send/recv";
  }
  return "?";
}

const char* to_string(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::recompute: return "recompute";
    case Pass::backward: return "backward";
    case Pass::optimizer: return "optimizer";
    case Pass::other: return "other";
  }
  return "?";
}

std::vector<PipeAction> pipeline_order(plan::PipelineSchedule schedule, int pp, int stage, int micro_batches,
                                       int chunks) {
  std::vector<PipeAction> order;
  const int m = std::max(1, micro_batches);
  pp = std::max(1, pp);
  if (pp == 1 || schedule == plan::PipelineSchedule::gpipe) {
    // Without a pipeline each micro-batch's backward follows its forward (gradient accumulation).
    for (int mb = 0; mb < m; ++mb) {
      order.push_back({false, mb, 0});
      if (pp == 1) order.push_back({true, mb, 0});
    }
    if (pp > 1)
      for (int mb = 0; mb < m; ++mb) order.push_back({true, mb, 0});
    return order;
  }
  if (schedule == plan::PipelineSchedule::one_f_one_b || chunks <= 1) {
    const int warmup = std::min(pp - stage - 1, m);
    for (int mb = 0; mb < warmup; ++mb) order.push_back({false, mb, 0});
    for (int i = 0; i < m - warmup; ++i) {
      order.push_back({false, warmup + i, 0});
      order.push_back({true, i, 0});
    }
    for (int i = m - warmup; i < m; ++i) order.push_back({true, i, 0});
    return order;
  }
  // Interleaved: the k-th forward runs chunk (k mod pp*v) / pp of micro-batch
  // (k / (pp*v)) * pp + k mod pp; backwards walk the chunks in reverse. Micro-batches beyond a
  // multiple of pp (Megatron requires a multiple) form a last, partial group.
  const int v = chunks, total = m * v;
  const auto forward_of = [&](int k, bool backward) {
    const int group = k / (pp * v), in_group = k % (pp * v);
    int chunk = in_group / pp;
    if (backward) chunk = v - 1 - chunk;
    return PipeAction{backward, group * pp + in_group % pp, chunk};
  };
  std::vector<PipeAction> fwd, bwd;
  // Enumerate (micro, chunk) pairs in Megatron's order, skipping micro-batches past m.
  for (int k = 0; static_cast<int>(fwd.size()) < total; ++k) {
    const PipeAction a = forward_of(k, false);
    if (a.micro < m) fwd.push_back(a);
  }
  for (int k = 0; static_cast<int>(bwd.size()) < total; ++k) {
    const PipeAction a = forward_of(k, true);
    if (a.micro < m) bwd.push_back(a);
  }
  const int warmup = std::min(total, (pp - stage - 1) * 2 + (v - 1) * pp);
  for (int k = 0; k < warmup; ++k) order.push_back(fwd[k]);
  for (int i = 0; i < total - warmup; ++i) {
    order.push_back(fwd[warmup + i]);
    order.push_back(bwd[i]);
  }
  for (int i = total - warmup; i < total; ++i) order.push_back(bwd[i]);
  return order;
}

std::int64_t layer_passes(const model::ModelSpec& model, const plan::Plan& plan, std::int64_t micro_batches) {
  std::int64_t m = std::max<std::int64_t>(1, plan::grad_accumulation_steps(plan));
  if (micro_batches > 0) m = std::min(m, micro_batches);
  // Every stage builds m micro-batches of its layers: the stages together hold every layer once.
  return m * std::max(1, model.total_layers());
}

std::string too_large(const model::ModelSpec& model, const plan::Plan& plan, std::int64_t micro_batches) {
  const std::int64_t passes = layer_passes(model, plan, micro_batches);
  if (passes <= kMaxLayerPasses) return {};
  return fmt::format(
      "not simulated: the step is {} micro-batches x {} layers = {} layer passes, more than ftplan's "
      "limit of {} for one step (every op of the step is held in memory); the steady-state shortcut "
      "simulates it (the default; not with simulate --trace, a sweep's steady_state: false or a "
      "GPipe schedule), or raise job.micro_batch or lower job.global_batch",
      passes / std::max(1, model.total_layers()), std::max(1, model.total_layers()), passes, kMaxLayerPasses);
}

StepIR build_step(const model::ModelSpec& model, const plan::Plan& plan, const inventory::Inventory& inventory,
                  int micro_batches, bool names, PipelineView view) {
  if (std::string why = too_large(model, plan, micro_batches); !why.empty()) throw std::length_error(why);
  FTPLAN_ASSERT(view.stages <= 0 || (view.position >= 0 && view.position < view.stages), "a view's stage lies in it");
  return detail::Builder(model, plan, inventory, micro_batches, names, view).build();
}

std::vector<std::string> dry_run(const StepIR& ir) {
  std::vector<std::string> problems;
  std::vector<int> state(ir.tensors.size(), 0);  // 0 never allocated, 1 live, 2 freed
  // Every tensor can be allocated as described: its elements of its type are its bytes.
  for (std::size_t t = 0; t < ir.tensors.size(); ++t) {
    const Tensor& x = ir.tensors[t];
    const auto elements = static_cast<double>(x.elements);
    if (std::abs(elements * inventory::element_bytes(x.element) - x.bytes) > inventory::element_bytes(x.element))
      problems.push_back(fmt::format("tensor {} '{}': {} elements of {} are not its {} bytes", t, x.name, elements,
                                     inventory::to_string(x.element), x.bytes));
  }
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if (op.kind == OpKind::gemm && (op.m <= 0 || op.n <= 0 || op.k <= 0))
      problems.push_back(fmt::format("op {} '{}' is a GEMM without its shape", i, op.name));
    for (int d : op.deps)
      if (d < 0 || static_cast<std::size_t>(d) >= i)
        problems.push_back(fmt::format("op {} '{}' depends on op {} which does not come before it", i, op.name, d));
    // The tier each op can read from and write to: GPU kernels and collectives touch GPU memory;
    // a copy reads its source tier and writes its destination; the CPU optimizer works in host memory.
    const auto tier_ok = [&](int t, bool write) {
      const Tier tier = ir.tensors[t].tier;
      switch (op.kind) {
        case OpKind::copy: return tier == (write ? op.dst : op.src);
        case OpKind::optimizer: return op.stream == Stream::cpu ? plan::host_memory(tier) : tier == Tier::gpu;
        case OpKind::alloc:
        case OpKind::free:
        case OpKind::marker: return true;
        default: return tier == Tier::gpu;
      }
    };
    for (const auto* list : {&op.reads, &op.writes}) {
      const bool write = list == &op.writes;
      for (int t : *list) {
        if (t < 0 || static_cast<std::size_t>(t) >= ir.tensors.size()) {
          problems.push_back(fmt::format("op {} '{}' uses tensor {} which does not exist", i, op.name, t));
          continue;
        }
        if (!tier_ok(t, write))
          problems.push_back(fmt::format("op {} '{}' {} '{}' in {}, which it cannot reach", i, op.name,
                                         write ? "writes" : "reads", ir.tensors[t].name,
                                         plan::to_string(ir.tensors[t].tier)));
        if (state[t] != 1 && !(write && op.kind == OpKind::alloc))
          problems.push_back(fmt::format(
              "op {} '{}' {} '{}' in {} but it is {}", i, op.name, write ? "writes" : "reads", ir.tensors[t].name,
              plan::to_string(ir.tensors[t].tier), state[t] == 0 ? "not yet allocated" : "freed"));
      }
    }
    if (op.kind == OpKind::alloc) {
      if (state[op.tensor] == 1)
        problems.push_back(fmt::format("op {} allocates '{}' twice", i, ir.tensors[op.tensor].name));
      state[op.tensor] = 1;
    } else if (op.kind == OpKind::free) {
      if (state[op.tensor] != 1)
        problems.push_back(fmt::format("op {} frees '{}' which is not live", i, ir.tensors[op.tensor].name));
      state[op.tensor] = 2;
    }
  }
  return problems;
}

double nvme_written_bytes(const StepIR& ir) {
  double written = 0;
  for (const auto& op : ir.ops)
    if (op.kind == OpKind::copy && op.dst == plan::Tier::nvme) written += op.bytes;
  return written;
}

}  // namespace ftplan::schedule
