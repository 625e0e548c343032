// Where each rank of a plan sits: the one statement of the rank order and of the groups that
// collectives run in (docs/architecture.md: adding a parallelism starts here).
//
// Megatron-LM's order, from the inside out: tensor, context, (expert, carved out of) data, then
// pipeline parallel (megatron/core/parallel_state.py, `order="tp-cp-ep-dp-pp"`); torchtitan's
// device mesh has the same nesting (pp, dp_replicate, dp_shard, cp, tp; torchtitan/distributed/
// parallel_dims.py). Ranks fill nodes in order (rank r on node r / gpus_per_node), as torchrun
// and SLURM assign them.
#pragma once

#include <cstdint>

namespace ftplan::plan {

struct Plan;

// The kinds of communication group. dp is the data-parallel group that reduces gradients and
// shards state: it spans the context-parallel ranks (plan::gradient_group_size); replicate is
// hybrid sharding's group of replicas (the ranks at the same place of every shard group).
enum class Group { dp, tp, pp, cp, ep, replicate };
const char* to_string(Group g);

class RankLayout {
 public:
  explicit RankLayout(const Plan& plan);
  RankLayout(int tp, int cp, int dp, int pp, int gpus_per_node, int nodes);

  struct Coord {
    int t = 0, c = 0, d = 0, s = 0;  // tensor, context, data-parallel and pipeline-stage index
  };

  int tp() const { return tp_; }
  int cp() const { return cp_; }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int ranks() const { return stage_ranks() * pp_; }
  int stage_ranks() const { return tp_ * cp_ * dp_; }  // ranks of one pipeline stage
  Coord coord(int rank) const;
  int node(int rank) const { return rank / gpus_per_node_; }

  // The instance of a `size`-rank group of kind g that the rank at `at` belongs to (an id equal
  // for exactly the ranks that run the group's collectives together).
  std::int64_t group_key(const Coord& at, Group g, int size) const;
  // Members of one `size`-rank group of kind g inside one node, and whether the group spans nodes.
  int members_per_node(Group g, int size) const;
  bool crosses_nodes(Group g, int size) const { return size > members_per_node(g, size); }
  // Whether the sends between consecutive pipeline stages cross nodes (a stage fills a node or
  // more, and there is more than one node).
  bool stages_cross_nodes() const { return stage_ranks() >= gpus_per_node_ && nodes_ > 1; }

 private:
  // Ranks between consecutive members of a `size`-rank group of kind g.
  std::int64_t stride(Group g, int size) const;

  int tp_ = 1, cp_ = 1, dp_ = 1, pp_ = 1, gpus_per_node_ = 1, nodes_ = 1;
};

}  // namespace ftplan::plan
