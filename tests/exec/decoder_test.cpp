// The executor's real decoder (exec/decoder.hpp): its gradients against finite differences and
// against PyTorch autograd (tests/exec/decoder_reference.txt, written by decoder_reference.py),
// recompute equal to keeping activations, and a loss that falls when it trains in mixed precision.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "exec/decoder.hpp"
#include "io/model_io.hpp"
#include "model/zoo.hpp"
#include "runtime/kernels.hpp"

using namespace ftplan;
using namespace ftplan::exec::decoder;

namespace {

// The configurations of decoder_reference.py's CONFIGS, with the same tokens.
struct Config {
  Shape shape;
  int batch = 0, seq = 0;
  std::uint64_t seed = 0;
  std::vector<int> ignore;
};

Shape small(int heads, int kv_heads, int head_dim, int ffn, int vocab) {
  Shape s;
  s.hidden = 16;
  s.layers = 2;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.ffn = ffn;
  s.vocab = vocab;
  return s;
}

std::map<std::string, Config> configs() {
  std::map<std::string, Config> c;
  c["full-gqa"] = {small(4, 2, 4, 24, 13), 2, 6, 1, {3}};
  Config tied{small(2, 2, 8, 20, 11), 3, 5, 7, {}};
  tied.shape.tied_embeddings = true;
  tied.shape.rope_theta = 500000;
  tied.shape.norm_eps = 1e-6;
  c["tied-mha"] = tied;
  Config lora{small(4, 2, 4, 24, 13), 2, 6, 3, {0, 7}};
  lora.shape.lora_rank = 2;
  lora.shape.lora_alpha = 4;
  lora.shape.lora_targets = {Proj::q, Proj::k, Proj::v, Proj::o, Proj::gate, Proj::up, Proj::down};
  c["lora-all"] = lora;
  return c;
}

void batch_of(const Config& c, std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) {
  const auto n = static_cast<std::size_t>(c.batch * c.seq);
  tokens.assign(n, 0);
  targets.assign(n, 0);
  for (int b = 0; b < c.batch; ++b)
    corpus_sequence(c.shape.vocab, c.seq, static_cast<std::uint64_t>(b), tokens.data() + b * c.seq,
                    targets.data() + b * c.seq);
  for (int i : c.ignore) targets[static_cast<std::size_t>(i)] = -1;
}

// The named tensors of a flat vector (the reference's names), as [offset, size).
struct Named {
  std::string name;
  std::int64_t at = 0, size = 0;
};
std::vector<Named> base_tensors(const Shape& s) {
  const Layout l = layout_of(s);
  std::vector<Named> out{{"embed", l.embedding, l.block_begin}};
  for (int layer = 0; layer < s.layers; ++layer) {
    const std::string L = "L" + std::to_string(layer) + ".";
    out.push_back({L + "norm_in", l.block(layer) + l.norm_in, s.hidden});
    for (int p = 0; p < kProjs; ++p) {
      if (p == static_cast<int>(Proj::gate)) out.push_back({L + "norm_post", l.block(layer) + l.norm_post, s.hidden});
      out.push_back({L + to_string(static_cast<Proj>(p)), l.block(layer) + l.proj[p], l.proj_in[p] * l.proj_out[p]});
    }
  }
  out.push_back({"final_norm", l.final_norm, s.hidden});
  if (!s.tied_embeddings) out.push_back({"head", l.head, l.base_size - l.head});
  return out;
}
std::vector<Named> adapter_tensors(const Shape& s) {
  const Layout l = layout_of(s);
  std::vector<Named> out;
  for (int layer = 0; layer < s.layers; ++layer)
    for (int p = 0; p < kProjs; ++p) {
      if (l.adapter[p] < 0) continue;
      const std::string name = "L" + std::to_string(layer) + "." + to_string(static_cast<Proj>(p));
      const std::int64_t at = layer * l.adapter_block_size + l.adapter[p], a = l.proj_in[p] * s.lora_rank;
      out.push_back({name + ".lora_A", at, a});
      out.push_back({name + ".lora_B", at + a, s.lora_rank * l.proj_out[p]});
    }
  return out;
}

// decoder_reference.py's probe_vector.
double probe(const std::string& name, std::int64_t i) {
  std::uint64_t seed = 0;
  for (unsigned char ch : name) seed = splitmix64(seed ^ ch);
  return unit_uniform(splitmix64(seed + static_cast<std::uint64_t>(i)));
}

struct Run {
  double loss = 0;
  std::vector<double> base, adapters, base_grad, adapter_grad;
};
Run run(const Config& c, bool recompute = false) {
  const Layout l = layout_of(c.shape);
  Run r;
  r.base.resize(static_cast<std::size_t>(l.base_size));
  r.adapters.resize(static_cast<std::size_t>(l.adapter_size));
  init_base(c.shape, c.seed, r.base.data());
  init_adapters(c.shape, c.seed, r.adapters.data(), true);
  std::vector<std::int32_t> tokens, targets;
  batch_of(c, tokens, targets);
  const bool lora = c.shape.lora_rank > 0;
  r.base_grad.assign(lora ? 0 : r.base.size(), 0.0);
  r.adapter_grad.assign(r.adapters.size(), 0.0);
  r.loss = loss_and_gradients<double>(c.shape, r.base.data(), lora ? r.adapters.data() : nullptr, tokens.data(),
                                      targets.data(), c.batch, c.seq, lora ? nullptr : r.base_grad.data(),
                                      lora ? r.adapter_grad.data() : nullptr, recompute);
  return r;
}

}  // namespace

TEST_CASE("the decoder's layout holds the zoo's parameter count") {
  /* The flat base vector is every parameter once: for the validation matrix's tiny Llama (hidden
   * 256, 4 layers, ffn 1024, vocab 2048, untied) and Llama-3.1-8B the zoo's own count
   * (model::count_params, written apart from this code) is the layout's size.                   */
  const model::Zoo zoo = io::load_zoo(FTPLAN_ZOO_DIR);
  for (const char* name : {"llama-3.1-8b", "llama-3.2-1b"}) {
    CAPTURE(name);
    REQUIRE(zoo.find(name));
    const model::ModelSpec& m = *zoo.find(name);
    std::string why;
    const Shape s = shape_of(m, why);
    CHECK(why.empty());
    CHECK(layout_of(s).base_size == model::count_params(m).total);
  }
  std::string why;
  model::ModelSpec moe = *zoo.find("llama-3.1-8b");
  moe.moe.experts = 8;
  shape_of(moe, why);
  CHECK(why == "a mixture of experts");
}

TEST_CASE("the decoder's gradients equal central differences") {
  /* In double, every parameter p: (L(p + e) - L(p - e)) / 2e with e = 1e-5 has truncation error
   * ~e^2 L''' and rounding ~1e-16 / e: about 1e-10 of a gradient of ~0.1. Every base parameter of
   * the full configurations and every adapter of the LoRA one is checked to 1e-7 absolute.     */
  for (const auto& named : configs()) {
    // Not a structured binding: clang 14 does not let CAPTURE's lambda capture one.
    const std::string& name = named.first;
    const Config& c = named.second;
    CAPTURE(name);
    Run r = run(c);
    const bool lora = c.shape.lora_rank > 0;
    std::vector<double>& x = lora ? r.adapters : r.base;
    const std::vector<double>& g = lora ? r.adapter_grad : r.base_grad;
    std::vector<std::int32_t> tokens, targets;
    batch_of(c, tokens, targets);
    const auto loss = [&] {
      return loss_and_gradients<double>(c.shape, r.base.data(), lora ? r.adapters.data() : nullptr, tokens.data(),
                                        targets.data(), c.batch, c.seq, nullptr, nullptr, false);
    };
    double worst = 0;
    std::size_t worst_at = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double keep = x[i], e = 1e-5;
      x[i] = keep + e;
      const double up = loss();
      x[i] = keep - e;
      const double down = loss();
      x[i] = keep;
      const double diff = std::abs((up - down) / (2 * e) - g[i]);
      if (diff > worst) worst = diff, worst_at = i;
    }
    CAPTURE(worst_at);
    CHECK(worst < 1e-7);
  }
}

TEST_CASE("the decoder agrees with PyTorch autograd") {
  /* decoder_reference.py builds the same model from torch ops (Hugging Face's Llama, PEFT's
   * LoRA), takes float64 autograd gradients, and writes the loss and each tensor's gradient norm
   * and its dot with a fixed vector. Ours, from the hand-written backward, must agree to 1e-10
   * relative (float64 sums in another order).                                                  */
  std::ifstream in(std::string(FTPLAN_SOURCE_DIR) + "/tests/exec/decoder_reference.txt");
  REQUIRE(in);
  std::map<std::string, Run> runs;
  const auto cs = configs();
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string config, what;
    words >> config >> what;
    CAPTURE(line);
    REQUIRE(cs.count(config));
    if (!runs.count(config)) runs[config] = run(cs.at(config));
    const Run& r = runs[config];
    ++lines;
    if (what == "loss") {
      double loss = 0;
      words >> loss;
      CHECK(r.loss == doctest::Approx(loss).epsilon(1e-12));
      continue;
    }
    std::string norm_word, dot_word;
    double norm = 0, dot = 0;
    words >> norm_word >> norm >> dot_word >> dot;
    const Config& c = cs.at(config);
    const bool lora = c.shape.lora_rank > 0;
    const std::vector<double>& g = lora ? r.adapter_grad : r.base_grad;
    bool found = false;
    for (const Named& t : lora ? adapter_tensors(c.shape) : base_tensors(c.shape)) {
      if (t.name != what) continue;
      found = true;
      double sq = 0, d = 0;
      for (std::int64_t i = 0; i < t.size; ++i) {
        const double v = g[static_cast<std::size_t>(t.at + i)];
        sq += v * v;
        d += v * probe(t.name, i);
      }
      CHECK(std::sqrt(sq) == doctest::Approx(norm).epsilon(1e-10));
      CHECK(std::abs(d - dot) <= 1e-10 * norm * std::sqrt(static_cast<double>(t.size)) + 1e-15);
    }
    CHECK(found);
  }
  CHECK(lines == 73 - 1);  // every line of the file but its comment
}

TEST_CASE("recomputing each block equals keeping its activations, bit for bit") {
  for (const auto& named : configs()) {
    // Not a structured binding: clang 14 does not let CAPTURE's lambda capture one.
    const std::string& name = named.first;
    const Config& c = named.second;
    CAPTURE(name);
    const Run kept = run(c, false), again = run(c, true);
    CHECK(kept.loss == again.loss);
    CHECK(kept.base_grad == again.base_grad);
    CHECK(kept.adapter_grad == again.adapter_grad);
  }
}

TEST_CASE("mixed-precision training on the synthetic corpus lowers the loss") {
  /* A 2-layer, 64-wide decoder (GQA 4/2) in fp32 compute from bf16 weights, fp32 master weights
   * and AdamW (lr 3e-3): 20 steps of 8 sequences of 32 tokens. The corpus's rule (next = 5 t + 3
   * mod 64, one token in 8 random) leaves a floor of about (1/8) ln 64 + H(7/8) ~ 0.9 nats from
   * ln 64 = 4.16 at the start; 20 steps get well below the start. LoRA (rank 8 on q and v) must
   * lower it too, less. Checked: the loss falls on average (the last 5 steps' mean below the
   * first 5 steps' by 25% full, 5% LoRA).                                                      */
  for (int lora : {0, 8}) {
    CAPTURE(lora);
    Shape s;
    s.hidden = 64;
    s.layers = 2;
    s.heads = 4;
    s.kv_heads = 2;
    s.head_dim = 16;
    s.ffn = 128;
    s.vocab = 64;
    s.lora_rank = lora;
    const Layout l = layout_of(s);
    std::vector<float> master(static_cast<std::size_t>(lora ? l.adapter_size : l.base_size));
    std::vector<float> base(static_cast<std::size_t>(l.base_size)), adapters(static_cast<std::size_t>(l.adapter_size));
    init_base(s, 11, base.data());
    init_adapters(s, 11, adapters.data());
    master = lora ? adapters : base;
    std::vector<float> m(master.size()), v(master.size()), grad(master.size());
    runtime::AdamW h;
    h.lr = lora ? 1e-2f : 3e-3f;
    const int batch = 8, seq = 32;
    std::vector<std::int32_t> tokens(batch * seq), targets(batch * seq);
    std::vector<float> losses;
    for (int step = 1; step <= 20; ++step) {
      // The 16-bit weights compute reads: the master rounded to bf16 and back.
      std::vector<float>& weights = lora ? adapters : base;
      for (std::size_t i = 0; i < master.size(); ++i) weights[i] = from_bf16(to_bf16(master[i]));
      for (int b = 0; b < batch; ++b)
        corpus_sequence(s.vocab, seq, static_cast<std::uint64_t>(step * batch + b), tokens.data() + b * seq,
                        targets.data() + b * seq);
      std::fill(grad.begin(), grad.end(), 0.0f);
      losses.push_back(loss_and_gradients<float>(s, base.data(), lora ? adapters.data() : nullptr, tokens.data(),
                                                 targets.data(), batch, seq, lora ? nullptr : grad.data(),
                                                 lora ? grad.data() : nullptr, false));
      runtime::adamw_step(master.data(), grad.data(), m.data(), v.data(), master.size(), h, step);
    }
    double first = 0, last = 0;
    for (int i = 0; i < 5; ++i) first += losses[static_cast<std::size_t>(i)] / 5, last += losses[15 + i] / 5.0;
    CAPTURE(first);
    CAPTURE(last);
    CHECK(first == doctest::Approx(std::log(64.0)).epsilon(0.15));
    CHECK(last < first * (lora ? 0.95 : 0.75));
  }
}
