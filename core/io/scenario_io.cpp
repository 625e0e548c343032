#include "io/scenario_io.hpp"

#include <map>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/model_io.hpp"
#include "io/offload_keys.hpp"
#include "io/readers.hpp"
#include "io/yaml_reader.hpp"
#include "plan/checks.hpp"
#include "plan/cluster.hpp"
#include "plan/framework.hpp"

namespace ftplan::io {

using detail::MapView;
using detail::Reader;
using namespace ftplan::plan;

namespace {

// The node at a dotted path below `root` ("parallel.tp"), or an undefined node.
YAML::Node find_path(YAML::Node root, const std::string& dotted) {
  YAML::Node cur = root;
  std::size_t start = 0;
  while (start <= dotted.size()) {
    const auto dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // IsDefined first: an absent block (root["job"] of a file without one) is an invalid node,
    // on which yaml-cpp's IsMap() throws.
    if (!cur.IsDefined() || !cur.IsMap() || !cur[part].IsDefined()) return YAML::Node(YAML::NodeType::Undefined);
    cur.reset(cur[part]);  // reset, not '=': assignment writes through to the tree in yaml-cpp
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

// The deepest node that exists along a dotted path (so a finding about a defaulted key points at its parent).
YAML::Node find_nearest(YAML::Node root, const std::string& dotted) {
  std::string path = dotted;
  while (!path.empty()) {
    YAML::Node n = find_path(root, path);
    if (n.IsDefined()) return n;
    const auto dot = path.rfind('.');
    path = dot == std::string::npos ? std::string() : path.substr(0, dot);
  }
  return root;
}

void read_offload(MapView& v, Offload& o) {
  v.get_enum<OffloadPreset>("preset", o.preset);
  apply_preset(o);  // explicit keys below override the preset's placements
  for (const auto& k : detail::kOffloadPlacements) v.get_enum<Tier>(k.key, o.*k.member);
  detail::for_each_offload_setting([&](const auto& k) {
    auto& value = o.*k.member;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>)
      v.get(k.key, value);
    else if constexpr (std::is_same_v<std::decay_t<decltype(value)>, int>)
      v.get(k.key, value, k.min, k.max);
    else
      v.get_quantity(k.key, Quantity::bytes, value, 1);
  });
}

// cost: {mode, billing, energy_price, pue, lifetime_years, utilization, rent}: the keys given
// replace those of `c` (the scenario's, for a plan's own block).
void read_cost(MapView& c, CostSpec& cost) {
  c.get_enum<CostSpec::Mode>("mode", cost.mode);
  c.get_enum<CostSpec::Billing>("billing", cost.billing);
  c.get_quantity("energy_price", Quantity::money_per_energy, cost.energy_usd_per_kwh, 0);
  c.get("pue", cost.pue, 1.0, 5.0);
  c.get("lifetime_years", cost.lifetime_years, 0.1, 50.0);
  c.get("utilization", cost.utilization, 0.01, 1.0);
  c.get_quantity("rent", Quantity::money_per_hour, cost.rent_usd_per_hour, 0);
}

// The cost keys only one way of paying uses (cost::dollars): owned, the energy price and the
// capex's write-off; rented, the billing and the rate. (pue scales the energy figure under both.)
struct ModeKey {
  const char* key;
  CostSpec::Mode mode;
};
constexpr ModeKey kModeKeys[] = {{"energy_price", CostSpec::Mode::own},
                                 {"lifetime_years", CostSpec::Mode::own},
                                 {"utilization", CostSpec::Mode::own},
                                 {"billing", CostSpec::Mode::rent},
                                 {"rent", CostSpec::Mode::rent}};

// A cost key given where no plan it reaches pays that way: refused, not taken and ignored (issue 41).
struct GivenCostKey {
  const ModeKey* key;
  SourceLocation at;
  std::string path;
};
std::vector<GivenCostKey> mode_keys_given(const MapView& c) {
  std::vector<GivenCostKey> out;
  for (const ModeKey& k : kModeKeys)
    if (c.has(k.key)) out.push_back({&k, c.location_of(k.key), c.key_path(k.key)});
  return out;
}
void refuse_unused_cost_keys(Reader& r, const std::vector<GivenCostKey>& given, bool used_by_own, bool used_by_rent,
                             const char* who) {
  for (const auto& g : given) {
    const bool own = g.key->mode == CostSpec::Mode::own;
    if (own ? used_by_own : used_by_rent) continue;
    r.error(g.at, g.path,
            own ? fmt::format("prices owned hardware (cost.mode: own), and {} is rented: a rented rate already "
                              "includes energy and depreciation",
                              who)
                : fmt::format("prices rented hardware (cost.mode: rent), and {} is owned: its cost is capex over its "
                              "life, energy and wear",
                              who));
  }
}

void read_parallel(MapView& v, Parallel& p) {
  v.get("dp", p.dp, 1, plan::kMaxGpus);
  v.get("tp", p.tp, 1, 1024);
  v.get("pp", p.pp, 1, 4096);
  v.get("cp", p.cp, 1, 1024);
  v.get("ep", p.ep, 1, 4096);
  v.get("sequence_parallel", p.sequence_parallel);
  v.get("async_tp", p.async_tp);
  p.zero_given = p.zero_given || v.has("zero");
  v.get("zero", p.zero, 0, 3);
  p.fsdp_given = p.fsdp_given || v.has("fsdp");
  v.get_enum<FsdpSharding>("fsdp", p.fsdp);
  v.get_enum<PipelineSchedule>("schedule", p.schedule);
  v.get("virtual_stages", p.virtual_stages, 1, 1024);
  v.get("first_stage_layers", p.first_stage_layers, 0, 100000);
  v.get("last_stage_layers", p.last_stage_layers, 0, 100000);
  v.get("capacity_factor", p.capacity_factor, 0.0, 64.0);
}

std::vector<hardware::DeviceCount> read_device_list(MapView& v, const char* key, const char* item_key) {
  std::vector<hardware::DeviceCount> out;
  std::size_t i = 0;
  for (const auto& node : v.seq(key)) {
    MapView d(v.reader(), node, fmt::format("{}[{}]", v.key_path(key), i++));
    if (!d.valid()) continue;
    hardware::DeviceCount c;
    d.require(item_key);
    d.get(item_key, c.name);
    d.get("count", c.count = 1, 1, 1024);
    d.finish();
    out.push_back(c);
  }
  return out;
}

// cluster: {gpu: NAME, gpus: N, gpus_per_node?}: the catalog's typical node for that GPU. False
// if the cluster cannot be built; `ok` false if it can, with a problem.
bool read_gpu_cluster(MapView& v, Cluster& c, const hardware::Catalog& catalog, int gpus_per_node, bool& ok) {
  Reader& r = v.reader();
  std::string gpu;
  int gpus = 0;
  v.get("gpu", gpu);
  v.get_required("gpus", gpus, 1, plan::kMaxGpus);
  if (v.has("nodes"))
    r.error(v.location_of("nodes"), v.key_path("nodes"), "with 'gpu', give gpus (total) instead of nodes");
  v.take("nodes");
  const auto* spec = catalog.gpu(gpu);
  if (!spec) {
    r.error(v.location_of("gpu"), v.key_path("gpu"),
            fmt::format("no GPU '{}' in the catalog{}", gpu, did_you_mean(gpu, catalog.gpu_names())));
    return false;
  }
  const auto* node = catalog.default_node_for(gpu);
  if (!node) {
    r.error(v.location_of("gpu"), v.key_path("gpu"),
            fmt::format("the catalog has no typical node for '{}'; name one with 'node'", gpu));
    return false;
  }
  if (gpus == 0) return false;
  c.node = *node;
  if (gpus_per_node == 0) gpus_per_node = std::min(gpus, node->gpus);
  if (gpus % gpus_per_node != 0) {
    r.error(v.location_of("gpus"), v.key_path("gpus"),
            fmt::format("{} GPUs do not fill whole nodes of {} (gpus_per_node)", gpus, gpus_per_node));
    ok = false;
  }
  c.gpus_per_node = gpus_per_node;
  c.nodes = std::max(1, gpus / gpus_per_node);
  return true;
}

// cluster: {node: NAME, ...}: a catalog node. False if there is none of that name.
bool read_named_node(MapView& v, Cluster& c, const hardware::Catalog& catalog) {
  Reader& r = v.reader();
  std::string name;
  v.get("node", name);
  const auto* node = catalog.node(name);
  if (!node && name == "local") {
    // `ftplan validate` adds this machine to the catalog as node "local" (exec/validate.hpp).
    r.error(v.location_of("node"), v.key_path("node"),
            "'local' is this machine as its calibration profile describes it, which only `ftplan validate` "
            "runs; other verbs need a catalog node (`ftplan hardware nodes`)");
    return false;
  }
  if (!node) {
    r.error(v.location_of("node"), v.key_path("node"),
            fmt::format("no node '{}' in the catalog{}", name, did_you_mean(name, catalog.node_names())));
    return false;
  }
  c.node = *node;
  return true;
}

// cluster: {parts: {name?, gpu, gpus, host, dram?, drives?, expanders?, nics?, gpu_interconnect?, base_power?}}:
// a node described part by part (resolved against the catalog by the caller). False if a part is missing.
bool read_parts(MapView& v, hardware::NodeSpec& n) {
  MapView p = v.map("parts");
  if (!p.valid()) return false;
  n.name = "custom";
  p.get("name", n.name);
  n.display_name = n.name;
  p.get_required("gpu", n.gpu);
  p.require("gpus", "GPUs per node");
  p.get("gpus", n.gpus, 1, 1024);
  p.get_required("host", n.host);
  p.get_quantity("dram", Quantity::bytes, n.dram_bytes, 1);
  plan::for_each_device_kind([&](const auto& kind) { n.*kind.in_node = read_device_list(p, kind.key, kind.item); });
  p.get_enum("gpu_interconnect", n.gpu_interconnect);
  p.get_quantity("base_power", Quantity::power, n.base_power_w, 0);
  p.finish();
  return !(n.gpu.empty() || n.host.empty() || n.gpus == 0);
}

// cluster: {gpu, gpus, gpus_per_node} | {node, nodes, gpus_per_node} | {parts: {...}, nodes}; plus overrides.
bool read_cluster(MapView& v, Cluster& c, const hardware::Catalog& catalog) {
  Reader& r = v.reader();
  const int forms = v.has("gpu") + v.has("node") + v.has("parts");
  if (forms != 1) {
    r.error(v.location(), v.path(),
            forms == 0 ? "say what hardware: {gpu: NAME, gpus: N} or {node: NAME, nodes: N} or {parts: {...}, nodes: N}"
                       : "give only one of gpu, node and parts");
    v.take("gpu"), v.take("node"), v.take("parts"), v.take("gpus"), v.take("nodes"), v.take("gpus_per_node");
    v.take("dram"), v.take("exclusive");
    plan::for_each_device_kind([&](const auto& kind) { v.take(kind.key); });
    return false;
  }
  bool ok = true;
  // A machine described part by part is taken as owned: the plan has it to itself.
  c.exclusive = v.has("parts");
  v.get("exclusive", c.exclusive);
  int gpus_per_node = 0;
  v.get("gpus_per_node", gpus_per_node, 1, 1024);
  if (v.has("gpu")) {
    if (!read_gpu_cluster(v, c, catalog, gpus_per_node, ok)) return false;
  } else {
    v.get("nodes", c.nodes, 1, 1 << 20);
    if (v.has("gpus"))
      r.error(v.location_of("gpus"), v.key_path("gpus"), "with 'node' or 'parts', give nodes instead of gpus");
    v.take("gpus");
    if (v.has("node") ? !read_named_node(v, c, catalog) : !read_parts(v, c.node)) return false;
    c.gpus_per_node = gpus_per_node > 0 ? gpus_per_node : c.node.gpus;
  }
  // Overrides of the node's memory and devices (what the planner varies).
  v.get_quantity("dram", Quantity::bytes, c.node.dram_bytes, 1);
  plan::for_each_device_kind([&](const auto& kind) {
    if (v.has(kind.key))
      c.node.*kind.in_node = read_device_list(v, kind.key, kind.item);
    else
      v.take(kind.key);
  });

  // Resolve the parts against the catalog.
  const int nodes = c.nodes, per_node = c.gpus_per_node;
  for (const auto& problem : plan::resolve_cluster(catalog, c.node, nodes, per_node, c)) {
    bool listed = false;  // a device kind's list, where the scenario gives it
    plan::for_each_device_kind([&](const auto& kind) { listed = listed || problem.key == kind.key; });
    r.error(listed ? v.location_of(problem.key) : v.location(), v.key_path(problem.key), problem.message);
    ok = false;
  }
  return ok;
}

bool read_model(MapView& root, model::ModelSpec& m, const model::Zoo& zoo, const std::filesystem::path& base_dir) {
  Reader& r = root.reader();
  if (!root.require("model",
                    "a zoo name (see `ftplan zoo list`), {hf_config: path/to/config.json} or an inline description"))
    return false;
  const YAML::Node node = root.raw()["model"];
  if (node.IsScalar()) {
    std::string name;
    root.get("model", name);
    if (const auto* spec = zoo.find(name)) {
      m = *spec;
      return true;
    }
    r.error(
        root.location_of("model"), "model",
        fmt::format("no model '{}' in the zoo{}; `ftplan zoo list` shows them", name, did_you_mean(name, zoo.names())));
    return false;
  }
  MapView v = root.map("model");
  if (!v.valid()) return false;
  // max_context beside zoo or hf_config: a model trained past its recorded context (RoPE scaling or
  // position interpolation, as long-context fine-tunes do; learned positions get the extra rows).
  std::int64_t max_context = 0;
  v.get("max_context", max_context, 1, 100'000'000);
  if (v.has("zoo")) {
    std::string name;
    v.get("zoo", name);
    v.finish();
    if (const auto* spec = zoo.find(name)) {
      m = *spec;
      if (max_context > 0) m.max_context = max_context;
      return true;
    }
    r.error(v.location_of("zoo"), "model.zoo",
            fmt::format("no model '{}' in the zoo{}", name, did_you_mean(name, zoo.names())));
    return false;
  }
  if (v.has("hf_config")) {
    std::string path;
    v.get("hf_config", path);
    std::string name;
    v.get("name", name);
    v.finish();
    std::filesystem::path p(path);
    if (p.is_relative()) p = base_dir / p;
    try {
      m = load_hf_config(p);
      if (!name.empty()) m.name = m.display_name = name;
      if (max_context > 0) m.max_context = max_context;
      return true;
    } catch (const InputError& e) {
      r.error(v.location_of("hf_config"), "model.hf_config", fmt::format("cannot import {}:", path));
      r.diagnostics().append(e.diagnostics());
      return false;
    }
  }
  // An inline description in the zoo format.
  v.get_required("name", m.name);
  detail::read_model_fields(v, m);
  v.finish();
  return true;
}

// search.<key>: a list of whole numbers in [lo, hi]; `out` is kept when the list is absent or wrong.
void read_ints(MapView& sv, const char* key, std::vector<int>& out, int lo, int hi) {
  Reader& r = sv.reader();
  const auto items = sv.seq(key);
  if (items.empty()) return;
  std::vector<int> values;
  for (const auto& item : items) {
    int v = 0;
    try {
      v = item.as<int>();
    } catch (const YAML::Exception&) {
      r.error(item, sv.key_path(key), "expected whole numbers");
      return;
    }
    if (v < lo || v > hi) {
      r.error(item, sv.key_path(key), fmt::format("must be between {} and {}; got {}", lo, hi, v));
      return;
    }
    values.push_back(v);
  }
  out = values;
}

// search.gpus: catalog GPUs with a typical node.
void read_search_gpus(MapView& sv, SearchSpace& sp, const hardware::Catalog& catalog) {
  Reader& r = sv.reader();
  std::vector<std::string> gpus;
  sv.require("gpus", "GPU types to consider (`ftplan hardware list gpus`)");
  if (!sv.get_strings("gpus", gpus)) return;
  for (const auto& g : gpus)
    if (!catalog.gpu(g))
      r.error(sv.location_of("gpus"), sv.key_path("gpus"),
              fmt::format("no GPU '{}' in the catalog{}", g, did_you_mean(g, catalog.gpu_names())));
    else if (!catalog.default_node_for(g))
      r.error(sv.location_of("gpus"), sv.key_path("gpus"), fmt::format("the catalog has no typical node for '{}'", g));
  sp.gpus = gpus;
}

// search.activation_checkpointing and search.offload: lists of an enum's names.
template <class E>
void read_choice_list(MapView& sv, std::string_view key, std::vector<E>& out) {
  std::vector<std::string> names;
  if (!sv.get_strings(key, names)) return;
  out.clear();
  for (const auto& n : names) {
    if (const std::optional<E> value = value_named<E>(n)) {
      out.push_back(*value);
    } else {
      sv.report_bad_choice(key, n, names_of<E>());
    }
  }
}

void read_search_choices(MapView& sv, SearchSpace& sp) {
  read_choice_list(sv, "activation_checkpointing", sp.checkpointing);
  read_choice_list(sv, "offload", sp.offload);
}

// search: the space the planner searches (docs/scenario-format.md).
void read_search(MapView& sv, SearchSpace& sp, const hardware::Catalog& catalog) {
  Reader& r = sv.reader();
  read_search_gpus(sv, sp, catalog);
  read_ints(sv, "gpu_counts", sp.gpu_counts, 1, 1 << 20);
  read_ints(sv, "tp", sp.tp, 1, 1024);
  read_ints(sv, "pp", sp.pp, 1, 1024);
  read_ints(sv, "virtual_stages", sp.virtual_stages, 1, 1024);
  if (const auto items = sv.seq("sequence_parallel"); !items.empty()) {
    sp.sequence_parallel.clear();
    for (const auto& item : items) {
      bool v = false;
      if (!YAML::convert<bool>::decode(item, v)) {
        r.error(item, sv.key_path("sequence_parallel"), "expected true or false");
        break;
      }
      sp.sequence_parallel.push_back(v);
    }
  }
  read_ints(sv, "zero", sp.zero, 0, 3);
  read_ints(sv, "micro_batch", sp.micro_batch, 1, 1 << 16);
  // A device kind that backs a tier (drives, expanders): [counts] of the node's own first device,
  // or {ITEM: NAME, counts: [0, 4]} of the catalog's NAME.
  plan::for_each_device_kind([&](const auto& kind) {
    if (!kind.tier) return;
    plan::SearchSpace::DeviceAxis axis{kind.key, "", {}};
    const YAML::Node raw = sv.raw();
    if (const YAML::Node given = raw[kind.key]; given.IsDefined() && given.IsMap()) {
      MapView x = sv.map(kind.key);
      if (x.require(kind.item, fmt::format("the catalog's {} to count", kind.what)) && x.get(kind.item, axis.name) &&
          !hardware::find_named(catalog.*kind.in_catalog, axis.name))
        r.error(x.location_of(kind.item), x.key_path(kind.item),
                fmt::format("no {} '{}' in the catalog{}", kind.what, axis.name,
                            did_you_mean(axis.name, hardware::names_of(catalog.*kind.in_catalog))));
      x.require("counts", fmt::format("the {} per node to try, e.g. [0, 4]", kind.key));
      read_ints(x, "counts", axis.counts, 0, 64);
      x.finish();
    } else if (sv.has(kind.key)) {
      const SourceLocation at = sv.location_of(kind.key);
      read_ints(sv, kind.key, axis.counts, 0, 64);
      // Counts of the node's own: each searched GPU's node must have one to count.
      for (const auto& gpu : sp.gpus)
        if (const auto* node = catalog.default_node_for(gpu); node && ((*node).*kind.in_node).empty())
          r.error(at, sv.key_path(kind.key),
                  fmt::format("{}'s node ({}) has no {} to count: name one, {{{}: NAME, counts: [...]}}", gpu,
                              node->name, kind.what, kind.item));
    }
    if (!axis.counts.empty()) sp.devices.push_back(std::move(axis));
  });
  read_search_choices(sv, sp);
  for (const auto& item : sv.seq("dram")) {
    try {
      sp.dram_bytes.push_back(parse_quantity(item.Scalar(), Quantity::bytes));
    } catch (const UnitError& e) {
      r.error(item, sv.key_path("dram"), e.what());
    }
  }
  sv.finish();
}

// What a plan's reading needs of the scenario's.
struct ScenarioContext {
  const Scenario& s;
  MapView& job;                                                       // the scenario's job block
  const std::set<std::pair<std::string, std::string>>& job_findings;  // reported there already
  bool model_ok;
  const hardware::Catalog& catalog;
};

// Reports plan::check_plan's findings (and check_job's on the plan's own job block) where they
// belong: a job key at the plan's override if there is one, else at the scenario's job.
void report_plan_findings(MapView& pv, const Plan& p, const ScenarioContext& ctx) {
  Reader& r = pv.reader();
  std::vector<Finding> findings = check_plan(ctx.s.model, p);
  // A plan's own job block (plans[].job) is checked as the scenario's job is.
  if (pv.has("job"))
    for (auto& f : check_job(ctx.s.model, p.job))
      if (!ctx.job_findings.count({f.key, f.message})) findings.push_back(std::move(f));
  for (const auto& f : findings) {
    // A finding about a job key points at the plan's override when there is one, else at the scenario's job.
    if (f.key.rfind("job.", 0) == 0 && !find_path(pv.raw(), f.key).IsDefined()) {
      // At the scenario's job block; without one (already reported missing), at the plan.
      r.error(ctx.job.valid() ? find_nearest(ctx.job.raw(), f.key.substr(4)) : pv.raw(), f.key,
              fmt::format("{} (plan '{}')", f.message, p.name));
    } else {
      r.error(find_nearest(pv.raw(), f.key), pv.path() + "." + f.key, f.message);
    }
  }
}

// One item of `plans:`; false if it cannot be evaluated (its problems are reported).
// "file:line:column" of a place in the scenario.
std::string place(const SourceLocation& w) { return fmt::format("{}:{}:{}", w.file, w.line, w.column); }

// The plans read so far by file tag (plan::file_tag): the name and where it stands.
using PlanNames = std::map<std::string, std::pair<std::string, SourceLocation>>;

bool read_plan(MapView& pv, Plan& p, PlanNames& names, const ScenarioContext& ctx) {
  Reader& r = pv.reader();
  p.job = ctx.s.job;
  p.cost = ctx.s.cost;
  pv.require("name");
  if (pv.get("name", p.name)) {
    // Names become parts of file names (traces, step IRs, validate's state files): two that differ
    // only in punctuation would write one file.
    const auto [at, fresh] = names.try_emplace(plan::file_tag(p.name), p.name, pv.location_of("name"));
    if (!fresh && at->second.first == p.name)
      r.error(pv.location_of("name"), pv.key_path("name"), fmt::format("another plan is already named '{}'", p.name));
    else if (!fresh)
      r.error(pv.location_of("name"), pv.key_path("name"),
              fmt::format("'{}' and the plan '{}' ({}) become one file name part, '{}' (every character but letters "
                          "and digits is '_' in trace, step IR and state file names): rename one",
                          p.name, at->second.first, place(at->second.second), at->first));
  }
  pv.require("cluster", "the hardware: {gpu: NAME, gpus: N} or {node: NAME, nodes: N}");
  MapView cv = pv.map("cluster");
  const bool cluster_ok = cv.valid() && read_cluster(cv, p.cluster, ctx.catalog);
  cv.finish();
  if (MapView v = pv.map("parallel"); v.valid()) {
    read_parallel(v, p.parallel);
    v.finish();
  }
  if (MapView v = pv.map("offload"); v.valid()) {
    read_offload(v, p.offload);
    v.finish();
  }
  if (MapView v = pv.map("job"); v.valid()) {
    detail::read_job(v, p.job, ctx.s.model);
    v.finish();
  }
  if (MapView v = pv.map("cost"); v.valid()) {
    read_cost(v, p.cost);
    refuse_unused_cost_keys(pv.reader(), mode_keys_given(v), p.cost.mode == CostSpec::Mode::own,
                            p.cost.mode == CostSpec::Mode::rent, "this plan");
    v.finish();
  }
  pv.finish();
  if (!cluster_ok || !ctx.model_ok) return false;
  report_plan_findings(pv, p, ctx);
  if (p.parallel.dp == 0) p.parallel.dp = data_parallel_degree(p);
  // Knobs left open (`auto`) stay open: evaluate::choose_open_knobs chooses them for the plans a
  // verb evaluates (the reader simulates nothing).
  return true;
}

}  // namespace

plan::Scenario parse_scenario(std::string_view text, const std::string& name, const std::filesystem::path& base_dir,
                              const model::Zoo& zoo, const hardware::Catalog& catalog) {
  return parse_scenario(detail::load_yaml_text(text, name), name, base_dir, zoo, catalog);
}

plan::Scenario parse_scenario(const YAML::Node& root_node, const std::string& name,
                              const std::filesystem::path& base_dir, const model::Zoo& zoo,
                              const hardware::Catalog& catalog) {
  Reader r(name);
  Scenario s;
  s.file = name;
  MapView root = r.root(root_node);
  if (!root.valid()) r.throw_if_any();

  detail::read_schema_version(root, s.schema_version, kScenarioSchemaVersion, "scenario-format");
  root.get("name", s.name);
  root.get("description", s.description);
  const bool model_ok = read_model(root, s.model, zoo, base_dir);

  MapView job = root.map("job");
  root.require("job", "what to train: seq_len, micro_batch, tokens or steps, method, ...");
  detail::read_job(job, s.job, s.model);
  job.finish();
  std::set<std::pair<std::string, std::string>> job_findings;  // reported once, not again for each plan
  if (model_ok && job.valid())
    for (const auto& f : check_job(s.model, s.job)) {
      const YAML::Node at = find_nearest(job.raw(), f.key.substr(4));
      r.error(at, f.key, f.message);
      job_findings.emplace(f.key, f.message);
    }

  std::vector<GivenCostKey> scenario_cost_keys;
  if (MapView c = root.map("cost"); c.valid()) {
    read_cost(c, s.cost);
    scenario_cost_keys = mode_keys_given(c);
    c.finish();
  }
  if (MapView sv = root.map("search"); sv.valid()) {
    s.has_search = true;
    read_search(sv, s.search, catalog);
    if (s.job.global_batch <= 0 && !(job.valid() && job.has("global_batch")))  // (a bad value has its own error)
      r.error(job.location(), "job.global_batch",
              "is required with `search`: every plan trains the same recipe (global batch and tokens)");
  }
  if (MapView cv = root.map("constraints"); cv.valid()) {
    cv.get_quantity("deadline", Quantity::duration, s.constraints.deadline_s, 0);
    cv.get_quantity("budget", Quantity::money, s.constraints.budget_usd, 0);
    cv.get_quantity("peak_power", Quantity::power, s.constraints.peak_power_w, 0);
    cv.get("max_gpus", s.constraints.max_gpus, 1, plan::kMaxGpus);
    cv.finish();
  }
  if (!s.has_search) root.require("plans", "a list of plans to compare");
  std::size_t index = 0;
  PlanNames names;
  const ScenarioContext ctx{s, job, job_findings, model_ok, catalog};
  for (const auto& plan_node : root.seq("plans")) {
    MapView pv(r, plan_node, fmt::format("plans[{}]", index++));
    if (!pv.valid()) continue;
    Plan p;
    if (read_plan(pv, p, names, ctx)) s.plans.push_back(std::move(p));
  }
  // The scenario's cost keys reach every plan (and every searched one): used if one pays that way.
  bool own = s.has_search && s.cost.mode == CostSpec::Mode::own,
       rent = s.has_search && s.cost.mode == CostSpec::Mode::rent;
  for (const auto& p : s.plans) (p.cost.mode == CostSpec::Mode::own ? own : rent) = true;
  if (!s.plans.empty() || s.has_search)
    refuse_unused_cost_keys(r, scenario_cost_keys, own, rent, s.plans.size() > 1 ? "every plan" : "the plan");
  root.finish();
  r.throw_if_any();
  if (s.name.empty()) s.name = std::filesystem::path(name).stem().string();
  return s;
}

std::string read_scenario_text(const std::filesystem::path& path) { return detail::read_input_file(path); }

plan::Scenario load_scenario(const std::filesystem::path& path, const model::Zoo& zoo,
                             const hardware::Catalog& catalog) {
  const std::string text = read_scenario_text(path);
  return parse_scenario(text, path.string(), path.parent_path(), zoo, catalog);
}

}  // namespace ftplan::io
