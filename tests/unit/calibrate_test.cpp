// The calibration library on small sizes: the kernels compute what they claim, measurements come
// back positive, consistent with their samples and below physical limits, storage touches only its
// own files and removes them, and the pieces that decide things (knee finding, shapes, catalog
// matching, fio's output) give the worked answers. No timing is compared with a threshold.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "calibrate/calibrate.hpp"
#include "calibrate/common.hpp"
#include "calibrate/cpu/cpu_bench.hpp"
#include "calibrate/cuda/cuda_bench.hpp"
#include "calibrate/storage/fio.hpp"
#include "calibrate/storage/storage_bench.hpp"
#include "calibrate/workload.hpp"
#include "io/profile_io.hpp"
#include "runtime/kernels.hpp"
#include "runtime/measure.hpp"
#include "runtime/uring.hpp"
#include "test_support.hpp"

using namespace ftplan;
using namespace ftplan::calibrate;
namespace fs = std::filesystem;
using hardware::StorageOp;

namespace {

// A fresh directory on a real disk (under the build tree), removed afterwards.
struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& name) {
    path = fs::path(FTPLAN_TEST_SCRATCH) / fmt_name(name);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static std::string fmt_name(const std::string& name) { return name + "-" + std::to_string(getpid()); }
  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(path)) ++n;
    return n;
  }
};

// The cases that time this machine's CPU, memory and drives: CTest runs them as their own test
// (unit_hardware), one at a time with the other drive benchmark (tests/CMakeLists.txt). What they
// assert holds on a loaded machine too: structure and bounds, never a rate.
const auto kHardware = doctest::test_suite("hardware");

// 1 TB/s is beyond any host's DRAM or any single drive; a figure above it is a timing bug.
constexpr double kPhysicalLimit_Bps = 1e12;

bool median_within_samples(double value, const std::vector<double>& samples) {
  if (samples.empty()) return false;
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  return value >= *lo && value <= *hi;
}

}  // namespace

TEST_CASE("median and spread of repeats") {
  CHECK(runtime::median({3, 1, 2}) == 2);
  CHECK(runtime::median({4, 1, 3, 2}) == doctest::Approx(2.5));
  CHECK(runtime::median({}) == 0);
  /* (max - min) / runtime::median = (12 - 8) / 10 = 0.4 */
  CHECK(runtime::relative_spread({8, 10, 12}) == doctest::Approx(0.4));
  CHECK(runtime::relative_spread({5}) == 0);
}

TEST_CASE("slices cover the range once, in grain-sized pieces") {
  for (const int count : {1, 2, 3, 7}) {
    std::size_t next = 0;
    for (int i = 0; i < count; ++i) {
      const runtime::Slice s = runtime::slice_of(1000, i, count, 16);
      CHECK(s.begin == next);
      if (i + 1 < count) CHECK(s.end % 16 == 0);
      next = s.end;
    }
    CHECK(next == 1000);
  }
}

TEST_CASE("a thread team runs every index once and reports the span") {
  runtime::ThreadTeam team(std::vector<int>(2, runtime::allowed_cpus().front()));
  std::vector<int> hits(2, 0);
  const double s = team.run([&](int i) { hits[static_cast<std::size_t>(i)] += 1; });
  CHECK(hits == std::vector<int>{1, 1});
  CHECK(s >= 0);
  CHECK_THROWS_AS(team.run([](int i) {
    if (i == 1) throw std::runtime_error("boom");
  }),
                  std::runtime_error);
}

TEST_CASE("STREAM kernels compute copy and triad") {
  std::vector<double> a(37, 0), b(37), c(37);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<double>(i), c[i] = 2.0 * static_cast<double>(i);
  runtime::stream_copy(a.data(), b.data(), a.size());
  CHECK(a == b);
  /* a = b + 3c = i + 6i = 7i */
  runtime::stream_triad(a.data(), b.data(), c.data(), 3.0, a.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == 7.0 * static_cast<double>(i));
}

TEST_CASE("the vectorized AdamW step matches torch.optim.AdamW's formula in double precision") {
  /* Three steps over 1003 parameters (not a multiple of any vector width), against the update
   * p <- p(1 - lr wd) - lr/(1-b1^t) m / (sqrt(v)/sqrt(1-b2^t) + eps) computed in double. */
  const std::size_t n = 1003;
  std::vector<float> p(n), g(n), m(n, 0), v(n, 0);
  std::vector<double> pd(n), md(n, 0), vd(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>(0.5 - 0.001 * static_cast<double>(i));
    g[i] = static_cast<float>(0.01 * std::sin(static_cast<double>(i)));
    pd[i] = p[i];
  }
  const runtime::AdamW h;
  for (int t = 1; t <= 3; ++t) {
    runtime::adamw_step(p.data(), g.data(), m.data(), v.data(), n, h, t);
    const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
    for (std::size_t i = 0; i < n; ++i) {
      md[i] = 0.9 * md[i] + 0.1 * g[i];
      vd[i] = 0.999 * vd[i] + 0.001 * static_cast<double>(g[i]) * g[i];
      pd[i] = pd[i] * (1 - 1e-3 * 0.01) - 1e-3 / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + 1e-8);
    }
  }
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(p[i] - pd[i]));
  CHECK(worst < 1e-6);
  CHECK(m[5] == doctest::Approx(md[5]).epsilon(1e-5));
  CHECK(v[5] == doctest::Approx(vd[5]).epsilon(1e-4));
}

TEST_CASE("DRAM and AdamW measurements on small arrays are positive, summarized by their median, bounded" * kHardware) {
  runtime::ThreadTeam team(runtime::allowed_cpus());
  const auto dram = cpu::measure_dram(team, 4u << 20, 3);
  REQUIRE(dram.size() == 2);
  for (const auto& row : dram) {
    CAPTURE(row.kernel);
    CHECK(row.samples.size() == 3);
    CHECK(row.bandwidth_Bps > 0);
    CHECK(row.bandwidth_Bps < kPhysicalLimit_Bps);
    CHECK(median_within_samples(row.bandwidth_Bps, row.samples));
    CHECK(row.threads == team.size());
  }
  const double triad = dram[1].bandwidth_Bps;
  const auto adam = cpu::measure_adamw(team, 1u << 18, 3, triad);
  CHECK(adam.params_per_s > 0);
  CHECK(adam.params_per_s * 28 < kPhysicalLimit_Bps);
  CHECK(adam.bytes_per_param == 28);
  /* triad_fraction = params/s / (triad B/s / 28 B) */
  CHECK(adam.triad_fraction == doctest::Approx(adam.params_per_s * 28 / triad));
}

TEST_CASE("memcpy into host buffers: one row per size and kind, pageable always" * kHardware) {
  runtime::ThreadTeam team(runtime::allowed_cpus());
  const auto rows = cpu::measure_host_copy(team, {1u << 20, 4u << 20}, 2);
  int pageable = 0;
  for (const auto& row : rows) {
    CHECK(row.direction == hardware::CopyDirection::h2h);
    CHECK(row.bandwidth_Bps > 0);
    CHECK(row.bandwidth_Bps < 10 * kPhysicalLimit_Bps);  // 1 MiB may sit in cache
    pageable += row.pinned ? 0 : 1;
  }
  CHECK(pageable == 2);
  CHECK((rows.size() == 2 || rows.size() == 4));
}

TEST_CASE("a scratch file exists while in use, is removed after, and I/O moves what was asked" * kHardware) {
  ScratchDir dir("uring");
  fs::path path;
  {
    runtime::ScratchFile f(dir.path, 8u << 20);
    path = f.path();
    CHECK(fs::exists(path));
    CHECK(path.filename().string().rfind(runtime::kScratchPrefix, 0) == 0);
    CHECK(fs::file_size(path) == (8u << 20));
    /* Writing the whole 8 MiB file once in 1 MiB blocks: exactly 8 I/Os of 1 MiB. */
    const auto w = runtime::run_io({&f}, {StorageOp::write, 1 << 20, 4}, 60, f.size());
    CHECK(w.bytes == (8u << 20));
    CHECK(w.ios == 8);
    CHECK(w.bandwidth_Bps() > 0);
    CHECK(w.bandwidth_Bps() < kPhysicalLimit_Bps);
    const auto r = runtime::run_io({&f}, {StorageOp::read, 128 << 10, 2}, 0.05);
    CHECK(r.bytes > 0);
    CHECK(r.bytes % (128 << 10) == 0);
    const auto rr = runtime::run_io({&f}, {StorageOp::randread, 4096, 8}, 0.05);
    CHECK(rr.ios > 0);
    CHECK(rr.bytes == rr.ios * 4096);
  }
  CHECK_FALSE(fs::exists(path));
  CHECK(dir.entries() == 0);
}

TEST_CASE("a directory that does not exist, or a file too big for the disk, is refused with a reason") {
  ScratchDir dir("refuse");
  CHECK_THROWS_WITH_AS(runtime::ScratchFile(dir.path / "missing", 1 << 20), doctest::Contains("not a directory"),
                       std::runtime_error);
  // 1 EiB: no disk has the room; refused before anything is created.
  CHECK_THROWS_WITH_AS(runtime::ScratchFile(dir.path, 1ull << 60), doctest::Contains("GiB free"), std::runtime_error);
  CHECK(dir.entries() == 0);
}

TEST_CASE("a directory that gives no figure is listed with its reason; a calibration that measured none fails" *
          kHardware) {
  /* /proc is a directory on every Linux system with no free space and no room for files (statvfs
   * reports 0 blocks): as unwritable as a read-only or full disk, for root as for anyone. */
  ScratchDir good("storage-good");
  storage::StoragePlan plan;
  plan.dirs = {"/proc", good.path};
  plan.file_bytes = 8u << 20;
  plan.run_s = 0.05;
  plan.repeats = 1;
  plan.use_fio = false;
  plan.patterns = {{{StorageOp::read, 1 << 20, 4}, false}};
  SilentProgress progress;
  const auto res = storage::measure_storage(plan, progress, 0, plan.steps());
  REQUIRE(res.unmeasured.size() == 1);
  CHECK(res.unmeasured[0].first == "/proc");
  CHECK(res.unmeasured[0].second.find("/proc") != std::string::npos);
  CHECK(res.section.runs.size() == 1);
  CHECK(good.entries() == 0);

  Options o;
  o.quick = true;
  o.cpu = false;
  o.gpu = false;
  o.storage_dirs = {"/proc"};
  CHECK_THROWS_WITH_AS(run_calibration(o, progress), doctest::Contains("not one of the directories asked for"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(run_calibration(o, progress), doctest::Contains("/proc: "), std::runtime_error);
}

TEST_CASE("the storage plan measures each directory and both striped, beside fio, and leaves nothing behind" *
          kHardware) {
  ScratchDir a("storage-a"), b("storage-b");
  storage::StoragePlan plan;
  plan.dirs = {a.path, b.path};
  plan.file_bytes = 8u << 20;
  plan.run_s = 0.05;
  plan.repeats = 2;
  plan.patterns = {{{StorageOp::read, 1 << 20, 4}, true}, {{StorageOp::randread, 4096, 8}, false}};
  plan.striped_patterns = {{{StorageOp::write, 1 << 20, 4}, true}};
  SilentProgress progress;
  const auto res = storage::measure_storage(plan, progress, 0, plan.steps());
  /* 2 directories x 2 patterns + 1 striped pattern = 5 rows. */
  REQUIRE(res.section.runs.size() == 5);
  const bool have_fio = storage::find_fio().has_value();
  for (const auto& row : res.section.runs) {
    CHECK(row.samples.size() == 2);
    CHECK(row.bandwidth_Bps > 0);
    CHECK(row.bandwidth_Bps < kPhysicalLimit_Bps);
    CHECK(row.iops == doctest::Approx(row.bandwidth_Bps / row.block_bytes).epsilon(0.5));
    if (row.op == StorageOp::randread)
      CHECK(row.fio_samples.empty());
    else
      CHECK(row.fio_samples.size() == (have_fio ? 2u : 0u));
  }
  CHECK(res.section.runs.back().paths == std::vector<std::string>{a.path.string(), b.path.string()});
  REQUIRE(res.drives.size() == 2);
  CHECK(res.drives[0].path == a.path.string());
  CHECK(a.entries() == 0);
  CHECK(b.entries() == 0);
}

TEST_CASE("a sustained write on a real drive stops at its byte limit or by its rules, its figures from its windows" *
          kHardware) {
  /* What a 10 ms window catches depends on the drive and on what else writes to it (another test, a
   * build): a window may see nothing. So this checks what holds under any load: the byte limit is
   * kept, the write ends at it unless the stopping rule fired on the windows recorded, and the
   * row's figures are those its windows give. The rules themselves: the synthetic drive below. */
  ScratchDir dir("sustained");
  storage::StoragePlan plan;
  plan.dirs = {dir.path};
  plan.file_bytes = 4u << 20;
  plan.repeats = 1;
  plan.use_fio = false;
  storage::SustainedPlan s;
  s.max_bytes = 32u << 20;
  s.window_s = 0.01;
  s.max_s = 600;
  s.pattern = {StorageOp::write, 1 << 20, 4};
  plan.sustained = s;
  SilentProgress progress;
  const auto res = storage::measure_storage(plan, progress, 0, plan.steps());
  REQUIRE(res.section.sustained_write.size() == 1);
  CHECK(res.unmeasured.empty());
  const auto& row = res.section.sustained_write[0];
  CHECK(row.paths == std::vector<std::string>{dir.path.string()});
  CHECK(row.interval_s == s.window_s);
  CHECK(row.bytes_written <= s.max_bytes);
  CHECK(std::fmod(row.bytes_written, 1 << 20) == 0);  // whole 1 MiB blocks
  if (row.bytes_written < s.max_bytes) CHECK_FALSE(storage::sustained_write_goes_on(row.samples, 0, s));
  for (const double w : row.samples) {
    CHECK(w >= 0);
    CHECK(w < kPhysicalLimit_Bps);
  }
  hardware::SustainedWriteSample again = row;
  storage::summarize_sustained_write(again);
  CHECK(again == row);
  /* Each window lasts at least window_s, so rate x window_s never exceeds what it wrote. */
  CHECK(row.cache_bytes <= row.bytes_written);
  CHECK(dir.entries() == 0);
}

TEST_CASE("a sustained write stops 10 windows after the cache runs out, and finds burst, sustained and cache") {
  /* A synthetic drive: 6 GB/s until its 24 GB cache is full, then 2 GB/s; 1 s windows, no limit
   * on bytes or time. Windows 0-3 write 6 GB each (24 GB), then 2 GB each. The drop is found at
   * window 4 once windows 4, 5, 6 are all below 0.7 x 6 = 4.2 GB/s, and the write stops when 10
   * windows follow it: 14 windows. Burst 6 GB/s, sustained 2 GB/s, cache 4 x 6 GB = 24 GB. */
  storage::SustainedPlan s;
  s.window_s = 1;
  s.max_s = 1e9;
  const auto drive = [](double written) { return written < 24e9 ? 6e9 : 2e9; };
  hardware::SustainedWriteSample row;
  row.interval_s = s.window_s;
  double written = 0, t = 0;
  do {
    const double rate = drive(written);
    written += rate * s.window_s;
    t += s.window_s;
    row.samples.push_back(rate);
  } while (storage::sustained_write_goes_on(row.samples, t, s) && row.samples.size() < 1000);
  CHECK(row.samples.size() == 14);
  const auto k = storage::summarize_sustained_write(row);
  CHECK(k.found);
  CHECK(k.index == 4);
  CHECK(row.burst_bandwidth_Bps == doctest::Approx(6e9));
  CHECK(row.sustained_bandwidth_Bps == doctest::Approx(2e9));
  CHECK(row.cache_bytes == doctest::Approx(24e9));
  /* The time limit: with max_s = 5 the write stops after the window that ends at 5 s. */
  s.max_s = 5;
  std::vector<double> w;
  t = 0;
  do {
    w.push_back(6e9);
    t += s.window_s;
  } while (storage::sustained_write_goes_on(w, t, s) && w.size() < 1000);
  CHECK(w.size() == 5);
  /* No drop seen: burst = sustained = the median of all windows, and no cache bytes. */
  hardware::SustainedWriteSample flat;
  flat.interval_s = 1;
  flat.samples = {5e9, 6e9, 7e9};
  CHECK_FALSE(storage::summarize_sustained_write(flat).found);
  CHECK(flat.burst_bandwidth_Bps == doctest::Approx(6e9));
  CHECK(flat.sustained_bandwidth_Bps == doctest::Approx(6e9));
  CHECK(flat.cache_bytes == 0);
}

TEST_CASE("the write cache knee is where the rate stays below 70% of what came before") {
  /* 6 GB/s for 4 windows, then 3 GB/s: the drop starts at window 4; burst 6, sustained 3. */
  const auto k = storage::find_write_cache_knee({6e9, 6.1e9, 5.9e9, 6e9, 3e9, 3.1e9, 2.9e9, 3e9});
  CHECK(k.found);
  CHECK(k.index == 4);
  CHECK(k.burst_Bps == doctest::Approx(6e9));
  CHECK(k.sustained_Bps == doctest::Approx(3e9));
  /* A single slow window is noise, not a knee (persist = 3). */
  const auto noise = storage::find_write_cache_knee({6e9, 6e9, 2e9, 6e9, 6e9, 6e9});
  CHECK_FALSE(noise.found);
  CHECK(noise.sustained_Bps == doctest::Approx(6e9));
}

TEST_CASE("fio runs with the same configuration and its JSON is read") {
  ScratchDir dir("fio");
  runtime::ScratchFile f(dir.path, 1 << 20);
  const auto args = storage::fio_arguments({&f}, {StorageOp::randread, 4096, 32}, 0.25);
  const auto has = [&](const std::string& a) { return std::find(args.begin(), args.end(), a) != args.end(); };
  CHECK(has("--rw=randread"));
  CHECK(has("--bs=4096"));
  CHECK(has("--iodepth=32"));
  CHECK(has("--direct=1"));
  CHECK(has("--ioengine=io_uring"));
  CHECK(has("--runtime=250ms"));
  CHECK(has("--allow_file_create=0"));
  CHECK(has("--filename=" + f.path().string()));
  const std::string json = R"(fio: some warning
{
  "fio version" : "fio-3.33",
  "jobs" : [ { "jobname" : "ftplan0", "error" : 0,
               "read" : { "bw_bytes" : 1584708380, "iops" : 1511.3 },
               "write" : { "bw_bytes" : 0, "iops" : 0 } } ]
})";
  const auto r = storage::parse_fio_json(json, StorageOp::read);
  CHECK(r.bandwidth_Bps == 1584708380);
  CHECK(r.iops == doctest::Approx(1511.3));
  CHECK_THROWS_AS(storage::parse_fio_json("fio: no such file", StorageOp::read), std::runtime_error);
}

TEST_CASE("GEMM shapes of a Llama-3.1-8B layer, forward and both backward GEMMs") {
  /* hidden 4096, 32 heads x 128, 8 KV heads, FFN 14336 (SwiGLU), vocab 128256, T = 4096 tokens.
   * qkv: out = (32 + 2*8) * 128 = 6144.  fwd m=T n=6144 k=4096; dgrad m=T n=4096 k=6144; wgrad m=4096 n=6144 k=T. */
  const auto* m = test::zoo().find("llama-3.1-8b");
  REQUIRE(m);
  const auto shapes = transformer_gemms(*m, 4096);
  REQUIRE(shapes.size() == 15);  // 5 linears x 3 GEMMs
  CHECK(shapes[0].op == "llama-3.1-8b/qkv.fwd/t4096");
  CHECK((shapes[0].m == 4096 && shapes[0].n == 6144 && shapes[0].k == 4096));
  CHECK((shapes[1].m == 4096 && shapes[1].n == 4096 && shapes[1].k == 6144));
  CHECK((shapes[2].m == 4096 && shapes[2].n == 6144 && shapes[2].k == 4096));
  CHECK(shapes[6].op == "llama-3.1-8b/mlp_gate_up.fwd/t4096");
  CHECK((shapes[6].n == 14336 && shapes[6].k == 4096));
  CHECK(shapes[12].op == "llama-3.1-8b/lm_head.fwd/t4096");
  CHECK(shapes[12].n == 128256);
  /* 2mnk FLOPs: the LM head forward is 2 * 4096 * 128256 * 4096 = 4.30e12. */
  CHECK(shapes[12].flops() == doctest::Approx(4.3035e12).epsilon(1e-3));
  /* At T = hidden, attn_out fwd (4096x4096x4096) equals its dgrad and wgrad: 15 -> fewer unique shapes. */
  const auto unique = unique_shapes(shapes);
  CHECK(unique.size() < shapes.size());
  CHECK(unique[0].op == shapes[0].op);
}

TEST_CASE("a device name finds its catalog GPU") {
  const auto& c = test::catalog();
  const auto name_of = [&](const char* device, double bytes) {
    const auto* g = match_catalog_gpu(c, device, bytes);
    return g ? g->name : std::string("none");
  };
  CHECK(name_of("NVIDIA H100 80GB HBM3", 85520809984.0) == "h100-sxm-80gb");
  CHECK(name_of("NVIDIA H100 PCIe", 85520809984.0) == "h100-pcie-80gb");
  CHECK(name_of("NVIDIA A100-SXM4-40GB", 42505273344.0) == "a100-sxm4-40gb");
  CHECK(name_of("NVIDIA A100 80GB PCIe", 85100000000.0) == "a100-pcie-80gb");
  CHECK(name_of("NVIDIA H200", 150e9) == "h200-sxm-141gb");
  CHECK(name_of("NVIDIA GeForce RTX 4090", 25.2e9) == "rtx-4090");
  CHECK(name_of("Tesla V100-SXM2-32GB", 34089664512.0) == "v100-sxm2-32gb");
  CHECK(name_of("Tesla V100-SXM3-32GB", 34359738368.0) == "v100-sxm3-32gb");
  CHECK(name_of("Some Accelerator 9000", 80e9) == "none");
}

TEST_CASE("without a usable CUDA device the GPU part says why") {
  const auto s = gpu::probe_cuda();
  if (!s.usable) {
    CHECK_FALSE(s.reason.empty());
    CHECK((s.reason.find("no CUDA device found") != std::string::npos ||
           s.reason.find("without CUDA") != std::string::npos || s.reason.find("driver") != std::string::npos));
  } else {
    CHECK(s.devices > 0);
  }
}

TEST_CASE("a quick CPU-only calibration makes a profile that reads back unchanged" * kHardware) {
  Options o;
  o.quick = true;
  o.gpu = false;
  o.repeats = 2;
  SilentProgress progress;
  const Calibration cal = run_calibration(o, progress);
  const auto& p = cal.profile;
  CHECK_FALSE(p.machine.date.empty());
  CHECK_FALSE(p.machine.cpu.model.empty());
  CHECK(p.machine.cpu.threads >= 1);
  CHECK(p.settings.mode == "quick");
  REQUIRE(p.cpu.dram.size() == 2);
  REQUIRE(p.cpu.optimizer.size() == 1);
  CHECK(p.cpu.optimizer[0].triad_fraction > 0);
  CHECK(p.gemm.empty());
  CHECK(p.machine.notes.find("GPU not measured") != std::string::npos);
  CHECK(io::parse_profile(io::profile_to_yaml(p), "calibrated.yaml") == p);
}

TEST_CASE("the calibration reports the models fitted to its samples") {
  /* memcpy into pinned buffers at 1, 4 and 64 MiB from t = 2 us + n / 10 GB/s, pageable at one size
   * only (no model), and bf16 GEMMs from fraction = 0.75 k / (k + 100) of a 1e15 peak: one row each
   * for the copy's latency and bandwidth, and for the curve's f and k0.                            */
  hardware::CalibrationProfile p;
  for (const double n : {1048576.0, 4194304.0, 67108864.0}) {
    const double rate = n / (2e-6 + n / 10e9);
    p.copy.push_back({hardware::CopyDirection::h2h, true, n, rate, 0, {rate}});
  }
  p.copy.push_back({hardware::CopyDirection::h2h, false, 1048576, 3e9, 0, {3e9}});
  for (const std::int64_t k : {512, 2048}) {
    const double rate = 1e15 * 0.75 * static_cast<double>(k) / (static_cast<double>(k) + 100);
    p.gemm.push_back({hardware::Dtype::bf16, "", 4096, 4096, k, rate, 1e15, {rate}});
  }
  const auto rows = model_fits(p);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].section == "fit");
  CHECK(rows[0].item.find("h2h pinned copy") != std::string::npos);
  CHECK(rows[0].unit == "s");
  CHECK(rows[0].value * 1e6 == doctest::Approx(2));  // in us
  CHECK(rows[1].unit == "B/s");
  CHECK(rows[1].value == doctest::Approx(10e9));
  CHECK(rows[2].item.find("GEMM bf16") != std::string::npos);
  CHECK(rows[2].value == doctest::Approx(0.75));
  CHECK(rows[3].value == doctest::Approx(100));
  CHECK(rows[3].spread == doctest::Approx(0).epsilon(1e-9));
}
