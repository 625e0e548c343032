#include "calibrate.hpp"

#include <sys/statvfs.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "common/error.hpp"
#include "common/units.hpp"
#include "cpu/cpu_bench.hpp"
#include "cuda/cuda_bench.hpp"
#include "hardware/profile_fit.hpp"
#include "machine.hpp"
#include "runtime/measure.hpp"
#include "storage/storage_bench.hpp"
#include "workload.hpp"

#ifndef FTPLAN_VERSION
#define FTPLAN_VERSION "unknown"
#endif

namespace ftplan::calibrate {

namespace {

// Collects notes for the profile while passing them on to the caller's progress display.
class NotingProgress : public Progress {
 public:
  NotingProgress(Progress& inner, std::vector<std::string>& notes) : inner_(inner), notes_(notes) {}
  void step(int index, int total, std::string_view label) override { inner_.step(index, total, label); }
  void note(std::string_view text) override {
    notes_.emplace_back(text);
    inner_.note(text);
  }

 private:
  Progress& inner_;
  std::vector<std::string>& notes_;
};

struct CpuPlan {
  std::size_t array_bytes = 0;
  std::size_t adam_params = 0;
  std::vector<int> thread_counts;
  std::vector<std::size_t> copy_sizes;
  int repeats = 0;
  int steps() const { return 2 * static_cast<int>(thread_counts.size()) + 1; }
};

CpuPlan cpu_plan(const Options& o, int cpus, double dram_bytes) {
  CpuPlan p;
  constexpr std::size_t MiB = std::size_t{1} << 20;
  if (o.quick) {
    p.array_bytes = 128 * MiB;
    p.adam_params = std::size_t{1} << 24;  // 16 Mi parameters: 256 MiB of fp32 p, g, m, v
    p.thread_counts = {cpus};
    p.copy_sizes = {MiB, 64 * MiB};
    p.repeats = o.repeats > 0 ? o.repeats : 5;
  } else {
    // STREAM's rule: each array at least 4x the last-level cache, so the caches hold none of it; capped
    // at 512 MiB (1.5 GiB for the three) to keep a full run short. A VM may report its host's whole L3
    // (hundreds of MiB) while the vCPUs see one slice of it; the cap then still clears the real cache.
    const double llc = last_level_cache_bytes();
    p.array_bytes = static_cast<std::size_t>(std::clamp(4 * llc, 256.0 * MiB, 512.0 * MiB));
    p.adam_params = std::size_t{1} << 25;  // 32 Mi parameters: 512 MiB of fp32 p, g, m, v
    p.thread_counts = cpus > 1 ? std::vector<int>{1, cpus} : std::vector<int>{1};
    p.copy_sizes = {256 * 1024, 4 * MiB, 64 * MiB};
    p.repeats = o.repeats > 0 ? o.repeats : 7;
  }
  // Never more than an eighth of memory for the three arrays, or a quarter for the optimizer state.
  if (dram_bytes > 0) {
    p.array_bytes = std::min(p.array_bytes, static_cast<std::size_t>(dram_bytes / 24));
    p.adam_params = std::min(p.adam_params, static_cast<std::size_t>(dram_bytes / 64));
  }
  return p;
}

gpu::CudaPlan gpu_plan(const Options& o) {
  gpu::CudaPlan p;
  constexpr std::size_t MiB = std::size_t{1} << 20;
  std::vector<std::string> models = o.gemm_models;
  if (models.empty())
    models =
        o.quick ? std::vector<std::string>{"llama-3.1-8b"} : std::vector<std::string>{"llama-3.1-8b", "llama-3.1-70b"};
  std::vector<std::int64_t> tokens = o.gemm_tokens;
  if (tokens.empty()) tokens = o.quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{1024, 4096, 16384};
  std::vector<GemmShape> shapes;
  for (const auto& name : models) {
    const model::ModelSpec* m = o.zoo ? o.zoo->find(name) : nullptr;
    if (!m) continue;
    for (const auto t : tokens) {
      const auto more = transformer_gemms(*m, t);
      shapes.insert(shapes.end(), more.begin(), more.end());
    }
  }
  p.gemms = unique_shapes(shapes);
  p.catalog = o.catalog;
  p.catalog_gpu = o.catalog_gpu;
  if (o.quick) {
    p.dtypes = {hardware::Dtype::bf16, hardware::Dtype::fp8};
    p.repeats = o.repeats > 0 ? o.repeats : 3;
    p.hbm_bytes = 256 * MiB;
    p.copy_sizes = {MiB, 64 * MiB};
    p.collective_sizes = {16 * MiB, 256 * MiB};
    p.attention_seqs = {4096};
    p.power_window_s = 1.5;
  } else {
    p.repeats = o.repeats > 0 ? o.repeats : 5;
    p.hbm_bytes = 1024 * MiB;
    p.copy_sizes = {64 * 1024, MiB, 16 * MiB, 256 * MiB};
    p.collective_sizes = {MiB, 16 * MiB, 256 * MiB, 1024 * MiB};
  }
  return p;
}

}  // namespace

Calibration run_calibration(const Options& o, Progress& outer) {
  Calibration out;
  NotingProgress progress(outer, out.notes);
  hardware::CalibrationProfile& p = out.profile;
  p.machine.date = utc_now_iso8601();
  p.machine.hostname = host_name();
  p.machine.kernel = kernel_release();
  p.machine.ftplan_version = FTPLAN_VERSION;
  p.machine.cpu = read_cpu_identity();
  p.settings.mode = o.quick ? "quick" : "full";

  const std::vector<int> cpus = runtime::allowed_cpus();
  const CpuPlan cp = cpu_plan(o, static_cast<int>(cpus.size()), p.machine.cpu.dram_bytes);
  p.settings.repeats = cp.repeats;

  storage::StoragePlan sp =
      o.quick ? storage::StoragePlan::quick(o.storage_dirs) : storage::StoragePlan::full(o.storage_dirs);
  sp.use_fio = o.fio;
  if (o.repeats > 0) sp.repeats = o.repeats;
  if (o.sustained_write && !o.storage_dirs.empty()) {
    storage::SustainedPlan s;
    s.max_s = o.sustained_s;
    s.max_bytes = o.sustained_bytes;
    if (s.max_bytes == 0) {
      // Half the free space of the fullest directory, at most 256 GiB: enough to outrun the SLC cache
      // of current drives (tens to a few hundred GB when empty) without filling the disk.
      double free_bytes = 1e300;
      for (const auto& d : o.storage_dirs) {
        struct statvfs v {};
        if (statvfs(d.c_str(), &v) == 0)
          free_bytes = std::min(free_bytes, static_cast<double>(v.f_bavail) * static_cast<double>(v.f_frsize));
      }
      s.max_bytes = static_cast<std::uint64_t>(std::min(free_bytes / 2, 256.0 * (1ull << 30)));
    }
    s.max_bytes = s.max_bytes / (1 << 20) * (1 << 20);
    sp.sustained = s;
  }

  gpu::CudaStatus cuda;
  gpu::CudaPlan gp;
  if (o.gpu) {
    cuda = gpu::probe_cuda();
    p.machine.gpu_driver_version = cuda.driver_version;
    p.machine.cuda_runtime_version = cuda.built ? cuda.runtime_version : "";
    if (cuda.usable) gp = gpu_plan(o);
  }

  const int cpu_steps = o.cpu ? cp.steps() : 0;
  const int storage_steps = o.storage_dirs.empty() ? 0 : sp.steps();
  const int gpu_steps = cuda.usable ? gp.steps() : 0;
  const int total = cpu_steps + storage_steps + gpu_steps;
  int step = 0;

  if (o.gpu && !cuda.usable) progress.note(fmt::format("GPU not measured: {}", cuda.reason));
  if (!o.gpu) progress.note("GPU not measured: --no-gpu");

  // --- CPU and DRAM ---
  if (o.cpu) {
    double bound = o.dram_bound_Bps;
    std::string bound_source = o.dram_bound_source;
    if (bound <= 0) {
      const DramBound b = dram_bound_from_dmidecode();
      bound = b.bandwidth_Bps;
      bound_source = b.source;
    }
    if (bound <= 0)
      progress.note(
          "DRAM bound unknown (no readable memory table; a VM or not root): give --dram-bound, e.g. "
          "'8 x 4800 MT/s' as '307.2 GB/s'");
    p.cpu.dram_bound_Bps = bound;
    for (const int threads : cp.thread_counts) {
      runtime::ThreadTeam team(std::vector<int>(cpus.begin(), cpus.begin() + threads));
      progress.step(step++, total,
                    fmt::format("DRAM: STREAM copy and triad, {} threads, 3 x {}", threads,
                                ftplan::format_bytes(static_cast<double>(cp.array_bytes))));
      const auto dram = cpu::measure_dram(team, cp.array_bytes, cp.repeats);
      double triad = 0;
      for (const auto& row : dram) {
        if (row.kernel == "triad") triad = row.bandwidth_Bps;
        out.comparisons.push_back({"cpu", fmt::format("STREAM {}, {} threads", row.kernel, threads), "B/s",
                                   row.bandwidth_Bps, runtime::relative_spread(row.samples), bound,
                                   bound > 0 ? "DRAM channels x speed" : "", 0, 0, ""});
        p.cpu.dram.push_back(row);
      }
      progress.step(step++, total,
                    fmt::format("CPU: AdamW step over {} fp32 parameters, {} threads",
                                ftplan::format_count(static_cast<double>(cp.adam_params)), threads));
      const auto adam = cpu::measure_adamw(team, cp.adam_params, cp.repeats, triad);
      out.comparisons.push_back({"cpu", fmt::format("AdamW step, {} threads", threads), "params/s", adam.params_per_s,
                                 runtime::relative_spread(adam.samples),
                                 bound > 0 ? bound / cpu::kAdamWBytesPerParam : 0, bound > 0 ? "DRAM bound / 28 B" : "",
                                 triad / cpu::kAdamWBytesPerParam, 0, "STREAM triad / 28 B"});
      p.cpu.optimizer.push_back(adam);
    }
    runtime::ThreadTeam team(cpus);
    progress.step(step++, total, "CPU: memcpy into pinned (page-locked) buffers");
    for (auto& row : cpu::measure_host_copy(team, cp.copy_sizes, cp.repeats)) {
      out.comparisons.push_back(
          {"copy",
           fmt::format("memcpy into {} {}", row.pinned ? "pinned" : "pageable", ftplan::format_bytes(row.bytes)), "B/s",
           row.bandwidth_Bps, runtime::relative_spread(row.samples), 0, "", 0, 0, ""});
      p.copy.push_back(std::move(row));
    }
  }

  // --- Storage ---
  if (!o.storage_dirs.empty()) {
    auto r = storage::measure_storage(sp, progress, step, total);
    step += storage_steps;
    // Storage was asked for: a profile without a single storage figure is not what was asked, and a
    // script must not mistake it for a success (a read-only, full or missing directory).
    if (r.unmeasured.size() == o.storage_dirs.size()) {
      std::string why;
      for (const auto& [dir, reason] : r.unmeasured) why += fmt::format("\n  {}: {}", dir.string(), reason);
      throw SystemError(fmt::format(
          "storage: not one of the directories asked for could be measured (--no-storage skips storage):{}", why));
    }
    p.storage = std::move(r.section);
    p.machine.drives = std::move(r.drives);
    out.comparisons.insert(out.comparisons.end(), r.comparisons.begin(), r.comparisons.end());
  }

  // --- GPU ---
  if (cuda.usable) {
    try {
      auto r = gpu::measure_cuda(gp, progress, step, total);
      p.machine.gpus = std::move(r.gpus);
      p.gemm = std::move(r.gemm);
      p.attention = std::move(r.attention);
      p.memory = std::move(r.memory);
      p.copy.insert(p.copy.end(), r.copy.begin(), r.copy.end());
      p.collectives = std::move(r.collectives);
      p.power = std::move(r.power);
      out.comparisons.insert(out.comparisons.end(), r.comparisons.begin(), r.comparisons.end());
    } catch (const std::exception& e) {
      progress.note(fmt::format("GPU calibration stopped: {}", e.what()));
    }
  }

  const auto fits = model_fits(p);
  out.comparisons.insert(out.comparisons.end(), fits.begin(), fits.end());

  std::string notes;
  for (const auto& n : out.notes) notes += (notes.empty() ? "" : "\n") + n;
  p.machine.notes = notes;
  return out;
}

std::vector<Comparison> model_fits(const hardware::CalibrationProfile& p) {
  using hardware::CopyDirection;
  std::vector<Comparison> rows;
  const auto row = [&](std::string item, std::string unit, double value, double spread) {
    Comparison c;
    c.section = "fit";
    c.item = std::move(item);
    c.unit = std::move(unit);
    c.value = value;
    c.spread = spread;
    rows.push_back(std::move(c));
  };
  for (const auto d :
       {CopyDirection::h2d, CopyDirection::d2h, CopyDirection::bidir, CopyDirection::d2d, CopyDirection::h2h})
    for (const bool pinned : {true, false})
      if (const auto m = hardware::fit_copy_model(p.copy, d, pinned)) {
        const std::string what = fmt::format("{} {} copy, t = latency + bytes / bandwidth ({} samples)",
                                             hardware::to_string(d), pinned ? "pinned" : "pageable", m->samples);
        row(what + ": latency", "s", m->latency_s, m->rms_relative);
        row(what + ": bandwidth", "B/s", m->bandwidth_Bps, m->rms_relative);
      }
  using hardware::Dtype;
  for (const auto d :
       {Dtype::fp64, Dtype::fp32, Dtype::tf32, Dtype::bf16, Dtype::fp16, Dtype::fp8, Dtype::int8, Dtype::int4})
    if (const auto c = hardware::fit_gemm_curve(p.gemm, d)) {
      const std::string what =
          fmt::format("GEMM {}, fraction of peak = f k / (k + k0) ({} samples)", hardware::to_string(d), c->samples);
      row(what + ": f", "of peak", c->peak_fraction, c->rms_relative);
      row(what + ": k0", "", c->k0, c->rms_relative);
    }
  return rows;
}

}  // namespace ftplan::calibrate
