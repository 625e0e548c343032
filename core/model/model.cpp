#include "model/model.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace ftplan::model {
namespace {

std::int64_t norm_params(const ModelSpec& m) { return m.norm == NormKind::layernorm ? 2 * m.hidden : m.hidden; }

// Attention block: Q and O are heads*head_dim wide, K and V kv_heads*head_dim (GQA/MQA;
// Ainslie et al. 2023). Biases per the model's bias kind (Qwen2: Q, K, V only).
std::int64_t query_width(const ModelSpec& m) { return static_cast<std::int64_t>(m.heads) * m.head_dim_or_default(); }
std::int64_t kv_width(const ModelSpec& m) {
  return static_cast<std::int64_t>(m.kv_heads_or_default()) * m.head_dim_or_default();
}

std::int64_t attention_weights(const ModelSpec& m) {
  const std::int64_t q = query_width(m), kv = kv_width(m);
  return m.hidden * q + 2 * m.hidden * kv + q * m.hidden;
}

std::int64_t attention_biases(const ModelSpec& m) {
  const std::int64_t q = query_width(m), kv = kv_width(m);
  switch (m.bias) {
    case BiasKind::none: return 0;
    case BiasKind::qkv: return q + 2 * kv;
    case BiasKind::all: return q + 2 * kv + m.hidden;
  }
  return 0;
}

// One MLP of width `ffn`: gated (SwiGLU/GeGLU; Shazeer 2020) has gate, up and down matrices,
// a plain MLP has up and down.
std::int64_t mlp_weights(const ModelSpec& m, std::int64_t ffn) {
  return (is_gated(m.ffn_kind) ? 3 : 2) * m.hidden * ffn;
}

std::int64_t mlp_biases(const ModelSpec& m, std::int64_t ffn) {
  if (m.bias != BiasKind::all) return 0;
  return (is_gated(m.ffn_kind) ? 2 : 1) * ffn + m.hidden;
}

std::int64_t expert_ffn(const ModelSpec& m) { return m.moe.expert_ffn > 0 ? m.moe.expert_ffn : m.ffn; }
std::int64_t shared_ffn(const ModelSpec& m) {
  return m.moe.shared_expert_ffn > 0 ? m.moe.shared_expert_ffn : expert_ffn(m);
}

bool is_decoder_layer_of_encoder_decoder(const ModelSpec& m, int layer) {
  return m.architecture == Architecture::encoder_decoder && layer < m.layers;
}

}  // namespace

std::int64_t attended_tokens(const ModelSpec& m, int layer, std::int64_t seq_len) {
  if (layer < m.layers && m.is_local_layer(layer)) return std::min(seq_len, m.attention.sliding_window);
  return seq_len;
}

const char* to_string(Linear l) { return name_of(l); }

std::optional<Linear> linear_from_string(std::string_view name) { return value_named<Linear>(name); }

LinearDims linear_dims(const LayerShape& s, Linear l) {
  switch (l) {
    case Linear::q: return {s.h, s.q};
    case Linear::k:
    case Linear::v: return {s.h, s.kv};
    case Linear::o: return {s.q, s.h};
    case Linear::gate:
    case Linear::up: return {s.h, s.f};
    case Linear::down: return {s.f, s.h};
  }
  return {};
}

LayerShape layer_shape(const ModelSpec& m, int layer) {
  LayerShape s;
  s.h = static_cast<double>(m.hidden);
  s.q = static_cast<double>(m.heads) * m.head_dim_or_default();
  s.kv = static_cast<double>(m.kv_heads_or_default()) * m.head_dim_or_default();
  s.f = static_cast<double>(m.ffn);
  s.gated = is_gated(m.ffn_kind);
  if (layer < m.layers && m.is_moe_layer(layer)) {
    s.experts = m.moe.experts;
    s.experts_per_token = m.moe.experts_per_token;
    s.f = static_cast<double>(expert_ffn(m));
  }
  return s;
}

const char* to_string(Architecture a) { return name_of(a); }
const char* to_string(FfnKind k) { return name_of(k); }
const char* to_string(NormKind k) { return name_of(k); }
const char* to_string(BiasKind k) { return name_of(k); }
const char* to_string(Positional p) { return name_of(p); }

LayerParams layer_params(const ModelSpec& m, int layer, bool cross_attention) {
  LayerParams p;
  const int attention_blocks = cross_attention ? 2 : 1;
  p.attention = attention_blocks * (attention_weights(m) + attention_biases(m));
  p.active_matmul = attention_blocks * attention_weights(m);
  p.norms = (m.norms_per_layer + (cross_attention ? 1 : 0)) * norm_params(m);
  const bool moe_layer = layer < m.layers && m.is_moe_layer(layer);
  if (moe_layer) {
    const std::int64_t routed = mlp_weights(m, expert_ffn(m)) + mlp_biases(m, expert_ffn(m));
    const std::int64_t shared = mlp_weights(m, shared_ffn(m)) + mlp_biases(m, shared_ffn(m));
    // Router: one linear hidden -> experts (Fedus et al. 2021; Mixtral's `gate`).
    const std::int64_t router = m.hidden * m.moe.experts + (m.moe.router_bias ? m.moe.experts : 0);
    p.mlp = m.moe.experts * routed + m.moe.shared_experts * shared + router;
    p.active_matmul += m.moe.experts_per_token * mlp_weights(m, expert_ffn(m)) +
                       m.moe.shared_experts * mlp_weights(m, shared_ffn(m)) + m.hidden * m.moe.experts;
  } else {
    p.mlp = mlp_weights(m, m.ffn) + mlp_biases(m, m.ffn);
    p.active_matmul += mlp_weights(m, m.ffn);
  }
  return p;
}

std::int64_t embedding_params(const ModelSpec& m) {
  std::int64_t e = m.vocab * m.hidden;
  if (m.positional == Positional::learned) e += m.max_context * m.hidden;
  e += static_cast<std::int64_t>(m.type_vocab) * m.hidden;
  if (m.embedding_norm) e += norm_params(m);
  return e;
}

std::int64_t head_params(const ModelSpec& m) {
  std::int64_t head = 0;
  if (m.has_lm_head()) {
    if (!m.tied_embeddings) head += m.vocab * m.hidden;
    if (m.lm_head_bias) head += m.vocab;
  }
  // BERT (Devlin et al. 2019; HF BertForPreTraining): pooler dense + bias; MLM transform dense + bias,
  // its LayerNorm, and the decoder bias (the decoder weight is tied to the embedding).
  if (m.pooler) head += m.hidden * m.hidden + m.hidden;
  if (m.mlm_head) head += m.hidden * m.hidden + m.hidden + 2 * m.hidden + m.vocab;
  return head;
}

std::int64_t position_table_params(const ModelSpec& m) {
  // T5 relative attention bias: one (buckets x heads) table per stack, in its first layer (Raffel et al. 2020).
  if (m.positional != Positional::relative) return 0;
  const int stacks = m.architecture == Architecture::encoder_decoder ? 2 : 1;
  return stacks * static_cast<std::int64_t>(m.relative_buckets) * m.heads;
}

ParamCounts count_params(const ModelSpec& m) {
  ParamCounts c;
  const std::int64_t n = norm_params(m);

  c.embedding = embedding_params(m);

  const int total_layers = m.total_layers();
  for (int layer = 0; layer < total_layers; ++layer) {
    const LayerParams p = layer_params(m, layer, is_decoder_layer_of_encoder_decoder(m, layer));
    c.attention += p.attention;
    c.norms += p.norms;
    if (layer < m.layers && m.is_moe_layer(layer)) {
      const std::int64_t router = m.hidden * m.moe.experts + (m.moe.router_bias ? m.moe.experts : 0);
      c.router += router;
      c.experts += p.mlp - router;
    } else {
      c.mlp += p.mlp;
    }
    c.active_matmul += p.active_matmul;
  }
  const int stacks = m.architecture == Architecture::encoder_decoder ? 2 : 1;
  if (m.final_norm) c.norms += stacks * n;
  c.other = position_table_params(m);
  c.head = head_params(m);
  if (m.has_lm_head()) c.active_matmul += m.vocab * m.hidden;  // the head is a matmul whether tied or not

  c.total = c.embedding + c.attention + c.mlp + c.experts + c.router + c.norms + c.head + c.other;
  // A token visits experts_per_token of the routed experts of each MoE layer; the rest are inactive for it.
  std::int64_t inactive = 0;
  for (int layer = 0; layer < m.layers; ++layer)
    if (m.is_moe_layer(layer))
      inactive += static_cast<std::int64_t>(m.moe.experts - m.moe.experts_per_token) *
                  (mlp_weights(m, expert_ffn(m)) + mlp_biases(m, expert_ffn(m)));
  c.active_total = c.total - inactive;
  return c;
}

FlopsPerToken flops_per_token(const ModelSpec& m, std::int64_t seq_len) {
  FlopsPerToken f;
  const ParamCounts c = count_params(m);
  const double hq = static_cast<double>(m.heads) * m.head_dim_or_default();
  double attention = 0;
  const int total_layers = m.total_layers();
  for (int layer = 0; layer < total_layers; ++layer) {
    // QK^T and attention-times-V: 2 matmuls of 2 * (heads*head_dim) * T FLOPs each per token.
    attention += 4.0 * hq * static_cast<double>(attended_tokens(m, layer, seq_len));
    if (is_decoder_layer_of_encoder_decoder(m, layer)) attention += 4.0 * hq * static_cast<double>(seq_len);
  }
  f.attention_forward = attention;
  f.forward = 2.0 * static_cast<double>(c.active_matmul) + attention;
  // Backward computes gradients of inputs and of weights: twice the forward (Kaplan et al. 2020, sec. 2.1).
  f.backward = 2.0 * f.forward;
  return f;
}

std::vector<std::pair<std::string, std::string>> check(const ModelSpec& m) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto bad = [&](std::string key, std::string message) { out.emplace_back(std::move(key), std::move(message)); };
  const auto at_most = [&](const char* key, std::int64_t value, std::int64_t limit, const char* what) {
    if (value > limit) bad(key, fmt::format("{} is more than {} {} (ftplan's limit)", value, limit, what));
  };
  if (m.hidden <= 0) bad("hidden", "must be positive");
  at_most("hidden", m.hidden, kMaxHidden, "hidden units");
  if (m.layers <= 0) bad("layers", "must be positive");
  if (m.encoder_layers < 0) bad("encoder_layers", "must not be negative");
  // Both stacks together: what a pipeline splits and a step's IR holds.
  if (static_cast<std::int64_t>(m.layers) + m.encoder_layers > kMaxLayers)
    bad(m.encoder_layers > 0 && m.layers <= kMaxLayers ? "encoder_layers" : "layers",
        fmt::format(
            "{} layers{} are more than {} (ftplan's limit: the deepest trained transformer, DeepNet, has 1,000)",
            static_cast<std::int64_t>(m.layers) + m.encoder_layers, m.encoder_layers > 0 ? " with the encoder's" : "",
            kMaxLayers));
  if (m.heads <= 0) bad("heads", "must be positive");
  at_most("heads", m.heads, kMaxHeads, "heads");
  if (m.kv_heads < 0) bad("kv_heads", "must be positive");
  if (m.head_dim < 0) bad("head_dim", "must be positive");
  at_most("head_dim", m.head_dim, kMaxHeadDim, "elements per head");
  if (m.ffn <= 0 && !m.is_moe()) bad("ffn", "must be positive");
  at_most("ffn", m.ffn, kMaxFfn, "FFN units");
  if (m.vocab <= 0) bad("vocab", "must be positive");
  at_most("vocab", m.vocab, kMaxVocab, "tokens in the vocabulary");
  if (m.max_context <= 0) bad("max_context", "must be positive");
  at_most("max_context", m.max_context, kMaxContext, "tokens of context");
  at_most("moe.experts", m.moe.experts, kMaxExperts, "experts");
  at_most("moe.expert_ffn", m.moe.expert_ffn, kMaxFfn, "FFN units");
  at_most("moe.shared_expert_ffn", m.moe.shared_expert_ffn, kMaxFfn, "FFN units");
  if (m.heads > 0 && m.kv_heads > 0) {
    if (m.kv_heads > m.heads)
      bad("kv_heads", fmt::format("{} is more than the {} query heads", m.kv_heads, m.heads));
    else if (m.heads % m.kv_heads != 0)
      bad("kv_heads", fmt::format("{} does not divide the {} query heads (each KV head serves a whole group)",
                                  m.kv_heads, m.heads));
  }
  if (m.head_dim <= 0 && m.heads > 0 && m.hidden > 0 && m.hidden % m.heads != 0)
    bad("head_dim",
        fmt::format("not given, and hidden {} is not a multiple of heads {}; give head_dim", m.hidden, m.heads));
  if (m.architecture == Architecture::encoder_decoder && m.encoder_layers <= 0)
    bad("encoder_layers", "must be positive for an encoder-decoder model");
  if (m.architecture != Architecture::encoder_decoder && m.encoder_layers != 0)
    bad("encoder_layers", "is only for encoder-decoder models");
  if (m.is_moe()) {
    if (m.moe.experts_per_token <= 0 || m.moe.experts_per_token > m.moe.experts)
      bad("moe.experts_per_token", fmt::format("must be between 1 and experts ({})", m.moe.experts));
    if (m.moe.every <= 0) bad("moe.every", "must be positive");
    if (m.moe.first < 0 || m.moe.first >= std::max(1, m.layers)) bad("moe.first", "must name a layer of the model");
  }
  if (m.rope_fraction <= 0 || m.rope_fraction > 1) bad("rope_fraction", "must be in (0, 1]");
  if (m.attention.local_every > 0 && m.attention.sliding_window <= 0)
    bad("attention.local_every", "needs attention.sliding_window");
  return out;
}

}  // namespace ftplan::model
