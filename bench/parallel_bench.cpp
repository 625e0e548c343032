// Wall time to simulate one training step at scale, on one core (model-parallelism issue):
// Llama-3.1-405B on 16,384 H100s (tp 8, pp 16, dp 128, 1F1B, seq 8192, 2048 sequences per step:
// Llama 3's 16M-token batch; full activation recompute, without which a stage needs ~102 GiB of
// the H100's 79.65) and GPT-3 175B on 1,536 A100s (Narayanan et al. 2021: tp 8, pp 12,
// dp 16, global batch 1536). Goal: under 50 ms each, and memory that does not grow with the
// number of data-parallel replicas (the same plan at dp 8, then dp 128: the process's peak RSS
// does not move).
// Times only plans that fit (a plan that runs out of memory is refused, not timed). Prints its
// figures; not a test.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "common/allocator.hpp"

#include "footprint/footprint.hpp"
#include "io/catalog_io.hpp"
#include "io/model_io.hpp"
#include "io/scenario_io.hpp"
#include "sim/simulate.hpp"

using namespace ftplan;

namespace {
long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}
}  // namespace

int main(int argc, char** argv) {
  ftplan::keep_freed_memory();
  const std::filesystem::path zoo_dir = argc > 1 ? argv[1] : FTPLAN_ZOO_DIR;
  const auto zoo = io::load_zoo(zoo_dir);
  const auto catalog = io::load_catalog(zoo_dir);
  struct Case {
    const char* yaml;
  };
  const char* cases[] = {
      R"(schema_version: 1
name: llama-3.1-405b on 16384 H100
model: llama-3.1-405b
job: {seq_len: 8192, micro_batch: 1, global_batch: 2048, steps: 1, activation_checkpointing: full, framework: megatron}
plans:
  - name: 405B 1024xH100 tp8 pp16 dp8 (same per-replica work)
    cluster: {node: dgx-h100, nodes: 128}
    parallel: {tp: 8, pp: 16, dp: 8, zero: 1, sequence_parallel: true}
    job: {global_batch: 128}
  - name: 405B 16384xH100 tp8 pp16 dp128
    cluster: {node: dgx-h100, nodes: 2048}
    parallel: {tp: 8, pp: 16, dp: 128, zero: 1, sequence_parallel: true}
)",
      R"(schema_version: 1
name: gpt-3 175b on 1536 A100
model: gpt-3-175b
job: {seq_len: 2048, micro_batch: 1, global_batch: 1536, steps: 1, precision: fp16-mixed, activation_checkpointing: full, framework: megatron}
plans:
  - name: GPT-3 175B 1536xA100 tp8 pp12 dp16
    cluster: {node: dgx-a100-80gb, nodes: 192}
    parallel: {tp: 8, pp: 12, dp: 16, zero: 1}
)"};
  fmt::print("one simulated step per plan, best of 3 runs, one core\n");
  int status = 0;
  for (const char* yaml : cases) {
    const auto s = io::parse_scenario(yaml, "bench", ".", zoo, catalog);
    for (const auto& p : s.plans) {
      if (const footprint::Footprint f = footprint::footprint(s.model, p); !f.fits) {
        fmt::print("{:<52} not timed: it does not fit ({})\n", p.name, f.infeasible_reason);
        status = 1;
        continue;
      }
      double best = 1e9;
      sim::StepResult r;
      for (int i = 0; i < 3; ++i) {
        const auto start = std::chrono::steady_clock::now();
        sim::Options o;
        o.max_micro_batches = sim::kSteadyStateMicroBatches;
        r = sim::simulate_step(s.model, p, o);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      fmt::print("{:<52} {:>8.1f} ms  (goal < 50 ms)  step {:.2f} s, {:.0f} TFLOP/s/GPU, max RSS so far {:.0f} MiB\n",
                 p.name, 1e3 * best, r.step_time_s, r.hardware_tflops_per_gpu, max_rss_kib() / 1024.0);
    }
  }
  return status;
}
