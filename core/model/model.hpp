// A transformer's architecture and what follows from it: parameter counts per component
// and FLOPs per token. The format of the zoo files that describe it is docs/model-format.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/enum_names.hpp"

namespace ftplan::model {

enum class Architecture { decoder, encoder, encoder_decoder };
enum class FfnKind { swiglu, geglu, gelu, relu };
enum class NormKind { rmsnorm, layernorm, layernorm_nobias };
enum class BiasKind { none, all, qkv };
enum class Positional { rope, learned, alibi, relative, none };

// Each enum's names as zoo files write them (common/enum_names.hpp).
inline std::span<const EnumName<Architecture>> enum_table(Architecture) {
  static constexpr EnumName<Architecture> t[] = {{Architecture::decoder, "decoder"},
                                                 {Architecture::encoder, "encoder"},
                                                 {Architecture::encoder_decoder, "encoder-decoder"}};
  return t;
}
inline std::span<const EnumName<FfnKind>> enum_table(FfnKind) {
  static constexpr EnumName<FfnKind> t[] = {
      {FfnKind::swiglu, "swiglu"}, {FfnKind::geglu, "geglu"}, {FfnKind::gelu, "gelu"}, {FfnKind::relu, "relu"}};
  return t;
}
inline std::span<const EnumName<NormKind>> enum_table(NormKind) {
  static constexpr EnumName<NormKind> t[] = {{NormKind::rmsnorm, "rmsnorm"},
                                             {NormKind::layernorm, "layernorm"},
                                             {NormKind::layernorm_nobias, "layernorm-nobias"}};
  return t;
}
inline std::span<const EnumName<BiasKind>> enum_table(BiasKind) {
  static constexpr EnumName<BiasKind> t[] = {{BiasKind::none, "none"}, {BiasKind::all, "all"}, {BiasKind::qkv, "qkv"}};
  return t;
}
inline std::span<const EnumName<Positional>> enum_table(Positional) {
  static constexpr EnumName<Positional> t[] = {{Positional::rope, "rope"},
                                               {Positional::learned, "learned"},
                                               {Positional::alibi, "alibi"},
                                               {Positional::relative, "relative"},
                                               {Positional::none, "none"}};
  return t;
}

const char* to_string(Architecture a);
const char* to_string(FfnKind k);
const char* to_string(NormKind k);
const char* to_string(BiasKind k);
const char* to_string(Positional p);

inline bool is_gated(FfnKind k) { return k == FfnKind::swiglu || k == FfnKind::geglu; }

struct AttentionSpec {
  // Tokens a local (sliding-window) layer attends to; 0 = no sliding window.
  std::int64_t sliding_window = 0;
  // Every k-th layer (layers 0, k, 2k, ... 0-based) is local; 0 with sliding_window > 0 = all layers local.
  int local_every = 0;
  // tanh soft-capping of attention scores (Gemma-2); 0 = off.
  double logit_softcap = 0;
};

struct MoeSpec {
  int experts = 0;                     // routed experts per MoE layer; 0 = dense model
  int experts_per_token = 0;           // top-k routing
  int shared_experts = 0;              // always-active experts
  std::int64_t expert_ffn = 0;         // per-expert FFN size; 0 = the model's ffn
  std::int64_t shared_expert_ffn = 0;  // per shared expert; 0 = expert_ffn
  int every = 1;                       // every k-th layer is MoE ...
  int first = 0;                       // ... counting from this 0-based layer
  bool router_bias = false;
};

struct PublishedCount {
  std::int64_t params = 0;     // what the source states; 0 = none given
  bool exact = false;          // the count must match exactly
  std::int64_t tolerance = 0;  // else: allowed absolute difference (the source's rounding)
  std::string source;
};

struct ModelSpec {
  std::string name;
  std::string display_name;
  std::string family;
  Architecture architecture = Architecture::decoder;
  std::int64_t hidden = 0;
  int layers = 0;          // decoder layers (encoder-only: encoder layers)
  int encoder_layers = 0;  // encoder-decoder only
  int heads = 0;
  int kv_heads = 0;  // 0 = heads
  int head_dim = 0;  // 0 = hidden / heads
  std::int64_t ffn = 0;
  FfnKind ffn_kind = FfnKind::swiglu;
  std::int64_t vocab = 0;
  bool tied_embeddings = false;
  NormKind norm = NormKind::rmsnorm;
  int norms_per_layer = 2;
  bool final_norm = true;
  bool embedding_norm = false;
  BiasKind bias = BiasKind::none;
  bool lm_head_bias = false;
  bool parallel_residual = false;
  Positional positional = Positional::rope;
  double rope_fraction = 1.0;
  std::int64_t max_context = 0;
  int type_vocab = 0;
  bool pooler = false;
  bool mlm_head = false;
  int relative_buckets = 32;
  AttentionSpec attention;
  double final_logit_softcap = 0;
  // Training dropout of the published configuration (hidden and attention probabilities), e.g.
  // BERT's hidden_dropout_prob 0.1; a job may override it. Dropout keeps masks for backward.
  double dropout = 0;
  MoeSpec moe;
  PublishedCount published;

  int kv_heads_or_default() const { return kv_heads > 0 ? kv_heads : heads; }
  int head_dim_or_default() const {
    return head_dim > 0 ? head_dim : (heads > 0 ? static_cast<int>(hidden / heads) : 0);
  }
  bool is_moe() const { return moe.experts > 0; }
  bool is_moe_layer(int layer) const {
    return is_moe() && layer >= moe.first && (layer - moe.first) % (moe.every > 0 ? moe.every : 1) == 0;
  }
  bool is_local_layer(int layer) const {
    if (attention.sliding_window <= 0) return false;
    return attention.local_every <= 0 || layer % attention.local_every == 0;
  }
  bool has_lm_head() const { return architecture != Architecture::encoder || mlm_head; }
  // Decoder layers plus, for encoder-decoder models, encoder layers: what pipeline stages split.
  int total_layers() const { return layers + (architecture == Architecture::encoder_decoder ? encoder_layers : 0); }
};

// Parameter counts of one model by component. All counts are parameters (not bytes).
struct ParamCounts {
  std::int64_t embedding = 0;  // token (+ position, token-type) embeddings and the embedding norm
  std::int64_t attention = 0;  // Q, K, V, O (and cross-attention) weights and biases, all layers
  std::int64_t mlp = 0;        // dense MLPs, all layers
  std::int64_t experts = 0;    // routed + shared expert MLPs, all MoE layers
  std::int64_t router = 0;     // MoE routers
  std::int64_t norms = 0;      // per-layer and final norms
  std::int64_t head = 0;       // LM head (0 when tied), BERT pooler and MLM head
  std::int64_t other = 0;      // relative-position tables
  std::int64_t total = 0;

  // Parameters one token passes through in its matmuls (MoE: only the experts it is routed to),
  // the LM head included (tied or not), embeddings and norms excluded. PaLM's "N" in 6N.
  std::int64_t active_matmul = 0;
  // All parameters a token touches (MoE-active).
  std::int64_t active_total = 0;
};

// The widths of one layer's matmuls, before tensor parallelism: the one place they are derived
// (parameter counts, the inventory's per-layer tensors and the step IR's GEMM shapes read them).
// Doubles because every user multiplies them into byte and FLOP counts.
struct LayerShape {
  double h = 0;               // hidden
  double q = 0;               // query and output projection width, heads x head_dim
  double kv = 0;              // K and V width, kv_heads x head_dim (GQA/MQA; Ainslie et al. 2023)
  double f = 0;               // FFN width of one MLP (a MoE layer: one routed expert's)
  int experts = 0;            // routed experts of a MoE layer; 0 = dense MLP
  int experts_per_token = 1;  // top-k routing (1 for a dense layer)
  bool gated = true;          // gate, up and down matrices (SwiGLU/GeGLU; Shazeer 2020)
  bool operator==(const LayerShape&) const = default;
};
// `layer` counts decoder layers 0..layers-1, then encoder layers for encoder-decoder models
// (those are dense).
LayerShape layer_shape(const ModelSpec& m, int layer);
// Tokens one attention layer looks back over for a sequence of seq_len (a sliding-window layer:
// at most its window).
std::int64_t attended_tokens(const ModelSpec& m, int layer, std::int64_t seq_len);

// The linear modules of a transformer layer (HF transformers: q_proj, k_proj, v_proj, o_proj,
// gate_proj, up_proj, down_proj): what a full fine-tune trains and LoRA may adapt.
enum class Linear { q, k, v, o, gate, up, down };
inline constexpr Linear kLinears[] = {Linear::q,    Linear::k,  Linear::v,   Linear::o,
                                      Linear::gate, Linear::up, Linear::down};
// The names job.lora.targets uses.
inline std::span<const EnumName<Linear>> enum_table(Linear) {
  static constexpr EnumName<Linear> t[] = {{Linear::q, "q"},      {Linear::k, "k"},       {Linear::v, "v"},
                                           {Linear::o, "o"},      {Linear::gate, "gate"}, {Linear::up, "up"},
                                           {Linear::down, "down"}};
  return t;
}
const char* to_string(Linear l);
std::optional<Linear> linear_from_string(std::string_view name);
inline bool is_mlp(Linear l) { return l == Linear::gate || l == Linear::up || l == Linear::down; }
struct LinearDims {
  double in = 0, out = 0;
};
// Input and output features of one module of a layer of shape `s` (an MLP module: one expert's).
LinearDims linear_dims(const LayerShape& s, Linear l);

// Counts for one layer, for sharding and per-stage accounting.
struct LayerParams {
  std::int64_t attention = 0;  // incl. cross-attention for encoder-decoder decoder layers
  std::int64_t mlp = 0;        // dense MLP or (MoE) all experts + router
  std::int64_t norms = 0;
  std::int64_t active_matmul = 0;  // matmul weights a token uses in this layer
  std::int64_t total() const { return attention + mlp + norms; }
};

ParamCounts count_params(const ModelSpec& m);
// Pieces of count_params that need no loop over layers (for per-rank accounting in hot paths).
std::int64_t embedding_params(const ModelSpec& m);       // token, position, token-type embeddings + embedding norm
std::int64_t head_params(const ModelSpec& m);            // LM head (0 when tied), BERT pooler and MLM head
std::int64_t position_table_params(const ModelSpec& m);  // T5 relative-position tables
// `layer` counts decoder layers 0..layers-1, then encoder layers for encoder-decoder models.
LayerParams layer_params(const ModelSpec& m, int layer, bool cross_attention = false);

// Training FLOPs per token at sequence length `seq_len`, after PaLM (Chowdhery et al. 2022, app. B):
// model FLOPs = 6N + 12 * L * H * Q * T, N = active matmul parameters (LM head included),
// L layers, H heads, Q head dim, T attended tokens (sliding-window layers attend at most their window).
// The attention term is not halved for causal masks, as PaLM's and Megatron's accounting do not.
struct FlopsPerToken {
  double forward = 0;   // 2N + 4LHQT
  double backward = 0;  // 2x forward
  double training() const { return forward + backward; }
  double attention_forward = 0;  // the 4LHQT part of forward
};
FlopsPerToken flops_per_token(const ModelSpec& m, std::int64_t seq_len);

// Upper bounds of a spec's counts. check() applies them, so every way a model comes in (zoo
// YAML, a scenario's inline model, Hugging Face config.json) has the same limits.
// Layers: the deepest published transformers have 96-128 (GPT-3, Megatron-1T, Llama-3.1-405B);
// DeepNet trained 1,000 (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers").
// 1024 covers it and bounds a step's IR, which holds tens of ops per layer and micro-batch.
inline constexpr int kMaxLayers = 1024;  // layers + encoder_layers
// Heads and head dim: the zoo's most are 160 heads (Megatron-1T) and 256 per head (Gemma-2);
// 2^16 is far above either.
inline constexpr int kMaxHeads = 1 << 16;
inline constexpr int kMaxHeadDim = 1 << 16;
// Widths, against the zoo's largest: hidden 25,600 and ffn 102,400 (Megatron-1T), vocab 256,000
// (Gemma-2), context 131,072 (Llama-3.1; Llama-4 Scout publishes 10M). Each bound is 40x or more above.
inline constexpr std::int64_t kMaxHidden = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxFfn = std::int64_t{1} << 23;
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxContext = std::int64_t{1} << 30;
// Routed experts: DeepSeek-V3 has 256 per layer; the count only scales parameter arithmetic.
inline constexpr int kMaxExperts = 100000;

// Structural checks of a spec (sizes positive and within the bounds above, heads dividing hidden,
// ...): returns messages keyed by field name; empty when the spec is sound. The one validation
// of a model: the zoo reader, the scenario reader and the Hugging Face importer all report these.
std::vector<std::pair<std::string, std::string>> check(const ModelSpec& m);

}  // namespace ftplan::model
