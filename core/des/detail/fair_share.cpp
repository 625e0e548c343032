#include "des/detail/fair_share.hpp"

#include <algorithm>
#include <stdexcept>

namespace ftplan::des::detail {

namespace {

// Min-heap order on (fair share, link): the smallest share first, equal shares by link index so
// the fill is the same on every run.
bool later(const std::pair<double, FairShare::Index>& a, const std::pair<double, FairShare::Index>& b) {
  return a.first > b.first || (a.first == b.first && a.second > b.second);
}

}  // namespace

FairShare::Index FairShare::add_link(double bandwidth_Bps) {
  if (!(bandwidth_Bps > 0)) throw std::invalid_argument("des: link bandwidth must be > 0");
  Link l;
  l.bandwidth_Bps = bandwidth_Bps;
  links_.push_back(std::move(l));
  return static_cast<Index>(links_.size() - 1);
}

FairShare::Index FairShare::add_flow(const Index* links, std::size_t count) {
  if (count == 0) throw std::invalid_argument("des: a flow needs at least one link");
  Index f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<Index>(flows_.size());
    flows_.emplace_back();
  }
  Flow& flow = flows_[f];
  flow.live = true;
  flow.rate = 0;
  flow.edges.clear();
  for (std::size_t i = 0; i < count; ++i) {
    Link& l = links_.at(links[i]);
    flow.edges.push_back({links[i], static_cast<Index>(l.crossings.size())});
    l.crossings.push_back({f, static_cast<Index>(i)});
    mark_dirty(links[i]);
  }
  return f;
}

void FairShare::remove_flow(Index f) {
  Flow& flow = flows_[f];
  for (const Edge& e : flow.edges) {
    Link& l = links_[e.link];
    const Crossing moved = l.crossings.back();
    l.crossings[e.at] = moved;
    flows_[moved.flow].edges[moved.edge].at = e.at;
    l.crossings.pop_back();
    mark_dirty(e.link);
  }
  flow.edges.clear();
  flow.live = false;
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
  for (Link& l : links_) l.seen = 0;  // wrapped after 2^32 solves: forget old marks
  for (Flow& f : flows_) f.seen = 0;
  epoch_ = 1;
}

void FairShare::solve_all(std::vector<Index>& changed) {
  for (Index l = 0; l < links_.size(); ++l) mark_dirty(l);
  solve(changed);
}

void FairShare::solve(std::vector<Index>& changed) {
  if (dirty_.empty()) return;
  next_epoch();
  ++stats_.solves;

  // 1. The component: links reachable from the dirty ones through shared flows.
  comp_links_.clear();
  comp_flows_.clear();
  for (Index l : dirty_) {
    links_[l].dirty = false;
    if (links_[l].seen != epoch_) {
      links_[l].seen = epoch_;
      comp_links_.push_back(l);
    }
  }
  dirty_.clear();
  for (std::size_t i = 0; i < comp_links_.size(); ++i) {
    for (const Crossing& c : links_[comp_links_[i]].crossings) {
      Flow& flow = flows_[c.flow];
      if (flow.seen == epoch_) continue;
      flow.seen = epoch_;
      comp_flows_.push_back(c.flow);
      for (const Edge& e : flow.edges) {
        if (links_[e.link].seen == epoch_) continue;
        links_[e.link].seen = epoch_;
        comp_links_.push_back(e.link);
      }
    }
  }
  stats_.links_visited += comp_links_.size();
  stats_.flows_visited += comp_flows_.size();

  // 2. Progressive filling over the component. A flow is unfrozen while next_rate < 0.
  heap_.clear();
  for (Index l : comp_links_) {
    Link& link = links_[l];
    link.capacity_left = link.bandwidth_Bps;
    link.unfrozen = static_cast<Index>(link.crossings.size());
    if (link.unfrozen > 0) heap_.emplace_back(link.capacity_left / link.unfrozen, l);
  }
  std::make_heap(heap_.begin(), heap_.end(), later);
  for (Index f : comp_flows_) flows_[f].next_rate = -1;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const auto [share, l] = heap_.back();
    heap_.pop_back();
    Link& link = links_[l];
    if (link.unfrozen == 0) continue;
    const double now_share = std::max(link.capacity_left, 0.0) / link.unfrozen;
    if (now_share != share) {  // stale: this link's share grew since it was pushed
      heap_.emplace_back(now_share, l);
      std::push_heap(heap_.begin(), heap_.end(), later);
      continue;
    }
    // `link` saturates at `share`: freeze every flow still unfrozen on it.
    for (const Crossing& c : link.crossings) {
      Flow& flow = flows_[c.flow];
      if (flow.next_rate >= 0) continue;
      flow.next_rate = share;
      for (const Edge& e : flow.edges) {
        Link& other = links_[e.link];
        other.capacity_left -= share;
        --other.unfrozen;
      }
    }
  }

  // 3. Report the flows whose rate moved.
  for (Index f : comp_flows_) {
    Flow& flow = flows_[f];
    if (flow.next_rate == flow.rate) continue;
    flow.rate = flow.next_rate;
    changed.push_back(f);
  }
}

}  // namespace ftplan::des::detail
