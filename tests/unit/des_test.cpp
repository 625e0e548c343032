// The discrete-event engine's machinery (core/des/detail): the fair-share solver and event queues.
#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "des/detail/event_queue.hpp"
#include "des/detail/fair_share.hpp"

using namespace ftplan::des;

TEST_CASE("two flows share one link max-min fairly") {
  /* Link L 10 GB/s; flow A also crosses its own link M of 2 GB/s, flow B crosses only L.
   * Progressive filling: M's share is 2/1 = 2, L's is 10/2 = 5; M saturates first and freezes A
   * at 2; L has 10 - 2 = 8 left for B alone. Expectations: A gets 2, B gets the remaining 8.   */
  detail::FairShare fs;
  const auto l = fs.add_link(10e9), m = fs.add_link(2e9);
  const detail::FairShare::Index path_a[] = {l, m}, path_b[] = {l};
  const auto a = fs.add_flow(path_a, 2), b = fs.add_flow(path_b, 1);
  std::vector<detail::FairShare::Index> changed;
  fs.solve(changed);
  CHECK(changed.size() == 2);
  CHECK(fs.rate(a) == doctest::Approx(2e9));
  CHECK(fs.rate(b) == doctest::Approx(8e9));
}

// ---------------------------------------------------------------------------------------------
// The fair-share solver on its own: random systems against the definition of max-min fairness.

TEST_CASE("fair share: random systems are max-min fair, and partial re-solves match a full solve") {
  /* Max-min fairness (Bertsekas & Gallager, sec. 6.5.2): rates are feasible (each link carries
   * at most its bandwidth) and every flow has a bottleneck: a saturated link on its path where no
   * flow gets more than it does. Checked after each of 400 random adds and removes, and compared
   * with a from-scratch solve of the same flows.                                                */
  std::mt19937_64 rng(20260514);
  auto pick = [&](std::uint64_t n) { return rng() % n; };
  detail::FairShare inc;
  const int n_links = 40;
  std::vector<double> bw;
  for (int l = 0; l < n_links; ++l) {
    bw.push_back(1e9 * static_cast<double>(1 + pick(100)));
    inc.add_link(bw.back());
  }
  std::map<detail::FairShare::Index, std::vector<detail::FairShare::Index>> live;  // slot -> path
  std::vector<detail::FairShare::Index> changed;
  for (int step = 0; step < 400; ++step) {
    if (live.empty() || pick(3) != 0) {
      std::vector<detail::FairShare::Index> path;
      const auto len = 1 + pick(3);
      for (std::uint64_t i = 0; i < len; ++i) path.push_back(static_cast<detail::FairShare::Index>(pick(n_links)));
      live[inc.add_flow(path.data(), path.size())] = path;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(pick(live.size())));
      inc.remove_flow(it->first);
      live.erase(it);
    }
    changed.clear();
    inc.solve(changed);

    std::vector<double> load(n_links, 0), top(n_links, 0);
    for (const auto& [f, path] : live)
      for (auto l : path) {
        load[l] += inc.rate(f);
        top[l] = std::max(top[l], inc.rate(f));
      }
    for (int l = 0; l < n_links; ++l) CHECK(load[l] <= bw[l] * (1 + 1e-9));
    for (const auto& [f, path] : live) {
      bool bottleneck = false;
      for (auto l : path)
        bottleneck = bottleneck || (load[l] >= bw[l] * (1 - 1e-9) && inc.rate(f) >= top[l] * (1 - 1e-9));
      CHECK(bottleneck);
    }

    detail::FairShare full;
    for (double b : bw) full.add_link(b);
    std::map<detail::FairShare::Index, detail::FairShare::Index> slot;
    for (const auto& [f, path] : live) slot[f] = full.add_flow(path.data(), path.size());
    changed.clear();
    full.solve_all(changed);
    for (const auto& [f, path] : live) CHECK(inc.rate(f) == doctest::Approx(full.rate(slot[f])).epsilon(1e-9));
  }
  CHECK(inc.stats().solves == 400);
}

TEST_CASE("indexed heap: moves and removals keep (time, seq) order") {
  /* Against a std::set of (time, seq, slot) under random set/erase: the tops always agree.     */
  std::mt19937_64 rng(7);
  detail::IndexedHeap h;
  std::set<std::tuple<std::int64_t, std::uint64_t, std::uint32_t>> ref;
  std::map<std::uint32_t, std::pair<std::int64_t, std::uint64_t>> key;
  std::uint64_t seq = 0;
  for (int i = 0; i < 5000; ++i) {
    const auto slot = static_cast<std::uint32_t>(rng() % 64);
    if (rng() % 4 == 0) {
      h.erase(slot);
      if (key.count(slot)) ref.erase({key[slot].first, key[slot].second, slot});
      key.erase(slot);
    } else {
      const auto time = static_cast<std::int64_t>(rng() % 100);
      if (key.count(slot)) ref.erase({key[slot].first, key[slot].second, slot});
      key[slot] = {time, seq};
      ref.insert({time, seq, slot});
      h.set(slot, time, seq++);
    }
    REQUIRE(h.size() == ref.size());
    if (!ref.empty()) CHECK(h.top_slot() == std::get<2>(*ref.begin()));
  }
}
