#include "schedule/builder.hpp"

namespace ftplan::schedule::detail {

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
                        : autocast                          ? 2 * a + 8.0
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
  const int fwd =
      std::max(1, m_.norms_per_layer) * norm + (rope ? 10 : 0) + 1 + 2 + (job_.dropout_for(m_.dropout) > 0 ? 2 : 0);
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
  const bool cached = inv_.profile.caches_fp8_weights && micro > 0;
  return kBytesPerElement * (inputs * tokens_ + (cached ? 0.0 : matmul_weights(layer)));
}

double Builder::matmul_weights(int layer) const { return matmul_weights(layer, work_of(layer)); }

double Builder::matmul_weights(int layer, const LayerWork& w) const {
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  const double experts = moe ? static_cast<double>(std::max(1, m_.moe.experts)) / std::max(1, p_.parallel.ep) : 1.0;
  return w.h * (w.q + 2 * w.kv) + w.q * w.h + experts * ((w.gated ? 2 : 1) * w.h * w.f + w.f * w.h);
}

int Builder::mlp_in_modules(const LayerWork& w) const { return w.gated && !fused_gate_up() ? 2 : 1; }

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
  static_cast<model::LayerShape&>(w) = model::layer_shape(m_, layer);
  w.q /= tp_;  // Megatron tensor parallelism splits heads and the FFN over tp ranks (Shoeybi et al. 2019)
  w.kv /= tp_;
  w.f /= tp_;
  w.attended = static_cast<double>(model::attended_tokens(m_, layer, job_.seq_len));
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
    op.deps = {
        collective(Stream::comm, Collective::all_gather, Group::tp, tp_, bytes, name, op.layer, op.micro, op.deps)};
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

int Builder::build_layer_forward(int layer, int micro, Pass pass, Ids deps, Ids reads, int saved) {
  const LayerWork w = work_of(layer);
  const double T = tokens_;
  const std::string tag = name("{} L{}{}", pass == Pass::recompute ? "re" : "fwd", layer,
                               inv_.grad_accumulation > 1 ? name(" m{}", micro) : "");
  // Norms, RoPE, residual adds, dropout: memory-bound kernels (pointwise_bytes).
  Op ew = make_op(OpKind::elementwise, Stream::compute, pass, label(tag, " norms/rope/residual"), layer, micro);
  ew.bytes = pointwise_bytes(w, false) * T;
  ew.kernels = pointwise_kernels(false);
  ew.deps = std::move(deps);
  ew.reads = reads;
  int last = add(hooked(std::move(ew), kGlueModules));
  if (job_.precision == plan::Precision::fp8_mixed) last = fp8_casts(tag, layer, micro, pass, false, last);
  if (quantized_base()) last = dequantize(tag, layer, micro, pass, {last});
  if (inventory::autocast_casts_weights(inv_.recipe, job_)) {
    // torch.autocast casts each fp32 weight to 16 bits on every forward (the cast cache lives for
    // one autocast region; a checkpointed recompute casts again): one kernel per linear that
    // reads 4 bytes and writes 2 per parameter (torch/csrc/autograd autocast, cached_cast).
    Op cast = make_op(OpKind::elementwise, Stream::compute, pass, label(tag, " autocast weight casts"), layer, micro);
    cast.bytes = matmul_weights(layer) * (4.0 + w_B_);
    cast.kernels = linear_count();
    cast.deps = {last};
    last = add(std::move(cast));
  }
  last = tp_gemm(hooked(make_gemm(label(tag, " qkv"), layer, micro, pass, T, w.h, w.q + 2 * w.kv, false, {last}),
                        fused_qkv() ? 1 : 3),
                 TpComm::all_gather_before, label(tag, " tp attn in"));
  // Attention: QK^T and AV, 2 x 2 T q per attended token; a causal flash kernel skips the masked
  // half (FlashAttention-2, Dao 2023); eager computes the full square. Model FLOPs count the full
  // square, as PaLM's 12 L H Q T does.
  Op at = make_op(OpKind::attention, Stream::compute, pass, label(tag, " attention"), layer, micro);
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
  last = tp_gemm(hooked(make_gemm(label(tag, " attn_out"), layer, micro, pass, T, w.q, w.h, false, {last}), 1),
                 TpComm::reduce_after, label(tag, " tp attn"));
  const double k = w.experts_per_token;
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  const double routed = T * k * (moe ? load_ : 1.0);
  if (moe && p_.parallel.ep > 1) {
    if (tp_ > 1 && p_.parallel.sequence_parallel)
      last = collective(Stream::comm, Collective::all_gather, Group::tp, tp_, T * w.h * act_B_,
                        label(tag, " tp mlp in"), layer, micro, {last});
    last = dispatch(moe, label(tag, " dispatch"), layer, micro, last);
    last = gemm(label(tag, " mlp_in"), layer, micro, pass, routed, w.h, (w.gated ? 2 : 1) * w.f, false, {last});
  } else {
    last = tp_gemm(hooked(make_gemm(label(tag, " mlp_in"), layer, micro, pass, routed, w.h, (w.gated ? 2 : 1) * w.f,
                                    false, {last}),
                          mlp_in_modules(w)),
                   TpComm::all_gather_before, label(tag, " tp mlp in"));
  }
  Op act = make_op(OpKind::elementwise, Stream::compute, pass, label(tag, " activation"), layer, micro);
  // Activation (and gate product): read the MLP input(s), write the output.
  act.bytes = activation_bytes(w, false) * routed;
  act.kernels = w.gated ? 2 : 1;
  act.deps = {last};
  last = add(hooked(std::move(act), 1));
  if (moe && p_.parallel.ep > 1) {
    last = gemm(label(tag, " mlp_out"), layer, micro, pass, routed, w.f, w.h, false, {last});
    last = dispatch(moe, label(tag, " combine"), layer, micro, last);
    if (tp_ > 1)
      last =
          collective(Stream::comm, p_.parallel.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                     Group::tp, tp_, T * w.h * act_B_, label(tag, " tp mlp"), layer, micro, {last});
  } else {
    last = tp_gemm(hooked(make_gemm(label(tag, " mlp_out"), layer, micro, pass, routed, w.f, w.h, false, {last}), 1),
                   TpComm::reduce_after, label(tag, " tp mlp"));
  }
  if (!full_) last = lora_adapters(tag, layer, micro, pass, w, last);
  if (saved >= 0) ir_.ops[last].writes.push_back(saved);
  return last;
}

int Builder::lora_adapters(const std::string& tag, int layer, int micro, Pass pass, const LayerWork& w, int after) {
  // One layer's LoRA adapters as PEFT runs them, per targeted linear (peft/tuners/lora/layer.py,
  // Linear.forward): result = base_layer(x); result = result + lora_B(lora_A(dropout(x))) * scaling.
  // Forward (and again in a checkpointed recompute), per token and activation byte a, the linear
  // in -> out wide, rank r: dropout reads x and writes it with its mask ((2a + 1) in, when
  // lora.dropout > 0), lora_A reads it and writes r, lora_B reads r and writes out, the scaling
  // multiply reads and writes out, the add reads two outs and writes one: a in + 2a r + 6a out,
  // 4 kernels (5 with dropout). Backward: the scaling's gradient (2a out), lora_B's input and
  // weight gradients (2a out + 2a r), lora_A's (2a in + 2a r), the dropout mask (2a in + in) and
  // the add into x's gradient beside the base layer's (3a in): 4a out + 4a r + 5a in, 7 kernels
  // (8 with dropout). FLOPs: 2 T r (in + out) forward, 3x that backward.
  const double T = tokens_, a = act_B_, r = job_.lora.rank;
  const bool dropout = job_.lora.dropout > 0;
  const bool backward = pass == Pass::backward;
  double flops = 0, bytes = 0;
  int kernels = 0;
  for (const auto& t : job_.lora.targets) {
    const auto l = model::linear_from_string(t);
    if (!l) continue;  // the scenario reader refuses other names
    const model::LinearDims d = model::linear_dims(w, *l);
    const double tokens = T * (model::is_mlp(*l) ? w.experts_per_token : 1.0);
    flops += (backward ? 3.0 : 1.0) * 2.0 * tokens * r * (d.in + d.out);
    const double drop = dropout ? (2.0 * a + 1.0) * d.in : 0.0;  // the mask read or written either way
    bytes += tokens * (drop + (backward ? 4.0 * a * d.out + 4.0 * a * r + 5.0 * a * d.in
                                        : a * d.in + 2.0 * a * r + 6.0 * a * d.out));
    kernels += (backward ? 7 : 4) + (dropout ? 1 : 0);
  }
  Op lora = make_op(OpKind::gemm, Stream::compute, pass, label(tag, " lora adapters"), layer, micro);
  lora.flops = flops;
  lora.model_flops = 0;
  lora.bytes = bytes;
  lora.kernels = kernels;
  lora.m = static_cast<std::int64_t>(T);
  lora.k = static_cast<std::int64_t>(w.h);
  lora.n = job_.lora.rank;
  lora.deps = {after};
  // Per targeted linear, besides the base linear's own call: PEFT's lora.Linear, its dropout
  // (nn.Identity when 0), lora_A and lora_B.
  return add(hooked(std::move(lora), 4 * static_cast<int>(job_.lora.targets.size())));
}

int Builder::build_layer_backward(int layer, int micro, Ids deps, Ids reads) {
  const LayerWork w = work_of(layer);
  const double T = tokens_;
  const std::string tag = name("bwd L{}{}", layer, inv_.grad_accumulation > 1 ? name(" m{}", micro) : "");
  const double k = w.experts_per_token;
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  const double routed = T * k * (moe ? load_ : 1.0);
  if (moe && p_.parallel.ep > 1) {
    // The gradient of the combine goes back to the expert ranks first.
    Op join = make_op(OpKind::marker, Stream::compute, Pass::backward, label(tag, " start"), layer, micro);
    join.deps = std::move(deps);
    deps = {dispatch(moe, label(tag, " combine"), layer, micro, add(std::move(join)))};
  }
  if (dequantizes_in_backward()) deps = {dequantize(tag, layer, micro, Pass::backward, std::move(deps))};
  // Backward runs the conjugates: a reduce-scatter's gradient is an all-gather and vice versa;
  // an all-reduce's is an all-reduce on the other side of the block.
  Op mlp_out = hooked(
      make_gemm(label(tag, " mlp_out"), layer, micro, Pass::backward, routed, w.f, w.h, full_, std::move(deps)), 1);
  mlp_out.reads = reads;
  int last = tp_gemm(std::move(mlp_out), moe && p_.parallel.ep > 1 ? TpComm::none : TpComm::all_gather_before,
                     label(tag, " tp mlp out"));
  Op act = make_op(OpKind::elementwise, Stream::compute, Pass::backward, label(tag, " activation"), layer, micro);
  act.bytes = activation_bytes(w, true) * routed;
  act.kernels = w.gated ? 3 : 2;
  act.deps = {last};
  last = add(hooked(std::move(act), 1));
  if (moe && p_.parallel.ep > 1) {
    last =
        gemm(label(tag, " mlp_in"), layer, micro, Pass::backward, routed, w.h, (w.gated ? 2 : 1) * w.f, full_, {last});
    last = dispatch(moe, label(tag, " dispatch"), layer, micro, last);
    if (tp_ > 1)
      last =
          collective(Stream::comm, p_.parallel.sequence_parallel ? Collective::reduce_scatter : Collective::all_reduce,
                     Group::tp, tp_, T * w.h * act_B_, label(tag, " tp mlp"), layer, micro, {last});
  } else {
    last = tp_gemm(hooked(make_gemm(label(tag, " mlp_in"), layer, micro, Pass::backward, routed, w.h,
                                    (w.gated ? 2 : 1) * w.f, full_, {last}),
                          mlp_in_modules(w)),
                   TpComm::reduce_after, label(tag, " tp mlp"));
  }
  last =
      tp_gemm(hooked(make_gemm(label(tag, " attn_out"), layer, micro, Pass::backward, T, w.q, w.h, full_, {last}), 1),
              TpComm::all_gather_before, label(tag, " tp attn out"));
  Op at = make_op(OpKind::attention, Stream::compute, Pass::backward, label(tag, " attention"), layer, micro);
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
  last =
      tp_gemm(hooked(make_gemm(label(tag, " qkv"), layer, micro, Pass::backward, T, w.h, w.q + 2 * w.kv, full_, {last}),
                     fused_qkv() ? 1 : 3),
              TpComm::reduce_after, label(tag, " tp attn"));
  if (job_.precision == plan::Precision::fp8_mixed) last = fp8_casts(tag, layer, micro, Pass::backward, true, last);
  Op ew =
      make_op(OpKind::elementwise, Stream::compute, Pass::backward, label(tag, " norms/rope/residual"), layer, micro);
  ew.bytes = pointwise_bytes(w, true) * T;
  ew.kernels = pointwise_kernels(true);
  ew.deps = {last};
  last = add(hooked(std::move(ew), kGlueModules));
  if (!full_) last = lora_adapters(tag, layer, micro, Pass::backward, w, last);
  return last;
}

int Builder::layer_forward(int layer, int micro, Pass pass, Ids deps, Ids reads, int saved) {
  if (const LayerTemplate* t = find_template(layer, pass, deps, reads, saved))
    return replay(*t, layer, micro, deps, reads, saved);
  const std::size_t first = ir_.ops.size();
  const int last = build_layer_forward(layer, micro, pass, deps, reads, saved);
  keep_template(layer, micro, pass, first, std::move(deps), std::move(reads), saved);
  return last;
}

int Builder::layer_backward(int layer, int micro, Ids deps, Ids reads) {
  if (const LayerTemplate* t = find_template(layer, Pass::backward, deps, reads, -1))
    return replay(*t, layer, micro, deps, reads, -1);
  const std::size_t first = ir_.ops.size();
  const int last = build_layer_backward(layer, micro, deps, reads);
  keep_template(layer, micro, Pass::backward, first, std::move(deps), std::move(reads), -1);
  return last;
}

bool Builder::templates_on() const {
  return !names_ && job_.precision != plan::Precision::fp8_mixed && cp_ <= 1 &&
         !(tp_ > 1 && p_.parallel.sequence_parallel && p_.parallel.async_tp);
}

const Builder::LayerTemplate* Builder::find_template(int layer, Pass pass, const Ids& deps, const Ids& reads,
                                                     int saved) const {
  const int t = template_index(layer, pass, deps, reads, saved);
  return t < 0 ? nullptr : &templates_[static_cast<std::size_t>(t)];
}

int Builder::template_index(int layer, Pass pass, const Ids& deps, const Ids& reads, int saved) const {
  if (templates_.empty() || layer < 0 || static_cast<std::size_t>(layer) >= work_memo_.size()) return -1;
  const LayerWork& w = work_memo_[static_cast<std::size_t>(layer)];
  const bool moe = layer < m_.layers && m_.is_moe_layer(layer);
  for (std::size_t i = 0; i < templates_.size(); ++i) {
    const LayerTemplate& t = templates_[i];
    if (t.pass == pass && t.deps.size() == deps.size() && t.reads.size() == reads.size() &&
        (t.saved >= 0) == (saved >= 0) && t.moe == moe && t.work == w && t.weights == matmul_weights(layer, w))
      return static_cast<int>(i);
  }
  return -1;
}

void Builder::keep_template(int layer, int micro, Pass pass, std::size_t first, Ids deps, Ids reads, int saved) {
  if (!templates_on() || layer < 0) return;
  if (work_memo_.empty()) {
    work_memo_.resize(static_cast<std::size_t>(std::max(m_.total_layers(), 1)));
    for (std::size_t l = 0; l < work_memo_.size(); ++l) work_memo_[l] = work_of(static_cast<int>(l));
  }
  if (static_cast<std::size_t>(layer) >= work_memo_.size()) return;
  for (std::size_t j = 0; j < deps.size(); ++j)  // an input named twice could not be told apart
    if (std::find(deps.begin(), deps.begin() + static_cast<std::ptrdiff_t>(j), deps[j]) !=
        deps.begin() + static_cast<std::ptrdiff_t>(j))
      return;
  const std::size_t last = ir_.ops.size() - 1;
  for (std::size_t i = first; i <= last; ++i) {
    const Op& op = ir_.ops[i];
    if (op.layer != layer || op.micro != micro || op.tensor >= 0 || op.peer >= 0) return;
    for (int d : op.deps)
      if (static_cast<std::size_t>(d) < first && std::find(deps.begin(), deps.end(), d) == deps.end()) return;
    if (!op.reads.empty() && !(op.reads == reads)) return;
    if (!op.writes.empty() && !(saved >= 0 && op.writes == Ids{saved})) return;
  }
  LayerTemplate t;
  t.work = work_memo_[static_cast<std::size_t>(layer)];
  t.moe = layer < m_.layers && m_.is_moe_layer(layer);
  t.weights = matmul_weights(layer, t.work);
  t.pass = pass;
  t.first = first;
  t.ops.assign(ir_.ops.begin() + static_cast<std::ptrdiff_t>(first), ir_.ops.end());
  t.deps = std::move(deps);
  t.reads = std::move(reads);
  t.saved = saved;
  // One serial chain (what a folded run needs of it, sim/fold.cpp's `serial`): on the compute and
  // comm streams, no pipeline or ring point-to-point, each op after the first waiting on the one
  // before it (or on the same stream), any other wait on an input the first op waits on too.
  t.serial = true;
  for (std::size_t k = 0; k < t.ops.size(); ++k) {
    const Op& op = t.ops[k];
    if ((op.stream != Stream::compute && op.stream != Stream::comm) || op.peer >= 0 ||
        (op.kind == OpKind::collective && op.collective == Collective::send_recv))
      t.serial = false;
    bool after_previous = k == 0 || t.ops[k - 1].stream == op.stream;
    for (int d : op.deps) {
      after_previous = after_previous || static_cast<std::size_t>(d) == first + k - 1;
      if (k > 0 && static_cast<std::size_t>(d) < first &&
          std::find(t.ops[0].deps.begin(), t.ops[0].deps.end(), d) == t.ops[0].deps.end())
        t.serial = false;
    }
    if (!after_previous) t.serial = false;
    t.flops += FlopTotals::of(op);
  }
  if (!t.ops.empty()) t.last_flops = FlopTotals::of(t.ops.back());
  templates_.push_back(std::move(t));
}

bool Builder::fold_on() const { return view_.fold && templates_on(); }

int Builder::fold_replay(const LayerTemplate& t, int layer, int micro, const Ids& deps, const Ids& reads, int saved,
                         bool keep_last, int removed) {
  skipped_flops_ += t.flops;
  if (!keep_last) return removed;
  skipped_flops_ -= t.last_flops;
  const int first = static_cast<int>(t.first);
  Op& op = ir_.ops.emplace_back(t.ops.back());
  op.layer = layer;
  op.micro = micro;
  for (int& d : op.deps)
    d = d >= first ? removed
                   : deps[static_cast<std::size_t>(std::find(t.deps.begin(), t.deps.end(), d) - t.deps.begin())];
  if (!op.reads.empty()) op.reads = reads;
  if (!op.writes.empty()) op.writes = {saved};
  return static_cast<int>(ir_.ops.size()) - 1;
}

int Builder::replay(const LayerTemplate& t, int layer, int micro, const Ids& deps, const Ids& reads, int saved) {
  const int shift = static_cast<int>(ir_.ops.size() - t.first);
  const int first = static_cast<int>(t.first);
  for (const Op& from : t.ops) {
    Op& op = ir_.ops.emplace_back(from);
    op.layer = layer;
    op.micro = micro;
    for (int& d : op.deps)
      d = d >= first ? d + shift
                     : deps[static_cast<std::size_t>(std::find(t.deps.begin(), t.deps.end(), d) - t.deps.begin())];
    if (!op.reads.empty()) op.reads = reads;
    if (!op.writes.empty()) op.writes = {saved};
  }
  return static_cast<int>(ir_.ops.size()) - 1;
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
  if (inv_.profile.ring_attention == plan::FrameworkProfile::RingAttention::all_gather)
    return gathered_ring(std::move(op), backward);
  // Each rank holds seq/cp queries and, in turn, every rank's K and V block: cp - 1 passes of
  // T (2 kv) values (and in backward their gradients too) overlap with the blocks' compute.
  const double block_bytes = tokens_ * 2.0 * work_of(op.layer).kv * act_B_ * (backward ? 2.0 : 1.0);
  const std::string pass_name = op.name + " kv";
  return blocked(std::move(op), cp_, block_bytes, Group::cp, pass_name);
}

// PyTorch's ring attention as torch 2.6 runs it (torch/distributed/tensor/experimental/
// _attention.py; torchtitan's CP at the end of 2024), with load balancing: each rank holds two
// chunks of the sequence, so every block is the same work (the first causal, the others full
// blocks of half the queries or half the keys).
int Builder::gathered_ring(Op op, bool backward) {
  const LayerWork w = work_of(op.layer);
  // K and V as SDPA receives them: at all heads' width where the model repeats them first.
  const double kv = tokens_ * (inv_.profile.sdpa_repeats_kv ? w.q : w.kv);  // elements of K (or V)
  const double q = tokens_ * w.q;                                           // elements of Q (and O)
  const std::string base = op.name;
  const Ids deps = op.deps;
  // _AllGatherRotater: one all-gather of every rank's K and V (torch.cat of the two) per call,
  // issued before the first block and waited for by the second ("We only need to perform the
  // allgather once"); backward gathers them again.
  const int gather = collective(Stream::comm, Collective::all_gather, Group::cp, cp_, cp_ * 2.0 * kv * act_B_,
                                name("{} kv all-gather", base), op.layer, op.micro, deps);
  // The fp32 bookkeeping after each block, per element it touches. Forward (_SDPAMerger.step):
  // out and lse upcast to fp32, out = out - sigmoid(block_lse - lse) * (out - block_out), a
  // half-sequence block's update put back with torch.cat (_partial_update, every other block):
  // eager, to(fp32) 2 + 4 B, the subtraction 12, the product 8, the update 12, the cat 8 / 2 =
  // 42 B a query element; compiled (torchtitan compiles each block whole) one pass reading out
  // and block_out and writing out, 4 + 2 + 4 = 10 B. Backward (_scaled_dot_product_ring_flash_
  // attention_backward): dQ accumulated in fp32 (10 B compiled; eager + the partial cat's 4),
  // dK and dV accumulated in fp32 into the buffer that travels on (10 B; eager + torch.cat of the
  // two to send, 8, + the partial cat's 4).
  const double merge_B =
      backward ? (fused_ ? 10.0 * q + 10.0 * 2 * kv : 14.0 * q + 22.0 * 2 * kv) : (fused_ ? 10.0 : 42.0) * q;
  const auto bookkeeping = [&](const std::string& what, int b, Ids after) {
    Op e = make_op(OpKind::elementwise, Stream::compute, op.pass, name("{} {} {}", base, what, b), op.layer, op.micro);
    e.bytes = merge_B;
    e.kernels = fused_ ? (backward ? 2 : 1) : (backward ? 6 : 5);
    e.element = Element::fp32;
    e.deps = std::move(after);
    return add(std::move(e));
  };
  int last = -1, pass = -1;
  for (int b = 0; b < cp_; ++b) {
    Op block = block_of(op, b, cp_);
    block.deps = b == 0 ? deps : b == 1 ? Ids{last, gather} : Ids{last};
    last = add(std::move(block));
    if (backward) {
      // Each block's gradients are added to those received from the previous rank, then sent
      // on in fp32 (a _RotateMethod.ALL_TO_ALL rotater, ft_c.permute_tensor): cp passes, the
      // next block's compute hiding each but the last.
      last = bookkeeping("grad accumulation", b, b == 0 ? Ids{last} : Ids{last, pass});
      pass = collective(Stream::comm, Collective::send_recv, Group::cp, 2, 2.0 * kv * 4.0,
                        name("{} dkv pass {}", base, b), op.layer, op.micro, {last});
    } else if (b > 0) {
      last = bookkeeping("merge", b, {last});
    }
  }
  // Back to 16 bits: the output (forward) or dK and dV, once the last pass has arrived.
  Op cast = make_op(OpKind::elementwise, Stream::compute, op.pass, name("{} to 16-bit", base), op.layer, op.micro);
  cast.bytes = (4.0 + act_B_) * (backward ? 2.0 * kv : q);
  cast.deps = backward ? Ids{last, pass} : Ids{last};
  return add(std::move(cast));
}

Op Builder::block_of(const Op& op, int b, int blocks) const {
  Op block = op;
  block.name = name("{} block {}", op.name, b);
  block.flops /= blocks;
  block.model_flops /= blocks;
  block.recompute_flops /= blocks;
  block.bytes /= blocks;
  // Its share of the work: a GEMM block computes m / blocks rows (async TP), an attention
  // block attends to n / blocks keys (ring attention).
  if (op.kind == OpKind::gemm) block.m = std::max<std::int64_t>(1, op.m / blocks);
  if (op.kind == OpKind::attention) block.n = std::max<std::int64_t>(1, op.n / blocks);
  if (b > 0) block.reads.clear();  // the first block reads the op's inputs for all of them
  return block;
}

int Builder::blocked(Op op, int blocks, double pass_bytes, Group g, const std::string& pass_name) {
  const std::string base = op.name;
  const Ids deps = op.deps;
  int last = -1, pass = -1;
  for (int b = 0; b < blocks; ++b) {
    Op block = block_of(op, b, blocks);
    block.deps = b == 0 ? deps : Ids{last, pass};
    if (b + 1 < blocks) {
      // The next block's data travel while this one computes.
      pass = collective(Stream::comm, Collective::send_recv, g, 2, pass_bytes, name("{} pass {}", pass_name, b + 1),
                        op.layer, op.micro, b == 0 ? deps : Ids{pass});
    }
    last = add(std::move(block));
  }
  return last;
}

int Builder::copy(Stream s, Tier src, Tier dst, double bytes, const std::string& name, int layer, int micro, Ids deps,
                  Ids reads, Ids writes) {
  Op op = make_op(OpKind::copy, s, Pass::other, name, layer, micro);
  op.src = src;
  op.dst = dst;
  op.bytes = bytes;
  op.deps = std::move(deps);
  op.reads = std::move(reads);
  op.writes = std::move(writes);
  return add(std::move(op));
}

}  // namespace ftplan::schedule::detail
