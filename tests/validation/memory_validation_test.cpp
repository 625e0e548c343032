// Predicts every memory row of the published measurements that names its GPU and configuration,
// compares with the kind of memory the source measured, prints the table and checks the median
// error. Rows that leave the configuration unsaid are listed with what is missing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "footprint/footprint.hpp"
#include "published.hpp"
#include "tests/unit/test_support.hpp"

using namespace ftplan;
using validation::MemoryKind;

namespace {

bool is_memory_row(const validation::PublishedRow& r) {
  const std::string& m = r.at("measured_metric");
  return m.find("mem") != std::string::npos || m.find("fits_in") != std::string::npos;
}

double predicted(const footprint::Footprint& f, MemoryKind k) {
  switch (k) {
    case MemoryKind::allocated: return f.gpu_allocated_peak_bytes;
    case MemoryKind::reserved: return f.gpu_reserved_peak_bytes;
    case MemoryKind::device: return f.gpu_peak_bytes();
  }
  return 0;
}

}  // namespace

TEST_CASE("published GPU memory measurements are predicted within 10% median error") {
  const auto rows = validation::read_published((test::data_dir() / "validation" / "published_public.csv").string());
  std::vector<double> errors;
  std::string table = fmt::format("{:>4}  {:<46} {:>9} {:>10} {:>10} {:>8}\n", "line", "case", "kind", "measured",
                                  "predicted", "error");
  std::string unsaid;
  int outcomes = 0;
  for (const auto& row : rows) {
    if (!is_memory_row(row)) continue;
    const std::string label = fmt::format("{} | {} | {}", row.at("model").substr(0, 22),
                                          row.at("gpu_type").substr(0, 10), row.at("peft").substr(0, 10));
    if (row.at("measured_metric").find("fits_in") != std::string::npos) {
      // An outcome ("OOM"): even the smallest job (micro-batch 1, 128 tokens) must not fit.
      validation::PublishedRow smallest = row;
      smallest.col["seq_len"] = "128";
      smallest.col["micro_batch"] = "1";
      smallest.col["precision"] = smallest.at("precision").empty() ? "fp32" : smallest.at("precision");
      smallest.col["act_ckpt"] = "on";
      const auto mapped = validation::scenario_for(smallest, rows);
      if (!mapped.scenario) {
        unsaid += fmt::format("  line {}: {} — leaves unsaid: {}\n", row.line, label, fmt::join(mapped.missing, ", "));
        continue;
      }
      const auto f = footprint::footprint(mapped.scenario->model, mapped.scenario->plans.front());
      table += fmt::format("{:>4}  {:<46} {:>9} {:>10} {:>10} {:>8}\n", row.line, label, "outcome",
                           row.at("measured_value"), f.fits ? "fits" : "OOM", f.fits ? "WRONG" : "ok");
      CHECK_MESSAGE(!f.fits, "line ", row.line, " is published as OOM");
      ++outcomes;
      continue;
    }
    const auto mapped = validation::scenario_for(row, rows);
    if (!mapped.scenario) {
      unsaid += fmt::format("  line {}: {} — leaves unsaid: {}\n", row.line, label, fmt::join(mapped.missing, ", "));
      continue;
    }
    const auto f = footprint::footprint(mapped.scenario->model, mapped.scenario->plans.front());
    const MemoryKind kind = validation::memory_kind(row);
    const double measured = validation::measured_bytes(row), pred = predicted(f, kind);
    const double err = (pred - measured) / measured;
    errors.push_back(std::abs(err));
    table += fmt::format("{:>4}  {:<46} {:>9} {:>8.2f}Gi {:>8.2f}Gi {:>+7.1f}%\n", row.line, label,
                         validation::to_string(kind), measured / (1u << 30), pred / (1u << 30), 100 * err);
  }
  std::sort(errors.begin(), errors.end());
  REQUIRE(errors.size() >= 8);
  const double median =
      errors.size() % 2 ? errors[errors.size() / 2] : 0.5 * (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]);
  MESSAGE("\n", table, "median absolute error ", fmt::format("{:.1f}%", 100 * median), " over ", errors.size(),
          " rows; ", outcomes, " OOM outcomes\nrows without enough configuration:\n", unsaid);
  CHECK(median < 0.10);
}
