// The executor's real training (issue 40, "train for real"): the step IR's compute ops run the
// decoder's math (decoder.hpp) on the 16-bit parameters the executor has put where the op reads
// them, over micro-batches of the synthetic corpus, accumulating the fp32 gradients the IR's
// gradient shares then carry to the optimizer. The Trainer knows the model and the IR's op names;
// the executor knows where the parameters are (its tiers) and hands them over per op.
//
// Which op runs what (schedule/layer_ops.cpp names them; "fwd L3 m1 qkv"):
// - forward, layer l: "norms/rope/residual" (the embedding lookup first, at layer 0; then the
//   input norm), "qkv", "attention", "attn_out", "mlp_in", "activation", "mlp_out": the Block
//   passes of the same names;
// - recompute, layer l: the first of its ops reruns the block's forward from its kept input
//   (Block::recompute);
// - backward, layer l: the first of its block ops runs the block's whole backward (and at layer 0
//   the embedding's), so the layer's gradients are complete from that op on (run() says so, and
//   the executor writes the layer's gradient share then);
// - "fwd head", "loss", "bwd head": the final norm and LM head, the cross-entropy, their backward.
// Any other op (casts, copies, the gradient upcast, LoRA's "lora adapters", whose math the Block
// passes include) is not the Trainer's. Under LoRA the base is frozen: only the adapters train.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "decoder.hpp"
#include "plan/plan.hpp"
#include "runtime/kernels.hpp"
#include "schedule/step_ir.hpp"

namespace ftplan::exec {

struct Training {
  decoder::Shape shape;
  int batch = 1;  // sequences per micro-batch
  int seq = 1;
  std::uint64_t seed = 1;       // the parameters' first values and the corpus
  double learning_rate = 1e-3;  // AdamW's (its other settings: runtime::AdamW's defaults)
};

// What `plan` trains of `model` (its micro-batch and sequence, LoRA's rank, alpha and targets),
// or why the decoder cannot train it (`why`; then the rest is unset).
Training training_of(const model::ModelSpec& model, const plan::Plan& plan, std::string& why);

class Trainer {
 public:
  // `micro_batches` of the step; `recomputed`: the layers whose activations the IR recomputes.
  Trainer(const Training& t, int micro_batches, std::vector<bool> recomputed);

  const decoder::Layout& layout() const { return layout_; }
  bool lora() const { return t_.shape.lora_rank > 0; }
  // The trainable parameters' count (the base's, or LoRA's adapters') and the fp32 master
  // weights' first values of trainable parameters [begin, begin + k) (decoder::init_base, or
  // init_adapters: B zero); the frozen base's first values (LoRA) in `base`.
  std::int64_t trainable() const { return static_cast<std::int64_t>(init_.size()); }
  void initial(float* out, std::size_t begin, std::size_t k) const;
  void initial_base(float* base) const;

  // Whether `op` is one of the decoder's passes (above).
  bool runs(const schedule::Op& op) const;
  // The 16-bit parameters [first, first + count) in Layout order, where the op may read them.
  using Params = std::function<const std::uint16_t*(std::int64_t first, std::int64_t count)>;
  // Runs op's part of step `step` (0-based; it picks the corpus's sequences). `adapters`: LoRA's
  // 16-bit adapters [first, first + count) (decoder::Layout's adapter offsets); unused without.
  // Returns whether it ran a layer's whole backward (whose gradients are then complete for this
  // micro-batch).
  bool run(const schedule::Op& op, int step, const Params& params, const Params& adapters);

  void begin_step();
  double step_loss() const { return loss_; }  // the mean over the step's micro-batches
  const std::vector<float>& gradients() const { return grad_; }

 private:
  enum class Part { none, norm_in, qkv, attention, attn_out, mlp_in, activation, mlp_out, head, loss };
  static Part part_of(const schedule::Op& op);
  // Parameters [first, first + count) widened to fp32 (a GPU's kernels read bf16 and compute in
  // fp32): read where `params` says (`fresh`: the first op of a layer's pass, which reads the
  // buffer the step fetched for it), else those the pass's first op widened, when they are these.
  struct Widened {
    std::vector<float> values;
    std::int64_t first = -1, count = 0;
  };
  const float* widen(std::int64_t first, std::int64_t count, const Params& params, Widened& into, bool fresh) const;
  struct Micro {
    std::vector<std::int32_t> tokens, targets;
    decoder::Mat<float> x, dx;  // the forward's running activation; the backward's running gradient
    std::vector<decoder::BlockCache<float>> caches;
    decoder::HeadCache<float> head;
    std::vector<char> recomputed, backward;  // per layer: done this step
  };
  Training t_;
  decoder::Layout layout_;
  decoder::Block<float> block_;
  int micro_batches_;
  std::vector<bool> recompute_;
  std::vector<float> init_;  // the master weights' first values (the base's, or LoRA's adapters')
  std::vector<float> grad_;  // of the trainable parameters
  std::vector<Micro> micro_;
  Widened wide_, wide_norm_, wide_adapters_;  // parameters widened for the pass running now
  double loss_ = 0;
};

}  // namespace ftplan::exec
