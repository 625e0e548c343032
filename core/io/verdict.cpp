#include "io/verdict.hpp"

#include <cmath>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "footprint/footprint.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"

namespace ftplan::io {

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

std::string verdict(const std::vector<plan::Plan>& plans, const std::vector<evaluate::Evaluation>& ev) {
  if (plans.empty()) return "";
  std::vector<std::string> sentences;
  std::vector<std::string> infeasible;
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (!ev[i].feasible()) infeasible.push_back(fmt::format("{} does not fit ({})", plans[i].name, ev[i].reason()));
  const evaluate::Evaluation& a = ev[0];
  if (!a.feasible()) {
    sentences.push_back(fmt::format("The reference plan {} does not run as planned, so the others are compared with its "
                                    "estimates anyway.",
                                    plans[0].name));
  }
  for (std::size_t i = 1; i < plans.size(); ++i) {
    const evaluate::Evaluation& b = ev[i];
    if (!b.feasible()) continue;
    const double ga = plans[0].cluster.gpus(), gb = plans[i].cluster.gpus();
    std::vector<std::string> parts;
    if (ga != gb) parts.push_back(fmt::format("needs {} GPUs", ratio_words(ga, gb, "fewer", "more")));
    const std::string peak = ratio_words(a.power.peak_power_w, b.power.peak_power_w, "lower", "higher");
    if (!peak.empty()) parts.push_back(peak == "about the same" ? "draws about the same peak power"
                                                                : fmt::format("has {} peak power", peak));
    const std::string dollars = ratio_words(a.cost.cost_usd, b.cost.cost_usd, "less", "more");
    if (!dollars.empty()) parts.push_back(dollars == "about the same" ? "costs about the same" : fmt::format("costs {}", dollars));
    const std::string energy = ratio_words(a.cost.energy_kwh, b.cost.energy_kwh, "less", "more");
    if (!energy.empty()) parts.push_back(energy == "about the same" ? "uses about the same energy"
                                                                    : fmt::format("uses {} energy", energy));
    const double ta = a.cost.job_time_s, tb = b.cost.job_time_s;
    std::string time;
    if (ta > 0 && tb > 0) {
      if (std::abs(tb / ta - 1) < 0.05) time = "takes about as long";
      else if (tb > ta) time = fmt::format("takes {:.1f}x longer", tb / ta);
      else time = fmt::format("finishes {:.1f}x sooner", ta / tb);
    }
    std::string s = fmt::format("{} ", plans[i].name);
    for (std::size_t k = 0; k < parts.size(); ++k) s += (k ? ", " : "") + parts[k];
    if (!time.empty()) s += (parts.empty() ? "" : ", and ") + time;
    sentences.push_back(s + fmt::format(" than {}.", plans[0].name));
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
    if (!e.feasible() || e.memory.gpu_capacity_bytes <= 0) continue;
    if (e.memory.gpu_peak_bytes > 0.5 * e.memory.gpu_capacity_bytes) continue;
    const int largest = footprint::max_micro_batch(model, p, 64);
    if (largest <= p.job.micro_batch) continue;
    const std::int64_t accumulation = plan::grad_accumulation_steps(p);
    std::string line = fmt::format("{} uses {:.1f} of {:.1f} GiB per GPU at micro-batch {} ({} accumulation steps); micro-batches up to {} fit",
                                   p.name, e.memory.gpu_peak_bytes / (1u << 30), e.memory.gpu_capacity_bytes / (1u << 30),
                                   p.job.micro_batch, accumulation, largest);
    // ZeRO-3 and offloaded parameters are gathered or fetched again for every micro-batch.
    const bool restreams = accumulation > 1 && (plan::sharding_in_effect(p).zero == 3 || p.offload.params != plan::Tier::gpu);
    if (restreams)
      line += fmt::format(", and its parameters are {} {} times a step", p.offload.params == plan::Tier::nvme  ? "read from flash"
                          : p.offload.params == plan::Tier::cpu ? "copied from host DRAM"
                                                                : "gathered",
                          accumulation);
    if (restreams && e.step.bound_by.rfind("link ", 0) == 0)
      line += fmt::format(" (the step is bound by {})", e.step.bound_by);
    out.push_back(line + ": a larger micro-batch may change this comparison.");
  }
  return out;
}

}  // namespace ftplan::io
