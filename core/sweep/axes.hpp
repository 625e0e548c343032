// Private to core/sweep: a sweep's axes as read from its file (axes.cpp), and how they expand
// into points: the grid's mixed radix, or random / Latin-hypercube samples (points.cpp).
// (Not part of sweep's interface: that is sweep/sweep.hpp.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "io/rows.hpp"
#include "io/yaml_reader.hpp"
#include "sweep/sweep.hpp"
#include "sweep/tree.hpp"

namespace ftplan::sweep::detail {

inline constexpr std::int64_t kMaxPoints = 10'000'000;
inline constexpr std::size_t kMaxValues = 1'000'000;  // of one axis

struct AxisValue {
  Tree tree;         // what is set in the scenario
  io::Value column;  // what the output shows
};

struct AxisDef {
  Axis axis;
  std::vector<Segment> path;
  std::vector<AxisValue> values;  // a `values:` list
  // A range with a step (from + i x step) or a geometric list (from x step^i): `count` values
  // made on demand by value(), never stored (a million stored took 400 MB and 2 s).
  enum class Steps { none, linear, geometric } steps = Steps::none;
  double step = 0;
  std::size_t count = 0;
  // Continuous range (only with `sample`): from..to, linear or log, real or rounded.
  bool continuous = false;
  double from = 0, to = 0;
  bool log = false;
  bool integer = false;
  std::string unit;

  std::size_t size() const { return steps == Steps::none ? values.size() : count; }
  AxisValue value(std::size_t i) const;  // REQUIRES: i < size()
};

// One dimension of the expansion: a single axis, or a zip group of axes that move together.
struct Dim {
  std::vector<std::size_t> axes;
  std::size_t length = 0;  // values; 0 for a continuous range
};

// The value `v` as an axis sets it (with its unit) and as its column shows it.
AxisValue number_value(double v, bool integer, const std::string& unit);

// Reads one axis mapping (not a zip group) of the sweep file `file`; problems go to `r`.
AxisDef read_axis(io::detail::MapView& m, io::detail::Reader& r, const std::string& file, bool sampled);

// The axes and how they combine into points.
struct Expansion {
  std::vector<AxisDef> axes;
  std::vector<Dim> dims;
  bool sampled = false;
  std::int64_t points = 0;
  std::vector<double> samples;  // points x dims, each in [0, 1)

  // The axes of the sweep file's `axes:` list (zip groups as one dimension each), in file order;
  // problems go to `r`.
  void read_axes(io::detail::MapView& root, io::detail::Reader& r, const std::string& file);
  // Each axis's value at `point`. REQUIRES: 0 <= point < points.
  std::vector<AxisValue> point_values(std::int64_t point) const;
  // Draws `count` samples of every dimension with `method` ("random" or "lhs") from `seed`.
  void draw(const std::string& method, std::int64_t count, std::int64_t seed);
};

}  // namespace ftplan::sweep::detail
