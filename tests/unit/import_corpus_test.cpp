// The import corpus (tests/data/import/cases.yaml, files under tests/data/import/corpus/ with their
// provenance in corpus/README.md): real configs from the frameworks' and launchers' own
// repositories, each with what the framework would run, written from the framework's source and
// defaults, not from ftplan's output. Each case is imported and read back; every expected scenario
// value must match, and every key of every file read must be accounted for: taken by a reader,
// listed as not used (with its reason), or an error. A key a reader neither takes nor lists fails.
#include <doctest/doctest.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "io/import/detail.hpp"
#include "io/import/import.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ftplan;

namespace {

// The launch facts a case gives as flags, as the scenario keys `ftplan import`'s flags set.
const std::map<std::string, std::string>& flag_keys() {
  static const std::map<std::string, std::string> m = {{"--gpu", "plan.cluster.gpu"},
                                                       {"--gpus", "plan.cluster.gpus"},
                                                       {"--model", "model"},
                                                       {"--gpus-per-node", "plan.cluster.gpus_per_node"},
                                                       {"--node", "plan.cluster.node"},
                                                       {"--nodes", "plan.cluster.nodes"},
                                                       {"--dp", "plan.parallel.dp"},
                                                       {"--tp", "plan.parallel.tp"},
                                                       {"--pp", "plan.parallel.pp"},
                                                       {"--cp", "plan.parallel.cp"},
                                                       {"--zero", "plan.parallel.zero"},
                                                       {"--fsdp", "plan.parallel.fsdp"},
                                                       {"--method", "job.method"},
                                                       {"--seq", "job.seq_len"},
                                                       {"--micro-batch", "job.micro_batch"},
                                                       {"--global-batch", "job.global_batch"},
                                                       {"--steps", "job.steps"},
                                                       {"--precision", "job.precision"},
                                                       {"--framework", "job.framework"},
                                                       {"--model-config", "model_config"}};
  return m;
}

// A scenario value as comparable text: scalars as written, lists sorted and joined.
std::string text_of(const YAML::Node& n) {
  if (!n || n.IsNull()) return "<absent>";
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) {
    std::vector<std::string> items;
    for (const auto& e : n) items.push_back(text_of(e));
    std::sort(items.begin(), items.end());
    std::string out = "[";
    for (const auto& i : items) out += (out.size() > 1 ? ", " : "") + i;
    return out + "]";
  }
  std::ostringstream os;
  os << n;
  return os.str();
}

// A key the imported scenario leaves out has the scenario format's default (docs/scenario-format.md).
std::string scenario_default(const std::string& key) {
  static const std::map<std::string, std::string> d = {{"job.method", "full"},
                                                       {"job.samples.packing", "packed"},
                                                       {"job.attention", "flash"},
                                                       {"job.compile", "false"},
                                                       {"job.activation_checkpointing", "none"},
                                                       {"job.lora.dropout", "0"},
                                                       {"job.quant.double_quant", "true"},
                                                       {"job.optimizer.paged", "false"},
                                                       {"plan.parallel.tp", "1"},
                                                       {"plan.parallel.pp", "1"},
                                                       {"plan.parallel.cp", "1"},
                                                       {"plan.parallel.zero", "0"},
                                                       {"plan.parallel.fsdp", "full_shard"},
                                                       {"plan.offload.params", "gpu"},
                                                       {"plan.offload.gradients", "gpu"},
                                                       {"plan.offload.optimizer", "gpu"},
                                                       {"plan.offload.activations", "gpu"},
                                                       {"plan.offload.optimizer_step", "gpu"}};
  const auto it = d.find(key);
  return it == d.end() ? "<absent>" : it->second;
}

// LoRA targets in ftplan's short names (the scenario takes both; docs/scenario-format.md).
std::string short_targets(std::string t) {
  for (const auto& [hf, ours] : std::vector<std::pair<std::string, std::string>>{{"q_proj", "q"},
                                                                                 {"k_proj", "k"},
                                                                                 {"v_proj", "v"},
                                                                                 {"o_proj", "o"},
                                                                                 {"gate_proj", "gate"},
                                                                                 {"up_proj", "up"},
                                                                                 {"down_proj", "down"}})
    for (std::size_t at; (at = t.find(hf)) != std::string::npos;) t.replace(at, hf.size(), ours);
  if (t.front() == '[') {  // sorted again: the short names sort differently
    std::vector<std::string> items;
    std::string w;
    for (char c : t.substr(1, t.size() - 2) + ",")
      if (c == ',') {
        if (!w.empty()) items.push_back(w);
        w.clear();
      } else if (c != ' ') {
        w += c;
      }
    std::sort(items.begin(), items.end());
    t = "[";
    for (const auto& i : items) t += (t.size() > 1 ? ", " : "") + i;
    t += "]";
  }
  return t;
}

bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  try {
    std::size_t ia = 0, ib = 0;
    const double x = std::stod(a, &ia), y = std::stod(b, &ib);
    return ia == a.size() && ib == b.size() && x == y;
  } catch (...) {
    return false;
  }
}

// The value of a dotted scenario key in the imported scenario: model and job.* at the top, plan.*
// in its one plan.
YAML::Node lookup(const YAML::Node& scenario, const std::string& key) {
  YAML::Node at = YAML::Clone(scenario);
  std::string rest = key;
  if (rest.rfind("plan.", 0) == 0) {
    at = YAML::Clone(scenario["plans"][0]);
    rest = rest.substr(5);
  }
  std::size_t start = 0;
  for (;;) {
    const auto dot = rest.find('.', start);
    const std::string part = rest.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!at.IsMap() || !at[part]) return YAML::Node();
    at = YAML::Clone(at[part]);
    if (dot == std::string::npos) return at;
    start = dot + 1;
  }
}

// Every leaf key path of a config file: maps by "a.b", maps inside lists by "a[0].b"; a list of
// scalars, a scalar or a null is a leaf.
void leaves(const io::import::Node& n, const std::string& path, std::vector<std::string>& out) {
  if (n.is_map() && !n.items.empty()) {
    for (const auto& [k, v] : n.items) leaves(v, path.empty() ? k : path + "." + k, out);
  } else if (n.is_seq() && std::any_of(n.elems.begin(), n.elems.end(), [](const auto& e) { return e.is_map(); })) {
    for (std::size_t i = 0; i < n.elems.size(); ++i) leaves(n.elems[i], path + "[" + std::to_string(i) + "]", out);
  } else if (!path.empty()) {
    out.push_back(path);
  }
}

bool under(const std::string& path, const std::string& key) {
  return path == key || (path.size() > key.size() && path.compare(0, key.size(), key) == 0 &&
                         (path[key.size()] == '.' || path[key.size()] == '['));
}

// The keys of `file` no reader took or listed.
std::vector<std::string> unaccounted(const io::ImportedScenario& s, const std::string& file) {
  const io::import::Node root =
      fs::path(file).extension() == ".toml" ? io::import::load_toml_tree(file) : io::import::load_yaml_tree(file);
  std::vector<std::string> all;
  leaves(root, "", all);
  std::vector<std::string> missing;
  for (const auto& path : all) {
    bool ok = false;
    for (const auto& [f, k] : s.taken)
      if (f == file && k == path) ok = true;
    for (const auto& i : s.ignored)
      if (i.where.file == file && under(path, i.key)) ok = true;
    if (!ok) missing.push_back(path);
  }
  return missing;
}

}  // namespace

TEST_CASE("import corpus: real configs from the frameworks' repositories import as the frameworks run them") {
  const fs::path dir = test::data_dir() / "import";
  const YAML::Node cases = YAML::LoadFile((dir / "cases.yaml").string());
  REQUIRE(cases.IsSequence());
  int imported = 0, refused_as_expected = 0, values = 0;
  std::set<std::string> files_seen, repos;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const YAML::Node& kase = cases[c];
    std::vector<fs::path> files;
    for (const auto& f : kase["files"]) {
      files.push_back(dir / f.as<std::string>());
      files_seen.insert(f.as<std::string>());
      const std::string rel = f.as<std::string>();
      if (rel.rfind("corpus/", 0) == 0) repos.insert(rel.substr(7, rel.find('/', 7) - 7));
    }
    const std::string name = kase["files"][0].as<std::string>();
    CAPTURE(name);
    std::vector<io::ImportOverride> overrides;
    const YAML::Node args = kase["args"];
    for (std::size_t i = 0; args && i + 1 < args.size(); i += 2) {
      const auto it = flag_keys().find(args[i].as<std::string>());
      REQUIRE_MESSAGE(it != flag_keys().end(), "a flag the corpus test does not know: " << args[i].as<std::string>());
      overrides.push_back({it->second, args[i + 1].as<std::string>(), "command line " + args[i].as<std::string>()});
    }
    std::string error;
    io::ImportedScenario s;
    try {
      s = io::import_configs(files, overrides, test::zoo(), &test::catalog());
      (void)io::load_imported(s, fs::current_path(), test::zoo(), test::catalog());
    } catch (const InputError& e) {
      error = e.what();
    }
    if (kase["refuse"]) {
      const std::string want = kase["refuse"].as<std::string>();
      CHECK_MESSAGE(!error.empty(), "imported, but the framework refuses it (" << want << ")");
      CHECK_MESSAGE(error.find(want) != std::string::npos, "refused for another reason: " << error);
      if (!error.empty()) ++refused_as_expected;
      continue;
    }
    CHECK_MESSAGE(error.empty(), "refused: " << error);
    if (!error.empty()) continue;
    ++imported;
    const YAML::Node scenario = YAML::Load(s.yaml);
    for (const auto& kv : kase["expect"]) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node value = lookup(scenario, key);
      // model: {zoo: NAME, max_context: N} is the zoo model NAME trained past its context.
      std::string want = text_of(kv.second), got = text_of(key == "model" && value.IsMap() ? value["zoo"] : value);
      if (got == "<absent>") got = scenario_default(key);
      if (key == "job.lora.targets") want = short_targets(want), got = short_targets(got);
      // bitsandbytes' paged names and {name, paged: true} are one optimizer (docs/scenario-format.md).
      if (key == "job.optimizer.name") {
        if (text_of(lookup(scenario, "job.optimizer.paged")) == "true") got = "paged-" + got;
        if (want == "paged-adamw-32bit") want = "paged-adamw";
      }
      CHECK_MESSAGE(same_value(got, want), key << ": imported " << got << ", the framework runs " << want);
      ++values;
    }
    for (const auto& f : s.files) {
      const auto missing = unaccounted(s, f);
      std::string list;
      for (const auto& m : missing) list += " " + m;
      CHECK_MESSAGE(missing.empty(), f << ": keys neither read nor listed as not used:" << list);
    }
  }
  MESSAGE(cases.size() << " cases from " << files_seen.size() << " files (the corpus' from " << repos.size()
                       << " repositories): " << imported << " imported (" << values << " values checked), "
                       << refused_as_expected << " refused as the frameworks refuse them");
  CHECK(files_seen.size() >= 60);
  CHECK(repos.size() >= 10);
}
