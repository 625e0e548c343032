// Max-min fair sharing of link bandwidth among flows, solved by progressive filling (water
// filling) and re-solved only where something changed.
//
// Every active flow crosses one or more links. Rates are max-min fair: no flow can get more
// without taking from a flow that has no more than it. Progressive filling finds them: raise all
// rates together; when a link saturates, the flows crossing it are frozen at the current level
// (its "fair share": remaining capacity / flows still unfrozen on it); go on with the rest
// (Bertsekas & Gallager, "Data Networks", 2nd ed., sec. 6.5.2; SimGrid's lmm_solve does the same
// with weights, Velho et al. 2013, "On the validity of flow-level TCP network models").
//
// Partial re-solve (SimGrid's `selective_update_active`, kernel/lmm/maxmin.cpp, which keeps a
// "modified set" of constraints and re-solves only those): adding or removing a
// flow marks the links it crosses dirty. solve() takes the connected component of the dirty links
// in the bipartite link-flow graph (links joined by the flows that cross them) and refills only
// that; flows outside it keep their rates, which cannot have changed. Several changes before one
// solve() cost one refill (the engine solves once per instant, after every event of that instant).
//
// Cost of one solve(): O(E + L log L) for the component's E link crossings and L links: each
// crossing is touched a constant number of times when the component is found and when its flow is
// frozen, and each link enters a heap of fair shares a few times. Fair shares only grow during a
// fill (a link's share (c - s)/(n - 1) >= c/n whenever s <= c/n), so a heap entry that became
// stale is simply re-pushed with its new, larger share when it surfaces; no decrease-key.
//
// A link crossed twice by one flow counts it twice (it uses the link's bandwidth twice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ftplan::des::detail {

class FairShare {
 public:
  using Index = std::uint32_t;

  // bandwidth_Bps > 0.
  Index add_link(double bandwidth_Bps);
  std::size_t link_count() const { return links_.size(); }

  // Adds an active flow over `count` >= 1 links and returns its slot (slots of removed flows are
  // reused, most recently freed first). Its rate is 0 until the next solve().
  Index add_flow(const Index* links, std::size_t count);
  void remove_flow(Index flow);

  // True when a flow was added or removed since the last solve().
  bool dirty() const { return !dirty_.empty(); }

  // Recomputes the rates of the flows that share a component with a changed link and appends to
  // `changed`, in a deterministic order, every live flow whose rate is now different.
  void solve(std::vector<Index>& changed);
  // Marks every link dirty, then solve(): the from-scratch answer, for tests.
  void solve_all(std::vector<Index>& changed);

  double rate(Index flow) const { return flows_[flow].rate; }
  std::size_t flows_on(Index link) const { return links_[link].crossings.size(); }
  std::size_t active_flows() const { return flows_.size() - free_.size(); }

  struct Stats {
    std::uint64_t solves = 0;         // non-empty solves
    std::uint64_t links_visited = 0;  // summed component sizes
    std::uint64_t flows_visited = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Crossing {
    Index flow;
    Index edge;  // which of the flow's edges this is
  };
  struct Link {
    double bandwidth_Bps = 0;
    std::vector<Crossing> crossings;  // active flows on this link
    double capacity_left = 0;         // during a fill
    Index unfrozen = 0;               // during a fill
    std::uint32_t seen = 0;           // epoch of the last component that held it
    bool dirty = false;
  };
  struct Edge {
    Index link;
    Index at;  // index of this crossing in the link's `crossings`
  };
  struct Flow {
    std::vector<Edge> edges;
    double rate = 0;
    double next_rate = 0;
    std::uint32_t seen = 0;
    bool live = false;
  };

  void mark_dirty(Index link);
  void next_epoch();

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<Index> free_;   // slots to reuse
  std::vector<Index> dirty_;  // links changed since the last solve
  std::uint32_t epoch_ = 0;
  Stats stats_;
  // Scratch kept between solves so a solve allocates nothing once warm.
  std::vector<Index> comp_links_;
  std::vector<Index> comp_flows_;
  std::vector<std::pair<double, Index>> heap_;
};

}  // namespace ftplan::des::detail
