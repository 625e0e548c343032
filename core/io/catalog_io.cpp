#include "io/catalog_io.hpp"

#include <functional>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/yaml_reader.hpp"

namespace ftplan::io {

using detail::MapView;
using detail::Reader;
using namespace ftplan::hardware;

namespace {

bool valid_name(const std::string& name) {
  static const std::regex re("[a-z0-9][a-z0-9.\\-]*");
  return std::regex_match(name, re);
}

void read_common(MapView& v, std::string& name, std::string& display_name, Sources& sources, std::string& notes) {
  v.require("name");
  if (v.get("name", name) && !valid_name(name))
    v.reader().error(v.location_of("name"), v.key_path("name"),
                     fmt::format("'{}': use lowercase letters, digits, '.' and '-'", name));
  v.get("display_name", display_name);
  if (display_name.empty()) display_name = name;
  v.get("notes", notes);
  v.require("sources", "a citation for the figures (a map from field to source; 'default' covers the rest)");
  if (MapView s = v.map("sources"); s.valid()) {
    for (const auto& kv : s.raw()) {
      if (!kv.first.IsScalar() || !kv.second.IsScalar() || kv.second.Scalar().empty()) {
        v.reader().error(kv.first, s.path(), "each source is 'field: citation text'");
        continue;
      }
      sources[kv.first.Scalar()] = kv.second.Scalar();
    }
  }
}

void read_price(MapView& v, Price& price) {
  MapView p = v.map("price");
  if (!p.valid()) return;
  double value = 0;
  if (p.get_quantity("purchase", ftplan::Quantity::money, value)) price.purchase_usd = value;
  if (p.get_quantity("cloud_hourly", ftplan::Quantity::money_per_hour, value)) price.cloud_usd_per_hour = value;
  if (p.get_quantity("dram_per_gib", ftplan::Quantity::money, value)) price.dram_usd_per_gib = value;
  if (price.purchase_usd || price.cloud_usd_per_hour) p.require("as_of", "when the price was read, e.g. 2026-05");
  p.get("as_of", price.as_of);
  p.finish();
}

void read_pcie(MapView& v, const char* key, PcieLink& link) {
  MapView l = v.map(key);
  if (!l.valid()) return;
  l.get_required("pcie_gen", link.gen, 1, 6);
  l.get_required("lanes", link.lanes, 1, 32);
  l.finish();
}

GpuSpec read_gpu(MapView& v) {
  GpuSpec g;
  read_common(v, g.name, g.display_name, g.sources, g.notes);
  v.get("vendor", g.vendor);
  v.get("architecture", g.architecture);
  v.get("form_factor", g.form_factor);
  v.get("sm_count", g.sm_count, 1, 10000);
  v.get_required_quantity("memory", ftplan::Quantity::bytes, g.memory_bytes, 1);
  v.get_quantity("usable_memory", ftplan::Quantity::bytes, g.usable_memory_bytes, 1);
  if (g.usable_memory_bytes == 0) g.usable_memory_bytes = g.memory_bytes;
  v.get_required_quantity("memory_bandwidth", ftplan::Quantity::bandwidth, g.memory_bandwidth_Bps, 1);
  v.require("peak", "dense peak FLOP/s per dtype");
  if (MapView p = v.map("peak"); p.valid()) {
    for (const auto& [name, dtype] : detail::choices_of<Dtype>()) {
      double value = 0;
      if (p.get_quantity(name, ftplan::Quantity::flops, value, 1)) g.peak_flops[dtype] = value;
    }
    p.finish();
    if (g.peak_flops.count(Dtype::fp32) == 0) p.require("fp32");
  }
  v.get_required_quantity("tdp", ftplan::Quantity::power, g.tdp_w, 1);
  v.get_required_quantity("idle_power", ftplan::Quantity::power, g.idle_power_w, 0);
  v.require("host_link");
  read_pcie(v, "host_link", g.host_link);
  v.get_quantity("nvlink_bandwidth", ftplan::Quantity::bandwidth, g.nvlink_bandwidth_Bps, 0);
  v.get("gemm_efficiency", g.gemm_efficiency, 0.05, 1.2);
  read_price(v, g.price);
  if (g.idle_power_w > g.tdp_w)
    v.reader().error(v.location_of("idle_power"), v.key_path("idle_power"), "is above the TDP");
  if (g.usable_memory_bytes > g.memory_bytes * 1.08)
    v.reader().error(v.location_of("usable_memory"), v.key_path("usable_memory"), "is more than the memory capacity");
  return g;
}

HostSpec read_host(MapView& v) {
  HostSpec h;
  read_common(v, h.name, h.display_name, h.sources, h.notes);
  v.get("sockets", h.sockets, 1, 16);
  v.get_required("cores_per_socket", h.cores_per_socket, 1, 1024);
  v.get("threads_per_core", h.threads_per_core, 1, 8);
  v.get_quantity("base_clock", ftplan::Quantity::frequency, h.base_clock_hz, 0);
  v.get("simd", h.simd);
  v.get_required("dram_channels_per_socket", h.dram_channels_per_socket, 1, 64);
  v.get_required_quantity("dram_speed", ftplan::Quantity::transfer_rate, h.dram_transfers_per_s, 1);
  v.get_required_quantity("dram", ftplan::Quantity::bytes, h.dram_bytes, 1);
  v.get("pcie_gen", h.pcie_gen, 1, 6);
  v.get("pcie_lanes_per_socket", h.pcie_lanes_per_socket, 0, 1024);
  v.get_required_quantity("cpu_tdp", ftplan::Quantity::power, h.cpu_tdp_w, 1);
  v.get_required_quantity("cpu_idle_power", ftplan::Quantity::power, h.cpu_idle_power_w, 0);
  v.get_quantity("dram_power_per_dimm", ftplan::Quantity::power, h.dram_power_per_dimm_w, 0);
  v.get("dimms_per_socket", h.dimms_per_socket, 0, 64);
  read_price(v, h.price);
  return h;
}

// One entry of a device kind's file (plan::kDeviceKinds: drives.yaml, nics.yaml, expanders.yaml).
void read_device(MapView& v, DriveSpec& d) {
  read_common(v, d.name, d.display_name, d.sources, d.notes);
  v.get_enum<std::string>("class", d.drive_class,
                          {{"datacenter", "datacenter"}, {"consumer", "consumer"}, {"ai-cache", "ai-cache"}});
  v.require("interface");
  read_pcie(v, "interface", d.interface);
  v.get_required_quantity("capacity", ftplan::Quantity::bytes, d.capacity_bytes, 1);
  v.get_required_quantity("seq_read", ftplan::Quantity::bandwidth, d.seq_read_Bps, 1);
  v.get_required_quantity("seq_write", ftplan::Quantity::bandwidth, d.seq_write_Bps, 1);
  v.get_quantity("sustained_write", ftplan::Quantity::bandwidth, d.sustained_write_Bps, 1);
  if (d.sustained_write_Bps == 0) d.sustained_write_Bps = d.seq_write_Bps;
  v.get_quantity("write_cache", ftplan::Quantity::bytes, d.write_cache_bytes, 0);
  v.get("random_read_iops", d.random_read_iops, 0.0);
  v.get("random_write_iops", d.random_write_iops, 0.0);
  v.get_required_quantity("read_power", ftplan::Quantity::power, d.read_power_w, 0);
  v.get_required_quantity("write_power", ftplan::Quantity::power, d.write_power_w, 0);
  v.get_required_quantity("idle_power", ftplan::Quantity::power, d.idle_power_w, 0);
  double tbw = 0;
  v.get_quantity("endurance_tbw", ftplan::Quantity::bytes, tbw, 0);
  v.get("dwpd", d.dwpd, 0.0);
  v.get("warranty_years", d.warranty_years, 0.0, 50.0);
  if (tbw > 0)
    d.endurance_bytes = tbw;
  else if (d.dwpd > 0 && d.warranty_years > 0)
    d.endurance_bytes = d.dwpd * d.capacity_bytes * 365.0 * d.warranty_years;
  else
    v.reader().error(v.location(), v.path(), "needs endurance_tbw, or dwpd with warranty_years");
  read_price(v, d.price);
  if (d.sustained_write_Bps > d.seq_write_Bps)
    v.reader().error(v.location_of("sustained_write"), v.key_path("sustained_write"), "is above seq_write");
}

void read_device(MapView& v, NicSpec& n) {
  read_common(v, n.name, n.display_name, n.sources, n.notes);
  v.get_enum<std::string>("fabric", n.fabric,
                          {{"infiniband", "infiniband"}, {"roce", "roce"}, {"ethernet", "ethernet"}});
  v.get_required_quantity("bandwidth", ftplan::Quantity::bandwidth, n.bandwidth_Bps, 1);
  v.get("ports", n.ports, 1, 64);
  v.get_required_quantity("latency", ftplan::Quantity::duration, n.latency_s, 0);
  v.get_required_quantity("power", ftplan::Quantity::power, n.power_w, 0);
  v.get_quantity("switch_power_per_port", ftplan::Quantity::power, n.switch_power_per_port_w, 0);
  read_price(v, n.price);
}

void read_device(MapView& v, CxlSpec& x) {
  read_common(v, x.name, x.display_name, x.sources, x.notes);
  v.require("interface");
  read_pcie(v, "interface", x.interface);
  v.get_required_quantity("capacity", ftplan::Quantity::bytes, x.capacity_bytes, 1);
  v.get_required_quantity("bandwidth", ftplan::Quantity::bandwidth, x.bandwidth_Bps, 1);
  v.get_required_quantity("read", ftplan::Quantity::bandwidth, x.read_Bps, 1);
  v.get_required_quantity("write", ftplan::Quantity::bandwidth, x.write_Bps, 1);
  v.get_required_quantity("power", ftplan::Quantity::power, x.power_w, 0);
  read_price(v, x.price);
  // A device cannot move more than its link carries one way (PcieLink::bandwidth_Bps).
  const double link = x.interface.bandwidth_Bps();
  // Nor more one way than in all.
  for (const auto& [key, rate] : {std::pair<const char*, double>{"read", x.read_Bps}, {"write", x.write_Bps}}) {
    if (link > 0 && rate > link * 1.0001)
      v.reader().error(v.location_of(key), v.key_path(key),
                       fmt::format("is above what its PCIe {} x{} link carries one way ({:.1f} GB/s)", x.interface.gen,
                                   x.interface.lanes, link / 1e9));
    else if (x.bandwidth_Bps > 0 && rate > x.bandwidth_Bps * 1.0001)
      v.reader().error(v.location_of(key), v.key_path(key), "is above the device's bandwidth in all");
  }
}

std::vector<DeviceCount> read_counts(MapView& v, const char* key, const char* item_key) {
  std::vector<DeviceCount> out;
  std::size_t i = 0;
  for (const auto& node : v.seq(key)) {
    MapView d(v.reader(), node, fmt::format("{}[{}]", v.key_path(key), i++));
    if (!d.valid()) continue;
    DeviceCount c;
    d.require(item_key);
    d.get(item_key, c.name);
    d.get_required("count", c.count, 1, 1024);
    d.finish();
    out.push_back(c);
  }
  return out;
}

NodeSpec read_node(MapView& v) {
  NodeSpec n;
  read_common(v, n.name, n.display_name, n.sources, n.notes);
  v.get_required("gpu", n.gpu);
  v.get_required("gpus", n.gpus, 1, 1024);
  v.get_required("host", n.host);
  v.get_quantity("dram", ftplan::Quantity::bytes, n.dram_bytes, 1);
  plan::for_each_device_kind([&](const auto& kind) { n.*kind.in_node = read_counts(v, kind.key, kind.item); });
  v.get_enum("gpu_interconnect", n.gpu_interconnect);
  std::size_t i = 0;
  for (const auto& node : v.seq("pcie_switches")) {
    MapView s(v.reader(), node, fmt::format("{}[{}]", v.key_path("pcie_switches"), i++));
    if (!s.valid()) continue;
    PcieSwitch sw;
    s.get("count", sw.count, 1, 256);
    s.require("uplink");
    read_pcie(s, "uplink", sw.uplink);
    s.get("gpus", sw.gpus, 0, 64);
    s.get("drives", sw.drives, 0, 64);
    s.get("nics", sw.nics, 0, 64);
    s.finish();
    n.pcie_switches.push_back(sw);
  }
  v.require("base_power", "power drawn by fans, board and management whenever the node is on");
  v.get_quantity("base_power", ftplan::Quantity::power, n.base_power_w, 0);
  v.get_quantity("max_power", ftplan::Quantity::power, n.max_power_w, 0);
  v.get_strings("default_for", n.default_for);
  v.get("cloud_instance", n.cloud_instance);
  read_price(v, n.price);
  return n;
}

// Gives the parsed file `path` (from disk or from memory).
using LoadYaml = std::function<YAML::Node(const std::filesystem::path& path)>;

// Reads one catalog file: a mapping with schema_version and a list `list_key` of entries.
template <class T>
void read_file(const std::filesystem::path& path, const LoadYaml& load, const char* list_key,
               const std::function<T(MapView&)>& read_one, std::vector<T>& out, Diagnostics& all,
               std::vector<SourceLocation>* where = nullptr) {
  try {
    const YAML::Node root = load(path);
    Reader reader(path.string());
    MapView v = reader.root(root);
    int version = 0;
    v.require("schema_version");
    if (v.get("schema_version", version) && version != 1)
      reader.error(v.location_of("schema_version"), "schema_version",
                   fmt::format("{} is not a catalog version this ftplan reads (it reads 1)", version));
    v.require(list_key);
    std::size_t i = 0;
    std::set<std::string> names;
    for (const auto& node : v.seq(list_key)) {
      MapView item(reader, node, fmt::format("{}[{}]", list_key, i++));
      if (!item.valid()) continue;
      T t = read_one(item);
      item.finish();
      if (!t.name.empty() && !names.insert(t.name).second)
        reader.error(item.location_of("name"), item.key_path("name"), fmt::format("'{}' is defined twice", t.name));
      if (where) where->push_back(item.location());  // (the nodes', for their cross-references)
      out.push_back(std::move(t));
    }
    v.finish();
    all.append(reader.diagnostics().items());
  } catch (const InputError& e) {
    all.append(e.diagnostics());
  }
}

}  // namespace

Catalog detail::read_catalog(const std::filesystem::path& zoo_dir, const LoadYaml& load) {
  Catalog c;
  Diagnostics all;
  const auto dir = zoo_dir / "hardware";
  read_file<GpuSpec>(dir / "gpus.yaml", load, "gpus", read_gpu, c.gpus, all);
  read_file<HostSpec>(dir / "hosts.yaml", load, "hosts", read_host, c.hosts, all);
  plan::for_each_device_kind([&](const auto& kind) {
    using Spec = typename std::decay_t<decltype(kind)>::spec_type;
    const std::function<Spec(MapView&)> read_one = [](MapView& v) {
      Spec spec;
      read_device(v, spec);
      return spec;
    };
    read_file<Spec>(dir / (std::string(kind.key) + ".yaml"), load, kind.key, read_one, c.*kind.in_catalog, all);
  });
  std::vector<SourceLocation> node_at;
  read_file<NodeSpec>(dir / "nodes.yaml", load, "nodes", read_node, c.nodes, all, &node_at);

  // Cross-references, once every file is read.
  std::map<std::string, std::string> default_owner;
  for (std::size_t i = 0; i < c.nodes.size(); ++i) {
    const NodeSpec& n = c.nodes[i];
    const SourceLocation& at = node_at[i];
    const std::string key = fmt::format("nodes[{}]", i);
    if (!n.gpu.empty() && !c.gpu(n.gpu))
      all.error(at, key + ".gpu", fmt::format("no GPU '{}' in gpus.yaml{}", n.gpu, did_you_mean(n.gpu, c.gpu_names())));
    if (!n.host.empty() && !c.host(n.host))
      all.error(at, key + ".host",
                fmt::format("no host '{}' in hosts.yaml{}", n.host, did_you_mean(n.host, c.host_names())));
    plan::for_each_device_kind([&](const auto& kind) {
      const auto& known = c.*kind.in_catalog;
      for (const auto& d : n.*kind.in_node)
        if (!hardware::find_named(known, d.name))
          all.error(at, fmt::format("{}.{}", key, kind.key),
                    fmt::format("no {} '{}' in {}.yaml{}", kind.what, d.name, kind.key,
                                did_you_mean(d.name, hardware::names_of(known))));
    });
    for (const auto& g : n.default_for) {
      if (!c.gpu(g)) all.error(at, key + ".default_for", fmt::format("no GPU '{}' in gpus.yaml", g));
      auto [it, fresh] = default_owner.emplace(g, n.name);
      if (!fresh) all.error(at, key + ".default_for", fmt::format("'{}' already has default node '{}'", g, it->second));
    }
    if (n.cloud_instance && !n.price.cloud_usd_per_hour)
      all.error(at, key + ".cloud_instance", "a named cloud instance needs its own price.cloud_hourly");
    int switched_gpus = 0;
    for (const auto& s : n.pcie_switches) switched_gpus += s.count * s.gpus;
    if (!n.pcie_switches.empty() && switched_gpus != n.gpus)
      all.error(at, key + ".pcie_switches",
                fmt::format("place {} GPUs behind switches, but the node has {}", switched_gpus, n.gpus));
  }
  all.throw_if_any();
  return c;
}

Catalog load_catalog(const std::filesystem::path& zoo_dir) {
  return detail::read_catalog(zoo_dir, [](const std::filesystem::path& path) { return detail::load_yaml_file(path); });
}

Catalog parse_catalog(const std::map<std::string, std::string_view>& texts, const std::filesystem::path& zoo_dir) {
  return detail::read_catalog(zoo_dir, [&](const std::filesystem::path& path) {
    const auto it = texts.find(path.stem().string());
    if (it == texts.end()) throw InputError({path.string(), 0, 0}, "", "no such file");
    return detail::load_yaml_text(it->second, path.string());
  });
}

}  // namespace ftplan::io
