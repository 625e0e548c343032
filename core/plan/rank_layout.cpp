#include "plan/rank_layout.hpp"

#include <algorithm>

#include "plan/checks.hpp"
#include "plan/plan.hpp"

namespace ftplan::plan {

const char* to_string(Group g) {
  switch (g) {
    case Group::dp: return "dp";
    case Group::tp: return "tp";
    case Group::pp: return "pp";
    case Group::cp: return "cp";
    case Group::ep: return "ep";
    case Group::replicate: return "replicate";
  }
  return "?";
}

RankLayout::RankLayout(const Plan& plan)
    : RankLayout(plan.parallel.tp, plan.parallel.cp, data_parallel_degree(plan), plan.parallel.pp,
                 plan.cluster.gpus_per_node, plan.cluster.nodes) {}

RankLayout::RankLayout(int tp, int cp, int dp, int pp, int gpus_per_node, int nodes)
    : tp_(std::max(1, tp)),
      cp_(std::max(1, cp)),
      dp_(std::max(1, dp)),
      pp_(std::max(1, pp)),
      gpus_per_node_(std::max(1, gpus_per_node)),
      nodes_(std::max(1, nodes)) {}

RankLayout::Coord RankLayout::coord(int rank) const {
  Coord at;
  at.t = rank % tp_;
  at.c = (rank / tp_) % cp_;
  at.d = (rank / (tp_ * cp_)) % dp_;
  at.s = rank / stage_ranks();
  return at;
}

std::int64_t RankLayout::group_key(const Coord& at, Group g, int size) const {
  size = std::max(1, size);
  std::int64_t k = at.s;
  // The data-parallel index over the context-parallel ranks: d x cp + c.
  const std::int64_t dc = static_cast<std::int64_t>(at.d) * cp_ + at.c;
  if (g == Group::replicate) {
    // Hybrid sharding: shard groups are blocks of dp x cp / size; a replica group takes the
    // ranks at the same place of every block.
    const int shard = std::max(1, dp_ * cp_ / size);
    k = k * dp_ * cp_ + dc % shard;
    return k * tp_ + at.t;
  }
  if (g == Group::dp) {
    k = k * dp_ * cp_ + dc / size;  // blocks of `size` of d x cp + c
    return k * tp_ + at.t;
  }
  if (g == Group::pp) return static_cast<std::int64_t>(at.t) + tp_ * (at.c + static_cast<std::int64_t>(cp_) * at.d);
  k = k * dp_ + (g == Group::ep ? at.d / size : at.d);
  k = k * cp_ + (g == Group::cp ? at.c / size : at.c);
  return k * tp_ + (g == Group::tp ? at.t / size : at.t);
}

std::int64_t RankLayout::stride(Group g, int size) const {
  switch (g) {
    case Group::tp: return 1;
    case Group::cp:
    case Group::dp: return tp_;  // d x cp + c advances by one every tp ranks
    case Group::ep: return static_cast<std::int64_t>(tp_) * cp_;
    case Group::pp: return stage_ranks();
    case Group::replicate: return static_cast<std::int64_t>(tp_) * std::max(1, dp_ * cp_ / std::max(1, size));
  }
  return 1;
}

int RankLayout::members_per_node(Group g, int size) const {
  size = std::max(1, size);
  const std::int64_t in_node = gpus_per_node_ / std::min<std::int64_t>(stride(g, size), gpus_per_node_);
  return static_cast<int>(std::clamp<std::int64_t>(in_node, 1, size));
}

}  // namespace ftplan::plan
