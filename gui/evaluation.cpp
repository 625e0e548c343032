#include "evaluation.hpp"

#include <algorithm>
#include <chrono>
#include <regex>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/strings.hpp"
#include "io/output_schema.hpp"
#include "io/rows.hpp"
#include "io/scenario_io.hpp"
#include "io/yaml_edit.hpp"
#include "mutants.hpp"
#include "plan/checks.hpp"
#include "present/verdict.hpp"

namespace ftplan::gui {

namespace {

// The line of "name:LINE:COL: ..." (the reader's diagnostics), or 0.
int line_of(const std::string& diagnostic, const std::string& name) {
  if (diagnostic.rfind(name + ":", 0) != 0) return 0;
  std::smatch m;
  const std::string rest = diagnostic.substr(name.size());
  if (std::regex_search(rest, m, std::regex("^:([0-9]+):"))) return std::stoi(m[1].str());
  return 0;
}

// The text read, the knobs applied and checked: into `s`, or false with `out.errors`.
bool read(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
          const model::Zoo& zoo, const hardware::Catalog& catalog, const Overrides& overrides, Outcome& out,
          plan::Scenario& s) {
  try {
    s = io::parse_scenario(text, name, base_dir, zoo, catalog);
  } catch (const InputError& e) {
    // One diagnostic per line of what().
    const std::string all = e.what();
    std::size_t at = 0;
    while (at < all.size()) {
      const std::size_t end = all.find('\n', at);
      const std::string line = all.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (!line.empty()) out.errors.push_back(line);
      if (end == std::string::npos) break;
      at = end + 1;
    }
    for (const auto& d : out.errors) out.error_lines.push_back(line_of(d, name));
    return false;
  } catch (const std::exception& e) {
    out.errors.push_back(e.what());
    out.error_lines.push_back(0);
    return false;
  }
  // The knobs, on every plan (and the scenario's own job, which the verdict's headline reads).
  const auto apply = [&](plan::Job& job) {
    if (overrides.seq_len) job.seq_len = *overrides.seq_len;
    if (overrides.micro_batch) {
      job.micro_batch = *overrides.micro_batch;
      job.micro_batch_auto = false;
    }
    if (overrides.checkpointing) {
      job.checkpointing = *overrides.checkpointing;
      job.checkpointing_auto = false;
    }
    if (overrides.precision) job.precision = *overrides.precision;
  };
  apply(s.job);
  for (auto& p : s.plans) {
    apply(p.job);
  }
  // Knobs left open ('auto'), for the job as the what-ifs make it (the reader leaves them open).
  evaluate::choose_open_knobs(s);
  // The planner chooses micro-batch and checkpointing from its lists: a knob is the only choice.
  if (overrides.micro_batch) s.search.micro_batch = {*overrides.micro_batch};
  if (overrides.checkpointing) s.search.checkpointing = {*overrides.checkpointing};
  if (overrides.any()) {
    // The same checks the reader ran, now on the changed plans.
    for (const auto& f : plan::check_job(s.model, s.job))
      out.errors.push_back(fmt::format("what-if: {}: {}", f.key, f.message));
    for (const auto& p : s.plans)
      for (const auto& f : plan::check_plan(s.model, p))
        out.errors.push_back(fmt::format("what-if, plan '{}': {}: {}", p.name, f.key, f.message));
    out.error_lines.assign(out.errors.size(), 0);
    if (!out.errors.empty()) return false;
  }
  return true;
}

// The scenario as the knobs make it, not evaluated (`scenario` set when it reads clean).
Outcome read_only(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
                  const model::Zoo& zoo, const hardware::Catalog& catalog, const Overrides& overrides) {
  Outcome out;
  plan::Scenario s;
  if (read(text, name, base_dir, zoo, catalog, overrides, out, s)) out.scenario = std::move(s);
  return out;
}

}  // namespace

std::string search_key(const std::string& text, const Overrides& o) {
  std::string key;
  try {
    key = io::yaml_erase(text, "plans");
  } catch (const InputError&) {
    key = text;  // the writer cannot take the plans out: any edit runs the search again
  }
  return key + fmt::format("\n# knobs: {} {} {} {}", o.seq_len.value_or(0), o.micro_batch.value_or(0),
                           o.checkpointing ? plan::to_string(*o.checkpointing) : "-",
                           o.precision ? plan::to_string(*o.precision) : "-");
}

Outcome evaluate(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
                 const model::Zoo& zoo, const hardware::Catalog& catalog, const Overrides& overrides,
                 const std::atomic<bool>* stop, const SearchReuse& reuse) {
  const auto started = std::chrono::steady_clock::now();
  Outcome out;
  plan::Scenario s;
  if (!read(text, name, base_dir, zoo, catalog, overrides, out, s)) return out;
  const auto stopped = [stop] { return stop && stop->load(); };
  std::vector<plan::Plan> as_named;  // a search's picks under their own names, for the answer
  if (s.has_search) {
    // The planner, as `ftplan plan` runs it (the knobs apply to the job it holds fixed).
    planner::Control control;
    control.stop = stop;
    out.search_key = search_key(text, overrides);
    if (reuse.result && reuse.key == out.search_key)
      out.search = reuse.result;
    else
      out.search = std::make_shared<const planner::Result>(
          planner::search(s.model, s.job, catalog, s.search, s.constraints, s.cost, 0, control));
    const planner::Result& r = *out.search;
    if (r.interrupted) {
      out.cancelled = true;
      return out;
    }
    // One plan can be the pick for several constraints: shown once, named for each.
    std::vector<std::pair<int, std::string>> picks;  // candidate, what it was picked for
    for (const auto& [label, index] :
         {std::pair{"fastest", r.fastest}, std::pair{"cheapest", r.cheapest}, std::pair{"lowest power", r.lowest_power},
          std::pair{"fewest GPUs", r.fewest_gpus}}) {
      if (index < 0) continue;
      const auto at =
          std::find_if(picks.begin(), picks.end(), [want = index](const auto& p) { return p.first == want; });
      if (at != picks.end())
        at->second += std::string(", ") + label;
      else
        picks.emplace_back(index, label);
    }
    for (const auto& [index, labels] : picks) {
      as_named.push_back(r.candidates[static_cast<std::size_t>(index)].plan);
      const planner::Candidate& c = r.candidates[static_cast<std::size_t>(index)];
      out.plans.push_back(c.plan);
      out.plans.back().name = labels + ": " + c.plan.name;
      out.evaluations.push_back(c.evaluation);
    }
    out.text_plan.assign(out.plans.size(), -1);
    // The text's own plans beside the picks (a layout clicked in the search is added there).
    for (std::size_t i = 0; i < s.plans.size(); ++i) {
      if (stopped()) {
        out.cancelled = true;
        return out;
      }
      out.plans.push_back(s.plans[i]);
      as_named.push_back(s.plans[i]);
      out.evaluations.push_back(evaluate::evaluate_plan(s.model, s.plans[i]));
      out.text_plan.push_back(static_cast<int>(i));
    }
    out.verdict = fmt::format(
        "{} layouts: {} refused by the checks, {} repeat another, {} do not fit, {} simulated in {:.1f} s; "
        "{} on the Pareto front of job time, dollars and peak power. ",
        r.enumerated, r.invalid, r.duplicates, r.pruned_memory, r.simulated, r.seconds, r.pareto.size());
    out.verdict += out.plans.empty() ? std::string("No plan meets the constraints.")
                                     : present::verdict(out.plans, out.evaluations);
  } else {
    for (const auto& p : s.plans) {
      if (stopped()) {
        out.cancelled = true;
        return out;
      }
      out.evaluations.push_back(evaluate::evaluate_plan(s.model, p));
    }
    out.plans = s.plans;
    for (std::size_t i = 0; i < s.plans.size(); ++i) out.text_plan.push_back(static_cast<int>(i));
    out.verdict = present::verdict(s.plans, out.evaluations);
    out.ownership = present::ownership(s.plans, out.evaluations);
  }
  out.rent = present::rent_words(out.plans, out.evaluations);
  out.bought = present::bom_words(out.plans);
  out.advice = present::advice(s.model, out.plans, out.evaluations);
  out.comparison = present::comparison(out.plans, out.evaluations);
  out.answer = out.plans.empty() ? std::string("No plan meets the constraints.")
                                 : present::answer(out.search ? as_named : out.plans, out.evaluations, s.constraints);
  for (std::size_t i = 0; i < out.plans.size(); ++i)
    out.fixes.push_back(out.evaluations[i].memory.fits ? std::vector<footprint::FitChange>{}
                                                       : footprint::what_would_fit(s.model, out.plans[i]));
  out.scenario = std::move(s);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

namespace {

std::vector<io::Row> result_rows(const Outcome& o) {
  std::vector<io::Row> rows;
  for (std::size_t i = 0; i < o.plans.size(); ++i) {
    const evaluate::Evaluation& e = o.evaluations[i];
    rows.push_back(io::cost_row(o.plans[i], e.memory, e.step, e.power, e.cost));
  }
  return rows;
}

}  // namespace

KnobEdit with_knobs(const std::string& text, const std::string& name, const std::filesystem::path& base_dir,
                    const model::Zoo& zoo, const hardware::Catalog& catalog, const Overrides& o) {
  KnobEdit out;
  std::vector<std::pair<std::string, std::string>> keys;  // key, value as the reader spells it
  if (o.seq_len) keys.emplace_back("seq_len", std::to_string(*o.seq_len));
  if (o.micro_batch) keys.emplace_back("micro_batch", std::to_string(*o.micro_batch));
  if (o.checkpointing) keys.emplace_back("activation_checkpointing", plan::to_string(*o.checkpointing));
  if (o.precision) keys.emplace_back("precision", plan::to_string(*o.precision));
  if (keys.empty()) {
    out.problem = "every knob is 'as written': nothing to write";
    return out;
  }
  // Each value replaced on its line (comments kept) or added to the job block (io::yaml_set).
  std::string edited = text;
  try {
    for (const auto& [key, value] : keys) edited = io::yaml_set(edited, "job." + key, value, name);
  } catch (const InputError& e) {
    out.problem = e.what();
    return out;
  }
  // Read back: each plan must now run what the knobs made of it.
  const Outcome before = read_only(text, name, base_dir, zoo, catalog, o);
  const Outcome after = read_only(edited, name, base_dir, zoo, catalog, {});
  if (!after.scenario || !before.scenario) {
    out.problem = after.errors.empty() ? std::string("the edited text does not read") : after.errors.front();
    return out;
  }
  for (std::size_t i = 0; i < before.scenario->plans.size(); ++i) {
    const plan::Job& want = before.scenario->plans[i].job;
    const plan::Job& got = after.scenario->plans[i].job;
    if (want.seq_len != got.seq_len || want.micro_batch != got.micro_batch || want.checkpointing != got.checkpointing ||
        want.precision != got.precision) {
      const auto said = [](const plan::Job& j) {
        return fmt::format("seq_len {}, micro_batch {}, activation_checkpointing {}, precision {}", j.seq_len,
                           j.micro_batch, plan::to_string(j.checkpointing), plan::to_string(j.precision));
      };
      out.problem = fmt::format(
          "read back, plan '{}' would run {} where the knobs make it {}: it sets those keys itself; "
          "change them there by hand",
          before.scenario->plans[i].name, said(got), said(want));
      return out;
    }
  }
  out.text = std::move(edited);
  return out;
}

std::string results_json(const Outcome& o) {
  if (!o.scenario) return "";
  io::Row top;
  top.set("scenario", o.scenario->name);
  top.set("model", o.scenario->model.name);
  top.set("answer", o.answer);
  top.set("verdict", o.verdict);
  // As `ftplan compare --format json` writes them: null where there is nothing to say.
  top.set("advice", o.advice.empty() || mutant("json_export_without_advice") ? io::Value(nullptr)
                                                                             : io::Value(join(o.advice, " ")));
  top.set("ownership", o.ownership.empty() ? io::Value(nullptr) : io::Value(o.ownership));
  top.set("rent", o.rent.empty() ? io::Value(nullptr) : io::Value(o.rent));
  top.set("bought", o.bought.empty() ? io::Value(nullptr) : io::Value(o.bought));
  return io::rows_to_json(result_rows(o), "results", io::kOutputSchemaVersion, top);
}

std::string results_csv(const Outcome& o) { return o.scenario ? io::rows_to_csv(result_rows(o)) : std::string(); }

std::string new_scenario_text(const NewScenario& s) {
  const bool hf = s.model.find('/') != std::string::npos || s.model.ends_with(".json");
  // A cluster of `count` GPUs or nodes; with a preset that places state on a tier nodes may lack
  // (CXL memory), two of that tier's devices in its node too.
  const auto preset = value_named<plan::OffloadPreset>(s.offload).value_or(plan::OffloadPreset::none);
  std::string devices;
  plan::for_each_device_kind([&](const auto& kind) {
    const auto it = s.tier_devices.find(kind.key);
    if (kind.tier && !plan::tier_info(*kind.tier).always && plan::preset_places_on(preset, *kind.tier) &&
        it != s.tier_devices.end())
      devices += fmt::format(", {}: [{{{}: {}, count: 2}}]", kind.key, kind.item, it->second);
  });
  const auto cluster_of = [&](int count, bool offloads) {
    const std::string extra = offloads ? devices : std::string();
    return s.node.empty() ? fmt::format("{{gpu: {}, gpus: {}{}}}", s.gpu, count, extra)
                          : fmt::format("{{node: {}, nodes: {}{}}}", s.node, count, extra);
  };
  const std::string cluster = cluster_of(s.count, !s.compare_tiered);
  const std::string where = fmt::format("{} x {}", s.count, s.node.empty() ? s.gpu : s.node);
  std::string t = fmt::format(
      "# Written by ftplan-gui's new-scenario form: edit any line, the window evaluates as you type\n"
      "# (docs/scenario-format.md lists every key).\n"
      "schema_version: 1\n"
      "name: \"{} {} on {}\"\n"
      "model: {}\n"
      "job:\n"
      "  method: {}          # full | lora | qlora\n"
      "  seq_len: {}\n"
      "  tokens: {}          # or steps: N, or epochs: N with dataset_tokens\n"
      "  micro_batch: auto   # the fastest that fits (footprint + simulation)\n"
      "  activation_checkpointing: auto\n"
      "plans:\n"
      "  - name: \"A {}\"\n"
      "    cluster: {}\n",
      s.model, s.method, where, hf ? fmt::format("{{hf_config: {}}}", s.model) : s.model, s.method, s.seq_len, s.tokens,
      where, cluster);
  // A preset's lines: the state offloads run under DeepSpeed, which they describe (ZeRO-Offload on
  // ZeRO-2's partitioned optimizer, ZeRO-Infinity and aiDAPTIV+ on ZeRO-3's streamed parameters:
  // docs/tiered-memory.md); activation offload under any framework. The CXL preset's plan also
  // needs expanders in its node (written into its cluster above).
  const auto offload_lines = [&] {
    if (s.offload == "none") return std::string();
    std::string lines = fmt::format("    offload: {{preset: {}}}\n", s.offload);
    if (s.offload == "zero-offload" || s.offload == "zero-offload-cxl")
      lines += "    parallel: {zero: 2}\n    job: {framework: deepspeed}\n";
    if (s.offload == "zero-infinity" || s.offload == "aidaptiv")
      lines += "    parallel: {zero: 3}\n    job: {framework: deepspeed}\n";
    return lines;
  };
  if (!s.compare_tiered) return t + offload_lines();
  if (s.offload == "none") return t;
  // The tiered alternative beside it: one GPU (or one node) of the same kind, the state in host
  // DRAM or flash.
  return t + fmt::format("  - name: \"B tiered: {}\"\n    cluster: {}\n", s.offload, cluster_of(1, true)) +
         offload_lines();
}

}  // namespace ftplan::gui
