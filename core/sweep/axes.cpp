#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "sweep/axes.hpp"

namespace ftplan::sweep::detail {

using io::detail::MapView;
using io::detail::Reader;

namespace {

std::string number_text(double v, bool integer) {
  if (integer) return std::to_string(static_cast<std::int64_t>(std::llround(v)));
  return fmt::format("{}", v);
}

// A value as the output column shows it: plain numbers and booleans keep their type.
io::Value column_of(const Tree& t) {
  if (t.kind == Tree::Kind::null) return nullptr;
  if (t.kind != Tree::Kind::scalar) {
    std::string s;
    show(t, s);
    return s;
  }
  if (!t.plain) return t.text;
  const char* b = t.text.data();
  const char* e = b + t.text.size();
  std::int64_t i = 0;
  if (auto r = std::from_chars(b, e, i); r.ec == std::errc() && r.ptr == e) return i;
  double d = 0;
  if (auto r = std::from_chars(b, e, d); r.ec == std::errc() && r.ptr == e && std::isfinite(d)) return d;
  if (t.text == "true") return true;
  if (t.text == "false") return false;
  return t.text;
}

// An axis's key or name as a column: each dotted part (dots inside [ ] belong to their part) a
// plain identifier, so plans[8x H100 LoRA].job.micro_batch -> plans_8x_h100_lora.job.micro_batch,
// and a wildcard part (plans.*.cluster.dram) drops out: plans.cluster.dram.
std::string column_label(const std::string& label) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (const char c : label) {
    if (c == '[') ++depth;
    if (c == ']') depth = std::max(0, depth - 1);
    if (c == '.' && depth == 0) {
      parts.push_back(identifier(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(identifier(cur));
  parts.erase(std::remove(parts.begin(), parts.end(), std::string()), parts.end());
  return join(parts, ".");
}

bool whole(double x) { return x == std::floor(x) && std::abs(x) < 9e15; }

// key, name (its column) and unit.
void read_key(MapView& m, Reader& r, AxisDef& a) {
  a.axis.where = m.location();
  if (m.require("key", "the dotted scenario key this axis sets, e.g. job.seq_len") && m.get("key", a.axis.key)) {
    std::string error;
    a.path = parse_path(a.axis.key, error);
    if (!error.empty()) r.error(m.location_of("key"), m.key_path("key"), fmt::format("'{}' has {}", a.axis.key, error));
    a.axis.where = m.location_of("key");
  }
  std::string label = a.axis.key;
  m.get("name", label);
  a.axis.column = "axis." + column_label(label);
  m.get("unit", a.unit);
}

// values: [...], each as written (with the axis's unit after a scalar).
void read_values(MapView& m, Reader& r, const std::string& file, AxisDef& a) {
  const auto items = m.seq("values");
  if (items.empty() && m.has("values"))
    r.error(m.location_of("values"), m.key_path("values"), "expected a non-empty list");
  for (const auto& item : items) {
    AxisValue v;
    v.tree = to_tree(item, file);
    v.column = column_of(v.tree);
    if (!a.unit.empty() && v.tree.kind == Tree::Kind::scalar) v.tree.text += " " + a.unit;
    a.values.push_back(std::move(v));
  }
}

// range: {from, to, step?, integer?, scale?}: values from..to by step, or (without step, in a
// sampled sweep) a continuous range.
void read_range(MapView& g, Reader& r, bool sampled, AxisDef& a) {
  double from = 0, to = 0, step = 0;
  // Every check runs, in this order, so that every problem is reported (`ok = check && ok`, not
  // `&` between bools, which Clang warns of: -Wbitwise-instead-of-logical).
  bool ok = g.require("from");
  ok = g.require("to") && ok;
  ok = g.get("from", from) && ok;
  ok = g.get("to", to) && ok;
  const bool has_step = g.get("step", step, 0);
  bool integer = false;
  const bool has_integer = g.get("integer", integer);
  std::string scale = "linear";
  g.get("scale", scale);
  if (scale != "linear" && scale != "log")
    r.error(g.location_of("scale"), g.key_path("scale"), fmt::format("'{}' is not one of linear, log", scale));
  if (ok && to < from) r.error(g.location_of("to"), g.key_path("to"), fmt::format("must not be below from ({})", from));
  if (has_step && step <= 0) r.error(g.location_of("step"), g.key_path("step"), "must be above 0");
  if (ok && to >= from && has_step && step > 0) {
    if (scale == "log")
      r.error(g.location_of("scale"), g.key_path("scale"), "a log scale is for ranges without `step` (sampled)");
    const double n = std::floor((to - from) / step * (1 + 1e-12) + 1e-9) + 1;
    if (n > static_cast<double>(kMaxValues)) {
      r.error(g.location_of("step"), g.key_path("step"),
              fmt::format("gives {:.0f} values; an axis holds at most {}", n, kMaxValues));
    } else {
      // Made on demand (AxisDef::value), not stored: a million values took 400 MB before any check.
      a.steps = AxisDef::Steps::linear;
      a.from = from;
      a.step = step;
      a.count = static_cast<std::size_t>(n);
      a.integer = has_integer ? integer : whole(from) && whole(step);
    }
  } else if (ok && !has_step) {
    if (!sampled)
      r.error(g.location(), g.path(), "a range without `step` is continuous: give a `step`, or `sample` the sweep");
    a.continuous = true;
    a.from = from;
    a.to = to;
    a.log = scale == "log";
    a.integer = has_integer && integer;
    if (a.log && from <= 0) r.error(g.location_of("from"), g.key_path("from"), "a log scale needs from above 0");
  }
  g.finish();
}

// geometric: {from, to, factor}: from, from*factor, ... up to `to`.
void read_geometric(MapView& g, Reader& r, AxisDef& a) {
  double from = 0, to = 0, factor = 0;
  bool ok = g.require("from");  // every check runs, as for range
  ok = g.require("to") && ok;
  ok = g.require("factor") && ok;
  ok = g.get("from", from, 1e-300) && ok;
  ok = g.get("to", to) && ok;
  ok = g.get("factor", factor, 1.0 + 1e-9) && ok;
  if (ok) {
    if (to < from) {
      r.error(g.location_of("to"), g.key_path("to"), fmt::format("must not be below from ({})", from));
    } else {
      a.steps = AxisDef::Steps::geometric;
      a.from = from;
      a.step = factor;
      a.integer = whole(from) && whole(factor);
      while (a.count < kMaxValues && from * std::pow(factor, static_cast<double>(a.count)) <= to * (1 + 1e-9))
        ++a.count;
    }
  }
  g.finish();
}

}  // namespace

AxisValue AxisDef::value(std::size_t i) const {
  const double k = static_cast<double>(i);
  switch (steps) {
    case Steps::linear: return number_value(from + k * step, integer, unit);
    case Steps::geometric: {
      const double v = from * std::pow(step, k);
      return number_value(integer ? std::round(v) : v, integer, unit);
    }
    case Steps::none: break;
  }
  return values[i];
}

AxisValue number_value(double v, bool integer, const std::string& unit) {
  AxisValue a;
  const std::string text = number_text(v, integer);
  a.tree = Tree::scalar(unit.empty() ? text : text + " " + unit);
  a.column = integer ? io::Value(static_cast<std::int64_t>(std::llround(v))) : io::Value(v);
  return a;
}

AxisDef read_axis(MapView& m, Reader& r, const std::string& file, bool sampled) {
  AxisDef a;
  read_key(m, r, a);
  const int kinds = m.has("values") + m.has("range") + m.has("geometric");
  if (kinds != 1) {
    r.error(m.location(), m.path(),
            kinds == 0 ? "give the axis `values`, `range` or `geometric`"
                       : "give only one of `values`, `range` and `geometric`");
  }
  read_values(m, r, file, a);
  if (MapView g = m.map("range"); g.valid()) read_range(g, r, sampled, a);
  if (MapView g = m.map("geometric"); g.valid()) read_geometric(g, r, a);
  return a;
}

void Expansion::read_axes(MapView& root, Reader& r, const std::string& file) {
  root.require("axes", "the keys to vary and their values");
  const auto items = root.seq("axes");
  if (items.empty() && root.has("axes")) r.error(root.location_of("axes"), "axes", "expected a non-empty list of axes");
  for (std::size_t i = 0; i < items.size(); ++i) {
    MapView m(r, items[i], fmt::format("axes[{}]", i));
    if (!m.valid()) continue;
    Dim dim;
    if (m.has("zip")) {
      const auto group = m.seq("zip");
      if (group.size() < 2) r.error(m.location_of("zip"), m.key_path("zip"), "a zip group pairs two or more axes");
      for (std::size_t j = 0; j < group.size(); ++j) {
        MapView g(r, group[j], fmt::format("axes[{}].zip[{}]", i, j));
        if (!g.valid()) continue;
        AxisDef a = read_axis(g, r, file, sampled);
        g.finish();
        if (a.continuous) {
          r.error(g.location(), g.path(), "a zip group pairs lists of values; give this range a `step`");
          continue;
        }
        if (!dim.axes.empty() && a.size() != dim.length)
          r.error(g.location(), g.path(),
                  fmt::format("has {} values and the group's first axis {}; zipped axes pair value by value", a.size(),
                              dim.length));
        dim.length = a.size();
        dim.axes.push_back(axes.size());
        axes.push_back(std::move(a));
      }
    } else {
      AxisDef a = read_axis(m, r, file, sampled);
      dim.length = a.continuous ? 0 : a.size();
      dim.axes.push_back(axes.size());
      axes.push_back(std::move(a));
    }
    m.finish();
    dims.push_back(std::move(dim));
  }
}

}  // namespace ftplan::sweep::detail
