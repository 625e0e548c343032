#include "sweep_grid.hpp"
#include "mutants.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <string_view>

#include <fmt/format.h>

#include "common/units.hpp"

namespace ftplan::gui {

namespace {

std::string text_of(const io::Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;  // unquoted
  return io::csv_cell(v);
}

// A number as a reader takes it in at a glance: 4 significant digits, and from 10,000 up a whole
// number with thousands separators rather than an exponent ("299,300", not "2.993e+05").
std::string readable(double v) {
  const double a = std::abs(v);
  if (mutant("heatmap_raw_numbers")) return fmt::format("{}", v);
  if (!(a >= 1e4 && a < 1e15)) return fmt::format("{:.4g}", v);
  const double step = std::pow(10.0, std::floor(std::log10(a)) - 3);
  const std::string digits = fmt::format("{:.0f}", std::round(a / step) * step);
  std::string out = v < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// A figure in the unit its output's name gives (docs/sweep-format.md's suffixes): "_s" seconds as a
// duration ("3.5 d", not 299,300), "_bytes" in GiB/TiB, "_usd" in dollars, "_fraction" (and MFU,
// HFU) in percent, "_w", "_kwh", "_hours", "_years", rates ("_per_s") per second; the rest as
// readable numbers.
std::string with_unit(const std::string& field, double v) {
  const auto ends = [&](std::string_view suffix) {
    return field.size() >= suffix.size() && field.compare(field.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (mutant("heatmap_raw_numbers")) return fmt::format("{}", v);
  if (field.find("_per_s") != std::string::npos) return readable(v) + "/s";
  if (ends("_bytes")) return ftplan::format_bytes(v);
  if (ends("_s")) return ftplan::format_duration(v);
  if (ends("_usd") || field.rfind("usd_", 0) == 0)
    return (v < 0 ? "-$" : "$") + (std::abs(v) < 100 ? fmt::format("{:.2f}", std::abs(v)) : readable(std::abs(v)));
  if (ends("_fraction") || field == "mfu" || field == "hfu") return fmt::format("{:.1f}%", 100 * v);
  if (ends("_kwh")) return readable(v) + " kWh";
  if (ends("_w")) return readable(v) + " W";
  if (ends("_hours")) return readable(v) + " h";
  if (ends("_years")) return readable(v) + " y";
  return readable(v);
}

double number_of(const io::Value& v) {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

SweepGrid sweep_grid(const std::vector<io::Row>& rows, const std::vector<std::string>& axes, const std::string& x_axis,
                     const std::string& y_axis, const std::string& field, const std::string& plan,
                     const std::map<std::string, std::string>& hold) {
  SweepGrid g;
  // Each other axis at the value `hold` names, else at its first (the first row's: points come
  // in order).
  std::map<std::string, std::string> held;
  std::vector<io::Row> ordered = rows;
  const auto point = [](const io::Row& r) {
    const io::Value* p = r.get("point");
    return p ? number_of(*p) : 0.0;
  };
  std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) { return point(a) < point(b); });
  // An axis zipped with x or y (its value follows theirs) is not held: it moves with them.
  const auto follows = [&](const std::string& a) {
    std::map<std::pair<std::string, std::string>, std::string> seen;
    for (const auto& r : ordered) {
      const io::Value *xv = r.get(x_axis), *yv = r.get(y_axis), *av = r.get(a);
      if (!xv || !yv || !av) continue;
      const auto [at, fresh] = seen.emplace(std::pair{text_of(*xv), text_of(*yv)}, text_of(*av));
      if (!fresh && at->second != text_of(*av)) return false;
    }
    return true;
  };
  for (const auto& a : axes) {
    if (a == x_axis || a == y_axis || follows(a)) continue;
    std::vector<std::string> values;
    for (const auto& r : ordered)
      if (const io::Value* v = r.get(a); v && std::find(values.begin(), values.end(), text_of(*v)) == values.end())
        values.push_back(text_of(*v));
    if (values.empty()) continue;
    const auto chosen = hold.find(a);
    const bool takes = chosen != hold.end() && std::find(values.begin(), values.end(), chosen->second) != values.end();
    held[a] = takes ? chosen->second : values.front();
    g.held.emplace_back(a, held[a]);
    g.held_values.push_back(std::move(values));
  }
  const auto add = [](std::vector<std::string>& to, const std::string& v) {
    if (std::find(to.begin(), to.end(), v) == to.end()) to.push_back(v);
  };
  for (const auto& r : ordered) {
    const io::Value* xv = r.get(x_axis);
    const io::Value* yv = r.get(y_axis);
    if (xv && yv) {
      add(g.x, text_of(*xv));
      add(g.y, text_of(*yv));
    }
  }
  g.text.assign(g.x.size() * g.y.size(), "");
  g.number.assign(g.x.size() * g.y.size(), std::numeric_limits<double>::quiet_NaN());
  std::vector<bool> filled(g.text.size(), false);
  for (const auto& r : ordered) {
    const io::Value* xv = r.get(x_axis);
    const io::Value* yv = r.get(y_axis);
    if (!xv || !yv) continue;
    bool other = false;
    for (const auto& [a, v] : held)
      if (const io::Value* rv = r.get(a); rv && text_of(*rv) != v) other = true;
    if (other) continue;
    if (!plan.empty()) {
      const io::Value* p = r.get("plan");
      if (!p || text_of(*p) != plan) continue;
    }
    const auto xi = static_cast<std::size_t>(std::find(g.x.begin(), g.x.end(), text_of(*xv)) - g.x.begin());
    const auto yi = static_cast<std::size_t>(std::find(g.y.begin(), g.y.end(), text_of(*yv)) - g.y.begin());
    const std::size_t at = yi * g.x.size() + xi;
    if (filled[at]) continue;  // the point's first plan when none is chosen
    filled[at] = true;
    if (const io::Value* v = r.get(field)) {
      // A number as a reader takes it in, in its unit (with_unit), not the CSV's round-trip
      // "265.35328668763015".
      const bool number = std::holds_alternative<double>(*v) || std::holds_alternative<std::int64_t>(*v);
      g.text[at] = std::holds_alternative<std::nullptr_t>(*v) ? std::string("none")
                   : number                                   ? with_unit(field, number_of(*v))
                                                              : text_of(*v);
      g.number[at] = number_of(*v);
    }
  }
  return g;
}

std::vector<std::string> grid_fields(const std::vector<io::Row>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    for (const auto& [k, v] : r.fields) {
      if (k == "point" || k.rfind("axis.", 0) == 0) continue;
      const bool shown = k == "cheapest_plan" || std::holds_alternative<double>(v) ||
                         std::holds_alternative<std::int64_t>(v) || std::holds_alternative<bool>(v);
      if (shown && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
    }
  return out;
}

}  // namespace ftplan::gui
