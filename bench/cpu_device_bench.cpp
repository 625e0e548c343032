// The CPU device's mechanisms behind the validation matrix's misses (issue 18, docs/validation.md),
// each in thread CPU time so that a machine shared with other work still answers:
//  1. a GEMM of the step's shapes with the other core idle, then with a thread copying 16 MiB
//     blocks without pause pinned to another core (is there a shared cache or DRAM effect to
//     model?);
//  2. a backward's input gradient dA = dC B^T as the device runs it against the plain product of
//     the same shape (what validate timed in its place before GEMM points had a layout);
//  3. calibrate's AdamW on gradients read in place against gathered into a buffer first.
// Prints figures; not a test.
//
//   build/bench/cpu_device_bench
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "exec/cpu_device.hpp"
#include "runtime/kernels.hpp"

namespace {

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

bool pin(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Median thread CPU seconds of 15 calls of `f`.
template <class F>
double median_cpu(F f) {
  std::vector<double> t;
  for (int i = 0; i < 15; ++i) {
    const double t0 = cpu_s();
    f();
    t.push_back(cpu_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  using namespace ftplan;
  exec::CpuDevice device(std::uint64_t{1} << 20, 1);
  struct Shape {
    std::int64_t m, n, k;
  };
  // Hidden 256 at 512 tokens per micro-batch, hidden 1024 at 64 (the matrix's two scales).
  const Shape shapes[] = {{512, 1024, 256}, {64, 3072, 1024}, {64, 7168, 1024}, {64, 1024, 3584}};
  const auto gflops = [](const Shape& s, double t) { return 2.0 * static_cast<double>(s.m * s.n * s.k) / t * 1e-9; };

  // 1. A copy on another core.
  std::atomic<int> mode{0};  // 0 idle, 1 copying, 2 stop
  const bool pinned = pin(0);
  std::thread other([&] {
    pin(1);
    std::vector<char> from(16 << 20, 1), to(16 << 20);
    while (mode.load() != 2) {
      if (mode.load() == 1)
        std::memcpy(to.data(), from.data(), from.size());
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  fmt::print("1. GEMM GFLOP/s of thread CPU time, the other core idle / copying{}:\n",
             pinned ? "" : " (could not pin: cores unknown)");
  for (const Shape& s : {shapes[0], shapes[1]}) {
    double rate[2] = {0, 0};
    for (int round = 0; round < 3; ++round)
      for (int copying = 0; copying < 2; ++copying) {
        mode = copying;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        rate[copying] += gflops(s, median_cpu([&] { device.gemm(0, exec::GemmCall{s.m, s.n, s.k}); })) / 3;
      }
    fmt::print("   {} x {} x {}: {:.1f} / {:.1f}\n", s.m, s.n, s.k, rate[0], rate[1]);
  }
  mode = 2;
  other.join();

  // 2. dA = dC B^T (the op's m, n, k; dA is m x k over n) against C = A B of shape (m, k, n).
  fmt::print("2. input gradient GFLOP/s: plain product of its shape / dC B^T as the device runs it:\n");
  for (const Shape& s : shapes) {
    const Shape da{s.m, s.k, s.n};
    const double plain = gflops(da, median_cpu([&] { device.gemm(0, exec::GemmCall{da.m, da.n, da.k}); }));
    exec::GemmCall call{s.m, s.n, s.k, true, false, 1};
    const double real = gflops(da, median_cpu([&] { device.gemm(0, call); }));
    fmt::print("   op {} x {} x {}: {:.1f} / {:.1f} ({:+.1f}%)\n", s.m, s.n, s.k, plain, real,
               100.0 * (real - plain) / plain);
  }

  // 3. AdamW over 16M parameters: gradients in place / gathered first (zero fill and copy).
  const std::size_t n = std::size_t{16} << 20;
  std::vector<float> p(n, 0.1f), g(n, 0.01f), m(n, 0.0f), v(n, 0.0f), gather(n);
  int step = 0;
  const double in_place =
      median_cpu([&] { runtime::adamw_step(p.data(), g.data(), m.data(), v.data(), n, runtime::AdamW{}, ++step); });
  const double gathered = median_cpu([&] {
    std::fill(gather.begin(), gather.end(), 0.0f);
    std::memcpy(gather.data(), g.data(), 4 * n);
    runtime::adamw_step(p.data(), gather.data(), m.data(), v.data(), n, runtime::AdamW{}, ++step);
  });
  fmt::print("3. AdamW of {}M parameters, thread CPU: in place {:.1f} ms, gathered {:.1f} ms ({:.2f}x)\n", n >> 20,
             in_place * 1e3, gathered * 1e3, gathered / in_place);
}
