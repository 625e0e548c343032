// The executor's devices' rates as the simulator takes them (DeviceRates), measured two ways:
// at a step's own shapes during a run (measure_rates: validate's in-run probes, a diagnostic), and
// over a grid of shapes apart from any run (measure_cpu_device: `ftplan calibrate`'s cpu_device
// section), from which rates_from_profile reads a step's rates before it runs (issue 40).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device.hpp"
#include "hardware/profile.hpp"
#include "schedule/step_ir.hpp"
#include "sim/simulate.hpp"

namespace ftplan::exec {

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

// How much of the grid measure_cpu_device covers. quick: m of 4, 16, 128, 1024 by n and k of 128,
// 1024, 4096, three cold calls; full: m of 4 to 4096 and n, k of 64 to 4096, each 4x apart, five.
struct DeviceGrid {
  std::vector<std::int64_t> m, nk;
  int cold_calls = 5;
  double max_flops = 0;  // shapes of more FLOPs per call are not timed (the rate is flat there)
  std::vector<std::int64_t> attention_seq, attention_head_dim;
};
DeviceGrid device_grid(bool quick);

// The CPU device measured apart from any run, each part on the cores where validate's workers run
// it: GEMMs over `grid` in the three layouts, attention, a memory-bound kernel, memcpy, DRAM and
// AdamW, and the storage directories as the executor's NVMe streams move their files (each alone
// and, when several, striped over all). `progress` is told each part.
hardware::CpuDeviceSection measure_cpu_device(const DeviceGrid& grid, const std::vector<std::filesystem::path>& dirs,
                                              const std::function<void(const std::string&)>& progress = {});

// `ir`'s rates read from a profile's cpu_device section: every GEMM point (the simulator
// interpolates between them by shape), the attention rate at the step's attention shape (the
// nearest points, interpolated in log distance), the scalar rates, and the NVMe rates of the run
// with `storage_dirs` (the profile's row for the same directories, else for as many, else
// `problem` says why not). Empty `problem`: every rate the step needs was found.
DeviceRates rates_from_profile(const hardware::CpuDeviceSection& profile, const schedule::StepIR& ir,
                               const std::vector<std::filesystem::path>& storage_dirs, std::string& problem);

}  // namespace ftplan::exec
