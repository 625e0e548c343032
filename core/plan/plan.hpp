// How to train: a plan's hardware, parallel layout and memory placement
// (docs/scenario-format.md, section `plans`). Defaults live here.
#pragma once

#include <algorithm>
#include <array>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "hardware/hardware.hpp"
#include "plan/cost_spec.hpp"
#include "plan/job.hpp"

namespace ftplan::plan {

// The memory tiers, nearest the GPU first. `cxl`: CXL 2.0 Type-3 memory expanders, DRAM behind the
// host's PCIe 5.0 root ports that the CPU and GPU DMA address as host memory (a NUMA node without
// cores); docs/tiered-memory.md, "CXL memory".
enum class Tier { gpu, cpu, cxl, nvme };
// How many tiers there are (Tier's rows), and a figure per tier indexed by Tier (tier_index): the
// footprint's bytes, peaks and capacities, the simulator's pools, the rows, the GUI's charts.
inline constexpr std::size_t kTierCount = 4;
template <class T>
using PerTier = std::array<T, kTierCount>;
constexpr std::size_t tier_index(Tier t) { return static_cast<std::size_t>(t); }

// What a tier is, in one place: what the outputs call it and how its capacity is counted.
struct TierInfo {
  Tier tier;
  const char* row;          // the rows' prefix: memory.<row>.<category>_bytes, <row>_capacity_bytes
  const char* peak_column;  // the rows' column of its peak
  const char* label;        // in words: tables, charts, verdicts
  const char* per;          // whose share a figure is: "per GPU", "per node"
  const char* pool;         // the simulator's pool (per rank)
  // Reached by GPU DMA and CPU loads directly, without staging through another tier (host DRAM and
  // CXL memory: the same physical address space; NVMe goes through a host bounce buffer).
  bool host_addressable;
  // Every plan has it (GPU, host DRAM, the drives' pool); a CXL pool only where the node has expanders.
  bool always;
};
inline constexpr TierInfo kTiers[kTierCount] = {
    {Tier::gpu, "gpu", "gpu_peak_bytes", "GPU memory", "per GPU", "gpu", false, true},
    {Tier::cpu, "host", "host_peak_bytes", "host DRAM", "usable per node", "host (per rank)", true, true},
    {Tier::cxl, "cxl", "cxl_peak_bytes", "CXL memory", "per node", "cxl (per rank)", true, false},
    {Tier::nvme, "nvme", "nvme_bytes", "NVMe", "per node", "nvme (per rank)", false, true},
};
constexpr const TierInfo& tier_info(Tier t) { return kTiers[tier_index(t)]; }
static_assert(kTiers[0].tier == Tier::gpu && kTiers[1].tier == Tier::cpu && kTiers[2].tier == Tier::cxl &&
                  kTiers[3].tier == Tier::nvme,
              "kTiers follows Tier's order");
// Host memory of either kind (DRAM or CXL): a placement the CPU step and GPU DMA reach directly.
constexpr bool host_memory(Tier t) { return tier_info(t).host_addressable; }
enum class FsdpSharding { full_shard, shard_grad_op, hybrid_shard, no_shard };
enum class PipelineSchedule { one_f_one_b, gpipe, interleaved };
enum class OffloadPreset {
  none,
  zero_offload,
  zero_offload_cxl,
  zero_infinity,
  aidaptiv,
  activation_cpu,
  activation_nvme
};

inline std::span<const EnumName<Tier>> enum_table(Tier) {
  static constexpr EnumName<Tier> t[] = {
      {Tier::gpu, "gpu"}, {Tier::cpu, "cpu"}, {Tier::cxl, "cxl"}, {Tier::nvme, "nvme"}};
  return t;
}
inline std::span<const EnumName<FsdpSharding>> enum_table(FsdpSharding) {
  static constexpr EnumName<FsdpSharding> t[] = {{FsdpSharding::full_shard, "full_shard"},
                                                 {FsdpSharding::shard_grad_op, "shard_grad_op"},
                                                 {FsdpSharding::hybrid_shard, "hybrid_shard"},
                                                 {FsdpSharding::no_shard, "no_shard"}};
  return t;
}
inline std::span<const EnumName<PipelineSchedule>> enum_table(PipelineSchedule) {
  static constexpr EnumName<PipelineSchedule> t[] = {{PipelineSchedule::one_f_one_b, "1f1b"},
                                                     {PipelineSchedule::gpipe, "gpipe"},
                                                     {PipelineSchedule::interleaved, "interleaved"}};
  return t;
}
inline std::span<const EnumName<OffloadPreset>> enum_table(OffloadPreset) {
  static constexpr EnumName<OffloadPreset> t[] = {{OffloadPreset::none, "none"},
                                                  {OffloadPreset::zero_offload, "zero-offload"},
                                                  {OffloadPreset::zero_offload_cxl, "zero-offload-cxl"},
                                                  {OffloadPreset::zero_infinity, "zero-infinity"},
                                                  {OffloadPreset::aidaptiv, "aidaptiv"},
                                                  {OffloadPreset::activation_cpu, "activation-cpu"},
                                                  {OffloadPreset::activation_nvme, "activation-nvme"}};
  return t;
}

const char* to_string(Tier t);
const char* to_string(FsdpSharding s);
const char* to_string(PipelineSchedule s);
const char* to_string(OffloadPreset p);

// GPUs of one plan, at most: 16.8M, 100x today's largest clusters (about 100k GPUs). The
// representative simulation's cost does not depend on it; it keeps GPU counts and products of
// degrees within an int.
inline constexpr int kMaxGpus = 1 << 24;

// The machines a plan runs on, resolved against the catalog: `nodes` identical nodes.
struct Cluster {
  hardware::NodeSpec node;  // resolved copy (with any overrides applied)
  hardware::GpuSpec gpu;    // the node's GPU
  hardware::HostSpec host;  // the node's CPU/DRAM side (dram_bytes reflects node overrides)
  std::vector<std::pair<hardware::DriveSpec, int>> drives;   // per node: drive and count
  std::vector<std::pair<hardware::NicSpec, int>> nics;       // per node: NIC and count
  std::vector<std::pair<hardware::CxlSpec, int>> expanders;  // per node: CXL memory expander and count
  int nodes = 1;
  int gpus_per_node = 0;  // GPUs used per node (<= node.gpus)
  // Whether the plan has its nodes to itself. A plan that uses k of a node's n GPUs without it
  // rents (and powers, and fits into) a slice of the node: k/n of its host (DRAM, bandwidth,
  // CPU), drives, NICs, base power and price, as cloud instances that carve a server by GPU
  // do (GCP a2-highgpu-1g: 1 A100, 12 vCPU, 85 GB = 1/8 of a2-highgpu-8g's 96 vCPU and 680 GB;
  // cloud.google.com/compute/docs/gpus, A2 machine types). Scenario key cluster.exclusive;
  // default false, except for the parts form (a machine described part by part is owned).
  bool exclusive = false;
  // The node as the catalog sells it, before the plan's dram, drives and nics: the purchase price
  // covers these, and the bill of materials adds or takes off what the plan changes
  // (cost::bill_of_materials). `catalog_node` false for a node described part by part.
  struct AsSold {
    bool catalog_node = false;
    double node_dram_bytes = 0;  // the node's DRAM as sold (its host's unless the node says)
    double host_dram_bytes = 0;  // the DRAM the host's own price includes
    std::vector<std::pair<hardware::DriveSpec, int>> drives;
    std::vector<std::pair<hardware::NicSpec, int>> nics;
    std::vector<std::pair<hardware::CxlSpec, int>> expanders;
  } as_sold;
  int gpus() const { return nodes * gpus_per_node; }  // check_plan bounds it by kMaxGpus
  // The share of each node the plan uses: 1 when exclusive, else its GPUs over the node's.
  double node_share() const {
    return exclusive || node.gpus <= gpus_per_node ? 1.0 : static_cast<double>(gpus_per_node) / node.gpus;
  }
  // GPUs among which a node's host, drives and NICs are divided, seen from one rank: the plan's
  // GPUs on the node when exclusive, else all the node's GPUs (each slice gets its share).
  int host_ranks() const { return std::max(1, exclusive ? gpus_per_node : std::max(gpus_per_node, node.gpus)); }
  // What the plan may fill of its share of a node: host DRAM (kUsableHostFraction of it) and the
  // drives. The footprint judges fit against these; the simulator's pools are them per rank.
  double usable_host_bytes() const { return host.dram_bytes * node_share() * kUsableHostFraction; }
  // What each tier offers the plan (plan::kTiers): usable memory per GPU; usable host DRAM, and
  // the capacity of the devices that back a tier (kDeviceKinds: CXL expanders, drives) of its
  // share of a node.
  PerTier<double> tier_capacities() const;
  // Share of host DRAM a training job can use: the OS, page cache and other processes keep the
  // rest (an estimate; the page cache is not free memory to pin).
  static constexpr double kUsableHostFraction = 0.9;
};

// A node's devices counted by kind, one row each: the catalog's file and the node's, the parts'
// and the scenario's key (`key`: hardware/KEY.yaml, cluster.KEY, search.KEY), a listed device's
// name key (`item`), its words in messages, the memory tier its capacity backs (none: a NIC), and
// where the catalog, a node and a plan's Cluster keep them. The catalog's and the scenario's
// readers, the cluster's resolution, the scenario's writer, the bill of materials, the tiers'
// capacities, the planner's device axes and the GUI iterate this table (for_each_device_kind);
// a new kind of device is its spec (hardware.hpp), its reader (io/catalog_io.cpp) and a row here.
template <class Spec>
struct DeviceKind {
  using spec_type = Spec;
  const char* key;
  const char* item;
  const char* what;
  std::optional<Tier> tier;
  std::vector<Spec> hardware::Catalog::*in_catalog;
  std::vector<hardware::DeviceCount> hardware::NodeSpec::*in_node;
  std::vector<std::pair<Spec, int>> Cluster::*in_cluster;
  std::vector<std::pair<Spec, int>> Cluster::AsSold::*as_sold;
};
inline constexpr std::tuple kDeviceKinds{
    DeviceKind<hardware::DriveSpec>{"drives", "drive", "drive", Tier::nvme, &hardware::Catalog::drives,
                                    &hardware::NodeSpec::drives, &Cluster::drives, &Cluster::AsSold::drives},
    DeviceKind<hardware::NicSpec>{"nics", "nic", "NIC", std::nullopt, &hardware::Catalog::nics,
                                  &hardware::NodeSpec::nics, &Cluster::nics, &Cluster::AsSold::nics},
    DeviceKind<hardware::CxlSpec>{"expanders", "expander", "CXL memory expander", Tier::cxl,
                                  &hardware::Catalog::expanders, &hardware::NodeSpec::expanders, &Cluster::expanders,
                                  &Cluster::AsSold::expanders},
};
// Calls f(kind) for each row of kDeviceKinds, in order.
template <class F>
constexpr void for_each_device_kind(F&& f) {
  std::apply([&](const auto&... kind) { (f(kind), ...); }, kDeviceKinds);
}

// The tier the device kind called `key` backs; none for a kind without one (NICs) or no such kind.
inline std::optional<Tier> device_tier(std::string_view key) {
  std::optional<Tier> out;
  for_each_device_kind([&](const auto& kind) {
    if (key == kind.key) out = kind.tier;
  });
  return out;
}

inline PerTier<double> Cluster::tier_capacities() const {
  PerTier<double> c{};
  c[tier_index(Tier::gpu)] = gpu.usable_memory_bytes;
  c[tier_index(Tier::cpu)] = usable_host_bytes();
  for_each_device_kind([&](const auto& kind) {
    using Spec = typename std::decay_t<decltype(kind)>::spec_type;
    if constexpr (requires(const Spec& d) { d.capacity_bytes; }) {
      if (!kind.tier) return;
      double bytes = 0;
      for (const auto& [d, count] : this->*kind.in_cluster) bytes += d.capacity_bytes * count;
      c[tier_index(*kind.tier)] += bytes * node_share();
    }
  });
  return c;
}

struct Parallel {
  int dp = 0;  // data-parallel degree; 0 = whatever the GPU count leaves after tp x pp x cp
  int tp = 1;
  int pp = 1;
  int cp = 1;
  int ep = 1;
  bool sequence_parallel = false;  // Megatron SP (Korthikanti et al. 2022); needs tp > 1
  // Async TP: SP's all-gathers and reduce-scatters decomposed into tp point-to-point steps that
  // overlap the GEMM they feed or drain (Wang et al. 2023, "Overlap communication with dependent
  // computation"; PyTorch async-TP, Megatron-core tp_comm_overlap). Needs sequence_parallel.
  bool async_tp = false;
  int zero = 0;                                  // ZeRO stage 0..3 on the data-parallel dimension (FSDP full_shard = 3)
  FsdpSharding fsdp = FsdpSharding::full_shard;  // used when the framework is FSDP
  bool fsdp_given = false;  // the scenario set `fsdp` (refused under a framework that does not shard by it)
  // The scenario set `zero` (under a framework that shards by parallel.fsdp, it must agree with it:
  // `zero: 0` there is not the default full shard).
  bool zero_given = false;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;  // interleaved 1F1B model chunks per stage
  // Layers of the first and last pipeline stages, the rest split evenly among the middle ones
  // (Megatron-core decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers: lighter end
  // stages make room for the embedding and the LM head); 0 = an even split.
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  // MoE routing: experts padded to capacity_factor x their even share of tokens (GShard, Lepikhin
  // et al. 2021; Switch, Fedus et al. 2022); 0 = dropless, tokens spread evenly on average.
  double capacity_factor = 0;
};

struct Offload {
  OffloadPreset preset = OffloadPreset::none;
  Tier params = Tier::gpu;
  Tier gradients = Tier::gpu;
  Tier optimizer = Tier::gpu;
  Tier activations = Tier::gpu;
  Tier optimizer_step = Tier::gpu;  // where the optimizer step runs: gpu, or cpu (ZeRO-Offload's CPU Adam)
  bool pinned = true;               // host buffers page-locked
  int prefetch_depth = 1;           // layers fetched ahead
  int buffer_count = 5;             // parameter swap buffers (DeepSpeed offload_param.buffer_count)
  double buffer_bytes = 0;          // each; 0 = one layer's largest tensor
  double chunk_bytes = 0;           // optimizer-state swap chunk; 0 = engine default
  // DeepSpeed's optimizer-state swap buffers (offload_optimizer.buffer_count, default 4): pinned
  // fp32 buffers of a sub-group each, all allocated at start (swap_tensor/utils.py SwapBufferManager);
  // a sub-group in flight takes kOptimizerSwapBuffersPerSubGroup of them.
  int optimizer_buffer_count = 4;
  // DeepSpeed's optimizer-state swap pipelining (offload_optimizer.pipeline_read / pipeline_write,
  // deepspeed/runtime/zero/offload_config.py; both false by default). Neither: each sub-group is
  // read, stepped and written back, waited for, before the next is read (stage3.py step() with
  // PartitionedOptimizerSwapper). pipeline_read: the next sub-group's read is issued once this
  // one's has landed, under this one's step and write; pipeline_write: this one's write is waited
  // for only before the next one's (PipelinedOptimizerSwapper). optimizer: nvme only.
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool delayed_update = false;  // ZeRO-Offload's one-step delayed parameter update

  bool operator==(const Offload&) const = default;  // every setting (io/scenario_edit: a plan's changes)
};

// Optimizer-state sub-groups in pinned memory at once under the swap's pipelining: the one being
// updated, the next one's read (pipeline_read) and the last one's write (pipeline_write).
inline int optimizer_swaps_in_flight(const Offload& o) {
  return 1 + (o.pipeline_read ? 1 : 0) + (o.pipeline_write ? 1 : 0);
}
// A sub-group in flight holds one swap buffer per optimizer state tensor (Adam's fp32 master, m,
// v) and one for its gradient (partitioned_optimizer_swapper.py and pipelined_optimizer_swapper.py
// _swap_in_optimizer_state: required_buffer_count = len(tensors) + 1 with gradients); a pool of
// fewer stops the run ("ran out of swap buffers, try increasing 'buffer_count'").
inline constexpr int kOptimizerSwapBuffersPerSubGroup = 4;

// Sets `o`'s placements to those of its preset (docs/tiered-memory.md); leaves the rest.
void apply_preset(Offload& o);
// Whether the placements put any state on tier `t`; whether a preset's do.
bool places_on(const Offload& o, Tier t);
bool preset_places_on(OffloadPreset preset, Tier t);

struct Plan {
  std::string name;
  Cluster cluster;
  Parallel parallel;
  Offload offload;
  Job job;  // the scenario's job with this plan's overrides applied
  // How this plan is paid for: the scenario's `cost` with the plan's own `cost` keys on top (a
  // rented cloud plan beside an owned workstation in one comparison).
  CostSpec cost;
};

// A plan's name as a file name part (simulate --trace and --ir, validate --state-dir): every
// character but letters and digits becomes '_'. The scenario reader refuses two plans with one tag.
std::string file_tag(const std::string& plan_name);

}  // namespace ftplan::plan
