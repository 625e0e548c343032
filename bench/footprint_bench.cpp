// Plan evaluations per second of the analytic footprint (inventory + peak over phases), on one
// core. Goal (memory issue): at least 1 million per second. Prints its figures; not a test.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "footprint/footprint.hpp"
#include "inventory/inventory.hpp"
#include "io/catalog_io.hpp"
#include "io/model_io.hpp"
#include "io/scenario_io.hpp"

using namespace ftplan;

int main(int argc, char** argv) {
  const std::filesystem::path zoo_dir = argc > 1 ? argv[1] : FTPLAN_ZOO_DIR;
  const auto zoo = io::load_zoo(zoo_dir);
  const auto catalog = io::load_catalog(zoo_dir);
  const auto s = io::parse_scenario(R"(schema_version: 1
model: llama-3.1-70b
job: {seq_len: 4096, micro_batch: 1, global_batch: 64, tokens: 1B, activation_checkpointing: full}
plans:
  - name: fsdp
    cluster: {gpu: h100-sxm-80gb, gpus: 32}
  - name: lora
    cluster: {gpu: a100-sxm4-80gb, gpus: 8}
    job: {method: lora, framework: deepspeed}
    parallel: {zero: 3}
  - name: tp-pp
    cluster: {gpu: h100-sxm-80gb, gpus: 64}
    parallel: {tp: 8, pp: 4, zero: 1}
    job: {framework: megatron}
)",
                                    "bench", ".", zoo, catalog);
  for (const auto& p : s.plans) {
    inventory::Inventory inv;
    // Warm-up, then time a fixed count, varying the micro-batch so nothing is hoisted.
    double sink = 0;
    const int n = std::getenv("FP_N") ? std::atoi(std::getenv("FP_N")) : 2'000'000;
    const auto start = std::chrono::steady_clock::now();
    plan::Plan plan = p;
    for (int i = 0; i < n; ++i) {
      plan.job.micro_batch = 1 + (i & 3);
      plan.job.global_batch = 0;
      inventory::build_inventory(s.model, plan, 0, inv);
      sink += footprint::footprint(inv, plan).gpu_peak_bytes();
    }
    const double reuse_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int m = n / 10;
    const auto start2 = std::chrono::steady_clock::now();
    for (int i = 0; i < m; ++i) {
      plan.job.micro_batch = 1 + (i & 3);
      sink += footprint::footprint(s.model, plan).gpu_peak_bytes();  // all pipeline stages, fresh inventory
    }
    const double full_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start2).count();
    fmt::print(
        "{:<6} one stage, reused inventory: {:>10.0f} plans/s   all {} stage(s), fresh: {:>10.0f} plans/s  (goal "
        "1,000,000)\n",
        p.name, n / reuse_s, p.parallel.pp, m / full_s);
    if (sink < 0) std::puts("");
  }
  return 0;
}
