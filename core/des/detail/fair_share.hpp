// Max-min fair sharing of link bandwidth among flows, solved by progressive filling (water
// filling) and re-solved incrementally: only around what changed, and only as far as rates move.
//
// Every active flow crosses one or more links. Rates are max-min fair: no flow can get more
// without taking from a flow that has no more than it. Progressive filling finds them: raise all
// rates together; when a link saturates, the flows crossing it are frozen at the current level
// (its "fair share": remaining capacity / flows still unfrozen on it); go on with the rest
// (Bertsekas & Gallager, "Data Networks", 2nd ed., sec. 6.5.2; SimGrid's lmm_solve does the same
// with weights, Velho et al. 2013, "On the validity of flow-level TCP network models").
//
// Incremental re-solve. An allocation is max-min fair if and only if it is feasible and every flow
// has a bottleneck: a saturated link on its path where no flow gets more than it does (Bertsekas &
// Gallager, sec. 6.5.2; Radunovic & Le Boudec 2007, "A unified framework for max-min and min-max
// fairness with applications", which also shows water filling computes it). So after flows start
// or end, solve() refills only a set S of flows, with every other flow held at its rate (its usage
// subtracted from the links' capacity), then checks the bottleneck condition where S could have
// broken it: each flow of S at the link that froze it (a held flow there may get more: it joins
// S). S is kept closed: every flow bottlenecked (in the fill that set its rate) on a link that S
// crosses is in S, so no held flow's bottleneck is crossed by S, and links that no flow of S
// crosses kept their flows and rates: held flows need no check. S starts as the new flows and the
// flows bottlenecked on a changed link, closed, and grows (closed again) until the check passes:
// exact (up to a relative slack of 1e-9 in the check), and cheap when few rates move. On the
// engine's benchmark (bench/des_bench.cpp) a solve takes 1.07 fills on 'local' (nodes of 12 links)
// and 1.14 on 'global' (~400 flows over 300 links, paths of 1-3), where the connected component
// of a change holds ~455 flows on average but a solve refills ~30 of them and ~25 change rate.
// (Before S was closed, held flows bottlenecked on a link S crossed were checked after each fill
// instead; most failed, so a solve took 1.6 and 2.4 fills.)
// After max_rounds growths S becomes the whole connected component of the changed links (in the
// bipartite link-flow graph), which a single fill solves exactly: SimGrid's "selective update"
// (`selective_update_active` in kernel/lmm/maxmin.cpp), our worst case.
//
// Cost of one fill: O(E + L log L) for the E link crossings and L links it covers: each crossing is
// touched a constant number of times, each link enters a heap of fair shares a few times. Fair
// shares only grow during a fill (a link's share (c - s)/(n - 1) >= c/n whenever s <= c/n), so a
// heap entry that became stale is re-pushed with its new, larger share when it surfaces. Fills
// over at most kScanLinks links find the smallest share by a scan instead (same order).
//
// A link crossed twice by one flow counts it twice (it uses the link's bandwidth twice).
// A rate that comes back within a relative 1e-12 of the old one is kept, so the engine does not
// reschedule a completion for float noise. Every loop runs in an order fixed by the calls made,
// so results are deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ftplan::des::detail {

class FairShare {
 public:
  using Index = std::uint32_t;

  // Rounds of growing S before falling back to the whole component (tests lower it to reach the
  // fallback).
  static constexpr int kMaxRounds = 16;
  explicit FairShare(int max_rounds = kMaxRounds) : max_rounds_(max_rounds) {}

  // bandwidth_Bps > 0.
  Index add_link(double bandwidth_Bps);
  std::size_t link_count() const { return links_.size(); }

  // Adds an active flow over `count` >= 1 links and returns its slot (slots of removed flows are
  // reused, most recently freed first). Its rate is 0 until the next solve().
  Index add_flow(const Index* links, std::size_t count);
  void remove_flow(Index flow);

  // True when a flow was added or removed since the last solve().
  bool dirty() const { return !dirty_.empty(); }

  // Brings every rate up to date after the adds and removes since the last solve(), and appends
  // to `changed`, in a deterministic order, every live flow whose rate is now different.
  void solve(std::vector<Index>& changed);
  // The same answer by a fill over every flow at once (no incremental shortcut), for tests.
  void solve_all(std::vector<Index>& changed);

  double rate(Index flow) const { return flows_[flow].rate; }
  std::size_t flows_on(Index link) const { return links_[link].crossings.size(); }
  std::size_t active_flows() const { return flows_.size() - free_.size(); }

  struct Stats {
    std::uint64_t solves = 0;        // solves with something to do
    std::uint64_t fills = 0;         // progressive fills (rounds), summed over solves
    std::uint64_t whole = 0;         // solves that fell back to the whole component
    std::uint64_t flows_filled = 0;  // flows refilled, summed over fills
    std::uint64_t changed = 0;       // rates that moved
  };
  const Stats& stats() const { return stats_; }

  // Fills over at most this many links find the next bottleneck by a scan instead of a heap.
  static constexpr std::size_t kScanLinks = 16;

 private:
  struct Crossing {
    Index flow;
    Index edge;  // which of the flow's edges this is
  };
  struct Link {
    double bandwidth_Bps = 0;
    std::vector<Crossing> crossings;  // active flows on this link
    // Scratch of the current solve:
    double capacity_left = 0;   // during and after a fill
    double top = 0;             // after a fill: the highest rate on it
    Index unfrozen = 0;         // during a fill
    std::uint32_t touched = 0;  // == epoch_: a flow of S crosses it
    bool dirty = false;
  };
  struct Edge {
    Index link;
    Index at;  // index of this crossing in the link's `crossings`
  };
  // A flow in one cache line: a solve visits flows scattered over the slots, and each visit reads
  // its edges. Paths of up to kInlineEdges links (the engine's are 1-3 links inside a node, a few
  // more across nodes) keep them here; a longer one keeps them in spill_[slot].
  static constexpr std::uint32_t kInlineEdges = 4;
  struct alignas(64) Flow {
    double rate = 0;
    double next_rate = 0;  // during a solve, for flows in S
    Index bottleneck = 0;  // the link that froze it in the fill that set `rate`
    Index next_bottleneck = 0;
    std::uint32_t in_s = 0;        // == epoch_: in S
    std::uint32_t edge_count = 0;  // 0: not live (a live flow crosses >= 1 link)
    Edge inline_edges[kInlineEdges];
  };
  static_assert(sizeof(Flow) == 64);
  std::span<Edge> edges(Index f) {
    Flow& flow = flows_[f];
    return {flow.edge_count <= kInlineEdges ? flow.inline_edges : spill_[f].data(), flow.edge_count};
  }
  std::span<const Edge> edges(Index f) const { return const_cast<FairShare*>(this)->edges(f); }
  static bool live(const Flow& f) { return f.edge_count > 0; }

  bool solve_alone(std::vector<Index>& changed);  // solve()'s answer where no two flows meet; false: not that case
  void mark_dirty(Index link);
  void add_to_s(Index flow);
  std::size_t close_s(std::size_t from);
  void fill();
  void start_fill();
  void saturate(Index link, double share);
  bool grow();
  void whole_component();
  void next_epoch();

  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<std::vector<Edge>> spill_;  // by slot: the edges of a flow over more than kInlineEdges links
  std::vector<Index> free_;               // slots to reuse
  std::vector<Index> dirty_;              // links changed since the last solve
  std::vector<Index> fresh_;              // flows added since the last solve
  int max_rounds_;
  std::uint32_t epoch_ = 0;  // one per solve
  Stats stats_;
  // Scratch kept between solves so a solve allocates nothing once warm.
  std::vector<Index> s_flows_;
  std::vector<Index> touched_;
  std::vector<std::pair<double, Index>> heap_;
};

}  // namespace ftplan::des::detail
