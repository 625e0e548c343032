#include "sweep/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <exception>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "evaluate/pool.hpp"
#include "io/results.hpp"
#include "io/verdict.hpp"
#include "io/scenario_io.hpp"
#include "io/yaml_reader.hpp"

namespace ftplan::sweep {

using io::detail::MapView;
using io::detail::Reader;

namespace {

// ---------------------------------------------------------------------------------------------
// A YAML document as plain data. The base scenario and the axis values are held this way so
// that threads can copy and edit them freely (yaml-cpp nodes share state behind the scenes),
// and so a point's scenario is emitted without yaml-cpp's emitter.

// A mapping's entry. Its own type, not std::pair<std::string, Tree>: a pair needs a complete
// Tree, which a member of Tree cannot have (GCC lets it pass, Clang's libstdc++ checks refuse it).
struct TreeEntry;

struct Tree {
  enum class Kind { null, scalar, seq, map };
  Kind kind = Kind::null;
  std::string text;                // scalar
  bool plain = true;               // scalar written without quotes in its file
  std::vector<Tree> items;         // seq
  std::vector<TreeEntry> entries;  // map, in file order
  SourceLocation where;

  static Tree scalar(std::string text, bool plain = true);
  Tree* find(const std::string& key);
  const Tree* find(const std::string& key) const { return const_cast<Tree*>(this)->find(key); }
};

struct TreeEntry {
  std::string first;
  Tree second;
  TreeEntry(std::string key, Tree value) : first(std::move(key)), second(std::move(value)) {}
};

Tree Tree::scalar(std::string text, bool plain) {
  Tree t;
  t.kind = Kind::scalar;
  t.text = std::move(text);
  t.plain = plain;
  return t;
}

Tree* Tree::find(const std::string& key) {
  for (auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

Tree to_tree(const YAML::Node& n, const std::string& file) {
  Tree t;
  if (const auto mark = n.Mark(); !mark.is_null())
    t.where = {file, mark.line + 1, mark.column + 1};
  else
    t.where = {file, 0, 0};
  if (!n.IsDefined() || n.IsNull()) return t;
  if (n.IsScalar()) {
    t.kind = Tree::Kind::scalar;
    t.text = n.Scalar();
    t.plain = n.Tag() != "!";  // yaml-cpp tags quoted scalars "!"
  } else if (n.IsSequence()) {
    t.kind = Tree::Kind::seq;
    for (const auto& item : n) t.items.push_back(to_tree(item, file));
  } else if (n.IsMap()) {
    t.kind = Tree::Kind::map;
    for (const auto& kv : n) t.entries.emplace_back(kv.first.Scalar(), to_tree(kv.second, file));
  }
  return t;
}

// Flow YAML (JSON-shaped) of a tree. For the scenario reader (`as_written` false) every scalar and
// key is quoted, so none is reinterpreted; for an axis column (`as_written` true) scalars appear
// as the person wrote them: {gpu: h100-sxm-80gb, gpus: 8}.
void emit(const Tree& t, std::string& out, bool as_written = false) {
  switch (t.kind) {
    case Tree::Kind::null:
      out += "null";
      return;
    case Tree::Kind::scalar:
      if (as_written && t.plain)
        out += t.text;
      else
        append_yaml_quoted(out, t.text);
      return;
    case Tree::Kind::seq:
      out += '[';
      for (std::size_t i = 0; i < t.items.size(); ++i) {
        if (i) out += ", ";
        emit(t.items[i], out, as_written);
      }
      out += ']';
      return;
    case Tree::Kind::map:
      out += '{';
      for (std::size_t i = 0; i < t.entries.size(); ++i) {
        if (i) out += ", ";
        if (as_written)
          out += t.entries[i].first;
        else
          append_yaml_quoted(out, t.entries[i].first);
        out += ": ";
        emit(t.entries[i].second, out, as_written);
      }
      out += '}';
      return;
  }
}

void show(const Tree& t, std::string& out) { emit(t, out, true); }

// ---------------------------------------------------------------------------------------------
// Dotted keys: "job.seq_len", "plans.*.cluster.gpus", "plans.0.parallel.zero",
// "plans[8x H100 LoRA].job.micro_batch". At a list, a segment is `*` (every item), an index,
// or the `name` of an item.

struct Segment {
  std::string text;
};

std::vector<Segment> parse_path(std::string_view key, std::string& error) {
  std::vector<Segment> out;
  std::size_t i = 0;
  bool expect_segment = true;
  while (i < key.size()) {
    if (key[i] == '[') {
      const auto close = key.find(']', i);
      if (close == std::string_view::npos) {
        error = "a '[' without its ']'";
        return {};
      }
      out.push_back({std::string(trim(key.substr(i + 1, close - i - 1)))});
      if (out.back().text.empty()) {
        error = "an empty [ ]";
        return {};
      }
      i = close + 1;
      expect_segment = false;
      continue;
    }
    if (key[i] == '.') {
      if (expect_segment) {
        error = "an empty part between dots";
        return {};
      }
      expect_segment = true;
      ++i;
      continue;
    }
    const auto end = key.find_first_of(".[", i);
    const auto len = (end == std::string_view::npos ? key.size() : end) - i;
    out.push_back({std::string(key.substr(i, len))});
    i += len;
    expect_segment = false;
  }
  if (out.empty() || expect_segment) error = "an empty part between dots";
  return out;
}

std::string item_name(const Tree& item, std::size_t index) {
  if (item.kind == Tree::Kind::map)
    if (const Tree* n = item.find("name"); n && n->kind == Tree::Kind::scalar) return n->text;
  return fmt::format("plan {}", index);
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() < 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Sets `value` at `path` below `node`; creates missing mapping keys. Returns "" or what is wrong.
std::string apply(Tree& node, const std::vector<Segment>& path, std::size_t at, const Tree& value,
                  const std::string& done) {
  if (at == path.size()) {
    const SourceLocation where = node.where;
    node = value;
    node.where = where;
    return {};
  }
  const std::string& seg = path[at].text;
  const std::string here = done.empty() ? seg : done + "." + seg;
  if (node.kind == Tree::Kind::null) node.kind = Tree::Kind::map;
  if (node.kind == Tree::Kind::map) {
    Tree* child = node.find(seg);
    if (!child) {
      node.entries.emplace_back(seg, Tree{});
      child = &node.entries.back().second;
    }
    return apply(*child, path, at + 1, value, here);
  }
  if (node.kind == Tree::Kind::seq) {
    std::vector<Tree*> targets;
    if (seg == "*") {
      for (auto& item : node.items) targets.push_back(&item);
      if (targets.empty()) return fmt::format("{} is an empty list", done);
    } else if (is_index(seg)) {
      const auto index = static_cast<std::size_t>(std::stoul(seg));
      if (index >= node.items.size())
        return fmt::format("{} has {} items; there is no item {} (items count from 0)", done, node.items.size(), index);
      targets.push_back(&node.items[index]);
    } else {
      std::vector<std::string> names;
      for (std::size_t i = 0; i < node.items.size(); ++i) {
        names.push_back(item_name(node.items[i], i));
        if (names.back() == seg) targets.push_back(&node.items[i]);
      }
      if (targets.empty())
        return fmt::format("{} has no item named '{}'{}; names: {}", done, seg, did_you_mean(seg, names),
                           join(names, ", "));
    }
    for (Tree* t : targets)
      if (auto e = apply(*t, path, at + 1, value, here); !e.empty()) return e;
    return {};
  }
  std::string shown;
  show(node, shown);
  return fmt::format("{} is {}, not a mapping, so it has no '{}'; set {} itself", done, shown, seg, done);
}

// ---------------------------------------------------------------------------------------------
// Axes and how they combine.

struct AxisValue {
  Tree tree;         // what is set in the scenario
  io::Value column;  // what the output shows
};

struct AxisDef {
  Axis axis;
  std::vector<Segment> path;
  std::vector<AxisValue> values;  // discrete axes
  // Continuous range (only with `sample`): from..to, linear or log, real or rounded.
  bool continuous = false;
  double from = 0, to = 0;
  bool log = false;
  bool integer = false;
  std::string unit;
};

// One dimension of the expansion: a single axis, or a zip group of axes that move together.
struct Dim {
  std::vector<std::size_t> axes;
  std::size_t length = 0;  // values; 0 for a continuous range
};

std::string number_text(double v, bool integer) {
  if (integer) return std::to_string(static_cast<std::int64_t>(std::llround(v)));
  return fmt::format("{}", v);
}

AxisValue number_value(double v, bool integer, const std::string& unit) {
  AxisValue a;
  const std::string text = number_text(v, integer);
  a.tree = Tree::scalar(unit.empty() ? text : text + " " + unit);
  a.column = integer ? io::Value(static_cast<std::int64_t>(std::llround(v))) : io::Value(v);
  return a;
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

constexpr std::int64_t kMaxPoints = 10'000'000;
constexpr std::size_t kMaxValues = 1'000'000;

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

std::uint64_t fnv1a(std::uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Sweep::Impl {
  std::string name;
  std::string scenario_name;  // base file, or the sweep file for an inline scenario
  std::filesystem::path base_dir;
  const model::Zoo* zoo = nullptr;
  const hardware::Catalog* catalog = nullptr;
  Tree base;
  std::vector<AxisDef> axes;
  std::vector<Axis> public_axes;
  std::vector<Dim> dims;
  bool sampled = false;
  std::int64_t points = 0;
  std::vector<double> samples;  // points x dims, each in [0, 1)
  bool steady_state = true;  // the tested shortcut (0.5% bound; 0.11% worst on the bench grid)
  std::uint64_t fingerprint = 0;

  AxisValue value_of(std::size_t axis, std::size_t index) const { return axes[axis].values[index]; }

  // Each axis's value at `point`.
  std::vector<AxisValue> point_values(std::int64_t point) const {
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
            out[a] = value_of(a, std::min(n - 1, static_cast<std::size_t>(u * static_cast<double>(n))));
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
      for (std::size_t a : dims[d].axes) out[a] = value_of(a, index);
    }
    return out;
  }

  // The base with `values` applied; problems (a path that no longer fits) are appended.
  Tree scenario_of(const std::vector<AxisValue>& values, std::vector<std::string>& problems) const {
    Tree t = base;
    for (std::size_t a = 0; a < axes.size(); ++a)
      if (auto e = apply(t, axes[a].path, 0, values[a].tree, ""); !e.empty())
        problems.push_back(axes[a].axis.key + ": " + e);
    return t;
  }

  plan::Scenario read(const Tree& t) const {
    std::string text;
    emit(t, text);
    return io::parse_scenario(text, scenario_name, base_dir, *zoo, *catalog);
  }
};

namespace {

// Reads one axis mapping (not a zip group).
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

AxisDef read_axis(MapView& m, Reader& r, const std::string& file, bool sampled) {
  AxisDef a;
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
  const int kinds = m.has("values") + m.has("range") + m.has("geometric");
  if (kinds != 1) {
    r.error(m.location(), m.path(),
            kinds == 0 ? "give the axis `values`, `range` or `geometric`"
                       : "give only one of `values`, `range` and `geometric`");
  }
  const auto with_unit = [&](AxisValue v) {
    if (!a.unit.empty() && v.tree.kind == Tree::Kind::scalar) v.tree.text += " " + a.unit;
    return v;
  };
  {
    const auto items = m.seq("values");
    if (items.empty() && m.has("values"))
      r.error(m.location_of("values"), m.key_path("values"), "expected a non-empty list");
    for (const auto& item : items) {
      AxisValue v;
      v.tree = to_tree(item, file);
      v.column = column_of(v.tree);
      a.values.push_back(with_unit(std::move(v)));
    }
  }
  const auto whole = [](double x) { return x == std::floor(x) && std::abs(x) < 9e15; };
  if (MapView g = m.map("range"); g.valid()) {
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
    if (ok && to < from)
      r.error(g.location_of("to"), g.key_path("to"), fmt::format("must not be below from ({})", from));
    if (has_step && step <= 0) r.error(g.location_of("step"), g.key_path("step"), "must be above 0");
    if (ok && to >= from && has_step && step > 0) {
      if (scale == "log")
        r.error(g.location_of("scale"), g.key_path("scale"), "a log scale is for ranges without `step` (sampled)");
      const double n = std::floor((to - from) / step * (1 + 1e-12) + 1e-9) + 1;
      if (n > static_cast<double>(kMaxValues)) {
        r.error(g.location_of("step"), g.key_path("step"),
                fmt::format("gives {:.0f} values; an axis holds at most {}", n, kMaxValues));
      } else {
        const bool ints = has_integer ? integer : whole(from) && whole(step);
        for (std::int64_t k = 0; k < static_cast<std::int64_t>(n); ++k)
          a.values.push_back(number_value(from + static_cast<double>(k) * step, ints, a.unit));
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
  if (MapView g = m.map("geometric"); g.valid()) {
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
        const bool ints = whole(from) && whole(factor);
        for (std::int64_t k = 0;; ++k) {
          const double v = from * std::pow(factor, static_cast<double>(k));
          if (v > to * (1 + 1e-9) || a.values.size() >= kMaxValues) break;
          a.values.push_back(number_value(ints ? std::round(v) : v, ints, a.unit));
        }
      }
    }
    g.finish();
  }
  return a;
}

}  // namespace

Shard parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  Shard s;
  const auto number = [](std::string_view t, int& out) {
    auto r = std::from_chars(t.data(), t.data() + t.size(), out);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), s.index) ||
      !number(text.substr(slash + 1), s.count) || s.count < 1 || s.index < 1 || s.index > s.count)
    throw std::invalid_argument(fmt::format("--shard takes K/N with 1 <= K <= N (e.g. 3/8); got '{}'", text));
  return s;
}

Sweep Sweep::load(const std::filesystem::path& file, const model::Zoo& zoo, const hardware::Catalog& catalog) {
  const std::string text = io::detail::read_input_file(file);
  return parse(text, file.string(), file.parent_path(), zoo, catalog);
}

Sweep Sweep::parse(std::string_view text, const std::string& name, const std::filesystem::path& base_dir,
                   const model::Zoo& zoo, const hardware::Catalog& catalog) {
  const YAML::Node root_node = io::detail::load_yaml_text(text, name);
  Reader r(name);
  auto impl = std::make_shared<Impl>();
  impl->zoo = &zoo;
  impl->catalog = &catalog;
  impl->fingerprint = fnv1a(14695981039346656037ull, text);
  MapView root = r.root(root_node);
  if (!root.valid()) r.throw_if_any();

  int version = 0;
  root.require("schema_version", fmt::format("the sweep-format version; this ftplan reads {}", kSweepSchemaVersion));
  if (root.get("schema_version", version, 0) && version != kSweepSchemaVersion)
    r.error(root.location_of("schema_version"), "schema_version",
            version > kSweepSchemaVersion
                ? fmt::format("{} is newer than this ftplan reads ({}); update ftplan", version, kSweepSchemaVersion)
                : fmt::format("{} is not a version this ftplan reads; it reads {}", version, kSweepSchemaVersion));
  impl->name = std::filesystem::path(name).stem().string();
  root.get("name", impl->name);
  std::string description;
  root.get("description", description);
  root.get("steady_state", impl->steady_state);

  // The base scenario: a file beside the sweep, or inline.
  bool base_ok = false;
  if (root.has("base") == root.has("scenario")) {
    r.error(root.location(), "base", "give the base scenario as `base: FILE` or inline as `scenario:`, one of them");
  } else if (std::string base; root.get("base", base)) {
    const std::filesystem::path path = base_dir / base;
    try {
      io::load_scenario(path, zoo, catalog);  // every problem of the base, at its own file:line:column
      impl->base = to_tree(io::detail::load_yaml_file(path), path.string());
      impl->fingerprint = fnv1a(impl->fingerprint, io::detail::read_input_file(path));
      impl->scenario_name = path.string();
      impl->base_dir = path.parent_path();
      base_ok = true;
    } catch (const InputError& e) {
      r.diagnostics().append(e.diagnostics());
      r.error(root.location_of("base"), "base", "the base scenario does not load (above)");
    }
  } else if (root.has("scenario")) {
    const YAML::Node node = root.take("scenario");
    impl->base = to_tree(node, name);
    impl->scenario_name = name;
    impl->base_dir = base_dir;
    if (impl->base.kind != Tree::Kind::map) {
      r.error(node, "scenario", "expected the scenario as a mapping (the keys of docs/scenario-format.md)");
    } else {
      try {
        impl->read(impl->base);
        base_ok = true;
      } catch (const InputError& e) {
        // Positions in emitted text mean nothing: point at the nearest node of the sweep file.
        for (const auto& d : e.diagnostics()) {
          const Tree* at = &impl->base;
          std::string error;
          for (const auto& seg : parse_path(d.key, error)) {
            const Tree* next = nullptr;
            if (at->kind == Tree::Kind::map)
              next = at->find(seg.text);
            else if (at->kind == Tree::Kind::seq && is_index(seg.text) && std::stoul(seg.text) < at->items.size())
              next = &at->items[std::stoul(seg.text)];
            if (!next) break;
            at = next;
          }
          r.error(at->where, d.key.empty() ? "scenario" : "scenario." + d.key, d.message);
        }
      }
    }
  }
  if (base_ok) {
    const Tree* plans = impl->base.find("plans");
    if (!plans || plans->kind != Tree::Kind::seq || plans->items.empty())
      r.error(root.location_of(root.has("base") ? "base" : "scenario"), root.has("base") ? "base" : "scenario",
              "the base scenario has no plans; a sweep evaluates each point's plans");
  }

  // Sampling, read first: a continuous range needs it.
  std::string method;
  std::int64_t count = 0, seed = 1;
  if (MapView sm = root.map("sample"); sm.valid()) {
    impl->sampled = true;
    sm.require("method", "random or lhs (Latin hypercube)");
    sm.require("count", "how many points to draw");
    if (sm.get("method", method) && method != "random" && method != "lhs")
      r.error(sm.location_of("method"), sm.key_path("method"),
              fmt::format("'{}' is not one of random, lhs{}", method, did_you_mean(method, {"random", "lhs"})));
    sm.get("count", count, 1, kMaxPoints);
    sm.get("seed", seed, 0);
    sm.finish();
  }

  std::string mode = "grid";
  if (root.get("mode", mode) && mode != "grid" && mode != "zip")
    r.error(root.location_of("mode"), "mode",
            fmt::format("'{}' is not one of grid, zip{}", mode, did_you_mean(mode, {"grid", "zip"})));

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
        AxisDef a = read_axis(g, r, name, impl->sampled);
        g.finish();
        if (a.continuous) {
          r.error(g.location(), g.path(), "a zip group pairs lists of values; give this range a `step`");
          continue;
        }
        if (!dim.axes.empty() && a.values.size() != dim.length)
          r.error(g.location(), g.path(),
                  fmt::format("has {} values and the group's first axis {}; zipped axes pair value by value",
                              a.values.size(), dim.length));
        dim.length = a.values.size();
        dim.axes.push_back(impl->axes.size());
        impl->axes.push_back(std::move(a));
      }
    } else {
      AxisDef a = read_axis(m, r, name, impl->sampled);
      dim.length = a.continuous ? 0 : a.values.size();
      dim.axes.push_back(impl->axes.size());
      impl->axes.push_back(std::move(a));
    }
    m.finish();
    impl->dims.push_back(std::move(dim));
  }
  root.finish();

  // Two axes setting the same key, or showing in the same column, are a mistake.
  for (std::size_t a = 0; a < impl->axes.size(); ++a)
    for (std::size_t b = 0; b < a; ++b) {
      if (impl->axes[a].axis.key.empty()) continue;
      if (impl->axes[a].axis.key == impl->axes[b].axis.key || impl->axes[a].axis.column == impl->axes[b].axis.column)
        r.error(impl->axes[a].axis.where, impl->axes[a].axis.key,
                fmt::format("another axis ({}:{}) already sets this key or column", impl->axes[b].axis.where.line,
                            impl->axes[b].axis.where.column));
    }

  if (mode == "zip" && impl->dims.size() > 1) {
    Dim all;
    all.length = impl->dims.front().length;
    for (const auto& d : impl->dims) {
      if (d.length != all.length) {
        r.error(root.location_of("mode"), "mode",
                fmt::format("zip pairs axes value by value, but they have {} and {} values", all.length, d.length));
        break;
      }
      all.axes.insert(all.axes.end(), d.axes.begin(), d.axes.end());
    }
    impl->dims = {all};
  }

  // Each axis's paths must fit the base, and its keys must be keys the scenario has: one
  // value at a time on the base, read by the scenario reader, must not meet an unknown key.
  if (base_ok) {
    for (auto& ax : impl->axes) {
      if (ax.path.empty()) continue;  // its key is missing or malformed (reported)
      std::vector<AxisValue> probes = ax.values;
      if (ax.continuous) probes = {number_value(ax.from, ax.integer, ax.unit)};
      if (probes.empty()) probes = {AxisValue{Tree::scalar("1"), std::int64_t{1}}};  // its values are wrong (reported)
      if (probes.size() > 16) probes.resize(16);  // a long list of numbers is checked by its first values
      for (const auto& v : probes) {
        Tree t = impl->base;
        if (auto e = apply(t, ax.path, 0, v.tree, ""); !e.empty()) {
          r.error(ax.axis.where, ax.axis.key, e);
          break;
        }
        try {
          impl->read(t);
        } catch (const InputError& e) {
          bool unknown = false;
          for (const auto& d : e.diagnostics())
            if (d.message.rfind("unknown key", 0) == 0 || d.message.rfind("keys must be", 0) == 0) {
              r.error(ax.axis.where, ax.axis.key,
                      fmt::format("not a key of the scenario{}{}", d.key == ax.axis.key ? "" : " (" + d.key + ")",
                                  d.message.rfind("unknown key", 0) == 0 ? d.message.substr(11) : ": " + d.message));
              unknown = true;
            }
          if (unknown) break;
        }
      }
    }
  }
  r.throw_if_any();

  // Points.
  if (impl->sampled) {
    impl->points = count;
    const std::size_t n = static_cast<std::size_t>(count), nd = impl->dims.size();
    impl->samples.assign(n * nd, 0.0);
    std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
    if (method == "random") {
      for (std::size_t p = 0; p < n; ++p)
        for (std::size_t d = 0; d < nd; ++d) impl->samples[p * nd + d] = unit_uniform(rng);
    } else {
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
          impl->samples[p * nd + d] = (static_cast<double>(perm[p]) + unit_uniform(rng)) / static_cast<double>(n);
      }
    }
  } else {
    double total = 1;
    for (const auto& d : impl->dims) total *= static_cast<double>(d.length);
    if (total > static_cast<double>(kMaxPoints))
      throw InputError(
          root.location_of("axes"), "axes",
          fmt::format("the grid has {} points; a sweep holds at most {} (sample it, or split it)",
                      // exact up to 2^53; past that the size is what matters
                      total < 0x1p53 ? fmt::format("{:.0f}", total) : fmt::format("{:.3g}", total), kMaxPoints));
    impl->points = static_cast<std::int64_t>(total);
  }
  for (const auto& a : impl->axes) impl->public_axes.push_back(a.axis);
  return Sweep(std::move(impl));
}

const std::string& Sweep::name() const { return impl_->name; }
const std::vector<Axis>& Sweep::axes() const { return impl_->public_axes; }
std::int64_t Sweep::size() const { return impl_->points; }
std::uint64_t Sweep::fingerprint() const { return impl_->fingerprint; }

std::vector<io::Value> Sweep::values(std::int64_t point) const {
  std::vector<io::Value> out;
  for (auto& v : impl_->point_values(point)) out.push_back(std::move(v.column));
  return out;
}

std::string Sweep::scenario_yaml(std::int64_t point) const {
  std::vector<std::string> problems;
  const Tree t = impl_->scenario_of(impl_->point_values(point), problems);
  std::string text;
  emit(t, text);
  return text;
}

std::vector<io::Row> Sweep::evaluate(std::int64_t point) const {
  const Impl& im = *impl_;
  const std::vector<AxisValue> values = im.point_values(point);
  io::Row prefix;
  prefix.fields.emplace_back("point", point);
  for (std::size_t a = 0; a < im.axes.size(); ++a) prefix.fields.emplace_back(im.axes[a].axis.column, values[a].column);

  std::vector<std::string> problems;
  const Tree t = im.scenario_of(values, problems);
  plan::Scenario s;
  if (problems.empty()) {
    try {
      s = im.read(t);
    } catch (const InputError& e) {
      for (const auto& d : e.diagnostics()) problems.push_back(d.key.empty() ? d.message : d.key + ": " + d.message);
    }
  }
  std::vector<io::Row> rows;
  if (!problems.empty()) {
    // Not a valid scenario: one row per plan the point names, each with the reader's reasons.
    std::vector<std::string> names;
    if (const Tree* plans = t.find("plans"); plans && plans->kind == Tree::Kind::seq)
      for (std::size_t i = 0; i < plans->items.size(); ++i) names.push_back(item_name(plans->items[i], i));
    if (names.empty()) names.push_back("");
    for (const auto& n : names) {
      io::Row row = prefix;
      row.fields.emplace_back("plan", n);
      row.fields.emplace_back("feasible", false);
      row.fields.emplace_back("infeasible_reason", "invalid scenario: " + join(problems, "; "));
      row.fields.emplace_back("meets_constraints", false);
      row.fields.emplace_back("cheapest_plan", nullptr);
      rows.push_back(std::move(row));
    }
    return rows;
  }
  sim::Options options;  // the steady-state shortcut, as every verb uses it (sim::Options)
  if (!im.steady_state) options.max_micro_batches = 0;  // every micro-batch simulated
  const plan::Constraints& k = s.constraints;
  std::string cheapest;
  double cheapest_usd = 0;
  for (const auto& p : s.plans) {
    io::Row row = prefix;
    bool meets = false;
    try {
      const evaluate::Evaluation e = evaluate::evaluate_plan(s.model, p, options);
      io::Row r = io::cost_row(p, e.memory, e.step, e.power, e.cost);
      row.fields.insert(row.fields.end(), std::make_move_iterator(r.fields.begin()),
                        std::make_move_iterator(r.fields.end()));
      // The scenario's `constraints`, as `ftplan plan` judges them.
      meets = evaluate::meets_constraints(k, p, e);
      if (meets && (cheapest.empty() || e.cost.cost_usd < cheapest_usd)) {
        cheapest = p.name;
        cheapest_usd = e.cost.cost_usd;
      }
    } catch (const std::exception& e) {
      row.fields.emplace_back("plan", p.name);
      row.fields.emplace_back("feasible", false);
      row.fields.emplace_back("infeasible_reason", std::string("could not be evaluated: ") + e.what());
    }
    row.fields.emplace_back("meets_constraints", meets);
    rows.push_back(std::move(row));
  }
  // Within the point only (nothing is compared across points): which plan wins on dollars.
  for (auto& row : rows)
    row.fields.emplace_back("cheapest_plan", cheapest.empty() ? io::Value(nullptr) : io::Value(cheapest));
  return rows;
}

void run(const Sweep& sweep, const std::vector<std::int64_t>& points, int threads,
         const std::function<void(std::int64_t, std::vector<io::Row>&)>& done) {
  // Sweep::evaluate turns a plan's exception into its row; what reaches here is `done` failing
  // (the output cannot be written): stop after the running points and rethrow.
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::exception_ptr failure;
  evaluate::for_each(
      points.size(), threads,
      [&](std::size_t i) {
        std::vector<io::Row> rows = sweep.evaluate(points[i]);
        const std::lock_guard lock(mutex);
        if (!stop) done(points[i], rows);
      },
      [&](std::size_t, std::exception_ptr e) {
        const std::lock_guard lock(mutex);
        if (!failure) failure = std::move(e);
        stop = true;
      },
      &stop);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ftplan::sweep
