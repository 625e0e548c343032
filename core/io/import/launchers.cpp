// The fine-tuning launchers' YAML: LLaMA-Factory and Axolotl. Both read a flat YAML into their own
// dataclasses and hand the Trainer's part to transformers; their meanings and defaults differ from
// TrainingArguments' in ways that change memory (LLaMA-Factory checkpoints activations unless told
// not to; Axolotl quantizes only with `adapter: qlora`). Sources:
//  - LLaMA-Factory 0.9.6.dev0 (hiyouga/LLaMA-Factory ff6d4d12), src/llamafactory/hparams/
//    {model_args,data_args,finetuning_args,parser}.py, model/adapter.py, model/model_utils/;
//  - Axolotl 0.18.0 (axolotl-ai-cloud/axolotl 067b021c), src/axolotl/utils/schemas/*.py,
//    utils/config/__init__.py normalize_config, loaders/{model,adapter}.py, core/builders/base.py.
#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "io/import/detail.hpp"

namespace ftplan::io::import {
namespace {

constexpr const char* kData =
    "dataset, prompt format or tokenizer option: ftplan takes sample lengths from job.samples";
constexpr const char* kLoop = "training-loop, logging or saving option: no effect on the step ftplan models";

// A boolean key whose true value the launcher refuses or ftplan cannot stand in for: an error.
void refuse_if_true(Fields& f, const char* key, const std::string& why) {
  if (const Node* n = f.take(key))
    if (const auto b = as_bool(f, key, *n); b && *b) f.error(*n, key, why);
}

// ---------------------------------------------------------------------------------------------
// LLaMA-Factory

constexpr const char* kLf = "LLaMA-Factory";

// long: one key after another in the format's order, each a few lines with its source; they share
// the reader's Fields (what was read, what is left unknown), which a split would pass everywhere.
void read_lf_method(Fields& f, const Node& root) {
  // stage (finetuning_args.py: sft default): pt and sft train a causal LM the same way; the others
  // add a reference, reward or value model ftplan does not hold.
  std::string stage = "sft";
  if (const Node* s = f.take("stage"))
    if (const auto t = as_string(f, "stage", *s)) {
      stage = *t;
      if (stage != "sft" && stage != "pt")
        f.error(*s, "stage",
                fmt::format("stage {}: {} is not modelled (ftplan models supervised fine-tuning, sft, and continued "
                            "pretraining, pt)",
                            stage,
                            stage == "rm"    ? "a reward model's value head and pairwise batches"
                            : stage == "ppo" ? "PPO's policy, reference, reward and value models"
                                             : "preference training's reference model and paired batches"));
    }
  // finetuning_type: lora by default (finetuning_args.py), r 8, alpha 2 x r, dropout 0, all linear
  // layers but the LM head ("all": model_utils/misc.py find_all_linear_modules).
  std::string type = "lora";
  const Node* ft = f.take("finetuning_type");
  if (ft)
    if (const auto t = as_string(f, "finetuning_type", *ft)) type = *t;
  const Node& at = ft ? *ft : root;
  const std::string origin_note = ft ? "" : "finetuning_type default lora";
  if (type == "full") {
    f.ctx().draft.set(f.entry("job.method", "full", "finetuning_type", at, origin_note));
  } else if (type == "lora") {
    const Node* q = f.take("quantization_bit");
    long long bits = 0;
    if (q && !q->is_null())
      if (const auto v = as_int(f, "quantization_bit", *q)) bits = *v;
    std::string method = "bnb";
    if (const Node* m = f.take("quantization_method"))
      if (const auto t = as_string(f, "quantization_method", *m)) {
        method = *t;
        if (bits && method != "bnb")
          f.error(*m, "quantization_method",
                  fmt::format("{}: ftplan models bitsandbytes' on-the-fly 4- and 8-bit bases (bnb); a {} checkpoint "
                              "is a pre-quantized model: give --method qlora --set job.quant.kind=int4",
                              method, method));
      }
    if (bits == 4 || bits == 8) {
      f.set("job.method", "qlora", "quantization_bit", *q);
      if (bits == 8) {
        f.set("job.quant.kind", "int8", "quantization_bit", *q, "bitsandbytes LLM.int8()");
        f.ignore("quantization_type", "4-bit option: the base is 8-bit");
        f.ignore("double_quantization", "4-bit option: the base is 8-bit");
      } else {
        const Node* t = f.take("quantization_type");
        if (t && t->is_null()) t = nullptr;  // None: the default
        const auto kind = t ? as_string(f, "quantization_type", *t) : std::optional<std::string>("nf4");
        if (kind && *kind != "nf4" && *kind != "fp4")
          f.error(*t, "quantization_type", fmt::format("expected nf4 or fp4, got '{}'", *kind));
        else if (kind)
          f.ctx().draft.set(
              t ? f.entry("job.quant.kind", *kind, "quantization_type", *t)
                : f.entry("job.quant.kind", "nf4", "quantization_bit", *q, "quantization_type default nf4"));
        const Node* d = f.take("double_quantization");
        if (d && d->is_null()) d = nullptr;
        const auto dq = d ? as_bool(f, "double_quantization", *d) : std::optional<bool>(true);
        if (dq)
          f.ctx().draft.set(d ? f.entry("job.quant.double_quant", *dq ? "true" : "false", "double_quantization", *d)
                              : f.entry("job.quant.double_quant", "true", "quantization_bit", *q,
                                        "double_quantization default true"));
      }
    } else {
      if (bits) f.error(*q, "quantization_bit", fmt::format("ftplan models 4- and 8-bit bases, got {}", bits));
      f.ctx().draft.set(f.entry("job.method", "lora", "finetuning_type", at, origin_note));
      for (const char* k : {"quantization_type", "double_quantization"}) f.ignore(k, "no quantization_bit");
    }
    const Node* r = f.take("lora_rank");
    if (r && r->is_null()) r = nullptr;  // None: the default, as every key below
    long long rank = 8;
    if (r)
      if (const auto v = as_int(f, "lora_rank", *r)) rank = *v;
    f.ctx().draft.set(r ? f.entry("job.lora.rank", std::to_string(rank), "lora_rank", *r)
                        : f.entry("job.lora.rank", "8", "finetuning_type", at, "lora_rank default 8"));
    const Node* a = f.take("lora_alpha");
    if (a && !a->is_null())
      f.set("job.lora.alpha", yaml_scalar(a->text), "lora_alpha", *a);
    else
      // 2 x rank in floating point: a rank near the integers' limit (refused by the scenario
      // reader, naming lora_rank) overflowed here (UBSan, fuzz_import_llama_factory, session 23).
      f.ctx().draft.set(f.entry("job.lora.alpha", fmt::format("{}", 2.0 * static_cast<double>(rank)),
                                r ? "lora_rank" : "finetuning_type", r ? *r : at, "lora_alpha default: 2 x lora_rank"));
    if (const Node* d = f.take("lora_dropout"); d && !d->is_null())
      f.set("job.lora.dropout", yaml_scalar(d->text), "lora_dropout", *d);
    else
      f.ctx().draft.set(f.entry("job.lora.dropout", "0", "finetuning_type", at, "lora_dropout default 0"));
    if (const Node* t = f.take("lora_target"); t && !t->is_null() && !(t->is_scalar() && t->text == "all"))
      set_lora_targets(f, "lora_target", *t);
    else
      f.ctx().draft.set(t && !t->is_null() ? f.entry("job.lora.targets", "all-linear", "lora_target", *t,
                                                     "every linear layer but lm_head")
                                           : f.entry("job.lora.targets", "all-linear", "finetuning_type", at,
                                                     "lora_target default all: every linear layer but lm_head"));
    if (const Node* x = f.take("additional_target"); x && !x->is_null())
      f.not_modelled("additional_target", *x, "modules trained in full beside the adapters (PEFT modules_to_save)");
    f.not_modelled_if_true("use_dora", "DoRA's magnitude vectors");
    f.ignore("use_rslora", "rank-stabilized scaling: no effect on memory or step time");
    f.ignore_matching("pissa_", "PiSSA initialisation of the adapters: no effect on memory or step time");
    f.ignore("create_new_adapter", "adapter bookkeeping: no effect on memory or step time");
  } else {
    f.error(at, "finetuning_type",
            fmt::format("finetuning_type {}: ftplan models full, lora and QLoRA (lora with quantization_bit)", type));
  }
  if (type != "lora")
    for (const char* k :
         {"lora_rank", "lora_alpha", "lora_dropout", "lora_target", "additional_target", "use_dora", "use_rslora",
          "quantization_bit", "quantization_type", "double_quantization", "quantization_method"})
      f.ignore(k, fmt::format("finetuning_type {}: no adapters", type));
  if (type != "freeze") f.ignore_matching("freeze_", fmt::format("finetuning_type {}: no freeze tuning", type));
  // cutoff_len (data_args.py, 2048) truncates each sample; packing (None = stage pt) joins them
  // into rows of cutoff_len, one token shorter when packing ("avoid pad_to_multiple_of").
  const Node* pk = f.take("packing");
  const Node* neat = f.take("neat_packing");
  if (pk && pk->is_null()) pk = nullptr;  // None: by stage
  int pk_on = -1;                         // packing: -1 not given, else 0 / 1
  if (pk)
    if (const auto b = as_bool(f, "packing", *pk)) pk_on = *b ? 1 : 0;
  const bool neat_on = neat && as_bool(f, "neat_packing", *neat).value_or(false);
  // neat_packing forces packing (data_args.py); else packing as given, else on for stage pt only.
  const bool packed = neat_on || (pk_on >= 0 ? pk_on == 1 : stage == "pt");
  const Node* packing_at = neat_on ? neat : pk;
  f.ctx().draft.set(packing_at ? f.entry("job.samples.packing", packed ? "packed" : "padded",
                                         neat_on ? "neat_packing" : "packing", *packing_at)
                               : f.entry("job.samples.packing", packed ? "packed" : "padded", "stage", root,
                                         fmt::format("packing default: on for stage pt only (stage {})", stage)));
  long long cutoff = 2048;
  const Node* c = f.take("cutoff_len");
  if (c && c->is_null()) c = nullptr;
  if (c)
    if (const auto v = as_int(f, "cutoff_len", *c)) cutoff = *v;
  // DataArguments.__post_init__ takes the token off when packing is given true (or neat_packing),
  // before the parser's stage default fills an absent packing (parser.py).
  const bool explicit_packing = neat_on || pk_on == 1;
  const long long seq = explicit_packing ? cutoff - 1 : cutoff;
  f.ctx().draft.set(
      c ? f.entry("job.seq_len", std::to_string(seq), "cutoff_len", *c,
                  explicit_packing ? "less the one token packing takes (data_args.py)" : "")
        : f.entry("job.seq_len", std::to_string(seq), "stage", root,
                  fmt::format("cutoff_len default 2048{}", explicit_packing ? ", less one when packing" : "")));
}

void read_lf_model_options(Fields& f) {
  // Activation checkpointing is on unless disable_gradient_checkpointing (model_utils/checkpointing.py
  // prepare_model_for_training); the Trainer's own gradient_checkpointing turns it on too.
  const Node* d = f.take("disable_gradient_checkpointing");
  const Node* g = f.take("gradient_checkpointing");
  const bool disabled = d && as_bool(f, "disable_gradient_checkpointing", *d).value_or(false);
  const bool trainer = g && as_bool(f, "gradient_checkpointing", *g).value_or(false);
  if (!disabled || trainer)
    f.ctx().draft.set(trainer ? f.entry("job.activation_checkpointing", "full", "gradient_checkpointing", *g)
                      : d     ? f.entry("job.activation_checkpointing", "full", "disable_gradient_checkpointing", *d)
                          : f.entry("job.activation_checkpointing", "full", "disable_gradient_checkpointing", Node{},
                                    "default false: LLaMA-Factory checkpoints every layer"));
  else
    f.set("job.activation_checkpointing", "none", "disable_gradient_checkpointing", *d);
  f.ignore("use_reentrant_gc", "reentrant or not: same memory and time in ftplan");
  f.ignore("gradient_checkpointing_kwargs", "reentrant or not: same memory and time in ftplan");
  // pure_bf16: no fp32 upcast of the trained parameters (model/adapter.py), parameters, gradients
  // and optimizer state in bf16.
  if (const Node* p = f.take("pure_bf16"))
    if (const auto b = as_bool(f, "pure_bf16", *p); b && *b) {
      f.set("job.precision", "bf16", "pure_bf16", *p);
      // Its compute type is bf16 whatever the Trainer's bf16/fp16 say (parser.py compute_dtype).
      f.ignore("bf16", "pure_bf16 decides the precision");
      f.ignore("fp16", "pure_bf16 decides the precision");
    }
  // flash_attn (model_args.py, auto): auto leaves transformers' default, SDPA.
  if (const Node* a = f.take("flash_attn")) {
    const std::string t = a->is_scalar() ? a->text : "";
    const std::string ours = t == "fa2" || t == "fa3"     ? "flash"
                             : t == "sdpa" || t == "auto" ? "sdpa"
                             : t == "disabled"            ? "eager"
                                                          : "";
    if (ours.empty())
      f.error(*a, "flash_attn", fmt::format("expected auto, disabled, sdpa, fa2 or fa3, got '{}'", t));
    else
      f.set("job.attention", ours, "flash_attn", *a, t == "auto" ? "transformers' default, SDPA" : "");
  }
  if (const Node* u = f.take("use_unsloth"))
    if (const auto b = as_bool(f, "use_unsloth", *u); b && *b)
      f.set("job.framework", "unsloth", "use_unsloth", *u, "unsloth.FastLanguageModel");
  f.not_modelled_if_true("use_unsloth_gc", "Unsloth's offloaded gradient checkpointing without Unsloth");
  f.not_modelled_if_true("enable_liger_kernel",
                         "Liger's fused Triton kernels (RMSNorm, RoPE, SwiGLU, fused linear cross-entropy)");
  f.not_modelled_if_true("shift_attn", "LongLoRA's shifted sparse attention");
  f.not_modelled_if_true("resize_vocab", "a resized vocabulary (embeddings and LM head trained in full)");
  f.not_modelled_if_true("use_llama_pro", "LLaMA Pro's expanded blocks");
  f.not_modelled_if_true("mixture_of_depths", "mixture-of-depths routing");
  // GaLore, APOLLO and BAdam project or freeze what each step updates, Adam-mini and Muon keep
  // other state than Adam's: neither memory nor step is AdamW's (train/trainer_utils.py).
  for (const char* k : {"use_galore", "use_apollo", "use_badam", "use_adam_mini", "use_muon"})
    refuse_if_true(f, k,
                   fmt::format("the {} optimizer is not modelled (ftplan models AdamW, 8-bit AdamW, SGD, "
                               "Adafactor and Lion)",
                               k + 4));
  for (const char* p : {"galore_", "apollo_", "badam_"}) f.ignore_matching(p, "with its optimizer only");
  f.ignore("loraplus_lr_ratio", kHyperparameter);
  f.ignore("loraplus_lr_embedding", kHyperparameter);
  f.ignore("upcast_layernorm", "norm weights in fp32: a few MiB");
  f.ignore("upcast_lmhead_output", "logits in fp32: ftplan's loss.fp32_logits default");
  if (const Node* r = f.take("rope_scaling"); r && !r->is_null())
    f.not_modelled("rope_scaling", *r, "RoPE scaling past the model's context (give model.max_context)");
}

}  // namespace

// long: one key after another in LLaMA-Factory's order, each a few lines with its source; they
// share the Fields reader and its context, which a split would pass around for no clarity.
void read_llama_factory(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path) {
  Fields f(ctx, root, file, {}, kLf);
  ctx.draft.set_default("job.framework", "hf-trainer",
                        fmt::format("{}: LLaMA-Factory on the Trainer without deepspeed or fsdp (DDP)", file));
  read_lf_method(f, root);
  read_lf_model_options(f);
  for (const char* k : {"template",
                        "dataset",
                        "dataset_dir",
                        "eval_dataset",
                        "max_samples",
                        "preprocessing_num_workers",
                        "overwrite_cache",
                        "val_size",
                        "tokenized_path",
                        "mix_strategy",
                        "interleave_probs",
                        "streaming",
                        "buffer_size",
                        "train_on_prompt",
                        "mask_history",
                        "tool_format",
                        "default_system",
                        "enable_thinking",
                        "media_dir",
                        "new_special_tokens",
                        "new_special_tokens_config",
                        "add_special_tokens",
                        "image_max_pixels",
                        "image_min_pixels",
                        "video_max_pixels",
                        "video_min_pixels",
                        "video_fps",
                        "video_maxlen",
                        "audio_sampling_rate",
                        "data_shared_file_system",
                        "preprocessing_batch_size",
                        "ignore_pad_token_for_loss",
                        "split",
                        "packing_overflow"})
    f.ignore(k, kData);
  for (const char* k : {"plot_loss",
                        "overwrite_output_dir",
                        "adapter_name_or_path",
                        "adapter_folder",
                        "cache_dir",
                        "model_revision",
                        "hf_hub_token",
                        "ms_hub_token",
                        "om_hub_token",
                        "print_param_status",
                        "compute_accuracy",
                        "disable_shuffling",
                        "infer_backend",
                        "infer_dtype",
                        "use_swanlab",
                        "trust_remote_code",
                        "low_cpu_mem_usage",
                        "use_fast_tokenizer",
                        "split_special_tokens",
                        "moe_aux_loss_coef",
                        "pref_beta",
                        "pref_ftx",
                        "pref_loss",
                        "predict_with_generate"})
    f.ignore(k, kLoop);
  f.ignore_matching("export_", "exporting the model: outside the training step");
  f.ignore_matching("vllm_", "inference backend: outside the training step");
  // Under Ray (USE_RAY=1) ray_num_workers is the GPU count (hparams/training_args.py RayArguments).
  if (const Node* r = f.take("ray_num_workers"))
    if (const auto v = as_int(f, "ray_num_workers", *r))
      f.set("plan.cluster.gpus", std::to_string(*v), "ray_num_workers", *r, "one GPU a Ray worker (USE_RAY=1)");
  f.ignore_matching("ray_", "Ray launcher setting: no effect on the step ftplan models");
  f.ignore_matching("resources_per_worker", "Ray launcher setting: no effect on the step ftplan models");
  f.ignore("placement_strategy", "Ray launcher setting: no effect on the step ftplan models");
  for (const char* k : {"do_sample", "temperature", "top_p", "top_k", "num_beams", "max_length", "max_new_tokens",
                        "repetition_penalty", "length_penalty", "skip_special_tokens"})
    f.ignore(k, "generation option: evaluation only");
  read_trainer_keys(ctx, f, root, path);
  f.finish();
}

// ---------------------------------------------------------------------------------------------
// Axolotl

namespace {

constexpr const char* kAx = "Axolotl";

void read_ax_adapter(Fields& f, const Node& root) {
  // adapter (schemas/peft.py): none = full fine-tune; qlora builds the 4-bit bitsandbytes config
  // (nf4, double quant: loaders/model.py _set_quantization_config), lora with load_in_8bit the 8-bit
  // one; load_in_4bit under adapter lora quantizes nothing.
  const Node* a = f.take("adapter");
  const std::string adapter = a && a->is_scalar() && a->text != "null" ? a->text : "";
  const Node* q4 = f.take("load_in_4bit");
  const Node* q8 = f.take("load_in_8bit");
  const bool four = q4 && as_bool(f, "load_in_4bit", *q4).value_or(false);
  const bool eight = q8 && as_bool(f, "load_in_8bit", *q8).value_or(false);
  if (adapter.empty()) {
    f.ctx().draft.set(f.entry("job.method", "full", "adapter", a ? *a : root, "no adapter: a full fine-tune"));
    if (four || eight)
      f.error(four ? *q4 : *q8, four ? "load_in_4bit" : "load_in_8bit",
              "a quantized base needs an adapter (axolotl refuses it)");
  } else if (adapter == "qlora") {
    if (!four) f.error(*a, "adapter", "adapter qlora needs load_in_4bit: true (axolotl refuses it otherwise)");
    f.set("job.method", "qlora", "adapter", *a);
    f.set("job.quant.kind", "nf4", "adapter", *a, "axolotl's 4-bit config: nf4");
    f.set("job.quant.double_quant", "true", "adapter", *a, "axolotl's 4-bit config: double quant");
  } else if (adapter == "lora") {
    if (eight) {
      f.set("job.method", "qlora", "load_in_8bit", *q8, "adapter lora over an 8-bit base");
      f.set("job.quant.kind", "int8", "load_in_8bit", *q8, "bitsandbytes LLM.int8()");
    } else {
      f.set("job.method", "lora", "adapter", *a);
    }
    if (four)
      f.ctx().ignored.push_back(
          {q4->where, "load_in_4bit",
           "with adapter lora axolotl loads the base unquantized (only adapter qlora quantizes to 4 bits)"});
  } else {
    f.error(*a, "adapter", fmt::format("adapter {}: ftplan models lora and qlora", adapter));
  }
  if (adapter.empty()) {
    f.ignore_matching("lora_", "no adapter");
    f.ignore_matching("peft_", "no adapter");
    return;
  }
  // lora_r and lora_alpha have no axolotl default: None reaches peft.LoraConfig, whose defaults are
  // r 8 and lora_alpha 8 (peft/tuners/lora/config.py); lora_dropout defaults to 0.
  const auto scalar = [&](const char* key, const char* scenario_key, const char* fallback, const char* why) {
    if (const Node* n = f.take(key); n && !n->is_null())
      f.set(scenario_key, yaml_scalar(n->text), key, *n);
    else
      f.ctx().draft.set(f.entry(scenario_key, fallback, "adapter", *a, why));
  };
  scalar("lora_r", "job.lora.rank", "8", "lora_r not given: PEFT's LoraConfig default r 8");
  scalar("lora_alpha", "job.lora.alpha", "8", "lora_alpha not given: PEFT's LoraConfig default 8");
  scalar("lora_dropout", "job.lora.dropout", "0", "lora_dropout default 0.0");
  // lora_target_linear: every Linear but the LM head, with any lora_target_modules besides
  // (loaders/adapter.py find_all_linear_names).
  const Node* lin = f.take("lora_target_linear");
  const Node* mods = f.take("lora_target_modules");
  if (lin && as_bool(f, "lora_target_linear", *lin).value_or(false))
    f.set("job.lora.targets", "all-linear", "lora_target_linear", *lin, "every linear layer but lm_head");
  else if (mods && !mods->is_null())
    set_lora_targets(f, "lora_target_modules", *mods);
  else
    f.ctx().draft.set(f.entry("job.lora.targets", kPeftDefaultTargets, "adapter", *a,
                              "no targets given: PEFT's default for llama, mistral, qwen2 and gemma2"));
  if (const Node* m = f.take("lora_modules_to_save"); m && !m->is_null())
    f.not_modelled("lora_modules_to_save", *m, "modules trained in full beside the adapters (PEFT modules_to_save)");
  f.not_modelled_if_true("peft_use_dora", "DoRA's magnitude vectors");
  f.ignore("peft_use_rslora", "rank-stabilized scaling: no effect on memory or step time");
  f.ignore("lora_fan_in_fan_out", "adapter layout: no effect on memory or step time");
  f.ignore("lora_model_dir", "an adapter to start from: no effect on memory or step time");
  f.ignore("peft_layers_to_transform", "not modelled yet: adapters on part of the layers");
  for (const char* k : {"lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel", "lora_embedding_kernel"})
    f.not_modelled_if_true(k, "axolotl's fused Triton LoRA kernels");
}

void read_ax_precision(Fields& f) {
  // bf16 (config.py, default auto): bf16 where the GPU has it (Ampere and later; else fp16). It also
  // loads the model in bf16 (normalize_config torch_dtype), and axolotl does not upcast the trained
  // weights: what that means per framework is resolved with the load dtype (import.cpp).
  const Node* bf = f.take("bf16");
  const Node* fp = f.take("fp16");
  const Node* bfl = f.take("bfloat16");
  const Node* fpl = f.take("float16");
  const bool bf_on = !bf || bf->text == "auto" || as_bool(f, "bf16", *bf).value_or(false);
  const bool fp_on = fp && as_bool(f, "fp16", *fp).value_or(false);
  const bool bfl_on = bfl && as_bool(f, "bfloat16", *bfl).value_or(false);
  const bool fpl_on = fpl && as_bool(f, "float16", *fpl).value_or(false);
  if (bf_on || bfl_on) {
    const Node& at = bfl_on ? *bfl : bf ? *bf : Node{};
    const char* key = bfl_on ? "bfloat16" : "bf16";
    f.ctx().draft.set(f.entry("job.precision", "bf16-mixed", key, at,
                              !bf                  ? "default auto: bf16 on GPUs that have it (Ampere and later)"
                              : bf->text == "auto" ? "auto: bf16 on GPUs that have it (Ampere and later)"
                                                   : ""));
    f.ctx().draft.set(f.entry("_load_dtype_implied", "bfloat16", key, at, "the model loaded in bf16"));
  } else if (fp_on || fpl_on) {
    f.set("job.precision", "fp16-mixed", fp_on ? "fp16" : "float16", fp_on ? *fp : *fpl);
    f.set("_load_dtype_implied", "float16", fp_on ? "fp16" : "float16", fp_on ? *fp : *fpl);
  } else {
    f.set("job.precision", "fp32", bf ? "bf16" : "fp16", bf ? *bf : *fp, "neither bf16 nor fp16");
  }
  f.ignore("tf32", "not modelled yet: TF32 matmul rates for fp32 training");
}

void read_ax_attention(Fields& f) {
  // The legacy switches become attn_implementation (config.py); xformers' memory-efficient kernel
  // keeps no score matrix, as SDPA's does not.
  const Node* impl = f.take("attn_implementation");
  if (impl && impl->is_scalar()) {
    const std::string t = impl->text;
    const std::string ours = t == "flash_attention_2" || t == "flash_attention_3" ? "flash"
                             : t == "sdpa" || t == "xformers"                     ? "sdpa"
                             : t == "eager"                                       ? "eager"
                                                                                  : "";
    if (ours.empty())
      f.not_modelled("attn_implementation", *impl, fmt::format("attention '{}'", t));
    else
      f.set("job.attention", ours, "attn_implementation", *impl);
  }
  for (const auto& [key, ours] : std::vector<std::pair<const char*, const char*>>{
           {"xformers_attention", "sdpa"}, {"flash_attention", "flash"}, {"sdp_attention", "sdpa"}})
    if (const Node* n = f.take(key))
      if (const auto b = as_bool(f, key, *n); b && *b && !f.ctx().draft.has("job.attention"))
        f.set("job.attention", ours, key, *n);
  for (const char* k :
       {"flash_attn_cross_entropy", "flash_attn_rms_norm", "flash_attn_fuse_qkv", "flash_attn_fuse_mlp"})
    f.not_modelled_if_true(k, "flash-attn's fused kernels besides attention");
  refuse_if_true(f, "s2_attention", "s2_attention was removed from axolotl (it refuses the key)");
}

}  // namespace

// long: one key after another in the format's order, each a few lines with its source; they share
// the reader's Fields (what was read, what is left unknown), which a split would pass everywhere.
void read_axolotl(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path) {
  Fields f(ctx, root, file, {}, kAx);
  ctx.draft.set({"_hf_trainer", "true", "", root.where, "", false});  // the Trainer runs the step
  ctx.draft.set_default("job.framework", "hf-trainer",
                        fmt::format("{}: Axolotl on the Trainer without deepspeed or fsdp (DDP)", file));
  if (const Node* m = f.take("base_model")) set_model_from_hf_id(f, "base_model", *m);
  for (const char* k : {"base_model_config", "tokenizer_config", "tokenizer_type", "model_type", "model_config_type",
                        "tokenizer_use_fast", "tokenizer_legacy", "trust_remote_code", "revision_of_model",
                        "is_llama_derived_model", "is_mistral_derived_model", "is_qwen_derived_model",
                        "is_falcon_derived_model", "hub_model_id", "hub_strategy", "processor_type"})
    f.ignore(k, "which model class and tokenizer load: the model is base_model");
  read_ax_adapter(f, root);
  // sequence_len (default 512) and sample_packing (multipack: rows of micro_batch_size x
  // sequence_len tokens with a varlen attention); without packing each batch is padded to its
  // longest sample, which ftplan's padded samples bound from above.
  if (const Node* n = f.take("sequence_len"); n && !n->is_null())
    if (const auto v = as_int(f, "sequence_len", *n)) f.set("job.seq_len", std::to_string(*v), "sequence_len", *n);
  if (!ctx.draft.has("job.seq_len"))
    ctx.draft.set(f.entry("job.seq_len", "512", "base_model", root, "sequence_len default 512"));
  f.take_bool("sample_packing", "job.samples.packing", "packed", "padded");
  if (!ctx.draft.has("job.samples.packing"))
    ctx.draft.set(f.entry("job.samples.packing", "padded", "base_model", root, "sample_packing default off"));
  for (const char* k :
       {"pad_to_sequence_len", "eval_sample_packing", "sample_packing_eff_est", "sample_packing_group_size",
        "sample_packing_bin_size", "multipack_real_batches", "excess_length_strategy"})
    f.ignore(k, kData);
  // micro_batch_size (default 1), gradient_accumulation_steps (default 1) or batch_size: GA =
  // batch_size / micro_batch_size per GPU (normalize_config).
  const Node* mb = f.take("micro_batch_size");
  long long micro = 1;
  if (mb)
    if (const auto v = as_int(f, "micro_batch_size", *mb)) micro = *v;
  ctx.draft.set(mb ? f.entry("job.micro_batch", std::to_string(micro), "micro_batch_size", *mb)
                   : f.entry("job.micro_batch", "1", "base_model", root, "micro_batch_size default 1"));
  const Node* ga = f.take("gradient_accumulation_steps");
  const Node* bs = f.take("batch_size");
  if (ga && bs)
    f.error(*bs, "batch_size", "give gradient_accumulation_steps or batch_size, not both (axolotl refuses it)");
  if (ga) {
    if (const auto v = as_int(f, "gradient_accumulation_steps", *ga))
      f.set("_gas", std::to_string(*v), "gradient_accumulation_steps", *ga);
  } else if (bs) {
    if (const auto v = as_int(f, "batch_size", *bs); v && micro > 0)
      f.set("_gas", std::to_string(*v / micro), "batch_size", *bs,
            fmt::format("/ micro_batch_size {} (per GPU)", micro));
  }
  if (const Node* m = f.take("max_steps"); m && !m->is_null())
    if (const auto v = as_int(f, "max_steps", *m); v && *v > 0) f.set("job.steps", std::to_string(*v), "max_steps", *m);
  f.ignore("num_epochs", "epochs need the dataset size in tokens: give --tokens or --steps");
  read_ax_precision(f);
  // gradient_checkpointing: true, or offload (checkpoints in host memory) / offload_disk.
  if (const Node* g = f.take("gradient_checkpointing"); g && g->is_scalar()) {
    if (g->text == "offload") {
      f.set("job.activation_checkpointing", "full", "gradient_checkpointing", *g);
      f.set("plan.offload.activations", "cpu", "gradient_checkpointing", *g, "checkpoints offloaded to host memory");
    } else if (g->text == "offload_disk") {
      f.set("job.activation_checkpointing", "full", "gradient_checkpointing", *g);
      f.set("plan.offload.activations", "nvme", "gradient_checkpointing", *g, "checkpoints offloaded to disk");
    } else if (const auto b = as_bool(f, "gradient_checkpointing", *g)) {
      f.set("job.activation_checkpointing", *b ? "full" : "none", "gradient_checkpointing", *g);
    }
  }
  f.ignore("gradient_checkpointing_kwargs", "reentrant or not: same memory and time in ftplan");
  // activation_offloading (schemas/config.py): true or legacy to host memory, disk to local storage.
  if (const Node* o = f.take("activation_offloading"); o && o->is_scalar()) {
    if (o->text == "legacy")
      f.set("plan.offload.activations", "cpu", "activation_offloading", *o);
    else if (o->text == "disk")
      f.set("plan.offload.activations", "nvme", "activation_offloading", *o);
    else if (const auto b = as_bool(f, "activation_offloading", *o); b && *b)
      f.set("plan.offload.activations", "cpu", "activation_offloading", *o);
  }
  read_ax_attention(f);
  // optimizer (training.py, default adamw_torch_fused): transformers' names, or axolotl's own.
  if (const Node* o = f.take("optimizer"))
    read_hf_optim(f, "optimizer", *o);
  else
    ctx.draft.set(f.entry("job.optimizer.name", "adamw", "base_model", root, "optimizer default adamw_torch_fused"));
  for (const char* k :
       {"learning_rate", "lr_scheduler", "lr_scheduler_kwargs", "warmup_steps", "warmup_ratio", "weight_decay",
        "max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "cosine_min_lr_ratio", "optim_args",
        "lr_quadratic_warmup", "loraplus_lr_ratio", "loraplus_lr_embedding", "neftune_noise_alpha"})
    f.ignore(k, kHyperparameter);
  // deepspeed (a JSON file, from the working directory: the repository root for its examples), fsdp.
  read_deepspeed_key(f, path);

  const Node* fsdp = f.take("fsdp");
  const Node* fc = f.take("fsdp_config");
  const Node* fv = f.take("fsdp_version");
  if (fsdp || fc) {
    // FSDP1 unless fsdp_version (top level or in fsdp_config) says 2 (validation.py pins 1).
    const Node* inner = fc && fc->is_map() ? fc->find("fsdp_version") : nullptr;
    if (!inner && fc && fc->is_map()) inner = fc->find("version");
    const Node* v = fv ? fv : inner;
    const bool two = v && v->is_scalar() && v->text == "2";
    const Node& at = v ? *v : fsdp ? *fsdp : *fc;
    ctx.draft.set(f.entry("job.framework", two ? "pytorch-fsdp2" : "pytorch-fsdp",
                          v      ? (fv ? "fsdp_version" : "fsdp_config.fsdp_version")
                          : fsdp ? "fsdp"
                                 : "fsdp_config",
                          at, v ? "" : "fsdp_version not given: axolotl pins FSDP1"));
    if (fsdp) read_fsdp_words(f, *fsdp, two);
    if (fc && fc->is_map()) read_fsdp_options(f, *fc, "fsdp_config");
  } else if (fv) {
    ctx.ignored.push_back({fv->where, "fsdp_version", "no fsdp or fsdp_config: FSDP is off"});
  }
  if (const Node* c = f.take("context_parallel_size"))
    if (const auto v = as_int(f, "context_parallel_size", *c); v && *v > 1)
      f.set("plan.parallel.cp", std::to_string(*v), "context_parallel_size", *c);
  if (const Node* t = f.take("tensor_parallel_size"))
    if (const auto v = as_int(f, "tensor_parallel_size", *t); v && *v > 1)
      f.set("plan.parallel.tp", std::to_string(*v), "tensor_parallel_size", *t);
  if (const Node* c = f.take("torch_compile")) {
    if (c->is_scalar() && c->text == "auto")
      ctx.ignored.push_back(
          {c->where, "torch_compile", "auto: on with torch >= 2.5.1, which ftplan cannot see; --set job.compile=true"});
    else if (const auto b = as_bool(f, "torch_compile", *c))
      f.set("job.compile", *b ? "true" : "false", "torch_compile", *c);
  }
  f.ignore_matching("torch_compile_", "torch.compile options: ftplan models compile on or off");
  for (const char* k : {"unsloth_cross_entropy_loss", "unsloth_lora_mlp", "unsloth_lora_qkv", "unsloth_lora_o",
                        "unsloth_rms_norm", "unsloth_rope"})
    refuse_if_true(
        f, k, "axolotl removed its unsloth_* switches (it refuses them); its fused LoRA kernels are lora_*_kernel");
  // Under Ray (use_ray) ray_num_workers is the GPU count (schemas/integrations.py RayConfig).
  if (const Node* u = f.take("use_ray"); u && as_bool(f, "use_ray", *u).value_or(false)) {
    if (const Node* r = f.take("ray_num_workers"))
      if (const auto v = as_int(f, "ray_num_workers", *r))
        f.set("plan.cluster.gpus", std::to_string(*v), "ray_num_workers", *r, "one GPU a Ray worker");
  }
  f.ignore_matching("ray_", "Ray launcher setting: no effect on the step ftplan models");
  f.ignore("resources_per_worker", "Ray launcher setting: no effect on the step ftplan models");
  // ND parallelism (schemas/config.py dp_shard_size, dp_replicate_size): replication makes HSDP;
  // with both given, they and tp and cp are the world size.
  const Node* shard = f.take("dp_shard_size");
  const Node* rep = f.take("dp_replicate_size");
  long long shard_n = 0, rep_n = 0;  // 0: not given
  if (shard) shard_n = as_int(f, "dp_shard_size", *shard).value_or(0);
  if (rep) rep_n = as_int(f, "dp_replicate_size", *rep).value_or(0);
  if (rep_n > 1) f.set_sharding("hybrid_shard", "dp_replicate_size", *rep, false, "HSDP");
  if (shard_n > 0 && rep_n > 0) {
    // Each size capped at 2^20 before multiplying: the scenario reader refuses such counts by name.
    long long world = std::min(shard_n, 1LL << 20) * std::min(rep_n, 1LL << 20);
    for (const char* k : {"plan.parallel.tp", "plan.parallel.cp"})
      if (const Entry* e = ctx.draft.get(k)) world *= std::clamp(std::atoll(e->value.c_str()), 1LL, 1LL << 20);
    f.set("plan.cluster.gpus", std::to_string(std::min(world, 1LL << 40)), "dp_shard_size", *shard,
          "x dp_replicate_size x tensor_parallel_size x context_parallel_size");
  }
  // fp8 (schemas/config.py): torchao float8 training through accelerate.
  if (const Node* e = f.take("fp8"); e && as_bool(f, "fp8", *e).value_or(false)) {
    f.ctx().draft.erase("job.precision");
    f.ctx().draft.erase("_load_dtype_implied");  // the fp8 recipe keeps its own master weights
    f.set("job.precision", "fp8-mixed", "fp8", *e, "torchao float8 linear layers");
  }
  f.ignore_matching("fp8_", "float8 scaling options: ftplan models fp8 as a precision recipe");
  if (const Node* u = f.take("unfrozen_parameters"); u && !u->is_null())
    f.error(*u, "unfrozen_parameters",
            "training only the parameters these patterns name (the rest frozen, no adapters) is not modelled: ftplan "
            "models full, LoRA and QLoRA fine-tuning");
  if (const Node* p = f.take("plugins"); p && p->is_seq() && !p->elems.empty())
    f.not_modelled("plugins", *p,
                   "axolotl plugins (Liger kernels, cut cross-entropy and others change kernels and memory)");
  f.ignore_matching("liger_", "with the Liger plugin only");
  f.not_modelled_if_true("chunked_cross_entropy", "axolotl's chunked cross-entropy");
  for (const char* k : {"datasets",
                        "test_datasets",
                        "val_set_size",
                        "dataset_prepared_path",
                        "chat_template",
                        "chat_template_jinja",
                        "default_system_message",
                        "special_tokens",
                        "tokens",
                        "train_on_inputs",
                        "group_by_length",
                        "shuffle_merged_datasets",
                        "dataset_processes",
                        "dataset_exact_deduplication",
                        "pretraining_dataset",
                        "skip_prepare_dataset",
                        "dataset_shard_num",
                        "dataset_shard_idx",
                        "add_bos_token",
                        "remove_unused_columns"})
    f.ignore(k, kData);
  for (const char* k : {"output_dir",
                        "logging_steps",
                        "saves_per_epoch",
                        "save_steps",
                        "save_strategy",
                        "save_total_limit",
                        "save_safetensors",
                        "save_first_step",
                        "save_only_model",
                        "evals_per_epoch",
                        "eval_steps",
                        "eval_strategy",
                        "eval_batch_size",
                        "eval_table_size",
                        "eval_max_new_tokens",
                        "eval_causal_lm_metrics",
                        "do_causal_lm_eval",
                        "early_stopping_patience",
                        "resume_from_checkpoint",
                        "auto_resume_from_checkpoints",
                        "local_rank",
                        "debug",
                        "seed",
                        "strict",
                        "xformers_attention_kwargs",
                        "hf_use_auth_token",
                        "push_dataset_to_hub",
                        "gc_steps",
                        "profiler_steps",
                        "include_tokens_per_second",
                        "use_tensorboard",
                        "use_mlflow",
                        "use_comet",
                        "loss_watchdog_threshold",
                        "loss_watchdog_patience",
                        "ddp_timeout",
                        "ddp_bucket_cap_mb",
                        "ddp_broadcast_buffers",
                        "ddp_find_unused_parameters",
                        "world_size",
                        "ddp",
                        "special_tokens_file",
                        "dataloader_num_workers",
                        "dataloader_pin_memory",
                        "dataloader_prefetch_factor",
                        "warmup_steps_ratio",
                        "max_memory",
                        "gpu_memory_limit",
                        "lora_on_cpu",
                        "device_map",
                        "low_cpu_mem_usage",
                        "resize_token_embeddings_to_32x"})
    f.ignore(k, kLoop);
  f.ignore_matching("wandb_", "experiment tracking: no effect on the step ftplan models");
  f.ignore_matching("mlflow_", "experiment tracking: no effect on the step ftplan models");
  f.ignore_matching("comet_", "experiment tracking: no effect on the step ftplan models");
  f.ignore_matching("hub_", "saving the model: outside the training step");
  f.finish();
}

}  // namespace ftplan::io::import
