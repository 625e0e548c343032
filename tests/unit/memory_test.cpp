#include <doctest/doctest.h>

#include <fmt/format.h>

#include "footprint/footprint.hpp"
#include "inventory/inventory.hpp"
#include "io/scenario_io.hpp"
#include "plan/checks.hpp"
#include "test_support.hpp"

using namespace ftplan;
using inventory::Category;

namespace {

plan::Scenario scenario(const std::string& model, const std::string& job, const std::string& plan) {
  const std::string text =
      fmt::format("schema_version: 1\nmodel: {}\njob:\n  steps: 1\n{}plans:\n  - name: p\n{}", model, job, plan);
  return io::parse_scenario(text, "memory_test.yaml", test::data_dir(), test::zoo(), test::catalog());
}

// Bytes of one category on the GPU summed over the inventory's groups (no lifetimes applied).
double gpu_bytes(const inventory::Inventory& inv, Category c) {
  double total = 0;
  for (const auto& g : inv.groups)
    if (g.category == c && g.tier == plan::Tier::gpu) total += g.total();
  return total;
}

double group_bytes(const inventory::Inventory& inv, const std::string& name) {
  for (const auto& g : inv.groups)
    if (name == g.name) return g.total();
  return 0;
}

}  // namespace

TEST_CASE("ZeRO paper's example: 16 bytes/param and its sharding over 64 ranks (Rajbhandari et al. 2020, fig. 1)") {
  /* Mixed-precision Adam keeps 2 (fp16 weights) + 2 (fp16 gradients) + K = 12 (fp32 master, m, v)
   * bytes per parameter. With Nd = 64: baseline 16 Psi; ZeRO-1 4 Psi + 12 Psi/64; ZeRO-2
   * 2 Psi + 14 Psi/64; ZeRO-3 16 Psi/64. For Psi = 7.5B: 120, 31.4, 16.6 and 1.9 GB. */
  for (int zero = 0; zero <= 3; ++zero) {
    CAPTURE(zero);
    const auto s =
        scenario("megatron-gpt-7.5b", "  framework: deepspeed\n  micro_batch: 1\n",
                 fmt::format("    cluster: {{gpu: a100-sxm4-80gb, gpus: 64}}\n    parallel: {{zero: {}}}\n", zero));
    const auto inv = inventory::build_inventory(s.model, s.plans[0]);
    const double psi = static_cast<double>(model::count_params(s.model).total);
    const double state =
        gpu_bytes(inv, Category::weights) + gpu_bytes(inv, Category::gradients) + gpu_bytes(inv, Category::optimizer);
    const double expected[] = {16 * psi, 4 * psi + 12 * psi / 64, 2 * psi + 14 * psi / 64, 16 * psi / 64};
    CHECK(state == doctest::Approx(expected[zero]));
    const double paper_gb[] = {120, 31.4, 16.6, 1.9};
    CHECK(state / psi * 7.5e9 / 1e9 == doctest::Approx(paper_gb[zero]).epsilon(0.02));
  }
}

TEST_CASE("Korthikanti et al. 2022: activations per layer sbh(34 + 5as/h), with tensor and sequence parallelism") {
  /* GPT-22B (h = 6144, a = 64, 48 layers), s = 2048, b = 1, 16-bit, dropout 0.1, eager attention:
   *   no parallelism            sbh (34 + 5as/h)                     eq. 1
   *   tensor parallel t         sbh (10 + 24/t + 5as/(ht))           eq. 2
   *   + sequence parallel       sbh/t (34 + 5as/h)                   eq. 4
   *   + selective recompute     34 sbh / t                           eq. 6
   *   full recompute            2 sbh per layer (its input)          sec. 4.3 */
  const double s = 2048, b = 1, h = 6144, a = 64, L = 48;
  const std::string job = "  framework: megatron\n  seq_len: 2048\n  attention: eager\n";
  const auto saved = [&](const std::string& extra_job, const std::string& parallel) {
    const auto sc = scenario("megatron-gpt-22b", job + extra_job,
                             "    cluster: {gpu: a100-sxm4-80gb, gpus: 8}\n    parallel: " + parallel + "\n");
    return group_bytes(inventory::build_inventory(sc.model, sc.plans[0]), "saved activations") / L;
  };
  CHECK(saved("", "{dp: 8}") == doctest::Approx(s * b * h * (34 + 5 * a * s / h)).epsilon(1e-3));
  CHECK(saved("", "{tp: 8}") == doctest::Approx(s * b * h * (10 + 24.0 / 8 + 5 * a * s / (h * 8))).epsilon(1e-3));
  CHECK(saved("", "{tp: 8, sequence_parallel: true}") ==
        doctest::Approx(s * b * h / 8 * (34 + 5 * a * s / h)).epsilon(1e-3));
  CHECK(saved("  activation_checkpointing: selective\n", "{tp: 8, sequence_parallel: true}") ==
        doctest::Approx(34 * s * b * h / 8).epsilon(1e-3));
  CHECK(saved("  activation_checkpointing: full\n", "{dp: 8}") == doctest::Approx(2 * s * b * h));
}

TEST_CASE("LoRA trainable parameters match PEFT's print_trainable_parameters") {
  /* Llama-2-7B, r = 8 on q and v: 2 x 8 x (4096 + 4096) x 32 layers = 4,194,304.
   * Llama-3.1-8B, r = 16 on all linears: per layer q 16(4096+4096) + k, v 16(4096+1024) each +
   * o 16(4096+4096) + gate, up, down 16(4096+14336) each = 1,310,720; x 32 = 41,943,040. */
  plan::Job job;
  job.method = plan::Method::lora;
  job.lora.rank = 8;
  job.lora.targets = {"q", "v"};
  CHECK(inventory::lora_params(*test::zoo().find("llama-2-7b"), job) == 4'194'304);
  job.lora.rank = 16;
  job.lora.targets = {"q", "k", "v", "o", "gate", "up", "down"};
  CHECK(inventory::lora_params(*test::zoo().find("llama-3.1-8b"), job) == 41'943'040);
}

TEST_CASE("QLoRA storage: NF4 with double quantization costs 4.127 bits per parameter (Dettmers et al. 2023)") {
  plan::QuantSpec q;
  CHECK(inventory::quantized_bytes_per_param(q) * 8 == doctest::Approx(4.127).epsilon(1e-3));
  q.double_quant = false;
  CHECK(inventory::quantized_bytes_per_param(q) * 8 == doctest::Approx(4.5));  // 32-bit absmax per 64
}

TEST_CASE("memory never shrinks as micro-batch or sequence grows; ZeRO and checkpointing never cost more") {
  const char* frameworks[] = {"pytorch-fsdp", "pytorch-fsdp2", "deepspeed", "megatron", "hf-trainer"};
  for (const std::string model : {"llama-3.1-8b", "mixtral-8x7b", "gemma-2-9b", "bert-large-uncased", "qwen2.5-7b"}) {
    for (const std::string fw : frameworks) {
      for (const std::string method : {"full", "lora", "qlora"}) {
        CAPTURE(model);
        CAPTURE(fw);
        CAPTURE(method);
        const std::string job = fmt::format("  framework: {}\n  method: {}\n  seq_len: 512\n", fw, method);
        const std::string cluster = "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n";
        // ZeRO stages are set on the plan below, past the reader's check that refuses parallel.zero
        // where the framework shards by its own rule (the inventory follows that rule).
        auto s = scenario(model, job, cluster);
        plan::Plan p = s.plans[0];
        p.parallel.zero = 1;
        double last = 0;
        for (int mb : {1, 2, 3, 4, 8}) {
          p.job.micro_batch = mb;
          p.job.global_batch = 0;
          const double peak = footprint::footprint(s.model, p).gpu_peak_bytes();
          CHECK(peak >= last);
          last = peak;
        }
        p.job.micro_batch = 1;
        last = 0;
        for (std::int64_t seq : {128, 256, 512}) {
          p.job.seq_len = seq;
          const double peak = footprint::footprint(s.model, p).gpu_peak_bytes();
          CHECK(peak >= last);
          last = peak;
        }
        // Weights + gradients + optimizer per GPU never grow with the ZeRO stage.
        p.job.seq_len = 512;
        double previous = 1e300;
        for (int zero = 0; zero <= 3; ++zero) {
          p.parallel.zero = zero;
          const auto inv = inventory::build_inventory(s.model, p);
          const double state = gpu_bytes(inv, Category::weights) + gpu_bytes(inv, Category::gradients) +
                               gpu_bytes(inv, Category::optimizer);
          CHECK(state <= previous * (1 + 1e-12));
          previous = state;
        }
        // Full checkpointing never needs more activation memory, nor a higher peak, than none.
        p.parallel.zero = 1;
        p.job.checkpointing = plan::Checkpointing::none;
        const double none_acts = gpu_bytes(inventory::build_inventory(s.model, p), Category::activations);
        const double none_peak = footprint::footprint(s.model, p).gpu_peak_bytes();
        p.job.checkpointing = plan::Checkpointing::full;
        CHECK(gpu_bytes(inventory::build_inventory(s.model, p), Category::activations) <= none_acts);
        CHECK(footprint::footprint(s.model, p).gpu_peak_bytes() <= none_peak);
      }
    }
  }
}

TEST_CASE("offloaded state moves tier and the host pays for it") {
  /* ZeRO-Offload (Ren et al. 2021): fp32 master + Adam m, v (12 B/param) and fp32 gradients
   * (4 B/param) live in host memory; the GPU keeps the 16-bit weights. Llama-3.1-8B on one GPU,
   * DeepSpeed ZeRO-2: host holds 16 x 8.03e9 = 128.5 GB of state, plus the process. */
  const auto s = scenario("llama-3.1-8b", "  framework: deepspeed\n  activation_checkpointing: full\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n    parallel: {zero: 2}\n"
                          "    offload: {preset: zero-offload}\n");
  const auto f = footprint::footprint(s.model, s.plans[0]);
  const double psi = static_cast<double>(model::count_params(s.model).total);
  CHECK(f.bytes(plan::Tier::cpu)[Category::optimizer] == doctest::Approx(12 * psi));
  CHECK(f.bytes(plan::Tier::cpu)[Category::gradients] == doctest::Approx(4 * psi));
  CHECK(f.gpu()[Category::optimizer] == 0);
  CHECK(f.gpu()[Category::weights] == doctest::Approx(2 * psi));
  CHECK(f.fits);
}

TEST_CASE("a plan that does not fit says by how much") {
  const auto s =
      scenario("llama-3.1-70b", "  framework: pytorch-fsdp\n", "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
  const auto f = footprint::footprint(s.model, s.plans[0]);
  CHECK_FALSE(f.fits);
  CHECK(f.infeasible_reason.find("GPU memory needs") == 0);
  CHECK(f.infeasible_reason.find("per GPU (short by") != std::string::npos);
  CHECK(footprint::max_micro_batch(s.model, s.plans[0]) == 0);
}

TEST_CASE("bitsandbytes' 8-bit AdamW updates in place: no optimizer-step temporary the size of the weights") {
  /* Optimizer8bit.step -> update_step -> F.optimizer_update_8bit_blockwise, one tensor at a time.
   * Llama-3.1-8B, full fine-tune on 8 H100s under DDP: it was given 29.9 GiB (bf16-mixed). */
  for (const char* precision : {"bf16-mixed", "bf16"}) {
    const auto s = scenario(
        "llama-3.1-8b", fmt::format("  framework: hf-trainer\n  precision: {}\n  optimizer: adamw-8bit\n", precision),
        "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
    CHECK(group_bytes(inventory::build_inventory(s.model, s.plans[0]), "optimizer step temporaries") == 0);
    const auto t = scenario("llama-3.1-8b",
                            fmt::format("  framework: hf-trainer\n  precision: {}\n  optimizer: adamw\n", precision),
                            "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n");
    CHECK(group_bytes(inventory::build_inventory(t.model, t.plans[0]), "optimizer step temporaries") >
          1e9);  // foreach AdamW
  }
}

TEST_CASE("expert weights split by ep, then shard only over the ranks that hold the same experts") {
  /* Mixtral-8x7B on 8 H100s, ep 8, FSDP full_shard (ZeRO 3): each GPU holds one whole expert per
   * layer, 3 x 4096 x 14336 x 32 = 5.637e9 parameters, whose expert-data-parallel group is dp / ep = 1
   * rank (nothing to shard them over); the dense ~1.60e9 (attention, embeddings, head, router,
   * norms) shard over all 8. FSDP keeps fp32 parameters: weights = 4 x (5.637e9 + 1.60e9 / 8).
   * They were sharded twice (over ep, then over all 8): 3.4 GiB instead of ~21.7. */
  const auto s = scenario("mixtral-8x7b", "  framework: pytorch-fsdp\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: {ep: 8}\n");
  const auto inv = inventory::build_inventory(s.model, s.plans[0]);
  const double expert = 3.0 * 4096 * 14336 * 32;
  CHECK(inv.params.expert == doctest::Approx(expert).epsilon(1e-4));  // + the router's eighth, as the MLP is split
  const double dense = inv.params.total - inv.params.expert;
  CHECK(dense == doctest::Approx(1.60e9).epsilon(0.02));
  CHECK(gpu_bytes(inv, Category::weights) == doctest::Approx(4 * (expert + dense / 8)).epsilon(1e-4));
  CHECK(gpu_bytes(inv, Category::optimizer) == doctest::Approx(8 * (expert + dense / 8)).epsilon(1e-4));
  /* On 16 GPUs with ep 8, each expert has two replicas: its state shards over 2. */
  const auto t = scenario("mixtral-8x7b", "  framework: pytorch-fsdp\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 16}\n    parallel: {ep: 8}\n");
  const auto inv16 = inventory::build_inventory(t.model, t.plans[0]);
  CHECK(gpu_bytes(inv16, Category::weights) == doctest::Approx(4 * (expert / 2 + dense / 16)).epsilon(1e-4));
}

TEST_CASE("a plan that does not fit is told what would make it fit, nearest first") {
  /* Llama-3.1-8B LoRA on one RTX 4090 at micro-batch 4, no checkpointing: ~60 GiB of 24. Neither a
   * smaller micro-batch nor checkpointing alone fits; both together do (micro-batch 2, 8
   * accumulation steps at the global batch of 16: each checkpointed layer keeps its 16-bit input,
   * the LoRA base's residual stream being bf16 under autocast), and so does aiDAPTIV+ on its drives. Each change
   * listed fits, passes the framework's checks, and the nearest (the one that leaves hardware and
   * framework as they are) comes first. A plan that fits gets no list. */
  const auto s =
      scenario("llama-3.1-8b",
               "  method: lora\n  micro_batch: 4\n  global_batch: 16\n  seq_len: 2048\n  framework: hf-trainer\n",
               "    cluster: {gpu: rtx-4090, gpus: 1}\n");
  const auto& p = s.plans[0];
  REQUIRE_FALSE(footprint::footprint(s.model, p).fits);
  const auto changes = footprint::what_would_fit(s.model, p);
  REQUIRE(!changes.empty());
  CHECK(changes.front().change == "micro-batch 2 (8 accumulation steps) and activation checkpointing full");
  for (const auto& c : changes) {
    INFO(c.change);
    CHECK(footprint::footprint(s.model, c.plan).fits);
    CHECK(plan::check_plan(s.model, c.plan).empty());
    CHECK(c.gpu_peak_bytes <= c.plan.cluster.gpu.usable_memory_bytes);
  }
  CHECK(footprint::what_would_fit(s.model, changes.front().plan).empty());
}

TEST_CASE("each category's own peak: activations at the end of forward, full gradients at the end of backward") {
  /* Llama-3.2-1B full fine-tune on one H100 without checkpointing, DeepSpeed ZeRO 0, one
   * micro-batch: the GPU peaks at the end of forward with every activation saved and no gradient
   * yet; the bf16 gradients of every trainable parameter (2 B each) are live only at the end of
   * backward. Each category's own peak is at least its share at the peak moment, and the
   * gradients' own peak is the whole gradient (memory issue: users compare these with published
   * activation and model-state figures). */
  const auto s = scenario(
      "llama-3.2-1b",
      "  method: full\n  seq_len: 4096\n  micro_batch: 1\n  global_batch: 1\n  activation_checkpointing: none\n"
      "  framework: deepspeed\n",
      "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  const auto& p = s.plans[0];
  const auto f = footprint::footprint(s.model, p);
  CHECK(f.peak_phase == footprint::Phase::forward);
  for (int c = 0; c < inventory::kCategories; ++c) CHECK(f.gpu_category_peaks.bytes[c] >= f.gpu().bytes[c]);
  const auto inv = inventory::build_inventory(s.model, p, 0);
  CHECK(f.gpu()[Category::gradients] < f.gpu_category_peaks[Category::gradients]);
  CHECK(f.gpu_category_peaks[Category::gradients] ==
        doctest::Approx(static_cast<double>(inv.params.trainable) * inv.recipe.grad_B).epsilon(0.02));
  CHECK(f.gpu_category_peaks[Category::activations] == doctest::Approx(f.gpu()[Category::activations]));
}

TEST_CASE("a stage's layers are counted kind by kind: every zoo model's stages add up to the model") {
  /* The inventory measures one layer of each kind (dense or MoE, local or global attention, with
   * or without cross-attention) and counts the stage's layers of that kind. Summed over pp stages
   * (1F1B, and interleaved with 2 model chunks) the rank parameters of a full fine-tune without
   * tensor parallelism are the model's (model::count_params), plus, with pp > 1 and tied
   * embeddings, Megatron's copy of the embedding on the last stage. T5's encoder and decoder
   * layers differ (cross-attention), Mixtral's are all MoE, the others are dense. */
  for (const model::ModelSpec& m : test::zoo().models()) {
    const auto total = static_cast<double>(model::count_params(m).total);
    for (const int pp : {1, 2, 4}) {
      for (const int chunks : {1, 2}) {
        if (m.total_layers() < pp * chunks || (chunks > 1 && pp == 1)) continue;
        plan::Plan p;
        p.parallel.pp = pp;
        if (chunks > 1) {
          p.parallel.schedule = plan::PipelineSchedule::interleaved;
          p.parallel.virtual_stages = chunks;
        }
        double sum = 0;
        for (int stage = 0; stage < pp; ++stage) sum += inventory::build_inventory(m, p, stage).params.total;
        const double tied_copy =
            pp > 1 && m.tied_embeddings && m.has_lm_head() ? static_cast<double>(m.vocab) * m.hidden : 0;
        INFO(m.name, " pp ", pp, " chunks ", chunks, " diff ", sum - total - tied_copy);
        CHECK(sum == doctest::Approx(total + tied_copy).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("Gemma-2's alternating local and global layers each keep their own activations") {
  /* Gemma-2 alternates 4,096-token sliding-window layers (even layers) with global ones. At 8,192
   * tokens with eager attention a local layer keeps scores over 4,096 keys and a global one over
   * 8,192, so the stack's saved activations are the mean of an all-global and an all-local stack
   * of the same depth (the final norm and head are the same in all three). */
  const auto s = scenario("gemma-2-2b", "  seq_len: 8192\n  attention: eager\n  framework: hf-trainer\n",
                          "    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n");
  const auto saved = [&](const model::ModelSpec& m) {
    return group_bytes(inventory::build_inventory(m, s.plans[0]), "saved activations");
  };
  model::ModelSpec global = s.model, local = s.model;
  global.attention.sliding_window = 0;
  local.attention.local_every = 0;
  REQUIRE(s.model.layers % 2 == 0);
  CHECK(saved(local) < saved(global));
  CHECK(saved(s.model) == doctest::Approx((saved(global) + saved(local)) / 2).epsilon(1e-9));
}
