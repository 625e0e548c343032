#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "sweep/axes.hpp"

namespace ftplan::sweep::detail {

namespace {

// Uniform double in [0, 1) from 53 random bits: the same on every platform (the standard
// distributions are not).
double unit_uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform integer in [0, n) by rejection, without modulo bias.
std::uint64_t below(std::mt19937_64& rng, std::uint64_t n) {
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
  for (;;) {
    const std::uint64_t x = rng();
    if (x < limit) return x % n;
  }
}

}  // namespace

std::vector<AxisValue> Expansion::point_values(std::int64_t point) const {
  FTPLAN_ASSERT(point >= 0 && point < points, "sweep point out of range");
  std::vector<AxisValue> out(axes.size());
  if (sampled) {
    for (std::size_t d = 0; d < dims.size(); ++d) {
      const double u = samples[static_cast<std::size_t>(point) * dims.size() + d];
      for (std::size_t a : dims[d].axes) {
        const AxisDef& ax = axes[a];
        if (ax.continuous) {
          double v = ax.log ? ax.from * std::pow(ax.to / ax.from, u) : ax.from + u * (ax.to - ax.from);
          if (ax.integer) v = std::round(v);
          out[a] = number_value(v, ax.integer, ax.unit);
        } else {
          const auto n = dims[d].length;
          out[a] = ax.value(std::min(n - 1, static_cast<std::size_t>(u * static_cast<double>(n))));
        }
      }
    }
    return out;
  }
  // Grid: mixed radix, the last dimension varying fastest (as nested loops in file order).
  std::int64_t rest = point;
  for (std::size_t d = dims.size(); d-- > 0;) {
    const auto n = static_cast<std::int64_t>(dims[d].length);
    const auto index = static_cast<std::size_t>(rest % n);
    rest /= n;
    for (std::size_t a : dims[d].axes) out[a] = axes[a].value(index);
  }
  return out;
}

void Expansion::draw(const std::string& method, std::int64_t count, std::int64_t seed) {
  points = count;
  const std::size_t n = static_cast<std::size_t>(count), nd = dims.size();
  samples.assign(n * nd, 0.0);
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  if (method == "random") {
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t d = 0; d < nd; ++d) samples[p * nd + d] = unit_uniform(rng);
    return;
  }
  // Latin hypercube (McKay, Beckman & Conover 1979, "A comparison of three methods for
  // selecting values of input variables in the analysis of output from a computer code",
  // Technometrics 21(2)): each dimension's [0, 1) is cut into `count` equal strata, a random
  // permutation gives each point its own stratum, and the point is uniform within it. So
  // every dimension is covered evenly however few points are drawn.
  std::vector<std::size_t> perm(n);
  for (std::size_t d = 0; d < nd; ++d) {
    for (std::size_t p = 0; p < n; ++p) perm[p] = p;
    for (std::size_t p = n; p-- > 1;) std::swap(perm[p], perm[below(rng, p + 1)]);  // Fisher-Yates
    for (std::size_t p = 0; p < n; ++p)
      samples[p * nd + d] = (static_cast<double>(perm[p]) + unit_uniform(rng)) / static_cast<double>(n);
  }
}

}  // namespace ftplan::sweep::detail
