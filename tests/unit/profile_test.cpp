#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "common/least_squares.hpp"
#include "hardware/profile_fit.hpp"
#include "io/profile_io.hpp"
#include "sim/simulate.hpp"
#include "test_support.hpp"

using namespace ftplan;
using namespace ftplan::hardware;

namespace {

// A profile with every section filled, including values that are awkward to print and parse back:
// non-terminating binary fractions, 17-digit integers, quotes and backslashes in text.
CalibrationProfile full_profile() {
  CalibrationProfile p;
  p.machine.hostname = "node-07";
  p.machine.date = "2026-05-01T12:00:00Z";
  p.machine.ftplan_version = "0.1.0";
  p.machine.kernel = "Linux 6.1.0-18-amd64";
  p.machine.cpu = {"AMD EPYC 9654 96-Core Processor", 2, 192, 384, 2, "avx512", 1.5e12};
  p.machine.gpus = {{0, "NVIDIA H100 80GB HBM3", "9.0", 85520809984, 5, 16},
                    {1, "NVIDIA H100 80GB HBM3", "9.0", 85520809984, 5, 16}};
  p.machine.gpu_driver_version = "580.65.06";
  p.machine.cuda_runtime_version = "13.0";
  p.machine.drives = {{"/scratch/a", "nvme0n1", "Micron_9550 \"MAX\" \\ 6.4TB", false},
                      {"/scratch/b", "nvme1n1", "", false}};
  p.machine.notes = "line one\nline two";
  p.settings = {"quick", 5};
  p.gemm = {{Dtype::bf16,
             "llama-3.1-8b/mlp_up.fwd/t4096",
             4096,
             28672,
             4096,
             7.1234567890123e14,
             989.4e12,
             {7.1e14, 7.1234567890123e14, 7.2e14}},
            {Dtype::fp8, "", 8192, 8192, 8192, 1.3e15, 0, {1.3e15}}};
  p.attention = {{Dtype::bf16, "cudnn-sdpa", "bwd", 4, 32, 8, 4096, 128, true, 3.3e14, {3.2e14, 3.3e14, 3.4e14}}};
  p.memory = {{0, "copy", 1073741824, 2.9e12, 3.35e12, {2.8e12, 2.9e12, 3.0e12}}};
  p.copy = {{CopyDirection::h2d, true, 268435456, 5.5e10, 6.3e10, {5.4e10, 5.5e10}},
            {CopyDirection::bidir, false, 1048576, 0.1, 0, {0.1}},
            {CopyDirection::h2h, true, 67108864, 1.2345678901234568e+17, 0, {1.2345678901234568e+17}}};
  p.collectives = {{CollectiveOp::reduce_scatter, 8, 1 << 30, 3.6e11, {3.5e11, 3.6e11, 3.7e11}}};
  p.storage.runs = {{{"/scratch/a", "/scratch/b"},
                     StorageOp::read,
                     1 << 20,
                     32,
                     2.4e10,
                     22888.2,
                     {2.3e10, 2.4e10},
                     2.5e10,
                     {2.5e10, 2.6e10}},
                    {{"/scratch/a"}, StorageOp::randread, 4096, 64, 4.1e9, 1e6, {4.1e9}, 0, {}}};
  p.storage.sustained_write = {{{"/scratch/a"}, 1 << 20, 32, 2e11, 1.0, 6e9, 3.1e9, 9.6e10, {6e9, 6e9, 3.1e9, 3.1e9}}};
  p.cpu.dram_bound_Bps = 921.6e9;
  p.cpu.dram = {{"copy", 192, 1 << 30, 6.1e11, {6.0e11, 6.1e11}}, {"triad", 192, 1 << 30, 6.3e11, {6.3e11}}};
  p.cpu.optimizer = {{"adamw", 192, 1 << 28, 2.1e10, 28, 0.93, {2.0e10, 2.1e10, 2.2e10}}};
  p.power = {{0, "gemm_bf16", 690.5, {688, 690.5, 699}}, {1, "idle", 71, {71}}};
  p.cpu_device.device = "the executor's CPU device";
  p.cpu_device.gemm = {{"nn", 512, 1024, 256, 3.9e10, {3.8e10, 3.9e10, 4.1e10}},
                       {"tn", 16, 64, 4096, 1.7e10, {1.7e10}}};
  p.cpu_device.attention = {{256, 256, 64, 3.2e10, {3.2e10, 3.3e10}}};
  p.cpu_device.rates = {{"memory_Bps", 4.3e10, {4.2e10, 4.3e10, 4.4e10}}, {"adam_params_per_s", 1.28e9, {1.28e9}}};
  p.cpu_device.storage = {{{"/scratch/a", "/scratch/b"}, 1 << 20, 1 << 20, 8, 5.7e9, 7.1e9, {5.6e9, 5.7e9}, {7.1e9}}};
  return p;
}

}  // namespace

TEST_CASE("a calibration profile survives writing and reading back unchanged") {
  const CalibrationProfile p = full_profile();
  const std::string text = io::profile_to_yaml(p);
  const CalibrationProfile q = io::parse_profile(text, "roundtrip.yaml");
  CHECK(q.machine == p.machine);
  CHECK(q.settings == p.settings);
  CHECK(q.gemm == p.gemm);
  CHECK(q.attention == p.attention);
  CHECK(q.memory == p.memory);
  CHECK(q.copy == p.copy);
  CHECK(q.collectives == p.collectives);
  CHECK(q.storage == p.storage);
  CHECK(q.cpu == p.cpu);
  CHECK(q.power == p.power);
  CHECK(q.cpu_device == p.cpu_device);
  CHECK(q == p);
  // And it is a fixed point: writing what was read gives the same text.
  CHECK(io::profile_to_yaml(q) == text);
}

TEST_CASE("a CPU-only profile (no GPU tables) round-trips with its empty sections") {
  CalibrationProfile p;
  p.machine.date = "2026-05-01T12:00:00Z";
  p.machine.cpu.model = "AMD EPYC";
  p.machine.notes = "no CUDA device found";
  p.cpu.dram = {{"triad", 2, 1e8, 1.8e10, {1.7e10, 1.8e10, 1.9e10}}};
  const std::string text = io::profile_to_yaml(p);
  CHECK(text.find("gemm: []") != std::string::npos);
  CHECK(text.find("gpus: []") != std::string::npos);
  CHECK(io::parse_profile(text, "cpu-only.yaml") == p);
}

TEST_CASE("a broken profile reports every problem with file, line, column and key") {
  const std::string text = R"(schema_version: 1
machine:
  date: "2026-05-01T12:00:00Z"
  cpu: {model: "x", cores: -3}
gemm:
  - dtype: bf17
    m: 4096
    n: 4096
    k: 0
    flops_per_s: 9e14
    samples: [1e14, 2e14]
copy:
  - direction: h2d
    pinned: maybe
    bytes: 1048576
    bandwidth_Bps: 2e10
    samples: []
storage:
  runs:
    - paths: [/tmp]
      op: read
      block_bytes: 1000
      queue_depth: 0
      bandwidth_Bps: 1e9
      samples: [1e9, fast]
cpu:
  optimiser: []
cpu_device:
  gemm:
    - layout: tt
      m: 16
      n: 64
      k: 64
      flops_per_s: 1e10
      samples: [1e10]
  rates:
    - name: copy_Bps
      value: 2e10
      samples: [1e10]
    - name: copy_Bps
      value: 1e10
      samples: [1e10]
  storage:
    - paths: [/tmp]
      block_bytes: 1048576
      stripe_bytes: 1048576
      queue_depth: 8
      read_Bps: 1e9
      read_samples: [1e9]
      write_samples: [1e9]
)";
  const std::string msg = test::input_error_of([&] { io::parse_profile(text, "bad.yaml"); });
  INFO(msg);
  CHECK(msg.find("bad.yaml:4:") != std::string::npos);
  CHECK(msg.find("machine.cpu.cores: must be between 0 and") != std::string::npos);
  CHECK(msg.find(
            "bad.yaml:6:12: gemm[0].dtype: 'bf17' is not one of fp32, tf32, bf16, fp16, fp8 (did you mean 'bf16'?)") !=
        std::string::npos);
  CHECK(msg.find("gemm[0].k: must be at least 1") != std::string::npos);
  // 9e14 is above both samples: a value is the median of its samples.
  CHECK(msg.find("bad.yaml:10:18: gemm[0].flops_per_s: 900000000000000 lies outside its samples") != std::string::npos);
  CHECK(msg.find("copy[0].pinned: expected true or false; got 'maybe'") != std::string::npos);
  CHECK(msg.find("copy[0].samples: needs at least one sample") != std::string::npos);
  CHECK(msg.find("storage.runs[0].block_bytes: must be a multiple of 512 (O_DIRECT); got 1000") != std::string::npos);
  CHECK(msg.find("storage.runs[0].queue_depth: must be between 1 and 65536; got 0") != std::string::npos);
  CHECK(msg.find("bad.yaml:25:22: storage.runs[0].samples[1]: expected a number; got 'fast'") != std::string::npos);
  CHECK(msg.find("cpu.optimiser: unknown key (did you mean 'optimizer'?)") != std::string::npos);
  CHECK(msg.find("cpu_device.gemm[0].layout: 'tt' is not one of nn, nt, tn") != std::string::npos);
  CHECK(msg.find("cpu_device.rates[0].value: 20000000000 lies outside its samples") != std::string::npos);
  CHECK(msg.find("cpu_device.rates[1].name: 'copy_Bps' is given twice") != std::string::npos);
  CHECK(msg.find("bad.yaml:44:7: cpu_device.storage[0].write_Bps: is required") != std::string::npos);
}

TEST_CASE("a profile of another schema version or without a machine is refused plainly") {
  const std::string msg = test::input_error_of([] { io::parse_profile("schema_version: 7\ngemm: []\n", "old.yaml"); });
  CHECK(
      msg.find("old.yaml:1:17: schema_version: this build of ftplan reads calibration profiles of version 1; got 7") !=
      std::string::npos);
  CHECK(msg.find("machine: is required") != std::string::npos);
  CHECK(test::input_error_of([] {
          io::load_profile(test::data_dir() / "no-such-profile.yaml");
        }).find("no such file") != std::string::npos);
}

TEST_CASE("the shipped dev-VM profile is valid and is what it says: CPU and storage, no GPU tables") {
  const auto p = io::load_profile(test::zoo_dir() / "hardware" / "profiles" / "dev-vm-cpu-storage.yaml");
  CHECK(p.machine.gpus.empty());
  CHECK(p.gemm.empty());
  CHECK(p.machine.notes.find("no CUDA device found") != std::string::npos);
  REQUIRE(p.cpu.optimizer.size() == 2);                                  // 1 thread and all threads
  for (const auto& o : p.cpu.optimizer) CHECK(o.triad_fraction >= 0.8);  // the issue's goal, met when measured
  CHECK_FALSE(p.storage.runs.empty());
  int beside_fio = 0;
  for (const auto& r : p.storage.runs) {
    CHECK_FALSE(r.samples.empty());
    beside_fio += r.fio_samples.empty() ? 0 : 1;
  }
  CHECK(beside_fio == 9);  // the full plan's configurations compared with fio
}

TEST_CASE("a line fitted by least squares, plain and weighted") {
  /* x = 0, 1, 2; y = 1, 3, 4. Mean x 1, mean y 8/3; slope = sum (x-1)(y-8/3) / sum (x-1)^2
   * = (5/3 + 0 + 4/3) / 2 = 1.5; intercept = 8/3 - 1.5 = 7/6. Residuals -1/6, 1/3, -1/6:
   * rms = sqrt((1/36 + 1/9 + 1/36) / 3) = sqrt(1/18).                                          */
  const auto f = fit_line({0, 1, 2}, {1, 3, 4});
  REQUIRE(f);
  CHECK(f->slope == doctest::Approx(1.5));
  CHECK(f->intercept == doctest::Approx(7.0 / 6.0));
  CHECK(f->rms_residual == doctest::Approx(std::sqrt(1.0 / 18.0)));
  CHECK(f->points == 3);
  /* Weight 0 drops a point: through (0, 1) and (1, 3) alone, y = 1 + 2x exactly. */
  const auto g = fit_line({0, 1, 2}, {1, 3, 4}, {1, 1, 0});
  REQUIRE(g);
  CHECK(g->slope == doctest::Approx(2));
  CHECK(g->intercept == doctest::Approx(1));
  CHECK(g->points == 2);
  /* A heavy middle point pulls the line: weights 1, 4, 1. Sums: S = 6, Sx = 6, Sy = 17,
   * Sxx = 8, Sxy = 20; slope = (S Sxy - Sx Sy) / (S Sxx - Sx^2) = (120 - 102) / (48 - 36) = 1.5,
   * intercept = (Sy - slope Sx) / S = (17 - 9) / 6 = 4/3.                                       */
  const auto h = fit_line({0, 1, 2}, {1, 3, 4}, {1, 4, 1});
  REQUIRE(h);
  CHECK(h->slope == doctest::Approx(1.5));
  CHECK(h->intercept == doctest::Approx(4.0 / 3.0));
  // Undetermined: one x, sizes that differ, a value that is not finite.
  CHECK_FALSE(fit_line({2, 2, 2}, {1, 2, 3}));
  CHECK_FALSE(fit_line({1}, {1}));
  CHECK_FALSE(fit_line({1, 2}, {1}));
  CHECK_FALSE(fit_line({1, 2}, {1, std::nan("")}));
}

TEST_CASE("the copy model: latency and bandwidth recovered from every sample, not two rows") {
  /* Synthetic copies from t = 10 us + n / 25 GB/s, at 64 KiB, 1 MiB and 64 MiB: each sample's rate
   * is n / t. The fit gives the model back; another direction's rows and the pageable copies (rates
   * a sixth of these) take no part.                                                              */
  const double alpha = 10e-6, beta = 25e9;
  std::vector<CopySample> rows;
  for (const double n : {65536.0, 1048576.0, 67108864.0}) {
    const double rate = n / (alpha + n / beta);
    rows.push_back({CopyDirection::h2d, true, n, rate, 0, {rate, rate}});
    rows.push_back({CopyDirection::h2d, false, n, rate / 6, 0, {rate / 6}});
    rows.push_back({CopyDirection::d2h, true, n, rate / 2, 0, {rate / 2}});
  }
  const auto m = fit_copy_model(rows, CopyDirection::h2d, true);
  REQUIRE(m);
  CHECK(m->latency_s * 1e6 == doctest::Approx(alpha * 1e6));  // in us: Approx's tolerance is absolute near 0
  CHECK(m->bandwidth_Bps == doctest::Approx(beta));
  CHECK(m->samples == 6);
  CHECK(m->rms_relative == doctest::Approx(0).epsilon(1e-9));
  // One size only: latency and bandwidth cannot be told apart.
  CHECK_FALSE(fit_copy_model({rows[0]}, CopyDirection::h2d, true));
  CHECK_FALSE(fit_copy_model(rows, CopyDirection::bidir, true));
}

TEST_CASE("the simulator's per-copy cost is the copy model's latency (every sample, not two rows)") {
  // Three pinned H2D sizes on t = 10 us + n / 25 GB/s, the 64 KiB one noisy (8 and 12 us more):
  // two rows (the smallest and the largest) would give latency = t(64 KiB) - 64 KiB / rate(64 MiB);
  // the simulator takes the least-squares fit over all samples (fit_copy_model).
  const double alpha = 10e-6, beta = 25e9;
  ftplan::hardware::CalibrationProfile prof;
  for (const double n : {65536.0, 1048576.0, 67108864.0}) {
    const double t = alpha + n / beta;
    std::vector<double> samples = {n / t, n / t};
    if (n == 65536.0) samples = {n / (t + 8e-6), n / (t + 12e-6)};
    prof.copy.push_back({CopyDirection::h2d, true, n, samples[0], 0, samples});
  }
  const auto& gpu = *test::catalog().gpu("h100-sxm-80gb");
  const auto eff = ftplan::sim::efficiency_from_profile(prof, gpu, ftplan::hardware::Dtype::bf16);
  const auto fit = fit_copy_model(prof.copy, CopyDirection::h2d, true);
  REQUIRE(fit);
  CHECK(eff.copy_latency_s * 1e6 == doctest::Approx(fit->latency_s * 1e6));  // in us: Approx is absolute near 0
  CHECK(eff.copy_latency_s > alpha);                                         // the noisy small copies pull it up
  // ... and it is not what the two rows give (18.0 us here; the fit, 18.9 us, weighs all six).
  const double two_rows = 65536.0 / prof.copy[0].bandwidth_Bps - 65536.0 / prof.copy[2].bandwidth_Bps;
  CHECK(eff.copy_latency_s * 1e6 != doctest::Approx(two_rows * 1e6));
}

TEST_CASE("the copy model of noisy samples is the relative least-squares line") {
  /* 1, 2 and 4 MB copied in 60, 100 and 190 us (rates 16.7, 20 and 21.05 GB/s). In us and MB, fit
   * t = a + b n with weights 1/t^2 (relative residuals). Weighted normal equations, w = 1/3600,
   * 1/10000, 1/36100: S = sum w, Sx = sum w n, Sy = sum w t, Sxx = sum w n^2, Sxy = sum w n t;
   * b = (S Sxy - Sx Sy) / (S Sxx - Sx^2) = 11984/281 us/MB, a = (Sy - b Sx) / S = 4732/281 us.
   * So latency 16.84 us and bandwidth 281/11984 MB/us = 23.45 GB/s. (The unweighted line, 15 us and
   * 22.95 GB/s, would let the 4 MB copy's time decide; the two-point rule of the smallest and
   * largest rows gave 60 - 1 MB / 21.05 GB/s = 12.5 us from two rows alone.) Each row's relative residual: -0.0085,
   * +0.0214, -0.0135.                                                                            */
  const std::vector<CopySample> rows = {{CopyDirection::h2d, true, 1e6, 1e6 / 60e-6, 0, {1e6 / 60e-6}},
                                        {CopyDirection::h2d, true, 2e6, 2e6 / 100e-6, 0, {2e6 / 100e-6}},
                                        {CopyDirection::h2d, true, 4e6, 4e6 / 190e-6, 0, {}}};  // median only
  const auto m = fit_copy_model(rows, CopyDirection::h2d, true);
  REQUIRE(m);
  CHECK(m->latency_s * 1e6 == doctest::Approx(4732.0 / 281.0));  // in us: Approx's tolerance is absolute near 0
  CHECK(m->bandwidth_Bps == doctest::Approx(281.0 / 11984.0 * 1e12));
  CHECK(m->samples == 3);
  CHECK(m->rms_relative ==
        doctest::Approx(std::sqrt((0.00854093 * 0.00854093 + 0.02135231 * 0.02135231 + 0.01352313 * 0.01352313) / 3))
            .epsilon(1e-5));
}

TEST_CASE("the GEMM curve: peak fraction and k0 of fraction = f * k / (k + k0)") {
  /* Synthetic: f = 0.8, k0 = 128, at k = 256, 1024, 4096 (fractions 0.5333, 0.7111, 0.7754 of a
   * 1000 TFLOP/s peak), each with the same m and n: the fit gives the curve back.                 */
  std::vector<GemmSample> rows;
  for (const std::int64_t k : {256, 1024, 4096}) {
    const double f = 0.8 * static_cast<double>(k) / (static_cast<double>(k) + 128);
    rows.push_back({Dtype::bf16, "", 4096, 4096, k, f * 1e15, 0, {f * 1e15, f * 1e15, f * 1e15}});
  }
  rows.push_back({Dtype::fp8, "", 4096, 4096, 256, 1e14, 0, {1e14}});  // another dtype: not fitted
  const auto c = fit_gemm_curve(rows, Dtype::bf16, 1e15);
  REQUIRE(c);
  CHECK(c->peak_fraction == doctest::Approx(0.8));
  CHECK(c->k0 == doctest::Approx(128));
  CHECK(c->samples == 9);
  CHECK(c->fraction(128) == doctest::Approx(0.4));
  /* Noisy: 0.50, 0.70, 0.78 at k = 256, 1024, 4096. Fit 1/f = a + b/k with weights f^2: the
   * weighted normal equations give a = 2807740/2272731, b = 445276160/2272731, so the peak
   * fraction is 1/a = 0.80945 and k0 = b/a = 158.59.                                            */
  const std::vector<GemmSample> noisy = {{Dtype::bf16, "", 8192, 8192, 256, 0.50e15, 1e15, {0.50e15}},
                                         {Dtype::bf16, "", 8192, 8192, 1024, 0.70e15, 1e15, {0.70e15}},
                                         {Dtype::bf16, "", 8192, 8192, 4096, 0.78e15, 1e15, {0.78e15}}};
  const auto d = fit_gemm_curve(noisy, Dtype::bf16);  // each row's own peak
  REQUIRE(d);
  CHECK(d->peak_fraction == doctest::Approx(2272731.0 / 2807740.0));
  CHECK(d->k0 == doctest::Approx(445276160.0 / 2807740.0));
  /* Falling with k (0.8 at k = 256, 0.7 at 4096): no fixed cost to see, the constant model. Its
   * weighted least-squares 1/f = sum(w y) / sum(w), y = 1/f, w = 1/y^2 = f^2: (0.8 + 0.7) /
   * (0.64 + 0.49) = 1.5 / 1.13, so f = 1.13 / 1.5 = 0.75333 and k0 = 0.                         */
  const std::vector<GemmSample> falling = {{Dtype::bf16, "", 8192, 8192, 256, 0.8e15, 1e15, {0.8e15}},
                                           {Dtype::bf16, "", 8192, 8192, 4096, 0.7e15, 1e15, {0.7e15}}};
  const auto e = fit_gemm_curve(falling, Dtype::bf16);
  REQUIRE(e);
  CHECK(e->k0 == 0);
  CHECK(e->peak_fraction == doctest::Approx(1.13 / 1.5));
  CHECK_FALSE(fit_gemm_curve(noisy, Dtype::fp8));
  CHECK_FALSE(fit_gemm_curve({{Dtype::bf16, "", 1, 1, 1, 1e12, 0, {1e12}}}, Dtype::bf16));  // no peak known
}
