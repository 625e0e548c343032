#include "decoder.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/error.hpp"

namespace ftplan::exec::decoder {

const char* to_string(Proj p) {
  static constexpr const char* kNames[kProjs] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return kNames[static_cast<int>(p)];
}

bool Shape::lora_on(Proj p) const {
  return lora_rank > 0 && std::find(lora_targets.begin(), lora_targets.end(), p) != lora_targets.end();
}

Shape shape_of(const model::ModelSpec& m, std::string& why) {
  Shape s;
  why.clear();
  const auto refuse = [&](const std::string& what) {
    if (why.empty()) why = what;
  };
  if (m.architecture != model::Architecture::decoder) refuse("not a decoder-only model");
  if (m.is_moe()) refuse("a mixture of experts");
  if (m.norm != model::NormKind::rmsnorm) refuse("its norm is not RMSNorm");
  if (m.bias != model::BiasKind::none) refuse("its projections have biases");
  if (m.positional != model::Positional::rope || m.rope_fraction != 1.0) refuse("its positions are not full RoPE");
  if (m.ffn_kind != model::FfnKind::swiglu) refuse("its MLP is not SwiGLU");
  if (m.attention.sliding_window > 0 || m.attention.logit_softcap > 0 || m.final_logit_softcap > 0)
    refuse("sliding-window attention or logit softcaps");
  if (m.parallel_residual || m.embedding_norm || !m.final_norm || m.norms_per_layer != 2 || m.lm_head_bias)
    refuse("its block is not Llama's (parallel residual, extra norms or a head bias)");
  if (m.heads <= 0 || m.kv_heads_or_default() <= 0 || m.heads % m.kv_heads_or_default() != 0)
    refuse("its query heads are not a multiple of its key/value heads");
  if (m.head_dim_or_default() % 2 != 0) refuse("an odd head dimension (RoPE rotates pairs)");
  s.hidden = static_cast<int>(m.hidden);
  s.layers = m.layers;
  s.heads = m.heads;
  s.kv_heads = m.kv_heads_or_default();
  s.head_dim = m.head_dim_or_default();
  s.ffn = static_cast<int>(m.ffn);
  s.vocab = static_cast<int>(m.vocab);
  s.tied_embeddings = m.tied_embeddings;
  return s;
}

Layout layout_of(const Shape& s) {
  Layout l;
  const std::int64_t h = s.hidden, q = s.q_dim(), kv = s.kv_dim(), f = s.ffn;
  const std::int64_t in[kProjs] = {h, h, h, q, h, h, f}, out[kProjs] = {q, kv, kv, h, f, f, h};
  l.embedding = 0;
  l.block_begin = std::int64_t{s.vocab} * h;
  std::int64_t at = 0;
  l.norm_in = at;
  at += h;
  for (int p = 0; p < kProjs; ++p) {
    if (p == static_cast<int>(Proj::gate)) {  // the post-attention norm sits between o and gate
      l.norm_post = at;
      at += h;
    }
    l.proj[p] = at;
    l.proj_in[p] = in[p];
    l.proj_out[p] = out[p];
    at += in[p] * out[p];
  }
  l.block_size = at;
  l.final_norm = l.block_begin + s.layers * l.block_size;
  l.head = l.final_norm + h;
  l.base_size = l.head + (s.tied_embeddings ? 0 : h * s.vocab);
  std::int64_t a = 0;
  for (int p = 0; p < kProjs; ++p) {
    l.adapter[p] = -1;
    if (!s.lora_on(static_cast<Proj>(p))) continue;
    l.adapter[p] = a;
    a += s.lora_rank * (in[p] + out[p]);
  }
  l.adapter_block_size = a;
  l.adapter_size = a * s.layers;
  return l;
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

double unit_uniform(std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-52 - 1.0; }

namespace {

template <class T>
void fill_uniform(T* out, std::int64_t n, std::uint64_t seed, std::int64_t first_index, double bound) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(bound *
                            unit_uniform(splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(first_index + i)))));
}

template <class T>
using Map = Eigen::Map<Mat<T>>;
template <class T>
using CMap = Eigen::Map<const Mat<T>>;

// RMSNorm (Zhang and Sennrich 2019; LlamaRMSNorm): y = x / sqrt(mean(x^2) + eps) * g. Keeps 1/rms.
template <class T>
void rms_norm(const Mat<T>& x, const T* g, T eps, Mat<T>& y, std::vector<T>& r) {
  const Eigen::Index rows = x.rows(), n = x.cols();
  y.resize(rows, n);
  r.resize(static_cast<std::size_t>(rows));
  const Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>> gain(g, n);
  for (Eigen::Index t = 0; t < rows; ++t) {
    const T inv = T(1) / std::sqrt(x.row(t).squaredNorm() / static_cast<T>(n) + eps);
    r[static_cast<std::size_t>(t)] = inv;
    y.row(t) = (x.row(t).array() * inv * gain).matrix();
  }
}

// Its backward: dg += sum_t dy x r; dx += r dy g - x r^3 mean(dy g x).
template <class T>
void rms_norm_back(const Mat<T>& x, const T* g, const std::vector<T>& r, const Mat<T>& dy, Mat<T>& dx, T* dg) {
  const Eigen::Index rows = x.rows(), n = x.cols();
  const Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>> gain(g, n);
  for (Eigen::Index t = 0; t < rows; ++t) {
    const T inv = r[static_cast<std::size_t>(t)];
    const Eigen::Array<T, 1, Eigen::Dynamic> dxhat = dy.row(t).array() * gain;
    if (dg) {
      Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>> dgain(dg, n);
      dgain += dy.row(t).array() * x.row(t).array() * inv;
    }
    const T dot = (dxhat * x.row(t).array()).sum() / static_cast<T>(n);
    dx.row(t).array() += inv * dxhat - x.row(t).array() * (inv * inv * inv * dot);
  }
}

}  // namespace

template <class T>
void init_base(const Shape& s, std::uint64_t seed, T* base) {
  const Layout l = layout_of(s);
  fill_uniform(base + l.embedding, l.block_begin, seed, l.embedding, 1.0);
  for (int layer = 0; layer < s.layers; ++layer) {
    T* b = base + l.block(layer);
    std::fill(b + l.norm_in, b + l.norm_in + s.hidden, T(1));
    std::fill(b + l.norm_post, b + l.norm_post + s.hidden, T(1));
    for (int p = 0; p < kProjs; ++p)
      fill_uniform(b + l.proj[p], l.proj_in[p] * l.proj_out[p], seed, l.block(layer) + l.proj[p],
                   1.0 / std::sqrt(static_cast<double>(l.proj_in[p])));
  }
  std::fill(base + l.final_norm, base + l.final_norm + s.hidden, T(1));
  if (!s.tied_embeddings)
    fill_uniform(base + l.head, l.base_size - l.head, seed, l.head, 1.0 / std::sqrt(static_cast<double>(s.hidden)));
}

template <class T>
void init_adapters(const Shape& s, std::uint64_t seed, T* adapters, bool nonzero_b) {
  const Layout l = layout_of(s);
  const std::uint64_t adapter_seed = splitmix64(seed ^ 0xA5A5A5A5ULL);
  for (int layer = 0; layer < s.layers; ++layer)
    for (int p = 0; p < kProjs; ++p) {
      if (l.adapter[p] < 0) continue;
      const std::int64_t at = layer * l.adapter_block_size + l.adapter[p];
      const std::int64_t a_size = l.proj_in[p] * s.lora_rank, b_size = s.lora_rank * l.proj_out[p];
      fill_uniform(adapters + at, a_size, adapter_seed, at, 1.0 / std::sqrt(static_cast<double>(l.proj_in[p])));
      if (nonzero_b)
        fill_uniform(adapters + at + a_size, b_size, adapter_seed, at + a_size, 0.5);
      else
        std::fill(adapters + at + a_size, adapters + at + a_size + b_size, T(0));
    }
}

template <class T>
void BlockCache<T>::keep_input_only() {
  for (Mat<T>* m : {&xn, &q, &k, &v, &probs, &o, &h1, &hn, &gate, &up, &act}) m->resize(0, 0);
  for (auto& m : lora_xa) m.resize(0, 0);
  r_in.clear();
  r_post.clear();
}

template <class T>
Block<T>::Block(const Shape& s, int batch, int seq) : s_(s), l_(layout_of(s)), batch_(batch), seq_(seq) {
  FTPLAN_ASSERT(batch >= 1 && seq >= 1 && s.head_dim % 2 == 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0,
                "a block needs tokens and Llama's head shapes");
  // RoPE's angles (Su et al. 2021, RoFormer; Hugging Face's LlamaRotaryEmbedding): position p,
  // pair i of head_dim/2 turns by p * theta^(-2i / head_dim), computed in double.
  const int half = s.head_dim / 2;
  cos_.resize(static_cast<std::size_t>(seq) * half);
  sin_.resize(cos_.size());
  for (int p = 0; p < seq; ++p)
    for (int i = 0; i < half; ++i) {
      const double angle = p * std::pow(s.rope_theta, -2.0 * i / s.head_dim);
      cos_[static_cast<std::size_t>(p * half + i)] = static_cast<T>(std::cos(angle));
      sin_[static_cast<std::size_t>(p * half + i)] = static_cast<T>(std::sin(angle));
    }
}

template <class T>
void Block<T>::project(Proj p, const T* w, const T* a, const Mat<T>& x, Mat<T>& y, Mat<T>& xa) const {
  const int i = static_cast<int>(p);
  const CMap<T> W(w + l_.proj[i], l_.proj_in[i], l_.proj_out[i]);
  y.noalias() = x * W;
  if (l_.adapter[i] < 0 || !a) return;
  // LoRA (Hu et al. 2021; PEFT's Linear.forward): y += (alpha / r) (x A) B.
  const Eigen::Index r = s_.lora_rank;
  const CMap<T> A(a + l_.adapter[i], l_.proj_in[i], r), B(a + l_.adapter[i] + l_.proj_in[i] * r, r, l_.proj_out[i]);
  xa.noalias() = x * A;
  y.noalias() += (static_cast<T>(s_.lora_alpha / s_.lora_rank) * xa) * B;
}

template <class T>
void Block<T>::project_back(Proj p, const T* w, const T* a, const Mat<T>& x, const Mat<T>& xa, const Mat<T>& dy,
                            Mat<T>& dx, T* dw, T* da) const {
  const int i = static_cast<int>(p);
  const CMap<T> W(w + l_.proj[i], l_.proj_in[i], l_.proj_out[i]);
  dx.noalias() += dy * W.transpose();
  if (dw) {
    Map<T> dW(dw + l_.proj[i], l_.proj_in[i], l_.proj_out[i]);
    dW.noalias() += x.transpose() * dy;
  }
  if (l_.adapter[i] < 0 || !a) return;
  const Eigen::Index r = s_.lora_rank;
  const T scale = static_cast<T>(s_.lora_alpha / s_.lora_rank);
  const CMap<T> A(a + l_.adapter[i], l_.proj_in[i], r), B(a + l_.adapter[i] + l_.proj_in[i] * r, r, l_.proj_out[i]);
  const Mat<T> dxa = scale * (dy * B.transpose());  // d(x A)
  if (da) {
    Map<T> dA(da + l_.adapter[i], l_.proj_in[i], r), dB(da + l_.adapter[i] + l_.proj_in[i] * r, r, l_.proj_out[i]);
    dB.noalias() += scale * (xa.transpose() * dy);
    dA.noalias() += x.transpose() * dxa;
  }
  dx.noalias() += dxa * A.transpose();
}

// rotate_half RoPE: (x1, x2) of each head's halves -> (x1 cos - x2 sin, x2 cos + x1 sin); the
// inverse (the backward's) turns the other way.
template <class T>
void Block<T>::rope(Mat<T>& m, int heads, bool inverse) const {
  const int half = s_.head_dim / 2;
  for (Eigen::Index t = 0; t < m.rows(); ++t) {
    const int p = static_cast<int>(t % seq_);
    const T* c = cos_.data() + static_cast<std::ptrdiff_t>(p) * half;
    const T* sn = sin_.data() + static_cast<std::ptrdiff_t>(p) * half;
    for (int h = 0; h < heads; ++h) {
      T* x = m.row(t).data() + static_cast<std::ptrdiff_t>(h) * s_.head_dim;
      for (int i = 0; i < half; ++i) {
        const T x1 = x[i], x2 = x[i + half], si = inverse ? -sn[i] : sn[i];
        x[i] = x1 * c[i] - x2 * si;
        x[i + half] = x2 * c[i] + x1 * si;
      }
    }
  }
}

template <class T>
void Block<T>::norm_in(const T* w, BlockCache<T>& c) const {
  rms_norm(c.x, w + l_.norm_in, static_cast<T>(s_.norm_eps), c.xn, c.r_in);
}

template <class T>
void Block<T>::qkv(const T* w, const T* a, BlockCache<T>& c) const {
  project(Proj::q, w, a, c.xn, c.q, c.lora_xa[static_cast<int>(Proj::q)]);
  project(Proj::k, w, a, c.xn, c.k, c.lora_xa[static_cast<int>(Proj::k)]);
  project(Proj::v, w, a, c.xn, c.v, c.lora_xa[static_cast<int>(Proj::v)]);
  rope(c.q, s_.heads, false);
  rope(c.k, s_.kv_heads, false);
}

// Causal scaled dot-product attention per sequence and head, query head h reading key/value head
// h / (heads / kv_heads) (repeat_kv): P = softmax(q k^T / sqrt(d)) over keys j <= i, o = P v.
template <class T>
void Block<T>::attention(BlockCache<T>& c) const {
  const int d = s_.head_dim, group = s_.heads / s_.kv_heads;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  c.probs.setZero(static_cast<Eigen::Index>(batch_) * s_.heads * seq_, seq_);
  c.o.setZero(c.q.rows(), s_.q_dim());
  for (int b = 0; b < batch_; ++b)
    for (int h = 0; h < s_.heads; ++h) {
      const int g = h / group;
      const auto q = c.q.block(static_cast<Eigen::Index>(b) * seq_, h * d, seq_, d);
      const auto k = c.k.block(static_cast<Eigen::Index>(b) * seq_, g * d, seq_, d);
      const auto v = c.v.block(static_cast<Eigen::Index>(b) * seq_, g * d, seq_, d);
      auto P = c.probs.block((static_cast<Eigen::Index>(b) * s_.heads + h) * seq_, 0, seq_, seq_);
      P.noalias() = scale * (q * k.transpose());
      for (int i = 0; i < seq_; ++i) {
        auto row = P.row(i).head(i + 1);
        const T top = row.maxCoeff();
        row = (row.array() - top).exp().matrix();
        row /= row.sum();
        P.row(i).tail(seq_ - i - 1).setZero();
      }
      c.o.block(static_cast<Eigen::Index>(b) * seq_, h * d, seq_, d).noalias() = P * v;
    }
}

template <class T>
void Block<T>::attn_out(const T* w, const T* a, BlockCache<T>& c) const {
  Mat<T> y;
  project(Proj::o, w, a, c.o, y, c.lora_xa[static_cast<int>(Proj::o)]);
  c.h1 = c.x + y;
  rms_norm(c.h1, w + l_.norm_post, static_cast<T>(s_.norm_eps), c.hn, c.r_post);
}

template <class T>
void Block<T>::mlp_in(const T* w, const T* a, BlockCache<T>& c) const {
  project(Proj::gate, w, a, c.hn, c.gate, c.lora_xa[static_cast<int>(Proj::gate)]);
  project(Proj::up, w, a, c.hn, c.up, c.lora_xa[static_cast<int>(Proj::up)]);
}

// SwiGLU (Shazeer 2020): silu(gate) * up, silu(x) = x sigmoid(x).
template <class T>
void Block<T>::activation(BlockCache<T>& c) const {
  c.act = (c.gate.array() / ((-c.gate.array()).exp() + T(1)) * c.up.array()).matrix();
}

template <class T>
void Block<T>::mlp_out(const T* w, const T* a, BlockCache<T>& c, Mat<T>& out) const {
  project(Proj::down, w, a, c.act, out, c.lora_xa[static_cast<int>(Proj::down)]);
  out += c.h1;
}

template <class T>
void Block<T>::forward(const T* w, const T* a, BlockCache<T>& c, Mat<T>& out) const {
  norm_in(w, c);
  qkv(w, a, c);
  attention(c);
  attn_out(w, a, c);
  mlp_in(w, a, c);
  activation(c);
  mlp_out(w, a, c, out);
}

// The whole forward again, its output dropped, as torch.utils.checkpoint reruns the block's
// function (the last projection too: LoRA's x A of down_proj is among what the backward reads).
template <class T>
void Block<T>::recompute(const T* w, const T* a, BlockCache<T>& c) const {
  Mat<T> dropped;
  forward(w, a, c, dropped);
}

template <class T>
void Block<T>::backward(const T* w, const T* a, const BlockCache<T>& c, const Mat<T>& dout, Mat<T>& dx, T* dw,
                        T* da) const {
  const auto xa = [&](Proj p) -> const Mat<T>& { return c.lora_xa[static_cast<int>(p)]; };
  const Eigen::Index tokens = c.x.rows();
  // mlp_out: out = h1 + act Wdown.
  Mat<T> dact = Mat<T>::Zero(tokens, s_.ffn);
  project_back(Proj::down, w, a, c.act, xa(Proj::down), dout, dact, dw, da);
  // activation: d gate = d act * up * s (1 + gate (1 - s)), d up = d act * silu(gate).
  const auto sig = (T(1) / ((-c.gate.array()).exp() + T(1)));
  const Mat<T> dgate = (dact.array() * c.up.array() * sig * (T(1) + c.gate.array() * (T(1) - sig))).matrix();
  const Mat<T> dup = (dact.array() * c.gate.array() * sig).matrix();
  // mlp_in.
  Mat<T> dhn = Mat<T>::Zero(tokens, s_.hidden);
  project_back(Proj::gate, w, a, c.hn, xa(Proj::gate), dgate, dhn, dw, da);
  project_back(Proj::up, w, a, c.hn, xa(Proj::up), dup, dhn, dw, da);
  // The post norm and the residual: dh1 = dout + norm'(dhn).
  Mat<T> dh1 = dout;
  rms_norm_back(c.h1, w + l_.norm_post, c.r_post, dhn, dh1, dw ? dw + l_.norm_post : nullptr);
  // attn_out: h1 = x + o Wo.
  Mat<T> dout_o = Mat<T>::Zero(tokens, s_.q_dim());
  project_back(Proj::o, w, a, c.o, xa(Proj::o), dh1, dout_o, dw, da);
  // attention: dP = do v^T; dv = P^T do; dS = P (dP - rowsum(P dP)); dq = dS k / sqrt(d); dk = dS^T q / sqrt(d).
  const int d = s_.head_dim, group = s_.heads / s_.kv_heads;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  Mat<T> dq = Mat<T>::Zero(tokens, s_.q_dim()), dk = Mat<T>::Zero(tokens, s_.kv_dim()),
         dv = Mat<T>::Zero(tokens, s_.kv_dim());
  for (int b = 0; b < batch_; ++b)
    for (int h = 0; h < s_.heads; ++h) {
      const int g = h / group;
      const Eigen::Index r0 = static_cast<Eigen::Index>(b) * seq_;
      const auto P = c.probs.block((static_cast<Eigen::Index>(b) * s_.heads + h) * seq_, 0, seq_, seq_);
      const auto dO = dout_o.block(r0, h * d, seq_, d);
      const Mat<T> dP = dO * c.v.block(r0, g * d, seq_, d).transpose();
      dv.block(r0, g * d, seq_, d).noalias() += P.transpose() * dO;
      Mat<T> dS = (P.array() * (dP.array().colwise() - (P.array() * dP.array()).rowwise().sum())).matrix();
      dS *= scale;
      dq.block(r0, h * d, seq_, d).noalias() += dS * c.k.block(r0, g * d, seq_, d);
      dk.block(r0, g * d, seq_, d).noalias() += dS.transpose() * c.q.block(r0, h * d, seq_, d);
    }
  rope(dq, s_.heads, true);
  rope(dk, s_.kv_heads, true);
  // qkv.
  Mat<T> dxn = Mat<T>::Zero(tokens, s_.hidden);
  project_back(Proj::q, w, a, c.xn, xa(Proj::q), dq, dxn, dw, da);
  project_back(Proj::k, w, a, c.xn, xa(Proj::k), dk, dxn, dw, da);
  project_back(Proj::v, w, a, c.xn, xa(Proj::v), dv, dxn, dw, da);
  // The input norm and the residual: dx = dh1 + norm'(dxn).
  dx = dh1;
  rms_norm_back(c.x, w + l_.norm_in, c.r_in, dxn, dx, dw ? dw + l_.norm_in : nullptr);
}

template <class T>
void embed(const Shape& s, const T* embedding, const std::int32_t* tokens, std::int64_t n, Mat<T>& x) {
  const CMap<T> E(embedding, s.vocab, s.hidden);
  x.resize(n, s.hidden);
  for (Eigen::Index t = 0; t < n; ++t) {
    FTPLAN_ASSERT(tokens[t] >= 0 && tokens[t] < s.vocab, "a token outside the vocabulary");
    x.row(t) = E.row(tokens[t]);
  }
}

template <class T>
void embed_backward(const Shape& s, const std::int32_t* tokens, const Mat<T>& dx, T* embedding_grad) {
  Map<T> dE(embedding_grad, s.vocab, s.hidden);
  for (Eigen::Index t = 0; t < dx.rows(); ++t) dE.row(tokens[t]) += dx.row(t);
}

template <class T>
void head_forward(const Shape& s, const T* final_norm, const T* head, HeadCache<T>& c) {
  rms_norm(c.x, final_norm, static_cast<T>(s.norm_eps), c.hf, c.rf);
  // Tied: `head` is the embedding [vocab x h], used transposed.
  c.logits = s.tied_embeddings ? Mat<T>(c.hf * CMap<T>(head, s.vocab, s.hidden).transpose())
                               : Mat<T>(c.hf * CMap<T>(head, s.hidden, s.vocab));
}

template <class T>
T loss(const Shape& s, const std::int32_t* targets, T grad_scale, HeadCache<T>& c) {
  const Eigen::Index n = c.logits.rows();
  Eigen::Index counted = 0;
  for (Eigen::Index t = 0; t < n; ++t) counted += targets[t] >= 0 ? 1 : 0;
  T total = 0;
  for (Eigen::Index t = 0; t < n; ++t) {
    auto row = c.logits.row(t);
    const T top = row.maxCoeff();
    row = (row.array() - top).exp().matrix();
    const T sum = row.sum();
    row /= sum;  // now the softmax, for the backward
    if (targets[t] < 0) {
      row.setZero();
      continue;
    }
    FTPLAN_ASSERT(targets[t] < s.vocab, "a target outside the vocabulary");
    total += -std::log(row(targets[t]));
    row(targets[t]) -= T(1);  // d loss / d logits = softmax - onehot (over the counted tokens)
  }
  if (counted == 0) {
    c.logits.setZero();
    return T(0);
  }
  c.logits *= grad_scale / static_cast<T>(counted);  // d (scaled mean loss) / d logits
  return total / static_cast<T>(counted);
}

template <class T>
void head_backward(const Shape& s, const T* final_norm, const T* head, const HeadCache<T>& c, Mat<T>& dx,
                   T* final_norm_grad, T* head_grad) {
  Mat<T> dhf;
  if (s.tied_embeddings) {
    dhf.noalias() = c.logits * CMap<T>(head, s.vocab, s.hidden);
    if (head_grad) Map<T>(head_grad, s.vocab, s.hidden).noalias() += c.logits.transpose() * c.hf;
  } else {
    dhf.noalias() = c.logits * CMap<T>(head, s.hidden, s.vocab).transpose();
    if (head_grad) Map<T>(head_grad, s.hidden, s.vocab).noalias() += c.hf.transpose() * c.logits;
  }
  dx = Mat<T>::Zero(c.x.rows(), s.hidden);
  rms_norm_back(c.x, final_norm, c.rf, dhf, dx, final_norm_grad);
}

template <class T>
T loss_and_gradients(const Shape& s, const T* base, const T* adapters, const std::int32_t* tokens,
                     const std::int32_t* targets, int batch, int seq, T* base_grad, T* adapter_grad, bool recompute,
                     T grad_scale) {
  const Layout l = layout_of(s);
  const Block<T> block(s, batch, seq);
  const Eigen::Index n = static_cast<Eigen::Index>(batch) * seq;
  Mat<T> x;
  embed(s, base + l.embedding, tokens, n, x);
  std::vector<BlockCache<T>> caches(static_cast<std::size_t>(s.layers));
  const auto adapters_of = [&](int layer) { return adapters ? adapters + layer * l.adapter_block_size : nullptr; };
  for (int layer = 0; layer < s.layers; ++layer) {
    BlockCache<T>& c = caches[static_cast<std::size_t>(layer)];
    c.x = x;
    block.forward(base + l.block(layer), adapters_of(layer), c, x);
    if (recompute) c.keep_input_only();
  }
  // Final norm, head, cross-entropy (mean over the counted tokens).
  const T* head = base + (s.tied_embeddings ? l.embedding : l.head);
  HeadCache<T> hc;
  hc.x = std::move(x);
  head_forward(s, base + l.final_norm, head, hc);
  const T mean = loss(s, targets, grad_scale, hc);
  if (!base_grad && !adapter_grad) return mean;
  Mat<T> dx;
  head_backward(s, base + l.final_norm, head, hc, dx, base_grad ? base_grad + l.final_norm : nullptr,
                base_grad ? base_grad + (s.tied_embeddings ? l.embedding : l.head) : nullptr);
  for (int layer = s.layers - 1; layer >= 0; --layer) {
    BlockCache<T>& c = caches[static_cast<std::size_t>(layer)];
    if (recompute) block.recompute(base + l.block(layer), adapters_of(layer), c);
    Mat<T> dprev;
    block.backward(base + l.block(layer), adapters_of(layer), c, dx, dprev,
                   base_grad ? base_grad + l.block(layer) : nullptr,
                   adapter_grad ? adapter_grad + layer * l.adapter_block_size : nullptr);
    dx.swap(dprev);
    c = BlockCache<T>{};
  }
  if (base_grad) embed_backward(s, tokens, dx, base_grad + l.embedding);
  return mean;
}

void corpus_sequence(int vocab, int seq, std::uint64_t index, std::int32_t* tokens, std::int32_t* targets) {
  FTPLAN_ASSERT(vocab >= 2 && seq >= 1, "a corpus needs two tokens and a sequence");
  // A rule a small model learns in a few steps: next = (5 * token + 3) mod vocab, one token in 8
  // drawn at random instead (so the loss does not reach zero).
  std::uint64_t h = splitmix64(index * 0x2545F4914F6CDD1DULL + 1);
  std::int64_t token = static_cast<std::int64_t>(h % static_cast<std::uint64_t>(vocab));
  for (int i = 0; i <= seq; ++i) {
    if (i < seq) tokens[i] = static_cast<std::int32_t>(token);
    if (i > 0) targets[i - 1] = static_cast<std::int32_t>(token);
    h = splitmix64(h);
    token = (h & 7) == 0 ? static_cast<std::int64_t>((h >> 8) % static_cast<std::uint64_t>(vocab))
                         : (5 * token + 3) % vocab;
  }
}

#define FTPLAN_DECODER_PIECES(T)                                                              \
  template struct HeadCache<T>;                                                               \
  template void embed<T>(const Shape&, const T*, const std::int32_t*, std::int64_t, Mat<T>&); \
  template void embed_backward<T>(const Shape&, const std::int32_t*, const Mat<T>&, T*);      \
  template void head_forward<T>(const Shape&, const T*, const T*, HeadCache<T>&);             \
  template T loss<T>(const Shape&, const std::int32_t*, T, HeadCache<T>&);                    \
  template void head_backward<T>(const Shape&, const T*, const T*, const HeadCache<T>&, Mat<T>&, T*, T*);
FTPLAN_DECODER_PIECES(float)
FTPLAN_DECODER_PIECES(double)
#undef FTPLAN_DECODER_PIECES
template void init_base<float>(const Shape&, std::uint64_t, float*);
template void init_base<double>(const Shape&, std::uint64_t, double*);
template void init_adapters<float>(const Shape&, std::uint64_t, float*, bool);
template void init_adapters<double>(const Shape&, std::uint64_t, double*, bool);
template struct BlockCache<float>;
template struct BlockCache<double>;
template class Block<float>;
template class Block<double>;
template float loss_and_gradients<float>(const Shape&, const float*, const float*, const std::int32_t*,
                                         const std::int32_t*, int, int, float*, float*, bool, float);
template double loss_and_gradients<double>(const Shape&, const double*, const double*, const std::int32_t*,
                                           const std::int32_t*, int, int, double*, double*, bool, double);

}  // namespace ftplan::exec::decoder
