// `ftplan plan`: search plans for the scenario's model and job; Pareto front and best per constraint.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>

#include <unistd.h>

#include <fmt/format.h>

#include "app.hpp"
#include "common/units.hpp"
#include "io/results.hpp"
#include "io/scenario_io.hpp"
#include "planner/planner.hpp"
#include "present/verdict.hpp"
#include "progress.hpp"
#include "scenario_source.hpp"
#include "table.hpp"

namespace ftplan::cli {

namespace {

// Ctrl-C: the first asks the search to stop and report the plans simulated so far; a second ends
// the process at once (the default action, restored here). std::atomic<bool> is lock-free, so
// storing to it is allowed in a signal handler.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);
extern "C" void on_plan_interrupt(int sig) {
  g_stop.store(true);
  std::signal(sig, SIG_DFL);
}

// Runs the search with a progress bar; Ctrl-C stops it with the plans simulated so far.
planner::Result run_search(const plan::Scenario& s, App& app, int threads, bool quiet) {
  // Layouts examined of those enumerated so far, and plans simulated.
  ProgressBar progress("plan", "layouts", 0, 0, !quiet);
  planner::Control control;
  control.stop = &g_stop;
  control.progress = [&](std::int64_t examined, std::int64_t total, std::int64_t simulated) {
    progress.update(examined, total, fmt::format(", {} simulated", simulated));
  };
  g_stop = false;
  const auto previous = std::signal(SIGINT, on_plan_interrupt);
  planner::Result r = planner::search(s.model, s.job, app.catalog(), s.search, s.constraints, s.cost, threads, control);
  std::signal(SIGINT, previous == SIG_ERR ? SIG_DFL : previous);
  progress.finish(r.examined, fmt::format(", {} simulated", r.simulated));
  if (r.interrupted)
    fmt::print(stderr, "interrupted: {} of {} layouts examined; the best plans among the {} simulated so far follow\n",
               r.examined, r.enumerated, r.simulated);
  return r;
}

// The candidates shown (the Pareto front, or every plan with --all, by job time) and those that
// could not be evaluated.
struct Shown {
  std::vector<int> shown, failed;
};

Shown shown_candidates(const planner::Result& r, bool all) {
  Shown out{r.pareto, {}};
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    if (!r.candidates[i].error.empty())
      out.failed.push_back(static_cast<int>(i));
    else if (all && std::find(r.pareto.begin(), r.pareto.end(), static_cast<int>(i)) == r.pareto.end())
      out.shown.push_back(static_cast<int>(i));
  }
  std::sort(out.shown.begin(), out.shown.end(), [&](int a, int b) {
    return r.candidates[a].evaluation.cost.job_time_s < r.candidates[b].evaluation.cost.job_time_s;
  });
  return out;
}

// --format json or csv: a row per candidate shown and per failed one, and the search's counts
// and best plans at the top.
void print_plan_rows(App& app, const plan::Scenario& s, const planner::Result& r, const Shown& sh) {
  std::vector<io::Row> rows;
  for (int i : sh.shown) {
    const auto& c = r.candidates[i];
    io::Row row = io::cost_row(c.plan, c.evaluation.memory, c.evaluation.step, c.evaluation.power, c.evaluation.cost);
    row.set("pareto", std::find(r.pareto.begin(), r.pareto.end(), i) != r.pareto.end());
    row.set("meets_constraints", c.meets_constraints);
    rows.push_back(std::move(row));
  }
  for (int i : sh.failed) {  // feasible false, infeasible_reason "could not be evaluated: ..."
    const auto& c = r.candidates[i];
    io::Row row = io::cost_row(c.plan, c.evaluation.memory, c.evaluation.step, c.evaluation.power, c.evaluation.cost);
    row.set("pareto", false);
    row.set("meets_constraints", false);
    rows.push_back(std::move(row));
  }
  io::Row top;
  top.set("search.enumerated", r.enumerated);
  top.set("search.invalid", r.invalid);
  top.set("search.duplicates", r.duplicates);
  top.set("search.pruned_memory", r.pruned_memory);
  top.set("search.simulated", r.simulated);
  top.set("search.failed", r.failed);
  top.set("search.examined", r.examined);
  top.set("search.interrupted", r.interrupted);
  const auto name_of = [&](int i) { return i >= 0 ? io::Value(r.candidates[i].plan.name) : io::Value(nullptr); };
  top.set("best.fastest", name_of(r.fastest));
  top.set("best.cheapest", name_of(r.cheapest));
  top.set("best.lowest_peak_power", name_of(r.lowest_power));
  top.set("best.fewest_gpus", name_of(r.fewest_gpus));
  print_rows(app, s, rows, std::move(top));
}

// The table: the search's counts, the candidates shown, those that failed.
void print_plan_table(const plan::Scenario& s, const planner::Result& r, const Shown& sh, bool all) {
  fmt::print(
      "{} — {}: {} layouts{}, {} refused by the plan checks, {} repeat another, {} do not fit, {} simulated{} in "
      "{:.1f} s\n\n",
      s.name, s.model.display_name, r.enumerated,
      r.interrupted ? fmt::format(" ({} examined before the interruption)", r.examined) : std::string(), r.invalid,
      r.duplicates, r.pruned_memory, r.simulated,
      r.failed > 0 ? fmt::format(" ({} could not be evaluated)", r.failed) : std::string(), r.seconds);
  Table t;
  using A = Table::Align;
  t.columns({{all ? "plan" : "Pareto front (job time, $, peak power)", A::left},
             {"job time", A::right},
             {"cost", A::right},
             {"peak power", A::right},
             {"energy", A::right},
             {"tokens/s", A::right},
             {"MFU", A::right},
             {"GPU mem (device)", A::right},
             {"meets", A::left}});
  for (int i : sh.shown) {
    const auto& c = r.candidates[i];
    const auto& e = c.evaluation;
    t.row({c.plan.name, ftplan::format_duration(e.cost.job_time_s), present::cost_text(e.cost),
           fmt::format("{:.1f} kW", e.power.peak_power_w / 1e3), ftplan::format_energy(e.cost.energy_kwh),
           fmt::format("{:.0f}", e.step.tokens_per_s), fmt::format("{:.0f}%", 100 * e.step.mfu),
           ftplan::format_bytes(e.memory.gpu_peak_bytes()), c.meets_constraints ? "yes" : "no"});
  }
  fmt::print("{}\n", t.text());
  if (!sh.failed.empty()) {
    fmt::print("could not be evaluated:\n");
    for (int i : sh.failed) fmt::print("  {}: {}\n", r.candidates[i].plan.name, r.candidates[i].error);
    fmt::print("\n");
  }
}

// The best plan by each measure, within the scenario's constraints.
void print_best(const plan::Scenario& s, const planner::Result& r) {
  const auto& k = s.constraints;
  std::vector<std::string> limits;
  if (k.deadline_s > 0) limits.push_back("deadline " + ftplan::format_duration(k.deadline_s));
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
    fmt::print("  {:<18} {} — {}, {}, {:.1f} kW peak\n", what, r.candidates[i].plan.name,
               ftplan::format_duration(e.cost.job_time_s), present::cost_text(e.cost), e.power.peak_power_w / 1e3);
  };
  line("fastest", r.fastest);
  line("cheapest", r.cheapest);
  line("lowest peak power", r.lowest_power);
  line("fewest GPUs", r.fewest_gpus);
  // Plans that fit but have no price rank after every priced one and meet no budget: say which
  // and why, once per reason (cost::CostReport::unpriced), rather than leave "no price" unexplained.
  std::map<std::string, int> unpriced;
  for (const auto& c : r.candidates)
    if (c.evaluation.feasible() && !c.evaluation.cost.priced()) ++unpriced[c.evaluation.cost.unpriced];
  for (const auto& [why, n] : unpriced)
    fmt::print("  {} {} no price ({}): {}\n", n, n == 1 ? "plan has" : "plans have", why,
               k.budget_usd > 0 ? "none can be held to the budget, so none is among the best"
                                : "they rank after every priced plan on cost");
}

}  // namespace

int cmd_plan(const std::vector<std::string>& argv) {
  auto options = common_options();
  options.push_back({"threads", true, "worker threads (default: all cores)"});
  options.push_back({"all", false, "list every simulated plan, not only the Pareto front"});
  options.push_back({"quiet", false, "no progress on stderr"});
  const Args args(argv, 2, options);
  App app(args);
  if (args.positionals().size() != 1) throw UsageError("usage: ftplan plan SCENARIO (with a `search` block)");
  const plan::Scenario s = io::load_scenario(args.positionals()[0], app.zoo(), app.catalog());
  if (!s.has_search) throw UsageError("the scenario has no `search` block; see docs/scenario-format.md");
  const int threads = parse_threads(args);
  const planner::Result r = run_search(s, app, threads, args.flag("quiet"));
  const int status = r.interrupted ? 128 + SIGINT : 0;
  const Shown sh = shown_candidates(r, args.flag("all"));
  if (app.format() != Format::table) {
    print_plan_rows(app, s, r, sh);
    return status;
  }
  print_plan_table(s, r, sh, args.flag("all"));
  print_best(s, r);
  return status;
}

}  // namespace ftplan::cli
