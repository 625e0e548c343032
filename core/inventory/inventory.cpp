#include "inventory/inventory.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "plan/checks.hpp"

namespace ftplan::inventory {

using model::ModelSpec;
using plan::Checkpointing;
using plan::Job;
using plan::Method;
using plan::Plan;
using plan::Sharding;
using plan::Tier;

const char* to_string(Category c) {
  switch (c) {
    case Category::weights: return "weights";
    case Category::gradients: return "gradients";
    case Category::optimizer: return "optimizer";
    case Category::activations: return "activations";
    case Category::temporaries: return "temporaries";
    case Category::buffers: return "buffers";
    case Category::overhead: return "overhead";
  }
  return "?";
}

const char* to_string(Element e) {
  switch (e) {
    case Element::packed: return "bytes";
    case Element::fp32: return "fp32";
    case Element::bf16: return "bf16";
    case Element::fp16: return "fp16";
    case Element::fp8: return "fp8";
  }
  return "?";
}

double element_bytes(Element e) {
  switch (e) {
    case Element::packed: return 1;
    case Element::fp32: return 4;
    case Element::bf16:
    case Element::fp16: return 2;
    case Element::fp8: return 1;
  }
  return 1;
}

Element Inventory::element_of(double bytes_per_element) const {
  if (bytes_per_element == 4) return Element::fp32;
  if (bytes_per_element == 2) return fp16 ? Element::fp16 : Element::bf16;
  return Element::packed;
}

double quantized_bytes_per_param(const plan::QuantSpec& q) {
  const double block = q.block_size;
  switch (q.kind) {
    case plan::QuantKind::nf4:
    case plan::QuantKind::fp4:
    case plan::QuantKind::int4:
      // 4-bit codes + one absmax per block: fp32 (4 B), or with double quantization an 8-bit absmax
      // plus one fp32 constant per 256 blocks (QLoRA sec. 3, "Double Quantization": 0.127 bits/param at block 64).
      return 0.5 + (q.double_quant ? 1.0 / block + 4.0 / (block * 256.0) : 4.0 / block);
    case plan::QuantKind::int8:
      // LLM.int8 (Dettmers et al. 2022): int8 codes + one fp32 scale per row (~per 4096 values).
      return 1.0 + 4.0 / 4096.0;
  }
  return 2.0;
}

namespace {

// Which linear modules have trainable weights: all of them in a full fine-tune, the adapted ones
// under LoRA; a gate only where the MLP is gated.
struct Trainable {
  std::array<bool, std::size(model::kLinears)> on{};
  Trainable(const ModelSpec& m, const Job& job) {
    on.fill(job.method == Method::full);
    if (job.method != Method::full)
      for (const auto& name : job.lora.targets)
        if (const auto l = model::linear_from_string(name)) on[static_cast<std::size_t>(*l)] = true;
    if (!model::is_gated(m.ffn_kind)) on[static_cast<std::size_t>(model::Linear::gate)] = false;
  }
  bool operator()(model::Linear l) const { return on[static_cast<std::size_t>(l)]; }
};

using model::LayerShape;

// LoRA parameters of one layer: r x (in + out) for each adapted matrix (Hu et al. 2021).
double lora_layer_params(const ModelSpec& m, const Job& job, const Trainable& t, int layer) {
  if (job.method == Method::full) return 0;
  const LayerShape s = model::layer_shape(m, layer);
  const double r = job.lora.rank;
  double p = 0, mlp = 0;
  for (model::Linear l : model::kLinears) {
    if (!t(l)) continue;
    const model::LinearDims d = model::linear_dims(s, l);
    (model::is_mlp(l) ? mlp : p) += r * (d.in + d.out);
  }
  const double experts = s.experts > 0 ? s.experts : 1;
  return p + experts * mlp;
}

// Activation bytes one layer saves for backward, per token, derived tensor by tensor as in
// Korthikanti et al. 2022, sec. 4.1 (whose GPT block - MHA, 4h GELU MLP, dropout, 16-bit - gives
// 34 h + 5 a s bytes). Here: GQA widths; gated MLPs; a frozen linear saves no input unless an
// adapter on it needs one; flash attention keeps no s x s matrix, only an fp32 log-sum-exp per
// head (Dao 2023); torch.compile's min-cut partitioner recomputes pointwise ops (activation
// function, gating product) instead of saving them (torch/_functorch/partitioners.py).
// Frameworks that run the model's modules op by op (HF transformers, torchtitan, torchtune, and
// DeepSpeed or FSDP around them) save what PyTorch autograd's formulas save for each op
// (tools/autograd/derivatives.yaml), measured for an HF Llama layer in
// tests/data/saved_activations.csv (calibrate/reference/measure_saved_activations.py) and checked
// row by row by tests/unit/activations_test.cpp. Fused frameworks (Megatron-LM, Transformer
// Engine) keep what their fused kernels save.
struct SavedPerToken {
  double sequence = 0;   // tensors in the sequence region: replicated across TP ranks unless SP
  double tensor = 0;     // tensors inside the TP region: split across TP ranks
  double quadratic = 0;  // eager attention: per head and attended token
};

struct ActivationContext {
  double a = 2;          // bytes of a 16-bit (or fp32) activation: what the matmuls read
  double wide = 2;       // fused/compiled path: bytes of tensors autocast keeps in fp32 (norm inputs, softmax)
  // Bytes of the residual stream, the layer's input: the parameters' type, so fp32 under
  // torch.autocast on fp32 weights (a full fine-tune) and 16-bit on a 16-bit frozen base (LoRA).
  double residual = 2;
  // torch.autocast on an fp32 residual stream: every matmul casts its fp32 input to 16 bits
  // itself, and autograd keeps each cast (autocast's cast cache holds only leaf weights:
  // aten/src/ATen/autocast_mode.cpp cached_cast), so Q, K and V each keep a copy of their input.
  bool autocast_casts = false;
  // The layer runs as eager PyTorch modules (not fused kernels, not compiled).
  bool eager_modules = false;
  // K and V reach the attention kernel repeated to all heads (FrameworkProfile::sdpa_repeats_kv).
  bool repeat_kv = false;
  double dropout = 0;
  bool flash = true;
  bool compile = false;
  plan::FrameworkProfile::Selective selective = plan::FrameworkProfile::Selective::attention_core;
};

// Bytes one norm of width `h` keeps per token (its output is counted by whoever consumes it).
// `weight_trains`: the norm's weight gets a gradient (a full fine-tune).
double norm_saved_per_token(const ModelSpec& m, const ActivationContext& c, double h, bool weight_trains) {
  if (!c.eager_modules) return c.wide * h;  // fused kernels: the input (each also keeps a per-token fp32 rstd, negligible)
  if (m.norm == model::NormKind::rmsnorm) {
    // HF LlamaRMSNorm.forward (torchtitan's and torchtune's RMSNorm alike): x.to(float32), then
    // pow(2) and the multiply by rsqrt(variance + eps) keep the fp32 input (an fp32 copy of a
    // 16-bit stream, or the fp32 stream itself: 4 bytes either way) and the fp32 rstd per
    // token; weight * normed.to(input_dtype) keeps `normed`, in the stream's type, for the
    // weight's gradient when the weight trains (mul's derivative: other's grad needs self).
    return 4.0 * h + 4.0 + (weight_trains ? c.residual * h : 0.0);
  }
  // nn.LayerNorm -> native_layer_norm: its input, and fp32 mean and rstd per token.
  return c.residual * h + 8.0;
}

SavedPerToken saved_per_token(const ModelSpec& m, const Job& job, const Trainable& tr, const ActivationContext& c,
                              int layer) {
  const LayerShape s = model::layer_shape(m, layer);
  const double a = c.a;
  const double k = s.experts > 0 ? s.experts_per_token : 1;  // MoE: each token runs k experts
  const bool gated = model::is_gated(m.ffn_kind);
  SavedPerToken t;
  if (job.checkpointing == Checkpointing::selective &&
      c.selective == plan::FrameworkProfile::Selective::every_other_mm) {
    // torchtitan op-level SAC: the layer input, then of wq, wk, wv, wo, w1, w3, w2 the outputs of
    // the 1st, 3rd, 5th and 7th matmul (wq, wv, w1, w2), and the attention output with its lse.
    t.sequence += a * s.h;
    t.tensor += a * (s.q + s.kv) + k * a * s.f + a * s.h + a * s.q + 4.0 * m.heads;
    return t;
  }
  // How many of a norm's consumers keep its output: under autocast casts each matmul its own copy,
  // else the one tensor is kept once by whichever needs it.
  const auto kept = [&](int users) { return c.autocast_casts ? users : (users > 0 ? 1 : 0); };
  t.sequence += norm_saved_per_token(m, c, s.h, job.method == Method::full) * m.norms_per_layer;
  // Attention input (norm output, as the 16-bit tensor the matmul saves): kept when Q, K or V is trainable.
  using model::Linear;
  t.sequence += a * s.h * kept(tr(Linear::q) + tr(Linear::k) + tr(Linear::v));
  // Q and K after RoPE and V: kept by the attention kernel or the eager matmuls. Eager attention
  // (HF eager_attention_forward) multiplies K and V after repeat_kv, which materializes them at
  // all heads' width for GQA, and so does torchtitan before SDPA; flash kernels take GQA natively
  // (flash-attn; SDPA enable_gqa).
  t.tensor += a * (s.q + 2 * (c.eager_modules && (!c.flash || c.repeat_kv) ? s.q : s.kv));
  // Attention output: kept by flash attention (`out`; the kernels write it (b, s, heads, d), so
  // o_proj's input is the same storage) and, when O is trainable, by o_proj.
  if (c.flash || tr(Linear::o)) t.tensor += a * s.q;
  if (c.flash) {
    t.tensor += 4.0 * m.heads;  // log-sum-exp, fp32 per head
  } else if (c.eager_modules) {
    // HF: softmax(dtype=float32) keeps its fp32 output; .to(query.dtype) (or autocast's cast for
    // the PV matmul) a 16-bit copy the PV matmul keeps. With attention dropout (native_dropout on
    // CUDA) its 1-byte mask, the PV matmul then keeping the dropped-out 16-bit probabilities.
    t.quadratic += m.heads * (c.dropout > 0 ? 4.0 + 1.0 + a : 4.0 + (a != 4.0 ? a : 0.0));
  } else {
    // Softmax output (fp32 under autocast); with attention dropout its 1-byte mask and the
    // dropped-out probabilities as the AV matmul's 16-bit input; without, the cast when widths differ.
    t.quadratic += m.heads * (c.dropout > 0 ? c.wide + 1.0 + a : c.wide + (c.wide != a ? a : 0.0));
  }
  if (c.dropout > 0) t.sequence += 2.0 * s.h;  // residual dropout masks after attention and MLP, 1 B each
  // MLP input (norm output): kept when the first MLP matrices are trainable.
  t.sequence += a * s.h * kept(tr(Linear::up) + tr(Linear::gate));
  if (gated) {
    // gate output (activation input) and up output always; the activation output and the product
    // (down's input) unless compiled code recomputes them; the product only when down is trainable.
    t.tensor += k * a * s.f * (2 + (c.compile ? 0 : 1) + (tr(Linear::down) && !c.compile ? 1 : 0));
  } else {
    // activation input always; its output (down's input) when down is trainable and not recomputed.
    t.tensor += k * a * s.f * (1 + (tr(Linear::down) && !c.compile ? 1 : 0));
  }
  if (s.experts > 0) t.tensor += 4.0 * s.experts;  // router logits, fp32
  // LoRA: each adapter keeps its A output (r values) for B's weight gradient; with adapter
  // dropout, also the dropped-out input and its mask (PEFT lora.Linear applies dropout before A).
  if (job.method != Method::full) {
    const double r = job.lora.rank;
    for (Linear l : model::kLinears) {
      if (!tr(l)) continue;
      const double times = model::is_mlp(l) ? k : 1.0;
      t.tensor += times * a * r;
      if (job.lora.dropout > 0) t.tensor += times * (a + 1.0) * model::linear_dims(s, l).in;
    }
  }
  if (job.checkpointing == Checkpointing::selective) t.quadratic = 0;  // Megatron: recompute the attention core
  return t;
}

}  // namespace

std::pair<int, int> stage_layers(int total, int stages, int vs, int first, int last) {
  if (stages > 1 && (first > 0 || last > 0)) {
    if (vs == 0 && first > 0) return {0, first};
    if (vs == stages - 1 && last > 0) return {total - last, total};
    // The middle: what the end stages left, split evenly among the stages between them.
    const int lo = first > 0 ? 1 : 0, hi = last > 0 ? stages - 1 : stages;
    const auto [a, b] = stage_layers(total - first - last, hi - lo, vs - lo);
    return {first + a, first + b};
  }
  const int base = total / stages, extra = total % stages;
  const int begin = vs * base + std::min(vs, extra);
  return {begin, begin + base + (vs < extra ? 1 : 0)};
}

std::vector<int> stage_layer_list(const ModelSpec& m, const Plan& plan, int stage, std::vector<int>* chunk_begin) {
  const plan::Parallel& par = plan.parallel;
  const int pp = std::max(1, par.pp);
  const int chunks = pp > 1 && par.schedule == plan::PipelineSchedule::interleaved ? std::max(1, par.virtual_stages) : 1;
  std::vector<int> list;
  if (chunk_begin) chunk_begin->clear();
  // Interleaved with fixed end stages, as Megatron-core builds it (transformer_block.py,
  // get_num_layers_to_build): the first (last) stage's layers, and each middle stage's even share
  // of the rest, are split evenly over the stage's chunks; virtual stage c x pp + s runs its
  // stage's chunk size, in model order (check_plan asks for Megatron's divisibilities).
  const int first = par.first_stage_layers, last = par.last_stage_layers;
  const bool uneven_chunks = chunks > 1 && (first > 0 || last > 0);
  const int middle_stages = pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  const auto chunk_size = [&](int vs) {
    const int s = vs % pp;
    if (s == 0 && first > 0) return first / chunks;
    if (s == pp - 1 && last > 0) return last / chunks;
    return middle_stages > 0 ? (m.total_layers() - first - last) / middle_stages / chunks : 0;
  };
  for (int c = 0; c < chunks; ++c) {
    if (chunk_begin) chunk_begin->push_back(static_cast<int>(list.size()));
    const int vs = c * pp + stage;
    std::pair<int, int> range;
    if (uneven_chunks) {
      int a = 0;
      for (int v = 0; v < vs; ++v) a += chunk_size(v);
      range = {a, a + chunk_size(vs)};
    } else {
      range = stage_layers(m.total_layers(), pp * chunks, vs, first, last);
    }
    for (int l = range.first; l < range.second; ++l) list.push_back(l);
  }
  if (chunk_begin) chunk_begin->push_back(static_cast<int>(list.size()));
  return list;
}

std::int64_t lora_params(const ModelSpec& m, const Job& job) {
  const Trainable tr(m, job);
  double total = 0;
  for (int layer = 0; layer < m.total_layers(); ++layer) total += lora_layer_params(m, job, tr, layer);
  return static_cast<std::int64_t>(std::llround(total));
}

Inventory build_inventory(const ModelSpec& model, const Plan& plan, int stage) {
  Inventory inv;
  build_inventory(model, plan, stage, inv);
  return inv;
}

void build_inventory(const ModelSpec& m, const Plan& plan, int stage, Inventory& inv) {
  const Job& job = plan.job;
  const plan::Parallel& par = plan.parallel;
  const Trainable trainable(m, job);
  inv.groups.clear();
  inv.stage = stage;
  inv.profile = plan::framework_profile(job);
  inv.recipe = plan::precision_recipe(job, inv.profile);
  inv.fp16 = job.precision == plan::Precision::fp16_mixed;
  const plan::FrameworkProfile& prof = inv.profile;
  const plan::PrecisionRecipe& rec = inv.recipe;

  const int tp = std::max(1, par.tp), pp = std::max(1, par.pp), cp = std::max(1, par.cp), ep = std::max(1, par.ep);
  const int world = plan.cluster.gpus();
  inv.ranks_per_node = std::max(1, plan.cluster.gpus_per_node);
  inv.grad_accumulation = plan::grad_accumulation_steps(plan);

  // ZeRO stage in effect and the group the state is sharded over.
  const plan::ShardingInEffect in_effect = plan::sharding_in_effect(plan);
  const int zero = in_effect.zero, shard = in_effect.shard_degree;
  inv.shard_degree = shard;
  inv.zero = zero;
  // FSDP2 with pipeline stages keeps each stage gathered for the step (the FSDP case below says why).
  inv.gathered_for_step = in_effect.gathered_for_step;

  // ---- parameters on this rank
  const std::vector<int> stage_list = stage_layer_list(m, plan, stage);
  inv.layers = static_cast<int>(stage_list.size());
  RankParams& rp = inv.params;
  rp = RankParams{};
  double frozen_linear = 0;
  // Layers differ only by kind (MoE or dense, local or global attention, with cross-attention or
  // not): the per-layer figures are computed once per kind present on the stage.
  struct Kind {
    bool ready = false;
    int model_layer = 0;
    double total = 0, linear = 0, largest_linear = 0, lora = 0, expert = 0;
  };
  std::array<Kind, 8> kinds{};
  std::array<int, 8> kind_count{};
  const auto model_layer_of = [&](int layer) {
    // Encoder-decoder stacks put the encoder first; the model numbers decoder layers first.
    if (m.architecture != model::Architecture::encoder_decoder) return layer;
    return layer >= m.encoder_layers ? layer - m.encoder_layers : m.layers + layer;
  };
  const auto kind_of = [&](int layer) {
    const int ml = model_layer_of(layer);
    const bool cross = m.architecture == model::Architecture::encoder_decoder && layer >= m.encoder_layers;
    const bool moe = ml < m.layers && m.is_moe_layer(ml);
    const bool local = ml < m.layers && m.is_local_layer(ml);
    return (moe ? 1 : 0) | (local ? 2 : 0) | (cross ? 4 : 0);
  };
  for (const int layer : stage_list) {
    const int k = kind_of(layer);
    ++kind_count[k];
    Kind& kd = kinds[k];
    if (kd.ready) continue;
    kd.ready = true;
    kd.model_layer = model_layer_of(layer);
    const model::LayerParams lp = model::layer_params(m, kd.model_layer, (k & 4) != 0);
    const double split = (k & 1) ? static_cast<double>(tp) * ep : tp;
    // Megatron column/row splits: attention and MLP matrices divide by tp (experts also by ep); norms replicate.
    kd.total = static_cast<double>(lp.attention) / tp + static_cast<double>(lp.mlp) / split + static_cast<double>(lp.norms);
    kd.linear = static_cast<double>(lp.attention + lp.mlp) / split;
    const LayerShape s = model::layer_shape(m, kd.model_layer);
    kd.largest_linear = std::max(s.h * s.q, s.h * s.f) / tp;
    kd.lora = lora_layer_params(m, job, trainable, kd.model_layer) / tp;
    // The experts' share of the layer's parameters on this rank (their MLPs, split by tp x ep).
    kd.expert = (k & 1) ? static_cast<double>(lp.mlp) / split : 0;
  }
  for (int k = 0; k < 8; ++k) {
    if (kind_count[k] == 0) continue;
    const Kind& kd = kinds[k];
    rp.total += kd.total * kind_count[k];
    rp.largest_layer = std::max(rp.largest_layer, kd.total);
    frozen_linear += kd.linear * kind_count[k];
    rp.largest_linear = std::max(rp.largest_linear, kd.largest_linear);
    rp.trainable += kd.lora * kind_count[k];
    rp.expert += kd.expert * kind_count[k];
    rp.trainable_largest_layer = std::max(rp.trainable_largest_layer, job.method == Method::full ? kd.total : kd.lora);
  }
  const double h = static_cast<double>(m.hidden);
  const double norm_params = m.norm == model::NormKind::layernorm ? 2 * h : h;
  if (stage == 0) rp.root += static_cast<double>(model::embedding_params(m)) / tp;
  if (stage == pp - 1) {
    // The LM head lives on the last stage; with tied embeddings and pp > 1 Megatron keeps a copy there.
    rp.root += static_cast<double>(model::head_params(m) + model::position_table_params(m)) / tp +
               (m.final_norm ? norm_params : 0);
    if (m.tied_embeddings && pp > 1 && m.has_lm_head()) rp.root += static_cast<double>(m.vocab) * h / tp;
  }
  rp.total += rp.root;
  if (job.method == Method::full) {
    rp.trainable = rp.total;
  }
  rp.frozen = rp.total - rp.trainable;
  rp.frozen_quantized = job.method == Method::qlora ? frozen_linear : 0;
  // Expert parameters train (full fine-tune) or stay frozen (LoRA leaves the experts' base frozen;
  // its adapters are counted with the dense part).
  const double expert_trainable = job.method == Method::full ? rp.expert : 0.0;
  const double expert_frozen = rp.expert - expert_trainable;

  // `e`: the element type (Element::packed for mixed buffers).
  const auto add = [&](const char* name, Category c, Tier tier, double bytes, int count, Lifetime life, Element e,
                       bool per_layer = false, bool per_unit = false) {
    if (bytes <= 0 || count <= 0) return;
    inv.groups.push_back(TensorGroup{name, c, tier, bytes, count, life, per_layer, per_unit, e});
  };
  const auto elem = [&](double bytes_per_element) { return inv.element_of(bytes_per_element); };
  const Element packed = Element::packed;
  const Element compute = inv.compute_element();
  const Tier gpu = Tier::gpu;
  const plan::Offload& off = plan.offload;
  // Expert parameters are split by ep first, then sharded only over the data-parallel ranks that
  // hold the same experts: the expert-data-parallel group, dp / ep of them (DeepSpeed-MoE
  // expert_data_parallel_group, deepspeed/utils/groups.py; Megatron-core's expert data-parallel
  // group, parallel_state.py). Dense parameters shard over all dp ranks.
  const int expert_shard = ep > 1 && shard % ep == 0 ? shard / ep : (ep > 1 ? 1 : shard);
  const auto shard_parts = [&](double dense_bytes, double expert_bytes, int min_stage) {
    return zero >= min_stage ? dense_bytes / shard + expert_bytes / expert_shard : dense_bytes + expert_bytes;
  };

  // ---- weights
  // Frozen base (LoRA/QLoRA) is loaded in the 16-bit compute dtype; QLoRA quantizes its linear weights.
  const double frozen_B = rec.compute_B;
  const double frozen_bytes = (rp.frozen - rp.frozen_quantized) * frozen_B +
                              rp.frozen_quantized * quantized_bytes_per_param(job.quant);
  const double expert_frozen_bytes = expert_frozen * (rp.frozen_quantized > 0 ? quantized_bytes_per_param(job.quant) : frozen_B);
  add("frozen base weights", Category::weights, off.params, shard_parts(frozen_bytes - expert_frozen_bytes, expert_frozen_bytes, 3),
      1, Lifetime::persistent, rp.frozen_quantized > 0 ? packed : compute);
  add("trainable weights", Category::weights, off.params,
      shard_parts((rp.trainable - expert_trainable) * rec.weight_B, expert_trainable * rec.weight_B, 3), 1, Lifetime::persistent,
      elem(rec.weight_B));

  // ---- optimizer state (+ master copy)
  const double trainable_shard = shard_parts(rp.trainable - expert_trainable, expert_trainable, 1);
  double states = 0;  // bytes per trainable parameter
  switch (job.optimizer.kind) {
    case plan::OptimizerKind::adamw:
    case plan::OptimizerKind::adam: states = 2 * rec.state_B; break;  // m and v (Kingma & Ba 2015)
    case plan::OptimizerKind::adamw_8bit:
      // bitsandbytes 8-bit Adam: m and v in 8 bits + fp32 absmax per 2048-element block (Dettmers et al. 2021).
      states = 2 * (1.0 + 4.0 / 2048.0);
      break;
    case plan::OptimizerKind::sgd: states = 0; break;
    case plan::OptimizerKind::sgd_momentum:
    case plan::OptimizerKind::lion: states = rec.state_B; break;  // one momentum buffer (Chen et al. 2023 for Lion)
    case plan::OptimizerKind::adafactor: {
      // Factored second moment: a row and a column vector per matrix instead of the matrix
      // (Shazeer & Stern 2018); for a d x 4d-ish transformer matrix ~ (d + 4d) / (4 d^2) per element.
      const double width = std::max(1.0, h);
      states = rec.state_B * 2.0 / width;
      break;
    }
  }
  const Tier opt_tier = off.optimizer;
  add("optimizer state", Category::optimizer, opt_tier, trainable_shard * states, 1, Lifetime::persistent, job.optimizer.kind == plan::OptimizerKind::adamw_8bit ? packed : elem(rec.state_B));
  add("fp32 master weights", Category::optimizer, opt_tier, trainable_shard * rec.master_B, 1, Lifetime::persistent, Element::fp32);

  // ---- gradients
  const double grad_elems = shard_parts(rp.trainable - expert_trainable, expert_trainable, 2);
  if (off.gradients == Tier::gpu) {
    const bool in_backward = job.optimizer.in_backward && inv.grad_accumulation == 1;
    if (in_backward) {
      // Optimizer-in-backward frees each gradient right after its step: one layer's at a time (torchtune).
      add("gradients (one layer, optimizer in backward)", Category::gradients, gpu,
          rp.trainable_largest_layer * rec.grad_B, 1, Lifetime::backward_layer, elem(rec.grad_B));
    } else {
      // FSDP2 inside a pipeline stage: the sharded gradients are the reduce-scatters' outputs,
      // made after the stage's last backward (the unsharded ones accumulate until then, below):
      // they live from there through the optimizer step.
      add("gradients", Category::gradients, gpu, grad_elems * rec.grad_B, 1,
          job.gradients_persist    ? Lifetime::persistent
          : inv.gathered_for_step ? Lifetime::optimizer
                                  : Lifetime::gradients,
          elem(rec.grad_B));
    }
  } else {
    // ZeRO-Offload: gradients are reduced into buckets and copied to fp32 host buffers (Ren et al. 2021, sec. 4).
    add("gradients (host fp32)", Category::gradients, off.gradients, grad_elems * 4.0, 1, Lifetime::gradients, Element::fp32);
    add("gradient buckets", Category::buffers, gpu, 2.0 * h * h * rec.compute_B, 1, Lifetime::persistent, compute);
  }
  if (off.optimizer_step == Tier::cpu && off.gradients == Tier::gpu)
    add("gradients (host fp32 copy for CPU step)", Category::gradients, Tier::cpu, trainable_shard * 4.0, 1,
        Lifetime::gradients, Element::fp32);

  // ---- data-parallel machinery (over the data-parallel ranks with the context-parallel ones,
  // plan::sharding_in_effect)
  const int grad_group = plan::gradient_group_size(plan);
  if (grad_group > 1 || zero == 3) {
    switch (prof.sharding) {
      case Sharding::none:
        // torch DDP Reducer: flat bucket copies of every gradient unless gradient_as_bucket_view.
        if (prof.ddp_bucket_copy && grad_group > 1)
          add("DDP gradient buckets", Category::buffers, gpu, rp.trainable * rec.grad_B, 1, Lifetime::persistent, elem(rec.grad_B));
        break;
      case Sharding::deepspeed:
        if (zero <= 2) {
          // ZeRO-1/2: two reduce buckets (overlap_comm) + one all-gather bucket, hidden^2 elements each
          // (HF Trainer "auto": reduce_bucket_size = hidden_size^2).
          add("ZeRO reduce/all-gather buckets", Category::buffers, gpu, 3.0 * h * h * rec.compute_B, 1,
              Lifetime::persistent, compute);
        } else {
          // ZeRO-3: modules fetched on use plus the prefetch bucket (0.9 hidden^2 elements, "auto").
          add("ZeRO-3 gathered parameters", Category::temporaries, gpu,
              (rp.largest_layer + 0.9 * h * h / tp) * rec.compute_B, 1, Lifetime::layer, compute, false, true);
          add("ZeRO-3 gradient reduce buffer", Category::temporaries, gpu,
              rp.trainable_largest_layer * rec.compute_B, 1, Lifetime::backward_layer, compute);
        }
        // DeepSpeed upcasts the gradient partition to fp32 for the optimizer step (stage_1_and_2.py, stage3.py).
        if (off.optimizer_step == Tier::gpu && rec.grad_B < 4)
          add("fp32 gradient partition", Category::temporaries, gpu, trainable_shard * 4.0, 1, Lifetime::optimizer, Element::fp32);
        break;
      case Sharding::fsdp1:
      case Sharding::fsdp2:
        if (inv.gathered_for_step) {
          // FSDP2 inside a pipeline stage, as torchtitan runs it:
          // - torchtitan's reshard_after_forward policy "default" is `not pp_enabled`: "For PP, by
          //   default do not reshard after forward to avoid per-microbatch all-gathers"
          //   (torchtitan/distributed/fsdp.py, get_fsdp_reshard_after_forward_policy; the
          //   embeddings and [norm, output] units likewise);
          // - torch.distributed.pipelining runs every backward with set_reshard_after_backward(False)
          //   and set_requires_gradient_sync(False), and only after the stage's last backward calls
          //   post_backward on each FSDP group: reshard, then reduce-scatter (torch/distributed/
          //   pipelining/stage.py, _PipelineStageBase.backward_maybe_with_nosync and _post_backward;
          //   the REDUCE_GRAD action of the multi-stage schedules, schedules.py _add_reduce_grad).
          // So the stage's parameters are gathered from the first forward to the end of the step's
          // backward (in the gather type: the compute type, or the quantized storage under QLoRA),
          // and the unsharded gradients accumulate across micro-batches in the reduce dtype
          // (torch/distributed/fsdp/_fully_shard/_fsdp_param.py, to_accumulated_grad_if_needed:
          // unsharded_grad.to(reduce_dtype); accumulate_unsharded_grad_if_needed: +=), fp32 under
          // torchtitan's mixed_precision_reduce. With 1F1B they coexist with the stage's in-flight
          // activations (the steady state's forwards follow backwards); under GPipe they are
          // counted over the forwards too (conservative: there every forward precedes them).
          const double quantized = rp.frozen_quantized > 0 ? quantized_bytes_per_param(job.quant) : rec.gather_B;
          add(kStageGatheredParams, Category::temporaries, gpu,
              (rp.total - rp.frozen_quantized) * rec.gather_B + rp.frozen_quantized * quantized, 1,
              Lifetime::forward_backward, rp.frozen_quantized > 0 ? packed : elem(rec.gather_B));
          add(kStageUnshardedGrads, Category::gradients, gpu, rp.trainable * rec.reduce_B, 1,
              Lifetime::forward_backward, elem(rec.reduce_B));
        } else if (zero == 3) {
          // Gathered 16-bit copies of the units in flight (FSDP unshard; limit_all_gathers allows two).
          // (QLoRA under FSDP gathers the quantized storage: bitsandbytes quant_storage.)
          // (In fp32 under an fp32 param_dtype: plan::PrecisionRecipe::gather_B.)
          const Element gathered = elem(rec.gather_B);
          const double unit_bytes =
              rp.largest_layer * (rp.frozen_quantized > 0 ? quantized_bytes_per_param(job.quant) : rec.gather_B);
          add("FSDP gathered units", Category::temporaries, gpu, unit_bytes, prof.gathered_units, Lifetime::layer,
              rp.frozen_quantized > 0 ? packed : gathered, false, true);
          if (prof.root_stays_gathered)
            add("FSDP root unit (embeddings, head)", Category::temporaries, gpu, rp.root * rec.gather_B, 1,
                Lifetime::forward_backward, gathered);
          else if (stage == pp - 1 && m.has_lm_head())
            add("FSDP gathered head", Category::temporaries, gpu, static_cast<double>(m.vocab) * h / tp * rec.gather_B,
                1, Lifetime::loss, gathered);
        } else if (zero == 2) {
          // SHARD_GRAD_OP: parameters stay gathered from forward through backward.
          add("FSDP gathered parameters", Category::temporaries, gpu, rp.total * rec.gather_B, 1,
              Lifetime::forward_backward, elem(rec.gather_B));
        }
        // Unsharded gradients of one unit before reduce-scatter, in the compute and reduce dtypes.
        if (zero >= 2)
          add("FSDP unit gradients before reduce-scatter", Category::temporaries, gpu,
              rp.trainable_largest_layer * (rec.gather_B + rec.reduce_B), 1, Lifetime::backward_layer, packed);
        break;
      case Sharding::yafsdp:
        // YaFSDP preallocates two parameter and two gradient buffers of one layer, reused by every layer
        // (yandex/YaFSDP README, "buffers").
        // Each layer is all-gathered into one of the two parameter buffers (the next layer's into
        // the other while this one computes), as FSDP gathers units: streamed per layer.
        add("YaFSDP parameter buffers", Category::buffers, gpu, rp.largest_layer * rec.compute_B, 2, Lifetime::layer, compute,
            false, true);
        add("YaFSDP gradient buffers", Category::buffers, gpu, 2.0 * rp.trainable_largest_layer * rec.compute_B, 1,
            Lifetime::persistent, compute);
        break;
      case Sharding::megatron:
        break;  // the contiguous grad buffer is the gradients; the distributed optimizer reuses it for gathers
    }
  }
  // Parameters kept off the GPU are streamed in layer by layer: the layer in use plus the
  // prefetched ones sit in GPU working buffers (ZeRO-Infinity's parameter buffers, aiDAPTIV's
  // layer swap), unless sharded gathers already provide them.
  if (off.params != Tier::gpu &&
      std::none_of(inv.groups.begin(), inv.groups.end(), [](const TensorGroup& g) { return g.per_unit; })) {
    const double per_param = rp.frozen_quantized > 0 ? quantized_bytes_per_param(job.quant) : rec.compute_B;
    add("streamed parameter buffers", Category::buffers, gpu, rp.largest_layer * per_param,
        1 + std::max(1, off.prefetch_depth), Lifetime::layer, rp.frozen_quantized > 0 ? packed : compute, false, true);
  }
  // torch.autocast keeps bf16 casts of the fp32 weights from forward to backward: the matmuls save
  // them, and autocast's cast cache holds the casts of leaf weights until the autocast region
  // ends (torch/csrc/autograd autocast_mode.cpp cached_cast: leaf, not a view, requires grad).
  // Under full checkpointing the checkpointed forward saves nothing, and FSDP1's parameters are
  // views into its flat parameter, which the cache skips: no copies outlive a layer.
  const bool fsdp_views = prof.sharding == Sharding::fsdp1;
  if (rec.autocast_copies && job.method == Method::full && !(fsdp_views && job.checkpointing == Checkpointing::full))
    add("autocast 16-bit weight copies", Category::temporaries, gpu, rp.total * rec.compute_B / std::max(1, inv.layers),
        inv.layers, Lifetime::saved, compute, true);
  // QLoRA dequantizes one weight at a time to the compute dtype (bitsandbytes dequantize_4bit).
  if (rp.frozen_quantized > 0)
    add("dequantized weight", Category::temporaries, gpu, rp.largest_linear * rec.compute_B, 1, Lifetime::layer, compute);

  // PyTorch's foreach AdamW materialises one full-size temporary list (torch/optim/adamw.py,
  // _multi_tensor_adamw: exp_avg_sq_sqrt = torch._foreach_sqrt(...)); a per-parameter loop needs
  // one parameter's worth; fused kernels none.
  // bitsandbytes' 8-bit optimizers update tensor by tensor with one fused kernel that reads and
  // writes the block-quantized states in place (bitsandbytes/optim/optimizer.py,
  // Optimizer8bit.step -> update_step -> F.optimizer_update_8bit_blockwise): no step temporary,
  // whatever the framework's default for torch optimizers.
  const plan::OptimizerImpl impl = job.optimizer.kind == plan::OptimizerKind::adamw_8bit ? plan::OptimizerImpl::fused
                                   : job.optimizer.implementation == plan::OptimizerImpl::framework_default
                                       ? prof.optimizer_impl
                                       : job.optimizer.implementation;
  if (off.optimizer_step == Tier::gpu && states > 0) {
    if (impl == plan::OptimizerImpl::foreach)
      add("optimizer step temporaries", Category::temporaries, gpu, trainable_shard * rec.state_B, 1, Lifetime::optimizer, elem(rec.state_B));
    else if (impl == plan::OptimizerImpl::per_parameter)
      add("optimizer step temporaries", Category::temporaries, gpu,
          std::max(rp.largest_linear, job.method == Method::full ? rp.root : 0.0) * rec.state_B, 1, Lifetime::optimizer, elem(rec.state_B));
  }

  // ---- activations
  const double tokens = static_cast<double>(job.micro_batch) * static_cast<double>(job.seq_len) / cp;
  inv.tokens_per_micro_batch = tokens;
  int in_flight = 1;
  if (pp > 1) {
    const auto mb = static_cast<int>(std::min<std::int64_t>(inv.grad_accumulation, 1 << 20));
    switch (par.schedule) {
      case plan::PipelineSchedule::gpipe: in_flight = mb; break;  // all forwards before any backward
      case plan::PipelineSchedule::one_f_one_b: in_flight = std::min(mb, pp - stage); break;  // Narayanan et al. 2021
      case plan::PipelineSchedule::interleaved:
        // Megatron interleaved 1F1B: the first stage holds pp micro-batches x (1 + (pp-1)/(pp v)) layers' worth.
        in_flight = std::min(mb, static_cast<int>(std::ceil((pp - stage) * (1.0 + (pp - 1.0) / (pp * std::max(1, par.virtual_stages))))));
        break;
    }
  }
  inv.micro_batches_in_flight = in_flight;
  inv.forwards_first = pp > 1 && par.schedule == plan::PipelineSchedule::gpipe;
  ActivationContext ac;
  ac.a = rec.activation_B;
  ac.wide = rec.autocast_copies ? 4.0 : rec.activation_B;
  // The residual stream has the parameters' type: fp32 under autocast on fp32 weights, while a
  // LoRA base is kept in the compute type (frozen_B below), so its stream is 16-bit.
  ac.residual = rec.autocast_copies && job.method == Method::full ? 4.0 : rec.activation_B;
  ac.eager_modules = !prof.fused_pointwise && !job.compile;
  ac.repeat_kv = prof.sdpa_repeats_kv;
  ac.autocast_casts = ac.eager_modules && ac.residual != ac.a;
  ac.dropout = job.dropout_for(m.dropout);
  ac.flash = job.attention != plan::AttentionImpl::eager;
  ac.compile = job.compile;
  ac.selective = prof.selective;
  const double act_scale = rec.activation_B / 2.0;  // for the 16-bit estimates below
  const Tier act_tier = off.activations;
  // Per-layer saved bytes, summed over the stage's layers (layers differ: local/global, MoE/dense).
  double saved_total = 0, recompute_layer = 0, grad_layer = 0;
  int checkpointed = 0;  // layers of the stage full checkpointing recomputes
  for (int i = 0; i < inv.layers; ++i) checkpointed += job.checkpointed(i);
  for (int k = 0; k < 8; ++k) {
    if (kind_count[k] == 0) continue;
    const int model_layer = kinds[k].model_layer;
    const SavedPerToken t = saved_per_token(m, job, trainable, ac, model_layer);
    const double attended = (k & 2) ? std::min<double>(static_cast<double>(job.seq_len),
                                                       static_cast<double>(m.attention.sliding_window))
                                    : static_cast<double>(job.seq_len);
    // Korthikanti et al. 2022 eq. 2-4: the TP region splits by t; the sequence region only with SP.
    const double per_token = (par.sequence_parallel ? t.sequence / tp : t.sequence) + t.tensor / tp;
    const double quadratic = t.quadratic * attended / tp;
    const double full_layer = (per_token + quadratic) * tokens;
    if (checkpointed > 0) {
      // A checkpointed layer keeps only its input (h per token; split by tp under SP). Backward
      // recomputes the layer from it: the recomputed tensors minus the input, already held.
      // (With checkpoint_every > 1, each kind of layer counted at the stage's share of them.)
      const double input = ac.residual * h * tokens / (par.sequence_parallel ? tp : 1);
      const double share = static_cast<double>(checkpointed) / std::max(1, inv.layers);
      saved_total += (input * share + full_layer * (1 - share)) * kind_count[k];
      recompute_layer = std::max(recompute_layer, full_layer - input);
    } else {
      saved_total += full_layer * kind_count[k];
    }
    const LayerShape s = model::layer_shape(m, model_layer);
    // Activation gradients alive during one layer's backward: two of the widest intermediates
    // (e.g. d(gate) and d(up) of a gated MLP) plus the residual stream gradient (an estimate).
    grad_layer = std::max(grad_layer, (2.0 * 2.0 * std::max({s.f * s.experts_per_token, s.q + 2 * s.kv, s.h}) / tp +
                                       2.0 * s.h) * tokens * act_scale);
  }
  // RoPE's cos and sin (b, s, rotary dims), in the stream's type: HF computes them once per
  // forward (LlamaModel: position_embeddings = self.rotary_emb(hidden_states, position_ids)) and
  // every layer's q * cos and rotate_half(q) * sin keep the same two tensors (mul keeps the other
  // operand for the gradient of the one that requires grad); checkpointed layers keep them as inputs.
  if (ac.eager_modules && m.positional == model::Positional::rope && inv.layers > 0)
    saved_total += 2.0 * ac.residual * std::floor(m.head_dim_or_default() * m.rope_fraction) * tokens;
  if (inv.layers > 0) {
    const double per_layer = saved_total / inv.layers;
    if (act_tier == Tier::gpu) {
      add("saved activations", Category::activations, gpu, per_layer, inv.layers * in_flight, Lifetime::saved, packed, true);
    } else {
      // Activation offload (SSDTrain; DeepSpeed cpu_checkpointing): the GPU keeps the layer being
      // produced or consumed plus the prefetched ones; the rest waits in host memory or on flash.
      const int resident = std::min(inv.layers, 1 + std::max(1, off.prefetch_depth));
      add("saved activations (resident)", Category::activations, gpu, per_layer, resident, Lifetime::saved, packed, true);
      add("saved activations (offloaded)", Category::activations, act_tier, per_layer, inv.layers * in_flight, Lifetime::saved, packed,
          true);
      if (act_tier == Tier::nvme)
        add("activation staging buffers (pinned)", Category::buffers, Tier::cpu, 2.0 * per_layer, 1, Lifetime::persistent, packed);
    }
  }
  if (checkpointed > 0)
    add("recomputed layer activations", Category::activations, gpu, recompute_layer, 1, Lifetime::backward_layer, packed);
  add("activation gradients", Category::temporaries, gpu, grad_layer, 1, Lifetime::backward_layer, inv.activation_element());

  // The final norm and the loss on the last stage.
  if (stage == pp - 1 && m.has_lm_head()) {
    const double V = static_cast<double>(m.vocab) / tp;
    const double n = tokens;
    const double a = rec.activation_B;
    // The final norm (as a layer's norms), and its output when the head is trainable (the head's
    // weight gradient needs it; under autocast on an fp32 stream, the head's 16-bit cast of it).
    const bool head_trains = job.method == Method::full;
    add("final norm activations", Category::activations, gpu,
        (norm_saved_per_token(m, ac, h, head_trains) + (head_trains ? a * h : 0.0)) * n, 1, Lifetime::loss, packed);
    // Cross-entropy over the vocabulary, per token of V logits. log_softmax keeps its output for
    // backward (and nll_loss the same tensor). HF transformers (loss_utils.ForCausalLMLoss) and
    // torchtitan upcast the logits to fp32 first: forward holds 16-bit logits + fp32 copy + fp32
    // log-probs (a + 4 + 4); backward holds the log-probs, nll's gradient and log_softmax's
    // gradient (4 + 4 + 4). torchtune's CEWithChunkedOutputLoss keeps 16-bit logit chunks and
    // upcasts one chunk at a time. Compiled, the loss is one fused kernel that keeps the 16-bit
    // logits and a per-token log-sum-exp and writes a 16-bit gradient.
    double kept = 0, peak = 0;
    if (job.compile && prof.compile_covers_loss) {
      kept = a * V * n;
      peak = a * V * n / std::max(1, job.loss.chunks);
    } else if (job.loss.chunks > 0) {
      kept = (a + 4.0) * V * n;
      peak = 8.0 * V * n / job.loss.chunks;
    } else if (job.loss.fp32_logits) {
      kept = 4.0 * V * n;
      peak = std::max(a + 4.0, 8.0) * V * n;
    } else {
      kept = a * V * n;
      peak = 2.0 * a * V * n;
    }
    add("logits and log-softmax", Category::activations, gpu, kept, 1, Lifetime::loss, packed);
    add("loss temporaries (logits, fp32 upcast, logit gradients)", Category::temporaries, gpu, peak, 1, Lifetime::loss_peak, packed);
  }

  // ---- offload engine buffers (pinned host memory and GPU staging)
  const bool params_off = off.params != Tier::gpu;
  if (params_off && off.params == Tier::nvme) {
    // DeepSpeed offload_param (nvme): buffer_count x buffer_size pinned buffers (defaults 5 x 1e8 elements).
    const double buffer = off.buffer_bytes > 0 ? off.buffer_bytes : 1e8 * rec.compute_B;
    add("parameter swap buffers (pinned)", Category::buffers, Tier::cpu, std::max(5, off.buffer_count) * buffer, 1,
        Lifetime::persistent, packed);
  }
  if (off.optimizer == Tier::nvme) {
    // DeepSpeed offload_optimizer (nvme): one sub-group of optimizer state in pinned memory at a time
    // (sub_group_size default 1e9 elements; fp32 master, m, v and gradient = 16 B per element).
    const double chunk = off.chunk_bytes > 0 ? off.chunk_bytes : std::min(trainable_shard, 1e9) * 16.0;
    add(kOptimizerSwapBuffers, Category::buffers, Tier::cpu, chunk, 1, Lifetime::persistent, packed);
  }

  // ---- fixed overheads
  add("CUDA context", Category::overhead, gpu, prof.cuda_context_bytes, 1, Lifetime::persistent, packed);
  add("cuBLAS and attention workspaces", Category::overhead, gpu, prof.workspace_bytes, 1, Lifetime::persistent, packed);
  if (world > 1) add("NCCL buffers", Category::overhead, gpu, prof.nccl_buffer_bytes, 1, Lifetime::persistent, packed);
}

}  // namespace ftplan::inventory
