// `ftplan validate`: one plan simulated and run for real on this machine, side by side. The plan's
// GPU becomes the executor's CPU device and its host and drives this machine's; the simulator is
// given the device's measured rates (GEMMs at the step's own shapes, attention, memcpy, AdamW, the
// storage directories' direct I/O), so what is compared is the simulator's *mechanisms* (streams,
// overlap, dependencies, buffer lifetimes, link sharing), not a datasheet.
#pragma once

#include <filesystem>
#include <functional>
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
};

struct ValidateOptions {
  int steps = 3;
  bool cuda = false;  // run on the CUDA device (cuda_device.hpp) instead of the CPU device
  std::vector<std::filesystem::path> storage_dirs;
  bool trace = false;
  // Keep each plan's on-flash training state in this directory (Options::state_file, named by
  // state_file_name) and resume from it: a validate killed and run again continues its steps.
  std::filesystem::path state_dir;
  std::function<void(const std::string&)> progress;
};

// A plan's name as a file name part: every character but letters and digits becomes '_'.
std::string file_tag(const std::string& plan_name);
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
  DeviceRates rates;  // what the simulation was given
  Measured measured;
  sim::StepResult simulated;
};

// (simulated - measured) / measured in percent; 0 when both are 0.
double error_pct(double simulated, double measured);

// Measures the device's rates for `ir`'s shapes (a second or two): GEMMs, attention, memory-bound
// kernels and host-to-device copies on `device` (a CPU device of its own when null), DRAM, AdamW and
// the storage directories on the host.
DeviceRates measure_rates(const schedule::StepIR& ir, const std::vector<std::filesystem::path>& storage_dirs,
                          Device* device = nullptr);

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
