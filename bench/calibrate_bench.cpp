// Speed goals of the calibration benchmarks themselves (issue "Calibration microbenchmarks"):
//  1. the AdamW step reaches at least 80% of (STREAM triad bandwidth / 28 B per parameter) at the
//     same thread count;
//  2. storage figures are within max(10%, twice fio's own run-to-run spread) of fio's, comparing
//     medians of interleaved runs of the same configuration.
// Prints the figures and PASS/FAIL per goal; not a timed test (machines differ).
// Usage: calibrate_bench [DIR] [--repeats N] [--seconds S] [--array-mib M] [--params-m P]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calibrate/cpu/cpu_bench.hpp"
#include "calibrate/storage/fio.hpp"
#include "runtime/measure.hpp"
#include "runtime/uring.hpp"

using namespace ftplan;
using namespace ftplan::calibrate;

int main(int argc, char** argv) {
  std::filesystem::path dir = "/var/tmp";
  int repeats = 7;
  double seconds = 1.0;
  std::size_t array_mib = 1024, params_m = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (a == "--array-mib" && i + 1 < argc)
      array_mib = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--params-m" && i + 1 < argc)
      params_m = std::strtoul(argv[++i], nullptr, 10);
    else
      dir = a;
  }
  bool ok = true;

  // --- 1. AdamW vs triad at each thread count -------------------------------------------------
  const auto cpus = runtime::allowed_cpus();
  fmt::print("AdamW vs STREAM triad (arrays 3 x {} MiB, {}M parameters, {} repeats)\n", array_mib, params_m, repeats);
  for (int threads : {1, static_cast<int>(cpus.size())}) {
    runtime::ThreadTeam team(std::vector<int>(cpus.begin(), cpus.begin() + threads));
    const auto dram = cpu::measure_dram(team, array_mib << 20, repeats);
    const double triad = dram[1].bandwidth_Bps;
    const auto adam = cpu::measure_adamw(team, params_m << 20, repeats, triad);
    const bool pass = adam.triad_fraction >= 0.8;
    ok = ok && pass;
    fmt::print(
        "  {} threads: copy {:.2f} GB/s (spread {:.0f}%), triad {:.2f} GB/s (spread {:.0f}%), AdamW {:.3f} G params/s "
        "(spread {:.0f}%) = {:.1f} GB/s at 28 B; triad bound {:.3f} G/s; fraction {:.2f}  {}\n",
        threads, dram[0].bandwidth_Bps / 1e9, 100 * runtime::relative_spread(dram[0].samples), triad / 1e9,
        100 * runtime::relative_spread(dram[1].samples), adam.params_per_s / 1e9,
        100 * runtime::relative_spread(adam.samples), adam.params_per_s * 28 / 1e9, triad / 28 / 1e9,
        adam.triad_fraction, pass ? "PASS (>= 0.80)" : "FAIL (< 0.80)");
    if (threads == static_cast<int>(cpus.size())) break;
  }

  // --- 2. Storage vs fio, interleaved ---------------------------------------------------------
  const auto fio = storage::find_fio();
  if (!fio) {
    fmt::print("fio not installed: storage goal not checked\n");
    return ok ? 0 : 1;
  }
  fmt::print("\nstorage on {} vs fio ({} interleaved runs of {:.1f} s each)\n", dir.string(), repeats, seconds);
  runtime::ScratchFile file(dir, 1ull << 30);
  runtime::run_io({&file}, {hardware::StorageOp::write, 1 << 20, 16}, 1e9, file.size());
  using hardware::StorageOp;
  const std::vector<runtime::IoPattern> patterns = {
      {StorageOp::read, 128 << 10, 1},  {StorageOp::read, 1 << 20, 16},  {StorageOp::read, 16 << 20, 4},
      {StorageOp::write, 128 << 10, 1}, {StorageOp::write, 1 << 20, 16}, {StorageOp::write, 16 << 20, 4},
      {StorageOp::randread, 4096, 1},   {StorageOp::randread, 4096, 64}, {StorageOp::randwrite, 4096, 64}};
  for (const auto& p : patterns) {
    std::vector<double> ours, theirs;
    for (int r = 0; r < repeats; ++r) {
      ours.push_back(runtime::run_io({&file}, p, seconds).bandwidth_Bps());
      theirs.push_back(storage::run_fio(*fio, {&file}, p, seconds).bandwidth_Bps);
    }
    const double mo = runtime::median(ours), mf = runtime::median(theirs);
    const double diff = mo / mf - 1;
    const double tolerance = std::max(0.10, 2 * runtime::relative_spread(theirs));
    const bool pass = std::abs(diff) <= tolerance;
    ok = ok && pass;
    fmt::print(
        "  {:>9} {:>6} KiB QD{:<2}: ours {:8.1f} MB/s (spread {:3.0f}%)  fio {:8.1f} MB/s (spread {:3.0f}%)  "
        "diff {:+5.1f}%  tolerance {:.0f}%  {}\n",
        hardware::to_string(p.op), p.block_bytes / 1024, p.queue_depth, mo / 1e6, 100 * runtime::relative_spread(ours),
        mf / 1e6, 100 * runtime::relative_spread(theirs), 100 * diff, 100 * tolerance, pass ? "PASS" : "FAIL");
  }
  fmt::print("\n{}\n", ok ? "all goals met" : "some goals missed");
  return ok ? 0 : 1;
}
