// Simulations per second on one core for the cases the analytic peer Calculon (Isaev et al.,
// SC'23) evaluates at 64-85 per second on this machine class (performance issue): the figure and
// its ratio to 70 evaluations/s, the peer's rate here (goal: >= 15x, i.e. >= 1,050/s).
//   22B on 8 A100: Korthikanti et al. 2022 Table 3/5 (tp 8, pp 1, sequence parallel, selective
//     recompute, seq 2048, global batch 4 of micro-batch 1).
//   GPT-3 175B on 64 A100: tp 8, pp 8, 3 virtual stages, 64 micro-batches of 1.
//   1T on 3,072 A100: tp 4, pp 64, dp 12, micro-batch 4, 64 micro-batches, full recompute (as
//     Narayanan et al. 2021 ran it; selective recompute does not fit 80 GB at micro-batch 4).
// Each case also runs with every layer and micro-batch simulated (the unabridged path,
// max_micro_batches = 0: no shortcut) and prints how far the default's step time and GPU
// high-water mark are from it.
// Usage: calculon_bench [SECONDS_PER_CASE [CASE]] (default 2 s, every case; CASE 1-3 runs one, for
// profiling). SECONDS_PER_CASE -N runs the default path exactly N times and nothing else, for
// instruction counts (valgrind --tool=callgrind ... calculon_bench -10 2: Ir / 10 per simulation).
// Prints its figures; not a test.
#include <time.h>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "common/allocator.hpp"
#include "io/catalog_io.hpp"
#include "io/model_io.hpp"
#include "io/scenario_io.hpp"
#include "sim/simulate.hpp"

using namespace ftplan;

namespace {
constexpr double kPeerRate = 70.0;  // Calculon evaluations per second on this machine class

struct Rate {
  double per_s = 0;
  sim::StepResult last;
};

// This thread's CPU time: simulations per second of one core, whatever else the machine runs
// (wall time on a shared 2-core machine counts the time other processes held the core).
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

Rate measure(const plan::Scenario& s, const sim::Options& o, double seconds) {
  Rate r;
  int n = 0;
  const double start = cpu_seconds();
  double elapsed = 0;
  do {
    r.last = sim::simulate_step(s.model, s.plans.front(), o);
    ++n;
    elapsed = cpu_seconds() - start;
  } while (elapsed < seconds);
  r.per_s = n / elapsed;
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  ftplan::keep_freed_memory();
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const auto zoo = io::load_zoo(FTPLAN_ZOO_DIR);
  const auto catalog = io::load_catalog(FTPLAN_ZOO_DIR);
  const char* cases[] = {
      R"(schema_version: 1
name: 22B on 8 A100 (tp 8, pp 1)
model: megatron-gpt-22b
job: {seq_len: 2048, micro_batch: 1, global_batch: 4, steps: 1, precision: fp16-mixed, activation_checkpointing: selective, framework: megatron}
plans:
  - name: 22B 8xA100
    cluster: {node: dgx-a100-80gb, nodes: 1}
    parallel: {tp: 8, pp: 1, dp: 1, sequence_parallel: true}
)",
      R"(schema_version: 1
name: GPT-3 175B on 64 A100 (tp 8, pp 8, v 3, 64 micro-batches)
model: gpt-3-175b
job: {seq_len: 2048, micro_batch: 1, global_batch: 64, steps: 1, precision: fp16-mixed, activation_checkpointing: selective, framework: megatron}
plans:
  - name: GPT-3 64xA100
    cluster: {node: dgx-a100-80gb, nodes: 8}
    parallel: {tp: 8, pp: 8, dp: 1, schedule: interleaved, virtual_stages: 3, sequence_parallel: true}
)",
      R"(schema_version: 1
name: 1T on 3072 A100 (tp 4, pp 64, dp 12, 64 micro-batches of 4)
model: megatron-gpt-1t
job: {seq_len: 2048, micro_batch: 4, global_batch: 3072, steps: 1, precision: fp16-mixed, activation_checkpointing: full, framework: megatron}
plans:
  - name: 1T 3072xA100
    cluster: {node: dgx-a100-80gb, nodes: 384}
    parallel: {tp: 4, pp: 64, dp: 12, zero: 1, sequence_parallel: true}
)",
      // Fewer micro-batches than stages (common in fine-tuning: small global batches on deep
      // pipelines): no steady state for the micro-batch shortcut to extrapolate.
      R"(schema_version: 1
name: 1T on 3072 A100, 32 micro-batches (m < pp 64)
model: megatron-gpt-1t
job: {seq_len: 2048, micro_batch: 4, global_batch: 1536, steps: 1, precision: fp16-mixed, activation_checkpointing: full, framework: megatron}
plans:
  - name: 1T 3072xA100 m32
    cluster: {node: dgx-a100-80gb, nodes: 384}
    parallel: {tp: 4, pp: 64, dp: 12, zero: 1, sequence_parallel: true}
)"};
  fmt::print(
      "simulations per CPU second (one core), {:.0f} s per case; ratio to the peer's {:.0f} evaluations/s "
      "(goal >= 15x)\n",
      seconds, kPeerRate);
  fmt::print("{:<58} {:>10} {:>8} {:>12} {:>8} {:>10} {:>10}\n", "case", "sims/s", "ratio", "full sims/s", "ratio",
             "step dev", "peak dev");
  const int only = argc > 2 ? std::atoi(argv[2]) : 0;
  int index = 0;
  for (const char* yaml : cases) {
    if (++index != only && only > 0) continue;
    const auto s = io::parse_scenario(yaml, "bench", ".", zoo, catalog);
    sim::Options fast;  // every verb's default
    if (seconds < 0) {
      sim::StepResult last;
      for (int i = 0; i < static_cast<int>(-seconds); ++i) last = sim::simulate_step(s.model, s.plans.front(), fast);
      fmt::print("{}: {} simulations, step {:.6f} s\n", s.name, static_cast<int>(-seconds), last.step_time_s);
      continue;
    }
    sim::Options unabridged;
    unabridged.max_micro_batches = 0;
    const Rate a = measure(s, fast, seconds);
    const Rate b = measure(s, unabridged, seconds);
    if (!a.last.ok || !b.last.ok) {
      fmt::print("{:<58} not simulated: {}\n", s.name, a.last.ok ? b.last.problem : a.last.problem);
      continue;
    }
    const double dev = 100.0 * (a.last.step_time_s - b.last.step_time_s) / b.last.step_time_s;
    const double peak_dev = 100.0 * (a.last.gpu_peak_bytes() - b.last.gpu_peak_bytes()) / b.last.gpu_peak_bytes();
    fmt::print("{:<58} {:>10.1f} {:>7.2f}x {:>12.1f} {:>7.2f}x {:>+9.3f}% {:>+9.3f}%\n", s.name, a.per_s,
               a.per_s / kPeerRate, b.per_s, b.per_s / kPeerRate, dev, peak_dev);
  }
  return 0;
}
