// `ftplan validate`: one plan simulated and run for real on this machine, side by side. The plan's
// GPU becomes the executor's CPU device and its host and drives this machine's; the simulator is
// given the device's measured rates (GEMMs at the step's own shapes, attention, memcpy, AdamW, the
// storage directories' direct I/O), so what is compared is the simulator's *mechanisms* (streams,
// overlap, dependencies, buffer lifetimes, link sharing), not a datasheet.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor.hpp"
#include "hardware/profile.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"
#include "sim/simulate.hpp"

namespace ftplan::exec {

// --scale: a smaller model of the same shape. 0 keeps a dimension.
struct Scale {
  int layers = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;
  int seq_len = 0;
  bool any() const { return layers > 0 || hidden > 0 || vocab > 0 || seq_len > 0; }
};
// "layers=4,hidden=256[,vocab=2048][,seq=256]". Throws std::invalid_argument naming the bad part.
Scale parse_scale(const std::string& text);
// The model with `scale` applied: head_dim, the heads : kv-heads and ffn : hidden ratios kept.
model::ModelSpec scaled(const model::ModelSpec& model, const Scale& scale);
// What scaling keeps and what it loses, for the report.
std::string scale_note(const model::ModelSpec& from, const model::ModelSpec& to, const Scale& scale);

// The CPU device's rates as the simulator takes them.
struct DeviceRates {
  struct Gemm {
    std::int64_t m = 0, n = 0, k = 0;
    double flops_per_s = 0;
    sim::Efficiency::Layout layout = sim::Efficiency::Layout::nn;
  };
  std::vector<Gemm> gemm;  // at every GEMM shape and layout the step's ops run
  double attention_flops_per_s = 0;
  double memory_Bps = 0;                         // a memory-bound kernel's bytes (read + written) per second
  double copy_Bps = 0;                           // one memcpy between device and host memory
  double dram_Bps = 0;                           // DRAM traffic (read + written) of two memcpys at once
  double adam_params_per_s = 0;                  // calibrate's AdamW on one thread
  double nvme_read_Bps = 0, nvme_write_Bps = 0;  // the storage directories, striped, 1 MiB at depth 8
  // The step's GEMM FLOPs over their seconds at the per-shape rates above (each shape weighted by
  // how many of the step's ops run it): one figure for the compute rate, to see it drift.
  double gemm_step_flops_per_s = 0;
};

// How long measure_rates looks. The defaults are the probe before the run; between steps
// validate takes a shorter one (kStepProbe) so that probing does not dominate the run's wall time.
struct ProbeEffort {
  int cold_calls = 5;    // single cold calls per GEMM shape and attention (their median)
  int timed_rounds = 3;  // rounds of >= 20 ms for memory, copy, DRAM and AdamW (their best)
  int io_passes = 3;     // write passes, then read passes, over the storage directories (their median)
};
inline constexpr ProbeEffort kStepProbe{1, 1, 1};

// One rate's samples over a run: where the simulation's figure (the median) sits among them.
struct RateSpread {
  std::string name;  // the JSON key, e.g. "nvme_read_Bps"
  double min = 0, median = 0, max = 0;
  // (max - min) / median in percent; 0 with one sample.
  double spread_pct() const { return median > 0 ? 100.0 * (max - min) / median : 0; }
};

// The median of every rate over `samples` (each GEMM shape on its own; the samples must come
// from one IR, so they list the same shapes in the same order). REQUIRES: !samples.empty().
DeviceRates median_rates(const std::vector<DeviceRates>& samples);
// min / median / max of each rate over `samples` (the rates a sample left at 0, unmeasured, are
// left out: NVMe without storage directories).
std::vector<RateSpread> rate_spreads(const std::vector<DeviceRates>& samples);

// Whether the rates moved too much during a run to hold its step time to the goal: the step
// simulated at each rate sample spans `drift_pct` = (max - min) / median, and more than
// `threshold_pct` is drift. A run's error is then as much the machine's as the simulator's.
// Beside it, how much the timed steps themselves spread: a run's steps last seconds and average
// the load out, a probe's calls last milliseconds and catch it, so on a loaded machine the probes
// spread more than the steps (docs/validation.md) and a drift can be the probes' own.
struct Drift {
  double drift_pct = 0;
  bool drifted = false;
  double min_error_pct = 0, max_error_pct = 0;  // the step time error at the extreme samples
  double measured_spread_pct = 0;               // (max - min) / median of the timed steps
};
// `measured_step_s`: the timed steps (after the warm-up); their median is the measured step time.
Drift judge_drift(const std::vector<double>& simulated_step_s_per_sample, const std::vector<double>& measured_step_s,
                  double threshold_pct);

struct ValidateOptions {
  int steps = 3;
  bool cuda = false;  // run on the CUDA device (cuda_device.hpp) instead of the CPU device
  std::vector<std::filesystem::path> storage_dirs;
  bool trace = false;
  // Keep each plan's on-flash training state in this directory (Options::state_file, named by
  // state_file_name) and resume from it: a validate killed and run again continues its steps.
  std::filesystem::path state_dir;
  // Probe the device's rates between steps too (ProbeEffort kStepProbe), not only before the
  // run: the simulation takes each rate's median over the probes around the timed steps.
  bool probe_between_steps = true;
  // A run whose simulated step moves more than this over its rate samples is flagged
  // "rates drifted" (Validation::drift). The goal is 10%: past it, the comparison cannot
  // tell the simulator's error from the machine's.
  double drift_threshold_pct = 10;
  std::function<void(const std::string&)> progress;
};

// The state file of `plan_name` in ValidateOptions::state_dir.
std::string state_file_name(const std::string& plan_name);
// FNV-1a 64 of the parameters' bytes, as 16 hex digits: equal digests, equal parameters.
std::string digest(const std::vector<float>& parameters);

struct LinkRow {
  std::string name;
  double measured_bytes = 0, simulated_bytes = 0;
  double measured_busy_s = 0, simulated_busy_s = 0;
  double measured_cpu_s = 0;  // streams: CPU time of the stream's worker in its ops (StreamMeasure::cpu_s)
};

struct Validation {
  std::string plan;
  bool ok = true;
  std::string problem;
  double measured_step_time_s = 0, simulated_step_time_s = 0;
  double measured_device_peak_bytes = 0, simulated_device_peak_bytes = 0;
  double measured_host_peak_bytes = 0, simulated_host_peak_bytes = 0;
  double measured_nvme_peak_bytes = 0, simulated_nvme_peak_bytes = 0;
  std::string host_memory;  // pinned or pageable, and why
  std::string device;       // what ran the step (Device::describe)
  std::vector<LinkRow> links;
  std::vector<LinkRow> streams;  // busy seconds (bytes unused)
  std::string measured_bound_by, simulated_bound_by;
  std::vector<std::string> notes;
  DeviceRates rates;  // what the simulation was given: the median of the samples used
  // The probes: before the first step, then after each step (ValidateOptions::probe_between_steps).
  std::vector<DeviceRates> rate_samples;
  int first_sample_used = 0;            // samples before it (the one before the warm-up step) are reported, not used
  std::vector<RateSpread> rate_spread;  // of the samples used
  std::vector<double> sample_simulated_step_s;  // the step simulated at each sample used
  Drift drift;
  Measured measured;
  sim::StepResult simulated;
};

// (simulated - measured) / measured in percent; 0 when both are 0.
double error_pct(double simulated, double measured);

// The storage directories' probe: a scratch file per directory, striped and moved as the
// executor's NVMe streams move theirs (one ring, Options' queue depth, block and stripe), kept for
// every probe of a run and written once untimed when made. Why kept: the run rewrites its files'
// extents from step 2 on, while a fresh file's first write converts fallocated extents, and
// deleting files on an ext4 mounted with `discard` (this VM's) trims them at the next journal
// commit, under whatever I/O comes next. 64 MiB per directory (validate.cpp says why not more):
// a pass takes 20-60 ms here, short enough for one stall on a loaded VM to triple it, which is
// why validate probes several times over the run and takes the median.
class NvmeProbe {
 public:
  explicit NvmeProbe(const std::vector<std::filesystem::path>& dirs);
  ~NvmeProbe();
  NvmeProbe(const NvmeProbe&) = delete;
  NvmeProbe& operator=(const NvmeProbe&) = delete;
  double pass_Bps(bool write);  // one pass over every file, bytes per second
  std::uint64_t bytes() const;  // per pass, all directories together

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Measures the device's rates for `ir`'s shapes (a second or two): GEMMs, attention, memory-bound
// kernels and host-to-device copies on `device` (a CPU device of its own when null), DRAM, AdamW and
// the storage directories on the host (through `nvme` when given, else a probe of its own).
DeviceRates measure_rates(const schedule::StepIR& ir, const std::vector<std::filesystem::path>& storage_dirs,
                          Device* device = nullptr, const ProbeEffort& effort = {}, NvmeProbe* nvme = nullptr);

// `plan` on this machine: the GPU is the CPU device at `rates` with `device_bytes` of memory, the
// host this machine (a plan on the "local" node keeps its host: the calibration profile's), one
// drive per storage directory; and the efficiency figures to simulate it.
plan::Plan on_this_machine(const plan::Plan& plan, const DeviceRates& rates, double device_bytes, int storage_dirs);

// `cluster: {node: local}` in a scenario: this machine, as the catalog node "local" that
// `ftplan validate` adds before it reads the scenario. Its GPU is the executor's CPU device, its
// host the calibration profile's CPU (sockets, cores, threads, SIMD, DRAM bytes; DRAM bandwidth
// from the profile's best STREAM triad, else its firmware bound), its drives one "local-dir" per
// storage directory (sequential rates from the profile's 1 MiB runs where it has them). Returns
// `catalog` with the node and its parts added.
inline constexpr const char* kLocalNode = "local";
hardware::Catalog with_local_node(hardware::Catalog catalog, const hardware::CalibrationProfile& profile,
                                  int storage_dirs);
sim::Efficiency efficiency_of(const DeviceRates& rates);

Validation validate(const model::ModelSpec& model, const plan::Plan& plan, const ValidateOptions& options);

}  // namespace ftplan::exec
