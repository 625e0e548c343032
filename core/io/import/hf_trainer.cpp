// Hugging Face TrainingArguments as JSON (HfArgumentParser.parse_json_file reads the same keys the
// command line takes) and PEFT adapter_config.json. Keys and defaults: transformers
// (huggingface/transformers fd798335) src/transformers/training_args.py; PEFT 0.17
// (huggingface/peft 5d602fdb) src/peft/tuners/lora/config.py and src/peft/utils/constants.py.
#include <fmt/format.h>

#include "io/import/detail.hpp"

namespace ftplan::io::import {
namespace {

constexpr const char* kArgs = "TrainingArguments";
constexpr const char* kPeft = "PEFT adapter_config";

// LoRA's rank (at `rank_key`), lora_alpha and lora_dropout, as PEFT's LoraConfig names them.
void read_lora_scalars(Fields& f, const char* rank_key) {
  if (const Node* r = f.take(rank_key))
    if (const auto v = as_int(f, rank_key, *r)) f.set("job.lora.rank", std::to_string(*v), rank_key, *r);
  if (const Node* a = f.take("lora_alpha"); a && a->is_scalar())
    f.set("job.lora.alpha", yaml_scalar(a->text), "lora_alpha", *a);
  if (const Node* d = f.take("lora_dropout"); d && d->is_scalar())
    f.set("job.lora.dropout", yaml_scalar(d->text), "lora_dropout", *d);
}

}  // namespace

void read_deepspeed_key(Fields& f, const std::filesystem::path& path) {
  if (const Node* d = f.take("deepspeed")) {
    if (d->is_map())
      f.ctx().read_deepspeed_node(*d, f.file());
    else if (const auto p = as_string(f, "deepspeed", *d); p && !p->empty())
      f.ctx().read_file(resolve_named_file(*p, path), ConfigFormat::deepspeed, d->where);
  }
}

// TrainingArguments.fsdp: "full_shard auto_wrap offload" or a list of the same words.
void read_fsdp_words(Fields& f, const Node& n, bool fsdp2) {
  std::vector<const Node*> words;
  std::vector<Node> split;
  if (n.is_seq()) {
    for (const auto& e : n.elems) words.push_back(&e);
  } else if (n.is_scalar()) {
    std::string w;
    for (std::size_t i = 0; i <= n.text.size(); ++i) {
      if (i == n.text.size() || n.text[i] == ' ') {
        if (!w.empty()) {
          Node e = n;
          e.text = w;
          split.push_back(e);
        }
        w.clear();
      } else {
        w += n.text[i];
      }
    }
    for (const auto& e : split) words.push_back(&e);
  }
  if (words.empty()) return;
  f.set("job.framework", fsdp2 ? "pytorch-fsdp2" : "pytorch-fsdp", "fsdp", n, fsdp2 ? "fsdp_config version 2" : "");
  for (const Node* w : words) {
    const std::string t = w->is_scalar() ? w->text : "";
    if (t == "full_shard" || t == "shard_grad_op" || t == "hybrid_shard" || t == "no_shard")
      f.set("plan.parallel.fsdp", t, "fsdp", *w);
    else if (t == "hybrid_shard_zero2")
      f.not_modelled("fsdp", *w, "HYBRID_SHARD_ZERO2");
    else if (t == "offload")
      f.set_cpu_offload("fsdp", *w, "CPUOffload(offload_params=True)");
    else if (t != "auto_wrap")
      f.error(
          *w, "fsdp",
          fmt::format("expected full_shard, shard_grad_op, hybrid_shard, no_shard, offload or auto_wrap, got '{}'", t));
  }
}

// fsdp_config of TrainingArguments (and Axolotl): accelerate's FullyShardedDataParallelPlugin fields,
// each with or without the "fsdp_" prefix (transformers strips it: training_args.py, fsdp_config).
void read_fsdp_options(Fields& top, const Node& block, const char* block_key) {
  Fields f(top.ctx(), block, top.file(), top.key_path(block_key), top.format());
  const auto take = [&](const char* name, std::string* key) -> const Node* {
    for (const std::string& k : {std::string(name), std::string("fsdp_") + name})
      if (const Node* n = f.take(k)) {
        *key = k;
        return n;
      }
    return nullptr;
  };
  std::string k;
  if (const Node* a = take("activation_checkpointing", &k))
    if (const auto b = as_bool(f, k, *a); b && *b) f.set("job.activation_checkpointing", "full", k, *a);
  if (const Node* v = take("version", &k)) as_int(f, k, *v);  // read with `fsdp` (the framework)
  if (const Node* o = take("offload_params", &k))
    if (const auto b = as_bool(f, k, *o); b && *b) f.set_cpu_offload(k, *o, "CPUOffload(offload_params=True)");
  // FSDP2's reshard_after_forward (true = FULL_SHARD, false = SHARD_GRAD_OP), FSDP1's sharding_strategy.
  for (const char* name : {"reshard_after_forward", "sharding_strategy"})
    if (const Node* r = take(name, &k)) {
      const std::string t = r->is_scalar() ? r->text : "";
      const bool resharding = std::string(name) == "reshard_after_forward";
      const std::string ours = fsdp_sharding_of(t, resharding);
      if (ours.empty())
        f.not_modelled(k, *r, fmt::format("FSDP sharding '{}'", t));
      else
        f.set_sharding(ours, k, *r, resharding && (t == "true" || t == "True"));
    }
  if (const Node* w = take("auto_wrap_policy", &k))
    if (const auto t = as_string(f, k, *w); t && *t != "TRANSFORMER_BASED_WRAP")
      f.not_modelled(k, *w,
                     fmt::format("wrap policy {} (ftplan wraps each transformer layer, TRANSFORMER_BASED_WRAP)", *t));
  for (const char* name : {"transformer_layer_cls_to_wrap", "min_num_params"})
    if (const Node* n = take(name, &k))
      f.ctx().ignored.push_back(
          {n->where, f.key_path(k), "which modules are FSDP units: ftplan wraps each transformer layer"});
  for (const char* name : {"backward_prefetch", "forward_prefetch", "limit_all_gathers"})
    if (const Node* n = take(name, &k))
      f.ctx().ignored.push_back(
          {n->where, f.key_path(k), "prefetching: ftplan prefetches the next unit (BACKWARD_PRE)"});
  for (const char* name :
       {"state_dict_type", "final_state_dict_type", "sync_module_states", "cpu_ram_efficient_loading"})
    if (const Node* n = take(name, &k))
      f.ctx().ignored.push_back({n->where, f.key_path(k), "loading or saving the model: outside the training step"});
  for (const char* name : {"use_orig_params", "cpu_offload_pin_memory"})
    if (const Node* n = take(name, &k)) f.ctx().ignored.push_back({n->where, f.key_path(k), kNoEffect});
  if (const Node* m = take("mixed_precision_policy", &k))
    f.not_modelled(k, *m,
                   "an FSDP mixed-precision policy other than the job's precision (give job.fsdp_mixed_precision)");
  f.ignore_matching("xla", "TPU only");
  f.finish();
}

// TrainingArguments.optim (transformers OptimizerNames) -> ftplan optimizer.
void read_hf_optim(Fields& f, std::string_view key, const Node& n) {
  const auto t = as_string(f, key, n);
  if (!t) return;
  const std::string& o = *t;
  std::string name, impl;
  if (o == "adamw_torch_fused")
    name = "adamw", impl = "fused";
  else if (o == "adamw_torch" || o == "adamw_hf" || o == "adamw_apex_fused" || o == "adamw_anyprecision" ||
           o == "adamw_torch_xla" || o == "adamw_torch_npu_fused" || o == "paged_adamw_32bit" || o == "paged_adamw")
    name = "adamw";
  else if (o == "adamw_bnb_8bit" || o == "adamw_8bit" || o == "paged_adamw_8bit" || o == "adamw_torch_8bit" ||
           o == "adamw_torch_4bit")
    name = "adamw-8bit";
  else if (o == "adafactor")
    name = "adafactor";
  else if (o == "sgd")
    name = "sgd";
  else if (o == "lion_32bit" || o == "paged_lion_32bit")
    name = "lion";
  if (name.empty()) {
    f.not_modelled(key, n,
                   fmt::format("optimizer '{}' (ftplan models AdamW, 8-bit AdamW, SGD, Adafactor and Lion)", o));
    f.ctx().draft.set(f.entry("_optimizer_unmodelled", yaml_scalar(o), key, n));
    return;
  }
  f.set("job.optimizer.name", name, key, n);
  if (!impl.empty()) f.set("job.optimizer.implementation", impl, key, n);
  // bitsandbytes' paged optimizers: state in CUDA unified memory (job.optimizer.paged).
  if (o.rfind("paged_", 0) == 0) f.set("job.optimizer.paged", "true", key, n);
  if (o == "adamw_torch_4bit") f.not_modelled(key, n, "4-bit AdamW state (torchao); modelled as 8-bit");
}

// A list of module names: a YAML/JSON list, or one comma-separated string (PEFT's
// examples/sft/train.py splits lora_target_modules on ","), "all-linear" as PEFT's keyword.
void set_lora_targets(Fields& f, const char* key, const Node& t) {
  std::vector<std::string> items;
  const auto add = [&](const std::string& text) {
    std::string w;
    for (char c : text + ",") {
      if (c == ',') {
        if (!w.empty()) items.push_back(w);
        w.clear();
      } else if (c != ' ') {
        w += c;
      }
    }
  };
  if (t.is_scalar())
    add(t.text);
  else if (t.is_seq())
    for (const auto& e : t.elems)
      if (e.is_scalar()) add(e.text);
  if (t.is_null()) return;  // PEFT's default for the model type, set by the caller
  if (items.empty()) {
    f.error(t, key, "expected module names (a list, a comma-separated string or all-linear)");
    return;
  }
  f.set("job.lora.targets", items.size() == 1 ? yaml_scalar(items[0]) : yaml_flow_list(items), key, t);
}

namespace {

// per_device_train_batch_size, gradient_accumulation_steps, precision, checkpointing, optimizer.
void read_batch_and_precision(Fields& f) {
  f.take_int("per_device_train_batch_size", "job.micro_batch");
  f.take_int("gradient_accumulation_steps", "_gas");
  const Node* bf = f.take("bf16");
  const Node* fp = f.take("fp16");
  const auto bf_on = bf ? as_bool(f, "bf16", *bf) : std::optional<bool>();
  const auto fp_on = fp ? as_bool(f, "fp16", *fp) : std::optional<bool>();
  if (bf_on && *bf_on)
    f.set("job.precision", "bf16-mixed", "bf16", *bf);
  else if (fp_on && *fp_on)
    f.set("job.precision", "fp16-mixed", "fp16", *fp);
  else if (bf_on || fp_on)
    f.set("job.precision", "fp32", bf ? "bf16" : "fp16", bf ? *bf : *fp, "neither bf16 nor fp16");
  f.take_bool("gradient_checkpointing", "job.activation_checkpointing", "full", "none");
  f.ignore("gradient_checkpointing_kwargs", "reentrant or not: same memory and time in ftplan");
  if (const Node* o = f.take("optim")) read_hf_optim(f, "optim", *o);
  f.ignore("optim_args", kHyperparameter);
}

// deepspeed (a file or inline), fsdp and fsdp_config.
void read_sharding(Fields& f, const Node& root, const std::filesystem::path& path) {
  read_deepspeed_key(f, path);
  bool fsdp2 = false;
  if (const Node* c = root.find("fsdp_config"); c && c->is_map())
    for (const char* k : {"fsdp_version", "version"})
      if (const Node* v = c->find(k); v && v->is_scalar() && v->text == "2") fsdp2 = true;
  if (const Node* s = f.take("fsdp")) read_fsdp_words(f, *s, fsdp2);
  if (const Node* c = f.take("fsdp_config")) {
    if (c->is_map())
      read_fsdp_options(f, *c, "fsdp_config");
    else if (!c->is_null())
      f.not_modelled("fsdp_config", *c, "fsdp_config as a file path: write its keys inline");
  }
}

// How long, compile, and the script arguments that share the file: the model, sequence length,
// packing and attention.
void read_run(Fields& f) {
  if (const Node* m = f.take("max_steps"))
    if (const auto v = as_int(f, "max_steps", *m); v && *v > 0) f.set("job.steps", std::to_string(*v), "max_steps", *m);
  f.ignore("num_train_epochs", "epochs need the dataset size in tokens: give --tokens or --steps");
  f.take_bool("torch_compile", "job.compile", "true", "false");
  f.ignore_matching("torch_compile_", "torch.compile options: ftplan models compile on or off");
  // Script arguments that share the JSON file with TrainingArguments (HfArgumentParser reads
  // several dataclasses from one file): run_clm.py's ModelArguments, TRL's SFTConfig, and PEFT's
  // examples/sft/train.py ModelArguments.
  if (const Node* m = f.take("model_name_or_path")) set_model_from_hf_id(f, "model_name_or_path", *m);
  for (const char* k : {"max_seq_length", "max_length", "model_max_length", "block_size"})
    if (const Node* s = f.take(k); s && !s->is_null())
      if (const auto v = as_int(f, k, *s)) f.set("job.seq_len", std::to_string(*v), k, *s);
  f.take_bool("packing", "job.samples.packing", "packed", "padded");
  if (const Node* a = f.take("attn_implementation"); a && a->is_scalar()) {
    const std::string t = a->text;
    const std::string ours = t == "flash_attention_2" ? "flash" : t == "sdpa" ? "sdpa" : t == "eager" ? "eager" : "";
    if (!ours.empty())
      f.set("job.attention", ours, "attn_implementation", *a);
    else
      f.not_modelled("attn_implementation", *a, fmt::format("attention '{}'", t));
  }
  f.take_bool("use_flash_attn", "job.attention", "flash", "");
  // The dtype the script loads the model in (from_pretrained(torch_dtype=...); TRL's ModelConfig
  // calls it dtype): what it changes depends on the framework and the method (import.cpp).
  for (const char* k : {"torch_dtype", "dtype"})
    if (const Node* d = f.take(k); d && !d->is_null())
      if (const auto t = as_string(f, k, *d)) {
        if (*t != "auto" && *t != "bfloat16" && *t != "float16" && *t != "float32")
          f.error(*d, k, fmt::format("expected auto, bfloat16, float16 or float32, got '{}'", *t));
        else
          f.set("_load_dtype", *t, k, *d);
      }
}

// The LoRA and QLoRA arguments that share the file with TrainingArguments, in their two common
// spellings (HfArgumentParser reads several dataclasses from one file):
//  - PEFT's examples/sft/train.py ModelArguments (peft 5d602fdb): use_peft_lora, lora_r 64,
//    lora_alpha 16, lora_dropout 0.1, lora_target_modules "q_proj,...,gate_proj" (a string),
//    use_4bit_quantization / use_8bit_quantization, use_nested_quant, bnb_4bit_quant_type nf4;
//  - TRL's ModelConfig (trl/trainer/model_config.py, f2cd5771), which TRL's scripts and the
//    alignment-handbook recipes use: use_peft, lora_r 16, lora_alpha 32, lora_dropout 0.05,
//    lora_target_modules (a list, None = PEFT's default), load_in_4bit / load_in_8bit,
//    bnb_4bit_quant_type nf4, use_bnb_nested_quant.
// long: one key after another in the format's order, each a few lines with its source; they share
// the reader's Fields (what was read, what is left unknown), which a split would pass everywhere.
void read_peft_args(Context& ctx, Fields& f, const Node& root) {
  const bool trl = root.find("use_peft") != nullptr;
  const char* use_key = trl ? "use_peft" : "use_peft_lora";
  bool peft = false;
  const Node* use = f.take(use_key);
  if (use)
    if (const auto b = as_bool(f, use_key, *use); b && *b) peft = true;
  if (trl) f.ignore("use_peft_lora", "TRL's scripts read use_peft");
  const char* k4 = trl ? "load_in_4bit" : "use_4bit_quantization";
  const char* k8 = trl ? "load_in_8bit" : "use_8bit_quantization";
  const char* nested = trl ? "use_bnb_nested_quant" : "use_nested_quant";
  const Node* q4 = f.take(k4);
  const Node* q8 = f.take(k8);
  const bool four = q4 && as_bool(f, k4, *q4).value_or(false);
  const bool eight = q8 && as_bool(f, k8, *q8).value_or(false);
  if (!peft) {
    // A quantized base without adapters trains nothing (TRL: "Works only with LoRA").
    if (four || eight)
      f.error(four ? *q4 : *q8, four ? k4 : k8,
              fmt::format("a quantized base trains only with adapters: {} is not true", use_key));
    for (const char* k : {"lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "lora_modules_to_save",
                          "lora_task_type", "lora_target_parameters", "use_rslora", "use_dora", nested,
                          "bnb_4bit_quant_type", "bnb_4bit_compute_dtype", "bnb_4bit_quant_storage_dtype"})
      f.ignore(k, fmt::format("{} is not true: no adapters", use_key));
    return;
  }
  f.set("job.method", four || eight ? "qlora" : "lora",
        four    ? k4
        : eight ? k8
                : use_key,
        four    ? *q4
        : eight ? *q8
                : *use);
  if (four && eight) f.error(*q8, k8, fmt::format("{} and {} are both true; bitsandbytes takes one", k4, k8));
  if (eight) {
    f.set("job.quant.kind", "int8", k8, *q8, "bitsandbytes LLM.int8()");
    for (const char* k : {nested, "bnb_4bit_quant_type", "bnb_4bit_compute_dtype", "bnb_4bit_quant_storage_dtype"})
      f.ignore(k, "4-bit options: the base is 8-bit");
  } else if (four) {
    if (const Node* t = f.take("bnb_4bit_quant_type"))
      if (const auto v = as_string(f, "bnb_4bit_quant_type", *t)) {
        if (*v != "nf4" && *v != "fp4")
          f.error(*t, "bnb_4bit_quant_type", fmt::format("expected nf4 or fp4, got '{}'", *v));
        else
          f.set("job.quant.kind", *v, "bnb_4bit_quant_type", *t);
      }
    if (!f.ctx().draft.has("job.quant.kind"))
      f.ctx().draft.set(f.entry("job.quant.kind", "nf4", k4, *q4, "bnb_4bit_quant_type default nf4"));
    const Node* n = f.take(nested);
    const bool dq = n && as_bool(f, nested, *n).value_or(false);
    // bitsandbytes' bnb_4bit_use_double_quant defaults to False in both scripts (ftplan's default is true).
    f.ctx().draft.set(n ? f.entry("job.quant.double_quant", dq ? "true" : "false", nested, *n)
                        : f.entry("job.quant.double_quant", "false", k4, *q4, fmt::format("{} default False", nested)));
    f.ignore("bnb_4bit_compute_dtype",
             "the dtype 4-bit weights are dequantized to for the matmul: ftplan's compute "
             "type, bf16 or fp16, the same bytes and rates");
    f.ignore("bnb_4bit_quant_storage_dtype",
             "the container the 4-bit values are packed in (uint8, or bfloat16 so that FSDP can shard them): the "
             "same bytes");
  } else {
    for (const char* k : {nested, "bnb_4bit_quant_type", "bnb_4bit_compute_dtype", "bnb_4bit_quant_storage_dtype"})
      f.ignore(k, "4-bit options without a 4-bit base");
  }
  // The scripts' defaults, where the file leaves a LoRA argument out.
  const Node& at = *use;
  const auto fallback = [&](const char* key, const char* scenario_key, const std::string& value) {
    if (root.find(key)) return;
    f.ctx().draft.set(
        f.entry(scenario_key, value, use_key, at,
                fmt::format("{} default of {}", key, trl ? "TRL's ModelConfig" : "PEFT's examples/sft/train.py")));
  };
  read_lora_scalars(f, "lora_r");
  fallback("lora_r", "job.lora.rank", trl ? "16" : "64");
  fallback("lora_alpha", "job.lora.alpha", trl ? "32" : "16");
  fallback("lora_dropout", "job.lora.dropout", trl ? "0.05" : "0.1");
  if (const Node* t = f.take("lora_target_modules")) {
    if (t->is_null())
      ctx.draft.set(f.entry("job.lora.targets", kPeftDefaultTargets, "lora_target_modules", *t,
                            "null: PEFT's default for llama, mistral, qwen2 and gemma2"));
    else
      set_lora_targets(f, "lora_target_modules", *t);
  } else {
    fallback(
        "lora_target_modules", "job.lora.targets",
        trl ? std::string(kPeftDefaultTargets) : "[q_proj, k_proj, v_proj, o_proj, down_proj, up_proj, gate_proj]");
  }
  f.not_modelled_if_true("use_dora", "DoRA's magnitude vectors");
  for (const char* k : {"lora_modules_to_save", "lora_target_parameters"})
    if (const Node* m = f.take(k); m && !m->is_null())
      f.not_modelled(k, *m, "modules trained in full, or adapters on parameters, beside the LoRA adapters");
  f.ignore("use_rslora", "rank-stabilized scaling: no effect on memory or step time");
  f.ignore("lora_task_type", "the task head PEFT wraps: a causal LM's, as ftplan models");
}

// Training-loop, data, logging and saving options of TrainingArguments, TRL and the example
// scripts (prefixes): no effect on the step ftplan models.
constexpr const char* kLoopOptions[] = {
    "eval",
    "save_",
    "logging_",
    "push_to_hub",
    "hub_",
    "dataloader_",
    "do_",
    "log_",
    "report_to",
    "run_name",
    "output_dir",
    "overwrite_output_dir",
    "seed",
    "data_seed",
    "load_best_model_at_end",
    "metric_for_best_model",
    "greater_is_better",
    "remove_unused_columns",
    "label_names",
    "resume_from_checkpoint",
    "dataset_",
    "chat_template",
    "add_special_tokens",
    "append_concat_token",
    "splits",
    "disable_tqdm",
    "include_",
    "ddp_",
    "group_by_length",
    "length_column_name",
    "prediction_loss_only",
    "ignore_data_skip",
    "full_determinism",
    "use_cpu",
    "local_rank",
    "jit_mode_eval",
    "bf16_full_eval",
    "fp16_full_eval",
    "fp16_opt_level",
    "fp16_backend",
    "half_precision_backend",
    "tpu_",
    "past_index",
    "debug",
    "skip_memory_metrics",
    "use_legacy_prediction_loop",
    "neftune_noise_alpha",
    "optim_target_modules",
    "batch_eval_metrics",
    "restore_callback_states_from_checkpoint",
    "average_tokens_across_devices",
    "use_liger_kernel",
    "accelerator_config",
    "trust_remote_code",
    "use_unsloth",
    "use_reentrant",
    "completion_only_loss",
    "assistant_only_loss",
};

}  // namespace

void read_trainer_keys(Context& ctx, Fields& f, const Node& root, const std::filesystem::path& path) {
  ctx.draft.set({"_hf_trainer", "true", "", root.where, "", false});
  read_batch_and_precision(f);
  read_sharding(f, root, path);
  read_run(f);
  f.ignore("tf32", "not modelled yet: TF32 matmul rates for fp32 training");
  f.ignore("per_device_eval_batch_size", kIo);
  f.ignore("auto_find_batch_size", "ftplan's micro_batch: auto picks the fastest that fits");
  f.ignore("use_reentrant", "reentrant or not: same memory and time in ftplan");
  for (const char* k :
       {"learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
        "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_ratio", "warmup_steps", "label_smoothing_factor"})
    f.ignore(k, kHyperparameter);
  for (const char* p : kLoopOptions)
    f.ignore_matching(p, "training-loop, data, logging or saving option: no effect on the step ftplan models");
}

void read_training_args(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path) {
  Fields f(ctx, root, file, {}, kArgs);
  // TrainingArguments as YAML is `trl sft --config` (and the alignment-handbook recipes): TRL's
  // SFTConfig, whose defaults differ (import.cpp). transformers' example scripts read JSON.
  const std::string ext = path.extension().string();
  if (ext == ".yaml" || ext == ".yml") ctx.draft.set({"_trl", "true", "", root.where, "", false});
  ctx.draft.set_default("job.framework", "hf-trainer",
                        fmt::format("{}: TrainingArguments without deepspeed or fsdp (plain Trainer: DDP)", file));
  read_peft_args(ctx, f, root);
  read_trainer_keys(ctx, f, root, path);
  f.finish();
}

void read_peft_adapter(Context& ctx, const Node& root, const std::string& file) {
  Fields f(ctx, root, file, {}, kPeft);
  if (const Node* t = f.take("peft_type")) {
    const std::string type = t->is_scalar() ? t->text : "";
    if (type != "LORA") {
      f.error(*t, "peft_type", fmt::format("PEFT method {} is not modelled yet (ftplan models LoRA and QLoRA)", type));
      return;
    }
    if (!ctx.draft.has("job.method") || ctx.draft.get("job.method")->value != "qlora")
      f.set("job.method", "lora", "peft_type", *t);
  }
  read_lora_scalars(f, "r");
  if (const Node* t = f.take("target_modules")) {
    if (t->is_seq()) {
      std::vector<std::string> items;
      for (const auto& e : t->elems)
        if (e.is_scalar()) items.push_back(e.text);
      f.set("job.lora.targets", yaml_flow_list(items), "target_modules", *t);
    } else if (t->is_scalar()) {
      // "all-linear", or a regular expression, which names modules ftplan cannot match.
      if (t->text == "all-linear")
        f.set("job.lora.targets", "all-linear", "target_modules", *t);
      else
        f.not_modelled("target_modules", *t, "a regular expression of module names; give --lora-targets");
    } else {
      // null: PEFT's default for the model type (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING in
      // peft/utils/constants.py: llama, mistral, qwen2, gemma2 ["q_proj", "v_proj"]).
      ctx.draft.set(f.entry("job.lora.targets", kPeftDefaultTargets, "target_modules", *t,
                            "null: PEFT 0.17's default for llama, mistral, qwen2 and gemma2"));
    }
  }
  if (const Node* b = f.take("base_model_name_or_path"); b && !b->is_null())
    set_model_from_hf_id(f, "base_model_name_or_path", *b);
  f.not_modelled_if_true("use_dora", "DoRA's magnitude vectors");
  f.not_modelled_if_true("lora_bias", "a bias in the LoRA B matrix");
  if (const Node* b = f.take("bias"); b && b->is_scalar() && b->text != "none")
    f.not_modelled("bias", *b, fmt::format("training the base model's biases ('{}')", b->text));
  for (const char* k : {"modules_to_save", "layers_to_transform", "layer_replication", "exclude_modules"})
    if (const Node* m = f.take(k); m && !m->is_null())
      f.not_modelled(k, *m, fmt::format("{}: adapters on part of the layers or fully trained modules", k));
  for (const char* k : {"rank_pattern", "alpha_pattern"})
    if (const Node* m = f.take(k); m && m->is_map() && !m->items.empty())
      f.not_modelled(k, *m, "per-module ranks or alphas");
  f.ignore("use_rslora", "rank-stabilized scaling: no effect on memory or step time");
  for (const char* k : {"task_type",
                        "inference_mode",
                        "init_lora_weights",
                        "fan_in_fan_out",
                        "revision",
                        "auto_mapping",
                        "megatron_config",
                        "megatron_core",
                        "loftq_config",
                        "eva_config",
                        "corda_config",
                        "layers_pattern",
                        "peft_version",
                        "use_qalora",
                        "qalora_group_size",
                        "target_parameters",
                        "trainable_token_indices",
                        "alora_invocation_tokens",
                        "arrow_config",
                        "ensure_weight_tying",
                        "lora_ga_config"})
    f.ignore(k, "adapter initialisation or bookkeeping: no effect on memory or step time");
  f.finish();
}

}  // namespace ftplan::io::import
