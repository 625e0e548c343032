// Interpolation between measured points (GEMM and attention rates by shape): the simulator's, and
// validate's reading of a calibration profile (exec/rates.hpp), the same way.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

namespace ftplan::sim {

// Inverse-distance weighting of the kNearest closest points (Shepard 1968, "A two-dimensional
// interpolation function for irregularly-spaced data"), distances in log2 of each coordinate, so
// that 2048 sits as far from 1024 as from 4096. A point at distance 0 is returned as it is.
// Points at an infinite distance do not take part; returns `otherwise` when none does. Called for
// every GEMM and attention op when a profile is given: it keeps the nearest in place, no heap.
// `value(point)` is what is interpolated.
template <class Point, class Distance, class Value>
double interpolate(const std::vector<Point>& points, Distance distance, Value value, double otherwise) {
  constexpr std::size_t kNearest = 4;
  std::array<std::pair<double, double>, kNearest> best;  // (distance, value), nearest first
  std::size_t n = 0;
  for (const auto& pt : points) {
    const double d = distance(pt);
    if (!std::isfinite(d) || (n == kNearest && d >= best[n - 1].first)) continue;
    std::size_t at = n < kNearest ? n++ : n - 1;  // the slot it takes, then moved up past farther ones
    for (; at > 0 && best[at - 1].first > d; --at) best[at] = best[at - 1];
    best[at] = {d, value(pt)};
  }
  if (n == 0) return otherwise;
  if (best[0].first <= 1e-12) return best[0].second;
  double weights = 0, sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double w = 1.0 / (best[i].first * best[i].first);
    weights += w;
    sum += w * best[i].second;
  }
  return sum / weights;
}

// |log2(a / b)|: how many doublings apart.
inline double log_gap(double a, double b) { return std::abs(std::log2(a / b)); }

}  // namespace ftplan::sim
