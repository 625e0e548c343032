// The draft scenario, the key-by-key reader of a mapping, and the scalar readers.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "common/strings.hpp"
#include "io/import/detail.hpp"

namespace ftplan::io::import {

namespace {
std::string place(const SourceLocation& w) {
  return w.line > 0 ? fmt::format("{}:{}:{}", w.file, w.line, w.column) : w.file;
}
}  // namespace

void Draft::set(Entry e) {
  for (auto& have : entries_) {
    if (have.key != e.key) continue;
    if (have.is_default || have.value == e.value) {
      if (have.is_default)
        have = std::move(e);
      else
        have.origin += "; also " + e.origin;
      return;
    }
    // Two files disagree: both places are named, the person chooses.
    const std::string what = e.key == "_gas"           ? "the gradient accumulation steps"
                             : e.key == "_train_batch" ? "the train batch size"
                                                       : e.key;
    diagnostics_->error(e.where, e.source_key,
                        fmt::format("sets {} to {}, but {} ({}) sets it to {}; make them agree", what, e.value,
                                    have.source_key, place(have.where), have.value));
    return;
  }
  entries_.push_back(std::move(e));
}

void Draft::set_default(std::string key, std::string value, std::string origin) {
  if (has(key)) return;
  Entry e;
  e.key = std::move(key);
  e.value = std::move(value);
  e.origin = std::move(origin);
  e.is_default = true;
  entries_.push_back(std::move(e));
}

void Draft::override_with(Entry e) {
  erase(e.key);
  entries_.push_back(std::move(e));
}

const Entry* Draft::get(std::string_view key) const {
  for (const auto& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

void Draft::erase(std::string_view key) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; }),
                 entries_.end());
}

Fields::Fields(Context& ctx, const Node& map, std::string file, std::string prefix, std::string format_name)
    : ctx_(&ctx), map_(&map), file_(std::move(file)), prefix_(std::move(prefix)), format_(std::move(format_name)) {}

const Node* Fields::take(std::string_view key) {
  // Each key is read once: a reader that takes a key first (a launcher's own meaning of a
  // TrainingArguments key) keeps the shared readers after it from reading it again.
  if (std::find(done_.begin(), done_.end(), key) != done_.end()) return nullptr;
  const Node* n = map_->find(key);
  if (n) {
    done_.emplace_back(key);
    ctx_->taken.emplace_back(file_, key_path(key));
  }
  return n;
}

void Fields::ignore(std::string_view key, std::string reason) {
  const Node* n = map_->find(key);
  if (!n || std::find(done_.begin(), done_.end(), key) != done_.end()) return;
  done_.emplace_back(key);
  ctx_->ignored.push_back({n->where, key_path(key), std::move(reason)});
}

void Fields::ignore_matching(std::string_view prefix, const std::string& reason) {
  for (const auto& [k, v] : map_->items)
    if (k.rfind(prefix, 0) == 0) ignore(k, reason);
}

void Fields::finish() {
  for (const auto& [k, v] : map_->items) {
    if (std::find(done_.begin(), done_.end(), k) != done_.end()) continue;
    done_.push_back(k);
    ctx_->ignored.push_back({v.where, key_path(k), fmt::format("not a {} key ftplan knows", format_)});
  }
}

Entry Fields::entry(std::string scenario_key, std::string value, std::string_view key, const Node& node,
                    std::string note) const {
  Entry e;
  e.key = std::move(scenario_key);
  e.value = std::move(value);
  e.source_key = key_path(key);
  e.where = node.where;
  e.origin = fmt::format("{}: {}", file_, e.source_key);
  if (node.is_scalar()) e.origin += " " + node.text;
  if (!note.empty()) e.origin += " (" + note + ")";
  return e;
}

void Fields::error(const Node& node, std::string_view key, std::string message) {
  ctx_->diagnostics.error(node.where, key_path(key), std::move(message));
}

void Fields::not_modelled(std::string_view key, const Node& node, std::string why) {
  ctx_->ignored.push_back({node.where, key_path(key), "not modelled yet: " + why});
}

void Fields::not_modelled_if_true(std::string_view key, std::string why) {
  if (const Node* n = take(key))
    if (const auto b = as_bool(*this, key, *n); b && *b) not_modelled(key, *n, std::move(why));
}

bool Fields::replaced(std::string_view key, const Node& node, const std::string& scenario_key) {
  if (!ctx_->overridden.count(scenario_key)) return false;
  ctx_->ignored.push_back({node.where, key_path(key), fmt::format("replaced by the command line's {}", scenario_key)});
  return true;
}

namespace {
bool from_resharding(const Entry* e) {
  return e && e->value == "full_shard" && e->source_key.size() >= 21 &&
         e->source_key.compare(e->source_key.size() - 21, 21, "reshard_after_forward") == 0;
}
}  // namespace

void Fields::set_sharding(const std::string& sharding, std::string_view key, const Node& node, bool resharding,
                          std::string note) {
  const Entry* have = ctx_->draft.get("plan.parallel.fsdp");
  // FSDP2's reshard_after_forward true within replica groups is HSDP itself (fully_shard on a 2-D
  // mesh): replication and resharding say one plan from two keys. Nothing else merges: FULL_SHARD
  // and HYBRID_SHARD named as FSDP1 strategies in two files disagree.
  if (resharding && sharding == "full_shard" && have && have->value == "hybrid_shard") return;
  if (sharding == "hybrid_shard" && from_resharding(have)) {
    note = note.empty() ? "with " + have->source_key + " true" : note + ", with " + have->source_key + " true";
    ctx_->draft.erase("plan.parallel.fsdp");
  }
  set("plan.parallel.fsdp", sharding, key, node, std::move(note));
}

void Fields::take_int(std::string_view key, std::string scenario_key, std::string note) {
  if (const Node* n = take(key))
    if (const auto v = as_int(*this, key, *n))
      set(std::move(scenario_key), std::to_string(*v), key, *n, std::move(note));
}

void Fields::take_bool(std::string_view key, std::string scenario_key, std::string if_true, std::string if_false) {
  if (const Node* n = take(key))
    if (const auto b = as_bool(*this, key, *n); b && !(*b ? if_true : if_false).empty())
      set(std::move(scenario_key), *b ? std::move(if_true) : std::move(if_false), key, *n);
}

void Fields::set_cpu_offload(std::string_view key, const Node& node, const std::string& note) {
  for (const char* k :
       {"plan.offload.params", "plan.offload.gradients", "plan.offload.optimizer", "plan.offload.optimizer_step"})
    set(k, "cpu", key, node, note);
}

std::filesystem::path resolve_named_file(const std::filesystem::path& named, const std::filesystem::path& naming_file) {
  std::error_code ec;
  if (named.is_absolute() || std::filesystem::exists(named, ec)) return named;
  for (std::filesystem::path dir = naming_file.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / named, ec)) return dir / named;
    if (dir == dir.parent_path()) break;
  }
  return naming_file.parent_path() / named;  // does not exist: the error names this place
}

std::string fsdp_sharding_of(const std::string& t, bool takes_bool) {
  if (takes_bool && (t == "true" || t == "True")) return "full_shard";
  if (takes_bool && (t == "false" || t == "False")) return "shard_grad_op";
  if (t == "1" || t == "FULL_SHARD") return "full_shard";
  if (t == "2" || t == "SHARD_GRAD_OP") return "shard_grad_op";
  if (t == "3" || t == "NO_SHARD") return "no_shard";
  if (t == "4" || t == "HYBRID_SHARD") return "hybrid_shard";
  return {};
}

bool is_auto(const Node& n) { return n.is_scalar() && n.text == "auto"; }

std::optional<bool> as_bool(Fields& f, std::string_view key, const Node& n) {
  // null (an empty value, None) is false to every framework here: they test `if cfg.key:`.
  if (n.is_null()) return false;
  if (n.is_scalar()) {
    const std::string t = n.text;
    if (t == "true" || t == "True" || t == "TRUE") return true;
    if (t == "false" || t == "False" || t == "FALSE") return false;
  }
  f.error(n, key, fmt::format("expected true or false, got {}", n.is_scalar() ? "'" + n.text + "'" : "a structure"));
  return std::nullopt;
}

std::optional<long long> as_int(Fields& f, std::string_view key, const Node& n) {
  if (n.is_null()) return std::nullopt;  // None: the framework's default, as not given
  if (n.is_scalar() && !n.quoted) {
    // PyYAML (YAML 1.1), which the launchers read YAML with, takes 500_000 as an integer.
    std::string t = n.text;
    if (t.find('_') != std::string::npos && t.find_first_not_of("0123456789_") == std::string::npos && t.front() != '_')
      t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    long long v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec == std::errc() && p == t.data() + t.size()) return v;
    // DeepSpeed configs write sizes as 1e9, 5e8.
    double d = 0;
    auto [q, ec2] = std::from_chars(t.data(), t.data() + t.size(), d);
    if (ec2 == std::errc() && q == t.data() + t.size() && std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18)
      return static_cast<long long>(d);
  }
  f.error(n, key, fmt::format("expected an integer, got {}", n.is_scalar() ? "'" + n.text + "'" : "a structure"));
  return std::nullopt;
}

std::optional<std::string> as_string(Fields& f, std::string_view key, const Node& n) {
  if (n.is_null()) return std::nullopt;  // None: the framework's default, as not given
  if (n.is_scalar()) return n.text;
  f.error(n, key, "expected text, got a structure");
  return std::nullopt;
}

std::string yaml_scalar(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (plain) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string yaml_flow_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& i : items) out += (out.size() > 1 ? ", " : "") + yaml_scalar(i);
  return out + "]";
}

std::string zoo_name_for_hf_id(const std::string& id, const model::Zoo& zoo) {
  // The repository name, lowercased, then without the suffixes of fine-tuned or converted
  // variants, which share the base model's architecture.
  std::string name = id.substr(id.rfind('/') == std::string::npos ? 0 : id.rfind('/') + 1);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::vector<std::string> suffixes = {"-instruct", "-hf",   "-chat", "-base", "-it",   "-v0.1",
                                                    "-v0.2",     "-v0.3", "-4k",   "-128k", "-fp16", "-bf16",
                                                    "-bnb-4bit", "-gptq", "-awq",  "-int4", "-int8"};
  for (int round = 0; round < 4; ++round) {
    for (const std::string& candidate : {name, name.rfind("meta-", 0) == 0 ? name.substr(5) : name})
      if (zoo.find(candidate)) return candidate;
    for (const auto& s : suffixes)
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0)
        name.resize(name.size() - s.size());
  }
  return {};
}

void set_model(Fields& f, std::string_view key, const Node& n, const std::string& name, const std::string& zoo_name) {
  if (f.replaced(key, n, "model")) return;
  if (!f.ctx().model_config.empty()) {
    f.set("model", fmt::format("{{hf_config: {}, name: {}}}", yaml_scalar(f.ctx().model_config), yaml_scalar(name)),
          key, n, "its config.json from --model-config");
    return;
  }
  if (zoo_name.empty()) {
    f.error(n, key,
            fmt::format("no zoo model for '{}'{}: give --model NAME (ftplan zoo list), or its config.json with "
                        "--model-config path/to/config.json",
                        name, did_you_mean(name, f.ctx().zoo.names())));
    return;
  }
  f.set("model", zoo_name, key, n);
}

void set_model_from_hf_id(Fields& f, std::string_view key, const Node& n) {
  const auto id = as_string(f, key, n);
  if (!id || id->empty()) return;
  if (f.ctx().overridden.count("model")) {  // --model names another model: nothing of this id applies
    f.replaced(key, n, "model");
    return;
  }
  set_model(f, key, n, *id, zoo_name_for_hf_id(*id, f.ctx().zoo));
  // A GPTQ or AWQ checkpoint (its config.json has quantization_config): 4-bit weights in groups,
  // which the model id says by convention (TheBloke/..-GPTQ, Qwen/..-Int4, ..-AWQ).
  std::string lower = *id;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* tag : {"gptq", "awq", "-int4"})
    if (lower.find(tag) != std::string::npos) {
      f.ctx().draft.set(f.entry("_prequantized", tag[0] == '-' ? "int4" : tag, key, n));
      break;
    }
}

}  // namespace ftplan::io::import
