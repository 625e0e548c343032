// `ftplan validate`: one plan predicted, then run for real on this machine, side by side. The
// plan's GPU becomes the executor's CPU device and its host and drives this machine's; the
// prediction takes the device's rates from a calibration profile measured apart from the run
// (ValidateOptions::profile: GEMMs over a grid of shapes, attention, memcpy, DRAM, AdamW, the
// storage directories' striped I/O; exec/rates.hpp), so what is compared is the simulator's
// mechanisms (streams, overlap, dependencies, buffer lifetimes, link sharing) *and* its reading of
// a calibration, not a datasheet. Rates probed from the run itself (in_run_rates) are a diagnostic.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor.hpp"
#include "hardware/profile.hpp"
#include "local_machine.hpp"
#include "model/model.hpp"
#include "plan/plan.hpp"
#include "rates.hpp"
#include "scale.hpp"
#include "sim/simulate.hpp"

namespace ftplan::exec {

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
  // The CPU device's rates measured apart from the run (a calibration profile's cpu_device
  // section): the step is predicted from them. Null: from the run's own probes (in_run_rates).
  const hardware::CpuDeviceSection* profile = nullptr;
  // Probe the device's rates at the step's own shapes before the run (and between steps) and
  // simulate at them too: with a profile, a diagnostic beside the prediction; without, the
  // comparison itself (one that checks mechanisms, not a prediction).
  bool in_run_rates = false;
  // In-run probes: between steps too (ProbeEffort kStepProbe), not only before the
  // run: the simulation takes each rate's median over the probes around the timed steps.
  bool probe_between_steps = true;
  // A run whose simulated step moves more than this over its rate samples is flagged
  // "rates drifted" (Validation::drift). The goal is 10%: past it, the comparison cannot
  // tell the simulator's error from the machine's.
  double drift_threshold_pct = 10;
  // Train for real (Options::train): the compute runs the decoder on the parameters the step
  // streams, and each step's loss is reported (Measured::losses); the step then times the
  // decoder's kernels, not the device's calibrated ones, so its timing is not the prediction's.
  bool train = false;
  double learning_rate = 1e-3;  // AdamW's, with train
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
  // What moved, counted where it moved (Measured::counted: the copy and NVMe calls' bytes), and
  // on the NVMe links the kernel's block-I/O counters over the same step; -1: not counted here.
  double counted_bytes = -1, block_bytes = -1;
};

struct Validation {
  std::string plan;
  bool ok = true;
  std::string problem;
  double measured_step_time_s = 0, simulated_step_time_s = 0;
  // The offload overhead: the step beyond the compute stream's busy time (what the tiers' copies,
  // flash I/O and CPU Adam add where they do not overlap the compute), measured and simulated;
  // both 0 for a plan that moves nothing between tiers.
  double measured_overhead_s = 0, simulated_overhead_s = 0;
  double measured_device_peak_bytes = 0, simulated_device_peak_bytes = 0;
  double measured_host_peak_bytes = 0, simulated_host_peak_bytes = 0;
  // Device peak with the kernels' scratch (the arena's bookkeeping leaves it out), and the
  // process's whole peak RSS beside the simulated device + host peaks (a CPU device's memory is
  // the host's); -1 where not measured.
  double measured_device_peak_with_scratch_bytes = -1;
  double measured_process_peak_bytes = -1;
  double measured_nvme_peak_bytes = 0, simulated_nvme_peak_bytes = 0;
  std::string host_memory;  // pinned or pageable, and why
  std::string device;       // what ran the step (Device::describe)
  std::vector<LinkRow> links;
  std::vector<LinkRow> streams;  // busy seconds (bytes unused)
  std::string measured_bound_by, simulated_bound_by;
  std::vector<std::string> notes;
  std::string rates_from;  // "profile" (ValidateOptions::profile) or "in-run"
  DeviceRates rates;       // what the simulation was given: the profile's, else the median of the samples used
  // With in-run probes, the step simulated at their median rates (with a profile: the diagnostic
  // beside the prediction; without: simulated_step_time_s itself).
  double in_run_simulated_step_time_s = 0;
  // The probes: before the first step, then after each step (ValidateOptions::probe_between_steps).
  std::vector<DeviceRates> rate_samples;
  int first_sample_used = 0;            // samples before it (the one before the warm-up step) are reported, not used
  std::vector<RateSpread> rate_spread;  // of the samples used
  std::vector<double> sample_simulated_step_s;  // the step simulated at each sample used
  Drift drift;
  WorkCheck work;  // the device's spot check of its products (none on a device without one)
  Measured measured;
  sim::StepResult simulated;
};

// (simulated - measured) / measured in percent; 0 when both are 0.
double error_pct(double simulated, double measured);

Validation validate(const model::ModelSpec& model, const plan::Plan& plan, const ValidateOptions& options);

}  // namespace ftplan::exec
