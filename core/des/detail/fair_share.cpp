#include "des/detail/fair_share.hpp"
#include "common/error.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ftplan::des::detail {

namespace {

// Min-heap order on (fair share, link): the smallest share first, equal shares by link index so
// the fill is the same on every run.
struct Later {
  bool operator()(const std::pair<double, FairShare::Index>& a, const std::pair<double, FairShare::Index>& b) const {
    return a.first > b.first || (a.first == b.first && a.second > b.second);
  }
};

// Relative slack of the bottleneck check: rates come out of sums and differences of doubles.
constexpr double kSlack = 1e-9;
// Relative change of a rate below which it counts as unchanged.
constexpr double kSame = 1e-12;

}  // namespace

FairShare::Index FairShare::add_link(double bandwidth_Bps) {
  FTPLAN_ASSERT(bandwidth_Bps > 0, "des: link bandwidth must be > 0");
  Link l;
  l.bandwidth_Bps = bandwidth_Bps;
  links_.push_back(std::move(l));
  return static_cast<Index>(links_.size() - 1);
}

FairShare::Index FairShare::add_flow(const Index* links, std::size_t count) {
  FTPLAN_ASSERT(count > 0, "des: a flow needs at least one link");
  Index f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<Index>(flows_.size());
    flows_.emplace_back();
  }
  Flow& flow = flows_[f];
  flow.rate = 0;
  flow.bottleneck = links[0];
  flow.edge_count = static_cast<std::uint32_t>(count);
  if (count > kInlineEdges) {
    if (spill_.size() <= f) spill_.resize(f + 1);
    spill_[f].resize(count);
  }
  const std::span<Edge> path = edges(f);
  for (std::size_t i = 0; i < count; ++i) {
    Link& l = links_.at(links[i]);
    path[i] = {links[i], static_cast<Index>(l.crossings.size())};
    l.crossings.push_back({f, static_cast<Index>(i)});
    mark_dirty(links[i]);
  }
  fresh_.push_back(f);
  return f;
}

void FairShare::remove_flow(Index f) {
  for (const Edge& e : edges(f)) {
    Link& l = links_[e.link];
    const Crossing moved = l.crossings.back();
    l.crossings[e.at] = moved;
    edges(moved.flow)[moved.edge].at = e.at;
    l.crossings.pop_back();
    mark_dirty(e.link);
  }
  Flow& flow = flows_[f];
  flow.edge_count = 0;
  flow.rate = 0;
  free_.push_back(f);
}

void FairShare::mark_dirty(Index link) {
  if (links_[link].dirty) return;
  links_[link].dirty = true;
  dirty_.push_back(link);
}

void FairShare::next_epoch() {
  if (++epoch_ != 0) return;
  for (Link& l : links_) l.touched = 0;  // wrapped after 2^32 solves: forget old marks
  for (Flow& f : flows_) f.in_s = 0;
  epoch_ = 1;
}

// Adds to S every flow bottlenecked on a link S crosses, from touched_[from] on (the links S
// came to cross since the last call), transitively. Then no held flow's bottleneck is crossed by
// S: each keeps its bottleneck (its link's flows and load are as they were) and needs no check.
// Returns how far touched_ is closed.
std::size_t FairShare::close_s(std::size_t from) {
  for (std::size_t i = from; i < touched_.size(); ++i) {
    const Index l = touched_[i];  // add_to_s may move touched_: read once
    for (const Crossing& c : links_[l].crossings)
      if (flows_[c.flow].bottleneck == l) add_to_s(c.flow);
  }
  return touched_.size();
}

void FairShare::add_to_s(Index f) {
  Flow& flow = flows_[f];
  if (flow.in_s == epoch_) return;
  flow.in_s = epoch_;
  s_flows_.push_back(f);
  for (const Edge& e : edges(f)) {
    Link& l = links_[e.link];
    if (l.touched == epoch_) continue;
    l.touched = epoch_;
    touched_.push_back(e.link);
  }
}

void FairShare::solve_all(std::vector<Index>& changed) {
  for (Index f = 0; f < flows_.size(); ++f)
    if (live(flows_[f])) fresh_.push_back(f);  // every flow in S: one fill, nothing held
  for (Index l = 0; l < links_.size(); ++l) mark_dirty(l);
  solve(changed);
}

void FairShare::solve(std::vector<Index>& changed) {
  if (dirty_.empty()) return;
  if (solve_alone(changed)) return;
  next_epoch();
  ++stats_.solves;
  s_flows_.clear();
  touched_.clear();
  // S starts as the new flows and the flows bottlenecked on a changed link (a removed flow leaves
  // them room; a new one takes some), and, transitively, the flows bottlenecked on a link S
  // crosses (close_s, again after each growth): a flow of S that gets more (or less) moves the
  // level of every link it crosses, so most of them would fail a check and cost another fill
  // (des_bench: 'local' 1.6 fills a solve without them, 1.07 with them; 'global' 2.4 and 1.14).
  for (Index f : fresh_)
    if (live(flows_[f])) add_to_s(f);
  fresh_.clear();
  for (Index l : dirty_) {
    Link& link = links_[l];
    link.dirty = false;
    if (link.touched == epoch_) continue;
    link.touched = epoch_;
    touched_.push_back(l);
  }
  dirty_.clear();
  std::size_t closed = close_s(0);
  for (int round = 0;; ++round) {
    if (round == max_rounds_) {
      whole_component();
      fill();
      break;
    }
    fill();
    if (!grow()) break;
    closed = close_s(closed);
  }
  for (Index f : s_flows_) {
    Flow& flow = flows_[f];
    flow.bottleneck = flow.next_bottleneck;
    // A flow refilled to the same level can differ in the last bits (other flows were frozen in
    // another order): keep its rate, so its completion is not rescheduled for nothing.
    if (std::abs(flow.next_rate - flow.rate) <= kSame * flow.rate) continue;
    flow.rate = flow.next_rate;
    changed.push_back(f);
    ++stats_.changed;
  }
}

// The common case of a step's collectives and copies: every new flow alone on each link it
// crosses, and no other flow on a link that changed. Progressive filling then freezes each at the
// smallest bandwidth on its path (its share there is bandwidth / 1), at the first such link by
// index (the fill's order among equal shares), and no held flow can fail its check (none crosses a
// touched link): the answer solve()'s fill gives, without building S, the heap and the checks.
bool FairShare::solve_alone(std::vector<Index>& changed) {
  next_epoch();
  for (Index f : fresh_) {
    Flow& flow = flows_[f];
    if (!live(flow)) continue;
    flow.in_s = epoch_;
    for (const Edge& e : edges(f))
      if (links_[e.link].crossings.size() != 1) return false;  // shared (or crossed twice)
  }
  for (Index l : dirty_) {
    const Link& link = links_[l];
    if (link.crossings.size() > 1 || (link.crossings.size() == 1 && flows_[link.crossings[0].flow].in_s != epoch_))
      return false;
  }
  ++stats_.solves;
  ++stats_.fills;
  for (Index l : dirty_) links_[l].dirty = false;
  dirty_.clear();
  for (Index f : fresh_) {
    Flow& flow = flows_[f];
    if (!live(flow) || flow.in_s != epoch_) continue;
    flow.in_s = 0;  // once: fresh_ may name a slot twice (removed and reused)
    ++stats_.flows_filled;
    const std::span<const Edge> path = edges(f);
    Index bottleneck = path.front().link;
    for (const Edge& e : path)
      if (links_[e.link].bandwidth_Bps < links_[bottleneck].bandwidth_Bps ||
          (links_[e.link].bandwidth_Bps == links_[bottleneck].bandwidth_Bps && e.link < bottleneck))
        bottleneck = e.link;
    flow.bottleneck = bottleneck;
    const double rate = links_[bottleneck].bandwidth_Bps;
    if (std::abs(rate - flow.rate) <= kSame * flow.rate) continue;
    flow.rate = rate;
    changed.push_back(f);
    ++stats_.changed;
  }
  fresh_.clear();
  return true;
}

// Progressive filling of the flows in S; every other flow keeps its rate and its usage. On the
// way, notes each touched link's highest rate.
void FairShare::fill() {
  ++stats_.fills;
  stats_.flows_filled += s_flows_.size();
  start_fill();
  if (touched_.size() <= kScanLinks) {
    // Few links: find the smallest share by a scan each time (same order as the heap's).
    for (;;) {
      Index best = 0;
      double best_share = -1;
      for (Index l : touched_) {
        const Link& link = links_[l];
        if (link.unfrozen == 0) continue;
        const double share = std::max(link.capacity_left, 0.0) / link.unfrozen;
        if (best_share < 0 || share < best_share || (share == best_share && l < best)) {
          best = l;
          best_share = share;
        }
      }
      if (best_share < 0) break;
      saturate(best, best_share);
    }
    return;
  }
  std::make_heap(heap_.begin(), heap_.end(), Later{});
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const auto [share, l] = heap_.back();
    heap_.pop_back();
    Link& link = links_[l];
    if (link.unfrozen == 0) continue;
    const double now_share = std::max(link.capacity_left, 0.0) / link.unfrozen;
    if (now_share != share) {  // stale: this link's share grew since it was pushed
      heap_.emplace_back(now_share, l);
      std::push_heap(heap_.begin(), heap_.end(), Later{});
      continue;
    }
    saturate(l, share);
  }
}

// Each touched link's capacity left by the flows outside S, its count of flows of S and its
// highest rate; every flow of S unfrozen; and, with many links, the heap of their first shares.
void FairShare::start_fill() {
  heap_.clear();
  for (Index l : touched_) {
    Link& link = links_[l];
    link.capacity_left = link.bandwidth_Bps;
    link.unfrozen = 0;
    link.top = 0;
    for (const Crossing& c : link.crossings) {
      Flow& flow = flows_[c.flow];
      if (flow.in_s == epoch_) {
        ++link.unfrozen;
        continue;
      }
      link.capacity_left -= flow.rate;
      link.top = std::max(link.top, flow.rate);
    }
    if (link.unfrozen > 0 && touched_.size() > kScanLinks)
      heap_.emplace_back(std::max(link.capacity_left, 0.0) / link.unfrozen, l);
  }
  for (Index f : s_flows_) flows_[f].next_rate = -1;  // unfrozen
}

// Link `l` saturates at `share`: freeze every flow of S still unfrozen on it.
void FairShare::saturate(Index l, double share) {
  for (const Crossing& c : links_[l].crossings) {
    Flow& flow = flows_[c.flow];
    if (flow.in_s != epoch_ || flow.next_rate >= 0) continue;
    flow.next_rate = share;
    flow.next_bottleneck = l;
    for (const Edge& e : edges(c.flow)) {
      Link& other = links_[e.link];
      other.capacity_left -= share;
      other.top = std::max(other.top, share);
      --other.unfrozen;
    }
  }
}

// Checks the bottleneck condition wherever the last fill could have broken it, and moves the
// flows that fail it (or that make a flow of S fail it) into S. Returns whether S grew.
bool FairShare::grow() {
  // A touched link after a fill: load = bandwidth - capacity left, highest rate = top.
  auto holds = [&](Index l, double rate) {
    const Link& link = links_[l];
    return link.capacity_left <= link.bandwidth_Bps * kSlack && rate >= link.top * (1 - kSlack);
  };
  bool grew = false;
  // Flows of S, at the link that froze them: a held flow getting more there must come down.
  for (std::size_t i = 0, n = s_flows_.size(); i < n; ++i) {
    const Flow& flow = flows_[s_flows_[i]];
    if (holds(flow.next_bottleneck, flow.next_rate)) continue;
    const double rate = flow.next_rate;
    for (const Crossing& c : links_[flow.next_bottleneck].crossings) {
      const Flow& other = flows_[c.flow];
      if (other.in_s != epoch_ && other.rate > rate) {
        add_to_s(c.flow);
        grew = true;
      }
    }
  }
  // No held flow's bottleneck is touched (close_s): those keep theirs.
  return grew;
}

// S becomes every flow connected to it through shared links: no flow outside is held.
void FairShare::whole_component() {
  ++stats_.whole;
  for (std::size_t i = 0; i < touched_.size(); ++i)
    for (const Crossing& c : links_[touched_[i]].crossings) add_to_s(c.flow);
}

}  // namespace ftplan::des::detail
