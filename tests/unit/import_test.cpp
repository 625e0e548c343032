// Importing training configs (core/io/import, docs/import.md): the example configs of each
// project (tests/data/import/README.md) translated and read back, key by key.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/import/detail.hpp"
#include "io/import/import.hpp"
#include "plan/checks.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ftplan;
using ftplan::io::ImportOverride;
using plan::Tier;

namespace {

fs::path example(const std::string& rel) { return test::data_dir() / "import" / rel; }

std::vector<ImportOverride> cluster(const std::string& gpus = {}, const std::string& model = {}) {
  std::vector<ImportOverride> o = {{"plan.cluster.gpu", "h100-sxm-80gb", "command line --gpu"}};
  if (!gpus.empty()) o.push_back({"plan.cluster.gpus", gpus, "command line --gpus"});
  if (!model.empty()) o.push_back({"model", model, "command line --model"});
  return o;
}

io::ImportedScenario translate(const std::vector<fs::path>& files, const std::vector<ImportOverride>& o) {
  return io::import_configs(files, o, test::zoo(), &test::catalog());
}

plan::Scenario scenario_of(const std::vector<fs::path>& files, const std::vector<ImportOverride>& o) {
  return io::load_imported(translate(files, o), fs::current_path(), test::zoo(), test::catalog());
}

// The reason given for ignoring `key`, or "" when it is not listed.
std::string reason_for(const io::ImportedScenario& s, const std::string& key) {
  for (const auto& i : s.ignored)
    if (i.key == key) return i.reason;
  return {};
}

fs::path write_scratch(const std::string& name, const std::string& text) {
  const fs::path dir = test::scratch_path("import");
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

}  // namespace

TEST_CASE("DeepSpeed: ZeRO-3 with CPU offload (accelerate's zero_stage3_offload_config.json)") {
  /* stage 3, offload_optimizer and offload_param on cpu with pin_memory, fp16 on, AdamW; the
   * batch keys are "auto", which transformers fills from TrainingArguments' defaults:
   * per_device_train_batch_size 8, gradient_accumulation_steps 1 -> global 8 x 1 x 8 GPUs = 64. */
  const auto files = std::vector<fs::path>{example("deepspeed/zero_stage3_offload_config.json")};
  const plan::Scenario s = scenario_of(files, cluster("8", "llama-3.1-8b"));
  const plan::Plan& p = s.plans.at(0);
  CHECK(p.job.framework == plan::Framework::deepspeed);
  CHECK(p.parallel.zero == 3);
  CHECK(p.offload.params == Tier::cpu);
  CHECK(p.offload.optimizer == Tier::cpu);
  CHECK(p.offload.gradients == Tier::cpu);
  CHECK(p.offload.optimizer_step == Tier::cpu);
  CHECK(p.offload.pinned);
  CHECK(p.job.precision == plan::Precision::fp16_mixed);
  CHECK(p.job.optimizer.kind == plan::OptimizerKind::adamw);
  CHECK(p.job.micro_batch == 8);
  CHECK(plan::global_batch_samples(p) == 64);
  CHECK(p.job.checkpointing == plan::Checkpointing::none);
  const auto t = translate(files, cluster("8", "llama-3.1-8b"));
  CHECK(reason_for(t, "scheduler").find("learning-rate") != std::string::npos);
  CHECK(reason_for(t, "zero_optimization.stage3_prefetch_bucket_size").rfind("not modelled yet", 0) == 0);
  CHECK(reason_for(t, "train_batch_size").rfind("auto", 0) == 0);
  // Every value line names where it came from.
  CHECK(t.yaml.find("micro_batch: 8  # DeepSpeed auto, filled from TrainingArguments: default of transformers") !=
        std::string::npos);
  CHECK(t.yaml.find("zero: 3  # " + files[0].string() + ": zero_optimization.stage 3") != std::string::npos);
}

TEST_CASE("DeepSpeed: the batch triangle gives the micro-batch; legacy cpu_offload") {
  /* DeepSpeed's Megatron_GPT2 test config: train_batch_size 8, gradient_accumulation_steps 1, no
   * micro-batch; on 4 GPUs DeepSpeed sets micro = 8 / (1 x 4) = 2. "cpu_offload": true is the
   * pre-0.3.15 spelling of offload_optimizer cpu. */
  const auto files = std::vector<fs::path>{example("deepspeed/ds_config_func_bs8_zero2_offload.json")};
  const plan::Plan p = scenario_of(files, cluster("4", "llama-3.2-1b")).plans.at(0);
  CHECK(p.job.micro_batch == 2);
  CHECK(plan::global_batch_samples(p) == 8);
  CHECK(p.parallel.zero == 2);
  CHECK(p.offload.optimizer == Tier::cpu);
  CHECK(p.offload.optimizer_step == Tier::cpu);
  CHECK(p.job.precision == plan::Precision::fp16_mixed);
  const auto t = translate(files, cluster("8", "llama-3.2-1b"));
  CHECK(reason_for(t, "activation_checkpointing.partition_activations").rfind("not modelled yet", 0) == 0);
  // Without --gpus the world size comes out of the same triangle only when the micro-batch is known.
  CHECK(test::input_error_of([&] { translate(files, cluster("", "llama-3.2-1b")); }).find("give --gpus N") !=
        std::string::npos);
}

TEST_CASE("DeepSpeed: offload_param.buffer_size counts 16-bit elements, and imports as bytes") {
  /* ZeRO-Infinity's usual offload_param block: buffer_count 5, buffer_size 1e8. DeepSpeed sizes
   * each swap buffer as buffer_size fp16/bf16 elements (partitioned_param_swapper.py), so 1e8 is
   * 200 MB. The importer wrote the bare 1e8, which the scenario reader refused ("a unit is
   * needed"), so every such config failed to import (issue 42). */
  const fs::path f = write_scratch("ds_buffer.json",
                                   R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
  "zero_optimization": {"stage": 3, "max_live_parameters": 1e9, "max_reuse_distance": 1e9,
  "offload_param": {"device": "nvme", "nvme_path": "/nvme",
  "buffer_count": 5, "buffer_size": 1e8, "pin_memory": true}}})");
  const plan::Plan p = scenario_of({f}, cluster("8", "llama-3.2-1b")).plans.at(0);
  CHECK(p.offload.params == Tier::nvme);
  CHECK(p.offload.buffer_count == 5);
  CHECK(p.offload.buffer_bytes == doctest::Approx(2e8));
  /* ZeRO-3's coordinator knobs, under either spelling, are listed with what they do (issue 42:
   * "unknown" before). */
  const auto t = translate({f}, cluster("8", "llama-3.2-1b"));
  CHECK(reason_for(t, "zero_optimization.max_live_parameters").find("prefetching") != std::string::npos);
  CHECK(reason_for(t, "zero_optimization.max_reuse_distance").find("reuse within") != std::string::npos);
}

TEST_CASE("DeepSpeed: train_batch_size that does not match micro x accumulation x world is refused") {
  const fs::path f = write_scratch("bad_triangle.json", R"({
  "train_batch_size": 10,
  "train_micro_batch_size_per_gpu": 1,
  "gradient_accumulation_steps": 1
})");
  const std::string e = test::input_error_of([&] { translate({f}, cluster("8", "llama-3.2-1b")); });
  CHECK(e.find(f.string() + ":2:23: train_batch_size: train_batch_size 10 is not micro-batch 1") != std::string::npos);
}

TEST_CASE("accelerate: a DeepSpeed config file named by the accelerate config is read too") {
  /* accelerate's config_yaml_templates/deepspeed.yaml names ../deepspeed_config_templates/
   * zero_stage1_config.json (stage 1, fp16) and num_processes 2. */
  const auto files = std::vector<fs::path>{example("accelerate/config_yaml_templates/deepspeed.yaml")};
  const auto t = translate(files, cluster("", "llama-3.2-1b"));
  REQUIRE(t.files.size() == 2);
  CHECK(t.formats[1] == io::ConfigFormat::deepspeed);
  const plan::Plan p = io::load_imported(t, fs::current_path(), test::zoo(), test::catalog()).plans.at(0);
  CHECK(p.job.framework == plan::Framework::deepspeed);
  CHECK(p.parallel.zero == 1);
  CHECK(p.cluster.gpus() == 2);
  CHECK(p.job.precision == plan::Precision::fp16_mixed);
  CHECK(reason_for(t, "deepspeed_config.zero3_init_flag").find("model loading") != std::string::npos);
}

TEST_CASE("accelerate: FSDP with CPU offload and no mixed precision (PEFT's fsdp_config_qlora.yaml)") {
  const plan::Plan p =
      scenario_of({example("accelerate/peft_fsdp_config_qlora.yaml")}, cluster("", "llama-3.2-1b")).plans.at(0);
  CHECK(p.job.framework == plan::Framework::pytorch_fsdp);
  CHECK(p.parallel.fsdp == plan::FsdpSharding::full_shard);
  CHECK(p.offload.params == Tier::cpu);
  CHECK(p.offload.gradients == Tier::cpu);
  CHECK(p.offload.optimizer == Tier::cpu);
  CHECK(p.offload.optimizer_step == Tier::cpu);
  CHECK(p.job.precision == plan::Precision::fp32);
  CHECK(p.cluster.gpus() == 2);
  const plan::Plan q =
      scenario_of({example("accelerate/config_yaml_templates/fsdp.yaml")}, cluster("", "llama-3.2-1b")).plans.at(0);
  CHECK(q.job.precision == plan::Precision::bf16_mixed);
  // accelerate reduces in the compute type (param_dtype = reduce_dtype), also for FSDP2.
  CHECK(q.job.fsdp_mixed_precision.param == plan::WireType::half);
  CHECK(q.job.fsdp_mixed_precision.reduce == plan::WireType::half);
  CHECK(q.offload.params == Tier::gpu);
  CHECK(q.job.checkpointing == plan::Checkpointing::none);
}

TEST_CASE("torchtune: Llama 3.1 8B LoRA recipe, key by key") {
  /* 8B_lora.yaml: lora_llama3_1_8b on q_proj, v_proj, output_proj and the MLP, rank 8, alpha 16,
   * batch_size 2, gradient_accumulation_steps 8, dtype bf16 (pure), no checkpointing, chunked
   * loss. On 2 GPUs: global batch 2 x 8 x 2 = 32. */
  const auto files = std::vector<fs::path>{example("torchtune/8B_lora.yaml")};
  const plan::Scenario s = scenario_of(files, cluster("2"));
  const plan::Plan& p = s.plans.at(0);
  CHECK(s.model.name == "llama-3.1-8b");
  CHECK(p.job.framework == plan::Framework::torchtune);
  CHECK(p.job.method == plan::Method::lora);
  CHECK(p.job.lora.rank == 8);
  CHECK(p.job.lora.alpha == doctest::Approx(16));
  CHECK(p.job.lora.targets == std::vector<std::string>{"down", "gate", "o", "q", "up", "v"});
  CHECK(p.job.micro_batch == 2);
  CHECK(plan::global_batch_samples(p) == 32);
  CHECK(p.job.precision == plan::Precision::bf16);
  CHECK(p.job.checkpointing == plan::Checkpointing::none);
  CHECK(p.job.loss.chunks == 8);
  CHECK(p.job.optimizer.implementation == plan::OptimizerImpl::fused);
  const auto t = translate(files, cluster("2"));
  CHECK(reason_for(t, "tokenizer.max_seq_len").find("give --seq") != std::string::npos);
  CHECK(reason_for(t, "checkpointer").find("checkpoint") != std::string::npos);
}

TEST_CASE("torchtune: QLoRA recipe targets attention and MLP") {
  const plan::Plan p = scenario_of({example("torchtune/8B_qlora_single_device.yaml")}, cluster("1")).plans.at(0);
  CHECK(p.job.method == plan::Method::qlora);
  CHECK(p.job.quant.kind == plan::QuantKind::nf4);
  CHECK(p.job.lora.targets == std::vector<std::string>{"down", "gate", "o", "q", "up", "v"});
  CHECK(p.job.checkpointing == plan::Checkpointing::full);
  CHECK(p.job.samples.packing == plan::Packing::padded);
  CHECK(plan::global_batch_samples(p) == 16);
}

TEST_CASE("torchtune: a paged 8-bit optimizer is paged 8-bit AdamW") {
  const fs::path f = write_scratch("paged.yaml", R"(model:
  _component_: torchtune.models.llama3_2.lora_llama3_2_1b
  lora_attn_modules: [q_proj, v_proj]
  lora_rank: 8
batch_size: 4
optimizer:
  _component_: bitsandbytes.optim.PagedAdamW8bit
  lr: 1e-4
enable_activation_offloading: True
dtype: bf16
)");
  const auto t = translate({f}, cluster("1"));
  const plan::Plan p = io::load_imported(t, fs::current_path(), test::zoo(), test::catalog()).plans.at(0);
  CHECK(p.job.optimizer.kind == plan::OptimizerKind::adamw_8bit);
  CHECK(p.offload.activations == Tier::cpu);
  CHECK(p.job.optimizer.paged);
}

TEST_CASE("torchtune: epochs x max_steps_per_epoch past 64 bits is refused at the key, not overflowed") {
  /* Found by fuzz_import_torchtune (fuzz/findings): epochs 8000000001659726644 and
   * max_steps_per_epoch -6 multiplied as long long, signed overflow (UBSan). */
  const fs::path f = write_scratch("steps.yaml", R"(model:
  _component_: torchtune.models.llama3_2.lora_llama3_2_1b
epochs: 8000000001659726644
max_steps_per_epoch: -6
)");
  const std::string e = test::input_error_of([&] { translate({f}, cluster("1")); });
  CHECK(e.find(f.string() + ":4:22: max_steps_per_epoch: ") != std::string::npos);
  CHECK(e.find("is past any step count") != std::string::npos);
  // In range, the product is the step count (the scenario reader checks its sign and size).
  const fs::path g = write_scratch("steps_ok.yaml", R"(model:
  _component_: torchtune.models.llama3_2.lora_llama3_2_1b
epochs: 3
max_steps_per_epoch: 50
)");
  CHECK(translate({g}, cluster("1")).yaml.find("steps: 150") != std::string::npos);
}

TEST_CASE("a key given twice in a YAML or JSON config is refused at its second place") {
  /* The torchtune finding's input (fuzz/findings/import_torchtune-ubsan-steps-overflow.yaml) also
   * gives `epochs` twice; the reader took the first and dropped the second unseen. */
  const fs::path y = write_scratch("twice.yaml", R"(model:
  _component_: torchtune.models.llama3_2.lora_llama3_2_1b
epochs: 3
epochs: 1
)");
  std::string e = test::input_error_of([&] { translate({y}, cluster("1")); });
  CHECK(e.find(y.string() + ":4:1: epochs: appears twice in the same mapping") != std::string::npos);
  const fs::path j = write_scratch("twice.json", R"({
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 2, "stage": 3}
})");
  e = test::input_error_of([&] { translate({j}, cluster("8", "llama-3.2-1b")); });
  CHECK(e.find(j.string() + ":3:37: stage: appears twice in the same mapping") != std::string::npos);
}

TEST_CASE("torchtitan: Llama 3 8B and 70B train configs") {
  /* llama3_8b.toml: local_batch_size 1, seq_len 8192, steps 1000, op-level selective AC,
   * bf16 parameters for compute over fp32 (the defaults), data_parallel_shard_degree -1. */
  const plan::Plan p = scenario_of({example("torchtitan/llama3_8b.toml")}, cluster("8")).plans.at(0);
  CHECK(p.job.framework == plan::Framework::pytorch_fsdp2);
  CHECK(p.job.seq_len == 8192);
  CHECK(p.job.micro_batch == 1);
  CHECK(p.job.steps == 1000);
  CHECK(p.job.checkpointing == plan::Checkpointing::selective);
  CHECK(p.job.precision == plan::Precision::bf16_mixed);
  CHECK(plan::global_batch_samples(p) == 8);
  /* llama3_70b.toml: tensor_parallel_degree 8 (with sequence parallelism), full AC. */
  const plan::Plan q = scenario_of({example("torchtitan/llama3_70b.toml")}, cluster("64")).plans.at(0);
  CHECK(q.parallel.tp == 8);
  CHECK(q.parallel.sequence_parallel);
  CHECK(q.parallel.dp == 8);
  CHECK(q.job.checkpointing == plan::Checkpointing::full);
  CHECK(q.job.micro_batch == 8);
}

TEST_CASE("torchtitan: a bad TOML file is refused at its line and column") {
  const fs::path f = write_scratch("bad.toml", "[training]\nseq_len = = 4\n");
  const std::string e = test::input_error_of([&] { translate({f}, cluster("8")); });
  CHECK(e.find(f.string() + ":2:") != std::string::npos);
  CHECK(e.find("not TOML") != std::string::npos);
}

TEST_CASE("TrainingArguments + accelerate DeepSpeed config + LoRA (PEFT's examples/sft DeepSpeed run)") {
  /* per_device_train_batch_size 8, gradient_accumulation_steps 4 in both files, 8 processes:
   * global 8 x 4 x 8 = 256; ZeRO 3 from the accelerate config; bf16 in both; LoRA r 8 on all
   * linear layers; Llama-2-70b-hf -> llama-2-70b. */
  const auto files = std::vector<fs::path>{example("hf_trainer/run_peft_deepspeed_args.json"),
                                           example("hf_trainer/accelerate_deepspeed_config.yaml")};
  const plan::Scenario s = scenario_of(files, cluster());
  const plan::Plan& p = s.plans.at(0);
  CHECK(s.model.name == "llama-2-70b");
  CHECK(p.job.framework == plan::Framework::deepspeed);
  CHECK(p.parallel.zero == 3);
  CHECK(p.cluster.gpus() == 8);
  CHECK(p.job.micro_batch == 8);
  CHECK(plan::global_batch_samples(p) == 256);
  CHECK(p.job.precision == plan::Precision::bf16_mixed);
  CHECK(p.job.checkpointing == plan::Checkpointing::full);
  CHECK(p.job.method == plan::Method::lora);
  CHECK(p.job.lora.rank == 8);
  CHECK(p.job.lora.targets.size() == 7);
  CHECK(p.job.seq_len == 2048);
  const auto t = translate(files, cluster());
  CHECK(reason_for(t, "num_train_epochs").find("dataset size") != std::string::npos);
}

TEST_CASE("PEFT adapter_config.json: rank, alpha and targets") {
  const plan::Plan p = scenario_of({example("peft/adapter_config.json")}, cluster("1", "llama-3.2-3b")).plans.at(0);
  CHECK(p.job.method == plan::Method::lora);
  CHECK(p.job.lora.rank == 10);
  CHECK(p.job.lora.alpha == doctest::Approx(20));
  CHECK(p.job.lora.targets == std::vector<std::string>{"down", "gate", "up"});
}

TEST_CASE("TrainingArguments optim paged_adamw_32bit and paged_adamw_8bit are paged bitsandbytes optimizers") {
  /* transformers OptimizerNames: paged_adamw_32bit -> bnb PagedAdamW32bit (32-bit AdamW),
   * paged_adamw_8bit -> bnb PagedAdamW8bit; both page their state (job.optimizer.paged). */
  const fs::path a = write_scratch(
      "paged32.json", R"({"per_device_train_batch_size": 1, "optim": "paged_adamw_32bit", "output_dir": "x"})");
  const plan::Plan p32 = scenario_of({a}, cluster("1", "llama-3.2-1b")).plans.at(0);
  CHECK(p32.job.optimizer.kind == plan::OptimizerKind::adamw);
  CHECK(p32.job.optimizer.paged);
  const fs::path b = write_scratch(
      "paged8.json", R"({"per_device_train_batch_size": 1, "optim": "paged_adamw_8bit", "output_dir": "x"})");
  const plan::Plan p8 = scenario_of({b}, cluster("1", "llama-3.2-1b")).plans.at(0);
  CHECK(p8.job.optimizer.kind == plan::OptimizerKind::adamw_8bit);
  CHECK(p8.job.optimizer.paged);
  const fs::path c =
      write_scratch("unpaged8.json", R"({"per_device_train_batch_size": 1, "optim": "adamw_8bit", "output_dir": "x"})");
  CHECK_FALSE(scenario_of({c}, cluster("1", "llama-3.2-1b")).plans.at(0).job.optimizer.paged);
}

TEST_CASE("two files that disagree are both named") {
  const fs::path a = write_scratch("a.json", R"({"per_device_train_batch_size": 4, "output_dir": "x"})");
  const fs::path b = write_scratch("b.json", R"({"train_micro_batch_size_per_gpu": 2})");
  const std::string e = test::input_error_of([&] { translate({a, b}, cluster("8", "llama-3.2-1b")); });
  CHECK(e.find(b.string() +
               ":1:36: train_micro_batch_size_per_gpu: sets job.micro_batch to 2, but per_device_train_batch_size (" +
               a.string() + ":1:33) sets it to 4") != std::string::npos);
}

TEST_CASE("a value the scenario refuses is reported at the config key it came from") {
  /* micro-batch 0: the scenario reader's range check, moved from the generated line to the
   * DeepSpeed file's line 2, column 37. */
  const fs::path f = write_scratch("zero_micro.json", R"({
  "train_micro_batch_size_per_gpu": 0,
  "zero_optimization": {"stage": 2}
})");
  const std::string e = test::input_error_of([&] { scenario_of({f}, cluster("8", "llama-3.2-1b")); });
  CHECK(e.find(f.string() + ":2:37: train_micro_batch_size_per_gpu: ") != std::string::npos);
  CHECK(e.find("(imported as scenario key job.micro_batch)") != std::string::npos);
}

TEST_CASE("an unknown key is listed as ignored, not dropped") {
  const fs::path f = write_scratch("unknown.json", R"({
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimisation": {"stage": 3}
})");
  const auto t = translate({f}, cluster("8", "llama-3.2-1b"));
  CHECK(reason_for(t, "zero_optimisation") == "not a DeepSpeed key ftplan knows");
  CHECK(t.yaml.find("#   " + f.string() + ":3:24 zero_optimisation: not a DeepSpeed key ftplan knows") !=
        std::string::npos);
  // The misspelt block has no effect: ZeRO stays at DeepSpeed's default, 0, said so.
  CHECK(t.yaml.find("zero: 0  # default of DeepSpeed 0.16.5") != std::string::npos);
}

TEST_CASE("files of no known format, scenarios and model configs are refused by name") {
  const fs::path unknown = write_scratch("what.json", R"({"hello": 1})");
  CHECK(test::input_error_of([&] {
          translate({unknown}, cluster("1", "llama-3.2-1b"));
        }).find("not a configuration ftplan imports") != std::string::npos);
  CHECK(test::input_error_of([&] {
          translate({test::data_dir() / "hf/gpt2/config.json"}, cluster("1"));
        }).find("Hugging Face model config.json: give it with --model") != std::string::npos);
  CHECK(io::detect_config_format(example("torchtitan/llama3_8b.toml")) == io::ConfigFormat::torchtitan);
  CHECK(io::detect_config_format(example("peft/adapter_config.json")) == io::ConfigFormat::peft_adapter);
  CHECK(io::detect_config_format(example("accelerate/config_yaml_templates/multi_gpu.yaml")) ==
        io::ConfigFormat::accelerate);
}

TEST_CASE("Hugging Face ids map to zoo entries") {
  CHECK(io::import::zoo_name_for_hf_id("meta-llama/Meta-Llama-3.1-8B-Instruct", test::zoo()) == "llama-3.1-8b");
  CHECK(io::import::zoo_name_for_hf_id("meta-llama/Llama-2-7b-hf", test::zoo()) == "llama-2-7b");
  CHECK(io::import::zoo_name_for_hf_id("mistralai/Mistral-7B-v0.1", test::zoo()) == "mistral-7b");
  CHECK(io::import::zoo_name_for_hf_id("Qwen/Qwen2.5-7B-Instruct", test::zoo()) == "qwen2.5-7b");
  CHECK(io::import::zoo_name_for_hf_id("someone/unknown-13b", test::zoo()).empty());
}

TEST_CASE("TrainingArguments naming a ds_config.json, with a PEFT adapter_config.json: three files, one job") {
  /* TrainingArguments: micro-batch 4, fp16, checkpointing, and the DeepSpeed file (ZeRO-3, CPU
   * offload, fp16 on, gradient_accumulation_steps 1) by path; the adapter: LoRA r 10 on the MLP.
   * Global batch 4 x 1 x 8 GPUs = 32. bf16 or accumulation 2 in TrainingArguments against the
   * DeepSpeed file's fp16 and 1 are refused, as transformers refuses the mismatch. */
  const fs::path ds = example("deepspeed/zero_stage3_offload_config.json");
  const fs::path args = write_scratch("args.json", R"({"output_dir": "out", "per_device_train_batch_size": 4,
 "fp16": true, "gradient_checkpointing": true, "deepspeed": ")" +
                                                       ds.string() + R"("})");
  const auto files = std::vector<fs::path>{args, example("peft/adapter_config.json")};
  const auto t = translate(files, cluster("8", "llama-3.2-3b"));
  REQUIRE(t.files.size() == 3);
  const plan::Plan p = io::load_imported(t, fs::current_path(), test::zoo(), test::catalog()).plans.at(0);
  CHECK(p.job.framework == plan::Framework::deepspeed);
  CHECK(p.job.micro_batch == 4);
  CHECK(plan::global_batch_samples(p) == 32);
  CHECK(p.job.precision == plan::Precision::fp16_mixed);
  CHECK(p.job.checkpointing == plan::Checkpointing::full);
  CHECK(p.parallel.zero == 3);
  CHECK(p.offload.optimizer == Tier::cpu);
  CHECK(p.job.method == plan::Method::lora);
  CHECK(p.job.lora.rank == 10);
  CHECK(p.job.lora.targets == std::vector<std::string>{"down", "gate", "up"});
  const fs::path bf16 =
      write_scratch("args_bf16.json", R"({"output_dir": "out", "bf16": true, "deepspeed": ")" + ds.string() + R"("})");
  CHECK(test::input_error_of([&] { translate({bf16}, cluster("8", "llama-3.2-3b")); }).find("make them agree") !=
        std::string::npos);
}

TEST_CASE("TrainingArguments with fsdp and fsdp_config version 2: FSDP2, reducing in bf16 as accelerate does") {
  const fs::path f =
      write_scratch("fsdp_args.json", R"({"output_dir": "o", "bf16": true, "fsdp": "full_shard auto_wrap",
 "fsdp_config": {"fsdp_version": 2, "activation_checkpointing": true}, "per_device_train_batch_size": 2})");
  const plan::Plan p = scenario_of({f}, cluster("4", "llama-3.2-1b")).plans.at(0);
  CHECK(p.job.framework == plan::Framework::pytorch_fsdp2);
  CHECK(p.parallel.fsdp == plan::FsdpSharding::full_shard);
  CHECK(p.job.checkpointing == plan::Checkpointing::full);
  CHECK(p.job.fsdp_mixed_precision.reduce == plan::WireType::half);  // torchtitan's FSDP2 default would be fp32
  CHECK(plan::global_batch_samples(p) == 8);
}

// Issue 42's findings that no file of the corpus shows alone (tests/unit/import_corpus_test.cpp
// holds the rest): each written as the smallest config that showed it.

TEST_CASE("DeepSpeed's batch triangle in DeepSpeed's order: train_batch_size alone splits over the ranks") {
  // runtime/config.py _set_batch_related_parameters: train_batch_size only -> accumulation 1,
  // micro = train_batch_size / world (64 on 8 GPUs: 8, where ftplan once wrote micro 1, global 8).
  const fs::path only = write_scratch("tb64.json", R"({"train_batch_size": 64, "zero_optimization": {"stage": 2}})");
  const plan::Plan p = scenario_of({only}, cluster("8", "llama-3.2-1b")).plans.at(0);
  CHECK(p.job.micro_batch == 8);
  CHECK(plan::global_batch_samples(p) == 64);
  // 24 with micro 3 on 5 GPUs: accumulation 24 / 3 / 5 = 1, and 3 x 1 x 5 != 24: DeepSpeed asserts.
  const fs::path bad = write_scratch("tb24.json", R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 3})");
  CHECK(test::input_error_of([&] { translate({bad}, cluster("5", "llama-3.2-1b")); }).find("DeepSpeed refuses") !=
        std::string::npos);
}

TEST_CASE("torchtitan: explicit degrees are the world size; --gpus cannot silently differ") {
  const fs::path f = write_scratch("degrees.toml", R"([model]
name = "llama3"
flavor = "8B"
[parallelism]
data_parallel_shard_degree = 4
tensor_parallel_degree = 2
)");
  CHECK(scenario_of({f}, cluster()).plans.at(0).cluster.gpus() == 8);
  CHECK(test::input_error_of([&] { translate({f}, cluster("16")); }).find("torchtitan refuses any other world size") !=
        std::string::npos);
  // With data_parallel_shard_degree left at its default -1 the launcher's count decides.
  const fs::path rest = write_scratch("rest.toml",
                                      "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n"
                                      "tensor_parallel_degree = 2\n");
  CHECK(scenario_of({rest}, cluster("16")).plans.at(0).cluster.gpus() == 16);
}

TEST_CASE("torchtune: HSDP with fsdp_reshard_after_forward False imports as HSDP, the difference listed") {
  const fs::path f = write_scratch("hsdp.yaml", R"(model:
  _component_: torchtune.models.llama3_1.llama3_1_8b
data_parallel_replicate_dim: 2
fsdp_reshard_after_forward: False
batch_size: 2
dtype: bf16
)");
  const auto t = translate({f}, cluster("8"));
  const plan::Plan p = io::load_imported(t, fs::current_path(), test::zoo(), test::catalog()).plans.at(0);
  CHECK(p.parallel.fsdp == plan::FsdpSharding::hybrid_shard);
  CHECK(reason_for(t, "fsdp_reshard_after_forward").find("HSDP that keeps parameters gathered") != std::string::npos);
}

TEST_CASE("PEFT's sft example: lora_target_modules as a list, and the script's defaults where the file is silent") {
  const fs::path f =
      write_scratch("peft_list.json", R"({"output_dir": "o", "model_name_or_path": "meta-llama/Llama-3.2-1B",
 "use_peft_lora": true, "lora_target_modules": ["q_proj", "v_proj"], "bf16": true})");
  const plan::Plan p = scenario_of({f}, cluster("1")).plans.at(0);
  CHECK(p.job.lora.targets == std::vector<std::string>{"q", "v"});
  CHECK(p.job.lora.rank == 64);  // examples/sft/train.py ModelArguments.lora_r
  CHECK(p.job.lora.alpha == doctest::Approx(16));
}

TEST_CASE("accelerate: dynamo_config read key by key; Megatron-LM and other devices refused with their reason") {
  const fs::path d = write_scratch("dynamo.yaml", R"(distributed_type: MULTI_GPU
num_processes: 2
dynamo_config:
  dynamo_backend: INDUCTOR
  dynamo_mode: max-autotune
  dynamo_use_fullgraph: false
)");
  const auto t = translate({d}, cluster({}, "llama-3.2-1b"));
  CHECK(io::load_imported(t, fs::current_path(), test::zoo(), test::catalog()).plans.at(0).job.compile);
  CHECK(reason_for(t, "dynamo_config.dynamo_mode").find("torch.compile options") != std::string::npos);
  const fs::path m = write_scratch("megatron.yaml", "distributed_type: MEGATRON_LM\nnum_processes: 8\n");
  CHECK(test::input_error_of([&] { translate({m}, cluster({}, "llama-3.2-1b")); }).find("--framework megatron") !=
        std::string::npos);
}

TEST_CASE("an empty value is reported at its own key's line, not the next key's") {
  const fs::path f = write_scratch("nulls.yaml",
                                   "distributed_type: MULTI_GPU\nnum_processes: 2\nmain_process_ip:\n"
                                   "gpu_ids: all\n");
  const auto t = translate({f}, cluster({}, "llama-3.2-1b"));
  for (const auto& i : t.ignored)
    if (i.key == "main_process_ip") CHECK(i.where.line == 3);
}

TEST_CASE("--model replaces a model the zoo lacks; --model-config names its config.json") {
  const fs::path f = write_scratch("qwen3.json", R"({"output_dir": "o", "model_name_or_path": "Qwen/Qwen3-8B"})");
  CHECK(test::input_error_of([&] { translate({f}, cluster("1")); }).find("--model-config") != std::string::npos);
  CHECK(scenario_of({f}, cluster("1", "qwen2.5-7b")).model.name == "qwen2.5-7b");
  std::vector<ImportOverride> o = cluster("1");
  o.push_back({"model_config", (test::data_dir() / "hf" / "qwen2.5-7b" / "config.json").string(),
               "command line --model-config"});
  CHECK(scenario_of({f}, o).model.display_name == "Qwen/Qwen3-8B");
}

TEST_CASE("launchers' precision keys: LLaMA-Factory pure_bf16 beside bf16, Axolotl fp8 on a full fine-tune") {
  /* Both were refused or lost: pure_bf16 and the Trainer's bf16 "disagreed", and Axolotl's bf16
   * load dtype turned an fp8 full fine-tune into pure bf16. */
  const fs::path lf = write_scratch("lf_pure.yaml", R"(model_name_or_path: meta-llama/Llama-3.2-1B
stage: sft
finetuning_type: full
pure_bf16: true
bf16: true
per_device_train_batch_size: 1
)");
  CHECK(scenario_of({lf}, cluster("1")).plans.at(0).job.precision == plan::Precision::bf16);
  const fs::path ax = write_scratch("ax_fp8.yaml", R"(base_model: meta-llama/Llama-3.2-1B
micro_batch_size: 1
sequence_len: 1024
fp8: true
)");
  CHECK(scenario_of({ax}, cluster("1")).plans.at(0).job.precision == plan::Precision::fp8_mixed);
  // A null sequence_len is Axolotl's default 512, not ftplan's 2048.
  const fs::path null_len = write_scratch("ax_null.yaml",
                                          "base_model: meta-llama/Llama-3.2-1B\nmicro_batch_size: 1\n"
                                          "sequence_len:\n");
  CHECK(scenario_of({null_len}, cluster("1")).plans.at(0).job.seq_len == 512);
}

TEST_CASE("DeepSpeed's batch assertion after a derived micro-batch names the config key (no dangling entry)") {
  /* train_batch_size 24 with accumulation 3 on 5 ranks: micro = 24 / 5 / 3 = 1, and 1 x 3 x 5 != 24.
   * The error read the train_batch_size entry after the draft had moved it (valgrind). */
  const fs::path f = write_scratch("tb24gas3.json", R"({"train_batch_size": 24, "gradient_accumulation_steps": 3})");
  const std::string e = test::input_error_of([&] { translate({f}, cluster("5", "llama-3.2-1b")); });
  CHECK(e.find("train_batch_size: train_batch_size 24 is not micro-batch 1 x gradient_accumulation_steps 3") !=
        std::string::npos);
}

TEST_CASE("replication agrees with FSDP2's reshard_after_forward true, not with an FSDP1 FULL_SHARD elsewhere") {
  /* HSDP is fully_shard with resharding over a 2-D mesh: replication and reshard_after_forward true
   * say one plan. An FSDP1 strategy FULL_SHARD in one file and hybrid_shard in another disagree: both
   * places named (a merge once made them HSDP silently). */
  const fs::path hsdp = write_scratch("hsdp_fsdp2.yaml", R"(distributed_type: FSDP
num_processes: 8
mixed_precision: bf16
fsdp_config:
  fsdp_version: 2
  fsdp_reshard_after_forward: true
parallelism_config:
  parallelism_config_dp_replicate_size: 2
  parallelism_config_dp_shard_size: 4
)");
  CHECK(scenario_of({hsdp}, cluster({}, "llama-3.2-1b")).plans.at(0).parallel.fsdp == plan::FsdpSharding::hybrid_shard);
  const fs::path full = write_scratch("fsdp1_full.yaml", R"(distributed_type: FSDP
num_processes: 8
fsdp_config:
  fsdp_sharding_strategy: FULL_SHARD
)");
  const fs::path args = write_scratch("args_hybrid.json", R"({"output_dir": "o", "fsdp": "hybrid_shard auto_wrap"})");
  CHECK(test::input_error_of([&] {
          translate({full, args}, cluster({}, "llama-3.2-1b"));
        }).find("make them agree") != std::string::npos);
}
