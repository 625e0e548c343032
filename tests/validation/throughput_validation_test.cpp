// Predicts the throughput rows of the published measurements that run data parallelism (FSDP,
// ZeRO, DDP, or one GPU), comparing like with like: tokens/s per GPU with tokens/s per GPU,
// samples/s with samples/s, and TFLOP/s per GPU counted the source's way (Narayanan et al.
// 2021 count recompute, their eq. 3: compared with hardware TFLOP/s). The published MFU is an
// outcome to predict, never an input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "published.hpp"
#include "sim/simulate.hpp"
#include "tests/unit/test_support.hpp"

using namespace ftplan;

namespace {

bool is_throughput_row(const validation::PublishedRow& r) {
  const std::string& m = r.at("measured_metric");
  return m.rfind("tokens_per_s", 0) == 0 || m.rfind("samples_per_s", 0) == 0 || m.rfind("tflops_per_gpu", 0) == 0;
}

// Data-parallel layouts only (tensor/pipeline rows belong to the parallelism validation).
bool data_parallel(const validation::PublishedRow& r) {
  const std::string& p = r.at("parallelism");
  return p.find("TP ") == std::string::npos || p.find("TP 1 x PP 1") != std::string::npos;
}

// Median of sorted values.
double median_of(const std::vector<double>& v) {
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

TEST_CASE("published data-parallel throughput is predicted within 15% median error") {
  const auto rows = validation::read_published((test::data_dir() / "validation" / "published_public.csv").string());
  std::vector<double> errors, signed_errors;
  std::string table = fmt::format("{:>4}  {:<44} {:>22} {:>10} {:>10} {:>8} {:>7}\n", "line", "case", "metric",
                                  "measured", "predicted", "error", "MFU");
  std::string unsaid;
  for (const auto& row : rows) {
    if (!is_throughput_row(row) || !data_parallel(row)) continue;
    const std::string label = fmt::format("{} | {} | {}", row.at("model").substr(0, 18),
                                          row.at("gpu_type").substr(0, 12), row.at("parallelism").substr(0, 10));
    const auto mapped = validation::scenario_for(row, rows);
    if (!mapped.scenario) {
      unsaid += fmt::format("  line {}: {} — leaves unsaid: {}\n", row.line, label, fmt::join(mapped.missing, ", "));
      continue;
    }
    const auto& s = *mapped.scenario;
    const auto r = sim::simulate_step(s.model, s.plans.front());
    const std::string& metric = row.at("measured_metric");
    const double measured = std::stod(row.at("measured_value"));
    double pred = 0;
    if (metric.rfind("tokens_per_s", 0) == 0)
      pred = r.tokens_per_s_per_gpu;
    else if (metric.rfind("samples_per_s", 0) == 0)
      pred = r.tokens_per_s / static_cast<double>(s.job.seq_len);
    else
      pred = r.hardware_tflops_per_gpu;
    const double err = (pred - measured) / measured;
    errors.push_back(std::abs(err));
    signed_errors.push_back(err);
    table += fmt::format("{:>4}  {:<44} {:>22} {:>10.1f} {:>10.1f} {:>+7.1f}% {:>6.1f}%\n", row.line, label,
                         metric.substr(0, 22), measured, pred, 100 * err, 100 * r.mfu);
  }
  std::vector<double> sorted_signed = signed_errors;
  std::sort(sorted_signed.begin(), sorted_signed.end());
  std::sort(errors.begin(), errors.end());
  REQUIRE(errors.size() >= 10);
  const double median = median_of(errors);
  MESSAGE("\n", table, "median absolute error ", fmt::format("{:.1f}%", 100 * median), " (median signed error ",
          fmt::format("{:+.1f}%", 100 * median_of(sorted_signed)), ") over ", errors.size(),
          " rows\nrows without enough configuration:\n", unsaid);
  // The goal: a median under 15%. (The model is still fast on most rows, by a median
  // +13%: docs/simulation.md lists what it leaves out.)
  CHECK(median < 0.15);
}
