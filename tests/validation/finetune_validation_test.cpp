// Predicts the fine-tuning rows of tests/data/validation/published_finetune.csv (issue 39): HF
// Trainer/PEFT/TRL, HF + DeepSpeed, torchtune, NeMo and Unsloth as they ran, each row mapped by
// the same column rules as the public set (published.cpp, no per-row overrides). Step times are
// compared with step times, tokens/s with tokens/s, memory with the kind the source measured.
// The table gives every row's error and each stack family's median; docs/validation.md records
// them before and after each mechanism. Errors are signed as the issue counts them: + is too
// fast (or too much memory), - too slow.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "footprint/footprint.hpp"
#include "published.hpp"
#include "sim/simulate.hpp"
#include "tests/unit/test_support.hpp"

using namespace ftplan;
using validation::MemoryKind;
using validation::PublishedRow;

namespace {

bool has(const std::string& s, const char* what) {
  std::string a = s, b = what;
  std::transform(a.begin(), a.end(), a.begin(), [](unsigned char c) { return std::tolower(c); });
  std::transform(b.begin(), b.end(), b.begin(), [](unsigned char c) { return std::tolower(c); });
  return a.find(b) != std::string::npos;
}

// The stack family a row ran on: the framework that decides its kernels and sharding.
std::string family(const PublishedRow& r) {
  const std::string& src = r.at("source_url_or_repo_path");
  if (has(src, "torchtune")) return "torchtune";
  if (has(src, "torchtitan")) return "torchtitan";
  if (has(src, "unslothai/unsloth")) return "unsloth";
  if (has(src, "nemo") || has(r.at("parallelism"), "megatron")) return "nemo";
  if (has(r.at("parallelism"), "deepspeed")) return "deepspeed";
  return "hf";
}

enum class Metric { step_time, tokens_per_gpu, tokens, samples, memory, none };

Metric metric_of(const PublishedRow& r) {
  const std::string& m = r.at("measured_metric");
  if (m.rfind("seconds_per_iter", 0) == 0) return Metric::step_time;
  if (m.rfind("tokens_per_s_per_gpu", 0) == 0) return Metric::tokens_per_gpu;
  // torchtune's README "tokens/s" is the job's: its 70B LoRA row on 8 A100s (3,497) is beyond
  // one A100's peak for a 70B model (LoRA with recompute: ~6 x 70.6 GFLOP a token, 312 TFLOP/s
  // -> at most ~740 tokens/s per GPU).
  if (m.rfind("tokens_per_s", 0) == 0) return Metric::tokens;
  if (m.rfind("samples_per_s", 0) == 0) return Metric::samples;
  if (m.find("mem") != std::string::npos) return Metric::memory;
  return Metric::none;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Result {
  const PublishedRow* row;
  std::string family;
  Metric metric;
  double measured, predicted;
  double hfu = 0;  // time rows: the simulated step's hardware FLOPs utilization
  // Signed so that + is too fast (throughput over the published) or too much memory: a step
  // time's error is measured / predicted - 1, a rate's or memory's predicted / measured - 1.
  double error() const { return metric == Metric::step_time ? measured / predicted - 1 : predicted / measured - 1; }
  // The utilization the published run reached on the same FLOPs: the simulated HFU scaled by how
  // much slower (or faster) the run was than predicted.
  double measured_hfu() const { return hfu / (1 + error()); }
};

// FTPLAN_VALIDATION_DETAIL=LINE prints where that row's simulated step goes: each stream's busy
// time by op (layer and micro-batch numbers folded), for finding the mechanism a row lacks.
void detail(const plan::Scenario& s, const plan::Plan& p) {
  sim::Options o;
  o.trace = true;
  const auto r = sim::simulate_step(s.model, p, o);
  std::string out =
      fmt::format("step {:.3f} s, compute {:.3f}, exposed comm {:.3f}, idle {:.3f}, HFU {:.1f}%, bound by {}\n",
                  r.step_time_s, r.compute_s, r.exposed_comm_s, r.idle_s, 100 * r.hfu, r.bound_by);
  const std::regex numbers(R"( ?\b[LmM]\d+\b| p\d+)");
  for (const auto* tracks : {&r.tracks.streams, &r.tracks.links})
    for (const auto& t : *tracks) {
      std::map<std::string, std::pair<double, int>> by;
      double busy = 0;
      for (const auto& sp : t.spans) {
        auto& e = by[std::regex_replace(sp.name, numbers, "")];
        e.first += sp.end_s - sp.start_s;
        ++e.second;
        busy += sp.end_s - sp.start_s;
      }
      out += fmt::format("  {}: {:.3f} s busy\n", t.name, busy);
      std::vector<std::pair<std::string, std::pair<double, int>>> v(by.begin(), by.end());
      std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
      for (std::size_t i = 0; i < v.size() && i < 25; ++i)
        out += fmt::format("    {:>9.4f} s {:>6} x  {}\n", v[i].second.first, v[i].second.second, v[i].first);
    }
  const auto f = footprint::footprint(s.model, p);
  out += fmt::format("GPU memory at its peak ({}, stage {}): allocated {:.2f} GiB, reserved {:.2f}, device {:.2f}\n",
                     footprint::to_string(f.peak_phase), f.peak_stage, f.gpu_allocated_peak_bytes / (1u << 30),
                     f.gpu_reserved_peak_bytes / (1u << 30), f.gpu_peak_bytes() / (1u << 30));
  for (int c = 0; c < inventory::kCategories; ++c)
    out += fmt::format("    {:>9.2f} GiB  {} (its own peak {:.2f})\n", f.gpu().bytes[c] / (1u << 30),
                       inventory::to_string(static_cast<inventory::Category>(c)),
                       f.gpu_category_peaks.bytes[c] / (1u << 30));
  MESSAGE(out);
}

std::vector<Result> predict_all(const std::vector<PublishedRow>& rows, std::string& table, std::string& unsaid) {
  std::vector<Result> out;
  table = fmt::format("{:>4}  {:<9} {:<44} {:>10} {:>10} {:>10} {:>8} {:>15}\n", "line", "family", "case", "metric",
                      "measured", "predicted", "error", "HFU meas./sim.");
  for (const auto& row : rows) {
    const Metric metric = metric_of(row);
    if (metric == Metric::none) continue;
    const std::string label =
        fmt::format("{} | {} | {} | {}", row.at("model").substr(0, 12), row.at("gpu_type").substr(0, 9),
                    row.at("peft").substr(0, 9), row.at("seq_len").substr(0, 5));
    const auto mapped = validation::scenario_for(row, rows);
    if (!mapped.scenario) {
      unsaid += fmt::format("  line {}: {} — leaves unsaid: {}\n", row.line, label, fmt::join(mapped.missing, ", "));
      continue;
    }
    const auto& s = *mapped.scenario;
    const plan::Plan& p = s.plans.front();
    double measured = std::stod(row.at("measured_value")), predicted = 0, hfu = 0;
    const char* name = "";
    if (metric == Metric::memory) {
      const auto f = footprint::footprint(s.model, p);
      // "Active" bytes (torch.cuda.memory_stats' active_bytes) are the live tensors: allocated.
      const MemoryKind kind =
          has(row.at("measured_metric"), "active") ? MemoryKind::allocated : validation::memory_kind(row);
      predicted = kind == MemoryKind::allocated  ? f.gpu_allocated_peak_bytes
                  : kind == MemoryKind::reserved ? f.gpu_reserved_peak_bytes
                                                 : f.gpu_peak_bytes();
      measured = validation::measured_bytes(row);
      // A sum over the job's GPUs (Qwen's multi-GPU cells) against the per-GPU figure times GPUs.
      if (has(row.at("measured_metric"), "total")) predicted *= p.cluster.gpus();
      measured /= 1u << 30;
      predicted /= 1u << 30;
      name = validation::to_string(kind);
    } else {
      const auto r = sim::simulate_step(s.model, p);
      hfu = r.hfu;
      if (const char* d = std::getenv("FTPLAN_VALIDATION_DETAIL"); d && std::atoi(d) == row.line) detail(s, p);
      if (metric == Metric::step_time) {
        // Per optimizer step; "s/10 iter" is ten of them.
        predicted = r.step_time_s * (has(row.at("unit"), "10 iter") ? 10 : 1);
        name = "s/step";
      } else if (metric == Metric::tokens_per_gpu) {
        predicted = r.tokens_per_s_per_gpu;
        name = "tok/s/GPU";
      } else if (metric == Metric::tokens) {
        predicted = r.tokens_per_s;
        name = "tok/s";
      } else {
        predicted = r.tokens_per_s / static_cast<double>(s.job.seq_len);
        name = "samples/s";
      }
    }
    Result res{&row, family(row), metric, measured, predicted, hfu};
    table += fmt::format("{:>4}  {:<9} {:<44} {:>10} {:>10.2f} {:>10.2f} {:>+7.1f}% {:>15}\n", row.line, res.family,
                         label, name, measured, predicted, 100 * res.error(),
                         hfu > 0 ? fmt::format("{:.0f}% / {:.0f}%", 100 * res.measured_hfu(), 100 * hfu) : "");
    out.push_back(res);
  }
  return out;
}

}  // namespace

TEST_CASE("published fine-tuning measurements by stack: time and memory errors per family") {
  const auto rows = validation::read_published((test::data_dir() / "validation" / "published_finetune.csv").string());
  std::string table, unsaid;
  const std::vector<Result> results = predict_all(rows, table, unsaid);
  std::map<std::string, std::vector<double>> time_abs, time_signed, memory_abs, hfu_measured, hfu_simulated;
  std::vector<double> all_time, all_memory;
  for (const auto& r : results) {
    if (r.metric == Metric::memory) {
      memory_abs[r.family].push_back(std::abs(r.error()));
      all_memory.push_back(std::abs(r.error()));
    } else {
      time_abs[r.family].push_back(std::abs(r.error()));
      time_signed[r.family].push_back(r.error());
      hfu_measured[r.family].push_back(r.measured_hfu());
      hfu_simulated[r.family].push_back(r.hfu);
      all_time.push_back(std::abs(r.error()));
    }
  }
  // HFU med.: the family's median hardware FLOPs utilization, the published runs' (the simulated
  // step's FLOPs over their measured time) against the simulated one.
  std::string summary =
      fmt::format("{:<10} {:>10} {:>16} {:>16} {:>11} {:>16} {:>20}\n", "family", "time rows", "time |err| med.",
                  "time signed med.", "memory rows", "memory |err| med.", "HFU med. meas./sim.");
  for (const char* f : {"hf", "deepspeed", "torchtune", "torchtitan", "nemo", "unsloth"})
    summary += fmt::format("{:<10} {:>10} {:>15.1f}% {:>+15.1f}% {:>11} {:>15.1f}% {:>20}\n", f, time_abs[f].size(),
                           100 * median_of(time_abs[f]), 100 * median_of(time_signed[f]), memory_abs[f].size(),
                           100 * median_of(memory_abs[f]),
                           hfu_measured[f].empty() ? std::string("-")
                                                   : fmt::format("{:.0f}% / {:.0f}%", 100 * median_of(hfu_measured[f]),
                                                                 100 * median_of(hfu_simulated[f])));
  MESSAGE("\n", table, "\n", summary, "all: time ", fmt::format("{:.1f}%", 100 * median_of(all_time)), " over ",
          all_time.size(), " rows, memory ", fmt::format("{:.1f}%", 100 * median_of(all_memory)), " over ",
          all_memory.size(), " rows\nrows without enough configuration:\n", unsaid);
  // Enough of the set maps to judge each claim on.
  CHECK(all_time.size() >= 20);
  CHECK(all_memory.size() >= 15);
  // Today's level, as a guard against getting worse (the issue's goal is 10% per family; each
  // mechanism that moves a row records it in docs/validation.md): all rows 10.0% time, 9.1% memory
  // (8.8% and 6.3% before torchtitan's context-parallel rows, +20..+66% and -14..-15%, joined;
  // memory 8.0% before LoRA's frozen base counted the whole base, session 31: it had left out as
  // many base parameters as the adapters have, and the LoRA rows moved +0.1..+1.7 GB, five of
  // them closer, seven further); the families already within the goal held to it.
  CHECK(median_of(all_time) < 0.105);
  CHECK(median_of(all_memory) < 0.095);
  for (const char* f : {"torchtune", "nemo"}) {
    INFO(f);
    CHECK(median_of(time_abs[f]) < 0.10);
    CHECK(std::abs(median_of(time_signed[f])) < 0.05);
  }
}
