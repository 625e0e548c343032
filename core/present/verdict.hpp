// Presentation (issue 44: its own area, above evaluate): what a comparison of evaluated plans says
// in words and cells, for `ftplan compare` and `plan` and the GUI alike: the verdict (each plan
// against the first, the trade-off stated honestly: GPUs, peak power, cost, time, energy, which
// plans do not fit), the advice, the comparison table, the one-line answer, money and its basis.
#pragma once

#include <string>
#include <vector>

#include "evaluate/evaluate.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"
#include "plan/search_spec.hpp"

namespace ftplan::present {

std::string verdict(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& evaluations);

// What a comparison hinges on that the scenario left at a setting: one line per feasible plan whose
// micro-batch leaves more than half of its GPUs' memory unused while a larger one fits, saying
// how large, and whether its step re-streams the parameters once per micro-batch (ZeRO-3 or
// offloaded parameters with accumulation steps) and is bound by that traffic's link.
std::vector<std::string> advice(const model::ModelSpec& model, const std::vector<plan::Plan>& plans,
                                const std::vector<evaluate::Evaluation>& evaluations);

// "4x fewer", "2.3x more", "63% lower", "41% less": how b compares with a.
std::string ratio_words(double a, double b, const char* less_word, const char* more_word);

// Dollars to the cent below $100 (a small job's cost is not "$1"), whole dollars above.
std::string money(double usd);
// A plan's total as money(), or "no price" where the catalog cannot price it (CostReport::unpriced).
std::string cost_text(const cost::CostReport& c);

// How a plan is paid for, in words: "rented, billed per second" or "owned, 5-year life at 70% use, ...".
std::string cost_basis(const plan::CostSpec& cost);

// The comparison table `ftplan compare` prints and the GUI shows, cell by cell: one row per
// figure, one cell per plan, and each plan after the first against the first ("1.66x"; empty when
// a ratio says nothing). Figures of a run (time, power, dollars) are "-" for a plan that does not fit.
struct Comparison {
  struct Row {
    std::string name;                   // "job time"; a cost part is indented: "  hardware"
    std::vector<std::string> cells;     // one per plan
    std::vector<std::string> vs_first;  // one per plan; the first's is ""
    std::vector<double> values;         // the figure behind each cell (0 where none), for charts and deltas
  };
  bool one_basis = true;  // every plan pays the same way (then `basis` says how; else a "costs" row does)
  std::string basis;      // cost_basis of the first plan
  std::vector<Row> rows;
};
Comparison comparison(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& evaluations);

// "deadline 24.0 h, budget $500": the constraints that are set, in words ("" when none is).
std::string constraint_words(const plan::Constraints& constraints);

// The answer in one line: the cheapest plan that meets the constraints, with its dollars (and
// their basis) and time, and how each other plan compares with it or why it is out:
// "Cheapest within deadline 24.0 h: A, $82.78, 51.7 min (rented, billed per second); B is 1.66x
// the cost and 49.4x the time." `ftplan sweep`'s cheapest_plan is the same choice.
std::string answer(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& evaluations,
                   const plan::Constraints& constraints);

// Owning the plans for a number of these jobs a year (cost::cheapest_to_own): which owned, priced
// plan that fits is cheapest over which range, the clusters bought as the demand needs. "" unless
// two or more plans are owned, priced and fit.
std::string ownership(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& evaluations);
// Where each rented plan's hourly rate comes from and what it leaves out (cost::rent_basis), one
// sentence for the comparison: "Rent: A: ...; B: ...". "" when no plan is rented and priced.
std::string rent_words(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& evaluations);
// What each plan's capex buys (cost::bill_of_materials), one sentence for the comparison:
// "Bought (bill of materials): A: 4 x NVIDIA DGX H100 at $300,000 = $1,200,000; B: ...". "" when
// no plan has a bill.
std::string bom_words(const std::vector<plan::Plan>& plans);

}  // namespace ftplan::present
