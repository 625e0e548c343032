// accelerate config YAML (`accelerate config` writes it; `accelerate launch --config_file` reads
// it). Keys and defaults: accelerate 1.x (huggingface/accelerate 16cb6eb8),
// src/accelerate/commands/config/config_args.py (ClusterConfig) and src/accelerate/utils/dataclasses.py
// (FullyShardedDataParallelPlugin, DeepSpeedPlugin).
#include <filesystem>

#include <fmt/format.h>

#include "io/import/detail.hpp"

namespace ftplan::io::import {
namespace {

constexpr const char* kFormat = "accelerate";
constexpr const char* kLaunch = "launcher setting: no effect on memory or step time";

std::string precision_of(const std::string& mp) {
  if (mp == "no") return "fp32";
  if (mp == "fp16") return "fp16-mixed";
  if (mp == "bf16") return "bf16-mixed";
  if (mp == "fp8") return "fp8-mixed";
  return {};
}

void read_fsdp_config(Fields& top, const Node& block) {
  Fields f(top.ctx(), block, top.file(), top.key_path("fsdp_config"), kFormat);
  std::string version = "1";
  if (const Node* v = f.take("fsdp_version")) {
    if (const auto n = as_int(f, "fsdp_version", *v)) {
      version = std::to_string(*n);
      if (*n != 1 && *n != 2) f.error(*v, "fsdp_version", fmt::format("expected 1 or 2, got {}", *n));
    }
    f.set("job.framework", version == "2" ? "pytorch-fsdp2" : "pytorch-fsdp", "fsdp_version", *v);
  } else {
    // FullyShardedDataParallelPlugin.fsdp_version defaults to 1 (utils/dataclasses.py).
    f.ctx().draft.set(
        {"job.framework", "pytorch-fsdp",
         fmt::format("{}: distributed_type FSDP (fsdp_version: default of accelerate 1.x, 1)", top.file()), block.where,
         top.key_path("fsdp_config"), false});
  }
  for (const char* key : {"fsdp_sharding_strategy", "fsdp_reshard_after_forward"}) {
    const Node* s = f.take(key);
    if (!s) continue;
    const auto text = as_string(f, key, *s);
    if (!text) continue;
    const bool resharding = std::string(key) == "fsdp_reshard_after_forward";
    const std::string sharding = fsdp_sharding_of(*text, resharding);
    if (sharding.empty())
      f.not_modelled(key, *s, fmt::format("FSDP sharding '{}'", *text));
    else
      f.set_sharding(sharding, key, *s, resharding && (*text == "true" || *text == "True"));
  }
  if (const Node* o = f.take("fsdp_offload_params")) {
    if (const auto b = as_bool(f, "fsdp_offload_params", *o); b && *b) {
      // torch CPUOffload(offload_params=True): parameters and gradients live on the host and the
      // optimizer steps there (torch/distributed/fsdp/api.py CPUOffload).
      f.set_cpu_offload("fsdp_offload_params", *o);
    }
  }
  // true checkpoints every wrapped layer; false only leaves it to the model (the Trainer's
  // gradient_checkpointing may still turn it on), so it decides nothing.
  f.take_bool("fsdp_activation_checkpointing", "job.activation_checkpointing", "full", "");
  if (const Node* w = f.take("fsdp_auto_wrap_policy")) {
    if (const auto t = as_string(f, "fsdp_auto_wrap_policy", *w); t && *t != "TRANSFORMER_BASED_WRAP")
      f.not_modelled("fsdp_auto_wrap_policy", *w,
                     fmt::format("wrap policy {} (ftplan wraps each transformer layer, TRANSFORMER_BASED_WRAP)", *t));
  }
  f.ignore("fsdp_transformer_layer_cls_to_wrap", "ftplan wraps each transformer layer");
  f.ignore("fsdp_min_num_params", "not modelled yet: SIZE_BASED_WRAP units");
  f.ignore("fsdp_backward_prefetch", "ftplan prefetches the next unit in backward (BACKWARD_PRE)");
  f.ignore("fsdp_forward_prefetch", "not modelled yet: explicit forward prefetch");
  f.ignore("fsdp_state_dict_type", kIo);
  f.ignore("fsdp_sync_module_states", "model loading: outside the training step");
  f.ignore("fsdp_cpu_ram_efficient_loading", "model loading: outside the training step");
  f.ignore("fsdp_use_orig_params", kNoEffect);
  f.ignore("fsdp_limit_all_gathers", "ftplan's FSDP1 profile limits all-gathers in flight to two (the default True)");
  f.finish();
}

void read_deepspeed_config(Fields& top, const Node& block, const std::filesystem::path& path) {
  Fields f(top.ctx(), block, top.file(), top.key_path("deepspeed_config"), kFormat);
  if (const Node* file = f.take("deepspeed_config_file")) {
    if (const auto p = as_string(f, "deepspeed_config_file", *file); p && !p->empty() && *p != "none") {
      // accelerate opens it from the working directory; the examples in accelerate's repository
      // name ../deepspeed_config_templates/... from the config file's folder.
      top.ctx().read_file(resolve_named_file(*p, path), ConfigFormat::deepspeed, file->where);
    }
  }
  f.take_int("zero_stage", "plan.parallel.zero");
  if (const Node* g = f.take("gradient_accumulation_steps"); g && !is_auto(*g))
    if (const auto v = as_int(f, "gradient_accumulation_steps", *g))
      f.set("_gas", std::to_string(*v), "gradient_accumulation_steps", *g);
  if (const Node* o = f.take("offload_optimizer_device")) {
    if (const auto d = as_string(f, "offload_optimizer_device", *o); d && (*d == "cpu" || *d == "nvme")) {
      f.set("plan.offload.optimizer", *d, "offload_optimizer_device", *o);
      f.set("plan.offload.optimizer_step", "cpu", "offload_optimizer_device", *o,
            "DeepSpeedCPUAdam runs the step on the host");
      f.set("plan.offload.gradients", "cpu", "offload_optimizer_device", *o,
            "gradient partitions go to the host for the CPU step");
    } else if (d && *d != "none") {
      f.error(*o, "offload_optimizer_device", fmt::format("expected none, cpu or nvme, got '{}'", *d));
    }
  }
  if (const Node* o = f.take("offload_param_device")) {
    if (const auto d = as_string(f, "offload_param_device", *o); d && (*d == "cpu" || *d == "nvme"))
      f.set("plan.offload.params", *d, "offload_param_device", *o);
    else if (d && *d != "none")
      f.error(*o, "offload_param_device", fmt::format("expected none, cpu or nvme, got '{}'", *d));
  }
  f.ignore("offload_optimizer_nvme_path", "ftplan takes NVMe capacity and speed from the node's drives in the catalog");
  f.ignore("offload_param_nvme_path", "ftplan takes NVMe capacity and speed from the node's drives in the catalog");
  f.ignore("gradient_clipping", kNoEffect);
  f.ignore("zero3_init_flag", "model loading: outside the training step");
  f.ignore("zero3_save_16bit_model", kIo);
  f.ignore("deepspeed_multinode_launcher", kLaunch);
  f.ignore("deepspeed_hostfile", kLaunch);
  f.ignore("deepspeed_exclusion_filter", kLaunch);
  f.ignore("deepspeed_inclusion_filter", kLaunch);
  f.ignore("deepspeed_moe_layer_cls_names", "ftplan reads experts from the model");
  f.finish();
}

// mixed_precision: the recipe, and under FSDP accelerate's MixedPrecision.
void read_mixed_precision(Fields& f, const std::string& type) {
  if (const Node* m = f.take("mixed_precision")) {
    if (const auto t = as_string(f, "mixed_precision", *m)) {
      const std::string p = precision_of(*t);
      if (p.empty())
        f.error(*m, "mixed_precision", fmt::format("expected no, fp16, bf16 or fp8, got '{}'", *t));
      else
        f.set("job.precision", p, "mixed_precision", *m);
      // FSDP under accelerate casts parameters and reduces gradients in the same 16-bit type, for
      // FSDP1 and FSDP2 alike (utils/dataclasses.py FullyShardedDataParallelPlugin.set_mixed_precision:
      // param_dtype = reduce_dtype = dtype), unlike torchtitan's FSDP2, which reduces in fp32.
      if (type == "FSDP" && (*t == "bf16" || *t == "fp16")) {
        f.set("job.fsdp_mixed_precision.param_dtype", *t, "mixed_precision", *m, "accelerate's FSDP MixedPrecision");
        f.set("job.fsdp_mixed_precision.reduce_dtype", *t, "mixed_precision", *m, "accelerate's FSDP MixedPrecision");
      }
    }
  }
}

// num_processes and num_machines: the GPUs and GPUs per node.
void read_processes(Fields& f) {
  long long processes = 0;
  if (const Node* n = f.take("num_processes")) {
    if (const auto v = as_int(f, "num_processes", *n)) {
      processes = *v;
      f.set("plan.cluster.gpus", std::to_string(*v), "num_processes", *n);
    }
  }
  if (const Node* n = f.take("num_machines")) {
    if (const auto v = as_int(f, "num_machines", *n)) {
      if (processes > 0 && *v > 1 && processes % *v == 0)
        f.set("plan.cluster.gpus_per_node", std::to_string(processes / *v), "num_machines", *n,
              fmt::format("num_processes {} / num_machines {}", processes, *v));
      else if (processes > 0 && *v > 1)
        f.error(*n, "num_machines",
                fmt::format("num_processes {} is not a multiple of num_machines {}", processes, *v));
    }
  }
}

}  // namespace

// long: one key after another in the format's order, each a few lines with its source; they share
// the reader's Fields (what was read, what is left unknown), which a split would pass everywhere.
void read_accelerate(Context& ctx, const Node& root, const std::string& file, const std::filesystem::path& path) {
  Fields f(ctx, root, file, {}, kFormat);
  std::string type = "NO";  // ClusterConfig.distributed_type has no default; `accelerate config` writes NO for one GPU
  if (const Node* d = f.take("distributed_type")) {
    if (const auto t = as_string(f, "distributed_type", *d)) {
      type = *t;
      if (type == "MULTI_GPU" || type == "NO") {
        // torch DDP (or one process): ftplan's hf-trainer profile is plain DDP.
        ctx.draft.set_default(
            "job.framework", "hf-trainer",
            fmt::format("{}: distributed_type {} (torch DDP: ftplan's hf-trainer profile)", file, type));
        if (type == "NO" && !root.find("num_processes"))
          f.set("plan.cluster.gpus", "1", "distributed_type", *d, "one process");
      } else if (type == "MEGATRON_LM") {
        f.error(*d, "distributed_type",
                "accelerate's Megatron-LM plugin is not read (its layout is in megatron_lm_config): give --framework "
                "megatron with --tp, --pp and the job's flags");
      } else if (type != "FSDP" && type != "DEEPSPEED") {
        f.error(*d, "distributed_type",
                fmt::format("distributed type {}: {} (ftplan models NVIDIA GPUs)", type,
                            type == "MULTI_CPU"              ? "training on CPUs"
                            : type == "XLA" || type == "TPU" ? "TPUs"
                                                             : "another accelerator than NVIDIA GPUs"));
      }
    }
  }
  read_mixed_precision(f, type);
  read_processes(f);
  if (const Node* c = f.take("fsdp_config"); c && c->is_map() && type == "FSDP")
    read_fsdp_config(f, *c);
  else if (c)
    ctx.ignored.push_back({c->where, "fsdp_config", "distributed_type is not FSDP: accelerate does not use it"});
  if (const Node* c = f.take("deepspeed_config"); c && c->is_map() && type == "DEEPSPEED") {
    ctx.draft.set({"job.framework", "deepspeed", fmt::format("{}: distributed_type DEEPSPEED", file), c->where,
                   "distributed_type", false});
    read_deepspeed_config(f, *c, path);
  } else if (c) {
    ctx.ignored.push_back(
        {c->where, "deepspeed_config", "distributed_type is not DEEPSPEED: accelerate does not use it"});
  }
  f.not_modelled_if_true("use_cpu", "training on CPUs");
  if (const Node* d = f.take("dynamo_config"); d && d->is_map()) {
    Fields dc(ctx, *d, file, "dynamo_config", kFormat);
    if (const Node* b = dc.take("dynamo_backend"))
      if (const auto t = as_string(dc, "dynamo_backend", *b))
        dc.set("job.compile", *t != "NO" && *t != "no" ? "true" : "false", "dynamo_backend", *b);
    dc.ignore_matching("", "torch.compile options (mode, fullgraph, dynamic): ftplan models compile on or off");
    dc.finish();
  }
  f.ignore("downcast_bf16", "TPU only");
  for (const char* k : {"compute_environment", "debug", "machine_rank", "main_training_function", "rdzv_backend",
                        "same_network", "main_process_ip", "main_process_port", "gpu_ids", "enable_cpu_affinity"})
    f.ignore(k, kLaunch);
  f.ignore_matching("tpu_", "TPU only");
  f.ignore_matching("ipex_", "Intel CPU/XPU only");
  f.ignore("megatron_lm_config", "not modelled yet: accelerate's Megatron-LM plugin");
  f.ignore("fp8_config", "ftplan models fp8 as a precision recipe, not its scaling options");
  // ParallelismConfig (accelerate parallelism_config.py): dp_replicate x dp_shard x tp x cp (x sp) ranks.
  if (const Node* pc = f.take("parallelism_config"); pc && pc->is_map()) {
    Fields p(ctx, *pc, file, "parallelism_config", kFormat);
    const auto size = [&](const char* k) -> std::pair<const Node*, long long> {
      const Node* n = p.take(k);
      const auto v = n ? as_int(p, k, *n) : std::nullopt;
      return {n, v ? *v : 1};
    };
    const auto [rep, rep_n] = size("parallelism_config_dp_replicate_size");
    size("parallelism_config_dp_shard_size");  // the rest of the GPUs, as ftplan derives dp
    const auto [tp, tp_n] = size("parallelism_config_tp_size");
    const auto [cp, cp_n] = size("parallelism_config_cp_size");
    const auto [sp, sp_n] = size("parallelism_config_sp_size");
    if (rep_n > 1 && type == "FSDP")
      p.set_sharding("hybrid_shard", "parallelism_config_dp_replicate_size", *rep, false, "HSDP");
    if (tp_n > 1) p.set("plan.parallel.tp", std::to_string(tp_n), "parallelism_config_tp_size", *tp);
    if (cp_n > 1) p.set("plan.parallel.cp", std::to_string(cp_n), "parallelism_config_cp_size", *cp, "ring attention");
    if (sp_n > 1)
      // DeepSpeed Ulysses: activations split by sequence as context parallelism splits them; its
      // all-to-all of heads is costed as ring attention's K/V exchange.
      p.set("plan.parallel.cp", std::to_string(sp_n), "parallelism_config_sp_size", *sp,
            "Ulysses sequence parallelism, costed as context parallelism");
    p.ignore_matching("parallelism_config_sp_", "Ulysses options: no effect on memory or step time");
    p.ignore_matching("parallelism_config_cp_", "context-parallel options: ftplan models ring attention");
    p.finish();
  }
  f.finish();
}

}  // namespace ftplan::io::import
