// `ftplan hardware list [gpus|nodes|hosts|drives|nics]`.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "common/units.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

using nlohmann::ordered_json;
using A = Table::Align;

std::string money(const std::optional<double>& usd) { return usd ? fmt::format("${:.0f}", *usd) : ""; }
std::string hourly(const std::optional<double>& usd) { return usd ? fmt::format("${:.2f}/h", *usd) : ""; }
std::string tflops(const hardware::GpuSpec& g, hardware::Dtype d) {
  auto it = g.peak_flops.find(d);
  return it == g.peak_flops.end() ? "" : fmt::format("{:.1f}", it->second / 1e12);
}

void print(const App& app, const Table& t) { fmt::print("{}", app.format() == Format::csv ? t.csv() : t.text()); }

}  // namespace

int cmd_hardware(const std::vector<std::string>& argv) {
  const Args args(argv, 2, common_options());
  App app(args);
  const auto& pos = args.positionals();
  if (pos.empty() || pos[0] != "list" || pos.size() > 2)
    throw UsageError("usage: ftplan hardware list [gpus|nodes|hosts|drives|nics]");
  const std::string kind = pos.size() == 2 ? pos[1] : "gpus";
  const auto& c = app.catalog();
  if (app.format() == Format::json) {
    ordered_json doc;
    doc["schema_version"] = kOutputSchemaVersion;
    auto& items = doc[kind] = ordered_json::array();
    if (kind == "gpus")
      for (const auto& g : c.gpus) {
        ordered_json peak;
        for (const auto& [d, v] : g.peak_flops) peak[hardware::to_string(d)] = v;
        items.push_back({{"name", g.name},
                         {"memory_bytes", g.memory_bytes},
                         {"usable_memory_bytes", g.usable_memory_bytes},
                         {"memory_bandwidth_Bps", g.memory_bandwidth_Bps},
                         {"peak_flops", peak},
                         {"tdp_w", g.tdp_w},
                         {"idle_power_w", g.idle_power_w},
                         {"nvlink_bandwidth_Bps", g.nvlink_bandwidth_Bps},
                         {"host_link_Bps", g.host_link.bandwidth_Bps()}});
      }
    else if (kind == "nodes")
      for (const auto& n : c.nodes)
        items.push_back(
            {{"name", n.name}, {"gpu", n.gpu}, {"gpus", n.gpus}, {"host", n.host}, {"base_power_w", n.base_power_w}});
    else if (kind == "drives")
      for (const auto& d : c.drives)
        items.push_back({{"name", d.name},
                         {"capacity_bytes", d.capacity_bytes},
                         {"seq_read_Bps", d.seq_read_Bps},
                         {"seq_write_Bps", d.seq_write_Bps},
                         {"endurance_bytes", d.endurance_bytes}});
    else if (kind == "hosts")
      for (const auto& h : c.hosts)
        items.push_back({{"name", h.name},
                         {"cores", h.cores()},
                         {"dram_bytes", h.dram_bytes},
                         {"dram_bandwidth_Bps", h.dram_bandwidth_Bps()}});
    else if (kind == "nics")
      for (const auto& n : c.nics)
        items.push_back(
            {{"name", n.name}, {"fabric", n.fabric}, {"bandwidth_Bps", n.bandwidth_Bps}, {"latency_s", n.latency_s}});
    else
      throw UsageError("hardware list takes gpus, nodes, hosts, drives or nics; got '" + kind + "'");
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  Table t;
  if (kind == "gpus") {
    t.columns({{"name", A::left},
               {"memory", A::right},
               {"bandwidth", A::right},
               {"bf16 TFLOPS", A::right},
               {"fp8 TFLOPS", A::right},
               {"TDP", A::right},
               {"NVLink", A::right},
               {"buy", A::right},
               {"rent", A::right}});
    for (const auto& g : c.gpus)
      t.row({g.name, ftplan::format_bytes(g.usable_memory_bytes), ftplan::format_bandwidth(g.memory_bandwidth_Bps),
             tflops(g, hardware::Dtype::bf16), tflops(g, hardware::Dtype::fp8), fmt::format("{:.0f} W", g.tdp_w),
             g.nvlink_bandwidth_Bps > 0 ? ftplan::format_bandwidth(g.nvlink_bandwidth_Bps) : "",
             money(g.price.purchase_usd), hourly(g.price.cloud_usd_per_hour)});
  } else if (kind == "nodes") {
    t.columns({{"name", A::left},
               {"gpus", A::left},
               {"host", A::left},
               {"drives", A::left},
               {"interconnect", A::left},
               {"buy", A::right},
               {"rent", A::right},
               {"typical for", A::left}});
    for (const auto& n : c.nodes) {
      std::string drives;
      for (const auto& d : n.drives) drives += fmt::format("{}{}x {}", drives.empty() ? "" : ", ", d.count, d.name);
      std::string defaults;
      for (const auto& d : n.default_for) defaults += (defaults.empty() ? "" : ", ") + d;
      t.row({n.name, fmt::format("{}x {}", n.gpus, n.gpu), n.host, drives, name_of(n.gpu_interconnect),
             money(n.price.purchase_usd), hourly(n.price.cloud_usd_per_hour), defaults});
    }
  } else if (kind == "hosts") {
    t.columns(
        {{"name", A::left}, {"cores", A::right}, {"DRAM", A::right}, {"DRAM bandwidth", A::right}, {"TDP", A::right}});
    for (const auto& h : c.hosts)
      t.row({h.name, std::to_string(h.cores()), ftplan::format_bytes(h.dram_bytes),
             ftplan::format_bandwidth(h.dram_bandwidth_Bps()), fmt::format("{:.0f} W", h.cpu_tdp_w * h.sockets)});
  } else if (kind == "drives") {
    t.columns({{"name", A::left},
               {"class", A::left},
               {"capacity", A::right},
               {"read", A::right},
               {"write", A::right},
               {"sustained write", A::right},
               {"endurance", A::right},
               {"price", A::right}});
    for (const auto& d : c.drives)
      t.row({d.name, d.drive_class, fmt::format("{:.2f} TB", d.capacity_bytes / 1e12),
             ftplan::format_bandwidth(d.seq_read_Bps), ftplan::format_bandwidth(d.seq_write_Bps),
             ftplan::format_bandwidth(d.sustained_write_Bps), fmt::format("{:.0f} TBW", d.endurance_bytes / 1e12),
             money(d.price.purchase_usd)});
  } else if (kind == "nics") {
    t.columns(
        {{"name", A::left}, {"fabric", A::left}, {"bandwidth", A::right}, {"latency", A::right}, {"power", A::right}});
    for (const auto& n : c.nics)
      t.row({n.name, n.fabric, fmt::format("{:.0f} Gb/s", n.bandwidth_Bps * 8 / 1e9),
             ftplan::format_duration(n.latency_s), fmt::format("{:.0f} W", n.power_w)});
  } else {
    throw UsageError("hardware list takes gpus, nodes, hosts, drives or nics; got '" + kind + "'");
  }
  print(app, t);
  return 0;
}

}  // namespace ftplan::cli
