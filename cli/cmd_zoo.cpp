// `ftplan zoo list` and `ftplan zoo show`.
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "common/error.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "io/model_io.hpp"
#include "table.hpp"

namespace ftplan::cli {
namespace {

using model::ModelSpec;
using nlohmann::ordered_json;

std::string heads_text(const ModelSpec& m) {
  return m.kv_heads_or_default() == m.heads ? fmt::format("{}", m.heads)
                                            : fmt::format("{}/{}", m.heads, m.kv_heads_or_default());
}

int zoo_list(App& app) {
  const auto& zoo = app.zoo();
  if (app.format() == Format::json) {
    ordered_json doc;
    doc["schema_version"] = kOutputSchemaVersion;
    doc["models"] = ordered_json::array();
    for (const auto& m : zoo.models()) {
      const auto c = model::count_params(m);
      doc["models"].push_back({{"name", m.name},
                               {"display_name", m.display_name},
                               {"architecture", model::to_string(m.architecture)},
                               {"params", c.total},
                               {"active_params", c.active_total},
                               {"layers", m.layers},
                               {"hidden", m.hidden},
                               {"heads", m.heads},
                               {"kv_heads", m.kv_heads_or_default()},
                               {"vocab", m.vocab},
                               {"max_context", m.max_context},
                               {"experts", m.moe.experts}});
    }
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  Table t;
  using A = Table::Align;
  t.columns({{"name", A::left},
             {"params", A::right},
             {"active", A::right},
             {"layers", A::right},
             {"hidden", A::right},
             {"heads/kv", A::right},
             {"vocab", A::right},
             {"context", A::right},
             {"kind", A::left}});
  for (const auto& m : zoo.models()) {
    const auto c = model::count_params(m);
    std::string kind = model::to_string(m.architecture);
    if (m.is_moe()) kind += fmt::format(", MoE {}x top-{}", m.moe.experts, m.moe.experts_per_token);
    t.row({m.name, ftplan::format_count(static_cast<double>(c.total)),
           m.is_moe() ? ftplan::format_count(static_cast<double>(c.active_total)) : "", std::to_string(m.layers),
           std::to_string(m.hidden), heads_text(m), std::to_string(m.vocab), std::to_string(m.max_context), kind});
  }
  fmt::print("{}", app.format() == Format::csv ? t.csv() : t.text());
  if (app.format() == Format::table)
    fmt::print("{} models in {}\n", zoo.models().size(), (app.zoo_dir() / "models").string());
  return 0;
}

ModelSpec resolve_model(App& app, const std::string& what) {
  const std::filesystem::path p(what);
  if (p.extension() == ".json") return io::load_hf_config(p);
  if (p.extension() == ".yaml" || p.extension() == ".yml") return io::load_model_file(p);
  if (const auto* m = app.zoo().find(what)) return *m;
  throw InputError({}, "",
                   fmt::format("no model '{}' in the zoo{}; `ftplan zoo list` shows them", what,
                               did_you_mean(what, app.zoo().names())));
}

int zoo_show(App& app, const std::string& what, std::int64_t seq_len) {
  const ModelSpec m = resolve_model(app, what);
  const auto c = model::count_params(m);
  const auto f = model::flops_per_token(m, seq_len);
  if (app.format() == Format::json) {
    ordered_json doc;
    doc["schema_version"] = kOutputSchemaVersion;
    doc["name"] = m.name;
    doc["architecture"] = {{"kind", model::to_string(m.architecture)},
                           {"hidden", m.hidden},
                           {"layers", m.layers},
                           {"encoder_layers", m.encoder_layers},
                           {"heads", m.heads},
                           {"kv_heads", m.kv_heads_or_default()},
                           {"head_dim", m.head_dim_or_default()},
                           {"ffn", m.ffn},
                           {"ffn_kind", model::to_string(m.ffn_kind)},
                           {"vocab", m.vocab},
                           {"tied_embeddings", m.tied_embeddings},
                           {"norm", model::to_string(m.norm)},
                           {"bias", model::to_string(m.bias)},
                           {"positional", model::to_string(m.positional)},
                           {"max_context", m.max_context},
                           {"experts", m.moe.experts},
                           {"experts_per_token", m.moe.experts_per_token}};
    doc["params"] = {{"embedding", c.embedding},
                     {"attention", c.attention},
                     {"mlp", c.mlp},
                     {"experts", c.experts},
                     {"router", c.router},
                     {"norms", c.norms},
                     {"head", c.head},
                     {"other", c.other},
                     {"total", c.total},
                     {"active", c.active_total},
                     {"active_matmul", c.active_matmul}};
    doc["flops_per_token"] = {{"seq_len", seq_len},
                              {"forward", f.forward},
                              {"backward", f.backward},
                              {"training", f.training()},
                              {"attention_forward", f.attention_forward}};
    if (m.published.params > 0)
      doc["published"] = {{"params", m.published.params}, {"exact", m.published.exact}, {"source", m.published.source}};
    fmt::print("{}\n", doc.dump(2));
    return 0;
  }
  fmt::print("{} ({})\n\n", m.display_name, model::to_string(m.architecture));
  Table a;
  using A = Table::Align;
  a.columns({{"architecture", A::left}, {"value", A::left}});
  a.row({"hidden", std::to_string(m.hidden)});
  a.row({"layers", m.architecture == model::Architecture::encoder_decoder
                       ? fmt::format("{} decoder + {} encoder", m.layers, m.encoder_layers)
                       : std::to_string(m.layers)});
  a.row({"heads / kv heads / head dim",
         fmt::format("{} / {} / {}", m.heads, m.kv_heads_or_default(), m.head_dim_or_default())});
  a.row({"ffn", fmt::format("{} ({})", m.ffn, model::to_string(m.ffn_kind))});
  if (m.is_moe())
    a.row({"experts", fmt::format("{} routed, top-{}, {} shared, expert ffn {}", m.moe.experts, m.moe.experts_per_token,
                                  m.moe.shared_experts, m.moe.expert_ffn > 0 ? m.moe.expert_ffn : m.ffn)});
  a.row({"vocab", fmt::format("{}{}", m.vocab, m.tied_embeddings ? " (tied head)" : "")});
  a.row({"norm", fmt::format("{} x{} per layer", model::to_string(m.norm), m.norms_per_layer)});
  a.row({"bias", model::to_string(m.bias)});
  a.row({"positions", fmt::format("{}, max context {}", model::to_string(m.positional), m.max_context)});
  if (m.attention.sliding_window > 0)
    a.row({"sliding window",
           m.attention.local_every > 0
               ? fmt::format("{} tokens on every {}th layer", m.attention.sliding_window, m.attention.local_every)
               : fmt::format("{} tokens on every layer", m.attention.sliding_window)});
  if (m.parallel_residual) a.row({"residual", "parallel attention + MLP"});
  fmt::print("{}\n", a.text());

  Table p;
  p.columns({{"component", A::left}, {"params", A::right}, {"share", A::right}});
  const auto add = [&](const char* name, std::int64_t n) {
    if (n == 0) return;
    p.row({name, fmt::format("{:L}", n),
           fmt::format("{:.1f}%", 100.0 * static_cast<double>(n) / static_cast<double>(c.total))});
  };
  add("embeddings", c.embedding);
  add("attention", c.attention);
  add("mlp", c.mlp);
  add("experts", c.experts);
  add("router", c.router);
  add("norms", c.norms);
  add("head", c.head);
  add("position tables", c.other);
  p.row({"total", fmt::format("{} ({})", c.total, ftplan::format_count(static_cast<double>(c.total))), "100.0%"});
  if (m.is_moe())
    p.row({"active per token",
           fmt::format("{} ({})", c.active_total, ftplan::format_count(static_cast<double>(c.active_total))), ""});
  fmt::print("{}\n", p.text());
  fmt::print("training FLOPs per token at seq {}: {:.3e} (forward {:.3e}, of which attention {:.3e})\n", seq_len,
             f.training(), f.forward, f.attention_forward);
  if (m.published.params > 0)
    fmt::print("published: {} params ({}) — {}\n", m.published.params, m.published.exact ? "exact" : "rounded",
               m.published.source);
  return 0;
}

}  // namespace

int cmd_zoo(const std::vector<std::string>& argv) {
  auto options = common_options();
  options.push_back({"seq", true, "sequence length for FLOPs per token (zoo show; default 4096)"});
  const Args args(argv, 2, options);
  App app(args);
  const auto& pos = args.positionals();
  if (pos.empty() || (pos[0] != "list" && pos[0] != "show"))
    throw UsageError("usage: ftplan zoo list | ftplan zoo show NAME|FILE [--seq N]");
  if (pos[0] == "list") {
    if (pos.size() != 1) throw UsageError("zoo list takes no arguments");
    return zoo_list(app);
  }
  if (pos.size() != 2) throw UsageError("usage: ftplan zoo show NAME|FILE");
  std::int64_t seq = 4096;
  if (auto s = args.value("seq")) {
    try {
      seq = std::stoll(*s);
    } catch (const std::exception&) {
      seq = 0;
    }
    if (seq <= 0) throw UsageError("--seq takes a positive whole number");
  }
  return zoo_show(app, pos[1], seq);
}

}  // namespace ftplan::cli
