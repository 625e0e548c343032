#include "io/scenario_edit.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/error.hpp"
#include "io/offload_keys.hpp"
#include "io/yaml_edit.hpp"
#include "plan/checks.hpp"

namespace ftplan::io {

namespace {

// Bytes as the reader's unit parser reads them back exactly: whole GiB where they are, else bytes.
std::string bytes_text(double bytes) {
  const double gib = bytes / (1024.0 * 1024 * 1024);
  if (std::abs(gib - std::round(gib)) < 1e-9) return fmt::format("{} GiB", static_cast<long long>(std::round(gib)));
  return fmt::format("{:.0f}", bytes);
}

// A device list as the scenario writes it: [{drive: NAME, count: N}, ...] (`item` names the key).
template <class Spec>
std::string devices_text(const std::vector<std::pair<Spec, int>>& devices, const char* item) {
  std::string out = "[";
  for (std::size_t i = 0; i < devices.size(); ++i)
    out += fmt::format("{}{{{}: {}, count: {}}}", i ? ", " : "", item, yaml_scalar(devices[i].first.name),
                       devices[i].second);
  return out + "]";
}

// Whether two plans' lists name the same devices in the same counts, or a resolved list is what a
// catalog node lists (DeviceCount).
template <class A, class B>
bool same_devices(const std::vector<A>& a, const std::vector<B>& b) {
  const auto name = [](const auto& d) {
    if constexpr (requires { d.first.name; })
      return d.first.name;
    else
      return d.name;
  };
  const auto count = [](const auto& d) {
    if constexpr (requires { d.second; })
      return d.second;
    else
      return d.count;
  };
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (name(a[i]) != name(b[i]) || count(a[i]) != count(b[i])) return false;
  return true;
}

// The offload block that reads as `o`: its preset, and each placement the preset does not make.
// A plan's offload block as the scenario reader takes it (scenario_io.cpp, read_offload): the
// preset, each placement the preset would not make, and each other setting off its default (a
// plan added from the GUI keeps its sub-group size, pipelining, prefetch depth and buffers).
std::string offload_text(const plan::Offload& o) {
  plan::Offload preset;
  preset.preset = o.preset;
  plan::apply_preset(preset);
  std::string out = fmt::format("{{preset: {}", plan::to_string(o.preset));
  for (const auto& k : detail::kOffloadPlacements)
    if (o.*k.member != preset.*k.member) out += fmt::format(", {}: {}", k.key, plan::to_string(o.*k.member));
  const plan::Offload defaults;
  detail::for_each_offload_setting([&](const auto& k) {  // (fmt: a byte count's shortest exact digits)
    if (o.*k.member != defaults.*k.member) out += fmt::format(", {}: {}{}", k.key, o.*k.member, k.bytes ? " B" : "");
  });
  return out + "}";
}

}  // namespace

std::vector<PlanKey> preset_changes(const plan::Plan& p, plan::OffloadPreset preset,
                                    std::vector<std::string>& dropped) {
  plan::Plan to = p;
  plan::Offload& o = to.offload;
  const plan::Offload defaults;
  o.preset = preset;
  for (const auto& k : detail::kOffloadPlacements) o.*k.member = defaults.*k.member;
  plan::apply_preset(o);
  // Each setting check_offload refuses under the new preset, back to its default (the key left out).
  for (const plan::Finding& f : plan::check_offload(to))
    detail::for_each_offload_setting([&](const auto& k) {
      if (f.key != fmt::format("offload.{}", k.key)) return;
      o.*k.member = defaults.*k.member;
      dropped.push_back(f.key + ": " + f.message);
    });
  return plan_changes(p, to);
}

std::vector<PlanKey> plan_changes(const plan::Plan& from, const plan::Plan& to) {
  std::vector<PlanKey> out;
  const auto add = [&](const char* key, std::string value) { out.push_back({key, std::move(value)}); };
  const plan::Cluster &a = from.cluster, &b = to.cluster;
  if (a.gpu.name != b.gpu.name)
    add("cluster.gpu", b.gpu.name);
  else if (a.node.name != b.node.name)
    add("cluster.node", b.node.name);
  if (a.gpus() != b.gpus() || a.gpus_per_node != b.gpus_per_node) add("cluster.gpus", std::to_string(b.gpus()));
  if (a.host.dram_bytes != b.host.dram_bytes) add("cluster.dram", bytes_text(b.host.dram_bytes));
  plan::for_each_device_kind([&](const auto& kind) {
    if (!same_devices(a.*kind.in_cluster, b.*kind.in_cluster))
      out.push_back({fmt::format("cluster.{}", kind.key), devices_text(b.*kind.in_cluster, kind.item)});
  });
  const plan::Parallel &p = from.parallel, &q = to.parallel;
  if (p.tp != q.tp) add("parallel.tp", std::to_string(q.tp));
  if (p.pp != q.pp) add("parallel.pp", std::to_string(q.pp));
  if (p.cp != q.cp) add("parallel.cp", std::to_string(q.cp));
  if (p.zero != q.zero) add("parallel.zero", std::to_string(q.zero));
  if (p.fsdp != q.fsdp) add("parallel.fsdp", plan::to_string(q.fsdp));
  if (from.offload != to.offload) add("offload", offload_text(to.offload));
  const plan::Job &j = from.job, &k = to.job;
  if (j.seq_len != k.seq_len) add("job.seq_len", std::to_string(k.seq_len));
  if (j.micro_batch != k.micro_batch || j.micro_batch_auto != k.micro_batch_auto)
    add("job.micro_batch", k.micro_batch_auto ? "auto" : std::to_string(k.micro_batch));
  if (j.checkpointing != k.checkpointing || j.checkpointing_auto != k.checkpointing_auto)
    add("job.activation_checkpointing", k.checkpointing_auto ? "auto" : plan::to_string(k.checkpointing));
  if (j.checkpoint_every != k.checkpoint_every) add("job.checkpoint_every", std::to_string(k.checkpoint_every));
  if (j.framework != k.framework) add("job.framework", plan::to_string(k.framework));
  if (j.precision != k.precision) add("job.precision", plan::to_string(k.precision));
  if (j.optimizer.kind != k.optimizer.kind) add("job.optimizer", plan::to_string(k.optimizer.kind));
  return out;
}

std::string set_plan_keys(std::string_view text, std::size_t index, const plan::Plan& plan,
                          const std::vector<PlanKey>& keys, std::string_view name) {
  const std::string at = fmt::format("plans.{}.", index);
  std::string out(text);
  const auto has = [&](const std::string& key) { return yaml_value(out, at + key, name).has_value(); };
  const auto set = [&](const std::string& key, const std::string& value) {
    out = yaml_set(out, at + key, value, name);
  };
  const auto erase = [&](const std::string& key) { out = yaml_erase(out, at + key, name); };
  // The GPUs per node the cluster will have (plan's node, unless the keys change it).
  int node_gpus = plan.cluster.node.gpus > 0 ? plan.cluster.node.gpus : plan.cluster.gpus_per_node;
  for (const PlanKey& k : keys) {
    if (k.value.empty()) {
      erase(k.key);
    } else if (k.key == "cluster.gpu") {
      // The gpu form: the catalog's typical node for that GPU (docs/scenario-format.md, cluster).
      if (has("cluster.parts")) {
        set("cluster.parts.gpu", k.value);
        continue;
      }
      const int gpus = plan.cluster.gpus();
      for (const char* other : {"cluster.node", "cluster.nodes", "cluster.gpus_per_node"}) erase(other);
      set("cluster.gpu", k.value);
      if (!has("cluster.gpus")) set("cluster.gpus", std::to_string(gpus));
    } else if (k.key == "cluster.node") {
      for (const char* other : {"cluster.gpu", "cluster.gpus", "cluster.gpus_per_node", "cluster.parts"}) erase(other);
      set("cluster.node", k.value);
      if (!has("cluster.nodes")) set("cluster.nodes", "1");
      node_gpus = 0;  // the new node's own count: gpus_per_node defaults to it
    } else if (k.key == "cluster.gpus") {
      const int gpus = std::stoi(k.value);
      if (has("cluster.parts")) {
        set("cluster.parts.gpus", k.value);
      } else if (has("cluster.node")) {
        // {node, nodes, gpus_per_node}: whole nodes where the GPUs fill them, else one node's share.
        if (node_gpus > 0 && gpus > node_gpus) {
          if (gpus % node_gpus != 0)
            throw InputError(SourceLocation{std::string(name), 0, 0}, at + "cluster.gpus",
                             fmt::format("{} GPUs is not a whole number of {}-GPU nodes", gpus, node_gpus));
          set("cluster.nodes", std::to_string(gpus / node_gpus));
          if (has("cluster.gpus_per_node")) erase("cluster.gpus_per_node");
        } else {
          set("cluster.nodes", "1");
          set("cluster.gpus_per_node", k.value);
        }
      } else {
        set("cluster.gpus", k.value);
        if (has("cluster.gpus_per_node") && node_gpus > 0)
          set("cluster.gpus_per_node", std::to_string(std::min(gpus, node_gpus)));
      }
    } else if (k.key == "job.optimizer" && has("job.optimizer") &&
               yaml_value(out, at + "job.optimizer", name)->empty()) {
      set("job.optimizer.name", k.value);  // the block form {name, implementation, ...}
    } else {
      set(k.key, k.value);
    }
  }
  return out;
}

std::string add_plan(std::string_view text, const plan::Job& job, const plan::Plan& to, const std::string& name_of_new,
                     const hardware::Catalog* catalog, std::string_view name) {
  const plan::Cluster& c = to.cluster;
  std::string cluster = fmt::format("{{gpu: {}, gpus: {}", yaml_scalar(c.gpu.name), c.gpus());
  if (c.nodes > 1 || c.gpus_per_node != std::min(c.gpus(), c.node.gpus))
    cluster += fmt::format(", gpus_per_node: {}", c.gpus_per_node);
  // What the gpu form's node (the catalog's typical one for the GPU) has already goes unwritten.
  const hardware::NodeSpec* typical = catalog ? catalog->default_node_for(c.gpu.name) : nullptr;
  const hardware::HostSpec* host = typical ? catalog->host(typical->host) : nullptr;
  const double typical_dram = typical && typical->dram_bytes > 0 ? typical->dram_bytes : host ? host->dram_bytes : -1;
  if (c.host.dram_bytes != typical_dram) cluster += fmt::format(", dram: {}", bytes_text(c.host.dram_bytes));
  plan::for_each_device_kind([&](const auto& kind) {
    const auto& have = c.*kind.in_cluster;
    if (typical ? !same_devices((*typical).*kind.in_node, have) : !have.empty())
      cluster += fmt::format(", {}: {}", kind.key, devices_text(have, kind.item));
  });
  if (c.exclusive) cluster += ", exclusive: true";
  cluster += "}";
  std::vector<std::pair<std::string, std::string>> item = {{"name", yaml_scalar(name_of_new)}, {"cluster", cluster}};
  // Everything else against a plan of the scenario's job with default settings.
  plan::Plan base = to;
  base.parallel = plan::Parallel{};
  base.offload = plan::Offload{};
  base.job = job;
  std::string out = yaml_append_item(text, "plans", item, name);
  const std::size_t index = [&] {
    std::size_t i = 0;
    while (yaml_value(out, fmt::format("plans.{}", i + 1), name)) ++i;
    return i;
  }();
  std::vector<PlanKey> keys;
  for (PlanKey& k : plan_changes(base, to))
    if (k.key.rfind("cluster.", 0) != 0) keys.push_back(std::move(k));
  return set_plan_keys(out, index, to, keys, name);
}

}  // namespace ftplan::io
