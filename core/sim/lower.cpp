#include "sim/lowering.hpp"

#include "common/error.hpp"

namespace ftplan::sim {

namespace detail {

namespace {

// The last few values computed, by key: a stage's layers repeat the same kernels and collectives
// in the same order, so a lookup starts just after the last hit and almost always finds it there.
template <class Key, class Value, std::size_t N = 32>
class Memo {
 public:
  template <class Compute>
  const Value& operator()(const Key& key, Compute&& compute) {
    for (std::size_t n = 0, i = last_ + 1; n < size_; ++n, ++i) {
      if (i >= size_) i = 0;
      if (entries_[i].first == key) {
        last_ = i;
        return entries_[i].second;
      }
    }
    entries_[next_] = {key, compute()};
    last_ = next_;
    next_ = (next_ + 1) % N;
    size_ = std::min(size_ + 1, N);
    return entries_[last_].second;
  }

 private:
  std::array<std::pair<Key, Value>, N> entries_{};
  std::size_t size_ = 0, next_ = 0, last_ = 0;
};

// compute_seconds of the ops of one lowering: identical layers repeat the same few GEMM and
// attention shapes, so their durations are looked up among the last distinct ones (a few dozen)
// rather than recomputed for every layer and micro-batch.
class DurationMemo {
 public:
  double operator()(const Op& op, const plan::Plan& p, const Efficiency& eff) {
    if (op.kind != OpKind::gemm && op.kind != OpKind::attention) return compute_seconds(op, p, eff);
    const Key key{op.kind,    op.pass, op.weight_grad, op.fp8, op.flash, op.flash_v1, op.causal,
                  op.kernels, op.m,    op.n,           op.k,   op.flops, op.bytes};
    return memo_(key, [&] { return compute_seconds(op, p, eff); });
  }

 private:
  struct Key {
    OpKind kind;
    schedule::Pass pass;
    bool weight_grad, fp8, flash, flash_v1, causal;
    int kernels;
    std::int64_t m, n, k;
    double flops, bytes;
    bool operator==(const Key&) const = default;
  };
  Memo<Key, double> memo_;
};

}  // namespace

bool gpu_kernel(const Op& op) {
  return op.stream == Stream::compute &&
         (op.kind == OpKind::gemm || op.kind == OpKind::attention || op.kind == OpKind::elementwise ||
          op.kind == OpKind::loss || op.kind == OpKind::optimizer);
}

des::Time kernel_ns(const Op& op, double base_s, double compute_slowdown) {
  return ns(base_s * (op.kind == OpKind::optimizer ? 1.0 : compute_slowdown));
}

namespace {

using Tasks = std::vector<std::pair<std::int64_t, des::TaskId>>;

// A chained collective's cost and its time alone on NVLink (StageLowering::chain_collective), and
// what they depend on.
struct AloneKey {
  Collective collective = Collective::all_reduce;
  schedule::Group group = schedule::Group::dp;
  int group_size = 0, kernels = 0;
  double host_s = 0, bytes = 0;
  bool operator==(const AloneKey&) const = default;
};
struct AloneCollective {
  CollectiveCost cost;
  des::Time ns = 0, link_latency = 0;
};

// Lowers one rank's IR onto the engine (lower_stage): its queues, pools and tasks, op by op.
class StageLowering {
 public:
  StageLowering(const LoweringContext& cx, const schedule::StepIR& ir, const RankLinks& links, const RankPlace& place)
      : cx_(cx), e_(cx.e), ir_(ir), links_(links), place_(place) {}

  Lowered run() {
    add_queues_and_pools();
    const std::size_t n = ir_.ops.size();
    l_.task.resize(n);
    l_.offset.assign(n, -1);
    l_.duration.assign(n, 0);
    l_.base_s.assign(n, -1.0);
    l_.kernels.reserve(n / 2);  // a third to a half of a stage's ops are kernels
    l_.timed.reserve(n / 2);
    dependents_.assign(n, 0);
    for (const Op& op : ir_.ops)
      for (int d : op.deps) ++dependents_[d];
    pending_.assign(n, 0);
    // The builder's folded runs (PipelineView::fold: its IR leaves their later layers' inner ops
    // out, so it is lowered folded or not at all), else those fold_layers finds.
    FTPLAN_ASSERT(cx_.fold || ir_.fold.empty(), "an IR built folded is lowered folded");
    if (cx_.fold) fold_ = ir_.fold.empty() ? fold_layers(ir_) : ir_.fold;
    // The fold marks read through a local pointer (the calls below could change fold_, as far as
    // the compiler knows; they do not): one load an op, not three.
    const int* const fold = fold_.empty() ? nullptr : fold_.data();
    for (std::size_t i = 0; i < n; ++i) {
      if (fold && i > 0 && fold[i - 1] == 0 && fold[i] != 0) end_run();
      if (fold && fold[i] != 1) {
        if (fold[i] == 0) {
          later_layer(i);
          continue;
        }
        scale_ = fold[i];
        if (fold[i] > 1 && (i == 0 || fold[i - 1] < 2)) l_.folds.push_back({i, i, {}});
      } else {
        scale_ = 1;
      }
      if (gpu_kernel(ir_.ops[i])) {
        l_.kernels.push_back(i);
        if (!cx_.trace) {
          chain_kernel(i);
          continue;
        }
      }
      if (scale_ > 1 && chain_collective(i)) continue;
      lower_op(i);
    }
    if (!fold_.empty() && n > 0 && fold_[n - 1] == 0) end_run();
    flush();
    if (!l_.folds.empty()) l_.fold = std::move(fold_);
    return std::move(l_);
  }

 private:
  void add_queues_and_pools() {
    const std::string& prefix = place_.prefix;
    for (int s = 0; s < schedule::kStreams; ++s)
      l_.queues.push_back(e_.add_queue(prefix + schedule::to_string(static_cast<Stream>(s))));
    l_.links = links_.own;
    l_.nvlink = links_.nvlink;
    l_.nic = links_.nic;
    const plan::PerTier<double> capacity = pool_capacities(cx_.p.cluster);
    for (const plan::TierInfo& t : plan::kTiers) {
      const std::size_t i = plan::tier_index(t.tier);
      l_.has_pool[i] = t.always || capacity[i] > 0;
      if (l_.has_pool[i]) l_.pools[i] = e_.add_pool(prefix + t.pool, capacity[i]);
    }
  }

  // An op's task label: its name (traces only), its kind, its index.
  des::Label label(std::size_t i) const { return label(i, "", schedule::to_string(ir_.ops[i].kind)); }
  des::Label label(std::size_t i, const char* suffix, const char* kind) const {
    return des::Label{cx_.trace ? ir_.ops[i].name + suffix : std::string(), kind, static_cast<std::int32_t>(i)};
  }
  // The fixed cost an op pays before its bytes move (ring steps, DMA setup), as a task on its queue.
  des::TaskId latency_task(des::QueueId q, double seconds, std::size_t i) {
    return e_.compute(q, ns(seconds), label(i, " (latency)", "latency"));
  }
  void after_deps(des::TaskId t, const Op& op) {
    for (int d : op.deps) e_.depends(t, l_.task[d]);
  }
  // The task a collective's latency part waits on: its own deps, or in full fidelity the join of
  // its group instance, which waits for every member's deps.
  void collective_start(std::size_t i, const Op& op, des::TaskId wait) {
    if (!place_.joins) {
      after_deps(wait, op);
      return;
    }
    const auto key = std::make_pair(i, cx_.topo.layout.group_key(place_.at, op.group, op.group_size));
    auto it = place_.joins->find(key);
    if (it == place_.joins->end())
      it = place_.joins->emplace(key, e_.marker(des::kNoQueue, des::Label{std::string(), "join", 0})).first;
    for (int d : op.deps) e_.depends(it->second, l_.task[d]);
    e_.depends(wait, it->second);
  }

  // An op of a folded run's later layers (fold_layers): no task of its own; it takes the task that
  // ends the run's folded chain (the first layer's last op). Its allocation or free goes into the
  // run's pool changes, made as the chain ends (end_run).
  void later_layer(std::size_t i) {
    l_.folds.back().last = i;
    if (fold_[i - 1] > 1) {
      chain_end_ = i - 1;
      pools_ = {};
    }
    if (pending_[chain_end_]) flush();
    l_.task[i] = l_.task[chain_end_];
    l_.offset[i] = Lowered::kFolded;
    const Op& op = ir_.ops[i];
    if (op.kind != OpKind::alloc && op.kind != OpKind::free) return;
    const schedule::Tensor& t = ir_.tensors[op.tensor];
    PoolChange& c = pools_[plan::tier_index(t.tier)];
    c.net += op.kind == OpKind::alloc ? t.bytes : -t.bytes;
    c.high = std::max(c.high, c.net);
    c.any = true;
  }

  // The later layers' allocations and frees of a folded run, as they follow one another when the
  // chain ends: each pool rises to its highest level among them and settles at their sum (the same
  // high-water mark and the same level after, at the same instant).
  void end_run() {
    const std::size_t last = l_.folds.back().last;
    const des::QueueId q = l_.queues[static_cast<int>(Stream::compute)];
    for (std::size_t t = 0; t < plan::kTierCount; ++t) {
      const PoolChange& c = pools_[t];
      if (!c.any) continue;
      des::TaskId after = l_.task[chain_end_];
      if (c.high > 0) {
        const des::TaskId up = e_.alloc(q, l_.pools[t], c.high, label(last));
        e_.depends(up, after);
        after = up;
      }
      if (c.high - c.net > 0) e_.depends(e_.free(q, l_.pools[t], c.high - c.net, label(last)), after);
    }
  }

  // Back-to-back GPU kernels on the compute stream that nothing else waits for in between run as
  // one engine task of their summed (nanosecond-rounded) durations: the stream is serial and
  // their durations are fixed, so every op's start and end are exactly what separate tasks would
  // give (collect_stage reads them back through `offset`). Traces keep one task per op.
  void chain_kernel(std::size_t i) {
    const Op& op = ir_.ops[i];
    // Joins the chain when the chain's last op is the previous op on this stream and only this op
    // waits on it.
    const bool joins = waits_on_chain_end(op) >= 0 && static_cast<int>(chain_.back()) == last_compute_;
    if (!joins) flush();
    append_to_chain(i, 0, kernel_time(i, seconds_of_(op, cx_.p, cx_.eff)));
  }

  // Kernel i takes `seconds` before SM sharing: noted for retime (base_s, timed); its time as
  // lowered, for the run's layers it stands for. Inlined into lower_op as the three copies it
  // replaces were (GCC left it a call: +0.5% instructions on GPT-3's simulation).
  [[gnu::always_inline]] des::Time kernel_time(std::size_t i, double seconds) {
    l_.base_s[i] = seconds;
    l_.timed.push_back(i);
    return kernel_ns(ir_.ops[i], seconds, cx_.compute_slowdown) * scale_;
  }

  // How many of `op`'s waits are on the chain's last op; -1 when the chain is empty, when something
  // else waits on that op too, or when `op` waits on an op neither in the chain nor of the compute
  // stream (a wait on another stream would hold back the whole chain; an earlier compute op is
  // done before the chain starts).
  int waits_on_chain_end(const Op& op) const {
    if (chain_.empty()) return -1;
    std::uint32_t on_back = 0;
    for (int d : op.deps) {
      on_back += static_cast<std::size_t>(d) == chain_.back();
      if (!pending_[d] && ir_.ops[d].stream != Stream::compute) return -1;
    }
    return dependents_[chain_.back()] == on_back ? static_cast<int>(on_back) : -1;
  }

  // Op i runs in the chain's task after `lead` ns (a collective's latency), for `d` ns.
  void append_to_chain(std::size_t i, des::Time lead, des::Time d) {
    chain_ns_ += lead;
    l_.offset[i] = chain_ns_;
    l_.duration[i] = d;
    chain_ns_ += d;
    chain_.push_back(i);
    pending_[i] = 1;
    last_compute_ = static_cast<int>(i);
  }

  // A collective of a folded run's first layer (scale_ > 1) that the chain's last op hands to,
  // alone: timed into the chain's task as it would run with its link and the comm stream to
  // itself (its latency, then its bytes at NVLink's rate) instead of a latency task and a flow.
  // The engine runs ~10x fewer tasks for such a run (a Megatron layer's four tensor-parallel
  // collectives were eight of its twelve). Exact when nothing else held the comm stream or
  // NVLink meanwhile: folds_undisturbed checks it after the run, and credit_chained adds what the
  // engine did not see. It joins the chain when it waits on the chain's last op, the op before
  // it, and nothing else waits on that op; or it starts a chain when it waits on the last op of
  // the compute stream (which is then free as it becomes ready). Collectives within the node only.
  bool chain_collective(std::size_t i) {
    const Op& op = ir_.ops[i];
    if (cx_.trace || place_.joins || op.kind != OpKind::collective || op.stream != Stream::comm ||
        op.collective == Collective::send_recv)
      return false;
    if (chain_.empty()) {
      if (last_compute_ < 0 || std::find(op.deps.begin(), op.deps.end(), last_compute_) == op.deps.end()) return false;
    } else if (chain_.back() + 1 != i || waits_on_chain_end(op) <= 0) {
      return false;
    }
    const AloneCollective& alone =
        alone_(AloneKey{op.collective, op.group, op.group_size, op.kernels, op.host_s, op.bytes}, [&] {
          AloneCollective a;
          a.cost = collective_cost(op, cx_.topo, cx_.eff);
          const des::LinkId path[1] = {l_.nvlink};
          if (a.cost.inter_bytes <= 0) a.ns = e_.alone_ns(path, a.cost.intra_bytes, &a.link_latency);
          return a;
        });
    const CollectiveCost& cost = alone.cost;
    if (cost.inter_bytes > 0) return false;
    // A folded run's first layer stands for scale_ layers: as many latencies and transfers, each
    // rounded to the nanosecond as its own (as the kernels are), which is what lowering every
    // layer gives.
    const double bytes = cost.intra_bytes * scale_;
    const des::Time lead = ns(cost.alpha_s) * scale_;
    const des::Time d = alone.ns * scale_;
    const des::Time link_latency = alone.link_latency * scale_;
    Lowered::Holder& run = l_.folds.back();
    if (!run.nvlink) {
      run.from_op = i;
      run.from_lead = lead;
    }
    run.comm = run.nvlink = run.chained = true;
    append_to_chain(i, lead, d);
    l_.chained.push_back({i, lead, d - link_latency, bytes});
    l_.timed.push_back(i);
    return true;
  }

  void flush() {
    if (chain_.empty()) return;
    const Op& head = ir_.ops[chain_.front()];
    const des::TaskId t = e_.compute(
        l_.queues[0], chain_ns_,
        des::Label{std::string(), schedule::to_string(head.kind), static_cast<std::int32_t>(chain_.front())});
    // The task waits on what its ops wait on outside it (the chain's ops are the pending ones).
    for (std::size_t i : chain_) {
      l_.task[i] = t;
      for (int d : ir_.ops[i].deps)
        if (!pending_[d]) e_.depends(t, l_.task[d]);
    }
    for (std::size_t i : chain_) pending_[i] = 0;
    if (chain_.size() == 1 && (l_.chained.empty() || l_.chained.back().op != chain_.front()))
      l_.offset[chain_.front()] = -1;  // a lone kernel is its task (a chained collective's lead is not its time)
    chain_.clear();
    chain_ns_ = 0;
  }

  // Any op but a chained kernel: the chain must exist first if this op is on the compute stream
  // or waits on it.
  void lower_op(std::size_t i) {
    const Op& op = ir_.ops[i];
    bool waits = op.stream == Stream::compute;
    for (int d : op.deps) waits = waits || pending_[d];
    if (waits) flush();
    if (op.stream == Stream::compute) last_compute_ = static_cast<int>(i);
    const des::QueueId q = l_.queues[static_cast<int>(op.stream)];
    std::vector<des::TaskId>& task = l_.task;
    switch (op.kind) {
      case OpKind::gemm:
      case OpKind::attention:
      case OpKind::elementwise:
      case OpKind::loss: task[i] = e_.compute(q, kernel_time(i, seconds_of_(op, cx_.p, cx_.eff)), label(i)); break;
      case OpKind::optimizer:
        if (op.stream == Stream::cpu) {
          // CPU Adam streams its state through DRAM: the bytes it moves (the IR's 28 B per
          // parameter: DeepSpeed's cpu_adam reads master, gradient, m and v and writes master, m
          // and v, csrc/includes/cpu_adam.h Step_AVX) flow over the host cores, at their measured
          // AdamW rate x 28 B, and over the DRAM link, where they contend with the copies and NVMe
          // traffic that also cross host memory. (Before, the DRAM link carried an equivalent of
          // its time, seconds x DRAM bandwidth: the executor showed those were not the bytes moved.)
          // (Its state in CXL memory: the expanders' link instead of DRAM, host_path.)
          std::array<des::LinkId, HostPath::kMax> hops{};
          task[i] = e_.transfer(q, path_of(op, hops), op.bytes, label(i));
        } else {
          task[i] = e_.compute(q, kernel_time(i, compute_seconds(op, cx_.p, cx_.eff)), label(i));
        }
        break;
      case OpKind::collective:
        if (op.collective == Collective::send_recv && op.group == schedule::Group::pp)
          pipeline_send(i, q);
        else
          collective(i, q);
        return;  // deps attached to the latency part
      case OpKind::copy:
        if (copy(i, q)) {
          hold_comm(i);
          return;
        }
        break;
      case OpKind::alloc: task[i] = e_.alloc(q, pool_of(op), ir_.tensors[op.tensor].bytes, label(i)); break;
      case OpKind::free: task[i] = e_.free(q, pool_of(op), ir_.tensors[op.tensor].bytes, label(i)); break;
      case OpKind::marker:
        task[i] = e_.marker(q, label(i));
        if (op.peer >= 0) cx_.receives.emplace_back(op.tag * place_.ranks + place_.rank, task[i]);
        break;
    }
    after_deps(task[i], op);
    hold_comm(i);
  }

  // Any other op on the comm stream holds its queue: folds_undisturbed checks it against the runs
  // whose collectives left that queue (collectives note what they hold themselves).
  void hold_comm(std::size_t i) {
    if (cx_.fold && ir_.ops[i].stream == Stream::comm && ir_.ops[i].kind != OpKind::collective)
      l_.others.push_back({i, i, l_.task[i], true, false, false});
  }

  // Pipeline send to the neighbouring stage: over the NIC when stages sit on different nodes
  // (Megatron puts pp outermost), else over NVLink; the receiver waits for it.
  void pipeline_send(std::size_t i, des::QueueId q) {
    const Op& op = ir_.ops[i];
    const double latency = cx_.pp_across_nodes ? cx_.topo.nic_latency_s : cx_.eff.collective_step_s;
    const des::TaskId wait = latency_task(q, latency, i);
    after_deps(wait, op);
    l_.task[i] = e_.transfer(q, {cx_.pp_across_nodes ? l_.nic : l_.nvlink}, op.bytes, label(i));
    e_.depends(l_.task[i], wait);
    if (cx_.fold) l_.others.push_back({i, i, wait, false, !cx_.pp_across_nodes, cx_.pp_across_nodes});
    const int receiver = place_.rank + (op.peer - ir_.stage) * place_.stage_stride;
    cx_.sends.emplace_back(op.tag * place_.ranks + receiver, l_.task[i]);
  }

  // A collective (collective_cost): its latency, then its NVLink flow and, when the group spans
  // nodes, its NIC flow at once; the op completes when both have.
  void collective(std::size_t i, des::QueueId q) {
    const Op& op = ir_.ops[i];
    CollectiveCost cost = collective_cost(op, cx_.topo, cx_.eff);
    // A folded run's first layer stands for scale_ layers: as many latencies and bytes.
    cost.intra_bytes *= scale_;
    cost.inter_bytes *= scale_;
    const des::TaskId wait = e_.compute(q, ns(cost.alpha_s) * scale_, label(i, " (latency)", "latency"));
    collective_start(i, op, wait);
    if (cx_.fold) {
      Lowered::Holder held{i, i, wait, op.stream == Stream::comm, true, cost.inter_bytes > 0};
      Lowered::Holder& to = scale_ > 1 ? l_.folds.back() : l_.others.emplace_back(held);
      if (!to.nvlink) to.from = wait;  // a run's first collective
      to.comm = to.comm || held.comm;
      to.nvlink = true;
      to.nic = to.nic || held.nic;
    }
    const des::TaskId a = e_.transfer(q, {l_.nvlink}, cost.intra_bytes, label(i));
    e_.depends(a, wait);
    l_.task[i] = a;
    if (cost.inter_bytes <= 0) return;
    const des::TaskId b =
        e_.transfer(des::kNoQueue, {l_.nic}, cost.inter_bytes, label(i, " (between nodes)", "network"));
    e_.depends(b, wait);
    const des::TaskId join = e_.marker(q, label(i, " done", "marker"));
    e_.depends(join, a);
    e_.depends(join, b);
    l_.task[i] = join;
  }

  // The pool an allocation or free of `op`'s tensor changes (a tier the rank has no pool for is
  // refused before: check_plan places nothing where the node has no such memory).
  des::PoolId pool_of(const Op& op) const {
    const std::size_t t = plan::tier_index(ir_.tensors[op.tensor].tier);
    FTPLAN_ASSERT(l_.has_pool[t], "a tensor is placed on a tier the rank has a pool for");
    return l_.pools[t];
  }

  // The rank's links an op's bytes cross (host_path), in `hops`.
  std::span<const des::LinkId> path_of(const Op& op, std::array<des::LinkId, HostPath::kMax>& hops) const {
    std::size_t n = 0;
    for (const HostLink h : host_path(op, cx_.p)) {
      FTPLAN_ASSERT(links_[h].index != RankLinks::kAbsent.index, "a path crosses a link the rank has");
      hops[n++] = links_[h];
    }
    return {hops.data(), n};
  }

  // GPU <-> host copies cross the GPU's link, its switch uplink and host DRAM or the CXL expanders;
  // NVMe traffic crosses the drives and host DRAM (no GPUDirect Storage). True when the op's deps
  // are attached.
  bool copy(std::size_t i, des::QueueId q) {
    const Op& op = ir_.ops[i];
    std::array<des::LinkId, HostPath::kMax> hops{};
    const std::span<const des::LinkId> path = path_of(op, hops);
    const bool gpu_host = op.src == plan::Tier::gpu || op.dst == plan::Tier::gpu;
    if (gpu_host && cx_.eff.copy_latency_s > 0) {
      // The per-copy cost a calibration measured (DMA setup and launch), before the bytes move.
      const des::TaskId wait = latency_task(q, cx_.eff.copy_latency_s, i);
      after_deps(wait, op);
      l_.task[i] = e_.transfer(q, path, op.bytes, label(i));
      e_.depends(l_.task[i], wait);
      return true;
    }
    l_.task[i] = e_.transfer(q, path, op.bytes, label(i));
    return false;
  }

  const LoweringContext& cx_;
  des::Engine& e_;
  const schedule::StepIR& ir_;
  const RankLinks& links_;
  const RankPlace& place_;
  Lowered l_;
  DurationMemo seconds_of_;
  Memo<AloneKey, AloneCollective, 8> alone_;  // chain_collective's, by what they depend on
  std::vector<std::uint32_t> dependents_;     // by op: ops that wait on it
  std::vector<char> pending_;                 // by op: in the chain not yet issued
  std::vector<std::size_t> chain_;            // ops of the chain being built
  des::Time chain_ns_ = 0;
  int last_compute_ = -1;      // last op issued on the compute stream
  std::vector<int> fold_;      // fold_layers, with cx_.fold
  int scale_ = 1;              // layers the op being lowered stands for
  std::size_t chain_end_ = 0;  // the folded run's first layer's last op
  // A folded run's later layers' allocations and frees per pool: their sum and its highest value.
  struct PoolChange {
    double net = 0, high = 0;
    bool any = false;
  };
  plan::PerTier<PoolChange> pools_{};
};

}  // namespace

Lowered lower_stage(const LoweringContext& cx, const schedule::StepIR& ir, const RankLinks& links,
                    const RankPlace& place) {
  return StageLowering(cx, ir, links, place).run();
}

void retime(des::Engine& e, Lowered& l, const schedule::StepIR& ir, double compute_slowdown) {
  // A task's timed ops (its kernels, its chained collectives) come one after another in op order
  // (lowering closes a chain before any other op of the compute stream): each task's new duration
  // is their sum as the loop leaves it.
  std::uint32_t task = des::kNone;
  des::Time sum = 0;
  const auto close = [&] {
    if (task != des::kNone) e.set_duration(des::TaskId{task}, sum);
  };
  std::size_t c = 0;  // the next chained collective: its fixed time keeps its place in its task
  for (const std::size_t i : l.timed) {
    const bool chained = c < l.chained.size() && l.chained[c].op == i;
    if (l.task[i].index != task) {
      close();
      task = l.task[i].index;
      sum = 0;
    }
    if (chained) {
      sum += l.chained[c++].lead;
      l.offset[i] = sum;
      sum += l.duration[i];
      continue;
    }
    const Op& op = ir.ops[i];
    // A folded run's first layer (fold_layers) stands for its copies, each rounded as its own.
    const des::Time d = kernel_ns(op, l.base_s[i], compute_slowdown) * (l.fold.empty() ? 1 : std::max(1, l.fold[i]));
    if (l.offset[i] >= 0) l.offset[i] = sum;
    l.duration[i] = d;
    sum += d;
  }
  close();
}

void credit_chained(const LoweredStep& step, des::Result& r) {
  for (const Lowered& l : step.lowered)
    for (const Lowered::Chained& c : l.chained) {
      const des::Time time = c.lead + l.duration[c.op];
      r.queue_busy[l.queues[static_cast<int>(Stream::compute)].index] -= time;
      r.queue_busy[l.queues[static_cast<int>(Stream::comm)].index] += time;
      if (c.bytes <= 0) continue;  // as the engine: no bytes, no flow
      r.link_busy[l.nvlink.index] += c.moving;
      r.link_bytes[l.nvlink.index] += c.bytes;
    }
}

void lower_every_rank(const LoweringContext& cx, const std::vector<schedule::StepIR>& irs,
                      std::vector<Lowered>& lowered, std::vector<int>& reported) {
  des::Engine& e = cx.e;
  const plan::Plan& p = cx.p;
  const Topology& topo = cx.topo;
  const int ranks = topo.layout.ranks(), g = topo.layout.gpus_per_node();
  std::map<std::pair<std::size_t, std::int64_t>, des::TaskId> joins;
  std::map<int, RankLinks> node_links;  // shared links per node (uplinks per switch below)
  const int behind_switch = gpus_per_switch(p.cluster);
  std::map<std::tuple<int, int, std::size_t>, des::LinkId> uplinks;  // (node, switch, HostLink)
  for (int r = 0; r < ranks; ++r) {
    RankPlace place;
    place.rank = r;
    place.ranks = ranks;
    place.at = topo.layout.coord(r);
    place.stage_stride = topo.layout.stage_ranks();
    place.joins = &joins;
    place.prefix = fmt::format("rank {} ", r);
    const int node = topo.layout.node(r), local = r % g;
    const schedule::StepIR& ir = irs[place.at.s];
    // A node's shared links when its first rank is placed, then this rank's own and its switch's,
    // in HostLink's order (the links' order in the trace and in StepResult::links).
    auto shared = node_links.find(node);
    if (shared == node_links.end()) {
      RankLinks n;
      for (std::size_t i = 0; i < kHostLinks; ++i) {
        const auto h = static_cast<HostLink>(i);
        const HostLinkInfo& info = host_link_info(h);
        const std::optional<double> rate = host_link_rate(h, p, ir, topo, cx.eff);
        if (info.scope == LinkScope::node && rate)
          n[h] = e.add_link(fmt::format("node {} {}", node, info.part), std::max(1.0, *rate * g));
      }
      shared = node_links.emplace(node, n).first;
    }
    RankLinks k = shared->second;
    k.nvlink = e.add_link(place.prefix + topo.gpu_link_name, std::max(1.0, topo.nvlink_Bps));
    k.nic = e.add_link(place.prefix + "network", std::max(1.0, topo.nic_Bps));
    k.own = {k.nvlink, k.nic};
    for (std::size_t i = 0; i < kHostLinks; ++i) {
      const auto h = static_cast<HostLink>(i);
      const HostLinkInfo& info = host_link_info(h);
      const std::optional<double> rate = host_link_rate(h, p, ir, topo, cx.eff);
      if (!rate) continue;
      if (info.scope == LinkScope::rank) {
        k[h] = e.add_link(place.prefix + info.part, std::max(1.0, *rate));
      } else if (info.scope == LinkScope::pcie_switch) {
        // One per switch and direction, made as the switch's first GPU is placed.
        const auto key = std::make_tuple(node, local / behind_switch, i);
        auto it = uplinks.find(key);
        if (it == uplinks.end()) {
          const std::string name =
              fmt::format("node {} pcie switch uplink {} {}", node, local / behind_switch, info.part);
          it = uplinks.emplace(key, e.add_link(name, std::max(1.0, *rate * behind_switch))).first;
        }
        k[h] = it->second;
      }
      k.own.push_back(k[h]);
    }
    if (place.at.t == 0 && place.at.c == 0 && place.at.d == 0) reported[place.at.s] = static_cast<int>(lowered.size());
    lowered.push_back(lower_stage(cx, ir, k, place));
  }
}

std::vector<schedule::StepIR> build_stages(const model::ModelSpec& m, const plan::Plan& p, int micro_batches,
                                           bool names) {
  std::vector<schedule::StepIR> irs(std::max(1, p.parallel.pp));
  for (int s = 0; s < static_cast<int>(irs.size()); ++s)
    irs[s] = schedule::build_step(m, p, inventory::build_inventory(m, p, s), micro_batches, names);
  return irs;
}

LoweredStep lower_step(const plan::Plan& p, const Efficiency& eff, bool trace, const std::vector<schedule::StepIR>& irs,
                       double compute_slowdown, bool full, const std::vector<int>& real_stage, bool fold) {
  const int pp = static_cast<int>(irs.size());
  const Topology topo = topology_of(p, eff);
  LoweredStep out;
  des::Engine& e = out.e;
  std::vector<Lowered>& lowered = out.lowered;
  std::vector<int>& reported = out.reported;
  reported.assign(pp, 0);
  std::vector<std::pair<std::int64_t, des::TaskId>> sends, receives;
  const LoweringContext cx{e,
                           p,
                           eff,
                           topo,
                           compute_slowdown,
                           topo.layout.stages_cross_nodes(),
                           trace,
                           sends,
                           receives,
                           fold && !full && !trace};
  {
    std::size_t ops = 0;
    for (const auto& ir : irs) ops += ir.ops.size();
    const std::size_t copies = full ? static_cast<std::size_t>(topo.layout.stage_ranks()) : 1;
    e.reserve(ops * copies * 3 / 2, ops * copies * 2);
  }
  if (!full) {
    for (int s = 0; s < pp; ++s) {
      RankPlace place;
      place.prefix = pp > 1 ? fmt::format("stage {} ", real_stage.empty() ? s : real_stage[s]) : std::string();
      const RankLinks links = representative_links(e, p, irs[s], topo, eff, place.prefix);
      reported[s] = s;
      lowered.push_back(lower_stage(cx, irs[s], links, place));
    }
  } else {
    lower_every_rank(cx, irs, lowered, reported);
  }
  std::sort(sends.begin(), sends.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [tag, recv] : receives) {
    const auto it =
        std::lower_bound(sends.begin(), sends.end(), tag, [](const auto& s, std::int64_t t) { return s.first < t; });
    if (it == sends.end() || it->first != tag) {
      out.problem = "the pipeline schedule receives a tensor no stage sends";
      continue;
    }
    e.depends(recv, it->second);
  }
  return out;
}

void retime_step(LoweredStep& step, const std::vector<schedule::StepIR>& irs, double compute_slowdown) {
  const bool full = step.lowered.size() != irs.size();
  for (std::size_t i = 0; i < step.lowered.size(); ++i) {
    std::size_t s = i;
    if (full) {
      for (s = irs.size(); s-- > 0;)
        if (static_cast<std::size_t>(step.reported[s]) <= i) break;
    }
    retime(step.e, step.lowered[i], irs[s], compute_slowdown);
  }
}

}  // namespace detail

}  // namespace ftplan::sim
