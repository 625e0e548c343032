#include <doctest/doctest.h>

#include <string>

#include "inventory/inventory.hpp"
#include "io/scenario_io.hpp"
#include "plan/checks.hpp"
#include "plan/framework.hpp"
#include "test_support.hpp"

using namespace ftplan;

namespace {

plan::Scenario parse(const std::string& text) {
  return io::parse_scenario(text, "x.yaml", test::data_dir(), test::zoo(), test::catalog());
}

std::string error_of(const std::string& text) {
  return test::input_error_of([&] { parse(text); });
}

// A valid scenario; tests edit one thing at a time.
const std::string kGood = R"(schema_version: 1
name: good
model: llama-3.1-8b
job:
  method: lora
  lora: {rank: 16, targets: all-linear}
  seq_len: 4096
  micro_batch: 2
  global_batch: 64
  tokens: 500M
plans:
  - name: eight
    cluster: {gpu: h100-sxm-80gb, gpus: 8}
    parallel:
      tp: 2
      zero: 3
  - name: one
    cluster: {gpu: rtx-4090, gpus: 1}
    job: {micro_batch: 1, activation_checkpointing: full}
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a valid scenario loads with its plans resolved") {
  const auto s = parse(kGood);
  CHECK(s.name == "good");
  CHECK(s.model.name == "llama-3.1-8b");
  REQUIRE(s.plans.size() == 2);
  const auto& a = s.plans[0];
  CHECK(a.cluster.gpus() == 8);
  CHECK(a.cluster.gpu.name == "h100-sxm-80gb");
  CHECK(a.parallel.dp == 4);                     // 8 GPUs / tp 2
  CHECK(plan::grad_accumulation_steps(a) == 8);  // 64 / (2 x 4)
  CHECK(a.job.lora.targets.size() == 7);         // all-linear on a gated MLP
  const auto& b = s.plans[1];
  CHECK(b.job.micro_batch == 1);  // plan override
  CHECK(b.job.checkpointing == plan::Checkpointing::full);
  CHECK(b.job.seq_len == 4096);  // inherited
  CHECK(plan::grad_accumulation_steps(b) == 64);
}

TEST_CASE("parallel degree that does not divide the heads: file, line, column, key, reason") {
  const std::string msg = error_of(replace(kGood, "tp: 2", "tp: 3"));
  CHECK(msg ==
        "x.yaml:15:11: plans[0].parallel.tp: 3 does not divide 32 attention heads of llama-3.1-8b\n"
        "x.yaml:15:7: plans[0].parallel: tp 3 x pp 1 x cp 1 = 3 does not divide the plan's 8 GPUs");
}

TEST_CASE("unknown keys are errors with a did-you-mean") {
  const std::string msg = error_of(replace(kGood, "    parallel:", "    parralel:"));
  CHECK(msg.find("x.yaml:14:5: plans[0].parralel: unknown key (did you mean 'parallel'?)") == 0);
  const std::string job = error_of(replace(kGood, "seq_len: 4096", "seqlen: 4096"));
  CHECK(job.find("x.yaml:7:3: job.seqlen: unknown key (did you mean 'seq_len'?)") == 0);
}

TEST_CASE("unknown names from the zoo and catalog get a did-you-mean") {
  CHECK(error_of(replace(kGood, "model: llama-3.1-8b", "model: llama-3.1-8c")) ==
        "x.yaml:3:8: model: no model 'llama-3.1-8c' in the zoo (did you mean 'llama-3.1-8b'?); `ftplan zoo list` shows "
        "them");
  const std::string gpu = error_of(replace(kGood, "gpu: h100-sxm-80gb", "gpu: h100-sxm-80"));
  CHECK(
      gpu.find(
          "x.yaml:13:20: plans[0].cluster.gpu: no GPU 'h100-sxm-80' in the catalog (did you mean 'h100-sxm-80gb'?)") ==
      0);
  // The name people say is a token of the catalog's: every GPU that holds it is offered.
  const std::string h100 = error_of(replace(kGood, "gpu: h100-sxm-80gb", "gpu: h100"));
  CHECK(h100.find("x.yaml:13:20: plans[0].cluster.gpu: no GPU 'h100' in the catalog (did you mean 'h100-96gb-500w', "
                  "'h100-pcie-80gb' or 'h100-sxm-80gb'?)") == 0);
  const std::string rtx = error_of(replace(kGood, "gpu: rtx-4090", "gpu: 4090"));
  CHECK(rtx.find("plans[1].cluster.gpu: no GPU '4090' in the catalog (did you mean 'rtx-4090'?)") != std::string::npos);
  const std::string a100 = error_of(replace(kGood, "gpu: rtx-4090", "gpu: A100-80GB"));
  CHECK(a100.find("(did you mean 'a100-pcie-80gb' or 'a100-sxm4-80gb'?)") != std::string::npos);
}

TEST_CASE("numbers out of range and wrong types") {
  CHECK(error_of(replace(kGood, "micro_batch: 2", "micro_batch: -2")) ==
        "x.yaml:8:16: job.micro_batch: must be between 1 and 1000000; got -2");
  CHECK(error_of(replace(kGood, "micro_batch: 2", "micro_batch: two")) ==
        "x.yaml:8:16: job.micro_batch: expected a whole number; got 'two'");
  CHECK(error_of(replace(kGood, "seq_len: 4096", "seq_len: 4096.5")) ==
        "x.yaml:7:12: job.seq_len: expected a whole number; got '4096.5'");
  CHECK(error_of(replace(kGood, "method: lora", "method: lora2")) ==
        "x.yaml:5:11: job.method: 'lora2' is not one of full, lora, qlora (did you mean 'lora'?)");
  CHECK(error_of(replace(kGood, "cluster: {gpu: rtx-4090, gpus: 1}",
                         "cluster: {gpu: rtx-4090, gpus: 1, dram: 64 GB RAM}")) ==
        "x.yaml:18:45: plans[1].cluster.dram: expected a size like '80 GiB' or '141 GB'; got '64 GB RAM': unknown unit "
        "'GB RAM'; use one of B, KB, kB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB");
}

TEST_CASE("impossible combinations") {
  // Global batch that does not split into micro-batches x data-parallel ranks.
  CHECK(error_of(replace(kGood, "global_batch: 64", "global_batch: 60")) ==
        "x.yaml:9:17: job.global_batch: 60 samples do not split into micro_batch 2 x dp 4 = 8 per accumulation step "
        "(plan 'eight')");
  // ZeRO-3 across pipeline stages: DeepSpeed's PipelineEngine refuses it, with its own words; FSDP
  // runs inside each stage (torchtitan), so the same plan under FSDP passes.
  CHECK(
      error_of(replace(replace(kGood, "tp: 2", "pp: 2"), "method: lora\n", "method: lora\n  framework: deepspeed\n")) ==
      "x.yaml:17:13: plans[0].parallel.zero: DeepSpeed's PipelineEngine: \"ZeRO-2 and ZeRO-3 are incompatible with "
      "pipeline parallelism\" (pp 2); use zero 0 or 1, or FSDP inside each stage (job.framework: pytorch-fsdp2, as "
      "torchtitan)");
  CHECK_NOTHROW(
      parse(replace(replace(kGood, "tp: 2", "pp: 2"), "method: lora\n", "method: lora\n  framework: pytorch-fsdp2\n")));
  // torchtune has no pipeline stages (its ParallelDims: dp_replicate x dp_shard x tp).
  CHECK(error_of(replace(replace(kGood, "tp: 2", "pp: 2"), "method: lora\n", "method: lora\n  framework: torchtune\n"))
            .find("plans[0].parallel.pp: torchtune's recipes have no pipeline parallelism") != std::string::npos);
  // bf16 on a GPU without it.
  const std::string v100 = error_of(replace(kGood, "gpu: rtx-4090", "gpu: v100-sxm2-32gb"));
  CHECK(v100.find("job.precision: NVIDIA Tesla V100") != std::string::npos);
  CHECK(v100.find("has no bf16 support; use fp16-mixed or fp32 (plan 'one')") != std::string::npos);
  // Sequence longer than learned position embeddings allow (RoPE models may extend).
  const std::string learned = replace(replace(kGood, "model: llama-3.1-8b", "model: megatron-gpt-1.7b"),
                                      "  lora: {rank: 16, targets: all-linear}\n", "");
  CHECK(error_of(replace(learned, "seq_len: 4096", "seq_len: 8192"))
            .find("job.seq_len: 8192 is longer than the 2048 positions megatron-gpt-1.7b has learned embeddings for") !=
        std::string::npos);
  // LoRA settings on a full fine-tune.
  CHECK(error_of(replace(kGood, "method: lora", "method: full")) ==
        "x.yaml:6:9: job.lora: is set, but job.method is full; use method: lora or qlora");
  // End stages that leave the middle ones no layers.
  const std::string uneven =
      error_of(replace(replace(kGood, "      tp: 2\n", "      tp: 2\n      pp: 2\n      first_stage_layers: 32\n"),
                       "zero: 3", "zero: 1"));
  CHECK(uneven.find(
            "plans[0].parallel.first_stage_layers: first 32 + last 0 leave 0 of the 32 layers for 1 middle stage(s)") !=
        std::string::npos);
  // DeepSpeed's fetch mode on another framework.
  CHECK(error_of(replace(kGood, "  tokens: 500M\n", "  tokens: 500M\n  zero3_fetch: per-parameter\n")) ==
        "x.yaml:11:16: job.zero3_fetch: describes DeepSpeed ZeRO-3's parameter fetch; set framework: deepspeed");
  // FSDP's mixed-precision policy: torch's type names, the job's own 16-bit type, FSDP only.
  CHECK(error_of(replace(kGood, "  tokens: 500M\n", "  tokens: 500M\n  fsdp_mixed_precision: {param_dtype: fp16}\n")) ==
        "x.yaml:11:39: job.fsdp_mixed_precision.param_dtype: 'fp16' is not one of bf16, fp32");
  CHECK(error_of(replace(kGood, "  tokens: 500M\n",
                         "  tokens: 500M\n  framework: deepspeed\n  fsdp_mixed_precision: {param_dtype: fp32}\n")) ==
        "x.yaml:12:25: job.fsdp_mixed_precision: is FSDP's mixed-precision policy; this plan runs deepspeed (use "
        "pytorch-fsdp, pytorch-fsdp2 or torchtune) (plan 'eight')\n"
        "x.yaml:12:25: job.fsdp_mixed_precision: is FSDP's mixed-precision policy; this plan runs deepspeed (use "
        "pytorch-fsdp, pytorch-fsdp2 or torchtune) (plan 'one')");
  CHECK(error_of(replace(kGood, "  tokens: 500M\n",
                         "  tokens: 500M\n  fsdp_mixed_precision: {param_dtype: fp32, reduce_dtype: bf16}\n"))
            .empty());
  // Which layers to checkpoint, on a plan that does not checkpoint (plan 'one' does: no error).
  CHECK(error_of(replace(kGood, "  tokens: 500M\n", "  tokens: 500M\n  checkpoint_every: 2\n")) ==
        "x.yaml:11:21: job.checkpoint_every: picks the layers full checkpointing recomputes; this plan's checkpointing "
        "is "
        "none (plan 'eight')");
  // Two plans with one name.
  CHECK(error_of(replace(kGood, "name: one", "name: eight")) ==
        "x.yaml:17:11: plans[1].name: another plan is already named 'eight'");
  // Two names that become one file name part: a trace or a validate state file would be shared.
  CHECK(
      error_of(replace(replace(kGood, "name: one", "name: one plan"), "name: eight", "name: one-plan")) ==
      "x.yaml:17:11: plans[1].name: 'one plan' and the plan 'one-plan' (x.yaml:12:11) become one file name part, "
      "'one_plan' (every character but letters and digits is '_' in trace, step IR and state file names): rename one");
  // More GPUs per node than the node has.
  CHECK(error_of(replace(kGood, "gpus: 8}", "gpus: 32, gpus_per_node: 16}")) ==
        "x.yaml:13:60: plans[0].cluster.gpus_per_node: 16 is more than the 8 GPUs of a dgx-h100 node");
}

TEST_CASE("a sequence longer than the model's context is an error naming its limit") {
  /* Llama-3.1-8B's config.json: max_position_embeddings 131072 (RoPE, llama3 scaling). A job at
   * 200000 tokens is refused where it is written, in the scenario's job or in a plan's own job;
   * exactly 131072 is accepted, and so is a longer one when the scenario raises max_context (RoPE
   * scaling for a long-context fine-tune). */
  CHECK(error_of(replace(kGood, "seq_len: 4096", "seq_len: 200000")) ==
        "x.yaml:7:12: job.seq_len: 200000 is longer than llama-3.1-8b's context of 131072 tokens (its max_context); "
        "to train past it, write model: {zoo: llama-3.1-8b, max_context: 200000} (or "
        "max_context beside hf_config)");
  CHECK(error_of(replace(replace(kGood, "seq_len: 4096", "seq_len: 200000"), "model: llama-3.1-8b",
                         "model: {zoo: llama-3.1-8b, max_context: 200000}"))
            .empty());
  CHECK(error_of(replace(kGood, "seq_len: 4096", "seq_len: 131072")).find("seq_len") == std::string::npos);
  CHECK(error_of(replace(kGood, "job: {micro_batch: 1,", "job: {seq_len: 131073, micro_batch: 1,")) ==
        "x.yaml:19:20: plans[1].job.seq_len: 131073 is longer than llama-3.1-8b's context of 131072 tokens (its "
        "max_context); to train past it, write model: {zoo: llama-3.1-8b, max_context: "
        "131073} (or max_context beside hf_config)");
  // ALiBi: MPT's own forward refuses input past max_seq_len (2048 for MPT-7B).
  CHECK(error_of(replace(kGood, "model: llama-3.1-8b", "model: mpt-7b"))
            .find("x.yaml:7:12: job.seq_len: 4096 is longer than mpt-7b's context of 2048 tokens") == 0);
  // T5's bucketed relative positions record no limit: any length is accepted.
  const std::string t5 =
      replace(replace(kGood, "model: llama-3.1-8b", "model: t0-3b"), "seq_len: 4096", "seq_len: 200000");
  CHECK(error_of(t5).find("seq_len") == std::string::npos);
}

TEST_CASE("all problems in a file are reported at once") {
  std::string text = replace(kGood, "tp: 2", "tp: 3");
  text = replace(text, "micro_batch: 2", "micro_batch: 0");
  text = replace(text, "    parallel:", "    paralel_x: 1\n    parallel:");
  const std::string msg = error_of(text);
  CHECK(msg.find("job.micro_batch: must be between 1 and 1000000; got 0") != std::string::npos);
  CHECK(msg.find("plans[0].paralel_x: unknown key") != std::string::npos);
  CHECK(msg.find("plans[0].parallel.tp: 3 does not divide") != std::string::npos);
}

TEST_CASE("missing required keys say what is needed") {
  CHECK(error_of("schema_version: 1\nmodel: llama-3.1-8b\n") ==
        "x.yaml:1:1: job: is required: what to train: seq_len, micro_batch, tokens or steps, method, ...\n"
        "x.yaml:1:1: plans: is required: a list of plans to compare");
  CHECK(error_of(replace(kGood, "  tokens: 500M\n", "")) ==
        "x.yaml:5:3: job.tokens: say how much to train: one of tokens, steps, or epochs (with dataset_tokens)");
  CHECK(error_of(replace(kGood, "schema_version: 1\n", ""))
            .find("schema_version: is required: the scenario-format version; this ftplan reads 1") !=
        std::string::npos);
  CHECK(error_of(replace(kGood, "schema_version: 1", "schema_version: 7")) ==
        "x.yaml:1:17: schema_version: 7 is newer than this ftplan reads (1); update ftplan");
}

TEST_CASE("files that are not scenarios: empty, binary, broken YAML, wrong shapes") {
  CHECK(error_of("") == "x.yaml: the file is empty");
  CHECK(error_of("   \n\n") == "x.yaml: the file is empty");
  CHECK(error_of(std::string("abc\0def", 7)) == "x.yaml:1:4: this is a binary file, not YAML text (NUL byte)");
  CHECK(error_of("\xff\xfe garbage") == "x.yaml:1:1: the file is not UTF-8 text");
  CHECK(error_of("schema_version: 1\nplans: [\n").find("x.yaml:") == 0);
  CHECK(error_of("- just\n- a list\n") == "x.yaml:1:1: expected a mapping of keys; got a list");
  CHECK(error_of(replace(kGood, "plans:\n", "plans: 3\nxplans:\n"))
            .find("x.yaml:11:8: plans: expected a list; got '3'") != std::string::npos);
  CHECK(error_of("a: 1\n---\nb: 2\n").find("more than one YAML document") != std::string::npos);
  // yaml-cpp 0.7 never returned from a stray ',' after a flow mapping (it filled memory); libyaml
  // refuses it at the ','.
  CHECK(error_of("{ }, b") == "x.yaml:1:4: YAML syntax error: did not find expected <document start>");
  // Deep nesting is refused by the parser's depth guard instead of overflowing the stack.
  const std::string deep = "schema_version: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  CHECK(error_of(deep).find("x.yaml:") == 0);
  // ... and by a pre-scan before yaml-cpp tokenizes it: 8 MB of '[' took 50 s and 1.9 GB before
  // its syntax error; now the 257th '[' is the place.
  CHECK(error_of(std::string(8'000'000, '[')) ==
        "x.yaml:1:257: lists or mappings nested more than 256 deep ('[' or '{'); no input needs that");
  // Every bracket counts, in strings and comments too: a quote or a '#' cannot hide nesting from
  // the pre-scan (a block scalar line starting with '"' once hid 4 MB of '[' after it).
  CHECK(error_of("a: |\n  \"\nb: " + std::string(300, '[') + "\n").find("nested more than 256") != std::string::npos);
  CHECK(error_of("a: \"x #\" " + std::string(300, '[') + "\n").find("nested more than 256") != std::string::npos);
  // Block nesting is bounded the same way, by the parse: line k holds "a:" at column k + 1, so the
  // 257th mapping opens at line 257, column 257.
  std::string block;
  for (int i = 0; i < 300; ++i) block += std::string(static_cast<std::size_t>(i), ' ') + "a:\n";
  CHECK(error_of(block) == "x.yaml:257:257: lists or mappings nested more than 256 deep; no input needs that");
  // An alias to no anchor before it is a syntax error at the alias.
  CHECK(error_of("a: 1\nb: *c\n") == "x.yaml:2:4: YAML syntax error: an alias (*c) to no anchor (&c) before it");
  // Balanced brackets in text, however many, are not nesting.
  std::string pairs;
  for (int i = 0; i < 1000; ++i) pairs += "[x] ";
  CHECK(error_of("description: '" + pairs + "'\n").find("nested more than") == std::string::npos);
}

TEST_CASE("files that cannot be read: missing, a directory, too large") {
  const auto load = [](const std::filesystem::path& p) {
    return test::input_error_of([&] { io::load_scenario(p, test::zoo(), test::catalog()); });
  };
  CHECK(load("/nonexistent/x.yaml") == "/nonexistent/x.yaml: no such file");
  CHECK(load(test::data_dir()) == test::data_dir().string() + ": is a directory, not a file");
  const auto big = test::scratch_path("big_scenario.yaml");
  {
    std::FILE* f = std::fopen(big.string().c_str(), "wb");
    REQUIRE(f);
    std::fseek(f, 17 << 20, SEEK_SET);  // sparse: 17 MiB without writing them
    std::fputc('\n', f);
    std::fclose(f);
  }
  CHECK(load(big).find("input files are limited to 16 MiB") != std::string::npos);
  std::filesystem::remove(big);
}

TEST_CASE("every shipped scenario loads") {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::zoo_dir().parent_path() / "scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    if (e.path().filename().string().rfind("sweep-", 0) == 0) continue;  // sweeps (sweep_test.cpp)
    CAPTURE(e.path().string());
    const auto s = io::load_scenario(e.path(), test::zoo(), test::catalog());
    CHECK((!s.plans.empty() || s.has_search));
    ++n;
  }
  CHECK(n >= 3);
}

TEST_CASE("keys a framework would not act on are refused with what to write instead") {
  /* Each of these used to be accepted and computed as something else: HF Trainer with ZeRO 3 as
   * plain DDP; ZeRO-Offload under FSDP with the fp32 weights left on the GPU; Megatron's ZeRO 2 as
   * its distributed optimizer (ZeRO 1); FSDP's full_shard with zero 1 as ZeRO 3. */
  const auto plan_with = [&](const std::string& job, const std::string& parallel, const std::string& offload = "") {
    return error_of("schema_version: 1\nmodel: llama-3.1-8b\njob: {steps: 1, " + job +
                    "}\nplans:\n  - name: p\n"
                    "    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    parallel: " +
                    parallel + "\n" + offload);
  };
  CHECK(plan_with("framework: hf-trainer", "{zero: 3}").find("write job.framework: deepspeed") != std::string::npos);
  CHECK(plan_with("framework: pytorch-fsdp", "{zero: 2}", "    offload: {preset: zero-offload}\n")
            .find("zero-offload is DeepSpeed's: write job.framework: deepspeed") != std::string::npos);
  CHECK(plan_with("framework: megatron", "{zero: 2}").find("distributed optimizer shards the optimizer state only") !=
        std::string::npos);
  CHECK(plan_with("framework: pytorch-fsdp", "{zero: 1}").find("shards by parallel.fsdp (full_shard = ZeRO 3)") !=
        std::string::npos);
  // zero: 0 under the default framework (FSDP) used to run full_shard silently (issue 41).
  CHECK(plan_with("steps: 1", "{zero: 0}")
            .find("shards by parallel.fsdp (full_shard = ZeRO 3); for ZeRO 0 write fsdp: "
                  "no_shard") != std::string::npos);
  CHECK(plan_with("framework: pytorch-fsdp", "{zero: 0, fsdp: no_shard}").empty());
  CHECK(plan_with("framework: hf-trainer", "{fsdp: full_shard}").find("Trainer --fsdp") != std::string::npos);
  CHECK(plan_with("framework: deepspeed, optimizer: {name: adamw-8bit, implementation: foreach}", "{zero: 1}")
            .find("one fused implementation") != std::string::npos);
  // What the frameworks do accept still loads.
  CHECK(plan_with("framework: pytorch-fsdp", "{zero: 3, fsdp: full_shard}").empty());
  CHECK(plan_with("framework: pytorch-fsdp", "{zero: 2, fsdp: shard_grad_op}").empty());
  CHECK(plan_with("framework: deepspeed", "{zero: 2}", "    offload: {preset: zero-offload}\n").empty());
  CHECK(plan_with("framework: megatron", "{zero: 1}").empty());
}

TEST_CASE("a key that applies to nothing in its plan is refused, not taken and ignored") {
  /* Issue 41: each of these loaded, and the plan's answer was what it was without it. */
  const auto with = [&](const std::string& cluster, const std::string& rest, const std::string& top = "") {
    return error_of("schema_version: 1\nmodel: llama-3.1-8b\njob: {steps: 1, framework: deepspeed}\n" + top +
                    "plans:\n  - name: p\n    cluster: " + cluster + "\n" + rest);
  };
  const std::string h100 = "{gpu: h100-sxm-80gb, gpus: 8}";
  // The offload engines' tuning keys without the placement they tune.
  CHECK(with(h100, "    parallel: {zero: 3}\n    offload: {buffer_count: 8}\n")
            .find("x.yaml:8:29: plans[0].offload.buffer_count: counts the parameter swap buffers of offload.params: "
                  "nvme") == 0);
  CHECK(with(h100, "    parallel: {zero: 3}\n    offload: {params: cpu, buffer_size: 2 GiB}\n")
            .find("offload.buffer_size: sizes the parameter swap buffers of offload.params: nvme (DeepSpeed "
                  "offload_param.buffer_size); this plan keeps parameters on cpu") != std::string::npos);
  CHECK(with(h100, "    parallel: {zero: 3}\n    offload: {chunk_size: 64 MiB}\n").find("offload.chunk_size") !=
        std::string::npos);
  CHECK(
      with(h100, "    parallel: {zero: 3}\n    offload: {pinned: false}\n")
          .find("offload.pinned: page-locks the host buffers offloaded state crosses PCIe through; this plan offloads "
                "nothing") != std::string::npos);
  CHECK(with(h100, "    parallel: {zero: 3}\n    offload: {params: cpu, optimizer: cpu, pinned: false}\n").empty());
  // A pipeline schedule without a pipeline.
  CHECK(with(h100, "    parallel: {zero: 1, schedule: gpipe}\n")
            .find("parallel.schedule: orders a pipeline's "
                  "micro-batches (gpipe); needs pp > 1") != std::string::npos);
  CHECK(with(h100, "    parallel: {zero: 1, pp: 2, schedule: gpipe}\n").empty());
  // NVLink on a GPU that has none ran over PCIe.
  CHECK(
      with("{parts: {gpu: rtx-6000-ada, gpus: 4, host: xeon-w5-3435x-1s, gpu_interconnect: nvlink}}", "")
          .find(
              "cluster.parts.gpu_interconnect: nvlink: NVIDIA RTX 6000 Ada Generation 48GB has no nvlink bandwidth") !=
      std::string::npos);
  // The cost keys of the other way of paying: in a plan's block, or in the scenario's when no plan
  // pays that way; a scenario's key some plan uses is fine (rented billing beside an owned plan).
  CHECK(with(h100, "", "cost: {lifetime_years: 3}\n")
            .find("x.yaml:4:24: cost.lifetime_years: prices owned hardware "
                  "(cost.mode: own), and the plan is rented") == 0);
  CHECK(with(h100, "", "cost: {mode: own, billing: per-hour}\n").find("cost.billing: prices rented hardware") !=
        std::string::npos);
  CHECK(with(h100, "    cost: {mode: own, rent: $10/h}\n")
            .find("plans[0].cost.rent: prices rented hardware (cost.mode: "
                  "rent), and this plan is owned") != std::string::npos);
  CHECK(with(h100, "    cost: {energy_price: $0.2/kWh}\n").find("plans[0].cost.energy_price") != std::string::npos);
  CHECK(with(h100, "    cost: {mode: own}\n  - name: q\n    cluster: " + h100 + "\n",
             "cost: {billing: per-hour, utilization: 0.5}\n")
            .empty());
  CHECK(with(h100, "", "cost: {mode: own, energy_price: $0.2/kWh, pue: 1.2}\n").empty());
  // Sample-length keys of another distribution than the one given.
  const auto samples = [&](const std::string& s) {
    return error_of("schema_version: 1\nmodel: llama-3.1-8b\njob: {steps: 1, samples: {packing: padded, " + s +
                    "}}\nplans:\n  - name: p\n    cluster: " + h100 + "\n");
  };
  CHECK(samples("std: 100").find("job.samples.std: is the spread of normal or lognormal lengths") != std::string::npos);
  CHECK(samples("distribution: uniform, mean: 900").find("job.samples.mean: uniform lengths span [min, max]") !=
        std::string::npos);
  CHECK(samples("min: 100").find("job.samples.min: bounds lengths that vary") != std::string::npos);
  CHECK(samples("distribution: normal, mean: 900, std: 100, min: 100, max: 2000").empty());
  CHECK(samples("distribution: uniform, min: 100, max: 2000").empty());
}

TEST_CASE("one sharding label for a plan, from the rule the inventory applies") {
  const auto s = parse(
      "schema_version: 1\nmodel: llama-3.1-8b\njob: {steps: 1}\nplans:\n"
      "  - name: one\n    cluster: {gpu: h100-sxm-80gb, gpus: 1}\n"
      "  - name: eight\n    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n"
      "  - name: ddp\n    cluster: {gpu: h100-sxm-80gb, gpus: 8}\n    job: {framework: hf-trainer}\n");
  CHECK(plan::sharding_in_effect(s.plans[0]).label == "FSDP full_shard (1 rank: NO_SHARD)");
  CHECK(plan::sharding_in_effect(s.plans[0]).zero == inventory::build_inventory(s.model, s.plans[0]).zero);
  CHECK(plan::sharding_in_effect(s.plans[1]).label == "FSDP full_shard");
  CHECK(inventory::build_inventory(s.model, s.plans[1]).zero == 3);
  CHECK(plan::sharding_in_effect(s.plans[2]).label == "DDP (ZeRO 0)");
}

TEST_CASE("a plan's job finding in a scenario without a job block is located, not a yaml-cpp exception") {
  /* Found by fuzz_scenario (issue 22): the plan's own job block sends its findings to the
   * scenario's job block, which is absent here; yaml-cpp threw InvalidNode (the fuzzer's abort,
   * the CLI's unlocated "invalid node; first invalid key: "job""). Expectations: both problems,
   * the missing block at the top, the finding at the plan (line 4).                             */
  const std::string e = error_of(R"(schema_version: 1
model: llama-3.1-70b
plans:
  - name: B
    cluster: {node: workstation-4x-rtx-6000-ada, nodes: 1}
    parallel: {zero: 3}
    job: {framework: deepspeed}
)");
  CHECK(e.find("x.yaml:1:1: job: is required") != std::string::npos);
  CHECK(e.find("x.yaml:4:") != std::string::npos);
  CHECK(e.find("(plan 'B')") != std::string::npos);
}

// One table per enum (common/enum_names.hpp): every name the table has is what the reader takes
// for its value, and a name it lacks is refused with the table's names, in order. Red if a reader
// keeps a list of its own that drifts from the table.
template <class E, class Read>
void check_names_read(const std::string& where, const std::string& line, Read read) {
  const auto with = [&](const std::string& name) {
    std::string l = line;
    return replace(kGood, where, where + replace(l, "NAME", name));
  };
  for (const std::string& name : names_of<E>()) {
    CAPTURE(name);
    CHECK(name_of(read(parse(with(name)))) == name);
  }
  const std::string e = error_of(with("bogus"));
  CHECK(e.find(std::string("is not one of ") + names_joined<E>()) != std::string::npos);
}

TEST_CASE("each enum's names are read from its one table") {
  const std::string job = "  tokens: 500M\n";
  check_names_read<plan::Precision>(job, "  precision: NAME\n",
                                    [](const plan::Scenario& s) { return s.plans[0].job.precision; });
  check_names_read<plan::AttentionImpl>(job, "  attention: NAME\n",
                                        [](const plan::Scenario& s) { return s.plans[0].job.attention; });
  check_names_read<plan::OptimizerKind>(job, "  optimizer: NAME\n",
                                        [](const plan::Scenario& s) { return s.plans[0].job.optimizer.kind; });
  check_names_read<plan::Checkpointing>(job, "  activation_checkpointing: NAME\n",
                                        [](const plan::Scenario& s) { return s.plans[0].job.checkpointing; });
  check_names_read<plan::FsdpSharding>("    cluster: {gpu: rtx-4090, gpus: 1}\n", "    parallel: {fsdp: NAME}\n",
                                       [](const plan::Scenario& s) { return s.plans[1].parallel.fsdp; });
}
