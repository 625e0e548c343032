#include "sweep/sweep.hpp"

#include <atomic>
#include <charconv>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "evaluate/evaluate.hpp"
#include "evaluate/pool.hpp"
#include "io/results.hpp"
#include "io/scenario_io.hpp"
#include "io/yaml_reader.hpp"
#include "sweep/axes.hpp"
#include "sweep/tree.hpp"

// The sweep file is read here (its header, the base scenario, sampling; the axes in axes.cpp, the
// YAML-as-data tree and dotted keys in tree.cpp), points expand in points.cpp, and a point is
// evaluated here; the journal and the output files are output.cpp's.

namespace ftplan::sweep {

using detail::AxisValue;
using detail::Tree;
using io::detail::MapView;
using io::detail::Reader;

namespace {

std::uint64_t fnv1a(std::uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// sample: {method, count, seed}.
struct Sampling {
  std::string method;
  std::int64_t count = 0, seed = 1;
};

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Sweep::Impl : detail::Expansion {
  std::string name;
  std::string scenario_name;  // base file, or the sweep file for an inline scenario
  std::filesystem::path base_dir;
  const model::Zoo* zoo = nullptr;
  const hardware::Catalog* catalog = nullptr;
  Tree base;
  std::vector<Axis> public_axes;
  bool steady_state = true;  // the tested shortcut (0.5% bound; 0.11% worst on the bench grid)
  std::uint64_t fingerprint = 0;

  // The base with `values` applied; problems (a path that no longer fits) are appended.
  Tree scenario_of(const std::vector<AxisValue>& values, std::vector<std::string>& problems) const {
    Tree t = base;
    for (std::size_t a = 0; a < axes.size(); ++a)
      if (auto e = detail::apply(t, axes[a].path, 0, values[a].tree, ""); !e.empty())
        problems.push_back(axes[a].axis.key + ": " + e);
    return t;
  }

  plan::Scenario read(const Tree& t) const {
    plan::Scenario s = io::parse_scenario(detail::to_node(t), scenario_name, base_dir, *zoo, *catalog);
    evaluate::choose_open_knobs(s);
    return s;
  }

  bool read_base(MapView& root, Reader& r, const std::string& file, const std::filesystem::path& dir);
  void read_inline_base(MapView& root, Reader& r, const std::string& file, const std::filesystem::path& dir,
                        bool& base_ok);
  Sampling read_sampling(MapView& root);
  void check_axes(MapView& root, Reader& r, const std::string& mode);
  void probe_axes(Reader& r) const;
  void count_points(MapView& root, const Sampling& sampling);
};

// The base scenario: a file beside the sweep, or inline. True if it loads and has plans.
bool Sweep::Impl::read_base(MapView& root, Reader& r, const std::string& file, const std::filesystem::path& dir) {
  bool base_ok = false;
  if (root.has("base") == root.has("scenario")) {
    r.error(root.location(), "base", "give the base scenario as `base: FILE` or inline as `scenario:`, one of them");
  } else if (std::string base_file; root.get("base", base_file)) {
    const std::filesystem::path path = dir / base_file;
    try {
      io::load_scenario(path, *zoo, *catalog);  // every problem of the base, at its own file:line:column
      base = detail::to_tree(io::detail::load_yaml_file(path), path.string());
      fingerprint = fnv1a(fingerprint, io::detail::read_input_file(path));
      scenario_name = path.string();
      base_dir = path.parent_path();
      base_ok = true;
    } catch (const InputError& e) {
      r.diagnostics().append(e.diagnostics());
      r.error(root.location_of("base"), "base", "the base scenario does not load (above)");
    }
  } else if (root.has("scenario")) {
    read_inline_base(root, r, file, dir, base_ok);
  }
  if (base_ok) {
    const Tree* plans = base.find("plans");
    if (!plans || plans->kind != Tree::Kind::seq || plans->items.empty())
      r.error(root.location_of(root.has("base") ? "base" : "scenario"), root.has("base") ? "base" : "scenario",
              "the base scenario has no plans; a sweep evaluates each point's plans");
  }
  return base_ok;
}

void Sweep::Impl::read_inline_base(MapView& root, Reader& r, const std::string& file, const std::filesystem::path& dir,
                                   bool& base_ok) {
  const YAML::Node node = root.take("scenario");
  base = detail::to_tree(node, file);
  scenario_name = file;
  base_dir = dir;
  if (base.kind != Tree::Kind::map) {
    r.error(node, "scenario", "expected the scenario as a mapping (the keys of docs/scenario-format.md)");
    return;
  }
  try {
    read(base);
    base_ok = true;
  } catch (const InputError& e) {
    // Positions in emitted text mean nothing: point at the nearest node of the sweep file.
    for (const auto& d : e.diagnostics())
      r.error(detail::nearest(base, d.key).where, d.key.empty() ? "scenario" : "scenario." + d.key, d.message);
  }
}

// Sampling, read before the axes: a continuous range needs it.
Sampling Sweep::Impl::read_sampling(MapView& root) {
  Reader& r = root.reader();
  Sampling s;
  if (MapView sm = root.map("sample"); sm.valid()) {
    sampled = true;
    sm.require("method", "random or lhs (Latin hypercube)");
    sm.require("count", "how many points to draw");
    if (sm.get("method", s.method) && s.method != "random" && s.method != "lhs")
      r.error(sm.location_of("method"), sm.key_path("method"),
              fmt::format("'{}' is not one of random, lhs{}", s.method, did_you_mean(s.method, {"random", "lhs"})));
    sm.get("count", s.count, 1, detail::kMaxPoints);
    sm.get("seed", s.seed, 0);
    sm.finish();
  }
  return s;
}

// Two axes setting the same key, or showing in the same column, are a mistake; `mode: zip` pairs
// every axis value by value, as one dimension.
void Sweep::Impl::check_axes(MapView& root, Reader& r, const std::string& mode) {
  // One error per axis that repeats an earlier one's key or column, naming the first (a file of
  // 2,000 axes on one key once printed every pair: 2 million lines, in quadratic time).
  std::map<std::string, std::size_t> first_key, first_column;
  for (std::size_t a = 0; a < axes.size(); ++a) {
    if (axes[a].axis.key.empty()) continue;
    const auto [k, new_key] = first_key.try_emplace(axes[a].axis.key, a);
    const auto [c, new_column] = first_column.try_emplace(axes[a].axis.column, a);
    if (!new_key || !new_column) {
      const auto& b = axes[new_key ? c->second : k->second].axis.where;
      r.error(axes[a].axis.where, axes[a].axis.key,
              fmt::format("another axis ({}:{}) already sets this key or column", b.line, b.column));
    }
  }
  if (mode == "zip" && dims.size() > 1) {
    detail::Dim all;
    all.length = dims.front().length;
    for (const auto& d : dims) {
      if (d.length != all.length) {
        r.error(root.location_of("mode"), "mode",
                fmt::format("zip pairs axes value by value, but they have {} and {} values", all.length, d.length));
        break;
      }
      all.axes.insert(all.axes.end(), d.axes.begin(), d.axes.end());
    }
    dims = {all};
  }
}

// Each axis's paths must fit the base, and its keys must be keys the scenario has: one
// value at a time on the base, read by the scenario reader, must not meet an unknown key.
void Sweep::Impl::probe_axes(Reader& r) const {
  for (const auto& ax : axes) {
    if (ax.path.empty()) continue;  // its key is missing or malformed (reported)
    // A long list of numbers is checked by its first values.
    std::vector<AxisValue> probes;
    for (std::size_t i = 0; i < std::min<std::size_t>(ax.size(), 16); ++i) probes.push_back(ax.value(i));
    if (ax.continuous) probes = {detail::number_value(ax.from, ax.integer, ax.unit)};
    if (probes.empty()) probes = {AxisValue{Tree::scalar("1"), std::int64_t{1}}};  // its values are wrong (reported)
    for (const auto& v : probes) {
      Tree t = base;
      if (auto e = detail::apply(t, ax.path, 0, v.tree, ""); !e.empty()) {
        r.error(ax.axis.where, ax.axis.key, e);
        break;
      }
      try {
        read(t);
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

// The points: the samples drawn, or the grid's size.
void Sweep::Impl::count_points(MapView& root, const Sampling& sampling) {
  if (sampled) {
    draw(sampling.method, sampling.count, sampling.seed);
    return;
  }
  double total = 1;
  for (const auto& d : dims) total *= static_cast<double>(d.length);
  if (total > static_cast<double>(detail::kMaxPoints))
    throw InputError(
        root.location_of("axes"), "axes",
        fmt::format("the grid has {} points; a sweep holds at most {} (sample it, or split it)",
                    // exact up to 2^53; past that the size is what matters
                    total < 0x1p53 ? fmt::format("{:.0f}", total) : fmt::format("{:.3g}", total), detail::kMaxPoints));
  points = static_cast<std::int64_t>(total);
}

Shard parse_shard(std::string_view text) {
  const auto slash = text.find('/');
  Shard s;
  const auto number = [](std::string_view t, int& out) {
    auto r = std::from_chars(t.data(), t.data() + t.size(), out);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
  };
  if (slash == std::string_view::npos || !number(text.substr(0, slash), s.index) ||
      !number(text.substr(slash + 1), s.count) || s.count < 1 || s.index < 1 || s.index > s.count)
    throw UsageError(fmt::format("--shard takes K/N with 1 <= K <= N (e.g. 3/8); got '{}'", text));
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
  io::detail::read_schema_version(root, version, kSweepSchemaVersion, "sweep-format");
  impl->name = std::filesystem::path(name).stem().string();
  root.get("name", impl->name);
  std::string description;
  root.get("description", description);
  root.get("steady_state", impl->steady_state);

  const bool base_ok = impl->read_base(root, r, name, base_dir);
  const Sampling sampling = impl->read_sampling(root);
  std::string mode = "grid";
  if (root.get("mode", mode) && mode != "grid" && mode != "zip")
    r.error(root.location_of("mode"), "mode",
            fmt::format("'{}' is not one of grid, zip{}", mode, did_you_mean(mode, {"grid", "zip"})));
  impl->read_axes(root, r, name);
  root.finish();
  impl->check_axes(root, r, mode);
  if (base_ok) impl->probe_axes(r);
  r.throw_if_any();

  impl->count_points(root, sampling);
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
  detail::emit(t, text);
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
      for (std::size_t i = 0; i < plans->items.size(); ++i) names.push_back(detail::item_name(plans->items[i], i));
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
      if (meets && e.cost.priced() && (cheapest.empty() || e.cost.cost_usd < cheapest_usd)) {
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
