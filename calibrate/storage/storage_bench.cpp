#include "calibrate/storage/storage_bench.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "calibrate/machine.hpp"
#include "calibrate/storage/fio.hpp"
#include "common/units.hpp"
#include "runtime/measure.hpp"
#include "runtime/uring.hpp"

namespace ftplan::calibrate::storage {

namespace fs = std::filesystem;
using hardware::StorageOp;
using hardware::StorageSample;

namespace {

constexpr std::uint32_t kKiB = 1024, kMiB = 1024 * 1024;

std::string describe(const runtime::IoPattern& p) {
  return fmt::format(
      "{} {} QD{}", hardware::to_string(p.op),
      p.block_bytes >= kMiB ? fmt::format("{} MiB", p.block_bytes / kMiB) : fmt::format("{} KiB", p.block_bytes / kKiB),
      p.queue_depth);
}

std::string join_paths(const std::vector<runtime::ScratchFile*>& files) {
  std::string s;
  for (const auto* f : files) s += (s.empty() ? "" : "+") + f->dir().string();
  return s;
}

// Ours and fio's runs of one configuration, alternating so both see the same drive state
// (its cache, its temperature, the neighbours on a shared host).
StorageSample measure_pattern(const std::vector<runtime::ScratchFile*>& files, const PatternPlan& pp,
                              const StoragePlan& plan, const std::optional<fs::path>& fio, double link_Bps,
                              std::vector<Comparison>& comparisons) {
  StorageSample row;
  for (const auto* f : files) row.paths.push_back(f->dir().string());
  row.op = pp.pattern.op;
  row.block_bytes = pp.pattern.block_bytes;
  row.queue_depth = pp.pattern.queue_depth;
  std::vector<double> iops;
  const bool with_fio = pp.with_fio && fio.has_value();
  for (int r = 0; r < plan.repeats; ++r) {
    const runtime::IoResult res = runtime::run_io(files, pp.pattern, plan.run_s);
    row.samples.push_back(res.bandwidth_Bps());
    iops.push_back(res.iops());
    if (with_fio) row.fio_samples.push_back(run_fio(*fio, files, pp.pattern, plan.run_s).bandwidth_Bps);
  }
  row.bandwidth_Bps = runtime::median(row.samples);
  row.iops = runtime::median(iops);
  if (with_fio) row.fio_bandwidth_Bps = runtime::median(row.fio_samples);
  Comparison c;
  c.section = "storage";
  c.item = fmt::format("{} {}", describe(pp.pattern), join_paths(files));
  const bool random = row.op == StorageOp::randread || row.op == StorageOp::randwrite;
  c.unit = random ? "IOPS" : "B/s";
  const double scale = random ? 1.0 / row.block_bytes : 1.0;
  c.value = row.bandwidth_Bps * scale;
  c.spread = runtime::relative_spread(row.samples);
  if (link_Bps > 0) {
    c.bound = link_Bps * scale;
    c.bound_source = "drive's PCIe link";
  }
  if (with_fio) {
    c.reference = row.fio_bandwidth_Bps * scale;
    c.reference_spread = runtime::relative_spread(row.fio_samples);
    c.reference_source = "fio";
  }
  comparisons.push_back(std::move(c));
  return row;
}

}  // namespace

StoragePlan StoragePlan::quick(std::vector<fs::path> dirs) {
  StoragePlan p;
  p.dirs = std::move(dirs);
  p.file_bytes = 256ull << 20;
  p.run_s = 0.3;
  p.repeats = 3;
  p.patterns = {{{StorageOp::read, kMiB, 16}, true},
                {{StorageOp::write, kMiB, 16}, true},
                {{StorageOp::randread, 4 * kKiB, 32}, true}};
  p.striped_patterns = {{{StorageOp::read, kMiB, 16}, true}, {{StorageOp::write, kMiB, 16}, true}};
  return p;
}

StoragePlan StoragePlan::full(std::vector<fs::path> dirs) {
  StoragePlan p;
  p.dirs = std::move(dirs);
  p.file_bytes = 1ull << 30;
  p.run_s = 0.4;
  p.repeats = 3;
  // fio beside ours for a few representative configurations; the rest of the grid is ours alone,
  // to keep a full run under two minutes.
  const auto compared = [](StorageOp op, std::uint32_t bs, int qd) {
    return (bs == 128 * kKiB && qd == 1) || (bs == kMiB && qd == 16) || (bs == 16 * kMiB && qd == 4) ||
           (op == StorageOp::randread && (qd == 1 || qd == 64)) || (op == StorageOp::randwrite && qd == 64);
  };
  for (const StorageOp op : {StorageOp::read, StorageOp::write})
    for (const std::uint32_t bs : {128 * kKiB, kMiB, 4 * kMiB, 16 * kMiB})
      for (const int qd : {1, 4, 16, 64}) {
        // More than 256 MiB in flight per file is beyond what an offload engine keeps queued.
        if (static_cast<std::uint64_t>(bs) * static_cast<std::uint64_t>(qd) > (256ull << 20)) continue;
        p.patterns.push_back({{op, bs, qd}, compared(op, bs, qd)});
      }
  for (const StorageOp op : {StorageOp::randread, StorageOp::randwrite})
    for (const int qd : {1, 64}) p.patterns.push_back({{op, 4 * kKiB, qd}, compared(op, 4 * kKiB, qd)});
  p.striped_patterns = {{{StorageOp::read, kMiB, 16}, true},
                        {{StorageOp::write, kMiB, 16}, true},
                        {{StorageOp::randread, 4 * kKiB, 64}, true}};
  return p;
}

int StoragePlan::steps() const {
  int n = static_cast<int>(dirs.size()) * (1 + static_cast<int>(patterns.size()));
  if (dirs.size() > 1) n += 1 + static_cast<int>(striped_patterns.size());
  if (sustained) n += static_cast<int>(dirs.size());
  return n;
}

WriteCacheKnee find_write_cache_knee(const std::vector<double>& w, double threshold, int persist,
                                     std::size_t min_before) {
  WriteCacheKnee k;
  const auto p = static_cast<std::size_t>(std::max(1, persist));
  for (std::size_t i = std::max<std::size_t>(1, min_before); i + p <= w.size(); ++i) {
    const double before = runtime::median(std::vector<double>(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(i)));
    const bool dropped =
        std::all_of(w.begin() + static_cast<std::ptrdiff_t>(i), w.begin() + static_cast<std::ptrdiff_t>(i + p),
                    [&](double x) { return x < threshold * before; });
    if (dropped) {
      k.found = true;
      k.index = i;
      k.burst_Bps = before;
      k.sustained_Bps = runtime::median(std::vector<double>(w.begin() + static_cast<std::ptrdiff_t>(i), w.end()));
      return k;
    }
  }
  k.burst_Bps = k.sustained_Bps = runtime::median(w);
  return k;
}

bool sustained_write_goes_on(const std::vector<double>& w, double elapsed_s, const SustainedPlan& plan) {
  if (elapsed_s >= plan.max_s) return false;
  const WriteCacheKnee k = find_write_cache_knee(w);
  return !(k.found && w.size() - k.index >= kSustainedWindowsAfterDrop);
}

WriteCacheKnee summarize_sustained_write(hardware::SustainedWriteSample& row) {
  const WriteCacheKnee k = find_write_cache_knee(row.samples);
  row.burst_bandwidth_Bps = k.burst_Bps;
  row.sustained_bandwidth_Bps = k.sustained_Bps;
  row.cache_bytes = 0;
  for (std::size_t i = 0; k.found && i < k.index; ++i) row.cache_bytes += row.samples[i] * row.interval_s;
  return k;
}

StorageResults measure_storage(const StoragePlan& plan, Progress& progress, int first_step, int total) {
  StorageResults out;
  int step = first_step;
  const std::optional<fs::path> fio = plan.use_fio ? find_fio() : std::nullopt;
  if (plan.use_fio && !fio) progress.note("fio is not installed: storage figures are shown without fio's beside them");

  std::vector<std::unique_ptr<runtime::ScratchFile>> files;  // one per directory that works
  std::map<fs::path, std::string> why_not;                   // directory -> last problem seen on it
  std::set<fs::path> measured;                               // directories with a figure of their own
  double striped_link_Bps = 0;
  for (const auto& dir : plan.dirs) {
    const DriveInfo drive = identify_drive(dir);
    out.drives.push_back(drive.identity);
    const double link_Bps = drive.link.gen > 0 ? drive.link.bandwidth_Bps() : 0;
    progress.step(step++, total,
                  fmt::format("storage {}: create and write a {} scratch file", dir.string(),
                              ftplan::format_bytes(static_cast<double>(plan.file_bytes))));
    std::unique_ptr<runtime::ScratchFile> file;
    try {
      file = std::make_unique<runtime::ScratchFile>(dir, plan.file_bytes);
      // Write every block once: reads of never-written (unwritten-extent) blocks never reach the drive.
      runtime::run_io({file.get()}, {StorageOp::write, kMiB, 16}, 1e9, plan.file_bytes);
    } catch (const std::exception& e) {
      progress.note(fmt::format("storage {} skipped: {}", dir.string(), e.what()));
      why_not[dir] = e.what();
      step += static_cast<int>(plan.patterns.size());
      continue;
    }
    try {
      for (const auto& pp : plan.patterns) {
        progress.step(step++, total, fmt::format("storage {}: {}", dir.string(), describe(pp.pattern)));
        out.section.runs.push_back(measure_pattern({file.get()}, pp, plan, fio, link_Bps, out.comparisons));
        measured.insert(dir);
      }
    } catch (const std::exception& e) {
      progress.note(fmt::format("storage {} stopped: {}", dir.string(), e.what()));
      why_not[dir] = e.what();
    }
    files.push_back(std::move(file));
    // Drives behind one link would share it; separate NVMe drives each have their own.
    striped_link_Bps = link_Bps > 0 && (striped_link_Bps > 0 || files.size() == 1) ? striped_link_Bps + link_Bps : 0;
  }

  if (plan.dirs.size() > 1) {
    progress.step(step++, total, "storage: all directories at once (striped)");
    if (files.size() > 1) {
      std::vector<runtime::ScratchFile*> all;
      for (auto& f : files) all.push_back(f.get());
      try {
        for (const auto& pp : plan.striped_patterns) {
          progress.step(step++, total, fmt::format("storage striped: {}", describe(pp.pattern)));
          out.section.runs.push_back(measure_pattern(all, pp, plan, fio, striped_link_Bps, out.comparisons));
        }
      } catch (const std::exception& e) {
        progress.note(fmt::format("striped storage run stopped: {}", e.what()));
      }
    } else {
      step += static_cast<int>(plan.striped_patterns.size());
      progress.note("striped storage run skipped: fewer than two directories could be measured");
    }
  }
  files.clear();  // removes the scratch files before the long write needs the room

  if (plan.sustained) {
    const SustainedPlan& s = *plan.sustained;
    for (const auto& dir : plan.dirs) {
      progress.step(step++, total,
                    fmt::format("storage {}: sustained write, up to {} or {:.0f} s", dir.string(),
                                ftplan::format_bytes(static_cast<double>(s.max_bytes)), s.max_s));
      try {
        runtime::ScratchFile file(dir, s.max_bytes);
        hardware::SustainedWriteSample row;
        row.paths = {dir.string()};
        row.block_bytes = s.pattern.block_bytes;
        row.queue_depth = s.pattern.queue_depth;
        row.interval_s = s.window_s;
        const double start = runtime::now_s();
        const auto on_window = [&](double rate) {
          row.samples.push_back(rate);
          return sustained_write_goes_on(row.samples, runtime::now_s() - start, s);
        };
        const runtime::IoResult res = runtime::run_io_windows({&file}, s.pattern, s.window_s, s.max_bytes, on_window);
        row.bytes_written = static_cast<double>(res.bytes);
        const WriteCacheKnee k = summarize_sustained_write(row);
        if (!k.found) {
          progress.note(fmt::format("storage {}: no drop in write rate within {} written", dir.string(),
                                    ftplan::format_bytes(row.bytes_written)));
        }
        out.comparisons.push_back(
            {"storage",
             fmt::format("sustained write{} {}", k.found ? " after the cache" : " (no drop seen)", dir.string()), "B/s",
             row.sustained_bandwidth_Bps, runtime::relative_spread(row.samples), 0, "", row.burst_bandwidth_Bps, 0,
             "burst (before the drop)"});
        out.section.sustained_write.push_back(std::move(row));
        measured.insert(dir);
      } catch (const std::exception& e) {
        progress.note(fmt::format("sustained write on {} skipped: {}", dir.string(), e.what()));
        why_not[dir] = e.what();
      }
    }
  }
  for (const auto& dir : plan.dirs)
    if (!measured.count(dir)) {
      const auto it = why_not.find(dir);
      out.unmeasured.emplace_back(dir, it != why_not.end() ? it->second : "no measurement was planned for it");
    }
  return out;
}

}  // namespace ftplan::calibrate::storage
