#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "inventory/inventory.hpp"
#include "io/scenario_io.hpp"
#include "model/model.hpp"
#include "schedule/step_ir.hpp"
#include "test_support.hpp"

using namespace ftplan;
using schedule::OpKind;

namespace {

plan::Scenario scenario(const std::string& model, const std::string& job, const std::string& plan) {
  const std::string text =
      fmt::format("schema_version: 1\nmodel: {}\njob:\n  steps: 1\n{}plans:\n  - name: p\n{}", model, job, plan);
  return io::parse_scenario(text, "schedule_test.yaml", test::data_dir(), test::zoo(), test::catalog());
}

schedule::StepIR step_of(const plan::Scenario& s) {
  const auto inv = inventory::build_inventory(s.model, s.plans[0]);
  return schedule::build_step(s.model, s.plans[0], inv);
}

}  // namespace

TEST_CASE("every op of the step finds its inputs live in the tier it reads them from") {
  const char* jobs[] = {"  framework: pytorch-fsdp\n",
                        "  framework: deepspeed\n  activation_checkpointing: full\n",
                        "  framework: hf-trainer\n  method: lora\n",
                        "  framework: megatron\n  global_batch: 32\n",
                        "  framework: pytorch-fsdp2\n  activation_checkpointing: selective\n",
                        "  framework: yafsdp\n  method: qlora\n"};
  const char* plans[] = {"    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {zero: 3}\n",
                         "    cluster: {gpu: h100-sxm-80gb, gpus: 16}\n    parallel: {zero: 1}\n",
                         "    cluster: {gpu: a100-sxm4-80gb, gpus: 8}\n    parallel: {tp: 2, zero: 2}\n",
                         "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n",
                         "    cluster: {node: workstation-4x-rtx-6000-ada, nodes: 1, dram: 512 GiB}\n"
                         "    parallel: {zero: 3}\n    offload: {preset: aidaptiv}\n",
                         "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {zero: 3}\n"
                         "    offload: {preset: zero-infinity}\n    job: {framework: deepspeed}\n",
                         "    cluster: {gpu: h100-sxm-80gb, gpus: 2}\n    parallel: {zero: 2}\n"
                         "    offload: {preset: zero-offload}\n    job: {framework: deepspeed}\n",
                         "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    offload: {preset: activation-cpu}\n"};
  int built = 0;
  for (const char* model : {"llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b"})
    for (const char* job : jobs)
      for (const char* plan : plans) {
        CAPTURE(std::string(model));
        CAPTURE(std::string(job));
        CAPTURE(std::string(plan));
        plan::Scenario s;
        try {
          s = scenario(model, std::string(job) + "  micro_batch: 2\n  seq_len: 1024\n", plan);
        } catch (const InputError&) {
          continue;  // a layout its framework refuses (parallel.zero under FSDP's own sharding, ...)
        }
        ++built;
        const auto ir = step_of(s);
        const auto problems = schedule::dry_run(ir);
        CHECK_MESSAGE(problems.empty(), (problems.empty() ? "" : problems.front()));
        CHECK(ir.ops.size() > 10);
      }
  CHECK(built >= 80);  // of 3 x 6 x 8
}

TEST_CASE("a step built without names is the same step op for op (its layer passes copied from templates)") {
  /* Without names (the simulator's builds) the builder copies a layer pass from the first pass of
   * its kind (Builder::LayerTemplate); with names (traces) it builds every pass by the layer's
   * rules. Both must give the same ops, dependencies and tensors. Every shipped scenario's plans,
   * every stage, and short pipelines as the simulator's stage symmetry builds them. */
  const auto same = [](const model::ModelSpec& m, const plan::Plan& p, int stage, int micro,
                       schedule::PipelineView view) {
    const auto inv = inventory::build_inventory(m, p, stage);
    auto named = schedule::build_step(m, p, inv, micro, true, view);
    auto plain = schedule::build_step(m, p, inv, micro, false, view);
    for (auto* ir : {&named, &plain}) {  // (fixed names such as "step start" are there either way)
      for (auto& op : ir->ops) op.name.clear();
      for (auto& t : ir->tensors) t.name.clear();
    }
    REQUIRE(named.ops.size() == plain.ops.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < named.ops.size() && differ == 0; ++i)
      if (!(named.ops[i] == plain.ops[i])) differ = i + 1;
    CHECK_MESSAGE(
        differ == 0,
        "op " << (differ - 1) << " differs"
              << (differ
                      ? nlohmann::json::parse(schedule::to_json(named, "a")).at("ops").at(differ - 1).dump() + " vs " +
                            nlohmann::json::parse(schedule::to_json(plain, "a")).at("ops").at(differ - 1).dump()
                      : std::string()));
    CHECK(named.tensors == plain.tensors);
    CHECK(named.model_flops_per_rank == plain.model_flops_per_rank);
    return named.ops.size();
  };
  std::size_t ops = 0;
  int plans = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::zoo_dir().parent_path() / "scenarios")) {
    if (e.path().extension() != ".yaml" || e.path().filename().string().rfind("sweep-", 0) == 0) continue;
    const auto s = io::load_scenario(e.path(), test::zoo(), test::catalog());
    for (const auto& p : s.plans) {
      CAPTURE(e.path().filename().string());
      CAPTURE(p.name);
      for (int stage = 0; stage < std::max(1, p.parallel.pp); ++stage) ops += same(s.model, p, stage, 0, {});
      ++plans;
    }
  }
  // Layouts the shipped scenarios do not hold: interleaved pipelines (and their short runs),
  // MoE with expert parallelism, QLoRA, FP8, ring attention, async TP, local/global attention,
  // encoder-decoder, full recompute.
  struct Layout {
    const char* model;
    int seq_len;
    const char* plan;
  };
  const Layout more[] = {
      {"llama-3.1-8b", 1024,
       "    cluster: {gpu: h100-sxm-80gb, gpus: 16}\n    parallel: {tp: 2, pp: 4, virtual_stages: 2, schedule: "
       "interleaved}\n"},
      {"mixtral-8x7b", 1024, "    cluster: {gpu: h100-sxm-80gb, gpus: 16}\n    parallel: {tp: 2, ep: 4, pp: 2}\n"},
      {"gemma-2-9b", 1024,
       "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {tp: 2, pp: 2, sequence_parallel: true, async_tp: "
       "true}\n"},
      // Past the 4,096-token window, local and global layers attend differently: two kinds.
      {"gemma-2-9b", 8192, "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {tp: 2, pp: 2}\n"},
      {"llama-3.1-8b", 1024, "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {tp: 2, cp: 2, pp: 2}\n"},
      {"t0-3b", 1024, "    cluster: {gpu: h100-sxm-80gb, gpus: 4}\n    parallel: {pp: 2}\n"},
  };
  const char* jobs[] = {"  framework: megatron\n  activation_checkpointing: full\n",
                        "  framework: megatron\n  precision: fp8-mixed\n", "  framework: hf-trainer\n  method: qlora\n",
                        "  framework: megatron\n  activation_checkpointing: selective\n"};
  for (const Layout& layout : more)  // (not a structured binding: clang 14's CAPTURE cannot take one)
    for (const char* job : jobs) {
      CAPTURE(std::string(layout.model));
      CAPTURE(layout.seq_len);
      CAPTURE(std::string(job));
      plan::Scenario s;
      try {
        s = scenario(layout.model,
                     fmt::format("{}  global_batch: 64\n  micro_batch: 1\n  seq_len: {}\n", job, layout.seq_len),
                     layout.plan);
      } catch (const InputError&) {
        continue;  // a layout its framework refuses
      }
      const auto& p = s.plans[0];
      const int pp = std::max(1, p.parallel.pp);
      for (int stage = 0; stage < pp; ++stage) ops += same(s.model, p, stage, 8, {});
      if (pp >= 2)
        for (int pos = 0; pos < 3; ++pos)
          ops += same(s.model, p, pos == 2 ? pp - 1 : std::min(pos, pp - 1), 6, {3, pos});
      ++plans;
    }
  CHECK(plans >= 40);
  CHECK(ops > 100000);
}

TEST_CASE("the step's model FLOPs are PaLM's 6N + 12LHQT per token") {
  /* Llama-3.1-8B, 8 GPUs FSDP, micro-batch 2 x 4096: the IR's forward and backward GEMMs and
   * attention add up to flops_per_token(4096) x tokens on the rank (no recompute). */
  const auto s = scenario("llama-3.1-8b", "  framework: pytorch-fsdp\n  micro_batch: 2\n  seq_len: 4096\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
  const auto ir = step_of(s);
  const double tokens = 2 * 4096;
  CHECK(ir.tokens_per_rank == tokens);
  CHECK(ir.model_flops_per_rank ==
        doctest::Approx(model::flops_per_token(s.model, 4096).training() * tokens).epsilon(1e-6));
  // Full recompute adds one forward: hardware FLOPs = model x (1 + 1/3) (Narayanan et al. 2021, eq. 3).
  const auto ckpt =
      scenario("llama-3.1-8b",
               "  framework: pytorch-fsdp\n  micro_batch: 2\n  seq_len: 4096\n  activation_checkpointing: full\n",
               "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
  const auto ir2 = step_of(ckpt);
  const double head = 6.0 * static_cast<double>(s.model.vocab) * s.model.hidden * tokens;  // the head is not recomputed
  CHECK(ir2.hardware_flops_per_rank ==
        doctest::Approx(ir2.model_flops_per_rank + (ir2.model_flops_per_rank - head) / 3).epsilon(1e-6));
}

TEST_CASE("data-parallel communication per step follows the framework") {
  /* FSDP (ZeRO-3) on 8 ranks: every layer's unit is all-gathered in forward and again in backward,
   * and its gradients reduce-scattered once per micro-batch. DDP: one all-reduce per layer, after
   * the last micro-batch only (no_sync during accumulation). */
  const auto count = [](const schedule::StepIR& ir, schedule::Collective c) {
    int n = 0;
    for (const auto& op : ir.ops)
      if (op.kind == OpKind::collective && op.collective == c && op.group == schedule::Group::dp) ++n;
    return n;
  };
  const auto fsdp = step_of(scenario("llama-3.1-8b", "  framework: pytorch-fsdp\n  global_batch: 16\n",
                                     "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n"));
  CHECK(fsdp.micro_batches == 2);
  CHECK(count(fsdp, schedule::Collective::all_gather) == 2 * 2 * 32);
  CHECK(count(fsdp, schedule::Collective::reduce_scatter) == 2 * 32);
  const auto ddp = step_of(scenario("llama-3.1-8b", "  framework: hf-trainer\n  global_batch: 16\n",
                                    "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n"));
  CHECK(count(ddp, schedule::Collective::all_reduce) == 32);
  CHECK(count(ddp, schedule::Collective::all_gather) == 0);
}

TEST_CASE("ZeRO-1/2 all-gathers only the trainable parameters after the step") {
  /* DeepSpeed ZeRO-2 on 8 ranks. The optimizer updates its shard of the parameters it holds, the
   * trainable ones (stage_1_and_2.py: bit16_groups are the optimizer's param groups, and
   * HF/PEFT pass only requires_grad parameters), and all_gather_dp_groups re-assembles those:
   * a full fine-tune gathers every parameter (N x 2 bytes), LoRA its adapters only. Gathering
   * the frozen base too cost 31 GiB and 2.9 s a step on 64 L40S (issue 39). */
  const auto gathered = [](const std::string& method) {
    const auto s = scenario("llama-3.1-8b", "  framework: deepspeed\n  method: " + method + "\n  seq_len: 1024\n",
                            "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {zero: 2}\n");
    const auto inv = inventory::build_inventory(s.model, s.plans[0]);
    const auto ir = schedule::build_step(s.model, s.plans[0], inv);
    double bytes = 0;
    for (const auto& op : ir.ops)
      if (op.kind == OpKind::collective && op.collective == schedule::Collective::all_gather) bytes += op.bytes;
    return std::pair{bytes, inv.params.trainable};
  };
  const auto [full_bytes, full_trainable] = gathered("full");
  CHECK(full_bytes == doctest::Approx(full_trainable * 2));
  const auto [lora_bytes, lora_trainable] = gathered("lora");
  CHECK(lora_trainable < full_trainable / 100);
  CHECK(lora_bytes == doctest::Approx(lora_trainable * 2));
}

TEST_CASE("a QLoRA base streamed from host memory under ZeRO-3 moves its quantized bytes") {
  /* Llama-3.1-8B on one GPU, DeepSpeed ZeRO-3 with the parameters offloaded to the CPU: each layer
   * is copied in for forward and again for backward. A QLoRA base is NF4 with double quantization,
   * ~0.52 B a parameter against LoRA's 2 B of bf16, so its copies carry about a quarter of the
   * bytes. (They carried the bf16 size before: 4,368 GiB a step for a 70B model, issue 41.) */
  const auto h2d = [](const std::string& method) {
    const auto s = scenario("llama-3.1-8b", "  framework: deepspeed\n  method: " + method + "\n  seq_len: 1024\n",
                            "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 3}\n"
                            "    offload: {params: cpu, optimizer: cpu, optimizer_step: cpu}\n");
    double bytes = 0;
    for (const auto& op : step_of(s).ops)
      if (op.kind == OpKind::copy && op.src == plan::Tier::cpu && op.dst == plan::Tier::gpu) bytes += op.bytes;
    return bytes;
  };
  const double lora = h2d("lora"), qlora = h2d("qlora");
  REQUIRE(lora > 0);
  CHECK(qlora / lora == doctest::Approx(0.53 / 2).epsilon(0.1));
}

TEST_CASE("LoRA adapters run as PEFT runs them: in forward, again in a recompute, and in backward") {
  /* Llama-3.2-1B, LoRA r 8 on q and v with dropout 0.05, full checkpointing, 16 layers, one
   * micro-batch of 1,024 tokens. Per layer and targeted linear (peft lora.Linear.forward): forward
   * 5 kernels (dropout, lora_A, lora_B, scaling, add), the recompute the same, backward 8; forward
   * bytes per token a in + 2a r + 6a out + (2a + 1) in for dropout, backward 4a out + 4a r + 5a in
   * + (2a + 1) in (a = 2: bf16). q is 2048 -> 2048, v 2048 -> 512 (8 KV heads of 64). The forward
   * FLOPs are 2 T r (in + out), the backward's 3x. (calibrate/reference/eager_layer_ops.md counts
   * 7 forward ops a module with PEFT's fp32 adapters: two casts more.) */
  const auto s = scenario("llama-3.2-1b",
                          "  method: lora\n  lora: {rank: 8, dropout: 0.05, targets: [q, v]}\n  seq_len: 1024\n"
                          "  activation_checkpointing: full\n  framework: hf-trainer\n  precision: bf16\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  const auto ir = step_of(s);
  const double T = 1024, a = 2, r = 8;
  const double fwd_bytes = T * ((a * 2048 + 2 * a * r + 6 * a * 2048 + (2 * a + 1) * 2048) +
                                (a * 2048 + 2 * a * r + 6 * a * 512 + (2 * a + 1) * 2048));
  const double bwd_bytes = T * ((4 * a * 2048 + 4 * a * r + 5 * a * 2048 + (2 * a + 1) * 2048) +
                                (4 * a * 512 + 4 * a * r + 5 * a * 2048 + (2 * a + 1) * 2048));
  const double fwd_flops = 2 * T * r * ((2048 + 2048) + (2048 + 512));
  std::map<schedule::Pass, int> count;
  for (const auto& op : ir.ops) {
    if (op.kind != OpKind::gemm || op.n != 8 || op.layer < 0) continue;
    ++count[op.pass];
    const bool bwd = op.pass == schedule::Pass::backward;
    CHECK(op.kernels == (bwd ? 16 : 10));
    CHECK(op.bytes == doctest::Approx(bwd ? bwd_bytes : fwd_bytes));
    CHECK(op.flops == doctest::Approx((bwd ? 3 : 1) * fwd_flops));
  }
  CHECK(count[schedule::Pass::forward] == 16);
  CHECK(count[schedule::Pass::recompute] == 16);
  CHECK(count[schedule::Pass::backward] == 16);
}

TEST_CASE("the memory the step allocates is the inventory's") {
  /* Persistent state is allocated once; each layer's saved activations once per micro-batch;
   * everything allocated is freed by the end except persistent state. */
  const auto s = scenario("llama-3.1-8b", "  framework: pytorch-fsdp\n  micro_batch: 1\n  seq_len: 2048\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
  const auto inv = inventory::build_inventory(s.model, s.plans[0]);
  const auto ir = schedule::build_step(s.model, s.plans[0], inv);
  double persistent = 0;
  for (const auto& g : inv.groups)
    if (g.lifetime == inventory::Lifetime::persistent && g.tier == plan::Tier::gpu) persistent += g.total();
  double live = 0, peak = 0;
  for (const auto& op : ir.ops) {
    if (op.kind == OpKind::alloc && ir.tensors[op.tensor].tier == plan::Tier::gpu) live += ir.tensors[op.tensor].bytes;
    if (op.kind == OpKind::free && ir.tensors[op.tensor].tier == plan::Tier::gpu) live -= ir.tensors[op.tensor].bytes;
    peak = std::max(peak, live);
  }
  CHECK(live == doctest::Approx(persistent));
  CHECK(peak > persistent);
}

TEST_CASE("each sharding framework makes its own memory copies around the collectives") {
  /* Llama-3.1-8B on 8 GPUs, one micro-batch: 32 units gathered twice and reduced once.
   * FSDP2: a copy-out per gather (2 bytes x 2 per parameter) and a chunk_cat per reduce-scatter
   * (bf16 in, fp32 out); FSDP1: the flat-gradient cat and the pre-divide; DeepSpeed ZeRO-3: the
   * flatten and pre-divide; YaFSDP: none (preallocated buffers). */
  const auto copies = [](const std::string& framework, double& bytes) {
    const auto ir = step_of(scenario("llama-3.1-8b", "  framework: " + framework + "\n  seq_len: 1024\n",
                                     "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {zero: 3}\n"));
    int n = 0;
    bytes = 0;
    for (const auto& op : ir.ops)
      if (op.kind == OpKind::elementwise &&
          (op.name.find("copy-") != std::string::npos || op.name.find("gradient") != std::string::npos)) {
        ++n;
        bytes += op.bytes;
      }
    return n;
  };
  const auto s =
      scenario("llama-3.1-8b", "  framework: pytorch-fsdp2\n", "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
  const auto inv = inventory::build_inventory(s.model, s.plans[0]);
  const double layer = inv.params.trainable_largest_layer;
  double bytes = 0;
  CHECK(copies("pytorch-fsdp2", bytes) == 3 * 32);
  CHECK(bytes == doctest::Approx(32 * layer * (2 * 2 * 2 + 2 + 4)));
  CHECK(copies("pytorch-fsdp", bytes) == 2 * 32);
  CHECK(bytes == doctest::Approx(32 * layer * (2 * 2 + 2 * 2)));
  CHECK(copies("deepspeed", bytes) == 32);
  CHECK(bytes == doctest::Approx(32 * layer * 8));
  CHECK(copies("yafsdp", bytes) == 0);
}

TEST_CASE("the step IR names each tensor's type and shape and is written as JSON an executor can read") {
  /* FSDP2 with FP8 linears on 8 GPUs: fp32 parameter shards, bf16 gathered units, packed saved
   * activations; fp8 GEMMs with their m, n, k; reduce-scatters in fp32 (torchtitan). The JSON has
   * every tensor and op, with ids the deps, reads and writes refer to. */
  const auto s = scenario("llama-3.1-8b", "  framework: pytorch-fsdp2\n  precision: fp8-mixed\n  seq_len: 1024\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
  const auto ir = step_of(s);
  CHECK(schedule::dry_run(ir).empty());
  int fp8_gemms = 0, fp32_reduces = 0, bf16_gathers = 0;
  for (const auto& op : ir.ops) {
    if (op.kind == OpKind::gemm && op.element == inventory::Element::fp8) ++fp8_gemms;
    if (op.kind == OpKind::collective && op.collective == schedule::Collective::reduce_scatter)
      fp32_reduces += op.element == inventory::Element::fp32;
    if (op.kind == OpKind::collective && op.collective == schedule::Collective::all_gather)
      bf16_gathers += op.element == inventory::Element::bf16;
  }
  CHECK(fp8_gemms > 32 * 4);
  CHECK(fp32_reduces == 32);
  CHECK(bf16_gathers == 2 * 32);
  for (const auto& t : ir.tensors) {
    CHECK(static_cast<double>(t.elements) * inventory::element_bytes(t.element) ==
          doctest::Approx(t.bytes).epsilon(1e-9));
  }

  const auto doc = nlohmann::json::parse(schedule::to_json(ir, "p"));
  CHECK(doc["format"] == "ftplan-step-ir");
  CHECK(doc["version"] == 1);
  REQUIRE(doc["ops"].size() == ir.ops.size());
  REQUIRE(doc["tensors"].size() == ir.tensors.size());
  for (const auto& op : doc["ops"]) {
    const auto id = op["id"].get<std::size_t>();
    for (const char* list : {"deps", "reads", "writes"}) {
      if (!op.contains(list)) continue;
      const std::size_t bound = std::string(list) == "deps" ? id : ir.tensors.size();  // deps point back
      for (const auto& ref : op[list]) CHECK(ref.get<std::size_t>() < bound);
    }
    if (op["kind"] == "gemm") {
      CHECK(op["m"].get<long>() > 0);
      CHECK(op.contains("element"));
    }
  }
  // FSDP's sharded parameters are fp32 and are the master weights; Adam's state is fp32.
  for (const auto& t : doc["tensors"]) {
    if (t["name"] == "trainable weights" || t["name"] == "optimizer state") CHECK(t["element"] == "fp32");
    if (t["name"] == "saved activations L0") CHECK(t["element"] == "bytes");
  }
}

TEST_CASE("FSDP's mixed-precision policy sets what is gathered and what is reduced") {
  /* Composer's old "DEFAULT": fp32 parameters gathered (twice the bytes of bf16), cast by
   * torch.autocast in every forward, gradients reduced in bf16. torchtitan's FSDP2 reduces in
   * fp32 by default; an explicit reduce_dtype wins. */
  const auto dp_bytes = [](const std::string& job, schedule::Collective c, inventory::Element& element, int& casts) {
    const auto ir =
        step_of(scenario("llama-3.1-8b", job + "  seq_len: 1024\n", "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n"));
    double bytes = 0;
    casts = 0;
    for (const auto& op : ir.ops) {
      if (op.kind == OpKind::collective && op.collective == c && op.group == schedule::Group::dp) {
        bytes += op.bytes;
        element = op.element;
      }
      casts += op.name.find("autocast weight casts") != std::string::npos;
    }
    return bytes;
  };
  inventory::Element e{};
  int casts = 0;
  const double bf16 = dp_bytes("  framework: pytorch-fsdp\n", schedule::Collective::all_gather, e, casts);
  CHECK(e == inventory::Element::bf16);
  CHECK(casts == 0);
  const double fp32 =
      dp_bytes("  framework: pytorch-fsdp\n  fsdp_mixed_precision: {param_dtype: fp32, reduce_dtype: bf16}\n",
               schedule::Collective::all_gather, e, casts);
  CHECK(e == inventory::Element::fp32);
  CHECK(fp32 == doctest::Approx(2 * bf16));
  CHECK(casts == 32);
  dp_bytes("  framework: pytorch-fsdp\n  fsdp_mixed_precision: {param_dtype: fp32, reduce_dtype: bf16}\n",
           schedule::Collective::reduce_scatter, e, casts);
  CHECK(e == inventory::Element::bf16);
  dp_bytes("  framework: pytorch-fsdp2\n", schedule::Collective::reduce_scatter, e, casts);
  CHECK(e == inventory::Element::fp32);
  dp_bytes("  framework: pytorch-fsdp2\n  fsdp_mixed_precision: {reduce_dtype: bf16}\n",
           schedule::Collective::reduce_scatter, e, casts);
  CHECK(e == inventory::Element::bf16);
}

TEST_CASE("checkpointing every other layer recomputes half the layers and keeps half the activations") {
  /* torchtitan's layer SAC (ac_freq 2), Megatron's uniform recompute: with checkpoint_every 2 the
   * 2nd, 4th, ... layer is recomputed; saved activations fall between none and full. */
  const auto run = [](const std::string& ckpt, double& saved) {
    const auto s = scenario("llama-3.1-8b", "  framework: pytorch-fsdp2\n  seq_len: 4096\n" + ckpt,
                            "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
    const auto inv = inventory::build_inventory(s.model, s.plans[0]);
    saved = 0;
    for (const auto& g : inv.groups)
      if (g.category == inventory::Category::activations && g.lifetime == inventory::Lifetime::saved)
        saved += g.total();
    const auto ir = schedule::build_step(s.model, s.plans[0], inv);
    std::set<int> recomputed;
    for (const auto& op : ir.ops)
      if (op.pass == schedule::Pass::recompute && op.layer >= 0) recomputed.insert(op.layer);
    return recomputed;
  };
  double none = 0, full = 0, half = 0;
  CHECK(run("  activation_checkpointing: none\n", none).empty());
  CHECK(run("  activation_checkpointing: full\n", full).size() == 32);
  const auto every2 = run("  activation_checkpointing: full\n  checkpoint_every: 2\n", half);
  CHECK(every2.size() == 16);
  CHECK(every2.count(1) == 1);
  CHECK(every2.count(0) == 0);
  CHECK(half == doctest::Approx((none + full) / 2));
}

TEST_CASE("ZeRO-Offload upcasts each layer's 16-bit gradient on the GPU before copying it to the host's fp32") {
  /* DeepSpeed's stage_1_and_2.py async_inplace_copy_grad_to_fp32_buffer_from_gpu (src_tensor.float(),
   * then copy_(non_blocking)): per layer, one elementwise op on the compute stream reading 2 B and
   * writing 4 B per gradient element, which the layer's device-to-host copy waits for. */
  const auto s =
      scenario("llama-3.1-8b", "  framework: deepspeed\n  micro_batch: 2\n  seq_len: 1024\n  global_batch: 4\n",
               "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 2}\n"
               "    offload: {preset: zero-offload}\n");
  const auto ir = step_of(s);
  std::map<int, int> upcast_of_layer;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const auto& op = ir.ops[i];
    if (!op.upcasts_gradients) continue;
    CHECK(op.kind == OpKind::elementwise);
    CHECK(op.stream == schedule::Stream::compute);
    CHECK(op.micro == ir.micro_batches - 1);  // once a step, after the last micro-batch's backward
    CHECK(upcast_of_layer.count(op.layer) == 0);
    upcast_of_layer[op.layer] = static_cast<int>(i);
  }
  CHECK(static_cast<int>(upcast_of_layer.size()) == s.model.layers);
  // Each layer's d2h gradient copy waits for its upcast, whose bytes are 2 + 4 per element it copies.
  int copies = 0;
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const auto& op = ir.ops[i];
    if (op.kind != OpKind::copy || op.src != plan::Tier::gpu || op.dst != plan::Tier::cpu || op.layer < 0 ||
        !upcast_of_layer.count(op.layer) || op.writes.empty())
      continue;
    const auto& t = ir.tensors[static_cast<std::size_t>(op.writes.front())];
    if (t.category != inventory::Category::gradients) continue;
    ++copies;
    CHECK(ir.ops[static_cast<std::size_t>(upcast_of_layer[op.layer])].bytes ==
          doctest::Approx(6.0 * static_cast<double>(t.elements)));
    // The copy's dependencies reach the upcast (through the allocation of the host tensor).
    std::set<int> seen, todo{static_cast<int>(i)};
    bool reaches = false;
    while (!todo.empty() && !reaches) {
      const int j = *todo.begin();
      todo.erase(todo.begin());
      for (const int d : ir.ops[static_cast<std::size_t>(j)].deps) {
        if (d == upcast_of_layer[op.layer]) reaches = true;
        if (seen.insert(d).second && d > upcast_of_layer[op.layer]) todo.insert(d);
      }
    }
    CHECK(reaches);
  }
  CHECK(copies == s.model.layers);
}

TEST_CASE(
    "offloaded gradient shares hold each layer's gradients: the embedding's in the first, the head's in the last") {
  /* The embedding's gradient exists only after the first layer's backward and the head's before
   * the last layer's: a share copied to the host after layer l's backward must hold nothing the
   * layers below l make (the executor's training reads them). On the GPU the shares stay equal. */
  const auto s =
      scenario("llama-3.2-1b", "  framework: deepspeed\n  micro_batch: 1\n  seq_len: 512\n  global_batch: 1\n",
               "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 2}\n"
               "    offload: {preset: zero-offload}\n");
  const model::ModelSpec& m = s.model;
  const auto ir = step_of(s);
  std::vector<const schedule::Tensor*> shares;
  for (const auto& t : ir.tensors)
    if (t.category == inventory::Category::gradients && t.layer >= 0) shares.push_back(&t);
  REQUIRE(static_cast<int>(shares.size()) == m.layers);
  const auto h = static_cast<std::int64_t>(m.hidden);
  const std::int64_t embedding = model::embedding_params(m), total = model::count_params(m).total;
  const std::int64_t root = embedding + model::head_params(m) + h;  // + the final norm
  const std::int64_t block = (total - root) / m.layers;
  CHECK(shares.front()->element == inventory::Element::fp32);
  CHECK(shares.front()->elements == block + embedding);
  for (int l = 1; l + 1 < m.layers; ++l) CHECK(shares[static_cast<std::size_t>(l)]->elements == block);
  CHECK(shares.back()->elements == block + root - embedding);
  std::int64_t sum = 0;
  for (const auto* t : shares) sum += t->elements;
  CHECK(sum == total);

  const auto gpu = scenario("llama-3.2-1b", "  micro_batch: 1\n  seq_len: 512\n  global_batch: 1\n",
                            "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  const auto on_gpu = step_of(gpu);
  std::set<std::int64_t> sizes;
  for (const auto& t : on_gpu.tensors)
    if (t.category == inventory::Category::gradients && t.layer >= 0) sizes.insert(t.elements);
  CHECK(sizes.size() == 1);
}

TEST_CASE("parameters streamed from flash: the embedding and the LM head are fetched as the layers are") {
  /* DeepSpeed ZeRO-3's offload_param fetches every module's parameters on use (stage3
   * PartitionedParameterCoordinator.fetch_sub_module): the embedding before the first layer and
   * the head with the final norm before the head's forward, each micro-batch; the head's buffer
   * is the inventory's kStreamedHead. Parameters on the GPU (FSDP here) fetch nothing of the kind. */
  const auto s =
      scenario("llama-3.1-8b", "  framework: deepspeed\n  micro_batch: 1\n  seq_len: 1024\n  global_batch: 2\n",
               "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 3}\n"
               "    offload: {preset: zero-infinity}\n");
  const model::ModelSpec& m = s.model;
  const auto inv = inventory::build_inventory(s.model, s.plans[0]);
  const auto ir = schedule::build_step(s.model, s.plans[0], inv);
  double head_group = 0;
  for (const auto& g : inv.groups)
    if (std::string_view(g.name) == inventory::kStreamedHead) head_group = g.total();
  const double head_params = static_cast<double>(model::head_params(m)) + m.hidden;
  CHECK(head_group == doctest::Approx(2.0 * head_params));
  int embedding_reads = 0, head_reads = 0;
  for (const auto& op : ir.ops) {
    if (op.kind != OpKind::copy || op.src != plan::Tier::nvme) continue;
    if (op.name.starts_with("nvme read params embedding")) {
      ++embedding_reads;
      CHECK(op.bytes == doctest::Approx(2.0 * static_cast<double>(model::embedding_params(m))));
    }
    if (op.name.starts_with("nvme read params head")) {
      ++head_reads;
      CHECK(op.bytes == doctest::Approx(2.0 * head_params));
    }
  }
  CHECK(embedding_reads == 2);  // one a micro-batch
  CHECK(head_reads == 2);
  for (const auto& op : ir.ops)
    if (op.kind == OpKind::gemm && op.layer < 0) {  // fwd and bwd head read the fetched head
      REQUIRE(op.reads.size() == 1);
      CHECK(ir.tensors[static_cast<std::size_t>(op.reads.front())].bytes == doctest::Approx(head_group));
    }
  CHECK(schedule::dry_run(ir).empty());

  const auto fsdp = scenario("llama-3.1-8b", "  framework: pytorch-fsdp\n  micro_batch: 1\n  seq_len: 1024\n",
                             "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
  for (const auto& op : step_of(fsdp).ops) CHECK(op.name.find("params embedding") == std::string::npos);
}
