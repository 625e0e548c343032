#include "present/verdict.hpp"

#include <cmath>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "common/units.hpp"
#include "footprint/footprint.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"

namespace ftplan::present {

std::string ratio_words(double a, double b, const char* less_word, const char* more_word) {
  if (a <= 0 || b <= 0) return "";
  const double r = b / a;
  if (std::abs(r - 1) < 0.05) return "about the same";
  if (r < 1) {
    // Big reductions read better as "4x fewer", small ones as a percentage.
    if (r <= 0.5) return fmt::format("{:.1f}x {}", 1 / r, less_word);
    return fmt::format("{:.0f}% {}", 100 * (1 - r), less_word);
  }
  if (r >= 1.5) return fmt::format("{:.1f}x {}", r, more_word);
  return fmt::format("{:.0f}% {}", 100 * (r - 1), more_word);
}

std::string money(double usd) { return format_money(usd); }

std::string cost_text(const cost::CostReport& c) { return c.priced() ? money(c.cost_usd) : std::string("no price"); }

std::string cost_basis(const plan::CostSpec& c) {
  if (c.mode == plan::CostSpec::Mode::rent)
    return std::string("rented, billed per ") + (c.billing == plan::CostSpec::Billing::per_hour ? "hour" : "second");
  return fmt::format("owned, {:.0f}-year life at {:.0f}% use, ${:.3f}/kWh x PUE {:.2f}", c.lifetime_years,
                     100 * c.utilization, c.energy_usd_per_kwh, c.pue);
}

namespace {

// "1.66x": x against base, for the "vs first" column.
std::string ratio(double base, double x) {
  if (base <= 0 || x <= 0) return "";
  // A ratio to a near-zero base (e.g. idle GPU time of a plan that never idles) says nothing.
  if (x / base > 999 || base / x > 999) return "";
  return fmt::format("{:.2f}x", x / base);
}

// "0.46x", "1.7x", "49x": a ratio read in a sentence, two significant figures.
std::string times(double base, double x) {
  const double r = x / base;
  return r < 1 ? fmt::format("{:.2f}x", r) : r < 10 ? fmt::format("{:.1f}x", r) : fmt::format("{:.0f}x", r);
}

}  // namespace

namespace {

// A row of what a plan costs when it runs: its cell's text and the figure behind it.
struct RunRow {
  const char* name;
  std::string (*text)(const evaluate::Evaluation& e);
  double (*value)(const evaluate::Evaluation& e);
  bool dollars = false;  // a figure in dollars: "no price" for a plan the catalog cannot price
};

// The comparison's rows of a plan's run, in the table's order (after the plans' settings).
const RunRow kRunRows[] = {
    {"job time", [](const evaluate::Evaluation& e) { return format_duration(e.cost.job_time_s); },
     [](const evaluate::Evaluation& e) { return e.cost.job_time_s; }},
    {"tokens/s", [](const evaluate::Evaluation& e) { return fmt::format("{:.0f}", e.step.tokens_per_s); },
     [](const evaluate::Evaluation& e) { return e.step.tokens_per_s; }},
    {"MFU", [](const evaluate::Evaluation& e) { return fmt::format("{:.1f}%", 100 * e.step.mfu); },
     [](const evaluate::Evaluation& e) { return e.step.mfu; }},
    {"peak power", [](const evaluate::Evaluation& e) { return fmt::format("{:.1f} kW", e.power.peak_power_w / 1e3); },
     [](const evaluate::Evaluation& e) { return e.power.peak_power_w; }},
    {"energy (facility)", [](const evaluate::Evaluation& e) { return format_energy(e.cost.energy_kwh); },
     [](const evaluate::Evaluation& e) { return e.cost.energy_kwh; }},
    {"cost", [](const evaluate::Evaluation& e) { return money(e.cost.cost_usd); },
     [](const evaluate::Evaluation& e) { return e.cost.cost_usd; }, true},
    {"  hardware", [](const evaluate::Evaluation& e) { return money(e.cost.hardware_usd); },
     [](const evaluate::Evaluation& e) { return e.cost.hardware_usd; }, true},
    {"  energy", [](const evaluate::Evaluation& e) { return money(e.cost.energy_usd); },
     [](const evaluate::Evaluation& e) { return e.cost.energy_usd; }, true},
    {"  flash wear", [](const evaluate::Evaluation& e) { return money(e.cost.wear_usd); },
     [](const evaluate::Evaluation& e) { return e.cost.wear_usd; }, true},
    {"$ per million tokens",
     [](const evaluate::Evaluation& e) { return fmt::format("${:.2f}", e.cost.usd_per_million_tokens); },
     [](const evaluate::Evaluation& e) { return e.cost.usd_per_million_tokens; }, true},
    {"flash written (wear)",
     [](const evaluate::Evaluation& e) {
       return e.cost.nvme_written_bytes > 0
                  ? fmt::format("{:.1f} TB ({:.2f}%)", e.cost.nvme_written_bytes / 1e12, 100 * e.cost.wear_fraction)
                  : std::string("-");
     },
     [](const evaluate::Evaluation& e) { return e.cost.nvme_written_bytes; }},
    {"GPU time not computing",
     [](const evaluate::Evaluation& e) {
       return fmt::format("{:.1f} GPU-h", e.power.gpu_idle_s_per_step * e.steps / 3600);
     },
     [](const evaluate::Evaluation& e) { return e.power.gpu_idle_s_per_step * e.steps; }},
};

// Builds a comparison's rows: a cell and a figure per plan, and each figure against the first's.
class RowBuilder {
 public:
  RowBuilder(Comparison& t, std::size_t plans) : t_(t), n_(plans) {}
  template <class Text, class Value>
  void row(const std::string& name, const Text& text_of, const Value& value_of) {
    Comparison::Row r;
    r.name = name;
    for (std::size_t i = 0; i < n_; ++i) {
      r.cells.push_back(text_of(i));
      r.values.push_back(static_cast<double>(value_of(i)));
      r.vs_first.push_back(i > 0 ? ratio(r.values[0], r.values[i]) : std::string());
    }
    t_.rows.push_back(std::move(r));
  }
  // A row without figures (a setting, not a quantity).
  template <class Text>
  void words(const std::string& name, const Text& text_of) {
    row(name, text_of, [](std::size_t) { return 0.0; });
  }

 private:
  Comparison& t_;
  std::size_t n_;
};

// The plans' settings: how each pays (when they differ), fits, micro-batch, checkpointing, GPUs
// and peak memory.
void setting_rows(RowBuilder& rows, bool one_basis, const std::vector<plan::Plan>& plans,
                  const std::vector<evaluate::Evaluation>& ev) {
  if (!one_basis)
    rows.words("costs", [&](std::size_t i) {
      return plans[i].cost.mode == plan::CostSpec::Mode::rent ? std::string("rented") : std::string("owned");
    });
  rows.words("fits?", [&](std::size_t i) { return ev[i].feasible() ? std::string("yes") : std::string("NO"); });
  rows.words("micro-batch", [&](std::size_t i) {
    const auto& j = plans[i].job;
    const std::int64_t steps = plan::grad_accumulation_steps(plans[i]);
    return fmt::format("{} x {} step{}{}", j.micro_batch, steps, steps == 1 ? "" : "s",
                       j.micro_batch_auto ? " (auto)" : "");
  });
  rows.words("activation checkpointing", [&](std::size_t i) {
    const auto& j = plans[i].job;
    return std::string(plan::to_string(j.checkpointing)) + (j.checkpointing_auto ? " (auto)" : "");
  });
  rows.row(
      "GPUs", [&](std::size_t i) { return fmt::format("{} x {}", plans[i].cluster.gpus(), plans[i].cluster.gpu.name); },
      [&](std::size_t i) { return static_cast<double>(plans[i].cluster.gpus()); });
  rows.row(
      "peak GPU memory (device, judged for fit)",
      [&](std::size_t i) { return format_bytes(ev[i].memory.gpu_peak_bytes()); },
      [&](std::size_t i) { return ev[i].memory.gpu_peak_bytes(); });
  // What each plan's hardware costs to buy (its bill of materials: cost::bill_of_materials), owned
  // or rented: the first claim of a tiered plan is fewer GPUs for less capital.
  std::vector<cost::Bom> boms;
  for (const auto& p : plans) boms.push_back(cost::bill_of_materials(p));
  const auto priced = [&](std::size_t i) { return boms[i].missing.empty(); };
  rows.row(
      "capex (hardware bought)",
      [&](std::size_t i) { return priced(i) ? money(boms[i].capex_usd) : std::string("no price"); },
      [&](std::size_t i) { return priced(0) && priced(i) ? boms[i].capex_usd : 0.0; });
}

}  // namespace

Comparison comparison(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& ev) {
  Comparison t;
  if (plans.empty()) return t;
  t.basis = cost_basis(plans.front().cost);
  for (const auto& p : plans) t.one_basis = t.one_basis && cost_basis(p.cost) == t.basis;
  RowBuilder rows(t, plans.size());
  setting_rows(rows, t.one_basis, plans, ev);
  // Rows of what a plan costs when it runs: "-" and no ratio for a plan that does not fit.
  for (const RunRow& run : kRunRows)
    rows.row(
        run.name,
        [&](std::size_t i) {
          if (!ev[i].feasible()) return std::string("-");
          return run.dollars && !ev[i].cost.priced() ? std::string("no price") : run.text(ev[i]);
        },
        [&](std::size_t i) {
          const auto counts = [&](std::size_t j) { return ev[j].feasible() && (!run.dollars || ev[j].cost.priced()); };
          return counts(i) && counts(0) ? run.value(ev[i]) : 0.0;
        });
  return t;
}

std::string constraint_words(const plan::Constraints& k) {
  std::vector<std::string> limits;
  if (k.deadline_s > 0) limits.push_back("deadline " + format_duration(k.deadline_s));
  if (k.budget_usd > 0) limits.push_back(fmt::format("budget ${:.0f}", k.budget_usd));
  if (k.peak_power_w > 0) limits.push_back(fmt::format("peak power {:.1f} kW", k.peak_power_w / 1e3));
  if (k.max_gpus > 0) limits.push_back(fmt::format("at most {} GPUs", k.max_gpus));
  return join(limits, ", ");
}

namespace {

// Why a plan that fits misses the constraints: "3.5 d, past the deadline", ...
std::string missed(const plan::Constraints& k, const plan::Plan& p, const evaluate::Evaluation& e) {
  std::vector<std::string> why;
  if (k.deadline_s > 0 && e.cost.job_time_s > k.deadline_s)
    why.push_back(format_duration(e.cost.job_time_s) + ", past the deadline");
  if (k.budget_usd > 0 && !e.cost.priced()) why.push_back("no price to hold to the budget: " + e.cost.unpriced);
  if (k.budget_usd > 0 && e.cost.priced() && e.cost.cost_usd > k.budget_usd)
    why.push_back(money(e.cost.cost_usd) + ", over the budget");
  if (k.peak_power_w > 0 && e.power.peak_power_w > k.peak_power_w)
    why.push_back(fmt::format("{:.1f} kW peak, over the power limit", e.power.peak_power_w / 1e3));
  if (k.max_gpus > 0 && p.cluster.gpus() > k.max_gpus)
    why.push_back(fmt::format("{} GPUs, over the limit", p.cluster.gpus()));
  return join(why, "; ");
}

}  // namespace

std::string answer(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& ev,
                   const plan::Constraints& k) {
  if (plans.empty()) return "";
  const std::string limits = constraint_words(k);
  // Only priced plans are ranked by cost; the others are named with what their price lacks.
  int best = -1;
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (evaluate::meets_constraints(k, plans[i], ev[i]) && ev[i].cost.priced() &&
        (best < 0 || ev[i].cost.cost_usd < ev[static_cast<std::size_t>(best)].cost.cost_usd))
      best = static_cast<int>(i);
  std::vector<std::string> others;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (static_cast<int>(i) == best) continue;
    const evaluate::Evaluation& e = ev[i];
    if (!e.feasible()) {
      others.push_back(plans[i].name + " does not fit");
      continue;
    }
    if (!e.cost.priced()) {
      others.push_back(fmt::format("{} is left out: {}", plans[i].name, e.cost.unpriced));
      continue;
    }
    const std::string out = missed(k, plans[i], e);
    if (best < 0) {
      others.push_back(fmt::format("{}: {}", plans[i].name, out));
      continue;
    }
    const evaluate::Evaluation& w = ev[static_cast<std::size_t>(best)];
    std::string line = plans[i].name + " is ";
    if (w.cost.cost_usd > 0 && e.cost.cost_usd > 0) line += times(w.cost.cost_usd, e.cost.cost_usd) + " the cost";
    if (w.cost.job_time_s > 0 && e.cost.job_time_s > 0)
      line += " and " + times(w.cost.job_time_s, e.cost.job_time_s) + " the time";
    if (!out.empty()) line += " (" + out + ")";
    others.push_back(line);
  }
  if (best < 0) {
    // Without constraints, what stops every plan is that none fits or none has a price.
    const bool none_priced =
        std::none_of(ev.begin(), ev.end(), [](const evaluate::Evaluation& e) { return e.cost.priced(); });
    const char* what = !limits.empty() ? "No plan meets the constraints"
                       : none_priced   ? "No plan has a price to rank it by"
                                       : "No plan fits";
    return fmt::format("{}{}: {}.", what, limits.empty() ? "" : " (" + limits + ")", join(others, "; "));
  }
  const plan::Plan& p = plans[static_cast<std::size_t>(best)];
  const evaluate::Evaluation& w = ev[static_cast<std::size_t>(best)];
  std::string s = fmt::format("Cheapest{}: {}, {}, {} ({})", limits.empty() ? "" : " within " + limits, p.name,
                              money(w.cost.cost_usd), format_duration(w.cost.job_time_s), cost_basis(p.cost));
  if (!others.empty()) s += "; " + join(others, "; ");
  return s + ".";
}

std::string rent_words(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& ev) {
  // Plans rented alike are named together: "A, C: ...".
  std::vector<std::pair<std::string, std::vector<std::string>>> bases;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (!ev[i].feasible() || !ev[i].cost.priced()) continue;
    const std::string b = cost::rent_basis(plans[i], plans[i].cost);
    if (b.empty()) continue;
    auto it = std::find_if(bases.begin(), bases.end(), [&](const auto& x) { return x.first == b; });
    if (it == bases.end()) it = bases.insert(bases.end(), {b, {}});
    it->second.push_back(plans[i].name);
  }
  std::vector<std::string> parts;
  for (const auto& [b, names] : bases) parts.push_back(plans.size() > 1 ? join(names, ", ") + ": " + b : b);
  return parts.empty() ? "" : "Rent: " + join(parts, "; ") + ".";
}

std::string ownership(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& ev) {
  std::vector<std::size_t> which;
  std::vector<cost::OwnedPlan> owned;
  double fastest = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const cost::CostReport& c = ev[i].cost;
    if (plans[i].cost.mode != plan::CostSpec::Mode::own || !ev[i].feasible() || !c.priced() || c.job_time_s <= 0)
      continue;
    which.push_back(i);
    owned.push_back({cost::capex_usd(plans[i]), c.job_time_s, c.energy_usd + c.wear_usd, plans[i].cost.lifetime_years,
                     plans[i].cost.utilization});
    fastest = std::max(fastest, cost::owned_jobs_per_cluster_year(owned.back()));
  }
  if (owned.size() < 2) return "";
  // Up to four clusters of the fastest plan's yearly capacity (past it every plan buys clusters in
  // proportion and the order settles), at least 10 jobs, at most a million.
  const auto max_jobs = static_cast<long long>(std::clamp(std::ceil(4 * fastest), 10.0, 1e6));
  const std::vector<cost::OwnedRange> ranges = cost::cheapest_to_own(owned, max_jobs);
  std::vector<std::string> parts;
  constexpr std::size_t kShown = 6;
  for (std::size_t r = 0; r < ranges.size() && r < kShown; ++r) {
    const cost::OwnedRange& x = ranges[r];
    const std::string& name = plans[which[x.plan]].name;
    const double bill = cost::owned_usd_per_year(owned[x.plan], static_cast<double>(x.to));
    const int clusters = cost::owned_clusters(owned[x.plan], static_cast<double>(x.to));
    const std::string span = ranges.size() == 1       ? fmt::format("at every demand up to {} jobs a year", x.to)
                             : r + 1 == ranges.size() ? fmt::format("from {} jobs a year on", x.from)
                             : x.from == x.to         ? fmt::format("at {} jobs a year", x.from)
                                                      : fmt::format("for {}-{} jobs a year", x.from, x.to);
    // A plan on a slice of a node buys slices (its share of the node's price): say so, as a
    // "cluster" of one GPU of a 4-GPU workstation read as a whole machine.
    const plan::Cluster& c = plans[which[x.plan]].cluster;
    const std::string unit = c.node_share() < 1 ? fmt::format("{}-GPU share{} of a {}-GPU node", c.gpus_per_node,
                                                              clusters == 1 ? "" : "s", c.node.gpus)
                                                : std::string(clusters == 1 ? "cluster" : "clusters");
    parts.push_back(fmt::format("{} {} ({} a year at {}, {} {})", name, span, money(bill), x.to, clusters, unit));
  }
  const std::string more = ranges.size() > kShown ? fmt::format(" (and {} changes more up to {} jobs a year)",
                                                                ranges.size() - kShown, max_jobs)
                                                  : std::string();
  const plan::CostSpec& spec = plans[which[0]].cost;
  return fmt::format(
      "Owned for a number of these jobs a year (clusters, or shares of a node, bought as the demand needs, each busy "
      "at most {:.0f}% "
      "of the year, written off over {:g} years, plus each job's energy and flash wear), the cheapest is {}{}.",
      100 * spec.utilization, spec.lifetime_years, join(parts, "; then "), more);
}

std::string bom_words(const std::vector<plan::Plan>& plans) {
  std::vector<std::string> parts;
  for (const auto& p : plans) {
    const cost::Bom bom = cost::bill_of_materials(p);
    if (bom.lines.empty()) continue;
    parts.push_back(
        fmt::format("{}: {}{}", p.name, cost::bom_text(bom),
                    bom.missing.empty() ? fmt::format(" = {}", money(bom.capex_usd)) : std::string(" (no capex)")));
  }
  return parts.empty() ? "" : "Bought (bill of materials): " + join(parts, "; ") + ".";
}

std::string verdict(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& ev) {
  if (plans.empty()) return "";
  std::vector<std::string> sentences;
  std::vector<std::string> infeasible;
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (!ev[i].feasible()) infeasible.push_back(fmt::format("{} does not fit ({})", plans[i].name, ev[i].reason()));
  const evaluate::Evaluation& a = ev[0];
  const cost::Bom ba = cost::bill_of_materials(plans[0]);
  if (!a.feasible()) {
    sentences.push_back(
        fmt::format("The reference plan {} does not run as planned, so the others are compared with its "
                    "estimates anyway.",
                    plans[0].name));
  }
  for (std::size_t i = 1; i < plans.size(); ++i) {
    const evaluate::Evaluation& b = ev[i];
    if (!b.feasible()) continue;
    const double ga = plans[0].cluster.gpus(), gb = plans[i].cluster.gpus();
    std::vector<std::string> parts;
    if (ga != gb) parts.push_back(fmt::format("needs {} GPUs", ratio_words(ga, gb, "fewer", "more")));
    const cost::Bom bb = cost::bill_of_materials(plans[i]);
    const std::string capex =
        ba.missing.empty() && bb.missing.empty() ? ratio_words(ba.capex_usd, bb.capex_usd, "less", "more") : "";
    if (!capex.empty())
      parts.push_back(capex == "about the same" ? "has about the same capex" : "has " + capex + " capex");
    const std::string peak = ratio_words(a.power.peak_power_w, b.power.peak_power_w, "lower", "higher");
    if (!peak.empty())
      parts.push_back(peak == "about the same" ? "draws about the same peak power"
                                               : fmt::format("has {} peak power", peak));
    const std::string dollars =
        a.cost.priced() && b.cost.priced() ? ratio_words(a.cost.cost_usd, b.cost.cost_usd, "less", "more") : "";
    if (!dollars.empty())
      parts.push_back(dollars == "about the same" ? "costs about the same" : fmt::format("costs {}", dollars));
    const std::string energy = ratio_words(a.cost.energy_kwh, b.cost.energy_kwh, "less", "more");
    if (!energy.empty())
      parts.push_back(energy == "about the same" ? "uses about the same energy"
                                                 : fmt::format("uses {} energy", energy));
    const double ta = a.cost.job_time_s, tb = b.cost.job_time_s;
    std::string time;
    if (ta > 0 && tb > 0) {
      if (std::abs(tb / ta - 1) < 0.05)
        time = "takes about as long";
      else if (tb > ta)
        time = fmt::format("takes {:.1f}x longer", tb / ta);
      else
        time = fmt::format("finishes {:.1f}x sooner", ta / tb);
    }
    // The reference first, so that "about the same" and "as long" read as well as "more" and "longer".
    std::string s = fmt::format("Against {}, {} ", plans[0].name, plans[i].name);
    for (std::size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
    if (!time.empty()) s += (parts.empty() ? "" : ", and ") + time;
    if (!parts.empty() || !time.empty()) sentences.push_back(s + ".");
  }
  if (!infeasible.empty()) sentences.push_back(join(infeasible, "; ") + ".");
  return join(sentences, " ");
}

std::vector<std::string> advice(const model::ModelSpec& model, const std::vector<plan::Plan>& plans,
                                const std::vector<evaluate::Evaluation>& ev) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < plans.size() && i < ev.size(); ++i) {
    const plan::Plan& p = plans[i];
    const evaluate::Evaluation& e = ev[i];
    if (!e.feasible() || e.memory.gpu_capacity_bytes() <= 0) continue;
    if (e.memory.gpu_peak_bytes() > 0.5 * e.memory.gpu_capacity_bytes()) continue;
    const int largest = footprint::max_micro_batch(model, p, 64);
    if (largest <= p.job.micro_batch) continue;
    const std::int64_t accumulation = plan::grad_accumulation_steps(p);
    std::string line = fmt::format(
        "{} uses {:.1f} of {:.1f} GiB per GPU at micro-batch {} ({} accumulation steps); micro-batches up to {} fit",
        p.name, e.memory.gpu_peak_bytes() / (1u << 30), e.memory.gpu_capacity_bytes() / (1u << 30), p.job.micro_batch,
        accumulation, largest);
    // ZeRO-3 and offloaded parameters are gathered or fetched again for every micro-batch (not
    // FSDP2 inside pipeline stages: gathered once a step, plan::ShardingInEffect::gathered_for_step).
    const plan::ShardingInEffect in_effect = plan::sharding_in_effect(p);
    const bool restreams = accumulation > 1 && ((in_effect.zero == 3 && !in_effect.gathered_for_step) ||
                                                p.offload.params != plan::Tier::gpu);
    if (restreams)
      line += fmt::format(", and its parameters are {} {} times a step",
                          p.offload.params == plan::Tier::nvme ? "read from flash"
                          : plan::host_memory(p.offload.params)
                              ? "copied from " + std::string(plan::tier_info(p.offload.params).label)
                              : std::string("gathered"),
                          accumulation);
    if (restreams && e.step.bound_by.rfind("link ", 0) == 0)
      line += fmt::format(" (the step is bound by {})", e.step.bound_by);
    out.push_back(line + ": a larger micro-batch may change this comparison.");
  }
  return out;
}

}  // namespace ftplan::present
