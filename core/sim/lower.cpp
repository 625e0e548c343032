#include "sim/lowering.hpp"

namespace ftplan::sim {


namespace detail {

namespace {

// compute_seconds of the ops of one lowering: identical layers repeat the same few GEMM and
// attention shapes, so their durations are looked up among the last distinct ones (a few dozen)
// rather than recomputed for every layer and micro-batch.
class DurationMemo {
 public:
  double operator()(const Op& op, const plan::Plan& p, const Efficiency& eff) {
    if (op.kind != OpKind::gemm && op.kind != OpKind::attention) return compute_seconds(op, p, eff);
    const Key key{op.kind, op.pass, op.weight_grad, op.fp8, op.flash, op.flash_v1, op.causal, op.kernels,
                  op.m, op.n, op.k, op.flops, op.bytes};
    for (std::size_t i = 0; i < size_; ++i)
      if (entries_[i].first == key) return entries_[i].second;
    const double seconds = compute_seconds(op, p, eff);
    entries_[next_] = {key, seconds};
    next_ = (next_ + 1) % entries_.size();
    size_ = std::min(size_ + 1, entries_.size());
    return seconds;
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
  std::array<std::pair<Key, double>, 32> entries_{};
  std::size_t size_ = 0, next_ = 0;
};

}  // namespace

bool gpu_kernel(const Op& op) {
  return op.stream == Stream::compute && (op.kind == OpKind::gemm || op.kind == OpKind::attention ||
                                          op.kind == OpKind::elementwise || op.kind == OpKind::loss ||
                                          op.kind == OpKind::optimizer);
}

des::Time kernel_ns(const Op& op, double base_s, double compute_slowdown) {
  return ns(base_s * (op.kind == OpKind::optimizer ? 1.0 : compute_slowdown));
}

Lowered lower_stage(des::Engine& e, const plan::Plan& p, const schedule::StepIR& ir, const Efficiency& eff,
                    const Topology& topo, double compute_slowdown, bool pp_across_nodes, bool trace, const RankLinks& links,
                    const RankPlace& place, std::vector<std::pair<std::int64_t, des::TaskId>>& sends,
                    std::vector<std::pair<std::int64_t, des::TaskId>>& receives) {
  Lowered l;
  const std::string& prefix = place.prefix;
  for (int s = 0; s < schedule::kStreams; ++s)
    l.queues.push_back(e.add_queue(prefix + schedule::to_string(static_cast<Stream>(s))));
  l.links = links.own;
  l.nvlink = links.nvlink;
  l.nic = links.nic;
  const des::LinkId pcie = links.pcie, uplink = links.uplink, dram = links.dram, nvme_read = links.nvme_read,
                    nvme_write = links.nvme_write, pageable = links.pageable;
  // The fixed cost an op pays before its bytes move (ring steps, DMA setup), as a task on its queue.
  const auto latency_task = [&](des::QueueId q, double seconds, std::size_t i, const Op& op) {
    return e.compute(q, ns(seconds),
                     des::Label{trace ? op.name + " (latency)" : std::string(), "latency", static_cast<std::int32_t>(i)});
  };
  const auto after_deps = [&](des::TaskId t, const Op& op, const std::vector<des::TaskId>& task) {
    for (int d : op.deps) e.depends(t, task[d]);
  };
  // The task a collective's latency part waits on: its own deps, or in full fidelity the join of
  // its group instance, which waits for every member's deps.
  const auto collective_start = [&](std::size_t i, const Op& op, des::TaskId wait, const std::vector<des::TaskId>& task) {
    if (!place.joins) {
      after_deps(wait, op, task);
      return;
    }
    const auto key = std::make_pair(i, topo.layout.group_key(place.at, op.group, op.group_size));
    auto it = place.joins->find(key);
    if (it == place.joins->end()) it = place.joins->emplace(key, e.marker(des::kNoQueue, des::Label{std::string(), "join", 0})).first;
    for (int d : op.deps) e.depends(it->second, task[d]);
    e.depends(wait, it->second);
  };
  const plan::Cluster& c = p.cluster;
  const std::array<double, 3> capacity = pool_capacities(c);
  l.pools[0] = e.add_pool(prefix + "gpu", capacity[0]);
  l.pools[1] = e.add_pool(prefix + "host (per rank)", capacity[1]);
  l.pools[2] = e.add_pool(prefix + "nvme (per rank)", capacity[2]);

  std::vector<des::TaskId>& task = l.task;
  const std::size_t n = ir.ops.size();
  DurationMemo seconds_of;
  task.resize(n);
  l.offset.assign(n, -1);
  l.duration.assign(n, 0);
  l.base_s.assign(n, -1.0);
  // Back-to-back GPU kernels on the compute stream that nothing else waits for in between run as
  // one engine task of their summed (nanosecond-rounded) durations: the stream is serial and
  // their durations are fixed, so every op's start and end are exactly what separate tasks would
  // give (collect_stage reads them back through `offset`). Traces keep one task per op.
  std::vector<std::uint32_t> dependents(n, 0);
  for (const Op& op : ir.ops)
    for (int d : op.deps) ++dependents[d];
  std::vector<char> pending(n, 0);
  std::vector<std::size_t> chain;  // ops of the chain being built
  des::Time chain_ns = 0;
  int last_compute = -1;           // last op issued on the compute stream
  const auto flush = [&] {
    if (chain.empty()) return;
    const Op& head = ir.ops[chain.front()];
    const des::TaskId t = e.compute(l.queues[0], chain_ns, des::Label{std::string(), schedule::to_string(head.kind),
                                                                       static_cast<std::int32_t>(chain.front())});
    for (std::size_t i : chain) {
      task[i] = t;
      pending[i] = 0;
      for (int d : ir.ops[i].deps)
        if (!pending[d] && std::find(chain.begin(), chain.end(), static_cast<std::size_t>(d)) == chain.end())
          e.depends(t, task[d]);
    }
    if (chain.size() == 1) l.offset[chain.front()] = -1;
    chain.clear();
    chain_ns = 0;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = ir.ops[i];
    if (!trace && gpu_kernel(op)) {
      // Joins the chain when the chain's last op is the previous op on this stream and only this op waits on it.
      // It must wait for nothing but the chain and earlier ops of its stream: a wait on another
      // stream would hold back the whole chain.
      std::uint32_t on_back = 0;
      bool inside = true;
      if (!chain.empty())
        for (int d : op.deps) {
          on_back += static_cast<std::size_t>(d) == chain.back();
          inside = inside && (pending[d] || ir.ops[d].stream == Stream::compute);
        }
      const bool joins = !chain.empty() && inside && static_cast<int>(chain.back()) == last_compute &&
                         dependents[chain.back()] == on_back;
      if (!joins) flush();
      l.base_s[i] = seconds_of(op, p, eff);
      const des::Time d = kernel_ns(op, l.base_s[i], compute_slowdown);
      l.offset[i] = chain_ns;
      l.duration[i] = d;
      chain_ns += d;
      chain.push_back(i);
      pending[i] = 1;
      last_compute = static_cast<int>(i);
      continue;
    }
    // Anything else: the chain must exist first if this op is on the compute stream or waits on it.
    bool waits = op.stream == Stream::compute;
    for (int d : op.deps) waits = waits || pending[d];
    if (waits) flush();
    if (op.stream == Stream::compute) last_compute = static_cast<int>(i);
    const des::QueueId q = l.queues[static_cast<int>(op.stream)];
    des::Label label{trace ? op.name : std::string(), schedule::to_string(op.kind), static_cast<std::int32_t>(i)};
    switch (op.kind) {
      case OpKind::gemm:
      case OpKind::attention:
      case OpKind::elementwise:
      case OpKind::loss:
        l.base_s[i] = seconds_of(op, p, eff);
        task[i] = e.compute(q, kernel_ns(op, l.base_s[i], compute_slowdown), std::move(label));
        break;
      case OpKind::optimizer:
        if (op.stream == Stream::cpu) {
          // CPU Adam streams its state through DRAM: a flow on the DRAM link, so it contends with
          // the copies and NVMe traffic that also cross host memory; its bytes are scaled so the
          // uncontended time is params / the CPU's parameter rate.
          const double params = op.bytes / kAdamBytesPerParam;
          const double seconds = params / std::max(1.0, topo.cpu_params_per_s);
          task[i] = e.transfer(q, {dram}, seconds * topo.dram_Bps, std::move(label));
        } else {
          l.base_s[i] = compute_seconds(op, p, eff);
          task[i] = e.compute(q, kernel_ns(op, l.base_s[i], compute_slowdown), std::move(label));
        }
        break;
      case OpKind::collective: {
        if (op.collective == Collective::send_recv && op.group == schedule::Group::pp) {
          // Pipeline send to the neighbouring stage: over the NIC when stages sit on different
          // nodes (Megatron puts pp outermost), else over NVLink; the receiver waits for it.
          const double latency = pp_across_nodes ? topo.nic_latency_s : eff.collective_step_s;
          const des::TaskId wait = latency_task(q, latency, i, op);
          after_deps(wait, op, task);
          task[i] = e.transfer(q, {pp_across_nodes ? l.nic : l.nvlink}, op.bytes, std::move(label));
          e.depends(task[i], wait);
          const int receiver = place.rank + (op.peer - ir.stage) * place.stage_stride;
          sends.emplace_back(op.tag * place.ranks + receiver, task[i]);
          continue;
        }
        const CollectiveCost cost = collective_cost(op, topo, eff);
        const des::TaskId wait = latency_task(q, cost.alpha_s, i, op);
        collective_start(i, op, wait, task);
        const des::TaskId a = e.transfer(q, {l.nvlink}, cost.intra_bytes, std::move(label));
        e.depends(a, wait);
        task[i] = a;
        if (cost.inter_bytes > 0) {
          // The NIC phase: a flow of its own that the op's completion also waits for.
          const des::TaskId b = e.transfer(des::kNoQueue, {l.nic}, cost.inter_bytes,
                                           des::Label{trace ? op.name + " (between nodes)" : std::string(), "network", static_cast<std::int32_t>(i)});
          e.depends(b, wait);
          const des::TaskId join = e.marker(q, des::Label{trace ? op.name + " done" : std::string(), "marker", static_cast<std::int32_t>(i)});
          e.depends(join, a);
          e.depends(join, b);
          task[i] = join;
        }
        continue;  // deps attached to the latency part
      }
      case OpKind::copy: {
        // GPU <-> host copies cross the GPU's link, its switch uplink and host DRAM; NVMe traffic
        // crosses the drives and host DRAM (no GPUDirect Storage).
        std::vector<des::LinkId> path;
        for (const HostLink h : host_path(op, p)) {
          switch (h) {
            case HostLink::pcie: path.push_back(pcie); break;
            case HostLink::uplink: path.push_back(uplink); break;
            case HostLink::dram: path.push_back(dram); break;
            case HostLink::nvme_read: path.push_back(nvme_read); break;
            case HostLink::nvme_write: path.push_back(nvme_write); break;
            case HostLink::pageable: path.push_back(pageable); break;
          }
        }
        const bool gpu_host = op.src == plan::Tier::gpu || op.dst == plan::Tier::gpu;
        if (gpu_host && eff.copy_latency_s > 0) {
          // The per-copy cost a calibration measured (DMA setup and launch), before the bytes move.
          const des::TaskId wait = latency_task(q, eff.copy_latency_s, i, op);
          after_deps(wait, op, task);
          task[i] = e.transfer(q, path, op.bytes, std::move(label));
          e.depends(task[i], wait);
          continue;
        }
        task[i] = e.transfer(q, path, op.bytes, std::move(label));
        break;
      }
      case OpKind::alloc:
        task[i] = e.alloc(q, l.pools[static_cast<int>(ir.tensors[op.tensor].tier)], ir.tensors[op.tensor].bytes,
                          std::move(label));
        break;
      case OpKind::free:
        task[i] = e.free(q, l.pools[static_cast<int>(ir.tensors[op.tensor].tier)], ir.tensors[op.tensor].bytes,
                         std::move(label));
        break;
      case OpKind::marker:
        task[i] = e.marker(q, std::move(label));
        if (op.peer >= 0) receives.emplace_back(op.tag * place.ranks + place.rank, task[i]);
        break;
    }
    after_deps(task[i], op, task);
  }
  flush();
  return l;
}

void retime(des::Engine& e, Lowered& l, const schedule::StepIR& ir, double compute_slowdown, std::vector<des::Time>& sums) {
  sums.assign(e.task_count(), -1);
  std::vector<std::uint32_t> touched;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    if (l.base_s[i] < 0) continue;
    const Op& op = ir.ops[i];
    const des::Time d = kernel_ns(op, l.base_s[i], compute_slowdown);
    des::Time& sum = sums[l.task[i].index];
    if (sum < 0) {
      sum = 0;
      touched.push_back(l.task[i].index);
    }
    if (l.offset[i] >= 0) l.offset[i] = sum;
    l.duration[i] = d;
    sum += d;
  }
  for (std::uint32_t t : touched) e.set_duration(des::TaskId{t}, sums[t]);
}

void lower_every_rank(des::Engine& e, const plan::Plan& p, const std::vector<schedule::StepIR>& irs, const Efficiency& eff,
                      const Topology& topo, double compute_slowdown, bool pp_across_nodes, bool trace,
                      std::vector<Lowered>& lowered, std::vector<int>& reported,
                      std::vector<std::pair<std::int64_t, des::TaskId>>& sends,
                      std::vector<std::pair<std::int64_t, des::TaskId>>& receives) {
  const int ranks = topo.layout.ranks(), g = topo.gpus_per_node;
  std::map<std::pair<std::size_t, std::int64_t>, des::TaskId> joins;
  std::map<int, RankLinks> node_links;  // shared links per node (uplinks per switch below)
  int behind_switch = 0;
  for (const auto& sw : p.cluster.node.pcie_switches)
    if (sw.gpus > 0) {
      behind_switch = sw.gpus;
      break;
    }
  std::map<std::pair<int, int>, des::LinkId> uplinks;
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
    auto shared = node_links.find(node);
    if (shared == node_links.end()) {
      RankLinks n;
      const std::string np = fmt::format("node {} ", node);
      n.dram = e.add_link(np + "host dram", std::max(1.0, topo.dram_Bps * g));
      n.nvme_read = e.add_link(np + "nvme read", std::max(1.0, topo.nvme_read_Bps * g));
      n.nvme_write = e.add_link(np + "nvme write", std::max(1.0, nvme_write_rate(p, ir, topo.nvme_write_Bps) * g));
      shared = node_links.emplace(node, n).first;
    }
    RankLinks k = shared->second;
    k.nvlink = e.add_link(place.prefix + (topo.nvlink ? "nvlink" : "gpu-gpu (pcie)"), std::max(1.0, topo.nvlink_Bps));
    k.nic = e.add_link(place.prefix + "network", std::max(1.0, topo.nic_Bps));
    k.pcie = e.add_link(place.prefix + "pcie", std::max(1.0, topo.pcie_Bps));
    if (behind_switch > 0) {
      const auto key = std::make_pair(node, local / behind_switch);
      auto it = uplinks.find(key);
      if (it == uplinks.end())
        it = uplinks.emplace(key, e.add_link(fmt::format("node {} pcie switch uplink {}", node, key.second),
                                             std::max(1.0, topo.uplink_Bps * behind_switch))).first;
      k.uplink = it->second;
    } else {
      k.uplink = k.pcie;
    }
    k.pageable = e.add_link(place.prefix + "pageable staging", std::max(1.0, topo.pcie_Bps * eff.pageable_fraction));
    k.own = {k.nvlink, k.nic, k.pcie, k.uplink, k.dram, k.nvme_read, k.nvme_write, k.pageable};
    if (place.at.t == 0 && place.at.c == 0 && place.at.d == 0) reported[place.at.s] = static_cast<int>(lowered.size());
    lowered.push_back(
        lower_stage(e, p, ir, eff, topo, compute_slowdown, pp_across_nodes, trace, k, place, sends, receives));
  }
}

std::vector<schedule::StepIR> build_stages(const model::ModelSpec& m, const plan::Plan& p, int micro_batches, bool names) {
  std::vector<schedule::StepIR> irs(std::max(1, p.parallel.pp));
  for (int s = 0; s < static_cast<int>(irs.size()); ++s)
    irs[s] = schedule::build_step(m, p, inventory::build_inventory(m, p, s), micro_batches, names);
  return irs;
}

LoweredStep lower_step(const plan::Plan& p, const Efficiency& eff, bool trace, const std::vector<schedule::StepIR>& irs,
                       double compute_slowdown, bool full, const std::vector<int>& real_stage) {
  const int pp = static_cast<int>(irs.size());
  const Topology topo = topology_of(p, eff);
  const bool pp_across_nodes = topo.layout.stages_cross_nodes();
  LoweredStep out;
  des::Engine& e = out.e;
  std::vector<Lowered>& lowered = out.lowered;
  std::vector<int>& reported = out.reported;
  reported.assign(pp, 0);
  std::vector<std::pair<std::int64_t, des::TaskId>> sends, receives;
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
      lowered.push_back(lower_stage(e, p, irs[s], eff, topo, compute_slowdown, pp_across_nodes, trace, links, place, sends,
                                    receives));
    }
  } else {
    lower_every_rank(e, p, irs, eff, topo, compute_slowdown, pp_across_nodes, trace, lowered, reported, sends, receives);
  }
  std::sort(sends.begin(), sends.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [tag, recv] : receives) {
    const auto it = std::lower_bound(sends.begin(), sends.end(), tag, [](const auto& s, std::int64_t t) { return s.first < t; });
    if (it == sends.end() || it->first != tag) {
      out.problem = "the pipeline schedule receives a tensor no stage sends";
      continue;
    }
    e.depends(recv, it->second);
  }
  return out;
}

void retime_step(LoweredStep& step, const std::vector<schedule::StepIR>& irs, double compute_slowdown) {
  std::vector<des::Time> sums;
  const bool full = step.lowered.size() != irs.size();
  for (std::size_t i = 0; i < step.lowered.size(); ++i) {
    std::size_t s = i;
    if (full) {
      for (s = irs.size(); s-- > 0;)
        if (static_cast<std::size_t>(step.reported[s]) <= i) break;
    }
    retime(step.e, step.lowered[i], irs[s], compute_slowdown, sums);
  }
}

}  // namespace detail

}  // namespace ftplan::sim
