// `ftplan calibrate [--quick] [--out profile.yaml] ...`: measure this machine, print each figure
// beside its physical bound and fio's / STREAM's figure from the same run, and write the profile.
// Progress goes to stderr; the results table (or JSON) to stdout.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "calibrate/calibrate.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "exec/rates.hpp"
#include "io/output_file.hpp"
#include "io/profile_io.hpp"
#include "progress.hpp"
#include "runtime/measure.hpp"
#include "runtime/uring.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

std::vector<OptionSpec> calibrate_options() {
  auto o = common_options();
  o.insert(o.end(),
           {
               {"quick", false, "smaller sizes, fewer configurations (CPU + storage under 20 s)"},
               {"out", true, "write the calibration profile (YAML) to this file"},
               {"storage-dir", true, "directories whose drives to measure, comma-separated (default /var/tmp)"},
               {"no-storage", false, "do not measure storage"},
               {"no-fio", false, "do not run fio beside the storage benchmark"},
               {"no-cpu", false, "do not measure the CPU and DRAM"},
               {"no-gpu", false, "do not measure the GPU"},
               {"no-cpu-device", false,
                "do not measure the executor's CPU device (the rates `ftplan validate --profile` predicts from)"},
               {"sustained-write", false, "also write on until the drive's write cache runs out"},
               {"sustained-bytes", true,
                "limit of the sustained write per directory (default: half the free space, <= 256 GiB)"},
               {"sustained-seconds", true, "time limit of the sustained write (default 300)"},
               {"repeats", true, "timed repeats per measurement (default: 3-5 quick, 5-10 full)"},
               {"dram-bound", true, "DRAM bandwidth bound, e.g. '307.2 GB/s' (channels x MT/s x 8 B)"},
               {"host", true, "catalog host whose DRAM channels x speed is the bound"},
               {"gpu", true, "catalog GPU to compare with (default: matched by device name)"},
               {"models", true, "zoo models whose GEMM shapes are timed, comma-separated"},
               {"tokens", true, "token counts of the GEMM shapes, comma-separated"},
           });
  return o;
}

double parse_option(const std::string& name, const std::string& text, ftplan::Quantity kind) {
  try {
    return ftplan::parse_quantity(text, kind);
  } catch (const ftplan::UnitError& e) {
    throw UsageError(fmt::format("--{}: {}", name, e.what()));
  }
}

std::string value_text(const std::string& unit, double v) {
  if (unit == "B/s") {
    if (std::abs(v) >= 1e12) return fmt::format("{:.2f} TB/s", v / 1e12);
    if (std::abs(v) >= 1e9) return fmt::format("{:.2f} GB/s", v / 1e9);
    return fmt::format("{:.1f} MB/s", v / 1e6);
  }
  if (unit == "FLOP/s")
    return std::abs(v) >= 1e12 ? fmt::format("{:.1f} TFLOPS", v / 1e12) : fmt::format("{:.1f} GFLOPS", v / 1e9);
  if (unit == "params/s") return fmt::format("{:.3g} G/s", v / 1e9);
  if (unit == "IOPS") return fmt::format("{:.1f}K IOPS", v / 1e3);
  if (unit == "W") return fmt::format("{:.0f} W", v);
  if (unit == "s") return std::abs(v) < 1e-3 ? fmt::format("{:.2f} us", v * 1e6) : fmt::format("{:.3g} s", v);
  if (unit == "of peak") return fmt::format("{:.1f}% of peak", 100 * v);
  return fmt::format("{:.4g} {}", v, unit);
}

// Progress on stderr: one line per step with the elapsed time, rewritten in place on a terminal.
class StderrProgress : public calibrate::Progress {
 public:
  StderrProgress() : start_(runtime::now_s()) {}
  void step(int index, int total, std::string_view label) override {
    line_.end();  // a terminal keeps each step's line
    line_.show(fmt::format("[{:>2}/{}] {:5.1f} s  {}", index + 1, total, runtime::now_s() - start_, label));
  }
  void note(std::string_view text) override { line_.print(fmt::format("note: {}", text)); }
  void done() { line_.print(fmt::format("calibration took {:.1f} s", runtime::now_s() - start_)); }
  // A part measured after the calibration's own steps.
  void part(std::string_view label) {
    line_.end();
    line_.show(fmt::format("[  +] {:5.1f} s  {}", runtime::now_s() - start_, label));
  }

 private:
  StatusLine line_;
  double start_;
};

// The GPU part's options: the catalog GPU, the models and token counts of its GEMMs.
void read_gpu_options(const Args& args, App& app, calibrate::Options& o) {
  o.zoo = &app.zoo();
  o.catalog = &app.catalog();
  o.catalog_gpu = args.value_or("gpu", "");
  if (!o.catalog_gpu.empty() && !o.catalog->gpu(o.catalog_gpu))
    throw UsageError(fmt::format("--gpu: no GPU '{}' in the catalog (ftplan hardware list gpus)", o.catalog_gpu));
  if (auto m = args.value("models")) {
    o.gemm_models = split_list(*m);
    for (const auto& name : o.gemm_models)
      if (!o.zoo->find(name))
        throw UsageError(fmt::format("--models: no model '{}' in the zoo (ftplan zoo list)", name));
  }
  if (auto t = args.value("tokens"))
    for (const auto& s : split_list(*t)) {
      const double v = parse_option("tokens", s, ftplan::Quantity::count);
      if (v < 1 || v != std::floor(v)) throw UsageError("--tokens takes whole numbers");
      o.gemm_tokens.push_back(static_cast<std::int64_t>(v));
    }
}

// Options from the command line; a typo fails now, before minutes of measuring.
calibrate::Options read_options(const Args& args, App& app) {
  calibrate::Options o;
  o.quick = args.flag("quick");
  o.cpu = !args.flag("no-cpu");
  o.gpu = !args.flag("no-gpu");
  o.fio = !args.flag("no-fio");
  if (!args.flag("no-storage"))
    for (const auto& d : split_list(args.value_or("storage-dir", "/var/tmp"))) {
      // A typo fails now, not after the CPU part (a full or read-only directory fails after storage).
      std::error_code ec;
      if (!std::filesystem::is_directory(d, ec))
        throw UsageError(fmt::format("--storage-dir: '{}' is not a directory{}", d,
                                     std::filesystem::exists(d, ec) ? "" : " (it does not exist)"));
      o.storage_dirs.emplace_back(d);
    }
  o.sustained_write = args.flag("sustained-write");
  if (auto v = args.value("sustained-bytes"))
    o.sustained_bytes = static_cast<std::uint64_t>(parse_option("sustained-bytes", *v, ftplan::Quantity::bytes));
  if (auto v = args.value("sustained-seconds"))
    o.sustained_s = parse_option("sustained-seconds", *v, ftplan::Quantity::count);
  if (auto v = args.value("repeats")) {
    const double r = parse_option("repeats", *v, ftplan::Quantity::count);
    if (r < 1 || r > 1000 || r != std::floor(r)) throw UsageError("--repeats takes a whole number from 1 to 1000");
    o.repeats = static_cast<int>(r);
  }
  if (auto v = args.value("dram-bound")) {
    o.dram_bound_Bps = parse_option("dram-bound", *v, ftplan::Quantity::bandwidth);
    o.dram_bound_source = "--dram-bound";
  }
  if (auto h = args.value("host")) {
    const auto* host = app.catalog().host(*h);
    if (!host) throw UsageError(fmt::format("--host: no host '{}' in the catalog (ftplan hardware list hosts)", *h));
    o.dram_bound_Bps = host->dram_bandwidth_Bps();
    o.dram_bound_source = fmt::format("catalog {}: channels x speed", host->name);
  }
  if (o.gpu) read_gpu_options(args, app, o);
  return o;
}

void print_json(const calibrate::Calibration& cal, const std::optional<std::string>& out_path) {
  nlohmann::ordered_json doc;
  doc["schema_version"] = kOutputSchemaVersion;
  doc["profile"] = out_path ? nlohmann::ordered_json(*out_path) : nlohmann::ordered_json(nullptr);
  doc["notes"] = cal.notes;
  auto& rows = doc["results"] = nlohmann::ordered_json::array();
  for (const auto& c : cal.comparisons)
    rows.push_back({{"section", c.section},
                    {"item", c.item},
                    {"unit", c.unit},
                    {"value", c.value},
                    {"spread", c.spread},
                    {"bound", c.bound},
                    {"bound_source", c.bound_source},
                    {"reference", c.reference},
                    {"reference_spread", c.reference_spread},
                    {"reference_source", c.reference_source}});
  fmt::print("{}\n", doc.dump(2));
}

void print_table(const calibrate::Calibration& cal) {
  const auto& m = cal.profile.machine;
  fmt::print("{} | {} ({} cores, {}) | {} | {}\n", m.hostname, m.cpu.model, m.cpu.cores,
             ftplan::format_bytes(m.cpu.dram_bytes), m.gpus.empty() ? "no GPU measured" : m.gpus[0].name, m.date);
  Table t;
  using A = Table::Align;
  t.columns({{"section", A::left},
             {"measurement", A::left},
             {"median", A::right},
             {"spread", A::right},
             {"bound", A::right},
             {"of bound", A::right},
             {"reference", A::right},
             {"ref spread", A::right},
             {"vs reference", A::right},
             {"reference is", A::left}});
  for (const auto& c : cal.comparisons)
    t.row({c.section, c.item, value_text(c.unit, c.value), fmt::format("{:.1f}%", 100 * c.spread),
           c.bound > 0 ? value_text(c.unit, c.bound) : "",
           c.bound > 0 ? fmt::format("{:.0f}%", 100 * c.value / c.bound) : "",
           c.reference > 0 ? value_text(c.unit, c.reference) : "",
           c.reference > 0 ? fmt::format("{:.1f}%", 100 * c.reference_spread) : "",
           c.reference > 0 ? fmt::format("{:+.1f}%", 100 * (c.value / c.reference - 1)) : "",
           c.reference > 0 ? c.reference_source : c.bound_source});
  fmt::print("{}", t.text());
  for (const auto& n : cal.notes) fmt::print("note: {}\n", n);
}

// The CPU device's figures as rows (section "cpu device"): its GEMM rates over the grid (median,
// slowest and fastest point), attention, the scalar rates and each storage set's striped rates.
void add_cpu_device_rows(const hardware::CpuDeviceSection& d, std::vector<calibrate::Comparison>& rows) {
  const auto row = [&](std::string item, std::string unit, double value, const std::vector<double>& samples) {
    calibrate::Comparison c;
    c.section = "cpu device";
    c.item = std::move(item);
    c.unit = std::move(unit);
    c.value = value;
    c.spread = runtime::relative_spread(samples);
    rows.push_back(std::move(c));
  };
  if (!d.gemm.empty()) {
    std::vector<double> rates;
    for (const auto& g : d.gemm) rates.push_back(g.flops_per_s);
    const auto [lo, hi] = std::minmax_element(
        d.gemm.begin(), d.gemm.end(), [](const auto& a, const auto& b) { return a.flops_per_s < b.flops_per_s; });
    row(fmt::format("GEMM fp32, median of {} points", d.gemm.size()), "FLOP/s", runtime::median(rates), {});
    row(fmt::format("GEMM slowest: {} {}x{}x{}", lo->layout, lo->m, lo->n, lo->k), "FLOP/s", lo->flops_per_s,
        lo->samples);
    row(fmt::format("GEMM fastest: {} {}x{}x{}", hi->layout, hi->m, hi->n, hi->k), "FLOP/s", hi->flops_per_s,
        hi->samples);
  }
  for (const auto& a : d.attention)
    row(fmt::format("attention {}x{} head_dim {}", a.queries, a.keys, a.head_dim), "FLOP/s", a.flops_per_s, a.samples);
  for (const auto& r : d.rates) row(r.name, r.name == "adam_params_per_s" ? "params/s" : "B/s", r.value, r.samples);
  for (const auto& st : d.storage) {
    const std::string where =
        fmt::format("{} striped, {} KiB x{}", fmt::join(st.paths, ","), st.block_bytes / 1024, st.queue_depth);
    row("read " + where, "B/s", st.read_Bps, st.read_samples);
    row("write " + where, "B/s", st.write_Bps, st.write_samples);
  }
}

}  // namespace

int cmd_calibrate(const std::vector<std::string>& argv) {
  const auto options = calibrate_options();
  const Args args(argv, 2, options);
  App app(args);
  if (!args.positionals().empty())
    throw UsageError("usage: ftplan calibrate [--quick] [--out profile.yaml] [options]\n" + usage_of(options));
  if (app.format() == Format::csv) throw UsageError("calibrate prints a table or JSON (--format table|json)");

  const calibrate::Options o = read_options(args, app);
  const auto out_path = args.value("out");
  // Check the output before measuring, so a bad path fails now rather than after minutes of work;
  // the file itself is replaced only when the profile is complete.
  if (out_path) {
    try {
      io::check_file_writable(*out_path);
    } catch (const SystemError& e) {
      throw UsageError(fmt::format("--out: {}", e.what()));
    }
  }

  runtime::remove_scratch_files_on_signal();
  // One process at a time in a storage directory (validate takes the same lock): two would time
  // each other's I/O.
  const auto locks = io::lock_directories({o.storage_dirs.begin(), o.storage_dirs.end()}, "calibrate");
  StderrProgress progress;
  calibrate::Calibration cal = calibrate::run_calibration(o, progress);
  // The executor's CPU device, the rates `ftplan validate --profile` predicts a step from (issue
  // 40): measured here, apart from any run it will check, on the storage directories measured above.
  if (o.cpu && !args.flag("no-cpu-device")) {
    exec::DeviceGrid grid = exec::device_grid(o.quick);
    if (o.repeats > 0) grid.cold_calls = o.repeats;
    cal.profile.cpu_device =
        exec::measure_cpu_device(grid, o.storage_dirs, [&](const std::string& s) { progress.part(s); });
    add_cpu_device_rows(cal.profile.cpu_device, cal.comparisons);
  }
  progress.done();

  if (out_path) {
    io::write_file_atomically(*out_path, io::profile_to_yaml(cal.profile));
    fmt::print(stderr, "profile written to {}\n", *out_path);
  }

  if (app.format() == Format::json)
    print_json(cal, out_path);
  else
    print_table(cal);
  return 0;
}

}  // namespace ftplan::cli
