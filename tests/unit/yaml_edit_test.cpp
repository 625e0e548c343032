// io::yaml_set / yaml_erase / yaml_append_item: edits of YAML text that keep comments and layout
// (the GUI's per-plan controls write through them).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "io/scenario_edit.hpp"
#include "io/scenario_io.hpp"
#include "io/yaml_edit.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

std::vector<std::string> lines_of(const std::string& t) {
  std::vector<std::string> out;
  std::stringstream s(t);
  for (std::string l; std::getline(s, l);) out.push_back(l);
  return out;
}

// The lines of `after` that differ from `before` (same line count expected), as "index: text".
std::vector<std::string> changed(const std::string& before, const std::string& after) {
  const auto a = lines_of(before), b = lines_of(after);
  std::vector<std::string> out;
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) out.push_back(std::to_string(i) + ": " + b[i]);
  return out;
}

const std::string kText =
    "# a comment at the top\n"
    "schema_version: 1\n"
    "name: demo   # trailing comment\n"
    "model: llama-3.1-8b\n"
    "job:\n"
    "  method: lora\n"
    "  lora: {rank: 8, alpha: 16, targets: all-linear}\n"
    "  seq_len: 2048   # the sequence\n"
    "  micro_batch: 2\n"
    "  global_batch: 16\n"
    "  tokens: 20M\n"
    "plans:\n"
    "  # the first plan\n"
    "  - name: one\n"
    "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n"
    "    parallel: {zero: 2}\n"
    "  - name: two\n"
    "    cluster:\n"
    "      gpu: rtx-4090   # consumer card\n"
    "      gpus: 1\n"
    "    job:\n"
    "      method: qlora\n"
    "\n"
    "# the end\n";

}  // namespace

TEST_CASE("yaml_set replaces a block scalar on its line and keeps its comment; every other line is as it was") {
  const std::string out = io::yaml_set(kText, "job.seq_len", "4096");
  CHECK(changed(kText, out) == std::vector<std::string>{"7:   seq_len: 4096   # the sequence"});
  CHECK(io::yaml_value(out, "job.seq_len") == "4096");
  // Through a sequence item into a block mapping.
  const std::string gpu = io::yaml_set(kText, "plans.1.cluster.gpu", "l40s");
  CHECK(changed(kText, gpu) == std::vector<std::string>{"18:       gpu: l40s   # consumer card"});
  // The first key of an item (after its "- ").
  CHECK(changed(kText, io::yaml_set(kText, "plans.1.name", "\"two: b\"")) ==
        std::vector<std::string>{"16:   - name: \"two: b\""});
  CHECK(io::yaml_value(io::yaml_set(kText, "plans.1.name", "\"two: b\""), "plans.1.name") == "two: b");
}

TEST_CASE("yaml_set edits inside a one-line flow mapping and adds a key to it") {
  CHECK(changed(kText, io::yaml_set(kText, "plans.0.cluster.gpus", "8")) ==
        std::vector<std::string>{"14:     cluster: {gpu: h100-sxm-80gb, gpus: 8}"});
  CHECK(changed(kText, io::yaml_set(kText, "plans.0.cluster.gpu", "a100-sxm4-80gb")) ==
        std::vector<std::string>{"14:     cluster: {gpu: a100-sxm4-80gb, gpus: 1}"});
  CHECK(changed(kText, io::yaml_set(kText, "plans.0.parallel.tp", "2")) ==
        std::vector<std::string>{"15:     parallel: {zero: 2, tp: 2}"});
  CHECK(changed(kText, io::yaml_set(kText, "job.lora.rank", "16")) ==
        std::vector<std::string>{"6:   lora: {rank: 16, alpha: 16, targets: all-linear}"});
  CHECK(io::yaml_value(kText, "job.lora.targets") == "all-linear");
  CHECK(io::yaml_value(kText, "plans.0.cluster") == "{gpu: h100-sxm-80gb, gpus: 1}");
}

TEST_CASE("yaml_set adds a missing key under its parent at the parent's indentation") {
  // A key of a block mapping: after the block's last line.
  const std::string out = io::yaml_set(kText, "plans.1.cluster.dram", "256 GiB");
  const auto lines = lines_of(out);
  REQUIRE(lines.size() == lines_of(kText).size() + 1);
  CHECK(lines[20] == "      dram: 256 GiB");
  CHECK(lines[19] == "      gpus: 1");
  CHECK(lines[21] == "    job:");
  // A missing mapping on the way: written as a nested flow mapping.
  const std::string off = io::yaml_set(kText, "plans.0.offload.preset", "zero-offload");
  CHECK(lines_of(off)[16] == "    offload: {preset: zero-offload}");
  CHECK(lines_of(off)[17] == "  - name: two");
  CHECK(io::yaml_value(off, "plans.0.offload.preset") == "zero-offload");
  // Under a plan's job block.
  const std::string mb = io::yaml_set(kText, "plans.1.job.micro_batch", "1");
  CHECK(lines_of(mb)[22] == "      micro_batch: 1");
  CHECK(lines_of(mb)[23] == "");
  CHECK(lines_of(mb)[24] == "# the end");
}

TEST_CASE("yaml_set replaces a block value with a one-line one, and yaml_erase removes keys") {
  const std::string out = io::yaml_set(kText, "plans.1.cluster", "{node: dgx-h100, nodes: 1}");
  auto lines = lines_of(out);
  CHECK(lines[17] == "    cluster: {node: dgx-h100, nodes: 1}");
  CHECK(lines[18] == "    job:");
  // Erase from a flow mapping (first, middle, only entry) and a block.
  CHECK(lines_of(io::yaml_erase(kText, "plans.0.cluster.gpu"))[14] == "    cluster: {gpus: 1}");
  CHECK(lines_of(io::yaml_erase(kText, "plans.0.cluster.gpus"))[14] == "    cluster: {gpu: h100-sxm-80gb}");
  CHECK(lines_of(io::yaml_erase(kText, "job.lora.alpha"))[6] == "  lora: {rank: 8, targets: all-linear}");
  CHECK(lines_of(io::yaml_erase(kText, "plans.0.parallel.zero"))[15] == "    parallel: {}");
  const std::string no_job = io::yaml_erase(kText, "plans.1.job");
  CHECK(lines_of(no_job).size() == lines_of(kText).size() - 2);
  CHECK(!io::yaml_value(no_job, "plans.1.job"));
  CHECK(io::yaml_erase(kText, "plans.1.nothing") == kText);
}

TEST_CASE("yaml_append_item adds an item at the end of a block sequence, or the sequence itself") {
  const std::string out =
      io::yaml_append_item(kText, "plans", {{"name", "three"}, {"cluster", "{gpu: l40s, gpus: 2}"}});
  const auto lines = lines_of(out);
  CHECK(lines[22] == "  - name: three");
  CHECK(lines[23] == "    cluster: {gpu: l40s, gpus: 2}");
  CHECK(io::yaml_value(out, "plans.2.cluster.gpus") == "2");
  const std::string fresh = io::yaml_append_item("name: x\n", "plans", {{"name", "a"}});
  CHECK(fresh == "name: x\nplans:\n  - name: a\n");
}

TEST_CASE("yaml edits refuse what they cannot edit in place, saying why and where") {
  const std::string anchored = "base: &b {gpu: l40s}\nplans:\n  - cluster: *b\n";
  const std::string alias_error = test::input_error_of([&] { io::yaml_set(anchored, "plans.0.cluster.gpus", "2"); });
  CHECK(alias_error.find("s.yaml") == std::string::npos);
  CHECK(alias_error.find("<text>:3:") != std::string::npos);
  CHECK(alias_error.find("plans.0.cluster.gpus") != std::string::npos);
  CHECK(alias_error.find("alias") != std::string::npos);
  const std::string multi = "plans:\n  - cluster: {gpu: l40s,\n      gpus: 2}\n";
  CHECK(test::input_error_of([&] { io::yaml_set(multi, "plans.0.cluster.gpus", "4", "m.yaml"); }).find("m.yaml:2:") !=
        std::string::npos);
  CHECK(test::input_error_of([&] { io::yaml_set(kText, "plans.5.name", "x"); }).find("no item 5") != std::string::npos);
  CHECK(test::input_error_of([&] { io::yaml_set(kText, "name.x", "y"); }).find("is a scalar") != std::string::npos);
  CHECK(test::input_error_of([&] { io::yaml_set(kText, "name", "a\nb"); }).find("one line") != std::string::npos);
  CHECK(test::input_error_of([&] { io::yaml_set(kText, "name", "{unclosed"); }).find("would not read") !=
        std::string::npos);
  CHECK(test::input_error_of([&] { io::yaml_erase(kText, "plans.0.name"); }).find("'- '") != std::string::npos);
}

TEST_CASE("yaml_scalar quotes only what would not read back as itself") {
  CHECK(io::yaml_scalar("h100-sxm-80gb") == "h100-sxm-80gb");
  CHECK(io::yaml_scalar("256 GiB") == "256 GiB");
  CHECK(io::yaml_scalar("1x H100 full + ZeRO-Offload") == "1x H100 full + ZeRO-Offload");
  CHECK(io::yaml_scalar("fastest: a") == "\"fastest: a\"");
  CHECK(io::yaml_scalar("null") == "\"null\"");
  CHECK(io::yaml_scalar("") == "\"\"");
  CHECK(io::yaml_scalar("say \"hi\"") == "say \"hi\"");
  CHECK(io::yaml_scalar("#x") == "\"#x\"");
}

TEST_CASE("an example scenario edited: the other lines as they were, and it reads back as the edited scenario") {
  // The writer's result goes through the scenario reader: the edited plan has what was written.
  const std::filesystem::path file = test::zoo_dir().parent_path() / "scenarios" / "llama8b-single-gpu.yaml";
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  const std::string edited =
      io::yaml_set(io::yaml_set(text, "plans.1.cluster.gpus", "2"), "plans.1.offload.preset", "activation-cpu");
  const auto before = io::parse_scenario(text, "s.yaml", file.parent_path(), test::zoo(), test::catalog());
  const auto after = io::parse_scenario(edited, "s.yaml", file.parent_path(), test::zoo(), test::catalog());
  REQUIRE(after.plans.size() == before.plans.size());
  CHECK(after.plans[1].cluster.gpus() == 2);
  CHECK(after.plans[1].offload.preset == plan::OffloadPreset::activation_cpu);
  CHECK(before.plans[1].cluster.gpus() == 1);
  CHECK(after.plans[0].cluster.gpus() == before.plans[0].cluster.gpus());
  // Every other line as it was, the comments included: one value changed, one line added.
  const std::string was = "  - name: 1x RTX 4090 LoRA\n    cluster: {gpu: rtx-4090, gpus: 1}\n";
  std::string want = text;
  REQUIRE(want.find(was) != std::string::npos);
  want.replace(
      want.find(was), was.size(),
      "  - name: 1x RTX 4090 LoRA\n    cluster: {gpu: rtx-4090, gpus: 2}\n    offload: {preset: activation-cpu}\n");
  CHECK(edited == want);
}

TEST_CASE("a plan's settings written into its text read back as that plan, in the cluster's own form") {
  /* scenarios/llama70b-full-h100-vs-workstation.yaml: plan A in the gpu form (flow), plan B in the
   * node form (block, with dram and drives). Each edit goes through io::set_plan_keys; the text
   * read back must have what was set, and the other plan as it was. */
  const std::filesystem::path file =
      test::zoo_dir().parent_path() / "scenarios" / "llama70b-full-h100-vs-workstation.yaml";
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  const auto read = [&](const std::string& t) {
    return io::parse_scenario(t, "s.yaml", file.parent_path(), test::zoo(), test::catalog());
  };
  const auto before = read(text);
  // Node form: 2 of the workstation's 4 GPUs is gpus_per_node 2 on one node.
  const auto b2 = read(io::set_plan_keys(text, 1, before.plans[1], {{"cluster.gpus", "2"}}));
  CHECK(b2.plans[1].cluster.gpus() == 2);
  CHECK(b2.plans[1].cluster.node.name == "workstation-4x-rtx-6000-ada");
  CHECK(b2.plans[1].cluster.host.dram_bytes == before.plans[1].cluster.host.dram_bytes);
  CHECK(b2.plans[0].cluster.gpus() == 32);
  // 8 GPUs of 4-GPU nodes: two nodes.
  const auto b8 = read(io::set_plan_keys(text, 1, before.plans[1], {{"cluster.gpus", "8"}}));
  CHECK(b8.plans[1].cluster.nodes == 2);
  CHECK(b8.plans[1].cluster.gpus() == 8);
  // 6 is not a whole number of 4-GPU nodes: refused, saying so.
  CHECK(test::input_error_of([&] {
          io::set_plan_keys(text, 1, before.plans[1], {{"cluster.gpus", "6"}});
        }).find("not a whole number of 4-GPU nodes") != std::string::npos);
  // A GPU chosen for the node form turns it into the gpu form, keeping its GPU count, DRAM, drives.
  const auto l40 = read(io::set_plan_keys(text, 1, before.plans[1], {{"cluster.gpu", "a100-sxm4-80gb"}}));
  CHECK(l40.plans[1].cluster.gpu.name == "a100-sxm4-80gb");
  CHECK(l40.plans[1].cluster.gpus() == 4);
  CHECK(l40.plans[1].cluster.host.dram_bytes == 512.0 * (1u << 30));
  // Gpu form: the count, a node chosen instead, an offload preset, a key removed ("").
  const auto a16 = read(io::set_plan_keys(text, 0, before.plans[0], {{"cluster.gpus", "16"}, {"parallel.fsdp", ""}}));
  CHECK(a16.plans[0].cluster.gpus() == 16);
  CHECK(!a16.plans[0].parallel.fsdp_given);
  const auto node = read(io::set_plan_keys(text, 0, before.plans[0], {{"cluster.node", "dgx-h100"}}));
  CHECK(node.plans[0].cluster.node.name == "dgx-h100");
  CHECK(node.plans[0].cluster.gpus() == 8);
  // plan_changes: from one plan to another as keys; applied, the text reads back as the other.
  plan::Plan want = before.plans[1];
  want.parallel.zero = 2;
  want.job.micro_batch = 1;
  want.job.micro_batch_auto = false;
  want.offload = plan::Offload{};  // as footprint::what_would_fit changes a preset
  want.offload.preset = plan::OffloadPreset::zero_offload;
  plan::apply_preset(want.offload);
  const auto changes = io::plan_changes(before.plans[1], want);
  CHECK(changes == std::vector<io::PlanKey>{
                       {"parallel.zero", "2"}, {"offload", "{preset: zero-offload}"}, {"job.micro_batch", "1"}});
  const auto changed = read(io::set_plan_keys(text, 1, before.plans[1], changes));
  CHECK(changed.plans[1].parallel.zero == 2);
  CHECK(changed.plans[1].job.micro_batch == 1);
  CHECK(changed.plans[1].offload.preset == plan::OffloadPreset::zero_offload);
  CHECK(changed.plans[1].offload.params == want.offload.params);
  // Every offload setting goes with a changed preset, not the placements alone: a plan added from
  // the GUI with DeepSpeed's sub-groups, swap pipelining, prefetch and buffers keeps them.
  want.parallel.zero = 3;
  want.offload.preset = plan::OffloadPreset::zero_infinity;
  plan::apply_preset(want.offload);
  want.offload.activations = plan::Tier::cpu;
  want.offload.pinned = false;
  want.offload.prefetch_depth = 2;
  want.offload.buffer_count = 6;
  want.offload.buffer_bytes = 3.5e8;
  want.offload.chunk_bytes = 1.6e9;
  want.offload.pipeline_read = true;
  want.offload.pipeline_write = true;
  const auto infinity = read(io::set_plan_keys(text, 1, before.plans[1], io::plan_changes(before.plans[1], want)));
  CHECK(infinity.plans[1].offload == want.offload);
  want.parallel.zero = 2;
  want.offload = plan::Offload{};
  want.offload.preset = plan::OffloadPreset::zero_offload;
  plan::apply_preset(want.offload);
  want.offload.delayed_update = true;
  CHECK(read(io::set_plan_keys(text, 1, before.plans[1], io::plan_changes(before.plans[1], want))).plans[1].offload ==
        want.offload);
  // preset_changes (the GUI's offload choice): from ZeRO-Infinity with its tuning to ZeRO-Offload,
  // the hand-written placement goes (the preset's replace it), the prefetch depth and pinning stay,
  // and the parameter and optimizer swaps' tuning is left out and said.
  const plan::Plan tuned = infinity.plans[1];
  std::vector<std::string> dropped;
  const auto to_offload = io::preset_changes(tuned, plan::OffloadPreset::zero_offload, dropped);
  CHECK(to_offload ==
        std::vector<io::PlanKey>{{"offload", "{preset: zero-offload, pinned: false, prefetch_depth: 2}"}});
  REQUIRE(dropped.size() == 5);
  CHECK(dropped[0].rfind("offload.buffer_count: counts the parameter swap buffers", 0) == 0);
  CHECK(dropped[1].rfind("offload.buffer_size: ", 0) == 0);
  CHECK(dropped[2].rfind("offload.chunk_size: ", 0) == 0);
  CHECK(dropped[3].rfind("offload.pipeline_read: ", 0) == 0);
  CHECK(dropped[4].rfind("offload.pipeline_write: ", 0) == 0);
  const auto switched = read(io::set_plan_keys(text, 1, tuned, to_offload));  // the reader takes it
  CHECK(switched.plans[1].offload.preset == plan::OffloadPreset::zero_offload);
  CHECK(switched.plans[1].offload.activations == plan::Tier::gpu);
  CHECK(switched.plans[1].offload.prefetch_depth == 2);
  // To aiDAPTIV+ (parameters and optimizer on flash too): every tuning key stays, none is said.
  dropped.clear();
  const auto to_aidaptiv = io::preset_changes(tuned, plan::OffloadPreset::aidaptiv, dropped);
  CHECK(dropped.empty());
  CHECK(read(io::set_plan_keys(text, 1, tuned, to_aidaptiv)).plans[1].offload.buffer_count == 6);
  // To none: nothing offloaded, so pinning has no buffers to lock either.
  dropped.clear();
  CHECK(io::preset_changes(tuned, plan::OffloadPreset::none, dropped) ==
        std::vector<io::PlanKey>{{"offload", "{preset: none, prefetch_depth: 2}"}});
  CHECK(dropped.size() == 6);
  // add_plan: plan A written anew reads back as plan A (the same GPUs, layout and job).
  const std::string added_text = io::add_plan(text, before.job, before.plans[0], "A again", &test::catalog());
  // The typical node's DRAM and drives are not repeated; without a catalog they are written.
  CHECK(added_text.find("  - name: A again\n    cluster: {gpu: h100-sxm-80gb, gpus: 32, gpus_per_node: 8}\n") !=
        std::string::npos);
  CHECK(io::add_plan(text, before.job, before.plans[0], "A again").find("dram: ") != std::string::npos);
  const auto added = read(added_text);
  REQUIRE(added.plans.size() == 3);
  const plan::Plan &a = before.plans[0], &b = added.plans[2];
  CHECK(b.name == "A again");
  CHECK(b.cluster.gpu.name == a.cluster.gpu.name);
  CHECK(b.cluster.gpus() == a.cluster.gpus());
  CHECK(b.cluster.gpus_per_node == a.cluster.gpus_per_node);
  CHECK(b.cluster.host.dram_bytes == a.cluster.host.dram_bytes);
  CHECK(b.parallel.zero == a.parallel.zero);
  CHECK(b.job.micro_batch == a.job.micro_batch);
  CHECK(b.job.checkpointing == a.job.checkpointing);
  CHECK(io::plan_changes(a, b).empty());
  // A plan whose NICs are not its node's: written with them, read back with them.
  plan::Plan other_nics = a;
  const hardware::NicSpec* hdr = hardware::find_named(test::catalog().nics, "connectx-6-hdr");
  REQUIRE(hdr);
  other_nics.cluster.nics = {{*hdr, 4}};
  const std::string nics_text = io::add_plan(text, before.job, other_nics, "A, HDR", &test::catalog());
  CHECK(nics_text.find("nics: [{nic: connectx-6-hdr, count: 4}]") != std::string::npos);
  const auto with_nics = read(nics_text);
  const plan::Plan& c = with_nics.plans.at(2);
  REQUIRE(c.cluster.nics.size() == 1);
  CHECK(c.cluster.nics[0].first.name == "connectx-6-hdr");
  CHECK(c.cluster.nics[0].second == 4);
  CHECK(io::plan_changes(other_nics, c).empty());
  CHECK(io::plan_changes(a, c).size() == 1);  // cluster.nics
}
