// torchtitan TOML (train_configs/*.toml). Keys and defaults: torchtitan v0.2.2+2
// (pytorch/torchtitan 238fa995), torchtitan/config/job_config.py; the model flavors in
// torchtitan/models/llama3/__init__.py; TP with sequence parallelism in
// torchtitan/models/llama3/infra/parallelize.py (SequenceParallel on the norms).
#include <algorithm>

#include <fmt/format.h>

#include "io/import/detail.hpp"

namespace ftplan::io::import {
namespace {

constexpr const char* kFormat = "torchtitan";

std::string zoo_of(const std::string& name, const std::string& flavor) {
  // llama3 flavors are Llama 3.1 shapes (hf_assets_path ./assets/hf/Llama-3.1-8B in llama3_8b.toml).
  if (name == "llama3" && flavor == "8B") return "llama-3.1-8b";
  if (name == "llama3" && flavor == "70B") return "llama-3.1-70b";
  if (name == "llama3" && flavor == "405B") return "llama-3.1-405b";
  return {};
}

std::string dtype_of(const std::string& t) {
  if (t == "bfloat16") return "bf16";
  if (t == "float32") return "fp32";
  if (t == "float16") return "fp16";
  return {};
}

// The parallel degrees' product, and whether one of them is -1 (the GPUs left over, as
// data_parallel_shard_degree is by default: job_config.py).
struct Degrees {
  long long product = 1;  // capped at 2^30: the scenario reader refuses such GPU counts by name
  bool rest = true;       // data_parallel_shard_degree -1 unless the file gives another
};

// The parallelism keys, wherever the torchtitan version put them: [parallelism] since 2025; before
// that the degrees were in [training] (batch_size, data_parallel_degree, tensor_parallel_degree)
// and pipelining and context parallelism in [experimental] (torchtitan/config_manager.py, 2024).
// long: one key after another in the format's order, each a few lines with its source; they share
// the reader's Fields (what was read, what is left unknown), which a split would pass everywhere.
void read_parallel_keys(Fields& pf, const Node& section, Degrees& d, bool layout_2024 = false) {
  const auto degree = [&](const char* key, const char* scenario_key) {
    const Node* n = pf.take(key);
    if (!n) return;
    const auto v = as_int(pf, key, *n);
    if (!v) return;
    const bool shard = scenario_key == nullptr;
    if (shard) d.rest = *v == -1;
    if (*v >= 1) d.product = std::min(d.product * std::min<long long>(*v, 1 << 20), 1LL << 30);
    if (scenario_key) pf.set(scenario_key, std::to_string(*v), key, *n);
  };
  degree("tensor_parallel_degree", "plan.parallel.tp");
  degree("pipeline_parallel_degree", "plan.parallel.pp");
  degree("context_parallel_degree", "plan.parallel.cp");
  degree("data_parallel_shard_degree", nullptr);
  degree("data_parallel_degree", nullptr);  // before data_parallel_shard_degree (2024)
  if (const Node* r = pf.take("data_parallel_replicate_degree")) {
    if (const auto v = as_int(pf, "data_parallel_replicate_degree", *r)) {
      if (*v > 1) {
        d.product = std::min(d.product * std::min<long long>(*v, 1 << 20), 1LL << 30);
        const Node* s = section.find("data_parallel_shard_degree");
        const bool ddp = s && s->is_scalar() && s->text == "1";
        pf.set("plan.parallel.fsdp", ddp ? "no_shard" : "hybrid_shard", "data_parallel_replicate_degree", *r,
               ddp ? "replicate only: DDP" : "HSDP");
      }
    }
  }
  if (const Node* e = pf.take("expert_parallel_degree"))
    if (const auto v = as_int(pf, "expert_parallel_degree", *e); v && *v > 1)
      pf.set("plan.parallel.ep", std::to_string(*v), "expert_parallel_degree", *e);
  if (const Node* t = section.find("tensor_parallel_degree"); t && t->is_scalar() && t->text != "1")
    pf.set("plan.parallel.sequence_parallel", "true", "tensor_parallel_degree", *t,
           "torchtitan's TP plan shards norms and dropout by sequence");
  pf.take_bool("enable_async_tensor_parallel", "plan.parallel.async_tp", "true", "");
  const Node* ppd = section.find("pipeline_parallel_degree");
  const bool pipelined = ppd && ppd->is_scalar() && ppd->text != "1" && ppd->text != "0";
  if (const Node* s = pf.take("pipeline_parallel_schedule"); s && !pipelined) {
    pf.ctx().ignored.push_back({s->where, pf.key_path("pipeline_parallel_schedule"),
                                "pipeline_parallel_degree is not above 1: no pipeline, the schedule is not used"});
  } else if (s) {
    const std::string t = s->is_scalar() ? s->text : "";
    const std::string ours = t == "1F1B"              ? "1f1b"
                             : t == "GPipe"           ? "gpipe"
                             : t == "Interleaved1F1B" ? "interleaved"
                                                      : "";
    if (ours.empty()) {
      pf.not_modelled("pipeline_parallel_schedule", *s, fmt::format("pipeline schedule '{}'", t));
    } else {
      pf.set("plan.parallel.schedule", ours, "pipeline_parallel_schedule", *s);
      // A multi-stage schedule puts 2 stages on each rank unless pipeline_parallel_layers_per_stage
      // says otherwise (torchtitan/distributed/pipeline_parallel.py, stages_per_rank).
      if (ours == "interleaved" && !section.find("pipeline_parallel_layers_per_stage"))
        pf.set("plan.parallel.virtual_stages", "2", "pipeline_parallel_schedule", *s,
               "2 stages a rank, torchtitan's default for multi-stage schedules");
    }
  }
  if (const Node* r = pf.take("fsdp_reshard_after_forward")) {
    const std::string t = r->is_scalar() ? r->text : "";
    if (t == "never")
      pf.set("plan.parallel.fsdp", "shard_grad_op", "fsdp_reshard_after_forward", *r);
    else if (t != "default" && t != "always")
      pf.error(*r, "fsdp_reshard_after_forward", "expected default, always or never");
  }
  // Pipeline micro-batches: samples per micro-batch since 2025 (default 1), a count of them before
  // (pipeline_parallel_microbatches, default the pipeline degree). import.cpp splits the local batch.
  if (const Node* m = pf.take("pipeline_parallel_microbatch_size"))
    if (const auto v = as_int(pf, "pipeline_parallel_microbatch_size", *m))
      pf.set("_pp_micro", std::to_string(*v), "pipeline_parallel_microbatch_size", *m);
  if (const Node* m = pf.take("pipeline_parallel_microbatches"))
    if (const auto v = as_int(pf, "pipeline_parallel_microbatches", *m))
      pf.set("_pp_microbatches", std::to_string(*v), "pipeline_parallel_microbatches", *m);
  // 2024: as many micro-batches as pipeline stages unless given (config_manager.py, default None
  // = the pipeline degree).
  if (const Node* pp = section.find("pipeline_parallel_degree"); layout_2024 && pp && pp->is_scalar() && !pp->quoted &&
                                                                 pp->text != "1" &&
                                                                 !section.find("pipeline_parallel_microbatches"))
    pf.ctx().draft.set(pf.entry("_pp_microbatches", pp->text, "pipeline_parallel_degree", *pp,
                                "pipeline_parallel_microbatches default: the pipeline degree (2024)"));
  pf.ignore("pipeline_parallel_schedule_csv", "not modelled yet: custom pipeline schedules");
  pf.ignore("pipeline_parallel_split_points",
            "not modelled yet: hand-placed stage boundaries (use parallel.first_stage_layers)");
  pf.ignore("pipeline_parallel_layers_per_stage", "not modelled yet: stages of a given size");
  pf.ignore("pipeline_parallel_first_stage_less_layers", "not modelled yet: a lighter first stage");
  pf.ignore("pipeline_parallel_last_stage_less_layers", "not modelled yet: a lighter last stage");
  pf.ignore("context_parallel_rotate_method", "ftplan models ring attention's all-gather of K/V");
  pf.ignore("disable_loss_parallel", kNoEffect);
  pf.ignore("enable_loss_parallel", kNoEffect);
  pf.ignore("enable_compiled_autograd", kNoEffect);
  pf.ignore("expert_tensor_parallel_degree", "not modelled yet: tensor parallelism inside experts");
}

void read_model(Context& ctx, const Node& section, const std::string& file, bool& float8) {
  const Node* m = &section;  // the TOML table
  Fields mf(ctx, *m, file, "model", kFormat);
  std::string name = "llama3", flavor = "debugmodel";  // job_config.py Model defaults
  const Node* nn = mf.take("name");
  const Node* fl = mf.take("flavor");
  if (nn && nn->is_scalar()) name = nn->text;
  if (fl && fl->is_scalar()) flavor = fl->text;
  const std::string zoo = zoo_of(name, flavor);
  const Node& at = fl ? *fl : nn ? *nn : *m;
  set_model(mf, fl ? "flavor" : "name", at, "torchtitan " + name + " " + flavor, zoo);
  if (const Node* c = mf.take("converters"); c && (c->is_seq() || c->is_scalar())) {
    // A list, or one name as a string (llama3_405b.toml: converters = "float8").
    const std::vector<Node> one = c->is_scalar() ? std::vector<Node>{*c} : std::vector<Node>{};
    for (const auto& e : c->is_scalar() ? one : c->elems) {
      if (e.is_scalar() && e.text == "float8") {
        float8 = true;
        mf.set("job.precision", "fp8-mixed", "converters", e, "Float8Linear");
      } else {
        mf.not_modelled("converters", e, fmt::format("model converter '{}'", e.text));
      }
    }
  }
  mf.ignore("hf_assets_path", kIo);
  mf.ignore("tokenizer_path", kIo);
  mf.ignore("print_after_conversion", kIo);
  mf.ignore("norm_type", "the 2024 choice of norm kernel (fused_rmsnorm): ftplan's framework profile sets kernels");
  mf.finish();
}

void read_training(Context& ctx, const Node& section, const std::string& file, bool float8, Degrees& d) {
  const Node* t = &section;  // the TOML table
  Fields tf(ctx, *t, file, "training", kFormat);
  read_parallel_keys(tf, section, d, true);                 // the 2024 layout
  tf.take_bool("compile", "job.compile", "true", "false");  // [compile] enable since 2025
  tf.ignore("warmup_steps", "learning-rate schedule: no effect on memory or step time");
  tf.ignore("fp8_linear", "the 2024 float8 switch: give model.converters or --set job.precision=fp8-mixed");
  for (const char* k : {"local_batch_size", "batch_size"})  // batch_size: before torchtitan 0.1.0
    if (const Node* b = tf.take(k))
      if (const auto v = as_int(tf, k, *b)) tf.set("job.micro_batch", std::to_string(*v), k, *b);
  if (const Node* g = tf.take("global_batch_size"))
    if (const auto v = as_int(tf, "global_batch_size", *g); v && *v > 0)
      tf.set("job.global_batch", std::to_string(*v), "global_batch_size", *g);
  tf.take_int("seq_len", "job.seq_len");
  tf.take_int("steps", "job.steps");
  if (const Node* o = tf.take("enable_cpu_offload"))
    if (const auto b = as_bool(tf, "enable_cpu_offload", *o); b && *b)
      tf.set_cpu_offload("enable_cpu_offload", *o, "FSDP2 CPUOffloadPolicy");
  std::string dtype = "fp32", param = "bf16", reduce = "fp32";  // job_config.py Training defaults
  const Node* dn = tf.take("dtype");
  const Node* pn = tf.take("mixed_precision_param");
  const Node* rn = tf.take("mixed_precision_reduce");
  for (auto [node, key, out] : {std::tuple{dn, "dtype", &dtype}, std::tuple{pn, "mixed_precision_param", &param},
                                std::tuple{rn, "mixed_precision_reduce", &reduce}}) {
    if (!node) continue;
    const std::string d = node->is_scalar() ? dtype_of(node->text) : std::string();
    if (d.empty())
      tf.error(*node, key, fmt::format("expected bfloat16 or float32, got '{}'", node->text));
    else
      *out = d;
  }
  if (!float8) {
    // FSDP2 MixedPrecisionPolicy(param_dtype, reduce_dtype) over fp32 sharded parameters.
    if (dtype == "bf16") {
      tf.set("job.precision", "bf16", "dtype", *dn, "pure bf16");
    } else if (param == "bf16" || param == "fp16") {
      const std::string p = param + "-mixed";
      if (pn)
        tf.set("job.precision", p, "mixed_precision_param", *pn);
      else
        ctx.draft.set_default(
            "job.precision", p,
            "default of torchtitan v0.2.2: training.mixed_precision_param bfloat16 over float32 parameters");
    } else if (pn) {
      tf.set("job.precision", "fp32", "mixed_precision_param", *pn);
    }
  }
  if (dtype != "bf16" && param != "fp32") {
    if (rn) tf.set("job.fsdp_mixed_precision.reduce_dtype", reduce, "mixed_precision_reduce", *rn);
    if (pn) tf.set("job.fsdp_mixed_precision.param_dtype", param, "mixed_precision_param", *pn);
  }
  tf.ignore("max_norm", kNoEffect);
  tf.ignore("gc_freq", kNoEffect);
  tf.ignore("gc_debug", kIo);
  tf.ignore("seed", kIo);
  tf.ignore("deterministic", kIo);
  tf.ignore("debug_moe_force_load_balance", kNoEffect);
  tf.ignore_matching("dataset", "dataset source: ftplan takes sample lengths from job.samples");
  tf.finish();
}

void read_parallelism(Context& ctx, const Node& section, const std::string& file, Degrees& d) {
  Fields pf(ctx, section, file, "parallelism", kFormat);
  read_parallel_keys(pf, section, d);
  pf.finish();
}

void read_activation_checkpoint(Context& ctx, const Node& section, const std::string& file) {
  const Node* a = &section;  // the TOML table
  Fields af(ctx, *a, file, "activation_checkpoint", kFormat);
  std::string mode = "selective";  // job_config.py ActivationCheckpoint.mode
  const Node* mn = af.take("mode");
  if (mn && mn->is_scalar()) mode = mn->text;
  const Node* on = af.take("selective_ac_option");
  const Node& anchor = mn ? *mn : on ? *on : *a;
  if (mode == "none" || mode == "full") {
    af.set("job.activation_checkpointing", mode, "mode", *mn);
  } else if (mode == "selective") {
    const std::string option = on && on->is_scalar() ? on->text : "2";  // job_config.py default "2"
    if (option == "op") {
      af.set("job.activation_checkpointing", "selective", on ? "selective_ac_option" : "mode", on ? *on : anchor,
             "op-level SAC");
    } else {
      // An integer N: every N-th block is checkpointed in full (layer SAC), as checkpoint_every.
      const Node& at = on ? *on : anchor;
      // A string in torchtitan ("2"; its own debug_model.toml quotes it), an integer in older TOMLs.
      std::optional<long long> n = 2;
      if (on) {
        n.reset();
        if (!on->text.empty() && on->text.size() < 7 &&
            std::all_of(on->text.begin(), on->text.end(), [](char c) { return c >= '0' && c <= '9'; }))
          n = std::stoll(on->text);
        else
          af.error(*on, "selective_ac_option", fmt::format("expected op or a whole number, got '{}'", on->text));
      }
      if (n && *n >= 1) {
        af.set("job.activation_checkpointing", "full", on ? "selective_ac_option" : "mode", at, "layer SAC");
        af.set("job.checkpoint_every", std::to_string(*n), on ? "selective_ac_option" : "mode", at,
               on ? "" : "default of torchtitan v0.2.2: selective_ac_option \"2\"");
      }
    }
  } else if (mn) {
    af.not_modelled("mode", *mn, fmt::format("activation checkpointing mode '{}'", mode));
  }
  af.ignore("per_op_sac_force_recompute_mm_shapes_by_fqns", "ftplan's op SAC recomputes every second matmul");
  af.ignore("early_stop", kNoEffect);
  af.ignore("memory_budget", "with mode memory_budget only");
  af.ignore("visualize_memory_budget_pareto", kIo);
  af.ignore("preserve_rng_state", kNoEffect);
  af.ignore("determinism_check", kNoEffect);
  af.ignore("debug", kIo);
  af.finish();
}

void read_optimizer(Context& ctx, const Node& section, const std::string& file) {
  const Node* o = &section;  // the TOML table
  Fields of(ctx, *o, file, "optimizer", kFormat);
  if (const Node* n = of.take("name")) {
    const std::string t = n->is_scalar() ? n->text : "";
    if (t == "AdamW" || t == "Adam")
      of.set("job.optimizer.name", "adamw", "name", *n);
    else {
      of.not_modelled("name", *n, fmt::format("optimizer '{}'", t));
      of.ctx().draft.set(of.entry("_optimizer_unmodelled", yaml_scalar(t), "name", *n));
    }
  }
  if (const Node* i = of.take("implementation")) {
    const std::string t = i->is_scalar() ? i->text : "";
    const std::string ours = t == "fused"      ? "fused"
                             : t == "foreach"  ? "foreach"
                             : t == "for-loop" ? "per-parameter"
                                               : "";
    if (ours.empty())
      of.error(*i, "implementation", "expected fused, foreach or for-loop");
    else
      of.set("job.optimizer.implementation", ours, "implementation", *i);
  }
  of.take_bool("early_step_in_backward", "job.optimizer.in_backward", "true", "");
  of.ignore_matching("", kHyperparameter);
  of.finish();
}

}  // namespace

void read_torchtitan(Context& ctx, const Node& root, const std::string& file) {
  Fields f(ctx, root, file, {}, kFormat);
  ctx.draft.set({"job.framework", "pytorch-fsdp2", fmt::format("{}: torchtitan (FSDP2)", file), root.where, "", false});
  ctx.draft.set({"_torchtitan", "true", "", root.where, "", false});
  bool float8 = false;
  if (const Node* m = f.take("model"); m && m->is_map()) read_model(ctx, *m, file, float8);
  // Before model.converters (2024): [float8] enable_float8_linear = true.
  if (const Node* q = root.find("float8"); q && q->is_map() && !float8)
    if (const Node* e = q->find("enable_float8_linear"); e && e->is_scalar() && e->text == "true") {
      float8 = true;
      ctx.draft.set({"job.precision", "fp8-mixed",
                     fmt::format("{}: float8.enable_float8_linear true (Float8Linear)", file), e->where,
                     "float8.enable_float8_linear", false});
    }
  Degrees degrees;
  if (const Node* t = f.take("training"); t && t->is_map()) read_training(ctx, *t, file, float8, degrees);
  if (const Node* p = f.take("parallelism"); p && p->is_map()) read_parallelism(ctx, *p, file, degrees);
  if (const Node* e = f.take("experimental"); e && e->is_map()) {
    Fields ef(ctx, *e, file, "experimental", kFormat);
    read_parallel_keys(ef, *e, degrees, true);  // the 2024 layout
    ef.ignore_matching("", kIo);
    ef.finish();
  }
  // With no degree -1 the degrees are the world size: torchtitan refuses any other
  // (distributed/parallel_dims.py, dp_replicate x dp_shard x cp x tp x pp == WORLD_SIZE).
  if (!degrees.rest) {
    const std::string origin = fmt::format("{}: parallelism degrees multiplied (no degree is -1)", file);
    ctx.draft.set({"plan.cluster.gpus", std::to_string(degrees.product), origin, root.where, "parallelism", false});
    ctx.draft.set({"_torchtitan_world", std::to_string(degrees.product), origin, root.where, "parallelism", false});
  }
  if (const Node* a = f.take("activation_checkpoint"); a && a->is_map()) read_activation_checkpoint(ctx, *a, file);
  if (const Node* c = f.take("compile"); c && c->is_map()) {
    Fields cf(ctx, *c, file, "compile", kFormat);
    cf.take_bool("enable", "job.compile", "true", "false");
    cf.ignore("components", "ftplan compiles the transformer blocks (torchtitan's profile)");
    cf.ignore("backend", kNoEffect);
    cf.finish();
  }
  if (const Node* o = f.take("optimizer"); o && o->is_map()) read_optimizer(ctx, *o, file);
  if (const Node* q = f.take("float8"); q && q->is_map())
    ctx.ignored.push_back({q->where, "float8",
                           float8 ? "float8 scaling options: ftplan models fp8 as a precision recipe"
                                  : "float8 options without model.converters float8: not in effect"});
  if (const Node* q = f.take("quantize"); q && q->is_map())
    ctx.ignored.push_back({q->where, "quantize",
                           float8 ? "float8 scaling options: ftplan models fp8 as a precision recipe"
                                  : "quantization options without a model converter: not in effect"});
  f.ignore("lr_scheduler", "learning-rate schedule: no effect on memory or step time");
  if (const Node* m = f.take("memory_estimation"); m && m->is_map())
    ctx.ignored.push_back(
        {m->where, "memory_estimation", "torchtitan's own memory estimate; ftplan's is `ftplan memory`"});
  for (const char* k : {"job", "profiling", "metrics", "checkpoint", "validation", "comm", "fault_tolerance", "debug"})
    f.ignore(k, kIo);
  f.finish();
}

}  // namespace ftplan::io::import
