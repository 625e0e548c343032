#include "calibrate/cpu/cpu_bench.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "runtime/kernels.hpp"
#include "runtime/measure.hpp"

namespace ftplan::calibrate::cpu {

using hardware::CopyDirection;
using hardware::CopySample;
using hardware::DramSample;
using hardware::OptimizerSample;

std::vector<DramSample> measure_dram(runtime::ThreadTeam& team, std::size_t array_bytes, int repeats) {
  const std::size_t n = array_bytes / sizeof(double);
  runtime::AlignedBuffer a(n * sizeof(double)), b(n * sizeof(double)), c(n * sizeof(double));
  double* pa = a.as<double>();
  double* pb = b.as<double>();
  double* pc = c.as<double>();
  const int threads = team.size();
  // First touch, with the same slices the kernels use (STREAM initialises in a parallel loop too).
  team.run([&](int t) {
    const runtime::Slice s = runtime::slice_of(n, t, threads);
    for (std::size_t i = s.begin; i < s.end; ++i) pa[i] = 1.0, pb[i] = 2.0, pc[i] = 0.0;
  });
  DramSample copy{"copy", threads, static_cast<double>(n * sizeof(double)), 0, {}};
  DramSample triad{"triad", threads, static_cast<double>(n * sizeof(double)), 0, {}};
  const auto copy_pass = [&](int t) {
    const runtime::Slice s = runtime::slice_of(n, t, threads);
    runtime::stream_copy(pc + s.begin, pa + s.begin, s.end - s.begin);
  };
  const auto triad_pass = [&](int t) {
    const runtime::Slice s = runtime::slice_of(n, t, threads);
    runtime::stream_triad(pa + s.begin, pb + s.begin, pc + s.begin, 3.0, s.end - s.begin);
  };
  team.run(copy_pass);  // warm-up (page tables, TLBs, frequency)
  team.run(triad_pass);
  for (int r = 0; r < repeats; ++r) {
    // Interleaved as STREAM does, so both see the same machine state.
    copy.samples.push_back(16.0 * static_cast<double>(n) / team.run(copy_pass));
    triad.samples.push_back(24.0 * static_cast<double>(n) / team.run(triad_pass));
  }
  copy.bandwidth_Bps = runtime::median(copy.samples);
  triad.bandwidth_Bps = runtime::median(triad.samples);
  return {copy, triad};
}

OptimizerSample measure_adamw(runtime::ThreadTeam& team, std::size_t params, int repeats, double triad_Bps) {
  runtime::AlignedBuffer p(params * 4), g(params * 4), m(params * 4), v(params * 4);
  float* pp = p.as<float>();
  float* pg = g.as<float>();
  float* pm = m.as<float>();
  float* pv = v.as<float>();
  const int threads = team.size();
  team.run([&](int t) {
    const runtime::Slice s = runtime::slice_of(params, t, threads);
    for (std::size_t i = s.begin; i < s.end; ++i) {
      pp[i] = 0.01f * static_cast<float>(i % 97);
      pg[i] = 1e-3f * static_cast<float>(static_cast<int>(i % 13) - 6);
      pm[i] = 0.0f;
      pv[i] = 0.0f;
    }
  });
  const runtime::AdamW h;
  int step = 0;
  const auto pass = [&](int t) {
    const runtime::Slice s = runtime::slice_of(params, t, threads);
    runtime::adamw_step(pp + s.begin, pg + s.begin, pm + s.begin, pv + s.begin, s.end - s.begin, h, step);
  };
  OptimizerSample out;
  out.optimizer = "adamw";
  out.threads = threads;
  out.params = static_cast<std::int64_t>(params);
  out.bytes_per_param = kAdamWBytesPerParam;
  step = 1;
  team.run(pass);  // warm-up
  for (int r = 0; r < repeats; ++r) {
    step = r + 2;
    out.samples.push_back(static_cast<double>(params) / team.run(pass));
  }
  out.params_per_s = runtime::median(out.samples);
  if (triad_Bps > 0) out.triad_fraction = out.params_per_s / (triad_Bps / kAdamWBytesPerParam);
  return out;
}

std::vector<CopySample> measure_host_copy(runtime::ThreadTeam& team, const std::vector<std::size_t>& sizes,
                                          int repeats) {
  std::vector<CopySample> rows;
  const int threads = team.size();
  for (const std::size_t bytes : sizes) {
    runtime::AlignedBuffer src(bytes), pinned(bytes), pageable(bytes);
    std::memset(src.data(), 1, bytes);
    std::memset(pageable.data(), 0, bytes);
    // Page-locking faults every page in and keeps it resident: what cudaHostAlloc gives a staging buffer.
    const bool locked = mlock(pinned.data(), bytes) == 0;
    if (!locked) std::memset(pinned.data(), 0, bytes);
    for (const bool to_pinned : {true, false}) {
      if (to_pinned && !locked) continue;
      std::byte* dst = to_pinned ? pinned.data() : pageable.data();
      // Small copies repeat inside one timed pass so that waking the team (tens of us) stays
      // below 1% of the time measured.
      const std::size_t iterations = std::max<std::size_t>(1, (std::size_t{64} << 20) / bytes);
      const auto pass = [&](int t) {
        const runtime::Slice s = runtime::slice_of(bytes, t, threads, 4096);
        for (std::size_t k = 0; k < iterations; ++k) std::memcpy(dst + s.begin, src.data() + s.begin, s.end - s.begin);
      };
      team.run(pass);
      CopySample row{CopyDirection::h2h, to_pinned, static_cast<double>(bytes), 0, 0, {}};
      for (int r = 0; r < repeats; ++r) row.samples.push_back(static_cast<double>(bytes * iterations) / team.run(pass));
      row.bandwidth_Bps = runtime::median(row.samples);
      rows.push_back(std::move(row));
    }
    if (locked) munlock(pinned.data(), bytes);
  }
  return rows;
}

}  // namespace ftplan::calibrate::cpu
