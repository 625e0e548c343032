#include "trainer.hpp"
#include "common/error.hpp"

#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

namespace ftplan::exec {

using schedule::Op;
using schedule::OpKind;
using schedule::Pass;

using decoder::from_bf16;

Training training_of(const model::ModelSpec& model, const plan::Plan& plan, std::string& why) {
  Training t;
  t.shape = decoder::shape_of(model, why);
  if (!why.empty()) return {};
  const plan::Job& job = plan.job;
  if (job.method == plan::Method::qlora) {
    why = "QLoRA's quantized base is not the decoder's bf16 base";
    return {};
  }
  if (job.method == plan::Method::lora) {
    if (job.lora.dropout > 0) {
      why = "LoRA dropout (the decoder's adapters have none)";
      return {};
    }
    t.shape.lora_rank = job.lora.rank;
    t.shape.lora_alpha = job.lora.alpha;
    t.shape.lora_targets.clear();
    for (const std::string& name : job.lora.targets) {
      bool known = false;
      for (int p = 0; p < decoder::kProjs; ++p)
        if (name + "_proj" == decoder::to_string(static_cast<decoder::Proj>(p))) {  // the plan's canonical names
          t.shape.lora_targets.push_back(static_cast<decoder::Proj>(p));
          known = true;
        }
      if (!known) {
        why = "LoRA target '" + name + "' is none of the decoder's projections";
        return {};
      }
    }
  }
  t.batch = static_cast<int>(job.micro_batch);
  t.seq = static_cast<int>(job.seq_len);
  return t;
}

Trainer::Trainer(const Training& t, int micro_batches, std::vector<bool> recomputed)
    : t_(t),
      layout_(decoder::layout_of(t.shape)),
      block_(t.shape, t.batch, t.seq),
      micro_batches_(std::max(1, micro_batches)),
      recompute_(std::move(recomputed)) {
  recompute_.resize(static_cast<std::size_t>(t.shape.layers), false);
  if (lora()) {
    init_.resize(static_cast<std::size_t>(layout_.adapter_size));
    decoder::init_adapters(t.shape, t.seed, init_.data());
  } else {
    init_.resize(static_cast<std::size_t>(layout_.base_size));
    decoder::init_base(t.shape, t.seed, init_.data());
  }
  grad_.assign(init_.size(), 0.0f);
  micro_.resize(static_cast<std::size_t>(micro_batches_));
  const auto n = static_cast<std::size_t>(t.batch) * static_cast<std::size_t>(t.seq);
  for (Micro& m : micro_) {
    m.tokens.resize(n);
    m.targets.resize(n);
    m.caches.resize(static_cast<std::size_t>(t.shape.layers));
  }
}

void Trainer::initial(float* out, std::size_t begin, std::size_t k) const {
  std::copy_n(init_.begin() + static_cast<std::ptrdiff_t>(begin), k, out);
}

void Trainer::initial_base(float* base) const { decoder::init_base(t_.shape, t_.seed, base); }

Trainer::Part Trainer::part_of(const Op& op) {
  if (op.kind == OpKind::loss) return Part::loss;
  if (op.kind != OpKind::gemm && op.kind != OpKind::attention && op.kind != OpKind::elementwise) return Part::none;
  if (op.upcasts_gradients) return Part::none;
  if (op.layer < 0)
    return op.kind == OpKind::gemm && op.name.rfind(op.pass == Pass::forward ? "fwd head" : "bwd head", 0) == 0
               ? Part::head
               : Part::none;
  const std::string_view name = op.name;
  static constexpr std::pair<std::string_view, Part> kParts[] = {{" norms/rope/residual", Part::norm_in},
                                                                 {" qkv", Part::qkv},
                                                                 {" attention", Part::attention},
                                                                 {" attn_out", Part::attn_out},
                                                                 {" mlp_in", Part::mlp_in},
                                                                 {" activation", Part::activation},
                                                                 {" mlp_out", Part::mlp_out}};
  for (const auto& [suffix, part] : kParts)
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return part;
  return Part::none;
}

bool Trainer::runs(const Op& op) const { return part_of(op) != Part::none; }

void Trainer::begin_step() {
  std::fill(grad_.begin(), grad_.end(), 0.0f);
  loss_ = 0;
  for (Widened* w : {&wide_, &wide_norm_, &wide_adapters_}) w->first = -1;  // the last step updated them
  for (Micro& m : micro_) {
    m.recomputed.assign(static_cast<std::size_t>(t_.shape.layers), 0);
    m.backward.assign(static_cast<std::size_t>(t_.shape.layers), 0);
  }
}

const float* Trainer::widen(std::int64_t first, std::int64_t count, const Params& params, Widened& into,
                            bool fresh) const {
  if (!fresh && into.first == first && into.count == count) return into.values.data();
  const std::uint16_t* h = params(first, count);
  FTPLAN_ASSERT(h, fmt::format("training: parameters [{}, {}) are not where the op reads them", first, first + count));
  into.values.resize(static_cast<std::size_t>(count));
  for (std::int64_t j = 0; j < count; ++j) into.values[static_cast<std::size_t>(j)] = from_bf16(h[j]);
  into.first = first;
  into.count = count;
  return into.values.data();
}

bool Trainer::run(const Op& op, int step, const Params& params, const Params& adapters) {
  const Part part = part_of(op);
  if (part == Part::none) return false;
  FTPLAN_ASSERT(op.micro >= 0 && op.micro < micro_batches_,
                fmt::format("training: {} is of micro-batch {} of {}", op.name, op.micro, micro_batches_));
  Micro& m = micro_[static_cast<std::size_t>(op.micro)];
  const decoder::Shape& s = t_.shape;
  const std::int64_t tokens = static_cast<std::int64_t>(t_.batch) * t_.seq;
  const std::int64_t head_at = s.tied_embeddings ? layout_.embedding : layout_.head;
  const std::int64_t head_size = static_cast<std::int64_t>(s.hidden) * s.vocab;

  if (part == Part::head || part == Part::loss) {
    if (op.kind == OpKind::loss) {
      loss_ += decoder::loss(s, m.targets.data(), 1.0f / static_cast<float>(micro_batches_), m.head) /
               static_cast<double>(micro_batches_);
      return false;
    }
    const float* norm = widen(layout_.final_norm, s.hidden, params, wide_norm_, true);
    const float* head = widen(head_at, head_size, params, wide_, true);
    if (op.pass == Pass::forward) {
      m.head.x = m.x;
      decoder::head_forward(s, norm, head, m.head);
    } else {
      decoder::head_backward(s, norm, head, m.head, m.dx, lora() ? nullptr : grad_.data() + layout_.final_norm,
                             lora() ? nullptr : grad_.data() + head_at);
    }
    return false;
  }

  const int l = op.layer;
  FTPLAN_ASSERT(l < s.layers, fmt::format("training: {} is of layer {} of {}", op.name, l, s.layers));
  decoder::BlockCache<float>& c = m.caches[static_cast<std::size_t>(l)];
  // A layer's forward widens its parameters at its first op ("norms/rope/residual") for the ops
  // after it; its recompute and backward run whole at one op each.
  const bool fresh = op.pass != Pass::forward || part == Part::norm_in;
  const auto w = [&] { return widen(layout_.block(l), layout_.block_size, params, wide_, fresh); };
  // LoRA: the layer's adapters (A then B per target), widened; their gradients' place.
  const std::int64_t adapter_at = static_cast<std::int64_t>(l) * layout_.adapter_block_size;
  const auto a = [&]() -> const float* {
    return lora() ? widen(adapter_at, layout_.adapter_block_size, adapters, wide_adapters_, fresh) : nullptr;
  };
  switch (op.pass) {
    case Pass::forward:
      switch (part) {
        case Part::norm_in:
          if (l == 0) {
            // Sequences step x micro-batches x batch on: each step trains on new ones.
            for (int b = 0; b < t_.batch; ++b)
              decoder::corpus_sequence(s.vocab, t_.seq,
                                       (static_cast<std::uint64_t>(step) * micro_batches_ + op.micro) * t_.batch + b,
                                       m.tokens.data() + static_cast<std::size_t>(b) * t_.seq,
                                       m.targets.data() + static_cast<std::size_t>(b) * t_.seq);
            decoder::embed(s,
                           widen(layout_.embedding, static_cast<std::int64_t>(s.vocab) * s.hidden, params, wide_, true),
                           m.tokens.data(), tokens, m.x);
          }
          c.x = m.x;
          block_.norm_in(w(), c);
          break;
        case Part::qkv: block_.qkv(w(), a(), c); break;
        case Part::attention: block_.attention(c); break;
        case Part::attn_out: block_.attn_out(w(), a(), c); break;
        case Part::mlp_in: block_.mlp_in(w(), a(), c); break;
        case Part::activation: block_.activation(c); break;
        case Part::mlp_out:
          block_.mlp_out(w(), a(), c, m.x);
          if (recompute_[static_cast<std::size_t>(l)]) c.keep_input_only();
          break;
        default: break;
      }
      break;
    case Pass::recompute:
      if (!m.recomputed[static_cast<std::size_t>(l)]) {
        m.recomputed[static_cast<std::size_t>(l)] = 1;
        block_.recompute(w(), a(), c);
      }
      break;
    case Pass::backward:
      if (!m.backward[static_cast<std::size_t>(l)]) {
        m.backward[static_cast<std::size_t>(l)] = 1;
        FTPLAN_ASSERT(!recompute_[static_cast<std::size_t>(l)] || m.recomputed[static_cast<std::size_t>(l)],
                      fmt::format("training: {} before layer {}'s recompute", op.name, l));
        decoder::Mat<float> dprev;
        if (lora()) {
          const float* wa = a();  // widened before the base: both buffers stay valid through the call
          block_.backward(w(), wa, c, m.dx, dprev, nullptr, grad_.data() + adapter_at);
        } else {
          block_.backward(w(), nullptr, c, m.dx, dprev, grad_.data() + layout_.block(l), nullptr);
        }
        m.dx.swap(dprev);
        c = decoder::BlockCache<float>{};
        if (l == 0 && !lora()) decoder::embed_backward(s, m.tokens.data(), m.dx, grad_.data() + layout_.embedding);
        return true;
      }
      break;
    default: break;
  }
  return false;
}

}  // namespace ftplan::exec
