#include "workload.hpp"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "common/strings.hpp"

namespace ftplan::calibrate {

std::vector<GemmShape> transformer_gemms(const model::ModelSpec& m, std::int64_t tokens) {
  const std::int64_t hd = m.head_dim_or_default();
  const std::int64_t q = static_cast<std::int64_t>(m.heads) * hd;
  const std::int64_t kv = static_cast<std::int64_t>(m.kv_heads_or_default()) * hd;
  std::int64_t ffn = m.ffn, ffn_tokens = tokens;
  if (m.is_moe()) {
    ffn = m.moe.expert_ffn > 0 ? m.moe.expert_ffn : m.ffn;
    ffn_tokens = std::max<std::int64_t>(1, tokens * m.moe.experts_per_token / m.moe.experts);
  }
  struct Linear {
    const char* name;
    std::int64_t in, out, t;
  };
  std::vector<Linear> linears = {{"qkv", m.hidden, q + 2 * kv, tokens},
                                 {"attn_out", q, m.hidden, tokens},
                                 {model::is_gated(m.ffn_kind) ? "mlp_gate_up" : "mlp_up", m.hidden, ffn, ffn_tokens},
                                 {"mlp_down", ffn, m.hidden, ffn_tokens}};
  if (m.has_lm_head() && m.vocab > 0) linears.push_back({"lm_head", m.hidden, m.vocab, tokens});
  std::vector<GemmShape> out;
  for (const auto& l : linears) {
    const std::string base = fmt::format("{}/{}", m.name, l.name);
    out.push_back({fmt::format("{}.fwd/t{}", base, tokens), l.t, l.out, l.in});
    out.push_back({fmt::format("{}.dgrad/t{}", base, tokens), l.t, l.in, l.out});
    out.push_back({fmt::format("{}.wgrad/t{}", base, tokens), l.in, l.out, l.t});
  }
  return out;
}

std::vector<GemmShape> unique_shapes(const std::vector<GemmShape>& shapes) {
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> seen;
  std::vector<GemmShape> out;
  for (const auto& s : shapes)
    if (seen.insert({s.m, s.n, s.k}).second) out.push_back(s);
  return out;
}

const hardware::GpuSpec* match_catalog_gpu(const hardware::Catalog& catalog, const std::string& device_name,
                                           double memory_bytes) {
  const std::string name = to_lower(device_name);
  // The model number: a letter-digit token such as h100, a100, h200, l40s, rtx 4090, mi300x, b200;
  // and the module generation (sxm2, sxm3, sxm4), which tells apart same-memory parts such as the
  // V100 SXM2 32GB (DGX-1) and V100 SXM3 32GB (DGX-2).
  static const std::regex model_re(R"(\b(?:rtx\s*)?([a-z]{0,3}\d{2,4}[a-z]?|sxm\d)\b)");
  std::set<std::string> tokens;
  for (auto it = std::sregex_iterator(name.begin(), name.end(), model_re); it != std::sregex_iterator(); ++it)
    tokens.insert((*it)[1].str());
  const bool pcie = name.find("pcie") != std::string::npos;
  const hardware::GpuSpec* best = nullptr;
  int best_score = 0;
  bool tie = false;
  for (const auto& g : catalog.gpus) {
    const std::string entry = to_lower(g.name + " " + g.display_name);
    int score = 0;
    for (const auto& t : tokens)
      if (std::regex_search(entry, std::regex("(^|[^a-z0-9])" + t + "([^a-z0-9]|$)"))) score += 10;
    if (score == 0) continue;
    if (memory_bytes > 0 && std::abs(g.memory_bytes - memory_bytes) > 0.1 * g.memory_bytes) continue;
    if (pcie == (g.form_factor == "pcie")) score += 2;
    if (score > best_score) {
      best = &g;
      best_score = score;
      tie = false;
    } else if (score == best_score) {
      tie = true;
    }
  }
  return tie ? nullptr : best;
}

}  // namespace ftplan::calibrate
