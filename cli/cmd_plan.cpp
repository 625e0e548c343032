// `ftplan plan`: search plans for the scenario's model and job; Pareto front and best per constraint.
#include <algorithm>

#include <fmt/format.h>

#include "app.hpp"
#include "io/results.hpp"
#include "io/scenario_io.hpp"
#include "io/units.hpp"
#include "planner/planner.hpp"
#include "scenario_source.hpp"
#include "table.hpp"

namespace ftplan::cli {

int cmd_plan(const std::vector<std::string>& argv) {
  auto options = common_options();
  options.push_back({"threads", true, "worker threads (default: all cores)"});
  options.push_back({"all", false, "list every simulated plan, not only the Pareto front"});
  const Args args(argv, 2, options);
  App app(args);
  if (args.positionals().size() != 1) throw UsageError("usage: ftplan plan SCENARIO (with a `search` block)");
  const plan::Scenario s = io::load_scenario(args.positionals()[0], app.zoo(), app.catalog());
  if (!s.has_search) throw UsageError("the scenario has no `search` block; see docs/scenario-format.md");
  int threads = 0;
  if (auto t = args.value("threads")) {
    try {
      threads = std::stoi(*t);
    } catch (const std::exception&) {
      threads = -1;
    }
    if (threads <= 0) throw UsageError("--threads takes a positive whole number");
  }
  const planner::Result r = planner::search(s.model, s.job, app.catalog(), s.search, s.constraints, s.cost, threads);

  std::vector<int> shown = r.pareto;
  if (args.flag("all")) {
    shown.clear();
    for (std::size_t i = 0; i < r.candidates.size(); ++i) shown.push_back(static_cast<int>(i));
  }
  std::sort(shown.begin(), shown.end(), [&](int a, int b) {
    return r.candidates[a].evaluation.cost.job_time_s < r.candidates[b].evaluation.cost.job_time_s;
  });

  if (app.format() != Format::table) {
    std::vector<io::Row> rows;
    for (int i : shown) {
      const auto& c = r.candidates[i];
      io::Row row = io::cost_row(c.plan, c.evaluation.memory, c.evaluation.step, c.evaluation.power, c.evaluation.cost);
      row.set("pareto", std::find(r.pareto.begin(), r.pareto.end(), i) != r.pareto.end());
      row.set("meets_constraints", c.meets_constraints);
      rows.push_back(std::move(row));
    }
    io::Row top;
    top.set("search.enumerated", r.enumerated);
    top.set("search.invalid", r.invalid);
    top.set("search.duplicates", r.duplicates);
    top.set("search.pruned_memory", r.pruned_memory);
    top.set("search.simulated", r.simulated);
    const auto name_of = [&](int i) { return i >= 0 ? io::Value(r.candidates[i].plan.name) : io::Value(nullptr); };
    top.set("best.fastest", name_of(r.fastest));
    top.set("best.cheapest", name_of(r.cheapest));
    top.set("best.lowest_peak_power", name_of(r.lowest_power));
    top.set("best.fewest_gpus", name_of(r.fewest_gpus));
    print_rows(app, s, rows, std::move(top));
    return 0;
  }

  fmt::print("{} — {}: {} layouts, {} refused by the plan checks, {} repeat another, {} do not fit, {} simulated in {:.1f} s\n\n",
             s.name, s.model.display_name, r.enumerated, r.invalid, r.duplicates, r.pruned_memory, r.simulated, r.seconds);
  Table t;
  using A = Table::Align;
  t.columns({{args.flag("all") ? "plan" : "Pareto front (job time, $, peak power)", A::left}, {"job time", A::right},
             {"cost", A::right}, {"peak power", A::right}, {"energy", A::right}, {"tokens/s", A::right},
             {"MFU", A::right}, {"GPU mem", A::right}, {"meets", A::left}});
  for (int i : shown) {
    const auto& c = r.candidates[i];
    const auto& e = c.evaluation;
    t.row({c.plan.name, io::format_duration(e.cost.job_time_s), fmt::format("${:.0f}", e.cost.cost_usd),
           fmt::format("{:.1f} kW", e.power.peak_power_w / 1e3), fmt::format("{:.0f} kWh", e.cost.energy_kwh),
           fmt::format("{:.0f}", e.step.tokens_per_s), fmt::format("{:.0f}%", 100 * e.step.mfu),
           io::format_bytes(e.memory.gpu_peak_bytes), c.meets_constraints ? "yes" : "no"});
  }
  fmt::print("{}\n", t.text());
  const auto& k = s.constraints;
  std::vector<std::string> limits;
  if (k.deadline_s > 0) limits.push_back("deadline " + io::format_duration(k.deadline_s));
  if (k.budget_usd > 0) limits.push_back(fmt::format("budget ${:.0f}", k.budget_usd));
  if (k.peak_power_w > 0) limits.push_back(fmt::format("peak power {:.1f} kW", k.peak_power_w / 1e3));
  if (k.max_gpus > 0) limits.push_back(fmt::format("at most {} GPUs", k.max_gpus));
  fmt::print("best plans{}:\n", limits.empty() ? "" : fmt::format(" within {}", fmt::join(limits, ", ")));
  const auto line = [&](const char* what, int i) {
    if (i < 0) {
      fmt::print("  {:<18} none meets the constraints\n", what);
      return;
    }
    const auto& e = r.candidates[i].evaluation;
    fmt::print("  {:<18} {} — {}, ${:.0f}, {:.1f} kW peak\n", what, r.candidates[i].plan.name,
               io::format_duration(e.cost.job_time_s), e.cost.cost_usd, e.power.peak_power_w / 1e3);
  };
  line("fastest", r.fastest);
  line("cheapest", r.cheapest);
  line("lowest peak power", r.lowest_power);
  line("fewest GPUs", r.fewest_gpus);
  return 0;
}

}  // namespace ftplan::cli
