// Simulations per second per core of `ftplan sweep` on Llama-3.1-8B single-node plans, through
// the sweep's own code path (sweep::run -> Sweep::evaluate: apply the point's values, read the
// scenario, evaluate::evaluate_plan the plan with a full simulation, build its row), with nothing reused
// across points. Goal (sweep issue): at least 1,000 full simulations per second per core. Prints
// its figures with the core count; not a test. Build with scripts/build.sh (Release, -O2), then:
//
//   build/bench/sweep_bench [threads]        (default: all cores)
//
// Rates are per CPU second (this process's, or the one thread's) as well as per wall second: the
// machine may be shared.
//
// The sweep: seq 1k/2k/4k x micro-batch 1/2/4 x 1/2/4/8 GPUs x H100/A100 x LoRA/full, global
// batch 32 (so 1 to 32 micro-batches a step), one plan a point: 144 simulations. Also prints
// where one point's time goes on one thread: reading the scenario vs the simulation proper.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "common/allocator.hpp"

#include "cost/cost.hpp"
#include "footprint/footprint.hpp"
#include "io/catalog_io.hpp"
#include "io/model_io.hpp"
#include "io/results.hpp"
#include "io/scenario_io.hpp"
#include "sim/simulate.hpp"
#include "sweep/sweep.hpp"

using namespace ftplan;

namespace {

constexpr const char* kSweep = R"(schema_version: 1
name: bench llama-3.1-8b single node
steady_state: true
scenario:
  schema_version: 1
  model: llama-3.1-8b
  job: {method: lora, seq_len: 2048, micro_batch: 1, global_batch: 32, tokens: 100M,
        activation_checkpointing: full, framework: pytorch-fsdp}
  plans:
    - name: one node
      cluster: {gpu: h100-sxm-80gb, gpus: 8}
      parallel: {zero: 3}
axes:
  - {key: job.seq_len, values: [1024, 2048, 4096]}
  - {key: job.micro_batch, values: [1, 2, 4]}
  - {key: plans.*.cluster.gpus, values: [1, 2, 4, 8]}
  - {key: plans.*.cluster.gpu, values: [h100-sxm-80gb, a100-sxm4-80gb]}
  - {key: job.method, values: [lora, full]}
)";

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of this thread or of the whole process (every worker): the rate of the cores the
// sweep ran on, whatever else the machine runs (wall time on a shared 2-core machine counts the
// time other processes held the cores).
double cpu_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(cores);
  const model::Zoo zoo = io::load_zoo(FTPLAN_ZOO_DIR);
  const hardware::Catalog catalog = io::load_catalog(FTPLAN_ZOO_DIR);
  const sweep::Sweep sw = sweep::Sweep::parse(kSweep, "bench", ".", zoo, catalog);
  std::vector<std::int64_t> points;
  for (std::int64_t p = 0; p < sw.size(); ++p) points.push_back(p);

  // Whole sweep on `threads` workers, best of 3.
  double best = 1e300, best_cpu = 1e300;
  std::int64_t rows = 0, feasible = 0;
  for (int rep = 0; rep < 3; ++rep) {
    rows = feasible = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
    sweep::run(sw, points, threads, [&](std::int64_t, std::vector<io::Row>& r) {
      rows += static_cast<std::int64_t>(r.size());
      for (const auto& row : r)
        if (const io::Value* f = row.get("feasible"); f && std::get<bool>(*f)) ++feasible;
    });
    best = std::min(best, seconds_since(t0));
    best_cpu = std::min(best_cpu, cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0);
  }
  const double per_s = static_cast<double>(rows) / best;
  fmt::print("sweep_bench: {} simulations ({} feasible) of Llama-3.1-8B single-node plans in {:.3f} s\n", rows,
             feasible, best);
  fmt::print("  {} threads on {} cores: {:.1f} simulations/s, {:.1f} simulations/s/core (wall)\n", threads, cores,
             per_s, per_s / std::min<double>(threads, cores));
  fmt::print("  {:.1f} simulations per CPU second, all threads (goal: 1000/s per core)\n",
             static_cast<double>(rows) / best_cpu);

  // One thread, split: reading the scenario vs evaluating it (with the sweep's steady-state shortcut).
  sim::Options options;
  options.max_micro_batches = sim::kSteadyStateMicroBatches;
  double read_s = 0, eval_s = 0, footprint_s = 0, simulate_s = 0, power_s = 0, micro_batches = 0;
  const auto now = [] { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); };
  for (auto p : points) {
    double t0 = now();
    const plan::Scenario s = io::parse_scenario(sw.scenario_yaml(p), "bench", ".", zoo, catalog);
    read_s += now() - t0;
    t0 = now();
    for (const auto& plan : s.plans) {
      const evaluate::Evaluation e = evaluate::evaluate_plan(s.model, plan, options);
      (void)io::cost_row(plan, e.memory, e.step, e.power, e.cost);
    }
    eval_s += now() - t0;
    // The parts of evaluate::evaluate_plan, again, one by one.
    for (const auto& plan : s.plans) {
      t0 = now();
      const auto f = footprint::footprint(s.model, plan);
      footprint_s += now() - t0;
      t0 = now();
      const auto step = sim::simulate_step(s.model, plan, options);
      simulate_s += now() - t0;
      t0 = now();
      (void)cost::power(plan, step.timeline);
      power_s += now() - t0;
      micro_batches += step.tokens_per_step / (plan.job.seq_len * plan.job.micro_batch * plan.cluster.gpus());
    }
  }
  const double n = static_cast<double>(points.size());
  fmt::print(
      "  one thread, CPU time per point: {:.3f} ms reading the scenario, {:.3f} ms evaluating (memory, full "
      "simulation, power, cost, row): {:.0f} points per CPU second\n",
      1e3 * read_s / n, 1e3 * eval_s / n, n / (read_s + eval_s));
  fmt::print(
      "  of which: footprint {:.3f} ms, simulate_step {:.3f} ms ({:.1f} micro-batches a step on average), power {:.3f} "
      "ms\n",
      1e3 * footprint_s / n, 1e3 * simulate_s / n, micro_batches / n, 1e3 * power_s / n);
  return 0;
}
