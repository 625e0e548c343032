// The parameters of one rank, layer kind by layer kind (build_state.hpp): totals, trainable and
// frozen parts, experts, the largest layer and linear (FSDP units, dequantized weights), the root
// unit, and what a paged optimizer pages. Also the whole model's LoRA parameter count.
#include <algorithm>
#include <cmath>

#include "inventory/build_state.hpp"

namespace ftplan::inventory {

using model::LayerShape;
using model::ModelSpec;
using plan::Job;
using plan::Method;

namespace detail {
namespace {

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

// bitsandbytes gives a paged optimizer a unified-memory state buffer only for tensors of at least
// 1e5 elements; smaller ones get torch.zeros_like on the device (bitsandbytes/optim/optimizer.py,
// Optimizer8bit.get_state_buffer: `if not self.is_paged or p.numel() < 1e5`).
constexpr double kPagedMinElements = 1e5;

// Of one layer's trainable parameters on a rank (split by tp, experts by tp x ep), those in tensors
// a paged optimizer pages: each weight matrix (full fine-tune) or LoRA factor, A (r x in) and B
// (out x r), by its own size. Norm weights (h elements) stay below the threshold.
double paged_layer_params(const ModelSpec& m, const Job& job, const Trainable& t, int layer, double tp, double ep) {
  const LayerShape s = model::layer_shape(m, layer);
  const double r = job.method == Method::full ? 0.0 : job.lora.rank;
  // Experts on this rank: experts / ep of them in a full fine-tune; LoRA adapts every expert
  // (as lora_layer_params counts them).
  const double experts = s.experts > 0 ? (job.method == Method::full ? s.experts / ep : s.experts) : 1;
  double paged = 0;
  for (model::Linear l : model::kLinears) {
    if (!t(l)) continue;
    const model::LinearDims d = model::linear_dims(s, l);
    const double copies = model::is_mlp(l) ? experts : 1;
    if (job.method == Method::full) {
      if (d.in * d.out / tp >= kPagedMinElements) paged += copies * d.in * d.out / tp;
      continue;
    }
    for (const double factor : {r * d.in / tp, d.out * r / tp})
      if (factor >= kPagedMinElements) paged += copies * factor;
  }
  return paged;
}

// The model's number of a layer of the stack: encoder-decoder stacks put the encoder first; the
// model numbers decoder layers first.
int model_layer_of(const ModelSpec& m, int layer) {
  if (m.architecture != model::Architecture::encoder_decoder) return layer;
  return layer >= m.encoder_layers ? layer - m.encoder_layers : m.layers + layer;
}

int kind_of(const ModelSpec& m, int layer) {
  const int ml = model_layer_of(m, layer);
  const bool cross = m.architecture == model::Architecture::encoder_decoder && layer >= m.encoder_layers;
  const bool moe = ml < m.layers && m.is_moe_layer(ml);
  const bool local = ml < m.layers && m.is_local_layer(ml);
  return (moe ? kMoeLayer : 0) | (local ? kLocalLayer : 0) | (cross ? kCrossLayer : 0);
}

// The parameters of one layer of kind `k` (model layer `model_layer`) on this rank.
LayerKind measure_kind(const Build& b, int k, int model_layer) {
  const ModelSpec& m = b.m;
  const double tp = b.tp;
  LayerKind kd;
  kd.model_layer = model_layer;
  const model::LayerParams lp = model::layer_params(m, model_layer, (k & kCrossLayer) != 0);
  const double split = (k & kMoeLayer) ? static_cast<double>(b.tp) * b.ep : tp;
  // Megatron column/row splits: attention and MLP matrices divide by tp (experts also by ep); norms replicate.
  kd.total =
      static_cast<double>(lp.attention) / tp + static_cast<double>(lp.mlp) / split + static_cast<double>(lp.norms);
  kd.linear = static_cast<double>(lp.attention + lp.mlp) / split;
  const LayerShape s = model::layer_shape(m, model_layer);
  kd.largest_linear = std::max(s.h * s.q, s.h * s.f) / tp;
  kd.lora = lora_layer_params(m, b.job, b.trainable, model_layer) / tp;
  if (b.job.optimizer.paged) kd.paged = paged_layer_params(m, b.job, b.trainable, model_layer, tp, b.ep);
  // The experts' share of the layer's parameters on this rank (their MLPs, split by tp x ep).
  kd.expert = (k & kMoeLayer) ? static_cast<double>(lp.mlp) / split : 0;
  return kd;
}

// The embeddings on the first stage; the LM head, position table and final norm on the last
// (with tied embeddings and pp > 1 Megatron keeps a copy of the embedding there). An
// encoder-decoder model has a second final norm, the encoder's (HF T5Stack.final_layer_norm in
// both stacks, transformers modeling_t5.py; model::count_params counts both), on the stage that
// runs the last encoder layer (`runs_encoder_end`).
double root_params(const Build& b, bool runs_encoder_end) {
  const ModelSpec& m = b.m;
  const double h = b.h;
  double root = runs_encoder_end && m.final_norm ? b.norm_params : 0;
  if (b.stage == 0) root += static_cast<double>(model::embedding_params(m)) / b.tp;
  if (b.stage == b.pp - 1) {
    root += static_cast<double>(model::head_params(m) + model::position_table_params(m)) / b.tp +
            (m.final_norm ? b.norm_params : 0);
    if (m.tied_embeddings && b.pp > 1 && m.has_lm_head()) root += static_cast<double>(m.vocab) * h / b.tp;
  }
  return root;
}

}  // namespace

void count_rank_params(Build& b) {
  const ModelSpec& m = b.m;
  const Job& job = b.job;
  RankParams& rp = b.inv.params;
  rp = RankParams{};
  b.inv.layers = 0;
  const bool encoder_decoder = m.architecture == model::Architecture::encoder_decoder;
  bool runs_encoder_end = false;  // the stack's layers put the encoder first
  // A stack whose layers are all of one kind (no MoE, no interleaved local/global attention, not
  // encoder-decoder) counts each range at once; otherwise layer by layer.
  const bool one_kind =
      !m.is_moe() && !encoder_decoder && (m.attention.sliding_window <= 0 || m.attention.local_every <= 0);
  for (int c = 0, chunks = stage_chunks(b.plan); c < chunks; ++c) {
    const auto [begin, end] = stage_layer_range(m, b.plan, b.stage, c);
    b.inv.layers += end - begin;
    runs_encoder_end |= encoder_decoder && begin < m.encoder_layers && m.encoder_layers <= end;
    for (int layer = begin; layer < end; ++layer) {
      const int k = kind_of(m, layer);
      LayerKind& kd = b.kinds[static_cast<std::size_t>(k)];
      if (kd.count == 0) kd = measure_kind(b, k, model_layer_of(m, layer));
      if (one_kind) {
        kd.count += end - layer;
        break;
      }
      ++kd.count;
    }
  }
  for (const LayerKind& kd : b.kinds) {
    if (kd.count == 0) continue;
    rp.total += kd.total * kd.count;
    rp.largest_layer = std::max(rp.largest_layer, kd.total);
    b.frozen_linear += kd.linear * kd.count;
    rp.largest_linear = std::max(rp.largest_linear, kd.largest_linear);
    rp.trainable += kd.lora * kd.count;
    b.paged_trainable += kd.paged * kd.count;
    rp.expert += kd.expert * kd.count;
    rp.trainable_largest_layer = std::max(rp.trainable_largest_layer, job.method == Method::full ? kd.total : kd.lora);
  }
  b.norm_params = m.norm == model::NormKind::layernorm ? 2 * b.h : b.h;
  rp.root = root_params(b, runs_encoder_end);
  rp.total += rp.root;
  if (job.method == Method::full) {
    rp.trainable = rp.total;
    // The embedding, head and position tables are matrices far above the paging threshold; the
    // final norms are not.
    const int final_norms = m.final_norm ? (b.stage == b.pp - 1 ? 1 : 0) + (runs_encoder_end ? 1 : 0) : 0;
    if (job.optimizer.paged) b.paged_trainable += rp.root - final_norms * b.norm_params;
  }
  // LoRA's adapters are parameters beside the frozen base (PEFT adds them to the base's modules):
  // the frozen part is the whole base.
  if (job.method != Method::full) rp.total += rp.trainable;
  rp.frozen = rp.total - rp.trainable;
  rp.frozen_quantized = job.method == Method::qlora ? b.frozen_linear : 0;
  // Expert parameters train (full fine-tune) or stay frozen (LoRA leaves the experts' base frozen;
  // its adapters are counted with the dense part).
  b.expert_trainable = job.method == Method::full ? rp.expert : 0.0;
  b.expert_frozen = rp.expert - b.expert_trainable;
}

}  // namespace detail

std::int64_t lora_params(const ModelSpec& m, const Job& job) {
  const detail::Trainable tr(m, job);
  double total = 0;
  for (int layer = 0; layer < m.total_layers(); ++layer) total += detail::lora_layer_params(m, job, tr, layer);
  return static_cast<std::int64_t>(std::llround(total));
}

}  // namespace ftplan::inventory
