// The storage calibration: for each directory (and all of them at once, striped, when several are
// given) sequential read and write over block sizes and queue depths, random 4 KiB IOPS, each
// beside fio for the same configuration in interleaved runs; optionally a long sustained write to
// find where the drive's write cache runs out. Touches only files it creates, and removes them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/common.hpp"
#include "hardware/profile.hpp"
#include "runtime/measure.hpp"
#include "runtime/uring.hpp"

namespace ftplan::calibrate::storage {

struct PatternPlan {
  runtime::IoPattern pattern;
  bool with_fio = false;  // also run fio for it, interleaved with ours
};

struct SustainedPlan {
  std::uint64_t max_bytes = 0;  // per directory
  double max_s = 300;
  double window_s = 1;
  runtime::IoPattern pattern{hardware::StorageOp::write, 1 << 20, 32};
};

struct StoragePlan {
  std::vector<std::filesystem::path> dirs;
  std::uint64_t file_bytes = 256ull << 20;  // scratch file per directory
  double run_s = 0.5;                       // each timed run (ours and fio's alike)
  int repeats = 3;
  std::vector<PatternPlan> patterns;          // on each directory alone
  std::vector<PatternPlan> striped_patterns;  // on all directories at once, when more than one
  bool use_fio = true;
  std::optional<SustainedPlan> sustained;

  // The standard plans: quick (3 configurations beside fio, about 10 s a directory) and full (block
  // sizes 128 KiB..16 MiB x queue depths 1..64, at most 256 MiB in flight, random 4 KiB at QD 1 and 64;
  // 9 of them beside fio; about 85 s a directory).
  static StoragePlan quick(std::vector<std::filesystem::path> dirs);
  static StoragePlan full(std::vector<std::filesystem::path> dirs);
  // Number of progress steps measure_storage will report.
  int steps() const;
};

struct StorageResults {
  hardware::StorageSection section;
  std::vector<Comparison> comparisons;
  std::vector<hardware::ProfileDrive> drives;
  // The directories of the plan that gave no figure at all, each with the reason (read-only, full,
  // missing, no O_DIRECT...), in the plan's order.
  std::vector<std::pair<std::filesystem::path, std::string>> unmeasured;
};

// Runs the plan. Progress steps are reported through `progress` (`first_step` onwards, of `total`).
// Problems that stop one directory (no O_DIRECT, no room, io_uring refused) are noted and the rest goes on.
StorageResults measure_storage(const StoragePlan& plan, Progress& progress, int first_step, int total);

// Where the sustained-write rate drops: the first window from which `persist` windows in a row are
// all below `threshold` x the median of the windows before it (at least `min_before` of them).
struct WriteCacheKnee {
  bool found = false;
  std::size_t index = 0;     // first window after the cache ran out
  double burst_Bps = 0;      // median before
  double sustained_Bps = 0;  // median from `index` on (all windows when not found)
};
WriteCacheKnee find_write_cache_knee(const std::vector<double>& window_Bps, double threshold = 0.7, int persist = 3,
                                     std::size_t min_before = 2);

// The sustained write's rules, apart from the drive: measure_storage applies them to the windows
// it measures, a test to a synthetic drive. Write on after these windows (B/s each, in time order)
// at `elapsed_s`? No once `plan.max_s` has passed, nor once the drop has lasted
// kSustainedWindowsAfterDrop windows (enough to trust the rate after it).
inline constexpr std::size_t kSustainedWindowsAfterDrop = 10;
bool sustained_write_goes_on(const std::vector<double>& window_Bps, double elapsed_s, const SustainedPlan& plan);
// Fills the row's burst and sustained rates and its cache bytes (written before the drop, each
// window counted at `interval_s`; 0 when no drop was seen) from `row.samples`. Returns the knee.
WriteCacheKnee summarize_sustained_write(hardware::SustainedWriteSample& row);

}  // namespace ftplan::calibrate::storage
