// torchtune recipe YAML. Keys and defaults: torchtune 0.7.0 (pytorch/torchtune bd2a0fc7), the
// recipes' cfg.get(...) calls in recipes/lora_finetune_distributed.py, full_finetune_distributed.py
// and *_single_device.py; model builders in torchtune/models/*/_model_builders.py.
#include <fmt/format.h>

#include "io/import/detail.hpp"

namespace ftplan::io::import {
namespace {

constexpr const char* kFormat = "torchtune";

// torchtune model builders (torchtune/models/<family>/_model_builders.py) -> zoo entries. The
// lora_ / qlora_ builders build the same architecture with adapters.
const std::vector<std::pair<std::string, std::string>>& builders() {
  static const std::vector<std::pair<std::string, std::string>> b = {
      {"llama3_1_8b", "llama-3.1-8b"},
      {"llama3_1_70b", "llama-3.1-70b"},
      {"llama3_1_405b", "llama-3.1-405b"},
      {"llama3_8b", "llama-3-8b"},
      {"llama3_70b", "llama-3-70b"},
      {"llama3_2_1b", "llama-3.2-1b"},
      {"llama3_2_3b", "llama-3.2-3b"},
      {"llama2_7b", "llama-2-7b"},
      {"llama2_13b", "llama-2-13b"},
      {"llama2_70b", "llama-2-70b"},
      {"mistral_7b", "mistral-7b"},
      {"gemma2_2b", "gemma-2-2b"},
      {"gemma2_9b", "gemma-2-9b"},
      {"gemma2_27b", "gemma-2-27b"},
      {"qwen2_5_0_5b", "qwen2.5-0.5b"},
      {"qwen2_5_7b_base", "qwen2.5-7b"},
      {"qwen2_5_7b_instruct", "qwen2.5-7b"},
      {"qwen2_5_14b_base", "qwen2.5-14b"},
      {"qwen2_5_14b_instruct", "qwen2.5-14b"},
      {"qwen2_5_32b_base", "qwen2.5-32b"},
      {"qwen2_5_32b_instruct", "qwen2.5-32b"},
      {"qwen2_5_72b_base", "qwen2.5-72b"},
      {"qwen2_5_72b_instruct", "qwen2.5-72b"},
      {"phi3_mini", "phi-3-mini"},
  };
  return b;
}

// torchtune's LoRA module names (torchtune/modules/peft/lora.py, LORA_ATTN_MODULES) -> ftplan targets.
std::string target_of(const std::string& m) {
  if (m == "q_proj") return "q";
  if (m == "k_proj") return "k";
  if (m == "v_proj") return "v";
  if (m == "output_proj") return "o";
  return {};
}

void read_model(Fields& top, const Node& block) {
  Fields m(top.ctx(), block, top.file(), "model", kFormat);
  bool lora = false;
  if (const Node* c = m.take("_component_")) {
    if (const auto comp = as_string(m, "_component_", *c)) {
      std::string builder = comp->substr(comp->rfind('.') == std::string::npos ? 0 : comp->rfind('.') + 1);
      std::string method = "full";
      if (builder.rfind("qlora_", 0) == 0)
        builder = builder.substr(6), method = "qlora";
      else if (builder.rfind("lora_", 0) == 0)
        builder = builder.substr(5), method = "lora";
      std::string zoo_name;
      for (const auto& [b, z] : builders())
        if (b == builder) zoo_name = z;
      set_model(m, "_component_", *c, "torchtune builder " + builder, zoo_name);
      // The qlora_ builders are the lora_ builders with quantize_base=True (functools.partial in
      // torchtune/models/*/_model_builders.py); a keyword given in the recipe replaces the partial's,
      // so quantize_base decides for either builder.
      const Node* q = m.take("quantize_base");
      int quantize = -1;  // not given
      if (q)
        if (const auto b = as_bool(m, "quantize_base", *q)) quantize = *b ? 1 : 0;
      if (method != "full" && quantize >= 0) {
        method = quantize ? "qlora" : "lora";
        m.set("job.method", method, "quantize_base", *q, quantize ? "a quantized base" : "a bf16 base");
      } else {
        if (q)
          m.error(*q, "quantize_base", "only the lora_ builders take quantize_base (a full fine-tune has no adapters)");
        m.set("job.method", method, "_component_", *c, method == "full" ? "no adapters" : method + "_ builder");
      }
      // torchtune's QLoRA quantizes the base to NF4 (torchao NF4Tensor: blocks of 64, the scales
      // quantized again: torchtune/modules/peft/lora.py to_nf4, torchao/dtypes/nf4tensor.py).
      if (method == "qlora")
        m.set("job.quant.kind", "nf4", q ? "quantize_base" : "_component_", q ? *q : *c, "torchao NF4, blocks of 64");
      lora = method != "full";
    }
  }
  std::vector<std::string> targets;
  bool targets_given = false;
  if (const Node* a = m.take("lora_attn_modules")) {
    targets_given = true;
    if (a->is_seq()) {
      for (const auto& e : a->elems) {
        const std::string t = e.is_scalar() ? target_of(e.text) : std::string();
        if (t.empty())
          m.error(e, "lora_attn_modules",
                  fmt::format("expected q_proj, k_proj, v_proj or output_proj, got '{}'", e.text));
        else
          targets.push_back(t);
      }
    } else {
      m.error(*a, "lora_attn_modules", "expected a list");
    }
  }
  if (const Node* mlp = m.take("apply_lora_to_mlp")) {
    targets_given = true;
    if (const auto b = as_bool(m, "apply_lora_to_mlp", *mlp); b && *b)
      targets.insert(targets.end(), {"gate", "up", "down"});
  }
  if (targets_given && lora) {
    const Node& at =
        block.find("lora_attn_modules") ? *block.find("lora_attn_modules") : *block.find("apply_lora_to_mlp");
    m.set("job.lora.targets", yaml_flow_list(targets), "lora_attn_modules", at, "with apply_lora_to_mlp");
  }
  m.not_modelled_if_true("apply_lora_to_output", "a LoRA adapter on the output projection (LM head)");
  m.take_int("lora_rank", "job.lora.rank");
  if (const Node* a = m.take("lora_alpha")) {
    if (a->is_scalar()) m.set("job.lora.alpha", yaml_scalar(a->text), "lora_alpha", *a);
  }
  if (const Node* d = m.take("lora_dropout")) {
    if (d->is_scalar()) m.set("job.lora.dropout", yaml_scalar(d->text), "lora_dropout", *d);
  }
  m.not_modelled_if_true("use_dora", "DoRA's magnitude vectors and extra norm");
  m.finish();
}

// Optimizers by class path. bitsandbytes' paged optimizers (the single-device LoRA recipes'
// default, bitsandbytes.optim.PagedAdamW) keep their state in CUDA unified memory: job.optimizer.paged.
void read_optimizer(Fields& top, const Node& block) {
  Fields o(top.ctx(), block, top.file(), "optimizer", kFormat);
  if (const Node* c = o.take("_component_")) {
    if (const auto comp = as_string(o, "_component_", *c)) {
      const std::string cls = comp->substr(comp->rfind('.') == std::string::npos ? 0 : comp->rfind('.') + 1);
      std::string name;
      if (cls == "AdamW" || cls == "Adam" || cls == "PagedAdamW" || cls == "PagedAdamW32bit")
        name = "adamw";
      else if (cls == "AdamW8bit" || cls == "Adam8bit" || cls == "PagedAdamW8bit")
        name = "adamw-8bit";
      else if (cls == "SGD")
        name = "sgd";
      else if (cls == "Adafactor")
        name = "adafactor";
      else if (cls == "Lion" || cls == "PagedLion")
        name = "lion";
      if (name.empty()) {
        o.not_modelled("_component_", *c, fmt::format("optimizer {}", *comp));
        o.ctx().draft.set(o.entry("_optimizer_unmodelled", yaml_scalar(*comp), "_component_", *c));
      } else
        o.set("job.optimizer.name", name, "_component_", *c);
      if (!name.empty() && cls.rfind("Paged", 0) == 0) o.set("job.optimizer.paged", "true", "_component_", *c);
    }
  }
  o.take_bool("fused", "job.optimizer.implementation", "fused", "");
  o.take_bool("foreach", "job.optimizer.implementation", "foreach", "");
  o.ignore_matching("", kHyperparameter);
  o.finish();
}

// tokenizer.max_seq_len and dataset.packed.
void read_data(Context& ctx, Fields& f, const std::string& file) {
  if (const Node* t = f.take("tokenizer"); t && t->is_map()) {
    Fields tk(ctx, *t, file, "tokenizer", kFormat);
    if (const Node* s = tk.take("max_seq_len")) {
      if (s->is_null() || (s->is_scalar() && s->text == "null"))
        ctx.ignored.push_back({s->where, "tokenizer.max_seq_len",
                               "null: samples are not truncated, so the sequence length is the dataset's; give --seq"});
      else if (const auto v = as_int(tk, "max_seq_len", *s))
        tk.set("job.seq_len", std::to_string(*v), "max_seq_len", *s);
    }
    tk.ignore_matching("", "tokenizer files: no effect on memory or step time");
    tk.finish();
  }
  // dataset: one builder, or a list of them, which torchtune concatenates (the recipes' _setup_data);
  // packing is each builder's `packed`, and ConcatDataset refuses a mix (torchtune/datasets/_concat.py).
  if (const Node* d = f.take("dataset")) {
    std::vector<const Node*> parts;
    if (d->is_map()) parts.push_back(d);
    if (d->is_seq())
      for (const auto& e : d->elems) parts.push_back(&e);
    std::optional<bool> packed;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::string prefix = d->is_seq() ? fmt::format("dataset[{}]", i) : "dataset";
      if (!parts[i]->is_map()) {
        f.error(*parts[i], prefix, "expected a dataset builder (a mapping with _component_)");
        continue;
      }
      Fields ds(ctx, *parts[i], file, prefix, kFormat);
      if (const Node* p = ds.take("packed")) {
        const auto b = as_bool(ds, "packed", *p);
        if (b && packed && *packed != *b)
          ds.error(*p, "packed", "the datasets of one recipe are all packed or none (torchtune refuses a mix)");
        else if (b)
          ds.set("job.samples.packing", *b ? "packed" : "padded", "packed", *p);
        if (b) packed = b;
      }
      ds.ignore_matching("", "dataset source: ftplan takes sample lengths from job.samples");
      ds.finish();
    }
  }
}

// batch_size, gradient_accumulation_steps, and the steps: epochs x max_steps_per_epoch.
void read_steps(Context& ctx, Fields& f) {
  f.take_int("batch_size", "job.micro_batch");
  f.take_int("gradient_accumulation_steps", "_gas");
  long long epochs = -1;
  const Node* epochs_node = f.take("epochs");
  if (epochs_node)
    if (const auto v = as_int(f, "epochs", *epochs_node)) epochs = *v;
  if (const Node* s = f.take("max_steps_per_epoch")) {
    if (s->is_null() || (s->is_scalar() && s->text == "null")) {
      if (epochs_node)
        ctx.ignored.push_back(
            {epochs_node->where, "epochs", "epochs need the dataset size in tokens: give --tokens or --steps"});
    } else if (const auto v = as_int(f, "max_steps_per_epoch", *s); v && epochs > 0) {
      // Both are any 64-bit integers in the file: a product past that is refused here (the
      // scenario reader bounds job.steps far below it, and checks the sign).
      long long steps = 0;
      if (__builtin_mul_overflow(*v, epochs, &steps))
        f.error(*s, "max_steps_per_epoch",
                fmt::format("{} steps an epoch x {} epochs is past any step count ftplan takes", *v, epochs));
      else
        f.set("job.steps", std::to_string(steps), "max_steps_per_epoch", *s, fmt::format("x epochs {}", epochs));
    }
  } else if (epochs_node) {
    ctx.ignored.push_back(
        {epochs_node->where, "epochs", "epochs need the dataset size in tokens: give --tokens or --steps"});
  }
}

// dtype, activation checkpointing and offloading, compile.
void read_precision_and_memory(Fields& f) {
  if (const Node* d = f.take("dtype")) {
    if (const auto t = as_string(f, "dtype", *d)) {
      // torchtune trains in the dtype given, without autocast or fp32 master weights
      // (torchtune/training/precision.py, recipes' training.set_default_dtype).
      if (*t == "bf16")
        f.set("job.precision", "bf16", "dtype", *d, "pure bf16: no fp32 master copy");
      else if (*t == "fp32")
        f.set("job.precision", "fp32", "dtype", *d);
      else
        f.error(*d, "dtype", fmt::format("expected bf16 or fp32 (torchtune refuses fp16 for training), got '{}'", *t));
    }
  }
  f.take_bool("enable_activation_checkpointing", "job.activation_checkpointing", "full", "none");
  if (const Node* a = f.take("ac_mode")) {
    if (!a->is_null() && a->is_scalar() && a->text != "null")
      f.not_modelled("ac_mode", *a, "torchtune's experimental selective AC modes");
  }
  f.ignore("ac_option", "with ac_mode only");
  if (const Node* o = f.take("enable_activation_offloading"))
    if (const auto b = as_bool(f, "enable_activation_offloading", *o); b && *b)
      // torchtune's OffloadActivations (torchtune/training/_activation_offloading.py) moves each saved
      // tensor to pinned host memory after forward and back before backward, as ftplan's activations: cpu.
      f.set("plan.offload.activations", "cpu", "enable_activation_offloading", *o);
  f.take_bool("compile", "job.compile", "true", "false");
}

// FSDP2's CPU offload and resharding, and the parallel dims of the distributed recipes.
void read_parallel(Fields& f) {
  if (const Node* o = f.take("fsdp_cpu_offload"))
    if (const auto b = as_bool(f, "fsdp_cpu_offload", *o); b && *b)
      // FSDP2 CPUOffloadPolicy: sharded parameters, gradients and the optimizer step on the host.
      f.set_cpu_offload("fsdp_cpu_offload", *o);
  f.take_int("tensor_parallel_dim", "plan.parallel.tp");
  f.take_int("context_parallel_dim", "plan.parallel.cp");
  // Replication over a 2-D mesh is HSDP; without it reshard_after_forward picks FULL_SHARD or
  // SHARD_GRAD_OP (fully_shard(reshard_after_forward=...), torchtune/training/_distributed.py).
  bool hsdp = false;
  if (const Node* r = f.take("data_parallel_replicate_dim"))
    if (const auto v = as_int(f, "data_parallel_replicate_dim", *r); v && *v > 1) {
      f.set("plan.parallel.fsdp", "hybrid_shard", "data_parallel_replicate_dim", *r);
      hsdp = true;
    }
  if (const Node* r = f.take("fsdp_reshard_after_forward")) {
    const auto b = as_bool(f, "fsdp_reshard_after_forward", *r);
    if (b && !hsdp)
      f.set("plan.parallel.fsdp", *b ? "full_shard" : "shard_grad_op", "fsdp_reshard_after_forward", *r);
    else if (b && !*b)
      f.not_modelled("fsdp_reshard_after_forward", *r,
                     "HSDP that keeps parameters gathered from forward to backward (modelled as hybrid_shard, which "
                     "gathers them again in backward)");
  }
  f.ignore("data_parallel_shard_dim",
           "-1 (the default): the GPUs left after tp, cp and replication; ftplan derives dp the same way");
}

// loss._component_: chunked cross-entropy or not.
void read_loss(Context& ctx, Fields& f) {
  const Node* l = f.take("loss");
  if (!l || !l->is_map()) return;
  if (const Node* c = l->find("_component_"); c && c->is_scalar()) {
    ctx.taken.emplace_back(f.file(), "loss._component_");
    // CEWithChunkedOutputLoss and LinearCrossEntropyLoss split the output projection and loss into
    // num_output_chunks = 8 pieces (torchtune/modules/loss/cross_entropy_loss.py).
    if (c->text.find("CEWithChunkedOutputLoss") != std::string::npos ||
        c->text.find("LinearCrossEntropyLoss") != std::string::npos)
      f.ctx().draft.set(f.entry("job.loss.chunks", "8", "loss._component_", *c, "num_output_chunks 8"));
    else
      ctx.ignored.push_back({c->where, "loss._component_", "unchunked cross-entropy: ftplan's default loss"});
  }
  for (const auto& [k, v] : l->items)
    if (k != "_component_") ctx.ignored.push_back({v.where, "loss." + k, kNoEffect});
}

}  // namespace

void read_torchtune(Context& ctx, const Node& root, const std::string& file) {
  Fields f(ctx, root, file, {}, kFormat);
  ctx.draft.set({"job.framework", "torchtune", fmt::format("{}: a torchtune recipe", file), root.where, "", false});
  if (const Node* m = f.take("model"); m && m->is_map()) read_model(f, *m);
  read_data(ctx, f, file);
  read_steps(ctx, f);
  read_precision_and_memory(f);
  if (const Node* o = f.take("optimizer"); o && o->is_map()) read_optimizer(f, *o);
  f.take_bool("optimizer_in_bwd", "job.optimizer.in_backward", "true", "");
  read_parallel(f);
  read_loss(ctx, f);
  if (const Node* d = f.take("device"))
    if (d->is_scalar() && d->text != "cuda")
      f.not_modelled("device", *d, fmt::format("training on '{}' (ftplan models NVIDIA GPUs)", d->text));
  f.ignore("custom_sharded_layers", "not modelled yet: embeddings and output sharded as their own FSDP units");
  f.ignore("clip_grad_norm", kNoEffect);
  f.ignore("lr_scheduler", "learning-rate schedule: no effect on memory or step time");
  for (const char* k :
       {"checkpointer", "output_dir", "metric_logger", "log_every_n_steps", "log_peak_memory_stats", "log_level",
        "profiler", "resume_from_checkpoint", "save_adapter_weights_only", "seed", "shuffle", "dataset_val",
        "batch_size_val", "run_val_every_n_steps", "enable_async_checkpointing", "low_cpu_ram",
        "cudnn_deterministic_mode", "collate_fn", "profile_memory"})
    f.ignore(k, kIo);
  f.finish();
}

}  // namespace ftplan::io::import
