// What the calibration's benchmarks hand their caller: comparisons of a measured figure with what
// bounds it, and progress. The library never prints (the CLI prints them). What they measure with
// (statistics, stopwatch, buffers, pinned threads) is runtime/measure.hpp, shared with exec/.
#pragma once

#include <string>
#include <string_view>

namespace ftplan::calibrate {

// One measured figure set beside what bounds it, for people to judge (printed by the CLI).
struct Comparison {
  std::string section;       // "cpu", "storage", "gemm", ...
  std::string item;          // "triad, 2 threads", "read 1 MiB QD32 /var/tmp"
  std::string unit;          // "B/s", "FLOP/s", "params/s", "IOPS", "W"
  double value = 0;          // median measured
  double spread = 0;         // relative spread of our samples
  double bound = 0;          // the physical bound; 0 = unknown
  std::string bound_source;  // "PCIe 4.0 x16", "datasheet", "channels x speed"
  double reference = 0;      // a standard tool's figure in the same run; 0 = none
  double reference_spread = 0;
  std::string reference_source;  // "fio", "STREAM triad / 28 B"
};

// Where a run stands, for a progress display.
class Progress {
 public:
  virtual ~Progress() = default;
  // Step `index` (0-based) of `total` starts.
  virtual void step(int index, int total, std::string_view label) = 0;
  // A benchmark has something to say that is not a number (a skipped part and why).
  virtual void note(std::string_view text) = 0;
};

// A Progress that says nothing (tests).
class SilentProgress : public Progress {
 public:
  void step(int, int, std::string_view) override {}
  void note(std::string_view) override {}
};

}  // namespace ftplan::calibrate
