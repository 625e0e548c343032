// `ftplan calibrate`: measures this machine and returns a calibration profile
// (docs/calibration-profile.md) plus each figure beside its physical bound and, where a standard
// tool exists, that tool's figure from the same run. Runs what the machine has: CPU and DRAM
// always, storage on the directories given, the GPU part when a CUDA device is usable.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common.hpp"
#include "hardware/hardware.hpp"
#include "hardware/profile.hpp"
#include "model/zoo.hpp"

namespace ftplan::calibrate {

struct Options {
  // Quick: smaller arrays and files, fewer configurations and repeats (under 20 s for CPU and
  // storage on a small machine); full: the whole grid (under 2 minutes).
  bool quick = false;
  bool cpu = true;
  bool gpu = true;
  // Directories whose drives are measured, each alone and (when several) all at once. Empty: none.
  std::vector<std::filesystem::path> storage_dirs;
  bool fio = true;  // run fio beside the storage benchmark, when installed
  // Opt-in: write on until the drive's write cache runs out (or these limits are reached).
  bool sustained_write = false;
  std::uint64_t sustained_bytes = 0;  // per directory; 0 = half the free space, at most 256 GiB
  double sustained_s = 300;
  // Repeats per measurement; 0 = the mode's default (quick 3 to 5, full 5 to 10).
  int repeats = 0;
  // DRAM bound (channels x speed x 8 B) when known from outside; 0 = from dmidecode, if readable.
  double dram_bound_Bps = 0;
  std::string dram_bound_source;
  // For the GPU part: models whose layer GEMMs are timed, the token counts, and the catalog (bounds).
  const model::Zoo* zoo = nullptr;
  const hardware::Catalog* catalog = nullptr;
  std::string catalog_gpu;                // catalog entry of the GPU; "" = match by device name
  std::vector<std::string> gemm_models;   // empty = the mode's default (llama-3.1-8b; full adds llama-3.1-70b)
  std::vector<std::int64_t> gemm_tokens;  // empty = quick {4096}, full {1024, 4096, 16384}
};

struct Calibration {
  hardware::CalibrationProfile profile;
  std::vector<Comparison> comparisons;
  std::vector<std::string> notes;  // what was skipped and why (also in profile.machine.notes)
};

// Runs everything the options ask for that this machine has. Problems that stop one part (no
// device, no O_DIRECT on a directory) become notes; the rest is measured. But when storage
// directories are given and not one of them gives a figure, it throws SystemError with
// each directory's reason (before the GPU part): storage was asked for and nothing was measured.
Calibration run_calibration(const Options& options, Progress& progress);

// The models fitted to a profile's samples (hardware/profile_fit.hpp), as rows beside the
// measurements (section "fit"; spread = the fit's root-mean-square relative residual): for each
// copy direction and kind measured at two sizes or more, its latency and asymptotic bandwidth; for
// each GEMM dtype with a known peak, its k -> infinity fraction of peak and k0. run_calibration
// appends them.
std::vector<Comparison> model_fits(const hardware::CalibrationProfile& profile);

}  // namespace ftplan::calibrate
