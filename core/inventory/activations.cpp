// Activations of one rank (build_state.hpp): what each layer saves for backward, per token and
// layer kind, the micro-batches in flight, checkpointing and activation offload, the activation
// gradients of one layer's backward, and the final norm and loss on the last stage.
#include <algorithm>
#include <cmath>

#include "inventory/build_state.hpp"
#include "plan/checks.hpp"

namespace ftplan::inventory::detail {

using model::LayerShape;
using model::ModelSpec;
using plan::Checkpointing;
using plan::Job;
using plan::Method;
using plan::Tier;

namespace {

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
  double a = 2;     // bytes of a 16-bit (or fp32) activation: what the matmuls read
  double wide = 2;  // fused/compiled path: bytes of tensors autocast keeps in fp32 (norm inputs, softmax)
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
  if (!c.eager_modules)
    return c.wide * h;  // fused kernels: the input (each also keeps a per-token fp32 rstd, negligible)
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

// The micro-batch count is bounded here only so that it fits an int (build_step bounds the step's
// size itself: schedule::kMaxLayerPasses).
constexpr std::int64_t kMicroBatchCap = 1 << 20;

// Micro-batches whose activations the stage holds at once, by pipeline schedule.
int micro_batches_in_flight(const Build& b) {
  if (b.pp <= 1) return 1;
  const int pp = b.pp;
  const auto mb = static_cast<int>(std::min<std::int64_t>(b.inv.grad_accumulation, kMicroBatchCap));
  switch (b.par.schedule) {
    case plan::PipelineSchedule::gpipe: return mb;                                // all forwards before any backward
    case plan::PipelineSchedule::one_f_one_b: return std::min(mb, pp - b.stage);  // Narayanan et al. 2021
    case plan::PipelineSchedule::interleaved:
      // Megatron interleaved 1F1B: the first stage holds pp micro-batches x (1 + (pp-1)/(pp v)) layers' worth.
      return std::min(mb, static_cast<int>(std::ceil((pp - b.stage) *
                                                     (1.0 + (pp - 1.0) / (pp * std::max(1, b.par.virtual_stages))))));
  }
  return 1;
}

ActivationContext activation_context(const Build& b) {
  const plan::PrecisionRecipe& rec = b.inv.recipe;
  const plan::FrameworkProfile& prof = b.inv.profile;
  const Job& job = b.job;
  ActivationContext ac;
  ac.a = rec.activation_B;
  ac.wide = rec.autocast_copies ? 4.0 : rec.activation_B;
  // The residual stream has the parameters' type: fp32 under autocast on fp32 weights, while a
  // LoRA base is kept in the compute type (add_weights' frozen_B), so its stream is 16-bit.
  ac.residual = rec.autocast_copies && job.method == Method::full ? 4.0 : rec.activation_B;
  ac.eager_modules = !prof.fused_pointwise && !job.compile;
  ac.repeat_kv = prof.sdpa_repeats_kv;
  ac.autocast_casts = ac.eager_modules && ac.residual != ac.a;
  ac.dropout = job.dropout_for(b.m.dropout);
  ac.flash = job.attention != plan::AttentionImpl::eager;
  ac.compile = job.compile;
  ac.selective = prof.selective;
  return ac;
}

// What the stage's layers keep for backward over one micro-batch of `tokens`.
struct StageSaved {
  double saved = 0;      // bytes saved for backward, summed over the stage's layers
  double recompute = 0;  // the largest layer's recomputed tensors (full checkpointing)
  double grad = 0;       // the largest layer's activation gradients
  int checkpointed = 0;  // layers of the stage full checkpointing recomputes
};

// Per-layer saved bytes, summed over the stage's layers (layers differ: local/global, MoE/dense).
StageSaved stage_saved(const Build& b, const ActivationContext& ac, double tokens) {
  const ModelSpec& m = b.m;
  const Job& job = b.job;
  const plan::Parallel& par = b.par;
  const int tp = b.tp;
  const double act_scale = b.inv.recipe.activation_B / 2.0;  // for the 16-bit estimates below
  StageSaved st;
  for (int i = 0; i < b.inv.layers; ++i) st.checkpointed += job.checkpointed(i);
  for (std::size_t k = 0; k < b.kinds.size(); ++k) {
    const LayerKind& kd = b.kinds[k];
    if (kd.count == 0) continue;
    const SavedPerToken t = saved_per_token(m, job, b.trainable, ac, kd.model_layer);
    const double attended = (k & kLocalLayer) ? std::min<double>(static_cast<double>(job.seq_len),
                                                                 static_cast<double>(m.attention.sliding_window))
                                              : static_cast<double>(job.seq_len);
    // Korthikanti et al. 2022 eq. 2-4: the TP region splits by t; the sequence region only with SP.
    const double per_token = (par.sequence_parallel ? t.sequence / tp : t.sequence) + t.tensor / tp;
    const double quadratic = t.quadratic * attended / tp;
    const double full_layer = (per_token + quadratic) * tokens;
    if (st.checkpointed > 0) {
      // A checkpointed layer keeps only its input (h per token; split by tp under SP). Backward
      // recomputes the layer from it: the recomputed tensors minus the input, already held.
      // (With checkpoint_every > 1, each kind of layer counted at the stage's share of them.)
      const double input = ac.residual * b.h * tokens / (par.sequence_parallel ? tp : 1);
      const double share = static_cast<double>(st.checkpointed) / std::max(1, b.inv.layers);
      st.saved += (input * share + full_layer * (1 - share)) * kd.count;
      st.recompute = std::max(st.recompute, full_layer - input);
    } else {
      st.saved += full_layer * kd.count;
    }
    const LayerShape s = model::layer_shape(m, kd.model_layer);
    // Activation gradients alive during one layer's backward: two of the widest intermediates
    // (e.g. d(gate) and d(up) of a gated MLP) plus the residual stream gradient (an estimate).
    st.grad =
        std::max(st.grad, (2.0 * 2.0 * std::max({s.f * s.experts_per_token, s.q + 2 * s.kv, s.h}) / tp + 2.0 * s.h) *
                              tokens * act_scale);
  }
  // RoPE's cos and sin (b, s, rotary dims), in the stream's type: HF computes them once per
  // forward (LlamaModel: position_embeddings = self.rotary_emb(hidden_states, position_ids)) and
  // every layer's q * cos and rotate_half(q) * sin keep the same two tensors (mul keeps the other
  // operand for the gradient of the one that requires grad); checkpointed layers keep them as inputs.
  if (ac.eager_modules && m.positional == model::Positional::rope && b.inv.layers > 0)
    st.saved += 2.0 * ac.residual * std::floor(m.head_dim_or_default() * m.rope_fraction) * tokens;
  return st;
}

// Unsloth's loss chunks aim at this many bytes of fp32 logits (unsloth_zoo/fused_losses/
// cross_entropy_loss.py, get_chunk_size: target = min(half the free memory, 4 GiB); 4 GiB on a
// GPU with more than 8 GiB free at the loss).
constexpr double kUnslothChunkTarget_B = 4.0 * (1 << 30);

// Bytes the loss keeps from forward to backward and its peak while computed, for `n` tokens over
// `V` logits each.
struct LossBytes {
  double kept = 0, peak = 0;
};

// Cross-entropy over the vocabulary, per token of V logits. log_softmax keeps its output for
// backward (and nll_loss the same tensor). HF transformers (loss_utils.ForCausalLMLoss) and
// torchtitan upcast the logits to fp32 first: forward holds 16-bit logits + fp32 copy + fp32
// log-probs (a + 4 + 4); backward holds the log-probs, nll's gradient and log_softmax's
// gradient (4 + 4 + 4). torchtune's CEWithChunkedOutputLoss keeps 16-bit logit chunks and
// upcasts one chunk at a time. Compiled, the loss is one fused kernel that keeps the 16-bit
// logits and a per-token log-sum-exp and writes a 16-bit gradient.
LossBytes loss_bytes(const Build& b, double V, double n) {
  const Job& job = b.job;
  const double a = b.inv.recipe.activation_B;
  const double h = b.h;
  if (b.inv.profile.fused_linear_loss) {
    // Unsloth's fused loss (unsloth_zoo/fused_losses/cross_entropy_loss.py, UnslothFusedLoss):
    // forward splits the tokens into chunks and, per chunk, computes the 16-bit logits, their
    // fp32 upcast and cross-entropy, and the gradient with torch.func.grad_and_value, writing
    // the hidden states' gradient into grad_inputs = empty_like(hidden_states) (a h per token,
    // kept for backward). Chunks: get_chunk_size rounds fp32 logits / target up to a multiple of
    // 4 (1 if they fit). A chunk's peak: 16-bit logits, fp32 log-probs and their fp32 gradient
    // (a + 4 + 4 per logit; an estimate, the chunk is compiled).
    const double fp32_logits = 4.0 * V * n;
    const double exact = fp32_logits / kUnslothChunkTarget_B;
    const double chunks = exact <= 1.0 ? 1.0 : 4.0 * std::ceil(exact / 4.0);
    return {a * h * n, (a + 8.0) * V * n / chunks};
  }
  if (job.compile && b.inv.profile.compile_covers_loss) return {a * V * n, a * V * n / std::max(1, job.loss.chunks)};
  if (job.loss.chunks > 0) return {(a + 4.0) * V * n, 8.0 * V * n / job.loss.chunks};
  if (job.loss.fp32_logits) return {4.0 * V * n, std::max(a + 4.0, 8.0) * V * n};
  return {a * V * n, 2.0 * a * V * n};
}

}  // namespace

void add_activations(Build& b) {
  Inventory& inv = b.inv;
  const Job& job = b.job;
  const double tokens = static_cast<double>(job.micro_batch) * static_cast<double>(job.seq_len) / b.cp;
  inv.tokens_per_micro_batch = tokens;
  const int in_flight = micro_batches_in_flight(b);
  inv.micro_batches_in_flight = in_flight;
  inv.forwards_first = b.pp > 1 && b.par.schedule == plan::PipelineSchedule::gpipe;
  const ActivationContext ac = activation_context(b);
  const StageSaved st = stage_saved(b, ac, tokens);
  // A framework that offloads its checkpoints' inputs (Unsloth) puts them in host memory by itself.
  const Tier act_tier = plan::activation_tier(b.plan);
  const Element packed = Element::packed;
  if (inv.layers > 0) {
    const double per_layer = st.saved / inv.layers;
    if (act_tier == Tier::gpu) {
      b.add("saved activations", Category::activations, Tier::gpu, per_layer, inv.layers * in_flight, Lifetime::saved,
            packed, true);
    } else {
      // Activation offload (SSDTrain; DeepSpeed cpu_checkpointing): the GPU keeps the layer being
      // produced or consumed plus the prefetched ones; the rest waits in host memory or on flash.
      const int resident = std::min(inv.layers, 1 + std::max(1, b.off.prefetch_depth));
      b.add("saved activations (resident)", Category::activations, Tier::gpu, per_layer, resident, Lifetime::saved,
            packed, true);
      b.add("saved activations (offloaded)", Category::activations, act_tier, per_layer, inv.layers * in_flight,
            Lifetime::saved, packed, true);
      if (act_tier == Tier::nvme)
        b.add("activation staging buffers (pinned)", Category::buffers, Tier::cpu, 2.0 * per_layer, 1,
              Lifetime::persistent, packed);
    }
  }
  if (st.checkpointed > 0)
    b.add("recomputed layer activations", Category::activations, Tier::gpu, st.recompute, 1, Lifetime::backward_layer,
          packed);
  b.add("activation gradients", Category::temporaries, Tier::gpu, st.grad, 1, Lifetime::backward_layer,
        inv.activation_element());
  // PyTorch's ring attention (FrameworkProfile::RingAttention::all_gather, schedule's
  // gathered_ring): through a layer's attention backward, every rank's K and V as gathered
  // (16-bit, at the width SDPA receives them), dQ accumulated in fp32 and dK, dV in fp32 twice
  // (the accumulator and the pair arriving from the previous rank). Forward holds less (the
  // gathered K and V and an fp32 output).
  if (b.cp > 1 && b.inv.profile.ring_attention == plan::FrameworkProfile::RingAttention::all_gather && inv.layers > 0) {
    double widest = 0;
    for (const LayerKind& kd : b.kinds) {
      if (kd.count == 0) continue;
      const LayerShape s = model::layer_shape(b.m, kd.model_layer);
      const double q = tokens * s.q / b.tp, kv = tokens * (ac.repeat_kv ? s.q : s.kv) / b.tp;
      widest = std::max(widest, b.cp * 2.0 * kv * ac.a + 4.0 * q + 2.0 * 2.0 * kv * 4.0);
    }
    b.add("ring attention buffers", Category::temporaries, Tier::gpu, widest, 1, Lifetime::backward_layer,
          Element::packed);
  }
}

// The final norm and the loss on the last stage.
void add_loss(Build& b) {
  const ModelSpec& m = b.m;
  if (b.stage != b.pp - 1 || !m.has_lm_head()) return;
  const double h = b.h;
  const double V = static_cast<double>(m.vocab) / b.tp;
  const double n = b.inv.tokens_per_micro_batch;
  const double a = b.inv.recipe.activation_B;
  // The final norm (as a layer's norms), and its output when the head is trainable (the head's
  // weight gradient needs it; under autocast on an fp32 stream, the head's 16-bit cast of it).
  const bool head_trains = b.job.method == Method::full;
  b.add("final norm activations", Category::activations, Tier::gpu,
        (norm_saved_per_token(m, activation_context(b), h, head_trains) + (head_trains ? a * h : 0.0)) * n, 1,
        Lifetime::loss, Element::packed);
  const LossBytes loss = loss_bytes(b, V, n);
  b.add(b.inv.profile.fused_linear_loss ? "hidden-state gradient (fused loss)" : "logits and log-softmax",
        Category::activations, Tier::gpu, loss.kept, 1, Lifetime::loss, Element::packed);
  b.add("loss temporaries (logits, fp32 upcast, logit gradients)", Category::temporaries, Tier::gpu, loss.peak, 1,
        Lifetime::loss_peak, Element::packed);
}

}  // namespace ftplan::inventory::detail
