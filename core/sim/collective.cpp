#include "sim/lowering.hpp"

namespace ftplan::sim {

double ring_bytes(Collective c, double bytes, int n) {
  if (n <= 1) return 0;
  const double f = static_cast<double>(n - 1) / n;
  switch (c) {
    case Collective::all_reduce: return 2.0 * f * bytes;  // reduce-scatter + all-gather
    case Collective::all_gather:
    case Collective::reduce_scatter: return f * bytes;
    case Collective::all_to_all: return f * bytes;
    case Collective::send_recv: return bytes;
  }
  return bytes;
}

namespace detail {

CollectiveCost collective_cost(const Op& op, const Topology& topo, const Efficiency& eff) {
  // Ring collectives, decomposed the way NCCL runs them across nodes (one ring per NIC,
  // each carrying 1/G of the data between nodes): inside a node each rank moves the
  // ring volume of the whole tensor over NVLink; between N nodes it moves the ring volume
  // of 1/G of it over its own NIC. Both phases pipeline, so they run as concurrent flows.
  const int group = op.group_size;
  const bool inter = topo.layout.crosses_nodes(op.group, group);
  const int per_node = topo.layout.members_per_node(op.group, group);  // ranks of the group inside one node
  const int local = inter ? std::max(1, std::min(group, per_node)) : group;
  const int across = inter ? std::max(1, group / local) : 1;
  // Latency: NCCL's rings are flat, one ring through every rank of the group (NCCL docs,
  // "Rings"), so a ring collective takes group - 1 steps (all-reduce twice that), each as
  // slow as the ring's slowest hop: the network's when the group spans nodes. For all-reduce
  // NCCL may pick its tree instead (inter-node double binary tree over the nodes, a chain
  // inside each; Jeaugey 2019, "Massively Scale Your Deep Learning Training with NCCL 2.4"):
  // 2 (log2 nodes network hops + local - 1 NVLink hops); it takes the faster.
  const double hop = eff.collective_step_s + (inter ? topo.nic_latency_s : 0.0);
  double alpha = (group - 1) * hop * (op.collective == Collective::all_reduce ? 2 : 1);
  // All-to-all and a ring-attention pass are one round of concurrent send/recv pairs.
  if (op.collective == Collective::all_to_all || op.collective == Collective::send_recv) alpha = hop;
  if (op.collective == Collective::all_reduce && inter)
    alpha = std::min(
        alpha, 2.0 * (std::ceil(std::log2(static_cast<double>(across))) * (eff.collective_step_s + topo.nic_latency_s) +
                      (local - 1) * eff.collective_step_s));
  // The framework's host work before the collective can be issued (see Op::host_s).
  alpha += op.host_s + op.kernels * eff.collective_launch_s;
  double intra_bytes = ring_bytes(op.collective, op.bytes, local);
  double inter_bytes = ring_bytes(op.collective, op.bytes / local, across);
  if (op.collective == Collective::all_to_all) {
    // Every rank sends 1/n of its buffer to each other rank: those in its node over
    // NVLink, the rest through its own NIC.
    intra_bytes = op.bytes * (local - 1) / group;
    inter_bytes = op.bytes * (group - local) / group;
  } else if (op.collective == Collective::send_recv) {
    intra_bytes = inter ? 0.0 : op.bytes;  // a ring neighbour: in the node or through the NIC
    inter_bytes = inter ? op.bytes : 0.0;
  }
  return {alpha, intra_bytes, inter_bytes};
}

}  // namespace detail

}  // namespace ftplan::sim
