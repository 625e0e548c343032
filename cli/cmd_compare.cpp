// `ftplan compare`: the side-by-side table this project exists for, and its verdict.
#include <fmt/format.h>

#include "app.hpp"
#include "plan/checks.hpp"
#include "common/strings.hpp"
#include "io/results.hpp"
#include "io/units.hpp"
#include "io/verdict.hpp"
#include "scenario_source.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

std::string ratio(double base, double x) {
  if (base <= 0 || x <= 0) return "";
  // A ratio to a near-zero base (e.g. idle GPU time of a plan that never idles) says nothing.
  if (x / base > 999 || base / x > 999) return "";
  return fmt::format("{:.2f}x", x / base);
}

// How a plan is paid for, in words: "rented, billed per second" or "owned, 5-year life at 70% use, ...".
std::string cost_basis(const plan::CostSpec& c) {
  if (c.mode == plan::CostSpec::Mode::rent)
    return std::string("rented, billed per ") + (c.billing == plan::CostSpec::Billing::per_hour ? "hour" : "second");
  return fmt::format("owned, {:.0f}-year life at {:.0f}% use, ${:.3f}/kWh x PUE {:.2f}", c.lifetime_years, 100 * c.utilization,
                     c.energy_usd_per_kwh, c.pue);
}

// Dollars to the cent below $100 (a small job's cost is not "$1"), whole dollars above.
std::string money(double usd) { return usd < 100 ? fmt::format("${:.2f}", usd) : fmt::format("${:.0f}", usd); }

}  // namespace

int cmd_compare(const std::vector<std::string>& argv) {
  auto options = scenario_options();
  options.push_back(fidelity_option());
  const Args args(argv, 2, options);
  App app(args);
  const plan::Scenario s = scenario_from_args(app, args);
  std::vector<evaluate::Evaluation> ev;
  const sim::Options sim_options = simulation_options(args);  // bad options fail before any work
  for (const auto& p : s.plans) {
    const auto measured = profile_measured(args, p);
    ev.push_back(evaluate::evaluate_plan(s.model, p, sim_options, measured ? &*measured : nullptr));
  }
  const std::string verdict = io::verdict(s.plans, ev);

  if (app.format() != Format::table) {
    std::vector<io::Row> rows;
    for (std::size_t i = 0; i < s.plans.size(); ++i)
      rows.push_back(io::cost_row(s.plans[i], ev[i].memory, ev[i].step, ev[i].power, ev[i].cost));
    io::Row extra;
    extra.set("verdict", verdict);
    const auto notes = io::advice(s.model, s.plans, ev);
    extra.set("advice", notes.empty() ? io::Value(nullptr) : io::Value(join(notes, " ")));
    print_rows(app, s, rows, std::move(extra));
    return 0;
  }

  // The amount of training as the job gives it: tokens, steps or epochs (one of them).
  const plan::Job& j = s.job;
  const std::string amount = j.tokens > 0  ? io::format_count(static_cast<double>(j.tokens)) + " tokens"
                             : j.steps > 0 ? fmt::format("{} step{}", j.steps, j.steps == 1 ? "" : "s")
                                           : fmt::format("{:g} epoch{} of {} tokens", j.epochs, j.epochs == 1 ? "" : "s",
                                                         io::format_count(static_cast<double>(j.dataset_tokens)));
  fmt::print("{} — {} ({} params), {} fine-tune, {} of seq {}\n", s.name, s.model.display_name,
             io::format_count(static_cast<double>(model::count_params(s.model).total)), plan::to_string(j.method), amount,
             j.seq_len);
  // One cost basis for all plans goes in the header; plans that differ get a row of their own.
  bool one_basis = true;
  for (const auto& p : s.plans) one_basis = one_basis && cost_basis(p.cost) == cost_basis(s.plans.front().cost);
  fmt::print("costs: {}\n\n", one_basis ? cost_basis(s.plans.front().cost) : std::string("per plan (the 'costs' row)"));
  Table t;
  using A = Table::Align;
  std::vector<std::pair<std::string, A>> cols = {{"", A::left}};
  for (std::size_t i = 0; i < s.plans.size(); ++i) {
    cols.emplace_back(s.plans[i].name, A::right);
    if (i > 0) cols.emplace_back("vs first", A::right);
  }
  t.columns(cols);
  const auto row = [&](const std::string& name, auto value_of, auto number_of) {
    std::vector<std::string> cells = {name};
    for (std::size_t i = 0; i < s.plans.size(); ++i) {
      cells.push_back(value_of(i));
      if (i > 0) cells.push_back(ratio(number_of(0), number_of(i)));
    }
    t.row(cells);
  };
  // Rows of what a plan costs when it runs: "-" and no ratio for a plan that does not fit.
  const auto run_row = [&](const std::string& name, auto value_of, auto number_of) {
    row(name, [&](std::size_t i) { return ev[i].feasible() ? std::string(value_of(i)) : std::string("-"); },
        [&](std::size_t i) { return ev[i].feasible() && ev[0].feasible() ? static_cast<double>(number_of(i)) : 0.0; });
  };
  const auto none = [](std::size_t) { return 0.0; };
  if (!one_basis)
    row("costs", [&](std::size_t i) { return s.plans[i].cost.mode == plan::CostSpec::Mode::rent ? std::string("rented") : std::string("owned"); },
        none);
  row("fits?", [&](std::size_t i) { return ev[i].feasible() ? std::string("yes") : std::string("NO"); }, none);
  row("micro-batch", [&](std::size_t i) {
        const auto& j = s.plans[i].job;
        return fmt::format("{} x {} step{}{}", j.micro_batch, plan::grad_accumulation_steps(s.plans[i]),
                           plan::grad_accumulation_steps(s.plans[i]) == 1 ? "" : "s", j.micro_batch_auto ? " (auto)" : "");
      },
      none);
  row("activation checkpointing", [&](std::size_t i) {
        const auto& j = s.plans[i].job;
        return std::string(plan::to_string(j.checkpointing)) + (j.checkpointing_auto ? " (auto)" : "");
      },
      none);
  row("GPUs", [&](std::size_t i) { return fmt::format("{} x {}", s.plans[i].cluster.gpus(), s.plans[i].cluster.gpu.name); },
      [&](std::size_t i) { return static_cast<double>(s.plans[i].cluster.gpus()); });
  row("peak GPU memory", [&](std::size_t i) { return io::format_bytes(ev[i].memory.gpu_peak_bytes); },
      [&](std::size_t i) { return ev[i].memory.gpu_peak_bytes; });
  run_row("job time", [&](std::size_t i) { return io::format_duration(ev[i].cost.job_time_s); },
      [&](std::size_t i) { return ev[i].cost.job_time_s; });
  run_row("tokens/s", [&](std::size_t i) { return fmt::format("{:.0f}", ev[i].step.tokens_per_s); },
      [&](std::size_t i) { return ev[i].step.tokens_per_s; });
  run_row("MFU", [&](std::size_t i) { return fmt::format("{:.1f}%", 100 * ev[i].step.mfu); },
      [&](std::size_t i) { return ev[i].step.mfu; });
  run_row("peak power", [&](std::size_t i) { return fmt::format("{:.1f} kW", ev[i].power.peak_power_w / 1e3); },
      [&](std::size_t i) { return ev[i].power.peak_power_w; });
  run_row("energy (facility)", [&](std::size_t i) { return fmt::format("{:.1f} kWh", ev[i].cost.energy_kwh); },
      [&](std::size_t i) { return ev[i].cost.energy_kwh; });
  run_row("cost", [&](std::size_t i) { return money(ev[i].cost.cost_usd); },
      [&](std::size_t i) { return ev[i].cost.cost_usd; });
  run_row("  hardware", [&](std::size_t i) { return money(ev[i].cost.hardware_usd); },
      [&](std::size_t i) { return ev[i].cost.hardware_usd; });
  run_row("  energy", [&](std::size_t i) { return money(ev[i].cost.energy_usd); },
      [&](std::size_t i) { return ev[i].cost.energy_usd; });
  run_row("  flash wear", [&](std::size_t i) { return money(ev[i].cost.wear_usd); },
      [&](std::size_t i) { return ev[i].cost.wear_usd; });
  run_row("$ per million tokens", [&](std::size_t i) { return fmt::format("${:.2f}", ev[i].cost.usd_per_million_tokens); },
      [&](std::size_t i) { return ev[i].cost.usd_per_million_tokens; });
  run_row("flash written (wear)",
      [&](std::size_t i) {
        return ev[i].cost.nvme_written_bytes > 0
                   ? fmt::format("{:.1f} TB ({:.2f}%)", ev[i].cost.nvme_written_bytes / 1e12, 100 * ev[i].cost.wear_fraction)
                   : std::string("-");
      },
      [&](std::size_t i) { return ev[i].cost.nvme_written_bytes; });
  run_row("idle GPU time",
      [&](std::size_t i) { return fmt::format("{:.1f} GPU-h", ev[i].power.gpu_idle_s_per_step * ev[i].steps / 3600); },
      [&](std::size_t i) { return ev[i].power.gpu_idle_s_per_step * ev[i].steps; });
  fmt::print("{}\n", t.text());
  for (std::size_t i = 0; i < s.plans.size(); ++i)
    if (!ev[i].feasible()) fmt::print("{}: {}\n", s.plans[i].name, ev[i].reason());
  fmt::print("{}\n", verdict);
  for (const auto& line : io::advice(s.model, s.plans, ev)) fmt::print("note: {}\n", line);
  return 0;
}

}  // namespace ftplan::cli
