// Predicts the tensor/pipeline-parallel throughput rows of the published measurements
// (Narayanan et al. 2021, Table 1: GPT 1.7B-1T on 32-3072 A100s with Megatron-LM), comparing
// hardware TFLOP/s per GPU (the paper counts recompute, its eq. 3). The trend across rows must
// come out of the simulation: the Spearman rank correlation of predicted and measured is checked
// along with the median error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "published.hpp"
#include "sim/simulate.hpp"
#include "tests/unit/test_support.hpp"

using namespace ftplan;

namespace {

bool model_parallel(const validation::PublishedRow& r) {
  const std::string& p = r.at("parallelism");
  return p.find("TP ") != std::string::npos && p.find("TP 1 x PP 1") == std::string::npos &&
         r.at("measured_metric").rfind("tflops_per_gpu", 0) == 0;
}

// Ranks with ties sharing their mean rank (Spearman 1904).
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * static_cast<double>(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}

// Pearson correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

}  // namespace

TEST_CASE("Spearman rank correlation handles ties") {
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == doctest::Approx(1.0));
  CHECK(spearman({1, 2, 3, 4}, {40, 30, 20, 10}) == doctest::Approx(-1.0));
  CHECK(ranks({5, 1, 5, 3}) == std::vector<double>{3.5, 1, 3.5, 2});
}

TEST_CASE("Megatron-LM scaling (Narayanan et al. 2021 Table 1) is predicted: median error and trend") {
  const auto rows = validation::read_published((test::data_dir() / "validation" / "published_public.csv").string());
  std::vector<double> measured, predicted, errors;
  double worst_shortcut = 0;
  std::string table = fmt::format("{:>4}  {:<22} {:<22} {:>9} {:>10} {:>8} {:>7} {:>7}\n", "line", "model", "layout",
                                  "measured", "predicted", "error", "bubble", "MFU");
  for (const auto& row : rows) {
    if (!model_parallel(row)) continue;
    const auto mapped = validation::scenario_for(row, rows);
    REQUIRE_MESSAGE(mapped.scenario.has_value(), "line ", row.line);
    const auto& s = *mapped.scenario;
    sim::Options options;
    options.max_micro_batches = 0;
    const auto r = sim::simulate_step(s.model, s.plans.front(), options);
    REQUIRE_MESSAGE(r.ok, r.problem);
    const double m = std::stod(row.at("measured_value"));
    const double p = r.hardware_tflops_per_gpu;
    // Every verb's default (the steady-state shortcut, the shortened pipeline) stays within 0.5%
    // of the whole simulation on every row (performance issue).
    const auto fast = sim::simulate_step(s.model, s.plans.front());
    REQUIRE_MESSAGE(fast.ok, fast.problem);
    const double shortcut = (fast.step_time_s - r.step_time_s) / r.step_time_s;
    CHECK_MESSAGE(std::abs(shortcut) < 0.005, "line ", row.line, ": shortcut ", 100 * shortcut, "%");
    worst_shortcut = std::max(worst_shortcut, std::abs(shortcut));
    measured.push_back(m);
    predicted.push_back(p);
    errors.push_back(std::abs(p - m) / m);
    table += fmt::format("{:>4}  {:<22} {:<22} {:>9.0f} {:>10.1f} {:>+7.1f}% {:>6.1f}% {:>6.1f}%\n", row.line,
                         row.at("model").substr(0, 22), row.at("parallelism").substr(0, 22), m, p, 100 * (p - m) / m,
                         100 * r.idle_s / r.step_time_s, 100 * r.mfu);
  }
  REQUIRE(measured.size() >= 9);
  std::vector<double> sorted = errors;
  std::sort(sorted.begin(), sorted.end());
  const double median =
      sorted.size() % 2 ? sorted[sorted.size() / 2] : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  const double rho = spearman(measured, predicted);
  MESSAGE("\n", table,
          fmt::format("median absolute error {:.1f}% over {} rows; Spearman rank correlation {:.2f}; "
                      "default shortcuts within {:.3f}% of the whole simulation",
                      100 * median, measured.size(), rho, 100 * worst_shortcut));
  CHECK(median < 0.15);
  CHECK(rho >= 0.7);
}
