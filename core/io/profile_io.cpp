#include "io/profile_io.hpp"

#include "common/strings.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "io/yaml_reader.hpp"

namespace ftplan::io {

using detail::MapView;
using detail::Reader;
using namespace ftplan::hardware;

namespace {

// ---------------------------------------------------------------------------------------------
// Names of the enumerations as they are spelled in the file.

// A GEMM's or attention's dtype: the ones a GPU computes matmuls in (the table's fp64, int8 and
// int4 are not measured).
const std::vector<std::pair<std::string, Dtype>>& gemm_dtypes() {
  static const std::vector<std::pair<std::string, Dtype>> names = [] {
    auto all = detail::choices_of<Dtype>();
    std::erase_if(all, [](const auto& n) {
      return n.second == Dtype::fp64 || n.second == Dtype::int8 || n.second == Dtype::int4;
    });
    return all;
  }();
  return names;
}

// ---------------------------------------------------------------------------------------------
// Reading.

constexpr double kBig = 1e30;  // no measured rate, size or count in a profile comes near this

// The row's samples: a non-empty list of non-negative numbers.
void read_samples(MapView& v, const char* key, std::vector<double>& out, bool required = true) {
  if (required) v.require(key, "the raw samples, one per repeat");
  const auto items = v.seq(key);
  const YAML::Node raw = v.raw();
  if (required && v.has(key) && raw[key].IsSequence() && items.empty())
    v.reader().error(v.location_of(key), v.key_path(key), "needs at least one sample");
  std::size_t i = 0;
  for (const auto& item : items) {
    const std::string where = fmt::format("{}[{}]", v.key_path(key), i++);
    if (!item.IsScalar()) {
      v.reader().error(item, where, fmt::format("expected a number; got {}", detail::describe_node(item)));
      continue;
    }
    try {
      const double x = parse_quantity(item.Scalar(), Quantity::count);
      if (x < 0)
        v.reader().error(item, where, fmt::format("must not be negative; got {}", item.Scalar()));
      else
        out.push_back(x);
    } catch (const UnitError&) {
      v.reader().error(item, where, fmt::format("expected a number; got '{}'", item.Scalar()));
    }
  }
}

// A row's value summarizes its samples (their median), so it must lie between the smallest and largest.
void check_within_samples(MapView& v, const char* key, double value, const std::vector<double>& samples) {
  if (samples.empty() || !v.has(key)) return;
  const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
  const double slack = 1e-9 * std::max(1.0, std::abs(*hi));
  if (value < *lo - slack || value > *hi + slack)
    v.reader().error(v.location_of(key), v.key_path(key),
                     fmt::format("{} lies outside its samples ({} .. {}); it should be their median", value, *lo, *hi));
}

// The row's `samples` and that its `key` value (their median) lies within them.
void read_samples_around(MapView& v, const char* key, double value, std::vector<double>& samples) {
  read_samples(v, "samples", samples);
  check_within_samples(v, key, value, samples);
}

void read_paths(MapView& v, std::vector<std::string>& paths) {
  v.require("paths", "the directories measured");
  if (v.get_strings("paths", paths) && paths.empty())
    v.reader().error(v.location_of("paths"), v.key_path("paths"), "needs at least one directory");
}

template <class Fn>
void for_rows(MapView& root, const char* key, Fn&& fn) {
  std::size_t i = 0;
  for (const auto& node : root.seq(key)) {
    MapView r(root.reader(), node, fmt::format("{}[{}]", root.key_path(key), i++));
    if (!r.valid()) {
      if (node.IsNull()) root.reader().error(node, r.path(), "expected a mapping of keys; got nothing");
      continue;
    }
    fn(r);
    r.finish();
  }
}

void read_machine(MapView& m, ProfileMachine& out) {
  m.get("hostname", out.hostname);
  m.require("date", "when the calibration ran, ISO 8601, e.g. 2026-05-01T12:00:00Z");
  m.get("date", out.date);
  m.get("ftplan_version", out.ftplan_version);
  m.get("kernel", out.kernel);
  m.require("cpu");
  if (MapView c = m.map("cpu"); c.valid()) {
    c.get_required("model", out.cpu.model);
    c.get("sockets", out.cpu.sockets, 0, 64);
    c.get("cores", out.cpu.cores, 0, 1 << 20);
    c.get("threads", out.cpu.threads, 0, 1 << 20);
    c.get("numa_nodes", out.cpu.numa_nodes, 0, 1024);
    c.get("simd", out.cpu.simd);
    c.get("dram_bytes", out.cpu.dram_bytes, 0, kBig);
    c.finish();
  }
  for_rows(m, "gpus", [&](MapView& g) {
    ProfileGpu gpu;
    g.get_required("index", gpu.index, 0, 1024);
    g.get_required("name", gpu.name);
    g.get("compute_capability", gpu.compute_capability);
    g.get("memory_bytes", gpu.memory_bytes, 0, kBig);
    g.get("pcie_gen", gpu.pcie_gen, 0, 16);
    g.get("pcie_lanes", gpu.pcie_lanes, 0, 64);
    out.gpus.push_back(std::move(gpu));
  });
  m.get("gpu_driver_version", out.gpu_driver_version);
  m.get("cuda_runtime_version", out.cuda_runtime_version);
  for_rows(m, "drives", [&](MapView& d) {
    ProfileDrive drive;
    d.get_required("path", drive.path);
    d.get("device", drive.device);
    d.get("model", drive.model);
    d.get("rotational", drive.rotational);
    out.drives.push_back(std::move(drive));
  });
  m.get("notes", out.notes);
  m.finish();
}

void read_settings(MapView& s, ProfileSettings& out) {
  s.get_enum<std::string>("mode", out.mode, {{"quick", "quick"}, {"full", "full"}});
  s.get("repeats", out.repeats, 1, 1 << 20);
  s.finish();
}

void read_gemm(MapView& r, std::vector<GemmSample>& rows) {
  GemmSample g;
  r.require("dtype");
  r.get_enum("dtype", g.dtype, gemm_dtypes());
  r.get("op", g.op);
  for (const char* dim : {"m", "n", "k"}) r.require(dim);
  r.get("m", g.m, 1);
  r.get("n", g.n, 1);
  r.get("k", g.k, 1);
  r.get_required("flops_per_s", g.flops_per_s, 0, kBig);
  r.get("peak_flops_per_s", g.peak_flops_per_s, 0, kBig);
  read_samples_around(r, "flops_per_s", g.flops_per_s, g.samples);
  rows.push_back(std::move(g));
}

void read_attention(MapView& r, std::vector<AttentionSample>& rows) {
  AttentionSample a;
  r.require("dtype");
  r.get_enum("dtype", a.dtype, gemm_dtypes());
  r.get_enum<std::string>("impl", a.impl, {{"cudnn-sdpa", "cudnn-sdpa"}, {"cublas-matmuls", "cublas-matmuls"}});
  r.get_enum<std::string>("pass", a.pass, {{"fwd", "fwd"}, {"bwd", "bwd"}});
  for (const char* dim : {"batch", "heads", "seq", "head_dim"}) r.require(dim);
  r.get("batch", a.batch, 1);
  r.get("heads", a.heads, 1);
  a.kv_heads = a.heads;
  r.get("kv_heads", a.kv_heads, 1);
  r.get("seq", a.seq, 1);
  r.get("head_dim", a.head_dim, 1);
  r.get("causal", a.causal);
  r.get_required("flops_per_s", a.flops_per_s, 0, kBig);
  read_samples_around(r, "flops_per_s", a.flops_per_s, a.samples);
  if (a.kv_heads > a.heads || (a.kv_heads > 0 && a.heads % a.kv_heads != 0))
    r.reader().error(r.location_of("kv_heads"), r.key_path("kv_heads"), "must divide heads");
  rows.push_back(std::move(a));
}

// The measured part of a memory or copy row: bytes, bandwidth_Bps (within its samples), bound_Bps.
template <class Sample>
void read_bandwidth(MapView& r, Sample& s) {
  r.get_required("bytes", s.bytes, 1, kBig);
  r.get_required("bandwidth_Bps", s.bandwidth_Bps, 0, kBig);
  r.get("bound_Bps", s.bound_Bps, 0, kBig);
  read_samples_around(r, "bandwidth_Bps", s.bandwidth_Bps, s.samples);
}

void read_memory(MapView& r, std::vector<MemorySample>& rows) {
  MemorySample s;
  r.get("gpu", s.gpu, 0, 1024);
  r.get_enum<std::string>("op", s.op, {{"copy", "copy"}});
  read_bandwidth(r, s);
  rows.push_back(std::move(s));
}

void read_copy(MapView& r, std::vector<CopySample>& rows) {
  CopySample s;
  r.require("direction");
  r.get_enum("direction", s.direction);
  r.get_required("pinned", s.pinned);
  read_bandwidth(r, s);
  rows.push_back(std::move(s));
}

void read_collective(MapView& r, std::vector<CollectiveSample>& rows) {
  CollectiveSample s;
  r.require("op");
  r.get_enum("op", s.op);
  r.get_required("ranks", s.ranks, 2, 1 << 20);
  r.get_required("bytes", s.bytes, 1, kBig);
  r.get_required("bus_bandwidth_Bps", s.bus_bandwidth_Bps, 0, kBig);
  read_samples_around(r, "bus_bandwidth_Bps", s.bus_bandwidth_Bps, s.samples);
  rows.push_back(std::move(s));
}

void read_storage_run(MapView& r, std::vector<StorageSample>& rows) {
  StorageSample s;
  read_paths(r, s.paths);
  r.require("op");
  r.get_enum("op", s.op);
  r.get_required("block_bytes", s.block_bytes, 512, kBig);
  if (s.block_bytes > 0 && std::fmod(s.block_bytes, 512.0) != 0)
    r.reader().error(r.location_of("block_bytes"), r.key_path("block_bytes"),
                     fmt::format("must be a multiple of 512 (O_DIRECT); got {}", s.block_bytes));
  r.get_required("queue_depth", s.queue_depth, 1, 65536);
  r.get_required("bandwidth_Bps", s.bandwidth_Bps, 0, kBig);
  r.get("iops", s.iops, 0, kBig);
  read_samples_around(r, "bandwidth_Bps", s.bandwidth_Bps, s.samples);
  r.get("fio_bandwidth_Bps", s.fio_bandwidth_Bps, 0, kBig);
  read_samples(r, "fio_samples", s.fio_samples, r.has("fio_bandwidth_Bps"));
  check_within_samples(r, "fio_bandwidth_Bps", s.fio_bandwidth_Bps, s.fio_samples);
  rows.push_back(std::move(s));
}

void read_sustained(MapView& r, std::vector<SustainedWriteSample>& rows) {
  SustainedWriteSample s;
  read_paths(r, s.paths);
  r.get_required("block_bytes", s.block_bytes, 512, kBig);
  r.get_required("queue_depth", s.queue_depth, 1, 65536);
  r.get_required("bytes_written", s.bytes_written, 0, kBig);
  r.get_required("interval_s", s.interval_s, 1e-6, 3600);
  r.get_required("burst_bandwidth_Bps", s.burst_bandwidth_Bps, 0, kBig);
  r.get_required("sustained_bandwidth_Bps", s.sustained_bandwidth_Bps, 0, kBig);
  r.get("cache_bytes", s.cache_bytes, 0, kBig);
  read_samples(r, "samples", s.samples);
  if (s.cache_bytes > s.bytes_written)
    r.reader().error(r.location_of("cache_bytes"), r.key_path("cache_bytes"), "is more than bytes_written");
  rows.push_back(std::move(s));
}

void read_cpu(MapView& c, CpuSection& out) {
  c.get("dram_bound_Bps", out.dram_bound_Bps, 0, kBig);
  for_rows(c, "dram", [&](MapView& r) {
    DramSample s;
    r.require("kernel");
    r.get_enum<std::string>("kernel", s.kernel, {{"copy", "copy"}, {"triad", "triad"}});
    r.get_required("threads", s.threads, 1, 1 << 20);
    r.get_required("array_bytes", s.array_bytes, 1, kBig);
    r.get_required("bandwidth_Bps", s.bandwidth_Bps, 0, kBig);
    read_samples_around(r, "bandwidth_Bps", s.bandwidth_Bps, s.samples);
    out.dram.push_back(std::move(s));
  });
  for_rows(c, "optimizer", [&](MapView& r) {
    OptimizerSample s;
    r.require("optimizer");
    r.get_enum<std::string>("optimizer", s.optimizer, {{"adamw", "adamw"}});
    r.get_required("threads", s.threads, 1, 1 << 20);
    r.get_required("params", s.params, 1);
    r.get_required("params_per_s", s.params_per_s, 0, kBig);
    r.get_required("bytes_per_param", s.bytes_per_param, 1, 1024);
    r.get("triad_fraction", s.triad_fraction, 0, 100);
    read_samples_around(r, "params_per_s", s.params_per_s, s.samples);
    out.optimizer.push_back(std::move(s));
  });
  c.finish();
}

// A measured shape's three sizes (each required, at least 1), then its rate within its samples.
void read_shape_rate(MapView& r, const std::array<std::pair<const char*, std::int64_t*>, 3>& sizes, double& flops_per_s,
                     std::vector<double>& samples) {
  for (const auto& [key, value] : sizes) r.require(key);
  for (const auto& [key, value] : sizes) r.get(key, *value, 1);
  r.get_required("flops_per_s", flops_per_s, 0, kBig);
  read_samples_around(r, "flops_per_s", flops_per_s, samples);
}

// cpu_device: the executor's CPU device (ftplan validate's), measured by calibrate.
void read_cpu_device(MapView& c, CpuDeviceSection& out) {
  c.get("device", out.device);
  for_rows(c, "gemm", [&](MapView& r) {
    CpuDeviceGemmSample g;
    r.require("layout", "nn (forward), nt (input gradient) or tn (weight gradient)");
    r.get_enum<std::string>("layout", g.layout, {{"nn", "nn"}, {"nt", "nt"}, {"tn", "tn"}});
    read_shape_rate(r, {{{"m", &g.m}, {"n", &g.n}, {"k", &g.k}}}, g.flops_per_s, g.samples);
    out.gemm.push_back(std::move(g));
  });
  for_rows(c, "attention", [&](MapView& r) {
    CpuDeviceAttentionSample a;
    read_shape_rate(r, {{{"queries", &a.queries}, {"keys", &a.keys}, {"head_dim", &a.head_dim}}}, a.flops_per_s,
                    a.samples);
    out.attention.push_back(std::move(a));
  });
  for_rows(c, "rates", [&](MapView& r) {
    CpuDeviceRate x;
    r.require("name");
    r.get_enum<std::string>("name", x.name,
                            {{"memory_Bps", "memory_Bps"},
                             {"copy_Bps", "copy_Bps"},
                             {"dram_Bps", "dram_Bps"},
                             {"adam_params_per_s", "adam_params_per_s"}});
    r.get_required("value", x.value, 0, kBig);
    read_samples_around(r, "value", x.value, x.samples);
    if (std::any_of(out.rates.begin(), out.rates.end(), [&](const CpuDeviceRate& y) { return y.name == x.name; }))
      r.reader().error(r.location_of("name"), r.key_path("name"), fmt::format("'{}' is given twice", x.name));
    out.rates.push_back(std::move(x));
  });
  for_rows(c, "storage", [&](MapView& r) {
    CpuDeviceStorageSample s;
    read_paths(r, s.paths);
    r.get_required("block_bytes", s.block_bytes, 512, kBig);
    r.get_required("stripe_bytes", s.stripe_bytes, 512, kBig);
    r.get_required("queue_depth", s.queue_depth, 1, 65536);
    r.get_required("read_Bps", s.read_Bps, 0, kBig);
    r.get_required("write_Bps", s.write_Bps, 0, kBig);
    read_samples(r, "read_samples", s.read_samples);
    check_within_samples(r, "read_Bps", s.read_Bps, s.read_samples);
    read_samples(r, "write_samples", s.write_samples);
    check_within_samples(r, "write_Bps", s.write_Bps, s.write_samples);
    out.storage.push_back(std::move(s));
  });
  c.finish();
}

void read_power(MapView& r, std::vector<PowerSample>& rows) {
  PowerSample s;
  r.get("gpu", s.gpu, 0, 1024);
  r.get_required("kernel_class", s.kernel_class);
  r.get_required("power_w", s.power_w, 0, 1e5);
  read_samples_around(r, "power_w", s.power_w, s.samples);
  rows.push_back(std::move(s));
}

// ---------------------------------------------------------------------------------------------
// Writing.

std::string num(double v) { return fmt::format("{}", v); }

std::string list(const std::vector<double>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + num(v[i]);
  return out + "]";
}

std::string list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + yaml_quoted(v[i]);
  return out + "]";
}

std::string yes_no(bool b) { return b ? "true" : "false"; }

// A row of a table as fields in order; fields left out (optional ones at their defaults) are skipped.
using Fields = std::vector<std::pair<std::string, std::string>>;

class Writer {
 public:
  void line(int indent, std::string_view text) { out_ += fmt::format("{:{}}{}\n", "", indent, text); }
  void field(int indent, std::string_view key, const std::string& value) {
    line(indent, fmt::format("{}: {}", key, value));
  }
  // `key: "text"`, skipped when empty (the reader leaves such fields at "").
  void text(int indent, std::string_view key, const std::string& value) {
    if (!value.empty()) field(indent, key, yaml_quoted(value));
  }
  // A list item at `indent`: "- first: ..." then the other fields under it.
  void row(int indent, const Fields& fields) {
    for (std::size_t i = 0; i < fields.size(); ++i)
      line(i == 0 ? indent : indent + 2,
           fmt::format("{}{}: {}", i == 0 ? "- " : "", fields[i].first, fields[i].second));
  }
  template <class T, class Fn>
  void table(int indent, std::string_view key, const std::vector<T>& rows, Fn&& to_fields) {
    if (rows.empty()) {
      field(indent, key, "[]");
      return;
    }
    line(indent, fmt::format("{}:", key));
    for (const auto& r : rows) row(indent + 2, to_fields(r));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

void optional(Fields& f, const char* key, double value) {
  if (value != 0) f.emplace_back(key, num(value));
}

void optional(Fields& f, const char* key, const std::string& value) {
  if (!value.empty()) f.emplace_back(key, yaml_quoted(value));
}

}  // namespace

hardware::CalibrationProfile parse_profile(std::string_view text, const std::string& name) {
  const YAML::Node doc = detail::load_yaml_text(text, name);
  Reader reader(name);
  MapView root = reader.root(doc);
  if (!root.valid()) reader.throw_if_any();
  CalibrationProfile p;
  root.require("schema_version");
  if (root.get("schema_version", p.schema_version) && p.schema_version != kProfileSchemaVersion)
    reader.error(root.location_of("schema_version"), "schema_version",
                 fmt::format("this build of ftplan reads calibration profiles of version {}; got {}. Re-run "
                             "`ftplan calibrate` to write a current one",
                             kProfileSchemaVersion, p.schema_version));
  root.require("machine", "who was measured and when");
  if (MapView m = root.map("machine"); m.valid()) read_machine(m, p.machine);
  if (MapView s = root.map("settings"); s.valid()) read_settings(s, p.settings);
  for_rows(root, "gemm", [&](MapView& r) { read_gemm(r, p.gemm); });
  for_rows(root, "attention", [&](MapView& r) { read_attention(r, p.attention); });
  for_rows(root, "memory", [&](MapView& r) { read_memory(r, p.memory); });
  for_rows(root, "copy", [&](MapView& r) { read_copy(r, p.copy); });
  for_rows(root, "collectives", [&](MapView& r) { read_collective(r, p.collectives); });
  if (MapView s = root.map("storage"); s.valid()) {
    for_rows(s, "runs", [&](MapView& r) { read_storage_run(r, p.storage.runs); });
    for_rows(s, "sustained_write", [&](MapView& r) { read_sustained(r, p.storage.sustained_write); });
    s.finish();
  }
  if (MapView c = root.map("cpu"); c.valid()) read_cpu(c, p.cpu);
  for_rows(root, "power", [&](MapView& r) { read_power(r, p.power); });
  if (MapView c = root.map("cpu_device"); c.valid()) read_cpu_device(c, p.cpu_device);
  root.finish();
  reader.throw_if_any();
  return p;
}

hardware::CalibrationProfile load_profile(const std::filesystem::path& path) {
  return parse_profile(detail::read_input_file(path), path.string());
}

namespace {

// machine: who was measured, and when.
void write_machine(Writer& w, const ProfileMachine& m) {
  w.line(0, "machine:");
  w.text(2, "hostname", m.hostname);
  w.text(2, "date", m.date);
  w.text(2, "ftplan_version", m.ftplan_version);
  w.text(2, "kernel", m.kernel);
  w.line(2, "cpu:");
  w.text(4, "model", m.cpu.model);
  w.field(4, "sockets", std::to_string(m.cpu.sockets));
  w.field(4, "cores", std::to_string(m.cpu.cores));
  w.field(4, "threads", std::to_string(m.cpu.threads));
  w.field(4, "numa_nodes", std::to_string(m.cpu.numa_nodes));
  w.text(4, "simd", m.cpu.simd);
  w.field(4, "dram_bytes", num(m.cpu.dram_bytes));
  w.table(2, "gpus", m.gpus, [](const ProfileGpu& g) {
    Fields f{{"index", std::to_string(g.index)}, {"name", yaml_quoted(g.name)}};
    optional(f, "compute_capability", g.compute_capability);
    optional(f, "memory_bytes", g.memory_bytes);
    optional(f, "pcie_gen", g.pcie_gen);
    optional(f, "pcie_lanes", g.pcie_lanes);
    return f;
  });
  w.text(2, "gpu_driver_version", m.gpu_driver_version);
  w.text(2, "cuda_runtime_version", m.cuda_runtime_version);
  w.table(2, "drives", m.drives, [](const ProfileDrive& d) {
    Fields f{{"path", yaml_quoted(d.path)}};
    optional(f, "device", d.device);
    optional(f, "model", d.model);
    f.emplace_back("rotational", yes_no(d.rotational));
    return f;
  });
  w.text(2, "notes", m.notes);
}

// The GPU's tables: gemm, attention, memory, copy, collectives.
void write_gpu_tables(Writer& w, const hardware::CalibrationProfile& p) {
  w.table(0, "gemm", p.gemm, [](const GemmSample& g) {
    Fields f{{"dtype", to_string(g.dtype)}};
    optional(f, "op", g.op);
    f.insert(f.end(), {{"m", std::to_string(g.m)},
                       {"n", std::to_string(g.n)},
                       {"k", std::to_string(g.k)},
                       {"flops_per_s", num(g.flops_per_s)}});
    optional(f, "peak_flops_per_s", g.peak_flops_per_s);
    f.emplace_back("samples", list(g.samples));
    return f;
  });
  w.table(0, "attention", p.attention, [](const AttentionSample& a) {
    return Fields{{"dtype", to_string(a.dtype)},
                  {"impl", a.impl},
                  {"pass", a.pass},
                  {"batch", std::to_string(a.batch)},
                  {"heads", std::to_string(a.heads)},
                  {"kv_heads", std::to_string(a.kv_heads)},
                  {"seq", std::to_string(a.seq)},
                  {"head_dim", std::to_string(a.head_dim)},
                  {"causal", yes_no(a.causal)},
                  {"flops_per_s", num(a.flops_per_s)},
                  {"samples", list(a.samples)}};
  });
  w.table(0, "memory", p.memory, [](const MemorySample& s) {
    Fields f{
        {"gpu", std::to_string(s.gpu)}, {"op", s.op}, {"bytes", num(s.bytes)}, {"bandwidth_Bps", num(s.bandwidth_Bps)}};
    optional(f, "bound_Bps", s.bound_Bps);
    f.emplace_back("samples", list(s.samples));
    return f;
  });
  w.table(0, "copy", p.copy, [](const CopySample& s) {
    Fields f{{"direction", to_string(s.direction)},
             {"pinned", yes_no(s.pinned)},
             {"bytes", num(s.bytes)},
             {"bandwidth_Bps", num(s.bandwidth_Bps)}};
    optional(f, "bound_Bps", s.bound_Bps);
    f.emplace_back("samples", list(s.samples));
    return f;
  });
  w.table(0, "collectives", p.collectives, [](const CollectiveSample& s) {
    return Fields{{"op", to_string(s.op)},
                  {"ranks", std::to_string(s.ranks)},
                  {"bytes", num(s.bytes)},
                  {"bus_bandwidth_Bps", num(s.bus_bandwidth_Bps)},
                  {"samples", list(s.samples)}};
  });
}

// storage: runs and sustained writes.
void write_storage(Writer& w, const StorageSection& st) {
  w.line(0, "storage:");
  w.table(2, "runs", st.runs, [](const StorageSample& s) {
    Fields f{{"paths", list(s.paths)},
             {"op", to_string(s.op)},
             {"block_bytes", num(s.block_bytes)},
             {"queue_depth", std::to_string(s.queue_depth)},
             {"bandwidth_Bps", num(s.bandwidth_Bps)}};
    optional(f, "iops", s.iops);
    f.emplace_back("samples", list(s.samples));
    if (s.fio_bandwidth_Bps > 0 || !s.fio_samples.empty()) {
      f.emplace_back("fio_bandwidth_Bps", num(s.fio_bandwidth_Bps));
      f.emplace_back("fio_samples", list(s.fio_samples));
    }
    return f;
  });
  w.table(2, "sustained_write", st.sustained_write, [](const SustainedWriteSample& s) {
    Fields f{{"paths", list(s.paths)},
             {"block_bytes", num(s.block_bytes)},
             {"queue_depth", std::to_string(s.queue_depth)},
             {"bytes_written", num(s.bytes_written)},
             {"interval_s", num(s.interval_s)},
             {"burst_bandwidth_Bps", num(s.burst_bandwidth_Bps)},
             {"sustained_bandwidth_Bps", num(s.sustained_bandwidth_Bps)}};
    optional(f, "cache_bytes", s.cache_bytes);
    f.emplace_back("samples", list(s.samples));
    return f;
  });
}

// cpu: DRAM bandwidth and the CPU optimizer.
void write_cpu(Writer& w, const CpuSection& c) {
  w.line(0, "cpu:");
  if (c.dram_bound_Bps > 0) w.field(2, "dram_bound_Bps", num(c.dram_bound_Bps));
  w.table(2, "dram", c.dram, [](const DramSample& s) {
    return Fields{{"kernel", s.kernel},
                  {"threads", std::to_string(s.threads)},
                  {"array_bytes", num(s.array_bytes)},
                  {"bandwidth_Bps", num(s.bandwidth_Bps)},
                  {"samples", list(s.samples)}};
  });
  w.table(2, "optimizer", c.optimizer, [](const OptimizerSample& s) {
    Fields f{{"optimizer", s.optimizer},
             {"threads", std::to_string(s.threads)},
             {"params", std::to_string(s.params)},
             {"params_per_s", num(s.params_per_s)},
             {"bytes_per_param", num(s.bytes_per_param)}};
    optional(f, "triad_fraction", s.triad_fraction);
    f.emplace_back("samples", list(s.samples));
    return f;
  });
}

// cpu_device: the executor's CPU device, written only when measured.
void write_cpu_device(Writer& w, const CpuDeviceSection& c) {
  if (c.empty()) return;
  w.line(0, "cpu_device:");
  w.text(2, "device", c.device);
  w.table(2, "gemm", c.gemm, [](const CpuDeviceGemmSample& g) {
    return Fields{{"layout", g.layout},       {"m", std::to_string(g.m)},          {"n", std::to_string(g.n)},
                  {"k", std::to_string(g.k)}, {"flops_per_s", num(g.flops_per_s)}, {"samples", list(g.samples)}};
  });
  w.table(2, "attention", c.attention, [](const CpuDeviceAttentionSample& a) {
    return Fields{{"queries", std::to_string(a.queries)},
                  {"keys", std::to_string(a.keys)},
                  {"head_dim", std::to_string(a.head_dim)},
                  {"flops_per_s", num(a.flops_per_s)},
                  {"samples", list(a.samples)}};
  });
  w.table(2, "rates", c.rates, [](const CpuDeviceRate& x) {
    return Fields{{"name", x.name}, {"value", num(x.value)}, {"samples", list(x.samples)}};
  });
  w.table(2, "storage", c.storage, [](const CpuDeviceStorageSample& s) {
    return Fields{{"paths", list(s.paths)},
                  {"block_bytes", num(s.block_bytes)},
                  {"stripe_bytes", num(s.stripe_bytes)},
                  {"queue_depth", std::to_string(s.queue_depth)},
                  {"read_Bps", num(s.read_Bps)},
                  {"read_samples", list(s.read_samples)},
                  {"write_Bps", num(s.write_Bps)},
                  {"write_samples", list(s.write_samples)}};
  });
}
}  // namespace

std::string profile_to_yaml(const hardware::CalibrationProfile& p) {
  Writer w;
  w.line(0, "# ftplan calibration profile; format: docs/calibration-profile.md");
  w.field(0, "schema_version", std::to_string(p.schema_version));
  write_machine(w, p.machine);
  w.line(0, "settings:");
  w.field(2, "mode", p.settings.mode);
  if (p.settings.repeats > 0) w.field(2, "repeats", std::to_string(p.settings.repeats));
  write_gpu_tables(w, p);
  write_storage(w, p.storage);
  write_cpu(w, p.cpu);
  w.table(0, "power", p.power, [](const PowerSample& s) {
    return Fields{{"gpu", std::to_string(s.gpu)},
                  {"kernel_class", yaml_quoted(s.kernel_class)},
                  {"power_w", num(s.power_w)},
                  {"samples", list(s.samples)}};
  });
  write_cpu_device(w, p.cpu_device);
  return w.take();
}

}  // namespace ftplan::io
