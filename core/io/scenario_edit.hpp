// A plan's settings as scenario keys, written into the scenario's text through io::yaml_set (so
// the text keeps its comments and layout): the GUI's per-plan controls, "what would fit" changes
// applied with one click, and a searched layout added as a plan all go through here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hardware/hardware.hpp"
#include "plan/plan.hpp"

namespace ftplan::io {

// One key of a plan, relative to the plan ("parallel.zero", "job.micro_batch", "cluster.gpus"),
// and its value as the scenario reader spells it (docs/scenario-format.md); "" removes the key.
struct PlanKey {
  std::string key;
  std::string value;
  bool operator==(const PlanKey&) const = default;
};

// The keys that make a plan written as `from` run as `to`: the settings a planner or the footprint
// search changes (cluster GPU, node, GPU count, DRAM and drives; tp, pp, cp, ZeRO, FSDP sharding;
// the offload placements; micro-batch, checkpointing, framework, precision, optimizer, sequence
// length). "cluster.gpus" is the plan's total GPU count; set_plan_keys writes it in the form the
// text's cluster uses.
std::vector<PlanKey> plan_changes(const plan::Plan& from, const plan::Plan& to);

// The keys that switch plan `p` to offload preset `preset` (the GUI's offload choice): the
// preset's placements replace any written by hand, and the rest of the block (prefetch depth,
// buffers, sub-groups, pipelining, pinning, delayed update) is kept where the new placements use
// it. What they have no use for, which the reader would refuse (a parameter buffer count without
// parameters on NVMe), is left out and said in `dropped`, one "offload.KEY: why" each: the block's
// other settings are no longer lost to a preset change.
std::vector<PlanKey> preset_changes(const plan::Plan& p, plan::OffloadPreset preset, std::vector<std::string>& dropped);

// The text with each key set under plan `index` of `plans` ("plans.INDEX.KEY"). The cluster's
// keys follow the form the text uses ({gpu, gpus}, {node, nodes, gpus_per_node} or {parts: ...});
// "cluster.gpu" on a node form, and "cluster.node" on a gpu form, switch the form (the other
// form's keys removed). `plan` is the plan as read (its node's GPU count sets gpus_per_node).
// Throws InputError as io::yaml_set does.
std::string set_plan_keys(std::string_view text, std::size_t index, const plan::Plan& plan,
                          const std::vector<PlanKey>& keys, std::string_view name = "<text>");

// The text with `to` added at the end of `plans` as a new plan named `name_of_new`: its cluster in
// the gpu form (its DRAM and drives where they differ from the catalog's typical node for the GPU,
// or always without a catalog), then every key where it differs from a plan of the scenario's `job`.
std::string add_plan(std::string_view text, const plan::Job& job, const plan::Plan& to, const std::string& name_of_new,
                     const hardware::Catalog* catalog = nullptr, std::string_view name = "<text>");

}  // namespace ftplan::io
