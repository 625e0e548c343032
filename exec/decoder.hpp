// A real Llama-style decoder for the executor's training (issue 40: "train for real"): token
// embedding, `layers` blocks of RMSNorm -> Q/K/V with RoPE and grouped-query causal attention ->
// output projection -> residual -> RMSNorm -> SwiGLU MLP -> residual, a final RMSNorm, the LM head
// and the mean token cross-entropy; its backward by hand, optionally recomputing each block from
// its input (activation checkpointing), and LoRA adapters on chosen projections. It is the math of
// Hugging Face's LlamaForCausalLM (transformers models/llama/modeling_llama.py: LlamaRMSNorm,
// rotate_half RoPE, repeat_kv GQA, LlamaMLP down(act(gate(x)) * up(x))) and PEFT's LoRA
// (peft/tuners/lora/layer.py: y = x W + (alpha / r) (x A) B, B zero at init).
//
// A block's forward is split as the step IR splits it (schedule/step_ir.hpp: "norms/rope", "qkv",
// "attention", "attn_out", "mlp_in", "activation", "mlp_out"), so the executor can run each IR
// op's own part of the math on the parameters it streamed; its backward runs in the IR's order in
// one call (to be split the same way when the executor runs it). Templated on the scalar: float for
// training, double for the finite-difference gradient checks (tests/exec/decoder_test.cpp), which
// an independent PyTorch autograd reference also checks (tests/exec/decoder_reference.py).
//
// Tensors are row-major, one row per token (tokens = batch x seq, sequence by sequence). A weight
// `in x out` maps a row x to x W (Hugging Face's Linear stores W^T).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "model/model.hpp"

namespace ftplan::exec::decoder {

// The projections of a block (LoRA's targets; PEFT's target_modules names).
enum class Proj { q, k, v, o, gate, up, down };
inline constexpr int kProjs = 7;
const char* to_string(Proj p);

struct Shape {
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  bool tied_embeddings = false;
  // RoPE's base (Llama 2: 10,000; Llama 3: 500,000) and RMSNorm's epsilon (Llama: 1e-5 / 1e-6).
  double rope_theta = 10000;
  double norm_eps = 1e-5;
  // LoRA: rank 0 = full fine-tune (every parameter trainable); else adapters of `lora_rank` on
  // `lora_targets` (PEFT's default for Llama: q_proj and v_proj) and the base frozen.
  int lora_rank = 0;
  double lora_alpha = 16;
  std::vector<Proj> lora_targets = {Proj::q, Proj::v};

  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  bool lora_on(Proj p) const;
};

// The model's decoder as this code runs it, or why it cannot (an MoE, biases, LayerNorm, absolute
// positions, sliding windows, softcaps, an encoder: what the block above is not): `why` says which.
Shape shape_of(const model::ModelSpec& m, std::string& why);

// Where each parameter lives in the flat base vector (Hugging Face's order): the embedding
// [vocab x hidden], then per block input norm [h], Wq [h x q], Wk [h x kv], Wv [h x kv],
// Wo [q x h], post-attention norm [h], Wgate [h x ffn], Wup [h x ffn], Wdown [ffn x h]; then the
// final norm [h] and, untied, the LM head [h x vocab]. Adapters, in their own flat vector, per
// block and target in Proj order: A [in x r] then B [r x out].
struct Layout {
  std::int64_t embedding = 0, block_begin = 0, block_size = 0, final_norm = 0, head = 0, base_size = 0;
  // Offsets inside a block.
  std::int64_t norm_in = 0, norm_post = 0;
  std::int64_t proj[kProjs] = {};
  std::int64_t proj_in[kProjs] = {}, proj_out[kProjs] = {};
  // Adapters: per block adapter_block_size, a target's A at adapter[p] and its B right after.
  std::int64_t adapter_block_size = 0, adapter_size = 0;
  std::int64_t adapter[kProjs] = {};  // -1: no adapter on that projection
  std::int64_t block(int layer) const { return block_begin + layer * block_size; }
};
Layout layout_of(const Shape& s);

// Deterministic first values (the same in every run and language: splitmix64 of the index, as
// tests/exec/decoder_reference.py computes them): norms 1, matrices uniform in
// [-1/sqrt(in), 1/sqrt(in)] (nn.Linear's kaiming-uniform bound), the embedding uniform in
// [-1, 1]; adapters' A like a matrix, B zero (PEFT) unless `nonzero_b` (gradient checks).
template <class T>
void init_base(const Shape& s, std::uint64_t seed, T* base);
template <class T>
void init_adapters(const Shape& s, std::uint64_t seed, T* adapters, bool nonzero_b = false);

// bf16 as a GPU stores it: the upper half of the fp32, rounded to nearest even; and back.
inline std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
inline float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// splitmix64 (Steele et al. 2014) of x: the initialisers' and the synthetic corpus's hash.
std::uint64_t splitmix64(std::uint64_t x);
// A uniform value in [-1, 1) from a hash: its top 53 bits.
double unit_uniform(std::uint64_t h);

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// What one block keeps from its forward for its backward (Korthikanti et al. 2022's saved
// activations, kept in the compute type). With recompute, only `x` is kept and recompute() fills
// the rest before the backward.
template <class T>
struct BlockCache {
  Mat<T> x;             // block input [tokens x h]
  std::vector<T> r_in;  // input norm's 1/rms per token
  Mat<T> xn;            // normed input
  Mat<T> q, k, v;       // after RoPE (q, k), [tokens x q_dim / kv_dim]
  Mat<T> probs;         // attention probabilities [batch*heads*seq x seq]
  Mat<T> o;             // attention output [tokens x q_dim]
  Mat<T> h1;            // x + attention
  std::vector<T> r_post;
  Mat<T> hn;               // normed h1
  Mat<T> gate, up, act;    // MLP
  Mat<T> lora_xa[kProjs];  // x A of each adapted projection
  void keep_input_only();
};

// One block's passes. `w` points at the block's base parameters (Layout::block), `a` at its
// adapters (or null without LoRA); gradients are accumulated (+=) into `dw` (full fine-tune; may
// be null under LoRA) and `da` (LoRA). batch x seq tokens.
template <class T>
class Block {
 public:
  Block(const Shape& s, int batch, int seq);

  // Forward, in the IR's order: x -> out (out may not alias x).
  void norm_in(const T* w, BlockCache<T>& c) const;
  void qkv(const T* w, const T* a, BlockCache<T>& c) const;  // projections and RoPE
  void attention(BlockCache<T>& c) const;
  void attn_out(const T* w, const T* a, BlockCache<T>& c) const;  // o Wo + x -> h1, then the post norm
  void mlp_in(const T* w, const T* a, BlockCache<T>& c) const;
  void activation(BlockCache<T>& c) const;
  void mlp_out(const T* w, const T* a, BlockCache<T>& c, Mat<T>& out) const;
  void forward(const T* w, const T* a, BlockCache<T>& c, Mat<T>& out) const;
  // The forward again from c.x alone (activation checkpointing), without its output.
  void recompute(const T* w, const T* a, BlockCache<T>& c) const;

  // Backward: dout (the gradient of the block's output) in, dx (of its input) out, in the IR's
  // backward order (mlp_out, activation, mlp_in, attn_out, attention, qkv, norms).
  void backward(const T* w, const T* a, const BlockCache<T>& c, const Mat<T>& dout, Mat<T>& dx, T* dw, T* da) const;

 private:
  // y = x W (+ LoRA) for projection p; keeps x A in `xa` when adapted.
  void project(Proj p, const T* w, const T* a, const Mat<T>& x, Mat<T>& y, Mat<T>& xa) const;
  // dx += dy W^T (+ LoRA's), dW += x^T dy (when dw), dA/dB (when adapted).
  void project_back(Proj p, const T* w, const T* a, const Mat<T>& x, const Mat<T>& xa, const Mat<T>& dy, Mat<T>& dx,
                    T* dw, T* da) const;
  void rope(Mat<T>& m, int heads, bool inverse) const;
  Shape s_;
  Layout l_;
  int batch_, seq_;
  std::vector<T> cos_, sin_;  // [seq x head_dim/2]
};

// The model's ends, as the step IR runs them apart from the blocks (its "fwd head", "loss" and
// "bwd head" ops; the embedding lookup before the first block). `head` is the LM head [h x vocab],
// or with tied embeddings the embedding [vocab x h]. Gradients are accumulated (+=).
template <class T>
void embed(const Shape& s, const T* embedding, const std::int32_t* tokens, std::int64_t n, Mat<T>& x);
template <class T>
void embed_backward(const Shape& s, const std::int32_t* tokens, const Mat<T>& dx, T* embedding_grad);
template <class T>
struct HeadCache {
  Mat<T> x;           // the last block's output
  Mat<T> hf;          // after the final norm
  std::vector<T> rf;  // its 1/rms per token
  Mat<T> logits;      // then, after loss(), d (grad_scale x mean loss) / d logits
};
template <class T>
void head_forward(const Shape& s, const T* final_norm, const T* head, HeadCache<T>& c);
// The mean cross-entropy over the tokens whose target is >= 0; leaves its gradient, scaled by
// `grad_scale`, in c.logits.
template <class T>
T loss(const Shape& s, const std::int32_t* targets, T grad_scale, HeadCache<T>& c);
template <class T>
void head_backward(const Shape& s, const T* final_norm, const T* head, const HeadCache<T>& c, Mat<T>& dx,
                   T* final_norm_grad, T* head_grad);

// The whole model over one micro-batch: the mean cross-entropy of predicting targets[t] at token
// t (targets < 0 are ignored, Hugging Face's -100), its gradients accumulated into base_grad (may
// be null under LoRA) and adapter_grad (LoRA), each scaled by `grad_scale` (1 / micro-batches for
// gradient accumulation). `recompute`: keep only each block's input in the forward.
template <class T>
T loss_and_gradients(const Shape& s, const T* base, const T* adapters, const std::int32_t* tokens,
                     const std::int32_t* targets, int batch, int seq, T* base_grad, T* adapter_grad, bool recompute,
                     T grad_scale = T(1));

// The synthetic corpus: sequence `index` of `seq` tokens, each the next of a fixed random
// permutation-like rule of the vocabulary with a little noise, so a model can learn it and its
// loss falls (next = (a * token + b) mod vocab on most tokens). Inputs tokens[0..seq) and targets
// (the sequence shifted by one).
void corpus_sequence(int vocab, int seq, std::uint64_t index, std::int32_t* tokens, std::int32_t* targets);

}  // namespace ftplan::exec::decoder
