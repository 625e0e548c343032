// What `ftplan plan` searches over and the constraints it answers (docs/scenario-format.md,
// sections `search` and `constraints`). Defaults live here.
#pragma once

#include <string>
#include <vector>

#include "plan/job.hpp"
#include "plan/plan.hpp"

namespace ftplan::plan {

struct SearchSpace {
  std::vector<std::string> gpus;  // catalog GPU names (their typical nodes)
  std::vector<int> gpu_counts = {1, 2, 4, 8, 16, 32, 64};
  std::vector<int> tp = {1, 2, 4, 8};
  std::vector<int> pp = {1, 2, 4};
  // Model chunks per pipeline stage (interleaved 1F1B where > 1; only with pp > 1) and Megatron
  // sequence parallelism (only with tp > 1): not searched unless the scenario lists them.
  std::vector<int> virtual_stages = {1};
  std::vector<bool> sequence_parallel = {false};
  std::vector<int> zero = {0, 1, 2, 3};
  std::vector<int> micro_batch = {1, 2, 4};
  std::vector<Checkpointing> checkpointing = {Checkpointing::none, Checkpointing::full};
  // Offload presets are searched only when the scenario lists them: each implies a framework and a
  // ZeRO stage (DeepSpeed's systems), which the job's framework may not be.
  std::vector<OffloadPreset> offload = {OffloadPreset::none};
  std::vector<double> dram_bytes;  // host DRAM per node to try (empty: the node's own)
  // Devices per node to try, for the placements on the tier they back (plan::kDeviceKinds' rows
  // with a tier; scenario search.KEY: [counts] of the node's own first device of that kind, or
  // {ITEM: NAME, counts: [...]}): placements elsewhere are tried on the first count only.
  struct DeviceAxis {
    std::string kind;  // a kDeviceKinds key: "drives", "expanders"
    std::string name;  // the catalog's device; empty: the node's own (the first it lists)
    std::vector<int> counts;
  };
  std::vector<DeviceAxis> devices;
};

struct Constraints {
  double deadline_s = 0;  // 0 = none
  double budget_usd = 0;
  double peak_power_w = 0;
  int max_gpus = 0;
};

}  // namespace ftplan::plan
