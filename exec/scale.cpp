#include "scale.hpp"
#include "common/error.hpp"

#include <algorithm>
#include <exception>
#include <stdexcept>

#include <fmt/format.h>

namespace ftplan::exec {

Scale parse_scale(const std::string& text) {
  Scale s;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    at = comma + 1;
    if (part.empty()) continue;
    const auto eq = part.find('=');
    if (eq == std::string::npos) throw UsageError(fmt::format("--scale: '{}' is not KEY=VALUE", part));
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    long long v = 0;
    std::size_t used = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size())
      throw UsageError(fmt::format("--scale: {} wants a whole number, not '{}'", key, value));
    if (v < 1 || v > (1 << 20)) throw UsageError(fmt::format("--scale: {}={} is out of range (1..1048576)", key, v));
    if (key == "layers")
      s.layers = static_cast<int>(v);
    else if (key == "hidden")
      s.hidden = v;
    else if (key == "vocab")
      s.vocab = v;
    else if (key == "seq")
      s.seq_len = static_cast<int>(v);
    else
      throw UsageError(fmt::format("--scale: unknown key '{}' (layers, hidden, vocab, seq)", key));
  }
  return s;
}

model::ModelSpec scaled(const model::ModelSpec& m, const Scale& s) {
  model::ModelSpec out = m;
  if (s.layers > 0) out.layers = s.layers;
  if (s.vocab > 0) out.vocab = s.vocab;
  if (s.hidden > 0 && m.hidden > 0) {
    const int head_dim = m.head_dim_or_default();
    const double r = static_cast<double>(s.hidden) / static_cast<double>(m.hidden);
    out.hidden = s.hidden;
    out.heads = std::max(1, static_cast<int>(s.hidden / std::max(1, head_dim)));
    out.head_dim = static_cast<int>(s.hidden / out.heads);
    const int kv = m.kv_heads_or_default();
    out.kv_heads = std::max(1, out.heads * kv / std::max(1, m.heads));
    while (out.heads % out.kv_heads != 0) --out.kv_heads;
    out.ffn = std::max<std::int64_t>(1, std::llround(static_cast<double>(m.ffn) * r));
  }
  out.name = m.name + " (scaled)";
  return out;
}

std::string scale_note(const model::ModelSpec& from, const model::ModelSpec& to, const Scale& s) {
  return fmt::format(
      "scaled {} from {} layers x hidden {} (ffn {}, vocab {}) to {} x {} (ffn {}, vocab {}){}: kept the plan's "
      "placements, "
      "precision, method, micro-batch, accumulation, head dimension and the heads:kv-heads and ffn:hidden ratios, so "
      "the step has the same ops, streams, dependencies and tiers; lost: absolute sizes, so compute (~hidden^2) and "
      "transfers (~hidden) stand in a different balance than in the full model, and the comparison checks the "
      "simulator's mechanisms, not the full model's step time",
      from.name, from.layers, from.hidden, from.ffn, from.vocab, to.layers, to.hidden, to.ffn, to.vocab,
      s.seq_len > 0 ? fmt::format(", sequence {}", s.seq_len) : std::string());
}

}  // namespace ftplan::exec
