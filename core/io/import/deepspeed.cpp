// DeepSpeed ds_config.json. Keys and defaults: DeepSpeed 0.16.5 (microsoft/DeepSpeed 38327e07),
// deepspeed/runtime/config.py, deepspeed/runtime/zero/config.py, deepspeed/runtime/zero/offload_config.py.
// "auto" values are those transformers' DeepSpeed integration fills from TrainingArguments
// (src/transformers/integrations/deepspeed.py, HfTrainerDeepSpeedConfig.trainer_config_process):
// they are left to the TrainingArguments file, or to its defaults (import.cpp, finish()).
#include <fmt/format.h>

#include "inventory/inventory.hpp"  // kSwapBytesPerElement
#include "io/import/detail.hpp"

namespace ftplan::io::import {
namespace {

constexpr const char* kFormat = "DeepSpeed";
constexpr const char* kBuckets =
    "not modelled yet: communication bucket and prefetch sizes (ftplan's schedule moves whole layers)";

// Where ZeRO keeps an offloaded state: DeepSpeed's OffloadDeviceEnum (none, cpu, nvme).
std::optional<std::string> offload_device(Fields& f, std::string_view key, const Node& n) {
  const auto d = as_string(f, key, n);
  if (!d) return std::nullopt;
  if (*d == "none" || *d == "cpu" || *d == "nvme") return *d;
  f.error(n, key, fmt::format("expected none, cpu or nvme, got '{}'", *d));
  return std::nullopt;
}

// Whether the optimizer state goes to NVMe (what sub_group_size and the swap pipelining act on).
bool read_offload_optimizer(Fields& z, const Node& block) {
  Fields o(z.ctx(), block, z.file(), z.key_path("offload_optimizer"), kFormat);
  bool nvme = false;
  if (const Node* d = o.take("device")) {
    if (const auto dev = offload_device(o, "device", *d); dev && *dev != "none") {
      nvme = *dev == "nvme";
      o.set("plan.offload.optimizer", *dev, "device", *d);
      // "Optimizer computation is offload to CPU regardless of device option" (offload_config.py).
      o.set("plan.offload.optimizer_step", "cpu", "device", *d, "DeepSpeedCPUAdam runs the step on the host");
      // ZeRO-Offload copies each gradient partition to host memory for the CPU step (Ren et al. 2021, sec. 4.1).
      o.set("plan.offload.gradients", "cpu", "device", *d, "gradient partitions go to the host for the CPU step");
    }
  }
  o.take_bool("pin_memory", "plan.offload.pinned", "true", "false");
  o.ignore("nvme_path", "ftplan takes NVMe capacity and speed from the node's drives in the catalog");
  // The swap buffers and the swap pipelining act only where the state is swapped (stage3.py:
  // PartitionedOptimizerSwapper, or PipelinedOptimizerSwapper when offload_optimizer.pipeline,
  // only with device nvme).
  if (nvme)
    o.take_int("buffer_count", "plan.offload.optimizer_buffer_count");
  else
    o.ignore("buffer_count", "acts on device: nvme only (DeepSpeed swaps no optimizer state otherwise)");
  for (const char* key : {"pipeline_read", "pipeline_write"}) {
    if (nvme)
      o.take_bool(key, std::string("plan.offload.") + key, "true", "false");
    else
      o.ignore(key, "acts on device: nvme only (DeepSpeed swaps no optimizer state otherwise)");
  }
  o.ignore("pipeline", "DeepSpeed sets it itself, from pipeline_read or pipeline_write (offload_config.py)");
  o.ignore("fast_init", kNoEffect);
  o.ignore("ratio", "not modelled yet: offloading a fraction of the optimizer (ZeRO-Offload++ partial offload)");
  o.finish();
  return nvme;
}

void read_offload_param(Fields& z, const Node& block) {
  Fields o(z.ctx(), block, z.file(), z.key_path("offload_param"), kFormat);
  if (const Node* d = o.take("device"))
    if (const auto dev = offload_device(o, "device", *d); dev && *dev != "none")
      o.set("plan.offload.params", *dev, "device", *d);
  if (const Node* p = o.take("pin_memory")) {
    // One offload.pinned in ftplan; DeepSpeed pins parameter and optimizer buffers separately.
    const Entry* have = o.ctx().draft.get("plan.offload.pinned");
    const auto b = as_bool(o, "pin_memory", *p);
    if (b && have && have->value != (*b ? "true" : "false"))
      o.not_modelled("pin_memory", *p,
                     "pinning parameter buffers differently from optimizer buffers (ftplan has one offload.pinned)");
    else if (b)
      o.set("plan.offload.pinned", *b ? "true" : "false", "pin_memory", *p);
  }
  o.take_int("buffer_count", "plan.offload.buffer_count");
  // DeepSpeed counts offload_param.buffer_size in elements of the 16-bit parameters it swaps
  // (runtime/swap_tensor/partitioned_param_swapper.py: elements_per_buffer = buffer_size, the
  // buffers allocated as that many fp16/bf16 elements): 1e8 is 200 MB. The scenario takes bytes.
  if (const Node* b = o.take("buffer_size"))
    if (const auto n = as_int(o, "buffer_size", *b))
      o.set("plan.offload.buffer_size", fmt::format("{} B", *n * 2), "buffer_size", *b,
            "elements x 2 bytes (16-bit parameters)");
  o.ignore("nvme_path", "ftplan takes NVMe capacity and speed from the node's drives in the catalog");
  o.ignore("max_in_cpu", "not modelled yet: a host cache of NVMe-resident parameters");
  o.finish();
}

void read_zero(Fields& top, const Node& block) {
  Fields z(top.ctx(), block, top.file(), top.key_path("zero_optimization"), kFormat);
  if (const Node* s = z.take("stage")) {
    if (const auto v = as_int(z, "stage", *s)) z.set("plan.parallel.zero", std::to_string(*v), "stage", *s);
  }
  bool optimizer_nvme = false;
  if (const Node* o = z.take("offload_optimizer"); o && o->is_map()) optimizer_nvme = read_offload_optimizer(z, *o);
  if (const Node* p = z.take("offload_param"); p && p->is_map()) read_offload_param(z, *p);
  // Before offload_optimizer (DeepSpeed < 0.3.15): "cpu_offload": true; still accepted, deprecated.
  if (const Node* c = z.take("cpu_offload")) {
    if (const auto b = as_bool(z, "cpu_offload", *c); b && *b) {
      z.set("plan.offload.optimizer", "cpu", "cpu_offload", *c, "deprecated form of offload_optimizer.device cpu");
      z.set("plan.offload.optimizer_step", "cpu", "cpu_offload", *c, "DeepSpeedCPUAdam runs the step on the host");
      z.set("plan.offload.gradients", "cpu", "cpu_offload", *c, "gradient partitions go to the host for the CPU step");
    }
  }
  if (const Node* c = z.take("cpu_offload_param")) {
    if (const auto b = as_bool(z, "cpu_offload_param", *c); b && *b)
      z.set("plan.offload.params", "cpu", "cpu_offload_param", *c, "deprecated form of offload_param.device cpu");
  }
  z.take_bool("cpu_offload_use_pin_memory", "plan.offload.pinned", "true", "false");
  for (const char* k : {"reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size",
                        "prefetch_bucket_size", "stage3_param_persistence_threshold", "param_persistence_threshold",
                        "stage3_model_persistence_threshold", "use_multi_rank_bucket_allreduce"})
    z.ignore(k, kBuckets);
  // ZeRO-3's coordinator (runtime/zero/partitioned_param_coordinator.py): max_live_parameters caps
  // only how much is prefetched; max_reuse_distance keeps a gathered parameter when it is used
  // again within that many elements (a checkpointed layer's recompute and its backward share a
  // gather below it, and the last layers keep theirs from forward).
  for (const char* k : {"stage3_max_live_parameters", "max_live_parameters"})
    z.ignore(k, "not modelled yet: the cap on parameters gathered ahead by prefetching (ftplan prefetches one unit)");
  for (const char* k : {"stage3_max_reuse_distance", "max_reuse_distance"})
    z.ignore(k,
             "not modelled yet: keeping a gathered parameter for a reuse within this many elements (ftplan "
             "gathers each unit once in forward and once in backward)");
  z.ignore("overlap_comm", "ftplan always overlaps gradient reduction with backward where the framework can");
  z.ignore("contiguous_gradients", "not modelled yet: the copy into a contiguous gradient buffer");
  z.ignore("reduce_scatter", "ftplan reduces with reduce-scatter under ZeRO 2 and 3");
  z.ignore("allgather_partitions", "ftplan gathers updated partitions with all-gather");
  // The optimizer state is swapped one sub-group of sub_group_size elements at a time, each in
  // pinned buffers for its fp32 master, m, v and gradient (stage3.py, swap_tensor/
  // partitioned_optimizer_swapper.py): the scenario's chunk_size, in bytes, 16 a parameter.
  if (optimizer_nvme) {
    if (const Node* g = z.take("sub_group_size")) {
      const auto n = as_int(z, "sub_group_size", *g);
      if (n && *n <= 0)
        z.error(*g, "sub_group_size", "expected a positive number of elements, the swap's sub-group size");
      else if (n)
        z.set("plan.offload.chunk_size", fmt::format("{} B", static_cast<double>(*n) * inventory::kSwapBytesPerElement),
              "sub_group_size", *g, "elements x 16 bytes (fp32 master, m, v and gradient in the swap buffers)");
    }
  } else {
    z.ignore("sub_group_size", "acts on offload_optimizer device nvme only (the optimizer-state swap's sub-groups)");
  }
  z.ignore("round_robin_gradients", kNoEffect);
  z.ignore("load_from_fp32_weights", kIo);
  z.ignore("elastic_checkpoint", kIo);
  z.ignore("ignore_unused_parameters", kNoEffect);
  z.ignore("legacy_stage1", "not modelled yet: DeepSpeed's legacy stage-1 implementation");
  z.ignore_matching("stage3_gather_", kIo);
  z.ignore("gather_16bit_weights_on_model_save", kIo);
  z.ignore("memory_efficient_linear", "not modelled yet: ZeRO-3's memory-efficient linear autograd function");
  z.ignore("zero_hpz_partition_size", "not modelled yet: ZeRO++ hierarchical partitioning (hpZ)");
  z.ignore("zero_quantized_weights", "not modelled yet: ZeRO++ quantized weight all-gather (qwZ)");
  z.ignore("zero_quantized_nontrainable_weights", "not modelled yet: ZeRO++ quantized frozen weights");
  z.ignore("zero_quantized_gradients", "not modelled yet: ZeRO++ quantized gradient reduce (qgZ)");
  z.ignore("mics_shard_size", "not modelled yet: MiCS sharding groups");
  z.ignore("mics_hierarchical_params_gather", "not modelled yet: MiCS sharding groups");
  z.ignore("stage3_module_granularity_threshold", kBuckets);
  z.ignore("stage3_use_all_reduce_for_fetch_params", kBuckets);
  z.ignore("log_trace_cache_warnings", kIo);
  z.ignore("pipeline_loading_checkpoint", kIo);
  z.ignore("override_module_apply", kNoEffect);
  z.finish();
}

// fp16 / bf16 ("bfloat16" is the older spelling, runtime/config.py get_bfloat16_enabled).
void read_precision_block(Fields& top, const char* key, const char* precision) {
  const Node* b = top.take(key);
  if (!b || !b->is_map()) return;
  Fields f(top.ctx(), *b, top.file(), top.key_path(key), kFormat);
  bool on = false;
  if (const Node* e = f.take("enabled")) {
    if (is_auto(*e)) {
      top.ctx().draft.set({"_ds_precision_auto", "true", "", e->where, f.key_path("enabled"), false});
    } else if (const auto b = as_bool(f, "enabled", *e); b && *b) {
      on = true;
      // bf16 master weights and gradients with bf16 optimizer state (runtime/precision_config.py,
      // DeepSpeed 0.17+): no fp32 copy at all, ftplan's pure bf16.
      const Node* mw = f.take("bf16_master_weights_and_grads");
      const Node* os = f.take("bf16_optimizer_states");
      const bool master = mw && as_bool(f, "bf16_master_weights_and_grads", *mw).value_or(false);
      const bool states = os && as_bool(f, "bf16_optimizer_states", *os).value_or(false);
      if (master && states)
        f.set("job.precision", "bf16", "bf16_optimizer_states", *os,
              "with bf16_master_weights_and_grads: no fp32 copy");
      else if (master)
        f.not_modelled("bf16_master_weights_and_grads", *mw,
                       "bf16 master weights and gradients over fp32 optimizer state");
      else
        f.set("job.precision", precision, "enabled", *e);
      if (states && !master)
        f.ctx().ignored.push_back({os->where, f.key_path("bf16_optimizer_states"),
                                   "valid only with bf16_master_weights_and_grads (DeepSpeed refuses it alone)"});
    }
  }
  if (!on)
    for (const char* k : {"bf16_master_weights_and_grads", "bf16_optimizer_states"}) f.ignore(k, "bf16 is not enabled");
  f.ignore_matching("", "loss scaling and fp16/bf16 engine options: no effect on memory or step time");
  f.finish();
}

void read_optimizer(Fields& top, const Node& block) {
  Fields o(top.ctx(), block, top.file(), top.key_path("optimizer"), kFormat);
  if (const Node* t = o.take("type")) {
    o.ctx().draft.set(o.entry("_ds_optimizer", "true", "type", *t));
    if (const auto type = as_string(o, "type", *t)) {
      std::string name = *type;
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      // Adam and AdamW both build FusedAdam / DeepSpeedCPUAdam, with adam_w_mode on by default
      // (runtime/engine.py _configure_basic_optimizer, ADAM_W_MODE_DEFAULT = True); same state either way.
      if (name == "adam" || name == "adamw")
        o.set("job.optimizer.name", "adamw", "type", *t);
      else if (name == "sgd")
        o.set("job.optimizer.name", "sgd", "type", *t);
      else if (name == "lion")
        o.set("job.optimizer.name", "lion", "type", *t);
      else {
        o.not_modelled(
            "type", *t,
            fmt::format("optimizer '{}' (ftplan models Adam/AdamW, 8-bit AdamW, SGD, Adafactor and Lion)", *type));
        o.ctx().draft.set(o.entry("_optimizer_unmodelled", yaml_scalar(*type), "type", *t));
      }
    }
  }
  o.ignore("params", kHyperparameter);
  o.finish();
}

void read_activation_checkpointing(Fields& top, const Node& block) {
  Fields a(top.ctx(), block, top.file(), top.key_path("activation_checkpointing"), kFormat);
  // These configure deepspeed.checkpointing, which only the layers a model checkpoints through it
  // use (Megatron-DeepSpeed); whether layers are checkpointed is the model's (HF: gradient_checkpointing).
  if (const Node* c = a.take("cpu_checkpointing"))
    if (const auto b = as_bool(a, "cpu_checkpointing", *c); b && *b)
      a.set("plan.offload.activations", "cpu", "cpu_checkpointing", *c, "checkpointed activations kept in host memory");
  a.not_modelled_if_true("partition_activations",
                         "checkpoints split across tensor-parallel ranks (Megatron-DeepSpeed)");
  a.ignore("contiguous_memory_optimization", "not modelled yet: a preallocated buffer for checkpoints");
  a.ignore("number_checkpoints", "not modelled yet: a preallocated buffer for checkpoints");
  a.ignore("synchronize_checkpoint_boundary", kNoEffect);
  a.ignore("profile", kIo);
  a.finish();
}

}  // namespace

void read_deepspeed(Context& ctx, const Node& root, const std::string& file, const std::string& prefix) {
  Fields f(ctx, root, file, prefix, kFormat);
  ctx.draft.set({"job.framework", "deepspeed", fmt::format("{}: a DeepSpeed config", file), root.where, prefix, false});
  if (const Node* m = f.take("train_micro_batch_size_per_gpu"); m && is_auto(*m))
    ctx.draft.set({"_ds_micro_auto", "true", "", m->where, f.key_path("train_micro_batch_size_per_gpu"), false});
  else if (m)
    if (const auto v = as_int(f, "train_micro_batch_size_per_gpu", *m))
      f.set("job.micro_batch", std::to_string(*v), "train_micro_batch_size_per_gpu", *m);
  if (const Node* g = f.take("gradient_accumulation_steps"); g && !is_auto(*g))
    if (const auto v = as_int(f, "gradient_accumulation_steps", *g))
      f.set("_gas", std::to_string(*v), "gradient_accumulation_steps", *g);
  if (const Node* t = f.take("train_batch_size"); t && is_auto(*t))
    ctx.ignored.push_back({t->where, f.key_path("train_batch_size"),
                           "auto: transformers fills it as micro-batch x gradient_accumulation_steps x world size, "
                           "as ftplan's global_batch is derived"});
  else if (t)
    if (const auto v = as_int(f, "train_batch_size", *t))
      f.set("_train_batch", std::to_string(*v), "train_batch_size", *t);
  if (const Node* z = f.take("zero_optimization"); z && z->is_map()) read_zero(f, *z);
  read_precision_block(f, "fp16", "fp16-mixed");
  read_precision_block(f, "bf16", "bf16-mixed");
  read_precision_block(f, "bfloat16", "bf16-mixed");
  if (const Node* o = f.take("optimizer"); o && o->is_map()) read_optimizer(f, *o);
  if (const Node* a = f.take("activation_checkpointing"); a && a->is_map()) read_activation_checkpointing(f, *a);
  if (const Node* c = f.take("amp"); c && c->is_map()) {
    if (const Node* e = c->find("enabled"); e && e->is_scalar() && e->text == "true")
      f.not_modelled("amp", *c, "NVIDIA Apex AMP (its O-levels keep other copies than torch AMP)");
    else
      f.ctx().ignored.push_back({c->where, f.key_path("amp"), "Apex AMP not enabled"});
  }
  f.ignore("aio",
           "not modelled yet: libaio block size, queue depth and threads (ftplan takes NVMe rates from the catalog "
           "drive or a calibration profile)");
  f.ignore("scheduler", "learning-rate schedule: no effect on memory or step time");
  f.ignore("gradient_clipping", kNoEffect);
  f.ignore("prescale_gradients", kNoEffect);
  f.ignore("gradient_predivide_factor", kNoEffect);
  f.ignore("steps_per_print", kIo);
  f.ignore("wall_clock_breakdown", kIo);
  f.ignore("dump_state", kIo);
  f.ignore("tensorboard", kIo);
  f.ignore("wandb", kIo);
  f.ignore("csv_monitor", kIo);
  f.ignore("comet", kIo);
  f.ignore("flops_profiler", kIo);
  f.ignore("checkpoint", kIo);
  f.ignore("zero_allow_untested_optimizer", kNoEffect);
  // false keeps the client's optimizer under ZeRO-Offload (accelerate swaps it for DeepSpeedCPUAdam otherwise).
  if (const Node* k = f.take("zero_force_ds_cpu_optimizer"))
    if (const auto b = as_bool(f, "zero_force_ds_cpu_optimizer", *k); b && !*b)
      f.set("_ds_keep_optimizer", "true", "zero_force_ds_cpu_optimizer", *k);
  f.ignore("communication_data_type", "not modelled yet: a gradient-reduction dtype other than the training dtype");
  f.ignore("data_types", "not modelled yet: a gradient-accumulation dtype other than the training dtype");
  f.ignore("seq_parallel_communication_data_type", "not modelled yet: Ulysses sequence parallelism");
  f.ignore("sparse_gradients", "not modelled yet: sparse embedding gradients");
  f.ignore("memory_breakdown", kIo);
  f.ignore("compression_training", "not modelled yet: DeepSpeed compression (quantization-aware training, pruning)");
  f.ignore("curriculum_learning", "not modelled yet: sequence-length curriculum");
  f.ignore("data_efficiency", "not modelled yet: DeepSpeed data efficiency (curriculum, random-LTD)");
  f.ignore("elasticity", "not modelled yet: elastic batch sizes");
  f.ignore("autotuning", "ftplan's own search (`ftplan plan`) plays this part");
  f.ignore("hybrid_engine", "not modelled yet: DeepSpeed-Chat's hybrid engine (RLHF generation)");
  // AutoTP (runtime/tensor_parallel/config.py): the linear layers split over autotp_size ranks,
  // column- then row-wise as Megatron's tensor parallelism.
  if (const Node* t = f.take("tensor_parallel"); t && t->is_map()) {
    Fields tp(ctx, *t, file, f.key_path("tensor_parallel"), kFormat);
    if (const Node* a = tp.take("autotp_size"))
      if (const auto v = as_int(tp, "autotp_size", *a); v && *v > 1)
        tp.set("plan.parallel.tp", std::to_string(*v), "autotp_size", *a, "DeepSpeed AutoTP");
    tp.ignore_matching("", "AutoTP layer-partitioning options: ftplan splits every linear layer");
    tp.finish();
  }
  f.ignore("torch_autocast", "DeepSpeed's torch.autocast: the compute type, as the job's precision says");
  f.ignore("pipeline", "not modelled yet: DeepSpeed pipeline-engine options");
  f.ignore("compile", "not modelled yet: DeepSpeed's compile options");
  f.finish();
}

}  // namespace ftplan::io::import
