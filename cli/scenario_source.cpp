#include "scenario_source.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "io/import/import.hpp"
#include "io/profile_io.hpp"
#include "io/scenario_io.hpp"
#include "io/yaml_edit.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"

namespace ftplan::cli {
namespace {

// Flag -> dotted scenario key (relative to the one plan of the quick form or its job).
struct Shortcut {
  const char* flag;
  const char* key;  // "job.x", "cluster.x", "parallel.x", "offload.x", "model"
  const char* help;
};

// job.framework's values, from the framework table (plan::framework_table).
const char* framework_list() {
  static const std::string list = [] {
    std::string out;
    for (const plan::FrameworkProfile& row : plan::framework_table())
      out += (out.empty() ? "" : ", ") + std::string(row.name);
    return out;
  }();
  return list.c_str();
}

const std::vector<Shortcut>& shortcuts() {
  static const std::vector<Shortcut> s = {
      {"model", "model", "zoo name or path to a Hugging Face config.json"},
      {"gpu", "cluster.gpu", "GPU from the catalog (`ftplan hardware list gpus`)"},
      {"gpus", "cluster.gpus", "total GPUs"},
      {"gpus-per-node", "cluster.gpus_per_node", "GPUs per node"},
      {"node", "cluster.node", "node from the catalog instead of --gpu"},
      {"nodes", "cluster.nodes", "nodes (with --node)"},
      {"dram", "cluster.dram", "host DRAM per node, e.g. 512GiB"},
      {"dp", "parallel.dp", "data-parallel degree"},
      {"tp", "parallel.tp", "tensor-parallel degree"},
      {"pp", "parallel.pp", "pipeline stages"},
      {"cp", "parallel.cp", "context-parallel degree"},
      {"ep", "parallel.ep", "expert-parallel degree"},
      {"zero", "parallel.zero", "ZeRO stage 0-3"},
      {"fsdp", "parallel.fsdp", names_joined<plan::FsdpSharding>()},
      {"offload", "offload.preset", names_joined<plan::OffloadPreset>()},
      {"method", "job.method", names_joined<plan::Method>()},
      {"lora-rank", "job.lora.rank", "LoRA rank"},
      {"lora-targets", "job.lora.targets", "comma-separated modules (q,k,v,o,gate,up,down or all-linear)"},
      {"seq", "job.seq_len", "sequence length"},
      {"micro-batch", "job.micro_batch", "micro-batch per GPU"},
      {"global-batch", "job.global_batch", "samples per optimizer step"},
      {"tokens", "job.tokens", "tokens to train on"},
      {"steps", "job.steps", "optimizer steps to train"},
      {"precision", "job.precision", names_joined<plan::Precision>()},
      {"optimizer", "job.optimizer", names_joined<plan::OptimizerKind>()},
      {"ckpt", "job.activation_checkpointing", names_joined<plan::Checkpointing>()},
      {"attention", "job.attention", names_joined<plan::AttentionImpl>()},
      {"framework", "job.framework", framework_list()},
  };
  return s;
}

// A YAML scalar for a flag value, quoted so YAML never reinterprets it.
std::string yaml_quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Where a --set item starts: a dotted key (letters, digits, '_', '-', '.') and '='.
bool starts_item(const std::string& text, std::size_t at) {
  std::size_t i = at;
  const auto key_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  };
  if (i >= text.size() || !(std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_')) return false;
  while (i < text.size() && key_char(text[i])) ++i;
  return i < text.size() && text[i] == '=';
}

// --set's KEY=VALUE items. A comma starts the next item only where KEY= follows it; any other
// comma, and every comma inside [ ], belongs to the value. So a list needs no quoting:
// `job.lora.targets=q,v,o,job.seq_len=2048` is two items, and the first value is q,v,o.
std::vector<std::pair<std::string, std::string>> set_items(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size()) {
      if (text[i] == '[')
        ++depth;
      else if (text[i] == ']')
        depth = std::max(0, depth - 1);
      if (text[i] != ',' || depth > 0 || !starts_item(text, i + 1)) continue;
    }
    const std::string item = text.substr(start, i - start);
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--set takes KEY=VALUE; got '" + item + "'");
    std::string key(trim(item.substr(0, eq)));
    // One value per key: a second would replace the first unseen.
    for (const auto& [k, v] : out)
      if (k == key)
        throw UsageError(
            fmt::format("--set {} is given twice ('{}', then '{}'): give it once", key, v, item.substr(eq + 1)));
    out.emplace_back(std::move(key), item.substr(eq + 1));
    start = i + 1;
  }
  return out;
}

// The items of a list written on the command line, "a,b,c" or "[a,b,c]", as a YAML flow list of
// quoted scalars.
std::string yaml_list(const std::string& flag, std::string_view v) {
  v = trim(v);
  if (v.size() >= 2 && v.front() == '[' && v.back() == ']') v = trim(v.substr(1, v.size() - 2));
  if (v.empty()) return "[]";
  std::string out = "[";
  std::size_t start = 0;
  for (;;) {
    const auto comma = v.find(',', start);
    const std::string_view item =
        trim(v.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) throw UsageError(fmt::format("{}: an empty item in the list '{}'", flag, v));
    if (out.size() > 1) out += ", ";
    out += yaml_quoted(std::string(item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out + "]";
}

// A --set value as YAML: [a,b] or a,b is a list (as `key: [a, b]` in a file), {k: v, ...} a
// mapping; anything else one quoted scalar. A comma between two digits is a thousands separator ("1,024 GiB"), as the
// unit parser reads it, not a list; write a list of numbers in brackets: [1,2].
std::string yaml_value(const std::string& key, const std::string& v) {
  const std::string_view t = trim(v);
  // A list of mappings or lists ([{drive: X, count: 4}]) is YAML as written; a list of scalars is
  // split on its commas, each item quoted.
  if (!t.empty() && t.front() == '[' && t.back() == ']' && t.find_first_of("{[", 1) != std::string_view::npos)
    return std::string(t);
  if (!t.empty() && t.front() == '[' && t.back() == ']') return yaml_list("--set " + key, t);
  // A flow mapping ({param_dtype: fp32, reduce_dtype: bf16}) is YAML as written: its commas
  // separate its entries, not list items.
  if (!t.empty() && t.front() == '{' && t.back() == '}') return std::string(t);
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i] == ',' && !(i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
                         std::isdigit(static_cast<unsigned char>(t[i + 1]))))
      return yaml_list("--set " + key, t);
  return yaml_quoted(v);
}

// Nested YAML from dotted keys.
void emit(std::string& out, const std::vector<std::pair<std::string, std::string>>& kv, const std::string& prefix,
          int indent) {
  std::vector<std::string> done;
  for (const auto& [key, value] : kv) {
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string rest = key.substr(prefix.size());
    const auto dot = rest.find('.');
    const std::string head = rest.substr(0, dot);
    if (std::find(done.begin(), done.end(), head) != done.end()) continue;
    done.push_back(head);
    if (dot == std::string::npos) {
      out += std::string(indent, ' ') + head + ": " + value + "\n";
    } else {
      out += std::string(indent, ' ') + head + ":\n";
      emit(out, kv, prefix + head + ".", indent + 2);
    }
  }
}

}  // namespace

std::vector<OptionSpec> scenario_options() {
  std::vector<OptionSpec> o = common_options();
  o.push_back({"plan", true, "only the plan of this name"});
  o.push_back({"from", true,
               "read the scenario from training configs instead (DeepSpeed, accelerate, torchtune, torchtitan, "
               "TrainingArguments/TRL, PEFT adapter, Axolotl, LLaMA-Factory; more files as further arguments); the "
               "flags below override them (docs/import.md)"});
  for (const auto& s : shortcuts()) o.push_back({s.flag, true, s.help});
  o.push_back({"model-config", true,
               "with --from (and import): the Hugging Face config.json of the model the configs name, for a model "
               "the zoo lacks"});
  o.push_back(
      {"profile", true, "calibration profile (ftplan calibrate --out) whose measured rates replace the defaults"});
  o.push_back({"set", true,
               "KEY=VALUE for any scenario key, dotted (job.loss.chunks=8); several as KEY=V,KEY2=V2; a list as "
               "KEY=a,b or KEY=[a,b] (a comma starts a new item only before KEY=)"});
  return o;
}

bool quick_form_without_amount(const Args& args) {
  if (args.value("from") || !args.positionals().empty() || args.value("tokens") || args.value("steps")) return false;
  if (auto set = args.value("set"))
    for (const auto& [key, value] : set_items(*set))
      if (key == "job.tokens" || key == "job.steps" || key == "job.epochs") return false;
  return true;
}

std::string quick_scenario_yaml(const Args& args) {
  std::vector<std::pair<std::string, std::string>> kv;
  std::string model;
  for (const auto& s : shortcuts()) {
    auto v = args.value(s.flag);
    if (!v) continue;
    if (std::string(s.key) == "model") {
      model =
          std::filesystem::path(*v).extension() == ".json" ? "{hf_config: " + yaml_quoted(*v) + "}" : yaml_quoted(*v);
      continue;
    }
    if (std::string(s.key) == "job.lora.targets") {
      kv.emplace_back(s.key, yaml_list("--lora-targets", *v));
      continue;
    }
    kv.emplace_back(s.key, yaml_quoted(*v));
  }
  if (auto set = args.value("set"))
    for (const auto& [key, value] : set_items(*set)) kv.emplace_back(key, yaml_value(key, value));
  // Quick-form defaults: a one-step job is enough for memory; simulate/compare take --tokens.
  const auto has = [&](const std::string& k) {
    return std::any_of(kv.begin(), kv.end(), [&](const auto& p) { return p.first == k; });
  };
  if (!has("job.tokens") && !has("job.steps") && !has("job.epochs")) kv.emplace_back("job.steps", "1");
  std::string yaml = "schema_version: 1\nname: command line\n";
  if (!model.empty()) yaml += "model: " + model + "\n";
  yaml += "job:\n";
  emit(yaml, kv, "job.", 2);
  yaml += "plans:\n  - name: quick\n";
  for (const char* block : {"cluster", "parallel", "offload"}) {
    const std::string prefix = std::string(block) + ".";
    if (std::none_of(kv.begin(), kv.end(), [&](const auto& p) { return p.first.rfind(prefix, 0) == 0; })) continue;
    yaml += "    " + std::string(block) + ":\n";
    emit(yaml, kv, prefix, 6);
  }
  for (const auto& [k, v] : kv) {
    if (k.rfind("job.", 0) == 0 || k.rfind("cluster.", 0) == 0 || k.rfind("parallel.", 0) == 0 ||
        k.rfind("offload.", 0) == 0)
      continue;
    throw UsageError("--set " + k + ": quick-form keys start with job., cluster., parallel. or offload.");
  }
  return yaml;
}

namespace {

// The scenario-text paths one --set KEY stands for in a scenario file with these plans
// (io::yaml_set's paths: dotted, list items by index). A plan's keys (cluster., parallel.,
// offload.) go to every plan; plans.*.K, plans.N.K, plans.NAME.K and plans[NAME].K to the plans
// they select; job.K to the scenario's job and to every plan whose own job block sets K (else
// that plan's value would win and the item would be accepted and ignored); anything else
// (model, cost.mode, constraints.deadline, ...) as it is written, the reader judging it.
std::vector<std::string> set_paths(const std::string& text, const std::string& path, const std::string& key,
                                   const std::vector<std::string>& plan_names) {
  std::vector<std::string> out;
  const auto every_plan = [&](const std::string& rest) {
    for (std::size_t i = 0; i < plan_names.size(); ++i) out.push_back(fmt::format("plans.{}.{}", i, rest));
  };
  for (const char* block : {"cluster.", "parallel.", "offload."})
    if (key.rfind(block, 0) == 0) {
      every_plan(key);
      return out;
    }
  if (key.rfind("plans", 0) == 0 && key.size() > 5 && (key[5] == '.' || key[5] == '[')) {
    std::string selector, rest;
    if (key[5] == '[') {
      const auto close = key.find(']', 6);
      if (close == std::string::npos || close + 1 >= key.size() || key[close + 1] != '.')
        throw UsageError("--set " + key + ": write plans[NAME].KEY");
      selector = key.substr(6, close - 6);
      rest = key.substr(close + 2);
    } else {
      const auto dot = key.find('.', 6);
      if (dot == std::string::npos)
        throw UsageError("--set " + key + ": write plans.SELECTOR.KEY (*, an index or a name)");
      selector = key.substr(6, dot - 6);
      rest = key.substr(dot + 1);
    }
    if (selector == "*") {
      every_plan(rest);
      return out;
    }
    for (std::size_t i = 0; i < plan_names.size(); ++i)
      if (plan_names[i] == selector || selector == std::to_string(i)) {
        out.push_back(fmt::format("plans.{}.{}", i, rest));
        return out;
      }
    throw UsageError(fmt::format("--set {}: no plan '{}' in {}{}; plans: {}", key, selector, path,
                                 did_you_mean(selector, plan_names), join(plan_names, ", ")));
  }
  out.push_back(key);
  if (key.rfind("job.", 0) == 0)
    for (std::size_t i = 0; i < plan_names.size(); ++i) {
      const std::string own = fmt::format("plans.{}.{}", i, key);
      if (io::yaml_value(text, own, path)) out.push_back(own);
    }
  return out;
}

}  // namespace

plan::Scenario apply_set(App& app, const std::string& path, const plan::Scenario& read,
                         const std::vector<std::pair<std::string, std::string>>& items) {
  std::string text = io::read_scenario_text(path);
  std::vector<std::string> names;
  for (const auto& p : read.plans) names.push_back(p.name);
  for (const auto& [key, value] : items)
    for (const auto& at : set_paths(text, path, key, names))
      text = io::yaml_set(text, at, yaml_value(key, value), path);
  // The file read cleanly before the items were applied, so what the reader refuses now is theirs:
  // name the items, not lines of a text the person never saw.
  try {
    return io::parse_scenario(text, path, std::filesystem::path(path).parent_path(), app.zoo(), app.catalog());
  } catch (const InputError& e) {
    std::vector<Diagnostic> ds = e.diagnostics();
    std::vector<std::string> keys;
    for (const auto& item : items) keys.push_back(item.first);
    for (auto& d : ds) d.where = {fmt::format("{} with --set {}", path, join(keys, ",")), 0, 0};
    throw InputError(ds);
  }
}

plan::Scenario load_scenario_file(App& app, const std::string& path) {
  try {
    return io::load_scenario(path, app.zoo(), app.catalog());
  } catch (const InputError& e) {
    // A training config given where a scenario belongs: say how to use it, instead of a list of
    // schema errors about keys a scenario does not have.
    std::optional<io::ConfigFormat> format;
    try {
      format = io::detect_config_format(path);
    } catch (const InputError&) {
    }
    if (!format) throw;
    throw UsageError(
        fmt::format("{} is a {}, not a scenario: `ftplan import {} --gpu G --gpus N [--model M] --out "
                    "scenario.yaml`, or give it with --from (docs/import.md)",
                    path, io::to_string(*format), path));
  }
}

std::vector<io::ImportOverride> import_overrides(const Args& args) {
  std::vector<io::ImportOverride> out;
  const auto scenario_key = [](const std::string& key) {
    for (const char* block : {"cluster.", "parallel.", "offload."})
      if (key.rfind(block, 0) == 0) return "plan." + key;
    if (key == "model" || key.rfind("job.", 0) == 0) return key;
    throw UsageError("--set " + key + ": keys start with job., cluster., parallel. or offload.");
  };
  // A name or a number is written as people write it in a scenario (gpus: 64); anything YAML could
  // read otherwise (true, null, 1:2, text with spaces) stays quoted.
  const auto scalar = [](const std::string& v) {
    static const std::vector<std::string> keywords = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"};
    std::string lower = v;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const bool plain =
        !v.empty() && std::isalnum(static_cast<unsigned char>(v[0])) &&
        std::all_of(
            v.begin(), v.end(),
            [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }) &&
        std::find(keywords.begin(), keywords.end(), lower) == keywords.end();
    return plain ? v : yaml_quoted(v);
  };
  for (const auto& s : shortcuts()) {
    auto v = args.value(s.flag);
    if (!v) continue;
    std::string value = scalar(*v);
    if (std::string(s.key) == "model" && std::filesystem::path(*v).extension() == ".json")
      value = "{hf_config: " + yaml_quoted(std::filesystem::absolute(*v).string()) + "}";
    if (std::string(s.key) == "job.lora.targets") value = yaml_list("--lora-targets", *v);
    out.push_back({scenario_key(s.key), value, fmt::format("command line --{}", s.flag)});
  }
  if (auto set = args.value("set"))
    for (const auto& [key, value] : set_items(*set))
      out.push_back({scenario_key(key), yaml_value(key, value), fmt::format("command line --set {}", key)});
  if (auto config = args.value("model-config")) {
    if (args.value("model")) throw UsageError("--model names the model, --model-config gives its config: one of them");
    out.push_back({"model_config", std::filesystem::absolute(*config).string(), "command line --model-config"});
  }
  return out;
}

std::vector<std::filesystem::path> import_files(const Args& args) {
  std::vector<std::filesystem::path> files;
  if (auto from = args.value("from")) files.emplace_back(*from);
  for (const auto& p : args.positionals()) files.emplace_back(p);
  if (files.empty()) throw UsageError("name at least one configuration file");
  return files;
}

void print_ignored(const io::ImportedScenario& imported) {
  if (imported.ignored.empty()) return;
  fmt::print(stderr, "note: {} key(s) of the configs are not used (ftplan import writes them into the scenario):\n",
             imported.ignored.size());
  for (const auto& i : imported.ignored)
    fmt::print(stderr, "  {}:{}:{}: {}: {}\n", i.where.file, i.where.line, i.where.column, i.key, i.reason);
}

plan::Scenario scenario_from_args(App& app, const Args& args, bool whole_job) {
  plan::Scenario s;
  if (args.value("from")) {
    const io::ImportedScenario imported =
        io::import_configs(import_files(args), import_overrides(args), app.zoo(), &app.catalog());
    // Training configs rarely hold a step count (epochs need the dataset size).
    if (whole_job && imported.one_step_default)
      throw UsageError(
          "compare prices a whole job: the configs give no step count (epochs need the dataset size); "
          "give --tokens N (or --steps N, or --set job.epochs=E)");
    if (app.format() == Format::table) print_ignored(imported);
    s = io::load_imported(imported, std::filesystem::current_path(), app.zoo(), app.catalog());
  } else if (args.value("model-config")) {
    throw UsageError(
        "--model-config goes with --from (training configs) or import; otherwise give --model path/to/config.json");
  } else if (!args.positionals().empty()) {
    if (args.positionals().size() > 1) throw UsageError("one scenario file at a time");
    for (const auto& sc : shortcuts())
      if (args.value(sc.flag))
        throw UsageError(fmt::format("--{} belongs to the quick form (no scenario file)", sc.flag));
    s = load_scenario_file(app, args.positionals()[0]);
    if (auto set = args.value("set")) s = apply_set(app, args.positionals()[0], s, set_items(*set));
  } else {
    if (!args.value("model")) throw UsageError("give a scenario file, or --model and --gpu for the quick form");
    const std::string yaml = quick_scenario_yaml(args);
    try {
      s = io::parse_scenario(yaml, "command line", std::filesystem::current_path(), app.zoo(), app.catalog());
    } catch (const InputError& e) {
      // Positions in generated text mean nothing to a person: keep the key and the message.
      std::vector<Diagnostic> ds = e.diagnostics();
      for (auto& d : ds)
        if (d.where.file == "command line") d.where = {"command line", 0, 0};
      throw InputError(ds);
    }
  }
  // A scenario made for `ftplan plan` may list no plans: say where to take it instead of printing
  // an empty table.
  if (s.plans.empty())
    throw UsageError(s.has_search ? "the scenario lists no plans; its search block is for `ftplan plan " +
                                        args.positionals()[0] + "`"
                                  : std::string("the scenario lists no plans"));
  if (auto only = args.value("plan")) {
    std::vector<plan::Plan> keep;
    std::vector<std::string> names;
    for (auto& p : s.plans) {
      names.push_back(p.name);
      if (p.name == *only) keep.push_back(std::move(p));
    }
    if (keep.empty())
      throw UsageError(fmt::format("no plan '{}' in the scenario{}; plans: {}", *only, did_you_mean(*only, names),
                                   join(names, ", ")));
    s.plans = std::move(keep);
  }
  evaluate::choose_open_knobs(s);  // of the plans the verb evaluates, once
  return s;
}

OptionSpec fidelity_option() {
  return {"fidelity", true,
          "representative (default: one rank per pipeline stage, links loaded with each rank's share) or full "
          "(every rank simulated; up to 1024 GPUs)"};
}

sim::Options simulation_options(const Args& args) {
  sim::Options o;
  if (auto f = args.value("fidelity")) {
    if (*f == "full")
      o.fidelity = sim::Options::Fidelity::full;
    else if (*f != "representative")
      throw UsageError("--fidelity takes 'representative' or 'full'; got '" + *f + "'");
  }
  return o;
}

std::optional<evaluate::Measured> profile_measured(const Args& args, const plan::Plan& plan) {
  const auto path = args.value("profile");
  if (!path) return std::nullopt;
  return evaluate::measured_from_profile(io::load_profile(*path), plan);
}

void print_headline(const App& app, const plan::Scenario& s) {
  if (app.format() != Format::table) return;
  fmt::print("{} ({} params), {} fine-tune\n\n", s.model.display_name,
             ftplan::format_count(static_cast<double>(model::count_params(s.model).total)),
             plan::to_string(s.job.method));
}

void print_rows(const App& app, const plan::Scenario& s, const std::vector<io::Row>& rows, io::Row extra) {
  if (app.format() == Format::csv) {
    fmt::print("{}", io::rows_to_csv(rows));
  } else if (app.format() == Format::json) {
    io::Row top;
    top.set("scenario", s.name);
    top.set("model", s.model.name);
    for (auto& [k, v] : extra.fields) top.set(k, std::move(v));
    fmt::print("{}", io::rows_to_json(rows, "results", kOutputSchemaVersion, top));
  }
}

}  // namespace ftplan::cli
