// Framework profiles as data (plan::framework_table), Unsloth's memory mechanisms and
// bitsandbytes' paged optimizers, with numbers worked from their sources.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include <fmt/format.h>

#include "footprint/footprint.hpp"
#include "inventory/inventory.hpp"
#include "io/scenario_io.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"
#include "schedule/step_ir.hpp"
#include "sim/simulate.hpp"
#include "test_support.hpp"

using namespace ftplan;
using inventory::Category;
using plan::Tier;

namespace {

plan::Scenario scenario(const std::string& model, const std::string& job, const std::string& plan) {
  const std::string text =
      fmt::format("schema_version: 1\nmodel: {}\njob:\n  steps: 1\n{}plans:\n  - name: p\n{}", model, job, plan);
  return io::parse_scenario(text, "framework_test.yaml", test::data_dir(), test::zoo(), test::catalog());
}

// Bytes of the inventory's group called `name` in `tier` (all instances).
double group_bytes(const inventory::Inventory& inv, const std::string& name, Tier tier) {
  double total = 0;
  for (const auto& g : inv.groups)
    if (name == g.name && g.tier == tier) total += g.total();
  return total;
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

TEST_CASE("the framework table: one row per framework, in the enum's order, each name read back") {
  /* Every row's key is its own index, names are unique, and the scenario reader takes each name
   * (its list comes from the table), so a new framework is a row, not a name in several files. */
  const auto& table = plan::framework_table();
  REQUIRE(table.size() == static_cast<std::size_t>(plan::Framework::unsloth) + 1);
  std::set<std::string> names;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const plan::FrameworkProfile& row = table[i];
    CAPTURE(row.name);
    CHECK(static_cast<std::size_t>(row.framework) == i);
    CHECK(names.insert(row.name).second);
    CHECK(std::string(row.display_name).size() > 0);
    CHECK(plan::framework_named(row.name) == row.framework);
    CHECK(std::string(plan::to_string(row.framework)) == row.name);
    const auto s = scenario("llama-3.2-1b", fmt::format("  framework: {}\n", row.name),
                            "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
    CHECK(s.plans[0].job.framework == row.framework);
  }
  CHECK_FALSE(plan::framework_named("pytorch").has_value());
}

TEST_CASE("a framework's default optimizer applies only when the scenario names none") {
  /* Unsloth's notebooks train with optim = "adamw_8bit"; the others default to AdamW. */
  CHECK(scenario("llama-3.2-1b", "  framework: unsloth\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n")
            .plans[0]
            .job.optimizer.kind == plan::OptimizerKind::adamw_8bit);
  CHECK(
      scenario("llama-3.2-1b", "  framework: unsloth\n  optimizer: adamw\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n")
          .plans[0]
          .job.optimizer.kind == plan::OptimizerKind::adamw);
  CHECK(scenario("llama-3.2-1b", "  framework: hf-trainer\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n")
            .plans[0]
            .job.optimizer.kind == plan::OptimizerKind::adamw);
}

TEST_CASE("Unsloth: Llama-3.1-8B QLoRA r16 on one RTX 4090 at seq 2048 keeps its checkpoints in host memory") {
  /* Unsloth's gradient checkpointing ("unsloth") copies each decoder layer's input hidden states
   * to pinned host buffers (non_blocking) and back for the recompute, through two GPU buffers
   * (unsloth_zoo/gradient_checkpointing.py). Llama-3.1-8B: h = 4096, 32 layers, vocabulary
   * 128256. Micro-batch 1 x 2048 tokens, bf16 input: 2 x 4096 x 2048 = 16 MiB per layer.
   *   host: 32 layers x 16 MiB = 512 MiB; GPU: two layers' buffers = 32 MiB.
   * Its fused loss keeps no logits: grad_inputs = empty_like(hidden_states) = 16 MiB, and one
   * chunk at a time (fp32 logits 4 x 128256 x 2048 = 1.05e9 B < 4 GiB: one chunk) holding
   * 16-bit logits + fp32 log-probs + their fp32 gradient: 10 x 128256 x 2048 = 2,626,682,880 B.
   * HF Trainer on the same job keeps the whole fp32 log-probs from forward to backward:
   * 4 x 128256 x 2048 = 1,050,673,152 B, and its checkpoints on the GPU. */
  const std::string job =
      "  method: qlora\n  lora: {rank: 16, targets: all-linear}\n  seq_len: 2048\n  micro_batch: 1\n  global_batch: 1\n"
      "  precision: bf16-mixed\n  activation_checkpointing: full\n";
  const auto s = scenario("llama-3.1-8b", job + "  framework: unsloth\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto inv = inventory::build_inventory(s.model, s.plans[0]);
  CHECK(group_bytes(inv, "saved activations (offloaded)", Tier::cpu) == doctest::Approx(512 * kMiB));
  CHECK(group_bytes(inv, "saved activations (resident)", Tier::gpu) == doctest::Approx(32 * kMiB));
  CHECK(group_bytes(inv, "saved activations", Tier::gpu) == 0);
  CHECK(group_bytes(inv, "hidden-state gradient (fused loss)", Tier::gpu) == doctest::Approx(16 * kMiB));
  CHECK(group_bytes(inv, "loss temporaries (logits, fp32 upcast, logit gradients)", Tier::gpu) ==
        doctest::Approx(2626682880.0));
  CHECK(s.plans[0].job.optimizer.kind == plan::OptimizerKind::adamw_8bit);

  const auto hf =
      scenario("llama-3.1-8b", job + "  framework: hf-trainer\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto hf_inv = inventory::build_inventory(hf.model, hf.plans[0]);
  CHECK(group_bytes(hf_inv, "logits and log-softmax", Tier::gpu) == doctest::Approx(1050673152.0));
  CHECK(group_bytes(hf_inv, "saved activations", Tier::gpu) >= 512 * kMiB);

  // The step IR moves each checkpoint to the host in forward and back in backward, and the
  // simulator places them in host memory: both engines agree with the inventory.
  const auto ir = schedule::build_step(s.model, s.plans[0], inv);
  double d2h = 0, h2d = 0;
  for (const auto& op : ir.ops)
    if (op.kind == schedule::OpKind::copy) (op.stream == schedule::Stream::d2h ? d2h : h2d) += op.bytes;
  CHECK(d2h == doctest::Approx(512 * kMiB));
  CHECK(h2d == doctest::Approx(512 * kMiB));
  const auto f = footprint::footprint(s.model, s.plans[0]);
  CHECK(f.fits);
  const auto r = sim::simulate_step(s.model, s.plans[0]);
  REQUIRE(r.ok);
  CHECK(r.peak(plan::Tier::cpu) >= 512 * kMiB);
}

TEST_CASE("paged 8-bit AdamW: which LoRA factors bitsandbytes pages (tensors of 1e5 elements or more)") {
  /* Llama-3.1-8B, LoRA r16 on all linears: per layer q 16 x (4096 + 4096), k and v 16 x (4096 +
   * 1024), o 16 x (4096 + 4096), gate and up 16 x (4096 + 14336), down 16 x (14336 + 4096):
   * 1,310,720 parameters, 41,943,040 in 32 layers. bitsandbytes pages a state buffer only for
   * p.numel() >= 1e5 (Optimizer8bit.get_state_buffer): of the factors only gate's and up's B
   * (14336 x 16 = 229,376) and down's A (16 x 14336) qualify: 3 x 229,376 x 32 = 22,020,096
   * parameters. 8-bit AdamW state: 2 x (1 + 4/2048) B per parameter: paged 44,126,208 B, the
   * rest (19,922,944 parameters) 39,923,712 B in device memory. On a 24 GB RTX 4090 the QLoRA job
   * leaves room: everything stays resident, nothing crosses PCIe; torch's allocated peak does
   * not count the paged state (a CPU tensor over unified memory to torch), the device view does. */
  const std::string job =
      "  method: qlora\n  lora: {rank: 16, targets: all-linear}\n  seq_len: 2048\n  micro_batch: 1\n  global_batch: 1\n"
      "  precision: bf16-mixed\n  activation_checkpointing: full\n  framework: hf-trainer\n";
  const auto paged =
      scenario("llama-3.1-8b", job + "  optimizer: paged-adamw-8bit\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto plain =
      scenario("llama-3.1-8b", job + "  optimizer: adamw-8bit\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  REQUIRE(paged.plans[0].job.optimizer.paged);
  const auto inv = inventory::build_inventory(paged.model, paged.plans[0]);
  CHECK(group_bytes(inv, "optimizer state (paged)", Tier::gpu) == doctest::Approx(44126208.0));
  CHECK(group_bytes(inv, "optimizer state", Tier::gpu) == doctest::Approx(39923712.0));
  const auto fp = footprint::footprint(paged.model, paged.plans[0]);
  const auto fu = footprint::footprint(plain.model, plain.plans[0]);
  CHECK(fp.paged.state_bytes == doctest::Approx(44126208.0));
  CHECK(fp.paged.resident_bytes == doctest::Approx(44126208.0));
  CHECK(fp.paged.host_bytes == 0);
  CHECK(fu.gpu_allocated_peak_bytes - fp.gpu_allocated_peak_bytes == doctest::Approx(44126208.0));
  // Device view: the paged state counts once, without the caching allocator's 5% slack.
  CHECK(fp.gpu_peak_bytes() == doctest::Approx(fp.gpu_reserved_peak_bytes + fp.gpu()[Category::overhead] + 44126208.0));
  CHECK(fu.gpu_peak_bytes() - fp.gpu_peak_bytes() == doctest::Approx(0.05 * 44126208.0));
  CHECK(plan::check_plan(paged.model, paged.plans[0]).empty());
}

TEST_CASE("paged 32-bit AdamW keeps fp32 state under pure bf16 (torchtune's single-device QLoRA)") {
  /* bitsandbytes' 32-bit optimizers allocate m and v in fp32 whatever the parameters' type;
   * torch.optim.AdamW follows the parameters (bf16 under torchtune dtype=bf16). Llama-3.1-8B
   * LoRA r16 all-linear: paged 22,020,096 x 8 = 176,160,768 B, the rest 19,922,944 x 8 =
   * 159,383,552 B; torch AdamW: 41,943,040 x 2 x 2 = 167,772,160 B. */
  const std::string job =
      "  method: qlora\n  lora: {rank: 16, targets: all-linear}\n  precision: bf16\n  framework: torchtune\n";
  const auto paged =
      scenario("llama-3.1-8b", job + "  optimizer: paged-adamw\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto torch = scenario("llama-3.1-8b", job + "  optimizer: adamw\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto inv = inventory::build_inventory(paged.model, paged.plans[0]);
  CHECK(group_bytes(inv, "optimizer state (paged)", Tier::gpu) == doctest::Approx(176160768.0));
  CHECK(group_bytes(inv, "optimizer state", Tier::gpu) == doctest::Approx(159383552.0));
  const auto tinv = inventory::build_inventory(torch.model, torch.plans[0]);
  CHECK(group_bytes(tinv, "optimizer state", Tier::gpu) == doctest::Approx(167772160.0));
}

TEST_CASE("paged AdamW (32-bit) when the GPU is full: the overflow lives in host memory and crosses PCIe each step") {
  /* Llama-3.2-1B full fine-tune, bf16-mixed under HF Trainer (fp32 weights and gradients, 4 + 4 B
   * per parameter) with paged 32-bit AdamW (m and v fp32: 8 B per parameter) on one RTX 4090.
   * The rule (footprint::paged_placement): the caching allocator's peak stays reserved and is
   * never evicted, so unified memory gets usable - (reserved + context, NCCL, workspaces); the
   * rest of the state lives in host memory, and each optimizer step prefetches it in and evicts
   * as much: host_bytes cross PCIe in each direction (bitsandbytes prefetch_state ->
   * cudaMemPrefetchAsync; QLoRA paper sec. 3). The device view is then exactly the usable
   * capacity, and the plan fits where the unpaged one does not. */
  const std::string job =
      "  method: full\n  seq_len: 4096\n  micro_batch: 2\n  global_batch: 2\n  precision: bf16-mixed\n"
      "  activation_checkpointing: full\n  framework: hf-trainer\n";
  const auto paged =
      scenario("llama-3.2-1b", job + "  optimizer: paged-adamw\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto plain = scenario("llama-3.2-1b", job + "  optimizer: adamw\n", "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto fp = footprint::footprint(paged.model, paged.plans[0]);
  const auto fu = footprint::footprint(plain.model, plain.plans[0]);
  MESSAGE(fmt::format("state {:.0f}, resident {:.0f}, host {:.0f}, device {:.0f} of {:.0f}, unpaged device {:.0f}",
                      fp.paged.state_bytes, fp.paged.resident_bytes, fp.paged.host_bytes, fp.gpu_peak_bytes(),
                      fp.gpu_capacity_bytes(), fu.gpu_peak_bytes()));
  const double other = fp.gpu_reserved_peak_bytes + fp.gpu()[Category::overhead];
  REQUIRE(fp.paged.host_bytes > 0);
  CHECK_FALSE(fu.fits);
  CHECK(fp.fits);
  CHECK(fp.gpu_peak_bytes() == doctest::Approx(fp.gpu_capacity_bytes()));
  CHECK(fp.paged.resident_bytes == doctest::Approx(fp.gpu_capacity_bytes() - other));
  CHECK(fp.paged.host_bytes == doctest::Approx(fp.paged.state_bytes + other - fp.gpu_capacity_bytes()));
  // 1.236B parameters x 8 B, all in matrices of >= 1e5 elements but the 16 x 2 + 1 norms of 2048.
  const double params = static_cast<double>(model::count_params(paged.model).total);
  const double norms = (2.0 * 16 + 1) * 2048;
  CHECK(fp.paged.state_bytes == doctest::Approx(8.0 * (params - norms)));
  // The host holds the paged-out state.
  CHECK(fp.bytes(plan::Tier::cpu)[Category::optimizer] == doctest::Approx(fp.paged.host_bytes));

  // The step IR: the optimizer step waits for host_bytes in, with host_bytes going out.
  const auto inv = inventory::build_inventory(paged.model, paged.plans[0]);
  const auto ir = schedule::build_step(paged.model, paged.plans[0], inv);
  double in = 0, out = 0;
  for (const auto& op : ir.ops) {
    if (op.name == "h2d paged optimizer state") in += op.bytes;
    if (op.name == "d2h paged optimizer state (evicted)") out += op.bytes;
  }
  CHECK(in == doctest::Approx(fp.paged.host_bytes));
  CHECK(out == doctest::Approx(fp.paged.host_bytes));
  CHECK(schedule::dry_run(ir).empty());
  // And the simulation spends at least host_bytes / (PCIe 4.0 x16's 32 GB/s) on it.
  const auto r = sim::simulate_step(paged.model, paged.plans[0]);
  REQUIRE(r.ok);
  double h2d_busy = 0;
  for (const auto& st : r.streams)
    if (st.name.find("h2d") != std::string::npos) h2d_busy += st.busy_s;
  CHECK(h2d_busy >= fp.paged.host_bytes / 32e9);
}

TEST_CASE("check: paged optimizers are bitsandbytes' AdamW, Adam, 8-bit AdamW and Lion, on the GPU") {
  const std::string job = "  method: lora\n  framework: hf-trainer\n";
  const auto ok = scenario("llama-3.2-1b", job + "  optimizer: {name: lion, paged: true}\n",
                           "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  CHECK(plan::check_plan(ok.model, ok.plans[0]).empty());
  plan::Plan sgd = ok.plans[0];
  sgd.job.optimizer.kind = plan::OptimizerKind::sgd;
  const auto problems = plan::check_plan(ok.model, sgd);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].key == "job.optimizer.paged");
  plan::Plan offloaded = ok.plans[0];
  offloaded.offload.optimizer = Tier::cpu;
  CHECK_FALSE(plan::check_plan(ok.model, offloaded).empty());
}

TEST_CASE("Unsloth offloads only what it checkpoints; an explicit offload.activations stays the plan's") {
  /* Without checkpointing Unsloth's checkpointer never runs: activations stay on the GPU. With
   * full checkpointing they go to host memory; a plan that names nvme keeps nvme. */
  const std::string job = "  method: qlora\n  seq_len: 2048\n  micro_batch: 1\n  framework: unsloth\n";
  const auto none = scenario("llama-3.1-8b", job + "  activation_checkpointing: none\n",
                             "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  CHECK(plan::activation_tier(none.plans[0]) == Tier::gpu);
  const auto full = scenario("llama-3.1-8b", job + "  activation_checkpointing: full\n",
                             "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  CHECK(plan::activation_tier(full.plans[0]) == Tier::cpu);
  plan::Plan nvme = full.plans[0];
  nvme.offload.activations = Tier::nvme;
  CHECK(plan::activation_tier(nvme) == Tier::nvme);
  const auto hf = scenario(
      "llama-3.1-8b",
      "  method: qlora\n  seq_len: 2048\n  micro_batch: 1\n  framework: hf-trainer\n  activation_checkpointing: full\n",
      "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  CHECK(plan::activation_tier(hf.plans[0]) == Tier::gpu);
}

TEST_CASE("a plan that switches framework gets the new framework's default optimizer, a named one stays") {
  /* Scenario job: unsloth without an optimizer; plan a switches to hf-trainer (AdamW), plan b
   * keeps unsloth (8-bit AdamW). With `optimizer: adamw-8bit` in the scenario job, a plan
   * switching to hf-trainer keeps the 8-bit one the scenario named. */
  const std::string head = "schema_version: 1\nmodel: llama-3.2-1b\njob:\n  steps: 1\n  framework: unsloth\n";
  const std::string plans =
      "plans:\n  - name: a\n    cluster: {gpu: rtx-4090, gpus: 1}\n    job: {framework: hf-trainer}\n"
      "  - name: b\n    cluster: {gpu: rtx-4090, gpus: 1}\n";
  const auto s = io::parse_scenario(head + plans, "t.yaml", test::data_dir(), test::zoo(), test::catalog());
  CHECK(s.plans[0].job.optimizer.kind == plan::OptimizerKind::adamw);
  CHECK(s.plans[1].job.optimizer.kind == plan::OptimizerKind::adamw_8bit);
  const auto named = io::parse_scenario(head + "  optimizer: adamw-8bit\n" + plans, "t.yaml", test::data_dir(),
                                        test::zoo(), test::catalog());
  CHECK(named.plans[0].job.optimizer.kind == plan::OptimizerKind::adamw_8bit);
}
