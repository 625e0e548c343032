// `ftplan compare`: the side-by-side table this project exists for, and its verdict.
#include <fmt/format.h>

#include "app.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "io/results.hpp"
#include "plan/checks.hpp"
#include "present/verdict.hpp"
#include "scenario_source.hpp"
#include "table.hpp"

namespace ftplan::cli {

int cmd_compare(const std::vector<std::string>& argv) {
  auto options = scenario_options();
  options.push_back(fidelity_option());
  const Args args(argv, 2, options);
  App app(args);
  // A comparison prices a whole job: the quick form's one-step default would answer "$0.00".
  if (quick_form_without_amount(args))
    throw UsageError("compare prices a whole job: give --tokens N (or --steps N, or --set job.epochs=E)");
  const plan::Scenario s = scenario_from_args(app, args, /*whole_job=*/true);
  std::vector<evaluate::Evaluation> ev;
  const sim::Options sim_options = simulation_options(args);  // bad options fail before any work
  for (const auto& p : s.plans) {
    const auto measured = profile_measured(args, p);
    ev.push_back(evaluate::evaluate_plan(s.model, p, sim_options, measured ? &*measured : nullptr));
  }
  const std::string verdict = present::verdict(s.plans, ev);
  // The answer in one line, as the GUI heads its window with it (present::answer).
  const std::string answer = present::answer(s.plans, ev, s.constraints);

  if (app.format() != Format::table) {
    std::vector<io::Row> rows;
    for (std::size_t i = 0; i < s.plans.size(); ++i)
      rows.push_back(io::cost_row(s.plans[i], ev[i].memory, ev[i].step, ev[i].power, ev[i].cost));
    io::Row extra;
    extra.set("answer", answer);
    extra.set("verdict", verdict);
    const auto notes = present::advice(s.model, s.plans, ev);
    extra.set("advice", notes.empty() ? io::Value(nullptr) : io::Value(join(notes, " ")));
    const std::string owning = present::ownership(s.plans, ev);
    extra.set("ownership", owning.empty() ? io::Value(nullptr) : io::Value(owning));
    const std::string rent = present::rent_words(s.plans, ev);
    extra.set("rent", rent.empty() ? io::Value(nullptr) : io::Value(rent));
    const std::string bought = present::bom_words(s.plans);
    extra.set("bought", bought.empty() ? io::Value(nullptr) : io::Value(bought));
    print_rows(app, s, rows, std::move(extra));
    return 0;
  }

  // The amount of training as the job gives it: tokens, steps or epochs (one of them).
  const plan::Job& j = s.job;
  const std::string amount = j.tokens > 0 ? ftplan::format_count(static_cast<double>(j.tokens)) + " tokens"
                             : j.steps > 0
                                 ? fmt::format("{} step{}", j.steps, j.steps == 1 ? "" : "s")
                                 : fmt::format("{:g} epoch{} of {} tokens", j.epochs, j.epochs == 1 ? "" : "s",
                                               ftplan::format_count(static_cast<double>(j.dataset_tokens)));
  fmt::print("{} — {} ({} params), {} fine-tune, {} of seq {}\n", s.name, s.model.display_name,
             ftplan::format_count(static_cast<double>(model::count_params(s.model).total)), plan::to_string(j.method),
             amount, j.seq_len);
  // One cost basis for all plans goes in the header; plans that differ get a row of their own.
  const present::Comparison c = present::comparison(s.plans, ev);
  fmt::print("costs: {}\n", c.one_basis ? c.basis : std::string("per plan (the 'costs' row)"));
  fmt::print("answer: {}\n\n", answer);
  Table t;
  using A = Table::Align;
  std::vector<std::pair<std::string, A>> cols = {{"", A::left}};
  for (std::size_t i = 0; i < s.plans.size(); ++i) {
    cols.emplace_back(s.plans[i].name, A::right);
    if (i > 0) cols.emplace_back("vs first", A::right);
  }
  t.columns(cols);
  for (const auto& r : c.rows) {
    std::vector<std::string> cells = {r.name};
    for (std::size_t i = 0; i < s.plans.size(); ++i) {
      cells.push_back(r.cells[i]);
      if (i > 0) cells.push_back(r.vs_first[i]);
    }
    t.row(cells);
  }
  fmt::print("{}\n", t.text());
  for (std::size_t i = 0; i < s.plans.size(); ++i)
    if (!ev[i].feasible()) fmt::print("{}: {}\n", s.plans[i].name, ev[i].reason());
  fmt::print("{}\n", verdict);
  if (const std::string bought = present::bom_words(s.plans); !bought.empty()) fmt::print("{}\n", bought);
  if (const std::string rent = present::rent_words(s.plans, ev); !rent.empty()) fmt::print("{}\n", rent);
  if (const std::string owning = present::ownership(s.plans, ev); !owning.empty()) fmt::print("{}\n", owning);
  for (const auto& line : present::advice(s.model, s.plans, ev)) fmt::print("note: {}\n", line);
  return 0;
}

}  // namespace ftplan::cli
