#include "schedule/step_ir.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "common/error.hpp"
#include "plan/checks.hpp"

namespace ftplan::schedule {

using inventory::Element;
using inventory::Category;
using inventory::Lifetime;
using inventory::TensorGroup;
using plan::Checkpointing;
using plan::Method;
using plan::Tier;

const char* to_string(Stream s) {
  switch (s) {
    case Stream::compute: return "compute";
    case Stream::comm: return "comm";
    case Stream::comm_reduce: return "comm-reduce";
    case Stream::h2d: return "h2d";
    case Stream::d2h: return "d2h";
    case Stream::cpu: return "cpu";
    case Stream::nvme_read: return "nvme-read";
    case Stream::nvme_write: return "nvme-write";
    case Stream::p2p: return "p2p";
  }
  return "?";
}

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::elementwise: return "elementwise";
    case OpKind::loss: return "loss";
    case OpKind::optimizer: return "optimizer";
    case OpKind::collective: return "collective";
    case OpKind::copy: return "copy";
    case OpKind::alloc: return "alloc";
    case OpKind::free: return "free";
    case OpKind::marker: return "marker";
  }
  return "?";
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all-reduce";
    case Collective::all_gather: return "all-gather";
    case Collective::reduce_scatter: return "reduce-scatter";
    case Collective::all_to_all: return "all-to-all";
    case Collective::send_recv: return "send/recv";
  }
  return "?";
}

const char* to_string(Pass p) {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::recompute: return "recompute";
    case Pass::backward: return "backward";
    case Pass::optimizer: return "optimizer";
    case Pass::other: return "other";
  }
  return "?";
}

namespace {

// Host cost of one parameter all-gather in DeepSpeed ZeRO-3 before PR #1188: issue #1069 measured
// pre-launch 130 us + launch 250 us per parameter on one 8-GPU node; its 8 list-API launches
// (~6 us each, the simulator's default dispatch cost) are counted per rank instead.
constexpr double kDeepSpeedPerParameterFetch_s = 380e-6 - 8 * 6e-6;

// Shapes and per-token work of one layer on one rank (after TP).
struct LayerWork {
  double h = 0, q = 0, kv = 0, f = 0;
  double experts_per_token = 1;
  double attended = 0;  // tokens each query attends
  bool gated = true;
};

// An op with its identity filled in; callers add what is particular to it.
Op make_op(OpKind kind, Stream stream, Pass pass, std::string name, int layer, int micro) {
  Op op;
  op.kind = kind;
  op.stream = stream;
  op.pass = pass;
  op.name = std::move(name);
  op.layer = layer;
  op.micro = micro;
  return op;
}

class Builder {
 public:
  Builder(const model::ModelSpec& m, const plan::Plan& p, const inventory::Inventory& inv, int micro_batches, bool names,
          PipelineView view)
      : m_(m), p_(p), inv_(inv), job_(p.job), micro_override_(micro_batches), names_(names), view_(view) {
    tp_ = std::max(1, p.parallel.tp);
    cp_ = std::max(1, p.parallel.cp);
    dp_ = plan::data_parallel_degree(p);
    tokens_ = inv.tokens_per_micro_batch;
    act_B_ = inv.recipe.activation_B;
    w_B_ = inv.recipe.compute_B;
    full_ = job_.method == Method::full;
    fused_ = inv.profile.fused_pointwise || job_.compile;
    load_ = p.parallel.capacity_factor > 0 ? p.parallel.capacity_factor : 1.0;
  }

  StepIR build();

 private:
  int add(Op&& op) {
    op.kernels = std::max(op.kernels, op.kind == OpKind::gemm || op.kind == OpKind::attention ||
                                              op.kind == OpKind::elementwise || op.kind == OpKind::loss
                                          ? 1
                                          : 0);
    ir_.ops.push_back(std::move(op));
    return static_cast<int>(ir_.ops.size()) - 1;
  }
  // An op's element type when its builder did not set one: GEMMs and attention compute in the
  // compute type (FP8 linears in fp8), memory-bound kernels in the activation type, the optimizer
  // in fp32; collectives and copies move the type of the tensor they write (or read). Set for
  // every op at the end of build(), when all reads and writes are known.
  Element element_of(const Op& op) const {
    switch (op.kind) {
      case OpKind::gemm: return op.fp8 ? Element::fp8 : inv_.compute_element();
      case OpKind::attention: return inv_.compute_element();
      case OpKind::elementwise:
      case OpKind::loss: return inv_.activation_element();
      case OpKind::optimizer: return Element::fp32;
      case OpKind::collective:
      case OpKind::copy:
        if (!op.writes.empty()) return ir_.tensors[op.writes.front()].element;
        if (!op.reads.empty()) return ir_.tensors[op.reads.front()].element;
        return op.group == Group::dp ? inv_.compute_element() : inv_.activation_element();
      default: return Element::packed;
    }
  }
  int tensor(std::string name, Category c, Tier tier, double bytes, int layer, Element e = Element::packed) {
    const double count = std::round(bytes / inventory::element_bytes(e));
    ir_.tensors.push_back(Tensor{std::move(name), c, tier, bytes, layer, e, {static_cast<std::int64_t>(count)}});
    return static_cast<int>(ir_.tensors.size()) - 1;
  }
  int alloc(Stream s, int t, Ids deps = {}) {
    Op op = make_op(OpKind::alloc, s, Pass::other, "alloc " + ir_.tensors[t].name, ir_.tensors[t].layer, 0);
    op.tensor = t;
    op.deps = std::move(deps);
    op.writes = {t};
    return add(std::move(op));
  }
  int release(Stream s, int t, Ids deps = {}) {
    Op op = make_op(OpKind::free, s, Pass::other, "free " + ir_.tensors[t].name, ir_.tensors[t].layer, 0);
    op.tensor = t;
    op.deps = std::move(deps);
    const int id = add(std::move(op));
    if (static_cast<std::size_t>(t) >= freed_by_.size()) freed_by_.resize(static_cast<std::size_t>(t) + 1, -1);
    freed_by_[static_cast<std::size_t>(t)] = id;
    return id;
  }
  // The op that freed tensor t, or -1.
  int freed_by(int t) const { return t >= 0 && static_cast<std::size_t>(t) < freed_by_.size() ? freed_by_[static_cast<std::size_t>(t)] : -1; }
  const TensorGroup* gathered_group() const {
    for (const auto& g : inv_.groups)
      if (g.per_unit) return &g;
    return nullptr;
  }
  LayerWork work_of(int layer) const;
  double pointwise_bytes(const LayerWork& w, bool backward) const;
  double activation_bytes(const LayerWork& w, bool backward) const;
  int pointwise_kernels(bool backward) const;
  // The parameter tensors of one layer, in the order its modules run, as shares of its parameters.
  std::vector<double> parameter_tensor_shares(int layer) const;
  bool fused_qkv() const;
  bool fused_gate_up() const;
  // HBM bytes of one micro-batch's FP8 casts in one layer's forward (inputs and weights) or
  // backward (output gradients), and their kernels.
  double fp8_cast_bytes(int layer, int micro, bool backward) const;
  int fp8_cast_kernels(bool backward) const;
  int linear_count() const;  // nn.Linear modules of a (dense) layer
  // Matmul weights of one layer on this rank (after TP; MoE: this rank's experts).
  double matmul_weights(int layer) const;
  // Fills an attention op's shape fields: T queries, the keys each attends, the head dimension.
  void shape_attention(Op& at, const LayerWork& w, bool flash, bool causal) const {
    at.flash = flash;
    at.flash_v1 = flash && job_.attention == plan::AttentionImpl::flash_v1;
    at.causal = causal;
    at.m = static_cast<std::int64_t>(tokens_);
    at.n = static_cast<std::int64_t>(w.attended);
    at.k = m_.head_dim_or_default();
  }
  // QLoRA: bitsandbytes' MatMul4Bit dequantizes each 4-bit base weight to the compute dtype right
  // before its matmul, forward and backward (and again in a checkpointed recompute):
  // F.dequantize_4bit reads the packed codes and block constants and writes a 16-bit copy, one
  // kernel per linear (bitsandbytes/autograd/_functions.py, MatMul4Bit.forward/backward).
  // Returns `after` when the layer has no quantized weights.
  int dequantize(const std::string& tag, int layer, int micro, Pass pass, Ids deps) {
    Op dq = make_op(OpKind::elementwise, Stream::compute, pass, tag + " dequantize 4-bit weights", layer, micro);
    dq.bytes = matmul_weights(layer) * (inventory::quantized_bytes_per_param(job_.quant) + w_B_);
    dq.kernels = linear_count();
    dq.deps = std::move(deps);
    return add(std::move(dq));
  }
  bool quantized_base() const { return inv_.params.frozen_quantized > 0; }
  int fp8_casts(const std::string& tag, int layer, int micro, Pass pass, bool backward, int after) {
    Op op = make_op(OpKind::elementwise, Stream::compute, pass, tag + " fp8 casts", layer, micro);
    op.bytes = fp8_cast_bytes(layer, micro, backward);
    op.kernels = fp8_cast_kernels(backward);
    op.deps = {after};
    return add(std::move(op));
  }
  double eager_score_bytes(const LayerWork& w) const;
  // Compute ops of one layer's forward (pass forward or recompute) or backward; returns the last op.
  int layer_forward(int layer, int micro, Pass pass, Ids deps, Ids reads, int saved);
  int layer_backward(int layer, int micro, Ids deps, Ids reads);
  int gemm(const std::string& name, int layer, int micro, Pass pass, double m, double k, double n, bool weight_grad,
           const Ids& deps);
  Op make_gemm(const std::string& name, int layer, int micro, Pass pass, double m, double k, double n, bool weight_grad,
               const Ids& deps) const;
  // A GEMM of a tensor-parallel block with the communication Megatron puts around it
  // (Shoeybi et al. 2019 fig. 3; Korthikanti et al. 2022 fig. 5): `before` its input is
  // all-gathered (sequence parallelism), `after` its output all-reduced or reduce-scattered.
  // With async TP the collective becomes tp point-to-point steps overlapping tp GEMM blocks.
  enum class TpComm { none, all_gather_before, reduce_after };
  int tp_gemm(Op gemm, TpComm comm, const std::string& name);
  // `op` in `blocks` pieces on the compute stream, a point-to-point pass of `pass_bytes` over
  // group `g` on the comm stream between consecutive pieces (the next piece waits for it).
  int blocked(Op op, int blocks, double pass_bytes, Group g, const std::string& pass_name);
  int collective(Stream s, Collective c, Group g, int size, double bytes, const std::string& name, int layer,
                 int micro, Ids deps);
  int copy(Stream s, Tier src, Tier dst, double bytes, const std::string& name, int layer, int micro,
           Ids deps, Ids reads, Ids writes);
  // Expert parallelism: the all-to-all that sends each token to the ranks of its top-k experts
  // (dispatch) or brings the results back (combine) (GShard, Lepikhin et al. 2021; Megatron-core
  // MoE token dispatcher). Returns `after` when the layer has no experts or ep is 1.
  int dispatch(bool moe, const std::string& name, int layer, int micro, int after);
  // Attention; under context parallelism as ring attention (Liu et al. 2023; Megatron-core CP):
  // cp blocks, each waiting for the K/V block (forward) or K/V and their gradients (backward)
  // passed around the ring while the previous block computes.
  int attention(Op op, bool backward);

  const model::ModelSpec& m_;
  const plan::Plan& p_;
  const inventory::Inventory& inv_;
  const plan::Job& job_;
  StepIR ir_;
  std::vector<int> freed_by_;  // by tensor: the op that freed it
  int tp_ = 1, cp_ = 1, dp_ = 1;
  double tokens_ = 0, act_B_ = 2, w_B_ = 2;
  bool full_ = true;
  bool fused_ = false;
  int micro_override_ = 0;
  double load_ = 1.0;  // routed tokens an expert rank computes, relative to the even share
  bool names_ = true;
  PipelineView view_;
  // An op's or tensor's name, formatted only when names are wanted (traces, dry-run messages).
  template <class... Args>
  std::string name(fmt::format_string<Args...> f, Args&&... args) const {
    return names_ ? fmt::format(f, std::forward<Args>(args)...) : std::string();
  }
};

double Builder::eager_score_bytes(const LayerWork& w) const {
  // Eager attention materialises heads x s scores per token and passes them through one kernel
  // per op (HF BertSelfAttention / LlamaAttention eager): QK^T writes them, the scale and the
  // mask add read and write them, softmax (fp32 under autocast) reads and writes, dropout reads,
  // writes and keeps a mask, the cast for AV reads and writes, AV reads them.
  const double a = act_B_;
  const double wide = inv_.recipe.autocast_copies ? 4.0 : a;
  const double dropout = job_.dropout_for(m_.dropout) > 0 ? 2.0 * wide + 1.0 : 0.0;
  // Megatron's FusedScaleMaskSoftmax does scale, mask and softmax in one kernel in the 16-bit
  // type (megatron/model/fused_softmax.py): QK^T writes, the fused kernel reads and writes, AV reads.
  if (fused_) return (4.0 * a + (dropout > 0 ? 2.0 * a + 1.0 : 0.0)) * w.attended * m_.heads / tp_;
  return (6.0 * a + 5.0 * wide + dropout) * w.attended * m_.heads / tp_;
}

double Builder::pointwise_bytes(const LayerWork& w, bool backward) const {
  // HBM bytes per token of one layer's norms, RoPE, residual adds and dropout (not the MLP
  // activation, counted on its own). Fused kernels (Megatron/TE, torch.compile) read each input
  // once and write each output once. Eager PyTorch runs each op as its own kernel that reads its
  // inputs and writes its output, per element of a activation bytes:
  // - RMSNorm as HF's LlamaRMSNorm and torchtitan's RMSNorm write it: x.float() (a + 4), pow (8),
  //   mean (4), x * rsqrt (8), type_as (4 + a), * weight (2a): 28 + 4a (36 B at 16 bits; the two
  //   casts vanish in fp32);
  // - LayerNorm: F.layer_norm, one kernel (2a); under autocast it runs in fp32 and the next
  //   linear casts its fp32 output back (a + 4 + 4 + a);
  // - RoPE on q and k: HF's apply_rotary_pos_emb (q cos; rotate_half's neg and cat; sin; add) or
  //   torchtitan's complex multiply between fp32 casts: ~10a per element;
  // - the attention output's transpose(1, 2).contiguous() before o_proj: 2a per element;
  // - two residual adds: 3a each.
  const double a = act_B_;
  const bool autocast = inv_.recipe.autocast_copies;
  const bool rope = m_.positional == model::Positional::rope;
  const int norms = std::max(1, m_.norms_per_layer);
  double fwd = 2.0 * 3.0 * a * w.h;  // residual adds
  if (fused_) {
    fwd += norms * 2.0 * a * w.h + (rope ? 2.0 * a * (w.q + w.kv) : 0.0);
  } else {
    const double norm = m_.norm == model::NormKind::rmsnorm ? (a < 4 ? 2 * a + 8 : 0.0) + 20.0 + 2 * a
                        : autocast                        ? 2 * a + 8.0
                                                          : 2 * a;
    fwd += norms * norm * w.h + (rope ? 10.0 * a * (w.q + w.kv) : 0.0) + 2.0 * a * w.q;
  }
  if (job_.dropout_for(m_.dropout) > 0) fwd += 2.0 * (2.0 * a + 1.0) * w.h;  // two residual dropouts: read, write, mask
  // Backward reads the saved inputs and the incoming gradient and writes the outgoing gradient:
  // about twice the forward traffic.
  return backward ? 2.0 * fwd : fwd;
}

int Builder::pointwise_kernels(bool backward) const {
  // The kernels behind pointwise_bytes, term by term: eager RMSNorm 8 (float, pow, mean, add eps,
  // rsqrt, mul, type_as, mul weight), LayerNorm 1 (2 with autocast's cast back), RoPE 10 (q and k:
  // mul, neg, cat, mul, add), the contiguous copy, two residual adds, two dropouts; backward about
  // twice as many. Fused: a norm, RoPE and residual kernels per layer.
  if (fused_) return backward ? 6 : 4;
  const bool rope = m_.positional == model::Positional::rope;
  const int norm = m_.norm == model::NormKind::rmsnorm ? 8 : (inv_.recipe.autocast_copies ? 2 : 1);
  const int fwd = std::max(1, m_.norms_per_layer) * norm + (rope ? 10 : 0) + 1 + 2 +
                  (job_.dropout_for(m_.dropout) > 0 ? 2 : 0);
  return backward ? 2 * fwd : fwd;
}

double Builder::activation_bytes(const LayerWork& w, bool backward) const {
  // Per routed token: the MLP's activation (and gate product). Fused: read the input(s), write the
  // output (backward: read the gradient and the inputs, write the input gradients). Eager SwiGLU,
  // silu(gate) * up: silu (2a) then mul (3a); backward: mul's two input gradients (3a each) and
  // silu's (3a). GELU alone is one kernel either way (2a; backward 3a).
  const double a = act_B_;
  if (!w.gated) return (backward ? 3.0 : 2.0) * a * w.f;
  if (fused_) return (backward ? 5.0 : 3.0) * a * w.f;
  return (backward ? 9.0 : 5.0) * a * w.f;
}

// Families whose checkpoints hold Q, K and V as one matrix (GPT-2 / Megatron c_attn and
// query_key_value, BLOOM, Falcon, MPT Wqkv, Phi-3 qkv_proj, Qwen c_attn); Phi-3 fuses gate_up too.
bool Builder::fused_qkv() const {
  const std::string& f = m_.family;
  return f == "gpt" || f == "bloom" || f == "falcon" || f == "mpt" || f == "phi3" || f == "qwen";
}
bool Builder::fused_gate_up() const { return m_.family == "phi3"; }

double Builder::fp8_cast_bytes(int layer, int micro, bool backward) const {
  // FP8 linears with tensor-wise scaling (torchao Float8Linear, dynamic; Transformer Engine,
  // delayed): each bf16 operand of an FP8 GEMM is read for its amax, read again and written as FP8,
  // plus an FP8 transposed copy for the other GEMM that uses it (Hopper's FP8 GEMMs take only the
  // TN layout): 2 + 2 + 1 + 1 = 6 bytes per element. Forward: each linear's input (a linear of
  // its own casts a shared input again) and its weight; backward: each linear's output gradient.
  // Attention and the LM head stay in bf16 (torchtitan's float8 filter skips "output").
  // With sequence parallelism the hidden-wide operands (the QKV and MLP inputs, the o and down
  // projections' output gradients) are cast on the rank's 1/tp of the sequence, before their
  // all-gather (TE, torchao). Megatron/TE keeps a micro-batch's FP8 weights for the next ones
  // (TE's weight caching across gradient accumulation): their casts count on micro-batch 0 only.
  constexpr double kBytesPerElement = 6.0;
  const LayerWork w = work_of(layer);
  const double k = w.experts_per_token;
  const double sp = p_.parallel.sequence_parallel ? 1.0 / tp_ : 1.0;
  const double attn_in = fused_qkv() ? 1 : 3, mlp_in = w.gated && !fused_gate_up() ? 2 : 1;
  if (backward) {
    const double grads = (w.q + 2 * w.kv) + sp * w.h + k * ((w.gated ? 2 : 1) * w.f + sp * w.h);
    return kBytesPerElement * grads * tokens_;
  }
  const double inputs = sp * attn_in * w.h + w.q + k * (sp * mlp_in * w.h + w.f);
  const bool cached = job_.framework == plan::Framework::megatron && micro > 0;
  return kBytesPerElement * (inputs * tokens_ + (cached ? 0.0 : matmul_weights(layer)));
}

double Builder::matmul_weights(int layer) const {
  const LayerWork w = work_of(layer);
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  const double experts = moe ? static_cast<double>(std::max(1, m_.moe.experts)) / std::max(1, p_.parallel.ep) : 1.0;
  return w.h * (w.q + 2 * w.kv) + w.q * w.h + experts * ((w.gated ? 2 : 1) * w.h * w.f + w.f * w.h);
}

int Builder::linear_count() const {
  return (fused_qkv() ? 1 : 3) + 1 + (model::is_gated(m_.ffn_kind) ? (fused_gate_up() ? 1 : 2) : 1) + 1;
}

int Builder::fp8_cast_kernels(bool backward) const {
  // Two kernels (amax, cast) per operand: each linear's input and weight forward, its output
  // gradient backward.
  return 2 * linear_count() * (backward ? 1 : 2);
}

std::vector<double> Builder::parameter_tensor_shares(int layer) const {
  const LayerWork w = work_of(layer);
  const bool bias_all = m_.bias == model::BiasKind::all;
  const bool bias_qkv = bias_all || m_.bias == model::BiasKind::qkv;
  std::vector<double> t;
  const auto matrix = [&](double in, double out, bool bias) {
    t.push_back(in * out);
    if (bias) t.push_back(out);
  };
  const auto norm = [&] {
    t.push_back(w.h);
    if (m_.norm == model::NormKind::layernorm) t.push_back(w.h);
  };
  norm();
  if (fused_qkv()) {
    matrix(w.h, w.q + 2 * w.kv, bias_qkv);
  } else {
    matrix(w.h, w.q, bias_qkv);
    matrix(w.h, w.kv, bias_qkv);
    matrix(w.h, w.kv, bias_qkv);
  }
  matrix(w.q, w.h, bias_all);
  if (m_.norms_per_layer >= 2) norm();
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  // This rank's experts (expert parallelism splits them over ep ranks).
  const int experts = moe ? std::max(1, m_.moe.experts / std::max(1, p_.parallel.ep)) : 1;
  if (moe) matrix(w.h, m_.moe.experts, false);  // router
  for (int e = 0; e < experts; ++e) {
    if (w.gated && fused_gate_up()) {
      matrix(w.h, 2 * w.f, bias_all);
    } else if (w.gated) {
      matrix(w.h, w.f, bias_all);
      matrix(w.h, w.f, bias_all);
    } else {
      matrix(w.h, w.f, bias_all);
    }
    matrix(w.f, w.h, bias_all);
  }
  double sum = 0;
  for (double x : t) sum += x;
  for (double& x : t) x /= sum;
  return t;
}

LayerWork Builder::work_of(int layer) const {
  LayerWork w;
  w.h = static_cast<double>(m_.hidden);
  w.q = static_cast<double>(m_.heads) * m_.head_dim_or_default() / tp_;
  w.kv = static_cast<double>(m_.kv_heads_or_default()) * m_.head_dim_or_default() / tp_;
  w.f = static_cast<double>(m_.ffn) / tp_;
  w.gated = model::is_gated(m_.ffn_kind);
  if (layer < m_.layers && m_.is_moe_layer(layer)) {
    w.f = static_cast<double>(m_.moe.expert_ffn > 0 ? m_.moe.expert_ffn : m_.ffn) / tp_;
    w.experts_per_token = m_.moe.experts_per_token;
  }
  const double seq = static_cast<double>(job_.seq_len);
  w.attended = layer < m_.layers && m_.is_local_layer(layer)
                   ? std::min(seq, static_cast<double>(m_.attention.sliding_window))
                   : seq;
  return w;
}

int Builder::gemm(const std::string& name, int layer, int micro, Pass pass, double m, double k, double n,
                  bool weight_grad, const Ids& deps) {
  return add(make_gemm(name, layer, micro, pass, m, k, n, weight_grad, deps));
}

int Builder::tp_gemm(Op op, TpComm comm, const std::string& name) {
  if (tp_ <= 1 || comm == TpComm::none) return add(std::move(op));
  const bool sp = p_.parallel.sequence_parallel;
  const double bytes = tokens_ * static_cast<double>(m_.hidden) * act_B_;  // the full block input/output
  if (sp && p_.parallel.async_tp) return blocked(std::move(op), tp_, bytes / tp_, Group::tp, name);
  if (comm == TpComm::all_gather_before) {
    if (!sp) return add(std::move(op));
    op.deps = {collective(Stream::comm, Collective::all_gather, Group::tp, tp_, bytes, name, op.layer, op.micro, op.deps)};
    return add(std::move(op));
  }
  const int g = add(std::move(op));
  const Op& o = ir_.ops[g];
  return collective(Stream::comm, sp ? Collective::reduce_scatter : Collective::all_reduce, Group::tp, tp_, bytes, name,
                    o.layer, o.micro, {g});
}

Op Builder::make_gemm(const std::string& name, int layer, int micro, Pass pass, double m, double k, double n,
                      bool weight_grad, const Ids& deps) const {
  Op op = make_op(OpKind::gemm, Stream::compute, pass, name, layer, micro);
  op.m = static_cast<std::int64_t>(m);
  op.k = static_cast<std::int64_t>(k);
  op.n = static_cast<std::int64_t>(n);
  op.fp8 = job_.precision == plan::Precision::fp8_mixed && layer >= 0;  // the LM head stays bf16 (fp8_cast_bytes)
  const double fwd = 2.0 * m * k * n;
  // Forward: one GEMM. Backward: the input gradient, plus the weight gradient when the weight
  // trains (a frozen LoRA base needs only the input gradient).
  const double times = pass == Pass::backward ? (weight_grad ? 2.0 : 1.0) : 1.0;
  op.flops = fwd * times;
  op.weight_grad = pass == Pass::backward && weight_grad;
  op.model_flops = pass == Pass::recompute ? 0 : op.flops;
  op.recompute_flops = pass == Pass::recompute ? fwd : 0;
  // Model FLOPs are the FLOPs the method needs: a frozen (LoRA/QLoRA base) weight has no weight
  // gradient, so its backward is one GEMM, not two. (Counting 6N for LoRA put its MFU above the
  // GEMM rate the GPU reaches: 93% on an A100.)
  op.bytes = times * (act_B_ * (m * k + m * n) + w_B_ * k * n);
  op.kernels = static_cast<int>(times);
  op.deps = deps;
  return op;
}

int Builder::layer_forward(int layer, int micro, Pass pass, Ids deps, Ids reads, int saved) {
  const LayerWork w = work_of(layer);
  const double T = tokens_;
  const std::string tag = name("{} L{}{}", pass == Pass::recompute ? "re" : "fwd", layer,
                                      inv_.grad_accumulation > 1 ? name(" m{}", micro) : "");
  // Norms, RoPE, residual adds, dropout: memory-bound kernels (pointwise_bytes).
  Op ew = make_op(OpKind::elementwise, Stream::compute, pass, tag + " norms/rope/residual", layer, micro);
  ew.bytes = pointwise_bytes(w, false) * T;
  ew.kernels = pointwise_kernels(false);
  ew.deps = std::move(deps);
  ew.reads = reads;
  int last = add(std::move(ew));
  if (job_.precision == plan::Precision::fp8_mixed) last = fp8_casts(tag, layer, micro, pass, false, last);
  if (quantized_base()) last = dequantize(tag, layer, micro, pass, {last});
  if (inv_.recipe.autocast_copies) {
    // torch.autocast casts each fp32 weight to 16 bits on every forward (the cast cache lives for
    // one autocast region; a checkpointed recompute casts again): one kernel per linear that
    // reads 4 bytes and writes 2 per parameter (torch/csrc/autograd autocast, cached_cast).
    Op cast = make_op(OpKind::elementwise, Stream::compute, pass, tag + " autocast weight casts", layer, micro);
    cast.bytes = matmul_weights(layer) * (4.0 + w_B_);
    cast.kernels = linear_count();
    cast.deps = {last};
    last = add(std::move(cast));
  }
  last = tp_gemm(make_gemm(tag + " qkv", layer, micro, pass, T, w.h, w.q + 2 * w.kv, false, {last}),
                 TpComm::all_gather_before, tag + " tp attn in");
  // Attention: QK^T and AV, 2 x 2 T q per attended token; a causal flash kernel skips the masked
  // half (FlashAttention-2, Dao 2023); eager computes the full square. Model FLOPs count the full
  // square, as PaLM's 12 L H Q T does.
  Op at = make_op(OpKind::attention, Stream::compute, pass, tag + " attention", layer, micro);
  const bool flash = job_.attention != plan::AttentionImpl::eager;
  const bool causal = m_.architecture != model::Architecture::encoder;
  const double square = 4.0 * T * w.attended * w.q;
  at.flops = square * (flash && causal ? 0.5 : 1.0);
  at.model_flops = pass == Pass::recompute ? 0 : square;
  at.recompute_flops = pass == Pass::recompute ? square : 0;
  at.bytes = act_B_ * T * (2 * w.q + 2 * w.kv) + (flash ? 0.0 : eager_score_bytes(w) * T);
  at.kernels = flash ? 1 : 5;
  shape_attention(at, w, flash, causal);
  at.deps = {last};
  last = attention(std::move(at), false);
  last = tp_gemm(make_gemm(tag + " attn_out", layer, micro, pass, T, w.q, w.h, false, {last}), TpComm::reduce_after,
                 tag + " tp attn");
  const double k = w.experts_per_token;
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  const double routed = T * k * (moe ? load_ : 1.0);
  if (moe && p_.parallel.ep > 1) {
    if (tp_ > 1 && p_.parallel.sequence_parallel)
      last = collective(Stream::comm, Collective::all_gather, Group::tp, tp_, T * w.h * act_B_, tag + " tp mlp in", layer,
                        micro, {last});
    last = dispatch(moe, tag + " dispatch", layer, micro, last);
    last = gemm(tag + " mlp_in", layer, micro, pass, routed, w.h, (w.gated ? 2 : 1) * w.f, false, {last});
  } else {
    last = tp_gemm(make_gemm(tag + " mlp_in", layer, micro, pass, routed, w.h, (w.gated ? 2 : 1) * w.f, false, {last}),
                   TpComm::all_gather_before, tag + " tp mlp in");
  }
  Op act = make_op(OpKind::elementwise, Stream::compute, pass, tag + " activation", layer, micro);
  // Activation (and gate product): read the MLP input(s), write the output.
  act.bytes = activation_bytes(w, false) * routed;
  act.kernels = w.gated ? 2 : 1;
  act.deps = {last};
  last = add(std::move(act));
  if (moe && p_.parallel.ep > 1) {
    last = gemm(tag + " mlp_out", layer, micro, pass, routed, w.f, w.h, false, {last});
    last = dispatch(moe, tag + " combine", layer, micro, last);
    if (tp_ > 1)
      last = collective(Stream::comm, p_.parallel.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                        Group::tp, tp_, T * w.h * act_B_, tag + " tp mlp", layer, micro, {last});
  } else {
    last = tp_gemm(make_gemm(tag + " mlp_out", layer, micro, pass, routed, w.f, w.h, false, {last}), TpComm::reduce_after,
                   tag + " tp mlp");
  }
  if (saved >= 0) ir_.ops[last].writes.push_back(saved);
  return last;
}

int Builder::layer_backward(int layer, int micro, Ids deps, Ids reads) {
  const LayerWork w = work_of(layer);
  const double T = tokens_;
  const std::string tag = name("bwd L{}{}", layer, inv_.grad_accumulation > 1 ? name(" m{}", micro) : "");
  const double k = w.experts_per_token;
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  const double routed = T * k * (moe ? load_ : 1.0);
  if (moe && p_.parallel.ep > 1) {
    // The gradient of the combine goes back to the expert ranks first.
    Op join = make_op(OpKind::marker, Stream::compute, Pass::backward, tag + " start", layer, micro);
    join.deps = std::move(deps);
    deps = {dispatch(moe, tag + " combine", layer, micro, add(std::move(join)))};
  }
  if (quantized_base()) deps = {dequantize(tag, layer, micro, Pass::backward, std::move(deps))};
  // Backward runs the conjugates: a reduce-scatter's gradient is an all-gather and vice versa;
  // an all-reduce's is an all-reduce on the other side of the block.
  Op mlp_out = make_gemm(tag + " mlp_out", layer, micro, Pass::backward, routed, w.f, w.h, full_, std::move(deps));
  mlp_out.reads = reads;
  int last = tp_gemm(std::move(mlp_out), moe && p_.parallel.ep > 1 ? TpComm::none : TpComm::all_gather_before,
                     tag + " tp mlp out");
  Op act = make_op(OpKind::elementwise, Stream::compute, Pass::backward, tag + " activation", layer, micro);
  act.bytes = activation_bytes(w, true) * routed;
  act.kernels = w.gated ? 3 : 2;
  act.deps = {last};
  last = add(std::move(act));
  if (moe && p_.parallel.ep > 1) {
    last = gemm(tag + " mlp_in", layer, micro, Pass::backward, routed, w.h, (w.gated ? 2 : 1) * w.f, full_, {last});
    last = dispatch(moe, tag + " dispatch", layer, micro, last);
    if (tp_ > 1)
      last = collective(Stream::comm, p_.parallel.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                        Group::tp, tp_, T * w.h * act_B_, tag + " tp mlp", layer, micro, {last});
  } else {
    last = tp_gemm(make_gemm(tag + " mlp_in", layer, micro, Pass::backward, routed, w.h, (w.gated ? 2 : 1) * w.f, full_, {last}),
                   TpComm::reduce_after, tag + " tp mlp");
  }
  last = tp_gemm(make_gemm(tag + " attn_out", layer, micro, Pass::backward, T, w.q, w.h, full_, {last}),
                 TpComm::all_gather_before, tag + " tp attn out");
  Op at = make_op(OpKind::attention, Stream::compute, Pass::backward, tag + " attention", layer, micro);
  const bool flash = job_.attention != plan::AttentionImpl::eager;
  const bool causal = m_.architecture != model::Architecture::encoder;
  const double square = 4.0 * T * w.attended * w.q;
  // Flash backward recomputes the scores: 5 matmuls against the forward's 2 (2.5x; Dao 2023).
  at.flops = square * (flash ? 2.5 : 2.0) * (flash && causal ? 0.5 : 1.0);
  at.model_flops = 2.0 * square;
  at.bytes = 2.0 * act_B_ * T * (2 * w.q + 2 * w.kv) + (flash ? 0.0 : 2.0 * eager_score_bytes(w) * T);
  at.kernels = flash ? 2 : 6;
  shape_attention(at, w, flash, causal);
  at.deps = {last};
  last = attention(std::move(at), true);
  last = tp_gemm(make_gemm(tag + " qkv", layer, micro, Pass::backward, T, w.h, w.q + 2 * w.kv, full_, {last}),
                 TpComm::reduce_after, tag + " tp attn");
  if (job_.precision == plan::Precision::fp8_mixed) last = fp8_casts(tag, layer, micro, Pass::backward, true, last);
  Op ew = make_op(OpKind::elementwise, Stream::compute, Pass::backward, tag + " norms/rope/residual", layer, micro);
  ew.bytes = pointwise_bytes(w, true) * T;
  ew.kernels = pointwise_kernels(true);
  ew.deps = {last};
  last = add(std::move(ew));
  // LoRA adapters: A and B matmuls forward and backward, r wide (small but real on small jobs).
  if (!full_) {
    double adapter = 0;
    const double r = job_.lora.rank;
    for (const auto& t : job_.lora.targets) {
      const double in = (t == "o") ? w.q : (t == "down" ? w.f : w.h);
      const double out = (t == "q" || t == "o") ? (t == "q" ? w.q : w.h)
                         : (t == "k" || t == "v") ? w.kv
                         : (t == "down") ? w.h
                                         : w.f;
      adapter += 2.0 * T * r * (in + out) * ((t == "gate" || t == "up" || t == "down") ? k : 1.0);
    }
    Op lora = make_op(OpKind::gemm, Stream::compute, Pass::backward, tag + " lora adapters", layer, micro);
    lora.flops = 4.0 * adapter;  // forward (1x, issued here for simplicity) + input and weight gradients (3x)
    lora.model_flops = 0;
    lora.bytes = 4.0 * act_B_ * T * r * static_cast<double>(job_.lora.targets.size()) * 2;
    lora.kernels = 6 * static_cast<int>(job_.lora.targets.size());
    lora.m = static_cast<std::int64_t>(T);
    lora.k = static_cast<std::int64_t>(w.h);
    lora.n = job_.lora.rank;
    lora.deps = {last};
    last = add(std::move(lora));
  }
  return last;
}

int Builder::collective(Stream s, Collective c, Group g, int size, double bytes, const std::string& name, int layer,
                        int micro, Ids deps) {
  Op op = make_op(OpKind::collective, s, Pass::other, name, layer, micro);
  op.collective = c;
  op.group = g;
  op.group_size = size;
  op.bytes = bytes;
  op.deps = std::move(deps);
  return add(std::move(op));
}

int Builder::dispatch(bool moe, const std::string& name, int layer, int micro, int after) {
  const int ep = std::max(1, p_.parallel.ep);
  if (!moe || ep <= 1) return after;
  const double bytes = tokens_ * work_of(layer).experts_per_token * static_cast<double>(m_.hidden) * act_B_;
  return collective(Stream::comm, Collective::all_to_all, Group::ep, ep, bytes, name, layer, micro, {after});
}

int Builder::attention(Op op, bool backward) {
  if (cp_ <= 1) return add(std::move(op));
  // Each rank holds seq/cp queries and, in turn, every rank's K and V block: cp - 1 passes of
  // T (2 kv) values (and in backward their gradients too) overlap with the blocks' compute.
  const double block_bytes = tokens_ * 2.0 * work_of(op.layer).kv * act_B_ * (backward ? 2.0 : 1.0);
  const std::string pass_name = op.name + " kv";
  return blocked(std::move(op), cp_, block_bytes, Group::cp, pass_name);
}

int Builder::blocked(Op op, int blocks, double pass_bytes, Group g, const std::string& pass_name) {
  const std::string base = op.name;
  const Ids deps = op.deps;
  int last = -1, pass = -1;
  for (int b = 0; b < blocks; ++b) {
    Op block = op;
    block.name = name("{} block {}", base, b);
    block.flops /= blocks;
    block.model_flops /= blocks;
    block.recompute_flops /= blocks;
    block.bytes /= blocks;
    // Its share of the work: a GEMM block computes m / blocks rows (async TP), an attention
    // block attends to n / blocks keys (ring attention).
    if (op.kind == OpKind::gemm) block.m = std::max<std::int64_t>(1, op.m / blocks);
    if (op.kind == OpKind::attention) block.n = std::max<std::int64_t>(1, op.n / blocks);
    block.deps = b == 0 ? deps : Ids{last, pass};
    if (b > 0) block.reads.clear();
    if (b + 1 < blocks) {
      // The next block's data travel while this one computes.
      pass = collective(Stream::comm, Collective::send_recv, g, 2, pass_bytes, name("{} pass {}", pass_name, b + 1),
                        op.layer, op.micro, b == 0 ? deps : Ids{pass});
    }
    last = add(std::move(block));
  }
  return last;
}

int Builder::copy(Stream s, Tier src, Tier dst, double bytes, const std::string& name, int layer, int micro,
                  Ids deps, Ids reads, Ids writes) {
  Op op = make_op(OpKind::copy, s, Pass::other, name, layer, micro);
  op.src = src;
  op.dst = dst;
  op.bytes = bytes;
  op.deps = std::move(deps);
  op.reads = std::move(reads);
  op.writes = std::move(writes);
  return add(std::move(op));
}

StepIR Builder::build() {
  const int layers = inv_.layers;
  // Pipeline: this stage runs `chunks` model chunks (virtual stages chunk x pp + stage under
  // interleaved 1F1B, Narayanan et al. 2021 sec. 2.2.2), each an even share of the layers.
  // The layers come from the plan's stage (the inventory's); the schedule, the point-to-point
  // peers and tags from the stage's place in the pipeline simulated (PipelineView: the plan's own
  // unless the simulator runs a shortened pipeline).
  const int real_pp = std::max(1, p_.parallel.pp);
  const int pp = view_.stages > 0 ? view_.stages : real_pp;
  const int stage = view_.stages > 0 ? view_.position : inv_.stage;
  const int chunks = real_pp > 1 && p_.parallel.schedule == plan::PipelineSchedule::interleaved
                         ? std::max(1, p_.parallel.virtual_stages)
                         : 1;
  const int virtual_stages = pp * chunks;
  // The model layer of each of this stage's layers, chunk by chunk, and where each chunk starts
  // (chunks may differ by a layer: inventory::stage_layer_list).
  std::vector<int> chunk_begin;
  const std::vector<int> layer_of = inventory::stage_layer_list(m_, p_, inv_.stage, &chunk_begin);
  FTPLAN_ASSERT(static_cast<int>(layer_of.size()) == layers, "the inventory counts the stage's layers");
  // build_step bounds micro-batches x layers (too_large), so the count is an int.
  std::int64_t wanted = std::max<std::int64_t>(1, inv_.grad_accumulation);
  if (micro_override_ > 0) wanted = std::min<std::int64_t>(wanted, micro_override_);
  FTPLAN_ASSERT(wanted <= kMaxLayerPasses, "build_step checks the step's size first");
  const int micro_batches = static_cast<int>(wanted);
  ir_.micro_batches = micro_batches;
  // Room for every op up front (about 60 per layer and micro-batch with recompute, fetches and
  // collectives): growing the array would move each op several times.
  ir_.ops.reserve(static_cast<std::size_t>(micro_batches) * (inv_.layers + 2) * 64 + 256);
  ir_.tensors.reserve(static_cast<std::size_t>(micro_batches) * (inv_.layers + 2) * 8 + 64);
  ir_.stage = stage;
  const plan::Offload& off = p_.offload;
  const int shard = inv_.shard_degree;
  const auto micro_name = [&](const std::string& base, int mb) {
    return micro_batches > 1 ? name("{} m{}", base, mb) : base;
  };

  // ---- persistent state and buffers: alive from the start.
  Op begin;
  begin.name = "step start";
  const int start = add(std::move(begin));
  int weights_tensor = -1;
  Ids state_allocs;  // the optimizer state's allocations (the step reads that state)
  int weights_alloc = -1;  // the weights' allocation (parameter fetches read them)
  int optimizer_swap = -1;  // the pinned buffers the NVMe optimizer swap goes through
  const TensorGroup* saved_group = nullptr;      // saved activations on the GPU
  const TensorGroup* offloaded_group = nullptr;  // saved activations kept in host memory or on flash
  const TensorGroup* grads_group = nullptr;
  std::vector<const TensorGroup*> backward_groups, loss_groups, loss_peak_groups, optimizer_groups, fb_groups;
  for (const auto& g : inv_.groups) {
    switch (g.lifetime) {
      case Lifetime::persistent: {
        const int t = tensor(g.name, g.category, g.tier, g.total(), -1, g.element);
        const int a = alloc(Stream::compute, t, {start});
        if (g.category == Category::weights && weights_tensor < 0) {
          weights_tensor = t;
          weights_alloc = a;
        }
        if (g.category == Category::optimizer) state_allocs.push_back(a);
        if (std::string_view(g.name) == inventory::kOptimizerSwapBuffers) optimizer_swap = t;
        break;
      }
      case Lifetime::gradients: grads_group = &g; break;
      case Lifetime::saved:
        if (g.category != Category::activations) break;  // autocast copies: accounted in the footprint only
        if (g.tier == Tier::gpu) saved_group = &g;
        else offloaded_group = &g;
        break;
      case Lifetime::layer: break;  // gathered/streamed units and dequantized weights: per layer below
      case Lifetime::backward_layer: backward_groups.push_back(&g); break;
      case Lifetime::loss: loss_groups.push_back(&g); break;
      case Lifetime::loss_peak: loss_peak_groups.push_back(&g); break;
      case Lifetime::optimizer: optimizer_groups.push_back(&g); break;
      case Lifetime::forward_backward: fb_groups.push_back(&g); break;
    }
  }
  const TensorGroup* unit_group = gathered_group();
  const Tier param_tier = off.params;
  const bool stream_params = unit_group != nullptr;  // a per-layer GPU copy of the parameters is made
  const double unit_bytes = unit_group ? unit_group->bytes : 0;
  const int units_in_flight = unit_group ? std::max(1, unit_group->count) : 1;

  std::vector<int> fb_tensors;
  for (const auto* g : fb_groups) fb_tensors.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
  // Gradients: one share per layer, created by that layer's first backward, in their tier.
  std::vector<int> grad_tensor(layers, -1);
  if (grads_group)
    for (int l = 0; l < layers; ++l)
      grad_tensor[l] = tensor(name("gradients L{}", layer_of[l]), Category::gradients, grads_group->tier,
                              grads_group->total() / std::max(1, layers), layer_of[l], grads_group->element);

  const double grad_reduce_B = inv_.recipe.reduce_B;  // plan::precision_recipe says why
  const double layer_grad_bytes = inv_.params.trainable_largest_layer * grad_reduce_B;
  const bool reduce_each_micro = shard > 1 && inv_.zero >= 2;
  // Gradients are reduced over the data-parallel ranks with the context-parallel ones
  // (plan::sharding_in_effect): each of those computes part of the same parameters' gradients.
  const int grad_group = plan::gradient_group_size(p_);
  const bool any_dp = grad_group > 1;

  // The memory copies each sharding framework makes around its collectives, per unit (read from
  // their source; YaFSDP's preallocated buffers exist to avoid them: its README, "designed to
  // reduce communications and memory operations overhead").
  // - FSDP2 all-gathers into one flat buffer and then copies it out into each parameter's own
  //   tensor on the compute stream, once the gather is waited for (torch
  //   distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_all_gather_copy_out:
  //   split_with_sizes_copy); its reduce-scatter input is built by chunk_cat of the gradients,
  //   widened to the reduce dtype, also on the compute stream (foreach_reduce). No pre-divide:
  //   bf16/fp32 reduce with NCCL's AVG (_get_gradient_divide_factors).
  // - FSDP1 all-gathers straight into the unit's flat parameter, but autograd builds the flat
  //   gradient from the original parameters' views (the backward of the split that made them: a
  //   cat), and _reduce_grad pre-divides the whole unsharded gradient in place on the
  //   post-backward stream before the reduce-scatter (torch distributed/fsdp/_runtime_utils.py:
  //   _div_if_needed(padded_unsharded_grad, _gradient_predivide_factor), a factor > 1 for any
  //   world size >= 2).
  // - DeepSpeed ZeRO-3 gathers into a flat buffer the parameters view; its reduce-scatter
  //   interleaves the gradients into one flat buffer with torch.cat and pre-divides it by the
  //   world size (deepspeed/runtime/comm/coalesced_collectives.py reduce_scatter_coalesced), on
  //   its reduce-and-partition stream.
  // - YaFSDP gathers into and reduces from preallocated buffers the parameters and gradients
  //   view, without pre-divide for bf16/fp32 (ya_fsdp/_collectives.py).
  // Left out: the casts of the local shard (1/shard of a unit) and the post-reduce cast.
  const plan::Sharding sharding = inv_.profile.sharding;
  const bool sharded_units = stream_params && shard > 1;
  const double grad_params = inv_.params.trainable_largest_layer;
  const auto copy_out = [&](int layer, int mb, Pass pass, int gathered, int buffer) -> int {
    if (!sharded_units || sharding != plan::Sharding::fsdp2) return gathered;
    Op op = make_op(OpKind::elementwise, Stream::compute, pass,
                    micro_name(name("{} L{} all-gather copy-out", pass == Pass::forward ? "fwd" : "bwd", layer), mb),
                    layer, mb);
    op.bytes = 2.0 * unit_bytes;  // read the gathered buffer, write the parameters
    op.deps = {gathered};
    op.reads = {buffer};
    op.writes = {buffer};
    return add(std::move(op));
  };
  // Returns the op the reduce-scatter of a layer's gradients waits for; `cur` is the last compute
  // op of its backward, updated when the framework's copy runs on the compute stream.
  const auto reduce_copy_in = [&](int layer, int mb, int& cur) -> int {
    if (!sharded_units) return cur;
    const double a = inv_.recipe.gather_B;  // gradients come out of autograd in the gathered parameters' type
    Op op = make_op(OpKind::elementwise, Stream::compute, Pass::backward, "", layer, mb);
    op.deps = {cur};
    switch (sharding) {
      case plan::Sharding::fsdp2:
        op.name = micro_name(name("bwd L{} reduce-scatter copy-in", layer), mb);
        op.bytes = grad_params * (a + grad_reduce_B);
        cur = add(std::move(op));
        return cur;
      case plan::Sharding::fsdp1: {
        op.name = micro_name(name("bwd L{} flat gradient cat", layer), mb);
        op.bytes = 2.0 * grad_params * a;
        cur = add(std::move(op));
        Op div = make_op(OpKind::elementwise, Stream::comm_reduce, Pass::backward,
                         micro_name(name("bwd L{} gradient pre-divide", layer), mb), layer, mb);
        div.bytes = 2.0 * grad_params * grad_reduce_B;
        div.deps = {cur};
        return add(std::move(div));
      }
      case plan::Sharding::deepspeed:
        op.stream = Stream::comm_reduce;
        op.name = micro_name(name("bwd L{} gradient flatten and pre-divide", layer), mb);
        op.bytes = 4.0 * grad_params * a;  // cat: read + write; div_: read + write
        op.kernels = 2;
        return add(std::move(op));
      default: return cur;
    }
  };

  // Brings layer l's parameters to a GPU buffer: NVMe -> pinned host -> GPU, then the all-gather
  // of the other ranks' shards. Returns the op the layer's compute waits for. The buffer is
  // allocated when the fetch is issued; at most `units_in_flight` are outstanding
  // (`release_before` is the op that freed the buffer `units_in_flight` layers back).
  // DeepSpeed ZeRO-3 before its coalesced prefetch: a gather per parameter tensor, each after a
  // device synchronize (plan::Zero3Fetch::per_parameter).
  std::vector<int> fetch_buffers;  // the buffer of each fetch, in issue order
  const bool per_parameter = shard > 1 && inv_.profile.sharding == plan::Sharding::deepspeed &&
                             p_.job.zero3_fetch == plan::Zero3Fetch::per_parameter;
  const auto fetch = [&](int layer, int mb, bool backward, int release_before, int after, int& buffer) {
    const std::string what = name("L{}{}{}", layer, backward ? " bwd" : "", micro_batches > 1 ? name(" m{}", mb) : "");
    buffer = tensor("params " + what, Category::temporaries, Tier::gpu, unit_bytes, layer, unit_group->element);
    Ids deps;
    if (release_before >= 0) deps.push_back(release_before);
    // The buffers are one pool of `units_in_flight` for the whole step, as an engine's bounded
    // prefetch holds them: a fetch takes the buffer the fetch `units_in_flight` before it freed,
    // across passes and micro-batches too (`release_before` only bounds a pass from within; the
    // executor, exec/, ran the NVMe reads of the next pass ahead past the simulated peak).
    const std::size_t q = fetch_buffers.size();
    fetch_buffers.push_back(buffer);
    if (q >= static_cast<std::size_t>(units_in_flight)) {
      const int freed = freed_by(fetch_buffers[q - static_cast<std::size_t>(units_in_flight)]);
      if (freed >= 0 && std::find(deps.begin(), deps.end(), freed) == deps.end()) deps.push_back(freed);
    }
    // The fetch reads the weights, allocated on the compute stream: it runs on another stream, so
    // it must wait for that allocation (the executor, exec/, found fetches racing ahead of it).
    if (weights_alloc >= 0) deps.push_back(weights_alloc);
    const Stream first_stream = param_tier == Tier::gpu ? Stream::comm : (param_tier == Tier::nvme ? Stream::nvme_read : Stream::h2d);
    int last = alloc(first_stream, buffer, deps);
    const double shard_bytes = unit_bytes / std::max(1, shard);
    int source = weights_tensor;
    if (param_tier == Tier::nvme) {
      // ZeRO-Infinity / aiDAPTIV: read the layer's shard from flash into a pinned host buffer.
      const int staging = tensor("staging " + what, Category::buffers, Tier::cpu, shard_bytes, layer, unit_group->element);
      alloc(Stream::nvme_read, staging, {last});
      last = copy(Stream::nvme_read, Tier::nvme, Tier::cpu, shard_bytes, "nvme read params " + what, layer, mb, {last},
                  {weights_tensor}, {staging});
      const int h2d = copy(Stream::h2d, Tier::cpu, Tier::gpu, shard_bytes, "h2d params " + what, layer, mb, {last}, {staging},
                           {buffer});
      last = release(Stream::h2d, staging, {h2d});
      source = buffer;
    } else if (param_tier == Tier::cpu) {
      last = copy(Stream::h2d, Tier::cpu, Tier::gpu, shard_bytes, "h2d params " + what, layer, mb, {last}, {weights_tensor},
                  {buffer});
      source = buffer;
    }
    if (per_parameter) {
      // Each tensor: torch.cuda.synchronize() first (DeepSpeed issue #1069; PR #1188: "the async
      // version is not async at all, because each all_gather calls torch.cuda.synchronize()"), so
      // it waits for the compute issued before it; then torch.distributed.all_gather into a
      // list of world-size views, whose NCCL backend copies the flat result back into each view
      // (torch ProcessGroupNCCL::allgather): a host launch per rank. Fixed host cost per call:
      // what #1069 measured on one 8-GPU node (pre-launch 130 us + launch 250 us), less its 8
      // per-rank launches, which `kernels` counts for every group size.
      const std::vector<double> shares = parameter_tensor_shares(layer);
      for (std::size_t t = 0; t < shares.size(); ++t) {
        last = collective(Stream::comm, Collective::all_gather, Group::dp, shard, unit_bytes * shares[t],
                          name("all-gather {} p{}", what, t), layer, mb, {last, after});
        ir_.ops[last].host_s = kDeepSpeedPerParameterFetch_s;
        ir_.ops[last].kernels = shard;
        ir_.ops[last].reads = {source};
        ir_.ops[last].writes = {buffer};
      }
    } else if (shard > 1) {
      last = collective(Stream::comm, Collective::all_gather, Group::dp, shard, unit_bytes, "all-gather " + what, layer, mb,
                        {last});
      ir_.ops[last].reads = {source};
      ir_.ops[last].writes = {buffer};
    }
    return last;
  };

  int last_compute = start;
  int last_reduce = -1;
  int last_grad_offload = -1;

  // Pipeline point-to-point: the activation of a micro-batch goes to the next virtual stage
  // after its forward, its gradient to the previous one after its backward. Megatron's
  // scatter/gather optimization sends 1/tp of the tensor from each tensor-parallel rank
  // (Narayanan et al. 2021 sec. 4.1); with sequence parallelism each rank holds only 1/tp anyway.
  // The receiver waits on the compute stream for the matching send (same tag).
  const double p2p_bytes = tokens_ * static_cast<double>(m_.hidden) * act_B_ / tp_;
  const auto pipe_tag = [&](int mb, int to_vs, bool gradient) {
    return (static_cast<std::int64_t>(mb) * virtual_stages + to_vs) * 2 + (gradient ? 1 : 0);
  };
  const auto receive = [&](int mb, int from_vs, int vs, bool gradient) {
    Op op = make_op(OpKind::marker, Stream::compute, gradient ? Pass::backward : Pass::forward,
                    micro_name(name("recv {} from stage {}", gradient ? "gradient" : "activation", from_vs % pp), mb),
                    -1, mb);
    op.peer = from_vs % pp;
    op.tag = pipe_tag(mb, vs, gradient);
    op.deps = {last_compute};
    last_compute = add(std::move(op));
  };
  const auto send = [&](int mb, int to_vs, bool gradient) {
    const int s = collective(Stream::p2p, Collective::send_recv, Group::pp, 2, p2p_bytes,
                             micro_name(name("send {} to stage {}", gradient ? "gradient" : "activation", to_vs % pp), mb),
                             -1, mb, {last_compute});
    ir_.ops[s].peer = to_vs % pp;
    ir_.ops[s].tag = pipe_tag(mb, to_vs, gradient);
  };

  // Per micro-batch state kept from its forward to its backward.
  std::vector<std::vector<int>> saved_of(micro_batches, std::vector<int>(layers, -1));
  std::vector<std::vector<int>> host_saved_of = saved_of, stash_done_of = saved_of;
  std::vector<int> backwards(layers, 0);  // backward passes issued so far, per layer

  const auto forward = [&](int mb, int chunk) {
    std::vector<int>& saved = saved_of[mb];
    std::vector<int>& host_saved = host_saved_of[mb];
    std::vector<int>& stash_done = stash_done_of[mb];
    const int c0 = chunk_begin[chunk], c1 = chunk_begin[chunk + 1], vs = chunk * pp + stage;
    if (vs > 0) receive(mb, vs - 1, vs, false);
    std::vector<int> released(layers, -1);
    for (int l = c0; l < c1; ++l) {
      const int layer = layer_of[l];
      Ids deps = {last_compute};
      Ids reads;
      int buffer = -1;
      if (stream_params) {
        const int before = l - c0 >= units_in_flight ? released[l - units_in_flight] : -1;
        const int gathered = fetch(layer, mb, false, before, last_compute, buffer);
        deps.push_back(copy_out(layer, mb, Pass::forward, gathered, buffer));
        reads.push_back(buffer);
      } else if (weights_tensor >= 0) {
        reads.push_back(weights_tensor);
      }
      const TensorGroup* acts = saved_group;
      if (acts) {
        saved[l] = tensor(micro_name(name("saved activations L{}", layer), mb), Category::activations, Tier::gpu,
                          acts->bytes, layer);
        deps.push_back(alloc(Stream::compute, saved[l], {last_compute}));
      }
      last_compute = layer_forward(layer, mb, Pass::forward, deps, reads, saved[l]);
      if (buffer >= 0) last_compute = release(Stream::compute, buffer, {last_compute});
      released[l] = last_compute;
      // Activation offload (SSDTrain, DeepSpeed cpu_checkpointing): copy the saved tensors out
      // and free the GPU copy once it has left.
      if (offloaded_group && saved[l] >= 0) {
        const std::string what = micro_name(name("activations L{}", layer), mb);
        host_saved[l] = tensor(what + " (offloaded)", Category::activations, offloaded_group->tier, acts->bytes, layer);
        int a = alloc(Stream::d2h, host_saved[l], {last_compute});
        const Tier dst = offloaded_group->tier;
        if (dst == Tier::nvme) {
          const int staging = tensor("staging " + what, Category::buffers, Tier::cpu, acts->bytes, layer);
          alloc(Stream::d2h, staging, {a});
          a = copy(Stream::d2h, Tier::gpu, Tier::cpu, acts->bytes, "d2h " + what, layer, mb, {a}, {saved[l]}, {staging});
          a = copy(Stream::nvme_write, Tier::cpu, Tier::nvme, acts->bytes, "nvme write " + what, layer, mb, {a}, {staging},
                   {host_saved[l]});
          a = release(Stream::nvme_write, staging, {a});
        } else {
          a = copy(Stream::d2h, Tier::gpu, Tier::cpu, acts->bytes, "d2h " + what, layer, mb, {a}, {saved[l]}, {host_saved[l]});
        }
        stash_done[l] = release(Stream::d2h, saved[l], {a});
        saved[l] = -1;
      }
    }
    // ---- loss (last virtual stage)
    if (vs == virtual_stages - 1 && m_.has_lm_head()) {
      std::vector<int> loss_tensors, peak;
      for (const auto* g : loss_groups) {
        loss_tensors.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
        last_compute = alloc(Stream::compute, loss_tensors.back(), {last_compute});
      }
      for (const auto* g : loss_peak_groups) {
        peak.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
        last_compute = alloc(Stream::compute, peak.back(), {last_compute});
      }
      const double V = static_cast<double>(m_.vocab) / tp_;
      if (inv_.recipe.autocast_copies) {  // the LM head's weight cast (see layer_forward)
        Op cast = make_op(OpKind::elementwise, Stream::compute, Pass::forward, micro_name("autocast head weight cast", mb), -1, mb);
        cast.bytes = V * static_cast<double>(m_.hidden) * (4.0 + w_B_);
        cast.deps = {last_compute};
        last_compute = add(std::move(cast));
      }
      last_compute = gemm(micro_name("fwd head", mb), -1, mb, Pass::forward, tokens_, static_cast<double>(m_.hidden), V,
                          false, {last_compute});
      Op loss;
      loss.kind = OpKind::loss;
      loss.stream = Stream::compute;
      loss.pass = Pass::forward;
      loss.name = micro_name("loss", mb);
      loss.micro = mb;
      loss.bytes = tokens_ * V * (act_B_ + 4 + 4 + 4 + 4 + act_B_);  // upcast, log-softmax, its gradient
      loss.kernels = 6;
      loss.deps = {last_compute};
      last_compute = add(std::move(loss));
      for (int t : peak) last_compute = release(Stream::compute, t, {last_compute});
      last_compute = gemm(micro_name("bwd head", mb), -1, mb, Pass::backward, tokens_, static_cast<double>(m_.hidden), V,
                          full_, {last_compute});
      for (int t : loss_tensors) last_compute = release(Stream::compute, t, {last_compute});
    }
    if (vs < virtual_stages - 1) send(mb, vs + 1, false);
  };

  const auto backward = [&](int mb, int chunk) {
    std::vector<int>& saved = saved_of[mb];
    std::vector<int>& host_saved = host_saved_of[mb];
    std::vector<int>& stash_done = stash_done_of[mb];
    const int c0 = chunk_begin[chunk], c1 = chunk_begin[chunk + 1], vs = chunk * pp + stage;
    if (vs < virtual_stages - 1) receive(mb, vs + 1, vs, true);
    std::vector<int> released_bwd(layers, -1);
    std::vector<int> fetched(layers, -1), fetched_buffer(layers, -1);
    const auto fetch_backward = [&](int l) {
      const int back = l + units_in_flight;
      const int before = back < c1 ? released_bwd[back] : -1;
      fetched[l] = fetch(layer_of[l], mb, true, before, last_compute, fetched_buffer[l]);
    };
    for (int l = c1 - 1; l >= c0; --l) {
      const int layer = layer_of[l];
      const bool first_backward = backwards[l] == 0;
      const bool last_backward = ++backwards[l] == micro_batches;
      Ids deps = {last_compute};
      Ids reads;
      int buffer = -1;
      if (stream_params) {
        if (fetched[l] < 0) fetch_backward(l);
        buffer = fetched_buffer[l];
        deps.push_back(copy_out(layer, mb, Pass::backward, fetched[l], buffer));
        reads.push_back(buffer);
        // Backward prefetch (FSDP1 BACKWARD_PRE, FSDP2's and DeepSpeed's prefetch of the next
        // module): the next layer's gather is issued before this layer's gradients are reduced,
        // so on the process group's one stream it is not queued behind that reduce-scatter. It
        // takes the buffer of the layer `units_in_flight` above, already released.
        if (l > c0 && units_in_flight >= 2 && !per_parameter) fetch_backward(l - 1);
      } else if (weights_tensor >= 0) {
        reads.push_back(weights_tensor);
      }
      // Offloaded activations come back before their layer's backward.
      if (host_saved[l] >= 0) {
        const std::string what = micro_name(name("activations L{}", layer), mb);
        saved[l] = tensor(what + " (back)", Category::activations, Tier::gpu, offloaded_group->bytes, layer);
        int a = alloc(Stream::h2d, saved[l], {stash_done[l]});
        if (offloaded_group->tier == Tier::nvme) {
          const int staging = tensor("staging back " + what, Category::buffers, Tier::cpu, offloaded_group->bytes, layer);
          alloc(Stream::nvme_read, staging, {a});
          a = copy(Stream::nvme_read, Tier::nvme, Tier::cpu, offloaded_group->bytes, "nvme read " + what, layer, mb, {a},
                   {host_saved[l]}, {staging});
          a = copy(Stream::h2d, Tier::cpu, Tier::gpu, offloaded_group->bytes, "h2d " + what, layer, mb, {a}, {staging},
                   {saved[l]});
          a = release(Stream::h2d, staging, {a});
        } else {
          a = copy(Stream::h2d, Tier::cpu, Tier::gpu, offloaded_group->bytes, "h2d " + what, layer, mb, {a}, {host_saved[l]},
                   {saved[l]});
        }
        a = release(Stream::h2d, host_saved[l], {a});
        deps.push_back(a);
      }
      if (saved[l] >= 0) reads.push_back(saved[l]);
      std::vector<int> bwd_tensors;
      for (const auto* g : backward_groups) {
        bwd_tensors.push_back(tensor(name("{} L{}", g->name, layer), g->category, g->tier, g->total(), layer, g->element));
        deps.push_back(alloc(Stream::compute, bwd_tensors.back(), {last_compute}));
      }
      const bool grads_on_gpu = grads_group && grads_group->tier == Tier::gpu;
      if (first_backward && grads_on_gpu && grad_tensor[l] >= 0) deps.push_back(alloc(Stream::compute, grad_tensor[l], {last_compute}));
      int cur;
      if (job_.checkpointed(l)) {
        cur = layer_forward(layer, mb, Pass::recompute, deps, reads, -1);
      } else if (job_.checkpointing == Checkpointing::selective &&
                 inv_.profile.selective == plan::FrameworkProfile::Selective::every_other_mm) {
        // torchtitan op-SAC (torchtitan/models/llama3/parallelize: _get_custom_policy) saves only
        // the outputs of ops in its save list (matmuls, SDPA, reduce-scatter, max), and of the
        // matmuls every other one, so backward recomputes the unsaved matmuls (wk, wo, w3) and
        // every other forward op: the norms, RoPE, residual adds and the activation.
        const LayerWork w = work_of(layer);
        Op ew = make_op(OpKind::elementwise, Stream::compute, Pass::recompute, name("re L{} pointwise", layer), layer, mb);
        ew.bytes = pointwise_bytes(w, false) * tokens_ + activation_bytes(w, false) * tokens_ * w.experts_per_token;
        ew.kernels = pointwise_kernels(false) + (w.gated ? 2 : 1);
        ew.deps = deps;
        ew.reads = reads;
        cur = add(std::move(ew));
        cur = gemm(name("re L{} unsaved mm", layer), layer, mb, Pass::recompute, tokens_, w.h,
                   w.kv + w.h + w.f * w.experts_per_token, false, {cur});
      } else {
        Op join;
        join.kind = OpKind::marker;
        join.stream = Stream::compute;
        join.name = name("bwd L{} ready", layer);
        join.deps = deps;
        cur = add(std::move(join));
      }
      cur = layer_backward(layer, mb, {cur}, reads);
      if (grads_on_gpu && grad_tensor[l] >= 0) ir_.ops[cur].writes.push_back(grad_tensor[l]);
      if (saved[l] >= 0) cur = release(Stream::compute, saved[l], {cur});
      for (int t : bwd_tensors) cur = release(Stream::compute, t, {cur});
      if (buffer >= 0) cur = release(Stream::compute, buffer, {cur});
      released_bwd[l] = cur;
      last_compute = cur;
      // Gradient reduction of this layer: every micro-batch when gradients are sharded
      // (FSDP/ZeRO-2/3 reduce-scatter), else once after the last micro-batch (DDP no_sync,
      // ZeRO-1, Megatron) as an all-reduce (DDP buckets) or reduce-scatter (distributed optimizer).
      int produced = cur;
      if (any_dp && (reduce_each_micro || last_backward)) {
        const bool scatter = inv_.zero >= 1 || stream_params;
        // FSDP, ZeRO-3 and YaFSDP gather parameters and reduce-scatter gradients through one
        // process group: NCCL runs a communicator's collectives one after another in issue order
        // (PyTorch FSDP2 added a separate reduce-scatter process group to lift exactly this), so
        // the reduce-scatter queues behind the gathers on the gather stream.
        const Stream reduce_stream = stream_params && shard > 1 ? Stream::comm : Stream::comm_reduce;
        const int ready = reduce_copy_in(layer, mb, cur);
        last_compute = cur;
        last_reduce = collective(reduce_stream, scatter ? Collective::reduce_scatter : Collective::all_reduce, Group::dp,
                                 shard > 1 ? shard : grad_group, layer_grad_bytes,
                                 micro_name(name("{} L{}", scatter ? "reduce-scatter" : "all-reduce", layer), mb), layer,
                                 mb, {ready});
        ir_.ops[last_reduce].element = inv_.element_of(grad_reduce_B);
        // Hybrid sharding (FSDP HYBRID_SHARD, FSDP2 over a 2-D mesh): each shard group sits in a
        // node and its replicas across nodes all-reduce the reduced shard, the second collective
        // (torch distributed/fsdp/_runtime_utils.py _reduce_grad: reduce_scatter, then
        // all_reduce over _inter_node_pg; FSDP2 _fsdp_collectives.py foreach_reduce:
        // all_reduce over the replicate group).
        if (shard > 1 && shard < grad_group) {
          last_reduce = collective(reduce_stream, Collective::all_reduce, Group::replicate, grad_group / shard,
                                   layer_grad_bytes / shard, micro_name(name("replica all-reduce L{}", layer), mb), layer,
                                   mb, {last_reduce});
          ir_.ops[last_reduce].element = inv_.element_of(grad_reduce_B);
        }
        produced = last_reduce;
      }
      // ZeRO-Offload / Infinity: the reduced gradient partition goes to host memory as fp32
      // (Ren et al. 2021, sec. 4.1), and on to flash when gradients live there.
      if (grads_group && !grads_on_gpu && last_backward) {
        const double bytes = inv_.params.trainable_largest_layer / std::max(1, shard) * inv_.recipe.compute_B;
        int t = alloc(Stream::d2h, grad_tensor[l], {produced});
        if (grads_group->tier == Tier::nvme) {
          const int staging = tensor(name("staging gradients L{}", layer), Category::buffers, Tier::cpu, bytes * 2, layer,
                                     Element::fp32);
          alloc(Stream::d2h, staging, {t});
          t = copy(Stream::d2h, Tier::gpu, Tier::cpu, bytes, name("d2h gradients L{}", layer), layer, mb, {t}, {},
                   {staging});
          t = copy(Stream::nvme_write, Tier::cpu, Tier::nvme, bytes * 2, name("nvme write gradients L{}", layer), layer,
                   mb, {t}, {staging}, {grad_tensor[l]});
          t = release(Stream::nvme_write, staging, {t});
        } else {
          t = copy(Stream::d2h, Tier::gpu, Tier::cpu, bytes, name("d2h gradients L{}", layer), layer, mb, {t}, {},
                   {grad_tensor[l]});
        }
        last_grad_offload = t;
      }
    }
    if (vs > 0) send(mb, vs - 1, true);
  };

  for (int t : fb_tensors) last_compute = alloc(Stream::compute, t, {last_compute});
  for (const PipeAction& a : pipeline_order(p_.parallel.schedule, pp, stage, micro_batches, chunks)) {
    if (a.backward) backward(a.micro, a.chunk);
    else forward(a.micro, a.chunk);
  }
  for (int t : fb_tensors) last_compute = release(Stream::compute, t, {last_compute});

  // ---- optimizer step over this rank's shard
  Ids opt_deps = {last_compute};
  if (last_reduce >= 0) opt_deps.push_back(last_reduce);
  if (last_grad_offload >= 0) opt_deps.push_back(last_grad_offload);
  // ZeRO-Offload's one-step delayed parameter update (Ren et al. 2021, sec. 5.2): the CPU step
  // applies the previous step's gradients while the GPU runs this step's forward and backward,
  // so it waits for nothing of this step but its state's existence (the executor, exec/, found
  // it starting before the allocation of the state it updates). In steady state each step is the
  // longer of the two paths.
  if (off.delayed_update && off.optimizer_step == Tier::cpu) {
    opt_deps = {start};
    for (int a : state_allocs) opt_deps.push_back(a);
  }
  std::vector<int> opt_tensors;
  for (const auto* g : optimizer_groups) {
    opt_tensors.push_back(tensor(g->name, g->category, g->tier, g->total(), -1, g->element));
    opt_deps.push_back(alloc(Stream::compute, opt_tensors.back(), {last_compute}));
  }
  const double trainable_shard = inv_.zero >= 1 ? inv_.params.trainable / shard : inv_.params.trainable;
  const bool cpu_step = off.optimizer_step == Tier::cpu;
  const auto optimizer_op = [&](double params, const std::string& name, Ids deps) {
    Op opt;
    opt.kind = OpKind::optimizer;
    opt.pass = Pass::optimizer;
    opt.name = name;
    // AdamW touches ~28 bytes per fp32-mastered parameter: reads master, gradient, m, v (16),
    // writes master, m, v (12); ~12 FLOPs per parameter.
    opt.bytes = params * 28.0;
    opt.flops = params * 12.0;
    opt.kernels = cpu_step ? 0 : 12;
    opt.stream = cpu_step ? Stream::cpu : Stream::compute;
    opt.deps = std::move(deps);
    return add(std::move(opt));
  };
  int last;
  if (off.optimizer == Tier::nvme) {
    // ZeRO-Infinity swaps optimizer state through pinned memory one sub-group at a time
    // (sub_group_size, default 1e9 elements): read master, m, v; CPU Adam; write them back and
    // the updated 16-bit parameters. Reads of the next chunk overlap the update of this one.
    const double chunk_params = off.chunk_bytes > 0 ? off.chunk_bytes / 16.0 : std::min(trainable_shard, 1e9);
    const int chunks = static_cast<int>(std::ceil(trainable_shard / std::max(1.0, chunk_params)));
    last = -1;
    int state = -1;
    for (const auto& t : ir_.tensors)
      if (t.category == Category::optimizer && t.tier == Tier::nvme) {
        state = static_cast<int>(&t - &ir_.tensors[0]);
        break;
      }
    int prev_update = -1;
    for (int c = 0; c < chunks; ++c) {
      const double params = std::min(chunk_params, trainable_shard - c * chunk_params);
      Ids deps = opt_deps;
      // Through the pinned swap buffers (the inventory's): read into them, updated there, written
      // back from them. (They were unnamed; the executor, exec/, needs to know where the chunk is.)
      const Ids swap = optimizer_swap >= 0 ? Ids{optimizer_swap} : Ids{};
      const int rd = copy(Stream::nvme_read, Tier::nvme, Tier::cpu, params * 12.0, name("nvme read optimizer chunk {}", c),
                          -1, 0, deps, state >= 0 ? Ids{state} : Ids{}, swap);
      Ids udeps = {rd};
      if (prev_update >= 0) udeps.push_back(prev_update);
      const int up = optimizer_op(params, name("optimizer step chunk {}", c), udeps);
      ir_.ops[up].reads = swap;
      ir_.ops[up].writes = swap;
      prev_update = up;
      last = copy(Stream::nvme_write, Tier::cpu, Tier::nvme, params * (12.0 + inv_.recipe.compute_B),
                  name("nvme write optimizer chunk {}", c), -1, 0, {up}, swap, state >= 0 ? Ids{state} : Ids{});
    }
  } else {
    last = optimizer_op(trainable_shard, "optimizer step", opt_deps);
  }
  for (int t : opt_tensors) last = release(Stream::compute, t, {last});
  // ZeRO-Offload: the updated 16-bit parameters return to the GPU.
  if (cpu_step && param_tier == Tier::gpu)
    last = copy(Stream::h2d, Tier::cpu, Tier::gpu, trainable_shard * inv_.recipe.compute_B, "h2d updated parameters", -1, 0,
                {last}, {}, {weights_tensor});
  // ZeRO-1/2 and Megatron's distributed optimizer all-gather the updated 16-bit parameters.
  if (any_dp && !stream_params && inv_.zero >= 1 && shard > 1)
    last = collective(Stream::comm, Collective::all_gather, Group::dp, shard, inv_.params.total * inv_.recipe.compute_B,
                      "all-gather updated parameters", -1, 0, {last});
  // Gradients are freed after the step (zero_grad(set_to_none=True)), and after their copy to the
  // host has finished (which the optimizer step waits for anyway, but the delayed one does not:
  // the executor, exec/, found the free racing the copy).
  for (int l = 0; l < layers; ++l)
    if (grad_tensor[l] >= 0)
      last = release(Stream::compute, grad_tensor[l], last_grad_offload >= 0 ? Ids{last, last_grad_offload} : Ids{last});
  Op end;
  end.kind = OpKind::marker;
  end.name = "step end";
  end.deps = {last};
  add(std::move(end));

  // Totals.
  double tokens = tokens_ * micro_batches;
  if (job_.samples.packing == plan::Packing::padded && job_.samples.mean_tokens > 0)
    tokens *= job_.samples.mean_tokens / static_cast<double>(job_.seq_len);  // padding computes, not learns
  ir_.tokens_per_rank = tokens;
  for (auto& op : ir_.ops) {
    if (op.element == Element::packed) op.element = element_of(op);
    ir_.model_flops_per_rank += op.model_flops;
    ir_.hardware_flops_per_rank += op.model_flops + op.recompute_flops;
    if (op.kind == OpKind::gemm && op.pass == Pass::backward && !op.weight_grad) ir_.frozen_weight_grad_flops_per_rank += op.flops;
  }
  return std::move(ir_);
}

}  // namespace

std::vector<PipeAction> pipeline_order(plan::PipelineSchedule schedule, int pp, int stage, int micro_batches, int chunks) {
  std::vector<PipeAction> order;
  const int m = std::max(1, micro_batches);
  pp = std::max(1, pp);
  if (pp == 1 || schedule == plan::PipelineSchedule::gpipe) {
    // Without a pipeline each micro-batch's backward follows its forward (gradient accumulation).
    for (int mb = 0; mb < m; ++mb) {
      order.push_back({false, mb, 0});
      if (pp == 1) order.push_back({true, mb, 0});
    }
    if (pp > 1)
      for (int mb = 0; mb < m; ++mb) order.push_back({true, mb, 0});
    return order;
  }
  if (schedule == plan::PipelineSchedule::one_f_one_b || chunks <= 1) {
    const int warmup = std::min(pp - stage - 1, m);
    for (int mb = 0; mb < warmup; ++mb) order.push_back({false, mb, 0});
    for (int i = 0; i < m - warmup; ++i) {
      order.push_back({false, warmup + i, 0});
      order.push_back({true, i, 0});
    }
    for (int i = m - warmup; i < m; ++i) order.push_back({true, i, 0});
    return order;
  }
  // Interleaved: the k-th forward runs chunk (k mod pp*v) / pp of micro-batch
  // (k / (pp*v)) * pp + k mod pp; backwards walk the chunks in reverse. Micro-batches beyond a
  // multiple of pp (Megatron requires a multiple) form a last, partial group.
  const int v = chunks, total = m * v;
  const auto forward_of = [&](int k, bool backward) {
    const int group = k / (pp * v), in_group = k % (pp * v);
    int chunk = in_group / pp;
    if (backward) chunk = v - 1 - chunk;
    return PipeAction{backward, group * pp + in_group % pp, chunk};
  };
  std::vector<PipeAction> fwd, bwd;
  // Enumerate (micro, chunk) pairs in Megatron's order, skipping micro-batches past m.
  for (int k = 0; static_cast<int>(fwd.size()) < total; ++k) {
    const PipeAction a = forward_of(k, false);
    if (a.micro < m) fwd.push_back(a);
  }
  for (int k = 0; static_cast<int>(bwd.size()) < total; ++k) {
    const PipeAction a = forward_of(k, true);
    if (a.micro < m) bwd.push_back(a);
  }
  const int warmup = std::min(total, (pp - stage - 1) * 2 + (v - 1) * pp);
  for (int k = 0; k < warmup; ++k) order.push_back(fwd[k]);
  for (int i = 0; i < total - warmup; ++i) {
    order.push_back(fwd[warmup + i]);
    order.push_back(bwd[i]);
  }
  for (int i = total - warmup; i < total; ++i) order.push_back(bwd[i]);
  return order;
}

std::int64_t layer_passes(const model::ModelSpec& model, const plan::Plan& plan, std::int64_t micro_batches) {
  std::int64_t m = std::max<std::int64_t>(1, plan::grad_accumulation_steps(plan));
  if (micro_batches > 0) m = std::min(m, micro_batches);
  // Every stage builds m micro-batches of its layers: the stages together hold every layer once.
  return m * std::max(1, model.total_layers());
}

std::string too_large(const model::ModelSpec& model, const plan::Plan& plan, std::int64_t micro_batches) {
  const std::int64_t passes = layer_passes(model, plan, micro_batches);
  if (passes <= kMaxLayerPasses) return {};
  return fmt::format("not simulated: the step is {} micro-batches x {} layers = {} layer passes, more than ftplan's "
                     "limit of {} for one step (every op of the step is held in memory); the steady-state shortcut "
                     "simulates it (the default; not with simulate --trace, a sweep's steady_state: false or a "
                     "GPipe schedule), or raise job.micro_batch or lower job.global_batch",
                     passes / std::max(1, model.total_layers()), std::max(1, model.total_layers()), passes,
                     kMaxLayerPasses);
}

StepIR build_step(const model::ModelSpec& model, const plan::Plan& plan, const inventory::Inventory& inventory,
                  int micro_batches, bool names, PipelineView view) {
  if (std::string why = too_large(model, plan, micro_batches); !why.empty()) throw std::length_error(why);
  FTPLAN_ASSERT(view.stages <= 0 || (view.position >= 0 && view.position < view.stages), "a view's stage lies in it");
  return Builder(model, plan, inventory, micro_batches, names, view).build();
}

std::vector<std::string> dry_run(const StepIR& ir) {
  std::vector<std::string> problems;
  std::vector<int> state(ir.tensors.size(), 0);  // 0 never allocated, 1 live, 2 freed
  // Every tensor can be allocated as described: its shape's elements of its type are its bytes.
  for (std::size_t t = 0; t < ir.tensors.size(); ++t) {
    const Tensor& x = ir.tensors[t];
    double elements = x.shape.empty() ? 0.0 : 1.0;
    for (const std::int64_t d : x.shape) elements *= static_cast<double>(d);
    if (std::abs(elements * inventory::element_bytes(x.element) - x.bytes) > inventory::element_bytes(x.element))
      problems.push_back(fmt::format("tensor {} '{}': {} elements of {} are not its {} bytes", t, x.name, elements,
                                     inventory::to_string(x.element), x.bytes));
  }
  for (std::size_t i = 0; i < ir.ops.size(); ++i) {
    const Op& op = ir.ops[i];
    if (op.kind == OpKind::gemm && (op.m <= 0 || op.n <= 0 || op.k <= 0))
      problems.push_back(fmt::format("op {} '{}' is a GEMM without its shape", i, op.name));
    for (int d : op.deps)
      if (d < 0 || static_cast<std::size_t>(d) >= i)
        problems.push_back(fmt::format("op {} '{}' depends on op {} which does not come before it", i, op.name, d));
    // The tier each op can read from and write to: GPU kernels and collectives touch GPU memory;
    // a copy reads its source tier and writes its destination; the CPU optimizer works in host memory.
    const auto tier_ok = [&](int t, bool write) {
      const Tier tier = ir.tensors[t].tier;
      switch (op.kind) {
        case OpKind::copy: return tier == (write ? op.dst : op.src);
        case OpKind::optimizer: return op.stream == Stream::cpu ? tier == Tier::cpu : tier == Tier::gpu;
        case OpKind::alloc:
        case OpKind::free:
        case OpKind::marker: return true;
        default: return tier == Tier::gpu;
      }
    };
    for (const auto* list : {&op.reads, &op.writes}) {
      const bool write = list == &op.writes;
      for (int t : *list) {
        if (t < 0 || static_cast<std::size_t>(t) >= ir.tensors.size()) {
          problems.push_back(fmt::format("op {} '{}' uses tensor {} which does not exist", i, op.name, t));
          continue;
        }
        if (!tier_ok(t, write))
          problems.push_back(fmt::format("op {} '{}' {} '{}' in {}, which it cannot reach", i, op.name,
                                         write ? "writes" : "reads", ir.tensors[t].name, plan::to_string(ir.tensors[t].tier)));
        if (state[t] != 1 && !(write && op.kind == OpKind::alloc))
          problems.push_back(fmt::format("op {} '{}' {} '{}' in {} but it is {}", i, op.name, write ? "writes" : "reads",
                                         ir.tensors[t].name, plan::to_string(ir.tensors[t].tier),
                                         state[t] == 0 ? "not yet allocated" : "freed"));
      }
    }
    if (op.kind == OpKind::alloc) {
      if (state[op.tensor] == 1) problems.push_back(fmt::format("op {} allocates '{}' twice", i, ir.tensors[op.tensor].name));
      state[op.tensor] = 1;
    } else if (op.kind == OpKind::free) {
      if (state[op.tensor] != 1)
        problems.push_back(fmt::format("op {} frees '{}' which is not live", i, ir.tensors[op.tensor].name));
      state[op.tensor] = 2;
    }
  }
  return problems;
}

double nvme_written_bytes(const StepIR& ir) {
  double written = 0;
  for (const auto& op : ir.ops)
    if (op.kind == OpKind::copy && op.dst == plan::Tier::nvme) written += op.bytes;
  return written;
}

}  // namespace ftplan::schedule
